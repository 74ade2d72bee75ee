//! The cache's index: key signature -> item location, run as large batches on an index engine.
//!
//! Mega-KV (VLDB'15) keeps only the index on the engine (a GPU there): the CPU hashes keys,
//! allocates and reads items, and verifies keys; the engine answers batches of searches, deletes
//! and inserts. [`BatchIndex`] is that engine's interface; [`cpu::CpuIndex`] runs it on the CPU
//! with batched prefetching, and a GPU backend plugs in behind the `gpu` feature.
//!
//! # Layout shared by every backend
//! A table of `2^n` buckets ([`TableShape`]), each 8 `(u32 signature, u32 location)` pairs in
//! 64 bytes. A [`KeyHash`] is a 64-bit hash of the key: its high 32 bits choose the first bucket
//! `b1 = hash & mask`; its low 32 bits are the signature (0 is reserved for an empty slot and
//! remapped). The second candidate `b2 = ((b1 ^ sig) & block_mask) | (b1 & !block_mask)` stays
//! in the same one of 8 insert blocks (the top 3 bits of the bucket number), and either
//! candidate is derived from the other and the signature (partial-key cuckoo hashing). So a
//! signature and either bucket name the same *bucket pair*.
//!
//! # The batch contract (identical for every backend; [`contract`] tests it)
//! A batch is applied in three phases:
//! 1. **Searches** see the index as it was before the batch. `found[i]` holds, for search `i`,
//!    the location stored under its signature in its bucket pair, or `[0, 0]` if none. At most
//!    one location is non-zero (see the invariant below); which of the two positions holds it
//!    is unspecified.
//! 2. **Deletes** remove the entry whose signature *and* location both match, in the key's bucket
//!    pair. A delete that matches nothing does nothing.
//! 3. **Inserts** store `(signature, location)` in the key's bucket pair. An entry with the same
//!    signature in the pair is replaced. If the pair is full, entries are displaced to their
//!    alternate buckets, at most [`MAX_DISPLACEMENTS`] times; then the entry carried last is
//!    dropped (a lossy insert: for a cache, an eviction).
//!
//! **Invariant:** at most one entry per (bucket pair, signature). Two inserts of one batch with
//! the same pair and signature (the same key, or two keys whose hashes collide that far) leave
//! exactly one of them; which one is unspecified. The cache's scheduler never puts two inserts of
//! one [`KeyHash`] in a batch.
//!
//! `displaced` lists every location that left the index because of the batch's inserts:
//! replaced by a same-signature insert, dropped as a loser of same-pair inserts in the batch, or
//! dropped by cuckoo overflow. Each location at most once, in no particular order. `lossy`
//! counts the cuckoo-overflow drops among them. Deletes never appear in `displaced`.
//!
//! A location is issued to at most one live entry at a time: inserting a location that is already
//! in the index is a caller error (the outcome is unspecified, but never undefined behaviour or a
//! panic). Location 0 is never issued; a batch holding it is rejected whole.
//!
//! # Pipelining
//! [`BatchIndex::submit`] queues a batch; [`BatchIndex::complete`] blocks until the oldest batch
//! in flight is done and returns it with its results. Batches take effect and complete in
//! submission order, so a batch's searches see every batch submitted before it. At most
//! [`BatchIndex::max_in_flight`] batches are in flight (1 for the CPU backend; a GPU backend
//! overlaps transfers and kernels of several).
//!
//! # Concurrency
//! A backend is owned by one thread at a time (`Send`, not `Sync`); the cache's scheduler holds
//! it under a lock.

use std::fmt;

pub mod contract;
pub mod cpu;
#[cfg(feature = "gpu")]
pub mod gpu;
mod shape;

pub use shape::{TableShape, BUCKET_SLOTS, INSERT_BLOCKS, MIN_BUCKETS};

/// Where an item lives, as the cache's memory hands it out. 0 is never issued (it marks "none"
/// in [`IndexResults::found`]).
pub type Location = u32;

/// Most times one insert displaces an entry to its alternate bucket before the entry carried
/// last is dropped (Mega-KV's bound).
pub const MAX_DISPLACEMENTS: usize = 5;

/// What an empty slot's signature is; no [`KeyHash::signature`] returns it.
pub const EMPTY_SIGNATURE: u32 = 0;

/// What a hash whose low 32 bits are 0 uses as its signature instead.
pub const ZERO_SIGNATURE_REMAP: u32 = 1;

/// A 64-bit hash of a key (xxh3): the high 32 bits choose buckets, the low 32 bits are the
/// signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyHash(pub u64);

impl KeyHash {
    /// The hash of `key`.
    #[inline]
    pub fn of(key: &[u8]) -> KeyHash {
        KeyHash(xxhash_rust::xxh3::xxh3_64(key))
    }

    /// The 32 bits that choose buckets.
    #[inline]
    pub fn bucket_hash(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The signature stored in the index: the low 32 bits, never [`EMPTY_SIGNATURE`] (0 becomes
    /// [`ZERO_SIGNATURE_REMAP`]).
    #[inline]
    pub fn signature(self) -> u32 {
        let sig = self.0 as u32;
        if sig == EMPTY_SIGNATURE {
            ZERO_SIGNATURE_REMAP
        } else {
            sig
        }
    }
}

/// One batch of index operations. The vectors are handed back by [`BatchIndex::complete`] so
/// their buffers can be reused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexBatch {
    /// Keys to look up; answered in [`IndexResults::found`], same order.
    pub searches: Vec<KeyHash>,
    /// Entries to store (phase 3).
    pub inserts: Vec<(KeyHash, Location)>,
    /// Entries to remove, matched on signature and location (phase 2).
    pub deletes: Vec<(KeyHash, Location)>,
}

impl IndexBatch {
    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.searches.clear();
        self.inserts.clear();
        self.deletes.clear();
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.searches.is_empty() && self.inserts.is_empty() && self.deletes.is_empty()
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.searches.len() + self.inserts.len() + self.deletes.len()
    }

    /// Checks what every backend rejects: location 0 in an insert or delete.
    ///
    /// # Errors
    /// [`IndexError::InvalidBatch`] naming the first offending operation.
    pub fn validate(&self) -> Result<(), IndexError> {
        if let Some(i) = self.inserts.iter().position(|&(_, loc)| loc == 0) {
            return Err(IndexError::InvalidBatch(format!(
                "insert {i} has location 0, which is never issued"
            )));
        }
        if let Some(i) = self.deletes.iter().position(|&(_, loc)| loc == 0) {
            return Err(IndexError::InvalidBatch(format!(
                "delete {i} has location 0, which is never issued"
            )));
        }
        Ok(())
    }
}

/// The answers to one batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexResults {
    /// Per search, the location in each candidate bucket (0 = none); at most one is non-zero.
    pub found: Vec<[Location; 2]>,
    /// Every location that left the index because of an insert (replaced, lost a same-pair race
    /// in the batch, or dropped by cuckoo overflow), each once.
    pub displaced: Vec<Location>,
    /// How many of `displaced` were dropped by cuckoo overflow: lossy inserts, which the cache
    /// counts as evictions.
    pub lossy: usize,
}

impl IndexResults {
    /// Empties the results, keeping the buffers.
    pub fn clear(&mut self) {
        self.found.clear();
        self.displaced.clear();
        self.lossy = 0;
    }
}

/// What went wrong in an index engine. The variants tell the caller what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexError {
    /// The backend cannot run here (no device, no driver, too little memory). Pick another.
    Unavailable(String),
    /// The engine failed while running; the index's contents are unknown. Clear it or stop.
    Device(String),
    /// The batch breaks the contract (location 0, more operations than the backend takes). It
    /// was not applied. A bug in the caller.
    InvalidBatch(String),
    /// [`BatchIndex::max_in_flight`] batches are in flight (on submit), or a batch is in flight
    /// (on clear). Complete one first.
    Busy,
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexError::Unavailable(why) => write!(f, "index backend unavailable: {why}"),
            IndexError::Device(why) => write!(f, "index engine failed: {why}"),
            IndexError::InvalidBatch(why) => write!(f, "invalid index batch: {why}"),
            IndexError::Busy => write!(f, "index engine busy: complete a batch first"),
        }
    }
}

impl std::error::Error for IndexError {}

/// An index engine that runs batches under the contract in this module's documentation.
pub trait BatchIndex: Send {
    /// A short name for logs and stats (`"cpu"`, `"gpu"`).
    fn name(&self) -> &'static str;

    /// Entries the table holds when full: its [`TableShape::slots`]. The shape follows from it.
    fn slots(&self) -> usize;

    /// Most batches in flight at once; batches complete in submission order.
    fn max_in_flight(&self) -> usize {
        1
    }

    /// Most operations of each kind (searches, inserts, deletes) one batch may hold.
    fn max_batch_ops(&self) -> usize {
        usize::MAX
    }

    /// Queues a batch.
    ///
    /// # Errors
    /// [`IndexError::Busy`] if [`Self::max_in_flight`] batches are in flight;
    /// [`IndexError::InvalidBatch`] if the batch holds location 0 or too many operations (then
    /// nothing of it is applied); [`IndexError::Device`] if the engine failed.
    fn submit(&mut self, batch: IndexBatch) -> Result<(), IndexError>;

    /// Waits for the oldest batch in flight and returns it with its results; `Ok(None)` if none
    /// is in flight. The returned buffers may be reused for the next batch.
    ///
    /// # Errors
    /// [`IndexError::Device`] if the engine failed.
    fn complete(&mut self) -> Result<Option<(IndexBatch, IndexResults)>, IndexError>;

    /// Hands a results buffer back for reuse by a later batch. The default drops it.
    fn recycle(&mut self, results: IndexResults) {
        drop(results);
    }

    /// Empties the index.
    ///
    /// # Errors
    /// [`IndexError::Busy`] if a batch is in flight; [`IndexError::Device`] if the engine failed.
    fn clear(&mut self) -> Result<(), IndexError>;
}

impl<T: BatchIndex + ?Sized> BatchIndex for Box<T> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn slots(&self) -> usize {
        (**self).slots()
    }
    fn max_in_flight(&self) -> usize {
        (**self).max_in_flight()
    }
    fn max_batch_ops(&self) -> usize {
        (**self).max_batch_ops()
    }
    fn submit(&mut self, batch: IndexBatch) -> Result<(), IndexError> {
        (**self).submit(batch)
    }
    fn complete(&mut self) -> Result<Option<(IndexBatch, IndexResults)>, IndexError> {
        (**self).complete()
    }
    fn recycle(&mut self, results: IndexResults) {
        (**self).recycle(results)
    }
    fn clear(&mut self) -> Result<(), IndexError> {
        (**self).clear()
    }
}

/// Runs one batch to completion on an idle index: submit, then complete.
///
/// # Errors
/// As for [`BatchIndex::submit`] and [`BatchIndex::complete`]; [`IndexError::Device`] if the
/// engine completes nothing.
pub fn run_batch<I: BatchIndex + ?Sized>(
    index: &mut I,
    batch: IndexBatch,
) -> Result<(IndexBatch, IndexResults), IndexError> {
    index.submit(batch)?;
    index
        .complete()?
        .ok_or_else(|| IndexError::Device("a submitted batch did not complete".to_string()))
}
