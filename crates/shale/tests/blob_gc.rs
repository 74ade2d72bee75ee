//! Key-value separation and blob garbage collection, end to end through the public API.
//!
//! What is pinned here (DESIGN.md section 3, issue 4):
//! - GC never brings a deleted or overwritten value back, in both GC modes and both engines;
//! - records a live snapshot can read are not garbage, and an open iterator keeps the physical
//!   blob file it reads until it is dropped;
//! - a damaged blob record is a `Corruption` error naming the file and the record's offset;
//! - garbage accounting is exact (recomputed here from docs/format/blob.md) and survives reopen;
//! - scans and snapshot scans stay exact while a background GC worker runs beside a writer;
//! - no obsolete physical blob file is left on disk once no reader needs it, and closing in the
//!   middle of background GC leaves no partial output;
//! - a store collected in Offload mode and reopened in Titan mode never reverts a value;
//! - `min_blob_size` is a closed lower bound, and `NO_BLOB_FILES` turns separation off.
//!
//! Everything runs on the in-memory file system. `SHALE_GC_STRESS_OPS` (default 5000) sets the
//! writer's operations in the concurrent test, for a longer soak.

mod common;

use common::record_size;
use shale::fs::MemFs;
use shale::{Db, ErrorKind, GcEngineKind, GcMode, Options, NO_BLOB_FILES};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const DIR: &str = "/blobdb";
const MIN_BLOB: usize = 64;

/// Small blob files and no automatic flushes: the tests decide when data moves.
fn base_options(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 4 << 20,
        min_blob_size: MIN_BLOB,
        blob_file_size: 1024,
        block_size: 512,
        gc_threshold: 0.3,
        gc_engine: GcEngineKind::Inline,
        background_threads: 1,
        level0_compaction_trigger: 8,
        level0_slowdown_trigger: 16,
        level0_stop_trigger: 24,
        ..Options::default()
    }
}

/// Options under which no blob file ever qualifies for GC, so garbage stays where compaction
/// put it (a file is removed by the edit that kills its last record, so a ratio of 1 is never
/// reached, and the space-amplification escalation is out of reach).
fn no_gc_options(fs: &MemFs) -> Options {
    Options {
        gc_threshold: 1.0,
        gc_space_amp_target: 1e12,
        ..base_options(fs)
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A value that names its key and generation, `len` bytes long (at least the label).
fn value(i: u32, generation: u32, len: usize) -> Vec<u8> {
    let mut v = format!("k{i}@g{generation}:").into_bytes();
    let fill = (i as usize * 31 + generation as usize * 7) % 26;
    while v.len() < len {
        v.push(b'a' + ((v.len() + fill) % 26) as u8);
    }
    v
}

/// A deterministic length: mostly separated values, some inline ones, some exactly at the
/// threshold, and a big one now and then (a 3-byte varint length, a blob file of its own).
fn value_len(i: u32, generation: u32) -> usize {
    if i % 61 == 7 {
        return 20_000;
    }
    let h = (i.wrapping_mul(2_654_435_761) ^ generation.wrapping_mul(40_503)) as usize;
    match h % 23 {
        0 => 20,
        1 => MIN_BLOB - 1,
        2 => MIN_BLOB,
        _ => MIN_BLOB + h % 300,
    }
}

fn show(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(32)]).into_owned();
    if bytes.len() > 32 {
        format!("{s}...({} bytes)", bytes.len())
    } else {
        s
    }
}

/// Compares a scan with the model and names the first difference (values can be large).
fn assert_same(got: &[(Vec<u8>, Vec<u8>)], want: &Model, what: &str) {
    for (i, ((gk, gv), (wk, wv))) in got.iter().zip(want.iter()).enumerate() {
        assert!(
            gk == wk && gv == wv,
            "{what}: entry {i}: got {} = {}, want {} = {}",
            show(gk),
            show(gv),
            show(wk),
            show(wv)
        );
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: scan returned {} entries, the model has {}",
        got.len(),
        want.len()
    );
}

/// Every key of `universe` reads its model value, and forward and backward scans equal the model.
fn check(db: &Db, model: &Model, universe: u32, what: &str) {
    for i in 0..universe {
        let k = key(i);
        let got = db
            .get(&k)
            .unwrap_or_else(|e| panic!("{what}: get {}: {e}", show(&k)));
        assert!(
            got.as_ref() == model.get(&k),
            "{what}: get {}: got {:?}, want {:?}",
            show(&k),
            got.as_deref().map(show),
            model.get(&k).map(|v| show(v))
        );
    }
    let forward: Vec<_> = db
        .iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{what}: scan: {e}")))
        .collect();
    assert_same(&forward, model, &format!("{what}: forward scan"));
    let mut backward: Vec<_> = db
        .iter()
        .rev()
        .map(|r| r.unwrap_or_else(|e| panic!("{what}: reverse scan: {e}")))
        .collect();
    backward.reverse();
    assert_same(&backward, model, &format!("{what}: reverse scan"));
}

fn put(db: &Db, model: &mut Model, k: Vec<u8>, v: Vec<u8>) {
    db.put(&k, &v).unwrap();
    model.insert(k, v);
}

fn delete(db: &Db, model: &mut Model, k: Vec<u8>) {
    db.delete(&k).unwrap();
    model.remove(&k);
}

/// Compacts everything into the bottom level, even when it is already there: two tombstones for
/// keys outside the data span the whole key space, so the L0 -> L1 compaction takes every file.
fn full_compaction(db: &Db) {
    db.delete(b"\x00").unwrap();
    db.delete(b"\xff\xff\xff\xff").unwrap();
    db.compact_range(..).unwrap();
}

fn blob_files(fs: &MemFs) -> Vec<PathBuf> {
    fs.list_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "blob"))
        .collect()
}

fn blob_bytes_on_disk(fs: &MemFs) -> u64 {
    blob_files(fs)
        .iter()
        .map(|p| fs.read_file(p).map_or(0, |d| d.len() as u64))
        .sum()
}

fn reopen(db: Db, options: &Options) -> Db {
    db.close().unwrap();
    Db::open(DIR, options.clone()).unwrap()
}

// ---------------------------------------------------------------------------------------------

/// After `collect_garbage` no blob file has a garbage ratio at or over `threshold`, so the total
/// garbage is under that share of the record bytes.
fn assert_gc_done(s: &shale::Stats, threshold: f64, what: &str) {
    let records = s.blob_live_bytes + s.blob_garbage_bytes;
    assert!(
        (s.blob_garbage_bytes as f64) < threshold * records as f64 || s.blob_garbage_bytes == 0,
        "{what}: {} garbage bytes of {records} left after GC",
        s.blob_garbage_bytes
    );
}

fn never_resurrects(mode: GcMode, engine: GcEngineKind) {
    let what = format!("{mode:?}/{engine:?}");
    let fs = MemFs::new();
    let options = Options {
        gc_mode: mode,
        gc_engine: engine,
        gc_bytes_per_sec: 0,
        ..base_options(&fs)
    };
    const N: u32 = 400;
    let mut db = Db::open(DIR, options.clone()).unwrap();
    let mut model = Model::new();
    for i in 0..N {
        put(&db, &mut model, key(i), value(i, 0, value_len(i, 0)));
    }
    db.flush().unwrap();
    let first_files = blob_files(&fs).len();
    assert!(
        first_files >= 20,
        "{what}: expected many blob files, got {first_files}"
    );
    // Round 1: delete a fifth, overwrite a fifth.
    for i in 0..N {
        match i % 5 {
            0 => delete(&db, &mut model, key(i)),
            1 => put(&db, &mut model, key(i), value(i, 1, value_len(i, 1))),
            _ => {}
        }
    }
    db.flush().unwrap();
    // Round 2: delete some of the overwritten keys again, overwrite another fifth, and bring a
    // few deleted keys back with new values (a new value is not a resurrection).
    for i in 0..N {
        match i % 5 {
            1 if i % 3 == 0 => delete(&db, &mut model, key(i)),
            2 => put(&db, &mut model, key(i), value(i, 2, value_len(i, 2))),
            0 if i % 7 == 0 => put(&db, &mut model, key(i), value(i, 3, value_len(i, 3))),
            _ => {}
        }
    }
    db.flush().unwrap();
    db.compact_range(..).unwrap();
    let before = db.stats();
    assert!(
        before.blob_garbage_bytes > 0 || before.gc_runs > 0,
        "{what}: compaction recorded no garbage"
    );
    check(&db, &model, N, &format!("{what}: after compaction"));

    db.collect_garbage().unwrap();
    let after_gc = db.stats();
    assert!(after_gc.gc_runs > 0, "{what}: no GC ran: {after_gc:?}");
    assert!(after_gc.gc_bytes_written > 0, "{what}: GC wrote nothing");
    check(&db, &model, N, &format!("{what}: after GC"));
    if mode == GcMode::Offload {
        // The background worker may have started before `before` was read; what must hold is
        // that no file is left over the threshold: the garbage left is at most its share.
        assert_gc_done(&after_gc, options.gc_threshold, &what);
    }
    // Titan's old files lose their last references only when compaction drops them.
    full_compaction(&db);
    db.collect_garbage().unwrap();
    let settled = db.stats();
    if mode == GcMode::Offload {
        assert_gc_done(&settled, options.gc_threshold, &what);
    }
    check(&db, &model, N, &format!("{what}: after GC and compaction"));

    db = reopen(db, &options);
    check(&db, &model, N, &format!("{what}: after reopen"));
    // More history on top of the rewritten files, then compaction and GC again.
    for i in 0..N {
        match i % 5 {
            2 | 3 => delete(&db, &mut model, key(i)),
            4 => put(&db, &mut model, key(i), value(i, 4, value_len(i, 4))),
            _ => {}
        }
    }
    full_compaction(&db);
    db.collect_garbage().unwrap();
    full_compaction(&db);
    db.collect_garbage().unwrap();
    check(&db, &model, N, &format!("{what}: after the second GC"));
    assert!(db.stats().gc_runs > 0);
    db = reopen(db, &options);
    check(&db, &model, N, &format!("{what}: after the last reopen"));
    db.close().unwrap();
}

#[test]
fn gc_never_resurrects_a_deleted_key() {
    for mode in [GcMode::Offload, GcMode::Titan] {
        for engine in [GcEngineKind::Inline, GcEngineKind::Background] {
            never_resurrects(mode, engine);
        }
    }
}

// ---------------------------------------------------------------------------------------------

#[test]
fn a_blob_file_pinned_by_an_open_snapshot_is_not_deleted() {
    let fs = MemFs::new();
    let options = base_options(&fs);
    const N: u32 = 240;
    let db = Db::open(DIR, options.clone()).unwrap();
    let mut model = Model::new();
    // Generation 0 of every key; generation 1 of the even keys, both before the snapshot.
    for i in 0..N {
        put(
            &db,
            &mut model,
            key(i),
            value(i, 0, 100 + (i as usize % 90)),
        );
    }
    db.flush().unwrap();
    let gen0_files = blob_files(&fs);
    for i in (0..N).step_by(2) {
        put(
            &db,
            &mut model,
            key(i),
            value(i, 1, 120 + (i as usize % 70)),
        );
    }
    db.flush().unwrap();
    let gen1_files: Vec<PathBuf> = blob_files(&fs)
        .into_iter()
        .filter(|p| !gen0_files.contains(p))
        .collect();
    let snap = db.snapshot();
    let frozen = model.clone();
    // After the snapshot: delete a third, overwrite a third, leave a third.
    for i in 0..N {
        match i % 3 {
            0 => delete(&db, &mut model, key(i)),
            1 => put(&db, &mut model, key(i), value(i, 2, 90 + (i as usize % 50))),
            _ => {}
        }
    }
    db.flush().unwrap();
    db.compact_range(..).unwrap();
    // The generation-0 records of the even keys are dead for everyone (shadowed before the
    // snapshot): that garbage is real and GC may take it (the background worker may already be
    // at it). Everything the snapshot or the current view reads is live, exactly.
    let gen0 = |i: u32| record_size(key(i).len(), 100 + (i as usize % 90));
    let gen1 = |i: u32| record_size(key(i).len(), 120 + (i as usize % 70));
    let gen2 = |i: u32| record_size(key(i).len(), 90 + (i as usize % 50));
    let even_gen0: u64 = (0..N).step_by(2).map(gen0).sum();
    let live_held: u64 = (0..N)
        .map(|i| {
            let old = if i % 2 == 0 { gen1(i) } else { gen0(i) };
            old + if i % 3 == 1 { gen2(i) } else { 0 }
        })
        .sum();
    let s = db.stats();
    assert!(
        s.blob_garbage_bytes <= even_gen0,
        "only records shadowed before the snapshot are garbage: {} > {even_gen0}",
        s.blob_garbage_bytes
    );
    assert_eq!(
        s.blob_live_bytes, live_held,
        "every record the snapshot or the current view reads is live"
    );
    db.collect_garbage().unwrap();
    assert!(db.stats().gc_runs > 0, "the half-dead files were collected");
    full_compaction(&db);
    db.collect_garbage().unwrap();
    assert_eq!(
        db.stats().blob_live_bytes,
        live_held,
        "GC and compaction with the snapshot held kill nothing it reads"
    );
    let snap_reads = |what: &str| {
        for i in 0..N {
            let k = key(i);
            let got = snap
                .get(&k)
                .unwrap_or_else(|e| panic!("{what}: snapshot get {}: {e}", show(&k)));
            assert!(
                got.as_ref() == frozen.get(&k),
                "{what}: snapshot get {} = {:?}",
                show(&k),
                got.as_deref().map(show)
            );
        }
        let scan: Vec<_> = snap
            .iter()
            .map(|r| r.unwrap_or_else(|e| panic!("{what}: snapshot scan: {e}")))
            .collect();
        assert_same(&scan, &frozen, &format!("{what}: snapshot scan"));
        let back: Vec<_> = snap.iter().rev().map(|r| r.unwrap()).collect();
        assert_eq!(back.len(), frozen.len(), "{what}: reverse snapshot scan");
    };
    snap_reads("snapshot held across compaction and GC");
    check(&db, &model, N, "current view with a snapshot held");
    assert!(
        db.stats().blob_garbage_bytes < even_gen0,
        "GC reclaimed the garbage it was allowed to"
    );
    // Two thirds of the generation-1 records are read by the snapshot only; none is garbage, so
    // their files are neither rewritten nor deleted while it lives.
    for p in &gen1_files {
        assert!(
            fs.read_file(p).is_some(),
            "{} was deleted while a snapshot reads it",
            p.display()
        );
    }
    let runs_held = db.stats().gc_runs;
    let disk_held = blob_bytes_on_disk(&fs);

    drop(snap);
    full_compaction(&db);
    let live_now: u64 = (0..N)
        .map(|i| match i % 3 {
            0 => 0,
            1 => gen2(i),
            _ if i % 2 == 0 => gen1(i),
            _ => gen0(i),
        })
        .sum();
    let released = db.stats();
    assert_eq!(
        released.blob_live_bytes, live_now,
        "releasing the snapshot turns the records only it read into garbage"
    );
    db.collect_garbage().unwrap();
    full_compaction(&db);
    db.collect_garbage().unwrap();
    let reclaimed = db.stats();
    assert!(
        reclaimed.gc_runs > runs_held,
        "GC collected the files whose records only the snapshot read"
    );
    assert_eq!(reclaimed.blob_live_bytes, live_now);
    let disk_after = blob_bytes_on_disk(&fs);
    assert!(
        disk_after < disk_held,
        "blob bytes on disk shrink once the snapshot is gone ({disk_held} -> {disk_after})"
    );
    // Every file the snapshot held is now two-thirds garbage: each was rewritten.
    let left: Vec<_> = gen0_files
        .iter()
        .chain(&gen1_files)
        .filter(|p| fs.read_file(p).is_some())
        .collect();
    assert!(
        left.is_empty(),
        "blob files outlived the snapshot that pinned them: {left:?}"
    );
    check(&db, &model, N, "after the snapshot was released");
    let db = reopen(db, &options);
    check(&db, &model, N, "after reopen");
}

// ---------------------------------------------------------------------------------------------

#[test]
fn an_open_iterator_keeps_the_old_physical_blob_file() {
    let fs = MemFs::new();
    let options = base_options(&fs);
    const N: u32 = 200;
    let db = Db::open(DIR, options.clone()).unwrap();
    let mut model = Model::new();
    for i in 0..N {
        put(&db, &mut model, key(i), value(i, 0, 150));
    }
    db.flush().unwrap();
    let originals = blob_files(&fs);
    assert!(originals.len() >= 10);
    let iter_model = model.clone();
    // Overwrite the even keys: every original file becomes half garbage once compacted.
    for i in (0..N).step_by(2) {
        put(&db, &mut model, key(i), value(i, 1, 150));
    }
    db.flush().unwrap();
    let before_gc: Vec<PathBuf> = blob_files(&fs);
    // An iterator over the store as of the second flush, half consumed.
    let mut it = db.iter();
    let mut seen = Vec::new();
    for _ in 0..N / 4 {
        seen.push(it.next().unwrap().unwrap());
    }
    let mut it_model = iter_model.clone();
    for i in (0..N).step_by(2) {
        it_model.insert(key(i), value(i, 1, 150));
    }

    db.compact_range(..).unwrap();
    db.collect_garbage().unwrap();
    let stats = db.stats();
    assert!(stats.gc_runs > 0, "GC rewrote nothing: {stats:?}");
    let now = blob_files(&fs);
    let new_physical: Vec<_> = now.iter().filter(|p| !before_gc.contains(p)).collect();
    assert!(
        !new_physical.is_empty(),
        "GC wrote no new physical blob file"
    );
    for p in &originals {
        assert!(
            fs.read_file(p).is_some(),
            "{} was deleted while an open iterator can still read it",
            p.display()
        );
    }
    // New reads go through the new placement.
    check(&db, &model, N, "after GC, with an iterator open");
    // The iterator finishes with the values it started with.
    seen.extend(it.by_ref().map(|r| r.expect("iterator across GC")));
    assert_same(&seen, &it_model, "iterator opened before GC");
    drop(it);

    // Any later install deletes what no reader needs.
    db.put(b"zz-after", b"x").unwrap();
    model.insert(b"zz-after".to_vec(), b"x".to_vec());
    db.flush().unwrap();
    full_compaction(&db);
    db.collect_garbage().unwrap();
    for p in &originals {
        assert!(
            fs.read_file(p).is_none(),
            "{} outlived the iterator that pinned it",
            p.display()
        );
    }
    let db = reopen(db, &options);
    check(&db, &model, N, "after reopen");
}

/// Without a reader left, the files on disk after `collect_garbage` are exactly the physical
/// files of the version, and each holds only live records: nothing obsolete waits for some
/// later, unrelated flush or compaction to be deleted.
/// Opens a store with `n` keys of 150-byte values, flushed, then every other key overwritten and
/// everything compacted: blob files half garbage, GC's work ready.
fn open_with_half_overwritten(options: &Options, n: u32) -> (Db, Model) {
    let db = Db::open(DIR, options.clone()).unwrap();
    let mut model = Model::new();
    for i in 0..n {
        put(&db, &mut model, key(i), value(i, 0, 150));
    }
    db.flush().unwrap();
    for i in (0..n).step_by(2) {
        put(&db, &mut model, key(i), value(i, 1, 20));
    }
    db.compact_range(..).unwrap();
    (db, model)
}

#[test]
fn no_obsolete_physical_blob_file_outlives_collect_garbage() {
    let fs = MemFs::new();
    let options = Options {
        gc_threshold: f64::MIN_POSITIVE,
        ..base_options(&fs)
    };
    const N: u32 = 120;
    let (db, model) = open_with_half_overwritten(&options, N);
    db.collect_garbage().unwrap();
    let s = db.stats();
    assert!(s.gc_runs > 0 && s.blob_garbage_bytes == 0, "{s:?}");
    let mut stale = Vec::new();
    for f in blob_files(&fs) {
        let data = fs.read_file(&f).unwrap();
        let dead: Vec<String> = records(&data)
            .iter()
            .filter(|r| {
                let start = r.offset as usize + r.len - r.value_len;
                model.get(&r.key).map(Vec::as_slice) != Some(&data[start..start + r.value_len])
            })
            .map(|r| show(&r.key))
            .collect();
        if !dead.is_empty() {
            stale.push(format!("{} holds dead records of {dead:?}", f.display()));
        }
    }
    assert!(
        stale.is_empty() && blob_files(&fs).len() as u64 == s.blob_files,
        "{} blob files on disk, {} in the version; {stale:?}",
        blob_files(&fs).len(),
        s.blob_files
    );
    check(&db, &model, N, "after GC");
}

/// Closing the database while background GC tasks are queued and copying (slowly, under a small
/// I/O budget) abandons them cleanly: nothing is lost, and the next open finds exactly one
/// physical file per logical blob file (partial outputs are removed).
#[test]
fn closing_while_background_gc_tasks_run_loses_nothing_and_leaves_no_partial_output() {
    let fs = MemFs::new();
    let options = Options {
        gc_engine: GcEngineKind::Background,
        gc_threads: 1,
        gc_bytes_per_sec: 64 << 10,
        ..base_options(&fs)
    };
    const N: u32 = 300;
    let (db, model) = open_with_half_overwritten(&options, N);
    // The background worker has submitted GC tasks by now or will in a moment; close mid-copy.
    std::thread::sleep(std::time::Duration::from_millis(30));
    let s = db.stats();
    assert!(
        s.gc_runs < s.blob_files,
        "GC finished before the close ({} runs, {} files): the budget is too large",
        s.gc_runs,
        s.blob_files
    );
    db.close().unwrap();

    let db = Db::open(DIR, no_gc_options(&fs)).unwrap();
    assert_eq!(
        blob_files(&fs).len() as u64,
        db.stats().blob_files,
        "one physical file per logical blob file after reopen"
    );
    check(&db, &model, N, "after closing mid-GC");
    let db = reopen(
        db,
        &Options {
            gc_bytes_per_sec: 0,
            ..options
        },
    );
    db.collect_garbage().unwrap();
    assert!(db.stats().gc_runs > 0);
    check(&db, &model, N, "after GC on reopen");
}

/// The GC mode is an option, so a store collected in Offload mode can be reopened in Titan mode.
/// Titan GC must then find each live record through the survivors bitmap Offload left: the
/// record at a physical index is not the record of that ordinal. Here one blob file holds two
/// versions of `k01` (a snapshot kept the old one through Offload GC), and Titan GC must copy the
/// new one.
#[test]
fn titan_gc_after_offload_gc_never_brings_back_an_overwritten_value() {
    let fs = MemFs::new();
    let options = |mode| Options {
        gc_mode: mode,
        blob_file_size: 1 << 20,
        ..base_options(&fs)
    };
    let big = |tag: &str| {
        let mut v = tag.as_bytes().to_vec();
        v.resize(100, b'.');
        v
    };
    let mut model = Model::new();
    let db = Db::open(DIR, options(GcMode::Offload)).unwrap();
    put(&db, &mut model, b"k01".to_vec(), big("OLD"));
    let snap = db.snapshot();
    put(&db, &mut model, b"k01".to_vec(), big("NEW"));
    put(&db, &mut model, b"k00".to_vec(), big("X"));
    for i in 2..10 {
        put(
            &db,
            &mut model,
            format!("k{i:02}").into_bytes(),
            big(&format!("v{i}")),
        );
    }
    // One blob file: k00, k01 NEW, k01 OLD (kept for the snapshot), k02..k09.
    db.flush().unwrap();
    assert_eq!(db.stats().blob_files, 1);
    for k in ["k00", "k02", "k03", "k04"] {
        put(&db, &mut model, k.as_bytes().to_vec(), b"inline".to_vec());
    }
    full_compaction(&db);
    db.collect_garbage().unwrap();
    assert!(db.stats().gc_runs > 0, "Offload GC rewrote the file");
    assert_eq!(snap.get("k01").unwrap(), Some(big("OLD")));
    drop(snap);
    db.close().unwrap();

    let db = Db::open(DIR, options(GcMode::Titan)).unwrap();
    check_long(&db, &model, "reopened in Titan mode");
    for k in ["k06", "k07", "k08"] {
        put(&db, &mut model, k.as_bytes().to_vec(), b"inline".to_vec());
    }
    full_compaction(&db);
    db.collect_garbage().unwrap();
    check_long(&db, &model, "after Titan GC of a file Offload rewrote");
    full_compaction(&db);
    db.collect_garbage().unwrap();
    let db = reopen(db, &options(GcMode::Titan));
    check_long(&db, &model, "after Titan GC and reopen");
}

// ---------------------------------------------------------------------------------------------

/// A record of a blob file: where it starts, its key, its value's length and its own length.
struct Record {
    offset: u64,
    key: Vec<u8>,
    value_len: usize,
    len: usize,
}

fn read_varint(data: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = data[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

/// Parses the records of a blob file per docs/format/blob.md (header 24 bytes, records back to
/// back up to `offsets_offset`, which the footer's first 8 bytes give).
fn records(data: &[u8]) -> Vec<Record> {
    let footer = data.len() - 52;
    let end = u64::from_le_bytes(data[footer..footer + 8].try_into().unwrap()) as usize;
    let mut at = 24;
    let mut out = Vec::new();
    while at < end {
        let start = at;
        at += 4;
        let key_len = read_varint(data, &mut at) as usize;
        let value_len = read_varint(data, &mut at) as usize;
        let key = data[at..at + key_len].to_vec();
        at += key_len + value_len;
        out.push(Record {
            offset: start as u64,
            key,
            value_len,
            len: at - start,
        });
    }
    assert_eq!(at, end, "records tile the record area");
    out
}

#[test]
fn a_corrupt_blob_record_is_a_corruption_error_naming_file_and_offset() {
    let base = MemFs::new();
    const N: u32 = 60;
    let mut model = Model::new();
    {
        let db = Db::open(DIR, base_options(&base)).unwrap();
        for i in 0..N {
            put(&db, &mut model, key(i), value(i, 0, 200));
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    let files = blob_files(&base);
    assert!(files.len() >= 3, "{files:?}");
    let file = &files[files.len() / 2];
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let data = base.read_file(file).unwrap();
    let recs = records(&data);
    assert!(recs.len() >= 3);
    let victim = &recs[1];
    // Every part of the record: checksum, both lengths, key, first and last value byte.
    let positions = [
        0,
        3,
        4,
        5,
        6,
        6 + victim.key.len() / 2,
        victim.len - 200,
        victim.len - 1,
    ];
    for rel in positions {
        let fs = base.crash_clone();
        fs.corrupt_byte(file, victim.offset + rel as u64, 0x40)
            .unwrap();
        let db = Db::open(DIR, base_options(&fs)).unwrap();
        let err = db
            .get(&victim.key)
            .expect_err("a damaged blob record was returned as data");
        assert_eq!(err.kind(), ErrorKind::Corruption, "byte {rel}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&name),
            "byte {rel}: error does not name {name}: {msg}"
        );
        assert!(
            msg.contains(&format!("offset {}", victim.offset)),
            "byte {rel}: error does not name offset {}: {msg}",
            victim.offset
        );
        // Every other key still reads, in this file and elsewhere.
        for (k, v) in &model {
            if *k == victim.key {
                continue;
            }
            assert_eq!(
                db.get(k).unwrap().as_ref(),
                Some(v),
                "byte {rel}: {}",
                show(k)
            );
        }
        // A scan reports the damage instead of skipping or inventing the value.
        let scan: Result<Vec<_>, _> = db.iter().collect();
        let e = scan.expect_err("a scan over a damaged record succeeded");
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        db.close().unwrap();
    }

    // GC never copies a damaged record into a new file: overwrite the victim's neighbours so
    // that its file qualifies, collect, and the damage is still reported, never a wrong value.
    let fs = base.crash_clone();
    fs.corrupt_byte(file, victim.offset + victim.len as u64 - 1, 0x40)
        .unwrap();
    let db = Db::open(DIR, base_options(&fs)).unwrap();
    for r in recs.iter().filter(|r| r.key != victim.key) {
        db.put(&r.key, b"small now").unwrap();
        model.insert(r.key.clone(), b"small now".to_vec());
    }
    db.compact_range(..).unwrap();
    db.collect_garbage()
        .expect("a failed GC task does not fail the database");
    let err = db.get(&victim.key).expect_err("damage survived GC as data");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    for (k, v) in &model {
        if *k != victim.key {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{}", show(k));
        }
    }
    db.put(b"still-writable", b"yes").unwrap();
    assert_eq!(db.get(b"still-writable").unwrap(), Some(b"yes".to_vec()));
}

// ---------------------------------------------------------------------------------------------

#[test]
fn garbage_accounting_is_exact_and_survives_reopen() {
    let fs = MemFs::new();
    let options = no_gc_options(&fs);
    const N: u32 = 300;
    let mut db = Db::open(DIR, options.clone()).unwrap();
    let mut model = Model::new();
    // Key lengths vary too, so both varints of a record vary.
    let long_key = |i: u32| {
        let mut k = key(i);
        k.extend(std::iter::repeat_n(b'-', (i % 5) as usize * 40));
        k
    };
    for i in 0..N {
        put(&db, &mut model, long_key(i), value(i, 0, value_len(i, 0)));
    }
    db.flush().unwrap();
    let separated_gen0: u64 = (0..N)
        .filter(|&i| value_len(i, 0) >= MIN_BLOB)
        .map(|i| record_size(long_key(i).len(), value_len(i, 0)))
        .sum();
    assert_eq!(
        db.stats().blob_live_bytes,
        separated_gen0,
        "live bytes after the first flush are the separated records"
    );
    let gen0_files = blob_files(&fs);

    // Overwrite every key once. Every generation-0 record dies, so every generation-0 file is
    // dropped whole by the compaction edit (its bytes are gone, not garbage).
    for i in 0..N {
        put(&db, &mut model, long_key(i), value(i, 1, value_len(i, 1)));
    }
    db.flush().unwrap();
    let gen1_files: Vec<PathBuf> = blob_files(&fs)
        .into_iter()
        .filter(|p| !gen0_files.contains(p))
        .collect();
    // Then overwrite the even keys with inline values: the generation-1 files become partly
    // dead. The expected accounting is computed from the files' bytes, parsed per
    // docs/format/blob.md: a file whose every record died is removed and counts nothing.
    let even: std::collections::HashSet<Vec<u8>> = (0..N).step_by(2).map(long_key).collect();
    let (mut expected_garbage, mut expected_live, mut surviving_files) = (0u64, 0u64, 0u64);
    for f in &gen1_files {
        let recs = records(&fs.read_file(f).unwrap());
        let mut dead = 0;
        let mut live = 0;
        for r in &recs {
            assert_eq!(
                r.len as u64,
                record_size(r.key.len(), r.value_len),
                "the record size formula of docs/format/blob.md"
            );
            if even.contains(&r.key) {
                dead += r.len as u64;
            } else {
                live += r.len as u64;
            }
        }
        if live > 0 {
            expected_garbage += dead;
            expected_live += live;
            surviving_files += 1;
        }
    }
    for i in (0..N).step_by(2) {
        put(&db, &mut model, long_key(i), value(i, 2, 30));
    }
    db.compact_range(..).unwrap();
    let s = db.stats();
    assert!(expected_garbage > 0 && surviving_files > 10);
    assert_eq!(
        s.blob_garbage_bytes, expected_garbage,
        "garbage is the exact size of the records whose references compaction dropped"
    );
    assert_eq!(s.blob_live_bytes, expected_live, "live blob bytes");
    assert_eq!(s.blob_files, surviving_files, "blob files left");
    assert_eq!(s.gc_runs, 0);
    for f in &gen0_files {
        assert!(
            fs.read_file(f).is_none(),
            "{} has no live record and outlived its last reference",
            f.display()
        );
    }

    db = reopen(db, &options);
    let r = db.stats();
    assert_eq!(
        (r.blob_garbage_bytes, r.blob_live_bytes, r.blob_files),
        (expected_garbage, expected_live, surviving_files),
        "garbage accounting after reopen"
    );
    check_long(&db, &model, "after reopen");

    // Now let GC run: every partly dead file qualifies.
    let gc_options = Options {
        gc_threshold: f64::MIN_POSITIVE,
        ..base_options(&fs)
    };
    let disk_before = blob_bytes_on_disk(&fs);
    db = reopen(db, &gc_options);
    db.collect_garbage().unwrap();
    let g = db.stats();
    assert!(g.gc_runs > 0);
    assert_eq!(g.blob_garbage_bytes, 0, "GC took all the garbage");
    assert_eq!(
        g.blob_live_bytes, expected_live,
        "GC moved live bytes, it did not lose or invent any"
    );
    assert!(
        blob_bytes_on_disk(&fs) < disk_before,
        "blob files shrank on disk"
    );
    assert!(g.gc_bytes_written > 0, "{g:?}");
    check_long(&db, &model, "after GC");
    db = reopen(db, &gc_options);
    let r = db.stats();
    assert_eq!(
        (r.blob_garbage_bytes, r.blob_live_bytes),
        (0, expected_live),
        "after GC and reopen"
    );
    check_long(&db, &model, "after GC and reopen");
}

/// `check` for models whose keys are not all `key(i)`.
fn check_long(db: &Db, model: &Model, what: &str) {
    for (k, v) in model {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get {}: {e}", show(k)));
        assert!(
            got.as_ref() == Some(v),
            "{what}: get {}: got {:?}, want {}",
            show(k),
            got.as_deref().map(show),
            show(v)
        );
    }
    let scan: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
    assert_same(&scan, model, what);
}

// ---------------------------------------------------------------------------------------------

/// The writer's `n`-th operation, a pure function of `n`: a key, and a value or a deletion.
fn writer_op(n: u64, keys: u64) -> (Vec<u8>, Option<Vec<u8>>) {
    let h = n.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ n;
    let i = (h % keys) as u32;
    if h.is_multiple_of(11) {
        return (key(i), None);
    }
    let len = if h.is_multiple_of(13) {
        20
    } else {
        MIN_BLOB + (h >> 8) as usize % 250
    };
    (key(i), Some(value(i, n as u32, len)))
}

fn apply_op(model: &mut Model, op: (Vec<u8>, Option<Vec<u8>>)) {
    match op {
        (k, Some(v)) => model.insert(k, v),
        (k, None) => model.remove(&k),
    };
}

/// Finds the `m` in `lo..=hi` whose model state equals `got`; `base` is the state after `lo`
/// operations.
fn match_prefix(got: &Model, base: &Model, lo: u64, hi: u64, keys: u64) -> Option<u64> {
    let mut m = base.clone();
    for n in lo..=hi {
        if m == *got {
            return Some(n);
        }
        apply_op(&mut m, writer_op(n, keys));
    }
    None
}

fn concurrent_gc(mode: GcMode, ops: u64) {
    const KEYS: u64 = 150;
    let fs = MemFs::new();
    let options = Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 16 << 10,
        target_file_size: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        level_size_multiplier: 4.0,
        level0_compaction_trigger: 2,
        num_levels: 4,
        min_blob_size: MIN_BLOB,
        blob_file_size: 2048,
        gc_mode: mode,
        gc_engine: GcEngineKind::Background,
        gc_threads: 2,
        gc_bytes_per_sec: 0,
        gc_threshold: 0.2,
        background_threads: 2,
        ..Options::default()
    };
    let db = Arc::new(Db::open(DIR, options).unwrap());
    let progress = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    // The writer goes on past `ops` (up to 20 times as many) until a GC has run: on a busy
    // machine the first `ops` writes can end before the background GC gets a core. Returns how
    // many operations it wrote and the GC runs it saw while it was still writing.
    let writer = {
        let db = db.clone();
        let (progress, finished) = (progress.clone(), finished.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            let mut gc_runs = 0;
            while n < ops || (gc_runs == 0 && n < ops * 20) {
                match writer_op(n, KEYS) {
                    (k, Some(v)) => db.put(&k, &v).unwrap(),
                    (k, None) => db.delete(&k).unwrap(),
                }
                n += 1;
                progress.store(n, Ordering::Release);
                if n == ops || (n > ops && n.is_multiple_of(64)) {
                    gc_runs = db.stats().gc_runs;
                }
            }
            gc_runs = gc_runs.max(db.stats().gc_runs);
            finished.store(true, Ordering::Release);
            (n, gc_runs)
        })
    };
    let what = format!("{mode:?}");
    // The checker's model, advanced to `base_n` operations.
    let mut base = Model::new();
    let mut base_n = 0u64;
    let mut held: Vec<(shale::Snapshot, Model, u64)> = Vec::new();
    let mut rounds = 0u64;
    loop {
        // Read before the progress: once it is set, the progress is the writer's last.
        let done = finished.load(Ordering::Acquire);
        let before = progress.load(Ordering::Acquire);
        while base_n < before {
            apply_op(&mut base, writer_op(base_n, KEYS));
            base_n += 1;
        }
        rounds += 1;
        // A snapshot, scanned (slowly, while GC runs), then kept to be scanned again later.
        let snap = db.snapshot();
        let it = db.iter();
        let after = progress.load(Ordering::Acquire);
        let hi = if done { after } else { after + 1 };
        let scanned: Model = snap
            .iter()
            .map(|r| r.unwrap_or_else(|e| panic!("{what}: snapshot scan: {e}")))
            .collect();
        let Some(m) = match_prefix(&scanned, &base, before, hi, KEYS) else {
            panic!("{what}: round {rounds}: snapshot scan matches no state between operations {before} and {hi}");
        };
        let plain: Model = it
            .map(|r| r.unwrap_or_else(|e| panic!("{what}: scan: {e}")))
            .collect();
        assert!(
            match_prefix(&plain, &base, before, hi, KEYS).is_some(),
            "{what}: round {rounds}: scan matches no state between operations {before} and {hi}"
        );
        // Snapshots taken earlier still read exactly what they read then.
        for (s, frozen, at) in &held {
            let again: Model = s
                .iter()
                .map(|r| r.unwrap_or_else(|e| panic!("{what}: old snapshot scan: {e}")))
                .collect();
            assert!(
                again == *frozen,
                "{what}: round {rounds}: the snapshot at operation {at} changed"
            );
            let back: Vec<Vec<u8>> = s
                .iter()
                .rev()
                .map(|r| {
                    r.unwrap_or_else(|e| panic!("{what}: reverse snapshot scan: {e}"))
                        .0
                })
                .collect();
            assert!(
                back.iter().eq(frozen.keys().rev()),
                "{what}: round {rounds}: reverse scan of the snapshot at operation {at}"
            );
            for i in (0..KEYS as u32).step_by(7) {
                assert_eq!(
                    s.get(key(i)).unwrap().as_ref(),
                    frozen.get(&key(i)),
                    "{what}: snapshot get"
                );
            }
        }
        if rounds.is_multiple_of(3) || held.len() < 2 {
            held.push((snap, scanned, m));
            if held.len() > 3 {
                held.remove(0);
            }
        }
        if done {
            break;
        }
    }
    let (ops, gc_seen_during_writes) = writer.join().unwrap();
    eprintln!(
        "{what}: {ops} writes, {rounds} checker rounds, {gc_seen_during_writes} GC runs during the writes"
    );
    assert!(rounds > 3, "{what}: the checker ran only {rounds} rounds");
    assert!(
        gc_seen_during_writes > 0,
        "{what}: no GC ran while the writer was writing"
    );
    db.collect_garbage().unwrap();
    db.compact_range(..).unwrap();
    db.collect_garbage().unwrap();
    for (s, frozen, at) in &held {
        let again: Model = s.iter().map(|r| r.unwrap()).collect();
        assert!(
            again == *frozen,
            "{what}: the snapshot at operation {at} changed after the final GC"
        );
    }
    let mut last = Model::new();
    for n in 0..ops {
        apply_op(&mut last, writer_op(n, KEYS));
    }
    let scan: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
    assert_same(&scan, &last, &format!("{what}: final scan"));
}

#[test]
fn scans_and_snapshot_scans_stay_exact_while_background_gc_runs_beside_a_writer() {
    let ops = std::env::var("SHALE_GC_STRESS_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    for mode in [GcMode::Offload, GcMode::Titan] {
        concurrent_gc(mode, ops);
    }
}

// ---------------------------------------------------------------------------------------------

#[test]
fn a_value_of_exactly_min_blob_size_is_separated_and_one_byte_shorter_is_not() {
    for (len, separated) in [
        (MIN_BLOB, true),
        (MIN_BLOB - 1, false),
        (MIN_BLOB + 1, true),
    ] {
        let fs = MemFs::new();
        let db = Db::open(DIR, base_options(&fs)).unwrap();
        let v = vec![b'v'; len];
        db.put(b"k", &v).unwrap();
        db.flush().unwrap();
        let s = db.stats();
        assert_eq!(
            (s.blob_files > 0, !blob_files(&fs).is_empty()),
            (separated, separated),
            "a {len}-byte value with min_blob_size {MIN_BLOB}"
        );
        if separated {
            assert_eq!(s.blob_live_bytes, record_size(1, len));
        }
        assert_eq!(db.get(b"k").unwrap(), Some(v.clone()));
        let db = reopen(db, &base_options(&fs));
        assert_eq!(db.get(b"k").unwrap(), Some(v));
    }
}

#[test]
fn no_blob_files_keeps_every_value_inline() {
    let fs = MemFs::new();
    let options = Options {
        min_blob_size: NO_BLOB_FILES,
        ..base_options(&fs)
    };
    let db = Db::open(DIR, options.clone()).unwrap();
    let mut model = Model::new();
    for i in 0..50 {
        put(&db, &mut model, key(i), value(i, 0, 10 + i as usize * 997));
    }
    db.flush().unwrap();
    for i in 0..50 {
        put(&db, &mut model, key(i), value(i, 1, 5000));
    }
    db.compact_range(..).unwrap();
    db.collect_garbage().unwrap();
    let s = db.stats();
    assert_eq!(
        (
            s.blob_files,
            s.blob_live_bytes,
            s.blob_garbage_bytes,
            s.gc_runs
        ),
        (0, 0, 0, 0)
    );
    assert!(blob_files(&fs).is_empty());
    let db = reopen(db, &options);
    check(&db, &model, 50, "NO_BLOB_FILES");
    assert_eq!(db.stats().blob_files, 0);
}
