//! Latency measurement, as YCSB-cpp's HdrHistogram measurements do it, without locks.
//!
//! Every measurement lands in one of twelve series, in YCSB-cpp's order: `INSERT`, `READ`,
//! `UPDATE`, `SCAN`, `READMODIFYWRITE`, `DELETE`, then the same six with `-FAILED` for operations
//! that did not succeed (YCSB-cpp keeps failures in series of their own, so a miss never pollutes
//! the latencies of hits).
//!
//! Concurrency contract: each client thread owns a [`Recorder`] (not `Clone`, recording takes
//! `&mut self`), so every counter has exactly one writer and is updated with a relaxed load and
//! store, no read-modify-write and no lock. The status thread reads the same counters with relaxed
//! loads at any moment ([`Measurements::snapshot`]): a snapshot taken while operations finish may
//! see a bucket count a few operations ahead of another, never a torn value, and a client thread
//! stuck in a long operation cannot delay a status line. The only lock is the list of recorders,
//! taken when a thread registers and for the moment a snapshot copies the list.
//!
//! Latencies are bucketed with HdrHistogram's layout at [`HISTOGRAM_SIGFIGS`] significant digits
//! from one nanosecond to [`MAX_LATENCY_NANOS`] (larger values are clamped to it); a snapshot turns
//! the buckets into an [`hdrhistogram::Histogram`] of the same layout, so maxima, means and
//! percentiles are computed exactly as HdrHistogram computes them, and printed in microseconds as
//! YCSB-cpp prints them.

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Largest latency the histograms resolve: one hour.
pub const MAX_LATENCY_NANOS: u64 = 3_600_000_000_000;
/// Significant decimal digits kept by the histograms.
pub const HISTOGRAM_SIGFIGS: u8 = 3;
/// Percentiles printed in status lines and reports, in YCSB-cpp's order.
pub const REPORTED_PERCENTILES: [f64; 4] = [90.0, 99.0, 99.9, 99.99];

/// Values below this are counted one by one; above it, each power of two is split into
/// [`HALF_SUB_BUCKETS`] buckets (HdrHistogram's `sub_bucket_count` at three significant digits).
const SUB_BUCKETS: u64 = 2048;
/// Buckets per power of two above [`SUB_BUCKETS`].
const HALF_SUB_BUCKETS: u64 = SUB_BUCKETS / 2;
/// log2 of [`HALF_SUB_BUCKETS`].
const HALF_SUB_BUCKET_BITS: u32 = 10;

/// The bucket of a latency of `nanos` (at least 1, at most [`MAX_LATENCY_NANOS`]).
fn bucket_index(nanos: u64) -> usize {
    if nanos < SUB_BUCKETS {
        return nanos as usize;
    }
    let shift = (63 - nanos.leading_zeros()) - HALF_SUB_BUCKET_BITS;
    let mantissa = nanos >> shift;
    (SUB_BUCKETS + u64::from(shift - 1) * HALF_SUB_BUCKETS + (mantissa - HALF_SUB_BUCKETS)) as usize
}

/// The smallest latency that falls in bucket `index`.
fn bucket_lowest(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return index;
    }
    let above = index - SUB_BUCKETS;
    let shift = above / HALF_SUB_BUCKETS + 1;
    (HALF_SUB_BUCKETS + above % HALF_SUB_BUCKETS) << shift
}

/// Buckets per series.
fn bucket_count() -> usize {
    bucket_index(MAX_LATENCY_NANOS) + 1
}

/// The operation types, in YCSB-cpp's order (which is the order of the status line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// A new record.
    Insert,
    /// A point read.
    Read,
    /// An overwrite of (part of) an existing record.
    Update,
    /// A range read of up to N records.
    Scan,
    /// A read followed by an update of the same record, timed as one (YCSB-cpp's own workload F
    /// times the read and the update apart instead: see the core workload).
    ReadModifyWrite,
    /// A delete.
    Delete,
}

impl OpKind {
    /// All kinds in report order.
    pub const ALL: [OpKind; 6] = [
        OpKind::Insert,
        OpKind::Read,
        OpKind::Update,
        OpKind::Scan,
        OpKind::ReadModifyWrite,
        OpKind::Delete,
    ];

    /// YCSB-cpp's name (`READ`, `READMODIFYWRITE`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Insert => "INSERT",
            OpKind::Read => "READ",
            OpKind::Update => "UPDATE",
            OpKind::Scan => "SCAN",
            OpKind::ReadModifyWrite => "READMODIFYWRITE",
            OpKind::Delete => "DELETE",
        }
    }

    /// YCSB-cpp's name of the series of failed operations (`READ-FAILED`, ...).
    pub fn failed_name(self) -> &'static str {
        match self {
            OpKind::Insert => "INSERT-FAILED",
            OpKind::Read => "READ-FAILED",
            OpKind::Update => "UPDATE-FAILED",
            OpKind::Scan => "SCAN-FAILED",
            OpKind::ReadModifyWrite => "READMODIFYWRITE-FAILED",
            OpKind::Delete => "DELETE-FAILED",
        }
    }

    /// Parses a YCSB-cpp name of a successful series.
    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Number of series: every kind, successful and failed.
const SERIES: usize = 2 * OpKind::ALL.len();

/// The series of `kind` when it succeeded (`ok`) or failed.
fn series(kind: OpKind, ok: bool) -> usize {
    kind as usize + if ok { 0 } else { OpKind::ALL.len() }
}

fn series_name(index: usize) -> &'static str {
    let kind = OpKind::ALL[index % OpKind::ALL.len()];
    if index < OpKind::ALL.len() {
        kind.name()
    } else {
        kind.failed_name()
    }
}

/// Adds `n` to a counter that only its owner writes (see the module's concurrency contract).
#[inline]
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// One series of one thread.
struct SeriesCounts {
    count: AtomicU64,
    buckets: Box<[AtomicU64]>,
}

impl SeriesCounts {
    fn new() -> SeriesCounts {
        SeriesCounts {
            count: AtomicU64::new(0),
            buckets: (0..bucket_count()).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// What a transaction (one step of a client) came to. YCSB-cpp counts these for its final lines,
/// apart from the measured operations (a read-modify-write is one transaction and two
/// measurements).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// It failed (an error, a missing record, a value that did not verify).
    Failed,
    /// It was not executed: an operation of a trace that the replay does not perform.
    Skipped,
}

/// The counters of one client thread.
#[derive(Default)]
struct ThreadCounts {
    series: [OnceLock<SeriesCounts>; SERIES],
    succeeded: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
    verify_failures: AtomicU64,
    misses: AtomicU64,
    input_errors: AtomicU64,
}

/// One client thread's measurements; the only writer of its counters.
pub struct Recorder {
    counts: Arc<ThreadCounts>,
}

impl Recorder {
    /// Records one finished operation of `kind` that took `latency`, in the `-FAILED` series when
    /// `ok` is false.
    pub fn record(&mut self, kind: OpKind, latency: Duration, ok: bool) {
        let nanos = u64::try_from(latency.as_nanos())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_LATENCY_NANOS);
        let s = self.counts.series[series(kind, ok)].get_or_init(SeriesCounts::new);
        bump(&s.buckets[bucket_index(nanos)], 1);
        bump(&s.count, 1);
    }

    /// Counts the outcome of one transaction.
    pub fn record_outcome(&mut self, outcome: Outcome) {
        let c = &self.counts;
        bump(
            match outcome {
                Outcome::Ok => &c.succeeded,
                Outcome::Failed => &c.failed,
                Outcome::Skipped => &c.skipped,
            },
            1,
        );
    }

    /// Counts a value that failed verification (the operation is also recorded as failed).
    pub fn record_verify_failure(&mut self) {
        bump(&self.counts.verify_failures, 1);
    }

    /// Counts a read that found nothing where finding nothing is normal (a cache trace); the read
    /// itself is recorded as failed, as YCSB-cpp records it.
    pub fn record_miss(&mut self) {
        bump(&self.counts.misses, 1);
    }

    /// Counts a malformed input (a bad trace line) that ended this thread's work.
    pub fn record_input_error(&mut self) {
        bump(&self.counts.input_errors, 1);
    }
}

/// All client threads' recorders for one phase.
#[derive(Default)]
pub struct Measurements {
    threads: Mutex<Vec<Arc<ThreadCounts>>>,
}

impl Measurements {
    /// An empty set.
    pub fn new() -> Measurements {
        Measurements::default()
    }

    /// A new recorder for one client thread, registered for snapshots.
    pub fn recorder(&self) -> Recorder {
        let counts = Arc::new(ThreadCounts::default());
        self.threads.lock().push(Arc::clone(&counts));
        Recorder { counts }
    }

    fn threads(&self) -> Vec<Arc<ThreadCounts>> {
        self.threads.lock().clone()
    }

    /// Operations measured so far, all threads and series (cheap: no bucket is read).
    pub fn total_count(&self) -> u64 {
        self.threads()
            .iter()
            .flat_map(|t| t.series.iter().flat_map(OnceLock::get))
            .map(|s| s.count.load(Ordering::Relaxed))
            .sum()
    }

    /// Every thread's measurements so far, merged.
    pub fn snapshot(&self) -> Snapshot {
        let threads = self.threads();
        let load = |f: fn(&ThreadCounts) -> &AtomicU64| -> u64 {
            threads.iter().map(|t| f(t).load(Ordering::Relaxed)).sum()
        };
        let mut snap = Snapshot {
            succeeded: load(|t| &t.succeeded),
            failed: load(|t| &t.failed),
            skipped: load(|t| &t.skipped),
            verify_failures: load(|t| &t.verify_failures),
            misses: load(|t| &t.misses),
            input_errors: load(|t| &t.input_errors),
            ..Snapshot::default()
        };
        let mut merged = vec![0u64; bucket_count()];
        for (i, slot) in snap.histograms.iter_mut().enumerate() {
            let mut any = false;
            merged.fill(0);
            for s in threads.iter().filter_map(|t| t.series[i].get()) {
                any = true;
                for (m, b) in merged.iter_mut().zip(s.buckets.iter()) {
                    *m += b.load(Ordering::Relaxed);
                }
            }
            if !any {
                continue;
            }
            let mut h = new_histogram();
            for (index, &n) in merged.iter().enumerate().filter(|(_, n)| **n > 0) {
                h.record_n(bucket_lowest(index).max(1), n)
                    .expect("bucket values lie within the histogram's bounds");
            }
            *slot = Some(h);
        }
        snap
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NANOS, HISTOGRAM_SIGFIGS)
        .expect("constant histogram bounds are valid")
}

/// Merged measurements at one moment.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    histograms: [Option<Histogram<u64>>; SERIES],
    succeeded: u64,
    failed: u64,
    skipped: u64,
    verify_failures: u64,
    misses: u64,
    input_errors: u64,
}

/// Summary of one series, latencies in microseconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpSummary {
    /// Series name (`READ`, `READ-FAILED`, ...).
    pub op: String,
    /// Operations measured.
    pub count: u64,
    /// Failed operations among them (all of them in a `-FAILED` series, none otherwise).
    pub failed: u64,
    /// Largest latency.
    pub max_us: f64,
    /// Smallest latency.
    pub min_us: f64,
    /// Mean latency.
    pub avg_us: f64,
    /// Median latency.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// 99.99th percentile.
    pub p9999_us: f64,
}

impl Snapshot {
    /// Operations measured, all series.
    pub fn total_count(&self) -> u64 {
        self.histograms.iter().flatten().map(Histogram::len).sum()
    }

    /// Operations measured in the `-FAILED` series.
    pub fn failed_measurements(&self) -> u64 {
        self.histograms[OpKind::ALL.len()..]
            .iter()
            .flatten()
            .map(Histogram::len)
            .sum()
    }

    /// Transactions that succeeded.
    pub fn succeeded(&self) -> u64 {
        self.succeeded
    }

    /// Transactions that failed.
    pub fn failed(&self) -> u64 {
        self.failed
    }

    /// Transactions skipped (trace operations the replay does not perform).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Values that failed verification.
    pub fn verify_failures(&self) -> u64 {
        self.verify_failures
    }

    /// Reads that found nothing where that is normal (trace replay).
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// Malformed inputs met (trace lines).
    pub fn input_errors(&self) -> u64 {
        self.input_errors
    }

    /// Successful operations measured of `kind`.
    pub fn count(&self, kind: OpKind) -> u64 {
        self.histograms[series(kind, true)]
            .as_ref()
            .map_or(0, Histogram::len)
    }

    /// Failed operations measured of `kind`.
    pub fn failed_count(&self, kind: OpKind) -> u64 {
        self.histograms[series(kind, false)]
            .as_ref()
            .map_or(0, Histogram::len)
    }

    /// Per-series summaries for every series that has measurements, in YCSB-cpp's order.
    pub fn summaries(&self) -> Vec<OpSummary> {
        self.histograms
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                let h = h.as_ref().filter(|h| !h.is_empty())?;
                let us = |nanos: u64| nanos as f64 / 1000.0;
                Some(OpSummary {
                    op: series_name(i).to_string(),
                    count: h.len(),
                    failed: if i < OpKind::ALL.len() { 0 } else { h.len() },
                    max_us: us(h.max()),
                    min_us: us(h.min()),
                    avg_us: h.mean() / 1000.0,
                    p50_us: us(h.value_at_quantile(0.5)),
                    p90_us: us(h.value_at_percentile(REPORTED_PERCENTILES[0])),
                    p99_us: us(h.value_at_percentile(REPORTED_PERCENTILES[1])),
                    p999_us: us(h.value_at_percentile(REPORTED_PERCENTILES[2])),
                    p9999_us: us(h.value_at_percentile(REPORTED_PERCENTILES[3])),
                })
            })
            .collect()
    }

    /// The latency (µs) at `percentile` of the successful operations of `kind`, if any ran.
    pub fn percentile_us(&self, kind: OpKind, percentile: f64) -> Option<f64> {
        let h = self.histograms[series(kind, true)]
            .as_ref()
            .filter(|h| !h.is_empty())?;
        Some(h.value_at_percentile(percentile) as f64 / 1000.0)
    }

    /// The part of YCSB-cpp's status line after `sec: `:
    /// `N operations; [READ: Count=.. Max=.. Min=.. Avg=.. 90=.. 99=.. 99.9=.. 99.99=..] ...`.
    pub fn status_message(&self) -> String {
        format_status_message(self.total_count(), &self.summaries())
    }
}

/// Formats the body of a status line from per-series summaries (see [`Snapshot::status_message`]).
pub fn format_status_message(total: u64, summaries: &[OpSummary]) -> String {
    use std::fmt::Write;
    let mut s = format!("{total} operations;");
    for o in summaries {
        let _ = write!(
            s,
            " [{}: Count={} Max={:.2} Min={:.2} Avg={:.2} 90={:.2} 99={:.2} 99.9={:.2} 99.99={:.2}]",
            o.op, o.count, o.max_us, o.min_us, o.avg_us, o.p90_us, o.p99_us, o.p999_us, o.p9999_us
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_hdrhistograms_layout_at_three_digits() {
        let h = new_histogram();
        for v in [
            1u64,
            2047,
            2048,
            2049,
            4095,
            4096,
            10_000,
            123_456_789,
            MAX_LATENCY_NANOS,
        ] {
            let i = bucket_index(v);
            let lo = bucket_lowest(i);
            assert!(lo <= v, "{v}: bucket starts at {lo}");
            assert_eq!(lo, h.lowest_equivalent(v), "{v}");
            assert_eq!(bucket_index(lo), i);
            if i + 1 < bucket_count() {
                assert_eq!(bucket_lowest(i + 1), h.next_non_equivalent(v), "{v}");
            }
        }
        assert_eq!(bucket_count(), bucket_index(MAX_LATENCY_NANOS) + 1);
    }

    #[test]
    fn status_message_has_ycsb_cpp_shape_with_failed_series() {
        let m = Measurements::new();
        let mut r = m.recorder();
        r.record(OpKind::Read, Duration::from_micros(10), true);
        r.record(OpKind::Read, Duration::from_micros(20), true);
        r.record(OpKind::Update, Duration::from_micros(40), false);
        r.record(OpKind::Insert, Duration::from_micros(5), true);
        let snap = m.snapshot();
        assert_eq!(snap.total_count(), 4);
        assert_eq!(snap.failed_measurements(), 1);
        assert_eq!(
            snap.status_message(),
            "4 operations; [INSERT: Count=1 Max=5.00 Min=5.00 Avg=5.00 90=5.00 99=5.00 99.9=5.00 99.99=5.00] \
             [READ: Count=2 Max=20.02 Min=10.00 Avg=15.01 90=20.02 99=20.02 99.9=20.02 99.99=20.02] \
             [UPDATE-FAILED: Count=1 Max=40.03 Min=40.00 Avg=40.02 90=40.03 99=40.03 99.9=40.03 99.99=40.03]"
        );
    }

    #[test]
    fn snapshots_merge_all_threads_and_count_outcomes() {
        let m = Measurements::new();
        let mut a = m.recorder();
        let mut b = m.recorder();
        a.record(OpKind::Insert, Duration::from_micros(5), true);
        b.record(OpKind::Insert, Duration::from_micros(7), true);
        b.record_verify_failure();
        a.record_outcome(Outcome::Ok);
        b.record_outcome(Outcome::Skipped);
        b.record_outcome(Outcome::Failed);
        let snap = m.snapshot();
        assert_eq!(snap.count(OpKind::Insert), 2);
        assert_eq!(m.total_count(), 2);
        assert_eq!(snap.verify_failures(), 1);
        assert_eq!((snap.succeeded(), snap.failed(), snap.skipped()), (1, 1, 1));
        assert_eq!(snap.summaries().len(), 1);
    }

    #[test]
    fn a_snapshot_is_taken_while_a_thread_records() {
        let m = Arc::new(Measurements::new());
        let mut r = m.recorder();
        let writer = std::thread::spawn(move || {
            for i in 0..200_000u64 {
                r.record(OpKind::Read, Duration::from_nanos(1 + i % 5000), true);
            }
        });
        let mut last = 0;
        while !writer.is_finished() {
            let n = m.snapshot().total_count();
            assert!(n >= last, "counts only grow");
            last = n;
        }
        writer.join().unwrap();
        assert_eq!(m.snapshot().count(OpKind::Read), 200_000);
    }
}
