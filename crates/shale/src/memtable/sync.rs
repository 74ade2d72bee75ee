//! The memtable's synchronization primitives, in one place so that a model checker can replace
//! them: std's atomics and parking_lot's mutex in every build, loom's under `cfg(loom)`. Loom then
//! explores the interleavings of the real skiplist, point index, membuffer and range cursor
//! (`tests/loom_memtable.rs`), not of a copy of their protocol.
//!
//! Everything the memtable shares between threads goes through here, with two exceptions that
//! carry no protocol: the counter that spreads threads over build shards, and the drain threads'
//! spawn and sleep (loom models run with `drain_threads: 0`, where writers drain full buckets
//! themselves and cursors merge the buckets they reach).

#[cfg(not(loom))]
pub(crate) use parking_lot::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::MutexGuard;

/// loom's mutex with parking_lot's interface (no poisoning: a panic fails the whole model).
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().expect("loom mutex poisoned")
    }

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock().ok()
    }
}

/// An atomic word initialized to zero: an empty slot of the membuffer or the point index.
/// Zeroed memory is such a word for std's atomics (see `Slab::zeroed`) but not for loom's, which
/// must be constructed.
pub(crate) fn zeroed_u64_slab(len: usize) -> super::huge::Slab<AtomicU64> {
    #[cfg(not(loom))]
    {
        // SAFETY: all-zero bytes are a valid `AtomicU64` (0).
        unsafe { super::huge::Slab::zeroed(len) }
    }
    #[cfg(loom)]
    {
        super::huge::Slab::new(len, |_| AtomicU64::new(0))
    }
}
