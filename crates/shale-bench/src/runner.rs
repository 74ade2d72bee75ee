//! Runs one phase (load or run): client threads, throttling, status lines, progress.
//!
//! Concurrency: `threads` client threads share the workload and the backend; each has its own
//! [`Client`] and [`crate::measure::Recorder`]. A status thread wakes every
//! [`TIMELINE_INTERVAL`] to sample throughput (for plots and the progress bar) and, when `-s` is
//! given, prints YCSB-cpp's status line as the phase starts (at 0 s), at every multiple of
//! `status.interval` after the start, and once more when the phase ends. The lines are scheduled
//! against the phase's start rather than the previous line, so they do not drift, and they read
//! the recorders' lock-free counters, so a client thread stuck in a slow operation cannot hold
//! one back.
//!
//! Throttling (`target` operations per second, or the workload's own rate): each thread paces
//! itself to `rate / threads`, scheduling operation `i` at a fixed interval after the previous
//! schedule, so a slow operation is caught up on rather than lost (YCSB's behaviour).

use crate::backend::Backend;
use crate::fmt::local_timestamp;
use crate::measure::{Measurements, OpSummary};
use crate::workload::{Phase, Workload};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often throughput is sampled for the timeline and the progress bar.
pub const TIMELINE_INTERVAL: Duration = Duration::from_secs(1);

/// How a phase runs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Client threads (`threadcount`).
    pub threads: usize,
    /// Total operations per second across threads (`target`); `None`: as fast as possible.
    pub target: Option<f64>,
    /// Print a status line this often (`-s`, `status.interval`).
    pub status_interval: Option<Duration>,
    /// Show a progress bar when stderr is a terminal.
    pub progress: bool,
    /// Stop the phase after this long (`maxexecutiontime`).
    pub max_execution_time: Option<Duration>,
}

/// One throughput sample.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelinePoint {
    /// Seconds since the phase started.
    pub t_secs: f64,
    /// Operations finished since the phase started.
    pub ops: u64,
}

/// What a phase did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PhaseResult {
    /// `Load` or `Run`.
    pub phase: String,
    /// Wall-clock seconds from the first thread's start to the last thread's end.
    pub runtime_secs: f64,
    /// Transactions that succeeded (YCSB-cpp's `operations success`).
    pub operations: u64,
    /// Transactions that did not succeed: failed (errors, missing records, values that did not
    /// verify) or skipped (YCSB-cpp's `operations fail`).
    pub failed: u64,
    /// Transactions skipped among `failed`: trace operations the replay does not perform.
    #[serde(default)]
    pub skipped: u64,
    /// Values that did not verify (`verify=true`).
    pub verify_failures: u64,
    /// Reads that found nothing where that is normal (trace replay).
    pub misses: u64,
    /// Malformed input lines that stopped a thread (trace replay).
    pub input_errors: u64,
    /// Successful operations per second.
    pub throughput: f64,
    /// Latency summary per operation type.
    pub ops: Vec<OpSummary>,
    /// Throughput samples.
    pub timeline: Vec<TimelinePoint>,
}

struct Done {
    flag: Mutex<bool>,
    cv: Condvar,
}

/// Runs `phase` of `workload` against `db` and returns its result; prints status lines
/// (and the final status line) when configured.
pub fn run_phase(
    workload: &dyn Workload,
    db: &dyn Backend,
    phase: Phase,
    cfg: &RunConfig,
) -> PhaseResult {
    let threads = cfg.threads.max(1);
    let total = workload.operation_count(phase);
    let measurements = Measurements::new();
    let stop = AtomicBool::new(false);
    let done = Done {
        flag: Mutex::new(false),
        cv: Condvar::new(),
    };
    let bar = progress_bar(cfg, total);
    let start = Instant::now();
    // YCSB-cpp prints the first line as the phase starts: printed here, before any client runs,
    // it always shows nothing done.
    if cfg.status_interval.is_some() {
        let line = status_line(
            &local_timestamp(),
            Duration::ZERO,
            &measurements.snapshot().status_message(),
        );
        println!("{line}");
    }
    let mut timeline = vec![TimelinePoint {
        t_secs: 0.0,
        ops: 0,
    }];
    let mut runtime = Duration::ZERO;

    std::thread::scope(|s| {
        let status = s.spawn(|| {
            status_loop(
                &measurements,
                &done,
                &stop,
                cfg,
                start,
                bar.as_ref(),
                &mut timeline,
            )
        });
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let quota = if total == u64::MAX {
                u64::MAX
            } else {
                total / threads as u64 + u64::from((i as u64) < total % threads as u64)
            };
            let measurements = &measurements;
            let stop = &stop;
            handles.push(s.spawn(move || {
                let mut recorder = measurements.recorder();
                let mut client = workload.client(phase, i, quota);
                let mut next_due = Instant::now();
                let mut done_ops = 0u64;
                while done_ops < quota && !stop.load(Ordering::Relaxed) {
                    let rate = if phase == Phase::Run {
                        workload
                            .rate_at(start.elapsed().as_secs_f64())
                            .or(cfg.target)
                    } else {
                        cfg.target
                    };
                    if let Some(rate) = rate.filter(|r| *r > 0.0) {
                        next_due += Duration::from_secs_f64(threads as f64 / rate);
                        let now = Instant::now();
                        if next_due > now {
                            std::thread::sleep(next_due - now);
                        }
                    }
                    let Some(outcome) = client.step(db, &mut recorder) else {
                        break;
                    };
                    recorder.record_outcome(outcome);
                    done_ops += 1;
                }
            }));
        }
        for h in handles {
            // A panicking client thread is a bug in the harness: let it surface.
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        runtime = start.elapsed();
        *done.flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        done.cv.notify_all();
        if let Err(p) = status.join() {
            std::panic::resume_unwind(p);
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }

    let snap = measurements.snapshot();
    let runtime_secs = runtime.as_secs_f64();
    let operations = snap.succeeded();
    PhaseResult {
        phase: phase.label().to_string(),
        runtime_secs,
        operations,
        failed: snap.failed() + snap.skipped(),
        skipped: snap.skipped(),
        verify_failures: snap.verify_failures(),
        misses: snap.misses(),
        input_errors: snap.input_errors(),
        throughput: if runtime_secs > 0.0 {
            operations as f64 / runtime_secs
        } else {
            0.0
        },
        ops: snap.summaries(),
        timeline,
    }
}

fn progress_bar(cfg: &RunConfig, total: u64) -> Option<indicatif::ProgressBar> {
    if !cfg.progress || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = if total == u64::MAX {
        indicatif::ProgressBar::new_spinner()
    } else {
        indicatif::ProgressBar::new(total)
    };
    let style = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:40}] {human_pos}/{human_len} ops, {per_sec}, eta {eta}",
    )
    .map(|s| s.progress_chars("=> "));
    if let Ok(style) = style {
        bar.set_style(style);
    }
    Some(bar)
}

/// One YCSB-cpp status line: `<date> <secs> sec: <n> operations; [OP: ...] ...`.
pub fn status_line(timestamp: &str, elapsed: Duration, body: &str) -> String {
    format!("{timestamp} {} sec: {body}", elapsed.as_secs())
}

fn status_loop(
    m: &Measurements,
    done: &Done,
    stop: &AtomicBool,
    cfg: &RunConfig,
    start: Instant,
    bar: Option<&indicatif::ProgressBar>,
    timeline: &mut Vec<TimelinePoint>,
) {
    let print = |elapsed: Duration| {
        let line = status_line(&local_timestamp(), elapsed, &m.snapshot().status_message());
        match bar {
            Some(b) => b.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    };
    let mut next_sample = TIMELINE_INTERVAL;
    let mut next_status = cfg.status_interval;
    loop {
        let wake = next_status.map_or(next_sample, |s| s.min(next_sample));
        let finished = {
            let guard = done.flag.lock().unwrap_or_else(|e| e.into_inner());
            let timeout = wake.saturating_sub(start.elapsed());
            let (guard, _) = done
                .cv
                .wait_timeout_while(guard, timeout, |d| !*d)
                .unwrap_or_else(|e| e.into_inner());
            *guard
        };
        let elapsed = start.elapsed();
        if finished {
            timeline.push(TimelinePoint {
                t_secs: elapsed.as_secs_f64(),
                ops: m.total_count(),
            });
            if cfg.status_interval.is_some() {
                print(elapsed);
            }
            return;
        }
        if let (Some(interval), Some(due)) = (cfg.status_interval, next_status) {
            if elapsed >= due {
                print(elapsed);
                // The next multiple of the interval after now: a line that came late (a stalled
                // machine) is not followed by a burst of catch-up lines.
                let periods = elapsed.as_nanos() / interval.as_nanos().max(1) + 1;
                next_status = Some(interval * u32::try_from(periods).unwrap_or(u32::MAX));
            }
        }
        if elapsed >= next_sample {
            let ops = m.total_count();
            timeline.push(TimelinePoint {
                t_secs: elapsed.as_secs_f64(),
                ops,
            });
            if let Some(b) = bar {
                b.set_position(ops);
            }
            while next_sample <= elapsed {
                next_sample += TIMELINE_INTERVAL;
            }
        }
        if cfg.max_execution_time.is_some_and(|max| elapsed >= max) {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

/// The final lines of a phase, exactly as YCSB-cpp (the AegonKV fork) prints them
/// (`Load runtime(sec): ...`, `... operations success(ops)`, `... operations fail(ops)`,
/// `... throughput(ops/sec)`), followed by the harness's own counts when they are not zero.
pub fn final_lines(r: &PhaseResult) -> Vec<String> {
    use crate::fmt::cpp_double;
    let label = &r.phase;
    let mut lines = vec![
        format!("{label} runtime(sec): {}", cpp_double(r.runtime_secs)),
        format!("{label} operations success(ops): {}", r.operations),
        format!("{label} operations fail(ops): {}", r.failed),
        format!("{label} throughput(ops/sec): {}", cpp_double(r.throughput)),
    ];
    if r.skipped > 0 {
        lines.push(format!(
            "{label} operations skipped(ops): {} (trace operations the replay does not perform, counted as fail)",
            r.skipped
        ));
    }
    if r.misses > 0 {
        lines.push(format!("{label} read misses(ops): {}", r.misses));
    }
    if r.verify_failures > 0 {
        lines.push(format!(
            "{label} verification failures(ops): {}",
            r.verify_failures
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(phase: &str) -> PhaseResult {
        PhaseResult {
            phase: phase.into(),
            runtime_secs: 3438.48,
            operations: 200_000_000,
            failed: 0,
            skipped: 0,
            verify_failures: 0,
            misses: 0,
            input_errors: 0,
            throughput: 58165.312,
            ops: vec![],
            timeline: vec![],
        }
    }

    #[test]
    fn run_final_lines_match_ycsb_cpp() {
        assert_eq!(
            final_lines(&result("Run")),
            [
                "Run runtime(sec): 3438.48",
                "Run operations success(ops): 200000000",
                "Run operations fail(ops): 0",
                "Run throughput(ops/sec): 58165.3",
            ]
        );
    }

    #[test]
    fn load_final_lines_match_ycsb_cpp() {
        assert_eq!(
            final_lines(&result("Load")),
            [
                "Load runtime(sec): 3438.48",
                "Load operations success(ops): 200000000",
                "Load operations fail(ops): 0",
                "Load throughput(ops/sec): 58165.3"
            ]
        );
    }

    #[test]
    fn status_line_has_date_seconds_and_body() {
        assert_eq!(
            status_line(
                "2024-02-29 09:57:35",
                Duration::from_millis(3_438_900),
                "0 operations;"
            ),
            "2024-02-29 09:57:35 3438 sec: 0 operations;"
        );
    }
}
