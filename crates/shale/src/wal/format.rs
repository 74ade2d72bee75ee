//! The bytes of one log record. The only module that knows them; see `docs/format/wal.md`.
//!
//! ```text
//! +-------------+-------------+--------------+-----------------+
//! | header_crc  | length      | payload_crc  | payload         |
//! | u32 LE      | u32 LE      | u32 LE       | `length` bytes  |
//! +-------------+-------------+--------------+-----------------+
//! ```
//! `header_crc` is the masked CRC32C of bytes 4..12 (length and payload_crc), so a damaged length
//! is never trusted and a reader can look for the next intact record byte by byte. `payload_crc`
//! is the masked CRC32C of the payload.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

/// Bytes before the payload. Do not change: on-disk format.
pub(crate) const HEADER_LEN: usize = 12;

/// The largest payload a record can describe.
pub(crate) const MAX_PAYLOAD_LEN: usize = u32::MAX as usize;

/// Added to rotated CRCs so that a CRC of data that itself holds CRCs is not trivially related to
/// them (LevelDB's masking). Do not change: on-disk format.
const MASK_DELTA: u32 = 0xa282_ead8;

/// The stored form of a CRC32C.
pub(crate) fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The header of a record holding `payload`.
pub(crate) fn encode_header(payload: &[u8]) -> [u8; HEADER_LEN] {
    debug_assert!(payload.len() <= MAX_PAYLOAD_LEN);
    let mut header = [0u8; HEADER_LEN];
    header[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[8..12].copy_from_slice(&mask(crc32c::crc32c(payload)).to_le_bytes());
    let header_crc = mask(crc32c::crc32c(&header[4..12]));
    header[0..4].copy_from_slice(&header_crc.to_le_bytes());
    header
}

/// The payload of a WAL sync marker starts with these bytes, which no write batch starts with (a
/// batch begins with its first sequence number, never `u64::MAX`, and a count that is never 0).
/// Do not change: on-disk format.
const MARKER_PREFIX: [u8; 12] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
/// The marker kind after the prefix: "every byte of this file before offset `n` was fsynced".
/// Do not change: on-disk format.
const MARKER_SYNCED: u8 = 1;
/// Bytes of a sync marker's payload: the prefix, the kind and the synced length (u64 LE).
pub(crate) const MARKER_LEN: usize = MARKER_PREFIX.len() + 1 + 8;

/// The payload of a sync marker saying that the file's first `synced_through` bytes are durable.
pub(crate) fn encode_sync_marker(synced_through: u64) -> [u8; MARKER_LEN] {
    let mut out = [0u8; MARKER_LEN];
    out[..12].copy_from_slice(&MARKER_PREFIX);
    out[12] = MARKER_SYNCED;
    out[13..].copy_from_slice(&synced_through.to_le_bytes());
    out
}

/// What a WAL record's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WalPayload {
    /// A write batch.
    Batch,
    /// A sync marker: the file's first `n` bytes were fsynced before it was written.
    Synced(u64),
    /// A marker this version does not know.
    UnknownMarker,
}

/// Tells a WAL record's payload apart: a write batch or a sync marker.
pub(crate) fn classify_wal_payload(payload: &[u8]) -> WalPayload {
    let Some(rest) = payload.strip_prefix(&MARKER_PREFIX) else {
        return WalPayload::Batch;
    };
    match rest.split_first() {
        Some((&MARKER_SYNCED, n)) => match <[u8; 8]>::try_from(n) {
            Ok(n) => WalPayload::Synced(u64::from_le_bytes(n)),
            Err(_) => WalPayload::UnknownMarker,
        },
        _ => WalPayload::UnknownMarker,
    }
}

/// What is wrong with the bytes at some offset, when they are not a whole, intact record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Damage {
    /// The file ends inside the header, or inside the payload an intact header describes: what an
    /// interrupted append leaves.
    Truncated,
    /// The header checksum does not match.
    BadHeader,
    /// The header is intact but the payload checksum does not match.
    BadPayload,
}

impl Damage {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Damage::Truncated => "the file ends inside a record",
            Damage::BadHeader => "record header checksum mismatch",
            Damage::BadPayload => "record payload checksum mismatch",
        }
    }
}

/// Decodes the record at the start of `data`: the payload's length, or what is wrong.
pub(crate) fn decode(data: &[u8]) -> Result<usize, Damage> {
    let header: [u8; HEADER_LEN] = data
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(Damage::Truncated)?;
    let [c0, c1, c2, c3, l0, l1, l2, l3, p0, p1, p2, p3] = header;
    let checked = [l0, l1, l2, l3, p0, p1, p2, p3];
    if mask(crc32c::crc32c(&checked)) != u32::from_le_bytes([c0, c1, c2, c3]) {
        return Err(Damage::BadHeader);
    }
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
    let payload_crc = u32::from_le_bytes([p0, p1, p2, p3]);
    let payload = data
        .get(HEADER_LEN..)
        .and_then(|rest| rest.get(..len))
        .ok_or(Damage::Truncated)?;
    if mask(crc32c::crc32c(payload)) != payload_crc {
        return Err(Damage::BadPayload);
    }
    Ok(len)
}
