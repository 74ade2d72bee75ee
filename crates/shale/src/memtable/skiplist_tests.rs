//! Tests of the arena skiplist memtable: behaviour, a model test against a `BTreeMap`, and readers
//! racing with writers.

use super::*;
use crate::iter::collect_forward;
use crate::key::{compare_internal, MAX_SEQNO};
use crate::memtable::arena::CHUNK_SIZE;
use crate::memtable::test_support::{ikey_of, model_key, small_key, ModelKey};
use proptest::prelude::*;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

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

#[test]
fn empty_memtable_has_no_entries() {
    let m = Arc::new(SkipListMemtable::new());
    assert!(m.is_empty());
    assert_eq!(m.get(b"", MAX_SEQNO), None);
    let mut it = m.clone().iter();
    it.seek_to_first();
    assert!(!it.valid());
    it.seek_to_last();
    assert!(!it.valid());
    it.seek(b"");
    assert!(!it.valid());
    it.seek_for_prev(&key::seek_key(b"zz", 0));
    assert!(!it.valid());
}

#[test]
fn large_values_empty_keys_and_empty_values_round_trip() {
    let m = Arc::new(SkipListMemtable::new());
    let huge = vec![7u8; CHUNK_SIZE * 2 + 3];
    let quarter = vec![9u8; CHUNK_SIZE / 4 + 1];
    let entries: Vec<(&[u8], &[u8])> = vec![
        (b"", b""),
        (b"big", &huge),
        (b"empty-value", b""),
        (b"quarter", &quarter),
        (b"small", b"s"),
    ];
    for (i, (k, v)) in entries.iter().enumerate() {
        m.insert(k, i as u64 + 1, ValueKind::Value, v);
    }
    // Small entries after the large ones still go to the shared chunk.
    m.insert(b"zz", 10, ValueKind::Deletion, b"");
    for (i, (k, v)) in entries.iter().enumerate() {
        assert_eq!(
            m.get(k, MAX_SEQNO),
            Some(MemtableGet::Found {
                kind: ValueKind::Value,
                seq: i as u64 + 1,
                value: v.to_vec()
            })
        );
    }
    assert_eq!(
        m.get(b"zz", MAX_SEQNO),
        Some(MemtableGet::Deleted { seq: 10 })
    );
    let payload: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(m.approximate_bytes() >= payload);
    // The huge and quarter values are charged once each, not a whole chunk per entry.
    assert!(m.approximate_bytes() < payload + 4096 + point_index::INITIAL_BYTES);

    let mut it = m.clone().iter();
    it.seek_to_first();
    assert_eq!(it.key(), key::internal_key(b"", 1, ValueKind::Value));
    assert_eq!(it.value(), b"");
    it.next();
    assert_eq!(it.value(), &huge[..]);
    it.seek_to_last();
    assert_eq!(key::user_key(it.key()), b"zz");
}

#[test]
fn approximate_bytes_tracks_entry_sizes_not_chunks() {
    let m = SkipListMemtable::new();
    let before = m.approximate_bytes();
    assert!(before < 256 + point_index::INITIAL_BYTES);
    m.insert(b"key", 1, ValueKind::Value, &[0; 100]);
    let one = m.approximate_bytes() - before;
    assert!(
        (111 + HEADER..=111 + HEADER + MAX_HEIGHT * 8).contains(&one),
        "{one}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Word-at-a-time comparison orders as byte slices do, for keys that share a prefix of any
    /// length and differ (or not) anywhere in their last bytes, including tails of 1-7 bytes
    /// after a run of equal words.
    #[test]
    fn compare_bytes_orders_as_slices_do(
        prefix in proptest::collection::vec(0u8..3, 0..20),
        a in proptest::collection::vec(0u8..3, 0..12),
        b in proptest::collection::vec(0u8..3, 0..12),
    ) {
        let a = [prefix.as_slice(), &a].concat();
        let b = [prefix.as_slice(), &b].concat();
        prop_assert_eq!(compare_bytes(&a, &b), a.cmp(&b));
        prop_assert_eq!(compare_bytes(&b, &a), b.cmp(&a));
        prop_assert_eq!(compare_bytes(&a, &a), Ordering::Equal);
    }

    #[test]
    fn memtable_matches_a_btreemap_model(
        puts in proptest::collection::vec((small_key(), 0u8..3, proptest::collection::vec(any::<u8>(), 0..20)), 0..300),
        probes in proptest::collection::vec((small_key(), 0u64..320, any::<bool>()), 1..60),
    ) {
        let m = Arc::new(SkipListMemtable::new());
        let mut model: BTreeMap<ModelKey, Vec<u8>> = BTreeMap::new();
        for (i, (k, kind, v)) in puts.iter().enumerate() {
            let seq = i as u64 + 1;
            let kind = ValueKind::from_u8(*kind).unwrap();
            m.insert(k, seq, kind, v);
            model.insert((k.clone(), Reverse(key::pack_trailer(seq, kind as u8))), v.clone());
        }
        prop_assert_eq!(m.len(), model.len());
        check_against_model(&m, &model, probes)?;
    }

    /// Versions inserted through sorted batches (which hang newer versions of a key in chains) and
    /// plain inserts, with sequence numbers partly out of order and more versions per key than a
    /// chain takes, read back exactly as the model holds them.
    #[test]
    fn version_chains_match_a_btreemap_model(
        puts in proptest::collection::vec(
            (small_key(), 0u8..3, proptest::collection::vec(any::<u8>(), 0..8), 0u64..40, 0u8..10),
            0..400,
        ),
        probes in proptest::collection::vec((small_key(), 0u64..420, any::<bool>()), 1..60),
    ) {
        // Sequence numbers: the puts' ranks by `8 * position + jitter`, so neighbours swap.
        let mut order: Vec<(u64, usize)> =
            puts.iter().enumerate().map(|(i, p)| (8 * i as u64 + p.3, i)).collect();
        order.sort();
        let mut seqs = vec![0u64; puts.len()];
        for (rank, &(_, i)) in order.iter().enumerate() {
            seqs[i] = rank as u64 + 1;
        }
        let m = Arc::new(SkipListMemtable::new());
        let mut model: BTreeMap<ModelKey, Vec<u8>> = BTreeMap::new();
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let flush = |batch: &mut Vec<(Vec<u8>, Vec<u8>)>| {
            batch.sort_by(|a, b| compare_internal(&a.0, &b.0));
            let refs: Vec<(&[u8], &[u8])> = batch.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            m.insert_sorted(&refs);
            batch.clear();
        };
        for (i, (k, kind, v, _, how)) in puts.iter().enumerate() {
            let kind = ValueKind::from_u8(*kind).unwrap();
            let ikey = key::internal_key(k, seqs[i], kind);
            model.insert(model_key(&ikey), v.clone());
            match how {
                // A plain insert, between batches.
                0 => {
                    flush(&mut batch);
                    m.insert(k, seqs[i], kind, v);
                }
                // The end of a batch.
                1..=2 => {
                    batch.push((ikey, v.clone()));
                    flush(&mut batch);
                }
                _ => batch.push((ikey, v.clone())),
            }
        }
        flush(&mut batch);
        prop_assert_eq!(m.len(), model.len());
        check_against_model(&m, &model, probes)?;
    }
}

/// Checks `m` against `model`: both directions of iteration, and for each probe `(key,
/// snapshot, step)` a `get`, a `seek` and a `seek_for_prev` followed by one step forward (`step`)
/// or back.
fn check_against_model(
    m: &Arc<SkipListMemtable>,
    model: &BTreeMap<ModelKey, Vec<u8>>,
    probes: Vec<(Vec<u8>, u64, bool)>,
) -> Result<(), TestCaseError> {
    {
        let expected: Vec<(Vec<u8>, Vec<u8>)> =
            model.iter().map(|(k, v)| (ikey_of(k), v.clone())).collect();
        let mut it = m.clone().iter();
        prop_assert_eq!(collect_forward(&mut *it), expected.clone());
        let mut backward = Vec::new();
        it.seek_to_last();
        while it.valid() {
            backward.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        backward.reverse();
        prop_assert_eq!(backward, expected);

        for (k, snapshot, step) in probes {
            let target = key::seek_key(&k, snapshot);
            let t = model_key(&target);
            // get: the newest entry of `k` at or below the snapshot.
            let want = model
                .range(t.clone()..)
                .next()
                .filter(|(mk, _)| mk.0 == k)
                .map(|(mk, v)| {
                    let ikey = ikey_of(mk);
                    let parsed = key::parse_internal_key(&ikey).unwrap();
                    match parsed.kind {
                        ValueKind::Deletion => MemtableGet::Deleted { seq: parsed.seq },
                        kind => MemtableGet::Found {
                            kind,
                            seq: parsed.seq,
                            value: v.clone(),
                        },
                    }
                });
            prop_assert_eq!(m.get(&k, snapshot), want);

            // seek: first >= target, then one step.
            let mut after = model.range(t.clone()..).map(|(mk, _)| ikey_of(mk));
            it.seek(&target);
            prop_assert_eq!(it.valid().then(|| it.key().to_vec()), after.next());
            if it.valid() {
                if step {
                    it.next()
                } else {
                    it.prev()
                }
                let want = if step {
                    after.next()
                } else {
                    model
                        .range(..t.clone())
                        .next_back()
                        .map(|(mk, _)| ikey_of(mk))
                };
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), want);
            }

            // seek_for_prev: last <= target, then one step.
            let mut before = model.range(..=t.clone()).rev().map(|(mk, _)| ikey_of(mk));
            it.seek_for_prev(&target);
            prop_assert_eq!(it.valid().then(|| it.key().to_vec()), before.next());
            if it.valid() {
                if step {
                    it.next()
                } else {
                    it.prev()
                }
                let want = if step {
                    model
                        .range((
                            std::ops::Bound::Excluded(t.clone()),
                            std::ops::Bound::Unbounded,
                        ))
                        .next()
                        .map(|(mk, _)| ikey_of(mk))
                } else {
                    before.next()
                };
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), want);
            }
        }
    }
    Ok(())
}

/// Writers insert known keys while readers iterate: every iteration is strictly increasing and
/// contains every key whose insert finished before the iterator was created.
#[test]
fn readers_see_a_consistent_list_while_writers_insert() {
    const WRITERS: usize = 2;
    const READERS: usize = 3;
    // Miri interprets every access: a smaller run checks the same protocol there.
    const PER_WRITER: usize = if cfg!(miri) { 200 } else { 20_000 };
    let m = Arc::new(SkipListMemtable::new());
    // Writer w inserts keys ((i * 7919 + w) mod ..), scattered across the key space.
    let keys: Vec<Vec<Vec<u8>>> = (0..WRITERS)
        .map(|w| {
            (0..PER_WRITER)
                .map(|i| {
                    let k = ((i as u64 * 7919) % PER_WRITER as u64) * WRITERS as u64 + w as u64;
                    k.to_be_bytes().to_vec()
                })
                .collect()
        })
        .collect();
    let keys = Arc::new(keys);
    let done: Arc<Vec<AtomicUsize>> = Arc::new((0..WRITERS).map(|_| AtomicUsize::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (m, keys, done) = (m.clone(), keys.clone(), done.clone());
            std::thread::spawn(move || {
                for (i, k) in keys[w].iter().enumerate() {
                    m.insert(k, (i * WRITERS + w) as u64 + 1, ValueKind::Value, &k[4..]);
                    done[w].store(i + 1, AtomicOrdering::Release);
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (m, keys, done, stop) = (m.clone(), keys.clone(), done.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut passes = 0;
                loop {
                    let finished = stop.load(AtomicOrdering::Acquire);
                    let seen: Vec<usize> = done
                        .iter()
                        .map(|d| d.load(AtomicOrdering::Acquire))
                        .collect();
                    let mut it = m.clone().iter();
                    let mut got: Vec<Vec<u8>> = Vec::new();
                    it.seek_to_first();
                    while it.valid() {
                        let k = it.key();
                        if let Some(last) = got.last() {
                            assert_eq!(compare_internal(last, k), Ordering::Less);
                        }
                        assert_eq!(it.value(), &key::user_key(k)[4..]);
                        got.push(k.to_vec());
                        it.next();
                    }
                    let mut users: Vec<&[u8]> = got.iter().map(|k| key::user_key(k)).collect();
                    users.dedup();
                    for (w, &n) in seen.iter().enumerate() {
                        for k in &keys[w][..n] {
                            assert!(users.binary_search(&&k[..]).is_ok(), "missing key");
                        }
                    }
                    passes += 1;
                    if finished {
                        return passes;
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, AtomicOrdering::Release);
    for r in readers {
        assert!(r.join().unwrap() >= 1);
    }
    assert_eq!(m.len(), WRITERS * PER_WRITER);
}

/// Gets racing with inserts find every key whose insert finished before the get began.
#[test]
fn gets_see_every_finished_insert() {
    const N: u64 = if cfg!(miri) { 300 } else { 30_000 };
    let m = Arc::new(SkipListMemtable::new());
    let done = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (m, done) = (m.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 0..N {
                let k = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes();
                m.insert(&k, i + 1, ValueKind::Value, &k);
                done.store(i as usize + 1, AtomicOrdering::Release);
            }
        })
    };
    let mut probe = 0u64;
    loop {
        let n = done.load(AtomicOrdering::Acquire) as u64;
        if n > 0 {
            let i = probe % n;
            probe = probe.wrapping_add(7);
            let k = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes();
            assert_eq!(
                m.get(&k, MAX_SEQNO),
                Some(MemtableGet::Found {
                    kind: ValueKind::Value,
                    seq: i + 1,
                    value: k.to_vec()
                })
            );
        }
        if n == N {
            break;
        }
    }
    writer.join().unwrap();
}

/// A xorshift64 generator from `seed` (not zero).
fn xorshift(mut rng: u64) -> impl FnMut() -> u64 {
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    }
}

/// Inserts the sorted `batch` of (internal key, value) into `single` one by one and into
/// `batched` as one sorted batch.
fn insert_both(
    single: &SkipListMemtable,
    batched: &SkipListMemtable,
    batch: &[(Vec<u8>, Vec<u8>)],
) {
    for (ikey, value) in batch {
        let parsed = key::parse_internal_key(ikey).unwrap();
        single.insert(parsed.user_key, parsed.seq, parsed.kind, value);
    }
    let refs: Vec<(&[u8], &[u8])> = batch.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    batched.insert_sorted(&refs);
}

/// A sorted batch inserted at once leaves the same list as the same entries inserted one by one,
/// whether the batch lands in an empty list, between existing entries, or in several batches.
#[test]
fn insert_sorted_matches_single_inserts() {
    let mut next_rand = xorshift(0x9e37_79b9_7f4a_7c15);
    let single = Arc::new(SkipListMemtable::new());
    let batched = Arc::new(SkipListMemtable::new());
    let mut seq = 0;
    for round in 0..if cfg!(miri) { 10 } else { 200 } {
        let n = (next_rand() % 12) as usize;
        // Neighbours (a shared random prefix) in most rounds, scattered keys in the others.
        let prefix = next_rand() % 64;
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
            .map(|_| {
                seq += 1;
                let k = if round % 3 == 0 {
                    next_rand() % 512
                } else {
                    prefix * 8 + next_rand() % 8
                };
                let kind = if seq % 5 == 0 {
                    ValueKind::Deletion
                } else {
                    ValueKind::Value
                };
                let ikey = key::internal_key(&(k as u16).to_be_bytes(), seq, kind);
                (ikey, seq.to_le_bytes().to_vec())
            })
            .collect();
        batch.sort_by(|a, b| compare_internal(&a.0, &b.0));
        insert_both(&single, &batched, &batch);
    }
    assert_eq!(single.len(), batched.len());
    let want = collect_forward(&mut *single.clone().iter());
    let got = collect_forward(&mut *batched.clone().iter());
    assert_eq!(got, want);
    // Every level is sorted too: seeks land where they land in the single-insert list.
    for k in 0..520u16 {
        for snapshot in [0, seq / 2, MAX_SEQNO] {
            let target = key::seek_key(&k.to_be_bytes(), snapshot);
            let (mut a, mut b) = (single.clone().iter(), batched.clone().iter());
            a.seek(&target);
            b.seek(&target);
            assert_eq!(
                a.valid().then(|| a.key().to_vec()),
                b.valid().then(|| b.key().to_vec())
            );
            assert_eq!(
                single.get(&k.to_be_bytes(), snapshot),
                batched.get(&k.to_be_bytes(), snapshot)
            );
        }
    }
}

/// Small batches of keys scattered over a large list (a membuffer bucket of one hot collection,
/// searched for all at once), with several versions of a key in one batch, versions of keys the
/// list holds, and keys next to each other in the same gap, leave the list that single inserts
/// leave, with every level sorted and each a sublist of the one below.
#[test]
fn scattered_batches_match_single_inserts_and_keep_every_level_sorted() {
    let mut next_rand = xorshift(0x2545_f491_4f6c_dd1d);
    let single = Arc::new(SkipListMemtable::new());
    let batched = Arc::new(SkipListMemtable::new());
    let key_of = |k: u64| format!("h{:08}", k).into_bytes();
    let mut seq = 0;
    // A tall list first, through large sorted batches (the splice path).
    let base = if cfg!(miri) { 200 } else { 20_000 };
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = (0..base)
        .map(|k| {
            seq += 1;
            (
                key::internal_key(&key_of(k * 10), seq, ValueKind::Value),
                Vec::new(),
            )
        })
        .collect();
    batch.sort_by(|a, b| compare_internal(&a.0, &b.0));
    for chunk in batch.chunks(1000) {
        insert_both(&single, &batched, chunk);
    }
    for _ in 0..if cfg!(miri) { 20 } else { 2_000 } {
        let n = 1 + (next_rand() % 16) as usize;
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(n);
        for _ in 0..n {
            seq += 1;
            let k = match next_rand() % 4 {
                // A key the list holds (a newer version), or one beside it in its gap.
                0 => (next_rand() % base) * 10,
                1 => (next_rand() % base) * 10 + 1 + next_rand() % 3,
                // The key of the batch's previous entry again (an older version may come
                // after a newer one in sequence order).
                2 if !batch.is_empty() => {
                    let last: &Vec<u8> = &batch[batch.len() - 1].0;
                    let user = key::user_key(last);
                    std::str::from_utf8(&user[1..]).unwrap().parse().unwrap()
                }
                _ => next_rand() % (base * 10),
            };
            let kind = if seq % 7 == 0 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            batch.push((
                key::internal_key(&key_of(k), seq, kind),
                seq.to_le_bytes().to_vec(),
            ));
        }
        batch.sort_by(|a, b| compare_internal(&a.0, &b.0));
        insert_both(&single, &batched, &batch);
    }
    batched.check_levels();
    single.check_levels();
    assert_eq!(single.len(), batched.len());
    let want = collect_forward(&mut *single.clone().iter());
    let got = collect_forward(&mut *batched.clone().iter());
    assert_eq!(got, want);
    for probe in 0..if cfg!(miri) { 50 } else { 3_000 } {
        let k = key_of(probe * 7 % (base * 10));
        for snapshot in [seq / 3, MAX_SEQNO] {
            assert_eq!(single.get(&k, snapshot), batched.get(&k, snapshot));
        }
    }
}

/// The point index answers like a search: across its growth, for keys with several versions
/// inserted out of sequence order (as FloDB drains do), at the newest and at older snapshots, and
/// for absent keys.
#[test]
fn point_lookups_agree_with_the_list_across_index_growth() {
    // Past the 768 keys at which the index first grows, also under Miri.
    const KEYS: u64 = if cfg!(miri) { 1_000 } else { 20_000 };
    let m = Arc::new(SkipListMemtable::new());
    let key_of = |i: u64| format!("user{:08}", i.wrapping_mul(0x9e37_79b9) % 1_000_000_007);
    // Version 2 of each key first (seq 2i+2), then version 1 (seq 2i+1), half of them through a
    // sorted batch.
    for i in 0..KEYS {
        m.insert(key_of(i).as_bytes(), 2 * i + 2, ValueKind::Value, b"new");
    }
    let mut older: Vec<(Vec<u8>, u64)> = (0..KEYS)
        .map(|i| (key_of(i).into_bytes(), 2 * i + 1))
        .collect();
    older.sort();
    let (batch, singles) = older.split_at(older.len() / 2);
    let ikeys: Vec<Vec<u8>> = batch
        .iter()
        .map(|(k, seq)| key::internal_key(k, *seq, ValueKind::Deletion))
        .collect();
    let entries: Vec<(&[u8], &[u8])> = ikeys.iter().map(|k| (&k[..], &b""[..])).collect();
    m.insert_sorted(&entries);
    for (k, seq) in singles {
        m.insert(k, *seq, ValueKind::Deletion, b"");
    }
    for i in 0..KEYS {
        let k = key_of(i);
        let found = |seq| MemtableGet::Found {
            kind: ValueKind::Value,
            seq,
            value: b"new".to_vec(),
        };
        assert_eq!(m.get(k.as_bytes(), MAX_SEQNO), Some(found(2 * i + 2)));
        assert_eq!(
            m.get(k.as_bytes(), 2 * i + 1),
            Some(MemtableGet::Deleted { seq: 2 * i + 1 })
        );
        assert_eq!(m.get(k.as_bytes(), 2 * i), None);
        assert_eq!(m.get(format!("{k}x").as_bytes(), MAX_SEQNO), None);
    }
    assert_eq!(m.get(b"", MAX_SEQNO), None);
}

/// Newer versions linked by sorted batches hang in their key's chain instead of growing the list;
/// a full chain makes the next version a list node of its own. Plain inserts start no chains.
#[test]
fn newer_versions_join_chains_up_to_their_cap() {
    let keys = 10u64;
    let rounds = 3 * MAX_CHAIN as u64 + 2;
    let chained = Arc::new(SkipListMemtable::new());
    let plain = Arc::new(SkipListMemtable::new());
    let mut seq = 0;
    for _ in 0..rounds {
        let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..keys)
            .map(|k| {
                seq += 1;
                let ikey = key::internal_key(&k.to_be_bytes(), seq, ValueKind::Value);
                (ikey, seq.to_le_bytes().to_vec())
            })
            .collect();
        let refs: Vec<(&[u8], &[u8])> = batch.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        chained.insert_sorted(&refs);
        for (ikey, value) in &batch {
            let parsed = key::parse_internal_key(ikey).unwrap();
            plain.insert(parsed.user_key, parsed.seq, parsed.kind, value);
        }
    }
    assert_eq!(chained.len(), (keys * rounds) as usize);
    // Each group: one list node and MAX_CHAIN chain versions.
    let groups = rounds.div_ceil(MAX_CHAIN as u64 + 1);
    assert_eq!(chained.list_len(), (keys * groups) as usize);
    assert_eq!(plain.list_len(), (keys * rounds) as usize);
    assert_eq!(
        collect_forward(&mut *chained.clone().iter()),
        collect_forward(&mut *plain.clone().iter())
    );
    for k in 0..keys {
        for snapshot in 0..=seq + 1 {
            assert_eq!(
                chained.get(&k.to_be_bytes(), snapshot),
                plain.get(&k.to_be_bytes(), snapshot)
            );
        }
    }
}
