//! The main mode: load and/or run one workload against one backend, YCSB-cpp style.

use crate::backend::{backend_info, open_backend, Statistics};
use crate::cli::YcsbArgs;
use crate::error::{Error, Result};
use crate::props::{PropSpec, Properties};
use crate::runner::{final_lines, run_phase, PhaseResult, RunConfig};
use crate::workload::{build_workload, workload_kind, workload_props, ErrorLog, Phase};
use std::sync::Arc;
use std::time::Duration;

/// Default `status.interval`, seconds.
pub const DEFAULT_STATUS_INTERVAL_SECS: u64 = 1;

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
    PropSpec::new("status.interval", "1", "seconds between status lines"),
    PropSpec::new("threadcount", "1", "client threads"),
    PropSpec::new(
        "target",
        "0",
        "operations per second across all threads; 0 is unthrottled",
    ),
    PropSpec::new(
        "workload",
        "core",
        "core (YCSB; also site.ycsb.workloads.CoreWorkload), mixgraph or trace",
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
    /// The workload kind (`core`, `mixgraph`, `trace`).
    pub workload: String,
    /// Client threads.
    pub threads: u64,
    /// The load phase, when run.
    pub load: Option<PhaseResult>,
    /// The run phase, when run.
    pub run: Option<PhaseResult>,
    /// Engine statistics after the load phase (when both phases ran).
    pub statistics_after_load: Option<Statistics>,
    /// Engine statistics at the end.
    pub statistics: Statistics,
    /// Every property in effect.
    pub properties: Vec<(String, String)>,
}

/// Prints every known property, grouped by component.
pub fn print_properties_help() {
    let mut groups: Vec<(String, &[PropSpec])> = vec![("harness".into(), RUNNER_PROPS)];
    for kind in crate::workload::WORKLOAD_NAMES {
        groups.push((format!("workload={kind}"), workload_props(kind)));
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

/// Checks the property names against the tables of the harness, the workload and the backend.
///
/// # Errors
/// `Property` for an unknown name (with suggestions); `Usage` for an unknown backend.
pub fn check_properties(props: &Properties) -> Result<()> {
    let db = props.get_str("dbname", "");
    let backend = backend_info(db)?;
    let kind = workload_kind(props)?;
    let result = props.check_known(&[RUNNER_PROPS, workload_props(kind), backend.props]);
    if let Err(e) = &result {
        // A property of another backend deserves a precise message.
        for other in crate::backend::all_backends() {
            let prefix = format!("{}.", other.name);
            if other.name != db {
                if let Some((k, _)) = props.iter().find(|(k, _)| k.starts_with(&prefix)) {
                    return Err(Error::property(format!(
                        "property {k} belongs to backend {}, but -db is {db}",
                        other.name
                    )));
                }
            }
        }
        return Err(e.clone());
    }
    Ok(())
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
            "no database given: use -db NAME (shale, rocksdb, fjall, memory)",
        ));
    }
    let db_name = props.get_str("dbname", "").to_string();
    check_properties(&props)?;
    let do_load = props.get_bool("doload", false)?;
    let do_run = props.get_bool("dotransaction", false)?;
    if !do_load && !do_run {
        return Err(Error::usage("no operation to do: give -load, -run or both"));
    }
    if do_run && !props.contains("operationcount") && workload_kind(&props)? != "trace" {
        return Err(Error::property(
            "property operationcount is required with -run (for example -p operationcount=100000)",
        ));
    }
    let threads = props.get_u64_in("threadcount", 1, 1, 4096)?;
    let target = props.get_f64_in("target", 0.0, 0.0, 1e12)?;
    let status = props.get_bool("status", false)?;
    let interval = props.get_u64_in("status.interval", DEFAULT_STATUS_INTERVAL_SECS, 1, 86_400)?;
    let max_time = props.get_u64("maxexecutiontime", 0)?;
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

    let log = Arc::new(ErrorLog::new(props.get_bool("verify", false)?));
    let workload = build_workload(&props, (do_load, do_run), &log)?;
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
    if do_load {
        let r = run_phase(workload.as_ref(), db.as_ref(), Phase::Load, &cfg);
        for line in final_lines(&r) {
            println!("{line}");
        }
        report.load = Some(r);
        if do_run {
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
    }
    report.statistics = db.statistics()?;
    if args.statistics {
        for line in report.statistics.lines() {
            println!("{line}");
        }
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
