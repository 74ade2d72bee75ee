//! One pipeline batch against the store: locks held, writes staged in one `WriteBatch`.
//!
//! Writes are staged, not applied, until [`Txn::commit`]; a read of a key with a staged write
//! commits first (so a batch reads its own writes without an overlay copy of every value), and so
//! does every range scan. A batch usually commits once, at its end.
//!
//! When a commit fails, the replies already written for the commands whose writes it carried are
//! wrong: [`Txn::take_failure`] tells the executor which to replace with the error.

use super::format::{self, Meta};
use super::locks::StripeGuard;
use super::Store;
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};
use rustc_hash::{FxBuildHasher, FxHashSet};
use shale::{Error, ErrorKind, WriteBatch};
use std::hash::BuildHasher;
use std::ops::Bound;

enum KeyspaceGuard<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

/// An engine key read ahead, and its value (`None` once taken or when the read failed).
type ReadAhead = (Vec<u8>, Option<Option<Vec<u8>>>);

/// How many read-ahead entries from the expected one a read looks through for its key.
const READ_AHEAD_LOOK: usize = 4;

/// A read looks for its key among at most this many staged keys by scanning them; past it, through
/// a hash set. Most batches stage a few keys and never read one: they pay for no set.
const STAGED_SCAN_MAX: usize = 32;

/// Where the commands of the uncommitted writes started, for failure handling.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    /// Length of the reply buffer before the command.
    pub out_len: usize,
    /// Index of the command in the batch.
    pub command: usize,
}

/// See the module documentation.
pub struct Txn<'a> {
    store: &'a Store,
    _keyspace: KeyspaceGuard<'a>,
    _stripes: Vec<StripeGuard<'a>>,
    batch: WriteBatch,
    // Hashes of the engine keys staged in `batch`, in staging order (a collision only costs an
    // early commit). A read scans them while there are few; past [`STAGED_SCAN_MAX`] it looks
    // them up in `staged_set`, which then holds `staged[..staged_indexed]`.
    staged: Vec<u64>,
    staged_set: FxHashSet<u64>,
    staged_indexed: usize,
    // Engine keys and values read ahead for the batch's read commands, in the order the
    // commands read them (see [`Txn::read_ahead_meta`]); a value is `None` once taken or when its
    // read failed. `read_ahead_next` is where the next command's read is looked for.
    // INVARIANT: empty after any commit, so an entry never predates a write of this batch.
    read_ahead: Vec<ReadAhead>,
    read_ahead_next: usize,
    current: Option<Mark>,
    staged_since: Option<Mark>,
    failure: Option<(Mark, Error)>,
    expired: Vec<Vec<u8>>,
    now_ms: u64,
}

impl<'a> Txn<'a> {
    pub(super) fn new(
        store: &'a Store,
        keyspace: RwLockReadGuard<'a, ()>,
        stripes: Vec<StripeGuard<'a>>,
    ) -> Self {
        Txn::with_guards(store, KeyspaceGuard::Shared(keyspace), stripes)
    }

    pub(super) fn exclusive(store: &'a Store, keyspace: RwLockWriteGuard<'a, ()>) -> Self {
        Txn::with_guards(store, KeyspaceGuard::Exclusive(keyspace), Vec::new())
    }

    fn with_guards(
        store: &'a Store,
        keyspace: KeyspaceGuard<'a>,
        stripes: Vec<StripeGuard<'a>>,
    ) -> Self {
        Txn {
            store,
            _keyspace: keyspace,
            _stripes: stripes,
            batch: WriteBatch::new(),
            staged: Vec::new(),
            staged_set: FxHashSet::default(),
            staged_indexed: 0,
            read_ahead: Vec::new(),
            read_ahead_next: 0,
            current: None,
            staged_since: None,
            failure: None,
            expired: Vec::new(),
            now_ms: super::now_ms(),
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
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        if key.first() == Some(&format::EXPIRY) {
            self.store.note_expiring_key();
        }
        self.note_staged(key);
        self.batch.put(key, value);
    }

    /// Stages a delete.
    pub fn delete(&mut self, key: &[u8]) {
        self.note_staged(key);
        self.batch.delete(key);
    }

    fn note_staged(&mut self, key: &[u8]) {
        self.staged.push(Self::key_hash(key));
        if self.staged_since.is_none() {
            self.staged_since = self.current;
        }
    }

    /// Whether a key with hash `hash` may have a staged write.
    fn is_staged(&mut self, hash: u64) -> bool {
        if self.staged.len() <= STAGED_SCAN_MAX {
            return self.staged.contains(&hash);
        }
        self.staged_set
            .extend(self.staged[self.staged_indexed..].iter().copied());
        self.staged_indexed = self.staged.len();
        self.staged_set.contains(&hash)
    }

    /// Commits the staged writes.
    ///
    /// # Errors
    /// The engine's write error; the failure is also kept for [`Txn::take_failure`].
    pub fn commit(&mut self) -> shale::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.staged.clear();
        self.staged_set.clear();
        self.staged_indexed = 0;
        self.read_ahead.clear();
        self.read_ahead_next = 0;
        let since = self.staged_since.take();
        let result = self.store.commit(batch);
        if let (Err(e), Some(mark)) = (&result, since) {
            self.failure = Some((mark, e.clone()));
        }
        result
    }

    /// Reads the meta records of `keys` with one engine `multi_get`, whose lookups overlap
    /// their cache misses, for the batch's commands to find. A read of one is then as good as a
    /// read at the command's turn: every command of the batch had arrived before it, and a write
    /// of this batch is seen (a commit drops what was read ahead).
    pub fn read_ahead_meta<'k>(&mut self, keys: impl Iterator<Item = &'k [u8]>) {
        let keys: Vec<Vec<u8>> = keys.map(format::meta_key).collect();
        let values = self.store.db().multi_get(&keys);
        // A failed read is left for the command to repeat and report.
        self.read_ahead
            .extend(keys.into_iter().zip(values.into_iter().map(Result::ok)));
    }

    /// The value read ahead for engine key `key`, taken. Commands read in the order the keys were
    /// read ahead, so the next entry usually holds it; a command that skipped its read (a wrong
    /// type, a syntax error) leaves an entry behind, so a few entries further are looked at too.
    fn take_read_ahead(&mut self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        let from = self.read_ahead_next;
        let look = self.read_ahead.len().min(from + READ_AHEAD_LOOK);
        let found = (from..look).find(|&i| self.read_ahead[i].0 == key)?;
        self.read_ahead_next = found + 1;
        self.read_ahead[found].1.take()
    }

    /// The engine value of `key`, seeing this batch's staged writes.
    ///
    /// # Errors
    /// The engine's error (or a failed commit of staged writes).
    pub fn get(&mut self, key: &[u8]) -> shale::Result<Option<Vec<u8>>> {
        if !self.staged.is_empty() && self.is_staged(Self::key_hash(key)) {
            self.commit()?;
        }
        if self.read_ahead_next < self.read_ahead.len() {
            if let Some(value) = self.take_read_ahead(key) {
                return Ok(value);
            }
        }
        self.store.db().get(key)
    }

    /// The live meta record of user key `key`: `None` when absent or expired (an expired key is
    /// remembered for deletion once the batch's locks are released).
    ///
    /// # Errors
    /// The engine's error, or `Corruption` for a damaged record.
    pub fn meta(&mut self, key: &[u8]) -> shale::Result<Option<Meta>> {
        let Some(meta) = self.meta_even_expired(key)? else {
            return Ok(None);
        };
        if meta.is_expired(self.now_ms) {
            self.expired.push(key.to_vec());
            return Ok(None);
        }
        Ok(Some(meta))
    }

    /// The meta record of user key `key`, expired or not.
    ///
    /// # Errors
    /// The engine's error, or `Corruption` for a damaged record.
    pub fn meta_even_expired(&mut self, key: &[u8]) -> shale::Result<Option<Meta>> {
        match self.get(&format::meta_key(key))? {
            None => Ok(None),
            Some(raw) => Meta::decode(raw).map(Some).ok_or_else(|| damaged(key)),
        }
    }

    /// Visits engine entries with keys in `[lo, hi)` in order (after committing staged writes),
    /// until `visit` returns false.
    ///
    /// # Errors
    /// The engine's error.
    pub fn scan(
        &mut self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> shale::Result<()> {
        self.commit()?;
        for item in self.store.db().range((lo, hi)) {
            let (k, v) = item?;
            if !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    /// Stages the deletion of every engine key under `prefix`.
    ///
    /// # Errors
    /// The engine's error.
    pub fn delete_prefix(&mut self, prefix: &[u8]) -> shale::Result<usize> {
        let mut keys = Vec::new();
        self.scan(
            Bound::Included(prefix.to_vec()),
            upper_bound(prefix),
            |k, _| {
                keys.push(k.to_vec());
                true
            },
        )?;
        for k in &keys {
            self.delete(k);
        }
        Ok(keys.len())
    }

    /// Stages the deletion of `key` and everything it owns, given its meta record.
    ///
    /// # Errors
    /// The engine's error.
    pub fn delete_key(&mut self, key: &[u8], meta: &Meta) -> shale::Result<()> {
        match meta.kind {
            format::Kind::String => {}
            format::Kind::Hash => {
                self.delete_prefix(&format::collection_prefix(
                    format::HASH_FIELD,
                    meta.generation,
                ))?;
            }
            format::Kind::ZSet => {
                self.delete_prefix(&format::collection_prefix(
                    format::ZSET_MEMBER,
                    meta.generation,
                ))?;
                self.delete_prefix(&format::collection_prefix(
                    format::ZSET_SCORE,
                    meta.generation,
                ))?;
            }
        }
        if meta.expire_at != 0 {
            self.delete(&format::expiry_key(meta.expire_at, key));
        }
        self.delete(&format::meta_key(key));
        Ok(())
    }

    /// A new collection generation, persisted with this batch.
    pub fn new_generation(&mut self) -> u64 {
        let generation = self.store.new_generation();
        self.batch
            .put(format::GENERATION_KEY, generation.to_be_bytes());
        generation
    }

    /// Keys found expired by reads in this batch; delete them after the batch (see
    /// [`super::expiry`]).
    pub fn take_expired(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.expired)
    }
}

/// The exclusive upper bound of every key starting with `prefix`.
pub fn upper_bound(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Bound::Excluded(end);
        }
    }
    Bound::Unbounded
}

fn damaged(key: &[u8]) -> Error {
    Error::new(
        ErrorKind::Corruption,
        format!(
            "damaged meta record for key {:?}",
            String::from_utf8_lossy(key)
        ),
    )
}
