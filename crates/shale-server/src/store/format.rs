//! The keyspace encoding: how Redis keys, types, databases, expiry and the elements of hashes,
//! sorted sets, lists and sets are laid out as engine keys and values. This is the only module
//! that knows these byte offsets; `docs/format/keyspace.md` draws them.
//!
//! Engine keys (do not change: on-disk format, version [`FORMAT_VERSION`]):
//! - `m` + db u8 + key hash u16 BE ([`key_hash`]) + user key -> meta record:
//!   `type u8 | expire_at_ms u64 BE (0 = none) | body`. A string's body is its value; a hash's,
//!   sorted set's or set's is `generation u64 BE | length u64 BE`; a list's is
//!   `generation | length | head u64 BE` (the position of its first element). A small hash keeps
//!   its fields in its meta record instead (type [`INLINE_HASH_TAG`]): the body is
//!   `count u32 BE | (len u32 BE field | len u32 BE value)*`, in insertion order.
//! - `h` + generation + field -> the field's value.
//! - `z` + generation + member -> the member's score (f64 bits, BE).
//! - `s` + generation + ordered score (8 bytes) + member -> empty: the score-ordered index.
//! - `l` + generation + position u64 BE -> a list element; positions `head..head + length`.
//! - `e` + generation + member -> empty: a set member.
//! - `x` + expire_at_ms u64 BE + db u8 + user key -> empty: the expiry index the background
//!   sweep reads. Entries may be stale (a later write changed the key's expiry); the sweep checks
//!   the meta record before acting and drops stale entries.
//! - `\0fmt` -> the format version (u32 BE). `\0gen` -> the generation counter (u64 BE).
//!   `\0dbs` -> 16 bytes: the physical database of each logical one (SWAPDB swaps two).
//!   `\0cnt` + physical db u8 -> the number of keys of that database (u64 BE).
//!
//! `db` in engine keys is the *physical* database; SELECT names a logical one, mapped through
//! `\0dbs`, so SWAPDB rewrites one record.
//!
//! A collection's elements live under its generation, not under its name: renaming or moving a
//! collection rewrites one meta record, and a collection deleted in pieces can never be
//! resurrected by a later one of the same name, which gets a new generation. A generation is a
//! counter passed through a bijective mixer ([`generation_of`]), so generations are unique and
//! spread evenly over their 64 bits: the FloDB membuffer takes its bucket from the bits after the
//! first two key bytes, and a collection's elements then share one bucket (a scan of the
//! collection drains one bucket) while different collections spread over all of them.

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
/// Prefix of list elements. Do not change: on-disk format.
pub const LIST_ITEM: u8 = b'l';
/// Prefix of set members. Do not change: on-disk format.
pub const SET_MEMBER: u8 = b'e';
/// Prefix of the expiry index. Do not change: on-disk format.
pub const EXPIRY: u8 = b'x';
/// The format version record. Do not change: on-disk format.
pub const FORMAT_KEY: &[u8] = b"\0fmt";
/// The generation counter. Do not change: on-disk format.
pub const GENERATION_KEY: &[u8] = b"\0gen";
/// The logical -> physical database map. Do not change: on-disk format.
pub const DB_MAP_KEY: &[u8] = b"\0dbs";
/// Prefix of the per-database key counts. Do not change: on-disk format.
pub const COUNT_PREFIX: &[u8] = b"\0cnt";

/// The encoding this module writes. Version 0 (no `\0fmt` record) had no databases: meta keys
/// were `m` + hash + key and expiry entries `x` + time + key; [`super::migrate`] rewrites it.
pub const FORMAT_VERSION: u32 = 2;

/// Number of databases (SELECT 0 to 15).
pub const DATABASES: usize = 16;

/// The type byte of a hash whose fields are inline in its meta record. Do not change: on-disk
/// format.
pub const INLINE_HASH_TAG: u8 = 6;

/// Bytes before the body of a meta record: type and expiry.
pub const META_HEADER_LEN: usize = 9;
/// Bytes of a meta key before the user key: tag, db, key hash.
pub const META_KEY_PREFIX_LEN: usize = 4;
/// Length of [`collection_prefix`]: tag and generation.
pub const COLLECTION_PREFIX_LEN: usize = 9;

/// The type of a key. Tag values are on-disk format: never renumber them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (also integers: `INCR` works on strings).
    String = 1,
    /// A hash of fields.
    Hash = 2,
    /// A sorted set.
    ZSet = 3,
    /// A list.
    List = 4,
    /// A set.
    Set = 5,
}

impl Kind {
    /// The name `TYPE` answers with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::ZSet => "zset",
            Kind::List => "list",
            Kind::Set => "set",
        }
    }

    fn from_tag(tag: u8) -> Option<Kind> {
        match tag {
            1 => Some(Kind::String),
            2 => Some(Kind::Hash),
            3 => Some(Kind::ZSet),
            4 => Some(Kind::List),
            5 => Some(Kind::Set),
            _ => None,
        }
    }

    /// Bytes of a meta body for this kind (a string's is its value: 0 here).
    fn body_len(self) -> usize {
        match self {
            Kind::String => 0,
            Kind::Hash | Kind::ZSet | Kind::Set => 16,
            Kind::List => 24,
        }
    }

    /// The prefix tags of this kind's element records (none for a string).
    pub fn element_tags(self) -> &'static [u8] {
        match self {
            Kind::String => &[],
            Kind::Hash => &[HASH_FIELD],
            Kind::ZSet => &[ZSET_MEMBER, ZSET_SCORE],
            Kind::List => &[LIST_ITEM],
            Kind::Set => &[SET_MEMBER],
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
    /// For a collection: the generation its elements live under.
    pub generation: u64,
    /// For a collection: the number of elements.
    pub len: u64,
    /// For a list: the position of its first element.
    pub head: u64,
    /// For a hash: its fields are inline in this record ([`Meta::inline_pairs`]), not element
    /// records.
    pub inline: bool,
    raw: Vec<u8>,
}

/// A field and its value.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

impl Meta {
    /// Decodes a meta record; `None` when the bytes are damaged.
    pub fn decode(raw: Vec<u8>) -> Option<Meta> {
        let tag = *raw.first()?;
        let expire_at = read_u64(raw.get(1..META_HEADER_LEN)?)?;
        if tag == INLINE_HASH_TAG {
            let count = raw.get(META_HEADER_LEN..META_HEADER_LEN + 4)?;
            let len = u64::from(u32::from_be_bytes(count.try_into().ok()?));
            let meta = Meta {
                kind: Kind::Hash,
                expire_at,
                generation: 0,
                len,
                head: 0,
                inline: true,
                raw,
            };
            // Checked once here, so readers of the pairs can trust their framing.
            return (meta.inline_pairs()?.len() as u64 == len).then_some(meta);
        }
        let kind = Kind::from_tag(tag)?;
        let (mut generation, mut len, mut head) = (0, 0, 0);
        if kind != Kind::String {
            let body = raw.get(META_HEADER_LEN..META_HEADER_LEN + kind.body_len())?;
            generation = read_u64(body.get(..8)?)?;
            len = read_u64(body.get(8..16)?)?;
            if kind == Kind::List {
                head = read_u64(body.get(16..24)?)?;
            }
        }
        Some(Meta {
            kind,
            expire_at,
            generation,
            len,
            head,
            inline: false,
            raw,
        })
    }

    /// The fields of an inline hash, in insertion order (`None` for anything else, or damage).
    pub fn inline_pairs(&self) -> Option<Vec<Pair<'_>>> {
        if !self.inline {
            return None;
        }
        let mut rest = self.raw.get(META_HEADER_LEN + 4..)?;
        let mut out = Vec::new();
        fn take<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
            let (len, tail) = rest.split_at_checked(4)?;
            let len = u32::from_be_bytes(len.try_into().ok()?) as usize;
            let (item, tail) = tail.split_at_checked(len)?;
            *rest = tail;
            Some(item)
        }
        while !rest.is_empty() {
            let f = take(&mut rest)?;
            let v = take(&mut rest)?;
            out.push((f, v));
        }
        Some(out)
    }

    /// A new collection's meta (not yet encoded).
    pub fn collection(kind: Kind, generation: u64) -> Meta {
        Meta {
            kind,
            expire_at: 0,
            generation,
            len: 0,
            head: LIST_START,
            inline: false,
            raw: Vec::new(),
        }
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

    /// The record's bytes, re-encoded from the fields (a string and an inline hash keep their
    /// body).
    pub fn encode(&self) -> Vec<u8> {
        if self.inline {
            let mut raw = self.raw.clone();
            if let Some(at) = raw.get_mut(1..META_HEADER_LEN) {
                at.copy_from_slice(&self.expire_at.to_be_bytes());
            }
            return raw;
        }
        match self.kind {
            Kind::String => string_meta(self.string_value(), self.expire_at),
            kind => {
                let mut out = Vec::with_capacity(META_HEADER_LEN + kind.body_len());
                out.push(kind as u8);
                out.extend_from_slice(&self.expire_at.to_be_bytes());
                out.extend_from_slice(&self.generation.to_be_bytes());
                out.extend_from_slice(&self.len.to_be_bytes());
                if kind == Kind::List {
                    out.extend_from_slice(&self.head.to_be_bytes());
                }
                out
            }
        }
    }
}

fn read_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// The meta record of a string.
pub fn string_meta(value: &[u8], expire_at: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_HEADER_LEN + value.len());
    out.extend_from_slice(&string_meta_header(expire_at));
    out.extend_from_slice(value);
    out
}

/// The header of a string's meta record: the record is this header followed by the value.
pub fn string_meta_header(expire_at: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_HEADER_LEN);
    out.push(Kind::String as u8);
    out.extend_from_slice(&expire_at.to_be_bytes());
    out
}

/// The meta record of an inline hash of `pairs`.
pub fn inline_hash_meta(expire_at: u64, pairs: &[Pair<'_>]) -> Vec<u8> {
    let body: usize = pairs.iter().map(|(f, v)| 8 + f.len() + v.len()).sum();
    let mut out = Vec::with_capacity(META_HEADER_LEN + 4 + body);
    out.push(INLINE_HASH_TAG);
    out.extend_from_slice(&expire_at.to_be_bytes());
    out.extend_from_slice(&(pairs.len() as u32).to_be_bytes());
    for (f, v) in pairs {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f);
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// The engine key of `key`'s meta record in physical database `db`: `m`, the db, a 2-byte hash
/// of the key, the key. The hash spreads meta records evenly over the engine's key space, so
/// FloDB's membuffer (whose bucket is taken after the first two key bytes) absorbs writes of keys
/// that share a long prefix (`key:000...`) in all its buckets rather than a few. Keys therefore
/// iterate in hash order, not name order.
pub fn meta_key(db: u8, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_KEY_PREFIX_LEN + key.len());
    out.push(META);
    out.push(db);
    out.extend_from_slice(&key_hash(key).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The prefix of every meta key of physical database `db`.
pub fn meta_prefix(db: u8) -> [u8; 2] {
    [META, db]
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
    meta_key.get(META_KEY_PREFIX_LEN..).unwrap_or_default()
}

/// The generation of the `counter`-th collection: a bijective mix of the counter (so distinct
/// counters give distinct generations) that spreads consecutive collections over the key space.
/// Do not change: on-disk format (generations in meta records are kept, not recomputed, but a
/// changed mixer could hand out a generation still in use).
pub fn generation_of(counter: u64) -> u64 {
    // The finalizer of SplitMix64: xor-shifts and odd multiplications, each invertible.
    let mut z = counter;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generation of a collection of `kind` whose meta record is `raw`: `None` for another type,
/// an inline hash (which has no element records) or damaged bytes.
pub fn collection_generation(raw: &[u8], kind: Kind) -> Option<u64> {
    if kind == Kind::String || *raw.first()? != kind as u8 {
        return None;
    }
    read_u64(raw.get(META_HEADER_LEN..META_HEADER_LEN + 8)?)
}

/// The engine key of the record of element `name` of a collection of `kind` (a hash's field, a
/// sorted set's member -> score record, a set's member); `None` for a string or a list, whose
/// elements have no names.
pub fn named_element_key(kind: Kind, generation: u64, name: &[u8]) -> Option<Vec<u8>> {
    let tag = match kind {
        Kind::Hash => HASH_FIELD,
        Kind::ZSet => ZSET_MEMBER,
        Kind::Set => SET_MEMBER,
        Kind::String | Kind::List => return None,
    };
    Some(element_key(tag, generation, name))
}

/// The engine key of a hash field.
pub fn field_key(generation: u64, field: &[u8]) -> Vec<u8> {
    element_key(HASH_FIELD, generation, field)
}

/// The engine key of a sorted-set member's score.
pub fn member_key(generation: u64, member: &[u8]) -> Vec<u8> {
    element_key(ZSET_MEMBER, generation, member)
}

/// The engine key of a set member.
pub fn set_member_key(generation: u64, member: &[u8]) -> Vec<u8> {
    element_key(SET_MEMBER, generation, member)
}

/// The engine key of a sorted-set index entry.
pub fn score_key(generation: u64, score: f64, member: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(COLLECTION_PREFIX_LEN + 8 + member.len());
    out.push(ZSET_SCORE);
    out.extend_from_slice(&generation.to_be_bytes());
    out.extend_from_slice(&ordered_score(score));
    out.extend_from_slice(member);
    out
}

/// The position of the first element of a new list: the middle of the position space, so a list
/// can grow 2^63 elements either way.
pub const LIST_START: u64 = 1 << 63;

/// The engine key of the list element at `position`.
pub fn list_key(generation: u64, position: u64) -> Vec<u8> {
    element_key(LIST_ITEM, generation, &position.to_be_bytes())
}

/// The position in a list element's engine key.
pub fn split_list_key(key: &[u8]) -> Option<u64> {
    read_u64(key.get(COLLECTION_PREFIX_LEN..)?)
}

/// The prefix of every engine key of a collection's elements (`tag` is one of
/// [`Kind::element_tags`]).
pub fn collection_prefix(tag: u8, generation: u64) -> Vec<u8> {
    element_key(tag, generation, &[])
}

/// The field or member of an element key (after [`collection_prefix`]).
pub fn element_name(key: &[u8]) -> &[u8] {
    key.get(COLLECTION_PREFIX_LEN..).unwrap_or_default()
}

/// The score and member of an index entry's engine key.
pub fn split_score_key(key: &[u8]) -> Option<(f64, &[u8])> {
    let score = key.get(COLLECTION_PREFIX_LEN..COLLECTION_PREFIX_LEN + 8)?;
    let member = key.get(COLLECTION_PREFIX_LEN + 8..)?;
    Some((score_from_ordered(score.try_into().ok()?), member))
}

/// The engine key of an expiry index entry.
pub fn expiry_key(expire_at: u64, db: u8, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + key.len());
    out.push(EXPIRY);
    out.extend_from_slice(&expire_at.to_be_bytes());
    out.push(db);
    out.extend_from_slice(key);
    out
}

/// The expiry time, physical db and user key of an expiry index entry.
pub fn split_expiry_key(key: &[u8]) -> Option<(u64, u8, &[u8])> {
    let at = read_u64(key.get(1..9)?)?;
    Some((at, *key.get(9)?, key.get(10..)?))
}

/// The engine key of physical database `db`'s key count.
pub fn count_key(db: u8) -> Vec<u8> {
    let mut out = COUNT_PREFIX.to_vec();
    out.push(db);
    out
}

/// Decodes a u64 record (counts, the generation counter); `None` when damaged.
pub fn decode_u64(bytes: &[u8]) -> Option<u64> {
    read_u64(bytes.get(..8)?)
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

fn element_key(tag: u8, generation: u64, rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(COLLECTION_PREFIX_LEN + rest.len());
    out.push(tag);
    out.extend_from_slice(&generation.to_be_bytes());
    out.extend_from_slice(rest);
    out
}

/// Version 0's layout, read only by the migration.
pub mod v0 {
    /// Bytes of a version-0 meta key before the user key: tag and key hash.
    pub const META_KEY_PREFIX_LEN: usize = 3;

    /// The user key of a version-0 meta key.
    pub fn user_key(meta_key: &[u8]) -> Option<&[u8]> {
        meta_key.get(META_KEY_PREFIX_LEN..)
    }

    /// The expiry time and user key of a version-0 expiry entry (`x` + time + key).
    pub fn split_expiry_key(key: &[u8]) -> Option<(u64, &[u8])> {
        Some((super::read_u64(key.get(1..9)?)?, key.get(9..)?))
    }
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
        assert_eq!(Meta::decode(m.encode()).unwrap(), m);
        let mut c = Meta::collection(Kind::List, 9);
        c.len = 3;
        c.head = 77;
        c.expire_at = 5;
        let d = Meta::decode(c.encode()).unwrap();
        assert_eq!(
            (d.kind, d.generation, d.len, d.head, d.expire_at),
            (Kind::List, 9, 3, 77, 5)
        );
        let mut z = Meta::collection(Kind::ZSet, 4);
        z.len = 2;
        let d = Meta::decode(z.encode()).unwrap();
        assert_eq!((d.kind, d.generation, d.len), (Kind::ZSet, 4, 2));
        assert!(Meta::decode(vec![9, 0]).is_none());
        assert!(Meta::decode(vec![2; 12]).is_none());
        assert!(Meta::decode(vec![4; 30]).is_none());
    }

    #[test]
    fn inline_hashes_round_trip_and_damage_is_refused() {
        let raw = inline_hash_meta(5, &[(b"f", b"v"), (b"", b"long value")]);
        let m = Meta::decode(raw.clone()).unwrap();
        assert_eq!(
            (m.kind, m.inline, m.len, m.expire_at),
            (Kind::Hash, true, 2, 5)
        );
        assert_eq!(
            m.inline_pairs().unwrap(),
            vec![(&b"f"[..], &b"v"[..]), (&b""[..], &b"long value"[..])]
        );
        let mut later = m.clone();
        later.expire_at = 9;
        assert_eq!(Meta::decode(later.encode()).unwrap().expire_at, 9);
        for cut in META_HEADER_LEN..raw.len() {
            assert!(Meta::decode(raw[..cut].to_vec()).is_none(), "cut at {cut}");
        }
    }

    #[test]
    fn element_keys_split_back() {
        let k = score_key(5, -3.5, b"member");
        assert_eq!(split_score_key(&k), Some((-3.5, &b"member"[..])));
        let x = expiry_key(99, 3, b"key");
        assert_eq!(split_expiry_key(&x), Some((99, 3, &b"key"[..])));
        let l = list_key(7, LIST_START + 2);
        assert_eq!(split_list_key(&l), Some(LIST_START + 2));
        assert_eq!(element_name(&field_key(1, b"f")), b"f");
        assert_eq!(user_key(&meta_key(2, b"abc")), b"abc");
    }

    #[test]
    fn list_positions_sort_in_list_order() {
        let a = list_key(1, LIST_START - 1);
        let b = list_key(1, LIST_START);
        let c = list_key(1, LIST_START + 1);
        assert!(a < b && b < c);
    }

    #[test]
    fn generations_are_distinct_and_spread() {
        let gens: std::collections::HashSet<u64> = (0..10_000).map(generation_of).collect();
        assert_eq!(gens.len(), 10_000);
        // Consecutive counters land in different top bytes most of the time.
        let tops: std::collections::HashSet<u8> = (1000..1256)
            .map(|c| (generation_of(c) >> 56) as u8)
            .collect();
        assert!(tops.len() > 128, "{}", tops.len());
    }
}
