//! The read path: point lookups, iterators and statistics.
//!
//! A lookup consults the active memtable, the sealed memtables (newest first), the L0 files (newest
//! first) and then one file per deeper level, and stops at the first entry for the key: the newest
//! version visible at the read's sequence number.

use super::{DbInner, Stats, SuperVersion};
use crate::cache::Row;
use crate::compaction::picker;
use crate::error::{Error, Result};
use crate::filename;
use crate::iter::{
    skippable, BlobResolver, DbIterator, InternalIterator, LevelFile, LevelIterator,
    MergingIterator, SkipLog, Skipped, SkippedKind,
};
use crate::key::{
    append_internal_key, parse_internal_key, seek_key, trailer, user_key, SeqNo, ValueKind,
    KIND_FOR_SEEK, MAX_SEQNO, TRAILER_LEN,
};
use crate::memtable::MemtableGet;
use crate::sst::SkipSink;
use crate::version::edit::FileMeta;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The super version to read and the sequence number to read it at: a snapshot's (`Some`), or
/// the latest (`None`), taken so that the two agree.
///
/// The latest sequence number is loaded after the super version, so that every entry the
/// version's files hold is visible at it: a compaction keeps only the newest version of a key
/// that no snapshot needs, and that version, flushed before the compaction began, is at or
/// below the visible sequence number of any later moment. (Loaded before, a compaction
/// installed in between could have dropped the only version a read at the older number sees,
/// and the read would find none.) The super version is then checked to be still current, so
/// every write up to the sequence number is in one of its memtables or its version: a memtable
/// switch installs a new super version, and writes wait for the switch.
fn read_view(inner: &DbInner, seq: Option<SeqNo>) -> (Arc<SuperVersion>, SeqNo) {
    if let Some(seq) = seq {
        return (inner.current_super_version(), seq);
    }
    loop {
        let sv = inner.current_super_version();
        let seq = inner.visible_seq.load(Ordering::Acquire);
        if Arc::ptr_eq(&sv, &inner.super_version.read()) {
            return (sv, seq);
        }
    }
}

/// The newest value of `key` visible at `seq` (`None`: the latest).
pub(crate) fn get(inner: &DbInner, key: &[u8], seq: Option<SeqNo>) -> Result<Option<Vec<u8>>> {
    let (sv, seq) = read_view(inner, seq);
    match get_entry(inner, &sv, key, seq)? {
        None => Ok(None),
        Some((ValueKind::BlobRef, value)) => inner
            .blob_cache
            .read(&sv.version.blobs, key, &value)
            .map(Some),
        Some((_, value)) => Ok(Some(value)),
    }
}

/// The newest entry of `key` visible at `seq` in `sv`, as stored: an inline value or a `BlobRef`
/// (never a tombstone: a deleted key is `None`).
pub(crate) fn get_entry(
    inner: &DbInner,
    sv: &SuperVersion,
    key: &[u8],
    seq: SeqNo,
) -> Result<Option<(ValueKind, Vec<u8>)>> {
    for mem in std::iter::once(&sv.mem).chain(sv.sealed.iter()) {
        match mem.get(key, seq) {
            Some(MemtableGet::Found { kind, value, .. }) => return Ok(Some((kind, value))),
            Some(MemtableGet::Deleted { .. }) => return Ok(None),
            None => {}
        }
    }
    let target = seek_key(key, seq);
    let version = &sv.version;
    for f in &version.levels[0] {
        if overlaps(f, Some(key), Some(key)) {
            if let Some(found) = table_get(inner, f, &target)? {
                return Ok(found);
            }
        }
    }
    for level in 1..version.num_levels() {
        if let Some(f) = version.file_for_key(level, &target) {
            if let Some(found) = table_get(inner, f, &target)? {
                return Ok(found);
            }
        }
    }
    Ok(None)
}

/// What a lookup has decided for one key: `None` while undecided.
type Decided = Option<Result<Option<(ValueKind, Vec<u8>)>>>;

/// The newest value of each of `keys` visible at `seq`: [`get`] for many keys at once, with the
/// same answers. Each phase of the lookup (a memtable, an L0 file, a level) first starts loading
/// what every undecided key reads first in it, then searches for them one by one, so the cache
/// misses of the batch overlap instead of following each other; the super version and each table
/// are fetched once for the batch.
pub(crate) fn multi_get(
    inner: &DbInner,
    keys: &[&[u8]],
    seq: Option<SeqNo>,
) -> Vec<Result<Option<Vec<u8>>>> {
    let (sv, seq) = read_view(inner, seq);
    let mut values = Vec::with_capacity(keys.len());
    for window in keys.chunks(MULTI_GET_WINDOW) {
        values.extend(multi_get_window(inner, &sv, window, seq));
    }
    values
}

/// A [`multi_get`] looks up at most this many keys at once: what it loads ahead for more would be
/// evicted from the processor's cache before it is read.
const MULTI_GET_WINDOW: usize = 64;

/// [`multi_get`] for at most [`MULTI_GET_WINDOW`] keys, in `sv`.
fn multi_get_window(
    inner: &DbInner,
    sv: &SuperVersion,
    keys: &[&[u8]],
    seq: SeqNo,
) -> Vec<Result<Option<Vec<u8>>>> {
    let mut decided: Vec<Decided> = vec![None; keys.len()];
    let mut pending: Vec<usize> = (0..keys.len()).collect();
    for mem in std::iter::once(&sv.mem).chain(sv.sealed.iter()) {
        if pending.is_empty() {
            break;
        }
        for &i in &pending {
            mem.prefetch(keys[i]);
        }
        pending.retain(|&i| {
            let found = match mem.get(keys[i], seq) {
                Some(MemtableGet::Found { kind, value, .. }) => Some((kind, value)),
                Some(MemtableGet::Deleted { .. }) => None,
                None => return true,
            };
            decided[i] = Some(Ok(found));
            false
        });
    }
    if !pending.is_empty() {
        let targets = SeekKeys::new(keys, seq);
        let version = &sv.version;
        let mut here = Vec::with_capacity(pending.len());
        for f in &version.levels[0] {
            here.clear();
            here.extend(
                pending
                    .iter()
                    .copied()
                    .filter(|&i| overlaps(f, Some(keys[i]), Some(keys[i]))),
            );
            table_multi_get(inner, f, &here, &targets, &mut decided);
            pending.retain(|&i| decided[i].is_none());
        }
        for level in 1..version.num_levels() {
            if pending.is_empty() {
                break;
            }
            // Each undecided key has at most one file in the level; take the keys file by file.
            let mut by_file: Vec<(&Arc<FileMeta>, usize)> = pending
                .iter()
                .filter_map(|&i| version.file_for_key(level, &targets[i]).map(|f| (f, i)))
                .collect();
            by_file.sort_unstable_by_key(|&(f, i)| (f.number, i));
            for group in by_file.chunk_by(|a, b| a.0.number == b.0.number) {
                here.clear();
                here.extend(group.iter().map(|&(_, i)| i));
                table_multi_get(inner, group[0].0, &here, &targets, &mut decided);
            }
            pending.retain(|&i| decided[i].is_none());
        }
    }
    keys.iter()
        .zip(decided)
        .map(|(key, d)| match d {
            None | Some(Ok(None)) => Ok(None),
            Some(Err(e)) => Err(e),
            Some(Ok(Some((ValueKind::BlobRef, value)))) => inner
                .blob_cache
                .read(&sv.version.blobs, key, &value)
                .map(Some),
            Some(Ok(Some((_, value)))) => Ok(Some(value)),
        })
        .collect()
}

/// The seek keys of a batch of user keys, in one buffer.
struct SeekKeys {
    bytes: Vec<u8>,
    // INVARIANT: key `i` is `bytes[ends[i - 1]..ends[i]]` (from 0 for the first).
    ends: Vec<usize>,
}

impl SeekKeys {
    fn new(keys: &[&[u8]], seq: SeqNo) -> SeekKeys {
        let total = keys.iter().map(|k| k.len() + TRAILER_LEN).sum();
        let mut bytes = Vec::with_capacity(total);
        let mut ends = Vec::with_capacity(keys.len());
        for key in keys {
            append_internal_key(&mut bytes, key, seq, KIND_FOR_SEEK);
            ends.push(bytes.len());
        }
        SeekKeys { bytes, ends }
    }
}

impl std::ops::Index<usize> for SeekKeys {
    type Output = [u8];
    fn index(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// Looks the keys `here` (indexes into `targets`, their seek keys) up in table `f`, deciding those
/// the file decides (see [`table_get`]). The bloom filter lines of all of them are loaded first,
/// then the data blocks of those the filter and the index let through, then the blocks are
/// searched.
fn table_multi_get(
    inner: &DbInner,
    f: &FileMeta,
    here: &[usize],
    targets: &SeekKeys,
    decided: &mut [Decided],
) {
    if here.is_empty() {
        return;
    }
    if inner.row_cache.is_some() {
        for &i in here {
            decided[i] = table_get(inner, f, &targets[i]).transpose();
        }
        return;
    }
    let table = match inner.table_cache.get(f.number) {
        Ok(table) => table,
        Err(e) => {
            for &i in here {
                decided[i] = Some(Err(e.clone()));
            }
            return;
        }
    };
    for &i in here {
        table.prefetch_filter(user_key(&targets[i]));
    }
    let mut located = Vec::with_capacity(here.len());
    for &i in here {
        match table.locate(&targets[i]) {
            Ok(Some(probe)) => {
                table.prefetch_block(&probe);
                located.push((i, probe));
            }
            Ok(None) => {}
            Err(e) => decided[i] = Some(Err(e)),
        }
    }
    for (i, probe) in located {
        decided[i] = match table.get_located(&targets[i], probe) {
            Ok(None) => None,
            Ok(Some(found)) => Some(to_row(inner, f, found).map(|row| row.entry)),
            Err(e) => Some(Err(e)),
        };
    }
}

/// Looks `target` up in one SST: `Some(entry or None-for-deleted)` when the file decides the key.
///
/// With a row cache: a cached row (the key's newest entry in the table) answers when the read
/// sees it; on a miss the table is searched for the newest entry, which is cached and answers
/// when the read sees it. A read at an older snapshot than the newest entry searches as usual.
#[allow(clippy::type_complexity)]
fn table_get(
    inner: &DbInner,
    f: &FileMeta,
    target: &[u8],
) -> Result<Option<Option<(ValueKind, Vec<u8>)>>> {
    let table = inner.table_cache.get(f.number)?;
    if let Some(rows) = &inner.row_cache {
        let (ukey, seq) = (user_key(target), trailer(target) >> 8);
        let row = match rows.get(f.number, ukey) {
            Some(row) => row,
            None => {
                let Some(newest) = table.get(&seek_key(ukey, MAX_SEQNO))? else {
                    // No entry of the key at all in this table.
                    return Ok(None);
                };
                let row = Arc::new(to_row(inner, f, newest)?);
                rows.insert(f.number, ukey, row.clone());
                row
            }
        };
        if row.seq <= seq {
            return Ok(Some(row.entry.clone()));
        }
    }
    let Some(found) = table.get(target)? else {
        return Ok(None);
    };
    Ok(Some(to_row(inner, f, found)?.entry))
}

/// The entry `(internal key, value)` of table `f` as a row.
fn to_row(inner: &DbInner, f: &FileMeta, (ikey, value): (Vec<u8>, Vec<u8>)) -> Result<Row> {
    let parsed = parse_internal_key(&ikey).ok_or_else(|| {
        Error::corruption(
            &filename::table(&inner.dir, f.number),
            0,
            "malformed internal key",
        )
    })?;
    Ok(Row {
        seq: parsed.seq,
        entry: match parsed.kind {
            ValueKind::Deletion => None,
            kind => Some((kind, value)),
        },
    })
}

/// A cursor that reports `err` and holds nothing.
struct ErrorIter(Error);

impl InternalIterator for ErrorIter {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _: &[u8]) {}
    fn seek_for_prev(&mut self, _: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        Err(self.0.clone())
    }
}

/// A cursor over nothing, for a table a skipping scan could not open.
struct EmptyIter;

impl InternalIterator for EmptyIter {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _: &[u8]) {}
    fn seek_for_prev(&mut self, _: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

/// A cursor over table `number` (internal keys `smallest..=largest`) for a scan: a skipping one
/// when `skips` is set, which also steps over a table that cannot be opened (recording it whole).
fn table_cursor(
    cache: &crate::table_cache::TableCache,
    number: u64,
    (smallest, largest): (&[u8], &[u8]),
    skips: Option<&Arc<SkipLog>>,
) -> Result<Box<dyn InternalIterator>> {
    let table = match (cache.get(number), skips) {
        (Ok(table), _) => table,
        (Err(e), Some(log)) if skippable(&e) => {
            log.record(Skipped {
                kind: SkippedKind::Table,
                file: filename::table(std::path::Path::new(""), number)
                    .display()
                    .to_string(),
                offset: 0,
                start: Bound::Included(user_key(smallest).to_vec()),
                end: Bound::Included(user_key(largest).to_vec()),
                error: e,
            });
            return Ok(Box::new(EmptyIter));
        }
        (Err(e), _) => return Err(e),
    };
    Ok(Box::new(match skips {
        Some(log) => table.iter_skipping(
            true,
            SkipSink {
                log: log.clone(),
                smallest: smallest.to_vec(),
            },
        ),
        None => table.iter(true),
    }))
}

/// An iterator over `[lo, hi]` at `seq`. `pin` is kept alive as long as the iterator. With
/// `skips`, the scan steps over unreadable data and records it there (`ReadOptions`).
pub(crate) fn iterator(
    inner: &Arc<DbInner>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    seq: Option<SeqNo>,
    pin: Box<dyn std::any::Any + Send>,
    skips: Option<Arc<SkipLog>>,
) -> DbIterator {
    let closed = inner.check_open().err();
    let (sv, seq) = read_view(inner, seq);
    let cache = inner.table_cache.clone();
    let source_sv = sv.clone();
    let (range_lo, range_hi) = (user_bound(&lo), user_bound(&hi));
    let (source_lo, source_hi) = (lo.clone(), hi.clone());
    let source_skips = skips.clone();
    let dir: Arc<std::path::Path> = Arc::from(inner.dir.as_path());
    let source_dir = dir.clone();
    let make_source = move || -> Box<dyn InternalIterator> {
        if let Some(e) = &closed {
            return Box::new(ErrorIter(e.clone()));
        }
        let sv = &source_sv;
        let mut children: Vec<Box<dyn InternalIterator>> =
            Vec::with_capacity(2 + sv.sealed.len() + sv.version.num_levels());
        let lo = source_lo.as_ref().map(Vec::as_slice);
        let hi = source_hi.as_ref().map(Vec::as_slice);
        children.push(sv.mem.clone().range_iter(lo, hi));
        children.extend(sv.sealed.iter().map(|m| m.clone().range_iter(lo, hi)));
        for f in &sv.version.levels[0] {
            if !overlaps(f, range_lo.as_deref(), range_hi.as_deref()) {
                continue;
            }
            let bounds = (f.smallest.as_slice(), f.largest.as_slice());
            match table_cursor(&cache, f.number, bounds, source_skips.as_ref()) {
                Ok(cursor) => children.push(cursor),
                Err(e) => children.push(Box::new(ErrorIter(e))),
            }
        }
        for files in sv
            .version
            .levels
            .iter()
            .skip(1)
            .filter(|files| !files.is_empty())
        {
            let files: Vec<LevelFile> = files
                .iter()
                .filter(|f| overlaps(f, range_lo.as_deref(), range_hi.as_deref()))
                .map(|f| LevelFile {
                    smallest: f.smallest.clone(),
                    largest: f.largest.clone(),
                    number: f.number,
                })
                .collect();
            if files.is_empty() {
                continue;
            }
            let cache = cache.clone();
            let files: Arc<[LevelFile]> = files.into();
            let open: crate::iter::OpenFile = match source_skips.clone() {
                None => Arc::new(move |number| {
                    Ok(Box::new(cache.get(number)?.iter(true)) as Box<dyn InternalIterator>)
                }),
                Some(log) => {
                    // The level iterator names a table by number; a skip reports its key range.
                    let bounds: std::collections::HashMap<u64, (Vec<u8>, Vec<u8>)> = files
                        .iter()
                        .map(|f| (f.number, (f.smallest.clone(), f.largest.clone())))
                        .collect();
                    Arc::new(move |number| {
                        let (smallest, largest) = bounds
                            .get(&number)
                            .map_or((&[][..], &[][..]), |(s, l)| (s.as_slice(), l.as_slice()));
                        table_cursor(&cache, number, (smallest, largest), Some(&log))
                    })
                }
            };
            children.push(Box::new(LevelIterator::new(files, open)));
        }
        Box::new(RelativeErrors {
            inner: Box::new(MergingIterator::new(children)),
            dir: source_dir.clone(),
        })
    };
    let blob_cache = inner.blob_cache.clone();
    let blobs = sv.version.blobs.clone();
    let resolve: BlobResolver = Arc::new(move |user_key, value| {
        blob_cache
            .read(&blobs, user_key, value)
            .map_err(|e| e.relative_to(&dir))
    });
    let it = DbIterator::new(
        Box::new(make_source),
        seq,
        lo,
        hi,
        Some(resolve),
        Box::new((sv, pin)),
    );
    match skips {
        Some(log) => it.with_skip_log(log),
        None => it,
    }
}

/// An iterator whose errors name files relative to the data directory `dir`.
struct RelativeErrors {
    inner: Box<dyn InternalIterator>,
    dir: Arc<std::path::Path>,
}

impl InternalIterator for RelativeErrors {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) {
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target)
    }
    fn next(&mut self) {
        self.inner.next()
    }
    fn prev(&mut self) {
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status().map_err(|e| e.relative_to(&self.dir))
    }
}

fn user_bound(b: &Bound<Vec<u8>>) -> Option<Vec<u8>> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k.clone()),
        Bound::Unbounded => None,
    }
}

/// Whether file `f`'s user-key range meets `[lo, hi]` (unbounded where `None`).
fn overlaps(f: &FileMeta, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
    lo.is_none_or(|lo| user_key(&f.largest) >= lo)
        && hi.is_none_or(|hi| user_key(&f.smallest) <= hi)
}

/// Statistics as of now.
pub(crate) fn stats(inner: &DbInner) -> Stats {
    let mut s = Stats::default();
    inner.counters.fill(&mut s);
    {
        let state = inner.state.lock();
        let v = state.versions.current();
        s.files_per_level = v.levels.iter().map(Vec::len).collect();
        s.bytes_per_level = (0..v.num_levels()).map(|l| v.level_bytes(l)).collect();
        s.memtable_bytes = (state.mem.approximate_bytes()
            + state
                .sealed
                .iter()
                .map(|m| m.mem.approximate_bytes())
                .sum::<usize>()) as u64;
        s.sealed_memtables = state.sealed.len() as u64;
        s.membuffer_prefix_bits = (inner.options.memtable == crate::MemtableKind::FloDb)
            .then(|| inner.membuffer_prefix());
        s.pending_compaction_bytes = picker::pending_compaction_bytes(&v, &inner.options);
        s.live_data_bytes = v
            .levels
            .iter()
            .flatten()
            .map(|f| f.raw_key_bytes + f.raw_value_bytes)
            .sum::<u64>()
            + s.memtable_bytes;
        s.snapshots = state.snapshots.values().map(|&n| n as u64).sum();
        s.blob_files = v.blobs.len() as u64;
        s.blob_live_bytes = v.blobs.values().map(|b| b.live_bytes()).sum();
        s.blob_garbage_bytes = v.blobs.values().map(|b| b.garbage_bytes).sum();
        s.live_data_bytes += s.blob_live_bytes;
    }
    if let Some(cache) = &inner.block_cache {
        s.block_cache_hits = cache.hits();
        s.block_cache_misses = cache.misses();
        s.block_cache_bytes = cache.usage_bytes() as u64;
    }
    s.last_sequence = inner.visible_seq.load(Ordering::Acquire);
    s.on_disk_bytes = inner
        .fs
        .list_dir(&inner.dir)
        .map(|names| {
            names
                .iter()
                .filter(|n| filename::parse(n).is_some())
                .filter_map(|n| inner.fs.file_size(&inner.dir.join(n)).ok())
                .sum()
        })
        .unwrap_or(0);
    s.space_amplification = if s.live_data_bytes == 0 {
        0.0
    } else {
        s.on_disk_bytes as f64 / s.live_data_bytes as f64
    };
    s
}
