//! A tiny load and run on the embedded Shale engine with verification on. Built with the
//! `shale-engine` feature (on once `shale::Db` exists).
#![cfg(feature = "shale-engine")]

use std::process::Command;

#[test]
fn shale_loads_runs_and_verifies_a_few_thousand_records() {
    let dir = tempfile::tempdir().unwrap();
    let workloads = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
    for w in ["workloada", "workloade"] {
        let out = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
            .args(["-load", "-run", "-db", "shale", "-P"])
            .arg(workloads.join(w))
            .args([
                "-p",
                "recordcount=3000",
                "-p",
                "operationcount=3000",
                "-p",
                "verify=true",
                "-p",
                "maxscanlength=20",
            ])
            .args([
                "-p",
                "shale.write_buffer_size=262144",
                "-p",
                "shale.destroy=true",
                "-threads",
                "2",
                "-statistics",
            ])
            .arg("-p")
            .arg(format!("shale.dbname={}", dir.path().join(w).display()))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{w}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("Run operations fail(ops): 0"), "{stdout}");
        assert!(
            stdout.contains("rocksdb.compact.write.bytes COUNT : "),
            "{stdout}"
        );
    }
}
