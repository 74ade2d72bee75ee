//! The bytes of the Raft log's segment files and of the snapshot description file.
//!
//! A file is a sequence of records:
//!
//! ```text
//! record = crc32c: u32 LE | len: u32 LE | kind: u8 | body: len bytes
//! ```
//!
//! The checksum covers `kind` and `body`. Bodies are bincode (see `docs/format/raft-log.md`).
//! Kinds (do not change: on-disk format):
//!
//! | kind | body | meaning on replay |
//! |---|---|---|
//! | 1 | `Entry` | entry at its index; entries at or after that index are replaced |
//! | 2 | `u64` | truncate: entries at or after the index are gone |
//! | 3 | `LogId` | purge: entries at or before it are gone |
//! | 4 | `Option<LogId>` | the committed index |
//! | 5 | `Vote` | the vote |
//! | 6 | snapshot description (in `SNAPSHOT` files only) | |

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

/// Record kinds. Do not change: on-disk format.
pub(crate) const KIND_ENTRY: u8 = 1;
pub(crate) const KIND_TRUNCATE: u8 = 2;
pub(crate) const KIND_PURGE: u8 = 3;
pub(crate) const KIND_COMMITTED: u8 = 4;
pub(crate) const KIND_VOTE: u8 = 5;
pub(crate) const KIND_SNAPSHOT: u8 = 6;

/// Bytes before a record's body.
pub(crate) const HEADER_LEN: usize = 9;

/// The largest body a record may have (an entry is limited far below).
pub(crate) const MAX_BODY: usize = 1 << 30;

/// Appends a record to `out`.
pub(crate) fn put_record(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[kind]), body);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(body);
}

/// Appends a record whose body is `value` in bincode, encoded in place (no buffer of its own).
/// On an error `out` is as it was.
pub(crate) fn put_encoded_record<T: serde::Serialize>(
    out: &mut Vec<u8>,
    kind: u8,
    value: &T,
) -> bincode::Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    if let Err(e) = bincode::serialize_into(&mut *out, value) {
        out.truncate(start);
        return Err(e);
    }
    let body = out.get(start + HEADER_LEN..).unwrap_or_default();
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[kind]), body);
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(&crc.to_le_bytes());
    header.extend_from_slice(&(body.len() as u32).to_le_bytes());
    header.push(kind);
    if let Some(h) = out.get_mut(start..start + HEADER_LEN) {
        h.copy_from_slice(&header);
    }
    Ok(())
}

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Damage {
    /// The file ends inside the record: an interrupted append.
    Torn,
    /// The record's bytes do not match its checksum, or its header is impossible.
    Corrupt(String),
}

/// Reads the record at `*pos` of `data`, advancing `*pos`. `Ok(None)` at the clean end of the
/// data (or at zero fill, which a file system leaves after an interrupted append).
pub(crate) fn next_record<'a>(
    data: &'a [u8],
    pos: &mut usize,
) -> Result<Option<(u8, &'a [u8])>, Damage> {
    let rest = data.get(*pos..).unwrap_or_default();
    if rest.is_empty() {
        return Ok(None);
    }
    let Some(header) = rest.get(..HEADER_LEN) else {
        return if rest.iter().all(|&b| b == 0) {
            Ok(None)
        } else {
            Err(Damage::Torn)
        };
    };
    if header.iter().all(|&b| b == 0) {
        return if rest.iter().all(|&b| b == 0) {
            Ok(None)
        } else {
            Err(Damage::Corrupt(
                "a zero record header followed by data".into(),
            ))
        };
    }
    let [c0, c1, c2, c3, l0, l1, l2, l3, kind] = <[u8; HEADER_LEN]>::try_from(header)
        .map_err(|_| Damage::Corrupt("short record header".into()))?;
    let crc = u32::from_le_bytes([c0, c1, c2, c3]);
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
    if len > MAX_BODY {
        return Err(Damage::Corrupt(format!(
            "record length {len} is impossible"
        )));
    }
    let Some(body) = rest.get(HEADER_LEN..HEADER_LEN.saturating_add(len)) else {
        return Err(Damage::Torn);
    };
    if crc32c::crc32c_append(crc32c::crc32c(&[kind]), body) != crc {
        return Err(Damage::Corrupt("checksum mismatch".into()));
    }
    *pos += HEADER_LEN + len;
    Ok(Some((kind, body)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_record_encoded_in_place_is_the_record_of_its_encoding() {
        let value = (7u64, String::from("entry"), vec![1u8, 2, 3]);
        let mut expected = b"before".to_vec();
        put_record(
            &mut expected,
            KIND_ENTRY,
            &bincode::serialize(&value).unwrap(),
        );
        let mut data = b"before".to_vec();
        put_encoded_record(&mut data, KIND_ENTRY, &value).unwrap();
        assert_eq!(data, expected);
    }

    #[test]
    fn records_round_trip_and_damage_is_told_apart_from_a_torn_tail() {
        let mut data = Vec::new();
        put_record(&mut data, KIND_ENTRY, b"hello");
        put_record(&mut data, KIND_VOTE, b"");
        let whole = data.len();
        let mut pos = 0;
        assert_eq!(
            next_record(&data, &mut pos),
            Ok(Some((KIND_ENTRY, &b"hello"[..])))
        );
        assert_eq!(
            next_record(&data, &mut pos),
            Ok(Some((KIND_VOTE, &b""[..])))
        );
        assert_eq!(next_record(&data, &mut pos), Ok(None));
        for cut in 1..whole {
            let mut pos = 0;
            let mut n = 0;
            let end = loop {
                match next_record(&data[..cut], &mut pos) {
                    Ok(Some(_)) => n += 1,
                    other => break other,
                }
            };
            assert!(n <= 2);
            assert!(
                matches!(end, Ok(None) | Err(Damage::Torn)),
                "cut {cut}: {end:?}"
            );
        }
        let mut zeros = data.clone();
        zeros.extend_from_slice(&[0; 40]);
        let mut pos = 0;
        while next_record(&zeros, &mut pos).unwrap().is_some() {}
        for i in 0..whole {
            let mut bad = data.clone();
            bad[i] ^= 0x40;
            let mut pos = 0;
            let r = (0..3)
                .map(|_| next_record(&bad, &mut pos))
                .find(|r| !matches!(r, Ok(Some(_))));
            assert!(matches!(r, Some(Err(_))), "flip at {i}: {r:?}");
        }
    }
}
