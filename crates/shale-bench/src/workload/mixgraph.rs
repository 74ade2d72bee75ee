//! The Social Graph workload: the "mixgraph" model of Cao et al., "Characterizing, Modeling, and
//! Benchmarking RocksDB Key-Value Workloads at Facebook" (FAST'20), as db_bench implements it and
//! the AegonKV evaluation parameterises it.
//!
//! - **Keys** (`key_size` bytes: the key number big-endian, padded with `'0'`) are split into
//!   `keyrange_num` equal ranges. Range `i` (1-based) is hot with weight
//!   `keyrange_dist_a * exp(keyrange_dist_b * i) + keyrange_dist_c * exp(keyrange_dist_d * i)`;
//!   the ranges are shuffled by a seed so hot ranges are not neighbours. Within a range the key is
//!   uniform, or follows the power law `key_dist_a * x^key_dist_b` when both are non-zero.
//! - **Operations**: get, put and seek (a scan) with weights `mix_get_ratio`, `mix_put_ratio`,
//!   `mix_seek_ratio`.
//! - **Value sizes** of puts follow a generalized Pareto distribution (`value_theta`, `value_k`,
//!   `value_sigma`); **scan lengths** another (`iter_theta`, `iter_k`, `iter_sigma`). A draw below
//!   one becomes [`MIN_VALUE_SIZE`] (values) or one (scans); a draw above the maximum wraps
//!   modulo it, as db_bench does, so the tail keeps spreading instead of piling up at the cap.
//! - **Rate**: with `sine_mix_rate=true` the target rate is
//!   `sine_a * sin(sine_b * t + sine_c) + sine_d` operations per second, `t` in seconds, updated
//!   every `sine_mix_rate_interval_milliseconds`.
//!
//! Load writes every key number `0..recordcount` once with `value_size` bytes, in a scrambled
//! order (a multiplicative permutation), as db_bench's fillrandom does without its duplicates.
//! Values come from the deterministic stream of their key (field 0), so `verify=true` checks gets
//! and seeks.

use super::core::{check_scanned, missing};
use super::{finish, time_op, Client, Context, Phase, Workload};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::generator::{Counter, Discrete};
use crate::measure::{OpKind, Recorder};
use crate::props::{PropSpec, Properties};
use crate::record::{fill_value, value_matches};
use crate::rng::{mix64, Rng};

/// Smallest value a put writes (db_bench's floor).
pub const MIN_VALUE_SIZE: u64 = 10;
/// Default key size (the Social Graph setting).
pub const DEFAULT_KEY_SIZE: u64 = 48;
/// Default load value size.
pub const DEFAULT_VALUE_SIZE: u64 = 256;
/// Default cap on put value sizes (db_bench's `mix_max_value_size`).
pub const DEFAULT_MAX_VALUE_SIZE: u64 = 1024;
/// Default cap on scan lengths (db_bench's `mix_max_scan_len`).
pub const DEFAULT_MAX_SCAN_LEN: u64 = 10_000;

/// Properties of the mixgraph workload (db_bench's flag names).
pub static PROPS: &[PropSpec] = &[
    PropSpec::new(
        "recordcount",
        "",
        "keys in the key space (all loaded); required",
    ),
    PropSpec::new(
        "operationcount",
        "",
        "operations of the run phase; required with -run",
    ),
    PropSpec::new("key_size", "48", "key size in bytes (at least 8)"),
    PropSpec::new("value_size", "256", "value size written by the load phase"),
    PropSpec::new("keyrange_num", "30", "number of key ranges"),
    PropSpec::new(
        "keyrange_dist_a",
        "14.18",
        "key-range hotness: a in a*exp(b*x) + c*exp(d*x)",
    ),
    PropSpec::new("keyrange_dist_b", "-2.917", "key-range hotness: b"),
    PropSpec::new("keyrange_dist_c", "0.0164", "key-range hotness: c"),
    PropSpec::new("keyrange_dist_d", "-0.08082", "key-range hotness: d"),
    PropSpec::new(
        "key_dist_a",
        "0",
        "in-range power law a*x^b (0: uniform within a range)",
    ),
    PropSpec::new("key_dist_b", "0", "in-range power law b"),
    PropSpec::new("value_theta", "0", "put value size: Pareto location"),
    PropSpec::new("value_k", "0.923", "put value size: Pareto shape"),
    PropSpec::new("value_sigma", "226.409", "put value size: Pareto scale"),
    PropSpec::new("iter_theta", "0", "scan length: Pareto location"),
    PropSpec::new("iter_k", "2.517", "scan length: Pareto shape"),
    PropSpec::new("iter_sigma", "14.236", "scan length: Pareto scale"),
    PropSpec::new("mix_get_ratio", "0.55", "share of gets"),
    PropSpec::new("mix_put_ratio", "0.44", "share of puts"),
    PropSpec::new("mix_seek_ratio", "0.01", "share of seeks (scans)"),
    PropSpec::new("mix_max_value_size", "1024", "largest put value"),
    PropSpec::new("mix_max_scan_len", "10000", "longest scan"),
    PropSpec::new("sine_mix_rate", "false", "shape the request rate as a sine"),
    PropSpec::new("sine_a", "1000", "sine rate: amplitude (ops/s)"),
    PropSpec::new("sine_b", "0.000073", "sine rate: angular frequency (1/s)"),
    PropSpec::new("sine_c", "0", "sine rate: phase"),
    PropSpec::new("sine_d", "80000", "sine rate: offset (ops/s)"),
    PropSpec::new(
        "sine_mix_rate_interval_milliseconds",
        "10000",
        "how often the sine rate is updated",
    ),
];

/// The inverse CDF of the generalized Pareto distribution at `u` in `(0, 1]`.
pub fn pareto_inverse(u: f64, theta: f64, k: f64, sigma: f64) -> f64 {
    if k == 0.0 {
        theta - sigma * u.ln()
    } else {
        theta + sigma * (u.powf(-k) - 1.0) / k
    }
}

/// Folds a Pareto draw into `floor..=max` (see the module documentation).
fn fold(x: f64, floor: u64, max: u64) -> u64 {
    let v = x.ceil();
    if v.is_nan() || v < 1.0 {
        return floor;
    }
    let v = if v >= u64::MAX as f64 {
        u64::MAX
    } else {
        v as u64
    };
    if v > max {
        (v % max).max(floor)
    } else {
        v.max(floor)
    }
}

/// The two-term-exponential key-range distribution.
#[derive(Debug, Clone)]
pub struct KeyRanges {
    /// Per range (after shuffling): its first key number and cumulative probability.
    starts: Vec<u64>,
    cumulative: Vec<f64>,
    range_len: u64,
    power: Option<(f64, f64)>,
}

impl KeyRanges {
    /// Ranges over `0..keys`.
    ///
    /// # Errors
    /// `Property` when no range has a positive weight.
    pub fn new(
        keys: u64,
        num: u64,
        abcd: [f64; 4],
        power: (f64, f64),
        seed: u64,
    ) -> Result<KeyRanges> {
        let num = num.clamp(1, keys.max(1));
        let range_len = (keys / num).max(1);
        let [a, b, c, d] = abcd;
        let mut ranges: Vec<(u64, f64)> = (1..=num)
            .map(|i| {
                let x = i as f64;
                let w = a * (b * x).exp() + c * (d * x).exp();
                (
                    (i - 1) * range_len,
                    if w.is_finite() && w > 0.0 { w } else { 0.0 },
                )
            })
            .collect();
        let total: f64 = ranges.iter().map(|r| r.1).sum();
        if total.is_nan() || total <= 0.0 {
            return Err(Error::property(
                "keyrange_dist_a..d give every key range a zero weight",
            ));
        }
        // Fisher-Yates with a fixed seed: the same parameters give the same layout.
        let mut rng = Rng::new(seed ^ 0x4B45_5952_414E_4745);
        for i in (1..ranges.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            ranges.swap(i, j);
        }
        let mut acc = 0.0;
        let mut starts = Vec::with_capacity(ranges.len());
        let mut cumulative = Vec::with_capacity(ranges.len());
        for (start, w) in ranges {
            acc += w / total;
            starts.push(start);
            cumulative.push(acc);
        }
        let power = (power.0 != 0.0 && power.1 != 0.0).then_some(power);
        Ok(KeyRanges {
            starts,
            cumulative,
            range_len,
            power,
        })
    }

    /// The next key number.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.next_f64();
        let i = self
            .cumulative
            .partition_point(|&c| c <= u)
            .min(self.starts.len() - 1);
        let offset = match self.power {
            None => rng.below(self.range_len),
            Some((a, b)) => {
                // Invert y = a * x^b on a uniform draw, then scatter within the range.
                let x = (rng.next_f64() / a).powf(1.0 / b).ceil();
                let seed = if x.is_finite() && x > 0.0 {
                    x as u64
                } else {
                    0
                };
                mix64(seed) % self.range_len
            }
        };
        self.starts[i] + offset
    }

    /// The probability of each range, in key order (for tests and reports).
    pub fn range_probabilities(&self) -> Vec<(u64, f64)> {
        let mut prev = 0.0;
        let mut out: Vec<(u64, f64)> = self
            .starts
            .iter()
            .zip(&self.cumulative)
            .map(|(&s, &c)| {
                let p = c - prev;
                prev = c;
                (s, p)
            })
            .collect();
        out.sort_by_key(|r| r.0);
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MixOp {
    Get,
    Put,
    Seek,
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
    keys: u64,
    operation_count: u64,
    key_size: usize,
    load_value_size: u64,
    ranges: KeyRanges,
    ops: Discrete<MixOp>,
    value: (f64, f64, f64),
    iter: (f64, f64, f64),
    max_value: u64,
    max_scan: u64,
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
            .map(|_| props.get_u64_in("recordcount", 1, 1, u64::MAX))
            .transpose()?
            .ok_or_else(|| {
                Error::property("property recordcount is required (the number of keys)")
            })?;
        let f = |k: &str, d: f64| props.get_f64(k, d);
        let ranges = KeyRanges::new(
            keys,
            props.get_u64_in("keyrange_num", 30, 1, 1 << 20)?,
            [
                f("keyrange_dist_a", 14.18)?,
                f("keyrange_dist_b", -2.917)?,
                f("keyrange_dist_c", 0.0164)?,
                f("keyrange_dist_d", -0.08082)?,
            ],
            (f("key_dist_a", 0.0)?, f("key_dist_b", 0.0)?),
            ctx.seed,
        )?;
        let mut ops = Discrete::new();
        ops.add(
            MixOp::Get,
            props.get_f64_in("mix_get_ratio", 0.55, 0.0, 1.0)?,
        );
        ops.add(
            MixOp::Put,
            props.get_f64_in("mix_put_ratio", 0.44, 0.0, 1.0)?,
        );
        ops.add(
            MixOp::Seek,
            props.get_f64_in("mix_seek_ratio", 0.01, 0.0, 1.0)?,
        );
        if ops.is_empty() {
            return Err(Error::property(
                "mix_get_ratio, mix_put_ratio and mix_seek_ratio are all zero",
            ));
        }
        let sine = if props.get_bool("sine_mix_rate", false)? {
            Some(Sine {
                a: f("sine_a", 1000.0)?,
                b: f("sine_b", 0.000073)?,
                c: f("sine_c", 0.0)?,
                d: f("sine_d", 80000.0)?,
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
            keys,
            operation_count: props.get_u64("operationcount", 0)?,
            key_size: props.get_u64_in("key_size", DEFAULT_KEY_SIZE, 8, 1 << 16)? as usize,
            load_value_size: props.get_u64_in("value_size", DEFAULT_VALUE_SIZE, 0, 1 << 30)?,
            ranges,
            ops,
            value: (
                f("value_theta", 0.0)?,
                f("value_k", 0.923)?,
                f("value_sigma", 226.409)?,
            ),
            iter: (
                f("iter_theta", 0.0)?,
                f("iter_k", 2.517)?,
                f("iter_sigma", 14.236)?,
            ),
            max_value: props.get_u64_in(
                "mix_max_value_size",
                DEFAULT_MAX_VALUE_SIZE,
                MIN_VALUE_SIZE,
                1 << 30,
            )?,
            max_scan: props.get_u64_in(
                "mix_max_scan_len",
                DEFAULT_MAX_SCAN_LEN,
                1,
                u64::from(u32::MAX),
            )?,
            sine,
            load_counter: Counter::new(0),
            load_stride: permutation_stride(keys),
            ctx,
        })
    }

    /// The key bytes of key number `n`: big-endian, padded with `'0'` to the key size.
    pub fn build_key(out: &mut Vec<u8>, n: u64, key_size: usize) {
        out.clear();
        out.extend_from_slice(&n.to_be_bytes());
        out.resize(key_size.max(8), b'0');
    }

    /// The key-range distribution (for tests and reports).
    pub fn ranges(&self) -> &KeyRanges {
        &self.ranges
    }
}

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

    fn client(&self, phase: Phase, thread: usize) -> Box<dyn Client + '_> {
        Box::new(MixClient {
            w: self,
            phase,
            rng: Rng::new(self.ctx.thread_seed(phase, thread)),
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
    rng: Rng,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl MixClient<'_> {
    fn write(&mut self, db: &dyn Backend, rec: &mut Recorder, kind: OpKind, len: u64) {
        self.value.clear();
        fill_value(&mut self.value, &self.key, 0, len as usize);
        let (key, value) = (&self.key, &self.value);
        let (outcome, latency) = time_op(|| {
            if kind == OpKind::Insert {
                db.insert(key, value)
            } else {
                db.update(key, value)
            }
        });
        finish(rec, &self.w.ctx.log, kind, latency, outcome);
    }
}

impl Client for MixClient<'_> {
    fn step(&mut self, db: &dyn Backend, rec: &mut Recorder) -> bool {
        let w = self.w;
        if self.phase == Phase::Load {
            let i = w.load_counter.next();
            let n = ((u128::from(i) * u128::from(w.load_stride)) % u128::from(w.keys)) as u64;
            MixGraph::build_key(&mut self.key, n, w.key_size);
            self.write(db, rec, OpKind::Insert, w.load_value_size);
            return true;
        }
        let n = w.ranges.next(&mut self.rng);
        MixGraph::build_key(&mut self.key, n, w.key_size);
        match w.ops.next(&mut self.rng) {
            MixOp::Get => {
                let key = &self.key;
                let (got, latency) = time_op(|| db.read(key));
                let outcome = got.and_then(|v| {
                    let v = v.ok_or_else(|| missing(key))?;
                    if w.ctx.verify && !value_matches(&v, key, 0) {
                        return Err(Error::verify(format!(
                            "value of key number {n} does not hold the value written"
                        )));
                    }
                    Ok(())
                });
                finish(rec, &w.ctx.log, OpKind::Read, latency, outcome);
            }
            MixOp::Put => {
                let (t, k, s) = w.value;
                let len = fold(
                    pareto_inverse(self.rng.next_f64_open0(), t, k, s),
                    MIN_VALUE_SIZE,
                    w.max_value,
                );
                self.write(db, rec, OpKind::Update, len);
            }
            MixOp::Seek => {
                let (t, k, s) = w.iter;
                let len = fold(
                    pareto_inverse(self.rng.next_f64_open0(), t, k, s),
                    1,
                    w.max_scan,
                ) as usize;
                let start = &self.key;
                let verify = w.ctx.verify;
                let mut problem = None;
                let mut prev = Vec::new();
                let (got, latency) = time_op(|| {
                    db.scan(start, len, &mut |k, v| {
                        if verify && problem.is_none() {
                            problem = check_scanned(start, &prev, k)
                                .and_then(|()| {
                                    if value_matches(v, k, 0) {
                                        Ok(())
                                    } else {
                                        Err(Error::verify(format!("scanned value of {k:02x?} does not hold the value written")))
                                    }
                                })
                                .err();
                            prev.clear();
                            prev.extend_from_slice(k);
                        }
                    })
                });
                let outcome = got.and_then(|_| problem.map_or(Ok(()), Err));
                finish(rec, &w.ctx.log, OpKind::Scan, latency, outcome);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn social_graph_key_ranges_put_most_accesses_in_the_hottest_range() {
        let r =
            KeyRanges::new(30_000, 30, [14.18, -2.917, 0.0164, -0.08082], (0.0, 0.0), 1).unwrap();
        let probs = r.range_probabilities();
        assert_eq!(probs.len(), 30);
        let max = probs.iter().map(|p| p.1).fold(0.0, f64::max);
        // Range 1 weighs 14.18e^-2.917 + 0.0164e^-0.081 = 0.782 of a total of about 1.0.
        assert!((max - 0.78).abs() < 0.03, "{max}");
        let mut rng = Rng::new(2);
        let hottest = probs.iter().find(|p| p.1 == max).unwrap().0;
        let n = 50_000;
        let hits = (0..n)
            .filter(|_| (hottest..hottest + 1000).contains(&r.next(&mut rng)))
            .count();
        assert!((hits as f64 / f64::from(n) - max).abs() < 0.02);
    }

    #[test]
    fn pareto_sizes_follow_the_social_graph_parameters() {
        // Median of the generalized Pareto: sigma * (2^k - 1) / k = 226.409 * 0.8958 / 0.923 = 219.7.
        let mut rng = Rng::new(4);
        let mut v: Vec<u64> = (0..20_001)
            .map(|_| {
                fold(
                    pareto_inverse(rng.next_f64_open0(), 0.0, 0.923, 226.409),
                    MIN_VALUE_SIZE,
                    1 << 40,
                )
            })
            .collect();
        v.sort_unstable();
        let median = v[10_000] as f64;
        assert!((median - 220.0).abs() < 12.0, "{median}");
        assert!(v.iter().all(|&x| x >= MIN_VALUE_SIZE));
        assert_eq!(fold(5000.0, 10, 1024), 5000 % 1024);
        assert_eq!(fold(-3.0, 10, 1024), 10);
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

    #[test]
    fn keys_are_big_endian_and_padded() {
        let mut k = Vec::new();
        MixGraph::build_key(&mut k, 0x0102, 48);
        assert_eq!(k.len(), 48);
        assert_eq!(&k[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert!(k[8..].iter().all(|&b| b == b'0'));
    }
}
