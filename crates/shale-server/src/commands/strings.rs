//! String commands: GET, SET (EX, PX, EXAT, PXAT, KEEPTTL, NX, XX, GET), GETSET, SETNX, MGET,
//! MSET, INCR/DECR(BY), APPEND, STRLEN.
//!
//! A plain `SET` stages its write without reading the key first: the meta record it writes
//! replaces whatever was there (a collection's fields become unreachable garbage under their old
//! generation, see `store::format`).

use super::args::{self, int, is};
use super::{CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::format::{self, Kind, Meta};
use bytes::Bytes;

/// The live string at `key`: `Ok(None)` when absent, `WRONGTYPE` for another type.
pub(super) fn string_meta(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    match ctx.txn.meta(key)? {
        Some(m) if m.kind != Kind::String => Err(CmdError::WrongType),
        m => Ok(m),
    }
}

/// Stages `key = value` with expiry `expire_at` (0: none).
pub(super) fn put_string(ctx: &mut Ctx<'_, '_>, key: &[u8], value: &[u8], expire_at: u64) {
    ctx.txn.put(
        &format::meta_key(key),
        &format::string_meta(value, expire_at),
    );
    if expire_at != 0 {
        ctx.txn.put(&format::expiry_key(expire_at, key), b"");
    }
}

pub(super) fn get(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match string_meta(ctx, &argv[1])? {
        Some(m) => ctx.w().bulk(m.string_value()),
        None => ctx.w().null(),
    }
    Ok(())
}

#[derive(Default)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    expire_at: u64,
}

fn parse_set_options(argv: &[Bytes], now: u64) -> Result<SetOptions, CmdError> {
    let mut o = SetOptions::default();
    let mut has_expiry = false;
    let mut i = 3;
    while i < argv.len() {
        let a = &argv[i];
        let unit = if is(a, "ex") {
            Some((1000, false))
        } else if is(a, "px") {
            Some((1, false))
        } else if is(a, "exat") {
            Some((1000, true))
        } else if is(a, "pxat") {
            Some((1, true))
        } else {
            None
        };
        if let Some((scale, absolute)) = unit {
            if has_expiry || o.keepttl {
                return Err(CmdError::msg(SYNTAX));
            }
            let v = argv.get(i + 1).ok_or_else(|| CmdError::msg(SYNTAX))?;
            let n = int(v)?;
            if n <= 0 {
                return Err(CmdError::msg("ERR invalid expire time in 'set' command"));
            }
            let ms = (n as u64)
                .checked_mul(scale)
                .and_then(|ms| {
                    if absolute {
                        Some(ms)
                    } else {
                        ms.checked_add(now)
                    }
                })
                .filter(|ms| *ms < i64::MAX as u64)
                .ok_or_else(|| CmdError::msg("ERR invalid expire time in 'set' command"))?;
            o.expire_at = ms;
            has_expiry = true;
            i += 2;
            continue;
        }
        if is(a, "nx") && !o.xx {
            o.nx = true;
        } else if is(a, "xx") && !o.nx {
            o.xx = true;
        } else if is(a, "get") {
            o.get = true;
        } else if is(a, "keepttl") && !has_expiry {
            o.keepttl = true;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    Ok(o)
}

pub(super) fn set(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (key, value) = (&argv[1], &argv[2]);
    if argv.len() == 3 {
        put_string(ctx, key, value, 0);
        ctx.w().ok();
        return Ok(());
    }
    let o = parse_set_options(argv, ctx.txn.now_ms())?;
    let old = if o.get {
        string_meta(ctx, key)?
    } else if o.nx || o.xx || o.keepttl {
        ctx.txn.meta(key)?
    } else {
        None
    };
    let exists = old.is_some();
    if (o.nx && exists) || (o.xx && !exists) {
        match (o.get, old) {
            (true, Some(m)) => ctx.w().bulk(m.string_value()),
            _ => ctx.w().null(),
        }
        return Ok(());
    }
    let expire_at = match (&old, o.keepttl) {
        (Some(m), true) => m.expire_at,
        _ => o.expire_at,
    };
    put_string(ctx, key, value, expire_at);
    match (o.get, old) {
        (true, Some(m)) => ctx.w().bulk(m.string_value()),
        (true, None) => ctx.w().null(),
        (false, _) => ctx.w().ok(),
    }
    Ok(())
}

pub(super) fn getset(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let old = string_meta(ctx, &argv[1])?;
    put_string(ctx, &argv[1], &argv[2], 0);
    match old {
        Some(m) => ctx.w().bulk(m.string_value()),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn setnx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    if ctx.txn.meta(&argv[1])?.is_some() {
        ctx.w().integer(0);
    } else {
        put_string(ctx, &argv[1], &argv[2], 0);
        ctx.w().integer(1);
    }
    Ok(())
}

pub(super) fn mget(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut values = Vec::with_capacity(argv.len() - 1);
    for key in &argv[1..] {
        values.push(ctx.txn.meta(key)?.filter(|m| m.kind == Kind::String));
    }
    let mut w = ctx.w();
    w.array(values.len());
    for v in values {
        match v {
            Some(m) => w.bulk(m.string_value()),
            None => w.null(),
        }
    }
    Ok(())
}

pub(super) fn mset(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(super::wrong_arity("mset"));
    }
    for pair in argv[1..].chunks_exact(2) {
        put_string(ctx, &pair[0], &pair[1], 0);
    }
    ctx.w().ok();
    Ok(())
}

fn incr_by(ctx: &mut Ctx<'_, '_>, key: &[u8], delta: i64) -> CmdResult {
    let old = string_meta(ctx, key)?;
    let (current, expire_at) = match &old {
        Some(m) => (
            args::parse_i64(m.string_value()).ok_or_else(|| CmdError::msg(args::NOT_INTEGER))?,
            m.expire_at,
        ),
        None => (0, 0),
    };
    let new = current
        .checked_add(delta)
        .ok_or_else(|| CmdError::msg("ERR increment or decrement would overflow"))?;
    ctx.txn.put(
        &format::meta_key(key),
        &format::string_meta(&args::int_bytes(new), expire_at),
    );
    ctx.w().integer(new);
    Ok(())
}

pub(super) fn incr(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    incr_by(ctx, &argv[1], 1)
}

pub(super) fn decr(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    incr_by(ctx, &argv[1], -1)
}

pub(super) fn incrby(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let delta = int(&argv[2])?;
    incr_by(ctx, &argv[1], delta)
}

pub(super) fn decrby(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let delta = int(&argv[2])?;
    let delta = delta
        .checked_neg()
        .ok_or_else(|| CmdError::msg("ERR decrement would overflow"))?;
    incr_by(ctx, &argv[1], delta)
}

pub(super) fn append(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let old = string_meta(ctx, key)?;
    let limit = ctx.shared.config.proto_max_bulk_len;
    let (mut value, expire_at) = match old {
        Some(m) => {
            let at = m.expire_at;
            (m.into_string_value(), at)
        }
        None => (Vec::new(), 0),
    };
    if value.len().saturating_add(argv[2].len()) > limit {
        return Err(CmdError::msg(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    value.extend_from_slice(&argv[2]);
    ctx.txn.put(
        &format::meta_key(key),
        &format::string_meta(&value, expire_at),
    );
    ctx.w().integer(value.len() as i64);
    Ok(())
}

pub(super) fn strlen(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let len = string_meta(ctx, &argv[1])?.map_or(0, |m| m.string_value().len());
    ctx.w().integer(len as i64);
    Ok(())
}
