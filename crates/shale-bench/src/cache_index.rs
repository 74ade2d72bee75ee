//! `shale-bench cache-index`: the cache's CPU index engine against `hashbrown`, side by side.
//!
//! Both hold the same entries (64-bit key hash -> 32-bit location; by default 2^26 of them,
//! far more than the caches hold) and look up the same uniformly chosen present keys. The index
//! runs them as batches of searches (Mega-KV's interface, MICA-style prefetching inside);
//! hashbrown looks them up one at a time, as a program without batching would. Every round runs
//! every batch size for both, alternating which goes first; the report gives medians over rounds
//! and the ratio, with a two-thread CPU check per round (DESIGN.md section 8).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use shale_cache::index::cpu::CpuIndex;
use shale_cache::index::{run_batch, BatchIndex, IndexBatch, KeyHash};

use crate::compare::median;
use crate::cpucheck::{rounds_line, sysbench_cpu_events_per_sec};
use crate::error::{Error, Result};

/// Usage of the subcommand.
pub const USAGE: &str = "\
Usage: shale-bench cache-index [--entries N] [--slots N] [--batches 1,1024,...] [--lookups N]
                               [--rounds N] [--no-huge-pages] [--cpucheck SECS] [--out FILE.md]
Defaults: 2^26 entries in 2^27 index slots, batches 1,1024,4096,16384,65536, 2^24 lookups per
measurement, 3 rounds.";

/// Arguments.
#[derive(Debug, Clone)]
pub struct CacheIndexArgs {
    /// Entries in both tables.
    pub entries: usize,
    /// Slots of the index (0: twice the entries).
    pub slots: usize,
    /// Batch sizes of the index.
    pub batches: Vec<usize>,
    /// Lookups per measurement.
    pub lookups: usize,
    /// Rounds.
    pub rounds: u32,
    /// Advise the index table as huge pages (default on).
    pub huge_pages: bool,
    /// Seconds of the CPU check per round (0: none).
    pub cpucheck_secs: u32,
    /// Markdown report file.
    pub out: Option<PathBuf>,
}

impl Default for CacheIndexArgs {
    fn default() -> Self {
        CacheIndexArgs {
            entries: 1 << 26,
            slots: 0,
            batches: vec![1, 1024, 4096, 16384, 65536],
            lookups: 1 << 24,
            rounds: 3,
            huge_pages: true,
            cpucheck_secs: 5,
            out: None,
        }
    }
}

fn parse_args(args: &[String]) -> Result<CacheIndexArgs> {
    let mut a = CacheIndexArgs::default();
    let mut it = args.iter();
    let num = |v: Option<&String>, name: &str| -> Result<usize> {
        v.and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::usage(format!("{name} needs a number\n{USAGE}")))
    };
    while let Some(arg) = it.next() {
        match arg.trim_start_matches('-') {
            "entries" => a.entries = num(it.next(), "--entries")?,
            "slots" => a.slots = num(it.next(), "--slots")?,
            "lookups" => a.lookups = num(it.next(), "--lookups")?,
            "rounds" => a.rounds = num(it.next(), "--rounds")? as u32,
            "cpucheck" => a.cpucheck_secs = num(it.next(), "--cpucheck")? as u32,
            "no-huge-pages" => a.huge_pages = false,
            "out" => {
                a.out = Some(PathBuf::from(it.next().ok_or_else(|| {
                    Error::usage(format!("--out needs a file\n{USAGE}"))
                })?))
            }
            "batches" => {
                let list = it.next().ok_or_else(|| Error::usage(USAGE.to_string()))?;
                a.batches = list
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse()
                            .map_err(|_| Error::usage(USAGE.to_string()))
                    })
                    .collect::<Result<_>>()?;
            }
            "help" | "h" => return Err(Error::usage(USAGE.to_string())),
            other => return Err(Error::usage(format!("unknown argument {other:?}\n{USAGE}"))),
        }
    }
    if a.entries == 0 || a.lookups == 0 || a.batches.contains(&0) || a.rounds == 0 {
        return Err(Error::usage(format!("sizes must be positive\n{USAGE}")));
    }
    Ok(a)
}

/// splitmix64: the keys and the lookup order.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs the subcommand.
///
/// # Errors
/// Usage errors, or an index that cannot be built.
pub fn run_command(args: &[String]) -> Result<bool> {
    let a = parse_args(args)?;
    let slots = if a.slots == 0 { a.entries * 2 } else { a.slots };
    println!(
        "building: {} entries, index of {} slots{}, hashbrown of the same entries",
        a.entries,
        slots,
        if a.huge_pages { " (huge pages)" } else { "" }
    );
    let keys: Vec<u64> = (0..a.entries as u64).map(mix).collect();
    let mut index = CpuIndex::with_huge_pages(slots, a.huge_pages)
        .map_err(|e| Error::backend(format!("cannot build the index: {e}")))?;
    let mut lossy = 0;
    for (chunk_no, chunk) in keys.chunks(1 << 16).enumerate() {
        let batch = IndexBatch {
            inserts: chunk
                .iter()
                .enumerate()
                .map(|(i, &k)| (KeyHash(k), (chunk_no * (1 << 16) + i + 1) as u32))
                .collect(),
            ..IndexBatch::default()
        };
        let (_, results) = run_batch(&mut index, batch)
            .map_err(|e| Error::backend(format!("index insert failed: {e}")))?;
        lossy += results.lossy;
    }
    let mut map: hashbrown::HashMap<u64, u32> = hashbrown::HashMap::with_capacity(a.entries);
    for (i, &k) in keys.iter().enumerate() {
        map.insert(k, i as u32 + 1);
    }
    println!(
        "index holds {} entries ({lossy} dropped at load {:.2}), hashbrown {} (capacity {})",
        index.len(),
        a.entries as f64 / index.slots() as f64,
        map.len(),
        map.capacity()
    );
    // The lookup sequence: present keys, uniformly.
    let order: Vec<KeyHash> = (0..a.lookups as u64)
        .map(|i| KeyHash(keys[(mix(i ^ 0xabcdef) % a.entries as u64) as usize]))
        .collect();
    // Warm both tables once (first touch is slow on this machine).
    let _ = lookup_index(&mut index, &order, 65536)?;
    let _ = lookup_hashbrown(&map, &order);
    let mut ours: Vec<Vec<f64>> = vec![Vec::new(); a.batches.len()];
    let mut theirs: Vec<f64> = Vec::new();
    let mut cpu = Vec::new();
    for round in 0..a.rounds {
        cpu.push(if a.cpucheck_secs > 0 {
            sysbench_cpu_events_per_sec(a.cpucheck_secs)
        } else {
            None
        });
        let hashbrown_first = round % 2 == 1;
        if hashbrown_first {
            theirs.push(lookup_hashbrown(&map, &order));
        }
        for (i, &batch) in a.batches.iter().enumerate() {
            ours[i].push(lookup_index(&mut index, &order, batch)?);
        }
        if !hashbrown_first {
            theirs.push(lookup_hashbrown(&map, &order));
        }
        println!(
            "round {}: hashbrown {:.2} M/s; index {}",
            round + 1,
            theirs.last().copied().unwrap_or(0.0) / 1e6,
            a.batches
                .iter()
                .zip(&ours)
                .map(|(b, r)| format!(
                    "batch {b}: {:.2} M/s",
                    r.last().copied().unwrap_or(0.0) / 1e6
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let base = median(&theirs).unwrap_or(0.0);
    let mut report = String::from(
        "| batch | CPU index (M lookups/s) | hashbrown one at a time (M/s) | ratio |\n|---|---|---|---|\n",
    );
    for (i, &batch) in a.batches.iter().enumerate() {
        let m = median(&ours[i]).unwrap_or(0.0);
        report.push_str(&format!(
            "| {batch} | {:.2} | {:.2} | {:.2}x |\n",
            m / 1e6,
            base / 1e6,
            m / base
        ));
    }
    report.push_str(&format!(
        "\n{} entries, {} index slots{}, {} lookups per measurement, medians of {} rounds.\nCPU check (sysbench cpu --threads=2, events/s): {}\n",
        a.entries,
        index.slots(),
        if a.huge_pages { " (huge pages advised)" } else { "" },
        a.lookups,
        a.rounds,
        rounds_line(&cpu)
    ));
    print!("{report}");
    if let Some(path) = &a.out {
        std::fs::write(path, &report)
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    }
    Ok(true)
}

/// Lookups per second through the index in batches of `batch`.
fn lookup_index(index: &mut CpuIndex, order: &[KeyHash], batch: usize) -> Result<f64> {
    let mut buffer = IndexBatch::default();
    let mut found = 0u64;
    let started = Instant::now();
    for chunk in order.chunks(batch) {
        buffer.clear();
        buffer.searches.extend_from_slice(chunk);
        index
            .submit(std::mem::take(&mut buffer))
            .map_err(|e| Error::backend(format!("index search failed: {e}")))?;
        let (back, results) = index
            .complete()
            .map_err(|e| Error::backend(format!("index search failed: {e}")))?
            .ok_or_else(|| Error::backend("a batch did not complete".to_string()))?;
        found += results.found.iter().filter(|f| f[0] | f[1] != 0).count() as u64;
        index.recycle(results);
        buffer = back;
    }
    let secs = started.elapsed().as_secs_f64();
    if found != order.len() as u64 {
        return Err(Error::backend(format!(
            "the index found {found} of {} present keys",
            order.len()
        )));
    }
    Ok(order.len() as f64 / secs)
}

/// Lookups per second through hashbrown, one at a time.
fn lookup_hashbrown(map: &hashbrown::HashMap<u64, u32>, order: &[KeyHash]) -> f64 {
    let started = Instant::now();
    let mut sum = 0u64;
    for k in order {
        if let Some(&v) = map.get(&k.0) {
            sum += u64::from(v);
        }
    }
    black_box(sum);
    order.len() as f64 / started.elapsed().as_secs_f64()
}
