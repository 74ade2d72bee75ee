//! The compaction picker: a pure function from the state of the tree to the next task.
//!
//! [`pick`] reads a [`Version`], the options and the set of files already being compacted, and
//! returns at most one [`CompactionTask`]; [`result_edit`] turns a finished task into the
//! [`VersionEdit`] that installs it. Neither does I/O, so recovery, the background threads and a
//! simulator can all use them.
//!
//! Policy (leveled):
//! - Each level has a score: L0 by file count against `level0_compaction_trigger`, deeper levels by
//!   bytes against their target size. The level with the highest score of at least 1 whose inputs are
//!   free is compacted into the next level.
//! - L0 takes every L0 file overlapping the first free one (transitively) plus the overlapping L1 files.
//! - Deeper levels take the single file whose overlap with the next level is smallest relative to its
//!   size (least rewrite per byte moved), plus the overlapping files of the next level.
//! - A task with one input and nothing overlapping below is a trivial move: the file changes level
//!   without being rewritten, unless it would overlap too much of the level after (grandparents).

use crate::key::user_key;
use crate::options::Options;
use crate::version::edit::{FileMeta, Level, VersionEdit};
use crate::version::version::Version;
use std::collections::HashSet;
use std::sync::Arc;

/// Grandparent overlap allowed for a trivial move or one output file, in target file sizes.
pub(crate) const MAX_GRANDPARENT_OVERLAP_FILES: u64 = 10;

/// Why a task was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Level0FileCount,
    LevelSize,
    Manual,
}

/// One compaction: merge `inputs` (from `level`) with `next_inputs` (from `output_level`).
#[derive(Debug, Clone)]
pub(crate) struct CompactionTask {
    pub level: Level,
    pub output_level: Level,
    pub inputs: Vec<Arc<FileMeta>>,
    pub next_inputs: Vec<Arc<FileMeta>>,
    /// Files of `output_level + 1` overlapping the task, to bound the overlap of each output file.
    pub grandparents: Vec<Arc<FileMeta>>,
    pub trivial_move: bool,
    pub reason: Reason,
}

impl CompactionTask {
    /// Every input file, both levels.
    pub(crate) fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(self.next_inputs.iter())
    }

    /// Total bytes of input files.
    pub(crate) fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.file_size).sum()
    }
}

/// What the picker needs to know.
pub(crate) struct PickerState<'a> {
    pub version: &'a Version,
    pub options: &'a Options,
    /// Files that a running compaction is already reading.
    pub busy: &'a HashSet<u64>,
}

/// The compaction score of every level but the last (which has nowhere to go).
pub(crate) fn level_scores(version: &Version, options: &Options, busy: &HashSet<u64>) -> Vec<f64> {
    let last = version.num_levels() - 1;
    (0..last)
        .map(|level| {
            let files = &version.levels[level];
            if level == 0 {
                let idle = files.iter().filter(|f| !busy.contains(&f.number)).count();
                idle as f64 / options.level0_compaction_trigger as f64
            } else {
                let bytes: u64 = files
                    .iter()
                    .filter(|f| !busy.contains(&f.number))
                    .map(|f| f.file_size)
                    .sum();
                bytes as f64 / options.max_bytes_for_level(level) as f64
            }
        })
        .collect()
}

/// Estimated bytes that compaction must rewrite to bring every level back under its target
/// (the "pending compaction bytes" that drive write slowdowns).
pub(crate) fn pending_compaction_bytes(version: &Version, options: &Options) -> u64 {
    let last = version.num_levels() - 1;
    let mut pending = 0u64;
    let l0_bytes = version.level_bytes(0);
    let mut carried = 0u64;
    if version.levels[0].len() >= options.level0_compaction_trigger {
        pending += l0_bytes + version.level_bytes(1);
        carried = l0_bytes;
    }
    for level in 1..last {
        let bytes = version.level_bytes(level) + carried;
        let target = options.max_bytes_for_level(level);
        if bytes > target {
            let excess = bytes - target;
            pending = pending
                .saturating_add((excess as f64 * (options.level_size_multiplier + 1.0)) as u64);
            carried = excess;
        } else {
            carried = 0;
        }
    }
    pending
}

/// Picks the next compaction, if any level needs one and its files are free.
pub(crate) fn pick(state: &PickerState<'_>) -> Option<CompactionTask> {
    let scores = level_scores(state.version, state.options, state.busy);
    let mut order: Vec<usize> = (0..scores.len()).filter(|&l| scores[l] >= 1.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order.into_iter().find_map(|level| {
        if level == 0 {
            pick_level0(state)
        } else {
            pick_sorted_level(state, level)
        }
    })
}

fn pick_level0(state: &PickerState<'_>) -> Option<CompactionTask> {
    let version = state.version;
    if version.levels[0]
        .iter()
        .any(|f| state.busy.contains(&f.number))
    {
        return None; // L0 files overlap: only one L0 compaction at a time
    }
    let first = version.levels[0].last()?; // the oldest file
    let inputs = version.overlapping_files(
        0,
        Some(user_key(&first.smallest)),
        Some(user_key(&first.largest)),
    );
    let (lo, hi) = key_range(&inputs);
    let inputs = version.overlapping_files(0, Some(&lo), Some(&hi));
    build_task(state, 0, inputs, Reason::Level0FileCount)
}

fn pick_sorted_level(state: &PickerState<'_>, level: Level) -> Option<CompactionTask> {
    let version = state.version;
    let mut best: Option<(f64, &Arc<FileMeta>)> = None;
    for file in version.levels[level]
        .iter()
        .filter(|f| !state.busy.contains(&f.number))
    {
        let overlap = version.overlapping_files(
            level + 1,
            Some(user_key(&file.smallest)),
            Some(user_key(&file.largest)),
        );
        if overlap.iter().any(|f| state.busy.contains(&f.number)) {
            continue;
        }
        let overlap_bytes: u64 = overlap.iter().map(|f| f.file_size).sum();
        let ratio = overlap_bytes as f64 / file.file_size.max(1) as f64;
        if best.is_none_or(|(r, _)| ratio < r) {
            best = Some((ratio, file));
        }
    }
    let (_, file) = best?;
    build_task(state, level, vec![file.clone()], Reason::LevelSize)
}

/// Completes a task from its inputs in `level`: adds the overlapping files of the next level and the
/// grandparents, and decides on a trivial move. `None` when a needed file is busy.
pub(crate) fn build_task(
    state: &PickerState<'_>,
    level: Level,
    inputs: Vec<Arc<FileMeta>>,
    reason: Reason,
) -> Option<CompactionTask> {
    let version = state.version;
    if inputs.is_empty() || inputs.iter().any(|f| state.busy.contains(&f.number)) {
        return None;
    }
    let last = version.num_levels() - 1;
    let output_level = (level + 1).min(last);
    let (lo, hi) = key_range(&inputs);
    let next_inputs = if output_level == level {
        Vec::new()
    } else {
        version.overlapping_files(output_level, Some(&lo), Some(&hi))
    };
    if next_inputs.iter().any(|f| state.busy.contains(&f.number)) {
        return None;
    }
    let grandparents = if output_level < last {
        let (glo, ghi) = key_range(
            &inputs
                .iter()
                .chain(next_inputs.iter())
                .cloned()
                .collect::<Vec<_>>(),
        );
        version.overlapping_files(output_level + 1, Some(&glo), Some(&ghi))
    } else {
        Vec::new()
    };
    let grandparent_bytes: u64 = grandparents.iter().map(|f| f.file_size).sum();
    let trivial_move = output_level != level
        && inputs.len() == 1
        && next_inputs.is_empty()
        && grandparent_bytes <= MAX_GRANDPARENT_OVERLAP_FILES * state.options.target_file_size;
    Some(CompactionTask {
        level,
        output_level,
        inputs,
        next_inputs,
        grandparents,
        trivial_move,
        reason,
    })
}

/// A manual compaction of the user-key range `[lo, hi]` (`None` = unbounded) from `level` into the
/// next level. `None` when the level has no file in the range or a needed file is busy.
pub(crate) fn pick_manual(
    state: &PickerState<'_>,
    level: Level,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Option<CompactionTask> {
    let inputs = state.version.overlapping_files(level, lo, hi);
    let mut task = build_task(state, level, inputs, Reason::Manual)?;
    task.trivial_move = task.trivial_move && level > 0;
    Some(task)
}

/// The edit that installs a finished task: inputs removed, `outputs` added to the output level.
pub(crate) fn result_edit(task: &CompactionTask, outputs: Vec<FileMeta>) -> VersionEdit {
    let mut edit = VersionEdit::default();
    for f in &task.inputs {
        edit.deleted_files.push((task.level, f.number));
    }
    for f in &task.next_inputs {
        edit.deleted_files.push((task.output_level, f.number));
    }
    if task.trivial_move {
        debug_assert!(outputs.is_empty());
        for f in &task.inputs {
            edit.new_files.push((task.output_level, (**f).clone()));
        }
    } else {
        for f in outputs {
            edit.new_files.push((task.output_level, f));
        }
    }
    if let Some(largest) = task
        .inputs
        .iter()
        .map(|f| &f.largest)
        .max_by(|a, b| crate::key::compare_internal(a, b))
    {
        edit.compact_pointers.push((task.level, largest.clone()));
    }
    edit
}

/// The smallest and largest user keys of `files`.
fn key_range(files: &[Arc<FileMeta>]) -> (Vec<u8>, Vec<u8>) {
    let lo = files
        .iter()
        .map(|f| user_key(&f.smallest))
        .min()
        .unwrap_or_default();
    let hi = files
        .iter()
        .map(|f| user_key(&f.largest))
        .max()
        .unwrap_or_default();
    (lo.to_vec(), hi.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};

    fn meta(number: u64, lo: &[u8], hi: &[u8], size: u64, seq: u64) -> FileMeta {
        FileMeta {
            number,
            file_size: size,
            smallest: internal_key(lo, seq, ValueKind::Value),
            largest: internal_key(hi, seq, ValueKind::Value),
            smallest_seq: seq,
            largest_seq: seq,
            num_entries: 1,
            num_deletions: 0,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
        }
    }

    fn options() -> Options {
        Options {
            level0_compaction_trigger: 2,
            max_bytes_for_level_base: 1000,
            target_file_size: 100,
            num_levels: 4,
            ..Options::default()
        }
    }

    fn version(files: Vec<(Level, FileMeta)>) -> Version {
        let edit = VersionEdit {
            new_files: files,
            ..VersionEdit::default()
        };
        Version::empty(4).apply(&edit).unwrap()
    }

    #[test]
    fn nothing_to_do_below_the_triggers() {
        let v = version(vec![
            (0, meta(1, b"a", b"z", 10, 1)),
            (1, meta(2, b"a", b"c", 10, 1)),
        ]);
        let opts = options();
        assert!(pick(&PickerState {
            version: &v,
            options: &opts,
            busy: &HashSet::new()
        })
        .is_none());
    }

    #[test]
    fn level0_takes_every_overlapping_file_and_the_l1_files_below() {
        let v = version(vec![
            (0, meta(1, b"a", b"f", 10, 1)),
            (0, meta(2, b"e", b"k", 10, 2)),
            (1, meta(3, b"a", b"b", 10, 1)),
            (1, meta(4, b"j", b"m", 10, 1)),
            (1, meta(5, b"x", b"z", 10, 1)),
        ]);
        let opts = options();
        let task = pick(&PickerState {
            version: &v,
            options: &opts,
            busy: &HashSet::new(),
        })
        .unwrap();
        assert_eq!(task.level, 0);
        assert_eq!(task.inputs.len(), 2);
        assert_eq!(
            task.next_inputs
                .iter()
                .map(|f| f.number)
                .collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert!(!task.trivial_move);
        let busy: HashSet<u64> = [4].into_iter().collect();
        assert!(pick(&PickerState {
            version: &v,
            options: &opts,
            busy: &busy
        })
        .is_none());
    }

    #[test]
    fn oversized_level_moves_a_file_trivially_when_nothing_overlaps_below() {
        let v = version(vec![
            (1, meta(1, b"a", b"c", 600, 1)),
            (1, meta(2, b"d", b"f", 600, 1)),
            (2, meta(3, b"a", b"b", 50, 1)),
        ]);
        let opts = options();
        let task = pick(&PickerState {
            version: &v,
            options: &opts,
            busy: &HashSet::new(),
        })
        .unwrap();
        assert_eq!((task.level, task.output_level), (1, 2));
        assert_eq!(task.inputs[0].number, 2, "file 2 overlaps nothing below");
        assert!(task.trivial_move);
        let edit = result_edit(&task, Vec::new());
        let v2 = v.apply(&edit).unwrap();
        assert_eq!(
            v2.levels[2].iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![3, 2]
        );
    }

    #[test]
    fn pending_bytes_grow_with_excess() {
        let opts = options();
        let small = version(vec![(1, meta(1, b"a", b"c", 500, 1))]);
        let big = version(vec![(1, meta(1, b"a", b"c", 5000, 1))]);
        assert_eq!(pending_compaction_bytes(&small, &opts), 0);
        assert!(pending_compaction_bytes(&big, &opts) >= 4000);
    }
}
