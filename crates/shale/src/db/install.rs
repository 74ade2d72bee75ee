//! Flushes and compactions through an external log: RubbleDB's "compact once, ship the files".
//!
//! A database opened with [`Db::open_for_log_installs`] keeps an external log (see `replicated`)
//! and never flushes, compacts or collects blob garbage on its own. Instead the log's leader
//! prepares a job ([`Db::prepare_flush`], [`Db::prepare_compaction`], [`Db::prepare_gc`]): the
//! job writes its output
//! files under numbers the caller hands out (`(term, counter)`, see [`file_number`]), marks its
//! inputs busy, and returns an [`InstallEdit`] describing them without installing anything. The
//! caller ships the files to the other nodes and appends the edit to the log; every node, the
//! leader included, applies it in log order with [`Db::install_edit`].
//!
//! Applying validates deterministically, from the state the log prefix produced and nothing else:
//! the input memtables must be exactly the oldest sealed memtables (sealed and not yet flushed),
//! and the version edit must apply to the current version (every input file live, no output
//! number taken). An edit that fails is stale (a deposed leader's, or one whose inputs another
//! edit already consumed) and is a no-op on every node alike.
//!
//! Install order: the output files are durable (moved from the staging directory into the
//! database directory, which is synced), then the MANIFEST edit is durable, then the flushed
//! memtables are dropped; the log's owner purges its log after that. Files received from the
//! leader wait in [`STAGING_DIR`] inside the database directory; at open, staging files (which no
//! MANIFEST ever names) are removed, and a committed edit whose files are gone has them fetched
//! again by the log's owner before it is applied.
//!
//! A node that cannot get an edit's files for too long may write them itself
//! ([`Db::write_flush_outputs`]): a flush of the same sealed memtable (same boundaries, same
//! sequence numbers) writes the same bytes, which the checksums in the edit confirm.

use super::background::{self, add_dead_blobs};
use super::replicated::{check_external, check_index};
use super::{Db, DbInner, State};
use crate::compaction::picker::{self, PickerState};
use crate::error::{Error, IoContext, Result};
use crate::filename::{self, FileKind};
use crate::key::SeqNo;
use crate::options::Options;
use crate::version::edit::VersionEdit;
use crate::version::version::Version;
use parking_lot::MutexGuard;
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The directory, inside the database directory, where shipped files wait for their edit.
pub const STAGING_DIR: &str = "staging";
/// The directory, inside the database directory, that keeps the input files of installed edits
/// as `<index>/<name>` (under the index of the edit that removed them, with their own names, so
/// that they are sent as they are) for nodes that replay older edits and fetch their files,
/// until [`Db::drop_retired`].
pub const RETIRED_DIR: &str = "retired";

/// Bits of a file number that hold the counter; the term is above them.
const COUNTER_BITS: u32 = 32;

/// The file number of the `counter`-th file named by the leader of `term`: unique across
/// leaders, since a term has at most one leader. Numbers a node allocates for itself (MANIFESTs)
/// stay below `1 << 32` until the first replicated file is known.
pub fn file_number(term: u64, counter: u64) -> u64 {
    (term << COUNTER_BITS) | (counter & ((1 << COUNTER_BITS) - 1))
}

/// One output file of an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFile {
    /// Its name in the database directory (`NNNNNN.sst` or `NNNNNN.blob`).
    pub name: String,
    /// Bytes.
    pub len: u64,
    /// CRC32C of the whole file.
    pub crc32c: u32,
}

/// A flush or compaction prepared by the log's leader, to be applied by every node in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallEdit {
    /// The log indexes of the entries that sealed the input memtables, oldest first: they must be
    /// the oldest sealed memtables when the edit is applied.
    pub input_memtables: Vec<u64>,
    /// The SST and blob files the edit removes (they must be live).
    pub input_files: Vec<u64>,
    /// The files the edit adds.
    pub outputs: Vec<OutputFile>,
    /// The log index whose writes the files hold after the edit (the last input memtable's
    /// seal), for a flush.
    pub flushed_upto: Option<u64>,
    /// The version edit, in the MANIFEST's encoding (`docs/format/manifest.md`), without the
    /// node-local counters.
    pub edit: Vec<u8>,
}

/// What applying an [`InstallEdit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallOutcome {
    /// The files are live and the input memtables dropped.
    Installed,
    /// The edit's inputs were no longer there: nothing changed (why, in words).
    Stale(String),
}

/// The leader's prepared jobs, under the state lock.
#[derive(Debug, Default)]
pub(crate) struct LogJobs {
    /// Opened with [`Db::open_for_log_installs`]: background workers start nothing.
    pub enabled: bool,
    /// Seal indexes of the memtables whose flush is prepared and not yet applied or abandoned.
    pub prepared_seals: BTreeSet<u64>,
    /// Edits applied and found stale, since open.
    pub stale: u64,
    /// Edits installed, since open.
    pub installed: u64,
    /// Flush outputs this node wrote itself because it could not get them (see the module
    /// documentation), since open.
    pub fallback_flushes: u64,
    /// Staged files numbered below it are of terms whose edits are all applied here (see
    /// [`Db::remove_staged_below`]).
    pub staged_floor: u64,
}

impl Db {
    /// Opens the database in `path` with an external log (as [`Db::open_with_external_log`]) and
    /// with flushes, compactions and blob GC only through the log (see the module documentation).
    /// Staging files left from before are removed.
    ///
    /// # Errors
    /// As [`Db::open_with_external_log`].
    pub fn open_for_log_installs(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let inner = Arc::new(super::open::open(path.as_ref(), options, true)?);
        {
            let mut state = inner.state.lock();
            state.log_jobs.enabled = true;
            clear_staging(&inner)?;
        }
        let threads = background::start(&inner)?;
        Ok(Db {
            inner,
            threads: parking_lot::Mutex::new(threads),
        })
    }

    /// The staging directory (see [`STAGING_DIR`]).
    pub fn staging_dir(&self) -> PathBuf {
        self.inner.dir.join(STAGING_DIR)
    }

    /// Where the file `name` of an edit is on this node: in the database directory, else in
    /// staging. `None` for a name that is not a table or blob file, or a file not here.
    pub fn edit_file_path(&self, name: &str) -> Option<PathBuf> {
        if !matches!(
            filename::parse(name),
            Some(FileKind::Table(_) | FileKind::Blob(_))
        ) {
            return None;
        }
        [self.inner.dir.join(name), self.staging_dir().join(name)]
            .into_iter()
            .find(|p| self.inner.fs.exists(p))
            .or_else(|| retired_path(&self.inner, name))
    }

    /// Removes the retired files of edits at log index `upto` and before: no node will replay
    /// those edits' successors from before them any more (the caller knows every node's flushed
    /// position is past `upto`).
    pub fn drop_retired(&self, upto: u64) {
        let inner = &self.inner;
        let dir = inner.dir.join(RETIRED_DIR);
        let Ok(names) = inner.fs.list_dir(&dir) else {
            return;
        };
        for name in names {
            if name.parse::<u64>().is_ok_and(|i| i <= upto) {
                let sub = dir.join(&name);
                for file in inner.fs.list_dir(&sub).unwrap_or_default() {
                    let _ = inner.fs.remove_file(&sub.join(file));
                }
                let _ = inner.fs.remove_dir(&sub);
            }
        }
    }

    /// Removes from staging the files numbered below `below`: the files of the terms before the
    /// one `below` starts, once an edit of that term is applied (log terms never decrease, so no
    /// later entry names them). A file of those terms that arrives later is dropped on arrival
    /// (see [`Db::drop_unneeded_staged`]). Failures are ignored: staging is cleared at open.
    pub fn remove_staged_below(&self, below: u64) {
        {
            // Before the listing: a file renamed into staging after it finds the new floor.
            let mut state = self.inner.state.lock();
            let jobs = &mut state.log_jobs;
            jobs.staged_floor = jobs.staged_floor.max(below);
        }
        self.remove_staged_where(|n| n < below);
    }

    /// Removes the staged file `name` (a damaged copy, fetched again).
    pub fn remove_staged_file(&self, name: &str) {
        let staged = self.inner.dir.join(STAGING_DIR).join(name);
        let _ = self.inner.fs.remove_file(&staged);
    }

    /// Removes every staged file (a snapshot was installed: the edits it covers are never
    /// applied here, and later edits fetch their files again).
    pub fn clear_staged(&self) {
        self.remove_staged_where(|_| true);
    }

    /// Removes the staged files whose number `doomed` says (files being received, under
    /// temporary names, stay).
    pub fn remove_staged_where(&self, doomed: impl Fn(u64) -> bool) {
        let inner = &self.inner;
        let staging = inner.dir.join(STAGING_DIR);
        let Ok(names) = inner.fs.list_dir(&staging) else {
            return;
        };
        for name in names {
            if file_number_of(&name).is_some_and(&doomed) {
                let _ = inner.fs.remove_file(&staging.join(&name));
            }
        }
    }

    /// Removes the files `names`, just received into staging, that no edit will install here:
    /// files already in the database directory, files of terms whose edits are all applied
    /// (see [`Db::remove_staged_below`]), and files `unneeded` names (the log's owner knows
    /// which edits it applied). A shipment to a node that fetched the files itself meanwhile,
    /// or restarted, arrives that late. Returns how many were removed.
    ///
    /// `unneeded` is called under the state lock: an install, which moves staged files under
    /// it, is seen before or after, never halfway.
    pub fn drop_unneeded_staged(&self, names: &[String], unneeded: impl Fn(u64) -> bool) -> usize {
        let inner = &self.inner;
        let staging = inner.dir.join(STAGING_DIR);
        let state = inner.state.lock();
        let jobs = &state.log_jobs;
        let mut removed = 0;
        for name in names {
            let Some(n) = file_number_of(name) else {
                continue;
            };
            let doomed =
                n < jobs.staged_floor || unneeded(n) || inner.fs.exists(&inner.dir.join(name));
            if doomed && inner.fs.remove_file(&staging.join(name)).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// The log indexes that sealed the memtables waiting for their flush, oldest first.
    pub fn sealed_positions(&self) -> Vec<u64> {
        let state = self.inner.state.lock();
        state
            .sealed
            .iter()
            .filter_map(|s| s.position.as_ref().map(|p| p.index))
            .collect()
    }

    /// The live SST and blob file names, sorted.
    pub fn live_file_names(&self) -> Vec<String> {
        let state = self.inner.state.lock();
        let version = state.versions.current();
        let mut names: Vec<String> = version
            .file_numbers()
            .map(|n| file_name(&filename::table(Path::new(""), n)))
            .chain(
                version
                    .blob_file_numbers()
                    .map(|n| file_name(&filename::blob(Path::new(""), n))),
            )
            .collect();
        names.sort();
        names
    }

    /// Edits installed, edits found stale, and fallback flushes since open.
    pub fn install_counts(&self) -> (u64, u64, u64) {
        let state = self.inner.state.lock();
        let j = &state.log_jobs;
        (j.installed, j.stale, j.fallback_flushes)
    }

    /// Leader: writes the oldest sealed memtable whose flush is not prepared yet (the flushes
    /// before it must all be prepared) to an L0 SST and blob files numbered by `new_number`, and
    /// returns the edit that installs them. `None` when no memtable waits.
    ///
    /// # Errors
    /// `InvalidArgument` unless opened with [`Db::open_for_log_installs`]; `Io` when a file
    /// cannot be written (its partial outputs are removed; nothing is poisoned); `Closed`.
    pub fn prepare_flush(
        &self,
        new_number: &mut dyn FnMut() -> u64,
    ) -> Result<Option<InstallEdit>> {
        let inner = &self.inner;
        check_log_jobs(inner)?;
        let mut state = inner.state.lock();
        let Some(sealed) = state
            .sealed
            .iter()
            .find(|s| {
                s.position
                    .as_ref()
                    .is_some_and(|p| !state.log_jobs.prepared_seals.contains(&p.index))
            })
            .map(|s| (s.mem.clone(), s.position.clone()))
        else {
            return Ok(None);
        };
        let (mem, Some(position)) = sealed else {
            return Ok(None);
        };
        state.log_jobs.prepared_seals.insert(position.index);
        let number = new_number();
        state.pending_outputs.insert(number);
        let snapshots: Vec<SeqNo> = state.snapshots.keys().copied().collect();
        let mut blob_numbers = Vec::new();
        let flushed = MutexGuard::unlocked(&mut state, || {
            background::write_level0_numbered(
                inner,
                mem,
                number,
                snapshots,
                &mut blob_numbers,
                new_number,
            )
        });
        let mut outputs: Vec<u64> = blob_numbers.clone();
        outputs.push(number);
        let flushed = match flushed {
            Ok(f) => f,
            Err(e) => {
                state.log_jobs.prepared_seals.remove(&position.index);
                release_outputs(inner, &mut state, &outputs);
                return Err(e);
            }
        };
        let bytes = flushed.bytes_written();
        let blob_bytes = flushed.blob_bytes;
        let has_table = flushed.table.is_some();
        let mut edit = VersionEdit::default();
        flushed.add_to(&mut edit, &state.versions.current());
        edit.log_position = Some(position.clone());
        if !has_table {
            // An empty memtable wrote nothing: only the number was taken.
            state.pending_outputs.remove(&number);
        }
        let c = &inner.counters;
        c.flush_bytes_written.fetch_add(bytes, Ordering::Relaxed);
        c.blob_bytes_written
            .fetch_add(blob_bytes, Ordering::Relaxed);
        c.flushes.fetch_add(1, Ordering::Relaxed);
        drop(state);
        let result = describe(inner, &edit, vec![position.index], Some(position.index));
        if result.is_err() {
            self.abandon_prepared_numbers(&[position.index], &[], &outputs);
        }
        result.map(Some)
    }

    /// Leader: runs the compaction the picker chooses among files no prepared job holds, writing
    /// outputs numbered by `new_number`, and returns the edit that installs them (a trivial move
    /// is an edit without outputs). `None` when nothing needs compacting.
    ///
    /// # Errors
    /// As [`Db::prepare_flush`].
    pub fn prepare_compaction(
        &self,
        new_number: &mut dyn FnMut() -> u64,
    ) -> Result<Option<InstallEdit>> {
        let inner = &self.inner;
        check_log_jobs(inner)?;
        let mut state = inner.state.lock();
        let version = state.versions.current();
        let Some(task) = picker::pick(&PickerState {
            version: &version,
            options: &inner.options,
            busy: &state.busy,
        }) else {
            return Ok(None);
        };
        let inputs: Vec<u64> = task.all_inputs().map(|f| f.number).collect();
        state.busy.extend(inputs.iter().copied());
        let (outputs, written, dropped) = if task.trivial_move {
            (Vec::new(), 0, Vec::new())
        } else {
            state.compactions_running += 1;
            let snapshots: Vec<SeqNo> = state.snapshots.keys().copied().collect();
            let mut allocated = Vec::new();
            let result = MutexGuard::unlocked(&mut state, || {
                background::compact_numbered(
                    inner,
                    &task,
                    &version,
                    snapshots,
                    &mut allocated,
                    new_number,
                )
            });
            state.compactions_running -= 1;
            inner.bg_cv.notify_all();
            match result {
                Ok(done) => done,
                Err(e) => {
                    for n in &inputs {
                        state.busy.remove(n);
                    }
                    release_outputs(inner, &mut state, &allocated);
                    return Err(e);
                }
            }
        };
        let output_numbers: Vec<u64> = outputs.iter().map(|f| f.number).collect();
        let mut edit = picker::result_edit(&task, outputs);
        add_dead_blobs(&mut edit, &version, &dropped);
        let c = &inner.counters;
        if task.trivial_move {
            c.trivial_moves.fetch_add(1, Ordering::Relaxed);
        } else {
            c.compaction_bytes_read
                .fetch_add(task.input_bytes(), Ordering::Relaxed);
            c.compaction_bytes_written
                .fetch_add(written, Ordering::Relaxed);
            c.compactions.fetch_add(1, Ordering::Relaxed);
        }
        drop(state);
        let result = describe(inner, &edit, Vec::new(), None);
        if result.is_err() {
            self.abandon_prepared_numbers(&[], &inputs, &output_numbers);
        }
        result.map(Some)
    }

    /// Leader: collects the blob files that blob GC would collect now (see `db::gc`), writing
    /// their new physical files numbered by `new_number`, and returns the edit that points each
    /// logical file at its new file. The old physical files are the edit's input files. `None`
    /// when no blob file needs collecting.
    ///
    /// Each node applies the edit from its own version at the edit's log position: records
    /// that died since the leader prepared it (compactions applied in between) stay counted as
    /// garbage of the new file (see `validate_gc`).
    ///
    /// # Errors
    /// As [`Db::prepare_flush`].
    pub fn prepare_gc(&self, new_number: &mut dyn FnMut() -> u64) -> Result<Option<InstallEdit>> {
        let inner = &self.inner;
        check_log_jobs(inner)?;
        let mut state = inner.state.lock();
        let Some(prepared) = super::gc::prepare_for_log(inner, &mut state, new_number)? else {
            return Ok(None);
        };
        drop(state);
        let (edit, outputs) = (prepared.edit, prepared.outputs);
        let result = describe(inner, &edit, Vec::new(), None).map(|mut e| {
            e.input_files = prepared.inputs;
            e
        });
        if let Err(e) = &result {
            let logicals: Vec<u64> = edit.blob_files.iter().map(|b| b.logical).collect();
            let mut state = inner.state.lock();
            super::gc::release_for_log(&mut state, &logicals);
            release_outputs(inner, &mut state, &outputs);
            tracing::warn!(error = %e, "describing a GC job failed");
        }
        result.map(Some)
    }

    /// Leader: gives up a prepared edit that will not be applied here (leadership lost before
    /// it was proposed): its inputs become free again and its outputs obsolete.
    pub fn abandon_prepared(&self, edit: &InstallEdit) {
        let outputs: Vec<u64> = edit
            .outputs
            .iter()
            .filter_map(|o| file_number_of(&o.name))
            .collect();
        let mut state = self.inner.state.lock();
        super::gc::release_for_log(&mut state, &gc_logicals(edit));
        drop(state);
        self.abandon_prepared_numbers(&edit.input_memtables, &edit.input_files, &outputs);
    }

    fn abandon_prepared_numbers(&self, seals: &[u64], inputs: &[u64], outputs: &[u64]) {
        let inner = &self.inner;
        let mut state = inner.state.lock();
        release_job(&mut state, seals, inputs, &[]);
        release_outputs(inner, &mut state, outputs);
        background::delete_obsolete_files(inner, &mut state);
    }

    /// Whether `edit` would install (true) or is stale (false) if applied now: the deterministic
    /// check of [`Db::install_edit`], without the files.
    pub fn edit_is_current(&self, edit: &InstallEdit) -> bool {
        let state = self.inner.state.lock();
        validate(&state, edit).is_ok()
    }

    /// The outputs of `edit` that are neither in the database directory nor in staging, when the
    /// edit is current (empty when it is stale: a stale edit needs no file).
    pub fn missing_outputs(&self, edit: &InstallEdit) -> Vec<OutputFile> {
        if !self.edit_is_current(edit) {
            return Vec::new();
        }
        edit.outputs
            .iter()
            .filter(|o| self.edit_file_path(&o.name).is_none())
            .cloned()
            .collect()
    }

    /// Applies `edit`, log entry `index`, on this node (see the module documentation). A stale
    /// edit changes nothing but the applied index.
    ///
    /// # Errors
    /// `InvalidArgument` without log installs or for an index at or below the last applied one;
    /// `Io` when an output file of a current edit is missing or damaged (nothing changed: fetch
    /// it and call again); `Io` when the directory or MANIFEST cannot be written (the database is
    /// then poisoned); `Poisoned`; `Closed`.
    pub fn install_edit(&self, index: u64, edit: &InstallEdit) -> Result<InstallOutcome> {
        let inner = &self.inner;
        check_log_jobs(inner)?;
        let mut wal = inner.wal.lock();
        check_index(&wal, index)?;
        let mut state = inner.state.lock();
        let mut ve = match validate(&state, edit) {
            Ok(ve) => ve,
            Err(reason) => {
                wal.applied_index = Some(index);
                state.log_jobs.stale += 1;
                // The leader's own stale job: free what it holds.
                let outputs: Vec<u64> = edit
                    .outputs
                    .iter()
                    .filter_map(|o| file_number_of(&o.name))
                    .filter(|n| state.pending_outputs.contains(n))
                    .collect();
                let gc = gc_logicals(edit);
                release_job(&mut state, &edit.input_memtables, &edit.input_files, &gc);
                release_outputs(inner, &mut state, &outputs);
                // No node installs a stale edit's files: staged copies are of no use.
                for o in &edit.outputs {
                    let staged = inner.dir.join(STAGING_DIR).join(&o.name);
                    let _ = inner.fs.remove_file(&staged);
                }
                drop(wal);
                background::delete_obsolete_files(inner, &mut state);
                return Ok(InstallOutcome::Stale(reason));
            }
        };
        // 1. The files, durable in the database directory.
        let mut moved = false;
        for o in &edit.outputs {
            let path = inner.dir.join(&o.name);
            if inner.fs.exists(&path) {
                continue;
            }
            let staged = inner.dir.join(STAGING_DIR).join(&o.name);
            if inner.fs.exists(&staged) {
                check_file(inner, &staged, o)?;
                inner
                    .fs
                    .rename(&staged, &path)
                    .ctx(|| format!("move {} out of staging", o.name))?;
            } else if let Some(retired) = retired_path(inner, &o.name) {
                check_file(inner, &retired, o)?;
                inner
                    .fs
                    .link(&retired, &path)
                    .ctx(|| format!("link {} back from retired", o.name))?;
            } else {
                return Err(Error::io(
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                    format!("file {} of log entry {index} is not here yet", o.name),
                ));
            }
            if let Some(n) = file_number_of(&o.name) {
                // Not live yet: protected from the removal of obsolete files until installed.
                state.pending_outputs.insert(n);
            }
            moved = true;
        }
        // The inputs stay fetchable for nodes that replay older edits (see `RETIRED_DIR`).
        retire_inputs(inner, &state, &ve, index)?;
        let result = (|| {
            if moved {
                inner
                    .fs
                    .sync_dir(&inner.dir)
                    .ctx(|| format!("sync directory {}", inner.dir.display()))?;
            }
            // 2. The MANIFEST.
            let k = edit.input_memtables.len();
            if k > 0 {
                let last = state.sealed.get(k - 1).map(|s| s.last_seq).unwrap_or(0);
                let through = last.max(state.versions.last_seq());
                state.versions.set_last_seq(through);
                ve.log_number = Some(state.sealed.get(k).map_or(state.mem_wal, |s| s.wal));
                ve.log_position = state.sealed.get(k - 1).and_then(|s| s.position.clone());
            }
            state.versions.log_and_apply(ve)
        })();
        if let Err(e) = result {
            return Err(inner.set_poison(e));
        }
        // 3. The memtables.
        let k = edit.input_memtables.len();
        state.sealed.drain(..k);
        for o in &edit.outputs {
            if let Some(n) = file_number_of(&o.name) {
                state.pending_outputs.remove(&n);
            }
        }
        let gc = gc_logicals(edit);
        release_job(&mut state, &edit.input_memtables, &edit.input_files, &gc);
        state.log_jobs.installed += 1;
        wal.applied_index = Some(index);
        drop(wal);
        inner.install_super_version(&state);
        inner.bg_cv.notify_all();
        background::delete_obsolete_files(inner, &mut state);
        Ok(InstallOutcome::Installed)
    }

    /// Fallback for a node that cannot get the files of the flush `edit`: flushes the edit's
    /// input memtables here, under the edit's file numbers, into staging, and keeps the result
    /// only where every file matches the edit's size and checksum (then [`Db::install_edit`]
    /// finds them). Returns whether they matched.
    ///
    /// # Errors
    /// `InvalidArgument` for an edit that is not a current flush of one memtable; `Io`.
    pub fn write_flush_outputs(&self, edit: &InstallEdit) -> Result<bool> {
        let inner = &self.inner;
        check_log_jobs(inner)?;
        let (mem, snapshots) = {
            let state = inner.state.lock();
            if validate(&state, edit).is_err() || edit.input_memtables.len() != 1 {
                return Err(Error::invalid_argument(
                    "only a current flush of one memtable can be written locally",
                ));
            }
            let snapshots: Vec<SeqNo> = state.snapshots.keys().copied().collect();
            (state.sealed.front().map(|s| s.mem.clone()), snapshots)
        };
        let Some(mem) = mem else {
            return Ok(false);
        };
        let ve = VersionEdit::decode(&edit.edit).map_err(Error::invalid_argument)?;
        let table = ve.new_files.first().map(|(_, f)| f.number);
        let mut blobs: Vec<u64> = ve.blob_files.iter().map(|b| b.physical).collect();
        blobs.reverse();
        let staging = inner.dir.join(STAGING_DIR);
        let scratch = staging.clone();
        let mut blob_numbers = Vec::new();
        let mut next_blob = || blobs.pop().unwrap_or(u64::MAX);
        let written = background::write_level0_into(
            inner,
            &scratch,
            mem,
            table.unwrap_or(u64::MAX),
            snapshots,
            &mut blob_numbers,
            &mut next_blob,
        );
        {
            let mut state = inner.state.lock();
            for n in &blob_numbers {
                state.pending_outputs.remove(n);
            }
        }
        let matched = written.is_ok()
            && edit.outputs.iter().all(|o| {
                let p = scratch.join(&o.name);
                check_file(inner, &p, o).is_ok()
            });
        if matched {
            inner.state.lock().log_jobs.fallback_flushes += 1;
        } else {
            for o in &edit.outputs {
                let _ = inner.fs.remove_file(&scratch.join(&o.name));
            }
        }
        written?;
        Ok(matched)
    }
}

/// Refuses a flush, compaction or GC asked for directly on a database whose jobs come through
/// the log: it would change this node's files alone.
pub(crate) fn refuse_local_jobs(inner: &DbInner, what: &str) -> Result<()> {
    if inner.state.lock().log_jobs.enabled {
        return Err(Error::invalid_argument(format!(
            "{what}: this database flushes and compacts only through its log"
        )));
    }
    Ok(())
}

fn check_log_jobs(inner: &DbInner) -> Result<()> {
    check_external(inner)?;
    if !inner.state.lock().log_jobs.enabled {
        return Err(Error::invalid_argument(
            "flushes and compactions through the log need Db::open_for_log_installs",
        ));
    }
    Ok(())
}

/// The deterministic check of an edit against the state the log produced: the version edit it
/// carries, ready to apply, or why it is stale.
fn validate(state: &State, edit: &InstallEdit) -> std::result::Result<VersionEdit, String> {
    let ve = VersionEdit::decode(&edit.edit).map_err(|e| format!("unreadable edit: {e}"))?;
    if is_gc(&ve) {
        return validate_gc(state, edit, ve);
    }
    let k = edit.input_memtables.len();
    if k > state.sealed.len() {
        return Err(format!(
            "{k} input memtables but {} sealed",
            state.sealed.len()
        ));
    }
    for (want, s) in edit.input_memtables.iter().zip(state.sealed.iter()) {
        let have = s.position.as_ref().map(|p| p.index);
        if have != Some(*want) {
            return Err(format!(
                "input memtable sealed at {want} is not the next to flush ({have:?} is)"
            ));
        }
    }
    if edit.flushed_upto != edit.input_memtables.last().copied() {
        return Err("flushed position does not match the input memtables".into());
    }
    let mut deleted: Vec<u64> = ve.deleted_files.iter().map(|(_, n)| *n).collect();
    deleted.sort_unstable();
    let mut inputs = edit.input_files.clone();
    inputs.sort_unstable();
    if deleted != inputs {
        return Err("input files do not match the edit".into());
    }
    let names: Vec<String> = ve
        .new_files
        .iter()
        .filter(|(_, f)| !ve.deleted_files.iter().any(|(_, d)| *d == f.number))
        .map(|(_, f)| file_name(&filename::table(Path::new(""), f.number)))
        .chain(
            ve.blob_files
                .iter()
                .map(|b| file_name(&filename::blob(Path::new(""), b.physical))),
        )
        .collect();
    let (version, live) = check_outputs(state, edit, names)?;
    if let Some(o) = edit
        .outputs
        .iter()
        .find(|o| file_number_of(&o.name).is_some_and(|n| live.contains(&n)))
    {
        return Err(format!("output {} is already live", o.name));
    }
    for b in &ve.blob_files {
        if b.physical != b.logical || version.blobs.get(&b.logical).is_some() {
            return Err(format!("blob file {} is not new", b.logical));
        }
    }
    version
        .apply(&ve)
        .map_err(|e| format!("does not apply: {}", e.message()))?;
    Ok(ve)
}

/// A blob GC edit: it points logical blob files at new physical files.
fn is_gc(ve: &VersionEdit) -> bool {
    ve.blob_files.iter().any(|b| b.physical != b.logical)
}

/// The logical blob files a GC edit collects (none for a flush or a compaction, or an edit that
/// cannot be read).
fn gc_logicals(edit: &InstallEdit) -> Vec<u64> {
    VersionEdit::decode(&edit.edit)
        .map(|ve| {
            ve.blob_files
                .iter()
                .filter(|b| b.physical != b.logical)
                .map(|b| b.logical)
                .collect()
        })
        .unwrap_or_default()
}

/// Checks that the edit's shipped outputs are exactly the files `names` its version edit adds;
/// returns the current version and the file numbers live in it.
fn check_outputs(
    state: &State,
    edit: &InstallEdit,
    mut names: Vec<String>,
) -> std::result::Result<(Arc<Version>, HashSet<u64>), String> {
    names.sort();
    let mut outputs: Vec<String> = edit.outputs.iter().map(|o| o.name.clone()).collect();
    outputs.sort();
    if names != outputs {
        return Err("output files do not match the edit".into());
    }
    let version = state.versions.current();
    let live: HashSet<u64> = version
        .file_numbers()
        .chain(version.blob_file_numbers())
        .collect();
    Ok((version, live))
}

/// [`validate`] for a GC edit: every collected logical file must still be in the physical file
/// the leader read (the edit's input files, in the order of its blob files), and the edit is
/// rebased on this version: records that died after the leader prepared it (a compaction
/// applied in between) were alive then, so the new file holds them, and they become its garbage.
/// Every node applies the same edit at the same log position, so every node writes the same
/// MANIFEST edit.
fn validate_gc(
    state: &State,
    edit: &InstallEdit,
    mut ve: VersionEdit,
) -> std::result::Result<VersionEdit, String> {
    if !edit.input_memtables.is_empty()
        || edit.flushed_upto.is_some()
        || !ve.new_files.is_empty()
        || !ve.deleted_files.is_empty()
        || !ve.blob_dead.is_empty()
        || !ve.deleted_blob_files.is_empty()
        || edit.input_files.len() != ve.blob_files.len()
    {
        return Err("a blob GC edit replaces blob files and changes nothing else".into());
    }
    let names: Vec<String> = ve
        .blob_files
        .iter()
        .map(|b| file_name(&filename::blob(Path::new(""), b.physical)))
        .collect();
    let (version, live) = check_outputs(state, edit, names)?;
    for (b, &input) in ve.blob_files.iter_mut().zip(&edit.input_files) {
        let logical = b.logical;
        let Some(cur) = version.blobs.get(&logical) else {
            return Err(format!("blob file {logical} is gone"));
        };
        if cur.physical != input {
            return Err(format!(
                "blob file {logical} is in {} now, not in {input}",
                cur.physical
            ));
        }
        if b.physical == logical || live.contains(&b.physical) {
            return Err(format!("GC output {} is not new", b.physical));
        }
        if b.count != cur.count {
            return Err(format!("blob file {logical}: record count differs"));
        }
        let Some(keep) = &b.survivors else {
            return Err(format!(
                "blob file {logical}: a GC output without survivors"
            ));
        };
        let mut undone = b.dead.clone();
        undone.and_not(&cur.dead);
        let mut died = (*cur.dead).clone();
        died.and_not(&b.dead);
        let mut lost = died.clone();
        lost.and_not(keep);
        if undone.count_ones() > 0 || lost.count_ones() > 0 {
            return Err(format!(
                "blob file {logical}: its dead records do not follow from the edit's"
            ));
        }
        let garbage_then = cur.record_bytes.checked_sub(b.record_bytes);
        let Some(garbage_now) = garbage_then.and_then(|g| cur.garbage_bytes.checked_sub(g)) else {
            return Err(format!("blob file {logical}: garbage bytes do not add up"));
        };
        b.garbage_bytes = garbage_now;
        b.dead = (*cur.dead).clone();
    }
    version
        .apply(&ve)
        .map_err(|e| format!("does not apply: {}", e.message()))?;
    Ok(ve)
}

/// Completes the description of a prepared edit: the output files with their checksums.
fn describe(
    inner: &DbInner,
    edit: &VersionEdit,
    input_memtables: Vec<u64>,
    flushed_upto: Option<u64>,
) -> Result<InstallEdit> {
    let mut outputs = Vec::new();
    let deleted: HashSet<u64> = edit.deleted_files.iter().map(|(_, n)| *n).collect();
    let tables = edit
        .new_files
        .iter()
        .filter(|(_, f)| !deleted.contains(&f.number))
        .map(|(_, f)| filename::table(&inner.dir, f.number));
    let blobs = edit
        .blob_files
        .iter()
        .map(|b| filename::blob(&inner.dir, b.physical));
    for path in tables.chain(blobs) {
        let (len, crc32c) = checksum(inner, &path)?;
        outputs.push(OutputFile {
            name: file_name(&path),
            len,
            crc32c,
        });
    }
    let mut bytes = Vec::new();
    edit.encode(&mut bytes);
    Ok(InstallEdit {
        input_memtables,
        input_files: edit.deleted_files.iter().map(|(_, n)| *n).collect(),
        outputs,
        flushed_upto,
        edit: bytes,
    })
}

/// Bytes read at a time when checksumming a file.
const CHECKSUM_CHUNK: u64 = 1 << 20;

fn checksum(inner: &DbInner, path: &Path) -> Result<(u64, u32)> {
    let file = inner
        .fs
        .open(path)
        .ctx(|| format!("open {}", path.display()))?;
    let len = file.len();
    let mut crc = 0u32;
    let mut offset = 0;
    let mut buf = Vec::new();
    while offset < len {
        let n = (len - offset).min(CHECKSUM_CHUNK) as usize;
        buf.resize(n, 0);
        file.read_exact_at(offset, &mut buf)
            .ctx(|| format!("read {}", path.display()))?;
        crc = crc32c::crc32c_append(crc, &buf);
        offset += n as u64;
    }
    Ok((len, crc))
}

fn check_file(inner: &DbInner, path: &Path, want: &OutputFile) -> Result<()> {
    let (len, crc) = checksum(inner, path)?;
    if len != want.len || crc != want.crc32c {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "shipped file has {len} bytes with checksum {crc:08x}, the edit says {} bytes \
                 with {:08x}",
                want.len, want.crc32c
            ),
        ));
    }
    Ok(())
}

fn release_job(state: &mut State, seals: &[u64], inputs: &[u64], gc: &[u64]) {
    super::gc::release_for_log(state, gc);
    for s in seals {
        state.log_jobs.prepared_seals.remove(s);
    }
    for n in inputs {
        state.busy.remove(n);
    }
}

/// Output files of a job that will not be installed: no longer protected, so obsolete.
fn release_outputs(inner: &DbInner, state: &mut State, outputs: &[u64]) {
    let live: HashSet<u64> = state.versions.live_files();
    for n in outputs {
        state.pending_outputs.remove(n);
        if !live.contains(n) {
            let _ = inner.fs.remove_file(&filename::table(&inner.dir, *n));
            let _ = inner.fs.remove_file(&filename::blob(&inner.dir, *n));
        }
    }
}

/// Removes every file in staging (none is named by the MANIFEST: installed files are moved out).
fn clear_staging(inner: &DbInner) -> Result<()> {
    let staging = inner.dir.join(STAGING_DIR);
    inner
        .fs
        .create_dir_all(&staging)
        .ctx(|| format!("create {}", staging.display()))?;
    let names = inner
        .fs
        .list_dir(&staging)
        .ctx(|| format!("list {}", staging.display()))?;
    for name in names {
        let path = staging.join(&name);
        inner
            .fs
            .remove_file(&path)
            .ctx(|| format!("remove {}", path.display()))?;
    }
    inner
        .fs
        .sync_dir(&staging)
        .ctx(|| format!("sync directory {}", staging.display()))
}

/// Where a retired copy of `name` is, if any.
fn retired_path(inner: &DbInner, name: &str) -> Option<PathBuf> {
    let dir = inner.dir.join(RETIRED_DIR);
    let indexes = inner.fs.list_dir(&dir).ok()?;
    indexes
        .into_iter()
        .map(|index| dir.join(index).join(name))
        .find(|p| inner.fs.exists(p))
}

/// Links the files `ve` removes into the retired directory under `index`, durably.
fn retire_inputs(inner: &DbInner, state: &State, ve: &VersionEdit, index: u64) -> Result<()> {
    let version = state.versions.current();
    let mut paths: Vec<PathBuf> = ve
        .deleted_files
        .iter()
        .filter(|(_, n)| !ve.new_files.iter().any(|(_, f)| f.number == *n))
        .map(|(_, n)| filename::table(&inner.dir, *n))
        .collect();
    paths.extend(
        ve.deleted_blob_files
            .iter()
            .filter_map(|l| version.blobs.get(l))
            .map(|b| filename::blob(&inner.dir, b.physical)),
    );
    // A GC edit's inputs: the physical files its logical files leave.
    paths.extend(
        ve.blob_files
            .iter()
            .filter_map(|b| {
                version
                    .blobs
                    .get(&b.logical)
                    .filter(|m| m.physical != b.physical)
            })
            .map(|m| filename::blob(&inner.dir, m.physical)),
    );
    if paths.is_empty() {
        return Ok(());
    }
    let retired = inner.dir.join(RETIRED_DIR);
    let dir = retired.join(index.to_string());
    inner
        .fs
        .create_dir_all(&dir)
        .ctx(|| format!("create {}", dir.display()))?;
    for from in paths {
        let to = dir.join(file_name(&from));
        if !inner.fs.exists(&to) {
            inner
                .fs
                .link(&from, &to)
                .ctx(|| format!("retire {}", from.display()))?;
        }
    }
    for d in [&dir, &retired, &inner.dir] {
        inner
            .fs
            .sync_dir(d)
            .ctx(|| format!("sync directory {}", d.display()))?;
    }
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn file_number_of(name: &str) -> Option<u64> {
    match filename::parse(name)? {
        FileKind::Table(n) | FileKind::Blob(n) => Some(n),
        _ => None,
    }
}
