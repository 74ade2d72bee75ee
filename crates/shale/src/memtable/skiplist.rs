//! The plain memtable: an arena-allocated skiplist of internal keys (LevelDB / RocksDB style).
//!
//! Each entry is one node, one block of the memtable's [`Arena`], laid out as
//!
//! ```text
//! next[h-1] .. next[1] next[0] | key_len u32 | value_len u32 | versions | depth u32 | internal key | value
//!                      ^ node pointer
//! ```
//!
//! where `h` is the node's height (random, branching [`BRANCHING`], at most [`MAX_HEIGHT`]) and
//! `next[i]` is an `AtomicPtr` to the following node at level `i`. The key sits right after
//! the header, so a search step usually touches a single cache line of the node it compares.
//! Entries are ordered by [`crate::key::compare_internal`].
//!
//! Version chains (FloDB's multi-insert, [`SkipListMemtable::link_sorted`]): a newer version of a
//! key the list holds is not linked into the list but hung in a chain off a list node of the same
//! key, found through the point index without a search. A list node and its chain form a *group*;
//! in iteration order a group is its chain, newest first (`versions` of the list node, then of
//! each version), followed by the list node itself. A chain version's `next[0]` holds its list
//! node tagged with [`CHAINED`]; its upper tower slots are unused. Plain [`Memtable::insert`]s
//! start no chains, so the plain memtable keeps RocksDB's layout.
//!
//! Invariants:
//! - At every level the list is sorted by `compare_internal`; level `i + 1` is a sublist of level `i`.
//! - Group order: each chain is sorted by `compare_internal`, holds only its list node's user key,
//!   and every version in it sorts before its list node and after every list node before that
//!   one. So iterating group after group yields every entry in `compare_internal` order.
//! - A node is never modified after it is published, except its `next` and `versions`
//!   pointers, and is never freed or moved before the memtable drops (the arena frees all nodes
//!   at once).
//! - A node is fully initialized (lengths, key, value, its own `next` and `versions` pointers)
//!   before any pointer to it is stored where another thread can load it.
//!
//! Concurrency contract: inserts are serialized by the `writer` mutex (which also owns the arena);
//! the engine already serializes them under its WAL lock, so the mutex is uncontended there.
//! FloDB's writers split an insert in two: [`SkipListMemtable::build`] writes a complete node into
//! the calling thread's build shard (its own arena and lock) without the insert lock, and
//! [`SkipListMemtable::link_sorted`] later links built nodes under it. Until it is linked a node's
//! level-0 slot holds its height, and no list reaches it.
//! Readers (`get`, iterators) take no lock. The writer links a new node bottom-up with `Release`
//! stores of the predecessors' `next` pointers, and hangs a version with a `Release` store of the
//! `versions` pointer before it; readers load both with `Acquire`, so every node a reader reaches
//! is fully initialized. A reader racing with an insert sees the new
//! node at some levels and not others, which only changes how fast it finds its target. An
//! iterator holds an `Arc` of the memtable, which keeps every node it can point at alive.

use super::arena::Arena;
use super::point_index::{self, IndexWriter, IndexedNode, Lookup, PointIndex};
use super::prefetch;
use super::sync::{AtomicPtr, AtomicUsize, Mutex};
use super::{Memtable, MemtableGet};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind, KIND_FOR_SEEK, TRAILER_LEN};
use std::cmp::Ordering;
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

/// The tallest tower a node may have. With [`BRANCHING`] 4, twelve levels index about 4^12 = 16M
/// entries well, far more than a memtable holds.
const MAX_HEIGHT: usize = 12;

/// One node in `BRANCHING` at level `i` is also at level `i + 1`.
const BRANCHING: u32 = 4;

/// The fixed part of a node; its tower lies just before it and its key and value just after.
#[repr(C)]
pub(crate) struct Node {
    /// The next node at level 0 (null at the end of the list). Level `i` is `i` slots earlier.
    /// A chain version holds its group head here instead, tagged with [`CHAINED`].
    next0: AtomicPtr<Node>,
    /// Length of the internal key (user key + trailer).
    key_len: u32,
    value_len: u32,
    /// For a list node: the newest version of its chain (null when it has none). For a chain
    /// version: the next older version of the chain (null for the oldest).
    versions: AtomicPtr<Node>,
    /// For a chain version: its place in the chain counted from the oldest (1 for the oldest);
    /// 0 for a list node. Caps the chain's length ([`MAX_CHAIN`]); versions that arrive out of
    /// sequence order may leave it an undercount, which only lets a chain grow a little longer.
    depth: u32,
}

/// How many entries ahead of the one it links a sorted multi-insert prefetches index slots and
/// nodes (see [`SkipListMemtable::link_sorted`]).
const PREFETCH_AHEAD: usize = 8;

/// The largest batch [`SkipListMemtable::link_sorted`] searches for all at once (a membuffer
/// bucket drained by a writer holds sixteen); larger batches take the splice path.
const SCATTERED_BATCH: usize = 16;

/// A small batch that fits in one gap of the list at this level (about `BRANCHING^3` = 64 list
/// nodes wide) is linked as neighbours, by the splice-carrying multi-insert
/// ([`SkipListMemtable::link_sorted`]).
const NEIGHBOURS_LEVEL: usize = 3;

/// The low bit of a chain version's level-0 slot, set over its group head's pointer (nodes are
/// 8-byte aligned, so a `next` pointer never has it).
const CHAINED: usize = 1;

/// The most versions a chain takes; a newer version then starts a group of its own in the list.
/// Bounds what a lookup at an old snapshot, a seek into a group and a step back walk.
const MAX_CHAIN: u32 = 16;

/// Bytes from the node pointer to its key.
const HEADER: usize = size_of::<Node>();
const SLOT: usize = size_of::<AtomicPtr<Node>>();

/// The state only inserts touch, guarded by the insert lock.
struct Writer {
    arena: Arena,
    index: IndexWriter,
    /// xorshift64 state for tower heights; never zero.
    rng: u64,
}

impl Writer {
    fn random_height(&mut self) -> usize {
        random_height(&mut self.rng)
    }
}

/// A tower height drawn from `rng` (xorshift64 state, never zero): 1 plus one level for each
/// further draw that hits one chance in [`BRANCHING`], at most [`MAX_HEIGHT`].
fn random_height(rng: &mut u64) -> usize {
    let mut height = 1;
    loop {
        // xorshift64: a full-period generator, plenty for tower heights.
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        if height == MAX_HEIGHT || !((*rng >> 32) as u32).is_multiple_of(BRANCHING) {
            return height;
        }
        height += 1;
    }
}

/// Allocator shards for nodes built outside the insert lock ([`SkipListMemtable::build`]):
/// writers on different threads build under different locks.
const BUILD_SHARDS: usize = 16;

/// One build shard, on its own cache lines.
#[repr(align(128))]
struct BuildShard {
    /// The shard's arena and its xorshift64 state for tower heights (never zero).
    state: Mutex<(Arena, u64)>,
    /// `state`'s `arena.used()`, readable without the lock.
    bytes: AtomicUsize,
    /// Nodes built in this shard.
    built: AtomicUsize,
}

thread_local! {
    /// This thread's build shard, assigned round-robin on first use.
    static SHARD_OF_THREAD: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Round-robin over the build shards; only spreads threads, so not one of the modeled atomics.
static NEXT_SHARD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A complete node that is in no list yet: built by [`SkipListMemtable::build`], linked (once) by
/// [`SkipListMemtable::link_sorted`]. Its key and value may be read from the moment it is built;
/// until it is linked its level-0 `next` slot holds its height instead of a pointer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Unlinked(NonNull<Node>);

impl Unlinked {
    /// The raw node pointer, to store in an atomic slot. Never null.
    pub(crate) fn as_ptr(self) -> *mut Node {
        self.0.as_ptr()
    }

    /// Rebuilds an `Unlinked` from [`Unlinked::as_ptr`].
    ///
    /// # Safety
    /// `ptr` came from `as_ptr` of a node that was not linked since.
    pub(crate) unsafe fn from_ptr(ptr: *mut Node) -> Unlinked {
        // SAFETY: caller's contract: `as_ptr` never returns null.
        Unlinked(unsafe { NonNull::new_unchecked(ptr) })
    }
}

/// The internal key of a node built by [`SkipListMemtable::build`] (linked or not).
///
/// # Safety
/// `node` is such a node, its memtable outlives `'a`, and the pointer was obtained with a
/// happens-before edge from the build (an Acquire load of a slot stored with Release).
#[inline]
pub(crate) unsafe fn built_key<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: caller's contract.
    unsafe { node_key(node) }
}

/// The value of a node built by [`SkipListMemtable::build`].
///
/// # Safety
/// As for [`built_key`].
#[inline]
pub(crate) unsafe fn built_value<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: caller's contract.
    unsafe { node_value(node) }
}

/// A memtable backed by an arena skiplist. See the module documentation for the layout and the
/// concurrency contract.
pub struct SkipListMemtable {
    // INVARIANT: a node of height MAX_HEIGHT with an empty key, allocated in `writer.arena`; it
    // sorts before every entry and is never compared.
    head: NonNull<Node>,
    // INVARIANT: 1 <= max_height <= MAX_HEIGHT, and every level at or above it is empty (null at
    // the head). Readers may see a stale value, which is harmless either way.
    max_height: AtomicUsize,
    /// User key -> newest node, for point lookups.
    index: PointIndex,
    writer: Mutex<Writer>,
    /// The insert lock's arena and index bytes (the build shards count theirs apart).
    bytes: AtomicUsize,
    len: AtomicUsize,
    /// Arenas for nodes built outside the insert lock; empty until the first build.
    build_shards: Box<[BuildShard]>,
}

// SAFETY: the raw `head` pointer refers to memory owned by `writer.arena`, which lives as long as
// the memtable. Shared access follows the module's contract: node memory is written only under the
// `writer` lock before publication (a Release store) and read only after an Acquire load, or
// through `next` atomics; nothing is freed before drop.
unsafe impl Send for SkipListMemtable {}
// SAFETY: see `Send` above; every `&self` method is safe to call from several threads at once.
unsafe impl Sync for SkipListMemtable {}

impl Default for SkipListMemtable {
    fn default() -> SkipListMemtable {
        SkipListMemtable::new()
    }
}

/// The size of a node of `height` with a key and value of the given lengths.
fn node_size(height: usize, key_len: usize, value_len: usize) -> usize {
    height * SLOT + (HEADER - SLOT) + key_len + value_len
}

/// Where the `next` pointer of `node` at `level` lives.
///
/// # Safety
/// `node` points to a published (or being-built) node whose height is greater than `level`, with
/// provenance over its whole block.
#[inline]
unsafe fn slot(node: *const Node, level: usize) -> *const AtomicPtr<Node> {
    // SAFETY: the tower lies just below the node pointer, `level` slots down for level `level`,
    // inside the node's block (caller's contract).
    unsafe { (node as *const AtomicPtr<Node>).sub(level) }
}

/// The next node after `node` at `level`, loaded with Acquire so the node it returns is fully
/// initialized.
///
/// # Safety
/// As for [`slot`]; the node is initialized.
#[inline]
unsafe fn next(node: *const Node, level: usize) -> *mut Node {
    // SAFETY: caller's contract; the slot holds an initialized AtomicPtr.
    unsafe { (*slot(node, level)).load(AtomicOrdering::Acquire) }
}

/// Hangs `node` in the chain of list node `group`, in internal-key order, and publishes it.
///
/// # Safety
/// The caller holds the insert lock. `group` is a published list node. `node` is complete, in no
/// list or chain, and private to the caller; it has `group`'s user key, sorts before `group` and
/// after every list node before `group` (the group invariant of the module documentation).
unsafe fn chain_into(group: *mut Node, node: *mut Node) {
    // SAFETY: caller's contract; chain links change only under the insert lock we hold, so
    // Relaxed loads see them current, and every version reached is published.
    unsafe {
        let trailer = key::trailer(node_key(node));
        let mut link: *const AtomicPtr<Node> = ptr::addr_of!((*group).versions);
        let mut older = (*link).load(AtomicOrdering::Relaxed);
        while !older.is_null() && key::trailer(node_key(older)) > trailer {
            link = ptr::addr_of!((*older).versions);
            older = (*link).load(AtomicOrdering::Relaxed);
        }
        let depth = if older.is_null() {
            1
        } else {
            (*older).depth + 1
        };
        ptr::addr_of_mut!((*node).depth).write(depth);
        (*node).versions.store(older, AtomicOrdering::Relaxed);
        ptr::write(
            slot(node, 0) as *mut AtomicPtr<Node>,
            AtomicPtr::new(group.map_addr(|a| a | CHAINED)),
        );
        // Release: the node is complete before a reader can reach it.
        (*link).store(node, AtomicOrdering::Release);
    }
}

/// Whether a new node of `target` belongs in the chain of `group`, the list node that follows
/// its place in the list: when `group` holds an older version of its key, unless the node would
/// be the newest of a full chain (it then heads a group of its own).
///
/// # Safety
/// `group` is null or a published list node.
unsafe fn joins_following(group: *mut Node, target: &Target<'_>) -> bool {
    // SAFETY: caller's contract; chain versions are published nodes.
    unsafe {
        if group.is_null() || Node::user_key(group) != target.user_key {
            return false;
        }
        let newest = group_first(group);
        let full = newest != group && (*newest).depth >= MAX_CHAIN;
        !(full && target.trailer > key::trailer(node_key(newest)))
    }
}

/// A search's predecessor (`prev`) and successor (`succ`) of its target at every level; levels
/// at or above the list's height when it was found hold the head and null.
#[derive(Clone, Copy)]
struct Splice {
    prev: [*mut Node; MAX_HEIGHT],
    succ: [*mut Node; MAX_HEIGHT],
}

impl Splice {
    /// A splice not yet searched for: the head and null at every level.
    fn new(head: *mut Node) -> Splice {
        Splice {
            prev: [head; MAX_HEIGHT],
            succ: [ptr::null_mut(); MAX_HEIGHT],
        }
    }

    /// Brings levels `0..levels` of a splice found for `target` up to date with the nodes linked
    /// since the search (by the caller, who holds the insert lock): where a level's predecessor
    /// is no longer followed by the successor the search saw, something was linked between them,
    /// and the level walks on from the predecessor to the target.
    ///
    /// # Safety
    /// The splice was found for `target` in this list, which has changed since only by links of
    /// nodes that sort before `target`, made by the caller under the insert lock it still holds.
    unsafe fn catch_up(&mut self, target: Target<'_>, levels: usize) {
        for l in 0..levels {
            let mut x = self.prev[l];
            // SAFETY: `x` is the head or a node the search reached at level `l`, so at least
            // `l + 1` high; every node it reaches here is too.
            let mut n = unsafe { next(x, l) };
            if n != self.succ[l] {
                // SAFETY: `n` came from an Acquire load: an initialized entry node.
                while !n.is_null() && unsafe { target.compare_node(n) } == Ordering::Less {
                    x = n;
                    // SAFETY: as above.
                    n = unsafe { next(x, l) };
                }
            }
            self.prev[l] = x;
            self.succ[l] = n;
        }
    }
}

/// Starts loading what a search step compares and then follows of `node`, reached at `level`:
/// its key (and header) and its `next` slot at that level. Null is ignored.
#[inline]
fn prefetch_search(node: *mut Node, level: usize) {
    if node.is_null() {
        return;
    }
    let bytes = node as *const u8;
    prefetch(bytes.wrapping_sub(level * SLOT));
    prefetch(bytes);
    prefetch(bytes.wrapping_add(64));
}

/// The group head `node` hangs from when it is a chain version; `None` for a list node.
///
/// # Safety
/// `node` is a published entry node (in the list or in a chain).
#[inline]
unsafe fn chained_to(node: *const Node) -> Option<*mut Node> {
    // SAFETY: caller's contract: every published node has a level-0 slot. Relaxed: a chain
    // version's slot is written before the node is published and never again, and a list node's
    // slot only ever holds untagged pointers, whatever the load sees.
    let v = unsafe { (*slot(node, 0)).load(AtomicOrdering::Relaxed) };
    (v.addr() & CHAINED != 0).then_some(v.map_addr(|a| a & !CHAINED))
}

/// The `versions` pointer of `node`, loaded with Acquire so the version it returns is fully
/// initialized.
///
/// # Safety
/// `node` is a published entry node.
#[inline]
unsafe fn versions(node: *const Node) -> *mut Node {
    // SAFETY: caller's contract.
    unsafe { (*node).versions.load(AtomicOrdering::Acquire) }
}

/// The first element of list node `node`'s group: its newest chain version, or itself.
///
/// # Safety
/// `node` is a published list node.
#[inline]
unsafe fn group_first(node: *mut Node) -> *mut Node {
    // SAFETY: caller's contract.
    let newest = unsafe { versions(node) };
    if newest.is_null() {
        node
    } else {
        newest
    }
}

/// The element after `element` in internal-key order, or null at the end.
///
/// # Safety
/// `element` is a published entry node.
#[inline]
unsafe fn element_after(element: *mut Node) -> *mut Node {
    // SAFETY: caller's contract; every pointer followed came from an Acquire load of a published
    // node, so it is published too.
    unsafe {
        match chained_to(element) {
            Some(group) => {
                let older = versions(element);
                if older.is_null() {
                    group
                } else {
                    older
                }
            }
            None => {
                let n = next(element, 0);
                if n.is_null() {
                    n
                } else {
                    group_first(n)
                }
            }
        }
    }
}

// SAFETY: both read the key bytes, initialized before the node is published and never written
// again.
unsafe impl IndexedNode for Node {
    unsafe fn user_key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: caller's contract; entry keys always hold a trailer.
        let ikey = unsafe { node_key(node) };
        &ikey[..ikey.len() - TRAILER_LEN]
    }
    unsafe fn seq(node: *const Node) -> SeqNo {
        // SAFETY: caller's contract.
        key::trailer(unsafe { node_key(node) }) >> 8
    }
}

/// The internal key of `node`.
///
/// # Safety
/// `node` is a fully initialized entry node (not the head) that outlives `'a`.
#[inline]
unsafe fn node_key<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: the key is `key_len` initialized bytes right after the header, never written again.
    unsafe {
        let len = (*node).key_len as usize;
        std::slice::from_raw_parts((node as *const u8).add(HEADER), len)
    }
}

/// The value of `node`.
///
/// # Safety
/// As for [`node_key`].
#[inline]
unsafe fn node_value<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: the value is `value_len` initialized bytes right after the key, never written again.
    unsafe {
        let key_len = (*node).key_len as usize;
        let len = (*node).value_len as usize;
        std::slice::from_raw_parts((node as *const u8).add(HEADER + key_len), len)
    }
}

/// Writes the header, key (`user_key ++ trailer`) and value of a node of `height` into `block`
/// and returns the node pointer; the tower is left for the caller to fill.
///
/// # Safety
/// `block` is fresh, private to the caller and sized by [`node_size`] for these lengths, which
/// fit in `u32` (the caller checked).
#[inline(always)]
unsafe fn write_node(
    block: NonNull<u8>,
    height: usize,
    user_key: &[u8],
    trailer: &[u8; TRAILER_LEN],
    value: &[u8],
) -> *mut Node {
    let key_len = user_key.len() + TRAILER_LEN;
    // SAFETY: caller's contract: every write stays inside the block, which nobody else sees yet.
    unsafe {
        let node = block.as_ptr().add((height - 1) * SLOT) as *mut Node;
        ptr::addr_of_mut!((*node).key_len).write(key_len as u32);
        ptr::addr_of_mut!((*node).value_len).write(value.len() as u32);
        ptr::addr_of_mut!((*node).versions).write(AtomicPtr::new(ptr::null_mut()));
        ptr::addr_of_mut!((*node).depth).write(0);
        let data = (node as *mut u8).add(HEADER);
        ptr::copy_nonoverlapping(user_key.as_ptr(), data, user_key.len());
        ptr::copy_nonoverlapping(trailer.as_ptr(), data.add(user_key.len()), TRAILER_LEN);
        ptr::copy_nonoverlapping(value.as_ptr(), data.add(key_len), value.len());
        node
    }
}

/// A search target split once into user key and trailer, as [`key::compare_internal`] splits it
/// (a target shorter than a trailer has an empty user key and trailer 0).
#[derive(Clone, Copy)]
struct Target<'a> {
    user_key: &'a [u8],
    trailer: u64,
}

impl<'a> Target<'a> {
    fn new(ikey: &'a [u8]) -> Target<'a> {
        Target {
            user_key: key::user_key(ikey),
            trailer: key::trailer(ikey),
        }
    }

    /// `compare_internal(node's key, self)`.
    ///
    /// # Safety
    /// As for [`node_key`].
    #[inline]
    unsafe fn compare_node(&self, node: *const Node) -> Ordering {
        // SAFETY: caller's contract; entry keys always hold at least a trailer.
        let (user_key, trailer) = unsafe {
            let len = (*node).key_len as usize - TRAILER_LEN;
            let start = (node as *const u8).add(HEADER);
            let trailer = ptr::read_unaligned(start.add(len) as *const [u8; TRAILER_LEN]);
            (
                std::slice::from_raw_parts(start, len),
                u64::from_le_bytes(trailer),
            )
        };
        match compare_bytes(user_key, self.user_key) {
            Ordering::Equal => self.trailer.cmp(&trailer),
            other => other,
        }
    }
}

/// `a.cmp(b)`, eight bytes at a time: short keys then need no call into `memcmp`.
#[inline]
fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    let (a, b, by_len) = (&a[..common], &b[..common], a.len().cmp(&b.len()));
    let (mut a_rest, mut b_rest) = (a, b);
    while let (Some((a_word, a_tail)), Some((b_word, b_tail))) = (
        a_rest.split_first_chunk::<8>(),
        b_rest.split_first_chunk::<8>(),
    ) {
        let (x, y) = (u64::from_be_bytes(*a_word), u64::from_be_bytes(*b_word));
        if x != y {
            return x.cmp(&y);
        }
        (a_rest, b_rest) = (a_tail, b_tail);
    }
    if a_rest.is_empty() {
        return by_len;
    }
    // The tails (as long as each other, under eight bytes) compare as words too: a key that
    // differs from its neighbours only in its last bytes, as the fields of one hash do, would
    // otherwise pay a `memcmp` call per comparison. Past eight bytes, the last eight of each
    // are one load: the bytes before the tails are equal, so they decide nothing.
    let word = |bytes: &[u8]| match bytes.last_chunk::<8>() {
        Some(last) => u64::from_be_bytes(*last),
        None => {
            let mut w = [0u8; 8];
            w[..bytes.len()].copy_from_slice(bytes);
            u64::from_be_bytes(w)
        }
    };
    word(a).cmp(&word(b)).then(by_len)
}

impl SkipListMemtable {
    /// An empty memtable.
    pub fn new() -> SkipListMemtable {
        SkipListMemtable::with_expected_bytes(0)
    }

    /// An empty memtable that expects to hold about `bytes` of entries: its point index starts
    /// large enough for them (at an average entry of 192 bytes), so it need not grow.
    pub fn with_expected_bytes(bytes: usize) -> SkipListMemtable {
        let mut arena = Arena::new();
        let block = arena.alloc(node_size(MAX_HEIGHT, 0, 0));
        // SAFETY: the block holds MAX_HEIGHT slots and a header; the node pointer is the last
        // slot, and every slot and the header are initialized here before anyone can read them.
        let head = unsafe {
            let head = block.as_ptr().add((MAX_HEIGHT - 1) * SLOT) as *mut Node;
            for level in 0..MAX_HEIGHT {
                ptr::write(
                    slot(head, level) as *mut AtomicPtr<Node>,
                    AtomicPtr::new(ptr::null_mut()),
                );
            }
            ptr::addr_of_mut!((*head).key_len).write(0);
            ptr::addr_of_mut!((*head).value_len).write(0);
            ptr::addr_of_mut!((*head).versions).write(AtomicPtr::new(ptr::null_mut()));
            ptr::addr_of_mut!((*head).depth).write(0);
            NonNull::new_unchecked(head)
        };
        let (index, index_writer) = PointIndex::new(bytes / 192);
        SkipListMemtable {
            head,
            max_height: AtomicUsize::new(1),
            index,
            bytes: AtomicUsize::new(arena.used() + index_writer.bytes()),
            writer: Mutex::new(Writer {
                arena,
                index: index_writer,
                rng: 0x2545_f491_4f6c_dd1d,
            }),
            len: AtomicUsize::new(0),
            build_shards: (0..BUILD_SHARDS)
                .map(|i| BuildShard {
                    state: Mutex::new((Arena::new(), 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1))),
                    bytes: AtomicUsize::new(0),
                    built: AtomicUsize::new(0),
                })
                .collect(),
        }
    }

    /// Searches top-down for the last node that sorts before `target` (before or equal when
    /// `INCLUSIVE`), or the head when there is none. Returns it with the successor at level 0 that
    /// the search loaded (the first node not before the target, or null). When `prev` is given,
    /// `prev[i]` receives the last node before the target at each level below `max_height`.
    #[inline]
    fn find<const INCLUSIVE: bool>(
        &self,
        target: Target<'_>,
        mut prev: Option<&mut [*mut Node; MAX_HEIGHT]>,
    ) -> (*mut Node, *mut Node) {
        let mut x = self.head.as_ptr();
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        // The node the level above stopped at: known not to be before the target.
        let mut stop: *mut Node = ptr::null_mut();
        loop {
            // SAFETY: `x` is the head or a node reached through an Acquire load at `level` or
            // above, so its height exceeds `level` and it is initialized.
            let next = unsafe { next(x, level) };
            if !next.is_null() {
                // SAFETY: `next` is initialized and at least `level + 1` high (reached at `level`).
                prefetch(unsafe { (*slot(next, level)).load(AtomicOrdering::Relaxed) });
            }
            let before = !next.is_null()
                && next != stop
                // SAFETY: `next` came from an Acquire load, so it is a fully initialized entry
                // node, alive as long as `self`.
                && match unsafe { target.compare_node(next) } {
                    Ordering::Less => true,
                    Ordering::Equal => INCLUSIVE,
                    Ordering::Greater => false,
                };
            if before {
                x = next;
                continue;
            }
            if let Some(prev) = prev.as_deref_mut() {
                prev[level] = x;
            }
            if level == 0 {
                return (x, next);
            }
            stop = next;
            level -= 1;
        }
    }

    /// The last node of the list, or the head when it is empty.
    fn find_last(&self) -> *mut Node {
        let mut x = self.head.as_ptr();
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        loop {
            // SAFETY: as in `find`.
            let next = unsafe { next(x, level) };
            if !next.is_null() {
                x = next;
            } else if level == 0 {
                return x;
            } else {
                level -= 1;
            }
        }
    }

    /// The last element (list node or chain version) before `target` (before or equal when
    /// `INCLUSIVE`), and the first element not before it; null where there is none.
    ///
    /// The list search finds the first list node not before the target; only its group's chain
    /// can hold elements on both sides of the target (every other group lies wholly on one side),
    /// so a walk of that chain, at most [`MAX_CHAIN`] long, finishes the answer.
    fn locate<const INCLUSIVE: bool>(&self, target: Target<'_>) -> (*mut Node, *mut Node) {
        let (last, first) = self.find::<INCLUSIVE>(target, None);
        let mut before = self.entry(last);
        if first.is_null() {
            return (before, first);
        }
        // SAFETY: `first` and every chain version came from Acquire loads: published nodes that
        // live as long as `self`.
        unsafe {
            let mut v = versions(first);
            while !v.is_null()
                && match target.compare_node(v) {
                    Ordering::Less => true,
                    Ordering::Equal => INCLUSIVE,
                    Ordering::Greater => false,
                }
            {
                before = v;
                v = versions(v);
            }
            (before, if v.is_null() { first } else { v })
        }
    }

    /// Builds a complete node for `user_key` at `seq` in this thread's build shard, outside the
    /// insert lock. It is in no list until [`Self::link_sorted`] links it, but its key and value
    /// may be read (through [`built_key`] and [`built_value`]) as soon as it is published to
    /// other threads with a Release store. Its memory counts in `approximate_bytes` at once.
    ///
    /// # Panics
    /// When the internal key or the value is 4 GiB or longer.
    pub(crate) fn build(
        &self,
        user_key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        value: &[u8],
    ) -> Unlinked {
        let key_len = user_key.len() + TRAILER_LEN;
        u32::try_from(key_len).expect("memtable key under 4 GiB");
        u32::try_from(value.len()).expect("memtable value under 4 GiB");
        let i = SHARD_OF_THREAD.with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT_SHARD.fetch_add(1, AtomicOrdering::Relaxed) % BUILD_SHARDS);
            }
            s.get()
        });
        let shard = &self.build_shards[i];
        let (block, height) = {
            let mut state = shard.state.lock();
            let (arena, rng) = &mut *state;
            let height = random_height(rng);
            let block = arena.alloc(node_size(height, key_len, value.len()));
            shard.bytes.store(arena.used(), AtomicOrdering::Relaxed);
            (block, height)
        };
        shard.built.fetch_add(1, AtomicOrdering::Relaxed);
        let trailer = key::pack_trailer(seq, kind as u8).to_le_bytes();
        // SAFETY: the block is fresh, private to this thread (nothing points to it yet) and sized
        // for `height` slots, the header, the key and the value. The level-0 slot holds the
        // height until `link_sorted` replaces it with a pointer; no list reaches the node before.
        unsafe {
            let node = write_node(block, height, user_key, &trailer, value);
            ptr::write(
                slot(node, 0) as *mut AtomicPtr<Node>,
                AtomicPtr::new(ptr::without_provenance_mut(height)),
            );
            Unlinked(NonNull::new_unchecked(node))
        }
    }

    /// Links a batch of built nodes into the list under one acquisition of the insert lock.
    ///
    /// A batch of at most [`SCATTERED_BATCH`] nodes (a membuffer bucket's, drained by a writer)
    /// searches for all its nodes at once, a step of each in turn ([`Self::find_splices`]): a
    /// bucket that one hot key prefix fills (the fields of one large hash) holds keys far apart in
    /// the list, and each search is a chain of a dozen cache misses, which then overlap instead
    /// of following each other. A larger batch (a drain of many buckets, whose keys are
    /// neighbours) reuses the previous node's splice instead (see [`Self::link_spliced`]).
    ///
    /// # Safety
    /// Every node was built by this memtable's [`Self::build`] and never linked, the batch is
    /// sorted strictly ascending by [`key::compare_internal`], and no node's key is already in
    /// the list.
    pub(crate) unsafe fn link_sorted(&self, nodes: &[Unlinked]) {
        if nodes.is_empty() {
            return;
        }
        let mut guard = self.writer.lock();
        let writer = &mut *guard;
        let hashes: Vec<u64> = nodes
            .iter()
            // SAFETY: every node is a complete built node of ours (caller's contract).
            .map(|n| point_index::hash(unsafe { Node::user_key(n.as_ptr()) }))
            .collect();
        // SAFETY: caller's contract; we hold the insert lock (`writer`).
        unsafe {
            if nodes.len() <= SCATTERED_BATCH && !self.neighbours(nodes) {
                self.link_scattered(writer, nodes, &hashes);
            } else {
                self.link_spliced(writer, nodes, &hashes);
            }
        }
        self.bytes.store(
            writer.arena.used() + writer.index.bytes(),
            AtomicOrdering::Relaxed,
        );
        self.len.fetch_add(nodes.len(), AtomicOrdering::Relaxed);
    }

    /// Whether a sorted batch lies within one gap of the list at level [`NEIGHBOURS_LEVEL`], as
    /// a bucket of list elements pushed in a row does: the splice of its first node then carries
    /// to the others in a few comparisons, where searches from the head would compare along the
    /// whole path for each. One search, for the first node, and only down to that level: the
    /// few nodes above it stay in cache, while each level below costs a miss or two that only
    /// the path taken next should pay (a scattered batch's searches overlap theirs).
    ///
    /// # Safety
    /// As for [`Self::link_sorted`]; the caller holds the insert lock.
    unsafe fn neighbours(&self, nodes: &[Unlinked]) -> bool {
        let (Some(first), Some(last)) = (nodes.first(), nodes.last()) else {
            return true;
        };
        if self.max_height.load(AtomicOrdering::Relaxed) <= NEIGHBOURS_LEVEL {
            return true;
        }
        // SAFETY: complete built nodes of ours (caller's contract).
        let (first, last) = unsafe {
            (
                Target::new(node_key(first.as_ptr())),
                Target::new(node_key(last.as_ptr())),
            )
        };
        let mut splice = Splice::new(self.head.as_ptr());
        self.find_splices(
            std::slice::from_ref(&first),
            std::slice::from_mut(&mut splice),
            NEIGHBOURS_LEVEL,
        );
        let bound = splice.succ[NEIGHBOURS_LEVEL];
        // SAFETY: `bound` is null or an initialized entry node reached by the search.
        bound.is_null() || unsafe { last.compare_node(bound) } == Ordering::Greater
    }

    /// [`Self::link_sorted`] for a small batch: the nodes that the point index does not hang in
    /// a chain are searched for together, then linked one by one, each splice first caught up
    /// with the nodes linked since its search.
    ///
    /// # Safety
    /// As for [`Self::link_sorted`], with at most [`SCATTERED_BATCH`] nodes; `writer` is the
    /// insert lock's state and `hashes[i]` the [`point_index::hash`] of node `i`'s user key.
    unsafe fn link_scattered(&self, writer: &mut Writer, nodes: &[Unlinked], hashes: &[u64]) {
        debug_assert!(nodes.len() <= SCATTERED_BATCH);
        for &h in hashes {
            self.index.prefetch_slot(h);
        }
        for &h in hashes {
            self.index.prefetch_node(h);
        }
        let head = self.head.as_ptr();
        // SAFETY: every node is a complete built node of ours (caller's contract).
        let targets: Vec<Target<'_>> = nodes
            .iter()
            .map(|n| Target::new(unsafe { node_key(n.as_ptr()) }))
            .collect();
        // The nodes to search for: those that do not join the chain of their key's newest
        // version (a guess: a node before them in the batch may change it; checked again below).
        let mut searched = [0usize; SCATTERED_BATCH];
        let mut searched_targets = Vec::with_capacity(nodes.len());
        for (i, t) in targets.iter().enumerate() {
            // SAFETY: we hold the insert lock.
            if unsafe { self.newest_group(t, hashes[i]) }.is_none() {
                searched[searched_targets.len()] = i;
                searched_targets.push(*t);
            }
        }
        let mut splices = [Splice::new(head); SCATTERED_BATCH];
        let planned = searched_targets.len();
        self.find_splices(&searched_targets, &mut splices[..planned], 0);
        let mut next_plan = 0;
        for (i, unlinked) in nodes.iter().enumerate() {
            let node = unlinked.as_ptr();
            let (target, h) = (targets[i], hashes[i]);
            let plan = (next_plan < planned && searched[next_plan] == i).then(|| {
                next_plan += 1;
                next_plan - 1
            });
            // SAFETY: caller's contract: a complete node of ours, not yet linked, so its level-0
            // slot still holds its height.
            let height = unsafe { (*slot(node, 0)).load(AtomicOrdering::Relaxed).addr() };
            // SAFETY: we hold the insert lock; the group invariant holds: the newest version's
            // group is the key's first, and the node is newer than every version in it.
            if let Some(group) = unsafe { self.newest_group(&target, h) } {
                // SAFETY: as above; the node is complete and private to us.
                unsafe {
                    chain_into(group, node);
                    self.index.insert(&mut writer.index, h, node);
                }
                continue;
            }
            let splice = match plan {
                Some(p) => &mut splices[p],
                None => {
                    // A guess that failed: search for this one alone, in the last splice (no
                    // plan uses it: this node has none, so fewer than all were planned).
                    debug_assert!(planned < SCATTERED_BATCH);
                    let lone = &mut splices[SCATTERED_BATCH - 1];
                    *lone = Splice::new(head);
                    self.find_splices(std::slice::from_ref(&target), std::slice::from_mut(lone), 0);
                    lone
                }
            };
            // SAFETY: found for `target` in this list, since changed only by our links of the
            // batch's earlier nodes, which sort before it; we still hold the insert lock.
            unsafe { splice.catch_up(target, height.max(1)) };
            let succ0 = splice.succ[0];
            debug_assert!(
                // SAFETY: `succ0` is null or an initialized entry node (an Acquire load by this
                // thread, which holds the insert lock; nodes live as long as the arena).
                succ0.is_null() || unsafe { target.compare_node(succ0) } != Ordering::Equal,
                "memtable entry inserted twice"
            );
            // SAFETY: `succ[0]` is null or a published list node; we hold the insert lock; the
            // node sorts after `prev[0]`, so after every list node before `succ[0]`.
            unsafe {
                if joins_following(splice.succ[0], &target) {
                    chain_into(splice.succ[0], node);
                    self.index.insert(&mut writer.index, h, node);
                    continue;
                }
                // SAFETY: every `prev[l]` for `l < height` is the head or a published node of
                // height > l, the last one before the node at that level (just caught up).
                self.link_tower(&splice.prev, node, height);
                self.index.insert(&mut writer.index, h, node);
            }
            if height > self.max_height.load(AtomicOrdering::Relaxed) {
                self.max_height.store(height, AtomicOrdering::Relaxed);
            }
        }
    }

    /// Searches for the splice of each of `targets` (the last node before it at every level
    /// from `bottom` up to the list's height, and that node's successor) into `splices`, each
    /// given as [`Splice::new`]; the levels below `bottom` are left as they were. A step of each
    /// search in turn: where a step moves to a node, it starts loading that node and goes on
    /// with the next search, so the searches' cache misses overlap. `bottom` is below the list's
    /// height.
    fn find_splices(&self, targets: &[Target<'_>], splices: &mut [Splice], bottom: usize) {
        debug_assert!(targets.len() <= SCATTERED_BATCH && targets.len() == splices.len());
        let head = self.head.as_ptr();
        let top = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        debug_assert!(bottom <= top);
        // Each search's node, level, and the node after it there (loading); `done` once level
        // `bottom` is recorded.
        let mut at = [(head, top, ptr::null_mut::<Node>()); SCATTERED_BATCH];
        let mut done = [false; SCATTERED_BATCH];
        for s in at.iter_mut().take(targets.len()) {
            // SAFETY: the head is as high as any level.
            s.2 = unsafe { next(head, top) };
            prefetch_search(s.2, top);
        }
        let mut left = targets.len();
        while left > 0 {
            for (s, target) in targets.iter().enumerate() {
                if done[s] {
                    continue;
                }
                let (x, level, n) = at[s];
                let splice = &mut splices[s];
                // The node the level above stopped at: known not to be before the target.
                let stop = splice
                    .succ
                    .get(level + 1)
                    .copied()
                    .unwrap_or(ptr::null_mut());
                let before = !n.is_null()
                    && n != stop
                    // SAFETY: `n` came from an Acquire load: an initialized entry node, alive as
                    // long as `self`.
                    && unsafe { target.compare_node(n) } == Ordering::Less;
                if before {
                    // SAFETY: `n` was reached at `level`, so it is at least `level + 1` high.
                    let after = unsafe { next(n, level) };
                    prefetch_search(after, level);
                    at[s] = (n, level, after);
                    continue;
                }
                splice.prev[level] = x;
                splice.succ[level] = n;
                if level == bottom {
                    done[s] = true;
                    left -= 1;
                    continue;
                }
                // SAFETY: `x` is the head or a node reached at `level`, so higher than `level - 1`.
                let after = unsafe { next(x, level - 1) };
                prefetch_search(after, level - 1);
                at[s] = (x, level - 1, after);
            }
        }
    }

    /// The group whose chain a node of `target` joins as the newest version of its key, found
    /// through the point index without a search: that of the key's newest version, when the node
    /// is newer than it and the chain has room. `None`: the node needs a search.
    ///
    /// # Safety
    /// The caller holds the insert lock.
    unsafe fn newest_group(&self, target: &Target<'_>, h: u64) -> Option<*mut Node> {
        // SAFETY: the index holds published nodes of this memtable, alive as long as `self`.
        let Lookup::Newest(newest) = (unsafe { self.index.lookup::<Node>(target.user_key, h) })
        else {
            return None;
        };
        // SAFETY: as above.
        unsafe {
            if target.trailer <= key::trailer(node_key(newest)) {
                return None;
            }
            let (group, depth) = match chained_to(newest) {
                Some(group) => (group, (*newest).depth),
                None => (newest, 0),
            };
            (depth < MAX_CHAIN).then_some(group)
        }
    }

    /// Links a sorted batch (see [`Self::link_sorted`]) reusing the previous node's splice (its
    /// predecessor and successor at every level): each search climbs only to the lowest level
    /// whose splice still brackets the new key and searches down from there, so a batch of
    /// key-order neighbours costs a few comparisons per node instead of a search from the head
    /// (RocksDB's splice insert).
    ///
    /// # Safety
    /// As for [`Self::link_sorted`]; `writer` is the insert lock's state and `hashes[i]` the
    /// [`point_index::hash`] of node `i`'s user key.
    unsafe fn link_spliced(&self, writer: &mut Writer, nodes: &[Unlinked], hashes: &[u64]) {
        let head = self.head.as_ptr();
        // Only this thread changes `max_height` while it holds the lock.
        let mut max_height = self.max_height.load(AtomicOrdering::Relaxed);
        // The splice. INVARIANT: at every level `i`, `prev[i]` is the head or a node of height
        // > i that sorts before every node still to link, `prev[i + 1]` is `prev[i]` or sorts
        // before it, and `succ[i]` is `prev[i]`'s successor at level `i`, for all levels at or above
        // `valid` (levels at or above `max_height` hold the head and null, which is right because
        // those levels are empty). Levels below `valid` are stale until recomputed.
        let mut prev = [head; MAX_HEIGHT];
        let mut succ = [ptr::null_mut::<Node>(); MAX_HEIGHT];
        let mut valid = max_height;
        // The index probes of a batch of scattered keys are independent cache misses: prefetch
        // each entry's slot `2 * PREFETCH_AHEAD` entries ahead and its node `PREFETCH_AHEAD`
        // ahead, so they overlap instead of running one after another.
        for &h in hashes.iter().take(2 * PREFETCH_AHEAD) {
            self.index.prefetch_slot(h);
        }
        for &h in hashes.iter().take(PREFETCH_AHEAD) {
            self.index.prefetch_node(h);
        }
        for (i, unlinked) in nodes.iter().enumerate() {
            if let Some(&h) = hashes.get(i + 2 * PREFETCH_AHEAD) {
                self.index.prefetch_slot(h);
            }
            if let Some(&h) = hashes.get(i + PREFETCH_AHEAD) {
                self.index.prefetch_node(h);
            }
            let node = unlinked.as_ptr();
            // SAFETY: caller's contract: a complete node of ours, not yet linked, so its level-0
            // slot still holds its height.
            let (ikey, height) = unsafe {
                (
                    node_key(node),
                    (*slot(node, 0)).load(AtomicOrdering::Relaxed).addr(),
                )
            };
            debug_assert!(
                i == 0 || {
                    // SAFETY: the previous node of the batch is, like this one, a complete
                    // built node of ours (caller's contract).
                    let prev = unsafe { node_key(nodes[i - 1].as_ptr()) };
                    key::compare_internal(prev, ikey) == Ordering::Less
                },
                "link_sorted batch not strictly sorted"
            );
            let h = hashes[i];
            let target = Target::new(ikey);
            // A version newer than every version the list holds of its key joins the chain of
            // the newest one's group: one index probe, no search, and the list does not grow.
            // SAFETY: we hold the insert lock, and the group invariant holds: the newest
            // version's group is the key's first.
            if let Some(group) = unsafe { self.newest_group(&target, h) } {
                // SAFETY: as above; the node is complete and private to us.
                unsafe {
                    chain_into(group, node);
                    self.index.insert(&mut writer.index, h, node);
                }
                continue;
            }
            // The lowest valid level whose splice brackets the target: everything from there up
            // stays valid (prev sorts before the target, next does not).
            let mut level = valid;
            while level < max_height {
                let n = succ[level];
                // SAFETY: `n` is null or a published node (loaded with Acquire at or after it
                // was linked, by this thread under the lock).
                if n.is_null() || unsafe { target.compare_node(n) } == Ordering::Greater {
                    break;
                }
                level += 1;
            }
            for l in (0..level).rev() {
                let mut x = if l + 1 < MAX_HEIGHT {
                    prev[l + 1]
                } else {
                    head
                };
                loop {
                    // SAFETY: `x` is the head or a node of height > l + 1 (from the splice) or
                    // one reached at level `l`: initialized and at least `l + 1` high.
                    let n = unsafe { next(x, l) };
                    // SAFETY: `n` came from an Acquire load: an initialized entry node.
                    if !n.is_null() && unsafe { target.compare_node(n) } == Ordering::Less {
                        x = n;
                    } else {
                        prev[l] = x;
                        succ[l] = n;
                        break;
                    }
                }
            }
            valid = 0;
            debug_assert!(
                // SAFETY: `succ[0]` is null or an initialized entry node (an Acquire load by
                // this thread, which holds the insert lock; nodes live as long as the arena).
                succ[0].is_null() || unsafe { target.compare_node(succ[0]) } != Ordering::Equal,
                "memtable entry inserted twice"
            );
            // An older version of the key follows: the node belongs in that group's chain.
            // SAFETY: `succ[0]` is null or a published list node; we hold the insert lock, and
            // the group invariant holds for the node (every list node before it sorts before it).
            unsafe {
                if joins_following(succ[0], &target) {
                    chain_into(succ[0], node);
                    self.index.insert(&mut writer.index, h, node);
                    continue;
                }
            }
            // SAFETY: the node's tower has `height` slots, which only this thread writes (it is in
            // no list yet, and we hold the lock); every `prev[l]` for `l < height` is the head or a
            // published node of height > l (levels at or above `max_height` hold the head). The
            // tower is complete before the Release stores publish the node, bottom-up.
            unsafe {
                for l in 0..height {
                    let after = (*slot(prev[l], l)).load(AtomicOrdering::Relaxed);
                    debug_assert_eq!(after, succ[l], "stale splice");
                    ptr::write(slot(node, l) as *mut AtomicPtr<Node>, AtomicPtr::new(after));
                }
                for (l, p) in prev.iter_mut().enumerate().take(height) {
                    (*slot(*p, l)).store(node, AtomicOrdering::Release);
                    *p = node;
                }
                // SAFETY: we hold the insert lock; the node is complete and linked, and lives
                // in its shard's arena as long as the memtable.
                self.index.insert(&mut writer.index, h, node);
            }
            if height > max_height {
                max_height = height;
                self.max_height.store(height, AtomicOrdering::Relaxed);
            }
        }
    }

    /// Builds and links a sorted batch of `(internal key, value)` entries (see [`Self::build`]
    /// and [`Self::link_sorted`]).
    ///
    /// # Panics
    /// When an internal key is shorter than a trailer, or a key or value is 4 GiB or longer.
    #[cfg(test)]
    pub(crate) fn insert_sorted(&self, entries: &[(&[u8], &[u8])]) {
        let nodes: Vec<Unlinked> = entries
            .iter()
            .map(|&(ikey, value)| {
                let parsed = key::parse_internal_key(ikey).expect("memtable key with a trailer");
                self.build(parsed.user_key, parsed.seq, parsed.kind, value)
            })
            .collect();
        // SAFETY: freshly built here, linked once; the caller gives a sorted batch of new keys.
        unsafe { self.link_sorted(&nodes) }
    }

    /// Nodes in the list itself (chain versions not counted).
    #[cfg(test)]
    pub(crate) fn list_len(&self) -> usize {
        let mut n = 0;
        // SAFETY: the head has level 0; every node reached is published.
        let mut x = unsafe { next(self.head.as_ptr(), 0) };
        while !x.is_null() {
            n += 1;
            // SAFETY: as above.
            x = unsafe { next(x, 0) };
        }
        n
    }

    /// Checks the list's shape: at every level the nodes are strictly ascending by internal key,
    /// and each level above 0 is a sublist of the one below. Panics where it is not.
    #[cfg(test)]
    pub(crate) fn check_levels(&self) {
        let head = self.head.as_ptr();
        let mut below: Vec<*mut Node> = Vec::new();
        for level in 0..MAX_HEIGHT {
            let mut nodes = Vec::new();
            // SAFETY: the head is as high as any level; every node reached at a level is
            // published and higher than it.
            let mut x = unsafe { next(head, level) };
            while !x.is_null() {
                nodes.push(x);
                // SAFETY: as above.
                x = unsafe { next(x, level) };
            }
            for pair in nodes.windows(2) {
                // SAFETY: published entry nodes living as long as `self`.
                let (a, b) = unsafe { (node_key(pair[0]), node_key(pair[1])) };
                assert_eq!(
                    key::compare_internal(a, b),
                    Ordering::Less,
                    "level {level} out of order"
                );
            }
            if level > 0 {
                let mut rest = below.iter();
                for n in &nodes {
                    assert!(
                        rest.any(|b| b == n),
                        "level {level} is not a sublist of level {}",
                        level - 1
                    );
                }
            }
            below = nodes;
        }
    }

    /// Bytes of the point index's tables, current and retired (part of
    /// [`Memtable::approximate_bytes`]).
    #[cfg(test)]
    pub(crate) fn index_bytes(&self) -> usize {
        self.writer.lock().index.bytes()
    }

    /// Nodes built by [`Self::build`], linked or not.
    pub(crate) fn built(&self) -> usize {
        self.build_shards
            .iter()
            .map(|s| s.built.load(AtomicOrdering::Relaxed))
            .sum()
    }

    /// [`Memtable::get`] for a key whose [`point_index::hash`] the caller already has.
    /// Starts loading the point-index slot of the key whose hash is `h`, so that a lookup of it
    /// about to follow overlaps that miss with other work.
    #[inline]
    pub(crate) fn prefetch_lookup(&self, h: u64) {
        self.index.prefetch_slot(h);
    }

    pub(crate) fn get_hashed(
        &self,
        user_key: &[u8],
        h: u64,
        snapshot: SeqNo,
    ) -> Option<MemtableGet> {
        // SAFETY: the index holds only published nodes of this memtable's arena.
        let node = match unsafe { self.index.lookup::<Node>(user_key, h) } {
            Lookup::Absent => return None,
            // SAFETY: an indexed node is a published entry node living as long as `self`.
            Lookup::Newest(node) if unsafe { Node::seq(node) } <= snapshot => node,
            // Newer than the snapshot (or no index): search for the newest visible version.
            Lookup::Newest(_) | Lookup::Unknown => {
                let target = Target {
                    user_key,
                    trailer: key::pack_trailer(snapshot, KIND_FOR_SEEK),
                };
                self.locate::<false>(target).1
            }
        };
        if node.is_null() {
            return None;
        }
        // SAFETY: `node` came from an Acquire load: an initialized entry node living as long as
        // `self`.
        let (ikey, value) = unsafe { (node_key(node), node_value(node)) };
        let parsed = key::parse_internal_key(ikey)?;
        if parsed.user_key != user_key {
            return None;
        }
        Some(match parsed.kind {
            ValueKind::Deletion => MemtableGet::Deleted { seq: parsed.seq },
            kind => MemtableGet::Found {
                kind,
                seq: parsed.seq,
                value: value.to_vec(),
            },
        })
    }

    /// Links `node` into the list after `prev[l]` at every level `l` below `height`.
    ///
    /// # Safety
    /// The caller holds the insert lock. `node` is complete, private to the caller and `height`
    /// high; each `prev[l]` for `l < height` is the head or a published list node of height > l,
    /// the last one before `node` at that level.
    unsafe fn link_tower(&self, prev: &[*mut Node; MAX_HEIGHT], node: *mut Node, height: usize) {
        // SAFETY: caller's contract. The tower is complete before the Release stores publish the
        // node, bottom-up.
        unsafe {
            for (level, &p) in prev.iter().enumerate().take(height) {
                let after = (*slot(p, level)).load(AtomicOrdering::Relaxed);
                ptr::write(
                    slot(node, level) as *mut AtomicPtr<Node>,
                    AtomicPtr::new(after),
                );
            }
            for (level, &p) in prev.iter().enumerate().take(height) {
                (*slot(p, level)).store(node, AtomicOrdering::Release);
            }
        }
    }

    /// `node` itself, or null when it is the head.
    fn entry(&self, node: *mut Node) -> *mut Node {
        if node == self.head.as_ptr() {
            ptr::null_mut()
        } else {
            node
        }
    }
}

impl Memtable for SkipListMemtable {
    /// # Panics
    /// When the internal key or the value is 4 GiB or longer (the engine caps values at 1 GiB).
    fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let key_len = user_key.len() + TRAILER_LEN;
        u32::try_from(key_len).expect("memtable key under 4 GiB");
        u32::try_from(value.len()).expect("memtable value under 4 GiB");
        let trailer = key::pack_trailer(seq, kind as u8);
        let target = Target { user_key, trailer };

        let mut writer = self.writer.lock();
        let height = writer.random_height();
        let mut prev = [self.head.as_ptr(); MAX_HEIGHT];
        let (_, successor) = self.find::<false>(target, Some(&mut prev));
        debug_assert!(
            // SAFETY: `successor` is null or an initialized entry node (from an Acquire load at
            // or after its publication; nodes live as long as the arena).
            successor.is_null() || unsafe { target.compare_node(successor) } != Ordering::Equal,
            "memtable entry inserted twice"
        );

        let block = writer.arena.alloc(node_size(height, key_len, value.len()));
        // SAFETY: the block is fresh, private to this insert (we hold the lock and nothing points
        // to it yet) and sized for `height` slots, the header, the key and the value. Every
        // `prev[i]` is the head or a published node of height > i (it was reached at level i),
        // and only this thread writes `next` pointers (the lock). Each node is initialized
        // completely before the Release stores publish it, bottom-up.
        unsafe {
            let node = write_node(block, height, user_key, &trailer.to_le_bytes(), value);
            // A plain insert starts no chain, but where a version of the key that is newer than
            // this one hangs in the following group's chain, this one belongs in that chain too.
            let joins_chain = !successor.is_null()
                && Node::user_key(successor) == user_key
                && trailer < key::trailer(node_key(group_first(successor)));
            if joins_chain {
                chain_into(successor, node);
            } else {
                self.link_tower(&prev, node, height);
                if height > self.max_height.load(AtomicOrdering::Relaxed) {
                    self.max_height.store(height, AtomicOrdering::Relaxed);
                }
            }
            // SAFETY: we hold the insert lock; the node is complete and published, and lives in
            // the arena as long as the memtable.
            self.index
                .insert(&mut writer.index, point_index::hash(user_key), node);
        }
        self.bytes.store(
            writer.arena.used() + writer.index.bytes(),
            AtomicOrdering::Relaxed,
        );
        self.len.fetch_add(1, AtomicOrdering::Relaxed);
    }

    fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<MemtableGet> {
        self.get_hashed(user_key, point_index::hash(user_key), snapshot)
    }

    fn prefetch(&self, user_key: &[u8]) {
        self.prefetch_lookup(point_index::hash(user_key));
    }

    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        Box::new(self.cursor())
    }

    fn approximate_bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
            + self
                .build_shards
                .iter()
                .map(|s| s.bytes.load(AtomicOrdering::Relaxed))
                .sum::<usize>()
    }

    fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    /// The user keys of the first and the last list node; chain versions share their list node's.
    fn key_range(&self) -> Option<(&[u8], &[u8])> {
        // SAFETY: the head's level-0 slot is initialized; Acquire makes the node behind it
        // initialized too.
        let first = unsafe { next(self.head.as_ptr(), 0) };
        if first.is_null() {
            return None;
        }
        let last = self.find_last();
        // SAFETY: both are published entry nodes (the list is not empty, so `find_last` does not
        // return the head), alive and unchanged in their keys as long as `self`.
        unsafe { Some((Node::user_key(first), Node::user_key(last))) }
    }
}

impl SkipListMemtable {
    /// [`Memtable::iter`] as its concrete type, for cursors built over it (FloDB's).
    pub(crate) fn cursor(self: Arc<Self>) -> SkipListIter {
        SkipListIter {
            current: ptr::null_mut(),
            table: self,
        }
    }
}

/// A cursor over a skiplist memtable. Holds the memtable alive.
pub(crate) struct SkipListIter {
    // INVARIANT: null (not valid) or an initialized entry node of `table`, reached through an
    // Acquire load; `table` keeps it alive.
    current: *mut Node,
    table: Arc<SkipListMemtable>,
}

// SAFETY: `current` points into memory owned by `table` (shared through the Arc, which is Send and
// Sync); the node is immutable apart from its atomic `next` pointers.
unsafe impl Send for SkipListIter {}

impl SkipListIter {
    /// The entry node the cursor is on, or null when it is not valid. The node stays alive and
    /// its key and value unchanged as long as the memtable (which the cursor holds).
    pub(crate) fn node(&self) -> *const Node {
        self.current
    }
}

impl InternalIterator for SkipListIter {
    fn valid(&self) -> bool {
        !self.current.is_null()
    }
    fn seek_to_first(&mut self) {
        // SAFETY: the head is initialized and has every level; a node it points to is published.
        self.current = unsafe {
            let first = next(self.table.head.as_ptr(), 0);
            if first.is_null() {
                first
            } else {
                group_first(first)
            }
        };
    }
    fn seek_to_last(&mut self) {
        // The last list node is the last element of its group.
        self.current = self.table.entry(self.table.find_last());
    }
    fn seek(&mut self, target: &[u8]) {
        self.current = self.table.locate::<false>(Target::new(target)).1;
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.current = self.table.locate::<true>(Target::new(target)).0;
    }
    fn next(&mut self) {
        if self.valid() {
            // SAFETY: `current` is a published entry node (invariant), and so is every node
            // reached from it.
            unsafe {
                self.current = element_after(self.current);
                // A scan (a flush, above all) reads the entries of scattered nodes in turn: start
                // loading the next list node while the caller works on this one (a chain version's
                // slot holds its tagged group pointer: as good a hint).
                if !self.current.is_null() {
                    prefetch(next(self.current, 0));
                }
            }
        }
    }
    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        // Like LevelDB: nodes have no back pointers, so search for the last element before this
        // one.
        let key = self.key();
        self.current = self.table.locate::<false>(Target::new(key)).0;
    }
    fn key(&self) -> &[u8] {
        assert!(self.valid(), "key on an invalid memtable iterator");
        // SAFETY: `current` is an initialized entry node kept alive by `self.table` (invariant),
        // which outlives the borrow of `self`.
        unsafe { node_key(self.current) }
    }
    fn value(&self) -> &[u8] {
        assert!(self.valid(), "value on an invalid memtable iterator");
        // SAFETY: as in `key`.
        unsafe { node_value(self.current) }
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
#[path = "skiplist_tests.rs"]
mod tests;
