//! Blocks: sorted runs of prefix-compressed entries with restart points, used for data blocks and
//! the index block.
//!
//! ```text
//! entry    = varint32 shared | varint32 non_shared | varint32 value_len
//!            | key[shared..] (non_shared bytes) | value (value_len bytes)
//! block    = entry* | restart u32le * num_restarts | num_restarts u32le
//! ```
//! An entry at a restart point stores its whole key (`shared == 0`); other entries share a prefix
//! with the key before them. Keys are internal keys ([`crate::key`]) in
//! [`compare_internal`] order.
//!
//! Invariants checked by [`Block::new`] (so iterators can trust them): at least one restart,
//! the first at offset 0, restarts strictly increasing and inside the entry area (an empty block
//! has the single restart 0). Everything else (varints, lengths, `shared`) is checked as entries
//! are decoded; a bad entry turns the iterator invalid with a corruption reported by
//! [`BlockIter::corruption`]. Nothing in a block can cause a panic.
//!
//! Performance: iterators never allocate per entry. The current key is rebuilt in one reusable
//! buffer; values are borrowed from the block. Seeks binary-search the restart points, whose keys
//! are read in place.
//!
//! Concurrency: a [`Block`] is immutable and shared (`Arc`) between threads and the block cache; a
//! [`BlockIter`] has one owner.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, TRAILER_LEN};
use crate::varint::{get_varint32, put_varint32};
use std::cmp::Ordering;
use std::ops::Deref;
use std::path::Path;

/// A whole key and its value, read in place from a block.
type KeyValue<'a> = (&'a [u8], &'a [u8]);

/// A decoded (uncompressed, checksum-verified) block.
#[derive(Debug)]
pub(crate) struct Block {
    // Shared, so a block can point into a memory-mapped file without a copy.
    data: bytes::Bytes,
    // INVARIANT: restart_offset + 4 * num_restarts + 4 == data.len(); num_restarts >= 1.
    restart_offset: usize,
    num_restarts: usize,
}

/// Bytes of a `u32`, the width of restart points and the restart count.
const U32_LEN: usize = 4;

impl Block {
    /// Validates the restart array of `data`. Errors are `(offset in data, what)`.
    pub(crate) fn new(data: impl Into<bytes::Bytes>) -> Result<Block, (usize, &'static str)> {
        let data: bytes::Bytes = data.into();
        let len = data.len();
        let count_at = len.checked_sub(U32_LEN).ok_or((0, "block too short"))?;
        let num_restarts = read_u32(&data, count_at).ok_or((count_at, "block too short"))? as usize;
        let restart_bytes = num_restarts
            .checked_mul(U32_LEN)
            .filter(|b| *b <= count_at)
            .ok_or((count_at, "restart count exceeds the block"))?;
        let restart_offset = count_at - restart_bytes;
        if num_restarts == 0 {
            return Err((count_at, "block has no restart point"));
        }
        let mut prev: Option<usize> = None;
        for i in 0..num_restarts {
            let at = restart_offset + i * U32_LEN;
            let r = read_u32(&data, at).ok_or((at, "restart point truncated"))? as usize;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restart_offset,
            };
            let ok = ok && (r < restart_offset || (restart_offset == 0 && num_restarts == 1));
            if !ok {
                return Err((at, "bad restart point"));
            }
            prev = Some(r);
        }
        Ok(Block {
            data,
            restart_offset,
            num_restarts,
        })
    }

    /// A block with no entries.
    pub(crate) fn empty() -> Block {
        Block {
            data: bytes::Bytes::from_static(&[0, 0, 0, 0, 1, 0, 0, 0]),
            restart_offset: 0,
            num_restarts: 1,
        }
    }

    /// Decoded size in bytes, for the block cache's accounting.
    pub(crate) fn size(&self) -> usize {
        self.data.len()
    }

    #[inline]
    fn restart_point(&self, i: usize) -> usize {
        // Validated in `new`; the fallback is unreachable but keeps the read total.
        read_u32(&self.data, self.restart_offset + i * U32_LEN)
            .map_or(self.restart_offset, |r| r as usize)
    }

    /// The whole key of the entry at restart point `i`, read in place.
    #[inline]
    fn restart_key(&self, i: usize) -> Result<&[u8], (usize, &'static str)> {
        self.restart_entry(i).map(|(key, _)| key)
    }

    /// The whole key and the value of the entry at restart point `i`, read in place.
    #[inline]
    pub(crate) fn restart_entry(&self, i: usize) -> Result<KeyValue<'_>, (usize, &'static str)> {
        let at = self.restart_point(i);
        let entries = self.data.get(..self.restart_offset).unwrap_or_default();
        let e = decode_entry(entries, at)?;
        if e.shared != 0 {
            return Err((at, "restart entry shares a key prefix"));
        }
        if e.non_shared < TRAILER_LEN {
            return Err((at, "key shorter than an internal key trailer"));
        }
        // `decode_entry` checked both ranges against `entries`.
        let key = entries.get(e.key_at..e.value_at);
        let value = entries.get(e.value_at..e.value_end);
        key.zip(value).ok_or((at, "entry past the block"))
    }

    /// Number of restart points.
    pub(crate) fn num_restarts(&self) -> usize {
        self.num_restarts
    }
}

#[inline]
fn read_u32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(U32_LEN)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

/// One decoded entry header.
struct Entry {
    shared: usize,
    non_shared: usize,
    key_at: usize,
    value_at: usize,
    value_end: usize,
}

/// How far ahead of the entry it reads a seek's scan prefetches (see [`BlockIter::seek`]).
const SCAN_PREFETCH_BYTES: usize = 256;

/// Decodes the entry at `at` in `entries` (the entry area of a block). Checks that the key delta
/// and the value lie inside `entries`.
#[inline]
fn decode_entry(entries: &[u8], at: usize) -> Result<Entry, (usize, &'static str)> {
    let (shared, non_shared, value_len, header) = match entries.get(at..at + 3) {
        Some(&[a, b, c]) if (a | b | c) < 0x80 => (a as usize, b as usize, c as usize, 3),
        _ => {
            let rest = entries
                .get(at..)
                .ok_or((at, "entry offset past the block"))?;
            let (s, n1) = get_varint32(rest).ok_or((at, "bad entry header"))?;
            let bad = (at, "bad entry header");
            let (ns, n2) = get_varint32(rest.get(n1..).ok_or(bad)?).ok_or(bad)?;
            let (vl, n3) = get_varint32(rest.get(n1 + n2..).ok_or(bad)?).ok_or(bad)?;
            (s as usize, ns as usize, vl as usize, n1 + n2 + n3)
        }
    };
    let key_at = at + header;
    let value_at = key_at
        .checked_add(non_shared)
        .ok_or((at, "entry length overflow"))?;
    let value_end = value_at
        .checked_add(value_len)
        .ok_or((at, "entry length overflow"))?;
    if value_end > entries.len() {
        return Err((at, "entry runs past the block"));
    }
    Ok(Entry {
        shared,
        non_shared,
        key_at,
        value_at,
        value_end,
    })
}

/// Builds a block. Keys must be added in strictly increasing [`compare_internal`] order (the
/// table builder checks this).
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    // INVARIANT: entries added since the last restart point.
    counter: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder that starts a restart point every `restart_interval` entries (at least 1).
    pub(crate) fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Forgets everything added, keeping the allocations.
    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.entries = 0;
    }

    /// True when no entry was added since the last reset.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The size `finish` would return.
    pub(crate) fn size_estimate(&self) -> usize {
        self.buf.len() + (self.restarts.len() + 1) * U32_LEN
    }

    /// Adds an entry.
    ///
    /// # Errors
    /// `InvalidArgument` when a length does not fit the format's 32-bit fields.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            let offset = u32::try_from(self.buf.len())
                .map_err(|_| Error::invalid_argument("SST block larger than 4 GiB"))?;
            self.restarts.push(offset);
            self.counter = 0;
            0
        };
        let too_big = |_| Error::invalid_argument("SST entry larger than 4 GiB");
        let non_shared = u32::try_from(key.len() - shared).map_err(too_big)?;
        let value_len = u32::try_from(value.len()).map_err(too_big)?;
        if self
            .buf
            .len()
            .saturating_add(key.len())
            .saturating_add(value.len())
            > u32::MAX as usize - 64
        {
            return Err(Error::invalid_argument("SST block larger than 4 GiB"));
        }
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared);
        put_varint32(&mut self.buf, value_len);
        let suffix = key.get(shared..).unwrap_or_default();
        self.buf.extend_from_slice(suffix);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(suffix);
        self.counter += 1;
        self.entries += 1;
        Ok(())
    }

    /// Appends the restart array and returns the finished block bytes. Call `reset` before
    /// adding again.
    pub(crate) fn finish(&mut self) -> &[u8] {
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        self.buf
            .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        &self.buf
    }
}

/// A double-ended cursor over one block. `B` is `Arc<Block>` for owned cursors (table iterators)
/// and `&Block` for short-lived lookups (no reference-count traffic on the hot path).
pub(crate) struct BlockIter<B: Deref<Target = Block>> {
    block: B,
    // INVARIANT: `current == block.restart_offset` exactly when the cursor is not on an entry.
    current: usize,
    // The offset just after the current entry (where `next` decodes).
    next: usize,
    // INVARIANT: when valid, restart_point(restart_index) <= current and the next restart point
    // (if any) is > current.
    restart_index: usize,
    key: Vec<u8>,
    value_at: usize,
    value_end: usize,
    err: Option<(usize, &'static str)>,
}

impl<B: Deref<Target = Block>> BlockIter<B> {
    /// An unpositioned cursor.
    pub(crate) fn new(block: B) -> BlockIter<B> {
        BlockIter::with_buffer(block, Vec::new())
    }

    /// An unpositioned cursor that builds keys in `buf` (reused to save an allocation).
    pub(crate) fn with_buffer(block: B, mut buf: Vec<u8>) -> BlockIter<B> {
        buf.clear();
        let end = block.restart_offset;
        BlockIter {
            block,
            current: end,
            next: end,
            restart_index: 0,
            key: buf,
            value_at: 0,
            value_end: 0,
            err: None,
        }
    }

    /// Takes back the key buffer.
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        self.key
    }

    /// Switches the cursor to another block (unpositioned), keeping the key buffer.
    pub(crate) fn reset(&mut self, block: B) {
        self.current = block.restart_offset;
        self.next = block.restart_offset;
        self.block = block;
        self.restart_index = 0;
        self.key.clear();
        self.err = None;
    }

    /// The corruption met, as `(offset in the decoded block, what)`.
    pub(crate) fn corruption(&self) -> Option<(usize, &'static str)> {
        self.err
    }

    #[inline]
    pub(crate) fn valid(&self) -> bool {
        self.current < self.block.restart_offset && self.err.is_none()
    }

    #[inline]
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    #[inline]
    pub(crate) fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value_at..self.value_end)
            .unwrap_or_default()
    }

    /// Leaves the cursor unpositioned (a recorded corruption stays).
    pub(crate) fn invalidate(&mut self) {
        self.current = self.block.restart_offset;
        self.next = self.block.restart_offset;
        self.restart_index = self.block.num_restarts;
        self.key.clear();
    }

    fn fail(&mut self, err: (usize, &'static str)) {
        if self.err.is_none() {
            self.err = Some(err);
        }
        self.invalidate();
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next = self.block.restart_point(i);
    }

    /// Decodes the entry at `self.next`. Returns false at the end of the block or on corruption.
    #[inline]
    fn parse_next(&mut self) -> bool {
        let limit = self.block.restart_offset;
        if self.next >= limit {
            self.invalidate();
            return false;
        }
        let at = self.next;
        let entries = self.block.data.get(..limit).unwrap_or_default();
        let e = match decode_entry(entries, at) {
            Ok(e) => e,
            Err(err) => {
                self.fail(err);
                return false;
            }
        };
        if e.shared > self.key.len() {
            self.fail((at, "entry shares more bytes than the previous key has"));
            return false;
        }
        if e.shared + e.non_shared < TRAILER_LEN {
            self.fail((at, "key shorter than an internal key trailer"));
            return false;
        }
        let Some(suffix) = entries.get(e.key_at..e.value_at) else {
            self.fail((at, "entry past the block"));
            return false;
        };
        self.key.truncate(e.shared);
        self.key.extend_from_slice(suffix);
        self.current = at;
        self.next = e.value_end;
        self.value_at = e.value_at;
        self.value_end = e.value_end;
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1) <= at
        {
            self.restart_index += 1;
        }
        true
    }

    pub(crate) fn seek_to_first(&mut self) {
        if self.err.is_some() {
            return;
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    pub(crate) fn seek_to_last(&mut self) {
        if self.err.is_some() {
            return;
        }
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next < self.block.restart_offset {}
    }

    /// Moves to the first entry whose key is `>= target`.
    pub(crate) fn seek(&mut self, target: &[u8]) {
        if self.err.is_some() {
            return;
        }
        // Find the last restart point whose key is < target.
        let (mut left, mut right) = (0usize, self.block.num_restarts - 1);
        // A positioned cursor narrows the search when the target is ahead of it (scans).
        if self.valid() && compare_internal(&self.key, target) == Ordering::Less {
            left = self.restart_index;
        }
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            match self.block.restart_key(mid) {
                Ok(k) if compare_internal(k, target) == Ordering::Less => left = mid,
                Ok(_) => right = mid - 1,
                Err(e) => return self.fail(e),
            }
        }
        self.seek_to_restart(left);
        let data = self.block.data.as_ptr_range();
        while self.parse_next() {
            if compare_internal(&self.key, target) != Ordering::Less {
                return;
            }
            // The scan reads each entry's header and key, an entry apart: start loading the
            // memory a few entries ahead (a block not in the cache costs a miss per entry).
            let ahead = data.start.wrapping_add(self.next + SCAN_PREFETCH_BYTES);
            if ahead < data.end {
                crate::memtable::prefetch(ahead);
            }
        }
    }

    /// Moves to the last entry whose key is `<= target`.
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.err.is_some() {
            return;
        }
        if !self.valid() {
            self.seek_to_last();
        } else if compare_internal(&self.key, target) == Ordering::Greater {
            self.prev();
        }
    }

    pub(crate) fn next(&mut self) {
        if self.valid() {
            self.parse_next();
        }
    }

    /// Moves to the previous entry by rescanning from the restart point before the current one.
    pub(crate) fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        let original = self.current;
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        loop {
            if !self.parse_next() {
                return;
            }
            if self.next >= original {
                break;
            }
        }
        if self.next != original {
            self.fail((self.current, "entries do not chain"));
        }
    }
}

impl<B: Deref<Target = Block> + Send> InternalIterator for BlockIter<B> {
    fn valid(&self) -> bool {
        BlockIter::valid(self)
    }
    fn seek_to_first(&mut self) {
        BlockIter::seek_to_first(self)
    }
    fn seek_to_last(&mut self) {
        BlockIter::seek_to_last(self)
    }
    fn seek(&mut self, target: &[u8]) {
        BlockIter::seek(self, target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        BlockIter::seek_for_prev(self, target)
    }
    fn next(&mut self) {
        BlockIter::next(self)
    }
    fn prev(&mut self) {
        BlockIter::prev(self)
    }
    fn key(&self) -> &[u8] {
        BlockIter::key(self)
    }
    fn value(&self) -> &[u8] {
        BlockIter::value(self)
    }
    /// A standalone block cursor does not know its file; table cursors report the file and offset.
    fn status(&self) -> Result<()> {
        match self.err {
            Some((at, what)) => Err(Error::corruption(Path::new("<block>"), at as u64, what)),
            None => Ok(()),
        }
    }
}
