//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE,
//! SINTER, SUNION, SDIFF and their STORE forms, SINTERCARD, SSCAN. The records are
//! `store::sets`'.

use super::args::{self, is};
use super::hash::random_count;
use super::keys::{cursor, resume, scan_options};
use super::{CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::sets::{self as s, Algebra};
use bytes::Bytes;

fn write_members(ctx: &mut Ctx<'_, '_>, members: &[Vec<u8>]) {
    let mut w = ctx.w();
    w.set(members.len());
    for m in members {
        w.bulk(m);
    }
}

pub(super) fn sadd(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let n = s::add(ctx.txn, &argv[1], &argv[2..])?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn srem(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let n = s::remove(ctx.txn, &argv[1], &argv[2..])?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn smembers(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let members = s::members(ctx.txn, &argv[1])?.unwrap_or_default();
    write_members(ctx, &members);
    Ok(())
}

pub(super) fn sismember(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let found = s::contains(ctx.txn, &argv[1], &argv[2..3])?;
    ctx.w().integer(i64::from(found[0]));
    Ok(())
}

pub(super) fn smismember(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let found = s::contains(ctx.txn, &argv[1], &argv[2..])?;
    let mut w = ctx.w();
    w.array(found.len());
    for f in found {
        w.integer(i64::from(f));
    }
    Ok(())
}

pub(super) fn scard(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let n = s::len(ctx.txn, &argv[1])?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn spop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let seed = ctx.seed();
    match argv.len() {
        2 => {
            let popped = s::pop(ctx.txn, &argv[1], 1, seed)?;
            match popped.first() {
                Some(m) => ctx.w().bulk(m),
                None => ctx.w().null(),
            }
        }
        3 => {
            let count =
                args::int_at_least(&argv[2], 0, "ERR value is out of range, must be positive")?;
            let popped = s::pop(ctx.txn, &argv[1], count as u64, seed)?;
            write_members(ctx, &popped);
        }
        _ => return Err(CmdError::msg(SYNTAX)),
    }
    Ok(())
}

pub(super) fn srandmember(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let seed = ctx.seed();
    match argv.len() {
        2 => match s::random(ctx.txn, &argv[1], 1, seed)?.first() {
            Some(m) => ctx.w().bulk(m),
            None => ctx.w().null(),
        },
        3 => {
            let count = random_count(&argv[2], false)?;
            let picked = s::random(ctx.txn, &argv[1], count, seed)?;
            let mut w = ctx.w();
            w.array(picked.len());
            for m in &picked {
                w.bulk(m);
            }
        }
        _ => return Err(CmdError::msg(SYNTAX)),
    }
    Ok(())
}

pub(super) fn smove(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let moved = s::move_member(ctx.txn, &argv[1], &argv[2], &argv[3])?;
    ctx.w().integer(i64::from(moved));
    Ok(())
}

fn algebra(ctx: &mut Ctx<'_, '_>, keys: &[Bytes], op: Algebra) -> Result<Vec<Vec<u8>>, CmdError> {
    let inputs = s::read_inputs(ctx.txn, keys)?;
    Ok(s::combine(op, &inputs, usize::MAX))
}

pub(super) fn sinter(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let result = algebra(ctx, &argv[1..], Algebra::Inter)?;
    write_members(ctx, &result);
    Ok(())
}

pub(super) fn sunion(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let result = algebra(ctx, &argv[1..], Algebra::Union)?;
    write_members(ctx, &result);
    Ok(())
}

pub(super) fn sdiff(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let result = algebra(ctx, &argv[1..], Algebra::Diff)?;
    write_members(ctx, &result);
    Ok(())
}

fn store(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], op: Algebra) -> CmdResult {
    let result = algebra(ctx, &argv[2..], op)?;
    let n = s::store(ctx.txn, &argv[1], &result)?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn sinterstore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    store(ctx, argv, Algebra::Inter)
}

pub(super) fn sunionstore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    store(ctx, argv, Algebra::Union)
}

pub(super) fn sdiffstore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    store(ctx, argv, Algebra::Diff)
}

pub(super) fn sintercard(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let keys = args::counted_keys(argv, 1)?;
    let mut limit = 0usize;
    let mut i = 2 + keys.len();
    while i < argv.len() {
        if is(&argv[i], "limit") && i + 1 < argv.len() {
            limit = args::int_in_range(&argv[i + 1], 0, "ERR LIMIT can't be negative")? as usize;
            i += 2;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    let inputs = s::read_inputs(ctx.txn, keys)?;
    let cap = if limit == 0 { usize::MAX } else { limit };
    let n = s::combine(Algebra::Inter, &inputs, cap).len();
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn sscan(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let from = resume(ctx, cursor(&argv[2])?)?;
    let o = scan_options(argv, 3, false)?;
    let (found, next) = s::scan(ctx.txn, &argv[1], from.as_deref(), o.count)?;
    let found: Vec<_> = found
        .into_iter()
        .filter(|m| o.pattern.as_ref().is_none_or(|p| p.matches(m)))
        .collect();
    let next_cursor = next.map_or(0, |k| ctx.shared.cursors.save(k));
    let mut w = ctx.w();
    w.array(2);
    w.bulk(next_cursor.to_string().as_bytes());
    w.array(found.len());
    for m in found {
        w.bulk(&m);
    }
    Ok(())
}
