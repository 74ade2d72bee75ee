//! Insert key-number counters.
//!
//! Load hands out key numbers from a plain [`Counter`]. During the run phase, inserts draw from an
//! [`AcknowledgedCounter`], and reads only pick key numbers below its acknowledged limit: a key
//! number becomes readable once it *and every smaller one* has been inserted, so concurrent
//! clients never read a record whose insert has not finished.
//!
//! Concurrency: both counters are shared by all client threads. `Counter` is a single atomic.
//! `AcknowledgedCounter` keeps a window of [`ACK_WINDOW_SIZE`] flags behind a mutex; its limit is
//! an atomic so readers never take the lock.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Number of in-flight inserts the acknowledged counter can track (YCSB's window, 2^20).
pub const ACK_WINDOW_SIZE: u64 = 1 << 20;

/// A shared counter handing out consecutive numbers.
#[derive(Debug)]
pub struct Counter {
    next: AtomicU64,
}

impl Counter {
    /// A counter whose first value is `start`.
    pub fn new(start: u64) -> Counter {
        Counter {
            next: AtomicU64::new(start),
        }
    }

    /// The next value.
    #[inline]
    pub fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// A counter whose values must be acknowledged; see the module documentation.
#[derive(Debug)]
pub struct AcknowledgedCounter {
    next: AtomicU64,
    // INVARIANT: every value below `acked` has been acknowledged; `acked` only grows.
    acked: AtomicU64,
    // INVARIANT: `window[v % ACK_WINDOW_SIZE]` is true iff `v >= acked` was acknowledged and
    // `acked` has not yet passed it.
    window: Mutex<Vec<bool>>,
}

impl AcknowledgedCounter {
    /// A counter whose first value is `start`; values below `start` count as acknowledged
    /// (they were loaded).
    pub fn new(start: u64) -> AcknowledgedCounter {
        AcknowledgedCounter {
            next: AtomicU64::new(start),
            acked: AtomicU64::new(start),
            window: Mutex::new(vec![false; ACK_WINDOW_SIZE as usize]),
        }
    }

    /// The next value to insert.
    #[inline]
    pub fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// How many values, counted from zero, are acknowledged without a gap: every key number
    /// below this may be read.
    #[inline]
    pub fn acknowledged(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    /// Marks `value` (returned by [`AcknowledgedCounter::next`]) as inserted. When more than
    /// [`ACK_WINDOW_SIZE`] inserts are outstanding this waits for the oldest to finish.
    pub fn acknowledge(&self, value: u64) {
        loop {
            let mut window = self.window.lock();
            let acked = self.acked.load(Ordering::Relaxed);
            if value < acked {
                return; // below the limit already (a value below `start`)
            }
            if value - acked >= ACK_WINDOW_SIZE {
                // The slot still belongs to an older value in flight in another thread.
                drop(window);
                std::thread::yield_now();
                continue;
            }
            window[(value % ACK_WINDOW_SIZE) as usize] = true;
            let mut limit = acked;
            while window[(limit % ACK_WINDOW_SIZE) as usize] {
                window[(limit % ACK_WINDOW_SIZE) as usize] = false;
                limit += 1;
            }
            self.acked.store(limit, Ordering::Release);
            return;
        }
    }
}
