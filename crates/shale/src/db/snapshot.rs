//! Snapshots: a consistent read-only view of the database at one sequence number.
//!
//! Registering a snapshot tells flushes and compactions to keep the versions it can see. The
//! registration is released when the last handle (the `Snapshot` or an iterator made from it) drops.

use super::{key_range, read, DbInner, KeyRange};
use crate::error::Result;
use crate::iter::DbIterator;
use crate::key::SeqNo;
use crate::options::ReadOptions;
use std::ops::Bound;
use std::sync::Arc;

/// A consistent view of the database as of the moment it was taken. Released on drop.
#[derive(Clone)]
pub struct Snapshot {
    handle: Arc<Registration>,
}

struct Registration {
    db: Arc<DbInner>,
    seq: SeqNo,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut state = self.db.state.lock();
        if let Some(n) = state.snapshots.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                state.snapshots.remove(&self.seq);
            }
        }
    }
}

impl Snapshot {
    pub(crate) fn new(db: Arc<DbInner>) -> Snapshot {
        let seq = {
            let mut state = db.state.lock();
            // Read under the state lock so no compaction can start between reading and registering.
            let seq = db.visible_seq.load(std::sync::atomic::Ordering::Acquire);
            *state.snapshots.entry(seq).or_insert(0) += 1;
            seq
        };
        Snapshot {
            handle: Arc::new(Registration { db, seq }),
        }
    }

    /// The sequence number this snapshot reads at.
    pub fn seq(&self) -> SeqNo {
        self.handle.seq
    }

    /// The value of `key` as of the snapshot, or `Ok(None)`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.handle.db.check_open()?;
        read::get(&self.handle.db, key.as_ref(), Some(self.handle.seq))
            .map_err(|e| e.relative_to(&self.handle.db.dir))
    }

    /// The values of `keys` as of the snapshot: [`Snapshot::get`] for each (see [`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        if let Err(e) = self.handle.db.check_open() {
            return keys.iter().map(|_| Err(e.clone())).collect();
        }
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        let dir = &self.handle.db.dir;
        read::multi_get(&self.handle.db, &keys, Some(self.handle.seq))
            .into_iter()
            .map(|r| r.map_err(|e| e.relative_to(dir)))
            .collect()
    }

    /// Entries with keys in `range` as of the snapshot; double-ended. Any [`KeyRange`], as
    /// [`Db::range`](crate::Db::range) takes.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shale::Db::open(dir.path(), shale::Options::default()).unwrap();
    /// db.put("a", "old").unwrap();
    /// let snap = db.snapshot();
    /// db.put("a", "new").unwrap();
    /// db.put("b", "later").unwrap();
    /// assert_eq!(snap.range(..).count(), 1);
    /// assert_eq!(snap.range(b"a".as_slice()..b"c".as_slice()).count(), 1);
    /// assert_eq!(snap.range(b"a".to_vec()..).next().unwrap().unwrap().1, b"old");
    /// assert_eq!(snap.range("b"..).count(), 0);
    /// ```
    pub fn range(&self, range: impl KeyRange) -> DbIterator {
        self.range_with(range, &ReadOptions::default())
    }

    /// [`Snapshot::range`] with read options (see [`crate::Db::range_with`]).
    pub fn range_with(&self, range: impl KeyRange, options: &ReadOptions) -> DbIterator {
        let (lo, hi) = key_range::owned_bounds(&range);
        read::iterator(
            &self.handle.db,
            lo,
            hi,
            Some(self.handle.seq),
            Box::new(self.handle.clone()),
            super::skip_log(options, &self.handle.db.dir),
        )
    }

    /// Every entry as of the snapshot; double-ended.
    pub fn iter(&self) -> DbIterator {
        self.range(..)
    }

    /// Entries whose key starts with `prefix`, as of the snapshot; double-ended.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let prefix = prefix.as_ref().to_vec();
        let hi = crate::iter::prefix_upper_bound(&prefix);
        read::iterator(
            &self.handle.db,
            Bound::Included(prefix),
            hi,
            Some(self.handle.seq),
            Box::new(self.handle.clone()),
            None,
        )
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("seq", &self.handle.seq)
            .finish()
    }
}
