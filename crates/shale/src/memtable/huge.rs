//! Memory for the memtable's large, randomly accessed structures (arena chunks, the point index,
//! the FloDB membuffer), mapped straight from the kernel and advised as transparent huge pages.
//!
//! Each of these is read at random addresses, so with 4 KiB pages nearly every access also misses
//! the TLB. Huge pages only back a region advised before its pages are first touched, and the
//! global allocator cannot promise that: an allocator such as mimalloc hands out large blocks from
//! memory it has already touched. A fresh anonymous mapping, aligned to the huge page size and
//! advised at once, gets huge pages wherever the kernel has them; where it does not, nothing
//! changes but speed. Fresh mappings are zeroed, so [`HugeSlice::zeroed`] costs no writes.
//! Elsewhere (and under Miri, which models no `madvise`) a region is a zeroed allocation with the
//! same alignment.

use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

/// The x86-64 huge page size: regions are aligned to it.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// An owned region of zeroed memory, aligned to [`HUGE_PAGE`], freed on drop.
pub(crate) struct Pages {
    // INVARIANT: `ptr .. ptr + len` is a live region this value owns, released only in `Drop`.
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is plain memory owned exclusively, like a `Box<[u8]>`.
unsafe impl Send for Pages {}
// SAFETY: as above; shared access only reads the pointer.
unsafe impl Sync for Pages {}

impl Pages {
    /// `len` zeroed bytes (`len > 0`). Aborts the process when the system is out of memory, like
    /// any Rust allocation.
    pub(crate) fn zeroed(len: usize) -> Pages {
        assert!(len > 0, "empty region");
        let ptr = map_aligned(len).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(len, HUGE_PAGE).expect("region layout"),
            )
        });
        Pages { ptr, len }
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        unmap(self.ptr, self.len);
    }
}

/// Maps `len` bytes aligned to [`HUGE_PAGE`]: maps a huge page more than asked, trims the ends
/// to the alignment, and advises the rest as huge pages before anything touches it.
#[cfg(all(unix, not(miri)))]
fn map_aligned(len: usize) -> Option<NonNull<u8>> {
    let len = len.next_multiple_of(4096);
    let over = len.checked_add(HUGE_PAGE)?;
    // SAFETY: a fresh private anonymous mapping at an address of the kernel's choosing; the
    // result is checked against MAP_FAILED before use.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let base = raw as usize;
    let start = base.next_multiple_of(HUGE_PAGE);
    let (head, tail) = (start - base, base + over - (start + len));
    // SAFETY: both ranges lie inside the mapping just made and outside `start .. start + len`;
    // madvise only changes how the kernel backs the kept range, never its contents.
    unsafe {
        if head > 0 {
            libc::munmap(base as *mut libc::c_void, head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        #[cfg(target_os = "linux")]
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    NonNull::new(start as *mut u8)
}

#[cfg(all(unix, not(miri)))]
fn unmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY: `ptr .. ptr + len` (rounded up to whole pages, as mapped) is a mapping made by
    // `map_aligned` and released once, here.
    unsafe {
        libc::munmap(
            ptr.as_ptr() as *mut libc::c_void,
            len.next_multiple_of(4096),
        )
    };
}

#[cfg(any(not(unix), miri))]
fn map_aligned(len: usize) -> Option<NonNull<u8>> {
    let layout = std::alloc::Layout::from_size_align(len, HUGE_PAGE).ok()?;
    // SAFETY: the layout has a non-zero size (`Pages::zeroed` checks).
    NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
}

#[cfg(any(not(unix), miri))]
fn unmap(ptr: NonNull<u8>, len: usize) {
    let layout = std::alloc::Layout::from_size_align(len, HUGE_PAGE).expect("region layout");
    // SAFETY: allocated by `map_aligned` with this layout, freed once, here.
    unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
}

/// A fixed-length slice of `T` in [`Pages`].
pub(crate) struct HugeSlice<T> {
    // INVARIANT: `pages` holds `len` initialized `T`s from its start.
    pages: Pages,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: a `HugeSlice<T>` owns its `T`s like a `Box<[T]>`.
unsafe impl<T: Send> Send for HugeSlice<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for HugeSlice<T> {}

impl<T> HugeSlice<T> {
    /// `len` elements (`len > 0`), element `i` being `init(i)`.
    pub(crate) fn new(len: usize, mut init: impl FnMut(usize) -> T) -> HugeSlice<T> {
        assert!(std::mem::align_of::<T>() <= HUGE_PAGE && std::mem::size_of::<T>() > 0);
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("slice size");
        let pages = Pages::zeroed(bytes);
        let base = pages.as_ptr() as *mut T;
        for i in 0..len {
            // SAFETY: `i < len`, so the slot lies inside the region, which is aligned for `T`;
            // each slot is written once, before the slice is handed out.
            unsafe { base.add(i).write(init(i)) };
        }
        HugeSlice {
            pages,
            len,
            _owns: PhantomData,
        }
    }

    /// `len` elements (`len > 0`) whose bytes are all zero, touching no page.
    ///
    /// # Safety
    /// All-zero bytes are a valid `T` (as for `AtomicU64`).
    // Loom's atomics are not valid zeroed: `sync::zeroed_u64_slab` builds them instead.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn zeroed(len: usize) -> HugeSlice<T> {
        assert!(std::mem::align_of::<T>() <= HUGE_PAGE && std::mem::size_of::<T>() > 0);
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("slice size");
        HugeSlice {
            pages: Pages::zeroed(bytes),
            len,
            _owns: PhantomData,
        }
    }
}

impl<T> Deref for HugeSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: by the invariant, the region holds `len` initialized `T`s, aligned.
        unsafe { std::slice::from_raw_parts(self.pages.as_ptr() as *const T, self.len) }
    }
}

impl<T> Drop for HugeSlice<T> {
    fn drop(&mut self) {
        // SAFETY: the elements are initialized (invariant) and dropped once, here; the pages are
        // released after, by `Pages::drop`.
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                self.pages.as_ptr() as *mut T,
                self.len,
            ))
        };
    }
}

/// A fixed-length slice in a [`HugeSlice`] when it spans at least a huge page, on the heap
/// otherwise (a small table gains nothing from a mapping of its own).
pub(crate) enum Slab<T> {
    Heap(Box<[T]>),
    Huge(HugeSlice<T>),
}

impl<T> Slab<T> {
    /// `len` elements (`len > 0`), element `i` being `init(i)`.
    pub(crate) fn new(len: usize, init: impl FnMut(usize) -> T) -> Slab<T> {
        if len.saturating_mul(std::mem::size_of::<T>()) >= HUGE_PAGE {
            Slab::Huge(HugeSlice::new(len, init))
        } else {
            Slab::Heap((0..len).map(init).collect())
        }
    }

    /// `len` elements (`len > 0`) whose bytes are all zero; a huge slice touches no page.
    ///
    /// # Safety
    /// All-zero bytes are a valid `T`.
    // Loom's atomics are not valid zeroed: `sync::zeroed_u64_slab` builds them instead.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn zeroed(len: usize) -> Slab<T> {
        if len.saturating_mul(std::mem::size_of::<T>()) >= HUGE_PAGE {
            // SAFETY: the caller's contract.
            Slab::Huge(unsafe { HugeSlice::zeroed(len) })
        } else {
            // SAFETY: the caller's contract.
            Slab::Heap((0..len).map(|_| unsafe { std::mem::zeroed() }).collect())
        }
    }
}

impl<T> Deref for Slab<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Slab::Heap(b) => b,
            Slab::Huge(h) => h,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn regions_are_aligned_zeroed_and_writable() {
        for len in [1, 4096, HUGE_PAGE, 3 * HUGE_PAGE + 5] {
            let pages = Pages::zeroed(len);
            assert_eq!(pages.as_ptr() as usize % HUGE_PAGE, 0);
            // SAFETY: the region holds `len` bytes.
            let bytes = unsafe { std::slice::from_raw_parts_mut(pages.as_ptr(), len) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes.fill(0xab);
        }
    }

    #[test]
    fn slices_hold_their_elements_and_drop_them() {
        let counted = std::rc::Rc::new(());
        let s = HugeSlice::new(1000, |i| (i, counted.clone()));
        assert_eq!(s.len(), 1000);
        assert_eq!(s[999].0, 999);
        assert_eq!(std::rc::Rc::strong_count(&counted), 1001);
        drop(s);
        assert_eq!(std::rc::Rc::strong_count(&counted), 1);
        // SAFETY: all-zero bytes are a valid AtomicU64.
        let z = unsafe { HugeSlice::<AtomicU64>::zeroed(1 << 18) };
        assert!(z.iter().all(|v| v.load(Ordering::Relaxed) == 0));
        z[5].store(7, Ordering::Relaxed);
        assert_eq!(z[5].load(Ordering::Relaxed), 7);
    }
}
