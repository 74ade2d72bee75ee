//! The engine with an external log (a replica's Raft log as its WAL): entries applied at given
//! log indexes, memtables sealed by the log, the flushed position in the MANIFEST, checkpoints
//! and their installation in place of a database, and power loss.

use shale::fs::{FaultFs, MemFs};
use shale::{Db, ErrorKind, LogPosition, Options, WriteBatch};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn options(fs: &FaultFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 64 << 10,
        target_file_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        level0_compaction_trigger: 2,
        min_blob_size: 200,
        ..Options::default()
    }
}

fn batch(i: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(
        format!("key{:05}", i % 300),
        format!("v{i}-{}", "x".repeat((i % 7 * 60) as usize)),
    );
    if i.is_multiple_of(11) {
        b.delete(format!("key{:05}", (i * 7) % 300));
    }
    b
}

fn position(index: u64) -> LogPosition {
    LogPosition {
        index,
        context: format!("term-{}", index / 100).into_bytes(),
    }
}

/// Applies log entries `from..=to`: every 50th seals the memtable, the rest write.
fn apply(db: &Db, from: u64, to: u64) {
    for i in from..=to {
        if i.is_multiple_of(50) {
            db.seal_memtable(position(i)).unwrap();
        } else {
            db.apply_logged(i, &batch(i)).unwrap();
        }
    }
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(|r| r.unwrap()).collect()
}

/// What applying entries `1..=to` must give.
fn model(to: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let dir = Path::new("model");
    let db = Db::open_with_external_log(dir, options(&FaultFs::new(MemFs::new()))).unwrap();
    apply(&db, 1, to);
    contents(&db)
}

#[test]
fn writes_and_seals_follow_the_log_and_a_restart_resumes_at_the_flushed_position() {
    let fs = FaultFs::new(MemFs::new());
    let dir = Path::new("db");
    {
        let db = Db::open_with_external_log(dir, options(&fs)).unwrap();
        assert_eq!(db.flushed_position(), None);
        apply(&db, 1, 230);
        assert_eq!(db.applied_index(), Some(230));
        db.flush().unwrap();
        assert_eq!(db.flushed_position(), Some(position(200)));
        assert_eq!(contents(&db), model(230));
    }
    // The memtable held entries 201..=230: without a WAL they are gone, and the log replays them.
    let db = Db::open_with_external_log(dir, options(&fs)).unwrap();
    assert_eq!(db.flushed_position(), Some(position(200)));
    assert_eq!(db.applied_index(), Some(200));
    assert_eq!(contents(&db), model(200));
    apply(&db, 201, 260);
    assert_eq!(contents(&db), model(260));
    // No WAL file was ever written.
    assert!(fs
        .mem()
        .list_files()
        .iter()
        .all(|p| !p.to_string_lossy().ends_with(".log")));
}

#[test]
fn an_entry_is_never_applied_twice_and_plain_writes_are_refused() {
    let fs = FaultFs::new(MemFs::new());
    let db = Db::open_with_external_log("db", options(&fs)).unwrap();
    db.apply_logged(5, &batch(5)).unwrap();
    for again in [5, 4] {
        let e = db.apply_logged(again, &batch(again)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        let e = db.seal_memtable(position(again)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    db.skip_logged(6).unwrap();
    assert!(db.apply_logged(6, &batch(6)).is_err());
    let e = db.put("k", "v").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");

    let plain = Db::open("plain", options(&fs)).unwrap();
    let e = plain.apply_logged(1, &batch(1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn a_database_with_unflushed_wals_is_not_opened_with_an_external_log() {
    let fs = FaultFs::new(MemFs::new());
    {
        let db = Db::open("db", options(&fs)).unwrap();
        db.put("k", "v").unwrap();
    }
    let e = Db::open_with_external_log("db", options(&fs)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn a_checkpoint_installed_on_a_lagging_replica_gives_the_same_data_and_continues_alike() {
    let fs = FaultFs::new(MemFs::new());
    let leader = Db::open_with_external_log("leader", options(&fs)).unwrap();
    apply(&leader, 1, 420);
    leader.flush().unwrap();
    leader.compact_range(..).unwrap();
    let cp = leader.checkpoint("snap").unwrap();
    assert_eq!(cp.position, Some(position(400)));
    assert!(cp.files.iter().any(|f| f.ends_with(".sst")));
    assert!(cp.files.iter().any(|f| f.ends_with(".blob")));
    assert!(cp.files.iter().any(|f| f == "CURRENT"));
    assert!(
        leader.checkpoint("snap").is_err(),
        "a checkpoint never overwrites one"
    );

    // A replica that fell behind at entry 120, with files and memtables of its own.
    let replica = Db::open_with_external_log("replica", options(&fs)).unwrap();
    apply(&replica, 1, 120);
    replica.flush().unwrap();
    let reader = replica.snapshot();
    replica.install_checkpoint(&cp.dir).unwrap();
    assert_eq!(replica.flushed_position(), Some(position(400)));
    assert_eq!(replica.applied_index(), Some(400));
    assert_eq!(contents(&replica), model(400));
    // A reader that started before keeps the data it saw.
    assert!(reader.iter().count() > 0);
    drop(reader);

    // Both continue with the same log and hold the same data, on disk too.
    apply(&leader, 421, 520);
    apply(&replica, 401, 520);
    assert_eq!(contents(&replica), contents(&leader));
    replica.flush().unwrap();
    leader.flush().unwrap();
    assert_eq!(replica.flushed_position(), leader.flushed_position());
    drop(replica);
    let replica = Db::open_with_external_log("replica", options(&fs)).unwrap();
    assert_eq!(replica.flushed_position(), Some(position(500)));
    assert_eq!(contents(&replica), model(500));

    // The checkpoint directory is a database of its own.
    drop(leader);
    let copy = Db::open_with_external_log(&cp.dir, options(&fs)).unwrap();
    assert_eq!(contents(&copy), model(400));
}

#[test]
fn a_power_loss_keeps_the_last_synced_flush_and_its_position() {
    for cut in [20u64, 60, 120, 200, 400, 800] {
        let fs = FaultFs::new(MemFs::new());
        let dir = Path::new("db");
        let mut flushed = None;
        {
            let db = Db::open_with_external_log(dir, options(&fs)).unwrap();
            fs.cut_power_after(cut);
            for i in 1..=400u64 {
                let r = if i.is_multiple_of(50) {
                    db.seal_memtable(position(i))
                } else {
                    db.apply_logged(i, &batch(i))
                };
                if r.is_err() {
                    break;
                }
                if db.flush().is_err() {
                    break;
                }
                flushed = db.flushed_position();
            }
        }
        let after = fs.crash_clone();
        let db = Db::open_with_external_log(dir, options(&after)).unwrap();
        let at = db.flushed_position();
        // What a flush reported survives; a flush that was in progress may have landed too.
        assert!(
            at.as_ref().map(|p| p.index) >= flushed.as_ref().map(|p| p.index),
            "cut {cut}"
        );
        let index = at.map_or(0, |p| p.index);
        assert_eq!(contents(&db), model(index), "cut {cut}");
    }
}
