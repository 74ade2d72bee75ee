//! Striped key locks: a fixed table of read-write locks indexed by a hash of the key.
//!
//! A command that reads a key and writes it back (`INCR`, `HSET`, `ZADD`, `DEL`, `SET NX`, ...)
//! takes its key's stripe exclusively. A blind write (a plain `SET` or `MSET`, which replaces the
//! key whatever it held) takes it shared: blind writes of one key may commit in either order (they
//! overlap in time, so either order is linearizable), but never inside a read-modify-write's
//! window. Locks are held until the batch commits: on a cluster node, until its Raft entry is
//! applied here, and released by the apply itself ([`Held`]).
//!
//! A batch collects its stripes into a [`StripeSet`] and locks them in ascending order, each once
//! (exclusive if any of its keys needs it), so two batches never wait on each other in a cycle.
//! Two keys may share a stripe; that only costs concurrency, never correctness.

use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Number of stripes (every one a `u16`): enough that 50-odd connections rarely collide. With
/// 50 pipelining clients, 16 writes each, 800 keys are in flight at once; a batch of 16 writes
/// meets one of them with 4,096 stripes 97% of the time, with 65,536 stripes 18% of the time.
/// A collision waits for the other batch's commit, which on a cluster node is a Raft round trip:
/// with 4,096 stripes half of a leader's connection threads queued on a stripe behind one
/// (512 KiB of locks).
pub const STRIPES: usize = 1 << 16;

/// The set of stripes a batch needs.
#[derive(Debug, Default, Clone)]
pub struct StripeSet {
    // (stripe, exclusive)
    stripes: Vec<(u16, bool)>,
}

impl StripeSet {
    /// An empty set.
    pub fn new() -> Self {
        StripeSet::default()
    }

    /// Adds the stripe of `key`, to be held exclusively (a read-modify-write).
    pub fn add(&mut self, key: &[u8]) {
        self.stripes.push((stripe_of(key), true));
    }

    /// Adds the stripe of `key`, to be held shared (a blind write).
    pub fn add_shared(&mut self, key: &[u8]) {
        self.stripes.push((stripe_of(key), false));
    }

    /// Whether no key was added.
    pub fn is_empty(&self) -> bool {
        self.stripes.is_empty()
    }
}

fn stripe_of(key: &[u8]) -> u16 {
    (stripe_hash(key) % STRIPES as u64) as u16
}

/// FNV-1a with a final mix: fast on short keys and the same for a key in every batch.
fn stripe_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h ^ (h >> 29)
}

/// The keyspace lock and the stripe table, shared by the store and every [`Held`] set.
pub(super) struct Locks {
    /// Held shared by every batch, exclusively by FLUSHDB, FLUSHALL, SWAPDB and a new leader's
    /// reload (see the store's module documentation).
    keyspace: RwLock<()>,
    stripes: Vec<RwLock<()>>,
    /// Whether releases are counted and awaitable ([`Locks::released_since`]): on a cluster
    /// node, where a batch's locks stay held for its Raft round trip.
    watched: bool,
    /// Sets of locks released so far (when `watched`; those with stripes or the whole
    /// keyspace).
    releases: AtomicU64,
    /// Tasks waiting in [`Locks::released_since`].
    waiting: AtomicUsize,
    released: Notify,
}

/// Locks a batch holds: the keyspace lock (shared or exclusive) and its stripes. They are owned,
/// not borrowed, and released when the set is dropped, on whatever thread drops it: a cluster
/// node's batch hands them to its Raft entry, whose apply releases them (see
/// `Store::commit_deferred`), while the connection that ran the batch serves others.
pub(super) struct Held {
    locks: Arc<Locks>,
    /// Whether the keyspace lock is held, and exclusively.
    keyspace: Option<bool>,
    /// (stripe, exclusive), in the order taken.
    stripes: Vec<(u16, bool)>,
    /// Released without waking waiters: the part of a set that could not be taken whole, held
    /// for an instant, which no waiter needs to hear of.
    quiet: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        for &(i, exclusive) in self.stripes.iter().rev() {
            unlock(&self.locks.stripes[usize::from(i)], exclusive);
        }
        if let Some(exclusive) = self.keyspace {
            unlock(&self.locks.keyspace, exclusive);
        }
        let locks = &self.locks;
        // Only a set with stripes or the whole keyspace counts: a batch of reads holds the
        // keyspace shared alone, which no batch that can retry waits for (a whole-keyspace batch
        // that met one does not retry, see `exec::retry_after_busy`), and counting it would
        // cost every read batch an atomic add on a line every thread writes.
        if locks.watched && !self.quiet && (!self.stripes.is_empty() || self.keyspace == Some(true))
        {
            // SeqCst here and in `released_since`: a waiter either sees this release in the
            // count or is seen waiting, and then woken.
            locks.releases.fetch_add(1, Ordering::SeqCst);
            if locks.waiting.load(Ordering::SeqCst) > 0 {
                locks.released.notify_waiters();
            }
        }
    }
}

/// Releases a lock whose guard was forgotten when it was taken.
fn unlock(lock: &RwLock<()>, exclusive: bool) {
    // SAFETY: `Held` records a lock only after taking it (in that mode) and forgetting its
    // guard, and releases each record once, here. parking_lot's locks do not belong to the
    // thread that took them (without its `deadlock_detection` feature, which is not enabled),
    // so another thread may release them.
    unsafe {
        if exclusive {
            lock.force_unlock_write();
        } else {
            lock.force_unlock_read();
        }
    }
}

impl Locks {
    /// The locks of a store; `watched`: releases can be awaited (see [`Locks::released_since`]).
    pub(super) fn new(watched: bool) -> Arc<Locks> {
        Arc::new(Locks {
            keyspace: RwLock::new(()),
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            watched,
            releases: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            released: Notify::new(),
        })
    }

    /// How many sets of locks were released so far (0 when releases are not watched). Read it
    /// before trying to take locks, to await a release after failing ([`Locks::released_since`]).
    pub(super) fn releases(&self) -> u64 {
        self.releases.load(Ordering::SeqCst)
    }

    /// Returns once a set of locks was released after `releases()` returned `seen`, or after
    /// `patience`, whichever comes first, without blocking the thread. Without `watched`, waits
    /// for `patience`.
    pub(super) async fn released_since(&self, seen: u64, patience: Duration) {
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        let notified = self.released.notified();
        // Registered before the count is read again: a release after this read wakes it.
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.releases.load(Ordering::SeqCst) != seen {
            return;
        }
        let _ = tokio::time::timeout(patience, notified).await;
    }

    /// Takes the keyspace shared and every stripe of `set` in ascending order, each once,
    /// waiting as long as it takes.
    pub(super) fn batch(self: &Arc<Self>, set: &StripeSet) -> Held {
        self.batch_until(set, None)
            .expect("locks without a deadline are always taken")
    }

    /// [`Locks::batch`] if every lock is taken by `deadline` (`None`: no deadline); `None`,
    /// holding nothing, when one is still held against it then.
    pub(super) fn batch_until(
        self: &Arc<Self>,
        set: &StripeSet,
        deadline: Option<Instant>,
    ) -> Option<Held> {
        let mut held = self.hold_keyspace(false, deadline)?;
        for (i, exclusive) in order(set) {
            if !take(&self.stripes[usize::from(i)], exclusive, deadline) {
                held.quiet = true;
                return None;
            }
            held.stripes.push((i, exclusive));
        }
        Some(held)
    }

    /// Takes the keyspace exclusively (by `deadline`, when one is given): every other batch
    /// has ended, and none starts until the set is dropped.
    pub(super) fn whole(self: &Arc<Self>, deadline: Option<Instant>) -> Option<Held> {
        self.hold_keyspace(true, deadline)
    }

    fn hold_keyspace(self: &Arc<Self>, exclusive: bool, deadline: Option<Instant>) -> Option<Held> {
        take(&self.keyspace, exclusive, deadline).then(|| Held {
            locks: self.clone(),
            keyspace: Some(exclusive),
            stripes: Vec::new(),
            quiet: false,
        })
    }
}

/// Takes `lock` in the given mode (by `deadline`, when one is given) and forgets its guard (the
/// caller records it in a [`Held`]). Whether it was taken.
fn take(lock: &RwLock<()>, exclusive: bool, deadline: Option<Instant>) -> bool {
    match (exclusive, deadline) {
        (true, None) => std::mem::forget(lock.write()),
        (false, None) => std::mem::forget(lock.read()),
        (true, Some(d)) => match lock.try_write_until(d) {
            Some(g) => std::mem::forget(g),
            None => return false,
        },
        (false, Some(d)) => match lock.try_read_until(d) {
            Some(g) => std::mem::forget(g),
            None => return false,
        },
    }
    true
}

/// The stripes of `set` in ascending order, each once, exclusive where any key needs it.
fn order(set: &StripeSet) -> Vec<(u16, bool)> {
    let mut order = set.stripes.clone();
    // Exclusive first among equal stripes, so dedup keeps the strongest mode.
    order.sort_unstable_by_key(|&(s, exclusive)| (s, !exclusive));
    order.dedup_by_key(|&mut (s, _)| s);
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_key_needed_both_ways_is_locked_exclusively_once() {
        let locks = Locks::new(false);
        let mut set = StripeSet::new();
        set.add_shared(b"k");
        set.add(b"k");
        set.add_shared(b"k");
        let held = locks.batch(&set);
        assert_eq!(held.stripes.len(), 1);
        assert!(held.stripes[0].1);
    }

    #[test]
    fn batch_until_takes_nothing_when_a_stripe_stays_held_against_it() {
        let locks = Locks::new(false);
        let mut busy = StripeSet::new();
        busy.add(b"busy");
        let held = locks.batch(&busy);
        let mut wanted = StripeSet::new();
        wanted.add(b"free");
        wanted.add_shared(b"busy");
        let soon = || Some(Instant::now() + Duration::from_millis(1));
        assert!(locks.batch_until(&wanted, soon()).is_none());
        // What it took before meeting the held stripe was released.
        let mut free = StripeSet::new();
        free.add(b"free");
        assert!(locks.batch_until(&free, Some(Instant::now())).is_some());
        drop(held);
        assert_eq!(
            locks.batch_until(&wanted, soon()).map(|h| h.stripes.len()),
            Some(2)
        );
    }

    #[test]
    fn locks_released_on_another_thread_are_free_again() {
        let locks = Locks::new(false);
        let mut set = StripeSet::new();
        set.add(b"k");
        set.add_shared(b"j");
        let held = locks.batch(&set);
        assert!(locks.whole(Some(Instant::now())).is_none());
        std::thread::spawn(move || drop(held)).join().unwrap();
        let whole = locks
            .whole(Some(Instant::now()))
            .expect("the keyspace is free");
        assert_eq!(whole.keyspace, Some(true));
        drop(whole);
        assert!(locks.batch_until(&set, Some(Instant::now())).is_some());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiter_wakes_on_the_next_release_and_never_misses_one() {
        let locks = Locks::new(true);
        let mut set = StripeSet::new();
        set.add(b"k");
        let held = locks.batch(&set);
        let seen = locks.releases();
        assert!(locks.batch_until(&set, Some(Instant::now())).is_none());
        // The part of the set taken before the held stripe went back quietly.
        assert_eq!(locks.releases(), seen);
        // A release between reading the count and waiting is not missed: no wait at all.
        let mut other = StripeSet::new();
        other.add(b"other");
        drop(locks.batch(&other));
        let patience = Duration::from_secs(60);
        let started = Instant::now();
        locks.released_since(seen, patience).await;
        assert!(started.elapsed() < patience / 2);
        // A release while waiting wakes the waiter, on another thread.
        let seen = locks.releases();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(held);
        });
        let started = Instant::now();
        locks.released_since(seen, patience).await;
        assert!(started.elapsed() < patience / 2);
        releaser.join().unwrap();
        assert!(locks.batch_until(&set, Some(Instant::now())).is_some());
        // Nothing released: the wait ends after its patience.
        let seen = locks.releases();
        let started = Instant::now();
        locks.released_since(seen, Duration::from_millis(50)).await;
        assert!(started.elapsed() >= Duration::from_millis(50));
        // A set of the keyspace alone (a batch of reads) is not counted.
        let seen = locks.releases();
        drop(locks.batch(&StripeSet::new()));
        assert_eq!(locks.releases(), seen);
        // Unwatched locks count nothing.
        let unwatched = Locks::new(false);
        drop(unwatched.batch(&set));
        assert_eq!(unwatched.releases(), 0);
    }
}
