//! Opening a database: the directory lock, the MANIFEST, WAL replay, and a clean starting state.
//!
//! Recovery order:
//! 1. take `LOCK`; read `CURRENT` and rebuild the version from the MANIFEST (or create both);
//! 2. check that every SST the version names exists;
//! 3. replay the WALs numbered at or above the version's log number, oldest first, one memtable
//!    per WAL, and keep them as sealed memtables backed by their WALs (fsynced, so that a newer
//!    WAL never outlives them at a power loss): background flushes write them to L0 later, as
//!    any sealed memtable. Recovery writes no copy of the log, so it needs only a small constant of
//!    free space (a new WAL and MANIFEST), not the size of the log (RocksDB's
//!    `avoid_flush_during_recovery`);
//! 4. start a new WAL and a new MANIFEST whose first record is a snapshot of the recovered version,
//!    with the oldest kept WAL as its log number;
//! 5. remove files nothing refers to (WALs below the log number, SSTs of unfinished jobs,
//!    temporaries, old MANIFESTs).
//!
//! One case still writes the replayed memtables to L0 at open: a WAL that starts after lost writes
//! of an older one (a gap in sequence numbers, which a power loss can leave). Replay stops there,
//! and the WALs from the gap on must never be replayed again: their predecessors' contents go to
//! SSTs named by the new MANIFEST, which is synced and current before every old WAL is deleted.

use super::write::WalState;
use super::{background, DbInner, Sealed, State, SuperVersion};
use crate::batch::WriteBatch;
use crate::blob_file_cache::BlobFileCache;
use crate::cache::{BlockCache, RowCache};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::filename::{self, FileKind};
use crate::key::{self, SeqNo, ValueKind};
use crate::memtable::{self, Memtable};
use crate::options::GcEngineKind;
use crate::options::Options;
use crate::table_cache::TableCache;
use crate::version::edit::VersionEdit;
use crate::version::set::VersionSet;
use crate::wal::{LogReader, LogWriter};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::Arc;

/// Opens the database in `dir`. With `external_log` the database keeps no WAL: its writes come
/// from an external log (see `db::replicated`), nothing is replayed, and the memtables start
/// empty at the log position the MANIFEST records.
pub(crate) fn open(dir: &Path, options: Options, external_log: bool) -> Result<DbInner> {
    options.validate()?;
    let fs = options.fs.clone();
    let current_exists = fs.exists(&filename::current(dir));
    if !current_exists && !options.create_if_missing {
        return Err(Error::invalid_argument(format!(
            "no database at {} and create_if_missing is false",
            dir.display()
        )));
    }
    if current_exists && options.error_if_exists {
        return Err(Error::invalid_argument(format!(
            "a database already exists at {}",
            dir.display()
        )));
    }
    fs.create_dir_all(dir)
        .ctx(|| format!("create directory {}", dir.display()))?;
    let lock = fs.lock(&filename::lock(dir)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            Error::new(
                ErrorKind::Busy,
                format!(
                    "database {} is locked: another process or handle has it open",
                    dir.display()
                ),
            )
        } else {
            Error::io(e, format!("lock {}", filename::lock(dir).display()))
        }
    })?;

    let mut versions = if current_exists {
        VersionSet::recover(
            dir,
            fs.clone(),
            options.num_levels,
            options.max_manifest_size,
        )?
    } else {
        VersionSet::create(
            dir,
            fs.clone(),
            options.num_levels,
            options.max_manifest_size,
        )?
    };
    let names = fs.list_dir(dir).ctx(|| format!("list {}", dir.display()))?;
    check_tables_exist(dir, &versions, &names)?;
    // WALs get their numbers without a MANIFEST edit, so the recovered counter may lag behind them:
    // never reuse a number that is on disk (the new WAL below would truncate one not yet replayed).
    for kind in names.iter().filter_map(|n| filename::parse(n)) {
        match kind {
            FileKind::Wal(n)
            | FileKind::Table(n)
            | FileKind::Blob(n)
            | FileKind::Manifest(n)
            | FileKind::Temp(n) => versions.mark_file_number_used(n),
            _ => {}
        }
    }

    let options_row_cache = options.row_cache_size;
    let block_cache =
        (options.block_cache_size > 0).then(|| Arc::new(BlockCache::new(options.block_cache_size)));
    let table_cache = TableCache::new(
        dir.to_path_buf(),
        fs.clone(),
        options.max_open_files,
        block_cache.clone(),
    );

    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| match filename::parse(n) {
            Some(FileKind::Wal(number)) if number >= versions.log_number() => Some(number),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    if external_log && !wals.is_empty() {
        return Err(Error::invalid_argument(format!(
            "{} holds WALs not yet flushed: it was written with its own WAL, so it cannot be \
             opened with an external log",
            dir.display()
        )));
    }

    // Replay into L0 SSTs. The inner struct is built first so flush helpers can be reused.
    let membuffer_prefix = store_prefix_bits(&versions);
    let mem = memtable::new_memtable(
        &options,
        options.membuffer_prefix_bits.unwrap_or(membuffer_prefix),
    );
    let wal_number = versions.new_file_number();
    let wal_file = if external_log {
        super::replicated::no_wal()
    } else {
        let wal_path = filename::wal(dir, wal_number);
        let mut wal_file = fs
            .create(&wal_path)
            .ctx(|| format!("create {}", wal_path.display()))?;
        wal_file.preallocate(crate::wal::PREALLOCATE_CHUNK);
        wal_file
    };
    let last_seq = versions.last_seq();
    let blob_cache = BlobFileCache::new(dir.to_path_buf(), fs.clone(), options.max_open_files);
    let bg_cv = Arc::new(Condvar::new());
    let wake = bg_cv.clone();
    let on_complete: crate::blob::OnComplete = Arc::new(move || {
        wake.notify_all();
    });
    let gc_engine: Box<dyn crate::blob::GcEngine> = match options.gc_engine {
        GcEngineKind::Inline => Box::new(crate::blob::InlineGcEngine::new(on_complete)),
        GcEngineKind::Background => Box::new(crate::blob::WorkerGcEngine::new(
            options.gc_threads,
            options.gc_bytes_per_sec,
            on_complete,
        )?),
    };
    let inner = DbInner {
        dir: dir.to_path_buf(),
        options,
        fs,
        writers: Mutex::new(Default::default()),
        wal: Mutex::new(WalState::new(
            LogWriter::new_wal(wal_file),
            wal_number,
            mem.clone(),
            last_seq,
        )),
        state: Mutex::new(State {
            versions,
            mem: mem.clone(),
            mem_wal: wal_number,
            sealed: VecDeque::new(),
            snapshots: BTreeMap::new(),
            pending_outputs: HashSet::new(),
            busy: HashSet::new(),
            flush_running: false,
            compactions_running: 0,
            manual_waiting: 0,
            gc: Default::default(),
            installing: false,
            log_jobs: Default::default(),
        }),
        bg_cv,
        gc_engine,
        super_version: RwLock::new(Arc::new(SuperVersion {
            mem,
            sealed: Vec::new(),
            version: Arc::new(crate::version::version::Version::empty(1)),
        })),
        visible_seq: AtomicU64::new(last_seq),
        wal_unflushed: AtomicBool::new(false),
        membuffer_prefix: AtomicU32::new(membuffer_prefix),
        table_cache,
        block_cache,
        row_cache: (options_row_cache > 0).then(|| RowCache::new(options_row_cache)),
        counters: Default::default(),
        blob_cache,
        controller: Default::default(),
        poison: Mutex::new(None),
        stopped: Mutex::new(None),
        writes_stopped: AtomicBool::new(false),
        resuming: AtomicBool::new(false),
        poisoned: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        external_log,
        _lock: lock,
    };

    let Recovered {
        edit,
        kept,
        max_seq,
    } = replay_wals(&inner, &wals)?;
    for sealed in &kept {
        let path = filename::wal(&inner.dir, sealed.wal);
        inner
            .fs
            .sync_file(&path)
            .ctx(|| format!("sync {}", path.display()))?;
    }
    {
        let mut state = inner.state.lock();
        let mut edit = edit;
        edit.log_number = Some(kept.first().map_or(wal_number, |s| s.wal));
        let seq = max_seq.max(state.versions.last_seq());
        if kept.is_empty() {
            state.versions.set_last_seq(seq);
        }
        // Otherwise the MANIFEST keeps the last sequence number in flushed data: the first kept
        // WAL starts right after it (see `replay_wals`).
        state.sealed = kept.into();
        // After recovery the set has no open MANIFEST, so this writes a fresh one holding a snapshot
        // that includes the edit; a new database appends the edit to the MANIFEST it just created.
        state.versions.log_and_apply(edit)?;
        // Recovery flushes registered their outputs as pending; the version now names them.
        state.pending_outputs.clear();
        inner
            .fs
            .sync_dir(&inner.dir)
            .ctx(|| format!("sync directory {}", inner.dir.display()))?;
        {
            let mut wal = inner.wal.lock();
            wal.last_seq = seq;
            wal.applied_index = state.versions.log_position().map(|p| p.index);
        }
        inner
            .visible_seq
            .store(seq, std::sync::atomic::Ordering::Release);
        inner.install_super_version(&state);
        remove_temporaries(&inner, &names);
        background::delete_obsolete_files(&inner, &mut state);
    }
    Ok(inner)
}

/// Every SST and blob file the version names must be in the directory; a missing one is
/// corruption.
fn check_tables_exist(dir: &Path, versions: &VersionSet, names: &[String]) -> Result<()> {
    let kinds: HashSet<FileKind> = names.iter().filter_map(|n| filename::parse(n)).collect();
    let version = versions.current();
    let missing = version
        .file_numbers()
        .find(|&n| !kinds.contains(&FileKind::Table(n)))
        .map(|n| (filename::table(dir, n), "SST"))
        .or_else(|| {
            version
                .blob_file_numbers()
                .find(|&n| !kinds.contains(&FileKind::Blob(n)))
                .map(|n| (filename::blob(dir, n), "blob file"))
        });
    if let Some((path, what)) = missing {
        let manifest = versions
            .manifest_number()
            .map_or_else(|| "the MANIFEST".to_owned(), filename::manifest_name);
        return Err(Error::corruption(
            &path,
            0,
            format!("the {what} named by {manifest} is missing"),
        ));
    }
    Ok(())
}

/// The leading key bits that every SST of the store shares ([`memtable::learned_prefix_bits`] of
/// their whole key range), for the membuffers of the memtables made at open; 0 when there is no
/// SST or no shared bit.
fn store_prefix_bits(versions: &VersionSet) -> u32 {
    let version = versions.current();
    let files = version.levels.iter().flatten();
    let smallest = files.clone().map(|f| key::user_key(&f.smallest)).min();
    let largest = files.map(|f| key::user_key(&f.largest)).max();
    smallest
        .zip(largest)
        .and_then(|(lo, hi)| memtable::learned_prefix_bits(lo, hi))
        .unwrap_or(0)
}

/// What WAL replay recovered.
struct Recovered {
    /// Adds the L0 SSTs written at open (only after a gap).
    edit: VersionEdit,
    /// One sealed memtable per WAL that held records, oldest first, backed by that WAL.
    kept: Vec<Sealed>,
    /// The largest sequence number seen.
    max_seq: SeqNo,
}

/// Replays `wals` (oldest first), one memtable per WAL. See the module documentation for what
/// becomes of them.
fn replay_wals(inner: &DbInner, wals: &[u64]) -> Result<Recovered> {
    let mut edit = VersionEdit::default();
    let mut max_seq: SeqNo = 0;
    let mut kept: Vec<Sealed> = Vec::new();
    let mut stopped_at_gap = false;
    // Sequence numbers run on without a gap from one WAL to the next. A gap at the start of a WAL
    // means the older WAL lost writes at a power loss (it was handed to the operating system but
    // not fsynced when the newer one started); nothing after the gap was ever acknowledged as
    // synced (`WalState::retired`), and replaying it would break the prefix property.
    // The first WAL starts right after the last sequence number in flushed data (the MANIFEST's);
    // a MANIFEST written before that rule may name a later one, so there only a jump forward
    // is a gap.
    let flushed_through = inner.state.lock().versions.last_seq();
    let mut expected: Option<SeqNo> = None;
    'wals: for &number in wals {
        let mem: Arc<dyn Memtable> =
            memtable::new_memtable(&inner.options, inner.membuffer_prefix());
        let path = filename::wal(&inner.dir, number);
        let data = inner
            .fs
            .read_all(&path)
            .ctx(|| format!("read {}", path.display()))?;
        let mut reader = LogReader::new_wal(data, path.clone(), inner.options.wal_recovery.into());
        while let Some((offset, record)) = reader.next_record()? {
            let batch = WriteBatch::from_bytes(record.to_vec())
                .map_err(|e| Error::corruption(&path, offset, e.message()))?;
            let mut seq = batch.seq();
            let gap = match expected {
                Some(e) => e != seq,
                None => seq > flushed_through + 1,
            };
            if gap {
                tracing::warn!(
                    file = %path.display(),
                    offset,
                    expected = expected.unwrap_or(flushed_through + 1),
                    found = seq,
                    "a WAL starts after lost writes of an older one; replay stops here"
                );
                stopped_at_gap = true;
                push_replayed(&mut kept, mem, number, expected);
                break 'wals;
            }
            for entry in batch.iter() {
                let (kind, key, value) =
                    entry.map_err(|e| Error::corruption(&path, offset, e.message()))?;
                if kind == ValueKind::BlobRef {
                    register_direct_blob(inner, &mem, key, value)
                        .map_err(|e| Error::corruption(&path, offset, e))?;
                }
                mem.insert(key, seq, kind, value);
                max_seq = max_seq.max(seq);
                seq += 1;
            }
            expected = Some(seq);
        }
        match reader.tail_cut() {
            Some(cut) if cut.lost_synced => tracing::error!(
                file = %path.display(),
                offset = cut.offset,
                reason = %cut.reason,
                "point-in-time recovery dropped synced WAL records: acknowledged writes from here on are lost"
            ),
            Some(cut) => tracing::warn!(
                file = %path.display(),
                offset = cut.offset,
                reason = %cut.reason,
                "cut the torn tail of a WAL (an interrupted write, never acknowledged as synced)"
            ),
            None => {}
        }
        push_replayed(&mut kept, mem, number, expected);
    }
    if stopped_at_gap {
        // The WALs from the gap on must never be replayed again: everything before it goes to L0
        // now, and the new MANIFEST's log number drops every old WAL.
        for sealed in kept.drain(..) {
            let mut mem = sealed.mem;
            flush_recovered(inner, &mut mem, &mut edit)?;
        }
    }
    Ok(Recovered {
        edit,
        kept,
        max_seq,
    })
}

/// Registers the blob file that a replayed `BlobRef` names, if the write path wrote it (the
/// version does not hold it), with the memtable it is replayed into (see `db::large_values`).
/// Returns what is wrong when the reference is malformed or its file is missing or damaged.
fn register_direct_blob(
    inner: &DbInner,
    mem: &Arc<dyn Memtable>,
    key: &[u8],
    value: &[u8],
) -> std::result::Result<(), String> {
    let r = crate::blob::BlobRef::decode(value)
        .ok_or_else(|| "a record holds a malformed blob reference".to_owned())?;
    if inner
        .state
        .lock()
        .versions
        .current()
        .blobs
        .contains_key(&r.file)
    {
        return Ok(());
    }
    let name = filename::blob_name(r.file);
    let reader = inner
        .blob_cache
        .get(r.file)
        .map_err(|e| format!("a record names blob file {name}, which cannot be read: {e}"))?;
    if r.ordinal != 0 || reader.count() != 1 {
        return Err(format!(
            "a record names record {} of blob file {name}, which holds {} records",
            r.ordinal,
            reader.count()
        ));
    }
    let record_bytes = crate::compaction::separation::record_size(key.len(), r.value_len.into());
    inner
        .blob_cache
        .direct()
        .register(r.file, reader.file_size(), record_bytes, mem);
    Ok(())
}

/// Keeps the memtable replayed from WAL `number` (if it holds anything) as a sealed memtable;
/// `next_seq` is the sequence number after its last entry.
fn push_replayed(
    kept: &mut Vec<Sealed>,
    mem: Arc<dyn Memtable>,
    number: u64,
    next_seq: Option<SeqNo>,
) {
    if let Some(next) = next_seq.filter(|_| !mem.is_empty()) {
        kept.push(Sealed {
            mem,
            wal: number,
            last_seq: next - 1,
            // Replayed from a WAL of its own: no external log.
            position: None,
        });
    }
}

fn flush_recovered(
    inner: &DbInner,
    mem: &mut Arc<dyn Memtable>,
    edit: &mut VersionEdit,
) -> Result<()> {
    if mem.is_empty() {
        return Ok(());
    }
    let number = inner.state.lock().versions.new_file_number();
    let full = std::mem::replace(
        mem,
        memtable::new_memtable(&inner.options, inner.membuffer_prefix()),
    );
    let mut blob_numbers = Vec::new();
    let flushed = background::write_level0(inner, full, number, Vec::new(), &mut blob_numbers)?;
    let c = &inner.counters;
    c.flush_bytes_written.fetch_add(
        flushed.bytes_written(),
        std::sync::atomic::Ordering::Relaxed,
    );
    c.blob_bytes_written
        .fetch_add(flushed.blob_bytes, std::sync::atomic::Ordering::Relaxed);
    c.flushes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The edit of every recovered flush is applied at once at the end of replay, to the version
    // as recovered plus the earlier recovered flushes.
    let mut base = inner.state.lock().versions.current();
    if !(edit.blob_files.is_empty()
        && edit.blob_dead.is_empty()
        && edit.deleted_blob_files.is_empty())
    {
        base = Arc::new(base.apply(edit)?);
    }
    flushed.add_to(edit, &base);
    Ok(())
}

/// Temporary files are leftovers of an interrupted CURRENT update or job.
fn remove_temporaries(inner: &DbInner, names: &[String]) {
    for name in names {
        if matches!(filename::parse(name), Some(FileKind::Temp(_))) || name.ends_with(".dbtmp") {
            let _ = inner.fs.remove_file(&inner.dir.join(name));
        }
    }
}
