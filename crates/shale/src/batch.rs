//! `WriteBatch`: a group of writes applied atomically.
//!
//! The encoded batch is also the payload of a WAL record, so its layout is on-disk format
//! (see `docs/format/wal.md`):
//!
//! ```text
//! batch   = seqno: fixed64_le | count: fixed32_le | entry*
//! entry   = kind: u8 | varint key_len | key | (varint value_len | value)   -- no value for Deletion
//! ```
//!
//! Entry `i` gets sequence number `seqno + i`.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};
use crate::varint::{put_length_prefixed, put_varint64, Reader};

/// Bytes before the first entry: sequence number and count.
pub(crate) const BATCH_HEADER_LEN: usize = 12;

/// A group of puts and deletes applied atomically by [`crate::Db::write`].
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    // INVARIANT: starts with a BATCH_HEADER_LEN header whose count matches the entries that follow.
    rep: Vec<u8>,
}

impl Default for WriteBatch {
    fn default() -> WriteBatch {
        WriteBatch::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("count", &self.len())
            .field("bytes", &self.rep.len())
            .finish()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch {
            rep: vec![0; BATCH_HEADER_LEN],
        }
    }

    /// An empty batch with room for `bytes` more bytes of entries without a reallocation (a
    /// merge of batches whose sizes are known).
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        let mut rep = Vec::with_capacity(BATCH_HEADER_LEN + bytes);
        rep.resize(BATCH_HEADER_LEN, 0);
        WriteBatch { rep }
    }

    /// Adds a put of `key` -> `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut WriteBatch {
        self.push(ValueKind::Value, key.as_ref(), value.as_ref());
        self
    }

    /// Adds a put of `key` -> the concatenation of `parts`, without building that value first (a
    /// header and a large body: the body is copied once, into the batch).
    pub fn put_parts(&mut self, key: impl AsRef<[u8]>, parts: &[&[u8]]) -> &mut WriteBatch {
        let key = key.as_ref();
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.rep.reserve(key.len() + len + 21);
        self.rep.push(ValueKind::Value as u8);
        put_length_prefixed(&mut self.rep, key);
        put_varint64(&mut self.rep, len as u64);
        for part in parts {
            self.rep.extend_from_slice(part);
        }
        let count = self.len() as u32 + 1;
        self.set_header_field(8, count.to_le_bytes());
        self
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut WriteBatch {
        self.push(ValueKind::Deletion, key.as_ref(), &[]);
        self
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_LEN, 0);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.header_field::<4>(8).map_or(0, u32::from_le_bytes) as usize
    }

    /// True when the batch holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size of the encoded batch in bytes.
    pub fn encoded_len(&self) -> usize {
        self.rep.len()
    }

    pub(crate) fn push(&mut self, kind: ValueKind, key: &[u8], value: &[u8]) {
        self.rep.push(kind as u8);
        put_length_prefixed(&mut self.rep, key);
        if kind != ValueKind::Deletion {
            put_length_prefixed(&mut self.rep, value);
        }
        let count = self.len() as u32 + 1;
        self.set_header_field(8, count.to_le_bytes());
    }

    /// The batch's bytes (layout in the module documentation), to carry it elsewhere: a
    /// replication log stores them and gives them back to [`WriteBatch::from_data`].
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// [`WriteBatch::data`], moved out of the batch.
    pub fn into_data(self) -> Vec<u8> {
        self.rep
    }

    /// A batch from bytes that [`WriteBatch::data`] gave (its sequence number is ignored).
    ///
    /// # Errors
    /// `Corruption` when the bytes do not parse or their count does not match their entries.
    pub fn from_data(data: Vec<u8>) -> Result<WriteBatch> {
        WriteBatch::from_bytes(data)
    }

    /// Appends every entry of `other` (used to merge a write group into one WAL record, or many
    /// clients' batches into one log entry).
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(other.entries());
        let count = (self.len() + other.len()) as u32;
        self.set_header_field(8, count.to_le_bytes());
    }

    pub(crate) fn set_seq(&mut self, seq: SeqNo) {
        self.set_header_field(0, seq.to_le_bytes());
    }

    pub(crate) fn seq(&self) -> SeqNo {
        self.header_field::<8>(0).map_or(0, u64::from_le_bytes)
    }

    /// The encoded bytes (the WAL record payload).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.rep
    }

    /// Validates and adopts bytes read from a WAL record.
    ///
    /// # Errors
    /// `Corruption` (without a file name; the caller adds it) when the bytes do not parse or the
    /// count does not match the entries.
    pub(crate) fn from_bytes(rep: Vec<u8>) -> Result<WriteBatch> {
        if rep.len() < BATCH_HEADER_LEN {
            return Err(Error::new(
                crate::ErrorKind::Corruption,
                "write batch shorter than its header",
            ));
        }
        let batch = WriteBatch { rep };
        let mut n = 0usize;
        for entry in batch.iter() {
            entry?;
            n += 1;
        }
        if n != batch.len() {
            return Err(Error::new(
                crate::ErrorKind::Corruption,
                format!(
                    "write batch count {} does not match its {n} entries",
                    batch.len()
                ),
            ));
        }
        Ok(batch)
    }

    /// `N` header bytes from `at` (always there: see the invariant of `rep`).
    fn header_field<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.rep.get(at..at + N).and_then(|b| b.try_into().ok())
    }

    fn set_header_field<const N: usize>(&mut self, at: usize, bytes: [u8; N]) {
        if let Some(field) = self.rep.get_mut(at..at + N) {
            field.copy_from_slice(&bytes);
        }
    }

    /// The encoded entries, after the header.
    fn entries(&self) -> &[u8] {
        self.rep.get(BATCH_HEADER_LEN..).unwrap_or_default()
    }

    /// The entries in order, each as `(kind, key, value)`; deletions have an empty value.
    pub(crate) fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            reader: Reader::new(self.entries()),
        }
    }
}

/// The entries of a batch.
pub(crate) struct BatchIter<'a> {
    reader: Reader<'a>,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(ValueKind, &'a [u8], &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.reader.is_empty() {
            return None;
        }
        let corrupt = |what: &str| {
            Some(Err(Error::new(
                crate::ErrorKind::Corruption,
                format!("write batch: {what}"),
            )))
        };
        let Some(tag) = self.reader.u8() else {
            return corrupt("truncated entry");
        };
        let Some(kind) = ValueKind::from_u8(tag) else {
            return corrupt("unknown entry kind");
        };
        let Some(key) = self.reader.length_prefixed() else {
            return corrupt("truncated key");
        };
        if kind == ValueKind::Deletion {
            return Some(Ok((kind, key, &[])));
        }
        match self.reader.length_prefixed() {
            Some(value) => Some(Ok((kind, key, value))),
            None => {
                self.reader = Reader::new(&[]);
                corrupt("truncated value")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn append_merges_counts_and_entries() {
        let mut a = WriteBatch::new();
        a.put(b"k1", b"v1");
        let mut b = WriteBatch::new();
        b.delete(b"k2").put(b"k3", b"");
        a.append(&b);
        let entries: Vec<_> = a.iter().map(|e| e.unwrap()).collect();
        assert_eq!(a.len(), 3);
        assert_eq!(entries[1], (ValueKind::Deletion, &b"k2"[..], &b""[..]));
    }

    #[test]
    fn put_parts_equals_a_put_of_the_concatenation() {
        let mut a = WriteBatch::new();
        a.put_parts(b"k", &[b"head", b"", b"body"]).delete(b"d");
        let mut b = WriteBatch::new();
        b.put(b"k", b"headbody").delete(b"d");
        assert_eq!(a, b);
    }

    #[test]
    fn from_bytes_rejects_a_wrong_count() {
        let mut a = WriteBatch::new();
        a.put(b"k", b"v");
        let mut bytes = a.as_bytes().to_vec();
        bytes[8] = 2;
        assert!(WriteBatch::from_bytes(bytes).is_err());
    }

    proptest! {
        #[test]
        fn batch_round_trips(ops in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..20),
                                                               proptest::collection::vec(any::<u8>(), 0..50)), 0..20),
                             seq in 0u64..1000) {
            let mut batch = WriteBatch::new();
            for (is_put, k, v) in &ops {
                if *is_put { batch.put(k, v); } else { batch.delete(k); }
            }
            batch.set_seq(seq);
            let decoded = WriteBatch::from_bytes(batch.as_bytes().to_vec()).unwrap();
            prop_assert_eq!(decoded.seq(), seq);
            prop_assert_eq!(decoded.len(), ops.len());
            for ((is_put, k, v), entry) in ops.iter().zip(decoded.iter()) {
                let (kind, key, value) = entry.unwrap();
                prop_assert_eq!(key, &k[..]);
                if *is_put { prop_assert_eq!(kind, ValueKind::Value); prop_assert_eq!(value, &v[..]); }
                else { prop_assert_eq!(kind, ValueKind::Deletion); }
            }
        }

        #[test]
        fn from_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = WriteBatch::from_bytes(data);
        }
    }
}
