//! Version edits and their encoding. See `docs/format/manifest.md`.
//!
//! A [`VersionEdit`] is one change to the set of live files (files added and removed per level) plus
//! the counters that must survive a restart. The MANIFEST is a log of encoded edits; the first edit
//! of every MANIFEST is a snapshot of the whole version.
//!
//! Encoding: a sequence of fields, each a varint tag followed by that tag's body, closed by
//! [`TAG_END`]. Unknown tags are corruption: a MANIFEST from a newer format is refused, never
//! half-understood. The closing tag is non-zero on purpose: a complete record never ends in a zero
//! byte, which lets recovery tell a zero-filled torn tail from a damaged record (see
//! `wal::TailPolicy::CutTornTailOnly`).

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use crate::blob::Bitmap;
use crate::key::{parse_internal_key, SeqNo};
use crate::varint::{put_length_prefixed, put_varint64, Reader};

/// A level of the tree: 0 is the newest.
pub(crate) type Level = usize;

// Field tags. Do not change or reuse: on-disk format.
const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE_NUMBER: u64 = 2;
const TAG_LAST_SEQ: u64 = 3;
const TAG_COMPACT_POINTER: u64 = 4;
const TAG_DELETED_FILE: u64 = 5;
const TAG_NEW_FILE: u64 = 6;
const TAG_BLOB_FILE: u64 = 7;
const TAG_BLOB_DEAD: u64 = 8;
const TAG_DELETED_BLOB_FILE: u64 = 9;
// Tags 10 to 15 are reserved for later blob-file fields.
const TAG_LOG_POSITION: u64 = 16;
/// Closes every edit. Do not change: on-disk format (and it must stay non-zero).
const TAG_END: u64 = 0x7f;

/// Edits name levels below this; anything larger is damage, whatever the options say.
const MAX_ENCODED_LEVEL: u64 = 64;

/// What the version records about one SST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileMeta {
    pub number: u64,
    pub file_size: u64,
    /// Smallest and largest internal keys in the file.
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    pub num_entries: u64,
    pub num_deletions: u64,
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
}

/// The whole state of one logical blob file: added at flush, replaced by a GC install, and written
/// for every blob file in a MANIFEST snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlobFileEdit {
    /// The logical file: the number `BlobRef`s name. It is the number of the first physical file.
    pub logical: u64,
    /// The physical file that holds the logical file's records now.
    pub physical: u64,
    /// Records the logical file was written with (ordinals `0..count`).
    pub count: u32,
    /// Bytes of the physical file.
    pub file_size: u64,
    /// Bytes of the records the physical file holds.
    pub record_bytes: u64,
    /// Bytes of those records that no reader can reach any more.
    pub garbage_bytes: u64,
    /// The original ordinals the physical file holds, in order; `None` when it holds them all.
    pub survivors: Option<Bitmap>,
    /// Ordinals known dead (reported by compactions).
    pub dead: Bitmap,
}

/// Blob records that a compaction (or flush) dropped the last reference to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlobDeadEdit {
    pub logical: u64,
    /// Ordinals, sorted ascending, no duplicates.
    pub ordinals: Vec<u32>,
    /// Bytes of those records.
    pub bytes: u64,
}

/// One change to the version and the persistent counters. `None` counters are unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VersionEdit {
    pub new_files: Vec<(Level, FileMeta)>,
    pub deleted_files: Vec<(Level, u64)>,
    /// WALs numbered below this are fully reflected in SSTs.
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_seq: Option<SeqNo>,
    /// Per level, the largest key of the last compaction there.
    pub compact_pointers: Vec<(Level, Vec<u8>)>,
    /// Blob files added or replaced (applied first).
    pub blob_files: Vec<BlobFileEdit>,
    /// Blob records found dead (applied second).
    pub blob_dead: Vec<BlobDeadEdit>,
    /// Logical blob files removed (applied last).
    pub deleted_blob_files: Vec<u64>,
    /// With an external log: the last log entry whose writes the version's files hold.
    pub log_position: Option<LogPosition>,
}

/// A place in an external log (a replication log that serves as the write-ahead log): the index
/// of an entry, and bytes the log's owner keeps with it (for Raft: the entry's term and the
/// cluster membership as of that entry). The engine stores the bytes as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogPosition {
    /// The entry's index in the log.
    pub index: u64,
    /// Opaque to the engine.
    pub context: Vec<u8>,
}

impl VersionEdit {
    /// Appends the encoding of the edit to `buf`.
    pub(crate) fn encode(&self, buf: &mut Vec<u8>) {
        for (tag, value) in [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQ, self.last_seq),
        ] {
            if let Some(v) = value {
                put_varint64(buf, tag);
                put_varint64(buf, v);
            }
        }
        for (level, key) in &self.compact_pointers {
            put_varint64(buf, TAG_COMPACT_POINTER);
            put_varint64(buf, *level as u64);
            put_length_prefixed(buf, key);
        }
        for (level, number) in &self.deleted_files {
            put_varint64(buf, TAG_DELETED_FILE);
            put_varint64(buf, *level as u64);
            put_varint64(buf, *number);
        }
        for (level, f) in &self.new_files {
            put_varint64(buf, TAG_NEW_FILE);
            put_varint64(buf, *level as u64);
            put_varint64(buf, f.number);
            put_varint64(buf, f.file_size);
            put_length_prefixed(buf, &f.smallest);
            put_length_prefixed(buf, &f.largest);
            for v in [
                f.smallest_seq,
                f.largest_seq,
                f.num_entries,
                f.num_deletions,
                f.raw_key_bytes,
                f.raw_value_bytes,
            ] {
                put_varint64(buf, v);
            }
        }
        for b in &self.blob_files {
            put_varint64(buf, TAG_BLOB_FILE);
            for v in [
                b.logical,
                b.physical,
                u64::from(b.count),
                b.file_size,
                b.record_bytes,
                b.garbage_bytes,
            ] {
                put_varint64(buf, v);
            }
            let mut bits = Vec::new();
            match &b.survivors {
                Some(s) => {
                    buf.push(1);
                    s.encode(&mut bits);
                    put_length_prefixed(buf, &bits);
                    bits.clear();
                }
                None => buf.push(0),
            }
            b.dead.encode(&mut bits);
            put_length_prefixed(buf, &bits);
        }
        for d in &self.blob_dead {
            put_varint64(buf, TAG_BLOB_DEAD);
            put_varint64(buf, d.logical);
            put_varint64(buf, d.bytes);
            put_varint64(buf, d.ordinals.len() as u64);
            let mut prev = 0u64;
            for (i, &o) in d.ordinals.iter().enumerate() {
                let o = u64::from(o);
                // Deltas after the first; ordinals are strictly increasing.
                put_varint64(buf, if i == 0 { o } else { o - prev - 1 });
                prev = o;
            }
        }
        for logical in &self.deleted_blob_files {
            put_varint64(buf, TAG_DELETED_BLOB_FILE);
            put_varint64(buf, *logical);
        }
        if let Some(p) = &self.log_position {
            put_varint64(buf, TAG_LOG_POSITION);
            put_varint64(buf, p.index);
            put_length_prefixed(buf, &p.context);
        }
        put_varint64(buf, TAG_END);
    }

    /// Decodes an edit.
    ///
    /// # Errors
    /// A description of the first thing wrong: a truncated field, an unknown tag, a level out of
    /// range, a malformed key, a missing end tag or bytes after it.
    pub(crate) fn decode(data: &[u8]) -> Result<VersionEdit, String> {
        let mut r = Reader::new(data);
        let mut edit = VersionEdit::default();
        loop {
            let at = r.position();
            let tag = r
                .varint64()
                .ok_or_else(|| format!("edit ends without its end tag at byte {at}"))?;
            let truncated = || format!("field with tag {tag} at byte {at} is truncated");
            match tag {
                TAG_END => break,
                TAG_LOG_NUMBER => edit.log_number = Some(r.varint64().ok_or_else(truncated)?),
                TAG_NEXT_FILE_NUMBER => {
                    edit.next_file_number = Some(r.varint64().ok_or_else(truncated)?)
                }
                TAG_LAST_SEQ => edit.last_seq = Some(r.varint64().ok_or_else(truncated)?),
                TAG_COMPACT_POINTER => {
                    let level = level(r.varint64().ok_or_else(truncated)?)?;
                    let key = r.length_prefixed().ok_or_else(truncated)?;
                    edit.compact_pointers.push((level, key.to_vec()));
                }
                TAG_DELETED_FILE => {
                    let level = level(r.varint64().ok_or_else(truncated)?)?;
                    edit.deleted_files
                        .push((level, r.varint64().ok_or_else(truncated)?));
                }
                TAG_NEW_FILE => {
                    let level = level(r.varint64().ok_or_else(truncated)?)?;
                    let meta = decode_file(&mut r).ok_or_else(truncated)?;
                    for key in [&meta.smallest, &meta.largest] {
                        if parse_internal_key(key).is_none() {
                            return Err(format!("file {} has a malformed key range", meta.number));
                        }
                    }
                    edit.new_files.push((level, meta));
                }
                TAG_BLOB_FILE => {
                    let b = decode_blob_file(&mut r).ok_or_else(|| {
                        format!("blob file field at byte {at} is truncated or malformed")
                    })?;
                    edit.blob_files.push(b);
                }
                TAG_BLOB_DEAD => {
                    let d = decode_blob_dead(&mut r).ok_or_else(|| {
                        format!("dead blob records field at byte {at} is truncated or malformed")
                    })?;
                    edit.blob_dead.push(d);
                }
                TAG_DELETED_BLOB_FILE => edit
                    .deleted_blob_files
                    .push(r.varint64().ok_or_else(truncated)?),
                TAG_LOG_POSITION => {
                    let index = r.varint64().ok_or_else(truncated)?;
                    let context = r.length_prefixed().ok_or_else(truncated)?.to_vec();
                    edit.log_position = Some(LogPosition { index, context });
                }
                other => return Err(format!("unknown field tag {other} at byte {at}")),
            }
        }
        if !r.is_empty() {
            return Err(format!("{} bytes after the end tag", r.remaining().len()));
        }
        Ok(edit)
    }
}

fn level(v: u64) -> Result<Level, String> {
    if v >= MAX_ENCODED_LEVEL {
        return Err(format!("level {v} out of range"));
    }
    Ok(v as Level)
}

fn decode_file(r: &mut Reader<'_>) -> Option<FileMeta> {
    let number = r.varint64()?;
    let file_size = r.varint64()?;
    let smallest = r.length_prefixed()?.to_vec();
    let largest = r.length_prefixed()?.to_vec();
    Some(FileMeta {
        number,
        file_size,
        smallest,
        largest,
        smallest_seq: r.varint64()?,
        largest_seq: r.varint64()?,
        num_entries: r.varint64()?,
        num_deletions: r.varint64()?,
        raw_key_bytes: r.varint64()?,
        raw_value_bytes: r.varint64()?,
    })
}

fn decode_bitmap(r: &mut Reader<'_>) -> Option<Bitmap> {
    let mut bits = r.length_prefixed()?;
    let bitmap = Bitmap::decode(&mut bits)?;
    bits.is_empty().then_some(bitmap)
}

fn decode_blob_file(r: &mut Reader<'_>) -> Option<BlobFileEdit> {
    let logical = r.varint64()?;
    let physical = r.varint64()?;
    let count = u32::try_from(r.varint64()?).ok()?;
    let file_size = r.varint64()?;
    let record_bytes = r.varint64()?;
    let garbage_bytes = r.varint64()?;
    let survivors = match r.u8()? {
        0 => None,
        1 => Some(decode_bitmap(r)?),
        _ => return None,
    };
    let dead = decode_bitmap(r)?;
    let len = u64::from(count);
    if dead.len() != len || survivors.as_ref().is_some_and(|s| s.len() != len) {
        return None;
    }
    Some(BlobFileEdit {
        logical,
        physical,
        count,
        file_size,
        record_bytes,
        garbage_bytes,
        survivors,
        dead,
    })
}

fn decode_blob_dead(r: &mut Reader<'_>) -> Option<BlobDeadEdit> {
    let logical = r.varint64()?;
    let bytes = r.varint64()?;
    let n = r.varint64()?;
    // Each ordinal takes at least one byte: a count beyond the remaining bytes is damage.
    if n > r.remaining().len() as u64 {
        return None;
    }
    let mut ordinals = Vec::with_capacity(n as usize);
    let mut prev: Option<u64> = None;
    for _ in 0..n {
        let v = r.varint64()?;
        let o = match prev {
            None => v,
            Some(p) => p.checked_add(v)?.checked_add(1)?,
        };
        ordinals.push(u32::try_from(o).ok()?);
        prev = Some(o);
    }
    Some(BlobDeadEdit {
        logical,
        ordinals,
        bytes,
    })
}

/// Decodes arbitrary bytes as an edit, for fuzzing: must never panic, and whatever decodes must
/// encode back to the same bytes.
// A fuzz oracle: a failed round trip must panic so the fuzzer reports it.
#[allow(clippy::expect_used)]
pub(crate) fn fuzz_decode(data: &[u8]) {
    if let Ok(edit) = VersionEdit::decode(data) {
        let mut again = Vec::new();
        edit.encode(&mut again);
        let round = VersionEdit::decode(&again).expect("an encoded edit decodes");
        assert_eq!(round, edit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};
    use proptest::prelude::*;

    fn file() -> impl Strategy<Value = FileMeta> {
        (
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..20),
            any::<[u64; 6]>(),
        )
            .prop_map(|(number, file_size, key, v)| FileMeta {
                number,
                file_size,
                smallest: internal_key(&key, v[0] >> 8, ValueKind::Value),
                largest: internal_key(&key, v[1] >> 8, ValueKind::Deletion),
                smallest_seq: v[0],
                largest_seq: v[1],
                num_entries: v[2],
                num_deletions: v[3],
                raw_key_bytes: v[4],
                raw_value_bytes: v[5],
            })
    }

    fn edit() -> impl Strategy<Value = VersionEdit> {
        (
            proptest::collection::vec((0usize..7, file()), 0..5),
            proptest::collection::vec((0usize..7, any::<u64>()), 0..5),
            any::<[Option<u64>; 3]>(),
            proptest::collection::vec(
                (0usize..7, proptest::collection::vec(any::<u8>(), 0..10)),
                0..3,
            ),
            proptest::option::of((any::<u64>(), proptest::collection::vec(any::<u8>(), 0..30))),
        )
            .prop_map(
                |(new_files, deleted_files, c, compact_pointers, position)| VersionEdit {
                    new_files,
                    deleted_files,
                    log_number: c[0],
                    next_file_number: c[1],
                    last_seq: c[2],
                    compact_pointers,
                    log_position: position.map(|(index, context)| LogPosition { index, context }),
                    ..Default::default()
                },
            )
    }

    fn bitmap(len: u64, seed: u64) -> Bitmap {
        let mut b = Bitmap::new(len, false);
        let mut x = seed | 1;
        for i in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(3) {
                b.set(i);
            }
        }
        b
    }

    fn blob_edit() -> impl Strategy<Value = VersionEdit> {
        (
            edit(),
            proptest::collection::vec((any::<[u64; 6]>(), 0u32..300, any::<bool>()), 0..3),
            proptest::collection::vec(
                (
                    any::<u64>(),
                    any::<u64>(),
                    proptest::collection::btree_set(any::<u32>(), 0..20),
                ),
                0..3,
            ),
            proptest::collection::vec(any::<u64>(), 0..3),
        )
            .prop_map(|(mut e, files, dead, deleted)| {
                e.blob_files = files
                    .into_iter()
                    .map(|(v, count, has_survivors)| BlobFileEdit {
                        logical: v[0],
                        physical: v[1],
                        count,
                        file_size: v[2],
                        record_bytes: v[3],
                        garbage_bytes: v[4],
                        survivors: has_survivors.then(|| bitmap(u64::from(count), v[5])),
                        dead: bitmap(u64::from(count), v[5].rotate_left(7)),
                    })
                    .collect();
                e.blob_dead = dead
                    .into_iter()
                    .map(|(logical, bytes, ordinals)| BlobDeadEdit {
                        logical,
                        bytes,
                        ordinals: ordinals.into_iter().collect(),
                    })
                    .collect();
                e.deleted_blob_files = deleted;
                e
            })
    }

    proptest! {
        #[test]
        fn edits_round_trip_and_end_in_a_non_zero_byte(e in edit()) {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            prop_assert_ne!(buf.last().copied(), Some(0));
            prop_assert_eq!(VersionEdit::decode(&buf).unwrap(), e);
        }

        #[test]
        fn edits_with_blob_fields_round_trip(e in blob_edit()) {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            prop_assert_ne!(buf.last().copied(), Some(0));
            prop_assert_eq!(VersionEdit::decode(&buf).unwrap(), e);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            fuzz_decode(&data);
        }
    }

    #[test]
    fn truncated_or_extended_edits_are_rejected() {
        let mut e = VersionEdit {
            log_number: Some(7),
            last_seq: Some(99),
            ..Default::default()
        };
        e.deleted_files.push((2, 5));
        let mut buf = Vec::new();
        e.encode(&mut buf);
        for len in 0..buf.len() {
            assert!(
                VersionEdit::decode(&buf[..len]).is_err(),
                "prefix of {len} bytes decoded"
            );
        }
        buf.push(1);
        assert!(VersionEdit::decode(&buf).is_err());
    }

    #[test]
    fn unknown_tags_and_deep_levels_are_rejected() {
        assert!(VersionEdit::decode(&[20, 0x7f])
            .unwrap_err()
            .contains("unknown field tag 20"));
        assert!(VersionEdit::decode(&[TAG_DELETED_FILE as u8, 70, 1, 0x7f])
            .unwrap_err()
            .contains("level 70"));
    }
}
