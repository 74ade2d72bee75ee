//! `shale-bench scan`: short scans through the whole engine, as the server reads a hash, while
//! writers keep writing, with the FloDB memtable and the skiplist side by side.
//!
//! The store holds `-objects` objects of `-fields` fields each, keyed the way the server lays
//! out a hash: a type byte, a 2-byte hash of the object's name, the name, a zero byte, the field.
//! Small memtables and files spread the data over the memtable, L0 and several levels. Each
//! timed run lets `-n` scanner threads read random objects and `-w` writer threads update random
//! fields. Scan shapes: `prefix` reads every field of an object (`Db::prefix`, HGETALL), `rangeN`
//! reads N fields from a random one on (`Db::range` with both bounds, a sorted-set range).
//! Both stores are built once; every round runs both in alternating order, and the report gives
//! medians over rounds and the ratio FloDB / skiplist.

use crate::cpucheck::{rounds_line, sysbench_cpu_events_per_sec};
use crate::error::{Error, Result};
use crate::memtable_bench::{median, ratio, Rng};
use shale::{Db, MemtableKind, Options};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
Usage:
  shale-bench scan [-objects 20000] [-fields 16] [-v 100] [-scan prefix,range10] [-n 1] [-w 1]
                   [-d 2] [-r 3] [-dir PATH] [-cpucheck SECS] [-out FILE.md]

Short scans through the engine while writers write, FloDB memtable against the skiplist:
  -objects N     objects (hashes) in the store [20000]
  -fields N      fields per object [16]
  -v N           value bytes [100]
  -scan LIST     scan shapes: prefix (every field of an object), rangeN (N fields) [prefix,range10]
  -n N           scanner threads [1]
  -w N           writer threads updating random fields meanwhile [1]
  -d SECS        seconds of each timed run [2]
  -r N           rounds, each running both memtables in alternating order [3]
  -dir PATH      where the two stores live (created, removed at the end) [a temporary directory]
  -cpucheck S    seconds of `sysbench cpu --threads=2` before each round; 0 skips it [2]
  -out FILE.md   also write the report there
";

/// A scan shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Every field of one object.
    Prefix,
    /// `n` fields of one object from a random one on.
    Range(u32),
}

impl Shape {
    fn name(self) -> String {
        match self {
            Shape::Prefix => "prefix".into(),
            Shape::Range(n) => format!("range{n}"),
        }
    }

    fn parse(v: &str) -> Option<Shape> {
        match v.trim() {
            "prefix" => Some(Shape::Prefix),
            r => r
                .strip_prefix("range")
                .and_then(|n| n.parse().ok())
                .filter(|&n| n > 0)
                .map(Shape::Range),
        }
    }
}

/// The subcommand's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanArgs {
    pub objects: u64,
    pub fields: u32,
    pub value_size: usize,
    pub shapes: Vec<Shape>,
    pub scanners: usize,
    pub writers: usize,
    pub duration: Duration,
    pub rounds: usize,
    pub dir: Option<PathBuf>,
    pub cpucheck_secs: u32,
    pub out: Option<PathBuf>,
}

impl Default for ScanArgs {
    fn default() -> ScanArgs {
        ScanArgs {
            objects: 20_000,
            fields: 16,
            value_size: 100,
            shapes: vec![Shape::Prefix, Shape::Range(10)],
            scanners: 1,
            writers: 1,
            duration: Duration::from_secs(2),
            rounds: 3,
            dir: None,
            cpucheck_secs: 2,
            out: None,
        }
    }
}

fn one<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T> {
    v.trim()
        .parse()
        .map_err(|_| Error::usage(format!("-{flag} expects a number, got '{v}'")))
}

/// Parses the arguments after `scan`; `None` for `-help`.
///
/// # Errors
/// `Usage` for unknown flags, missing or malformed values, and out-of-range settings.
pub fn parse_args(args: &[String]) -> Result<Option<ScanArgs>> {
    let mut a = ScanArgs::default();
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
            "objects" => a.objects = one(flag, v)?,
            "fields" => a.fields = one(flag, v)?,
            "v" => a.value_size = one(flag, v)?,
            "scan" => {
                a.shapes = v
                    .split(',')
                    .map(|x| {
                        Shape::parse(x).ok_or_else(|| {
                            Error::usage(format!("-scan expects prefix or rangeN, got '{x}'"))
                        })
                    })
                    .collect::<Result<_>>()?
            }
            "n" => a.scanners = one(flag, v)?,
            "w" => a.writers = one(flag, v)?,
            "d" => a.duration = Duration::from_secs_f64(one(flag, v)?),
            "r" => a.rounds = one(flag, v)?,
            "dir" => a.dir = Some(v.into()),
            "cpucheck" => a.cpucheck_secs = one(flag, v)?,
            "out" => a.out = Some(v.into()),
            _ => return Err(Error::usage(format!("unknown option '{arg}' for scan"))),
        }
    }
    if a.objects == 0 || a.fields == 0 || a.scanners == 0 || a.rounds == 0 || a.duration.is_zero() {
        return Err(Error::usage(
            "-objects, -fields, -n, -r and -d must be positive",
        ));
    }
    if a.fields > u16::MAX as u32 {
        return Err(Error::usage("-fields is at most 65535"));
    }
    if a.shapes
        .iter()
        .any(|s| matches!(s, Shape::Range(n) if *n > a.fields))
    {
        return Err(Error::usage("-scan: a range is at most -fields fields"));
    }
    Ok(Some(a))
}

/// The key prefix of object `o`: the type byte `h`, a 2-byte hash of its name, the name and a
/// zero byte, as the server lays out a hash's fields.
pub fn object_prefix(o: u64) -> Vec<u8> {
    let name = format!("object:{o}");
    let hash = (fnv1a(name.as_bytes()) >> 48) as u16;
    let mut k = vec![b'h'];
    k.extend_from_slice(&hash.to_be_bytes());
    k.extend_from_slice(name.as_bytes());
    k.push(0);
    k
}

/// Field `f` of the object whose prefix is `prefix`.
fn field_key(prefix: &[u8], f: u32) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(format!("field:{f:05}").as_bytes());
    k
}

/// A 64-bit hash for the key layout (FNV-1a: no dependency, and the layout only needs spread).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The two memtables.
const KINDS: [(MemtableKind, &str); 2] = [
    (MemtableKind::SkipList, "skiplist"),
    (MemtableKind::FloDb, "flodb"),
];

/// The store's options: the server's FloDB prefix (a type byte), and small memtables and files so
/// that a store of a few tens of megabytes spreads over L0 and several levels.
fn options(kind: MemtableKind) -> Options {
    Options {
        memtable: kind,
        membuffer_prefix_bits: Some(8),
        write_buffer_size: 4 << 20,
        target_file_size: 2 << 20,
        max_bytes_for_level_base: 8 << 20,
        ..Options::default()
    }
}

/// Opens a fresh store of `kind` in `dir` and loads every field of every object.
fn build(kind: MemtableKind, dir: &Path, args: &ScanArgs) -> Result<Db> {
    let db = Db::open(dir, options(kind))
        .map_err(|e| Error::backend(format!("open {}: {e}", dir.display())))?;
    let value = vec![0x5au8; args.value_size];
    for o in 0..args.objects {
        let prefix = object_prefix(o);
        for f in 0..args.fields {
            db.put(field_key(&prefix, f), &value)
                .map_err(|e| Error::backend(format!("load: {e}")))?;
        }
    }
    db.wait_for_background(Duration::from_secs(120))
        .map_err(|e| Error::backend(format!("load: {e}")))?;
    Ok(db)
}

/// What one timed run did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunResult {
    pub scans_per_sec: f64,
    pub entries_per_scan: f64,
    pub updates_per_sec: f64,
}

/// One timed run of `shape` on `db`.
pub fn run_one(db: &Arc<Db>, shape: Shape, args: &ScanArgs) -> RunResult {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(args.scanners + args.writers + 1));
    let updates = Arc::new(AtomicU64::new(0));
    let (objects, fields, value_size) = (args.objects, args.fields, args.value_size);
    let writers: Vec<_> = (0..args.writers)
        .map(|t| {
            let (db, stop, start, updates) =
                (db.clone(), stop.clone(), start.clone(), updates.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x6a09_e667_f3bc_c909 ^ ((t as u64 + 1) << 32));
                let value = vec![0xa5u8; value_size];
                start.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = rng.next();
                    let key = field_key(&object_prefix(r % objects), (r >> 40) as u32 % fields);
                    if db.put(&key, &value).is_ok() {
                        n += 1;
                    }
                }
                updates.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let scanners: Vec<_> = (0..args.scanners)
        .map(|t| {
            let (db, stop, start) = (db.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) << 32));
                let (mut scans, mut entries) = (0u64, 0u64);
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let r = rng.next();
                    let prefix = object_prefix(r % objects);
                    let it = match shape {
                        Shape::Prefix => db.prefix(&prefix),
                        Shape::Range(n) => {
                            let first = (r >> 40) as u32 % (fields - n + 1);
                            let lo = field_key(&prefix, first);
                            let hi = field_key(&prefix, first + n - 1);
                            db.range(lo..=hi)
                        }
                    };
                    for pair in it {
                        if let Ok(pair) = pair {
                            std::hint::black_box(pair);
                        }
                        entries += 1;
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
    for w in writers {
        w.join().expect("benchmark thread");
    }
    RunResult {
        scans_per_sec: scans as f64 / secs,
        entries_per_scan: entries as f64 / scans.max(1) as f64,
        updates_per_sec: updates.load(Ordering::Relaxed) as f64 / secs,
    }
}

/// Builds both stores, runs the rounds and returns the markdown report.
///
/// # Errors
/// `Usage` when a store cannot be created or loaded.
pub fn run(args: &ScanArgs) -> Result<String> {
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("shale-bench-scan-{}", std::process::id())),
    };
    let mut dbs = Vec::new();
    let mut levels = Vec::new();
    for (kind, name) in KINDS {
        let dir = base.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let db = build(kind, &dir, args)?;
        levels.push(format!("{name} {:?}", db.stats().files_per_level));
        dbs.push(Arc::new(db));
    }
    // results[shape][kind] = one result per round.
    let mut results = vec![[Vec::new(), Vec::new()]; args.shapes.len()];
    let mut cpu = Vec::new();
    for round in 0..args.rounds {
        cpu.push(
            (args.cpucheck_secs > 0)
                .then(|| sysbench_cpu_events_per_sec(args.cpucheck_secs))
                .flatten(),
        );
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for (s, &shape) in args.shapes.iter().enumerate() {
            for k in order {
                let r = run_one(&dbs[k], shape, args);
                eprintln!(
                    "round {} {:>8} {}: {:.0} scans/s ({:.1} entries each), writers {:.0} updates/s",
                    round + 1,
                    KINDS[k].1,
                    shape.name(),
                    r.scans_per_sec,
                    r.entries_per_scan,
                    r.updates_per_sec
                );
                results[s][k].push(r);
            }
        }
    }
    drop(dbs);
    let _ = std::fs::remove_dir_all(&base);
    let mut s = format!(
        "## shale-bench scan: short scans through the engine under writers, skiplist vs FloDB\n\n\
         {} objects x {} fields of {} bytes (server hash layout), {} scanner(s), {} writer(s), \
         {} s per run, {} rounds alternating; files per level after the load: {}. Medians over \
         rounds.\n\n\
         | scan | entries/scan | skiplist scans/s | flodb scans/s | ratio | skiplist writer updates/s | flodb writer updates/s | ratio |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        args.objects,
        args.fields,
        args.value_size,
        args.scanners,
        args.writers,
        args.duration.as_secs_f64(),
        args.rounds,
        levels.join(", ")
    );
    for (i, shape) in args.shapes.iter().enumerate() {
        let med =
            |k: usize, f: fn(&RunResult) -> f64| median(results[i][k].iter().map(f).collect());
        let (ss, fs) = (med(0, |r| r.scans_per_sec), med(1, |r| r.scans_per_sec));
        let (su, fu) = (med(0, |r| r.updates_per_sec), med(1, |r| r.updates_per_sec));
        s.push_str(&format!(
            "| {} | {:.1} | {:.0} | {:.0} | {} | {:.0} | {:.0} | {} |\n",
            shape.name(),
            med(1, |r| r.entries_per_scan),
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
        rounds_line(&cpu)
    ));
    Ok(s)
}

/// `shale-bench scan ARGS`: runs the benchmark, prints the report and writes it to `-out`.
///
/// # Errors
/// `Usage` for bad arguments or a store that cannot be built; `Io` when the report cannot be
/// written.
pub fn run_command(args: &[String]) -> Result<bool> {
    let Some(a) = parse_args(args)? else {
        print!("{USAGE}");
        return Ok(true);
    };
    let report = run(&a)?;
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
    fn flags_parse_and_bad_values_are_usage_errors() {
        let a = parse_args(&args(
            "-objects 10 -fields 4 -scan prefix,range3 -n 2 -w 0 -d 0.5",
        ))
        .unwrap()
        .unwrap();
        assert_eq!((a.objects, a.fields, a.scanners, a.writers), (10, 4, 2, 0));
        assert_eq!(a.shapes, vec![Shape::Prefix, Shape::Range(3)]);
        assert!(parse_args(&args("-scan range5 -fields 4")).is_err());
        assert!(parse_args(&args("-scan suffix")).is_err());
        assert!(parse_args(&args("-n 0")).is_err());
        assert!(parse_args(&args("-x 1")).is_err());
        assert!(parse_args(&args("-help")).unwrap().is_none());
    }

    #[test]
    fn a_tiny_run_reads_whole_objects_from_both_stores() {
        let dir = tempfile::tempdir().unwrap();
        let a = ScanArgs {
            objects: 300,
            fields: 8,
            value_size: 16,
            shapes: vec![Shape::Prefix, Shape::Range(3)],
            duration: Duration::from_millis(50),
            rounds: 1,
            dir: Some(dir.path().join("stores")),
            cpucheck_secs: 0,
            ..ScanArgs::default()
        };
        let report = run(&a).unwrap();
        let rows: Vec<Vec<String>> = report
            .lines()
            .map(|l| {
                l.split('|')
                    .map(|c| c.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .filter(|c| c.len() == 10 && (c[1] == "prefix" || c[1] == "range3"))
            .collect();
        assert_eq!(rows.len(), 2, "{report}");
        assert_eq!(
            rows[0][2], "8.0",
            "a prefix scan reads every field: {report}"
        );
        assert_eq!(rows[1][2], "3.0", "{report}");
        for row in rows {
            assert!(row[3].parse::<f64>().unwrap() > 0.0 && row[4].parse::<f64>().unwrap() > 0.0);
        }
        assert!(!dir.path().join("stores").exists());
    }
}
