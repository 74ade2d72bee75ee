//! Internal keys: the user key followed by an 8-byte trailer.
//!
//! ```text
//! internal key = user_key ++ fixed64_le((seqno << 8) | kind)
//! ```
//!
//! Internal keys sort by user key ascending, then by trailer descending, so the newest version of a
//! key comes first. A lookup at snapshot `s` seeks to `(key, s, KIND_FOR_SEEK)` and takes the first
//! entry with the same user key.
//!
//! Invariants: sequence numbers fit in 56 bits; kind tags are on-disk format.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::cmp::Ordering;

/// A sequence number: the position of a write in the history of the database.
pub type SeqNo = u64;

/// The largest sequence number that fits in a trailer.
pub const MAX_SEQNO: SeqNo = (1 << 56) - 1;

/// Bytes in the trailer that follows the user key in an internal key.
pub const TRAILER_LEN: usize = 8;

/// What an entry in the LSM tree holds.
///
/// Do not change: on-disk format. Tags are stored in WAL records, SSTs and MANIFEST edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted.
    Deletion = 0,
    /// An inline value.
    Value = 1,
    /// A reference to a value stored in a blob file (key-value separation).
    BlobRef = 2,
}

/// The kind used in seek targets: larger than every real kind, so that a target with sequence
/// number `s` sorts before every entry of the same user key with sequence number `s`.
pub(crate) const KIND_FOR_SEEK: u8 = 0xff;

impl ValueKind {
    /// Decodes a stored tag. Returns `None` for an unknown tag (corruption or a newer format).
    pub fn from_u8(tag: u8) -> Option<ValueKind> {
        match tag {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::BlobRef),
            _ => None,
        }
    }
}

/// Packs a sequence number and a kind tag into a trailer.
#[inline]
pub(crate) fn pack_trailer(seq: SeqNo, kind: u8) -> u64 {
    debug_assert!(seq <= MAX_SEQNO);
    (seq << 8) | kind as u64
}

/// Appends the internal key for `(user_key, seq, kind)` to `buf`.
#[inline]
pub(crate) fn append_internal_key(buf: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: u8) {
    buf.extend_from_slice(user_key);
    buf.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Builds an owned internal key.
#[inline]
#[cfg(test)]
pub(crate) fn internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut buf = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut buf, user_key, seq, kind as u8);
    buf
}

/// Builds the seek target that finds the newest version of `user_key` visible at `seq`.
#[inline]
pub(crate) fn seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    let mut buf = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut buf, user_key, seq, KIND_FOR_SEEK);
    buf
}

/// An internal key split into its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
}

/// Splits an internal key read from storage. Returns `None` when it is too short or its kind tag is
/// unknown; callers turn that into a `Corruption` error naming the file.
#[inline]
pub(crate) fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let (user_key, trailer) = ikey.split_at(split);
    let trailer = u64::from_le_bytes(trailer.try_into().ok()?);
    let kind = ValueKind::from_u8((trailer & 0xff) as u8)?;
    Some(ParsedKey {
        user_key,
        seq: trailer >> 8,
        kind,
    })
}

/// The user-key part of an internal key. Keys shorter than a trailer yield an empty user key; such
/// keys are rejected by the decoders before they reach comparisons.
#[inline]
pub(crate) fn user_key(ikey: &[u8]) -> &[u8] {
    ikey.get(..ikey.len().saturating_sub(TRAILER_LEN))
        .unwrap_or_default()
}

/// The trailer of an internal key (0 for a key shorter than a trailer).
#[inline]
pub(crate) fn trailer(ikey: &[u8]) -> u64 {
    match ikey.len().checked_sub(TRAILER_LEN) {
        Some(split) => ikey
            .get(split..)
            .and_then(|t| t.try_into().ok())
            .map_or(0, u64::from_le_bytes),
        None => 0,
    }
}

/// Orders internal keys: user key ascending, then trailer descending (newest first).
#[inline]
pub(crate) fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn newer_versions_sort_first() {
        let old = internal_key(b"k", 5, ValueKind::Value);
        let new = internal_key(b"k", 9, ValueKind::Deletion);
        assert_eq!(compare_internal(&new, &old), Ordering::Less);
        let seek = seek_key(b"k", 9);
        assert_eq!(compare_internal(&seek, &new), Ordering::Less);
        assert_eq!(
            compare_internal(&internal_key(b"j", 1, ValueKind::Value), &old),
            Ordering::Less
        );
    }

    #[test]
    fn parse_rejects_short_keys_and_unknown_kinds() {
        assert!(parse_internal_key(b"short").is_none());
        let mut k = internal_key(b"k", 1, ValueKind::Value);
        let n = k.len();
        k[n - 8] = 7;
        assert!(parse_internal_key(&k).is_none());
    }

    proptest! {
        #[test]
        fn internal_key_round_trips(key in proptest::collection::vec(any::<u8>(), 0..40),
                                    seq in 0..=MAX_SEQNO, kind in 0u8..3) {
            let kind = ValueKind::from_u8(kind).unwrap();
            let ikey = internal_key(&key, seq, kind);
            let parsed = parse_internal_key(&ikey).unwrap();
            prop_assert_eq!(parsed, ParsedKey { user_key: &key, seq, kind });
        }

        #[test]
        fn comparison_matches_tuple_order(a in proptest::collection::vec(any::<u8>(), 0..6), sa in 0u64..50,
                                          b in proptest::collection::vec(any::<u8>(), 0..6), sb in 0u64..50) {
            let ka = internal_key(&a, sa, ValueKind::Value);
            let kb = internal_key(&b, sb, ValueKind::Value);
            let expected = a.cmp(&b).then(sb.cmp(&sa));
            prop_assert_eq!(compare_internal(&ka, &kb), expected);
        }
    }
}
