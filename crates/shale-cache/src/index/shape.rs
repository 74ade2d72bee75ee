//! The table's geometry: bucket count, masks, and the two candidate buckets of a key. Every
//! backend uses these functions so that "bucket pair" means the same thing everywhere.

use super::KeyHash;

/// Entries per bucket: 8 pairs of `(u32 signature, u32 location)`, one 64-byte cache line.
pub const BUCKET_SLOTS: usize = 8;

/// Insert blocks the table is split into by the top bits of the bucket number. A key's two
/// candidate buckets are always in the same block, so blocks can be inserted into in parallel.
pub const INSERT_BLOCKS: usize = 8;

/// Fewest buckets a table has: two per insert block, so a key usually has two distinct buckets.
pub const MIN_BUCKETS: usize = 2 * INSERT_BLOCKS;

/// A table of `buckets` (a power of two, at least [`MIN_BUCKETS`]) split into
/// [`INSERT_BLOCKS`] blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableShape {
    buckets: usize,
    mask: u32,
    block_mask: u32,
    block_shift: u32,
}

impl TableShape {
    /// The smallest table holding at least `slots` entries when full.
    ///
    /// # Panics
    /// If the table would need more than 2^32 buckets (2^35 entries).
    pub fn for_slots(slots: usize) -> TableShape {
        let buckets = slots
            .div_ceil(BUCKET_SLOTS)
            .max(MIN_BUCKETS)
            .next_power_of_two();
        TableShape::with_buckets(buckets)
    }

    /// A table of exactly `buckets`.
    ///
    /// # Panics
    /// If `buckets` is not a power of two, is below [`MIN_BUCKETS`] or above 2^32.
    pub fn with_buckets(buckets: usize) -> TableShape {
        assert!(
            buckets.is_power_of_two() && (MIN_BUCKETS..=1 << 32).contains(&buckets),
            "a table has a power of two buckets between {MIN_BUCKETS} and 2^32, not {buckets}"
        );
        let mask = (buckets - 1) as u32;
        let per_block = buckets / INSERT_BLOCKS;
        TableShape {
            buckets,
            mask,
            block_mask: (per_block - 1) as u32,
            block_shift: per_block.trailing_zeros(),
        }
    }

    /// Buckets in the table.
    #[inline]
    pub fn buckets(&self) -> usize {
        self.buckets
    }

    /// Entries the table holds when full.
    #[inline]
    pub fn slots(&self) -> usize {
        self.buckets * BUCKET_SLOTS
    }

    /// `buckets - 1`.
    #[inline]
    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// `buckets / INSERT_BLOCKS - 1`: the bits an alternate bucket may differ in.
    #[inline]
    pub fn block_mask(&self) -> u32 {
        self.block_mask
    }

    /// The first candidate bucket of a key.
    #[inline]
    pub fn first_bucket(&self, hash: KeyHash) -> u32 {
        hash.bucket_hash() & self.mask
    }

    /// The other candidate bucket of an entry with signature `sig` in `bucket`. Applying it twice
    /// gives `bucket` back; it equals `bucket` when `sig & block_mask == 0`.
    #[inline]
    pub fn alternate(&self, bucket: u32, sig: u32) -> u32 {
        ((bucket ^ sig) & self.block_mask) | (bucket & !self.block_mask)
    }

    /// Both candidate buckets of a key, first bucket first (they may be equal).
    #[inline]
    pub fn candidates(&self, hash: KeyHash) -> [u32; 2] {
        let b1 = self.first_bucket(hash);
        [b1, self.alternate(b1, hash.signature())]
    }

    /// The insert block a bucket belongs to, `0..INSERT_BLOCKS`.
    #[inline]
    pub fn insert_block(&self, bucket: u32) -> usize {
        (bucket >> self.block_shift) as usize
    }

    /// A name for the bucket pair of a key: the smaller candidate. Two keys share a pair exactly
    /// when they have the same signature and the same pair name.
    #[inline]
    pub fn pair(&self, hash: KeyHash) -> u32 {
        let [b1, b2] = self.candidates(hash);
        b1.min(b2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_is_an_involution_inside_the_insert_block() {
        let shape = TableShape::with_buckets(1 << 10);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let hash = KeyHash(x);
            let [b1, b2] = shape.candidates(hash);
            assert!((b2 as usize) < shape.buckets());
            assert_eq!(shape.alternate(b2, hash.signature()), b1);
            assert_eq!(shape.insert_block(b1), shape.insert_block(b2));
        }
    }

    #[test]
    fn tiny_tables_have_two_buckets_per_block() {
        let shape = TableShape::for_slots(1);
        assert_eq!(shape.buckets(), MIN_BUCKETS);
        assert_eq!(shape.block_mask(), 1);
        assert_eq!(shape.slots(), MIN_BUCKETS * BUCKET_SLOTS);
        assert_eq!(TableShape::for_slots(1000).buckets(), 128);
    }

    #[test]
    fn signature_zero_is_remapped() {
        assert_eq!(KeyHash(0xabcd_0000_0000).signature(), 1);
        assert_eq!(KeyHash(0xabcd_0000_0001).signature(), 1);
        assert_eq!(KeyHash(0xabcd_0000_0002).signature(), 2);
        assert_eq!(KeyHash(0x1234_5678_0000_0000).bucket_hash(), 0x1234_5678);
    }
}
