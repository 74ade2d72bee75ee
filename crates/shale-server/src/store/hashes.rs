//! Hashes, in two encodings:
//!
//! - **inline**: a small hash (at most [`INLINE_MAX_FIELDS`] fields and [`INLINE_MAX_BYTES`] of
//!   fields and values) keeps its fields in its meta record, in insertion order, as Redis keeps a
//!   small hash in one listpack. HGETALL, HGET and HLEN are one engine read; HSET is a read and
//!   a write of that one record. A YCSB record (10 fields of 100 bytes) is one such record.
//! - **elements**: one engine record per field under the hash's generation; the meta record keeps
//!   the field count. A whole hash is one engine iteration. A hash moves here for good when it
//!   outgrows the inline limits (as Redis converts a listpack to a hashtable).
//!
//! Every function below takes either encoding.

use super::format::{self, Kind, Meta};
use super::{keys, sample, strings, Error, Result, Txn};
use bytes::Bytes;
use rustc_hash::FxHashSet;

/// Redis's text for HINCRBY on a field that is not an integer.
pub const NOT_INTEGER: &str = "ERR hash value is not an integer";
/// Redis's text for HINCRBYFLOAT on a field that is not a float.
pub const NOT_FLOAT: &str = "ERR hash value is not a float";

/// Most fields of an inline hash (Redis's `hash-max-listpack-entries` default).
pub const INLINE_MAX_FIELDS: usize = 128;
/// Most bytes of fields and values of an inline hash: the meta record is rewritten whole on
/// every change, so this bounds the cost of a one-field update.
pub const INLINE_MAX_BYTES: usize = 8 << 10;

/// The live hash at `key` for a read.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn meta(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Meta>> {
    keys::typed(txn, key, Kind::Hash)
}

fn damaged() -> Error {
    Error::Engine(shale::Error::new(
        shale::ErrorKind::Corruption,
        "damaged inline hash",
    ))
}

/// The fields of an inline hash, owned.
fn inline_fields(m: &Meta) -> Result<Vec<sample::Element>> {
    Ok(m.inline_pairs()
        .ok_or_else(damaged)?
        .into_iter()
        .map(|(f, v)| (f.to_vec(), v.to_vec()))
        .collect())
}

/// The value of `field`.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get(txn: &mut Txn<'_>, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>> {
    match meta(txn, key)? {
        Some(m) if m.inline => Ok(m
            .inline_pairs()
            .ok_or_else(damaged)?
            .into_iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| v.to_vec())),
        Some(m) => Ok(txn.get(&format::field_key(m.generation, field))?),
        None => Ok(None),
    }
}

/// The values of `fields` (one engine `multi_get` for a hash of element records).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get_many(txn: &mut Txn<'_>, key: &[u8], fields: &[Bytes]) -> Result<Vec<Option<Vec<u8>>>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(vec![None; fields.len()]);
    };
    if m.inline {
        let pairs = m.inline_pairs().ok_or_else(damaged)?;
        return Ok(fields
            .iter()
            .map(|want| {
                pairs
                    .iter()
                    .find(|(f, _)| *f == want.as_ref())
                    .map(|(_, v)| v.to_vec())
            })
            .collect());
    }
    let keys: Vec<Vec<u8>> = fields
        .iter()
        .map(|f| format::field_key(m.generation, f))
        .collect();
    Ok(txn.get_many(&keys)?)
}

/// Every field and value: an inline hash in insertion order, a hash of element records in field
/// order (one engine iteration).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get_all(txn: &mut Txn<'_>, key: &[u8]) -> Result<Vec<sample::Element>> {
    match meta(txn, key)? {
        Some(m) if m.inline => inline_fields(&m),
        Some(m) => {
            let prefix = format::collection_prefix(format::HASH_FIELD, m.generation);
            sample::read_all(txn, &prefix)
        }
        None => Ok(Vec::new()),
    }
}

/// The number of fields.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn len(txn: &mut Txn<'_>, key: &[u8]) -> Result<u64> {
    Ok(meta(txn, key)?.map_or(0, |m| m.len))
}

/// Whether `pairs` fit an inline hash.
fn fits_inline(pairs: &[(Vec<u8>, Vec<u8>)]) -> bool {
    pairs.len() <= INLINE_MAX_FIELDS
        && pairs.iter().map(|(f, v)| f.len() + v.len()).sum::<usize>() <= INLINE_MAX_BYTES
}

/// Stages the hash `key` as `pairs` (over its current record `old`, if any): inline when they
/// fit and the hash is not already made of element records, as element records otherwise.
fn store_fields(txn: &mut Txn<'_>, key: &[u8], old: Option<&Meta>, pairs: &[(Vec<u8>, Vec<u8>)]) {
    let expire_at = old.map_or(0, |m| m.expire_at);
    let created = old.is_none();
    if pairs.is_empty() {
        if let Some(old) = old {
            keys::drop_meta(txn, key, old);
        }
        return;
    }
    if old.is_none_or(|m| m.inline) && fits_inline(pairs) {
        let borrowed: Vec<format::Pair<'_>> = pairs
            .iter()
            .map(|(f, v)| (f.as_slice(), v.as_slice()))
            .collect();
        keys::store_meta(
            txn,
            key,
            format::inline_hash_meta(expire_at, &borrowed),
            created,
        );
        return;
    }
    // Out of inline: every field becomes an element record under a new generation.
    let mut m = Meta::collection(Kind::Hash, txn.new_generation());
    m.expire_at = expire_at;
    for (f, v) in pairs {
        txn.put(format::field_key(m.generation, f), v.clone());
    }
    m.len = pairs.len() as u64;
    keys::store_collection(txn, key, &m, created);
}

/// Sets `updates` (field, value) on the inline hash `m` (or a new hash when `m` is `None`):
/// returns how many fields are new. `only_new`: fields that exist are left alone (HSETNX).
fn set_inline(
    txn: &mut Txn<'_>,
    key: &[u8],
    m: Option<&Meta>,
    updates: &[(&[u8], &[u8])],
    only_new: bool,
) -> Result<u64> {
    let mut pairs = match m {
        Some(m) => inline_fields(m)?,
        None => Vec::new(),
    };
    let mut added = 0;
    for (f, v) in updates {
        match pairs.iter_mut().find(|(pf, _)| pf.as_slice() == *f) {
            Some(_) if only_new => {}
            Some((_, pv)) => *pv = v.to_vec(),
            None => {
                pairs.push((f.to_vec(), v.to_vec()));
                added += 1;
            }
        }
    }
    if only_new && added == 0 {
        return Ok(0);
    }
    store_fields(txn, key, m, &pairs);
    Ok(added)
}

/// HSET: sets each field/value of `pairs` (flat: field, value, ...); returns how many fields
/// are new.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn set(txn: &mut Txn<'_>, key: &[u8], pairs: &[Bytes]) -> Result<u64> {
    let existing = keys::typed_write(txn, key, Kind::Hash)?;
    if existing.as_ref().is_none_or(|m| m.inline) {
        let updates: Vec<(&[u8], &[u8])> = pairs
            .chunks_exact(2)
            .map(|p| (p[0].as_ref(), p[1].as_ref()))
            .collect();
        return set_inline(txn, key, existing.as_ref(), &updates, false);
    }
    let Some(mut m) = existing else {
        return Ok(0);
    };
    let keys: Vec<Vec<u8>> = pairs
        .chunks_exact(2)
        .map(|p| format::field_key(m.generation, &p[0]))
        .collect();
    let present = txn.get_many(&keys)?;
    let mut seen = FxHashSet::default();
    let mut added = 0u64;
    for (k, old) in keys.iter().zip(&present) {
        if seen.insert(k.as_slice()) && old.is_none() {
            added += 1;
        }
    }
    for (k, p) in keys.into_iter().zip(pairs.chunks_exact(2)) {
        txn.put(k, p[1].clone());
    }
    m.len += added;
    if added > 0 {
        keys::store_collection(txn, key, &m, false);
    } else {
        // The meta record did not change, but the hash did.
        txn.touch(key, false);
    }
    Ok(added)
}

/// HSETNX: sets `field` only when it does not exist; returns whether it did.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn set_if_absent(txn: &mut Txn<'_>, key: &[u8], field: &[u8], value: &Bytes) -> Result<bool> {
    let existing = keys::typed_write(txn, key, Kind::Hash)?;
    if existing.as_ref().is_none_or(|m| m.inline) {
        let added = set_inline(txn, key, existing.as_ref(), &[(field, value)], true)?;
        return Ok(added == 1);
    }
    let Some(mut m) = existing else {
        return Ok(false);
    };
    let fk = format::field_key(m.generation, field);
    if txn.contains(&fk)? {
        return Ok(false);
    }
    txn.put(fk, value.clone());
    m.len += 1;
    keys::store_collection(txn, key, &m, false);
    Ok(true)
}

/// HDEL: deletes `fields`; returns how many existed. The hash goes with its last field.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn delete(txn: &mut Txn<'_>, key: &[u8], fields: &[Bytes]) -> Result<u64> {
    let Some(mut m) = keys::typed_write(txn, key, Kind::Hash)? else {
        return Ok(0);
    };
    if m.inline {
        let mut pairs = inline_fields(&m)?;
        let before = pairs.len();
        pairs.retain(|(f, _)| !fields.iter().any(|d| d.as_ref() == f.as_slice()));
        let removed = (before - pairs.len()) as u64;
        if removed > 0 {
            store_fields(txn, key, Some(&m), &pairs);
        }
        return Ok(removed);
    }
    let mut removed = 0u64;
    let mut seen = FxHashSet::default();
    for field in fields {
        let fk = format::field_key(m.generation, field);
        if seen.insert(field.clone()) && txn.contains(&fk)? {
            txn.delete(fk);
            removed += 1;
        }
    }
    if removed > 0 {
        m.len = m.len.saturating_sub(removed);
        keys::store_collection(txn, key, &m, false);
    }
    Ok(removed)
}

/// Reads `field` for a read-modify-write and writes `value(old)` back: the shared core of
/// HINCRBY and HINCRBYFLOAT.
fn update_field<T>(
    txn: &mut Txn<'_>,
    key: &[u8],
    field: &[u8],
    value: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, T)>,
) -> Result<T> {
    let existing = keys::typed_write(txn, key, Kind::Hash)?;
    match existing {
        Some(m) if !m.inline => {
            let fk = format::field_key(m.generation, field);
            let old = txn.get(&fk)?;
            let (new, out) = value(old.as_deref())?;
            txn.put(fk, new);
            if old.is_none() {
                let mut m = m;
                m.len += 1;
                keys::store_collection(txn, key, &m, false);
            } else {
                txn.touch(key, false);
            }
            Ok(out)
        }
        m => {
            let pairs = match &m {
                Some(m) => inline_fields(m)?,
                None => Vec::new(),
            };
            let old = pairs
                .iter()
                .find(|(f, _)| f.as_slice() == field)
                .map(|(_, v)| v.as_slice());
            let (new, out) = value(old)?;
            set_inline(txn, key, m.as_ref(), &[(field, &new)], false)?;
            Ok(out)
        }
    }
}

/// HINCRBY: adds `delta` to the integer in `field` (0 when absent); returns the new value.
///
/// # Errors
/// [`Error::WrongType`]; [`NOT_INTEGER`]; overflow; the engine's error.
pub fn incr_by(txn: &mut Txn<'_>, key: &[u8], field: &[u8], delta: i64) -> Result<i64> {
    update_field(txn, key, field, |old| {
        let current = match old {
            Some(v) => strings::parse_i64(v).ok_or_else(|| Error::reply(NOT_INTEGER))?,
            None => 0,
        };
        let new = current
            .checked_add(delta)
            .ok_or_else(|| Error::reply("ERR increment or decrement would overflow"))?;
        Ok((new.to_string().into_bytes(), new))
    })
}

/// HINCRBYFLOAT: adds `delta` to the number in `field`; returns the new value as stored.
///
/// # Errors
/// [`Error::WrongType`]; [`NOT_FLOAT`]; a NaN or infinite result; the engine's error.
pub fn incr_by_float(txn: &mut Txn<'_>, key: &[u8], field: &[u8], delta: f64) -> Result<Vec<u8>> {
    update_field(txn, key, field, |old| {
        let current = match old {
            Some(v) => strings::parse_float_value(v).ok_or_else(|| Error::reply(NOT_FLOAT))?,
            None => 0.0,
        };
        let text = strings::add_floats(current, delta)?;
        Ok((text.clone(), text))
    })
}

/// HRANDFIELD: `count` random fields with their values (see [`sample::pick`] for the count
/// rules).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn random(
    txn: &mut Txn<'_>,
    key: &[u8],
    count: i64,
    seed: u64,
) -> Result<Vec<sample::Element>> {
    match meta(txn, key)? {
        Some(m) if m.inline => Ok(sample::pick_from(inline_fields(&m)?, count, seed)),
        Some(m) => {
            let prefix = format::collection_prefix(format::HASH_FIELD, m.generation);
            sample::pick(txn, &prefix, m.len, count, seed)
        }
        None => Ok(Vec::new()),
    }
}

/// HSCAN: up to `count` fields from `from` (inclusive; `None`: the first), and where the next
/// call resumes (`None`: done). An inline hash is returned whole in one call, as Redis returns
/// a listpack-encoded hash.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn scan(
    txn: &mut Txn<'_>,
    key: &[u8],
    from: Option<&[u8]>,
    count: usize,
) -> Result<sample::Page<sample::Element>> {
    match meta(txn, key)? {
        Some(m) if m.inline => Ok((inline_fields(&m)?, None)),
        Some(m) => {
            let prefix = format::collection_prefix(format::HASH_FIELD, m.generation);
            sample::scan(txn, &prefix, from, count)
        }
        None => Ok((Vec::new(), None)),
    }
}
