//! `shale-bench memtable`: the two memory components side by side, in the manner of FloDB's
//! `db_test` (`-n threads -i initial keys -u update% -d duration`, optional skew).
//!
//! Each run builds a fresh memtable, loads `-i` keys with one thread, then lets `-n` threads run
//! for `-d` seconds, each operation an update (an insert of the key with a new sequence number)
//! with probability `-u` percent and a point read otherwise. It reports operations and updates per
//! second. Every configuration of the sweep (key sizes x update percentages x thread counts) runs
//! both memtables once per round, alternating which goes first, and the report gives medians over
//! rounds and the ratio FloDB / skiplist.
//!
//! With `-scan`, the timed phase runs short scans instead: `-n` scanner threads read ranges of N
//! keys (`rangeN`) or every field of one object (`prefix`: the 16 keys that share all but their
//! last byte), each through a cursor bounded to its range (`Memtable::range_iter`), while `-w`
//! writer threads keep updating random keys. It reports scans per second and the writers'
//! updates per second, both memtables side by side.
//!
//! Keys are integers in `[0, i)`, big-endian in their last 8 bytes; a 16-byte key starts with 8
//! zero bytes. In scan mode key `i` is field `i % 16` of object `i / 16`: the object number over
//! a last byte that holds the field. FloDB's membuffer is told the common prefix (`prefix_bits`, FloDB's CLHT_K: the zero
//! bytes and the integer's leading zero bits) so its buckets partition the key range. With `-s P`, P percent of operations go to
//! the first 10 percent of the keys (a hot set); the default is uniform.

use crate::cpucheck::{rounds_line, sysbench_cpu_events_per_sec};
use crate::error::{Error, Result};
use shale::memtable::{FloDbConfig, FloDbMemtable, Memtable, SkipListMemtable};
use shale::ValueKind;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
Usage:
  shale-bench memtable [-n 1,2,4,8,16] [-i 200000,...] [-u 0,50,100] [-d 1] [-k 8,16] [-v 256]
                       [-s 0] [-r 3] [-membuffer BYTES] [-drain N] [-cpucheck SECS] [-out FILE.md]
                       [-scan range10,range100,prefix] [-w 1]

Runs the skiplist memtable and the FloDB memtable side by side, FloDB db_test style:
  -n LIST        client thread counts [1,2,4,8,16]
  -i LIST        keys loaded before the timed phase, and the key space [200000]; with
                 several, a growth table compares each size's throughput with the first's
  -u LIST        update percentages (the rest are reads) [0,50,100]
  -d SECS        seconds of each timed run [1]
  -k LIST        key sizes in bytes, 8 or more [8,16]
  -v N           value bytes [256]
  -s P           percent of operations on the hottest 10% of keys; 0 = uniform [0]
  -r N           rounds, each running both memtables in alternating order [3]
  -membuffer N   FloDB membuffer bytes [4194304]
  -drain N       FloDB drain threads [1]
  -cpucheck S    seconds of `sysbench cpu --threads=2` before each round; 0 skips it [2]
  -scan LIST     scan mode: -n scanner threads run scans of these shapes (rangeN: N keys;
                 prefix: the 16 fields of one object) instead of -u's point operations
  -w N           scan mode: writer threads updating random keys meanwhile [1]
  -out FILE.md   also write the report there
";

/// The subcommand's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MemtableArgs {
    pub threads: Vec<usize>,
    pub initial: Vec<u64>,
    pub updates: Vec<u32>,
    pub duration: Duration,
    pub key_sizes: Vec<usize>,
    pub value_size: usize,
    pub skew: u32,
    pub rounds: usize,
    pub membuffer: usize,
    pub drain: usize,
    pub cpucheck_secs: u32,
    pub out: Option<std::path::PathBuf>,
    /// Scan mode: the scan shapes to run (empty: point operations).
    pub scans: Vec<Scan>,
    /// Scan mode: writer threads.
    pub writers: usize,
}

/// The shape of one scan in scan mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// The keys from a random key to the one `n - 1` after it.
    Range(u64),
    /// Every field of one random object: the keys that share all but the last byte.
    Prefix,
}

impl Scan {
    fn name(self) -> String {
        match self {
            Scan::Range(n) => format!("range{n}"),
            Scan::Prefix => "prefix".into(),
        }
    }

    fn parse(v: &str) -> Option<Scan> {
        match v.trim() {
            "prefix" => Some(Scan::Prefix),
            r => r
                .strip_prefix("range")
                .and_then(|n| n.parse().ok())
                .filter(|&n| n > 0)
                .map(Scan::Range),
        }
    }
}

/// Fields of one object in scan mode: the values of a key's last byte.
const FIELDS: u64 = 16;

impl Default for MemtableArgs {
    fn default() -> MemtableArgs {
        MemtableArgs {
            threads: vec![1, 2, 4, 8, 16],
            initial: vec![200_000],
            updates: vec![0, 50, 100],
            duration: Duration::from_secs(1),
            key_sizes: vec![8, 16],
            value_size: 256,
            skew: 0,
            rounds: 3,
            membuffer: 4 << 20,
            drain: 1,
            cpucheck_secs: 2,
            out: None,
            scans: Vec::new(),
            writers: 1,
        }
    }
}

fn list<T: std::str::FromStr>(flag: &str, v: &str) -> Result<Vec<T>> {
    v.split(',')
        .map(|x| x.trim().parse::<T>())
        .collect::<std::result::Result<Vec<T>, _>>()
        .ok()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            Error::usage(format!(
                "-{flag} expects a comma-separated list of numbers, got '{v}'"
            ))
        })
}

fn one<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T> {
    v.trim()
        .parse()
        .map_err(|_| Error::usage(format!("-{flag} expects a number, got '{v}'")))
}

/// Parses the arguments after `memtable`; `None` for `-help`.
///
/// # Errors
/// `Usage` for unknown flags, missing or malformed values, and out-of-range settings.
pub fn parse_args(args: &[String]) -> Result<Option<MemtableArgs>> {
    let mut a = MemtableArgs::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let flag = arg.trim_start_matches('-');
        if matches!(flag, "help" | "h") {
            return Ok(None);
        }
        let v = it
            .next()
            .ok_or_else(|| Error::usage(format!("missing value for {arg}")))?;
        match flag {
            "n" => a.threads = list(flag, v)?,
            "i" => a.initial = list(flag, v)?,
            "u" => a.updates = list(flag, v)?,
            "d" => a.duration = Duration::from_secs_f64(one(flag, v)?),
            "k" => a.key_sizes = list(flag, v)?,
            "v" => a.value_size = one(flag, v)?,
            "s" => a.skew = one(flag, v)?,
            "r" => a.rounds = one(flag, v)?,
            "membuffer" => a.membuffer = one(flag, v)?,
            "drain" => a.drain = one(flag, v)?,
            "cpucheck" => a.cpucheck_secs = one(flag, v)?,
            "out" => a.out = Some(v.into()),
            "scan" => {
                a.scans = v
                    .split(',')
                    .map(|x| {
                        Scan::parse(x).ok_or_else(|| {
                            Error::usage(format!("-scan expects rangeN or prefix, got '{x}'"))
                        })
                    })
                    .collect::<Result<_>>()?
            }
            "w" => a.writers = one(flag, v)?,
            _ => return Err(Error::usage(format!("unknown option '{arg}' for memtable"))),
        }
    }
    if a.threads.contains(&0) || a.initial.contains(&0) || a.rounds == 0 || a.duration.is_zero() {
        return Err(Error::usage("-n, -i, -r and -d must be positive"));
    }
    if a.updates.iter().any(|&u| u > 100) || a.skew > 100 {
        return Err(Error::usage("-u and -s are percentages (0-100)"));
    }
    if a.scans
        .iter()
        .any(|s| matches!(s, Scan::Range(n) if *n > a.initial.iter().copied().min().unwrap_or(0)))
    {
        return Err(Error::usage("-scan: a range is at most -i keys"));
    }
    if a.key_sizes.iter().any(|&k| k < 8) {
        return Err(Error::usage("-k: keys are at least 8 bytes"));
    }
    Ok(Some(a))
}

/// The two memtables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    SkipList,
    FloDb,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::SkipList => "skiplist",
            Kind::FloDb => "flodb",
        }
    }
}

/// One configuration of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub initial: u64,
    pub key_size: usize,
    pub update_pct: u32,
    pub threads: usize,
    /// Scan mode: the scans the `threads` run (`update_pct` is then unused).
    pub scan: Option<Scan>,
}

/// What one timed run did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunResult {
    /// Point operations per second, or scans per second in scan mode.
    pub ops_per_sec: f64,
    /// Updates per second (in scan mode: the writer threads').
    pub updates_per_sec: f64,
    /// Scan mode: entries read per scan, on average.
    pub entries_per_scan: f64,
    /// The memtable's `approximate_bytes` once the keys were loaded.
    pub loaded_bytes: usize,
}

/// A fresh memtable of `kind` for keys of `key_size` bytes up to the integer `largest`.
fn make(kind: Kind, args: &MemtableArgs, key_size: usize, largest: u64) -> Arc<dyn Memtable> {
    match kind {
        Kind::SkipList => Arc::new(SkipListMemtable::new()),
        Kind::FloDb => Arc::new(FloDbMemtable::new(FloDbConfig {
            membuffer_bytes: args.membuffer,
            prefix_bits: common_prefix_bits(key_size, largest + 1),
            drain_threads: args.drain,
        })),
    }
}

/// Leading bits that every key of the benchmark shares: the zero bytes before the integer, and
/// the integer's own leading zeros below `keys`. FloDB's partitioned hashing takes the bucket
/// index from the bits after them (its CLHT_K), so the buckets split the key range evenly.
fn common_prefix_bits(key_size: usize, keys: u64) -> u32 {
    8 * (key_size as u32 - 8) + keys.saturating_sub(1).max(1).leading_zeros()
}

fn key(buf: &mut [u8], k: u64) {
    let n = buf.len();
    buf[n - 8..].copy_from_slice(&k.to_be_bytes());
}

/// The integer of scan mode's key `i`: field `i % FIELDS` of object `i / FIELDS`.
fn scan_key(i: u64) -> u64 {
    ((i / FIELDS) << 8) | (i % FIELDS)
}

/// The internal key a reader seeks to for the first entry of `user_key`.
fn seek_target(user_key: &[u8]) -> Vec<u8> {
    let mut t = user_key.to_vec();
    t.extend_from_slice(&((((1u64 << 56) - 1) << 8) | 0xff).to_le_bytes());
    t
}

/// A small per-thread generator (xorshift64*); benchmark inputs must not depend on a crate.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Loads `cfg.initial` keys into a fresh memtable of `kind`, then runs `cfg` for the duration.
pub fn run_one(kind: Kind, cfg: Config, args: &MemtableArgs) -> RunResult {
    if let Some(scan) = cfg.scan {
        return run_scans(kind, cfg, scan, args);
    }
    let mem = make(kind, args, cfg.key_size, cfg.initial - 1);
    let value = vec![0x5au8; args.value_size];
    let seq = Arc::new(AtomicU64::new(1));
    let mut k = vec![0u8; cfg.key_size];
    for i in 0..cfg.initial {
        key(&mut k, i);
        mem.insert(
            &k,
            seq.fetch_add(1, Ordering::Relaxed),
            ValueKind::Value,
            &value,
        );
    }
    let loaded_bytes = mem.approximate_bytes();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(cfg.threads + 1));
    let workers: Vec<_> = (0..cfg.threads)
        .map(|t| {
            let (mem, seq, stop, start, value) = (
                mem.clone(),
                seq.clone(),
                stop.clone(),
                start.clone(),
                value.clone(),
            );
            let (initial, skew, update_pct, key_size) = (
                cfg.initial,
                args.skew as u64,
                cfg.update_pct as u64,
                cfg.key_size,
            );
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) << 32));
                let mut k = vec![0u8; key_size];
                let hot = (initial / 10).max(1);
                let (mut ops, mut updates) = (0u64, 0u64);
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        let r = rng.next();
                        let i = if skew > 0 && r % 100 < skew {
                            (r >> 8) % hot
                        } else {
                            (r >> 8) % initial
                        };
                        key(&mut k, i);
                        if (r >> 40) % 100 < update_pct {
                            mem.insert(
                                &k,
                                seq.fetch_add(1, Ordering::Relaxed),
                                ValueKind::Value,
                                &value,
                            );
                            updates += 1;
                        } else {
                            std::hint::black_box(mem.get(&k, u64::MAX >> 8));
                        }
                        ops += 1;
                    }
                }
                (ops, updates)
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    std::thread::sleep(args.duration);
    stop.store(true, Ordering::Relaxed);
    let (mut ops, mut updates) = (0u64, 0u64);
    for w in workers {
        let (o, u) = w.join().expect("benchmark thread");
        ops += o;
        updates += u;
    }
    let secs = began.elapsed().as_secs_f64();
    RunResult {
        ops_per_sec: ops as f64 / secs,
        updates_per_sec: updates as f64 / secs,
        entries_per_scan: 0.0,
        loaded_bytes,
    }
}

/// Scan mode: loads `cfg.initial` keys, then runs `cfg.threads` scanners of `scan` beside
/// `args.writers` writers updating random keys, for the duration.
fn run_scans(kind: Kind, cfg: Config, scan: Scan, args: &MemtableArgs) -> RunResult {
    let mem = make(kind, args, cfg.key_size, scan_key(cfg.initial - 1));
    let value = vec![0x5au8; args.value_size];
    let seq = Arc::new(AtomicU64::new(1));
    let mut k = vec![0u8; cfg.key_size];
    for i in 0..cfg.initial {
        key(&mut k, scan_key(i));
        mem.insert(
            &k,
            seq.fetch_add(1, Ordering::Relaxed),
            ValueKind::Value,
            &value,
        );
    }
    let loaded_bytes = mem.approximate_bytes();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(cfg.threads + args.writers + 1));
    let (initial, key_size) = (cfg.initial, cfg.key_size);
    let writers: Vec<_> = (0..args.writers)
        .map(|t| {
            let (mem, seq, stop, start, value) = (
                mem.clone(),
                seq.clone(),
                stop.clone(),
                start.clone(),
                value.clone(),
            );
            std::thread::spawn(move || {
                let mut rng = Rng(0x6a09_e667_f3bc_c909 ^ ((t as u64 + 1) << 32));
                let mut k = vec![0u8; key_size];
                let mut updates = 0u64;
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        key(&mut k, scan_key((rng.next() >> 8) % initial));
                        let s = seq.fetch_add(1, Ordering::Relaxed);
                        mem.insert(&k, s, ValueKind::Value, &value);
                        updates += 1;
                    }
                }
                updates
            })
        })
        .collect();
    let scanners: Vec<_> = (0..cfg.threads)
        .map(|t| {
            let (mem, stop, start) = (mem.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) << 32));
                let (mut lo, mut hi) = (vec![0u8; key_size], vec![0u8; key_size]);
                let (mut scans, mut entries) = (0u64, 0u64);
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let r = rng.next() >> 8;
                    let upper = match scan {
                        Scan::Range(n) => {
                            let first = r % (initial - n + 1);
                            key(&mut lo, scan_key(first));
                            key(&mut hi, scan_key(first + n - 1));
                            Bound::Included(hi.as_slice())
                        }
                        Scan::Prefix => {
                            let object = r % initial.div_ceil(FIELDS);
                            key(&mut lo, scan_key(object * FIELDS));
                            key(&mut hi, scan_key((object + 1) * FIELDS));
                            let n = hi.len();
                            hi[n - 1] = 0;
                            Bound::Excluded(hi.as_slice())
                        }
                    };
                    let mut cursor = mem.clone().range_iter(Bound::Included(&lo), upper);
                    cursor.seek(&seek_target(&lo));
                    while cursor.valid() {
                        let user = &cursor.key()[..key_size];
                        let past = match upper {
                            Bound::Included(u) => user > u,
                            Bound::Excluded(u) => user >= u,
                            Bound::Unbounded => false,
                        };
                        if past {
                            break;
                        }
                        std::hint::black_box(cursor.value());
                        entries += 1;
                        cursor.next();
                    }
                    scans += 1;
                }
                (scans, entries)
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    std::thread::sleep(args.duration);
    stop.store(true, Ordering::Relaxed);
    let (mut scans, mut entries) = (0u64, 0u64);
    for s in scanners {
        let (n, e) = s.join().expect("benchmark thread");
        scans += n;
        entries += e;
    }
    let secs = began.elapsed().as_secs_f64();
    let updates: u64 = writers
        .into_iter()
        .map(|w| w.join().expect("benchmark thread"))
        .sum();
    RunResult {
        ops_per_sec: scans as f64 / secs,
        updates_per_sec: updates as f64 / secs,
        entries_per_scan: entries as f64 / scans.max(1) as f64,
        loaded_bytes,
    }
}

/// The median of `v`, 0 when empty.
pub(crate) fn median(v: Vec<f64>) -> f64 {
    crate::compare::median(&v).unwrap_or(0.0)
}

/// Runs the sweep and returns the markdown report.
pub fn run(args: &MemtableArgs) -> String {
    let mut configs = Vec::new();
    let scans: Vec<Option<Scan>> = if args.scans.is_empty() {
        vec![None]
    } else {
        args.scans.iter().copied().map(Some).collect()
    };
    let updates = if args.scans.is_empty() {
        &args.updates[..]
    } else {
        &[0]
    };
    for &initial in &args.initial {
        for &key_size in &args.key_sizes {
            for &scan in &scans {
                for &update_pct in updates {
                    for &threads in &args.threads {
                        configs.push(Config {
                            initial,
                            key_size,
                            update_pct,
                            threads,
                            scan,
                        });
                    }
                }
            }
        }
    }
    // results[config][kind] = one RunResult per round.
    let mut results = vec![[Vec::new(), Vec::new()]; configs.len()];
    let mut cpu = Vec::new();
    for round in 0..args.rounds {
        cpu.push(
            (args.cpucheck_secs > 0)
                .then(|| sysbench_cpu_events_per_sec(args.cpucheck_secs))
                .flatten(),
        );
        let order = if round % 2 == 0 {
            [Kind::SkipList, Kind::FloDb]
        } else {
            [Kind::FloDb, Kind::SkipList]
        };
        for (c, cfg) in configs.iter().enumerate() {
            for kind in order {
                let r = run_one(kind, *cfg, args);
                let what = match cfg.scan {
                    Some(scan) => format!("{} w={}", scan.name(), args.writers),
                    None => format!("u={}%", cfg.update_pct),
                };
                eprintln!(
                    "round {} {:>8} i={} k={} {} n={}: {:.0} ops/s ({:.0} updates/s)",
                    round + 1,
                    kind.name(),
                    cfg.initial,
                    cfg.key_size,
                    what,
                    cfg.threads,
                    r.ops_per_sec,
                    r.updates_per_sec
                );
                results[c][kind as usize].push(r);
            }
        }
    }
    if !args.scans.is_empty() {
        return scan_report(args, &configs, &results, &cpu);
    }
    let mut s = format!(
        "## shale-bench memtable: skiplist vs FloDB\n\n{} s per run, {}-byte values, skew {}%, \
         {} rounds alternating; FloDB membuffer {} bytes, {} drain thread(s). Medians over rounds; \
         MiB is the FloDB memtable's size once the keys were loaded.\n\n\
         | keys loaded | MiB | key bytes | update % | threads | skiplist ops/s | flodb ops/s | ratio | skiplist updates/s | flodb updates/s | ratio |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        args.duration.as_secs_f64(),
        args.value_size,
        args.skew,
        args.rounds,
        args.membuffer,
        args.drain
    );
    let med = |c: usize, kind: Kind, f: fn(&RunResult) -> f64| {
        median(results[c][kind as usize].iter().map(f).collect())
    };
    for (c, cfg) in configs.iter().enumerate() {
        let med = |kind: Kind, f: fn(&RunResult) -> f64| med(c, kind, f);
        let (so, fo) = (
            med(Kind::SkipList, |r| r.ops_per_sec),
            med(Kind::FloDb, |r| r.ops_per_sec),
        );
        let (su, fu) = (
            med(Kind::SkipList, |r| r.updates_per_sec),
            med(Kind::FloDb, |r| r.updates_per_sec),
        );
        s.push_str(&format!(
            "| {} | {:.0} | {} | {} | {} | {:.0} | {:.0} | {} | {:.0} | {:.0} | {} |\n",
            cfg.initial,
            med(Kind::FloDb, |r| r.loaded_bytes as f64) / (1u64 << 20) as f64,
            cfg.key_size,
            cfg.update_pct,
            cfg.threads,
            so,
            fo,
            ratio(fo, so),
            su,
            fu,
            ratio(fu, su)
        ));
    }
    if args.initial.len() > 1 {
        s.push_str(&format!(
            "\nGrowth: update throughput with each number of keys loaded over that with {} keys loaded \
             (1.00x: no fall as the memory component grows).\n\n\
             | keys loaded | key bytes | update % | threads | skiplist | flodb |\n\
             |---:|---:|---:|---:|---:|---:|\n",
            args.initial[0]
        ));
        let per_size = configs.len() / args.initial.len();
        for (c, cfg) in configs.iter().enumerate().skip(per_size) {
            let base = c % per_size;
            if cfg.update_pct == 0 {
                continue;
            }
            let growth = |kind: Kind| {
                ratio(
                    med(c, kind, |r| r.updates_per_sec),
                    med(base, kind, |r| r.updates_per_sec),
                )
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                cfg.initial,
                cfg.key_size,
                cfg.update_pct,
                cfg.threads,
                growth(Kind::SkipList),
                growth(Kind::FloDb)
            ));
        }
    }
    s.push_str(&format!(
        "\nCPU check (`sysbench cpu --threads=2`, events/s): {}\n",
        rounds_line(&cpu)
    ));
    s
}

/// `a / b` as a table cell.
pub(crate) fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

/// The report of a scan-mode sweep.
fn scan_report(
    args: &MemtableArgs,
    configs: &[Config],
    results: &[[Vec<RunResult>; 2]],
    cpu: &[Option<f64>],
) -> String {
    let mut s = format!(
        "## shale-bench memtable -scan: short scans under concurrent writers, skiplist vs FloDB\n\n\
         {} s per run, {}-byte values, {} writer thread(s) updating random keys, {} rounds \
         alternating; FloDB membuffer {} bytes, {} drain thread(s). Medians over rounds.\n\n\
         | keys loaded | key bytes | scan | entries/scan | scanners | skiplist scans/s | flodb scans/s | ratio | skiplist writer updates/s | flodb writer updates/s | ratio |\n\
         |---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        args.duration.as_secs_f64(),
        args.value_size,
        args.writers,
        args.rounds,
        args.membuffer,
        args.drain
    );
    for (c, cfg) in configs.iter().enumerate() {
        let med = |kind: Kind, f: fn(&RunResult) -> f64| {
            median(results[c][kind as usize].iter().map(f).collect())
        };
        let (ss, fs) = (
            med(Kind::SkipList, |r| r.ops_per_sec),
            med(Kind::FloDb, |r| r.ops_per_sec),
        );
        let (su, fu) = (
            med(Kind::SkipList, |r| r.updates_per_sec),
            med(Kind::FloDb, |r| r.updates_per_sec),
        );
        s.push_str(&format!(
            "| {} | {} | {} | {:.1} | {} | {:.0} | {:.0} | {} | {:.0} | {:.0} | {} |\n",
            cfg.initial,
            cfg.key_size,
            cfg.scan.map(Scan::name).unwrap_or_default(),
            med(Kind::FloDb, |r| r.entries_per_scan),
            cfg.threads,
            ss,
            fs,
            ratio(fs, ss),
            su,
            fu,
            ratio(fu, su)
        ));
    }
    s.push_str(&format!(
        "\nCPU check (`sysbench cpu --threads=2`, events/s): {}\n",
        rounds_line(cpu)
    ));
    s
}

/// `shale-bench memtable ARGS`: runs the sweep, prints the report and writes it to `-out`.
///
/// # Errors
/// `Usage` for bad arguments; `Io` when the report cannot be written.
pub fn run_command(args: &[String]) -> Result<bool> {
    let Some(a) = parse_args(args)? else {
        print!("{USAGE}");
        return Ok(true);
    };
    let report = run(&a);
    crate::cli::emit_report(&report, a.out.as_deref())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn flags_parse_into_lists_and_bad_values_are_usage_errors() {
        let a = parse_args(&args(
            "-n 1,4 -i 1000 -u 0,100 -d 0.5 -k 16 -s 20 -r 2 -drain 0",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(a.threads, vec![1, 4]);
        assert_eq!(a.updates, vec![0, 100]);
        assert_eq!(a.key_sizes, vec![16]);
        assert_eq!((a.initial[0], a.skew, a.rounds, a.drain), (1000, 20, 2, 0));
        assert_eq!(a.duration, Duration::from_millis(500));
        assert!(parse_args(&args("-u 101")).is_err());
        assert!(parse_args(&args("-k 4")).is_err());
        assert!(parse_args(&args("-n 0")).is_err());
        assert!(parse_args(&args("-x 1")).is_err());
        assert!(parse_args(&args("-n")).is_err());
        assert!(parse_args(&args("-help")).unwrap().is_none());
        let a = parse_args(&args("-scan range10,prefix -w 2 -i 100"))
            .unwrap()
            .unwrap();
        assert_eq!(a.scans, vec![Scan::Range(10), Scan::Prefix]);
        assert_eq!(a.writers, 2);
        assert!(parse_args(&args("-scan range0")).is_err());
        assert!(parse_args(&args("-scan suffix")).is_err());
        assert!(parse_args(&args("-scan range200 -i 100")).is_err());
    }

    #[test]
    fn a_tiny_scan_sweep_reads_whole_ranges_in_both_memtables() {
        let a = MemtableArgs {
            threads: vec![1],
            initial: vec![2000],
            duration: Duration::from_millis(50),
            key_sizes: vec![16],
            value_size: 16,
            rounds: 1,
            membuffer: 4096,
            cpucheck_secs: 0,
            scans: vec![Scan::Range(10), Scan::Prefix],
            writers: 1,
            ..MemtableArgs::default()
        };
        for kind in [Kind::SkipList, Kind::FloDb] {
            for scan in [Scan::Range(10), Scan::Prefix] {
                let cfg = Config {
                    initial: 2000,
                    key_size: 16,
                    update_pct: 0,
                    threads: 1,
                    scan: Some(scan),
                };
                let r = run_one(kind, cfg, &a);
                assert!(r.ops_per_sec > 0.0 && r.updates_per_sec > 0.0, "{r:?}");
                // Every key of the range, plus the versions the writer added meanwhile.
                assert!(r.entries_per_scan >= 10.0, "{kind:?} {scan:?}: {r:?}");
            }
        }
        let report = run(&a);
        assert!(
            report.contains("| range10 |") && report.contains("| prefix |"),
            "{report}"
        );
    }

    #[test]
    fn a_tiny_sweep_runs_both_memtables_and_reports_each_configuration() {
        let a = MemtableArgs {
            threads: vec![1, 2],
            initial: vec![500, 1000],
            updates: vec![50],
            duration: Duration::from_millis(30),
            key_sizes: vec![16],
            value_size: 16,
            rounds: 1,
            membuffer: 4096,
            cpucheck_secs: 0,
            ..MemtableArgs::default()
        };
        let report = run(&a);
        let cells =
            |l: &str| -> Vec<String> { l.split('|').map(|c| c.trim().to_string()).collect() };
        let rows: Vec<Vec<String>> = report
            .lines()
            .map(cells)
            .filter(|c| c.len() == 13 && c[3] == "16" && c[4] == "50")
            .collect();
        assert_eq!(rows.len(), 4, "{report}");
        for row in rows {
            assert!(
                row[2].parse::<f64>().unwrap() >= 0.0
                    && row[6].parse::<f64>().unwrap() > 0.0
                    && row[7].parse::<f64>().unwrap() > 0.0,
                "{row:?}"
            );
        }
        // The growth table: the larger size's throughput over the smaller's, per memtable.
        let growth: Vec<Vec<String>> = report
            .lines()
            .map(cells)
            .filter(|c| c.len() == 8 && c[1] == "1000")
            .collect();
        assert_eq!(growth.len(), 2, "{report}");
        for row in growth {
            assert!(row[5].ends_with('x') && row[6].ends_with('x'), "{row:?}");
        }
    }
}
