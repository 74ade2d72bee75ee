//! The GPU index against the CPU index on one machine: lookups, inserts and deletes per second
//! for batches of 1k to 4M operations on a table of 2^27 slots (1 GiB) half full.
//!
//! Rows, per batch size:
//! - `gpu kernel`: the kernel alone, timed with CUDA events (median of many batches);
//! - `gpu +copy`: copy-in, kernel and copy-out of one batch, events again (no overlap);
//! - `gpu pipe`: through `BatchIndex`, three batches in flight, host packing and unpacking
//!   included, wall clock (what the cache gets);
//! - `cpu 1`: the CPU backend on one thread; `cpu N`: N CPU backends on N threads, each owning
//!   1/N of the key space by the top bits of the bucket hash, wall clock. Each batch is split
//!   among them before the clock starts, as a NIC steering requests to cores would: this is the
//!   CPU's best case.
//!
//! Figures are millions of operations per second; `pipe/cpu` is `gpu pipe` over the better of
//! the two CPU rows. For inserts and deletes, `gpu pipe` runs insert and delete batches
//! alternately and reports their common rate; `95/5` batches hold 95% lookups and 5% inserts,
//! plus deletes of the entries one earlier batch inserted (evictions).
//!
//! GPU and CPU measurements alternate over `--rounds` rounds; each figure is the median of the
//! rounds. Run: `cargo bench -p shale-cache --features gpu --bench gpu_index -- [--quick]
//! [--rounds N] [--threads N] [--slots-log2 N] [--sizes N,N,..] [--host-threads N]`. Needs an NVIDIA GPU (it says so and fails
//! without one).

use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use shale_cache::index::contract::Rng;
use shale_cache::index::cpu::CpuIndex;
use shale_cache::index::gpu::GpuIndex;
use shale_cache::index::{run_batch, BatchIndex, IndexBatch, KeyHash, Location};

struct Options {
    slots_log2: u32,
    host_threads: Option<usize>,
    rounds: usize,
    threads: usize,
    batches: Vec<usize>,
    fill: f64,
}

fn options() -> Options {
    let mut o = Options {
        slots_log2: 27,
        host_threads: None,
        rounds: 3,
        threads: thread::available_parallelism().map_or(1, |n| n.get()),
        batches: vec![
            1 << 6,
            1 << 8,
            1 << 10,
            1 << 12,
            1 << 14,
            1 << 16,
            1 << 18,
            1 << 20,
            1 << 22,
        ],
        fill: 0.5,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = |i: usize| {
            args.get(i + 1)
                .unwrap_or_else(|| panic!("{} needs a value", args[i]))
                .clone()
        };
        match args[i].as_str() {
            "--quick" => {
                o.slots_log2 = 22;
                o.rounds = 1;
                o.batches = vec![1 << 10, 1 << 16, 1 << 20];
            }
            "--rounds" => {
                o.rounds = value(i).parse().expect("--rounds N");
                i += 1;
            }
            "--threads" => {
                o.threads = value(i).parse().expect("--threads N");
                i += 1;
            }
            "--slots-log2" => {
                o.slots_log2 = value(i).parse().expect("--slots-log2 N");
                i += 1;
            }
            "--host-threads" => {
                o.host_threads = Some(value(i).parse().expect("--host-threads N"));
                i += 1;
            }
            "--sizes" => {
                o.batches = value(i)
                    .split(',')
                    .map(|n| n.parse().expect("--sizes N,N,..."))
                    .collect();
                i += 1;
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
        i += 1;
    }
    o
}

/// N CPU backends on N threads, each owning the keys whose bucket hash's top bits name it.
struct ShardedCpu {
    workers: Vec<mpsc::Sender<IndexBatch>>,
    done: mpsc::Receiver<(usize, IndexBatch)>,
    shard_bits: u32,
}

impl ShardedCpu {
    fn new(threads: usize, slots: usize) -> ShardedCpu {
        let shard_bits = threads.next_power_of_two().trailing_zeros();
        let shards = 1usize << shard_bits;
        let (done_tx, done) = mpsc::channel();
        let mut workers = Vec::new();
        for shard in 0..shards {
            let (tx, rx) = mpsc::channel::<IndexBatch>();
            let done_tx = done_tx.clone();
            let mut index = CpuIndex::new(slots / shards).expect("cpu index");
            thread::spawn(move || {
                for batch in rx {
                    let (batch, results) = run_batch(&mut index, batch).expect("cpu batch");
                    index.recycle(results);
                    done_tx.send((shard, batch)).expect("done");
                }
            });
            workers.push(tx);
        }
        ShardedCpu {
            workers,
            done,
            shard_bits,
        }
    }

    fn shard(&self, key: KeyHash) -> usize {
        if self.shard_bits == 0 {
            0
        } else {
            (key.bucket_hash() >> (32 - self.shard_bits)) as usize
        }
    }

    /// `batch` split into one batch per shard.
    fn split(&self, batch: &IndexBatch) -> Vec<IndexBatch> {
        let mut parts = vec![IndexBatch::default(); self.workers.len()];
        for &k in &batch.searches {
            parts[self.shard(k)].searches.push(k);
        }
        for &(k, l) in &batch.inserts {
            parts[self.shard(k)].inserts.push((k, l));
        }
        for &(k, l) in &batch.deletes {
            parts[self.shard(k)].deletes.push((k, l));
        }
        parts
    }

    /// Runs one split batch on all shards at once; hands the parts back.
    fn run(&mut self, parts: Vec<IndexBatch>) -> Vec<IndexBatch> {
        for (worker, part) in self.workers.iter().zip(parts) {
            worker.send(part).expect("worker");
        }
        let mut back = vec![IndexBatch::default(); self.workers.len()];
        for _ in 0..self.workers.len() {
            let (shard, part) = self.done.recv().expect("worker done");
            back[shard] = part;
        }
        back
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Millions of operations per second.
fn mops(ops: usize, seconds: f64) -> f64 {
    ops as f64 / seconds / 1e6
}

struct Keys {
    held: Vec<KeyHash>,
    rng: Rng,
}

impl Keys {
    /// Half keys held by the index, half absent.
    fn lookups(&mut self, n: usize) -> Vec<KeyHash> {
        (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    self.held[self.rng.below(self.held.len())]
                } else {
                    KeyHash(self.rng.next_u64())
                }
            })
            .collect()
    }

    /// `n` new keys at new locations.
    fn fresh(&mut self, n: usize, next_location: &mut Location) -> Vec<(KeyHash, Location)> {
        let first = *next_location;
        *next_location += n as Location;
        (0..n as Location)
            .map(|i| (KeyHash(self.rng.next_u64()), first + i))
            .collect()
    }
}

/// Repetitions for a batch of `n`: enough operations to time, at least 5 batches.
fn reps(n: usize, budget_ops: usize) -> usize {
    (budget_ops / n).clamp(5, 200)
}

fn main() {
    let o = options();
    let slots = 1usize << o.slots_log2;
    let mut gpu = match GpuIndex::open(slots) {
        Ok(index) => index,
        Err(e) => {
            eprintln!("gpu_index bench: {e}");
            std::process::exit(1);
        }
    };
    if let Some(threads) = o.host_threads {
        gpu.set_host_threads(threads);
    }
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "device: {}; table 2^{} slots ({} MiB), filled to {:.0}%; {} CPU cores, sharded CPU on {} threads; GPU host copies on {} threads; {} rounds",
        gpu.device_name(),
        o.slots_log2,
        (slots * 8) >> 20,
        o.fill * 100.0,
        cores,
        o.threads,
        gpu.host_threads(),
        o.rounds
    );
    let mut cpu1 = CpuIndex::new(slots).expect("cpu index");
    let mut cpun = ShardedCpu::new(o.threads, slots);

    // Fill all three tables with the same keys.
    let mut keys = Keys {
        held: Vec::new(),
        rng: Rng::new(0x6b_e7c4),
    };
    let target = (slots as f64 * o.fill) as usize;
    let mut next_location: Location = 1;
    let started = Instant::now();
    while keys.held.len() < target {
        let n = (target - keys.held.len()).min(1 << 22);
        let inserts = keys.fresh(n, &mut next_location);
        keys.held.extend(inserts.iter().map(|&(k, _)| k));
        let batch = IndexBatch {
            inserts,
            ..Default::default()
        };
        let (batch, r) = run_batch(&mut gpu, batch).expect("gpu fill");
        assert_eq!(r.lossy, 0, "gpu dropped entries while filling");
        let (batch, _) = run_batch(&mut cpu1, batch).expect("cpu fill");
        cpun.run(cpun.split(&batch));
    }
    println!(
        "filled {} keys in {:.1} s",
        keys.held.len(),
        started.elapsed().as_secs_f64()
    );

    println!();
    println!(
        "{:>8} {:>8} | {:>10} {:>10} {:>10} | {:>8} {:>8} | {:>8}",
        "op", "batch", "gpu kernel", "gpu +copy", "gpu pipe", "cpu 1", "cpu N", "pipe/cpu"
    );
    let mut summary = Vec::new();
    for &n in &o.batches {
        // Lookups.
        let mut rows: [Vec<f64>; 5] = Default::default();
        for _ in 0..o.rounds {
            let r = reps(n, 1 << 25);
            let (mut kernel, mut copied) = (Vec::new(), Vec::new());
            for _ in 0..r {
                let batch = IndexBatch {
                    searches: keys.lookups(n),
                    ..Default::default()
                };
                let (_, results, times) = gpu.run_timed(batch).expect("timed");
                gpu.recycle(results);
                kernel.push(mops(n, f64::from(times.search) / 1e3));
                copied.push(mops(n, f64::from(times.total()) / 1e3));
            }
            rows[0].push(median(kernel));
            rows[1].push(median(copied));
            let batches: Vec<IndexBatch> = (0..3)
                .map(|_| IndexBatch {
                    searches: keys.lookups(n),
                    ..Default::default()
                })
                .collect();
            rows[2].push(pipelined(&mut gpu, batches, r.max(12)));
            let batches: Vec<IndexBatch> = (0..3)
                .map(|_| IndexBatch {
                    searches: keys.lookups(n),
                    ..Default::default()
                })
                .collect();
            rows[3].push(serial(&mut cpu1, &batches, (r / 4).max(3)));
            rows[4].push(sharded(&mut cpun, &batches, (r / 2).max(3)));
        }
        summary.push(print_row("lookup", n, &rows));

        // Inserts of fresh keys, then deletes of the same entries (the load stays at the fill).
        let mut rows: [Vec<f64>; 5] = Default::default();
        let mut delete_rows: [Vec<f64>; 5] = Default::default();
        for _ in 0..o.rounds {
            let r = reps(n, 1 << 23);
            let (mut ins_k, mut ins_c, mut del_k, mut del_c) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..r {
                let inserts = keys.fresh(n, &mut next_location);
                let batch = IndexBatch {
                    inserts: inserts.clone(),
                    ..Default::default()
                };
                let (_, results, times) = gpu.run_timed(batch).expect("timed insert");
                gpu.recycle(results);
                ins_k.push(mops(n, f64::from(times.insert) / 1e3));
                ins_c.push(mops(n, f64::from(times.total()) / 1e3));
                let batch = IndexBatch {
                    deletes: inserts,
                    ..Default::default()
                };
                let (_, results, times) = gpu.run_timed(batch).expect("timed delete");
                gpu.recycle(results);
                del_k.push(mops(n, f64::from(times.delete) / 1e3));
                del_c.push(mops(n, f64::from(times.total()) / 1e3));
            }
            rows[0].push(median(ins_k));
            rows[1].push(median(ins_c));
            delete_rows[0].push(median(del_k));
            delete_rows[1].push(median(del_c));
            // Through the trait: insert then delete batches alternating, pipelined on the GPU.
            let pairs = (r / 2).max(3);
            let mut batches = Vec::new();
            for _ in 0..3 {
                let inserts = keys.fresh(n, &mut next_location);
                batches.push(IndexBatch {
                    inserts: inserts.clone(),
                    ..Default::default()
                });
                batches.push(IndexBatch {
                    deletes: inserts,
                    ..Default::default()
                });
            }
            let ins = pipelined(&mut gpu, batches.clone(), pairs * 2);
            let del = ins;
            rows[2].push(ins);
            delete_rows[2].push(del);
            let (ins, del) = alternating(&batches, pairs, |b| timed_run(&mut cpu1, b.clone()));
            rows[3].push(ins);
            delete_rows[3].push(del);
            let parts: Vec<Vec<IndexBatch>> = batches.iter().map(|b| cpun.split(b)).collect();
            let mut next = 0;
            let (ins, del) = alternating(&batches, pairs, |_| {
                let split = parts[next % parts.len()].clone();
                next += 1;
                let started = Instant::now();
                cpun.run(split);
                started.elapsed().as_secs_f64()
            });
            rows[4].push(ins);
            delete_rows[4].push(del);
        }
        summary.push(print_row("insert", n, &rows));
        summary.push(print_row("delete", n, &delete_rows));

        // Mega-KV's 95/5 mix: 95% lookups, 5% inserts of fresh keys, and as many deletes of them
        // a batch later (evictions), through the trait.
        let mut rows: [Vec<f64>; 5] = Default::default();
        for _ in 0..o.rounds {
            let r = reps(n, 1 << 25);
            let batches: Vec<IndexBatch> = (0..3)
                .map(|_| {
                    let sets = n / 20;
                    let inserts = keys.fresh(sets, &mut next_location);
                    IndexBatch {
                        searches: keys.lookups(n - sets),
                        deletes: inserts.clone(),
                        inserts,
                    }
                })
                .collect();
            let (mut kernel, mut copied) = (Vec::new(), Vec::new());
            for i in 0..r {
                let (_, results, times) = gpu.run_timed(batches[i % 3].clone()).expect("timed");
                gpu.recycle(results);
                kernel.push(mops(n, f64::from(times.kernels()) / 1e3));
                copied.push(mops(n, f64::from(times.total()) / 1e3));
            }
            rows[0].push(median(kernel));
            rows[1].push(median(copied));
            rows[2].push(pipelined(&mut gpu, batches.clone(), r.max(12)));
            rows[3].push(serial(&mut cpu1, &batches, (r / 4).max(3)));
            rows[4].push(sharded(&mut cpun, &batches, (r / 2).max(3)));
        }
        summary.push(print_row("95/5", n, &rows));
    }
    println!();
    println!("crossover (smallest batch from which the pipelined GPU beats the better CPU row):");
    for op in ["lookup", "insert", "delete", "95/5"] {
        let rows: Vec<_> = summary.iter().filter(|(o, _, _)| *o == op).collect();
        let first = rows
            .iter()
            .position(|(_, _, ratio)| *ratio > 1.0)
            .filter(|&i| rows[i..].iter().all(|(_, _, ratio)| *ratio > 1.0))
            .map(|i| rows[i].1);
        match first {
            Some(n) => println!("  {op}: {n}"),
            None => println!("  {op}: none of the sizes measured"),
        }
    }
}

fn print_row(op: &'static str, n: usize, rows: &[Vec<f64>; 5]) -> (&'static str, usize, f64) {
    let m: Vec<f64> = rows
        .iter()
        .map(|r| {
            if r.is_empty() {
                f64::NAN
            } else {
                median(r.clone())
            }
        })
        .collect();
    let ratio = m[2] / m[3].max(m[4]);
    println!(
        "{:>8} {:>8} | {:>10.1} {:>10.1} {:>10.1} | {:>8.1} {:>8.1} | {:>8.2}",
        op, n, m[0], m[1], m[2], m[3], m[4], ratio
    );
    (op, n, ratio)
}

/// Runs `rounds` passes over `batches` with up to `max_in_flight` in flight; M ops/s, wall clock.
fn pipelined(index: &mut GpuIndex, batches: Vec<IndexBatch>, total: usize) -> f64 {
    let depth = index.max_in_flight();
    let mut queue: std::collections::VecDeque<IndexBatch> = batches.into();
    let started = Instant::now();
    let mut submitted = 0;
    let mut ops = 0;
    let mut in_flight = 0;
    while submitted < total || in_flight > 0 {
        while in_flight < depth && submitted < total {
            let batch = queue.pop_front().expect("a batch to submit");
            ops += batch.len();
            index.submit(batch).expect("submit");
            in_flight += 1;
            submitted += 1;
        }
        let (batch, results) = index.complete().expect("complete").expect("in flight");
        index.recycle(results);
        queue.push_back(batch);
        in_flight -= 1;
    }
    mops(ops, started.elapsed().as_secs_f64())
}

fn serial(index: &mut CpuIndex, batches: &[IndexBatch], total: usize) -> f64 {
    let mut seconds = 0.0;
    let mut ops = 0;
    for i in 0..total {
        let batch = batches[i % batches.len()].clone();
        ops += batch.len();
        seconds += timed_run(index, batch);
    }
    mops(ops, seconds)
}

/// Seconds one batch takes on `index` (submit to complete).
fn timed_run(index: &mut CpuIndex, batch: IndexBatch) -> f64 {
    let started = Instant::now();
    let (_, results) = run_batch(index, batch).expect("cpu batch");
    let took = started.elapsed().as_secs_f64();
    index.recycle(results);
    took
}

/// Split batches on all shards, round robin; M ops/s over the time inside `run`.
fn sharded(index: &mut ShardedCpu, batches: &[IndexBatch], total: usize) -> f64 {
    let mut parts: std::collections::VecDeque<Vec<IndexBatch>> =
        batches.iter().map(|b| index.split(b)).collect();
    let mut seconds = 0.0;
    let mut ops = 0;
    for i in 0..total {
        ops += batches[i % batches.len()].len();
        let split = parts.pop_front().expect("parts");
        let started = Instant::now();
        let back = index.run(split);
        seconds += started.elapsed().as_secs_f64();
        parts.push_back(back);
    }
    mops(ops, seconds)
}

/// `pairs` rounds over `batches` (insert, delete, insert, delete, ...), each timed by `run`,
/// which gets the batch's index; returns (inserts, deletes) in M ops/s over their own time.
fn alternating(
    batches: &[IndexBatch],
    pairs: usize,
    mut run: impl FnMut(&IndexBatch) -> f64,
) -> (f64, f64) {
    let (mut insert_s, mut delete_s, mut inserts, mut deletes) = (0.0, 0.0, 0, 0);
    for i in 0..pairs * 2 {
        let batch = &batches[i % batches.len()];
        let took = run(batch);
        if batch.inserts.is_empty() {
            delete_s += took;
            deletes += batch.len();
        } else {
            insert_s += took;
            inserts += batch.len();
        }
    }
    (mops(inserts, insert_s), mops(deletes, delete_s))
}
