//! Blob files: the value log of key-value separation (DESIGN.md section 3). See
//! `docs/format/blob.md`.
//!
//! Values leave the LSM at flush (very large ones already at write time, see `direct`): the value goes to a blob file and the SST keeps a
//! [`BlobRef`], a stable handle (logical file, ordinal, length, offset hint). GC rewrites a blob
//! file under the same logical id and records which original ordinals survive in a [`Bitmap`];
//! the read path finds ordinal `o` of a rewritten file at index `rank(survivors, o)`, so GC never
//! touches the LSM.
//!
//! ```text
//! [header][record 0] ... [record n-1][offsets array: n x u32][footer]
//! record = crc32c | varint32 key_len | varint32 value_len | key | value
//! ```
//!
//! Modules, one concept each:
//! - `format`: the only module that knows byte offsets: header, records, offsets array, footer.
//! - `writer`: [`BlobWriter`]; `reader`: [`BlobReader`] and [`BlobRecord`].
//! - `blob_ref`: [`BlobRef`], the value stored in the LSM.
//! - `direct`: large values written to blob files of their own by the write path, and the
//!   [`DirectBlobs`] registry that holds them until a flush hands them to the version.
//! - `bitmap`: [`Bitmap`], survivors and dead ordinals, with O(1) rank.
//! - `gc`: [`GcTask`] and the [`GcEngine`] seam with its inline and worker backends;
//!   `rate`: the workers' [`TokenBucket`].
//!
//! Invariants: every byte of a finished blob file is covered by a checksum (header, each record,
//! offsets array, footer) and the regions tile the file, so a flipped byte is a `Corruption` error,
//! never wrong data; a record is position independent, so GC copies it verbatim after verifying it.
//! Bytes read from disk never cause a panic.
//!
//! Concurrency: a writer has one owner; an open [`BlobReader`] is immutable and shared by all
//! readers and GC tasks; GC engines are shared by the host's threads.

mod bitmap;
mod blob_ref;
mod direct;
mod format;
mod gc;
mod rate;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

pub(crate) use bitmap::Bitmap;
pub(crate) use blob_ref::BlobRef;
pub(crate) use direct::{write_value, DirectBlobs};
pub(crate) use format::record_len;
pub(crate) use gc::{
    run_now, GcCompletion, GcEngine, GcTask, InlineGcEngine, OnComplete, WorkerGcEngine,
};
pub(crate) use reader::BlobReader;
pub(crate) use writer::{BlobFileInfo, BlobWriter};
// The rest of the API: only the tests use it so far.
#[allow(unused_imports)]
pub(crate) use {
    bitmap::Ones,
    blob_ref::MAX_BLOB_REF_LEN,
    format::{BLOB_FORMAT_VERSION, MAX_BLOB_FILE_SIZE},
    gc::{GcCaps, GcOutput, GC_BURST_DIVISOR, WORKER_TASKS_PER_THREAD},
    rate::TokenBucket,
    reader::BlobRecord,
    writer::BlobPos,
};

/// Records the fuzz entry point reads at most, so a huge claimed count costs no time.
const FUZZ_MAX_RECORDS: u32 = 100_000;

/// Fuzz entry point: opens `data` as a blob file and reads every record three ways (`get`,
/// `get_at`, `raw`), checking that they agree; then decodes the same bytes as a [`BlobRef`] and a
/// [`Bitmap`] and checks that what decodes re-encodes to an equal value. Returns the records read
/// successfully. Never panics on any input (an inconsistency between the read paths is a bug and
/// does panic, which is what the fuzzer looks for).
pub(crate) fn fuzz_file(data: &[u8]) -> usize {
    use crate::fs::{Fs, MemFs};
    use std::path::{Path, PathBuf};

    if let Some(r) = BlobRef::decode(data) {
        assert_eq!(BlobRef::decode(&r.to_vec()), Some(r));
    }
    let mut rest = data;
    if let Some(b) = Bitmap::decode(&mut rest) {
        let mut buf = Vec::new();
        b.encode(&mut buf);
        assert_eq!(Bitmap::decode(&mut buf.as_slice()), Some(b.clone()));
        assert_eq!(b.iter_ones().count() as u64, b.count_ones());
        assert_eq!(b.rank(b.len()), b.count_ones());
    }

    let fs = MemFs::new();
    let path = Path::new("/fuzz/000001.blob");
    if fs.write_file(path, data).is_err() {
        return 0;
    }
    let Ok(file) = fs.open(path) else { return 0 };
    let Ok(reader) = BlobReader::open(file, PathBuf::from(path)) else {
        return 0;
    };
    let mut good = 0;
    for index in 0..reader.count().min(FUZZ_MAX_RECORDS) {
        let got = reader.get(index);
        let raw = reader.raw(index);
        assert_eq!(got.is_ok(), raw.is_ok());
        if let Ok(offset) = reader.record_offset(index) {
            let at = reader.get_at(offset, index);
            assert_eq!(at.as_ref().ok(), got.as_ref().ok());
            let _ = reader.get_at(offset.wrapping_add(1), index);
        }
        if let (Ok(rec), Ok(raw)) = (got, raw) {
            assert!(rec.key.len() + rec.value.len() + format::MIN_RECORD_LEN <= raw.len());
            good += 1;
        }
    }
    let _ = reader.get(reader.count());
    good
}
