//! The byte offsets of the SST format: block handles, block trailers (compression type and
//! checksum) and the footer. The only module that knows where things sit in the file; the page
//! `docs/format/sstable.md` draws the same bytes.
//!
//! Invariants:
//! - Every block in the file (data, filter, properties, index) is followed by a
//!   [`BLOCK_TRAILER_LEN`]-byte trailer: the compression type and a masked CRC32C over the stored
//!   block bytes and the type byte.
//! - The footer is the last [`FOOTER_LEN`] bytes of the file and carries its own checksum.
//! - Decoders are total: a bad byte is an `Err((offset, what))`, never a panic. The offset is
//!   relative to the slice decoded; callers add the file offset and name the file.
//!
//! Concurrency: pure functions over bytes.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use crate::options::Compression;
use crate::varint::{get_varint64, put_varint64, Reader};

/// Magic number at the very end of every SST: "SHALESST" in ASCII.
/// Do not change: on-disk format.
pub(crate) const TABLE_MAGIC: u64 = 0x5453_5345_4c41_4853;

/// The format version written by this code. Do not change: on-disk format (bump it and keep
/// reading the old one when the layout changes).
pub(crate) const FORMAT_VERSION: u32 = 1;

/// Size of the footer in bytes. Do not change: on-disk format.
pub(crate) const FOOTER_LEN: usize = 64;

/// Bytes after every block: compression type (1) + masked CRC32C (4). Do not change: on-disk format.
pub(crate) const BLOCK_TRAILER_LEN: usize = 5;

/// Compression type byte of a block stored as is. Do not change: on-disk format.
pub(crate) const BLOCK_UNCOMPRESSED: u8 = 0;
/// Compression type byte of an LZ4 block (varint32 uncompressed length, then an LZ4 block).
/// Do not change: on-disk format.
pub(crate) const BLOCK_LZ4: u8 = 1;

/// The largest decoded size accepted for a compressed block. LZ4 cannot expand more than about
/// 255 times, and no block the builder writes is larger than this.
const MAX_DECOMPRESSED_LEN: usize = 1 << 31;

/// Bytes saved by compression must be at least `1 / COMPRESSION_MIN_SAVING_DIVISOR` of the block.
const COMPRESSION_MIN_SAVING_DIVISOR: usize = 8;

const CRC_MASK_DELTA: u32 = 0xa282_ead8;

/// A checksum stored next to data it covers is masked, so that a CRC of bytes that themselves
/// contain CRCs stays strong (the LevelDB trick). Do not change: on-disk format.
#[inline]
pub(crate) fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(CRC_MASK_DELTA)
}

/// The inverse of [`mask_crc`].
#[inline]
pub(crate) fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(CRC_MASK_DELTA).rotate_left(15)
}

/// The position of a block in the file: offset of its first byte and its stored size, trailer
/// excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// The first byte after the block's trailer, `None` on overflow.
    pub(crate) fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }

    /// Appends the varint encoding used in index entries.
    pub(crate) fn encode_to(&self, buf: &mut Vec<u8>) {
        put_varint64(buf, self.offset);
        put_varint64(buf, self.size);
    }

    /// Decodes an index entry value: exactly two varints.
    pub(crate) fn decode_exact(data: &[u8]) -> Result<BlockHandle, &'static str> {
        let (offset, a) = get_varint64(data).ok_or("bad block handle offset")?;
        let rest = data.get(a..).ok_or("bad block handle")?;
        let (size, b) = get_varint64(rest).ok_or("bad block handle size")?;
        if a + b != data.len() {
            return Err("trailing bytes after block handle");
        }
        Ok(BlockHandle { offset, size })
    }
}

/// The footer: where the filter, properties and index blocks are.
///
/// ```text
/// 0  u64 filter offset      8  u64 filter size (0 = no filter, and no filter bytes at all)
/// 16 u64 properties offset 24 u64 properties size
/// 32 u64 index offset      40 u64 index size
/// 48 u32 format version    52 u32 masked crc32c of bytes 0..52
/// 56 u64 magic
/// ```
/// All integers little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub filter: BlockHandle,
    pub properties: BlockHandle,
    pub index: BlockHandle,
}

const FOOTER_CRC_AT: usize = 52;
const FOOTER_VERSION_AT: usize = 48;
const FOOTER_MAGIC_AT: usize = 56;

impl Footer {
    pub(crate) fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        let fields = [
            self.filter.offset,
            self.filter.size,
            self.properties.offset,
            self.properties.size,
            self.index.offset,
            self.index.size,
        ];
        for (chunk, v) in out.chunks_exact_mut(8).zip(fields) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        out[FOOTER_VERSION_AT..FOOTER_CRC_AT].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        let crc = mask_crc(crc32c::crc32c(&out[..FOOTER_CRC_AT]));
        out[FOOTER_CRC_AT..FOOTER_MAGIC_AT].copy_from_slice(&crc.to_le_bytes());
        out[FOOTER_MAGIC_AT..].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        out
    }

    /// Decodes exactly [`FOOTER_LEN`] bytes. Checks the magic, the checksum and the version.
    pub(crate) fn decode(data: &[u8]) -> Result<Footer, (usize, &'static str)> {
        if data.len() != FOOTER_LEN {
            return Err((0, "footer has the wrong length"));
        }
        let mut r = Reader::new(data);
        let mut field = || r.u64_le().ok_or((0, "footer truncated"));
        let filter = BlockHandle {
            offset: field()?,
            size: field()?,
        };
        let properties = BlockHandle {
            offset: field()?,
            size: field()?,
        };
        let index = BlockHandle {
            offset: field()?,
            size: field()?,
        };
        let version = r.u32_le().ok_or((FOOTER_VERSION_AT, "footer truncated"))?;
        let stored_crc = r.u32_le().ok_or((FOOTER_CRC_AT, "footer truncated"))?;
        let magic = r.u64_le().ok_or((FOOTER_MAGIC_AT, "footer truncated"))?;
        if magic != TABLE_MAGIC {
            return Err((FOOTER_MAGIC_AT, "bad magic number: not an SST"));
        }
        let crc = crc32c::crc32c(data.get(..FOOTER_CRC_AT).unwrap_or_default());
        if unmask_crc(stored_crc) != crc {
            return Err((FOOTER_CRC_AT, "footer checksum mismatch"));
        }
        if version != FORMAT_VERSION {
            return Err((FOOTER_VERSION_AT, "unsupported SST format version"));
        }
        Ok(Footer {
            filter,
            properties,
            index,
        })
    }
}

/// Builds the trailer for `stored` bytes of compression type `kind`.
pub(crate) fn block_trailer(stored: &[u8], kind: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = crc32c::crc32c_append(crc32c::crc32c(stored), &[kind]);
    let mut out = [0u8; BLOCK_TRAILER_LEN];
    out[0] = kind;
    out[1..].copy_from_slice(&mask_crc(crc).to_le_bytes());
    out
}

/// Compresses `raw` into `scratch` when `compression` asks for it and it saves enough.
/// Returns the bytes to store and their compression type byte.
pub(crate) fn maybe_compress<'a>(
    raw: &'a [u8],
    compression: Compression,
    scratch: &'a mut Vec<u8>,
) -> (&'a [u8], u8) {
    if compression == Compression::None || raw.is_empty() {
        return (raw, BLOCK_UNCOMPRESSED);
    }
    let Ok(raw_len) = u32::try_from(raw.len()) else {
        return (raw, BLOCK_UNCOMPRESSED);
    };
    scratch.clear();
    put_varint64(scratch, raw_len as u64);
    let prefix = scratch.len();
    scratch.resize(
        prefix + lz4_flex::block::get_maximum_output_size(raw.len()),
        0,
    );
    let out = scratch.get_mut(prefix..).unwrap_or_default();
    match lz4_flex::block::compress_into(raw, out) {
        Ok(n) if prefix + n <= raw.len() - raw.len() / COMPRESSION_MIN_SAVING_DIVISOR => {
            scratch.truncate(prefix + n);
            (scratch.as_slice(), BLOCK_LZ4)
        }
        _ => (raw, BLOCK_UNCOMPRESSED),
    }
}

/// Checks the trailer at the end of `with_trailer` (a block as read from the file, trailer
/// included) and returns the decoded block contents. Offsets in errors are relative to the start
/// of `with_trailer`. `verify = false` skips the checksum of a block that already passed it.
pub(crate) fn decode_stored_block(
    with_trailer: bytes::Bytes,
    verify: bool,
) -> Result<bytes::Bytes, (usize, &'static str)> {
    let size = with_trailer
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or((0, "block shorter than its trailer"))?;
    let (stored, trailer) = with_trailer.split_at(size);
    let [kind, c0, c1, c2, c3]: [u8; BLOCK_TRAILER_LEN] = trailer
        .try_into()
        .map_err(|_| (size, "bad block trailer"))?;
    let stored_crc = u32::from_le_bytes([c0, c1, c2, c3]);
    if verify && unmask_crc(stored_crc) != crc32c::crc32c_append(crc32c::crc32c(stored), &[kind]) {
        return Err((size, "block checksum mismatch"));
    }
    match kind {
        BLOCK_UNCOMPRESSED => Ok(with_trailer.slice(..size)),
        BLOCK_LZ4 => decompress_lz4(stored).map(bytes::Bytes::from),
        _ => Err((size, "unknown block compression type")),
    }
}

/// Decodes an LZ4 block body: varint uncompressed length, then the LZ4 block.
pub(crate) fn decompress_lz4(stored: &[u8]) -> Result<Vec<u8>, (usize, &'static str)> {
    let (len, n) = get_varint64(stored).ok_or((0, "bad compressed block length"))?;
    let body = stored.get(n..).ok_or((0, "bad compressed block length"))?;
    let len = usize::try_from(len).map_err(|_| (0, "compressed block too large"))?;
    // LZ4 expands at most ~255 times; a larger claim is corruption, not a reason to allocate.
    if len > MAX_DECOMPRESSED_LEN || len > body.len().saturating_mul(256).saturating_add(64) {
        return Err((0, "implausible decompressed block length"));
    }
    let mut out = vec![0u8; len];
    match lz4_flex::block::decompress_into(body, &mut out) {
        Ok(written) if written == len => Ok(out),
        _ => Err((n, "LZ4 decompression failed")),
    }
}
