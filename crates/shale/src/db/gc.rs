//! Blob garbage collection in the database: scheduling tasks on the GC engine and installing their
//! results.
//!
//! Offload mode (the default, AegonKV's design): the picker (`gc::picker`) chooses logical blob
//! files by their exact garbage, each becomes a self-contained [`GcTask`] (input file, survivors
//! and keep bitmaps, output number) run by the [`GcEngine`]; its result is installed with one
//! MANIFEST edit that points the logical file at the new physical file with `keep` as survivors.
//! No LSM lookup, no write-back, no memtable traffic: `BlobRef`s never change.
//!
//! Titan mode (the ablation baseline): a background worker reads every record of the file, keeps
//! those that an LSM point lookup still finds, writes them to a new logical file, installs it, and
//! writes the new references back through the WAL and memtable, each only if the key still holds
//! the old reference at that moment (checked under the WAL lock, so no user write can slip in
//! between). The old file's references then die as compactions drop them.
//!
//! Crash safety: an output is synced (by the engine) and its directory entry synced (here) before
//! the MANIFEST edit names it; until then it is a pending output, and after a crash an orphan that
//! the next open removes. The old physical file is deleted only when no version names it, so
//! iterators and reads that started before the install keep reading it.
//!
//! A failed task (for example a corrupt input record) is logged, its output removed, and its
//! logical file left alone until the database is reopened; it never poisons the database. A failed
//! MANIFEST write does, as everywhere.

use super::{read, write, DbInner, State};
use crate::blob::Bitmap;
use crate::blob::{BlobRef, BlobWriter, GcCompletion, GcTask};
use crate::compaction::job::{decode_blob_ref, DroppedBlob};
use crate::compaction::separation::record_size;
use crate::error::{Error, ErrorKind, Result};
use crate::filename;
use crate::gc::picker::{self, GcPolicy, Space};
use crate::key::{ValueKind, MAX_SEQNO};
use crate::options::GcMode;
use crate::version::blob_files::BlobFileMeta;
use crate::version::edit::{BlobFileEdit, VersionEdit};
use crate::version::version::Version;
use parking_lot::MutexGuard;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// GC bookkeeping, under the state lock.
#[derive(Default)]
pub(crate) struct GcState {
    in_flight: HashMap<u64, InFlight>,
    /// Logical files being collected.
    busy: HashSet<u64>,
    /// Logical files whose collection failed; left alone until reopen.
    failed: HashSet<u64>,
    /// Titan mode: logical files already rewritten, waiting for compactions to drop their old
    /// references; never collected again.
    retired: HashSet<u64>,
    next_task: u64,
    /// A worker is scheduling or running GC synchronously.
    scheduling: bool,
}

struct InFlight {
    logical: u64,
    input_physical: u64,
    output_number: u64,
    keep: Bitmap,
    garbage_at_submit: u64,
}

/// Bytes of a version's blob files and the live record bytes they hold: the space GC can give
/// back. (SSTs, WALs and memtables are outside GC's reach.)
pub(crate) fn space(version: &Version) -> Space {
    let mut space = Space {
        on_disk: 0,
        live: 0,
    };
    for b in version.blobs.values() {
        space.on_disk += b.file_size;
        space.live += b.live_bytes();
    }
    space
}

/// True while a GC task is in flight or a worker is scheduling one.
pub(crate) fn active(state: &State) -> bool {
    state.gc.scheduling || !state.gc.in_flight.is_empty()
}

/// The blob files the GC picker would collect now in `version`: none of those already being
/// collected, that failed, or (Titan mode) that were rewritten already.
fn pick_files(inner: &DbInner, gc: &GcState, version: &Version) -> picker::GcPick {
    let mut excluded: HashSet<u64> = gc.busy.clone();
    excluded.extend(gc.failed.iter().copied());
    excluded.extend(gc.retired.iter().copied());
    let policy = GcPolicy {
        threshold: inner.options.gc_threshold,
        space_amp_target: inner.options.gc_space_amp_target,
        max_tasks: match inner.options.gc_mode {
            GcMode::Offload => inner.gc_engine.caps().max_in_flight.max(1),
            GcMode::Titan => 1,
        },
    };
    picker::pick(
        &version.blobs,
        &excluded,
        gc.busy.len(),
        space(version),
        &policy,
    )
}

/// True while GC has work: a task in flight or being scheduled, or a blob file it would collect.
pub(crate) fn has_work(inner: &DbInner, state: &State) -> bool {
    if active(state) {
        return true;
    }
    let version = state.versions.current();
    !version.blobs.is_empty() && !pick_files(inner, &state.gc, &version).files.is_empty()
}

/// Installs finished GC tasks and starts new ones. Called by a background worker holding the state
/// lock. Returns true when it did something (the caller then re-checks for other work).
///
/// # Errors
/// A failed MANIFEST write (the caller poisons the database).
pub(crate) fn run(inner: &DbInner, state: &mut MutexGuard<'_, State>) -> Result<bool> {
    if state.gc.scheduling {
        return Ok(false);
    }
    state.gc.scheduling = true;
    let result = run_locked(inner, state);
    state.gc.scheduling = false;
    result
}

fn run_locked(inner: &DbInner, state: &mut MutexGuard<'_, State>) -> Result<bool> {
    let mut did = false;
    let mut failed = None;
    for c in inner.gc_engine.completions() {
        did = true;
        if failed.is_some() {
            // After a failed install, the other finished tasks are dropped (their files stay
            // as they are, and are picked again), so none is left in flight.
            abandon(inner, state, c);
        } else if let Err(e) = install(inner, state, c) {
            failed = Some(e);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if inner.closed.load(Ordering::Acquire) {
        return Ok(did);
    }
    let version = state.versions.current();
    if version.blobs.is_empty() {
        return Ok(did);
    }
    state.gc.retired.retain(|l| version.blobs.contains_key(l));
    let pick = pick_files(inner, &state.gc, &version);
    for logical in pick.files {
        let Some(meta) = version.blobs.get(&logical).cloned() else {
            continue;
        };
        did = true;
        if inner.options.gc_mode == GcMode::Titan {
            titan_collect(inner, state, &meta)?;
            continue;
        }
        let output_number = state.versions.new_file_number();
        state.pending_outputs.insert(output_number);
        let keep = meta.keep_set();
        let id = state.gc.next_task;
        state.gc.next_task += 1;
        let task = GcTask {
            id,
            fs: inner.fs.clone(),
            input_path: filename::blob(&inner.dir, meta.physical),
            logical,
            old_survivors: meta.survivors.as_deref().cloned(),
            keep: keep.clone(),
            output_path: filename::blob(&inner.dir, output_number),
            output_number,
        };
        state.gc.in_flight.insert(
            id,
            InFlight {
                logical,
                input_physical: meta.physical,
                output_number,
                keep,
                garbage_at_submit: meta.garbage_bytes,
            },
        );
        state.gc.busy.insert(logical);
        let submitted = MutexGuard::unlocked(state, || inner.gc_engine.submit(task));
        if let Err(e) = submitted {
            state.gc.in_flight.remove(&id);
            state.gc.busy.remove(&logical);
            state.pending_outputs.remove(&output_number);
            if e.kind() != ErrorKind::Busy && e.kind() != ErrorKind::Closed {
                tracing::warn!(blob_file = logical, error = %e, "submitting a GC task failed");
                state.gc.failed.insert(logical);
            }
            break;
        }
    }
    Ok(did)
}

/// Drops a finished task without installing it: its output is removed.
fn abandon(inner: &DbInner, state: &mut MutexGuard<'_, State>, c: GcCompletion) {
    let Some(f) = state.gc.in_flight.remove(&c.task_id) else {
        return;
    };
    state.gc.busy.remove(&f.logical);
    state.pending_outputs.remove(&f.output_number);
    let path = filename::blob(&inner.dir, f.output_number);
    MutexGuard::unlocked(state, || {
        let _ = inner.fs.remove_file(&path);
    });
}

/// Installs one finished task: the logical file now lives in the task's output.
fn install(inner: &DbInner, state: &mut MutexGuard<'_, State>, c: GcCompletion) -> Result<()> {
    let Some(f) = state.gc.in_flight.remove(&c.task_id) else {
        return Ok(());
    };
    state.gc.busy.remove(&f.logical);
    let discard = |state: &mut MutexGuard<'_, State>| {
        state.pending_outputs.remove(&f.output_number);
        let path = filename::blob(&inner.dir, f.output_number);
        MutexGuard::unlocked(state, || {
            let _ = inner.fs.remove_file(&path);
        });
    };
    let out = match c.result {
        Ok(out) => out,
        Err(e) => {
            tracing::warn!(blob_file = f.logical, error = %e, "a GC task failed; the blob file stays as it is");
            state.gc.failed.insert(f.logical);
            discard(state);
            return Ok(());
        }
    };
    // No version is kept past this point: a held version would keep the input file alive.
    let current = state
        .versions
        .current()
        .blobs
        .get(&f.logical)
        .filter(|m| m.physical == f.input_physical)
        .cloned();
    let Some(meta) = current else {
        // Every record died while the task ran: the logical file is gone already.
        discard(state);
        return Ok(());
    };
    if u64::from(out.info.count) != f.keep.count_ones() {
        tracing::warn!(
            blob_file = f.logical,
            copied = out.info.count,
            expected = f.keep.count_ones(),
            "a GC task copied the wrong number of records; its output is discarded"
        );
        state.gc.failed.insert(f.logical);
        discard(state);
        return Ok(());
    }
    if let Err(e) = MutexGuard::unlocked(state, || sync_dir(inner)) {
        tracing::warn!(error = %e, "syncing the directory after GC failed; the GC output is discarded");
        discard(state);
        return Ok(());
    }
    let mut edit = VersionEdit::default();
    edit.blob_files.push(BlobFileEdit {
        physical: out.output_number,
        file_size: out.info.file_size,
        record_bytes: meta.record_bytes.saturating_sub(f.garbage_at_submit),
        garbage_bytes: meta.garbage_bytes.saturating_sub(f.garbage_at_submit),
        survivors: Some(f.keep),
        ..meta.to_edit()
    });
    if let Err(e) = state.versions.log_and_apply(edit) {
        // Without space the edit is surely not on disk: the output goes. After a fatal failure
        // it stays, protected as pending.
        if !e.is_fatal() {
            discard(state);
        }
        return Err(e);
    }
    state.pending_outputs.remove(&f.output_number);
    inner.install_super_version(state);
    let c = &inner.counters;
    c.gc_runs.fetch_add(1, Ordering::Relaxed);
    c.gc_bytes_read.fetch_add(out.bytes_read, Ordering::Relaxed);
    c.gc_bytes_written
        .fetch_add(out.bytes_written, Ordering::Relaxed);
    c.gc_micros.fetch_add(out.micros, Ordering::Relaxed);
    super::background::delete_obsolete_files(inner, state);
    Ok(())
}

fn sync_dir(inner: &DbInner) -> Result<()> {
    inner
        .fs
        .sync_dir(&inner.dir)
        .map_err(|e| Error::io(e, format!("sync directory {}", inner.dir.display())))
}

/// A record that Titan-mode GC found alive and copied.
struct Moved {
    key: Vec<u8>,
    old_ref: Vec<u8>,
    new_ref: BlobRef,
    bytes: u64,
}

/// Titan-mode GC of one logical file (see the module documentation).
fn titan_collect(
    inner: &DbInner,
    state: &mut MutexGuard<'_, State>,
    meta: &BlobFileMeta,
) -> Result<()> {
    let logical = meta.logical;
    state.gc.busy.insert(logical);
    state.gc.retired.insert(logical);
    let new_logical = state.versions.new_file_number();
    state.pending_outputs.insert(new_logical);
    let started = Instant::now();
    let copied = MutexGuard::unlocked(state, || titan_copy(inner, meta, new_logical));
    state.gc.busy.remove(&logical);
    let (moved, info, bytes_read) = match copied {
        Ok(Some(done)) => done,
        Ok(None) => {
            state.pending_outputs.remove(&new_logical);
            return Ok(());
        }
        Err(e) => {
            tracing::warn!(blob_file = logical, error = %e, "Titan GC failed; the blob file stays as it is");
            state.gc.failed.insert(logical);
            state.pending_outputs.remove(&new_logical);
            let _ = inner
                .fs
                .remove_file(&filename::blob(&inner.dir, new_logical));
            return Ok(());
        }
    };
    let count = info.count;
    let mut edit = VersionEdit::default();
    edit.blob_files.push(BlobFileEdit {
        logical: new_logical,
        physical: new_logical,
        count,
        file_size: info.file_size,
        record_bytes: moved.iter().map(|m| m.bytes).sum(),
        garbage_bytes: 0,
        survivors: None,
        dead: Bitmap::new(u64::from(count), false),
    });
    if let Err(e) = state.versions.log_and_apply(edit) {
        if !e.is_fatal() {
            state.gc.retired.remove(&logical);
            state.pending_outputs.remove(&new_logical);
            let _ = inner
                .fs
                .remove_file(&filename::blob(&inner.dir, new_logical));
        }
        return Err(e);
    }
    state.pending_outputs.remove(&new_logical);
    inner.install_super_version(state);

    // Write the new locations back, each only if the key still holds the old reference.
    let stale = MutexGuard::unlocked(state, || titan_write_back(inner, &moved))?;
    if !stale.is_empty() {
        let mut edit = VersionEdit::default();
        let version = state.versions.current();
        super::background::add_dead_blobs(&mut edit, &version, &stale);
        state.versions.log_and_apply(edit)?;
        inner.install_super_version(state);
    }
    let c = &inner.counters;
    c.gc_runs.fetch_add(1, Ordering::Relaxed);
    c.gc_bytes_read.fetch_add(bytes_read, Ordering::Relaxed);
    c.gc_bytes_written
        .fetch_add(info.file_size, Ordering::Relaxed);
    c.gc_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    super::background::delete_obsolete_files(inner, state);
    Ok(())
}

type TitanCopy = (Vec<Moved>, crate::blob::BlobFileInfo, u64);

/// Reads every record of the physical file of `meta`, looks each key up, and copies the ones
/// still referenced into the new file `new_logical`. `None` when nothing is alive (no file is left
/// behind).
fn titan_copy(inner: &DbInner, meta: &BlobFileMeta, new_logical: u64) -> Result<Option<TitanCopy>> {
    let logical = meta.logical;
    let reader = inner.blob_cache.get(meta.physical)?;
    let sv = inner.current_super_version();
    let path = filename::blob(&inner.dir, new_logical);
    let mut writer: Option<BlobWriter> = None;
    let mut moved = Vec::new();
    let mut bytes_read = 0u64;
    for index in 0..reader.count() {
        if inner.closed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Closed,
                "GC cancelled: the database is closing",
            ));
        }
        let record = reader.get(index)?;
        bytes_read += record_size(record.key.len(), record.value.len() as u64);
        let Some((ValueKind::BlobRef, current)) =
            read::get_entry(inner, &sv, &record.key, MAX_SEQNO)?
        else {
            continue;
        };
        let r = decode_blob_ref(&record.key, &current)?;
        // A file that offload GC rewrote holds ordinal `o` at index `rank(survivors, o)`.
        if r.file != logical || meta.index_of(r.ordinal) != Some(index) {
            continue;
        }
        let w = match &mut writer {
            Some(w) => w,
            None => {
                let file = inner
                    .fs
                    .create(&path)
                    .map_err(|e| Error::io(e, format!("create {}", path.display())))?;
                writer.insert(BlobWriter::new(file, path.clone(), new_logical)?)
            }
        };
        let pos = w.add(&record.key, &record.value)?;
        moved.push(Moved {
            key: record.key.to_vec(),
            old_ref: current,
            new_ref: BlobRef {
                file: new_logical,
                ordinal: pos.index,
                value_len: r.value_len,
                offset: pos.offset,
            },
            bytes: record_size(record.key.len(), u64::from(r.value_len)),
        });
    }
    let Some(writer) = writer else {
        return Ok(None);
    };
    let info = writer.finish()?;
    sync_dir(inner)?;
    Ok(Some((moved, info, bytes_read)))
}

/// Writes the new references of `moved` through the WAL and memtable, skipping keys changed since
/// they were looked up. Returns the new records no reference points to (garbage from birth).
fn titan_write_back(inner: &DbInner, moved: &[Moved]) -> Result<Vec<DroppedBlob>> {
    let mut stale = Vec::new();
    let mut wal = inner.wal.lock();
    // Under the WAL lock no write can land, and every write made so far is in a memtable of the
    // current super version: the check and the write are atomic together.
    let sv = inner.current_super_version();
    wal.group.clear();
    let mut encoded = Vec::new();
    for m in moved {
        let current = read::get_entry(inner, &sv, &m.key, MAX_SEQNO)?;
        if current
            .as_ref()
            .is_some_and(|(kind, v)| *kind == ValueKind::BlobRef && *v == m.old_ref)
        {
            encoded.clear();
            m.new_ref.encode(&mut encoded);
            wal.group.push(ValueKind::BlobRef, &m.key, &encoded);
        } else {
            stale.push(DroppedBlob {
                logical: m.new_ref.file,
                ordinal: m.new_ref.ordinal,
                bytes: m.bytes,
            });
        }
    }
    // Synced: once the new file is installed, its records are referenced only by these entries;
    // losing them would leave a file nothing points to (and nothing collects).
    if !wal.group.is_empty() {
        write::commit_group(inner, &mut wal, true, true)?;
    }
    Ok(stale)
}

/// Rubble mode's leader (see `install`): collects the blob file the picker chooses first now, on
/// the calling thread, into outputs numbered by `new_number`, and returns the version edit that
/// points each logical file at its output, as of the current version. Nothing is installed: the
/// logical files stay held (`busy`) until the edit is applied or abandoned
/// ([`release_for_log`]). `None` when no file needs collecting.
///
/// The edit's `record_bytes` already leaves out the garbage known now and its `garbage_bytes` is
/// zero; records found dead between now and the install are added back by each node when it
/// applies the edit (`install::validate`), from its own version at that log position.
///
/// # Errors
/// `Io` or `Corruption` when a copy fails: its output is removed, the file is not collected
/// again until reopen, and nothing is poisoned.
pub(crate) fn prepare_for_log(
    inner: &DbInner,
    state: &mut MutexGuard<'_, State>,
    new_number: &mut dyn FnMut() -> u64,
) -> Result<Option<PreparedGc>> {
    let version = state.versions.current();
    if version.blobs.is_empty() {
        return Ok(None);
    }
    // One file per job: a job is stale as a whole when any of its files is gone by the time
    // its edit is applied (a compaction found all its records dead), so one file per job wastes
    // the least copying.
    let metas: Vec<BlobFileMeta> = pick_files(inner, &state.gc, &version)
        .files
        .iter()
        .filter_map(|l| version.blobs.get(l).map(|m| (**m).clone()))
        .filter(|m| m.live_count > 0)
        .take(1)
        .collect();
    drop(version);
    if metas.is_empty() {
        return Ok(None);
    }
    let tasks: Vec<GcTask> = metas
        .iter()
        .map(|meta| {
            let output_number = new_number();
            state.pending_outputs.insert(output_number);
            state.gc.busy.insert(meta.logical);
            GcTask {
                id: 0,
                fs: inner.fs.clone(),
                input_path: filename::blob(&inner.dir, meta.physical),
                logical: meta.logical,
                old_survivors: meta.survivors.as_deref().cloned(),
                keep: meta.keep_set(),
                output_path: filename::blob(&inner.dir, output_number),
                output_number,
            }
        })
        .collect();
    let copied = MutexGuard::unlocked(state, || -> Result<Vec<GcOutputInfo>> {
        let mut done = Vec::with_capacity(tasks.len());
        for task in &tasks {
            let out = crate::blob::run_now(task)?;
            if u64::from(out.info.count) != task.keep.count_ones() {
                return Err(Error::corruption(
                    &task.input_path,
                    0,
                    format!(
                        "a GC copy wrote {} records, {} were to be kept",
                        out.info.count,
                        task.keep.count_ones()
                    ),
                ));
            }
            done.push(GcOutputInfo {
                file_size: out.info.file_size,
                bytes_read: out.bytes_read,
                micros: out.micros,
            });
        }
        sync_dir(inner)?;
        Ok(done)
    });
    let outputs: Vec<u64> = tasks.iter().map(|t| t.output_number).collect();
    let copied = match copied {
        Ok(c) => c,
        Err(e) => {
            for (task, meta) in tasks.iter().zip(&metas) {
                state.gc.busy.remove(&meta.logical);
                state.pending_outputs.remove(&task.output_number);
                if e.kind() != ErrorKind::Closed {
                    state.gc.failed.insert(meta.logical);
                }
                let _ = inner.fs.remove_file(&task.output_path);
            }
            tracing::warn!(error = %e, "a GC job failed; its blob files stay as they are");
            return Err(e);
        }
    };
    let mut edit = VersionEdit::default();
    let c = &inner.counters;
    for ((task, meta), out) in tasks.iter().zip(&metas).zip(&copied) {
        edit.blob_files.push(BlobFileEdit {
            physical: task.output_number,
            file_size: out.file_size,
            record_bytes: meta.live_bytes(),
            garbage_bytes: 0,
            survivors: Some(task.keep.clone()),
            ..meta.to_edit()
        });
        c.gc_runs.fetch_add(1, Ordering::Relaxed);
        c.gc_bytes_read.fetch_add(out.bytes_read, Ordering::Relaxed);
        c.gc_bytes_written
            .fetch_add(out.file_size, Ordering::Relaxed);
        c.gc_micros.fetch_add(out.micros, Ordering::Relaxed);
    }
    Ok(Some(PreparedGc {
        edit,
        inputs: metas.iter().map(|m| m.physical).collect(),
        outputs,
    }))
}

/// A GC job [`prepare_for_log`] ran.
pub(crate) struct PreparedGc {
    /// Points each collected logical file at its new physical file.
    pub edit: VersionEdit,
    /// The physical files collected, in the order of `edit.blob_files`.
    pub inputs: Vec<u64>,
    /// The new physical files, in the same order.
    pub outputs: Vec<u64>,
}

/// What [`prepare_for_log`] keeps of one copy.
struct GcOutputInfo {
    file_size: u64,
    bytes_read: u64,
    micros: u64,
}

/// Frees the logical blob files a prepared GC edit held (applied, stale or abandoned).
pub(crate) fn release_for_log(state: &mut State, logicals: &[u64]) {
    for l in logicals {
        state.gc.busy.remove(l);
    }
}
