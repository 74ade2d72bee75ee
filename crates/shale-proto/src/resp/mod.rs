//! RESP, the Redis protocol: request parsing, reply encoding (RESP2 and RESP3), reply parsing.
//!
//! # Requests
//! A client sends either multibulk requests (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`, what client
//! libraries send) or inline requests (`GET k\r\n`, what a person types into `telnet`). A server
//! decodes them with a [`RequestDecoder`], which takes every complete request out of the
//! connection's read buffer at once (pipelining) and hands out arguments that share that buffer.
//! [`parse_request`] and [`parse_requests`] do the same over a plain byte slice. Malformed input and
//! broken [`Limits`] are [`ProtocolError`]s carrying Redis's exact message.
//!
//! # Replies
//! A [`ReplyWriter`] appends replies in the connection's [`Version`] straight into the write
//! buffer; [`Reply`] is the same as a value tree. A client reads replies back with
//! [`parse_reply`] / [`decode_reply`].
//!
//! `docs/format/resp.md` in the repository describes the bytes, the limits, and every place where
//! Shale deliberately differs from Redis.

mod decoder;
mod encode;
mod error;
mod format;
mod inline;
mod int;
mod limits;
mod reply;
mod reply_parser;
mod request;
mod scan;

pub use decoder::{parse_request, parse_requests, RequestDecoder};
pub use encode::ReplyWriter;
pub use error::ProtocolError;
pub use format::VERBATIM_FORMAT_LEN;
pub use limits::{
    Limits, DEFAULT_MAX_BULK_LEN, DEFAULT_MAX_INLINE_LEN, DEFAULT_MAX_MULTIBULK_LEN,
    DEFAULT_MAX_REQUEST_LEN, UNAUTHENTICATED_MAX_BULK_LEN, UNAUTHENTICATED_MAX_MULTIBULK_LEN,
};
pub use reply::{Reply, Version};
pub use reply_parser::{
    decode_reply, parse_reply, ReplyError, ReplyLimits, DEFAULT_MAX_REPLY_DEPTH,
    DEFAULT_MAX_REPLY_LINE_LEN,
};
pub use request::{encode_command, Request};
