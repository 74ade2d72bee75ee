//! `shale-bench gen-trace` (without `-benchmarks`): a synthetic trace in the Twitter cache-trace
//! format (Yang et al., OSDI'20: `timestamp,key,key_size,value_size,client_id,operation,ttl`), for
//! the core workload's `filetype=cluster`.
//!
//! The public traces cannot be downloaded where Shale is benchmarked, so the generator makes
//! traces with the properties that matter to a storage engine, each a parameter:
//!
//! | flag | meaning | default |
//! |---|---|---|
//! | `-ops N` | lines | [`DEFAULT_OPS`] |
//! | `-keys N` | distinct keys | [`DEFAULT_KEYS`] |
//! | `-zipf THETA` | key popularity: zipfian constant in `(0, 1)`, 0 for uniform | [`DEFAULT_ZIPF`] |
//! | `-value DIST` | value sizes: `fixed:N`, `uniform:MIN:MAX` or `pareto:THETA:K:SIGMA[:MAX]` | [`DEFAULT_VALUE`] |
//! | `-mix OP=W,...` | operation weights over get, gets, set, add, replace, cas, append, prepend, delete, incr, decr | [`DEFAULT_MIX`] |
//! | `-keysize N` | length of the anonymized key | [`DEFAULT_KEY_SIZE`] |
//! | `-clients N` | client ids drawn uniformly | [`DEFAULT_CLIENTS`] |
//! | `-rate OPS` | requests per second (sets the timestamps) | [`DEFAULT_RATE`] |
//! | `-ttl SECS` | TTL written on write requests | [`DEFAULT_TTL`] |
//! | `-seed N` | random seed | a fixed default |
//!
//! A key's value size is a property of the key (drawn once from its own seed), as objects in a
//! cache have a stable size; popular keys are scattered over the key space by hashing.

use crate::error::{Error, Result};
use crate::generator::{fnv_hash64, Discrete, Zipfian};
use crate::rng::{mix64, Rng};
use crate::workload::mixgraph::pareto_inverse;

/// Default number of lines.
pub const DEFAULT_OPS: u64 = 100_000;
/// Default number of distinct keys.
pub const DEFAULT_KEYS: u64 = 10_000;
/// Default zipfian constant (YCSB's).
pub const DEFAULT_ZIPF: f64 = 0.99;
/// Default value size distribution: Pareto with the Social Graph parameters, capped at 4 KiB.
pub const DEFAULT_VALUE: &str = "pareto:0:0.923:226.409:4096";
/// Default operation mix: a read-heavy cache of gets and sets, the two operations the AegonKV
/// fork replays (it skips the others).
pub const DEFAULT_MIX: &str = "get=0.8,set=0.2";
/// Default anonymized key length.
pub const DEFAULT_KEY_SIZE: u64 = 24;
/// Default number of client ids.
pub const DEFAULT_CLIENTS: u64 = 100;
/// Default requests per second.
pub const DEFAULT_RATE: f64 = 10_000.0;
/// Default TTL of writes.
pub const DEFAULT_TTL: u64 = 0;
/// Default seed.
pub const DEFAULT_TRACE_SEED: u64 = 0x7457_4954;

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
}

/// Value size distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueDist {
    /// Always `n` bytes.
    Fixed(u32),
    /// Uniform in `min..=max`.
    Uniform(u32, u32),
    /// Generalized Pareto `(theta, k, sigma)`, at least 1, wrapped above `max`.
    Pareto(f64, f64, f64, u32),
}

impl ValueDist {
    /// Parses `fixed:N`, `uniform:MIN:MAX` or `pareto:THETA:K:SIGMA[:MAX]`.
    ///
    /// # Errors
    /// `Usage` describing the expected form.
    pub fn parse(s: &str) -> Result<ValueDist> {
        let bad = || {
            Error::usage(format!(
                "-value '{s}': expected fixed:N, uniform:MIN:MAX or pareto:THETA:K:SIGMA[:MAX]"
            ))
        };
        let parts: Vec<&str> = s.split(':').collect();
        let u = |x: &str| x.parse::<u32>().map_err(|_| bad());
        let f = |x: &str| {
            x.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(bad)
        };
        match parts.as_slice() {
            ["fixed", n] => Ok(ValueDist::Fixed(u(n)?)),
            ["uniform", a, b] if u(a)? <= u(b)? => Ok(ValueDist::Uniform(u(a)?, u(b)?)),
            ["pareto", t, k, sg] => Ok(ValueDist::Pareto(f(t)?, f(k)?, f(sg)?, 1 << 20)),
            ["pareto", t, k, sg, m] if u(m)? > 0 => {
                Ok(ValueDist::Pareto(f(t)?, f(k)?, f(sg)?, u(m)?))
            }
            _ => Err(bad()),
        }
    }

    fn sample(&self, rng: &mut Rng) -> u32 {
        match *self {
            ValueDist::Fixed(n) => n,
            ValueDist::Uniform(a, b) => rng.between(u64::from(a), u64::from(b)) as u32,
            ValueDist::Pareto(t, k, s, max) => {
                let x = pareto_inverse(rng.next_f64_open0(), t, k, s);
                if x < 1 {
                    1
                } else if x > i64::from(max) {
                    ((x as u64) % u64::from(max)).max(1) as u32
                } else {
                    x as u32
                }
            }
        }
    }
}

/// Everything that shapes a generated trace.
#[derive(Debug, Clone)]
pub struct TraceSpec {
    /// Lines.
    pub ops: u64,
    /// Distinct keys.
    pub keys: u64,
    /// Zipfian constant; 0 for uniform.
    pub zipf: f64,
    /// Value sizes.
    pub value: ValueDist,
    /// Operation weights.
    pub mix: Vec<(TraceOp, f64)>,
    /// Anonymized key length.
    pub key_size: u32,
    /// Client ids.
    pub clients: u64,
    /// Requests per second.
    pub rate: f64,
    /// TTL on writes.
    pub ttl: u64,
    /// Seed.
    pub seed: u64,
}

impl Default for TraceSpec {
    fn default() -> TraceSpec {
        TraceSpec {
            ops: DEFAULT_OPS,
            keys: DEFAULT_KEYS,
            zipf: DEFAULT_ZIPF,
            value: ValueDist::parse(DEFAULT_VALUE).expect("default value distribution parses"),
            mix: parse_mix(DEFAULT_MIX).expect("default mix parses"),
            key_size: DEFAULT_KEY_SIZE as u32,
            clients: DEFAULT_CLIENTS,
            rate: DEFAULT_RATE,
            ttl: DEFAULT_TTL,
            seed: DEFAULT_TRACE_SEED,
        }
    }
}

/// Parses `op=weight,...`.
///
/// # Errors
/// `Usage` naming the unknown operation or bad weight.
pub fn parse_mix(s: &str) -> Result<Vec<(TraceOp, f64)>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (op, w) = part
            .split_once('=')
            .ok_or_else(|| Error::usage(format!("-mix '{part}': expected OP=WEIGHT")))?;
        let op = TraceOp::parse(op.trim()).ok_or_else(|| {
            let names: Vec<&str> = TraceOp::ALL.iter().map(|o| o.name()).collect();
            Error::usage(format!(
                "-mix: unknown operation '{op}' (known: {})",
                names.join(", ")
            ))
        })?;
        let w: f64 = w
            .trim()
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w >= 0.0)
            .ok_or_else(|| Error::usage(format!("-mix '{part}': bad weight")))?;
        out.push((op, w));
    }
    if out.iter().all(|(_, w)| *w == 0.0) {
        return Err(Error::usage(
            "-mix needs at least one operation with a positive weight",
        ));
    }
    Ok(out)
}

impl TraceSpec {
    /// Builds a spec from `gen-trace` flags.
    ///
    /// # Errors
    /// `Usage` for an unknown flag or bad value.
    pub fn from_settings(settings: &[(String, String)]) -> Result<TraceSpec> {
        let mut s = TraceSpec::default();
        for (k, v) in settings {
            let int = |v: &str| {
                v.replace('_', "").parse::<u64>().map_err(|_| {
                    Error::usage(format!("-{k} expects an unsigned integer, got '{v}'"))
                })
            };
            match k.as_str() {
                "ops" => s.ops = int(v)?,
                "keys" => s.keys = int(v)?.max(1),
                "zipf" => {
                    s.zipf = v
                        .parse()
                        .ok()
                        .filter(|z: &f64| (0.0..1.0).contains(z))
                        .ok_or_else(|| {
                            Error::usage(format!("-zipf expects a constant in [0, 1), got '{v}'"))
                        })?
                }
                "value" => s.value = ValueDist::parse(v)?,
                "mix" => s.mix = parse_mix(v)?,
                "keysize" => s.key_size = u32::try_from(int(v)?.clamp(1, 65_535)).unwrap_or(250),
                "clients" => s.clients = int(v)?.max(1),
                "rate" => {
                    s.rate = v
                        .parse()
                        .ok()
                        .filter(|r: &f64| *r > 0.0 && r.is_finite())
                        .ok_or_else(|| {
                            Error::usage(format!("-rate expects a positive number, got '{v}'"))
                        })?
                }
                "ttl" => s.ttl = int(v)?,
                "seed" => s.seed = int(v)?,
                _ => return Err(Error::usage(format!("unknown option '-{k}' for gen-trace"))),
            }
        }
        Ok(s)
    }

    /// Generates the trace, one record at a time, into `sink`.
    ///
    /// # Errors
    /// Whatever `sink` returns.
    pub fn generate(&self, mut sink: impl FnMut(&TraceRecord) -> Result<()>) -> Result<()> {
        let mut rng = Rng::new(self.seed);
        let zipf =
            (self.zipf > 0.0 && self.keys >= 2).then(|| Zipfian::new(0, self.keys - 1, self.zipf));
        let mut ops = Discrete::new();
        for &(op, w) in &self.mix {
            ops.add(op, w);
        }
        for i in 0..self.ops {
            let rank = match &zipf {
                Some(z) => z.next(&mut rng),
                None => rng.below(self.keys),
            };
            // Scatter popularity ranks over key ids so hot keys are not neighbours.
            let id = fnv_hash64(rank) % self.keys;
            let op = ops.next(&mut rng);
            let mut key_rng = Rng::new(mix64(self.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
            let size = self.value.sample(&mut key_rng);
            let record = TraceRecord {
                timestamp: (i as f64 / self.rate) as u64,
                key: anonymized_key(id, self.key_size as usize),
                key_size: self.key_size,
                value_size: if matches!(op, TraceOp::Delete) {
                    0
                } else {
                    size
                },
                client_id: rng.below(self.clients),
                op,
                ttl: if op.writes() { self.ttl } else { 0 },
            };
            sink(&record)?;
        }
        Ok(())
    }
}

/// Base-64-like alphabet of anonymized keys (no comma).
const KEY_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A stable, anonymized-looking key of `len` characters for key id `id`.
pub fn anonymized_key(id: u64, len: usize) -> String {
    let mut state = mix64(id ^ 0xA5A5_5A5A_0F0F_F0F0);
    let mut s = String::with_capacity(len);
    for i in 0..len {
        if i % 10 == 0 {
            state = mix64(state.wrapping_add(0x9E37_79B9_7F4A_7C15));
        }
        s.push(KEY_ALPHABET[(state & 63) as usize] as char);
        state >>= 6;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fromfile::{parse_cluster_line, FileKey, FileOpKind};

    #[test]
    fn a_generated_trace_reads_back_as_the_fork_reads_it() {
        let spec = TraceSpec {
            ops: 2000,
            keys: 300,
            ..TraceSpec::default()
        };
        let mut records = Vec::new();
        spec.generate(|r| {
            records.push(r.clone());
            Ok(())
        })
        .unwrap();
        for (i, r) in records.iter().enumerate() {
            let op = parse_cluster_line(r.to_csv().as_bytes(), "t.csv", i as u64 + 1).unwrap();
            assert_eq!(op.key, FileKey::Bytes(r.key.clone().into_bytes()));
            assert_eq!(op.size, r.value_size);
            let kind = match r.op {
                TraceOp::Get => FileOpKind::Read,
                TraceOp::Set | TraceOp::Add => FileOpKind::Insert,
                _ => FileOpKind::Skip,
            };
            assert_eq!(op.kind, kind);
        }
    }

    #[test]
    fn the_trace_follows_its_mix_popularity_and_sizes() {
        let spec = TraceSpec {
            ops: 20_000,
            keys: 1000,
            mix: parse_mix("get=0.7,set=0.3").unwrap(),
            value: ValueDist::parse("fixed:100").unwrap(),
            ..TraceSpec::default()
        };
        let mut gets = 0;
        let mut per_key = std::collections::HashMap::new();
        spec.generate(|r| {
            gets += usize::from(r.op == TraceOp::Get);
            *per_key.entry(r.key.clone()).or_insert(0u32) += 1;
            assert_eq!(r.value_size, 100);
            assert_eq!(r.key.len(), DEFAULT_KEY_SIZE as usize);
            Ok(())
        })
        .unwrap();
        assert!((gets as f64 / 20_000.0 - 0.7).abs() < 0.02);
        let max = *per_key.values().max().unwrap();
        assert!(
            max > 1000,
            "zipfian 0.99 over 1000 keys gives the top key about 13% ({max})"
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        let spec = TraceSpec {
            ops: 100,
            ..TraceSpec::default()
        };
        let collect = |s: &TraceSpec| {
            let mut v = Vec::new();
            s.generate(|r| {
                v.push(r.to_csv());
                Ok(())
            })
            .unwrap();
            v
        };
        assert_eq!(collect(&spec), collect(&spec));
        assert_ne!(
            collect(&spec),
            collect(&TraceSpec {
                seed: 1,
                ..spec.clone()
            })
        );
    }

    #[test]
    fn bad_flags_are_reported() {
        let s = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert!(TraceSpec::from_settings(&s("zipf", "1.5")).is_err());
        assert!(TraceSpec::from_settings(&s("value", "normal:3"))
            .unwrap_err()
            .to_string()
            .contains("fixed:N"));
        assert!(TraceSpec::from_settings(&s("mix", "fetch=1"))
            .unwrap_err()
            .to_string()
            .contains("unknown operation"));
        assert!(TraceSpec::from_settings(&s("color", "red")).is_err());
    }
}
