//! Strings: the value lives inline in the key's meta record, so a read is one engine read and a
//! write one engine write (plus the read that tells whether the key is new, for the key count).
//!
//! Integers (`INCR`) and floats (`INCRBYFLOAT`) are strings that parse; bit operations work on
//! the bytes.

use super::format::{self, Kind, Meta};
use super::keys;
use super::{Error, Result, Txn};
use bytes::Bytes;

/// Redis's text for a value that is not an integer.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Redis's text for a value that is not a float.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// Redis's text for a string over the size limit.
pub const TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// The value of string `key`: `None` when absent.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Meta>> {
    keys::typed(txn, key, Kind::String)
}

/// When SET writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Condition {
    /// Always.
    #[default]
    Always,
    /// Only when the key does not exist (NX).
    IfAbsent,
    /// Only when the key exists (XX).
    IfPresent,
}

/// How SET treats the key's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expiry {
    /// No expiry (a plain SET clears one).
    #[default]
    None,
    /// Expire at this Unix time in milliseconds.
    At(u64),
    /// Keep the key's current expiry (KEEPTTL).
    Keep,
}

/// What SET did.
#[derive(Debug)]
pub struct SetOutcome {
    /// Whether the value was written.
    pub written: bool,
    /// The old value, when asked for (`get`): `None` when the key was absent.
    pub old: Option<Vec<u8>>,
}

/// SET `key` `value` with its options; `get` asks for the old value (which must be a string).
///
/// # Errors
/// [`Error::WrongType`] when `get` and the key holds another type; the engine's error.
pub fn set(
    txn: &mut Txn<'_>,
    key: &[u8],
    value: &Bytes,
    condition: Condition,
    expiry: Expiry,
    get: bool,
) -> Result<SetOutcome> {
    let old = keys::lookup_write(txn, key)?;
    if get && old.as_ref().is_some_and(|m| m.kind != Kind::String) {
        return Err(Error::WrongType);
    }
    let written = match condition {
        Condition::Always => true,
        Condition::IfAbsent => old.is_none(),
        Condition::IfPresent => old.is_some(),
    };
    let old_value = if get {
        old.as_ref().map(|m| m.string_value().to_vec())
    } else {
        None
    };
    if written {
        let expire_at = match expiry {
            Expiry::None => 0,
            Expiry::At(at) => at,
            Expiry::Keep => old.as_ref().map_or(0, |m| m.expire_at),
        };
        put(txn, key, value.clone(), expire_at, old.as_ref())?;
    }
    Ok(SetOutcome {
        written,
        old: old_value,
    })
}

/// Stages `key = value` expiring at `expire_at` (0: never) over its current record `old`.
///
/// # Errors
/// The engine's error.
pub fn put(
    txn: &mut Txn<'_>,
    key: &[u8],
    value: Bytes,
    expire_at: u64,
    old: Option<&Meta>,
) -> Result<()> {
    let created = keys::clear_for_overwrite(txn, key, old)?;
    keys::store_string(txn, key, value, expire_at, created);
    keys::add_expiry_entry(txn, key, expire_at);
    Ok(())
}

/// MSET: sets every pair.
///
/// # Errors
/// The engine's error.
pub fn set_many(txn: &mut Txn<'_>, pairs: &[Bytes]) -> Result<()> {
    for pair in pairs.chunks_exact(2) {
        let old = keys::lookup_write(txn, &pair[0])?;
        put(txn, &pair[0], pair[1].clone(), 0, old.as_ref())?;
    }
    Ok(())
}

/// MSETNX: sets every pair when none of the keys exists; returns whether it did.
///
/// # Errors
/// The engine's error.
pub fn set_many_if_absent(txn: &mut Txn<'_>, pairs: &[Bytes]) -> Result<bool> {
    for pair in pairs.chunks_exact(2) {
        if keys::lookup_write(txn, &pair[0])?.is_some() {
            return Ok(false);
        }
    }
    for pair in pairs.chunks_exact(2) {
        put(txn, &pair[0], pair[1].clone(), 0, None)?;
    }
    Ok(true)
}

/// GETDEL: the value of `key`, which is deleted.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get_delete(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let Some(meta) = keys::typed_write(txn, key, Kind::String)? else {
        return Ok(None);
    };
    keys::delete(txn, key, &meta)?;
    Ok(Some(meta.into_string_value()))
}

/// GETEX: the value of `key`, whose expiry becomes `expiry` (`Keep`: unchanged; `None`: PERSIST).
/// An expiry in the past deletes the key.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn get_set_expiry(txn: &mut Txn<'_>, key: &[u8], expiry: Expiry) -> Result<Option<Vec<u8>>> {
    let Some(meta) = keys::typed_write(txn, key, Kind::String)? else {
        return Ok(None);
    };
    match expiry {
        Expiry::Keep => {}
        Expiry::None if meta.expire_at == 0 => {}
        Expiry::None => keys::set_expiry(txn, key, &meta, 0),
        Expiry::At(at) if at <= txn.now_ms() => keys::delete(txn, key, &meta)?,
        Expiry::At(at) => keys::set_expiry(txn, key, &meta, at),
    }
    Ok(Some(meta.into_string_value()))
}

/// Rewrites the value of an existing or new string keeping its expiry.
fn rewrite(txn: &mut Txn<'_>, key: &[u8], value: &[u8], old: Option<&Meta>) {
    let expire_at = old.map_or(0, |m| m.expire_at);
    keys::store_meta(
        txn,
        key,
        format::string_meta(value, expire_at),
        old.is_none(),
    );
}

/// INCRBY: adds `delta` to the integer at `key` (0 when absent); returns the new value.
///
/// # Errors
/// [`Error::WrongType`]; [`NOT_INTEGER`]; overflow; the engine's error.
pub fn incr_by(txn: &mut Txn<'_>, key: &[u8], delta: i64) -> Result<i64> {
    let old = keys::typed_write(txn, key, Kind::String)?;
    let current = match &old {
        Some(m) => parse_i64(m.string_value()).ok_or_else(|| Error::reply(NOT_INTEGER))?,
        None => 0,
    };
    let new = current
        .checked_add(delta)
        .ok_or_else(|| Error::reply("ERR increment or decrement would overflow"))?;
    rewrite(txn, key, new.to_string().as_bytes(), old.as_ref());
    Ok(new)
}

/// INCRBYFLOAT: adds `delta` to the number at `key`; returns the new value as stored.
///
/// # Errors
/// [`Error::WrongType`]; [`NOT_FLOAT`]; a NaN or infinite result; the engine's error.
pub fn incr_by_float(txn: &mut Txn<'_>, key: &[u8], delta: f64) -> Result<Vec<u8>> {
    let old = keys::typed_write(txn, key, Kind::String)?;
    let current = match &old {
        Some(m) => parse_float_value(m.string_value()).ok_or_else(|| Error::reply(NOT_FLOAT))?,
        None => 0.0,
    };
    let text = add_floats(current, delta)?;
    rewrite(txn, key, &text, old.as_ref());
    Ok(text)
}

/// `current + delta` as Redis stores an INCRBYFLOAT result.
///
/// # Errors
/// `ERR increment would produce NaN or Infinity`.
pub fn add_floats(current: f64, delta: f64) -> Result<Vec<u8>> {
    let sum = current + delta;
    if !sum.is_finite() {
        return Err(Error::reply("ERR increment would produce NaN or Infinity"));
    }
    Ok(format_float(sum).into_bytes())
}

/// A float as Redis writes INCRBYFLOAT results: the shortest decimal that reads back the same,
/// never an exponent, no negative zero.
pub fn format_float(v: f64) -> String {
    let v = if v == 0.0 { 0.0 } else { v };
    format!("{v}")
}

/// Parses a stored number for INCRBYFLOAT: a decimal (exponent allowed), no spaces, finite.
pub fn parse_float_value(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.trim() != text || text.contains(['x', 'X']) {
        return None;
    }
    let v: f64 = text.parse().ok()?;
    v.is_finite().then_some(v)
}

/// Parses a signed 64-bit integer as Redis's `string2ll` does: optional `-`, digits, no spaces,
/// no `+`, no leading zeros (except `0` itself).
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    let (neg, digits) = match arg.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, arg),
    };
    if digits.is_empty() || digits.len() > 20 || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    if neg && digits == b"0" {
        return None;
    }
    let mut v: i128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(d - b'0');
    }
    i64::try_from(if neg { -v } else { v }).ok()
}

/// APPEND: appends `tail`; returns the new length. `limit` is the largest string allowed.
///
/// # Errors
/// [`Error::WrongType`]; [`TOO_BIG`]; the engine's error.
pub fn append(txn: &mut Txn<'_>, key: &[u8], tail: &[u8], limit: usize) -> Result<usize> {
    let old = keys::typed_write(txn, key, Kind::String)?;
    let mut value = old
        .as_ref()
        .map(|m| m.string_value().to_vec())
        .unwrap_or_default();
    if value.len().saturating_add(tail.len()) > limit {
        return Err(Error::reply(TOO_BIG));
    }
    value.extend_from_slice(tail);
    rewrite(txn, key, &value, old.as_ref());
    Ok(value.len())
}

/// SETRANGE: overwrites the value from `offset` (zero-padding a shorter one); returns the new
/// length. An empty `patch` changes nothing (and creates no key).
///
/// # Errors
/// [`Error::WrongType`]; [`TOO_BIG`]; the engine's error.
pub fn set_range(
    txn: &mut Txn<'_>,
    key: &[u8],
    offset: usize,
    patch: &[u8],
    limit: usize,
) -> Result<usize> {
    let old = keys::typed_write(txn, key, Kind::String)?;
    let mut value = old
        .as_ref()
        .map(|m| m.string_value().to_vec())
        .unwrap_or_default();
    if patch.is_empty() {
        return Ok(value.len());
    }
    let end = offset
        .checked_add(patch.len())
        .filter(|&e| e <= limit)
        .ok_or_else(|| Error::reply(TOO_BIG))?;
    if value.len() < end {
        value.resize(end, 0);
    }
    value[offset..end].copy_from_slice(patch);
    rewrite(txn, key, &value, old.as_ref());
    Ok(value.len())
}

/// SETBIT: sets bit `offset` (most significant bit of the first byte is 0) to `on`; returns the
/// bit's old value.
///
/// # Errors
/// [`Error::WrongType`]; [`TOO_BIG`]; the engine's error.
pub fn set_bit(txn: &mut Txn<'_>, key: &[u8], offset: u64, on: bool, limit: usize) -> Result<bool> {
    let old = keys::typed_write(txn, key, Kind::String)?;
    let mut value = old
        .as_ref()
        .map(|m| m.string_value().to_vec())
        .unwrap_or_default();
    let byte = usize::try_from(offset / 8)
        .ok()
        .filter(|&b| b < limit)
        .ok_or_else(|| Error::reply(TOO_BIG))?;
    if value.len() <= byte {
        value.resize(byte + 1, 0);
    }
    let mask = 0x80u8 >> (offset % 8);
    let was = value[byte] & mask != 0;
    if on {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    rewrite(txn, key, &value, old.as_ref());
    Ok(was)
}

/// The bit at `offset` of `value` (0 past the end).
pub fn bit_at(value: &[u8], offset: u64) -> bool {
    usize::try_from(offset / 8)
        .ok()
        .and_then(|b| value.get(b))
        .is_some_and(|byte| byte & (0x80u8 >> (offset % 8)) != 0)
}

/// Resolves Redis's inclusive, possibly negative `start..=end` over a sequence of `len`: the
/// first index and the count, or `None` when the range is empty.
pub fn resolve_range(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let e = if end < 0 { len + end } else { end.min(len - 1) };
    if s > e || s >= len {
        return None;
    }
    Some((s as u64, (e - s + 1) as u64))
}

/// Resolves GETRANGE's (and BITCOUNT's) inclusive, possibly negative `start..=end` over `len`
/// bytes: unlike a list range, a negative end clamps to the first byte.
pub fn resolve_string_range(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let norm = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (s, e) = (norm(start), norm(end).min(len - 1));
    (s <= e).then(|| (s as u64, (e - s + 1) as u64))
}

/// The set bits of `value` between bytes `start` and `end` (inclusive, negative from the end);
/// `bits` makes them bit offsets instead (BITCOUNT ... BIT).
pub fn bit_count(value: &[u8], range: Option<(i64, i64, bool)>) -> u64 {
    let Some((start, end, bits)) = range else {
        return value.iter().map(|b| u64::from(b.count_ones())).sum();
    };
    let total = if bits {
        value.len() as u64 * 8
    } else {
        value.len() as u64
    };
    let Some((first, count)) = resolve_string_range(start, end, total) else {
        return 0;
    };
    if bits {
        (first..first + count).filter(|&i| bit_at(value, i)).count() as u64
    } else {
        value[first as usize..(first + count) as usize]
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum()
    }
}
