//! Sorted string tables: the on-disk format of LSM levels. See `docs/format/sstable.md`.
//!
//! An SST is written once by [`TableBuilder`] (flush or compaction) and then only read, through
//! [`Table`] (point lookups) and [`TableIterator`] (scans, merges and compactions).
//!
//! ```text
//! [data block 0][trailer] ... [data block n-1][trailer]
//! [filter][trailer]          (absent when filters are off or the table is empty)
//! [properties][trailer]
//! [index][trailer]
//! [footer: 64 bytes]
//! ```
//!
//! Modules, one concept each:
//! - `format`: the only module that knows byte offsets: block handles, trailers, the footer.
//! - `block`: the block layout (prefix-compressed entries, restart points), its builder and its
//!   double-ended cursor.
//! - `filter`: the bloom filter over user keys.
//! - `properties`: the statistics block.
//! - `builder`: [`TableBuilder`]; `table`: [`Table`] and [`TableIterator`].
//!
//! Invariants: every byte of a finished file is covered by a checksum (blocks by their trailer,
//! the footer by its own CRC), and the regions tile the file with no gap, so a flipped byte is a
//! `Corruption` error, never wrong data. Bytes read from disk never cause a panic.
//!
//! Concurrency: builders have one owner; an open `Table` is immutable and shared by all readers;
//! decoded data blocks are shared through the block cache ([`crate::cache::BlockCache`]).

mod block;
mod builder;
mod fence;
mod filter;
mod format;
mod properties;
mod table;
#[cfg(test)]
mod tests;

pub(crate) use block::Block;
#[allow(unused_imports)] // used by flush and compaction as they land
pub(crate) use builder::{TableBuilder, TableInfo};
#[allow(unused_imports)] // used by the read path as it lands
pub(crate) use properties::Properties;
#[allow(unused_imports)] // used by the read path as it lands
pub(crate) use table::{SkipSink, Table, TableIterator};

use crate::options::{Compression, Options};

/// How to build the SSTs of one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableOptions {
    /// Uncompressed size at which a data block is closed.
    pub block_size: usize,
    /// Entries between restart points in data blocks (at least 1).
    pub restart_interval: usize,
    /// Bloom filter bits per user key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// Compression of data and index blocks.
    pub compression: Compression,
}

impl TableOptions {
    /// The options for SSTs written to `level`.
    pub(crate) fn for_level(options: &Options, level: usize) -> TableOptions {
        TableOptions {
            block_size: options.block_size,
            restart_interval: options.block_restart_interval.max(1),
            bloom_bits_per_key: options.bloom_bits_per_key,
            compression: options.compression_for_level(level),
        }
    }
}

/// Fuzz entry point: decodes `data` as a block and drives its cursor in both directions and
/// through seeks. Never panics.
pub(crate) fn fuzz_block(data: &[u8]) {
    let Ok(block) = Block::new(data.to_vec()) else {
        return;
    };
    let mut it = block::BlockIter::new(&block);
    let mut keys = Vec::new();
    it.seek_to_first();
    while it.valid() && keys.len() < 10_000 {
        keys.push(it.key().to_vec());
        let _ = it.value();
        it.next();
    }
    it.seek_to_last();
    let mut steps = 0;
    while it.valid() && steps < 10_000 {
        it.prev();
        steps += 1;
    }
    let probes = [
        data.get(..data.len().min(16)).unwrap_or_default().to_vec(),
        vec![0xff; 12],
        Vec::new(),
    ];
    for target in keys.iter().take(64).chain(probes.iter()) {
        it.seek(target);
        if it.valid() {
            it.prev();
        }
        it.seek_for_prev(target);
        if it.valid() {
            it.next();
        }
    }
}

/// Fuzz entry point: decodes `data` as a footer (the last 64 bytes of a file). Never panics.
pub(crate) fn fuzz_footer(data: &[u8]) {
    let _ = format::Footer::decode(data);
    let _ = properties::Properties::decode(data);
    let _ = filter::Filter::new(data.to_vec()).map(|f| f.may_contain(data));
    let _ = format::decompress_lz4(data);
}

/// Fuzz entry point: opens `data` as a whole SST file and reads everything in it. Never panics.
pub(crate) fn fuzz_table(data: &[u8]) {
    use crate::fs::{Fs, MemFs};
    use crate::iter::InternalIterator;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    let fs = MemFs::new();
    let path = Path::new("/fuzz/000001.sst");
    if fs.write_file(path, data).is_err() {
        return;
    }
    let Ok(file) = fs.open(path) else { return };
    let cache = Arc::new(crate::cache::BlockCache::new(1 << 20));
    let Ok(table) = Table::open(file, PathBuf::from(path), 1, Some(cache)) else {
        return;
    };
    let table = Arc::new(table);
    let mut it = table.iter(true);
    let mut keys = Vec::new();
    it.seek_to_first();
    while it.valid() && keys.len() < 10_000 {
        keys.push(it.key().to_vec());
        it.next();
    }
    it.seek_to_last();
    while it.valid() {
        it.prev();
    }
    for k in keys.iter().take(64) {
        let _ = table.get(k);
        it.seek(k);
        it.seek_for_prev(k);
    }
}
