//! Blocking list and sorted-set commands through the server: timeouts, service by a push from
//! another connection in arrival order, BLMOVE chains, and what EXEC does with them.

mod common;

use common::{send_raw, Server};
use redis::Value;
use std::time::{Duration, Instant};

fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Waits until INFO reports `n` blocked clients.
fn wait_blocked(c: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = q(c, &["INFO", "clients"]);
        if info.contains(&format!("blocked_clients:{n}\r")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {n} blocked clients: {info}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_blocking_pop_times_out_with_null() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let started = Instant::now();
    let r: Value = q(&mut c, &["BLPOP", "empty", "0.2"]);
    assert_eq!(r, Value::Nil);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    let r: Value = q(&mut c, &["BLMOVE", "empty", "dst", "LEFT", "RIGHT", "0.05"]);
    assert_eq!(r, Value::Nil);
    // With elements present it answers at once, like LPOP.
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b"]);
    let r: (String, String) = q(&mut c, &["BRPOP", "empty", "l", "5"]);
    assert_eq!(r, ("l".into(), "b".into()));
    assert!(q::<String>(&mut c, &["PING"]) == "PONG");
}

#[test]
fn pushes_serve_blocked_clients_in_arrival_order() {
    let s = Server::start(&[]);
    let mut ctl = s.client();
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let mut c = s.client();
            let t = std::thread::spawn(move || {
                q::<(String, String)>(&mut c, &["BLPOP", "q", "other", "10"])
            });
            // Block one at a time so arrival order is known.
            wait_blocked(&mut ctl, i + 1);
            t
        })
        .collect();
    let n: i64 = q(&mut ctl, &["RPUSH", "q", "x0", "x1", "x2", "x3"]);
    assert_eq!(
        n, 4,
        "the push reports the length before blocked clients pop"
    );
    let got: Vec<(String, String)> = waiters.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        got,
        vec![
            ("q".into(), "x0".into()),
            ("q".into(), "x1".into()),
            ("q".into(), "x2".into())
        ]
    );
    assert_eq!(
        q::<Vec<String>>(&mut ctl, &["LRANGE", "q", "0", "-1"]),
        vec!["x3"]
    );
    wait_blocked(&mut ctl, 0);
}

#[test]
fn blmove_chains_wake_the_next_list() {
    let s = Server::start(&[]);
    let mut ctl = s.client();
    let mut c1 = s.client();
    let first = std::thread::spawn(move || {
        q::<String>(&mut c1, &["BLMOVE", "a", "b", "LEFT", "LEFT", "10"])
    });
    wait_blocked(&mut ctl, 1);
    let mut c2 = s.client();
    let second = std::thread::spawn(move || q::<(String, String)>(&mut c2, &["BLPOP", "b", "10"]));
    wait_blocked(&mut ctl, 2);
    let _: i64 = q(&mut ctl, &["LPUSH", "a", "v"]);
    assert_eq!(first.join().unwrap(), "v");
    assert_eq!(second.join().unwrap(), ("b".into(), "v".into()));
    assert_eq!(q::<i64>(&mut ctl, &["EXISTS", "a", "b"]), 0);
}

#[test]
fn a_blocked_client_keeps_its_pipeline_order_and_can_leave() {
    let s = Server::start(&[]);
    let mut ctl = s.client();
    let mut t = s.raw();
    // The PING after the BLPOP is answered only once the BLPOP is.
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    use std::io::{Read, Write};
    t.write_all(b"SET x 1\r\nBLPOP bl 0\r\nPING\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = t.read(&mut buf).unwrap();
    assert_eq!(
        &buf[..n],
        b"+OK\r\n",
        "replies before the blocked command go out"
    );
    wait_blocked(&mut ctl, 1);
    let _: i64 = q(&mut ctl, &["LPUSH", "bl", "v"]);
    let rest = send_raw(&mut t, b"");
    assert_eq!(rest, b"*2\r\n$2\r\nbl\r\n$1\r\nv\r\n+PONG\r\n");
    // A client that leaves while blocked takes no element.
    let mut gone = s.raw();
    gone.write_all(b"BLPOP bl2 0\r\n").unwrap();
    wait_blocked(&mut ctl, 1);
    drop(gone);
    wait_blocked(&mut ctl, 0);
    let _: i64 = q(&mut ctl, &["LPUSH", "bl2", "kept"]);
    assert_eq!(q::<i64>(&mut ctl, &["LLEN", "bl2"]), 1);
}

#[test]
fn blocking_commands_inside_exec_do_not_block() {
    let s = Server::start(&[]);
    let mut t = s.raw();
    let reply = send_raw(
        &mut t,
        b"MULTI\r\nBLPOP nothing 0\r\nBZPOPMIN nothing 0\r\nEXEC\r\n",
    );
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n*-1\r\n*-1\r\n"
    );
}

#[test]
fn bzpopmin_is_served_by_zadd() {
    let s = Server::start(&[]);
    let mut ctl = s.client();
    let mut c = s.client();
    let t =
        std::thread::spawn(move || q::<(String, String, f64)>(&mut c, &["BZPOPMIN", "z", "10"]));
    wait_blocked(&mut ctl, 1);
    let _: i64 = q(&mut ctl, &["ZADD", "z", "2", "b", "1", "a"]);
    assert_eq!(t.join().unwrap(), ("z".into(), "a".into(), 1.0));
    let unblocked = {
        let mut c = s.client();
        let id: i64 = q(&mut c, &["CLIENT", "ID"]);
        let t = std::thread::spawn(move || q::<Value>(&mut c, &["BLPOP", "never", "0"]));
        wait_blocked(&mut ctl, 1);
        assert_eq!(
            q::<i64>(&mut ctl, &["CLIENT", "UNBLOCK", &id.to_string()]),
            1
        );
        t.join().unwrap()
    };
    assert_eq!(unblocked, Value::Nil);
}
