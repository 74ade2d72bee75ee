//! The Shale side of `dbbench`: db_bench's keys, values and three benchmarks, run on `shale::Db`.
//!
//! What is mirrored from RocksDB 7.8.3's `db_bench_tool.cc`, so the two sides do the same work:
//! - **Keys** ([`db_bench_key`]): the number `k`, drawn uniformly from `[0, num)`, written as its
//!   low 8 bytes big-endian and padded with ASCII `'0'` to the key size (`GenerateKeyFromInt`
//!   without prefixes).
//! - **Values** ([`ValueGenerator`]): consecutive slices of a 1 MiB buffer made of 100-byte pieces,
//!   each half random bytes repeated twice (`RandomGenerator` with `compression_ratio=0.5`), so
//!   values compress to about half, as db_bench's do.
//! - **Benchmarks**: `fillrandom` is `num` puts of random keys into a fresh database; `readrandom`
//!   `num` gets of random keys on the same open database right after it (warm, as db_bench runs
//!   it: whatever the fill left in memory and in the cache stays), counting the keys found;
//!   `overwrite` `num` puts of random keys over it. With several threads each thread does `num`
//!   operations, as in db_bench. Writes are buffered (WAL on, no sync), db_bench's default.
//! - **Timing**: one clock read per operation; an operation's latency is the time since the
//!   previous one finished (db_bench's `FinishedOps`), so key and value generation are inside it
//!   on both sides. Throughput is all threads' operations over the phase's wall-clock time;
//!   micros/op is the threads' summed time per operation (db_bench's `Report`).
//!
//! Concurrency: the phase's threads share the one `Db` and each owns its generators and histogram;
//! the histograms are merged after the threads are joined.

use crate::dbbench::db_bench_output::{Percentiles, PhaseFigures};
use crate::rng::Rng;

/// Bytes of db_bench's value buffer (`RandomGenerator`: 1 MiB, or the value size if larger).
pub const VALUE_BUFFER_BYTES: usize = 1 << 20;
/// Length of one compressible piece of the value buffer (db_bench's `CompressibleString(.., 100)`).
pub const VALUE_PIECE_LEN: usize = 100;
/// db_bench's `--compression_ratio` default: the random share of every piece.
pub const COMPRESSION_RATIO: f64 = 0.5;
/// Seed of the value buffer (db_bench's `Random rnd(301)`; the bytes differ, the shape does not).
pub const VALUE_SEED: u64 = 301;

/// Writes db_bench's key for the number `k` into `out`: the low `min(key_size, 8)` bytes of `k`
/// big-endian, then ASCII `'0'` up to `key_size`.
pub fn db_bench_key(k: u64, key_size: usize, out: &mut Vec<u8>) {
    out.clear();
    let fill = key_size.min(8);
    out.extend_from_slice(&k.to_be_bytes()[8 - fill..]);
    out.resize(key_size, b'0');
}

/// db_bench's value source: slices taken in turn from a fixed, half-compressible buffer.
#[derive(Debug, Clone)]
pub struct ValueGenerator {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGenerator {
    /// A generator for values of up to `max_len` bytes.
    pub fn new(max_len: usize) -> ValueGenerator {
        let mut rng = Rng::new(VALUE_SEED);
        let target = VALUE_BUFFER_BYTES.max(max_len);
        let raw_len = ((VALUE_PIECE_LEN as f64 * COMPRESSION_RATIO) as usize).max(1);
        let mut data = Vec::with_capacity(target + VALUE_PIECE_LEN);
        while data.len() < target {
            let raw: Vec<u8> = (0..raw_len).map(|_| rng.next_u64() as u8).collect();
            let start = data.len();
            while data.len() - start < VALUE_PIECE_LEN {
                data.extend_from_slice(&raw);
            }
            data.truncate(start + VALUE_PIECE_LEN);
        }
        ValueGenerator { data, pos: 0 }
    }

    /// The next `len` bytes (wrapping to the start of the buffer when they would run past it).
    ///
    /// # Panics
    /// If `len` exceeds the `max_len` given to [`ValueGenerator::new`] and the buffer.
    pub fn next(&mut self, len: usize) -> &[u8] {
        assert!(len <= self.data.len(), "value longer than the value buffer");
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}

/// Latency percentiles (microseconds) of an HdrHistogram recorded in nanoseconds.
pub fn percentiles_of(h: &hdrhistogram::Histogram<u64>) -> Percentiles {
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Percentiles {
        p50: us(0.50),
        p75: Some(us(0.75)),
        p99: us(0.99),
        p999: us(0.999),
        p9999: Some(us(0.9999)),
    }
}

/// Figures of a phase from its threads' `(seconds, operations)` and the phase's wall-clock time.
pub fn phase_figures(
    benchmark: &str,
    thread_secs: &[f64],
    operations: u64,
    wall_secs: f64,
    found: Option<u64>,
    hist: &hdrhistogram::Histogram<u64>,
) -> PhaseFigures {
    let ops = operations.max(1) as f64;
    PhaseFigures {
        benchmark: benchmark.to_string(),
        micros_per_op: thread_secs.iter().sum::<f64>() * 1e6 / ops,
        ops_per_sec: operations as f64 / wall_secs.max(1e-9),
        seconds: Some(wall_secs),
        operations: Some(operations),
        found: found.map(|f| (f, operations)),
        percentiles: (!hist.is_empty()).then(|| percentiles_of(hist)),
    }
}

#[cfg(feature = "shale-engine")]
pub use engine::*;

#[cfg(feature = "shale-engine")]
mod engine {
    use super::{db_bench_key, phase_figures, ValueGenerator};
    use crate::dbbench::db_bench_output::PhaseFigures;
    use crate::dbbench::BENCHMARKS;
    use crate::error::{Error, Result};
    use crate::measure::{HISTOGRAM_SIGFIGS, MAX_LATENCY_NANOS};
    use crate::rng::{mix64, Rng};
    use hdrhistogram::Histogram;
    use std::path::PathBuf;
    use std::sync::Barrier;
    use std::time::Instant;

    /// db_bench's default `--write_buffer_size` (RocksDB's default): 64 MiB.
    pub const DB_BENCH_WRITE_BUFFER_SIZE: usize = 64 << 20;
    /// db_bench's default `--cache_size`: 8 MiB of block cache. Shale uses the same for fairness
    /// (its own default is larger).
    pub const DB_BENCH_BLOCK_CACHE_SIZE: usize = 8 << 20;
    /// `--max_background_jobs=2` of the db_bench command: two background threads.
    pub const DB_BENCH_BACKGROUND_JOBS: usize = 2;

    /// One Shale run of the three benchmarks.
    #[derive(Debug, Clone)]
    pub struct ShaleSpec {
        /// Operations per thread per benchmark, and the key space `[0, num)`.
        pub num: u64,
        /// Value bytes.
        pub value_size: usize,
        /// Key bytes.
        pub key_size: usize,
        /// Client threads.
        pub threads: usize,
        /// The database directory; removed first, so the fill starts from nothing.
        pub dir: PathBuf,
        /// Seed of the key streams.
        pub seed: u64,
    }

    /// What a Shale run produced.
    #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
    pub struct ShaleRun {
        /// `fillrandom`, `readrandom`, `overwrite`.
        pub phases: Vec<PhaseFigures>,
        /// Bytes under the database directory after close.
        pub disk_bytes: u64,
        /// A one-line summary of the engine's statistics at the end.
        pub stats: String,
    }

    /// Shale's defaults, with what the db_bench command sets or defaults to where Shale's default
    /// differs: write buffer, block cache, background jobs.
    pub fn shale_options() -> shale::Options {
        shale::Options {
            write_buffer_size: DB_BENCH_WRITE_BUFFER_SIZE,
            block_cache_size: DB_BENCH_BLOCK_CACHE_SIZE,
            background_threads: DB_BENCH_BACKGROUND_JOBS,
            ..shale::Options::default()
        }
    }

    /// [`shale_options`] in words, with the defaults that differ from db_bench's.
    pub fn settings_note() -> String {
        let o = shale_options();
        format!(
            "`shale::Options::default()` with write_buffer_size {} MiB (db_bench's default), \
             block_cache_size {} MiB (db_bench's default --cache_size; the same for fairness) and \
             background_threads {} (--max_background_jobs={}). Left at Shale's defaults where \
             db_bench's differ: bloom filter {} bits/key (db_bench: none, --bloom_bits=-1), \
             compression {:?} from level {} (db_bench: Snappy on every level).",
            o.write_buffer_size >> 20,
            o.block_cache_size >> 20,
            o.background_threads,
            DB_BENCH_BACKGROUND_JOBS,
            o.bloom_bits_per_key,
            o.compression,
            o.compression_start_level
        )
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Op {
        Put,
        Get,
    }

    struct ThreadOutcome {
        hist: Histogram<u64>,
        start: Instant,
        finish: Instant,
        found: u64,
    }

    fn shale_err(what: &'static str) -> impl Fn(shale::Error) -> Error {
        move |e| Error::backend(format!("shale {what}: {e}"))
    }

    fn one_thread(
        db: &shale::Db,
        spec: &ShaleSpec,
        op: Op,
        seed: u64,
        barrier: &Barrier,
    ) -> Result<ThreadOutcome> {
        let mut rng = Rng::new(seed);
        let mut values = ValueGenerator::new(spec.value_size);
        let mut key = Vec::with_capacity(spec.key_size);
        let mut hist = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_NANOS, HISTOGRAM_SIGFIGS)
            .expect("valid histogram bounds");
        let mut found = 0;
        barrier.wait();
        let start = Instant::now();
        let mut last = start;
        for _ in 0..spec.num {
            db_bench_key(rng.below(spec.num), spec.key_size, &mut key);
            match op {
                Op::Put => db
                    .put(key.as_slice(), values.next(spec.value_size))
                    .map_err(shale_err("put"))?,
                Op::Get => {
                    if db.get(key.as_slice()).map_err(shale_err("get"))?.is_some() {
                        found += 1;
                    }
                }
            }
            let now = Instant::now();
            let nanos = u64::try_from((now - last).as_nanos()).unwrap_or(u64::MAX);
            hist.saturating_record(nanos.clamp(1, MAX_LATENCY_NANOS));
            last = now;
        }
        Ok(ThreadOutcome {
            hist,
            start,
            finish: last,
            found,
        })
    }

    fn run_phase(db: &shale::Db, spec: &ShaleSpec, index: usize) -> Result<PhaseFigures> {
        let op = if BENCHMARKS[index] == "readrandom" {
            Op::Get
        } else {
            Op::Put
        };
        let barrier = Barrier::new(spec.threads);
        let outcomes: Vec<Result<ThreadOutcome>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..spec.threads)
                .map(|t| {
                    let seed = mix64(spec.seed ^ mix64(((index as u64) << 32) | t as u64));
                    let barrier = &barrier;
                    s.spawn(move || one_thread(db, spec, op, seed, barrier))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a benchmark thread panicked"))
                .collect()
        });
        let outcomes = outcomes.into_iter().collect::<Result<Vec<_>>>()?;
        let mut hist = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_NANOS, HISTOGRAM_SIGFIGS)
            .expect("valid histogram bounds");
        for o in &outcomes {
            hist.add(&o.hist).expect("histograms share bounds");
        }
        let start = outcomes
            .iter()
            .map(|o| o.start)
            .min()
            .expect("threads >= 1");
        let finish = outcomes
            .iter()
            .map(|o| o.finish)
            .max()
            .expect("threads >= 1");
        let thread_secs: Vec<f64> = outcomes
            .iter()
            .map(|o| (o.finish - o.start).as_secs_f64())
            .collect();
        let found = (op == Op::Get).then(|| outcomes.iter().map(|o| o.found).sum());
        Ok(phase_figures(
            BENCHMARKS[index],
            &thread_secs,
            spec.num * spec.threads as u64,
            (finish - start).as_secs_f64(),
            found,
            &hist,
        ))
    }

    fn stats_line(s: &shale::Stats) -> String {
        let mb = |b: u64| b as f64 / 1e6;
        format!(
            "flush write {:.0} MB, compaction read/write {:.0}/{:.0} MB, stall {} ms, files per level {:?}",
            mb(s.flush_bytes_written),
            mb(s.compaction_bytes_read),
            mb(s.compaction_bytes_written),
            s.stall_micros / 1000,
            s.files_per_level
        )
    }

    /// Runs fillrandom, readrandom and overwrite on a fresh database at `spec.dir`, calling
    /// `on_phase` after each, then closes the database and removes the directory.
    ///
    /// # Errors
    /// `Io` when the directory cannot be cleared, `Backend` when the engine fails.
    pub fn run_shale(
        spec: &ShaleSpec,
        on_phase: &mut dyn FnMut(&PhaseFigures),
    ) -> Result<ShaleRun> {
        if spec.dir.exists() {
            std::fs::remove_dir_all(&spec.dir)
                .map_err(|e| Error::io(format!("cannot remove {}", spec.dir.display()), e))?;
        }
        let db = shale::Db::open(&spec.dir, shale_options()).map_err(|e| {
            Error::backend(format!("cannot open shale at {}: {e}", spec.dir.display()))
        })?;
        let mut phases = Vec::new();
        for index in 0..BENCHMARKS.len() {
            let p = run_phase(&db, spec, index)?;
            on_phase(&p);
            phases.push(p);
        }
        let stats = stats_line(&db.stats());
        db.close().map_err(shale_err("close"))?;
        let disk_bytes = crate::backend::dir_size(&spec.dir)?;
        std::fs::remove_dir_all(&spec.dir)
            .map_err(|e| Error::io(format!("cannot remove {}", spec.dir.display()), e))?;
        Ok(ShaleRun {
            phases,
            disk_bytes,
            stats,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_number_big_endian_then_ascii_zeros() {
        let mut k = Vec::new();
        db_bench_key(0x0102, 16, &mut k);
        assert_eq!(k, b"\0\0\0\0\0\0\x01\x0200000000");
        db_bench_key(0x0102_0304_0506_0708, 4, &mut k);
        assert_eq!(k, [5, 6, 7, 8]);
        db_bench_key(7, 8, &mut k);
        assert_eq!(k, [0, 0, 0, 0, 0, 0, 0, 7]);
    }

    #[test]
    fn keys_sort_in_numeric_order() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        db_bench_key(255, 16, &mut a);
        db_bench_key(256, 16, &mut b);
        assert!(a < b);
    }

    #[test]
    fn values_are_half_repeated_and_walk_the_buffer() {
        let mut g = ValueGenerator::new(100);
        let v = g.next(100).to_vec();
        assert_eq!(v.len(), 100);
        assert_eq!(
            v[..50],
            v[50..],
            "each 100-byte piece is a 50-byte string twice"
        );
        assert_ne!(g.next(100), &v[..], "the next value is the next piece");
        // Wrapping: after the whole buffer the first piece comes back.
        let mut g = ValueGenerator::new(100);
        let first = g.next(100).to_vec();
        for _ in 1..VALUE_BUFFER_BYTES.div_ceil(VALUE_PIECE_LEN) {
            g.next(100);
        }
        assert_eq!(g.next(100), &first[..]);
        // A value larger than the buffer default still fits.
        let mut big = ValueGenerator::new(2 * VALUE_BUFFER_BYTES);
        assert_eq!(
            big.next(2 * VALUE_BUFFER_BYTES).len(),
            2 * VALUE_BUFFER_BYTES
        );
    }

    #[test]
    fn figures_follow_db_bench_accounting() {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3).unwrap();
        for ns in 1..=1000u64 {
            h.record(ns * 1000).unwrap();
        }
        // Two threads of 1 s each, 2000 operations in 1.25 s of wall-clock time.
        let p = phase_figures("readrandom", &[1.0, 1.0], 2000, 1.25, Some(1264), &h);
        assert_eq!(p.ops_per_sec, 1600.0);
        assert_eq!(p.micros_per_op, 1000.0);
        assert_eq!(p.found, Some((1264, 2000)));
        let pc = p.percentiles.unwrap();
        assert!((pc.p50 - 500.0).abs() < 1.0, "{pc:?}");
        assert!((pc.p999 - 999.0).abs() < 1.0, "{pc:?}");
    }
}
