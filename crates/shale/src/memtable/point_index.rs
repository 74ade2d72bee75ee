//! A hash index over the skiplist's entries for point lookups: user key -> its newest node.
//!
//! A skiplist search is a chain of about `log4(n)` dependent cache misses; a memtable of half a
//! million entries costs a lookup a dozen or more of them, and a lookup of a key the memtable does
//! not hold pays them all for nothing. The index answers both in one or two: open addressing with
//! linear probing over a power-of-two array of slots, each slot one `u64` holding a 16-bit tag of
//! the key's hash and the node pointer (`tag << 48 | pointer`; 0 is an empty slot).
//!
//! Invariants:
//! - Every user key with an entry in the skiplist has exactly one slot in the current table,
//!   pointing to its entry with the highest sequence number inserted so far (the slot is written
//!   after the node is linked).
//! - At most [`MAX_LOAD`] of a table's slots are occupied, so a probe always meets an empty slot.
//! - A table that was replaced by a larger one is never written again and never freed before the
//!   index drops: a reader that loaded it may still be probing it.
//!
//! Concurrency contract: `insert` runs under the skiplist's insert lock (which owns the
//! `&mut IndexWriter` it takes); `lookup` takes no lock. Slots are published with Release stores after the node they point
//! to is complete and linked, and read with Acquire loads. A reader that loaded an older table
//! misses only entries inserted after the newer table was published, that is after the reader
//! started: it runs concurrently with those inserts, so either answer is correct.
//!
//! Pointers must fit in 48 bits (x86-64 and AArch64 Linux place user memory there unless a
//! program asks for more). If one ever does not, the index switches itself off for good and
//! lookups fall back to the skiplist search.

use super::huge::Slab;
use super::sync::{AtomicBool, AtomicPtr, AtomicU64};
use crate::key::SeqNo;
use std::sync::atomic::Ordering;

/// Fewest slots in a new index: 1024 (8 KiB); the table doubles as the memtable grows.
#[cfg(not(loom))]
const INITIAL_SLOTS: usize = 1024;
/// Under loom every slot is an object of the model, and a few entries should make it grow.
#[cfg(loom)]
const INITIAL_SLOTS: usize = 8;

// A table grows only after the insert that takes it past `MAX_LOAD`: that insert must still
// leave an empty slot, or a probe for an absent key in it would never end (true from 8 slots on;
// a loom model with 4 found exactly that).
const _: () = assert!(INITIAL_SLOTS * MAX_LOAD.0 / MAX_LOAD.1 + 1 < INITIAL_SLOTS);

/// Bytes of a new index made for few entries.
#[cfg(test)]
pub(crate) const INITIAL_BYTES: usize = INITIAL_SLOTS * SLOT_BYTES;

/// A table grows (doubles) when more than this share of its slots is occupied: linear probing
/// stays short (about 2.5 slots for a hit, 8.5 for a miss, all in one or two cache lines).
const MAX_LOAD: (usize, usize) = (3, 4);

const SLOT_BYTES: usize = std::mem::size_of::<AtomicU64>();

const POINTER_BITS: u32 = 48;
const POINTER_MASK: u64 = (1 << POINTER_BITS) - 1;

/// The hash of a user key, as the index uses it.
#[inline]
pub(crate) fn hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

#[inline]
fn tag_of(hash: u64) -> u64 {
    hash >> POINTER_BITS
}

struct Table {
    // INVARIANT: the length is a power of two.
    slots: Slab<AtomicU64>,
}

impl Table {
    /// A table of `len` empty slots. A large one is a huge-page region of its own ([`Slab`]): a
    /// probe lands on a random slot, and with 4 KiB pages a large table misses the TLB on nearly
    /// every one. Its zeroed pages are touched only as slots fill.
    fn new(len: usize) -> Box<Table> {
        debug_assert!(len.is_power_of_two());
        let slots = super::sync::zeroed_u64_slab(len);
        Box::new(Table { slots })
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }
}

/// The writer's side of the index; it lives in the skiplist's insert-lock-guarded state.
pub(crate) struct IndexWriter {
    /// Occupied slots of the current table.
    occupied: usize,
    // INVARIANT: every table ever published except the current one, kept for readers that still
    // probe them (see the module invariants).
    // Boxed so that a table never moves while readers probe it.
    #[allow(clippy::vec_box)]
    retired: Vec<Box<Table>>,
    /// Bytes of every table, current and retired.
    bytes: usize,
}

impl IndexWriter {
    /// Bytes the index's tables take, for the memtable's memory accounting.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The readers' side of the index. See the module documentation.
pub(crate) struct PointIndex {
    // INVARIANT: points to a live table owned by this index (freed only in `Drop`).
    current: AtomicPtr<Table>,
    /// False once a node pointer did not fit in 48 bits: lookups then answer "unknown".
    usable: AtomicBool,
}

/// What the index knows of a user key.
pub(crate) enum Lookup<N> {
    /// The skiplist holds no entry for the key.
    Absent,
    /// The key's newest entry.
    Newest(*mut N),
    /// The index cannot say (switched off); search the skiplist.
    Unknown,
}

/// The entries an index points to.
///
/// # Safety
/// Implementations read only initialized, immutable parts of a published node.
pub(crate) unsafe trait IndexedNode {
    /// The node's user key.
    ///
    /// # Safety
    /// `node` is a published entry node that outlives `'a`.
    unsafe fn user_key<'a>(node: *const Self) -> &'a [u8];
    /// The node's sequence number.
    ///
    /// # Safety
    /// As for `user_key`.
    unsafe fn seq(node: *const Self) -> SeqNo;
}

impl PointIndex {
    /// An empty index sized for about `entries` keys, and its writer state.
    pub(crate) fn new(entries: usize) -> (PointIndex, IndexWriter) {
        let slots = (entries.saturating_mul(MAX_LOAD.1) / MAX_LOAD.0)
            .max(INITIAL_SLOTS)
            .checked_next_power_of_two()
            .unwrap_or(INITIAL_SLOTS);
        let table = Table::new(slots);
        (
            PointIndex {
                current: AtomicPtr::new(Box::into_raw(table)),
                usable: AtomicBool::new(true),
            },
            IndexWriter {
                occupied: 0,
                retired: Vec::new(),
                bytes: slots * SLOT_BYTES,
            },
        )
    }

    fn table(&self) -> &Table {
        // SAFETY: `current` always points to a live table owned by the index (invariant); tables
        // are freed only when the index drops, which cannot happen while `&self` is borrowed.
        unsafe { &*self.current.load(Ordering::Acquire) }
    }

    /// Looks `user_key` (whose [`hash`] is `h`) up.
    ///
    /// # Safety
    /// Every node the index was given is a published entry node of type `N` that outlives
    /// `&self`.
    #[inline]
    pub(crate) unsafe fn lookup<N: IndexedNode>(&self, user_key: &[u8], h: u64) -> Lookup<N> {
        if !self.usable.load(Ordering::Relaxed) {
            return Lookup::Unknown;
        }
        let table = self.table();
        let mask = table.mask();
        let tag = tag_of(h);
        let mut i = h as usize & mask;
        loop {
            let v = table.slots[i].load(Ordering::Acquire);
            if v == 0 {
                return Lookup::Absent;
            }
            if v >> POINTER_BITS == tag {
                let node = std::ptr::with_exposed_provenance_mut::<N>((v & POINTER_MASK) as usize);
                // SAFETY: caller's contract; the Acquire load saw the slot's Release store, made
                // after the node was complete.
                if unsafe { N::user_key(node) } == user_key {
                    return Lookup::Newest(node);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Starts loading the slot a probe for hash `h` begins at; a batch of lookups prefetches its
    /// slots ahead of probing them.
    #[inline]
    pub(crate) fn prefetch_slot(&self, h: u64) {
        let table = self.table();
        super::prefetch(&table.slots[h as usize & table.mask()]);
    }

    /// Starts loading the node in the slot a probe for hash `h` begins at, when its tag is `h`'s:
    /// most likely the node a lookup of that key compares. Best after [`Self::prefetch_slot`] has
    /// brought the slot in.
    #[inline]
    pub(crate) fn prefetch_node(&self, h: u64) {
        let table = self.table();
        let v = table.slots[h as usize & table.mask()].load(Ordering::Relaxed);
        if v != 0 && v >> POINTER_BITS == tag_of(h) {
            super::prefetch(std::ptr::with_exposed_provenance::<u8>(
                (v & POINTER_MASK) as usize,
            ));
        }
    }

    /// Records `node`, whose user key's [`hash`] is `h`, as an entry of that key: it becomes the
    /// key's slot unless the slot already holds a newer entry.
    ///
    /// # Safety
    /// The caller holds the skiplist's insert lock (which owns `writer`); `node` and every node
    /// given before are published entry nodes of type `N` that outlive the index.
    pub(crate) unsafe fn insert<N: IndexedNode>(
        &self,
        writer: &mut IndexWriter,
        h: u64,
        node: *mut N,
    ) {
        let address = node.expose_provenance() as u64;
        if address >> POINTER_BITS != 0 {
            self.usable.store(false, Ordering::Relaxed);
        }
        if !self.usable.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: caller's contract.
        let (user_key, seq) = unsafe { (N::user_key(node), N::seq(node)) };
        let table = self.table();
        let mask = table.mask();
        let mut i = h as usize & mask;
        loop {
            let slot = &table.slots[i];
            // Only this thread writes slots (the insert lock).
            let v = slot.load(Ordering::Relaxed);
            if v == 0 {
                slot.store(tag_of(h) << POINTER_BITS | address, Ordering::Release);
                writer.occupied += 1;
                break;
            }
            if v >> POINTER_BITS == tag_of(h) {
                let other = std::ptr::with_exposed_provenance_mut::<N>((v & POINTER_MASK) as usize);
                // SAFETY: caller's contract: every indexed node is alive and published.
                if unsafe { N::user_key(other) } == user_key {
                    // SAFETY: as above.
                    if seq > unsafe { N::seq(other) } {
                        slot.store(tag_of(h) << POINTER_BITS | address, Ordering::Release);
                    }
                    return;
                }
            }
            i = (i + 1) & mask;
        }
        if writer.occupied * MAX_LOAD.1 > table.slots.len() * MAX_LOAD.0 {
            // SAFETY: caller's contract.
            unsafe { self.grow::<N>(writer) };
        }
    }

    /// Publishes a table twice the size holding the same slots, rehashed from the nodes' keys.
    ///
    /// # Safety
    /// As for [`PointIndex::insert`].
    unsafe fn grow<N: IndexedNode>(&self, writer: &mut IndexWriter) {
        let old = self.current.load(Ordering::Relaxed);
        // SAFETY: `old` is the live current table (invariant); only this thread replaces it.
        let old_table = unsafe { &*old };
        let bigger = Table::new(old_table.slots.len() * 2);
        let mask = bigger.mask();
        for v in old_table.slots.iter().map(|s| s.load(Ordering::Relaxed)) {
            if v == 0 {
                continue;
            }
            let node = std::ptr::with_exposed_provenance_mut::<N>((v & POINTER_MASK) as usize);
            // SAFETY: caller's contract.
            let mut i = hash(unsafe { N::user_key(node) }) as usize & mask;
            while bigger.slots[i].load(Ordering::Relaxed) != 0 {
                i = (i + 1) & mask;
            }
            bigger.slots[i].store(v, Ordering::Relaxed);
        }
        writer.bytes += bigger.slots.len() * SLOT_BYTES;
        // Release: readers that load the new table see its slots filled.
        self.current.store(Box::into_raw(bigger), Ordering::Release);
        // SAFETY: `old` came from `Box::into_raw`; it is kept (not freed) until the index drops.
        writer.retired.push(unsafe { Box::from_raw(old) });
    }
}

impl Drop for PointIndex {
    fn drop(&mut self) {
        // Relaxed: `&mut self` orders this after every other access (and loom's atomics have no
        // `get_mut`).
        let current = self.current.load(Ordering::Relaxed);
        // SAFETY: `current` came from `Box::into_raw` and is freed once, here; no reader can hold
        // it (we have `&mut self`).
        drop(unsafe { Box::from_raw(current) });
    }
}
