//! The scheduler: gathers every connection thread's jobs into index batches (Mega-KV's
//! scheduler), by combining rather than with a thread of its own.
//!
//! A thread with jobs publishes them in its slot and takes the scheduler lock. Whoever holds the
//! lock runs one pass over every published list (its own and the others'), marks them done and
//! lets go; a thread whose list was run by another finds it done when it gets the lock and leaves
//! at once. So under load the jobs of all threads ride in one batch, and a lone request is run as
//! soon as the engine is free: the batch period adapts by itself. On two cores a dedicated
//! scheduler thread would cost two context switches per pass for no gain.
//!
//! `batch_period` adds Mega-KV's fixed period for engines that want larger batches (a GPU): when
//! the previous pass carried at least [`LIGHT_LOAD_OPS`] ops, a new pass waits until a period has
//! passed since the previous one started. Under light load nothing waits.
//!
//! # Concurrency
//! Slots are behind their own mutexes, taken briefly; [`pass::Core`] is behind the scheduler lock.

pub(crate) mod pass;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::op::Jobs;
use pass::{Core, PassContext};

/// A pass carrying fewer ops than this is light load: the next pass does not wait for the period.
pub const LIGHT_LOAD_OPS: usize = 64;

enum Slot {
    Empty,
    Published(Jobs),
    Done(Jobs),
}

/// See the module documentation.
pub(crate) struct Scheduler {
    core: Mutex<CoreState>,
    slots: Box<[Mutex<Slot>]>,
    period: Duration,
    base: Instant,
    last_start_nanos: AtomicU64,
    last_ops: AtomicUsize,
    /// Cache-clock millisecond at which a delayed FLUSH runs (0: none).
    pub(crate) flush_at: AtomicU64,
}

struct CoreState {
    core: Core,
    lists: Vec<Jobs>,
    owners: Vec<usize>,
}

impl Scheduler {
    pub(crate) fn new(core: Core, threads: usize, period: Duration) -> Scheduler {
        Scheduler {
            core: Mutex::new(CoreState {
                core,
                lists: Vec::new(),
                owners: Vec::new(),
            }),
            slots: (0..threads).map(|_| Mutex::new(Slot::Empty)).collect(),
            period,
            base: Instant::now(),
            last_start_nanos: AtomicU64::new(0),
            last_ops: AtomicUsize::new(0),
            flush_at: AtomicU64::new(0),
        }
    }

    /// Runs `jobs` (and whatever other threads have published), filling in every outcome. The
    /// calling thread must be pinned.
    pub(crate) fn execute(&self, cx: &PassContext<'_>, thread: usize, jobs: &mut Jobs) {
        let flush_at = self.flush_at.load(Ordering::Relaxed);
        let flush_due = flush_at != 0 && cx.now_ms >= flush_at;
        if jobs.is_empty() && !flush_due {
            return;
        }
        self.hold_back();
        *self.slots[thread].lock() = Slot::Published(std::mem::take(jobs));
        let mut state = self.core.lock();
        let mine = std::mem::replace(&mut *self.slots[thread].lock(), Slot::Empty);
        let own = match mine {
            Slot::Done(done) => {
                *jobs = done;
                return;
            }
            Slot::Published(own) => own,
            Slot::Empty => unreachable!("a published slot emptied by another thread"),
        };
        let CoreState {
            core,
            lists,
            owners,
        } = &mut *state;
        lists.clear();
        owners.clear();
        lists.push(own);
        owners.push(thread);
        for (other, slot) in self.slots.iter().enumerate() {
            if other == thread {
                continue;
            }
            let mut slot = slot.lock();
            if matches!(*slot, Slot::Published(_)) {
                if let Slot::Published(list) = std::mem::replace(&mut *slot, Slot::Empty) {
                    lists.push(list);
                    owners.push(other);
                }
            }
        }
        let flush_first = flush_due
            && self
                .flush_at
                .compare_exchange(flush_at, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        let started = self.base.elapsed().as_nanos() as u64;
        let previous = self.last_start_nanos.swap(started, Ordering::Relaxed);
        if previous != 0 {
            crate::stats::Stats::add(&cx.stats.pass_period_nanos, started - previous);
        }
        crate::stats::Stats::add(&cx.stats.passes, 1);
        let ops = core.pass(cx, lists, flush_first);
        self.last_ops.store(ops, Ordering::Relaxed);
        cx.slabs.epochs().advance();
        let mut drained = lists.drain(..);
        *jobs = drained.next().expect("the caller's own list");
        for (list, &owner) in drained.zip(owners.iter().skip(1)) {
            *self.slots[owner].lock() = Slot::Done(list);
        }
    }

    /// Waits out the batch period after a heavy pass.
    fn hold_back(&self) {
        if self.period.is_zero() || self.last_ops.load(Ordering::Relaxed) < LIGHT_LOAD_OPS {
            return;
        }
        let last = Duration::from_nanos(self.last_start_nanos.load(Ordering::Relaxed));
        let due = last + self.period;
        let now = self.base.elapsed();
        if now < due {
            std::thread::sleep(due - now);
        }
    }
}
