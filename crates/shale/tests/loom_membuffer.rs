//! Loom model of the FloDB membuffer protocol (`memtable/flodb.rs`): a writer publishes an entry in
//! a bucket slot, a drain moves the bucket into the skiplist, a lock-free reader looks in the bucket
//! and then in the skiplist, and a writer that finds its bucket full drains it itself. Loom explores
//! every interleaving and checks that a reader that starts after an insert finished always finds
//! the entry, fully initialized, and that concurrent drains never move an entry twice.
//!
//! The model mirrors the real orderings: slots are written under the bucket lock with `Release`
//! stores, the drain inserts into the skiplist (published with `Release`) *before* it nulls the
//! slots, and readers load with `Acquire`, bucket first. A second model covers the skiplist's
//! version chains: a version hung off a key's list node (in the middle of the chain when it
//! arrives out of order) reaches lock-free readers complete and in order. Run it with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p shale --test loom_membuffer`.

#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::ptr;

struct Entry {
    key: u64,
    seq: u64,
}

/// The skiplist reduced to what the protocol needs: a list published by `Release` stores of its
/// head, inserted into under its own lock.
struct Node {
    entry: *const Entry,
    next: *mut Node,
}

struct Membuffer {
    bucket_lock: Mutex<()>,
    slots: [AtomicPtr<Entry>; 2],
    list_lock: Mutex<()>,
    head: AtomicPtr<Node>,
    list_len: AtomicUsize,
}

// SAFETY (model): entries and nodes are immutable once published and freed only at the end of an
// execution, after every thread has been joined.
unsafe impl Send for Membuffer {}
unsafe impl Sync for Membuffer {}

impl Membuffer {
    fn new() -> Membuffer {
        Membuffer {
            bucket_lock: Mutex::new(()),
            slots: [
                AtomicPtr::new(ptr::null_mut()),
                AtomicPtr::new(ptr::null_mut()),
            ],
            list_lock: Mutex::new(()),
            head: AtomicPtr::new(ptr::null_mut()),
            list_len: AtomicUsize::new(0),
        }
    }

    fn list_insert(&self, entry: *const Entry) {
        let _g = self.list_lock.lock().unwrap();
        let node = Box::into_raw(Box::new(Node {
            entry,
            next: self.head.load(Ordering::Relaxed),
        }));
        self.head.store(node, Ordering::Release);
        self.list_len.fetch_add(1, Ordering::Relaxed);
    }

    /// A write: the entry is built, then published in a free slot under the bucket lock. The
    /// writer that finds the bucket full drains it, still under the lock: every entry of the
    /// bucket and its own go into the list, then the slots are nulled.
    fn insert(&self, key: u64, seq: u64) {
        let entry = Box::into_raw(Box::new(Entry { key, seq }));
        let _g = self.bucket_lock.lock().unwrap();
        for slot in &self.slots {
            if slot.load(Ordering::Relaxed).is_null() {
                slot.store(entry, Ordering::Release);
                return;
            }
        }
        for slot in &self.slots {
            self.list_insert(slot.load(Ordering::Relaxed));
        }
        self.list_insert(entry);
        for slot in &self.slots {
            slot.store(ptr::null_mut(), Ordering::Release);
        }
    }

    /// A drain: under the bucket lock, every entry goes into the list, then its slot is nulled.
    fn drain(&self) {
        let _g = self.bucket_lock.lock().unwrap();
        for slot in &self.slots {
            let p = slot.load(Ordering::Relaxed);
            if !p.is_null() {
                self.list_insert(p);
                slot.store(ptr::null_mut(), Ordering::Release);
            }
        }
    }

    /// A lock-free read: the newest sequence number for `key`, bucket first, then the list.
    fn get(&self, key: u64) -> Option<u64> {
        let mut best = None;
        for slot in &self.slots {
            let p = slot.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: published with Release after initialization; never freed while threads run.
                let e = unsafe { &*p };
                if e.key == key {
                    best = best.max(Some(e.seq));
                }
            }
        }
        let mut n = self.head.load(Ordering::Acquire);
        while !n.is_null() {
            // SAFETY: as above, for nodes and the entries they point to.
            let node = unsafe { &*n };
            let e = unsafe { &*node.entry };
            if e.key == key {
                best = best.max(Some(e.seq));
            }
            n = node.next;
        }
        best
    }

    /// Frees everything; called after all threads are joined.
    fn free(&self) {
        let mut seen = std::collections::HashSet::new();
        let mut n = self.head.load(Ordering::Relaxed);
        while !n.is_null() {
            // SAFETY: single-threaded teardown; each node is freed once.
            let node = unsafe { Box::from_raw(n) };
            seen.insert(node.entry as usize);
            n = node.next;
        }
        for slot in &self.slots {
            let p = slot.load(Ordering::Relaxed);
            if !p.is_null() {
                seen.insert(p as usize);
            }
        }
        for p in seen {
            // SAFETY: every entry is in a slot or the list (never both at teardown), freed once.
            drop(unsafe { Box::from_raw(p as *mut Entry) });
        }
    }
}

#[test]
fn a_finished_insert_is_always_found_while_its_bucket_drains() {
    loom::model(|| {
        let m = Arc::new(Membuffer::new());
        let inserted = Arc::new(AtomicBool::new(false));
        let writer = {
            let (m, inserted) = (m.clone(), inserted.clone());
            thread::spawn(move || {
                m.insert(7, 1);
                inserted.store(true, Ordering::Release);
            })
        };
        let drainer = {
            let m = m.clone();
            thread::spawn(move || m.drain())
        };
        if inserted.load(Ordering::Acquire) {
            assert_eq!(m.get(7), Some(1), "a finished insert was not found");
        }
        writer.join().unwrap();
        drainer.join().unwrap();
        assert_eq!(m.get(7), Some(1));
        m.free();
    });
}

#[test]
fn concurrent_drains_move_each_entry_once_and_reads_see_the_newest() {
    loom::model(|| {
        let m = Arc::new(Membuffer::new());
        m.insert(3, 1);
        m.insert(3, 2);
        // The read runs on a thread of its own. Checked by mutation: with the read on the model's
        // main thread, a drain that clears a slot before its list insert passed.
        let reader = {
            let m = m.clone();
            thread::spawn(move || m.get(3))
        };
        let drain = {
            let m = m.clone();
            thread::spawn(move || m.drain())
        };
        m.drain();
        assert_eq!(
            reader.join().unwrap(),
            Some(2),
            "a read during drains lost the newest version"
        );
        drain.join().unwrap();
        assert_eq!(
            m.list_len.load(Ordering::Relaxed),
            2,
            "an entry was drained twice or lost"
        );
        assert_eq!(m.get(3), Some(2));
        m.free();
    });
}

#[test]
fn a_writer_draining_a_full_bucket_loses_nothing_for_readers() {
    loom::model(|| {
        let m = Arc::new(Membuffer::new());
        m.insert(5, 1);
        m.insert(5, 2);
        // On a thread of its own, as above: checked by mutation (clearing the slots before the
        // list inserts fails).
        let reader = {
            let m = m.clone();
            thread::spawn(move || m.get(5))
        };
        // The bucket is full: this write drains it.
        m.insert(5, 3);
        let seen = reader.join().unwrap();
        assert!(
            seen == Some(2) || seen == Some(3),
            "a read during a writer's drain saw {seen:?}"
        );
        assert_eq!(m.get(5), Some(3));
        assert_eq!(
            m.list_len.load(Ordering::Relaxed),
            3,
            "an entry was linked twice or lost"
        );
        m.free();
    });
}

// Version chains (`memtable/skiplist.rs`, `chain_into` and `element_after`): a drain hangs a newer
// version of a key off the key's list node instead of linking it into the list. The model keeps
// what the protocol needs: a list node whose `versions` pointer heads a chain sorted newest
// first; an insert, under the insert lock, walks the chain with Relaxed loads to the first older
// version, fills the new version (its value and its `versions` link) and publishes it with one
// Release store of the link before it; readers walk with Acquire loads and take no lock.

/// A chain version, or (with `seq` 1) the list node that heads the group.
struct Version {
    seq: u64,
    /// Written before the version is published, never again: loom reports a reader that could
    /// see it unwritten.
    value: loom::cell::UnsafeCell<u64>,
    versions: AtomicPtr<Version>,
}

fn value_of(seq: u64) -> u64 {
    seq * 10 + 7
}

struct Group {
    insert_lock: Mutex<()>,
    list_node: *mut Version,
}

// SAFETY (model): versions are immutable once published apart from their atomics, and freed only
// after every thread has been joined.
unsafe impl Send for Group {}
unsafe impl Sync for Group {}

impl Group {
    fn new() -> Group {
        Group {
            insert_lock: Mutex::new(()),
            list_node: Box::into_raw(Box::new(Version {
                seq: 1,
                value: loom::cell::UnsafeCell::new(value_of(1)),
                versions: AtomicPtr::new(ptr::null_mut()),
            })),
        }
    }

    /// `chain_into`: places a version by its sequence number (newest first).
    fn chain_into(&self, seq: u64) {
        let _g = self.insert_lock.lock().unwrap();
        let node = Box::into_raw(Box::new(Version {
            seq,
            value: loom::cell::UnsafeCell::new(0),
            versions: AtomicPtr::new(ptr::null_mut()),
        }));
        // SAFETY (model): every pointer walked is a published version, alive until `free`; the
        // new one is private until the Release store.
        unsafe {
            let mut link = &(*self.list_node).versions;
            let mut older = link.load(Ordering::Relaxed);
            while !older.is_null() && (*older).seq > seq {
                link = &(*older).versions;
                older = link.load(Ordering::Relaxed);
            }
            (*node).value.with_mut(|v| *v = value_of(seq));
            (*node).versions.store(older, Ordering::Relaxed);
            link.store(node, Ordering::Release);
        }
    }

    /// The iteration order of the group: the chain newest first, then the list node; each
    /// element's value read as a reader reads it.
    fn walk(&self) -> Vec<(u64, u64)> {
        let mut seen = Vec::new();
        // SAFETY (model): Acquire loads of published links yield published, complete versions.
        unsafe {
            let mut v = (*self.list_node).versions.load(Ordering::Acquire);
            while !v.is_null() {
                seen.push(((*v).seq, (*v).value.with(|x| *x)));
                v = (*v).versions.load(Ordering::Acquire);
            }
            seen.push((1, (*self.list_node).value.with(|x| *x)));
        }
        seen
    }

    fn free(&self) {
        // SAFETY (model): every thread has been joined; each version is freed once.
        unsafe {
            let mut v = (*self.list_node).versions.load(Ordering::Relaxed);
            while !v.is_null() {
                let next = (*v).versions.load(Ordering::Relaxed);
                drop(Box::from_raw(v));
                v = next;
            }
            drop(Box::from_raw(self.list_node));
        }
    }
}

/// Checks one walk: newest first, every value complete, only versions that were inserted.
fn check_walk(seen: &[(u64, u64)]) {
    assert!(
        seen.windows(2).all(|w| w[0].0 > w[1].0),
        "a reader saw the chain out of order: {seen:?}"
    );
    for &(seq, value) in seen {
        assert_eq!(
            value,
            value_of(seq),
            "a reader saw version {seq} incomplete"
        );
    }
    assert_eq!(
        seen.last().map(|s| s.0),
        Some(1),
        "the list node ends its group"
    );
}

#[test]
fn chain_versions_are_published_complete_and_in_order_to_lock_free_readers() {
    loom::model(|| {
        let group = Arc::new(Group::new());
        let done = Arc::new(AtomicBool::new(false));
        // Versions 4 and then 3 (a drain may deliver a key's versions out of order, so the
        // second lands in the middle of the chain), then 5 at its front.
        let writer = {
            let (group, done) = (group.clone(), done.clone());
            thread::spawn(move || {
                group.chain_into(4);
                group.chain_into(3);
                group.chain_into(5);
                done.store(true, Ordering::Release);
            })
        };
        let reader = {
            let (group, done) = (group.clone(), done.clone());
            thread::spawn(move || {
                let finished = done.load(Ordering::Acquire);
                let seen = group.walk();
                check_walk(&seen);
                if finished {
                    let seqs: Vec<u64> = seen.iter().map(|s| s.0).collect();
                    assert_eq!(seqs, [5, 4, 3, 1], "a finished insert is always seen");
                }
            })
        };
        writer.join().unwrap();
        reader.join().unwrap();
        let seqs: Vec<u64> = group.walk().iter().map(|s| s.0).collect();
        assert_eq!(seqs, [5, 4, 3, 1]);
        group.free();
    });
}
