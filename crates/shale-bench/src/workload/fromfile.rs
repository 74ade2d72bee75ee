//! The AegonKV fork's trace operations: `fromfileproportion`, `filetype`, `filepath`,
//! `initfilepath`.
//!
//! With `fromfileproportion > 0` the core workload draws a "from file" operation in that share of
//! its transactions; each one takes the next line of the trace at `filepath` (all client threads
//! read the one trace front to back, [`TRACE_BATCH`] lines at a time) and performs it as the fork
//! does. Two formats, chosen by `filetype`:
//!
//! - **`meta`** (Social Graph, as saved from db_bench's mixgraph; `shale-bench gen-trace` writes
//!   it): `key,op,size`. `key` is db_bench's key number, which becomes the YCSB key
//!   `user<number>` (FNV-hashed unless `insertorder=ordered`, padded to `zeropadding`), the same
//!   keys the load phase writes for `0..recordcount`. `op` 0 is a read, 1 a write (an INSERT of one
//!   field of `size` bytes), 2 a scan of 10 records from the key; any other number is skipped.
//! - **`cluster`** (Twitter cache traces, sorted, as `workload_prepare.py` expects them):
//!   `timestamp,key,key_size,value_size,client_id,operation,ttl`. `get` is a read, `set` and `add`
//!   write one field of `value_size` bytes (INSERT), `scan` scans 10 records; every other operation
//!   (`gets`, `replace`, `cas`, `append`, `prepend`, `delete`, `incr`, `decr`, ...) is skipped. The
//!   key is used as it is; it may contain commas (the line is split at its first comma and its
//!   last five).
//!
//! Counting, as the fork counts: a read that finds nothing is a `READ-FAILED` operation and a
//! failed transaction (it is not an error: cache traces miss; the misses are also counted apart);
//! a skipped operation is not executed and not measured, and counts as a failed transaction in
//! the final lines (the fork prints `operationcount - successes` as `fail`), reported apart as
//! `operations skipped`. Reads fetch the whole record.
//!
//! A malformed line (a missing column, a number that does not parse, a negative size) stops the
//! replay with an error naming the file and line. Blank lines are ignored. When the trace ends
//! before `operationcount` transactions the run ends there, with a note (the fork would repeat the
//! last line).
//!
//! **Load.** With `filetype=cluster`, `-load` writes the keys listed one per line in
//! `initfilepath` (what `workload_prepare.py` writes: the keys whose first appearance in the trace
//! is a `get`), each with one field of [`CLUSTER_LOAD_VALUE_SIZE`] bytes: the first `recordcount`
//! lines, or every line when `recordcount` is 0. With `filetype=meta`, load is the core workload's:
//! `recordcount` records of `fieldcount` fields, the keys the trace's key numbers name.

use crate::error::{Error, Result};
use crate::props::{PropSpec, Properties};
use parking_lot::Mutex;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Lines a client thread takes from the shared reader at once.
pub const TRACE_BATCH: usize = 256;
/// Records a `filetype=meta` or `cluster` scan reads (the fork's constant).
pub const TRACE_SCAN_LENGTH: usize = 10;
/// Value size of each key loaded from `initfilepath` (the fork's constant).
pub const CLUSTER_LOAD_VALUE_SIZE: usize = 512;

/// Properties of trace operations (part of the core workload).
pub static PROPS: &[PropSpec] = &[
    PropSpec::new(
        "fromfileproportion",
        "0",
        "share of transactions that replay the next line of the trace at filepath",
    ),
    PropSpec::new(
        "filetype",
        "",
        "trace format: meta (key,op,size) or cluster (Twitter cache trace)",
    ),
    PropSpec::new("filepath", "", "the trace replayed by from-file operations"),
    PropSpec::new(
        "initfilepath",
        "",
        "filetype=cluster: keys to load, one per line (recordcount of them; 0: all)",
    ),
];

/// The two trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// `key,op,size`: Social Graph keys saved from db_bench's mixgraph.
    Meta,
    /// Twitter cache-trace lines.
    Cluster,
}

impl FileType {
    /// Parses the `filetype` property.
    ///
    /// # Errors
    /// `Property` for anything but `meta` and `cluster`.
    pub fn from_props(props: &Properties) -> Result<FileType> {
        match props.get_choice("filetype", "", &["meta", "cluster"]) {
            Ok("meta") => Ok(FileType::Meta),
            Ok(_) => Ok(FileType::Cluster),
            Err(_) if !props.contains("filetype") => Err(Error::property(
                "fromfileproportion > 0 needs filetype=meta or filetype=cluster",
            )),
            Err(e) => Err(e),
        }
    }
}

/// What a trace line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOpKind {
    /// Read the whole record.
    Read,
    /// Write one field of `size` bytes.
    Insert,
    /// Scan [`TRACE_SCAN_LENGTH`] records.
    Scan,
    /// Not performed.
    Skip,
}

/// The key of a trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileKey {
    /// A db_bench key number (`meta`), to be turned into a YCSB key.
    Number(u64),
    /// The key itself (`cluster`).
    Bytes(Vec<u8>),
}

/// One parsed trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOp {
    /// The key.
    pub key: FileKey,
    /// The operation.
    pub kind: FileOpKind,
    /// Bytes an insert writes.
    pub size: u32,
}

fn malformed(source: &str, line_no: u64, what: impl std::fmt::Display) -> Error {
    Error::input(format!("{source}:{line_no}: {what}"))
}

fn ascii(field: &[u8]) -> String {
    field.escape_ascii().to_string()
}

/// A decimal integer, optionally signed, as the fork's `std::stoi` reads one but without its
/// tolerance for trailing garbage. Negative numbers wrap into `u64` as the fork's `int` does when
/// it becomes a key number.
fn integer(field: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(field).ok()?.trim();
    text.parse::<i64>().ok()
}

/// A value size: a non-negative integer that fits in 32 bits.
fn size(field: &[u8], column: &str, source: &str, line_no: u64) -> Result<u32> {
    integer(field)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            malformed(
                source,
                line_no,
                format_args!(
                    "column {column} must be a size in bytes, got '{}'",
                    ascii(field)
                ),
            )
        })
}

/// Parses one `key,op,size` line (`line_no` 1-based, `source` names the file in errors).
///
/// # Errors
/// `Input` naming the file, the line and what is wrong with it.
pub fn parse_meta_line(line: &[u8], source: &str, line_no: u64) -> Result<FileOp> {
    let mut cols = line.split(|&b| b == b',');
    let (Some(key), Some(op), Some(sz)) = (cols.next(), cols.next(), cols.next()) else {
        return Err(malformed(
            source,
            line_no,
            format_args!(
                "expected key,op,size (3 comma-separated integers), got '{}'",
                ascii(line)
            ),
        ));
    };
    let number = integer(key).ok_or_else(|| {
        malformed(
            source,
            line_no,
            format_args!("the key must be an integer, got '{}'", ascii(key)),
        )
    })?;
    let op = integer(op).ok_or_else(|| {
        malformed(
            source,
            line_no,
            format_args!(
                "the operation must be an integer (0 read, 1 write, 2 scan), got '{}'",
                ascii(op)
            ),
        )
    })?;
    let kind = match op {
        0 => FileOpKind::Read,
        1 => FileOpKind::Insert,
        2 => FileOpKind::Scan,
        _ => FileOpKind::Skip,
    };
    // The fork parses the size of every line, but only a write uses it: a negative size is only
    // an error where it would be written.
    let size = match (kind, integer(sz)) {
        (_, None) => {
            return Err(malformed(
                source,
                line_no,
                format_args!("the size must be an integer, got '{}'", ascii(sz)),
            ))
        }
        (FileOpKind::Insert, Some(_)) => size(sz, "size", source, line_no)?,
        (_, Some(_)) => 0,
    };
    Ok(FileOp {
        key: FileKey::Number(number as u64),
        kind,
        size,
    })
}

/// Parses one Twitter cache-trace line.
///
/// # Errors
/// `Input` naming the file, the line and what is wrong with it.
pub fn parse_cluster_line(line: &[u8], source: &str, line_no: u64) -> Result<FileOp> {
    let bad_shape = || {
        malformed(
            source,
            line_no,
            format_args!(
                "expected 7 comma-separated columns \
                 (timestamp,key,key_size,value_size,client_id,operation,ttl), got '{}'",
                ascii(line)
            ),
        )
    };
    let first = line.iter().position(|&b| b == b',').ok_or_else(bad_shape)?;
    let rest = &line[first + 1..];
    let mut tail: Vec<&[u8]> = rest.rsplitn(6, |&b| b == b',').collect();
    if tail.len() != 6 {
        return Err(bad_shape());
    }
    tail.reverse();
    let (key, value_size, op) = (tail[0], tail[2], tail[4]);
    if key.is_empty() {
        return Err(malformed(source, line_no, "the key column is empty"));
    }
    let kind = match op.trim_ascii() {
        b"get" => FileOpKind::Read,
        b"set" | b"add" => FileOpKind::Insert,
        b"scan" => FileOpKind::Scan,
        _ => FileOpKind::Skip,
    };
    Ok(FileOp {
        key: FileKey::Bytes(key.to_vec()),
        kind,
        size: size(value_size, "value_size", source, line_no)?,
    })
}

/// Reads one trace front to back, for all client threads.
pub struct TraceFile {
    filetype: FileType,
    source: String,
    reader: Mutex<Option<LineReader>>,
    /// Set once the trace has ended or failed: later batches are empty without taking the lock.
    finished: AtomicBool,
    /// Lines handed out (blank ones excluded).
    handed_out: AtomicU64,
}

struct LineReader {
    input: std::io::BufReader<std::fs::File>,
    line_no: u64,
    buf: Vec<u8>,
}

impl TraceFile {
    /// Opens the trace at `path`.
    ///
    /// # Errors
    /// `Io` when it cannot be opened.
    pub fn open(path: &str, filetype: FileType) -> Result<TraceFile> {
        let f = std::fs::File::open(path)
            .map_err(|e| Error::io(format!("cannot open trace {path}"), e))?;
        Ok(TraceFile {
            filetype,
            source: path.to_string(),
            reader: Mutex::new(Some(LineReader {
                input: std::io::BufReader::with_capacity(1 << 20, f),
                line_no: 0,
                buf: Vec::new(),
            })),
            finished: AtomicBool::new(false),
            handed_out: AtomicU64::new(0),
        })
    }

    /// The trace's path.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Operations handed out so far.
    pub fn handed_out(&self) -> u64 {
        self.handed_out.load(Ordering::Relaxed)
    }

    /// Fills `batch` (cleared first) with up to `want` operations; empty at the end of the trace.
    ///
    /// # Errors
    /// `Io` for a read error, `Input` for a malformed line; the trace is finished for every
    /// thread after either.
    pub fn next_batch(&self, batch: &mut Vec<FileOp>, want: usize) -> Result<()> {
        batch.clear();
        if self.finished.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut guard = self.reader.lock();
        let Some(r) = guard.as_mut() else {
            return Ok(());
        };
        let result = self.fill(r, batch, want);
        if result.is_err() || batch.len() < want {
            *guard = None;
            self.finished.store(true, Ordering::Release);
        }
        self.handed_out
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        result
    }

    fn fill(&self, r: &mut LineReader, batch: &mut Vec<FileOp>, want: usize) -> Result<()> {
        while batch.len() < want {
            r.buf.clear();
            let n = r.input.read_until(b'\n', &mut r.buf).map_err(|e| {
                Error::io(format!("cannot read {}:{}", self.source, r.line_no + 1), e)
            })?;
            if n == 0 {
                return Ok(());
            }
            r.line_no += 1;
            let line = r.buf.trim_ascii_end();
            if line.trim_ascii_start().is_empty() {
                continue;
            }
            batch.push(match self.filetype {
                FileType::Meta => parse_meta_line(line, &self.source, r.line_no)?,
                FileType::Cluster => parse_cluster_line(line, &self.source, r.line_no)?,
            });
        }
        Ok(())
    }
}

/// Reads the keys to load from `path` (`initfilepath`): the first `limit` non-empty lines, or all
/// of them when `limit` is 0.
///
/// # Errors
/// `Io` when the file cannot be read, `Input` when it holds fewer than `limit` keys.
pub fn read_init_keys(path: &str, limit: u64) -> Result<Vec<Vec<u8>>> {
    let f = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("cannot open initfilepath {path}"), e))?;
    let mut input = std::io::BufReader::new(f);
    let mut keys = Vec::new();
    let mut buf = Vec::new();
    while limit == 0 || (keys.len() as u64) < limit {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(format!("cannot read {path}"), e))?;
        if n == 0 {
            break;
        }
        let key = buf.trim_ascii_end();
        if !key.is_empty() {
            keys.push(key.to_vec());
        }
    }
    if limit > 0 && (keys.len() as u64) < limit {
        return Err(Error::input(format!(
            "initfilepath {path} lists {} keys, but recordcount is {limit} \
             (set recordcount=0 to load every key it lists)",
            keys.len()
        )));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_lines_map_ops_as_the_fork_does() {
        let p = |l: &str| parse_meta_line(l.as_bytes(), "t", 1).unwrap();
        assert_eq!(
            p("42,0,0"),
            FileOp {
                key: FileKey::Number(42),
                kind: FileOpKind::Read,
                size: 0
            }
        );
        assert_eq!(p("7,1,230").kind, FileOpKind::Insert);
        assert_eq!(p("7,1,230").size, 230);
        assert_eq!(p("7,2,12").kind, FileOpKind::Scan);
        assert_eq!(p("7,5,12").kind, FileOpKind::Skip);
        assert_eq!(p("-1,0,0").key, FileKey::Number(u64::MAX));
        assert_eq!(p(" 9 , 0 , 3 ,extra").key, FileKey::Number(9));
    }

    #[test]
    fn malformed_meta_lines_name_the_line() {
        let e = |l: &str| {
            parse_meta_line(l.as_bytes(), "trans", 17)
                .unwrap_err()
                .to_string()
        };
        assert!(
            e("12,0").starts_with("trans:17: expected key,op,size"),
            "{}",
            e("12,0")
        );
        assert!(e("x,0,1").contains("the key must be an integer, got 'x'"));
        assert!(e("1,get,1").contains("the operation must be an integer"));
        assert!(e("1,0,big").contains("the size must be an integer"));
        assert!(e("1,1,-5").contains("column size must be a size in bytes, got '-5'"));
    }

    #[test]
    fn cluster_lines_keep_commas_in_keys_and_skip_what_the_fork_skips() {
        let p = |l: &str| parse_cluster_line(l.as_bytes(), "c", 3).unwrap();
        let r = p("0,a,b,16,300,7,set,0");
        assert_eq!(r.key, FileKey::Bytes(b"a,b".to_vec()));
        assert_eq!((r.kind, r.size), (FileOpKind::Insert, 300));
        assert_eq!(p("0,k,16,0,7,get,0").kind, FileOpKind::Read);
        assert_eq!(p("0,k,16,9,7,add,0").kind, FileOpKind::Insert);
        for skipped in ["gets", "delete", "cas", "append", "incr", "replace"] {
            assert_eq!(
                p(&format!("0,k,16,9,7,{skipped},0")).kind,
                FileOpKind::Skip,
                "{skipped}"
            );
        }
        let e = parse_cluster_line(b"0,k,16,x,7,get,0", "c", 9).unwrap_err();
        assert!(e.to_string().starts_with("c:9: column value_size"), "{e}");
        let e = parse_cluster_line(b"0,k,16", "c", 10).unwrap_err();
        assert!(
            e.to_string().contains("expected 7 comma-separated columns"),
            "{e}"
        );
    }
}
