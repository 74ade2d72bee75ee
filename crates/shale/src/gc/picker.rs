//! The GC picker: a pure function of the blob files of a version, the files already being
//! collected, and the space amplification, so it can be tested and simulated without I/O.
//!
//! Policy (DESIGN.md section 3 item 4):
//! - every blob file whose garbage ratio reaches `threshold` is a candidate; all candidates are
//!   considered, most garbage bytes first (the most space back per byte copied);
//! - while space amplification is above `space_amp_target`, GC escalates instead of stalling
//!   writers: files with half the threshold's garbage qualify too, and twice as many tasks may
//!   run at once;
//! - a file with no live record is never picked: the edit that killed its last record removed it.

use crate::version::blob_files::BlobFiles;
use std::collections::HashSet;

/// The knobs of the picker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GcPolicy {
    pub threshold: f64,
    pub space_amp_target: f64,
    /// Tasks that may run at once when not escalated.
    pub max_tasks: usize,
}

/// What the picker chose.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GcPick {
    /// Logical blob files to collect, in priority order.
    pub files: Vec<u64>,
    /// True when space amplification was over target.
    pub escalated: bool,
}

/// Picks the blob files to collect now. `in_flight`: logical files already being collected (they
/// count against the task limit); `space_amp`: bytes on disk over live bytes.
pub(crate) fn pick(
    blobs: &BlobFiles,
    in_flight: &HashSet<u64>,
    space_amp: f64,
    policy: &GcPolicy,
) -> GcPick {
    let escalated = space_amp > policy.space_amp_target;
    let (threshold, max_tasks) = if escalated {
        (policy.threshold / 2.0, policy.max_tasks.saturating_mul(2))
    } else {
        (policy.threshold, policy.max_tasks)
    };
    let room = max_tasks.saturating_sub(in_flight.len());
    let mut candidates: Vec<(u64, u64)> = blobs
        .values()
        .filter(|b| !in_flight.contains(&b.logical))
        .filter(|b| b.live_count > 0 && b.garbage_bytes > 0)
        .filter(|b| b.garbage_ratio() >= threshold)
        .map(|b| (b.logical, b.garbage_bytes))
        .collect();
    candidates.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    GcPick {
        files: candidates.into_iter().take(room).map(|(l, _)| l).collect(),
        escalated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::Bitmap;
    use crate::version::blob_files::BlobFileMeta;
    use std::sync::Arc;

    fn file(logical: u64, record_bytes: u64, garbage_bytes: u64, live_count: u64) -> BlobFileMeta {
        BlobFileMeta {
            logical,
            physical: logical,
            count: 10,
            file_size: record_bytes,
            record_bytes,
            garbage_bytes,
            survivors: None,
            dead: Arc::new(Bitmap::new(10, false)),
            live_count,
        }
    }

    fn files(list: &[BlobFileMeta]) -> BlobFiles {
        list.iter()
            .map(|f| (f.logical, Arc::new(f.clone())))
            .collect()
    }

    const POLICY: GcPolicy = GcPolicy {
        threshold: 0.5,
        space_amp_target: 1.5,
        max_tasks: 2,
    };

    #[test]
    fn every_file_over_the_threshold_is_a_candidate_most_garbage_first() {
        let blobs = files(&[
            file(1, 100, 50, 5),
            file(2, 100, 49, 5),
            file(3, 1000, 900, 1),
            file(4, 100, 100, 0),
        ]);
        let got = pick(&blobs, &HashSet::new(), 1.0, &POLICY);
        assert_eq!(got.files, vec![3, 1]);
        assert!(!got.escalated);
        let busy: HashSet<u64> = [3].into();
        assert_eq!(pick(&blobs, &busy, 1.0, &POLICY).files, vec![1]);
    }

    #[test]
    fn space_amplification_over_target_escalates_instead_of_stalling() {
        let blobs = files(&[
            file(1, 100, 30, 5),
            file(2, 100, 26, 5),
            file(3, 100, 24, 5),
            file(4, 100, 60, 5),
        ]);
        assert_eq!(pick(&blobs, &HashSet::new(), 1.2, &POLICY).files, vec![4]);
        let got = pick(&blobs, &HashSet::new(), 2.0, &POLICY);
        assert!(got.escalated);
        assert_eq!(got.files, vec![4, 1, 2]);
    }
}
