//! The write-ahead log and the record framing shared with the MANIFEST. See `docs/format/wal.md`.
//!
//! A log is a sequence of self-checking records (`format`). [`LogWriter`] appends them; the caller
//! decides when to flush and sync. [`LogReader`] replays a whole file held in memory and decides,
//! at the first damaged record, whether it is a torn tail left by an interrupted write (cut
//! cleanly, reported by [`LogReader::tail_cut`]) or corruption (a `Corruption` error naming the
//! file and offset), according to a [`TailPolicy`].
//!
//! Concurrency: a writer has one owner (the write leader, or the version set under its lock); a
//! reader is used by one thread during recovery.

pub(crate) mod format;

/// WAL files keep this much zero-filled space ahead of their appends
/// ([`crate::fs::WritableFile::preallocate`]): an fsync then usually flushes only data written over
/// blocks the file already has. The reader takes zeros at a record boundary as the end of a log.
pub(crate) const PREALLOCATE_CHUNK: u64 = 1 << 20;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

pub(crate) use reader::{fuzz_replay, LogReader, TailPolicy};
pub(crate) use writer::LogWriter;
