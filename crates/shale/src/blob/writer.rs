//! Writing a blob file: [`BlobWriter`] appends records (new ones from a flush, or verified raw
//! copies from GC) and finishes the file with its offsets array and footer.
//!
//! Invariants:
//! - records are written back to back from [`HEADER_LEN`], and `offsets[i]` is where record `i`
//!   starts, so the file tiles with no gap (see `format.rs`);
//! - the finished file never exceeds [`MAX_BLOB_FILE_SIZE`]: `add` and `add_raw` check that the
//!   record, one more offsets entry and the footer still fit, and refuse with `InvalidArgument`
//!   before writing anything, so the writer stays usable and the caller can start a new file;
//! - after an I/O error the writer is unusable: every later call returns that error.
//!
//! Buffering: each small record is encoded into one scratch buffer and appended with one call (the
//! real file system already buffers small appends in user space, see `fs/real.rs`, so a second
//! buffer here would only copy twice). A value larger than [`COPY_VALUE_MAX`] is appended directly
//! after its prefix and key, without a copy.
//!
//! Concurrency: a writer has one owner (a flush or a GC task).

use super::format::{
    encode_offsets, encode_record_prefix, parse_record, record_len, Footer, Header, FOOTER_LEN,
    HEADER_LEN, MAX_BLOB_FILE_SIZE, MAX_RECORD_PREFIX_LEN, OFFSET_ENTRY_LEN,
};
use crate::error::{Error, IoContext, Result};
use crate::fs::WritableFile;
use std::path::PathBuf;

/// Values up to this many bytes are copied into the record buffer and appended in one call;
/// larger ones are appended separately, saving the copy.
const COPY_VALUE_MAX: usize = 4096;

/// A value larger than this is appended this many bytes at a time, asking the file system after
/// each piece to write it back (see [`crate::fs::WritableFile::start_writeback`]), so that a
/// large value's dirty pages never queue up ahead of other files' fsyncs.
pub(crate) const WRITEBACK_CHUNK: usize = 4 << 20;

/// Where a record landed in the file being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlobPos {
    /// The record's number in this file (its ordinal when the file is first written).
    pub index: u32,
    /// The offset of the record's first byte.
    pub offset: u64,
}

/// What a finished blob file holds, for the version's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlobFileInfo {
    /// The logical blob file id written in the header and footer.
    pub logical: u64,
    /// Records in the file.
    pub count: u32,
    /// Bytes in the file.
    pub file_size: u64,
    /// Sum of the records' value lengths.
    pub value_bytes: u64,
}

/// Writes one blob file. Call [`BlobWriter::add`] or [`BlobWriter::add_raw`] for each record,
/// then [`BlobWriter::finish`]. Dropping a writer without finishing leaves a partial file that the
/// caller deletes.
pub(crate) struct BlobWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    logical: u64,
    // INVARIANT: bytes appended to `file` so far.
    len: u64,
    // INVARIANT: offsets[i] is where record i starts; strictly increasing from HEADER_LEN.
    offsets: Vec<u32>,
    value_bytes: u64,
    // The largest file this writer produces; MAX_BLOB_FILE_SIZE except in tests.
    limit: u64,
    // The first I/O error: later calls fail with it (the file is unusable).
    err: Option<Error>,
    scratch: Vec<u8>,
}

impl BlobWriter {
    /// Starts a blob file for logical blob file `logical` in `file` (named `path` in errors) by
    /// writing its header.
    ///
    /// # Errors
    /// `Io` when the header cannot be appended.
    pub(crate) fn new(
        file: Box<dyn WritableFile>,
        path: PathBuf,
        logical: u64,
    ) -> Result<BlobWriter> {
        let mut w = BlobWriter {
            file,
            path,
            logical,
            len: 0,
            offsets: Vec::new(),
            value_bytes: 0,
            limit: MAX_BLOB_FILE_SIZE,
            err: None,
            scratch: Vec::new(),
        };
        w.append(&Header { logical }.encode())?;
        Ok(w)
    }

    /// The same writer producing files of at most `limit` bytes (tests of the size limit).
    #[cfg(test)]
    pub(crate) fn with_limit(mut self, limit: u64) -> BlobWriter {
        self.limit = limit.min(MAX_BLOB_FILE_SIZE);
        self
    }

    /// Appends a record of `key` and `value`.
    ///
    /// # Errors
    /// `InvalidArgument` (nothing written, the writer stays usable) when the record would make the
    /// finished file larger than [`MAX_BLOB_FILE_SIZE`]; `Io` when the append fails (the writer is
    /// then unusable).
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) -> Result<BlobPos> {
        self.check_usable()?;
        let rec_len = record_len(key.len(), value.len()).ok_or_else(|| self.too_large())?;
        let offset = self.reserve(rec_len)?;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        encode_record_prefix(&mut scratch, key, value);
        scratch.extend_from_slice(key);
        let result = if value.len() <= COPY_VALUE_MAX {
            scratch.extend_from_slice(value);
            self.append(&scratch)
        } else if value.len() <= WRITEBACK_CHUNK {
            self.append(&scratch).and_then(|()| self.append(value))
        } else {
            self.append(&scratch)
                .and_then(|()| self.append_paced(value))
        };
        if scratch.capacity() <= MAX_RECORD_PREFIX_LEN + 2 * COPY_VALUE_MAX {
            self.scratch = scratch;
        }
        result?;
        Ok(self.commit(offset, value.len() as u64))
    }

    /// Appends an already encoded record (GC copies verified survivors this way), byte for byte.
    /// Its checksum is not checked again: the caller got it from [`super::BlobReader::raw`], which
    /// verified it.
    ///
    /// # Errors
    /// `InvalidArgument` (nothing written) when `record` is not exactly one record (its lengths do
    /// not parse or do not end where it ends) or would make the file too large; `Io` as for `add`.
    pub(crate) fn add_raw(&mut self, record: &[u8]) -> Result<BlobPos> {
        self.check_usable()?;
        let layout = parse_record(record).map_err(|(at, what)| {
            Error::invalid_argument(format!(
                "raw blob record for {} is malformed at byte {at}: {what}",
                self.path.display()
            ))
        })?;
        let offset = self.reserve(record.len() as u64)?;
        self.append(record)?;
        Ok(self.commit(offset, layout.value.len() as u64))
    }

    /// Records written so far.
    pub(crate) fn count(&self) -> u32 {
        // The file-size limit keeps the record count far below u32::MAX.
        self.offsets.len() as u32
    }

    /// Bytes written so far (header and records).
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Sum of the value lengths written so far.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    pub(crate) fn value_bytes(&self) -> u64 {
        self.value_bytes
    }

    /// Writes the offsets array and the footer, syncs the file and returns what it holds. The
    /// file's directory entry is not synced: the caller does that before it records the file.
    ///
    /// # Errors
    /// `Io` when a write or the sync fails, or an earlier append failed.
    pub(crate) fn finish(mut self) -> Result<BlobFileInfo> {
        self.check_usable()?;
        let mut tail = Vec::with_capacity(self.offsets.len() * OFFSET_ENTRY_LEN + FOOTER_LEN);
        encode_offsets(&mut tail, &self.offsets);
        let footer = Footer {
            offsets_offset: self.len,
            count: self.offsets.len() as u64,
            offsets_crc: crc32c::crc32c(&tail),
            value_bytes: self.value_bytes,
            logical: self.logical,
        };
        tail.extend_from_slice(&footer.encode());
        self.append(&tail)?;
        let path = &self.path;
        self.file
            .sync()
            .ctx(|| format!("sync blob file {}", path.display()))?;
        Ok(BlobFileInfo {
            logical: self.logical,
            count: self.count(),
            file_size: self.len,
            value_bytes: self.value_bytes,
        })
    }

    fn check_usable(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn too_large(&self) -> Error {
        Error::invalid_argument(format!(
            "blob file {} would exceed its size limit of {} bytes",
            self.path.display(),
            self.limit
        ))
    }

    /// Checks that a record of `rec_len` bytes, its offsets entry and the footer fit the size
    /// limit; returns where the record will start.
    fn reserve(&self, rec_len: u64) -> Result<u64> {
        let entries = (self.offsets.len() as u64 + 1) * OFFSET_ENTRY_LEN as u64;
        let end = self
            .len
            .checked_add(rec_len)
            .and_then(|e| e.checked_add(entries))
            .and_then(|e| e.checked_add(FOOTER_LEN as u64));
        match end {
            Some(end) if end <= self.limit => Ok(self.len),
            _ => Err(self.too_large()),
        }
    }

    /// Notes a record appended at `offset` (checked by `reserve` to fit a `u32`).
    fn commit(&mut self, offset: u64, value_len: u64) -> BlobPos {
        let index = self.count();
        self.offsets.push(offset as u32);
        self.value_bytes += value_len;
        BlobPos { index, offset }
    }

    /// Appends a large `data` [`WRITEBACK_CHUNK`] bytes at a time, starting the write-back of
    /// each piece.
    fn append_paced(&mut self, data: &[u8]) -> Result<()> {
        for piece in data.chunks(WRITEBACK_CHUNK) {
            self.append(piece)?;
            let path = &self.path;
            if let Err(e) = self
                .file
                .start_writeback()
                .ctx(|| format!("write blob file {}", path.display()))
            {
                self.err = Some(e.clone());
                return Err(e);
            }
        }
        Ok(())
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.check_usable()?;
        let path = &self.path;
        match self
            .file
            .append(data)
            .ctx(|| format!("write blob file {}", path.display()))
        {
            Ok(()) => {
                self.len += data.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.err = Some(e.clone());
                Err(e)
            }
        }
    }
}

// The header alone fits any limit a writer accepts.
const _: () = assert!(HEADER_LEN + FOOTER_LEN < MAX_BLOB_FILE_SIZE as usize);
