//! Number generators for the YCSB core workload, with YCSB's constants.
//!
//! Each generator is split into shared, read-only parameters and a caller-supplied [`Rng`], so
//! that every client thread draws from its own seeded stream and a run is repeatable. The few
//! generators with shared mutable state (the insert counters) use atomics and a small lock.
//!
//! Generators here: [`Uniform`], [`Zipfian`] (YCSB's incremental-zeta algorithm after Gray et
//! al.), [`ScrambledZipfian`] (zipfian over 10^10 items, FNV-hashed into the key space, with
//! YCSB's precomputed zeta), [`Latest`] (zipfian skew towards the most recent insert), [`Hotspot`],
//! [`Discrete`] (the operation mix), [`Counter`] and [`AcknowledgedCounter`] (insert key numbers
//! during load and run).

mod counter;
mod mt64;
mod zipfian;

pub use counter::{AcknowledgedCounter, Counter, ACK_WINDOW_SIZE};
pub use mt64::Mt64;
pub use zipfian::{
    Latest, ScrambledZipfian, Zipfian, SCRAMBLED_ZIPFIAN_ITEMS, SCRAMBLED_ZIPFIAN_ZETAN,
    ZIPFIAN_CONSTANT,
};

use crate::rng::Rng;

/// FNV-1 64-bit offset basis (as YCSB uses it).
pub const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
/// FNV 64-bit prime.
pub const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `FNVHash64`: FNV-1 (multiply, then xor) over the eight little-endian bytes of `val`.
/// Used for hashed insert order and for scrambling zipfian draws.
pub fn fnv_hash64(mut val: u64) -> u64 {
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    hash
}

/// Uniform integers in `lo..=hi`.
#[derive(Debug, Clone, Copy)]
pub struct Uniform {
    lo: u64,
    hi: u64,
}

impl Uniform {
    /// Uniform over `lo..=hi`; `lo <= hi` is the caller's to check.
    pub fn new(lo: u64, hi: u64) -> Uniform {
        debug_assert!(lo <= hi);
        Uniform { lo, hi }
    }

    /// The next value.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        rng.between(self.lo, self.hi)
    }
}

/// YCSB's hotspot distribution: a fraction `hot_op_fraction` of draws falls uniformly on the
/// first `hot_data_fraction` of `lo..=hi`, the rest uniformly on the remainder.
#[derive(Debug, Clone, Copy)]
pub struct Hotspot {
    lo: u64,
    hot_len: u64,
    cold_len: u64,
    hot_op_fraction: f64,
}

impl Hotspot {
    /// Both fractions must lie in `0..=1` (checked by the caller when reading properties).
    pub fn new(lo: u64, hi: u64, hot_data_fraction: f64, hot_op_fraction: f64) -> Hotspot {
        let span = hi - lo + 1;
        let hot_len = ((span as f64) * hot_data_fraction) as u64;
        Hotspot {
            lo,
            hot_len,
            cold_len: span - hot_len,
            hot_op_fraction,
        }
    }

    /// The next value.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let hot = rng.next_f64() < self.hot_op_fraction;
        if (hot && self.hot_len > 0) || self.cold_len == 0 {
            self.lo + rng.below(self.hot_len.max(1))
        } else {
            self.lo + self.hot_len + rng.below(self.cold_len)
        }
    }
}

/// Picks one of several values with fixed weights (the operation mix).
#[derive(Debug, Clone)]
pub struct Discrete<T: Copy> {
    items: Vec<(T, f64)>,
    total: f64,
}

impl<T: Copy> Discrete<T> {
    /// An empty chooser; add values with [`Discrete::add`].
    pub fn new() -> Discrete<T> {
        Discrete {
            items: Vec::new(),
            total: 0.0,
        }
    }

    /// Adds `value` with `weight`; weights of zero or less are ignored (as YCSB does).
    pub fn add(&mut self, value: T, weight: f64) {
        if weight > 0.0 {
            self.items.push((value, weight));
            self.total += weight;
        }
    }

    /// Whether no value has a positive weight.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The next value. Weights need not sum to one.
    ///
    /// # Panics
    /// If the chooser is empty (callers check [`Discrete::is_empty`] when configuring).
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> T {
        let mut x = rng.next_f64() * self.total;
        for &(value, weight) in &self.items {
            if x < weight {
                return value;
            }
            x -= weight;
        }
        self.items
            .last()
            .expect("a Discrete chooser needs at least one value")
            .0
    }
}

impl<T: Copy> Default for Discrete<T> {
    fn default() -> Self {
        Discrete::new()
    }
}

#[cfg(test)]
mod tests;
