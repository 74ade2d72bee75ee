//! Hashes: one engine record per field under the hash's generation; the meta record keeps the
//! field count, so HLEN reads one record and a whole hash is one engine iteration.

use super::format::{self, Kind, Meta};
use super::{keys, sample, strings, Dir, Error, Result, Txn};
use bytes::Bytes;
use rustc_hash::FxHashSet;

/// Redis's text for HINCRBY on a field that is not an integer.
pub const NOT_INTEGER: &str = "ERR hash value is not an integer";
/// Redis's text for HINCRBYFLOAT on a field that is not a float.
pub const NOT_FLOAT: &str = "ERR hash value is not a float";

/// The live hash at `key` for a read.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn meta(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Meta>> {
    keys::typed(txn, key, Kind::Hash)
}

/// The value of `field`.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get(txn: &mut Txn<'_>, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>> {
    match meta(txn, key)? {
        Some(m) => Ok(txn.get(&format::field_key(m.generation, field))?),
        None => Ok(None),
    }
}

/// The values of `fields` (one engine `multi_get`).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get_many(txn: &mut Txn<'_>, key: &[u8], fields: &[Bytes]) -> Result<Vec<Option<Vec<u8>>>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(vec![None; fields.len()]);
    };
    let keys: Vec<Vec<u8>> = fields
        .iter()
        .map(|f| format::field_key(m.generation, f))
        .collect();
    Ok(txn.get_many(&keys)?)
}

/// Every field and value, in field order (one engine iteration).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get_all(txn: &mut Txn<'_>, key: &[u8]) -> Result<Vec<sample::Element>> {
    let mut pairs = Vec::new();
    if let Some(m) = meta(txn, key)? {
        pairs.reserve(m.len as usize);
        let prefix = format::collection_prefix(format::HASH_FIELD, m.generation);
        txn.scan_prefix(&prefix, Dir::Forward, |k, v| {
            pairs.push((format::element_name(k).to_vec(), v.to_vec()));
            true
        })?;
    }
    Ok(pairs)
}

/// The number of fields.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn len(txn: &mut Txn<'_>, key: &[u8]) -> Result<u64> {
    Ok(meta(txn, key)?.map_or(0, |m| m.len))
}

/// The live hash at `key` for a write, or a new empty one (`created`).
fn for_write(txn: &mut Txn<'_>, key: &[u8]) -> Result<(Meta, bool)> {
    match keys::typed_write(txn, key, Kind::Hash)? {
        Some(m) => Ok((m, false)),
        None => {
            let generation = txn.new_generation();
            Ok((Meta::collection(Kind::Hash, generation), true))
        }
    }
}

/// HSET: sets each field/value of `pairs` (flat: field, value, ...); returns how many fields
/// are new.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn set(txn: &mut Txn<'_>, key: &[u8], pairs: &[Bytes]) -> Result<u64> {
    let (mut m, created) = for_write(txn, key)?;
    let keys: Vec<Vec<u8>> = pairs
        .chunks_exact(2)
        .map(|p| format::field_key(m.generation, &p[0]))
        .collect();
    let mut added = 0u64;
    if created {
        let mut seen = FxHashSet::default();
        for k in &keys {
            added += u64::from(seen.insert(k.as_slice()));
        }
    } else {
        let existing = txn.get_many(&keys)?;
        let mut seen = FxHashSet::default();
        for (k, old) in keys.iter().zip(&existing) {
            if seen.insert(k.as_slice()) && old.is_none() {
                added += 1;
            }
        }
    }
    for (k, p) in keys.into_iter().zip(pairs.chunks_exact(2)) {
        txn.put(k, p[1].clone());
    }
    m.len += added;
    keys::store_collection(txn, key, &m, created);
    if !created && added == 0 {
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
    let (mut m, created) = for_write(txn, key)?;
    let fk = format::field_key(m.generation, field);
    if !created && txn.contains(&fk)? {
        return Ok(false);
    }
    txn.put(fk, value.clone());
    m.len += 1;
    keys::store_collection(txn, key, &m, created);
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

/// HINCRBY: adds `delta` to the integer in `field` (0 when absent); returns the new value.
///
/// # Errors
/// [`Error::WrongType`]; [`NOT_INTEGER`]; overflow; the engine's error.
pub fn incr_by(txn: &mut Txn<'_>, key: &[u8], field: &[u8], delta: i64) -> Result<i64> {
    let (m, created) = for_write(txn, key)?;
    let fk = format::field_key(m.generation, field);
    let old = if created { None } else { txn.get(&fk)? };
    let current = match &old {
        Some(v) => strings::parse_i64(v).ok_or_else(|| Error::reply(NOT_INTEGER))?,
        None => 0,
    };
    let new = current
        .checked_add(delta)
        .ok_or_else(|| Error::reply("ERR increment or decrement would overflow"))?;
    put_field(
        txn,
        key,
        m,
        created,
        fk,
        old.is_none(),
        new.to_string().into_bytes(),
    );
    Ok(new)
}

/// HINCRBYFLOAT: adds `delta` to the number in `field`; returns the new value as stored.
///
/// # Errors
/// [`Error::WrongType`]; [`NOT_FLOAT`]; a NaN or infinite result; the engine's error.
pub fn incr_by_float(txn: &mut Txn<'_>, key: &[u8], field: &[u8], delta: f64) -> Result<Vec<u8>> {
    let (m, created) = for_write(txn, key)?;
    let fk = format::field_key(m.generation, field);
    let old = if created { None } else { txn.get(&fk)? };
    let current = match &old {
        Some(v) => strings::parse_float_value(v).ok_or_else(|| Error::reply(NOT_FLOAT))?,
        None => 0.0,
    };
    let text = strings::add_floats(current, delta)?;
    put_field(txn, key, m, created, fk, old.is_none(), text.clone());
    Ok(text)
}

fn put_field(
    txn: &mut Txn<'_>,
    key: &[u8],
    mut m: Meta,
    created: bool,
    field_key: Vec<u8>,
    new_field: bool,
    value: Vec<u8>,
) {
    txn.put(field_key, value);
    if new_field {
        m.len += 1;
        keys::store_collection(txn, key, &m, created);
    } else {
        txn.touch(key, false);
    }
}

/// HRANDFIELD: `count` random fields with their values (see [`sample`] for the count rules).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn random(
    txn: &mut Txn<'_>,
    key: &[u8],
    count: i64,
    seed: u64,
) -> Result<Vec<sample::Element>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(Vec::new());
    };
    let prefix = format::collection_prefix(format::HASH_FIELD, m.generation);
    sample::pick(txn, &prefix, m.len, count, seed)
}

/// HSCAN: up to `count` fields from `from` (inclusive; `None`: the first), and where the next
/// call resumes (`None`: done).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn scan(
    txn: &mut Txn<'_>,
    key: &[u8],
    from: Option<&[u8]>,
    count: usize,
) -> Result<sample::Page<sample::Element>> {
    let Some(m) = meta(txn, key)? else {
        return Ok((Vec::new(), None));
    };
    let prefix = format::collection_prefix(format::HASH_FIELD, m.generation);
    sample::scan(txn, &prefix, from, count)
}
