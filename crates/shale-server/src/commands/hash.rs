//! Hash commands: HSET, HMSET, HGET, HMGET, HGETALL, HDEL, HLEN, HEXISTS.
//!
//! Each field is its own engine record under the hash's generation; the meta record keeps the
//! field count, so HLEN reads one record.

use super::{CmdError, CmdResult, Ctx};
use crate::store::format::{self, Kind, Meta};
use crate::store::upper_bound;
use bytes::Bytes;
use std::collections::HashSet;
use std::ops::Bound;

/// The live hash at `key`: `Ok(None)` when absent, `WRONGTYPE` for another type.
fn hash_meta(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    match ctx.txn.meta(key)? {
        Some(m) if m.kind != Kind::Hash => Err(CmdError::WrongType),
        m => Ok(m),
    }
}

/// Sets the field/value pairs of `argv[2..]`; returns how many fields are new.
fn set_fields(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], name: &str) -> Result<i64, CmdError> {
    if !argv.len().is_multiple_of(2) {
        return Err(super::wrong_arity(name));
    }
    let key = &argv[1];
    let meta = hash_meta(ctx, key)?;
    let (generation, len, expire_at, fresh) = match &meta {
        Some(m) => (m.generation, m.len, m.expire_at, false),
        None => (ctx.txn.new_generation(), 0, 0, true),
    };
    let mut added = 0u64;
    let mut seen = HashSet::new();
    for pair in argv[2..].chunks_exact(2) {
        let fk = format::field_key(generation, &pair[0]);
        let new = if fresh {
            seen.insert(pair[0].clone())
        } else {
            ctx.txn.get(&fk)?.is_none()
        };
        added += u64::from(new);
        ctx.txn.put(&fk, &pair[1]);
    }
    ctx.txn.put(
        &format::meta_key(key),
        &format::collection_meta(Kind::Hash, expire_at, generation, len + added),
    );
    Ok(added as i64)
}

pub(super) fn hset(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let added = set_fields(ctx, argv, "hset")?;
    ctx.w().integer(added);
    Ok(())
}

pub(super) fn hmset(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_fields(ctx, argv, "hmset")?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn hget(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let value = match hash_meta(ctx, &argv[1])? {
        Some(m) => ctx.txn.get(&format::field_key(m.generation, &argv[2]))?,
        None => None,
    };
    match value {
        Some(v) => ctx.w().bulk(&v),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn hmget(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let meta = hash_meta(ctx, &argv[1])?;
    let mut values = Vec::with_capacity(argv.len() - 2);
    for field in &argv[2..] {
        values.push(match &meta {
            Some(m) => ctx.txn.get(&format::field_key(m.generation, field))?,
            None => None,
        });
    }
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
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if let Some(m) = hash_meta(ctx, &argv[1])? {
        let prefix = format::collection_prefix(format::HASH_FIELD, m.generation);
        ctx.txn.scan(
            Bound::Included(prefix.clone()),
            upper_bound(&prefix),
            |k, v| {
                pairs.push((k[format::COLLECTION_PREFIX_LEN..].to_vec(), v.to_vec()));
                true
            },
        )?;
    }
    let mut w = ctx.w();
    w.map(pairs.len());
    for (f, v) in pairs {
        w.bulk(&f);
        w.bulk(&v);
    }
    Ok(())
}

pub(super) fn hdel(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let Some(meta) = hash_meta(ctx, key)? else {
        ctx.w().integer(0);
        return Ok(());
    };
    let mut removed = 0u64;
    let mut seen = HashSet::new();
    for field in &argv[2..] {
        let fk = format::field_key(meta.generation, field);
        if seen.insert(field.clone()) && ctx.txn.get(&fk)?.is_some() {
            ctx.txn.delete(&fk);
            removed += 1;
        }
    }
    super::finish_removal(ctx, key, &meta, Kind::Hash, removed)
}

pub(super) fn hlen(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let len = hash_meta(ctx, &argv[1])?.map_or(0, |m| m.len);
    ctx.w().integer(len as i64);
    Ok(())
}

pub(super) fn hexists(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let exists = match hash_meta(ctx, &argv[1])? {
        Some(m) => ctx
            .txn
            .get(&format::field_key(m.generation, &argv[2]))?
            .is_some(),
        None => false,
    };
    ctx.w().integer(i64::from(exists));
    Ok(())
}
