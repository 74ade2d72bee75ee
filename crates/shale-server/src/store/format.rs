//! The keyspace encoding: how Redis keys, types, expiry, hash fields and sorted-set members are laid
//! out as engine keys and values. This is the only module that knows these byte offsets;
//! `docs/design/0005-server.md` draws them.
//!
//! Engine keys (do not change: on-disk format):
//! - `m` + key hash (2 bytes BE, [`key_hash`]) + user key -> meta record: `type u8 | expire_at_ms u64 BE (0 = none) | body`, where the
//!   body of a string is its value and the body of a hash or sorted set is
//!   `generation u64 BE | length u64 BE`.
//! - `h` + generation + field -> the field's value.
//! - `z` + generation + member -> the member's score (f64 bits, BE).
//! - `s` + generation + ordered score + member -> empty: the score-ordered index of a sorted set.
//! - `x` + expire_at_ms u64 BE + user key -> empty: the expiry index the background sweep reads.
//!   Entries may be stale (a later write changed the key's expiry); the sweep checks the meta
//!   record before acting and drops stale entries.
//! - `\0gen` -> the highest collection generation handed out (u64 BE).
//!
//! A collection's fields live under its generation, not under its name, so a collection that is
//! overwritten without being read first (a plain `SET`) leaves fields no meta record points to:
//! invisible garbage, never resurrected by a later collection of the same name, which gets a new
//! generation.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

/// Prefix of meta records. Do not change: on-disk format.
pub const META: u8 = b'm';
/// Prefix of hash fields. Do not change: on-disk format.
pub const HASH_FIELD: u8 = b'h';
/// Prefix of sorted-set member -> score records. Do not change: on-disk format.
pub const ZSET_MEMBER: u8 = b'z';
/// Prefix of the score-ordered sorted-set index. Do not change: on-disk format.
pub const ZSET_SCORE: u8 = b's';
/// Prefix of the expiry index. Do not change: on-disk format.
pub const EXPIRY: u8 = b'x';
/// The generation high-water mark. Do not change: on-disk format.
pub const GENERATION_KEY: &[u8] = b"\0gen";

/// Bytes before the body of a meta record: type and expiry.
pub const META_HEADER_LEN: usize = 9;
const COLLECTION_BODY_LEN: usize = 16;

/// The type of a key. Tag values are on-disk format: never renumber them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (also integers: `INCR` works on strings).
    String = 1,
    /// A hash of fields.
    Hash = 2,
    /// A sorted set.
    ZSet = 3,
}

impl Kind {
    /// The name `TYPE` answers with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::ZSet => "zset",
        }
    }

    fn from_tag(tag: u8) -> Option<Kind> {
        match tag {
            1 => Some(Kind::String),
            2 => Some(Kind::Hash),
            3 => Some(Kind::ZSet),
            _ => None,
        }
    }
}

/// A decoded meta record. A string's value stays in `raw` (no copy): see [`Meta::string_value`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The key's type.
    pub kind: Kind,
    /// Milliseconds since the Unix epoch at which the key expires; 0 when it never does.
    pub expire_at: u64,
    /// For a hash or sorted set: the generation its fields live under.
    pub generation: u64,
    /// For a hash or sorted set: the number of fields or members.
    pub len: u64,
    raw: Vec<u8>,
}

impl Meta {
    /// Decodes a meta record; `None` when the bytes are damaged.
    pub fn decode(raw: Vec<u8>) -> Option<Meta> {
        let kind = Kind::from_tag(*raw.first()?)?;
        let expire_at = u64::from_be_bytes(raw.get(1..META_HEADER_LEN)?.try_into().ok()?);
        let (generation, len) = match kind {
            Kind::String => (0, 0),
            Kind::Hash | Kind::ZSet => {
                let body = raw.get(META_HEADER_LEN..META_HEADER_LEN + COLLECTION_BODY_LEN)?;
                let (generation, len) = body.split_at_checked(8)?;
                (read_u64(generation)?, read_u64(len)?)
            }
        };
        Some(Meta {
            kind,
            expire_at,
            generation,
            len,
            raw,
        })
    }

    /// A string's value (empty for other types).
    pub fn string_value(&self) -> &[u8] {
        match self.kind {
            Kind::String => self.raw.get(META_HEADER_LEN..).unwrap_or_default(),
            _ => &[],
        }
    }

    /// Takes a string's value out of the record.
    pub fn into_string_value(mut self) -> Vec<u8> {
        self.raw.drain(..META_HEADER_LEN.min(self.raw.len()));
        self.raw
    }

    /// Whether the key has expired at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    /// Re-encodes this record with another expiry.
    pub fn with_expiry(&self, expire_at: u64) -> Vec<u8> {
        let mut raw = self.raw.clone();
        if let Some(field) = raw.get_mut(1..META_HEADER_LEN) {
            field.copy_from_slice(&expire_at.to_be_bytes());
        }
        raw
    }
}

fn read_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// The meta record of a string.
pub fn string_meta(value: &[u8], expire_at: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_HEADER_LEN + value.len());
    out.push(Kind::String as u8);
    out.extend_from_slice(&expire_at.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// The meta record of a hash or sorted set.
pub fn collection_meta(kind: Kind, expire_at: u64, generation: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_HEADER_LEN + COLLECTION_BODY_LEN);
    out.push(kind as u8);
    out.extend_from_slice(&expire_at.to_be_bytes());
    out.extend_from_slice(&generation.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out
}

/// Bytes of the key hash between the meta prefix and the user key.
pub const KEY_HASH_LEN: usize = 2;

/// The engine key of `key`'s meta record: `m`, a 2-byte hash of the key, the key. The hash
/// spreads meta records evenly over the engine's key space, so FloDB's membuffer (whose bucket
/// is a key's leading bits) absorbs writes of keys that share a long prefix (`key:000...`) in
/// all its buckets rather than a few. Keys therefore iterate in hash order, not name order.
pub fn meta_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + KEY_HASH_LEN + key.len());
    out.push(META);
    out.extend_from_slice(&key_hash(key).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The 16-bit hash of a user key in its meta record's engine key (FNV-1a, folded).
/// Do not change: on-disk format.
pub fn key_hash(key: &[u8]) -> u16 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in key {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h ^ (h >> 16)) as u16
}

/// The user key of a meta record's engine key.
pub fn user_key(meta_key: &[u8]) -> &[u8] {
    meta_key.get(1 + KEY_HASH_LEN..).unwrap_or_default()
}

/// The engine key of a hash field.
pub fn field_key(generation: u64, field: &[u8]) -> Vec<u8> {
    prefixed(HASH_FIELD, &generation.to_be_bytes(), field)
}

/// The engine key of a sorted-set member's score.
pub fn member_key(generation: u64, member: &[u8]) -> Vec<u8> {
    prefixed(ZSET_MEMBER, &generation.to_be_bytes(), member)
}

/// The engine key of a sorted-set index entry.
pub fn score_key(generation: u64, score: f64, member: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(17 + member.len());
    out.push(ZSET_SCORE);
    out.extend_from_slice(&generation.to_be_bytes());
    out.extend_from_slice(&ordered_score(score));
    out.extend_from_slice(member);
    out
}

/// The prefix of every engine key of a collection's fields (`tag` is [`HASH_FIELD`],
/// [`ZSET_MEMBER`] or [`ZSET_SCORE`]).
pub fn collection_prefix(tag: u8, generation: u64) -> Vec<u8> {
    prefixed(tag, &generation.to_be_bytes(), &[])
}

/// Length of [`collection_prefix`].
pub const COLLECTION_PREFIX_LEN: usize = 9;

/// The score and member of an index entry's engine key.
pub fn split_score_key(key: &[u8]) -> Option<(f64, &[u8])> {
    let score = key.get(COLLECTION_PREFIX_LEN..COLLECTION_PREFIX_LEN + 8)?;
    let member = key.get(COLLECTION_PREFIX_LEN + 8..)?;
    Some((score_from_ordered(score.try_into().ok()?), member))
}

/// The engine key of an expiry index entry.
pub fn expiry_key(expire_at: u64, key: &[u8]) -> Vec<u8> {
    prefixed(EXPIRY, &expire_at.to_be_bytes(), key)
}

/// The expiry time and user key of an expiry index entry.
pub fn split_expiry_key(key: &[u8]) -> Option<(u64, &[u8])> {
    let at = read_u64(key.get(1..9)?)?;
    Some((at, key.get(9..)?))
}

/// A score as stored in a member record.
pub fn encode_score(score: f64) -> [u8; 8] {
    score.to_bits().to_be_bytes()
}

/// A score read from a member record; `None` when damaged.
pub fn decode_score(bytes: &[u8]) -> Option<f64> {
    Some(f64::from_bits(read_u64(bytes)?))
}

/// An encoding of a (non-NaN) score whose byte order is the numeric order: positive numbers get
/// their sign bit set, negative numbers have every bit flipped. `-0.0` is stored as `0.0`.
pub fn ordered_score(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    ordered.to_be_bytes()
}

/// The inverse of [`ordered_score`].
pub fn score_from_ordered(bytes: [u8; 8]) -> f64 {
    let ordered = u64::from_be_bytes(bytes);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
}

fn prefixed(tag: u8, middle: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + middle.len() + rest.len());
    out.push(tag);
    out.extend_from_slice(middle);
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_scores_sort_like_numbers() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -1e-300,
            0.0,
            1e-300,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for pair in scores.windows(2) {
            assert!(ordered_score(pair[0]) < ordered_score(pair[1]), "{pair:?}");
        }
        for s in scores {
            assert_eq!(score_from_ordered(ordered_score(s)), s);
        }
        assert_eq!(ordered_score(-0.0), ordered_score(0.0));
    }

    #[test]
    fn meta_records_round_trip() {
        let m = Meta::decode(string_meta(b"value", 42)).unwrap();
        assert_eq!(
            (m.kind, m.expire_at, m.string_value()),
            (Kind::String, 42, &b"value"[..])
        );
        assert_eq!(Meta::decode(m.with_expiry(7)).unwrap().expire_at, 7);
        let c = Meta::decode(collection_meta(Kind::ZSet, 0, 9, 3)).unwrap();
        assert_eq!((c.kind, c.generation, c.len), (Kind::ZSet, 9, 3));
        assert!(Meta::decode(vec![9, 0]).is_none());
        assert!(Meta::decode(vec![2; 12]).is_none());
    }

    #[test]
    fn index_keys_split_back() {
        let k = score_key(5, -3.5, b"member");
        assert_eq!(split_score_key(&k), Some((-3.5, &b"member"[..])));
        let x = expiry_key(99, b"key");
        assert_eq!(split_expiry_key(&x), Some((99, &b"key"[..])));
    }
}
