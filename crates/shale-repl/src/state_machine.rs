//! The state machine: the engine, fed by the log in log order.
//!
//! Every node runs the same apply path: `Write` entries go to the active memtable
//! (`Db::apply_logged`), `SwitchMemtable` seals it (`Db::seal_memtable`) with the entry's log id
//! and the membership as of it as the position's context, and entries of the log's own (blank
//! entries, membership changes) only advance the engine's applied index. The engine refuses an
//! index at or below the last one applied, so no entry is ever applied twice.
//!
//! After a restart the state machine stands where the engine's MANIFEST says its flushed data
//! ends (the context of the flushed position gives the log id and membership there), and
//! openraft re-applies the log from the entry after it: the writes that were only in memtables.
//!
//! Snapshots are checkpoints at the flushed position (see `snapshot`), built when the replica
//! asks after a flush; installing one replaces the engine's files in place
//! (`Db::install_checkpoint`).
//!
//! Concurrency: openraft calls these methods from its state-machine task, one at a time; the
//! replica reads the shared fields (applied index, switch indexes) from other threads.

// openraft's error types are large and not ours to box.
#![allow(clippy::result_large_err)]

use crate::command::Command;
use crate::raft::{
    Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::rubble::Fetcher;
use crate::snapshot::{self, PositionContext, SnapshotFiles, SnapshotStore};
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, RaftLogId, StorageIOError};
use parking_lot::Mutex;
use shale::{Db, ErrorKind, LogPosition, WriteBatch};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The first pause before an install that failed is tried again; it doubles up to
/// [`INSTALL_RETRY_MAX`].
const INSTALL_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(50);
const INSTALL_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Called with every entry a node applies (its index and command; `None` for entries of the
/// log's own). For tests that check what each node applied.
pub type ApplyHook = Arc<dyn Fn(u64, Option<&Command>) + Send + Sync>;

/// State shared by the state machine, its snapshot builder and the replica.
pub(crate) struct Shared {
    pub db: Arc<Db>,
    pub snapshots: Mutex<SnapshotStore>,
    pub inner: Mutex<SmState>,
    /// The last applied log index (read without the lock).
    pub applied_index: AtomicU64,
    pub hook: Option<ApplyHook>,
    /// Serializes snapshot builds.
    pub building: tokio::sync::Mutex<()>,
    /// Rubble mode: gets the files of an edit this node lacks.
    pub fetcher: Option<Fetcher>,
    /// Set when the node stops: an apply waiting for files gives up, and nothing more is
    /// applied.
    pub stopping: AtomicBool,
    /// Held while an entry or a snapshot is applied (see [`Shared::wait_applies`]).
    pub applying: Mutex<()>,
    /// Transfers into this node's snapshot and staging directories in progress.
    pub receptions: Arc<crate::snapshot::Receptions>,
}

pub(crate) struct SmState {
    pub applied: Option<LogId>,
    pub membership: StoredMembership,
    /// Indexes of the `SwitchMemtable` entries applied since open, in order.
    pub switch_indexes: Vec<u64>,
}

/// openraft's state machine handle.
#[derive(Clone)]
pub(crate) struct StateMachine {
    pub shared: Arc<Shared>,
}

fn storage_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_state_machine(&std::io::Error::other(e.to_string())).into()
}

impl Shared {
    /// Restores the applied state from the engine's flushed position.
    pub(crate) fn new(
        db: Arc<Db>,
        snapshots: SnapshotStore,
        hook: Option<ApplyHook>,
        fetcher: Option<Fetcher>,
    ) -> std::io::Result<Shared> {
        let (applied, membership) = match db.flushed_position() {
            Some(p) => {
                let c = PositionContext::decode(&p.context)?;
                (Some(c.log_id), c.membership)
            }
            None => (None, StoredMembership::default()),
        };
        Ok(Shared {
            applied_index: AtomicU64::new(applied.map_or(0, |l| l.index)),
            db,
            snapshots: Mutex::new(snapshots),
            inner: Mutex::new(SmState {
                applied,
                membership,
                switch_indexes: Vec::new(),
            }),
            hook,
            building: tokio::sync::Mutex::new(()),
            fetcher,
            stopping: AtomicBool::new(false),
            applying: Mutex::new(()),
            receptions: Arc::default(),
        })
    }

    /// Once `stopping` is set: waits for the apply in progress, if any. openraft's shutdown
    /// does not wait for its state machine worker, which would go on with the entries queued for
    /// it after the node stopped (into a database a restarted node may already have open).
    pub(crate) fn wait_applies(&self) {
        drop(self.applying.lock());
    }

    fn refuse_when_stopping(&self) -> Result<(), StorageError> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(storage_err("the node is stopping"));
        }
        Ok(())
    }

    fn apply_one(&self, entry: Entry) -> Result<(), StorageError> {
        let _applying = self.applying.lock();
        self.refuse_when_stopping()?;
        let log_id = *entry.get_log_id();
        let index = log_id.index;
        let db = &self.db;
        match entry.payload {
            EntryPayload::Blank => {
                db.skip_logged(index).map_err(storage_err)?;
                self.note(index, None);
            }
            EntryPayload::Membership(m) => {
                db.skip_logged(index).map_err(storage_err)?;
                self.inner.lock().membership = StoredMembership::new(Some(log_id), m);
                self.note(index, None);
            }
            EntryPayload::Normal(command) => {
                match &command {
                    Command::Write(data) => {
                        let batch = WriteBatch::from_data(data.to_vec()).map_err(storage_err)?;
                        db.apply_logged(index, &batch).map_err(storage_err)?;
                    }
                    Command::SwitchMemtable => {
                        let context = PositionContext {
                            log_id,
                            membership: self.inner.lock().membership.clone(),
                        }
                        .encode();
                        // Waits while too many sealed memtables wait for their flush.
                        tokio::task::block_in_place(|| {
                            db.seal_memtable(LogPosition { index, context })
                        })
                        .map_err(storage_err)?;
                        self.inner.lock().switch_indexes.push(index);
                    }
                    Command::InstallEdit(cmd) => {
                        let edit = cmd.to_engine();
                        tokio::task::block_in_place(|| {
                            self.install(index, log_id.leader_id.term, &edit, cmd.retired_upto)
                        })
                        .map_err(storage_err)?;
                    }
                }
                self.note(index, Some(&command));
            }
        }
        self.inner.lock().applied = Some(log_id);
        self.applied_index.store(index, Ordering::Release);
        Ok(())
    }

    /// Applies an `InstallEdit` (rubble mode): gets its files when it is current and they are
    /// not here, then installs it (or, stale, does nothing), then drops staged files of older
    /// terms. Blocks the applier meanwhile: later entries wait for this one.
    fn install(
        &self,
        index: u64,
        term: u64,
        edit: &shale::InstallEdit,
        retired_upto: u64,
    ) -> Result<(), String> {
        let db = &self.db;
        let Some(fetcher) = &self.fetcher else {
            return Err("an InstallEdit entry on a node not in rubble mode".into());
        };
        // An error the engine can recover from (a damaged or vanished file, a full disk) never
        // ends the state machine (openraft would stop this node for good): the files are
        // fetched again and the install retried, with a growing pause, until it works or the
        // node stops. Only an engine that can no longer write safely (poisoned, closed) or an
        // index out of order ends it.
        let mut pause = INSTALL_RETRY_FIRST;
        let counters = &fetcher.counters;
        let micros = |since: std::time::Instant| since.elapsed().as_micros() as u64;
        loop {
            let nodes = crate::raft::nodes(self.inner.lock().membership.membership());
            let waiting = std::time::Instant::now();
            let obtained = fetcher.obtain(db, edit, &nodes, &self.stopping);
            counters
                .fetch_wait_micros
                .fetch_add(micros(waiting), Ordering::Relaxed);
            obtained?;
            let installing = std::time::Instant::now();
            let installed = db.install_edit(index, edit);
            counters
                .install_micros
                .fetch_add(micros(installing), Ordering::Relaxed);
            let e = match installed {
                Ok(_) => break,
                Err(e) => e,
            };
            if self.stopping.load(Ordering::Acquire)
                || matches!(
                    e.kind(),
                    ErrorKind::Poisoned | ErrorKind::Closed | ErrorKind::InvalidArgument
                )
            {
                return Err(e.to_string());
            }
            tracing::warn!(index, error = %e, "installing shipped files failed; fetching them again");
            *fetcher.waiting.lock() = Some(format!("entry {index}: install failed: {e}"));
            for o in &edit.outputs {
                db.remove_staged_file(&o.name);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(INSTALL_RETRY_MAX);
        }
        *fetcher.waiting.lock() = None;
        let cleaning = std::time::Instant::now();
        fetcher.lanes.lock().applied(edit);
        db.remove_staged_below(shale::file_number(term, 0));
        // Files of this term that no later edit names: given-up jobs, late shipments.
        db.remove_staged_where(|n| fetcher.lanes.lock().unneeded(n));
        db.drop_retired(retired_upto);
        counters
            .install_micros
            .fetch_add(micros(cleaning), Ordering::Relaxed);
        Ok(())
    }

    fn note(&self, index: u64, command: Option<&Command>) {
        if let Some(h) = &self.hook {
            h(index, command);
        }
    }

    /// Builds a snapshot of the flushed state, or returns the current one when nothing new was
    /// flushed since.
    pub(crate) fn build_snapshot(&self) -> std::io::Result<Snapshot> {
        let flushed = self.db.flushed_position();
        let (fs, dir) = {
            let mut store = self.snapshots.lock();
            if let Some((meta, files)) = store.current() {
                if meta.last_log_id.map(|l| l.index) >= flushed.as_ref().map(|p| p.index) {
                    return Ok(Snapshot {
                        meta,
                        snapshot: Box::new(files),
                    });
                }
            }
            (store.fs().clone(), store.new_dir())
        };
        let cp = self
            .db
            .checkpoint(&dir)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let (last_log_id, last_membership) = match &cp.position {
            Some(p) => {
                let c = PositionContext::decode(&p.context)?;
                (Some(c.log_id), c.membership)
            }
            None => (None, StoredMembership::default()),
        };
        let meta = SnapshotMeta {
            last_log_id,
            last_membership,
            snapshot_id: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let files = SnapshotFiles {
            files: snapshot::file_list(&fs, &dir, &cp.files)?,
            fs,
            dir,
        };
        self.snapshots.lock().add(meta.clone(), files.clone())?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(files),
        })
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let _one = self.shared.building.lock().await;
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.build_snapshot())
            .await
            .map_err(|e| {
                StorageIOError::write_snapshot(None, &std::io::Error::other(e.to_string()))
            })?
            .map_err(|e| StorageIOError::write_snapshot(None, &e).into())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let s = self.shared.inner.lock();
        Ok((s.applied, s.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        for entry in entries {
            self.shared.apply_one(entry)?;
            out.push(());
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> StateMachine {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFiles>, StorageError> {
        // Snapshots arrive through the replica's own transfer (`snapshot::Receiver`), never
        // through openraft's chunked protocol.
        Err(storage_err(
            "snapshots are received file by file, not in chunks",
        ))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotFiles>,
    ) -> Result<(), StorageError> {
        let shared = self.shared.clone();
        let files = *snapshot;
        let meta = meta.clone();
        tokio::task::spawn_blocking(move || -> Result<(), String> {
            let _applying = shared.applying.lock();
            if shared.stopping.load(Ordering::Acquire) {
                return Err("the node is stopping".into());
            }
            shared
                .db
                .install_checkpoint(&files.dir)
                .map_err(|e| e.to_string())?;
            if shared.fetcher.is_some() {
                // Edits the snapshot covers are never applied here: their staged files would
                // stay forever. Later edits fetch theirs again. (A node that held a later edit's
                // files for its quorum loses them here; the other holders still have them.)
                shared.db.clear_staged();
            }
            {
                let mut s = shared.inner.lock();
                s.applied = meta.last_log_id;
                s.membership = meta.last_membership.clone();
            }
            shared
                .applied_index
                .store(meta.last_log_id.map_or(0, |l| l.index), Ordering::Release);
            shared
                .snapshots
                .lock()
                .add(meta, files)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(storage_err)?
        .map_err(storage_err)
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        Ok(self
            .shared
            .snapshots
            .lock()
            .current()
            .map(|(meta, files)| Snapshot {
                meta,
                snapshot: Box::new(files),
            }))
    }
}
