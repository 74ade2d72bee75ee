//! `shale-bench prepare-cluster -i TRACE -o KEYS`: the evaluation's `workload_prepare.py`, without
//! its hard-coded paths. It lists, one per line in order of first appearance, every key of a
//! Twitter cache trace whose first request is a `get` before any `add`: the keys a replay would
//! read before writing, which `-load` with `initfilepath` then writes. As in the script, only
//! `add` counts as writing a key first (a key first `set`, then read, is listed), and each key is
//! listed once.

use crate::error::{Error, Result};
use std::collections::HashSet;
use std::io::{BufRead, Write};

/// What the preparation found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Trace lines read (blank ones excluded).
    pub lines: u64,
    /// Keys listed.
    pub keys: u64,
}

/// Reads the trace from `input` (named `source` in errors) and writes the keys to `out`.
///
/// # Errors
/// `Io` for read and write errors, `Input` for a line without the 7 columns.
pub fn prepare_cluster(input: impl BufRead, source: &str, out: &mut dyn Write) -> Result<Prepared> {
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut p = Prepared::default();
    for (i, line) in input.split(b'\n').enumerate() {
        let line = line.map_err(|e| Error::io(format!("cannot read {source}:{}", i + 1), e))?;
        let line = line.trim_ascii_end();
        if line.is_empty() {
            continue;
        }
        p.lines += 1;
        let bad = || {
            Error::input(format!(
                "{source}:{}: expected 7 comma-separated columns, got '{}'",
                i + 1,
                line.escape_ascii()
            ))
        };
        let first = line.iter().position(|&b| b == b',').ok_or_else(bad)?;
        let cols: Vec<&[u8]> = line[first + 1..].rsplitn(6, |&b| b == b',').collect();
        if cols.len() != 6 {
            return Err(bad());
        }
        // rsplitn yields the columns from the end: ttl, op, client, value_size, key_size, key.
        let (key, op) = (cols[5], cols[1]);
        match op {
            b"add" => {
                seen.insert(key.to_vec());
            }
            b"get" if !seen.contains(key) => {
                out.write_all(key)
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(|e| Error::io("i/o error", e))?;
                seen.insert(key.to_vec());
                p.keys += 1;
            }
            _ => {}
        }
    }
    Ok(p)
}

/// Runs `prepare-cluster` with `-i TRACE -o KEYS` (stdout without `-o`).
///
/// # Errors
/// `Usage` for bad arguments, `Io`/`Input` as [`prepare_cluster`].
pub fn run(args: &[String]) -> Result<()> {
    let mut input = None;
    let mut output = None;
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].trim_start_matches('-');
        let value = args
            .get(i + 1)
            .ok_or_else(|| Error::usage(format!("prepare-cluster: -{flag} needs a value")))?;
        match flag {
            "i" => input = Some(value.clone()),
            "o" => output = Some(std::path::PathBuf::from(value)),
            _ => {
                return Err(Error::usage(format!(
                    "prepare-cluster: unknown option '{}' (use -i TRACE -o KEYS)",
                    args[i]
                )))
            }
        }
        i += 2;
    }
    let input = input.ok_or_else(|| Error::usage("prepare-cluster needs -i TRACE"))?;
    let f =
        std::fs::File::open(&input).map_err(|e| Error::io(format!("cannot open {input}"), e))?;
    let mut result = Prepared::default();
    super::write_lines(output.as_deref(), |out| {
        result = prepare_cluster(std::io::BufReader::with_capacity(1 << 20, f), &input, out)?;
        Ok(())
    })?;
    eprintln!(
        "prepare-cluster: {} trace lines read; {} keys listed",
        result.lines, result.keys
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_before_an_add_are_listed_once_in_order() {
        let trace = "\
1,a,1,0,1,get,0
2,b,1,10,1,add,0
3,b,1,0,1,get,0
4,c,1,10,1,set,0
5,c,1,0,1,get,0
6,a,1,0,1,get,0
7,d,1,0,1,delete,0
8,e,1,0,1,gets,0
";
        let mut out = Vec::new();
        let p = prepare_cluster(trace.as_bytes(), "t", &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\nc\n");
        assert_eq!(p, Prepared { lines: 8, keys: 2 });
        let e = prepare_cluster("1,a,get\n".as_bytes(), "t", &mut Vec::new()).unwrap_err();
        assert!(e.to_string().starts_with("t:1: expected 7"), "{e}");
    }
}
