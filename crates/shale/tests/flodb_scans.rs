//! Short range and prefix scans of the FloDB memtable while writers keep inserting, checked for
//! exactness against a model: a scan at a published sequence number sees every entry of its range
//! up to that number (in the membuffer or in the skiplist) and keeps every entry it yields in
//! order. Ranges inside one bucket, across bucket runs, across key prefixes (which drain the
//! membuffer), prefix scans, empty ranges, forward and backward.
//!
//! A scan's snapshot is the newest sequence number below every insert still in flight (as the
//! engine publishes only sequence numbers whose inserts finished); its cursor is created after it
//! read that number.

use shale::memtable::{FloDbConfig, FloDbMemtable, Memtable};
use shale::ValueKind;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const WRITERS: usize = 3;
const WRITES: u64 = 200_000;
/// Scans each scanner runs while the writers write.
const SCANS: u64 = 150;
const MAX_SEQNO: u64 = (1 << 56) - 1;

/// Type bytes: most keys are of type `h`; a few of `g` and `i` sit on both sides of it.
const TYPES: [u8; 3] = [b'g', b'h', b'i'];

/// The key written at `seq`: a type byte, a 2-byte hash (64 values, 1024 apart, so each has a
/// bucket of its own with 256 buckets after an 8-bit prefix), then one of 12 ids.
fn key_of(seq: u64) -> Vec<u8> {
    let x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let kind = match x >> 60 {
        0 => TYPES[0],
        1 => TYPES[2],
        _ => TYPES[1],
    };
    let hash = ((x >> 20) % 64) as u16 * 1024;
    let id = ((x >> 40) % 12) as u32;
    let mut k = vec![kind];
    k.extend_from_slice(&hash.to_be_bytes());
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn kind_of(seq: u64) -> ValueKind {
    if seq.is_multiple_of(5) {
        ValueKind::Deletion
    } else {
        ValueKind::Value
    }
}

fn value_of(seq: u64) -> Vec<u8> {
    seq.to_le_bytes().to_vec()
}

fn internal(user: &[u8], seq: u64, kind: u8) -> Vec<u8> {
    let mut k = user.to_vec();
    k.extend_from_slice(&(seq << 8 | kind as u64).to_le_bytes());
    k
}

fn split(ikey: &[u8]) -> (&[u8], u64) {
    let (user, trailer) = ikey.split_at(ikey.len() - 8);
    (user, u64::from_le_bytes(trailer.try_into().unwrap()) >> 8)
}

fn within(k: &[u8], lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> bool {
    let above_lower = match lower {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below_upper = match upper {
        Bound::Included(u) => k <= u.as_slice(),
        Bound::Excluded(u) => k < u.as_slice(),
        Bound::Unbounded => true,
    };
    above_lower && below_upper
}

/// A range of one of the shapes the test covers, from the random `r`.
fn range(r: u64) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let hash = |i: u64| (((i % 64) as u16) * 1024).to_be_bytes();
    let key = |kind: u8, h: u64, id: u32| {
        let mut k = vec![kind];
        k.extend_from_slice(&hash(h));
        k.extend_from_slice(&id.to_be_bytes());
        k
    };
    let id = |i: u64| (i % 13) as u32;
    match r % 6 {
        // Inside one bucket.
        0 => (
            Bound::Included(key(b'h', r >> 8, id(r >> 16))),
            Bound::Included(key(b'h', r >> 8, id(r >> 16) + 4)),
        ),
        // Across a run of buckets.
        1 => {
            let h = (r >> 8) % 60;
            (
                Bound::Excluded(key(b'h', h, id(r >> 16))),
                Bound::Excluded(key(b'h', h + 1 + (r >> 24) % 3, id(r >> 32))),
            )
        }
        // A prefix scan of one hash: every id under it.
        2 => {
            let mut prefix = vec![b'h'];
            prefix.extend_from_slice(&hash(r >> 8));
            let mut end = prefix.clone();
            *end.last_mut().unwrap() += 1;
            (Bound::Included(prefix), Bound::Excluded(end))
        }
        // Across type bytes: the walk leaves its prefix.
        3 => (
            Bound::Included(key(b'g', r >> 8, 0)),
            Bound::Included(key(b'h', r >> 16, 3)),
        ),
        // Empty: inverted.
        4 => (
            Bound::Included(key(b'h', r >> 8, 9)),
            Bound::Included(key(b'h', r >> 8, 2)),
        ),
        // The last type, up to the end of the key space.
        _ => (Bound::Included(key(b'i', r >> 8, 0)), Bound::Unbounded),
    }
}

/// Every (user key, seq) of the range up to `snapshot`, in internal-key order.
fn model(
    keys: &[Vec<u8>],
    snapshot: u64,
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, u64)> {
    let mut want: Vec<(Vec<u8>, u64)> = (1..=snapshot)
        .filter(|&s| within(&keys[s as usize], lower, upper))
        .map(|s| (keys[s as usize].clone(), s))
        .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    want
}

/// Scans the range with a fresh cursor, forward or backward, as the engine's reader does; returns
/// the entries up to `snapshot`, in internal-key order, after checking the order of all of them.
fn scan(
    m: &Arc<FloDbMemtable>,
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
    snapshot: u64,
    backward: bool,
) -> Vec<(Vec<u8>, u64)> {
    let mut c = m.clone().range_iter(
        lower.as_ref().map(Vec::as_slice),
        upper.as_ref().map(Vec::as_slice),
    );
    let mut got = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    let mut take = |ikey: &[u8], value: &[u8]| {
        let (user, seq) = split(ikey);
        if let Some(prev) = &last {
            let (pu, ps) = split(prev);
            let ordered = if backward {
                (user, std::cmp::Reverse(seq)) < (pu, std::cmp::Reverse(ps))
            } else {
                (pu, std::cmp::Reverse(ps)) < (user, std::cmp::Reverse(seq))
            };
            assert!(ordered, "scan out of order");
        }
        last = Some(ikey.to_vec());
        if seq <= snapshot {
            assert_eq!(
                value,
                if ikey[ikey.len() - 8] == 0 {
                    Vec::new()
                } else {
                    value_of(seq)
                }
            );
            got.push((user.to_vec(), seq));
        }
    };
    if backward {
        match upper {
            Bound::Included(k) => c.seek_for_prev(&internal(k, 0, 0)),
            Bound::Excluded(k) => c.seek_for_prev(&internal(k, MAX_SEQNO, 0xff)),
            Bound::Unbounded => c.seek_to_last(),
        }
        while c.valid() && within(split(c.key()).0, lower, &Bound::Unbounded) {
            take(c.key(), c.value());
            c.prev();
        }
        got.reverse();
    } else {
        match lower {
            Bound::Included(k) => c.seek(&internal(k, MAX_SEQNO, 0xff)),
            Bound::Excluded(k) => {
                let mut after = k.clone();
                after.push(0);
                c.seek(&internal(&after, MAX_SEQNO, 0xff));
            }
            Bound::Unbounded => c.seek_to_first(),
        }
        while c.valid() && within(split(c.key()).0, &Bound::Unbounded, upper) {
            take(c.key(), c.value());
            c.next();
        }
    }
    got
}

fn run(config: FloDbConfig) {
    let m = Arc::new(FloDbMemtable::new(config.clone()));
    let keys: Arc<Vec<Vec<u8>>> = Arc::new((0..=WRITES).map(key_of).collect());
    let next = Arc::new(AtomicU64::new(1));
    // The sequence number each writer works on, or at most the one it is about to claim;
    // u64::MAX when idle.
    let in_flight: Arc<Vec<AtomicU64>> =
        Arc::new((0..WRITERS).map(|_| AtomicU64::new(u64::MAX)).collect());
    let done = Arc::new(AtomicBool::new(false));
    // Set once every scanner ran its scans: the writers stop.
    let stop = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(WRITERS + 2));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (m, keys, next, in_flight, start, stop) = (
                m.clone(),
                keys.clone(),
                next.clone(),
                in_flight.clone(),
                start.clone(),
                stop.clone(),
            );
            thread::spawn(move || {
                start.wait();
                loop {
                    // A lower bound of the claim first, so a scan that sees the claim sees it.
                    in_flight[w].store(next.load(Ordering::SeqCst), Ordering::SeqCst);
                    let seq = next.fetch_add(1, Ordering::SeqCst);
                    in_flight[w].store(seq, Ordering::SeqCst);
                    if seq > WRITES || stop.load(Ordering::Relaxed) == 2 {
                        // The claim is never written: it stays in flight, so no snapshot
                        // reaches it.
                        return;
                    }
                    let value = match kind_of(seq) {
                        ValueKind::Deletion => Vec::new(),
                        _ => value_of(seq),
                    };
                    m.insert(&keys[seq as usize], seq, kind_of(seq), &value);
                    in_flight[w].store(u64::MAX, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let scanners: Vec<_> = (0..2u64)
        .map(|t| {
            let config = config.clone();
            let (m, keys, next, in_flight, done, start, stop) = (
                m.clone(),
                keys.clone(),
                next.clone(),
                in_flight.clone(),
                done.clone(),
                start.clone(),
                stop.clone(),
            );
            thread::spawn(move || {
                let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ (t + 1);
                let mut scans = 0u64;
                start.wait();
                loop {
                    let finished = done.load(Ordering::Acquire);
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let (lower, upper) = range(rng);
                    let claimed = next.load(Ordering::SeqCst);
                    let busy = in_flight.iter().map(|s| s.load(Ordering::SeqCst)).min();
                    let snapshot = (claimed.min(busy.unwrap_or(u64::MAX)) - 1).min(WRITES);
                    let backward = rng >> 63 == 1;
                    let got = scan(&m, &lower, &upper, snapshot, backward);
                    let want = model(&keys, snapshot, &lower, &upper);
                    assert_eq!(
                        got, want,
                        "scan of {lower:?}..{upper:?} at {snapshot} (backward: {backward}) with {config:?}"
                    );
                    scans += 1;
                    if scans == SCANS {
                        stop.fetch_add(1, Ordering::Relaxed);
                    }
                    if finished {
                        return scans;
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    for w in writers {
        w.join().unwrap();
    }
    assert!(Instant::now() < deadline, "writers took too long");
    done.store(true, Ordering::Release);
    for s in scanners {
        assert!(s.join().unwrap() > 0);
    }
    // A last scan of each shape sees the whole history.
    let written = in_flight
        .iter()
        .map(|s| s.load(Ordering::SeqCst))
        .min()
        .map_or(WRITES, |s| s - 1)
        .min(WRITES);
    for r in 0..6 {
        let (lower, upper) = range(r * 0x1_0001 + 7);
        for backward in [false, true] {
            let got = scan(&m, &lower, &upper, written, backward);
            assert_eq!(got, model(&keys, written, &lower, &upper));
        }
    }
}

#[test]
fn short_scans_under_concurrent_writers_are_exact() {
    // 256 buckets after an 8-bit prefix: each hash of the test owns a bucket.
    for drain_threads in [0, 1] {
        run(FloDbConfig {
            membuffer_bytes: 16 << 10,
            prefix_bits: 8,
            drain_threads,
        });
    }
    // One bucket, and a prefix the keys do not share.
    run(FloDbConfig {
        membuffer_bytes: 64,
        prefix_bits: 0,
        drain_threads: 0,
    });
    run(FloDbConfig {
        membuffer_bytes: 4096,
        prefix_bits: 3,
        drain_threads: 0,
    });
}
