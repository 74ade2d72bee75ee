//! Serde for a `Vec<u8>` (or a `bytes::Bytes`) as one byte string:
//! `#[serde(with = "crate::byte_string")]`.
//!
//! Serde's own `Vec<u8>` is a sequence of `u8`s: bincode then writes and reads it one byte at a
//! time through the visitor (a follower decoding shipped files and Write entries spent more of
//! its CPU there than anywhere else in user space). As a byte string bincode copies it whole.
//! The bytes bincode writes are the same either way (a `u64` length, then the bytes), so logs,
//! snapshots and connections stay compatible.

use serde::de::{Deserializer, Error, SeqAccess, Visitor};
use serde::Serializer;
use std::fmt;

pub(crate) fn serialize<S: Serializer>(bytes: &impl AsRef<[u8]>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes.as_ref())
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>, T: From<Vec<u8>>>(
    d: D,
) -> Result<T, D::Error> {
    d.deserialize_byte_buf(Bytes).map(T::from)
}

struct Bytes;

impl<'de> Visitor<'de> for Bytes {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    /// Formats that write bytes as a sequence.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(b) = seq.next_element()? {
            out.push(b);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Plain(Vec<u8>);

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Whole(#[serde(with = "crate::byte_string")] Vec<u8>);

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Shared(#[serde(with = "crate::byte_string")] bytes::Bytes);

    #[test]
    fn bincode_writes_the_same_bytes_as_for_a_plain_vector_and_reads_either() {
        for len in [0usize, 1, 255, 4096] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let plain = bincode::serialize(&Plain(data.clone())).unwrap();
            let whole = bincode::serialize(&Whole(data.clone())).unwrap();
            assert_eq!(plain, whole, "{len} bytes");
            let shared = bincode::serialize(&Shared(data.clone().into())).unwrap();
            assert_eq!(plain, shared, "{len} bytes");
            assert_eq!(bincode::deserialize::<Shared>(&plain).unwrap().0, data);
            assert_eq!(bincode::deserialize::<Whole>(&plain).unwrap().0, data);
            assert_eq!(bincode::deserialize::<Plain>(&whole).unwrap().0, data);
        }
        // A length past the end is an error, never a panic or a huge allocation.
        for claimed in [200u64, 1 << 40] {
            let mut bad = bincode::serialize(&Whole(vec![1, 2, 3])).unwrap();
            bad[..8].copy_from_slice(&claimed.to_le_bytes());
            assert!(bincode::deserialize::<Whole>(&bad).is_err());
        }
    }
}
