//! The GPU index backend against the batch contract and the model, on a real GPU.
//!
//! Every test that needs a GPU is ignored by default (CI has none); on a machine with an NVIDIA
//! GPU, its driver and CUDA 13's NVRTC, run them with
//! `cargo test --release -p shale-cache --features gpu --test gpu_index -- --ignored`.
//! `SHALE_GPU_STRESS_OPS` sets the stress run's operation count (default [`STRESS_OPS`]).
#![cfg(feature = "gpu")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale_cache::index::contract::{self, KeySpace, RandomRun};
use shale_cache::index::gpu::GpuIndex;
use shale_cache::index::{BatchIndex, IndexBatch, IndexError, IndexResults};

/// Operations of the stress run: 10^8.
const STRESS_OPS: u64 = 100_000_000;

fn make(slots: usize) -> Box<dyn BatchIndex> {
    Box::new(GpuIndex::open(slots).unwrap_or_else(|e| panic!("the GPU index did not open: {e}")))
}

/// Where there is no GPU (CI), opening fails with an error that says why; where there is one,
/// the index opens and works. Never a panic, never a silent fallback.
#[test]
fn opening_without_a_gpu_is_a_clear_error() {
    match GpuIndex::open(1 << 12) {
        Ok(mut index) => {
            assert_eq!(index.name(), "gpu");
            let batch = IndexBatch {
                searches: vec![contract::key(1, 2)],
                ..IndexBatch::default()
            };
            let (_, results) =
                shale_cache::index::run_batch(&mut index, batch).expect("a batch on the GPU");
            assert_eq!(results.found, vec![[0, 0]]);
        }
        Err(IndexError::Unavailable(why)) => {
            eprintln!("the GPU index is unavailable here: {why}");
            assert!(
                why.contains("driver") || why.contains("device") || why.contains("NVRTC"),
                "the reason names nothing the user can act on: {why}"
            );
        }
        Err(other) => panic!("opening without a GPU gave {other:?}, not Unavailable"),
    }
}

macro_rules! gpu_contract_tests {
    ($($check:ident),* $(,)?) => {
        $(
            #[test]
            #[ignore = "needs an NVIDIA GPU with its driver and CUDA 13's NVRTC; run with --ignored there"]
            fn $check() {
                contract::$check(&mut make);
            }
        )*
    };
}

gpu_contract_tests!(
    searches_see_the_index_before_the_batch,
    deletes_apply_before_inserts,
    deletes_match_signature_and_location,
    inserts_replace_the_same_signature,
    one_entry_per_pair_and_signature,
    a_pair_holds_sixteen_signatures,
    location_zero_is_rejected,
    pipelining_keeps_submission_order,
    clear_empties_the_index,
    lossy_only_when_nearly_full,
    random_batches_in_a_crowded_table,
    random_batches_in_a_larger_table,
    random_batches_pipelined,
);

/// Counts the operations submitted through it.
struct Counting {
    inner: Box<dyn BatchIndex>,
    ops: Arc<AtomicU64>,
}

impl BatchIndex for Counting {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn slots(&self) -> usize {
        self.inner.slots()
    }
    fn max_in_flight(&self) -> usize {
        self.inner.max_in_flight()
    }
    fn max_batch_ops(&self) -> usize {
        self.inner.max_batch_ops()
    }
    fn submit(&mut self, batch: IndexBatch) -> Result<(), IndexError> {
        self.ops.fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.inner.submit(batch)
    }
    fn complete(&mut self) -> Result<Option<(IndexBatch, IndexResults)>, IndexError> {
        self.inner.complete()
    }
    fn recycle(&mut self, results: IndexResults) {
        self.inner.recycle(results)
    }
    fn clear(&mut self) -> Result<(), IndexError> {
        self.inner.clear()
    }
}

/// 10^8 random operations checked against the model: batch sizes mixed from a few to 2^17 of
/// each kind, tables small enough that inserts keep them full (churn, displacement chains and
/// lossy drops all the time), pipelined and one batch at a time, random and crowded keys.
#[test]
#[ignore = "needs an NVIDIA GPU with its driver and CUDA 13's NVRTC; run with --ignored there"]
fn stress_random_operations_against_the_model() {
    let target: u64 = std::env::var("SHALE_GPU_STRESS_OPS")
        .ok()
        .map(|v| v.parse().expect("SHALE_GPU_STRESS_OPS is a number"))
        .unwrap_or(STRESS_OPS);
    stress(&mut make, target);
}

/// Runs at least `target` random operations through backends from `make`, checked by the model.
fn stress(make: &mut dyn FnMut(usize) -> Box<dyn BatchIndex>, target: u64) {
    let started = std::time::Instant::now();
    let ops = Arc::new(AtomicU64::new(0));
    let mut counted = |slots: usize| -> Box<dyn BatchIndex> {
        Box::new(Counting {
            inner: make(slots),
            ops: ops.clone(),
        })
    };
    // (slots, keys, max ops per kind, pipelined): the largest batches hold up to 2^17 inserts
    // against a table of 2^16 slots.
    let rounds: [(usize, KeySpace, usize, bool); 6] = [
        (1 << 16, KeySpace::Random, 1 << 17, true),
        (1 << 16, KeySpace::Random, 1 << 12, true),
        (1 << 14, KeySpace::Random, 1 << 10, false),
        (
            1 << 12,
            KeySpace::Crowded {
                buckets: 256,
                sigs: 64,
            },
            1 << 9,
            true,
        ),
        (1 << 16, KeySpace::Random, 1 << 15, false),
        (
            256,
            KeySpace::Crowded {
                buckets: 24,
                sigs: 40,
            },
            48,
            true,
        ),
    ];
    let mut lossy = 0;
    let mut round = 0u64;
    while ops.load(Ordering::Relaxed) < target {
        let (slots, keys, max_ops, pipelined) = rounds[round as usize % rounds.len()];
        // Each configuration gets an equal share of the operations; a batch averages about
        // 1.25 * max_ops of them.
        let share = target / rounds.len() as u64;
        let batches = ((share / (max_ops as u64 * 5 / 4).max(1)) as usize).clamp(16, 50_000);
        let run = RandomRun {
            slots,
            keys,
            batches,
            max_ops,
            pipelined,
            seed: 0x5eed_0000 + round,
        };
        lossy += contract::random_batches(&mut counted, run);
        eprintln!(
            "stress round {round}: {slots} slots, {keys:?}, up to {max_ops} ops of each kind, {batches} batches, \
             pipelined {pipelined}: {} ops so far, {:.1} s",
            ops.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        );
        round += 1;
    }
    let done = ops.load(Ordering::Relaxed);
    println!("stress: {done} operations in {round} rounds, {lossy} lossy drops, all checked against the model");
    assert!(done >= target);
    assert!(
        lossy > 0,
        "the stress run never filled a table: it did not exercise lossy inserts"
    );
}

/// A table of 2^27 slots (1 GiB) filled to 90% through large batches: nothing is lost before
/// the table is nearly full, and every entry held is found.
#[test]
#[ignore = "needs an NVIDIA GPU with its driver and CUDA 13's NVRTC; run with --ignored there"]
fn a_large_table_fills_to_ninety_percent() {
    let mut index = GpuIndex::open(1 << 27).expect("open");
    let slots = index.slots();
    let mut rng = contract::Rng::new(0x1a29e);
    let mut keys = Vec::with_capacity(slots);
    let mut lossy = 0;
    let mut displaced = 0;
    let batch_size = 1 << 22;
    while keys.len() < slots * 9 / 10 {
        let n = batch_size.min(slots * 9 / 10 - keys.len());
        let start = keys.len() as u32;
        let inserts: Vec<_> = (0..n as u32)
            .map(|i| (shale_cache::index::KeyHash(rng.next_u64()), start + i + 1))
            .collect();
        keys.extend(inserts.iter().map(|&(k, _)| k));
        let (_, results) = shale_cache::index::run_batch(
            &mut index,
            IndexBatch {
                inserts,
                ..Default::default()
            },
        )
        .expect("insert batch");
        if keys.len() <= slots / 2 {
            assert_eq!(results.lossy, 0, "drops at {} of {slots} slots", keys.len());
        }
        lossy += results.lossy;
        displaced += results.displaced.len();
    }
    let mut lost = 0;
    for (chunk_index, chunk) in keys.chunks(batch_size).enumerate() {
        let batch = IndexBatch {
            searches: chunk.to_vec(),
            ..Default::default()
        };
        let (_, results) = shale_cache::index::run_batch(&mut index, batch).expect("search batch");
        for (i, found) in results.found.iter().enumerate() {
            let want = (chunk_index * batch_size + i + 1) as u32;
            match *found {
                [l, 0] | [0, l] if l == want => {}
                // Dropped, or replaced by a later key of the same pair and signature.
                [l, 0] | [0, l] => lost += usize::from(l != want),
                other => panic!(
                    "key {} found {other:?}: two locations",
                    chunk_index * batch_size + i
                ),
            }
        }
    }
    // Every key no longer found left the index through exactly one reported displacement.
    assert_eq!(
        lost, displaced,
        "{lost} keys lost, {displaced} displacements reported ({lossy} lossy)"
    );
    println!("2^27 slots at 90%: {lossy} lossy drops, {displaced} displaced in all");
}
