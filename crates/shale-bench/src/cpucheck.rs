//! The two-thread CPU check recorded beside every comparison round.
//!
//! The benchmark machine's CPU capacity drifts between about one and two cores over minutes,
//! invisibly from inside the guest (DESIGN.md section 8). `sysbench cpu --threads=2` measures it:
//! its events per second roughly double between the slow and the fast state. Each round of
//! `compare` records it so a figure can be read against the capacity it was taken at.

use std::process::Command;

/// Runs `sysbench cpu --threads=2 --time=SECS run` and returns its events per second, or `None`
/// when sysbench is not installed or its output has no rate.
pub fn sysbench_cpu_events_per_sec(secs: u32) -> Option<f64> {
    let out = Command::new("sysbench")
        .args(["cpu", "--threads=2", &format!("--time={secs}"), "run"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    parse_sysbench_events_per_sec(&String::from_utf8_lossy(&out.stdout))
}

/// Extracts `events per second: N` from sysbench's report.
pub fn parse_sysbench_events_per_sec(report: &str) -> Option<f64> {
    report
        .lines()
        .find_map(|l| l.trim().strip_prefix("events per second:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The per-round rates as one line: `round 1: 2011, round 2: n/a, ...`.
pub fn rounds_line(events_per_sec: &[Option<f64>]) -> String {
    events_per_sec
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "round {}: {}",
                i + 1,
                c.map_or("n/a".into(), |v| format!("{v:.0}"))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_read_from_a_sysbench_report() {
        let report = "CPU speed:\n    events per second:  2011.43\n\nGeneral statistics:\n";
        assert_eq!(parse_sysbench_events_per_sec(report), Some(2011.43));
        assert_eq!(parse_sysbench_events_per_sec("nothing"), None);
    }
}
