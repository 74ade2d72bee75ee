//! The bytes of RESP: type prefixes and terminators. The only module that spells them out.
//!
//! Do not change: wire format shared with every Redis client and server. See
//! `docs/format/resp.md` in the repository.

/// Every RESP line ends with carriage return, line feed.
pub(crate) const CRLF: &[u8; 2] = b"\r\n";
/// Carriage return, the byte a RESP header line is searched for.
pub(crate) const CR: u8 = b'\r';
/// Line feed; an inline request ends at the first one.
pub(crate) const LF: u8 = b'\n';

/// `+` simple string (RESP2 and RESP3).
pub(crate) const SIMPLE_STRING: u8 = b'+';
/// `-` simple error (RESP2 and RESP3).
pub(crate) const SIMPLE_ERROR: u8 = b'-';
/// `:` integer (RESP2 and RESP3).
pub(crate) const INTEGER: u8 = b':';
/// `$` bulk string (RESP2 and RESP3); also the prefix of every request argument.
pub(crate) const BULK_STRING: u8 = b'$';
/// `*` array (RESP2 and RESP3); a request starting with it is a multibulk request.
pub(crate) const ARRAY: u8 = b'*';
/// `_` null (RESP3).
pub(crate) const NULL: u8 = b'_';
/// `,` double (RESP3).
pub(crate) const DOUBLE: u8 = b',';
/// `#` boolean (RESP3).
pub(crate) const BOOLEAN: u8 = b'#';
/// `!` blob error (RESP3); parsed, never produced by the encoder.
pub(crate) const BLOB_ERROR: u8 = b'!';
/// `=` verbatim string (RESP3).
pub(crate) const VERBATIM: u8 = b'=';
/// `(` big number (RESP3).
pub(crate) const BIG_NUMBER: u8 = b'(';
/// `%` map (RESP3).
pub(crate) const MAP: u8 = b'%';
/// `~` set (RESP3).
pub(crate) const SET: u8 = b'~';
/// `>` push (RESP3).
pub(crate) const PUSH: u8 = b'>';

/// RESP2's null bulk string.
pub(crate) const RESP2_NULL_BULK: &[u8] = b"$-1\r\n";
/// RESP2's null array.
pub(crate) const RESP2_NULL_ARRAY: &[u8] = b"*-1\r\n";
/// RESP3's one null.
pub(crate) const RESP3_NULL: &[u8] = b"_\r\n";
/// RESP3's true.
pub(crate) const RESP3_TRUE: &[u8] = b"#t\r\n";
/// RESP3's false.
pub(crate) const RESP3_FALSE: &[u8] = b"#f\r\n";

/// Length of the format tag of a verbatim string (`txt`, `mkd`).
pub const VERBATIM_FORMAT_LEN: usize = 3;
/// The byte between a verbatim string's format tag and its text.
pub(crate) const VERBATIM_SEPARATOR: u8 = b':';
