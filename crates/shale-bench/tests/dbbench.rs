//! `shale-bench dbbench` through the real binary, with a tiny `--num`: Shale alone, the missing
//! db_bench case, and both engines side by side (which needs db_bench installed).

use std::process::Command;

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .arg("dbbench")
        .args(args)
        .output()
        .expect("run shale-bench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_arguments_are_usage_errors() {
    let (code, _, err) = bench(&["--rounds", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--rounds expects an integer >= 1"), "{err}");
    let (code, out, _) = bench(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--shale-only"), "{out}");
}

#[cfg(not(feature = "shale-engine"))]
#[test]
fn without_the_engine_the_subcommand_says_which_feature_it_needs() {
    let (code, _, err) = bench(&["--shale-only", "--num", "10"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--features shale-engine"), "{err}");
}

#[cfg(feature = "shale-engine")]
mod with_engine {
    use super::bench;

    #[test]
    fn shale_alone_runs_every_benchmark_and_writes_the_report() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report.md");
        let db = dir.path().join("db");
        let (code, stdout, err) = bench(&[
            "--shale-only",
            "--num",
            "3000",
            "--rounds",
            "2",
            "--cpucheck",
            "0",
            "--dir",
            db.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stdout}\n{err}");
        for b in ["fillrandom", "readrandom", "overwrite"] {
            assert_eq!(
                stdout
                    .lines()
                    .filter(|l| l.contains(&format!("shale   | {b}")))
                    .count(),
                2,
                "one {b} line per round:\n{stdout}"
            );
        }
        let md = std::fs::read_to_string(&out).unwrap();
        assert_eq!(md.matches("| shale | ").count(), 3, "{md}");
        assert!(md.contains("RocksDB: not run (Shale only)."), "{md}");
        assert!(!md.contains("shale / rocksdb"), "{md}");
        // Random draws over a random fill find about 63% of the keys.
        let found = md
            .split("Keys found (median): shale ")
            .nth(1)
            .and_then(|s| s.split('%').next())
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no found share in\n{md}"));
        assert!((55.0..72.0).contains(&found), "{found}");
        let raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.with_extension("json")).unwrap())
                .unwrap();
        assert_eq!(raw["shale"].as_array().unwrap().len(), 2);
        // The databases are gone; only the directory given with --dir stays.
        assert_eq!(std::fs::read_dir(&db).unwrap().count(), 0);
    }

    #[test]
    fn a_missing_db_bench_runs_shale_alone_and_fails_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let (code, stdout, err) = bench(&[
            "--db-bench",
            "/no/such/db_bench",
            "--num",
            "500",
            "--rounds",
            "1",
            "--cpucheck",
            "0",
            "--dir",
            dir.path().to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{stdout}\n{err}");
        assert!(err.contains("db_bench not found"), "{err}");
        assert!(stdout.contains("### overwrite"), "{stdout}");
    }

    /// Needs db_bench (Debian package `rocksdb-tools`, which `.ci/run` installs): without it the
    /// test fails rather than pass having compared nothing.
    #[test]
    fn both_engines_side_by_side() {
        assert!(
            shale_bench::dbbench::find_executable("db_bench").is_some(),
            "db_bench is not installed: install Debian's rocksdb-tools (as .ci/run does)"
        );
        let dir = tempfile::tempdir().unwrap();
        let (code, stdout, err) = bench(&[
            "--num",
            "2000",
            "--rounds",
            "2",
            "--cpucheck",
            "0",
            "--dir",
            dir.path().to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stdout}\n{err}");
        assert_eq!(stdout.matches("| shale / rocksdb |").count(), 3, "{stdout}");
        assert!(stdout.contains("round 2 rocksdb | overwrite"), "{stdout}");
        assert!(stdout.contains("(version 7."), "{stdout}");
    }
}
