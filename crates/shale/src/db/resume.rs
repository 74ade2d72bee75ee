//! Writes stopped by a full disk, and their automatic resumption (RocksDB's auto-recovery from
//! no-space errors; Redis's `-MISCONF` until writes work again).
//!
//! A failure that leaves durability intact but cannot make progress without space stops writes
//! instead of poisoning the database:
//! - a WAL append or flush that fails with no space (`ENOSPC`, `EDQUOT`), the sync marker after a
//!   sync included (the synced records stay durable and their write succeeds): the WAL writer is
//!   broken (its file may end in part of a record, a torn tail that recovery cuts) and takes no
//!   more records;
//! - a flush, compaction or GC job that fails with no space, in the background or asked for
//!   (`Db::compact_range`, `Db::collect_garbage`), its MANIFEST write included: its partial
//!   outputs are removed, and the memtables and files it read are untouched.
//!
//! While writes are stopped every write fails at once with an `Io` error whose
//! [`io_kind`](crate::Error::io_kind) is `StorageFull`; reads keep working. A background worker
//! retries every [`RESUME_INTERVAL`]: it starts a new WAL if the old one is broken (sealing the
//! memtable), flushes every sealed memtable, and reopens writes once that succeeds. Writes resume
//! only after the memtables of a broken WAL are in SSTs, so no write lands in a newer WAL while an
//! older one may end in a damaged record. Recovery needs only the space of one new WAL and the
//! SSTs of the memtables it flushes.
//!
//! What still poisons: a failed fsync of a WAL or the MANIFEST (the page cache may have dropped
//! the dirty pages), a failure to make CURRENT durable after pointing it at a new MANIFEST, and
//! every failure that is not a lack of space. A MANIFEST append that fails for space leaves the
//! edit uninstalled and the next edit rolls to a new MANIFEST (`VersionSet::log_and_apply`).

use super::{background, write, DbInner};
use crate::error::{Error, ErrorKind, Result};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often a background worker retries stopped writes.
pub(crate) const RESUME_INTERVAL: Duration = Duration::from_millis(500);

/// True for an error that [`stop_writes`] may handle: a lack of space, where nothing durable was
/// lost.
pub(crate) fn is_no_space(e: &Error) -> bool {
    e.kind() == ErrorKind::Io
        && !e.is_fatal()
        && matches!(
            e.io_kind(),
            Some(std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
        )
}

impl DbInner {
    /// Stops writes after `err` (see the module documentation) and returns the error writers get.
    pub(crate) fn stop_writes(&self, err: Error) -> Error {
        let err = err.relative_to(&self.dir);
        let mut slot = self.stopped.lock();
        let stopped = slot
            .get_or_insert_with(|| {
                tracing::error!(error = %err, "writes stopped: no space left; retrying until space returns");
                err.context("writes are stopped until space returns")
            })
            .clone();
        self.writes_stopped.store(true, Ordering::Release);
        drop(slot);
        self.bg_cv.notify_all();
        stopped
    }

    /// Handles the failure `err` of a flush, compaction or GC, run in the background or asked
    /// for ([`Db::compact_range`](crate::Db::compact_range),
    /// [`Db::collect_garbage`](crate::Db::collect_garbage)): a lack of space stops writes, a
    /// close passes, anything else poisons. Returns the error to report.
    pub(crate) fn job_failed(&self, err: Error) -> Error {
        if err.kind() == ErrorKind::Closed && self.closed.load(Ordering::Acquire) {
            err
        } else if is_no_space(&err) {
            self.stop_writes(err)
        } else {
            self.set_poison(err)
        }
    }

    /// The error writes fail with: the poison, or the reason writes are stopped.
    pub(crate) fn write_blocker(&self) -> Option<Error> {
        if let Some(e) = self.poison_error() {
            return Some(e);
        }
        if !self.writes_stopped.load(Ordering::Acquire) {
            return None;
        }
        self.stopped.lock().clone()
    }

    /// True while writes are stopped or the database is poisoned.
    pub(crate) fn writes_blocked(&self) -> bool {
        self.poisoned.load(Ordering::Acquire) || self.writes_stopped.load(Ordering::Acquire)
    }
}

/// Tries once to resume stopped writes: a new WAL if the old one is broken, then every sealed
/// memtable flushed. Runs on a background worker without the state lock.
///
/// # Errors
/// What failed this time (writes stay stopped); a poisoning failure poisons as usual.
pub(crate) fn try_resume(inner: &DbInner) -> Result<()> {
    {
        let mut wal = inner.wal.lock();
        if wal.writer.is_broken() {
            let mut state = inner.state.lock();
            write::switch_memtable(inner, &mut wal, &mut state)?;
        }
    }
    background::flush_sealed(inner)?;
    let mut slot = inner.stopped.lock();
    if let Some(e) = slot.take() {
        tracing::info!(after = %e, "space is back: writes resumed");
    }
    inner.writes_stopped.store(false, Ordering::Release);
    drop(slot);
    inner.bg_cv.notify_all();
    Ok(())
}
