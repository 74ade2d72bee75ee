//! A database whose write-ahead log is external: the Raft log of a replicated node.
//!
//! Opened with [`Db::open_with_external_log`], the engine keeps no WAL. Every write arrives as the
//! batch of one log entry ([`Db::apply_logged`]) and memtables are sealed only when the log says so
//! ([`Db::seal_memtable`]), never by their size: a log applied in the same order on every node then
//! gives every node the same sequence numbers and the same memtable boundaries. Each flush records
//! in the MANIFEST the [`LogPosition`] that sealed its memtable, so after a restart the owner of
//! the log replays the entries after [`Db::flushed_position`] and nothing else.
//!
//! Sequence numbers: entry after entry, each batch takes the numbers right after the last one
//! handed out, so the numbers a batch gets are a function of the log before it (the same on every
//! node). The MANIFEST's last sequence number is the one at the flushed position, which is where
//! replay starts.
//!
//! Checkpoints ([`Db::checkpoint`]) are the files of the flushed version (hard links) plus a
//! MANIFEST naming them and the flushed position: a replica that installs one
//! ([`Db::install_checkpoint`]) holds the same data at the same position.
//!
//! Concurrency: `apply_logged`, `seal_memtable` and `install_checkpoint` are called by one
//! applier at a time, in log order (they take the WAL lock, as writers do); reads run beside them.

use super::write::{insert_group, switch_memtable_at, validate};
use super::{Db, DbInner, State};
use crate::batch::WriteBatch;
use crate::error::{Error, IoContext, Result};
use crate::filename;
use crate::fs::{SyncHandle, WritableFile};
use crate::memtable;
use crate::options::Options;
use crate::version::edit::LogPosition;
use crate::version::set::VersionSet;
use crate::version::version::Version;
use parking_lot::MutexGuard;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often a seal waiting for room, or an install waiting for background jobs, re-checks.
const WAIT_RECHECK: Duration = Duration::from_millis(20);

/// The files of a checkpoint, written by [`Db::checkpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The directory that holds them.
    pub dir: PathBuf,
    /// The log position of the data: the last log entry whose writes the files hold.
    pub position: Option<LogPosition>,
    /// Names of the files (SSTs, blob files, the MANIFEST, CURRENT), relative to `dir`.
    pub files: Vec<String>,
}

impl Db {
    /// Opens (or creates) the database in `path` for use with an external log (see the module
    /// documentation): no WAL is written or replayed; [`Db::flushed_position`] tells where the
    /// log must be replayed from.
    ///
    /// # Errors
    /// As [`Db::open`], and `InvalidArgument` when the directory holds WALs not yet flushed (a
    /// database written with its own WAL).
    pub fn open_with_external_log(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let inner = Arc::new(super::open::open(path.as_ref(), options, true)?);
        let threads = super::background::start(&inner)?;
        Ok(Db {
            inner,
            threads: parking_lot::Mutex::new(threads),
        })
    }

    /// The last log entry whose writes are in the files, as the MANIFEST records it: what a
    /// restart keeps. `None` before the first flush.
    pub fn flushed_position(&self) -> Option<LogPosition> {
        self.inner.state.lock().versions.log_position().cloned()
    }

    /// The index of the last log entry applied or sealed at (after open: the flushed index);
    /// `None` before the first.
    pub fn applied_index(&self) -> Option<u64> {
        self.inner.wal.lock().applied_index
    }

    /// Whether the active memtable has reached [`Options::write_buffer_size`]: the log's leader
    /// then appends an entry that seals it ([`Db::seal_memtable`]).
    pub fn memtable_full(&self) -> bool {
        self.inner.wal.lock().mem.approximate_bytes() >= self.inner.options.write_buffer_size
    }

    /// Whether writes should wait: the engine's write controller asks for a stop (too many L0
    /// files or pending compaction bytes), or the memtable is full while the next seal would
    /// wait for a flush. The log's leader holds back new entries meanwhile.
    pub fn write_pressure(&self) -> bool {
        if self.inner.controller.get() == super::stall::Pressure::Stop {
            return true;
        }
        let state = self.inner.state.lock();
        if state.log_jobs.enabled {
            // Sealed memtables wait for edits through the log: the log's owner paces writes.
            return false;
        }
        // The next seal would wait for a flush: hold writes back before the memtable overflows.
        let sealed = state.sealed.len();
        drop(state);
        sealed + 1 >= self.inner.options.max_write_buffers && self.memtable_full()
    }

    /// Applies `batch`, the writes of log entry `index`, to the active memtable under the next
    /// sequence numbers, and makes it visible. Never waits for room: a log entry must be applied.
    ///
    /// # Errors
    /// `InvalidArgument` when the database has no external log, when `index` is not above the
    /// last applied index (an entry applied twice), or for an oversized key or value; `Poisoned`;
    /// `Closed`.
    pub fn apply_logged(&self, index: u64, batch: &WriteBatch) -> Result<()> {
        let inner = &self.inner;
        check_external(inner)?;
        validate(inner, batch)?;
        let mut wal = inner.wal.lock();
        check_index(&wal, index)?;
        wal.applied_index = Some(index);
        if batch.is_empty() {
            return Ok(());
        }
        let wal = &mut *wal;
        wal.group.clear();
        wal.group.append(batch);
        let first_seq = wal.last_seq + 1;
        insert_group(inner, wal, first_seq)?;
        inner.counters.writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Seals the active memtable at log `position` (the entry that says so) and starts a new one;
    /// the flush of the sealed memtable records `position` as flushed. An empty memtable is
    /// sealed too, so every node seals at the same entries. Waits while the sealed memtables
    /// already reach [`Options::max_write_buffers`], until a flush makes room.
    ///
    /// # Errors
    /// `InvalidArgument` without an external log or when `position.index` is not above the last
    /// applied index; `Poisoned`; `Closed`.
    pub fn seal_memtable(&self, position: LogPosition) -> Result<()> {
        let inner = &self.inner;
        check_external(inner)?;
        let mut wal = inner.wal.lock();
        check_index(&wal, position.index)?;
        let mut state = inner.state.lock();
        // With log installs a memtable is dropped only by a later entry: never wait for it here.
        while !state.log_jobs.enabled && state.sealed.len() + 1 >= inner.options.max_write_buffers {
            inner.check_open()?;
            if let Some(e) = inner.poison_error() {
                return Err(e);
            }
            inner.bg_cv.notify_all();
            let start = std::time::Instant::now();
            inner.bg_cv.wait_for(&mut state, WAIT_RECHECK);
            inner
                .counters
                .stall_micros
                .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        wal.applied_index = Some(position.index);
        switch_memtable_at(inner, &mut wal, &mut state, Some(position))
    }

    /// Records that log entry `index` was applied without touching the data (an entry of the
    /// log's own, such as a membership change), so the next entry's index check holds.
    ///
    /// # Errors
    /// As [`Db::apply_logged`] for the index.
    pub fn skip_logged(&self, index: u64) -> Result<()> {
        check_external(&self.inner)?;
        let mut wal = self.inner.wal.lock();
        check_index(&wal, index)?;
        wal.applied_index = Some(index);
        Ok(())
    }

    /// Writes a checkpoint of the flushed data into `dir` (created; must not hold a database):
    /// the live SST and blob files as hard links (copies where the file system has no links), a
    /// MANIFEST naming them with the flushed log position, and CURRENT. Writes in memtables are
    /// not in it: they are after the checkpoint's position in the log. `dir` may be opened as a
    /// database of its own, or installed in place of another one with
    /// [`Db::install_checkpoint`].
    ///
    /// # Errors
    /// `InvalidArgument` when `dir` already holds a CURRENT; `Io` when a file cannot be linked
    /// or written; `Poisoned`; `Closed`.
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<Checkpoint> {
        let inner = &self.inner;
        let dir = dir.as_ref();
        inner.check_open()?;
        if let Some(e) = inner.poison_error() {
            return Err(e);
        }
        let fs = &inner.fs;
        if fs.exists(&filename::current(dir)) {
            return Err(Error::invalid_argument(format!(
                "{} already holds a database",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)
            .ctx(|| format!("create directory {}", dir.display()))?;
        // The state lock is held throughout, so the version, its position and its counters are
        // one consistent state and no file of it is deleted meanwhile. Links are cheap.
        let state = inner.state.lock();
        let version = state.versions.current();
        let mut files = Vec::new();
        for n in version.file_numbers() {
            link(
                inner,
                &filename::table(&inner.dir, n),
                &filename::table(dir, n),
            )?;
            files.push(name_of(&filename::table(dir, n)));
        }
        for n in version.blob_file_numbers() {
            link(
                inner,
                &filename::blob(&inner.dir, n),
                &filename::blob(dir, n),
            )?;
            files.push(name_of(&filename::blob(dir, n)));
        }
        fs.sync_dir(dir)
            .ctx(|| format!("sync directory {}", dir.display()))?;
        let manifest = state.versions.write_checkpoint_manifest(dir)?;
        files.push(filename::manifest_name(manifest));
        files.push(name_of(&filename::current(dir)));
        let position = state.versions.log_position().cloned();
        drop(state);
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            position,
            files,
        })
    }
}

impl Db {
    /// Replaces the whole database with the checkpoint in `dir` (written by [`Db::checkpoint`],
    /// here or on another node, and complete): its files are linked in under new numbers, a
    /// fresh MANIFEST names them, the memtables are dropped, and the database continues at the
    /// checkpoint's log position and sequence number. Readers that started before keep reading
    /// the old data. Waits for running flushes and compactions to finish first.
    ///
    /// # Errors
    /// `Corruption` when the checkpoint's MANIFEST is damaged or names a missing file;
    /// `InvalidArgument` without an external log; `Io` when a file cannot be linked or the
    /// MANIFEST written (the database is then poisoned); `Poisoned`; `Closed`.
    pub fn install_checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        let inner = &self.inner;
        let dir = dir.as_ref();
        check_external(inner)?;
        let theirs = VersionSet::recover(
            dir,
            inner.fs.clone(),
            inner.options.num_levels,
            inner.options.max_manifest_size,
        )?;
        let mut wal = inner.wal.lock();
        let mut state = inner.state.lock();
        state.installing = true;
        while state.flush_running || state.compactions_running > 0 {
            if let Err(e) = inner.check_open() {
                state.installing = false;
                return Err(e);
            }
            inner.bg_cv.wait_for(&mut state, WAIT_RECHECK);
        }
        let result = install_locked(inner, dir, &theirs, &mut wal, &mut state);
        state.installing = false;
        inner.bg_cv.notify_all();
        match result {
            Ok(()) => {
                drop(wal);
                super::background::delete_obsolete_files(inner, &mut state);
                Ok(())
            }
            Err(e) => Err(inner.set_poison(e)),
        }
    }
}

/// The body of [`Db::install_checkpoint`], with background work stopped.
fn install_locked(
    inner: &DbInner,
    dir: &Path,
    theirs: &VersionSet,
    wal: &mut super::write::WalState,
    state: &mut MutexGuard<'_, State>,
) -> Result<()> {
    // Numbers from here on never meet a logical blob file number of theirs, which SSTs name.
    state
        .versions
        .mark_file_number_used(theirs.next_file_number());
    let mut edit = theirs.current().snapshot_edit();
    let mut linked = Vec::new();
    // With log installs file numbers are the cluster's `(term, counter)`: they are kept, and a
    // file already here under its number is the same file.
    let keep_numbers = state.log_jobs.enabled;
    if keep_numbers {
        state.log_jobs.prepared_seals.clear();
        state.busy.clear();
    }
    let mut link_as_new = |state: &mut MutexGuard<'_, State>,
                           from: PathBuf,
                           to: &dyn Fn(u64) -> PathBuf,
                           theirs: u64|
     -> Result<u64> {
        let n = if keep_numbers {
            theirs
        } else {
            state.versions.new_file_number()
        };
        state.pending_outputs.insert(n);
        linked.push(n);
        if !(keep_numbers && inner.fs.exists(&to(n))) {
            link(inner, &from, &to(n))?;
        }
        Ok(n)
    };
    let ours = inner.dir.clone();
    let result = (|| {
        for (_, f) in &mut edit.new_files {
            f.number = link_as_new(
                state,
                filename::table(dir, f.number),
                &|n| filename::table(&ours, n),
                f.number,
            )?;
        }
        for b in &mut edit.blob_files {
            b.physical = link_as_new(
                state,
                filename::blob(dir, b.physical),
                &|n| filename::blob(&ours, n),
                b.physical,
            )?;
        }
        inner
            .fs
            .sync_dir(&inner.dir)
            .ctx(|| format!("sync directory {}", inner.dir.display()))?;
        let version = Version::empty(inner.options.num_levels).apply(&edit)?;
        state.versions.replace(
            version,
            theirs.last_seq(),
            theirs.log_position().cloned(),
            0,
        )
    })();
    for n in &linked {
        state.pending_outputs.remove(n);
    }
    result?;
    let mem = memtable::new_memtable(&inner.options, inner.membuffer_prefix());
    wal.mem = mem.clone();
    state.mem = mem;
    state.sealed.clear();
    wal.last_seq = theirs.last_seq();
    wal.applied_index = theirs.log_position().map(|p| p.index);
    inner.visible_seq.store(wal.last_seq, Ordering::Release);
    inner.install_super_version(state);
    Ok(())
}

pub(super) fn check_external(inner: &DbInner) -> Result<()> {
    inner.check_open()?;
    if let Some(e) = inner.poison_error() {
        return Err(e);
    }
    if !inner.external_log {
        return Err(Error::invalid_argument(
            "this database keeps its own WAL; open it with Db::open_with_external_log",
        ));
    }
    Ok(())
}

pub(super) fn check_index(wal: &super::write::WalState, index: u64) -> Result<()> {
    match wal.applied_index {
        Some(applied) if index <= applied => Err(Error::invalid_argument(format!(
            "log entry {index} is not after the last applied entry {applied}: an entry is never \
             applied twice"
        ))),
        _ => Ok(()),
    }
}

pub(super) fn link(inner: &DbInner, from: &Path, to: &Path) -> Result<()> {
    inner
        .fs
        .link(from, to)
        .ctx(|| format!("link {} to {}", from.display(), to.display()))
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The WAL writer of a database with an external log: nothing is ever appended to it.
pub(crate) fn no_wal() -> Box<dyn WritableFile> {
    Box::new(NoWal)
}

struct NoWal;

struct NoSync;

impl SyncHandle for NoSync {
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

impl WritableFile for NoWal {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        Err(io::Error::other(
            "a database with an external log has no WAL to append to",
        ))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn sync_handle(&mut self) -> io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(NoSync))
    }
    fn len(&self) -> u64 {
        0
    }
}
