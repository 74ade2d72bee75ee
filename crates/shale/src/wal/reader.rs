//! Replaying a log file, and the rule that tells a torn tail from corruption.
// Decodes bytes read from disk: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use super::format::{classify_wal_payload, decode, Damage, WalPayload, HEADER_LEN};
use crate::error::{Error, Result};
use crate::WalRecovery;
use std::path::PathBuf;

/// What a reader does at the first damaged record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TailPolicy {
    /// Damage in the last record is a torn tail and is cut; damage followed by an intact record,
    /// or inside the part of a WAL its sync markers say was synced, is corruption. For WALs, whose
    /// last record may be half-written by a power loss.
    CutDamagedTail,
    /// Stop at the first damage and keep the records before it, even when the damage is in synced
    /// bytes (the cut then says so: [`TailCut::lost_synced`]).
    PointInTime,
    /// Any damage is corruption; only zeros after the last record end the log.
    Absolute,
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
            WalRecovery::AbsoluteConsistency => TailPolicy::Absolute,
        }
    }
}

/// Where and why a reader stopped early without an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TailCut {
    pub offset: u64,
    pub reason: &'static str,
    /// The cut dropped bytes that a sync marker says were synced: acknowledged writes may be lost
    /// (only under [`TailPolicy::PointInTime`]).
    pub lost_synced: bool,
}

/// Reads the records of a whole log file held in memory.
pub(crate) struct LogReader {
    data: Vec<u8>,
    path: PathBuf,
    policy: TailPolicy,
    /// A WAL: sync markers are read (not returned) and bound what may be cut.
    wal: bool,
    // INVARIANT: `pos <= data.len()`, and `pos` is the start of a record or the end of the data.
    pos: usize,
    /// The file's first `synced_through` bytes were synced, by the sync markers read so far.
    synced_through: u64,
    tail_cut: Option<TailCut>,
}

impl LogReader {
    /// A reader of MANIFEST records (no sync markers).
    pub(crate) fn new(data: Vec<u8>, path: PathBuf, policy: TailPolicy) -> LogReader {
        LogReader {
            data,
            path,
            policy,
            wal: false,
            pos: 0,
            synced_through: 0,
            tail_cut: None,
        }
    }

    /// A reader of a WAL: returns write-batch payloads and reads the sync markers between them.
    pub(crate) fn new_wal(data: Vec<u8>, path: PathBuf, policy: TailPolicy) -> LogReader {
        LogReader {
            wal: true,
            ..LogReader::new(data, path, policy)
        }
    }

    /// The next record's offset in the file and its payload, or `None` at the end (or after a cut
    /// tail).
    ///
    /// # Errors
    /// `Corruption` naming the file and the offset of the damaged record, when the policy does not
    /// allow cutting it. The reader then stays at the damage.
    pub(crate) fn next_record(&mut self) -> Result<Option<(u64, &[u8])>> {
        let (start, len) = loop {
            let Some((start, len)) = self.next_frame()? else {
                return Ok(None);
            };
            if !self.wal {
                break (start, len);
            }
            let payload = self
                .data
                .get(start + HEADER_LEN..start + HEADER_LEN + len)
                .unwrap_or_default();
            match classify_wal_payload(payload) {
                WalPayload::Batch => break (start, len),
                // A marker can only speak for bytes before itself.
                WalPayload::Synced(n) => {
                    self.synced_through = self.synced_through.max(n.min(start as u64));
                }
                WalPayload::UnknownMarker => {
                    return Err(Error::corruption(
                        &self.path,
                        start as u64,
                        "unknown WAL marker (written by a newer version?)",
                    ))
                }
            }
        };
        // `next_frame` checked that the payload is within the data.
        let payload = self
            .data
            .get(start + HEADER_LEN..start + HEADER_LEN + len)
            .unwrap_or_default();
        Ok(Some((start as u64, payload)))
    }

    /// The start and payload length of the next intact record; `None` at the end or after a cut.
    fn next_frame(&mut self) -> Result<Option<(usize, usize)>> {
        let start = self.pos;
        let Some(rest) = self.data.get(start..).filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        match decode(rest) {
            Ok(len) => {
                self.pos = start + HEADER_LEN + len;
                Ok(Some((start, len)))
            }
            Err(_) if rest.iter().all(|&b| b == 0) => {
                // Zero-filled space the writer kept ahead of its appends
                // (`WritableFile::preallocate`): the end of the log, not damage.
                self.pos = self.data.len();
                Ok(None)
            }
            Err(damage) => self.damaged(start, damage),
        }
    }

    fn damaged(&mut self, start: usize, damage: Damage) -> Result<Option<(usize, usize)>> {
        let next_intact = self.next_intact_record(start);
        let at_tail = next_intact.is_none();
        // Markers before the damage, or after it (read past the damage), that cover it.
        let covered = next_intact.map_or(0, |from| self.markers_from(from));
        self.synced_through = self.synced_through.max(covered);
        let in_synced = (start as u64) < self.synced_through;
        let torn = damage == Damage::Truncated || self.data.last() == Some(&0);
        let cut = match self.policy {
            TailPolicy::PointInTime => true,
            TailPolicy::Absolute => false,
            TailPolicy::CutDamagedTail => at_tail && !in_synced,
            TailPolicy::CutTornTailOnly => at_tail && torn,
        };
        if cut {
            self.tail_cut = Some(TailCut {
                offset: start as u64,
                reason: damage.describe(),
                lost_synced: in_synced,
            });
            self.pos = self.data.len();
            return Ok(None);
        }
        let what = if in_synced {
            format!(
                "{} in a record the log had synced (its sync markers cover the first {} bytes): \
                 acknowledged writes are damaged",
                damage.describe(),
                self.synced_through
            )
        } else if at_tail {
            format!("{} in the last record", damage.describe())
        } else {
            format!("{} before the last record", damage.describe())
        };
        Err(Error::corruption(&self.path, start as u64, what))
    }

    /// The first offset after `start` that holds an intact record, if any: the damage at `start`
    /// is then not at the tail. Checks headers first, so a scan costs one small checksum per byte.
    fn next_intact_record(&self, start: usize) -> Option<usize> {
        (start + 1..self.data.len()).find(|&offset| {
            self.data
                .get(offset..)
                .is_some_and(|rest| decode(rest).is_ok())
        })
    }

    /// The furthest synced length that the WAL sync markers among the intact records from `at`
    /// on claim (0 for a MANIFEST, or when there are none).
    fn markers_from(&self, mut at: usize) -> u64 {
        let mut synced = 0;
        if !self.wal {
            return 0;
        }
        while let Some(len) = self.data.get(at..).and_then(|rest| decode(rest).ok()) {
            let rest = self.data.get(at..).unwrap_or_default();
            let payload = rest.get(HEADER_LEN..HEADER_LEN + len).unwrap_or_default();
            if let WalPayload::Synced(n) = classify_wal_payload(payload) {
                synced = synced.max(n.min(at as u64));
            }
            at += HEADER_LEN + len;
        }
        synced
    }

    /// Set when the reader cut a damaged tail.
    pub(crate) fn tail_cut(&self) -> Option<&TailCut> {
        self.tail_cut.as_ref()
    }
}

/// Replays every record of `data` under `policy`, for fuzzing: must never panic.
pub(crate) fn fuzz_replay(data: &[u8], policy: TailPolicy) -> usize {
    let mut n = 0;
    for wal in [false, true] {
        let path = PathBuf::from("fuzz.log");
        let mut reader = if wal {
            LogReader::new_wal(data.to_vec(), path, policy)
        } else {
            LogReader::new(data.to_vec(), path, policy)
        };
        while let Ok(Some(_)) = reader.next_record() {
            n += 1;
        }
    }
    n
}
