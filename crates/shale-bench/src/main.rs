//! The `shale-bench` binary: parses the command line and dispatches.

use shale_bench::cli::{self, Command};
use shale_bench::{
    app, cluster_bench, compare, dbbench, memtable_bench, plot, redis_compare, tracegen, ErrorKind,
};
use std::process::ExitCode;

/// Exit status for configuration and usage errors.
const EXIT_USAGE: u8 = 2;
/// Exit status for failures during the benchmark (backend errors, failed verification).
const EXIT_FAILURE: u8 = 1;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `dbbench` takes db_bench-style double-dash flags and parses them itself.
    if args.first().map(String::as_str) == Some("dbbench") {
        return exit_code(dbbench::run_command(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("cluster-bench") {
        return exit_code(cluster_bench::run_command(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("redis-compare") {
        return exit_code(redis_compare::run_command(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("large-values") {
        return exit_code(shale_bench::large_values::run_command(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("memtable") {
        return exit_code(memtable_bench::run_command(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("scan") {
        return exit_code(shale_bench::scan_bench::run_command(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("prepare-cluster") {
        return exit_code(tracegen::prepare::run(&args[1..]).map(|()| true));
    }
    if args.first().map(String::as_str) == Some("cache-compare") {
        return exit_code(shale_bench::cache_load::run_command(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("cache-index") {
        return exit_code(shale_bench::cache_index::run_command(&args[1..]));
    }
    let result = cli::parse(&args).and_then(|cmd| match cmd {
        Command::Help => {
            print!("{}", cli::USAGE);
            Ok(true)
        }
        Command::HelpProperties => {
            app::print_properties_help();
            Ok(true)
        }
        Command::Ycsb(a) => app::run_ycsb(a).map(|r| {
            if r.has_integrity_failures() {
                eprintln!(
                    "error: some values did not verify or some input was malformed (see above)"
                );
            }
            !r.has_integrity_failures()
        }),
        Command::Compare(c) => compare::run_compare(&c).map(|()| true),
        Command::GenTrace(g) => tracegen::run_gen_trace(&g).map(|()| true),
        Command::Plot(p) => plot::run_plot(&p).map(|()| true),
    });
    exit_code(result)
}

/// The exit status for a command's outcome; prints the error, if any.
fn exit_code(result: shale_bench::Result<bool>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(EXIT_FAILURE),
        Err(e) => {
            eprintln!("shale-bench: {e}");
            if e.kind() == ErrorKind::Usage {
                eprintln!("run `shale-bench -help` for usage");
            }
            match e.kind() {
                ErrorKind::Usage | ErrorKind::Property => ExitCode::from(EXIT_USAGE),
                _ => ExitCode::from(EXIT_FAILURE),
            }
        }
    }
}
