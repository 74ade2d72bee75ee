//! Test harness: starts the real `shale` binary on a free loopback port with a temporary data
//! directory, and kills it when the guard drops (also when a test fails).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to start.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Socket read timeout for raw clients.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A running server.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub metrics_port: Option<u16>,
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    args: Vec<String>,
}

impl Server {
    /// Starts a server on a fresh temporary directory with extra `args`.
    pub fn start(args: &[&str]) -> Server {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("data");
        let mut s = Server::start_in(&dir, args);
        s._tmp = Some(tmp);
        s
    }

    /// Starts a server on `dir`.
    pub fn start_in(dir: &Path, args: &[&str]) -> Server {
        Server::start_logging(dir, args, Stdio::inherit())
    }

    /// Starts a server on `dir` whose log (stderr) goes to `stderr`.
    pub fn start_logging(dir: &Path, args: &[&str], stderr: Stdio) -> Server {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
            .arg("serve")
            .args(["--port", "0"])
            // Two connection threads unless the test picks its own number.
            .args(
                ["--threads", "2"]
                    .iter()
                    .filter(|_| !args.iter().any(|a| a == "--threads")),
            )
            .arg("--dir")
            .arg(dir)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start the shale binary");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut server = Server {
            child: Some(child),
            port: 0,
            metrics_port: None,
            dir: dir.to_path_buf(),
            _tmp: None,
            args,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while server.port == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("server did not start within {START_TIMEOUT:?}"));
            if let Some(rest) = line.strip_prefix("metrics on http://") {
                let port = rest.split(':').nth(1).and_then(|p| p.split('/').next());
                server.metrics_port = port.and_then(|p| p.parse().ok());
            }
            if let Some(addr) = line.strip_prefix("ready to accept connections on ") {
                server.port = addr.rsplit(':').next().unwrap().parse().unwrap();
            }
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || while rx.recv().is_ok() {});
        server
    }

    /// Restarts on the same directory with the same arguments (after a kill or shutdown).
    pub fn restart(mut self) -> Server {
        self.kill();
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let mut s = Server::start_in(&self.dir, &args);
        s._tmp = self._tmp.take();
        s
    }

    /// A `redis` crate connection.
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let con = client
            .get_connection_with_timeout(IO_TIMEOUT)
            .expect("connect");
        con.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        con
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// A raw TCP connection.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    /// SIGKILL, and wait.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` and waits up to `timeout` for the exit status.
    pub fn signal_and_wait(&mut self, signal: i32, timeout: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        self.wait(timeout)
    }

    /// Waits up to `timeout` for the server to exit.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit in {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends `bytes` and reads until `expect` replies' worth of bytes arrive or the socket closes;
/// returns what was read.
pub fn send_raw(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    stream.write_all(bytes).unwrap();
    read_available(stream)
}

/// Reads whatever arrives within a short quiet period (or until EOF).
pub fn read_available(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) if !out.is_empty() => break,
            Err(_) if Instant::now() > deadline => break,
            Err(_) => {}
        }
    }
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    out
}

/// Whether the peer closed the connection (reads EOF or a reset within the timeout).
pub fn is_closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// The path of an external tool, or `None` (with a skip message) when it is missing. On CI
/// (`CI` set) a missing tool fails the test: .ci/run installs it.
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is not installed, but CI is set: .ci/run must install redis-tools"
        );
        eprintln!("SKIPPED: {name} is not installed (apt-get install redis-tools); test skipped");
    }
    found
}
