//! Concurrent stress test of the FloDB memtable through the public API: writers, readers and
//! scanners at once, over several membuffer shapes.

use shale::memtable::{FloDbConfig, FloDbMemtable, Memtable, MemtableGet};
use shale::ValueKind;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

const WRITERS: usize = 4;
const KEYS_PER_WRITER: usize = 300;
const WRITES_PER_WRITER: usize = 3000;

/// Writer `w`'s key `i`: scattered over the key space (so over the buckets), unique per (w, i).
fn key_of(w: usize, i: usize) -> Vec<u8> {
    let mut k = (i as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .to_be_bytes()
        .to_vec();
    k.push(w as u8);
    k
}

fn value_of(key: &[u8], seq: u64) -> Vec<u8> {
    let mut v = seq.to_le_bytes().to_vec();
    v.extend_from_slice(key);
    v
}

fn split_internal(ikey: &[u8]) -> (&[u8], u64) {
    let (user, trailer) = ikey.split_at(ikey.len() - 8);
    (user, u64::from_le_bytes(trailer.try_into().unwrap()) >> 8)
}

struct State {
    m: Arc<FloDbMemtable>,
    next_seq: AtomicU64,
    // INVARIANT: last_seq[w][i] is the seq of the newest finished insert of writer w's key i.
    last_seq: Vec<Vec<AtomicU64>>,
    // Every (key index, seq) writer w finished, in order.
    logs: Vec<Mutex<Vec<(usize, u64)>>>,
    stop: AtomicBool,
    /// Every thread waits here first, so readers and scanners run beside the writers even when
    /// the writers would finish before they are scheduled.
    start: Barrier,
}

fn stress(config: FloDbConfig) {
    let state = Arc::new(State {
        m: Arc::new(FloDbMemtable::new(config)),
        next_seq: AtomicU64::new(1),
        last_seq: (0..WRITERS)
            .map(|_| (0..KEYS_PER_WRITER).map(|_| AtomicU64::new(0)).collect())
            .collect(),
        logs: (0..WRITERS).map(|_| Mutex::new(Vec::new())).collect(),
        stop: AtomicBool::new(false),
        start: Barrier::new(WRITERS + 4),
    });

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let s = state.clone();
            thread::spawn(move || {
                let mut rng = 0x1234_5678_9abc_def1u64 ^ (w as u64) << 32;
                s.start.wait();
                for _ in 0..WRITES_PER_WRITER {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let i = (rng % KEYS_PER_WRITER as u64) as usize;
                    let k = key_of(w, i);
                    let seq = s.next_seq.fetch_add(1, AtomicOrdering::Relaxed);
                    s.m.insert(&k, seq, ValueKind::Value, &value_of(&k, seq));
                    s.last_seq[w][i].store(seq, AtomicOrdering::Release);
                    s.logs[w].lock().unwrap().push((i, seq));
                }
            })
        })
        .collect();

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let s = state.clone();
            thread::spawn(move || {
                let mut rng = 0xdead_beef_u64 + r;
                let mut gets = 0u64;
                s.start.wait();
                loop {
                    // Checked before the read, so every reader reads at least once.
                    let finished = s.stop.load(AtomicOrdering::Acquire);
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let w = (rng % WRITERS as u64) as usize;
                    let i = ((rng >> 8) % KEYS_PER_WRITER as u64) as usize;
                    let k = key_of(w, i);
                    let floor = s.last_seq[w][i].load(AtomicOrdering::Acquire);
                    match s.m.get(&k, u64::MAX >> 8) {
                        None => assert_eq!(floor, 0, "a finished insert is missing"),
                        Some(MemtableGet::Found { seq, value, kind }) => {
                            assert_eq!(kind, ValueKind::Value);
                            assert!(seq >= floor, "get went back in time: {seq} < {floor}");
                            assert_eq!(value, value_of(&k, seq));
                        }
                        Some(other) => panic!("unexpected {other:?}"),
                    }
                    gets += 1;
                    if finished {
                        return gets;
                    }
                }
            })
        })
        .collect();

    let scanners: Vec<_> = (0..2)
        .map(|_| {
            let s = state.clone();
            thread::spawn(move || {
                let mut scans = 0u64;
                s.start.wait();
                loop {
                    let finished = s.stop.load(AtomicOrdering::Acquire);
                    // The watermark: every insert each writer finished before the scan starts.
                    let watermark: Vec<Vec<(usize, u64)>> =
                        s.logs.iter().map(|l| l.lock().unwrap().clone()).collect();
                    let mut it = s.m.clone().iter();
                    let mut seen = HashSet::new();
                    let mut last: Option<Vec<u8>> = None;
                    it.seek_to_first();
                    while it.valid() {
                        let ikey = it.key();
                        if let Some(prev) = &last {
                            let (pu, ps) = split_internal(prev);
                            let (u, sq) = split_internal(ikey);
                            let order = pu.cmp(u).then(sq.cmp(&ps));
                            assert_eq!(order, Ordering::Less, "scan out of order");
                        }
                        let (u, seq) = split_internal(ikey);
                        assert_eq!(it.value(), value_of(u, seq));
                        seen.insert((u.to_vec(), seq));
                        last = Some(ikey.to_vec());
                        it.next();
                    }
                    for (w, log) in watermark.iter().enumerate() {
                        for &(i, seq) in log {
                            assert!(
                                seen.contains(&(key_of(w, i), seq)),
                                "scan misses a finished insert"
                            );
                        }
                    }
                    scans += 1;
                    if finished {
                        return scans;
                    }
                }
            })
        })
        .collect();

    for w in writers {
        w.join().unwrap();
    }
    state.stop.store(true, AtomicOrdering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    for s in scanners {
        assert!(s.join().unwrap() > 0);
    }

    let m = &state.m;
    assert_eq!(m.len(), WRITERS * WRITES_PER_WRITER);
    for w in 0..WRITERS {
        for i in 0..KEYS_PER_WRITER {
            let k = key_of(w, i);
            let last = state.last_seq[w][i].load(AtomicOrdering::Acquire);
            let got = m.get(&k, u64::MAX >> 8);
            if last == 0 {
                assert_eq!(got, None);
            } else {
                assert_eq!(
                    got,
                    Some(MemtableGet::Found {
                        kind: ValueKind::Value,
                        seq: last,
                        value: value_of(&k, last),
                    })
                );
            }
        }
    }
}

#[test]
fn flodb_stays_consistent_under_concurrent_writers_readers_and_scanners() {
    for (membuffer_bytes, drain_threads) in [(4096, 1), (64, 0), (64 << 10, 2)] {
        stress(FloDbConfig {
            membuffer_bytes,
            prefix_bits: 0,
            drain_threads,
        });
    }
}
