//! Keys, deterministic values and the record encoding.
//!
//! **Values are a function of the key.** The bytes of field `f` of key `k` are the first `len`
//! bytes of an endless stream seeded by `(k, f)` ([`fill_value`]). Writers may pick any length;
//! a reader checks what it got against the stream ([`value_matches`]) without knowing which write
//! it sees. This is what `-p verify=true` relies on, and it costs nothing when verification is off.
//! The stream is printable ASCII (94 symbols, as YCSB's random values), so values compress about
//! as YCSB's do.
//!
//! **Records.** A YCSB record has `fieldcount` named fields (`field0`, `field1`, ...). Backends
//! store one value per key, so a record is encoded as:
//!
//! ```text
//! RECORD_FORMAT_TAG (1 byte) | varint field_count | field_count x (varint field_index | varint len | len bytes)
//! ```
//!
//! Field names are implied by their index, which keeps the overhead at 3-5 bytes per field.
//! The tag is part of the stored format: do not change it.

use crate::generator::fnv_hash64;
use crate::rng::mix64;

/// First byte of every encoded record. Do not change: stored in benchmark databases.
pub const RECORD_FORMAT_TAG: u8 = 0xB1;

/// Number of printable ASCII symbols values are drawn from (`'!'..='~'`).
const VALUE_ALPHABET: u64 = 94;
/// First symbol of the value alphabet.
const VALUE_ALPHABET_START: u8 = b'!';

/// Builds a YCSB key: `user` + the key number (FNV-hashed when `hashed`), left-padded with zeros
/// to `zero_padding` digits. Writes into `out` (cleared first) to avoid an allocation per op.
pub fn build_ycsb_key(out: &mut Vec<u8>, key_num: u64, hashed: bool, zero_padding: usize) {
    use std::io::Write;
    let n = if hashed { fnv_hash64(key_num) } else { key_num };
    out.clear();
    out.extend_from_slice(b"user");
    let digits = decimal_digits(n);
    out.extend(std::iter::repeat_n(
        b'0',
        zero_padding.saturating_sub(digits),
    ));
    let _ = write!(out, "{n}");
}

fn decimal_digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// The seed of the value stream of field `field` of `key`.
fn stream_seed(key: &[u8], field: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    mix64(h ^ mix64(field.wrapping_add(0x5851_F42D_4C95_7F2D)))
}

/// The symbols of one step of the value stream: eight bytes from one 64-bit mix.
#[inline]
fn stream_word(state: &mut u64) -> [u8; 8] {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut word = mix64(*state);
    let mut out = [0u8; 8];
    for b in &mut out {
        // Low byte modulo 94: a slight bias towards the first symbols, like YCSB's values.
        *b = VALUE_ALPHABET_START + ((word & 0xff) % VALUE_ALPHABET) as u8;
        word >>= 8;
    }
    out
}

/// Appends the first `len` bytes of the value stream of `(key, field)` to `out`.
pub fn fill_value(out: &mut Vec<u8>, key: &[u8], field: u64, len: usize) {
    let mut state = stream_seed(key, field);
    let start = out.len();
    out.resize(start + len, 0);
    for chunk in out[start..].chunks_mut(8) {
        let word = stream_word(&mut state);
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// Whether `value` is a prefix of the value stream of `(key, field)` (any length).
pub fn value_matches(value: &[u8], key: &[u8], field: u64) -> bool {
    let mut state = stream_seed(key, field);
    value.chunks(8).all(|chunk| {
        let word = stream_word(&mut state);
        chunk == &word[..chunk.len()]
    })
}

/// One field of a decoded record: its index and its bytes (borrowed from the encoded record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// The field number (`fieldN`).
    pub index: u64,
    /// The field's value.
    pub value: &'a [u8],
}

/// Encodes `fields` as a record, appending to `out`.
pub fn encode_record(out: &mut Vec<u8>, fields: &[Field<'_>]) {
    out.push(RECORD_FORMAT_TAG);
    put_varint(out, fields.len() as u64);
    for f in fields {
        put_varint(out, f.index);
        put_varint(out, f.value.len() as u64);
        out.extend_from_slice(f.value);
    }
}

/// Decodes a record. Returns `None` when `bytes` is not a well-formed record (never panics).
pub fn decode_record(bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    let (&tag, mut rest) = bytes.split_first()?;
    if tag != RECORD_FORMAT_TAG {
        return None;
    }
    let count = get_varint(&mut rest)?;
    // Each field takes at least two bytes: refuse counts the input cannot hold.
    if count > (rest.len() as u64) / 2 + 1 {
        return None;
    }
    let mut fields = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let index = get_varint(&mut rest)?;
        let len = usize::try_from(get_varint(&mut rest)?).ok()?;
        let value = rest.get(..len)?;
        rest = &rest[len..];
        fields.push(Field { index, value });
    }
    rest.is_empty().then_some(fields)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(input: &mut &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = input.split_first()?;
        *input = rest;
        v |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ycsb_keys_are_padded_and_optionally_hashed() {
        let mut k = Vec::new();
        build_ycsb_key(&mut k, 42, false, 1);
        assert_eq!(k, b"user42");
        build_ycsb_key(&mut k, 42, false, 6);
        assert_eq!(k, b"user000042");
        build_ycsb_key(&mut k, 0, true, 1);
        assert_eq!(k, b"user12161962213042174405");
    }

    #[test]
    fn values_are_the_stream_of_their_definition() {
        // One mix per eight symbols, low byte first: the definition stored databases rely on.
        let mut state = stream_seed(b"user7", 2);
        let mut want = Vec::new();
        while want.len() < 29 {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut word = mix64(state);
            for _ in 0..8 {
                want.push(VALUE_ALPHABET_START + ((word & 0xff) % VALUE_ALPHABET) as u8);
                word >>= 8;
            }
        }
        want.truncate(29);
        let mut got = b"prefix".to_vec();
        fill_value(&mut got, b"user7", 2, 29);
        assert_eq!(&got[6..], &want[..]);
        assert!(value_matches(&want, b"user7", 2));
        assert!(value_matches(&want[..13], b"user7", 2));
    }

    #[test]
    fn values_are_printable_deterministic_and_prefix_consistent() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        fill_value(&mut a, b"user1", 3, 100);
        fill_value(&mut b, b"user1", 3, 37);
        assert_eq!(&a[..37], &b[..]);
        assert!(a.iter().all(|c| (b'!'..=b'~').contains(c)));
        assert!(value_matches(&a, b"user1", 3));
        assert!(
            !value_matches(&a, b"user1", 4),
            "another field has another stream"
        );
        assert!(
            !value_matches(&a, b"user2", 3),
            "another key has another stream"
        );
        let mut c = a.clone();
        c[50] ^= 1;
        assert!(!value_matches(&c, b"user1", 3));
    }

    #[test]
    fn records_round_trip() {
        let fields = [
            Field {
                index: 0,
                value: b"abc",
            },
            Field {
                index: 9,
                value: &[],
            },
        ];
        let mut buf = Vec::new();
        encode_record(&mut buf, &fields);
        assert_eq!(decode_record(&buf).unwrap(), fields);
    }

    #[test]
    fn malformed_records_decode_to_none_without_panicking() {
        let mut buf = Vec::new();
        encode_record(
            &mut buf,
            &[Field {
                index: 1,
                value: b"hello",
            }],
        );
        for cut in 0..buf.len() {
            assert!(decode_record(&buf[..cut]).is_none(), "cut at {cut}");
        }
        let mut extra = buf.clone();
        extra.push(0);
        assert!(decode_record(&extra).is_none());
        assert!(decode_record(&[
            RECORD_FORMAT_TAG,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff
        ])
        .is_none());
        assert!(decode_record(b"plain value").is_none());
    }
}
