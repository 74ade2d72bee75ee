//! Server hardening (regression tests for issue 18): the open-file limit (defect 2), large
//! values (defect 5), failed AUTH attempts (defect 7) and the warning for a public address
//! without a password (defect 7).

mod common;

use common::Server;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Held by the tests that measure time or CPU, so they do not run beside each other on a small
/// machine.
static TIMED: Mutex<()> = Mutex::new(());

fn timed() -> std::sync::MutexGuard<'static, ()> {
    TIMED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server started with its stdout lines up to "ready"; killed on drop.
struct Started {
    child: Child,
    port: u16,
    banner: Vec<String>,
    dir: Option<tempfile::TempDir>,
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `shale serve` on a new data directory with `args`, under an open-file limit of
/// `nofile` when given.
fn start(args: &[&str], nofile: Option<u64>) -> Started {
    let dir = tempfile::tempdir().unwrap();
    let mut started = start_in(&dir.path().join("data"), args, nofile);
    started.dir = Some(dir);
    started
}

/// Starts `shale serve` on `data`.
fn start_in(data: &std::path::Path, args: &[&str], nofile: Option<u64>) -> Started {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shale"));
    cmd.arg("serve")
        .args(["--port", "0", "--dir"])
        .arg(data)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(n) = nofile {
        // SAFETY: the closure runs in the forked child before exec and only calls setrlimit, which
        // is async-signal-safe; it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().expect("start the shale binary");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut banner = Vec::new();
    let deadline = Instant::now() + common::START_TIMEOUT;
    let port = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).expect("the server did not start");
        if let Some(addr) = line.strip_prefix("ready to accept connections on ") {
            break addr.rsplit(':').next().unwrap().parse().unwrap();
        }
        banner.push(line);
    };
    std::thread::spawn(move || while rx.recv().is_ok() {});
    Started {
        child,
        port,
        banner,
        dir: None,
    }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(common::IO_TIMEOUT)).unwrap();
    s
}

/// Sends one inline command and reads one reply line.
fn call(s: &mut TcpStream, command: &str) -> String {
    s.write_all(format!("{command}\r\n").as_bytes()).unwrap();
    read_line(s, command)
}

/// Reads one reply line (without its line end).
fn read_line(s: &mut TcpStream, command: &str) -> String {
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => reply.push(byte[0]),
            Ok(_) => break,
            Err(e) => panic!("no reply to {command}: {e}"),
        }
    }
    String::from_utf8_lossy(&reply).trim_end().to_owned()
}

/// CPU seconds (user + system) the process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf only reads a constant of the system.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

#[test]
fn regression_issue_18_a_low_open_file_limit_lowers_maxclients_and_never_spins() {
    let _timed = timed();
    let server = start(&["--threads", "2"], Some(128));
    let warning = server
        .banner
        .iter()
        .find(|l| l.contains("maxclients lowered to"))
        .unwrap_or_else(|| panic!("no warning in {:?}", server.banner));
    let maxclients: usize = warning
        .split("maxclients lowered to ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(maxclients < 128, "{warning}");
    // More clients than descriptors: each is served or told the server is full; none hangs.
    let mut clients = Vec::new();
    let (mut served, mut refused) = (0, 0);
    for _ in 0..200 {
        let mut s = connect(server.port);
        match call(&mut s, "PING").as_str() {
            "+PONG" => served += 1,
            "-ERR max number of clients reached" | "" => refused += 1,
            other => panic!("unexpected reply {other:?}"),
        }
        clients.push(s);
    }
    assert!(served >= maxclients / 2, "served {served} of {maxclients}");
    assert!(refused > 0);
    // Held connections cost no CPU: the accept loop does not spin.
    let pid = server.child.id();
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_millis(1500));
    let used = cpu_seconds(pid) - before;
    assert!(
        used < 0.3,
        "the server used {used:.2} s of CPU in 1.5 s while idle"
    );
    drop(clients);
}

#[test]
fn regression_issue_18_failed_auth_attempts_are_slowed_and_counted() {
    let _timed = timed();
    let server = start(&["--threads", "2", "--requirepass", "s3cret"], None);
    let mut guesser = connect(server.port);
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let reply = call(&mut guesser, "AUTH wrong");
        assert!(reply.starts_with("-WRONGPASS"), "{reply}");
        times.push(start.elapsed());
    }
    assert!(times[0] < Duration::from_millis(400), "{times:?}");
    assert!(times[4] >= Duration::from_millis(600), "{times:?}");
    // Other connections are not slowed meanwhile.
    let mut user = connect(server.port);
    assert_eq!(call(&mut user, "AUTH s3cret"), "+OK");
    let waiting = std::thread::spawn(move || call(&mut guesser, "AUTH wrong"));
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    assert_eq!(call(&mut user, "PING"), "+PONG");
    assert!(start.elapsed() < Duration::from_millis(300));
    assert!(waiting.join().unwrap().starts_with("-WRONGPASS"));
    user.write_all(b"INFO stats\r\n").unwrap();
    let info = String::from_utf8_lossy(&common::read_available(&mut user)).into_owned();
    assert!(info.contains("acl_access_denied_auth:6"), "{info}");
}

#[test]
fn regression_issue_18_a_public_address_without_a_password_warns() {
    let warned = |s: &Started| s.banner.iter().any(|l| l.contains("without requirepass"));
    // Only loopback traffic: the test connects to 127.0.0.1 and stops the server at once.
    let public = start(&["--bind", "0.0.0.0"], None);
    assert!(warned(&public), "{:?}", public.banner);
    assert_eq!(call(&mut connect(public.port), "PING"), "+PONG");
    drop(public);
    let guarded = start(&["--bind", "0.0.0.0", "--requirepass", "x"], None);
    assert!(!warned(&guarded), "{:?}", guarded.banner);
    drop(guarded);
    let local = start(&[], None);
    assert!(!warned(&local), "{:?}", local.banner);
}

#[test]
fn regression_issue_18_a_large_value_does_not_stall_the_other_clients_of_its_thread() {
    let _timed = timed();
    // One connection thread: the writer of the large value and the reader share it.
    let server = start(&["--threads", "1"], None);
    let mut reader = connect(server.port);
    assert_eq!(call(&mut reader, "SET small v"), "+OK");
    let port = server.port;
    let len = 60 << 20;
    let began = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut w = connect(port);
        w.set_read_timeout(Some(LARGE_WRITE_TIMEOUT)).unwrap();
        let mut request = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${len}\r\n").into_bytes();
        request.resize(request.len() + len, b'x');
        request.extend_from_slice(b"\r\n");
        w.write_all(&request).unwrap();
        call(&mut w, "PING")
    });
    let mut worst = Duration::ZERO;
    let mut reads = 0;
    while !writer.is_finished() {
        let start = Instant::now();
        assert_eq!(call(&mut reader, "GET small"), "$1");
        assert_eq!(read_line(&mut reader, "GET small"), "v");
        worst = worst.max(start.elapsed());
        reads += 1;
    }
    assert_eq!(writer.join().unwrap(), "+OK");
    let write = began.elapsed();
    eprintln!("{reads} reads while a {len}-byte value was written in {write:?}; worst {worst:?}");
    assert!(reads > 10, "{reads}");
    // Before the fix a read on the writer's thread waited while the whole value was handled.
    // On a loaded machine everything slows alike (335 ms was seen in a 2-core CI run at load
    // 12), so the bound is 250 ms or a fifth of the large write's own time, whichever is more.
    assert!(
        worst < Duration::from_millis(250).max(write / 5),
        "a read waited {worst:?} of a {write:?} write"
    );
    assert_eq!(call(&mut reader, "STRLEN big"), format!(":{len}"));
}

#[test]
fn regression_issue_18_info_keyspace_says_unknown_instead_of_a_wrong_count() {
    // A small memtable, so the keys land in SSTs.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shale.toml");
    std::fs::write(&config, "write-buffer-size = 65536\n").unwrap();
    let server = start(
        &["--threads", "2", "--config", config.to_str().unwrap()],
        None,
    );
    let mut c = connect(server.port);
    for i in 0..3000 {
        assert_eq!(
            call(&mut c, &format!("SET key{i:05} {}", "v".repeat(100))),
            "+OK"
        );
    }
    c.write_all(b"INFO keyspace\r\n").unwrap();
    let info = String::from_utf8_lossy(&common::read_available(&mut c)).into_owned();
    assert!(info.contains("db0:keys=3000,"), "{info}");
    let mut server = server;
    let tmp = server.dir.take().unwrap();
    let data = tmp.path().join("data");
    drop(server);
    // Damage the middle of every SST.
    let mut damaged = 0;
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sst") {
            let mut bytes = std::fs::read(&path).unwrap();
            let mid = bytes.len() / 3;
            for b in &mut bytes[mid..mid + 64] {
                *b ^= 0x5a;
            }
            std::fs::write(&path, bytes).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged > 0, "no SST to damage");
    let server = start_in(
        &data,
        &["--threads", "2", "--config", config.to_str().unwrap()],
        None,
    );
    let mut c = connect(server.port);
    c.write_all(b"INFO keyspace\r\n").unwrap();
    let info = String::from_utf8_lossy(&common::read_available(&mut c)).into_owned();
    // The key count is a record kept with every batch (issue 16), not a walk: damaged data does
    // not make it wrong. (A walk of the expiry index that met damage would say "unknown".)
    assert!(info.contains("db0:keys=3000,"), "{info}");
    assert!(!info.contains("shale_keyspace_unknown:"), "{info}");
}

const MB: usize = 1_000_000;
/// The values written, as the issue's tester wrote them.
const SIZES: [usize; 3] = [100 * MB, 200 * MB, 300 * MB];

/// `VmHWM` (peak resident memory) of process `pid`, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kb * 1024
}

/// Runs `op` on its own connection until `stop`, returning each call's latency.
fn probe(
    server: &Server,
    stop: Arc<AtomicBool>,
    op: fn(&mut redis::Connection, u64),
) -> std::thread::JoinHandle<Vec<Duration>> {
    let mut con = server.client();
    std::thread::spawn(move || {
        // In chunks: a `Vec` that doubles copies all it holds at once, a stretch of CPU that
        // can preempt the server's connection thread on a two-core machine.
        let mut took: Vec<Vec<Duration>> = Vec::new();
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let start = Instant::now();
            op(&mut con, i);
            let elapsed = start.elapsed();
            match took.last_mut() {
                Some(c) if c.len() < c.capacity() => c.push(elapsed),
                _ => {
                    let mut c = Vec::with_capacity(64 << 10);
                    c.push(elapsed);
                    took.push(c);
                }
            }
            i += 1;
        }
        took.concat()
    })
}

/// How long a connection that writes large values (or waits for their locks) waits for a
/// reply. The other clients keep `common::IO_TIMEOUT`: their waits are what the tests bound. On
/// a busy two-core machine (load 24 and more) a 300 MB write got 2-5% of a CPU and took over
/// 10 s, and its own timeout, not a stall of anyone else, failed the test.
const LARGE_WRITE_TIMEOUT: Duration = Duration::from_secs(180);

/// A `redis` connection to `server` that waits [`LARGE_WRITE_TIMEOUT`] for a reply.
fn patient_client(server: &Server) -> redis::Connection {
    let con = server.client();
    con.set_read_timeout(Some(LARGE_WRITE_TIMEOUT)).unwrap();
    con
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    sorted[at - 1]
}

#[test]
fn regression_issue_18_large_values_stall_no_one_and_cost_twice_their_size() {
    let _timed = timed();
    let server = Server::start(&["--proto-max-bulk-len", "536870912"]);
    let mut writer = patient_client(&server);
    for i in 0..1000 {
        redis::cmd("SET")
            .arg(format!("small{i}"))
            .arg("v")
            .query::<()>(&mut writer)
            .unwrap();
    }
    let largest = *SIZES.iter().max().unwrap();
    let value = vec![b'x'; largest];
    let before = peak_rss(server.pid());

    let stop = Arc::new(AtomicBool::new(false));
    let gets = probe(&server, stop.clone(), |c, i| {
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("small{}", i % 1000))
            .query(c)
            .unwrap();
        assert_eq!(v.as_deref(), Some("v"));
    });
    let sets = probe(&server, stop.clone(), |c, i| {
        redis::cmd("SET")
            .arg(format!("other{}", i % 1000))
            .arg("w")
            .query::<()>(c)
            .unwrap();
    });
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let mut slowest_write = Duration::ZERO;
    for (n, &size) in SIZES.iter().enumerate() {
        let one = Instant::now();
        redis::cmd("SET")
            .arg(format!("big{n}"))
            .arg(&value[..size])
            .query::<()>(&mut writer)
            .unwrap();
        slowest_write = slowest_write.max(one.elapsed());
    }
    let wrote = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut gets = gets.join().unwrap();
    let mut sets = sets.join().unwrap();
    let after = peak_rss(server.pid());

    for (n, &size) in SIZES.iter().enumerate() {
        let len: usize = redis::cmd("STRLEN")
            .arg(format!("big{n}"))
            .query(&mut writer)
            .unwrap();
        assert_eq!(len, size);
    }
    let back: Vec<u8> = redis::cmd("GET").arg("big0").query(&mut writer).unwrap();
    assert!(back == value[..SIZES[0]], "big0 reads back wrong");

    gets.sort_unstable();
    sets.sort_unstable();
    let growth = after.saturating_sub(before) as f64 / largest as f64;
    eprintln!(
        "wrote {} MB in {wrote:?} (slowest write {slowest_write:?}); other clients: {} GETs p99 \
         {:?} max {:?}, {} SETs p99 {:?} max {:?}; peak RSS grew {:.2}x the largest value \
         ({before} -> {after} bytes)",
        SIZES.iter().sum::<usize>() / MB,
        gets.len(),
        percentile(&gets, 0.99),
        gets.last().unwrap(),
        sets.len(),
        percentile(&sets, 0.99),
        sets.last().unwrap(),
        growth,
    );
    assert!(gets.len() > 20 && sets.len() > 20, "the probes barely ran");
    // Before the fix a large SET held every other key-creating writer for its whole WAL append
    // and memtable copy (2.7 s measured) and the server peaked at about 4.4x the value. The
    // bounds leave room for a busy two-core test machine, where 547 ms and 990 ms were seen
    // with the fix in place (the figures of a quiet run are in the issue's note). A stalled
    // client waits for most of a large write, so where starvation stretches the writes (a 300
    // MB write took over 10 s at load 24, and the probes then waited up to 2 s) the bound is a
    // third of the slowest write instead, whichever is more.
    let bound = Duration::from_millis(1500).max(slowest_write / 3);
    assert!(
        *gets.last().unwrap() < bound,
        "a GET waited {:?} (the slowest large write took {slowest_write:?})",
        gets.last()
    );
    assert!(
        *sets.last().unwrap() < bound,
        "a SET waited {:?} (the slowest large write took {slowest_write:?})",
        sets.last()
    );
    assert!(
        growth < 2.6,
        "peak memory grew {growth:.2}x the largest value"
    );
}

/// The lock stripe of `key` in the server's table (`store::locks`: FNV-1a with a final mix,
/// 65,536 stripes).
fn stripe_of(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    (h ^ (h >> 29)) % 65536
}

/// `field:N` of `INFO stats`.
fn info_stat(con: &mut redis::Connection, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO stats"))
}

#[test]
fn regression_issue_18_a_write_behind_a_large_one_stalls_no_other_connection() {
    let _timed = timed();
    // One connection thread: every connection shares it.
    let server = Server::start(&["--proto-max-bulk-len", "536870912", "--threads", "1"]);
    let mut setup = server.client();
    redis::cmd("SET")
        .arg("other")
        .arg("v")
        .query::<()>(&mut setup)
        .unwrap();
    // A small key whose lock stripe is the large value's: its writes wait for the large write.
    let twin = (0..)
        .map(|i| format!("twin{i}"))
        .find(|k| stripe_of(k.as_bytes()) == stripe_of(b"big"))
        .unwrap();
    let value = vec![b'x'; 200 * MB];

    let stop = Arc::new(AtomicBool::new(false));
    let gets = probe(&server, stop.clone(), |c, _| {
        let v: Option<String> = redis::cmd("GET").arg("other").query(c).unwrap();
        assert_eq!(v.as_deref(), Some("v"));
    });
    let twins = {
        // The twin's SETs wait for whole large writes: as long as the writer's own.
        let mut con = patient_client(&server);
        let stop = stop.clone();
        let twin = twin.clone();
        std::thread::spawn(move || {
            let mut took = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let start = Instant::now();
                redis::cmd("SET")
                    .arg(&twin)
                    .arg("w")
                    .query::<()>(&mut con)
                    .unwrap();
                took.push(start.elapsed());
            }
            took
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let mut writer = patient_client(&server);
    // Three writes: the twin's SETs meet each one's lock as soon as it is taken.
    let start = Instant::now();
    for _ in 0..3 {
        redis::cmd("SET")
            .arg("big")
            .arg(&value)
            .query::<()>(&mut writer)
            .unwrap();
    }
    let wrote = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut gets = gets.join().unwrap();
    let mut twins = twins.join().unwrap();
    gets.sort_unstable();
    twins.sort_unstable();
    let busy = info_stat(&mut setup, "shale_busy_batches");
    eprintln!(
        "wrote 3 x 200 MB in {wrote:?}; {} GETs p99 {:?} max {:?}; {} SETs of {twin} (the large \
         value's stripe) max {:?}; {busy} batches waited off the connection thread",
        gets.len(),
        percentile(&gets, 0.99),
        gets.last().unwrap(),
        twins.len(),
        twins.last().unwrap(),
    );
    let len: usize = redis::cmd("STRLEN").arg("big").query(&mut setup).unwrap();
    assert_eq!(len, value.len());
    let v: String = redis::cmd("GET").arg(&twin).query(&mut setup).unwrap();
    assert_eq!(v, "w");
    // The twin's SETs waited for the large write's lock off the connection thread, so the
    // thread's other connection went on. Before the fix a twin's SET held the only connection
    // thread until the large value was on disk, and every GET behind it waited as long (0.29-1.4
    // s, each within a few ms of the twin's wait). A GET may wait 250 ms or half the twin's
    // longest wait, whichever is more: on a two-core machine at load 13-16, GETs waited 290-700
    // ms with the fix while the twin waited 1.7-5.1 s (a fifth of it at most), and the twin's
    // wait is what a stalled GET would have matched.
    assert!(gets.len() > 20, "the GETs barely ran");
    let twin_waited = *twins.last().unwrap();
    let bound = Duration::from_millis(250).max(twin_waited / 2);
    assert!(
        *gets.last().unwrap() < bound,
        "a GET waited {:?}, the twin's SET {twin_waited:?} (the large write took {wrote:?})",
        gets.last()
    );
    // The case was exercised: a SET of the twin met the large write's lock.
    assert!(busy > 0, "no batch met the large write's lock");
}
