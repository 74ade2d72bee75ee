//! Shale's wire codecs: the Redis protocol (RESP2 and RESP3) and Mega-KV's binary protocol.
//!
//! # Purpose
//! Everything a Shale server or client needs to turn bytes into requests and replies into bytes, and
//! nothing else: no I/O, no async runtime, no global state, no logging. Every function is a pure
//! function of its arguments (the stateful [`resp::RequestDecoder`] only remembers how far it got
//! through a request that has not fully arrived), so the codecs are cheap to fuzz and to benchmark.
//!
//! - [`resp`]: request parsing (multibulk and inline, incremental, zero-copy from a
//!   [`bytes::BytesMut`]), reply encoding for RESP2 and RESP3, and a reply parser for clients.
//!   `docs/format/resp.md` in the repository describes the bytes and every limit.
//! - [`megakv`]: request batches and GET replies of Mega-KV's protocol (VLDB'15).
//!   `docs/format/megakv.md` draws the bytes.
//!
//! # Contract for untrusted input
//! Bytes from the wire are untrusted. No decoder in this crate panics, whatever the input; lengths
//! read from the wire are checked against explicit limits (named constants with documented
//! defaults) before anything is allocated for them, and arithmetic on them is checked. A malformed
//! input is an error value that says what was wrong; an input that is merely short is "need more
//! bytes" (`Ok(None)`), never an error.
//!
//! # Concurrency
//! The crate has no shared state. Decoders and encoders are plain values owned by one connection.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod megakv;
pub mod resp;
