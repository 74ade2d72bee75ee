//! MULTI/EXEC/DISCARD/WATCH through the server: Redis's semantics, optimistic locking under
//! contention, and atomicity across a SIGKILL (every queued write of an EXEC survives, or none).

mod common;

use common::{send_raw, Server};
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

#[test]
fn exec_runs_the_queue_and_queue_errors_abort_it() {
    let s = Server::start(&[]);
    let mut t = s.raw();
    let reply = send_raw(
        &mut t,
        b"MULTI\r\nSET a 1\r\nINCR a\r\nLPUSH a x\r\nGET a\r\nEXEC\r\n",
    );
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n+OK\r\n:2\r\n\
         -WRONGTYPE Operation against a key holding the wrong kind of value\r\n$1\r\n2\r\n"
    );
    let reply = send_raw(
        &mut t,
        b"MULTI\r\nSET b 1\r\nNOSUCHCMD\r\nGET\r\nEXEC\r\nGET b\r\n",
    );
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.starts_with("+OK\r\n+QUEUED\r\n-ERR unknown command"),
        "{text}"
    );
    assert!(
        text.contains("-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n"),
        "{text}"
    );
    let reply = send_raw(
        &mut t,
        b"EXEC\r\nDISCARD\r\nMULTI\r\nMULTI\r\nWATCH x\r\nSET c 1\r\nDISCARD\r\nGET c\r\n",
    );
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n+OK\r\n\
         -ERR MULTI calls can not be nested\r\n-ERR WATCH inside MULTI is not allowed\r\n\
         +QUEUED\r\n+OK\r\n$-1\r\n"
    );
    // A transaction's reads see its own writes; SELECT inside applies to what follows.
    let reply = send_raw(
        &mut t,
        b"MULTI\r\nSELECT 3\r\nSET d 9\r\nGET d\r\nSELECT 0\r\nGET d\r\nEXEC\r\n",
    );
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.ends_with("*5\r\n+OK\r\n+OK\r\n$1\r\n9\r\n+OK\r\n$-1\r\n"),
        "{text}"
    );
}

#[test]
fn watch_aborts_exec_when_a_watched_key_changes() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let mut other = s.client();
    let _: () = q(&mut c, &["SET", "w", "1"]);
    let _: () = q(&mut c, &["WATCH", "w", "untouched"]);
    let _: () = q(&mut other, &["SET", "w", "2"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: Value = q(&mut c, &["SET", "w", "3"]);
    let r: Value = q(&mut c, &["EXEC"]);
    assert_eq!(r, Value::Nil, "a modified watched key aborts EXEC");
    assert_eq!(q::<String>(&mut c, &["GET", "w"]), "2");
    // EXEC forgot the WATCH: the next transaction runs.
    let _: () = q(&mut c, &["MULTI"]);
    let _: Value = q(&mut c, &["SET", "w", "4"]);
    let r: Vec<String> = q(&mut c, &["EXEC"]);
    assert_eq!(r, vec!["OK"]);
    // Watching a key in one database is not disturbed by the same name in another.
    let _: () = q(&mut c, &["WATCH", "w"]);
    let _: () = q(&mut other, &["SELECT", "1"]);
    let _: () = q(&mut other, &["SET", "w", "elsewhere"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: Value = q(&mut c, &["INCR", "w"]);
    let r: Vec<i64> = q(&mut c, &["EXEC"]);
    assert_eq!(r, vec![5]);
    // FLUSHALL touches watched keys that exist.
    let _: () = q(&mut c, &["WATCH", "w"]);
    let _: () = q(&mut other, &["FLUSHALL"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: Value = q(&mut c, &["PING"]);
    assert_eq!(q::<Value>(&mut c, &["EXEC"]), Value::Nil);
    // UNWATCH forgets.
    let _: () = q(&mut c, &["WATCH", "w"]);
    let _: () = q(&mut other, &["SELECT", "0"]);
    let _: () = q(&mut other, &["SET", "w", "x"]);
    let _: () = q(&mut c, &["UNWATCH"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: Value = q(&mut c, &["GET", "w"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["EXEC"]), vec!["x"]);
}

#[test]
fn optimistic_increments_with_watch_lose_no_update() {
    let s = Server::start(&[]);
    const THREADS: usize = 4;
    const EACH: usize = 60;
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let mut c = s.client();
            std::thread::spawn(move || {
                let mut retries = 0;
                for _ in 0..EACH {
                    loop {
                        let _: () = q(&mut c, &["WATCH", "ctr"]);
                        let v: Option<i64> = q(&mut c, &["GET", "ctr"]);
                        let _: () = q(&mut c, &["MULTI"]);
                        let _: Value =
                            q(&mut c, &["SET", "ctr", &(v.unwrap_or(0) + 1).to_string()]);
                        match q::<Value>(&mut c, &["EXEC"]) {
                            Value::Nil => retries += 1,
                            _ => break,
                        }
                    }
                }
                retries
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["GET", "ctr"]), (THREADS * EACH) as i64);
}

#[test]
fn the_redis_crate_atomic_pipeline_works() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("p")
        .cmd("INCRBY")
        .arg("p")
        .arg(10)
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b), (1, 11));
}

/// Each transaction `t` writes six records in six commands; the log of transaction ids is one of
/// them. After a SIGKILL, a transaction is either wholly there or wholly absent.
#[test]
fn exec_is_all_or_nothing_across_sigkill() {
    for appendfsync in ["everysec", "always"] {
        let s = Server::start(&["--appendfsync", appendfsync]);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let mut c = s.client();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut done = 0u64;
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let t = format!("{w}-{done}");
                        let r = redis::pipe()
                            .atomic()
                            .cmd("SET")
                            .arg(format!("a:{t}"))
                            .arg(&t)
                            .cmd("HSET")
                            .arg("h")
                            .arg(&t)
                            .arg(1)
                            .cmd("ZADD")
                            .arg("z")
                            .arg(1)
                            .arg(&t)
                            .cmd("SADD")
                            .arg("s")
                            .arg(&t)
                            .cmd("INCR")
                            .arg("ctr")
                            .cmd("RPUSH")
                            .arg("log")
                            .arg(&t)
                            .query::<Value>(&mut c);
                        if r.is_err() {
                            break;
                        }
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        let mut s = s;
        s.kill();
        stop.store(true, Ordering::Relaxed);
        let acked: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
        assert!(acked > 0, "no transaction ran under {appendfsync}");
        let s = s.restart();
        let mut c = s.client();
        let log: Vec<String> = q(&mut c, &["LRANGE", "log", "0", "-1"]);
        assert!(log.len() as u64 >= acked, "acknowledged transactions lost");
        let ctr: Option<i64> = q(&mut c, &["GET", "ctr"]);
        assert_eq!(
            ctr.unwrap_or(0),
            log.len() as i64,
            "INCR and RPUSH disagree"
        );
        assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), log.len() as i64);
        assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), log.len() as i64);
        assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), log.len() as i64);
        for t in &log {
            assert_eq!(
                q::<Option<String>>(&mut c, &["GET", &format!("a:{t}")]).as_deref(),
                Some(t.as_str())
            );
            assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", t]), 1);
            assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", t]), 1);
        }
        // DBSIZE counts exactly: a: keys, h, z, s, ctr, log.
        let keys = log.len() as i64 + if log.is_empty() { 0 } else { 5 };
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), keys);
    }
}
