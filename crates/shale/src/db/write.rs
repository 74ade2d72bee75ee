//! The write path: group commit, write stalls and memtable switches.
//!
//! Writers enqueue their batch. The writer at the head of the queue is the leader: it takes a group
//! of queued batches, makes room (backing off under write pressure, sealing a full memtable), appends
//! the whole group to the WAL as one record, fsyncs once if any member asked for `Sync`, inserts the
//! entries into the memtable, publishes the new visible sequence number, hands every member its
//! result and passes leadership to the next queued writer.
//!
//! Durability contract: a call returns `Ok` only after its batch is in the WAL (handed to the
//! operating system) and, for `Durability::Sync`, fsynced. If the append or the fsync fails the
//! database is poisoned and nothing of the group becomes visible.

use super::large_values;
use super::stall::Pressure;
use super::{DbInner, Sealed, State};
use crate::batch::{WriteBatch, BATCH_HEADER_LEN};
use crate::error::{Error, Result};
use crate::filename;
use crate::key::SeqNo;
use crate::memtable::{self, Memtable};
use crate::options::Durability;
use crate::wal::LogWriter;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A group grows to at most this many bytes...
const MAX_GROUP_BYTES: usize = 1 << 20;
/// ...or, when its first batch is small, to the first batch plus this many, so small writes are not
/// delayed behind a large group.
const SMALL_GROUP_EXTRA_BYTES: usize = 128 << 10;
/// Batches larger than this are rejected (a WAL record holds at most 1 GiB).
const MAX_BATCH_BYTES: usize = (1 << 30) - (1 << 20);
/// Write slowdowns sleep once this much delay has accumulated, to keep sleeps coarse.
const MIN_SLOWDOWN_SLEEP_MICROS: f64 = 1000.0;
/// A stalled writer re-checks its condition at least this often.
const STALL_RECHECK: Duration = Duration::from_millis(100);

/// The group-commit queue, under `DbInner::writers`.
#[derive(Default)]
pub(crate) struct WriteQueue {
    queue: VecDeque<Arc<Writer>>,
    // INVARIANT: true while some writer is leading a group; the next leader is appointed by it.
    leader_active: bool,
}

/// How many entries ahead of the one it inserts a group commit starts loading the memtable's
/// memory for (see [`Memtable::prefetch`]).
const INSERT_PREFETCH_AHEAD: usize = 8;

/// How long a queued writer polls for its leader's answer before it sleeps on its condition
/// variable. A buffered group takes a few microseconds (one `write` call and the memtable
/// inserts); sleeping and being woken costs two context switches, more than that.
const QUEUED_POLL: Duration = Duration::from_micros(30);

/// One pending write.
struct Writer {
    batch: WriteBatch,
    /// Its large values' blob files, until the leader registers them (`db::large_values`).
    large: Mutex<Vec<large_values::Written>>,
    sync: bool,
    /// False for [`Durability::Unflushed`]: the WAL record may stay in the process's buffer.
    flush: bool,
    /// Set (Release) after `slot` leaves `Waiting`, so a queued writer can poll without the lock.
    answered: AtomicBool,
    slot: Mutex<Slot>,
    cv: Condvar,
}

enum Slot {
    Waiting,
    Leader,
    Done(Result<()>),
}

/// The WAL and the active memtable, under `DbInner::wal`.
pub(crate) struct WalState {
    pub writer: LogWriter,
    pub number: u64,
    pub mem: Arc<dyn Memtable>,
    /// The last sequence number handed out.
    pub last_seq: SeqNo,
    /// The batch being committed (reused between groups).
    pub group: WriteBatch,
    /// With an external log: the index of the last log entry applied (or sealed at), if any.
    // INVARIANT: only grows; `Db::apply_logged` refuses an entry at or below it.
    pub applied_index: Option<u64>,
    /// Earlier WALs whose bytes were handed to the operating system but not fsynced, oldest first.
    // INVARIANT: every fsync of a WAL first fsyncs these (`sync_all`), so a write acknowledged as
    // synced never follows a write that a power loss can still take; recovery stops at the first
    // sequence-number gap between WALs, which only unsynced writes can leave.
    retired: Vec<(u64, LogWriter)>,
    slowdown_debt_micros: f64,
}

impl WalState {
    pub(crate) fn new(
        writer: LogWriter,
        number: u64,
        mem: Arc<dyn Memtable>,
        last_seq: SeqNo,
    ) -> WalState {
        WalState {
            writer,
            number,
            mem,
            last_seq,
            group: WriteBatch::new(),
            applied_index: None,
            retired: Vec::new(),
            slowdown_debt_micros: 0.0,
        }
    }
}

/// Applies `batch` with the given durability (see the module documentation).
pub(crate) fn write(inner: &Arc<DbInner>, batch: WriteBatch, durability: Durability) -> Result<()> {
    let prepared = prepare(inner, batch)?;
    write_prepared(inner, prepared, durability)
}

/// Checks `batch` and writes its large values to blob files of their own
/// (`db::large_values`), without joining a write group.
pub(crate) fn prepare(inner: &Arc<DbInner>, batch: WriteBatch) -> Result<PreparedWrite> {
    check_writable(inner)?;
    validate(inner, &batch)?;
    let (batch, large, large_bytes) = if large_values::has_large_values(inner, &batch) {
        large_values::separate(inner, batch)?
    } else {
        (batch, Vec::new(), 0)
    };
    Ok(PreparedWrite {
        inner: inner.clone(),
        batch,
        extra: WriteBatch::new(),
        large,
        large_bytes,
    })
}

/// Applies a prepared write (see [`prepare`]) with the given durability.
pub(crate) fn write_prepared(
    inner: &Arc<DbInner>,
    mut prepared: PreparedWrite,
    durability: Durability,
) -> Result<()> {
    if !Arc::ptr_eq(inner, &prepared.inner) {
        return Err(Error::invalid_argument(
            "a write prepared by one database cannot be applied to another",
        ));
    }
    check_writable(inner)?;
    validate(inner, &prepared.extra)?;
    let mut batch = std::mem::take(&mut prepared.batch);
    if !prepared.extra.is_empty() {
        batch.append(&prepared.extra);
    }
    if batch.is_empty() {
        return Ok(());
    }
    let me = Arc::new(Writer {
        batch,
        large: Mutex::new(std::mem::take(&mut prepared.large)),
        sync: durability == Durability::Sync,
        flush: durability != Durability::Unflushed,
        answered: AtomicBool::new(false),
        slot: Mutex::new(Slot::Waiting),
        cv: Condvar::new(),
    });
    let result = join_group(inner, &me);
    // Files its leader did not register: the group failed before its WAL append.
    large_values::discard(inner, std::mem::take(&mut *me.large.lock()));
    if result.is_ok() && prepared.large_bytes > 0 {
        inner
            .counters
            .user_bytes_written
            .fetch_add(prepared.large_bytes, Ordering::Relaxed);
    }
    result
}

/// Fails when the database takes no writes now (closed, stopped, poisoned, or fed by an
/// external log).
fn check_writable(inner: &DbInner) -> Result<()> {
    inner.check_open()?;
    if let Some(e) = inner.write_blocker() {
        return Err(e);
    }
    if inner.external_log {
        return Err(Error::invalid_argument(
            "this database has an external log: writes go through Db::apply_logged",
        ));
    }
    Ok(())
}

/// A write batch whose large values are already in blob files of their own, ready to be applied
/// by [`Db::write_prepared`](crate::Db::write_prepared); made by
/// [`Db::prepare_write`](crate::Db::prepare_write).
///
/// Preparing does the slow part of a write with large values (copying them to disk and syncing
/// them) before the caller takes whatever lock orders its writes; small puts and deletes added
/// afterwards ([`PreparedWrite::put`], [`PreparedWrite::delete`]) are applied in the same atomic
/// batch. Dropped without being applied, it removes its blob files.
pub struct PreparedWrite {
    inner: Arc<DbInner>,
    batch: WriteBatch,
    extra: WriteBatch,
    large: Vec<large_values::Written>,
    large_bytes: u64,
}

impl PreparedWrite {
    /// Adds a put of `key` -> `value`, applied with the prepared batch (through the WAL, whatever
    /// its size).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut PreparedWrite {
        self.extra.put(key, value);
        self
    }

    /// Adds a delete of `key`, applied with the prepared batch.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut PreparedWrite {
        self.extra.delete(key);
        self
    }
}

impl Drop for PreparedWrite {
    fn drop(&mut self) {
        large_values::discard(&self.inner, std::mem::take(&mut self.large));
    }
}

impl std::fmt::Debug for PreparedWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedWrite")
            .field("entries", &(self.batch.len() + self.extra.len()))
            .field("large_values", &self.large.len())
            .finish()
    }
}

/// Queues `me` and waits until a leader wrote it, or leads a group itself.
fn join_group(inner: &Arc<DbInner>, me: &Arc<Writer>) -> Result<()> {
    {
        let mut queue = inner.writers.lock();
        queue.queue.push_back(me.clone());
        if queue.leader_active {
            drop(queue);
            // A synced group waits for an fsync: no point polling for it.
            if !me.sync {
                poll_for_answer(me);
            }
            let mut slot = me.slot.lock();
            loop {
                match std::mem::replace(&mut *slot, Slot::Waiting) {
                    Slot::Waiting => me.cv.wait(&mut slot),
                    Slot::Leader => break,
                    Slot::Done(result) => return result,
                }
            }
        } else {
            queue.leader_active = true;
        }
    }
    lead(inner)
}

/// Polls `me.answered` for up to [`QUEUED_POLL`], yielding the CPU between looks.
fn poll_for_answer(me: &Writer) {
    let deadline = Instant::now() + QUEUED_POLL;
    for i in 0u32.. {
        if me.answered.load(Ordering::Acquire) {
            return;
        }
        if i < 32 {
            std::hint::spin_loop();
        } else if Instant::now() >= deadline {
            return;
        } else {
            std::thread::yield_now();
        }
    }
}

pub(crate) fn validate(inner: &DbInner, batch: &WriteBatch) -> Result<()> {
    if batch.encoded_len() > MAX_BATCH_BYTES {
        return Err(Error::invalid_argument(format!(
            "write batch of {} bytes exceeds the limit of {MAX_BATCH_BYTES} bytes",
            batch.encoded_len()
        )));
    }
    let opts = &inner.options;
    for entry in batch.iter() {
        let (kind, key, value) = entry?;
        if kind == crate::key::ValueKind::BlobRef {
            return Err(Error::invalid_argument(
                "a write batch may hold only puts and deletes",
            ));
        }
        if key.len() > opts.max_key_size {
            return Err(Error::invalid_argument(format!(
                "key of {} bytes exceeds max_key_size ({} bytes)",
                key.len(),
                opts.max_key_size
            )));
        }
        if value.len() > opts.max_value_size {
            return Err(Error::invalid_argument(format!(
                "value of {} bytes exceeds max_value_size ({} bytes)",
                value.len(),
                opts.max_value_size
            )));
        }
    }
    Ok(())
}

/// Runs as leader: writes a group, completes its members, appoints the next leader.
fn lead(inner: &Arc<DbInner>) -> Result<()> {
    let group: Vec<Arc<Writer>> = {
        let mut queue = inner.writers.lock();
        let first = queue
            .queue
            .front()
            .expect("the leader is queued")
            .batch
            .encoded_len();
        let limit = if first <= SMALL_GROUP_EXTRA_BYTES {
            first + SMALL_GROUP_EXTRA_BYTES
        } else {
            MAX_GROUP_BYTES
        };
        let mut bytes = 0usize;
        let mut take = 0usize;
        for w in &queue.queue {
            let len = w.batch.encoded_len() - BATCH_HEADER_LEN;
            if take > 0 && bytes + len > limit.max(first) {
                break;
            }
            bytes += len;
            take += 1;
        }
        queue.queue.drain(..take).collect()
    };
    let result = write_group(inner, &group);

    let mut queue = inner.writers.lock();
    for w in group.iter().skip(1) {
        *w.slot.lock() = Slot::Done(result.clone());
        w.answered.store(true, Ordering::Release);
        w.cv.notify_one();
    }
    match queue.queue.front() {
        Some(next) => {
            *next.slot.lock() = Slot::Leader;
            next.answered.store(true, Ordering::Release);
            next.cv.notify_one();
        }
        None => queue.leader_active = false,
    }
    result
}

fn write_group(inner: &Arc<DbInner>, group: &[Arc<Writer>]) -> Result<()> {
    let mut wal = inner.wal.lock();
    let bytes: usize = group.iter().map(|w| w.batch.encoded_len()).sum();
    make_room(inner, &mut wal, bytes)?;

    let wal = &mut *wal;
    wal.group.clear();
    for w in group {
        wal.group.append(&w.batch);
        // From the append on, the WAL may name the files: they live as long as its memtable.
        large_values::register(inner, std::mem::take(&mut *w.large.lock()), &wal.mem);
    }
    let sync = group.iter().any(|w| w.sync);
    let flush = group.iter().any(|w| w.flush);
    commit_group(inner, wal, sync, flush)?;
    inner
        .counters
        .writes
        .fetch_add(group.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// Appends `wal.group` to the WAL (handing it to the operating system when `flush` or `sync`,
/// fsyncing it when `sync`), inserts it into the memtable under fresh sequence numbers and makes
/// it visible. Requires the WAL lock (held as `wal`).
pub(crate) fn commit_group(
    inner: &DbInner,
    wal: &mut WalState,
    sync: bool,
    flush: bool,
) -> Result<()> {
    let first_seq = wal.last_seq + 1;
    wal.group.set_seq(first_seq);
    let payload = wal.group.as_bytes();
    let payload_len = payload.len() as u64;
    if wal.writer.is_broken() {
        // A failure on another thread (a sync marker that did not fit) broke the WAL after this
        // write was admitted: it stopped writes or poisoned, and says so.
        return Err(inner.write_blocker().unwrap_or_else(|| {
            inner.set_poison(Error::io(
                std::io::Error::other("the WAL writer is broken but writes were not stopped"),
                format!("append to WAL {}", filename::wal_name(wal.number)),
            ))
        }));
    }
    let appended = wal.writer.add_record(payload).and_then(|()| {
        if flush || sync {
            wal.writer.flush()
        } else {
            Ok(())
        }
    });
    if let Err(e) = appended {
        let err = Error::io(
            e,
            format!("append to WAL {}", filename::wal_name(wal.number)),
        );
        return Err(wal_write_failed(inner, err));
    }
    // Relaxed: read and written under the WAL lock; `flush_wal`'s unlocked look is only a hint.
    inner
        .wal_unflushed
        .store(!(flush || sync), Ordering::Relaxed);
    if sync {
        sync_all(inner, wal)?;
    }
    insert_group(inner, wal, first_seq)?;
    inner
        .counters
        .wal_bytes_written
        .fetch_add(payload_len, Ordering::Relaxed);
    Ok(())
}

/// Inserts `wal.group` into the active memtable under sequence numbers from `first_seq` on and
/// makes it visible. Requires the WAL lock (held as `wal`).
pub(crate) fn insert_group(inner: &DbInner, wal: &mut WalState, first_seq: SeqNo) -> Result<()> {
    let mut seq = first_seq;
    let mut user_bytes = 0u64;
    // The memory an insert reads first (a membuffer bucket, an index slot) is a cache miss for
    // scattered keys: start loading it a few entries ahead, so that the misses overlap.
    let mut ahead = wal.group.iter().flatten();
    for (_, key, _) in ahead.by_ref().take(INSERT_PREFETCH_AHEAD) {
        wal.mem.prefetch(key);
    }
    for entry in wal.group.iter() {
        let (kind, key, value) = entry?;
        if let Some((_, next, _)) = ahead.next() {
            wal.mem.prefetch(next);
        }
        wal.mem.insert(key, seq, kind, value);
        user_bytes += (key.len() + value.len()) as u64;
        seq += 1;
    }
    wal.last_seq = seq - 1;
    inner.visible_seq.store(wal.last_seq, Ordering::Release);
    inner
        .counters
        .user_bytes_written
        .fetch_add(user_bytes, Ordering::Relaxed);
    Ok(())
}

/// Waits out write pressure and seals a full memtable. Called by the leader with the WAL locked.
fn make_room(inner: &Arc<DbInner>, wal: &mut WalState, bytes: usize) -> Result<()> {
    let mut slowed = false;
    loop {
        inner.check_open()?;
        if let Some(e) = inner.write_blocker() {
            return Err(e);
        }
        match inner.controller.get() {
            Pressure::Stop => {
                let mut state = inner.state.lock();
                stall(
                    inner,
                    true,
                    |_| inner.controller.get() == Pressure::Stop,
                    &mut state,
                );
                continue;
            }
            Pressure::Slowdown { bytes_per_sec } if !slowed => {
                slowed = true;
                wal.slowdown_debt_micros += bytes as f64 * 1e6 / bytes_per_sec as f64;
                if wal.slowdown_debt_micros >= MIN_SLOWDOWN_SLEEP_MICROS {
                    let start = Instant::now();
                    std::thread::sleep(Duration::from_micros(wal.slowdown_debt_micros as u64));
                    wal.slowdown_debt_micros = 0.0;
                    let waited = start.elapsed().as_micros() as u64;
                    inner
                        .counters
                        .stall_micros
                        .fetch_add(waited, Ordering::Relaxed);
                }
                continue;
            }
            _ => {}
        }
        if wal.mem.approximate_bytes() < inner.options.write_buffer_size {
            return Ok(());
        }
        let mut state = inner.state.lock();
        if state.sealed.len() + 1 >= inner.options.max_write_buffers {
            let max = inner.options.max_write_buffers;
            stall(
                inner,
                true,
                |s: &State| s.sealed.len() + 1 >= max,
                &mut state,
            );
            continue;
        }
        return switch_memtable(inner, wal, &mut state);
    }
}

/// Waits on the background condition variable while `blocked` holds, counting the time.
fn stall(
    inner: &DbInner,
    stop: bool,
    blocked: impl Fn(&State) -> bool,
    state: &mut parking_lot::MutexGuard<'_, State>,
) {
    if !blocked(state) || inner.closed.load(Ordering::Acquire) || inner.writes_blocked() {
        return;
    }
    let start = Instant::now();
    inner.bg_cv.notify_all();
    inner.bg_cv.wait_for(state, STALL_RECHECK);
    let waited = start.elapsed().as_micros() as u64;
    inner
        .counters
        .stall_micros
        .fetch_add(waited, Ordering::Relaxed);
    if stop {
        inner
            .counters
            .stop_micros
            .fetch_add(waited, Ordering::Relaxed);
    }
}

/// Seals the active memtable and starts a new one with a new WAL. Requires the WAL and state locks.
///
/// # Errors
/// `Io` when the new WAL cannot be created (nothing changes; the write can be retried); a `Poisoned`
/// error when the old WAL cannot be written.
pub(crate) fn switch_memtable(
    inner: &DbInner,
    wal: &mut WalState,
    state: &mut State,
) -> Result<()> {
    switch_memtable_at(inner, wal, state, None)
}

/// [`switch_memtable`], recording the external log `position` that seals the memtable (with an
/// external log no WAL file is created).
pub(crate) fn switch_memtable_at(
    inner: &DbInner,
    wal: &mut WalState,
    state: &mut State,
    position: Option<crate::version::edit::LogPosition>,
) -> Result<()> {
    let number = state.versions.new_file_number();
    let file = if inner.external_log {
        super::replicated::no_wal()
    } else {
        let path = filename::wal(&inner.dir, number);
        let mut file = inner
            .fs
            .create(&path)
            .map_err(|e| Error::io(e, format!("create {}", path.display())))?;
        file.preallocate(crate::wal::PREALLOCATE_CHUNK);
        inner
            .fs
            .sync_dir(&inner.dir)
            .map_err(|e| Error::io(e, format!("sync directory {}", inner.dir.display())))?;
        file
    };
    // The old WAL is handed to the operating system, not fsynced: a switch must not stop every
    // writer for an fsync of a whole memtable's log. The next fsync of any WAL syncs it first
    // (see `WalState::retired`); once its memtable is in an SST it is obsolete and dropped.
    // A broken writer (a failed append) is not flushed: its file keeps what it has, so a partial
    // record stays its torn tail.
    if !wal.writer.is_broken() {
        if let Err(e) = wal.writer.flush() {
            let err = Error::io(e, format!("write WAL {}", filename::wal_name(wal.number)));
            return Err(wal_write_failed(inner, err));
        }
    }
    let log_number = state.versions.log_number();
    wal.retired.retain(|(n, _)| *n >= log_number);
    if let Some(bits) = wal
        .mem
        .key_range()
        .and_then(|(lo, hi)| memtable::learned_prefix_bits(lo, hi))
    {
        inner.membuffer_prefix.store(bits, Ordering::Relaxed);
    }
    let mem = memtable::new_memtable(&inner.options, inner.membuffer_prefix());
    let old_mem = std::mem::replace(&mut wal.mem, mem.clone());
    let old_number = std::mem::replace(&mut wal.number, number);
    let old_writer = std::mem::replace(&mut wal.writer, LogWriter::new_wal(file));
    wal.retired.push((old_number, old_writer));
    state.sealed.push_back(Sealed {
        mem: old_mem,
        wal: old_number,
        last_seq: wal.last_seq,
        position,
    });
    state.mem = mem;
    state.mem_wal = number;
    inner.install_super_version(state);
    inner.bg_cv.notify_all();
    Ok(())
}

/// Poisons the database after a failed fsync of WAL `number` (the page cache may have dropped
/// the dirty pages) and returns the error.
fn sync_failed(inner: &DbInner, number: u64, e: std::io::Error) -> Error {
    inner.set_poison(Error::io(
        e,
        format!("sync WAL {}", filename::wal_name(number)),
    ))
}

/// Handles a failed WAL append or flush (not an fsync): a lack of space stops writes until space
/// returns (`db::resume`); anything else poisons. Returns the error for the writer.
fn wal_write_failed(inner: &DbInner, err: Error) -> Error {
    if super::resume::is_no_space(&err) {
        inner.stop_writes(err)
    } else {
        inner.set_poison(err)
    }
}

/// Handles a sync marker that could not be written to the active WAL `number` after its records
/// were synced: they are durable, and the write that asked for the sync succeeds, but the writer
/// is broken (its file may end in part of the marker) and takes no more records. As after a
/// failed append, a lack of space stops writes until `db::resume` starts a new WAL, and anything
/// else poisons; before, the next append found the writer broken and poisoned even for a lack of
/// space.
fn sync_marker_failed(inner: &DbInner, number: u64, e: std::io::Error) {
    let err = Error::io(
        e,
        format!("write a sync marker to WAL {}", filename::wal_name(number)),
    );
    wal_write_failed(inner, err);
}

/// Hands WAL `number`'s buffered records to the operating system before an fsync, so that a
/// failure to write them (a lack of space) is told apart from a failed fsync.
fn flush_before_sync(inner: &DbInner, number: u64, writer: &mut LogWriter) -> Result<()> {
    if writer.is_broken() {
        return Ok(());
    }
    writer.flush().map_err(|e| {
        let err = Error::io(e, format!("write WAL {}", filename::wal_name(number)));
        wal_write_failed(inner, err)
    })
}

/// Fsyncs the retired WALs, oldest first, then the active one. A failed fsync poisons the
/// database (the page cache may have dropped the dirty pages).
fn sync_all(inner: &DbInner, wal: &mut WalState) -> Result<()> {
    let poison = |number: u64, e: std::io::Error| sync_failed(inner, number, e);
    while let Some((number, writer)) = wal.retired.first_mut() {
        let number = *number;
        flush_before_sync(inner, number, writer)?;
        let len = writer.sync_records().map_err(|e| poison(number, e))?;
        // A retired WAL takes no more records: a marker that did not fit leaves a torn tail after
        // durable records, which recovery cuts.
        let _ = writer.mark_synced(len);
        wal.retired.remove(0);
    }
    let number = wal.number;
    flush_before_sync(inner, number, &mut wal.writer)?;
    let len = wal.writer.sync_records().map_err(|e| poison(number, e))?;
    if let Err(e) = wal.writer.mark_synced(len) {
        sync_marker_failed(inner, number, e);
    }
    inner.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Fsyncs the WALs, so every write acknowledged so far survives power loss.
///
/// The WAL lock is held only to hand the buffered bytes to the operating system and take sync
/// handles, not across the fsyncs: writers keep committing meanwhile (their writes may or may not
/// be covered by this sync). As in [`sync_all`], older WALs are synced first.
pub(crate) fn sync_wal(inner: &DbInner) -> Result<()> {
    inner.check_open()?;
    if let Some(e) = inner.poison_error() {
        return Err(e);
    }
    let poison = |number: u64, e: std::io::Error| sync_failed(inner, number, e);
    let handles = {
        let mut wal = inner.wal.lock();
        let wal = &mut *wal;
        let mut handles = Vec::with_capacity(wal.retired.len() + 1);
        for (number, writer) in wal
            .retired
            .iter_mut()
            .map(|(n, w)| (&*n, w))
            .chain(std::iter::once((&wal.number, &mut wal.writer)))
        {
            let len = writer.len();
            flush_before_sync(inner, *number, writer)?;
            let handle = writer.sync_handle().map_err(|e| poison(*number, e))?;
            handles.push((*number, len, handle));
        }
        // Taking the active WAL's handle handed its buffered records to the operating system.
        inner.wal_unflushed.store(false, Ordering::Relaxed);
        handles
    };
    for (number, _, handle) in &handles {
        handle.sync().map_err(|e| poison(*number, e))?;
    }
    let mut wal = inner.wal.lock();
    let wal = &mut *wal;
    for (number, len, _) in &handles {
        if *number == wal.number {
            if let Err(e) = wal.writer.mark_synced(*len) {
                sync_marker_failed(inner, *number, e);
            }
        } else if let Some((_, writer)) = wal.retired.iter_mut().find(|(n, _)| n == number) {
            // Retired: no more records follow, so a marker that did not fit is a torn tail.
            let _ = writer.mark_synced(*len);
        }
    }
    // The retired WALs synced here take no more appends: they need no later sync.
    wal.retired
        .retain(|(n, _)| !handles.iter().any(|(synced, _, _)| synced == n));
    inner.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Hands the active WAL's buffered records to the operating system (see `Db::flush_wal`).
pub(crate) fn flush_wal(inner: &DbInner) -> Result<()> {
    inner.check_open()?;
    if let Some(e) = inner.write_blocker() {
        return Err(e);
    }
    // A writer that returned before this call set the flag under the WAL lock, which the lock
    // below orders; a look without the lock that misses it can only be racing a write that had
    // not returned yet, which this call does not promise to cover.
    if !inner.wal_unflushed.load(Ordering::Acquire) {
        return Ok(());
    }
    let mut wal = inner.wal.lock();
    if !inner.wal_unflushed.load(Ordering::Relaxed) {
        return Ok(());
    }
    if let Err(e) = wal.writer.flush() {
        let err = Error::io(e, format!("write WAL {}", filename::wal_name(wal.number)));
        return Err(wal_write_failed(inner, err));
    }
    inner.wal_unflushed.store(false, Ordering::Relaxed);
    Ok(())
}

/// Syncs the WALs at close, so writes made with `Durability::Buffered` survive a power loss after
/// a clean close.
pub(crate) fn sync_wal_at_close(inner: &DbInner) -> Result<()> {
    sync_all(inner, &mut inner.wal.lock())
}
