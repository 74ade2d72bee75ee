//! FloDB's range cursor: the skiplist merged with a sorted view of only the membuffer buckets that
//! the cursor's walk reaches, read without a lock and without moving anything.
//!
//! Partitioned hashing takes a key's bucket from its `bucket_bits` bits after the first
//! `prefix_bits` (bytes past the end of a key read as zero). Among keys that share those first
//! `prefix_bits` bits (the key's *prefix*), the bucket never decreases as the key grows, so the
//! keys of one prefix between two keys fill a run of buckets, and a *region* (the keys of one
//! prefix and one bucket) is an interval of the key order. A cursor keeps a *cover*: a run of
//! buckets, read for the entries of one prefix (its anchor's), that holds the region where its
//! walk started, the region where it stands, and every region between. The entries it read from
//! those buckets' slots form the *view*, sorted; the cursor merges it with the skiplist's cursor.
//! When the next entry lies past the cover, the cover first grows over the regions in between.
//! A 10-entry scan so reads one or two buckets of seven slots, whatever the membuffer's size.
//! Only a walk that leaves its prefix (an unbounded scan, or one across prefixes) turns to
//! draining every bucket into the skiplist, as the whole membuffer then lies in its way.
//!
//! Exactness: a cursor is given user-key bounds. At every position whose user key lies within
//! them, it has passed every entry inserted before the cursor was created that sorts between where
//! its walk started and where it stands. Outside the bounds it may skip entries, but what it
//! yields is always in order (readers stop at the bounds, which is all they need). Why: when the
//! cursor reads a slot of a covered bucket, an entry inserted before the cursor was created is
//! either still there (it joins the view) or a drain took it; the drain linked it into the skiplist
//! before its Release store emptied the slot, and the cursor's Acquire load saw that store or a
//! later one, so the link is visible to the skiplist cursor, which is repositioned after every read
//! of slots. An entry a drain links after the cursor read its slot is in both the view and the
//! skiplist: equal internal keys are the same entry, yielded once.
//!
//! Concurrency: a cursor is owned by one thread; it takes no bucket lock (except when it drains
//! everything) and writes nothing. It holds its memtable alive, so every node it points at lives.

use super::{slot_node, FloDbMemtable};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, compare_internal};
use crate::memtable::skiplist::{built_key, built_value, Node, SkipListIter};
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Backward,
}

/// Where the cursor's entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    /// Not valid.
    Nowhere,
    List,
    View,
    /// The same entry in both (a drain linked it after the cursor read its slot).
    Both,
}

/// The buckets the view was read from.
#[derive(Debug)]
enum Cover {
    /// None yet.
    Nothing,
    /// Buckets `lo..=hi`, of which the view holds the entries that share `anchor`'s prefix.
    Run {
        anchor: Vec<u8>,
        lo: usize,
        hi: usize,
    },
    /// Every bucket was drained into the skiplist after the cursor was created: the skiplist
    /// alone is exact, and the view is empty.
    All,
}

/// Where a walk starts.
#[derive(Clone, Copy)]
enum Start<'a> {
    /// The first entry (forward) or the last (backward).
    End,
    /// The first entry at or after `target` (forward), or the last at or before it (backward);
    /// with `inclusive` false, an entry equal to `target` is passed over.
    Key { target: &'a [u8], inclusive: bool },
}

/// A cursor over a FloDB memtable exact within user-key bounds. See the module documentation.
pub(super) struct FloDbCursor {
    list: SkipListIter,
    // INVARIANT: sorted strictly ascending by internal key; built nodes of `table`'s skiplist,
    // read from slots of the buckets `cover` names, whose user keys share the cover's prefix.
    view: Vec<*const Node>,
    /// Forward: the view's head is `view[at]`; backward: `view[at - 1]`.
    at: usize,
    head: Head,
    direction: Direction,
    cover: Cover,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// Scratch for slot reads.
    chunk: Vec<*const Node>,
    // Declared last: holds the nodes of `view` alive (`list` holds its own).
    table: Arc<FloDbMemtable>,
}

// SAFETY: the raw pointers in `view` and `chunk` point to nodes owned by `table` (shared through
// an `Arc` of a Send + Sync memtable), immutable in their key and value, and freed only when the
// memtable drops.
unsafe impl Send for FloDbCursor {}

/// The internal key of a node the cursor holds.
#[inline]
fn key_of<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: every node a cursor holds was built by its memtable's skiplist and reached through
    // an Acquire load (a slot or a list link); the cursor's `Arc` keeps it alive, and callers use
    // the slice only while they hold the cursor.
    unsafe { built_key(node) }
}

/// Whether `a` and `b` agree in their first `bits` bits, bytes past the end of a key read as
/// zero (as the bucket index reads them).
fn same_prefix(a: &[u8], b: &[u8], bits: u32) -> bool {
    let full = (bits / 8) as usize;
    let common = a.len().min(b.len()).min(full);
    if a[..common] != b[..common] {
        return false;
    }
    // Past the shorter key, the longer one's bytes must be zero up to `full`.
    let longer = if a.len() > b.len() { a } else { b };
    let end = full.min(longer.len());
    if end > common && longer[common..end].iter().any(|&x| x != 0) {
        return false;
    }
    let rest = bits % 8;
    let byte = |k: &[u8]| k.get(full).copied().unwrap_or(0);
    rest == 0 || (byte(a) ^ byte(b)) >> (8 - rest) == 0
}

/// `key` clamped into the bounds; `None` stands for the end of the key space after every key.
fn clamp<'a>(
    key: Option<&'a [u8]>,
    lower: &'a Bound<Vec<u8>>,
    upper: &'a Bound<Vec<u8>>,
) -> Option<&'a [u8]> {
    let (lo, hi) = (bound_key(lower), bound_key(upper));
    match key {
        None => hi,
        Some(k) if hi.is_some_and(|hi| k > hi) => hi,
        Some(k) if lo.is_some_and(|lo| k < lo) => lo,
        Some(k) => Some(k),
    }
}

fn bound_key(b: &Bound<Vec<u8>>) -> Option<&[u8]> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

impl FloDbCursor {
    /// A cursor over `table`, exact for user keys within `lower` and `upper`. Starts unpositioned.
    pub(super) fn new(
        table: Arc<FloDbMemtable>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> FloDbCursor {
        FloDbCursor {
            list: table.shared.skiplist.clone().cursor(),
            view: Vec::new(),
            at: 0,
            head: Head::Nowhere,
            direction: Direction::Forward,
            cover: Cover::Nothing,
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
            chunk: Vec::new(),
            table,
        }
    }

    /// The view's head in the current direction.
    #[inline]
    fn view_head(&self) -> Option<*const Node> {
        match self.direction {
            Direction::Forward => self.view.get(self.at).copied(),
            Direction::Backward => self.at.checked_sub(1).map(|i| self.view[i]),
        }
    }

    /// The node the cursor is on (null when not valid).
    #[inline]
    fn node(&self) -> *const Node {
        match self.head {
            Head::List | Head::Both => self.list.node(),
            Head::View => self.view_head().unwrap_or(std::ptr::null()),
            Head::Nowhere => std::ptr::null(),
        }
    }

    /// Sets `head` to the stream whose head comes first in the current direction.
    #[inline]
    fn pick(&mut self) {
        let view = self.view_head();
        self.head = match (self.list.valid(), view) {
            (false, None) => Head::Nowhere,
            (true, None) => Head::List,
            (false, Some(_)) => Head::View,
            (true, Some(v)) => {
                match (compare_internal(self.list.key(), key_of(v)), self.direction) {
                    (Ordering::Equal, _) => Head::Both,
                    (Ordering::Less, Direction::Forward)
                    | (Ordering::Greater, Direction::Backward) => Head::List,
                    _ => Head::View,
                }
            }
        };
    }

    /// The key after every key that `prefix_bits + bucket_bits` bits tell apart: it lies in the
    /// last bucket of the last prefix.
    fn max_key(&self) -> Vec<u8> {
        let shared = &self.table.shared;
        let bits = shared.prefix_bits as usize + shared.bucket_bits as usize;
        vec![0xff; bits.div_ceil(8).max(1)]
    }

    /// Whether the cover holds the region of `key` (`None`: the end of the key space).
    fn covers(&self, key: Option<&[u8]>) -> bool {
        match &self.cover {
            Cover::All => true,
            Cover::Nothing => false,
            Cover::Run { anchor, lo, hi } => {
                let max;
                let key = match key {
                    Some(k) => k,
                    None => {
                        max = self.max_key();
                        &max
                    }
                };
                let shared = &self.table.shared;
                same_prefix(anchor, key, shared.prefix_bits)
                    && (*lo..=*hi).contains(&shared.bucket_index(key))
            }
        }
    }

    /// Grows the cover over the region of `key` (`None`: the end of the key space) and every
    /// region between it and the cover; a key of another prefix drains every bucket instead.
    fn extend(&mut self, key: Option<&[u8]>) {
        let max;
        let key = match key {
            Some(k) => k,
            None => {
                max = self.max_key();
                &max
            }
        };
        let shared = &*self.table.shared;
        let b = shared.bucket_index(key);
        let (anchor, lo, hi) = match &mut self.cover {
            Cover::All => return,
            Cover::Nothing => {
                self.cover = Cover::Run {
                    anchor: key.to_vec(),
                    lo: b,
                    hi: b.wrapping_sub(1),
                };
                match &mut self.cover {
                    Cover::Run { anchor, lo, hi } => (anchor, lo, hi),
                    _ => unreachable!("just set"),
                }
            }
            Cover::Run { anchor, lo, hi } if same_prefix(anchor, key, shared.prefix_bits) => {
                (anchor, lo, hi)
            }
            Cover::Run { .. } => {
                self.drain_everything();
                return;
            }
        };
        let by_key = |a: &*const Node, b: &*const Node| compare_internal(key_of(*a), key_of(*b));
        let chunk = &mut self.chunk;
        if *hi == lo.wrapping_sub(1) || b > *hi {
            // Grow upward (or read the first bucket): every new entry sorts after the view's.
            let from = hi.wrapping_add(1);
            chunk.clear();
            for bucket in from..=b {
                read_bucket(shared, bucket, anchor, chunk);
            }
            chunk.sort_unstable_by(by_key);
            self.view.extend_from_slice(chunk);
            *hi = b;
        }
        if b < *lo {
            // Grow downward: every new entry sorts before the view's.
            chunk.clear();
            for bucket in b..*lo {
                read_bucket(shared, bucket, anchor, chunk);
            }
            chunk.sort_unstable_by(by_key);
            self.view.splice(0..0, chunk.iter().copied());
            *lo = b;
        }
    }

    /// Drains every bucket into the skiplist: the skiplist alone is then exact.
    fn drain_everything(&mut self) {
        self.table.shared.drain_all();
        self.view.clear();
        self.cover = Cover::All;
    }

    /// Positions both streams at `start` in the current direction (the view by binary search).
    fn position(&mut self, start: Start<'_>) {
        match (start, self.direction) {
            (Start::End, Direction::Forward) => {
                self.list.seek_to_first();
                self.at = 0;
            }
            (Start::End, Direction::Backward) => {
                self.list.seek_to_last();
                self.at = self.view.len();
            }
            (Start::Key { target, inclusive }, Direction::Forward) => {
                self.list.seek(target);
                self.at = self
                    .view
                    .partition_point(|&n| compare_internal(key_of(n), target) == Ordering::Less);
                if !inclusive {
                    if self.list.valid() && self.list.key() == target {
                        self.list.next();
                    }
                    if self.view.get(self.at).is_some_and(|&n| key_of(n) == target) {
                        self.at += 1;
                    }
                }
            }
            (Start::Key { target, inclusive }, Direction::Backward) => {
                self.list.seek_for_prev(target);
                self.at = self
                    .view
                    .partition_point(|&n| compare_internal(key_of(n), target) != Ordering::Greater);
                if !inclusive {
                    if self.list.valid() && self.list.key() == target {
                        self.list.prev();
                    }
                    if self.at > 0 && key_of(self.view[self.at - 1]) == target {
                        self.at -= 1;
                    }
                }
            }
        }
    }

    /// The user key the cover must hold for the cursor's position to be exact: the entry's,
    /// clamped into the bounds, or the bound (or the end of the key space) past the last entry.
    /// Returns whether the cover holds it; when not, grows the cover over it first.
    fn head_covered(&mut self) -> bool {
        if matches!(self.cover, Cover::All) {
            return true;
        }
        let node = self.node();
        let user = (!node.is_null()).then(|| key::user_key(key_of(node)));
        let need = match (user, self.direction) {
            (None, Direction::Backward) => Some(bound_key(&self.lower).unwrap_or(&[])),
            (user, _) => clamp(user, &self.lower, &self.upper),
        };
        if self.covers(need) {
            return true;
        }
        let need = need.map(<[u8]>::to_vec);
        self.extend(need.as_deref());
        if !self.covers(need.as_deref()) {
            // Cannot happen (a run grows over any key of its prefix); draining everything keeps
            // the walk finite and exact whatever the cover's state.
            self.drain_everything();
        }
        false
    }

    /// Starts a walk in `direction` at `start`: covers the start, positions both streams, and
    /// grows the cover until it holds the entry the cursor lands on.
    fn walk(&mut self, start: Start<'_>, direction: Direction) {
        self.direction = direction;
        let from = match (start, direction) {
            (Start::End, Direction::Forward) => Some(bound_key(&self.lower).unwrap_or(&[])),
            (Start::End, Direction::Backward) => bound_key(&self.upper),
            (Start::Key { target, .. }, _) => {
                clamp(Some(key::user_key(target)), &self.lower, &self.upper)
            }
        };
        if !self.covers(from) {
            // A new walk elsewhere: what the view holds is not needed there.
            let from = from.map(<[u8]>::to_vec);
            if !matches!(self.cover, Cover::All) {
                self.view.clear();
                self.cover = Cover::Nothing;
            }
            self.extend(from.as_deref());
        }
        loop {
            // The streams are positioned after every read of slots (see the module docs).
            self.position(start);
            self.pick();
            if self.head_covered() {
                return;
            }
        }
    }

    /// Steps off the current entry in `direction`, the way the cursor already moves.
    fn step(&mut self, direction: Direction) {
        let from = self.node();
        let forward = direction == Direction::Forward;
        match self.head {
            Head::Nowhere => return,
            Head::List => self.step_list(forward),
            Head::View => self.step_view(forward),
            Head::Both => {
                self.step_list(forward);
                self.step_view(forward);
            }
        }
        self.pick();
        if !self.head_covered() {
            let start = Start::Key {
                target: key_of(from),
                inclusive: false,
            };
            self.walk(start, direction);
        }
    }

    fn step_list(&mut self, forward: bool) {
        if forward {
            self.list.next();
        } else {
            self.list.prev();
        }
    }

    fn step_view(&mut self, forward: bool) {
        if forward {
            self.at += 1;
        } else {
            self.at -= 1;
        }
    }

    /// Moves one entry in `direction`, turning around first when the cursor moves the other way.
    fn advance(&mut self, direction: Direction) {
        if self.head == Head::Nowhere {
            return;
        }
        if self.direction == direction {
            self.step(direction);
        } else {
            let start = Start::Key {
                target: key_of(self.node()),
                inclusive: false,
            };
            self.walk(start, direction);
        }
    }
}

/// Appends to `out` the nodes in bucket `index`'s slots whose user keys share `anchor`'s prefix.
fn read_bucket(shared: &super::Shared, index: usize, anchor: &[u8], out: &mut Vec<*const Node>) {
    let Some(bucket) = shared.buckets.get(index) else {
        return;
    };
    for slot in &bucket.slots {
        // Acquire: the node's bytes are visible, and a slot a drain emptied makes its skiplist
        // links visible (see the module documentation).
        let v = slot.load(AtomicOrdering::Acquire);
        if v == 0 {
            continue;
        }
        let node = slot_node(v) as *const Node;
        if same_prefix(anchor, key::user_key(key_of(node)), shared.prefix_bits) {
            out.push(node);
        }
    }
}

impl InternalIterator for FloDbCursor {
    #[inline]
    fn valid(&self) -> bool {
        self.head != Head::Nowhere
    }
    fn seek_to_first(&mut self) {
        self.walk(Start::End, Direction::Forward);
    }
    fn seek_to_last(&mut self) {
        self.walk(Start::End, Direction::Backward);
    }
    fn seek(&mut self, target: &[u8]) {
        let start = Start::Key {
            target,
            inclusive: true,
        };
        self.walk(start, Direction::Forward);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let start = Start::Key {
            target,
            inclusive: true,
        };
        self.walk(start, Direction::Backward);
    }
    fn next(&mut self) {
        self.advance(Direction::Forward);
    }
    fn prev(&mut self) {
        self.advance(Direction::Backward);
    }
    fn key(&self) -> &[u8] {
        assert!(self.valid(), "key on an invalid memtable iterator");
        key_of(self.node())
    }
    fn value(&self) -> &[u8] {
        assert!(self.valid(), "value on an invalid memtable iterator");
        // SAFETY: as in `key_of`.
        unsafe { built_value(self.node()) }
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
impl FloDbCursor {
    /// The run of buckets read (`None` before the first read and after a drain of all).
    pub(super) fn covered_run(&self) -> Option<(usize, usize)> {
        match &self.cover {
            Cover::Run { lo, hi, .. } => Some((*lo, *hi)),
            Cover::Nothing | Cover::All => None,
        }
    }

    /// True once the cursor drained every bucket.
    pub(super) fn drained_all(&self) -> bool {
        matches!(self.cover, Cover::All)
    }
}

#[cfg(test)]
#[path = "flodb_cursor_tests.rs"]
mod tests;
