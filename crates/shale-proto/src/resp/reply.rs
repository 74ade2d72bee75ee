//! Replies as values: the [`Reply`] tree, and the protocol [`Version`] a connection speaks.

use bytes::{Bytes, BytesMut};

use super::encode::{format_double, ReplyWriter};
use super::format::VERBATIM_FORMAT_LEN;

/// The protocol version of a connection: RESP2 until the client sends `HELLO 3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Version {
    /// RESP2, every connection's starting version.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

impl Version {
    /// The version `HELLO <protover>` asks for; `None` for anything but 2 and 3 (Redis answers
    /// those with `-NOPROTO`).
    pub fn from_protover(protover: i64) -> Option<Version> {
        match protover {
            2 => Some(Version::Resp2),
            3 => Some(Version::Resp3),
            _ => None,
        }
    }

    /// The version's number, as `HELLO` reports it in the `proto` field.
    pub fn number(self) -> i64 {
        match self {
            Version::Resp2 => 2,
            Version::Resp3 => 3,
        }
    }
}

/// One reply, possibly nested. Encoding it in RESP2 lowers the RESP3-only types the way Redis
/// does (see [`Reply::lowered`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`: a short status line. Must not contain `\r` or `\n` (the encoder replaces them).
    Simple(Bytes),
    /// `-ERR message`: the error code and message, without the leading `-`. Must not contain `\r`
    /// or `\n` (the encoder replaces them).
    Error(Bytes),
    /// `:42`.
    Integer(i64),
    /// `$3\r\nfoo`: binary-safe data.
    Bulk(Bytes),
    /// The null reply: RESP2 `$-1` (a null bulk string), RESP3 `_`.
    Null,
    /// The null array: RESP2 `*-1`, RESP3 `_`.
    NullArray,
    /// `*<n>` followed by `n` replies.
    Array(Vec<Reply>),
    /// RESP3 `%<n>`: `n` key-value pairs. RESP2: an array of `2n` replies, keys and values
    /// alternating.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~<n>`: an unordered collection. RESP2: an array.
    Set(Vec<Reply>),
    /// RESP3 `,1.5`. RESP2: a bulk string holding the same text.
    Double(f64),
    /// RESP3 `#t` / `#f`. RESP2: the integer 1 or 0.
    Boolean(bool),
    /// RESP3 `(<digits>`: an integer of any size, as an optional `-` and decimal digits. RESP2: a
    /// bulk string holding the digits.
    BigNumber(Bytes),
    /// RESP3 `=<n>\r\ntxt:<text>`: text with a three-byte format tag (`txt`, `mkd`). RESP2: a bulk
    /// string holding only the text.
    Verbatim {
        /// The format tag.
        format: [u8; VERBATIM_FORMAT_LEN],
        /// The text.
        text: Bytes,
    },
    /// RESP3 `><n>`: out-of-band data (pub/sub messages, invalidations). RESP2: an array.
    Push(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple(Bytes::from_static(b"OK"))
    }

    /// An error reply from its code and message, for example `ERR unknown command`.
    pub fn error(text: impl Into<Bytes>) -> Reply {
        Reply::Error(text.into())
    }

    /// A bulk string.
    pub fn bulk(data: impl Into<Bytes>) -> Reply {
        Reply::Bulk(data.into())
    }

    /// Appends this reply to `out` in `version`.
    pub fn encode(&self, version: Version, out: &mut BytesMut) {
        ReplyWriter::new(out, version).reply(self);
    }

    /// The reply a client speaking `version` reads back after this one is encoded in `version`:
    /// in RESP2 maps, sets and pushes become arrays, doubles, big numbers and verbatim strings
    /// become bulk strings, booleans become integers; in RESP3 both nulls are the one null.
    /// (Text in simple strings and errors is assumed free of `\r` and `\n`.)
    pub fn lowered(&self, version: Version) -> Reply {
        let lower_all = |items: &[Reply]| items.iter().map(|r| r.lowered(version)).collect();
        match (self, version) {
            (Reply::NullArray, Version::Resp3) => Reply::Null,
            (Reply::Array(items), _) => Reply::Array(lower_all(items)),
            (Reply::Set(items), Version::Resp3) => Reply::Set(lower_all(items)),
            (Reply::Push(items), Version::Resp3) => Reply::Push(lower_all(items)),
            (Reply::Set(items) | Reply::Push(items), Version::Resp2) => {
                Reply::Array(lower_all(items))
            }
            (Reply::Map(pairs), Version::Resp3) => Reply::Map(
                pairs
                    .iter()
                    .map(|(k, v)| (k.lowered(version), v.lowered(version)))
                    .collect(),
            ),
            (Reply::Map(pairs), Version::Resp2) => Reply::Array(
                pairs
                    .iter()
                    .flat_map(|(k, v)| [k.lowered(version), v.lowered(version)])
                    .collect(),
            ),
            (Reply::Double(value), Version::Resp2) => {
                Reply::Bulk(Bytes::copy_from_slice(format_double(*value).as_bytes()))
            }
            (Reply::Boolean(value), Version::Resp2) => Reply::Integer(i64::from(*value)),
            (Reply::BigNumber(digits), Version::Resp2) => Reply::Bulk(digits.clone()),
            (Reply::Verbatim { text, .. }, Version::Resp2) => Reply::Bulk(text.clone()),
            (other, _) => other.clone(),
        }
    }
}
