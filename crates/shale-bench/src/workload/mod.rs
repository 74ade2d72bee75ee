//! Workloads: what the client threads do.
//!
//! A [`Workload`] is built once from the properties and shared by all client threads; each thread
//! asks it for a [`Client`] holding its own random stream and scratch buffers. A client performs
//! one operation per [`Client::step`], timing it into the thread's [`Recorder`].
//!
//! Workloads:
//! - `core` ([`core::CoreWorkload`]): YCSB's core workload (A-G and anything else its properties
//!   say), with the AegonKV fork's trace operations (`fromfileproportion`, [`fromfile`]): replay of
//!   a Social Graph trace (`filetype=meta`) or a Twitter cache trace (`filetype=cluster`).
//! - `mixgraph` ([`mixgraph::MixGraph`]): RocksDB db_bench's mixgraph (the Social Graph model of
//!   Cao et al., FAST'20) generated on the fly; `shale-bench gen-trace` writes the same model to a
//!   trace file for `filetype=meta`.
//!
//! Errors during a run (a backend failure, a value that does not verify) do not stop the run: the
//! operation counts as failed and the first [`MAX_REPORTED_ERRORS`] messages go to stderr, as a
//! benchmark must finish to be useful. A failed verification also makes the process exit non-zero.

pub mod core;
pub mod fromfile;
pub mod mixgraph;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::measure::{OpKind, Outcome, Recorder};
use crate::props::{PropSpec, Properties};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Errors printed in full before the rest are only counted.
pub const MAX_REPORTED_ERRORS: u64 = 10;

/// Default seed of all random streams: runs are repeatable unless `seed` is set.
pub const DEFAULT_SEED: u64 = 0x005E_ED0F_5A1E;

/// The two phases of a YCSB run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Insert the initial records (`-load`).
    Load,
    /// The transaction phase (`-run`).
    Run,
}

impl Phase {
    /// `Load` or `Run`, as the final lines spell it.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Load => "Load",
            Phase::Run => "Run",
        }
    }
}

/// A workload shared by all client threads.
pub trait Workload: Send + Sync {
    /// Operations `phase` performs in total (split evenly over the threads). A workload that
    /// runs dry earlier (a trace) makes [`Client::step`] return false.
    fn operation_count(&self, phase: Phase) -> u64;

    /// A client for thread `thread` of `phase`, which will perform at most `quota` transactions.
    fn client(&self, phase: Phase, thread: usize, quota: u64) -> Box<dyn Client + '_>;

    /// The target rate (operations per second, all threads) `elapsed_secs` into the run phase,
    /// when the workload shapes its own rate (mixgraph's sine); `None` otherwise.
    fn rate_at(&self, _elapsed_secs: f64) -> Option<f64> {
        None
    }
}

/// One client thread's view of a workload.
pub trait Client: Send {
    /// Performs one transaction of the phase the client was made for, recording its operations
    /// into `rec`, and returns what it came to; `None` when the workload has nothing left.
    fn step(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Option<Outcome>;
}

/// Shared error accounting for one run: prints the first errors, counts the rest.
#[derive(Debug, Default)]
pub struct ErrorLog {
    reported: AtomicU64,
    verify: bool,
}

impl ErrorLog {
    /// A log for a run with (`verify`) or without value verification. Without it, a value that
    /// is missing or wrong is still a failed operation but not a verification failure.
    pub fn new(verify: bool) -> ErrorLog {
        ErrorLog {
            reported: AtomicU64::new(0),
            verify,
        }
    }

    /// Reports one failed operation.
    pub fn report(&self, message: &str) {
        let n = self.reported.fetch_add(1, Ordering::Relaxed);
        if n < MAX_REPORTED_ERRORS {
            eprintln!("error: {message}");
        } else if n == MAX_REPORTED_ERRORS {
            eprintln!("error: more errors follow; only their count is reported");
        }
    }

    /// Errors reported so far.
    pub fn count(&self) -> u64 {
        self.reported.load(Ordering::Relaxed)
    }
}

/// Runs `op` and measures how long it took.
pub(crate) fn time_op<T>(op: impl FnOnce() -> Result<T>) -> (Result<T>, Duration) {
    let start = Instant::now();
    let result = op();
    (result, start.elapsed())
}

/// Records a finished operation of `kind` that took `latency`: successful when `outcome` is
/// `Ok`, otherwise failed and reported (a `Verify` error also counts as a verification failure).
/// Returns the operation's outcome.
pub(crate) fn finish(
    rec: &mut Recorder,
    log: &ErrorLog,
    kind: OpKind,
    latency: Duration,
    outcome: Result<()>,
) -> Outcome {
    rec.record(kind, latency, outcome.is_ok());
    match outcome {
        Ok(()) => Outcome::Ok,
        Err(e) => {
            if log.verify && e.kind() == crate::error::ErrorKind::Verify {
                rec.record_verify_failure();
            }
            log.report(&format!("{}: {e}", kind.name()));
            Outcome::Failed
        }
    }
}

/// A key as printable text (binary bytes escaped), for messages.
pub fn show_key(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

/// Names of the workloads, for `workload=`.
pub const WORKLOAD_NAMES: [&str; 2] = ["core", "mixgraph"];

/// Resolves the `workload` property: `core` (also YCSB's Java class names for the core
/// workload, `com.yahoo.ycsb.workloads.CoreWorkload` and `site.ycsb.workloads.CoreWorkload`) or
/// `mixgraph`.
///
/// # Errors
/// `Property` for anything else.
pub fn workload_kind(props: &Properties) -> Result<&'static str> {
    let v = props.get_str("workload", "core");
    if v.ends_with("CoreWorkload") || v == "core" {
        return Ok("core");
    }
    WORKLOAD_NAMES.iter().copied().find(|n| *n == v).ok_or_else(|| {
        Error::property(format!(
            "bad value for property workload: '{v}' is not one of: {} (or site.ycsb.workloads.CoreWorkload)",
            WORKLOAD_NAMES.join(", ")
        ))
    })
}

/// The property tables of workload `kind`.
pub fn workload_props(kind: &str) -> Vec<&'static [PropSpec]> {
    match kind {
        "mixgraph" => vec![mixgraph::PROPS],
        _ => vec![core::PROPS, fromfile::PROPS],
    }
}

/// Builds the workload the properties describe.
///
/// # Errors
/// `Property` for bad workload properties, `Io`/`Input` for an unreadable trace.
pub fn build_workload(
    props: &Properties,
    log: &std::sync::Arc<ErrorLog>,
) -> Result<Box<dyn Workload>> {
    let seed = props.get_u64("seed", DEFAULT_SEED)?;
    let verify = props.get_bool("verify", false)?;
    let ctx = Context {
        seed,
        verify,
        log: std::sync::Arc::clone(log),
    };
    Ok(match workload_kind(props)? {
        "mixgraph" => Box::new(mixgraph::MixGraph::new(props, ctx)?),
        _ => Box::new(core::CoreWorkload::new(props, ctx)?),
    })
}

/// What every workload needs besides its own properties.
#[derive(Debug, Clone)]
pub struct Context {
    /// Seed of every random stream.
    pub seed: u64,
    /// Check values read against what was written.
    pub verify: bool,
    /// Where failures are reported.
    pub log: std::sync::Arc<ErrorLog>,
}

impl Context {
    /// The seed of thread `thread` in `phase`: independent streams per thread and phase.
    pub fn thread_seed(&self, phase: Phase, thread: usize) -> u64 {
        let tag = match phase {
            Phase::Load => 0x4C4F_4144u64,
            Phase::Run => 0x5255_4E00u64,
        };
        crate::rng::mix64(self.seed ^ crate::rng::mix64(tag.wrapping_mul(1 + thread as u64)))
    }
}
