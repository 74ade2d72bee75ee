//! Sorted-set commands: ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANGE (BYSCORE, BYLEX,
//! REV, LIMIT, WITHSCORES) and its older forms, ZRANGESTORE, ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT,
//! ZPOPMIN, ZPOPMAX, BZPOPMIN, BZPOPMAX, ZMPOP, BZMPOP, ZREMRANGEBY*, ZUNION/ZINTER/ZDIFF(STORE),
//! ZINTERCARD, ZRANDMEMBER, ZSCAN. The records are `store::zsets`'.

use super::args::{self, int, is};
use super::hash::random_count;
use super::keys::{cursor, resume, scan_options};
use super::list::{block_or_null, BlockOp};
use super::{CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::zsets::{self as z, AddFlags, LexBound, Limit, RemoveRange, ScoreBound, Scored};
use bytes::Bytes;
use rustc_hash::FxHashMap;
use shale_proto::resp::{ReplyWriter, Version};

/// Writes members (and scores): RESP2 a flat array, RESP3 an array of pairs with scores.
pub(super) fn write_scored(w: &mut ReplyWriter<'_>, found: &[Scored], withscores: bool) {
    match (withscores, w.version()) {
        (false, _) => {
            w.array(found.len());
            for (m, _) in found {
                w.bulk(m);
            }
        }
        (true, Version::Resp2) => {
            w.array(found.len() * 2);
            for (m, s) in found {
                w.bulk(m);
                w.double(*s);
            }
        }
        (true, Version::Resp3) => {
            w.array(found.len());
            for (m, s) in found {
                w.array(2);
                w.bulk(m);
                w.double(*s);
            }
        }
    }
}

pub(super) fn zadd(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut f = AddFlags::default();
    let mut ch = false;
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        if is(a, "nx") {
            f.nx = true;
        } else if is(a, "xx") {
            f.xx = true;
        } else if is(a, "gt") {
            f.gt = true;
        } else if is(a, "lt") {
            f.lt = true;
        } else if is(a, "ch") {
            ch = true;
        } else if is(a, "incr") {
            f.incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &argv[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::msg(SYNTAX));
    }
    if f.nx && f.xx {
        return Err(CmdError::msg(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::msg(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest.len() > 2 {
        return Err(CmdError::msg(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks_exact(2) {
        pairs.push((args::float(&p[0])?, p[1].clone()));
    }
    let out = z::add(ctx.txn, &argv[1], f, &pairs)?;
    let mut w = ctx.w();
    if f.incr {
        match out.score {
            Some(s) => w.double(s),
            None => w.null(),
        }
    } else {
        w.integer((out.added + if ch { out.changed } else { 0 }) as i64);
    }
    Ok(())
}

pub(super) fn zincrby(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let delta = args::float(&argv[2])?;
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    let out = z::add(ctx.txn, &argv[1], f, &[(delta, argv[3].clone())])?;
    match out.score {
        Some(s) => ctx.w().double(s),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn zrem(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let n = z::remove(ctx.txn, &argv[1], &argv[2..])?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn zcard(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let n = z::len(ctx.txn, &argv[1])?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn zscore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match z::score(ctx.txn, &argv[1], &argv[2])? {
        Some(s) => ctx.w().double(s),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn zmscore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let scores = z::scores(ctx.txn, &argv[1], &argv[2..])?;
    let mut w = ctx.w();
    w.array(scores.len());
    for s in scores {
        match s {
            Some(s) => w.double(s),
            None => w.null(),
        }
    }
    Ok(())
}

/// A score bound of a range (`1.5`, `(1.5`, `-inf`).
fn score_bound(arg: &[u8]) -> Result<ScoreBound, CmdError> {
    let bad = || CmdError::msg("ERR min or max is not a float");
    let (text, exclusive) = match arg.split_first() {
        Some((b'(', rest)) => (rest, true),
        _ => (arg, false),
    };
    Ok(ScoreBound {
        value: args::parse_f64(text).ok_or_else(bad)?,
        exclusive,
    })
}

/// A lex bound (`[a`, `(a`, `-`, `+`).
fn lex_bound(arg: &[u8]) -> Result<LexBound, CmdError> {
    match arg.split_first() {
        Some((b'[', rest)) => Ok(LexBound::Inclusive(rest.to_vec())),
        Some((b'(', rest)) => Ok(LexBound::Exclusive(rest.to_vec())),
        Some((b'-', [])) => Ok(LexBound::Min),
        Some((b'+', [])) => Ok(LexBound::Max),
        _ => Err(CmdError::msg("ERR min or max not valid string range item")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Rank,
    Score,
    Lex,
}

/// A parsed ZRANGE (any form).
struct RangeQuery {
    kind: RangeType,
    rev: bool,
    withscores: bool,
    limit: Option<(i64, i64)>,
}

/// Parses ZRANGE's options from `argv[from..]`; `preset` fixes the type and direction of the
/// older forms (ZRANGEBYSCORE, ...), which accept only WITHSCORES and LIMIT.
fn parse_range(
    argv: &[Bytes],
    from: usize,
    preset: Option<(RangeType, bool)>,
    store: bool,
) -> Result<RangeQuery, CmdError> {
    let mut q = RangeQuery {
        kind: preset.map_or(RangeType::Rank, |p| p.0),
        rev: preset.is_some_and(|p| p.1),
        withscores: false,
        limit: None,
    };
    let (mut kind_set, mut rev_set) = (preset.is_some(), preset.is_some());
    let mut i = from;
    while i < argv.len() {
        let a = &argv[i];
        let left = argv.len() - i - 1;
        if !store && is(a, "withscores") {
            q.withscores = true;
        } else if is(a, "limit") && left >= 2 {
            q.limit = Some((int(&argv[i + 1])?, int(&argv[i + 2])?));
            i += 2;
        } else if !rev_set && is(a, "rev") {
            q.rev = true;
            rev_set = true;
        } else if !kind_set && is(a, "bylex") {
            q.kind = RangeType::Lex;
            kind_set = true;
        } else if !kind_set && is(a, "byscore") {
            q.kind = RangeType::Score;
            kind_set = true;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    if q.limit.is_some() && q.kind == RangeType::Rank {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if q.withscores && q.kind == RangeType::Lex {
        return Err(CmdError::msg(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    Ok(q)
}

/// Redis's LIMIT: a negative offset gives nothing, a negative count everything.
fn limit_of(limit: Option<(i64, i64)>) -> Limit {
    match limit {
        None => Limit::ALL,
        Some((offset, _)) if offset < 0 => Limit {
            offset: 0,
            count: 0,
        },
        Some((offset, count)) => Limit {
            offset: offset as usize,
            count: usize::try_from(count).unwrap_or(usize::MAX),
        },
    }
}

/// Runs a parsed range over `key` with bounds `a` and `b` as given (for REV score and lex
/// ranges, max first).
fn run_range(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    a: &[u8],
    b: &[u8],
    q: &RangeQuery,
) -> Result<Vec<Scored>, CmdError> {
    let (lo, hi) = if q.rev && q.kind != RangeType::Rank {
        (b, a)
    } else {
        (a, b)
    };
    Ok(match q.kind {
        RangeType::Rank => {
            let (start, stop) = (int(lo)?, int(hi)?);
            z::range_by_rank(ctx.txn, key, start, stop, q.rev)?
        }
        RangeType::Score => {
            let (min, max) = (score_bound(lo)?, score_bound(hi)?);
            z::range_by_score(ctx.txn, key, min, max, q.rev, limit_of(q.limit))?
        }
        RangeType::Lex => {
            let (min, max) = (lex_bound(lo)?, lex_bound(hi)?);
            z::range_by_lex(ctx.txn, key, &min, &max, q.rev, limit_of(q.limit))?
        }
    })
}

fn range_command(
    ctx: &mut Ctx<'_, '_>,
    argv: &[Bytes],
    preset: Option<(RangeType, bool)>,
) -> CmdResult {
    let q = parse_range(argv, 4, preset, false)?;
    let found = run_range(ctx, &argv[1], &argv[2], &argv[3], &q)?;
    write_scored(&mut ctx.w(), &found, q.withscores);
    Ok(())
}

pub(super) fn zrange(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    range_command(ctx, argv, None)
}

pub(super) fn zrevrange(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    range_command(ctx, argv, Some((RangeType::Rank, true)))
}

pub(super) fn zrangebyscore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    range_command(ctx, argv, Some((RangeType::Score, false)))
}

pub(super) fn zrevrangebyscore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    range_command(ctx, argv, Some((RangeType::Score, true)))
}

pub(super) fn zrangebylex(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    range_command(ctx, argv, Some((RangeType::Lex, false)))
}

pub(super) fn zrevrangebylex(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    range_command(ctx, argv, Some((RangeType::Lex, true)))
}

pub(super) fn zrangestore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let q = parse_range(argv, 5, None, true)?;
    let found = run_range(ctx, &argv[2], &argv[3], &argv[4], &q)?;
    let n = z::store(ctx.txn, &argv[1], &found)?;
    ctx.w().integer(n as i64);
    Ok(())
}

fn rank(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], rev: bool) -> CmdResult {
    match z::rank(ctx.txn, &argv[1], &argv[2], rev)? {
        Some((r, _)) => ctx.w().integer(r as i64),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn zrank(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    rank(ctx, argv, false)
}

pub(super) fn zrevrank(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    rank(ctx, argv, true)
}

pub(super) fn zcount(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (min, max) = (score_bound(&argv[2])?, score_bound(&argv[3])?);
    let n = z::count_by_score(ctx.txn, &argv[1], min, max)?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn zlexcount(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (min, max) = (lex_bound(&argv[2])?, lex_bound(&argv[3])?);
    let n = z::count_by_lex(ctx.txn, &argv[1], &min, &max)?;
    ctx.w().integer(n as i64);
    Ok(())
}

fn pop_command(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], max: bool) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::msg(SYNTAX));
    }
    let count = match argv.get(2) {
        Some(c) => Some(args::int_at_least(
            c,
            0,
            "ERR value is out of range, must be positive",
        )?),
        None => None,
    };
    let found = z::pop(ctx.txn, &argv[1], count.unwrap_or(1) as usize, max)?;
    let version = ctx.session.version;
    let mut w = ctx.w();
    if version == Version::Resp3 && count.is_some() {
        write_scored(&mut w, &found, true);
    } else {
        w.array(found.len() * 2);
        for (m, s) in &found {
            w.bulk(m);
            w.double(*s);
        }
    }
    Ok(())
}

pub(super) fn zpopmin(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    pop_command(ctx, argv, false)
}

pub(super) fn zpopmax(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    pop_command(ctx, argv, true)
}

pub(super) fn bzpopmin(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let timeout = args::timeout(&argv[argv.len() - 1])?;
    let op = BlockOp::ZPop {
        max: false,
        count: None,
    };
    block_or_null(ctx, &argv[1..argv.len() - 1], op, timeout)
}

pub(super) fn bzpopmax(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let timeout = args::timeout(&argv[argv.len() - 1])?;
    let op = BlockOp::ZPop {
        max: true,
        count: None,
    };
    block_or_null(ctx, &argv[1..argv.len() - 1], op, timeout)
}

/// ZMPOP's and BZMPOP's keys, MIN|MAX and COUNT, from the numkeys at `at`.
fn parse_mpop(argv: &[Bytes], at: usize) -> Result<(&[Bytes], bool, u64), CmdError> {
    let keys = args::counted_keys(argv, at)?;
    let mut i = at + 1 + keys.len();
    let where_ = argv.get(i).ok_or_else(|| CmdError::msg(SYNTAX))?;
    let max = if is(where_, "min") {
        false
    } else if is(where_, "max") {
        true
    } else {
        return Err(CmdError::msg(SYNTAX));
    };
    i += 1;
    let mut count = None;
    while i < argv.len() {
        if count.is_none() && is(&argv[i], "count") && i + 1 < argv.len() {
            count = Some(args::positive_count(&argv[i + 1])?);
            i += 2;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    Ok((keys, max, count.unwrap_or(1)))
}

pub(super) fn zmpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (keys, max, count) = parse_mpop(argv, 1)?;
    for key in keys {
        let found = z::pop(ctx.txn, key, count as usize, max)?;
        if !found.is_empty() {
            let mut w = ctx.w();
            w.array(2);
            w.bulk(key);
            w.array(found.len());
            for (m, s) in &found {
                w.array(2);
                w.bulk(m);
                w.double(*s);
            }
            return Ok(());
        }
    }
    ctx.w().null_array();
    Ok(())
}

pub(super) fn bzmpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let timeout = args::timeout(&argv[1])?;
    let (keys, max, count) = parse_mpop(argv, 2)?;
    let op = BlockOp::ZPop {
        max,
        count: Some(count),
    };
    block_or_null(ctx, keys, op, timeout)
}

fn remove_range(ctx: &mut Ctx<'_, '_>, key: &[u8], range: RemoveRange) -> CmdResult {
    let n = z::remove_range(ctx.txn, key, &range)?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn zremrangebyscore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (min, max) = (score_bound(&argv[2])?, score_bound(&argv[3])?);
    remove_range(ctx, &argv[1], RemoveRange::Score(min, max))
}

pub(super) fn zremrangebyrank(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (start, stop) = (int(&argv[2])?, int(&argv[3])?);
    remove_range(ctx, &argv[1], RemoveRange::Rank(start, stop))
}

pub(super) fn zremrangebylex(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (min, max) = (lex_bound(&argv[2])?, lex_bound(&argv[3])?);
    remove_range(ctx, &argv[1], RemoveRange::Lex(min, max))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(a: f64, b: f64, how: Aggregate) -> f64 {
    match how {
        Aggregate::Sum => {
            let s = a + b;
            // +inf + -inf: Redis answers 0.
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Aggregate::Min => a.min(b),
        Aggregate::Max => a.max(b),
    }
}

/// ZUNION, ZINTER, ZDIFF and their STORE forms, and ZINTERCARD (`card`). `at` is the numkeys
/// position; `store` the destination.
fn set_operation(
    ctx: &mut Ctx<'_, '_>,
    argv: &[Bytes],
    at: usize,
    op: SetOp,
    store: Option<&Bytes>,
    card: bool,
) -> CmdResult {
    let name = args::printable(&argv[0], 32).to_ascii_lowercase();
    let n = int(&argv[at])?;
    if n < 1 {
        return Err(CmdError::Msg(
            format!("ERR at least 1 input key is needed for '{name}' command").into(),
        ));
    }
    let keys = argv
        .get(at + 1..at + 1 + n as usize)
        .ok_or_else(|| CmdError::msg(SYNTAX))?;
    let mut inputs = Vec::with_capacity(keys.len());
    for k in keys {
        inputs.push(z::read_input(ctx.txn, k)?.unwrap_or_default());
    }
    let mut weights = vec![1.0; keys.len()];
    let (mut how, mut withscores, mut limit) = (Aggregate::Sum, false, 0usize);
    let mut i = at + 1 + keys.len();
    while i < argv.len() {
        let left = argv.len() - i;
        let a = &argv[i];
        if op != SetOp::Diff && !card && left > keys.len() && is(a, "weights") {
            for (j, w) in weights.iter_mut().enumerate() {
                *w = args::parse_f64(&argv[i + 1 + j])
                    .ok_or_else(|| CmdError::msg("ERR weight value is not a float"))?;
            }
            i += 1 + keys.len();
        } else if op != SetOp::Diff && !card && left >= 2 && is(a, "aggregate") {
            let v = &argv[i + 1];
            how = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::msg(SYNTAX));
            };
            i += 2;
        } else if store.is_none() && !card && is(a, "withscores") {
            withscores = true;
            i += 1;
        } else if card && left >= 2 && is(a, "limit") {
            limit = args::int_in_range(&argv[i + 1], 0, "ERR LIMIT can't be negative")? as usize;
            i += 2;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    let weigh = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut result: Vec<Scored> = match op {
        SetOp::Union => {
            let mut acc: FxHashMap<Vec<u8>, f64> = FxHashMap::default();
            for (input, &w) in inputs.iter().zip(&weights) {
                for (m, s) in input {
                    let v = weigh(*s, w);
                    acc.entry(m.clone())
                        .and_modify(|cur| *cur = aggregate(*cur, v, how))
                        .or_insert(v);
                }
            }
            acc.into_iter().collect()
        }
        SetOp::Inter => {
            let maps: Vec<FxHashMap<&[u8], f64>> = inputs
                .iter()
                .map(|input| input.iter().map(|(m, s)| (m.as_slice(), *s)).collect())
                .collect();
            let mut out = Vec::new();
            for (m, s) in &inputs[0] {
                let mut v = weigh(*s, weights[0]);
                let mut everywhere = true;
                for (map, &w) in maps.iter().zip(&weights).skip(1) {
                    match map.get(m.as_slice()) {
                        Some(&other) => v = aggregate(v, weigh(other, w), how),
                        None => {
                            everywhere = false;
                            break;
                        }
                    }
                }
                if everywhere {
                    out.push((m.clone(), v));
                }
            }
            out
        }
        SetOp::Diff => {
            let others: rustc_hash::FxHashSet<&[u8]> = inputs[1..]
                .iter()
                .flatten()
                .map(|(m, _)| m.as_slice())
                .collect();
            inputs[0]
                .iter()
                .filter(|(m, _)| !others.contains(m.as_slice()))
                .cloned()
                .collect()
        }
    };
    if card {
        let n = if limit > 0 {
            result.len().min(limit)
        } else {
            result.len()
        };
        ctx.w().integer(n as i64);
        return Ok(());
    }
    result.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    match store {
        Some(dst) => {
            let n = z::store(ctx.txn, dst, &result)?;
            ctx.w().integer(n as i64);
        }
        None => write_scored(&mut ctx.w(), &result, withscores),
    }
    Ok(())
}

pub(super) fn zunionstore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_operation(ctx, argv, 2, SetOp::Union, Some(&argv[1]), false)
}

pub(super) fn zinterstore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_operation(ctx, argv, 2, SetOp::Inter, Some(&argv[1]), false)
}

pub(super) fn zdiffstore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_operation(ctx, argv, 2, SetOp::Diff, Some(&argv[1]), false)
}

pub(super) fn zunion(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_operation(ctx, argv, 1, SetOp::Union, None, false)
}

pub(super) fn zinter(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_operation(ctx, argv, 1, SetOp::Inter, None, false)
}

pub(super) fn zdiff(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_operation(ctx, argv, 1, SetOp::Diff, None, false)
}

pub(super) fn zintercard(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_operation(ctx, argv, 1, SetOp::Inter, None, true)
}

pub(super) fn zrandmember(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let seed = ctx.seed();
    if argv.len() == 2 {
        match z::random(ctx.txn, &argv[1], 1, seed)?.first() {
            Some((m, _)) => ctx.w().bulk(m),
            None => ctx.w().null(),
        }
        return Ok(());
    }
    let withscores = match argv.get(3) {
        None => false,
        Some(a) if is(a, "withscores") && argv.len() == 4 => true,
        Some(_) => return Err(CmdError::msg(SYNTAX)),
    };
    let count = random_count(&argv[2], withscores)?;
    let found = z::random(ctx.txn, &argv[1], count, seed)?;
    write_scored(&mut ctx.w(), &found, withscores);
    Ok(())
}

pub(super) fn zscan(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let from = resume(ctx, cursor(&argv[2])?)?;
    let o = scan_options(argv, 3, false)?;
    let (found, next) = z::scan(ctx.txn, &argv[1], from.as_deref(), o.count)?;
    let found: Vec<_> = found
        .into_iter()
        .filter(|(m, _)| o.pattern.as_ref().is_none_or(|p| p.matches(m)))
        .collect();
    let next_cursor = next.map_or(0, |k| ctx.shared.cursors.save(k));
    let mut w = ctx.w();
    w.array(2);
    w.bulk(next_cursor.to_string().as_bytes());
    w.array(found.len() * 2);
    for (m, s) in found {
        w.bulk(&m);
        w.double(s);
    }
    Ok(())
}
