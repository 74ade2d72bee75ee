//! Large values written straight to blob files by the write path, and the registry of those
//! files until the version knows them.
//!
//! A value of at least `Options::large_value_size` bytes does not travel through the WAL and the
//! memtable (which would hold the write lock for the whole copy, and cost a copy of the value in
//! each): [`write_value`] writes it as the only record of a blob file of its own and syncs it, and
//! the write batch carries a `BlobRef` to it instead. See `db::large_values` for the ordering.
//!
//! [`DirectBlobs`] records each such file with the memtable that holds (or may hold) its
//! reference, until that memtable is gone: the version learns of the file only at the memtable's
//! flush, so meanwhile readers resolve the reference through this registry, and the file is
//! protected from deletion by it.
//!
//! Invariants:
//! - a direct blob file holds exactly one record (ordinal 0, at [`HEADER_LEN`]) and is finished
//!   and synced before any reference to it exists;
//! - GC never rewrites such a file with survivors: its one record is either live (garbage 0) or
//!   dead (the whole file is garbage), so its physical number stays its logical number.
//!
//! Concurrency: the registry is shared by every thread behind one short mutex (a leaf lock:
//! nothing else is taken while it is held).

use super::format::HEADER_LEN;
use super::{record_len, BlobRef, BlobWriter};
use crate::error::{Error, IoContext, Result};
use crate::fs::Fs;
use crate::memtable::Memtable;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Weak};

/// What [`write_value`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WrittenValue {
    /// The reference to store in place of the value.
    pub blob_ref: BlobRef,
    /// The file's size.
    pub file_size: u64,
    /// The record's size, as garbage accounting counts it.
    pub record_bytes: u64,
}

/// Writes `value` of `key` as the only record of a new blob file `path` (logical and physical
/// number `number`) and syncs it. The directory entry is not synced: the caller does that once
/// for all the files of a batch. On error the partial file is removed.
///
/// # Errors
/// `InvalidArgument` for a value of 4 GiB or more; `Io` when the file cannot be written or synced.
pub(crate) fn write_value(
    fs: &Arc<dyn Fs>,
    path: &Path,
    number: u64,
    key: &[u8],
    value: &[u8],
) -> Result<WrittenValue> {
    let value_len = u32::try_from(value.len())
        .map_err(|_| Error::invalid_argument("a value of 4 GiB or more cannot be stored"))?;
    let record_bytes = record_len(key.len(), value.len())
        .ok_or_else(|| Error::invalid_argument("a value of 4 GiB or more cannot be stored"))?;
    let file = fs
        .create(path)
        .ctx(|| format!("create {}", path.display()))?;
    let written = BlobWriter::new(file, path.to_path_buf(), number).and_then(|mut w| {
        let pos = w.add(key, value)?;
        let info = w.finish()?;
        Ok((pos, info))
    });
    let (pos, info) = match written {
        Ok(w) => w,
        Err(e) => {
            let _ = fs.remove_file(path);
            return Err(e);
        }
    };
    debug_assert_eq!((pos.index, pos.offset), (0, HEADER_LEN as u64));
    Ok(WrittenValue {
        blob_ref: BlobRef {
            file: number,
            ordinal: pos.index,
            value_len,
            offset: pos.offset,
        },
        file_size: info.file_size,
        record_bytes,
    })
}

/// A direct blob file the version does not hold yet.
#[derive(Clone)]
pub(crate) struct DirectBlob {
    /// The file's size.
    pub file_size: u64,
    /// Its record's size, as garbage accounting counts it.
    pub record_bytes: u64,
    /// The memtable that holds its reference, or would have if the write had succeeded.
    mem: Weak<dyn Memtable>,
}

/// The direct blob files that some live memtable may refer to. See the module documentation.
#[derive(Default)]
pub(crate) struct DirectBlobs {
    files: Mutex<HashMap<u64, DirectBlob>>,
}

impl DirectBlobs {
    /// Records blob file `number` as referred to by `mem` (its reference goes to `mem`'s WAL).
    pub(crate) fn register(
        &self,
        number: u64,
        file_size: u64,
        record_bytes: u64,
        mem: &Arc<dyn Memtable>,
    ) {
        self.files.lock().insert(
            number,
            DirectBlob {
                file_size,
                record_bytes,
                mem: Arc::downgrade(mem),
            },
        );
    }

    /// Whether blob file `number` is a registered direct blob file.
    pub(crate) fn contains(&self, number: u64) -> bool {
        self.files.lock().contains_key(&number)
    }

    /// The files registered for `mem`, by number.
    pub(crate) fn of_memtable(&self, mem: &Arc<dyn Memtable>) -> Vec<(u64, DirectBlob)> {
        let mem = Arc::downgrade(mem);
        let mut files: Vec<(u64, DirectBlob)> = self
            .files
            .lock()
            .iter()
            .filter(|(_, d)| Weak::ptr_eq(&d.mem, &mem))
            .map(|(&n, d)| (n, d.clone()))
            .collect();
        files.sort_unstable_by_key(|(n, _)| *n);
        files
    }

    /// Forgets the files whose memtable is gone (flushed, and no reader holds it any more: the
    /// version holds the files it kept) and returns the numbers of those still registered,
    /// which must not be deleted.
    pub(crate) fn live(&self) -> Vec<u64> {
        let mut files = self.files.lock();
        files.retain(|_, d| d.mem.strong_count() > 0);
        files.keys().copied().collect()
    }
}
