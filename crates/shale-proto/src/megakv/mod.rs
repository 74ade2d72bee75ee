//! Mega-KV's binary protocol: batches of GET and SET jobs, and one reply per GET.
//!
//! Mega-KV (Zhang et al., VLDB'15) sends many small jobs in one packet: a 16-bit magic number,
//! then jobs, then a 16-bit end mark. Only GETs are answered, in request order: a found value or a
//! one-byte "not found". Shale speaks the same bytes over TCP, where a batch frames itself (it ends
//! at its end mark) and batches follow each other on the stream. `docs/format/megakv.md` in the
//! repository draws every byte and records where the reference implementation's behaviour was
//! fixed rather than copied.
//!
//! # Contract
//! - Decoders never panic. `Ok(None)` means "need more bytes"; every length is checked against
//!   [`Limits`] as soon as its field has arrived, before any data is waited for or allocated.
//! - Decoding does not depend on how the stream was split into reads.
//! - Encoders refuse keys and values too long for their length fields instead of truncating them,
//!   and always leave a well-formed stream behind.

mod batch;
mod error;
mod format;
mod limits;
mod reply;

pub use batch::{decode_batch, encode_batch, parse_batch, Batch, BatchEncoder, Job};
pub use error::MegaKvError;
pub use format::{END_MARK, JOB_GET, JOB_SET, REPLY_NOT_FOUND, REPLY_VALUE, REQUEST_MAGIC};
pub use limits::{
    Limits, DEFAULT_MAX_BATCH_LEN, DEFAULT_MAX_JOBS, DEFAULT_MAX_KEY_LEN, DEFAULT_MAX_VALUE_LEN,
};
pub use reply::{
    decode_reply, encode_reply, encode_value_reply, encode_value_reply_header, parse_reply,
    GetReply,
};
