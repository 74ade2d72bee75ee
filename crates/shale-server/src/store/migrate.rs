//! Opening the keyspace: reads the store's own records (format version, database map, key
//! counts, generation counter), initialises them in a new database, and migrates a version-0
//! keyspace (one database, no counts) to the current encoding.
//!
//! The migration rewrites every version-0 meta key (tag, hash, key) and expiry entry (tag, time,
//! key) into database 0 and writes the counts, the map and the version, all in one engine batch:
//! a crash part way leaves the keyspace as it was. Element records (fields, members, scores) are
//! keyed by generation and need no change.

use super::format::{self, DATABASES, FORMAT_VERSION};
use shale::{Db, Error, ErrorKind, WriteBatch, WriteOptions};
use std::ops::Bound;

/// The store's records, read at open.
pub(super) struct State {
    pub generation_counter: u64,
    pub db_map: [u8; DATABASES],
    pub counts: [u64; DATABASES],
}

/// Reads (or creates, or migrates to) the current keyspace encoding.
pub(super) fn open(db: &Db) -> shale::Result<State> {
    match db.get(format::FORMAT_KEY)? {
        Some(v) => {
            if check_version(&v)? == 1 {
                // Version 2 only adds a type (the inline hash): a version-1 keyspace is a valid
                // version-2 one once it says so.
                db.put(format::FORMAT_KEY, FORMAT_VERSION.to_be_bytes())?;
            }
            read_state(db)
        }
        None => {
            let mut batch = WriteBatch::new();
            let empty = db.iter().next().transpose()?.is_none();
            let counts = if empty {
                [0; DATABASES]
            } else {
                migrate_v0(db, &mut batch)?
            };
            write_fresh_records(&mut batch, &counts);
            db.write(batch, &WriteOptions::default())?;
            read_state(db)
        }
    }
}

/// Reads the current encoding's records without writing (a cluster node, whose writes go
/// through its log): a keyspace without records reads as a new one.
///
/// # Errors
/// As [`open`], and `NotSupported` for a keyspace of another version.
pub(super) fn read_current(db: &Db) -> shale::Result<State> {
    if let Some(v) = db.get(format::FORMAT_KEY)? {
        check_version(&v)?;
    }
    read_state(db)
}

/// Whether the keyspace's records (format version first) are written.
pub(super) fn has_records(db: &Db) -> shale::Result<bool> {
    Ok(db.get(format::FORMAT_KEY)?.is_some())
}

/// The keyspace's format version, if this server reads it: the current one, or version 1 (a
/// valid version-2 keyspace, see `format`).
fn check_version(v: &[u8]) -> shale::Result<u32> {
    let version = v
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| damaged("format version"))?;
    if version != FORMAT_VERSION && version != 1 {
        return Err(Error::new(
            ErrorKind::NotSupported,
            format!(
                "the keyspace has format version {version}; this server reads version {FORMAT_VERSION}"
            ),
        ));
    }
    Ok(version)
}

fn identity_map() -> [u8; DATABASES] {
    std::array::from_fn(|i| i as u8)
}

pub(super) fn write_fresh_records(batch: &mut WriteBatch, counts: &[u64; DATABASES]) {
    batch.put(format::DB_MAP_KEY, identity_map());
    for (db, n) in counts.iter().enumerate() {
        batch.put(format::count_key(db as u8), n.to_be_bytes());
    }
    batch.put(format::FORMAT_KEY, FORMAT_VERSION.to_be_bytes());
}

fn read_state(db: &Db) -> shale::Result<State> {
    let generation_counter = match db.get(format::GENERATION_KEY)? {
        Some(v) => format::decode_u64(&v).ok_or_else(|| damaged("generation counter"))?,
        None => 0,
    };
    let db_map = match db.get(format::DB_MAP_KEY)? {
        Some(v) => {
            let map: [u8; DATABASES] = v
                .get(..DATABASES)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| damaged("database map"))?;
            let mut seen = [false; DATABASES];
            for &p in &map {
                let slot = seen
                    .get_mut(usize::from(p))
                    .ok_or_else(|| damaged("database map"))?;
                if std::mem::replace(slot, true) {
                    return Err(damaged("database map"));
                }
            }
            map
        }
        None => identity_map(),
    };
    let mut counts = [0; DATABASES];
    for (db_index, count) in counts.iter_mut().enumerate() {
        if let Some(v) = db.get(format::count_key(db_index as u8))? {
            *count = format::decode_u64(&v).ok_or_else(|| damaged("key count"))?;
        }
    }
    Ok(State {
        generation_counter,
        db_map,
        counts,
    })
}

/// Stages the rewrite of a version-0 keyspace into database 0 in `batch` (see the module
/// documentation); returns the key counts.
fn migrate_v0(db: &Db, batch: &mut WriteBatch) -> shale::Result<[u64; DATABASES]> {
    let mut keys = 0u64;
    // One iteration each: a snapshot that never sees the keys the batch adds.
    let metas = db.range((
        Bound::Included(vec![format::META]),
        Bound::Excluded(vec![format::META + 1]),
    ));
    for item in metas {
        let (k, v) = item?;
        let user = format::v0::user_key(&k).ok_or_else(|| damaged("version-0 meta key"))?;
        batch.put(format::meta_key(0, user), v);
        batch.delete(&k);
        keys += 1;
    }
    let expiring = db.range((
        Bound::Included(vec![format::EXPIRY]),
        Bound::Excluded(vec![format::EXPIRY + 1]),
    ));
    for item in expiring {
        let (k, _) = item?;
        let (at, user) =
            format::v0::split_expiry_key(&k).ok_or_else(|| damaged("version-0 expiry entry"))?;
        batch.put(format::expiry_key(at, 0, user), b"");
        batch.delete(&k);
    }
    let mut counts = [0; DATABASES];
    counts[0] = keys;
    tracing::info!(
        keys,
        "migrating the keyspace to format version {FORMAT_VERSION}"
    );
    Ok(counts)
}

fn damaged(what: &str) -> Error {
    Error::new(
        ErrorKind::Corruption,
        format!("damaged store record: {what}"),
    )
}
