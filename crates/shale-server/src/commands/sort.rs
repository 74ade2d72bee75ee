//! SORT and SORT_RO: sorts a list, set or sorted set numerically or (ALPHA) by bytes, by its
//! elements or (BY) by other keys, with LIMIT, ASC/DESC, GET patterns (`#`, `*` substitution,
//! `->field` of a hash) and STORE into a list, as Redis does.

use super::args::{int, is};
use super::{CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::format::Kind;
use crate::store::{hashes, keys as sk, lists, sets, zsets, Txn};
use bytes::Bytes;
use std::cmp::Ordering;

/// The keys SORT touches: the sorted key and a STORE destination.
pub(super) fn keys(argv: &[Bytes]) -> Vec<usize> {
    let mut out = vec![1];
    let mut i = 2;
    while i < argv.len() {
        if is(&argv[i], "store") && i + 1 < argv.len() {
            out.push(i + 1);
            i += 1;
        }
        i += 1;
    }
    out
}

struct Options {
    by: Option<Bytes>,
    limit: Option<(i64, i64)>,
    gets: Vec<Bytes>,
    desc: bool,
    alpha: bool,
    store: Option<Bytes>,
}

fn parse(argv: &[Bytes], readonly: bool) -> Result<Options, CmdError> {
    let mut o = Options {
        by: None,
        limit: None,
        gets: Vec::new(),
        desc: false,
        alpha: false,
        store: None,
    };
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        let left = argv.len() - i - 1;
        if is(a, "asc") {
            o.desc = false;
        } else if is(a, "desc") {
            o.desc = true;
        } else if is(a, "alpha") {
            o.alpha = true;
        } else if is(a, "limit") && left >= 2 {
            o.limit = Some((int(&argv[i + 1])?, int(&argv[i + 2])?));
            i += 2;
        } else if !readonly && is(a, "store") && left >= 1 {
            o.store = Some(argv[i + 1].clone());
            i += 1;
        } else if is(a, "by") && left >= 1 {
            o.by = Some(argv[i + 1].clone());
            i += 1;
        } else if is(a, "get") && left >= 1 {
            o.gets.push(argv[i + 1].clone());
            i += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    Ok(o)
}

/// The value a BY or GET pattern names for `element`: `#` is the element itself; otherwise the
/// first `*` is replaced by it, and `key->field` reads a hash field.
fn lookup(txn: &mut Txn<'_>, pattern: &[u8], element: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    if pattern == b"#" {
        return Ok(Some(element.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    let (key_pattern, field) = match pattern[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|p| star + 1 + p)
    {
        Some(arrow) if arrow + 2 < pattern.len() => {
            (&pattern[..arrow], Some(&pattern[arrow + 2..]))
        }
        _ => (pattern, None),
    };
    let mut key = key_pattern[..star].to_vec();
    key.extend_from_slice(element);
    key.extend_from_slice(&key_pattern[star + 1..]);
    let Some(meta) = sk::lookup(txn, &key)? else {
        return Ok(None);
    };
    match (field, meta.kind) {
        (Some(f), Kind::Hash) => Ok(hashes::get(txn, &key, f)?),
        (None, Kind::String) => Ok(Some(meta.into_string_value())),
        _ => Ok(None),
    }
}

/// The elements of the key to sort, in its own order.
/// A key's type and elements.
type Elements = (Kind, Vec<Vec<u8>>);

fn elements(txn: &mut Txn<'_>, key: &[u8]) -> Result<Option<Elements>, CmdError> {
    let Some(meta) = sk::lookup(txn, key)? else {
        return Ok(None);
    };
    let items = match meta.kind {
        Kind::List => lists::range(txn, key, 0, -1)?,
        Kind::Set => sets::members(txn, key)?.unwrap_or_default(),
        Kind::ZSet => zsets::range_by_rank(txn, key, 0, -1, false)?
            .into_iter()
            .map(|(m, _)| m)
            .collect(),
        _ => return Err(CmdError::WrongType),
    };
    Ok(Some((meta.kind, items)))
}

/// Parses a sort weight as `strtod` would accept the whole of it.
fn weight(v: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(v).ok()?;
    let v: f64 = text.trim_start().parse().ok()?;
    (!v.is_nan()).then_some(v)
}

fn sort_generic(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], readonly: bool) -> CmdResult {
    let o = parse(argv, readonly)?;
    let (kind, mut items) = elements(ctx.txn, &argv[1])?.unwrap_or((Kind::List, Vec::new()));
    // BY a pattern without `*` means "do not sort".
    let mut dontsort = o.by.as_ref().is_some_and(|b| !b.contains(&b'*'));
    let mut alpha = o.alpha;
    if dontsort && kind == Kind::Set && o.store.is_some() {
        // A set has no order of its own: sort it so the stored result is deterministic.
        dontsort = false;
        alpha = true;
    }
    let by = if dontsort { None } else { o.by.clone() };
    if dontsort && o.desc && kind != Kind::Set {
        items.reverse();
    }
    if !dontsort {
        let mut keyed = Vec::with_capacity(items.len());
        for item in items {
            let key = match &by {
                Some(p) => lookup(ctx.txn, p, &item)?,
                None => Some(item.clone()),
            };
            keyed.push((item, key));
        }
        let mut weights = Vec::with_capacity(keyed.len());
        if !alpha {
            for (_, k) in &keyed {
                let w = match k {
                    Some(k) => weight(k).ok_or_else(|| {
                        CmdError::msg("ERR One or more scores can't be converted into double")
                    })?,
                    None => 0.0,
                };
                weights.push(w);
            }
        }
        let mut order: Vec<usize> = (0..keyed.len()).collect();
        order.sort_by(|&a, &b| {
            let cmp = if alpha {
                match (&keyed[a].1, &keyed[b].1) {
                    (Some(x), Some(y)) => x.cmp(y),
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (None, None) => Ordering::Equal,
                }
            } else {
                weights[a]
                    .partial_cmp(&weights[b])
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| keyed[a].0.cmp(&keyed[b].0))
            };
            if o.desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        let mut slots: Vec<Option<Vec<u8>>> = keyed.into_iter().map(|(i, _)| Some(i)).collect();
        items = order
            .into_iter()
            .map(|i| slots[i].take().unwrap_or_default())
            .collect();
    }
    let (start, count) = match o.limit {
        None => (0, items.len()),
        Some((start, count)) => {
            let start = start.max(0) as usize;
            let count = if count < 0 {
                items.len()
            } else {
                count as usize
            };
            (start.min(items.len()), count)
        }
    };
    let window: Vec<Vec<u8>> = items.into_iter().skip(start).take(count).collect();
    let mut output: Vec<Option<Vec<u8>>> = Vec::new();
    for item in &window {
        if o.gets.is_empty() {
            output.push(Some(item.clone()));
        }
        for g in &o.gets {
            output.push(lookup(ctx.txn, g, item)?);
        }
    }
    match &o.store {
        Some(dst) => {
            if let Some(old) = sk::lookup_write(ctx.txn, dst)? {
                sk::delete(ctx.txn, dst, &old)?;
            }
            let values: Vec<Bytes> = output
                .into_iter()
                .map(|v| Bytes::from(v.unwrap_or_default()))
                .collect();
            if !values.is_empty() {
                lists::push(ctx.txn, dst, &values, lists::End::Right, false)?;
            }
            ctx.w().integer(values.len() as i64);
        }
        None => {
            let mut w = ctx.w();
            w.array(output.len());
            for v in output {
                match v {
                    Some(v) => w.bulk(&v),
                    None => w.null(),
                }
            }
        }
    }
    Ok(())
}

pub(super) fn sort(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    sort_generic(ctx, argv, false)
}

pub(super) fn sort_ro(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    sort_generic(ctx, argv, true)
}
