//! What every type shares: finding a key's meta record (with the WRONGTYPE check), writing it,
//! deleting a key with everything it owns, expiry, RENAME, MOVE, COPY, walking and flushing a
//! database. Every key count change and every WATCH notification of the store starts here.
//!
//! Reads and writes differ on expired keys, as in Redis: a read treats one as absent and leaves
//! its deletion for after the batch ([`Txn::meta`]); a write deletes it in its own batch first
//! ([`lookup_write`]), so the key count and the old elements never outlive it.

use super::format::{self, Kind, Meta};
use super::{Dir, Error, Result, Txn};
use bytes::Bytes;
use std::ops::Bound;

/// The live meta record of `key` for a read: `None` when absent or expired.
///
/// # Errors
/// The engine's error.
pub fn lookup(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Meta>> {
    Ok(txn.meta(key)?)
}

/// The live meta record of `key` for a read, which must be of type `kind`.
///
/// # Errors
/// [`Error::WrongType`] for another type; the engine's error.
pub fn typed(txn: &mut Txn<'_>, key: &[u8], kind: Kind) -> Result<Option<Meta>> {
    match txn.meta(key)? {
        Some(m) if m.kind != kind => Err(Error::WrongType),
        m => Ok(m),
    }
}

/// The live meta record of `key` for a command that writes it: an expired record is deleted in
/// this batch first.
///
/// # Errors
/// The engine's error.
pub fn lookup_write(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Meta>> {
    let db = txn.physical();
    let Some(meta) = txn.meta_even_expired_in(db, key)? else {
        return Ok(None);
    };
    if meta.is_expired(txn.now_ms()) {
        delete(txn, key, &meta)?;
        return Ok(None);
    }
    Ok(Some(meta))
}

/// [`lookup_write`] for a key that must be of type `kind`.
///
/// # Errors
/// [`Error::WrongType`] for another type; the engine's error.
pub fn typed_write(txn: &mut Txn<'_>, key: &[u8], kind: Kind) -> Result<Option<Meta>> {
    match lookup_write(txn, key)? {
        Some(m) if m.kind != kind => Err(Error::WrongType),
        m => Ok(m),
    }
}

/// Stages `key`'s meta record `record`; `created` when the key did not exist (it then counts).
pub fn store_meta(txn: &mut Txn<'_>, key: &[u8], record: Vec<u8>, created: bool) {
    let db = txn.physical();
    txn.put(format::meta_key(db, key), record);
    stored(txn, db, key, created);
}

/// Stages string `key` = `value` expiring at `expire_at` (0: never) as its meta record
/// (`created` when the key did not exist). The value is not copied until the commit.
pub fn store_string(txn: &mut Txn<'_>, key: &[u8], value: Bytes, expire_at: u64, created: bool) {
    let db = txn.physical();
    let head = format::string_meta_header(expire_at);
    txn.put_split(format::meta_key(db, key), head, value);
    stored(txn, db, key, created);
}

/// Accounts for a meta record of `key` in physical database `db` just staged.
fn stored(txn: &mut Txn<'_>, db: u8, key: &[u8], created: bool) {
    if created {
        txn.count(db, 1);
    }
    txn.touch(key, false);
}

/// Stages a collection's meta record: deletes the key when it has no element left, otherwise
/// writes `meta` (`created` when the key did not exist).
pub fn store_collection(txn: &mut Txn<'_>, key: &[u8], meta: &Meta, created: bool) {
    if meta.len == 0 {
        if !created {
            drop_meta(txn, key, meta);
        }
    } else {
        store_meta(txn, key, meta.encode(), created);
        if matches!(meta.kind, Kind::List | Kind::ZSet) {
            txn.ready(key);
        }
    }
}

/// Stages the deletion of `key`'s meta record and expiry entry, for a collection whose elements
/// are already gone.
pub fn drop_meta(txn: &mut Txn<'_>, key: &[u8], meta: &Meta) {
    let db = txn.physical();
    if meta.expire_at != 0 {
        txn.delete(format::expiry_key(meta.expire_at, db, key));
    }
    txn.delete(format::meta_key(db, key));
    txn.count(db, -1);
    txn.touch(key, true);
}

/// Stages the deletion of every element record of the collection `meta` describes.
///
/// # Errors
/// The engine's error.
pub fn delete_elements(txn: &mut Txn<'_>, meta: &Meta) -> Result<()> {
    if meta.inline {
        return Ok(());
    }
    for &tag in meta.kind.element_tags() {
        txn.delete_prefix(&format::collection_prefix(tag, meta.generation))?;
    }
    Ok(())
}

/// Stages the deletion of `key` (described by `meta`) and everything it owns.
///
/// # Errors
/// The engine's error.
pub fn delete(txn: &mut Txn<'_>, key: &[u8], meta: &Meta) -> Result<()> {
    delete_elements(txn, meta)?;
    drop_meta(txn, key, meta);
    Ok(())
}

/// Prepares `key` to be replaced by a new value: deletes what its current record `old` owns
/// besides the meta record (elements, expiry entry). Returns whether the key is new.
///
/// # Errors
/// The engine's error.
pub fn clear_for_overwrite(txn: &mut Txn<'_>, key: &[u8], old: Option<&Meta>) -> Result<bool> {
    let Some(old) = old else {
        return Ok(true);
    };
    delete_elements(txn, old)?;
    if old.expire_at != 0 {
        let db = txn.physical();
        txn.delete(format::expiry_key(old.expire_at, db, key));
    }
    Ok(false)
}

/// Stages `key`'s meta record with expiry `expire_at` (0: none) and keeps the expiry index in
/// step.
pub fn set_expiry(txn: &mut Txn<'_>, key: &[u8], meta: &Meta, expire_at: u64) {
    let db = txn.physical();
    if meta.expire_at != 0 {
        txn.delete(format::expiry_key(meta.expire_at, db, key));
    }
    let mut updated = meta.clone();
    updated.expire_at = expire_at;
    txn.put(format::meta_key(db, key), updated.encode());
    if expire_at != 0 {
        txn.put(format::expiry_key(expire_at, db, key), Vec::new());
    }
    txn.touch(key, false);
}

/// Stages a new expiry entry for a key whose meta record (already staged) expires at `at`.
pub fn add_expiry_entry(txn: &mut Txn<'_>, key: &[u8], at: u64) {
    if at != 0 {
        let db = txn.physical();
        txn.put(format::expiry_key(at, db, key), Vec::new());
    }
}

/// RENAME / RENAMENX: moves `src`'s value to `dst`, replacing it (unless `nx` and it exists).
/// Returns false when `nx` kept an existing `dst`.
///
/// # Errors
/// `ERR no such key` when `src` is absent; the engine's error.
pub fn rename(txn: &mut Txn<'_>, src: &[u8], dst: &[u8], nx: bool) -> Result<bool> {
    let Some(meta) = lookup_write(txn, src)? else {
        return Err(Error::reply("ERR no such key"));
    };
    if src == dst {
        return Ok(!nx);
    }
    if let Some(old) = lookup_write(txn, dst)? {
        if nx {
            return Ok(false);
        }
        delete(txn, dst, &old)?;
    }
    drop_meta(txn, src, &meta);
    store_meta(txn, dst, meta.encode(), true);
    add_expiry_entry(txn, dst, meta.expire_at);
    if matches!(meta.kind, Kind::List | Kind::ZSet) {
        txn.ready(dst);
    }
    Ok(true)
}

/// MOVE: moves `key` from the current database to logical database `to`. Returns false when
/// the key is absent here or present there.
///
/// # Errors
/// `ERR source and destination objects are the same`; the engine's error.
pub fn move_to(txn: &mut Txn<'_>, key: &[u8], to: u8) -> Result<bool> {
    let from = txn.db();
    if from == to {
        return Err(Error::reply(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(meta) = lookup_write(txn, key)? else {
        return Ok(false);
    };
    txn.select(to);
    let taken = lookup_write(txn, key)?.is_some();
    if !taken {
        store_meta(txn, key, meta.encode(), true);
        add_expiry_entry(txn, key, meta.expire_at);
        if matches!(meta.kind, Kind::List | Kind::ZSet) {
            txn.ready(key);
        }
    }
    txn.select(from);
    if !taken {
        drop_meta(txn, key, &meta);
    }
    Ok(!taken)
}

/// COPY: copies `src` of the current database to `dst` of logical database `to`, replacing it
/// when `replace`. Returns false when `src` is absent or `dst` exists (without `replace`).
///
/// # Errors
/// The engine's error.
pub fn copy(txn: &mut Txn<'_>, src: &[u8], dst: &[u8], to: u8, replace: bool) -> Result<bool> {
    let from = txn.db();
    if from == to && src == dst {
        return Err(Error::reply(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(meta) = lookup_write(txn, src)? else {
        return Ok(false);
    };
    let mut elements = Vec::new();
    let tags = if meta.inline {
        &[][..]
    } else {
        meta.kind.element_tags()
    };
    for &tag in tags {
        let prefix = format::collection_prefix(tag, meta.generation);
        txn.scan_prefix(&prefix, Dir::Forward, |k, v| {
            elements.push((tag, format::element_name(k).to_vec(), v.to_vec()));
            true
        })?;
    }
    txn.select(to);
    let result = (|| {
        let old = lookup_write(txn, dst)?;
        if old.is_some() && !replace {
            return Ok(false);
        }
        let created = clear_for_overwrite(txn, dst, old.as_ref())?;
        let record = if meta.kind == Kind::String || meta.inline {
            meta.encode()
        } else {
            let generation = txn.new_generation();
            for (tag, name, value) in elements {
                let mut key = format::collection_prefix(tag, generation);
                key.extend_from_slice(&name);
                txn.put(key, value);
            }
            let mut copied = meta.clone();
            copied.generation = generation;
            copied.encode()
        };
        store_meta(txn, dst, record, created);
        add_expiry_entry(txn, dst, meta.expire_at);
        if matches!(meta.kind, Kind::List | Kind::ZSet) {
            txn.ready(dst);
        }
        Ok(true)
    })();
    txn.select(from);
    result
}

/// Visits the live keys of the current database in engine order (key-hash order) from the meta
/// key `start` (inclusive; `None`: the first), with one engine iteration; `visit` gets the meta
/// record's engine key, the user key and the record, and returns false to stop.
///
/// # Errors
/// The engine's error.
pub fn walk(
    txn: &mut Txn<'_>,
    start: Option<Vec<u8>>,
    visit: impl FnMut(&[u8], &[u8], &Meta) -> bool,
) -> Result<()> {
    walk_with(txn, start, &shale::ReadOptions::default(), visit).map(drop)
}

/// [`walk`] with the engine's read `options`: with `skip_unreadable`, for listings (KEYS, SCAN),
/// it steps over meta records the engine cannot read and returns what it skipped.
///
/// # Errors
/// The engine's error.
pub fn walk_with(
    txn: &mut Txn<'_>,
    start: Option<Vec<u8>>,
    options: &shale::ReadOptions,
    mut visit: impl FnMut(&[u8], &[u8], &Meta) -> bool,
) -> Result<super::Skips> {
    let now = txn.now_ms();
    let prefix = format::meta_prefix(txn.physical());
    let lo = match start {
        Some(k) if k.starts_with(&prefix) => Bound::Included(k),
        _ => Bound::Included(prefix.to_vec()),
    };
    Ok(txn.scan_with(
        lo,
        super::upper_bound(&prefix),
        Dir::Forward,
        options,
        |k, v| match Meta::decode(v.to_vec()) {
            Some(m) if m.is_expired(now) => true,
            Some(m) => visit(k, format::user_key(k), &m),
            None => true,
        },
    )?)
}

/// A random live key of the current database, or `None` when it has none.
///
/// # Errors
/// The engine's error.
pub fn random_key(txn: &mut Txn<'_>, seed: u64) -> Result<Option<Vec<u8>>> {
    let prefix = format::meta_prefix(txn.physical());
    let mut start = prefix.to_vec();
    start.extend_from_slice(&(seed as u16).to_be_bytes());
    let mut found = None;
    walk(txn, Some(start), |_, k, _| {
        found = Some(k.to_vec());
        false
    })?;
    if found.is_none() {
        walk(txn, None, |_, k, _| {
            found = Some(k.to_vec());
            false
        })?;
    }
    Ok(found)
}

/// SWAPDB: swaps logical databases `a` and `b` (the caller holds the keyspace exclusively).
/// Commits at once: the map changes with the record that persists it.
///
/// # Errors
/// The engine's error.
pub fn swap_dbs(txn: &mut Txn<'_>, a: u8, b: u8) -> Result<()> {
    if a == b {
        return Ok(());
    }
    let store = txn.store();
    let now = txn.now_ms();
    let (pa, pb) = (store.physical(a), store.physical(b));
    // A watched key is modified when it lives in either database: it disappears or appears.
    for (db, key) in store
        .watches
        .keys_in(a)
        .into_iter()
        .map(|k| (a, k))
        .chain(store.watches.keys_in(b).into_iter().map(|k| (b, k)))
    {
        let mut live = false;
        for physical in [pa, pb] {
            live |= txn
                .meta_even_expired_in(physical, &key)?
                .is_some_and(|m| !m.is_expired(now));
        }
        if live {
            txn.touch_in(db, &key, false);
        }
    }
    let mut map = store.db_map();
    map.swap(usize::from(a), usize::from(b));
    txn.put(format::DB_MAP_KEY.to_vec(), map.to_vec());
    txn.commit()?;
    store.set_db_map(map);
    let current = txn.db();
    txn.select(current);
    Ok(())
}

/// Keys deleted per commit by a flush: bounds the batch a flush holds in memory.
pub const FLUSH_CHUNK: usize = 10_000;

/// FLUSHDB: deletes every key of the current database. Commits every [`FLUSH_CHUNK`] keys (it
/// runs alone: the caller holds the keyspace exclusively).
///
/// # Errors
/// The engine's error.
pub fn flush_db(txn: &mut Txn<'_>) -> Result<()> {
    touch_watched_existing(txn)?;
    let db = txn.physical();
    let others_empty = (0..format::DATABASES as u8)
        .filter(|&d| d != db)
        .all(|d| txn.db_size(d) == 0);
    if others_empty {
        // Everything there is belongs to this database: one pass over the whole keyspace
        // deletes it, orphans included.
        return flush_everything(txn);
    }
    loop {
        let mut chunk = Vec::new();
        txn.scan_prefix(&format::meta_prefix(db), Dir::Forward, |k, v| {
            if let Some(m) = Meta::decode(v.to_vec()) {
                chunk.push((format::user_key(k).to_vec(), m));
            }
            chunk.len() < FLUSH_CHUNK
        })?;
        if chunk.is_empty() {
            return Ok(());
        }
        for (key, meta) in &chunk {
            delete(txn, key, meta)?;
        }
        txn.commit()?;
    }
}

/// FLUSHALL: deletes every key of every database, with one pass over the keyspace.
///
/// # Errors
/// The engine's error.
pub fn flush_all(txn: &mut Txn<'_>) -> Result<()> {
    let from = txn.db();
    for db in 0..format::DATABASES as u8 {
        txn.select(db);
        touch_watched_existing(txn)?;
    }
    txn.select(from);
    flush_everything(txn)
}

/// Touches the watched keys of the current database that exist (expired ones count as deleted:
/// no change for a watcher that saw them expired).
fn touch_watched_existing(txn: &mut Txn<'_>) -> Result<()> {
    let db = txn.physical();
    for key in txn.store().watches.keys_in(txn.db()) {
        if txn.meta_even_expired_in(db, &key)?.is_some() {
            txn.touch(&key, true);
        }
    }
    Ok(())
}

fn flush_everything(txn: &mut Txn<'_>) -> Result<()> {
    for db in 0..format::DATABASES as u8 {
        let n = txn.db_size(db);
        txn.count(db, -(n as i64));
    }
    // Store records (`\0...`) sort first and are kept.
    let mut lo = Bound::Included(vec![1u8]);
    loop {
        let mut chunk = Vec::new();
        txn.scan(lo.clone(), Bound::Unbounded, Dir::Forward, |k, _| {
            chunk.push(k.to_vec());
            chunk.len() < FLUSH_CHUNK
        })?;
        let Some(last) = chunk.last().cloned() else {
            break;
        };
        for k in chunk {
            txn.delete(k);
        }
        txn.commit()?;
        lo = Bound::Excluded(last);
    }
    txn.commit()?;
    Ok(())
}
