//! Keyspace commands: DEL, UNLINK, EXISTS, EXPIRE, PEXPIRE, TTL, PTTL, PERSIST, TYPE, SCAN, KEYS,
//! DBSIZE, FLUSHDB, FLUSHALL.
//!
//! SCAN walks the meta records in engine order (ordered by key hash, then key); its integer
//! cursor names the record to resume at in the server's cursor table
//! ([`crate::shared::Cursors`]).

use super::args::{int, is};
use super::{glob, CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::format::{self, Kind, Meta};
use crate::store::upper_bound;
use bytes::Bytes;
use std::ops::Bound;

/// Default `SCAN ... COUNT`.
pub const DEFAULT_SCAN_COUNT: usize = 10;
/// Keys deleted per engine write by FLUSHDB.
const FLUSH_CHUNK: usize = 10_000;

pub(super) fn del(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for key in &argv[1..] {
        if let Some(meta) = ctx.txn.meta(key)? {
            ctx.txn.delete_key(key, &meta)?;
            n += 1;
        }
    }
    ctx.w().integer(n);
    Ok(())
}

pub(super) fn exists(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for key in &argv[1..] {
        if ctx.txn.meta(key)?.is_some() {
            n += 1;
        }
    }
    ctx.w().integer(n);
    Ok(())
}

/// Rewrites `key`'s meta record with expiry `expire_at` (0: none) and keeps the expiry index
/// in step.
pub(super) fn set_expiry(ctx: &mut Ctx<'_, '_>, key: &[u8], meta: &Meta, expire_at: u64) {
    if meta.expire_at != 0 {
        ctx.txn.delete(&format::expiry_key(meta.expire_at, key));
    }
    ctx.txn
        .put(&format::meta_key(key), &meta.with_expiry(expire_at));
    if expire_at != 0 {
        ctx.txn.put(&format::expiry_key(expire_at, key), b"");
    }
}

fn expire_generic(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], scale: i64, name: &str) -> CmdResult {
    let amount = int(&argv[2])?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &argv[3..] {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            return Err(CmdError::Msg(
                format!("ERR Unsupported option {}", super::args::printable(a, 64)).into(),
            ));
        }
    }
    if (nx && (xx || gt || lt)) || (gt && lt) {
        return Err(CmdError::msg(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    let now = ctx.txn.now_ms() as i64;
    let at = amount
        .checked_mul(scale)
        .and_then(|ms| ms.checked_add(now))
        .ok_or_else(|| {
            CmdError::Msg(format!("ERR invalid expire time in '{name}' command").into())
        })?;
    let key = &argv[1];
    let Some(meta) = ctx.txn.meta(key)? else {
        ctx.w().integer(0);
        return Ok(());
    };
    let current = meta.expire_at;
    // A key without expiry counts as an infinite TTL for GT and LT.
    let skip = (nx && current != 0)
        || (xx && current == 0)
        || (gt && (current == 0 || at <= current as i64))
        || (lt && current != 0 && at >= current as i64);
    if skip {
        ctx.w().integer(0);
        return Ok(());
    }
    if at <= now {
        ctx.txn.delete_key(key, &meta)?;
    } else {
        set_expiry(ctx, key, &meta, at as u64);
    }
    ctx.w().integer(1);
    Ok(())
}

pub(super) fn expire(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 1000, "expire")
}

pub(super) fn pexpire(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 1, "pexpire")
}

fn ttl_ms(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<i64, CmdError> {
    Ok(match ctx.txn.meta(key)? {
        None => -2,
        Some(m) if m.expire_at == 0 => -1,
        Some(m) => m.expire_at.saturating_sub(ctx.txn.now_ms()) as i64,
    })
}

pub(super) fn ttl(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let ms = ttl_ms(ctx, &argv[1])?;
    // Redis rounds the remaining time to the nearest second.
    ctx.w().integer(if ms < 0 { ms } else { (ms + 500) / 1000 });
    Ok(())
}

pub(super) fn pttl(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let ms = ttl_ms(ctx, &argv[1])?;
    ctx.w().integer(ms);
    Ok(())
}

pub(super) fn persist(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match ctx.txn.meta(&argv[1])? {
        Some(meta) if meta.expire_at != 0 => {
            set_expiry(ctx, &argv[1], &meta, 0);
            ctx.w().integer(1);
        }
        _ => ctx.w().integer(0),
    }
    Ok(())
}

pub(super) fn type_of(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let name = ctx.txn.meta(&argv[1])?.map_or("none", |m| m.kind.name());
    ctx.w().simple(name.as_bytes());
    Ok(())
}

/// Visits live keys in engine order (key-hash order) from the meta record `start` (inclusive;
/// `None`: the first); `visit` gets the meta record's engine key, the user key and its type, and
/// returns false to stop.
fn walk(
    ctx: &mut Ctx<'_, '_>,
    start: Option<Vec<u8>>,
    mut visit: impl FnMut(&[u8], &[u8], Kind) -> bool,
) -> Result<(), CmdError> {
    let now = ctx.txn.now_ms();
    ctx.txn.scan(
        Bound::Included(start.unwrap_or_else(|| vec![format::META])),
        upper_bound(&[format::META]),
        |k, v| match Meta::decode(v.to_vec()) {
            Some(m) if m.is_expired(now) => true,
            Some(m) => visit(k, format::user_key(k), m.kind),
            None => true,
        },
    )?;
    Ok(())
}

pub(super) fn keys(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let pattern = argv[1].clone();
    let mut found: Vec<Vec<u8>> = Vec::new();
    let limit = ctx.shared.config.client_output_buffer_limit;
    let mut bytes = 0usize;
    walk(ctx, None, |_, k, _| {
        if glob::matches(&pattern, k) {
            bytes += k.len() + 16;
            found.push(k.to_vec());
        }
        bytes <= limit
    })?;
    let mut w = ctx.w();
    w.array(found.len());
    for k in found {
        w.bulk(&k);
    }
    Ok(())
}

pub(super) fn scan(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let cursor = std::str::from_utf8(&argv[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| CmdError::msg("ERR invalid cursor"))?;
    let (mut pattern, mut count, mut kind) = (None, DEFAULT_SCAN_COUNT, None);
    let mut i = 2;
    while i < argv.len() {
        let v = argv.get(i + 1).ok_or_else(|| CmdError::msg(SYNTAX))?;
        if is(&argv[i], "match") {
            pattern = Some(v.clone());
        } else if is(&argv[i], "count") {
            count = usize::try_from(int(v)?)
                .ok()
                .filter(|c| *c >= 1)
                .ok_or_else(|| CmdError::msg(SYNTAX))?;
        } else if is(&argv[i], "type") {
            kind = Some(String::from_utf8_lossy(v).to_ascii_lowercase());
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 2;
    }
    let start = if cursor == 0 {
        None
    } else {
        Some(
            ctx.shared
                .cursors
                .resume(cursor)
                .ok_or_else(|| CmdError::msg("ERR invalid cursor"))?,
        )
    };
    let mut found = Vec::new();
    let mut seen = 0usize;
    let mut next: Option<Vec<u8>> = None;
    walk(ctx, start, |engine_key, k, t| {
        if seen == count {
            next = Some(engine_key.to_vec());
            return false;
        }
        seen += 1;
        let type_ok = kind.as_deref().is_none_or(|want| want == t.name());
        if type_ok && pattern.as_ref().is_none_or(|p| glob::matches(p, k)) {
            found.push(k.to_vec());
        }
        true
    })?;
    let next_cursor = next.map_or(0, |k| ctx.shared.cursors.save(k));
    let mut w = ctx.w();
    w.array(2);
    w.bulk(next_cursor.to_string().as_bytes());
    w.array(found.len());
    for k in found {
        w.bulk(&k);
    }
    Ok(())
}

pub(super) fn dbsize(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> CmdResult {
    let mut n = 0i64;
    walk(ctx, None, |_, _, _| {
        n += 1;
        true
    })?;
    ctx.w().integer(n);
    Ok(())
}

pub(super) fn flushdb(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    if let Some(a) = argv.get(1) {
        if argv.len() > 2 || !(is(a, "sync") || is(a, "async")) {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    let mut from = Bound::Unbounded;
    loop {
        let mut chunk = Vec::new();
        ctx.txn.scan(from.clone(), Bound::Unbounded, |k, _| {
            chunk.push(k.to_vec());
            chunk.len() < FLUSH_CHUNK
        })?;
        let Some(last) = chunk.last().cloned() else {
            break;
        };
        for k in chunk
            .iter()
            .filter(|k| k.as_slice() != format::GENERATION_KEY)
        {
            ctx.txn.delete(k);
        }
        ctx.txn.commit()?;
        from = Bound::Excluded(last);
    }
    ctx.w().ok();
    Ok(())
}
