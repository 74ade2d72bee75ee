//! The level iterator: one cursor over the concatenated tables of a sorted level (L1 and deeper).
//!
//! Purpose: a level can hold thousands of tables, but a scan reads them one after the other.
//! [`LevelIterator`] keeps at most one table open: it picks the table to open by binary search
//! over the level's key ranges and moves to the neighbouring table when the open one runs out.
//! Tables are opened through an [`OpenFile`] callback, so this module does not depend on the
//! table reader or the table cache.
//!
//! Invariants:
//! - `files` is sorted and non-overlapping in internal-key order: `files[i].largest <
//!   files[i + 1].smallest`. The version checks this when it loads the MANIFEST (the metadata
//!   comes from disk, so it is not asserted here). A table may turn out to be empty; it is skipped.
//! - At most one table cursor is open at a time; it is reused when a seek lands in the same table.
//! - The first error (a failed open or a table cursor's error) is sticky: the iterator turns
//!   invalid and `status()` returns it.
//!
//! Concurrency: owned by one thread at a time. `files` and `open` are shared, immutable.

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::compare_internal;
use std::cmp::Ordering;
use std::sync::Arc;

/// One table of a level, as the level iterator needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LevelFile {
    /// The smallest internal key in the table.
    pub smallest: Vec<u8>,
    /// The largest internal key in the table.
    pub largest: Vec<u8>,
    /// The table's file number, passed to [`OpenFile`].
    pub number: u64,
}

/// Opens a cursor over the table with the given file number.
pub(crate) type OpenFile = Arc<dyn Fn(u64) -> Result<Box<dyn InternalIterator>> + Send + Sync>;

/// A cursor over the concatenation of a level's tables, both directions, opening them lazily.
pub(crate) struct LevelIterator {
    files: Arc<[LevelFile]>,
    open: OpenFile,
    // INVARIANT: when `Some((i, cursor))`, `cursor` reads `files[i]`. The iterator is valid
    // exactly when this cursor is valid and `err` is `None`.
    current: Option<(usize, Box<dyn InternalIterator>)>,
    err: Option<Error>,
}

impl LevelIterator {
    /// A cursor over `files` (sorted, non-overlapping), opened with `open`. Starts unpositioned;
    /// nothing is opened until the first seek.
    pub(crate) fn new(files: Arc<[LevelFile]>, open: OpenFile) -> LevelIterator {
        LevelIterator {
            files,
            open,
            current: None,
            err: None,
        }
    }

    fn fail(&mut self, err: Error) {
        if self.err.is_none() {
            self.err = Some(err);
        }
        self.current = None;
    }

    /// Makes `files[index]` the open table, reusing its cursor when it is already open.
    /// Returns the cursor, or `None` after recording an open error.
    fn open_at(&mut self, index: usize) -> Option<&mut Box<dyn InternalIterator>> {
        let reuse = matches!(&self.current, Some((i, _)) if *i == index);
        if !reuse {
            // Close the old table before opening the next one.
            self.current = None;
            match (self.open)(self.files[index].number) {
                Ok(cursor) => self.current = Some((index, cursor)),
                Err(e) => {
                    self.fail(e);
                    return None;
                }
            }
        }
        self.current.as_mut().map(|(_, c)| c)
    }

    /// While the open table is exhausted, moves on to the first entry of the next table.
    fn skip_forward(&mut self) {
        loop {
            let Some((index, cursor)) = &self.current else {
                return;
            };
            if cursor.valid() {
                return;
            }
            if let Err(e) = cursor.status() {
                self.fail(e);
                return;
            }
            let next = *index + 1;
            if next >= self.files.len() {
                return;
            }
            match self.open_at(next) {
                Some(cursor) => cursor.seek_to_first(),
                None => return,
            }
        }
    }

    /// While the open table is exhausted, moves back to the last entry of the previous table.
    fn skip_backward(&mut self) {
        loop {
            let Some((index, cursor)) = &self.current else {
                return;
            };
            if cursor.valid() {
                return;
            }
            if let Err(e) = cursor.status() {
                self.fail(e);
                return;
            }
            let Some(prev) = index.checked_sub(1) else {
                return;
            };
            match self.open_at(prev) {
                Some(cursor) => cursor.seek_to_last(),
                None => return,
            }
        }
    }

    fn cursor(&self) -> &dyn InternalIterator {
        match &self.current {
            Some((_, cursor)) => cursor.as_ref(),
            None => panic!("LevelIterator used while invalid"),
        }
    }
}

impl InternalIterator for LevelIterator {
    #[inline]
    fn valid(&self) -> bool {
        self.err.is_none() && self.current.as_ref().is_some_and(|(_, c)| c.valid())
    }

    fn seek_to_first(&mut self) {
        if self.err.is_some() || self.files.is_empty() {
            self.current = None;
            return;
        }
        if let Some(cursor) = self.open_at(0) {
            cursor.seek_to_first();
            self.skip_forward();
        }
    }

    fn seek_to_last(&mut self) {
        if self.err.is_some() || self.files.is_empty() {
            self.current = None;
            return;
        }
        if let Some(cursor) = self.open_at(self.files.len() - 1) {
            cursor.seek_to_last();
            self.skip_backward();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        if self.err.is_some() {
            return;
        }
        // The first table whose largest key is >= target holds the answer, if any table does.
        let index = self
            .files
            .partition_point(|f| compare_internal(&f.largest, target) == Ordering::Less);
        if index == self.files.len() {
            self.current = None;
            return;
        }
        if let Some(cursor) = self.open_at(index) {
            cursor.seek(target);
            self.skip_forward();
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        if self.err.is_some() {
            return;
        }
        // The last table whose smallest key is <= target holds the answer, if any table does.
        let count = self
            .files
            .partition_point(|f| compare_internal(&f.smallest, target) != Ordering::Greater);
        let Some(index) = count.checked_sub(1) else {
            self.current = None;
            return;
        };
        if let Some(cursor) = self.open_at(index) {
            cursor.seek_for_prev(target);
            self.skip_backward();
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid LevelIterator");
        if let Some((_, cursor)) = &mut self.current {
            cursor.next();
            self.skip_forward();
        }
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid LevelIterator");
        if let Some((_, cursor)) = &mut self.current {
            cursor.prev();
            self.skip_backward();
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.cursor().key()
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.cursor().value()
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
