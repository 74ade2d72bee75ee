//! Reply encoding: [`ReplyWriter`] appends replies to a connection's write buffer.
//!
//! Each call reserves what it writes and then copies straight into the buffer: no intermediate
//! `String` or `Vec`, numbers are formatted on the stack. Aggregates are written as a header
//! ([`ReplyWriter::array`], [`ReplyWriter::map`], ...) followed by their elements, so a server can
//! stream a large reply without building it as a [`Reply`] tree first.
//!
//! # Invariant
//! Whatever the arguments, the bytes written are well-formed RESP: text that goes on a line
//! (simple strings, errors, big numbers) has `\r` and `\n` replaced by spaces, as Redis does for
//! error messages, so no argument can break the framing of the stream. The one exception is
//! [`ReplyWriter::bulk_header`], whose data the caller sends itself.

use std::fmt::{self, Write as _};

use bytes::{BufMut, BytesMut};

use super::format::{
    ARRAY, BIG_NUMBER, BULK_STRING, CRLF, DOUBLE, INTEGER, MAP, PUSH, RESP2_NULL_ARRAY,
    RESP2_NULL_BULK, RESP3_FALSE, RESP3_NULL, RESP3_TRUE, SET, SIMPLE_ERROR, SIMPLE_STRING,
    VERBATIM, VERBATIM_FORMAT_LEN, VERBATIM_SEPARATOR,
};
use super::int::Decimal;
use super::{Reply, Version};

/// Upper bound on the bytes of a header (`*`, up to 39 digits, `\r\n`).
const HEADER_MAX_LEN: usize = 1 + 39 + 2;

/// Doubles at least this large (in magnitude) are written with an exponent.
const DOUBLE_EXPONENT_ABOVE: f64 = 1e17;
/// Nonzero doubles smaller than this (in magnitude) are written with an exponent.
const DOUBLE_EXPONENT_BELOW: f64 = 1e-5;

/// Appends replies in one protocol version to a buffer.
#[derive(Debug)]
pub struct ReplyWriter<'a> {
    out: &'a mut BytesMut,
    version: Version,
}

impl<'a> ReplyWriter<'a> {
    /// A writer appending to `out` in `version`.
    pub fn new(out: &'a mut BytesMut, version: Version) -> Self {
        ReplyWriter { out, version }
    }

    /// The version being written.
    pub fn version(&self) -> Version {
        self.version
    }

    /// `+<text>\r\n`.
    pub fn simple(&mut self, text: &[u8]) {
        self.line(SIMPLE_STRING, text);
    }

    /// `+OK\r\n`.
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// `-<text>\r\n`, where `text` is the error code and message (`ERR no such key`,
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`).
    pub fn error(&mut self, text: &[u8]) {
        self.line(SIMPLE_ERROR, text);
    }

    /// `:<value>\r\n`.
    pub fn integer(&mut self, value: i64) {
        let digits = Decimal::signed(value);
        self.out.reserve(HEADER_MAX_LEN);
        self.out.put_u8(INTEGER);
        self.out.put_slice(digits.as_bytes());
        self.out.put_slice(CRLF);
    }

    /// `$<len>\r\n<data>\r\n`.
    pub fn bulk(&mut self, data: &[u8]) {
        self.out.reserve(
            HEADER_MAX_LEN
                .saturating_add(data.len())
                .saturating_add(CRLF.len()),
        );
        self.header(BULK_STRING, data.len() as u128);
        self.out.put_slice(data);
        self.out.put_slice(CRLF);
    }

    /// `$<len>\r\n` alone, for a server that sends the data itself (straight from its memory):
    /// exactly `len` bytes and then `\r\n` must follow in the stream, or its framing is lost.
    pub fn bulk_header(&mut self, len: usize) {
        self.header(BULK_STRING, len as u128);
    }

    /// The null reply: RESP2 `$-1\r\n`, RESP3 `_\r\n`.
    pub fn null(&mut self) {
        self.out.extend_from_slice(match self.version {
            Version::Resp2 => RESP2_NULL_BULK,
            Version::Resp3 => RESP3_NULL,
        });
    }

    /// The null array: RESP2 `*-1\r\n`, RESP3 `_\r\n`.
    pub fn null_array(&mut self) {
        self.out.extend_from_slice(match self.version {
            Version::Resp2 => RESP2_NULL_ARRAY,
            Version::Resp3 => RESP3_NULL,
        });
    }

    /// The header of an array of `len` replies; write the replies next.
    pub fn array(&mut self, len: usize) {
        self.header(ARRAY, len as u128);
    }

    /// The header of a map of `pairs` key-value pairs; write `2 * pairs` replies next, keys and
    /// values alternating. RESP2 gets an array of `2 * pairs`.
    pub fn map(&mut self, pairs: usize) {
        match self.version {
            Version::Resp2 => self.header(ARRAY, pairs as u128 * 2),
            Version::Resp3 => self.header(MAP, pairs as u128),
        }
    }

    /// The header of a set of `len` replies; RESP2 gets an array.
    pub fn set(&mut self, len: usize) {
        let prefix = if self.version == Version::Resp3 {
            SET
        } else {
            ARRAY
        };
        self.header(prefix, len as u128);
    }

    /// The header of a push of `len` replies; RESP2 gets an array.
    pub fn push(&mut self, len: usize) {
        let prefix = if self.version == Version::Resp3 {
            PUSH
        } else {
            ARRAY
        };
        self.header(prefix, len as u128);
    }

    /// RESP3 `,<value>\r\n`; RESP2 a bulk string of the same text. The text is the shortest that
    /// reads back as the same value, with an exponent for very large or small magnitudes, and
    /// `inf`, `-inf`, `nan` for the non-finite values.
    pub fn double(&mut self, value: f64) {
        let text = format_double(value);
        match self.version {
            Version::Resp2 => self.bulk(text.as_bytes()),
            Version::Resp3 => self.line(DOUBLE, text.as_bytes()),
        }
    }

    /// RESP3 `#t\r\n` / `#f\r\n`; RESP2 `:1\r\n` / `:0\r\n`.
    pub fn boolean(&mut self, value: bool) {
        match self.version {
            Version::Resp2 => self.integer(i64::from(value)),
            Version::Resp3 => {
                self.out
                    .extend_from_slice(if value { RESP3_TRUE } else { RESP3_FALSE })
            }
        }
    }

    /// RESP3 `(<digits>\r\n`; RESP2 a bulk string of the digits. `digits` should be an optional
    /// `-` followed by decimal digits.
    pub fn big_number(&mut self, digits: &[u8]) {
        match self.version {
            Version::Resp2 => self.bulk(digits),
            Version::Resp3 => self.line(BIG_NUMBER, digits),
        }
    }

    /// RESP3 `=<len>\r\n<format>:<text>\r\n`; RESP2 a bulk string of the text alone.
    pub fn verbatim(&mut self, format: &[u8; VERBATIM_FORMAT_LEN], text: &[u8]) {
        match self.version {
            Version::Resp2 => self.bulk(text),
            Version::Resp3 => {
                let len = (VERBATIM_FORMAT_LEN as u128 + 1) + text.len() as u128;
                self.out.reserve(
                    HEADER_MAX_LEN
                        .saturating_add(VERBATIM_FORMAT_LEN + 1 + CRLF.len())
                        .saturating_add(text.len()),
                );
                self.header(VERBATIM, len);
                self.out.put_slice(format);
                self.out.put_u8(VERBATIM_SEPARATOR);
                self.out.put_slice(text);
                self.out.put_slice(CRLF);
            }
        }
    }

    /// Writes a whole [`Reply`] tree.
    pub fn reply(&mut self, reply: &Reply) {
        match reply {
            Reply::Simple(text) => self.simple(text),
            Reply::Error(text) => self.error(text),
            Reply::Integer(value) => self.integer(*value),
            Reply::Bulk(data) => self.bulk(data),
            Reply::Null => self.null(),
            Reply::NullArray => self.null_array(),
            Reply::Array(items) => {
                self.array(items.len());
                items.iter().for_each(|item| self.reply(item));
            }
            Reply::Set(items) => {
                self.set(items.len());
                items.iter().for_each(|item| self.reply(item));
            }
            Reply::Push(items) => {
                self.push(items.len());
                items.iter().for_each(|item| self.reply(item));
            }
            Reply::Map(pairs) => {
                self.map(pairs.len());
                for (key, value) in pairs {
                    self.reply(key);
                    self.reply(value);
                }
            }
            Reply::Double(value) => self.double(*value),
            Reply::Boolean(value) => self.boolean(*value),
            Reply::BigNumber(digits) => self.big_number(digits),
            Reply::Verbatim { format, text } => self.verbatim(format, text),
        }
    }

    /// `<prefix><n>\r\n`.
    fn header(&mut self, prefix: u8, n: u128) {
        let digits = Decimal::unsigned(n);
        self.out.reserve(HEADER_MAX_LEN);
        self.out.put_u8(prefix);
        self.out.put_slice(digits.as_bytes());
        self.out.put_slice(CRLF);
    }

    /// `<prefix><text>\r\n`, with `\r` and `\n` in `text` replaced by spaces.
    fn line(&mut self, prefix: u8, text: &[u8]) {
        self.out.reserve(text.len().saturating_add(1 + CRLF.len()));
        self.out.put_u8(prefix);
        if memchr::memchr2(b'\r', b'\n', text).is_none() {
            self.out.put_slice(text);
        } else {
            for &byte in text {
                self.out.put_u8(if matches!(byte, b'\r' | b'\n') {
                    b' '
                } else {
                    byte
                });
            }
        }
        self.out.put_slice(CRLF);
    }
}

/// A double formatted on the stack.
pub(crate) struct DoubleText {
    buf: [u8; DOUBLE_TEXT_CAPACITY],
    len: usize,
}

/// Room for the longest text [`format_double`] produces (`-1.2345678901234567e-308` is 24 bytes;
/// plain notation stays under 30 within the exponent thresholds).
const DOUBLE_TEXT_CAPACITY: usize = 48;

impl DoubleText {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl fmt::Write for DoubleText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dest = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dest.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The text of a double as Shale writes it (see [`ReplyWriter::double`]).
pub(crate) fn format_double(value: f64) -> DoubleText {
    let mut text = DoubleText {
        buf: [0; DOUBLE_TEXT_CAPACITY],
        len: 0,
    };
    let magnitude = value.abs();
    let written = if value.is_nan() {
        text.write_str("nan")
    } else if value.is_infinite() {
        text.write_str(if value > 0.0 { "inf" } else { "-inf" })
    } else if magnitude == 0.0
        || (DOUBLE_EXPONENT_BELOW..DOUBLE_EXPONENT_ABOVE).contains(&magnitude)
    {
        write!(text, "{value}")
    } else {
        write_exponent(&mut text, value)
    };
    if written.is_err() {
        // Cannot happen within the capacity above; the exponent form is always short.
        text.len = 0;
        let _ = write_exponent(&mut text, value);
    }
    text
}

/// Writes `value` in exponent form as C's `printf` does (Redis's `%.17g`): the shortest mantissa
/// that reads back the same, then `e`, a sign and at least two exponent digits (`1e+17`,
/// `2.5e-07`).
fn write_exponent(text: &mut DoubleText, value: f64) -> fmt::Result {
    let mut scratch = DoubleText {
        buf: [0; DOUBLE_TEXT_CAPACITY],
        len: 0,
    };
    write!(scratch, "{value:e}")?;
    let shown = scratch.as_bytes();
    let at = shown.iter().position(|&b| b == b'e').unwrap_or(shown.len());
    let (mantissa, exponent) = shown.split_at(at);
    let exponent = exponent.get(1..).unwrap_or_default();
    let (sign, digits) = match exponent.split_first() {
        Some((b'-', rest)) => ("-", rest),
        _ => ("+", exponent),
    };
    text.write_str(std::str::from_utf8(mantissa).map_err(|_| fmt::Error)?)?;
    text.write_str("e")?;
    text.write_str(sign)?;
    if digits.len() < 2 {
        text.write_str("0")?;
    }
    text.write_str(std::str::from_utf8(digits).map_err(|_| fmt::Error)?)
}
