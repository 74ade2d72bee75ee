//! `shale-bench gen-trace`: writes the trace files the AegonKV fork replays.
//!
//! - With `-benchmarks=...mixgraph...` ([`mixgraph`]): a Social Graph trace, `key,op,size` per
//!   line, from db_bench's own flags (paste the evaluation's db_bench command), for the core
//!   workload's `filetype=meta`. This is the step for which the evaluation needed AegonKV's
//!   modified db_bench.
//! - Otherwise ([`twitter`]): a synthetic Twitter cache trace for `filetype=cluster`.
//!
//! `shale-bench prepare-cluster` ([`prepare`]) lists a Twitter trace's keys to load, as the
//! evaluation's `workload_prepare.py` does.
//!
//! Flags are `-name value` or `-name=value` (one or two dashes).

pub mod mixgraph;
pub mod prepare;
pub mod twitter;

use crate::cli::GenTraceArgs;
use crate::error::{Error, Result};
use std::io::Write;

/// Runs `gen-trace`.
///
/// # Errors
/// `Usage` for bad flags, `Io` when the output cannot be written.
pub fn run_gen_trace(args: &GenTraceArgs) -> Result<()> {
    if args.settings.iter().any(|(k, _)| k == "benchmarks") {
        return mixgraph::run(args);
    }
    let spec = twitter::TraceSpec::from_settings(&args.settings)?;
    write_lines(args.out.as_deref(), |out| {
        spec.generate(|r| writeln!(out, "{}", r.to_csv()).map_err(|e| Error::io("i/o error", e)))
    })
}

/// Opens `out` (stdout when `None`), lets `body` write to it, and flushes it; I/O errors name the
/// file.
///
/// # Errors
/// `Io` when the file cannot be created or written; whatever `body` returns.
pub(crate) fn write_lines(
    out: Option<&std::path::Path>,
    body: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let (mut w, name): (Box<dyn Write>, String) = match out {
        Some(p) => (
            Box::new(std::io::BufWriter::with_capacity(
                1 << 20,
                std::fs::File::create(p)
                    .map_err(|e| Error::io(format!("cannot create {}", p.display()), e))?,
            )),
            p.display().to_string(),
        ),
        None => (
            Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            "stdout".into(),
        ),
    };
    let rename = |e: Error| {
        if e.kind() == crate::error::ErrorKind::Io {
            Error::new(
                crate::error::ErrorKind::Io,
                format!("cannot write {name}: {e}"),
            )
        } else {
            e
        }
    };
    body(&mut w).map_err(rename)?;
    w.flush()
        .map_err(|e| Error::io(format!("cannot write {name}"), e))
}
