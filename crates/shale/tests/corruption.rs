//! Corruption: a flipped byte in a WAL, an SST or the MANIFEST gives a `Corruption` error naming the
//! file (or, for the WAL's last sync marker, a clean cut that loses no write), never wrong data and
//! never a panic.

use shale::fs::MemFs;
use shale::{Db, Durability, ErrorKind, Options, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/corrupt";

fn options(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        block_size: 256,
        ..Options::default()
    }
}

fn files_ending(fs: &MemFs, suffix: &str) -> Vec<PathBuf> {
    fs.list_files()
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect()
}

fn manifest(fs: &MemFs) -> PathBuf {
    fs.list_files()
        .into_iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
        })
        .expect("a MANIFEST")
}

/// Writes `n` one-entry batches and returns the expected contents after each.
fn populate(db: &Db, n: u32) -> Vec<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut states = vec![BTreeMap::new()];
    for i in 0..n {
        let key = format!("key{:03}", i % 40).into_bytes();
        let value = format!("value-{i}-{}", "z".repeat((i % 7) as usize * 10)).into_bytes();
        let mut b = WriteBatch::new();
        b.put(&key, &value);
        db.write(
            b,
            &WriteOptions {
                durability: Durability::Sync,
            },
        )
        .unwrap();
        let mut next = states.last().unwrap().clone();
        next.insert(key, value);
        states.push(next);
    }
    states
}

fn contents(db: &Db) -> shale::Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    db.iter().collect()
}

fn assert_names(err: &shale::Error, file: &Path) {
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    let name = file.file_name().unwrap().to_string_lossy();
    assert!(
        err.to_string().contains(name.as_ref()),
        "error does not name {name}: {err}"
    );
}

#[test]
fn flipped_wal_byte_is_corruption_or_a_clean_cut_of_the_last_record() {
    let base = MemFs::new();
    let db = Db::open(DIR, options(&base)).unwrap();
    let states = populate(&db, 60);
    db.close().unwrap();
    let wal = files_ending(&base, ".log")
        .into_iter()
        .max_by_key(|p| base.read_file(p).map_or(0, |d| d.len()))
        .unwrap();
    let len = base.read_file(&wal).unwrap().len() as u64;
    let (mut cuts, mut errors) = (0, 0);
    for offset in (0..len).step_by(7).chain(len.saturating_sub(40)..len) {
        let fs = base.crash_clone();
        fs.corrupt_byte(&wal, offset, 0x5a).unwrap();
        match Db::open(DIR, options(&fs)) {
            Err(e) => {
                assert_names(&e, &wal);
                errors += 1;
            }
            Ok(db) => {
                let got = contents(&db).unwrap();
                // Every write was synced: a cut may only drop the sync marker at the end, never
                // a write (regression test for issue 18, defect 1).
                assert_eq!(
                    &got,
                    states.last().unwrap(),
                    "offset {offset}: a cut dropped a synced write"
                );
                cuts += 1;
            }
        }
    }
    assert!(errors > 0 && cuts > 0, "errors {errors}, cuts {cuts}");
}

#[test]
fn flipped_sst_byte_is_corruption_never_wrong_data() {
    let base = MemFs::new();
    let db = Db::open(DIR, options(&base)).unwrap();
    let states = populate(&db, 300);
    db.flush().unwrap();
    db.close().unwrap();
    let expected = states.last().unwrap();
    let sst = files_ending(&base, ".sst")
        .pop()
        .expect("an SST after flush");
    let len = base.read_file(&sst).unwrap().len() as u64;
    let mut detected = 0;
    for offset in (0..len).step_by(13).chain(len.saturating_sub(64)..len) {
        let fs = base.crash_clone();
        fs.corrupt_byte(&sst, offset, 0x81).unwrap();
        let db = match Db::open(DIR, options(&fs)) {
            Ok(db) => db,
            Err(e) => {
                assert_names(&e, &sst);
                detected += 1;
                continue;
            }
        };
        let mut failed = false;
        for (k, v) in expected {
            match db.get(k) {
                Ok(got) => assert_eq!(
                    got.as_ref(),
                    Some(v),
                    "offset {offset}: wrong data for {k:?}"
                ),
                Err(e) => {
                    assert_names(&e, &sst);
                    failed = true;
                }
            }
        }
        match contents(&db) {
            Ok(got) => assert_eq!(&got, expected, "offset {offset}: scan returned wrong data"),
            Err(e) => {
                assert_names(&e, &sst);
                failed = true;
            }
        }
        detected += failed as u32;
    }
    assert!(detected > 0);
}

#[test]
fn flipped_manifest_byte_is_corruption() {
    let base = MemFs::new();
    let db = Db::open(DIR, options(&base)).unwrap();
    populate(&db, 50);
    db.flush().unwrap();
    populate(&db, 50);
    db.flush().unwrap();
    db.close().unwrap();
    let manifest = manifest(&base);
    let len = base.read_file(&manifest).unwrap().len() as u64;
    for offset in 0..len {
        let fs = base.crash_clone();
        fs.corrupt_byte(&manifest, offset, 0x10).unwrap();
        match Db::open(DIR, options(&fs)) {
            Err(e) => assert_names(&e, &manifest),
            Ok(_) => panic!("offset {offset}: a flipped MANIFEST byte went unnoticed"),
        }
    }
}

#[test]
fn truncated_manifest_tail_is_cut_and_loses_nothing_acknowledged() {
    let base = MemFs::new();
    let db = Db::open(DIR, options(&base)).unwrap();
    let states = populate(&db, 80);
    db.close().unwrap();
    let manifest = manifest(&base);
    let len = base.read_file(&manifest).unwrap().len() as u64;
    // Appending half a record is what an interrupted MANIFEST write leaves behind.
    let mut data = base.read_file(&manifest).unwrap();
    data.extend_from_within(..(len as usize / 2).min(12));
    base.write_file(&manifest, &data).unwrap();
    let db = Db::open(DIR, options(&base)).unwrap();
    assert_eq!(&contents(&db).unwrap(), states.last().unwrap());
}

#[test]
fn missing_sst_is_corruption_naming_it() {
    let base = MemFs::new();
    let db = Db::open(DIR, options(&base)).unwrap();
    populate(&db, 100);
    db.flush().unwrap();
    db.close().unwrap();
    let sst = files_ending(&base, ".sst").pop().unwrap();
    shale::fs::Fs::remove_file(&base, &sst).unwrap();
    let err = Db::open(DIR, options(&base)).unwrap_err();
    assert_names(&err, &sst);
}

#[test]
fn garbage_current_is_corruption() {
    let base = MemFs::new();
    Db::open(DIR, options(&base)).unwrap().close().unwrap();
    base.write_file(Path::new(DIR).join("CURRENT"), b"not a manifest name\n")
        .unwrap();
    let err = Db::open(DIR, options(&base)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.to_string().contains("CURRENT"), "{err}");
}

/// Asserts that `err` names `file` relative to the data directory `dir`: by its name, and
/// without the directory's path (regression test for issue 18, defect 6).
fn assert_names_relative(err: &shale::Error, file: &Path, dir: &str) {
    let name = file.file_name().unwrap().to_string_lossy();
    let text = err.to_string();
    assert!(
        text.contains(name.as_ref()),
        "error does not name {name}: {text}"
    );
    assert!(
        !text.contains(dir),
        "error names the data directory's path: {text}"
    );
}

/// Errors outside the write path (a damaged table met by a read and by a scan, a damaged blob
/// file, a damaged MANIFEST at open) name files relative to the data directory.
#[test]
fn regression_issue_18_read_and_open_errors_name_files_relative_to_the_data_directory() {
    const NESTED: &str = "/srv/some/where/db";
    let fs = MemFs::new();
    let opts = Options {
        min_blob_size: 64,
        block_cache_size: 0,
        ..options(&fs)
    };
    let db = Db::open(NESTED, opts.clone()).unwrap();
    db.put("small", "v").unwrap();
    db.put("large", "b".repeat(500)).unwrap();
    db.flush().unwrap();
    db.close().unwrap();

    let table = files_ending(&fs, ".sst").pop().expect("a table");
    let table_len = fs.read_file(&table).unwrap().len() as u64;
    for offset in 0..table_len / 4 {
        fs.corrupt_byte(&table, offset, 0x5a).unwrap();
    }
    let db = Db::open(NESTED, opts.clone()).unwrap();
    let e = db.get("small").unwrap_err();
    assert_names_relative(&e, &table, NESTED);
    let e = db.iter().find_map(Result::err).expect("the scan fails");
    assert_names_relative(&e, &table, NESTED);
    let snap = db.snapshot();
    let e = snap.multi_get(&["small"]).pop().unwrap().unwrap_err();
    assert_names_relative(&e, &table, NESTED);
    drop(snap);
    db.close().unwrap();
    for offset in 0..table_len / 4 {
        fs.corrupt_byte(&table, offset, 0x5a).unwrap();
    }

    let blob = files_ending(&fs, ".blob").pop().expect("a blob file");
    let blob_len = fs.read_file(&blob).unwrap().len() as u64;
    for offset in 20..blob_len - 40 {
        fs.corrupt_byte(&blob, offset, 0x5a).unwrap();
    }
    let db = Db::open(NESTED, opts.clone()).unwrap();
    assert_eq!(db.get("small").unwrap().as_deref(), Some(&b"v"[..]));
    let e = db.get("large").unwrap_err();
    assert_names_relative(&e, &blob, NESTED);
    let e = db.iter().find_map(Result::err).expect("the scan fails");
    assert_names_relative(&e, &blob, NESTED);
    db.close().unwrap();

    let manifest = manifest(&fs);
    let len = fs.read_file(&manifest).unwrap().len() as u64;
    for offset in 0..len {
        fs.corrupt_byte(&manifest, offset, 0x5a).unwrap();
    }
    let e = Db::open(NESTED, opts).unwrap_err();
    assert_names_relative(&e, &manifest, NESTED);
}
