//! The byte offsets of the blob file format: header, records, offsets array and footer. The only
//! module that knows where things sit in a blob file; the page `docs/format/blob.md` draws the same
//! bytes.
//!
//! ```text
//! [header: HEADER_LEN bytes]
//! [record 0][record 1] ... [record n-1]      back to back from HEADER_LEN
//! [offsets array: n x u32]                   offsets[i] = first byte of record i
//! [footer: FOOTER_LEN bytes]
//! ```
//!
//! Invariants:
//! - A record is position independent: `crc32c | key_len | value_len | key | value`, its checksum
//!   covering every byte after it, so GC copies it byte for byte into another file.
//! - The regions tile the file with no gap: every byte belongs to the header (own CRC), a record
//!   (own CRC), the offsets array (CRC in the footer) or the footer (own CRC).
//! - A file is at most [`MAX_BLOB_FILE_SIZE`] bytes, so every offset fits the array's `u32`.
//! - Decoders are total: a bad byte is an `Err((offset, what))`, never a panic. The offset is
//!   relative to the slice decoded; callers add the file offset and name the file.
//!
//! Concurrency: pure functions over bytes.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use crate::varint::{get_varint32, put_varint32, Reader};
use std::ops::Range;

/// Magic number at the start and in the footer of every blob file: "SHALEBLB" in ASCII.
/// Do not change: on-disk format.
pub(crate) const BLOB_MAGIC: u64 = 0x424c_4245_4c41_4853;

/// The format version written by this code. Do not change: on-disk format (bump it and keep
/// reading the old one when the layout changes).
pub(crate) const BLOB_FORMAT_VERSION: u32 = 1;

/// Size of the header in bytes: magic u64, version u32, logical id u64, crc u32.
/// Do not change: on-disk format.
pub(crate) const HEADER_LEN: usize = 24;

/// Size of the footer in bytes. Do not change: on-disk format.
pub(crate) const FOOTER_LEN: usize = 52;

/// Bytes per entry of the offsets array (a little-endian `u32`). Do not change: on-disk format.
pub(crate) const OFFSET_ENTRY_LEN: usize = 4;

/// Bytes of a record's checksum. Do not change: on-disk format.
pub(crate) const RECORD_CRC_LEN: usize = 4;

/// The smallest record: checksum plus two one-byte varints (empty key, empty value).
pub(crate) const MIN_RECORD_LEN: usize = RECORD_CRC_LEN + 2;

/// The largest record prefix: checksum plus two five-byte varint32s.
pub(crate) const MAX_RECORD_PREFIX_LEN: usize = RECORD_CRC_LEN + 5 + 5;

/// The largest blob file: offsets are stored as `u32`, so no byte of the file, footer included,
/// may sit past `u32::MAX`. Do not change: on-disk format.
pub(crate) const MAX_BLOB_FILE_SIZE: u64 = u32::MAX as u64;

const HEADER_VERSION_AT: usize = 8;
const HEADER_LOGICAL_AT: usize = 12;
const HEADER_CRC_AT: usize = 20;

const FOOTER_COUNT_AT: usize = 8;
const FOOTER_OFFSETS_CRC_AT: usize = 16;
const FOOTER_VALUE_BYTES_AT: usize = 20;
const FOOTER_LOGICAL_AT: usize = 28;
const FOOTER_MAGIC_AT: usize = 36;
const FOOTER_VERSION_AT: usize = 44;
const FOOTER_CRC_AT: usize = 48;

/// The encoded length of a record with a key and a value of these lengths, `None` when a length
/// does not fit a varint32 or the sum overflows.
pub(crate) fn record_len(key_len: usize, value_len: usize) -> Option<u64> {
    let k = u32::try_from(key_len).ok()?;
    let v = u32::try_from(value_len).ok()?;
    let prefix = RECORD_CRC_LEN + varint32_len(k) + varint32_len(v);
    (prefix as u64).checked_add(k as u64)?.checked_add(v as u64)
}

fn varint32_len(mut v: u32) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends the record prefix (checksum, key length, value length) of `key` and `value`; the
/// caller appends `key` then `value` right after it. Lengths must fit a `u32` (checked by the
/// writer through [`record_len`]); longer ones are truncated here, so never pass them.
pub(crate) fn encode_record_prefix(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let crc_at = buf.len();
    buf.extend_from_slice(&[0u8; RECORD_CRC_LEN]);
    let lens_at = buf.len();
    put_varint32(buf, key.len() as u32);
    put_varint32(buf, value.len() as u32);
    let crc = crc32c::crc32c_append(
        crc32c::crc32c_append(crc32c::crc32c(buf.get(lens_at..).unwrap_or_default()), key),
        value,
    );
    if let Some(slot) = buf.get_mut(crc_at..lens_at) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
}

/// Appends the whole record of `key` and `value`. Lengths as for [`encode_record_prefix`].
#[allow(dead_code)] // API of the blob layer; only tests use it so far
pub(crate) fn encode_record(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    encode_record_prefix(buf, key, value);
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
}

/// Where the key and the value sit inside one encoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordLayout {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// Parses the lengths of exactly one record (`record` must end where the value ends) without
/// checking its checksum.
pub(crate) fn parse_record(record: &[u8]) -> Result<RecordLayout, (usize, &'static str)> {
    let lens = record
        .get(RECORD_CRC_LEN..)
        .ok_or((0, "record shorter than its checksum"))?;
    let (key_len, a) = get_varint32(lens).ok_or((RECORD_CRC_LEN, "bad record key length"))?;
    let (value_len, b) = get_varint32(lens.get(a..).unwrap_or_default())
        .ok_or((RECORD_CRC_LEN + a, "bad record value length"))?;
    // At most 4 + 5 + 5 bytes: no overflow.
    let key_start = RECORD_CRC_LEN + a + b;
    let key_end = key_start
        .checked_add(key_len as usize)
        .ok_or((key_start, "record key length overflows"))?;
    let value_end = key_end
        .checked_add(value_len as usize)
        .ok_or((key_end, "record value length overflows"))?;
    if value_end > record.len() {
        return Err((key_start, "record lengths run past the record's end"));
    }
    if value_end < record.len() {
        return Err((value_end, "trailing bytes after the record's value"));
    }
    Ok(RecordLayout {
        key: key_start..key_end,
        value: key_end..value_end,
    })
}

/// Checks the checksum of exactly one record and parses its lengths.
pub(crate) fn decode_record(record: &[u8]) -> Result<RecordLayout, (usize, &'static str)> {
    let stored = record
        .get(..RECORD_CRC_LEN)
        .ok_or((0, "record shorter than its checksum"))?;
    let stored = u32::from_le_bytes(stored.try_into().map_err(|_| (0, "record truncated"))?);
    let body = record.get(RECORD_CRC_LEN..).unwrap_or_default();
    if crc32c::crc32c(body) != stored {
        return Err((0, "record checksum mismatch"));
    }
    parse_record(record)
}

/// The header: which logical blob file this physical file holds.
///
/// ```text
/// 0 u64 magic   8 u32 version   12 u64 logical id   20 u32 crc32c of bytes 0..20
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub logical: u64,
}

impl Header {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..HEADER_VERSION_AT].copy_from_slice(&BLOB_MAGIC.to_le_bytes());
        out[HEADER_VERSION_AT..HEADER_LOGICAL_AT]
            .copy_from_slice(&BLOB_FORMAT_VERSION.to_le_bytes());
        out[HEADER_LOGICAL_AT..HEADER_CRC_AT].copy_from_slice(&self.logical.to_le_bytes());
        let crc = crc32c::crc32c(&out[..HEADER_CRC_AT]);
        out[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes exactly [`HEADER_LEN`] bytes. Checks the magic, the checksum and the version.
    pub(crate) fn decode(data: &[u8]) -> Result<Header, (usize, &'static str)> {
        if data.len() != HEADER_LEN {
            return Err((0, "header has the wrong length"));
        }
        let mut r = Reader::new(data);
        let magic = r.u64_le().ok_or((0, "header truncated"))?;
        let version = r.u32_le().ok_or((HEADER_VERSION_AT, "header truncated"))?;
        let logical = r.u64_le().ok_or((HEADER_LOGICAL_AT, "header truncated"))?;
        let stored_crc = r.u32_le().ok_or((HEADER_CRC_AT, "header truncated"))?;
        if magic != BLOB_MAGIC {
            return Err((0, "bad magic number: not a blob file"));
        }
        if crc32c::crc32c(data.get(..HEADER_CRC_AT).unwrap_or_default()) != stored_crc {
            return Err((HEADER_CRC_AT, "header checksum mismatch"));
        }
        if version != BLOB_FORMAT_VERSION {
            return Err((HEADER_VERSION_AT, "unsupported blob format version"));
        }
        Ok(Header { logical })
    }
}

/// The footer: where the offsets array is and what the file holds.
///
/// ```text
///  0 u64 offsets array offset   8 u64 record count   16 u32 crc32c of the offsets array
/// 20 u64 total value bytes     28 u64 logical id     36 u64 magic
/// 44 u32 version               48 u32 crc32c of bytes 0..48
/// ```
/// All integers little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub offsets_offset: u64,
    pub count: u64,
    pub offsets_crc: u32,
    pub value_bytes: u64,
    pub logical: u64,
}

impl Footer {
    pub(crate) fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        out[..FOOTER_COUNT_AT].copy_from_slice(&self.offsets_offset.to_le_bytes());
        out[FOOTER_COUNT_AT..FOOTER_OFFSETS_CRC_AT].copy_from_slice(&self.count.to_le_bytes());
        out[FOOTER_OFFSETS_CRC_AT..FOOTER_VALUE_BYTES_AT]
            .copy_from_slice(&self.offsets_crc.to_le_bytes());
        out[FOOTER_VALUE_BYTES_AT..FOOTER_LOGICAL_AT]
            .copy_from_slice(&self.value_bytes.to_le_bytes());
        out[FOOTER_LOGICAL_AT..FOOTER_MAGIC_AT].copy_from_slice(&self.logical.to_le_bytes());
        out[FOOTER_MAGIC_AT..FOOTER_VERSION_AT].copy_from_slice(&BLOB_MAGIC.to_le_bytes());
        out[FOOTER_VERSION_AT..FOOTER_CRC_AT].copy_from_slice(&BLOB_FORMAT_VERSION.to_le_bytes());
        let crc = crc32c::crc32c(&out[..FOOTER_CRC_AT]);
        out[FOOTER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes exactly [`FOOTER_LEN`] bytes. Checks the magic, the checksum and the version; the
    /// fields' consistency with the file is the reader's job.
    pub(crate) fn decode(data: &[u8]) -> Result<Footer, (usize, &'static str)> {
        if data.len() != FOOTER_LEN {
            return Err((0, "footer has the wrong length"));
        }
        let mut r = Reader::new(data);
        let offsets_offset = r.u64_le().ok_or((0, "footer truncated"))?;
        let count = r.u64_le().ok_or((FOOTER_COUNT_AT, "footer truncated"))?;
        let offsets_crc = r
            .u32_le()
            .ok_or((FOOTER_OFFSETS_CRC_AT, "footer truncated"))?;
        let value_bytes = r
            .u64_le()
            .ok_or((FOOTER_VALUE_BYTES_AT, "footer truncated"))?;
        let logical = r.u64_le().ok_or((FOOTER_LOGICAL_AT, "footer truncated"))?;
        let magic = r.u64_le().ok_or((FOOTER_MAGIC_AT, "footer truncated"))?;
        let version = r.u32_le().ok_or((FOOTER_VERSION_AT, "footer truncated"))?;
        let stored_crc = r.u32_le().ok_or((FOOTER_CRC_AT, "footer truncated"))?;
        if magic != BLOB_MAGIC {
            return Err((FOOTER_MAGIC_AT, "bad magic number: not a blob file"));
        }
        if crc32c::crc32c(data.get(..FOOTER_CRC_AT).unwrap_or_default()) != stored_crc {
            return Err((FOOTER_CRC_AT, "footer checksum mismatch"));
        }
        if version != BLOB_FORMAT_VERSION {
            return Err((FOOTER_VERSION_AT, "unsupported blob format version"));
        }
        Ok(Footer {
            offsets_offset,
            count,
            offsets_crc,
            value_bytes,
            logical,
        })
    }
}

/// Appends the offsets array for `offsets`.
pub(crate) fn encode_offsets(buf: &mut Vec<u8>, offsets: &[u32]) {
    buf.reserve(offsets.len().saturating_mul(OFFSET_ENTRY_LEN));
    for o in offsets {
        buf.extend_from_slice(&o.to_le_bytes());
    }
}

/// Entry `i` of an encoded offsets array, `None` past its end.
#[inline]
pub(crate) fn offset_entry(array: &[u8], i: usize) -> Option<u32> {
    let start = i.checked_mul(OFFSET_ENTRY_LEN)?;
    let bytes = array.get(start..start.checked_add(OFFSET_ENTRY_LEN)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Checks an encoded offsets array against the record area `records` (`HEADER_LEN` up to the
/// array's own offset): entry 0 is the area's start, entries strictly increase by at least
/// [`MIN_RECORD_LEN`], and the last record has room before the area's end. An empty array needs an
/// empty area. Returns the index of the first bad entry and what is wrong with it.
pub(crate) fn check_offsets(
    array: &[u8],
    records: Range<u64>,
) -> Result<(), (usize, &'static str)> {
    if !array.len().is_multiple_of(OFFSET_ENTRY_LEN) {
        return Err((0, "offsets array length is not a multiple of 4"));
    }
    let count = array.len() / OFFSET_ENTRY_LEN;
    if count == 0 {
        return if records.is_empty() {
            Ok(())
        } else {
            Err((0, "record area is not empty but the file lists no records"))
        };
    }
    let mut expected_min = records.start;
    for (i, chunk) in array.chunks_exact(OFFSET_ENTRY_LEN).enumerate() {
        let o = u64::from(u32::from_le_bytes(
            chunk
                .try_into()
                .map_err(|_| (i, "offsets array truncated"))?,
        ));
        if i == 0 && o != records.start {
            return Err((0, "first record does not start right after the header"));
        }
        if o < expected_min {
            return Err((i, "record offsets do not increase"));
        }
        let end_min = o
            .checked_add(MIN_RECORD_LEN as u64)
            .ok_or((i, "record offset overflows"))?;
        if end_min > records.end {
            return Err((i, "record offset outside the record area"));
        }
        expected_min = end_min;
    }
    Ok(())
}
