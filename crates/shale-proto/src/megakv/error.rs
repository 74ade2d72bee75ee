//! Errors of the Mega-KV codec. A decode error means the stream cannot be framed any more: the
//! server closes the connection (the protocol has no error reply).

use std::fmt;

/// A malformed or over-limit batch or reply, or a job too large to encode.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MegaKvError {
    /// A batch does not start with [`super::REQUEST_MAGIC`].
    BadMagic {
        /// The first two bytes, read little-endian.
        found: u16,
    },
    /// A job type is none of GET, SET and the end mark.
    UnknownJobType {
        /// The job type found.
        found: u16,
        /// Its offset from the start of the batch.
        offset: usize,
    },
    /// A key is longer than the limit (decoding) or than its 16-bit field (encoding).
    KeyTooLong {
        /// The key's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A value is longer than the limit (decoding) or than its 32-bit field (encoding).
    ValueTooLong {
        /// The value's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A batch has more jobs than [`super::Limits::max_jobs`].
    TooManyJobs {
        /// The limit.
        max: usize,
    },
    /// A batch is longer than [`super::Limits::max_batch_len`] bytes.
    BatchTooLong {
        /// The limit.
        max: usize,
    },
    /// A GET reply starts with neither `02` (not found) nor `01 00` (a value).
    BadReplyTag {
        /// The first two bytes of the reply, read little-endian.
        found: u16,
    },
}

impl fmt::Display for MegaKvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MegaKvError::BadMagic { found } => {
                write!(
                    f,
                    "Mega-KV batch starts with 0x{found:04x}, not the magic 0x1234"
                )
            }
            MegaKvError::UnknownJobType { found, offset } => {
                write!(
                    f,
                    "unknown Mega-KV job type 0x{found:04x} at offset {offset}"
                )
            }
            MegaKvError::KeyTooLong { len, max } => {
                write!(
                    f,
                    "Mega-KV key of {len} bytes is longer than the limit of {max}"
                )
            }
            MegaKvError::ValueTooLong { len, max } => {
                write!(
                    f,
                    "Mega-KV value of {len} bytes is longer than the limit of {max}"
                )
            }
            MegaKvError::TooManyJobs { max } => {
                write!(f, "Mega-KV batch has more than {max} jobs")
            }
            MegaKvError::BatchTooLong { max } => {
                write!(f, "Mega-KV batch is longer than {max} bytes")
            }
            MegaKvError::BadReplyTag { found } => {
                write!(
                    f,
                    "Mega-KV reply starts with 0x{found:04x}, neither a value nor not-found"
                )
            }
        }
    }
}

impl std::error::Error for MegaKvError {}
