//! Latency measurement: one HdrHistogram per operation type per client thread.
//!
//! Each client thread owns a [`Recorder`] behind its own mutex, so recording an operation takes
//! an uncontended lock and a histogram increment. The status thread merges all recorders into a
//! [`Snapshot`] when it prints (every `status.interval` seconds), holding each thread's lock only
//! for the merge.
//!
//! Latencies are recorded in nanoseconds with three significant digits up to
//! [`MAX_LATENCY_NANOS`] (larger values are clamped to it) and printed in microseconds, as
//! YCSB-cpp does.

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

/// Largest latency the histograms resolve: one hour.
pub const MAX_LATENCY_NANOS: u64 = 3_600_000_000_000;
/// Significant decimal digits kept by the histograms.
pub const HISTOGRAM_SIGFIGS: u8 = 3;
/// Percentiles printed in status lines and reports, in YCSB-cpp's order.
pub const REPORTED_PERCENTILES: [f64; 4] = [90.0, 99.0, 99.9, 99.99];

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
    /// A read followed by an update of the same record.
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

    /// Parses a YCSB-cpp name.
    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.name() == name)
    }

    fn index(self) -> usize {
        self as usize
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NANOS, HISTOGRAM_SIGFIGS)
        .expect("constant histogram bounds are valid")
}

/// One thread's measurements.
#[derive(Debug, Default)]
pub struct Recorder {
    histograms: [Option<Histogram<u64>>; 6],
    failures: [u64; 6],
    verify_failures: u64,
    misses: u64,
    input_errors: u64,
}

impl Recorder {
    /// Records one finished operation of `kind` that took `latency`; `ok` is false when it
    /// failed (it still counts in the latency histogram, as in YCSB-cpp).
    pub fn record(&mut self, kind: OpKind, latency: Duration, ok: bool) {
        let nanos = u64::try_from(latency.as_nanos())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_LATENCY_NANOS);
        self.histograms[kind.index()]
            .get_or_insert_with(new_histogram)
            .saturating_record(nanos);
        if !ok {
            self.failures[kind.index()] += 1;
        }
    }

    /// Counts a value that failed verification (the operation is also recorded as failed).
    pub fn record_verify_failure(&mut self) {
        self.verify_failures += 1;
    }

    /// Counts a read that found nothing where finding nothing is normal (a cache trace).
    pub fn record_miss(&mut self) {
        self.misses += 1;
    }

    /// Counts a malformed input (a bad trace line) that ended this thread's work.
    pub fn record_input_error(&mut self) {
        self.input_errors += 1;
    }

    fn merge_into(&self, snap: &mut Snapshot) {
        for kind in OpKind::ALL {
            if let Some(h) = &self.histograms[kind.index()] {
                snap.histograms[kind.index()]
                    .get_or_insert_with(new_histogram)
                    .add(h)
                    .expect("histograms share bounds");
            }
            snap.failures[kind.index()] += self.failures[kind.index()];
        }
        snap.verify_failures += self.verify_failures;
        snap.misses += self.misses;
        snap.input_errors += self.input_errors;
    }
}

/// All threads' recorders for one phase.
#[derive(Debug, Default)]
pub struct Measurements {
    recorders: Mutex<Vec<Arc<Mutex<Recorder>>>>,
}

impl Measurements {
    /// An empty set.
    pub fn new() -> Measurements {
        Measurements::default()
    }

    /// A new recorder for one client thread, registered for merging.
    pub fn recorder(&self) -> Arc<Mutex<Recorder>> {
        let r = Arc::new(Mutex::new(Recorder::default()));
        self.recorders.lock().push(Arc::clone(&r));
        r
    }

    /// Operations finished so far, all threads and kinds (cheap: no histogram is merged).
    pub fn total_count(&self) -> u64 {
        let recorders = self.recorders.lock().clone();
        recorders
            .iter()
            .map(|r| {
                r.lock()
                    .histograms
                    .iter()
                    .flatten()
                    .map(Histogram::len)
                    .sum::<u64>()
            })
            .sum()
    }

    /// Merges every thread's measurements so far.
    pub fn snapshot(&self) -> Snapshot {
        let mut snap = Snapshot::default();
        let recorders = self.recorders.lock().clone();
        for r in recorders {
            r.lock().merge_into(&mut snap);
        }
        snap
    }
}

/// Merged measurements at one moment.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    histograms: [Option<Histogram<u64>>; 6],
    failures: [u64; 6],
    verify_failures: u64,
    misses: u64,
    input_errors: u64,
}

/// Summary of one operation type, latencies in microseconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpSummary {
    /// Operation name (`READ`, ...).
    pub op: String,
    /// Operations finished (successful and failed).
    pub count: u64,
    /// Failed operations among them.
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
    /// Operations finished, all kinds, successful or not.
    pub fn total_count(&self) -> u64 {
        self.histograms.iter().flatten().map(Histogram::len).sum()
    }

    /// Failed operations, all kinds.
    pub fn total_failures(&self) -> u64 {
        self.failures.iter().sum()
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

    /// Operations finished of `kind`.
    pub fn count(&self, kind: OpKind) -> u64 {
        self.histograms[kind.index()]
            .as_ref()
            .map_or(0, Histogram::len)
    }

    /// Per-kind summaries for every kind that ran, in report order.
    pub fn summaries(&self) -> Vec<OpSummary> {
        OpKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let h = self.histograms[kind.index()]
                    .as_ref()
                    .filter(|h| !h.is_empty())?;
                let us = |nanos: u64| nanos as f64 / 1000.0;
                Some(OpSummary {
                    op: kind.name().to_string(),
                    count: h.len(),
                    failed: self.failures[kind.index()],
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

    /// The latency (µs) at `percentile` of `kind`, if it ran.
    pub fn percentile_us(&self, kind: OpKind, percentile: f64) -> Option<f64> {
        let h = self.histograms[kind.index()]
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

/// Formats the body of a status line from per-kind summaries (see [`Snapshot::status_message`]).
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
    fn status_message_has_ycsb_cpp_shape() {
        let m = Measurements::new();
        let r = m.recorder();
        {
            let mut r = r.lock();
            r.record(OpKind::Read, Duration::from_micros(10), true);
            r.record(OpKind::Read, Duration::from_micros(20), true);
            r.record(OpKind::Update, Duration::from_micros(40), false);
        }
        let snap = m.snapshot();
        assert_eq!(snap.total_count(), 3);
        assert_eq!(snap.total_failures(), 1);
        assert_eq!(
            snap.status_message(),
            "3 operations; [READ: Count=2 Max=20.02 Min=10.00 Avg=15.01 90=20.02 99=20.02 99.9=20.02 99.99=20.02] \
             [UPDATE: Count=1 Max=40.03 Min=40.00 Avg=40.02 90=40.03 99=40.03 99.9=40.03 99.99=40.03]"
        );
    }

    #[test]
    fn snapshots_merge_all_threads() {
        let m = Measurements::new();
        let a = m.recorder();
        let b = m.recorder();
        a.lock()
            .record(OpKind::Insert, Duration::from_micros(5), true);
        b.lock()
            .record(OpKind::Insert, Duration::from_micros(7), true);
        b.lock().record_verify_failure();
        let snap = m.snapshot();
        assert_eq!(snap.count(OpKind::Insert), 2);
        assert_eq!(snap.verify_failures(), 1);
        assert_eq!(snap.summaries().len(), 1);
    }
}
