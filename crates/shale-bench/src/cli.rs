//! The command line.
//!
//! The main mode follows YCSB-cpp exactly: single-dash long flags (`-load -run -db NAME -P file
//! -p name=value -s -statistics`), which is why this is parsed by hand rather than with a
//! derive-based parser. Subcommands (`compare`, `gen-trace`, `plot`) use the same single-dash
//! style; a double dash is accepted too (`--rounds 3`).

use crate::error::{Error, Result};
use crate::props::{Origin, Properties};
use std::path::PathBuf;

/// What to do.
#[derive(Debug)]
pub enum Command {
    /// A YCSB-cpp style load and/or run.
    Ycsb(YcsbArgs),
    /// Several backends side by side.
    Compare(CompareArgs),
    /// Write a trace: Social Graph (db_bench's mixgraph) or Twitter-format.
    GenTrace(GenTraceArgs),
    /// Plot result files.
    Plot(PlotArgs),
    /// Print usage.
    Help,
    /// Print every known property.
    HelpProperties,
}

/// Arguments of the main mode.
#[derive(Debug)]
pub struct YcsbArgs {
    /// All properties, `dbname`/`doload`/`dotransaction`/`status` included.
    pub props: Properties,
    /// `-statistics`: print engine statistics after each phase.
    pub statistics: bool,
}

/// Arguments of `compare`.
#[derive(Debug)]
pub struct CompareArgs {
    /// `-db` entries: `[LABEL=]BACKEND[:PROPFILE[+PROPFILE...]]`.
    pub entries: Vec<String>,
    /// Rounds (`-rounds`).
    pub rounds: u32,
    /// Output directory (`-out`).
    pub out: Option<PathBuf>,
    /// Seconds of the CPU check per round (`-cpucheck`, 0 disables).
    pub cpucheck_secs: u32,
    /// Arguments passed through to every run (`-load -run -P -p -s -threads`).
    pub passthrough: Vec<String>,
}

/// Arguments of `gen-trace`.
#[derive(Debug, Default)]
pub struct GenTraceArgs {
    /// `name=value` settings; see [`crate::tracegen`].
    pub settings: Vec<(String, String)>,
    /// Output file (`-o`); stdout when absent.
    pub out: Option<PathBuf>,
}

/// Arguments of `plot`.
#[derive(Debug, Default)]
pub struct PlotArgs {
    /// Result files.
    pub inputs: Vec<PathBuf>,
    /// Output SVG prefix (`-o`).
    pub out: PathBuf,
}

/// Usage text.
pub const USAGE: &str = "\
Usage:
  shale-bench [-load] [-run] -db NAME -P workloadfile [-P propsfile]... [-p name=value]... [-s] [-statistics]
  shale-bench compare -db [LABEL=]NAME[:propsfile[+propsfile]],... [-rounds N] [-out DIR] [-cpucheck SECS]
                      [-load] [-run] -P workloadfile [-p name=value]... [-threads N]
  shale-bench dbbench [--num N] [--rounds N] [--db-bench-arg ARG]... [--out FILE.md] ...  (see dbbench --help)
  shale-bench redis-compare [--rounds N] [--requests N] [--pipelines 1,16] ...  (see redis-compare --help)
  shale-bench large-values [--rounds N] [--sizes 100,300] [--count N] [--clients N] ...  (see large-values --help)
  shale-bench memtable [-n THREADS] [-i KEYS] [-u UPDATE%] [-d SECS] [-k KEYSIZES] ...  (see memtable -help)
  shale-bench gen-trace -benchmarks=mixgraph [db_bench's mixgraph flags: -num=N -reads=N -keyrange_dist_a=..
                        -mix_get_ratio=.. ...] [-path_save_keys=FILE | -o FILE]     (Social Graph, key,op,size)
  shale-bench gen-trace [-o FILE] [-ops N] [-keys N] [-zipf THETA] [-value DIST] [-mix OP=W,...]
                        [-keysize N] [-clients N] [-rate OPS] [-ttl SECS] [-seed N]   (Twitter cache trace)
  shale-bench prepare-cluster -i TRACE [-o KEYS]   (workload_prepare.py: the keys -load writes from initfilepath)
  shale-bench plot -o PREFIX result.json...
  shale-bench -help-properties

Options of the main mode (YCSB-cpp's):
  -load             run the loading phase of the workload
  -run, -t          run the transaction phase of the workload
  -db NAME          the database: shale (also titandb and diffkv: Shale under the AegonKV fork's
                    property names), rocksdb, fjall, resp, memory
  -P FILE           load properties from FILE; files are read in order, later ones override
  -p NAME=VALUE     set a property; overrides every file
  -threads N        same as -p threadcount=N
  -s                print a status line at the start and every status.interval seconds (default 10)
  -statistics       print the engine's statistics after each phase, once background work has
                    settled (RocksDB's names where one exists)
";

fn flag_name(arg: &str) -> Option<&str> {
    let name = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    (!name.is_empty()).then_some(name)
}

fn value<'a>(args: &'a [String], i: &mut usize, flag: &str) -> Result<&'a str> {
    *i += 1;
    args.get(*i)
        .map(String::as_str)
        .ok_or_else(|| Error::usage(format!("missing argument value for -{flag}")))
}

/// Parses the arguments after the program name.
///
/// # Errors
/// `Usage` for unknown flags or missing values; `Io`/`Property` for unreadable `-P` files.
pub fn parse(args: &[String]) -> Result<Command> {
    match args.first().map(String::as_str) {
        None => Ok(Command::Help),
        Some("compare") => parse_compare(&args[1..]).map(Command::Compare),
        Some("gen-trace") => parse_gen_trace(&args[1..]).map(Command::GenTrace),
        Some("plot") => parse_plot(&args[1..]).map(Command::Plot),
        Some(_) => parse_ycsb(args),
    }
}

fn parse_ycsb(args: &[String]) -> Result<Command> {
    let mut props = Properties::new();
    let mut statistics = false;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let Some(flag) = flag_name(arg) else {
            return Err(Error::usage(format!(
                "unexpected argument '{arg}' (flags start with -)"
            )));
        };
        match flag {
            "help" | "h" => return Ok(Command::Help),
            "help-properties" => return Ok(Command::HelpProperties),
            "load" => props.set("doload", "true", Origin::Harness),
            "run" | "t" => props.set("dotransaction", "true", Origin::Harness),
            "s" => props.set("status", "true", Origin::Harness),
            "statistics" => statistics = true,
            "db" => {
                let v = value(args, &mut i, flag)?;
                props.set("dbname", v, Origin::Harness);
            }
            "threads" => {
                let v = value(args, &mut i, flag)?;
                props.set("threadcount", v, Origin::Harness);
            }
            "P" => {
                let v = value(args, &mut i, flag)?;
                props.load_file(std::path::Path::new(v))?;
            }
            "p" => {
                let v = value(args, &mut i, flag)?;
                props.set_arg(v)?;
            }
            _ => return Err(Error::usage(format!("unknown option '{arg}'"))),
        }
        i += 1;
    }
    Ok(Command::Ycsb(YcsbArgs { props, statistics }))
}

fn parse_compare(args: &[String]) -> Result<CompareArgs> {
    let mut c = CompareArgs {
        entries: Vec::new(),
        rounds: 3,
        out: None,
        cpucheck_secs: 5,
        passthrough: Vec::new(),
    };
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let flag =
            flag_name(arg).ok_or_else(|| Error::usage(format!("unexpected argument '{arg}'")))?;
        match flag {
            "db" => {
                let v = value(args, &mut i, flag)?;
                c.entries
                    .extend(v.split(',').filter(|s| !s.is_empty()).map(str::to_string));
            }
            "rounds" => {
                let v = value(args, &mut i, flag)?;
                c.rounds = v.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    Error::usage(format!("-rounds expects a positive integer, got '{v}'"))
                })?;
            }
            "out" => c.out = Some(PathBuf::from(value(args, &mut i, flag)?)),
            "cpucheck" => {
                let v = value(args, &mut i, flag)?;
                c.cpucheck_secs = v
                    .parse()
                    .map_err(|_| Error::usage(format!("-cpucheck expects seconds, got '{v}'")))?;
            }
            "load" | "run" | "t" | "s" | "statistics" => c.passthrough.push(arg.clone()),
            "P" | "p" | "threads" => {
                let v = value(args, &mut i, flag)?;
                c.passthrough.push(format!("-{flag}"));
                c.passthrough.push(v.to_string());
            }
            _ => return Err(Error::usage(format!("unknown option '{arg}' for compare"))),
        }
        i += 1;
    }
    if c.entries.is_empty() {
        return Err(Error::usage(
            "compare needs -db with at least one database (for example -db shale,rocksdb)",
        ));
    }
    Ok(c)
}

fn parse_gen_trace(args: &[String]) -> Result<GenTraceArgs> {
    let mut g = GenTraceArgs::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let flag =
            flag_name(arg).ok_or_else(|| Error::usage(format!("unexpected argument '{arg}'")))?;
        // db_bench's flags come as -name=value; shale-bench's own as -name value.
        let (flag, v) = match flag.split_once('=') {
            Some((f, v)) => (f, v),
            None => (flag, value(args, &mut i, flag)?),
        };
        if flag == "o" {
            g.out = Some(PathBuf::from(v));
        } else {
            g.settings.push((flag.to_string(), v.to_string()));
        }
        i += 1;
    }
    Ok(g)
}

fn parse_plot(args: &[String]) -> Result<PlotArgs> {
    let mut p = PlotArgs {
        inputs: Vec::new(),
        out: PathBuf::from("shale-bench"),
    };
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if flag_name(arg) == Some("o") {
            p.out = PathBuf::from(value(args, &mut i, "o")?);
        } else if arg.starts_with('-') {
            return Err(Error::usage(format!("unknown option '{arg}' for plot")));
        } else {
            p.inputs.push(PathBuf::from(arg));
        }
        i += 1;
    }
    if p.inputs.is_empty() {
        return Err(Error::usage(
            "plot needs at least one result file (written with -p resultfile=...)",
        ));
    }
    Ok(p)
}

/// Prints a subcommand's report and, with `--out`, writes it to that file too.
///
/// # Errors
/// `Io` when the file cannot be written.
pub fn emit_report(report: &str, out: Option<&std::path::Path>) -> Result<()> {
    print!("{report}");
    if let Some(out) = out {
        std::fs::write(out, report)
            .map_err(|e| Error::io(format!("cannot write {}", out.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn ycsb_flags_set_the_properties_ycsb_cpp_sets() {
        let Command::Ycsb(a) = parse(&args(
            "-load -run -db memory -s -statistics -threads 4 -p recordcount=10",
        ))
        .unwrap() else {
            panic!("not the main mode")
        };
        assert!(a.statistics);
        for (k, v) in [
            ("doload", "true"),
            ("dotransaction", "true"),
            ("dbname", "memory"),
            ("status", "true"),
            ("threadcount", "4"),
            ("recordcount", "10"),
        ] {
            assert_eq!(a.props.get(k), Some(v), "{k}");
        }
    }

    #[test]
    fn unknown_flags_and_missing_values_are_usage_errors() {
        let e = parse(&args("-load -frobnicate")).unwrap_err();
        assert_eq!(e.to_string(), "unknown option '-frobnicate'");
        let e = parse(&args("-load -db")).unwrap_err();
        assert_eq!(e.to_string(), "missing argument value for -db");
        let e = parse(&args("-P no/such/file")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read properties file no/such/file"),
            "{e}"
        );
    }

    #[test]
    fn compare_collects_entries_and_passes_the_rest_through() {
        let Command::Compare(c) = parse(&args(
            "compare -db shale,rocksdb -db fjall --rounds 5 -P w -p a=b -load",
        ))
        .unwrap() else {
            panic!("not compare")
        };
        assert_eq!(c.entries, ["shale", "rocksdb", "fjall"]);
        assert_eq!(c.rounds, 5);
        assert_eq!(c.passthrough, ["-P", "w", "-p", "a=b", "-load"]);
        assert!(parse(&args("compare -rounds 2")).is_err());
        assert!(parse(&args("compare -db a -rounds 0")).is_err());
    }
}
