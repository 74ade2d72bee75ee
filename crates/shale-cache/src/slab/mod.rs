//! Slab memory: fixed-size slots in pages of one size class, a [`Location`] per slot, and CLOCK
//! eviction per class over bitmaps (Mega-KV's memory management, memcached's classes).
//!
//! The arena is one mapping of the configured size, cut into [`PAGE_SIZE`] pages. A page is
//! assigned to a class when the class first needs it and cut into that class's slots. A location
//! names `(page, slot)`: `((page << SLOT_BITS) | slot) + 1`, so 0 is never issued.
//!
//! Two bitmaps carry state per location. *live* (one bit): the item is in the index or about to
//! be (only the scheduler sets and clears it, under its lock). *clock* (two bits, a counter from 0
//! to 3): how often the item was read lately; a read adds one, the CLOCK hand takes one. When a
//! class runs low on free slots and no page is left, its CLOCK hand sweeps the bitmaps a word (64
//! slots) at a time: live slots whose counter is 0 become victims, which the scheduler turns into
//! index deletes; the others lose one. A single bit would be plain second-chance CLOCK, close to
//! LRU; two bits keep items read several times through more sweeps than items read once, as
//! memcached's segmented LRU keeps its warm items apart from new ones (which matters for hit rate
//! under skewed popularity). New items start at 0.
//!
//! # Reuse
//! A freed slot waits in its class's limbo, tagged with the epoch of its free, until every
//! reader that might still hold its location has moved on ([`Epochs`]); then it is reused.
//!
//! # Concurrency
//! Each class's free lists sit behind their own mutex; the bitmaps are atomics; the page pool has
//! a mutex taken only to assign or return pages.

mod class;
mod rebalance;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use parking_lot::Mutex;

pub use class::{Classes, DEFAULT_GROWTH, MIN_SLOT, SLOT_ALIGN};

use crate::epoch::Epochs;
use crate::index::Location;
use crate::item::{self, ItemRef};
use crate::region::Region;

/// Bytes per page (memcached's page and largest item).
pub const PAGE_SIZE: usize = 1 << 20;

/// Bits of a location naming the slot within its page: pages of [`MIN_SLOT`]-byte slots fit.
pub const SLOT_BITS: u32 = 15;

/// Most pages: locations are 32-bit, and `u32::MAX` itself is never issued.
pub const MAX_PAGES: usize = (1 << (32 - SLOT_BITS)) - 1;

/// Victims one CLOCK sweep picks for a class (Mega-KV's batch of 512), fewer for small classes.
pub const EVICT_BATCH: usize = 512;

const SLOTS_PER_PAGE_MAX: usize = 1 << SLOT_BITS;
const WORDS_PER_PAGE: usize = SLOTS_PER_PAGE_MAX / 64;
const NO_CLASS: u8 = u8::MAX;

/// Why a slot could not be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// The item is larger than the largest slot.
    TooLarge,
    /// No slot is free now: evictions are under way or must be asked for.
    Full,
}

/// Slab memory. See the module documentation.
pub struct Slabs {
    // INVARIANT: `pages * PAGE_SIZE` bytes; page `p` starts at `p * PAGE_SIZE`.
    arena: Region,
    pages: usize,
    classes: Classes,
    // Per page: its class, or NO_CLASS.
    page_class: Box<[AtomicU8]>,
    // INVARIANT: each holds `pages * WORDS_PER_PAGE` zero-initialised u64 words.
    live: Region,
    // INVARIANT: `2 * pages * WORDS_PER_PAGE` words: for each live word `w`, the counter's low
    // bits at `2w` and high bits at `2w + 1` (one cache line holds both).
    clock: Region,
    state: Box<[Mutex<ClassState>]>,
    counts: Box<[ClassCounts]>,
    pool: Mutex<PagePool>,
    epochs: Epochs,
    live_items: AtomicUsize,
    // Per page: slots handed out by `alloc` and not yet back on a free list (in limbo counts).
    // Changed only under the page's class lock.
    in_use: Box<[AtomicU32]>,
    // Per page: being emptied to move to another class; its slots are not reused.
    draining: Box<[AtomicBool]>,
    drain: Mutex<Option<rebalance::Drain>>,
    pages_moved: AtomicU64,
}

#[derive(Default)]
struct ClassState {
    pages: Vec<u32>,
    free: Vec<Location>,
    limbo: VecDeque<(u64, Location)>,
    // The page being cut into slots and the next slot to cut.
    carving: Option<(u32, u32)>,
    // CLOCK hand: index into `pages`, word within the page.
    hand: (usize, usize),
    // Victims handed out and not yet settled by the scheduler.
    evicting: usize,
    // When the class last had to evict (rebalancing takes pages from idle classes).
    last_sweep: Option<std::time::Instant>,
}

#[derive(Default)]
struct PagePool {
    next_unused: usize,
}

/// Where a walk over a class's live items ([`Slabs::walk_live`]) goes on: the page, by its place
/// in the class's pages, and the slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkCursor {
    page: usize,
    slot: usize,
}

/// Counters of slab memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlabStats {
    /// Bytes of the arena.
    pub arena_bytes: usize,
    /// Bytes of pages assigned to classes.
    pub assigned_bytes: usize,
    /// Items marked live.
    pub live_items: usize,
    /// Every class that holds a page, in class order.
    pub classes: Vec<ClassStats>,
    /// Pages moved between classes so far.
    pub pages_moved: u64,
}

/// One size class's share of [`SlabStats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// The class's number, from 0.
    pub class: usize,
    /// Bytes per slot.
    pub slot_size: usize,
    /// Slots per page.
    pub slots_per_page: usize,
    /// Pages assigned to the class.
    pub pages: usize,
    /// Slots on the free list.
    pub free: usize,
    /// Slots of the page being cut that are not cut yet.
    pub uncut: usize,
    /// Freed slots waiting for readers to move on.
    pub limbo: usize,
    /// Live items (in the index or about to be).
    pub items: usize,
    /// Items the CLOCK sweep evicted.
    pub evicted: u64,
    /// Expired items reclaimed.
    pub reclaimed: u64,
    /// Stores refused for want of memory.
    pub out_of_memory: u64,
    /// Evicted items that had an expiry (memcached's `evicted_nonzero`).
    pub evicted_nonzero: u64,
    /// Evicted items never read (`evicted_unfetched`).
    pub evicted_unfetched: u64,
    /// Expired items reclaimed that were never read (`expired_unfetched`).
    pub expired_unfetched: u64,
    /// Seconds between the last read (or store) of the latest evicted item and its eviction
    /// (`evicted_time`).
    pub evicted_time: u64,
}

impl ClassStats {
    /// Slots of the class's pages.
    pub fn slots(&self) -> usize {
        self.pages * self.slots_per_page
    }

    /// Slots neither free, uncut nor in limbo: live items, items being written or evicted.
    pub fn used(&self) -> usize {
        self.slots()
            .saturating_sub(self.free + self.uncut + self.limbo)
    }
}

/// What happened to an item, counted per class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassEvent {
    /// Evicted by the CLOCK sweep.
    Evicted,
    /// Found expired and reclaimed.
    Reclaimed,
    /// A store found no memory.
    OutOfMemory,
}

/// Per-class counters of [`ClassEvent`]s and of what the removed items were.
#[derive(Debug, Default)]
struct ClassCounts {
    evicted: AtomicU64,
    reclaimed: AtomicU64,
    out_of_memory: AtomicU64,
    evicted_nonzero: AtomicU64,
    evicted_unfetched: AtomicU64,
    expired_unfetched: AtomicU64,
    evicted_time: AtomicU64,
}

impl ClassCounts {
    fn of(&self, event: ClassEvent) -> &AtomicU64 {
        match event {
            ClassEvent::Evicted => &self.evicted,
            ClassEvent::Reclaimed => &self.reclaimed,
            ClassEvent::OutOfMemory => &self.out_of_memory,
        }
    }
}

impl Slabs {
    /// Slab memory of `bytes` (rounded down to whole pages, at least one page, at most
    /// [`MAX_PAGES`]) with classes growing by `growth`, for `threads` readers.
    ///
    /// # Errors
    /// If the arena or its bitmaps cannot be mapped.
    pub fn new(bytes: usize, growth: f64, threads: usize) -> std::io::Result<Slabs> {
        let pages = (bytes / PAGE_SIZE).clamp(1, MAX_PAGES);
        let arena = Region::map(pages * PAGE_SIZE)?;
        let bitmap_bytes = pages * WORDS_PER_PAGE * 8;
        let classes = Classes::new(PAGE_SIZE, growth);
        Ok(Slabs {
            arena,
            pages,
            page_class: (0..pages).map(|_| AtomicU8::new(NO_CLASS)).collect(),
            live: Region::map(bitmap_bytes)?,
            clock: Region::map(2 * bitmap_bytes)?,
            state: (0..classes.len())
                .map(|_| Mutex::new(ClassState::default()))
                .collect(),
            counts: (0..classes.len()).map(|_| ClassCounts::default()).collect(),
            classes,
            pool: Mutex::new(PagePool::default()),
            epochs: Epochs::new(threads),
            live_items: AtomicUsize::new(0),
            in_use: (0..pages).map(|_| AtomicU32::new(0)).collect(),
            draining: (0..pages).map(|_| AtomicBool::new(false)).collect(),
            drain: Mutex::new(None),
            pages_moved: AtomicU64::new(0),
        })
    }

    /// Bytes of memory the bitmaps and page table cost per arena page (for budgeting).
    pub const OVERHEAD_PER_PAGE: usize = 3 * WORDS_PER_PAGE * 8 + 1;

    /// The readers' epochs.
    pub fn epochs(&self) -> &Epochs {
        &self.epochs
    }

    /// The size classes.
    pub fn classes(&self) -> &Classes {
        &self.classes
    }

    /// Pages in the arena.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Largest item (header, key and value) a slot holds.
    pub fn max_item_len(&self) -> usize {
        PAGE_SIZE
    }

    /// The class of the slot `loc`, if `loc` names one.
    #[inline]
    pub fn class_of(&self, loc: Location) -> Option<usize> {
        let (page, slot) = split(loc)?;
        let class = self.page_class.get(page)?.load(Ordering::Acquire);
        if class == NO_CLASS {
            return None;
        }
        let class = usize::from(class);
        (slot < PAGE_SIZE / self.classes.size(class)).then_some(class)
    }

    /// The slot `loc`: its first byte and its size.
    #[inline]
    pub fn slot(&self, loc: Location) -> Option<(*mut u8, usize)> {
        let class = self.class_of(loc)?;
        let (page, slot) = split(loc)?;
        let size = self.classes.size(class);
        let offset = page * PAGE_SIZE + slot * size;
        // SAFETY: `page < pages` (class_of looked it up) and the slot lies inside its page.
        Some((unsafe { self.arena.as_ptr().add(offset) }, size))
    }

    /// Starts loading the first two cache lines of the slot `loc` (an item's header and key), for
    /// a read soon after.
    #[inline]
    pub fn prefetch(&self, loc: Location) {
        if let Some((ptr, size)) = self.slot(loc) {
            crate::region::prefetch(ptr);
            if size > 64 {
                crate::region::prefetch(ptr.wrapping_add(64));
            }
        }
    }

    /// The item at `loc`.
    ///
    /// # Safety
    /// The calling thread is pinned ([`Epochs::pin`]) and obtained `loc` while pinned from the
    /// index or the scheduler, so the slot holds a published item that is not reused while the
    /// returned view lives.
    #[inline]
    pub unsafe fn item<'a>(&'a self, loc: Location) -> Option<ItemRef<'a>> {
        let (ptr, size) = self.slot(loc)?;
        // SAFETY: the caller's pin keeps a published item in the slot (see above).
        unsafe { ItemRef::at(ptr, size) }
    }

    /// A free slot of the smallest class that holds `len` bytes.
    ///
    /// # Errors
    /// [`AllocError::TooLarge`] if no class holds `len`; [`AllocError::Full`] if the class has
    /// no free slot and no page is left (ask for victims with [`Self::sweep`]).
    pub fn alloc(&self, len: usize) -> Result<Location, AllocError> {
        let class = self.classes.for_len(len).ok_or(AllocError::TooLarge)?;
        if let Some(loc) = self.alloc_in(class) {
            return Ok(loc);
        }
        // No slot and no fresh page: a page emptied for this class may be ready.
        if self.finish_drain(class) {
            if let Some(loc) = self.alloc_in(class) {
                return Ok(loc);
            }
        }
        Err(AllocError::Full)
    }

    /// A slot of `class` from its free lists, its page being cut, or a fresh page.
    fn alloc_in(&self, class: usize) -> Option<Location> {
        let mut state = self.state[class].lock();
        let loc = match state.free.pop() {
            Some(loc) => loc,
            None => {
                self.reclaim(&mut state);
                match state.free.pop() {
                    Some(loc) => loc,
                    None => {
                        let per_page = (PAGE_SIZE / self.classes.size(class)) as u32;
                        if state.carving.is_none() {
                            let page = self.take_page(class)?;
                            state.pages.push(page);
                            state.carving = Some((page, 0));
                        }
                        let (page, slot) = state.carving.expect("a page to cut");
                        state.carving = (slot + 1 < per_page).then_some((page, slot + 1));
                        join(page as usize, slot as usize)
                    }
                }
            }
        };
        if let Some((page, _)) = split(loc) {
            self.in_use[page].fetch_add(1, Ordering::Relaxed);
        }
        Some(loc)
    }

    /// Moves the class's freed slots that no reader can hold any more to its free list (slots of
    /// a page being drained are dropped instead).
    fn reclaim(&self, state: &mut ClassState) {
        let below = self.epochs.reusable_below();
        while let Some(&(tag, loc)) = state.limbo.front() {
            if tag >= below {
                break;
            }
            state.limbo.pop_front();
            if let Some((page, _)) = split(loc) {
                self.in_use[page].fetch_sub(1, Ordering::Relaxed);
                if self.draining[page].load(Ordering::Relaxed) {
                    continue;
                }
            }
            state.free.push(loc);
        }
    }

    /// Writes a new item into a fresh slot.
    ///
    /// # Errors
    /// As for [`Self::alloc`].
    pub fn store(
        &self,
        key: &[u8],
        value_parts: &[&[u8]],
        meta: item::ItemMeta,
    ) -> Result<Location, AllocError> {
        if key.len() > usize::from(u16::MAX) {
            return Err(AllocError::TooLarge);
        }
        let value_len: usize = value_parts.iter().map(|p| p.len()).sum();
        if value_len > u32::MAX as usize {
            return Err(AllocError::TooLarge);
        }
        let loc = self.alloc(item::item_len(key.len(), value_len))?;

        let (ptr, _) = self.slot(loc).expect("a slot just allocated");
        // SAFETY: the slot was just taken from the free lists, so no other thread touches it
        // until its location is published; it is large enough and 8-byte aligned.
        unsafe { item::write(ptr, key, value_parts, meta) };
        Ok(loc)
    }

    fn take_page(&self, class: usize) -> Option<u32> {
        let mut pool = self.pool.lock();
        if pool.next_unused >= self.pages {
            return None;
        }
        pool.next_unused += 1;
        let page = (pool.next_unused - 1) as u32;
        self.page_class[page as usize].store(class as u8, Ordering::Release);
        Some(page)
    }

    /// Frees `loc`: reusable once readers have moved on. Only the scheduler frees published
    /// slots; a thread may free a slot it allocated and never published.
    pub fn free(&self, loc: Location) {
        let Some(class) = self.class_of(loc) else {
            return;
        };
        let tag = self.epochs.current();
        self.state[class].lock().limbo.push_back((tag, loc));
    }

    /// Marks `loc` live (the scheduler, when it queues its insert), its CLOCK counter at 0. The
    /// mark is a release: a thread that sees it with an acquire load ([`Self::walk_live`]) sees
    /// the item written.
    #[inline]
    pub fn set_live(&self, loc: Location) {
        if let Some((word, bit)) = self.bit(loc) {
            for half in [2 * word, 2 * word + 1] {
                let w = self.word(&self.clock, half);
                if w.load(Ordering::Relaxed) & bit != 0 {
                    w.fetch_and(!bit, Ordering::Relaxed);
                }
            }
            let old = self.word(&self.live, word).fetch_or(bit, Ordering::Release);
            if old & bit == 0 {
                self.live_items.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Clears `loc`'s live mark; true if it was set. Whoever clears it frees the slot.
    #[inline]
    pub fn clear_live(&self, loc: Location) -> bool {
        let Some((word, bit)) = self.bit(loc) else {
            return false;
        };
        let old = self
            .word(&self.live, word)
            .fetch_and(!bit, Ordering::Relaxed);
        let was = old & bit != 0;
        if was {
            self.live_items.fetch_sub(1, Ordering::Relaxed);
        }
        was
    }

    /// Whether `loc` is marked live.
    #[inline]
    pub fn is_live(&self, loc: Location) -> bool {
        self.bit(loc).is_some_and(|(word, bit)| {
            self.word(&self.live, word).load(Ordering::Relaxed) & bit != 0
        })
    }

    /// Records a read of `loc` for CLOCK: its counter goes up by one, to at most 3. Racing
    /// readers and sweeps may lose a step; the counter is a hint.
    #[inline]
    pub fn reference(&self, loc: Location) {
        if let Some((word, bit)) = self.bit(loc) {
            let low = self.word(&self.clock, 2 * word);
            let high = self.word(&self.clock, 2 * word + 1);
            let (l, h) = (
                low.load(Ordering::Relaxed) & bit != 0,
                high.load(Ordering::Relaxed) & bit != 0,
            );
            match (l, h) {
                (true, true) => {}
                (false, _) => {
                    low.fetch_or(bit, Ordering::Relaxed);
                }
                (true, false) => {
                    high.fetch_or(bit, Ordering::Relaxed);
                    low.fetch_and(!bit, Ordering::Relaxed);
                }
            }
        }
    }

    /// Items marked live.
    pub fn live_items(&self) -> usize {
        self.live_items.load(Ordering::Relaxed)
    }

    /// If class `class` is running low (no page left and fewer than [`EVICT_BATCH`] slots free,
    /// in limbo or being evicted), sweeps its CLOCK hand and appends victims to `victims`; may
    /// also start moving a page from an idle class to this one (its items become victims too).
    /// Every victim must be settled with [`Self::victim_settled`]. Returns whether memory for
    /// the class is on its way (slots in limbo, victims out, a page coming); false means the
    /// class has no memory to evict and none can be moved to it.
    pub fn sweep(&self, class: usize, victims: &mut Vec<Location>) -> bool {
        let before = victims.len();
        let coming = self.sweep_clock(class, victims);
        let moving = self.rebalance(class, victims);
        coming || moving || victims.len() > before
    }

    fn sweep_clock(&self, class: usize, victims: &mut Vec<Location>) -> bool {
        let per_page = PAGE_SIZE / self.classes.size(class);
        let mut state = self.state[class].lock();
        state.last_sweep = Some(std::time::Instant::now());
        if state.pages.is_empty() {
            return self.pool.lock().next_unused < self.pages;
        }
        let want = EVICT_BATCH.min(per_page * state.pages.len() / 8).max(1);
        let spare = state.free.len() + state.limbo.len() + state.evicting;
        if spare >= want || state.carving.is_some() || self.pool.lock().next_unused < self.pages {
            return true;
        }
        let words = per_page.div_ceil(64);
        let mut found = 0;
        // Four full turns: the first three may only count hot items down.
        let mut budget = 4 * words * state.pages.len();
        while found < want && budget > 0 {
            budget -= 1;
            let (page_at, word_at) = state.hand;
            let page = state.pages[page_at] as usize;
            let (index, live) = self.live_word(page, word_at, per_page);
            let low = self.word(&self.clock, 2 * index);
            let high = self.word(&self.clock, 2 * index + 1);
            let (l, h) = (low.load(Ordering::Relaxed), high.load(Ordering::Relaxed));
            let mut cold = live & !l & !h;
            // Count every other live slot down by one: 1 -> 0, 2 -> 1, 3 -> 2.
            let warm = live & !cold;
            if warm != 0 {
                low.store((h & !l & warm) | (l & !warm), Ordering::Relaxed);
                high.store((l & h & warm) | (h & !warm), Ordering::Relaxed);
            }
            while cold != 0 && found < want {
                let bit = cold.trailing_zeros() as usize;
                cold &= cold - 1;
                victims.push(join(page, word_at * 64 + bit));
                found += 1;
            }
            // The rest of a partly taken word waits for the next sweep (counted down once more).
            let _ = cold;
            state.hand = if word_at + 1 < words {
                (page_at, word_at + 1)
            } else {
                ((page_at + 1) % state.pages.len(), 0)
            };
        }
        state.evicting += found;
        state.evicting + state.limbo.len() + state.free.len() > 0
    }

    /// The scheduler has dealt with a victim handed out by [`Self::sweep`] (evicted it, or found
    /// it gone already).
    pub fn victim_settled(&self, loc: Location) {
        if let Some(class) = self.class_of(loc) {
            let mut state = self.state[class].lock();
            state.evicting = state.evicting.saturating_sub(1);
        }
    }

    /// Forgets every live item: clears every live mark and CLOCK counter and frees the slots (the
    /// scheduler's FLUSH, with the index cleared and nothing pending). Slots allocated but not yet
    /// published are not live and stay with their owners. Returns how many items were freed.
    pub fn evict_all(&self) -> usize {
        let tag = self.epochs.current();
        let mut freed = 0;
        for state in self.state.iter() {
            let mut state = state.lock();
            let ClassState { pages, limbo, .. } = &mut *state;
            for &page in pages.iter() {
                let first = page as usize * WORDS_PER_PAGE;
                for w in 0..WORDS_PER_PAGE {
                    self.word(&self.clock, 2 * (first + w))
                        .store(0, Ordering::Relaxed);
                    self.word(&self.clock, 2 * (first + w) + 1)
                        .store(0, Ordering::Relaxed);
                    let mut live = self.word(&self.live, first + w).swap(0, Ordering::Relaxed);
                    while live != 0 {
                        let bit = live.trailing_zeros() as usize;
                        live &= live - 1;
                        limbo.push_back((tag, join(page as usize, w * 64 + bit)));
                        freed += 1;
                    }
                }
            }
        }
        self.live_items.fetch_sub(freed, Ordering::Relaxed);
        freed
    }

    /// Hands `visit` the live items of class `class` in slab order, from `from` on, until it
    /// returns false or the class is walked. Returns where to go on (the item `visit` refused),
    /// or `None` when the class is done. Not a snapshot: items stored or removed meanwhile may
    /// or may not be seen, as with memcached's dumps.
    ///
    /// # Safety
    /// The calling thread is pinned ([`Epochs::pin`]) during the call.
    pub unsafe fn walk_live(
        &self,
        class: usize,
        from: WalkCursor,
        mut visit: impl FnMut(ItemRef<'_>) -> bool,
    ) -> Option<WalkCursor> {
        let pages = self.state.get(class)?.lock().pages.clone();
        let per_page = PAGE_SIZE / self.classes.size(class);
        let mut slot = from.slot;
        for (at, &page) in pages.iter().enumerate().skip(from.page) {
            let page = page as usize;
            while slot < per_page {
                let word = slot / 64;
                // Acquire: pairs with `set_live`'s release, so a live item is seen whole.
                let mut bits = self
                    .word(&self.live, page * WORDS_PER_PAGE + word)
                    .load(Ordering::Acquire)
                    & (!0u64 << (slot % 64));
                while bits != 0 {
                    let found = word * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let loc = join(page, found);
                    // The page may have moved to another class since the list was taken.
                    if found >= per_page || self.class_of(loc) != Some(class) {
                        continue;
                    }
                    // SAFETY: the caller is pinned and `loc` was live when loaded (acquire), so
                    // its slot holds a published item, not reused before the thread moves on.
                    let Some(item) = (unsafe { self.item(loc) }) else {
                        continue;
                    };
                    if !visit(item) {
                        return Some(WalkCursor {
                            page: at,
                            slot: found,
                        });
                    }
                }
                slot = (word + 1) * 64;
            }
            slot = 0;
        }
        None
    }

    /// Counters for stats.
    pub fn stats(&self) -> SlabStats {
        let mut stats = SlabStats {
            arena_bytes: self.pages * PAGE_SIZE,
            live_items: self.live_items(),
            pages_moved: self.pages_moved(),
            ..SlabStats::default()
        };
        for (class, state) in self.state.iter().enumerate() {
            let state = state.lock();
            if state.pages.is_empty() {
                continue;
            }
            let slots_per_page = PAGE_SIZE / self.classes.size(class);
            let items = state
                .pages
                .iter()
                .map(|&page| {
                    let first = page as usize * WORDS_PER_PAGE;
                    (first..first + WORDS_PER_PAGE)
                        .map(|w| {
                            self.word(&self.live, w)
                                .load(Ordering::Relaxed)
                                .count_ones()
                        })
                        .sum::<u32>() as usize
                })
                .sum();
            let counts = &self.counts[class];
            stats.assigned_bytes += state.pages.len() * PAGE_SIZE;
            stats.classes.push(ClassStats {
                class,
                slot_size: self.classes.size(class),
                slots_per_page,
                pages: state.pages.len(),
                free: state.free.len(),
                uncut: state
                    .carving
                    .map_or(0, |(_, next)| slots_per_page - next as usize),
                limbo: state.limbo.len(),
                items,
                evicted: counts.evicted.load(Ordering::Relaxed),
                reclaimed: counts.reclaimed.load(Ordering::Relaxed),
                out_of_memory: counts.out_of_memory.load(Ordering::Relaxed),
                evicted_nonzero: counts.evicted_nonzero.load(Ordering::Relaxed),
                evicted_unfetched: counts.evicted_unfetched.load(Ordering::Relaxed),
                expired_unfetched: counts.expired_unfetched.load(Ordering::Relaxed),
                evicted_time: counts.evicted_time.load(Ordering::Relaxed),
            });
        }
        stats
    }

    /// Counts the removal of `item` at `loc` (evicted by CLOCK, or reclaimed expired: `event`)
    /// at cache-clock second `now_s`: [`ClassEvent`] and what the item was (read or not, with an
    /// expiry or not, when it was last read).
    pub fn count_removal(&self, loc: Location, item: &ItemRef<'_>, event: ClassEvent, now_s: u32) {
        let Some(class) = self.class_of(loc) else {
            return;
        };
        let counts = &self.counts[class];
        counts.of(event).fetch_add(1, Ordering::Relaxed);
        let unfetched = item.state() & item::FETCHED == 0;
        match event {
            ClassEvent::Evicted => {
                if item.expire_ms() != item::NEVER {
                    counts.evicted_nonzero.fetch_add(1, Ordering::Relaxed);
                }
                if unfetched {
                    counts.evicted_unfetched.fetch_add(1, Ordering::Relaxed);
                }
                let idle = now_s.saturating_sub(item.access_s());
                counts
                    .evicted_time
                    .store(u64::from(idle), Ordering::Relaxed);
            }
            ClassEvent::Reclaimed if unfetched => {
                counts.expired_unfetched.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// The item the CLOCK hand of class `class` would evict next: the first live slot at or
    /// after the hand whose counter is 0, else the first live one (looked for over at most a
    /// page's worth of slots). Its last read is the counterpart of memcached's LRU tail age.
    ///
    /// # Safety
    /// The calling thread is pinned ([`Epochs::pin`]) while it uses the item.
    pub unsafe fn clock_candidate<'a>(&'a self, class: usize) -> Option<ItemRef<'a>> {
        let (pages, (mut page_at, mut word_at)) = {
            let state = self.state[class].lock();
            (state.pages.clone(), state.hand)
        };
        if pages.is_empty() {
            return None;
        }
        let per_page = PAGE_SIZE / self.classes.size(class);
        let words = per_page.div_ceil(64);
        let mut first_live = None;
        for _ in 0..WORDS_PER_PAGE.min(words * pages.len()) {
            let page = pages[page_at % pages.len()] as usize;
            let (index, live) = self.live_word(page, word_at, per_page);
            let low = self.word(&self.clock, 2 * index).load(Ordering::Relaxed);
            let high = self
                .word(&self.clock, 2 * index + 1)
                .load(Ordering::Relaxed);
            let cold = live & !low & !high;
            let slot = |bits: u64| join(page, word_at * 64 + bits.trailing_zeros() as usize);
            if cold != 0 {
                // SAFETY: the caller is pinned, so the live slot's item stays readable.
                return unsafe { self.item(slot(cold)) };
            }
            if live != 0 && first_live.is_none() {
                first_live = Some(slot(live));
            }
            word_at += 1;
            if word_at == words {
                word_at = 0;
                page_at += 1;
            }
        }
        // SAFETY: as above.
        first_live.and_then(|loc| unsafe { self.item(loc) })
    }

    /// Counts `event` for the class of items of `len` bytes (header, key and value).
    pub fn count_for_len(&self, len: usize, event: ClassEvent) {
        if let Some(class) = self.classes.for_len(len) {
            self.counts[class].of(event).fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline]
    fn bit(&self, loc: Location) -> Option<(usize, u64)> {
        let (page, slot) = split(loc)?;
        if page >= self.pages {
            return None;
        }
        Some((page * WORDS_PER_PAGE + slot / 64, 1u64 << (slot % 64)))
    }

    /// The bitmap index of word `word_at` of `page` (of a class with `per_page` slots a page)
    /// and its live bits, those past the page's last slot cleared.
    #[inline]
    fn live_word(&self, page: usize, word_at: usize, per_page: usize) -> (usize, u64) {
        let index = page * WORDS_PER_PAGE + word_at;
        let mut valid = u64::MAX;
        let last = per_page - word_at * 64;
        if last < 64 {
            valid = (1u64 << last) - 1;
        }
        (
            index,
            self.word(&self.live, index).load(Ordering::Relaxed) & valid,
        )
    }

    #[inline]
    fn word<'a>(&self, bitmap: &'a Region, index: usize) -> &'a AtomicU64 {
        debug_assert!(index < bitmap.len() / 8);
        // SAFETY: `index` is below the bitmap's word count (callers derive it from a page below
        // `pages`); the region is zero-initialised, 8-byte aligned and lives as long as `self`.
        unsafe { &*(bitmap.as_ptr() as *const AtomicU64).add(index) }
    }
}

/// `(page, slot)` of a location.
#[inline]
fn split(loc: Location) -> Option<(usize, usize)> {
    let raw = loc.checked_sub(1)? as usize;
    Some((raw >> SLOT_BITS, raw & (SLOTS_PER_PAGE_MAX - 1)))
}

/// The location of `(page, slot)`.
#[inline]
fn join(page: usize, slot: usize) -> Location {
    (((page << SLOT_BITS) | slot) + 1) as Location
}

#[cfg(test)]
mod tests;
