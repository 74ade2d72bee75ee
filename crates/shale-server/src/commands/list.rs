//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP (with count), LRANGE, LLEN, LINDEX,
//! LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP, and the blocking BLPOP, BRPOP,
//! BLMOVE, BRPOPLPUSH, BLMPOP. The records are `store::lists`'.
//!
//! A blocking command first tries its keys in order like its non-blocking form. When all are
//! empty it registers the client with the executor's blocking registry (`exec::blocking`) while
//! its stripes are still locked, so a push that commits after it finds the client; the push's
//! batch then serves blocked clients in arrival order with [`serve_blocked`]. Inside EXEC a
//! blocking command never blocks: it answers as if it had timed out.

use super::args::{self, int, is};
use super::{CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::lists::{self as l, End, PosOptions};
use crate::store::zsets;
use crate::store::Txn;
use bytes::{Bytes, BytesMut};
use shale_proto::resp::{ReplyWriter, Version};
use std::time::Duration;

/// What a blocked client waits to do.
#[derive(Debug, Clone)]
pub enum BlockOp {
    /// BLPOP, BRPOP (`count: None`: reply `[key, element]`) and BLMPOP (`Some`: reply
    /// `[key, [elements]]`).
    Pop {
        /// Which end.
        end: End,
        /// BLMPOP's count.
        count: Option<u64>,
    },
    /// BLMOVE, BRPOPLPUSH: pop from `from`, push to `to` of `dst`; reply the element.
    Move {
        /// The destination list.
        dst: Bytes,
        /// The source end.
        from: End,
        /// The destination end.
        to: End,
    },
    /// BZPOPMIN, BZPOPMAX (`count: None`: reply `[key, member, score]`) and BZMPOP (`Some`:
    /// reply `[key, [[member, score]...]]`).
    ZPop {
        /// Highest scores first.
        max: bool,
        /// BZMPOP's count.
        count: Option<u64>,
    },
}

impl BlockOp {
    /// Whether a timeout answers with a null array (the pops) rather than a null bulk (the
    /// moves).
    pub fn null_is_array(&self) -> bool {
        !matches!(self, BlockOp::Move { .. })
    }
}

/// Tries `op` on `key` for a client speaking `version`: when the key has elements, does it,
/// writes the reply to `out` and returns true; false when the key is absent or empty, or (with
/// `lenient`, when serving a blocked client) holds another type.
///
/// # Errors
/// `WRONGTYPE` for a key (or destination) of another type; the engine's error.
pub fn serve_blocked(
    txn: &mut Txn<'_>,
    version: Version,
    op: &BlockOp,
    key: &[u8],
    out: &mut BytesMut,
    lenient: bool,
) -> Result<bool, CmdError> {
    let empty = |m: crate::store::Result<Option<crate::store::format::Meta>>| match m {
        Err(crate::store::Error::WrongType) if lenient => Ok(true),
        Err(e) => Err(CmdError::from(e)),
        Ok(m) => Ok(m.is_none_or(|m| m.len == 0)),
    };
    let mut w = ReplyWriter::new(out, version);
    match op {
        BlockOp::Pop { end, count } => {
            if empty(l::meta(txn, key))? {
                return Ok(false);
            }
            let values = l::pop(txn, key, count.unwrap_or(1), *end)?.unwrap_or_default();
            w.array(2);
            w.bulk(key);
            match count {
                None => w.bulk(values.first().map_or(&[][..], |v| v)),
                Some(_) => {
                    w.array(values.len());
                    for v in &values {
                        w.bulk(v);
                    }
                }
            }
        }
        BlockOp::Move { dst, from, to } => {
            if empty(l::meta(txn, key))? {
                return Ok(false);
            }
            match l::move_element(txn, key, dst, *from, *to)? {
                Some(v) => w.bulk(&v),
                None => return Ok(false),
            }
        }
        BlockOp::ZPop { max, count } => {
            if empty(zsets::meta(txn, key))? {
                return Ok(false);
            }
            let found = zsets::pop(txn, key, count.unwrap_or(1) as usize, *max)?;
            match count {
                None => {
                    w.array(3);
                    w.bulk(key);
                    if let Some((m, s)) = found.first() {
                        w.bulk(m);
                        w.double(*s);
                    }
                }
                Some(_) => {
                    w.array(2);
                    w.bulk(key);
                    w.array(found.len());
                    for (m, s) in &found {
                        w.array(2);
                        w.bulk(m);
                        w.double(*s);
                    }
                }
            }
        }
    }
    Ok(true)
}

/// Runs a blocking command: serves it from the first of `keys` with elements; otherwise answers
/// null inside EXEC, or blocks the client for `timeout` (`None`: forever).
pub(super) fn block_or_null(
    ctx: &mut Ctx<'_, '_>,
    keys: &[Bytes],
    op: BlockOp,
    timeout: Option<Duration>,
) -> CmdResult {
    let version = ctx.session.version;
    for key in keys {
        if serve_blocked(ctx.txn, version, &op, key, ctx.out, false)? {
            return Ok(());
        }
    }
    if ctx.in_exec {
        if op.null_is_array() {
            ctx.w().null_array();
        } else {
            ctx.w().null();
        }
        return Ok(());
    }
    let db = ctx.txn.db();
    ctx.shared
        .blocked
        .block(ctx.shared, ctx.session, db, keys, op, timeout);
    Ok(())
}

fn push(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], end: End, only_existing: bool) -> CmdResult {
    let len = l::push(ctx.txn, &argv[1], &argv[2..], end, only_existing)?;
    ctx.w().integer(len as i64);
    Ok(())
}

pub(super) fn lpush(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    push(ctx, argv, End::Left, false)
}

pub(super) fn rpush(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    push(ctx, argv, End::Right, false)
}

pub(super) fn lpushx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    push(ctx, argv, End::Left, true)
}

pub(super) fn rpushx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    push(ctx, argv, End::Right, true)
}

fn pop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], end: End, name: &str) -> CmdResult {
    if argv.len() > 3 {
        return Err(super::wrong_arity(name));
    }
    let count = match argv.get(2) {
        Some(c) => {
            Some(args::int_at_least(c, 0, "ERR value is out of range, must be positive")? as u64)
        }
        None => None,
    };
    let values = l::pop(ctx.txn, &argv[1], count.unwrap_or(1), end)?;
    let mut w = ctx.w();
    match (values, count) {
        (None, None) => w.null(),
        (None, Some(_)) => w.null_array(),
        (Some(v), None) => w.bulk(v.first().map_or(&[][..], |v| v)),
        (Some(v), Some(_)) => {
            w.array(v.len());
            for e in &v {
                w.bulk(e);
            }
        }
    }
    Ok(())
}

pub(super) fn lpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    pop(ctx, argv, End::Left, "lpop")
}

pub(super) fn rpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    pop(ctx, argv, End::Right, "rpop")
}

pub(super) fn lrange(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (start, stop) = (int(&argv[2])?, int(&argv[3])?);
    let values = l::range(ctx.txn, &argv[1], start, stop)?;
    let mut w = ctx.w();
    w.array(values.len());
    for v in &values {
        w.bulk(v);
    }
    Ok(())
}

pub(super) fn llen(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let n = l::len(ctx.txn, &argv[1])?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn lindex(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let i = int(&argv[2])?;
    match l::index(ctx.txn, &argv[1], i)? {
        Some(v) => ctx.w().bulk(&v),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn lset(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let i = int(&argv[2])?;
    l::set(ctx.txn, &argv[1], i, &argv[3])?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn linsert(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let before = if is(&argv[2], "before") {
        true
    } else if is(&argv[2], "after") {
        false
    } else {
        return Err(CmdError::msg(SYNTAX));
    };
    let n = l::insert(ctx.txn, &argv[1], before, &argv[3], &argv[4])?;
    ctx.w().integer(n);
    Ok(())
}

pub(super) fn lrem(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let count = int(&argv[2])?;
    let n = l::remove(ctx.txn, &argv[1], count, &argv[3])?;
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn ltrim(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (start, stop) = (int(&argv[2])?, int(&argv[3])?);
    l::trim(ctx.txn, &argv[1], start, stop)?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn lpos(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut o = PosOptions {
        rank: 1,
        count: 0,
        maxlen: 0,
    };
    let mut with_count = false;
    let mut i = 3;
    while i < argv.len() {
        let v = argv.get(i + 1).ok_or_else(|| CmdError::msg(SYNTAX))?;
        if is(&argv[i], "rank") {
            o.rank = int(v)?;
            if o.rank == 0 {
                return Err(CmdError::msg("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
        } else if is(&argv[i], "count") {
            o.count = args::int_in_range(v, 0, "ERR COUNT can't be negative")? as u64;
            with_count = true;
        } else if is(&argv[i], "maxlen") {
            o.maxlen = args::int_in_range(v, 0, "ERR MAXLEN can't be negative")? as u64;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 2;
    }
    if !with_count {
        o.count = 1;
    }
    let found = l::positions(ctx.txn, &argv[1], &argv[2], o)?;
    let mut w = ctx.w();
    if with_count {
        w.array(found.len());
        for p in found {
            w.integer(p as i64);
        }
    } else {
        match found.first() {
            Some(&p) => w.integer(p as i64),
            None => w.null(),
        }
    }
    Ok(())
}

fn end_of(arg: &[u8]) -> Result<End, CmdError> {
    if is(arg, "left") {
        Ok(End::Left)
    } else if is(arg, "right") {
        Ok(End::Right)
    } else {
        Err(CmdError::msg(SYNTAX))
    }
}

fn move_command(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], from: End, to: End) -> CmdResult {
    match l::move_element(ctx.txn, &argv[1], &argv[2], from, to)? {
        Some(v) => ctx.w().bulk(&v),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn lmove(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (from, to) = (end_of(&argv[3])?, end_of(&argv[4])?);
    move_command(ctx, argv, from, to)
}

pub(super) fn rpoplpush(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    move_command(ctx, argv, End::Right, End::Left)
}

/// LMPOP's and BLMPOP's keys, LEFT|RIGHT and COUNT, from the numkeys at `at`.
fn parse_mpop(argv: &[Bytes], at: usize) -> Result<(&[Bytes], End, u64), CmdError> {
    let n = args::int_in_range(&argv[at], 1, "ERR numkeys should be greater than 0")? as usize;
    let keys = argv
        .get(at + 1..at + 1 + n)
        .ok_or_else(|| CmdError::msg(SYNTAX))?;
    let mut i = at + 1 + n;
    let end = end_of(argv.get(i).ok_or_else(|| CmdError::msg(SYNTAX))?)?;
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
    Ok((keys, end, count.unwrap_or(1)))
}

pub(super) fn lmpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (keys, end, count) = parse_mpop(argv, 1)?;
    let op = BlockOp::Pop {
        end,
        count: Some(count),
    };
    let version = ctx.session.version;
    for key in keys {
        if serve_blocked(ctx.txn, version, &op, key, ctx.out, false)? {
            return Ok(());
        }
    }
    ctx.w().null_array();
    Ok(())
}

pub(super) fn blmpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let timeout = args::timeout(&argv[1])?;
    let (keys, end, count) = parse_mpop(argv, 2)?;
    let op = BlockOp::Pop {
        end,
        count: Some(count),
    };
    block_or_null(ctx, keys, op, timeout)
}

fn bpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], end: End) -> CmdResult {
    let timeout = args::timeout(&argv[argv.len() - 1])?;
    let op = BlockOp::Pop { end, count: None };
    block_or_null(ctx, &argv[1..argv.len() - 1], op, timeout)
}

pub(super) fn blpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    bpop(ctx, argv, End::Left)
}

pub(super) fn brpop(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    bpop(ctx, argv, End::Right)
}

pub(super) fn blmove(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (from, to) = (end_of(&argv[3])?, end_of(&argv[4])?);
    let timeout = args::timeout(&argv[5])?;
    let op = BlockOp::Move {
        dst: argv[2].clone(),
        from,
        to,
    };
    block_or_null(ctx, &argv[1..2], op, timeout)
}

pub(super) fn brpoplpush(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let timeout = args::timeout(&argv[3])?;
    let op = BlockOp::Move {
        dst: argv[2].clone(),
        from: End::Right,
        to: End::Left,
    };
    block_or_null(ctx, &argv[1..2], op, timeout)
}
