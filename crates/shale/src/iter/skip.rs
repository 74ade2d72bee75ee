//! Scans that step over unreadable data instead of failing ([`crate::ReadOptions`]'s
//! `skip_unreadable`), and the report of what they stepped over.
//!
//! Purpose: one damaged SST data block or blob record should not make the rest of the keyspace
//! unreadable to a scan. A skipping scan yields every entry it can read and records each piece of
//! data it could not read as a [`Skipped`]: the file, the offset, the error, and the range of user
//! keys the lost data covered, taken from the table's index (for a data block: after the index
//! entry before it, up to the block's own index entry).
//!
//! What a skip means for the pairs yielded: a key inside a skipped range may be missing from the
//! scan, or show an older version than the lost data held (an older value, or a value a lost
//! tombstone deleted), because the newest entry of that key may have been in the lost data. Keys
//! outside every skipped range are exact. Callers that need certainty treat the keys inside the
//! ranges as unknown.
//!
//! Invariants: a [`SkipLog`] holds each skipped piece once (keyed by file, offset and kind), even
//! when both ends of an iterator, or a re-seek, meet it again; it keeps at most
//! [`MAX_SKIPS_KEPT`] of them and counts every one.
//!
//! Concurrency: a `SkipLog` is shared (`Arc`) by the cursors of one iterator, which one thread
//! uses at a time; its lock is taken only when something is skipped or the report is read.

use crate::error::{Error, ErrorKind};
use parking_lot::Mutex;
use std::ops::Bound;
use std::path::{Path, PathBuf};

/// Skipped pieces one iterator keeps the details of; further ones are only counted.
pub const MAX_SKIPS_KEPT: usize = 1024;

/// What a skipping scan stepped over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkippedKind {
    /// An SST data block that failed its checksum or could not be decoded (or read).
    Block,
    /// A whole SST that could not be opened (its footer, index or properties are damaged).
    Table,
    /// A blob record (a separated value) that could not be read: the key's value is lost.
    BlobRecord,
}

/// One piece of unreadable data a skipping scan stepped over.
#[derive(Debug, Clone)]
pub struct Skipped {
    /// What was skipped.
    pub kind: SkippedKind,
    /// The file's name in the data directory (`000012.sst`, `000007.blob`).
    pub file: String,
    /// The byte offset of the skipped block or record in `file` (0 for a whole table).
    pub offset: u64,
    /// The lower bound of the user keys whose entries the skipped data held. For a block,
    /// `Excluded` of the key of the index entry before it (the last key of the block before, or a
    /// shorter key between the two blocks); older versions of that very key may also have been
    /// in the block. `Included` of the table's first key for a table's first block.
    pub start: Bound<Vec<u8>>,
    /// The upper bound of those user keys: for a block, from its own index entry (`Included` when
    /// that entry is the block's last key, `Excluded` when it is a shorter key that sorts before
    /// the next block).
    pub end: Bound<Vec<u8>>,
    /// Why the data could not be read (names the file and offset).
    pub error: Error,
}

impl Skipped {
    /// True when `user_key` lies in the skipped range (its entries may have been lost).
    pub fn contains(&self, user_key: &[u8]) -> bool {
        let above_start = match &self.start {
            Bound::Included(k) => user_key >= k.as_slice(),
            Bound::Excluded(k) => user_key > k.as_slice(),
            Bound::Unbounded => true,
        };
        let below_end = match &self.end {
            Bound::Included(k) => user_key <= k.as_slice(),
            Bound::Excluded(k) => user_key < k.as_slice(),
            Bound::Unbounded => true,
        };
        above_start && below_end
    }
}

/// Whether a skipping scan steps over data that failed with `err`: damaged bytes (`Corruption`)
/// and failed reads (`Io`, e.g. a bad sector). Anything else (a closed database) still fails it.
pub(crate) fn skippable(err: &Error) -> bool {
    matches!(err.kind(), ErrorKind::Corruption | ErrorKind::Io)
}

/// What one iterator skipped, shared by its cursors.
#[derive(Debug, Default)]
pub(crate) struct SkipLog {
    inner: Mutex<LogInner>,
    /// The data directory: errors recorded name files relative to it.
    dir: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct LogInner {
    // INVARIANT: no two entries share (kind, file, offset); at most MAX_SKIPS_KEPT.
    kept: Vec<Skipped>,
    /// Distinct pieces skipped, kept or not.
    count: u64,
    /// (kind, file, offset) of the pieces past `kept`'s capacity, so they count once.
    dropped: std::collections::HashSet<(SkippedKind, String, u64)>,
}

impl SkipLog {
    /// An empty log whose errors name files relative to the data directory `dir`.
    pub(crate) fn relative_to(dir: &Path) -> SkipLog {
        SkipLog {
            dir: Some(dir.to_path_buf()),
            ..SkipLog::default()
        }
    }

    /// Records `skipped` unless the same piece was recorded before. Returns true when it is new.
    pub(crate) fn record(&self, mut skipped: Skipped) -> bool {
        if let Some(dir) = &self.dir {
            skipped.error = skipped.error.relative_to(dir);
        }
        let mut log = self.inner.lock();
        let same = |s: &Skipped| {
            s.kind == skipped.kind && s.offset == skipped.offset && s.file == skipped.file
        };
        if log.kept.iter().any(same) {
            return false;
        }
        if log.kept.len() < MAX_SKIPS_KEPT {
            log.kept.push(skipped);
        } else if !log
            .dropped
            .insert((skipped.kind, skipped.file, skipped.offset))
        {
            return false;
        }
        log.count += 1;
        true
    }

    /// The pieces kept, in the order they were met.
    pub(crate) fn kept(&self) -> Vec<Skipped> {
        self.inner.lock().kept.clone()
    }

    /// How many distinct pieces were skipped.
    pub(crate) fn count(&self) -> u64 {
        self.inner.lock().count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(offset: u64) -> Skipped {
        Skipped {
            kind: SkippedKind::Block,
            file: "000001.sst".into(),
            offset,
            start: Bound::Excluded(b"b".to_vec()),
            end: Bound::Included(b"d".to_vec()),
            error: Error::new(ErrorKind::Corruption, "bad"),
        }
    }

    #[test]
    fn a_piece_met_twice_counts_once() {
        let log = SkipLog::default();
        assert!(log.record(piece(10)));
        assert!(!log.record(piece(10)));
        assert!(log.record(piece(20)));
        assert_eq!(log.count(), 2);
        assert_eq!(log.kept().len(), 2);
    }

    #[test]
    fn past_the_cap_pieces_are_counted_not_kept() {
        let log = SkipLog::default();
        for i in 0..MAX_SKIPS_KEPT as u64 + 10 {
            log.record(piece(i));
            log.record(piece(i));
        }
        assert_eq!(log.count(), MAX_SKIPS_KEPT as u64 + 10);
        assert_eq!(log.kept().len(), MAX_SKIPS_KEPT);
    }

    #[test]
    fn contains_follows_the_bounds() {
        let s = piece(0);
        assert!(!s.contains(b"b"));
        assert!(s.contains(b"b\0"));
        assert!(s.contains(b"d"));
        assert!(!s.contains(b"d\0"));
    }
}
