//! The plain memtable: a concurrent skiplist (`crossbeam-skiplist`) of internal keys.
//!
//! Each entry is one allocation holding `internal key ++ value`; the skiplist orders entries by
//! [`compare_internal`] on the key part. Inserts and reads are lock-free.

use super::{Memtable, MemtableGet};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, compare_internal, SeqNo, ValueKind, TRAILER_LEN};
use crossbeam_skiplist::set::Entry as SetEntry;
use crossbeam_skiplist::SkipSet;
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Bytes charged per entry beyond its key and value: the skiplist node and tower.
const NODE_OVERHEAD: usize = 64;

/// An internal key with internal-key ordering, so the set can be searched by a borrowed key.
#[repr(transparent)]
struct IKey([u8]);

impl IKey {
    fn new(bytes: &[u8]) -> &IKey {
        // SAFETY: IKey is repr(transparent) over [u8], so the pointer cast keeps layout and lifetime.
        unsafe { &*(bytes as *const [u8] as *const IKey) }
    }
}

impl PartialEq for IKey {
    fn eq(&self, other: &IKey) -> bool {
        self.0 == other.0
    }
}
impl Eq for IKey {}
impl PartialOrd for IKey {
    fn partial_cmp(&self, other: &IKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for IKey {
    fn cmp(&self, other: &IKey) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

/// One memtable entry: `internal key ++ value` in a single allocation.
struct Record {
    data: Box<[u8]>,
    // INVARIANT: key_len <= data.len() and key_len >= TRAILER_LEN.
    key_len: usize,
}

impl Record {
    fn ikey(&self) -> &[u8] {
        &self.data[..self.key_len]
    }
    fn value(&self) -> &[u8] {
        &self.data[self.key_len..]
    }
}

impl Borrow<IKey> for Record {
    fn borrow(&self) -> &IKey {
        IKey::new(self.ikey())
    }
}
impl PartialEq for Record {
    fn eq(&self, other: &Record) -> bool {
        self.ikey() == other.ikey()
    }
}
impl Eq for Record {}
impl PartialOrd for Record {
    fn partial_cmp(&self, other: &Record) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Record {
    fn cmp(&self, other: &Record) -> Ordering {
        compare_internal(self.ikey(), other.ikey())
    }
}

/// A memtable backed by a concurrent skiplist.
pub struct SkipListMemtable {
    set: SkipSet<Record>,
    bytes: AtomicUsize,
    len: AtomicUsize,
}

impl Default for SkipListMemtable {
    fn default() -> SkipListMemtable {
        SkipListMemtable::new()
    }
}

impl SkipListMemtable {
    /// An empty memtable.
    pub fn new() -> SkipListMemtable {
        SkipListMemtable {
            set: SkipSet::new(),
            bytes: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
        }
    }
}

impl Memtable for SkipListMemtable {
    fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let key_len = user_key.len() + TRAILER_LEN;
        let mut data = Vec::with_capacity(key_len + value.len());
        key::append_internal_key(&mut data, user_key, seq, kind as u8);
        data.extend_from_slice(value);
        let charged = data.len() + NODE_OVERHEAD;
        self.set.insert(Record {
            data: data.into_boxed_slice(),
            key_len,
        });
        self.bytes.fetch_add(charged, AtomicOrdering::Relaxed);
        self.len.fetch_add(1, AtomicOrdering::Relaxed);
    }

    fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<MemtableGet> {
        let target = key::seek_key(user_key, snapshot);
        let entry = self.set.lower_bound(Bound::Included(IKey::new(&target)))?;
        let parsed = key::parse_internal_key(entry.value().ikey())?;
        if parsed.user_key != user_key {
            return None;
        }
        Some(match parsed.kind {
            ValueKind::Deletion => MemtableGet::Deleted { seq: parsed.seq },
            kind => MemtableGet::Found {
                kind,
                seq: parsed.seq,
                value: entry.value().value().to_vec(),
            },
        })
    }

    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        Box::new(SkipListIter {
            current: None,
            table: self,
        })
    }

    fn approximate_bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }
}

/// A cursor over a skiplist memtable. Holds the memtable alive.
struct SkipListIter {
    // Declared before `table` so it is dropped first.
    // INVARIANT: the 'static lifetime is a lie bounded by `table`, which owns the set the entry
    // points into and outlives it.
    current: Option<SetEntry<'static, Record>>,
    table: Arc<SkipListMemtable>,
}

impl SkipListIter {
    fn set(&self) -> &'static SkipSet<Record> {
        // SAFETY: the set lives inside `self.table` (an Arc we hold for as long as any entry we
        // derive from it); entries are dropped before the Arc (field order), so no entry outlives
        // the set.
        unsafe { &*(&self.table.set as *const SkipSet<Record>) }
    }
}

impl InternalIterator for SkipListIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) {
        self.current = self.set().front();
    }
    fn seek_to_last(&mut self) {
        self.current = self.set().back();
    }
    fn seek(&mut self, target: &[u8]) {
        self.current = self.set().lower_bound(Bound::Included(IKey::new(target)));
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.current = self.set().upper_bound(Bound::Included(IKey::new(target)));
    }
    fn next(&mut self) {
        self.current = self.current.as_ref().and_then(|e| e.next());
    }
    fn prev(&mut self) {
        self.current = self.current.as_ref().and_then(|e| e.prev());
    }
    fn key(&self) -> &[u8] {
        self.current
            .as_ref()
            .expect("valid iterator")
            .value()
            .ikey()
    }
    fn value(&self) -> &[u8] {
        self.current
            .as_ref()
            .expect("valid iterator")
            .value()
            .value()
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_returns_newest_visible_version() {
        let m = SkipListMemtable::new();
        m.insert(b"a", 1, ValueKind::Value, b"one");
        m.insert(b"a", 3, ValueKind::Value, b"three");
        m.insert(b"a", 5, ValueKind::Deletion, b"");
        m.insert(b"b", 2, ValueKind::Value, b"bee");
        assert_eq!(m.get(b"a", 0), None);
        assert_eq!(
            m.get(b"a", 2),
            Some(MemtableGet::Found {
                kind: ValueKind::Value,
                seq: 1,
                value: b"one".to_vec()
            })
        );
        assert_eq!(
            m.get(b"a", 4),
            Some(MemtableGet::Found {
                kind: ValueKind::Value,
                seq: 3,
                value: b"three".to_vec()
            })
        );
        assert_eq!(m.get(b"a", 9), Some(MemtableGet::Deleted { seq: 5 }));
        assert_eq!(m.get(b"c", 9), None);
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn iterator_walks_both_directions() {
        let m = Arc::new(SkipListMemtable::new());
        for (i, k) in [b"d", b"b", b"a", b"c"].iter().enumerate() {
            m.insert(*k, i as u64 + 1, ValueKind::Value, *k);
        }
        let mut it = m.clone().iter();
        it.seek_to_first();
        let mut forward = Vec::new();
        while it.valid() {
            forward.push(key::user_key(it.key()).to_vec());
            it.next();
        }
        assert_eq!(
            forward,
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
        it.seek_for_prev(&key::seek_key(b"c", key::MAX_SEQNO));
        assert_eq!(key::user_key(it.key()), b"b");
        it.prev();
        assert_eq!(key::user_key(it.key()), b"a");
        it.prev();
        assert!(!it.valid());
    }
}
