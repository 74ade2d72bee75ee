//! A bump allocator for memtable nodes.
//!
//! The arena hands out 8-byte-aligned, uninitialized blocks carved from large chunks
//! ([`CHUNK_SIZE`]); a request over a quarter of a chunk gets a chunk of its own, so a large value
//! wastes nothing and does not strand the rest of the current chunk. Nothing is freed before the
//! arena drops, so a pointer it returned stays valid, and never moves, for the arena's lifetime.
//!
//! Regular chunks are huge-page regions of their own ([`Pages`]): a skiplist search is a chain of
//! dependent loads at random addresses, and with 4 KiB pages nearly every one of them also misses
//! the TLB.
//!
//! A dropped arena's regular chunks go to a small process-wide pool that the next arenas take
//! theirs from: the first touch of a fresh chunk is a page fault in which the kernel zeroes a
//! whole huge page, while a reused chunk is resident already. Measured under `redis-benchmark -t
//! lpush -P 16` against `shale serve`, that zeroing was 10-15% of the connection thread's CPU: a
//! memtable is written once and dropped after its flush, so every byte written went to fresh
//! memory. The arena hands out uninitialized blocks, so a reused chunk needs no clearing.
//!
//! Concurrency contract: allocating takes `&mut self` (the memtable calls it under its insert lock).
//! The arena never reads or writes the memory it handed out, so other threads may read blocks
//! through pointers obtained earlier while an allocation runs.

use super::huge::{Pages, HUGE_PAGE};
use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Size (and alignment) of a regular chunk: 2 MiB, one x86-64 huge page.
pub(crate) const CHUNK_SIZE: usize = HUGE_PAGE;

/// Alignment of every block: enough for the atomic pointers at the start of a node.
pub(crate) const ALIGN: usize = 8;

/// Most regular chunks the pool keeps: 96 MiB, a little more than the chunks of one memtable of
/// the default 64 MiB write buffer, so a steady writer's next memtable is built from the last
/// flushed one's memory. Past it, a dropped arena's chunks go back to the kernel.
#[cfg(not(any(loom, miri)))]
const MAX_FREE_CHUNKS: usize = 48;

/// Regular chunks of dropped arenas (see the module documentation). Loom models and Miri get
/// fresh chunks every time, as before the pool: the memory they check is the arena's own.
#[cfg(not(any(loom, miri)))]
static FREE_CHUNKS: parking_lot::Mutex<Vec<Pages>> = parking_lot::Mutex::new(Vec::new());

/// A regular chunk: one from the pool, else a fresh one. Its contents are arbitrary.
fn take_chunk() -> Pages {
    #[cfg(not(any(loom, miri)))]
    if let Some(chunk) = FREE_CHUNKS.lock().pop() {
        return chunk;
    }
    Pages::zeroed(CHUNK_SIZE)
}

/// Gives `chunks` to the pool, up to its size; the rest are unmapped (outside the pool's lock).
fn return_chunks(chunks: &mut Vec<Pages>) {
    #[cfg(not(any(loom, miri)))]
    {
        let mut free = FREE_CHUNKS.lock();
        let keep = MAX_FREE_CHUNKS.saturating_sub(free.len()).min(chunks.len());
        free.extend(chunks.drain(..keep));
    }
    chunks.clear();
}

/// An append-only region of memory freed all at once.
pub(crate) struct Arena {
    // INVARIANT: each pair is a live allocation made with `alloc::alloc(layout)`, freed only in
    // `Drop`; the blocks handed out lie inside these allocations and `regular`.
    chunks: Vec<(NonNull<u8>, Layout)>,
    /// The regular chunks.
    regular: Vec<Pages>,
    // INVARIANT: `cursor .. cursor + remaining` is the unused tail of the last regular chunk
    // (empty before the first one); `cursor` is ALIGN-aligned and `remaining` a multiple of ALIGN.
    cursor: *mut u8,
    remaining: usize,
    /// Bytes handed out, plus the unused tails of abandoned chunks: the memory the entries cost.
    used: usize,
}

// SAFETY: the arena owns its chunks exclusively (like a `Vec<Box<[u8]>>`); the raw pointers carry
// no thread affinity.
unsafe impl Send for Arena {}

impl Arena {
    /// An empty arena; it allocates its first chunk on the first request.
    pub(crate) fn new() -> Arena {
        Arena {
            chunks: Vec::new(),
            regular: Vec::new(),
            cursor: std::ptr::null_mut(),
            remaining: 0,
            used: 0,
        }
    }

    /// A block of at least `size` bytes, aligned to [`ALIGN`], uninitialized, valid until the
    /// arena drops. The pointer's provenance covers the whole block.
    ///
    /// Aborts the process (via `handle_alloc_error`) when the system is out of memory, like any
    /// Rust allocation.
    pub(crate) fn alloc(&mut self, size: usize) -> NonNull<u8> {
        let size = size.max(1).next_multiple_of(ALIGN);
        if size > CHUNK_SIZE / 4 {
            self.used += size;
            return self.new_chunk(size);
        }
        if size > self.remaining {
            // The tail of the old chunk is lost for good: charge it.
            self.used += self.remaining;
            let chunk = take_chunk();
            self.cursor = chunk.as_ptr();
            self.regular.push(chunk);
            self.remaining = CHUNK_SIZE;
        }
        let block = self.cursor;
        // SAFETY: size <= remaining, so `cursor + size` stays inside (or one past) the chunk.
        self.cursor = unsafe { self.cursor.add(size) };
        self.remaining -= size;
        self.used += size;
        // SAFETY: `block` points into a live chunk, so it is not null.
        unsafe { NonNull::new_unchecked(block) }
    }

    /// Bytes the entries cost: blocks handed out plus abandoned chunk tails (not the unused tail
    /// of the current chunk, which later entries will fill).
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    fn new_chunk(&mut self, size: usize) -> NonNull<u8> {
        let layout = Layout::from_size_align(size, ALIGN).expect("arena chunk layout");
        // SAFETY: `layout` has a non-zero size (`alloc` rounds requests up to at least ALIGN).
        let ptr = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(ptr) else {
            alloc::handle_alloc_error(layout)
        };
        self.chunks.push((ptr, layout));
        ptr
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        return_chunks(&mut self.regular);
        for &(ptr, layout) in &self.chunks {
            // SAFETY: allocated by `new_chunk` with this layout, freed exactly once, here.
            unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_disjoint_and_charged() {
        let mut arena = Arena::new();
        let a = arena.alloc(3).as_ptr() as usize;
        let b = arena.alloc(16).as_ptr() as usize;
        assert_eq!(a % ALIGN, 0);
        assert_eq!(b % ALIGN, 0);
        assert!(b >= a + 3);
        assert_eq!(arena.used(), 8 + 16);
        // A large block gets its own chunk and is charged exactly.
        let big = arena.alloc(CHUNK_SIZE * 2);
        assert_eq!(arena.used(), 8 + 16 + CHUNK_SIZE * 2);
        // SAFETY: the block is CHUNK_SIZE * 2 bytes, owned by this test.
        unsafe { std::ptr::write_bytes(big.as_ptr(), 0xab, CHUNK_SIZE * 2) };
        // Small blocks keep filling the first chunk.
        let c = arena.alloc(8).as_ptr() as usize;
        assert_eq!(c, b + 16);
    }

    #[test]
    fn a_full_chunk_charges_its_lost_tail() {
        let mut arena = Arena::new();
        let quarter = CHUNK_SIZE / 4;
        for _ in 0..3 {
            arena.alloc(quarter);
        }
        arena.alloc(quarter - 8);
        arena.alloc(16); // does not fit in the 8 bytes left
        assert_eq!(arena.used(), CHUNK_SIZE + 16);
    }
}
