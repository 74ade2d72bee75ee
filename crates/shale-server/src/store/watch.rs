//! WATCH: which clients watch which keys, and the dirty flag a modification sets.
//!
//! A client that WATCHes a key registers its [`WatchFlag`] under (logical db, key). A batch that
//! modifies a watched key reports it at its commit, while it still holds the key's stripe lock
//! ([`super::Txn::commit`]); EXEC takes the stripes of the keys it watched before it reads the
//! flag, so a modification either set the flag before EXEC looked or comes after EXEC's commit.
//!
//! A key that was already expired when watched is "stale": deleting it (lazily, by the sweep,
//! by FLUSHDB) is no change, as in Redis; any other write of it is.
//!
//! Cost when nobody watches: one relaxed atomic load per modified key.

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A client's WATCH state: set when any key it watches is modified.
#[derive(Debug, Default)]
pub struct WatchFlag {
    dirty: AtomicBool,
}

impl WatchFlag {
    /// Whether a watched key was modified.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Marks the client's watched keys as modified.
    pub fn set_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Clears the flag (UNWATCH, EXEC, DISCARD).
    pub fn clear(&self) {
        self.dirty.store(false, Ordering::Release);
    }
}

struct Watcher {
    flag: Arc<WatchFlag>,
    /// The key was expired when watched.
    stale: bool,
}

/// A watched key: logical db and user key.
type WatchedKey = (u8, Vec<u8>);

/// The registry (see the module documentation).
#[derive(Default)]
pub struct Watches {
    entries: AtomicUsize,
    map: Mutex<FxHashMap<WatchedKey, Vec<Watcher>>>,
}

impl Watches {
    /// Whether any key is watched.
    pub fn any(&self) -> bool {
        self.entries.load(Ordering::Relaxed) > 0
    }

    /// Registers `flag` as watching `key` of logical database `db`.
    pub fn watch(&self, db: u8, key: &[u8], flag: &Arc<WatchFlag>, stale: bool) {
        let mut map = self.map.lock();
        let list = map.entry((db, key.to_vec())).or_default();
        if list.iter().any(|w| Arc::ptr_eq(&w.flag, flag)) {
            return;
        }
        list.push(Watcher {
            flag: flag.clone(),
            stale,
        });
        self.entries.fetch_add(1, Ordering::Relaxed);
    }

    /// Removes `flag` from the watchers of each of `keys`.
    pub fn unwatch(&self, keys: &[(u8, Vec<u8>)], flag: &Arc<WatchFlag>) {
        if keys.is_empty() {
            return;
        }
        let mut map = self.map.lock();
        for (db, key) in keys {
            let id = (*db, key.clone());
            if let Some(list) = map.get_mut(&id) {
                let before = list.len();
                list.retain(|w| !Arc::ptr_eq(&w.flag, flag));
                self.entries
                    .fetch_sub(before - list.len(), Ordering::Relaxed);
                if list.is_empty() {
                    map.remove(&id);
                }
            }
        }
    }

    /// Reports modified keys: (logical db, key, deleted).
    pub fn touch(&self, keys: &[(u8, Vec<u8>, bool)]) {
        let mut map = self.map.lock();
        for (db, key, deleted) in keys {
            if let Some(list) = map.get_mut(&(*db, key.clone())) {
                for w in list.iter_mut() {
                    if w.stale && *deleted {
                        w.stale = false;
                    } else {
                        w.flag.set_dirty();
                    }
                }
            }
        }
    }

    /// The watched keys of logical database `db` (FLUSHDB and SWAPDB check which exist).
    pub fn keys_in(&self, db: u8) -> Vec<Vec<u8>> {
        if !self.any() {
            return Vec::new();
        }
        self.map
            .lock()
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modification_dirties_every_watcher_and_unwatch_forgets() {
        let w = Watches::default();
        let (a, b) = (
            Arc::new(WatchFlag::default()),
            Arc::new(WatchFlag::default()),
        );
        w.watch(0, b"k", &a, false);
        w.watch(0, b"k", &b, false);
        w.watch(1, b"k", &b, false);
        w.touch(&[(1, b"k".to_vec(), false)]);
        assert!(!a.is_dirty() && b.is_dirty());
        w.unwatch(&[(0, b"k".to_vec()), (1, b"k".to_vec())], &b);
        w.touch(&[(0, b"k".to_vec(), false)]);
        assert!(a.is_dirty());
        w.unwatch(&[(0, b"k".to_vec())], &a);
        assert!(!w.any());
    }

    #[test]
    fn deleting_a_stale_key_is_no_change() {
        let w = Watches::default();
        let a = Arc::new(WatchFlag::default());
        w.watch(0, b"k", &a, true);
        w.touch(&[(0, b"k".to_vec(), true)]);
        assert!(!a.is_dirty());
        w.touch(&[(0, b"k".to_vec(), false)]);
        assert!(a.is_dirty());
    }
}
