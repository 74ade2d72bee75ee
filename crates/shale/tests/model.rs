//! Model test: random operations against Shale and a `BTreeMap`, compared after every read.
//!
//! Operations: put, delete, batch, get, forward and backward range scans, snapshots (taken, read,
//! released), flush, compact_range and reopen, over several option sets that force many tiny
//! memtables, SSTs, levels and compactions. Runs on the in-memory file system.

use proptest::prelude::*;
use shale::fs::MemFs;
use shale::{
    Compression, Db, Durability, GcEngineKind, GcMode, MemtableKind, Options, WriteBatch,
    WriteOptions, NO_BLOB_FILES,
};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Get(Vec<u8>),
    MultiGet(Vec<Vec<u8>>),
    Scan {
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
        reverse: bool,
        limit: usize,
    },
    TakeSnapshot,
    ReadSnapshot {
        which: usize,
        key: Vec<u8>,
    },
    MultiGetSnapshot {
        which: usize,
        keys: Vec<Vec<u8>>,
    },
    ScanSnapshot {
        which: usize,
    },
    ReleaseSnapshot(usize),
    Flush,
    Compact {
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
    },
    Reopen,
    CollectGarbage,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => (0u32..48).prop_map(|i| format!("key{i:04}").into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
        1 => (0u32..48).prop_map(|i| format!("key{i:04}-{}", "x".repeat(40)).into_bytes()),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => proptest::collection::vec(any::<u8>(), 200..1500),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        8 => key().prop_map(Op::Delete),
        5 => proptest::collection::vec((key(), proptest::option::of(value())), 1..8).prop_map(Op::Batch),
        15 => key().prop_map(Op::Get),
        4 => proptest::collection::vec(key(), 0..20).prop_map(Op::MultiGet),
        5 => (proptest::option::of(key()), proptest::option::of(key()), any::<bool>(), 1usize..40)
            .prop_map(|(lo, hi, reverse, limit)| Op::Scan { lo, hi, reverse, limit }),
        2 => Just(Op::TakeSnapshot),
        3 => (any::<usize>(), key()).prop_map(|(which, key)| Op::ReadSnapshot { which, key }),
        1 => (any::<usize>(), proptest::collection::vec(key(), 1..12))
            .prop_map(|(which, keys)| Op::MultiGetSnapshot { which, keys }),
        1 => any::<usize>().prop_map(|which| Op::ScanSnapshot { which }),
        1 => any::<usize>().prop_map(Op::ReleaseSnapshot),
        2 => Just(Op::Flush),
        1 => (proptest::option::of(key()), proptest::option::of(key())).prop_map(|(lo, hi)| Op::Compact { lo, hi }),
        1 => Just(Op::Reopen),
        2 => Just(Op::CollectGarbage),
    ]
}

/// Option sets that push data through every part of the engine quickly.
fn option_sets(fs: &MemFs) -> Vec<(&'static str, Options)> {
    let base = Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 4096,
        target_file_size: 2048,
        max_bytes_for_level_base: 8192,
        level_size_multiplier: 4.0,
        level0_compaction_trigger: 2,
        level0_slowdown_trigger: 6,
        level0_stop_trigger: 10,
        block_size: 256,
        num_levels: 4,
        min_blob_size: NO_BLOB_FILES,
        // The tiny stores keep the plain skiplist; the FloDB sets below and the "small buffers"
        // ones (the default memtable) run FloDB's.
        memtable: MemtableKind::SkipList,
        ..Options::default()
    };
    let blobs = Options {
        min_blob_size: 16,
        blob_file_size: 1024,
        gc_threshold: 0.3,
        gc_engine: GcEngineKind::Inline,
        ..base.clone()
    };
    vec![
        (
            "tiny, uncompressed, long values straight to blob files at write time",
            Options {
                compression: Compression::None,
                large_value_size: 1000,
                ..base.clone()
            },
        ),
        (
            "tiny, lz4 everywhere, row cache",
            Options {
                compression_start_level: 0,
                block_restart_interval: 2,
                row_cache_size: 4096,
                ..base.clone()
            },
        ),
        (
            "tiny, one background thread, no cache, no bloom",
            Options {
                background_threads: 1,
                block_cache_size: 0,
                bloom_bits_per_key: 0,
                ..base.clone()
            },
        ),
        (
            "small buffers, default levels",
            Options {
                fs: Arc::new(fs.clone()),
                write_buffer_size: 64 << 10,
                ..Options::default()
            },
        ),
        (
            "tiny, FloDB memtable with a drain thread",
            Options {
                memtable: MemtableKind::FloDb,
                membuffer_size: 512,
                drain_threads: 1,
                ..base.clone()
            },
        ),
        (
            "small buffers, FloDB memtable without drain threads",
            Options {
                fs: Arc::new(fs.clone()),
                write_buffer_size: 64 << 10,
                memtable: MemtableKind::FloDb,
                membuffer_size: 4096,
                drain_threads: 0,
                ..Options::default()
            },
        ),
        (
            "tiny, blob files with inline GC, long values written at write time",
            Options {
                compression: Compression::None,
                large_value_size: 1000,
                ..blobs.clone()
            },
        ),
        (
            "tiny, blob files with a background GC worker and a snapshot-heavy threshold",
            Options {
                gc_engine: GcEngineKind::Background,
                gc_threshold: 0.1,
                gc_space_amp_target: 1.0,
                background_threads: 1,
                ..blobs.clone()
            },
        ),
        (
            "tiny, blob files with Titan-mode GC, row cache",
            Options {
                gc_mode: GcMode::Titan,
                row_cache_size: 1 << 20,
                ..blobs.clone()
            },
        ),
        (
            "small buffers, default blob settings",
            Options {
                fs: Arc::new(fs.clone()),
                write_buffer_size: 64 << 10,
                ..Options::default()
            },
        ),
    ]
}

fn in_range(k: &[u8], lo: &Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> bool {
    lo.as_ref().is_none_or(|lo| k >= lo.as_slice())
        && hi.as_ref().is_none_or(|hi| k < hi.as_slice())
}

fn scan(db_iter: shale::iter::DbIterator, reverse: bool, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    type Entries = Box<dyn Iterator<Item = shale::Result<(Vec<u8>, Vec<u8>)>>>;
    let items: Entries = if reverse {
        Box::new(db_iter.rev())
    } else {
        Box::new(db_iter)
    };
    items.take(limit).map(|r| r.expect("scan failed")).collect()
}

fn model_scan(
    model: &Model,
    lo: &Option<Vec<u8>>,
    hi: &Option<Vec<u8>>,
    reverse: bool,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let items: Vec<_> = model
        .iter()
        .filter(|(k, _)| in_range(k, lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if reverse {
        items.into_iter().rev().take(limit).collect()
    } else {
        items.into_iter().take(limit).collect()
    }
}

fn bounds(lo: &Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    (
        lo.clone().map_or(Bound::Unbounded, Bound::Included),
        hi.clone().map_or(Bound::Unbounded, Bound::Excluded),
    )
}

fn run(ops: &[Op], options: &Options) {
    let dir = Path::new("/db");
    let mut db = Some(Db::open(dir, options.clone()).expect("open"));
    let mut model = Model::new();
    let mut snapshots: Vec<(shale::Snapshot, Model)> = Vec::new();
    let buffered = WriteOptions {
        durability: Durability::Buffered,
    };
    for (step, op) in ops.iter().enumerate() {
        let d = db.as_ref().expect("open database");
        match op {
            Op::Put(k, v) => {
                d.put(k, v).unwrap();
                model.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                d.delete(k).unwrap();
                model.remove(k);
            }
            Op::Batch(entries) => {
                let mut b = WriteBatch::new();
                for (k, v) in entries {
                    match v {
                        Some(v) => {
                            b.put(k, v);
                            model.insert(k.clone(), v.clone());
                        }
                        None => {
                            b.delete(k);
                            model.remove(k);
                        }
                    }
                }
                d.write(b, &buffered).unwrap();
            }
            Op::Get(k) => assert_eq!(
                d.get(k).unwrap(),
                model.get(k).cloned(),
                "step {step}: get {k:?}"
            ),
            Op::MultiGet(keys) => {
                let got: Vec<_> = d.multi_get(keys).into_iter().map(|r| r.unwrap()).collect();
                let want: Vec<_> = keys.iter().map(|k| model.get(k).cloned()).collect();
                assert_eq!(got, want, "step {step}: multi_get {keys:?}");
            }
            Op::Scan {
                lo,
                hi,
                reverse,
                limit,
            } => {
                let got = scan(d.range(bounds(lo, hi)), *reverse, *limit);
                assert_eq!(
                    got,
                    model_scan(&model, lo, hi, *reverse, *limit),
                    "step {step}: scan {lo:?}..{hi:?}"
                );
            }
            Op::TakeSnapshot => snapshots.push((d.snapshot(), model.clone())),
            Op::ReadSnapshot { which, key } if !snapshots.is_empty() => {
                let (snap, frozen) = &snapshots[which % snapshots.len()];
                assert_eq!(
                    snap.get(key).unwrap(),
                    frozen.get(key).cloned(),
                    "step {step}: snapshot get {key:?}"
                );
            }
            Op::MultiGetSnapshot { which, keys } if !snapshots.is_empty() => {
                let (snap, frozen) = &snapshots[which % snapshots.len()];
                let got: Vec<_> = snap
                    .multi_get(keys)
                    .into_iter()
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<_> = keys.iter().map(|k| frozen.get(k).cloned()).collect();
                assert_eq!(got, want, "step {step}: snapshot multi_get {keys:?}");
            }
            Op::ScanSnapshot { which } if !snapshots.is_empty() => {
                let (snap, frozen) = &snapshots[which % snapshots.len()];
                let got: Vec<_> = snap.iter().map(|r| r.unwrap()).collect();
                let want: Vec<_> = frozen.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                assert_eq!(got, want, "step {step}: snapshot scan");
            }
            Op::ReleaseSnapshot(which) if !snapshots.is_empty() => {
                let i = which % snapshots.len();
                snapshots.remove(i);
            }
            Op::ReadSnapshot { .. }
            | Op::MultiGetSnapshot { .. }
            | Op::ScanSnapshot { .. }
            | Op::ReleaseSnapshot(_) => {}
            Op::Flush => d.flush().unwrap(),
            Op::Compact { lo, hi } => d.compact_range(bounds(lo, hi)).unwrap(),
            Op::CollectGarbage => d.collect_garbage().unwrap(),
            Op::Reopen => {
                snapshots.clear();
                db.take().expect("open").close().unwrap();
                db = Some(Db::open(dir, options.clone()).expect("reopen"));
            }
        }
    }
    let d = db.as_ref().expect("open");
    let all: Vec<_> = d.iter().map(|r| r.unwrap()).collect();
    assert_eq!(
        all,
        model
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>(),
        "final scan"
    );
    let back: Vec<_> = d.iter().rev().map(|r| r.unwrap().0).collect();
    assert_eq!(
        back,
        model.keys().rev().cloned().collect::<Vec<_>>(),
        "final reverse scan"
    );
    snapshots.clear();
    db.take().expect("open").close().unwrap();
    let reopened = Db::open(dir, options.clone()).expect("final reopen");
    for (k, v) in &model {
        assert_eq!(
            reopened.get(k).unwrap().as_ref(),
            Some(v),
            "after final reopen: {k:?}"
        );
    }
    assert_eq!(reopened.iter().count(), model.len());
}

proptest! {
    // 128 cases by default (CI); PROPTEST_CASES raises it for a longer soak.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(128),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_a_btreemap(ops in proptest::collection::vec(op(), 1..250)) {
        let probe = MemFs::new();
        for (name, _) in option_sets(&probe) {
            let fs = MemFs::new();
            let options = option_sets(&fs).into_iter().find(|(n, _)| *n == name).expect("option set").1;
            run(&ops, &options);
        }
    }
}

#[test]
fn heavy_overwrite_history_compacts_to_the_model() {
    let fs = MemFs::new();
    let (_, options) = option_sets(&fs).remove(0);
    let mut ops = Vec::new();
    for round in 0..40u32 {
        for i in 0..40u32 {
            ops.push(Op::Put(
                format!("key{i:04}").into_bytes(),
                format!("v{round}-{i}").into_bytes(),
            ));
            if i % 7 == round % 7 {
                ops.push(Op::Delete(format!("key{:04}", (i * 3) % 40).into_bytes()));
            }
        }
        if round % 9 == 0 {
            ops.push(Op::TakeSnapshot);
        }
        if round % 13 == 0 {
            ops.push(Op::ReleaseSnapshot(round as usize));
        }
        ops.push(Op::Scan {
            lo: None,
            hi: None,
            reverse: round % 2 == 0,
            limit: 100,
        });
        ops.push(Op::ScanSnapshot {
            which: round as usize,
        });
    }
    ops.push(Op::Compact { lo: None, hi: None });
    ops.push(Op::Reopen);
    run(&ops, &options);
}
