//! One scheduler pass: every gathered op turned into index batches, run, and answered in order.
//!
//! # How a pass keeps ops in order with batches
//! A batch's searches see the index as before its inserts and deletes. The pass makes every op
//! behave as if the gathered ops ran one at a time, in order:
//! 1. Each chunk of ops becomes one batch: a search for every op that reads (GET, and every
//!    conditional op), an insert for every unconditional SET (the last SET of a key in a batch
//!    wins), and a delete for every eviction.
//! 2. When a batch completes, the locations it displaced are freed, then its ops are *resolved*
//!    in order against an **overlay**: the writes of this pass resolved so far, by key hash. A
//!    read sees the overlay first and the search result only where the overlay knows nothing.
//! 3. Conditional ops (add, replace, cas, append, prepend, incr, delete, touch) decide from what
//!    they see; their writes are collected per key (the last decision wins) and run as one more
//!    batch after the chunks. An unconditional SET resolved later cancels an earlier pending
//!    conditional insert of its key, since its own insert already ran.
//! 4. FLUSH ends a segment: everything before it finishes, the index and the slabs are emptied,
//!    then the ops after it run as a new segment.
//!
//! # Freeing
//! A location is freed exactly once, by whoever clears its live mark: the displaced handler (an
//! insert replaced it or the index dropped it), a delete once its batch has run, or the end of
//! the pass for items never indexed. Freed slots stay readable until every thread has moved on
//! ([`crate::epoch`]), so ops resolved to them earlier in the pass still read whole items.

use std::time::Instant;

use rustc_hash::FxHashMap;

use crate::index::{BatchIndex, IndexBatch, IndexError, IndexResults, KeyHash, Location};
use crate::item::{item_len, ItemMeta, ItemRef, NEVER, STALE, TOKEN_SENT};
use crate::op::{EvictReason, IncrStyle, Jobs, Op, OpKind, Outcome, SetMode, KEEP_EXPIRY};
use crate::slab::{AllocError, ClassEvent, Slabs};
use crate::stats::Stats;

/// What the pass has decided about a key so far.
#[derive(Clone, Copy, Debug)]
enum Overlay {
    /// Reads see this item.
    Item(Location),
    /// Reads see nothing.
    Absent,
}

/// Writes of conditional ops waiting for the write batch, per key.
#[derive(Debug, Default)]
struct PendingWrite {
    deletes: Vec<Location>,
    insert: Option<Location>,
    // What the index holds for the key under the pending insert (the insert would displace it).
    base: Option<Location>,
}

/// A batch in flight: which ops it answers and what to free when it has run.
struct InFlight {
    start: usize,
    end: usize,
    free_after: Vec<Location>,
}

/// Borrowed context of a pass.
pub(crate) struct PassContext<'a> {
    pub slabs: &'a Slabs,
    pub stats: &'a Stats,
    pub now_ms: u64,
}

/// The scheduler's state, owned by whichever thread runs the pass.
pub(crate) struct Core {
    index: Box<dyn BatchIndex>,
    spare: Vec<IndexBatch>,
    overlay: FxHashMap<KeyHash, Overlay>,
    inserted_at: FxHashMap<KeyHash, usize>,
    writes: FxHashMap<KeyHash, PendingWrite>,
    free_at_end: Vec<Location>,
    // Positions of ops across the gathered lists: list `i` starts at `offsets[i]`.
    offsets: Vec<usize>,
    cas_next: u64,
    cas_end: u64,
    cas_source: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// CAS versions a thread takes from the shared counter at a time.
pub(crate) const CAS_BLOCK: u64 = 1024;

impl Core {
    pub(crate) fn new(
        index: Box<dyn BatchIndex>,
        cas_source: std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) -> Core {
        Core {
            index,
            spare: Vec::new(),
            overlay: FxHashMap::default(),
            inserted_at: FxHashMap::default(),
            writes: FxHashMap::default(),
            free_at_end: Vec::new(),
            offsets: Vec::new(),
            cas_next: 0,
            cas_end: 0,
            cas_source,
        }
    }

    fn next_cas(&mut self) -> u64 {
        if self.cas_next == self.cas_end {
            self.cas_next = self
                .cas_source
                .fetch_add(CAS_BLOCK, std::sync::atomic::Ordering::Relaxed);
            self.cas_end = self.cas_next + CAS_BLOCK;
        }
        self.cas_next += 1;
        self.cas_next - 1
    }

    /// Runs every op of `lists` and every eviction they ask for; returns how many ops ran.
    pub(crate) fn pass(
        &mut self,
        cx: &PassContext<'_>,
        lists: &mut [Jobs],
        flush_first: bool,
    ) -> usize {
        self.offsets.clear();
        let mut total = 0;
        for list in lists.iter() {
            self.offsets.push(total);
            total += list.ops.len();
        }
        let result = self.run_segments(cx, lists, total, flush_first);
        if let Err(error) = result {
            self.recover(cx, lists, total, &error);
        }
        total
    }

    fn run_segments(
        &mut self,
        cx: &PassContext<'_>,
        lists: &mut [Jobs],
        total: usize,
        flush_first: bool,
    ) -> Result<(), IndexError> {
        if flush_first {
            self.flush(cx)?;
        }
        let mut evictions = self.take_evictions(cx, lists);
        let mut start = 0;
        while start <= total {
            // A segment ends at a FLUSH (or the end of the ops).
            let mut end = start;
            while end < total && !matches!(self.op(lists, end).kind, OpKind::Flush) {
                end += 1;
            }
            self.run_segment(cx, lists, start, end, std::mem::take(&mut evictions))?;
            if end == total {
                break;
            }
            self.flush(cx)?;
            self.op_mut(lists, end).outcome = Outcome::Flushed;
            start = end + 1;
        }
        Ok(())
    }

    fn run_segment(
        &mut self,
        cx: &PassContext<'_>,
        lists: &mut [Jobs],
        start: usize,
        end: usize,
        evictions: Vec<(KeyHash, Location)>,
    ) -> Result<(), IndexError> {
        let max_ops = self.index.max_batch_ops().max(1);
        let depth = self.index.max_in_flight().max(1);
        let mut in_flight: std::collections::VecDeque<InFlight> = Default::default();
        let mut at = start;
        let mut evictions = Some(evictions);
        loop {
            if at >= end && evictions.as_ref().is_none_or(|e| e.is_empty()) {
                break;
            }
            let mut batch = self.spare.pop().unwrap_or_default();
            batch.clear();
            let mut free_after = Vec::new();
            if let Some(evictions) = evictions.take() {
                for (hash, loc) in evictions {
                    batch.deletes.push((hash, loc));
                    free_after.push(loc);
                }
            }
            self.inserted_at.clear();
            let chunk_start = at;
            while at < end && batch.searches.len() < max_ops && batch.inserts.len() < max_ops {
                self.plan(cx, lists, at, &mut batch);
                at += 1;
            }
            if in_flight.len() == depth {
                self.finish_batch(cx, lists, &mut in_flight)?;
            }
            self.submit(cx, batch)?;
            in_flight.push_back(InFlight {
                start: chunk_start,
                end: at,
                free_after,
            });
        }
        while !in_flight.is_empty() {
            self.finish_batch(cx, lists, &mut in_flight)?;
        }
        self.run_writes(cx)?;
        for loc in self.free_at_end.drain(..) {
            cx.slabs.free(loc);
        }
        self.overlay.clear();
        Ok(())
    }

    /// Adds op `at` to the batch being built.
    fn plan(
        &mut self,
        cx: &PassContext<'_>,
        lists: &mut [Jobs],
        at: usize,
        batch: &mut IndexBatch,
    ) {
        let op = self.op_mut(lists, at);
        match op.kind {
            OpKind::Set {
                loc,
                mode: SetMode::Always,
            } => {
                let hash = op.hash;
                if let Some(&earlier) = self.inserted_at.get(&hash) {
                    // The last SET of a key in a batch wins; the earlier item is never indexed.
                    let old = std::mem::replace(&mut batch.inserts[earlier].1, loc);
                    cx.slabs.clear_live(old);
                    self.free_at_end.push(old);
                } else {
                    self.inserted_at.insert(hash, batch.inserts.len());
                    batch.inserts.push((hash, loc));
                }
                cx.slabs.set_live(loc);
            }
            OpKind::Flush => {}
            _ => {
                op.search = batch.searches.len() as u32;
                batch.searches.push(op.hash);
            }
        }
    }

    fn submit(&mut self, cx: &PassContext<'_>, batch: IndexBatch) -> Result<(), IndexError> {
        let stats = cx.stats;
        Stats::add(&stats.batches, 1);
        Stats::add(&stats.batch_searches, batch.searches.len() as u64);
        Stats::add(&stats.batch_inserts, batch.inserts.len() as u64);
        Stats::add(&stats.batch_deletes, batch.deletes.len() as u64);
        stats.batch_ops.record(batch.len() as u64);
        let started = Instant::now();
        let result = self.index.submit(batch);
        let nanos = started.elapsed().as_nanos() as u64;
        Stats::add(&stats.index_nanos, nanos);
        result
    }

    fn complete(&mut self, cx: &PassContext<'_>) -> Result<(IndexBatch, IndexResults), IndexError> {
        let started = Instant::now();
        let done = self.index.complete();
        let nanos = started.elapsed().as_nanos() as u64;
        Stats::add(&cx.stats.index_nanos, nanos);
        cx.stats.batch_micros.record(nanos / 1000);
        done?.ok_or_else(|| IndexError::Device("a submitted batch did not complete".into()))
    }

    /// Completes the oldest batch: frees what it displaced and deleted, resolves its ops.
    fn finish_batch(
        &mut self,
        cx: &PassContext<'_>,
        lists: &mut [Jobs],
        in_flight: &mut std::collections::VecDeque<InFlight>,
    ) -> Result<(), IndexError> {
        let (batch, results) = self.complete(cx)?;
        let flight = in_flight.pop_front().expect("a batch in flight");
        self.settle_displaced(cx, &results);
        for loc in flight.free_after {
            cx.slabs.free(loc);
        }
        for at in flight.start..flight.end {
            self.resolve(cx, lists, at, &results);
        }
        self.index.recycle(results);
        self.spare.push(batch);
        Ok(())
    }

    fn settle_displaced(&mut self, cx: &PassContext<'_>, results: &IndexResults) {
        for &loc in &results.displaced {
            if cx.slabs.clear_live(loc) {
                cx.slabs.free(loc);
            }
        }
        Stats::add(&cx.stats.index_lossy, results.lossy as u64);
        Stats::add(
            &cx.stats.index_replaced,
            (results.displaced.len() - results.lossy.min(results.displaced.len())) as u64,
        );
    }

    /// Runs the pending writes of conditional ops as one batch (or several, if large).
    fn run_writes(&mut self, cx: &PassContext<'_>) -> Result<(), IndexError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let max_ops = self.index.max_batch_ops().max(1);
        let mut writes: Vec<(KeyHash, PendingWrite)> = self.writes.drain().collect();
        while !writes.is_empty() {
            let mut batch = self.spare.pop().unwrap_or_default();
            batch.clear();
            let mut free_after = Vec::new();
            while let Some((hash, write)) = writes.pop() {
                for loc in write.deletes {
                    batch.deletes.push((hash, loc));
                    free_after.push(loc);
                }
                if let Some(loc) = write.insert {
                    batch.inserts.push((hash, loc));
                }
                if batch.deletes.len() >= max_ops || batch.inserts.len() >= max_ops {
                    break;
                }
            }
            self.submit(cx, batch)?;
            let (batch, results) = self.complete(cx)?;
            self.settle_displaced(cx, &results);
            for loc in free_after {
                cx.slabs.free(loc);
            }
            self.index.recycle(results);
            self.spare.push(batch);
        }
        Ok(())
    }

    /// Turns the eviction requests of every list into index deletes (their slots are freed once
    /// the deletes have run).
    fn take_evictions(
        &mut self,
        cx: &PassContext<'_>,
        lists: &mut [Jobs],
    ) -> Vec<(KeyHash, Location)> {
        let mut deletes = Vec::new();
        for list in lists.iter_mut() {
            for (loc, reason) in list.evict.drain(..) {
                if reason == EvictReason::Clock {
                    cx.slabs.victim_settled(loc);
                }
                if !cx.slabs.is_live(loc) {
                    continue;
                }
                // SAFETY: this thread is pinned and `loc` is live, so it holds a published item.
                let Some(item) = (unsafe { cx.slabs.item(loc) }) else {
                    continue;
                };
                if reason == EvictReason::Expired && !item.expired(cx.now_ms) {
                    continue;
                }
                let hash = KeyHash::of(item.key());
                if cx.slabs.clear_live(loc) {
                    deletes.push((hash, loc));
                    let (counter, event) = match reason {
                        EvictReason::Clock => (&cx.stats.evictions, ClassEvent::Evicted),
                        EvictReason::Expired => {
                            (&cx.stats.expired_reclaimed, ClassEvent::Reclaimed)
                        }
                    };
                    Stats::add(counter, 1);
                    cx.slabs
                        .count_removal(loc, &item, event, (cx.now_ms / 1000) as u32);
                }
            }
        }
        deletes
    }

    /// FLUSH: forget every item and empty the index. Nothing is pending between segments.
    fn flush(&mut self, cx: &PassContext<'_>) -> Result<(), IndexError> {
        self.index.clear()?;
        cx.slabs.evict_all();
        Stats::add(&cx.stats.cmd_flush, 1);
        Ok(())
    }

    /// After an engine failure: the index is unknown, so forget everything; ops not yet answered
    /// get misses or "no memory".
    fn recover(
        &mut self,
        cx: &PassContext<'_>,
        lists: &mut [Jobs],
        total: usize,
        error: &IndexError,
    ) {
        tracing::error!(%error, "index engine failed; the cache is emptied");
        while let Ok(Some((_, results))) = self.index.complete() {
            self.index.recycle(results);
        }
        let _ = self.index.clear();
        self.writes.clear();
        self.overlay.clear();
        cx.slabs.evict_all();
        let mut unpublished: Vec<Location> = std::mem::take(&mut self.free_at_end);
        for at in 0..total {
            let op = self.op_mut(lists, at);
            if let OpKind::Set { loc, .. } = op.kind {
                unpublished.push(loc);
            }
            if op.outcome == Outcome::Pending {
                op.outcome = match op.kind {
                    OpKind::Get => Outcome::Miss,
                    OpKind::Delete | OpKind::MetaDelete { .. } | OpKind::Touch { .. } => {
                        Outcome::NotFound
                    }
                    _ => Outcome::NoMemory,
                };
            }
        }
        unpublished.sort_unstable();
        unpublished.dedup();
        for loc in unpublished {
            // evict_all freed the live ones; the rest were never indexed.
            if !cx.slabs.is_live(loc) {
                cx.slabs.free(loc);
            }
        }
    }

    fn locate(&self, at: usize) -> (usize, usize) {
        let list = self.offsets.partition_point(|&o| o <= at) - 1;
        (list, at - self.offsets[list])
    }

    fn op<'l>(&self, lists: &'l [Jobs], at: usize) -> &'l Op {
        let (list, i) = self.locate(at);
        &lists[list].ops[i]
    }

    fn op_mut<'l>(&self, lists: &'l mut [Jobs], at: usize) -> &'l mut Op {
        let (list, i) = self.locate(at);
        &mut lists[list].ops[i]
    }

    /// The live, unexpired item the op's key names now, if any.
    fn current<'s>(
        &self,
        cx: &PassContext<'s>,
        key: &[u8],
        hash: KeyHash,
        found: Option<[Location; 2]>,
    ) -> Option<(Location, ItemRef<'s>)> {
        let check = |loc: Location| -> Option<(Location, ItemRef<'s>)> {
            if loc == 0 {
                return None;
            }
            // SAFETY: this thread is pinned; `loc` came from the index or the overlay during
            // this pass, so its slot holds a published item not reused before the thread moves on.
            let item = unsafe { cx.slabs.item(loc) }?;
            (item.key() == key && !item.expired(cx.now_ms)).then_some((loc, item))
        };
        match self.overlay.get(&hash) {
            Some(&Overlay::Item(loc)) => check(loc),
            Some(Overlay::Absent) => None,
            None => {
                let [a, b] = found?;
                check(a).or_else(|| check(b))
            }
        }
    }

    /// Records a conditional insert of `loc` for `hash`, replacing `current` (what reads saw).
    fn write_insert(
        &mut self,
        cx: &PassContext<'_>,
        hash: KeyHash,
        loc: Location,
        current: Option<Location>,
    ) {
        let write = self.writes.entry(hash).or_default();
        match write.insert.replace(loc) {
            Some(old) => {
                cx.slabs.clear_live(old);
                self.free_at_end.push(old);
            }
            None => write.base = current,
        }
        cx.slabs.set_live(loc);
        self.overlay.insert(hash, Overlay::Item(loc));
    }

    /// Records the removal of `current`, the item reads of `hash` see.
    fn write_delete(&mut self, cx: &PassContext<'_>, hash: KeyHash, current: Location) {
        let write = self.writes.entry(hash).or_default();
        if write.insert == Some(current) {
            // Cancel the pending insert, and remove what the index still holds under it.
            write.insert = None;
            cx.slabs.clear_live(current);
            self.free_at_end.push(current);
            if let Some(base) = write.base.take() {
                if cx.slabs.clear_live(base) {
                    write.deletes.push(base);
                }
            }
        } else if cx.slabs.clear_live(current) {
            write.deletes.push(current);
        }
        self.overlay.insert(hash, Overlay::Absent);
    }

    /// Stores a new item made by the scheduler itself (append, incr: `copy_of` None, a new CAS
    /// version), or a changed copy of `copy_of` (touch, invalidate: its CAS version, marks and
    /// access time).
    fn store(
        &mut self,
        cx: &PassContext<'_>,
        key: &[u8],
        parts: &[&[u8]],
        flags: u32,
        expire_ms: u64,
        copy_of: Option<&ItemRef<'_>>,
    ) -> Option<Location> {
        let meta = match copy_of {
            Some(item) => ItemMeta {
                cas: item.cas(),
                expire_ms,
                flags,
                state: item.state(),
                access_s: item.access_s(),
            },
            None => ItemMeta {
                cas: self.next_cas(),
                expire_ms,
                flags,
                state: 0,
                access_s: (cx.now_ms / 1000) as u32,
            },
        };
        match cx.slabs.store(key, parts, meta) {
            Ok(loc) => Some(loc),
            Err(AllocError::TooLarge) => {
                Stats::add(&cx.stats.store_too_large, 1);
                None
            }
            Err(AllocError::Full) => {
                Stats::add(&cx.stats.store_no_memory, 1);
                let value_len = parts.iter().map(|p| p.len()).sum();
                cx.slabs
                    .count_for_len(item_len(key.len(), value_len), ClassEvent::OutOfMemory);
                None
            }
        }
    }

    /// Decides op `at` in order, now that its batch has run.
    fn resolve(
        &mut self,
        cx: &PassContext<'_>,
        lists: &mut [Jobs],
        at: usize,
        results: &IndexResults,
    ) {
        let (list, i) = self.locate(at);
        let op = lists[list].ops[i];
        let found = (op.kind != OpKind::Flush)
            .then(|| results.found.get(op.search as usize).copied())
            .flatten();
        let key = lists[list].key(&op);
        let stats = cx.stats;
        let outcome = match op.kind {
            OpKind::Get => match self.overlay.get(&op.hash) {
                Some(&Overlay::Item(loc)) => Outcome::Item(loc),
                Some(Overlay::Absent) => Outcome::Miss,
                None => Outcome::Candidates(found.unwrap_or_default()),
            },
            OpKind::Set { loc, mode } => {
                Stats::add(&stats.cmd_set, 1);
                self.resolve_set(cx, key, op.hash, found, loc, mode)
            }
            OpKind::Delete => match self.current(cx, key, op.hash, found) {
                Some((loc, _)) => {
                    self.write_delete(cx, op.hash, loc);
                    Stats::add(&stats.delete_hits, 1);
                    Outcome::Deleted
                }
                None => {
                    Stats::add(&stats.delete_misses, 1);
                    Outcome::NotFound
                }
            },
            OpKind::Touch { expire_ms } => {
                Stats::add(&stats.cmd_touch, 1);
                match self.current(cx, key, op.hash, found) {
                    Some((loc, item)) => {
                        Stats::add(&stats.touch_hits, 1);
                        // A copy with the new expiry: items never change under readers, so a
                        // read ordered before the touch still sees the old expiry.
                        match self.store(
                            cx,
                            key,
                            &[item.value()],
                            item.flags(),
                            expire_ms,
                            Some(&item),
                        ) {
                            Some(new) => {
                                self.write_insert(cx, op.hash, new, Some(loc));
                                Outcome::Touched
                            }
                            None => Outcome::NoMemory,
                        }
                    }
                    None => {
                        Stats::add(&stats.touch_misses, 1);
                        Outcome::NotFound
                    }
                }
            }
            OpKind::MetaDelete {
                cas,
                invalidate,
                expire_ms,
            } => self.resolve_meta_delete(cx, key, op.hash, found, (cas, invalidate, expire_ms)),
            OpKind::Incr {
                delta,
                decr,
                style,
                cas,
            } => self.resolve_incr(cx, key, op.hash, found, (delta, decr, style, cas)),
            OpKind::Flush => Outcome::Flushed,
        };
        lists[list].ops[i].outcome = outcome;
    }

    fn resolve_set(
        &mut self,
        cx: &PassContext<'_>,
        key: &[u8],
        hash: KeyHash,
        found: Option<[Location; 2]>,
        loc: Location,
        mode: SetMode,
    ) -> Outcome {
        let stats = cx.stats;
        if mode == SetMode::Always {
            // Its insert ran in the batch: it overrides conditional writes decided before it.
            if let Some(write) = self.writes.get_mut(&hash) {
                if let Some(old) = write.insert.take() {
                    cx.slabs.clear_live(old);
                    self.free_at_end.push(old);
                }
                write.base = None;
            }
            self.overlay.insert(hash, Overlay::Item(loc));
            return Outcome::Stored;
        }
        let current = self.current(cx, key, hash, found);
        let base = current.map(|(l, _)| l);
        let outcome = match (mode, current) {
            (SetMode::Add, None) | (SetMode::Replace, Some(_)) => {
                self.write_insert(cx, hash, loc, base);
                return Outcome::Stored;
            }
            (SetMode::Add, Some(_)) | (SetMode::Replace, None) => {
                Stats::add(&stats.not_stored, 1);
                Outcome::NotStored
            }
            (SetMode::Cas(_) | SetMode::CasOrStale(_), None) => {
                Stats::add(&stats.cas_misses, 1);
                Outcome::NotFound
            }
            (SetMode::CasOrStale(version), Some((_, item))) if version < item.cas() => {
                // SAFETY: this thread is pinned and `loc` is the new item it was handed, not yet
                // seen by any reader.
                if let Some(new) = unsafe { cx.slabs.item(loc) } {
                    new.set_expire_ms(item.expire_ms());
                    new.mark(STALE | (item.state() & TOKEN_SENT));
                }
                Stats::add(&stats.cas_hits, 1);
                self.write_insert(cx, hash, loc, base);
                return Outcome::Stored;
            }
            (SetMode::Cas(version) | SetMode::CasOrStale(version), Some((_, item))) => {
                if item.cas() == version {
                    Stats::add(&stats.cas_hits, 1);
                    self.write_insert(cx, hash, loc, base);
                    return Outcome::Stored;
                }
                Stats::add(&stats.cas_badval, 1);
                Outcome::Exists
            }
            (SetMode::Append | SetMode::Prepend | SetMode::CasAppend { .. }, None) => {
                Stats::add(&stats.not_stored, 1);
                Outcome::NotStored
            }
            (SetMode::CasAppend { cas, .. }, Some((_, item))) if item.cas() != cas => {
                Stats::add(&stats.cas_badval, 1);
                Outcome::Exists
            }
            (SetMode::Append | SetMode::Prepend | SetMode::CasAppend { .. }, Some((_, item))) => {
                let append = matches!(
                    mode,
                    SetMode::Append | SetMode::CasAppend { prepend: false, .. }
                );
                // SAFETY: this thread is pinned and `loc` is the fragment item it was handed.
                let fragment = unsafe { cx.slabs.item(loc) };
                let combined = fragment.and_then(|fragment| {
                    let parts: [&[u8]; 2] = if append {
                        [item.value(), fragment.value()]
                    } else {
                        [fragment.value(), item.value()]
                    };
                    self.store(cx, key, &parts, item.flags(), item.expire_ms(), None)
                });
                match combined {
                    Some(new) => {
                        self.write_insert(cx, hash, new, base);
                        Outcome::Stored
                    }
                    None => Outcome::NoMemory,
                }
            }
            (SetMode::Always, _) => unreachable!("handled above"),
        };
        // The op's own item was not stored.
        self.free_at_end.push(loc);
        outcome
    }

    fn resolve_meta_delete(
        &mut self,
        cx: &PassContext<'_>,
        key: &[u8],
        hash: KeyHash,
        found: Option<[Location; 2]>,
        (cas, invalidate, expire_ms): (u64, bool, u64),
    ) -> Outcome {
        let stats = cx.stats;
        let Some((loc, item)) = self.current(cx, key, hash, found) else {
            Stats::add(&stats.delete_misses, 1);
            return Outcome::NotFound;
        };
        if cas != 0 && item.cas() != cas {
            return Outcome::Exists;
        }
        Stats::add(&stats.delete_hits, 1);
        if !invalidate {
            self.write_delete(cx, hash, loc);
            return Outcome::Deleted;
        }
        // Invalidated: a copy under a new CAS version, marked stale, its marks and access time
        // kept (memcached bumps the CAS of an invalidated item).
        let expire_ms = if expire_ms == KEEP_EXPIRY {
            item.expire_ms()
        } else {
            expire_ms
        };
        let new = self.store(cx, key, &[item.value()], item.flags(), expire_ms, None);
        let Some(new) = new else {
            return Outcome::NoMemory;
        };
        // SAFETY: this thread is pinned and `new` is the item it just wrote, unseen by readers.
        if let Some(copy) = unsafe { cx.slabs.item(new) } {
            copy.mark(item.state() | STALE);
        }
        self.write_insert(cx, hash, new, Some(loc));
        Outcome::Deleted
    }

    fn resolve_incr(
        &mut self,
        cx: &PassContext<'_>,
        key: &[u8],
        hash: KeyHash,
        found: Option<[Location; 2]>,
        (delta, decr, style, cas): (u64, bool, IncrStyle, u64),
    ) -> Outcome {
        let stats = cx.stats;
        let current = self.current(cx, key, hash, found);
        let (flags, expire_ms) = current
            .map(|(_, item)| (item.flags(), item.expire_ms()))
            .unwrap_or((0, NEVER));
        Stats::add(
            if current.is_some() {
                &stats.incr_hits
            } else {
                &stats.incr_misses
            },
            1,
        );
        let mut digits = [0u8; 24];
        let (outcome, text) = match style {
            IncrStyle::Memcached => {
                let Some((_, item)) = current else {
                    return Outcome::NotFound;
                };
                if cas != 0 && item.cas() != cas {
                    return Outcome::Exists;
                }
                let Some(old) = parse_unsigned(item.value()) else {
                    return Outcome::NotANumber;
                };
                let new = if decr {
                    old.saturating_sub(delta)
                } else {
                    old.wrapping_add(delta)
                };
                (
                    Outcome::Unsigned(new),
                    format_into(&mut digits, new as i128),
                )
            }
            IncrStyle::Redis => {
                let old = match current {
                    None => 0,
                    Some((_, item)) => match parse_signed(item.value()) {
                        Some(old) => old,
                        None => return Outcome::NotANumber,
                    },
                };
                let Ok(delta) = i64::try_from(delta) else {
                    return Outcome::Overflow;
                };
                let new = if decr {
                    old.checked_sub(delta)
                } else {
                    old.checked_add(delta)
                };
                let Some(new) = new else {
                    return Outcome::Overflow;
                };
                (Outcome::Signed(new), format_into(&mut digits, new as i128))
            }
        };
        let text = text.to_vec();
        match self.store(cx, key, &[&text], flags, expire_ms, None) {
            Some(new) => {
                self.write_insert(cx, hash, new, current.map(|(l, _)| l));
                outcome
            }
            None => Outcome::NoMemory,
        }
    }
}

/// memcached's number (as its `strtoull` reads it): optional white space, 1 to 20 ASCII digits
/// that fit a u64, optional white space.
pub(crate) fn parse_unsigned(text: &[u8]) -> Option<u64> {
    let text = text.trim_ascii();
    if text.is_empty() || text.len() > 20 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// Redis's number: an optional '-', then digits without a leading zero (or "0"), in i64.
pub(crate) fn parse_signed(text: &[u8]) -> Option<i64> {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    if digits.is_empty()
        || text.len() > 20
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits.len() > 1 && digits[0] == b'0')
        || digits == b"0" && text.len() > 1
    {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// Writes `n` in decimal at the end of `buf`; returns the digits.
fn format_into(buf: &mut [u8; 24], n: i128) -> &[u8] {
    let mut at = buf.len();
    let negative = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}
