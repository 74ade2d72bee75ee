//! `shale-bench redis-compare`: Shale's server against Redis, side by side, with `redis-benchmark`
//! or with YCSB workloads stored as YCSB's Redis binding stores them.
//!
//! `redis-benchmark` mode (issue 6's comparison): `redis-benchmark -t set,get -n N -c 50 -d 100
//! -r 1000000` with `-P 1` and `-P 16` (`--tests` picks other tests: `lpush,lpop,sadd,hset,zadd,
//! lrange_100`), for each pairing of a Shale `appendfsync` mode with a Redis persistence mode
//! (by default Shale `everysec` against Redis without persistence, and both with `always`).
//!
//! YCSB mode (`--ycsb a,b,c,d,e,f`): for each workload, a fresh server is loaded with
//! `--records` records and runs `--operations` operations (a workload may override it:
//! `e=20000`) from `--threads` client threads of this binary's `resp` backend in `resp.mode=ycsb`
//! (a hash per record plus the index sorted set, as YCSB 0.17's Redis binding), for the first
//! pair of `--pairs`. The report gives run throughput and the read latency p99 (SCAN's for a
//! workload without reads) per workload.
//! `--baseline PATH` adds a second `shale` binary (the code before a change) to each round of
//! redis-benchmark mode, in turn with the other two, and the report gives Shale/baseline too.
//! Every round starts each server fresh (a free loopback port, a temporary directory), runs both
//! pipeline depths, and stops it; the order of Shale and Redis alternates between rounds, and a
//! two-thread CPU check (`sysbench`) is recorded per round when sysbench is installed, because
//! this machine's capacity drifts (DESIGN.md section 8). The report gives medians over rounds and
//! the Shale/Redis ratio, as a markdown table.

use crate::compare::median;
use crate::cpucheck::{rounds_line, sysbench_cpu_events_per_sec};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Default requests per test (`-n`).
pub const DEFAULT_REQUESTS: u64 = 1_000_000;
/// Default rounds.
pub const DEFAULT_ROUNDS: u32 = 3;
/// Default YCSB `recordcount`.
pub const DEFAULT_RECORDS: u64 = 100_000;
/// Default YCSB `operationcount`.
pub const DEFAULT_OPERATIONS: u64 = 100_000;
/// How long a server may take to answer PING after start.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Usage of the subcommand.
pub const USAGE: &str = "\
Usage: shale-bench redis-compare [--rounds N] [--requests N] [--clients N] [--size BYTES]
                                 [--keyspace N] [--pipelines 1,16] [--pairs everysec:none,always:always]
                                 [--tests set,get] [--shale-bin PATH] [--baseline PATH]
                                 [--cpucheck SECS] [--out FILE.md]
       shale-bench redis-compare --ycsb a,b,c,d,e=20000,f [--records N] [--operations N]
                                 [--threads N] [--workloads DIR] [--pairs everysec:none] ...
A pair is SHALE_APPENDFSYNC:REDIS_PERSISTENCE, with Redis persistence none (no RDB, no AOF),
everysec or always (AOF with that appendfsync).";

/// Arguments.
#[derive(Debug, Clone)]
pub struct RedisCompareArgs {
    /// Rounds.
    pub rounds: u32,
    /// `-n`.
    pub requests: u64,
    /// `-c`.
    pub clients: u32,
    /// `-d`.
    pub size: u32,
    /// `-r`.
    pub keyspace: u64,
    /// `-P` values.
    pub pipelines: Vec<u32>,
    /// (Shale appendfsync, Redis persistence) pairs.
    pub pairs: Vec<(String, String)>,
    /// The `shale` binary.
    pub shale_bin: Option<PathBuf>,
    /// Another `shale` binary run beside it (redis-benchmark mode).
    pub baseline: Option<PathBuf>,
    /// Seconds of the CPU check per round (0: none).
    pub cpucheck_secs: u32,
    /// Markdown report file.
    pub out: Option<PathBuf>,
    /// redis-benchmark tests (`-t`).
    pub tests: Vec<String>,
    /// YCSB workloads (letter, operations override); empty: redis-benchmark mode.
    pub ycsb: Vec<(String, Option<u64>)>,
    /// YCSB `recordcount`.
    pub records: u64,
    /// YCSB `operationcount`.
    pub operations: u64,
    /// YCSB client threads.
    pub threads: u32,
    /// Where the YCSB workload files are.
    pub workloads: PathBuf,
}

impl Default for RedisCompareArgs {
    fn default() -> Self {
        RedisCompareArgs {
            rounds: DEFAULT_ROUNDS,
            requests: DEFAULT_REQUESTS,
            clients: 50,
            size: 100,
            keyspace: 1_000_000,
            pipelines: vec![1, 16],
            pairs: vec![
                ("everysec".into(), "none".into()),
                ("always".into(), "always".into()),
            ],
            shale_bin: None,
            baseline: None,
            cpucheck_secs: 5,
            out: None,
            tests: vec!["set".into(), "get".into()],
            ycsb: Vec::new(),
            records: DEFAULT_RECORDS,
            operations: DEFAULT_OPERATIONS,
            threads: 16,
            workloads: PathBuf::from("workloads"),
        }
    }
}

/// Parses the arguments after `redis-compare`.
///
/// # Errors
/// `Usage` for unknown flags and bad values.
pub fn parse_args(args: &[String]) -> Result<Option<RedisCompareArgs>> {
    let mut a = RedisCompareArgs::default();
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].trim_start_matches('-');
        if flag == "help" || flag == "h" {
            return Ok(None);
        }
        let v = args
            .get(i + 1)
            .ok_or_else(|| Error::usage(format!("missing value for {}", args[i])))?;
        let num = |v: &str| -> Result<u64> {
            v.parse()
                .map_err(|_| Error::usage(format!("{} expects a number, got '{v}'", args[i])))
        };
        match flag {
            "rounds" => a.rounds = num(v)?.max(1) as u32,
            "requests" | "n" => a.requests = num(v)?.max(1),
            "clients" | "c" => a.clients = num(v)?.max(1) as u32,
            "size" | "d" => a.size = num(v)? as u32,
            "keyspace" | "r" => a.keyspace = num(v)?,
            "pipelines" | "P" => {
                a.pipelines = v
                    .split(',')
                    .map(|p| num(p).map(|n| n.max(1) as u32))
                    .collect::<Result<_>>()?
            }
            "pairs" => {
                a.pairs = v
                    .split(',')
                    .map(|p| {
                        let (s, r) = p.split_once(':').ok_or_else(|| {
                            Error::usage(format!("a pair is SHALE:REDIS, got '{p}'"))
                        })?;
                        check_mode(s, &["always", "everysec", "no"])?;
                        check_mode(r, &["none", "always", "everysec", "no"])?;
                        Ok((s.to_string(), r.to_string()))
                    })
                    .collect::<Result<_>>()?
            }
            "tests" | "t" => a.tests = v.split(',').map(str::to_string).collect(),
            "ycsb" => {
                a.ycsb = v
                    .split(',')
                    .map(|w| match w.split_once('=') {
                        Some((w, n)) => Ok((w.to_ascii_lowercase(), Some(num(n)?))),
                        None => Ok((w.to_ascii_lowercase(), None)),
                    })
                    .collect::<Result<_>>()?
            }
            "records" => a.records = num(v)?,
            "operations" => a.operations = num(v)?,
            "threads" => a.threads = num(v)?.max(1) as u32,
            "workloads" => a.workloads = PathBuf::from(v),
            "shale-bin" => a.shale_bin = Some(PathBuf::from(v)),
            "baseline" => a.baseline = Some(PathBuf::from(v)),
            "cpucheck" => a.cpucheck_secs = num(v)? as u32,
            "out" | "o" => a.out = Some(PathBuf::from(v)),
            _ => {
                return Err(Error::usage(format!(
                    "unknown option '{}' for redis-compare",
                    args[i]
                )))
            }
        }
        i += 2;
    }
    Ok(Some(a))
}

fn check_mode(m: &str, allowed: &[&str]) -> Result<()> {
    if allowed.contains(&m) {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "'{m}' is not one of {}",
            allowed.join(", ")
        )))
    }
}

/// Runs the subcommand (`args` after `redis-compare`).
///
/// # Errors
/// Usage errors, a missing tool, a server that does not start, unparsable benchmark output.
pub fn run_command(args: &[String]) -> Result<bool> {
    let Some(a) = parse_args(args)? else {
        println!("{USAGE}");
        return Ok(true);
    };
    let report = run(&a)?;
    crate::cli::emit_report(&report, a.out.as_deref())?;
    Ok(true)
}

/// Which server a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Shale,
    /// The `--baseline` binary.
    Baseline,
    Redis,
}

/// Results: (pair index, pipeline, test, side) -> requests per second per round.
type Results = BTreeMap<(usize, u32, String, Side), Vec<f64>>;

fn run(a: &RedisCompareArgs) -> Result<String> {
    let shale = a.shale_bin.clone().unwrap_or_else(default_shale_bin);
    if !shale.is_file() {
        return Err(Error::usage(format!(
            "{} not found: build it with `cargo build --release -p shale-server` or pass --shale-bin",
            shale.display()
        )));
    }
    for tool in ["redis-server", "redis-benchmark"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Err(Error::usage(format!(
                "{tool} not found: apt-get install redis-server redis-tools"
            )));
        }
    }
    if !a.ycsb.is_empty() {
        return run_ycsb(a, &shale);
    }
    if let Some(b) = a.baseline.as_ref().filter(|b| !b.is_file()) {
        return Err(Error::usage(format!("{} not found", b.display())));
    }
    let mut results = Results::new();
    let mut cpu = Vec::new();
    let started = Instant::now();
    let mut sides = vec![Side::Shale, Side::Redis];
    if a.baseline.is_some() {
        sides.insert(1, Side::Baseline);
    }
    for round in 0..a.rounds {
        cpu.push(if a.cpucheck_secs > 0 {
            sysbench_cpu_events_per_sec(a.cpucheck_secs)
        } else {
            None
        });
        for (pi, (shale_mode, redis_mode)) in a.pairs.iter().enumerate() {
            // Each side goes first in turn.
            let mut order = sides.clone();
            order.rotate_left(round as usize % sides.len());
            for side in order {
                let tmp = tempdir()?;
                let port = free_port()?;
                let mut server = match (side, &a.baseline) {
                    (Side::Baseline, Some(baseline)) => {
                        start_shale(baseline, port, &tmp, shale_mode)?
                    }
                    (Side::Redis, _) => start_redis(port, &tmp, redis_mode)?,
                    _ => start_shale(&shale, port, &tmp, shale_mode)?,
                };
                let outcome = (|| -> Result<()> {
                    wait_ready(port)?;
                    for &p in &a.pipelines {
                        for (test, rps) in benchmark(a, port, p)? {
                            eprintln!(
                                "round {} {side:?} ({}) -P {p} {test}: {rps:.0} req/s",
                                round + 1,
                                if side == Side::Redis {
                                    redis_mode
                                } else {
                                    shale_mode
                                }
                            );
                            results.entry((pi, p, test, side)).or_default().push(rps);
                        }
                    }
                    Ok(())
                })();
                stop(&mut server, port);
                let _ = std::fs::remove_dir_all(&tmp);
                outcome?;
            }
        }
    }
    Ok(report(a, &results, &cpu, started.elapsed()))
}

pub(crate) fn default_shale_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("shale")))
        .unwrap_or_else(|| PathBuf::from("shale"))
}

pub(crate) fn tempdir() -> Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "shale-redis-compare-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    Ok(dir)
}

pub(crate) fn free_port() -> Result<u16> {
    let l =
        TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("cannot find a free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| Error::io("cannot find a free port", e))
}

fn start_shale(bin: &Path, port: u16, dir: &Path, mode: &str) -> Result<Child> {
    Command::new(bin)
        .args([
            "serve",
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--appendfsync",
            mode,
            "--dir",
        ])
        .arg(dir.join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::io(format!("cannot start {}", bin.display()), e))
}

/// Starts `redis-server` on `port` with its files in `dir`, without RDB snapshots, and with
/// persistence `mode`: `none` (no AOF) or an `appendfsync` value (AOF on).
pub(crate) fn start_redis(port: u16, dir: &Path, mode: &str) -> Result<Child> {
    let mut cmd = Command::new("redis-server");
    cmd.args([
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--save",
        "",
    ])
    .arg("--dir")
    .arg(dir);
    match mode {
        "none" => cmd.args(["--appendonly", "no"]),
        fsync => cmd.args(["--appendonly", "yes", "--appendfsync", fsync]),
    };
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::io("cannot start redis-server", e))
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

pub(crate) fn wait_ready(port: u16) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if ping(port) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(Error::backend(format!(
        "the server on port {port} did not answer PING within {START_TIMEOUT:?}"
    )))
}

/// Stops a server: SHUTDOWN (both servers exit cleanly on it), then a kill if it lingers.
pub(crate) fn stop(child: &mut Child, port: u16) {
    if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
        let _ = s.write_all(b"SHUTDOWN NOSAVE\r\n");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs redis-benchmark once; returns (test, requests per second).
fn benchmark(a: &RedisCompareArgs, port: u16, pipeline: u32) -> Result<Vec<(String, f64)>> {
    let out = Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            &a.tests.join(","),
            "--csv",
        ])
        .args(["-n", &a.requests.to_string(), "-c", &a.clients.to_string()])
        .args([
            "-d",
            &a.size.to_string(),
            "-r",
            &a.keyspace.to_string(),
            "-P",
            &pipeline.to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("cannot run redis-benchmark", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed = parse_csv(&text);
    if !out.status.success() || parsed.is_empty() {
        return Err(Error::backend(format!(
            "redis-benchmark failed ({}): {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(parsed)
}

/// Parses `redis-benchmark --csv` with latencies: `(test, requests per second, p99 ms)`; the
/// columns are `test, rps, avg, min, p50, p95, p99, max`.
pub fn parse_csv_latency(text: &str) -> Vec<(String, f64, f64)> {
    text.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split(',').map(|c| c.trim().trim_matches('"')).collect();
            let rps: f64 = cols.get(1)?.parse().ok()?;
            let p99: f64 = cols.get(6)?.parse().ok()?;
            Some((cols.first()?.to_string(), rps, p99))
        })
        .collect()
}

/// Parses `redis-benchmark --csv`: `"SET","95419.85",...` lines after a header.
pub fn parse_csv(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let mut cols = l.split(',').map(|c| c.trim().trim_matches('"'));
            let test = cols.next()?;
            let rps: f64 = cols.next()?.parse().ok()?;
            Some((test.to_string(), rps))
        })
        .collect()
}

fn report(a: &RedisCompareArgs, results: &Results, cpu: &[Option<f64>], took: Duration) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "redis-benchmark -t {} -n {} -c {} -d {} -r {} --csv, {} rounds (alternating order), {:.0} s\n",
        a.tests.join(","), a.requests, a.clients, a.size, a.keyspace, a.rounds, took.as_secs_f64()
    ));
    if cpu.iter().any(Option::is_some) {
        s.push_str(&format!(
            "CPU check (sysbench cpu --threads=2 --time={} run, events/s): {}\n",
            a.cpucheck_secs,
            rounds_line(cpu)
        ));
    }
    let baseline = a.baseline.is_some();
    if baseline {
        s.push_str("\n| Shale appendfsync | Redis | -P | test | Shale req/s (median) | baseline req/s (median) | Redis req/s (median) | Shale/baseline | Shale/Redis | Shale rounds | baseline rounds | Redis rounds |\n");
        s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    } else {
        s.push_str("\n| Shale appendfsync | Redis | -P | test | Shale req/s (median) | Redis req/s (median) | Shale/Redis | Shale rounds | Redis rounds |\n");
        s.push_str("|---|---|---|---|---|---|---|---|---|\n");
    }
    let mut tests: Vec<&String> = Vec::new();
    for (_, _, t, _) in results.keys() {
        if !tests.contains(&t) {
            tests.push(t);
        }
    }
    for (pi, (shale_mode, redis_mode)) in a.pairs.iter().enumerate() {
        for &p in &a.pipelines {
            for test in &tests {
                let get = |side| {
                    results
                        .get(&(pi, p, test.to_string(), side))
                        .cloned()
                        .unwrap_or_default()
                };
                let (sh, re) = (get(Side::Shale), get(Side::Redis));
                let (ms, mr) = (median(&sh), median(&re));
                let ratio_of = |x: Option<f64>, y: Option<f64>| match (x, y) {
                    (Some(x), Some(y)) if y > 0.0 => format!("{:.2}x", x / y),
                    _ => "n/a".into(),
                };
                let ratio = ratio_of(ms, mr);
                let fmt = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}"));
                let list = |v: &[f64]| {
                    v.iter()
                        .map(|x| format!("{x:.0}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                if baseline {
                    let ba = get(Side::Baseline);
                    let mb = median(&ba);
                    s.push_str(&format!(
                        "| {shale_mode} | {redis_mode} | {p} | {test} | {} | {} | {} | {} | {ratio} | {} | {} | {} |\n",
                        fmt(ms), fmt(mb), fmt(mr), ratio_of(ms, mb), list(&sh), list(&ba), list(&re)
                    ));
                } else {
                    s.push_str(&format!(
                        "| {shale_mode} | {redis_mode} | {p} | {test} | {} | {} | {ratio} | {} | {} |\n",
                        fmt(ms), fmt(mr), list(&sh), list(&re)
                    ));
                }
            }
        }
    }
    s
}

/// One YCSB run's figures: run throughput and the read latency p99 (SCAN's when the workload
/// reads nothing), in microseconds.
#[derive(Debug, Clone, Copy)]
struct YcsbFigures {
    throughput: f64,
    read_p99_us: f64,
}

/// Results of YCSB mode: (workload, side) -> figures per round.
type YcsbResults = BTreeMap<(String, Side), Vec<YcsbFigures>>;

fn run_ycsb(a: &RedisCompareArgs, shale: &Path) -> Result<String> {
    let exe =
        std::env::current_exe().map_err(|e| Error::io("cannot find shale-bench itself", e))?;
    let (shale_mode, redis_mode) = a
        .pairs
        .first()
        .cloned()
        .unwrap_or(("everysec".into(), "none".into()));
    let mut results = YcsbResults::new();
    let mut cpu = Vec::new();
    let started = Instant::now();
    for round in 0..a.rounds {
        cpu.push(if a.cpucheck_secs > 0 {
            sysbench_cpu_events_per_sec(a.cpucheck_secs)
        } else {
            None
        });
        for (w, ops) in &a.ycsb {
            let order = if round % 2 == 0 {
                [Side::Shale, Side::Redis]
            } else {
                [Side::Redis, Side::Shale]
            };
            for side in order {
                let tmp = tempdir()?;
                let port = free_port()?;
                let mut server = match side {
                    Side::Redis => start_redis(port, &tmp, &redis_mode)?,
                    Side::Shale | Side::Baseline => start_shale(shale, port, &tmp, &shale_mode)?,
                };
                let outcome = wait_ready(port)
                    .and_then(|()| ycsb_once(a, &exe, &tmp, port, w, ops.unwrap_or(a.operations)));
                stop(&mut server, port);
                let _ = std::fs::remove_dir_all(&tmp);
                let figures = outcome?;
                eprintln!(
                    "round {} {side:?} workload{w}: {:.0} ops/s, read p99 {:.0} us",
                    round + 1,
                    figures.throughput,
                    figures.read_p99_us
                );
                results.entry((w.clone(), side)).or_default().push(figures);
            }
        }
    }
    Ok(ycsb_report(
        a,
        &shale_mode,
        &redis_mode,
        &results,
        &cpu,
        started.elapsed(),
    ))
}

/// Loads and runs workload `w` against the server on `port`; the result file goes to `dir`.
fn ycsb_once(
    a: &RedisCompareArgs,
    exe: &Path,
    dir: &Path,
    port: u16,
    w: &str,
    operations: u64,
) -> Result<YcsbFigures> {
    let result = dir.join("result.json");
    let workload = a.workloads.join(format!("workload{w}"));
    let out = Command::new(exe)
        .args(["-load", "-run", "-db", "resp", "-P"])
        .arg(&workload)
        .args(["-threads", &a.threads.to_string()])
        .args(["-p", &format!("resp.port={port}"), "-p", "resp.mode=ycsb"])
        .args(["-p", &format!("recordcount={}", a.records)])
        .args(["-p", &format!("operationcount={operations}")])
        .args(["-p", "progress=false", "-p"])
        .arg(format!("resultfile={}", result.display()))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("cannot run shale-bench", e))?;
    if !out.status.success() {
        return Err(Error::backend(format!(
            "workload{w} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let report = crate::plot::read_report(&result)?;
    let run = report
        .run
        .ok_or_else(|| Error::backend(format!("workload{w}: no run phase in the result")))?;
    let p99 = |name: &str| run.ops.iter().find(|o| o.op == name).map(|o| o.p99_us);
    Ok(YcsbFigures {
        throughput: run.throughput,
        read_p99_us: p99("READ").or_else(|| p99("SCAN")).unwrap_or(0.0),
    })
}

fn ycsb_report(
    a: &RedisCompareArgs,
    shale_mode: &str,
    redis_mode: &str,
    results: &YcsbResults,
    cpu: &[Option<f64>],
    took: Duration,
) -> String {
    let mut s = format!(
        "YCSB over RESP (resp.mode=ycsb: a hash per record + the index sorted set, as YCSB 0.17's Redis binding), \
         {} records, {} threads, Shale appendfsync {shale_mode} vs Redis persistence {redis_mode}, \
         {} rounds (alternating order), {:.0} s\n",
        a.records,
        a.threads,
        a.rounds,
        took.as_secs_f64()
    );
    if cpu.iter().any(Option::is_some) {
        s.push_str(&format!(
            "CPU check (sysbench cpu --threads=2 --time={} run, events/s): {}\n",
            a.cpucheck_secs,
            rounds_line(cpu)
        ));
    }
    s.push_str("\n| workload | operations | Shale ops/s (median) | Redis ops/s (median) | Shale/Redis | Shale read p99 us | Redis read p99 us | Shale rounds | Redis rounds |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for (w, ops) in &a.ycsb {
        let get = |side| results.get(&(w.clone(), side)).cloned().unwrap_or_default();
        let (sh, re) = (get(Side::Shale), get(Side::Redis));
        let tp = |v: &[YcsbFigures]| median(&v.iter().map(|f| f.throughput).collect::<Vec<_>>());
        let p99 = |v: &[YcsbFigures]| median(&v.iter().map(|f| f.read_p99_us).collect::<Vec<_>>());
        let ratio = match (tp(&sh), tp(&re)) {
            (Some(x), Some(y)) if y > 0.0 => format!("{:.2}x", x / y),
            _ => "n/a".into(),
        };
        let fmt = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}"));
        let list = |v: &[YcsbFigures]| {
            v.iter()
                .map(|f| format!("{:.0}", f.throughput))
                .collect::<Vec<_>>()
                .join(" ")
        };
        s.push_str(&format!(
            "| {w} | {} | {} | {} | {ratio} | {} | {} | {} | {} |\n",
            ops.unwrap_or(a.operations),
            fmt(tp(&sh)),
            fmt(tp(&re)),
            fmt(p99(&sh)),
            fmt(p99(&re)),
            list(&sh),
            list(&re)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_output_of_redis_benchmark_parses() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"39455.52\",\"0.836\"\n\"GET\",\"41832.25\",\"0.776\"\n";
        assert_eq!(
            parse_csv(text),
            vec![("SET".to_string(), 39455.52), ("GET".to_string(), 41832.25)]
        );
    }

    #[test]
    fn pairs_and_pipelines_parse() {
        let args: Vec<String> = "--pairs everysec:none,always:always --pipelines 1,16 --rounds 2"
            .split(' ')
            .map(str::to_string)
            .collect();
        let a = parse_args(&args).unwrap().unwrap();
        assert_eq!(a.pairs.len(), 2);
        assert_eq!(a.pipelines, vec![1, 16]);
        assert!(parse_args(&["--pairs".into(), "sometimes:none".into()]).is_err());
        let args: Vec<String> = "--ycsb a,E=2000 --records 500 --tests lpush,lrange_100"
            .split(' ')
            .map(str::to_string)
            .collect();
        let a = parse_args(&args).unwrap().unwrap();
        assert_eq!(a.ycsb, vec![("a".into(), None), ("e".into(), Some(2000))]);
        assert_eq!((a.records, a.tests.len()), (500, 2));
        assert_eq!(a.baseline, None);
    }

    #[test]
    fn a_baseline_gets_its_own_columns_and_ratio() {
        let args: Vec<String> = "--baseline /old/shale --pairs everysec:none --pipelines 16"
            .split(' ')
            .map(str::to_string)
            .collect();
        let a = parse_args(&args).unwrap().unwrap();
        assert_eq!(a.baseline, Some(PathBuf::from("/old/shale")));
        let mut results = Results::new();
        for (side, rps) in [
            (Side::Shale, [300.0, 310.0, 290.0]),
            (Side::Baseline, [200.0, 190.0, 210.0]),
            (Side::Redis, [400.0, 400.0, 400.0]),
        ] {
            results.insert((0, 16, "HSET".into(), side), rps.to_vec());
        }
        let text = report(&a, &results, &[], Duration::from_secs(1));
        let row = text.lines().find(|l| l.contains("HSET")).unwrap();
        assert_eq!(
            row,
            "| everysec | none | 16 | HSET | 300 | 200 | 400 | 1.50x | 0.75x | 300 310 290 | 200 190 210 | 400 400 400 |"
        );
    }
}
