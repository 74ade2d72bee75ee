//! Writing SSTs from a sorted stream of entries: the I/O half of flushes and compactions.
//!
//! [`write_tables`] walks a merged input cursor, applies the [`Retention`] rule, and writes the
//! surviving entries into one or more SSTs. Output files are cut only between user keys (so no user
//! key spans two files of a level), when a file reaches `target_file_size`, or when it would overlap
//! too many bytes of the level below the output (which would make its own compaction expensive).
//!
//! Key-value separation: a flush passes a [`BlobSink`], and every kept value of at least
//! `min_blob_size` bytes goes to a blob file, the SST keeping a `BlobRef`. Every `BlobRef` entry
//! the retention rule drops is reported in [`JobStats::dropped_blobs`]: those records are dead for
//! every reader, and the caller records them in the same MANIFEST edit that installs the outputs.
//!
//! On error every output file written so far is removed; the caller installs nothing.

use super::picker::MAX_GRANDPARENT_OVERLAP_FILES;
use super::retention::{Decision, Retention};
use super::separation::{record_size, BlobSink};
use crate::blob::BlobRef;
use crate::error::{Error, ErrorKind, Result};
use crate::filename;
use crate::fs::Fs;
use crate::iter::InternalIterator;
use crate::key::{append_internal_key, compare_internal, parse_internal_key, ValueKind};
use crate::options::Options;
use crate::sst::{TableBuilder, TableInfo, TableOptions};
use crate::version::edit::{FileMeta, Level};
use std::cmp::Ordering as CmpOrdering;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where and how the outputs are written.
pub(crate) struct OutputSpec<'a> {
    pub dir: &'a Path,
    pub fs: &'a Arc<dyn Fs>,
    pub options: &'a Options,
    pub output_level: Level,
    /// False for a flush: everything goes into one file.
    pub split: bool,
    /// Files of the level below the output level, sorted, for overlap-based cuts.
    pub grandparents: &'a [Arc<FileMeta>],
}

/// A blob record whose last reference a job dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DroppedBlob {
    pub logical: u64,
    pub ordinal: u32,
    /// Size of the record (see `separation::record_size`).
    pub bytes: u64,
}

/// What a job did besides its outputs.
#[derive(Debug, Default, Clone)]
pub(crate) struct JobStats {
    pub entries_in: u64,
    pub entries_dropped: u64,
    pub bytes_written: u64,
    pub dropped_blobs: Vec<DroppedBlob>,
    /// The logical blob files the outputs refer to.
    pub referenced_blobs: std::collections::BTreeSet<u64>,
}

/// Decodes the `BlobRef` value of an entry, or says which entry is damaged.
pub(crate) fn decode_blob_ref(user_key: &[u8], value: &[u8]) -> Result<BlobRef> {
    BlobRef::decode(value).ok_or_else(|| {
        Error::new(
            ErrorKind::Corruption,
            format!(
                "the blob reference of key {:?} is malformed",
                String::from_utf8_lossy(&user_key[..user_key.len().min(64)])
            ),
        )
    })
}

/// Writes the entries of `input` that `retention` keeps. `new_file_number` allocates (and protects
/// from deletion) the number of each output. `key_absent_below(user_key)` tells whether no level
/// below the output can hold the key. Stops with a `Closed` error when `cancel` is set.
pub(crate) fn write_tables(
    input: &mut dyn InternalIterator,
    retention: &mut Retention,
    key_absent_below: &dyn Fn(&[u8]) -> bool,
    spec: &OutputSpec<'_>,
    new_file_number: &mut dyn FnMut() -> u64,
    mut blobs: Option<&mut BlobSink<'_>>,
    cancel: &AtomicBool,
) -> Result<(Vec<FileMeta>, JobStats)> {
    let mut outputs: Vec<FileMeta> = Vec::new();
    let mut written: Vec<u64> = Vec::new();
    let mut result = write_all(
        input,
        retention,
        key_absent_below,
        spec,
        new_file_number,
        blobs.as_deref_mut(),
        cancel,
        &mut outputs,
        &mut written,
    );
    if result.is_ok() {
        if let Some(sink) = blobs.as_deref_mut() {
            if let Err(e) = sink.finish() {
                result = Err(e);
            }
        }
    }
    if result.is_err() {
        for number in written {
            let _ = spec.fs.remove_file(&filename::table(spec.dir, number));
        }
        if let Some(sink) = blobs {
            sink.remove_all();
        }
    }
    result.map(|stats| (outputs, stats))
}

/// An output file being written.
struct Output {
    number: u64,
    builder: TableBuilder,
    last_user_key: Vec<u8>,
}

#[allow(clippy::too_many_arguments)]
fn write_all(
    input: &mut dyn InternalIterator,
    retention: &mut Retention,
    key_absent_below: &dyn Fn(&[u8]) -> bool,
    spec: &OutputSpec<'_>,
    new_file_number: &mut dyn FnMut() -> u64,
    mut blobs: Option<&mut BlobSink<'_>>,
    cancel: &AtomicBool,
    outputs: &mut Vec<FileMeta>,
    written: &mut Vec<u64>,
) -> Result<JobStats> {
    let mut separated_key: Vec<u8> = Vec::new();
    let mut separated_value: Vec<u8> = Vec::new();
    let mut stats = JobStats::default();
    let max_overlap = MAX_GRANDPARENT_OVERLAP_FILES.saturating_mul(spec.options.target_file_size);
    let mut grandparent = 0usize;
    let mut overlap = 0u64;
    let mut current: Option<Output> = None;

    input.seek_to_first();
    while input.valid() {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::new(
                ErrorKind::Closed,
                "compaction cancelled: the database is closing",
            ));
        }
        let ikey = input.key();
        let parsed = parse_internal_key(ikey).ok_or_else(|| {
            Error::new(
                ErrorKind::Corruption,
                "compaction input holds a malformed internal key",
            )
        })?;
        stats.entries_in += 1;

        // Track how much of the level below the current output covers.
        while grandparent < spec.grandparents.len()
            && compare_internal(ikey, &spec.grandparents[grandparent].largest)
                == CmpOrdering::Greater
        {
            if current.is_some() {
                overlap += spec.grandparents[grandparent].file_size;
            }
            grandparent += 1;
        }

        if retention.decide(&parsed, key_absent_below) != Decision::Keep {
            stats.entries_dropped += 1;
            if parsed.kind == ValueKind::BlobRef {
                let r = decode_blob_ref(parsed.user_key, input.value())?;
                stats.dropped_blobs.push(DroppedBlob {
                    logical: r.file,
                    ordinal: r.ordinal,
                    bytes: record_size(parsed.user_key.len(), u64::from(r.value_len)),
                });
            }
            input.next();
            continue;
        }

        let new_user_key = current
            .as_ref()
            .is_none_or(|o| o.last_user_key != parsed.user_key);
        if new_user_key && spec.split {
            let full = current.as_ref().is_some_and(|o| {
                o.builder.estimated_file_size() >= spec.options.target_file_size
                    || overlap > max_overlap
            });
            if full {
                let done = current.take().expect("checked");
                stats.bytes_written += finish(done, &mut stats, outputs)?;
                overlap = 0;
            }
        }
        let out = match &mut current {
            Some(out) => out,
            None => {
                let number = new_file_number();
                let path = filename::table(spec.dir, number);
                let file = spec
                    .fs
                    .create(&path)
                    .map_err(|e| Error::io(e, format!("create {}", path.display())))?;
                written.push(number);
                let opts = TableOptions::for_level(spec.options, spec.output_level);
                current.insert(Output {
                    number,
                    builder: TableBuilder::new(file, path, opts),
                    last_user_key: Vec::new(),
                })
            }
        };
        match parsed.kind {
            ValueKind::Value if spec.options.separates(input.value().len()) && blobs.is_some() => {
                let sink = blobs.as_deref_mut().expect("checked");
                let (r, size) = sink.add(parsed.user_key, input.value())?;
                separated_key.clear();
                append_internal_key(
                    &mut separated_key,
                    parsed.user_key,
                    parsed.seq,
                    ValueKind::BlobRef as u8,
                );
                separated_value.clear();
                r.encode(&mut separated_value);
                out.builder.add(&separated_key, &separated_value)?;
                out.builder.add_blob_reference(r.file, size);
            }
            ValueKind::BlobRef => {
                let r = decode_blob_ref(parsed.user_key, input.value())?;
                out.builder.add(ikey, input.value())?;
                out.builder.add_blob_reference(
                    r.file,
                    record_size(parsed.user_key.len(), u64::from(r.value_len)),
                );
            }
            _ => out.builder.add(ikey, input.value())?,
        }
        if new_user_key {
            out.last_user_key.clear();
            out.last_user_key.extend_from_slice(parsed.user_key);
        }
        input.next();
    }
    input.status()?;
    if let Some(done) = current.take() {
        stats.bytes_written += finish(done, &mut stats, outputs)?;
    }
    Ok(stats)
}

/// Finishes an output file and records its metadata. Returns its size.
fn finish(out: Output, stats: &mut JobStats, outputs: &mut Vec<FileMeta>) -> Result<u64> {
    let info = out.builder.finish()?;
    stats
        .referenced_blobs
        .extend(info.properties.blob_refs.iter().map(|&(file, _)| file));
    let size = info.file_size;
    outputs.push(file_meta(out.number, info));
    Ok(size)
}

/// The version's record of a finished table.
pub(crate) fn file_meta(number: u64, info: TableInfo) -> FileMeta {
    let p = info.properties;
    FileMeta {
        number,
        file_size: info.file_size,
        smallest: info.smallest,
        largest: info.largest,
        smallest_seq: p.smallest_seq,
        largest_seq: p.largest_seq,
        num_entries: p.num_entries,
        num_deletions: p.num_deletions,
        raw_key_bytes: p.raw_key_bytes,
        raw_value_bytes: p.raw_value_bytes,
    }
}
