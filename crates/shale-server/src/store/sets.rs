//! Sets: one empty engine record per member under the set's generation; the meta record keeps
//! the member count (SCARD reads one record) and SMEMBERS is one engine iteration.

use super::format::{self, Kind, Meta};
use super::{keys, sample, Result, Txn};
use bytes::Bytes;
use rustc_hash::FxHashSet;

/// The live set at `key` for a read.
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn meta(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Meta>> {
    keys::typed(txn, key, Kind::Set)
}

/// The number of members.
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn len(txn: &mut Txn<'_>, key: &[u8]) -> Result<u64> {
    Ok(meta(txn, key)?.map_or(0, |m| m.len))
}

fn prefix(m: &Meta) -> Vec<u8> {
    format::collection_prefix(format::SET_MEMBER, m.generation)
}

/// Every member, in byte order (one iteration); `None` when the key is absent.
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn members(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(None);
    };
    let all = sample::read_all(txn, &prefix(&m))?;
    Ok(Some(all.into_iter().map(|(member, _)| member).collect()))
}

/// Whether each of `members` is in the set (one engine `multi_get`).
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn contains(txn: &mut Txn<'_>, key: &[u8], members: &[Bytes]) -> Result<Vec<bool>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(vec![false; members.len()]);
    };
    let keys: Vec<Vec<u8>> = members
        .iter()
        .map(|mb| format::set_member_key(m.generation, mb))
        .collect();
    Ok(txn
        .get_many(&keys)?
        .into_iter()
        .map(|v| v.is_some())
        .collect())
}

/// SADD: adds `members`; returns how many are new.
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn add(txn: &mut Txn<'_>, key: &[u8], members: &[Bytes]) -> Result<u64> {
    let existing = keys::typed_write(txn, key, Kind::Set)?;
    let created = existing.is_none();
    let mut m = match existing {
        Some(m) => m,
        None => Meta::collection(Kind::Set, txn.new_generation()),
    };
    let keys: Vec<Vec<u8>> = members
        .iter()
        .map(|mb| format::set_member_key(m.generation, mb))
        .collect();
    let present = if created {
        vec![None; keys.len()]
    } else {
        txn.get_many(&keys)?
    };
    let mut seen = FxHashSet::default();
    let mut added = 0;
    for (k, old) in keys.into_iter().zip(present) {
        if old.is_none() && seen.insert(k.clone()) {
            txn.put(k, Vec::new());
            added += 1;
        }
    }
    m.len += added;
    if added > 0 {
        keys::store_collection(txn, key, &m, created);
    }
    Ok(added)
}

/// SREM: removes `members`; returns how many were there. The set goes with its last member.
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn remove(txn: &mut Txn<'_>, key: &[u8], members: &[Bytes]) -> Result<u64> {
    let Some(mut m) = keys::typed_write(txn, key, Kind::Set)? else {
        return Ok(0);
    };
    let mut removed = 0;
    let mut seen = FxHashSet::default();
    for member in members {
        let k = format::set_member_key(m.generation, member);
        if seen.insert(member.clone()) && txn.contains(&k)? {
            txn.delete(k);
            removed += 1;
        }
    }
    if removed > 0 {
        m.len -= removed.min(m.len);
        keys::store_collection(txn, key, &m, false);
    }
    Ok(removed)
}

/// SPOP: removes and returns up to `count` random members.
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn pop(txn: &mut Txn<'_>, key: &[u8], count: u64, seed: u64) -> Result<Vec<Vec<u8>>> {
    let Some(mut m) = keys::typed_write(txn, key, Kind::Set)? else {
        return Ok(Vec::new());
    };
    let wanted = i64::try_from(count).unwrap_or(i64::MAX);
    let picked = sample::pick(txn, &prefix(&m), m.len, wanted, seed)?;
    for (member, _) in &picked {
        txn.delete(format::set_member_key(m.generation, member));
    }
    m.len -= (picked.len() as u64).min(m.len);
    keys::store_collection(txn, key, &m, false);
    Ok(picked.into_iter().map(|(member, _)| member).collect())
}

/// SRANDMEMBER: random members (see [`sample::pick`] for `count`).
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn random(txn: &mut Txn<'_>, key: &[u8], count: i64, seed: u64) -> Result<Vec<Vec<u8>>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(Vec::new());
    };
    let picked = sample::pick(txn, &prefix(&m), m.len, count, seed)?;
    Ok(picked.into_iter().map(|(member, _)| member).collect())
}

/// SMOVE: moves `member` from `src` to `dst`; returns whether it was in `src`.
///
/// # Errors
/// `WRONGTYPE` for either key; the engine's error.
pub fn move_member(txn: &mut Txn<'_>, src: &[u8], dst: &[u8], member: &Bytes) -> Result<bool> {
    let Some(sm) = keys::typed_write(txn, src, Kind::Set)? else {
        // Redis checks the destination's type even then.
        keys::typed_write(txn, dst, Kind::Set)?;
        return Ok(false);
    };
    keys::typed_write(txn, dst, Kind::Set)?;
    if !txn.contains(&format::set_member_key(sm.generation, member))? {
        return Ok(false);
    }
    if src == dst {
        return Ok(true);
    }
    remove(txn, src, std::slice::from_ref(member))?;
    add(txn, dst, std::slice::from_ref(member))?;
    Ok(true)
}

/// Replaces `key` with a set of `members` (deletes it when empty); returns its size.
///
/// # Errors
/// The engine's error.
pub fn store(txn: &mut Txn<'_>, key: &[u8], members: &[Vec<u8>]) -> Result<u64> {
    if let Some(old) = keys::lookup_write(txn, key)? {
        keys::delete(txn, key, &old)?;
    }
    if members.is_empty() {
        return Ok(0);
    }
    let mut m = Meta::collection(Kind::Set, txn.new_generation());
    for member in members {
        txn.put(format::set_member_key(m.generation, member), Vec::new());
    }
    m.len = members.len() as u64;
    keys::store_collection(txn, key, &m, true);
    Ok(m.len)
}

/// SSCAN: up to `count` members from `from`, and where the next call resumes.
///
/// # Errors
/// `WRONGTYPE`; the engine's error.
pub fn scan(
    txn: &mut Txn<'_>,
    key: &[u8],
    from: Option<&[u8]>,
    count: usize,
) -> Result<sample::Page<Vec<u8>>> {
    let Some(m) = meta(txn, key)? else {
        return Ok((Vec::new(), None));
    };
    let (found, next) = sample::scan(txn, &prefix(&m), from, count)?;
    Ok((found.into_iter().map(|(member, _)| member).collect(), next))
}

/// The members of each of `keys` for SINTER/SUNION/SDIFF: an absent key is an empty set.
///
/// # Errors
/// `WRONGTYPE` for a key of another type; the engine's error.
pub fn read_inputs(txn: &mut Txn<'_>, keys: &[Bytes]) -> Result<Vec<Vec<Vec<u8>>>> {
    keys.iter()
        .map(|k| Ok(members(txn, k)?.unwrap_or_default()))
        .collect()
}

/// The set algebra of SINTER, SUNION and SDIFF over sorted member lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algebra {
    /// Members of every input.
    Inter,
    /// Members of any input.
    Union,
    /// Members of the first input and no other.
    Diff,
}

/// Applies `op` to `inputs` (each sorted, as [`members`] returns them); the result is sorted.
/// `limit` stops an intersection early (SINTERCARD).
pub fn combine(op: Algebra, inputs: &[Vec<Vec<u8>>], limit: usize) -> Vec<Vec<u8>> {
    let Some(first) = inputs.first() else {
        return Vec::new();
    };
    let sets: Vec<FxHashSet<&[u8]>> = inputs[1..]
        .iter()
        .map(|s| s.iter().map(Vec::as_slice).collect())
        .collect();
    match op {
        Algebra::Inter => first
            .iter()
            .filter(|m| sets.iter().all(|s| s.contains(m.as_slice())))
            .take(limit)
            .cloned()
            .collect(),
        Algebra::Diff => first
            .iter()
            .filter(|m| !sets.iter().any(|s| s.contains(m.as_slice())))
            .cloned()
            .collect(),
        Algebra::Union => {
            let mut all: Vec<Vec<u8>> = inputs.iter().flatten().cloned().collect();
            all.sort_unstable();
            all.dedup();
            all
        }
    }
}
