//! Zipfian generators (YCSB's algorithm, after Gray et al., "Quickly generating billion-record
//! synthetic databases", SIGMOD'94).
//!
//! `P(i) ∝ 1 / (i + 1)^theta` over `n` items, drawn in O(1) from the precomputed `zeta(n)`.
//! When the item count grows (the `latest` distribution), zeta is extended incrementally.

use super::fnv_hash64;
use crate::rng::Rng;

/// YCSB's zipfian constant `theta`.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Number of items of the zipfian behind [`ScrambledZipfian`] (YCSB's `10000000000LL`).
pub const SCRAMBLED_ZIPFIAN_ITEMS: u64 = 10_000_000_000;
/// `zeta(SCRAMBLED_ZIPFIAN_ITEMS + 1, 0.99)`, precomputed by YCSB so that the scrambled
/// generator starts at once.
pub const SCRAMBLED_ZIPFIAN_ZETAN: f64 = 26.469_028_201_783_02;

/// A zipfian over `base..base + items`, favouring small values.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    // INVARIANT: `zetan == zeta(count_for_zeta, theta)`.
    count_for_zeta: u64,
}

impl Zipfian {
    /// A zipfian over `min..=max` with constant `theta` (`0 < theta < 1`); computes zeta in
    /// O(max - min).
    pub fn new(min: u64, max: u64, theta: f64) -> Zipfian {
        let items = max - min + 1;
        Zipfian::with_zeta(min, max, theta, zeta(0, items, theta, 0.0))
    }

    /// As [`Zipfian::new`] with a precomputed `zetan = zeta(max - min + 1, theta)`.
    pub fn with_zeta(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let zeta2 = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            items,
            base: min,
            theta,
            zeta2,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        z.eta = z.eta_for(items);
        z
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// The number of items.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Extends zeta to `items` when it grew (incrementally, O(growth)).
    pub fn grow_to(&mut self, items: u64) {
        if items > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, items, self.theta, self.zetan);
            self.count_for_zeta = items;
            self.eta = self.eta_for(items);
        }
    }

    /// The next value for the configured item count.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        self.next_for(rng, self.items)
    }

    /// The next value for `items` items; call [`Zipfian::grow_to`] first when `items` grew.
    #[inline]
    pub fn next_for(&self, rng: &mut Rng, items: u64) -> u64 {
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

/// `zeta(n) = sum_{i=1..n} 1 / i^theta`, extended from `zeta(last)`.
fn zeta(last: u64, n: u64, theta: f64, last_zeta: f64) -> f64 {
    let mut sum = last_zeta;
    for i in last + 1..=n {
        sum += 1.0 / (i as f64).powf(theta);
    }
    sum
}

/// YCSB's scrambled zipfian: popular items are spread over the key space by hashing, so the
/// hot keys are not neighbours. Popularity follows a zipfian over 10^10 items, folded into
/// `min..=max` by FNV hash modulo.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    base: u64,
    items: u64,
    zipfian: Zipfian,
}

impl ScrambledZipfian {
    /// Over `min..=max` with YCSB's constant and precomputed zeta (instant).
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            base: min,
            items: max - min + 1,
            zipfian: Zipfian::with_zeta(
                0,
                SCRAMBLED_ZIPFIAN_ITEMS,
                ZIPFIAN_CONSTANT,
                SCRAMBLED_ZIPFIAN_ZETAN,
            ),
        }
    }

    /// The next value.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        self.base + fnv_hash64(self.zipfian.next(rng)) % self.items
    }
}

/// YCSB's `latest` distribution: zipfian distance back from the newest acknowledged record.
/// One per client thread (zeta grows as records are inserted).
#[derive(Debug, Clone)]
pub struct Latest {
    zipfian: Zipfian,
}

impl Latest {
    /// For a key space that starts with `items` records (`items >= 1`).
    pub fn new(items: u64) -> Latest {
        let items = items.max(2);
        Latest {
            zipfian: Zipfian::new(0, items - 1, ZIPFIAN_CONSTANT),
        }
    }

    /// The next key number, given that key numbers `0..acknowledged` exist (`acknowledged >= 1`).
    #[inline]
    pub fn next(&mut self, rng: &mut Rng, acknowledged: u64) -> u64 {
        let max = acknowledged.saturating_sub(1);
        if max < 2 {
            return rng.below(max + 1);
        }
        self.zipfian.grow_to(max);
        max - self.zipfian.next_for(rng, max).min(max)
    }
}
