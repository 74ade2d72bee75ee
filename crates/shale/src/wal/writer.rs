//! Appending records to a log file.

use super::format::{encode_header, encode_sync_marker, MAX_PAYLOAD_LEN};
use crate::fs::{SyncHandle, WritableFile};
use std::io;
use std::sync::Arc;

/// Appends records to one log file. Durability is the caller's: records reach the operating
/// system on [`LogWriter::flush`] and the disk on [`LogWriter::sync`].
///
/// A WAL writer ([`LogWriter::new_wal`]) follows every sync that made new bytes durable with a sync
/// marker (`docs/format/wal.md`), handed to the operating system at once, so that recovery can
/// tell a torn tail (bytes never synced, which may be cut) from damage to synced bytes (which is
/// corruption).
///
/// After a failed append or flush the file may end in part of a record: the writer is then
/// *broken* and refuses every later append, so that the partial record stays the last thing in the
/// file (a torn tail, which recovery cuts) and the caller moves on to a new log.
pub(crate) struct LogWriter {
    file: Box<dyn WritableFile>,
    sync_markers: bool,
    /// The file's length after the last sync marker: a sync that finds it unchanged made nothing
    /// new durable and needs no marker.
    marked: u64,
    broken: bool,
}

impl LogWriter {
    /// A writer for a MANIFEST: records only.
    pub(crate) fn new(file: Box<dyn WritableFile>) -> LogWriter {
        LogWriter {
            file,
            sync_markers: false,
            marked: 0,
            broken: false,
        }
    }

    /// A writer for a WAL: records, and a sync marker after each sync.
    pub(crate) fn new_wal(file: Box<dyn WritableFile>) -> LogWriter {
        LogWriter {
            sync_markers: true,
            ..LogWriter::new(file)
        }
    }

    /// True after a failed append or flush: the writer takes no more records.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    fn check(&mut self, result: io::Result<()>) -> io::Result<()> {
        if result.is_err() {
            self.broken = true;
        }
        result
    }

    /// Appends one record holding `payload`.
    ///
    /// # Errors
    /// `InvalidInput` for a payload over 4 GiB; the file's error otherwise (the log may then end
    /// with a partial record, which recovery cuts).
    pub(crate) fn add_record(&mut self, payload: &[u8]) -> io::Result<()> {
        if payload.len() > MAX_PAYLOAD_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "log record over 4 GiB",
            ));
        }
        if self.broken {
            return Err(io::Error::other(
                "an earlier write to this log failed; a new log must be started",
            ));
        }
        let header = self.file.append(&encode_header(payload));
        let written = header.and_then(|()| self.file.append(payload));
        self.check(written)
    }

    /// Hands appended records to the operating system.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        let flushed = self.file.flush();
        self.check(flushed)
    }

    /// Makes every appended record durable (and, for a WAL, says so with a sync marker).
    ///
    /// # Errors
    /// The fsync's error, or the marker's ([`LogWriter::mark_synced`]: the records are durable
    /// then, but the writer is broken).
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        let len = self.sync_records()?;
        self.mark_synced(len)
    }

    /// Fsyncs the appended records without writing a sync marker; returns the length made
    /// durable, for [`LogWriter::mark_synced`].
    pub(crate) fn sync_records(&mut self) -> io::Result<u64> {
        let len = self.file.len();
        self.file.sync()?;
        Ok(len)
    }

    /// Records, in a WAL, that the file's first `len` bytes are durable (after a sync through a
    /// [`LogWriter::sync_handle`] taken at that length, or [`LogWriter::sync_records`]).
    ///
    /// # Errors
    /// The marker's append or flush failed: the bytes are durable all the same, but the file may
    /// end in part of the marker, so the writer is broken like after any failed append and the
    /// caller must move on to a new log before the next record.
    pub(crate) fn mark_synced(&mut self, len: u64) -> io::Result<()> {
        if !self.sync_markers || self.broken || len <= self.marked {
            return Ok(());
        }
        let marker = encode_sync_marker(len);
        self.add_record(&marker).and_then(|()| self.flush())?;
        self.marked = self.file.len();
        Ok(())
    }

    /// Hands appended records to the operating system and returns a handle that makes them
    /// durable without this writer (see [`WritableFile::sync_handle`]).
    pub(crate) fn sync_handle(&mut self) -> io::Result<Arc<dyn SyncHandle>> {
        let handle = self.file.sync_handle();
        if handle.is_err() {
            self.broken = true;
        }
        handle
    }

    /// Bytes appended so far.
    pub(crate) fn len(&self) -> u64 {
        self.file.len()
    }
}
