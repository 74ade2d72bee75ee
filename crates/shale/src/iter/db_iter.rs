//! The user-facing iterator: live key-value pairs of a snapshot, within bounds, both ends.
//!
//! Purpose: turn a merged cursor over internal keys (every version of every key, tombstones
//! included) into the pairs a user sees at a snapshot. For each user key the newest entry with a
//! sequence number `<=` the snapshot decides: a value is yielded, a tombstone hides the key, older
//! versions are skipped.
//!
//! Shape: [`DbIterator`] is a Rust double-ended iterator. The front end and the back end each own
//! a merged cursor of their own (the back one is built lazily, on the first `next_back`), so a
//! cursor only ever moves one way and never pays for a direction switch. The ends meet in the
//! middle: each remembers the last user key it consumed, and the other end stops before reaching
//! it, so no pair is returned twice.
//!
//! Invariants:
//! - The front end has consumed every user key `<=` `front.key` (when `front.consumed`), the back
//!   end every user key `>=` `back.key` (when `back.consumed`); both are inside the bounds.
//! - When `front.parked`, the front cursor sits on the entry it yielded last; the back cursor
//!   always rests on the first entry it has not consumed.
//! - Keys with many versions are skipped by seeking after [`MAX_SEQUENTIAL_SKIP`] steps, so a hot
//!   key does not make a scan linear in its history.
//! - After an error or the end, the iterator is fused: it releases its cursors and what they pin
//!   and returns `None` from both ends.
//!
//! Errors: a source error, an internal key that fails to parse (`Corruption`), a failed blob
//! lookup, or a blob reference without a resolver (`NotSupported`) is yielded once as `Err`.
//! An iterator made with a [`SkipLog`] (`ReadOptions::skip_unreadable`) instead steps over a key
//! whose blob record cannot be read and records it there; its table cursors do the same for data
//! blocks. [`DbIterator::skipped`] reports what was stepped over.
//!
//! Concurrency: a `DbIterator` is `Send` and used by one thread at a time. What it reads is either
//! immutable (tables of the pinned version) or append-only (memtables); entries written after the
//! snapshot are newer than it and filtered out, so both ends see the same set of pairs.

use super::skip::{skippable, SkipLog, Skipped, SkippedKind};
use super::InternalIterator;
use crate::blob::BlobRef;
use crate::error::{Error, ErrorKind, Result};
use crate::key::{self, SeqNo, ValueKind, KIND_FOR_SEEK, MAX_SEQNO};
use std::any::Any;
use std::fmt;
use std::iter::FusedIterator;
use std::ops::Bound;
use std::sync::Arc;

/// Entries of one user key stepped over one at a time before the cursor seeks past them instead.
/// A step is much cheaper than a seek of a merged cursor, so a few steps come first.
pub(crate) const MAX_SEQUENTIAL_SKIP: usize = 8;

/// Builds a fresh merged cursor over every source of a read (memtables and levels).
pub(crate) type SourceFactory = Box<dyn Fn() -> Box<dyn InternalIterator> + Send>;

/// Turns a blob reference (`user key`, `BlobRef` value) into the value it points to.
pub(crate) type BlobResolver = Arc<dyn Fn(&[u8], &[u8]) -> Result<Vec<u8>> + Send + Sync>;

/// A key-value pair as yielded to the user.
type Pair = (Vec<u8>, Vec<u8>);

/// Where one end of the iterator stands.
#[derive(Default)]
struct End {
    /// The last user key this end consumed (the front: the largest, the back: the smallest).
    // INVARIANT: meaningful only when `consumed`; between calls it is the last key yielded.
    key: Vec<u8>,
    consumed: bool,
    /// Front end only: the cursor sits on the entry yielded last and must step off it first.
    parked: bool,
}

/// An iterator over the live key-value pairs of a snapshot, in key order, from both ends.
///
/// Returned by the database's range, prefix and full iteration calls. Each item is a
/// `Result<(key, value)>`; after the first `Err`, or once the ends meet, the iterator yields
/// `None` from both ends. The iterator holds the data it reads alive (the version, the memtables
/// and the snapshot) until it is exhausted or dropped.
pub struct DbIterator {
    // Field order is drop order: cursors first, then what they borrow from, then the pin.
    front: Option<Box<dyn InternalIterator>>,
    back: Option<Box<dyn InternalIterator>>,
    make_source: Option<SourceFactory>,
    resolve: Option<BlobResolver>,
    pin: Option<Box<dyn Any + Send>>,
    front_end: End,
    back_end: End,
    snapshot: SeqNo,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// Seek targets, built in place. Reused.
    scratch: Vec<u8>,
    /// The back end's candidate value while it walks the versions of a key.
    saved_value: Vec<u8>,
    done: bool,
    /// Set for a scan that skips unreadable data; kept after the iterator is exhausted.
    skips: Option<Arc<SkipLog>>,
}

impl DbIterator {
    /// An iterator over the user keys in `(lower, upper)` visible at `snapshot`.
    ///
    /// `make_source` builds a merged cursor over every source; it is called once for the front end
    /// and once more, lazily, if the back end is used. `resolve` reads values stored in blob files;
    /// without it a `BlobRef` entry yields a `NotSupported` error. `pin` is held until the iterator
    /// is exhausted or dropped, after every cursor.
    pub(crate) fn new(
        make_source: SourceFactory,
        snapshot: SeqNo,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        resolve: Option<BlobResolver>,
        pin: Box<dyn Any + Send>,
    ) -> DbIterator {
        DbIterator {
            front: None,
            back: None,
            make_source: Some(make_source),
            resolve,
            pin: Some(pin),
            front_end: End::default(),
            back_end: End::default(),
            snapshot,
            lower,
            upper,
            scratch: Vec::new(),
            saved_value: Vec::new(),
            done: false,
            skips: None,
        }
    }

    /// Makes this a scan that steps over unreadable data, recording it in `log` (which the
    /// table cursors of `make_source` share).
    pub(crate) fn with_skip_log(mut self, log: Arc<SkipLog>) -> DbIterator {
        self.skips = Some(log);
        self
    }

    /// What this iterator stepped over so far, in the order met (at most
    /// [`crate::iter::MAX_SKIPS_KEPT`]; [`DbIterator::skipped_count`] counts them all). Always
    /// empty for an iterator that does not skip (the default: it fails on unreadable data).
    ///
    /// The pairs yielded are exact outside the ranges listed; inside them a key may be missing
    /// or show an older version (see [`Skipped`]).
    pub fn skipped(&self) -> Vec<Skipped> {
        self.skips.as_ref().map_or_else(Vec::new, |log| log.kept())
    }

    /// How many distinct pieces of unreadable data (blocks, tables, blob records) this iterator
    /// stepped over so far.
    pub fn skipped_count(&self) -> u64 {
        self.skips.as_ref().map_or(0, |log| log.count())
    }

    /// True for an iterator that steps over unreadable data (`ReadOptions::skip_unreadable`).
    pub fn skips_unreadable(&self) -> bool {
        self.skips.is_some()
    }

    /// Fuses the iterator and lets go of everything it holds, cursors before the pin.
    fn finish(&mut self) {
        self.done = true;
        self.front = None;
        self.back = None;
        self.make_source = None;
        self.resolve = None;
        self.pin = None;
    }

    /// Turns the outcome of one step into an item, fusing on the end or an error.
    fn settle(&mut self, step: Result<Option<Pair>>) -> Option<Result<Pair>> {
        match step {
            Ok(Some(pair)) => Some(Ok(pair)),
            Ok(None) => {
                self.finish();
                None
            }
            Err(e) => {
                self.finish();
                Some(Err(e))
            }
        }
    }

    /// The sequence number used in seek targets (a snapshot above the trailer range sees all).
    fn seek_seq(&self) -> SeqNo {
        self.snapshot.min(MAX_SEQNO)
    }

    /// Builds the front cursor and positions it on the first entry at or after the lower bound.
    fn open_front(&mut self) -> Result<()> {
        let mut cursor = self.new_source()?;
        let seq = self.seek_seq();
        match &self.lower {
            Bound::Included(k) => {
                self.scratch.clear();
                key::append_internal_key(&mut self.scratch, k, seq, KIND_FOR_SEEK);
                cursor.seek(&self.scratch);
            }
            Bound::Excluded(k) => {
                // The smallest user key after `k` is `k ++ [0]`.
                self.scratch.clear();
                self.scratch.extend_from_slice(k);
                self.scratch.push(0);
                push_trailer(&mut self.scratch, seq, KIND_FOR_SEEK);
                cursor.seek(&self.scratch);
            }
            Bound::Unbounded => cursor.seek_to_first(),
        }
        self.front = Some(cursor);
        Ok(())
    }

    /// Builds the back cursor and positions it on the last entry at or before the upper bound.
    fn open_back(&mut self) -> Result<()> {
        let mut cursor = self.new_source()?;
        match &self.upper {
            Bound::Included(k) => {
                // The last internal key of user key `k` has the smallest trailer.
                self.scratch.clear();
                key::append_internal_key(&mut self.scratch, k, 0, 0);
                cursor.seek_for_prev(&self.scratch);
            }
            Bound::Excluded(k) => {
                // This target sorts before every entry of `k`.
                self.scratch.clear();
                key::append_internal_key(&mut self.scratch, k, MAX_SEQNO, KIND_FOR_SEEK);
                cursor.seek_for_prev(&self.scratch);
            }
            Bound::Unbounded => cursor.seek_to_last(),
        }
        self.back = Some(cursor);
        Ok(())
    }

    fn new_source(&self) -> Result<Box<dyn InternalIterator>> {
        match &self.make_source {
            Some(make) => Ok(make()),
            None => Err(Error::new(
                ErrorKind::InvalidArgument,
                "iterator used after it was exhausted",
            )),
        }
    }

    /// Finds the next pair from the front, or `None` when the front reaches the upper bound or
    /// the keys the back end consumed.
    fn front_step(&mut self) -> Result<Option<Pair>> {
        if self.front.is_none() {
            self.open_front()?;
        }
        let seek_seq = self.seek_seq();
        let DbIterator {
            front,
            front_end: fe,
            back_end: be,
            snapshot,
            upper,
            scratch,
            resolve,
            skips,
            ..
        } = self;
        let snapshot = *snapshot;
        let Some(src) = front.as_mut() else {
            return Ok(None);
        };
        if fe.parked {
            fe.parked = false;
            src.next();
        }
        // `fe.key` is the user key being worked on: when `done_with_key`, every remaining version
        // of it is skipped; otherwise its newest visible version has not been reached yet.
        let mut have_key = fe.consumed;
        let mut done_with_key = true;
        let mut steps = 0usize;
        loop {
            if !src.valid() {
                src.status()?;
                return Ok(None);
            }
            let ikey = src.key();
            let p = parse(ikey)?;
            let limit_reached = if be.consumed {
                p.user_key >= be.key.as_slice()
            } else {
                above(p.user_key, upper)
            };
            if limit_reached {
                return Ok(None);
            }
            if have_key && p.user_key == fe.key.as_slice() {
                if done_with_key || p.seq > snapshot {
                    steps += 1;
                    if steps > MAX_SEQUENTIAL_SKIP {
                        steps = 0;
                        scratch.clear();
                        if done_with_key {
                            // Past every version of the key: the next user key is >= key ++ [0].
                            scratch.extend_from_slice(&fe.key);
                            scratch.push(0);
                            push_trailer(scratch, MAX_SEQNO, KIND_FOR_SEEK);
                        } else {
                            // Straight to the newest version visible at the snapshot.
                            key::append_internal_key(scratch, &fe.key, seek_seq, KIND_FOR_SEEK);
                        }
                        src.seek(scratch);
                    } else {
                        src.next();
                    }
                    continue;
                }
            } else {
                fe.key.clear();
                fe.key.extend_from_slice(p.user_key);
                have_key = true;
                done_with_key = false;
                steps = 0;
                if p.seq > snapshot {
                    steps = 1;
                    src.next();
                    continue;
                }
            }
            // `p` is the newest version of `fe.key` visible at the snapshot: it decides.
            done_with_key = true;
            let value = match p.kind {
                ValueKind::Deletion => {
                    steps += 1;
                    src.next();
                    continue;
                }
                ValueKind::Value => src.value().to_vec(),
                ValueKind::BlobRef => match resolve_blob(resolve, p.user_key, src.value()) {
                    Ok(value) => value,
                    Err(e) => {
                        skip_blob(skips, p.user_key, src.value(), e)?;
                        steps += 1;
                        src.next();
                        continue;
                    }
                },
            };
            fe.consumed = true;
            fe.parked = true;
            return Ok(Some((fe.key.clone(), value)));
        }
    }

    /// Finds the next pair from the back, or `None` when the back reaches the lower bound or the
    /// keys the front end consumed.
    fn back_step(&mut self) -> Result<Option<Pair>> {
        if self.back.is_none() {
            self.open_back()?;
        }
        let seek_seq = self.seek_seq();
        let DbIterator {
            back,
            front_end: fe,
            back_end: be,
            snapshot,
            lower,
            scratch,
            saved_value,
            resolve,
            skips,
            ..
        } = self;
        let snapshot = *snapshot;
        let Some(src) = back.as_mut() else {
            return Ok(None);
        };
        loop {
            if !src.valid() {
                src.status()?;
                return Ok(None);
            }
            let p = parse(src.key())?;
            let limit_reached = if fe.consumed {
                p.user_key <= fe.key.as_slice()
            } else {
                below(p.user_key, lower)
            };
            if limit_reached {
                return Ok(None);
            }
            be.key.clear();
            be.key.extend_from_slice(p.user_key);
            // Walking backward meets the versions of a key oldest first: the visible ones, then
            // the ones newer than the snapshot. The last visible one met decides.
            let mut decision: Option<ValueKind> = None;
            let (mut seq, mut kind) = (p.seq, p.kind);
            let mut steps = 0usize;
            loop {
                // The cursor is on a version of `be.key` with sequence number `seq`.
                if seq > snapshot {
                    skip_back_past(src, &be.key, scratch, steps)?;
                    break;
                }
                decision = Some(kind);
                saved_value.clear();
                saved_value.extend_from_slice(src.value());
                if steps >= MAX_SEQUENTIAL_SKIP {
                    decision = Some(jump_to_newest_visible(
                        src,
                        &be.key,
                        snapshot,
                        seek_seq,
                        scratch,
                        saved_value,
                    )?);
                    break;
                }
                src.prev();
                steps += 1;
                if !src.valid() {
                    src.status()?;
                    break;
                }
                let q = parse(src.key())?;
                if q.user_key != be.key.as_slice() {
                    break;
                }
                (seq, kind) = (q.seq, q.kind);
            }
            be.consumed = true;
            let value = match decision {
                None | Some(ValueKind::Deletion) => continue,
                Some(ValueKind::Value) => std::mem::take(saved_value),
                Some(ValueKind::BlobRef) => match resolve_blob(resolve, &be.key, saved_value) {
                    Ok(value) => value,
                    Err(e) => {
                        skip_blob(skips, &be.key, saved_value, e)?;
                        continue;
                    }
                },
            };
            return Ok(Some((be.key.clone(), value)));
        }
    }
}

/// Steps the back cursor off the remaining versions of `user_key` (all newer than the snapshot),
/// seeking once the walk gets long. `steps` is how far the walk over this key has gone already.
fn skip_back_past(
    src: &mut Box<dyn InternalIterator>,
    user_key: &[u8],
    scratch: &mut Vec<u8>,
    mut steps: usize,
) -> Result<()> {
    loop {
        if steps >= MAX_SEQUENTIAL_SKIP {
            scratch.clear();
            key::append_internal_key(scratch, user_key, MAX_SEQNO, KIND_FOR_SEEK);
            src.seek_for_prev(scratch);
            return src.status();
        }
        src.prev();
        steps += 1;
        if !src.valid() {
            return src.status();
        }
        if parse(src.key())?.user_key != user_key {
            return Ok(());
        }
    }
}

/// For a key with a long history: reads its newest visible version with a forward seek (into
/// `saved_value`, returning its kind), then leaves the cursor on the last entry before the key.
fn jump_to_newest_visible(
    src: &mut Box<dyn InternalIterator>,
    user_key: &[u8],
    snapshot: SeqNo,
    seek_seq: SeqNo,
    scratch: &mut Vec<u8>,
    saved_value: &mut Vec<u8>,
) -> Result<ValueKind> {
    scratch.clear();
    key::append_internal_key(scratch, user_key, seek_seq, KIND_FOR_SEEK);
    src.seek(scratch);
    if !src.valid() {
        src.status()?;
        return Err(vanished(user_key));
    }
    let p = parse(src.key())?;
    if p.user_key != user_key || p.seq > snapshot {
        return Err(vanished(user_key));
    }
    let kind = p.kind;
    saved_value.clear();
    saved_value.extend_from_slice(src.value());
    scratch.clear();
    key::append_internal_key(scratch, user_key, MAX_SEQNO, KIND_FOR_SEEK);
    src.seek_for_prev(scratch);
    src.status()?;
    Ok(kind)
}

/// The error for a version that a re-seek could not find again (the sources are inconsistent).
fn vanished(user_key: &[u8]) -> Error {
    Error::new(
        ErrorKind::Corruption,
        format!(
            "iterator: a visible version of a {}-byte key disappeared on re-seek",
            user_key.len()
        ),
    )
}

#[inline]
fn parse(ikey: &[u8]) -> Result<key::ParsedKey<'_>> {
    key::parse_internal_key(ikey).ok_or_else(|| {
        Error::new(
            ErrorKind::Corruption,
            format!(
                "iterator: malformed internal key of {} bytes (too short or unknown kind)",
                ikey.len()
            ),
        )
    })
}

fn resolve_blob(
    resolve: &Option<BlobResolver>,
    user_key: &[u8],
    blob_ref: &[u8],
) -> Result<Vec<u8>> {
    match resolve {
        Some(resolve) => resolve(user_key, blob_ref),
        None => Err(Error::new(
            ErrorKind::NotSupported,
            "iterator: entry is a blob reference but this read has no blob resolver",
        )),
    }
}

/// A blob record of `user_key` (reference `blob_ref`) could not be read with `err`: `Err(err)`
/// unless this is a skipping scan and the error is one it steps over; then the key is recorded
/// as skipped and `Ok` lets the scan go on without it.
fn skip_blob(
    skips: &Option<Arc<SkipLog>>,
    user_key: &[u8],
    blob_ref: &[u8],
    err: Error,
) -> Result<()> {
    let Some(log) = skips.as_ref().filter(|_| skippable(&err)) else {
        return Err(err);
    };
    let (file, offset) = match BlobRef::decode(blob_ref) {
        Some(r) => (crate::filename::blob_name(r.file), r.offset),
        None => ("(malformed blob reference)".to_string(), 0),
    };
    log.record(Skipped {
        kind: SkippedKind::BlobRecord,
        file,
        offset,
        start: Bound::Included(user_key.to_vec()),
        end: Bound::Included(user_key.to_vec()),
        error: err,
    });
    Ok(())
}

/// Appends the trailer `(seq, kind)` to a seek target.
#[inline]
fn push_trailer(buf: &mut Vec<u8>, seq: SeqNo, kind: u8) {
    key::append_internal_key(buf, &[], seq, kind);
}

/// True when `user_key` lies beyond the upper bound.
#[inline]
fn above(user_key: &[u8], upper: &Bound<Vec<u8>>) -> bool {
    match upper {
        Bound::Included(k) => user_key > k.as_slice(),
        Bound::Excluded(k) => user_key >= k.as_slice(),
        Bound::Unbounded => false,
    }
}

/// True when `user_key` lies below the lower bound.
#[inline]
fn below(user_key: &[u8], lower: &Bound<Vec<u8>>) -> bool {
    match lower {
        Bound::Included(k) => user_key < k.as_slice(),
        Bound::Excluded(k) => user_key <= k.as_slice(),
        Bound::Unbounded => false,
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.front_step();
        self.settle(step)
    }
}

impl DoubleEndedIterator for DbIterator {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.back_step();
        self.settle(step)
    }
}

impl FusedIterator for DbIterator {}

impl fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbIterator")
            .field("snapshot", &self.snapshot)
            .field("lower", &self.lower)
            .field("upper", &self.upper)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// The upper bound of the keys that start with `prefix`: the smallest key greater than all of
/// them, as an exclusive bound.
///
/// Returns `Unbounded` when no such key exists: for an empty prefix, or one made only of `0xFF`
/// bytes (every key after it still starts with it).
pub fn prefix_upper_bound(prefix: &[u8]) -> Bound<Vec<u8>> {
    match prefix.iter().rposition(|&b| b != 0xff) {
        Some(i) => {
            let mut end = prefix[..=i].to_vec();
            end[i] += 1;
            Bound::Excluded(end)
        }
        None => Bound::Unbounded,
    }
}
