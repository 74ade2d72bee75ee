//! `Version`: an immutable snapshot of the live SSTs, level by level.
//!
//! Invariants (checked by [`Version::check_invariants`] in tests and after recovery):
//! - L0 files are ordered newest first (by largest sequence number, then file number); their key
//!   ranges may overlap.
//! - Files of L1 and deeper are sorted by smallest key and do not overlap; no user key spans two files
//!   of the same level.
//! - A file number appears at most once in a version.
//!
//! Concurrency: a `Version` is never mutated after construction; readers share it as an
//! `Arc<Version>` and keep every file it names alive (see `VersionSet::live_files`).

use super::blob_files::{self, BlobFiles};
use super::edit::{FileMeta, Level, VersionEdit};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{compare_internal, user_key};
use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

/// The live files of the tree.
#[derive(Debug, Clone)]
pub(crate) struct Version {
    // INVARIANT: see the module documentation.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
    /// Logical blob files (key-value separation); see `blob_files`.
    pub blobs: Arc<BlobFiles>,
}

impl Version {
    /// An empty version with `num_levels` levels.
    pub(crate) fn empty(num_levels: usize) -> Version {
        Version {
            levels: vec![Vec::new(); num_levels],
            blobs: Arc::new(BlobFiles::new()),
        }
    }

    pub(crate) fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Bytes of SSTs in `level`.
    pub(crate) fn level_bytes(&self, level: Level) -> u64 {
        self.levels[level].iter().map(|f| f.file_size).sum()
    }

    /// Every SST number in the version.
    pub(crate) fn file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels.iter().flatten().map(|f| f.number)
    }

    /// Every physical blob file number in the version.
    pub(crate) fn blob_file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.blobs.values().map(|b| b.physical)
    }

    /// Applies `edit` and returns the resulting version.
    ///
    /// # Errors
    /// `Corruption` when the edit deletes a file the version does not hold, adds a file number twice,
    /// or names a level the version does not have.
    pub(crate) fn apply(&self, edit: &VersionEdit) -> Result<Version> {
        let corrupt =
            |what: String| Error::new(ErrorKind::Corruption, format!("version edit: {what}"));
        let mut deleted: HashSet<(Level, u64)> = HashSet::with_capacity(edit.deleted_files.len());
        for &(level, number) in &edit.deleted_files {
            if level >= self.levels.len() {
                return Err(corrupt(format!(
                    "deletes file {number} from level {level}, beyond the last level"
                )));
            }
            if !self.levels[level].iter().any(|f| f.number == number) {
                return Err(corrupt(format!(
                    "deletes file {number} which is not in level {level}"
                )));
            }
            deleted.insert((level, number));
        }
        let mut levels: Vec<Vec<Arc<FileMeta>>> = self
            .levels
            .iter()
            .enumerate()
            .map(|(level, files)| {
                files
                    .iter()
                    .filter(|f| !deleted.contains(&(level, f.number)))
                    .cloned()
                    .collect()
            })
            .collect();
        let mut numbers: HashSet<u64> = levels.iter().flatten().map(|f| f.number).collect();
        for (level, meta) in &edit.new_files {
            if *level >= levels.len() {
                return Err(corrupt(format!(
                    "adds file {} to level {level}, beyond the last level",
                    meta.number
                )));
            }
            if !numbers.insert(meta.number) {
                return Err(corrupt(format!("adds file {} twice", meta.number)));
            }
            levels[*level].push(Arc::new(meta.clone()));
        }
        sort_level0(&mut levels[0]);
        for files in levels.iter_mut().skip(1) {
            files.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
        }
        let blobs = if edit.blob_files.is_empty()
            && edit.blob_dead.is_empty()
            && edit.deleted_blob_files.is_empty()
        {
            self.blobs.clone()
        } else {
            let mut blobs = (*self.blobs).clone();
            blob_files::apply(&mut blobs, edit).map_err(corrupt)?;
            Arc::new(blobs)
        };
        let version = Version { levels, blobs };
        version.check_invariants().map_err(corrupt)?;
        Ok(version)
    }

    /// Checks the ordering invariants of the module documentation.
    pub(crate) fn check_invariants(&self) -> std::result::Result<(), String> {
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            for pair in files.windows(2) {
                if user_key(&pair[0].largest) >= user_key(&pair[1].smallest) {
                    return Err(format!(
                        "level {level}: files {} and {} overlap or share a user key",
                        pair[0].number, pair[1].number
                    ));
                }
            }
        }
        Ok(())
    }

    /// Files of `level` whose user-key range intersects `[smallest, largest]` (user keys; `None` is
    /// unbounded). For L0 the range is widened transitively, as overlapping L0 files must move together.
    pub(crate) fn overlapping_files(
        &self,
        level: Level,
        smallest: Option<&[u8]>,
        largest: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        let mut lo = smallest.map(<[u8]>::to_vec);
        let mut hi = largest.map(<[u8]>::to_vec);
        let files = &self.levels[level];
        if level > 0 {
            let start = match &lo {
                Some(lo) => files.partition_point(|f| user_key(&f.largest) < lo.as_slice()),
                None => 0,
            };
            return files[start..]
                .iter()
                .take_while(|f| {
                    hi.as_ref()
                        .is_none_or(|hi| user_key(&f.smallest) <= hi.as_slice())
                })
                .cloned()
                .collect();
        }
        loop {
            let chosen: Vec<Arc<FileMeta>> = files
                .iter()
                .filter(|f| file_overlaps(f, lo.as_deref(), hi.as_deref()))
                .cloned()
                .collect();
            let mut widened = false;
            for f in &chosen {
                if let Some(l) = &lo {
                    if user_key(&f.smallest) < l.as_slice() {
                        lo = Some(user_key(&f.smallest).to_vec());
                        widened = true;
                    }
                }
                if let Some(h) = &hi {
                    if user_key(&f.largest) > h.as_slice() {
                        hi = Some(user_key(&f.largest).to_vec());
                        widened = true;
                    }
                }
            }
            if !widened {
                return chosen;
            }
        }
    }

    /// The L1+ file of `level` that may hold `target` (an internal key), by binary search.
    pub(crate) fn file_for_key(&self, level: Level, target: &[u8]) -> Option<&Arc<FileMeta>> {
        let files = &self.levels[level];
        let i = files.partition_point(|f| compare_internal(&f.largest, target) == Ordering::Less);
        let f = files.get(i)?;
        (user_key(&f.smallest) <= user_key(target)).then_some(f)
    }

    /// True when no level deeper than `level` has a file whose range contains `user_key`.
    pub(crate) fn key_absent_below(&self, level: Level, key: &[u8]) -> bool {
        self.levels.iter().skip(level + 1).all(|files| {
            let i = files.partition_point(|f| user_key(&f.largest) < key);
            files.get(i).is_none_or(|f| user_key(&f.smallest) > key)
        })
    }

    /// An edit that recreates this version from nothing (the first record of a new MANIFEST).
    pub(crate) fn snapshot_edit(&self) -> VersionEdit {
        let mut edit = VersionEdit::default();
        for (level, files) in self.levels.iter().enumerate() {
            for f in files {
                edit.new_files.push((level, (**f).clone()));
            }
        }
        edit.blob_files = self.blobs.values().map(|b| b.to_edit()).collect();
        edit
    }
}

/// Orders L0 newest first: larger largest-seqno first, then larger file number.
pub(crate) fn sort_level0(files: &mut [Arc<FileMeta>]) {
    files.sort_by(|a, b| {
        b.largest_seq
            .cmp(&a.largest_seq)
            .then(b.number.cmp(&a.number))
    });
}

fn file_overlaps(f: &FileMeta, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
    lo.is_none_or(|lo| user_key(&f.largest) >= lo)
        && hi.is_none_or(|hi| user_key(&f.smallest) <= hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};

    pub(crate) fn meta(number: u64, lo: &[u8], hi: &[u8], seq: u64) -> FileMeta {
        FileMeta {
            number,
            file_size: 100,
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

    #[test]
    fn apply_adds_and_deletes_and_keeps_levels_sorted() {
        let v = Version::empty(3);
        let mut e = VersionEdit::default();
        e.new_files.push((1, meta(5, b"m", b"p", 1)));
        e.new_files.push((1, meta(4, b"a", b"c", 1)));
        e.new_files.push((0, meta(6, b"a", b"z", 2)));
        e.new_files.push((0, meta(7, b"a", b"z", 3)));
        let v = v.apply(&e).unwrap();
        assert_eq!(
            v.levels[1].iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![4, 5]
        );
        assert_eq!(
            v.levels[0].iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![7, 6]
        );
        let mut d = VersionEdit::default();
        d.deleted_files.push((1, 4));
        let v2 = v.apply(&d).unwrap();
        assert_eq!(v2.levels[1].len(), 1);
        assert_eq!(
            v.apply(&d).unwrap().apply(&d).unwrap_err().kind(),
            ErrorKind::Corruption
        );
    }

    #[test]
    fn apply_rejects_overlapping_files_in_a_sorted_level() {
        let mut e = VersionEdit::default();
        e.new_files.push((2, meta(1, b"a", b"k", 1)));
        e.new_files.push((2, meta(2, b"k", b"z", 1)));
        assert_eq!(
            Version::empty(3).apply(&e).unwrap_err().kind(),
            ErrorKind::Corruption
        );
    }

    #[test]
    fn overlapping_files_widens_level0_transitively() {
        let mut e = VersionEdit::default();
        e.new_files.push((0, meta(1, b"a", b"c", 1)));
        e.new_files.push((0, meta(2, b"b", b"f", 2)));
        e.new_files.push((0, meta(3, b"e", b"g", 3)));
        e.new_files.push((0, meta(4, b"x", b"y", 4)));
        let v = Version::empty(3).apply(&e).unwrap();
        let mut got: Vec<u64> = v
            .overlapping_files(0, Some(b"a"), Some(b"a"))
            .iter()
            .map(|f| f.number)
            .collect();
        got.sort();
        assert_eq!(got, vec![1, 2, 3]);
    }

    #[test]
    fn file_for_key_and_key_absent_below() {
        let mut e = VersionEdit::default();
        e.new_files.push((1, meta(1, b"b", b"d", 1)));
        e.new_files.push((1, meta(2, b"f", b"h", 1)));
        e.new_files.push((2, meta(3, b"c", b"c", 1)));
        let v = Version::empty(3).apply(&e).unwrap();
        let t = crate::key::seek_key(b"g", 10);
        assert_eq!(v.file_for_key(1, &t).map(|f| f.number), Some(2));
        assert!(v.file_for_key(1, &crate::key::seek_key(b"e", 10)).is_none());
        assert!(!v.key_absent_below(1, b"c"));
        assert!(v.key_absent_below(1, b"d"));
        assert!(v.key_absent_below(2, b"c"));
    }
}
