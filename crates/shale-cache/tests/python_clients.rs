//! Clients nobody here wrote, the way their users run them: a pymemcache session against
//! memcached 1.6 and against the cache, and a redis-py session (RESP2, and RESP3 where the
//! installed redis-py speaks it) against Redis and against the cache. Each session prints one line
//! per call (the result, or the exception's class and text); the cache's transcript must equal
//! the peer's. The sessions are in `tests/clients/`; CI installs python3-pymemcache and
//! python3-redis.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{free_port, Memcached, TestServer};

/// Runs a session script against `port` and returns its transcript; the test fails if Python or
/// the client library is missing, or the script fails.
fn session(script: &str, port: u16) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(script);
    let out = Command::new("python3")
        .arg(&path)
        .arg(port.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}): install it (.ci/run does)"));
    assert!(
        out.status.success(),
        "{script} against port {port} failed (python3-pymemcache and python3-redis installed?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("a transcript is text")
}

/// The same session against the peer and the cache, at the same time; their transcripts.
fn both(script: &'static str, peer: u16, cache: u16) -> (String, String) {
    let peer = std::thread::spawn(move || session(script, peer));
    let ours = session(script, cache);
    (peer.join().expect("the peer's session"), ours)
}

fn assert_same(script: &str, peer: &str, ours: &str) {
    for (line, (want, got)) in peer.lines().zip(ours.lines()).enumerate() {
        assert_eq!(
            got,
            want,
            "{script}, line {}: the cache (left) answers differently from the peer (right)\n\
             whole transcript of the cache:\n{ours}",
            line + 1
        );
    }
    assert_eq!(
        peer.lines().count(),
        ours.lines().count(),
        "{script}: transcripts of different lengths\npeer:\n{peer}\ncache:\n{ours}"
    );
}

#[test]
fn pymemcache_sees_the_cache_as_memcached() {
    let memcached = Memcached::start(64);
    let cache = TestServer::start(64 << 20);
    let script = "pymemcache_session.py";
    let (peer, ours) = both(script, memcached.addr.port(), cache.memcache.port());
    assert!(peer.contains("set 1000000 bytes: True"), "{peer}");
    assert_same(script, &peer, &ours);
}

/// A Redis server without persistence on a free port, killed when dropped.
struct Redis {
    child: Child,
    addr: SocketAddr,
}

impl Redis {
    fn start() -> Redis {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run redis-server ({e}): install it (.ci/run does)"));
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, addr }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn redis_py_sees_the_cache_as_redis() {
    let redis = Redis::start();
    let cache = TestServer::start(64 << 20);
    let script = "redis_py_session.py";
    let (peer, ours) = both(script, redis.addr.port(), cache.resp.port());
    assert!(peer.starts_with("# RESP2\nping: True\n"), "{peer}");
    assert_same(script, &peer, &ours);
}
