//! Redis's own tools against the server: redis-cli and redis-benchmark (Debian redis-tools).
//! A missing tool skips the test with a message, or fails it when `CI` is set.

mod common;

use common::{tool, Server};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn redis_cli_talks_to_the_server() {
    let Some(cli) = tool("redis-cli") else { return };
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run = |args: &[&str]| {
        let out = Command::new(&cli)
            .args(["-h", "127.0.0.1", "-p", &port])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli");
        assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(run(&["PING"]), "PONG");
    assert_eq!(run(&["SET", "greeting", "hello world"]), "OK");
    assert_eq!(run(&["GET", "greeting"]), "hello world");
    assert_eq!(run(&["HSET", "h", "a", "1", "b", "2"]), "2");
    assert_eq!(run(&["HGETALL", "h"]), "a\n1\nb\n2");
    assert_eq!(run(&["DBSIZE"]), "2");
    assert!(run(&["INFO", "server"]).contains("redis_version:"));
    assert!(run(&["NOSUCHCMD"]).contains("ERR unknown command 'NOSUCHCMD'"));
    // A session over stdin, as an operator pipes commands.
    let mut child = Command::new(&cli)
        .args(["-h", "127.0.0.1", "-p", &port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"INCR n\nINCR n\nGET n\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1\n2\n2");
}

#[test]
fn redis_benchmark_runs_pipelined_against_the_server() {
    let Some(bench) = tool("redis-benchmark") else {
        return;
    };
    let s = Server::start(&[]);
    let out = Command::new(&bench)
        .args(["-h", "127.0.0.1", "-p", &s.port.to_string()])
        .args([
            "-q", "-n", "20000", "-t", "set,get", "-P", "16", "-r", "10000",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for test in ["SET", "GET"] {
        let line = text
            .split(['\r', '\n'])
            .find(|l| l.starts_with(&format!("{test}: ")) && l.contains("requests per second"))
            .unwrap_or_else(|| panic!("no {test} result in:\n{text}"));
        let rps: f64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("bad line {line}"));
        assert!(rps > 0.0, "{line}");
    }
    let mut c = s.client();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert!(n > 1000, "redis-benchmark wrote only {n} keys");
    std::thread::sleep(Duration::from_millis(10));
}
