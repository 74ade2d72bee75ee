//! Appending records to a log file.

use super::format::{encode_header, MAX_PAYLOAD_LEN};
use crate::fs::{SyncHandle, WritableFile};
use std::io;
use std::sync::Arc;

/// Appends records to one log file. Durability is the caller's: records reach the operating
/// system on [`LogWriter::flush`] and the disk on [`LogWriter::sync`].
pub(crate) struct LogWriter {
    file: Box<dyn WritableFile>,
}

impl LogWriter {
    pub(crate) fn new(file: Box<dyn WritableFile>) -> LogWriter {
        LogWriter { file }
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
        self.file.append(&encode_header(payload))?;
        self.file.append(payload)
    }

    /// Hands appended records to the operating system.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    /// Makes every appended record durable.
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        self.file.sync()
    }

    /// Hands appended records to the operating system and returns a handle that makes them
    /// durable without this writer (see [`WritableFile::sync_handle`]).
    pub(crate) fn sync_handle(&mut self) -> io::Result<Arc<dyn SyncHandle>> {
        self.file.sync_handle()
    }

    /// Bytes appended so far.
    pub(crate) fn len(&self) -> u64 {
        self.file.len()
    }
}
