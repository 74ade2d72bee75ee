//! Hash commands: HSET, HMSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS, HDEL, HLEN, HEXISTS,
//! HSTRLEN, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN. The records are `store::hashes`'.

use super::args::{self, int, is};
use super::keys::{cursor, resume, scan_options};
use super::{CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::hashes as h;
use crate::store::strings as st;
use bytes::Bytes;

fn check_pairs(argv: &[Bytes], name: &str) -> CmdResult {
    if !argv.len().is_multiple_of(2) {
        return Err(super::wrong_arity(name));
    }
    Ok(())
}

pub(super) fn hset(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    check_pairs(argv, "hset")?;
    let added = h::set(ctx.txn, &argv[1], &argv[2..])?;
    ctx.w().integer(added as i64);
    Ok(())
}

pub(super) fn hmset(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    check_pairs(argv, "hmset")?;
    h::set(ctx.txn, &argv[1], &argv[2..])?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn hsetnx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let done = h::set_if_absent(ctx.txn, &argv[1], &argv[2], &argv[3])?;
    ctx.w().integer(i64::from(done));
    Ok(())
}

pub(super) fn hget(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match h::get(ctx.txn, &argv[1], &argv[2])? {
        Some(v) => ctx.w().bulk(&v),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn hmget(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let values = h::get_many(ctx.txn, &argv[1], &argv[2..])?;
    let mut w = ctx.w();
    w.array(values.len());
    for v in values {
        match v {
            Some(v) => w.bulk(&v),
            None => w.null(),
        }
    }
    Ok(())
}

pub(super) fn hgetall(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let pairs = h::get_all(ctx.txn, &argv[1])?;
    let mut w = ctx.w();
    w.map(pairs.len());
    for (f, v) in pairs {
        w.bulk(&f);
        w.bulk(&v);
    }
    Ok(())
}

pub(super) fn hkeys(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let pairs = h::get_all(ctx.txn, &argv[1])?;
    let mut w = ctx.w();
    w.array(pairs.len());
    for (f, _) in pairs {
        w.bulk(&f);
    }
    Ok(())
}

pub(super) fn hvals(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let pairs = h::get_all(ctx.txn, &argv[1])?;
    let mut w = ctx.w();
    w.array(pairs.len());
    for (_, v) in pairs {
        w.bulk(&v);
    }
    Ok(())
}

pub(super) fn hdel(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let removed = h::delete(ctx.txn, &argv[1], &argv[2..])?;
    ctx.w().integer(removed as i64);
    Ok(())
}

pub(super) fn hlen(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let len = h::len(ctx.txn, &argv[1])?;
    ctx.w().integer(len as i64);
    Ok(())
}

pub(super) fn hexists(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let exists = h::get(ctx.txn, &argv[1], &argv[2])?.is_some();
    ctx.w().integer(i64::from(exists));
    Ok(())
}

pub(super) fn hstrlen(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let len = h::get(ctx.txn, &argv[1], &argv[2])?.map_or(0, |v| v.len());
    ctx.w().integer(len as i64);
    Ok(())
}

pub(super) fn hincrby(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let delta = int(&argv[3])?;
    let v = h::incr_by(ctx.txn, &argv[1], &argv[2], delta)?;
    ctx.w().integer(v);
    Ok(())
}

pub(super) fn hincrbyfloat(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let delta = args::parse_f64(&argv[3]).ok_or_else(|| CmdError::msg(st::NOT_FLOAT))?;
    if !delta.is_finite() {
        return Err(CmdError::msg("ERR value is NaN or Infinity"));
    }
    let v = h::incr_by_float(ctx.txn, &argv[1], &argv[2], delta)?;
    ctx.w().bulk(&v);
    Ok(())
}

/// The `count` argument of HRANDFIELD, SRANDMEMBER and ZRANDMEMBER, with Redis's range checks
/// (`paired`: with WITHVALUES or WITHSCORES, whose reply is twice as long).
pub(super) fn random_count(arg: &[u8], paired: bool) -> Result<i64, CmdError> {
    let n = int(arg)?;
    let max = if paired { i64::MAX / 2 } else { i64::MAX };
    if n < -max || n > max {
        return Err(CmdError::msg("ERR value is out of range"));
    }
    Ok(n)
}

pub(super) fn hrandfield(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let seed = ctx.seed();
    if argv.len() == 2 {
        let picked = h::random(ctx.txn, &argv[1], 1, seed)?;
        match picked.first() {
            Some((f, _)) => ctx.w().bulk(f),
            None => ctx.w().null(),
        }
        return Ok(());
    }
    let withvalues = match argv.get(3) {
        None => false,
        Some(a) if is(a, "withvalues") && argv.len() == 4 => true,
        Some(_) => return Err(CmdError::msg(SYNTAX)),
    };
    let count = random_count(&argv[2], withvalues)?;
    let picked = h::random(ctx.txn, &argv[1], count, seed)?;
    let version = ctx.session.version;
    let mut w = ctx.w();
    if withvalues && version == shale_proto::resp::Version::Resp3 {
        w.array(picked.len());
        for (f, v) in picked {
            w.array(2);
            w.bulk(&f);
            w.bulk(&v);
        }
    } else {
        w.array(picked.len() * if withvalues { 2 } else { 1 });
        for (f, v) in picked {
            w.bulk(&f);
            if withvalues {
                w.bulk(&v);
            }
        }
    }
    Ok(())
}

pub(super) fn hscan(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let from = resume(ctx, cursor(&argv[2])?)?;
    let o = scan_options(argv, 3, false)?;
    let (found, next) = h::scan(ctx.txn, &argv[1], from.as_deref(), o.count)?;
    let found: Vec<_> = found
        .into_iter()
        .filter(|(f, _)| o.pattern.as_ref().is_none_or(|p| p.matches(f)))
        .collect();
    let next_cursor = next.map_or(0, |k| ctx.shared.cursors.save(k));
    let mut w = ctx.w();
    w.array(2);
    w.bulk(next_cursor.to_string().as_bytes());
    w.array(found.len() * 2);
    for (f, v) in found {
        w.bulk(&f);
        w.bulk(&v);
    }
    Ok(())
}
