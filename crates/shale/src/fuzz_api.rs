//! Decoder entry points for fuzz targets. Not a stable API.
//!
//! Each function feeds arbitrary bytes to one on-disk decoder and must never panic; the checks
//! beyond that (round trips) are inside. The fuzz targets in `fuzz/` call them, and the crate's
//! tests run them over random inputs as a smoke test.

use crate::wal::TailPolicy;

/// Replays `data` as a WAL under every recovery policy. Returns the records read under the most
/// permissive one.
pub fn wal_replay(data: &[u8]) -> usize {
    crate::wal::fuzz_replay(data, TailPolicy::CutDamagedTail);
    crate::wal::fuzz_replay(data, TailPolicy::CutTornTailOnly);
    crate::wal::fuzz_replay(data, TailPolicy::PointInTime)
}

/// Decodes `data` as one MANIFEST record (a version edit); whatever decodes must re-encode to an
/// equal edit.
pub fn manifest_edit(data: &[u8]) {
    crate::version::edit::fuzz_decode(data);
}

/// Replays `data` as a whole MANIFEST: framing, then each record as an edit.
pub fn manifest_replay(data: &[u8]) {
    let mut reader = crate::wal::LogReader::new(
        data.to_vec(),
        "fuzz-MANIFEST".into(),
        TailPolicy::CutTornTailOnly,
    );
    while let Ok(Some((_, record))) = reader.next_record() {
        crate::version::edit::fuzz_decode(record);
    }
}

/// Decodes `data` as an SST data or index block and walks it both ways, with seeks.
pub fn sst_block(data: &[u8]) {
    crate::sst::fuzz_block(data);
}

/// Decodes `data` as an SST footer, and the same bytes as a properties block, a filter and an LZ4
/// block.
pub fn sst_footer(data: &[u8]) {
    crate::sst::fuzz_footer(data);
}

/// Opens `data` as a whole SST and reads everything in it.
pub fn sst_table(data: &[u8]) {
    crate::sst::fuzz_table(data);
}

/// Opens `data` as a blob file and reads every record (value, offset-checked and raw), checking
/// that the read paths agree; decodes the same bytes as a `BlobRef` and a bitmap. Returns the
/// records read successfully.
pub fn blob_file(data: &[u8]) -> usize {
    crate::blob::fuzz_file(data)
}
