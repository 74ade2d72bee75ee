use std::io::{self, Write};

use super::*;
use crate::item::{self, item_len, ItemMeta};

/// Items written into an aligned arena, as slab memory holds them.
struct Arena {
    words: Vec<u64>,
    starts: Vec<usize>,
}

impl Arena {
    fn new(values: &[Vec<u8>]) -> Arena {
        let mut words = Vec::new();
        let mut starts = Vec::new();
        for (i, value) in values.iter().enumerate() {
            let key = format!("k{i}");
            let len = item_len(key.len(), value.len());
            starts.push(words.len());
            words.resize(words.len() + len.div_ceil(8), 0);
            let at = starts[i];
            // SAFETY: the slot is 8-byte aligned, `len` bytes long and ours alone.
            unsafe {
                item::write(
                    words[at..].as_mut_ptr() as *mut u8,
                    key.as_bytes(),
                    &[value],
                    ItemMeta::default(),
                )
            };
        }
        Arena { words, starts }
    }

    fn item(&self, i: usize) -> ItemRef<'_> {
        let at = self.starts[i];
        let capacity = (self.words.len() - at) * 8;
        // SAFETY: an item was written whole at this aligned start and the arena outlives it.
        unsafe { ItemRef::at(self.words[at..].as_ptr() as *const u8, capacity) }.expect("an item")
    }
}

/// Takes at most `step(call)` bytes per call, or refuses with `WouldBlock` when that is zero.
struct Trickle<F: FnMut(usize) -> usize> {
    got: Vec<u8>,
    calls: usize,
    step: F,
}

impl<F: FnMut(usize) -> usize> Write for Trickle<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let mut room = (self.step)(self.calls);
        self.calls += 1;
        if room == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut n = 0;
        for buf in bufs {
            let take = buf.len().min(room);
            self.got.extend_from_slice(&buf[..take]);
            n += take;
            room -= take;
            if room == 0 {
                break;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A small deterministic generator (xorshift).
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// Replies of `values` as a memcached-like stream built into `out`; the bytes it must send.
fn build(out: &mut Output, arena: &Arena, values: &[Vec<u8>]) -> Vec<u8> {
    let mut want = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let head = format!("VALUE k{i} 0 {}\r\n", value.len());
        out.extend_from_slice(head.as_bytes());
        out.value(&arena.item(i));
        out.extend_from_slice(b"\r\n");
        want.extend_from_slice(head.as_bytes());
        want.extend_from_slice(value);
        want.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"END\r\n");
    want.extend_from_slice(b"END\r\n");
    want
}

fn values(next: &mut impl FnMut() -> u64, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let len = match next() % 4 {
                0 => (next() % LEND_AT_LEAST as u64) as usize,
                1 => LEND_AT_LEAST,
                _ => LEND_AT_LEAST + (next() % 3000) as usize,
            };
            (0..len).map(|j| (i * 31 + j) as u8).collect()
        })
        .collect()
}

#[test]
fn a_vectored_output_sends_the_stream_in_order_however_the_socket_cuts_it() {
    let mut next = rng(0x5eed);
    for case in 0..300 {
        let count = 1 + (next() % 300) as usize;
        let values = values(&mut next, count);
        let arena = Arena::new(&values);
        let mut out = Output::default();
        let want = build(&mut out, &arena, &values);
        assert_eq!(out.len(), want.len(), "case {case}: unsent length");
        let max = 1 + (next() % 5000) as usize;
        let mut cut = rng(next());
        let mut socket = Trickle {
            got: Vec::new(),
            calls: 0,
            step: move |_| (cut() % (max as u64 + 1)) as usize,
        };
        while !out.is_empty() {
            let before = out.len();
            match out.write_to(&mut socket) {
                Ok(n) => assert_eq!(out.len(), before - n, "case {case}"),
                Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
            }
            assert!(socket.calls < 1_000_000, "case {case}: no progress");
        }
        assert!(socket.got == want, "case {case}: the stream differs");
    }
}

#[test]
fn what_the_socket_did_not_take_is_kept_as_own_bytes_when_the_round_ends() {
    let mut next = rng(0xc0ffee);
    for case in 0..300 {
        let count = 1 + (next() % 40) as usize;
        let values = values(&mut next, count);
        let arena = Arena::new(&values);
        let mut out = Output::default();
        let want = build(&mut out, &arena, &values);
        let first = (next() % (want.len() as u64 + 1)) as usize;
        let mut socket = Trickle {
            got: Vec::new(),
            calls: 0,
            step: |call| if call == 0 { first } else { 0 },
        };
        let _ = out.write_to(&mut socket);
        out.keep();
        assert!(out.lent.is_empty(), "case {case}: still lending");
        assert_eq!(out.lent_len, 0);
        // The items may be reused now: what is left must not read them.
        drop(arena);
        let mut rest = socket.got;
        rest.extend_from_slice(&out.bytes);
        assert!(
            rest == want,
            "case {case}: sent and kept differ from the stream"
        );
    }
}

#[test]
fn short_values_are_copied_and_long_ones_lent() {
    let values = vec![vec![1u8; LEND_AT_LEAST - 1], vec![2u8; LEND_AT_LEAST]];
    let arena = Arena::new(&values);
    let mut out = Output::default();
    out.value(&arena.item(0));
    assert_eq!(out.bytes.len(), LEND_AT_LEAST - 1);
    assert!(out.lent.is_empty());
    out.value(&arena.item(1));
    assert_eq!(out.bytes.len(), LEND_AT_LEAST - 1);
    assert_eq!(out.lent.len(), 1);
    assert_eq!(out.len(), 2 * LEND_AT_LEAST - 1);
    out.clear();
    assert!(out.is_empty());
    assert!(out.lent.is_empty());
}
