//! Where a batch's arrays lie in the buffers copied to and from the GPU.
//!
//! A batch crosses the bus as one copy each way. Copied in: the search keys, delete keys and
//! insert keys (u64 each), then the delete and insert locations (u32 each). Copied out: the count
//! of lossy inserts (u32), one `(location, location)` pair per search (u32 each), then one
//! displaced location per insert (0 where none). Every array starts on an [`ALIGN`]-byte
//! boundary, so the kernels' loads stay aligned and coalesced. The GPU-only scratch of the insert
//! passes has its layout here too. This module is the only one that knows these offsets; the
//! kernels get pointers to each array.

use std::mem::MaybeUninit;

use crate::index::{IndexBatch, IndexResults};

/// Alignment of every array in the copied buffers (bytes).
pub(crate) const ALIGN: usize = 256;

/// Offsets (bytes) of a batch's arrays in the copied buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BatchLayout {
    pub searches: usize,
    pub deletes: usize,
    pub inserts: usize,
    pub search_keys: usize,
    pub delete_keys: usize,
    pub insert_keys: usize,
    pub delete_locations: usize,
    pub insert_locations: usize,
    /// Bytes copied in.
    pub in_bytes: usize,
    pub lossy: usize,
    pub found: usize,
    pub displaced: usize,
    /// Bytes copied out.
    pub out_bytes: usize,
}

fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

impl BatchLayout {
    pub fn new(searches: usize, deletes: usize, inserts: usize) -> Self {
        let search_keys = 0;
        let delete_keys = align_up(search_keys + searches * 8);
        let insert_keys = align_up(delete_keys + deletes * 8);
        let delete_locations = align_up(insert_keys + inserts * 8);
        let insert_locations = align_up(delete_locations + deletes * 4);
        let in_bytes = align_up(insert_locations + inserts * 4);
        let lossy = 0;
        let found = align_up(lossy + 4);
        let displaced = align_up(found + searches * 8);
        let out_bytes = align_up(displaced + inserts * 4);
        BatchLayout {
            searches,
            deletes,
            inserts,
            search_keys,
            delete_keys,
            insert_keys,
            delete_locations,
            insert_locations,
            in_bytes,
            lossy,
            found,
            displaced,
            out_bytes,
        }
    }

    pub fn of(batch: &IndexBatch) -> Self {
        Self::new(
            batch.searches.len(),
            batch.deletes.len(),
            batch.inserts.len(),
        )
    }

    /// Writes `batch` into `input`, which holds at least `in_bytes` and is [`ALIGN`]-aligned.
    /// Batches of [`PARALLEL_MIN_OPS`] operations or more are written by `threads` threads.
    pub fn pack(&self, batch: &IndexBatch, input: &mut [u8], threads: usize) {
        assert!(
            input.len() >= self.in_bytes,
            "input buffer smaller than the batch"
        );
        assert_eq!(
            input.as_ptr() as usize % ALIGN,
            0,
            "input buffer misaligned"
        );
        // The five arrays as disjoint slices, in offset order.
        let (region, rest) = input.split_at_mut(self.delete_keys);
        let search_keys = words_mut::<u64>(region, 0, self.searches);
        let (region, rest) = rest.split_at_mut(self.insert_keys - self.delete_keys);
        let delete_keys = words_mut::<u64>(region, 0, self.deletes);
        let (region, rest) = rest.split_at_mut(self.delete_locations - self.insert_keys);
        let insert_keys = words_mut::<u64>(region, 0, self.inserts);
        let (region, rest) = rest.split_at_mut(self.insert_locations - self.delete_locations);
        let delete_locations = words_mut::<u32>(region, 0, self.deletes);
        let insert_locations = words_mut::<u32>(rest, 0, self.inserts);

        let threads = if batch.len() >= PARALLEL_MIN_OPS {
            threads.max(1)
        } else {
            1
        };
        let mut parts = Parts::new(threads);
        parts.add(search_keys, &batch.searches, |k| k.0);
        parts.add(delete_keys, &batch.deletes, |(k, _)| k.0);
        parts.add(insert_keys, &batch.inserts, |(k, _)| k.0);
        parts.add(delete_locations, &batch.deletes, |(_, l)| *l);
        parts.add(insert_locations, &batch.inserts, |(_, l)| *l);
        parts.run();
    }

    /// Reads the results out of `output` into `results` (emptied first): the search answers,
    /// the displaced locations (zeros dropped) and the lossy count. Large batches are read by
    /// `threads` threads, as in [`Self::pack`].
    pub fn unpack(&self, output: &[u8], results: &mut IndexResults, threads: usize) {
        assert!(
            output.len() >= self.out_bytes,
            "output buffer smaller than the batch"
        );
        assert_eq!(
            output.as_ptr() as usize % ALIGN,
            0,
            "output buffer misaligned"
        );
        results.clear();
        let found = words::<[u32; 2]>(output, self.found, self.searches);
        let threads = if self.searches >= PARALLEL_MIN_OPS {
            threads.max(1)
        } else {
            1
        };
        if threads == 1 {
            results.found.extend_from_slice(found);
        } else {
            results.found.reserve(found.len());
            let spare = &mut results.found.spare_capacity_mut()[..found.len()];
            let mut parts = Parts::new(threads);
            parts.add(spare, found, |pair| MaybeUninit::new(*pair));
            parts.run();
            // SAFETY: the capacity was reserved, and the parts wrote every one of the first
            // `found.len()` elements (each chunk of `spare` is paired with an equal chunk of
            // `found`; `scope` joined every thread before `run` returned).
            unsafe { results.found.set_len(found.len()) };
        }
        let displaced = words::<u32>(output, self.displaced, self.inserts);
        results
            .displaced
            .extend(displaced.iter().copied().filter(|&location| location != 0));
        results.lossy = words::<u32>(output, self.lossy, 1)[0] as usize;
    }
}

/// Batches of at least this many operations are packed and unpacked by several threads: below
/// it, starting threads costs more than the copy.
pub(crate) const PARALLEL_MIN_OPS: usize = 1 << 17;

/// One contiguous piece of copying work: fill `dst[i] = f(&src[i])`.
type Piece<'a> = Box<dyn FnOnce() + Send + 'a>;

/// Copies split into `threads` shares of about equal size, each share one piece of every array.
struct Parts<'a> {
    shares: Vec<Vec<Piece<'a>>>,
}

impl<'a> Parts<'a> {
    fn new(threads: usize) -> Self {
        Parts {
            shares: (0..threads.max(1)).map(|_| Vec::new()).collect(),
        }
    }

    /// Adds `dst[i] = f(&src[i])` for every i, split across the shares.
    fn add<S: Sync, T: Send>(&mut self, dst: &'a mut [T], src: &'a [S], f: fn(&S) -> T) {
        let chunk = dst.len().div_ceil(self.shares.len()).max(1);
        for (share, (d, s)) in self
            .shares
            .iter_mut()
            .zip(dst.chunks_mut(chunk).zip(src.chunks(chunk)))
        {
            share.push(Box::new(move || {
                for (word, item) in d.iter_mut().zip(s) {
                    *word = f(item);
                }
            }));
        }
    }

    /// Runs every share, the first on this thread and the others on scoped threads.
    fn run(self) {
        let mut shares = self.shares.into_iter();
        let first = shares.next().unwrap_or_default();
        std::thread::scope(|scope| {
            for share in shares.filter(|share| !share.is_empty()) {
                scope.spawn(move || share.into_iter().for_each(|piece| piece()));
            }
            first.into_iter().for_each(|piece| piece());
        });
    }
}

/// Offsets (bytes) of the insert passes' scratch, which stays on the GPU: one pending flag per
/// insert, then the claim table of the election (keys u64, winners u32), `claims` entries each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ScratchLayout {
    pub pending: usize,
    pub claim_keys: usize,
    pub claim_jobs: usize,
    /// Entries of the claim table: a power of two, at least twice the inserts.
    pub claims: usize,
    pub bytes: usize,
}

impl ScratchLayout {
    pub fn new(inserts: usize) -> Self {
        let claims = (2 * inserts).max(2).next_power_of_two();
        let pending = 0;
        let claim_keys = align_up(pending + inserts * 4);
        let claim_jobs = align_up(claim_keys + claims * 8);
        let bytes = align_up(claim_jobs + claims * 4);
        ScratchLayout {
            pending,
            claim_keys,
            claim_jobs,
            claims,
            bytes,
        }
    }
}

/// Plain words that any bit pattern is a valid value of.
///
/// # Safety
/// Implementors must be `Copy` types without padding or invalid bit patterns.
unsafe trait Word: Copy {}
// SAFETY: integers and arrays of them have no padding and no invalid bit patterns.
unsafe impl Word for u64 {}
// SAFETY: as above.
unsafe impl Word for u32 {}
// SAFETY: as above.
unsafe impl Word for [u32; 2] {}

fn words_mut<T: Word>(bytes: &mut [u8], offset: usize, count: usize) -> &mut [T] {
    let region = &mut bytes[offset..offset + count * std::mem::size_of::<T>()];
    assert_eq!(region.as_ptr() as usize % std::mem::align_of::<T>(), 0);
    // SAFETY: the region is in bounds (sliced above), aligned for T (asserted), and T accepts any
    // bit pattern (Word).
    unsafe { std::slice::from_raw_parts_mut(region.as_mut_ptr().cast::<T>(), count) }
}

fn words<T: Word>(bytes: &[u8], offset: usize, count: usize) -> &[T] {
    let region = &bytes[offset..offset + count * std::mem::size_of::<T>()];
    assert_eq!(region.as_ptr() as usize % std::mem::align_of::<T>(), 0);
    // SAFETY: as in `words_mut`.
    unsafe { std::slice::from_raw_parts(region.as_ptr().cast::<T>(), count) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::KeyHash;

    /// One ALIGN-aligned block of a test buffer.
    #[derive(Clone, Copy)]
    #[repr(C, align(256))]
    struct Block([u8; ALIGN]);

    /// A zeroed byte buffer aligned like the pinned buffers.
    fn aligned(bytes: usize) -> Vec<Block> {
        vec![Block([0u8; ALIGN]); bytes.div_ceil(ALIGN).max(1)]
    }

    fn flat(buffer: &mut [Block]) -> &mut [u8] {
        let len = buffer.len() * ALIGN;
        // SAFETY: Block is ALIGN plain bytes with no padding (repr(C), size == align == ALIGN).
        unsafe { std::slice::from_raw_parts_mut(buffer.as_mut_ptr().cast::<u8>(), len) }
    }

    #[test]
    fn arrays_are_aligned_and_disjoint() {
        for (s, d, i) in [(0, 0, 0), (1, 0, 0), (0, 3, 5), (1000, 17, 33), (31, 1, 1)] {
            let l = BatchLayout::new(s, d, i);
            let starts = [
                l.search_keys,
                l.delete_keys,
                l.insert_keys,
                l.delete_locations,
                l.insert_locations,
            ];
            let ends = [
                s * 8,
                l.delete_keys + d * 8,
                l.insert_keys + i * 8,
                l.delete_locations + d * 4,
                l.insert_locations + i * 4,
            ];
            for k in 0..starts.len() {
                assert_eq!(starts[k] % ALIGN, 0);
                assert!(ends[k] <= l.in_bytes);
                if k + 1 < starts.len() {
                    assert!(ends[k] <= starts[k + 1]);
                }
            }
            assert_eq!(l.displaced % ALIGN, 0);
            assert!(l.lossy + 4 <= l.found);
            assert!(l.found + s * 8 <= l.displaced);
            let scratch = ScratchLayout::new(i);
            assert!(scratch.claims >= 2 * i && scratch.claims.is_power_of_two());
            assert!(scratch.pending + i * 4 <= scratch.claim_keys);
            assert!(scratch.claim_keys + scratch.claims * 8 <= scratch.claim_jobs);
            assert!(scratch.claim_jobs + scratch.claims * 4 <= scratch.bytes);
            assert!(l.displaced + i * 4 <= l.out_bytes);
        }
    }

    #[test]
    fn pack_places_every_key_and_location() {
        let batch = IndexBatch {
            searches: (1..=5u64).map(|k| KeyHash(k << 40 | k)).collect(),
            inserts: vec![
                (KeyHash(0xAAAA_0000_0000_0001), 7),
                (KeyHash(0xBBBB_0000_0000_0002), 9),
            ],
            deletes: vec![(KeyHash(0xCCCC_0000_0000_0003), 11)],
        };
        let l = BatchLayout::of(&batch);
        let mut buffer = aligned(l.in_bytes);
        let input = flat(&mut buffer);
        l.pack(&batch, input, 1);
        assert_eq!(
            words::<u64>(input, l.search_keys, 5),
            batch.searches.iter().map(|k| k.0).collect::<Vec<_>>()
        );
        assert_eq!(
            words::<u64>(input, l.insert_keys, 2),
            [0xAAAA_0000_0000_0001, 0xBBBB_0000_0000_0002]
        );
        assert_eq!(
            words::<u64>(input, l.delete_keys, 1),
            [0xCCCC_0000_0000_0003]
        );
        assert_eq!(words::<u32>(input, l.insert_locations, 2), [7, 9]);
        assert_eq!(words::<u32>(input, l.delete_locations, 1), [11]);
    }

    #[test]
    fn unpack_reads_pairs_and_drops_empty_displacements() {
        let l = BatchLayout::new(2, 0, 3);
        let mut buffer = aligned(l.out_bytes);
        let output = flat(&mut buffer);
        words_mut::<[u32; 2]>(output, l.found, 2).copy_from_slice(&[[1, 0], [0, 4]]);
        words_mut::<u32>(output, l.displaced, 3).copy_from_slice(&[0, 12, 0]);
        words_mut::<u32>(output, l.lossy, 1)[0] = 1;
        let mut results = IndexResults {
            found: vec![[9, 9]],
            displaced: vec![9],
            lossy: 9,
        };
        l.unpack(output, &mut results, 1);
        assert_eq!(results.found, vec![[1, 0], [0, 4]]);
        assert_eq!(results.displaced, vec![12]);
        assert_eq!(results.lossy, 1);
    }

    #[test]
    fn large_batches_pack_and_unpack_the_same_on_several_threads() {
        let n = PARALLEL_MIN_OPS + 77;
        let key = |i: usize| KeyHash((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let batch = IndexBatch {
            searches: (0..n).map(key).collect(),
            inserts: (0..n / 3).map(|i| (key(i + n), i as u32 + 1)).collect(),
            deletes: (0..n / 5).map(|i| (key(i + 2 * n), i as u32 + 7)).collect(),
        };
        let l = BatchLayout::of(&batch);
        let mut one = aligned(l.in_bytes);
        let mut four = aligned(l.in_bytes);
        l.pack(&batch, flat(&mut one), 1);
        l.pack(&batch, flat(&mut four), 4);
        assert!(
            flat(&mut one) == flat(&mut four),
            "packing on four threads differs"
        );

        let mut buffer = aligned(l.out_bytes);
        let output = flat(&mut buffer);
        for (i, pair) in words_mut::<[u32; 2]>(output, l.found, n)
            .iter_mut()
            .enumerate()
        {
            *pair = [i as u32, !(i as u32)];
        }
        let mut serial = IndexResults::default();
        let mut parallel = IndexResults {
            found: vec![[5, 5]; 3],
            ..IndexResults::default()
        };
        l.unpack(output, &mut serial, 1);
        l.unpack(output, &mut parallel, 4);
        assert_eq!(serial.found.len(), n);
        assert_eq!(serial, parallel);
    }
}
