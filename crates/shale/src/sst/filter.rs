//! The table's bloom filter over user keys: a cache-local ("blocked") bloom filter.
//!
//! ```text
//! filter = line * num_lines | num_probes u8        (line = 64 bytes = 512 bits)
//! ```
//! A key's 64-bit xxh3 hash picks one line with its high 32 bits (multiply-shift range
//! reduction) and sets `num_probes` bits inside that line, each chosen by 9 bits of a
//! multiplicative remix of the low 32 bits. All probes of a lookup touch one cache line.
//!
//! Invariants: a key added is always reported as possibly present (no false negatives). The hash,
//! the remix constant and the bit order are on-disk format: do not change them.
//!
//! Concurrency: a decoded [`Filter`] is immutable and read by many threads.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

/// Bytes in one cache line of the filter. Do not change: on-disk format.
const LINE_BYTES: usize = 64;
const LINE_BITS: u32 = (LINE_BYTES * 8) as u32;
/// Multiplier of the probe remix (the 32-bit golden ratio). Do not change: on-disk format.
const PROBE_REMIX: u32 = 0x9e37_79b9;
/// The largest number of probes the builder chooses and the reader accepts.
const MAX_PROBES: u8 = 30;

/// The hash of a user key as the filter uses it. Do not change: on-disk format.
#[inline]
pub(crate) fn filter_hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

/// The number of probes for `bits_per_key`: about `bits_per_key * ln 2`, rounded down, which
/// suits a blocked filter (whose lines are unevenly loaded) better than rounding up.
fn probes_for(bits_per_key: u32) -> u8 {
    ((bits_per_key as f64 * 0.69) as u32).clamp(1, MAX_PROBES as u32) as u8
}

#[inline]
fn line_of(hash: u64, num_lines: usize) -> usize {
    (((hash >> 32) * num_lines as u64) >> 32) as usize
}

/// Builds the filter for the key hashes in `hashes`. Returns an empty vector when
/// `bits_per_key` is 0 or there are no keys (no filter is written).
// An encoder into a buffer it sized: every index is in bounds by construction.
#[allow(clippy::indexing_slicing)]
pub(crate) fn build_filter(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    if bits_per_key == 0 || hashes.is_empty() {
        return Vec::new();
    }
    let total_bits = (hashes.len() as u64).saturating_mul(bits_per_key as u64);
    let num_lines = total_bits.div_ceil(LINE_BITS as u64).max(1) as usize;
    let probes = probes_for(bits_per_key);
    let mut out = vec![0u8; num_lines * LINE_BYTES + 1];
    for &hash in hashes {
        let line = &mut out[line_of(hash, num_lines) * LINE_BYTES..][..LINE_BYTES];
        let mut h = hash as u32;
        for _ in 0..probes {
            h = h.wrapping_mul(PROBE_REMIX);
            let bit = (h >> (32 - 9)) as usize;
            line[bit / 8] |= 1 << (bit % 8);
        }
    }
    out[num_lines * LINE_BYTES] = probes;
    out
}

/// A decoded filter.
#[derive(Debug)]
pub(crate) struct Filter {
    data: Vec<u8>,
    // INVARIANT: data.len() == num_lines * LINE_BYTES + 1, num_lines >= 1, 1 <= probes <= MAX_PROBES.
    num_lines: usize,
    probes: u8,
}

impl Filter {
    /// Validates the filter bytes. Errors are `(offset, what)`.
    pub(crate) fn new(data: Vec<u8>) -> Result<Filter, (usize, &'static str)> {
        let lines_len = data.len().checked_sub(1).ok_or((0, "empty filter"))?;
        if lines_len == 0 || lines_len % LINE_BYTES != 0 {
            return Err((0, "filter length is not a whole number of lines"));
        }
        let probes = *data.get(lines_len).ok_or((0, "empty filter"))?;
        if probes == 0 || probes > MAX_PROBES {
            return Err((lines_len, "bad filter probe count"));
        }
        Ok(Filter {
            num_lines: lines_len / LINE_BYTES,
            probes,
            data,
        })
    }

    /// False only when `user_key` was certainly not added.
    #[inline]
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(filter_hash(user_key))
    }

    /// [`Filter::may_contain`] for a precomputed [`filter_hash`].
    #[inline]
    pub(crate) fn may_contain_hash(&self, hash: u64) -> bool {
        let start = line_of(hash, self.num_lines) * LINE_BYTES;
        let Some(line) = self.data.get(start..start + LINE_BYTES) else {
            return true;
        };
        let mut h = hash as u32;
        for _ in 0..self.probes {
            h = h.wrapping_mul(PROBE_REMIX);
            let bit = (h >> (32 - 9)) as usize;
            if line.get(bit / 8).is_some_and(|b| b & (1 << (bit % 8)) == 0) {
                return false;
            }
        }
        true
    }

    /// Starts loading the line a probe for [`filter_hash`] `hash` reads (it may straddle two cache
    /// lines). Only a hint.
    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        let start = line_of(hash, self.num_lines) * LINE_BYTES;
        if let Some(line) = self.data.get(start..start + LINE_BYTES) {
            crate::memtable::prefetch(line.as_ptr());
            if let Some(last) = line.last() {
                crate::memtable::prefetch(last);
            }
        }
    }

    /// The false-positive rate this filter's shape predicts for `num_keys` keys (used by tests).
    #[cfg(test)]
    pub(crate) fn expected_fp_rate(num_keys: usize, bits_per_key: u32) -> f64 {
        let total_bits = num_keys as f64 * bits_per_key as f64;
        let num_lines = (total_bits / LINE_BITS as f64).ceil().max(1.0);
        let lambda = num_keys as f64 / num_lines;
        let k = probes_for(bits_per_key) as i32;
        // Lines hold a Poisson-distributed number of keys; sum the standard bloom rate per load.
        let mut p = (-lambda).exp();
        let mut rate = 0.0;
        for j in 0..2000 {
            if j > 0 {
                p *= lambda / j as f64;
            }
            let set = 1.0 - (1.0 - 1.0 / LINE_BITS as f64).powi(k * j);
            rate += p * set.powi(k);
        }
        rate
    }
}
