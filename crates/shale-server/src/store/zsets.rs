//! Sorted sets: two families of records under the set's generation, changed together in one
//! batch: member -> score (`z`), and an index keyed by (ordered score, member) (`s`) that range
//! reads walk in score order. A score range, a rank range or a lex range is one engine iteration
//! of the index; ranks are counted along it (O(rank), where Redis's skiplist is O(log n)).

use super::format::{self, Kind, Meta};
use super::{keys, sample, Dir, Error, Result, Txn};
use bytes::Bytes;
use std::ops::Bound;

/// A member and its score.
pub type Scored = (Vec<u8>, f64);

/// One end of a score range (`1.5`, `(1.5`, `-inf`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBound {
    /// The score.
    pub value: f64,
    /// Whether the score itself is excluded.
    pub exclusive: bool,
}

/// One end of a lex range (`[a`, `(a`, `-`, `+`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    /// Below every member (`-`).
    Min,
    /// Above every member (`+`).
    Max,
    /// The member itself included.
    Inclusive(Vec<u8>),
    /// The member itself excluded.
    Exclusive(Vec<u8>),
}

impl LexBound {
    /// Whether `member` is at or above this bound as a lower end.
    fn admits_from_below(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(b) => member >= b.as_slice(),
            LexBound::Exclusive(b) => member > b.as_slice(),
        }
    }

    /// Whether `member` is at or below this bound as an upper end.
    fn admits_from_above(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(b) => member <= b.as_slice(),
            LexBound::Exclusive(b) => member < b.as_slice(),
        }
    }
}

/// ZADD's options.
#[derive(Debug, Default, Clone, Copy)]
pub struct AddFlags {
    /// Only add new members.
    pub nx: bool,
    /// Only update existing members.
    pub xx: bool,
    /// Only update when the new score is greater.
    pub gt: bool,
    /// Only update when the new score is less.
    pub lt: bool,
    /// Add the score to the current one (ZINCRBY, ZADD INCR).
    pub incr: bool,
}

/// What ZADD did.
#[derive(Debug, Default)]
pub struct AddOutcome {
    /// New members.
    pub added: u64,
    /// Existing members whose score changed.
    pub changed: u64,
    /// With `incr`: the member's new score, `None` when the flags prevented the change.
    pub score: Option<f64>,
}

/// The live sorted set at `key` for a read.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn meta(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Meta>> {
    keys::typed(txn, key, Kind::ZSet)
}

/// The number of members.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn len(txn: &mut Txn<'_>, key: &[u8]) -> Result<u64> {
    Ok(meta(txn, key)?.map_or(0, |m| m.len))
}

fn damaged() -> Error {
    Error::Engine(shale::Error::new(
        shale::ErrorKind::Corruption,
        "damaged sorted-set score",
    ))
}

fn score_in(txn: &mut Txn<'_>, generation: u64, member: &[u8]) -> Result<Option<f64>> {
    match txn.get(&format::member_key(generation, member))? {
        None => Ok(None),
        Some(v) => format::decode_score(&v).map(Some).ok_or_else(damaged),
    }
}

/// The score of `member`.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn score(txn: &mut Txn<'_>, key: &[u8], member: &[u8]) -> Result<Option<f64>> {
    match meta(txn, key)? {
        Some(m) => score_in(txn, m.generation, member),
        None => Ok(None),
    }
}

/// The scores of `members` (one engine `multi_get`).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn scores(txn: &mut Txn<'_>, key: &[u8], members: &[Bytes]) -> Result<Vec<Option<f64>>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(vec![None; members.len()]);
    };
    let keys: Vec<Vec<u8>> = members
        .iter()
        .map(|mb| format::member_key(m.generation, mb))
        .collect();
    txn.get_many(&keys)?
        .into_iter()
        .map(|v| match v {
            None => Ok(None),
            Some(v) => format::decode_score(&v).map(Some).ok_or_else(damaged),
        })
        .collect()
}

fn put_member(txn: &mut Txn<'_>, generation: u64, member: &[u8], old: Option<f64>, score: f64) {
    if let Some(old) = old {
        txn.delete(format::score_key(generation, old, member));
    }
    txn.put(
        format::member_key(generation, member),
        format::encode_score(score).to_vec(),
    );
    txn.put(format::score_key(generation, score, member), Vec::new());
}

fn remove_member(txn: &mut Txn<'_>, generation: u64, member: &[u8], score: f64) {
    txn.delete(format::member_key(generation, member));
    txn.delete(format::score_key(generation, score, member));
}

/// ZADD: adds or updates each (score, member) under `flags`.
///
/// # Errors
/// [`Error::WrongType`]; a NaN result of INCR; the engine's error.
pub fn add(
    txn: &mut Txn<'_>,
    key: &[u8],
    flags: AddFlags,
    pairs: &[(f64, Bytes)],
) -> Result<AddOutcome> {
    let existing = keys::typed_write(txn, key, Kind::ZSet)?;
    let mut out = AddOutcome::default();
    if existing.is_none() && flags.xx {
        return Ok(out);
    }
    let created = existing.is_none();
    let mut m = match existing {
        Some(m) => m,
        None => Meta::collection(Kind::ZSet, txn.new_generation()),
    };
    for (score, member) in pairs {
        let old = score_in(txn, m.generation, member)?;
        match old {
            Some(_) if flags.nx => continue,
            None if flags.xx => continue,
            _ => {}
        }
        let new = match (flags.incr, old) {
            (true, Some(o)) => o + score,
            _ => *score,
        };
        if new.is_nan() {
            return Err(Error::reply("ERR resulting score is not a number (NaN)"));
        }
        if let Some(o) = old {
            if (flags.gt && new <= o) || (flags.lt && new >= o) {
                continue;
            }
            out.score = Some(new);
            if new == o {
                continue;
            }
            out.changed += 1;
        } else {
            out.added += 1;
            m.len += 1;
            out.score = Some(new);
        }
        put_member(txn, m.generation, member, old, new);
    }
    if out.added > 0 {
        keys::store_collection(txn, key, &m, created);
    } else if out.changed > 0 {
        txn.touch(key, false);
    }
    Ok(out)
}

/// ZREM: removes `members`; returns how many existed. The set goes with its last member.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn remove(txn: &mut Txn<'_>, key: &[u8], members: &[Bytes]) -> Result<u64> {
    let Some(mut m) = keys::typed_write(txn, key, Kind::ZSet)? else {
        return Ok(0);
    };
    let mut removed = 0;
    for member in members {
        if let Some(score) = score_in(txn, m.generation, member)? {
            remove_member(txn, m.generation, member, score);
            removed += 1;
        }
    }
    finish_removal(txn, key, &mut m, removed);
    Ok(removed)
}

fn finish_removal(txn: &mut Txn<'_>, key: &[u8], m: &mut Meta, removed: u64) {
    if removed > 0 {
        m.len = m.len.saturating_sub(removed);
        keys::store_collection(txn, key, m, false);
    }
}

/// Visits index entries (score, member) of generation `generation` with scores in
/// `[min.value, max.value]` in direction `dir` (exclusive ends filtered out), until `visit`
/// returns false.
fn walk_scores(
    txn: &mut Txn<'_>,
    generation: u64,
    min: ScoreBound,
    max: ScoreBound,
    dir: Dir,
    mut visit: impl FnMut(f64, &[u8]) -> bool,
) -> Result<()> {
    if min.value > max.value {
        return Ok(());
    }
    let lo = format::score_key(generation, min.value, b"");
    let hi = super::upper_bound(&format::score_key(generation, max.value, b""));
    txn.scan(Bound::Included(lo), hi, dir, |k, _| {
        let Some((score, member)) = format::split_score_key(k) else {
            return true;
        };
        if (min.exclusive && score <= min.value) || (max.exclusive && score >= max.value) {
            return true;
        }
        visit(score, member)
    })?;
    Ok(())
}

/// Visits every index entry of generation `generation` in direction `dir`.
fn walk_all(
    txn: &mut Txn<'_>,
    generation: u64,
    dir: Dir,
    mut visit: impl FnMut(f64, &[u8]) -> bool,
) -> Result<()> {
    let prefix = format::collection_prefix(format::ZSET_SCORE, generation);
    txn.scan_prefix(&prefix, dir, |k, _| match format::split_score_key(k) {
        Some((score, member)) => visit(score, member),
        None => true,
    })?;
    Ok(())
}

/// Visits the index entries with members in `[min, max]` in direction `dir` (members sort by
/// bytes when all scores are equal, the case lex ranges are defined for).
fn walk_lex(
    txn: &mut Txn<'_>,
    generation: u64,
    min: &LexBound,
    max: &LexBound,
    dir: Dir,
    mut visit: impl FnMut(f64, &[u8]) -> bool,
) -> Result<()> {
    walk_all(txn, generation, dir, |score, member| {
        let (inside_far_end, inside_near_end) = match dir {
            Dir::Forward => (max.admits_from_above(member), min.admits_from_below(member)),
            Dir::Backward => (min.admits_from_below(member), max.admits_from_above(member)),
        };
        if !inside_near_end {
            return true;
        }
        if !inside_far_end {
            return false;
        }
        visit(score, member)
    })
}

/// A window over a range: skip `offset` matches, then take at most `count`.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    /// Matches skipped first.
    pub offset: usize,
    /// Most matches taken.
    pub count: usize,
}

impl Limit {
    /// No limit.
    pub const ALL: Limit = Limit {
        offset: 0,
        count: usize::MAX,
    };
}

fn collect_limited(limit: Limit, out: &mut Vec<Scored>) -> impl FnMut(f64, &[u8]) -> bool + '_ {
    let mut skipped = 0;
    move |score, member| {
        if limit.count == 0 {
            return false;
        }
        if skipped < limit.offset {
            skipped += 1;
            return true;
        }
        out.push((member.to_vec(), score));
        out.len() < limit.count
    }
}

/// Members with ranks `start..=stop` (negative from the end), lowest score first or (`rev`)
/// highest first.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn range_by_rank(
    txn: &mut Txn<'_>,
    key: &[u8],
    start: i64,
    stop: i64,
    rev: bool,
) -> Result<Vec<Scored>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(Vec::new());
    };
    let Some((first, count)) = super::strings::resolve_range(start, stop, m.len) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
    let dir = if rev { Dir::Backward } else { Dir::Forward };
    let limit = Limit {
        offset: first as usize,
        count: count as usize,
    };
    walk_all(txn, m.generation, dir, collect_limited(limit, &mut out))?;
    Ok(out)
}

/// Members with scores in `[min, max]`, in score order (or reversed), windowed by `limit`.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn range_by_score(
    txn: &mut Txn<'_>,
    key: &[u8],
    min: ScoreBound,
    max: ScoreBound,
    rev: bool,
    limit: Limit,
) -> Result<Vec<Scored>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let dir = if rev { Dir::Backward } else { Dir::Forward };
    walk_scores(
        txn,
        m.generation,
        min,
        max,
        dir,
        collect_limited(limit, &mut out),
    )?;
    Ok(out)
}

/// Members in `[min, max]` by bytes, in order (or reversed), windowed by `limit`.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn range_by_lex(
    txn: &mut Txn<'_>,
    key: &[u8],
    min: &LexBound,
    max: &LexBound,
    rev: bool,
    limit: Limit,
) -> Result<Vec<Scored>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let dir = if rev { Dir::Backward } else { Dir::Forward };
    walk_lex(
        txn,
        m.generation,
        min,
        max,
        dir,
        collect_limited(limit, &mut out),
    )?;
    Ok(out)
}

/// ZCOUNT: members with scores in `[min, max]`.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn count_by_score(
    txn: &mut Txn<'_>,
    key: &[u8],
    min: ScoreBound,
    max: ScoreBound,
) -> Result<u64> {
    let Some(m) = meta(txn, key)? else {
        return Ok(0);
    };
    let mut n = 0;
    walk_scores(txn, m.generation, min, max, Dir::Forward, |_, _| {
        n += 1;
        true
    })?;
    Ok(n)
}

/// ZLEXCOUNT: members in `[min, max]` by bytes.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn count_by_lex(txn: &mut Txn<'_>, key: &[u8], min: &LexBound, max: &LexBound) -> Result<u64> {
    let Some(m) = meta(txn, key)? else {
        return Ok(0);
    };
    let mut n = 0;
    walk_lex(txn, m.generation, min, max, Dir::Forward, |_, _| {
        n += 1;
        true
    })?;
    Ok(n)
}

/// ZRANK / ZREVRANK: the member's rank and score.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn rank(txn: &mut Txn<'_>, key: &[u8], member: &[u8], rev: bool) -> Result<Option<(u64, f64)>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(None);
    };
    let Some(score) = score_in(txn, m.generation, member)? else {
        return Ok(None);
    };
    // Count the entries before (score, member) in the index: those with lower scores, and
    // equal scores with lower members.
    let target = format::score_key(m.generation, score, member);
    let prefix = format::collection_prefix(format::ZSET_SCORE, m.generation);
    let mut before = 0u64;
    txn.scan(
        Bound::Included(prefix),
        Bound::Excluded(target),
        Dir::Forward,
        |_, _| {
            before += 1;
            true
        },
    )?;
    let rank = if rev {
        m.len.saturating_sub(before + 1)
    } else {
        before
    };
    Ok(Some((rank, score)))
}

/// ZPOPMIN / ZPOPMAX: removes and returns up to `count` members with the lowest (or, `max`,
/// highest) scores.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn pop(txn: &mut Txn<'_>, key: &[u8], count: usize, max: bool) -> Result<Vec<Scored>> {
    let Some(mut m) = keys::typed_write(txn, key, Kind::ZSet)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let dir = if max { Dir::Backward } else { Dir::Forward };
    let limit = Limit { offset: 0, count };
    walk_all(txn, m.generation, dir, collect_limited(limit, &mut out))?;
    for (member, score) in &out {
        remove_member(txn, m.generation, member, *score);
    }
    finish_removal(txn, key, &mut m, out.len() as u64);
    Ok(out)
}

/// What ZREMRANGEBY* removes.
#[derive(Debug, Clone)]
pub enum RemoveRange {
    /// Ranks `start..=stop` (negative from the end).
    Rank(i64, i64),
    /// Scores in `[min, max]`.
    Score(ScoreBound, ScoreBound),
    /// Members in `[min, max]` by bytes.
    Lex(LexBound, LexBound),
}

/// ZREMRANGEBYRANK / BYSCORE / BYLEX: removes the members in `range`; returns how many.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn remove_range(txn: &mut Txn<'_>, key: &[u8], range: &RemoveRange) -> Result<u64> {
    let Some(mut m) = keys::typed_write(txn, key, Kind::ZSet)? else {
        return Ok(0);
    };
    let mut doomed = Vec::new();
    match range {
        RemoveRange::Rank(start, stop) => {
            if let Some((first, count)) = super::strings::resolve_range(*start, *stop, m.len) {
                let limit = Limit {
                    offset: first as usize,
                    count: count as usize,
                };
                walk_all(
                    txn,
                    m.generation,
                    Dir::Forward,
                    collect_limited(limit, &mut doomed),
                )?;
            }
        }
        RemoveRange::Score(min, max) => {
            let collect = collect_limited(Limit::ALL, &mut doomed);
            walk_scores(txn, m.generation, *min, *max, Dir::Forward, collect)?;
        }
        RemoveRange::Lex(min, max) => {
            let collect = collect_limited(Limit::ALL, &mut doomed);
            walk_lex(txn, m.generation, min, max, Dir::Forward, collect)?;
        }
    }
    for (member, score) in &doomed {
        remove_member(txn, m.generation, member, *score);
    }
    finish_removal(txn, key, &mut m, doomed.len() as u64);
    Ok(doomed.len() as u64)
}

/// Every member and score of a sorted set, or of a set (score 1), as ZUNIONSTORE reads its
/// inputs; `None` when the key is absent.
///
/// # Errors
/// [`Error::WrongType`] for another type; the engine's error.
pub fn read_input(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Vec<Scored>>> {
    let Some(m) = keys::lookup(txn, key)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(m.len.min(1 << 16) as usize);
    match m.kind {
        Kind::ZSet => walk_all(txn, m.generation, Dir::Forward, |score, member| {
            out.push((member.to_vec(), score));
            true
        })?,
        Kind::Set => {
            let prefix = format::collection_prefix(format::SET_MEMBER, m.generation);
            for (member, _) in sample::read_all(txn, &prefix)? {
                out.push((member, 1.0));
            }
        }
        _ => return Err(Error::WrongType),
    }
    Ok(Some(out))
}

/// Replaces `key` with a sorted set of `members` (deletes it when empty); returns its size.
///
/// # Errors
/// The engine's error.
pub fn store(txn: &mut Txn<'_>, key: &[u8], members: &[Scored]) -> Result<u64> {
    let old = keys::lookup_write(txn, key)?;
    if let Some(old) = &old {
        keys::delete(txn, key, old)?;
    }
    if members.is_empty() {
        return Ok(0);
    }
    let mut m = Meta::collection(Kind::ZSet, txn.new_generation());
    for (member, score) in members {
        put_member(txn, m.generation, member, None, *score);
    }
    m.len = members.len() as u64;
    keys::store_collection(txn, key, &m, true);
    Ok(m.len)
}

/// ZRANDMEMBER: random members with their scores (see [`sample::pick`] for `count`).
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn random(txn: &mut Txn<'_>, key: &[u8], count: i64, seed: u64) -> Result<Vec<Scored>> {
    let Some(m) = meta(txn, key)? else {
        return Ok(Vec::new());
    };
    let prefix = format::collection_prefix(format::ZSET_MEMBER, m.generation);
    sample::pick(txn, &prefix, m.len, count, seed)?
        .into_iter()
        .map(|(member, v)| Ok((member, format::decode_score(&v).ok_or_else(damaged)?)))
        .collect()
}

/// ZSCAN: up to `count` members from `from`, and where the next call resumes.
///
/// # Errors
/// [`Error::WrongType`]; the engine's error.
pub fn scan(
    txn: &mut Txn<'_>,
    key: &[u8],
    from: Option<&[u8]>,
    count: usize,
) -> Result<sample::Page<Scored>> {
    let Some(m) = meta(txn, key)? else {
        return Ok((Vec::new(), None));
    };
    let prefix = format::collection_prefix(format::ZSET_MEMBER, m.generation);
    let (found, next) = sample::scan(txn, &prefix, from, count)?;
    let found = found
        .into_iter()
        .map(|(member, v)| Ok((member, format::decode_score(&v).ok_or_else(damaged)?)))
        .collect::<Result<_>>()?;
    Ok((found, next))
}
