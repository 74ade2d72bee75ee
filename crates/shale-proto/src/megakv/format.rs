//! The bytes of Mega-KV's protocol: field sizes, tags, byte order. The only module that knows the
//! offsets; `docs/format/megakv.md` in the repository draws them.
//!
//! Do not change: wire format shared with Mega-KV clients. Every multi-byte field is
//! little-endian (the reference implementation stores native integers on x86).

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

/// First field of every request batch. Bytes on the wire: `34 12`.
pub const REQUEST_MAGIC: u16 = 0x1234;
/// Job type of a GET: `type:u16 key_len:u16 key`.
pub const JOB_GET: u16 = 0x0002;
/// Job type of a SET: `type:u16 key_len:u16 value_len:u32 key value`.
pub const JOB_SET: u16 = 0x0003;
/// Job type position holding this ends the batch. Bytes on the wire: `ff ff`.
pub const END_MARK: u16 = 0xFFFF;
/// Tag of a GET reply carrying a value: `tag:u16 value_len:u32 value`. Bytes: `01 00`.
pub const REPLY_VALUE: u16 = 0x0001;
/// The whole GET reply for a key that was not found: one byte.
pub const REPLY_NOT_FOUND: u8 = 0x02;

/// Size of the magic number.
pub(crate) const MAGIC_LEN: usize = 2;
/// Size of a job type (and of the end mark).
pub(crate) const JOB_TYPE_LEN: usize = 2;
/// Size of a key length field.
pub(crate) const KEY_LEN_LEN: usize = 2;
/// Size of a value length field.
pub(crate) const VALUE_LEN_LEN: usize = 4;
/// Bytes of a GET before its key.
pub(crate) const GET_HEADER_LEN: usize = JOB_TYPE_LEN + KEY_LEN_LEN;
/// Bytes of a SET before its key.
pub(crate) const SET_HEADER_LEN: usize = JOB_TYPE_LEN + KEY_LEN_LEN + VALUE_LEN_LEN;
/// Bytes of a value reply before its value.
pub(crate) const VALUE_REPLY_HEADER_LEN: usize = 2 + VALUE_LEN_LEN;

/// The little-endian `u16` at `at`, if all of it is in `buf`.
pub(crate) fn read_u16(buf: &[u8], at: usize) -> Option<u16> {
    let bytes = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(bytes.try_into().ok()?))
}

/// The little-endian `u32` at `at`, if all of it is in `buf`.
pub(crate) fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}
