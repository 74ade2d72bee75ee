//! The table cache: open SSTs, shared by readers and compactions, bounded by `max_open_files`.
//!
//! Opening an SST reads its footer, index, filter and properties; the cache keeps that work (and the
//! file handle) for the tables in use. Entries are evicted when the table is deleted.

use crate::cache::BlockCache;
use crate::error::{IoContext, Result};
use crate::filename;
use crate::fs::Fs;
use crate::sst::Table;
use std::path::PathBuf;
use std::sync::Arc;

/// Open SSTs by file number. Cloning gives another handle to the same cache.
#[derive(Clone)]
pub(crate) struct TableCache {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    tables: quick_cache::sync::Cache<u64, Arc<Table>>,
    block_cache: Option<Arc<BlockCache>>,
}

impl TableCache {
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn Fs>,
        capacity: usize,
        block_cache: Option<Arc<BlockCache>>,
    ) -> TableCache {
        TableCache {
            inner: Arc::new(Inner {
                dir,
                fs,
                tables: quick_cache::sync::Cache::new(capacity),
                block_cache,
            }),
        }
    }

    /// The open table `number`, opening it on a miss.
    ///
    /// # Errors
    /// `Io` when the file cannot be opened; `Corruption` when its footer, index, filter or properties
    /// fail validation.
    pub(crate) fn get(&self, number: u64) -> Result<Arc<Table>> {
        let inner = &self.inner;
        inner.tables.get_or_insert_with(&number, || {
            let path = filename::table(&inner.dir, number);
            let file = inner
                .fs
                .open(&path)
                .ctx(|| format!("open {}", path.display()))?;
            Table::open(file, path, number, inner.block_cache.clone()).map(Arc::new)
        })
    }

    /// Forgets table `number` and its cached blocks (it is being deleted).
    pub(crate) fn evict(&self, number: u64) {
        self.inner.tables.remove(&number);
        if let Some(cache) = &self.inner.block_cache {
            cache.erase_file(number);
        }
    }
}
