//! GET replies: one per GET of a batch, in request order, with no framing of their own.

use bytes::{BufMut, Bytes, BytesMut};

use super::format::{read_u16, read_u32, REPLY_NOT_FOUND, REPLY_VALUE, VALUE_REPLY_HEADER_LEN};
use super::{Limits, MegaKvError};

/// The answer to one GET.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GetReply {
    /// The key's value: `01 00`, a 32-bit length, the value.
    Value(Bytes),
    /// The key was not found: the single byte `02`.
    NotFound,
}

/// Appends one GET reply to `out`.
///
/// # Errors
/// [`MegaKvError::ValueTooLong`] if the value does not fit the 32-bit length; nothing is written.
pub fn encode_reply(reply: &GetReply, out: &mut BytesMut) -> Result<(), MegaKvError> {
    match reply {
        GetReply::NotFound => {
            out.put_u8(REPLY_NOT_FOUND);
            Ok(())
        }
        GetReply::Value(value) => encode_value_reply(value, out),
    }
}

/// Appends the reply carrying `value` (as [`encode_reply`] with [`GetReply::Value`], without
/// needing the value as `Bytes`: a server copies it straight from its memory).
///
/// # Errors
/// [`MegaKvError::ValueTooLong`] if the value does not fit the 32-bit length; nothing is written.
pub fn encode_value_reply(value: &[u8], out: &mut BytesMut) -> Result<(), MegaKvError> {
    out.reserve(VALUE_REPLY_HEADER_LEN.saturating_add(value.len()));
    encode_value_reply_header(value.len(), out)?;
    out.put_slice(value);
    Ok(())
}

/// Appends the header of the reply carrying a value of `len` bytes, for a server that sends the
/// value itself (straight from its memory): exactly `len` bytes must follow in the stream.
///
/// # Errors
/// [`MegaKvError::ValueTooLong`] if `len` does not fit the 32-bit length; nothing is written.
pub fn encode_value_reply_header(len: usize, out: &mut BytesMut) -> Result<(), MegaKvError> {
    let len32 = u32::try_from(len).map_err(|_| MegaKvError::ValueTooLong {
        len,
        max: u32::MAX as usize,
    })?;
    out.reserve(VALUE_REPLY_HEADER_LEN);
    out.put_u16_le(REPLY_VALUE);
    out.put_u32_le(len32);
    Ok(())
}

/// Parses the GET reply at the start of `buf`: the reply and the bytes it took, or `Ok(None)` if
/// it has not fully arrived. A value is copied out of `buf`.
///
/// # Errors
/// [`MegaKvError::BadReplyTag`] for an unknown tag, [`MegaKvError::ValueTooLong`] for a value
/// longer than [`Limits::max_value_len`].
pub fn parse_reply(buf: &[u8], limits: &Limits) -> Result<Option<(GetReply, usize)>, MegaKvError> {
    Ok(scan(buf, limits)?.map(|(value, end)| {
        let reply = match value {
            None => GetReply::NotFound,
            Some((start, end)) => GetReply::Value(Bytes::copy_from_slice(
                buf.get(start..end).unwrap_or_default(),
            )),
        };
        (reply, end)
    }))
}

/// Decodes the GET reply at the front of `buf`, removing it; `Ok(None)` if it has not fully
/// arrived. A value is a slice of `buf`, not a copy.
///
/// # Errors
/// As for [`parse_reply`].
pub fn decode_reply(buf: &mut BytesMut, limits: &Limits) -> Result<Option<GetReply>, MegaKvError> {
    let Some((value, end)) = scan(buf, limits)? else {
        return Ok(None);
    };
    let source = buf.split_to(end).freeze();
    Ok(Some(match value {
        None => GetReply::NotFound,
        Some((start, end)) => GetReply::Value(source.slice(start..end)),
    }))
}

/// The span of the value (`None` for not-found) and the end of the reply.
#[allow(clippy::type_complexity)]
fn scan(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(Option<(usize, usize)>, usize)>, MegaKvError> {
    match buf.first() {
        None => return Ok(None),
        Some(&REPLY_NOT_FOUND) => return Ok(Some((None, 1))),
        Some(_) => {}
    }
    let Some(tag) = read_u16(buf, 0) else {
        return Ok(None);
    };
    if tag != REPLY_VALUE {
        return Err(MegaKvError::BadReplyTag { found: tag });
    }
    let Some(len) = read_u32(buf, 2) else {
        return Ok(None);
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > limits.max_value_len {
        return Err(MegaKvError::ValueTooLong {
            len,
            max: limits.max_value_len,
        });
    }
    let end = VALUE_REPLY_HEADER_LEN
        .checked_add(len)
        .ok_or(MegaKvError::ValueTooLong {
            len,
            max: limits.max_value_len,
        })?;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((Some((VALUE_REPLY_HEADER_LEN, end)), end)))
}
