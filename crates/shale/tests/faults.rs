//! Fault injection: ENOSPC and EIO on file operations give a clean error or a poisoned database,
//! never corruption; reopening afterwards finds every acknowledged write.

use shale::fs::{Fault, FaultFs, FaultOp, MemFs};
use shale::{Db, Durability, ErrorKind, Options, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/faults";

fn options(fs: &FaultFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 4096,
        target_file_size: 2048,
        max_bytes_for_level_base: 8192,
        level0_compaction_trigger: 2,
        num_levels: 4,
        ..Options::default()
    }
}

fn sync() -> WriteOptions {
    WriteOptions {
        durability: Durability::Sync,
    }
}

/// Writes until an error; returns the acknowledged writes and the error.
fn write_until_error(db: &Db, limit: u32) -> (BTreeMap<Vec<u8>, Vec<u8>>, Option<shale::Error>) {
    let mut acked = BTreeMap::new();
    for i in 0..limit {
        let key = format!("key{:04}", i % 500).into_bytes();
        let value = format!("value-{i}-{}", "p".repeat(50)).into_bytes();
        let mut b = WriteBatch::new();
        b.put(&key, &value);
        match db.write(b, &sync()) {
            Ok(()) => {
                acked.insert(key, value);
            }
            Err(e) => return (acked, Some(e)),
        }
    }
    (acked, None)
}

/// Reopens on the same files without faults and checks every acknowledged write.
fn verify_reopen(fs: &FaultFs, acked: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let clean = FaultFs::new(fs.mem().clone());
    let db = Db::open(Path::new(DIR), options(&clean)).expect("reopen after the fault");
    for (k, v) in acked {
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            Some(v),
            "acknowledged write {k:?} lost"
        );
    }
}

/// Injects `fault` after some good writes, writes until an error (or flushes, for a fault that
/// only background work meets), and checks that the fault fired, that it surfaced as one of
/// `expect`, and that a reopen finds every acknowledged write.
fn run_fault(fault: Fault, expect: &[ErrorKind]) {
    let fs = FaultFs::new(MemFs::new());
    let db = Db::open(Path::new(DIR), options(&fs)).unwrap();
    let (before, _) = write_until_error(&db, 50);
    let id = fs.inject(fault);
    let (mut acked, err) = write_until_error(&db, 3000);
    // The fault may hit background work only: a flush makes it surface.
    let err = err.or_else(|| db.flush().err());
    assert!(fs.fired(id) > 0, "the fault never fired");
    let e = err.expect("the fault fired but no call reported an error");
    assert!(expect.contains(&e.kind()), "unexpected error kind: {e}");
    // After a poisoning failure every write fails the same way.
    if e.kind() == ErrorKind::Poisoned {
        assert_eq!(
            db.put(b"more", b"data").unwrap_err().kind(),
            ErrorKind::Poisoned
        );
    }
    drop(db);
    acked.extend(before);
    fs.clear_faults();
    verify_reopen(&fs, &acked);
}

#[test]
fn eio_on_wal_fsync_poisons_the_database() {
    run_fault(
        Fault::new(FaultOp::Sync)
            .path_contains(".log")
            .error(io::ErrorKind::Other)
            .once(),
        &[ErrorKind::Poisoned],
    );
}

#[test]
fn enospc_on_wal_append_stops_writes_without_poisoning() {
    // A full disk stops writes until space returns (tests/disk_full.rs); it does not poison.
    run_fault(
        Fault::new(FaultOp::Append)
            .path_contains(".log")
            .error(io::ErrorKind::StorageFull)
            .after(20)
            .always(),
        &[ErrorKind::Io],
    );
}

#[test]
fn eio_on_wal_append_poisons_the_database() {
    run_fault(
        Fault::new(FaultOp::Append)
            .path_contains(".log")
            .error(io::ErrorKind::Other)
            .after(20)
            .always(),
        &[ErrorKind::Poisoned],
    );
}

#[test]
fn enospc_writing_an_sst_is_a_clean_error() {
    run_fault(
        Fault::new(FaultOp::Append)
            .path_contains(".sst")
            .error(io::ErrorKind::StorageFull)
            .always(),
        &[ErrorKind::Poisoned, ErrorKind::Io],
    );
}

#[test]
fn eio_on_sst_fsync_is_a_clean_error() {
    run_fault(
        Fault::new(FaultOp::Sync)
            .path_contains(".sst")
            .error(io::ErrorKind::Other)
            .once(),
        &[ErrorKind::Poisoned, ErrorKind::Io],
    );
}

#[test]
fn eio_on_manifest_fsync_poisons_the_database() {
    run_fault(
        Fault::new(FaultOp::Sync)
            .path_contains("MANIFEST")
            .error(io::ErrorKind::Other)
            .once(),
        &[ErrorKind::Poisoned],
    );
}

#[test]
fn failed_rename_of_current_poisons_the_database() {
    let fs = FaultFs::new(MemFs::new());
    let options = Options {
        max_manifest_size: 1024,
        ..options(&fs)
    };
    let db = Db::open(Path::new(DIR), options.clone()).unwrap();
    let id = fs.inject(
        Fault::new(FaultOp::Rename)
            .error(io::ErrorKind::Other)
            .always(),
    );
    let (acked, err) = write_until_error(&db, 5000);
    let e = err
        .or_else(|| db.flush().err())
        .expect("a failed rename surfaces");
    assert_eq!(e.kind(), ErrorKind::Poisoned, "{e}");
    assert!(fs.fired(id) > 0);
    drop(db);
    fs.clear_faults();
    verify_reopen(&fs, &acked);
}

#[test]
fn failing_reads_are_io_errors_not_panics() {
    let fs = FaultFs::new(MemFs::new());
    let db = Db::open(Path::new(DIR), options(&fs)).unwrap();
    let (acked, _) = write_until_error(&db, 400);
    db.close().unwrap();
    // A fresh handle: nothing of the SSTs is cached, so reads reach the file system.
    let db = Db::open(Path::new(DIR), options(&fs)).unwrap();
    let id = fs.inject(
        Fault::new(FaultOp::Read)
            .path_contains(".sst")
            .error(io::ErrorKind::Other)
            .always(),
    );
    let mut errors = 0;
    for k in acked.keys() {
        match db.get(k) {
            Ok(v) => assert_eq!(v.as_ref(), acked.get(k)),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Io, "{e}");
                errors += 1;
            }
        }
    }
    assert!(fs.fired(id) > 0, "no read reached an SST");
    assert!(errors > 0, "failed reads were not reported");
    fs.clear_faults();
    for (k, v) in &acked {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
}

#[test]
fn a_failed_flush_wal_poisons_the_database_and_keeps_what_was_flushed() {
    let fs = FaultFs::new(MemFs::new());
    // A memtable large enough that no write below switches it (a switch flushes the WAL too).
    let roomy = Options {
        write_buffer_size: 1 << 20,
        ..options(&fs)
    };
    let db = Db::open(Path::new(DIR), roomy).unwrap();
    let unflushed = WriteOptions {
        durability: Durability::Unflushed,
    };
    let mut acked = BTreeMap::new();
    for i in 0..20u32 {
        let (key, value) = (
            format!("key{i:02}").into_bytes(),
            format!("v{i}").into_bytes(),
        );
        let mut b = WriteBatch::new();
        b.put(&key, &value);
        db.write(b, &unflushed).unwrap();
        acked.insert(key, value);
    }
    db.flush_wal().unwrap();

    let id = fs.inject(
        Fault::new(FaultOp::Flush)
            .path_contains(".log")
            .error(io::ErrorKind::Other)
            .always(),
    );
    let mut b = WriteBatch::new();
    b.put(b"late", b"never flushed");
    db.write(b, &unflushed)
        .expect("an unflushed write does not touch the file");
    let e = db.flush_wal().unwrap_err();
    assert_eq!(fs.fired(id), 1);
    assert_eq!(e.kind(), ErrorKind::Poisoned, "{e}");
    assert_eq!(db.flush_wal().unwrap_err().kind(), ErrorKind::Poisoned);
    assert_eq!(
        db.put(b"more", b"data").unwrap_err().kind(),
        ErrorKind::Poisoned
    );
    drop(db);
    fs.clear_faults();
    verify_reopen(&fs, &acked);
}
