//! The bytes of one cached item in slab memory: a 32-byte header, the key, the value.
//!
//! ```text
//! 0       8            16      20         24       26     27    28         32          32+key_len
//! | cas   | expire_ms  | flags | value_len| key_len| state| pad | access_s | key ...   | value ...
//! ```
//! All fields little-endian as the CPU stores them (the arena never leaves the process).
//! `state` holds memcached's per-item marks ([`FETCHED`], [`TOKEN_SENT`], [`STALE`]); `access_s`
//! the cache-clock second the item was last read, kept as coarsely as memcached keeps its item
//! time ([`ACCESS_UPDATE_S`]).
//!
//! # Concurrency contract
//! An item is written whole by the thread that allocated its slot, before its location is handed
//! to the scheduler; from then on it is immutable except three atomics: `expire_ms` (TOUCH,
//! EXPIRE), `state` and `access_s` (readers mark what they did; a mark lost to a race between two
//! readers costs only the accuracy of a statistic or of a meta flag, as in memcached).
//! Its slot is reused only after the index no longer points at it and every thread that might
//! have read the location has passed a quiescent point ([`crate::epoch`]). So readers see whole,
//! stable items without locks.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Bytes before the key.
pub const HEADER_LEN: usize = 32;

/// `expire_ms` of an item that never expires.
pub const NEVER: u64 = 0;

/// `state`: the item has been read (memcached's `ITEM_FETCHED`; meta `h`, `fetch=yes`).
pub const FETCHED: u8 = 1;
/// `state`: a meta get has handed out the right to recache it (memcached's `ITEM_TOKEN_SENT`:
/// the `W` flag was sent once; later readers see `Z`).
pub const TOKEN_SENT: u8 = 2;
/// `state`: invalidated (`md <key> I`, `ms ... I` with an older CAS): still served, flagged `X`.
pub const STALE: u8 = 4;
/// `state`: stored by a meta command with a base64 key (`b`): meta replies show its key in
/// base64 (memcached's `ITEM_KEY_BINARY`).
pub const BINARY_KEY: u8 = 8;

/// A read moves `access_s` only when it is at least this many seconds old (memcached's
/// `ITEM_UPDATE_INTERVAL`): the header's cache line is not written on every hit.
pub const ACCESS_UPDATE_S: u32 = 60;

#[repr(C)]
struct Header {
    cas: u64,
    expire_ms: AtomicU64,
    flags: u32,
    value_len: u32,
    key_len: u16,
    state: AtomicU8,
    _pad: u8,
    access_s: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Header>() == HEADER_LEN);

/// Bytes an item of this key and value takes.
#[inline]
pub fn item_len(key_len: usize, value_len: usize) -> usize {
    HEADER_LEN + key_len + value_len
}

/// What a new item holds besides its key and value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemMeta {
    /// Unique version, for memcached's `gets`/`cas`.
    pub cas: u64,
    /// When it expires, in the cache clock's milliseconds; [`NEVER`] if it does not.
    pub expire_ms: u64,
    /// memcached's opaque client flags.
    pub flags: u32,
    /// Marks it starts with ([`TOKEN_SENT`], [`STALE`]).
    pub state: u8,
    /// The cache-clock second it counts as last read (its store).
    pub access_s: u32,
}

/// A view of an item in slab memory, valid while the reading thread stays pinned.
#[derive(Clone, Copy)]
pub struct ItemRef<'a> {
    header: &'a Header,
    key: &'a [u8],
    value: &'a [u8],
}

impl<'a> ItemRef<'a> {
    /// Reads the item at `ptr`.
    ///
    /// # Safety
    /// `ptr` is 8-byte aligned and points at a slot of at least `capacity` bytes holding a
    /// complete item (written by [`write`] and published, per the module contract), which is not
    /// reused for `'a`. A header whose lengths exceed `capacity` gives `None`.
    #[inline]
    pub unsafe fn at(ptr: *const u8, capacity: usize) -> Option<ItemRef<'a>> {
        // SAFETY: the caller guarantees an aligned, initialised header that stays put for 'a.
        let header = unsafe { &*(ptr as *const Header) };
        let key_len = usize::from(header.key_len);
        let value_len = header.value_len as usize;
        if item_len(key_len, value_len) > capacity {
            return None;
        }
        // SAFETY: both ranges lie inside the slot (checked above), which holds the written item.
        let (key, value) = unsafe {
            (
                std::slice::from_raw_parts(ptr.add(HEADER_LEN), key_len),
                std::slice::from_raw_parts(ptr.add(HEADER_LEN + key_len), value_len),
            )
        };
        Some(ItemRef { header, key, value })
    }

    /// The key.
    #[inline]
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// The value.
    #[inline]
    pub fn value(&self) -> &'a [u8] {
        self.value
    }

    /// The memcached flags.
    #[inline]
    pub fn flags(&self) -> u32 {
        self.header.flags
    }

    /// The CAS version.
    #[inline]
    pub fn cas(&self) -> u64 {
        self.header.cas
    }

    /// When it expires ([`NEVER`] if it does not).
    #[inline]
    pub fn expire_ms(&self) -> u64 {
        self.header.expire_ms.load(Ordering::Relaxed)
    }

    /// Whether it has expired at `now_ms`.
    #[inline]
    pub fn expired(&self, now_ms: u64) -> bool {
        let at = self.expire_ms();
        at != NEVER && at <= now_ms
    }

    /// Changes when it expires (TOUCH, EXPIRE).
    #[inline]
    pub fn set_expire_ms(&self, at: u64) {
        self.header.expire_ms.store(at, Ordering::Relaxed);
    }

    /// Its marks ([`FETCHED`], [`TOKEN_SENT`], [`STALE`]).
    #[inline]
    pub fn state(&self) -> u8 {
        self.header.state.load(Ordering::Relaxed)
    }

    /// Adds marks; returns the marks it had before.
    #[inline]
    pub fn mark(&self, marks: u8) -> u8 {
        let before = self.state();
        if before & marks != marks {
            self.header.state.fetch_or(marks, Ordering::Relaxed);
        }
        before
    }

    /// The cache-clock second it was last read (or stored).
    #[inline]
    pub fn access_s(&self) -> u32 {
        self.header.access_s.load(Ordering::Relaxed)
    }

    /// Records a read at `now_s`: marks it [`FETCHED`] and moves its access time if that is
    /// [`ACCESS_UPDATE_S`] old. Returns whether it had been read before.
    #[inline]
    pub fn record_read(&self, now_s: u32) -> bool {
        if now_s.wrapping_sub(self.access_s()) >= ACCESS_UPDATE_S {
            self.header.access_s.store(now_s, Ordering::Relaxed);
        }
        self.mark(FETCHED) & FETCHED != 0
    }
}

/// Writes a whole item at `ptr`; the value is the concatenation of `value_parts`.
///
/// # Safety
/// `ptr` is 8-byte aligned and points at a slot of at least [`item_len`] bytes that no other
/// thread reads or writes until it is published.
pub unsafe fn write(ptr: *mut u8, key: &[u8], value_parts: &[&[u8]], meta: ItemMeta) {
    let value_len: usize = value_parts.iter().map(|p| p.len()).sum();
    let header = Header {
        cas: meta.cas,
        expire_ms: AtomicU64::new(meta.expire_ms),
        flags: meta.flags,
        value_len: value_len as u32,
        key_len: key.len() as u16,
        state: AtomicU8::new(meta.state),
        _pad: 0,
        access_s: AtomicU32::new(meta.access_s),
    };
    // SAFETY: the caller gives exclusive access to a large enough, aligned slot.
    unsafe {
        std::ptr::write(ptr as *mut Header, header);
        let mut at = ptr.add(HEADER_LEN);
        std::ptr::copy_nonoverlapping(key.as_ptr(), at, key.len());
        at = at.add(key.len());
        for part in value_parts {
            std::ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
            at = at.add(part.len());
        }
    }
}
