//! Tests of FloDB's range cursor: which buckets a scan reads, and exactness within its bounds
//! against a `BTreeMap` model, forward, backward and back and forth.

use super::*;
use crate::key::{ValueKind, KIND_FOR_SEEK, MAX_SEQNO};
use crate::memtable::flodb::{FloDbConfig, BUCKET_BYTES, BUCKET_SLOTS};
use crate::memtable::test_support::{ikey_of, ModelKey};
use crate::memtable::Memtable;
use proptest::prelude::*;
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// A server-like key: a type byte, a 2-byte bucket-spreading hash, then an id.
fn typed_key(kind: u8, hash: u16, id: u32) -> Vec<u8> {
    let mut k = vec![kind];
    k.extend_from_slice(&hash.to_be_bytes());
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// A memtable of 1024 buckets indexed by the two hash bytes after the type byte (prefix 8 bits),
/// holding `per_hash` ids under each of `hashes` hashes of type `h`, seq = insertion order.
fn loaded(hashes: u16, per_hash: u32) -> (Arc<FloDbMemtable>, Vec<Vec<u8>>) {
    let m = Arc::new(FloDbMemtable::new(FloDbConfig {
        membuffer_bytes: BUCKET_BYTES << 10,
        prefix_bits: 8,
        drain_threads: 0,
    }));
    let mut keys = Vec::new();
    let mut seq = 0;
    for id in 0..per_hash {
        for hash in 0..hashes {
            let k = typed_key(b'h', hash.wrapping_mul(64), id);
            seq += 1;
            m.insert(&k, seq, ValueKind::Value, &k);
            keys.push(k);
        }
    }
    keys.sort();
    (m, keys)
}

fn cursor(m: &Arc<FloDbMemtable>, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> FloDbCursor {
    FloDbCursor::new(m.clone(), lower, upper)
}

/// The user keys of a forward scan from `lower` (inclusive) to `upper` (inclusive).
fn scan_forward(c: &mut FloDbCursor, lower: &[u8], upper: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    c.seek(&key::seek_key(lower, MAX_SEQNO));
    while c.valid() && key::user_key(c.key()) <= upper {
        out.push(key::user_key(c.key()).to_vec());
        c.next();
    }
    out
}

#[test]
#[cfg_attr(
    miri,
    ignore = "18,432 inserts: too slow under Miri (the 64-bucket tests cover the cursor)"
)]
fn a_short_scan_reads_only_its_bucket_and_moves_nothing() {
    // `BUCKET_SLOTS + 3` ids per bucket: the write after the bucket filled drained it with its
    // own, two wait in the bucket.
    let (m, keys) = loaded(1024, BUCKET_SLOTS as u32 + 3);
    let before = m.level_counts();
    assert_eq!(before, (2 * 1024, (BUCKET_SLOTS + 1) * 1024));
    let (lo, hi) = (typed_key(b'h', 64 * 500, 2), typed_key(b'h', 64 * 500, 9));
    let mut c = cursor(&m, Bound::Included(&lo), Bound::Included(&hi));
    let got = scan_forward(&mut c, &lo, &hi);
    let want: Vec<_> = keys
        .iter()
        .filter(|k| (&lo..=&hi).contains(k))
        .cloned()
        .collect();
    assert_eq!(got.len(), 8);
    assert_eq!(got, want);
    let b = m.bucket_of(&lo);
    assert_eq!(c.covered_run(), Some((b, b)));
    assert_eq!(m.level_counts(), before);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "10,240 inserts: too slow under Miri (the 64-bucket tests cover the cursor)"
)]
fn a_scan_across_buckets_reads_the_run_between_both_ways() {
    let (m, keys) = loaded(1024, 10);
    let before = m.level_counts();
    let (lo, hi) = (typed_key(b'h', 64 * 100, 6), typed_key(b'h', 64 * 103, 1));
    let want: Vec<_> = keys
        .iter()
        .filter(|k| (&lo..=&hi).contains(k))
        .cloned()
        .collect();
    assert_eq!(want.len(), 4 + 10 + 10 + 2);
    let mut c = cursor(&m, Bound::Included(&lo), Bound::Included(&hi));
    assert_eq!(scan_forward(&mut c, &lo, &hi), want);
    assert_eq!(c.covered_run(), Some((m.bucket_of(&lo), m.bucket_of(&hi))));
    // Backward, on a fresh cursor: from the upper bound down.
    let mut c = cursor(&m, Bound::Included(&lo), Bound::Included(&hi));
    c.seek_for_prev(&key::internal_key(&hi, 0, ValueKind::Deletion));
    let mut back = Vec::new();
    while c.valid() && key::user_key(c.key()) >= lo.as_slice() {
        back.push(key::user_key(c.key()).to_vec());
        c.prev();
    }
    back.reverse();
    assert_eq!(back, want);
    assert_eq!(c.covered_run(), Some((m.bucket_of(&lo), m.bucket_of(&hi))));
    assert_eq!(m.level_counts(), before);
}

#[test]
fn a_scan_that_leaves_its_prefix_drains_every_bucket() {
    let (m, keys) = loaded(64, 10);
    for (i, k) in [b"g\xff", b"i\x00"].iter().enumerate() {
        m.insert(*k, 10_000 + i as u64, ValueKind::Value, b"x");
    }
    let (lo, hi) = (b"g".to_vec(), b"i\x01".to_vec());
    let mut c = cursor(&m, Bound::Included(&lo), Bound::Included(&hi));
    let got = scan_forward(&mut c, &lo, &hi);
    assert_eq!(got.len(), keys.len() + 2);
    assert!(c.drained_all());
    assert_eq!(m.level_counts().0, 0);
}

#[test]
fn empty_ranges_and_an_empty_memtable_yield_nothing() {
    let empty = Arc::new(FloDbMemtable::new(FloDbConfig {
        membuffer_bytes: 4096,
        prefix_bits: 0,
        drain_threads: 0,
    }));
    let mut c = cursor(&empty, Bound::Unbounded, Bound::Unbounded);
    c.seek_to_first();
    assert!(!c.valid());
    c.seek_to_last();
    assert!(!c.valid());

    let (m, _) = loaded(64, 10);
    let before = m.level_counts();
    // A range between two ids of one hash that holds no key.
    let (lo, hi) = (typed_key(b'h', 64 * 3, 11), typed_key(b'h', 64 * 3, 20));
    let mut c = cursor(&m, Bound::Included(&lo), Bound::Included(&hi));
    assert!(scan_forward(&mut c, &lo, &hi).is_empty());
    // An inverted range.
    let mut c = cursor(&m, Bound::Included(&hi), Bound::Included(&lo));
    assert!(scan_forward(&mut c, &hi, &lo).is_empty());
    assert_eq!(m.level_counts(), before);
}

#[test]
fn same_prefix_reads_missing_bytes_as_zero() {
    assert!(same_prefix(b"", b"", 20));
    assert!(same_prefix(b"ab", b"ab\x00\x00", 32));
    assert!(!same_prefix(b"ab", b"ab\x00\x01", 32));
    assert!(same_prefix(b"ab", b"ab\x00\x01", 31));
    assert!(same_prefix(b"\xf0", b"\xff", 4));
    assert!(!same_prefix(b"\xf0", b"\xff", 5));
    assert!(same_prefix(b"x", b"y", 0));
}

/// Bytes that vary where prefixes and bucket indices are read.
fn scan_key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            Just(0x00u8),
            Just(0x01),
            Just(0x40),
            Just(0x7f),
            Just(0x80),
            Just(0xc3),
            Just(0xff)
        ],
        0..5,
    )
}

fn bound(kind: u8, k: &[u8]) -> Bound<&[u8]> {
    match kind {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

fn within(k: &[u8], lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    let above_lower = match lower {
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
        Bound::Unbounded => true,
    };
    let below_upper = match upper {
        Bound::Included(u) => k <= u,
        Bound::Excluded(u) => k < u,
        Bound::Unbounded => true,
    };
    above_lower && below_upper
}

/// Positions `c` on the first entry of the range as a reader does (a seek to the lower bound).
fn seek_lower(c: &mut FloDbCursor, lower: Bound<&[u8]>) {
    match lower {
        Bound::Included(k) => c.seek(&key::seek_key(k, MAX_SEQNO)),
        Bound::Excluded(k) => {
            let mut after = k.to_vec();
            after.push(0);
            c.seek(&key::seek_key(&after, MAX_SEQNO));
        }
        Bound::Unbounded => c.seek_to_first(),
    }
}

/// Positions `c` on the last entry of the range as a reader does.
fn seek_upper(c: &mut FloDbCursor, upper: Bound<&[u8]>) {
    match upper {
        Bound::Included(k) => c.seek_for_prev(&key::internal_key(k, 0, ValueKind::Deletion)),
        Bound::Excluded(k) => {
            let mut t = k.to_vec();
            t.extend_from_slice(&key::pack_trailer(MAX_SEQNO, KIND_FOR_SEEK).to_le_bytes());
            c.seek_for_prev(&t);
        }
        Bound::Unbounded => c.seek_to_last(),
    }
}

/// The entries of a forward scan of the range, then of a backward one (reversed), each keeping
/// only sequence numbers up to `cut`.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn scans(
    c: &mut FloDbCursor,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    cut: u64,
) -> (Entries, Entries) {
    let visible = |k: &[u8]| key::parse_internal_key(k).is_some_and(|p| p.seq <= cut);
    let mut forward = Vec::new();
    seek_lower(c, lower);
    while c.valid() && within(key::user_key(c.key()), Bound::Unbounded, upper) {
        if visible(c.key()) {
            forward.push((c.key().to_vec(), c.value().to_vec()));
        }
        c.next();
    }
    let mut backward = Vec::new();
    seek_upper(c, upper);
    while c.valid() && within(key::user_key(c.key()), lower, Bound::Unbounded) {
        if visible(c.key()) {
            backward.push((c.key().to_vec(), c.value().to_vec()));
        }
        c.prev();
    }
    backward.reverse();
    (forward, backward)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Cursors created between inserts, with random bounds, see exactly the entries of their
    /// range inserted before them (and stay in order over those inserted after), forward,
    /// backward, and on a walk back and forth.
    #[test]
    fn range_cursors_match_a_btreemap_model(
        buffer_shift in 6u32..=12,
        prefix_bits in prop_oneof![Just(0u32), Just(8), 0u32..20],
        drain_threads in 0usize..=1,
        puts in proptest::collection::vec((scan_key(), 0u8..3, proptest::collection::vec(any::<u8>(), 0..6)), 0..300),
        cursors in proptest::collection::vec(
            (any::<prop::sample::Index>(), 0u8..3, scan_key(), 0u8..3, scan_key()), 1..5),
        walk in proptest::collection::vec(any::<bool>(), 0..40),
    ) {
        let m = Arc::new(FloDbMemtable::new(FloDbConfig {
            membuffer_bytes: 1 << buffer_shift,
            prefix_bits,
            drain_threads,
        }));
        // (cursor, its bounds, the sequence number of the last insert before it, the model then)
        let mut cuts: Vec<(usize, usize)> = cursors
            .iter()
            .enumerate()
            .map(|(i, c)| (c.0.index(puts.len() + 1), i))
            .collect();
        cuts.sort();
        let mut open = Vec::new();
        let mut model: BTreeMap<ModelKey, Vec<u8>> = BTreeMap::new();
        let mut next_cut = cuts.iter().peekable();
        for at in 0..=puts.len() {
            while let Some(&&(c, i)) = next_cut.peek() {
                if c != at {
                    break;
                }
                next_cut.next();
                let (_, lk, lo, uk, hi) = &cursors[i];
                let (lower, upper) = (bound(*lk, lo), bound(*uk, hi));
                let want: Entries = model
                    .iter()
                    .filter(|(k, _)| within(&k.0, lower, upper))
                    .map(|(k, v)| (ikey_of(k), v.clone()))
                    .collect();
                open.push((cursor(&m, lower, upper), i, at as u64, want));
            }
            if let Some((k, kind, v)) = puts.get(at) {
                let seq = at as u64 + 1;
                let kind = ValueKind::from_u8(*kind).unwrap();
                m.insert(k, seq, kind, v);
                model.insert((k.clone(), Reverse(key::pack_trailer(seq, kind as u8))), v.clone());
            }
        }
        for (mut c, i, cut, want) in open {
            let (_, lk, lo, uk, hi) = &cursors[i];
            let (lower, upper) = (bound(*lk, lo), bound(*uk, hi));
            let (forward, backward) = scans(&mut c, lower, upper, cut);
            prop_assert_eq!(&forward, &want);
            prop_assert_eq!(&backward, &want);
        }

        // Back and forth on a cursor made after every insert: each position inside the bounds
        // is the model's.
        let (_, lk, lo, uk, hi) = &cursors[0];
        let (lower, upper) = (bound(*lk, lo), bound(*uk, hi));
        let want: Entries = model
            .iter()
            .filter(|(k, _)| within(&k.0, lower, upper))
            .map(|(k, v)| (ikey_of(k), v.clone()))
            .collect();
        let mut c = cursor(&m, lower, upper);
        seek_lower(&mut c, lower);
        let mut at = 0usize;
        for forward in walk {
            match want.get(at) {
                Some((k, v)) => {
                    prop_assert!(c.valid());
                    prop_assert_eq!(c.key(), k.as_slice());
                    prop_assert_eq!(c.value(), v.as_slice());
                }
                None => break,
            }
            if forward {
                c.next();
                at += 1;
            } else if at == 0 {
                break;
            } else {
                c.prev();
                at -= 1;
            }
        }
    }
}
