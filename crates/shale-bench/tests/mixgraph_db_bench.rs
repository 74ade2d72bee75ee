//! The mixgraph generator against RocksDB's db_bench itself.
//!
//! db_bench ends a mixgraph run with `( Gets:N Puts:N Seek:N, reads F in R found, avg size: V
//! value, S scan)`. Those figures follow from every key, operation, value size and scan length it
//! drew, and from the keys its `fillrandom` loaded just before. Replaying both benchmarks' draws
//! through the harness's model (fillrandom: two draws per write, the key `draw % num`; mixgraph:
//! [`MixGraphModel::draw`]) over an ordered set of keys gives the same line exactly when the model
//! reproduces db_bench draw for draw.
//!
//! Two layers: lines recorded from Debian's db_bench 7.8.3 (always checked), and the same
//! comparison against the db_bench installed on the machine (package rocksdb-tools) for more
//! parameter sets; that test fails when db_bench is missing.

use shale_bench::generator::Mt64;
use shale_bench::props::{Origin, Properties};
use shale_bench::workload::mixgraph::{MixGraphModel, MixOp};
use std::collections::BTreeSet;
use std::process::Command;

/// The AegonKV evaluation's Social Graph flags (no key_dist_*: uniform keys).
const SOCIAL_GRAPH: &str = "--keyrange_dist_a=14.18 --keyrange_dist_b=-2.917 --keyrange_dist_c=0.0164 \
    --keyrange_dist_d=-0.08082 --keyrange_num=30 --value_k=0.923 --value_sigma=226.409 --iter_k=2.517 \
    --iter_sigma=14.236 --mix_get_ratio=0.55 --mix_put_ratio=0.44 --mix_seek_ratio=0.01";

/// Hot key ranges: the Social Graph flags plus the key power law.
const HOT_RANGES: &str = "--key_dist_a=0.002312 --key_dist_b=0.3467";

fn props(flags: &str) -> Properties {
    let mut p = Properties::new();
    for f in flags.split_whitespace() {
        let (k, v) = f.trim_start_matches('-').split_once('=').unwrap();
        p.set(k, v, Origin::CommandLine);
    }
    p
}

/// db_bench's closing mixgraph line for `fillrandom,mixgraph` with `--num`, `--reads`, `--seed`
/// and one thread, as the model predicts it.
fn predicted(num: u64, reads: u64, seed: u64, flags: &str) -> String {
    // db_bench seeds the n-th thread it starts with seed + n: fillrandom's is the first.
    let mut rng = Mt64::new(seed + 1);
    let mut keys = BTreeSet::new();
    for _ in 0..num {
        rng.next_u64();
        keys.insert(rng.next_u64() % num);
    }
    let model = MixGraphModel::new(&props(flags), num).unwrap();
    let mut rng = Mt64::new(seed + 2);
    let (mut gets, mut puts, mut seeks, mut found) = (0u64, 0u64, 0u64, 0u64);
    let (mut value_bytes, mut scanned) = (0f64, 0f64);
    for _ in 0..reads {
        let d = model.draw(&mut rng);
        let k = d.key as u64;
        match d.op {
            MixOp::Get => {
                gets += 1;
                found += u64::from(keys.contains(&k));
            }
            MixOp::Put => {
                puts += 1;
                value_bytes += d.value_size as f64;
                keys.insert(k);
            }
            MixOp::Seek => {
                seeks += 1;
                found += u64::from(keys.contains(&k));
                let len = usize::try_from(d.scan_len).unwrap_or(0);
                scanned += keys.range(k..).take(len).count() as f64;
            }
        }
    }
    format!(
        "( Gets:{gets} Puts:{puts} Seek:{seeks}, reads {found} in {} found, avg size: {:.1} value, {:.1} scan)",
        gets + seeks,
        value_bytes / puts as f64,
        scanned / seeks as f64
    )
}

#[test]
fn the_model_reproduces_lines_recorded_from_db_bench_7_8_3() {
    // db_bench --benchmarks=fillrandom,mixgraph --num=20000 --reads=30000 --seed=42 --key_size=48
    //   --value_size=256 --threads=1 --disable_wal=true <flags>, Debian rocksdb-tools 7.8.3-2.
    assert_eq!(
        predicted(20_000, 30_000, 42, SOCIAL_GRAPH),
        "( Gets:16575 Puts:13137 Seek:288, reads 10631 in 16863 found, avg size: 275.0 value, 241.7 scan)"
    );
    assert_eq!(
        predicted(20_000, 30_000, 42, &format!("{SOCIAL_GRAPH} {HOT_RANGES}")),
        "( Gets:16575 Puts:13137 Seek:288, reads 16158 in 16863 found, avg size: 275.0 value, 70.7 scan)"
    );
}

/// Runs db_bench and returns its closing mixgraph line.
fn db_bench(num: u64, reads: u64, seed: u64, flags: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("db_bench")
        .args([
            "--benchmarks=fillrandom,mixgraph",
            &format!("--num={num}"),
            &format!("--reads={reads}"),
            &format!("--seed={seed}"),
            "--key_size=48",
            "--value_size=64",
            "--threads=1",
            "--disable_wal=true",
            &format!("--db={}", dir.path().display()),
        ])
        .args(flags.split_whitespace())
        .output()
        .expect("db_bench must be installed for this test (Debian package rocksdb-tools)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("mixgraph"))
        .unwrap_or_else(|| panic!("no mixgraph line in:\n{stdout}"));
    line[line.find("( Gets:").expect("db_bench's summary")..].to_string()
}

#[test]
fn the_model_draws_what_the_installed_db_bench_draws() {
    let cases = [
        (5_000, 20_000, 7, SOCIAL_GRAPH.to_string()),
        (5_000, 20_000, 7, format!("{SOCIAL_GRAPH} {HOT_RANGES}")),
        // The power law over the whole key space (no key ranges), and other mixes and caps.
        (
            3_000,
            10_000,
            1234,
            "--key_dist_a=0.002312 --key_dist_b=0.3467 --mix_get_ratio=0.3 --mix_put_ratio=0.5 \
             --mix_seek_ratio=0.2 --mix_max_value_size=300 --mix_max_scan_len=50"
                .to_string(),
        ),
        (
            4_000,
            8_000,
            99,
            "--keyrange_dist_a=0.5 --keyrange_dist_b=-0.1 --keyrange_num=7 --key_dist_a=0.1 \
             --key_dist_b=0.5 --value_k=0 --value_sigma=100 --mix_get_ratio=0.6 --mix_put_ratio=0.35 \
             --mix_seek_ratio=0.05"
                .to_string(),
        ),
    ];
    for (num, reads, seed, flags) in cases {
        assert_eq!(
            predicted(num, reads, seed, &flags),
            db_bench(num, reads, seed, &flags),
            "num={num} reads={reads} seed={seed} {flags}"
        );
    }
}
