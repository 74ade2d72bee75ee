//! Large zeroed memory regions straight from the kernel: the index table and the slab arena.
//!
//! Both are read at random addresses, so they are aligned to 2 MiB and advised as transparent huge
//! pages before anything touches them (with 4 KiB pages nearly every probe would also miss the
//! TLB). They are mapped without reserving swap, so a region costs resident memory only where it
//! has been touched: the arena can be mapped at `maxmemory` up front and grow into it. The index,
//! whose every bucket is as likely to be written as any other, is backed whole when it is made
//! ([`Region::prefault`]).

use std::io;
use std::ptr::NonNull;

/// Alignment of every region, the x86-64 huge page size.
pub const REGION_ALIGN: usize = 2 << 20;

/// An owned, zero-initialised, huge-page-aligned region of memory, unmapped on drop.
pub struct Region {
    // INVARIANT: `ptr .. ptr + len` is a mapping this value owns; `len` is a multiple of
    // REGION_ALIGN.
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is plain memory owned by this value; what is stored in it, and who may touch
// which bytes, is the owner's business (as for a `Box<[u8]>` shared through raw pointers).
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` only hands out the base pointer and the length.
unsafe impl Sync for Region {}

impl Region {
    /// Maps at least `len` zeroed bytes (rounded up to [`REGION_ALIGN`]).
    ///
    /// # Errors
    /// The kernel's error if the address space cannot be mapped.
    pub fn map(len: usize) -> io::Result<Region> {
        Region::map_with(len, true)
    }

    /// As [`Region::map`], advising huge pages only if `huge` (for measuring what they bring).
    ///
    /// # Errors
    /// The kernel's error if the address space cannot be mapped.
    pub fn map_with(len: usize, huge: bool) -> io::Result<Region> {
        let len = len.max(1).next_multiple_of(REGION_ALIGN);
        let over = len
            .checked_add(REGION_ALIGN)
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "region too large"))?;
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks; the result is
        // compared with MAP_FAILED before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                over,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = raw as usize;
        let start = base.next_multiple_of(REGION_ALIGN);
        let head = start - base;
        let tail = over - head - len;
        // SAFETY: the two trimmed ranges lie inside the mapping just made and outside the kept
        // `start .. start + len`; madvise changes only how the kernel backs the kept range.
        unsafe {
            if head > 0 {
                libc::munmap(base as *mut libc::c_void, head);
            }
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
            if huge {
                libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
        }
        let ptr = NonNull::new(start as *mut u8)
            .ok_or_else(|| io::Error::other("mmap returned a null region"))?;
        Ok(Region { ptr, len })
    }

    /// Backs every page of the region with memory now (the kernel zeroes them here rather than
    /// at each first touch). For a table read and written at random addresses from the start, as
    /// the index is: otherwise, for its first minutes under load, nearly every new key lands on an
    /// untouched huge page and the thread that wrote it waits while the kernel clears 2 MiB.
    ///
    /// # Errors
    /// The kernel's error if it cannot back the pages (out of memory).
    pub fn prefault(&mut self) -> io::Result<()> {
        // SAFETY: the range is this region's own mapping; MADV_POPULATE_WRITE only faults its
        // pages in, as writes of the bytes already there would.
        let done = unsafe {
            libc::madvise(
                self.ptr.as_ptr() as *mut libc::c_void,
                self.len,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if done == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(error);
        }
        // Kernels before 5.14 lack MADV_POPULATE_WRITE: touch one byte of every 4 KiB page.
        for offset in (0..self.len).step_by(4096) {
            // SAFETY: `offset` is inside the region, which `&mut self` holds exclusively; the byte
            // is written with the value it holds.
            unsafe {
                let byte = self.ptr.as_ptr().add(offset);
                byte.write_volatile(byte.read_volatile());
            }
        }
        Ok(())
    }

    /// The first byte.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes in the region.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: a region is at least [`REGION_ALIGN`]).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Gives `offset .. offset + len` back to the kernel: the bytes read as zero afterwards and
    /// cost no resident memory until touched again. Both ends are rounded inwards to 4 KiB.
    ///
    /// # Safety
    /// No other thread may read or write the range while this runs.
    pub unsafe fn discard(&self, offset: usize, len: usize) {
        let start = offset.next_multiple_of(4096);
        let end = (offset + len).min(self.len) & !4095;
        if end > start {
            // SAFETY: the range lies inside this region (clamped above); the caller guarantees no
            // concurrent access, and MADV_DONTNEED on a private anonymous mapping only zeroes it.
            unsafe {
                libc::madvise(
                    self.ptr.as_ptr().add(start) as *mut libc::c_void,
                    end - start,
                    libc::MADV_DONTNEED,
                );
            }
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `Region::map` with this length and is released once.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region").field("len", &self.len).finish()
    }
}

/// Asks the CPU to start loading the cache line at `ptr` (a hint: it never faults, whatever the
/// address).
#[inline(always)]
pub fn prefetch(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint that never faults and reads nothing the program sees.
    unsafe {
        std::arch::x86_64::_mm_prefetch(ptr as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}
