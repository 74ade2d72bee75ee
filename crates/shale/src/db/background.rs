//! Background work: flushes, compactions, and removal of obsolete files.
//!
//! `Options::background_threads` workers share one loop: a flush first (oldest sealed memtable; one
//! at a time, so flushes install in WAL order), otherwise a compaction chosen by the picker among
//! files no other compaction holds. With two or more threads at most `threads - 1` compactions run
//! at once, so a thread is always free for a flush.
//!
//! Work is done with the state lock released; only picking and installing hold it. A failed flush
//! or compaction removes its partial outputs and poisons the database: writes stop rather than pile
//! up behind work that cannot finish. Reopening the database recovers from the WAL and MANIFEST.

use super::{DbInner, State};
use crate::compaction::job::{self, DroppedBlob, OutputSpec};
use crate::compaction::picker::{self, CompactionTask, PickerState};
use crate::compaction::retention::Retention;
use crate::compaction::separation::BlobSink;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::iter::{InternalIterator, LevelFile, LevelIterator, MergingIterator};
use crate::key::SeqNo;
use crate::memtable::Memtable;
use crate::version::edit::{BlobDeadEdit, BlobFileEdit, FileMeta, VersionEdit};
use crate::version::version::Version;
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often an idle worker wakes up to re-check for work even without a signal.
const IDLE_WAKEUP: Duration = Duration::from_secs(1);
/// How often `flush` and `compact_range` re-check while waiting.
const WAIT_RECHECK: Duration = Duration::from_millis(100);

/// Starts the background workers.
pub(crate) fn start(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    (0..inner.options.background_threads)
        .map(|i| {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name(format!("shale-bg-{i}"))
                .spawn(move || worker(&inner))
                .map_err(|e| Error::io(e, "start a background thread"))
        })
        .collect()
}

fn max_compactions(inner: &DbInner) -> usize {
    inner.options.background_threads.saturating_sub(1).max(1)
}

fn worker(inner: &Arc<DbInner>) {
    let mut state = inner.state.lock();
    loop {
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        if inner.poisoned.load(Ordering::Acquire) {
            inner.bg_cv.wait_for(&mut state, IDLE_WAKEUP);
            continue;
        }
        if state.installing || state.log_jobs.enabled {
            // A checkpoint is replacing the database's files (`replicated`), or flushes,
            // compactions and GC come only through the log (`install`): start nothing.
            inner.bg_cv.wait_for(&mut state, IDLE_WAKEUP);
            continue;
        }
        if inner.writes_stopped.load(Ordering::Acquire) {
            // Out of space: only retries of the resumption run (see `db::resume`).
            if !inner.resuming.swap(true, Ordering::AcqRel) {
                let result = MutexGuard::unlocked(&mut state, || super::resume::try_resume(inner));
                inner.resuming.store(false, Ordering::Release);
                if let Err(e) = result {
                    finish_job(inner, Err(e));
                }
            }
            if inner.writes_stopped.load(Ordering::Acquire) {
                inner
                    .bg_cv
                    .wait_for(&mut state, super::resume::RESUME_INTERVAL);
            }
            continue;
        }
        if !state.flush_running && !state.sealed.is_empty() {
            state.flush_running = true;
            let result = flush_oldest(inner, &mut state);
            state.flush_running = false;
            finish_job(inner, result.map_err(|e| e.context("flush")));
            continue;
        }
        match super::gc::run(inner, &mut state) {
            Ok(true) => {
                inner.bg_cv.notify_all();
                continue;
            }
            Ok(false) => {}
            Err(e) => {
                finish_job(inner, Err(e));
                continue;
            }
        }
        if state.compactions_running < max_compactions(inner) && state.manual_waiting == 0 {
            // The version is dropped before the job runs: a held version keeps its files alive,
            // and the job deletes what it made obsolete as soon as it installs.
            let task = {
                let version = state.versions.current();
                picker::pick(&PickerState {
                    version: &version,
                    options: &inner.options,
                    busy: &state.busy,
                })
            };
            if let Some(task) = task {
                let result = run_compaction(inner, &mut state, task);
                finish_job(inner, result);
                continue;
            }
        }
        inner.bg_cv.wait_for(&mut state, IDLE_WAKEUP);
    }
}

/// True when background work has settled: no memtable waits for a flush, no flush, compaction or
/// GC task runs, and neither the compaction picker nor the GC picker would start one. Called with
/// the state lock held, so no worker can be between picking a job and marking it running.
pub(crate) fn settled(inner: &DbInner, state: &State) -> bool {
    if !state.sealed.is_empty()
        || state.flush_running
        || state.compactions_running > 0
        || state.manual_waiting > 0
        || super::gc::has_work(inner, state)
    {
        return false;
    }
    let version = state.versions.current();
    picker::pick(&PickerState {
        version: &version,
        options: &inner.options,
        busy: &state.busy,
    })
    .is_none()
}

fn finish_job(inner: &DbInner, result: Result<()>) {
    if let Err(e) = result {
        inner.job_failed(e);
    }
    inner.bg_cv.notify_all();
}

/// Flushes every sealed memtable, oldest first, in this thread (to resume stopped writes).
///
/// # Errors
/// The first failed flush's error.
pub(crate) fn flush_sealed(inner: &DbInner) -> Result<()> {
    let mut state = inner.state.lock();
    while !state.sealed.is_empty() {
        inner.check_open()?;
        if state.flush_running {
            inner.bg_cv.wait_for(&mut state, WAIT_RECHECK);
            continue;
        }
        state.flush_running = true;
        let result = flush_oldest(inner, &mut state);
        state.flush_running = false;
        result.map_err(|e| e.context("flush"))?;
    }
    Ok(())
}

/// Flushes the oldest sealed memtable into an L0 SST and installs it.
fn flush_oldest(inner: &DbInner, state: &mut MutexGuard<'_, State>) -> Result<()> {
    let Some(sealed) = state.sealed.front() else {
        return Ok(());
    };
    let mem = sealed.mem.clone();
    let sealed_last_seq = sealed.last_seq;
    let position = sealed.position.clone();
    let number = state.versions.new_file_number();
    state.pending_outputs.insert(number);
    let snapshots: Vec<SeqNo> = state.snapshots.keys().copied().collect();

    let mut blob_numbers = Vec::new();
    let flushed = MutexGuard::unlocked(state, || {
        write_level0(inner, mem, number, snapshots, &mut blob_numbers)
    });
    let flushed = match flushed {
        Ok(flushed) => flushed,
        Err(e) => {
            state.pending_outputs.remove(&number);
            for n in &blob_numbers {
                state.pending_outputs.remove(n);
            }
            let _ = inner.fs.remove_file(&filename::table(&inner.dir, number));
            return Err(e);
        }
    };
    let mut edit = VersionEdit::default();
    let bytes = flushed.bytes_written();
    let blob_bytes = flushed.blob_bytes;
    flushed.add_to(&mut edit, &state.versions.current());
    edit.log_number = Some(state.sealed.get(1).map_or(state.mem_wal, |s| s.wal));
    edit.log_position = position;
    // The MANIFEST's last sequence number is the last one in flushed data, not the last one
    // handed out: recovery expects the first WAL it replays to start right after it, and so
    // notices when that WAL was lost at a power loss while a newer one survived.
    let last_seq_before = state.versions.last_seq();
    state
        .versions
        .set_last_seq(sealed_last_seq.max(last_seq_before));
    if let Err(e) = state.versions.log_and_apply(edit) {
        // After a fatal MANIFEST failure the edit may or may not be on disk: the output stays
        // (and stays protected as pending) so that whichever MANIFEST recovery finds is
        // complete. Otherwise (no space) the edit is surely not there: the output goes, and the
        // memtable stays sealed for the next try.
        if !e.is_fatal() {
            state.versions.reset_last_seq(last_seq_before);
            state.pending_outputs.remove(&number);
            let _ = inner.fs.remove_file(&filename::table(&inner.dir, number));
            for n in &blob_numbers {
                state.pending_outputs.remove(n);
                let _ = inner.fs.remove_file(&filename::blob(&inner.dir, *n));
            }
        }
        return Err(e);
    }
    state.pending_outputs.remove(&number);
    for n in &blob_numbers {
        state.pending_outputs.remove(n);
    }
    state.sealed.pop_front();
    inner.install_super_version(state);
    inner
        .counters
        .flush_bytes_written
        .fetch_add(bytes, Ordering::Relaxed);
    inner
        .counters
        .blob_bytes_written
        .fetch_add(blob_bytes, Ordering::Relaxed);
    inner.counters.flushes.fetch_add(1, Ordering::Relaxed);
    delete_obsolete_files(inner, state);
    Ok(())
}

/// What a flush wrote: its L0 table (if anything survived), its blob files, and the blob records
/// whose references it dropped.
pub(crate) struct Flushed {
    pub table: Option<FileMeta>,
    pub blob_files: Vec<BlobFileEdit>,
    pub blob_bytes: u64,
    pub dropped_blobs: Vec<DroppedBlob>,
}

impl Flushed {
    /// Bytes of the table and blob files.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.table.as_ref().map_or(0, |m| m.file_size)
    }

    /// Adds the flush's outputs to `edit`; `version` is the one the edit applies to.
    pub(crate) fn add_to(self, edit: &mut VersionEdit, version: &Version) {
        if let Some(meta) = self.table {
            edit.new_files.push((0, meta));
        }
        edit.blob_files.extend(self.blob_files);
        add_dead_blobs(edit, version, &self.dropped_blobs);
    }
}

/// Records `dropped` blob records as dead in `edit`, and removes every logical blob file left
/// with no live record. `version` is the version the edit applies to (after its `blob_files`).
pub(crate) fn add_dead_blobs(edit: &mut VersionEdit, version: &Version, dropped: &[DroppedBlob]) {
    if dropped.is_empty() {
        return;
    }
    let mut by_file: std::collections::BTreeMap<u64, (Vec<u32>, u64)> = Default::default();
    for d in dropped {
        let e = by_file.entry(d.logical).or_default();
        e.0.push(d.ordinal);
        e.1 += d.bytes;
    }
    for (logical, (mut ordinals, bytes)) in by_file {
        ordinals.sort_unstable();
        ordinals.dedup();
        let live = edit
            .blob_files
            .iter()
            .find(|b| b.logical == logical)
            .map(|b| crate::version::blob_files::BlobFileMeta::from_edit(b).live_count)
            .or_else(|| version.blobs.get(&logical).map(|m| m.live_count));
        if live == Some(ordinals.len() as u64) {
            edit.deleted_blob_files.push(logical);
        }
        edit.blob_dead.push(BlobDeadEdit {
            logical,
            ordinals,
            bytes,
        });
    }
}

/// Writes a memtable to the L0 SST `number`, separating large values into blob files (their
/// numbers are pushed to `blob_numbers` and registered as pending outputs).
pub(crate) fn write_level0(
    inner: &DbInner,
    mem: Arc<dyn Memtable>,
    number: u64,
    snapshots: Vec<SeqNo>,
    blob_numbers: &mut Vec<u64>,
) -> Result<Flushed> {
    let mut local = || inner.state.lock().versions.new_file_number();
    write_level0_numbered(inner, mem, number, snapshots, blob_numbers, &mut local)
}

/// [`write_level0`] with blob file numbers drawn from `new_number` (a replicated node's leader
/// names files by `(term, counter)`, see `db::install`).
pub(crate) fn write_level0_numbered(
    inner: &DbInner,
    mem: Arc<dyn Memtable>,
    number: u64,
    snapshots: Vec<SeqNo>,
    blob_numbers: &mut Vec<u64>,
    new_number: &mut dyn FnMut() -> u64,
) -> Result<Flushed> {
    let dir = inner.dir.clone();
    write_level0_into(
        inner,
        &dir,
        mem,
        number,
        snapshots,
        blob_numbers,
        new_number,
    )
}

/// [`write_level0_numbered`] into the directory `dir` (a node writing a flush's outputs aside to
/// compare them with shipped ones).
pub(crate) fn write_level0_into(
    inner: &DbInner,
    dir: &std::path::Path,
    mem: Arc<dyn Memtable>,
    number: u64,
    snapshots: Vec<SeqNo>,
    blob_numbers: &mut Vec<u64>,
    new_number: &mut dyn FnMut() -> u64,
) -> Result<Flushed> {
    if mem.is_empty() {
        return Ok(Flushed {
            table: None,
            blob_files: Vec::new(),
            blob_bytes: 0,
            dropped_blobs: Vec::new(),
        });
    }
    let mut input = mem.clone().iter();
    let mut retention = Retention::new(snapshots);
    let spec = OutputSpec {
        dir,
        fs: &inner.fs,
        options: &inner.options,
        output_level: 0,
        split: false,
        grandparents: &[],
    };
    let mut once = Some(number);
    let mut next_number = || once.take().expect("a flush writes one file");
    let mut next_blob_number = || {
        let n = new_number();
        inner.state.lock().pending_outputs.insert(n);
        blob_numbers.push(n);
        n
    };
    let separate = inner.options.min_blob_size != crate::options::NO_BLOB_FILES;
    let mut sink = BlobSink::new(
        dir,
        &inner.fs,
        inner.options.blob_file_size,
        &mut next_blob_number,
    );
    let (mut outputs, stats) = job::write_tables(
        &mut *input,
        &mut retention,
        &|_| false,
        &spec,
        &mut next_number,
        separate.then_some(&mut sink),
        &inner.closed,
    )?;
    inner
        .fs
        .sync_dir(dir)
        .map_err(|e| Error::io(e, format!("sync directory {}", dir.display())))?;
    let mut blob_files = std::mem::take(&mut sink.finished);
    let mut dropped_blobs = stats.dropped_blobs;
    // Blob files the write path wrote for this memtable (`db::large_values`): those the table
    // refers to join the version with it; the others (overwritten, or their write failed) were
    // never in a version and go once the memtable does.
    let direct = inner.blob_cache.direct().of_memtable(&mem);
    if !direct.is_empty() {
        dropped_blobs.retain(|d| {
            direct
                .binary_search_by_key(&d.logical, |(n, _)| *n)
                .is_err()
        });
        for (number, d) in direct {
            if stats.referenced_blobs.contains(&number) {
                blob_files.push(BlobFileEdit {
                    logical: number,
                    physical: number,
                    count: 1,
                    file_size: d.file_size,
                    record_bytes: d.record_bytes,
                    garbage_bytes: 0,
                    survivors: None,
                    dead: crate::blob::Bitmap::new(1, false),
                });
            }
        }
    }
    Ok(Flushed {
        table: outputs.pop(),
        blob_bytes: sink.bytes_written,
        blob_files,
        dropped_blobs,
    })
}

fn sync_dir(inner: &DbInner) -> Result<()> {
    inner
        .fs
        .sync_dir(&inner.dir)
        .map_err(|e| Error::io(e, format!("sync directory {}", inner.dir.display())))
}

/// Runs `task` and installs its result. Marks its inputs busy for the duration.
fn run_compaction(
    inner: &DbInner,
    state: &mut MutexGuard<'_, State>,
    task: CompactionTask,
) -> Result<()> {
    if task.trivial_move {
        let edit = picker::result_edit(&task, Vec::new());
        state.versions.log_and_apply(edit)?;
        inner.install_super_version(state);
        inner.counters.trivial_moves.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    let inputs: Vec<u64> = task.all_inputs().map(|f| f.number).collect();
    tracing::debug!(
        level = task.level,
        output_level = task.output_level,
        reason = ?task.reason,
        files = inputs.len(),
        bytes = task.input_bytes(),
        "compaction"
    );
    state.busy.extend(inputs.iter().copied());
    state.compactions_running += 1;
    let snapshots: Vec<SeqNo> = state.snapshots.keys().copied().collect();
    let version = state.versions.current();

    let mut allocated = Vec::new();
    let result = MutexGuard::unlocked(state, || {
        compact(inner, &task, &version, snapshots, &mut allocated)
    });
    drop(version);
    for n in &inputs {
        state.busy.remove(n);
    }
    state.compactions_running -= 1;
    let (outputs, written, dropped) = match result {
        Ok(done) => done,
        Err(e) => {
            for n in &allocated {
                state.pending_outputs.remove(n);
                let _ = inner.fs.remove_file(&filename::table(&inner.dir, *n));
            }
            return Err(e);
        }
    };
    // After a fatal MANIFEST failure the outputs stay protected as pending: the edit may be on
    // disk. After a lack of space it is not, and they go.
    let mut edit = picker::result_edit(&task, outputs);
    add_dead_blobs(&mut edit, &state.versions.current(), &dropped);
    if let Err(e) = state.versions.log_and_apply(edit) {
        if !e.is_fatal() {
            for n in &allocated {
                state.pending_outputs.remove(n);
                let _ = inner.fs.remove_file(&filename::table(&inner.dir, *n));
            }
        }
        return Err(e);
    }
    for n in &allocated {
        state.pending_outputs.remove(n);
    }
    inner.install_super_version(state);
    let c = &inner.counters;
    c.compaction_bytes_read
        .fetch_add(task.input_bytes(), Ordering::Relaxed);
    c.compaction_bytes_written
        .fetch_add(written, Ordering::Relaxed);
    c.compactions.fetch_add(1, Ordering::Relaxed);
    delete_obsolete_files(inner, state);
    Ok(())
}

/// The I/O of a compaction: merge the inputs and write the outputs. Runs without the state lock.
/// Numbers of the output files are pushed to `allocated` (registered as pending outputs).
fn compact(
    inner: &DbInner,
    task: &CompactionTask,
    version: &Version,
    snapshots: Vec<SeqNo>,
    allocated: &mut Vec<u64>,
) -> Result<(Vec<FileMeta>, u64, Vec<DroppedBlob>)> {
    let mut local = || inner.state.lock().versions.new_file_number();
    compact_numbered(inner, task, version, snapshots, allocated, &mut local)
}

/// [`compact`] with output numbers drawn from `new_number` (see [`write_level0_numbered`]).
pub(crate) fn compact_numbered(
    inner: &DbInner,
    task: &CompactionTask,
    version: &Version,
    snapshots: Vec<SeqNo>,
    allocated: &mut Vec<u64>,
    new_number: &mut dyn FnMut() -> u64,
) -> Result<(Vec<FileMeta>, u64, Vec<DroppedBlob>)> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if task.level == 0 {
        for f in &task.inputs {
            children.push(Box::new(inner.table_cache.get(f.number)?.iter(false)));
        }
    } else {
        children.push(level_iterator(inner, &task.inputs));
    }
    if !task.next_inputs.is_empty() {
        children.push(level_iterator(inner, &task.next_inputs));
    }
    let mut input = MergingIterator::new(children);
    let mut retention = Retention::new(snapshots);
    let output_level = task.output_level;
    let absent = |key: &[u8]| version.key_absent_below(output_level, key);
    let spec = OutputSpec {
        dir: &inner.dir,
        fs: &inner.fs,
        options: &inner.options,
        output_level,
        split: true,
        grandparents: &task.grandparents,
    };
    let mut next_number = || {
        let n = new_number();
        inner.state.lock().pending_outputs.insert(n);
        allocated.push(n);
        n
    };
    let (outputs, stats) = job::write_tables(
        &mut input,
        &mut retention,
        &absent,
        &spec,
        &mut next_number,
        None,
        &inner.closed,
    )?;
    sync_dir(inner)?;
    Ok((outputs, stats.bytes_written, stats.dropped_blobs))
}

/// A cursor over sorted, non-overlapping files, opening each through the table cache.
fn level_iterator(inner: &DbInner, files: &[Arc<FileMeta>]) -> Box<dyn InternalIterator> {
    let files: Vec<LevelFile> = files
        .iter()
        .map(|f| LevelFile {
            smallest: f.smallest.clone(),
            largest: f.largest.clone(),
            number: f.number,
        })
        .collect();
    let cache = inner.table_cache.clone();
    Box::new(LevelIterator::new(
        files.into(),
        Arc::new(move |number| {
            Ok(Box::new(cache.get(number)?.iter(false)) as Box<dyn InternalIterator>)
        }),
    ))
}

/// Removes files no version, reader or running job needs: old SSTs, WALs below the log number,
/// MANIFESTs other than the current one.
pub(crate) fn delete_obsolete_files(inner: &DbInner, state: &mut MutexGuard<'_, State>) {
    // After a failure the in-memory version may be ahead of the MANIFEST on disk: delete nothing.
    if inner.poisoned.load(Ordering::Acquire) {
        return;
    }
    // List first, then decide under the lock: a file created after the listing is not in it, and a
    // file in the listing that is still needed is live or pending by the time we decide.
    let names = match MutexGuard::unlocked(state, || inner.fs.list_dir(&inner.dir)) {
        Ok(names) => names,
        Err(e) => {
            tracing::warn!(error = %e, "listing the database directory failed; obsolete files stay for now");
            return;
        }
    };
    let mut live = state.versions.live_files();
    live.extend(state.pending_outputs.iter().copied());
    live.extend(inner.blob_cache.direct().live());
    let log_number = state.versions.log_number();
    let manifest = state.versions.manifest_number();
    let doomed: Vec<(String, Option<u64>)> = names
        .into_iter()
        .filter_map(|name| match filename::parse(&name)? {
            FileKind::Table(n) if !live.contains(&n) => Some((name, Some(n))),
            FileKind::Blob(n) if !live.contains(&n) => Some((name, Some(n))),
            FileKind::Wal(n) if n < log_number => Some((name, None)),
            FileKind::Manifest(n) if Some(n) != manifest => Some((name, None)),
            _ => None,
        })
        .collect();
    if doomed.is_empty() {
        return;
    }
    MutexGuard::unlocked(state, || {
        for (name, table) in doomed {
            if let Some(n) = table {
                // File numbers are unique across kinds: at most one of these holds `n`.
                inner.table_cache.evict(n);
                inner.blob_cache.evict(n);
            }
            if let Err(e) = inner.fs.remove_file(&inner.dir.join(&name)) {
                tracing::warn!(file = %name, error = %e, "removing an obsolete file failed");
            }
        }
    });
}

/// Seals the active memtable (if it holds anything) and waits until every memtable sealed so far
/// is flushed.
pub(crate) fn flush_all(inner: &DbInner) -> Result<()> {
    inner.check_open()?;
    if let Some(e) = inner.write_blocker() {
        return Err(e);
    }
    let target_wal = {
        let mut wal = inner.wal.lock();
        let mut state = inner.state.lock();
        // With an external log only the log seals memtables: wait for those sealed so far.
        if !wal.mem.is_empty() && !inner.external_log {
            super::write::switch_memtable(inner, &mut wal, &mut state)?;
        }
        match state.sealed.back() {
            Some(s) => s.wal,
            None => return Ok(()),
        }
    };
    let mut state = inner.state.lock();
    inner.bg_cv.notify_all();
    while state.sealed.front().is_some_and(|s| s.wal <= target_wal) {
        inner.check_open()?;
        if let Some(e) = inner.write_blocker() {
            return Err(e);
        }
        inner.bg_cv.wait_for(&mut state, WAIT_RECHECK);
    }
    Ok(())
}

/// Compacts the files overlapping `[lo, hi]` level by level, from L0 down to the deepest level
/// holding any of them.
pub(crate) fn compact_range(inner: &DbInner, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<()> {
    let deepest = {
        let version = inner.state.lock().versions.current();
        (1..version.num_levels())
            .filter(|&l| !version.overlapping_files(l, lo, hi).is_empty())
            .max()
            .unwrap_or(1)
    };
    for level in 0..deepest {
        let mut state = inner.state.lock();
        state.manual_waiting += 1;
        let result = loop {
            if let Err(e) = inner.check_open() {
                break Err(e);
            }
            if let Some(e) = inner.poison_error() {
                break Err(e);
            }
            let version = state.versions.current();
            if version.overlapping_files(level, lo, hi).is_empty() {
                break Ok(());
            }
            let picked = picker::pick_manual(
                &PickerState {
                    version: &version,
                    options: &inner.options,
                    busy: &state.busy,
                },
                level,
                lo,
                hi,
            );
            drop(version);
            match picked {
                Some(task) => break run_compaction(inner, &mut state, task),
                None => {
                    inner.bg_cv.wait_for(&mut state, WAIT_RECHECK);
                }
            }
        };
        state.manual_waiting -= 1;
        inner.bg_cv.notify_all();
        drop(state);
        if let Err(e) = result {
            return Err(inner.job_failed(e));
        }
    }
    Ok(())
}
