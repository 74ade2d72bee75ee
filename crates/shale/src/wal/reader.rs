//! Replaying a log file, and the rule that tells a torn tail from corruption.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use super::format::{decode, Damage, HEADER_LEN};
use crate::error::{Error, Result};
use crate::WalRecovery;
use std::path::PathBuf;

/// What a reader does at the first damaged record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TailPolicy {
    /// Damage in the last record is a torn tail and is cut; damage followed by an intact record is
    /// corruption. For WALs, whose last record may be half-written by a power loss.
    CutDamagedTail,
    /// Stop at the first damage and keep the records before it.
    PointInTime,
    /// Like `CutDamagedTail`, but the last record is cut only if it shows the marks of an
    /// interrupted write: it is truncated, or the file ends in zero bytes (the fill some file
    /// systems leave after a torn append). Any other damage is corruption. For the MANIFEST, each
    /// of whose records ends in a non-zero byte, so a flipped byte in a complete record is caught.
    CutTornTailOnly,
}

impl From<WalRecovery> for TailPolicy {
    fn from(mode: WalRecovery) -> TailPolicy {
        match mode {
            WalRecovery::TolerateTornTail => TailPolicy::CutDamagedTail,
            WalRecovery::PointInTime => TailPolicy::PointInTime,
        }
    }
}

/// Where and why a reader stopped early without an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TailCut {
    pub offset: u64,
    pub reason: &'static str,
}

/// Reads the records of a whole log file held in memory.
pub(crate) struct LogReader {
    data: Vec<u8>,
    path: PathBuf,
    policy: TailPolicy,
    // INVARIANT: `pos <= data.len()`, and `pos` is the start of a record or the end of the data.
    pos: usize,
    tail_cut: Option<TailCut>,
}

impl LogReader {
    pub(crate) fn new(data: Vec<u8>, path: PathBuf, policy: TailPolicy) -> LogReader {
        LogReader {
            data,
            path,
            policy,
            pos: 0,
            tail_cut: None,
        }
    }

    /// The next record's offset in the file and its payload, or `None` at the end (or after a cut
    /// tail).
    ///
    /// # Errors
    /// `Corruption` naming the file and the offset of the damaged record, when the policy does not
    /// allow cutting it. The reader then stays at the damage.
    pub(crate) fn next_record(&mut self) -> Result<Option<(u64, &[u8])>> {
        if self.pos >= self.data.len() {
            return Ok(None);
        }
        let start = self.pos;
        let rest = self.data.get(start..).unwrap_or_default();
        match decode(rest) {
            Ok(len) => {
                self.pos = start + HEADER_LEN + len;
                // `decode` checked that the payload is within `rest`.
                let payload = rest.get(HEADER_LEN..HEADER_LEN + len).unwrap_or_default();
                Ok(Some((start as u64, payload)))
            }
            Err(_) if rest.iter().all(|&b| b == 0) => {
                // Zero-filled space the writer kept ahead of its appends
                // (`WritableFile::preallocate`): the end of the log, not damage.
                self.pos = self.data.len();
                Ok(None)
            }
            Err(damage) => {
                if self.may_cut(start, damage) {
                    self.tail_cut = Some(TailCut {
                        offset: start as u64,
                        reason: damage.describe(),
                    });
                    self.pos = self.data.len();
                    Ok(None)
                } else {
                    Err(Error::corruption(
                        &self.path,
                        start as u64,
                        damage.describe(),
                    ))
                }
            }
        }
    }

    fn may_cut(&self, start: usize, damage: Damage) -> bool {
        match self.policy {
            TailPolicy::PointInTime => true,
            TailPolicy::CutDamagedTail => !self.intact_record_after(start),
            TailPolicy::CutTornTailOnly => {
                let torn = damage == Damage::Truncated || self.data.last() == Some(&0);
                torn && !self.intact_record_after(start)
            }
        }
    }

    /// True when some offset after `start` holds an intact record: the damage is then not at the
    /// tail. Checks headers first, so a scan costs one small checksum per byte.
    fn intact_record_after(&self, start: usize) -> bool {
        (start + 1..self.data.len()).any(|offset| {
            self.data
                .get(offset..)
                .is_some_and(|rest| decode(rest).is_ok())
        })
    }

    /// Set when the reader cut a damaged tail.
    pub(crate) fn tail_cut(&self) -> Option<&TailCut> {
        self.tail_cut.as_ref()
    }
}

/// Replays every record of `data` under `policy`, for fuzzing: must never panic.
pub(crate) fn fuzz_replay(data: &[u8], policy: TailPolicy) -> usize {
    let mut reader = LogReader::new(data.to_vec(), PathBuf::from("fuzz.log"), policy);
    let mut n = 0;
    while let Ok(Some(_)) = reader.next_record() {
        n += 1;
    }
    n
}
