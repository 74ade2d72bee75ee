//! The properties block: statistics about a table, read when it is opened.
//!
//! ```text
//! properties = varint64 num_entries | num_deletions | raw_key_bytes | raw_value_bytes
//!            | smallest_seq | largest_seq | num_data_blocks | index_size | filter_size
//!            | varint64 num_blob_files | (varint64 blob_file_number | varint64 bytes) * num_blob_files
//! ```
//! The fields come in this order and fill the block exactly. Do not change: on-disk format (add
//! fields under a new format version).

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use crate::varint::{put_varint64, Reader};

/// Statistics about a table, written by the builder and read back by `Table::open`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Properties {
    /// Entries of every kind.
    pub num_entries: u64,
    /// Entries of kind `Deletion`.
    pub num_deletions: u64,
    /// Sum of internal key lengths (trailer included).
    pub raw_key_bytes: u64,
    /// Sum of value lengths (as stored: a `BlobRef` value counts its reference, not the blob).
    pub raw_value_bytes: u64,
    /// Smallest sequence number in the table (0 for an empty table).
    pub smallest_seq: u64,
    /// Largest sequence number in the table (0 for an empty table).
    pub largest_seq: u64,
    /// Data blocks in the table.
    pub num_data_blocks: u64,
    /// Bytes of the index block on disk, trailer included.
    pub index_size: u64,
    /// Bytes of the filter block on disk, trailer included (0 without a filter).
    pub filter_size: u64,
    /// Bytes of blob values referenced per blob file, sorted by blob file number, no duplicates.
    pub blob_refs: Vec<(u64, u64)>,
}

impl Properties {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(64 + self.blob_refs.len() * 8);
        for v in [
            self.num_entries,
            self.num_deletions,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.smallest_seq,
            self.largest_seq,
            self.num_data_blocks,
            self.index_size,
            self.filter_size,
            self.blob_refs.len() as u64,
        ] {
            put_varint64(&mut buf, v);
        }
        for &(file, bytes) in &self.blob_refs {
            put_varint64(&mut buf, file);
            put_varint64(&mut buf, bytes);
        }
        buf
    }

    /// Decodes a properties block. Errors are `(offset, what)`.
    pub(crate) fn decode(data: &[u8]) -> Result<Properties, (usize, &'static str)> {
        let mut r = Reader::new(data);
        let field = |r: &mut Reader<'_>| {
            let at = r.position();
            r.varint64().ok_or((at, "bad properties field"))
        };
        let mut p = Properties {
            num_entries: field(&mut r)?,
            num_deletions: field(&mut r)?,
            raw_key_bytes: field(&mut r)?,
            raw_value_bytes: field(&mut r)?,
            smallest_seq: field(&mut r)?,
            largest_seq: field(&mut r)?,
            num_data_blocks: field(&mut r)?,
            index_size: field(&mut r)?,
            filter_size: field(&mut r)?,
            blob_refs: Vec::new(),
        };
        let count = field(&mut r)?;
        // Each pair takes at least two bytes: bound the allocation by what is there.
        let cap = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .min(r.remaining().len() / 2);
        p.blob_refs.reserve(cap);
        let mut last: Option<u64> = None;
        for _ in 0..count {
            let at = r.position();
            let file = field(&mut r)?;
            let bytes = field(&mut r)?;
            if last.is_some_and(|l| l >= file) {
                return Err((at, "blob references not sorted"));
            }
            last = Some(file);
            p.blob_refs.push((file, bytes));
        }
        if !r.is_empty() {
            return Err((r.position(), "trailing bytes after properties"));
        }
        if p.num_deletions > p.num_entries || p.smallest_seq > p.largest_seq {
            return Err((0, "inconsistent properties"));
        }
        Ok(p)
    }
}
