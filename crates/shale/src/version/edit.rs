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

/// Decodes arbitrary bytes as an edit, for fuzzing: must never panic, and whatever decodes must
/// encode back to the same bytes.
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
        )
            .prop_map(
                |(new_files, deleted_files, c, compact_pointers)| VersionEdit {
                    new_files,
                    deleted_files,
                    log_number: c[0],
                    next_file_number: c[1],
                    last_seq: c[2],
                    compact_pointers,
                },
            )
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
        assert!(VersionEdit::decode(&[9, 0x7f])
            .unwrap_err()
            .contains("unknown field tag 9"));
        assert!(VersionEdit::decode(&[TAG_DELETED_FILE as u8, 70, 1, 0x7f])
            .unwrap_err()
            .contains("level 70"));
    }
}
