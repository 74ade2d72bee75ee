//! The AegonKV evaluation's files and scripts, unchanged, against shale-bench: its workload files
//! with trace replay (`filetype=meta` and `cluster`), its property files under `-db titandb`, and
//! its analysis scripts' way of reading the output.

mod common;

use common::{analyse, bench_in, eval_file, Script};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The evaluation's db_bench command for the Social Graph trace, scaled by `num` and `reads`.
fn social_graph_trace(dir: &Path, num: u64, reads: u64) {
    let args = format!(
        "gen-trace -benchmarks=fillrandom,mixgraph -use_direct_io_for_flush_and_compaction=true \
         -use_direct_reads=true -cache_size=268435456 -keyrange_dist_a=14.18 -keyrange_dist_b=-2.917 \
         -keyrange_dist_c=0.0164 -keyrange_dist_d=-0.08082 -keyrange_num=30 -value_k=0.923 \
         -value_sigma=226.409 -iter_k=2.517 -iter_sigma=14.236 -mix_get_ratio=0.55 \
         -mix_put_ratio=0.44 -mix_seek_ratio=0.01 -sine_mix_rate_interval_milliseconds=5000 \
         -sine_a=1000 -sine_b=0.000073 -sine_d=80000 -perf_level=2 -reads={reads} -num={num} \
         -key_size=48 -value_size=256 -threads=16 -write_buffer_size=67108864 \
         -max_write_buffer_number=2 -target_file_size_base=8388608 -max_bytes_for_level_base=16777216 \
         -max_bytes_for_level_multiplier=3 -db=./db -save_keys=true -path_save_keys=./trans"
    );
    let args: Vec<&str> = args.split_whitespace().collect();
    let (code, _, err) = bench_in(dir, &args);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("{reads} lines to ./trans")), "{err}");
}

/// The value after `name` on the line that starts with it.
fn line_value<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("no '{name}' in:\n{out}"))
}

/// `Count=` of series `op` on `line`.
fn count(line: &str, op: &str) -> u64 {
    line.split(&format!("[{op}: Count="))
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// The last status line of the output.
fn last_status(out: &str) -> &str {
    out.lines()
        .rfind(|l| l.contains(" sec: "))
        .unwrap_or_else(|| panic!("no status line in:\n{out}"))
}

#[test]
fn the_social_graph_pipeline_runs_under_titandb_and_reads_as_sg_py_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let (num, reads) = (4000, 16_000);
    social_graph_trace(dir.path(), num, reads);
    let result = dir.path().join("result.json");
    let (code, out, err) = bench_in(
        dir.path(),
        &[
            "-load",
            "-run",
            "-db",
            "titandb",
            "-P",
            &eval_file("workload_meta"),
            "-P",
            &eval_file("aegonkv.properties"),
            "-s",
            "-statistics",
            "-p",
            "threadcount=4",
            "-p",
            &format!("recordcount={num}"),
            "-p",
            &format!("operationcount={reads}"),
            // Small memtables and levels so that the run flushes and compacts.
            "-p",
            "titandb.write_buffer_size=131072",
            "-p",
            "titandb.target_file_size_base=65536",
            "-p",
            "titandb.max_bytes_for_level_base=262144",
            "-p",
            "verify=true",
            "-p",
            &format!("resultfile={}", result.display()),
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(line_value(&out, "Load operations success(ops): "), "4000");
    assert_eq!(line_value(&out, "Run operations success(ops): "), "16000");
    assert_eq!(line_value(&out, "Run operations fail(ops): "), "0");
    // Every key the trace names was loaded: no READ-FAILED; puts are INSERTs, seeks SCANs.
    let last = last_status(&out);
    assert_eq!(
        count(last, "INSERT") + count(last, "READ") + count(last, "SCAN"),
        16_000,
        "{last}"
    );
    assert!(!last.contains("FAILED"), "{last}");
    assert!(last.find("[INSERT:") < last.find("[READ:"), "{last}");

    let a = analyse(&out, reads, Script::LoadAndRun).unwrap();
    assert_eq!(a.throughput, line_value(&out, "Run throughput(ops/sec): "));
    let p99 = last
        .split(" 99=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    assert_eq!(a.p99, p99, "the INSERT series comes first: {last}");
    // The second block is the run's alone: the report's cumulative figures less the load's.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let stat = |block: &str, name: &str| -> u64 {
        report[block]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e[0] == name)
            .map_or(0, |e| e[1].as_u64().unwrap())
    };
    let run_compaction = |name| stat("statistics", name) - stat("statistics_after_load", name);
    assert_eq!(a.compact_read, run_compaction("rocksdb.compact.read.bytes"));
    assert_eq!(
        a.compact_write,
        run_compaction("rocksdb.compact.write.bytes")
    );
    assert!(a.compact_write > 0, "the run compacted: {out}");
    assert_eq!(a.stall_micros, run_compaction("rocksdb.stall.micros"));
}

/// A Twitter cache trace written by hand: what the fork performs, skips and misses is known.
const CLUSTER_TRACE: &str = "\
1,k1,2,0,7,get,0
2,k1,2,100,7,set,0
3,k1,2,0,7,get,0
4,k2,2,50,7,add,0
5,k2,2,0,7,gets,0
6,k1,2,0,7,delete,0
7,k1,2,0,7,get,0
8,k3,2,0,7,get,0
9,k2,2,10,7,append,0
10,k2,2,0,7,get,0
";

#[test]
fn a_cluster_trace_counts_hits_misses_and_skips_as_the_fork_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.sort"), CLUSTER_TRACE).unwrap();
    let args = [
        "-run",
        "-db",
        "memory",
        "-P",
        &eval_file("workload_cluster"),
        "-p",
        "filepath=./cluster.sort",
        "-p",
        "operationcount=10",
        "-s",
        "-p",
        "verify=true",
    ];
    let (code, out, err) = bench_in(dir.path(), &args);
    assert_eq!(code, 0, "{out}\n{err}");
    // Reads of k1 (before its set) and of k3 miss; gets, delete and append are skipped.
    let last = last_status(&out);
    assert!(last.contains(" 7 operations; "), "{last}");
    assert_eq!(count(last, "INSERT"), 2, "{last}");
    assert_eq!(count(last, "READ"), 3, "{last}");
    assert_eq!(count(last, "READ-FAILED"), 2, "{last}");
    assert_eq!(line_value(&out, "Run operations success(ops): "), "5");
    assert_eq!(line_value(&out, "Run operations fail(ops): "), "5");
    assert!(out.contains("Run operations skipped(ops): 3 "), "{out}");
    assert_eq!(line_value(&out, "Run read misses(ops): "), "2");
}

#[test]
fn load_from_initfilepath_writes_exactly_the_keys_the_prepare_step_lists() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.sort"), CLUSTER_TRACE).unwrap();
    let (code, _, err) = bench_in(
        dir.path(),
        &[
            "prepare-cluster",
            "-i",
            "cluster.sort",
            "-o",
            "cluster.load",
        ],
    );
    assert_eq!(code, 0, "{err}");
    // k1 and k3 are read before any add; k2 is added first.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cluster.load")).unwrap(),
        "k1\nk3\n"
    );
    let (code, out, err) = bench_in(
        dir.path(),
        &[
            "-load",
            "-run",
            "-db",
            "memory",
            "-P",
            &eval_file("workload_cluster"),
            "-p",
            "filepath=./cluster.sort",
            "-p",
            "initfilepath=./cluster.load",
            "-p",
            "operationcount=10",
            "-s",
            "-statistics",
            "-p",
            "verify=true",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(line_value(&out, "Load operations success(ops): "), "2");
    let after_load = out.split("STATISTICS:").nth(1).unwrap();
    assert!(
        after_load.contains("\nmemory.keys COUNT : 2\n"),
        "{after_load}"
    );
    // Every get now hits: five READs, two INSERTs, three skips.
    let last = last_status(&out);
    assert_eq!(count(last, "READ"), 5, "{last}");
    assert!(!last.contains("FAILED"), "{last}");
    assert_eq!(line_value(&out, "Run operations success(ops): "), "7");
    assert_eq!(line_value(&out, "Run operations fail(ops): "), "3");
    // recordcount bounds the keys loaded; more than the file lists is an error.
    let (code, _, err) = bench_in(
        dir.path(),
        &[
            "-load",
            "-db",
            "memory",
            "-P",
            &eval_file("workload_cluster"),
            "-p",
            "filepath=./cluster.sort",
            "-p",
            "initfilepath=./cluster.load",
            "-p",
            "recordcount=3",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("initfilepath ./cluster.load lists 2 keys, but recordcount is 3"),
        "{err}"
    );
}

#[test]
fn a_cluster_run_on_shale_reads_as_cluster_py_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = bench_in(
        dir.path(),
        &[
            "gen-trace",
            "-o",
            "cluster.sort",
            "-ops",
            "20000",
            "-keys",
            "2000",
            "-value",
            "uniform:100:2000",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = bench_in(
        dir.path(),
        &[
            "-run",
            "-db",
            "titandb",
            "-P",
            &eval_file("workload_cluster"),
            "-P",
            &eval_file("aegonkv.properties"),
            "-s",
            "-statistics",
            "-p",
            "threadcount=4",
            "-p",
            "filepath=./cluster.sort",
            "-p",
            "operationcount=20000",
            "-p",
            "titandb.write_buffer_size=262144",
            "-p",
            "titandb.target_file_size_base=65536",
            "-p",
            "titandb.max_bytes_for_level_base=262144",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let a = analyse(&out, 20_000, Script::RunOnly).unwrap();
    assert_eq!(a.throughput, line_value(&out, "Run throughput(ops/sec): "));
    assert_eq!(out.matches("\nSTATISTICS:\n").count(), 1, "{out}");
    assert!(a.compact_write > 0, "{out}");
    // The generator's default mix is gets and sets only: nothing is skipped, so the final status
    // line holds all 20000 operations (the line cluster.py looks for).
    assert!(last_status(&out).contains(" 20000 operations; "), "{out}");
}

#[test]
fn malformed_trace_lines_stop_the_run_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("trans"),
        "1,0,0\n2,1,100\n\n3,zero,5\n4,0,0\n",
    )
    .unwrap();
    let (code, out, err) = bench_in(
        dir.path(),
        &[
            "-run",
            "-db",
            "memory",
            "-P",
            &eval_file("workload_meta"),
            "-p",
            "recordcount=0",
            "-p",
            "operationcount=5",
        ],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(
            "./trans:4: the operation must be an integer (0 read, 1 write, 2 scan), got 'zero'"
        ),
        "{err}"
    );
    std::fs::write(
        dir.path().join("c.sort"),
        "1,k,1,0,7,get,0\n2,k,1,many,7,set,0\n",
    )
    .unwrap();
    let (code, _, err) = bench_in(
        dir.path(),
        &[
            "-run",
            "-db",
            "memory",
            "-P",
            &eval_file("workload_cluster"),
            "-p",
            "filepath=./c.sort",
            "-p",
            "operationcount=2",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("./c.sort:2: column value_size must be a size in bytes, got 'many'"),
        "{err}"
    );
    let (code, _, err) = bench_in(
        dir.path(),
        &[
            "-run",
            "-db",
            "memory",
            "-P",
            &eval_file("workload_cluster"),
            "-p",
            "filepath=./missing.sort",
            "-p",
            "operationcount=2",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot open trace ./missing.sort"), "{err}");
}

#[test]
fn workload_f_is_reported_as_reads_and_updates() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = bench_in(
        dir.path(),
        &[
            "-load",
            "-run",
            "-db",
            "memory",
            "-P",
            &common::workloads().join("workloadf").display().to_string(),
            "-p",
            "recordcount=200",
            "-p",
            "operationcount=1000",
            "-s",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let last = last_status(&out);
    assert!(!last.contains("READMODIFYWRITE"), "{last}");
    // Every transaction reads once; the read-modify-writes also update.
    assert_eq!(count(last, "READ"), 1000, "{last}");
    assert!(count(last, "UPDATE") > 300, "{last}");
    assert!(last.contains(&format!(" {} operations;", 1000 + count(last, "UPDATE"))));
    assert_eq!(line_value(&out, "Run operations success(ops): "), "1000");
}

#[test]
fn reads_of_missing_records_go_to_the_failed_series() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = bench_in(
        dir.path(),
        &[
            "-run",
            "-db",
            "memory",
            "-P",
            &common::workloads().join("workloadc").display().to_string(),
            "-p",
            "recordcount=50",
            "-p",
            "operationcount=40",
            "-s",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let last = last_status(&out);
    assert_eq!(count(last, "READ-FAILED"), 40, "{last}");
    assert_eq!(count(last, "READ"), 0, "{last}");
    assert_eq!(line_value(&out, "Run operations success(ops): "), "0");
    assert_eq!(line_value(&out, "Run operations fail(ops): "), "40");
}

/// Every name the fork's `titandb/aegonkv.properties` sets, with its values.
const AEGONKV_PROPERTIES: &str = "\
titandb.dbname=./titandb
titandb.format=single
titandb.destroy=false
titandb.compression=no
titandb.target_file_size_base=8388608
titandb.target_file_size_multiplier=1
titandb.max_bytes_for_level_base=16777216
titandb.max_bytes_for_level_multiplier=3
titandb.write_buffer_size=67108864
titandb.max_open_files=-1
titandb.max_write_buffer_number=2
titandb.use_direct_io_for_flush_compaction=false
titandb.use_direct_reads=false
titandb.allow_mmap_writes=false
titandb.allow_mmap_reads=false
titandb.cache_size=8388608
titandb.bloom_bits=-1
titandb.compressed_cache_size=0
titandb.increase_parallelism=false
titandb.optimize_level_style_compaction=false
titandb.max_background_compactions=9
titandb.max_background_flushes=3
titandb.disable_wal=true
titandb.titan_max_background_gc=6
titandb.blob_file_discardable_ratio=0.5
titandb.blob_db_file_size=33554432
titandb.titan_min_blob_size=0
titandb.max_gc_batch_size=67108864
titandb.min_gc_batch_size=33554432
titandb.titan_gc_time_path=./GC_TIME
titandb.level_merge=false
titandb.range_merge=false
titandb.max_sorted_runs=3
titandb.use_bitmap=true
titandb.gc_offload=true
titandb.binary_file_path=/opt/xilinx/gc.xclbin
titandb.enable_pipelined_write=false
titandb.unordered_write=false
titandb.enable_multi_batch_write=false";

#[test]
fn the_aegonkv_property_file_maps_onto_shale_and_says_what_has_no_equivalent() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("aegonkv.properties");
    std::fs::write(&file, AEGONKV_PROPERTIES).unwrap();
    let (code, out, err) = bench_in(
        dir.path(),
        &[
            "-load",
            "-db",
            "titandb",
            "-P",
            &common::workloads().join("workloada").display().to_string(),
            "-P",
            file.to_str().unwrap(),
            "-p",
            "recordcount=100",
            "-p",
            "titandb.extra_knob=1",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    for mapped in [
        "titandb.write_buffer_size=67108864 -> shale.write_buffer_size=67108864",
        "titandb.max_background_compactions=9 + titandb.max_background_flushes=3 -> shale.background_threads=12",
        "titandb.blob_file_discardable_ratio=0.5 -> shale.gc_threshold=0.5",
        "titandb.titan_max_background_gc=6 -> shale.gc_threads=6",
        "-> shale.gc_mode=offload",
        "-> shale.durability=unflushed",
    ] {
        assert!(out.contains(mapped), "{mapped}:\n{out}");
    }
    let no_equivalent = out
        .split("No Shale equivalent (ignored):\n")
        .nth(1)
        .expect("a list of properties without equivalent");
    for name in [
        "titandb.max_gc_batch_size",
        "titandb.min_gc_batch_size",
        "titandb.binary_file_path",
        "titandb.titan_gc_time_path",
    ] {
        assert!(no_equivalent.contains(name), "{name}:\n{out}");
    }
    // Only the made-up name is unknown; every name of the fork's file is known.
    assert!(
        err.contains("warning: 1 property is not read by shale-bench with -db titandb"),
        "{err}"
    );
    assert!(
        err.contains("'titandb.extra_knob' (set at -p on the command line)"),
        "{err}"
    );
    assert_eq!(line_value(&out, "Load operations success(ops): "), "100");
}

#[test]
fn the_opened_engine_has_the_mapped_options() {
    use shale_bench::backend::shale_db::ShaleBackend;
    use shale_bench::props::{Origin, Properties};
    let dir = tempfile::tempdir().unwrap();
    let mut props = Properties::new();
    for (line, k, v) in shale_bench::props::parse_java_properties(AEGONKV_PROPERTIES, "a").unwrap()
    {
        props.set(
            k,
            v,
            Origin::File {
                path: "a".into(),
                line,
            },
        );
    }
    props.set(
        "titandb.dbname",
        dir.path().join("db").display().to_string(),
        Origin::CommandLine,
    );
    let db = ShaleBackend::open_translated(&props, "titandb").unwrap();
    let o = db.options();
    assert_eq!(o.write_buffer_size, 67_108_864);
    assert_eq!(o.max_write_buffers, 2);
    assert_eq!(o.target_file_size, 8_388_608);
    assert_eq!(o.max_bytes_for_level_base, 16_777_216);
    assert_eq!(o.level_size_multiplier, 3.0);
    assert_eq!(o.block_cache_size, 8_388_608);
    assert_eq!(o.bloom_bits_per_key, 0);
    assert_eq!(o.compression, shale::Compression::None);
    assert_eq!(o.background_threads, 12);
    assert_eq!(o.max_open_files, 65_536);
    assert_eq!(o.min_blob_size, 1);
    assert_eq!(o.blob_file_size, 33_554_432);
    assert_eq!(o.gc_threshold, 0.5);
    assert_eq!(o.gc_threads, 6);
    assert_eq!(o.gc_mode, shale::GcMode::Offload);
    assert_eq!(db.durability(), shale::Durability::Unflushed);
    drop(db);

    // Titan's switches select Titan mode; its disable_background_gc leaves only dead files.
    props.set("titandb.use_bitmap", "false", Origin::CommandLine);
    props.set("titandb.gc_offload", "false", Origin::CommandLine);
    props.set("titandb.disable_background_gc", "true", Origin::CommandLine);
    // A shale.* property given too wins over the translation.
    props.set("shale.gc_threads", "2", Origin::CommandLine);
    let db = ShaleBackend::open_translated(&props, "titandb").unwrap();
    assert_eq!(db.options().gc_mode, shale::GcMode::Titan);
    assert_eq!(db.options().gc_threshold, 1.0);
    assert_eq!(db.options().gc_threads, 2);
}

/// Status lines keep their schedule while the client threads saturate the machine: 16 threads
/// generating and checking 10 KiB records, against a one-second interval.
#[test]
fn status_lines_arrive_on_time_under_a_saturating_load() {
    let interval = Duration::from_secs(1);
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .args([
            "-load",
            "-run",
            "-db",
            "memory",
            "-P",
            &common::workloads().join("workloadc").display().to_string(),
            "-p",
            "recordcount=2000",
            "-p",
            "operationcount=1000000000",
            "-p",
            "fieldlength=1000",
            "-p",
            "verify=true",
            "-p",
            "maxexecutiontime=6",
            "-p",
            "status.interval=1",
            "-s",
            "-threads",
            "16",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let cpu_ticks = || -> u64 {
        // utime + stime of the child, fields 14 and 15 of /proc/PID/stat.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit(')').next().unwrap_or("");
        let f: Vec<&str> = after.split_whitespace().collect();
        f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    };
    let mut run_lines: Vec<Instant> = Vec::new();
    let mut in_run = false;
    let mut cpu = (0, 0);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.starts_with("Load throughput") {
            in_run = true;
        } else if in_run && line.contains(" sec: ") {
            run_lines.push(Instant::now());
            match run_lines.len() {
                1 => cpu.0 = cpu_ticks(),
                6 => cpu.1 = cpu_ticks(),
                _ => {}
            }
        }
    }
    assert!(child.wait().unwrap().success());
    assert!(run_lines.len() >= 6, "{} status lines", run_lines.len());
    for pair in run_lines.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap <= interval * 3 / 2,
            "status lines {gap:?} apart (interval {interval:?})"
        );
    }
    // The clients were busy: 16 threads with no pause between operations. How much CPU they got
    // depends on what else the machine runs (clock ticks are 1/100 s on Linux).
    let wall = (run_lines[5] - run_lines[0]).as_secs_f64();
    let busy = (cpu.1 - cpu.0) as f64 / 100.0;
    eprintln!("the load used {busy:.2} s of CPU in {wall:.2} s");
    assert!(busy >= 0.2 * wall, "{busy:.2} s of CPU in {wall:.2} s");
}

/// The output with what varies from run to run (clock, latencies, run times, rates) replaced.
fn normalize(out: &str) -> String {
    let rules = [
        (
            r"(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+ sec: ",
            "<date> <time> <n> sec: ",
        ),
        (r"(Max|Min|Avg|90|99|99\.9|99\.99)=\d+\.\d\d", "$1=#"),
        (
            r"(?m)^(Load|Run) (runtime\(sec\)|throughput\(ops/sec\)): .*$",
            "$1 $2: #",
        ),
        (
            r"bench\.settle\.micros COUNT : \d+",
            "bench.settle.micros COUNT : #",
        ),
    ];
    rules.iter().fold(out.to_string(), |text, (pattern, with)| {
        regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&text, *with)
            .into_owned()
    })
}

/// A small Social Graph run's whole output, normalized, against `tests/golden/`. Set
/// `SHALE_BENCH_BLESS=1` to rewrite the file after a deliberate change of the output.
#[test]
fn a_social_graph_run_matches_its_golden_output() {
    let dir = tempfile::tempdir().unwrap();
    social_graph_trace(dir.path(), 2000, 1000);
    let (code, out, err) = bench_in(
        dir.path(),
        &[
            "-load",
            "-run",
            "-db",
            "memory",
            "-P",
            &eval_file("workload_meta"),
            "-s",
            "-statistics",
            "-p",
            "recordcount=1500",
            "-p",
            "operationcount=1000",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let got = normalize(&out);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/social_graph_memory.txt");
    if std::env::var_os("SHALE_BENCH_BLESS").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(got, want, "output changed; actual:\n{out}");
    // sg.py needs compaction statistics, which the memory backend does not have: it would stop
    // there, after finding the throughput and the tail latency.
    let e = analyse(&out, 1000, Script::LoadAndRun).unwrap_err();
    assert!(e.contains("rocksdb.compact.read.bytes"), "{e}");
}
