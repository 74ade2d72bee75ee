//! DUMP and RESTORE: a key's value as a self-checking byte string, and back.
//!
//! The payload is Shale's own (Redis's is an RDB fragment): a payload restores into Shale, not
//! into Redis. Layout (`docs/format/keyspace.md`; do not change: clients keep payloads):
//!
//! ```text
//! kind u8 (format::Kind) | count u64 LE | element* | version u16 LE | crc32c u32 LE
//! element = len u32 LE | bytes           (string: one; list, set: one each)
//!         | len u32 LE | bytes | len u32 LE | bytes    (hash: field, value; zset: member, score)
//! ```
//!
//! A zset score is its f64 bits, little-endian, as an 8-byte element. The checksum covers every
//! byte before it. A payload whose version or checksum does not match, or whose bytes do not
//! decode, is refused: a bad payload never panics and never writes.

// Decodes bytes from the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use super::format::{self, Kind};
use super::{hashes, keys, lists, sets, strings, zsets, Dir, Error, Result, Txn};
use bytes::Bytes;

/// The payload version this module writes and reads.
pub const DUMP_VERSION: u16 = 1;

/// Bytes after the elements: version and checksum.
const TRAILER_LEN: usize = 6;

/// A decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    String(Vec<u8>),
    /// A hash's fields and values.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A sorted set's members and scores.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set's members.
    Set(Vec<Vec<u8>>),
}

/// DUMP: the payload of `key`, or `None` when it is absent.
///
/// # Errors
/// The engine's error.
pub fn dump(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let Some(meta) = keys::lookup(txn, key)? else {
        return Ok(None);
    };
    let value = match meta.kind {
        Kind::String => Value::String(meta.into_string_value()),
        Kind::Hash => Value::Hash(hashes::get_all(txn, key)?),
        Kind::ZSet => Value::ZSet(zsets::range_by_rank(txn, key, 0, -1, false)?),
        Kind::List => Value::List(lists::range(txn, key, 0, -1)?),
        Kind::Set => {
            let prefix = format::collection_prefix(format::SET_MEMBER, meta.generation);
            let mut members = Vec::new();
            txn.scan_prefix(&prefix, Dir::Forward, |k, _| {
                members.push(format::element_name(k).to_vec());
                true
            })?;
            Value::Set(members)
        }
    };
    Ok(Some(encode(&value)))
}

/// Encodes `value` as a payload.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let put = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    let (kind, count) = match value {
        Value::String(_) => (Kind::String, 1),
        Value::Hash(p) => (Kind::Hash, p.len()),
        Value::ZSet(p) => (Kind::ZSet, p.len()),
        Value::List(v) => (Kind::List, v.len()),
        Value::Set(v) => (Kind::Set, v.len()),
    };
    out.push(kind as u8);
    out.extend_from_slice(&(count as u64).to_le_bytes());
    match value {
        Value::String(v) => put(&mut out, v),
        Value::Hash(pairs) => {
            for (f, v) in pairs {
                put(&mut out, f);
                put(&mut out, v);
            }
        }
        Value::ZSet(pairs) => {
            for (m, s) in pairs {
                put(&mut out, m);
                put(&mut out, &s.to_bits().to_le_bytes());
            }
        }
        Value::List(items) | Value::Set(items) => {
            for v in items {
                put(&mut out, v);
            }
        }
    }
    out.extend_from_slice(&DUMP_VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why a payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadPayload {
    /// The version or the checksum does not match.
    VersionOrChecksum,
    /// The bytes do not decode.
    Format,
}

/// Decodes a payload.
///
/// # Errors
/// [`BadPayload`].
pub fn decode(payload: &[u8]) -> std::result::Result<Value, BadPayload> {
    let body_len = payload
        .len()
        .checked_sub(TRAILER_LEN)
        .ok_or(BadPayload::VersionOrChecksum)?;
    let (body, trailer) = payload.split_at(body_len);
    let (version, crc) = trailer.split_at(2);
    let version = u16::from_le_bytes(version.try_into().map_err(|_| BadPayload::Format)?);
    let crc = u32::from_le_bytes(crc.try_into().map_err(|_| BadPayload::Format)?);
    let checked = payload
        .get(..body_len + 2)
        .ok_or(BadPayload::VersionOrChecksum)?;
    if version != DUMP_VERSION || crc32c::crc32c(checked) != crc {
        return Err(BadPayload::VersionOrChecksum);
    }
    let mut r = Reader(body);
    let kind = r.byte()?;
    let count = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| BadPayload::Format)?);
    // Every element takes at least 4 bytes: a count beyond that is damage, not a huge value.
    if count > (body.len() as u64) / 4 + 1 {
        return Err(BadPayload::Format);
    }
    let n = count as usize;
    let value = match kind {
        k if k == Kind::String as u8 && n == 1 => Value::String(r.element()?),
        k if k == Kind::Hash as u8 => Value::Hash(
            (0..n)
                .map(|_| Ok((r.element()?, r.element()?)))
                .collect::<std::result::Result<_, BadPayload>>()?,
        ),
        k if k == Kind::ZSet as u8 => Value::ZSet(
            (0..n)
                .map(|_| {
                    let m = r.element()?;
                    let bits: [u8; 8] = r.element()?.try_into().map_err(|_| BadPayload::Format)?;
                    let score = f64::from_bits(u64::from_le_bytes(bits));
                    if score.is_nan() {
                        return Err(BadPayload::Format);
                    }
                    Ok((m, score))
                })
                .collect::<std::result::Result<_, BadPayload>>()?,
        ),
        k if k == Kind::List as u8 => Value::List(
            (0..n)
                .map(|_| r.element())
                .collect::<std::result::Result<_, BadPayload>>()?,
        ),
        k if k == Kind::Set as u8 => Value::Set(
            (0..n)
                .map(|_| r.element())
                .collect::<std::result::Result<_, BadPayload>>()?,
        ),
        _ => return Err(BadPayload::Format),
    };
    if !r.0.is_empty() {
        return Err(BadPayload::Format);
    }
    Ok(value)
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], BadPayload> {
        if self.0.len() < n {
            return Err(BadPayload::Format);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn byte(&mut self) -> std::result::Result<u8, BadPayload> {
        self.take(1)?.first().copied().ok_or(BadPayload::Format)
    }

    fn element(&mut self) -> std::result::Result<Vec<u8>, BadPayload> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| BadPayload::Format)?);
        Ok(self.take(len as usize)?.to_vec())
    }
}

/// RESTORE: creates `key` from `value` expiring at `expire_at` (0: never), replacing an existing
/// key only when `replace`.
///
/// # Errors
/// `BUSYKEY` when the key exists and `replace` is false; the engine's error.
pub fn restore(
    txn: &mut Txn<'_>,
    key: &[u8],
    value: Value,
    expire_at: u64,
    replace: bool,
) -> Result<()> {
    if let Some(old) = keys::lookup_write(txn, key)? {
        if !replace {
            return Err(Error::reply("BUSYKEY Target key name already exists."));
        }
        keys::delete(txn, key, &old)?;
    }
    if expire_at != 0 && expire_at <= txn.now_ms() {
        return Ok(());
    }
    match value {
        Value::String(v) => strings::put(txn, key, Bytes::from(v), 0, None)?,
        Value::Hash(pairs) => {
            let flat: Vec<Bytes> = pairs
                .into_iter()
                .flat_map(|(f, v)| [Bytes::from(f), Bytes::from(v)])
                .collect();
            if !flat.is_empty() {
                hashes::set(txn, key, &flat)?;
            }
        }
        Value::ZSet(members) => {
            zsets::store(txn, key, &members)?;
        }
        Value::List(items) => {
            let items: Vec<Bytes> = items.into_iter().map(Bytes::from).collect();
            if !items.is_empty() {
                lists::push(txn, key, &items, lists::End::Right, false)?;
            }
        }
        Value::Set(members) => {
            sets::store(txn, key, &members)?;
        }
    }
    if expire_at != 0 {
        if let Some(meta) = keys::lookup_write(txn, key)? {
            keys::set_expiry(txn, key, &meta, expire_at);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_damage_is_refused() {
        let values = [
            Value::String(b"v".to_vec()),
            Value::Hash(vec![(b"f".to_vec(), b"1".to_vec())]),
            Value::ZSet(vec![(b"m".to_vec(), -2.5), (b"n".to_vec(), f64::INFINITY)]),
            Value::List(vec![b"a".to_vec(), Vec::new()]),
            Value::Set(vec![]),
        ];
        for v in values {
            let p = encode(&v);
            assert_eq!(decode(&p), Ok(v));
            for i in 0..p.len() {
                let mut bad = p.clone();
                bad[i] ^= 0x40;
                assert!(decode(&bad).is_err(), "flipped byte {i} accepted");
            }
            assert!(decode(&p[..p.len() - 1]).is_err());
        }
        assert!(decode(b"").is_err());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = decode(&bytes);
        }
    }
}
