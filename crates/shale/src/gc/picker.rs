//! The GC picker: a pure function of the blob files of a version, the files already being
//! collected, and the space amplification, so it can be tested and simulated without I/O.
//!
//! Policy (DESIGN.md section 3 item 4):
//! - every blob file whose garbage ratio reaches `threshold` is a candidate; all candidates are
//!   considered, most garbage bytes first (the most space back per byte copied);
//! - while space amplification is above `space_amp_target`, GC escalates instead of stalling
//!   writers: besides the files over the threshold, it takes the files with the highest garbage
//!   ratio (the most space back per byte copied), whatever their ratio, until their garbage would
//!   bring space amplification back to the target, and twice as many tasks may run at once;
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

/// Bytes on disk and live bytes, as the version knows them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Space {
    pub on_disk: u64,
    pub live: u64,
}

impl Space {
    /// Bytes on disk over live bytes (0 for an empty store).
    pub(crate) fn amplification(&self) -> f64 {
        match (self.on_disk, self.live) {
            (0, _) => 0.0,
            (_, 0) => f64::INFINITY,
            (d, l) => d as f64 / l as f64,
        }
    }
}

/// Picks the blob files to collect now. `excluded`: logical files not to pick (being collected,
/// or failed); `running`: tasks in flight, which count against the task limit.
pub(crate) fn pick(
    blobs: &BlobFiles,
    excluded: &HashSet<u64>,
    running: usize,
    space: Space,
    policy: &GcPolicy,
) -> GcPick {
    let escalated = space.amplification() > policy.space_amp_target;
    let max_tasks = if escalated {
        policy.max_tasks.saturating_mul(2)
    } else {
        policy.max_tasks
    };
    let room = max_tasks.saturating_sub(running);
    // (logical, garbage ratio, garbage bytes), best first: over the threshold by garbage bytes,
    // then the rest by ratio.
    let mut over: Vec<(u64, f64, u64)> = Vec::new();
    let mut under: Vec<(u64, f64, u64)> = Vec::new();
    for b in blobs.values() {
        if excluded.contains(&b.logical) || b.live_count == 0 || b.garbage_bytes == 0 {
            continue;
        }
        let entry = (b.logical, b.garbage_ratio(), b.garbage_bytes);
        if entry.1 >= policy.threshold {
            over.push(entry);
        } else {
            under.push(entry);
        }
    }
    over.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let mut files: Vec<u64> = over.iter().map(|e| e.0).collect();
    if escalated {
        // Garbage to reclaim to get back to the target, less what the chosen files return.
        let target = (space.live as f64 * policy.space_amp_target) as u64;
        let mut need = space.on_disk.saturating_sub(target);
        need = need.saturating_sub(over.iter().map(|e| e.2).sum());
        under.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for (logical, _, garbage) in under {
            if need == 0 {
                break;
            }
            files.push(logical);
            need = need.saturating_sub(garbage);
        }
    }
    files.truncate(room);
    GcPick { files, escalated }
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
        let calm = Space {
            on_disk: 100,
            live: 100,
        };
        let got = pick(&blobs, &HashSet::new(), 0, calm, &POLICY);
        assert_eq!(got.files, vec![3, 1]);
        assert!(!got.escalated);
        let busy: HashSet<u64> = [3].into();
        assert_eq!(pick(&blobs, &busy, 1, calm, &POLICY).files, vec![1]);
    }

    #[test]
    fn space_amplification_over_target_escalates_instead_of_stalling() {
        let blobs = files(&[
            file(1, 100, 30, 5),
            file(2, 100, 26, 5),
            file(3, 100, 24, 5),
            file(4, 100, 60, 5),
        ]);
        let calm = Space {
            on_disk: 120,
            live: 100,
        };
        assert_eq!(
            pick(&blobs, &HashSet::new(), 0, calm, &POLICY).files,
            vec![4]
        );
        // 200 on disk for 100 live, target 1.5: 50 bytes must go; file 4 returns 60.
        let over = Space {
            on_disk: 200,
            live: 100,
        };
        let got = pick(&blobs, &HashSet::new(), 0, over, &POLICY);
        assert!(got.escalated);
        assert_eq!(got.files, vec![4]);
        // 300 on disk: 150 must go; files 1 and 2 (by ratio) bring 56 more, then 3 is still
        // needed, but only four tasks may run.
        let far = Space {
            on_disk: 300,
            live: 100,
        };
        assert_eq!(
            pick(&blobs, &HashSet::new(), 0, far, &POLICY).files,
            vec![4, 1, 2, 3]
        );
        let busy: HashSet<u64> = [9, 10].into();
        assert_eq!(pick(&blobs, &busy, 2, far, &POLICY).files, vec![4, 1]);
    }
}
