//! [`Bitmap`]: a fixed-length set of record ordinals, with constant-time rank.
//!
//! Two uses: the survivors bitmap of a rewritten blob file (which original ordinals its physical
//! file still holds; the record of ordinal `o` is at index `rank(o)`) and the dead bitmap fed by
//! compaction. Both are a few tens of thousands of bits (a 32 MiB blob file of 1 KiB values),
//! ranked on every blob read and mutated rarely.
//!
//! Design: plain 64-bit words plus one prefix count per 512-bit block (eight words), kept exact at
//! all times. `rank` is one prefix count plus at most eight popcounts, with no lazy state, so it
//! takes `&self` and a shared bitmap needs no lock. `set` and `clear` that flip a bit adjust the
//! prefix counts after their block: O(len / 512), a few dozen additions for a typical file; bulk
//! changes ([`Bitmap::and_not`], [`Bitmap::decode`]) rebuild the counts in one pass.
//!
//! Invariants:
//! - `words.len() == ceil(len / 64)` and the bits at positions `>= len` are zero;
//! - `block_ranks[b]` is the number of set bits in blocks `0..b`, `ones` the number in all.
//!
//! Encoding (in the MANIFEST): `varint64 len`, then `ceil(len / 64)` little-endian `u64` words.
//! Decoding rejects set bits past `len` and never panics.
//!
//! Concurrency: a plain value; `&Bitmap` may be read from many threads.

use crate::varint::{get_varint64, put_varint64};
use std::fmt;

/// Bits per word.
const WORD_BITS: u64 = 64;
/// Words per rank block (512 bits): `rank` does at most this many popcounts.
const BLOCK_WORDS: usize = 8;
/// Bytes per encoded word.
const WORD_BYTES: usize = 8;

/// A fixed-length bitmap over record ordinals with O(1) [`Bitmap::rank`].
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Bitmap {
    len: u64,
    // INVARIANT: ceil(len / 64) words; bits at positions >= len are zero.
    words: Vec<u64>,
    // INVARIANT: block_ranks[b] = set bits in words[..b * BLOCK_WORDS]; one entry per block.
    block_ranks: Vec<u64>,
    // INVARIANT: set bits in all of `words`.
    ones: u64,
}

impl Bitmap {
    /// A bitmap of `len` bits, all set or all clear.
    ///
    /// # Panics
    /// When `len / 8` bytes cannot be allocated (lengths come from record counts, at most
    /// `u32::MAX`).
    pub(crate) fn new(len: u64, all_set: bool) -> Bitmap {
        let n = usize::try_from(len.div_ceil(WORD_BITS)).expect("bitmap length fits memory");
        let mut words = vec![if all_set { u64::MAX } else { 0 }; n];
        clear_tail(&mut words, len);
        Bitmap::from_words(len, words)
    }

    /// Builds the rank index over `words` (whose tail past `len` is already clear).
    fn from_words(len: u64, words: Vec<u64>) -> Bitmap {
        let mut b = Bitmap {
            len,
            words,
            block_ranks: Vec::new(),
            ones: 0,
        };
        b.rebuild_ranks();
        b
    }

    fn rebuild_ranks(&mut self) {
        self.block_ranks.clear();
        let mut total = 0u64;
        for block in self.words.chunks(BLOCK_WORDS) {
            self.block_ranks.push(total);
            total += block.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        }
        self.ones = total;
    }

    /// Number of bits.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// True for a bitmap of no bits.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bit `i`; `false` past the end.
    pub(crate) fn get(&self, i: u64) -> bool {
        self.word_of(i)
            .is_some_and(|(w, bit)| self.words[w] & bit != 0)
    }

    /// Sets bit `i`. Returns true when it changed. Past the end: no change, `false` (callers
    /// check ordinals against the file's count first).
    pub(crate) fn set(&mut self, i: u64) -> bool {
        let Some((w, bit)) = self.word_of(i) else {
            return false;
        };
        if self.words[w] & bit != 0 {
            return false;
        }
        self.words[w] |= bit;
        self.ones += 1;
        for r in &mut self.block_ranks[w / BLOCK_WORDS + 1..] {
            *r += 1;
        }
        true
    }

    /// Clears bit `i`. Returns true when it changed. Past the end: no change, `false`.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    pub(crate) fn clear(&mut self, i: u64) -> bool {
        let Some((w, bit)) = self.word_of(i) else {
            return false;
        };
        if self.words[w] & bit == 0 {
            return false;
        }
        self.words[w] &= !bit;
        self.ones -= 1;
        for r in &mut self.block_ranks[w / BLOCK_WORDS + 1..] {
            *r -= 1;
        }
        true
    }

    /// Number of set bits.
    pub(crate) fn count_ones(&self) -> u64 {
        self.ones
    }

    /// Number of set bits strictly before position `i` (all set bits when `i >= len`). O(1).
    pub(crate) fn rank(&self, i: u64) -> u64 {
        if i >= self.len {
            return self.ones;
        }
        // i < len, so the word and block exist.
        let w = (i / WORD_BITS) as usize;
        let block = w / BLOCK_WORDS;
        let before: u64 = self.words[block * BLOCK_WORDS..w]
            .iter()
            .map(|x| u64::from(x.count_ones()))
            .sum();
        let mask = (1u64 << (i % WORD_BITS)) - 1;
        self.block_ranks[block] + before + u64::from((self.words[w] & mask).count_ones())
    }

    /// The set positions, ascending.
    pub(crate) fn iter_ones(&self) -> Ones<'_> {
        Ones {
            words: &self.words,
            next_word: 0,
            current: 0,
            base: 0,
        }
    }

    /// Clears every bit that is set in `other` (`self &= !other`). Bits of `self` past the end of
    /// `other` are kept.
    pub(crate) fn and_not(&mut self, other: &Bitmap) {
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w &= !o;
        }
        self.rebuild_ranks();
    }

    /// Appends the encoding: `varint64 len`, then the words as little-endian `u64`s.
    pub(crate) fn encode(&self, buf: &mut Vec<u8>) {
        put_varint64(buf, self.len);
        buf.reserve(self.words.len() * WORD_BYTES);
        for w in &self.words {
            buf.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// Decodes a bitmap from the front of `data` and advances `data` past it. `None` (and `data`
    /// unchanged) when the input is truncated or has bits set past the length.
    // Decodes bytes read from disk: a bad byte is `None`, never a panic.
    #[deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    pub(crate) fn decode(data: &mut &[u8]) -> Option<Bitmap> {
        let (len, n) = get_varint64(data)?;
        let rest = data.get(n..)?;
        let word_count = usize::try_from(len.div_ceil(WORD_BITS)).ok()?;
        let body = rest.get(..word_count.checked_mul(WORD_BYTES)?)?;
        let words: Vec<u64> = body
            .chunks_exact(WORD_BYTES)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let mut clean = words.clone();
        clear_tail(&mut clean, len);
        if clean != words {
            return None;
        }
        *data = rest.get(body.len()..)?;
        Some(Bitmap::from_words(len, words))
    }

    fn word_of(&self, i: u64) -> Option<(usize, u64)> {
        if i >= self.len {
            return None;
        }
        Some(((i / WORD_BITS) as usize, 1u64 << (i % WORD_BITS)))
    }
}

/// Clears the bits of `words` at positions `>= len`.
fn clear_tail(words: &mut [u64], len: u64) {
    let used = len % WORD_BITS;
    if used != 0 {
        if let Some(last) = words.last_mut() {
            *last &= (1u64 << used) - 1;
        }
    }
}

impl fmt::Debug for Bitmap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Tens of thousands of bits: show the shape, and the bits only when they are few.
        let mut d = f.debug_struct("Bitmap");
        d.field("len", &self.len).field("ones", &self.ones);
        if self.len <= 256 {
            let bits: String = (0..self.len)
                .map(|i| if self.get(i) { '1' } else { '0' })
                .collect();
            d.field("bits", &bits);
        }
        d.finish()
    }
}

/// Iterator over the set positions of a [`Bitmap`], ascending.
pub(crate) struct Ones<'a> {
    words: &'a [u64],
    next_word: usize,
    // The unvisited set bits of the word before `next_word`.
    current: u64,
    // Position of bit 0 of `current`.
    base: u64,
}

impl Iterator for Ones<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        while self.current == 0 {
            let w = *self.words.get(self.next_word)?;
            self.base = self.next_word as u64 * WORD_BITS;
            self.next_word += 1;
            self.current = w;
        }
        let bit = self.current.trailing_zeros();
        self.current &= self.current - 1;
        Some(self.base + u64::from(bit))
    }
}
