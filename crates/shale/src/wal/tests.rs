use super::format::HEADER_LEN;
use super::reader::{fuzz_replay, TailCut};
use super::*;
use crate::error::ErrorKind;
use crate::fs::{Fs, MemFs};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn log_of(records: &[Vec<u8>]) -> Vec<u8> {
    let fs = MemFs::new();
    let path = Path::new("/t.log");
    let mut w = LogWriter::new(fs.create(path).unwrap());
    for r in records {
        w.add_record(r).unwrap();
    }
    w.sync().unwrap();
    assert_eq!(
        w.len() as usize,
        records.iter().map(|r| r.len() + HEADER_LEN).sum::<usize>()
    );
    fs.read_all(path).unwrap()
}

fn replay(data: Vec<u8>, policy: TailPolicy) -> crate::Result<(Vec<Vec<u8>>, Option<TailCut>)> {
    let mut r = LogReader::new(data, PathBuf::from("/t.log"), policy);
    let mut out = Vec::new();
    while let Some((_, rec)) = r.next_record()? {
        out.push(rec.to_vec());
    }
    Ok((out, r.tail_cut().cloned()))
}

/// Records that end in a non-zero byte, as MANIFEST records do.
fn records() -> Vec<Vec<u8>> {
    (0..6u8)
        .map(|i| {
            (0..(i as usize * 37 + 5))
                .map(|j| (j as u8).wrapping_mul(7).wrapping_add(i) | 1)
                .collect()
        })
        .collect()
}

#[test]
fn round_trip_keeps_record_boundaries_and_offsets() {
    let recs = records();
    let data = log_of(&recs);
    let mut r = LogReader::new(data, PathBuf::from("/t.log"), TailPolicy::CutTornTailOnly);
    let mut offset = 0u64;
    for rec in &recs {
        assert_eq!(r.next_record().unwrap().unwrap(), (offset, rec.as_slice()));
        offset += (rec.len() + HEADER_LEN) as u64;
    }
    assert!(r.next_record().unwrap().is_none());
    assert!(r.tail_cut().is_none());
}

#[test]
fn wal_recovery_cuts_a_torn_tail_at_every_length() {
    let recs = records();
    let data = log_of(&recs);
    let last_start = data.len() - recs.last().unwrap().len() - HEADER_LEN;
    for len in last_start + 1..data.len() {
        for policy in [
            TailPolicy::CutDamagedTail,
            TailPolicy::CutTornTailOnly,
            TailPolicy::PointInTime,
        ] {
            let (got, cut) = replay(data[..len].to_vec(), policy).unwrap();
            assert_eq!(got, recs[..recs.len() - 1], "len {len} {policy:?}");
            assert_eq!(cut.unwrap().offset, last_start as u64);
        }
    }
}

#[test]
fn zero_filled_torn_tail_is_cut_even_for_the_manifest() {
    let recs = records();
    let mut data = log_of(&recs);
    let n = data.len();
    for b in &mut data[n - 20..] {
        *b = 0;
    }
    let (got, cut) = replay(data, TailPolicy::CutTornTailOnly).unwrap();
    assert_eq!(got, recs[..recs.len() - 1]);
    assert!(cut.is_some());
}

/// A WAL keeps zero-filled space ahead of its appends (`WritableFile::preallocate`): zeros from a
/// record boundary to the end are the end of the log, whatever their length, with no cut.
#[test]
fn zeros_after_the_last_record_end_the_log_cleanly() {
    let recs = records();
    for zeros in [1, HEADER_LEN - 1, HEADER_LEN, 4096, 1 << 20] {
        let mut data = log_of(&recs);
        data.resize(data.len() + zeros, 0);
        for policy in [
            TailPolicy::CutDamagedTail,
            TailPolicy::CutTornTailOnly,
            TailPolicy::PointInTime,
        ] {
            let (got, cut) = replay(data.clone(), policy).unwrap();
            assert_eq!(got, recs, "{zeros} zeros, {policy:?}");
            assert!(cut.is_none(), "{zeros} zeros, {policy:?}");
        }
    }
    // Zeros alone: an empty log.
    let (got, cut) = replay(vec![0; 100], TailPolicy::CutDamagedTail).unwrap();
    assert!(got.is_empty() && cut.is_none());
}

/// Zeros followed by an intact record are not the end: the WAL's damage rules apply.
#[test]
fn zeros_before_an_intact_record_are_corruption() {
    let recs = records();
    let first = log_of(&recs[..1]);
    let mut data = first.clone();
    data.resize(first.len() + 64, 0);
    data.extend_from_slice(&log_of(&recs[1..2]));
    let err = replay(data.clone(), TailPolicy::CutDamagedTail).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    let (got, cut) = replay(data, TailPolicy::PointInTime).unwrap();
    assert_eq!(got, recs[..1]);
    assert_eq!(cut.unwrap().offset, first.len() as u64);
}

#[test]
fn flipped_byte_before_the_last_record_is_corruption_naming_the_offset() {
    let recs = records();
    let data = log_of(&recs);
    let last_start = data.len() - recs.last().unwrap().len() - HEADER_LEN;
    for offset in 0..last_start {
        let mut bad = data.clone();
        bad[offset] ^= 0x5a;
        for policy in [TailPolicy::CutDamagedTail, TailPolicy::CutTornTailOnly] {
            let err = replay(bad.clone(), policy).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corruption);
            assert!(err.to_string().contains("t.log"), "{err}");
        }
        let (got, cut) = replay(bad, TailPolicy::PointInTime).unwrap();
        assert!(got.len() < recs.len() && got[..] == recs[..got.len()]);
        assert!(cut.is_some());
    }
}

#[test]
fn flipped_byte_in_the_last_record_is_a_cut_for_wals_and_corruption_for_the_manifest() {
    let recs = records();
    let data = log_of(&recs);
    let last_start = data.len() - recs.last().unwrap().len() - HEADER_LEN;
    for offset in last_start..data.len() {
        let mut bad = data.clone();
        bad[offset] ^= 0x10;
        let (got, _) = replay(bad.clone(), TailPolicy::CutDamagedTail).unwrap();
        assert_eq!(got, recs[..recs.len() - 1]);
        let err = replay(bad, TailPolicy::CutTornTailOnly).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corruption, "offset {offset}");
    }
}

#[test]
fn empty_log_has_no_records() {
    let (got, cut) = replay(Vec::new(), TailPolicy::CutTornTailOnly).unwrap();
    assert!(got.is_empty() && cut.is_none());
}

proptest! {
    #[test]
    fn any_records_round_trip(recs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20)) {
        let (got, cut) = replay(log_of(&recs), TailPolicy::CutDamagedTail).unwrap();
        prop_assert_eq!(got, recs);
        prop_assert!(cut.is_none());
    }

    #[test]
    fn replay_of_arbitrary_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        for policy in [TailPolicy::CutDamagedTail, TailPolicy::CutTornTailOnly, TailPolicy::PointInTime] {
            fuzz_replay(&data, policy);
        }
    }
}

fn wal_replay(data: Vec<u8>, policy: TailPolicy) -> crate::Result<(Vec<Vec<u8>>, Option<TailCut>)> {
    let mut r = LogReader::new_wal(data, PathBuf::from("/w.log"), policy);
    let mut out = Vec::new();
    while let Some((_, rec)) = r.next_record()? {
        out.push(rec.to_vec());
    }
    Ok((out, r.tail_cut().cloned()))
}

/// A WAL writer follows each sync that made new bytes durable with a sync marker; a WAL reader
/// skips the markers, and damage they cover is corruption even in the last record.
#[test]
fn sync_markers_are_skipped_and_make_damage_to_synced_records_corruption() {
    let fs = MemFs::new();
    let path = Path::new("/w.log");
    let mut w = LogWriter::new_wal(fs.create(path).unwrap());
    let recs = records();
    w.add_record(&recs[0]).unwrap();
    w.sync().unwrap();
    let synced = w.len();
    w.sync().unwrap(); // nothing new: no second marker
    assert_eq!(w.len(), synced);
    w.add_record(&recs[1]).unwrap();
    w.flush().unwrap();
    let data = fs.read_all(path).unwrap();
    let (got, cut) = wal_replay(data.clone(), TailPolicy::CutDamagedTail).unwrap();
    assert_eq!(got, recs[..2]);
    assert!(cut.is_none());
    // The unsynced last record torn: cut under the default, refused under absolute consistency.
    let torn = data[..data.len() - 1].to_vec();
    let (got, cut) = wal_replay(torn.clone(), TailPolicy::CutDamagedTail).unwrap();
    assert_eq!(got, recs[..1]);
    assert!(!cut.unwrap().lost_synced);
    let err = wal_replay(torn, TailPolicy::Absolute).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    // The synced first record damaged: corruption, or under point in time a loud cut.
    let mut bad = data.clone();
    bad[HEADER_LEN + 1] ^= 1;
    let err = wal_replay(bad.clone(), TailPolicy::CutDamagedTail).unwrap_err();
    assert!(err.to_string().contains("synced"), "{err}");
    let (got, cut) = wal_replay(bad, TailPolicy::PointInTime).unwrap();
    assert!(got.is_empty());
    assert!(cut.unwrap().lost_synced);
}
