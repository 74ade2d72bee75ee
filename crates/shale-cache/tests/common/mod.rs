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
        let (child, addr) = spawn_on_free_port(
            "memcached",
            |port| {
                let mut command = std::process::Command::new("memcached");
                // SAFETY: geteuid only reads the process's credentials.
                if unsafe { libc::geteuid() } == 0 {
                    command.args(["-u", "root"]);
                }
                command
                    .args(["-l", "127.0.0.1", "-U", "0", "-t", "2"])
                    .args(["-p", &port.to_string(), "-m", &megabytes.to_string()])
                    .stderr(std::process::Stdio::null());
                command
            },
            b"stats\r\n",
            b"END\r\n",
            |pid| format!("STAT pid {pid}\r\n"),
        );
        Memcached { child, addr }
    }
}

/// Starts a server process on a free port: `command(port)` is the command line, `ask` a request
/// whose reply (read until it ends with `until`) holds `proof(pid)` when the process of that pid
/// answers. A free port is chosen and then released, so another test's listener (on a port the
/// kernel picked) may take it before the server binds it; the server then exits while the port
/// answers for someone else. So the one answering must prove it is the process started, or it
/// starts again on another port. Panics if `what` cannot be run (it is not installed).
pub fn spawn_on_free_port(
    what: &str,
    command: impl Fn(u16) -> std::process::Command,
    ask: &[u8],
    until: &[u8],
    proof: impl Fn(u32) -> String,
) -> (std::process::Child, SocketAddr) {
    for _ in 0..20 {
        let port = free_port();
        let mut child = command(port)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {what} ({e}): install it (.ci/run does)"));
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let stream = loop {
            if let Ok(stream) = TcpStream::connect(addr) {
                break Some(stream);
            }
            if child.try_wait().ok().flatten().is_some() {
                break None;
            }
            assert!(Instant::now() < deadline, "{what} did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(mut stream) = stream {
            stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            let reply = exchange(&mut stream, ask, until);
            if String::from_utf8_lossy(&reply).contains(&proof(child.id())) {
                return (child, addr);
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("{what} did not start on any of 20 ports");
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
