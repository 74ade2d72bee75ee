//! Durability through the server: acknowledged writes survive SIGKILL in every `appendfsync` mode;
//! SHUTDOWN, SIGTERM and SIGINT stop the server cleanly (exit 0) with every write kept.

mod common;

use common::Server;
use std::collections::HashMap;
use std::time::Duration;

#[test]
fn acknowledged_writes_survive_sigkill_under_appendfsync_always() {
    acknowledged_writes_survive_sigkill("always");
}

/// SIGKILL is a crash of the process, not of the machine: under `everysec` and `no` every
/// acknowledged write has left the process (the connection flushes the WAL before it answers).
#[test]
fn acknowledged_writes_survive_sigkill_under_everysec_and_no() {
    acknowledged_writes_survive_sigkill("everysec");
    acknowledged_writes_survive_sigkill("no");
}

fn acknowledged_writes_survive_sigkill(appendfsync: &str) {
    let s = Server::start(&["--appendfsync", appendfsync]);
    const THREADS: usize = 4;
    const EACH: usize = 150;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let mut c = s.client();
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..EACH {
                    let k = format!("k{t}-{i}");
                    let _: () = redis::cmd("SET").arg(&k).arg(i).query(&mut c).unwrap();
                    let _: i64 = redis::cmd("HSET")
                        .arg(format!("h{t}"))
                        .arg(&k)
                        .arg(i)
                        .query(&mut c)
                        .unwrap();
                    acked.push(k);
                }
                // A pipelined batch: every reply arrives after its fsync.
                let mut p = redis::pipe();
                for i in 0..50 {
                    p.cmd("INCR").arg(format!("ctr{t}")).ignore();
                    p.cmd("ZADD")
                        .arg("z")
                        .arg(i)
                        .arg(format!("m{t}-{i}"))
                        .ignore();
                }
                let _: () = p.query(&mut c).unwrap();
                acked
            })
        })
        .collect();
    let acked: Vec<Vec<String>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let mut s = s;
    s.kill();
    let s = s.restart();
    let mut c = s.client();
    for (t, keys) in acked.iter().enumerate() {
        for (i, k) in keys.iter().enumerate() {
            let v: Option<i64> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
            assert_eq!(
                v,
                Some(i as i64),
                "{k} lost under appendfsync {appendfsync}"
            );
        }
        let h: HashMap<String, i64> = redis::cmd("HGETALL")
            .arg(format!("h{t}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(h.len(), EACH);
        let ctr: i64 = redis::cmd("GET")
            .arg(format!("ctr{t}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(ctr, 50);
    }
    let card: i64 = redis::cmd("ZCARD").arg("z").query(&mut c).unwrap();
    assert_eq!(card, (THREADS * 50) as i64);
}

fn write_some(s: &Server, prefix: &str) {
    let mut c = s.client();
    for i in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("{prefix}{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
}

fn count(s: &Server, pattern: &str) -> usize {
    let mut c = s.client();
    let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut c).unwrap();
    keys.len()
}

#[test]
fn shutdown_command_and_signals_stop_cleanly_and_keep_data() {
    let mut s = Server::start(&["--appendfsync", "no"]);
    write_some(&s, "a");
    // SHUTDOWN: no reply, the connection closes, the process exits 0.
    let mut t = s.raw();
    use std::io::{Read, Write};
    t.write_all(b"SHUTDOWN\r\n").unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(t.read(&mut buf).unwrap_or(0), 0);
    assert!(s.wait(Duration::from_secs(20)).success());
    let mut s = s.restart();
    assert_eq!(count(&s, "a*"), 100);
    write_some(&s, "b");
    assert!(s
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(20))
        .success());
    let mut s = s.restart();
    assert_eq!(count(&s, "b*"), 100);
    write_some(&s, "c");
    // An idle client stays connected through SIGINT: shutdown must not wait on it.
    let _idle = s.raw();
    assert!(s
        .signal_and_wait(libc::SIGINT, Duration::from_secs(20))
        .success());
    let s = s.restart();
    assert_eq!(count(&s, "*"), 300);
}

/// The expiry sweep runs only once the server knows the expiry index may hold entries: it must
/// know that at open for keys written before a restart, and from the first expiry written.
#[test]
fn the_sweep_expires_keys_written_before_a_restart_and_after_it() {
    let expired = |s: &Server| -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query(&mut s.client())
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("expired_keys:"))
            .expect("INFO stats has expired_keys")
            .trim()
            .parse()
            .unwrap()
    };
    let wait_for = |s: &Server, n: u64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while expired(s) < n {
            assert!(
                std::time::Instant::now() < deadline,
                "the sweep expired {} keys of {n}",
                expired(s)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let set_px = |s: &Server, key: &str, ms: u64| {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("v")
            .arg("PX")
            .arg(ms)
            .query(&mut s.client())
            .unwrap();
    };
    let mut s = Server::start(&["--appendfsync", "always"]);
    set_px(&s, "before", 400);
    assert!(s
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(20))
        .success());
    // Nobody reads it after the restart: only the sweep can expire it.
    let s = s.restart();
    wait_for(&s, 1);
    let mut s = s;
    assert!(s
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(20))
        .success());
    // A fresh start with an empty expiry index, then a first expiry.
    let s = s.restart();
    set_px(&s, "after", 100);
    wait_for(&s, 1);
}
