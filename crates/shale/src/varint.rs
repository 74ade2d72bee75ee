//! LEB128 variable-length integers, used inside blocks, batches and version edits.
//!
//! Decoders are total: a truncated or overlong encoding yields `None`, never a panic.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

/// Appends `v` as a varint.
#[inline]
pub(crate) fn put_varint64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends `v` as a varint.
#[inline]
pub(crate) fn put_varint32(buf: &mut Vec<u8>, v: u32) {
    put_varint64(buf, v as u64)
}

/// Decodes a varint from the front of `data`: the value and the bytes it used.
#[inline]
pub(crate) fn get_varint64(data: &[u8]) -> Option<(u64, usize)> {
    let mut result = 0u64;
    for (i, &byte) in data.iter().enumerate().take(10) {
        let bits = (byte & 0x7f) as u64;
        if i == 9 && bits > 1 {
            return None; // would overflow 64 bits
        }
        result |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Decodes a varint that must fit in 32 bits.
#[inline]
pub(crate) fn get_varint32(data: &[u8]) -> Option<(u32, usize)> {
    let (v, n) = get_varint64(data)?;
    Some((u32::try_from(v).ok()?, n))
}

/// The number of bytes `put_varint64(v)` writes.
#[inline]
#[cfg(test)]
pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// A cursor over untrusted bytes. Every read is checked; `None` means the input ended early.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub(crate) fn remaining(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or_default()
    }

    pub(crate) fn varint64(&mut self) -> Option<u64> {
        let (v, n) = get_varint64(self.remaining())?;
        self.pos += n;
        Some(v)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    pub(crate) fn u32_le(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.try_into().ok()?))
    }

    pub(crate) fn u64_le(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// A varint length followed by that many bytes.
    pub(crate) fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint64()?).ok()?;
        self.bytes(n)
    }
}

/// Appends a varint length followed by `data`.
#[inline]
pub(crate) fn put_length_prefixed(buf: &mut Vec<u8>, data: &[u8]) {
    put_varint64(buf, data.len() as u64);
    buf.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_truncated_and_overlong() {
        assert_eq!(get_varint64(&[0x80]), None);
        assert_eq!(get_varint64(&[0xff; 11]), None);
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x7f]), None);
    }

    proptest! {
        #[test]
        fn varint_round_trips(v: u64) {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            prop_assert_eq!(buf.len(), varint_len(v));
            prop_assert_eq!(get_varint64(&buf), Some((v, buf.len())));
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = get_varint64(&data);
            let mut r = Reader::new(&data);
            let _ = r.length_prefixed();
        }
    }
}
