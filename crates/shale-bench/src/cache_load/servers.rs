//! The servers a cache comparison runs: Shale's cache, memcached 1.6 and Redis, each started
//! fresh on free loopback ports and killed when dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A server process.
pub struct ServerProcess {
    child: Child,
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

fn wait_for(addrs: &[SocketAddr], child: &mut Child, what: &str) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    for addr in addrs {
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(Error::backend(format!("{what} exited at start: {status}")));
            }
            if Instant::now() > deadline {
                return Err(Error::backend(format!("{what} did not start on {addr}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

fn spawn(command: &mut Command, what: &str) -> Result<Child> {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::io(format!("cannot start {what} (is it installed?)"), e))
}

fn localhost(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `shale serve --mode cache` with `memory` bytes and `threads` connection threads.
///
/// # Errors
/// If it cannot be started.
pub fn shale(bin: &Path, memory: u64, threads: usize) -> Result<ServerProcess> {
    let (resp, mc, mkv) = (free_port()?, free_port()?, free_port()?);
    let mut child = spawn(
        Command::new(bin)
            .args([
                "serve",
                "--mode",
                "cache",
                "--maxmemory",
                &memory.to_string(),
            ])
            .args([
                "--threads",
                &threads.to_string(),
                "--port",
                &resp.to_string(),
            ])
            .args([
                "--memcache-port",
                &mc.to_string(),
                "--megakv-port",
                &mkv.to_string(),
            ]),
        "shale",
    )?;
    let addrs = vec![
        ("resp", localhost(resp)),
        ("memcache", localhost(mc)),
        ("megakv", localhost(mkv)),
    ];
    let all: Vec<SocketAddr> = addrs.iter().map(|&(_, a)| a).collect();
    wait_for(&all, &mut child, "shale")?;
    Ok(ServerProcess { child, addrs })
}

/// memcached with `memory` bytes and `threads` worker threads (`-t`).
///
/// # Errors
/// If it cannot be started.
pub fn memcached(memory: u64, threads: usize) -> Result<ServerProcess> {
    let port = free_port()?;
    let mut command = Command::new("memcached");
    // SAFETY: geteuid only reads the process's credentials.
    if unsafe { libc::geteuid() } == 0 {
        command.args(["-u", "root"]);
    }
    let mut child = spawn(
        command
            .args(["-l", "127.0.0.1", "-U", "0", "-c", "4096"])
            .args(["-p", &port.to_string(), "-t", &threads.to_string()])
            .args(["-m", &(memory >> 20).max(1).to_string()]),
        "memcached",
    )?;
    let addrs = vec![("memcache", localhost(port))];
    wait_for(&[addrs[0].1], &mut child, "memcached")?;
    Ok(ServerProcess { child, addrs })
}

/// redis-server without persistence, with `maxmemory` and `allkeys-lru`.
///
/// # Errors
/// If it cannot be started.
pub fn redis(memory: u64) -> Result<ServerProcess> {
    let port = free_port()?;
    let mut child = spawn(
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
    let addrs = vec![("resp", localhost(port))];
    wait_for(&[addrs[0].1], &mut child, "redis-server")?;
    Ok(ServerProcess { child, addrs })
}
