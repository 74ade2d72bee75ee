//! The figures of every round of `dbbench`, and their markdown report: one table per benchmark
//! with ops/s per round, medians over rounds and Shale/RocksDB ratios.

use super::db_bench_output::PhaseFigures;
use super::{DbBenchArgs, BENCHMARKS};
use crate::compare::median;
use serde::{Deserialize, Serialize};

/// Everything the rounds measured; `--out FILE.md` also writes this as `FILE.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundResults {
    /// `sysbench cpu --threads=2` events per second before each round.
    pub cpu_events_per_sec: Vec<Option<f64>>,
    /// Shale's phases, per round.
    pub shale: Vec<Vec<PhaseFigures>>,
    /// Bytes of Shale's database after each round.
    pub shale_disk_bytes: Vec<Option<u64>>,
    /// Shale's statistics at the end of each round, one line each.
    pub shale_stats: Vec<String>,
    /// The options Shale ran with, in words.
    pub shale_settings: String,
    /// db_bench's phases, per round (empty when it did not run).
    pub rocksdb: Vec<Vec<PhaseFigures>>,
    /// Bytes of RocksDB's database after each round.
    pub rocksdb_disk_bytes: Vec<Option<u64>>,
    /// The db_bench command line, database directory as `DIR`.
    pub db_bench_command: Option<String>,
    /// db_bench's `RocksDB:` header.
    pub rocksdb_version: Option<String>,
    /// db_bench's `Compression:` header.
    pub rocksdb_compression: Option<String>,
    /// db_bench's warnings.
    pub rocksdb_warnings: Vec<String>,
}

/// A db_bench-like line for one phase:
/// `fillrandom   :       6.440 micros/op 155228 ops/sec; p50 5.40 p99 15.39 p99.9 37.78 micros`.
pub fn phase_line(p: &PhaseFigures) -> String {
    let mut s = format!(
        "{:<12} : {:>11.3} micros/op {:.0} ops/sec",
        p.benchmark, p.micros_per_op, p.ops_per_sec
    );
    if let (Some(secs), Some(ops)) = (p.seconds, p.operations) {
        s.push_str(&format!(" {secs:.3} seconds {ops} operations"));
    }
    if let Some(pc) = p.percentiles {
        s.push_str(&format!(
            "; p50 {:.2} p99 {:.2} p99.9 {:.2} micros",
            pc.p50, pc.p99, pc.p999
        ));
    }
    if let Some((found, of)) = p.found {
        s.push_str(&format!("; {found} of {of} found"));
    }
    s
}

/// `1234567.8` as `1,234,568`.
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "n/a".to_string(),
    }
}

/// One engine's figures for one benchmark across rounds.
struct Series<'a> {
    phases: Vec<Option<&'a PhaseFigures>>,
}

impl<'a> Series<'a> {
    fn of(rounds: &'a [Vec<PhaseFigures>], benchmark: &str) -> Series<'a> {
        Series {
            phases: rounds
                .iter()
                .map(|r| r.iter().find(|p| p.benchmark == benchmark))
                .collect(),
        }
    }

    fn ops(&self, round: usize) -> Option<f64> {
        self.phases
            .get(round)
            .copied()
            .flatten()
            .map(|p| p.ops_per_sec)
    }

    fn median_of(&self, f: impl Fn(&PhaseFigures) -> Option<f64>) -> Option<f64> {
        let v: Vec<f64> = self.phases.iter().flatten().filter_map(|p| f(p)).collect();
        median(&v)
    }

    fn median_ops(&self) -> Option<f64> {
        self.median_of(|p| Some(p.ops_per_sec))
    }

    fn median_pct(&self, pick: fn(&super::db_bench_output::Percentiles) -> f64) -> Option<f64> {
        self.median_of(|p| p.percentiles.as_ref().map(pick))
    }

    fn median_found_share(&self) -> Option<f64> {
        self.median_of(|p| p.found.map(|(f, of)| f as f64 / of.max(1) as f64))
    }
}

/// The markdown table of one benchmark.
fn benchmark_table(benchmark: &str, rounds: usize, r: &RoundResults) -> String {
    let shale = Series::of(&r.shale, benchmark);
    let rocks = Series::of(&r.rocksdb, benchmark);
    let with_rocks = !r.rocksdb.is_empty();
    let pcts: [fn(&super::db_bench_output::Percentiles) -> f64; 3] =
        [|p| p.p50, |p| p.p99, |p| p.p999];
    let mut s = format!("### {benchmark}\n\n| engine |");
    for i in 1..=rounds {
        s.push_str(&format!(" round {i} ops/s |"));
    }
    s.push_str(" median ops/s | p50 (us) | p99 (us) | p99.9 (us) |\n|---|");
    s.push_str(&"---:|".repeat(rounds + 4));
    s.push('\n');
    let fmt_ops = |v: Option<f64>| v.map_or("n/a".to_string(), thousands);
    let fmt_us = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.2}"));
    let mut row = |name: &str, x: &Series| {
        s.push_str(&format!("| {name} |"));
        for i in 0..rounds {
            s.push_str(&format!(" {} |", fmt_ops(x.ops(i))));
        }
        s.push_str(&format!(" {} |", fmt_ops(x.median_ops())));
        for pick in pcts {
            s.push_str(&format!(" {} |", fmt_us(x.median_pct(pick))));
        }
        s.push('\n');
    };
    row("shale", &shale);
    if with_rocks {
        row("rocksdb (db_bench)", &rocks);
        s.push_str("| shale / rocksdb |");
        for i in 0..rounds {
            s.push_str(&format!(" {} |", ratio(shale.ops(i), rocks.ops(i))));
        }
        s.push_str(&format!(
            " {} |",
            ratio(shale.median_ops(), rocks.median_ops())
        ));
        for pick in pcts {
            s.push_str(&format!(
                " {} |",
                ratio(shale.median_pct(pick), rocks.median_pct(pick))
            ));
        }
        s.push('\n');
    }
    let share = |x: &Series| {
        x.median_found_share()
            .map_or("n/a".to_string(), |f| format!("{:.1}%", f * 100.0))
    };
    if shale.median_found_share().is_some() {
        s.push_str(&format!("\nKeys found (median): shale {}", share(&shale)));
        if with_rocks {
            s.push_str(&format!(", rocksdb {}", share(&rocks)));
        }
        s.push_str(" (uniform draws over a random fill find about 1 - 1/e = 63.2%).\n");
    }
    s
}

fn mb_list(v: &[Option<u64>]) -> String {
    v.iter()
        .map(|b| b.map_or("n/a".to_string(), |b| format!("{:.0}", b as f64 / 1e6)))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The whole report: settings, one table per benchmark, CPU checks, disk usage.
pub fn markdown_report(args: &DbBenchArgs, command: &str, r: &RoundResults) -> String {
    let rounds = r.shale.len().max(r.rocksdb.len());
    let mut s = String::from("## shale-bench dbbench: Shale beside RocksDB's db_bench\n\n");
    s.push_str(&format!("Command: `{command}`\n\n"));
    s.push_str(&format!(
        "{} operations per benchmark and thread ({} thread(s)), {}-byte keys, {}-byte values \
         (half compressible); {} rounds, engines alternating (Shale first in odd rounds), each \
         run in a fresh process on a fresh directory. Medians over rounds; latencies in \
         microseconds; ratios are Shale / RocksDB (above 1 is Shale faster for ops/s, slower \
         for latency).\n\n",
        args.num, args.threads, args.key_size, args.value_size, rounds
    ));
    match &r.db_bench_command {
        Some(c) => {
            s.push_str(&format!("RocksDB: `{c}`"));
            if let Some(v) = &r.rocksdb_version {
                s.push_str(&format!(" ({v}"));
                if let Some(c) = &r.rocksdb_compression {
                    s.push_str(&format!(", compression {c}"));
                }
                s.push(')');
            }
            s.push('.');
            for w in &r.rocksdb_warnings {
                s.push_str(&format!(" db_bench says: \"{w}\"."));
            }
            s.push_str("\n\n");
        }
        None => s.push_str("RocksDB: not run (Shale only).\n\n"),
    }
    if !r.shale_settings.is_empty() {
        s.push_str(&format!("Shale: {}\n\n", r.shale_settings));
    }
    for b in BENCHMARKS {
        s.push_str(&benchmark_table(b, rounds, r));
        s.push('\n');
    }
    let cpu = crate::cpucheck::rounds_line(&r.cpu_events_per_sec);
    s.push_str(&format!(
        "CPU check before each round (`sysbench cpu --threads=2`, events/s): {cpu}.\n\n"
    ));
    s.push_str(&format!(
        "Disk after overwrite, MB per round: shale {}",
        mb_list(&r.shale_disk_bytes)
    ));
    if !r.rocksdb.is_empty() {
        s.push_str(&format!("; rocksdb {}", mb_list(&r.rocksdb_disk_bytes)));
    }
    s.push_str(".\n");
    if !r.shale_stats.is_empty() {
        s.push_str("\nShale statistics at the end of each round:\n");
        for (i, line) in r.shale_stats.iter().enumerate() {
            s.push_str(&format!("- round {}: {line}\n", i + 1));
        }
    }
    s.push_str(
        "\nLatency is the time between consecutive operation completions on both sides. db_bench \
         histograms integer microseconds and interpolates inside its buckets; Shale records \
         nanoseconds in an HdrHistogram: below a few microseconds, differences are resolution.\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dbbench::db_bench_output::Percentiles;

    fn phase(b: &str, ops: f64, p999: f64) -> PhaseFigures {
        PhaseFigures {
            benchmark: b.to_string(),
            micros_per_op: 1e6 / ops,
            ops_per_sec: ops,
            seconds: Some(1.0),
            operations: Some(ops as u64),
            found: (b == "readrandom").then_some((632, 1000)),
            percentiles: Some(Percentiles {
                p50: 2.0,
                p75: None,
                p99: 10.0,
                p999,
                p9999: None,
            }),
        }
    }

    fn round(ops: f64, p999: f64) -> Vec<PhaseFigures> {
        BENCHMARKS.iter().map(|b| phase(b, ops, p999)).collect()
    }

    #[test]
    fn phase_lines_look_like_db_bench() {
        assert_eq!(
            phase_line(&phase("readrandom", 200_000.0, 40.0)),
            "readrandom   :       5.000 micros/op 200000 ops/sec 1.000 seconds 200000 operations; \
             p50 2.00 p99 10.00 p99.9 40.00 micros; 632 of 1000 found"
        );
    }

    #[test]
    fn tables_show_rounds_medians_and_ratios() {
        let r = RoundResults {
            cpu_events_per_sec: vec![Some(2000.0), None, Some(1000.0)],
            shale: vec![
                round(150_000.0, 30.0),
                round(100_000.0, 50.0),
                round(200_000.0, 40.0),
            ],
            rocksdb: vec![
                round(100_000.0, 80.0),
                round(100_000.0, 80.0),
                round(100_000.0, 80.0),
            ],
            shale_disk_bytes: vec![Some(150_000_000); 3],
            rocksdb_disk_bytes: vec![Some(140_000_000), None, Some(141_000_000)],
            ..RoundResults::default()
        };
        let md = markdown_report(&DbBenchArgs::default(), "shale-bench dbbench", &r);
        assert!(
            md.contains(
                "| shale | 150,000 | 100,000 | 200,000 | 150,000 | 2.00 | 10.00 | 40.00 |\n\
                 | rocksdb (db_bench) | 100,000 | 100,000 | 100,000 | 100,000 | 2.00 | 10.00 | 80.00 |\n\
                 | shale / rocksdb | 1.50x | 1.00x | 2.00x | 1.50x | 1.00x | 1.00x | 0.50x |\n"
            ),
            "{md}"
        );
        assert_eq!(md.matches("### ").count(), 3);
        assert!(
            md.contains("Keys found (median): shale 63.2%, rocksdb 63.2%"),
            "{md}"
        );
        assert!(
            md.contains("round 1: 2000, round 2: n/a, round 3: 1000"),
            "{md}"
        );
        assert!(
            md.contains("shale 150 / 150 / 150; rocksdb 140 / n/a / 141"),
            "{md}"
        );
    }

    #[test]
    fn a_shale_only_report_has_no_rocksdb_rows() {
        let r = RoundResults {
            shale: vec![round(1000.0, 5.0)],
            ..RoundResults::default()
        };
        let md = markdown_report(&DbBenchArgs::default(), "c", &r);
        assert!(md.contains("RocksDB: not run (Shale only)."));
        assert!(!md.contains("shale / rocksdb"));
        assert!(
            md.contains("| shale | 1,000 | 1,000 | 2.00 | 10.00 | 5.00 |"),
            "{md}"
        );
        assert_eq!(thousands(-1234.4), "-1,234");
    }
}
