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
        assert!(
            out.contains("Load operations success(ops): 500\nLoad operations fail(ops): 0\n"),
            "{w}: {out}"
        );
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
    // Each phase: one line as it starts, one as it ends.
    assert_eq!(status.len(), 4, "{out}");
    assert!(
        status[0][19..].starts_with(" 0 sec: 0 operations;"),
        "{out}"
    );
    assert!(
        status[2][19..].starts_with(" 0 sec: 0 operations;"),
        "{out}"
    );
    let run = status[3];
    // 2024-02-29 09:57:35 0 sec: 100 operations; [READ: Count=100 Max=.. Min=.. Avg=.. 90=.. 99=.. 99.9=.. 99.99=..]
    assert_eq!(run.as_bytes()[4], b'-');
    assert!(
        run[19..].starts_with(" 0 sec: 100 operations; [READ: Count=100 Max="),
        "{run}"
    );
    for field in [" Min=", " Avg=", " 90=", " 99=", " 99.9=", " 99.99="] {
        assert!(run.contains(field), "{run}");
    }
    // Statistics after each phase, in the fork's layout.
    assert_eq!(
        out.matches("\n\nSTATISTICS:\nmemory.keys COUNT : 100\n")
            .count(),
        2,
        "{out}"
    );
    assert!(out.contains("\ndisk.used.bytes COUNT : 0\n"), "{out}");
    assert!(
        out.contains("\nbench.settle.timeout COUNT : 0\n\n"),
        "{out}"
    );
}

#[test]
fn the_mixgraph_workload_loads_runs_and_verifies() {
    let (code, out, err) = bench(&[
        "-load",
        "-run",
        "-db",
        "memory",
        "-P",
        &workload("workload_mixgraph"),
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
    assert!(err.contains("never uses the key-range table"), "{err}");
}

#[test]
fn unknown_properties_are_warnings_with_their_place_unless_strict() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("extra.properties");
    std::fs::write(
        &file,
        "# comment\nrecordcont=10\nrocksdb.write_buffer_size=1\n",
    )
    .unwrap();
    let args = [
        "-load",
        "-db",
        "memory",
        "-P",
        &workload("workloada"),
        "-P",
        file.to_str().unwrap(),
        "-p",
        "recordcount=10",
    ];
    let (code, out, err) = bench(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Load operations success(ops): 10"), "{out}");
    assert_eq!(
        err.matches("warning: 2 properties are not read").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "'recordcont' (set at {}:2); did you mean recordcount?",
            file.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "'rocksdb.write_buffer_size' (set at {}:3) belongs to backend rocksdb, not -db memory",
            file.display()
        )),
        "{err}"
    );
    let mut strict = args.to_vec();
    strict.extend(["-p", "strict=true"]);
    let (code, _, err) = bench(&strict);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown properties (strict=true)"), "{err}");
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
