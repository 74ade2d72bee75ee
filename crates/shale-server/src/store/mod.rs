//! The keyspace: Redis types over the ordered engine.
//!
//! [`Store`] owns the [`shale::Db`] and everything shared by all connections: the striped key
//! locks, the collection generation counter, the database map and key counts, the durability
//! mode, the WATCH registry. A batch (a pipeline's commands, or one MULTI/EXEC) runs as one
//! [`Txn`]: it locks the stripes of every key its write commands name, executes the commands in
//! order, and commits their writes as one `WriteBatch` through [`Store::commit`], the one place
//! where a batch reaches the engine.
//!
//! One module per type owns that type's records, WRONGTYPE checks, counts and deletion:
//! [`strings`], [`hashes`], [`zsets`], [`lists`], [`sets`]; [`keys`] holds what every type shares
//! (lookup, deletion, expiry, rename, move, copy, walking a database). `format` is the byte layout
//! (`docs/format/keyspace.md`).
//!
//! Concurrency contract:
//! - Every command that writes a key runs with that key's stripe locked exclusively until the
//!   batch commits, so every command is atomic against the others, across connections. Stripes
//!   are always locked in ascending order, so two batches never deadlock.
//! - FLUSHDB, FLUSHALL and SWAPDB take the keyspace lock exclusively; every batch holds it shared,
//!   so the database map never changes under a batch.
//! - Reads without writes take no stripe lock: they see the engine's latest committed state
//!   (EXEC also locks its read keys' stripes, shared, for an isolated transaction).
//! - Key counts change only in [`Store::commit`], under the count lock, which orders the count
//!   records in the engine as their batches.
//! - Nothing awaits while a lock is held: a batch runs start to end on one thread.
//!
//! On a cluster node ([`Store::replicated`]) the commit proposes the batch to the Raft log and
//! the batch's locks (keyspace shared, stripes; not the count lock) stay held until its entry
//! is applied here, so the next batch on those keys reads what it wrote. A batch on a
//! connection thread does not wait for that: [`Txn::commit_deferred`] hands its locks to the
//! entry, whose apply releases them on the replica's runtime, and the connection awaits the
//! entry ([`Deferred`]) while its thread serves other connections. Other commits wait, blocking.
//! A connection-thread batch that finds a lock held (most often by a batch whose entry is in
//! flight) does not wait for it there: the connection awaits the next release of locks
//! ([`Store::released_since`]) and tries again.
//! Entries applied from another leader do not pass through [`Store::commit`], so the in-memory
//! state (database map, counts, generation counter) is reloaded from the engine when this node
//! starts leading in a new term ([`Store::take_leadership`]); a follower reads counts from the
//! engine.

pub mod dump;
pub mod expiry;
pub mod format;
pub mod hashes;
pub mod keys;
pub mod lists;
mod locks;
mod migrate;
pub mod sample;
pub mod sets;
pub mod strings;
pub mod syncer;
mod txn;
pub mod watch;
pub mod zsets;

use locks::Held;
pub use locks::StripeSet;
pub use txn::{upper_bound, Dir, ElementReads, Mark, Skips, Txn};

use crate::config::Appendfsync;
use crate::metrics::Histogram;
use format::DATABASES;
use parking_lot::Mutex;
use shale::{Db, Durability, WriteBatch, WriteOptions};
use shale_repl::{PendingWrite, Replica};
use std::borrow::Cow;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Why a store operation failed: what the client is told.
#[derive(Debug)]
pub enum Error {
    /// The key holds another type (`WRONGTYPE ...`).
    WrongType,
    /// A Redis error line, code first (`ERR hash value is not an integer`).
    Reply(Cow<'static, str>),
    /// An engine failure.
    Engine(shale::Error),
}

impl Error {
    /// An error reply from a static line.
    pub fn reply(line: &'static str) -> Error {
        Error::Reply(Cow::Borrowed(line))
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::WrongType => f.write_str("WRONGTYPE"),
            Error::Reply(line) => f.write_str(line),
            Error::Engine(e) => write!(f, "{e}"),
        }
    }
}

impl From<shale::Error> for Error {
    fn from(e: shale::Error) -> Error {
        Error::Engine(e)
    }
}

/// The result of a store operation.
pub type Result<T> = std::result::Result<T, Error>;

/// See the module documentation.
pub struct Store {
    db: Arc<Db>,
    /// On a cluster node: commits go through the Raft log (see `crate::cluster`).
    replica: Option<Arc<Replica>>,
    /// On a cluster node: the term whose leadership the in-memory state was loaded for (0: not
    /// loaded as leader, or invalidated by a failed commit).
    leader_term: Arc<AtomicU64>,
    /// The keyspace lock and the key stripes.
    locks: Arc<locks::Locks>,
    // INVARIANT: greater than every counter value whose generation is stored in the engine
    // (restored from `format::GENERATION_KEY` and the clock at open, persisted with every batch
    // that creates a collection).
    next_generation: AtomicU64,
    /// Logical -> physical database; changed only by SWAPDB under the exclusive keyspace lock.
    db_map: [AtomicU8; DATABASES],
    /// Keys per physical database. The lock is held across the commit of a batch that changes
    /// a count (see [`Store::commit`]); the atomics mirror it for readers.
    counts: Mutex<[u64; DATABASES]>,
    count_view: [AtomicU64; DATABASES],
    appendfsync: AtomicU8,
    /// Whether the expiry index may hold entries: set at open when it does, and by every write
    /// that adds one, before its commit; never cleared. While it is false the expiry sweep reads
    /// nothing: a range read would make the engine drain FloDB's membuffer every sweep period.
    expiring: AtomicBool,
    /// Whether the background sweep runs (DEBUG SET-ACTIVE-EXPIRE).
    active_expire: AtomicBool,
    /// Clients blocked on lists or sorted sets (maintained by the executor's blocking registry):
    /// while it is zero, batches do not record which keys got elements.
    blocked_clients: AtomicUsize,
    /// Engine commit (WriteBatch) latency.
    pub commit_latency: Histogram,
    /// Group commit under `appendfsync always`.
    pub syncer: syncer::Syncer,
    /// WATCHed keys.
    pub watches: watch::Watches,
}

impl Store {
    /// Wraps an open database, migrating an older keyspace encoding first.
    ///
    /// # Errors
    /// The engine's error; `Corruption` for damaged store records; `NotSupported` for a
    /// keyspace written by a newer version.
    pub fn new(db: Db, appendfsync: Appendfsync) -> shale::Result<Store> {
        let state = migrate::open(&db)?;
        Store::with_state(Arc::new(db), None, state, appendfsync)
    }

    /// Wraps the engine of a cluster node, whose commits go through `replica`. Nothing is
    /// written at open: a new cluster's keyspace records are written by its first leader.
    ///
    /// # Errors
    /// As [`Store::new`].
    pub fn replicated(replica: Arc<Replica>, appendfsync: Appendfsync) -> shale::Result<Store> {
        let db = replica.db().clone();
        let state = migrate::read_current(&db)?;
        Store::with_state(db, Some(replica), state, appendfsync)
    }

    fn with_state(
        db: Arc<Db>,
        replica: Option<Arc<Replica>>,
        state: migrate::State,
        appendfsync: Appendfsync,
    ) -> shale::Result<Store> {
        let clock = now_ms().saturating_mul(1000);
        let expiring = has_expiry_entries(&db)?;
        let watched = replica.is_some();
        Ok(Store {
            db,
            replica,
            leader_term: Arc::new(AtomicU64::new(0)),
            locks: locks::Locks::new(watched),
            next_generation: AtomicU64::new(state.generation_counter.max(clock) + 1),
            db_map: state.db_map.map(AtomicU8::new),
            count_view: state.counts.map(AtomicU64::new),
            counts: Mutex::new(state.counts),
            appendfsync: AtomicU8::new(appendfsync as u8),
            expiring: AtomicBool::new(expiring),
            active_expire: AtomicBool::new(true),
            blocked_clients: AtomicUsize::new(0),
            commit_latency: Histogram::default(),
            syncer: syncer::Syncer::default(),
            watches: watch::Watches::default(),
        })
    }

    /// The replica, on a cluster node.
    pub fn replica(&self) -> Option<&Arc<Replica>> {
        self.replica.as_ref()
    }

    /// Whether this store may commit: not a cluster node, or its leader.
    pub fn accepts_writes(&self) -> bool {
        self.replica.as_ref().is_none_or(|r| r.is_leader())
    }

    /// Whether the in-memory state was loaded for leadership in `term`.
    pub fn state_is_current(&self, term: u64) -> bool {
        self.leader_term.load(Ordering::Acquire) == term
    }

    /// On a cluster node that leads in `term`: reloads the in-memory state (database map,
    /// counts, generation counter, expiry flag) from the engine unless it was loaded for this
    /// term already, and writes a new cluster's keyspace records. Call it after a read barrier
    /// of the term (everything committed before it is applied). Waits for every running batch.
    ///
    /// # Errors
    /// The engine's read error or the commit's error.
    pub fn take_leadership(&self, term: u64) -> shale::Result<()> {
        if self.leader_term.load(Ordering::Acquire) == term {
            return Ok(());
        }
        let _whole = self.locks.whole(None);
        if self.leader_term.load(Ordering::Acquire) == term {
            return Ok(());
        }
        let state = migrate::read_current(&self.db)?;
        if !migrate::has_records(&self.db)? {
            let mut batch = WriteBatch::new();
            migrate::write_fresh_records(&mut batch, &state.counts);
            self.start_write(batch, None)?.finish()?;
        }
        let clock = now_ms().saturating_mul(1000);
        self.next_generation
            .fetch_max(state.generation_counter.max(clock) + 1, Ordering::Relaxed);
        self.set_db_map(state.db_map);
        let mut counts = self.counts.lock();
        *counts = state.counts;
        for (view, n) in self.count_view.iter().zip(state.counts) {
            view.store(n, Ordering::Relaxed);
        }
        drop(counts);
        if has_expiry_entries(&self.db)? {
            self.note_expiring_key();
        }
        self.leader_term.store(term, Ordering::Release);
        Ok(())
    }

    /// Whether the expiry index may hold entries (see the field) and the sweep is on.
    pub fn may_have_expiring_keys(&self) -> bool {
        self.expiring.load(Ordering::Acquire) && self.active_expire.load(Ordering::Relaxed)
    }

    /// Turns the background expiry sweep on or off (keys still expire when read).
    pub fn set_active_expire(&self, on: bool) {
        self.active_expire.store(on, Ordering::Relaxed);
    }

    /// Records that the expiry index is about to hold an entry.
    pub(crate) fn note_expiring_key(&self) {
        if !self.expiring.load(Ordering::Relaxed) {
            self.expiring.store(true, Ordering::Release);
        }
    }

    /// Whether any client is blocked on a key.
    pub fn has_blocked_clients(&self) -> bool {
        self.blocked_clients.load(Ordering::Acquire) > 0
    }

    /// How many clients are blocked on keys.
    pub fn blocked_clients(&self) -> usize {
        self.blocked_clients.load(Ordering::Acquire)
    }

    /// Counts a client that blocks (`+1`) or stops being blocked (`-1`).
    pub fn note_blocked(&self, delta: isize) {
        if delta > 0 {
            self.blocked_clients.fetch_add(1, Ordering::AcqRel);
        } else {
            self.blocked_clients.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The engine.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Takes the engine back (at shutdown).
    pub fn into_db(self) -> Arc<Db> {
        self.db
    }

    /// The `appendfsync` mode in force.
    pub fn appendfsync(&self) -> Appendfsync {
        Appendfsync::from_u8(self.appendfsync.load(Ordering::Relaxed))
    }

    /// Changes the `appendfsync` mode (CONFIG SET appendfsync).
    pub fn set_appendfsync(&self, mode: Appendfsync) {
        self.appendfsync.store(mode as u8, Ordering::Relaxed);
    }

    /// The durability of an engine write: unflushed, in every `appendfsync` mode. A connection
    /// that wrote hands the WAL to the operating system (`Db::flush_wal`) before it answers, once
    /// for every connection of its thread that wrote in the same round (see `connection`), as
    /// Redis writes its append-only file once per event-loop iteration. Under `appendfsync always`
    /// the connection waits for a [`syncer`] ticket instead, whose fsync flushes first, so no
    /// lock is held across an fsync and one fsync serves every connection. Writes of the server's
    /// own (the expiry sweep) reach the operating system with the next flush or sync.
    pub fn durability(&self) -> Durability {
        Durability::Unflushed
    }

    /// A new collection generation.
    pub fn new_generation(&self) -> u64 {
        format::generation_of(self.next_generation.fetch_add(1, Ordering::Relaxed))
    }

    /// The generation counter's value to persist: at least every counter handed out.
    pub fn generation_counter(&self) -> u64 {
        self.next_generation.load(Ordering::Relaxed)
    }

    /// The physical database behind logical database `db`.
    pub fn physical(&self, db: u8) -> u8 {
        self.db_map[usize::from(db) % DATABASES].load(Ordering::Relaxed)
    }

    /// The logical database whose data is in physical database `physical`.
    pub fn logical(&self, physical: u8) -> u8 {
        (0..DATABASES as u8)
            .find(|&db| self.physical(db) == physical)
            .unwrap_or(physical)
    }

    /// The map of logical to physical databases.
    pub fn db_map(&self) -> [u8; DATABASES] {
        std::array::from_fn(|i| self.db_map[i].load(Ordering::Relaxed))
    }

    /// Installs a new database map (SWAPDB, under the exclusive keyspace lock, after the batch
    /// that persisted it committed).
    pub(crate) fn set_db_map(&self, map: [u8; DATABASES]) {
        for (slot, physical) in self.db_map.iter().zip(map) {
            slot.store(physical, Ordering::Relaxed);
        }
    }

    /// The committed number of keys of physical database `db`.
    pub fn db_size(&self, db: u8) -> u64 {
        if !self.accepts_writes() {
            // A follower's counts change through entries applied beside the store.
            return self
                .db
                .get(format::count_key(db))
                .ok()
                .flatten()
                .and_then(|v| format::decode_u64(&v))
                .unwrap_or(0);
        }
        self.count_view[usize::from(db) % DATABASES].load(Ordering::Relaxed)
    }

    /// Starts a batch that will write the keys whose stripes are in `stripes`.
    pub fn txn(&self, stripes: &StripeSet) -> Txn<'_> {
        Txn::new(self, self.locks.batch(stripes), false)
    }

    /// Starts a batch like [`Store::txn`] if it gets its locks by `deadline`; `None` (holding
    /// nothing) when another batch still holds one then.
    pub fn txn_until(&self, stripes: &StripeSet, deadline: Instant) -> Option<Txn<'_>> {
        let held = self.locks.batch_until(stripes, Some(deadline))?;
        Some(Txn::new(self, held, false))
    }

    /// How many sets of batch locks were released so far, on a cluster node (0 elsewhere). Read
    /// before a batch tries its locks, it tells [`Store::released_since`] what is new.
    pub fn lock_releases(&self) -> u64 {
        self.locks.releases()
    }

    /// On a cluster node: returns, without blocking the thread, once a batch released its locks
    /// after [`Store::lock_releases`] returned `seen` (on a cluster node, usually when a Raft
    /// entry is applied), or after `patience`.
    pub async fn released_since(&self, seen: u64, patience: std::time::Duration) {
        self.locks.released_since(seen, patience).await;
    }

    /// Starts a batch like [`Store::exclusive_txn`] if every other batch ends by `deadline`;
    /// `None` otherwise.
    pub fn exclusive_txn_until(&self, deadline: Instant) -> Option<Txn<'_>> {
        let held = self.locks.whole(Some(deadline))?;
        Some(Txn::new(self, held, true))
    }

    /// Starts a batch that holds the whole keyspace exclusively (FLUSHDB, SWAPDB).
    pub fn exclusive_txn(&self) -> Txn<'_> {
        let held = self.locks.whole(None).expect("no deadline");
        Txn::new(self, held, true)
    }

    /// Commits `batch` with the current durability, changing the key count of each physical
    /// database by `counts`: the one place where a batch of the server reaches the engine (a
    /// replicated server routes this call through its log).
    ///
    /// A batch that changes a count carries the new counts as records and commits under the
    /// count lock, so the count records reach the engine in the order of the counts they hold.
    ///
    /// # Errors
    /// The engine's write error (the counts are then left as they were).
    pub fn commit(&self, batch: WriteBatch, counts: &[i64; DATABASES]) -> shale::Result<()> {
        if batch.is_empty() && counts.iter().all(|&d| d == 0) {
            return Ok(());
        }
        let started = Instant::now();
        let result = self
            .start_commit(batch, counts, None)
            .and_then(Started::finish);
        if result.is_err() && self.replica.is_some() {
            // The entry may or may not commit: reload the state before the next leader batch.
            self.leader_term.store(0, Ordering::Release);
        }
        self.commit_latency.observe(started.elapsed());
        result
    }

    /// On a cluster node: [`Store::commit`] up to queueing the batch on the Raft log. The
    /// caller's locks (`held`) go with the entry and are released when it is applied here or
    /// fails, on the replica's runtime, as soon as the next batch on those keys may run; the
    /// caller awaits the returned write before it answers (see [`Deferred`]). A failure also
    /// has the state reloaded before the next leader batch, before the locks are released.
    /// `None` when there is nothing to commit.
    ///
    /// # Errors
    /// The batch could not be queued (the locks are released then too).
    fn commit_deferred(
        &self,
        batch: WriteBatch,
        counts: &[i64; DATABASES],
        held: Held,
    ) -> shale::Result<Option<PendingWrite>> {
        if batch.is_empty() && counts.iter().all(|&d| d == 0) {
            return Ok(None);
        }
        match self.start_commit(batch, counts, Some(held))? {
            Started::Done => Ok(None),
            Started::Replicated(p) => Ok(Some(p)),
        }
    }

    /// Writes `batch` with the count changes, or queues it on the Raft log (see
    /// [`Store::commit`]); `held` as in [`Store::commit_deferred`].
    fn start_commit(
        &self,
        mut batch: WriteBatch,
        counts: &[i64; DATABASES],
        held: Option<Held>,
    ) -> shale::Result<Started> {
        if counts.iter().all(|&d| d == 0) {
            self.start_write(batch, held)
        } else {
            // Large values go to their blob files before the count lock is taken: writing them
            // takes long, and every commit that adds or removes a key waits for that lock. (A
            // cluster node's batch goes whole through the Raft log.)
            let mut prepared = match self.replica {
                Some(_) => None,
                None => Some(self.db.prepare_write(std::mem::take(&mut batch))?),
            };
            let mut count_lock = self.counts.lock();
            let mut next = *count_lock;
            for (db, &delta) in counts.iter().enumerate() {
                if delta != 0 {
                    next[db] = (next[db] as i64 + delta).max(0) as u64;
                    let (key, value) = (format::count_key(db as u8), next[db].to_be_bytes());
                    match &mut prepared {
                        Some(p) => {
                            p.put(key, value);
                        }
                        None => {
                            batch.put(key, value);
                        }
                    }
                }
            }
            // A replicated batch is queued in count order under the lock and awaited after it.
            let result = match prepared {
                Some(p) => self
                    .db
                    .write_prepared(
                        p,
                        &WriteOptions {
                            durability: self.durability(),
                        },
                    )
                    .map(|()| Started::Done),
                None => self.start_write(batch, held),
            };
            if result.is_ok() {
                *count_lock = next;
                for (view, n) in self.count_view.iter().zip(next) {
                    view.store(n, Ordering::Relaxed);
                }
            }
            result
        }
    }

    /// Writes `batch` to the engine, or queues it on the Raft log (to be awaited), handing
    /// `held` to the entry (see [`Store::commit_deferred`]).
    fn start_write(&self, batch: WriteBatch, held: Option<Held>) -> shale::Result<Started> {
        match (&self.replica, held) {
            (Some(replica), Some(held)) => {
                let leader_term = self.leader_term.clone();
                replica
                    .submit_then(batch, move |applied| {
                        if !applied {
                            // As in `commit`: reload the state before the next leader batch,
                            // which may run as soon as the locks are released.
                            leader_term.store(0, Ordering::Release);
                        }
                        drop(held);
                    })
                    .map(Started::Replicated)
                    .map_err(repl_error)
            }
            (Some(replica), None) => replica
                .submit(batch)
                .map(Started::Replicated)
                .map_err(repl_error),
            (None, _) => self
                .db
                .write(
                    batch,
                    &WriteOptions {
                        durability: self.durability(),
                    },
                )
                .map(|()| Started::Done),
        }
    }
}

/// A commit queued on the Raft log by [`Txn::commit_deferred`]: the batch's locks are released
/// when its entry is applied here (or fails); its replies wait for [`Deferred::settled`].
pub struct Deferred {
    /// Resolves once the entry is applied here.
    pub write: PendingWrite,
    /// The first command whose writes it carries: if it fails, their replies are replaced with
    /// the error.
    pub failed: Option<Mark>,
    /// When the commit began.
    pub started: Instant,
}

impl Deferred {
    /// Waits, without blocking the thread, until the entry is applied here (a majority has it
    /// fsynced, and the next batch on the same keys reads what this one wrote).
    ///
    /// # Errors
    /// The entry failed or may not be applied.
    pub async fn settled(self, store: &Store) -> shale::Result<()> {
        let result = self.write.await.map(|_| ()).map_err(repl_error);
        store.commit_latency.observe(self.started.elapsed());
        result
    }

    /// [`Deferred::settled`], blocking the thread (where another batch must run after it).
    ///
    /// # Errors
    /// As [`Deferred::settled`].
    pub fn wait(self, store: &Store) -> shale::Result<()> {
        let result = self.write.wait().map(|_| ()).map_err(repl_error);
        store.commit_latency.observe(self.started.elapsed());
        result
    }
}

/// A write begun by [`Store::start_write`].
enum Started {
    Done,
    Replicated(PendingWrite),
}

impl Started {
    /// Waits (on a cluster node) until the entry is applied here: a majority has it fsynced,
    /// and the next batch on the same keys reads what this one wrote.
    fn finish(self) -> shale::Result<()> {
        match self {
            Started::Done => Ok(()),
            Started::Replicated(p) => p.wait().map(|_| ()).map_err(repl_error),
        }
    }
}

/// A replication failure as an engine error (its text is the reply line's).
fn repl_error(e: shale_repl::ReplError) -> shale::Error {
    match e {
        shale_repl::ReplError::Engine(e) => e,
        e => shale::Error::new(shale::ErrorKind::Busy, crate::cluster::error_line(&e)),
    }
}

/// Whether the expiry index holds an entry.
fn has_expiry_entries(db: &Db) -> shale::Result<bool> {
    match db
        .range((
            Bound::Included(vec![format::EXPIRY]),
            Bound::Excluded(vec![format::EXPIRY + 1]),
        ))
        .next()
    {
        Some(item) => item.map(|_| true),
        None => Ok(false),
    }
}

#[cfg(test)]
mod tests;
