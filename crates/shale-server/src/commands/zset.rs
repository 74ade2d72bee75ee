//! Sorted-set commands: ZADD (NX, XX, GT, LT, CH, INCR), ZREM, ZRANGEBYSCORE (WITHSCORES,
//! LIMIT), ZCARD, ZSCORE.
//!
//! A sorted set is two families of records under its generation: member -> score, and an index
//! keyed by (ordered score, member) that ZRANGEBYSCORE walks in score order. Both change in the
//! same batch.

use super::args::{self, is};
use super::{CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::format::{self, Kind, Meta};
use crate::store::upper_bound;
use bytes::Bytes;
use shale_proto::resp::Version;
use std::ops::Bound;

fn zset_meta(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    match ctx.txn.meta(key)? {
        Some(m) if m.kind != Kind::ZSet => Err(CmdError::WrongType),
        m => Ok(m),
    }
}

fn score_of(
    ctx: &mut Ctx<'_, '_>,
    generation: u64,
    member: &[u8],
) -> Result<Option<f64>, CmdError> {
    match ctx.txn.get(&format::member_key(generation, member))? {
        None => Ok(None),
        Some(v) => format::decode_score(&v).map(Some).ok_or_else(|| {
            CmdError::Engine(shale::Error::new(
                shale::ErrorKind::Corruption,
                "damaged sorted-set score",
            ))
        }),
    }
}

fn put_member(ctx: &mut Ctx<'_, '_>, generation: u64, member: &[u8], old: Option<f64>, score: f64) {
    if let Some(old) = old {
        ctx.txn.delete(&format::score_key(generation, old, member));
    }
    ctx.txn.put(
        &format::member_key(generation, member),
        &format::encode_score(score),
    );
    ctx.txn
        .put(&format::score_key(generation, score, member), b"");
}

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

pub(super) fn zadd(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut f = ZaddFlags::default();
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        let flag = match () {
            _ if is(a, "nx") => &mut f.nx,
            _ if is(a, "xx") => &mut f.xx,
            _ if is(a, "gt") => &mut f.gt,
            _ if is(a, "lt") => &mut f.lt,
            _ if is(a, "ch") => &mut f.ch,
            _ if is(a, "incr") => &mut f.incr,
            _ => break,
        };
        *flag = true;
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
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
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
        pairs.push((args::float(&p[0])?, &p[1]));
    }
    let key = &argv[1];
    let meta = zset_meta(ctx, key)?;
    if meta.is_none() && f.xx {
        if f.incr {
            ctx.w().null();
        } else {
            ctx.w().integer(0);
        }
        return Ok(());
    }
    let (generation, len, expire_at) = match &meta {
        Some(m) => (m.generation, m.len, m.expire_at),
        None => (ctx.txn.new_generation(), 0, 0),
    };
    let (mut added, mut changed) = (0u64, 0u64);
    let mut result = None;
    for (score, member) in pairs {
        let old = score_of(ctx, generation, member)?;
        match old {
            Some(_) if f.nx => continue,
            None if f.xx => continue,
            _ => {}
        }
        let new = match (f.incr, old) {
            (true, Some(o)) => o + score,
            _ => score,
        };
        if new.is_nan() {
            return Err(CmdError::msg("ERR resulting score is not a number (NaN)"));
        }
        if let Some(o) = old {
            if (f.gt && new <= o) || (f.lt && new >= o) || new == o {
                if new == o {
                    result = Some(new);
                }
                continue;
            }
            changed += 1;
        } else {
            added += 1;
        }
        put_member(ctx, generation, member, old, new);
        result = Some(new);
    }
    if added > 0 || meta.is_none() {
        ctx.txn.put(
            &format::meta_key(key),
            &format::collection_meta(Kind::ZSet, expire_at, generation, len + added),
        );
    }
    let mut w = ctx.w();
    if f.incr {
        match result {
            Some(s) => w.double(s),
            None => w.null(),
        }
    } else {
        w.integer((added + if f.ch { changed } else { 0 }) as i64);
    }
    Ok(())
}

pub(super) fn zrem(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let Some(meta) = zset_meta(ctx, key)? else {
        ctx.w().integer(0);
        return Ok(());
    };
    let mut removed = 0u64;
    for member in &argv[2..] {
        if let Some(score) = score_of(ctx, meta.generation, member)? {
            ctx.txn.delete(&format::member_key(meta.generation, member));
            ctx.txn
                .delete(&format::score_key(meta.generation, score, member));
            removed += 1;
        }
    }
    super::finish_removal(ctx, key, &meta, Kind::ZSet, removed)
}

pub(super) fn zcard(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let len = zset_meta(ctx, &argv[1])?.map_or(0, |m| m.len);
    ctx.w().integer(len as i64);
    Ok(())
}

pub(super) fn zscore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let score = match zset_meta(ctx, &argv[1])? {
        Some(m) => score_of(ctx, m.generation, &argv[2])?,
        None => None,
    };
    match score {
        Some(s) => ctx.w().double(s),
        None => ctx.w().null(),
    }
    Ok(())
}

/// A score bound of ZRANGEBYSCORE: the value and whether it is exclusive (`(1.5`).
fn score_bound(arg: &[u8]) -> Result<(f64, bool), CmdError> {
    let bad = || CmdError::msg("ERR min or max is not a float");
    match arg.split_first() {
        Some((b'(', rest)) => Ok((args::parse_f64(rest).ok_or_else(bad)?, true)),
        _ => Ok((args::parse_f64(arg).ok_or_else(bad)?, false)),
    }
}

pub(super) fn zrangebyscore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (min, min_ex) = score_bound(&argv[2])?;
    let (max, max_ex) = score_bound(&argv[3])?;
    let (mut withscores, mut offset, mut count) = (false, 0usize, usize::MAX);
    let mut i = 4;
    while i < argv.len() {
        if is(&argv[i], "withscores") {
            withscores = true;
            i += 1;
        } else if is(&argv[i], "limit") && i + 2 < argv.len() {
            let o = args::int(&argv[i + 1])?;
            let c = args::int(&argv[i + 2])?;
            if o < 0 {
                // Redis answers an empty array for a negative offset.
                count = 0;
            } else {
                offset = o as usize;
                count = usize::try_from(c).unwrap_or(usize::MAX);
            }
            i += 3;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    let mut found: Vec<(Vec<u8>, f64)> = Vec::new();
    if let Some(m) = zset_meta(ctx, &argv[1])? {
        if count > 0 && min <= max {
            let lo = format::score_key(m.generation, min, b"");
            let hi = upper_bound(&format::score_key(m.generation, max, b""));
            let mut skipped = 0usize;
            ctx.txn.scan(Bound::Included(lo), hi, |k, _| {
                let Some((score, member)) = format::split_score_key(k) else {
                    return true;
                };
                if (min_ex && score <= min) || (max_ex && score >= max) {
                    return !(max_ex && score >= max);
                }
                if skipped < offset {
                    skipped += 1;
                    return true;
                }
                found.push((member.to_vec(), score));
                found.len() < count
            })?;
        }
    }
    let version = ctx.session.version;
    let mut w = ctx.w();
    match (withscores, version) {
        (false, _) => {
            w.array(found.len());
            for (m, _) in found {
                w.bulk(&m);
            }
        }
        (true, Version::Resp2) => {
            w.array(found.len() * 2);
            for (m, s) in found {
                w.bulk(&m);
                w.double(s);
            }
        }
        (true, Version::Resp3) => {
            w.array(found.len());
            for (m, s) in found {
                w.array(2);
                w.bulk(&m);
                w.double(s);
            }
        }
    }
    Ok(())
}
