//! Social Graph: RocksDB db_bench's `mixgraph` benchmark (the model of Cao et al., "Characterizing,
//! Modeling, and Benchmarking RocksDB Key-Value Workloads at Facebook", FAST'20), draw for draw.
//!
//! [`MixGraphModel`] reproduces what db_bench's `MixGraph` computes for every operation, with the
//! same generator (`std::mt19937_64`, [`Mt64`]) and the same integer and floating-point steps, so
//! that the same seed gives the same keys, operations, value sizes and scan lengths. Per operation:
//!
//! 1. One draw is spent choosing the database (db_bench's `SelectDBWithCfh`, even with one).
//! 2. `ini_rand = draw % num`; `u = ini_rand / num`.
//! 3. The key number: when `key_dist_a` or `key_dist_b` is 0, **`ini_rand` itself**, uniform over
//!    the key space. This holds even when `keyrange_dist_a..d` are given: db_bench then builds the
//!    two-term-exponential key-range table but never uses it, and the AegonKV evaluation's
//!    Social Graph flags (which set the key-range parameters and no `key_dist_*`) draw uniform
//!    keys. Only with both `key_dist_a` and `key_dist_b` non-zero does the key come from the
//!    key-range table ([`KeyRanges`]: a range chosen by `ini_rand`, then an offset seeded by the
//!    power law `(u/a)^(1/b)`), or, with no key-range parameters, from the power law over the
//!    whole key space.
//! 4. The operation: `ini_rand % range` against cumulative shares of 1000
//!    (`ceil(1000 * ratio / sum)` each) of get, put and seek. So the operation, like the value size
//!    below, is a function of the key number: a key is always read, always written, or always
//!    sought.
//! 5. A put's value size: the generalized Pareto inverse at `u` (`value_theta`, `value_k`,
//!    `value_sigma`), rounded up; below 10 it becomes 10, above `mix_max_value_size` (at most
//!    1 MiB) it wraps modulo it. A seek's scan length: the same with `iter_*`, modulo
//!    `mix_max_scan_len`.
//!
//! Keys are db_bench's: the key number's low 8 bytes big-endian, padded with `'0'` to `key_size`.
//! A C++ conversion of a floating-point value out of `int64_t`'s range gives `INT64_MIN` on x86
//! ([`cpp_to_i64`]), which decides what `u = 0` does: the value size becomes 10 and the scan length
//! 0. `read_random_exp_range` (x87 long-double arithmetic) is not reproduced and must stay 0.
//!
//! Thread `t`'s generator is seeded with `seed + t`; `seed` defaults to [`AEGONKV_SEED`], what
//! the db_bench of AegonKV's artifact (which wrote the evaluation's Social Graph trace) uses when
//! its `--seed` is not given. RocksDB 7.8's db_bench `--seed=S` seeds the `n`th thread it starts
//! (counting the threads of earlier benchmarks in the same run) with `S + n`.
//!
//! [`MixGraph`] runs the model on the fly (`workload=mixgraph`; load writes every key number
//! `0..recordcount` once, in a scrambled order, with `value_size` bytes). `shale-bench gen-trace`
//! writes the same draws as a `key,op,size` trace for the core workload's `filetype=meta`.

use super::{finish, time_op, Client, Context, Phase, Workload};
use crate::backend::Backend;
use crate::dbbench::shale_side::db_bench_key;
use crate::error::{Error, Result};
use crate::generator::{Counter, Mt64};
use crate::measure::{OpKind, Outcome, Recorder};
use crate::props::{PropSpec, Properties};
use crate::record::{fill_value, value_matches};

/// Smallest value a put writes (db_bench's floor).
pub const MIN_VALUE_SIZE: i64 = 10;
/// Largest value size db_bench's mixgraph writes, whatever `mix_max_value_size` says.
pub const MAX_VALUE_SIZE: i64 = 1 << 20;
/// Seed of thread 0 when `seed` is not given: AegonKV's db_bench (`--seed=0` means 1000).
pub const AEGONKV_SEED: u64 = 1000;
/// Total of the operation shares (db_bench's `QueryDecider` range).
const QUERY_RANGE: f64 = 1000.0;
/// Key-range weights below this count as zero (db_bench's cut-off).
const MIN_KEYRANGE_WEIGHT: f64 = 1e-16;

/// Properties of the mixgraph workload: db_bench's flag names and defaults, with `recordcount`
/// for `--num` and `operationcount` for `--reads`.
pub static PROPS: &[PropSpec] = &[
    PropSpec::new(
        "recordcount",
        "",
        "keys in the key space (db_bench --num), all loaded; required",
    ),
    PropSpec::new(
        "operationcount",
        "",
        "operations of the run phase (db_bench --reads); required with -run",
    ),
    PropSpec::new("key_size", "16", "key size in bytes"),
    PropSpec::new("value_size", "100", "value size written by the load phase"),
    PropSpec::new("keyrange_num", "1", "number of key ranges"),
    PropSpec::new(
        "keyrange_dist_a",
        "0",
        "key-range hotness: a in a*exp(b*x) + c*exp(d*x)",
    ),
    PropSpec::new("keyrange_dist_b", "0", "key-range hotness: b"),
    PropSpec::new("keyrange_dist_c", "0", "key-range hotness: c"),
    PropSpec::new("keyrange_dist_d", "0", "key-range hotness: d"),
    PropSpec::new(
        "key_dist_a",
        "0",
        "key power law a*x^b; 0 (with key_dist_b 0) draws keys uniformly",
    ),
    PropSpec::new("key_dist_b", "0", "key power law b"),
    PropSpec::new("value_theta", "0", "put value size: Pareto location"),
    PropSpec::new("value_k", "0.2615", "put value size: Pareto shape"),
    PropSpec::new("value_sigma", "25.45", "put value size: Pareto scale"),
    PropSpec::new("iter_theta", "0", "scan length: Pareto location"),
    PropSpec::new("iter_k", "2.517", "scan length: Pareto shape"),
    PropSpec::new("iter_sigma", "14.236", "scan length: Pareto scale"),
    PropSpec::new("mix_get_ratio", "1", "share of gets"),
    PropSpec::new("mix_put_ratio", "0", "share of puts"),
    PropSpec::new("mix_seek_ratio", "0", "share of seeks (scans)"),
    PropSpec::new(
        "mix_max_value_size",
        "1024",
        "put value sizes above this wrap modulo it",
    ),
    PropSpec::new("mix_max_scan_len", "10000", "scan lengths wrap modulo this"),
    PropSpec::new(
        "read_random_exp_range",
        "0",
        "db_bench's exponential key skew; only 0 is reproduced",
    ),
    PropSpec::new("sine_mix_rate", "false", "shape the request rate as a sine"),
    PropSpec::new("sine_a", "1", "sine rate: amplitude (ops/s)"),
    PropSpec::new("sine_b", "1", "sine rate: angular frequency (1/s)"),
    PropSpec::new("sine_c", "0", "sine rate: phase"),
    PropSpec::new("sine_d", "1", "sine rate: offset (ops/s)"),
    PropSpec::new(
        "sine_mix_rate_interval_milliseconds",
        "10000",
        "how often the sine rate is updated",
    ),
];

/// What C++'s `static_cast<int64_t>(double)` gives on x86-64 (`cvttsd2si`): truncation, and
/// `INT64_MIN` for NaN and anything outside `int64_t`'s range.
pub fn cpp_to_i64(x: f64) -> i64 {
    // 2^63 exactly; every double below it and at or above -2^63 converts.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || !(-LIMIT..LIMIT).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// db_bench's `ParetoCdfInversion`: the generalized Pareto inverse CDF at `u`, rounded up.
pub fn pareto_inverse(u: f64, theta: f64, k: f64, sigma: f64) -> i64 {
    let ret = if k == 0.0 {
        theta - sigma * u.ln()
    } else {
        theta + sigma * (u.powf(-k) - 1.0) / k
    };
    cpp_to_i64(ret.ceil())
}

/// db_bench's `PowerCdfInversion`: `(u/a)^(1/b)`, rounded up.
fn power_inverse(u: f64, a: f64, b: f64) -> i64 {
    cpp_to_i64((u / a).powf(1.0 / b).ceil())
}

/// The operations of mixgraph, as db_bench numbers them (the `op` column of a `meta` trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MixOp {
    /// 0: a point read.
    Get,
    /// 1: a write.
    Put,
    /// 2: a seek followed by a short scan.
    Seek,
}

impl MixOp {
    /// db_bench's number for the operation.
    pub fn code(self) -> u8 {
        match self {
            MixOp::Get => 0,
            MixOp::Put => 1,
            MixOp::Seek => 2,
        }
    }
}

/// db_bench's `QueryDecider`: cumulative shares of [`QUERY_RANGE`].
#[derive(Debug, Clone)]
struct QueryDecider {
    bounds: Vec<i64>,
    range: i64,
}

impl QueryDecider {
    fn new(ratios: &[f64]) -> Result<QueryDecider> {
        let sum: f64 = ratios.iter().sum();
        if sum.is_nan() || sum <= 0.0 {
            return Err(Error::property(
                "mix_get_ratio, mix_put_ratio and mix_seek_ratio must not all be zero",
            ));
        }
        let mut range = 0i64;
        let mut bounds = Vec::with_capacity(ratios.len());
        for r in ratios {
            // db_bench adds `static_cast<int>(ceil(...))` to an int.
            range += cpp_to_i64((QUERY_RANGE * (r / sum)).ceil());
            bounds.push(range);
        }
        Ok(QueryDecider { bounds, range })
    }

    fn op(&self, rand: i64) -> MixOp {
        let pos = rand.wrapping_abs() % self.range;
        match self.bounds.iter().position(|&b| pos < b).unwrap_or(0) {
            1 => MixOp::Put,
            2 => MixOp::Seek,
            _ => MixOp::Get,
        }
    }
}

/// db_bench's `GenerateTwoTermExpKeys`: the key space cut into `keyrange_num` ranges whose access
/// weights follow `a*exp(b*x) + c*exp(d*x)`, shuffled with a generator seeded by the total weight.
#[derive(Debug, Clone)]
pub struct KeyRanges {
    /// Per range, in key order: where its share of `0..rand_max` starts.
    starts: Vec<i64>,
    /// Per range, in key order: its share.
    accesses: Vec<i64>,
    rand_max: i64,
    range_size: i64,
}

impl KeyRanges {
    /// The table for `total_keys` keys (`InitiateExpDistribution`).
    ///
    /// # Errors
    /// `Property` when a range would hold no key or every weight is zero (db_bench would divide
    /// by zero).
    pub fn new(total_keys: i64, keyrange_num: i64, abcd: [f64; 4]) -> Result<KeyRanges> {
        let num = keyrange_num.max(1);
        let range_size = total_keys / num;
        if range_size <= 0 {
            return Err(Error::property(format!(
                "keyrange_num {keyrange_num} is larger than the key space ({total_keys} keys)"
            )));
        }
        let [a, b, c, d] = abcd;
        let mut amplify: i64 = 0;
        let mut units: Vec<i64> = Vec::with_capacity(num as usize);
        for pfx in (1..=num).rev() {
            let x = pfx as f64;
            let mut p = a * (b * x).exp() + c * (d * x).exp();
            if p < MIN_KEYRANGE_WEIGHT {
                p = 0.0;
            }
            if amplify == 0 && p > 0.0 {
                amplify = cpp_to_i64((1.0 / p).floor()) + 1;
            }
            units.push(if p <= 0.0 {
                0
            } else {
                cpp_to_i64((amplify as f64 * p).floor())
            });
        }
        let rand_max: i64 = units.iter().sum();
        if rand_max <= 0 {
            return Err(Error::property(
                "keyrange_dist_a..d give every key range a zero weight",
            ));
        }
        // db_bench shuffles with the flag's range count (no shuffle when it is not positive).
        let mut shuffle = Mt64::new(rand_max as u64);
        for i in 0..keyrange_num.max(0) as usize {
            let pos = (shuffle.next_u64() % keyrange_num as u64) as usize;
            units.swap(i, pos);
        }
        let mut starts = Vec::with_capacity(units.len());
        let mut offset = 0;
        for &u in &units {
            starts.push(offset);
            offset += u;
        }
        Ok(KeyRanges {
            starts,
            accesses: units,
            rand_max,
            range_size,
        })
    }

    /// The key number for `ini_rand` (`DistGetKeyID`, with `a` and `b` both non-zero).
    pub fn key_id(&self, ini_rand: i64, a: f64, b: f64) -> i64 {
        let keyrange_rand = ini_rand % self.rand_max;
        let (mut start, mut end) = (0usize, self.starts.len());
        while start + 1 < end {
            let mid = start + (end - start) / 2;
            if keyrange_rand < self.starts[mid] {
                end = mid;
            } else {
                start = mid;
            }
        }
        let u = (ini_rand % self.range_size) as f64 / self.range_size as f64;
        let seed = power_inverse(u, a, b);
        let offset = Mt64::new(seed as u64).next_u64() % self.range_size as u64;
        self.range_size
            .wrapping_mul(start as i64)
            .wrapping_add(offset as i64)
    }

    /// Each range's share of accesses, in key order (for reports and tests).
    pub fn shares(&self) -> Vec<f64> {
        self.accesses
            .iter()
            .map(|&a| a as f64 / self.rand_max as f64)
            .collect()
    }
}

/// One operation drawn by [`MixGraphModel::draw`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixDraw {
    /// db_bench's key number (may be negative on the power-law path, as in db_bench).
    pub key: i64,
    /// The operation.
    pub op: MixOp,
    /// Bytes a put writes.
    pub value_size: i64,
    /// Records a seek scans after the seek (0 or less: none).
    pub scan_len: i64,
}

/// The parameters of the mixgraph model, read from db_bench-named properties.
#[derive(Debug, Clone)]
pub struct MixGraphModel {
    num: i64,
    query: QueryDecider,
    ranges: Option<KeyRanges>,
    key_dist: (f64, f64),
    value: (f64, f64, f64),
    value_max: i64,
    iter: (f64, f64, f64),
    scan_len_max: i64,
}

impl MixGraphModel {
    /// Reads the model's parameters; `num` is the size of the key space.
    ///
    /// # Errors
    /// `Property` for malformed values or parameters db_bench would divide by zero with.
    pub fn new(props: &Properties, num: u64) -> Result<MixGraphModel> {
        let num = i64::try_from(num).ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::property(format!(
                "the key space must hold 1 to 2^63-1 keys, not {num}"
            ))
        })?;
        let f = |k: &str, d: f64| props.get_f64(k, d);
        if f("read_random_exp_range", 0.0)? != 0.0 {
            return Err(Error::property(
                "read_random_exp_range is not supported (db_bench computes it in x87 long doubles); leave it 0",
            ));
        }
        let abcd = [
            f("keyrange_dist_a", 0.0)?,
            f("keyrange_dist_b", 0.0)?,
            f("keyrange_dist_c", 0.0)?,
            f("keyrange_dist_d", 0.0)?,
        ];
        let key_dist = (f("key_dist_a", 0.0)?, f("key_dist_b", 0.0)?);
        let random = key_dist.0 == 0.0 || key_dist.1 == 0.0;
        // db_bench builds the key-range table whenever a parameter is set, and uses it only when
        // the keys are not uniform.
        let ranges = if abcd.iter().any(|&x| x != 0.0) {
            let table = KeyRanges::new(num, props.get_i64("keyrange_num", 1)?, abcd)?;
            (!random).then_some(table)
        } else {
            None
        };
        let positive = |k: &str, d: i64| -> Result<i64> {
            let v = props.get_i64(k, d)?;
            if v <= 0 {
                return Err(Error::property(format!(
                    "bad value for property {k}: must be positive, got {v}"
                )));
            }
            Ok(v)
        };
        Ok(MixGraphModel {
            num,
            query: QueryDecider::new(&[
                f("mix_get_ratio", 1.0)?,
                f("mix_put_ratio", 0.0)?,
                f("mix_seek_ratio", 0.0)?,
            ])?,
            ranges,
            key_dist,
            value: (
                f("value_theta", 0.0)?,
                f("value_k", 0.2615)?,
                f("value_sigma", 25.45)?,
            ),
            value_max: positive("mix_max_value_size", 1024)?.min(MAX_VALUE_SIZE),
            iter: (
                f("iter_theta", 0.0)?,
                f("iter_k", 2.517)?,
                f("iter_sigma", 14.236)?,
            ),
            scan_len_max: positive("mix_max_scan_len", 10_000)?,
        })
    }

    /// Whether keys are drawn uniformly although key-range parameters were given (the case
    /// db_bench handles silently; callers print a note).
    pub fn key_ranges_unused(props: &Properties) -> bool {
        let set = |k: &str| props.get_f64(k, 0.0).is_ok_and(|v| v != 0.0);
        let ranges = [
            "keyrange_dist_a",
            "keyrange_dist_b",
            "keyrange_dist_c",
            "keyrange_dist_d",
        ]
        .iter()
        .any(|k| set(k));
        ranges && !(set("key_dist_a") && set("key_dist_b"))
    }

    /// The next operation from `rng` (one thread's generator), as db_bench draws it.
    pub fn draw(&self, rng: &mut Mt64) -> MixDraw {
        let _database = rng.next_u64();
        let ini_rand = (rng.next_u64() % self.num as u64) as i64;
        let rand_v = ini_rand % self.num;
        let u = rand_v as f64 / self.num as f64;
        let (a, b) = self.key_dist;
        let key = if a == 0.0 || b == 0.0 {
            ini_rand
        } else if let Some(r) = &self.ranges {
            r.key_id(ini_rand, a, b)
        } else {
            let seed = power_inverse(u, a, b);
            (Mt64::new(seed as u64).next_u64() as i64) % self.num
        };
        let op = self.query.op(rand_v);
        let (value_size, scan_len) = match op {
            MixOp::Get => (0, 0),
            MixOp::Put => {
                let (t, k, s) = self.value;
                let v = pareto_inverse(u, t, k, s);
                let v = if v < MIN_VALUE_SIZE {
                    MIN_VALUE_SIZE
                } else if v > self.value_max {
                    v % self.value_max
                } else {
                    v
                };
                (v, 0)
            }
            MixOp::Seek => {
                let (t, k, s) = self.iter;
                (0, pareto_inverse(u, t, k, s) % self.scan_len_max)
            }
        };
        MixDraw {
            key,
            op,
            value_size,
            scan_len,
        }
    }
}

/// The seed of thread 0 from the `seed` property: [`AEGONKV_SEED`] when it is not set.
///
/// # Errors
/// `Property` when it is not an unsigned integer.
pub fn base_seed(props: &Properties) -> Result<u64> {
    props.get_u64("seed", AEGONKV_SEED)
}

#[derive(Debug, Clone, Copy)]
struct Sine {
    a: f64,
    b: f64,
    c: f64,
    d: f64,
    interval_secs: f64,
}

/// See the module documentation.
pub struct MixGraph {
    ctx: Context,
    model: MixGraphModel,
    seed: u64,
    keys: u64,
    operation_count: u64,
    key_size: usize,
    load_value_size: usize,
    sine: Option<Sine>,
    load_counter: Counter,
    load_stride: u64,
}

impl MixGraph {
    /// Reads the mixgraph properties.
    ///
    /// # Errors
    /// `Property` for missing or malformed values.
    pub fn new(props: &Properties, ctx: Context) -> Result<MixGraph> {
        let keys = props
            .get("recordcount")
            .map(|_| props.get_u64_in("recordcount", 1, 1, i64::MAX as u64))
            .transpose()?
            .ok_or_else(|| {
                Error::property("property recordcount is required (the number of keys)")
            })?;
        let model = MixGraphModel::new(props, keys)?;
        if MixGraphModel::key_ranges_unused(props) {
            eprintln!("note: {}", KEY_RANGES_UNUSED_NOTE);
        }
        let f = |k: &str, d: f64| props.get_f64(k, d);
        let sine = if props.get_bool("sine_mix_rate", false)? {
            Some(Sine {
                a: f("sine_a", 1.0)?,
                b: f("sine_b", 1.0)?,
                c: f("sine_c", 0.0)?,
                d: f("sine_d", 1.0)?,
                interval_secs: props.get_u64_in(
                    "sine_mix_rate_interval_milliseconds",
                    10_000,
                    1,
                    u64::MAX,
                )? as f64
                    / 1000.0,
            })
        } else {
            None
        };
        Ok(MixGraph {
            model,
            seed: base_seed(props)?,
            keys,
            operation_count: props.get_u64("operationcount", 0)?,
            key_size: props.get_u64_in("key_size", 16, 1, 1 << 16)? as usize,
            load_value_size: props.get_u64_in("value_size", 100, 0, 1 << 30)? as usize,
            sine,
            load_counter: Counter::new(0),
            load_stride: permutation_stride(keys),
            ctx,
        })
    }
}

/// Printed when key-range parameters are given without `key_dist_a`/`key_dist_b`.
pub const KEY_RANGES_UNUSED_NOTE: &str =
    "keyrange_dist_* are set but key_dist_a/key_dist_b are not: \
    db_bench's mixgraph then draws keys uniformly and never uses the key-range table, and so does \
    this generator (set key_dist_a and key_dist_b for hot key ranges)";

/// A stride coprime with `n`, near `n` times the golden ratio, so `i * stride mod n` visits
/// every number below `n` once in a scattered order.
fn permutation_stride(n: u64) -> u64 {
    if n <= 2 {
        return 1;
    }
    let mut s = ((n as f64) * 0.618_033_988_75) as u64 | 1;
    while gcd(s, n) != 1 {
        s += 2;
    }
    s % n
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Workload for MixGraph {
    fn operation_count(&self, phase: Phase) -> u64 {
        match phase {
            Phase::Load => self.keys,
            Phase::Run => self.operation_count,
        }
    }

    fn client(&self, phase: Phase, thread: usize, _quota: u64) -> Box<dyn Client + '_> {
        Box::new(MixClient {
            w: self,
            phase,
            rng: Mt64::new(self.seed.wrapping_add(thread as u64)),
            key: Vec::new(),
            value: Vec::new(),
        })
    }

    fn rate_at(&self, elapsed_secs: f64) -> Option<f64> {
        let s = self.sine?;
        let t = (elapsed_secs / s.interval_secs).floor() * s.interval_secs;
        Some((s.a * (s.b * t + s.c).sin() + s.d).max(1.0))
    }
}

struct MixClient<'a> {
    w: &'a MixGraph,
    phase: Phase,
    rng: Mt64,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl MixClient<'_> {
    fn write(&mut self, db: &dyn Backend, rec: &mut Recorder, len: usize) -> Outcome {
        self.value.clear();
        fill_value(&mut self.value, &self.key, 0, len);
        let (key, value) = (&self.key, &self.value);
        let (outcome, latency) = time_op(|| db.insert(key, value));
        finish(rec, &self.w.ctx.log, OpKind::Insert, latency, outcome)
    }

    fn check(&self, k: &[u8], v: &[u8]) -> Result<()> {
        if self.w.ctx.verify && !value_matches(v, k, 0) {
            return Err(Error::verify(format!(
                "value of {} does not hold the value written",
                super::show_key(k)
            )));
        }
        Ok(())
    }
}

impl Client for MixClient<'_> {
    fn step(&mut self, db: &dyn Backend, rec: &mut Recorder) -> Option<Outcome> {
        let w = self.w;
        if self.phase == Phase::Load {
            let i = w.load_counter.next();
            let n = ((u128::from(i) * u128::from(w.load_stride)) % u128::from(w.keys)) as u64;
            db_bench_key(n, w.key_size, &mut self.key);
            return Some(self.write(db, rec, w.load_value_size));
        }
        let d = w.model.draw(&mut self.rng);
        db_bench_key(d.key as u64, w.key_size, &mut self.key);
        Some(match d.op {
            MixOp::Get => {
                let key = &self.key;
                let (got, latency) = time_op(|| db.read(key));
                if let Ok(None) = got {
                    // db_bench counts a get that finds nothing as not found, not as an error.
                    rec.record(OpKind::Read, latency, false);
                    rec.record_miss();
                    Outcome::Failed
                } else {
                    let outcome = got.and_then(|v| v.map_or(Ok(()), |v| self.check(key, &v)));
                    finish(rec, &w.ctx.log, OpKind::Read, latency, outcome)
                }
            }
            MixOp::Put => self.write(db, rec, d.value_size as usize),
            MixOp::Seek => {
                let len = usize::try_from(d.scan_len).unwrap_or(0);
                let start = &self.key;
                let mut problem = None;
                let (got, latency) = time_op(|| {
                    db.scan(start, len, &mut |k, v| {
                        if problem.is_none() {
                            problem = self.check(k, v).err();
                        }
                    })
                });
                let outcome = got.and_then(|_| problem.map_or(Ok(()), Err));
                finish(rec, &w.ctx.log, OpKind::Scan, latency, outcome)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        let mut p = Properties::new();
        for (k, v) in pairs {
            p.set(*k, *v, crate::props::Origin::CommandLine);
        }
        p
    }

    const SOCIAL_GRAPH: &[(&str, &str)] = &[
        ("keyrange_dist_a", "14.18"),
        ("keyrange_dist_b", "-2.917"),
        ("keyrange_dist_c", "0.0164"),
        ("keyrange_dist_d", "-0.08082"),
        ("keyrange_num", "30"),
        ("value_k", "0.923"),
        ("value_sigma", "226.409"),
        ("iter_k", "2.517"),
        ("iter_sigma", "14.236"),
        ("mix_get_ratio", "0.55"),
        ("mix_put_ratio", "0.44"),
        ("mix_seek_ratio", "0.01"),
    ];

    #[test]
    fn cpp_conversions_saturate_to_int64_min_like_x86() {
        assert_eq!(cpp_to_i64(f64::INFINITY), i64::MIN);
        assert_eq!(cpp_to_i64(f64::NAN), i64::MIN);
        assert_eq!(cpp_to_i64(-2.7), -2);
        assert_eq!(pareto_inverse(0.0, 0.0, 0.923, 226.409), i64::MIN);
    }

    #[test]
    fn the_social_graph_shares_round_up_as_db_bench_does() {
        let q = QueryDecider::new(&[0.55, 0.44, 0.01]).unwrap();
        assert_eq!(q.bounds, vec![550, 990, 1000]);
        assert_eq!(q.op(549), MixOp::Get);
        assert_eq!(q.op(550), MixOp::Put);
        assert_eq!(q.op(999), MixOp::Seek);
        assert_eq!(q.op(1000), MixOp::Get);
        // A ratio that does not divide 1000 evenly rounds every share up.
        let q = QueryDecider::new(&[1.0, 1.0, 1.0]).unwrap();
        assert_eq!(q.bounds, vec![334, 668, 1002]);
    }

    #[test]
    fn without_key_dist_the_keys_are_the_uniform_draw_even_with_key_ranges() {
        let p = props(SOCIAL_GRAPH);
        assert!(MixGraphModel::key_ranges_unused(&p));
        let m = MixGraphModel::new(&p, 50_000).unwrap();
        assert!(m.ranges.is_none());
        let mut rng = Mt64::new(AEGONKV_SEED);
        let mut check = Mt64::new(AEGONKV_SEED);
        for _ in 0..1000 {
            let d = m.draw(&mut rng);
            check.next_u64();
            assert_eq!(d.key, (check.next_u64() % 50_000) as i64);
            if d.op == MixOp::Put {
                assert!((0..1024).contains(&d.value_size), "{}", d.value_size);
            }
        }
    }

    #[test]
    fn key_ranges_weight_the_hottest_range_as_the_two_term_exponential_says() {
        let r = KeyRanges::new(30_000, 30, [14.18, -2.917, 0.0164, -0.08082]).unwrap();
        let shares = r.shares();
        assert_eq!(shares.len(), 30);
        let max = shares.iter().copied().fold(0.0, f64::max);
        // Range 1 weighs 14.18e^-2.917 + 0.0164e^-0.081 = 0.782 of a total of about 1.0.
        assert!((max - 0.78).abs() < 0.03, "{max}");
        let p = props(
            &[
                SOCIAL_GRAPH,
                &[("key_dist_a", "0.002312"), ("key_dist_b", "0.3467")],
            ]
            .concat(),
        );
        assert!(!MixGraphModel::key_ranges_unused(&p));
        let m = MixGraphModel::new(&p, 30_000).unwrap();
        let hot = shares.iter().position(|&s| s == max).unwrap() as i64;
        let mut rng = Mt64::new(7);
        let n = 20_000;
        let hits = (0..n)
            .filter(|_| m.draw(&mut rng).key / 1000 == hot)
            .count();
        assert!((hits as f64 / f64::from(n) - max).abs() < 0.03, "{hits}");
    }

    #[test]
    fn load_order_is_a_permutation_of_the_key_space() {
        for n in [1u64, 2, 3, 10, 97, 1000, 1024] {
            let s = permutation_stride(n);
            let mut seen: Vec<u64> = (0..n).map(|i| (i * s) % n).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }
}
