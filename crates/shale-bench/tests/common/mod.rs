//! Helpers shared by the integration tests: running the binary, and reading its output with the
//! rules of the AegonKV evaluation's analysis scripts (`analysis/ycsb.py`, `sg.py`, `cluster.py`).

#![allow(dead_code)]

use regex::Regex;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's `workloads/` directory.
pub fn workloads() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../workloads")
}

/// A file of `workloads/aegonkv-eval/`.
pub fn eval_file(name: &str) -> String {
    workloads()
        .join("aegonkv-eval")
        .join(name)
        .display()
        .to_string()
}

/// Runs shale-bench in `dir` with `args`; returns the exit code, stdout and stderr.
pub fn bench_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run shale-bench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Which analysis script's rules to apply: `ycsb.py` and `sg.py` read the second statistics block
/// (the one after the run; the first follows the load), `cluster.py` the first (its runs had no
/// load phase).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// `ycsb.py` and `sg.py`.
    LoadAndRun,
    /// `cluster.py`.
    RunOnly,
}

/// What an analysis script takes from one output file.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysed {
    /// `Run throughput(ops/sec): N`, as the text the script keeps.
    pub throughput: String,
    /// The first `99=` of the first line with `<operationcount> operations`.
    pub p99: String,
    /// `rocksdb.compact.read.bytes` of the chosen statistics block.
    pub compact_read: u64,
    /// `rocksdb.compact.write.bytes` of the chosen statistics block.
    pub compact_write: u64,
    /// `rocksdb.stall.micros` of the chosen statistics block.
    pub stall_micros: u64,
}

/// Applies the scripts' regular expressions to `content`, for a run of `operation_count`
/// operations. An `Err` names what a script would have failed on (an `IndexError` in Python).
pub fn analyse(content: &str, operation_count: u64, script: Script) -> Result<Analysed, String> {
    let first = |pattern: &str, prefix: &str| -> Result<String, String> {
        let re = Regex::new(pattern).expect("a valid pattern");
        re.find(content)
            .map(|m| m.as_str()[prefix.len()..].to_string())
            .ok_or_else(|| format!("no match for {pattern}"))
    };
    let throughput = first(
        r"Run throughput\(ops/sec\): \d+\.*\d*",
        "Run throughput(ops/sec): ",
    )?;
    let line_re = Regex::new(&format!("{operation_count} operations.+")).unwrap();
    let line = line_re
        .find(content)
        .ok_or_else(|| format!("no line with '{operation_count} operations'"))?;
    let p99 = Regex::new(r"99=\d+\.*\d*")
        .unwrap()
        .find(line.as_str())
        .ok_or("no 99= on the line")?
        .as_str()[3..]
        .to_string();
    let index = match script {
        Script::LoadAndRun => 1,
        Script::RunOnly => 0,
    };
    let nth = |name: &str| -> Result<u64, String> {
        let re = Regex::new(&format!(r"{} COUNT : \d+", regex::escape(name))).unwrap();
        let m = re
            .find_iter(content)
            .nth(index)
            .ok_or_else(|| format!("fewer than {} occurrences of {name}", index + 1))?;
        m.as_str()[name.len() + " COUNT : ".len()..]
            .parse()
            .map_err(|e| format!("{name}: {e}"))
    };
    Ok(Analysed {
        throughput,
        p99,
        compact_read: nth("rocksdb.compact.read.bytes")?,
        compact_write: nth("rocksdb.compact.write.bytes")?,
        stall_micros: nth("rocksdb.stall.micros")?,
    })
}
