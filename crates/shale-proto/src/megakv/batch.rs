//! Request batches: decoding (incremental, zero-copy from a `BytesMut`) and encoding.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use bytes::{BufMut, Bytes, BytesMut};

use super::format::{
    read_u16, read_u32, END_MARK, GET_HEADER_LEN, JOB_GET, JOB_SET, JOB_TYPE_LEN, KEY_LEN_LEN,
    MAGIC_LEN, REQUEST_MAGIC, SET_HEADER_LEN,
};
use super::{Limits, MegaKvError};

/// One job of a batch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Job {
    /// Look a key up; answered with a [`super::GetReply`].
    Get {
        /// The key.
        key: Bytes,
    },
    /// Store a value; not answered.
    Set {
        /// The key.
        key: Bytes,
        /// The value.
        value: Bytes,
    },
}

/// A decoded batch: its jobs in the order they were sent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Batch {
    /// The jobs, in order. A batch may be empty (magic then end mark).
    pub jobs: Vec<Job>,
}

impl Batch {
    /// How many replies the batch is owed: one per GET.
    pub fn gets(&self) -> usize {
        self.jobs
            .iter()
            .filter(|job| matches!(job, Job::Get { .. }))
            .count()
    }
}

/// Where a job's bytes are in the scanned buffer.
#[derive(Clone, Copy, Debug)]
enum JobSpan {
    Get {
        key: (usize, usize),
    },
    Set {
        key: (usize, usize),
        value: (usize, usize),
    },
}

/// Parses the batch at the start of `buf`: the batch and the bytes it took, or `Ok(None)` if it
/// has not fully arrived. The keys and values are copied out of `buf` (one allocation).
///
/// # Errors
/// A [`MegaKvError`] if the batch is malformed or breaks `limits`.
pub fn parse_batch(buf: &[u8], limits: &Limits) -> Result<Option<(Batch, usize)>, MegaKvError> {
    let mut spans = Vec::new();
    let Some(end) = scan(buf, limits, &mut spans)? else {
        return Ok(None);
    };
    let source = Bytes::copy_from_slice(buf.get(..end).unwrap_or_default());
    Ok(Some((materialize(&source, &spans), end)))
}

/// Decodes the batch at the front of `buf`, removing it; `Ok(None)` if it has not fully arrived
/// (`buf` is then left as it was). Keys and values are slices of `buf`, not copies.
///
/// An incomplete batch is rescanned from its start on the next call; the scan only hops from
/// header to header, at most [`Limits::max_jobs`] of them.
///
/// # Errors
/// A [`MegaKvError`] if the batch is malformed or breaks `limits`.
pub fn decode_batch(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Batch>, MegaKvError> {
    let mut spans = Vec::new();
    let Some(end) = scan(buf, limits, &mut spans)? else {
        return Ok(None);
    };
    let source = buf.split_to(end).freeze();
    Ok(Some(materialize(&source, &spans)))
}

/// Finds the end of the batch at the start of `buf`, recording where each job's bytes are.
fn scan(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Vec<JobSpan>,
) -> Result<Option<usize>, MegaKvError> {
    let Some(magic) = read_u16(buf, 0) else {
        return Ok(None);
    };
    if magic != REQUEST_MAGIC {
        return Err(MegaKvError::BadMagic { found: magic });
    }
    let mut at = MAGIC_LEN;
    loop {
        let Some(job_type) = read_u16(buf, at) else {
            return Ok(None);
        };
        if job_type == END_MARK {
            return Ok(Some(at + JOB_TYPE_LEN));
        }
        if job_type != JOB_GET && job_type != JOB_SET {
            return Err(MegaKvError::UnknownJobType {
                found: job_type,
                offset: at,
            });
        }
        if spans.len() >= limits.max_jobs {
            return Err(MegaKvError::TooManyJobs {
                max: limits.max_jobs,
            });
        }
        let Some(key_len) = read_u16(buf, at + JOB_TYPE_LEN) else {
            return Ok(None);
        };
        let key_len = usize::from(key_len);
        if key_len > limits.max_key_len {
            return Err(MegaKvError::KeyTooLong {
                len: key_len,
                max: limits.max_key_len,
            });
        }
        let (header_len, value_len) = if job_type == JOB_GET {
            (GET_HEADER_LEN, 0)
        } else {
            let Some(value_len) = read_u32(buf, at + JOB_TYPE_LEN + KEY_LEN_LEN) else {
                return Ok(None);
            };
            let value_len = usize::try_from(value_len).unwrap_or(usize::MAX);
            if value_len > limits.max_value_len {
                return Err(MegaKvError::ValueTooLong {
                    len: value_len,
                    max: limits.max_value_len,
                });
            }
            (SET_HEADER_LEN, value_len)
        };
        let too_long = MegaKvError::BatchTooLong {
            max: limits.max_batch_len,
        };
        let key_start = at + header_len;
        let key_end = key_start
            .checked_add(key_len)
            .ok_or_else(|| too_long.clone())?;
        let job_end = key_end
            .checked_add(value_len)
            .ok_or_else(|| too_long.clone())?;
        // The batch will need at least an end mark after this job.
        if job_end
            .checked_add(JOB_TYPE_LEN)
            .is_none_or(|end| end > limits.max_batch_len)
        {
            return Err(too_long);
        }
        if buf.len() < job_end {
            return Ok(None);
        }
        spans.push(if job_type == JOB_GET {
            JobSpan::Get {
                key: (key_start, key_end),
            }
        } else {
            JobSpan::Set {
                key: (key_start, key_end),
                value: (key_end, job_end),
            }
        });
        at = job_end;
    }
}

/// Builds the jobs as slices of `source`, which holds the scanned batch.
fn materialize(source: &Bytes, spans: &[JobSpan]) -> Batch {
    let slice = |(start, end): (usize, usize)| source.slice(start..end);
    let jobs = spans
        .iter()
        .map(|span| match *span {
            JobSpan::Get { key } => Job::Get { key: slice(key) },
            JobSpan::Set { key, value } => Job::Set {
                key: slice(key),
                value: slice(value),
            },
        })
        .collect();
    Batch { jobs }
}

/// Writes one batch job by job: the magic on creation, the end mark on [`BatchEncoder::finish`]
/// (or when dropped), so the output is a complete batch whatever happens.
#[derive(Debug)]
pub struct BatchEncoder<'a> {
    out: &'a mut BytesMut,
    gets: usize,
    finished: bool,
}

impl<'a> BatchEncoder<'a> {
    /// Starts a batch at the end of `out`.
    pub fn new(out: &'a mut BytesMut) -> Self {
        out.put_u16_le(REQUEST_MAGIC);
        BatchEncoder {
            out,
            gets: 0,
            finished: false,
        }
    }

    /// Appends a GET.
    ///
    /// # Errors
    /// [`MegaKvError::KeyTooLong`] if the key does not fit its 16-bit length; nothing is written.
    pub fn get(&mut self, key: &[u8]) -> Result<(), MegaKvError> {
        let key_len = key_len_field(key)?;
        self.out.reserve(GET_HEADER_LEN + key.len());
        self.out.put_u16_le(JOB_GET);
        self.out.put_u16_le(key_len);
        self.out.put_slice(key);
        self.gets += 1;
        Ok(())
    }

    /// Appends a SET.
    ///
    /// # Errors
    /// [`MegaKvError::KeyTooLong`] or [`MegaKvError::ValueTooLong`] if a length does not fit its
    /// field; nothing is written.
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> Result<(), MegaKvError> {
        let key_len = key_len_field(key)?;
        let value_len = u32::try_from(value.len()).map_err(|_| MegaKvError::ValueTooLong {
            len: value.len(),
            max: u32::MAX as usize,
        })?;
        self.out.reserve(
            SET_HEADER_LEN
                .saturating_add(key.len())
                .saturating_add(value.len()),
        );
        self.out.put_u16_le(JOB_SET);
        self.out.put_u16_le(key_len);
        self.out.put_u32_le(value_len);
        self.out.put_slice(key);
        self.out.put_slice(value);
        Ok(())
    }

    /// Appends a job.
    ///
    /// # Errors
    /// As for [`Self::get`] and [`Self::set`].
    pub fn job(&mut self, job: &Job) -> Result<(), MegaKvError> {
        match job {
            Job::Get { key } => self.get(key),
            Job::Set { key, value } => self.set(key, value),
        }
    }

    /// Ends the batch; returns how many GETs it holds (the replies to expect).
    pub fn finish(mut self) -> usize {
        self.end();
        self.gets
    }

    fn end(&mut self) {
        if !self.finished {
            self.out.put_u16_le(END_MARK);
            self.finished = true;
        }
    }
}

impl Drop for BatchEncoder<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

/// Appends a whole batch of `jobs` to `out`; returns how many GETs it holds.
///
/// # Errors
/// [`MegaKvError::KeyTooLong`] or [`MegaKvError::ValueTooLong`] if a job does not fit its length
/// fields; `out` is then left as it was.
pub fn encode_batch(jobs: &[Job], out: &mut BytesMut) -> Result<usize, MegaKvError> {
    let start = out.len();
    let mut encoder = BatchEncoder::new(out);
    for job in jobs {
        if let Err(error) = encoder.job(job) {
            encoder.finished = true;
            drop(encoder);
            out.truncate(start);
            return Err(error);
        }
    }
    Ok(encoder.finish())
}

fn key_len_field(key: &[u8]) -> Result<u16, MegaKvError> {
    u16::try_from(key.len()).map_err(|_| MegaKvError::KeyTooLong {
        len: key.len(),
        max: u16::MAX as usize,
    })
}
