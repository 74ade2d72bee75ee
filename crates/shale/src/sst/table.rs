//! Reading an SST: [`Table`] (an open table: footer, index, filter and properties in memory) and
//! [`TableIterator`] (an owned two-level cursor: index block, then data blocks).
//!
//! Invariants checked by [`Table::open`], so that later reads only need to verify each data
//! block's checksum:
//! - the footer's checksum, magic and version are good;
//! - the data blocks, filter, properties, index and footer tile the file with no gap: data blocks
//!   back to back from offset 0 (as listed by the index), then the filter (if any), the
//!   properties, the index and the footer;
//! - every index entry decodes to a block handle, and the number of data blocks matches the
//!   properties.
//!
//! Bytes from disk never cause a panic: every failure is a `Corruption` error naming the file and
//! the offset of the block (plus the position inside the decoded block when that helps).
//!
//! A cursor made by [`Table::iter_skipping`] steps over a data block it cannot read or decode
//! instead of failing, and records it (with the key range its index entries give) in a
//! [`SkipLog`]; see `iter/skip.rs`.
//!
//! Concurrency: a `Table` is immutable after `open` and shared (`Arc`) by readers and compactions;
//! the block cache is shared by all tables. A `TableIterator` has one owner.

use super::block::{Block, BlockIter};
use super::fence::{Fence, Position};
use super::filter::{filter_hash, Filter};
use super::format::{
    decode_stored_block, BlockHandle, Footer, BLOCK_TRAILER_LEN, BLOCK_UNCOMPRESSED, FOOTER_LEN,
};
use super::properties::Properties;
use crate::cache::BlockCache;
use crate::error::{Error, IoContext, Result};
use crate::fs::RandomAccessFile;
use crate::iter::{skippable, InternalIterator, SkipLog, Skipped, SkippedKind};
use crate::key::{compare_internal, trailer, user_key, KIND_FOR_SEEK};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open SST.
pub(crate) struct Table {
    file: Arc<dyn RandomAccessFile>,
    /// The whole file without copies, when the file system maps it; blocks are then slices of it.
    map: Option<bytes::Bytes>,
    path: PathBuf,
    number: u64,
    cache: Option<Arc<BlockCache>>,
    index: Arc<Block>,
    /// Fence keys over the index, when its entries are all restart points (as this crate writes
    /// them): point lookups search it instead of the index block.
    // INVARIANT: when present, covers exactly `index.num_restarts()` entries, entry `i` being
    // restart point `i`.
    fence: Option<Fence>,
    index_handle: BlockHandle,
    filter: Option<Filter>,
    properties: Properties,
    // INVARIANT: every data block handle in the index ends (trailer included) at or before this.
    data_end: u64,
    /// For a mapped table: which data blocks already passed their checksum (see [`VerifiedBlocks`]).
    verified: Option<VerifiedBlocks>,
}

/// The data blocks of a memory-mapped table whose checksum was verified once.
///
/// A mapped block needs no read and no copy, so its checksum would dominate the cost of a lookup
/// that misses the block cache. The bytes of an SST never change after it is written; like a block
/// cache entry, a verified block is trusted for the table's lifetime (until it is reopened).
struct VerifiedBlocks {
    // INVARIANT: sorted; exactly the data block offsets of the index.
    offsets: Vec<u64>,
    bits: Vec<std::sync::atomic::AtomicU64>,
}

impl VerifiedBlocks {
    fn new(offsets: Vec<u64>) -> VerifiedBlocks {
        let bits = (0..offsets.len().div_ceil(64))
            .map(|_| Default::default())
            .collect();
        VerifiedBlocks { offsets, bits }
    }

    /// The block's word and bit, if `offset` starts a data block. `at`, when given, is the
    /// block's position in the index, which saves the search when it is right.
    fn slot(&self, offset: u64, at: Option<usize>) -> Option<(&std::sync::atomic::AtomicU64, u64)> {
        let i = match at {
            Some(i) if self.offsets.get(i) == Some(&offset) => i,
            _ => self.offsets.binary_search(&offset).ok()?,
        };
        Some((self.bits.get(i / 64)?, 1u64 << (i % 64)))
    }

    fn contains(&self, offset: u64, at: Option<usize>) -> bool {
        self.slot(offset, at)
            .is_some_and(|(w, bit)| w.load(std::sync::atomic::Ordering::Relaxed) & bit != 0)
    }

    fn insert(&self, offset: u64) {
        if let Some((w, bit)) = self.slot(offset, None) {
            w.fetch_or(bit, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

fn corrupt_in_block(path: &Path, block_offset: u64, (at, what): (usize, &'static str)) -> Error {
    Error::corruption(
        path,
        block_offset,
        format!("{what} (byte {at} of the decoded block)"),
    )
}

impl Table {
    /// Reads and verifies the footer, index, filter and properties of the table `number` in
    /// `file` (named `path` in errors). Data blocks are read later, through `cache` when given.
    ///
    /// # Errors
    /// `Io` when a read fails; `Corruption` naming `path` and the offset when a check fails.
    pub(crate) fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        number: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Table> {
        let file_len = file.len();
        let footer_at = file_len
            .checked_sub(FOOTER_LEN as u64)
            .ok_or_else(|| Error::corruption(&path, 0, "file too short to be an SST"))?;
        let mut footer_bytes = [0u8; FOOTER_LEN];
        file.read_exact_at(footer_at, &mut footer_bytes)
            .ctx(|| format!("read footer of {}", path.display()))?;
        let footer = Footer::decode(&footer_bytes)
            .map_err(|(at, what)| Error::corruption(&path, footer_at + at as u64, what))?;

        // The filter, properties and index follow each other and the footer with no gap.
        let bad_layout = || {
            Error::corruption(
                &path,
                footer_at,
                "footer block handles do not tile the file",
            )
        };
        let filter_end = if footer.filter.size == 0 {
            Some(footer.filter.offset)
        } else {
            footer.filter.end_with_trailer()
        };
        if filter_end != Some(footer.properties.offset)
            || footer.properties.end_with_trailer() != Some(footer.index.offset)
            || footer.index.end_with_trailer() != Some(footer_at)
        {
            return Err(bad_layout());
        }

        let mut table = Table {
            map: file.mapped().filter(|m| m.len() as u64 == file.len()),
            file,
            path,
            number,
            cache,
            index: Arc::new(Block::empty()),
            fence: None,
            index_handle: footer.index,
            verified: None,
            filter: None,
            properties: Properties::default(),
            data_end: footer.filter.offset,
        };
        // One read for the filter, properties and index (they are contiguous, ending at the footer).
        let meta_start = footer.filter.offset;
        let meta_len = usize::try_from(footer_at - meta_start)
            .map_err(|_| Error::corruption(&table.path, meta_start, "metadata too large"))?;
        let mut meta = vec![0u8; meta_len];
        table
            .file
            .read_exact_at(meta_start, &mut meta)
            .ctx(|| format!("read {} at {meta_start}", table.path.display()))?;
        let block_in_meta = |handle: BlockHandle| -> Result<bytes::Bytes> {
            // The layout check above keeps every handle inside `meta`; checked all the same.
            let rel = |at: u64| usize::try_from(at.checked_sub(meta_start)?).ok();
            let range = rel(handle.offset).zip(handle.end_with_trailer().and_then(rel));
            let bytes = range
                .and_then(|(start, end)| meta.get(start..end))
                .ok_or_else(|| {
                    Error::corruption(&table.path, handle.offset, "block outside the metadata")
                })?;
            decode_stored_block(bytes::Bytes::copy_from_slice(bytes), true).map_err(|(at, what)| {
                Error::corruption(&table.path, handle.offset + at as u64, what)
            })
        };
        let props_bytes = block_in_meta(footer.properties)?;
        let properties = Properties::decode(&props_bytes)
            .map_err(|e| corrupt_in_block(&table.path, footer.properties.offset, e))?;
        let index_bytes = block_in_meta(footer.index)?;
        let index = Block::new(index_bytes)
            .map_err(|e| corrupt_in_block(&table.path, footer.index.offset, e))?;
        let filter = if footer.filter.size > 0 {
            let bytes = block_in_meta(footer.filter)?;
            Some(
                Filter::new(bytes.to_vec())
                    .map_err(|e| corrupt_in_block(&table.path, footer.filter.offset, e))?,
            )
        } else {
            None
        };
        table.properties = properties;
        table.index = Arc::new(index);
        table.filter = filter;
        let offsets = table.check_index()?;
        table.fence = table.build_fence(offsets.len());
        if table.map.is_some() {
            table.verified = Some(VerifiedBlocks::new(offsets));
        }
        let p = &table.properties;
        let filter_size = if footer.filter.size == 0 {
            0
        } else {
            footer.filter.size + BLOCK_TRAILER_LEN as u64
        };
        if p.index_size != footer.index.size + BLOCK_TRAILER_LEN as u64
            || p.filter_size != filter_size
        {
            return Err(Error::corruption(
                &table.path,
                footer.properties.offset,
                "properties disagree with the footer",
            ));
        }
        Ok(table)
    }

    /// Checks that the index lists data blocks back to back from offset 0 up to `data_end`.
    /// Returns the offsets of the data blocks, in order.
    fn check_index(&self) -> Result<Vec<u64>> {
        let at = self.index_handle.offset;
        let mut it = BlockIter::new(&*self.index);
        let (mut expected, mut count) = (0u64, 0u64);
        let mut offsets = Vec::with_capacity(self.properties.num_data_blocks.min(1 << 20) as usize);
        it.seek_to_first();
        while it.valid() {
            let handle = BlockHandle::decode_exact(it.value())
                .map_err(|w| Error::corruption(&self.path, at, w))?;
            offsets.push(handle.offset);
            if handle.offset != expected {
                return Err(Error::corruption(
                    &self.path,
                    at,
                    "index entries do not tile the data blocks",
                ));
            }
            expected = handle
                .end_with_trailer()
                .filter(|end| *end <= self.data_end)
                .ok_or_else(|| {
                    Error::corruption(&self.path, at, "index entry past the data blocks")
                })?;
            count += 1;
            it.next();
        }
        if let Some(e) = it.corruption() {
            return Err(corrupt_in_block(&self.path, at, e));
        }
        if expected != self.data_end || count != self.properties.num_data_blocks {
            return Err(Error::corruption(
                &self.path,
                at,
                "index does not cover the data blocks",
            ));
        }
        Ok(offsets)
    }

    /// The fence over the (validated) index of `entries` entries, when each entry is a restart
    /// point; `None` otherwise (lookups then search the index block).
    fn build_fence(&self, entries: usize) -> Option<Fence> {
        let index = &*self.index;
        if entries == 0 || index.num_restarts() != entries {
            return None;
        }
        let key = |i: usize| index.restart_entry(i).ok().map(|(k, _)| user_key(k));
        let (first, last) = (key(0)?, key(entries - 1)?);
        let keys: Option<Vec<&[u8]>> = (0..entries).map(key).collect();
        Some(Fence::build(first, last, keys?.into_iter()))
    }

    /// With a fence: the position of the index entry holding the first key at or after
    /// `target`, or `None` when every key sorts before it.
    fn index_position(&self, fence: &Fence, target: &[u8]) -> Result<Option<usize>> {
        let index = &*self.index;
        let corrupt = |e| corrupt_in_block(&self.path, self.index_handle.offset, e);
        let (mut lo, mut hi) = match fence.position(user_key(target)) {
            Position::At(i) => (i, i),
            Position::Between(lo, hi) => (lo, hi),
            // Every entry is a restart point (the fence's invariant).
            Position::Unknown => (0, fence.len()),
        };
        // Binary search for the first entry in lo..hi not before the target (hi if none).
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (key, _) = index.restart_entry(mid).map_err(corrupt)?;
            if compare_internal(key, target) == std::cmp::Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok((lo < fence.len()).then_some(lo))
    }

    /// Reads one block and verifies its trailer; returns the decoded bytes.
    fn read_block(&self, handle: BlockHandle) -> Result<bytes::Bytes> {
        let len = handle
            .size
            .checked_add(BLOCK_TRAILER_LEN as u64)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| Error::corruption(&self.path, handle.offset, "block size overflows"))?;
        if handle
            .end_with_trailer()
            .is_none_or(|end| end > self.file.len())
        {
            return Err(Error::corruption(
                &self.path,
                handle.offset,
                "block handle past the end of the file",
            ));
        }
        let stored = match &self.map {
            // In range: the map is exactly the file, checked against above.
            Some(map) => map.slice(handle.offset as usize..handle.offset as usize + len),
            None => {
                let mut buf = vec![0u8; len];
                self.file
                    .read_exact_at(handle.offset, &mut buf)
                    .ctx(|| format!("read {} at {}", self.path.display(), handle.offset))?;
                bytes::Bytes::from(buf)
            }
        };
        let trusted = self
            .verified
            .as_ref()
            .is_some_and(|v| v.contains(handle.offset, None));
        let block = decode_stored_block(stored, !trusted)
            .map_err(|(at, what)| Error::corruption(&self.path, handle.offset + at as u64, what))?;
        if !trusted {
            if let Some(v) = &self.verified {
                v.insert(handle.offset);
            }
        }
        Ok(block)
    }

    /// A data block of a memory-mapped table, straight from the map, when it is stored
    /// uncompressed and its checksum was verified before: slicing the map is cheaper than a block
    /// cache lookup, and caching it would only copy what the page cache already holds. `None`
    /// otherwise (the caller goes through [`Table::data_block`], which verifies and caches).
    /// `at` is the block's position in the index when the caller knows it.
    fn mapped_block(&self, handle: BlockHandle, at: Option<usize>) -> Result<Option<Block>> {
        let (Some(map), Some(verified)) = (&self.map, &self.verified) else {
            return Ok(None);
        };
        if !verified.contains(handle.offset, at) {
            return Ok(None);
        }
        // A verified offset starts a data block of the index, which `open` checked lies inside
        // the data area; the handle is the index's, so its size is that block's. Checked anyway.
        let (Ok(start), Ok(size)) = (usize::try_from(handle.offset), usize::try_from(handle.size))
        else {
            return Ok(None);
        };
        let Some(kind_at) = start
            .checked_add(size)
            .filter(|&k| (k as u64) < self.data_end)
        else {
            return Ok(None);
        };
        if map.get(kind_at) != Some(&BLOCK_UNCOMPRESSED) {
            return Ok(None);
        }
        Block::new(map.slice(start..kind_at))
            .map(Some)
            .map_err(|e| corrupt_in_block(&self.path, handle.offset, e))
    }

    /// A data block, from the block cache when there; read blocks are inserted when `fill_cache`.
    fn data_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.get(self.number, handle.offset) {
                return Ok(block);
            }
        }
        if handle
            .end_with_trailer()
            .is_none_or(|end| end > self.data_end)
        {
            return Err(Error::corruption(
                &self.path,
                handle.offset,
                "data block handle out of range",
            ));
        }
        let bytes = self.read_block(handle)?;
        let block = Arc::new(
            Block::new(bytes).map_err(|e| corrupt_in_block(&self.path, handle.offset, e))?,
        );
        if fill_cache {
            if let Some(cache) = &self.cache {
                cache.insert(self.number, handle.offset, block.clone());
            }
        }
        Ok(block)
    }

    /// Point lookup: the first entry whose internal key is `>= target`, if its user key equals
    /// `user_key(target)`. Consults the bloom filter, then the index, then one data block.
    /// Returns the entry's internal key and value.
    ///
    /// # Errors
    /// `Io` when a read fails; `Corruption` naming the file and offset.
    pub(crate) fn get(&self, target: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self.locate(target)? {
            Some(probe) => self.get_located(target, probe),
            None => Ok(None),
        }
    }

    /// Starts loading the bloom filter line of `user_key`, so that a batch of lookups overlaps
    /// those cache misses (see [`Table::locate`]). Only a hint.
    pub(crate) fn prefetch_filter(&self, user_key: &[u8]) {
        if let Some(filter) = &self.filter {
            filter.prefetch(filter_hash(user_key));
        }
    }

    /// The first phase of [`Table::get`]: the bloom filter and the index. `None` when the table
    /// certainly holds no entry `>= target` with its user key.
    ///
    /// # Errors
    /// `Corruption` naming the file and offset of a damaged index.
    pub(crate) fn locate(&self, target: &[u8]) -> Result<Option<Probe>> {
        if let Some(filter) = &self.filter {
            if !filter.may_contain(user_key(target)) {
                return Ok(None);
            }
        }
        if let Some(fence) = &self.fence {
            let Some(i) = self.index_position(fence, target)? else {
                return Ok(None);
            };
            let (_, value) = self
                .index
                .restart_entry(i)
                .map_err(|e| corrupt_in_block(&self.path, self.index_handle.offset, e))?;
            let handle = BlockHandle::decode_exact(value)
                .map_err(|w| Error::corruption(&self.path, self.index_handle.offset, w))?;
            return Ok(Some(Probe {
                handle,
                at: Some(i),
            }));
        }
        let mut index = BlockIter::new(&*self.index);
        index.seek(target);
        if let Some(e) = index.corruption() {
            return Err(corrupt_in_block(&self.path, self.index_handle.offset, e));
        }
        if !index.valid() {
            return Ok(None);
        }
        let handle = BlockHandle::decode_exact(index.value())
            .map_err(|w| Error::corruption(&self.path, self.index_handle.offset, w))?;
        Ok(Some(Probe { handle, at: None }))
    }

    /// Starts loading the first, the middle and the last cache line of the data block `probe`
    /// names when the table is memory-mapped: the search reads the restart array at its end,
    /// then a restart entry near the middle, then scans from a restart point. Only a hint.
    pub(crate) fn prefetch_block(&self, probe: &Probe) {
        let Some(map) = &self.map else { return };
        let (Ok(start), Ok(size)) = (
            usize::try_from(probe.handle.offset),
            usize::try_from(probe.handle.size),
        ) else {
            return;
        };
        // `get` bounds-checks; a hint needs only to stay inside the map.
        if let Some(kind_at) = start.checked_add(size).filter(|&k| k < map.len()) {
            crate::memtable::prefetch(map[start..].as_ptr());
            crate::memtable::prefetch(map[start + size / 2..].as_ptr());
            crate::memtable::prefetch(map[kind_at..].as_ptr());
        }
    }

    /// The second phase of [`Table::get`]: the search of the data block that [`Table::locate`]
    /// found for `target`.
    ///
    /// # Errors
    /// `Io` when a read fails; `Corruption` naming the file and offset.
    pub(crate) fn get_located(
        &self,
        target: &[u8],
        probe: Probe,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Probe { handle, at } = probe;
        let mapped = self.mapped_block(handle, at)?;
        let cached;
        let block: &Block = match &mapped {
            Some(block) => block,
            None => {
                cached = self.data_block(handle, true)?;
                &cached
            }
        };
        // The key buffer travels to the data cursor and then to the result.
        let mut it = BlockIter::with_buffer(block, Vec::with_capacity(target.len() + 16));
        it.seek(target);
        if let Some(e) = it.corruption() {
            return Err(corrupt_in_block(&self.path, handle.offset, e));
        }
        if it.valid() && user_key(it.key()) == user_key(target) {
            let value = it.value().to_vec();
            return Ok(Some((it.into_buffer(), value)));
        }
        Ok(None)
    }

    /// An owned cursor over the whole table. `fill_cache = false` (compactions) reads blocks
    /// without inserting them into the block cache (blocks already cached are still used).
    pub(crate) fn iter(self: &Arc<Self>, fill_cache: bool) -> TableIterator {
        TableIterator {
            index: BlockIter::new(self.index.clone()),
            table: self.clone(),
            fill_cache,
            data: None,
            data_handle: BlockHandle::default(),
            err: None,
            skip: None,
        }
    }

    /// [`Table::iter`] for a scan that steps over unreadable data blocks, recording each in
    /// `sink.log` instead of failing (see [`TableIterator::block_failed`]).
    pub(crate) fn iter_skipping(
        self: &Arc<Self>,
        fill_cache: bool,
        sink: SkipSink,
    ) -> TableIterator {
        let mut it = self.iter(fill_cache);
        it.skip = Some(sink);
        it
    }

    /// The table's statistics.
    #[cfg(test)]
    pub(crate) fn properties(&self) -> &Properties {
        &self.properties
    }

    /// The file number the table was opened with.
    #[allow(dead_code)] // for diagnostics
    pub(crate) fn number(&self) -> u64 {
        self.number
    }
}

/// The data block a point lookup searches, found by [`Table::locate`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    handle: BlockHandle,
    /// The block's position in the index, when the index has a fence.
    at: Option<usize>,
}

/// Where a skipping table cursor records the blocks it steps over.
pub(crate) struct SkipSink {
    pub log: Arc<SkipLog>,
    /// The table's smallest internal key (from its metadata): the start of its first block.
    pub smallest: Vec<u8>,
}

/// A cursor over a whole table, both directions: an index cursor picks the data block, a data
/// cursor walks it. Owns an `Arc` of its table, so it is `'static` and `Send`. The first error is
/// sticky: the cursor turns invalid and `status()` reports it.
pub(crate) struct TableIterator {
    table: Arc<Table>,
    fill_cache: bool,
    index: BlockIter<Arc<Block>>,
    // The cursor over the data block at `data_handle`; kept across blocks to reuse its key buffer.
    data: Option<BlockIter<Arc<Block>>>,
    data_handle: BlockHandle,
    err: Option<Error>,
    /// Set for a cursor that steps over unreadable data blocks.
    skip: Option<SkipSink>,
}

impl TableIterator {
    fn fail(&mut self, err: Error) {
        if self.err.is_none() {
            self.err = Some(err);
        }
        if let Some(d) = &mut self.data {
            d.invalidate();
        }
    }

    /// The data block at `offset` (the index cursor's entry) could not be read or decoded: fails
    /// the cursor, or for a skipping cursor records the block and leaves the data cursor
    /// unpositioned, so that the caller's walk moves on to the next index entry.
    fn block_failed(&mut self, offset: u64, err: Error) {
        let Some(sink) = self.skip.as_ref().filter(|_| skippable(&err)) else {
            return self.fail(err);
        };
        let (start, end) = self.block_range(&sink.smallest);
        let file = self.table.path.file_name().map_or_else(
            || self.table.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        sink.log.record(Skipped {
            kind: SkippedKind::Block,
            file,
            offset,
            start,
            end,
            error: err,
        });
        if let Some(d) = &mut self.data {
            d.invalidate();
        }
    }

    /// The user keys the data block of the index cursor's entry holds, from the index alone: after
    /// the previous entry's key (the table's first key for the first block), up to this entry's
    /// key. An index key is the block's last key, or a shorter key before the next block, which
    /// carries the seek kind and matches no entry (then the bound excludes it).
    fn block_range(&self, smallest: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let bound = |ikey: &[u8], real: fn(Vec<u8>) -> Bound<Vec<u8>>| {
            let k = user_key(ikey).to_vec();
            if trailer(ikey) & 0xff == u64::from(KIND_FOR_SEEK) {
                Bound::Excluded(k)
            } else {
                real(k)
            }
        };
        if !self.index.valid() {
            return (Bound::Unbounded, Bound::Unbounded);
        }
        let here = self.index.key();
        let end = bound(here, Bound::Included);
        // Index keys are distinct: a seek to this one lands on it, and one step back is the
        // previous entry.
        let mut before = BlockIter::new(self.table.index.clone());
        before.seek(here);
        before.prev();
        let start = if before.valid() {
            Bound::Excluded(user_key(before.key()).to_vec())
        } else {
            Bound::Included(user_key(smallest).to_vec())
        };
        (start, end)
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    /// Turns a data cursor corruption into the iterator's error. Returns false on error.
    fn check_data(&mut self) -> bool {
        if let Some(e) = self.data.as_ref().and_then(|d| d.corruption()) {
            let offset = self.data_handle.offset;
            let err = corrupt_in_block(&self.table.path, offset, e);
            self.block_failed(offset, err);
        }
        self.err.is_none()
    }

    /// Loads the block the index cursor points at into the data cursor and positions it with
    /// `position`; leaves the data cursor invalid when the index cursor is.
    fn position_data(&mut self, position: impl FnOnce(&mut BlockIter<Arc<Block>>)) {
        if let Some(e) = self.index.corruption() {
            let err = corrupt_in_block(&self.table.path, self.table.index_handle.offset, e);
            return self.fail(err);
        }
        if self.err.is_some() {
            return;
        }
        if !self.index.valid() {
            if let Some(d) = &mut self.data {
                d.invalidate();
            }
            return;
        }
        let handle = match BlockHandle::decode_exact(self.index.value()) {
            Ok(h) => h,
            Err(w) => {
                let err = Error::corruption(&self.table.path, self.table.index_handle.offset, w);
                return self.fail(err);
            }
        };
        let same = self.data.is_some() && self.data_handle == handle;
        if !same {
            match self.table.data_block(handle, self.fill_cache) {
                Ok(block) => match &mut self.data {
                    Some(d) => d.reset(block),
                    None => self.data = Some(BlockIter::new(block)),
                },
                Err(e) => return self.block_failed(handle.offset, e),
            }
            self.data_handle = handle;
        }
        if let Some(d) = &mut self.data {
            position(d);
        }
        self.check_data();
    }

    fn skip_forward(&mut self) {
        while self.err.is_none() && !self.data_valid() {
            if !self.index.valid() {
                return;
            }
            self.index.next();
            self.position_data(|d| d.seek_to_first());
        }
    }

    fn skip_backward(&mut self) {
        while self.err.is_none() && !self.data_valid() {
            if !self.index.valid() {
                return;
            }
            self.index.prev();
            self.position_data(|d| d.seek_to_last());
        }
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.err.is_none() && self.data_valid()
    }

    fn seek_to_first(&mut self) {
        self.index.seek_to_first();
        self.position_data(|d| d.seek_to_first());
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        self.index.seek_to_last();
        self.position_data(|d| d.seek_to_last());
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        self.index.seek(target);
        self.position_data(|d| d.seek(target));
        self.skip_forward();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // The first block whose index key is >= target holds the answer or starts after it; past
        // every index key, the answer is the table's last entry.
        self.index.seek(target);
        if !self.index.valid() && self.index.corruption().is_none() {
            self.index.seek_to_last();
        }
        self.position_data(|d| d.seek_for_prev(target));
        self.skip_backward();
    }

    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.next();
        }
        if self.check_data() {
            self.skip_forward();
        }
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.prev();
        }
        if self.check_data() {
            self.skip_backward();
        }
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
