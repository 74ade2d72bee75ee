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
mod point_index;
mod skiplist;
#[cfg(test)]
mod test_support;

pub use flodb::{FloDbConfig, FloDbMemtable};
pub use skiplist::SkipListMemtable;

use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind};
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
    /// A cursor over all entries in internal-key order.
    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator>;
    /// Bytes of memory the entries take, for sealing and accounting.
    fn approximate_bytes(&self) -> usize;
    /// Number of entries.
    fn len(&self) -> usize;
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

/// A new, empty memtable of the kind `options` asks for.
pub(crate) fn new_memtable(options: &crate::Options) -> Arc<dyn Memtable> {
    match options.memtable {
        crate::MemtableKind::SkipList => Arc::new(SkipListMemtable::with_expected_bytes(
            options.write_buffer_size,
        )),
        crate::MemtableKind::FloDb => Arc::new(FloDbMemtable::with_expected_bytes(
            FloDbConfig {
                membuffer_bytes: options.membuffer_size,
                prefix_bits: options.membuffer_prefix_bits,
                drain_threads: options.drain_threads,
            },
            options.write_buffer_size,
        )),
    }
}
