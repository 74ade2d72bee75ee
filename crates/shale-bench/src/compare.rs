//! `shale-bench compare`: several backends on one workload, side by side, over several rounds.
//!
//! The benchmark machine's capacity drifts (DESIGN.md section 8), so a single run of each engine
//! proves little. `compare` runs every backend once per round, in an order that rotates each
//! round, each run in a fresh process on a fresh database directory, and records a two-thread
//! CPU check ([`crate::cpucheck`]) before every round. It reports per backend the median over
//! rounds of each metric and its ratio to the first backend, as a markdown table printed and
//! written to `<out>/compare.md`, with the raw numbers in `<out>/compare.json`, every run's log
//! and result file, and plots of the median round.
//!
//! A `-db` entry is `[LABEL=]BACKEND[:FILE[+FILE...]]`: `rocksdb-blob=rocksdb:workloads/rocksdb-blob.properties`
//! runs the rocksdb backend with that file under the label `rocksdb-blob`. Every other argument
//! (`-P`, `-p`, `-load`, `-run`, `-threads`, `-s`) is passed to each run; without `-load` or `-run`
//! both phases run.

use crate::app::RunReport;
use crate::backend::{
    backend_info, dbname_property, COMPACT_READ_STAT, COMPACT_WRITE_STAT, DISK_USAGE_STAT,
    GC_WRITE_STAT, STALL_MICROS_STAT,
};
use crate::cli::CompareArgs;
use crate::cpucheck::sysbench_cpu_events_per_sec;
use crate::error::{Error, Result};
use crate::measure::OpKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Directory the reports go to when `-out` is not given (relative to the working directory).
pub const DEFAULT_OUT_PARENT: &str = "bench-results";

/// One `-db` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Column label.
    pub label: String,
    /// Backend name.
    pub backend: String,
    /// Extra property files for this entry.
    pub files: Vec<String>,
}

/// Parses `[LABEL=]BACKEND[:FILE[+FILE...]]`.
///
/// # Errors
/// `Usage` for an empty or unknown backend.
pub fn parse_entry(s: &str) -> Result<Entry> {
    let (label, rest) = match s.split_once('=') {
        Some((l, r)) => (Some(l.trim()), r),
        None => (None, s),
    };
    let (backend, files) = match rest.split_once(':') {
        Some((b, f)) => (
            b.trim(),
            f.split('+')
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect(),
        ),
        None => (rest.trim(), Vec::new()),
    };
    backend_info(backend)?;
    Ok(Entry {
        label: label
            .filter(|l| !l.is_empty())
            .unwrap_or(backend)
            .to_string(),
        backend: backend.to_string(),
        files,
    })
}

/// The metrics of one run that the table compares.
pub fn metrics(r: &RunReport) -> Vec<(String, f64)> {
    let mut m = Vec::new();
    if let Some(l) = &r.load {
        m.push(("load throughput (ops/s)".to_string(), l.throughput));
        for o in &l.ops {
            m.push((format!("load {} p99 (us)", o.op), o.p99_us));
            m.push((format!("load {} p99.9 (us)", o.op), o.p999_us));
        }
    }
    if let Some(run) = &r.run {
        m.push(("run throughput (ops/s)".to_string(), run.throughput));
        for kind in OpKind::ALL {
            if let Some(o) = run.ops.iter().find(|o| o.op == kind.name()) {
                m.push((format!("run {} p99 (us)", o.op), o.p99_us));
                m.push((format!("run {} p99.9 (us)", o.op), o.p999_us));
            }
        }
    }
    let s = &r.statistics;
    if let Some(v) = s.get(DISK_USAGE_STAT) {
        m.push(("disk used (MB)".to_string(), v as f64 / 1e6));
    }
    for (name, label) in [
        (COMPACT_READ_STAT, "compaction read (MB)"),
        (COMPACT_WRITE_STAT, "compaction write (MB)"),
    ] {
        if let Some(v) = s.get(name) {
            m.push((label.to_string(), v as f64 / 1e6));
        }
    }
    if let Some(gc) = s.get(GC_WRITE_STAT) {
        m.push(("GC write (MB)".to_string(), gc as f64 / 1e6));
        let compaction = s.get(COMPACT_WRITE_STAT).unwrap_or(0);
        m.push((
            "compaction+GC write (MB)".to_string(),
            (compaction + gc) as f64 / 1e6,
        ));
    }
    if let Some(v) = s.get(STALL_MICROS_STAT) {
        m.push(("stall (ms)".to_string(), v as f64 / 1e3));
    }
    m
}

/// The median of `v` (mean of the middle two for an even count); `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn fmt_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        let s = format!("{:.0}", v);
        // Thousands separators for readability.
        let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        format!("{sign}{out}")
    } else {
        format!("{v:.2}")
    }
}

/// The markdown table of medians and ratios: one row per metric, one column per label; each
/// cell after the first column holds `median (ratio to the first label)`.
pub fn markdown_table(
    labels: &[String],
    per_label: &BTreeMap<String, Vec<Vec<(String, f64)>>>,
) -> String {
    let mut metric_names: Vec<String> = Vec::new();
    for l in labels {
        for run in per_label.get(l).into_iter().flatten() {
            for (name, _) in run {
                if !metric_names.contains(name) {
                    metric_names.push(name.clone());
                }
            }
        }
    }
    let med = |label: &str, metric: &str| -> Option<f64> {
        let vals: Vec<f64> = per_label
            .get(label)?
            .iter()
            .filter_map(|run| run.iter().find(|(n, _)| n == metric).map(|x| x.1))
            .collect();
        median(&vals)
    };
    let mut s = format!(
        "| metric (median) | {} |\n|---|{}\n",
        labels.join(" | "),
        "---:|".repeat(labels.len())
    );
    for metric in &metric_names {
        let base = med(&labels[0], metric);
        let cells: Vec<String> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| match (med(l, metric), base) {
                (None, _) => "n/a".to_string(),
                (Some(v), _) if i == 0 => fmt_value(v),
                (Some(v), Some(b)) if b != 0.0 => format!("{} ({:.2}x)", fmt_value(v), v / b),
                (Some(v), _) => fmt_value(v),
            })
            .collect();
        s.push_str(&format!("| {metric} | {} |\n", cells.join(" | ")));
    }
    s
}

/// Runs the comparison.
///
/// # Errors
/// `Usage` for bad entries, `Io` for the output directory, `Backend` when a run fails (naming
/// its log file).
pub fn run_compare(args: &CompareArgs) -> Result<()> {
    let entries: Vec<Entry> = args
        .entries
        .iter()
        .map(|e| parse_entry(e))
        .collect::<Result<_>>()?;
    let labels: Vec<String> = entries.iter().map(|e| e.label.clone()).collect();
    for (i, l) in labels.iter().enumerate() {
        if labels[..i].contains(l) {
            return Err(Error::usage(format!(
                "label '{l}' is used twice in -db; name entries LABEL=BACKEND"
            )));
        }
    }
    let out = args.out.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Path::new(DEFAULT_OUT_PARENT).join(format!("compare-{secs}"))
    });
    std::fs::create_dir_all(&out)
        .map_err(|e| Error::io(format!("cannot create {}", out.display()), e))?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::io("cannot find the shale-bench executable", e))?;
    let mut pass = args.passthrough.clone();
    if !pass
        .iter()
        .any(|a| matches!(a.trim_start_matches('-'), "load" | "run" | "t"))
    {
        pass.push("-load".into());
        pass.push("-run".into());
    }

    let mut reports: BTreeMap<String, Vec<RunReport>> = BTreeMap::new();
    let mut cpu: Vec<Option<f64>> = Vec::new();
    for round in 1..=args.rounds {
        let check = if args.cpucheck_secs > 0 {
            sysbench_cpu_events_per_sec(args.cpucheck_secs)
        } else {
            None
        };
        cpu.push(check);
        let cpu_note =
            check.map_or_else(|| "no sysbench".to_string(), |v| format!("{v:.0} events/s"));
        eprintln!(
            "round {round}/{}: cpu check (sysbench cpu, 2 threads): {cpu_note}",
            args.rounds
        );
        let n = entries.len();
        for k in 0..n {
            let e = &entries[(k + round as usize - 1) % n];
            let report = run_one(&exe, &out, e, round, &pass)?;
            eprintln!(
                "round {round}: {:<16} load {} ops/s, run {} ops/s",
                e.label,
                report
                    .load
                    .as_ref()
                    .map_or("-".into(), |p| fmt_value(p.throughput)),
                report
                    .run
                    .as_ref()
                    .map_or("-".into(), |p| fmt_value(p.throughput))
            );
            reports.entry(e.label.clone()).or_default().push(report);
        }
    }

    let per_label: BTreeMap<String, Vec<Vec<(String, f64)>>> = reports
        .iter()
        .map(|(l, rs)| (l.clone(), rs.iter().map(metrics).collect()))
        .collect();
    let table = markdown_table(&labels, &per_label);
    let command = std::iter::once("shale-bench compare".to_string())
        .chain(
            std::env::args()
                .skip(2)
                .map(|a| if a.contains(' ') { format!("'{a}'") } else { a }),
        )
        .collect::<Vec<_>>()
        .join(" ");
    let cpu_line = crate::cpucheck::rounds_line(&cpu);
    let md = format!(
        "## shale-bench compare\n\nCommand: `{command}`\n\n{} rounds; medians over rounds, ratios against {}.\n\n{table}\n\
         CPU check (`sysbench cpu --threads=2`, events/s): {cpu_line}\n",
        args.rounds, labels[0]
    );
    println!("{md}");
    std::fs::write(out.join("compare.md"), &md)
        .map_err(|e| Error::io("cannot write compare.md", e))?;
    let raw = serde_json::json!({ "labels": labels, "cpu_events_per_sec": cpu, "runs": reports });
    std::fs::write(
        out.join("compare.json"),
        serde_json::to_string_pretty(&raw).unwrap_or_default(),
    )
    .map_err(|e| Error::io("cannot write compare.json", e))?;

    // Plots of the round whose run (or load) throughput is the median for each label.
    let chosen: Vec<(String, &RunReport)> = labels
        .iter()
        .filter_map(|l| {
            let rs = reports.get(l)?;
            let tp = |r: &RunReport| {
                r.run
                    .as_ref()
                    .or(r.load.as_ref())
                    .map_or(0.0, |p| p.throughput)
            };
            let mut idx: Vec<usize> = (0..rs.len()).collect();
            idx.sort_by(|&a, &b| tp(&rs[a]).total_cmp(&tp(&rs[b])));
            Some((l.clone(), &rs[idx[idx.len() / 2]]))
        })
        .collect();
    for f in crate::plot::plot_reports(&out.join("compare"), &chosen)? {
        eprintln!("wrote {}", f.display());
    }
    eprintln!("wrote {}", out.join("compare.md").display());
    Ok(())
}

fn run_one(exe: &Path, out: &Path, e: &Entry, round: u32, pass: &[String]) -> Result<RunReport> {
    let stem = format!("{}-r{round}", e.label);
    let result: PathBuf = out.join(format!("{stem}.json"));
    let log_path = out.join(format!("{stem}.log"));
    let db_dir = out.join(format!("db-{stem}"));
    let mut cmd = Command::new(exe);
    cmd.args(pass).args(["-db", &e.backend]);
    for f in &e.files {
        cmd.args(["-P", f]);
    }
    if let Some(prop) = dbname_property(&e.backend) {
        cmd.args(["-p", &format!("{prop}={}", db_dir.display())]);
        cmd.args(["-p", &format!("{}.destroy=true", e.backend)]);
    }
    cmd.args([
        "-p",
        &format!("resultfile={}", result.display()),
        "-p",
        "progress=false",
        "-statistics",
    ]);
    let log = std::fs::File::create(&log_path)
        .map_err(|err| Error::io(format!("cannot create {}", log_path.display()), err))?;
    let log2 = log
        .try_clone()
        .map_err(|err| Error::io("cannot duplicate the log file", err))?;
    let status = cmd
        .stdout(log)
        .stderr(log2)
        .status()
        .map_err(|err| Error::io("cannot start shale-bench", err))?;
    let _ = std::fs::remove_dir_all(&db_dir);
    if !status.success() {
        return Err(Error::backend(format!(
            "{} failed in round {round} ({status}); see {}",
            e.label,
            log_path.display()
        )));
    }
    crate::plot::read_report(&result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_take_labels_backends_and_files() {
        assert_eq!(
            parse_entry("shale").unwrap(),
            Entry {
                label: "shale".into(),
                backend: "shale".into(),
                files: vec![]
            }
        );
        assert_eq!(
            parse_entry("rocksdb-blob=rocksdb:a.properties+b.properties").unwrap(),
            Entry {
                label: "rocksdb-blob".into(),
                backend: "rocksdb".into(),
                files: vec!["a.properties".into(), "b.properties".into()]
            }
        );
        assert!(parse_entry("x=leveldb")
            .unwrap_err()
            .to_string()
            .contains("unknown database 'leveldb'"));
    }

    #[test]
    fn medians_handle_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn the_table_shows_medians_and_ratios_to_the_first_backend() {
        let labels = vec!["shale".to_string(), "rocksdb".to_string()];
        let run = |tp: f64| {
            vec![
                ("run throughput (ops/s)".to_string(), tp),
                ("stall (ms)".to_string(), 0.0),
            ]
        };
        let mut per = BTreeMap::new();
        per.insert(
            "shale".to_string(),
            vec![run(200_000.0), run(100.0), run(300_000.0)],
        );
        per.insert("rocksdb".to_string(), vec![run(100_000.0)]);
        assert_eq!(
            markdown_table(&labels, &per),
            "| metric (median) | shale | rocksdb |\n|---|---:|---:|\n\
             | run throughput (ops/s) | 200,000 | 100,000 (0.50x) |\n\
             | stall (ms) | 0.00 | 0.00 |\n"
        );
    }
}
