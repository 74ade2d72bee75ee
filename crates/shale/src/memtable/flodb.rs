//! FloDB's two-level memory component: a small concurrent hash table (the membuffer) over the arena
//! skiplist ([`SkipListMemtable`]). See DESIGN.md section 4.
//!
//! A write builds its entry as a complete skiplist node ([`SkipListMemtable::build`], in a
//! per-thread arena, outside the skiplist's insert lock) and stores a pointer to it in a free slot
//! of its bucket, O(1) and without searching the skiplist; when the bucket is full the writer
//! drains it, linking its own node with the bucket's (write-through). Drains link whole buckets'
//! nodes with one sorted
//! multi-insert ([`SkipListMemtable::link_sorted`]): nothing is copied, so an entry costs its
//! memory once, and a drain only searches and swings pointers; a newer version of a key the
//! skiplist already holds joins that key's version chain, found through the point index with no
//! search at all (see the skiplist's module documentation). Partitioned hashing makes the
//! multi-insert pay: the bucket index is the key's leading bits (after
//! [`FloDbConfig::prefix_bits`]), so a bucket holds key-order neighbours, and neighbouring buckets
//! hold neighbouring key ranges: a drain thread links all the due buckets of a 64-bucket word with
//! one multi-insert, whose search carries from one node to the next. Each slot also holds a 16-bit
//! tag of the key's hash, so a lookup loads only the nodes of its own key; the same hash then
//! serves the skiplist's point index.
//!
//! Invariants:
//! - An entry's key and value are never modified after a pointer to it is published, and the node
//!   is never freed or moved before the skiplist drops (its arenas free everything at once).
//!   Readers can therefore hold entry pointers without any reclamation scheme.
//! - A bucket's slots change only under the bucket lock. A drain links the bucket's nodes into
//!   the skiplist *before* it nulls their slots (Release stores), so at every moment each entry is
//!   in its bucket, in the skiplist, or (during a drain) in both.
//! - No entry is ever in two buckets or drained twice: the drain that takes an entry nulls its slot
//!   before releasing the lock.
//!
//! Concurrency contract (the [`Memtable`] trait's): `insert` may run on many threads at once; it
//! takes only its thread's build shard lock and its bucket's lock (and, on write-through, the
//! skiplist's insert lock inside it). Lock order: the skiplist's insert lock is always taken last;
//! writers and drain threads take a bucket lock while holding another only with `try_lock`, and
//! `iter`'s full drain waits for bucket locks only in ascending bucket order, so there is no cycle. Readers (`get`, iterators) take no bucket lock: they load slots with Acquire,
//! which makes the entry behind a pointer (written before the Release store that published it)
//! visible, and a slot seen null after a drain makes the drain's skiplist inserts visible. `get`
//! reads the bucket first, then the skiplist: an entry whose insert finished before the `get`
//! began is found in one of them. `iter` first drains every bucket under its lock (which orders it
//! after every finished insert), then returns the skiplist's cursor, so it sees every entry inserted
//! before it was created. Drain threads hold only a [`Weak`] to the shared state, never block on a
//! bucket lock (`try_lock`), and exit once the memtable is gone; dropping the memtable joins them.

use super::huge::Slab;
use super::point_index;
use super::skiplist::{built_key, built_value, Node, Unlinked};
use super::sync::{AtomicU64, Mutex, MutexGuard};
use super::{Memtable, MemtableGet, SkipListMemtable};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use std::ops::Bound;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Entry slots per bucket: a 1-byte lock and fifteen pointers fill two 64-byte cache lines.
///
/// Two lines, not one: a hot key prefix (the fields of one large hash) fills one bucket, whose
/// writer then links the bucket's nodes, far apart in the skiplist, with searches that overlap
/// their cache misses ([`SkipListMemtable::link_sorted`]). Sixteen nodes per drain overlap
/// twice as many misses as eight and halve the drains; a lookup reads two adjacent lines
/// instead of one (measured: 13-21% less server CPU per HSET/ZADD/SADD under
/// `redis-benchmark -P 16`).
///
/// Loom models keep seven slots: loom explores the interleavings of every atomic step of a
/// drain, and sixteen nodes' worth took it minutes per model instead of seconds; the code paths
/// are the same for any count.
#[cfg(not(loom))]
pub const BUCKET_SLOTS: usize = 15;
#[cfg(loom)]
pub const BUCKET_SLOTS: usize = 7;
const SLOTS: usize = BUCKET_SLOTS;

/// Bytes of one bucket, the unit [`FloDbConfig::membuffer_bytes`] is divided by.
pub const BUCKET_BYTES: usize = 128;

/// A drain thread moves a bucket once it holds at least this many entries (more than half full),
/// so each multi-insert carries a batch of neighbours; `iter` drains every non-empty bucket.
const DRAIN_MIN_ENTRIES: usize = SLOTS / 2 + 1;

/// `due` words (64 buckets each) a drain thread sweeps per upgrade of its `Weak`: it holds the
/// memtable alive only that long, so dropping the memtable waits at most one step.
const SWEEP_STEP_WORDS: usize = 64;

/// How long a drain thread sleeps after a sweep of its buckets that moved nothing; each further
/// idle sweep doubles it, up to [`IDLE_SLEEP_MAX`], so a sealed memtable costs next to no CPU.
const IDLE_SLEEP: Duration = Duration::from_micros(100);

/// The longest idle sleep: a burst of writes waits at most this long for its first drain.
const IDLE_SLEEP_MAX: Duration = Duration::from_millis(2);

/// The shape of a FloDB memtable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloDbConfig {
    /// Bytes of the membuffer (FloDB's MHT): number of buckets = membuffer_bytes / [`BUCKET_BYTES`], at least 1, rounded to a power of two.
    pub membuffer_bytes: usize,
    /// Leading key bits skipped before the bucket index is taken (FloDB's CLHT_K idea: keys sharing a common prefix); 0 = none.
    pub prefix_bits: u32,
    /// Background drain threads (0 = none: a full bucket is drained by the writer that finds it full, and `iter` drains all).
    pub drain_threads: usize,
}

/// One bucket of the membuffer: two cache lines.
#[repr(C, align(128))]
struct Bucket {
    /// Taken by writers and drains only; readers never take it.
    lock: Mutex<()>,
    // INVARIANT: each slot is 0 (empty) or `tag << 48 | pointer` (see [`slot_value`]) for a node
    // built by the memtable's skiplist, never linked, whose user key maps to this bucket; slots
    // change only under `lock`.
    slots: [AtomicU64; SLOTS],
}

// loom's atomics and mutex are larger: only the real build keeps a bucket to two cache lines.
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Bucket>() == BUCKET_BYTES);

/// What the memtable, its drain threads and nothing else share.
struct Shared {
    buckets: Slab<Bucket>,
    /// log2 of the bucket count (at most 64).
    bucket_bits: u32,
    prefix_bits: u32,
    /// One bit per bucket: set by a writer that leaves its bucket with at least
    /// [`DRAIN_MIN_ENTRIES`] entries, taken by a drain thread. Only a hint for where to look:
    /// correctness never depends on it. Empty when there are no drain threads.
    due: Box<[AtomicU64]>,
    // INVARIANT: every node of `skiplist` was built for an insert into this memtable and is linked
    // by write-through or by a drain, exactly once. Declared last: it owns the nodes the buckets
    // point to.
    skiplist: Arc<SkipListMemtable>,
}

// `Shared` needs no unsafe Send/Sync impl: it is Send and Sync by its fields (atomics, mutexes and
// an `Arc` of the Sync skiplist). Raw node pointers live only in slots and in locals.

impl Shared {
    /// The bucket of `user_key`: its `bucket_bits` bits after the first `prefix_bits`, reading
    /// missing bytes as zero.
    #[inline]
    fn bucket_index(&self, user_key: &[u8]) -> usize {
        bucket_index(user_key, self.prefix_bits, self.bucket_bits)
    }

    /// Links the nodes of `buckets`, whose locks the caller holds, into the skiplist with one
    /// sorted multi-insert, then empties the buckets. `extra`, a node built by our skiplist and
    /// never published whose key maps to `buckets[i]`, joins the same multi-insert. `nodes` is scratch space. Returns how many
    /// nodes moved.
    ///
    /// Partitioned hashing puts neighbouring buckets over neighbouring key ranges, so a batch of
    /// buckets taken in index order is sorted once each bucket is, and the multi-insert's splice
    /// carries from one bucket to the next instead of searching from the head for each.
    fn drain_locked(
        &self,
        buckets: &[&Bucket],
        extra: Option<(usize, Unlinked)>,
        nodes: &mut Vec<Unlinked>,
    ) -> usize {
        // SAFETY: `built_key` needs a node built by our skiplist and complete. Every node sorted
        // here came from a slot of a bucket whose lock we hold, or is `extra`: built by our
        // skiplist (bucket invariant), alive as long as `self` (the arena frees nothing before
        // the memtable drops), and complete in our view (whoever stored it did so under the lock
        // we now hold, after writing it; `extra` is this thread's own).
        let by_key = |a: &Unlinked, b: &Unlinked| unsafe {
            key::compare_internal(built_key(a.as_ptr()), built_key(b.as_ptr()))
        };
        nodes.clear();
        for (at, bucket) in buckets.iter().enumerate() {
            let start = nodes.len();
            for slot in &bucket.slots {
                // Relaxed: slots change only under the lock we hold.
                let v = slot.load(AtomicOrdering::Relaxed);
                if v != 0 {
                    // SAFETY: a slot holds a built node that nobody linked (bucket invariant).
                    nodes.push(unsafe { Unlinked::from_ptr(slot_node(v)) });
                }
            }
            if let Some((_, node)) = extra.filter(|&(i, _)| i == at) {
                nodes.push(node);
            }
            nodes[start..].sort_unstable_by(by_key);
        }
        if nodes.is_empty() {
            return 0;
        }
        // Without a fitting `prefix_bits` the buckets are not in key order.
        if !nodes.is_sorted_by(|a, b| by_key(a, b) == std::cmp::Ordering::Less) {
            nodes.sort_unstable_by(by_key);
        }
        // SAFETY: built by our skiplist and never linked (each slot's node leaves its slot only
        // below, under the lock we hold, so no other drain takes it; `extra` was never
        // published); sorted, and each (key, seq) is new.
        unsafe { self.skiplist.link_sorted(nodes) };
        // Only now that the skiplist holds them may the buckets forget them (module invariant).
        for bucket in buckets {
            for slot in &bucket.slots {
                if slot.load(AtomicOrdering::Relaxed) != 0 {
                    slot.store(0, AtomicOrdering::Release);
                }
            }
        }
        nodes.len()
    }

    /// Drains every non-empty bucket, a 64-bucket word per multi-insert. Every entry whose insert
    /// finished before this call is in the skiplist when it returns.
    fn drain_all(&self) {
        let mut nodes = Vec::new();
        let mut locked = Vec::with_capacity(64);
        let mut guards = Vec::with_capacity(64);
        for word in self.buckets.chunks(64) {
            for bucket in word {
                // A bucket seen empty with Acquire loads needs nothing: each entry that was in it
                // was drained, and the Release store that nulled its slot came after its skiplist
                // insert.
                if bucket
                    .slots
                    .iter()
                    .any(|s| s.load(AtomicOrdering::Acquire) != 0)
                {
                    // Waits while holding lower buckets' locks: see the lock order in the module
                    // documentation.
                    guards.push(bucket.lock.lock());
                    locked.push(bucket);
                }
            }
            self.drain_locked(&locked, None, &mut nodes);
            guards.clear();
            locked.clear();
        }
    }

    /// Locks the buckets of word `w` whose bits are set in `bits`, in ascending order, without
    /// waiting: each is pushed to `locked` and its guard to `guards`; one it cannot lock is left
    /// due (its bit set again) for a later drain. `held`, the bit of a bucket the caller already
    /// holds locked, is pushed without locking. Returns `held`'s position in `locked` (0 without).
    fn try_lock_word<'a>(
        &'a self,
        w: usize,
        mut bits: u64,
        held: Option<usize>,
        locked: &mut Vec<&'a Bucket>,
        guards: &mut Vec<MutexGuard<'a, ()>>,
    ) -> usize {
        let mut held_at = 0;
        while bits != 0 {
            let bit = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let Some(bucket) = self.buckets.get(w * 64 + bit) else {
                continue;
            };
            if held == Some(bit) {
                held_at = locked.len();
                locked.push(bucket);
                continue;
            }
            match bucket.lock.try_lock() {
                Some(guard) => {
                    guards.push(guard);
                    locked.push(bucket);
                }
                None => {
                    self.due[w].fetch_or(1 << bit, AtomicOrdering::Relaxed);
                }
            }
        }
        held_at
    }

    /// Drains the due buckets of the `due` words in `words`, one multi-insert per word, never
    /// waiting for a bucket lock. Returns how many entries moved.
    fn drain_due(&self, words: std::ops::Range<usize>) -> usize {
        let mut moved = 0;
        let mut nodes = Vec::new();
        let mut locked = Vec::new();
        let mut guards = Vec::new();
        for w in words {
            let word = &self.due[w];
            if word.load(AtomicOrdering::Relaxed) == 0 {
                continue;
            }
            let bits = word.swap(0, AtomicOrdering::Acquire);
            self.try_lock_word(w, bits, None, &mut locked, &mut guards);
            moved += self.drain_locked(&locked, None, &mut nodes);
            guards.clear();
            locked.clear();
        }
        moved
    }
}

/// Bits of a slot value that hold the node pointer; the 16 above them hold the tag.
const POINTER_BITS: u32 = 48;

/// The slot value for `node`, whose user key's [`point_index::hash`] is `h`: the hash's top 16
/// bits (the tag) over the pointer, so a lookup skips the nodes of other keys without loading
/// them. `None` when the pointer does not fit in 48 bits (the node then bypasses the membuffer).
#[inline]
fn slot_value(node: Unlinked, h: u64) -> Option<u64> {
    let address = node.as_ptr().expose_provenance() as u64;
    (address >> POINTER_BITS == 0).then_some(tag_of(h) << POINTER_BITS | address)
}

/// The tag of a slot value for a key whose hash is `h`.
#[inline]
fn tag_of(h: u64) -> u64 {
    h >> POINTER_BITS
}

/// The node of a non-zero slot value.
#[inline]
fn slot_node(v: u64) -> *mut Node {
    std::ptr::with_exposed_provenance_mut((v & ((1 << POINTER_BITS) - 1)) as usize)
}

/// `bits` bits of `user_key` starting at bit `prefix_bits` (most significant first), with bytes
/// past the end of the key read as zero.
#[inline]
fn bucket_index(user_key: &[u8], prefix_bits: u32, bits: u32) -> usize {
    if bits == 0 {
        return 0;
    }
    let start = (prefix_bits / 8) as usize;
    let shift = prefix_bits % 8;
    // Nine bytes cover `shift + bits <= 7 + 64` bits.
    let mut window = [0u8; 16];
    if let Some(rest) = user_key.get(start..) {
        let n = rest.len().min(9);
        window[..n].copy_from_slice(&rest[..n]);
    }
    ((u128::from_be_bytes(window) << shift) >> (128 - bits)) as usize
}

/// Joins the drain threads when dropped. A field of [`FloDbMemtable`] declared after `shared`, so
/// the memtable's strong reference is gone (and the threads' `Weak`s fail) before the join.
struct Drainers(Vec<JoinHandle<()>>);

impl Drop for Drainers {
    fn drop(&mut self) {
        for handle in self.0.drain(..) {
            // A drain thread that panicked has nothing left to clean up.
            let _ = handle.join();
        }
    }
}

/// FloDB's memory component: a membuffer of two-cache-line buckets over an arena skiplist. See the
/// module documentation for the invariants and the concurrency contract.
pub struct FloDbMemtable {
    shared: Arc<Shared>,
    // Declared after `shared`: see `Drainers`. Held for its `Drop` (only tests read it).
    #[cfg_attr(not(test), allow(dead_code))]
    drainers: Drainers,
}

impl FloDbMemtable {
    /// An empty memtable shaped by `config`, with its drain threads started.
    ///
    /// The bucket count is `membuffer_bytes / BUCKET_BYTES` rounded down to a power of two, at least 1. A
    /// drain thread that the system refuses to start is skipped: draining is only an
    /// optimization (buckets still empty by write-through and at `iter`).
    pub fn new(config: FloDbConfig) -> FloDbMemtable {
        FloDbMemtable::with_expected_bytes(config, 0)
    }

    /// An empty memtable whose skiplist expects to hold about `bytes` of entries (see
    /// [`SkipListMemtable::with_expected_bytes`]).
    pub fn with_expected_bytes(config: FloDbConfig, bytes: usize) -> FloDbMemtable {
        let wanted = (config.membuffer_bytes / BUCKET_BYTES).max(1);
        let bucket_bits = usize::BITS - 1 - wanted.leading_zeros();
        // A large membuffer is a huge-page region of its own: writers and readers hit random
        // buckets, each otherwise a TLB miss too.
        let buckets = Slab::new(1usize << bucket_bits, |_| Bucket {
            lock: Mutex::new(()),
            slots: Default::default(),
        });
        // Drain threads are OS threads that sleep; a loom model has writers and cursors drain.
        #[cfg(loom)]
        assert_eq!(
            config.drain_threads, 0,
            "loom models run without drain threads"
        );
        let threads = config.drain_threads.min(buckets.len());
        let due_words = if threads == 0 {
            0
        } else {
            buckets.len().div_ceil(64)
        };
        let shared = Arc::new(Shared {
            bucket_bits,
            prefix_bits: config.prefix_bits,
            due: (0..due_words).map(|_| AtomicU64::new(0)).collect(),
            buckets,
            skiplist: Arc::new(SkipListMemtable::with_expected_bytes(bytes)),
        });
        let mut handles = Vec::with_capacity(threads);
        for t in 0..threads {
            // Thread `t` owns a contiguous run of `due` words, so of buckets (key ranges).
            let words = due_words * t / threads..due_words * (t + 1) / threads;
            let weak = Arc::downgrade(&shared);
            let spawned = std::thread::Builder::new()
                .name("shale-flodb-drain".into())
                .spawn(move || drain_loop(weak, words));
            if let Ok(handle) = spawned {
                handles.push(handle);
            }
        }
        FloDbMemtable {
            shared,
            drainers: Drainers(handles),
        }
    }

    /// Number of membuffer buckets.
    #[cfg(test)]
    pub(crate) fn bucket_count(&self) -> usize {
        self.shared.buckets.len()
    }

    /// The bucket `user_key` maps to.
    #[cfg(test)]
    pub(crate) fn bucket_of(&self, user_key: &[u8]) -> usize {
        self.shared.bucket_index(user_key)
    }

    /// Entries now in the membuffer (not yet in the skiplist) and in the skiplist.
    #[cfg(test)]
    pub(crate) fn level_counts(&self) -> (usize, usize) {
        let buffered = self
            .shared
            .buckets
            .iter()
            .flat_map(|b| &b.slots)
            .filter(|s| s.load(AtomicOrdering::Acquire) != 0)
            .count();
        (buffered, self.shared.skiplist.len())
    }

    /// Bytes of the skiplist's point index (part of [`Memtable::approximate_bytes`]).
    #[cfg(test)]
    pub(crate) fn index_bytes(&self) -> usize {
        self.shared.skiplist.index_bytes()
    }

    /// Drains every bucket into the skiplist.
    #[cfg(test)]
    pub(crate) fn drain(&self) {
        self.shared.drain_all();
    }

    /// Drain threads running.
    #[cfg(test)]
    pub(crate) fn drain_thread_count(&self) -> usize {
        self.drainers.0.len()
    }

    /// A `Weak` to the shared state, to watch the drain threads let go of it.
    #[cfg(test)]
    pub(crate) fn shared_weak(&self) -> Weak<impl Send + Sync> {
        Arc::downgrade(&self.shared)
    }
}

/// A drain thread's life: sweep its due words, step by step, while the memtable lives.
fn drain_loop(shared: Weak<Shared>, words: std::ops::Range<usize>) {
    let mut at = words.start;
    let mut moved_this_sweep = 0;
    let mut idle = IDLE_SLEEP;
    loop {
        let Some(state) = shared.upgrade() else {
            return;
        };
        let end = (at + SWEEP_STEP_WORDS).min(words.end);
        moved_this_sweep += state.drain_due(at..end);
        drop(state);
        if end < words.end {
            at = end;
            continue;
        }
        at = words.start;
        if moved_this_sweep == 0 {
            std::thread::sleep(idle);
            idle = (idle * 2).min(IDLE_SLEEP_MAX);
        } else {
            idle = IDLE_SLEEP;
        }
        moved_this_sweep = 0;
    }
}

impl Memtable for FloDbMemtable {
    /// # Panics
    /// When the internal key or the value is 4 GiB or longer (the engine caps values at 1 GiB).
    fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let shared = &*self.shared;
        let index = shared.bucket_index(user_key);
        let bucket = &shared.buckets[index];
        let node = shared.skiplist.build(user_key, seq, kind, value);
        let Some(value) = slot_value(node, point_index::hash(user_key)) else {
            // SAFETY: built just now by our skiplist and published nowhere else; (key, seq) is
            // new (the `Memtable` contract).
            unsafe { shared.skiplist.link_sorted(&[node]) };
            return;
        };
        let _guard = bucket.lock.lock();
        let mut occupied = 0;
        for slot in &bucket.slots {
            // Relaxed: slots change only under the lock we hold.
            if slot.load(AtomicOrdering::Relaxed) != 0 {
                occupied += 1;
                continue;
            }
            // Release: publishes the node's bytes to readers' Acquire loads.
            slot.store(value, AtomicOrdering::Release);
            if occupied + 1 >= DRAIN_MIN_ENTRIES && !shared.due.is_empty() {
                shared.due[index / 64].fetch_or(1 << (index % 64), AtomicOrdering::Relaxed);
            }
            return;
        }
        // The bucket is full: the writer drains it, its own node in the same multi-insert, and
        // with it the due buckets of its word that it can lock without waiting. One search then
        // links a run of key-order neighbours, where writing the one node through would cost a
        // search of its own and leave the bucket full for the next writer.
        let (word, own) = (index / 64, index % 64);
        let mut bits = 1u64 << own;
        if let Some(due) = shared.due.get(word) {
            bits |= due.swap(0, AtomicOrdering::Acquire);
        }
        let mut locked = Vec::with_capacity(bits.count_ones() as usize);
        let mut guards = Vec::with_capacity(bits.count_ones() as usize);
        // Only `own` is set when there are no drain threads (and no `due` words to re-mark).
        let own_at = shared.try_lock_word(word, bits, Some(own), &mut locked, &mut guards);
        let mut nodes = Vec::with_capacity(SLOTS * locked.len() + 1);
        shared.drain_locked(&locked, Some((own_at, node)), &mut nodes);
    }

    fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<MemtableGet> {
        let shared = &*self.shared;
        let bucket = &shared.buckets[shared.bucket_index(user_key)];
        let h = point_index::hash(user_key);
        // The skiplist's index slot is read after the bucket: both are usually cache misses,
        // which this overlaps.
        shared.skiplist.prefetch_lookup(h);
        let tag = tag_of(h);
        // The newest matching entry in the bucket, read first (see the module contract).
        let mut best: Option<(SeqNo, ValueKind, *const Node)> = None;
        for slot in &bucket.slots {
            let v = slot.load(AtomicOrdering::Acquire);
            if v == 0 || v >> POINTER_BITS != tag {
                continue;
            }
            let p = slot_node(v);
            // SAFETY: an Acquire load of a slot yields a published node, alive as long as `self`.
            let ikey = unsafe { built_key(p) };
            let Some(parsed) = key::parse_internal_key(ikey) else {
                continue;
            };
            if parsed.user_key == user_key
                && parsed.seq <= snapshot
                && best.is_none_or(|(seq, _, _)| parsed.seq > seq)
            {
                best = Some((parsed.seq, parsed.kind, p));
            }
        }
        let from_list = shared.skiplist.get_hashed(user_key, h, snapshot);
        let Some((seq, kind, p)) = best else {
            return from_list;
        };
        let list_seq = match &from_list {
            Some(MemtableGet::Found { seq, .. } | MemtableGet::Deleted { seq }) => Some(*seq),
            None => None,
        };
        if list_seq.is_some_and(|s| s >= seq) {
            return from_list;
        }
        Some(match kind {
            ValueKind::Deletion => MemtableGet::Deleted { seq },
            kind => MemtableGet::Found {
                kind,
                seq,
                // SAFETY: as above.
                value: unsafe { built_value(p) }.to_vec(),
            },
        })
    }

    fn prefetch(&self, user_key: &[u8]) {
        let shared = &*self.shared;
        super::prefetch(&shared.buckets[shared.bucket_index(user_key)]);
        shared.skiplist.prefetch_lookup(point_index::hash(user_key));
    }

    /// A cursor exact everywhere: one that walks the whole key space drains the membuffer on
    /// its way (see [`FloDbMemtable::range_iter`]).
    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        self.range_iter(Bound::Unbounded, Bound::Unbounded)
    }

    /// The skiplist merged with a sorted view of only the buckets the walk reaches: see
    /// `flodb_cursor.rs`.
    fn range_iter(
        self: Arc<Self>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Box<dyn InternalIterator> {
        Box::new(cursor::FloDbCursor::new(self, lower, upper))
    }

    fn approximate_bytes(&self) -> usize {
        self.shared.skiplist.approximate_bytes()
    }

    fn len(&self) -> usize {
        self.shared.skiplist.built()
    }

    /// The skiplist's: entries still in the membuffer are left out.
    fn key_range(&self) -> Option<(&[u8], &[u8])> {
        self.shared.skiplist.key_range()
    }
}

#[path = "flodb_cursor.rs"]
mod cursor;

#[cfg(test)]
#[path = "flodb_tests.rs"]
mod tests;
