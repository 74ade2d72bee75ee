//! The commands of issue 6 through the `redis` crate, and Redis's exact error texts on the wire.

mod common;

use common::{send_raw, Server};
use redis::{cmd, Value};
use std::collections::HashMap;
use std::time::Duration;

fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn q_err(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut c = cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query::<Value>(con) {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
    }
}

/// One request in RESP, raw, and the raw reply.
fn raw(server: &Server, argv: &[&[u8]]) -> Vec<u8> {
    let mut stream = server.raw();
    let mut req = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        req.extend_from_slice(a);
        req.extend_from_slice(b"\r\n");
    }
    send_raw(&mut stream, &req)
}

#[test]
fn strings_behave_like_redis() {
    let s = Server::start(&[]);
    let mut c = s.client();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["ECHO", "hi"]), "hi");
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "missing"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "k", "w", "NX"]), None);
    assert_eq!(q::<String>(&mut c, &["SET", "k", "w", "XX", "GET"]), "v");
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "new", "x", "XX"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "new", "x", "GET"]),
        None
    );
    assert_eq!(q::<String>(&mut c, &["GETSET", "k", "z"]), "w");
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "no"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k2", "yes"]), 1);
    assert_eq!(q::<String>(&mut c, &["MSET", "a", "1", "b", "2"]), "OK");
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["MGET", "a", "nope", "b"]),
        vec![Some("1".into()), None, Some("2".into())]
    );
    assert_eq!(q::<i64>(&mut c, &["INCR", "a"]), 2);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "a", "10"]), 12);
    assert_eq!(q::<i64>(&mut c, &["DECR", "a"]), 11);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "a", "20"]), -9);
    assert_eq!(q::<i64>(&mut c, &["INCR", "fresh"]), 1);
    assert!(q_err(&mut c, &["INCR", "k"]).contains("value is not an integer or out of range"));
    let _: () = q(&mut c, &["SET", "max", "9223372036854775807"]);
    assert!(q_err(&mut c, &["INCR", "max"]).contains("increment or decrement would overflow"));
    assert_eq!(q::<i64>(&mut c, &["APPEND", "k", "123"]), 4);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "ap", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "k"]), 4);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "nothing"]), 0);
    assert!(q_err(&mut c, &["SET", "k", "v", "EX", "0"])
        .contains("invalid expire time in 'set' command"));
    assert!(q_err(&mut c, &["SET", "k", "v", "NX", "XX"]).contains("syntax error"));
}

#[test]
fn keys_expiry_and_scan() {
    let s = Server::start(&[]);
    let mut c = s.client();
    for i in 0..25 {
        let _: () = q(&mut c, &["SET", &format!("key:{i:02}"), "v"]);
    }
    let _: () = q(&mut c, &["SET", "other", "v"]);
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "key:00", "key:01", "nope", "key:00"]),
        3
    );
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 26);
    let mut keys: Vec<String> = q(&mut c, &["KEYS", "key:*"]);
    keys.sort();
    assert_eq!(keys.len(), 25);
    // A full SCAN returns every key exactly once, in bounded steps.
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    for _ in 0..100 {
        let (next, batch): (String, Vec<String>) =
            q(&mut c, &["SCAN", &cursor, "MATCH", "key:*", "COUNT", "7"]);
        seen.extend(batch);
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(cursor, "0", "scan did not finish");
    seen.sort();
    assert_eq!(seen, keys);
    assert_eq!(q::<i64>(&mut c, &["DEL", "key:00", "key:01", "nope"]), 2);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "key:02"]), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "key:03"]), "string");
    assert_eq!(q::<String>(&mut c, &["TYPE", "key:00"]), "none");
    // TTL semantics: -2 absent, -1 no expiry.
    assert_eq!(q::<i64>(&mut c, &["TTL", "nope"]), -2);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "nope"]), -2);
    assert_eq!(q::<i64>(&mut c, &["TTL", "key:03"]), -1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "key:03", "100"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "key:03"]), 100);
    let pttl: i64 = q(&mut c, &["PTTL", "key:03"]);
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "nope", "100"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "key:03"]), 1);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "key:03"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "key:03"]), -1);
    let _: () = q(&mut c, &["SET", "ex", "v", "EX", "50"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "ex"]), 50);
    // Short expiries: lazily on read, and by the sweep for keys nobody reads.
    let _: () = q(&mut c, &["SET", "soon", "v", "PX", "100"]);
    let _: () = q(&mut c, &["SET", "unread", "v", "PX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "key:04", "100"]), 1);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "soon"]), None);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "key:04"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "soon"]), -2);
    let all: Vec<String> = q(&mut c, &["KEYS", "*"]);
    assert!(!all.contains(&"unread".to_string()));
    // A negative expiry deletes.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "key:05", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "key:05"]), 0);
    assert_eq!(q::<String>(&mut c, &["FLUSHDB"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    let _: () = q(&mut c, &["SET", "after", "flush"]);
    assert_eq!(q::<String>(&mut c, &["FLUSHALL"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
}

#[test]
fn hashes_and_sorted_sets_serve_the_ycsb_binding() {
    let s = Server::start(&[]);
    let mut c = s.client();
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "user1", "f0", "a", "f1", "b"]),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "user1", "f1", "B", "f2", "c"]),
        1
    );
    assert_eq!(q::<String>(&mut c, &["HMSET", "user1", "f3", "d"]), "OK");
    assert_eq!(q::<String>(&mut c, &["HGET", "user1", "f1"]), "B");
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "user1", "zz"]), None);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "user1", "f0", "zz", "f3"]),
        vec![Some("a".into()), None, Some("d".into())]
    );
    let all: HashMap<String, String> = q(&mut c, &["HGETALL", "user1"]);
    assert_eq!(all.len(), 4);
    assert_eq!(all["f2"], "c");
    assert_eq!(q::<i64>(&mut c, &["HLEN", "user1"]), 4);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "user1", "f0", "zz", "f0"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "user1"]), 3);
    assert_eq!(q::<String>(&mut c, &["TYPE", "user1"]), "hash");
    // The YCSB binding's index: ZADD score member, ZRANGEBYSCORE ... LIMIT.
    for i in 0..20 {
        let score = (i * 7 % 20).to_string();
        assert_eq!(
            q::<i64>(&mut c, &["ZADD", "index", &score, &format!("user{i}")]),
            1
        );
    }
    assert_eq!(q::<i64>(&mut c, &["ZADD", "index", "100", "user0"]), 0);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "index", "CH", "101", "user0"]),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["ZADD", "index", "NX", "5", "user0"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "index"]), 20);
    assert_eq!(q::<f64>(&mut c, &["ZSCORE", "index", "user0"]), 101.0);
    let page: Vec<String> = q(
        &mut c,
        &["ZRANGEBYSCORE", "index", "3", "+inf", "LIMIT", "0", "4"],
    );
    assert_eq!(page, ["user9", "user12", "user15", "user18"]);
    let page: Vec<String> = q(&mut c, &["ZRANGEBYSCORE", "index", "(3", "5", "WITHSCORES"]);
    assert_eq!(page, ["user12", "4", "user15", "5"]);
    let page: Vec<String> = q(
        &mut c,
        &[
            "ZRANGEBYSCORE",
            "index",
            "-inf",
            "+inf",
            "LIMIT",
            "18",
            "10",
        ],
    );
    assert_eq!(page, ["user17", "user0"]);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "index", "user0", "nobody"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "index"]), 19);
    assert_eq!(
        q::<String>(&mut c, &["ZADD", "index", "INCR", "2.5", "user1"]),
        "9.5"
    );
    // Deleting a collection and recreating it never resurrects old fields.
    assert_eq!(q::<i64>(&mut c, &["DEL", "user1", "index"]), 2);
    assert_eq!(q::<i64>(&mut c, &["HSET", "user1", "x", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "user1"]), 1);
    let _: () = q(&mut c, &["SET", "user1", "now a string"]);
    assert!(q_err(&mut c, &["HSET", "user1", "y", "1"]).starts_with("WRONGTYPE"));
    assert_eq!(q::<String>(&mut c, &["GET", "user1"]), "now a string");
}

#[test]
fn errors_carry_redis_prefixes() {
    let s = Server::start(&[]);
    assert_eq!(
        raw(&s, &[b"FOO", b"a", b"b"]),
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(
        raw(&s, &[b"GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(raw(&s, &[b"HSET", b"h", b"f", b"v"]), b":1\r\n");
    assert_eq!(
        raw(&s, &[b"GET", b"h"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(raw(&s, &[b"SET", b"s", b"v"]), b"+OK\r\n");
    assert!(raw(&s, &[b"ZADD", b"s", b"1", b"m"]).starts_with(b"-WRONGTYPE"));
    assert!(raw(&s, &[b"HGETALL", b"s"]).starts_with(b"-WRONGTYPE"));
    assert_eq!(
        raw(&s, &[b"ZADD", b"z", b"x", b"m"]),
        b"-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        raw(&s, &[b"HSET", b"h", b"f"]),
        b"-ERR wrong number of arguments for 'hset' command\r\n"
    );
    assert_eq!(raw(&s, &[b"SELECT", b"0"]), b"+OK\r\n");
    assert_eq!(
        raw(&s, &[b"SELECT", b"16"]),
        b"-ERR DB index is out of range\r\n"
    );
    // Inline commands, as typed into telnet.
    let mut t = s.raw();
    assert_eq!(send_raw(&mut t, b"PING\r\n"), b"+PONG\r\n");
    assert_eq!(
        send_raw(&mut t, b"SET inl \"a b\"\r\nGET inl\r\n"),
        b"+OK\r\n$3\r\na b\r\n"
    );
}

#[test]
fn server_commands_answer_what_tools_ask() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    assert!(count >= 50, "{count}");
    let _: Value = q(&mut c, &["COMMAND", "DOCS"]);
    let _: Value = q(&mut c, &["COMMAND"]);
    let save: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "save"]);
    assert_eq!(save.get("save").map(String::as_str), Some(""));
    let aof: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "appendonly"]);
    assert_eq!(aof["appendonly"], "yes");
    assert_eq!(
        q::<String>(&mut c, &["CONFIG", "SET", "appendfsync", "always"]),
        "OK"
    );
    let fsync: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "appendfsync"]);
    assert_eq!(fsync["appendfsync"], "always");
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let info: String = q(&mut c, &["INFO"]);
    for needle in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# Keyspace",
        "role:master",
        "connected_slaves:0",
        "db0:keys=1",
        "connected_clients:1",
    ] {
        assert!(info.contains(needle), "INFO lacks {needle}:\n{info}");
    }
    let only: String = q(&mut c, &["INFO", "replication"]);
    assert!(only.contains("role:master") && !only.contains("# Server"));
    assert_eq!(q::<String>(&mut c, &["CLIENT", "SETNAME", "tester"]), "OK");
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]), "tester");
    assert_eq!(
        q::<String>(&mut c, &["CLIENT", "SETINFO", "LIB-NAME", "x"]),
        "OK"
    );
    let _: i64 = q(&mut c, &["CLIENT", "ID"]);
    let hello: HashMap<String, Value> = q(&mut c, &["HELLO", "2"]);
    assert!(hello.contains_key("proto"));
    let time: Vec<String> = q(&mut c, &["TIME"]);
    assert_eq!(time.len(), 2);
    // RESP3 after HELLO 3: HGETALL is a map, a missing key is `_`.
    let mut t = s.raw();
    let hello = send_raw(&mut t, b"HELLO 3\r\n");
    assert!(
        hello.starts_with(b"%7\r\n"),
        "{}",
        String::from_utf8_lossy(&hello)
    );
    assert_eq!(send_raw(&mut t, b"HSET h a 1\r\n"), b":1\r\n");
    assert_eq!(
        send_raw(&mut t, b"HGETALL h\r\n"),
        b"%1\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(send_raw(&mut t, b"GET nope\r\n"), b"_\r\n");
    assert_eq!(send_raw(&mut t, b"QUIT\r\n"), b"+OK\r\n");
}

#[test]
fn requirepass_guards_every_command_but_auth() {
    let s = Server::start(&["--requirepass", "sekret"]);
    let mut t = s.raw();
    assert_eq!(
        send_raw(&mut t, b"GET k\r\n"),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert!(send_raw(&mut t, b"AUTH wrong\r\n").starts_with(b"-WRONGPASS"));
    assert_eq!(send_raw(&mut t, b"AUTH sekret\r\n"), b"+OK\r\n");
    assert_eq!(send_raw(&mut t, b"SET k v\r\n"), b"+OK\r\n");
    let client = redis::Client::open(format!("redis://:sekret@127.0.0.1:{}/", s.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
}

#[test]
fn pipelined_replies_keep_request_order() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("SET").arg(format!("p{i}")).arg(i).ignore();
        p.cmd("INCR").arg(format!("p{i}"));
        p.cmd("GET").arg(format!("p{i}"));
    }
    let replies: Vec<Value> = p.query(&mut c).unwrap();
    assert_eq!(replies.len(), 400);
    for (i, pair) in replies.chunks(2).enumerate() {
        assert_eq!(pair[0], Value::Int(i as i64 + 1));
        assert_eq!(pair[1], Value::BulkString((i + 1).to_string().into_bytes()));
    }
}

/// A batch reads the keys of its read commands ahead with one engine `multi_get`; every read must
/// still see the writes of the commands before it in the batch.
#[test]
fn pipelined_reads_see_the_writes_before_them_in_the_batch() {
    let s = Server::start(&[]);
    let mut c = s.client();
    for i in 0..20 {
        let _: () = q(&mut c, &["SET", &format!("r{i}"), "old"]);
    }
    let _: () = q(&mut c, &["SET", "gone", "soon", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut p = redis::pipe();
    for i in 0..20 {
        let k = format!("r{i}");
        match i % 4 {
            0 => p
                .cmd("GET")
                .arg(&k)
                .cmd("SET")
                .arg(&k)
                .arg("new")
                .ignore()
                .cmd("GET")
                .arg(&k),
            1 => p.cmd("SET").arg(&k).arg("new").ignore().cmd("GET").arg(&k),
            2 => p
                .cmd("DEL")
                .arg(&k)
                .ignore()
                .cmd("GET")
                .arg(&k)
                .cmd("EXISTS")
                .arg(&k),
            _ => p
                .cmd("APPEND")
                .arg(&k)
                .arg("+")
                .ignore()
                .cmd("MGET")
                .arg(&k)
                .arg("nope"),
        };
    }
    p.cmd("GET").arg("gone").cmd("EXISTS").arg("gone");
    // Many staged keys: a read finds its key among them through a set.
    for i in 0..50 {
        p.cmd("SET").arg(format!("many{i}")).arg(i).ignore();
    }
    p.cmd("GET").arg("many0").cmd("GET").arg("many49");
    let replies: Vec<Value> = p.query(&mut c).unwrap();
    let bulk = |v: &str| Value::BulkString(v.as_bytes().to_vec());
    let mut want = Vec::new();
    for i in 0..20 {
        match i % 4 {
            0 => want.extend([bulk("old"), bulk("new")]),
            1 => want.push(bulk("new")),
            2 => want.extend([Value::Nil, Value::Int(0)]),
            _ => want.push(Value::Array(vec![bulk("old+"), Value::Nil])),
        }
    }
    want.extend([Value::Nil, Value::Int(0), bulk("0"), bulk("49")]);
    assert_eq!(replies, want);
}

#[test]
fn read_modify_write_commands_are_atomic_across_connections() {
    let s = Server::start(&[]);
    const THREADS: usize = 8;
    const EACH: usize = 300;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let mut c = s.client();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    let _: i64 = q(&mut c, &["INCR", "counter"]);
                    let _: i64 = q(&mut c, &["HSET", "h", &format!("f{t}-{i}"), "v"]);
                    let _: i64 = q(&mut c, &["ZADD", "z", &i.to_string(), &format!("m{t}-{i}")]);
                    let _: i64 = q(&mut c, &["APPEND", "log", "x"]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.client();
    let total = (THREADS * EACH) as i64;
    assert_eq!(q::<i64>(&mut c, &["GET", "counter"]), total);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), total);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), total);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "log"]), total);
    let all: Vec<String> = q(&mut c, &["ZRANGEBYSCORE", "z", "-inf", "+inf"]);
    assert_eq!(all.len() as i64, total);
}
