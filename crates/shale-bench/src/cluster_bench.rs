//! `shale-bench cluster-bench`: a replicated Shale cluster against one Shale node and against
//! Redis with replicas, side by side.
//!
//! Three setups, each started fresh on loopback ports and temporary directories for every run:
//! `rf3`, three `shale serve` processes forming a Raft cluster (the load goes to the leader);
//! `always`, one `shale serve --appendfsync always`; `redis3`, a Redis primary and two
//! `replicaof` processes with `appendfsync everysec` (what Redis users run for availability).
//! Against each: `redis-benchmark -t set,get -c 50 -d 100 -P 16`, then YCSB load and workload A
//! through the RESP backend (1 KiB values, 16 threads). Setups alternate their order between
//! rounds; the report gives medians over rounds of throughput, p99 and p99.9, the CPU-seconds of
//! every server process (from `/proc/PID/stat`), bytes on disk per node, the ratios the issue's
//! targets name, and a two-thread CPU check per round.

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
Usage: shale-bench cluster-bench [--rounds N] [--requests N] [--records N] [--setups rf3,always,redis3]
                                 [--shale-bin PATH] [--cpucheck SECS] [--out FILE.md]";

/// Arguments.
#[derive(Debug, Clone)]
pub struct ClusterBenchArgs {
    pub rounds: u32,
    /// redis-benchmark `-n`.
    pub requests: u64,
    /// YCSB record count (and operation count of workload A).
    pub records: u64,
    pub setups: Vec<String>,
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
                if let Some(bad) = a
                    .setups
                    .iter()
                    .find(|s| !["rf3", "always", "redis3"].contains(&s.as_str()))
                {
                    return Err(Error::usage(format!(
                        "unknown setup {bad:?}: rf3, always or redis3"
                    )));
                }
            }
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
    print!("{report}");
    if let Some(out) = &a.out {
        std::fs::write(out, &report)
            .map_err(|e| Error::io(format!("cannot write {}", out.display()), e))?;
    }
    Ok(true)
}

/// A running setup: its processes, the port the load goes to, its data directories.
struct Setup {
    children: Vec<(Child, u16)>,
    target: u16,
    dirs: Vec<PathBuf>,
    tmp: PathBuf,
}

impl Setup {
    fn cpu_seconds(&self) -> f64 {
        self.children
            .iter()
            .map(|(c, _)| proc_cpu_seconds(c.id()))
            .sum()
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

fn start(setup: &str, bin: &Path) -> Result<Setup> {
    let tmp = tempdir()?;
    let mut children = Vec::new();
    let mut dirs = Vec::new();
    let target = match setup {
        "rf3" => {
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
                    .args(["--peers", &peers.join(",")]);
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
            .arg(&dir);
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
type Figures = BTreeMap<&'static str, f64>;

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
                figures.insert("SET ops/s", rps);
                figures.insert("SET p99 ms", p99);
            }
            "GET" => {
                figures.insert("GET ops/s", rps);
                figures.insert("GET p99 ms", p99);
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

fn ycsb(port: u16, records: u64, figures: &mut Figures) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::io("cannot find shale-bench", e))?;
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/workloada");
    let out = Command::new(exe)
        .args(["-load", "-run", "-db", "resp", "-s", "-P"])
        .arg(&workload)
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
            "fieldlength=1024",
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
    let (Some(load), Some(run)) = (tput("Load"), tput("Run")) else {
        return Err(Error::backend(format!(
            "the YCSB run failed: {}",
            text.lines().rev().take(5).collect::<Vec<_>>().join(" / ")
        )));
    };
    figures.insert("YCSB load ops/s", load);
    figures.insert("YCSB A ops/s", run);
    if let Some((p99, p999)) = ycsb_percentiles(&text, "Run", "UPDATE") {
        figures.insert("A update p99 ms", p99);
        figures.insert("A update p99.9 ms", p999);
    }
    if let Some((p99, p999)) = ycsb_percentiles(&text, "Run", "READ") {
        figures.insert("A read p99 ms", p99);
        figures.insert("A read p99.9 ms", p999);
    }
    Ok(())
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
    let mut results: BTreeMap<(String, &'static str), Vec<f64>> = BTreeMap::new();
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
            let s = start(&setup, &bin)?;
            let before = s.cpu_seconds();
            let mut f = Figures::new();
            let outcome = redis_benchmark(s.target, a.requests, &mut f)
                .and_then(|()| ycsb(s.target, a.records, &mut f));
            f.insert("server CPU s", s.cpu_seconds() - before);
            let disk = s.disk_bytes();
            f.insert(
                "disk MB per node",
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
    results: &BTreeMap<(String, &'static str), Vec<f64>>,
    cpu: &[Option<f64>],
    took: Duration,
) -> String {
    let metrics: Vec<&'static str> = {
        let mut m: Vec<&'static str> = results.keys().map(|(_, k)| *k).collect();
        m.sort_unstable();
        m.dedup();
        m
    };
    let med = |setup: &str, k: &str| results.get(&(setup.to_string(), k)).and_then(|v| median(v));
    let mut out = format!(
        "## cluster-bench: {} rounds, redis-benchmark -t set,get -n {} -c 50 -d 100 -P 16; YCSB load + A, {} records of 1 KiB, 16 threads ({:.0} s)\n\n",
        a.rounds,
        a.requests,
        a.records,
        took.as_secs_f64()
    );
    out.push_str(&format!(
        "| metric (median) | {} | rf3/always | rf3/redis3 |\n",
        a.setups.join(" | ")
    ));
    out.push_str(&format!("|---|{}---|---|\n", "---|".repeat(a.setups.len())));
    for k in metrics {
        let cells: Vec<String> = a
            .setups
            .iter()
            .map(|s| med(s, k).map_or("-".into(), |v| format!("{v:.2}")))
            .collect();
        let ratio = |other: &str| match (med("rf3", k), med(other, k)) {
            (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "| {k} | {} | {} | {} |\n",
            cells.join(" | "),
            ratio("always"),
            ratio("redis3")
        ));
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
    }
}
