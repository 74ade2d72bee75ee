//! The CPU index engine: Mega-KV's table probed on the CPU with batched software prefetching.
//!
//! A batch runs at once inside [`BatchIndex::submit`] on the calling thread. Each phase walks its
//! operations as a software pipeline (MICA's idea): the buckets of operation `i + PREFETCH_AHEAD`
//! are requested from memory while operation `i` is probed, so a table far larger than the caches
//! keeps many misses in flight instead of waiting for each one.
//!
//! # Invariants
//! - A slot is empty exactly when its signature is [`EMPTY_SIGNATURE`]; its location is then 0.
//! - At most one entry per (bucket pair, signature) (the module contract in [`super`]).

use super::{
    BatchIndex, IndexBatch, IndexError, IndexResults, KeyHash, Location, TableShape, BUCKET_SLOTS,
    EMPTY_SIGNATURE, MAX_DISPLACEMENTS,
};
use crate::region::Region;

/// How many operations ahead of the one being probed the pipeline prefetches. 16 keeps about 32
/// cache lines (two buckets each) in flight, enough to cover a DRAM miss at this probe rate.
pub const PREFETCH_AHEAD: usize = 16;

/// One bucket: signatures first, then locations, so a probe compares 8 signatures in one
/// 32-byte load.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Bucket {
    sigs: [u32; BUCKET_SLOTS],
    locs: [Location; BUCKET_SLOTS],
}

impl Bucket {
    /// Bit `i` set where `sigs[i] == sig`.
    #[inline(always)]
    fn matches(&self, sig: u32) -> u32 {
        let mut mask = 0u32;
        for (i, &s) in self.sigs.iter().enumerate() {
            mask |= u32::from(s == sig) << i;
        }
        mask
    }

    /// The first slot whose signature is `sig`.
    #[inline(always)]
    fn find(&self, sig: u32) -> Option<usize> {
        let mask = self.matches(sig);
        (mask != 0).then(|| mask.trailing_zeros() as usize)
    }

    /// The first slot holding `(sig, loc)`.
    #[inline(always)]
    fn find_exact(&self, sig: u32, loc: Location) -> Option<usize> {
        let mut mask = self.matches(sig);
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            if self.locs[i] == loc {
                return Some(i);
            }
            mask &= mask - 1;
        }
        None
    }
}

/// Mega-KV's index on the CPU. See the module documentation.
pub struct CpuIndex {
    shape: TableShape,
    // INVARIANT: holds `shape.buckets()` zero-initialised `Bucket`s (all zeros is a valid, empty
    // bucket); only this value reads or writes them.
    table: Region,
    entries: usize,
    done: Option<(IndexBatch, IndexResults)>,
    spare: Option<IndexResults>,
}

impl CpuIndex {
    /// An empty index of at least `slots` entries (see [`TableShape::for_slots`]).
    ///
    /// # Errors
    /// [`IndexError::Unavailable`] if the table's memory cannot be mapped.
    pub fn new(slots: usize) -> Result<CpuIndex, IndexError> {
        CpuIndex::with_huge_pages(slots, true)
    }

    /// As [`CpuIndex::new`], with the table advised as huge pages only if `huge` (for measuring
    /// what they bring).
    ///
    /// # Errors
    /// [`IndexError::Unavailable`] if the table's memory cannot be mapped.
    pub fn with_huge_pages(slots: usize, huge: bool) -> Result<CpuIndex, IndexError> {
        let shape = TableShape::for_slots(slots);
        let bytes = shape
            .buckets()
            .checked_mul(std::mem::size_of::<Bucket>())
            .ok_or_else(|| IndexError::Unavailable(format!("{slots} slots overflow")))?;
        let mut table = Region::map_with(bytes, huge).map_err(|e| {
            IndexError::Unavailable(format!("cannot map a {bytes}-byte index table: {e}"))
        })?;
        // Every bucket is as likely as any other to take the next key: back them all now.
        table.prefault().map_err(|e| {
            IndexError::Unavailable(format!("cannot back a {bytes}-byte index table: {e}"))
        })?;
        Ok(CpuIndex {
            shape,
            table,
            entries: 0,
            done: None,
            spare: None,
        })
    }

    /// The table's geometry.
    pub fn shape(&self) -> TableShape {
        self.shape
    }

    /// Entries in the index now.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Bytes of the table.
    pub fn table_bytes(&self) -> usize {
        self.shape.buckets() * std::mem::size_of::<Bucket>()
    }

    #[inline(always)]
    fn buckets(&self) -> &[Bucket] {
        // SAFETY: the region holds `buckets()` initialised buckets (type invariant), is aligned
        // to 2 MiB, and is borrowed for as long as `self` is.
        unsafe {
            std::slice::from_raw_parts(self.table.as_ptr() as *const Bucket, self.shape.buckets())
        }
    }

    #[inline(always)]
    fn buckets_mut(&mut self) -> &mut [Bucket] {
        // SAFETY: as in `buckets`, and `&mut self` makes this the only borrow.
        unsafe {
            std::slice::from_raw_parts_mut(self.table.as_ptr() as *mut Bucket, self.shape.buckets())
        }
    }

    #[inline(always)]
    fn prefetch(&self, hash: KeyHash) {
        let [b1, b2] = self.shape.candidates(hash);
        let buckets = self.buckets();
        prefetch_line(&buckets[b1 as usize]);
        prefetch_line(&buckets[b2 as usize]);
    }

    /// Phase 1: every search against the table as it is.
    fn search_all(&self, searches: &[KeyHash], found: &mut Vec<[Location; 2]>) {
        found.clear();
        found.reserve(searches.len());
        let buckets = self.buckets();
        for &hash in searches.iter().take(PREFETCH_AHEAD) {
            self.prefetch(hash);
        }
        for (i, &hash) in searches.iter().enumerate() {
            if let Some(&ahead) = searches.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            let sig = hash.signature();
            let [b1, b2] = self.shape.candidates(hash);
            let first = &buckets[b1 as usize];
            let mut answer = [0; 2];
            if let Some(slot) = first.find(sig) {
                answer[0] = first.locs[slot];
            } else if b2 != b1 {
                let second = &buckets[b2 as usize];
                if let Some(slot) = second.find(sig) {
                    answer[1] = second.locs[slot];
                }
            }
            found.push(answer);
        }
    }

    /// Phase 2: remove exact `(signature, location)` matches.
    fn delete_all(&mut self, deletes: &[(KeyHash, Location)]) {
        for &(hash, _) in deletes.iter().take(PREFETCH_AHEAD) {
            self.prefetch(hash);
        }
        for (i, &(hash, loc)) in deletes.iter().enumerate() {
            if let Some(&(ahead, _)) = deletes.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            let sig = hash.signature();
            let candidates = self.shape.candidates(hash);
            for &bucket in distinct(&candidates) {
                let b = &mut self.buckets_mut()[bucket as usize];
                if let Some(slot) = b.find_exact(sig, loc) {
                    b.sigs[slot] = EMPTY_SIGNATURE;
                    b.locs[slot] = 0;
                    self.entries -= 1;
                    break;
                }
            }
        }
    }

    /// Phase 3: store every insert, recording what leaves the table.
    fn insert_all(&mut self, inserts: &[(KeyHash, Location)], results: &mut IndexResults) {
        for &(hash, _) in inserts.iter().take(PREFETCH_AHEAD) {
            self.prefetch(hash);
        }
        for (i, &(hash, loc)) in inserts.iter().enumerate() {
            if let Some(&(ahead, _)) = inserts.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            let shape = self.shape;
            if insert_one(shape, self.buckets_mut(), hash, loc, results) {
                self.entries += 1;
            }
        }
    }
}

/// Stores one entry; true if it took a slot that was empty (the table holds one more entry).
fn insert_one(
    shape: TableShape,
    buckets: &mut [Bucket],
    hash: KeyHash,
    loc: Location,
    results: &mut IndexResults,
) -> bool {
    let sig = hash.signature();
    let pair = shape.candidates(hash);
    let candidates = distinct(&pair);
    // Same signature in the pair: replace it.
    for &bucket in candidates {
        let b = &mut buckets[bucket as usize];
        if let Some(slot) = b.find(sig) {
            results
                .displaced
                .push(std::mem::replace(&mut b.locs[slot], loc));
            return false;
        }
    }
    // A free slot in either bucket.
    for &bucket in candidates {
        let b = &mut buckets[bucket as usize];
        if let Some(slot) = b.find(EMPTY_SIGNATURE) {
            b.sigs[slot] = sig;
            b.locs[slot] = loc;
            return true;
        }
    }
    // Both full: displace entries towards their alternate buckets, then drop the last one.
    let (mut carry_sig, mut carry_loc) = (sig, loc);
    let mut bucket = candidates[(sig as usize >> 8) % candidates.len()];
    for step in 0..MAX_DISPLACEMENTS {
        let b = &mut buckets[bucket as usize];
        // A victim that can move: its alternate bucket differs from this one.
        let start = (carry_sig as usize).wrapping_add(step) % BUCKET_SLOTS;
        let slot = (0..BUCKET_SLOTS)
            .map(|k| (start + k) % BUCKET_SLOTS)
            .find(|&s| shape.alternate(bucket, b.sigs[s]) != bucket)
            .unwrap_or(start);
        let victim_sig = std::mem::replace(&mut b.sigs[slot], carry_sig);
        let victim_loc = std::mem::replace(&mut b.locs[slot], carry_loc);
        (carry_sig, carry_loc) = (victim_sig, victim_loc);
        let next = shape.alternate(bucket, carry_sig);
        if next == bucket {
            break;
        }
        let nb = &mut buckets[next as usize];
        if let Some(free) = nb.find(EMPTY_SIGNATURE) {
            nb.sigs[free] = carry_sig;
            nb.locs[free] = carry_loc;
            return true;
        }
        bucket = next;
    }
    // The carried entry has no home: a lossy insert. The new entry took a slot, the dropped
    // one left it, so the count of entries is unchanged.
    results.displaced.push(carry_loc);
    results.lossy += 1;
    false
}

/// The distinct buckets of a pair, first bucket first.
#[inline(always)]
fn distinct(candidates: &[u32; 2]) -> &[u32] {
    if candidates[0] == candidates[1] {
        &candidates[..1]
    } else {
        &candidates[..]
    }
}

/// Asks the CPU to start loading the cache line at `bucket`.
#[inline(always)]
fn prefetch_line(bucket: &Bucket) {
    crate::region::prefetch(bucket as *const Bucket as *const u8);
}

impl BatchIndex for CpuIndex {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn slots(&self) -> usize {
        self.shape.slots()
    }

    fn submit(&mut self, batch: IndexBatch) -> Result<(), IndexError> {
        if self.done.is_some() {
            return Err(IndexError::Busy);
        }
        batch.validate()?;
        let mut results = self.spare.take().unwrap_or_default();
        results.clear();
        self.search_all(&batch.searches, &mut results.found);
        self.delete_all(&batch.deletes);
        self.insert_all(&batch.inserts, &mut results);
        self.done = Some((batch, results));
        Ok(())
    }

    fn complete(&mut self) -> Result<Option<(IndexBatch, IndexResults)>, IndexError> {
        Ok(self.done.take())
    }

    fn recycle(&mut self, results: IndexResults) {
        self.spare = Some(results);
    }

    fn clear(&mut self) -> Result<(), IndexError> {
        if self.done.is_some() {
            return Err(IndexError::Busy);
        }
        self.buckets_mut().fill(Bucket {
            sigs: [EMPTY_SIGNATURE; BUCKET_SLOTS],
            locs: [0; BUCKET_SLOTS],
        });
        self.entries = 0;
        Ok(())
    }
}
