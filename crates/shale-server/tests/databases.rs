//! Databases and the keyspace commands through the server: SELECT, per-database FLUSHDB, DBSIZE
//! kept exactly across restarts, MOVE, SWAPDB, COPY, RENAME; KEYS and SCAN MATCH with a
//! pathological pattern; DUMP/RESTORE.

mod common;

use common::Server;
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
fn databases_are_separate_and_dbsize_survives_restarts() {
    let s = Server::start(&[]);
    let mut c = s.client();
    for db in 0..3 {
        let _: () = q(&mut c, &["SELECT", &db.to_string()]);
        for i in 0..=db * 10 {
            let _: () = q(&mut c, &["SET", &format!("k{i}"), "v"]);
        }
        let _: i64 = q(&mut c, &["HSET", "h", "f", "v"]);
        let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b"]);
    }
    let sizes = |c: &mut redis::Connection| -> Vec<i64> {
        (0..3)
            .map(|db| {
                let _: () = q(c, &["SELECT", &db.to_string()]);
                q(c, &["DBSIZE"])
            })
            .collect()
    };
    assert_eq!(sizes(&mut c), vec![3, 13, 23]);
    // Overwrites and deletes keep the counts exact.
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: () = q(&mut c, &["SET", "h", "now a string"]);
    let _: i64 = q(&mut c, &["DEL", "k0", "nothing"]);
    assert_eq!(
        q::<Option<String>>(&mut c, &["LPOP", "l"]).as_deref(),
        Some("a")
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["LPOP", "l"]).as_deref(),
        Some("b")
    );
    assert_eq!(sizes(&mut c), vec![3, 11, 23]);
    let mut s = s;
    s.kill();
    let s = s.restart();
    let mut c = s.client();
    assert_eq!(sizes(&mut c), vec![3, 11, 23]);
    // FLUSHDB empties one database only.
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: () = q(&mut c, &["FLUSHDB"]);
    assert_eq!(sizes(&mut c), vec![3, 11, 0]);
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "h"]), "now a string");
    let _: () = q(&mut c, &["FLUSHALL"]);
    assert_eq!(sizes(&mut c), vec![0, 0, 0]);
}

#[test]
fn move_swapdb_copy_and_rename() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    let _: bool = q(&mut c, &["EXPIRE", "z", "100"]);
    assert_eq!(q::<i64>(&mut c, &["MOVE", "z", "5"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    let _: () = q(&mut c, &["SELECT", "5"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1"]),
        vec!["a", "b"]
    );
    assert!(
        q::<i64>(&mut c, &["TTL", "z"]) > 90,
        "MOVE keeps the expiry"
    );
    assert_eq!(q::<i64>(&mut c, &["COPY", "z", "z2", "DB", "0"]), 1);
    let _: () = q(&mut c, &["SWAPDB", "0", "5"]);
    // Database 5 now holds what 0 held (the copy), and 5's data is in 0.
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]), vec!["z2"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    let _: () = q(&mut c, &["RENAME", "z", "renamed"]);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "renamed"]), 2);
    let mut s = s;
    s.kill();
    let s = s.restart();
    let mut c = s.client();
    assert_eq!(
        q::<i64>(&mut c, &["ZCARD", "renamed"]),
        2,
        "SWAPDB survives a restart"
    );
    let _: () = q(&mut c, &["SELECT", "5"]);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z2"]), 2);
    // The copy is independent of its source.
    let _: i64 = q(&mut c, &["ZREM", "z2", "a"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "renamed"]), 2);
    // DUMP and RESTORE round trip every type.
    let _: i64 = q(&mut c, &["SADD", "set", "x", "y"]);
    let payload: Vec<u8> = q(&mut c, &["DUMP", "set"]);
    let mut r = redis::cmd("RESTORE");
    r.arg("set2").arg(0).arg(&payload);
    let _: () = r.query(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SCARD", "set2"]), 2);
    let mut bad = payload.clone();
    bad[3] ^= 1;
    let mut r = redis::cmd("RESTORE");
    r.arg("set3").arg(0).arg(&bad);
    let err = r.query::<()>(&mut c).unwrap_err().to_string();
    assert!(err.contains("checksum"), "{err}");
}

#[test]
fn keys_with_a_pathological_pattern_answers_within_milliseconds() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let long = "a".repeat(2000);
    for i in 0..50 {
        let _: () = q(&mut c, &["SET", &format!("{long}{i}"), "v"]);
    }
    let pattern = format!("{}b", "a*".repeat(20));
    let started = Instant::now();
    let found: Vec<String> = q(&mut c, &["KEYS", &pattern]);
    assert!(found.is_empty());
    let scanned: (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "MATCH", &pattern, "COUNT", "100"]);
    assert!(scanned.1.is_empty());
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(500),
        "KEYS and SCAN took {took:?}"
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "a*49"]).len(), 1);
}
