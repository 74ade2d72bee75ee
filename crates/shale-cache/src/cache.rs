//! The cache: slab memory, an index engine behind the scheduler, a clock and counters; and the
//! per-thread [`Worker`] through which connection threads use it.
//!
//! A connection thread works in rounds: [`Worker::begin`] (pin), then ops ([`Worker::get`],
//! [`Worker::set`], ...) in request order, then [`Worker::execute`] (one scheduler pass), then
//! [`Worker::outcome`] and [`Worker::read`] to build replies, then [`Worker::end`] (unpin). Item
//! views returned by `read` are valid until `end`.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::index::cpu::CpuIndex;
use crate::index::{BatchIndex, IndexError, KeyHash, Location, TableShape};
use crate::item::{item_len, ItemMeta, ItemRef, FETCHED};
use crate::op::{EvictReason, IncrStyle, Jobs, OpId, OpKind, Outcome, SetMode};
use crate::sched::pass::{Core, PassContext, CAS_BLOCK};
use crate::sched::Scheduler;
use crate::slab::{AllocError, ClassEvent, Slabs, DEFAULT_GROWTH, PAGE_SIZE};
use crate::stats::Stats;

/// Bytes of `maxmemory` per index slot when the slot count is not given: the index takes at most
/// an eighth of the memory (8 bytes per slot), enough for items of 64 bytes and up at full load.
pub const DEFAULT_BYTES_PER_INDEX_SLOT: usize = 64;

/// Fewest index slots.
pub const MIN_INDEX_SLOTS: usize = 1024;

/// How many ops past the one being read [`Worker::read`] starts loading the items of: replies are
/// built in op order, and a multi-get of 32 keys otherwise waits for 32 cache misses in a row.
const READ_AHEAD: u32 = 8;

/// How a cache is built.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Memory for items and the index together (`maxmemory`).
    pub memory: usize,
    /// Index slots; `None` sizes the index from `memory` ([`DEFAULT_BYTES_PER_INDEX_SLOT`]).
    pub index_slots: Option<usize>,
    /// Connection threads that will use the cache (each gets a [`Worker`] number below this).
    pub threads: usize,
    /// Growth factor between slab classes ([`DEFAULT_GROWTH`]).
    pub growth: f64,
    /// Mega-KV's batch period under load (zero: run as soon as the engine is free).
    pub batch_period: Duration,
}

impl CacheConfig {
    /// A configuration of `memory` bytes for `threads` threads, everything else default.
    pub fn new(memory: usize, threads: usize) -> CacheConfig {
        CacheConfig {
            memory,
            index_slots: None,
            threads,
            growth: DEFAULT_GROWTH,
            batch_period: Duration::ZERO,
        }
    }

    /// Index slots this configuration asks for: the given count, or the largest power of two at
    /// most `memory / DEFAULT_BYTES_PER_INDEX_SLOT`.
    pub fn index_slots(&self) -> usize {
        let slots = self.index_slots.unwrap_or_else(|| {
            let want = (self.memory / DEFAULT_BYTES_PER_INDEX_SLOT).max(MIN_INDEX_SLOTS);
            1usize << (usize::BITS - 1 - want.leading_zeros())
        });
        TableShape::for_slots(slots.max(MIN_INDEX_SLOTS)).slots()
    }

    /// Bytes the index of this configuration takes.
    pub fn index_bytes(&self) -> usize {
        self.index_slots() * 8
    }

    /// Bytes left for slab memory once the index and the slab bitmaps are paid for.
    pub fn slab_bytes(&self) -> usize {
        let rest = self.memory.saturating_sub(self.index_bytes());
        let per_page = PAGE_SIZE + Slabs::OVERHEAD_PER_PAGE;
        (rest / per_page).max(1) * PAGE_SIZE
    }
}

/// The cache's clock: milliseconds since it started, never 0 (0 means "never expires").
#[derive(Debug)]
pub struct Clock {
    base: Instant,
    unix_base_ms: u64,
}

impl Clock {
    fn new() -> Clock {
        let unix_base_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Clock {
            base: Instant::now(),
            unix_base_ms,
        }
    }

    /// Now.
    #[inline]
    pub fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis() as u64 + 1
    }

    /// The cache-clock millisecond of a Unix time in milliseconds (1 if it is in the past).
    pub fn from_unix_ms(&self, unix_ms: u64) -> u64 {
        unix_ms.saturating_sub(self.unix_base_ms).max(1)
    }

    /// The Unix time in milliseconds of a cache-clock millisecond.
    pub fn to_unix_ms(&self, at: u64) -> u64 {
        self.unix_base_ms + at.saturating_sub(1)
    }
}

/// A Mega-KV cache. See the module documentation.
pub struct Cache {
    slabs: Slabs,
    stats: Stats,
    sched: Scheduler,
    clock: Clock,
    cas_source: Arc<AtomicU64>,
    memory: usize,
    index_name: &'static str,
    index_slots: usize,
}

impl Cache {
    /// A cache over `index`, whose slots should be `config.index_slots()`.
    ///
    /// # Errors
    /// If the slab memory cannot be mapped.
    pub fn new(config: &CacheConfig, index: Box<dyn BatchIndex>) -> io::Result<Cache> {
        let threads = config.threads.max(1);
        let slabs = Slabs::new(config.slab_bytes(), config.growth, threads)?;
        let cas_source = Arc::new(AtomicU64::new(1));
        let index_name = index.name();
        let index_slots = index.slots();
        let core = Core::new(index, Arc::clone(&cas_source));
        Ok(Cache {
            slabs,
            stats: Stats::default(),
            sched: Scheduler::new(core, threads, config.batch_period),
            clock: Clock::new(),
            cas_source,
            memory: config.memory,
            index_name,
            index_slots,
        })
    }

    /// A cache over a [`CpuIndex`] of `config.index_slots()`.
    ///
    /// # Errors
    /// If the index or the slab memory cannot be mapped.
    pub fn with_cpu_index(config: &CacheConfig) -> io::Result<Cache> {
        let index =
            CpuIndex::new(config.index_slots()).map_err(|e: IndexError| io::Error::other(e))?;
        Cache::new(config, Box::new(index))
    }

    /// The handle of connection thread `thread` (below `config.threads`). One per thread.
    pub fn worker(&self, thread: usize) -> Worker<'_> {
        assert!(
            thread < self.slabs.epochs().threads(),
            "thread {thread} out of range"
        );
        Worker {
            cache: self,
            thread,
            jobs: Jobs::default(),
            cas_next: 0,
            cas_end: 0,
            now_ms: self.clock.now_ms(),
            local: LocalCounts::default(),
            read_ahead: 0,
        }
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The slab memory.
    pub fn slabs(&self) -> &Slabs {
        &self.slabs
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// `maxmemory`.
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// The index engine's name.
    pub fn index_name(&self) -> &'static str {
        self.index_name
    }

    /// The index's slots.
    pub fn index_slots(&self) -> usize {
        self.index_slots
    }

    /// Items in the cache.
    pub fn items(&self) -> usize {
        self.slabs.live_items()
    }

    /// Runs a FLUSH after `delay` (memcached's `flush_all <delay>`).
    pub fn flush_after(&self, delay: Duration) {
        let at = self.clock.now_ms() + delay.as_millis() as u64;
        self.sched.flush_at.store(at.max(1), Ordering::Relaxed);
    }
}

/// Per-thread counters added to the shared ones at the end of a round.
#[derive(Debug, Default)]
struct LocalCounts {
    gets: u64,
    hits: u64,
    misses: u64,
    expired: u64,
}

/// Why a SET could not be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The item is larger than the largest slot.
    TooLarge,
    /// The cache has no memory for it and cannot evict any (its size class holds no memory).
    NoMemory,
    /// Evictions are under way: run this round, then try again in the next.
    Retry,
}

/// One connection thread's use of the cache. See the module documentation.
pub struct Worker<'c> {
    cache: &'c Cache,
    thread: usize,
    jobs: Jobs,
    cas_next: u64,
    cas_end: u64,
    now_ms: u64,
    local: LocalCounts,
    /// Ops below this have had their items prefetched ([`READ_AHEAD`]).
    read_ahead: u32,
}

impl<'c> Worker<'c> {
    /// The cache.
    pub fn cache(&self) -> &'c Cache {
        self.cache
    }

    /// Starts a round: pins the thread and reads the clock.
    pub fn begin(&mut self) {
        self.cache.slabs.epochs().pin(self.thread);
        self.now_ms = self.cache.clock.now_ms();
    }

    /// Ends a round: forgets its ops, adds its counters, unpins the thread.
    pub fn end(&mut self) {
        let evict = std::mem::take(&mut self.jobs.evict);
        self.jobs.clear();
        self.jobs.evict = evict;
        self.read_ahead = 0;
        self.publish_counts();
        self.cache.slabs.epochs().unpin(self.thread);
    }

    /// Adds the hits and misses counted since the last call to the cache's stats (`end` does it
    /// too). A server calls it before sending the round's replies.
    pub fn publish_counts(&mut self) {
        let stats = &self.cache.stats;
        let local = std::mem::take(&mut self.local);
        if local.gets > 0 {
            Stats::add(&stats.cmd_get, local.gets);
            Stats::add(&stats.get_hits, local.hits);
            Stats::add(&stats.get_misses, local.misses);
            Stats::add(&stats.get_expired, local.expired);
        }
    }

    /// The round's clock reading.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The round's clock reading in whole seconds (items' access times).
    pub fn now_s(&self) -> u32 {
        (self.now_ms / 1000) as u32
    }

    /// Ops queued in this round.
    pub fn pending(&self) -> usize {
        self.jobs.ops.len()
    }

    /// Queues a lookup.
    pub fn get(&mut self, key: &[u8]) -> OpId {
        self.jobs.push(key, KeyHash::of(key), OpKind::Get)
    }

    /// Writes a new item (its value is the concatenation of `value`) and queues its store.
    ///
    /// # Errors
    /// See [`StoreError`]; nothing is queued.
    pub fn set(
        &mut self,
        key: &[u8],
        value: &[&[u8]],
        flags: u32,
        expire_ms: u64,
        mode: SetMode,
    ) -> Result<OpId, StoreError> {
        self.set_marked(key, value, flags, expire_ms, mode, 0)
    }

    /// [`Self::set`] of an item that starts with the marks `state` ([`crate::item::TOKEN_SENT`]
    /// for a meta get's vivified item).
    ///
    /// # Errors
    /// See [`StoreError`]; nothing is queued.
    pub fn set_marked(
        &mut self,
        key: &[u8],
        value: &[&[u8]],
        flags: u32,
        expire_ms: u64,
        mode: SetMode,
        state: u8,
    ) -> Result<OpId, StoreError> {
        let meta = ItemMeta {
            cas: self.next_cas(),
            expire_ms,
            flags,
            state,
            access_s: self.now_s(),
        };
        match self.cache.slabs.store(key, value, meta) {
            Ok(loc) => Ok(self
                .jobs
                .push(key, KeyHash::of(key), OpKind::Set { loc, mode })),
            Err(AllocError::TooLarge) => {
                Stats::add(&self.cache.stats.store_too_large, 1);
                Err(StoreError::TooLarge)
            }
            Err(AllocError::Full) => {
                let value_len: usize = value.iter().map(|v| v.len()).sum();
                let class = self
                    .cache
                    .slabs
                    .classes()
                    .for_len(item_len(key.len(), value_len))
                    .expect("a class, since the item was not too large");
                let mut victims = Vec::new();
                let coming = self.cache.slabs.sweep(class, &mut victims);
                self.jobs
                    .evict
                    .extend(victims.into_iter().map(|v| (v, EvictReason::Clock)));
                if coming {
                    Err(StoreError::Retry)
                } else {
                    Stats::add(&self.cache.stats.store_no_memory, 1);
                    self.cache
                        .slabs
                        .count_for_len(item_len(key.len(), value_len), ClassEvent::OutOfMemory);
                    Err(StoreError::NoMemory)
                }
            }
        }
    }

    /// Queues a delete.
    pub fn delete(&mut self, key: &[u8]) -> OpId {
        self.jobs.push(key, KeyHash::of(key), OpKind::Delete)
    }

    /// Queues a meta delete: see [`OpKind::MetaDelete`].
    pub fn meta_delete(&mut self, key: &[u8], cas: u64, invalidate: bool, expire_ms: u64) -> OpId {
        self.jobs.push(
            key,
            KeyHash::of(key),
            OpKind::MetaDelete {
                cas,
                invalidate,
                expire_ms,
            },
        )
    }

    /// Queues a change of expiry of a present key.
    pub fn touch(&mut self, key: &[u8], expire_ms: u64) -> OpId {
        self.jobs
            .push(key, KeyHash::of(key), OpKind::Touch { expire_ms })
    }

    /// Queues an increment (or decrement).
    pub fn incr(&mut self, key: &[u8], delta: u64, decr: bool, style: IncrStyle) -> OpId {
        self.incr_if(key, delta, decr, style, 0)
    }

    /// Queues an increment of the item only if its CAS version is `cas` (0: any).
    pub fn incr_if(
        &mut self,
        key: &[u8],
        delta: u64,
        decr: bool,
        style: IncrStyle,
        cas: u64,
    ) -> OpId {
        let kind = OpKind::Incr {
            delta,
            decr,
            style,
            cas,
        };
        self.jobs.push(key, KeyHash::of(key), kind)
    }

    /// Queues a FLUSH: every item stored before it is forgotten.
    pub fn flush(&mut self) -> OpId {
        self.jobs.push(&[], KeyHash(0), OpKind::Flush)
    }

    /// Runs the round's ops.
    pub fn execute(&mut self) {
        let cx = PassContext {
            slabs: &self.cache.slabs,
            stats: &self.cache.stats,
            now_ms: self.now_ms,
        };
        self.cache.sched.execute(&cx, self.thread, &mut self.jobs);
    }

    /// What happened to op `id`.
    #[inline]
    pub fn outcome(&self, id: OpId) -> Outcome {
        self.jobs.ops[id.0 as usize].outcome
    }

    /// The item a GET op found: its key verified, unexpired. Counts the hit or miss and marks
    /// the item read (referenced for CLOCK, [`crate::item::FETCHED`], its access time).
    pub fn read(&mut self, id: OpId) -> Option<ItemRef<'c>> {
        self.read_marked(id, true).map(|(item, _)| item)
    }

    /// [`Self::read`] that also tells whether the item had been read before; with `bump` false
    /// (meta `u`) the item is not marked read.
    pub fn read_marked(&mut self, id: OpId, bump: bool) -> Option<(ItemRef<'c>, bool)> {
        let (loc, item) = self.find(id, true)?;
        let fetched = if bump {
            self.cache.slabs.reference(loc);
            item.record_read(self.now_s())
        } else {
            item.state() & FETCHED != 0
        };
        Some((item, fetched))
    }

    /// The item a GET op found, neither counted as a GET nor marked read (the item a meta
    /// arithmetic left, for its reply's flags).
    pub fn peek(&mut self, id: OpId) -> Option<ItemRef<'c>> {
        self.find(id, false).map(|(_, item)| item)
    }

    /// The item a SET op stored, if it did ([`Outcome::Stored`]).
    pub fn stored(&self, id: OpId) -> Option<ItemRef<'c>> {
        let op = &self.jobs.ops[id.0 as usize];
        match (op.kind, op.outcome) {
            // SAFETY: the thread is pinned for the round, and the item was written by this
            // thread and stored in this round's pass, so its slot is not reused before `end`.
            (OpKind::Set { loc, .. }, Outcome::Stored) => unsafe { self.cache.slabs.item(loc) },
            _ => None,
        }
    }

    fn find(&mut self, id: OpId, count: bool) -> Option<(Location, ItemRef<'c>)> {
        let op = self.jobs.ops[id.0 as usize];
        let candidates = located(op.outcome);
        let ahead = (id.0 + 1 + READ_AHEAD).min(self.jobs.ops.len() as u32);
        for next in self.read_ahead.max(id.0 + 1)..ahead {
            for loc in located(self.jobs.ops[next as usize].outcome) {
                if loc != 0 {
                    self.cache.slabs.prefetch(loc);
                }
            }
        }
        self.read_ahead = self.read_ahead.max(ahead);
        let count = u64::from(count);
        self.local.gets += count;
        let key = self.jobs.key(&op);
        for loc in candidates {
            if loc == 0 {
                continue;
            }
            // SAFETY: the thread is pinned for the round (`begin`), and `loc` came from this
            // round's pass, so the slot holds a published item until `end`.
            let Some(item) = (unsafe { self.cache.slabs.item(loc) }) else {
                continue;
            };
            if item.key() != key {
                continue;
            }
            if item.expired(self.now_ms) {
                self.local.expired += count;
                self.jobs.evict.push((loc, EvictReason::Expired));
                break;
            }
            self.local.hits += count;
            return Some((loc, item));
        }
        self.local.misses += count;
        None
    }

    fn next_cas(&mut self) -> u64 {
        if self.cas_next == self.cas_end {
            self.cas_next = self
                .cache
                .cas_source
                .fetch_add(CAS_BLOCK, Ordering::Relaxed);
            self.cas_end = self.cas_next + CAS_BLOCK;
        }
        self.cas_next += 1;
        self.cas_next - 1
    }
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        self.cache.slabs.epochs().unpin(self.thread);
    }
}

/// Where a GET's item may be (0: nowhere).
#[inline]
fn located(outcome: Outcome) -> [Location; 2] {
    match outcome {
        Outcome::Candidates(c) => c,
        Outcome::Item(loc) => [loc, 0],
        _ => [0, 0],
    }
}
