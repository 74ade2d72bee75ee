//! String commands: GET, SET (EX, PX, EXAT, PXAT, KEEPTTL, NX, XX, GET), SETEX, PSETEX, GETEX,
//! GETDEL, GETSET, SETNX, MGET, MSET, MSETNX, INCR/DECR(BY), INCRBYFLOAT, APPEND, STRLEN,
//! GETRANGE, SETRANGE, GETBIT, SETBIT, BITCOUNT, LCS.

use super::args::{self, int, is};
use super::{CmdError, CmdResult, Ctx, SYNTAX};
use crate::store::format::Kind;
use crate::store::keys as sk;
use crate::store::strings::{self as st, Condition, Expiry};
use bytes::Bytes;

/// The error for a bad expire time of command `name`.
fn bad_expire(name: &str) -> CmdError {
    CmdError::Msg(format!("ERR invalid expire time in '{name}' command").into())
}

/// An absolute expiry in ms from an EX/PX/EXAT/PXAT amount (`scale` ms per unit).
fn expiry_at(n: i64, scale: u64, absolute: bool, now: u64, name: &str) -> Result<u64, CmdError> {
    if n <= 0 {
        return Err(bad_expire(name));
    }
    (n as u64)
        .checked_mul(scale)
        .and_then(|ms| {
            if absolute {
                Some(ms)
            } else {
                ms.checked_add(now)
            }
        })
        .filter(|ms| *ms < i64::MAX as u64)
        .ok_or_else(|| bad_expire(name))
}

/// EX/PX/EXAT/PXAT: the unit's scale and whether it is absolute.
fn expiry_unit(a: &[u8]) -> Option<(u64, bool)> {
    if is(a, "ex") {
        Some((1000, false))
    } else if is(a, "px") {
        Some((1, false))
    } else if is(a, "exat") {
        Some((1000, true))
    } else if is(a, "pxat") {
        Some((1, true))
    } else {
        None
    }
}

pub(super) fn get(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match st::get(ctx.txn, &argv[1])? {
        Some(m) => ctx.w().bulk(m.string_value()),
        None => ctx.w().null(),
    }
    Ok(())
}

struct SetOptions {
    condition: Condition,
    get: bool,
    expiry: Expiry,
}

fn parse_set_options(argv: &[Bytes], now: u64) -> Result<SetOptions, CmdError> {
    let mut o = SetOptions {
        condition: Condition::Always,
        get: false,
        expiry: Expiry::None,
    };
    let mut has_expiry = false;
    let mut i = 3;
    while i < argv.len() {
        let a = &argv[i];
        if let Some((scale, absolute)) = expiry_unit(a) {
            if has_expiry || o.expiry == Expiry::Keep {
                return Err(CmdError::msg(SYNTAX));
            }
            let v = argv.get(i + 1).ok_or_else(|| CmdError::msg(SYNTAX))?;
            o.expiry = Expiry::At(expiry_at(int(v)?, scale, absolute, now, "set")?);
            has_expiry = true;
            i += 2;
            continue;
        }
        if is(a, "nx") && o.condition != Condition::IfPresent {
            o.condition = Condition::IfAbsent;
        } else if is(a, "xx") && o.condition != Condition::IfAbsent {
            o.condition = Condition::IfPresent;
        } else if is(a, "get") {
            o.get = true;
        } else if is(a, "keepttl") && !has_expiry {
            o.expiry = Expiry::Keep;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    Ok(o)
}

pub(super) fn set(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let o = parse_set_options(argv, ctx.txn.now_ms())?;
    let outcome = st::set(ctx.txn, &argv[1], &argv[2], o.condition, o.expiry, o.get)?;
    match (o.get, outcome.written, outcome.old) {
        (true, _, Some(old)) => ctx.w().bulk(&old),
        (true, _, None) | (false, false, _) => ctx.w().null(),
        (false, true, _) => ctx.w().ok(),
    }
    Ok(())
}

fn set_with_expiry(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], scale: u64, name: &str) -> CmdResult {
    let at = expiry_at(int(&argv[2])?, scale, false, ctx.txn.now_ms(), name)?;
    st::set(
        ctx.txn,
        &argv[1],
        &argv[3],
        Condition::Always,
        Expiry::At(at),
        false,
    )?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn setex(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_with_expiry(ctx, argv, 1000, "setex")
}

pub(super) fn psetex(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    set_with_expiry(ctx, argv, 1, "psetex")
}

pub(super) fn getex(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let now = ctx.txn.now_ms();
    let mut expiry = Expiry::Keep;
    let mut i = 2;
    while i < argv.len() {
        if let Some((scale, absolute)) = expiry_unit(&argv[i]) {
            let v = argv.get(i + 1).filter(|_| expiry == Expiry::Keep);
            let v = v.ok_or_else(|| CmdError::msg(SYNTAX))?;
            expiry = Expiry::At(expiry_at(int(v)?, scale, absolute, now, "getex")?);
            i += 2;
        } else if is(&argv[i], "persist") && expiry == Expiry::Keep {
            expiry = Expiry::None;
            i += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    match st::get_set_expiry(ctx.txn, &argv[1], expiry)? {
        Some(v) => ctx.w().bulk(&v),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn getdel(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match st::get_delete(ctx.txn, &argv[1])? {
        Some(v) => ctx.w().bulk(&v),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn getset(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let outcome = st::set(
        ctx.txn,
        &argv[1],
        &argv[2],
        Condition::Always,
        Expiry::None,
        true,
    )?;
    match outcome.old {
        Some(v) => ctx.w().bulk(&v),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn setnx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let outcome = st::set(
        ctx.txn,
        &argv[1],
        &argv[2],
        Condition::IfAbsent,
        Expiry::None,
        false,
    )?;
    ctx.w().integer(i64::from(outcome.written));
    Ok(())
}

pub(super) fn mget(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut values = Vec::with_capacity(argv.len() - 1);
    for key in &argv[1..] {
        values.push(sk::lookup(ctx.txn, key)?.filter(|m| m.kind == Kind::String));
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
    st::set_many(ctx.txn, &argv[1..])?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn msetnx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(super::wrong_arity("msetnx"));
    }
    let done = st::set_many_if_absent(ctx.txn, &argv[1..])?;
    ctx.w().integer(i64::from(done));
    Ok(())
}

fn incr_by(ctx: &mut Ctx<'_, '_>, key: &[u8], delta: i64) -> CmdResult {
    let new = st::incr_by(ctx.txn, key, delta)?;
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
    let delta = int(&argv[2])?
        .checked_neg()
        .ok_or_else(|| CmdError::msg("ERR decrement would overflow"))?;
    incr_by(ctx, &argv[1], delta)
}

pub(super) fn incrbyfloat(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    // An infinite increment parses (as in Redis) and then fails as a non-finite result.
    let delta = args::parse_f64(&argv[2]).ok_or_else(|| CmdError::msg(st::NOT_FLOAT))?;
    let v = st::incr_by_float(ctx.txn, &argv[1], delta)?;
    ctx.w().bulk(&v);
    Ok(())
}

pub(super) fn append(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let limit = ctx.shared.config.proto_max_bulk_len;
    let len = st::append(ctx.txn, &argv[1], &argv[2], limit)?;
    ctx.w().integer(len as i64);
    Ok(())
}

pub(super) fn strlen(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let len = st::get(ctx.txn, &argv[1])?.map_or(0, |m| m.string_value().len());
    ctx.w().integer(len as i64);
    Ok(())
}

pub(super) fn getrange(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (start, end) = (int(&argv[2])?, int(&argv[3])?);
    let value = st::get(ctx.txn, &argv[1])?;
    let v = value.as_ref().map_or(&[][..], |m| m.string_value());
    match st::resolve_string_range(start, end, v.len() as u64) {
        Some((first, count)) => ctx.w().bulk(&v[first as usize..(first + count) as usize]),
        None => ctx.w().bulk(b""),
    }
    Ok(())
}

pub(super) fn setrange(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let offset = args::int_at_least(&argv[2], 0, "ERR offset is out of range")?;
    let limit = ctx.shared.config.proto_max_bulk_len;
    let len = st::set_range(ctx.txn, &argv[1], offset as usize, &argv[3], limit)?;
    ctx.w().integer(len as i64);
    Ok(())
}

/// The largest bit offset SETBIT and GETBIT accept (Redis: 4 GiB of bits... of bytes: 2^32 - 1).
const MAX_BIT_OFFSET: i64 = (1 << 32) - 1;

fn bit_offset(arg: &[u8]) -> Result<u64, CmdError> {
    const BAD: &str = "ERR bit offset is not an integer or out of range";
    match args::parse_i64(arg) {
        Some(v) if (0..=MAX_BIT_OFFSET).contains(&v) => Ok(v as u64),
        _ => Err(CmdError::msg(BAD)),
    }
}

pub(super) fn getbit(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let offset = bit_offset(&argv[2])?;
    let on = st::get(ctx.txn, &argv[1])?.is_some_and(|m| st::bit_at(m.string_value(), offset));
    ctx.w().integer(i64::from(on));
    Ok(())
}

pub(super) fn setbit(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let offset = bit_offset(&argv[2])?;
    let on = match &argv[3][..] {
        b"1" => true,
        b"0" => false,
        _ => return Err(CmdError::msg("ERR bit is not an integer or out of range")),
    };
    let limit = ctx.shared.config.proto_max_bulk_len;
    let was = st::set_bit(ctx.txn, &argv[1], offset, on, limit)?;
    ctx.w().integer(i64::from(was));
    Ok(())
}

pub(super) fn bitcount(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let range = match argv.len() {
        2 => None,
        4 | 5 => {
            let bits = match argv.get(4) {
                None => false,
                Some(a) if is(a, "bit") => true,
                Some(a) if is(a, "byte") => false,
                Some(_) => return Err(CmdError::msg(SYNTAX)),
            };
            Some((int(&argv[2])?, int(&argv[3])?, bits))
        }
        _ => return Err(CmdError::msg(SYNTAX)),
    };
    let n = st::get(ctx.txn, &argv[1])?.map_or(0, |m| st::bit_count(m.string_value(), range));
    ctx.w().integer(n as i64);
    Ok(())
}

pub(super) fn lcs(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut values = Vec::with_capacity(2);
    for key in &argv[1..3] {
        match sk::lookup(ctx.txn, key)? {
            Some(m) if m.kind != Kind::String => {
                return Err(CmdError::msg(
                    "ERR The specified keys must contain string values",
                ))
            }
            m => values.push(m.map(|m| m.into_string_value()).unwrap_or_default()),
        }
    }
    let mut o = lcs_table::Options::default();
    let mut i = 3;
    while i < argv.len() {
        let a = &argv[i];
        if is(a, "idx") {
            o.idx = true;
        } else if is(a, "len") {
            o.len = true;
        } else if is(a, "withmatchlen") {
            o.with_match_len = true;
        } else if is(a, "minmatchlen") && i + 1 < argv.len() {
            o.min_match_len = int(&argv[i + 1])?.max(0) as usize;
            i += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    if o.idx && o.len {
        return Err(CmdError::msg(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    let cells = (values[0].len() as u64 + 1).saturating_mul(values[1].len() as u64 + 1);
    if cells.saturating_mul(4) > ctx.shared.config.proto_max_bulk_len as u64 {
        return Err(CmdError::msg(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let result = lcs_table::compute(&values[0], &values[1]);
    let mut w = ctx.w();
    if o.idx {
        let ranges: Vec<_> = result
            .ranges
            .iter()
            .filter(|r| r.len >= o.min_match_len)
            .collect();
        w.map(2);
        w.bulk(b"matches");
        w.array(ranges.len());
        for r in ranges {
            w.array(if o.with_match_len { 3 } else { 2 });
            w.array(2);
            w.integer(r.a_start as i64);
            w.integer((r.a_start + r.len - 1) as i64);
            w.array(2);
            w.integer(r.b_start as i64);
            w.integer((r.b_start + r.len - 1) as i64);
            if o.with_match_len {
                w.integer(r.len as i64);
            }
        }
        w.bulk(b"len");
        w.integer(result.text.len() as i64);
    } else if o.len {
        w.integer(result.text.len() as i64);
    } else {
        w.bulk(&result.text);
    }
    Ok(())
}

/// LCS: the longest common subsequence by dynamic programming, as Redis computes it.
mod lcs_table {
    /// LCS's options.
    #[derive(Default)]
    pub struct Options {
        pub idx: bool,
        pub len: bool,
        pub with_match_len: bool,
        pub min_match_len: usize,
    }

    /// A run of matching bytes.
    pub struct Range {
        pub a_start: usize,
        pub b_start: usize,
        pub len: usize,
    }

    /// The subsequence and its matching runs, last run first (Redis's order).
    pub struct Lcs {
        pub text: Vec<u8>,
        pub ranges: Vec<Range>,
    }

    pub fn compute(a: &[u8], b: &[u8]) -> Lcs {
        let w = b.len() + 1;
        let mut t = vec![0u32; (a.len() + 1) * w];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                t[i * w + j] = if a[i - 1] == b[j - 1] {
                    t[(i - 1) * w + j - 1] + 1
                } else {
                    t[(i - 1) * w + j].max(t[i * w + j - 1])
                };
            }
        }
        let mut text = Vec::new();
        let mut ranges: Vec<Range> = Vec::new();
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            if a[i - 1] == b[j - 1] {
                text.push(a[i - 1]);
                match ranges.last_mut() {
                    Some(r) if r.a_start == i && r.b_start == j => {
                        r.a_start -= 1;
                        r.b_start -= 1;
                        r.len += 1;
                    }
                    _ => ranges.push(Range {
                        a_start: i - 1,
                        b_start: j - 1,
                        len: 1,
                    }),
                }
                i -= 1;
                j -= 1;
            } else if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
        }
        text.reverse();
        Lcs { text, ranges }
    }
}
