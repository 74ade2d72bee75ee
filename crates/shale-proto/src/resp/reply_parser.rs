//! Reply parsing, for clients (and for testing the encoder): RESP2 and RESP3.
//!
//! [`parse_reply`] and [`decode_reply`] read one complete reply of any type the encoder writes,
//! plus RESP3 blob errors (`!`). Attributes (`|`) and streamed strings and aggregates (`$?`, `*?`)
//! are refused with [`ReplyError::UnknownType`] or [`ReplyError::Malformed`]: Shale never sends
//! them.
//!
//! # Contract
//! Replies come from a server, but a client still must not trust them: every length is checked
//! against [`ReplyLimits`] before it is used, nesting is bounded by
//! [`ReplyLimits::max_depth`] (the parser recurses once per level), and no input panics.
//!
//! Each call scans the reply twice: once to validate it and find its end without allocating, once
//! to build it. An incomplete reply is rescanned from its start on the next call.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::fmt;
use std::ops::Range;

use bytes::{Bytes, BytesMut};

use super::format::{
    ARRAY, BIG_NUMBER, BLOB_ERROR, BOOLEAN, BULK_STRING, CR, CRLF, DOUBLE, INTEGER, LF, MAP, NULL,
    PUSH, SET, SIMPLE_ERROR, SIMPLE_STRING, VERBATIM, VERBATIM_FORMAT_LEN, VERBATIM_SEPARATOR,
};
use super::int::parse_i64;
use super::limits::{ARGV_PREALLOC_MAX, DEFAULT_MAX_BULK_LEN, DEFAULT_MAX_MULTIBULK_LEN};
use super::Reply;

/// Deepest nesting of aggregates a reply may have by default.
pub const DEFAULT_MAX_REPLY_DEPTH: usize = 128;

/// Longest line (simple string, error, number) a reply may have by default, in bytes.
pub const DEFAULT_MAX_REPLY_LINE_LEN: usize = 1024 * 1024;

/// What a reply may contain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyLimits {
    /// Largest bulk string, blob error or verbatim string ([`DEFAULT_MAX_BULK_LEN`]).
    pub max_bulk_len: usize,
    /// Most elements in one aggregate; a map counts its pairs ([`DEFAULT_MAX_MULTIBULK_LEN`]).
    pub max_aggregate_len: usize,
    /// Longest line ([`DEFAULT_MAX_REPLY_LINE_LEN`]).
    pub max_line_len: usize,
    /// Deepest nesting of aggregates ([`DEFAULT_MAX_REPLY_DEPTH`]).
    pub max_depth: usize,
}

impl Default for ReplyLimits {
    fn default() -> Self {
        ReplyLimits {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_aggregate_len: DEFAULT_MAX_MULTIBULK_LEN,
            max_line_len: DEFAULT_MAX_REPLY_LINE_LEN,
            max_depth: DEFAULT_MAX_REPLY_DEPTH,
        }
    }
}

/// A reply stream that cannot be parsed. Each variant carries the offset (from the start of the
/// reply) where the problem was found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyError {
    /// A reply starts with a byte that is not a supported type prefix.
    UnknownType {
        /// The byte found.
        byte: u8,
        /// Where it was found.
        offset: usize,
    },
    /// A reply of a known type is malformed; `what` names the part (`"length"`, `"integer"`,
    /// `"double"`, `"boolean"`, `"big number"`, `"null"`, `"verbatim string"`, `"line end"`).
    Malformed {
        /// The malformed part.
        what: &'static str,
        /// Where it starts.
        offset: usize,
    },
    /// A line, bulk string or aggregate is longer than its limit.
    TooLong {
        /// `"line"`, `"bulk string"` or `"aggregate"`.
        what: &'static str,
        /// The limit.
        max: usize,
        /// Where the item starts.
        offset: usize,
    },
    /// Aggregates are nested deeper than [`ReplyLimits::max_depth`].
    TooDeep {
        /// The limit.
        max: usize,
        /// Where the aggregate that went too deep starts.
        offset: usize,
    },
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyError::UnknownType { byte, offset } => {
                write!(f, "unknown RESP type byte 0x{byte:02x} at offset {offset}")
            }
            ReplyError::Malformed { what, offset } => {
                write!(f, "malformed RESP {what} at offset {offset}")
            }
            ReplyError::TooLong { what, max, offset } => {
                write!(
                    f,
                    "RESP {what} at offset {offset} is longer than the limit of {max}"
                )
            }
            ReplyError::TooDeep { max, offset } => {
                write!(
                    f,
                    "RESP aggregate at offset {offset} is nested deeper than {max} levels"
                )
            }
        }
    }
}

impl std::error::Error for ReplyError {}

/// Parses the first complete reply in `buf`: the reply and the bytes it took, or `Ok(None)` if it
/// has not fully arrived. The reply's strings are copied out of `buf` (one allocation).
///
/// # Errors
/// A [`ReplyError`] if the reply is malformed or breaks `limits`.
pub fn parse_reply(buf: &[u8], limits: &ReplyLimits) -> Result<Option<(Reply, usize)>, ReplyError> {
    let Some(((), end)) = parse_value(buf, 0, 0, limits, &mut Validate)? else {
        return Ok(None);
    };
    let source = Bytes::copy_from_slice(buf.get(..end).unwrap_or_default());
    let reply = build(&source, limits)?;
    Ok(Some((reply, end)))
}

/// Decodes the first complete reply from the front of `buf`, removing it; `Ok(None)` if it has
/// not fully arrived. The reply's strings are slices of `buf`, not copies.
///
/// # Errors
/// A [`ReplyError`] if the reply is malformed or breaks `limits`.
pub fn decode_reply(buf: &mut BytesMut, limits: &ReplyLimits) -> Result<Option<Reply>, ReplyError> {
    let Some(((), end)) = parse_value(buf, 0, 0, limits, &mut Validate)? else {
        return Ok(None);
    };
    let source = buf.split_to(end).freeze();
    build(&source, limits).map(Some)
}

/// Builds the (already validated) reply at the start of `source`.
fn build(source: &Bytes, limits: &ReplyLimits) -> Result<Reply, ReplyError> {
    match parse_value(source, 0, 0, limits, &mut Build { source })? {
        Some((reply, _)) => Ok(reply),
        // Validation saw the whole reply, so building cannot run short.
        None => Err(ReplyError::Malformed {
            what: "length",
            offset: source.len(),
        }),
    }
}

/// What the parser produces for each reply it reads: nothing (validation) or a [`Reply`].
trait Sink {
    type Out;
    fn simple(&mut self, text: Range<usize>) -> Self::Out;
    fn error(&mut self, text: Range<usize>) -> Self::Out;
    fn integer(&mut self, value: i64) -> Self::Out;
    fn bulk(&mut self, data: Range<usize>) -> Self::Out;
    fn null(&mut self) -> Self::Out;
    fn null_array(&mut self) -> Self::Out;
    fn double(&mut self, value: f64) -> Self::Out;
    fn boolean(&mut self, value: bool) -> Self::Out;
    fn big_number(&mut self, digits: Range<usize>) -> Self::Out;
    fn verbatim(&mut self, format: [u8; VERBATIM_FORMAT_LEN], text: Range<usize>) -> Self::Out;
    fn aggregate(&mut self, kind: u8, items: Vec<Self::Out>) -> Self::Out;
    fn map(&mut self, pairs: Vec<(Self::Out, Self::Out)>) -> Self::Out;
}

/// Validation only: every output is `()`, so even the vectors of elements never allocate.
struct Validate;

impl Sink for Validate {
    type Out = ();
    fn simple(&mut self, _: Range<usize>) {}
    fn error(&mut self, _: Range<usize>) {}
    fn integer(&mut self, _: i64) {}
    fn bulk(&mut self, _: Range<usize>) {}
    fn null(&mut self) {}
    fn null_array(&mut self) {}
    fn double(&mut self, _: f64) {}
    fn boolean(&mut self, _: bool) {}
    fn big_number(&mut self, _: Range<usize>) {}
    fn verbatim(&mut self, _: [u8; VERBATIM_FORMAT_LEN], _: Range<usize>) {}
    fn aggregate(&mut self, _: u8, _: Vec<()>) {}
    fn map(&mut self, _: Vec<((), ())>) {}
}

/// Builds [`Reply`] values whose strings are slices of `source`.
struct Build<'a> {
    source: &'a Bytes,
}

impl Sink for Build<'_> {
    type Out = Reply;
    fn simple(&mut self, text: Range<usize>) -> Reply {
        Reply::Simple(self.source.slice(text))
    }
    fn error(&mut self, text: Range<usize>) -> Reply {
        Reply::Error(self.source.slice(text))
    }
    fn integer(&mut self, value: i64) -> Reply {
        Reply::Integer(value)
    }
    fn bulk(&mut self, data: Range<usize>) -> Reply {
        Reply::Bulk(self.source.slice(data))
    }
    fn null(&mut self) -> Reply {
        Reply::Null
    }
    fn null_array(&mut self) -> Reply {
        Reply::NullArray
    }
    fn double(&mut self, value: f64) -> Reply {
        Reply::Double(value)
    }
    fn boolean(&mut self, value: bool) -> Reply {
        Reply::Boolean(value)
    }
    fn big_number(&mut self, digits: Range<usize>) -> Reply {
        Reply::BigNumber(self.source.slice(digits))
    }
    fn verbatim(&mut self, format: [u8; VERBATIM_FORMAT_LEN], text: Range<usize>) -> Reply {
        Reply::Verbatim {
            format,
            text: self.source.slice(text),
        }
    }
    fn aggregate(&mut self, kind: u8, items: Vec<Reply>) -> Reply {
        match kind {
            SET => Reply::Set(items),
            PUSH => Reply::Push(items),
            _ => Reply::Array(items),
        }
    }
    fn map(&mut self, pairs: Vec<(Reply, Reply)>) -> Reply {
        Reply::Map(pairs)
    }
}

/// `Ok(None)` = incomplete; otherwise the value and the offset after it.
type Parsed<T> = Result<Option<(T, usize)>, ReplyError>;

/// Parses the reply starting at `at`, nested `depth` aggregates deep.
fn parse_value<S: Sink>(
    buf: &[u8],
    at: usize,
    depth: usize,
    limits: &ReplyLimits,
    sink: &mut S,
) -> Parsed<S::Out> {
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some((line, next)) = read_line(buf, at + 1, limits)? else {
        return Ok(None);
    };
    let text = buf.get(line.clone()).unwrap_or_default();
    let malformed = |what| ReplyError::Malformed { what, offset: at };
    let out = match kind {
        SIMPLE_STRING => sink.simple(line),
        SIMPLE_ERROR => sink.error(line),
        INTEGER => sink.integer(parse_i64(text).ok_or_else(|| malformed("integer"))?),
        NULL if text.is_empty() => sink.null(),
        NULL => return Err(malformed("null")),
        DOUBLE => sink.double(parse_double(text).ok_or_else(|| malformed("double"))?),
        BOOLEAN => match text {
            b"t" => sink.boolean(true),
            b"f" => sink.boolean(false),
            _ => return Err(malformed("boolean")),
        },
        BIG_NUMBER if is_big_number(text) => sink.big_number(line),
        BIG_NUMBER => return Err(malformed("big number")),
        BULK_STRING if text == b"-1" => sink.null(),
        BULK_STRING | BLOB_ERROR | VERBATIM => {
            let len = length(text, limits.max_bulk_len, "bulk string", at)?;
            let Some(data_end) = next.checked_add(len) else {
                return Err(malformed("length"));
            };
            let Some(end) = data_end.checked_add(CRLF.len()) else {
                return Err(malformed("length"));
            };
            let Some(terminator) = buf.get(data_end..end) else {
                return Ok(None);
            };
            if terminator != CRLF {
                return Err(malformed("line end"));
            }
            let data = next..data_end;
            let out = match kind {
                BULK_STRING => sink.bulk(data),
                BLOB_ERROR => sink.error(data),
                _ => verbatim(buf, data, sink).ok_or_else(|| malformed("verbatim string"))?,
            };
            return Ok(Some((out, end)));
        }
        ARRAY if text == b"-1" => sink.null_array(),
        ARRAY | SET | PUSH | MAP => {
            if depth >= limits.max_depth {
                return Err(ReplyError::TooDeep {
                    max: limits.max_depth,
                    offset: at,
                });
            }
            let len = length(text, limits.max_aggregate_len, "aggregate", at)?;
            return if kind == MAP {
                parse_map(buf, next, len, depth + 1, limits, sink)
            } else {
                parse_items(buf, next, len, depth + 1, limits, sink)
                    .map(|found| found.map(|(items, end)| (sink.aggregate(kind, items), end)))
            };
        }
        byte => return Err(ReplyError::UnknownType { byte, offset: at }),
    };
    Ok(Some((out, next)))
}

/// Parses `len` replies from `at`.
fn parse_items<S: Sink>(
    buf: &[u8],
    mut at: usize,
    len: usize,
    depth: usize,
    limits: &ReplyLimits,
    sink: &mut S,
) -> Parsed<Vec<S::Out>> {
    let mut items = Vec::with_capacity(len.min(ARGV_PREALLOC_MAX));
    for _ in 0..len {
        let Some((item, next)) = parse_value(buf, at, depth, limits, sink)? else {
            return Ok(None);
        };
        items.push(item);
        at = next;
    }
    Ok(Some((items, at)))
}

/// Parses `pairs` key-value pairs from `at`.
fn parse_map<S: Sink>(
    buf: &[u8],
    mut at: usize,
    pairs: usize,
    depth: usize,
    limits: &ReplyLimits,
    sink: &mut S,
) -> Parsed<S::Out> {
    let mut items = Vec::with_capacity(pairs.min(ARGV_PREALLOC_MAX));
    for _ in 0..pairs {
        let Some((key, next)) = parse_value(buf, at, depth, limits, sink)? else {
            return Ok(None);
        };
        let Some((value, next)) = parse_value(buf, next, depth, limits, sink)? else {
            return Ok(None);
        };
        items.push((key, value));
        at = next;
    }
    Ok(Some((sink.map(items), at)))
}

/// Splits a verbatim string's payload into its format tag and text.
fn verbatim<S: Sink>(buf: &[u8], data: Range<usize>, sink: &mut S) -> Option<S::Out> {
    let payload = buf.get(data.clone())?;
    let format: [u8; VERBATIM_FORMAT_LEN] = payload.get(..VERBATIM_FORMAT_LEN)?.try_into().ok()?;
    if payload.get(VERBATIM_FORMAT_LEN) != Some(&VERBATIM_SEPARATOR) {
        return None;
    }
    Some(sink.verbatim(format, data.start + VERBATIM_FORMAT_LEN + 1..data.end))
}

/// Finds the line starting at `from`: its text range and the offset after its `\r\n`.
fn read_line(
    buf: &[u8],
    from: usize,
    limits: &ReplyLimits,
) -> Result<Option<(Range<usize>, usize)>, ReplyError> {
    let window_end = buf
        .len()
        .min(from.saturating_add(limits.max_line_len).saturating_add(1));
    let found = buf
        .get(from..window_end)
        .and_then(|window| memchr::memchr(CR, window));
    let Some(cr) = found.map(|i| from + i) else {
        if buf.len().saturating_sub(from) > limits.max_line_len {
            return Err(ReplyError::TooLong {
                what: "line",
                max: limits.max_line_len,
                offset: from.saturating_sub(1),
            });
        }
        return Ok(None);
    };
    match buf.get(cr + 1) {
        None => Ok(None),
        Some(&LF) => Ok(Some((from..cr, cr + 2))),
        Some(_) => Err(ReplyError::Malformed {
            what: "line end",
            offset: cr,
        }),
    }
}

/// A non-negative length no larger than `max`.
fn length(text: &[u8], max: usize, what: &'static str, at: usize) -> Result<usize, ReplyError> {
    let value = parse_i64(text).ok_or(ReplyError::Malformed {
        what: "length",
        offset: at,
    })?;
    let len = usize::try_from(value).map_err(|_| ReplyError::Malformed {
        what: "length",
        offset: at,
    })?;
    if len > max {
        return Err(ReplyError::TooLong {
            what,
            max,
            offset: at,
        });
    }
    Ok(len)
}

/// A RESP3 double: decimal or exponent notation, or `inf`, `-inf`, `nan`.
fn parse_double(text: &[u8]) -> Option<f64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// An optional sign followed by at least one decimal digit.
fn is_big_number(text: &[u8]) -> bool {
    let digits = match text.split_first() {
        Some((b'-' | b'+', rest)) => rest,
        _ => text,
    };
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}
