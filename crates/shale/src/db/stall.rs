//! The write controller: how hard writers must back off while background work catches up.
//!
//! Writes slow down gradually long before they stop: between the slowdown and stop triggers the
//! allowed write rate falls linearly from `delayed_write_rate` to a tenth of it; at a stop trigger
//! writers wait for a flush or compaction to finish. Every microsecond a writer waits is counted in
//! `Stats::stall_micros`.
//!
//! The pressure is recomputed under the state lock whenever the version or the set of sealed
//! memtables changes, and published in an atomic so the write fast path needs no lock.

use crate::options::Options;
use std::sync::atomic::{AtomicU64, Ordering};

/// Pressure encoded in the atomic: no pressure.
const NONE: u64 = 0;
/// Pressure encoded in the atomic: writes stop.
const STOP: u64 = u64::MAX;
/// Slowest rate reached just before a stop, as a fraction of `delayed_write_rate`.
const MIN_RATE_FRACTION: f64 = 0.1;

/// How writers must behave now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pressure {
    None,
    /// Writers are paced to `bytes_per_sec`.
    Slowdown {
        bytes_per_sec: u64,
    },
    /// Writers wait until background work relieves the pressure.
    Stop,
}

/// What the controller looks at.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    pub l0_files: usize,
    pub sealed_memtables: usize,
    pub pending_compaction_bytes: u64,
}

/// The pressure that `load` puts on writers.
pub(crate) fn pressure(load: Load, opts: &Options) -> Pressure {
    if load.l0_files >= opts.level0_stop_trigger
        || load.pending_compaction_bytes >= opts.hard_pending_compaction_bytes
    {
        return Pressure::Stop;
    }
    let mut fraction: Option<f64> = None;
    let mut raise = |f: f64| fraction = Some(fraction.map_or(f, |g: f64| g.max(f)));
    if load.l0_files >= opts.level0_slowdown_trigger {
        let span = (opts.level0_stop_trigger - opts.level0_slowdown_trigger).max(1) as f64;
        raise((load.l0_files - opts.level0_slowdown_trigger) as f64 / span);
    }
    if load.pending_compaction_bytes >= opts.soft_pending_compaction_bytes {
        let span =
            (opts.hard_pending_compaction_bytes - opts.soft_pending_compaction_bytes).max(1) as f64;
        raise((load.pending_compaction_bytes - opts.soft_pending_compaction_bytes) as f64 / span);
    }
    if opts.max_write_buffers >= 3 && load.sealed_memtables + 2 >= opts.max_write_buffers {
        raise(0.0);
    }
    match fraction {
        None => Pressure::None,
        Some(f) => {
            let scale = 1.0 - (1.0 - MIN_RATE_FRACTION) * f.clamp(0.0, 1.0);
            Pressure::Slowdown {
                bytes_per_sec: ((opts.delayed_write_rate as f64 * scale) as u64).max(1),
            }
        }
    }
}

/// The published pressure.
#[derive(Debug, Default)]
pub(crate) struct WriteController {
    encoded: AtomicU64,
}

impl WriteController {
    pub(crate) fn set(&self, p: Pressure) {
        let v = match p {
            Pressure::None => NONE,
            Pressure::Stop => STOP,
            Pressure::Slowdown { bytes_per_sec } => bytes_per_sec.clamp(1, STOP - 1),
        };
        self.encoded.store(v, Ordering::Release);
    }

    pub(crate) fn get(&self) -> Pressure {
        match self.encoded.load(Ordering::Acquire) {
            NONE => Pressure::None,
            STOP => Pressure::Stop,
            rate => Pressure::Slowdown {
                bytes_per_sec: rate,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(l0: usize) -> Load {
        Load {
            l0_files: l0,
            sealed_memtables: 0,
            pending_compaction_bytes: 0,
        }
    }

    #[test]
    fn writes_slow_down_gradually_before_they_stop() {
        let opts = Options {
            level0_slowdown_trigger: 10,
            level0_stop_trigger: 20,
            ..Options::default()
        };
        assert_eq!(pressure(load(9), &opts), Pressure::None);
        let rate = |l0| match pressure(load(l0), &opts) {
            Pressure::Slowdown { bytes_per_sec } => bytes_per_sec,
            other => panic!("expected a slowdown at {l0} files, got {other:?}"),
        };
        assert_eq!(rate(10), opts.delayed_write_rate);
        assert!(rate(15) < rate(10) && rate(19) < rate(15));
        assert!(rate(19) >= (opts.delayed_write_rate as f64 * MIN_RATE_FRACTION) as u64);
        assert_eq!(pressure(load(20), &opts), Pressure::Stop);
    }

    #[test]
    fn controller_round_trips_every_pressure() {
        let c = WriteController::default();
        for p in [
            Pressure::None,
            Pressure::Stop,
            Pressure::Slowdown {
                bytes_per_sec: 12345,
            },
        ] {
            c.set(p);
            assert_eq!(c.get(), p);
        }
    }
}
