//! Serde for a `Vec<u8>` (or a `bytes::Bytes`) as one byte string:
//! `#[serde(with = "crate::byte_string")]`.
//!
//! Serde's own `Vec<u8>` is a sequence of `u8`s: bincode then writes and reads it one byte at a
//! time through the visitor (a follower decoding shipped files and Write entries spent more of
//! its CPU there than anywhere else in user space). As a byte string bincode copies it whole.
//! The bytes bincode writes are the same either way (a `u64` length, then the bytes), so logs,
//! snapshots and connections stay compatible.
//!
//! [`shared`] is the form for a `Bytes` field: decoded by [`decode_sharing`] from a buffer it is
//! a slice of that buffer, not a copy (a follower's `Write` entries point into the frame they
//! arrived in); decoded from anything else it is copied.

use serde::de::{Deserializer, Error, SeqAccess, Visitor};
use serde::Serializer;
use std::cell::RefCell;
use std::fmt;

thread_local! {
    /// The buffer [`decode_sharing`] decodes on this thread, if any.
    static SOURCE: RefCell<Option<bytes::Bytes>> = const { RefCell::new(None) };
}

/// Decodes `T` from `source` with bincode; [`shared`] fields become slices of `source`.
///
/// # Errors
/// As `bincode::deserialize`.
pub(crate) fn decode_sharing<T: serde::de::DeserializeOwned>(
    source: &bytes::Bytes,
) -> bincode::Result<T> {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            SOURCE.with(|s| s.borrow_mut().take());
        }
    }
    SOURCE.with(|s| *s.borrow_mut() = Some(source.clone()));
    let _clear = Clear;
    bincode::deserialize(source)
}

/// A `Bytes` field as one byte string, shared with the buffer it is decoded from where
/// [`decode_sharing`] decodes it: `#[serde(with = "crate::byte_string::shared")]`.
pub(crate) mod shared {
    use super::{ByteBuf, SOURCE};
    use bytes::Bytes;
    use serde::de::{Deserializer, Error, SeqAccess, Visitor};
    use std::fmt;

    pub(crate) fn serialize<S: serde::Serializer>(bytes: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        super::serialize(bytes, s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        d.deserialize_bytes(Shared)
    }

    struct Shared;

    impl<'de> Visitor<'de> for Shared {
        type Value = Bytes;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_borrowed_bytes<E: Error>(self, v: &'de [u8]) -> Result<Bytes, E> {
            let inside = |source: &Bytes| {
                let range = source.as_ptr_range();
                let v_range = v.as_ptr_range();
                range.start <= v_range.start && v_range.end <= range.end
            };
            Ok(SOURCE.with(|s| match &*s.borrow() {
                Some(source) if !v.is_empty() && inside(source) => source.slice_ref(v),
                _ => Bytes::copy_from_slice(v),
            }))
        }

        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Bytes, E> {
            Ok(Bytes::copy_from_slice(v))
        }

        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
            Ok(Bytes::from(v))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Bytes, A::Error> {
            ByteBuf.visit_seq(seq).map(Bytes::from)
        }
    }
}

pub(crate) fn serialize<S: Serializer>(bytes: &impl AsRef<[u8]>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes.as_ref())
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>, T: From<Vec<u8>>>(
    d: D,
) -> Result<T, D::Error> {
    d.deserialize_byte_buf(ByteBuf).map(T::from)
}

struct ByteBuf;

impl<'de> Visitor<'de> for ByteBuf {
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

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Entry(
        u64,
        #[serde(with = "crate::byte_string::shared")] bytes::Bytes,
        #[serde(with = "crate::byte_string::shared")] bytes::Bytes,
    );

    #[test]
    fn shared_fields_decoded_by_decode_sharing_are_slices_of_the_source() {
        let entry = Entry(9, bytes::Bytes::from_static(b"first"), bytes::Bytes::new());
        let encoded = bincode::serialize(&entry).unwrap();
        // The same bytes as a plain byte vector.
        assert_eq!(
            encoded,
            bincode::serialize(&(9u64, b"first".to_vec(), Vec::<u8>::new())).unwrap()
        );
        let source = bytes::Bytes::from(encoded.clone());
        let shared: Entry = crate::byte_string::decode_sharing(&source).unwrap();
        assert_eq!(shared, entry);
        let range = source.as_ptr_range();
        assert!(range.contains(&shared.1.as_ptr()), "a slice of the source");
        // Decoded any other way, it is a copy; and nothing of the source is left behind.
        let copied: Entry = bincode::deserialize(&encoded).unwrap();
        assert_eq!(copied, entry);
        assert!(!range.contains(&copied.1.as_ptr()));
        let again: Entry = bincode::deserialize(&source).unwrap();
        assert!(!range.contains(&again.1.as_ptr()));
        // Damage is an error, not a panic.
        let mut bad = encoded;
        bad[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(crate::byte_string::decode_sharing::<Entry>(&bytes::Bytes::from(bad)).is_err());
    }
}
