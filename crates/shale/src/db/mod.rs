//! The database: the public [`Db`] handle and the machinery behind it.
//!
//! Layout of the state and its locks (always taken in this order):
//! 1. `writers`: the group-commit queue. Held only to enqueue, to pick a group, and to hand results
//!    back; never across I/O.
//! 2. `wal`: the WAL writer, the active memtable handle and the last allocated sequence number. Held
//!    by the one write leader for the whole group (append, fsync, memtable insert) and by anyone
//!    switching the memtable.
//! 3. `state`: the version set, sealed memtables, snapshots, background bookkeeping. Held briefly;
//!    the only I/O under it is a MANIFEST append when a version is installed.
//!
//! Readers take no lock beyond cloning the [`SuperVersion`] (an `Arc` behind a read-write lock): the
//! memtables and version it names never change, and the files it names stay on disk while it lives.
//! A read of the latest data loads the super version, then the visible sequence number, then
//! checks that the super version is still current (`read::read_view` says why in that order).
//!
//! Invariants:
//! - `visible_seq` only grows, and every write with a sequence number at or below it is in a
//!   memtable (or an SST).
//! - Sealed memtables are flushed oldest first; `VersionSet::log_number` is the oldest WAL whose
//!   memtable is not yet in an SST.
//! - A failed WAL or MANIFEST write poisons the database: every later write fails with `Poisoned`.

mod background;
mod gc;
mod install;
mod key_range;
mod large_values;
mod open;
mod read;
mod replicated;
mod resume;
mod snapshot;
mod stall;
mod stats;
mod write;

pub use crate::version::edit::LogPosition;
pub use install::{file_number, InstallEdit, InstallOutcome, OutputFile, RETIRED_DIR, STAGING_DIR};
pub use key_range::KeyRange;
pub use replicated::Checkpoint;
pub use snapshot::Snapshot;
pub use stats::Stats;
pub use write::PreparedWrite;

use crate::batch::WriteBatch;
use crate::blob_file_cache::BlobFileCache;
use crate::cache::{BlockCache, RowCache};
use crate::compaction::picker;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::{FileLock, Fs};
use crate::iter::DbIterator;
use crate::key::SeqNo;
use crate::memtable::Memtable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::table_cache::TableCache;
use crate::version::set::VersionSet;
use crate::version::version::Version;
use parking_lot::{Condvar, Mutex, RwLock};
use stall::WriteController;
use stats::Counters;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use write::{WalState, WriteQueue};

/// The skip log of a scan with `options` in the data directory `dir`: `Some` when it steps over
/// unreadable data.
fn skip_log(options: &ReadOptions, dir: &Path) -> Option<Arc<crate::iter::SkipLog>> {
    options
        .skip_unreadable
        .then(|| Arc::new(crate::iter::SkipLog::relative_to(dir)))
}

/// An open database. Cheap to share between threads (`Db: Send + Sync`; wrap it in an `Arc`).
///
/// Closing happens on [`Db::close`] or on drop: background work stops, the WAL is synced, the
/// directory lock is released.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// What readers need to see the whole tree: the memtables and the version, pinned together.
pub(crate) struct SuperVersion {
    pub mem: Arc<dyn Memtable>,
    /// Sealed memtables, newest first.
    pub sealed: Vec<Arc<dyn Memtable>>,
    pub version: Arc<Version>,
}

/// A sealed memtable and the WAL that holds its writes.
pub(crate) struct Sealed {
    pub mem: Arc<dyn Memtable>,
    pub wal: u64,
    /// The last sequence number written to `mem`: the next WAL starts right after it.
    pub last_seq: SeqNo,
    /// With an external log: the log entry that sealed it (its flush records this position).
    pub position: Option<LogPosition>,
}

/// Mutable database state, under `DbInner::state`.
pub(crate) struct State {
    pub versions: VersionSet,
    pub mem: Arc<dyn Memtable>,
    /// The WAL holding the active memtable's writes.
    pub mem_wal: u64,
    /// Oldest first.
    pub sealed: VecDeque<Sealed>,
    /// Live snapshots: sequence number -> how many handles.
    pub snapshots: BTreeMap<SeqNo, usize>,
    /// SSTs being written; never deleted as obsolete.
    pub pending_outputs: HashSet<u64>,
    /// SSTs that a running compaction reads.
    pub busy: HashSet<u64>,
    pub flush_running: bool,
    pub compactions_running: usize,
    /// Manual compactions waiting for files to become free; background picks yield to them.
    pub manual_waiting: usize,
    /// Blob garbage collection in progress.
    pub gc: gc::GcState,
    /// A checkpoint is being installed in place of the database's files: background work
    /// starts nothing new.
    pub installing: bool,
    /// Flushes and compactions through the log (`install`): the leader's prepared jobs.
    pub log_jobs: install::LogJobs,
}

pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub options: Options,
    pub fs: Arc<dyn Fs>,
    pub writers: Mutex<WriteQueue>,
    pub wal: Mutex<WalState>,
    pub state: Mutex<State>,
    /// Signalled when background work is needed or finished (paired with `state`).
    pub bg_cv: Arc<Condvar>,
    /// Runs blob GC tasks (see `db::gc`).
    pub gc_engine: Box<dyn crate::blob::GcEngine>,
    pub super_version: RwLock<Arc<SuperVersion>>,
    pub visible_seq: AtomicU64,
    /// Set while the active WAL's writer holds records not yet handed to the operating system
    /// ([`Durability::Unflushed`](crate::Durability::Unflushed) writes); changed under the WAL lock.
    pub wal_unflushed: AtomicBool,
    /// Key bits a new FloDB memtable's membuffer skips when the options leave them to be learned:
    /// learned at open from the SSTs and at each memtable switch from the memtable sealed.
    pub membuffer_prefix: AtomicU32,
    pub table_cache: TableCache,
    pub block_cache: Option<Arc<BlockCache>>,
    pub row_cache: Option<RowCache>,
    pub counters: Counters,
    /// Open blob files.
    pub blob_cache: BlobFileCache,
    pub controller: WriteController,
    /// The error that poisoned the database, if any.
    pub poison: Mutex<Option<Error>>,
    /// Why writes are stopped until space returns (see `db::resume`), if they are.
    pub stopped: Mutex<Option<Error>>,
    pub writes_stopped: AtomicBool,
    /// Held by the worker that is trying to resume stopped writes.
    pub resuming: AtomicBool,
    pub poisoned: AtomicBool,
    pub closed: AtomicBool,
    /// Opened with an external log (see `replicated`): no WAL, writes only through
    /// `Db::apply_logged`, memtables sealed only by `Db::seal_memtable`.
    pub external_log: bool,
    _lock: Box<dyn FileLock>,
}

impl Db {
    /// Opens the database in `path`, creating it if missing (unless `create_if_missing` is false),
    /// and replays its WALs.
    ///
    /// # Errors
    /// `Busy` when another handle or process holds the directory; `InvalidArgument` for bad options
    /// or a missing database with `create_if_missing = false`; `Corruption` naming the file and
    /// offset when recovery meets damaged bytes; `Io` when the file system fails.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let path = path.as_ref();
        let inner = Arc::new(open::open(path, options, false).map_err(|e| e.relative_to(path))?);
        let threads = background::start(&inner).map_err(|e| e.relative_to(path))?;
        Ok(Db {
            inner,
            threads: Mutex::new(threads),
        })
    }

    /// Sets `key` to `value` with the default durability ([`Options::default_durability`]).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(
            batch,
            &WriteOptions {
                durability: self.inner.options.default_durability,
            },
        )
    }

    /// Deletes `key` (a no-op if absent) with the default durability.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(
            batch,
            &WriteOptions {
                durability: self.inner.options.default_durability,
            },
        )
    }

    /// Applies `batch` atomically: readers see all of it or none of it, and recovery restores all of
    /// it or none of it.
    ///
    /// # Errors
    /// `InvalidArgument` for an oversized key or value; `Poisoned` after an earlier write failure;
    /// `Io` when the WAL cannot be written (the database is then poisoned); `Closed` after close.
    pub fn write(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        write::write(&self.inner, batch, options.durability)
            .map_err(|e| e.relative_to(&self.inner.dir))
    }

    /// The first half of [`Db::write`]: checks `batch` and writes each value of at least
    /// [`Options::large_value_size`](crate::Options::large_value_size) bytes to a blob file of
    /// its own (synced), which is the slow part of a write with large values, without waiting
    /// for other writers or holding them up. [`Db::write_prepared`] then applies it. A caller
    /// that orders its writes under a lock of its own prepares before taking it.
    ///
    /// # Errors
    /// As [`Db::write`]; nothing is written when it fails.
    pub fn prepare_write(&self, batch: WriteBatch) -> Result<PreparedWrite> {
        write::prepare(&self.inner, batch).map_err(|e| e.relative_to(&self.inner.dir))
    }

    /// Applies a write made by [`Db::prepare_write`] of this database atomically, as
    /// [`Db::write`] does.
    ///
    /// # Errors
    /// As [`Db::write`]; `InvalidArgument` for a write prepared by another database.
    pub fn write_prepared(&self, prepared: PreparedWrite, options: &WriteOptions) -> Result<()> {
        write::write_prepared(&self.inner, prepared, options.durability)
            .map_err(|e| e.relative_to(&self.inner.dir))
    }

    /// Hands the WAL's buffered records to the operating system: every write acknowledged before
    /// the call, [`Durability::Unflushed`] ones included, then survives a crash of the process.
    /// Cheap when nothing is buffered (no lock, no system call).
    ///
    /// # Errors
    /// `Io` when the WAL cannot be written (the database is then poisoned); `Poisoned`; `Closed`.
    ///
    /// [`Durability::Unflushed`]: crate::Durability::Unflushed
    pub fn flush_wal(&self) -> Result<()> {
        write::flush_wal(&self.inner).map_err(|e| e.relative_to(&self.inner.dir))
    }

    /// Fsyncs the WAL: every write acknowledged before the call survives power loss once it
    /// returns. Use it to make [`Durability::Buffered`] writes durable in bulk (Redis's
    /// `appendfsync everysec`).
    ///
    /// # Errors
    /// `Io` when the fsync fails (the database is then poisoned); `Poisoned`; `Closed`.
    ///
    /// [`Durability::Buffered`]: crate::Durability::Buffered
    pub fn sync_wal(&self) -> Result<()> {
        write::sync_wal(&self.inner).map_err(|e| e.relative_to(&self.inner.dir))
    }

    /// The value of `key`, or `Ok(None)` when absent.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.check_open()?;
        read::get(&self.inner, key.as_ref(), None).map_err(|e| e.relative_to(&self.inner.dir))
    }

    /// The values of `keys`, as [`Db::get`] gives each, read at one sequence number (like
    /// RocksDB's `MultiGet`). Faster than one `get` per key for a batch of keys that are not in
    /// the processor's cache: the lookups of the batch overlap their memory accesses.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        if let Err(e) = self.inner.check_open() {
            return keys.iter().map(|_| Err(e.clone())).collect();
        }
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        let dir = &self.inner.dir;
        read::multi_get(&self.inner, &keys, None)
            .into_iter()
            .map(|r| r.map_err(|e| e.relative_to(dir)))
            .collect()
    }

    /// Entries with keys in `range`, in key order; double-ended. Any [`KeyRange`]: the full
    /// range `..`, or a range over byte slices, byte arrays, `Vec<u8>` or `&str`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shale::Db::open(dir.path(), shale::Options::default()).unwrap();
    /// db.put("a", "1").unwrap();
    /// db.put("b", "2").unwrap();
    /// let all: Vec<_> = db.range(..).collect::<shale::Result<_>>().unwrap();
    /// assert_eq!(all.len(), 2);
    /// let from_b = db.range(b"b".as_slice()..).next().unwrap().unwrap();
    /// assert_eq!(from_b, (b"b".to_vec(), b"2".to_vec()));
    /// let (lo, hi) = (b"a".to_vec(), b"b".to_vec());
    /// assert_eq!(db.range(lo..hi).count(), 1);
    /// assert_eq!(db.range("a"..="b").rev().count(), 2);
    /// ```
    pub fn range(&self, range: impl KeyRange) -> DbIterator {
        self.range_with(range, &ReadOptions::default())
    }

    /// [`Db::range`] with read options: with [`ReadOptions::skip_unreadable`] the scan steps over
    /// unreadable data (a damaged SST block or table, a damaged blob record), yields every entry
    /// it can read, and reports what it skipped in [`DbIterator::skipped`].
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = shale::Db::open(dir.path(), shale::Options::default()).unwrap();
    /// db.put("a", "1").unwrap();
    /// let opts = shale::ReadOptions { skip_unreadable: true };
    /// let mut scan = db.range_with(.., &opts);
    /// assert_eq!(scan.by_ref().count(), 1);
    /// assert_eq!(scan.skipped_count(), 0);
    /// ```
    pub fn range_with(&self, range: impl KeyRange, options: &ReadOptions) -> DbIterator {
        let (lo, hi) = key_range::owned_bounds(&range);
        read::iterator(
            &self.inner,
            lo,
            hi,
            None,
            Box::new(()),
            skip_log(options, &self.inner.dir),
        )
    }

    /// Every entry, in key order; double-ended.
    pub fn iter(&self) -> DbIterator {
        self.range(..)
    }

    /// Entries whose key starts with `prefix`, in key order; double-ended.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let prefix = prefix.as_ref().to_vec();
        let hi = crate::iter::prefix_upper_bound(&prefix);
        read::iterator(
            &self.inner,
            Bound::Included(prefix),
            hi,
            None,
            Box::new(()),
            None,
        )
    }

    /// A consistent read-only view of the database as of now. Released on drop.
    pub fn snapshot(&self) -> Snapshot {
        snapshot::Snapshot::new(self.inner.clone())
    }

    /// Writes every memtable to an SST and waits until that is done.
    ///
    /// # Errors
    /// The error of a failed flush, or `Poisoned`/`Closed`.
    pub fn flush(&self) -> Result<()> {
        install::refuse_local_jobs(&self.inner, "flush")?;
        background::flush_all(&self.inner).map_err(|e| e.relative_to(&self.inner.dir))
    }

    /// Compacts every level's files that overlap `range` down to the deepest level that holds any,
    /// dropping overwritten versions and tombstones that no snapshot needs. Flushes first. Takes
    /// any [`KeyRange`], as [`Db::range`] does.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shale::Db::open(dir.path(), shale::Options::default()).unwrap();
    /// db.put("k", "v").unwrap();
    /// db.compact_range(..).unwrap();
    /// db.compact_range(b"a".as_slice()..b"z".as_slice()).unwrap();
    /// db.compact_range(b"a".to_vec()..).unwrap();
    /// db.compact_range("a".."z").unwrap();
    /// assert_eq!(db.get("k").unwrap(), Some(b"v".to_vec()));
    /// ```
    ///
    /// # Errors
    /// The error of a failed flush or compaction, `Poisoned`, `Closed`. A compaction that fails
    /// for lack of space (`Io` with [`Error::io_kind`] `StorageFull`) stops writes until space
    /// returns, as a background one does; any other failure poisons the database.
    pub fn compact_range(&self, range: impl KeyRange) -> Result<()> {
        install::refuse_local_jobs(&self.inner, "compact_range")?;
        let (lo, hi) = key_range::owned_bounds(&range);
        background::flush_all(&self.inner)
            .and_then(|()| background::compact_range(&self.inner, bound_key(&lo), bound_key(&hi)))
            .map_err(|e| e.relative_to(&self.inner.dir))
    }

    /// Collects blob garbage now: every blob file the GC policy picks ([`Options::gc_threshold`],
    /// [`Options::gc_space_amp_target`]) is collected, and the call returns when no file qualifies
    /// and no GC task is running. Background workers do the same on their own; this is for tools
    /// and tests.
    ///
    /// # Errors
    /// The error of a failed MANIFEST write: for lack of space (`Io` with [`Error::io_kind`]
    /// `StorageFull`) writes stop until space returns, otherwise the database is poisoned.
    /// `Poisoned`, `Closed`.
    ///
    /// [`Options::gc_threshold`]: crate::Options::gc_threshold
    /// [`Options::gc_space_amp_target`]: crate::Options::gc_space_amp_target
    pub fn collect_garbage(&self) -> Result<()> {
        let inner = &self.inner;
        install::refuse_local_jobs(inner, "collect_garbage")?;
        let mut state = inner.state.lock();
        loop {
            inner.check_open()?;
            if let Some(e) = inner.poison_error() {
                return Err(e);
            }
            let did = match gc::run(inner, &mut state) {
                Ok(did) => did,
                Err(e) => return Err(inner.job_failed(e)),
            };
            if !did && !gc::active(&state) {
                return Ok(());
            }
            if !did {
                inner
                    .bg_cv
                    .wait_for(&mut state, std::time::Duration::from_millis(5));
            }
        }
    }

    /// Waits until background work has settled, or until `timeout` has passed: no memtable waits
    /// for a flush, and no flush, compaction or garbage collection runs or is due (the pickers
    /// would start nothing). Returns whether it settled. Writes made meanwhile can start more
    /// work; benchmarks call this after their clients stop, to read statistics of finished work
    /// (Titan's `WaitBackgroundJob`).
    ///
    /// # Errors
    /// The error that poisoned the database, or `Closed`.
    pub fn wait_for_background(&self, timeout: std::time::Duration) -> Result<bool> {
        let inner = &self.inner;
        let deadline = std::time::Instant::now() + timeout;
        let mut state = inner.state.lock();
        loop {
            inner.check_open()?;
            if let Some(e) = inner.poison_error() {
                return Err(e);
            }
            if background::settled(inner, &state) {
                return Ok(true);
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            inner.bg_cv.wait_for(
                &mut state,
                (deadline - now).min(std::time::Duration::from_millis(10)),
            );
        }
    }

    /// Statistics as of now.
    pub fn stats(&self) -> Stats {
        read::stats(&self.inner)
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Stops background work, syncs the WAL and releases the directory lock.
    ///
    /// # Errors
    /// The error of the final WAL sync, or the error that poisoned the database.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let _state = self.inner.state.lock();
            self.inner.bg_cv.notify_all();
        }
        for handle in self.threads.lock().drain(..) {
            let _ = handle.join();
        }
        let result = write::sync_wal_at_close(&self.inner);
        match self.inner.poison_error() {
            Some(e) => Err(e),
            None => result,
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "closing the database failed");
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl DbInner {
    /// The key bits a new memtable's membuffer skips: fixed by the options, or learned.
    pub(crate) fn membuffer_prefix(&self) -> u32 {
        self.options
            .membuffer_prefix_bits
            .unwrap_or_else(|| self.membuffer_prefix.load(Ordering::Relaxed))
    }

    /// Fails with `Closed` after close.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Closed,
                format!("database {} is closed", self.dir.display()),
            ));
        }
        Ok(())
    }

    /// The error that poisoned the database, if any.
    pub(crate) fn poison_error(&self) -> Option<Error> {
        if !self.poisoned.load(Ordering::Acquire) {
            return None;
        }
        self.poison.lock().clone()
    }

    /// Poisons the database with `err` (the first error wins) and returns the `Poisoned` error.
    pub(crate) fn set_poison(&self, err: Error) -> Error {
        let err = err.relative_to(&self.dir);
        let mut slot = self.poison.lock();
        let poisoned = slot.get_or_insert_with(|| err.into_poisoned()).clone();
        self.poisoned.store(true, Ordering::Release);
        drop(slot);
        tracing::error!(error = %poisoned, "database poisoned");
        self.bg_cv.notify_all();
        poisoned
    }

    /// Publishes a new super version from the state. Call with the state lock held, after any change
    /// of the memtables or the version. Also refreshes the write controller.
    pub(crate) fn install_super_version(&self, state: &State) {
        let version = state.versions.current();
        let sv = SuperVersion {
            mem: state.mem.clone(),
            sealed: state.sealed.iter().rev().map(|s| s.mem.clone()).collect(),
            version: version.clone(),
        };
        *self.super_version.write() = Arc::new(sv);
        let load = stall::Load {
            l0_files: version.levels[0].len(),
            sealed_memtables: state.sealed.len(),
            pending_compaction_bytes: picker::pending_compaction_bytes(&version, &self.options),
        };
        self.controller.set(stall::pressure(load, &self.options));
    }

    pub(crate) fn current_super_version(&self) -> Arc<SuperVersion> {
        self.super_version.read().clone()
    }
}

/// The key of a bound, for compaction ranges (inclusive either way; wider is harmless there).
fn bound_key(b: &Bound<Vec<u8>>) -> Option<&[u8]> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}
