//! Flushes and compactions through the log (RubbleDB's "compact once"): a leader prepares jobs
//! under `(term, counter)` file numbers, a follower receives the files into staging, and both
//! apply the same edits in log order. Stale edits are no-ops everywhere; files are durable before
//! the MANIFEST names them; staging is cleared at open. Blob GC goes the same way.

use shale::fs::{FaultFs, Fs, MemFs};
use shale::{file_number, Db, InstallEdit, InstallOutcome, LogPosition, Options, WriteBatch};
use std::collections::BTreeMap;
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
        context: format!("ctx-{index}").into_bytes(),
    }
}

/// Applies log entries `from..=to` to `db`: every 50th seals the memtable, the rest write.
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

/// Live files with their bytes' checksums.
fn live_set(fs: &FaultFs, db: &Db) -> Vec<(String, u32)> {
    db.live_file_names()
        .into_iter()
        .map(|n| {
            let data = fs.read_all(&db.path().join(&n)).unwrap();
            (n, crc32c::crc32c(&data))
        })
        .collect()
}

/// Copies `edit`'s outputs from the leader's directory into the follower's staging, as the
/// bulk channel does.
fn ship(fs: &FaultFs, from: &Db, to: &Db, edit: &InstallEdit) {
    fs.create_dir_all(&to.staging_dir()).unwrap();
    for o in &edit.outputs {
        let data = fs.read_all(&from.edit_file_path(&o.name).unwrap()).unwrap();
        let mut f = fs.create(&to.staging_dir().join(&o.name)).unwrap();
        f.append(&data).unwrap();
        f.sync().unwrap();
    }
    fs.sync_dir(&to.staging_dir()).unwrap();
}

/// A leader's file numbers in `term`.
fn numbers(term: u64) -> impl FnMut() -> u64 {
    let mut counter = 0;
    move || {
        counter += 1;
        file_number(term, counter)
    }
}

/// Drives a leader and a follower: entries `1..=to`, and after each seal every job the leader
/// can prepare, shipped and applied on both at the next log index. Returns the next index and
/// the indexes that carried edits.
fn run(fs: &FaultFs, leader: &Db, follower: &Db, term: u64, to: u64) -> (u64, Vec<u64>) {
    let mut edits = Vec::new();
    let mut next = numbers(term);
    let mut index = 1;
    let mut pending: Vec<InstallEdit> = Vec::new();
    while index <= to {
        apply(leader, index, index);
        apply(follower, index, index);
        index += 1;
        while let Some(edit) = leader.prepare_flush(&mut next).unwrap() {
            pending.push(edit);
        }
        while let Some(edit) = leader.prepare_compaction(&mut next).unwrap() {
            pending.push(edit);
        }
        for edit in pending.drain(..) {
            ship(fs, leader, follower, &edit);
            assert_eq!(
                leader.install_edit(index, &edit).unwrap(),
                InstallOutcome::Installed
            );
            assert_eq!(
                follower.install_edit(index, &edit).unwrap(),
                InstallOutcome::Installed
            );
            edits.push(index);
            index += 1;
        }
    }
    (index, edits)
}

/// What applying entries `1..=to` to a database of its own gives.
fn model(to: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    model_without(to, &[])
}

/// [`model`] with the entries at `edits` carrying no writes.
fn model_without(to: u64, edits: &[u64]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open_with_external_log("model", options(&FaultFs::new(MemFs::new()))).unwrap();
    for i in 1..=to {
        if edits.contains(&i) {
            db.skip_logged(i).unwrap();
        } else {
            apply(&db, i, i);
        }
    }
    contents(&db)
}

#[test]
fn shipped_flushes_and_compactions_give_identical_files_and_followers_never_compact() {
    let fs = FaultFs::new(MemFs::new());
    let leader = Db::open_for_log_installs("leader", options(&fs)).unwrap();
    let follower = Db::open_for_log_installs("follower", options(&fs)).unwrap();
    let (end, edits) = run(&fs, &leader, &follower, 3, 1200);
    let (installed, stale, _) = follower.install_counts();
    assert!(installed > 20, "{installed} edits installed");
    assert_eq!(stale, 0);
    assert_eq!(live_set(&fs, &leader), live_set(&fs, &follower));
    assert_eq!(leader.sealed_positions(), follower.sealed_positions());
    for name in leader.live_file_names() {
        let n: u64 = name.split('.').next().unwrap().parse().unwrap();
        assert_eq!(n >> 32, 3, "{name} is not numbered by term 3");
    }
    let fstats = follower.stats();
    assert_eq!(
        (fstats.flushes, fstats.compactions, fstats.gc_runs),
        (0, 0, 0),
        "the follower ran jobs of its own"
    );
    let lstats = leader.stats();
    assert!(lstats.flushes > 0 && lstats.compactions > 0, "{lstats:?}");
    assert!(fstats.files_per_level.iter().skip(1).any(|&n| n > 0));
    assert!(contents(&follower) == model_without(end - 1, &edits));
    assert!(contents(&leader) == contents(&follower));
    // Nothing staged is left, and no file outside the live set.
    assert!(fs.list_dir(&follower.staging_dir()).unwrap().is_empty());
    let mut on_disk: Vec<String> = fs
        .list_dir(follower.path())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".sst") || n.ends_with(".blob"))
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, follower.live_file_names(), "orphan files");
    // Local jobs are refused: they would change one node's files alone.
    assert!(follower.flush().is_err());
    assert!(follower.compact_range(..).is_err());
    assert!(follower.collect_garbage().is_err());
}

#[test]
fn a_stale_edit_is_a_no_op_on_every_node_and_frees_the_leaders_job() {
    let fs = FaultFs::new(MemFs::new());
    let a = Db::open_for_log_installs("a", options(&fs)).unwrap();
    let b = Db::open_for_log_installs("b", options(&fs)).unwrap();
    apply(&a, 1, 100);
    apply(&b, 1, 100);
    // A deposed leader (term 1) prepared a flush of the memtable sealed at 50; the new leader
    // (term 2) prepared the same flush; the log holds the new leader's edit first.
    let old = a.prepare_flush(&mut numbers(1)).unwrap().unwrap();
    let new = b.prepare_flush(&mut numbers(2)).unwrap().unwrap();
    assert_eq!(old.input_memtables, vec![50]);
    ship(&fs, &b, &a, &new);
    for db in [&a, &b] {
        assert_eq!(
            db.install_edit(101, &new).unwrap(),
            InstallOutcome::Installed
        );
    }
    for db in [&a, &b] {
        assert!(!db.edit_is_current(&old));
        assert!(
            db.missing_outputs(&old).is_empty(),
            "a stale edit needs no file"
        );
        match db.install_edit(102, &old).unwrap() {
            InstallOutcome::Stale(why) => assert!(why.contains("memtable"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(db.install_counts().1, 1);
    }
    assert_eq!(live_set(&fs, &a), live_set(&fs, &b));
    // The deposed leader's outputs are gone; its memtable is free to prepare again (the next).
    for o in &old.outputs {
        assert!(a.edit_file_path(&o.name).is_none(), "{} stayed", o.name);
    }
    let next = a.prepare_flush(&mut numbers(1)).unwrap().unwrap();
    assert_eq!(next.input_memtables, vec![100]);
    // A damaged edit is stale too (every node reads the same bytes), never a panic.
    let mut bad = next.clone();
    bad.edit.truncate(3);
    assert!(matches!(
        b.install_edit(103, &bad).unwrap(),
        InstallOutcome::Stale(_)
    ));
    assert_eq!(contents(&a), model(100));
    assert_eq!(contents(&b), model(100));
}

/// A leader and a follower driven through the same log, and the values written.
struct Pair<'a> {
    fs: &'a FaultFs,
    leader: &'a Db,
    follower: &'a Db,
    next: Box<dyn FnMut() -> u64>,
    index: u64,
    want: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Pair<'_> {
    /// Puts the keys `gcNNN` for `n` in `0..200` where `pick(n)`, valued by `round`, then seals
    /// the memtable; then every flush and compaction the leader can prepare, shipped and
    /// installed on both.
    fn round(&mut self, round: u32, pick: impl Fn(u32) -> bool) {
        let (leader, follower) = (self.leader, self.follower);
        for n in (0..200).filter(|&n| pick(n)) {
            let (key, value) = (format!("gc{n:03}"), format!("{round}-{}", "v".repeat(400)));
            let mut b = WriteBatch::new();
            b.put(&key, &value);
            for db in [leader, follower] {
                db.apply_logged(self.index, &b).unwrap();
            }
            self.want.insert(key.into_bytes(), value.into_bytes());
            self.index += 1;
        }
        for db in [leader, follower] {
            db.seal_memtable(position(self.index)).unwrap();
        }
        self.index += 1;
        let mut jobs = Vec::new();
        while let Some(edit) = leader.prepare_flush(&mut self.next).unwrap() {
            jobs.push(edit);
        }
        while let Some(edit) = leader.prepare_compaction(&mut self.next).unwrap() {
            jobs.push(edit);
        }
        for edit in jobs {
            self.install(&edit, true);
        }
    }

    /// Ships `edit` and applies it on both at the next index: installed, or stale.
    fn install(&mut self, edit: &InstallEdit, installed: bool) {
        ship(self.fs, self.leader, self.follower, edit);
        for db in [self.leader, self.follower] {
            let outcome = db.install_edit(self.index, edit).unwrap();
            assert_eq!(
                outcome == InstallOutcome::Installed,
                installed,
                "{outcome:?}"
            );
        }
        self.index += 1;
    }
}

#[test]
fn a_gc_edit_applied_after_compactions_it_predates_gives_the_same_state_on_every_node() {
    let fs = FaultFs::new(MemFs::new());
    let options = |fs: &FaultFs| Options {
        gc_threshold: 0.3,
        ..options(fs)
    };
    let leader = Db::open_for_log_installs("leader", options(&fs)).unwrap();
    let follower = Db::open_for_log_installs("follower", options(&fs)).unwrap();
    let mut log = Pair {
        fs: &fs,
        leader: &leader,
        follower: &follower,
        next: Box::new(numbers(3)),
        index: 1,
        want: BTreeMap::new(),
    };
    // The first blob file: 200 values, half of them overwritten (and found dead by the
    // compaction of the three L0 files).
    log.round(1, |_| true);
    log.round(2, |n| n % 4 == 0);
    log.round(2, |n| n % 4 == 2);
    assert!(
        leader.stats().blob_garbage_bytes > 0,
        "{:?}",
        leader.stats()
    );
    let gc = leader
        .prepare_gc(&mut log.next)
        .unwrap()
        .unwrap_or_else(|| panic!("no blob garbage to collect: {:?}", leader.stats()));
    assert_eq!((gc.outputs.len(), gc.input_files.len()), (1, 1));
    assert!(gc.input_memtables.is_empty() && gc.flushed_upto.is_none());
    assert!(
        leader.prepare_gc(&mut log.next).unwrap().is_none(),
        "collected twice"
    );
    // While the edit travels, a compaction finds a quarter of the kept records dead.
    log.round(3, |n| n % 8 == 1);
    log.round(3, |n| n % 16 == 3);
    log.round(3, |n| n % 16 == 11);
    log.install(&gc, true);
    let (lstats, fstats) = (leader.stats(), follower.stats());
    assert_eq!((lstats.gc_runs, fstats.gc_runs), (1, 0));
    // The records that died in between are the new file's garbage, on both nodes alike.
    assert!(lstats.blob_garbage_bytes > 0, "{lstats:?}");
    assert_eq!(
        (
            lstats.blob_live_bytes,
            lstats.blob_garbage_bytes,
            lstats.blob_files
        ),
        (
            fstats.blob_live_bytes,
            fstats.blob_garbage_bytes,
            fstats.blob_files
        )
    );
    assert_eq!(live_set(&fs, &leader), live_set(&fs, &follower));
    // The old physical file left the live set; its retired copy stays fetchable for nodes
    // that replay older edits.
    let old = format!("{:06}.blob", gc.input_files[0]);
    assert!(!follower.live_file_names().contains(&old), "{old}");
    assert!(follower.edit_file_path(&old).is_some(), "{old} not retired");
    // Applied again (a node replaying its log), the edit is stale: its input is gone.
    log.install(&gc, false);
    let want = std::mem::take(&mut log.want);
    drop(log);
    assert!(contents(&leader) == want && contents(&follower) == want);
    // Both MANIFESTs read back to the same state.
    drop((leader, follower));
    for name in ["leader", "follower"] {
        let db = Db::open_for_log_installs(name, options(&fs)).unwrap();
        let s = db.stats();
        assert_eq!(
            (s.blob_live_bytes, s.blob_garbage_bytes),
            (lstats.blob_live_bytes, lstats.blob_garbage_bytes),
            "{name}"
        );
        assert!(contents(&db) == want, "{name}");
    }
}

#[test]
fn a_missing_file_stops_the_install_until_it_arrives_and_a_damaged_one_is_refused() {
    let fs = FaultFs::new(MemFs::new());
    let leader = Db::open_for_log_installs("leader", options(&fs)).unwrap();
    let follower = Db::open_for_log_installs("follower", options(&fs)).unwrap();
    apply(&leader, 1, 60);
    apply(&follower, 1, 60);
    let edit = leader.prepare_flush(&mut numbers(1)).unwrap().unwrap();
    assert!(!edit.outputs.is_empty());
    assert_eq!(follower.missing_outputs(&edit), edit.outputs);
    assert!(follower.install_edit(61, &edit).is_err());
    // Damaged in staging: refused, nothing changed.
    ship(&fs, &leader, &follower, &edit);
    let o = &edit.outputs[0];
    let staged = follower.staging_dir().join(&o.name);
    let mut data = fs.read_all(&staged).unwrap();
    data[0] ^= 1;
    fs.remove_file(&staged).unwrap();
    let mut f = fs.create(&staged).unwrap();
    f.append(&data).unwrap();
    f.sync().unwrap();
    assert!(follower.install_edit(61, &edit).is_err());
    assert_eq!(follower.sealed_positions(), vec![50]);
    ship(&fs, &leader, &follower, &edit);
    assert_eq!(
        follower.install_edit(61, &edit).unwrap(),
        InstallOutcome::Installed
    );
    assert_eq!(follower.sealed_positions(), Vec::<u64>::new());
    assert_eq!(follower.flushed_position().unwrap().index, 50);
    assert_eq!(contents(&follower), model(60));
}

#[test]
fn a_follower_writes_a_flush_itself_when_it_cannot_get_the_files() {
    let fs = FaultFs::new(MemFs::new());
    let leader = Db::open_for_log_installs("leader", options(&fs)).unwrap();
    let follower = Db::open_for_log_installs("follower", options(&fs)).unwrap();
    apply(&leader, 1, 60);
    apply(&follower, 1, 60);
    let edit = leader.prepare_flush(&mut numbers(4)).unwrap().unwrap();
    assert!(
        follower.write_flush_outputs(&edit).unwrap(),
        "same memtable, same bytes"
    );
    assert!(follower.missing_outputs(&edit).is_empty());
    for db in [&leader, &follower] {
        assert_eq!(
            db.install_edit(61, &edit).unwrap(),
            InstallOutcome::Installed
        );
    }
    assert_eq!(follower.install_counts().2, 1);
    assert_eq!(live_set(&fs, &leader), live_set(&fs, &follower));
    assert_eq!(follower.stats().flushes, 0);
}

#[test]
fn staging_is_cleared_at_open_and_a_restart_keeps_installed_edits() {
    let fs = FaultFs::new(MemFs::new());
    let (files, edits) = {
        let leader = Db::open_for_log_installs("leader", options(&fs)).unwrap();
        let follower = Db::open_for_log_installs("follower", options(&fs)).unwrap();
        let (_, edits) = run(&fs, &leader, &follower, 7, 400);
        // A shipped file whose edit never came.
        let mut f = fs
            .create(&follower.staging_dir().join("999999.sst"))
            .unwrap();
        f.append(b"orphan").unwrap();
        f.sync().unwrap();
        (live_set(&fs, &follower), edits)
    };
    let follower = Db::open_for_log_installs("follower", options(&fs)).unwrap();
    assert!(fs.list_dir(&follower.staging_dir()).unwrap().is_empty());
    assert_eq!(live_set(&fs, &follower), files);
    // Memtables not flushed are the log's to replay: what the files hold is a prefix.
    let at = follower.flushed_position().unwrap().index;
    assert!(contents(&follower) == model_without(at, &edits));
}

#[test]
fn a_power_loss_during_an_install_keeps_either_the_old_or_the_new_state() {
    let mut outcomes = (0, 0);
    for cut in 0..12u64 {
        let leader_fs = FaultFs::new(MemFs::new());
        let fs = FaultFs::new(MemFs::new());
        let leader = Db::open_for_log_installs("leader", options(&leader_fs)).unwrap();
        let follower = Db::open_for_log_installs("follower", options(&fs)).unwrap();
        apply(&leader, 1, 60);
        apply(&follower, 1, 60);
        let edit = leader.prepare_flush(&mut numbers(2)).unwrap().unwrap();
        fs.create_dir_all(&follower.staging_dir()).unwrap();
        for o in &edit.outputs {
            let bytes = leader_fs
                .read_all(&leader.edit_file_path(&o.name).unwrap())
                .unwrap();
            let mut f = fs.create(&follower.staging_dir().join(&o.name)).unwrap();
            f.append(&bytes).unwrap();
            f.sync().unwrap();
        }
        fs.sync_dir(&follower.staging_dir()).unwrap();
        fs.cut_power_after(cut);
        let installed = follower.install_edit(61, &edit).is_ok();
        drop(follower);
        let after = fs.crash_clone();
        let db = Db::open_for_log_installs("follower", options(&after)).unwrap();
        match db.flushed_position().map(|p| p.index) {
            Some(50) => {
                outcomes.1 += 1;
                // The MANIFEST names the files: they are all there, whole.
                for o in &edit.outputs {
                    let data = after.read_all(&db.path().join(&o.name)).unwrap();
                    assert_eq!(crc32c::crc32c(&data), o.crc32c, "cut {cut}");
                }
                assert_eq!(contents(&db), model(50), "cut {cut}");
            }
            None => {
                assert!(!installed, "cut {cut}: an install that returned is lost");
                outcomes.0 += 1;
                // The log replays from the start; the edit is fetched again.
                apply(&db, 1, 60);
                assert_eq!(db.missing_outputs(&edit), edit.outputs, "cut {cut}");
            }
            other => panic!("cut {cut}: flushed at {other:?}"),
        }
        assert!(after.list_dir(&db.staging_dir()).unwrap().is_empty());
    }
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
}
