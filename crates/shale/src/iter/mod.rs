//! Iterators over internal keys, and the merging machinery built from them.
//!
//! Every source (memtable, block, table, level) exposes the same cursor interface,
//! [`InternalIterator`], ordered by [`crate::key::compare_internal`]. Cursors are double-ended.
//! They do not allocate per step: `key()` and `value()` borrow from the cursor and stay valid until
//! the next movement.
//!
//! Errors: a cursor that hits an error becomes invalid and reports the error from `status()`; callers
//! check `status()` whenever `valid()` turns false.
//!
//! Modules:
//! - `merge`: [`MergingIterator`], the union of several cursors (memtables, L0 tables, levels).
//! - `level`: [`LevelIterator`], the concatenation of the non-overlapping tables of one level.
//! - `db_iter`: [`DbIterator`], the user-facing iterator that resolves versions, tombstones,
//!   snapshots and bounds on top of a merged cursor.
//! - `skip`: [`Skipped`] and the log of what a scan that skips unreadable data stepped over.

mod db_iter;
mod level;
mod merge;
mod skip;
#[cfg(test)]
mod tests;

pub use db_iter::{prefix_upper_bound, DbIterator};
#[allow(unused_imports)] // used by the read path as it lands
pub(crate) use db_iter::{BlobResolver, SourceFactory, MAX_SEQUENTIAL_SKIP};
#[allow(unused_imports)] // used by the read path as it lands
pub(crate) use level::{LevelFile, LevelIterator, OpenFile};
#[allow(unused_imports)] // used by the read path as it lands
pub(crate) use merge::MergingIterator;
pub(crate) use skip::{skippable, SkipLog};
pub use skip::{Skipped, SkippedKind, MAX_SKIPS_KEPT};

use crate::error::Result;

/// A double-ended cursor over internal keys in [`crate::key::compare_internal`] order.
pub trait InternalIterator: Send {
    /// True when the cursor points at an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self);
    /// Moves to the last entry.
    fn seek_to_last(&mut self);
    /// Moves to the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]);
    /// Moves to the last entry whose internal key is `<= target`.
    fn seek_for_prev(&mut self, target: &[u8]);
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self);
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) {
        (**self).seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        (**self).seek_for_prev(target)
    }
    fn next(&mut self) {
        (**self).next()
    }
    fn prev(&mut self) {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn status(&self) -> Result<()> {
        (**self).status()
    }
}

/// Every entry of `it`, first to last (for tests).
#[cfg(test)]
pub(crate) fn collect_forward(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    out
}
