//! `shale-bench large-values`: what one client writing very large values costs everyone else,
//! Shale's server against Redis, side by side.
//!
//! One writer connection SETs `--count` values of each of `--sizes` MiB (100 and 300 by default,
//! random bytes, so nothing compresses them) while `--clients` other connections loop on small
//! commands, half GET and half SET of 100-byte values over 1,000 preloaded keys. Each small
//! command's latency is timed on its client; those that overlap the writes of one size make that
//! size's p50, p99 and max. The peak resident memory of the server while that size is written
//! (`VmHWM`, reset through `/proc/PID/clear_refs` before each size) is reported as growth over its
//! resident memory before. After the writes every large value's length is checked with STRLEN.
//!
//! Servers: Shale with its defaults except `proto-max-bulk-len` (its default, 64 MiB, refuses
//! these values; 512 MiB, Redis's default, is passed), and `redis-server` without persistence
//! and with `appendonly yes, appendfsync everysec` (other settings Redis's defaults). Every round
//! starts each server fresh (a free loopback port, a temporary directory) and stops it; the order
//! of the servers reverses between rounds, and a two-thread CPU check (`sysbench`) is recorded per
//! round. The report gives medians over rounds and the Shale/Redis ratios, as markdown.

use crate::compare::median;
use crate::cpucheck::{rounds_line, sysbench_cpu_events_per_sec};
use crate::error::{Error, Result};
use crate::redis_compare::{default_shale_bin, free_port, start_redis, stop, tempdir, wait_ready};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Small keys preloaded and then read and overwritten by the small clients.
const SMALL_KEYS: usize = 1000;
/// Bytes of a small value.
const SMALL_VALUE: usize = 100;
/// How long a client waits for one reply before the run fails.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the small clients run before the first large write (so they are connected and warm).
const WARMUP: Duration = Duration::from_millis(300);
const MIB: usize = 1 << 20;

/// Usage of the subcommand.
pub const USAGE: &str = "\
Usage: shale-bench large-values [--rounds N] [--sizes 100,300] [--count N] [--clients N]
                                [--redis none,everysec] [--shale-arg ARG]... [--shale-bin PATH]
                                [--baseline PATH] [--cpucheck SECS] [--out FILE.md]
One client SETs --count values of each size (MiB) while --clients others run small GETs and SETs;
reports their p50/p99/max latency during the large writes and the servers' peak memory growth.
Shale runs with its defaults plus --proto-max-bulk-len 536870912 (and any --shale-arg); Redis
persistence is none (no RDB, no AOF) or everysec/always/no (AOF with that appendfsync).
--baseline runs another `shale` binary (an older build) the same way, as one more server;
repeat it for more (each is labelled by its file name).";

/// Arguments.
#[derive(Debug, Clone)]
pub struct LargeValuesArgs {
    /// Rounds.
    pub rounds: u32,
    /// Large value sizes in MiB.
    pub sizes_mib: Vec<usize>,
    /// Large values written per size.
    pub count: u32,
    /// Small-command clients (even ones GET, odd ones SET).
    pub clients: u32,
    /// Redis persistence modes, one Redis server per mode.
    pub redis_modes: Vec<String>,
    /// Extra arguments of `shale serve`.
    pub shale_args: Vec<String>,
    /// The `shale` binary.
    pub shale_bin: Option<PathBuf>,
    /// Other `shale` binaries run the same way (older builds, to compare against).
    pub baselines: Vec<PathBuf>,
    /// Seconds of the CPU check per round (0: none).
    pub cpucheck_secs: u32,
    /// Markdown report file.
    pub out: Option<PathBuf>,
}

impl Default for LargeValuesArgs {
    fn default() -> Self {
        LargeValuesArgs {
            rounds: 3,
            sizes_mib: vec![100, 300],
            count: 3,
            clients: 4,
            redis_modes: vec!["none".into(), "everysec".into()],
            shale_args: Vec::new(),
            shale_bin: None,
            baselines: Vec::new(),
            cpucheck_secs: 5,
            out: None,
        }
    }
}

/// Parses the arguments after `large-values`; `None` asks for the usage.
///
/// # Errors
/// `Usage` for unknown flags and bad values.
pub fn parse_args(args: &[String]) -> Result<Option<LargeValuesArgs>> {
    let mut a = LargeValuesArgs::default();
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
            "sizes" => {
                a.sizes_mib = v
                    .split(',')
                    .map(|s| num(s).map(|n| n.max(1) as usize))
                    .collect::<Result<_>>()?
            }
            "count" => a.count = num(v)?.max(1) as u32,
            "clients" => a.clients = num(v)?.max(1) as u32,
            "redis" => {
                a.redis_modes = v
                    .split(',')
                    .filter(|m| !m.is_empty())
                    .map(|m| {
                        if ["none", "always", "everysec", "no"].contains(&m) {
                            Ok(m.to_string())
                        } else {
                            Err(Error::usage(format!(
                                "'{m}' is not one of none, always, everysec, no"
                            )))
                        }
                    })
                    .collect::<Result<_>>()?
            }
            "shale-arg" => a.shale_args.push(v.clone()),
            "shale-bin" => a.shale_bin = Some(PathBuf::from(v)),
            "baseline" => a.baselines.push(PathBuf::from(v)),
            "cpucheck" => a.cpucheck_secs = num(v)? as u32,
            "out" | "o" => a.out = Some(PathBuf::from(v)),
            _ => {
                return Err(Error::usage(format!(
                    "unknown option '{}' for large-values",
                    args[i]
                )))
            }
        }
        i += 2;
    }
    Ok(Some(a))
}

/// Runs the subcommand (`args` after `large-values`).
///
/// # Errors
/// Usage errors, a missing tool, a server that does not start or answers wrongly.
pub fn run_command(args: &[String]) -> Result<bool> {
    let Some(a) = parse_args(args)? else {
        println!("{USAGE}");
        return Ok(true);
    };
    let report = run(&a)?;
    crate::cli::emit_report(&report, a.out.as_deref())?;
    Ok(true)
}

/// A server under test: Shale, the baseline build of Shale, or Redis with one persistence mode.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Server {
    Shale,
    Baseline(PathBuf),
    Redis(String),
}

impl Server {
    fn label(&self) -> String {
        match self {
            Server::Shale => "Shale".into(),
            Server::Baseline(bin) => format!(
                "Shale baseline {}",
                bin.file_name().unwrap_or_default().to_string_lossy()
            ),
            Server::Redis(m) => format!("Redis ({m})"),
        }
    }
}

/// p50, p99 and max of one kind of small command, in milliseconds, and how many ran.
#[derive(Debug, Clone, Copy, Default)]
struct Latency {
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    ops: usize,
}

impl Latency {
    fn of(mut v: Vec<Duration>) -> Latency {
        if v.is_empty() {
            return Latency::default();
        }
        v.sort_unstable();
        let at = |q: f64| {
            let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
            v[i].as_secs_f64() * 1e3
        };
        Latency {
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: at(1.0),
            ops: v.len(),
        }
    }
}

/// What one server did while the values of one size were written.
#[derive(Debug, Clone, Copy, Default)]
struct SizeFigures {
    get: Latency,
    set: Latency,
    /// Seconds the large SETs of this size took, all of them.
    write_secs: f64,
    /// Peak resident memory minus resident memory before, in bytes (`None`: not readable).
    rss_growth: Option<u64>,
}

fn run(a: &LargeValuesArgs) -> Result<String> {
    let shale = a.shale_bin.clone().unwrap_or_else(default_shale_bin);
    if !shale.is_file() {
        return Err(Error::usage(format!(
            "{} not found: build it with `cargo build --release -p shale-server` or pass --shale-bin",
            shale.display()
        )));
    }
    if !a.redis_modes.is_empty()
        && Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
    {
        return Err(Error::usage(
            "redis-server not found: apt-get install redis-server",
        ));
    }
    let largest = a.sizes_mib.iter().max().copied().unwrap_or(1) * MIB;
    let value = random_bytes(largest);
    let mut servers = vec![Server::Shale];
    for baseline in &a.baselines {
        if !baseline.is_file() {
            return Err(Error::usage(format!("{} not found", baseline.display())));
        }
        servers.push(Server::Baseline(baseline.clone()));
    }
    servers.extend(a.redis_modes.iter().cloned().map(Server::Redis));
    // (server index, size index) -> figures per round.
    let mut results: Vec<Vec<Vec<SizeFigures>>> =
        vec![vec![Vec::new(); a.sizes_mib.len()]; servers.len()];
    let mut cpu = Vec::new();
    let started = Instant::now();
    for round in 0..a.rounds {
        cpu.push(if a.cpucheck_secs > 0 {
            sysbench_cpu_events_per_sec(a.cpucheck_secs)
        } else {
            None
        });
        let mut order: Vec<usize> = (0..servers.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for si in order {
            let server = &servers[si];
            let tmp = tempdir()?;
            let port = free_port()?;
            let mut child = match server {
                Server::Shale => start_shale(&shale, port, &tmp, &a.shale_args)?,
                Server::Baseline(bin) => start_shale(bin, port, &tmp, &a.shale_args)?,
                Server::Redis(mode) => start_redis(port, &tmp, mode)?,
            };
            let outcome = wait_ready(port).and_then(|()| run_once(a, port, child.id(), &value));
            stop(&mut child, port);
            let _ = std::fs::remove_dir_all(&tmp);
            for (zi, f) in outcome?.into_iter().enumerate() {
                eprintln!(
                    "round {} {}: {} MiB x{} in {:.2} s; GET p50/p99/max {:.2}/{:.2}/{:.2} ms ({}), \
                     SET {:.2}/{:.2}/{:.2} ms ({}); peak RSS +{}",
                    round + 1,
                    server.label(),
                    a.sizes_mib[zi],
                    a.count,
                    f.write_secs,
                    f.get.p50_ms,
                    f.get.p99_ms,
                    f.get.max_ms,
                    f.get.ops,
                    f.set.p50_ms,
                    f.set.p99_ms,
                    f.set.max_ms,
                    f.set.ops,
                    f.rss_growth
                        .map_or("n/a".into(), |g| format!("{} MiB", g / MIB as u64)),
                );
                results[si][zi].push(f);
            }
        }
    }
    Ok(report(a, &servers, &results, &cpu, started.elapsed()))
}

/// Bytes from a xorshift generator: random enough that no compressor shrinks them.
fn random_bytes(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

fn start_shale(bin: &Path, port: u16, dir: &Path, extra: &[String]) -> Result<Child> {
    Command::new(bin)
        .args(["serve", "--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--proto-max-bulk-len", "536870912", "--dir"])
        .arg(dir.join("data"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::io(format!("cannot start {}", bin.display()), e))
}

/// One RESP connection that sends one command and reads its reply at a time.
struct Client {
    w: TcpStream,
    r: BufReader<TcpStream>,
    line: Vec<u8>,
}

impl Client {
    fn connect(port: u16) -> Result<Client> {
        let w = TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| Error::io(format!("cannot connect to port {port}"), e))?;
        let _ = w.set_nodelay(true);
        w.set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| Error::io("cannot set a read timeout", e))?;
        let r = BufReader::new(
            w.try_clone()
                .map_err(|e| Error::io("cannot clone a socket", e))?,
        );
        Ok(Client {
            w,
            r,
            line: Vec::new(),
        })
    }

    /// Sends a command of `args` (the last one may be large: it is written from its slice).
    fn send(&mut self, args: &[&[u8]]) -> Result<()> {
        let mut head = format!("*{}\r\n", args.len()).into_bytes();
        let (last, first) = args.split_last().expect("a command has a name");
        for a in first {
            head.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            head.extend_from_slice(a);
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(format!("${}\r\n", last.len()).as_bytes());
        let io = |e| Error::io("cannot send a command", e);
        if last.len() > 64 << 10 {
            self.w.write_all(&head).map_err(io)?;
            self.w.write_all(last).map_err(io)?;
            self.w.write_all(b"\r\n").map_err(io)
        } else {
            head.extend_from_slice(last);
            head.extend_from_slice(b"\r\n");
            self.w.write_all(&head).map_err(io)
        }
    }

    /// Reads one reply; returns its integer for `:N`, its length for a bulk string, 0 otherwise.
    fn reply(&mut self) -> Result<i64> {
        self.line.clear();
        self.r
            .read_until(b'\n', &mut self.line)
            .map_err(|e| Error::io("cannot read a reply", e))?;
        let text = String::from_utf8_lossy(&self.line).trim_end().to_string();
        let bad = || Error::backend(format!("unexpected reply '{text}'"));
        match self.line.first() {
            Some(b'+') => Ok(0),
            Some(b':') => text[1..].parse().map_err(|_| bad()),
            Some(b'$') => {
                let n: i64 = text[1..].parse().map_err(|_| bad())?;
                if n >= 0 {
                    let mut body = vec![0; n as usize + 2];
                    self.r
                        .read_exact(&mut body)
                        .map_err(|e| Error::io("cannot read a reply", e))?;
                }
                Ok(n)
            }
            _ => Err(bad()),
        }
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<i64> {
        self.send(args)?;
        self.reply()
    }
}

/// One small command: when it started and how long it took.
type Timed = (Instant, Duration);

/// A small client's [`Timed`] records, in chunks of a fixed capacity. One `Vec` that doubles
/// copies all it holds at once (tens of MiB after a few seconds): a stretch of CPU on the
/// client's thread that, on two CPUs, preempted the server's connection thread for up to 32 ms
/// in traced runs, and was then counted as the server's latency.
#[derive(Default)]
struct TimedLog {
    chunks: Vec<Vec<Timed>>,
}

impl TimedLog {
    /// Records per chunk (2 MiB).
    const CHUNK: usize = 64 << 10;

    fn push(&mut self, t: Timed) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < Self::CHUNK => c.push(t),
            _ => {
                let mut c = Vec::with_capacity(Self::CHUNK);
                c.push(t);
                self.chunks.push(c);
            }
        }
    }

    /// Every record, in order.
    fn into_vec(self) -> Vec<Timed> {
        self.chunks.concat()
    }
}

/// Preloads the small keys, starts the small clients, writes the large values one size after
/// the other and returns each size's figures.
fn run_once(a: &LargeValuesArgs, port: u16, pid: u32, value: &[u8]) -> Result<Vec<SizeFigures>> {
    let small = vec![b's'; SMALL_VALUE];
    let mut writer = Client::connect(port)?;
    for k in 0..SMALL_KEYS {
        writer.send(&[b"SET", format!("small{k}").as_bytes(), &small])?;
    }
    for _ in 0..SMALL_KEYS {
        writer.reply()?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let probes: Vec<_> = (0..a.clients)
        .map(|c| {
            let stop = stop.clone();
            let small = small.clone();
            std::thread::spawn(move || -> Result<Vec<Timed>> {
                let mut client = Client::connect(port)?;
                let mut timed = TimedLog::default();
                let mut i = c as usize * 7919;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("small{}", i % SMALL_KEYS);
                    let t = Instant::now();
                    if c % 2 == 0 {
                        let n = client.call(&[b"GET", key.as_bytes()])?;
                        if n != SMALL_VALUE as i64 {
                            return Err(Error::backend(format!("GET {key} gave {n} bytes")));
                        }
                    } else {
                        client.call(&[b"SET", key.as_bytes(), &small])?;
                    }
                    timed.push((t, t.elapsed()));
                    i += 1;
                }
                Ok(timed.into_vec())
            })
        })
        .collect();
    std::thread::sleep(WARMUP);
    let writes = write_large(a, &mut writer, pid, value);
    stop.store(true, Ordering::Relaxed);
    let mut timed: Vec<Vec<Timed>> = Vec::new();
    for p in probes {
        timed.push(
            p.join()
                .map_err(|_| Error::backend("a small client panicked"))??,
        );
    }
    let windows = writes?;
    for (zi, &mib) in a.sizes_mib.iter().enumerate() {
        for n in 0..a.count {
            let len = writer.call(&[b"STRLEN", format!("big{zi}_{n}").as_bytes()])?;
            if len != (mib * MIB) as i64 {
                return Err(Error::backend(format!(
                    "big{zi}_{n} has {len} bytes, not {}",
                    mib * MIB
                )));
            }
        }
    }
    Ok(windows
        .into_iter()
        .map(|(from, to, rss_growth)| {
            let during = |parity: usize| {
                timed
                    .iter()
                    .enumerate()
                    .filter(|(c, _)| c % 2 == parity)
                    .flat_map(|(_, v)| v.iter())
                    .filter(|(t, d)| *t < to && *t + *d > from)
                    .map(|&(_, d)| d)
                    .collect::<Vec<_>>()
            };
            SizeFigures {
                get: Latency::of(during(0)),
                set: Latency::of(during(1)),
                write_secs: (to - from).as_secs_f64(),
                rss_growth,
            }
        })
        .collect())
}

/// Writes `count` values of each size; returns each size's window and peak memory growth.
fn write_large(
    a: &LargeValuesArgs,
    writer: &mut Client,
    pid: u32,
    value: &[u8],
) -> Result<Vec<(Instant, Instant, Option<u64>)>> {
    let mut windows = Vec::new();
    for (zi, &mib) in a.sizes_mib.iter().enumerate() {
        let before = reset_peak_rss(pid);
        let from = Instant::now();
        for n in 0..a.count {
            writer.call(&[
                b"SET",
                format!("big{zi}_{n}").as_bytes(),
                &value[..mib * MIB],
            ])?;
        }
        let to = Instant::now();
        let peak = proc_status_kib(pid, "VmHWM:");
        windows.push((
            from,
            to,
            before.zip(peak).map(|(b, p)| p.saturating_sub(b) * 1024),
        ));
    }
    Ok(windows)
}

/// Resets the process's peak resident memory to its current one; returns the current one (KiB).
fn reset_peak_rss(pid: u32) -> Option<u64> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").ok()?;
    proc_status_kib(pid, "VmRSS:")
}

/// A `kB` field of `/proc/PID/status`.
fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn report(
    a: &LargeValuesArgs,
    servers: &[Server],
    results: &[Vec<Vec<SizeFigures>>],
    cpu: &[Option<f64>],
    took: Duration,
) -> String {
    let mut s = format!(
        "large values: one client SETs {} values of each of {} MiB while {} clients run small \
         GET/SET ({SMALL_VALUE} B, {SMALL_KEYS} keys); Shale defaults + proto-max-bulk-len 512 MiB{}; \
         {} rounds (order reversed every other round), {:.0} s\n",
        a.count,
        a.sizes_mib
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        a.clients,
        if a.shale_args.is_empty() {
            String::new()
        } else {
            format!(" {}", a.shale_args.join(" "))
        },
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
    s.push_str(
        "\nMedians over rounds; latencies in ms of the small commands that overlapped the large \
         writes of that size.\n\n| size MiB | server | GET p50 | GET p99 | GET max | SET p50 | \
         SET p99 | SET max | large SETs s | peak RSS growth MiB | GET max per round | SET max \
         per round |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let med = |v: &[SizeFigures], f: &dyn Fn(&SizeFigures) -> f64| {
        median(&v.iter().map(f).collect::<Vec<_>>())
    };
    let fmt = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.2}"));
    let list = |v: &[SizeFigures], f: &dyn Fn(&SizeFigures) -> f64| {
        v.iter()
            .map(|x| format!("{:.1}", f(x)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for (zi, mib) in a.sizes_mib.iter().enumerate() {
        for (si, server) in servers.iter().enumerate() {
            let v = &results[si][zi];
            let growth: Vec<f64> = v
                .iter()
                .filter_map(|f| f.rss_growth)
                .map(|g| g as f64 / MIB as f64)
                .collect();
            s.push_str(&format!(
                "| {mib} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                server.label(),
                fmt(med(v, &|f| f.get.p50_ms)),
                fmt(med(v, &|f| f.get.p99_ms)),
                fmt(med(v, &|f| f.get.max_ms)),
                fmt(med(v, &|f| f.set.p50_ms)),
                fmt(med(v, &|f| f.set.p99_ms)),
                fmt(med(v, &|f| f.set.max_ms)),
                fmt(med(v, &|f| f.write_secs)),
                median(&growth).map_or("n/a".into(), |g| format!("{g:.0}")),
                list(v, &|f| f.get.max_ms),
                list(v, &|f| f.set.max_ms),
            ));
        }
    }
    if servers.iter().any(|s| matches!(s, Server::Redis(_))) {
        s.push_str(
            "\nShale/Redis (of the medians; below 1 is Shale lower):\n\n| size MiB | against | \
             GET p99 | GET max | SET p99 | SET max | large SETs s |\n|---|---|---|---|---|---|---|\n",
        );
        let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) if y > 0.0 && x / y < 0.1 => format!("{:.3}x", x / y),
            (Some(x), Some(y)) if y > 0.0 => format!("{:.2}x", x / y),
            _ => "n/a".into(),
        };
        for (zi, mib) in a.sizes_mib.iter().enumerate() {
            let sh = &results[0][zi];
            for (si, server) in servers.iter().enumerate().skip(1) {
                if !matches!(server, Server::Redis(_)) {
                    continue;
                }
                let re = &results[si][zi];
                let r = |f: &dyn Fn(&SizeFigures) -> f64| ratio(med(sh, f), med(re, f));
                s.push_str(&format!(
                    "| {mib} | {} | {} | {} | {} | {} | {} |\n",
                    server.label(),
                    r(&|f| f.get.p99_ms),
                    r(&|f| f.get.max_ms),
                    r(&|f| f.set.p99_ms),
                    r(&|f| f.set.max_ms),
                    r(&|f| f.write_secs),
                ));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_and_bad_ones_are_refused() {
        let args: Vec<String> =
            "--sizes 10,20 --count 2 --clients 6 --redis everysec --shale-arg --threads --shale-arg 1"
                .split(' ')
                .map(str::to_string)
                .collect();
        let a = parse_args(&args).unwrap().unwrap();
        assert_eq!(a.sizes_mib, vec![10, 20]);
        assert_eq!((a.count, a.clients), (2, 6));
        assert_eq!(a.redis_modes, vec!["everysec".to_string()]);
        assert_eq!(a.shale_args, vec!["--threads".to_string(), "1".to_string()]);
        assert!(a.baselines.is_empty());
        let two: Vec<String> = "--baseline old/shale --baseline older/shale"
            .split(' ')
            .map(str::to_string)
            .collect();
        let a = parse_args(&two).unwrap().unwrap();
        assert_eq!(
            a.baselines,
            vec![PathBuf::from("old/shale"), PathBuf::from("older/shale")]
        );
        assert!(parse_args(&["--redis".into(), "sometimes".into()]).is_err());
        assert!(parse_args(&["--sizes".into(), "big".into()]).is_err());
        assert!(parse_args(&["--bogus".into(), "1".into()]).is_err());
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let v: Vec<Duration> = (1..=200).map(Duration::from_millis).collect();
        let l = Latency::of(v);
        assert_eq!(l.ops, 200);
        assert_eq!(l.p50_ms, 100.0);
        assert_eq!(l.p99_ms, 198.0);
        assert_eq!(l.max_ms, 200.0);
        assert_eq!(Latency::of(Vec::new()).ops, 0);
    }

    #[test]
    fn random_bytes_have_the_length_asked_and_do_not_repeat_a_byte() {
        let v = random_bytes(1001);
        assert_eq!(v.len(), 1001);
        assert!(v.windows(2).any(|w| w[0] != w[1]));
    }
}
