//! `shale-bench cluster-bench`: a replicated Shale cluster against one Shale node and against
//! Redis with replicas, side by side.
//!
//! Four setups, each started fresh on loopback ports and temporary directories for every run:
//! `rf3`, three `shale serve` processes forming a Raft cluster (the load goes to the leader);
//! `rubble3`, the same in `--replication-mode rubble` (only the leader flushes and compacts and
//! ships the files: the A/B comparison of the replication modes);
//! `always`, one `shale serve --appendfsync always`; `redis3`, a Redis primary and two
//! `replicaof` processes with `appendfsync everysec` (what Redis users run for availability).
//! Against each: `redis-benchmark -t set,get -c 50 -d 100 -P 16`, then YCSB load and workload A
//! through the RESP backend (1 KiB values by default, 16 threads), and with `--workloads a,g`
//! workload G (100% updates) on the loaded records. Setups alternate their order between rounds;
//! the report gives medians over rounds of throughput, p99 and p99.9, the CPU-seconds of every
//! server process (from `/proc/PID/stat`; for the clusters split into the leader and the
//! followers, per million operations, and its inverse: operations per server CPU-second), the
//! bytes each process wrote to storage (`/proc/PID/io`), the followers' own flushes and
//! compactions, the bytes the leader shipped as files and sent as Raft messages (from `INFO`),
//! where the clusters' time went, for the leader and the followers summed (GC bytes written,
//! engine write stalls, rubble mode's install stall, entries held back by write pressure, and
//! the applier's seconds on `InstallEdit` entries, installing and waiting for files), bytes on
//! disk per node, the ratios the issues' targets name, and a two-thread CPU check per round.
//! Each role's CPU-seconds are also split by the server's thread names (`shale-raft`: the Raft
//! runtime, which receives and applies entries into the memtable; `shale-raft-log-sync`: the
//! log's fsyncs; `shale-bg`: flushes and compactions; `shale-gc`: blob GC; `shale-conn`: client
//! connections; threads that ended during the run together as `ended`), with the followers'
//! compaction bytes, so the work a mode saves shows where it is. `--serve-arg` passes engine
//! settings (`--target-file-size`, `--max-bytes-for-level-base`, `--min-blob-size`) to every
//! Shale process.

use crate::compare::median;
use crate::cpucheck::{rounds_line, sysbench_cpu_events_per_sec};
use crate::error::{Error, Result};
use crate::redis_compare::{
    default_shale_bin, free_port, parse_csv_latency, stop, tempdir, wait_ready,
};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Usage of the subcommand.
pub const USAGE: &str = "\
Usage: shale-bench cluster-bench [--rounds N] [--requests N] [--records N]
                                 [--setups rf3,rubble3,always,redis3] [--workloads a,g]
                                 [--value-size BYTES] [--write-buffer-size BYTES]
                                 [--serve-arg ARG]... [--shale-bin PATH] [--cpucheck SECS]
                                 [--out FILE.md]";

/// The setups `--setups` may name.
const SETUPS: [&str; 4] = ["rf3", "rubble3", "always", "redis3"];

/// Arguments.
#[derive(Debug, Clone)]
pub struct ClusterBenchArgs {
    pub rounds: u32,
    /// redis-benchmark `-n`.
    pub requests: u64,
    /// YCSB record count (and operation count of workload A).
    pub records: u64,
    pub setups: Vec<String>,
    /// YCSB workloads after the load: `a`, and `g` (100% updates) on the same records.
    pub workloads: Vec<String>,
    /// YCSB value bytes (one field); redis-benchmark keeps `-d 100`.
    pub value_size: u64,
    /// `shale serve --write-buffer-size` (memtable bytes) for the Shale setups; 0 keeps the
    /// server's default.
    pub write_buffer_size: u64,
    /// More `shale serve` arguments for every Shale process (one per `--serve-arg`).
    pub serve_args: Vec<String>,
    pub shale_bin: Option<PathBuf>,
    pub cpucheck_secs: u32,
    pub out: Option<PathBuf>,
}

impl Default for ClusterBenchArgs {
    fn default() -> Self {
        ClusterBenchArgs {
            rounds: 3,
            requests: 1_000_000,
            records: 200_000,
            setups: vec!["rf3".into(), "always".into(), "redis3".into()],
            workloads: vec!["a".into()],
            value_size: 1024,
            write_buffer_size: 0,
            serve_args: Vec::new(),
            shale_bin: None,
            cpucheck_secs: 5,
            out: None,
        }
    }
}

/// Parses the arguments; `None` asks for the usage.
///
/// # Errors
/// An unknown flag or a bad value.
pub fn parse_args(args: &[String]) -> Result<Option<ClusterBenchArgs>> {
    let mut a = ClusterBenchArgs::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        let value = it
            .next()
            .ok_or_else(|| Error::usage(format!("{flag} needs a value")))?;
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| Error::usage(format!("{flag}: {v:?} is not a number")))
        };
        match flag.as_str() {
            "--rounds" => a.rounds = num(value)?.max(1) as u32,
            "--requests" => a.requests = num(value)?,
            "--records" => a.records = num(value)?,
            "--cpucheck" => a.cpucheck_secs = num(value)? as u32,
            "--shale-bin" => a.shale_bin = Some(PathBuf::from(value)),
            "--out" => a.out = Some(PathBuf::from(value)),
            "--setups" => {
                a.setups = value.split(',').map(str::to_string).collect();
                if let Some(bad) = a.setups.iter().find(|s| !SETUPS.contains(&s.as_str())) {
                    return Err(Error::usage(format!(
                        "unknown setup {bad:?}: {}",
                        SETUPS.join(", ")
                    )));
                }
            }
            "--workloads" => {
                a.workloads = value.split(',').map(str::to_lowercase).collect();
                if a.workloads.first().map(String::as_str) != Some("a")
                    || a.workloads.iter().skip(1).any(|w| w != "g")
                {
                    return Err(Error::usage("--workloads: a, or a,g"));
                }
            }
            "--value-size" => a.value_size = num(value)?.max(1),
            "--write-buffer-size" => a.write_buffer_size = num(value)?,
            "--serve-arg" => a.serve_args.push(value.clone()),
            other => return Err(Error::usage(format!("unknown flag {other}\n{USAGE}"))),
        }
    }
    Ok(Some(a))
}

/// Runs the subcommand.
///
/// # Errors
/// A missing tool or binary, a server that does not start, a benchmark that fails.
pub fn run_command(args: &[String]) -> Result<bool> {
    let Some(a) = parse_args(args)? else {
        println!("{USAGE}");
        return Ok(true);
    };
    let report = run(&a)?;
    crate::cli::emit_report(&report, a.out.as_deref())?;
    Ok(true)
}

/// A running setup: its processes, the port the load goes to, its data directories.
struct Setup {
    children: Vec<(Child, u16)>,
    /// The port the load goes to (the leader's, for a cluster).
    target: u16,
    dirs: Vec<PathBuf>,
    tmp: PathBuf,
}

impl Setup {
    /// `of(pid)` summed over the process serving the load and over the others.
    fn by_role<T: std::ops::Add<Output = T> + Default>(&self, of: impl Fn(u32) -> T) -> (T, T) {
        self.children.iter().fold(
            (T::default(), T::default()),
            |(target, others), (c, port)| {
                let v = of(c.id());
                if *port == self.target {
                    (target + v, others)
                } else {
                    (target, others + v)
                }
            },
        )
    }

    /// CPU-seconds so far of the process serving the load and of the others.
    fn cpu_seconds(&self) -> (f64, f64) {
        self.by_role(proc_cpu_seconds)
    }

    /// CPU-seconds so far of every thread: (is it the process serving the load, thread id) ->
    /// (thread group, seconds).
    fn thread_cpu_seconds(&self) -> BTreeMap<(bool, u32), (String, f64)> {
        let mut all = BTreeMap::new();
        for (c, port) in &self.children {
            for (tid, v) in proc_thread_cpu_seconds(c.id()) {
                all.insert((*port == self.target, tid), v);
            }
        }
        all
    }

    /// Bytes so far that the process serving the load and the others wrote to storage
    /// (`write_bytes` of `/proc/PID/io`).
    fn written_bytes(&self) -> (u64, u64) {
        self.by_role(proc_write_bytes)
    }

    /// What the followers of a Shale cluster did by themselves (flushes and compactions, from
    /// `INFO persistence`), and the bytes the leader shipped (`INFO replication`).
    fn rubble_figures(&self, f: &mut Figures) {
        let field = |text: &str, name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        let (mut flushes, mut compactions) = (0.0, 0.0);
        // Where each role's time went: (leader, followers summed).
        let mut waits: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for (_, port) in &self.children {
            let p = info(*port, "persistence");
            let r = info(*port, "replication");
            let leader = *port == self.target;
            if !leader {
                flushes += field(&p, "shale_flushes");
                compactions += field(&p, "shale_compactions");
            }
            for (name, value) in [
                ("GC MB written", field(&p, "shale_gc_bytes_written") / 1e6),
                ("engine stall s", field(&p, "shale_stall_micros") / 1e6),
                ("rubble stall s", field(&r, "rubble_stall_micros") / 1e6),
                (
                    "write pressure s",
                    field(&r, "raft_write_pressure_micros") / 1e6,
                ),
                ("install s", field(&r, "rubble_install_micros") / 1e6),
                ("fetch wait s", field(&r, "rubble_fetch_wait_micros") / 1e6),
            ] {
                let e = waits.entry(name).or_default();
                if leader {
                    e.0 += value;
                } else {
                    e.1 += value;
                }
            }
        }
        for (name, (leader, followers)) in waits {
            f.insert(format!("leader {name}"), leader);
            f.insert(format!("followers {name}"), followers);
        }
        f.insert("followers' own flushes".into(), flushes);
        f.insert("followers' own compactions".into(), compactions);
        let (mut read, mut written) = (0.0, 0.0);
        for (_, port) in self.children.iter().filter(|(_, p)| *p != self.target) {
            let p = info(*port, "persistence");
            read += field(&p, "shale_compaction_bytes_read") / 1e6;
            written += field(&p, "shale_compaction_bytes_written") / 1e6;
        }
        f.insert("followers' compaction MB read".into(), read);
        f.insert("followers' compaction MB written".into(), written);
        let r = info(self.target, "replication");
        f.insert(
            "MB shipped by the leader".into(),
            field(&r, "rubble_bytes_shipped") / 1e6,
        );
        f.insert(
            "MB of Raft messages sent by the leader".into(),
            field(&r, "raft_rpc_bytes_sent") / 1e6,
        );
    }

    fn disk_bytes(&self) -> Vec<u64> {
        self.dirs.iter().map(|d| dir_bytes(d)).collect()
    }

    fn stop(mut self) {
        for (c, port) in &mut self.children {
            stop(c, *port);
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// User plus system CPU seconds of a process so far.
fn proc_cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// User plus system CPU seconds so far of each thread of a process, by thread id, with the
/// thread's group: its name without a trailing number (`shale-bg-1` is `shale-bg`).
fn proc_thread_cpu_seconds(pid: u32) -> BTreeMap<u32, (String, f64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return BTreeMap::new();
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    tasks
        .flatten()
        .filter_map(|t| {
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1;
            let group = name
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .trim_end_matches('-')
                .to_string();
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            Some((tid, (group, (ticks(11) + ticks(12)) / hz)))
        })
        .collect()
}

/// Per role and thread group, the CPU-seconds between `before` and `after` (threads born
/// meanwhile count from zero); what the processes spent beyond their threads alive at the end
/// (`total`, per role) is `ended`.
fn thread_groups(
    before: &BTreeMap<(bool, u32), (String, f64)>,
    after: &BTreeMap<(bool, u32), (String, f64)>,
    total: (f64, f64),
    f: &mut Figures,
) {
    let mut groups: BTreeMap<(bool, String), f64> = BTreeMap::new();
    for (key, (group, secs)) in after {
        let was = before.get(key).map_or(0.0, |(_, s)| *s);
        *groups.entry((key.0, group.clone())).or_default() += secs - was;
    }
    for (leader, all) in [(true, total.0), (false, total.1)] {
        let counted: f64 = groups
            .iter()
            .filter(|((l, _), _)| *l == leader)
            .map(|(_, v)| v)
            .sum();
        groups.insert((leader, "ended".into()), (all - counted).max(0.0));
    }
    for ((leader, group), secs) in groups {
        let role = if leader { "leader" } else { "followers" };
        f.insert(format!("{role} CPU s: {group}"), secs);
    }
}

/// Bytes a process caused to be written to storage so far (0 when `/proc` does not say).
fn proc_write_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("write_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn spawn(cmd: &mut Command, what: &str) -> Result<Child> {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::io(format!("cannot start {what}"), e))
}

fn info(port: u16, section: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(format!("INFO {section}\r\n").as_bytes());
    let mut buf = vec![0u8; 16384];
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                // A bulk reply: $len\r\n...\r\n
                let text = String::from_utf8_lossy(&got);
                if let Some((len, rest)) = text.strip_prefix('$').and_then(|t| t.split_once("\r\n"))
                {
                    if len.parse::<usize>().is_ok_and(|l| rest.len() >= l) {
                        return rest.to_string();
                    }
                }
            }
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn start(setup: &str, bin: &Path, a: &ClusterBenchArgs) -> Result<Setup> {
    let tmp = tempdir()?;
    let mut children = Vec::new();
    let mut dirs = Vec::new();
    let mut memtable: Vec<String> = if a.write_buffer_size > 0 {
        vec![
            "--write-buffer-size".into(),
            a.write_buffer_size.to_string(),
        ]
    } else {
        Vec::new()
    };
    memtable.extend(a.serve_args.iter().cloned());
    let target = match setup {
        "rf3" | "rubble3" => {
            let raft: Vec<u16> = (0..3).map(|_| free_port()).collect::<Result<_>>()?;
            let client: Vec<u16> = (0..3).map(|_| free_port()).collect::<Result<_>>()?;
            let peers: Vec<String> = raft
                .iter()
                .zip(&client)
                .enumerate()
                .map(|(i, (r, c))| format!("{}=127.0.0.1:{r}/127.0.0.1:{c}", i + 1))
                .collect();
            for (i, (&port, &raft_port)) in client.iter().zip(&raft).enumerate() {
                let dir = tmp.join(format!("n{}", i + 1));
                let mut cmd = Command::new(bin);
                cmd.args(["serve", "--bind", "127.0.0.1", "--port", &port.to_string()])
                    .arg("--dir")
                    .arg(&dir)
                    .args(["--node-id", &(i + 1).to_string()])
                    .args(["--raft-addr", &format!("127.0.0.1:{raft_port}")])
                    .args(["--peers", &peers.join(",")])
                    .args(memtable.iter());
                if setup == "rubble3" {
                    cmd.args(["--replication-mode", "rubble"]);
                }
                children.push((spawn(&mut cmd, "shale")?, port));
                dirs.push(dir);
            }
            for &p in &client {
                wait_ready(p)?;
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(&p) = client
                    .iter()
                    .find(|&&p| info(p, "replication").contains("raft_role:leader"))
                {
                    break p;
                }
                if Instant::now() > deadline {
                    return Err(Error::backend("the cluster elected no leader in 30 s"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        "always" => {
            let port = free_port()?;
            let dir = tmp.join("n1");
            let mut cmd = Command::new(bin);
            cmd.args([
                "serve",
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(&dir)
            .args(memtable.iter());
            children.push((spawn(&mut cmd, "shale")?, port));
            dirs.push(dir);
            wait_ready(port)?;
            port
        }
        "redis3" => {
            let ports: Vec<u16> = (0..3).map(|_| free_port()).collect::<Result<_>>()?;
            for (i, &port) in ports.iter().enumerate() {
                let dir = tmp.join(format!("n{}", i + 1));
                std::fs::create_dir_all(&dir)
                    .map_err(|e| Error::io("cannot create a directory", e))?;
                let mut cmd = Command::new("redis-server");
                cmd.args([
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    &port.to_string(),
                    "--save",
                    "",
                ])
                .args(["--appendonly", "yes", "--appendfsync", "everysec"])
                .arg("--dir")
                .arg(&dir);
                if i > 0 {
                    cmd.args(["--replicaof", "127.0.0.1", &ports[0].to_string()]);
                }
                children.push((spawn(&mut cmd, "redis-server")?, port));
                dirs.push(dir);
            }
            for &p in &ports {
                wait_ready(p)?;
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while !ports[1..]
                .iter()
                .all(|&p| info(p, "replication").contains("master_link_status:up"))
            {
                if Instant::now() > deadline {
                    return Err(Error::backend("the Redis replicas did not connect in 30 s"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            ports[0]
        }
        other => return Err(Error::usage(format!("unknown setup {other}"))),
    };
    Ok(Setup {
        children,
        target,
        dirs,
        tmp,
    })
}

/// Figures of one run of one setup.
type Figures = BTreeMap<String, f64>;

fn redis_benchmark(port: u16, requests: u64, figures: &mut Figures) -> Result<()> {
    let out = Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "set,get",
            "--csv",
        ])
        .args([
            "-n",
            &requests.to_string(),
            "-c",
            "50",
            "-d",
            "100",
            "-r",
            "1000000",
            "-P",
            "16",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("cannot run redis-benchmark", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rows = parse_csv_latency(&text);
    for (test, rps, p99) in rows {
        match test.as_str() {
            "SET" => {
                figures.insert("SET ops/s".into(), rps);
                figures.insert("SET p99 ms".into(), p99);
            }
            "GET" => {
                figures.insert("GET ops/s".into(), rps);
                figures.insert("GET p99 ms".into(), p99);
            }
            _ => {}
        }
    }
    if !figures.contains_key("SET ops/s") || !figures.contains_key("GET ops/s") {
        return Err(Error::backend(format!("redis-benchmark failed: {text}")));
    }
    Ok(())
}

/// The `[OP: ... 99=x 99.9=y ...]` figures of the last status line before `phase` ends.
fn ycsb_percentiles(text: &str, phase: &str, op: &str) -> Option<(f64, f64)> {
    let end = text.find(&format!("{phase} runtime"))?;
    let line = text[..end]
        .lines()
        .rev()
        .find(|l| l.contains(&format!("[{op}:")))?;
    let part = line.split(&format!("[{op}:")).nth(1)?.split(']').next()?;
    let get = |k: &str| {
        part.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse::<f64>().ok())
    };
    Some((get("99")? / 1000.0, get("99.9")? / 1000.0))
}

/// YCSB through the RESP backend: load and workload A, then, with `g`, workload G (100%
/// updates) on the same records. Returns the operations run.
fn ycsb(port: u16, a: &ClusterBenchArgs, figures: &mut Figures) -> Result<u64> {
    let mut ops = 0;
    for w in &a.workloads {
        ops += ycsb_one(port, a.records, a.value_size, w == "a", w, figures)?;
    }
    Ok(ops)
}

fn ycsb_one(
    port: u16,
    records: u64,
    value_size: u64,
    load: bool,
    workload: &str,
    figures: &mut Figures,
) -> Result<u64> {
    let exe = std::env::current_exe().map_err(|e| Error::io("cannot find shale-bench", e))?;
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../workloads/workload{workload}"));
    let phases: &[&str] = if load { &["-load", "-run"] } else { &["-run"] };
    let out = Command::new(exe)
        .args(phases)
        .args(["-db", "resp", "-s", "-P"])
        .arg(&path)
        .args(["-p", &format!("resp.port={port}")])
        .args([
            "-p",
            &format!("recordcount={records}"),
            "-p",
            &format!("operationcount={records}"),
        ])
        .args([
            "-p",
            "fieldcount=1",
            "-p",
            &format!("fieldlength={value_size}"),
            "-p",
            "threadcount=16",
        ])
        .args(["-p", "status.interval=1"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("cannot run shale-bench ycsb", e))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let tput = |phase: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{phase} throughput(ops/sec): ")))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let failed = || {
        Error::backend(format!(
            "the YCSB run failed: {}",
            text.lines().rev().take(5).collect::<Vec<_>>().join(" / ")
        ))
    };
    let w = workload.to_uppercase();
    if load {
        figures.insert("YCSB load ops/s".into(), tput("Load").ok_or_else(failed)?);
    }
    figures.insert(format!("YCSB {w} ops/s"), tput("Run").ok_or_else(failed)?);
    for op in ["UPDATE", "READ"] {
        if let Some((p99, p999)) = ycsb_percentiles(&text, "Run", op) {
            let op = op.to_lowercase();
            figures.insert(format!("{w} {op} p99 ms"), p99);
            figures.insert(format!("{w} {op} p99.9 ms"), p999);
        }
    }
    Ok(if load { 2 * records } else { records })
}

fn run(a: &ClusterBenchArgs) -> Result<String> {
    let bin = a.shale_bin.clone().unwrap_or_else(default_shale_bin);
    if !bin.is_file() {
        return Err(Error::usage(format!(
            "{} not found: cargo build --release -p shale-server",
            bin.display()
        )));
    }
    for tool in ["redis-server", "redis-benchmark"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Err(Error::usage(format!(
                "{tool} not found: apt-get install redis-server redis-tools"
            )));
        }
    }
    let mut results: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut cpu = Vec::new();
    let started = Instant::now();
    for round in 0..a.rounds {
        cpu.push(if a.cpucheck_secs > 0 {
            sysbench_cpu_events_per_sec(a.cpucheck_secs)
        } else {
            None
        });
        let mut order = a.setups.clone();
        let n = order.len().max(1);
        order.rotate_left(round as usize % n);
        for setup in order {
            let s = start(&setup, &bin, a)?;
            let before = s.cpu_seconds();
            let threads_before = s.thread_cpu_seconds();
            let written_before = s.written_bytes();
            let mut f = Figures::new();
            let outcome = redis_benchmark(s.target, a.requests, &mut f)
                .and_then(|()| ycsb(s.target, a, &mut f));
            let after = s.cpu_seconds();
            let threads_after = s.thread_cpu_seconds();
            let written_after = s.written_bytes();
            let (target, others) = (after.0 - before.0, after.1 - before.1);
            if setup != "redis3" {
                thread_groups(&threads_before, &threads_after, (target, others), &mut f);
            }
            f.insert("server CPU s".into(), target + others);
            let (wt, wo) = (
                written_after.0.saturating_sub(written_before.0),
                written_after.1.saturating_sub(written_before.1),
            );
            if s.children.len() > 1 {
                f.insert("leader CPU s".into(), target);
                f.insert("followers CPU s".into(), others);
                f.insert("leader MB written".into(), wt as f64 / 1e6);
                f.insert(
                    "MB written per follower".into(),
                    wo as f64 / (s.children.len() - 1) as f64 / 1e6,
                );
            } else {
                f.insert("MB written".into(), wt as f64 / 1e6);
            }
            if let Ok(ops) = &outcome {
                let all = ops + 2 * a.requests;
                f.insert(
                    "server CPU s per M ops".into(),
                    (target + others) / all.max(1) as f64 * 1e6,
                );
                f.insert(
                    "ops per server CPU s".into(),
                    all as f64 / (target + others).max(1e-9),
                );
            }
            if setup == "rf3" || setup == "rubble3" {
                s.rubble_figures(&mut f);
            }
            let disk = s.disk_bytes();
            f.insert(
                "disk MB per node".into(),
                disk.iter().sum::<u64>() as f64 / disk.len().max(1) as f64 / 1e6,
            );
            s.stop();
            outcome?;
            eprintln!("round {} {setup}: {f:?}", round + 1);
            for (k, v) in f {
                results.entry((setup.clone(), k)).or_default().push(v);
            }
        }
    }
    Ok(report(a, &results, &cpu, started.elapsed()))
}

fn report(
    a: &ClusterBenchArgs,
    results: &BTreeMap<(String, String), Vec<f64>>,
    cpu: &[Option<f64>],
    took: Duration,
) -> String {
    let metrics: Vec<&str> = {
        let mut m: Vec<&str> = results.keys().map(|(_, k)| k.as_str()).collect();
        m.sort_unstable();
        m.dedup();
        m
    };
    let med = |setup: &str, k: &str| {
        results
            .get(&(setup.to_string(), k.to_string()))
            .and_then(|v| median(v))
    };
    let mut out = format!(
        "## cluster-bench: {} rounds, redis-benchmark -t set,get -n {} -c 50 -d 100 -P 16; YCSB load + {}, {} records of {} B, 16 threads; write buffer {}{} ({:.0} s)\n\n",
        a.rounds,
        a.requests,
        a.workloads.join(" + ").to_uppercase(),
        a.records,
        a.value_size,
        if a.write_buffer_size > 0 {
            a.write_buffer_size.to_string()
        } else {
            "default".into()
        },
        if a.serve_args.is_empty() {
            String::new()
        } else {
            format!("; shale serve {}", a.serve_args.join(" "))
        },
        took.as_secs_f64()
    );
    let pairs: Vec<(&str, &str)> = [("rubble3", "rf3"), ("rf3", "always"), ("rf3", "redis3")]
        .into_iter()
        .filter(|(x, y)| a.setups.iter().any(|s| s == x) && a.setups.iter().any(|s| s == y))
        .collect();
    out.push_str(&format!(
        "| metric (median) | {} |{}\n",
        a.setups.join(" | "),
        pairs
            .iter()
            .map(|(x, y)| format!(" {x}/{y} |"))
            .collect::<String>()
    ));
    out.push_str(&format!(
        "|---|{}{}\n",
        "---|".repeat(a.setups.len()),
        "---|".repeat(pairs.len())
    ));
    for k in metrics {
        let cells: Vec<String> = a
            .setups
            .iter()
            .map(|s| med(s, k).map_or("-".into(), |v| format!("{v:.2}")))
            .collect();
        let ratios: String = pairs
            .iter()
            .map(|(x, y)| match (med(x, k), med(y, k)) {
                (Some(x), Some(y)) if y > 0.0 => format!(" {:.2} |", x / y),
                _ => " - |".into(),
            })
            .collect();
        out.push_str(&format!("| {k} | {} |{ratios}\n", cells.join(" | ")));
    }
    out.push_str(&format!("\n{}\n", rounds_line(cpu)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ycsb_status_lines_give_the_run_percentiles() {
        let text = "x 1 sec: 5 operations; [UPDATE: Count=5 Max=9 Min=1 Avg=2 90=3 99=4000 99.9=8000 99.99=9000]\n\
                    Load runtime(sec): 1\n\
                    x 2 sec: 9 operations; [READ: Count=4 Max=9 Min=1 Avg=2 90=3 99=1500 99.9=2500 99.99=9000] [UPDATE: Count=5 Max=9 Min=1 Avg=2 90=3 99=3000 99.9=6000 99.99=9000]\n\
                    Run runtime(sec): 1\n";
        assert_eq!(ycsb_percentiles(text, "Run", "UPDATE"), Some((3.0, 6.0)));
        assert_eq!(ycsb_percentiles(text, "Run", "READ"), Some((1.5, 2.5)));
        assert_eq!(ycsb_percentiles(text, "Load", "UPDATE"), Some((4.0, 8.0)));
    }

    #[test]
    fn arguments_are_checked() {
        assert!(parse_args(&["--setups".into(), "rf3,bogus".into()]).is_err());
        let a = parse_args(&["--rounds".into(), "5".into()])
            .unwrap()
            .unwrap();
        assert_eq!(a.rounds, 5);
        assert!(parse_args(&["--help".into()]).unwrap().is_none());
        let a = parse_args(&[
            "--setups".into(),
            "rf3,rubble3".into(),
            "--workloads".into(),
            "a,g".into(),
            "--value-size".into(),
            "100".into(),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (a.setups.len(), a.workloads.len(), a.value_size),
            (2, 2, 100)
        );
        assert!(parse_args(&["--workloads".into(), "g".into()]).is_err());
    }
}
