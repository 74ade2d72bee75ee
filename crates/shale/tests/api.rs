//! The public API behaves as documented: one test per promise.

use shale::fs::MemFs;
use shale::{Db, Durability, ErrorKind, Options, WriteBatch, WriteOptions};
use std::sync::Arc;

fn mem_options(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

#[test]
fn put_get_delete_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    db.put(b"k", b"v1").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v1".to_vec()));
    db.put("k", "v2").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v2".to_vec()));
    db.delete(b"k").unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    db.put(b"", b"empty key is a key").unwrap();
    assert_eq!(db.get(b"").unwrap(), Some(b"empty key is a key".to_vec()));
    db.close().unwrap();
}

#[test]
fn data_survives_reopen_from_wal_and_from_ssts() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..1000u32 {
            db.put(i.to_be_bytes(), format!("value-{i}")).unwrap();
        }
        db.flush().unwrap();
        for i in 1000..2000u32 {
            db.put(i.to_be_bytes(), format!("value-{i}")).unwrap();
        }
        db.delete(5u32.to_be_bytes()).unwrap();
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..2000u32 {
        let want = (i != 5).then(|| format!("value-{i}").into_bytes());
        assert_eq!(db.get(i.to_be_bytes()).unwrap(), want, "key {i}");
    }
    assert_eq!(db.iter().count(), 1999);
}

#[test]
fn write_batch_is_atomic_and_ordered() {
    let fs = MemFs::new();
    let db = Db::open("/db", mem_options(&fs)).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"a", b"1")
        .put(b"b", b"2")
        .delete(b"a")
        .put(b"c", b"3");
    assert_eq!(b.len(), 4);
    db.write(
        b,
        &WriteOptions {
            durability: Durability::Sync,
        },
    )
    .unwrap();
    assert_eq!(db.get(b"a").unwrap(), None, "later entries of a batch win");
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"c").unwrap(), Some(b"3".to_vec()));
    assert_eq!(db.stats().wal_syncs, 1);
}

#[test]
fn range_iter_and_prefix_are_double_ended() {
    let fs = MemFs::new();
    let db = Db::open("/db", mem_options(&fs)).unwrap();
    for k in ["a", "ab", "abc", "b", "ba", "c"] {
        db.put(k, k.to_uppercase()).unwrap();
    }
    fn keys(it: impl Iterator<Item = shale::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<String> {
        it.map(|r| String::from_utf8(r.unwrap().0).unwrap())
            .collect()
    }
    assert_eq!(keys(db.range("ab".."b")), ["ab", "abc"]);
    assert_eq!(keys(db.range("ab"..="ba")), ["ab", "abc", "b", "ba"]);
    assert_eq!(keys(db.prefix("a")), ["a", "ab", "abc"]);
    assert_eq!(keys(db.iter()).len(), 6);
    let mut it = db.iter();
    assert_eq!(it.next().unwrap().unwrap().0, b"a");
    assert_eq!(it.next_back().unwrap().unwrap().0, b"c");
    assert_eq!(it.next_back().unwrap().unwrap().0, b"ba");
    let middle: Vec<_> = it.map(|r| r.unwrap().0).collect();
    assert_eq!(middle, [b"ab".to_vec(), b"abc".to_vec(), b"b".to_vec()]);
    assert_eq!(keys(db.prefix("a").rev()), ["abc", "ab", "a"]);
}

#[test]
fn snapshot_sees_the_past_across_flush_and_compaction() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            write_buffer_size: 4096,
            ..mem_options(&fs)
        },
    )
    .unwrap();
    for i in 0..200u32 {
        db.put(format!("k{i:03}"), "old").unwrap();
    }
    let snap = db.snapshot();
    for i in 0..200u32 {
        if i % 2 == 0 {
            db.put(format!("k{i:03}"), "new").unwrap();
        } else {
            db.delete(format!("k{i:03}")).unwrap();
        }
    }
    db.flush().unwrap();
    db.compact_range(..).unwrap();
    assert_eq!(snap.get("k001").unwrap(), Some(b"old".to_vec()));
    assert_eq!(snap.iter().count(), 200);
    assert!(snap.iter().all(|r| r.unwrap().1 == b"old"));
    assert_eq!(db.get("k001").unwrap(), None);
    assert_eq!(db.get("k002").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.iter().count(), 100);
    assert_eq!(db.stats().snapshots, 1);
    drop(snap);
    assert_eq!(db.stats().snapshots, 0);
}

/// With a row cache, reads at the newest sequence number and at an older snapshot both stay
/// exact when one SST holds several versions of a key, in either order of first reading.
#[test]
fn the_row_cache_serves_newest_reads_and_leaves_snapshots_exact() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            row_cache_size: 1 << 20,
            ..mem_options(&fs)
        },
    )
    .unwrap();
    db.put("a", "a1").unwrap();
    db.put("b", "b1").unwrap();
    db.put("gone", "g1").unwrap();
    let snap = db.snapshot();
    db.put("a", "a2").unwrap();
    db.put("b", "b2").unwrap();
    db.delete("gone").unwrap();
    db.flush().unwrap();
    // "a": the newest read fills the row first; "b": the snapshot reads first.
    for _ in 0..2 {
        assert_eq!(db.get("a").unwrap(), Some(b"a2".to_vec()));
        assert_eq!(snap.get("a").unwrap(), Some(b"a1".to_vec()));
        assert_eq!(snap.get("b").unwrap(), Some(b"b1".to_vec()));
        assert_eq!(db.get("b").unwrap(), Some(b"b2".to_vec()));
        assert_eq!(db.get("gone").unwrap(), None);
        assert_eq!(snap.get("gone").unwrap(), Some(b"g1".to_vec()));
        assert_eq!(db.get("absent").unwrap(), None);
    }
    // A newer table shadows the cached rows of the older one.
    db.put("a", "a3").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("a").unwrap(), Some(b"a3".to_vec()));
    assert_eq!(snap.get("a").unwrap(), Some(b"a1".to_vec()));
    drop(snap);
    db.compact_range(..).unwrap();
    assert_eq!(db.get("a").unwrap(), Some(b"a3".to_vec()));
    assert_eq!(db.get("b").unwrap(), Some(b"b2".to_vec()));
    assert_eq!(db.get("gone").unwrap(), None);
}

#[test]
fn iterator_keeps_its_view_while_the_tree_changes() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            write_buffer_size: 4096,
            ..mem_options(&fs)
        },
    )
    .unwrap();
    for i in 0..300u32 {
        db.put(format!("k{i:03}"), "v").unwrap();
    }
    let mut it = db.iter();
    assert!(it.next().is_some());
    for i in 0..300u32 {
        db.delete(format!("k{i:03}")).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(..).unwrap();
    assert_eq!(it.count(), 299, "the iterator reads the files it pinned");
    assert_eq!(db.iter().count(), 0);
}

#[test]
fn second_open_of_a_locked_directory_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy);
    assert!(err.to_string().contains("locked"), "{err}");
    db.close().unwrap();
    Db::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn missing_database_without_create_if_missing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = Db::open(
        dir.path().join("nope"),
        Options {
            create_if_missing: false,
            ..Options::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn oversized_keys_and_values_are_rejected_without_effect() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            max_key_size: 8,
            max_value_size: 16,
            ..mem_options(&fs)
        },
    )
    .unwrap();
    assert_eq!(
        db.put(b"123456789", b"v").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let mut b = WriteBatch::new();
    b.put(b"ok", b"fine").put(b"k", [0u8; 17]);
    assert_eq!(
        db.write(b, &WriteOptions::default()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        db.get(b"ok").unwrap(),
        None,
        "a rejected batch applies nothing"
    );
}

#[test]
fn invalid_options_are_rejected() {
    let fs = MemFs::new();
    let err = Db::open(
        "/db",
        Options {
            num_levels: 1,
            ..mem_options(&fs)
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("num_levels"));
}

#[test]
fn stats_count_the_work_done() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            write_buffer_size: 8192,
            ..mem_options(&fs)
        },
    )
    .unwrap();
    for i in 0..2000u32 {
        db.put(format!("key{i:05}"), [7u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(..).unwrap();
    for i in 0..100u32 {
        assert!(db.get(format!("key{i:05}")).unwrap().is_some());
    }
    let s = db.stats();
    assert_eq!(s.writes, 2000);
    assert_eq!(s.user_bytes_written, 2000 * (8 + 100));
    assert!(s.wal_bytes_written > s.user_bytes_written);
    assert!(s.flushes >= 1 && s.flush_bytes_written > 0);
    assert!(s.compaction_bytes_read > 0 || s.trivial_moves > 0);
    assert_eq!(s.files_per_level[0], 0, "compact_range empties L0");
    assert!(s.bytes_per_level.iter().sum::<u64>() > 0);
    assert!(s.on_disk_bytes >= s.bytes_per_level.iter().sum::<u64>());
    assert!(s.block_cache_hits + s.block_cache_misses > 0);
    assert_eq!(s.last_sequence, 2000);
}

#[test]
fn operations_after_close_fail_with_closed() {
    let fs = MemFs::new();
    let db = Db::open("/db", mem_options(&fs)).unwrap();
    let snap = db.snapshot();
    db.close().unwrap();
    assert_eq!(snap.get(b"k").unwrap_err().kind(), ErrorKind::Closed);
}

#[test]
fn concurrent_writers_share_group_commits() {
    let fs = MemFs::new();
    let db = Arc::new(
        Db::open(
            "/db",
            Options {
                write_buffer_size: 64 << 10,
                ..mem_options(&fs)
            },
        )
        .unwrap(),
    );
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..500u32 {
                    let mut b = WriteBatch::new();
                    b.put(format!("t{t}-{i:04}"), format!("{i}"));
                    db.write(
                        b,
                        &WriteOptions {
                            durability: Durability::Sync,
                        },
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(db.iter().count(), 4000);
    let s = db.stats();
    assert_eq!(s.writes, 4000);
    assert!(s.wal_syncs <= 4000);
}

#[test]
fn write_stalls_slow_writers_down_count_the_time_and_lose_nothing() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            write_buffer_size: 4096,
            level0_compaction_trigger: 2,
            level0_slowdown_trigger: 2,
            level0_stop_trigger: 4,
            delayed_write_rate: 256 << 10,
            background_threads: 1,
            ..mem_options(&fs)
        },
    )
    .unwrap();
    for i in 0..3000u32 {
        db.put(
            format!("key{:05}", i % 700),
            format!("value-{i}-{}", "s".repeat(60)),
        )
        .unwrap();
    }
    let s = db.stats();
    assert!(
        s.stall_micros > 0,
        "L0 above the slowdown trigger must delay writers: {s:?}"
    );
    assert!(s.stop_micros <= s.stall_micros);
    for i in 2300..3000u32 {
        let key = format!("key{:05}", i % 700);
        assert_eq!(
            db.get(&key).unwrap(),
            Some(format!("value-{i}-{}", "s".repeat(60)).into_bytes())
        );
    }
}

#[test]
fn flodb_learns_the_key_prefix_from_the_last_memtable_and_from_the_ssts() {
    let fs = MemFs::new();
    let options = Options {
        memtable: shale::MemtableKind::FloDb,
        write_buffer_size: 256 << 10,
        membuffer_size: 16 << 10,
        ..mem_options(&fs)
    };
    // YCSB's keys: "user" and decimal digits, whose ASCII bytes share their high nibble 0x3.
    let key = |i: u64| {
        format!(
            "user{}",
            1_000_000_000_000 + i * 7_919_000_003 % 8_000_000_000_000
        )
    };
    let db = Db::open("/db", options.clone()).unwrap();
    assert_eq!(
        db.stats().membuffer_prefix_bits,
        Some(0),
        "an empty store has nothing to learn from"
    );
    for i in 0..4000 {
        db.put(key(i), [7u8; 100]).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(
        db.stats().membuffer_prefix_bits,
        Some(36),
        "learned from the memtables sealed"
    );
    for i in 0..4000 {
        assert_eq!(db.get(key(i)).unwrap().as_deref(), Some(&[7u8; 100][..]));
    }
    db.close().unwrap();

    let db = Db::open("/db", options.clone()).unwrap();
    assert_eq!(
        db.stats().membuffer_prefix_bits,
        Some(36),
        "learned from the SSTs at open"
    );
    db.close().unwrap();

    let fixed = Options {
        membuffer_prefix_bits: Some(3),
        ..options
    };
    let db = Db::open("/db", fixed).unwrap();
    assert_eq!(
        db.stats().membuffer_prefix_bits,
        Some(3),
        "fixed bits are kept"
    );
    db.close().unwrap();
}

/// Bytes of the WAL files in `dir` that reached the operating system, without the zero-filled
/// space a WAL keeps ahead of its appends (the test's records end in non-zero bytes).
fn wal_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| {
            let data = std::fs::read(e.path()).unwrap();
            data.iter()
                .rposition(|&b| b != 0)
                .map_or(0, |i| i as u64 + 1)
        })
        .sum()
}

#[test]
fn unflushed_writes_are_visible_at_once_and_reach_the_wal_at_flush_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let unflushed = WriteOptions {
        durability: Durability::Unflushed,
    };
    let put = |k: &str, options: &WriteOptions| {
        let mut batch = WriteBatch::new();
        batch.put(k, format!("value of {k}"));
        db.write(batch, options).unwrap();
    };
    let before = wal_bytes(dir.path());
    put("a", &unflushed);
    assert_eq!(db.get("a").unwrap(), Some(b"value of a".to_vec()));
    assert_eq!(
        wal_bytes(dir.path()),
        before,
        "an unflushed write stays in the process"
    );
    db.flush_wal().unwrap();
    let flushed = wal_bytes(dir.path());
    assert!(
        flushed > before,
        "flush_wal hands it to the operating system"
    );
    db.flush_wal().unwrap();
    assert_eq!(wal_bytes(dir.path()), flushed, "nothing more to flush");

    // A buffered write carries the unflushed ones before it to the operating system, in order.
    put("b", &unflushed);
    put("c", &WriteOptions::default());
    let both = wal_bytes(dir.path());
    assert!(both > flushed);
    put("d", &unflushed);
    assert_eq!(wal_bytes(dir.path()), both);
    db.sync_wal().unwrap();
    assert!(wal_bytes(dir.path()) > both, "sync_wal flushes first");
    drop(db);

    let db = Db::open(dir.path(), Options::default()).unwrap();
    for k in ["a", "b", "c", "d"] {
        assert_eq!(
            db.get(k).unwrap(),
            Some(format!("value of {k}").into_bytes())
        );
    }
    db.close().unwrap();
}

/// `multi_get` answers as `get` does for every key, across the memtable, sealed memtables, L0 and
/// deeper levels, deletions, absent keys, duplicates and batches larger than one lookup window.
#[test]
fn multi_get_answers_as_get_does_for_any_batch() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            write_buffer_size: 16 << 10,
            ..mem_options(&fs)
        },
    )
    .unwrap();
    for round in 0..4u32 {
        for i in (round..600).step_by(3) {
            let mut b = WriteBatch::new();
            if i % 7 == 0 {
                b.delete(format!("k{i:04}"));
            } else {
                b.put(format!("k{i:04}"), format!("v{i}-{round}").repeat(3));
            }
            db.write(b, &WriteOptions::default()).unwrap();
        }
        if round == 1 {
            db.flush().unwrap();
            db.compact_range(..).unwrap();
        } else if round == 2 {
            db.flush().unwrap();
        }
    }
    let snap = db.snapshot();
    db.put("k0001", "after the snapshot").unwrap();
    // Present, deleted, absent and repeated keys, in no order, over several windows.
    let keys: Vec<String> = (0..700u32)
        .map(|i| format!("k{:04}", (i * 37) % 650))
        .chain(["k0001".to_string(), "nope".to_string(), "k0001".to_string()])
        .collect();
    let got: Vec<_> = db
        .multi_get(&keys)
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<_> = keys.iter().map(|k| db.get(k).unwrap()).collect();
    assert_eq!(got, want);
    assert!(want.iter().filter(|v| v.is_some()).count() > 300);
    let got: Vec<_> = snap
        .multi_get(&keys)
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<_> = keys.iter().map(|k| snap.get(k).unwrap()).collect();
    assert_eq!(got, want);
    let now = db.multi_get(&["k0001"]).remove(0).unwrap();
    let then = snap.multi_get(&["k0001"]).remove(0).unwrap();
    assert_eq!(now.as_deref(), Some(&b"after the snapshot"[..]));
    assert_ne!(now, then, "the snapshot reads the past");
}

#[test]
fn wait_for_background_returns_once_flushes_compactions_and_gc_are_done() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        write_buffer_size: 64 << 10,
        level0_compaction_trigger: 2,
        target_file_size: 32 << 10,
        max_bytes_for_level_base: 128 << 10,
        min_blob_size: 100,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    for round in 0..4u8 {
        for i in 0..2000u32 {
            db.put(i.to_be_bytes(), vec![round; 200]).unwrap();
        }
    }
    assert!(db
        .wait_for_background(std::time::Duration::from_secs(60))
        .unwrap());
    let settled = db.stats();
    assert_eq!(settled.sealed_memtables, 0);
    assert!(settled.files_per_level[0] < 2, "{settled:?}");
    assert!(
        settled.flushes > 0 && settled.compactions > 0,
        "{settled:?}"
    );
    // Nothing was left to start: the counters stay where they are.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let later = db.stats();
    assert_eq!(
        (later.flushes, later.compactions, later.gc_runs),
        (settled.flushes, settled.compactions, settled.gc_runs)
    );
    db.close().unwrap();
}
