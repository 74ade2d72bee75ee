//! The keyspace: Redis types over the ordered engine.
//!
//! [`Store`] owns the [`shale::Db`] and everything shared by all connections: the striped key
//! locks, the generation counter of collections, the durability mode. A pipeline batch runs as
//! one [`Txn`]: it locks the stripes of every key its write commands name, executes the commands
//! in order, and commits their writes as one `WriteBatch`.
//!
//! Concurrency contract:
//! - Every command that writes a key runs with that key's stripe locked until the batch commits:
//!   exclusively for read-modify-write commands (`INCR`, `HSET`, `ZADD`, ...), which are thus
//!   atomic across connections, shared for blind writes (plain `SET`, `MSET`), which then never
//!   wait for each other (see [`locks`]). Stripes are always locked in ascending order, so two
//!   batches never deadlock.
//! - `FLUSHDB`/`FLUSHALL` take the keyspace lock exclusively; every batch holds it shared.
//! - Reads without writes take no stripe lock: they see the engine's latest committed state.
//! - Nothing awaits while a lock is held: a batch runs start to end on one thread.

pub mod expiry;
pub mod format;
mod locks;
pub mod syncer;
mod txn;

pub use locks::StripeSet;
pub use txn::{upper_bound, Mark, Txn};

use crate::config::Appendfsync;
use crate::metrics::Histogram;
use parking_lot::RwLock;
use shale::{Db, Durability, WriteBatch, WriteOptions};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// See the module documentation.
pub struct Store {
    db: Db,
    stripes: locks::Stripes,
    keyspace: RwLock<()>,
    // INVARIANT: greater than every generation stored in the engine (restored from
    // `format::GENERATION_KEY` and the clock at open, persisted with every new collection).
    next_generation: AtomicU64,
    appendfsync: AtomicU8,
    /// Whether the expiry index may hold entries: set at open when it does, and by every write
    /// that adds one, before its commit; never cleared. While it is false the expiry sweep reads
    /// nothing: a range read would make the engine drain FloDB's membuffer every sweep period.
    expiring: AtomicBool,
    /// Engine commit (WriteBatch) latency.
    pub commit_latency: Histogram,
    /// Group commit under `appendfsync always`.
    pub syncer: syncer::Syncer,
}

impl Store {
    /// Wraps an open database.
    ///
    /// # Errors
    /// The engine's error if the generation record cannot be read.
    pub fn new(db: Db, appendfsync: Appendfsync) -> shale::Result<Store> {
        let stored = db
            .get(format::GENERATION_KEY)?
            .and_then(|v| v.get(..8).and_then(|b| b.try_into().ok()))
            .map_or(0, u64::from_be_bytes);
        let clock = now_ms().saturating_mul(1000);
        let expiring = match db
            .range((
                Bound::Included(vec![format::EXPIRY]),
                Bound::Excluded(vec![format::EXPIRY + 1]),
            ))
            .next()
        {
            Some(item) => item.map(|_| true)?,
            None => false,
        };
        Ok(Store {
            db,
            stripes: locks::Stripes::new(),
            keyspace: RwLock::new(()),
            next_generation: AtomicU64::new(stored.max(clock) + 1),
            appendfsync: AtomicU8::new(appendfsync as u8),
            expiring: AtomicBool::new(expiring),
            commit_latency: Histogram::default(),
            syncer: syncer::Syncer::default(),
        })
    }

    /// Whether the expiry index may hold entries (see the field).
    pub fn may_have_expiring_keys(&self) -> bool {
        self.expiring.load(Ordering::Acquire)
    }

    /// Records that the expiry index is about to hold an entry.
    pub(crate) fn note_expiring_key(&self) {
        if !self.expiring.load(Ordering::Relaxed) {
            self.expiring.store(true, Ordering::Release);
        }
    }

    /// The engine.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Takes the engine back (at shutdown).
    pub fn into_db(self) -> Db {
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
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    /// Starts a batch that will write the keys whose stripes are in `stripes`.
    pub fn txn(&self, stripes: &StripeSet) -> Txn<'_> {
        Txn::new(self, self.keyspace.read(), self.stripes.lock(stripes))
    }

    /// Starts a batch that holds the whole keyspace exclusively (FLUSHDB).
    pub fn exclusive_txn(&self) -> Txn<'_> {
        Txn::exclusive(self, self.keyspace.write())
    }

    /// Commits `batch` with the current durability.
    ///
    /// # Errors
    /// The engine's write error.
    pub fn commit(&self, batch: WriteBatch) -> shale::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let result = self.db.write(
            batch,
            &WriteOptions {
                durability: self.durability(),
            },
        );
        self.commit_latency.observe(started.elapsed());
        result
    }
}
