//! `std::mt19937_64`: the 64-bit Mersenne Twister of C++11 (Matsumoto and Nishimura), the
//! generator behind RocksDB's `Random64` and so behind every random draw of db_bench's mixgraph.
//! The harness reproduces db_bench's draws exactly, which needs the same generator: its output is
//! fixed by the C++ standard (the 10000th value from the default seed 5489 is
//! 9981545732273789042), so it can be checked without C++.

/// Words of state.
const N: usize = 312;
/// The middle word.
const M: usize = 156;
/// Twist matrix.
const MATRIX_A: u64 = 0xB502_6F5A_A966_19E9;
/// Most significant 33 bits.
const UPPER_MASK: u64 = 0xFFFF_FFFF_8000_0000;
/// Least significant 31 bits.
const LOWER_MASK: u64 = 0x7FFF_FFFF;
/// Initialisation multiplier.
const INIT_MULTIPLIER: u64 = 6_364_136_223_846_793_005;

/// The generator. Not cryptographic.
#[derive(Clone)]
pub struct Mt64 {
    state: Box<[u64; N]>,
    index: usize,
}

impl std::fmt::Debug for Mt64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt64").field("index", &self.index).finish()
    }
}

impl Mt64 {
    /// The generator `std::mt19937_64(seed)` is.
    pub fn new(seed: u64) -> Mt64 {
        let mut state = Box::new([0u64; N]);
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = INIT_MULTIPLIER
                .wrapping_mul(prev ^ (prev >> 62))
                .wrapping_add(i as u64);
        }
        Mt64 { state, index: N }
    }

    fn twist(&mut self) {
        let s = &mut self.state;
        for i in 0..N {
            let x = (s[i] & UPPER_MASK) | (s[(i + 1) % N] & LOWER_MASK);
            let mut next = x >> 1;
            if x & 1 != 0 {
                next ^= MATRIX_A;
            }
            s[i] = s[(i + M) % N] ^ next;
        }
        self.index = 0;
    }

    /// The next 64 bits (`operator()`).
    pub fn next_u64(&mut self) -> u64 {
        if self.index >= N {
            self.twist();
        }
        let mut x = self.state[self.index];
        self.index += 1;
        x ^= (x >> 29) & 0x5555_5555_5555_5555;
        x ^= (x << 17) & 0x71D6_7FFF_EDA6_0000;
        x ^= (x << 37) & 0xFFF7_EEE0_0000_0000;
        x ^ (x >> 43)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ten_thousandth_draw_is_the_one_the_c_plus_plus_standard_requires() {
        let mut g = Mt64::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = g.next_u64();
        }
        assert_eq!(last, 9_981_545_732_273_789_042);
    }

    #[test]
    fn the_first_draws_of_the_default_seed() {
        // mt19937_64's published first outputs for seed 5489.
        let mut g = Mt64::new(5489);
        assert_eq!(g.next_u64(), 14_514_284_786_278_117_030);
        assert_eq!(g.next_u64(), 4_620_546_740_167_642_908);
    }
}
