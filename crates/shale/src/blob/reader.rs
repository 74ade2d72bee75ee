//! Reading a blob file: [`BlobReader`] (an open file: header, footer and offsets array verified
//! and kept in memory) and [`BlobRecord`] (one verified record).
//!
//! Invariants checked by [`BlobReader::open`], so that a later read only verifies its record:
//! - the header's and footer's magic, checksum and version are good, and they name the same
//!   logical file;
//! - header, record area, offsets array and footer tile the file with no gap, and the file is at
//!   most [`MAX_BLOB_FILE_SIZE`] bytes;
//! - the offsets array matches its checksum; its entries start at [`HEADER_LEN`] and strictly
//!   increase by at least `MIN_RECORD_LEN` inside the record area, so record `i` is exactly the
//!   bytes from `offsets[i]` to `offsets[i + 1]` (or to the offsets array, for the last one).
//!
//! Bytes from disk never cause a panic: every failure is a `Corruption` error naming the file and
//! the offset (of the record, for a bad record).
//!
//! Concurrency: a `BlobReader` is immutable after `open`, `Send + Sync`, and shared by all readers
//! and GC tasks. On a file system that maps files (`RandomAccessFile::mapped`) records are
//! zero-copy slices of the map; otherwise each read is one `read_exact_at`.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use super::format::{
    check_offsets, decode_record, offset_entry, Footer, Header, RecordLayout, FOOTER_LEN,
    HEADER_LEN, MAX_BLOB_FILE_SIZE, OFFSET_ENTRY_LEN,
};
use crate::error::{Error, IoContext, Result};
use crate::fs::RandomAccessFile;
use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One verified record. On a mapped file both fields are slices of the map (no copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlobRecord {
    pub key: Bytes,
    pub value: Bytes,
}

/// An open blob file.
pub(crate) struct BlobReader {
    file: Arc<dyn RandomAccessFile>,
    /// The whole file without copies, when the file system maps it; records are then slices of it.
    map: Option<Bytes>,
    path: PathBuf,
    logical: u64,
    // INVARIANT: the number of entries in `offsets`.
    count: u32,
    file_size: u64,
    value_bytes: u64,
    // INVARIANT: the verified offsets array (see the module invariants): `count` little-endian
    // u32 entries.
    offsets: Bytes,
    // INVARIANT: where the offsets array starts = where the record area ends.
    records_end: u64,
}

impl BlobReader {
    /// Reads and verifies the header, footer and offsets array of the blob file in `file` (named
    /// `path` in errors). Records are read later, one at a time.
    ///
    /// # Errors
    /// `Io` when a read fails; `Corruption` naming `path` and the offset when a check fails.
    pub(crate) fn open(file: Arc<dyn RandomAccessFile>, path: PathBuf) -> Result<BlobReader> {
        let file_size = file.len();
        if file_size < (HEADER_LEN + FOOTER_LEN) as u64 {
            return Err(Error::corruption(
                &path,
                0,
                "file too short to be a blob file",
            ));
        }
        if file_size > MAX_BLOB_FILE_SIZE {
            return Err(Error::corruption(
                &path,
                MAX_BLOB_FILE_SIZE,
                "file larger than the blob format allows",
            ));
        }
        let map = file.mapped().filter(|m| m.len() as u64 == file_size);
        let read = |offset: u64, len: usize| -> Result<Bytes> {
            read_range(&*file, map.as_ref(), &path, offset, len)
        };

        let header = Header::decode(&read(0, HEADER_LEN)?)
            .map_err(|(at, what)| Error::corruption(&path, at as u64, what))?;
        let footer_at = file_size - FOOTER_LEN as u64;
        let footer = Footer::decode(&read(footer_at, FOOTER_LEN)?)
            .map_err(|(at, what)| Error::corruption(&path, footer_at + at as u64, what))?;
        if footer.logical != header.logical {
            return Err(Error::corruption(
                &path,
                footer_at,
                format!(
                    "footer names logical blob file {} but the header {}",
                    footer.logical, header.logical
                ),
            ));
        }

        // Header, records, offsets array and footer tile the file.
        let count = u32::try_from(footer.count).ok();
        let array_len = footer.count.checked_mul(OFFSET_ENTRY_LEN as u64);
        let tiles = footer.offsets_offset >= HEADER_LEN as u64
            && array_len.and_then(|n| footer.offsets_offset.checked_add(n)) == Some(footer_at);
        let (Some(count), true) = (count, tiles) else {
            return Err(Error::corruption(
                &path,
                footer_at,
                "footer's offsets array does not fit between the records and the footer",
            ));
        };
        let array_at = footer.offsets_offset;
        // `tiles` bounds the array by the file size, which fits a u32.
        let offsets = read(array_at, count as usize * OFFSET_ENTRY_LEN)?;
        if crc32c::crc32c(&offsets) != footer.offsets_crc {
            return Err(Error::corruption(
                &path,
                array_at,
                "offsets array checksum mismatch",
            ));
        }
        check_offsets(&offsets, HEADER_LEN as u64..array_at).map_err(|(i, what)| {
            Error::corruption(
                &path,
                array_at + (i * OFFSET_ENTRY_LEN) as u64,
                format!("{what} (entry {i})"),
            )
        })?;
        Ok(BlobReader {
            file,
            map,
            path,
            logical: header.logical,
            count,
            file_size,
            value_bytes: footer.value_bytes,
            offsets,
            records_end: array_at,
        })
    }

    /// The logical blob file id this file holds.
    pub(crate) fn logical(&self) -> u64 {
        self.logical
    }

    /// Records in this file.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// Bytes in the file.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    pub(crate) fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Sum of the records' value lengths, as written in the footer.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    pub(crate) fn value_bytes(&self) -> u64 {
        self.value_bytes
    }

    /// The file's path, as given to `open`.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of header, offsets array and footer: what `open` read besides records.
    pub(crate) fn metadata_len(&self) -> u64 {
        (HEADER_LEN + FOOTER_LEN) as u64 + self.offsets.len() as u64
    }

    /// Where record `index` starts.
    ///
    /// # Errors
    /// `Corruption` when `index` is not below [`BlobReader::count`] (an index comes from a
    /// `BlobRef` on disk, so a bad one is damage, not a caller's mistake).
    pub(crate) fn record_offset(&self, index: u32) -> Result<u64> {
        offset_entry(&self.offsets, index as usize)
            .map(u64::from)
            .ok_or_else(|| {
                Error::corruption(
                    &self.path,
                    self.records_end,
                    format!(
                        "blob record index {index} out of range: the file holds {} records",
                        self.count
                    ),
                )
            })
    }

    /// Reads and verifies record `index`.
    ///
    /// # Errors
    /// `Corruption` naming the file and the record's offset when the record fails its checksum or
    /// does not parse, or when `index` is out of range; `Io` when the read fails.
    pub(crate) fn get(&self, index: u32) -> Result<BlobRecord> {
        let (raw, layout) = self.read_record(index)?;
        Ok(split(&raw, layout))
    }

    /// Reads and verifies record `index`, which the caller expects at `offset` (the offset hint of
    /// a `BlobRef`).
    ///
    /// # Errors
    /// As [`BlobReader::get`], plus `Corruption` when record `index` does not start at `offset`.
    pub(crate) fn get_at(&self, offset: u64, index: u32) -> Result<BlobRecord> {
        let actual = self.record_offset(index)?;
        if actual != offset {
            return Err(Error::corruption(
                &self.path,
                offset,
                format!("blob record {index} starts at offset {actual}, not at the expected one"),
            ));
        }
        self.get(index)
    }

    /// The verified encoded record `index`, for copying byte for byte into another blob file.
    ///
    /// # Errors
    /// As [`BlobReader::get`].
    pub(crate) fn raw(&self, index: u32) -> Result<Bytes> {
        Ok(self.read_record(index)?.0)
    }

    fn read_record(&self, index: u32) -> Result<(Bytes, RecordLayout)> {
        let start = self.record_offset(index)?;
        let end = match index.checked_add(1) {
            Some(next) if next < self.count => self.record_offset(next)?,
            _ => self.records_end,
        };
        // Both inside the file (checked at open), which fits a u32; start < end by the invariant.
        let len = end.saturating_sub(start) as usize;
        let raw = read_range(&*self.file, self.map.as_ref(), &self.path, start, len)?;
        let layout = decode_record(&raw).map_err(|(at, what)| {
            Error::corruption(
                &self.path,
                start,
                format!("blob record {index}: {what} (byte {at} of the record)"),
            )
        })?;
        Ok((raw, layout))
    }
}

fn split(raw: &Bytes, layout: RecordLayout) -> BlobRecord {
    BlobRecord {
        key: raw.slice(layout.key),
        value: raw.slice(layout.value),
    }
}

/// `len` bytes at `offset`: a slice of `map` when there is one, else one read.
fn read_range(
    file: &dyn RandomAccessFile,
    map: Option<&Bytes>,
    path: &Path,
    offset: u64,
    len: usize,
) -> Result<Bytes> {
    let range = usize::try_from(offset)
        .ok()
        .and_then(|start| Some(start..start.checked_add(len)?));
    match (map, range) {
        (Some(map), Some(range)) if range.end <= map.len() => Ok(map.slice(range)),
        (Some(_), _) => Err(Error::corruption(
            path,
            offset,
            "read past the end of the file",
        )),
        (None, _) => {
            let mut buf = vec![0u8; len];
            file.read_exact_at(offset, &mut buf)
                .ctx(|| format!("read blob file {} at offset {offset}", path.display()))?;
            Ok(Bytes::from(buf))
        }
    }
}

impl std::fmt::Debug for BlobReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobReader")
            .field("path", &self.path)
            .field("logical", &self.logical)
            .field("count", &self.count)
            .field("file_size", &self.file_size)
            .field("mapped", &self.map.is_some())
            .finish_non_exhaustive()
    }
}
