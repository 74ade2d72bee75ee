//! Epochs that tell when a freed item slot may be reused (epoch-based reclamation).
//!
//! A connection thread *pins* itself at the start of each round of work (read, execute, reply)
//! and *unpins* before it sleeps. An item location it obtains during the round stays readable
//! until it unpins or pins again. A slot freed while the global epoch is `e` is tagged `e`; it may
//! be reused once every pinned thread pinned at an epoch after `e`. The scheduler advances the
//! epoch after every pass.
//!
//! # Concurrency
//! Pins are stored and the global epoch read with `SeqCst`, so a reclaimer that sees a thread
//! unpinned (or pinned late) also sees every free that thread could have observed.

use std::sync::atomic::{AtomicU64, Ordering};

/// What an unpinned thread's slot holds.
const UNPINNED: u64 = u64::MAX;

/// Per-thread pins and the global epoch.
#[derive(Debug)]
pub struct Epochs {
    global: AtomicU64,
    pins: Box<[PaddedPin]>,
}

#[repr(align(128))]
#[derive(Debug)]
struct PaddedPin(AtomicU64);

impl Epochs {
    /// Epochs for `threads` participants, numbered `0..threads`, all unpinned.
    pub fn new(threads: usize) -> Epochs {
        Epochs {
            global: AtomicU64::new(1),
            pins: (0..threads)
                .map(|_| PaddedPin(AtomicU64::new(UNPINNED)))
                .collect(),
        }
    }

    /// Participants.
    pub fn threads(&self) -> usize {
        self.pins.len()
    }

    /// Pins `thread` at the current epoch (re-pinning moves it forward).
    #[inline]
    pub fn pin(&self, thread: usize) {
        let now = self.global.load(Ordering::SeqCst);
        self.pins[thread].0.store(now, Ordering::SeqCst);
    }

    /// Unpins `thread`: it holds no item location any more.
    #[inline]
    pub fn unpin(&self, thread: usize) {
        self.pins[thread].0.store(UNPINNED, Ordering::SeqCst);
    }

    /// The current epoch: the tag of a slot freed now.
    #[inline]
    pub fn current(&self) -> u64 {
        self.global.load(Ordering::SeqCst)
    }

    /// Moves the epoch forward.
    #[inline]
    pub fn advance(&self) {
        self.global.fetch_add(1, Ordering::SeqCst);
    }

    /// Slots tagged below this may be reused now.
    #[inline]
    pub fn reusable_below(&self) -> u64 {
        let oldest_pin = self
            .pins
            .iter()
            .map(|p| p.0.load(Ordering::SeqCst))
            .min()
            .unwrap_or(UNPINNED);
        oldest_pin.min(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_holds_back_reuse_until_it_repins() {
        let epochs = Epochs::new(2);
        epochs.pin(0);
        let tag = epochs.current();
        epochs.advance();
        assert!(
            tag >= epochs.reusable_below(),
            "reusable while thread 0 may read it"
        );
        epochs.pin(1);
        assert!(tag >= epochs.reusable_below());
        epochs.pin(0);
        assert!(
            tag < epochs.reusable_below(),
            "both threads pinned after the free"
        );
        epochs.unpin(0);
        epochs.unpin(1);
        epochs.advance();
        assert!(epochs.current() - 1 < epochs.reusable_below());
    }
}
