//! A connection's unsent replies: bytes built for it, with the values of large items lent from
//! slab memory between them, sent with one vectored write. A lent value is copied once, by the
//! kernel, straight from its item, instead of first into the reply buffer (memcached sends its
//! values the same way).
//!
//! # Lifetime contract
//! A lent value points into slab memory, which stays readable only while the connection thread is
//! pinned ([`crate::cache::Worker::begin`] to [`crate::cache::Worker::end`]). The thread therefore
//! writes a round's replies before it unpins and then calls [`Output::keep`], which copies what
//! the socket did not take into the output's own bytes: outside that window an output lends
//! nothing.

use std::io::{self, IoSlice, Write};
use std::ops::{Deref, DerefMut};

use bytes::{Buf, BytesMut};

use crate::item::ItemRef;

/// Values at least this long are lent from their item; shorter ones are copied into the reply
/// (a copy of a short value costs less than a slot of the vectored write).
pub const LEND_AT_LEAST: usize = 256;

/// Slices handed to one vectored write at most (Linux takes up to 1024).
const SLICES_PER_WRITE: usize = 128;

/// See the module documentation. Dereferences to its own bytes, to which replies are only ever
/// appended.
#[derive(Debug)]
pub(crate) struct Output {
    bytes: BytesMut,
    /// Values at least this long are lent ([`LEND_AT_LEAST`], or never for a copying output).
    lend_at_least: usize,
    // INVARIANT: ordered by `at`, each `at <= bytes.len()`, none empty; empty outside a round's
    // reply-and-send window (see the module's lifetime contract).
    lent: Vec<Lent>,
    /// Sum of the lent lengths.
    lent_len: usize,
}

/// A value in slab memory that goes out just before `bytes[at..]`.
#[derive(Debug)]
struct Lent {
    at: usize,
    ptr: *const u8,
    len: usize,
}

impl Lent {
    fn slice(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` lies inside an item's value (a suffix of it once partly sent),
        // readable while the thread stays pinned, which the lifetime contract guarantees for
        // as long as the output lends it.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Default for Output {
    fn default() -> Output {
        Output {
            bytes: BytesMut::new(),
            lend_at_least: LEND_AT_LEAST,
            lent: Vec::new(),
            lent_len: 0,
        }
    }
}

impl Output {
    /// An output that copies every value, for replies that are not sent by [`Output::write_to`]
    /// (datagrams).
    pub(crate) fn copying() -> Output {
        Output {
            lend_at_least: usize::MAX,
            ..Output::default()
        }
    }

    /// Bytes not sent yet.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len() + self.lent_len
    }

    /// Whether everything was sent.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops everything unsent.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.lent.clear();
        self.lent_len = 0;
    }

    /// Appends `item`'s value: lent if it is long ([`LEND_AT_LEAST`]), else copied.
    pub(crate) fn value(&mut self, item: &ItemRef<'_>) {
        let value = item.value();
        if value.len() < self.lend_at_least {
            self.bytes.extend_from_slice(value);
            return;
        }
        self.lent.push(Lent {
            at: self.bytes.len(),
            ptr: value.as_ptr(),
            len: value.len(),
        });
        self.lent_len += value.len();
    }

    /// Writes as much as one (vectored) write takes and drops what was written.
    ///
    /// # Errors
    /// The writer's.
    pub(crate) fn write_to(&mut self, w: &mut impl Write) -> io::Result<usize> {
        if self.lent.is_empty() {
            let n = w.write(&self.bytes)?;
            self.bytes.advance(n);
            return Ok(n);
        }
        let n = {
            let mut slices = [IoSlice::new(&[]); SLICES_PER_WRITE];
            let mut used = 0;
            let mut from = 0;
            for lent in &self.lent {
                if used + 2 > SLICES_PER_WRITE {
                    break;
                }
                if lent.at > from {
                    slices[used] = IoSlice::new(&self.bytes[from..lent.at]);
                    used += 1;
                }
                slices[used] = IoSlice::new(lent.slice());
                used += 1;
                from = lent.at;
            }
            if used < SLICES_PER_WRITE && from < self.bytes.len() {
                slices[used] = IoSlice::new(&self.bytes[from..]);
                used += 1;
            }
            w.write_vectored(&slices[..used])?
        };
        self.consume(n);
        Ok(n)
    }

    /// Drops the first `n` unsent bytes.
    fn consume(&mut self, mut n: usize) {
        let mut own = 0;
        let mut whole = 0;
        loop {
            let next_at = self.lent.get(whole).map_or(self.bytes.len(), |l| l.at);
            if n < next_at - own {
                own += n;
                break;
            }
            n -= next_at - own;
            own = next_at;
            let Some(lent) = self.lent.get_mut(whole) else {
                break;
            };
            if n < lent.len {
                // SAFETY: `n < len`, so the new start lies inside the same value.
                lent.ptr = unsafe { lent.ptr.add(n) };
                lent.len -= n;
                self.lent_len -= n;
                break;
            }
            n -= lent.len;
            self.lent_len -= lent.len;
            whole += 1;
        }
        self.lent.drain(..whole);
        self.bytes.advance(own);
        for lent in &mut self.lent {
            lent.at -= own;
        }
    }

    /// Copies every lent value still unsent into the output's own bytes (the round is ending).
    pub(crate) fn keep(&mut self) {
        if self.lent.is_empty() {
            return;
        }
        let mut kept = BytesMut::with_capacity(self.len());
        let mut from = 0;
        for lent in &self.lent {
            kept.extend_from_slice(&self.bytes[from..lent.at]);
            kept.extend_from_slice(lent.slice());
            from = lent.at;
        }
        kept.extend_from_slice(&self.bytes[from..]);
        self.bytes = kept;
        self.lent.clear();
        self.lent_len = 0;
    }
}

impl Deref for Output {
    type Target = BytesMut;

    fn deref(&self) -> &BytesMut {
        &self.bytes
    }
}

impl DerefMut for Output {
    fn deref_mut(&mut self) -> &mut BytesMut {
        &mut self.bytes
    }
}

#[cfg(test)]
mod tests;
