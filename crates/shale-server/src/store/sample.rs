//! What hashes, sets and sorted sets share over their element records: random picks
//! (HRANDFIELD, SRANDMEMBER, SPOP, ZRANDMEMBER) and cursor scans (HSCAN, SSCAN, ZSCAN).
//!
//! Random picks are uniform for collections of up to [`READ_ALL_MAX`] elements (they are read
//! with one iteration and chosen from). Larger ones are sampled by seeking to a random point of
//! the collection's key range and taking the element at or after it: each pick is one short
//! iteration, and an element's chance is proportional to the gap in key space before it (Redis's
//! own large-set sampling is not uniform either).

use super::{Dir, Result, Txn};
use std::ops::Bound;

/// An element's name (field, member) and value.
pub type Element = (Vec<u8>, Vec<u8>);

/// A page of a cursor scan: the items and where the next page starts (`None`: done).
pub type Page<T> = (Vec<T>, Option<Vec<u8>>);

/// Largest collection a random pick reads whole.
pub const READ_ALL_MAX: u64 = 4096;

/// A small deterministic generator (xorshift64*), seeded per call.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value below `n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Picks elements of the collection under `prefix` (which holds `len` of them): `count > 0`
/// asks for up to `count` distinct elements, `count < 0` for `-count` elements that may repeat.
/// Returns (name, value) pairs.
///
/// # Errors
/// The engine's error.
pub fn pick(
    txn: &mut Txn<'_>,
    prefix: &[u8],
    len: u64,
    count: i64,
    seed: u64,
) -> Result<Vec<Element>> {
    if len == 0 || count == 0 {
        return Ok(Vec::new());
    }
    let distinct = count > 0;
    let wanted = count.unsigned_abs();
    if len <= READ_ALL_MAX || (distinct && wanted >= len / 2) {
        return Ok(pick_from(read_all(txn, prefix)?, count, seed));
    }
    let mut rng = Rng::new(seed);
    let mut out: Vec<Element> = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    let mut attempts = 0u64;
    while (out.len() as u64) < wanted && attempts < wanted.saturating_mul(8).max(64) {
        attempts += 1;
        let Some(found) = at_random_point(txn, prefix, &mut rng)? else {
            break;
        };
        if distinct && !seen.insert(found.0.clone()) {
            continue;
        }
        out.push(found);
    }
    Ok(out)
}

/// Picks from `all` as [`pick`] does, uniformly.
pub fn pick_from(mut all: Vec<Element>, count: i64, seed: u64) -> Vec<Element> {
    if all.is_empty() || count == 0 {
        return Vec::new();
    }
    let mut rng = Rng::new(seed);
    let wanted = count.unsigned_abs();
    if count > 0 {
        if wanted >= all.len() as u64 {
            return all;
        }
        // A partial Fisher-Yates shuffle: the first `wanted` are a uniform sample.
        for i in 0..wanted as usize {
            let j = i + rng.below((all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(wanted as usize);
        return all;
    }
    (0..wanted)
        .map(|_| all[rng.below(all.len() as u64) as usize].clone())
        .collect()
}

/// Every element of the collection under `prefix`: (name, value).
///
/// # Errors
/// The engine's error.
pub fn read_all(txn: &mut Txn<'_>, prefix: &[u8]) -> Result<Vec<Element>> {
    let mut all = Vec::new();
    txn.scan_prefix(prefix, Dir::Forward, |k, v| {
        all.push((k[prefix.len()..].to_vec(), v.to_vec()));
        true
    })?;
    Ok(all)
}

/// The element at or after a random point of `prefix`'s range (wrapping to the first).
fn at_random_point(txn: &mut Txn<'_>, prefix: &[u8], rng: &mut Rng) -> Result<Option<Element>> {
    let mut point = prefix.to_vec();
    point.extend_from_slice(&rng.next_u64().to_be_bytes());
    let mut found = None;
    let take = |found: &mut Option<Element>, k: &[u8], v: &[u8]| {
        *found = Some((k[prefix.len()..].to_vec(), v.to_vec()));
        false
    };
    txn.scan(
        Bound::Included(point),
        super::upper_bound(prefix),
        Dir::Forward,
        |k, v| take(&mut found, k, v),
    )?;
    if found.is_none() {
        txn.scan_prefix(prefix, Dir::Forward, |k, v| take(&mut found, k, v))?;
    }
    Ok(found)
}

/// Up to `count` elements of the collection under `prefix` from element name `from` (inclusive;
/// `None`: the first), and the name the next call resumes at (`None`: done).
///
/// # Errors
/// The engine's error.
pub fn scan(
    txn: &mut Txn<'_>,
    prefix: &[u8],
    from: Option<&[u8]>,
    count: usize,
) -> Result<Page<Element>> {
    let mut lo = prefix.to_vec();
    lo.extend_from_slice(from.unwrap_or_default());
    let mut out = Vec::new();
    let mut next = None;
    txn.scan(
        Bound::Included(lo),
        super::upper_bound(prefix),
        Dir::Forward,
        |k, v| {
            if out.len() == count {
                next = Some(k[prefix.len()..].to_vec());
                return false;
            }
            out.push((k[prefix.len()..].to_vec(), v.to_vec()));
            true
        },
    )?;
    Ok((out, next))
}
