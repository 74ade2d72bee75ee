//! Tests of the in-memory and fault-injecting file systems: the durability model crash tests rely on,
//! and every way a fault rule can fire.

use super::*;
use std::io;
use std::path::{Path, PathBuf};

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// A file system with the directory `db` in place.
fn mem_with_db() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(p("db")).unwrap();
    fs
}

fn write(fs: &dyn Fs, path: &str, data: &[u8], sync: bool) -> Box<dyn WritableFile> {
    let mut file = fs.create(p(path)).unwrap();
    file.append(data).unwrap();
    if sync {
        file.sync().unwrap();
    }
    file
}

// ---- MemFs: what survives a crash ----

#[test]
fn unsynced_appends_vanish_at_crash_clone() {
    let fs = mem_with_db();
    let _file = write(&fs, "db/a", b"lost", false);
    fs.sync_dir(p("db")).unwrap();
    assert_eq!(fs.read_file("db/a").unwrap(), b"lost");
    assert_eq!(fs.crash_clone().read_file("db/a").unwrap(), b"");
}

#[test]
fn synced_appends_survive_and_later_ones_do_not() {
    let fs = mem_with_db();
    let mut file = write(&fs, "db/a", b"kept", true);
    file.append(b"-lost").unwrap();
    file.flush().unwrap();
    fs.sync_dir(p("db")).unwrap();
    let after = fs.crash_clone();
    assert_eq!(after.read_file("db/a").unwrap(), b"kept");
    assert_eq!(after.file_size(p("db/a")).unwrap(), 4);
}

#[test]
fn created_and_synced_file_vanishes_when_its_directory_was_never_synced() {
    let fs = mem_with_db();
    let _file = write(&fs, "db/a", b"data", true);
    let after = fs.crash_clone();
    assert!(!after.exists(p("db/a")));
    assert!(after.exists(p("db")), "directories are durable on creation");
    assert!(after.list_dir(p("db")).unwrap().is_empty());
}

#[test]
fn rename_not_followed_by_sync_dir_reverts() {
    let fs = mem_with_db();
    write(&fs, "db/staging", b"v1", true);
    fs.sync_dir(p("db")).unwrap();
    fs.rename(p("db/staging"), p("db/CURRENT")).unwrap();
    assert!(fs.exists(p("db/CURRENT")));
    let after = fs.crash_clone();
    assert_eq!(after.read_file("db/staging").unwrap(), b"v1");
    assert!(!after.exists(p("db/CURRENT")));
}

#[test]
fn rename_followed_by_sync_dir_keeps_the_synced_data_under_the_new_name() {
    let fs = mem_with_db();
    // The data is synced before the name ever becomes durable: the inode carries it.
    write(&fs, "db/staging", b"v1", true);
    fs.rename(p("db/staging"), p("db/CURRENT")).unwrap();
    fs.sync_dir(p("db")).unwrap();
    let after = fs.crash_clone();
    assert_eq!(after.read_file("db/CURRENT").unwrap(), b"v1");
    assert!(!after.exists(p("db/staging")));
}

#[test]
fn rename_over_an_existing_file_reverts_to_the_old_contents() {
    let fs = mem_with_db();
    write(&fs, "db/CURRENT", b"old", true);
    fs.sync_dir(p("db")).unwrap();
    write(&fs, "db/staging", b"new", true);
    fs.rename(p("db/staging"), p("db/CURRENT")).unwrap();
    assert_eq!(fs.read_file("db/CURRENT").unwrap(), b"new");
    assert_eq!(fs.crash_clone().read_file("db/CURRENT").unwrap(), b"old");
    fs.sync_dir(p("db")).unwrap();
    assert_eq!(fs.crash_clone().read_file("db/CURRENT").unwrap(), b"new");
}

#[test]
fn rename_across_directories_needs_both_directories_synced() {
    let fs = mem_with_db();
    fs.create_dir_all(p("db/archive")).unwrap();
    write(&fs, "db/a", b"x", true);
    fs.sync_dir(p("db")).unwrap();
    fs.rename(p("db/a"), p("db/archive/a")).unwrap();
    fs.sync_dir(p("db/archive")).unwrap();
    // Only the target directory is synced: the file is reachable by both names, one inode.
    let after = fs.crash_clone();
    assert_eq!(after.read_file("db/a").unwrap(), b"x");
    assert_eq!(after.read_file("db/archive/a").unwrap(), b"x");
    assert_eq!(after.total_bytes(), 1);
    fs.sync_dir(p("db")).unwrap();
    let after = fs.crash_clone();
    assert!(!after.exists(p("db/a")));
    assert_eq!(after.read_file("db/archive/a").unwrap(), b"x");
}

#[test]
fn remove_not_followed_by_sync_dir_reverts() {
    let fs = mem_with_db();
    write(&fs, "db/a", b"x", true);
    fs.sync_dir(p("db")).unwrap();
    fs.remove_file(p("db/a")).unwrap();
    assert!(!fs.exists(p("db/a")));
    assert_eq!(fs.crash_clone().read_file("db/a").unwrap(), b"x");
    fs.sync_dir(p("db")).unwrap();
    assert!(!fs.crash_clone().exists(p("db/a")));
}

#[test]
fn create_over_a_synced_file_truncates_durably_only_at_the_next_sync() {
    let fs = mem_with_db();
    write(&fs, "db/a", b"old contents", true);
    fs.sync_dir(p("db")).unwrap();
    let mut file = write(&fs, "db/a", b"new", false);
    assert_eq!(fs.read_file("db/a").unwrap(), b"new");
    assert_eq!(fs.crash_clone().read_file("db/a").unwrap(), b"old contents");
    assert_eq!(
        fs.crash_clone_torn(7).read_file("db/a").unwrap(),
        b"old contents"
    );
    file.sync().unwrap();
    assert_eq!(fs.crash_clone().read_file("db/a").unwrap(), b"new");
}

#[test]
fn handles_on_the_old_fs_never_touch_a_crash_clone() {
    let fs = mem_with_db();
    let mut file = write(&fs, "db/a", b"one", true);
    fs.sync_dir(p("db")).unwrap();
    let after = fs.crash_clone();
    file.append(b"two").unwrap();
    file.sync().unwrap();
    write(&fs, "db/b", b"b", true);
    fs.sync_dir(p("db")).unwrap();
    assert_eq!(after.read_file("db/a").unwrap(), b"one");
    assert!(!after.exists(p("db/b")));
    assert_eq!(fs.read_file("db/a").unwrap(), b"onetwo");
    // And the clone is a file system of its own.
    write(&after, "db/c", b"c", true);
    assert!(!fs.exists(p("db/c")));
}

#[test]
fn a_writable_file_keeps_its_inode_across_rename_and_remove() {
    let fs = mem_with_db();
    let mut file = write(&fs, "db/a", b"1", false);
    fs.rename(p("db/a"), p("db/b")).unwrap();
    file.append(b"2").unwrap();
    assert_eq!(fs.read_file("db/b").unwrap(), b"12");
    fs.remove_file(p("db/b")).unwrap();
    file.append(b"3").unwrap();
    file.sync().unwrap();
    assert_eq!(file.len(), 3);
    assert!(fs.list_files().is_empty());
}

// ---- MemFs: torn clones ----

/// Writes 16 synced bytes and 100 unsynced bytes (all 0xAA) to `db/wal`.
fn fs_with_unsynced_tail() -> MemFs {
    let fs = mem_with_db();
    let mut file = write(&fs, "db/wal", &[0x55; 16], true);
    file.append(&[0xAA; 100]).unwrap();
    fs.sync_dir(p("db")).unwrap();
    fs
}

#[test]
fn torn_clone_keeps_the_synced_bytes_and_a_prefix_of_the_unsynced_tail() {
    let fs = fs_with_unsynced_tail();
    let (mut kept_none, mut kept_all, mut zero_filled) = (false, false, false);
    for seed in 0..500 {
        let bytes = fs.crash_clone_torn(seed).read_file("db/wal").unwrap();
        assert_eq!(
            &bytes[..16],
            &[0x55; 16],
            "seed {seed}: synced bytes damaged"
        );
        let kept = bytes[16..].iter().take_while(|b| **b == 0xAA).count();
        let zeros = &bytes[16 + kept..];
        assert!(zeros.iter().all(|b| *b == 0), "seed {seed}: not a prefix");
        assert!(zeros.len() as u64 <= TORN_MAX_ZERO_BYTES, "seed {seed}");
        assert!(
            kept + zeros.len() <= 100,
            "seed {seed}: file grew past what was written"
        );
        kept_none |= kept == 0;
        kept_all |= kept == 100;
        zero_filled |= !zeros.is_empty();
    }
    assert!(
        kept_none && kept_all && zero_filled,
        "500 seeds should show every outcome"
    );
}

#[test]
fn torn_clone_is_a_function_of_the_seed() {
    let fs = fs_with_unsynced_tail();
    let tears: Vec<_> = (0..20)
        .map(|seed| fs.crash_clone_torn(seed).read_file("db/wal").unwrap())
        .collect();
    for (seed, bytes) in tears.iter().enumerate() {
        assert_eq!(
            &fs.crash_clone_torn(seed as u64)
                .read_file("db/wal")
                .unwrap(),
            bytes
        );
    }
    assert!(
        tears.iter().any(|t| t != &tears[0]),
        "different seeds should tear differently"
    );
}

#[test]
fn torn_clone_keeps_the_names_of_a_plain_crash_clone() {
    let fs = fs_with_unsynced_tail();
    write(&fs, "db/unsynced-name", b"x", true);
    for seed in 0..20 {
        let after = fs.crash_clone_torn(seed);
        assert_eq!(after.list_files(), vec![PathBuf::from("db/wal")]);
    }
}

// ---- MemFs: operations and helpers ----

#[test]
fn open_returns_a_snapshot_of_the_current_bytes() {
    let fs = mem_with_db();
    let mut file = write(&fs, "db/a", b"abc", false);
    let reader = fs.open(p("db/a")).unwrap();
    file.append(b"def").unwrap();
    assert_eq!(reader.len(), 3);
    let mut buf = [0; 2];
    reader.read_exact_at(1, &mut buf).unwrap();
    assert_eq!(&buf, b"bc");
    let err = reader.read_exact_at(2, &mut buf).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(fs.read_all(p("db/a")).unwrap(), b"abcdef");
    assert_eq!(fs.file_size(p("db/a")).unwrap(), 6);
}

#[test]
fn operations_on_missing_paths_fail_with_not_found() {
    let fs = mem_with_db();
    let kind = |r: io::Result<()>| r.unwrap_err().kind();
    assert_eq!(
        kind(fs.create(p("nodir/a")).map(|_| ())),
        io::ErrorKind::NotFound
    );
    assert_eq!(
        kind(fs.open(p("db/a")).map(|_| ())),
        io::ErrorKind::NotFound
    );
    assert_eq!(
        kind(fs.rename(p("db/a"), p("db/b"))),
        io::ErrorKind::NotFound
    );
    assert_eq!(kind(fs.remove_file(p("db/a"))), io::ErrorKind::NotFound);
    assert_eq!(kind(fs.sync_dir(p("nodir"))), io::ErrorKind::NotFound);
    assert_eq!(
        kind(fs.list_dir(p("nodir")).map(|_| ())),
        io::ErrorKind::NotFound
    );
    assert_eq!(
        kind(fs.file_size(p("db/a")).map(|_| ())),
        io::ErrorKind::NotFound
    );
}

#[test]
fn files_and_directories_are_not_confused() {
    let fs = mem_with_db();
    write(&fs, "db/a", b"", false);
    let kind = |r: io::Result<()>| r.unwrap_err().kind();
    assert_eq!(
        kind(fs.create(p("db")).map(|_| ())),
        io::ErrorKind::IsADirectory
    );
    assert_eq!(kind(fs.remove_file(p("db"))), io::ErrorKind::IsADirectory);
    assert_eq!(kind(fs.sync_dir(p("db/a"))), io::ErrorKind::NotADirectory);
    assert_eq!(
        kind(fs.create_dir_all(p("db/a/b"))),
        io::ErrorKind::NotADirectory
    );
    assert_eq!(
        kind(fs.rename(p("db/a"), p("db"))),
        io::ErrorKind::IsADirectory
    );
}

#[test]
fn relative_and_absolute_paths_are_distinct_and_read_back_as_spelled() {
    let fs = MemFs::new();
    fs.create_dir_all(p("/data/db")).unwrap();
    fs.create_dir_all(p("db")).unwrap();
    write(&fs, "/data/db/./x/../CURRENT", b"abs", false);
    write(&fs, "db/CURRENT", b"rel", false);
    assert_eq!(fs.read_file("/data/db/CURRENT").unwrap(), b"abs");
    assert_eq!(fs.read_file("db/CURRENT").unwrap(), b"rel");
    assert_eq!(
        fs.list_files(),
        vec![
            PathBuf::from("/data/db/CURRENT"),
            PathBuf::from("db/CURRENT")
        ]
    );
    assert_eq!(fs.list_dir(p("")).unwrap(), vec!["db".to_owned()]);
    assert_eq!(fs.list_dir(p("/")).unwrap(), vec!["data".to_owned()]);
}

#[test]
fn list_dir_names_files_and_subdirectories_in_order() {
    let fs = mem_with_db();
    fs.create_dir_all(p("db/blobs")).unwrap();
    write(&fs, "db/b.sst", b"", false);
    write(&fs, "db/a.sst", b"", false);
    assert_eq!(fs.list_dir(p("db")).unwrap(), ["a.sst", "b.sst", "blobs"]);
}

#[test]
fn directory_rename_moves_its_contents_and_refuses_to_nest_in_itself() {
    let fs = mem_with_db();
    fs.create_dir_all(p("db/staging")).unwrap();
    write(&fs, "db/staging/a", b"x", false);
    let err = fs
        .rename(p("db/staging"), p("db/staging/inner"))
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    fs.rename(p("db/staging"), p("db/checkpoint")).unwrap();
    assert_eq!(fs.read_file("db/checkpoint/a").unwrap(), b"x");
    assert!(!fs.exists(p("db/staging")));
}

#[test]
fn write_file_is_durable_and_creates_parents() {
    let fs = MemFs::new();
    fs.write_file("a/b/c", b"hello").unwrap();
    let after = fs.crash_clone();
    assert_eq!(after.read_file("a/b/c").unwrap(), b"hello");
    assert_eq!(after.total_bytes(), 5);
}

#[test]
fn corrupt_byte_damages_both_views() {
    let fs = mem_with_db();
    let _file = write(&fs, "db/a", &[0, 0, 0], true);
    fs.sync_dir(p("db")).unwrap();
    fs.corrupt_byte("db/a", 1, 0x80).unwrap();
    assert_eq!(fs.read_file("db/a").unwrap(), [0, 0x80, 0]);
    assert_eq!(fs.crash_clone().read_file("db/a").unwrap(), [0, 0x80, 0]);
    let err = fs.corrupt_byte("db/a", 3, 1).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn truncate_shortens_both_views_and_refuses_to_grow() {
    let fs = mem_with_db();
    let mut file = write(&fs, "db/a", b"abcd", true);
    file.append(b"ef").unwrap();
    fs.sync_dir(p("db")).unwrap();
    fs.truncate("db/a", 5).unwrap();
    assert_eq!(fs.read_file("db/a").unwrap(), b"abcde");
    assert_eq!(fs.crash_clone().read_file("db/a").unwrap(), b"abcd");
    fs.truncate("db/a", 2).unwrap();
    assert_eq!(fs.crash_clone().read_file("db/a").unwrap(), b"ab");
    assert_eq!(
        fs.truncate("db/a", 3).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn lock_excludes_other_holders_until_the_guard_drops() {
    let fs = mem_with_db();
    let guard = fs.lock(p("db/LOCK")).unwrap();
    assert!(fs.exists(p("db/LOCK")), "lock creates the file");
    let other_handle = fs.clone();
    let err = other_handle.lock(p("db/LOCK")).err().unwrap();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    let _other_path = fs.lock(p("db/LOCK2")).unwrap();
    drop(guard);
    let _again = other_handle.lock(p("db/LOCK")).unwrap();
}

#[test]
fn a_crash_clone_holds_no_locks() {
    let fs = mem_with_db();
    let _guard = fs.lock(p("db/LOCK")).unwrap();
    fs.sync_dir(p("db")).unwrap();
    let after = fs.crash_clone();
    let _guard = after.lock(p("db/LOCK")).unwrap();
}

#[test]
fn thousands_of_small_synced_appends_stay_cheap() {
    let fs = mem_with_db();
    let mut file = fs.create(p("db/wal")).unwrap();
    let reader = fs.open(p("db/wal")).unwrap();
    for i in 0..20_000u32 {
        file.append(&i.to_le_bytes()).unwrap();
        if i % 2 == 0 {
            file.sync().unwrap();
        }
    }
    drop(reader);
    fs.sync_dir(p("db")).unwrap();
    assert_eq!(fs.file_size(p("db/wal")).unwrap(), 80_000);
    assert_eq!(fs.crash_clone().file_size(p("db/wal")).unwrap(), 79_996);
}

#[test]
fn threads_append_to_their_own_files_concurrently() {
    let fs = mem_with_db();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let fs = fs.clone();
            scope.spawn(move || {
                let mut file = fs.create(&PathBuf::from(format!("db/{t}"))).unwrap();
                for _ in 0..1000 {
                    file.append(&[t as u8]).unwrap();
                }
                file.sync().unwrap();
            });
        }
    });
    fs.sync_dir(p("db")).unwrap();
    let after = fs.crash_clone();
    for t in 0..4u8 {
        assert_eq!(after.read_file(format!("db/{t}")).unwrap(), vec![t; 1000]);
    }
}

// ---- FaultFs: rules ----

fn fault_fs() -> FaultFs {
    let fs = FaultFs::default();
    fs.create_dir_all(p("db")).unwrap();
    fs
}

/// Outcomes of `n` syncs of `path` after one append each: true where the sync succeeded.
fn sync_outcomes(fs: &FaultFs, path: &str, n: usize) -> Vec<bool> {
    let mut file = fs.create(p(path)).unwrap();
    (0..n)
        .map(|_| {
            file.append(b"x").unwrap();
            file.sync().is_ok()
        })
        .collect()
}

#[test]
fn an_always_fault_fails_every_matching_operation_with_the_requested_kind() {
    let fs = fault_fs();
    fs.inject(Fault::new(FaultOp::Append).error(io::ErrorKind::StorageFull));
    let mut file = fs.create(p("db/a")).unwrap();
    for _ in 0..3 {
        let err = file.append(b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    }
    assert_eq!(fs.injected_for(FaultOp::Append), 3);
    assert_eq!(fs.injected_for(FaultOp::Sync), 0);
    file.sync().unwrap();
}

#[test]
fn the_default_error_kind_is_the_eio_one() {
    let fs = fault_fs();
    fs.inject(Fault::new(FaultOp::Create));
    let err = fs.create(p("db/a")).err().unwrap();
    assert_eq!(err.kind(), DEFAULT_FAULT_ERROR);
    assert!(err.to_string().contains("injected"), "{err}");
}

#[test]
fn a_once_fault_after_n_fails_exactly_the_next_matching_operation() {
    let fs = fault_fs();
    let id = fs.inject(
        Fault::new(FaultOp::Sync)
            .path_contains(".log")
            .after(3)
            .once(),
    );
    let outcomes = sync_outcomes(&fs, "db/000001.log", 6);
    assert_eq!(outcomes, [true, true, true, false, true, true]);
    assert_eq!(fs.fired(id), 1);
}

#[test]
fn times_limits_how_often_a_fault_fires() {
    let fs = fault_fs();
    fs.inject(Fault::new(FaultOp::Sync).after(1).times(2));
    assert_eq!(
        sync_outcomes(&fs, "db/a", 5),
        [true, false, false, true, true]
    );
    assert_eq!(fs.injected(), 2);
}

#[test]
fn a_path_filter_spares_other_files() {
    let fs = fault_fs();
    fs.inject(Fault::new(FaultOp::Sync).path_contains(".sst"));
    assert_eq!(sync_outcomes(&fs, "db/MANIFEST-000001", 2), [true, true]);
    assert_eq!(sync_outcomes(&fs, "db/000002.sst", 2), [false, false]);
}

#[test]
fn a_probability_fault_fires_at_about_its_rate_and_repeats_with_its_seed() {
    let run = |seed| {
        let fs = fault_fs();
        fs.inject(Fault::new(FaultOp::Sync).probability(0.25, seed));
        sync_outcomes(&fs, "db/a", 400)
    };
    let first = run(42);
    assert_eq!(first, run(42));
    assert_ne!(first, run(43));
    let failures = first.iter().filter(|ok| !**ok).count();
    assert!(
        (60..=140).contains(&failures),
        "{failures} failures of 400 at p = 0.25"
    );
}

#[test]
fn an_any_fault_matches_every_kind_of_operation() {
    let fs = fault_fs();
    fs.inject(Fault::new(FaultOp::Any).path_contains("MANIFEST"));
    assert!(fs.create(p("db/MANIFEST")).is_err());
    assert!(fs.rename(p("db/x"), p("db/MANIFEST")).is_err());
    assert!(fs.open(p("db/MANIFEST")).is_err());
    fs.create(p("db/CURRENT")).unwrap();
    assert_eq!(fs.injected(), 3);
    assert_eq!(fs.injected_for(FaultOp::Any), 3);
    assert_eq!(fs.injected_for(FaultOp::Rename), 1);
}

#[test]
fn a_failed_append_appends_nothing() {
    let fs = fault_fs();
    let mut file = fs.create(p("db/a")).unwrap();
    file.append(b"ok").unwrap();
    let id = fs.inject(Fault::new(FaultOp::Append).error(io::ErrorKind::StorageFull));
    assert!(file.append(b"lost").is_err());
    assert_eq!(file.len(), 2);
    assert!(fs.remove_fault(id));
    file.append(b"!").unwrap();
    assert_eq!(fs.mem().read_file("db/a").unwrap(), b"ok!");
}

#[test]
fn a_failed_sync_makes_nothing_durable() {
    let fs = fault_fs();
    let mut file = fs.create(p("db/a")).unwrap();
    file.append(b"data").unwrap();
    fs.sync_dir(p("db")).unwrap();
    fs.inject(Fault::new(FaultOp::Sync).once());
    assert!(file.sync().is_err());
    assert_eq!(fs.crash_clone().mem().read_file("db/a").unwrap(), b"");
    file.sync().unwrap();
    assert_eq!(fs.crash_clone().mem().read_file("db/a").unwrap(), b"data");
}

#[test]
fn a_failed_rename_or_sync_dir_changes_nothing() {
    let fs = fault_fs();
    write(&fs, "db/staging", b"x", true);
    fs.inject(Fault::new(FaultOp::Rename).once());
    fs.inject(Fault::new(FaultOp::SyncDir).once());
    assert!(fs.rename(p("db/staging"), p("db/CURRENT")).is_err());
    assert!(fs.exists(p("db/staging")) && !fs.exists(p("db/CURRENT")));
    assert!(fs.sync_dir(p("db")).is_err());
    assert!(!fs.crash_clone().exists(p("db/staging")));
}

#[test]
fn read_faults_hit_reads_and_read_all() {
    let fs = fault_fs();
    write(&fs, "db/a.sst", b"block", false);
    let reader = fs.open(p("db/a.sst")).unwrap();
    fs.inject(Fault::new(FaultOp::Read).error(io::ErrorKind::InvalidData));
    let mut buf = [0; 5];
    assert_eq!(
        reader.read_exact_at(0, &mut buf).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    assert!(fs.read_all(p("db/a.sst")).is_err());
    fs.clear_faults();
    assert_eq!(fs.read_all(p("db/a.sst")).unwrap(), b"block");
}

#[test]
fn rules_are_consulted_in_order_and_the_first_to_fire_decides() {
    let fs = fault_fs();
    let first = fs.inject(
        Fault::new(FaultOp::Sync)
            .error(io::ErrorKind::StorageFull)
            .once(),
    );
    let second = fs.inject(Fault::new(FaultOp::Sync).error(io::ErrorKind::Other).once());
    let mut file = fs.create(p("db/a")).unwrap();
    assert_eq!(file.sync().unwrap_err().kind(), io::ErrorKind::StorageFull);
    assert_eq!(file.sync().unwrap_err().kind(), io::ErrorKind::Other);
    file.sync().unwrap();
    assert_eq!((fs.fired(first), fs.fired(second)), (1, 1));
}

#[test]
fn lock_and_metadata_faults_fire() {
    let fs = fault_fs();
    fs.inject(Fault::new(FaultOp::Lock).error(io::ErrorKind::PermissionDenied));
    fs.inject(Fault::new(FaultOp::ListDir));
    fs.inject(Fault::new(FaultOp::FileSize));
    fs.inject(Fault::new(FaultOp::CreateDir));
    fs.inject(Fault::new(FaultOp::Remove));
    assert_eq!(
        fs.lock(p("db/LOCK")).err().unwrap().kind(),
        io::ErrorKind::PermissionDenied
    );
    assert!(fs.list_dir(p("db")).is_err());
    assert!(fs.file_size(p("db/a")).is_err());
    assert!(fs.create_dir_all(p("db/x")).is_err());
    assert!(fs.remove_file(p("db/a")).is_err());
    assert_eq!(fs.injected(), 5);
    assert!(fs.exists(p("db")), "exists never fails");
}

// ---- FaultFs: power cut ----

#[test]
fn cut_power_after_fails_every_later_mutating_operation() {
    let fs = fault_fs();
    let mut file = fs.create(p("db/a")).unwrap();
    fs.cut_power_after(2);
    file.append(b"1").unwrap();
    file.sync().unwrap();
    assert!(fs.is_power_cut());
    assert!(file.append(b"2").is_err());
    assert!(file.flush().is_err());
    assert!(file.sync().is_err());
    assert!(fs.create(p("db/b")).is_err());
    assert!(fs.create_dir_all(p("db/c")).is_err());
    assert!(fs.rename(p("db/a"), p("db/b")).is_err());
    assert!(fs.remove_file(p("db/a")).is_err());
    assert!(fs.sync_dir(p("db")).is_err());
    assert!(fs.lock(p("db/LOCK")).is_err());
    assert_eq!(fs.power_cut_failures(), 9);
    assert_eq!(fs.injected(), 0);
    // Reads still work, and nothing after the cut reached the file system.
    assert_eq!(fs.read_all(p("db/a")).unwrap(), b"1");
    assert_eq!(fs.mem().list_files(), vec![PathBuf::from("db/a")]);
    fs.restore_power();
    file.append(b"2").unwrap();
}

#[test]
fn mutating_ops_counts_what_a_power_cut_can_interrupt() {
    let fs = FaultFs::default();
    fs.create_dir_all(p("db")).unwrap();
    let mut file = fs.create(p("db/a")).unwrap();
    file.append(b"x").unwrap();
    file.flush().unwrap();
    file.sync().unwrap();
    fs.sync_dir(p("db")).unwrap();
    fs.read_all(p("db/a")).unwrap();
    fs.list_dir(p("db")).unwrap();
    assert_eq!(fs.mutating_ops(), 5);
}

/// Writes a file the careful way: temporary, sync, rename, sync_dir. Returns whether it finished.
fn install_current(fs: &FaultFs, contents: &[u8]) -> io::Result<()> {
    let mut file = fs.create(p("db/CURRENT.tmp"))?;
    file.append(contents)?;
    file.sync()?;
    fs.rename(p("db/CURRENT.tmp"), p("db/CURRENT"))?;
    fs.sync_dir(p("db"))
}

#[test]
fn every_crash_point_leaves_the_old_or_the_new_contents() {
    let setup = || {
        let fs = FaultFs::default();
        fs.create_dir_all(p("db")).unwrap();
        install_current(&fs, b"old").unwrap();
        fs
    };
    let dry_run = setup();
    let before = dry_run.mutating_ops();
    install_current(&dry_run, b"new").unwrap();
    let points = dry_run.mutating_ops() - before;
    assert_eq!(points, 5);
    for crash_at in 0..=points {
        let fs = setup();
        fs.cut_power_after(crash_at);
        let finished = install_current(&fs, b"new").is_ok();
        for after in [fs.crash_clone(), fs.crash_clone_torn(crash_at)] {
            let current = after.mem().read_file("db/CURRENT").unwrap();
            if finished {
                assert_eq!(current, b"new", "crash at {crash_at}");
            } else {
                assert!(
                    current == b"old" || current == b"new",
                    "crash at {crash_at}"
                );
            }
        }
    }
}

#[test]
fn a_power_cut_lets_exactly_n_racing_operations_through() {
    let fs = fault_fs();
    fs.cut_power_after(100);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let fs = fs.clone();
            scope.spawn(move || {
                let mut file = fs.create(&PathBuf::from(format!("db/{t}")))?;
                for _ in 0..50 {
                    file.append(b"x")?;
                }
                io::Result::Ok(())
            });
        }
    });
    assert_eq!(
        fs.mutating_ops(),
        101,
        "the create_dir_all plus exactly 100"
    );
    assert_eq!(
        fs.mem().total_bytes() + fs.mem().list_files().len() as u64,
        100
    );
}

#[test]
fn a_crash_clone_of_a_fault_fs_starts_without_rules_and_with_power() {
    let fs = fault_fs();
    write(&fs, "db/a", b"x", true);
    fs.sync_dir(p("db")).unwrap();
    fs.inject(Fault::new(FaultOp::Any));
    fs.cut_power_after(0);
    let after = fs.crash_clone();
    assert!(!after.is_power_cut());
    assert_eq!(after.mutating_ops(), 0);
    assert_eq!(after.read_all(p("db/a")).unwrap(), b"x");
    after.create(p("db/b")).unwrap();
}

// ---- RealFs: zero-filling ahead of a log ----

#[test]
fn real_files_zero_fill_one_chunk_ahead_of_their_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut file = RealFs.create(&path).unwrap();
    file.preallocate(4096);
    let mut want = Vec::new();
    for i in 0..300u32 {
        // Records of varied sizes, some larger than the write buffer, crossing many chunks.
        let chunk: Vec<u8> = (0..(i * 37 % 700 + 1) as usize)
            .map(|j| (j as u8) | 1)
            .collect();
        file.append(&chunk).unwrap();
        want.extend_from_slice(&chunk);
        if i % 7 == 0 {
            file.flush().unwrap();
        }
    }
    file.append(&vec![7u8; 70 * 1024]).unwrap();
    want.extend_from_slice(&[7u8; 70 * 1024]);
    file.sync().unwrap();
    assert_eq!(file.len(), want.len() as u64);
    let data = RealFs.read_all(&path).unwrap();
    assert!(data.len() > want.len(), "zeros lie ahead of the appends");
    assert!(
        data.len() <= want.len() + 4096,
        "at most one chunk ahead, not a large write's worth: {} bytes for {}",
        data.len(),
        want.len()
    );
    assert_eq!(&data[..want.len()], &want[..]);
    assert!(data[want.len()..].iter().all(|&b| b == 0));
}

#[test]
fn real_files_append_plainly_without_preallocate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain");
    let mut file = RealFs.create(&path).unwrap();
    file.append(b"abc").unwrap();
    file.sync().unwrap();
    assert_eq!(RealFs.read_all(&path).unwrap(), b"abc");
}
