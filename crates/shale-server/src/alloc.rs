//! The server's memory allocator: mimalloc, except that a block of at least [`OS_DIRECT`] bytes
//! is its own anonymous mapping, unmapped when it is freed.
//!
//! Such blocks are the buffers of large values: the read buffer a 300 MB argument arrives in
//! (allocated on a connection thread, freed on the blocking thread that wrote the value), the
//! engine batch the value is copied into, a large value read back. mimalloc keeps a freed block
//! of its arena resident until a later purge (a second after the free, if some allocation of
//! the process runs one) and lets it be reused only by an allocation that fits where it lay, and
//! a block freed by another thread waits for its owning thread to collect it. How much of the
//! last large write's memory was still resident when the next one arrived thus depended on
//! timing: peak memory for writes of 100, 200 and 300 MB was 2.05-2.2x the largest value in most
//! runs and 2.73x in some. A mapping of its own is returned whole, at once, by any thread, so the
//! peak is what is live: the value's read buffer and its copy.
//!
//! Thread safety: stateless; mimalloc and the kernel do the locking.

use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout};
use std::ptr;

/// Blocks of at least this many bytes are mappings of their own (glibc's malloc maps blocks of
/// 32 MiB and more in any case). Smaller ones stay with mimalloc, which reuses them without a
/// system call or fresh pages: the server's hot paths allocate nothing this large.
pub const OS_DIRECT: usize = 32 << 20;

/// The largest alignment a mapping is known to have (the smallest page size).
const MAP_ALIGN: usize = 4096;

/// The server's global allocator (see the module documentation).
pub struct ServerAlloc;

/// Whether a block of `layout` is a mapping of its own.
fn is_direct(layout: Layout) -> bool {
    layout.size() >= OS_DIRECT && layout.align() <= MAP_ALIGN
}

/// A fresh zeroed anonymous mapping of `size` bytes, or null.
fn map(size: usize) -> *mut u8 {
    // SAFETY: a new private anonymous mapping at an address the kernel picks touches no memory
    // of the process.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Unmaps a block that [`map`] (or [`remap`]) returned for `size` bytes.
///
/// # Safety
/// `p` and `size` are those of a live direct block, which is not used afterwards.
unsafe fn unmap(p: *mut u8, size: usize) {
    // SAFETY: the caller passes a whole mapping of ours that nothing uses any more.
    unsafe { libc::munmap(p.cast(), size) };
}

/// Moves a direct block of `old` bytes to one of `new` bytes (keeping the first
/// `min(old, new)`), or returns null leaving it as it was.
///
/// # Safety
/// `p` and `old` are those of a live direct block; on success it is used only through the
/// returned pointer.
#[cfg(target_os = "linux")]
unsafe fn remap(p: *mut u8, old: usize, new: usize) -> *mut u8 {
    // SAFETY: the caller passes a whole mapping of ours; the kernel moves its pages (no copy)
    // and leaves it intact on failure.
    let q = unsafe { libc::mremap(p.cast(), old, new, libc::MREMAP_MAYMOVE) };
    if q == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        q.cast()
    }
}

// SAFETY: every block comes from mimalloc or is a mapping of its own; `is_direct` of the layout
// (which Rust passes back unchanged on free and realloc) tells which, so each is returned to
// where it came from. Mappings are page-aligned, and only layouts aligned to at most a page are
// mapped.
unsafe impl GlobalAlloc for ServerAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_direct(layout) {
            map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's contract.
            unsafe { MiMalloc.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_direct(layout) {
            // A fresh anonymous mapping reads as zeros.
            map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's contract.
            unsafe { MiMalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if is_direct(layout) {
            // SAFETY: a direct layout's block is a mapping of that size, freed by the caller.
            unsafe { unmap(p, layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's contract.
            unsafe { MiMalloc.dealloc(p, layout) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees that `new_size`, rounded up to the alignment, does not
        // overflow `isize`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_direct(layout), is_direct(new_layout)) {
            // SAFETY: forwarded with the caller's contract.
            (false, false) => unsafe { MiMalloc.realloc(p, layout, new_size) },
            #[cfg(target_os = "linux")]
            // SAFETY: `p` is a direct block of `layout.size()` bytes (the caller's contract).
            (true, true) => unsafe { remap(p, layout.size(), new_size) },
            _ => {
                // SAFETY: `new_size` is non-zero (the caller's contract).
                let q = unsafe { self.alloc(new_layout) };
                if !q.is_null() {
                    // SAFETY: both blocks are live and distinct, each at least this long; the
                    // old one is freed with its own layout.
                    unsafe {
                        ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                }
                q
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `VmRSS` of this process, in bytes.
    fn rss() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kb: usize = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kb * 1024
    }

    #[test]
    fn blocks_keep_their_bytes_across_every_kind_of_realloc() {
        let a = ServerAlloc;
        let small = Layout::from_size_align(1000, 8).unwrap();
        // SAFETY: layouts are non-zero; each block is written within its size and freed once
        // with the layout it has then.
        unsafe {
            let p = a.alloc(small);
            assert!(!p.is_null());
            ptr::write_bytes(p, 7, 1000);
            // small -> direct -> larger direct -> small again
            let sizes = [OS_DIRECT + 5, 3 * OS_DIRECT, 100];
            let (mut p, mut layout) = (p, small);
            for size in sizes {
                p = a.realloc(p, layout, size);
                assert!(!p.is_null());
                let kept = layout.size().min(size).min(1000);
                assert!((0..kept).all(|i| *p.add(i) == 7), "lost bytes at {size}");
                layout = Layout::from_size_align(size, 8).unwrap();
            }
            a.dealloc(p, layout);
            let big = Layout::from_size_align(OS_DIRECT, 64).unwrap();
            let z = a.alloc_zeroed(big);
            assert!(!z.is_null() && *z == 0 && *z.add(OS_DIRECT - 1) == 0);
            a.dealloc(z, big);
            // Over a page of alignment: left to mimalloc, and aligned.
            let aligned = Layout::from_size_align(OS_DIRECT, 1 << 16).unwrap();
            let q = a.alloc(aligned);
            assert!(!q.is_null() && (q as usize).is_multiple_of(1 << 16));
            a.dealloc(q, aligned);
        }
    }

    #[test]
    fn a_large_block_freed_by_another_thread_leaves_memory_at_once() {
        const SIZE: usize = 256 << 20;
        let layout = Layout::from_size_align(SIZE, 1).unwrap();
        let before = rss();
        // SAFETY: a non-zero layout; the block is written within its size.
        let p = unsafe { a_touched_block(layout) };
        let touched = rss();
        assert!(touched >= before + SIZE / 2, "the block was not resident");
        let addr = p as usize;
        std::thread::spawn(move || {
            // SAFETY: the block is live, freed once, with its layout, and not used after.
            unsafe { ServerAlloc.dealloc(addr as *mut u8, layout) }
        })
        .join()
        .unwrap();
        let after = rss();
        assert!(
            after + SIZE / 2 < touched,
            "freeing {SIZE} bytes left RSS at {after} (was {touched} with the block)"
        );
    }

    /// A block of `layout` from [`ServerAlloc`] with every page written.
    ///
    /// # Safety
    /// `layout` has a non-zero size.
    unsafe fn a_touched_block(layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract; the block is written within its size.
        unsafe {
            let p = ServerAlloc.alloc(layout);
            assert!(!p.is_null());
            ptr::write_bytes(p, 1, layout.size());
            p
        }
    }
}
