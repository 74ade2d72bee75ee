//! Three real `shale serve` processes on loopback as a Raft cluster: clients write and read
//! through every node while the leader and a follower are killed (SIGKILL) and frozen
//! (SIGSTOP/SIGCONT) and restarted. Afterwards every acknowledged write is on every node, and
//! the history of a few contended keys (unique values; timeouts and errors as unknown outcomes)
//! is linearizable.
//!
//! `SHALE_CLUSTER_PROCESS_SECS` lengthens each phase of the run (default 2 seconds). A failed
//! run keeps its data directories and node logs and prints where they are, with each node's
//! `INFO replication` and log tail. `SHALE_TEST_BIN` runs another `shale` binary than the one
//! this test was built with (to compare builds with one test binary).

use shale_repl::lincheck::{self, Event, Op, Verdict};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NODES: usize = 3;
const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// A scratch directory that outlives a failed test, so its nodes' data and logs can be read.
struct Scratch(Option<tempfile::TempDir>);

impl Scratch {
    fn new() -> Scratch {
        Scratch(Some(tempfile::tempdir().unwrap()))
    }

    fn path(&self) -> &std::path::Path {
        self.0.as_ref().expect("scratch directory").path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(dir) = self.0.take() {
                eprintln!(
                    "test failed: data and logs kept in {}",
                    dir.keep().display()
                );
            }
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Node {
    id: usize,
    client_port: u16,
    dir: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl Node {
    fn start(&mut self) {
        let bin = std::env::var_os("SHALE_TEST_BIN")
            .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_shale")), PathBuf::from);
        let mut child = Command::new(bin)
            .arg("serve")
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .env("RUST_LOG", "info,openraft=info")
            .stdout(Stdio::piped())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.with_extension("log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            )
            .spawn()
            .expect("start shale");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("node {} did not start", self.id));
            if line.starts_with("ready to accept connections") {
                break;
            }
        }
        std::thread::spawn(move || while rx.recv().is_ok() {});
        self.child = Some(child);
    }

    fn signal(&self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(c.id() as i32, sig);
            }
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            self.signal(libc::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn client(&self) -> Option<redis::Connection> {
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}/", self.client_port)).ok()?;
        let con = client.get_connection_with_timeout(IO_TIMEOUT).ok()?;
        con.set_read_timeout(Some(IO_TIMEOUT)).ok()?;
        con.set_write_timeout(Some(IO_TIMEOUT)).ok()?;
        Some(con)
    }

    fn info(&self) -> Option<String> {
        let mut con = self.client()?;
        redis::cmd("INFO")
            .arg("replication")
            .query::<String>(&mut con)
            .ok()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

fn field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
}

fn leader(nodes: &[Node]) -> Option<usize> {
    nodes.iter().position(|n| {
        n.child.is_some()
            && n.info()
                .is_some_and(|i| field(&i, "raft_role").as_deref() == Some("leader"))
    })
}

fn wait_leader(nodes: &[Node], timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(l) = leader(nodes) {
            return l;
        }
        if Instant::now() >= deadline {
            let infos: Vec<String> = nodes
                .iter()
                .map(|n| {
                    let log =
                        std::fs::read_to_string(n.dir.with_extension("log")).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(25).collect();
                    format!(
                        "node {} ({}): {:?}\n{}",
                        n.id,
                        n.child.is_some(),
                        n.info(),
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    )
                })
                .collect();
            panic!("no leader within {timeout:?}: {infos:#?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A write a client got acknowledged, `at` microseconds into the run.
#[derive(Clone, Debug)]
struct Acked {
    key: String,
    value: String,
    at: u64,
}

/// One client bound to one node: writes unique keys (for the no-loss check) and contended keys
/// (for the linearizability check), and reads contended keys.
fn client_loop(
    node: usize,
    port: u16,
    stop: Arc<AtomicBool>,
    epoch: Instant,
    acked: Arc<Mutex<Vec<Acked>>>,
    history: Arc<Mutex<Vec<Event>>>,
) {
    let mut con: Option<redis::Connection> = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if con.is_none() {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
            con = client
                .get_connection_with_timeout(Duration::from_millis(500))
                .ok();
            if let Some(c) = &con {
                let _ = c.set_read_timeout(Some(IO_TIMEOUT));
                let _ = c.set_write_timeout(Some(IO_TIMEOUT));
            } else {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        }
        let c = con.as_mut().expect("connected");
        n += 1;
        let now = || epoch.elapsed().as_micros() as u64;
        let (key, write) = match n % 4 {
            0 => (format!("u{node}-{n}"), true),
            1 | 2 => (format!("c{}", n % 20), true),
            _ => (format!("c{}", n % 20), false),
        };
        let invoked = now();
        if write {
            let value = format!("n{node}-{n}");
            let r = redis::cmd("SET").arg(&key).arg(&value).query::<String>(c);
            let ok = matches!(&r, Ok(s) if s == "OK");
            if r.as_ref().is_err_and(|e| e.is_io_error() || e.is_timeout()) {
                con = None;
            }
            if ok && key.starts_with('u') {
                acked.lock().unwrap().push(Acked {
                    key: key.clone(),
                    value: value.clone(),
                    at: now(),
                });
            }
            if key.starts_with('c') {
                history.lock().unwrap().push(Event {
                    key: key.into_bytes(),
                    op: Op::Write(value.into_bytes()),
                    invoked,
                    returned: ok.then(now),
                });
            }
        } else {
            match redis::cmd("GET").arg(&key).query::<Option<String>>(c) {
                Ok(v) => history.lock().unwrap().push(Event {
                    key: key.into_bytes(),
                    op: Op::Read(v.map(String::into_bytes)),
                    invoked,
                    returned: Some(now()),
                }),
                Err(e) => {
                    if e.is_io_error() || e.is_timeout() {
                        con = None;
                    }
                }
            }
        }
    }
}

/// Starts three nodes in `tmp` and waits for a leader.
fn start_cluster(tmp: &std::path::Path) -> Vec<Node> {
    start_cluster_with(tmp, &[])
}

/// Starts three nodes in `tmp`, each with `extra` arguments too, and waits for a leader.
fn start_cluster_with(tmp: &std::path::Path, extra: &[&str]) -> Vec<Node> {
    let raft: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let client: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let peers: Vec<String> = (0..NODES)
        .map(|i| format!("{}=127.0.0.1:{}/127.0.0.1:{}", i + 1, raft[i], client[i]))
        .collect();
    let mut nodes: Vec<Node> = (0..NODES)
        .map(|i| Node {
            id: i + 1,
            client_port: client[i],
            dir: tmp.join(format!("n{}", i + 1)),
            args: vec!["--port".into(), client[i].to_string()]
                .into_iter()
                // Eight connection threads unless `extra` names a number.
                .chain(
                    ["--threads", "8"]
                        .iter()
                        .filter(|_| !extra.contains(&"--threads"))
                        .map(|a| a.to_string()),
                )
                .chain([
                    "--write-buffer-size".into(),
                    (1 << 20).to_string(),
                    "--node-id".into(),
                    (i + 1).to_string(),
                    "--raft-addr".into(),
                    format!("127.0.0.1:{}", raft[i]),
                    "--peers".into(),
                    peers.join(","),
                    "--heartbeat-ms".into(),
                    "100".into(),
                    "--election-timeout-ms".into(),
                    "800-1600".into(),
                ])
                .chain(extra.iter().map(|a| a.to_string()))
                .collect(),
            child: None,
        })
        .collect();
    for n in &mut nodes {
        n.start();
    }
    wait_leader(&nodes, Duration::from_secs(20));
    nodes
}

#[test]
fn a_three_process_cluster_survives_sigkill_and_sigstop_of_leader_and_follower() {
    let tmp = Scratch::new();
    kills_and_freezes_lose_nothing(start_cluster(tmp.path()));
}

/// A leader with one connection thread: a batch awaits its Raft entry without holding the
/// thread, so the thread goes on serving its other connections while a write waits for a
/// quorum (a batch that waited on the thread left every other client of the thread waiting
/// too); and a batch's key locks are released only once its entry is applied, so concurrent
/// INCRs of shared keys from many clients lose no increment.
#[test]
fn one_connection_thread_serves_others_while_a_write_waits_for_its_entry() {
    const CLIENTS: usize = 24;
    const ROUNDS: usize = 20;
    const SHARED: usize = 3;
    let tmp = Scratch::new();
    let nodes = start_cluster_with(tmp.path(), &["--threads", "1"]);
    let l = wait_leader(&nodes, Duration::from_secs(20));
    let port = nodes[l].client_port;
    // Every client INCRs the shared keys in turn; an increment that failed (a leadership
    // change on a loaded machine) may or may not be applied.
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                let mut acked = [0u64; SHARED];
                let mut unknown = [0u64; SHARED];
                let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .unwrap()
                    .get_connection_with_timeout(IO_TIMEOUT)
                    .expect("connect to the leader");
                con.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
                for r in 0..ROUNDS {
                    let k = (c + r) % SHARED;
                    match redis::cmd("INCR")
                        .arg(format!("ctr{k}"))
                        .query::<i64>(&mut con)
                    {
                        Ok(_) => acked[k] += 1,
                        Err(_) => unknown[k] += 1,
                    }
                }
                (acked, unknown)
            })
        })
        .collect();
    let mut acked = [0u64; SHARED];
    let mut unknown = [0u64; SHARED];
    for t in clients {
        let (a, u) = t.join().unwrap();
        for k in 0..SHARED {
            acked[k] += a[k];
            unknown[k] += u[k];
        }
    }
    let l = wait_leader(&nodes, Duration::from_secs(20));
    let mut con = nodes[l].client().expect("connect to the leader");
    for k in 0..SHARED {
        let got: Option<u64> = query(&mut con, &["GET", &format!("ctr{k}")]);
        let got = got.unwrap_or(0);
        assert!(
            (acked[k]..=acked[k] + unknown[k]).contains(&got),
            "ctr{k} = {got} after {} acknowledged and {} failed increments",
            acked[k],
            unknown[k]
        );
    }

    // The followers freeze: a write on the leader waits for a quorum, and meanwhile the
    // leader's only connection thread still answers another client.
    let _: () = query(&mut con, &["SET", "before", "1"]);
    for (i, n) in nodes.iter().enumerate() {
        if i != l {
            n.signal(libc::SIGSTOP);
        }
    }
    let port = nodes[l].client_port;
    let writer = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection_with_timeout(IO_TIMEOUT)
            .expect("connect to the leader");
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        redis::cmd("SET")
            .arg("waits")
            .arg("1")
            .query::<String>(&mut c)
    });
    std::thread::sleep(Duration::from_millis(300));
    let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut con);
    let waiting = !writer.is_finished();
    for (i, n) in nodes.iter().enumerate() {
        if i != l {
            n.signal(libc::SIGCONT);
        }
    }
    assert_eq!(
        pong.as_deref().ok(),
        Some("PONG"),
        "PING while a write waited for a quorum: {pong:?}"
    );
    assert!(
        waiting,
        "the write returned without a quorum: {:?}",
        writer.join()
    );
    let written = writer.join().unwrap();
    assert!(
        written.is_err() || written.as_deref().ok() == Some("OK"),
        "{written:?}"
    );
}

/// The same schedule in rubble mode (only the leader flushes and compacts); then, with the
/// followers restarted (kill -9) and enough data written for flushes and compactions, the
/// followers' INFO shows no flush or compaction of their own, only installed edits.
#[test]
fn a_three_process_rubble_cluster_survives_kills_and_only_its_leader_compacts() {
    let tmp = Scratch::new();
    let rubble = ["--replication-mode", "rubble"];
    let mut nodes = kills_and_freezes_lose_nothing(start_cluster_with(tmp.path(), &rubble));
    let l = wait_leader(&nodes, Duration::from_secs(10));
    for f in (0..NODES).filter(|&f| f != l) {
        nodes[f].kill();
        nodes[f].start();
    }
    let l = wait_leader(&nodes, Duration::from_secs(10));
    let mut con = nodes[l].client().expect("connect to the leader");
    let value = "r".repeat(1000);
    for round in 0..12 {
        let mut pipe = redis::pipe();
        for i in 0..400 {
            pipe.cmd("SET")
                .arg(format!("bulk{}", (round * 400 + i) % 1500))
                .arg(&value)
                .ignore();
        }
        let _: () = pipe.query(&mut con).expect("bulk writes");
    }
    let persistence = |n: &Node| -> String {
        let mut con = n.client().expect("connect");
        redis::cmd("INFO")
            .arg("persistence")
            .query(&mut con)
            .expect("INFO persistence")
    };
    let count = |info: &str, name: &str| -> u64 {
        field(info, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {info}"))
    };
    // The followers catch up with the leader's installs.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let leader_info = nodes[l].info().expect("INFO of the leader");
        let proposed = count(&leader_info, "rubble_edits_proposed");
        let installed: Vec<u64> = (0..NODES)
            .filter(|&f| f != l)
            .map(|f| {
                let i = nodes[f].info().expect("INFO of a follower");
                assert_eq!(
                    field(&i, "raft_replication_mode").as_deref(),
                    Some("rubble")
                );
                count(&i, "rubble_edits_installed")
            })
            .collect();
        if proposed >= 2 && installed.iter().all(|&n| n >= 2) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "followers installed {installed:?} of {proposed} proposed edits: {leader_info}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let leader_persistence = persistence(&nodes[l]);
    assert!(
        count(&leader_persistence, "shale_flushes") > 0,
        "{leader_persistence}"
    );
    for f in (0..NODES).filter(|&f| f != l) {
        let p = persistence(&nodes[f]);
        // Restarted above, a follower that led no job term since (a loaded machine may move
        // the leadership) ran no job.
        let info = nodes[f].info().expect("INFO of a follower");
        if count(&info, "rubble_job_terms") == 0 {
            assert_eq!(
                (count(&p, "shale_flushes"), count(&p, "shale_compactions")),
                (0, 0),
                "follower {} flushed or compacted by itself: {p}",
                nodes[f].id
            );
        }
        let mut con = nodes[f].client().expect("connect");
        let _: () = redis::cmd("READONLY").query(&mut con).unwrap();
        let got: Option<String> = redis::cmd("GET").arg("bulk7").query(&mut con).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(value.as_str()),
            "follower {}",
            nodes[f].id
        );
    }
}

/// Clients write and read through every node while the leader and a follower are killed
/// (SIGKILL) and frozen (SIGSTOP) and restarted; then every acknowledged write is on every
/// node and the contended keys' history is linearizable. Returns the running nodes.
fn kills_and_freezes_lose_nothing(mut nodes: Vec<Node>) -> Vec<Node> {
    let phase = Duration::from_secs(
        std::env::var("SHALE_CLUSTER_PROCESS_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2),
    );
    let client: Vec<u16> = nodes.iter().map(|n| n.client_port).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let history = Arc::new(Mutex::new(Vec::new()));
    let epoch = Instant::now();
    let clients: Vec<_> = (0..NODES)
        .map(|i| {
            let (stop, acked, history) = (stop.clone(), acked.clone(), history.clone());
            let port = client[i];
            std::thread::spawn(move || client_loop(i, port, stop, epoch, acked, history))
        })
        .collect();

    let mut timeline = Vec::new();
    let mut mark = |what: String| {
        timeline.push(format!("{:8.3} s {what}", epoch.elapsed().as_secs_f64()));
    };
    std::thread::sleep(phase);
    // The leader dies; a new one is elected; the old one comes back as a follower.
    let l = wait_leader(&nodes, Duration::from_secs(10));
    mark(format!("SIGKILL leader node {}", nodes[l].id));
    nodes[l].kill();
    std::thread::sleep(phase);
    nodes[l].start();
    mark(format!("node {} restarted", nodes[l].id));
    std::thread::sleep(phase);
    // A follower freezes, then resumes.
    let l = wait_leader(&nodes, Duration::from_secs(10));
    let f = (l + 1) % NODES;
    mark(format!(
        "SIGSTOP follower node {} (leader node {})",
        nodes[f].id, nodes[l].id
    ));
    nodes[f].signal(libc::SIGSTOP);
    std::thread::sleep(phase);
    nodes[f].signal(libc::SIGCONT);
    mark(format!("SIGCONT node {}", nodes[f].id));
    std::thread::sleep(phase);
    // A follower dies and comes back.
    let l = wait_leader(&nodes, Duration::from_secs(10));
    let f = (l + 2) % NODES;
    mark(format!(
        "SIGKILL follower node {} (leader node {})",
        nodes[f].id, nodes[l].id
    ));
    nodes[f].kill();
    std::thread::sleep(phase);
    nodes[f].start();
    mark(format!("node {} restarted", nodes[f].id));
    std::thread::sleep(phase);
    // The leader freezes: the others elect a new one; it resumes as a deposed leader.
    let l = wait_leader(&nodes, Duration::from_secs(10));
    mark(format!("SIGSTOP leader node {}", nodes[l].id));
    nodes[l].signal(libc::SIGSTOP);
    std::thread::sleep(phase * 2);
    nodes[l].signal(libc::SIGCONT);
    mark(format!("SIGCONT node {}", nodes[l].id));
    std::thread::sleep(phase);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    mark("clients stopped".into());

    // Every node applies everything the leader holds in its log (which includes every
    // acknowledged write), and then holds every acknowledged write.
    let l = wait_leader(&nodes, Duration::from_secs(10));
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 50,
        "clients got writes acknowledged: {}",
        acked.len()
    );
    let target = nodes[l]
        .info()
        .and_then(|i| field(&i, "raft_last_log_index"))
        .and_then(|v| v.parse::<u64>().ok())
        .expect("the leader's last log index");
    mark(format!(
        "leader node {} holds log index {target}",
        nodes[l].id
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in &nodes {
        loop {
            let applied = n
                .info()
                .and_then(|i| field(&i, "raft_applied_index"))
                .and_then(|v| v.parse::<u64>().ok());
            if applied.is_some_and(|a| a >= target) {
                break;
            }
            if Instant::now() >= deadline {
                panic!(
                    "node {} applied {applied:?}, not index {target}, within 30 s\n{}",
                    n.id,
                    report(&nodes, &timeline)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let missing = missing_writes(n, &acked);
        if !missing.is_empty() {
            panic!(
                "node {} lacks {} of {} acknowledged writes after applying index {target}; \
                 the first: {:?}\n{}",
                n.id,
                missing.len(),
                acked.len(),
                missing
                    .iter()
                    .take(5)
                    .map(|a| format!(
                        "{}={} (acknowledged at {:.3} s)",
                        a.key,
                        a.value,
                        a.at as f64 / 1e6
                    ))
                    .collect::<Vec<_>>(),
                report(&nodes, &timeline)
            );
        }
    }
    let history = history.lock().unwrap().clone();
    let reads = history
        .iter()
        .filter(|e| matches!(e.op, Op::Read(_)))
        .count();
    assert!(reads > 20, "clients read: {reads}");
    assert_eq!(lincheck::check(&history), Verdict::Linearizable);
    let info = nodes[wait_leader(&nodes, Duration::from_secs(5))]
        .info()
        .unwrap();
    assert_eq!(
        field(&info, "connected_slaves").as_deref(),
        Some("2"),
        "{info}"
    );
    eprintln!(
        "{} acknowledged unique writes, {} contended operations",
        acked.len(),
        history.len()
    );
    nodes
}

/// The acknowledged writes that a READONLY connection to `node` does not read back.
fn missing_writes(node: &Node, acked: &[Acked]) -> Vec<Acked> {
    let mut con = node.client().expect("connect");
    let _: () = redis::cmd("READONLY").query(&mut con).unwrap();
    let mut missing = Vec::new();
    for chunk in acked.chunks(500) {
        let mut pipe = redis::pipe();
        for a in chunk {
            pipe.cmd("GET").arg(&a.key);
        }
        let got: Vec<Option<String>> = pipe.query(&mut con).expect("GET the acknowledged keys");
        missing.extend(
            chunk
                .iter()
                .zip(got)
                .filter(|(a, v)| v.as_ref() != Some(&a.value))
                .map(|(a, _)| a.clone()),
        );
    }
    missing
}

/// What a failed run prints: the schedule, and each node's INFO replication and log tail.
fn report(nodes: &[Node], timeline: &[String]) -> String {
    let mut out = format!("timeline:\n{}\n", timeline.join("\n"));
    for n in nodes {
        let log = std::fs::read_to_string(n.dir.with_extension("log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        out += &format!(
            "--- node {} (running: {}, dir {}):\n{}\n--- its log's tail:\n{}\n",
            n.id,
            n.child.is_some(),
            n.dir.display(),
            n.info().unwrap_or_else(|| "no INFO answer".into()),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    out
}

fn query<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// A follower's connection keeps its own state (selected database, protocol) while its data
/// commands run on the leader; transactions and blocking pops work through it; after the
/// leader dies, the new leader's key counts are the replicated ones.
#[test]
fn a_follower_connection_selects_databases_runs_transactions_and_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let mut nodes = start_cluster(tmp.path());
    let l = wait_leader(&nodes, Duration::from_secs(10));
    let f = (l + 1) % NODES;
    // Until the follower hears from the leader it answers TRYAGAIN.
    let deadline = Instant::now() + Duration::from_secs(10);
    while nodes[f]
        .info()
        .is_none_or(|i| field(&i, "master_link_status").as_deref() != Some("up"))
    {
        assert!(Instant::now() < deadline, "the follower knows no leader");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut fc = nodes[f].client().expect("connect to a follower");
    let mut lc = nodes[l].client().expect("connect to the leader");

    // SELECT runs on the follower's connection; the data commands go to the leader's db 2.
    let _: () = query(&mut fc, &["SELECT", "2"]);
    let _: () = query(&mut fc, &["SET", "k", "v2"]);
    let _: () = query(&mut fc, &["SET", "j", "w2"]);
    assert_eq!(
        query::<Option<String>>(&mut fc, &["GET", "k"]).as_deref(),
        Some("v2")
    );
    assert_eq!(query::<Option<String>>(&mut lc, &["GET", "k"]), None);
    let _: () = query(&mut lc, &["SELECT", "2"]);
    assert_eq!(
        query::<Option<String>>(&mut lc, &["GET", "k"]).as_deref(),
        Some("v2")
    );
    assert_eq!(query::<u64>(&mut fc, &["DBSIZE"]), 2);

    // A transaction through the follower is one batch on the leader.
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("n")
        .cmd("INCR")
        .arg("n")
        .query(&mut fc)
        .expect("MULTI/EXEC through a follower");
    assert_eq!((a, b), (1, 2));
    // WATCH: a write by another client between WATCH and EXEC aborts the transaction.
    let _: () = query(&mut fc, &["WATCH", "n"]);
    let _: () = query(&mut lc, &["SET", "n", "10"]);
    let _: () = query(&mut fc, &["MULTI"]);
    let _: String = query(&mut fc, &["INCR", "n"]);
    let aborted: Option<Vec<i64>> = query(&mut fc, &["EXEC"]);
    assert_eq!(aborted, None, "EXEC after a WATCHed key changed");
    assert_eq!(query::<i64>(&mut fc, &["GET", "n"]), 10);
    // The connection is still in db 2 after the transaction.
    assert_eq!(
        query::<Option<String>>(&mut fc, &["GET", "j"]).as_deref(),
        Some("w2")
    );

    // A blocking pop through the follower is served by a push on the leader.
    let port = nodes[f].client_port;
    let popper = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection_with_timeout(IO_TIMEOUT)
            .unwrap();
        let _: () = query(&mut c, &["SELECT", "2"]);
        query::<Option<(String, String)>>(&mut c, &["BLPOP", "q", "20"])
    });
    std::thread::sleep(Duration::from_millis(500));
    let _: i64 = query(&mut lc, &["RPUSH", "q", "x"]);
    assert_eq!(
        popper.join().unwrap(),
        Some(("q".to_string(), "x".to_string()))
    );
    let mut cmd = redis::cmd("SWAPDB");
    cmd.arg(0).arg(1);
    assert!(
        cmd.query::<()>(&mut fc).is_err(),
        "SWAPDB on a cluster node"
    );

    // The leader dies: the new leader counts db 2's keys as replicated and keeps counting.
    nodes[l].kill();
    let l2 = wait_leader(&nodes, Duration::from_secs(20));
    let mut c2 = nodes[l2].client().expect("connect to the new leader");
    let _: () = query(&mut c2, &["SELECT", "2"]);
    assert_eq!(query::<u64>(&mut c2, &["DBSIZE"]), 3, "k, j, n");
    let _: () = query(&mut c2, &["SET", "m", "1"]);
    assert_eq!(query::<u64>(&mut c2, &["DBSIZE"]), 4);
    let _: i64 = query(&mut c2, &["DEL", "k"]);
    assert_eq!(query::<u64>(&mut c2, &["DBSIZE"]), 3);
}
