//! Helpers shared by the integration tests: a deterministic generator and the blob record size.
// Each test binary uses its own subset of these.
#![allow(dead_code)]

/// A small deterministic generator (splitmix64), so a failing seed reproduces exactly.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn varint_len(mut n: u64) -> u64 {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// The size of a blob record per docs/format/blob.md: crc32c, two varint lengths, key, value.
pub fn record_size(key_len: usize, value_len: usize) -> u64 {
    4 + varint_len(key_len as u64)
        + varint_len(value_len as u64)
        + key_len as u64
        + value_len as u64
}
