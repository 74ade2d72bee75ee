//! WAL recovery modes (regression tests for issue 18, defect 1): a damaged record that the WAL
//! had synced is corruption, never a silent rollback; a torn tail of bytes never synced is cut.
//!
//! A "process crash" here copies every file's current bytes (what a SIGKILL leaves: everything
//! handed to the operating system) while the database is still open; a "clean close" closes it.

use shale::fs::MemFs;
use shale::{Db, Durability, ErrorKind, Options, WalRecovery, WriteBatch, WriteOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/walrec";

fn options(fs: &MemFs, mode: WalRecovery) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        wal_recovery: mode,
        ..Options::default()
    }
}

fn put(db: &Db, key: &str, value: &str, durability: Durability) {
    let mut batch = WriteBatch::new();
    batch.put(key, value);
    db.write(batch, &WriteOptions { durability }).unwrap();
}

fn wal(fs: &MemFs) -> PathBuf {
    let wals: Vec<PathBuf> = fs
        .list_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert_eq!(wals.len(), 1, "{wals:?}");
    wals.into_iter().next().unwrap()
}

/// What a SIGKILL leaves: every file with the bytes handed to the operating system.
fn process_crash_copy(fs: &MemFs) -> MemFs {
    let copy = MemFs::new();
    for path in fs.list_files() {
        copy.write_file(&path, &fs.read_file(&path).unwrap())
            .unwrap();
    }
    copy
}

/// The offsets and payload lengths of a log's records (docs/format/wal.md), up to the zeros the
/// WAL keeps ahead of its appends.
fn records(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 12 <= data.len() && data[at..at + 12] != [0; 12] {
        let len = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize;
        out.push((at, len));
        at += 12 + len;
    }
    out
}

/// The offset of a byte in the middle of the last write batch (not a sync marker, whose payload
/// starts with eight 0xff bytes).
fn middle_of_last_batch(data: &[u8]) -> u64 {
    let (at, len) = records(data)
        .into_iter()
        .rev()
        .find(|&(at, _)| data[at + 12..at + 20] != [0xff; 8])
        .expect("a write batch");
    (at + 12 + len / 2) as u64
}

/// `SET k old`, `SET k new`, both fsynced (Redis's `appendfsync always`).
fn old_then_new(fs: &MemFs) -> Db {
    let db = Db::open(DIR, options(fs, WalRecovery::default())).unwrap();
    put(&db, "k", "old", Durability::Sync);
    put(&db, "k", "new", Durability::Sync);
    db
}

fn assert_corruption_naming(result: shale::Result<Db>, file: &Path) {
    let err = result.expect_err("a damaged synced record must not be cut silently");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.to_string().contains(&name), "{err}");
}

#[test]
fn regression_issue_18_damaged_synced_record_after_a_clean_close_is_corruption() {
    let fs = MemFs::new();
    old_then_new(&fs).close().unwrap();
    let wal = wal(&fs);
    let data = fs.read_file(&wal).unwrap();
    fs.corrupt_byte(&wal, middle_of_last_batch(&data), 0x01)
        .unwrap();
    assert_corruption_naming(
        Db::open(DIR, options(&fs, WalRecovery::TolerateTornTail)),
        &wal,
    );
    assert_corruption_naming(
        Db::open(DIR, options(&fs, WalRecovery::AbsoluteConsistency)),
        &wal,
    );
    // Point-in-time recovery opens with the prefix before the damage: an explicit choice.
    let db = Db::open(DIR, options(&fs, WalRecovery::PointInTime)).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"old"[..]));
}

#[test]
fn regression_issue_18_damaged_synced_record_after_a_process_crash_is_corruption() {
    let fs = MemFs::new();
    let db = old_then_new(&fs);
    let crashed = process_crash_copy(&fs);
    drop(db);
    let wal = wal(&crashed);
    let data = crashed.read_file(&wal).unwrap();
    crashed
        .corrupt_byte(&wal, middle_of_last_batch(&data), 0x40)
        .unwrap();
    assert_corruption_naming(
        Db::open(DIR, options(&crashed, WalRecovery::default())),
        &wal,
    );
}

#[test]
fn a_torn_tail_of_unsynced_writes_is_cut_and_synced_writes_survive() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs, WalRecovery::default())).unwrap();
    put(&db, "a", "synced", Durability::Sync);
    put(&db, "b", "buffered", Durability::Buffered);
    let crashed = process_crash_copy(&fs);
    drop(db);
    let wal = wal(&crashed);
    let data = crashed.read_file(&wal).unwrap();
    let &(last, len) = records(&data).last().unwrap();
    // An interrupted append: the last record (the unsynced write) lost its end.
    crashed
        .truncate(&wal, (last + 12 + len - 3) as u64)
        .unwrap();
    let db = Db::open(DIR, options(&crashed, WalRecovery::default())).unwrap();
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"synced"[..]));
    assert_eq!(db.get("b").unwrap(), None);
    drop(db);
    // Absolute consistency refuses even that.
    let crashed_again = process_crash_copy(&fs);
    crashed_again
        .truncate(&wal, (last + 12 + len - 3) as u64)
        .unwrap();
    assert_corruption_naming(
        Db::open(
            DIR,
            options(&crashed_again, WalRecovery::AbsoluteConsistency),
        ),
        &wal,
    );
}

#[test]
fn a_clean_close_reopens_in_every_mode() {
    for mode in [
        WalRecovery::TolerateTornTail,
        WalRecovery::AbsoluteConsistency,
        WalRecovery::PointInTime,
    ] {
        let fs = MemFs::new();
        old_then_new(&fs).close().unwrap();
        let db = Db::open(DIR, options(&fs, mode)).unwrap();
        assert_eq!(
            db.get("k").unwrap().as_deref(),
            Some(&b"new"[..]),
            "{mode:?}"
        );
    }
}
