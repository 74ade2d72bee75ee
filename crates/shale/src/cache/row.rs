//! The row cache: the newest entry of a user key in one SST, so that a repeated point lookup skips
//! the table's filter, fence, index and data block (RocksDB's `row_cache`).
//!
//! Keyed by `(table number, user key)`. A row is the key's newest entry in that table: its
//! sequence number and either its value (inline or a blob reference) or a deletion. It is filled
//! only by lookups at the newest visible sequence number, which find exactly that entry (every
//! entry of a table is visible); any lookup may use it when the row's sequence number is visible
//! at its snapshot (then the row is also the newest entry that snapshot sees in the table).
//!
//! Invariants: table numbers are never reused and tables never change, so a row is never stale,
//! only unreachable once its table is deleted (it then ages out).
//!
//! Concurrency: shared by all readers; `&self` methods on a sharded [`quick_cache`] map.

use crate::key::{SeqNo, ValueKind};
use quick_cache::{Equivalent, Weighter};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Bytes charged per row on top of its key and value: the entry, the `Arc` and the boxes.
const ROW_CHARGE_OVERHEAD: usize = 80;

/// The row size used to estimate how many entries the cache will hold.
const TYPICAL_ROW_BYTES: usize = 160;

/// A cached row: the newest entry of a key in a table.
#[derive(Debug)]
pub(crate) struct Row {
    pub seq: SeqNo,
    /// `None` for a deletion.
    pub entry: Option<(ValueKind, Vec<u8>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RowKey {
    table: u64,
    user_key: Box<[u8]>,
}

impl Hash for RowKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Lookup(self.table, &self.user_key).hash(state);
    }
}

/// A borrowed [`RowKey`], for lookups without allocating.
#[derive(Hash)]
struct Lookup<'a>(u64, &'a [u8]);

impl Equivalent<RowKey> for Lookup<'_> {
    fn equivalent(&self, key: &RowKey) -> bool {
        self.0 == key.table && self.1 == &key.user_key[..]
    }
}

#[derive(Debug, Clone, Copy)]
struct RowWeighter;

impl Weighter<RowKey, Arc<Row>> for RowWeighter {
    fn weight(&self, key: &RowKey, row: &Arc<Row>) -> u64 {
        let value = row.entry.as_ref().map_or(0, |(_, v)| v.len());
        (key.user_key.len() + value + ROW_CHARGE_OVERHEAD) as u64
    }
}

/// See the module documentation.
pub(crate) struct RowCache {
    rows: quick_cache::sync::Cache<RowKey, Arc<Row>, RowWeighter>,
}

impl RowCache {
    /// A cache of up to `capacity_bytes` (keys, values and [`ROW_CHARGE_OVERHEAD`] per row).
    pub(crate) fn new(capacity_bytes: usize) -> RowCache {
        let items = (capacity_bytes / (TYPICAL_ROW_BYTES + ROW_CHARGE_OVERHEAD)).max(16);
        RowCache {
            rows: quick_cache::sync::Cache::with_weighter(
                items,
                capacity_bytes as u64,
                RowWeighter,
            ),
        }
    }

    /// The row of `user_key` in table `table`, if cached.
    #[inline]
    pub(crate) fn get(&self, table: u64, user_key: &[u8]) -> Option<Arc<Row>> {
        self.rows.get(&Lookup(table, user_key))
    }

    /// Caches `row` as the newest entry of `user_key` in table `table`.
    pub(crate) fn insert(&self, table: u64, user_key: &[u8], row: Arc<Row>) {
        self.rows.insert(
            RowKey {
                table,
                user_key: user_key.into(),
            },
            row,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_found_by_table_and_key() {
        let cache = RowCache::new(1 << 20);
        cache.insert(
            7,
            b"k",
            Arc::new(Row {
                seq: 5,
                entry: Some((ValueKind::Value, b"v".to_vec())),
            }),
        );
        cache.insert(
            8,
            b"k",
            Arc::new(Row {
                seq: 9,
                entry: None,
            }),
        );
        let row = cache.get(7, b"k").expect("cached");
        assert_eq!(row.seq, 5);
        assert_eq!(row.entry, Some((ValueKind::Value, b"v".to_vec())));
        assert!(cache.get(8, b"k").expect("cached").entry.is_none());
        assert!(cache.get(7, b"kk").is_none());
        assert!(cache.get(9, b"k").is_none());
    }

    #[test]
    fn the_cache_stays_within_its_capacity() {
        let cache = RowCache::new(64 << 10);
        for i in 0..10_000u32 {
            cache.insert(
                1,
                &i.to_be_bytes(),
                Arc::new(Row {
                    seq: 1,
                    entry: Some((ValueKind::Value, vec![0; 100])),
                }),
            );
        }
        assert!(cache.rows.weight() <= 64 << 10);
        assert!(cache.rows.len() > 100);
    }
}
