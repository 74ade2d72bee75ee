//! Open blob files, shared by readers and garbage collection, and the read of a value through a
//! `BlobRef`.
//!
//! A reader resolves a reference with the version it read the reference from: the version maps the
//! logical file to its current physical file and says where the record sits in it (by rank of the
//! survivors bitmap after a GC). Every record read is checked: its checksum, and that it holds the
//! key and the value length the reference expects. A mismatch is `Corruption` naming the file and
//! the offset, never a wrong value.
//!
//! Concurrency: the cache is shared by all threads; a blob file is opened once and read by many.
//! Entries are evicted when the physical file is deleted.

use crate::blob::{BlobReader, DirectBlobs};
use crate::compaction::job::decode_blob_ref;
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::filename;
use crate::fs::Fs;
use crate::version::blob_files::BlobFiles;
use std::path::PathBuf;
use std::sync::Arc;

/// Open blob files by physical number. Cloning gives another handle to the same cache.
#[derive(Clone)]
pub(crate) struct BlobFileCache {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    files: quick_cache::sync::Cache<u64, Arc<BlobReader>>,
    direct: DirectBlobs,
}

impl BlobFileCache {
    pub(crate) fn new(dir: PathBuf, fs: Arc<dyn Fs>, capacity: usize) -> BlobFileCache {
        BlobFileCache {
            inner: Arc::new(Inner {
                dir,
                fs,
                files: quick_cache::sync::Cache::new(capacity.max(16)),
                direct: DirectBlobs::default(),
            }),
        }
    }

    /// The open physical blob file `number`, opening it on a miss.
    ///
    /// # Errors
    /// `Io` when the file cannot be opened; `Corruption` when its header, footer or offsets fail
    /// validation.
    pub(crate) fn get(&self, number: u64) -> Result<Arc<BlobReader>> {
        let inner = &self.inner;
        inner.files.get_or_insert_with(&number, || {
            let path = filename::blob(&inner.dir, number);
            let file = inner
                .fs
                .open(&path)
                .ctx(|| format!("open {}", path.display()))?;
            BlobReader::open(file, path).map(Arc::new)
        })
    }

    /// The blob files written by the write path that the version does not hold yet.
    pub(crate) fn direct(&self) -> &DirectBlobs {
        &self.inner.direct
    }

    /// Forgets physical file `number` (it is being deleted).
    pub(crate) fn evict(&self, number: u64) {
        self.inner.files.remove(&number);
    }

    /// The value that the `BlobRef` `value` of `user_key` points to, found through `blobs`.
    ///
    /// # Errors
    /// `Corruption` when the reference is malformed, names a file or record the version does not
    /// hold, or the record read back is damaged or belongs to another key.
    pub(crate) fn read(&self, blobs: &BlobFiles, user_key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
        let r = decode_blob_ref(user_key, value)?;
        let corrupt = |what: String| Error::new(ErrorKind::Corruption, what);
        let (physical, index, record) = match blobs.get(&r.file) {
            Some(meta) => {
                let index = meta.index_of(r.ordinal).ok_or_else(|| {
                    corrupt(format!(
                        "a blob reference names record {} of blob file {}, which its physical file {} does not hold",
                        r.ordinal, r.file, meta.physical
                    ))
                })?;
                let reader = self.get(meta.physical)?;
                let record = if meta.survivors.is_none() {
                    reader.get_at(r.offset, index)?
                } else {
                    reader.get(index)?
                };
                (meta.physical, index, record)
            }
            // Written by the write path, not flushed yet: one record, never rewritten.
            None if r.ordinal == 0 && self.inner.direct.contains(r.file) => {
                (r.file, 0, self.get(r.file)?.get_at(r.offset, 0)?)
            }
            None => {
                return Err(corrupt(format!(
                    "a blob reference names blob file {}, which the version does not hold",
                    r.file
                )))
            }
        };
        if record.key.as_ref() != user_key || record.value.len() != r.value_len as usize {
            let path = filename::blob(&self.inner.dir, physical);
            return Err(Error::corruption(
                &path,
                r.offset,
                format!(
                    "record {index} holds another key or value length than its reference expects"
                ),
            ));
        }
        Ok(record.value.to_vec())
    }
}
