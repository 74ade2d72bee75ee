//! YCSB's core workload.
//!
//! Load inserts `insertcount` records (`recordcount` by default) with key numbers from
//! `insertstart` upwards. The run phase draws operations from the mix of `readproportion`,
//! `updateproportion`, `insertproportion`, `scanproportion` and `readmodifywriteproportion`, and
//! key numbers from `requestdistribution`. Keys are `user<number>`, the number FNV-hashed unless
//! `insertorder=ordered`, left-padded to `zeropadding` digits.
//!
//! Semantics follow YCSB-cpp (and its RocksDB binding's one-value-per-record layout):
//! - A record holds `fieldcount` fields; reads fetch the whole record (`readallfields=false`
//!   selects one field of it after the read).
//! - An update with `writeallfields=false` rewrites one field: it reads the record, replaces the
//!   field and writes the record back, inside one timed UPDATE.
//! - Inserts during the run take key numbers from an acknowledged counter, and reads only pick
//!   key numbers whose insert (and every earlier one) has finished.
//! - `zipfian` is YCSB's scrambled zipfian over `recordcount + 2 * operationcount * insertproportion`
//!   items; draws of keys not yet inserted are redrawn.
//! - A read-modify-write (workload F) is measured as YCSB-cpp measures it: the read as a READ,
//!   then the write as an UPDATE (one field, so the update reads the record again and writes it
//!   back); the transaction succeeds when the update does.
//! - `fromfileproportion` draws the AegonKV fork's trace operations ([`super::fromfile`]).
//!
//! With `verify=true` every record read is decoded and each field compared with the
//! deterministic value stream of its key and field (see [`crate::record`]); a record must have
//! exactly fields `0..fieldcount`.

use super::fromfile::{
    read_init_keys, FileKey, FileOp, FileOpKind, FileType, TraceFile, CLUSTER_LOAD_VALUE_SIZE,
    TRACE_BATCH, TRACE_SCAN_LENGTH,
};
use super::{finish, time_op, Client, Context, Phase, Workload};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::generator::{
    AcknowledgedCounter, Counter, Discrete, Hotspot, Latest, ScrambledZipfian, Uniform, Zipfian,
    ZIPFIAN_CONSTANT,
};
use crate::measure::{OpKind, Outcome, Recorder};
use crate::props::{PropSpec, Properties};
use crate::record::{
    build_ycsb_key, decode_record, encode_record, fill_value, value_matches, Field,
};
use crate::rng::Rng;
use std::sync::Arc;
use std::time::Duration;

/// YCSB's default `fieldcount`.
pub const DEFAULT_FIELD_COUNT: u64 = 10;
/// YCSB's default `fieldlength`.
pub const DEFAULT_FIELD_LENGTH: u64 = 100;
/// YCSB's default `maxscanlength`.
pub const DEFAULT_MAX_SCAN_LENGTH: u64 = 1000;
/// YCSB's default `hotspotdatafraction`.
pub const DEFAULT_HOTSPOT_DATA_FRACTION: f64 = 0.2;
/// YCSB's default `hotspotopnfraction`.
pub const DEFAULT_HOTSPOT_OPN_FRACTION: f64 = 0.8;

/// Properties of the core workload.
pub static PROPS: &[PropSpec] = &[
    PropSpec::new(
        "recordcount",
        "",
        "records loaded (and the key space read by the run phase); required",
    ),
    PropSpec::new(
        "operationcount",
        "",
        "operations of the run phase; required with -run",
    ),
    PropSpec::new(
        "table",
        "usertable",
        "table name (accepted for compatibility; one table per database)",
    ),
    PropSpec::new("fieldcount", "10", "fields per record"),
    PropSpec::new(
        "fieldlength",
        "100",
        "field length in bytes (the maximum for non-constant distributions)",
    ),
    PropSpec::new(
        "minfieldlength",
        "1",
        "smallest field length for uniform and zipfian field lengths",
    ),
    PropSpec::new(
        "fieldlengthdistribution",
        "constant",
        "constant, uniform or zipfian",
    ),
    PropSpec::new(
        "field_len_dist",
        "constant",
        "YCSB-cpp's name for fieldlengthdistribution",
    ),
    PropSpec::new(
        "fieldnameprefix",
        "field",
        "field name prefix (accepted for compatibility; names are implied by index)",
    ),
    PropSpec::new(
        "readallfields",
        "true",
        "reads return the whole record (false: one field of it)",
    ),
    PropSpec::new(
        "writeallfields",
        "false",
        "updates rewrite every field (false: one field, read-modify-write)",
    ),
    PropSpec::new("readproportion", "0.95", "share of reads"),
    PropSpec::new("updateproportion", "0.05", "share of updates"),
    PropSpec::new("insertproportion", "0", "share of inserts"),
    PropSpec::new("scanproportion", "0", "share of scans"),
    PropSpec::new(
        "readmodifywriteproportion",
        "0",
        "share of read-modify-writes",
    ),
    PropSpec::new(
        "requestdistribution",
        "uniform",
        "uniform, zipfian, latest, hotspot or sequential",
    ),
    PropSpec::new(
        "hotspotdatafraction",
        "0.2",
        "hotspot: fraction of keys that are hot",
    ),
    PropSpec::new(
        "hotspotopnfraction",
        "0.8",
        "hotspot: fraction of operations on hot keys",
    ),
    PropSpec::new("minscanlength", "1", "shortest scan"),
    PropSpec::new("maxscanlength", "1000", "longest scan"),
    PropSpec::new(
        "scanlengthdistribution",
        "uniform",
        "uniform or zipfian (favouring short scans)",
    ),
    PropSpec::new(
        "insertorder",
        "hashed",
        "hashed (FNV-scrambled key numbers) or ordered",
    ),
    PropSpec::new("insertstart", "0", "first key number this client loads"),
    PropSpec::new(
        "insertcount",
        "",
        "records this client loads (default recordcount - insertstart)",
    ),
    PropSpec::new("zeropadding", "1", "digits the key number is padded to"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CoreOp {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
    FromFile,
}

#[derive(Debug, Clone)]
enum LengthGen {
    Constant(u64),
    Uniform(Uniform),
    Zipfian(Zipfian),
}

impl LengthGen {
    fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            LengthGen::Constant(n) => *n,
            LengthGen::Uniform(u) => u.next(rng),
            LengthGen::Zipfian(z) => z.next(rng),
        }
    }

    fn build(dist: &str, min: u64, max: u64) -> LengthGen {
        match dist {
            "uniform" if min < max => LengthGen::Uniform(Uniform::new(min, max)),
            "zipfian" if min < max => LengthGen::Zipfian(Zipfian::new(min, max, ZIPFIAN_CONSTANT)),
            "constant" => LengthGen::Constant(max),
            _ => LengthGen::Constant(min),
        }
    }
}

#[derive(Debug, Clone)]
enum KeyChooser {
    Uniform(Uniform),
    Zipfian(ScrambledZipfian),
    Latest(Latest),
    Hotspot(Hotspot),
    Sequential { lo: u64, span: u64 },
}

/// See the module documentation.
pub struct CoreWorkload {
    ctx: Context,
    record_count: u64,
    insert_count: u64,
    operation_count: u64,
    field_count: u64,
    field_len: LengthGen,
    field_len_bounds: (u64, u64),
    read_all_fields: bool,
    write_all_fields: bool,
    ops: Discrete<CoreOp>,
    key_chooser: KeyChooser,
    scan_len: LengthGen,
    hashed: bool,
    zero_padding: usize,
    insert_start: u64,
    load_keys: Counter,
    run_inserts: AcknowledgedCounter,
    sequential: Arc<Counter>,
    /// The trace of from-file operations, when `fromfileproportion > 0`.
    trace: Option<TraceFile>,
    /// Keys the load phase writes instead of `user<n>` (`filetype=cluster` with `initfilepath`).
    init_keys: Option<Vec<Vec<u8>>>,
    /// Set once the trace ran out, so the note is printed once.
    trace_ended: std::sync::atomic::AtomicBool,
}

impl CoreWorkload {
    /// Reads the core workload's properties.
    ///
    /// # Errors
    /// `Property` for missing, malformed or inconsistent values.
    pub fn new(props: &Properties, ctx: Context) -> Result<CoreWorkload> {
        let record_count = props
            .get("recordcount")
            .map(|_| props.get_u64("recordcount", 0))
            .transpose()?
            .ok_or_else(|| {
                Error::property(
                    "property recordcount is required (for example -p recordcount=100000)",
                )
            })?;
        let operation_count = props.get_u64("operationcount", 0)?;
        let insert_start = props.get_u64("insertstart", 0)?;
        let insert_count =
            props.get_u64("insertcount", record_count.saturating_sub(insert_start))?;
        let field_count = props.get_u64_in("fieldcount", DEFAULT_FIELD_COUNT, 1, 1 << 16)?;
        let field_length = props.get_u64_in("fieldlength", DEFAULT_FIELD_LENGTH, 0, 1 << 30)?;
        let min_field_length = props.get_u64_in("minfieldlength", 1, 0, field_length.max(1))?;
        let dist_key =
            if props.contains("field_len_dist") && !props.contains("fieldlengthdistribution") {
                "field_len_dist"
            } else {
                "fieldlengthdistribution"
            };
        let field_dist =
            props.get_choice(dist_key, "constant", &["constant", "uniform", "zipfian"])?;
        let field_len = LengthGen::build(field_dist, min_field_length, field_length);
        let field_len_bounds = if field_dist == "constant" {
            (field_length, field_length)
        } else {
            (min_field_length, field_length)
        };

        let proportion = |key: &str, default: f64| props.get_f64_in(key, default, 0.0, 1.0);
        let read = proportion("readproportion", 0.95)?;
        let update = proportion("updateproportion", 0.05)?;
        let insert = proportion("insertproportion", 0.0)?;
        let scan = proportion("scanproportion", 0.0)?;
        let rmw = proportion("readmodifywriteproportion", 0.0)?;
        let from_file = proportion("fromfileproportion", 0.0)?;
        let mut ops = Discrete::new();
        ops.add(CoreOp::Read, read);
        ops.add(CoreOp::Update, update);
        ops.add(CoreOp::Insert, insert);
        ops.add(CoreOp::Scan, scan);
        ops.add(CoreOp::ReadModifyWrite, rmw);
        ops.add(CoreOp::FromFile, from_file);
        if ops.is_empty() && operation_count > 0 {
            return Err(Error::property(
                "every operation proportion is zero: set at least one of readproportion, updateproportion, \
                 insertproportion, scanproportion, readmodifywriteproportion, fromfileproportion",
            ));
        }
        let (trace, init_keys) = if from_file > 0.0 {
            let filetype = FileType::from_props(props)?;
            let path = props
                .get("filepath")
                .filter(|p| !p.is_empty())
                .ok_or_else(|| {
                    Error::property("fromfileproportion > 0 needs filepath (the trace to replay)")
                })?;
            let init = match (filetype, props.get("initfilepath").filter(|p| !p.is_empty())) {
                (FileType::Cluster, Some(init)) => Some(read_init_keys(init, record_count)?),
                (FileType::Cluster, None) if record_count > 0 => {
                    return Err(Error::property(
                        "filetype=cluster loads the keys listed in initfilepath (one per line, as \
                         workload_prepare.py writes them): set initfilepath, or recordcount=0 to load nothing",
                    ))
                }
                _ => None,
            };
            (Some(TraceFile::open(path, filetype)?), init)
        } else {
            (None, None)
        };
        let insert_count = match &init_keys {
            Some(keys) => keys.len() as u64,
            None => insert_count,
        };

        let min_scan = props.get_u64_in("minscanlength", 1, 1, u64::from(u32::MAX))?;
        let max_scan = props.get_u64_in(
            "maxscanlength",
            DEFAULT_MAX_SCAN_LENGTH,
            min_scan,
            u64::from(u32::MAX),
        )?;
        let scan_dist =
            props.get_choice("scanlengthdistribution", "uniform", &["uniform", "zipfian"])?;
        let scan_len = LengthGen::build(scan_dist, min_scan, max_scan);

        let last = record_count.saturating_sub(1);
        let request = props.get_choice(
            "requestdistribution",
            "uniform",
            &["uniform", "zipfian", "latest", "hotspot", "sequential"],
        )?;
        let key_chooser = match request {
            "zipfian" => {
                let new_keys = (operation_count as f64 * insert * 2.0) as u64;
                KeyChooser::Zipfian(ScrambledZipfian::new(0, last + new_keys))
            }
            "latest" => KeyChooser::Latest(Latest::new(record_count)),
            "hotspot" => KeyChooser::Hotspot(Hotspot::new(
                insert_start,
                (insert_start + insert_count)
                    .saturating_sub(1)
                    .max(insert_start),
                props.get_f64_in(
                    "hotspotdatafraction",
                    DEFAULT_HOTSPOT_DATA_FRACTION,
                    0.0,
                    1.0,
                )?,
                props.get_f64_in("hotspotopnfraction", DEFAULT_HOTSPOT_OPN_FRACTION, 0.0, 1.0)?,
            )),
            "sequential" => KeyChooser::Sequential {
                lo: insert_start,
                span: insert_count.max(1),
            },
            _ => KeyChooser::Uniform(Uniform::new(0, last)),
        };
        let hashed = props.get_choice("insertorder", "hashed", &["hashed", "ordered"])? == "hashed";
        let zero_padding = props.get_u64_in("zeropadding", 1, 1, 64)? as usize;
        Ok(CoreWorkload {
            ctx,
            record_count,
            insert_count,
            operation_count,
            field_count,
            field_len,
            field_len_bounds,
            read_all_fields: props.get_bool("readallfields", true)?,
            write_all_fields: props.get_bool("writeallfields", false)?,
            ops,
            key_chooser,
            scan_len,
            hashed,
            zero_padding,
            insert_start,
            load_keys: Counter::new(insert_start),
            run_inserts: AcknowledgedCounter::new(record_count),
            sequential: Arc::new(Counter::new(0)),
            trace,
            init_keys,
            trace_ended: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Number of records the run phase starts from.
    pub fn record_count(&self) -> u64 {
        self.record_count
    }
}

impl Workload for CoreWorkload {
    fn operation_count(&self, phase: Phase) -> u64 {
        match phase {
            Phase::Load => self.insert_count,
            Phase::Run => self.operation_count,
        }
    }

    fn client(&self, phase: Phase, thread: usize, quota: u64) -> Box<dyn Client + '_> {
        Box::new(CoreClient {
            w: self,
            phase,
            rng: Rng::new(self.ctx.thread_seed(phase, thread)),
            keys: self.key_chooser.clone(),
            key: Vec::new(),
            record: Vec::new(),
            scratch: Vec::new(),
            file_ops: Vec::new(),
            file_pos: 0,
            file_quota: quota,
        })
    }
}

struct CoreClient<'a> {
    w: &'a CoreWorkload,
    phase: Phase,
    rng: Rng,
    keys: KeyChooser,
    key: Vec<u8>,
    record: Vec<u8>,
    scratch: Vec<u8>,
    /// Trace operations taken from the shared reader, not yet performed.
    file_ops: Vec<FileOp>,
    file_pos: usize,
    /// Trace lines this thread may still take: never more than its transactions, so no line is
    /// left unused in a thread's batch while another thread finds the trace exhausted.
    file_quota: u64,
}

impl CoreClient<'_> {
    fn set_key(&mut self, key_num: u64) {
        build_ycsb_key(&mut self.key, key_num, self.w.hashed, self.w.zero_padding);
    }

    /// Encodes a full record for the current key into `self.record`.
    fn build_record(&mut self) {
        let w = self.w;
        self.scratch.clear();
        let mut bounds = Vec::with_capacity(w.field_count as usize);
        for i in 0..w.field_count {
            let len = w.field_len.next(&mut self.rng) as usize;
            let start = self.scratch.len();
            fill_value(&mut self.scratch, &self.key, i, len);
            bounds.push((i, start, start + len));
        }
        let fields: Vec<Field<'_>> = bounds
            .iter()
            .map(|&(index, s, e)| Field {
                index,
                value: &self.scratch[s..e],
            })
            .collect();
        self.record.clear();
        encode_record(&mut self.record, &fields);
    }

    /// A record of field `field` alone with a new value, into `self.record` (for backends that
    /// update fields in place, [`Backend::updates_fields`]).
    fn build_field(&mut self, field: u64) {
        let len = self.w.field_len.next(&mut self.rng) as usize;
        self.scratch.clear();
        fill_value(&mut self.scratch, &self.key, field, len);
        self.record.clear();
        encode_record(
            &mut self.record,
            &[Field {
                index: field,
                value: &self.scratch,
            }],
        );
    }

    /// Rebuilds `old` with field `field` replaced by a new value, into `self.record`.
    fn replace_field(&mut self, old: &[u8], field: u64) -> Result<()> {
        let fields = decode_record(old).ok_or_else(|| self.not_a_record())?;
        let len = self.w.field_len.next(&mut self.rng) as usize;
        self.scratch.clear();
        fill_value(&mut self.scratch, &self.key, field, len);
        let new: Vec<Field<'_>> = fields
            .iter()
            .map(|f| {
                if f.index == field {
                    Field {
                        index: field,
                        value: &self.scratch,
                    }
                } else {
                    *f
                }
            })
            .collect();
        self.record.clear();
        encode_record(&mut self.record, &new);
        Ok(())
    }

    fn not_a_record(&self) -> Error {
        Error::verify(format!(
            "value of {} is not a shale-bench record",
            super::show_key(&self.key)
        ))
    }

    /// The next key number to operate on, among the records known to exist.
    fn next_key_num(&mut self) -> Result<u64> {
        let w = self.w;
        let acked = w.run_inserts.acknowledged();
        if acked == 0 {
            return Err(Error::property(
                "the key space is empty: recordcount is 0 and nothing was inserted yet",
            ));
        }
        loop {
            let k = match &mut self.keys {
                KeyChooser::Uniform(u) => u.next(&mut self.rng),
                KeyChooser::Zipfian(z) => z.next(&mut self.rng),
                KeyChooser::Latest(l) => l.next(&mut self.rng, acked),
                KeyChooser::Hotspot(h) => h.next(&mut self.rng),
                KeyChooser::Sequential { lo, span } => *lo + w.sequential.next() % *span,
            };
            if k < acked {
                return Ok(k);
            }
        }
    }

    /// Checks a record read for the current key.
    fn verify_record(w: &CoreWorkload, key: &[u8], value: &[u8]) -> Result<()> {
        let show = || super::show_key(key);
        let fields = decode_record(value).ok_or_else(|| {
            Error::verify(format!("value of {} is not a shale-bench record", show()))
        })?;
        if w.trace.is_some() {
            // Trace writes and cluster loads store one field of any length: check the bytes only.
            return match fields
                .iter()
                .find(|f| !value_matches(f.value, key, f.index))
            {
                None => Ok(()),
                Some(f) => Err(Error::verify(format!(
                    "{} field{} does not hold the value written",
                    show(),
                    f.index
                ))),
            };
        }
        if fields.len() as u64 != w.field_count {
            return Err(Error::verify(format!(
                "{} has {} fields, expected {}",
                show(),
                fields.len(),
                w.field_count
            )));
        }
        for (i, f) in fields.iter().enumerate() {
            let len = f.value.len() as u64;
            if f.index != i as u64
                || len < w.field_len_bounds.0
                || len > w.field_len_bounds.1
                || !value_matches(f.value, key, f.index)
            {
                return Err(Error::verify(format!(
                    "{} field{} does not hold the value written",
                    show(),
                    f.index
                )));
            }
        }
        Ok(())
    }

    fn do_read(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Outcome {
        let w = self.w;
        let key_num = match self.next_key_num() {
            Ok(k) => k,
            Err(e) => return finish(rec, &w.ctx.log, OpKind::Read, Duration::ZERO, Err(e)),
        };
        self.set_key(key_num);
        self.read_current(db, rec)
    }

    /// A READ of the current key.
    fn read_current(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Outcome {
        let w = self.w;
        let field = (!w.read_all_fields).then(|| self.rng.below(w.field_count));
        let key = &self.key;
        let (got, latency) = time_op(|| db.read(key));
        let outcome = got.and_then(|v| {
            let value = v.ok_or_else(|| missing(key))?;
            if w.ctx.verify {
                CoreClient::verify_record(w, key, &value)?;
            }
            if let Some(f) = field {
                // Select the one field, as a client reading one field would.
                let _ = decode_record(&value).and_then(|fs| fs.into_iter().find(|x| x.index == f));
            }
            Ok(())
        });
        finish(rec, &w.ctx.log, OpKind::Read, latency, outcome)
    }

    fn do_update(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Outcome {
        let w = self.w;
        let key_num = match self.next_key_num() {
            Ok(k) => k,
            Err(e) => return finish(rec, &w.ctx.log, OpKind::Update, Duration::ZERO, Err(e)),
        };
        self.set_key(key_num);
        self.update_current(db, rec)
    }

    /// YCSB-cpp's read-modify-write: a READ of the record, then an UPDATE of it, measured apart.
    fn do_read_modify_write(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Outcome {
        let w = self.w;
        let key_num = match self.next_key_num() {
            Ok(k) => k,
            Err(e) => return finish(rec, &w.ctx.log, OpKind::Read, Duration::ZERO, Err(e)),
        };
        self.set_key(key_num);
        self.read_current(db, rec);
        self.update_current(db, rec)
    }

    /// An UPDATE of the current key: of one field (read, replace, write back) unless
    /// `writeallfields`.
    fn update_current(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Outcome {
        let w = self.w;
        let field = self.rng.below(w.field_count);
        let (outcome, latency) = time_op(|| self.write_update(db, field));
        finish(rec, &w.ctx.log, OpKind::Update, latency, outcome)
    }

    fn write_update(&mut self, db: &dyn Backend, field: u64) -> Result<()> {
        let w = self.w;
        if w.write_all_fields {
            self.build_record();
        } else if db.updates_fields() {
            self.build_field(field);
        } else {
            let old = db.read(&self.key)?.ok_or_else(|| missing(&self.key))?;
            if w.ctx.verify {
                CoreClient::verify_record(w, &self.key, &old)?;
            }
            self.replace_field(&old, field)?;
        }
        db.update(&self.key, &self.record)
    }

    fn do_insert(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Outcome {
        self.build_record();
        self.insert_current(db, rec)
    }

    /// An INSERT of `self.record` under the current key.
    fn insert_current(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Outcome {
        let (key, record) = (&self.key, &self.record);
        let (outcome, latency) = time_op(|| db.insert(key, record));
        finish(rec, &self.w.ctx.log, OpKind::Insert, latency, outcome)
    }

    fn do_scan(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Outcome {
        let w = self.w;
        let key_num = match self.next_key_num() {
            Ok(k) => k,
            Err(e) => return finish(rec, &w.ctx.log, OpKind::Scan, Duration::ZERO, Err(e)),
        };
        self.set_key(key_num);
        let len = w.scan_len.next(&mut self.rng) as usize;
        self.scan_current(db, rec, len)
    }

    /// A SCAN of up to `len` records from the current key.
    fn scan_current(&mut self, db: &dyn Backend, rec: &mut Recorder, len: usize) -> Outcome {
        let w = self.w;
        let start_key = &self.key;
        let verify = w.ctx.verify;
        let mut problem: Option<Error> = None;
        let mut prev: Vec<u8> = Vec::new();
        let (got, latency) = time_op(|| {
            db.scan(start_key, len, &mut |k, v| {
                if verify && problem.is_none() {
                    problem = check_scanned(start_key, &prev, k)
                        .and_then(|()| CoreClient::verify_record(w, k, v))
                        .err();
                    prev.clear();
                    prev.extend_from_slice(k);
                }
            })
        });
        let outcome = got.and_then(|_| problem.map_or(Ok(()), Err));
        finish(rec, &w.ctx.log, OpKind::Scan, latency, outcome)
    }

    /// The next trace operation for this thread; `None` at the end of the trace.
    fn next_file_op(&mut self, trace: &TraceFile) -> Result<Option<FileOp>> {
        if self.file_pos >= self.file_ops.len() {
            self.file_pos = 0;
            let want = self.file_quota.min(TRACE_BATCH as u64) as usize;
            trace.next_batch(&mut self.file_ops, want)?;
            self.file_quota -= self.file_ops.len() as u64;
        }
        let op = self.file_ops.get_mut(self.file_pos).map(|op| FileOp {
            key: std::mem::replace(&mut op.key, FileKey::Number(0)),
            kind: op.kind,
            size: op.size,
        });
        self.file_pos += 1;
        Ok(op)
    }

    /// One from-file transaction (see [`super::fromfile`]); `None` when the trace has ended.
    fn do_from_file(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Option<Outcome> {
        let w = self.w;
        let trace = w.trace.as_ref()?;
        let op = match self.next_file_op(trace) {
            Ok(Some(op)) => op,
            Ok(None) => {
                if !w
                    .trace_ended
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    eprintln!(
                        "note: trace {} ended after {} operations (operationcount is {})",
                        trace.source(),
                        trace.handed_out(),
                        w.operation_count
                    );
                }
                return None;
            }
            Err(e) => {
                w.ctx.log.report(&e.to_string());
                rec.record_input_error();
                return None;
            }
        };
        match op.key {
            FileKey::Number(n) => self.set_key(n),
            FileKey::Bytes(k) => self.key = k,
        }
        Some(match op.kind {
            FileOpKind::Skip => Outcome::Skipped,
            FileOpKind::Insert => {
                self.build_single_field(op.size as usize);
                self.insert_current(db, rec)
            }
            FileOpKind::Scan => self.scan_current(db, rec, TRACE_SCAN_LENGTH),
            FileOpKind::Read => {
                let key = &self.key;
                let (got, latency) = time_op(|| db.read(key));
                match got {
                    Ok(None) => {
                        // A cache trace misses: a failed READ, as the fork counts it, not an error.
                        rec.record(OpKind::Read, latency, false);
                        rec.record_miss();
                        Outcome::Failed
                    }
                    got => {
                        let outcome = got.and_then(|v| match v {
                            Some(v) if w.ctx.verify => CoreClient::verify_record(w, key, &v),
                            _ => Ok(()),
                        });
                        finish(rec, &w.ctx.log, OpKind::Read, latency, outcome)
                    }
                }
            }
        })
    }

    /// Encodes a record of one field (`field0`) of `len` bytes for the current key.
    fn build_single_field(&mut self, len: usize) {
        self.scratch.clear();
        fill_value(&mut self.scratch, &self.key, 0, len);
        self.record.clear();
        encode_record(
            &mut self.record,
            &[Field {
                index: 0,
                value: &self.scratch,
            }],
        );
    }
}

/// The error for a record that should exist but does not.
pub(crate) fn missing(key: &[u8]) -> Error {
    Error::verify(format!("{} is missing", super::show_key(key)))
}

/// Checks that scanned key `k` is at or after `start` and strictly after the previous one.
pub(crate) fn check_scanned(start: &[u8], prev: &[u8], k: &[u8]) -> Result<()> {
    if k < start || (!prev.is_empty() && k <= prev) {
        return Err(Error::verify(format!(
            "scan from {} returned {} out of order",
            super::show_key(start),
            super::show_key(k)
        )));
    }
    Ok(())
}

impl Client for CoreClient<'_> {
    fn step(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Option<Outcome> {
        let w = self.w;
        match self.phase {
            Phase::Load => {
                let i = w.load_keys.next();
                match &w.init_keys {
                    Some(keys) => {
                        self.key
                            .clone_from(keys.get((i - w.insert_start) as usize)?);
                        self.build_single_field(CLUSTER_LOAD_VALUE_SIZE);
                        Some(self.insert_current(db, rec))
                    }
                    None => {
                        self.set_key(i);
                        Some(self.do_insert(db, rec))
                    }
                }
            }
            Phase::Run => Some(match w.ops.next(&mut self.rng) {
                CoreOp::Read => self.do_read(db, rec),
                CoreOp::Update => self.do_update(db, rec),
                CoreOp::ReadModifyWrite => self.do_read_modify_write(db, rec),
                CoreOp::Scan => self.do_scan(db, rec),
                CoreOp::FromFile => return self.do_from_file(db, rec),
                CoreOp::Insert => {
                    let k = w.run_inserts.next();
                    self.set_key(k);
                    let outcome = self.do_insert(db, rec);
                    // Acknowledged even when it failed, as YCSB does: the run must go on.
                    w.run_inserts.acknowledge(k);
                    outcome
                }
            }),
        }
    }
}
