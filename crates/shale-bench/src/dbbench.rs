//! `shale-bench dbbench`: Shale beside RocksDB's `db_bench` on db_bench's own benchmarks.
//!
//! It runs `fillrandom`, `readrandom` (warm, right after the fill) and `overwrite` with db_bench's
//! keys and values ([`shale_side`] says exactly what is mirrored) on Shale, and
//!
//! ```text
//! db_bench --benchmarks=fillrandom,readrandom,overwrite --num=N --value_size=100 --key_size=16
//!          --max_background_jobs=2 --histogram=1 --db=DIR
//! ```
//!
//! on the same machine in the same run, reading db_bench's report with [`db_bench_output`]. The
//! machine's capacity drifts between one and two cores for minutes at a time (DESIGN.md section
//! 8), so one run of each proves little: the two alternate over `--rounds` rounds (Shale first in
//! odd rounds, db_bench first in even ones), each in a fresh process on a fresh directory (Shale
//! runs in a child `shale-bench dbbench --worker`, so neither side inherits a warm heap), with a
//! two-thread CPU check ([`crate::cpucheck`]) before every round. The report is one markdown
//! table per benchmark: ops/s per round, the median, the median p50/p99/p99.9, and Shale/RocksDB
//! ratios.
//!
//! Without `db_bench` (Debian package `rocksdb-tools`) Shale runs alone: on purpose with
//! `--shale-only`, otherwise with a clear message and a failing exit status at the end. The Shale
//! side needs the `shale-engine` cargo feature; without it the subcommand says so.

pub mod db_bench_output;
mod report;
pub mod shale_side;

use crate::error::{Error, Result};
use db_bench_output::{parse_db_bench_output, DbBenchReport};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use report::{markdown_report, phase_line, RoundResults};

/// The benchmarks, in the order both sides run them.
pub const BENCHMARKS: [&str; 3] = ["fillrandom", "readrandom", "overwrite"];
/// Default `--num`: operations per benchmark (per thread) and the key space.
pub const DEFAULT_NUM: u64 = 2_000_000;
/// Default `--value-size`, bytes.
pub const DEFAULT_VALUE_SIZE: usize = 100;
/// Default `--key-size`, bytes.
pub const DEFAULT_KEY_SIZE: usize = 16;
/// Default `--rounds`.
pub const DEFAULT_ROUNDS: u32 = 3;
/// Default `--db-bench`: looked up in `PATH`.
pub const DEFAULT_DB_BENCH: &str = "db_bench";
/// Default `--cpucheck`: seconds of `sysbench cpu --threads=2` before each round.
pub const DEFAULT_CPUCHECK_SECS: u32 = 5;
/// Default `--seed` of Shale's key streams (round `r` uses `seed + r`).
pub const DEFAULT_SEED: u64 = 1000;
/// The db_bench command's `--max_background_jobs`.
pub const MAX_BACKGROUND_JOBS: u32 = 2;

/// Usage of the subcommand.
pub const USAGE: &str = "\
Usage:
  shale-bench dbbench [--num N] [--value-size 100] [--key-size 16] [--rounds 3] [--threads 1]
                      [--dir DIR] [--db-bench PATH] [--db-bench-arg ARG]... [--out FILE.md] [--shale-only]
                      [--cpucheck SECS] [--seed N]

Runs db_bench's fillrandom, readrandom (warm) and overwrite on Shale and, alternating over
several rounds in the same run, RocksDB's db_bench with the same settings:
  db_bench --benchmarks=fillrandom,readrandom,overwrite --num=N --value_size=100 --key_size=16
           --max_background_jobs=2 --histogram=1 --db=DIR
and reports per benchmark the ops/s of every round, medians, p50/p99/p99.9 and Shale/RocksDB ratios.

  --num N          operations per benchmark and thread, and keys drawn from [0, N) [2000000]
  --value-size N   value bytes [100]
  --key-size N     key bytes [16]
  --rounds N       rounds; each runs both engines, in alternating order [3]
  --threads N      client threads on both sides; each does N operations [1]
  --dir DIR        parent of the database directories [a new directory in the temp dir]
  --db-bench PATH  the db_bench binary [db_bench, from PATH; Debian package rocksdb-tools]
  --db-bench-arg A one more argument for db_bench, e.g. --db-bench-arg=--bloom_bits=10 (repeatable)
  --out FILE.md    also write the report there (and the raw figures to FILE.json)
  --shale-only     run Shale alone
  --cpucheck SECS  seconds of `sysbench cpu --threads=2` before each round; 0 skips it [5]
  --seed N         seed of Shale's key streams [1000]
";

/// The subcommand's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct DbBenchArgs {
    /// Operations per benchmark and thread; keys are drawn from `[0, num)`.
    pub num: u64,
    /// Value bytes.
    pub value_size: usize,
    /// Key bytes.
    pub key_size: usize,
    /// Rounds.
    pub rounds: u32,
    /// Client threads.
    pub threads: usize,
    /// Parent of the database directories; a fresh temporary one when absent.
    pub dir: Option<PathBuf>,
    /// The db_bench binary.
    pub db_bench: String,
    /// Extra arguments for db_bench, after the standard ones (e.g. `--bloom_bits=10`).
    pub db_bench_extra: Vec<String>,
    /// Markdown report file.
    pub out: Option<PathBuf>,
    /// Run Shale alone.
    pub shale_only: bool,
    /// Seconds of CPU check per round; 0 skips it.
    pub cpucheck_secs: u32,
    /// Seed of Shale's key streams.
    pub seed: u64,
    /// Internal: run Shale once and write its figures as JSON to this file.
    pub worker: Option<PathBuf>,
}

impl Default for DbBenchArgs {
    fn default() -> DbBenchArgs {
        DbBenchArgs {
            num: DEFAULT_NUM,
            value_size: DEFAULT_VALUE_SIZE,
            key_size: DEFAULT_KEY_SIZE,
            rounds: DEFAULT_ROUNDS,
            threads: 1,
            dir: None,
            db_bench: DEFAULT_DB_BENCH.to_string(),
            db_bench_extra: Vec::new(),
            out: None,
            shale_only: false,
            cpucheck_secs: DEFAULT_CPUCHECK_SECS,
            seed: DEFAULT_SEED,
            worker: None,
        }
    }
}

fn number<T>(flag: &str, v: &str, min: T) -> Result<T>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    v.parse::<T>()
        .ok()
        .filter(|n| *n >= min)
        .ok_or_else(|| Error::usage(format!("--{flag} expects an integer >= {min}, got '{v}'")))
}

/// Parses the arguments after `dbbench`; `None` for `--help`.
///
/// # Errors
/// `Usage` for unknown flags, missing or malformed values.
pub fn parse_args(args: &[String]) -> Result<Option<DbBenchArgs>> {
    let mut a = DbBenchArgs::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let flag = arg
            .strip_prefix("--")
            .or_else(|| arg.strip_prefix('-'))
            .ok_or_else(|| Error::usage(format!("unexpected argument '{arg}' for dbbench")))?;
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (flag, None),
        };
        let flag = flag.replace('_', "-");
        if matches!(flag.as_str(), "help" | "h") {
            return Ok(None);
        }
        if flag == "shale-only" {
            a.shale_only = true;
            i += 1;
            continue;
        }
        let v = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or_else(|| Error::usage(format!("missing value for --{flag}")))?
            }
        };
        match flag.as_str() {
            "num" => a.num = number(&flag, &v, 1)?,
            "value-size" => a.value_size = number(&flag, &v, 1)?,
            "key-size" => a.key_size = number(&flag, &v, 1)?,
            "rounds" => a.rounds = number(&flag, &v, 1)?,
            "threads" => a.threads = number(&flag, &v, 1)?,
            "cpucheck" => a.cpucheck_secs = number(&flag, &v, 0)?,
            "seed" => a.seed = number(&flag, &v, 0)?,
            "dir" => a.dir = Some(PathBuf::from(v)),
            "db-bench" => a.db_bench = v,
            "db-bench-arg" => a.db_bench_extra.push(v),
            "out" => a.out = Some(PathBuf::from(v)),
            "worker" => a.worker = Some(PathBuf::from(v)),
            _ => return Err(Error::usage(format!("unknown option '{arg}' for dbbench"))),
        }
        i += 1;
    }
    Ok(Some(a))
}

/// The db_bench command line for `args`, database at `db`.
pub fn db_bench_command_args(args: &DbBenchArgs, db: &Path) -> Vec<String> {
    let mut v = vec![
        format!("--benchmarks={}", BENCHMARKS.join(",")),
        format!("--num={}", args.num),
        format!("--value_size={}", args.value_size),
        format!("--key_size={}", args.key_size),
        format!("--max_background_jobs={MAX_BACKGROUND_JOBS}"),
        "--histogram=1".to_string(),
    ];
    if args.threads != 1 {
        v.push(format!("--threads={}", args.threads));
    }
    v.extend(args.db_bench_extra.iter().cloned());
    v.push(format!("--db={}", db.display()));
    v
}

/// Finds `name` as `PATH` would (a name with a `/` is taken as a path).
pub fn find_executable(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return runnable(&p).then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| runnable(p))
}

/// The last `n` lines of `text`, for error messages.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs db_bench once on a fresh `db` directory; returns its report and its disk usage at the end.
///
/// # Errors
/// `Backend` when db_bench fails or its report lacks a benchmark or its percentiles.
pub fn run_db_bench(
    exe: &Path,
    args: &DbBenchArgs,
    db: &Path,
) -> Result<(DbBenchReport, Option<u64>)> {
    let _ = std::fs::remove_dir_all(db);
    let out = Command::new(exe)
        .args(db_bench_command_args(args, db))
        .output()
        .map_err(|e| Error::io(format!("cannot start {}", exe.display()), e))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let disk = crate::backend::dir_size(db).ok();
    let _ = std::fs::remove_dir_all(db);
    if !out.status.success() {
        return Err(Error::backend(format!(
            "db_bench failed ({}):\n{}\n{}",
            out.status,
            tail(&stdout, 10),
            tail(&stderr, 10)
        )));
    }
    // The `RocksDB: version` header goes to stderr, the reports to stdout.
    let report = parse_db_bench_output(&format!("{stdout}\n{stderr}"));
    for b in BENCHMARKS {
        match report.phase(b) {
            Some(p) if p.percentiles.is_some() => {}
            found => {
                let what = if found.is_some() {
                    "no Percentiles line (is --histogram=1 honoured?)"
                } else {
                    "no report line"
                };
                return Err(Error::backend(format!(
                    "db_bench's output has {what} for {b}; its last lines:\n{}",
                    tail(&stdout, 20)
                )));
            }
        }
    }
    Ok((report, disk))
}

/// Runs Shale once in a child process (`--worker`), so every round starts from a fresh heap as
/// db_bench does.
#[cfg(feature = "shale-engine")]
fn run_shale_child(
    args: &DbBenchArgs,
    dir: &Path,
    result: &Path,
    seed: u64,
) -> Result<shale_side::ShaleRun> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::io("cannot find the shale-bench executable", e))?;
    let out = Command::new(exe)
        .arg("dbbench")
        .args(["--num", &args.num.to_string()])
        .args(["--value-size", &args.value_size.to_string()])
        .args(["--key-size", &args.key_size.to_string()])
        .args(["--threads", &args.threads.to_string()])
        .args(["--seed", &seed.to_string()])
        .arg("--dir")
        .arg(dir)
        .arg("--worker")
        .arg(result)
        .output()
        .map_err(|e| Error::io("cannot start the shale worker", e))?;
    let _ = std::fs::remove_dir_all(dir);
    if !out.status.success() {
        return Err(Error::backend(format!(
            "the shale worker failed ({}):\n{}",
            out.status,
            tail(&String::from_utf8_lossy(&out.stderr), 20)
        )));
    }
    let text = std::fs::read_to_string(result)
        .map_err(|e| Error::io(format!("cannot read {}", result.display()), e))?;
    let _ = std::fs::remove_file(result);
    serde_json::from_str(&text)
        .map_err(|e| Error::input(format!("bad worker result {}: {e}", result.display())))
}

/// The worker: one Shale run at `--dir`, figures written as JSON to `--worker`.
#[cfg(feature = "shale-engine")]
fn run_worker(args: &DbBenchArgs, result: &Path) -> Result<()> {
    let dir = args
        .dir
        .clone()
        .ok_or_else(|| Error::usage("--worker needs --dir"))?;
    let spec = shale_side::ShaleSpec {
        num: args.num,
        value_size: args.value_size,
        key_size: args.key_size,
        threads: args.threads,
        dir,
        seed: args.seed,
    };
    let run = shale_side::run_shale(&spec, &mut |p| println!("{}", phase_line(p)))?;
    let json = serde_json::to_string(&run)
        .map_err(|e| Error::input(format!("cannot encode results: {e}")))?;
    std::fs::write(result, json)
        .map_err(|e| Error::io(format!("cannot write {}", result.display()), e))
}

/// Entry point of `shale-bench dbbench ARGS`; `Ok(true)` when everything asked for ran.
///
/// # Errors
/// `Usage` for bad arguments or a build without the `shale-engine` feature, `Backend` when an
/// engine fails or db_bench is missing without `--shale-only`, `Io` for the report files.
pub fn run_command(argv: &[String]) -> Result<bool> {
    let Some(args) = parse_args(argv)? else {
        print!("{USAGE}");
        return Ok(true);
    };
    run(&args)
}

#[cfg(not(feature = "shale-engine"))]
fn run(_args: &DbBenchArgs) -> Result<bool> {
    Err(Error::usage(
        "dbbench runs Shale, which this build leaves out: build with --features shale-engine",
    ))
}

#[cfg(feature = "shale-engine")]
fn run(args: &DbBenchArgs) -> Result<bool> {
    if let Some(result) = &args.worker {
        run_worker(args, result)?;
        return Ok(true);
    }
    let db_bench = if args.shale_only {
        None
    } else {
        let found = find_executable(&args.db_bench);
        if found.is_none() {
            eprintln!(
                "dbbench: db_bench not found ('{}'; install Debian package rocksdb-tools or pass \
                 --db-bench PATH). Running Shale only; the run will end with an error \
                 (pass --shale-only to run Shale alone on purpose).",
                args.db_bench
            );
        }
        found
    };
    let (base, temporary) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("shale-dbbench-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&base)
        .map_err(|e| Error::io(format!("cannot create {}", base.display()), e))?;
    let results = run_rounds(args, db_bench.as_deref(), &base);
    if temporary {
        let _ = std::fs::remove_dir_all(&base);
    }
    let results = results?;

    let command = std::iter::once("shale-bench dbbench".to_string())
        .chain(argv_tail())
        .collect::<Vec<_>>()
        .join(" ");
    let md = markdown_report(args, &command, &results);
    println!("\n{md}");
    if let Some(out) = &args.out {
        std::fs::write(out, &md)
            .map_err(|e| Error::io(format!("cannot write {}", out.display()), e))?;
        let json = out.with_extension("json");
        let raw = serde_json::to_string_pretty(&results).unwrap_or_default();
        std::fs::write(&json, raw)
            .map_err(|e| Error::io(format!("cannot write {}", json.display()), e))?;
        eprintln!("wrote {} and {}", out.display(), json.display());
    }
    if !args.shale_only && db_bench.is_none() {
        return Err(Error::backend(format!(
            "db_bench not found ('{}'): only Shale ran; install Debian package rocksdb-tools, \
             pass --db-bench PATH, or --shale-only",
            args.db_bench
        )));
    }
    Ok(true)
}

/// This process's arguments after `dbbench`, quoted where they hold spaces.
#[cfg(feature = "shale-engine")]
fn argv_tail() -> impl Iterator<Item = String> {
    std::env::args()
        .skip(2)
        .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
}

#[cfg(feature = "shale-engine")]
fn run_rounds(args: &DbBenchArgs, db_bench: Option<&Path>, base: &Path) -> Result<RoundResults> {
    let mut r = RoundResults {
        shale_settings: shale_side::settings_note(),
        ..RoundResults::default()
    };
    if let Some(exe) = db_bench {
        r.db_bench_command = Some(format!(
            "{} {}",
            exe.display(),
            db_bench_command_args(args, Path::new("DIR")).join(" ")
        ));
    }
    for round in 1..=args.rounds {
        let cpu = (args.cpucheck_secs > 0)
            .then(|| crate::cpucheck::sysbench_cpu_events_per_sec(args.cpucheck_secs))
            .flatten();
        r.cpu_events_per_sec.push(cpu);
        println!(
            "round {round}/{}: cpu check (sysbench cpu --threads=2): {}",
            args.rounds,
            cpu.map_or("n/a".to_string(), |v| format!("{v:.0} events/s"))
        );
        let shale_first = round % 2 == 1 || db_bench.is_none();
        for shale_turn in [shale_first, !shale_first] {
            if shale_turn {
                let dir = base.join(format!("shale-r{round}"));
                let result = base.join(format!("shale-r{round}.json"));
                let run = run_shale_child(args, &dir, &result, args.seed + u64::from(round))?;
                for p in &run.phases {
                    println!("round {round} shale   | {}", phase_line(p));
                }
                println!("round {round} shale   | {}", run.stats);
                r.shale.push(run.phases);
                r.shale_stats.push(run.stats);
                r.shale_disk_bytes.push(Some(run.disk_bytes));
            } else if let Some(exe) = db_bench {
                let dir = base.join(format!("rocksdb-r{round}"));
                let (rep, disk) = run_db_bench(exe, args, &dir)?;
                for p in &rep.phases {
                    println!("round {round} rocksdb | {}", phase_line(p));
                }
                r.rocksdb_version = rep.version.clone();
                r.rocksdb_compression = rep.compression.clone();
                r.rocksdb_warnings = rep.warnings.clone();
                r.rocksdb.push(rep.phases);
                r.rocksdb_disk_bytes.push(disk);
            }
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn flags_take_values_after_a_space_or_an_equals_sign() {
        let a = parse_args(&args(
            "--num 5000 --value_size=200 --key-size 20 --rounds=5 --threads 2 --dir /d \
             --db-bench /x/db_bench --db-bench-arg=--bloom_bits=10 --out r.md --shale-only \
             --cpucheck 0 --seed 7",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            a,
            DbBenchArgs {
                num: 5000,
                value_size: 200,
                key_size: 20,
                rounds: 5,
                threads: 2,
                dir: Some("/d".into()),
                db_bench: "/x/db_bench".into(),
                db_bench_extra: vec!["--bloom_bits=10".into()],
                out: Some("r.md".into()),
                shale_only: true,
                cpucheck_secs: 0,
                seed: 7,
                worker: None,
            }
        );
        assert_eq!(parse_args(&args("")).unwrap(), Some(DbBenchArgs::default()));
        assert_eq!(parse_args(&args("--help")).unwrap(), None);
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for (line, msg) in [
            ("--rounds 0", "--rounds expects an integer >= 1, got '0'"),
            ("--num x", "--num expects an integer >= 1, got 'x'"),
            ("--num", "missing value for --num"),
            ("--frob 1", "unknown option '--frob' for dbbench"),
            ("fillrandom", "unexpected argument 'fillrandom' for dbbench"),
        ] {
            let e = parse_args(&args(line)).unwrap_err();
            assert_eq!(e.to_string(), msg, "{line}");
            assert_eq!(e.kind(), crate::ErrorKind::Usage);
        }
    }

    #[test]
    fn the_db_bench_command_is_the_issues_plus_the_directory() {
        let a = DbBenchArgs::default();
        assert_eq!(
            db_bench_command_args(&a, Path::new("bench-db/x")).join(" "),
            "--benchmarks=fillrandom,readrandom,overwrite --num=2000000 --value_size=100 \
             --key_size=16 --max_background_jobs=2 --histogram=1 --db=bench-db/x"
        );
        let a = DbBenchArgs {
            threads: 2,
            ..DbBenchArgs::default()
        };
        assert!(db_bench_command_args(&a, Path::new("d")).contains(&"--threads=2".to_string()));
    }

    #[test]
    fn executables_are_found_on_path_or_by_path() {
        assert!(find_executable("sh").is_some());
        assert!(find_executable("/bin/sh").is_some());
        assert!(find_executable("no-such-db-bench-binary").is_none());
        assert!(find_executable("/no/such/db_bench").is_none());
    }
}
