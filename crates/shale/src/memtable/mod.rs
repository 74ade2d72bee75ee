//! The memory component: where writes land before a flush turns them into an SST.
//!
//! [`Memtable`] is the seam between the write path and the data structure behind it. The write path
//! inserts entries with their sequence numbers; readers look entries up at a snapshot sequence number
//! and ignore anything newer. A memtable that is full is sealed (no more inserts) and flushed.
//!
//! Concurrency contract: `insert` may be called by several threads at once; `get` and iterators run
//! concurrently with inserts and never block them. An iterator sees every entry inserted before it
//! was created and possibly some inserted later; readers filter by sequence number, so the extra
//! entries are invisible to them.
//!
//! Invariant: no two entries share the same (user key, sequence number).

mod arena;
mod flodb;
mod huge;
mod point_index;
mod skiplist;
mod sync;
#[cfg(test)]
mod test_support;

pub use flodb::{FloDbConfig, FloDbMemtable, BUCKET_BYTES, BUCKET_SLOTS};
pub use skiplist::SkipListMemtable;

use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind};
use std::ops::Bound;
use std::sync::Arc;

/// The newest version of a key visible at a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemtableGet {
    /// The key holds a value (inline or a blob reference, per `kind`).
    Found {
        kind: ValueKind,
        seq: SeqNo,
        value: Vec<u8>,
    },
    /// The key was deleted at `seq`.
    Deleted { seq: SeqNo },
}

/// A memory component of the LSM tree.
pub trait Memtable: Send + Sync {
    /// Adds an entry. Keys with equal user key and sequence number are never inserted twice.
    fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]);
    /// The newest entry for `user_key` with sequence number `<= snapshot`, or `None`.
    fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<MemtableGet>;
    /// Starts loading the memory a [`Memtable::get`] of `user_key` reads first, so that a batch
    /// of lookups overlaps those cache misses. Only a hint.
    fn prefetch(&self, user_key: &[u8]) {
        let _ = user_key;
    }
    /// A cursor over all entries in internal-key order.
    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator>;
    /// A cursor for a read of the user keys within `lower` and `upper`: at every position whose
    /// user key lies within them it is exact (as [`Memtable::iter`]); outside them it may skip
    /// entries, but it stays in order. Readers stop at their bounds, so a FloDB memtable need not
    /// look at the parts of its membuffer that lie outside them. Defaults to [`Memtable::iter`].
    fn range_iter(
        self: Arc<Self>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Box<dyn InternalIterator> {
        let _ = (lower, upper);
        self.iter()
    }
    /// Bytes of memory the entries take, for sealing and accounting.
    fn approximate_bytes(&self) -> usize;
    /// Number of entries.
    fn len(&self) -> usize;
    /// The smallest and the largest user key the memtable holds, or `None` when it knows of no
    /// entry. A hint for the next memtable's layout ([`learned_prefix_bits`]), not an exact
    /// bound: FloDB's leaves out entries still in its membuffer.
    fn key_range(&self) -> Option<(&[u8], &[u8])>;
    /// True when nothing was inserted.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Hints the CPU to start loading the cache line at `p`, so that a miss on it overlaps other
/// work: a skiplist search step prefetches the node after the one it compares, and a sorted
/// multi-insert prefetches the index slots and nodes of the entries ahead of the one it links.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and has no visible effect, whatever the
    // address (null included).
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A new, empty memtable of the kind `options` asks for. A FloDB membuffer skips `prefix_bits`
/// leading key bits before it takes the bucket index (fixed by the options or learned: see
/// `DbInner::membuffer_prefix`).
pub(crate) fn new_memtable(options: &crate::Options, prefix_bits: u32) -> Arc<dyn Memtable> {
    match options.memtable {
        crate::MemtableKind::SkipList => Arc::new(SkipListMemtable::with_expected_bytes(
            options.write_buffer_size,
        )),
        crate::MemtableKind::FloDb => Arc::new(FloDbMemtable::with_expected_bytes(
            FloDbConfig {
                membuffer_bytes: options
                    .membuffer_size
                    .min(options.write_buffer_size / 8)
                    .max(64),
                prefix_bits,
                drain_threads: options.drain_threads,
            },
            options.write_buffer_size,
        )),
    }
}

/// The leading bits that `smallest` and `largest`, two keys of a key range, share (so every key
/// between them shares them too), reading bytes past the end of the shorter as zero as the
/// membuffer's bucket index does; `None` when they do not differ.
///
/// A FloDB membuffer that skips these bits takes its bucket index from the first bits in which
/// the keys of that range differ: a range of keys with a common prefix (`user` and decimal digits
/// in YCSB) spreads over all the buckets instead of filling a few, and the buckets stay in key
/// order. The engine learns them from each memtable for the next and from the SSTs at open.
pub(crate) fn learned_prefix_bits(smallest: &[u8], largest: &[u8]) -> Option<u32> {
    let len = smallest.len().max(largest.len());
    let byte = |key: &[u8], i: usize| key.get(i).copied().unwrap_or(0);
    (0..len).find_map(|i| {
        let diff = byte(smallest, i) ^ byte(largest, i);
        (diff != 0).then(|| 8 * i as u32 + diff.leading_zeros())
    })
}
