//! Crash tests: random writes, a simulated power loss at a random point, recovery.
//!
//! Writes mix `Durability::Sync`, `Buffered` and `Unflushed`. Every write acknowledged with
//! `Durability::Sync` must survive, and the recovered state must be
//! the state after some prefix of the attempted writes (nothing reordered, nothing half-applied).
//! The power cut lands anywhere: in a WAL append, a flush, a compaction, a MANIFEST roll. Each seed
//! is run twice: once dropping every unsynced byte, once keeping a random prefix of them (torn
//! writes).
//!
//! `SHALE_CRASH_SEEDS` raises the number of seeds (default 300) for a longer soak.

mod common;

use common::Rng;
use shale::fs::{FaultFs, MemFs};
use shale::{Compression, Db, Durability, MemtableKind, Options, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Seeds run by default; CI keeps this small.
const DEFAULT_SEEDS: u64 = 300;
/// Writes attempted per seed before the test gives up waiting for the power cut.
const MAX_WRITES: usize = 3000;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One attempted write: the entries it applies, in order (`None` deletes).
type Write = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// Every seed runs with two memtable sizes. The smallest memtable is already full with a
/// memtable's fixed overhead: every write seals one and starts a new WAL, so a power cut often
/// loses a whole unsynced WAL while a newer one survives. The larger one holds several writes.
/// The 4 KiB memtables are skiplists, the 16 KiB ones FloDB memtables (16 buckets, one drain
/// thread), so both memory components seal, flush and recover under power cuts.
fn options(fs: &FaultFs, small_memtable: bool) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: if small_memtable { 4096 } else { 16 << 10 },
        memtable: if small_memtable {
            MemtableKind::SkipList
        } else {
            MemtableKind::FloDb
        },
        membuffer_size: 1024,
        target_file_size: 2048,
        max_bytes_for_level_base: 8192,
        level_size_multiplier: 4.0,
        level0_compaction_trigger: 2,
        block_size: 512,
        num_levels: 4,
        max_manifest_size: 4096,
        compression: Compression::Lz4,
        compression_start_level: 1,
        ..Options::default()
    }
}

fn random_write(rng: &mut Rng, i: usize) -> Write {
    let entries = 1 + rng.below(4) as usize;
    (0..entries)
        .map(|j| {
            let key = format!("key{:03}", rng.below(120)).into_bytes();
            if rng.below(6) == 0 {
                (key, None)
            } else {
                let len = if rng.below(10) == 0 { 600 } else { 20 };
                (
                    key,
                    Some(format!("w{i}-{j}-{}", "v".repeat(len)).into_bytes()),
                )
            }
        })
        .collect()
}

fn apply(model: &mut Model, write: &Write) {
    for (k, v) in write {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

fn run_seed(seed: u64, torn: bool, small_memtable: bool) {
    let dir = Path::new("/crash");
    let fs = FaultFs::new(MemFs::new());
    let mut rng = Rng(seed);
    let mut attempted: Vec<Write> = Vec::new();
    let mut last_synced_ack: Option<usize> = None;
    {
        let db = Db::open(dir, options(&fs, small_memtable)).expect("open");
        fs.cut_power_after(50 + rng.below(4000));
        for i in 0..MAX_WRITES {
            let write = random_write(&mut rng, i);
            let sync = rng.below(4) == 0;
            let mut batch = WriteBatch::new();
            for (k, v) in &write {
                match v {
                    Some(v) => batch.put(k, v),
                    None => batch.delete(k),
                };
            }
            attempted.push(write);
            let durability = if sync {
                Durability::Sync
            } else if rng.below(2) == 0 {
                Durability::Buffered
            } else {
                Durability::Unflushed
            };
            match db.write(batch, &WriteOptions { durability }) {
                Ok(()) if sync => last_synced_ack = Some(i),
                Ok(()) => {}
                Err(_) => break,
            }
            if rng.below(200) == 0 && db.flush().is_err() {
                break;
            }
            // Hands unflushed writes to the operating system, which a power cut may still take.
            if rng.below(20) == 0 && db.flush_wal().is_err() {
                break;
            }
            if rng.below(40) == 0 {
                match db.sync_wal() {
                    Ok(()) => last_synced_ack = Some(i),
                    Err(_) => break,
                }
            }
        }
        drop(db);
    }
    let after = if torn {
        fs.crash_clone_torn(seed)
    } else {
        fs.crash_clone()
    };
    let db = Db::open(dir, options(&after, small_memtable)).unwrap_or_else(|e| {
        panic!("seed {seed} torn={torn} small_memtable={small_memtable}: recovery failed: {e}")
    });
    let recovered: Model = db.iter().map(|r| r.expect("scan after recovery")).collect();

    // The recovered state must equal the model after some prefix that includes every acknowledged
    // synced write.
    let lower = last_synced_ack.map_or(0, |i| i + 1);
    let mut model = Model::new();
    let mut matched = None;
    for (n, write) in attempted.iter().enumerate() {
        if n >= lower && model == recovered {
            matched = Some(n);
            break;
        }
        apply(&mut model, write);
    }
    if matched.is_none() && model == recovered {
        matched = Some(attempted.len());
    }
    assert!(
        matched.is_some(),
        "seed {seed} torn={torn} small_memtable={small_memtable}: recovered state ({} keys) is not a prefix of history at or after write {lower} \
         ({} writes attempted)",
        recovered.len(),
        attempted.len()
    );

    // The recovered database accepts writes and survives a clean reopen.
    db.put(b"after-crash", b"ok").unwrap();
    db.close().unwrap();
    let db = Db::open(dir, options(&after, small_memtable)).unwrap();
    assert_eq!(db.get(b"after-crash").unwrap(), Some(b"ok".to_vec()));
}

fn seeds() -> u64 {
    std::env::var("SHALE_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEEDS)
}

#[test]
fn power_loss_keeps_every_synced_write_and_a_prefix_of_history() {
    for seed in 0..seeds() {
        run_seed(seed, false, false);
        run_seed(seed, false, true);
    }
}

#[test]
fn torn_writes_at_power_loss_keep_a_prefix_of_history() {
    for seed in 0..seeds() {
        run_seed(1000 + seed, true, false);
        run_seed(1000 + seed, true, true);
    }
}

/// `Db::sync_wal` beside concurrent writers: after a power loss every write acknowledged before
/// a `sync_wal` call that returned `Ok` began is there.
#[test]
fn sync_wal_beside_writers_keeps_every_write_it_covered() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const WRITERS: usize = 2;
    let dir = Path::new("/sync-wal");
    let fs = FaultFs::new(MemFs::new());
    // Memtables large enough that nothing is flushed: the writes live only in the WAL.
    let big_memtable = |fs: &FaultFs| Options {
        write_buffer_size: 64 << 20,
        ..options(fs, false)
    };
    let db = Arc::new(Db::open(dir, big_memtable(&fs)).expect("open"));
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) && i < 200_000 {
                    db.put(format!("w{w}-{i:08}").as_bytes(), b"v")
                        .expect("put");
                    i += 1;
                    acked[w].store(i, Ordering::Release);
                }
            })
        })
        .collect();
    // Sync until each writer has a few thousand covered writes (bounded: the writers stop at
    // 200,000 each).
    let mut covered = vec![0u64; WRITERS];
    for _ in 0..10_000 {
        let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
        db.sync_wal().expect("sync_wal");
        covered = before;
        if covered.iter().all(|&n| n >= 3000) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(
        covered.iter().all(|&n| n > 0),
        "the writers made no progress"
    );
    let after = fs.crash_clone();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    drop(db);
    let db = Db::open(dir, big_memtable(&after)).expect("recovery");
    for (w, &n) in covered.iter().enumerate() {
        for i in 0..n {
            assert!(
                db.get(format!("w{w}-{i:08}").as_bytes()).unwrap().is_some(),
                "writer {w}'s write {i} was acknowledged before a sync_wal but is lost ({n} covered)"
            );
        }
    }
}
