//! The shared block cache.
//!
//! Decoded (uncompressed, checksum-verified) SST data blocks, shared as `Arc<Block>` by every
//! reader, keyed by `(file number, block offset)` and bounded by their decoded size in bytes.
//! The cache is a sharded, lock-light [`quick_cache`] map with a weighter; its eviction policy
//! (CLOCK-Pro-like) keeps blocks read once from pushing out blocks read often, so a compaction
//! scan does not flush the working set (compactions also read with `fill_cache = false`).
//!
//! Invariants: a key always maps to the block at that offset of that file: file numbers are
//! never reused, so an entry can never be stale, only unreachable (after its file is deleted).
//!
//! Concurrency: shared by all threads (`Arc<BlockCache>`); every method takes `&self`. Hit and miss
//! counters are striped by thread so that concurrent readers do not contend on one cache line.

mod row;

pub(crate) use row::{Row, RowCache};

use crate::sst::Block;
use quick_cache::Weighter;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes charged per cached block on top of its decoded size: the `Arc` and `Block` headers and
/// the cache entry.
pub(crate) const BLOCK_CHARGE_OVERHEAD: usize = 96;

/// The block size used to estimate how many entries the cache will hold.
const TYPICAL_BLOCK_BYTES: usize = 4096;

/// Counter stripes; a thread always uses the same one.
const STRIPES: usize = 16;

type Key = (u64, u64);

#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl Weighter<Key, Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &Key, block: &Arc<Block>) -> u64 {
        (block.size() + BLOCK_CHARGE_OVERHEAD) as u64
    }
}

#[derive(Default)]
#[repr(align(64))]
struct PaddedCounter(AtomicU64);

/// Sharded, byte-bounded cache of decoded data blocks.
pub(crate) struct BlockCache {
    blocks: quick_cache::sync::Cache<Key, Arc<Block>, BlockWeighter>,
    hits: [PaddedCounter; STRIPES],
    misses: [PaddedCounter; STRIPES],
}

fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` of blocks (decoded size plus
    /// [`BLOCK_CHARGE_OVERHEAD`] each). A capacity of 0 caches nothing. A block larger than a
    /// cache shard is never cached.
    pub(crate) fn new(capacity_bytes: usize) -> BlockCache {
        let items = (capacity_bytes / (TYPICAL_BLOCK_BYTES + BLOCK_CHARGE_OVERHEAD)).max(16);
        BlockCache {
            blocks: quick_cache::sync::Cache::with_weighter(
                items,
                capacity_bytes as u64,
                BlockWeighter,
            ),
            hits: Default::default(),
            misses: Default::default(),
        }
    }

    /// The cached block at `offset` of table `file_number`, counting a hit or a miss.
    #[inline]
    pub(crate) fn get(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self.blocks.get(&(file_number, offset));
        let counters = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counters[stripe()].0.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `block` as the block at `offset` of table `file_number`.
    #[inline]
    pub(crate) fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        self.blocks.insert((file_number, offset), block);
    }

    /// Called when table `file_number` is deleted. Lazy: it removes nothing. File numbers are
    /// never reused, so the file's blocks can never be returned again; they are unreachable and
    /// the eviction policy drops them first (they are never hit again), without the cost of a
    /// scan over the whole cache for every deleted file.
    pub(crate) fn erase_file(&self, file_number: u64) {
        let _ = file_number;
    }

    /// Lookups that found their block.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }

    /// Lookups that did not find their block.
    pub(crate) fn misses(&self) -> u64 {
        self.misses
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum()
    }

    /// Bytes charged for the cached blocks.
    pub(crate) fn usage_bytes(&self) -> usize {
        self.blocks.weight() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_of(len: usize) -> Arc<Block> {
        // Filler entry area (never parsed), then one restart at 0 and the count 1.
        let mut data = vec![0u8; len];
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        Arc::new(Block::new(data).expect("valid block"))
    }

    #[test]
    fn cache_returns_inserted_blocks_and_counts_hits_and_misses() {
        let cache = BlockCache::new(1 << 20);
        assert!(cache.get(1, 0).is_none());
        let b = block_of(100);
        cache.insert(1, 0, b.clone());
        let got = cache.get(1, 0).expect("cached");
        assert!(Arc::ptr_eq(&got, &b));
        assert!(cache.get(1, 4096).is_none());
        assert!(cache.get(2, 0).is_none());
        assert_eq!(cache.hits(), 1);
        assert_eq!(cache.misses(), 3);
        assert_eq!(cache.usage_bytes(), b.size() + BLOCK_CHARGE_OVERHEAD);
    }

    #[test]
    fn cache_stays_within_its_byte_capacity() {
        let capacity = 256 << 10;
        let cache = BlockCache::new(capacity);
        for i in 0..1000u64 {
            cache.insert(7, i * 4096, block_of(4000));
        }
        assert!(
            cache.usage_bytes() <= capacity,
            "usage {} > capacity {capacity}",
            cache.usage_bytes()
        );
        assert!(
            cache.usage_bytes() > capacity / 2,
            "cache should fill: {}",
            cache.usage_bytes()
        );
    }

    #[test]
    fn zero_capacity_cache_holds_nothing() {
        let cache = BlockCache::new(0);
        cache.insert(1, 0, block_of(10));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.usage_bytes(), 0);
    }

    #[test]
    fn erase_file_never_breaks_lookups_of_other_files() {
        let cache = BlockCache::new(1 << 20);
        cache.insert(1, 0, block_of(10));
        cache.insert(2, 0, block_of(10));
        cache.erase_file(1);
        assert!(cache.get(2, 0).is_some());
    }

    #[test]
    fn counters_sum_across_threads() {
        let cache = Arc::new(BlockCache::new(1 << 20));
        cache.insert(1, 0, block_of(10));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = cache.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        assert!(c.get(1, 0).is_some());
                        assert!(c.get(9, 0).is_none());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread");
        }
        assert_eq!(cache.hits(), 400);
        assert_eq!(cache.misses(), 400);
    }
}
