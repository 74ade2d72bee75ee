//! Moving pages between size classes (memcached's slab rebalancing).
//!
//! Pages go to classes as they first need them; once the arena is used up, a class whose items
//! stopped coming would keep its pages for ever while another class evicts in too few. So when
//! a class must evict and the arena is used up, one page at a time may move to it from another
//! class: from a class with no item to evict lately ([`DONOR_IDLE`]), or from any class with two
//! pages or more when the class asking has none at all. The page leaves its class at once (its
//! slots are never handed out again), its items are evicted like CLOCK victims, and when every
//! slot is back (evicted, freed, out of reach of readers) it joins the class that asked.
//!
//! # Concurrency
//! Lock order: the drain lock, then a class lock; never two class locks at once.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{join, split, Slabs, PAGE_SIZE, WORDS_PER_PAGE};
use crate::index::Location;

/// A class that has not had to evict for this long may give a page to one that must.
pub const DONOR_IDLE: Duration = Duration::from_secs(5);

/// A page on its way from one class to another.
#[derive(Debug)]
pub(super) struct Drain {
    page: u32,
    from: usize,
    to: usize,
}

impl Slabs {
    /// Starts moving a page to `class` if it needs one and one can be had; appends the page's
    /// live items to `victims`. Returns whether a page is on its way to `class`.
    pub(super) fn rebalance(&self, class: usize, victims: &mut Vec<Location>) -> bool {
        let mut drain = self.drain.lock();
        if let Some(d) = drain.as_ref() {
            return d.to == class;
        }
        if self.pool.lock().next_unused < self.pages {
            return false;
        }
        let starving = self.state[class].lock().pages.is_empty();
        let now = Instant::now();
        let mut donor: Option<(usize, usize)> = None;
        for (other, state) in self.state.iter().enumerate() {
            if other == class {
                continue;
            }
            let state = state.lock();
            let idle = state
                .last_sweep
                .is_none_or(|t| now.duration_since(t) >= DONOR_IDLE);
            let pages = state.pages.len();
            if pages >= 2 && (idle || starving) && donor.is_none_or(|(_, most)| pages > most) {
                donor = Some((other, pages));
            }
        }
        let Some((from, _)) = donor else {
            return false;
        };
        let mut state = self.state[from].lock();
        // The page under the donor's CLOCK hand: its items are the next the donor would evict.
        let at = state.hand.0.min(state.pages.len() - 1);
        let page = state.pages.remove(at);
        state.hand = if at < state.pages.len() {
            (at, 0)
        } else {
            (0, 0)
        };
        if state.carving.is_some_and(|(p, _)| p == page) {
            state.carving = None;
        }
        self.draining[page as usize].store(true, Ordering::Relaxed);
        state
            .free
            .retain(|&loc| split(loc).map(|(p, _)| p) != Some(page as usize));
        let first = page as usize * WORDS_PER_PAGE;
        let mut evicting = 0;
        for w in 0..WORDS_PER_PAGE {
            let mut live = self.word(&self.live, first + w).load(Ordering::Relaxed);
            while live != 0 {
                let bit = live.trailing_zeros() as usize;
                live &= live - 1;
                victims.push(join(page as usize, w * 64 + bit));
                evicting += 1;
            }
        }
        state.evicting += evicting;
        *drain = Some(Drain {
            page,
            from,
            to: class,
        });
        true
    }

    /// Hands the drained page to `class` if it was meant for it and every slot is back; true
    /// if `class` got a page.
    pub(super) fn finish_drain(&self, class: usize) -> bool {
        let mut drain = self.drain.lock();
        let Some(d) = drain.as_ref() else {
            return false;
        };
        if d.to != class {
            return false;
        }
        let (page, from) = (d.page as usize, d.from);
        {
            let mut state = self.state[from].lock();
            self.reclaim(&mut state);
        }
        if self.in_use[page].load(Ordering::Relaxed) != 0 {
            return false;
        }
        let first = page * WORDS_PER_PAGE;
        for w in first..first + WORDS_PER_PAGE {
            self.word(&self.live, w).store(0, Ordering::Relaxed);
            self.word(&self.clock, 2 * w).store(0, Ordering::Relaxed);
            self.word(&self.clock, 2 * w + 1)
                .store(0, Ordering::Relaxed);
        }
        self.draining[page].store(false, Ordering::Relaxed);
        self.page_class[page].store(class as u8, Ordering::Release);
        *drain = None;
        drop(drain);
        self.pages_moved.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state[class].lock();
        state.pages.push(page as u32);
        if state.carving.is_none() {
            state.carving = Some((page as u32, 0));
        } else {
            let per_page = PAGE_SIZE / self.classes.size(class);
            state
                .free
                .extend((0..per_page).map(|slot| join(page, slot)));
        }
        true
    }

    /// Pages moved between classes so far.
    pub fn pages_moved(&self) -> u64 {
        self.pages_moved.load(Ordering::Relaxed)
    }
}
