//! The servers a cache comparison runs: Shale's cache, memcached 1.6 and Redis, each started
//! fresh on free loopback ports and killed when dropped.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The last bytes of a server's stderr kept to explain a failed start.
const STDERR_KEPT: usize = 4096;

/// A server process.
pub struct ServerProcess {
    child: Child,
    /// The tail of its stderr, drained by a thread so the server never blocks on the pipe.
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Its listening addresses by protocol name (`memcache`, `resp`, `megakv`).
    pub addrs: Vec<(&'static str, SocketAddr)>,
}

impl ServerProcess {
    /// The address of `protocol`.
    pub fn addr(&self, protocol: &str) -> Option<SocketAddr> {
        self.addrs
            .iter()
            .find(|(p, _)| *p == protocol)
            .map(|&(_, a)| a)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("bind a free port", e))?;
    Ok(l.local_addr()
        .map_err(|e| Error::io("local addr", e))?
        .port())
}

/// Waits until the server accepts connections on every address. A server that exits first is
/// an error that carries what it wrote to stderr (e.g. `shale: --index gpu: ...`).
fn started(
    mut child: Child,
    addrs: Vec<(&'static str, SocketAddr)>,
    what: &str,
) -> Result<ServerProcess> {
    let stderr = Arc::new(Mutex::new(Vec::new()));
    if let Some(mut pipe) = child.stderr.take() {
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                kept.extend_from_slice(&buf[..n]);
                let excess = kept.len().saturating_sub(STDERR_KEPT);
                kept.drain(..excess);
            }
        });
    }
    let server = ServerProcess {
        child,
        stderr,
        addrs,
    };
    server.wait_until_listening(what)
}

impl ServerProcess {
    fn wait_until_listening(mut self, what: &str) -> Result<Self> {
        let deadline = Instant::now() + START_TIMEOUT;
        for &(_, addr) in &self.addrs {
            while TcpStream::connect(addr).is_err() {
                if let Ok(Some(status)) = self.child.try_wait() {
                    // Give the drain thread a moment to take the last words.
                    std::thread::sleep(Duration::from_millis(100));
                    let said = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
                    return Err(Error::backend(format!(
                        "{what} exited at start ({status}): {}",
                        String::from_utf8_lossy(&said).trim()
                    )));
                }
                if Instant::now() > deadline {
                    return Err(Error::backend(format!("{what} did not start on {addr}")));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(self)
    }
}

fn spawn(command: &mut Command, what: &str) -> Result<Child> {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("cannot start {what} (is it installed?)"), e))
}

fn localhost(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `shale serve --mode cache` with `memory` bytes, `threads` connection threads and the index
/// engine `index` (`cpu`, or `gpu` in a build with the gpu feature).
///
/// # Errors
/// If it cannot be started (with what it said on stderr).
pub fn shale(bin: &Path, memory: u64, threads: usize, index: &str) -> Result<ServerProcess> {
    let (resp, mc, mkv) = (free_port()?, free_port()?, free_port()?);
    let child = spawn(
        Command::new(bin)
            .args(["serve", "--mode", "cache", "--index", index])
            .args(["--maxmemory", &memory.to_string()])
            .args(["--threads", &threads.to_string()])
            .args(["--port", &resp.to_string()])
            .args(["--memcache-port", &mc.to_string()])
            .args(["--megakv-port", &mkv.to_string()]),
        "shale",
    )?;
    let addrs = vec![
        ("resp", localhost(resp)),
        ("memcache", localhost(mc)),
        ("megakv", localhost(mkv)),
    ];
    started(child, addrs, &format!("shale --index {index}"))
}

/// memcached with `memory` bytes, `threads` worker threads (`-t`) and `extra` arguments.
///
/// # Errors
/// If it cannot be started.
pub fn memcached(memory: u64, threads: usize, extra: &[String]) -> Result<ServerProcess> {
    let port = free_port()?;
    let mut command = Command::new("memcached");
    // SAFETY: geteuid only reads the process's credentials.
    if unsafe { libc::geteuid() } == 0 {
        command.args(["-u", "root"]);
    }
    let child = spawn(
        command
            .args(["-l", "127.0.0.1", "-U", "0", "-c", "4096"])
            .args(["-p", &port.to_string(), "-t", &threads.to_string()])
            .args(["-m", &(memory >> 20).max(1).to_string()])
            .args(extra),
        "memcached",
    )?;
    started(child, vec![("memcache", localhost(port))], "memcached")
}

/// redis-server without persistence, with `maxmemory` and `allkeys-lru`.
///
/// # Errors
/// If it cannot be started.
pub fn redis(memory: u64) -> Result<ServerProcess> {
    let port = free_port()?;
    let child = spawn(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--maxclients", "4096"])
            .args([
                "--maxmemory",
                &memory.to_string(),
                "--maxmemory-policy",
                "allkeys-lru",
            ]),
        "redis-server",
    )?;
    started(child, vec![("resp", localhost(port))], "redis-server")
}
