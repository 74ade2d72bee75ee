//! `shale-bench cache-compare`: Shale's cache against memcached 1.6 (over the memcached text
//! protocol) and Redis (over RESP), side by side, with Mega-KV's workloads; Shale's Mega-KV
//! protocol is measured in the same run.
//!
//! Workloads (Mega-KV's): 95% GET / 5% SET and 100% GET; zipf 0.99 and uniform key popularity;
//! key/value sizes 8/8, 16/64, 32/512 and 128/1024; pipeline depths 1 and 32. Every round starts
//! each server fresh for each size, preloads every key, then measures each workload; the order of
//! the servers alternates between rounds, and a two-thread CPU check is recorded per round
//! (DESIGN.md section 8). The report gives medians over rounds and the ratios.
//!
//! `--hit-rate` measures instead what each server keeps at equal memory: a cache-aside client
//! (a GET that misses is followed by a SET) over more keys than fit, each measurement over a
//! fixed count of requests from its own place in the key sequence, so that how fast a server
//! answers does not change which keys it is asked for.
//!
//! `--indexes cpu,gpu` runs Shale once per index engine (`shale serve --mode cache --index E`),
//! same load, same server threads, and adds a table of the engines side by side: Mega-KV's
//! end-to-end comparison of its GPU index against CPU cores. The GPU engine needs a `shale` built
//! with `--features gpu` on a machine with an NVIDIA GPU; where it cannot run, the run stops with
//! the server's reason.

mod client;
mod protocol;
mod servers;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::compare::median;
use crate::cpucheck::{rounds_line, sysbench_cpu_events_per_sec};
use crate::error::{Error, Result};
use crate::generator::Zipfian;
use crate::rng::{mix64, Rng};
use client::{measure, measure_requests, LoadSpec, Measured};
pub use protocol::Wire;
use servers::ServerProcess;

/// Usage of the subcommand.
pub const USAGE: &str = "\
Usage: shale-bench cache-compare [--rounds N] [--seconds S] [--warmup S] [--sizes 8/8,16/64,32/512,128/1024]
         [--workloads 95,100] [--dists zipf,uniform] [--depths 1,32] [--peers memcached,redis]
         [--connections N] [--client-threads N] [--server-threads N] [--memory BYTES] [--keys N]
         [--hit-rate] [--indexes cpu,gpu] [--memcached-args ARGS] [--shale-bin PATH]
         [--cpucheck SECS] [--out FILE.md]
Workloads are GET percentages (the rest SETs). --hit-rate runs a cache-aside client over more
keys than --memory holds (default 64 MiB there) and reports hit rates instead of throughput,
each over a count of requests (half the keys after as many to settle; --seconds and --warmup
do not apply).
--indexes runs Shale with each index engine (gpu: a shale built with --features gpu, on a GPU
machine) and reports them side by side. --memcached-args adds arguments to memcached's command
line (whitespace-separated, e.g. \"-R 200\").";

/// Arguments.
#[derive(Debug, Clone)]
pub struct CacheCompareArgs {
    /// Rounds.
    pub rounds: u32,
    /// Measured seconds per workload.
    pub seconds: f64,
    /// Warm-up seconds per workload.
    pub warmup: f64,
    /// (key, value) sizes.
    pub sizes: Vec<(usize, usize)>,
    /// GET percentages.
    pub workloads: Vec<u32>,
    /// Key popularity: zipf (0.99) or uniform.
    pub zipf: Vec<bool>,
    /// Pipeline depths.
    pub depths: Vec<usize>,
    /// Peers: `memcached`, `redis`.
    pub peers: Vec<String>,
    /// Connections in all.
    pub connections: usize,
    /// Client threads.
    pub client_threads: usize,
    /// Server threads (Shale's `--threads`, memcached's `-t`).
    pub server_threads: usize,
    /// Server memory in bytes.
    pub memory: u64,
    /// Keys (0: as many as fill half the memory, at most a million).
    pub keys: usize,
    /// Measure hit rates at equal memory instead of throughput.
    pub hit_rate: bool,
    /// Shale's index engines (`cpu`, `gpu`); Shale runs once per engine.
    pub indexes: Vec<String>,
    /// Extra arguments for memcached.
    pub memcached_args: Vec<String>,
    /// The `shale` binary.
    pub shale_bin: Option<PathBuf>,
    /// Seconds of the CPU check per round.
    pub cpucheck_secs: u32,
    /// Markdown report file.
    pub out: Option<PathBuf>,
}

impl Default for CacheCompareArgs {
    fn default() -> Self {
        CacheCompareArgs {
            rounds: 3,
            seconds: 3.0,
            warmup: 1.0,
            sizes: vec![(8, 8), (16, 64), (32, 512), (128, 1024)],
            workloads: vec![95, 100],
            zipf: vec![true, false],
            depths: vec![1, 32],
            peers: vec!["memcached".into(), "redis".into()],
            connections: 50,
            client_threads: 2,
            server_threads: 2,
            memory: 1 << 30,
            keys: 0,
            hit_rate: false,
            indexes: vec!["cpu".into()],
            memcached_args: Vec::new(),
            shale_bin: None,
            cpucheck_secs: 5,
            out: None,
        }
    }
}

fn parse_args(args: &[String]) -> Result<CacheCompareArgs> {
    let mut a = CacheCompareArgs::default();
    let mut memory_given = false;
    let mut it = args.iter();
    let usage = |m: &str| Error::usage(format!("{m}\n{USAGE}"));
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| usage(&format!("{arg} needs a value")))
        };
        let list = |v: String| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        };
        let num = |v: String| {
            v.parse::<f64>()
                .map_err(|_| usage(&format!("bad number {v:?}")))
        };
        match arg.trim_start_matches('-') {
            "rounds" => a.rounds = num(value()?)? as u32,
            "seconds" => a.seconds = num(value()?)?,
            "warmup" => a.warmup = num(value()?)?,
            "connections" => a.connections = num(value()?)? as usize,
            "client-threads" => a.client_threads = num(value()?)? as usize,
            "server-threads" => a.server_threads = num(value()?)? as usize,
            "keys" => a.keys = num(value()?)? as usize,
            "cpucheck" => a.cpucheck_secs = num(value()?)? as u32,
            "memory" => {
                a.memory = num(value()?)? as u64;
                memory_given = true;
            }
            "hit-rate" => a.hit_rate = true,
            "shale-bin" => a.shale_bin = Some(PathBuf::from(value()?)),
            "out" => a.out = Some(PathBuf::from(value()?)),
            "peers" => a.peers = list(value()?),
            "indexes" => a.indexes = list(value()?),
            "memcached-args" => {
                a.memcached_args = value()?.split_whitespace().map(String::from).collect()
            }
            "sizes" => {
                a.sizes = list(value()?)
                    .iter()
                    .map(|s| {
                        let (k, v) = s
                            .split_once('/')
                            .ok_or_else(|| usage("sizes are KEY/VALUE"))?;
                        Ok((
                            k.parse().map_err(|_| usage("bad key size"))?,
                            v.parse().map_err(|_| usage("bad value size"))?,
                        ))
                    })
                    .collect::<Result<_>>()?
            }
            "workloads" => {
                a.workloads = list(value()?)
                    .iter()
                    .map(|s| {
                        s.parse()
                            .map_err(|_| usage("workloads are GET percentages"))
                    })
                    .collect::<Result<_>>()?
            }
            "dists" => {
                a.zipf = list(value()?)
                    .iter()
                    .map(|s| match s.as_str() {
                        "zipf" => Ok(true),
                        "uniform" => Ok(false),
                        _ => Err(usage("dists are zipf and uniform")),
                    })
                    .collect::<Result<_>>()?
            }
            "depths" => {
                a.depths = list(value()?)
                    .iter()
                    .map(|s| s.parse().map_err(|_| usage("bad depth")))
                    .collect::<Result<_>>()?
            }
            "help" | "h" => return Err(usage("")),
            other => return Err(usage(&format!("unknown argument {other:?}"))),
        }
    }
    if a.hit_rate && !memory_given {
        a.memory = 64 << 20;
    }
    if a.rounds == 0 || a.connections == 0 || a.depths.contains(&0) || a.sizes.is_empty() {
        return Err(usage("counts must be positive"));
    }
    if a.indexes.is_empty()
        || a.indexes.iter().any(|e| e != "cpu" && e != "gpu")
        || (1..a.indexes.len()).any(|i| a.indexes[..i].contains(&a.indexes[i]))
    {
        return Err(usage("--indexes lists cpu and/or gpu, each once"));
    }
    if a.sizes.iter().any(|&(k, _)| !(8..=250).contains(&k)) {
        return Err(usage("keys are 8 to 250 bytes (memcached's limit)"));
    }
    Ok(a)
}

/// Keys a run uses for a size: as given, or as many as fill half the memory (at most a million);
/// with `--hit-rate`, enough to need three times the memory.
fn key_count(a: &CacheCompareArgs, key: usize, value: usize) -> usize {
    if a.keys > 0 {
        return a.keys;
    }
    let item = (key + value + 80) as u64;
    if a.hit_rate {
        (3 * a.memory / item) as usize
    } else {
        ((a.memory / 2 / item) as usize).min(1_000_000)
    }
}

/// The key of each request in turn: zipf 0.99 (hottest keys spread over the key space) or
/// uniform.
fn sequence(keys: usize, zipf: bool, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    let n = 1 << 22;
    if zipf {
        let z = Zipfian::new(0, keys as u64 - 1, 0.99);
        (0..n)
            .map(|_| (mix64(z.next(&mut rng)) % keys as u64) as u32)
            .collect()
    } else {
        (0..n).map(|_| rng.below(keys as u64) as u32).collect()
    }
}

fn shale_bin(a: &CacheCompareArgs) -> PathBuf {
    a.shale_bin.clone().unwrap_or_else(|| {
        let me = std::env::current_exe().unwrap_or_default();
        me.with_file_name("shale")
    })
}

/// What a system under test is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Shale's cache with an index engine (`cpu`, `gpu`).
    Shale(&'static str),
    Memcached,
    Redis,
}

/// One server under test with the protocols it is measured over, each with its report label.
struct System {
    name: &'static str,
    kind: Kind,
    wires: Vec<(&'static str, Wire)>,
}

/// Shale with the index engine `index`. The CPU engine keeps the plain labels ("shale memcache")
/// the main table uses; another engine's labels name it ("shale gpu memcache").
fn shale_system(index: &str) -> System {
    let (name, kind, labels) = match index {
        "gpu" => (
            "shale gpu",
            Kind::Shale("gpu"),
            ["shale gpu memcache", "shale gpu megakv", "shale gpu resp"],
        ),
        _ => (
            "shale",
            Kind::Shale("cpu"),
            ["shale memcache", "shale megakv", "shale resp"],
        ),
    };
    System {
        name,
        kind,
        wires: vec![
            (labels[0], Wire::Memcache),
            (labels[1], Wire::MegaKv),
            (labels[2], Wire::Resp),
        ],
    }
}

fn start(system: &System, a: &CacheCompareArgs) -> Result<ServerProcess> {
    match system.kind {
        Kind::Shale(index) => servers::shale(&shale_bin(a), a.memory, a.server_threads, index),
        Kind::Memcached => servers::memcached(a.memory, a.server_threads, &a.memcached_args),
        Kind::Redis => servers::redis(a.memory),
    }
}

fn wire_addr(server: &ServerProcess, wire: Wire) -> Result<std::net::SocketAddr> {
    server
        .addr(wire.name())
        .ok_or_else(|| Error::backend(format!("no {} listener", wire.name())))
}

/// Stores every key once.
fn preload(
    server: &ServerProcess,
    wire: Wire,
    keys: usize,
    key: usize,
    value: usize,
) -> Result<()> {
    let wire = if wire == Wire::MegaKv {
        Wire::Memcache
    } else {
        wire
    };
    let spec = LoadSpec {
        addr: wire_addr(server, wire)?,
        wire,
        connections: 8,
        threads: 1,
        depth: 64,
        get_percent: 0,
        key_len: key,
        value_len: value,
        sequence: Arc::new((0..keys as u32).collect()),
        start: 0,
        set_on_miss: false,
    };
    let load = client::Load::start(&spec)?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while load.counters.ops.load(std::sync::atomic::Ordering::Relaxed) < keys as u64 {
        if Instant::now() > deadline {
            return Err(Error::backend("preload took over ten minutes"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    load.stop()
}

/// Items held and evictions, from `stats` over the memcached protocol (or INFO over RESP).
fn server_stats(server: &ServerProcess) -> Option<String> {
    use std::io::{Read, Write};
    let (addr, request, end): (_, &[u8], &[u8]) = match server.addr("memcache") {
        Some(addr) => (addr, b"stats\r\n", b"END\r\n"),
        None => (server.addr("resp")?, b"INFO\r\n", b"\r\n\r\n"),
    };
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(request).ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if got.ends_with(end) && (end != b"\r\n\r\n" || text.contains("# Keyspace")) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let wanted = [
        "curr_items",
        "evictions",
        "index_lossy",
        "bytes",
        "limit_maxbytes",
        "used_memory",
        "evicted_keys",
        "db0",
    ];
    let picked: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches("STAT ");
            let name = l.split([' ', ':']).next()?;
            wanted.contains(&name).then(|| l.to_string())
        })
        .collect();
    Some(picked.join(", "))
}

/// How far apart in the key sequence two measurements of one server start (a prime, so the
/// starts spread over the sequence).
const HIT_RATE_CELL_STRIDE: usize = 1_048_573;

/// Longest a hit-rate measurement waits for its requests, per phase.
const HIT_RATE_PHASE_CAP: Duration = Duration::from_secs(60);

/// A result key: (key, value, GET %, zipf, depth, system label).
type Cell = (usize, usize, u32, bool, usize, &'static str);

/// Runs the subcommand.
///
/// # Errors
/// Usage errors, servers that cannot start, clients that see errors.
pub fn run_command(args: &[String]) -> Result<bool> {
    let a = parse_args(args)?;
    let mut systems: Vec<System> = a.indexes.iter().map(|e| shale_system(e)).collect();
    for peer in &a.peers {
        match peer.as_str() {
            "memcached" => systems.push(System {
                name: "memcached",
                kind: Kind::Memcached,
                wires: vec![("memcached", Wire::Memcache)],
            }),
            "redis" => systems.push(System {
                name: "redis",
                kind: Kind::Redis,
                wires: vec![("redis", Wire::Resp)],
            }),
            "none" => {}
            other => return Err(Error::usage(format!("unknown peer {other:?}"))),
        }
    }
    // Every server must start before any is measured: a GPU engine that cannot run, or a peer
    // that is not installed, stops the run at once rather than after the other rounds.
    for system in &systems {
        drop(start(system, &a)?);
    }
    let mut results: BTreeMap<Cell, Vec<Measured>> = BTreeMap::new();
    let mut cpu = Vec::new();
    let mut errors = 0;
    for round in 0..a.rounds {
        cpu.push(if a.cpucheck_secs > 0 {
            sysbench_cpu_events_per_sec(a.cpucheck_secs)
        } else {
            None
        });
        let mut order: Vec<&System> = systems.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for &(key, value) in &a.sizes {
            let keys = key_count(&a, key, value);
            let sequences: Vec<(bool, Arc<Vec<u32>>)> = a
                .zipf
                .iter()
                .map(|&z| (z, Arc::new(sequence(keys, z, 42 + round as u64))))
                .collect();
            for system in &order {
                let server = start(system, &a)?;
                // With --hit-rate there are three times more keys than fit: the preload fills
                // the cache (and evicts), so the cache-aside client starts from a full cache.
                preload(&server, system.wires[0].1, keys, key, value)?;
                // Each measurement of a server starts elsewhere in its key sequence, the same
                // place for every system: a hit-rate cell reads keys the cell before it did not.
                let mut cell = 0;
                for &(label, wire) in &system.wires {
                    for &get_percent in &a.workloads {
                        for (zipf, seq) in &sequences {
                            for &depth in &a.depths {
                                cell += 1;
                                let spec = LoadSpec {
                                    addr: wire_addr(&server, wire)?,
                                    wire,
                                    connections: a.connections,
                                    threads: a.client_threads,
                                    depth,
                                    get_percent,
                                    key_len: key,
                                    value_len: value,
                                    sequence: Arc::clone(seq),
                                    start: cell * HIT_RATE_CELL_STRIDE,
                                    set_on_miss: a.hit_rate,
                                };
                                let m = if a.hit_rate {
                                    // Half the keys to settle, half to measure: by count, not
                                    // time (see `measure_requests`).
                                    let half = keys as u64 / 2;
                                    measure_requests(&spec, half, half, HIT_RATE_PHASE_CAP)?
                                } else {
                                    measure(
                                        &spec,
                                        Duration::from_secs_f64(a.warmup),
                                        Duration::from_secs_f64(a.seconds),
                                    )?
                                };
                                errors += m.errors;
                                println!(
                                    "round {} {key}/{value} GET {get_percent}% {} depth {depth} {label}: {:.0} ops/s, hit rate {:.4}{}",
                                    round + 1,
                                    if *zipf { "zipf" } else { "uniform" },
                                    m.ops_per_sec,
                                    m.hit_rate(),
                                    if m.errors > 0 { format!(", {} errors", m.errors) } else { String::new() }
                                );
                                results
                                    .entry((key, value, get_percent, *zipf, depth, label))
                                    .or_default()
                                    .push(m);
                            }
                        }
                    }
                }
                if let Some(stats) = server_stats(&server) {
                    println!("round {} {key}/{value} {}: {stats}", round + 1, system.name);
                }
                drop(server);
            }
        }
    }
    let report = report(&a, &results, &cpu);
    print!("{report}");
    if let Some(path) = &a.out {
        std::fs::write(path, &report)
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    }
    if errors > 0 {
        eprintln!("error: {errors} requests got error replies or values of the wrong length");
    }
    Ok(errors == 0)
}

/// What a report shows of one measurement: the hit rate, or thousands of requests per second.
fn figure(a: &CacheCompareArgs, m: &Measured) -> f64 {
    if a.hit_rate {
        m.hit_rate()
    } else {
        m.ops_per_sec / 1000.0
    }
}

/// A median as a table shows it (`-` where nothing was measured).
fn shown(a: &CacheCompareArgs, x: Option<f64>) -> String {
    match x {
        Some(x) if a.hit_rate => format!("{x:.4}"),
        Some(x) => format!("{x:.0}"),
        None => "-".to_string(),
    }
}

/// `x / y` as a table shows it (`-` where either is missing or `y` is zero).
fn ratio(x: Option<f64>, y: Option<f64>) -> String {
    match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => format!("{:.2}x", x / y),
        _ => "-".to_string(),
    }
}

/// Shale's index engines side by side over each protocol: the CPU engine, then each other
/// engine with its ratio to the CPU.
fn index_table(a: &CacheCompareArgs, results: &BTreeMap<Cell, Vec<Measured>>) -> String {
    let engines: Vec<System> = a.indexes.iter().map(|e| shale_system(e)).collect();
    let mut out = String::from("\n| key/value | GET % | keys | depth | protocol |");
    for e in &a.indexes {
        out.push_str(&format!(" index {e} |"));
    }
    let (first, last) = (&a.indexes[0], &a.indexes[a.indexes.len() - 1]);
    out.push_str(&format!(" {last}/{first} |\n|---|---|---|---|---|"));
    out.push_str(&"---|".repeat(engines.len() + 1));
    out.push('\n');
    let mut cells: Vec<(usize, usize, u32, bool, usize)> = results
        .keys()
        .map(|&(k, v, g, z, d, _)| (k, v, g, z, d))
        .collect();
    cells.dedup();
    for (k, v, g, z, d) in cells {
        for (w, protocol) in ["memcache", "megakv", "resp"].iter().enumerate() {
            let figures: Vec<Option<f64>> = engines
                .iter()
                .map(|e| {
                    results
                        .get(&(k, v, g, z, d, e.wires[w].0))
                        .and_then(|ms| median(&ms.iter().map(|m| figure(a, m)).collect::<Vec<_>>()))
                })
                .collect();
            out.push_str(&format!(
                "| {k}/{v} | {g} | {} | {d} | {protocol} |",
                if z { "zipf" } else { "uniform" }
            ));
            for f in &figures {
                out.push_str(&format!(" {} |", shown(a, *f)));
            }
            let ratio = ratio(
                figures.last().copied().flatten(),
                figures.first().copied().flatten(),
            );
            out.push_str(&format!(" {ratio} |\n"));
        }
    }
    out
}

fn report(
    a: &CacheCompareArgs,
    results: &BTreeMap<Cell, Vec<Measured>>,
    cpu: &[Option<f64>],
) -> String {
    let get = |cell: &Cell| -> Option<f64> {
        results
            .get(cell)
            .and_then(|v| median(&v.iter().map(|m| figure(a, m)).collect::<Vec<_>>()))
    };
    let mut out = String::new();
    let metric = if a.hit_rate { "hit rate" } else { "kops/s" };
    out.push_str(
        "| key/value | GET % | keys | depth | shale memcache | memcached | ratio | shale megakv | ratio to memcached | shale resp | redis | ratio |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut cells: Vec<(usize, usize, u32, bool, usize)> = results
        .keys()
        .map(|&(k, v, g, z, d, _)| (k, v, g, z, d))
        .collect();
    cells.dedup();
    for (k, v, g, z, d) in cells {
        let (smc, mc, mkv, sresp, redis) = (
            get(&(k, v, g, z, d, "shale memcache")),
            get(&(k, v, g, z, d, "memcached")),
            get(&(k, v, g, z, d, "shale megakv")),
            get(&(k, v, g, z, d, "shale resp")),
            get(&(k, v, g, z, d, "redis")),
        );
        out.push_str(&format!(
            "| {k}/{v} | {g} | {} | {d} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            if z { "zipf" } else { "uniform" },
            shown(a, smc),
            shown(a, mc),
            ratio(smc, mc),
            shown(a, mkv),
            ratio(mkv, mc),
            shown(a, sresp),
            shown(a, redis),
            ratio(sresp, redis),
        ));
    }
    if a.indexes.len() > 1 {
        out.push_str(&index_table(a, results));
    }
    out.push_str(&format!(
        "\n{metric}, medians of {} rounds; {} connections over {} client threads; servers with {} threads and {} MiB; {} s measured after {} s warm-up.\nCPU check (sysbench cpu --threads=2, events/s): {}\n",
        a.rounds,
        a.connections,
        a.client_threads,
        a.server_threads,
        a.memory >> 20,
        a.seconds,
        a.warmup,
        rounds_line(cpu)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<CacheCompareArgs> {
        parse_args(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn index_engines_and_memcached_arguments_parse() {
        let a = args(&["--indexes", "cpu,gpu", "--memcached-args", " -R  200 "]).unwrap();
        assert_eq!(a.indexes, ["cpu", "gpu"]);
        assert_eq!(a.memcached_args, ["-R", "200"]);
        assert_eq!(args(&[]).unwrap().indexes, ["cpu"]);
        for bad in ["tpu", "cpu,cpu", ""] {
            assert!(args(&["--indexes", bad]).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_index_table_puts_engines_side_by_side() {
        let a = args(&["--indexes", "cpu,gpu"]).unwrap();
        let m = |kops: f64| Measured {
            ops_per_sec: kops * 1000.0,
            gets: 1,
            hits: 1,
            errors: 0,
        };
        let mut results: BTreeMap<Cell, Vec<Measured>> = BTreeMap::new();
        for (label, kops) in [
            ("shale memcache", [100.0, 300.0, 200.0]),
            ("shale gpu memcache", [500.0, 400.0, 450.0]),
            ("shale megakv", [10.0, 10.0, 10.0]),
        ] {
            results.insert((8, 8, 95, true, 32, label), kops.map(m).to_vec());
        }
        let table = index_table(&a, &results);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[1],
            "| key/value | GET % | keys | depth | protocol | index cpu | index gpu | gpu/cpu |"
        );
        assert_eq!(
            lines[3],
            "| 8/8 | 95 | zipf | 32 | memcache | 200 | 450 | 2.25x |"
        );
        assert_eq!(lines[4], "| 8/8 | 95 | zipf | 32 | megakv | 10 | - | - |");
        assert_eq!(lines[5], "| 8/8 | 95 | zipf | 32 | resp | - | - | - |");
    }
}
