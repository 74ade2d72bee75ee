//! [`TokenBucket`]: the I/O budget of the background GC engine.
//!
//! Design: virtual scheduling (GCRA) rather than a token counter, so no fraction of a byte is ever
//! lost to rounding and a request larger than the burst still works. The state is the instant at
//! which the bucket is next empty of debt (`next_free`): a request of `n` bytes moves it forward by
//! `n / rate`, starting from no earlier than `now - burst / rate` (a full bucket), and its caller
//! waits until `next_free` would have been reached without the burst allowance. Callers that
//! reserve concurrently queue up behind each other, each sleeping only for its own share.
//!
//! Invariant: the bytes let through in any window of `t` seconds are at most
//! `burst + rate * t` (plus the last request, which may run into debt).
//!
//! Concurrency: shared by all workers (`&self` methods, one short lock per request; nobody sleeps
//! while holding it).

use parking_lot::Mutex;
use std::time::{Duration, Instant};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// A byte-rate limiter shared by threads.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    // INVARIANT: > 0.
    bytes_per_sec: u64,
    // The burst, as the time it takes to earn it at `bytes_per_sec`.
    burst: Duration,
    // The instant by which all bytes let through so far are paid for.
    next_free: Mutex<Option<Instant>>,
}

impl TokenBucket {
    /// A bucket refilling at `bytes_per_sec` (at least 1) and holding up to `burst_bytes`; it
    /// starts full.
    pub(crate) fn new(bytes_per_sec: u64, burst_bytes: u64) -> TokenBucket {
        let bytes_per_sec = bytes_per_sec.max(1);
        TokenBucket {
            bytes_per_sec,
            burst: cost(burst_bytes, bytes_per_sec),
            next_free: Mutex::new(None),
        }
    }

    /// The refill rate in bytes per second.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    pub(crate) fn rate(&self) -> u64 {
        self.bytes_per_sec
    }

    /// Takes `bytes` from the bucket, sleeping as long as needed to stay within the rate.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    pub(crate) fn acquire(&self, bytes: u64) {
        let wait = self.reserve(bytes, Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    /// Takes `bytes` from the bucket at time `now` and returns how long the caller must wait
    /// before using them. The clock is injected so tests need not sleep.
    pub(crate) fn reserve(&self, bytes: u64, now: Instant) -> Duration {
        let mut next_free = self.next_free.lock();
        // A full bucket: `now - burst`, or as early as the clock allows.
        let full = now.checked_sub(self.burst).unwrap_or(now);
        let start = match *next_free {
            Some(t) if t > full => t,
            _ => full,
        };
        let end = start
            .checked_add(cost(bytes, self.bytes_per_sec))
            .unwrap_or(start);
        *next_free = Some(end);
        end.saturating_duration_since(now)
    }
}

/// The time `bytes` take at `bytes_per_sec`, rounded up to the nanosecond.
fn cost(bytes: u64, bytes_per_sec: u64) -> Duration {
    let nanos = (u128::from(bytes) * NANOS_PER_SEC).div_ceil(u128::from(bytes_per_sec.max(1)));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}
