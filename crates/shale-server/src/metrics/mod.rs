//! Metrics: per-command counts and latency histograms, connection and traffic counters, and the
//! engine's statistics, rendered as Prometheus text by [`render`] and served by [`http`].
//!
//! Concurrency: every counter is a relaxed atomic bumped on the hot path; rendering reads them
//! without stopping writers, so a scrape sees each counter at some recent value.

pub mod http;
mod render;

pub use render::render;

use crate::commands::COMMANDS;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency histogram buckets, in microseconds (Prometheus `le`, plus +Inf).
pub const LATENCY_BUCKETS_US: [u64; 14] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 50_000, 250_000, 1_000_000,
];

/// A fixed-bucket latency histogram.
#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let us = d.as_micros().min(u128::from(u64::MAX)) as u64;
        let i = LATENCY_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(LATENCY_BUCKETS_US.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Sum of the observations in microseconds.
    pub fn sum_us(&self) -> u64 {
        self.sum_us.load(Ordering::Relaxed)
    }

    /// Cumulative counts per bucket (Prometheus's `le` semantics), +Inf last.
    pub fn cumulative(&self) -> Vec<u64> {
        let mut total = 0;
        self.buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect()
    }
}

/// One command's numbers.
#[derive(Default)]
pub struct CommandStats {
    /// Calls, errors included.
    pub calls: AtomicU64,
    /// Calls answered with an error.
    pub errors: AtomicU64,
    /// Execution time (staging writes included, the batch commit excluded: see `commit`).
    pub latency: Histogram,
}

/// See the module documentation.
pub struct Metrics {
    /// Per command, indexed like [`COMMANDS`].
    pub commands: Vec<CommandStats>,
    /// Requests naming no known command.
    pub unknown_commands: AtomicU64,
    /// Connections accepted since start.
    pub connections_total: AtomicU64,
    /// Connections refused (maxclients).
    pub rejected_connections: AtomicU64,
    /// Connections closed for a protocol error or a broken limit.
    pub protocol_errors: AtomicU64,
    /// Bytes read from clients.
    pub net_input_bytes: AtomicU64,
    /// Bytes written to clients.
    pub net_output_bytes: AtomicU64,
    /// Pipeline batches executed.
    pub batches: AtomicU64,
    /// Batches (or their rests) that met a key lock held by another batch and moved off their
    /// connection's thread to wait for it (on a cluster node: each time one waited for a release
    /// of locks, see `exec::retry_after_busy`).
    pub busy_batches: AtomicU64,
    /// Requests executed (the sum over batches).
    pub batched_requests: AtomicU64,
    /// Keys deleted by expiry (lazily or by the sweep).
    pub expired_keys: AtomicU64,
    /// Failed `AUTH` (and `HELLO ... AUTH`) attempts.
    pub auth_failures: AtomicU64,
    /// Failed `accept` calls (for example at the open-file limit).
    pub accept_errors: AtomicU64,
    /// Pieces of unreadable data (SST blocks or tables, blob records) that listings stepped
    /// over (see [`crate::damage`]).
    pub scan_skipped: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            commands: COMMANDS.iter().map(|_| CommandStats::default()).collect(),
            unknown_commands: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            busy_batches: AtomicU64::new(0),
            batched_requests: AtomicU64::new(0),
            expired_keys: AtomicU64::new(0),
            auth_failures: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            scan_skipped: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Total calls of every command.
    pub fn total_commands(&self) -> u64 {
        self.commands
            .iter()
            .map(|c| c.calls.load(Ordering::Relaxed))
            .sum::<u64>()
            + self.unknown_commands.load(Ordering::Relaxed)
    }
}

/// Adds `n` to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}
