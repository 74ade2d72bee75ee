//! Scans over damaged data (regression tests for issue 18, defect 4: "one corrupt block stops the
//! whole keyspace"). One bad SST data block, one bad blob record or one unopenable SST among
//! thousands of keys: a default scan fails naming the file and offset; a scan with
//! `ReadOptions::skip_unreadable` returns every intact pair exactly, in both directions, and
//! reports each skipped piece with a key range that holds exactly the lost keys.
//!
//! The oracle for "lost" is independent of the scan: a point read of a lost key fails with a
//! `Corruption` error naming the damaged file, and a point read of every other key succeeds.

use shale::fs::MemFs;
use shale::{Db, ErrorKind, Options, ReadOptions, Skipped, SkippedKind};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/skip";
const KEYS: usize = 5000;
/// Every `BLOB_EVERY`th value is long enough to go to a blob file.
const BLOB_EVERY: usize = 10;
const MIN_BLOB: usize = 256;

const SKIP: ReadOptions = ReadOptions {
    skip_unreadable: true,
};

fn options(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        block_size: 1024,
        min_blob_size: MIN_BLOB,
        ..Options::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    let len = if i.is_multiple_of(BLOB_EVERY) {
        MIN_BLOB + 100
    } else {
        40
    };
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// A database of `KEYS` keys written in `flushes` flushes (one SST each, or more), closed.
fn populate(fs: &MemFs, flushes: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(DIR, options(fs)).unwrap();
    let mut expected = BTreeMap::new();
    let per = KEYS.div_ceil(flushes);
    for i in 0..KEYS {
        db.put(key(i), value(i)).unwrap();
        expected.insert(key(i), value(i));
        if (i + 1).is_multiple_of(per) {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
    db.close().unwrap();
    expected
}

fn files_ending(fs: &MemFs, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs
        .list_files()
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

fn name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// The keys whose point read fails, each failure checked to be a `Corruption` naming `file`.
fn lost_by_point_reads(db: &Db, expected: &BTreeMap<Vec<u8>, Vec<u8>>) -> BTreeSet<Vec<u8>> {
    let mut lost = BTreeSet::new();
    for (k, v) in expected {
        match db.get(k) {
            Ok(got) => assert_eq!(got.as_ref(), Some(v), "{:?}", String::from_utf8_lossy(k)),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
                lost.insert(k.clone());
            }
        }
    }
    lost
}

/// Checks a default scan: it fails with a `Corruption` naming `file` and an offset.
fn assert_default_scan_fails(db: &Db, file: &str) {
    let err = db
        .iter()
        .collect::<shale::Result<Vec<_>>>()
        .expect_err("a default scan over damaged data must fail");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    let text = err.to_string();
    assert!(text.contains(file) && text.contains("offset"), "{text}");
    let err = db
        .iter()
        .rev()
        .collect::<shale::Result<Vec<_>>>()
        .expect_err("a default backward scan over damaged data must fail");
    assert!(err.to_string().contains(file), "{err}");
}

/// Runs a skipping scan forward and backward; checks each returns exactly the intact pairs and
/// reports the same skips. Returns the skips.
fn skipping_scans(
    db: &Db,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
    lost: &BTreeSet<Vec<u8>>,
) -> Vec<Skipped> {
    let intact: Vec<(Vec<u8>, Vec<u8>)> = expected
        .iter()
        .filter(|(k, _)| !lost.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut forward = db.range_with(.., &SKIP);
    let got: Vec<_> = forward.by_ref().collect::<shale::Result<_>>().unwrap();
    assert_eq!(got.len(), intact.len());
    assert!(
        got == intact,
        "the forward skipping scan differs from the intact pairs"
    );
    let mut backward = db.range_with(.., &SKIP);
    let mut got: Vec<_> = backward
        .by_ref()
        .rev()
        .collect::<shale::Result<_>>()
        .unwrap();
    got.reverse();
    assert!(
        got == intact,
        "the backward skipping scan differs from the intact pairs"
    );
    let skipped = forward.skipped();
    assert_eq!(forward.skipped_count(), skipped.len() as u64);
    let mut back_files: Vec<_> = backward
        .skipped()
        .iter()
        .map(|s| (s.file.clone(), s.offset))
        .collect();
    let mut front_files: Vec<_> = skipped.iter().map(|s| (s.file.clone(), s.offset)).collect();
    back_files.sort();
    front_files.sort();
    assert_eq!(front_files, back_files);
    // A scan from both ends at once meets the damage once.
    let mut both = db.range_with(.., &SKIP);
    let mut n = 0;
    while let Some(item) = if n % 2 == 0 {
        both.next()
    } else {
        both.next_back()
    } {
        item.unwrap();
        n += 1;
    }
    assert_eq!(n, intact.len());
    assert_eq!(both.skipped_count(), skipped.len() as u64);
    skipped
}

/// Checks that `s`'s range holds exactly the keys of `lost` among the keys of `expected`.
fn assert_range_is_exactly(
    s: &Skipped,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
    lost: &BTreeSet<Vec<u8>>,
) {
    for k in expected.keys() {
        assert_eq!(
            s.contains(k),
            lost.contains(k),
            "{:?}: range {:?}..{:?}",
            String::from_utf8_lossy(k),
            s.start,
            s.end
        );
    }
}

#[test]
fn regression_issue_18_one_bad_sst_block_is_skipped_and_reported_with_its_key_range() {
    let base = MemFs::new();
    let expected = populate(&base, 1);
    let sst = files_ending(&base, ".sst");
    assert_eq!(sst.len(), 1, "{sst:?}");
    let sst = &sst[0];
    // Data blocks tile the file from offset 0: a byte in the middle of the data area is in
    // exactly one data block, far from the first and the last.
    let offset = 20_000;
    assert!(base.read_file(sst).unwrap().len() > 3 * offset as usize);
    base.corrupt_byte(sst, offset, 0x81).unwrap();
    let db = Db::open(DIR, options(&base)).unwrap();

    let lost = lost_by_point_reads(&db, &expected);
    assert!(
        !lost.is_empty() && lost.len() < 100,
        "one 1 KiB block holds a few dozen keys, lost {}",
        lost.len()
    );
    assert_default_scan_fails(&db, &name(sst));

    let skipped = skipping_scans(&db, &expected, &lost);
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    let s = &skipped[0];
    assert_eq!(s.kind, SkippedKind::Block);
    assert_eq!(s.file, name(sst));
    assert!(s.offset <= offset && offset - s.offset < 2048, "{s:?}");
    assert_eq!(s.error.kind(), ErrorKind::Corruption);
    assert!(s.error.to_string().contains(&name(sst)), "{}", s.error);
    // Named relative to the data directory (issue 18, defect 6).
    assert!(!s.error.to_string().contains(DIR), "{}", s.error);
    assert_range_is_exactly(s, &expected, &lost);
    // The bounds are the keys around the block: after the last intact key before it, through
    // the last lost key.
    let first_lost = lost.first().unwrap();
    let before = expected.range(..first_lost.clone()).next_back().unwrap().0;
    assert_eq!(s.start, Bound::Excluded(before.clone()));
    assert_eq!(s.end, Bound::Included(lost.last().unwrap().clone()));

    // Bounded scans that start or end inside the damaged block.
    let mid = lost.iter().nth(lost.len() / 2).unwrap().clone();
    let mut from_mid = db.range_with(mid.clone().., &SKIP);
    let got: Vec<_> = from_mid.by_ref().collect::<shale::Result<_>>().unwrap();
    let want: Vec<_> = expected
        .range(mid.clone()..)
        .filter(|(k, _)| !lost.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(got == want);
    assert_eq!(from_mid.skipped_count(), 1);
    let mut to_mid = db.range_with(..mid.clone(), &SKIP);
    assert_eq!(
        to_mid.by_ref().rev().count(),
        expected
            .range(..mid)
            .filter(|(k, _)| !lost.contains(*k))
            .count()
    );
    assert_eq!(to_mid.skipped_count(), 1);
    // A snapshot scan skips the same way.
    let snap = db.snapshot();
    let mut at_snap = snap.range_with(.., &SKIP);
    assert_eq!(at_snap.by_ref().count(), KEYS - lost.len());
    assert_eq!(at_snap.skipped_count(), 1);
    // A scan that never reaches the block skips nothing.
    let mut clean = db.range_with(..key(10), &SKIP);
    assert_eq!(clean.by_ref().count(), 10);
    assert!(clean.skipped().is_empty());
}

#[test]
fn regression_issue_18_one_bad_blob_record_skips_exactly_its_key() {
    let base = MemFs::new();
    let expected = populate(&base, 1);
    let blobs = files_ending(&base, ".blob");
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    let blob = &blobs[0];
    let len = base.read_file(blob).unwrap().len() as u64;
    base.corrupt_byte(blob, len / 2, 0x81).unwrap();
    let db = Db::open(DIR, options(&base)).unwrap();

    let lost = lost_by_point_reads(&db, &expected);
    assert_eq!(
        lost.len(),
        1,
        "one damaged record loses one value: {lost:?}"
    );
    let k = lost.first().unwrap();
    assert_default_scan_fails(&db, &name(blob));

    let skipped = skipping_scans(&db, &expected, &lost);
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    let s = &skipped[0];
    assert_eq!(s.kind, SkippedKind::BlobRecord);
    assert_eq!(s.file, name(blob));
    assert!(
        s.offset <= len / 2 && len / 2 - s.offset < 2 * MIN_BLOB as u64,
        "{s:?}"
    );
    assert_eq!(
        (&s.start, &s.end),
        (&Bound::Included(k.clone()), &Bound::Included(k.clone()))
    );
    assert_range_is_exactly(s, &expected, &lost);
}

#[test]
fn regression_issue_18_a_bad_block_and_a_bad_blob_record_are_both_reported() {
    let base = MemFs::new();
    let expected = populate(&base, 1);
    let sst = &files_ending(&base, ".sst")[0];
    let blob = &files_ending(&base, ".blob")[0];
    base.corrupt_byte(sst, 30_000, 0x81).unwrap();
    let blob_len = base.read_file(blob).unwrap().len() as u64;
    base.corrupt_byte(blob, blob_len / 4, 0x81).unwrap();
    let db = Db::open(DIR, options(&base)).unwrap();
    let lost = lost_by_point_reads(&db, &expected);
    let skipped = skipping_scans(&db, &expected, &lost);
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    let kinds: BTreeSet<_> = skipped.iter().map(|s| format!("{:?}", s.kind)).collect();
    assert_eq!(kinds.len(), 2, "{skipped:?}");
    // Every lost key lies in exactly one reported range, every intact key in none.
    for k in expected.keys() {
        let hits = skipped.iter().filter(|s| s.contains(k)).count();
        assert_eq!(
            hits,
            usize::from(lost.contains(k)),
            "{:?}",
            String::from_utf8_lossy(k)
        );
    }
}

#[test]
fn regression_issue_18_an_sst_that_cannot_be_opened_is_skipped_whole() {
    let base = MemFs::new();
    let expected = populate(&base, 3);
    let ssts = files_ending(&base, ".sst");
    assert!(ssts.len() >= 3, "{ssts:?}");
    let victim = &ssts[1];
    let len = base.read_file(victim).unwrap().len() as u64;
    // The footer's last bytes: the table cannot be opened at all.
    base.corrupt_byte(victim, len - 3, 0x81).unwrap();
    let db = Db::open(DIR, options(&base)).unwrap();
    let lost = lost_by_point_reads(&db, &expected);
    assert!(lost.len() > KEYS / 8, "a whole table: {}", lost.len());
    assert_default_scan_fails(&db, &name(victim));
    let skipped = skipping_scans(&db, &expected, &lost);
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].kind, SkippedKind::Table);
    assert_eq!(skipped[0].file, name(victim));
    // The table's key range, first and last key included.
    assert_range_is_exactly(&skipped[0], &expected, &lost);
}

#[test]
fn a_skipping_scan_over_intact_data_reports_nothing() {
    let base = MemFs::new();
    let expected = populate(&base, 2);
    let db = Db::open(DIR, options(&base)).unwrap();
    let mut scan = db.range_with(.., &SKIP);
    let got: BTreeMap<_, _> = scan.by_ref().collect::<shale::Result<_>>().unwrap();
    assert!(got == expected);
    assert!(scan.skips_unreadable());
    assert_eq!(scan.skipped_count(), 0);
    assert!(!db.iter().skips_unreadable());
}
