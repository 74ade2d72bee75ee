//! What one benchmark phase measured, and the reader of RocksDB db_bench's report.
//!
//! db_bench (RocksDB 7.8.3, Debian package `rocksdb-tools`) prints, per benchmark,
//!
//! ```text
//! fillrandom   :       6.440 micros/op 155228 ops/sec 0.129 seconds 20000 operations;   17.2 MB/s
//! Microseconds per write:
//! Count: 20000 Average: 6.4401  StdDev: 31.91
//! Min: 3  Median: 5.4050  Max: 4366
//! Percentiles: P50: 5.40 P75: 7.35 P99: 15.39 P99.9: 37.78 P99.99: 380.00
//! ```
//!
//! (the histogram lines only with `--histogram=1`; `readrandom` adds `(N of M found)`), amid
//! headers and, on stderr, `... finished N ops` progress separated by carriage returns. The reader
//! splits on `\n` and `\r`, takes a report line to be anything with a `NAME : X micros/op Y
//! ops/sec` shape wherever it starts (so progress glued in front of it does no harm), attaches
//! the first `Percentiles:` line after a report line to that benchmark, and ignores everything
//! else. A malformed report line is skipped, not guessed at: the caller checks that every
//! benchmark it asked for was found.

use serde::{Deserialize, Serialize};

/// Latency percentiles of one phase, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 75th percentile, when known.
    pub p75: Option<f64>,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile, when known.
    pub p9999: Option<f64>,
}

/// One benchmark phase (`fillrandom`, `readrandom`, `overwrite`) as db_bench reports it; the Shale
/// side fills the same fields the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseFigures {
    /// The benchmark's name.
    pub benchmark: String,
    /// Thread-seconds per operation, in microseconds (db_bench sums the threads' times).
    pub micros_per_op: f64,
    /// Operations of all threads divided by the wall-clock time of the phase.
    pub ops_per_sec: f64,
    /// Wall-clock seconds, when printed.
    pub seconds: Option<f64>,
    /// Operations of all threads, when printed.
    pub operations: Option<u64>,
    /// For reads: `(found, looked up)`.
    pub found: Option<(u64, u64)>,
    /// Latency percentiles (db_bench prints them with `--histogram=1`).
    pub percentiles: Option<Percentiles>,
}

/// Everything read from one db_bench run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DbBenchReport {
    /// `version 7.8.3`, from the `RocksDB:` header.
    pub version: Option<String>,
    /// The `Compression:` header (`Snappy` by default).
    pub compression: Option<String>,
    /// `WARNING:` lines (Debian's db_bench warns that it was built with assertions).
    pub warnings: Vec<String>,
    /// The benchmarks, in the order they ran.
    pub phases: Vec<PhaseFigures>,
}

impl DbBenchReport {
    /// The figures of `benchmark`, if it was reported.
    pub fn phase(&self, benchmark: &str) -> Option<&PhaseFigures> {
        self.phases.iter().find(|p| p.benchmark == benchmark)
    }
}

/// Reads db_bench's output (stdout alone, or stdout and stderr mixed).
pub fn parse_db_bench_output(text: &str) -> DbBenchReport {
    let mut report = DbBenchReport::default();
    // Index of the last benchmark still waiting for its percentiles.
    let mut awaiting: Option<usize> = None;
    for line in text.split(['\n', '\r']).map(str::trim) {
        if let Some(v) = line.strip_prefix("RocksDB:") {
            report.version = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("Compression:") {
            report.compression = Some(v.trim().to_string());
        } else if line.starts_with("WARNING:") {
            report.warnings.push(line.to_string());
        } else if let Some(p) = parse_report_line(line) {
            report.phases.push(p);
            awaiting = Some(report.phases.len() - 1);
        } else if let Some(rest) = line
            .find("Percentiles:")
            .map(|at| &line[at + "Percentiles:".len()..])
        {
            if let (Some(i), Some(p)) = (awaiting, parse_percentiles(rest)) {
                report.phases[i].percentiles = Some(p);
                awaiting = None;
            }
        }
    }
    report
}

/// The number just before the word `unit` in `tokens`.
fn number_before<T: std::str::FromStr>(tokens: &[&str], unit: &str) -> Option<T> {
    let at = tokens.iter().position(|t| *t == unit)?;
    tokens.get(at.checked_sub(1)?)?.parse().ok()
}

/// `NAME : X micros/op Y ops/sec [S seconds] [N operations;] ... [(F of M found)]`.
fn parse_report_line(line: &str) -> Option<PhaseFigures> {
    let at = line.find("micros/op")?;
    let (head, _) = line[..at].rsplit_once(':')?;
    let benchmark = head.split_whitespace().last()?.to_string();
    let tokens: Vec<&str> = line[head.len() + 1..].split_whitespace().collect();
    let micros_per_op = number_before(&tokens, "micros/op")?;
    let ops_per_sec = number_before(&tokens, "ops/sec")?;
    let seconds = number_before(&tokens, "seconds");
    let operations = number_before(&tokens, "operations;");
    let found = line.rfind(" found)").and_then(|end| {
        let start = line[..end].rfind('(')?;
        let (f, m) = line[start + 1..end].split_once(" of ")?;
        Some((f.trim().parse().ok()?, m.trim().parse().ok()?))
    });
    Some(PhaseFigures {
        benchmark,
        micros_per_op,
        ops_per_sec,
        seconds,
        operations,
        found,
        percentiles: None,
    })
}

/// `P50: 5.40 P75: 7.35 P99: 15.39 P99.9: 37.78 P99.99: 380.00`; P50, P99 and P99.9 are required.
fn parse_percentiles(rest: &str) -> Option<Percentiles> {
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    let get = |name: &str| -> Option<f64> {
        let at = tokens.iter().position(|t| *t == name)?;
        tokens.get(at + 1)?.parse().ok()
    };
    Some(Percentiles {
        p50: get("P50:")?,
        p75: get("P75:"),
        p99: get("P99:")?,
        p999: get("P99.9:")?,
        p9999: get("P99.99:"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// stdout and stderr of `db_bench --benchmarks=fillrandom,readrandom,overwrite --num=20000
    /// --value_size=100 --key_size=16 --max_background_jobs=2 --histogram=1` (Debian's RocksDB
    /// 7.8.3 on the benchmark machine), captured together, progress carriage returns included.
    const SAMPLE: &str = include_str!("testdata/db_bench-7.8.3-num20000.txt");

    #[test]
    fn a_captured_db_bench_run_yields_all_three_benchmarks_with_percentiles() {
        let r = parse_db_bench_output(SAMPLE);
        assert_eq!(r.version.as_deref(), Some("version 7.8.3"));
        assert_eq!(r.compression.as_deref(), Some("Snappy"));
        assert_eq!(
            r.warnings,
            ["WARNING: Assertions are enabled; benchmarks unnecessarily slow"]
        );
        let names: Vec<&str> = r.phases.iter().map(|p| p.benchmark.as_str()).collect();
        assert_eq!(names, ["fillrandom", "readrandom", "overwrite"]);

        let fill = r.phase("fillrandom").unwrap();
        assert_eq!(fill.micros_per_op, 6.440);
        assert_eq!(fill.ops_per_sec, 155_228.0);
        assert_eq!(fill.seconds, Some(0.129));
        assert_eq!(fill.operations, Some(20_000));
        assert_eq!(fill.found, None);
        assert_eq!(
            fill.percentiles,
            Some(Percentiles {
                p50: 5.40,
                p75: Some(7.35),
                p99: 15.39,
                p999: 37.78,
                p9999: Some(380.00)
            })
        );

        let read = r.phase("readrandom").unwrap();
        assert_eq!(read.ops_per_sec, 557_957.0);
        assert_eq!(read.found, Some((12_537, 20_000)));
        let p = read.percentiles.unwrap();
        assert_eq!((p.p50, p.p99, p.p999), (1.18, 3.78, 23.33));

        let over = r.phase("overwrite").unwrap();
        assert_eq!(over.ops_per_sec, 130_172.0);
        assert_eq!(over.percentiles.unwrap().p999, 40.12);
    }

    #[test]
    fn progress_glued_in_front_of_a_report_line_does_not_hide_it() {
        let text = "... finished 20000 ops      \rreadrandom   :       1.789 micros/op \
                    557957 ops/sec 0.036 seconds 20000 operations;   38.7 MB/s (12537 of 20000 found)\n\
                    ... finished 100 ops   overwrite    :       7.679 micros/op 130172 ops/sec\n";
        let r = parse_db_bench_output(text);
        assert_eq!(r.phases.len(), 2);
        assert_eq!(r.phases[0].benchmark, "readrandom");
        assert_eq!(r.phases[0].found, Some((12_537, 20_000)));
        assert_eq!(r.phases[1].benchmark, "overwrite");
        assert_eq!(r.phases[1].ops_per_sec, 130_172.0);
        assert_eq!(r.phases[1].seconds, None);
    }

    #[test]
    fn percentiles_attach_to_the_benchmark_just_reported_and_only_once() {
        // Two threads (`--threads=2`): the same shape, counts doubled.
        let text = "\
Percentiles: P50: 9.00 P75: 9.00 P99: 9.00 P99.9: 9.00 P99.99: 9.00
fillrandom   :      10.268 micros/op 194401 ops/sec 0.051 seconds 10000 operations;   21.5 MB/s
Count: 10000 Average: 10.2562  StdDev: 83.41
Percentiles: P50: 8.31 P75: 9.52 P99: 29.42 P99.9: 61.00 P99.99: 5500.00
Percentiles: P50: 1.00 P75: 1.00 P99: 1.00 P99.9: 1.00 P99.99: 1.00
readrandom   :       3.788 micros/op 483325 ops/sec 0.021 seconds 10000 operations;   46.2 MB/s (4325 of 5000 found)
";
        let r = parse_db_bench_output(text);
        assert_eq!(r.phases.len(), 2);
        let p = r.phases[0].percentiles.unwrap();
        assert_eq!(
            (p.p50, p.p99, p.p999, p.p9999),
            (8.31, 29.42, 61.0, Some(5500.0))
        );
        assert_eq!(r.phases[1].percentiles, None);
    }

    #[test]
    fn malformed_lines_are_skipped_not_guessed() {
        let text = "\
Keys:       16 bytes each (+ 0 bytes user-defined timestamp)
Read rate: 0 ops/second
fillrandom   :       garbage micros/op 1 ops/sec
overwrite    :       7.0 micros/op
readrandom : 2.0 micros/op 500000 ops/sec
Percentiles: P50: 1.0 P75: 2.0
";
        let r = parse_db_bench_output(text);
        assert_eq!(r.phases.len(), 1);
        assert_eq!(r.phases[0].benchmark, "readrandom");
        assert_eq!(r.phases[0].ops_per_sec, 500_000.0);
        assert_eq!(r.phases[0].percentiles, None, "P99 and P99.9 are missing");
        assert!(parse_db_bench_output("").phases.is_empty());
    }
}
