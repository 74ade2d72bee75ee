//! RESP in cache mode against real clients: the `redis` crate and redis-cli.

mod common;

use std::time::Duration;

use common::{tool, TestServer, IO_TIMEOUT};
use redis::Commands;

fn client(server: &TestServer) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{}/", server.resp)).unwrap();
    let con = client
        .get_connection_with_timeout(IO_TIMEOUT)
        .expect("connect");
    con.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    con
}

#[test]
fn string_commands_through_the_redis_crate() {
    let server = TestServer::start(64 << 20);
    let mut con = client(&server);
    let _: () = con.set("k", "v").unwrap();
    assert_eq!(
        con.get::<_, Option<String>>("k").unwrap().as_deref(),
        Some("v")
    );
    assert_eq!(con.get::<_, Option<String>>("missing").unwrap(), None);
    // NX / XX
    let nx: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("w")
        .arg("NX")
        .query(&mut con)
        .unwrap();
    assert_eq!(nx, None);
    let xx: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("w")
        .arg("XX")
        .query(&mut con)
        .unwrap();
    assert_eq!(xx.as_deref(), Some("OK"));
    let xx: Option<String> = redis::cmd("SET")
        .arg("nokey")
        .arg("w")
        .arg("XX")
        .query(&mut con)
        .unwrap();
    assert_eq!(xx, None);
    // MSET / MGET / EXISTS / DEL
    let _: () = con.mset(&[("a", "1"), ("b", "2"), ("c", "3")]).unwrap();
    let got: Vec<Option<String>> = con.mget(&["a", "b", "zz", "c"]).unwrap();
    assert_eq!(
        got,
        vec![Some("1".into()), Some("2".into()), None, Some("3".into())]
    );
    assert_eq!(con.exists::<_, i64>(&["a", "b", "zz"]).unwrap(), 2);
    assert_eq!(con.del::<_, i64>(&["a", "zz", "b"]).unwrap(), 2);
    assert_eq!(con.exists::<_, i64>("a").unwrap(), 0);
    // INCR family
    assert_eq!(con.incr::<_, _, i64>("n", 1).unwrap(), 1);
    assert_eq!(con.incr::<_, _, i64>("n", 41).unwrap(), 42);
    assert_eq!(con.decr::<_, _, i64>("n", 50).unwrap(), -8);
    let r: i64 = redis::cmd("DECR").arg("n").query(&mut con).unwrap();
    assert_eq!(r, -9);
    let err = con.incr::<_, _, i64>("k", 1).unwrap_err();
    assert!(err.to_string().contains("not an integer"), "{err}");
    let _: () = con.set("max", i64::MAX.to_string()).unwrap();
    let err = con.incr::<_, _, i64>("max", 1).unwrap_err();
    assert!(err.to_string().contains("overflow"), "{err}");
    // Binary keys and values.
    let key = vec![0u8, 255, 13, 10, 32];
    let value: Vec<u8> = (0..=255).collect();
    let _: () = con.set(&key, &value).unwrap();
    assert_eq!(con.get::<_, Vec<u8>>(&key).unwrap(), value);
    // DBSIZE, FLUSHALL, PING, ECHO, INFO
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert!(size >= 4, "{size}");
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let echo: String = redis::cmd("ECHO").arg("hi").query(&mut con).unwrap();
    assert_eq!(echo, "hi");
    let info: String = redis::cmd("INFO").query(&mut con).unwrap();
    assert!(
        info.contains("keyspace_hits:") && info.contains("index_engine:cpu"),
        "{info}"
    );
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, 0);
    assert_eq!(con.get::<_, Option<String>>("k").unwrap(), None);
    // Unknown commands and arity errors.
    let err = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query::<i64>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
    let err = redis::cmd("GET")
        .query::<Option<String>>(&mut con)
        .unwrap_err();
    assert!(
        err.to_string().contains("wrong number of arguments"),
        "{err}"
    );
}

#[test]
fn expiry_through_the_redis_crate() {
    let server = TestServer::start(64 << 20);
    let mut con = client(&server);
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("v")
        .arg("PX")
        .arg(150)
        .query(&mut con)
        .unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg("t").query(&mut con).unwrap();
    assert!(ttl > 0 && ttl <= 150, "{ttl}");
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(con.get::<_, Option<String>>("t").unwrap(), None);
    assert_eq!(con.ttl::<_, i64>("t").unwrap(), -2);
    let _: () = con.set("p", "v").unwrap();
    assert_eq!(con.ttl::<_, i64>("p").unwrap(), -1);
    assert!(con.expire::<_, bool>("p", 100).unwrap());
    let ttl: i64 = con.ttl("p").unwrap();
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert!(!con.expire::<_, bool>("nokey", 100).unwrap());
    // A non-positive EXPIRE deletes.
    assert!(con.expire::<_, bool>("p", 0).unwrap());
    assert_eq!(con.get::<_, Option<String>>("p").unwrap(), None);
    let err = redis::cmd("SET")
        .arg("x")
        .arg("v")
        .arg("EX")
        .arg(0)
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("invalid expire time"), "{err}");
    let err = redis::cmd("SET")
        .arg("x")
        .arg("v")
        .arg("EX")
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
}

#[test]
fn pipelines_keep_their_order() {
    let server = TestServer::start(64 << 20);
    let mut con = client(&server);
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.set(format!("k{}", i % 7), i).ignore();
        pipe.get(format!("k{}", i % 7));
        pipe.incr("counter", 1);
    }
    let replies: Vec<(i64, i64)> = pipe.query(&mut con).unwrap();
    for (i, (got, counter)) in replies.into_iter().enumerate() {
        assert_eq!(got, i as i64, "GET after SET in one pipeline");
        assert_eq!(counter, i as i64 + 1);
    }
}

#[test]
fn redis_cli_and_redis_benchmark_work_against_the_cache() {
    let server = TestServer::start(64 << 20);
    let port = server.resp.port().to_string();
    let cli = |args: &[&str]| {
        let mut all = vec!["-p", &port];
        all.extend_from_slice(args);
        let out = tool("redis-cli", &all);
        assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(cli(&["SET", "greeting", "hello world"]), "OK");
    assert_eq!(cli(&["GET", "greeting"]), "hello world");
    assert_eq!(cli(&["INCRBY", "n", "5"]), "5");
    assert_eq!(cli(&["MSET", "x", "1", "y", "2"]), "OK");
    assert_eq!(cli(&["MGET", "x", "y", "nope"]), "1\n2");
    assert_eq!(cli(&["EXISTS", "x", "nope"]), "1");
    assert_eq!(cli(&["DEL", "x"]), "1");
    assert_eq!(cli(&["PING"]), "PONG");
    assert!(cli(&["INFO"]).contains("maxmemory:"));
    assert_eq!(cli(&["DBSIZE"]), "3");
    assert_eq!(cli(&["FLUSHALL"]), "OK");
    assert_eq!(cli(&["DBSIZE"]), "0");
    let out = tool(
        "redis-benchmark",
        &[
            "-p", &port, "-t", "set,get", "-n", "20000", "-P", "16", "-q",
        ],
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "redis-benchmark: {out:?}");
    assert!(
        report.contains("SET:") && report.contains("GET:"),
        "{report}"
    );
}

/// Found by redis-py 8, which sends `HELLO 3` first on every connection: the cache used to
/// refuse it, so every command of such a client failed.
#[test]
fn hello_3_switches_the_connection_to_resp3() {
    let server = TestServer::start(64 << 20);
    let mut stream = common::connect(server.resp);
    let mut ask = |request: &[u8], until: &[u8]| {
        String::from_utf8_lossy(&common::exchange(&mut stream, request, until)).into_owned()
    };
    assert_eq!(ask(b"GET missing\r\n", b"\r\n"), "$-1\r\n");
    let hello = ask(b"HELLO 3\r\n", b"*0\r\n");
    assert!(hello.starts_with("%7\r\n"), "{hello:?}");
    assert!(hello.contains("$5\r\nproto\r\n:3\r\n"), "{hello:?}");
    assert_eq!(ask(b"GET missing\r\n", b"\r\n"), "_\r\n");
    assert_eq!(
        ask(b"SET k v\r\nMGET k missing\r\n", b"_\r\n"),
        "+OK\r\n*2\r\n$1\r\nv\r\n_\r\n"
    );
    assert_eq!(ask(b"CONFIG GET maxmemory\r\n", b"\r\n"), "%0\r\n");
    let info = ask(b"INFO\r\n", b"db0:keys=1,expires=0,avg_ttl=0\r\n\r\n");
    assert!(
        info.starts_with('=') && info.contains("\r\ntxt:# Server"),
        "{info:?}"
    );
    // Errors leave the version as it was.
    assert_eq!(
        ask(b"HELLO 4\r\n", b"\r\n"),
        "-NOPROTO unsupported protocol version\r\n"
    );
    assert_eq!(
        ask(b"HELLO three\r\n", b"\r\n"),
        "-ERR Protocol version is not an integer or out of range\r\n"
    );
    assert_eq!(
        ask(b"HELLO 2 AUTH someone secret\r\n", b"\r\n"),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(
        ask(b"HELLO 2 LOUDLY\r\n", b"\r\n"),
        "-ERR Syntax error in HELLO option 'LOUDLY'\r\n"
    );
    assert_eq!(ask(b"GET missing\r\n", b"\r\n"), "_\r\n");
    // Back to RESP2 in one pipeline with the options a client sends; the HELLO's own reply is in
    // the version it chose.
    let back = ask(
        b"HELLO 2 AUTH default anything SETNAME app\r\nGET missing\r\n",
        b"$-1\r\n",
    );
    assert!(back.starts_with("*14\r\n"), "{back:?}");
    assert!(back.contains("$5\r\nproto\r\n:2\r\n"), "{back:?}");
}

#[test]
fn the_redis_crate_over_resp3() {
    let server = TestServer::start(64 << 20);
    let client = redis::Client::open(format!("redis://{}/?protocol=resp3", server.resp)).unwrap();
    let mut con = client
        .get_connection_with_timeout(IO_TIMEOUT)
        .expect("connect over RESP3");
    let _: () = con.set("k", "v").unwrap();
    assert_eq!(
        con.get::<_, Option<String>>("k").unwrap().as_deref(),
        Some("v")
    );
    assert_eq!(con.get::<_, Option<String>>("missing").unwrap(), None);
    let both: Vec<Option<String>> = con.mget(&["k", "missing"]).unwrap();
    assert_eq!(both, [Some("v".to_string()), None]);
    assert_eq!(con.incr::<_, _, i64>("n", 5).unwrap(), 5);
    let info: String = redis::cmd("INFO").query(&mut con).unwrap();
    assert!(info.contains("maxmemory:"), "{info}");
    // redis-cli -3 sends HELLO 3 too.
    let port = server.resp.port().to_string();
    let out = tool(
        "redis-cli",
        &["-3", "--no-raw", "-p", &port, "MGET", "k", "missing"],
    );
    assert!(out.status.success(), "redis-cli -3: {out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1) \"v\"\n2) (nil)"
    );
}
