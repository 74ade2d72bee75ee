//! Counters of the cache: requests, hits, evictions, index batches. Every counter is a relaxed
//! atomic, bumped by whichever thread did the work and read without stopping anyone.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets of the batch-size and batch-time histograms: bucket `i` counts values in
/// `[2^i, 2^(i+1))` (bucket 0 also counts 0).
pub const HISTOGRAM_BUCKETS: usize = 24;

/// A power-of-two histogram.
#[derive(Debug)]
pub struct Histogram([AtomicU64; HISTOGRAM_BUCKETS]);

impl Default for Histogram {
    fn default() -> Self {
        Histogram(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl Histogram {
    /// Counts `value`.
    #[inline]
    pub fn record(&self, value: u64) {
        let bucket = (63 - value.max(1).leading_zeros() as usize).min(HISTOGRAM_BUCKETS - 1);
        self.0[bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts, bucket by bucket.
    pub fn counts(&self) -> [u64; HISTOGRAM_BUCKETS] {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }

    /// The smallest power of two at or below which `quantile` of the values lie (0 if empty).
    pub fn quantile(&self, quantile: f64) -> u64 {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let want = (total as f64 * quantile).ceil() as u64;
        let mut seen = 0;
        for (i, &c) in counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return 1u64 << (i + 1);
            }
        }
        1u64 << HISTOGRAM_BUCKETS
    }
}

/// Declares the plain counters once, so the list and its names cannot drift apart.
macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Counters of the cache (see each field).
        #[derive(Debug, Default)]
        pub struct Stats {
            $($(#[$doc])* pub $name: AtomicU64,)*
            /// Ops per index batch.
            pub batch_ops: Histogram,
            /// Microseconds of index engine time per batch.
            pub batch_micros: Histogram,
        }

        impl Stats {
            /// Every plain counter with its name.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Ordering::Relaxed)),)*]
            }
        }
    };
}

counters! {
    /// GET ops (keys looked up).
    cmd_get,
    /// GET ops that found a live item.
    get_hits,
    /// GET ops that found nothing.
    get_misses,
    /// GET ops that found an expired item (also counted as misses).
    get_expired,
    /// SET ops of every mode.
    cmd_set,
    /// TOUCH and EXPIRE ops.
    cmd_touch,
    /// Touches of present keys.
    touch_hits,
    /// Touches of absent keys.
    touch_misses,
    /// DELETE ops that removed a key.
    delete_hits,
    /// DELETE ops of absent keys.
    delete_misses,
    /// INCR/DECR ops on present keys.
    incr_hits,
    /// INCR/DECR ops on absent keys.
    incr_misses,
    /// CAS ops that stored.
    cas_hits,
    /// CAS ops whose key was absent.
    cas_misses,
    /// CAS ops that found another version.
    cas_badval,
    /// Conditional stores refused (add, replace, append, prepend).
    not_stored,
    /// Stores refused for lack of memory.
    store_no_memory,
    /// Stores refused as too large.
    store_too_large,
    /// Items evicted by CLOCK.
    evictions,
    /// Expired items reclaimed.
    expired_reclaimed,
    /// Index entries dropped by cuckoo overflow (lossy inserts): evictions too.
    index_lossy,
    /// Index entries replaced by a newer item of the same key.
    index_replaced,
    /// FLUSH ops run.
    cmd_flush,
    /// Scheduler passes.
    passes,
    /// Index batches run.
    batches,
    /// Searches sent to the index.
    batch_searches,
    /// Inserts sent to the index.
    batch_inserts,
    /// Deletes sent to the index.
    batch_deletes,
    /// Nanoseconds the index engine spent on batches.
    index_nanos,
    /// Nanoseconds between the starts of consecutive passes, summed.
    pass_period_nanos,
    /// Connections accepted.
    total_connections,
    /// Connections open now.
    curr_connections,
    /// Requests refused as malformed.
    protocol_errors,
    /// Bytes read from clients.
    bytes_read,
    /// Bytes written to clients.
    bytes_written,
    /// UDP replies that did not fit a datagram.
    udp_oversized,
}

impl Stats {
    /// Adds `n` to a counter.
    #[inline]
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Takes one from a gauge (open connections).
    #[inline]
    pub fn add_signed_down(counter: &AtomicU64) {
        counter.fetch_sub(1, Ordering::Relaxed);
    }

    /// Reads a counter.
    #[inline]
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_by_powers_of_two() {
        let h = Histogram::default();
        for v in [0, 1, 2, 3, 4, 1000, 1 << 40] {
            h.record(v);
        }
        let c = h.counts();
        assert_eq!(c[0], 2);
        assert_eq!(c[1], 2);
        assert_eq!(c[2], 1);
        assert_eq!(c[9], 1);
        assert_eq!(c[HISTOGRAM_BUCKETS - 1], 1);
        assert_eq!(h.quantile(0.5), 4);
    }
}
