//! What a version knows about blob files: for each logical blob file, the physical file that holds
//! its records now, which original ordinals survive in it, and which are known dead.
//!
//! Stable handles (DESIGN.md section 3): a `BlobRef` in the LSM names a logical file and the
//! ordinal its record had when the file was first written, and never changes. Garbage collection
//! copies the records still alive into a new physical file and installs it behind the same logical
//! file; the record of ordinal `o` then sits at index `rank(survivors, o)` of that file.
//!
//! Invariants (checked when an edit is applied, so a contradictory MANIFEST is corruption):
//! - `dead` only ever gains bits, each once, and only for ordinals the physical file holds;
//! - `garbage_bytes` is the exact sum of the sizes of the held records that are dead, and never
//!   exceeds `record_bytes`;
//! - `live_count` is the number of held ordinals that are not dead; a logical file whose
//!   `live_count` reaches zero is removed by the same edit.

use super::edit::{BlobDeadEdit, BlobFileEdit, VersionEdit};
use crate::blob::Bitmap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The version's record of one logical blob file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BlobFileMeta {
    pub logical: u64,
    pub physical: u64,
    pub count: u32,
    pub file_size: u64,
    pub record_bytes: u64,
    // INVARIANT: exact bytes of held records whose ordinal is set in `dead`.
    pub garbage_bytes: u64,
    /// `None`: the physical file holds every ordinal `0..count` (it is the file first written).
    pub survivors: Option<Arc<Bitmap>>,
    pub dead: Arc<Bitmap>,
    // INVARIANT: held ordinals that are not dead.
    pub live_count: u64,
}

/// Logical blob files by number.
pub(crate) type BlobFiles = BTreeMap<u64, Arc<BlobFileMeta>>;

impl BlobFileMeta {
    pub(crate) fn from_edit(e: &BlobFileEdit) -> BlobFileMeta {
        let live_count = match &e.survivors {
            Some(s) => {
                let mut keep = s.clone();
                keep.and_not(&e.dead);
                keep.count_ones()
            }
            None => u64::from(e.count).saturating_sub(e.dead.count_ones()),
        };
        BlobFileMeta {
            logical: e.logical,
            physical: e.physical,
            count: e.count,
            file_size: e.file_size,
            record_bytes: e.record_bytes,
            garbage_bytes: e.garbage_bytes,
            survivors: e.survivors.clone().map(Arc::new),
            dead: Arc::new(e.dead.clone()),
            live_count,
        }
    }

    pub(crate) fn to_edit(&self) -> BlobFileEdit {
        BlobFileEdit {
            logical: self.logical,
            physical: self.physical,
            count: self.count,
            file_size: self.file_size,
            record_bytes: self.record_bytes,
            garbage_bytes: self.garbage_bytes,
            survivors: self.survivors.as_deref().cloned(),
            dead: (*self.dead).clone(),
        }
    }

    /// True when the physical file holds the record of `ordinal`.
    pub(crate) fn holds(&self, ordinal: u32) -> bool {
        ordinal < self.count
            && self
                .survivors
                .as_ref()
                .is_none_or(|s| s.get(u64::from(ordinal)))
    }

    /// Where the record of `ordinal` sits in the physical file, when it holds it.
    pub(crate) fn index_of(&self, ordinal: u32) -> Option<u32> {
        if !self.holds(ordinal) {
            return None;
        }
        match &self.survivors {
            None => Some(ordinal),
            Some(s) => u32::try_from(s.rank(u64::from(ordinal))).ok(),
        }
    }

    /// Share of the physical file's record bytes that is garbage.
    pub(crate) fn garbage_ratio(&self) -> f64 {
        if self.record_bytes == 0 {
            return 1.0;
        }
        self.garbage_bytes as f64 / self.record_bytes as f64
    }

    /// Bytes of live records.
    pub(crate) fn live_bytes(&self) -> u64 {
        self.record_bytes.saturating_sub(self.garbage_bytes)
    }

    /// The held ordinals that are still alive, the set a GC of this file keeps.
    pub(crate) fn keep_set(&self) -> Bitmap {
        let mut keep = match &self.survivors {
            Some(s) => (**s).clone(),
            None => Bitmap::new(u64::from(self.count), true),
        };
        keep.and_not(&self.dead);
        keep
    }

    fn apply_dead(&mut self, d: &BlobDeadEdit) -> Result<(), String> {
        let mut dead = (*self.dead).clone();
        for &o in &d.ordinals {
            if !self.holds(o) {
                return Err(format!(
                    "marks record {o} of blob file {} dead, but its physical file {} does not hold it",
                    self.logical, self.physical
                ));
            }
            if dead.get(u64::from(o)) {
                return Err(format!(
                    "marks record {o} of blob file {} dead twice",
                    self.logical
                ));
            }
            dead.set(u64::from(o));
        }
        let garbage = self
            .garbage_bytes
            .checked_add(d.bytes)
            .filter(|&g| g <= self.record_bytes)
            .ok_or_else(|| {
                format!(
                    "garbage of blob file {} would exceed its {} record bytes",
                    self.logical, self.record_bytes
                )
            })?;
        self.dead = Arc::new(dead);
        self.garbage_bytes = garbage;
        self.live_count = self.live_count.saturating_sub(d.ordinals.len() as u64);
        Ok(())
    }
}

/// Applies the blob fields of `edit` to `files`: replacements, then dead records, then removals.
pub(crate) fn apply(files: &mut BlobFiles, edit: &VersionEdit) -> Result<(), String> {
    for b in &edit.blob_files {
        files.insert(b.logical, Arc::new(BlobFileMeta::from_edit(b)));
    }
    for d in &edit.blob_dead {
        let meta = files.get_mut(&d.logical).ok_or_else(|| {
            format!(
                "marks records of blob file {} dead, which the version does not hold",
                d.logical
            )
        })?;
        Arc::make_mut(meta).apply_dead(d)?;
    }
    for logical in &edit.deleted_blob_files {
        if files.remove(logical).is_none() {
            return Err(format!(
                "deletes blob file {logical}, which the version does not hold"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_file(logical: u64, count: u32, record_bytes: u64) -> BlobFileEdit {
        BlobFileEdit {
            logical,
            physical: logical,
            count,
            file_size: record_bytes + 100,
            record_bytes,
            garbage_bytes: 0,
            survivors: None,
            dead: Bitmap::new(u64::from(count), false),
        }
    }

    fn dead(logical: u64, ordinals: &[u32], bytes: u64) -> VersionEdit {
        VersionEdit {
            blob_dead: vec![BlobDeadEdit {
                logical,
                ordinals: ordinals.to_vec(),
                bytes,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn dead_records_add_exact_garbage_and_are_refused_twice() {
        let mut files = BlobFiles::new();
        let add = VersionEdit {
            blob_files: vec![new_file(7, 4, 400)],
            ..Default::default()
        };
        apply(&mut files, &add).unwrap();
        apply(&mut files, &dead(7, &[1, 3], 200)).unwrap();
        let m = &files[&7];
        assert_eq!((m.garbage_bytes, m.live_count), (200, 2));
        assert!((m.garbage_ratio() - 0.5).abs() < 1e-9);
        assert!(apply(&mut files.clone(), &dead(7, &[1], 100))
            .unwrap_err()
            .contains("twice"));
        assert!(apply(&mut files.clone(), &dead(7, &[9], 100)).is_err());
        assert!(apply(&mut files.clone(), &dead(8, &[0], 100)).is_err());
        assert!(apply(&mut files.clone(), &dead(7, &[0], 300))
            .unwrap_err()
            .contains("exceed"));
    }

    #[test]
    fn a_rewritten_file_finds_survivors_by_rank() {
        let mut survivors = Bitmap::new(6, false);
        for o in [1, 2, 5] {
            survivors.set(o);
        }
        let mut e = new_file(3, 6, 300);
        e.physical = 10;
        e.survivors = Some(survivors);
        let m = BlobFileMeta::from_edit(&e);
        assert_eq!(m.live_count, 3);
        assert_eq!(
            (0..6).map(|o| m.index_of(o)).collect::<Vec<_>>(),
            vec![None, Some(0), Some(1), None, None, Some(2)]
        );
        let mut files = BlobFiles::new();
        files.insert(3, Arc::new(m));
        assert!(apply(&mut files.clone(), &dead(3, &[0], 1))
            .unwrap_err()
            .contains("does not hold"));
        apply(&mut files, &dead(3, &[2], 50)).unwrap();
        let keep: Vec<u64> = files[&3].keep_set().iter_ones().collect();
        assert_eq!(keep, vec![1, 5]);
        assert_eq!(files[&3].to_edit().dead.count_ones(), 1);
    }
}
