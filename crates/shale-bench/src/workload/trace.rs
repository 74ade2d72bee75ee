//! Replay of Twitter cache traces (Yang et al., OSDI'20; the public `cache-trace` format).
//!
//! Each line of the CSV is `timestamp,key,key_size,value_size,client_id,operation,ttl`, where
//! `operation` is one of get, gets, set, add, replace, cas, append, prepend, delete, incr, decr.
//! The anonymized key may itself contain commas, so a line is split at its first comma and its
//! last five.
//!
//! Mapping onto the engine:
//!
//! | trace operation | measured as | what the backend sees |
//! |---|---|---|
//! | get, gets | READ | read; a miss is a success (a cache trace misses), counted apart |
//! | set, add, replace, cas | UPDATE | write `value_size` bytes |
//! | append, prepend | READMODIFYWRITE | read, then write the old length plus `value_size` |
//! | incr, decr | READMODIFYWRITE | read, then write `value_size` bytes (the old length when 0) |
//! | delete | DELETE | delete |
//!
//! The trace is read once, front to back, by all client threads together (in batches of
//! [`TRACE_BATCH`] lines under a lock), as fast as the backend allows (`target` still throttles).
//! The load phase, when asked for, first writes every distinct key of the replayed part of the
//! trace with its first non-zero value size (`trace.defaultvaluesize` when it has none), so gets
//! can hit. Values follow the deterministic stream of their key, so `verify=true` checks reads.

use super::{finish, time_op, Client, Context, Phase, Workload};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::measure::{OpKind, Recorder};
use crate::props::{PropSpec, Properties};
use crate::record::{fill_value, value_matches};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Lines a client thread takes from the shared reader at once.
pub const TRACE_BATCH: usize = 256;
/// Value size the load phase writes for a key whose trace lines carry none.
pub const DEFAULT_TRACE_VALUE_SIZE: u64 = 100;

/// Properties of the trace workload.
pub static PROPS: &[PropSpec] = &[
    PropSpec::new("tracefile", "", "the trace (CSV); required"),
    PropSpec::new(
        "operationcount",
        "0",
        "lines replayed; 0 replays the whole trace",
    ),
    PropSpec::new(
        "trace.defaultvaluesize",
        "100",
        "value size loaded for keys whose lines carry none",
    ),
    PropSpec::new(
        "trace.padkeys",
        "false",
        "pad (or cut) each key to its key_size column",
    ),
];

/// A cache operation in the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceOp {
    /// `get`
    Get,
    /// `gets`
    Gets,
    /// `set`
    Set,
    /// `add`
    Add,
    /// `replace`
    Replace,
    /// `cas`
    Cas,
    /// `append`
    Append,
    /// `prepend`
    Prepend,
    /// `delete`
    Delete,
    /// `incr`
    Incr,
    /// `decr`
    Decr,
}

impl TraceOp {
    /// Every operation, in the order of the format's documentation.
    pub const ALL: [TraceOp; 11] = [
        TraceOp::Get,
        TraceOp::Gets,
        TraceOp::Set,
        TraceOp::Add,
        TraceOp::Replace,
        TraceOp::Cas,
        TraceOp::Append,
        TraceOp::Prepend,
        TraceOp::Delete,
        TraceOp::Incr,
        TraceOp::Decr,
    ];

    /// The name used in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            TraceOp::Get => "get",
            TraceOp::Gets => "gets",
            TraceOp::Set => "set",
            TraceOp::Add => "add",
            TraceOp::Replace => "replace",
            TraceOp::Cas => "cas",
            TraceOp::Append => "append",
            TraceOp::Prepend => "prepend",
            TraceOp::Delete => "delete",
            TraceOp::Incr => "incr",
            TraceOp::Decr => "decr",
        }
    }

    /// Parses a CSV name.
    pub fn parse(s: &str) -> Option<TraceOp> {
        TraceOp::ALL.into_iter().find(|op| op.name() == s)
    }

    /// Whether the operation writes a value.
    pub fn writes(self) -> bool {
        !matches!(self, TraceOp::Get | TraceOp::Gets | TraceOp::Delete)
    }
}

/// One line of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// Seconds since the start of the trace.
    pub timestamp: u64,
    /// The anonymized key.
    pub key: String,
    /// Size of the original key.
    pub key_size: u32,
    /// Size of the value (0 for most reads).
    pub value_size: u32,
    /// The anonymized client.
    pub client_id: u64,
    /// The operation.
    pub op: TraceOp,
    /// Time to live in seconds; 0 when not a write.
    pub ttl: u64,
}

impl TraceRecord {
    /// Parses one CSV line; `line_no` (1-based) and `source` name it in errors.
    ///
    /// # Errors
    /// `Input` naming the file, line and the offending column.
    pub fn parse(line: &str, source: &str, line_no: usize) -> Result<TraceRecord> {
        let bad = |what: String| Error::input(format!("{source}:{line_no}: {what} in '{line}'"));
        let line = line.trim_end_matches(['\r', '\n']);
        let (timestamp, rest) = line
            .split_once(',')
            .ok_or_else(|| bad("expected 7 comma-separated columns".into()))?;
        let mut tail: Vec<&str> = rest.rsplitn(6, ',').collect();
        if tail.len() != 6 {
            return Err(bad("expected 7 comma-separated columns".into()));
        }
        tail.reverse();
        let [key, key_size, value_size, client, op, ttl] =
            [tail[0], tail[1], tail[2], tail[3], tail[4], tail[5]];
        let num = |name: &str, v: &str| -> Result<u64> {
            v.trim()
                .parse::<u64>()
                .map_err(|_| bad(format!("column {name} is not an unsigned integer ('{v}')")))
        };
        let small = |name: &str, v: &str| -> Result<u32> {
            u32::try_from(num(name, v)?)
                .map_err(|_| bad(format!("column {name} is too large ('{v}')")))
        };
        Ok(TraceRecord {
            timestamp: num("timestamp", timestamp)?,
            key: key.to_string(),
            key_size: small("key_size", key_size)?,
            value_size: small("value_size", value_size)?,
            client_id: num("client_id", client)?,
            op: TraceOp::parse(op.trim())
                .ok_or_else(|| bad(format!("unknown operation '{op}'")))?,
            ttl: num("ttl", ttl)?,
        })
    }

    /// The CSV line (without a newline).
    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{}",
            self.timestamp,
            self.key,
            self.key_size,
            self.value_size,
            self.client_id,
            self.op.name(),
            self.ttl
        )
    }

    /// The key bytes the backend sees.
    fn key_bytes(&self, out: &mut Vec<u8>, pad: bool) {
        out.clear();
        out.extend_from_slice(self.key.as_bytes());
        if pad && self.key_size > 0 {
            out.resize(self.key_size as usize, b'_');
        }
    }
}

/// Reads trace records from a file, front to back.
pub struct TraceReader {
    lines: std::io::Lines<std::io::BufReader<std::fs::File>>,
    source: String,
    line_no: usize,
    remaining: u64,
}

impl TraceReader {
    /// Opens `path`; reads at most `limit` records (0: all).
    ///
    /// # Errors
    /// `Io` when the file cannot be opened.
    pub fn open(path: &str, limit: u64) -> Result<TraceReader> {
        let f = std::fs::File::open(path)
            .map_err(|e| Error::io(format!("cannot open trace {path}"), e))?;
        Ok(TraceReader {
            lines: std::io::BufReader::new(f).lines(),
            source: path.to_string(),
            line_no: 0,
            remaining: if limit == 0 { u64::MAX } else { limit },
        })
    }

    /// The next record, `None` at the end (blank lines are skipped).
    ///
    /// # Errors
    /// `Io` or `Input` for an unreadable or malformed line.
    pub fn next_record(&mut self) -> Result<Option<TraceRecord>> {
        while self.remaining > 0 {
            let Some(line) = self.lines.next() else {
                return Ok(None);
            };
            self.line_no += 1;
            let line = line.map_err(|e| {
                Error::io(format!("cannot read {}:{}", self.source, self.line_no), e)
            })?;
            if line.trim().is_empty() {
                continue;
            }
            self.remaining -= 1;
            return TraceRecord::parse(&line, &self.source, self.line_no).map(Some);
        }
        Ok(None)
    }
}

/// See the module documentation.
pub struct TraceReplay {
    ctx: Context,
    reader: Mutex<Option<TraceReader>>,
    operation_limit: u64,
    pad: bool,
    preload: Vec<(Vec<u8>, u32)>,
    preload_next: AtomicUsize,
}

impl TraceReplay {
    /// Reads the trace properties; with `load`, scans the trace for the keys to preload.
    ///
    /// # Errors
    /// `Property` when `tracefile` is missing, `Io`/`Input` for an unreadable or malformed trace
    /// (the first bad line is reported before the run starts when loading).
    pub fn new(props: &Properties, ctx: Context, load: bool) -> Result<TraceReplay> {
        let path = props
            .get("tracefile")
            .ok_or_else(|| Error::property("property tracefile is required for workload=trace"))?
            .to_string();
        let operation_limit = props.get_u64("operationcount", 0)?;
        let pad = props.get_bool("trace.padkeys", false)?;
        let default_size = u32::try_from(props.get_u64_in(
            "trace.defaultvaluesize",
            DEFAULT_TRACE_VALUE_SIZE,
            0,
            1 << 30,
        )?)
        .unwrap_or(u32::MAX);
        let mut preload = Vec::new();
        if load {
            let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
            let mut reader = TraceReader::open(&path, operation_limit)?;
            let mut key = Vec::new();
            while let Some(r) = reader.next_record()? {
                r.key_bytes(&mut key, pad);
                let slot = *index.entry(key.clone()).or_insert_with(|| {
                    preload.push((key.clone(), 0));
                    preload.len() - 1
                });
                if preload[slot].1 == 0 {
                    preload[slot].1 = r.value_size;
                }
            }
            for p in &mut preload {
                if p.1 == 0 {
                    p.1 = default_size;
                }
            }
        }
        let reader = TraceReader::open(&path, operation_limit)?;
        Ok(TraceReplay {
            ctx,
            reader: Mutex::new(Some(reader)),
            operation_limit,
            pad,
            preload,
            preload_next: AtomicUsize::new(0),
        })
    }

    /// Fills `batch` with up to [`TRACE_BATCH`] records; empty at the end of the trace.
    fn next_batch(&self, batch: &mut Vec<TraceRecord>) -> Result<()> {
        batch.clear();
        let mut guard = self.reader.lock();
        let Some(reader) = guard.as_mut() else {
            return Ok(());
        };
        while batch.len() < TRACE_BATCH {
            match reader.next_record() {
                Ok(Some(r)) => batch.push(r),
                Ok(None) => {
                    *guard = None;
                    break;
                }
                Err(e) => {
                    *guard = None;
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

impl Workload for TraceReplay {
    fn operation_count(&self, phase: Phase) -> u64 {
        match phase {
            Phase::Load => self.preload.len() as u64,
            Phase::Run if self.operation_limit > 0 => self.operation_limit,
            Phase::Run => u64::MAX,
        }
    }

    fn client(&self, phase: Phase, _thread: usize) -> Box<dyn Client + '_> {
        Box::new(TraceClient {
            w: self,
            phase,
            batch: Vec::new(),
            pos: 0,
            key: Vec::new(),
            value: Vec::new(),
        })
    }
}

struct TraceClient<'a> {
    w: &'a TraceReplay,
    phase: Phase,
    batch: Vec<TraceRecord>,
    pos: usize,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl TraceClient<'_> {
    fn write(&mut self, db: &dyn Backend, len: usize) -> Result<()> {
        self.value.clear();
        fill_value(&mut self.value, &self.key, 0, len);
        db.update(&self.key, &self.value)
    }

    fn read(&self, db: &dyn Backend) -> Result<Option<Vec<u8>>> {
        let v = db.read(&self.key)?;
        if let Some(v) = &v {
            if self.w.ctx.verify && !value_matches(v, &self.key, 0) {
                return Err(Error::verify(format!(
                    "value of {} does not hold the value written",
                    super::show_key(&self.key)
                )));
            }
        }
        Ok(v)
    }

    fn replay(&mut self, db: &dyn Backend, rec: &mut Recorder, r: &TraceRecord) {
        r.key_bytes(&mut self.key, self.w.pad);
        let log = &self.w.ctx.log;
        match r.op {
            TraceOp::Get | TraceOp::Gets => {
                let (got, latency) = time_op(|| self.read(db));
                if matches!(got, Ok(None)) {
                    rec.record_miss();
                }
                finish(rec, log, OpKind::Read, latency, got.map(|_| ()));
            }
            TraceOp::Set | TraceOp::Add | TraceOp::Replace | TraceOp::Cas => {
                let (outcome, latency) = time_op(|| self.write(db, r.value_size as usize));
                finish(rec, log, OpKind::Update, latency, outcome);
            }
            TraceOp::Append | TraceOp::Prepend | TraceOp::Incr | TraceOp::Decr => {
                let (outcome, latency) = time_op(|| {
                    let old = self.read(db)?.map_or(0, |v| v.len());
                    let len = match r.op {
                        TraceOp::Append | TraceOp::Prepend => old + r.value_size as usize,
                        _ if r.value_size == 0 => old,
                        _ => r.value_size as usize,
                    };
                    self.write(db, len)
                });
                finish(rec, log, OpKind::ReadModifyWrite, latency, outcome);
            }
            TraceOp::Delete => {
                let key = &self.key;
                let (outcome, latency) = time_op(|| db.delete(key));
                finish(rec, log, OpKind::Delete, latency, outcome);
            }
        }
    }
}

impl Client for TraceClient<'_> {
    fn step(&mut self, db: &dyn Backend, rec: &mut Recorder) -> bool {
        let w = self.w;
        if self.phase == Phase::Load {
            let i = w.preload_next.fetch_add(1, Ordering::Relaxed);
            let Some((key, size)) = w.preload.get(i) else {
                return false;
            };
            self.key.clone_from(key);
            let (outcome, latency) = time_op(|| {
                self.value.clear();
                fill_value(&mut self.value, &self.key, 0, *size as usize);
                db.insert(&self.key, &self.value)
            });
            finish(rec, &w.ctx.log, OpKind::Insert, latency, outcome);
            return true;
        }
        if self.pos >= self.batch.len() {
            self.pos = 0;
            if let Err(e) = w.next_batch(&mut self.batch) {
                w.ctx.log.report(&e.to_string());
                rec.record_input_error();
                return false;
            }
            if self.batch.is_empty() {
                return false;
            }
        }
        let r = std::mem::replace(&mut self.batch[self.pos], PLACEHOLDER.clone());
        self.pos += 1;
        self.replay(db, rec, &r);
        true
    }
}

static PLACEHOLDER: TraceRecord = TraceRecord {
    timestamp: 0,
    key: String::new(),
    key_size: 0,
    value_size: 0,
    client_id: 0,
    op: TraceOp::Get,
    ttl: 0,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_line_parses_and_prints_back() {
        let line = "17,q:q:1:8WTfjZU14ee,16,2,1,get,0";
        let r = TraceRecord::parse(line, "t.csv", 1).unwrap();
        assert_eq!(r.timestamp, 17);
        assert_eq!(r.key, "q:q:1:8WTfjZU14ee");
        assert_eq!(
            (r.key_size, r.value_size, r.client_id, r.op, r.ttl),
            (16, 2, 1, TraceOp::Get, 0)
        );
        assert_eq!(r.to_csv(), line);
    }

    #[test]
    fn keys_with_commas_survive_parsing() {
        let r = TraceRecord::parse("0,a,b,c,10,200,3,set,60", "t.csv", 1).unwrap();
        assert_eq!(r.key, "a,b,c");
        assert_eq!(r.op, TraceOp::Set);
        assert_eq!(r.ttl, 60);
    }

    #[test]
    fn malformed_lines_name_file_line_and_column() {
        let e = TraceRecord::parse("0,k,16,x,1,get,0", "t.csv", 7).unwrap_err();
        assert!(
            e.to_string().starts_with("t.csv:7: column value_size"),
            "{e}"
        );
        let e = TraceRecord::parse("0,k,16,2,1,fetch,0", "t.csv", 8).unwrap_err();
        assert!(e.to_string().contains("unknown operation 'fetch'"), "{e}");
        assert!(TraceRecord::parse("0,k,16", "t.csv", 9).is_err());
    }
}
