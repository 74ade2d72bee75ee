//! Large values on the write path: each value of at least `Options::large_value_size` bytes is
//! written to a blob file of its own before its batch joins a write group, and the batch carries
//! a `BlobRef` in its place (see `blob::direct`).
//!
//! Order of a write with large values, and what a crash at each point leaves:
//! 1. each large value is written to a new blob file, which is synced; then the directory is
//!    synced. The file numbers are pending outputs meanwhile. A crash here leaves files that no
//!    WAL names: the next open removes them.
//! 2. the leader of the write group registers the files with the active memtable
//!    ([`DirectBlobs`](crate::blob::DirectBlobs)), then appends the batch (with the references)
//!    to that memtable's WAL, as any write. From here on the files live as long as that
//!    memtable, whether or not the append succeeded, since a failed append may still have left
//!    the record in the WAL for recovery to replay.
//! 3. the flush of the memtable adds every file its SST refers to to the version, in the edit
//!    that installs the SST; recovery registers the files named by replayed records, and fails
//!    with `Corruption` if one is missing.
//!
//! A write that fails before step 2 removes its files. So a WAL record never names a blob file
//! that is not durable, and a blob file is deleted only once no WAL, memtable or version names
//! it.
//!
//! Memory: the value is copied once, from the caller's batch into the file (and the page cache);
//! the WAL record and the memtable entry hold a reference of a few bytes.

use super::DbInner;
use crate::batch::WriteBatch;
use crate::blob::{self, BlobRef};
use crate::error::{Error, Result};
use crate::filename;
use crate::key::ValueKind;
use crate::memtable::Memtable;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A large value written to its blob file, not yet registered with a memtable.
pub(crate) struct Written {
    number: u64,
    file_size: u64,
    record_bytes: u64,
}

/// Whether `batch` holds a value that [`separate`] would write to a blob file.
pub(crate) fn has_large_values(inner: &DbInner, batch: &WriteBatch) -> bool {
    let limit = inner.options.large_value_size;
    !inner.external_log
        && batch.encoded_len() > limit
        && batch
            .iter()
            .flatten()
            .any(|(kind, _, value)| kind == ValueKind::Value && value.len() >= limit)
}

/// Writes every large value of `batch` to a blob file of its own (synced, and the directory
/// synced) and returns the batch with references in their place, the files written, and the
/// bytes of the values written. The input batch is dropped before this returns, so the values'
/// memory is freed before the write joins the WAL queue.
///
/// # Errors
/// `Io` when a blob file or the directory cannot be written or synced; nothing is left behind.
pub(crate) fn separate(
    inner: &DbInner,
    batch: WriteBatch,
) -> Result<(WriteBatch, Vec<Written>, u64)> {
    let limit = inner.options.large_value_size;
    let mut out = WriteBatch::new();
    let mut written: Vec<Written> = Vec::new();
    let mut value_bytes = 0u64;
    let result = (|| {
        for entry in batch.iter() {
            let (kind, key, value) = entry?;
            if kind != ValueKind::Value || value.len() < limit {
                out.push(kind, key, value);
                continue;
            }
            let number = {
                let mut state = inner.state.lock();
                let n = state.versions.new_file_number();
                state.pending_outputs.insert(n);
                n
            };
            let path = filename::blob(&inner.dir, number);
            let w = blob::write_value(&inner.fs, &path, number, key, value);
            let w = match w {
                Ok(w) => w,
                Err(e) => {
                    inner.state.lock().pending_outputs.remove(&number);
                    return Err(e);
                }
            };
            written.push(Written {
                number,
                file_size: w.file_size,
                record_bytes: w.record_bytes,
            });
            value_bytes += value.len() as u64;
            out.push(ValueKind::BlobRef, key, &BlobRef::to_vec(w.blob_ref));
        }
        inner
            .fs
            .sync_dir(&inner.dir)
            .map_err(|e| Error::io(e, format!("sync directory {}", inner.dir.display())))
    })();
    drop(batch);
    if let Err(e) = result {
        discard(inner, written);
        return Err(e);
    }
    let c = &inner.counters;
    let file_bytes: u64 = written.iter().map(|w| w.file_size).sum();
    c.blob_bytes_written
        .fetch_add(file_bytes, Ordering::Relaxed);
    Ok((out, written, value_bytes))
}

/// Registers `written` with `mem`, the memtable whose WAL takes their references next (called
/// by the group's leader under the WAL lock, before the append), and ends their protection as
/// pending outputs.
pub(crate) fn register(inner: &DbInner, written: Vec<Written>, mem: &Arc<dyn Memtable>) {
    if written.is_empty() {
        return;
    }
    let direct = inner.blob_cache.direct();
    for w in &written {
        direct.register(w.number, w.file_size, w.record_bytes, mem);
    }
    let mut state = inner.state.lock();
    for w in &written {
        state.pending_outputs.remove(&w.number);
    }
}

/// Removes the files of a write that failed before its leader registered them (no WAL record can
/// name them).
pub(crate) fn discard(inner: &DbInner, written: Vec<Written>) {
    if written.is_empty() {
        return;
    }
    for w in &written {
        let _ = inner.fs.remove_file(&filename::blob(&inner.dir, w.number));
    }
    let mut state = inner.state.lock();
    for w in &written {
        state.pending_outputs.remove(&w.number);
    }
}
