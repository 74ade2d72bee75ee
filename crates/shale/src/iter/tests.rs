//! Tests for the merging, level and user-facing iterators.
//!
//! The model tests build random multi-version histories, spread them over several memtables and
//! levels (levels whose tables are memtables too), and compare every way of walking the result
//! against a `BTreeMap` (for `DbIterator`) or a sorted `Vec` (for the internal cursors).

use super::*;
use crate::error::{Error, ErrorKind};
use crate::iter::collect_forward;
use crate::key::{self, compare_internal, SeqNo, ValueKind, KIND_FOR_SEEK, MAX_SEQNO};
use crate::memtable::{Memtable, SkipListMemtable};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

type Entry = (Vec<u8>, Vec<u8>);

// ---------------------------------------------------------------------------------------------
// Test cursors
// ---------------------------------------------------------------------------------------------

/// A cursor over a sorted vector, which can be told to fail when it reaches one position.
struct VecIter {
    entries: Arc<Vec<Entry>>,
    pos: Option<usize>,
    fail_at: Option<usize>,
    err: Option<Error>,
}

impl VecIter {
    fn new(mut entries: Vec<Entry>) -> VecIter {
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        VecIter::unsorted(entries)
    }

    /// Keeps the order given (for entries that do not parse and so have no meaningful order).
    fn unsorted(entries: Vec<Entry>) -> VecIter {
        VecIter {
            entries: Arc::new(entries),
            pos: None,
            fail_at: None,
            err: None,
        }
    }

    fn failing_at(mut self, index: usize) -> VecIter {
        self.fail_at = Some(index);
        self
    }

    fn land(&mut self, pos: Option<usize>) {
        if self.err.is_some() {
            self.pos = None;
            return;
        }
        if pos.is_some() && pos == self.fail_at {
            self.err = Some(Error::new(ErrorKind::Io, "injected read failure"));
            self.pos = None;
            return;
        }
        self.pos = pos.filter(|&p| p < self.entries.len());
    }

    fn lower_bound(&self, target: &[u8]) -> usize {
        self.entries
            .partition_point(|e| compare_internal(&e.0, target) == Ordering::Less)
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) {
        self.land(Some(0));
    }
    fn seek_to_last(&mut self) {
        self.land(self.entries.len().checked_sub(1));
    }
    fn seek(&mut self, target: &[u8]) {
        let p = self.lower_bound(target);
        self.land(Some(p));
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let p = self
            .entries
            .partition_point(|e| compare_internal(&e.0, target) != Ordering::Greater);
        self.land(p.checked_sub(1));
    }
    fn next(&mut self) {
        let p = self.pos.expect("valid");
        self.land(Some(p + 1));
    }
    fn prev(&mut self) {
        let p = self.pos.expect("valid");
        self.land(p.checked_sub(1));
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos.expect("valid")].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos.expect("valid")].1
    }
    fn status(&self) -> crate::Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

/// Counts the movements of the cursor it wraps.
struct Counting {
    inner: Box<dyn InternalIterator>,
    steps: Arc<AtomicUsize>,
    seeks: Arc<AtomicUsize>,
}

impl InternalIterator for Counting {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.seeks.fetch_add(1, AtomicOrdering::Relaxed);
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) {
        self.seeks.fetch_add(1, AtomicOrdering::Relaxed);
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) {
        self.seeks.fetch_add(1, AtomicOrdering::Relaxed);
        self.inner.seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seeks.fetch_add(1, AtomicOrdering::Relaxed);
        self.inner.seek_for_prev(target)
    }
    fn next(&mut self) {
        self.steps.fetch_add(1, AtomicOrdering::Relaxed);
        self.inner.next()
    }
    fn prev(&mut self) {
        self.steps.fetch_add(1, AtomicOrdering::Relaxed);
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> crate::Result<()> {
        self.inner.status()
    }
}

fn ik(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    key::internal_key(user_key, seq, kind)
}

fn put(user_key: &[u8], seq: SeqNo, value: &[u8]) -> Entry {
    (ik(user_key, seq, ValueKind::Value), value.to_vec())
}

fn del(user_key: &[u8], seq: SeqNo) -> Entry {
    (ik(user_key, seq, ValueKind::Deletion), Vec::new())
}

fn memtable(entries: &[Entry]) -> Arc<SkipListMemtable> {
    let m = Arc::new(SkipListMemtable::new());
    for (ikey, value) in entries {
        let p = key::parse_internal_key(ikey).expect("test keys parse");
        m.insert(p.user_key, p.seq, p.kind, value);
    }
    m
}

/// A `DbIterator` over a single source built by `make` (called once per end).
fn db_iter(
    make: impl Fn() -> Box<dyn InternalIterator> + Send + 'static,
    snapshot: SeqNo,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
) -> DbIterator {
    DbIterator::new(Box::new(make), snapshot, lower, upper, None, Box::new(()))
}

fn user_keys(items: &[crate::Result<Entry>]) -> Vec<Vec<u8>> {
    items
        .iter()
        .map(|r| r.as_ref().expect("no error").0.clone())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Random layouts: a history spread over memtables and levels
// ---------------------------------------------------------------------------------------------

/// Every byte string over {0x00, 0x01, 0xff} up to 3 bytes long, sorted: keys that are prefixes
/// of each other, the empty key, and 0xff runs.
fn key_space() -> Vec<Vec<u8>> {
    let alphabet = [0x00u8, 0x01, 0xff];
    let mut keys = vec![Vec::new()];
    let mut frontier = vec![Vec::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for k in &frontier {
            for &b in &alphabet {
                let mut k2: Vec<u8> = k.clone();
                k2.push(b);
                next.push(k2);
            }
        }
        keys.extend(next.iter().cloned());
        frontier = next;
    }
    keys.sort();
    keys
}

#[derive(Debug, Clone)]
struct Op {
    key: u8,
    /// 0: delete, 1: put, 2: put stored as a blob reference.
    kind: u8,
    child: u8,
}

/// How the history is laid out: the number of children and, per child, whether it is a level
/// and where its tables are cut.
#[derive(Debug, Clone)]
struct Layout {
    nkeys: u8,
    ops: Vec<Op>,
    levels: Vec<Option<Vec<u8>>>,
}

fn layout_strategy() -> impl Strategy<Value = Layout> {
    (
        1u8..=40,
        prop::collection::vec(
            (any::<u8>(), 0u8..3, any::<u8>()).prop_map(|(key, kind, child)| Op {
                key,
                kind,
                child,
            }),
            0..160,
        ),
        prop::collection::vec(
            prop::option::of(prop::collection::vec(any::<u8>(), 0..6)),
            1..5,
        ),
    )
        .prop_map(|(nkeys, ops, levels)| Layout { nkeys, ops, levels })
}

/// The value written by the op with sequence number `seq`, and what a reader sees for it.
fn stored_value(seq: SeqNo, kind: u8) -> (ValueKind, Vec<u8>, Vec<u8>) {
    let v = format!("v{seq}").into_bytes();
    if kind == 2 {
        let mut seen = b"blob:".to_vec();
        seen.extend_from_slice(&v);
        (ValueKind::BlobRef, v, seen)
    } else {
        (ValueKind::Value, v.clone(), v)
    }
}

fn resolver() -> BlobResolver {
    Arc::new(|_user_key: &[u8], blob_ref: &[u8]| {
        let mut v = b"blob:".to_vec();
        v.extend_from_slice(blob_ref);
        Ok(v)
    })
}

enum Child {
    Mem(Arc<SkipListMemtable>),
    Level(Arc<[LevelFile]>, OpenFile),
}

/// The built sources plus every internal entry, sorted.
struct Built {
    children: Arc<Vec<Child>>,
    entries: Vec<Entry>,
    model_ops: Vec<(Vec<u8>, SeqNo, Option<Vec<u8>>)>,
    max_seq: SeqNo,
}

impl Built {
    fn source(&self) -> Box<dyn InternalIterator> {
        make_merge(&self.children)
    }

    fn factory(&self) -> SourceFactory {
        let children = self.children.clone();
        Box::new(move || make_merge(&children))
    }

    /// The live pairs at `snapshot`, within the bounds.
    fn model(&self, snapshot: SeqNo, lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> Vec<Entry> {
        let mut map: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (k, seq, v) in &self.model_ops {
            if *seq > snapshot {
                continue;
            }
            match v {
                Some(v) => map.insert(k.clone(), v.clone()),
                None => map.remove(k),
            };
        }
        // Not `BTreeMap::range`: it panics on an empty range (lower above upper), which the
        // iterator must simply treat as empty.
        map.into_iter()
            .filter(|(k, _)| (lower.clone(), upper.clone()).contains(k))
            .collect()
    }
}

fn make_merge(children: &Arc<Vec<Child>>) -> Box<dyn InternalIterator> {
    let cursors = children
        .iter()
        .map(|c| match c {
            Child::Mem(m) => m.clone().iter(),
            Child::Level(files, open) => Box::new(LevelIterator::new(files.clone(), open.clone()))
                as Box<dyn InternalIterator>,
        })
        .collect();
    Box::new(MergingIterator::new(cursors))
}

fn build(layout: &Layout) -> Built {
    let keys = key_space();
    let nchildren = layout.levels.len();
    let mut per_child: Vec<Vec<(Entry, ValueKind)>> = vec![Vec::new(); nchildren];
    let mut model_ops = Vec::new();
    let mut entries = Vec::new();
    for (i, op) in layout.ops.iter().enumerate() {
        let seq = i as SeqNo + 1;
        let user_key = keys[(op.key % layout.nkeys) as usize].clone();
        let (kind, stored, seen) = if op.kind == 0 {
            (ValueKind::Deletion, Vec::new(), None)
        } else {
            let (kind, stored, seen) = stored_value(seq, op.kind);
            (kind, stored, Some(seen))
        };
        let ikey = ik(&user_key, seq, kind);
        per_child[op.child as usize % nchildren].push(((ikey.clone(), stored.clone()), kind));
        entries.push((ikey, stored));
        model_ops.push((user_key, seq, seen));
    }
    entries.sort_by(|a, b| compare_internal(&a.0, &b.0));

    let mut children = Vec::new();
    for (c, cuts) in layout.levels.iter().enumerate() {
        let mut mine: Vec<Entry> = per_child[c].iter().map(|(e, _)| e.clone()).collect();
        mine.sort_by(|a, b| compare_internal(&a.0, &b.0));
        match cuts {
            None => children.push(Child::Mem(memtable(&mine))),
            Some(cuts) => {
                // Cut the sorted run into tables at the given fractions of its length; the
                // versions of one user key may end up in two tables.
                let mut bounds: Vec<usize> = cuts
                    .iter()
                    .map(|&f| f as usize * mine.len() / 256)
                    .collect();
                bounds.push(0);
                bounds.push(mine.len());
                bounds.sort_unstable();
                bounds.dedup();
                let mut files = Vec::new();
                let mut tables: HashMap<u64, Arc<SkipListMemtable>> = HashMap::new();
                for w in bounds.windows(2) {
                    let run = &mine[w[0]..w[1]];
                    if run.is_empty() {
                        continue;
                    }
                    let number = 100 * c as u64 + files.len() as u64;
                    files.push(LevelFile {
                        smallest: run[0].0.clone(),
                        largest: run[run.len() - 1].0.clone(),
                        number,
                    });
                    tables.insert(number, memtable(run));
                }
                let open: OpenFile = Arc::new(move |number| {
                    let table = tables.get(&number).expect("known table").clone();
                    Ok(table.iter())
                });
                children.push(Child::Level(files.into(), open));
            }
        }
    }
    Built {
        children: Arc::new(children),
        entries,
        model_ops,
        max_seq: layout.ops.len() as SeqNo,
    }
}

fn bound_strategy() -> impl Strategy<Value = Bound<Vec<u8>>> {
    let n = key_space().len();
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => (0..n).prop_map(|i| Bound::Included(key_space()[i].clone())),
        2 => (0..n).prop_map(|i| Bound::Excluded(key_space()[i].clone())),
    ]
}

fn full_db_iter(
    built: &Built,
    snapshot: SeqNo,
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
) -> DbIterator {
    DbIterator::new(
        built.factory(),
        snapshot,
        lower.clone(),
        upper.clone(),
        Some(resolver()),
        Box::new(()),
    )
}

// ---------------------------------------------------------------------------------------------
// DbIterator model tests
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn db_iterator_matches_model_forward_backward_and_mixed(
        layout in layout_strategy(),
        snapshot_pick in any::<u16>(),
        lower in bound_strategy(),
        upper in bound_strategy(),
        walk in prop::collection::vec(any::<bool>(), 0..60),
    ) {
        let built = build(&layout);
        let snapshot = snapshot_pick as SeqNo % (built.max_seq + 2);
        let expected = built.model(snapshot, &lower, &upper);

        let forward: Vec<Entry> = full_db_iter(&built, snapshot, &lower, &upper)
            .collect::<crate::Result<_>>()
            .expect("forward");
        prop_assert_eq!(&forward, &expected);

        let mut backward: Vec<Entry> = full_db_iter(&built, snapshot, &lower, &upper)
            .rev()
            .collect::<crate::Result<_>>()
            .expect("backward");
        backward.reverse();
        prop_assert_eq!(&backward, &expected);

        let mut model: VecDeque<Entry> = expected.iter().cloned().collect();
        let mut it = full_db_iter(&built, snapshot, &lower, &upper);
        for &from_front in &walk {
            let got = if from_front { it.next() } else { it.next_back() };
            let want = if from_front { model.pop_front() } else { model.pop_back() };
            prop_assert_eq!(got.map(|r| r.expect("mixed")), want);
        }
        // Drain whatever is left from alternating ends; then both ends stay empty.
        let mut front = true;
        loop {
            let got = if front { it.next() } else { it.next_back() };
            let want = if front { model.pop_front() } else { model.pop_back() };
            let finished = want.is_none();
            prop_assert_eq!(got.map(|r| r.expect("drain")), want);
            if finished {
                break;
            }
            front = !front;
        }
        prop_assert!(it.next().is_none());
        prop_assert!(it.next_back().is_none());
    }

    #[test]
    fn internal_cursors_seek_like_a_sorted_vec(
        layout in layout_strategy(),
        targets in prop::collection::vec((any::<u8>(), 0u64..170, prop::sample::select(vec![0u8, 1, 2, KIND_FOR_SEEK])), 1..20),
    ) {
        let built = build(&layout);
        let keys = key_space();
        let mut it = built.source();
        for (k, seq, kind) in targets {
            let mut target = keys[k as usize % keys.len()].clone();
            key::append_internal_key(&mut target, &[], seq, kind);
            let at = built.entries.partition_point(|e| compare_internal(&e.0, &target) == Ordering::Less);
            it.seek(&target);
            prop_assert_eq!(it.valid(), at < built.entries.len());
            if it.valid() {
                prop_assert_eq!(it.key(), built.entries[at].0.as_slice());
                prop_assert_eq!(it.value(), built.entries[at].1.as_slice());
            }
            let count = built.entries.partition_point(|e| compare_internal(&e.0, &target) != Ordering::Greater);
            it.seek_for_prev(&target);
            prop_assert_eq!(it.valid(), count > 0);
            if it.valid() {
                prop_assert_eq!(it.key(), built.entries[count - 1].0.as_slice());
            }
        }
    }

    #[test]
    fn merging_iterator_survives_random_direction_switches(
        layout in layout_strategy(),
        walk in prop::collection::vec((0u8..6, any::<u8>(), 0u64..170), 1..120),
    ) {
        let built = build(&layout);
        let keys = key_space();
        let entries = &built.entries;
        let mut it = built.source();
        let mut pos: Option<usize> = None;
        for (action, k, seq) in walk {
            let mut target = keys[k as usize % keys.len()].clone();
            key::append_internal_key(&mut target, &[], seq, (seq % 3) as u8);
            match action {
                0 if pos.is_some() => {
                    it.next();
                    pos = pos.map(|p| p + 1).filter(|&p| p < entries.len());
                }
                1 if pos.is_some() => {
                    it.prev();
                    pos = pos.and_then(|p| p.checked_sub(1));
                }
                0..=2 => {
                    it.seek(&target);
                    let at = entries.partition_point(|e| compare_internal(&e.0, &target) == Ordering::Less);
                    pos = (at < entries.len()).then_some(at);
                }
                3 => {
                    it.seek_for_prev(&target);
                    let count = entries.partition_point(|e| compare_internal(&e.0, &target) != Ordering::Greater);
                    pos = count.checked_sub(1);
                }
                4 => {
                    it.seek_to_first();
                    pos = (!entries.is_empty()).then_some(0);
                }
                _ => {
                    it.seek_to_last();
                    pos = entries.len().checked_sub(1);
                }
            }
            prop_assert_eq!(it.valid(), pos.is_some());
            if let Some(p) = pos {
                prop_assert_eq!(it.key(), entries[p].0.as_slice());
                prop_assert_eq!(it.value(), entries[p].1.as_slice());
            }
            prop_assert!(it.status().is_ok());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MergingIterator
// ---------------------------------------------------------------------------------------------

#[test]
fn merging_iterator_yields_the_union_in_internal_key_order() {
    let a = memtable(&[put(b"a", 1, b"1"), put(b"c", 3, b"3")]);
    let b = VecIter::new(vec![
        put(b"b", 2, b"2"),
        put(b"c", 4, b"4"),
        put(b"d", 5, b"5"),
    ]);
    let empty = VecIter::new(Vec::new());
    let mut merge = MergingIterator::new(vec![a.iter(), Box::new(b), Box::new(empty)]);
    let got: Vec<Vec<u8>> = collect_forward(&mut merge)
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(got, [b"1", b"2", b"4", b"3", b"5"].map(|v| v.to_vec()));
    assert!(merge.status().is_ok());
}

#[test]
fn merging_iterator_with_no_children_is_empty() {
    let mut merge = MergingIterator::new(Vec::new());
    merge.seek_to_first();
    assert!(!merge.valid());
    merge.seek_for_prev(&ik(b"x", 1, ValueKind::Value));
    assert!(!merge.valid());
    assert!(merge.status().is_ok());
}

#[test]
fn merging_iterator_surfaces_a_child_error_and_stays_invalid() {
    let good = memtable(&[put(b"a", 1, b""), put(b"c", 2, b"")]);
    let bad = VecIter::new(vec![put(b"b", 3, b""), put(b"d", 4, b"")]).failing_at(1);
    let mut merge = MergingIterator::new(vec![good.iter(), Box::new(bad)]);
    merge.seek_to_first();
    let mut seen = Vec::new();
    while merge.valid() {
        seen.push(key::user_key(merge.key()).to_vec());
        merge.next();
    }
    // Stepping off "b" fails; "c" must not be reached silently past the failed child.
    assert_eq!(seen, vec![b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(merge.status().unwrap_err().kind(), ErrorKind::Io);
    merge.seek_to_first();
    assert!(!merge.valid(), "a child error is sticky");
    assert!(merge.status().is_err());
}

#[test]
fn merging_iterator_reports_an_error_met_during_a_direction_switch() {
    let good = memtable(&[put(b"b", 1, b""), put(b"c", 2, b"")]);
    // Seeking backward from "c" lands the failing child on its entry "a" (index 0).
    let bad = VecIter::new(vec![put(b"a", 3, b""), put(b"d", 4, b"")]).failing_at(0);
    let mut merge = MergingIterator::new(vec![good.iter(), Box::new(bad)]);
    merge.seek(&ik(b"c", MAX_SEQNO, ValueKind::Value));
    assert_eq!(key::user_key(merge.key()), b"c");
    merge.prev();
    assert!(!merge.valid());
    assert_eq!(merge.status().unwrap_err().kind(), ErrorKind::Io);
}

// ---------------------------------------------------------------------------------------------
// LevelIterator
// ---------------------------------------------------------------------------------------------

/// A level whose tables are `VecIter`s; `claimed` gives each table's metadata range (so a table
/// can claim a range and still be empty).
/// A table's entries and the key range it claims.
type ClaimedTable = (Vec<Entry>, (Vec<u8>, Vec<u8>));

fn vec_level(tables: Vec<ClaimedTable>, opens: Arc<AtomicUsize>) -> LevelIterator {
    let mut files = Vec::new();
    let mut contents: HashMap<u64, Vec<Entry>> = HashMap::new();
    for (n, (entries, (smallest, largest))) in tables.into_iter().enumerate() {
        files.push(LevelFile {
            smallest,
            largest,
            number: n as u64 + 7,
        });
        contents.insert(n as u64 + 7, entries);
    }
    let open: OpenFile = Arc::new(move |number| {
        opens.fetch_add(1, AtomicOrdering::Relaxed);
        Ok(Box::new(VecIter::new(contents[&number].clone())) as Box<dyn InternalIterator>)
    });
    LevelIterator::new(files.into(), open)
}

fn range_of(entries: &[Entry]) -> (Vec<u8>, Vec<u8>) {
    (entries[0].0.clone(), entries[entries.len() - 1].0.clone())
}

#[test]
fn level_iterator_skips_empty_tables_in_both_directions() {
    let t1 = vec![put(b"a", 1, b"a"), put(b"b", 1, b"b")];
    let t3 = vec![put(b"e", 1, b"e")];
    let empty_range = (ik(b"c", 1, ValueKind::Value), ik(b"d", 1, ValueKind::Value));
    let tables = vec![
        (t1.clone(), range_of(&t1)),
        (Vec::new(), empty_range),
        (t3.clone(), range_of(&t3)),
        (
            Vec::new(),
            (ik(b"f", 1, ValueKind::Value), ik(b"g", 1, ValueKind::Value)),
        ),
    ];
    let mut level = vec_level(tables, Arc::new(AtomicUsize::new(0)));
    let forward: Vec<Vec<u8>> = collect_forward(&mut level)
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(forward, [b"a", b"b", b"e"].map(|v| v.to_vec()));

    level.seek_to_last();
    let mut backward = Vec::new();
    while level.valid() {
        backward.push(level.value().to_vec());
        level.prev();
    }
    assert_eq!(backward, [b"e", b"b", b"a"].map(|v| v.to_vec()));

    // A seek into the empty table's range moves on to the next table; seek_for_prev back.
    level.seek(&ik(b"c", 5, ValueKind::Value));
    assert_eq!(level.value(), b"e");
    level.seek_for_prev(&ik(b"d", 0, ValueKind::Deletion));
    assert_eq!(level.value(), b"b");
    level.seek(&ik(b"f", 5, ValueKind::Value));
    assert!(!level.valid());
    level.seek_for_prev(&ik(b"0", 5, ValueKind::Value));
    assert!(!level.valid());
    assert!(level.status().is_ok());
}

#[test]
fn level_iterator_opens_tables_lazily_and_reuses_the_open_one() {
    let tables: Vec<_> = (0..5u8)
        .map(|i| {
            let t = vec![put(&[b'a' + i], 1, b""), put(&[b'a' + i, b'x'], 1, b"")];
            let r = range_of(&t);
            (t, r)
        })
        .collect();
    let opens = Arc::new(AtomicUsize::new(0));
    let mut level = vec_level(tables, opens.clone());
    assert_eq!(
        opens.load(AtomicOrdering::Relaxed),
        0,
        "nothing opened before a seek"
    );
    level.seek(&ik(b"c", MAX_SEQNO, ValueKind::Value));
    assert_eq!(key::user_key(level.key()), b"c");
    level.seek(&ik(b"cx", MAX_SEQNO, ValueKind::Value));
    assert_eq!(key::user_key(level.key()), b"cx");
    assert_eq!(
        opens.load(AtomicOrdering::Relaxed),
        1,
        "same table, same cursor"
    );
    level.next();
    assert_eq!(key::user_key(level.key()), b"d");
    assert_eq!(opens.load(AtomicOrdering::Relaxed), 2);
}

#[test]
fn level_iterator_turns_an_open_error_into_status() {
    let t1 = vec![put(b"a", 1, b"")];
    let t2 = [put(b"b", 1, b"")];
    let files: Arc<[LevelFile]> = vec![
        LevelFile {
            smallest: t1[0].0.clone(),
            largest: t1[0].0.clone(),
            number: 1,
        },
        LevelFile {
            smallest: t2[0].0.clone(),
            largest: t2[0].0.clone(),
            number: 2,
        },
    ]
    .into();
    let open: OpenFile = Arc::new(move |number| {
        if number == 2 {
            Err(Error::new(ErrorKind::Corruption, "table 2: bad footer"))
        } else {
            Ok(Box::new(VecIter::new(t1.clone())) as Box<dyn InternalIterator>)
        }
    });
    let mut level = LevelIterator::new(files, open);
    level.seek_to_first();
    assert_eq!(key::user_key(level.key()), b"a");
    level.next();
    assert!(!level.valid());
    let err = level.status().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.message().contains("table 2"));
    level.seek_to_first();
    assert!(!level.valid(), "the error is sticky");
}

// ---------------------------------------------------------------------------------------------
// DbIterator
// ---------------------------------------------------------------------------------------------

fn sample_table() -> Arc<SkipListMemtable> {
    memtable(&[
        put(b"a", 1, b"a1"),
        put(b"b", 2, b"b2"),
        del(b"b", 5),
        put(b"c", 3, b"c3"),
        put(b"c", 6, b"c6"),
        put(b"d", 4, b"d4"),
        del(b"e", 7),
        put(b"f", 8, b"f8"),
    ])
}

fn pairs(items: &[(&str, &str)]) -> Vec<Entry> {
    items
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

#[test]
fn db_iterator_shows_the_newest_visible_version_and_hides_deletions() {
    let m = sample_table();
    let latest: Vec<Entry> = db_iter(
        move || m.clone().iter(),
        100,
        Bound::Unbounded,
        Bound::Unbounded,
    )
    .collect::<crate::Result<_>>()
    .unwrap();
    assert_eq!(
        latest,
        pairs(&[("a", "a1"), ("c", "c6"), ("d", "d4"), ("f", "f8")])
    );

    let m = sample_table();
    let at4: Vec<Entry> = db_iter(
        move || m.clone().iter(),
        4,
        Bound::Unbounded,
        Bound::Unbounded,
    )
    .rev()
    .collect::<crate::Result<_>>()
    .unwrap();
    assert_eq!(
        at4,
        pairs(&[("d", "d4"), ("c", "c3"), ("b", "b2"), ("a", "a1")])
    );
}

#[test]
fn db_iterator_honours_bounds_exactly_at_both_ends() {
    let cases = [
        (
            Bound::Included(b"b".to_vec()),
            Bound::Included(b"d".to_vec()),
            vec!["c", "d"],
        ),
        (
            Bound::Excluded(b"c".to_vec()),
            Bound::Excluded(b"f".to_vec()),
            vec!["d"],
        ),
        (
            Bound::Included(b"c".to_vec()),
            Bound::Excluded(b"c".to_vec()),
            vec![],
        ),
        (
            Bound::Excluded(b"a".to_vec()),
            Bound::Included(b"f".to_vec()),
            vec!["c", "d", "f"],
        ),
        (
            Bound::Included(b"g".to_vec()),
            Bound::Included(b"a".to_vec()),
            vec![],
        ),
    ];
    for (lower, upper, want) in cases {
        let want: Vec<Vec<u8>> = want.iter().map(|k| k.as_bytes().to_vec()).collect();
        let m = sample_table();
        let fwd: Vec<_> =
            db_iter(move || m.clone().iter(), 100, lower.clone(), upper.clone()).collect();
        assert_eq!(user_keys(&fwd), want, "forward {lower:?}..{upper:?}");
        let m = sample_table();
        let mut back: Vec<_> = db_iter(move || m.clone().iter(), 100, lower.clone(), upper.clone())
            .rev()
            .collect();
        back.reverse();
        assert_eq!(user_keys(&back), want, "backward {lower:?}..{upper:?}");
    }
}

#[test]
fn db_iterator_ends_meet_without_returning_a_key_twice() {
    let m = sample_table();
    let mut it = db_iter(
        move || m.clone().iter(),
        100,
        Bound::Unbounded,
        Bound::Unbounded,
    );
    assert_eq!(it.next().unwrap().unwrap().0, b"a");
    assert_eq!(it.next_back().unwrap().unwrap().0, b"f");
    assert_eq!(it.next_back().unwrap().unwrap().0, b"d");
    assert_eq!(it.next().unwrap().unwrap().0, b"c");
    assert!(it.next().is_none());
    assert!(it.next_back().is_none());
}

#[test]
fn db_iterator_builds_the_back_cursor_only_when_the_back_is_used() {
    let builds = Arc::new(AtomicUsize::new(0));
    let m = sample_table();
    let counter = builds.clone();
    let make = move || {
        counter.fetch_add(1, AtomicOrdering::Relaxed);
        m.clone().iter()
    };
    let n = db_iter(make.clone(), 100, Bound::Unbounded, Bound::Unbounded).count();
    assert_eq!(n, 4);
    assert_eq!(builds.load(AtomicOrdering::Relaxed), 1);
    let n = db_iter(make, 100, Bound::Unbounded, Bound::Unbounded)
        .rev()
        .count();
    assert_eq!(n, 4);
    assert_eq!(builds.load(AtomicOrdering::Relaxed), 2);
}

/// A table with `n` versions of "k" (seq 1..=n, alternating puts and deletes, newest a put),
/// between single keys "a" and "z".
fn long_history(n: u64) -> Vec<Entry> {
    let mut entries = vec![put(b"a", n + 1, b"a"), put(b"z", n + 2, b"z")];
    for seq in 1..=n {
        if seq % 3 == 0 && seq != n {
            entries.push(del(b"k", seq));
        } else {
            entries.push(put(b"k", seq, format!("k{seq}").as_bytes()));
        }
    }
    entries
}

fn counted_iter(
    entries: Vec<Entry>,
    snapshot: SeqNo,
) -> (DbIterator, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let steps = Arc::new(AtomicUsize::new(0));
    let seeks = Arc::new(AtomicUsize::new(0));
    let (s, k) = (steps.clone(), seeks.clone());
    let entries = Arc::new(entries);
    let make = move || {
        let inner = Box::new(MergingIterator::new(vec![Box::new(VecIter::new(
            entries.as_ref().clone(),
        ))]));
        Box::new(Counting {
            inner,
            steps: s.clone(),
            seeks: k.clone(),
        }) as Box<dyn InternalIterator>
    };
    (
        db_iter(make, snapshot, Bound::Unbounded, Bound::Unbounded),
        steps,
        seeks,
    )
}

#[test]
fn db_iterator_skips_a_long_history_by_seeking_in_both_directions() {
    const VERSIONS: u64 = 1000;
    for snapshot in [MAX_SEQNO, VERSIONS + 2, 500, 3, 1] {
        let model = |s: SeqNo| -> Vec<Entry> {
            let mut out = Vec::new();
            if s > VERSIONS {
                out.push((b"a".to_vec(), b"a".to_vec()));
            }
            let newest = s.min(VERSIONS);
            if newest >= 1 && !(newest.is_multiple_of(3) && newest != VERSIONS) {
                out.push((b"k".to_vec(), format!("k{newest}").into_bytes()));
            }
            if VERSIONS + 2 <= s {
                out.push((b"z".to_vec(), b"z".to_vec()));
            }
            out
        };
        let (it, steps, _) = counted_iter(long_history(VERSIONS), snapshot);
        let got: Vec<Entry> = it.collect::<crate::Result<_>>().unwrap();
        assert_eq!(got, model(snapshot), "forward at {snapshot}");
        assert!(
            steps.load(AtomicOrdering::Relaxed) < 4 * MAX_SEQUENTIAL_SKIP,
            "forward stepped {} times at {snapshot}",
            steps.load(AtomicOrdering::Relaxed)
        );

        let (it, steps, _) = counted_iter(long_history(VERSIONS), snapshot);
        let mut got: Vec<Entry> = it.rev().collect::<crate::Result<_>>().unwrap();
        got.reverse();
        assert_eq!(got, model(snapshot), "backward at {snapshot}");
        assert!(
            steps.load(AtomicOrdering::Relaxed) < 4 * MAX_SEQUENTIAL_SKIP,
            "backward stepped {} times at {snapshot}",
            steps.load(AtomicOrdering::Relaxed)
        );
    }
}

#[test]
fn db_iterator_yields_a_source_error_once_then_fuses() {
    for backward in [false, true] {
        let make_failing = move || {
            let good = memtable(&[put(b"a", 1, b"a"), put(b"c", 2, b"c"), put(b"e", 3, b"e")]);
            // Fails on "d" going forward from the start, on "b" going backward from the end.
            let fail_at = if backward { 0 } else { 1 };
            let bad =
                VecIter::new(vec![put(b"b", 4, b"b"), put(b"d", 5, b"d")]).failing_at(fail_at);
            Box::new(MergingIterator::new(vec![good.iter(), Box::new(bad)]))
                as Box<dyn InternalIterator>
        };
        let mut it = db_iter(make_failing, 100, Bound::Unbounded, Bound::Unbounded);
        let mut items = Vec::new();
        loop {
            let item = if backward { it.next_back() } else { it.next() };
            match item {
                Some(item) => items.push(item),
                None => break,
            }
            assert!(items.len() < 10, "the iterator must end");
        }
        let errors: Vec<_> = items.iter().filter(|r| r.is_err()).collect();
        assert_eq!(errors.len(), 1, "exactly one error ({backward})");
        assert_eq!(errors[0].as_ref().unwrap_err().kind(), ErrorKind::Io);
        assert!(items.last().unwrap().is_err(), "the error is the last item");
        assert!(it.next().is_none());
        assert!(it.next_back().is_none());
    }
}

#[test]
fn db_iterator_reports_a_malformed_key_as_corruption() {
    let cases: Vec<Vec<Entry>> = vec![
        vec![(b"abc".to_vec(), b"short".to_vec())],
        vec![(
            {
                let mut k = b"k".to_vec();
                key::append_internal_key(&mut k, &[], 5, 9);
                k
            },
            b"unknown kind".to_vec(),
        )],
    ];
    for entries in cases {
        for backward in [false, true] {
            let e = entries.clone();
            let mut it = db_iter(
                move || Box::new(VecIter::unsorted(e.clone())),
                100,
                Bound::Unbounded,
                Bound::Unbounded,
            );
            let first = if backward { it.next_back() } else { it.next() };
            assert_eq!(first.unwrap().unwrap_err().kind(), ErrorKind::Corruption);
            assert!(it.next().is_none());
        }
    }
}

#[test]
fn db_iterator_resolves_blob_references_or_reports_not_supported() {
    let entries = vec![
        put(b"a", 1, b"inline"),
        (ik(b"b", 2, ValueKind::BlobRef), b"ref-b".to_vec()),
    ];
    let e = entries.clone();
    let make = move || Box::new(VecIter::new(e.clone())) as Box<dyn InternalIterator>;
    let resolved: Vec<Entry> = DbIterator::new(
        Box::new(make.clone()),
        100,
        Bound::Unbounded,
        Bound::Unbounded,
        Some(resolver()),
        Box::new(()),
    )
    .collect::<crate::Result<_>>()
    .unwrap();
    assert_eq!(resolved, pairs(&[("a", "inline"), ("b", "blob:ref-b")]));

    let mut it = db_iter(make, 100, Bound::Unbounded, Bound::Unbounded);
    assert!(it.next_back().unwrap().unwrap_err().kind() == ErrorKind::NotSupported);
    assert!(it.next().is_none());
}

#[test]
fn db_iterator_releases_its_pin_when_exhausted() {
    let pin = Arc::new(());
    let m = sample_table();
    let mut it = DbIterator::new(
        Box::new(move || m.clone().iter()),
        100,
        Bound::Unbounded,
        Bound::Unbounded,
        None,
        Box::new(pin.clone()),
    );
    assert_eq!(Arc::strong_count(&pin), 2);
    while it.next().is_some() {}
    assert_eq!(Arc::strong_count(&pin), 1);
}

#[test]
fn prefix_upper_bound_is_the_next_key_after_the_prefix() {
    assert_eq!(prefix_upper_bound(b"abc"), Bound::Excluded(b"abd".to_vec()));
    assert_eq!(
        prefix_upper_bound(b"a\xff\xff"),
        Bound::Excluded(b"b".to_vec())
    );
    assert_eq!(
        prefix_upper_bound(b"\x00"),
        Bound::Excluded(b"\x01".to_vec())
    );
    assert_eq!(prefix_upper_bound(b"\xff\xff"), Bound::Unbounded);
    assert_eq!(prefix_upper_bound(b""), Bound::Unbounded);
}

proptest! {
    #[test]
    fn prefix_upper_bound_admits_exactly_the_prefixed_keys(
        prefix in prop::collection::vec(prop::sample::select(vec![0u8, 1, 0xfe, 0xff]), 0..4),
        key in prop::collection::vec(prop::sample::select(vec![0u8, 1, 0xfe, 0xff]), 0..6),
    ) {
        let upper = prefix_upper_bound(&prefix);
        let in_range = key.as_slice() >= prefix.as_slice() && match &upper {
            Bound::Excluded(u) => key.as_slice() < u.as_slice(),
            _ => true,
        };
        prop_assert_eq!(in_range, key.starts_with(&prefix));
    }
}

#[test]
fn db_iterator_can_move_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<DbIterator>();
    assert_send::<MergingIterator>();
    assert_send::<LevelIterator>();
}
