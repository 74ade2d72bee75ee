//! Whole runs of the harness: every shipped workload file against the in-memory backend with
//! verification on, and the command line's error messages, through the real binary.

use std::path::PathBuf;
use std::process::Command;

fn workloads() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../workloads")
}

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .args(args)
        .output()
        .expect("run shale-bench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn workload(name: &str) -> String {
    workloads().join(name).display().to_string()
}

#[test]
fn every_ycsb_workload_loads_runs_and_verifies_on_the_memory_backend() {
    for w in [
        "workloada",
        "workloadb",
        "workloadc",
        "workloadd",
        "workloade",
        "workloadf",
        "workloadg",
    ] {
        let (code, out, err) = bench(&[
            "-load",
            "-run",
            "-db",
            "memory",
            "-P",
            &workload(w),
            "-p",
            "recordcount=500",
            "-p",
            "operationcount=1000",
            "-p",
            "verify=true",
            "-p",
            "maxscanlength=20",
            "-threads",
            "3",
        ]);
        assert_eq!(code, 0, "{w}: {out}\n{err}");
        assert!(out.contains("Load operations(ops): 500\n"), "{w}: {out}");
        assert!(
            out.contains("Run operations success(ops): 1000\n"),
            "{w}: {out}"
        );
        assert!(out.contains("Run operations fail(ops): 0\n"), "{w}: {out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("Run throughput(ops/sec): ")),
            "{w}: {out}"
        );
    }
}

#[test]
fn writes_of_one_field_keep_every_record_verifiable() {
    let (code, out, err) = bench(&[
        "-load",
        "-run",
        "-db",
        "memory",
        "-P",
        &workload("workloada"),
        "-p",
        "recordcount=300",
        "-p",
        "operationcount=3000",
        "-p",
        "verify=true",
        "-p",
        "writeallfields=false",
        "-p",
        "fieldlengthdistribution=uniform",
        "-p",
        "requestdistribution=hotspot",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Run operations fail(ops): 0"), "{out}");
}

#[test]
fn status_lines_and_statistics_have_ycsb_cpp_format() {
    let (code, out, err) = bench(&[
        "-load",
        "-run",
        "-db",
        "memory",
        "-P",
        &workload("workloadc"),
        "-p",
        "recordcount=100",
        "-p",
        "operationcount=100",
        "-s",
        "-statistics",
    ]);
    assert_eq!(code, 0, "{err}");
    let status: Vec<&str> = out.lines().filter(|l| l.contains(" sec: ")).collect();
    assert_eq!(status.len(), 2, "{out}");
    let run = status[1];
    // 2024-02-29 09:57:35 0 sec: 100 operations; [READ: Count=100 Max=.. Min=.. Avg=.. 90=.. 99=.. 99.9=.. 99.99=..]
    assert_eq!(run.as_bytes()[4], b'-');
    assert!(
        run[19..].starts_with(" 0 sec: 100 operations; [READ: Count=100 Max="),
        "{run}"
    );
    for field in [" Min=", " Avg=", " 90=", " 99=", " 99.9=", " 99.99="] {
        assert!(run.contains(field), "{run}");
    }
    assert!(out.contains("\nmemory.keys COUNT : 100\n"), "{out}");
    assert!(out.contains("\ndisk.used.bytes COUNT : 0\n"), "{out}");
}

#[test]
fn the_social_graph_workload_loads_runs_and_verifies() {
    let (code, out, err) = bench(&[
        "-load",
        "-run",
        "-db",
        "memory",
        "-P",
        &workload("workload_meta"),
        "-p",
        "recordcount=3000",
        "-p",
        "operationcount=3000",
        "-p",
        "verify=true",
        "-p",
        "mix_max_scan_len=50",
        "-threads",
        "2",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Run operations fail(ops): 0"), "{out}");
}

#[test]
fn a_generated_trace_replays_with_verification() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let (code, _, err) = bench(&[
        "gen-trace",
        "-o",
        trace.to_str().unwrap(),
        "-ops",
        "5000",
        "-keys",
        "500",
        "-mix",
        "get=0.6,set=0.3,append=0.05,delete=0.05",
    ]);
    assert_eq!(code, 0, "{err}");
    let result = dir.path().join("r.json");
    let (code, out, err) = bench(&[
        "-load",
        "-run",
        "-db",
        "memory",
        "-P",
        &workload("workload_cluster"),
        "-p",
        &format!("tracefile={}", trace.display()),
        "-p",
        "verify=true",
        "-p",
        &format!("resultfile={}", result.display()),
        "-threads",
        "2",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Run operations success(ops): 5000"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    assert_eq!(json["run"]["operations"], 5000);
    assert_eq!(json["db"], "memory");
}

#[test]
fn a_malformed_trace_line_fails_the_run_and_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.csv");
    std::fs::write(&trace, "0,k1,2,10,1,get,0\n1,k2,2,ten,1,set,0\n").unwrap();
    let (code, _, err) = bench(&[
        "-run",
        "-db",
        "memory",
        "-p",
        "workload=trace",
        "-p",
        &format!("tracefile={}", trace.display()),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("bad.csv:2: column value_size is not an unsigned integer"),
        "{err}"
    );
}

#[test]
fn an_unknown_property_is_an_error_with_a_suggestion() {
    let (code, _, err) = bench(&[
        "-load",
        "-db",
        "memory",
        "-P",
        &workload("workloada"),
        "-p",
        "recordcont=10",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown property 'recordcont' (set at -p on the command line); did you mean recordcount?"), "{err}");
}

#[test]
fn a_bad_value_and_a_missing_file_are_clear_errors() {
    let (code, _, err) = bench(&[
        "-load",
        "-db",
        "memory",
        "-P",
        &workload("workloada"),
        "-p",
        "threadcount=many",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad value for property threadcount: 'many' is not an unsigned integer"),
        "{err}"
    );
    let (code, _, err) = bench(&["-load", "-db", "memory", "-P", "no-such-workload"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot read properties file no-such-workload"),
        "{err}"
    );
    let (code, _, err) = bench(&[
        "-load",
        "-db",
        "memory",
        "-P",
        &workload("workloada"),
        "-p",
        "requestdistribution=zipf",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("is not one of: uniform, zipfian, latest, hotspot, sequential"),
        "{err}"
    );
}

#[test]
fn a_property_of_another_backend_is_named_as_such() {
    let (code, _, err) = bench(&[
        "-load",
        "-db",
        "memory",
        "-P",
        &workload("workloada"),
        "-P",
        &workload("rocksdb.properties"),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("belongs to backend rocksdb, but -db is memory"),
        "{err}"
    );
}

#[test]
fn compare_writes_a_table_of_medians_and_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let (code, stdout, err) = bench(&[
        "compare",
        "-db",
        "memory,twin=memory",
        "-rounds",
        "2",
        "-cpucheck",
        "0",
        "-out",
        out.to_str().unwrap(),
        "-P",
        &workload("workloadb"),
        "-p",
        "recordcount=200",
        "-p",
        "operationcount=400",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("| metric (median) | memory | twin |"),
        "{stdout}"
    );
    assert!(stdout.contains("| run throughput (ops/s) |"), "{stdout}");
    for f in [
        "compare.md",
        "compare.json",
        "compare-throughput.svg",
        "compare-latency.svg",
        "twin-r2.json",
        "memory-r1.log",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
}
