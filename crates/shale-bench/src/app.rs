//! The main mode: load and/or run one workload against one backend, YCSB-cpp style.
//!
//! Output, on stdout, as the AegonKV fork of YCSB-cpp prints it (its analysis scripts read it):
//! for `-db titandb`/`diffkv` the property translation first; then per phase the status lines
//! (`-s`), the phase's final lines, and with `-statistics` a blank line, `STATISTICS:`, one
//! `name COUNT : n` line per statistic and a blank line. The statistics after the load are those of
//! the load; after the run, those of the run alone (the fork resets them after printing). Each set
//! is taken once the engine's background work (flushes, compactions, blob GC) has settled, waiting
//! at most `statistics.settle_timeout` seconds; how long that took, and whether the bound was hit,
//! are printed among them (`bench.settle.micros`, `bench.settle.timeout`).
//!
//! Properties no component reads are listed once on stderr, each with the file and line that set
//! it, and the run goes on (YCSB-cpp ignores them); `strict=true` makes them an error.

use crate::backend::{backend_tables, open_backend, Backend, Settle, Statistics};
use crate::cli::YcsbArgs;
use crate::error::{Error, Result};
use crate::props::{PropSpec, Properties, UnknownProperty};
use crate::runner::{final_lines, run_phase, PhaseResult, RunConfig};
use crate::workload::{build_workload, workload_kind, workload_props, ErrorLog, Phase};
use std::sync::Arc;
use std::time::Duration;

/// Default `status.interval`, seconds (YCSB-cpp's).
pub const DEFAULT_STATUS_INTERVAL_SECS: u64 = 10;
/// Default `statistics.settle_timeout`, seconds.
pub const DEFAULT_SETTLE_TIMEOUT_SECS: u64 = 600;

/// Properties of the harness itself (every workload and backend).
pub static RUNNER_PROPS: &[PropSpec] = &[
    PropSpec::new("dbname", "", "the backend (set by -db)"),
    PropSpec::new("doload", "false", "run the load phase (set by -load)"),
    PropSpec::new(
        "dotransaction",
        "false",
        "run the transaction phase (set by -run)",
    ),
    PropSpec::new("status", "false", "print status lines (set by -s)"),
    PropSpec::new("status.interval", "10", "seconds between status lines"),
    PropSpec::new(
        "statistics",
        "false",
        "print engine statistics after each phase (set by -statistics)",
    ),
    PropSpec::new(
        "statistics.settle_timeout",
        "600",
        "seconds to wait for background work to settle before printing statistics",
    ),
    PropSpec::new(
        "strict",
        "false",
        "unknown properties are errors (otherwise warnings)",
    ),
    PropSpec::new("threadcount", "1", "client threads"),
    PropSpec::new(
        "target",
        "0",
        "operations per second across all threads; 0 is unthrottled",
    ),
    PropSpec::new(
        "workload",
        "core",
        "core (YCSB; also com.yahoo.ycsb.workloads.CoreWorkload) or mixgraph",
    ),
    PropSpec::new(
        "verify",
        "false",
        "check every value read against what was written",
    ),
    PropSpec::new(
        "seed",
        "",
        "seed of every random stream (a fixed default: runs repeat)",
    ),
    PropSpec::new("resultfile", "", "write the results as JSON to this file"),
    PropSpec::new(
        "sleepafterload",
        "0",
        "seconds to wait between load and run",
    ),
    PropSpec::new(
        "maxexecutiontime",
        "0",
        "stop a phase after this many seconds; 0 is no limit",
    ),
    PropSpec::new(
        "progress",
        "true",
        "show a progress bar when stderr is a terminal",
    ),
    PropSpec::new(
        "measurementtype",
        "hdrhistogram",
        "accepted for compatibility; latencies are always HdrHistograms",
    ),
];

/// Everything one invocation measured; the JSON result file holds this.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunReport {
    /// The backend.
    pub db: String,
    /// The workload kind (`core`, `mixgraph`).
    pub workload: String,
    /// Client threads.
    pub threads: u64,
    /// The load phase, when run.
    pub load: Option<PhaseResult>,
    /// The run phase, when run.
    pub run: Option<PhaseResult>,
    /// Engine statistics after the load phase (cumulative since open).
    pub statistics_after_load: Option<Statistics>,
    /// Engine statistics at the end (cumulative since open).
    pub statistics: Statistics,
    /// Every property in effect.
    pub properties: Vec<(String, String)>,
}

/// Prints every known property, grouped by component.
pub fn print_properties_help() {
    let mut groups: Vec<(String, &[PropSpec])> = vec![("harness".into(), RUNNER_PROPS)];
    for kind in crate::workload::WORKLOAD_NAMES {
        for table in workload_props(kind) {
            groups.push((format!("workload={kind}"), table));
        }
    }
    for b in crate::backend::all_backends() {
        let note = if b.available {
            String::new()
        } else {
            format!(" (not built in; feature {})", b.feature.unwrap_or(b.name))
        };
        groups.push((format!("-db {}{note}", b.name), b.props));
    }
    for (title, specs) in groups {
        println!("{title}:");
        for s in specs {
            let default = if s.default.is_empty() {
                String::new()
            } else {
                format!(" [default {}]", s.default)
            };
            println!("  {:<44} {}{default}", s.name, s.help);
        }
    }
}

/// The properties that neither the harness, the workload nor the backend reads.
///
/// # Errors
/// `Usage` for an unknown backend, `Property` for an unknown workload.
pub fn unknown_properties(props: &Properties) -> Result<Vec<UnknownProperty>> {
    let db = props.get_str("dbname", "");
    let mut tables = vec![RUNNER_PROPS];
    tables.extend(workload_props(workload_kind(props)?));
    tables.extend(backend_tables(db)?);
    Ok(props.unknown(&tables))
}

/// One line of the unknown-property warning: what is wrong with `u` under `-db db`.
fn describe_unknown(u: &UnknownProperty, db: &str) -> String {
    let owner = crate::backend::all_backends()
        .into_iter()
        .find(|b| b.name != db && u.name.starts_with(&format!("{}.", b.name)));
    match owner {
        Some(b) => format!(
            "'{}' (set at {}) belongs to backend {}, not -db {db}",
            u.name, u.origin, b.name
        ),
        None => u.to_string(),
    }
}

/// Checks the property names: warns about unknown ones on stderr (once, all of them), or fails
/// with `strict=true`.
///
/// # Errors
/// `Property` listing the unknown properties when `strict=true`; `Usage`/`Property` for an
/// unknown backend or workload.
pub fn check_properties(props: &Properties) -> Result<Vec<String>> {
    let db = props.get_str("dbname", "");
    let unknown = unknown_properties(props)?;
    let lines: Vec<String> = unknown.iter().map(|u| describe_unknown(u, db)).collect();
    if lines.is_empty() {
        return Ok(lines);
    }
    if props.get_bool("strict", false)? {
        return Err(Error::property(format!(
            "unknown propert{} (strict=true):\n  {}",
            if lines.len() == 1 { "y" } else { "ies" },
            lines.join("\n  ")
        )));
    }
    eprintln!(
        "warning: {} propert{} not read by shale-bench with -db {db} (ignored; -p strict=true makes this an error):",
        lines.len(),
        if lines.len() == 1 { "y is" } else { "ies are" }
    );
    for l in &lines {
        eprintln!("  {l}");
    }
    Ok(lines)
}

/// Waits for `db`'s background work to settle (at most `timeout`), then reads its statistics, with
/// the wait recorded among them.
fn settled_statistics(db: &dyn Backend, timeout: Duration) -> Result<Statistics> {
    let settle = db.settle(timeout)?;
    let mut s = db.statistics()?;
    match settle {
        Settle::Settled(waited) => {
            s.set_gauge("bench.settle.micros", waited.as_micros() as u64);
            s.set_gauge("bench.settle.timeout", 0);
        }
        Settle::TimedOut(waited) => {
            eprintln!(
                "warning: background work had not settled after {:.1} s (statistics.settle_timeout); statistics taken anyway",
                waited.as_secs_f64()
            );
            s.set_gauge("bench.settle.micros", waited.as_micros() as u64);
            s.set_gauge("bench.settle.timeout", 1);
        }
        Settle::Unobservable => {
            eprintln!("note: this backend does not show its background work; statistics taken without waiting");
        }
    }
    Ok(s)
}

/// Prints a statistics block as the fork does: a blank line, `STATISTICS:`, the lines, a blank line.
fn print_statistics(s: &Statistics) {
    println!();
    println!("STATISTICS:");
    for line in s.lines() {
        println!("{line}");
    }
    println!();
}

/// Runs the main mode; returns the report and prints YCSB-cpp's output to stdout.
///
/// # Errors
/// Any configuration or backend error before or after the phases (failures during a phase are
/// counted, not returned).
pub fn run_ycsb(args: YcsbArgs) -> Result<RunReport> {
    let props = args.props;
    if !props.contains("dbname") {
        return Err(Error::usage(
            "no database given: use -db NAME (shale, titandb, diffkv, rocksdb, fjall, resp, memory)",
        ));
    }
    let db_name = props.get_str("dbname", "").to_string();
    check_properties(&props)?;
    let do_load = props.get_bool("doload", false)?;
    let do_run = props.get_bool("dotransaction", false)?;
    if !do_load && !do_run {
        return Err(Error::usage("no operation to do: give -load, -run or both"));
    }
    if do_run && !props.contains("operationcount") {
        return Err(Error::property(
            "property operationcount is required with -run (for example -p operationcount=100000)",
        ));
    }
    let threads = props.get_u64_in("threadcount", 1, 1, 4096)?;
    let target = props.get_f64_in("target", 0.0, 0.0, 1e12)?;
    let status = props.get_bool("status", false)?;
    let interval = props.get_u64_in("status.interval", DEFAULT_STATUS_INTERVAL_SECS, 1, 86_400)?;
    let max_time = props.get_u64("maxexecutiontime", 0)?;
    let statistics = args.statistics || props.get_bool("statistics", false)?;
    let settle_timeout = Duration::from_secs(
        props.get_u64("statistics.settle_timeout", DEFAULT_SETTLE_TIMEOUT_SECS)?,
    );
    let cfg = RunConfig {
        threads: threads as usize,
        target: (target > 0.0).then_some(target),
        status_interval: status.then(|| Duration::from_secs(interval)),
        progress: props.get_bool("progress", true)?,
        max_execution_time: (max_time > 0).then(|| Duration::from_secs(max_time)),
    };
    let sleep_after_load = props.get_u64("sleepafterload", 0)?;
    let result_file = props.get("resultfile").map(str::to_string);
    props.get_choice(
        "measurementtype",
        "hdrhistogram",
        &["hdrhistogram", "basic", "histogram", "timeseries"],
    )?;

    if matches!(db_name.as_str(), "titandb" | "diffkv") {
        for line in crate::backend::titan_props::translate(&props, &db_name)?.report(&db_name) {
            println!("{line}");
        }
    }
    let log = Arc::new(ErrorLog::new(props.get_bool("verify", false)?));
    let workload = build_workload(&props, &log)?;
    let db = open_backend(&db_name, &props)?;

    let mut report = RunReport {
        db: db_name,
        workload: workload_kind(&props)?.to_string(),
        threads,
        load: None,
        run: None,
        statistics_after_load: None,
        statistics: Statistics::default(),
        properties: props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let mut printed = Statistics::default();
    if do_load {
        let r = run_phase(workload.as_ref(), db.as_ref(), Phase::Load, &cfg);
        for line in final_lines(&r) {
            println!("{line}");
        }
        report.load = Some(r);
        if statistics {
            let s = settled_statistics(db.as_ref(), settle_timeout)?;
            print_statistics(&s);
            printed = s.clone();
            report.statistics_after_load = Some(s);
        } else if do_run {
            report.statistics_after_load = Some(db.statistics()?);
        }
    }
    if do_run {
        std::thread::sleep(Duration::from_secs(sleep_after_load));
        let r = run_phase(workload.as_ref(), db.as_ref(), Phase::Run, &cfg);
        for line in final_lines(&r) {
            println!("{line}");
        }
        report.run = Some(r);
        if statistics {
            let s = settled_statistics(db.as_ref(), settle_timeout)?;
            print_statistics(&s.since(&printed));
            report.statistics = s;
        }
    }
    if !statistics || !do_run {
        report.statistics = match &report.statistics_after_load {
            Some(s) if !do_run => s.clone(),
            _ => db.statistics()?,
        };
    }
    db.close()?;
    if let Some(path) = result_file {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::input(format!("cannot encode results: {e}")))?;
        std::fs::write(&path, json)
            .map_err(|e| Error::io(format!("cannot write result file {path}"), e))?;
    }
    Ok(report)
}

impl RunReport {
    /// Whether anything went wrong that must fail the process: a value that did not verify or a
    /// malformed input.
    pub fn has_integrity_failures(&self) -> bool {
        [&self.load, &self.run]
            .into_iter()
            .flatten()
            .any(|p| p.verify_failures > 0 || p.input_errors > 0)
    }
}
