//! Errors in a client's request stream, with the exact text Redis replies with.
//!
//! A [`ProtocolError`] means the stream can no longer be framed: the server replies with
//! [`ProtocolError::write_reply`] (for example `-ERR Protocol error: invalid bulk length`) and closes
//! the connection, as Redis does. Requests decoded before the error are still valid and, as in
//! Redis, should be executed and answered first.

use std::borrow::Cow;
use std::fmt;

use bytes::{BufMut, BytesMut};

use super::format::CRLF;

/// A request that cannot be parsed. `Display` and [`ProtocolError::message`] give Redis's text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The count line of a multibulk request is not a number, or announces more arguments than
    /// [`super::Limits::max_multibulk_len`].
    InvalidMultibulkLength,
    /// An unauthenticated client announced more than
    /// [`super::UNAUTHENTICATED_MAX_MULTIBULK_LEN`] arguments.
    UnauthenticatedMultibulkLength,
    /// The count line of a multibulk request is longer than [`super::Limits::max_inline_len`].
    TooBigMbulkCountString,
    /// A bulk length line is not a number, is negative, or exceeds
    /// [`super::Limits::max_bulk_len`].
    InvalidBulkLength,
    /// An unauthenticated client announced an argument longer than
    /// [`super::UNAUTHENTICATED_MAX_BULK_LEN`].
    UnauthenticatedBulkLength,
    /// A bulk length line is longer than [`super::Limits::max_inline_len`].
    TooBigBulkCountString,
    /// An argument of a multibulk request does not start with `$`; carries the byte found.
    ExpectedDollar(u8),
    /// An inline request line is longer than [`super::Limits::max_inline_len`].
    TooBigInlineRequest,
    /// An inline request has an unterminated quote, or a closing quote followed by something other
    /// than a space.
    UnbalancedQuotes,
    /// The two bytes after a bulk argument's data are not `\r\n`. Redis skips them unchecked;
    /// Shale refuses them, since a wrong length would otherwise desynchronise the stream silently.
    BulkNotTerminated,
    /// The request would exceed [`super::Limits::max_request_len`] bytes. Redis closes such a
    /// connection without a reply; Shale sends this error first.
    RequestTooBig {
        /// The limit that was exceeded, in bytes.
        limit: usize,
    },
}

impl ProtocolError {
    /// The error text exactly as Redis sends it, without the `ERR ` code. Carriage returns and
    /// line feeds in the offending byte are replaced by spaces, as Redis does, so the text is
    /// always safe to put on one RESP line.
    pub fn message(&self) -> Cow<'static, [u8]> {
        let text: &'static str = match self {
            ProtocolError::InvalidMultibulkLength => "Protocol error: invalid multibulk length",
            ProtocolError::UnauthenticatedMultibulkLength => {
                "Protocol error: unauthenticated multibulk length"
            }
            ProtocolError::TooBigMbulkCountString => "Protocol error: too big mbulk count string",
            ProtocolError::InvalidBulkLength => "Protocol error: invalid bulk length",
            ProtocolError::UnauthenticatedBulkLength => {
                "Protocol error: unauthenticated bulk length"
            }
            ProtocolError::TooBigBulkCountString => "Protocol error: too big bulk count string",
            ProtocolError::TooBigInlineRequest => "Protocol error: too big inline request",
            ProtocolError::UnbalancedQuotes => "Protocol error: unbalanced quotes in request",
            ProtocolError::BulkNotTerminated => "Protocol error: bulk data not followed by CRLF",
            ProtocolError::ExpectedDollar(found) => {
                let found = if matches!(*found, b'\r' | b'\n') {
                    b' '
                } else {
                    *found
                };
                let mut text = b"Protocol error: expected '$', got '".to_vec();
                text.push(found);
                text.push(b'\'');
                return Cow::Owned(text);
            }
            ProtocolError::RequestTooBig { limit } => {
                return Cow::Owned(
                    format!("Protocol error: request exceeds the {limit} byte limit").into_bytes(),
                );
            }
        };
        Cow::Borrowed(text.as_bytes())
    }

    /// Appends the whole error reply, `-ERR <message>\r\n`, to `out`. The same bytes in RESP2
    /// and RESP3.
    pub fn write_reply(&self, out: &mut BytesMut) {
        let message = self.message();
        out.reserve(message.len() + 7);
        out.put_slice(b"-ERR ");
        out.put_slice(&message);
        out.put_slice(CRLF);
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The message is ASCII except possibly the byte in `ExpectedDollar`; escape that one.
        for &byte in self.message().iter() {
            if byte.is_ascii_graphic() || byte == b' ' {
                write!(f, "{}", char::from(byte))?;
            } else {
                write!(f, "\\x{byte:02x}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ProtocolError {}
