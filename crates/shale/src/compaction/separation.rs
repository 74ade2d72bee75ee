//! Key-value separation at flush: values of at least `min_blob_size` bytes go to blob files and
//! the SST keeps a `BlobRef`.
//!
//! A [`BlobSink`] writes blob files for one flush, starting a new one when the current one
//! reaches `blob_file_size`. Each file is synced when finished, before the flush's MANIFEST edit
//! names it. A blob file's logical number is the number of its first physical file.
//!
//! Also here: the size of a blob record as garbage accounting counts it, so that compaction can
//! turn a dropped reference into exact garbage bytes without reading the blob file.

use crate::blob::{record_len, Bitmap, BlobRef, BlobWriter};
use crate::error::{Error, Result};
use crate::filename;
use crate::fs::Fs;
use crate::version::edit::BlobFileEdit;
use std::path::Path;
use std::sync::Arc;

/// Bytes of the record of a `key_len`-byte key and a `value_len`-byte value in a blob file
/// (docs/format/blob.md): what garbage accounting counts for it. Lengths come from a `BlobRef`
/// and a key that fit the format, so the sum cannot overflow in practice; it saturates if it did.
pub(crate) fn record_size(key_len: usize, value_len: u64) -> u64 {
    usize::try_from(value_len)
        .ok()
        .and_then(|v| record_len(key_len, v))
        .unwrap_or(u64::MAX)
}

/// Writes the blob files of one flush.
pub(crate) struct BlobSink<'a> {
    dir: &'a Path,
    fs: &'a Arc<dyn Fs>,
    file_size: u64,
    new_file_number: &'a mut dyn FnMut() -> u64,
    current: Option<(u64, BlobWriter)>,
    /// Record bytes of the current file so far.
    current_record_bytes: u64,
    /// Finished files, as the version will record them.
    pub finished: Vec<BlobFileEdit>,
    /// Numbers of every file created, finished or not (removed on failure).
    pub created: Vec<u64>,
    pub bytes_written: u64,
}

impl<'a> BlobSink<'a> {
    pub(crate) fn new(
        dir: &'a Path,
        fs: &'a Arc<dyn Fs>,
        file_size: u64,
        new_file_number: &'a mut dyn FnMut() -> u64,
    ) -> BlobSink<'a> {
        BlobSink {
            dir,
            fs,
            file_size,
            new_file_number,
            current: None,
            current_record_bytes: 0,
            finished: Vec::new(),
            created: Vec::new(),
            bytes_written: 0,
        }
    }

    /// Appends a record and returns the reference to store in the SST, and the record's size.
    pub(crate) fn add(&mut self, user_key: &[u8], value: &[u8]) -> Result<(BlobRef, u64)> {
        if self
            .current
            .as_ref()
            .is_some_and(|(_, w)| w.len() >= self.file_size)
        {
            self.finish_current()?;
        }
        let (number, writer) = match &mut self.current {
            Some(c) => c,
            None => {
                let number = (self.new_file_number)();
                let path = filename::blob(self.dir, number);
                let file = self
                    .fs
                    .create(&path)
                    .map_err(|e| Error::io(e, format!("create {}", path.display())))?;
                self.created.push(number);
                let writer = BlobWriter::new(file, path, number)?;
                self.current.insert((number, writer))
            }
        };
        let value_len = u32::try_from(value.len())
            .map_err(|_| Error::invalid_argument("a value of 4 GiB or more cannot be stored"))?;
        let pos = writer.add(user_key, value)?;
        let blob_ref = BlobRef {
            file: *number,
            ordinal: pos.index,
            value_len,
            offset: pos.offset,
        };
        let size = record_size(user_key.len(), u64::from(value_len));
        self.current_record_bytes += size;
        Ok((blob_ref, size))
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some((number, writer)) = self.current.take() {
            let info = writer.finish()?;
            self.bytes_written += info.file_size;
            let count = info.count;
            self.finished.push(BlobFileEdit {
                logical: number,
                physical: number,
                count,
                file_size: info.file_size,
                record_bytes: std::mem::take(&mut self.current_record_bytes),
                garbage_bytes: 0,
                survivors: None,
                dead: Bitmap::new(u64::from(count), false),
            });
        }
        Ok(())
    }

    /// Finishes (and syncs) the last file.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.finish_current()
    }

    /// Removes every file this sink created (after a failed flush).
    pub(crate) fn remove_all(&self) {
        for &n in &self.created {
            let _ = self.fs.remove_file(&filename::blob(self.dir, n));
        }
    }
}
