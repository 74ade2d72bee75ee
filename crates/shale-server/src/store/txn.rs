//! One batch against the store: locks held, writes staged, committed as one engine `WriteBatch`.
//!
//! Writes are staged in the batch, not applied, until [`Txn::commit`]; every read sees them: a
//! point read looks at the staged writes first (a hash of each staged key makes the usual miss
//! cheap), and a range scan merges the staged writes in its range with the engine's entries. So
//! a pipeline batch or a whole MULTI/EXEC commits once, atomically, however its commands read
//! their own writes.
//!
//! The batch also carries what the commit must know besides the writes: the key-count changes
//! of each database, whether a new collection generation was handed out, and which keys were
//! modified (for WATCH) or grew (for clients blocked on them).
//!
//! When a commit fails, the replies already written for the commands whose writes it carried are
//! wrong: [`Txn::take_failure`] tells the executor which to replace with the error.
//!
//! A key staged more than once (a pipeline of sixteen `LPUSH`es to one list rewrites its meta
//! record sixteen times) reaches the engine once, with its last value: the batch is atomic, so no
//! reader could ever see the earlier ones, and each would cost a memtable insert and WAL bytes.

use super::format::{self, Kind, Meta, DATABASES};
use super::locks::Held;
use super::{Deferred, Store};
use bytes::Bytes;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use shale::{Error, ErrorKind, ReadOptions, Skipped, WriteBatch};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::ops::Bound;

/// An engine key read ahead, its value (`None` once taken or when the read failed), and how many
/// of the batch's reads in a row asked for it (one lookup serves them all).
type ReadAhead = (Vec<u8>, Option<Option<Vec<u8>>>, u32);

/// The elements a write command of a batch names in one collection (the fields HSET sets, the
/// members SADD adds), for [`Txn::read_ahead_elements`].
pub struct ElementReads<'k> {
    /// The collection's user key.
    pub key: &'k [u8],
    /// The type the command expects.
    pub kind: Kind,
    /// The elements' names.
    pub names: Vec<&'k [u8]>,
}

/// A staged write: the engine key and its new value (`None`: a deletion).
type Staged = (Vec<u8>, Option<StagedValue>);

/// A staged write seen by a scan: the engine key and its value in one piece (`None`: a
/// deletion).
type StagedView<'a> = (&'a [u8], Option<Cow<'a, [u8]>>);

/// A staged value: whole, or a short head and a body kept apart until the commit copies both
/// into the engine's batch. A string's meta record is its header and its value: staged apart,
/// a large value (which shares the request's memory) is copied once, not twice.
#[derive(Debug, Clone)]
enum StagedValue {
    Whole(Bytes),
    Split(Vec<u8>, Bytes),
}

impl StagedValue {
    /// The value in one piece (a copy only for a split value).
    fn contiguous(&self) -> Cow<'_, [u8]> {
        match self {
            StagedValue::Whole(v) => Cow::Borrowed(v),
            StagedValue::Split(head, body) => Cow::Owned([head, &body[..]].concat()),
        }
    }
}

/// How many read-ahead entries from the expected one a read looks through for its key.
const READ_AHEAD_LOOK: usize = 4;

/// A read looks for its key among at most this many staged keys by scanning their hashes; past
/// it, through a hash set. Most batches stage a few keys: they pay for no set.
const STAGED_SCAN_MAX: usize = 32;

/// The direction of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Backward,
}

/// Where the commands of the uncommitted writes started, for failure handling.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    /// Length of the reply buffer before the command.
    pub out_len: usize,
    /// Index of the command in the batch.
    pub command: usize,
}

/// A key modified by the batch: logical db, user key, and whether the modification deleted it.
pub type Touched = (u8, Vec<u8>, bool);

/// See the module documentation.
pub struct Txn<'a> {
    store: &'a Store,
    /// The batch's locks (`None` once handed to a deferred commit).
    held: Option<Held>,
    /// Whether it holds the whole keyspace (FLUSHDB, SWAPDB).
    exclusive: bool,
    staged: Vec<Staged>,
    // Hashes of the engine keys in `staged`, in staging order (a collision only costs a search
    // of `staged`). A read scans them while there are few; past [`STAGED_SCAN_MAX`] it looks
    // them up in `staged_set`, which then holds `staged_hashes[..staged_indexed]`.
    staged_hashes: Vec<u64>,
    staged_set: FxHashSet<u64>,
    staged_indexed: usize,
    // Whether a key may have been staged twice (its hash was seen before): the commit then
    // keeps only the last write of each key.
    restaged: bool,
    // Engine keys and values read ahead for the batch's read commands, in the order the
    // commands read them (see [`Txn::read_ahead_meta`]). Valid until the next commit: before
    // it, a key this batch wrote is answered from `staged` first.
    read_ahead: Vec<ReadAhead>,
    read_ahead_next: usize,
    // Element records read ahead for the batch's write commands, taken by the first read of each
    // (see [`Txn::read_ahead_elements`]). Valid until the next commit, as `read_ahead`.
    elements: FxHashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Key-count change of each physical database, applied with the commit.
    counts: [i64; DATABASES],
    /// Whether this batch handed out a collection generation (the counter is then persisted).
    new_generation: bool,
    /// Staged writes ever (not reset by a commit): a command that changed it wrote something.
    writes: u64,
    current: Option<Mark>,
    staged_since: Option<Mark>,
    failure: Option<(Mark, Error)>,
    /// Keys found expired: (physical db, user key), deleted after the batch.
    expired: Vec<(u8, Vec<u8>)>,
    /// Modified keys, for WATCH (only while someone watches).
    touched: Vec<Touched>,
    /// Lists and sorted sets that got elements, for blocked clients (only while any is blocked).
    ready: Vec<(u8, Vec<u8>)>,
    now_ms: u64,
    db: u8,
    physical: u8,
}

impl<'a> Txn<'a> {
    pub(super) fn new(store: &'a Store, held: Held, exclusive: bool) -> Self {
        Txn {
            store,
            held: Some(held),
            exclusive,
            staged: Vec::new(),
            staged_hashes: Vec::new(),
            staged_set: FxHashSet::default(),
            staged_indexed: 0,
            restaged: false,
            read_ahead: Vec::new(),
            read_ahead_next: 0,
            elements: FxHashMap::default(),
            counts: [0; DATABASES],
            new_generation: false,
            writes: 0,
            current: None,
            staged_since: None,
            failure: None,
            expired: Vec::new(),
            touched: Vec::new(),
            ready: Vec::new(),
            now_ms: super::now_ms(),
            db: 0,
            physical: store.physical(0),
        }
    }

    /// The store.
    pub fn store(&self) -> &'a Store {
        self.store
    }

    /// The batch's clock: one reading for all its commands, as Redis uses one per command.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Makes logical database `db` (0 to 15) the one the following commands work on.
    pub fn select(&mut self, db: u8) {
        self.db = db;
        self.physical = self.store.physical(db);
    }

    /// The logical database commands work on.
    pub fn db(&self) -> u8 {
        self.db
    }

    /// The physical database behind [`Txn::db`]: the one engine keys name.
    pub fn physical(&self) -> u8 {
        self.physical
    }

    /// How many writes this batch has staged so far (never decreases).
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Tells the batch which command runs next and where its reply starts.
    pub fn mark(&mut self, mark: Mark) {
        self.current = Some(mark);
    }

    /// A failed commit: where the replies to replace start, and the error.
    pub fn take_failure(&mut self) -> Option<(Mark, Error)> {
        self.failure.take()
    }

    /// A cheap hash: run for every staged key.
    fn key_hash(key: &[u8]) -> u64 {
        FxBuildHasher.hash_one(key)
    }

    /// Stages a put.
    pub fn put(&mut self, key: Vec<u8>, value: impl Into<Bytes>) {
        if key.first() == Some(&format::EXPIRY) {
            self.store.note_expiring_key();
        }
        self.stage(key, Some(StagedValue::Whole(value.into())));
    }

    /// Stages a put of `key` -> `head` followed by `body`, copied into one value only by the
    /// commit (a large `body` is then copied once).
    pub fn put_split(&mut self, key: Vec<u8>, head: Vec<u8>, body: Bytes) {
        if key.first() == Some(&format::EXPIRY) {
            self.store.note_expiring_key();
        }
        self.stage(key, Some(StagedValue::Split(head, body)));
    }

    /// Stages a delete.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.stage(key, None);
    }

    fn stage(&mut self, key: Vec<u8>, value: Option<StagedValue>) {
        let hash = Self::key_hash(&key);
        if !self.restaged && self.is_staged(hash) {
            self.restaged = true;
        }
        self.staged_hashes.push(hash);
        self.staged.push((key, value));
        self.writes += 1;
        if self.staged_since.is_none() {
            self.staged_since = self.current;
        }
    }

    /// Records that physical database `db` gained (`delta > 0`) or lost keys.
    pub fn count(&mut self, db: u8, delta: i64) {
        self.counts[usize::from(db)] += delta;
    }

    /// The number of keys of physical database `db`, with this batch's staged changes.
    pub fn db_size(&self, db: u8) -> u64 {
        let committed = self.store.db_size(db) as i64;
        (committed + self.counts[usize::from(db)]).max(0) as u64
    }

    /// Records that `key` of the current database was modified (`deleted`: it no longer exists),
    /// for clients that WATCH it.
    pub fn touch(&mut self, key: &[u8], deleted: bool) {
        let db = self.db;
        self.touch_in(db, key, deleted);
    }

    /// [`Txn::touch`] in logical database `db`.
    pub fn touch_in(&mut self, db: u8, key: &[u8], deleted: bool) {
        if self.store.watches.any() {
            self.touched.push((db, key.to_vec(), deleted));
        }
    }

    /// Records that list or sorted set `key` of the current database got elements, for clients
    /// blocked on it.
    pub fn ready(&mut self, key: &[u8]) {
        let db = self.db;
        self.ready_in(db, key);
    }

    /// [`Txn::ready`] in logical database `db`.
    pub fn ready_in(&mut self, db: u8, key: &[u8]) {
        if self.store.has_blocked_clients() {
            self.ready.push((db, key.to_vec()));
        }
    }

    /// The keys that got elements (see [`Txn::ready`]), taken.
    pub fn take_ready(&mut self) -> Vec<(u8, Vec<u8>)> {
        std::mem::take(&mut self.ready)
    }

    /// A new collection generation, persisted with this batch.
    pub fn new_generation(&mut self) -> u64 {
        self.new_generation = true;
        self.store.new_generation()
    }

    /// Whether a key with hash `hash` may have a staged write.
    fn is_staged(&mut self, hash: u64) -> bool {
        if self.staged_hashes.len() <= STAGED_SCAN_MAX {
            return self.staged_hashes.contains(&hash);
        }
        self.staged_set
            .extend(self.staged_hashes[self.staged_indexed..].iter().copied());
        self.staged_indexed = self.staged_hashes.len();
        self.staged_set.contains(&hash)
    }

    /// The newest staged write of `key`: `Some(None)` for a staged deletion.
    fn staged_value(&mut self, key: &[u8]) -> Option<Option<&StagedValue>> {
        if self.staged.is_empty() || !self.is_staged(Self::key_hash(key)) {
            return None;
        }
        self.staged
            .iter()
            .rev()
            .find(|(k, _)| k.as_slice() == key)
            .map(|(_, v)| v.as_ref())
    }

    /// Commits the staged writes with the batch's count changes, and reports the keys it
    /// modified to their watchers.
    ///
    /// # Errors
    /// The engine's write error; the failure is also kept for [`Txn::take_failure`].
    pub fn commit(&mut self) -> shale::Result<()> {
        let Some((batch, counts, since)) = self.take_batch() else {
            return Ok(());
        };
        let result = self.store.commit(batch, &counts);
        if let (Err(e), Some(mark)) = (&result, since) {
            self.failure = Some((mark, e.clone()));
        }
        result
    }

    /// On a cluster node, for a batch that holds no more than its keys' stripes: commits as
    /// [`Txn::commit`] does, but returns once the batch is queued on the Raft log, handing the
    /// batch's locks to the entry, whose apply releases them ([`Store::commit_deferred`]).
    /// `None` when there was nothing to commit, or when it committed in full (not a cluster
    /// node, or the whole keyspace is held): the locks then stay with the batch.
    ///
    /// # Errors
    /// As [`Txn::commit`]; a failure the entry meets later is in the [`Deferred`] result.
    pub fn commit_deferred(&mut self) -> shale::Result<Option<Deferred>> {
        if self.exclusive || self.store.replica().is_none() {
            return self.commit().map(|()| None);
        }
        let Some((batch, counts, since)) = self.take_batch() else {
            return Ok(None);
        };
        let held = self
            .held
            .take()
            .expect("a batch holds its locks until it commits");
        let started = std::time::Instant::now();
        match self.store.commit_deferred(batch, &counts, held) {
            Ok(write) => Ok(write.map(|write| Deferred {
                write,
                failed: since,
                started,
            })),
            Err(e) => {
                if let Some(mark) = since {
                    self.failure = Some((mark, e.clone()));
                }
                Err(e)
            }
        }
    }

    /// The engine batch of the staged writes, the count changes and the mark of the first
    /// command that staged a write, leaving the batch empty; `None` when there is nothing to
    /// commit.
    fn take_batch(&mut self) -> Option<(WriteBatch, [i64; DATABASES], Option<Mark>)> {
        if !self.touched.is_empty() {
            self.store.watches.touch(&self.touched);
            self.touched.clear();
        }
        if self.staged.is_empty() && self.counts.iter().all(|&d| d == 0) {
            return None;
        }
        let mut batch = WriteBatch::new();
        let superseded = if std::mem::take(&mut self.restaged) {
            superseded(&self.staged)
        } else {
            Vec::new()
        };
        for (i, (k, v)) in self.staged.drain(..).enumerate() {
            if superseded.get(i) == Some(&true) {
                continue;
            }
            match v {
                Some(StagedValue::Whole(v)) => batch.put(k, v),
                Some(StagedValue::Split(head, body)) => batch.put_parts(k, &[&head, &body]),
                None => batch.delete(k),
            };
        }
        if std::mem::take(&mut self.new_generation) {
            batch.put(
                format::GENERATION_KEY,
                self.store.generation_counter().to_be_bytes(),
            );
        }
        self.staged_hashes.clear();
        self.staged_set.clear();
        self.staged_indexed = 0;
        self.read_ahead.clear();
        self.read_ahead_next = 0;
        self.elements.clear();
        let counts = std::mem::take(&mut self.counts);
        Some((batch, counts, self.staged_since.take()))
    }

    /// Reads the meta records of `keys` (in the current database) with one engine `multi_get`,
    /// whose lookups overlap their cache misses, for the batch's commands to find. A read of one
    /// is then as good as a read at the command's turn: every command of the batch had arrived
    /// before it, the keys of the batch's writes are locked, and a key this batch wrote is
    /// answered from its staged writes.
    ///
    /// A key named by several commands in a row (a pipeline on one list or hash) is read once.
    pub fn read_ahead_meta<'k>(&mut self, keys: impl Iterator<Item = &'k [u8]>) {
        let db = self.physical;
        let mut unique: Vec<Vec<u8>> = Vec::new();
        let mut repeats: Vec<u32> = Vec::new();
        let mut last: Option<&[u8]> = None;
        for k in keys {
            if last == Some(k) {
                *repeats.last_mut().expect("a key before") += 1;
                continue;
            }
            last = Some(k);
            unique.push(format::meta_key(db, k));
            repeats.push(1);
        }
        let values = self.store.db().multi_get(&unique);
        // A failed read is left for the command to repeat and report.
        self.read_ahead.extend(
            unique
                .into_iter()
                .zip(values.into_iter().map(Result::ok))
                .zip(repeats)
                .map(|((k, v), n)| (k, v, n)),
        );
    }

    /// Reads ahead, with one engine `multi_get`, the element records that the batch's write
    /// commands name (`reads`): HSET, SADD and ZADD must know which of their fields or members
    /// exist, and a pipeline of them read one by one waits for one lookup's cache misses after
    /// another. Call after [`Txn::read_ahead_meta`]: the meta records it read give the
    /// collections' generations; a collection it did not read, absent, inline or of another type
    /// is left out. Each collection is locked by this batch (its command writes it), so what is
    /// read stays current until the batch writes it, and a read answers from the staged writes
    /// first.
    pub fn read_ahead_elements(&mut self, reads: &[ElementReads<'_>]) {
        let db = self.physical;
        let mut keys: Vec<Vec<u8>> = Vec::new();
        // The generation found for the previous read (a pipeline names one collection in a row).
        let mut last: Option<(&[u8], Kind, Option<u64>)> = None;
        for r in reads {
            let generation = match last {
                Some((key, kind, generation)) if key == r.key && kind == r.kind => generation,
                _ => {
                    let meta_key = format::meta_key(db, r.key);
                    let raw = self
                        .read_ahead
                        .iter()
                        .find(|e| e.0 == meta_key)
                        .and_then(|e| e.1.as_ref())
                        .and_then(Option::as_deref);
                    raw.and_then(|raw| format::collection_generation(raw, r.kind))
                }
            };
            last = Some((r.key, r.kind, generation));
            let Some(generation) = generation else {
                continue;
            };
            keys.extend(
                r.names
                    .iter()
                    .filter_map(|n| format::named_element_key(r.kind, generation, n)),
            );
        }
        // A lone lookup has no other to overlap.
        if keys.len() < 2 {
            return;
        }
        let values = self.store.db().multi_get(&keys);
        // A failed read is left for the command to repeat and report.
        for (k, v) in keys.into_iter().zip(values) {
            if let Ok(v) = v {
                self.elements.insert(k, v);
            }
        }
    }

    /// The element record read ahead for engine key `key`, taken.
    fn take_element(&mut self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if self.elements.is_empty() {
            return None;
        }
        self.elements.remove(key)
    }

    /// The value read ahead for engine key `key`: taken by the last of the reads it serves, a
    /// copy for the others. Commands read in the order the keys were read ahead, so the next
    /// entry usually holds it; a command that skipped its read (a wrong type, a syntax error)
    /// leaves an entry behind, so a few entries further are looked at too.
    fn take_read_ahead(&mut self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        let from = self.read_ahead_next;
        let look = self.read_ahead.len().min(from + READ_AHEAD_LOOK);
        let found = (from..look).find(|&i| self.read_ahead[i].0 == key)?;
        let entry = &mut self.read_ahead[found];
        if entry.2 > 1 {
            entry.2 -= 1;
            self.read_ahead_next = found;
            return entry.1.clone();
        }
        self.read_ahead_next = found + 1;
        entry.1.take()
    }

    /// The engine value of `key`, seeing this batch's staged writes.
    ///
    /// # Errors
    /// The engine's error.
    pub fn get(&mut self, key: &[u8]) -> shale::Result<Option<Vec<u8>>> {
        if let Some(staged) = self.staged_value(key) {
            return Ok(staged.map(|v| v.contiguous().into_owned()));
        }
        if self.read_ahead_next < self.read_ahead.len() {
            if let Some(value) = self.take_read_ahead(key) {
                return Ok(value);
            }
        }
        if let Some(value) = self.take_element(key) {
            return Ok(value);
        }
        self.store.db().get(key)
    }

    /// The engine values of `keys`, seeing this batch's staged writes; the keys not staged are
    /// read with one engine `multi_get`.
    ///
    /// # Errors
    /// The engine's error.
    pub fn get_many(&mut self, keys: &[Vec<u8>]) -> shale::Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            match self.staged_value(k) {
                Some(v) => out.push(v.map(|v| v.contiguous().into_owned())),
                None => match self.take_element(k) {
                    Some(v) => out.push(v),
                    None => {
                        out.push(None);
                        missing.push(i);
                    }
                },
            }
        }
        match missing.len() {
            0 => {}
            1 => out[missing[0]] = self.store.db().get(&keys[missing[0]])?,
            _ => {
                let wanted: Vec<&[u8]> = missing.iter().map(|&i| keys[i].as_slice()).collect();
                for (i, v) in missing.iter().zip(self.store.db().multi_get(&wanted)) {
                    out[*i] = v?;
                }
            }
        }
        Ok(out)
    }

    /// Whether engine key `key` exists, seeing this batch's staged writes.
    ///
    /// # Errors
    /// The engine's error.
    pub fn contains(&mut self, key: &[u8]) -> shale::Result<bool> {
        if let Some(staged) = self.staged_value(key) {
            return Ok(staged.is_some());
        }
        if let Some(value) = self.take_element(key) {
            return Ok(value.is_some());
        }
        Ok(self.store.db().get(key)?.is_some())
    }

    /// The live meta record of user key `key` in the current database: `None` when absent or
    /// expired (an expired key is remembered for deletion once the batch's locks are released).
    ///
    /// # Errors
    /// The engine's error, or `Corruption` for a damaged record.
    pub fn meta(&mut self, key: &[u8]) -> shale::Result<Option<Meta>> {
        let db = self.physical;
        self.meta_in(db, key)
    }

    /// [`Txn::meta`] in physical database `db`.
    ///
    /// # Errors
    /// The engine's error, or `Corruption` for a damaged record.
    pub fn meta_in(&mut self, db: u8, key: &[u8]) -> shale::Result<Option<Meta>> {
        let Some(meta) = self.meta_even_expired_in(db, key)? else {
            return Ok(None);
        };
        if meta.is_expired(self.now_ms) {
            self.expired.push((db, key.to_vec()));
            return Ok(None);
        }
        Ok(Some(meta))
    }

    /// The meta record of user key `key` in physical database `db`, expired or not.
    ///
    /// # Errors
    /// The engine's error, or `Corruption` for a damaged record.
    pub fn meta_even_expired_in(&mut self, db: u8, key: &[u8]) -> shale::Result<Option<Meta>> {
        match self.get(&format::meta_key(db, key))? {
            None => Ok(None),
            Some(raw) => Meta::decode(raw).map(Some).ok_or_else(|| damaged(key)),
        }
    }

    /// Visits the entries with keys in `(lo, hi)`, this batch's staged writes merged in, in
    /// direction `dir`, until `visit` returns false. One engine iteration.
    ///
    /// # Errors
    /// The engine's error.
    pub fn scan(
        &mut self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        dir: Dir,
        visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> shale::Result<()> {
        self.scan_with(lo, hi, dir, &ReadOptions::default(), visit)
            .map(drop)
    }

    /// [`Txn::scan`] with the engine's read `options`. With `skip_unreadable` the scan steps over
    /// data the engine cannot read and returns what it skipped. Only read-only listings should
    /// skip: a write built from a scan that skipped would be built from partial data.
    ///
    /// # Errors
    /// The engine's error.
    pub fn scan_with(
        &mut self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        dir: Dir,
        options: &ReadOptions,
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> shale::Result<Skips> {
        let staged = self.staged_in(&lo, &hi, dir);
        let mut engine = self.store.db().range_with((lo, hi), options);
        let mut next_engine = || match dir {
            Dir::Forward => engine.next(),
            Dir::Backward => engine.next_back(),
        };
        let before = |a: &[u8], b: &[u8]| match dir {
            Dir::Forward => a < b,
            Dir::Backward => a > b,
        };
        let mut staged = staged.into_iter().peekable();
        let mut pending = next_engine().transpose()?;
        loop {
            let take_staged = match (staged.peek(), &pending) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((sk, _)), Some((ek, _))) => !before(ek, sk),
            };
            if take_staged {
                let (sk, sv) = staged.next().expect("peeked");
                if pending.as_ref().is_some_and(|(ek, _)| ek.as_slice() == sk) {
                    pending = next_engine().transpose()?;
                }
                if let Some(v) = sv {
                    if !visit(sk, &v) {
                        break;
                    }
                }
            } else {
                let (ek, ev) = pending.take().expect("checked");
                if !visit(&ek, &ev) {
                    break;
                }
                pending = next_engine().transpose()?;
            }
        }
        Ok(Skips {
            count: engine.skipped_count(),
            pieces: engine.skipped(),
        })
    }

    /// Visits every entry whose key starts with `prefix` (see [`Txn::scan`]).
    ///
    /// # Errors
    /// The engine's error.
    pub fn scan_prefix(
        &mut self,
        prefix: &[u8],
        dir: Dir,
        visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> shale::Result<()> {
        self.scan(
            Bound::Included(prefix.to_vec()),
            upper_bound(prefix),
            dir,
            visit,
        )
    }

    /// The newest staged write of every staged key in `(lo, hi)`, sorted in direction `dir`.
    fn staged_in(&self, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, dir: Dir) -> Vec<StagedView<'_>> {
        if self.staged.is_empty() {
            return Vec::new();
        }
        let mut newest: BTreeMap<&[u8], Option<&StagedValue>> = BTreeMap::new();
        for (k, v) in &self.staged {
            if in_bounds(k, lo, hi) {
                newest.insert(k, v.as_ref());
            }
        }
        let mut out: Vec<_> = newest
            .into_iter()
            .map(|(k, v)| (k, v.map(StagedValue::contiguous)))
            .collect();
        if dir == Dir::Backward {
            out.reverse();
        }
        out
    }

    /// Stages the deletion of every engine key under `prefix`; returns how many.
    ///
    /// # Errors
    /// The engine's error.
    pub fn delete_prefix(&mut self, prefix: &[u8]) -> shale::Result<usize> {
        let mut keys = Vec::new();
        self.scan_prefix(prefix, Dir::Forward, |k, _| {
            keys.push(k.to_vec());
            true
        })?;
        let n = keys.len();
        for k in keys {
            self.delete(k);
        }
        Ok(n)
    }

    /// Keys found expired by reads in this batch, as (physical db, key); delete them after the
    /// batch (see [`super::expiry`]).
    pub fn take_expired(&mut self) -> Vec<(u8, Vec<u8>)> {
        std::mem::take(&mut self.expired)
    }
}

/// What a scan with `skip_unreadable` stepped over ([`Txn::scan_with`]).
#[derive(Debug, Default)]
pub struct Skips {
    /// Distinct pieces of unreadable data skipped.
    pub count: u64,
    /// The first of them (the engine keeps a bounded number), with file, offset and key range.
    pub pieces: Vec<Skipped>,
}

/// Which of `staged` a later write of the same key replaces (see the module documentation).
fn superseded(staged: &[Staged]) -> Vec<bool> {
    let mut seen: FxHashSet<&[u8]> = FxHashSet::default();
    let mut out: Vec<bool> = staged
        .iter()
        .rev()
        .map(|(k, _)| !seen.insert(k.as_slice()))
        .collect();
    out.reverse();
    out
}

fn in_bounds(key: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(l) => key >= l.as_slice(),
        Bound::Excluded(l) => key > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => key <= h.as_slice(),
        Bound::Excluded(h) => key < h.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// The exclusive upper bound of every key starting with `prefix`.
pub fn upper_bound(prefix: &[u8]) -> Bound<Vec<u8>> {
    shale::iter::prefix_upper_bound(prefix)
}

/// The error for a meta record that does not decode.
pub fn damaged(key: &[u8]) -> Error {
    Error::new(
        ErrorKind::Corruption,
        format!(
            "damaged meta record for key {:?}",
            String::from_utf8_lossy(key)
        ),
    )
}
