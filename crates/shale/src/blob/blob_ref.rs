//! [`BlobRef`]: the value the LSM stores for an entry of kind `ValueKind::BlobRef`, a stable
//! handle to a record in a logical blob file.
//!
//! Encoding (do not change: on-disk format, inside SST values):
//! `varint64 file | varint32 ordinal | varint32 value_len | varint64 offset`, nothing after.
//!
//! Invariants: the handle never changes after the flush that writes it. GC rewrites a blob file
//! under the same logical id and keeps a survivors bitmap instead, so `ordinal` stays valid and
//! `offset` is only a hint, exact in the first physical file of the logical file (see
//! `docs/format/blob.md`).
//!
//! Concurrency: a plain value.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use crate::varint::{get_varint32, get_varint64, put_varint32, put_varint64};

/// A stable handle to one record of a logical blob file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BlobRef {
    /// The logical blob file id.
    pub file: u64,
    /// The record's number in the logical file as first written.
    pub ordinal: u32,
    /// The value's length (for garbage accounting and read sizing without opening the file).
    pub value_len: u32,
    /// Where the record starts in the first physical file of the logical file.
    pub offset: u64,
}

/// The longest encoding: two varint64s and two varint32s.
pub(crate) const MAX_BLOB_REF_LEN: usize = 10 + 5 + 5 + 10;

impl BlobRef {
    /// Appends the encoding.
    pub(crate) fn encode(&self, buf: &mut Vec<u8>) {
        put_varint64(buf, self.file);
        put_varint32(buf, self.ordinal);
        put_varint32(buf, self.value_len);
        put_varint64(buf, self.offset);
    }

    /// The encoding as a new vector.
    pub(crate) fn to_vec(self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(MAX_BLOB_REF_LEN);
        self.encode(&mut buf);
        buf
    }

    /// Decodes exactly one `BlobRef` filling all of `data`; `None` when the bytes are truncated,
    /// a field overflows, or bytes follow.
    pub(crate) fn decode(data: &[u8]) -> Option<BlobRef> {
        let (file, a) = get_varint64(data)?;
        let data = data.get(a..)?;
        let (ordinal, b) = get_varint32(data)?;
        let data = data.get(b..)?;
        let (value_len, c) = get_varint32(data)?;
        let data = data.get(c..)?;
        let (offset, d) = get_varint64(data)?;
        if d != data.len() {
            return None;
        }
        Some(BlobRef {
            file,
            ordinal,
            value_len,
            offset,
        })
    }
}
