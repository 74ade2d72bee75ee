//! Test harness: an in-process cache server on free loopback ports, stopped when dropped, and
//! small blocking clients.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_cache::{Cache, CacheConfig, Server, ServerConfig};

/// Socket read timeout of test clients.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A running cache server.
pub struct TestServer {
    server: Option<Server>,
    pub cache: Arc<Cache>,
    pub resp: SocketAddr,
    pub memcache: SocketAddr,
    pub megakv: SocketAddr,
}

impl TestServer {
    /// A server with `memory` bytes and two connection threads.
    pub fn start(memory: usize) -> TestServer {
        let threads = 2;
        let cache = Arc::new(Cache::with_cpu_index(&CacheConfig::new(memory, threads)).unwrap());
        let server = Server::start(
            &ServerConfig {
                bind: "127.0.0.1".parse().unwrap(),
                resp_port: 0,
                memcache_port: 0,
                megakv_port: 0,
                threads,
                maxclients: 1000,
            },
            Arc::clone(&cache),
        )
        .expect("start the cache server");
        TestServer {
            resp: server.resp,
            memcache: server.memcache,
            megakv: server.megakv,
            server: Some(server),
            cache,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}

/// A connected TCP client with timeouts.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Sends `script` and reads until the reply ends with `until` (or the peer closes, or times out).
pub fn exchange(stream: &mut TcpStream, script: &[u8], until: &[u8]) -> Vec<u8> {
    stream.write_all(script).unwrap();
    read_until(stream, until)
}

/// Reads until what was read ends with `until`, the peer closes, or [`IO_TIMEOUT`] passes.
pub fn read_until(stream: &mut TcpStream, until: &[u8]) -> Vec<u8> {
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !got.ends_with(until) && Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    got
}

/// A port nothing listens on now (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `program` with `args`; panics (the test fails) if it cannot be started.
pub fn tool(program: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {program} ({e}): install it (.ci/run installs it on CI)")
        })
}

/// A memcached 1.6 process on a free port, killed when dropped.
pub struct Memcached {
    child: std::process::Child,
    pub addr: SocketAddr,
}

impl Memcached {
    /// Starts `memcached -t 2 -m <megabytes>`; panics if memcached is not installed.
    pub fn start(megabytes: usize) -> Memcached {
        let port = free_port();
        let mut command = std::process::Command::new("memcached");
        // SAFETY: geteuid only reads the process's credentials.
        if unsafe { libc::geteuid() } == 0 {
            command.args(["-u", "root"]);
        }
        let child = command
            .args(["-l", "127.0.0.1", "-U", "0", "-t", "2"])
            .args(["-p", &port.to_string(), "-m", &megabytes.to_string()])
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run memcached ({e}): install it (.ci/run does)"));
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "memcached did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Memcached { child, addr }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
