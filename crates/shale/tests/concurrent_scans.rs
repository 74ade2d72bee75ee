//! Short scans through the whole engine while writers keep writing: prefix scans of one object,
//! ranges across objects (so across FloDB's buckets), reverse scans and scans of an older
//! snapshot, over a store whose data lies in the memtable, sealed memtables, L0 and deeper levels
//! (tiny write buffers make it flush and compact all along).
//!
//! Exactness against a model: each writer owns its keys and writes them one after the other
//! (version `c` of the writer goes to its field `c % FIELDS`; every seventh is a deletion). A scan
//! must show, for each writer, the state after the writer's first `X` writes for a single `X`:
//! at least every write acknowledged before the scan's snapshot was taken, and none that started
//! after.

use shale::fs::MemFs;
use shale::{Db, MemtableKind, Options, NO_BLOB_FILES};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const WRITERS: u64 = 2;
/// Objects each writer owns, and fields per object.
const OBJECTS: u64 = 8;
const FIELDS: u64 = 24;
/// Scans each scanner runs; the writers write until both are done.
const SCANS: u64 = 250;
/// Writes each writer makes at least while the scanners scan.
const MIN_WRITES: u64 = 20_000;

/// The key of field `f` of writer `w`'s object `o`: a type byte, a 2-byte hash spreading objects
/// over the key space (and FloDB's buckets), the object's id and the field, as the server lays out
/// a hash.
fn key(w: u64, o: u64, f: u64) -> Vec<u8> {
    let id = (w * OBJECTS + o) as u32;
    let hash = (id.wrapping_mul(0x9e37_79b9) >> 16) as u16;
    let mut k = vec![b'h'];
    k.extend_from_slice(&hash.to_be_bytes());
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(&(f as u16).to_be_bytes());
    k
}

/// Writer `w`'s version `c` (from 1): the key it writes, and its value (`None`: a deletion).
fn write_of(w: u64, c: u64) -> (Vec<u8>, Option<Vec<u8>>) {
    let slot = c % (OBJECTS * FIELDS);
    let k = key(w, slot / FIELDS, slot % FIELDS);
    let value = (!c.is_multiple_of(7)).then(|| {
        let mut v = c.to_le_bytes().to_vec();
        v.resize(8 + (c % 40) as usize, w as u8);
        v
    });
    (k, value)
}

/// Writer `w`'s keys after its first `x` writes.
fn state_after(w: u64, x: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut state = BTreeMap::new();
    for c in x.saturating_sub(OBJECTS * FIELDS - 1).max(1)..=x {
        let (k, v) = write_of(w, c);
        match v {
            Some(v) => state.insert(k, v),
            None => state.remove(&k),
        };
    }
    state
}

/// The writer that owns `key`.
fn owner(key: &[u8]) -> u64 {
    u32::from_be_bytes(key[3..7].try_into().unwrap()) as u64 / OBJECTS
}

/// Checks a scan's pairs (in key order, all within `lower..upper`) against every writer's
/// history: some `x` in `acked[w]..=started[w]` must explain exactly the writer's pairs.
fn check(
    got: &[(Vec<u8>, Vec<u8>)],
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
    acked: &[u64],
    started: &[u64],
    what: &str,
) {
    assert!(
        got.windows(2).all(|p| p[0].0 < p[1].0),
        "{what}: out of order"
    );
    for w in 0..WRITERS {
        let mine: Vec<_> = got.iter().filter(|(k, _)| owner(k) == w).cloned().collect();
        let explained = (acked[w as usize]..=started[w as usize]).any(|x| {
            let want: Vec<_> = state_after(w, x)
                .into_iter()
                .filter(|(k, _)| in_bounds(k, lower, upper))
                .collect();
            want == mine
        });
        assert!(
            explained,
            "{what}: writer {w}'s pairs match no state between its writes {} and {} ({} pairs)",
            acked[w as usize],
            started[w as usize],
            mine.len()
        );
    }
}

fn in_bounds(k: &[u8], lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> bool {
    let above = match lower {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match upper {
        Bound::Included(u) => k <= u.as_slice(),
        Bound::Excluded(u) => k < u.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// A range of one of the test's shapes, from the random `r`.
fn range(r: u64) -> (Bound<Vec<u8>>, Bound<Vec<u8>>, &'static str) {
    let (w, o) = ((r >> 8) % WRITERS, (r >> 16) % OBJECTS);
    let object = key(w, o, 0);
    let prefix = object[..7].to_vec();
    match r % 4 {
        0 => {
            let mut end = prefix.clone();
            *end.last_mut().unwrap() += 1;
            (Bound::Included(prefix), Bound::Excluded(end), "prefix")
        }
        1 => (
            Bound::Included(key(w, o, (r >> 24) % FIELDS)),
            Bound::Included(key(w, o, (r >> 24) % FIELDS + 5)),
            "fields",
        ),
        // Across objects: from one hash to a later one.
        2 => {
            let mut hi = object[..3].to_vec();
            let h = u16::from_be_bytes([hi[1], hi[2]]).saturating_add(0x0800);
            hi[1..3].copy_from_slice(&h.to_be_bytes());
            (Bound::Excluded(object), Bound::Excluded(hi), "objects")
        }
        _ => (
            Bound::Included(b"h".to_vec()),
            Bound::Excluded(b"i".to_vec()),
            "everything",
        ),
    }
}

fn progress(counters: &[AtomicU64]) -> Vec<u64> {
    counters.iter().map(|c| c.load(Ordering::SeqCst)).collect()
}

fn run(name: &str, options: Options) {
    let db = Arc::new(Db::open(Path::new("/db"), options).expect("open"));
    // Per writer: versions whose put returned, and versions whose put started.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let scanners_done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(WRITERS as usize + 2));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, acked, started, stop, start) = (
                db.clone(),
                acked.clone(),
                started.clone(),
                stop.clone(),
                start.clone(),
            );
            thread::spawn(move || {
                start.wait();
                let mut c = 0;
                while !stop.load(Ordering::Relaxed) {
                    c += 1;
                    let (k, v) = write_of(w, c);
                    started[w as usize].store(c, Ordering::SeqCst);
                    match v {
                        Some(v) => db.put(&k, &v).unwrap(),
                        None => db.delete(&k).unwrap(),
                    }
                    acked[w as usize].store(c, Ordering::SeqCst);
                }
                c
            })
        })
        .collect();
    let scanners: Vec<_> = (0..2u64)
        .map(|t| {
            let (db, acked, started, done, start) = (
                db.clone(),
                acked.clone(),
                started.clone(),
                scanners_done.clone(),
                start.clone(),
            );
            let name = name.to_string();
            thread::spawn(move || {
                let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ (t + 1);
                start.wait();
                let mut i = 0;
                while i < SCANS || progress(&acked).iter().any(|&c| c < MIN_WRITES) {
                    i += 1;
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let (lower, upper, shape) = range(rng);
                    let before = progress(&acked);
                    let reverse = rng >> 63 == 1;
                    let older = i % 5 == 4;
                    let (got, after) = if older {
                        // A snapshot, read once more writes have landed.
                        let snap = db.snapshot();
                        let after = progress(&started);
                        thread::sleep(Duration::from_micros(200));
                        let it = snap.range((lower.clone(), upper.clone()));
                        let got: Vec<_> = if reverse {
                            it.rev().map(Result::unwrap).collect::<Vec<_>>().into_iter().rev().collect()
                        } else {
                            it.map(Result::unwrap).collect()
                        };
                        (got, after)
                    } else {
                        let it = db.range((lower.clone(), upper.clone()));
                        let after = progress(&started);
                        let got: Vec<_> = if reverse {
                            it.rev().map(Result::unwrap).collect::<Vec<_>>().into_iter().rev().collect()
                        } else {
                            it.map(Result::unwrap).collect()
                        };
                        (got, after)
                    };
                    let what = format!(
                        "{name}: {shape} scan {lower:?}..{upper:?} (reverse {reverse}, snapshot {older})"
                    );
                    check(&got, &lower, &upper, &before, &after, &what);

                    // A point read of one key of the range's writer.
                    let (w, o, f) = ((rng >> 8) % WRITERS, (rng >> 16) % OBJECTS, (rng >> 40) % FIELDS);
                    let k = key(w, o, f);
                    let before = progress(&acked);
                    let got = db.get(&k).unwrap();
                    let after = progress(&started);
                    let w = w as usize;
                    assert!(
                        (before[w]..=after[w]).any(|x| state_after(w as u64, x).get(&k) == got.as_ref()),
                        "{name}: get of {k:?} between writes {} and {}: {got:?}",
                        before[w],
                        after[w]
                    );
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    for s in scanners {
        s.join().unwrap();
    }
    assert!(Instant::now() < deadline, "{name}: scans took too long");
    stop.store(true, Ordering::Relaxed);
    let written: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(written.iter().all(|&c| c > 0));
    let stats = db.stats();
    assert!(
        stats.files_per_level.iter().skip(1).sum::<usize>() > 0,
        "{name}: nothing reached the levels below L0: {:?}",
        stats.files_per_level
    );
    // Quiet now: every shape sees the final state exactly.
    for r in 0..8u64 {
        let (lower, upper, shape) = range(r.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let got: Vec<_> = db
            .range((lower.clone(), upper.clone()))
            .map(Result::unwrap)
            .collect();
        check(
            &got,
            &lower,
            &upper,
            &written,
            &written,
            &format!("{name}: final {shape}"),
        );
    }
}

fn base(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 32 << 10,
        target_file_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        level0_compaction_trigger: 2,
        block_size: 1024,
        min_blob_size: NO_BLOB_FILES,
        memtable: MemtableKind::FloDb,
        membuffer_size: 4096,
        ..Options::default()
    }
}

#[test]
fn scans_under_concurrent_writers_see_exactly_their_snapshot() {
    for (name, options) in [
        (
            "FloDB, the server's 8-bit prefix",
            Options {
                membuffer_prefix_bits: Some(8),
                ..base(&MemFs::new())
            },
        ),
        ("FloDB, learned prefix", base(&MemFs::new())),
        (
            "FloDB, 8-bit prefix, a drain thread",
            Options {
                membuffer_prefix_bits: Some(8),
                drain_threads: 1,
                ..base(&MemFs::new())
            },
        ),
        (
            "skiplist",
            Options {
                memtable: MemtableKind::SkipList,
                ..base(&MemFs::new())
            },
        ),
    ] {
        run(name, options);
    }
}
