//! `gen-trace -benchmarks=mixgraph ...`: a Social Graph trace from db_bench's own flags.
//!
//! The AegonKV evaluation made its Social Graph trace with its own db_bench
//! (`-benchmarks=fillrandom,mixgraph ... -save_keys=true -path_save_keys=FILE`) and replayed the
//! file with `filetype=meta`. This writes the same kind of file from the same command line,
//! without a database: each of db_bench's mixgraph operations ([`MixGraphModel`]) becomes a line
//! `key,op,size`: the key number, the operation (0 get, 1 put, 2 seek) and, for a put, the value
//! size (for a seek the scan length db_bench drew, which the fork's replay does not use; 0 for a
//! get).
//!
//! Flags that shape the trace: `num`, `reads` (the number of lines; `num` when negative or absent,
//! as in db_bench), `seed`, `threads`, every `keyrange_*`, `key_dist_*`, `value_theta/k/sigma`,
//! `iter_*`, `mix_*` and `read_random_exp_range` flag, and the output (`path_save_keys`, or `-o`).
//! Flags that configure db_bench's database or run (`db`, `cache_size`, `write_buffer_size`,
//! `use_direct_reads`, `sine_*`, `value_size`, ...) are accepted and listed as ignored; any other
//! name is an error, so a misspelled model flag cannot silently change the trace. `benchmarks` must
//! name `mixgraph`; `fillrandom` may precede it (the load is `shale-bench -load`'s).
//!
//! With `threads=N`, thread `t`'s generator is seeded with `seed + t` (see
//! [`crate::workload::mixgraph`]) and the lines take the threads in turn (db_bench's interleaving
//! depends on timing), `reads` lines in all.

use crate::cli::GenTraceArgs;
use crate::error::{Error, Result};
use crate::generator::Mt64;
use crate::props::{closest_names, Origin, Properties};
use crate::workload::mixgraph::{base_seed, MixGraphModel, MixOp, KEY_RANGES_UNUSED_NOTE};
use std::io::Write;

/// Flags that shape the trace.
pub const TRACE_FLAGS: &[&str] = &[
    "benchmarks",
    "num",
    "reads",
    "seed",
    "threads",
    "key_size",
    "keyrange_num",
    "keyrange_dist_a",
    "keyrange_dist_b",
    "keyrange_dist_c",
    "keyrange_dist_d",
    "key_dist_a",
    "key_dist_b",
    "value_theta",
    "value_k",
    "value_sigma",
    "iter_theta",
    "iter_k",
    "iter_sigma",
    "mix_get_ratio",
    "mix_put_ratio",
    "mix_seek_ratio",
    "mix_max_value_size",
    "mix_max_scan_len",
    "read_random_exp_range",
    "save_keys",
    "path_save_keys",
];

/// db_bench flags that configure its database or its pacing, not the operations it draws.
pub const IGNORED_FLAGS: &[&str] = &[
    "db",
    "use_existing_db",
    "value_size",
    "use_direct_io_for_flush_and_compaction",
    "use_direct_reads",
    "cache_size",
    "perf_level",
    "statistics",
    "histogram",
    "write_buffer_size",
    "max_write_buffer_number",
    "target_file_size_base",
    "target_file_size_multiplier",
    "max_bytes_for_level_base",
    "max_bytes_for_level_multiplier",
    "max_background_jobs",
    "max_background_compactions",
    "max_background_flushes",
    "compression_type",
    "bloom_bits",
    "disable_wal",
    "sync",
    "duration",
    "stats_interval_seconds",
    "report_interval_seconds",
    "report_file",
    "sine_mix_rate",
    "sine_mix_rate_interval_milliseconds",
    "sine_mix_rate_noise",
    "sine_a",
    "sine_b",
    "sine_c",
    "sine_d",
];

/// What a generated trace holds, db_bench's way of summing up a mixgraph run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TraceSummary {
    /// Get lines.
    pub gets: u64,
    /// Put lines.
    pub puts: u64,
    /// Seek lines.
    pub seeks: u64,
    /// Sum of the puts' value sizes.
    pub value_bytes: i64,
    /// Sum of the seeks' scan lengths (those above zero).
    pub scan_records: i64,
}

impl TraceSummary {
    /// db_bench's closing line for the same operations, without the parts that depend on a
    /// database (found keys, scanned records): `( Gets:N Puts:N Seek:N, avg size: V value)`.
    pub fn db_bench_line(&self) -> String {
        format!(
            "( Gets:{} Puts:{} Seek:{}, avg size: {:.1} value)",
            self.gets,
            self.puts,
            self.seeks,
            self.value_bytes as f64 / self.puts as f64
        )
    }
}

/// A parsed `gen-trace -benchmarks=mixgraph` command.
pub struct MixGraphTrace {
    /// The model.
    pub model: MixGraphModel,
    /// Lines to write.
    pub reads: u64,
    /// Seed of thread 0.
    pub seed: u64,
    /// Generator streams taken in turn.
    pub threads: u64,
    /// Where to write (`path_save_keys`).
    pub path: Option<std::path::PathBuf>,
    /// Flags accepted but without effect on the trace.
    pub ignored: Vec<String>,
    /// The key ranges are set but unused (see [`KEY_RANGES_UNUSED_NOTE`]).
    pub key_ranges_unused: bool,
}

impl MixGraphTrace {
    /// Reads db_bench's flags.
    ///
    /// # Errors
    /// `Usage` for unknown flags or a benchmark list without mixgraph, `Property` for bad values.
    pub fn from_settings(settings: &[(String, String)]) -> Result<MixGraphTrace> {
        let mut props = Properties::new();
        let mut ignored = Vec::new();
        for (k, v) in settings {
            if TRACE_FLAGS.contains(&k.as_str()) {
                props.set(k.clone(), v.clone(), Origin::CommandLine);
            } else if IGNORED_FLAGS.contains(&k.as_str()) {
                ignored.push(k.clone());
            } else {
                let known: Vec<&str> = TRACE_FLAGS.iter().chain(IGNORED_FLAGS).copied().collect();
                let close = closest_names(k, &known, 2);
                let hint = if close.is_empty() {
                    String::new()
                } else {
                    format!("; did you mean {}?", close.join(" or "))
                };
                return Err(Error::usage(format!(
                    "gen-trace: -{k} is not a db_bench flag that gen-trace knows{hint}"
                )));
            }
        }
        let benchmarks = props.get_str("benchmarks", "");
        let names: Vec<&str> = benchmarks.split(',').map(str::trim).collect();
        if !names.contains(&"mixgraph")
            || names
                .iter()
                .any(|b| !matches!(*b, "mixgraph" | "fillrandom" | ""))
        {
            return Err(Error::usage(format!(
                "gen-trace: -benchmarks={benchmarks}: only mixgraph (optionally after fillrandom) makes a trace"
            )));
        }
        let num = props.get_u64_in("num", 1_000_000, 1, i64::MAX as u64)?;
        let reads = match props.get_i64("reads", -1)? {
            r if r < 0 => num,
            r => r as u64,
        };
        let path = props
            .get("path_save_keys")
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from);
        Ok(MixGraphTrace {
            key_ranges_unused: MixGraphModel::key_ranges_unused(&props),
            model: MixGraphModel::new(&props, num)?,
            reads,
            seed: base_seed(&props)?,
            threads: props.get_u64_in("threads", 1, 1, 1 << 16)?,
            path,
            ignored,
        })
    }

    /// Writes the trace to `out`, one `key,op,size` line per operation.
    ///
    /// # Errors
    /// `Io` when writing fails.
    pub fn write(&self, out: &mut dyn Write) -> Result<TraceSummary> {
        let mut streams: Vec<Mt64> = (0..self.threads)
            .map(|t| Mt64::new(self.seed.wrapping_add(t)))
            .collect();
        let mut summary = TraceSummary::default();
        let io = |e| Error::io("i/o error", e);
        for i in 0..self.reads {
            let d = self.model.draw(&mut streams[(i % self.threads) as usize]);
            let size = match d.op {
                MixOp::Get => {
                    summary.gets += 1;
                    0
                }
                MixOp::Put => {
                    summary.puts += 1;
                    summary.value_bytes += d.value_size;
                    d.value_size
                }
                MixOp::Seek => {
                    summary.seeks += 1;
                    summary.scan_records += d.scan_len.max(0);
                    d.scan_len
                }
            };
            writeln!(out, "{},{},{}", d.key, d.op.code(), size).map_err(io)?;
        }
        Ok(summary)
    }
}

/// Runs `gen-trace -benchmarks=...`.
///
/// # Errors
/// `Usage`/`Property` for bad flags, `Io` when the output cannot be written.
pub fn run(args: &GenTraceArgs) -> Result<()> {
    let trace = MixGraphTrace::from_settings(&args.settings)?;
    if !trace.ignored.is_empty() {
        eprintln!(
            "gen-trace: ignored (they configure db_bench's database or pacing, not the trace): {}",
            trace.ignored.join(", ")
        );
    }
    if trace.key_ranges_unused {
        eprintln!("gen-trace: note: {KEY_RANGES_UNUSED_NOTE}");
    }
    let path = args.out.as_deref().or(trace.path.as_deref());
    let mut summary = TraceSummary::default();
    super::write_lines(path, |out| {
        summary = trace.write(out)?;
        Ok(())
    })?;
    eprintln!(
        "gen-trace: {} lines to {} {}",
        trace.reads,
        path.map_or("stdout".into(), |p| p.display().to_string()),
        summary.db_bench_line()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(s: &str) -> Vec<(String, String)> {
        s.split_whitespace()
            .map(|kv| {
                let (k, v) = kv.trim_start_matches('-').split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    #[test]
    fn the_evaluations_db_bench_command_is_accepted() {
        let t = MixGraphTrace::from_settings(&settings(
            "-benchmarks=fillrandom,mixgraph -use_direct_io_for_flush_and_compaction=true \
             -use_direct_reads=true -cache_size=268435456 -keyrange_dist_a=14.18 \
             -keyrange_dist_b=-2.917 -keyrange_dist_c=0.0164 -keyrange_dist_d=-0.08082 \
             -keyrange_num=30 -value_k=0.923 -value_sigma=226.409 -iter_k=2.517 -iter_sigma=14.236 \
             -mix_get_ratio=0.55 -mix_put_ratio=0.44 -mix_seek_ratio=0.01 \
             -sine_mix_rate_interval_milliseconds=5000 -sine_a=1000 -sine_b=0.000073 -sine_d=80000 \
             -perf_level=2 -reads=4200 -num=50000 -key_size=48 -value_size=256 -threads=16 \
             -write_buffer_size=67108864 -max_write_buffer_number=2 -target_file_size_base=8388608 \
             -max_bytes_for_level_base=16777216 -max_bytes_for_level_multiplier=3 -db=./db \
             -save_keys=true -path_save_keys=trans",
        ))
        .unwrap();
        assert_eq!((t.reads, t.threads, t.seed), (4200, 16, 1000));
        assert!(t.key_ranges_unused);
        assert_eq!(t.path.as_deref(), Some(std::path::Path::new("trans")));
        assert!(t.ignored.contains(&"cache_size".to_string()));
        let mut out = Vec::new();
        let s = t.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 4200);
        assert_eq!(s.gets + s.puts + s.seeks, 4200);
        for line in text.lines() {
            let op = crate::workload::fromfile::parse_meta_line(line.as_bytes(), "t", 1).unwrap();
            assert!(matches!(op.key, crate::workload::fromfile::FileKey::Number(k) if k < 50_000));
        }
        // About 55% gets, 44% puts, 1% seeks.
        assert!((s.puts as f64 / 4200.0 - 0.44).abs() < 0.03, "{s:?}");
    }

    #[test]
    fn a_misspelled_flag_is_an_error_and_mixgraph_is_required() {
        let e = MixGraphTrace::from_settings(&settings("-benchmarks=mixgraph -mix_put_ratoi=0.4"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("did you mean mix_put_ratio"), "{e}");
        let e = MixGraphTrace::from_settings(&settings("-benchmarks=readrandom"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("only mixgraph"), "{e}");
    }
}
