//! Keyspace commands: DEL, UNLINK, EXISTS, TOUCH, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT,
//! EXPIRETIME, PEXPIRETIME, TTL, PTTL, PERSIST, TYPE, RENAME, RENAMENX, MOVE, COPY, RANDOMKEY,
//! OBJECT, SCAN, KEYS, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB.
//!
//! SCAN walks the meta records of the current database in engine order (ordered by key hash,
//! then key); its integer cursor names the record to resume at in the server's cursor table
//! ([`crate::shared::Cursors`]).

use super::args::{self, int, is};
use super::{glob, CmdError, CmdResult, Ctx, SYNTAX};
use crate::damage;
use crate::store::format::{Kind, DATABASES};
use crate::store::keys as sk;
use bytes::Bytes;

/// Default `SCAN ... COUNT`.
pub const DEFAULT_SCAN_COUNT: usize = 10;

pub(super) fn del(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for key in &argv[1..] {
        if let Some(meta) = sk::lookup_write(ctx.txn, key)? {
            sk::delete(ctx.txn, key, &meta)?;
            n += 1;
        }
    }
    ctx.w().integer(n);
    Ok(())
}

pub(super) fn exists(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for key in &argv[1..] {
        if sk::lookup(ctx.txn, key)?.is_some() {
            n += 1;
        }
    }
    ctx.w().integer(n);
    Ok(())
}

/// EXPIRE's NX, XX, GT and LT.
#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_expire_flags(argv: &[Bytes]) -> Result<ExpireFlags, CmdError> {
    let mut f = ExpireFlags::default();
    for a in &argv[3..] {
        let flag = if is(a, "nx") {
            &mut f.nx
        } else if is(a, "xx") {
            &mut f.xx
        } else if is(a, "gt") {
            &mut f.gt
        } else if is(a, "lt") {
            &mut f.lt
        } else {
            return Err(CmdError::Msg(
                format!("ERR Unsupported option {}", args::printable(a, 64)).into(),
            ));
        };
        *flag = true;
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(CmdError::msg(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if f.gt && f.lt {
        return Err(CmdError::msg(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(f)
}

/// EXPIRE and its variants: `scale` ms per unit; `absolute` for the *AT forms.
fn expire_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &[Bytes],
    scale: i64,
    absolute: bool,
    name: &str,
) -> CmdResult {
    let f = parse_expire_flags(argv)?;
    let amount = int(&argv[2])?;
    let now = ctx.txn.now_ms() as i64;
    let base = if absolute { 0 } else { now };
    let at = amount
        .checked_mul(scale)
        .and_then(|ms| ms.checked_add(base))
        .ok_or_else(|| {
            CmdError::Msg(format!("ERR invalid expire time in '{name}' command").into())
        })?;
    let key = &argv[1];
    let Some(meta) = sk::lookup_write(ctx.txn, key)? else {
        ctx.w().integer(0);
        return Ok(());
    };
    let current = meta.expire_at as i64;
    let has = meta.expire_at != 0;
    // A key without expiry counts as an infinite TTL for GT and LT.
    let skip = (f.nx && has)
        || (f.xx && !has)
        || (f.gt && (!has || at <= current))
        || (f.lt && has && at >= current);
    if skip {
        ctx.w().integer(0);
        return Ok(());
    }
    if at <= now {
        sk::delete(ctx.txn, key, &meta)?;
    } else {
        sk::set_expiry(ctx.txn, key, &meta, at as u64);
    }
    ctx.w().integer(1);
    Ok(())
}

pub(super) fn expire(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 1000, false, "expire")
}

pub(super) fn pexpire(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 1, false, "pexpire")
}

pub(super) fn expireat(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 1000, true, "expireat")
}

pub(super) fn pexpireat(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 1, true, "pexpireat")
}

/// The key's expiry in ms: -2 absent, -1 none.
fn expire_at(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<i64, CmdError> {
    Ok(match sk::lookup(ctx.txn, key)? {
        None => -2,
        Some(m) if m.expire_at == 0 => -1,
        Some(m) => m.expire_at as i64,
    })
}

pub(super) fn expiretime(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let at = expire_at(ctx, &argv[1])?;
    ctx.w().integer(if at < 0 { at } else { at / 1000 });
    Ok(())
}

pub(super) fn pexpiretime(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let at = expire_at(ctx, &argv[1])?;
    ctx.w().integer(at);
    Ok(())
}

fn ttl_ms(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<i64, CmdError> {
    let at = expire_at(ctx, key)?;
    Ok(if at < 0 {
        at
    } else {
        (at as u64).saturating_sub(ctx.txn.now_ms()) as i64
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
    match sk::lookup_write(ctx.txn, &argv[1])? {
        Some(meta) if meta.expire_at != 0 => {
            sk::set_expiry(ctx.txn, &argv[1], &meta, 0);
            ctx.w().integer(1);
        }
        _ => ctx.w().integer(0),
    }
    Ok(())
}

pub(super) fn type_of(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let name = sk::lookup(ctx.txn, &argv[1])?.map_or("none", |m| m.kind.name());
    ctx.w().simple(name.as_bytes());
    Ok(())
}

pub(super) fn rename(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    sk::rename(ctx.txn, &argv[1], &argv[2], false)?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn renamenx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let done = sk::rename(ctx.txn, &argv[1], &argv[2], true)?;
    ctx.w().integer(i64::from(done));
    Ok(())
}

/// A database index argument, 0 to 15.
pub(super) fn db_index(arg: &[u8]) -> Result<u8, CmdError> {
    let n = int(arg)?;
    u8::try_from(n)
        .ok()
        .filter(|&d| usize::from(d) < DATABASES)
        .ok_or_else(|| CmdError::msg("ERR DB index is out of range"))
}

pub(super) fn move_key(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let to = db_index(&argv[2])?;
    let moved = sk::move_to(ctx.txn, &argv[1], to)?;
    ctx.w().integer(i64::from(moved));
    Ok(())
}

pub(super) fn copy(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let (mut to, mut replace) = (ctx.txn.db(), false);
    let mut i = 3;
    while i < argv.len() {
        if is(&argv[i], "replace") {
            replace = true;
        } else if is(&argv[i], "db") && i + 1 < argv.len() {
            to = db_index(&argv[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    let copied = sk::copy(ctx.txn, &argv[1], &argv[2], to, replace)?;
    ctx.w().integer(i64::from(copied));
    Ok(())
}

pub(super) fn randomkey(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> CmdResult {
    let seed = ctx.seed();
    match sk::random_key(ctx.txn, seed)? {
        Some(k) => ctx.w().bulk(&k),
        None => ctx.w().null(),
    }
    Ok(())
}

/// The encoding OBJECT ENCODING names: Shale keeps one encoding per type, so this is what Redis
/// would show for a value of that type and size.
fn encoding(kind: Kind, value: &[u8], len: u64) -> &'static str {
    match kind {
        Kind::String if args::parse_i64(value).is_some() && value.len() <= 20 => "int",
        Kind::String if value.len() <= 44 => "embstr",
        Kind::String => "raw",
        Kind::List => "quicklist",
        Kind::Hash | Kind::ZSet if len <= 128 => "listpack",
        Kind::Hash => "hashtable",
        Kind::ZSet => "skiplist",
        Kind::Set => "hashtable",
    }
}

pub(super) fn object(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let sub = &argv[1];
    if argv.len() != 3 {
        return Err(CmdError::Msg(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try OBJECT HELP.",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
    let Some(meta) = sk::lookup(ctx.txn, &argv[2])? else {
        ctx.w().null();
        return Ok(());
    };
    if is(sub, "encoding") {
        let e = encoding(meta.kind, meta.string_value(), meta.len);
        ctx.w().bulk(e.as_bytes());
    } else if is(sub, "refcount") {
        ctx.w().integer(1);
    } else if is(sub, "idletime") {
        ctx.w().integer(0);
    } else if is(sub, "freq") {
        return Err(CmdError::msg("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR unknown subcommand '{}'. Try OBJECT HELP.",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
    Ok(())
}

pub(super) fn dump(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match crate::store::dump::dump(ctx.txn, &argv[1])? {
        Some(p) => ctx.w().bulk(&p),
        None => ctx.w().null(),
    }
    Ok(())
}

pub(super) fn restore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    use crate::store::dump::{self, BadPayload};
    let (mut replace, mut absttl) = (false, false);
    let mut i = 4;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        if is(&argv[i], "replace") {
            replace = true;
        } else if is(&argv[i], "absttl") {
            absttl = true;
        } else if is(&argv[i], "idletime") && more >= 1 {
            if int(&argv[i + 1])? < 0 {
                return Err(CmdError::msg("ERR Invalid IDLETIME value, must be >= 0"));
            }
            i += 1;
        } else if is(&argv[i], "freq") && more >= 1 {
            if !(0..=255).contains(&int(&argv[i + 1])?) {
                return Err(CmdError::msg(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            i += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    if !replace && sk::lookup_write(ctx.txn, &argv[1])?.is_some() {
        return Err(CmdError::msg("BUSYKEY Target key name already exists."));
    }
    let ttl = int(&argv[2])?;
    if ttl < 0 {
        return Err(CmdError::msg("ERR Invalid TTL value, must be >= 0"));
    }
    let value = dump::decode(&argv[3]).map_err(|e| match e {
        BadPayload::VersionOrChecksum => {
            CmdError::msg("ERR DUMP payload version or checksum are wrong")
        }
        BadPayload::Format => CmdError::msg("ERR Bad data format"),
    })?;
    let expire_at = match (ttl, absttl) {
        (0, _) => 0,
        (t, true) => t as u64,
        (t, false) => ctx.txn.now_ms().saturating_add(t as u64),
    };
    dump::restore(ctx.txn, &argv[1], value, expire_at, replace)?;
    ctx.w().ok();
    Ok(())
}

/// Bytes MEMORY USAGE counts per element of a collection besides its own bytes: the element's
/// engine key prefix and record overhead.
const ELEMENT_OVERHEAD: u64 = 48;

pub(super) fn memory(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let sub = &argv[1];
    if is(sub, "usage") && argv.len() >= 3 {
        // An estimate from the key's records: its name and meta record, and for a collection
        // the count of elements at a nominal size each (Shale does not read them).
        match sk::lookup(ctx.txn, &argv[2])? {
            Some(m) => {
                let bytes = argv[2].len() as u64
                    + m.string_value().len() as u64
                    + 32
                    + m.len * ELEMENT_OVERHEAD;
                ctx.w().integer(bytes as i64);
            }
            None => ctx.w().null(),
        }
    } else if is(sub, "doctor") {
        ctx.w()
            .bulk(b"Shale keeps its data in its storage engine; nothing to report.");
    } else if is(sub, "purge") {
        ctx.w().ok();
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try MEMORY HELP.",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
    Ok(())
}

pub(super) fn keys(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let pattern = glob::Pattern::new(&argv[1]);
    let mut found: Vec<Vec<u8>> = Vec::new();
    let limit = ctx.shared.config.client_output_buffer_limit;
    let mut bytes = 0usize;
    let skips = sk::walk_with(ctx.txn, None, &damage::SKIP_UNREADABLE, |_, k, _| {
        if pattern.matches(k) {
            bytes += k.len() + 16;
            found.push(k.to_vec());
        }
        bytes <= limit
    })?;
    damage::report(&ctx.shared.metrics, "KEYS", &skips);
    let mut w = ctx.w();
    w.array(found.len());
    for k in found {
        w.bulk(&k);
    }
    Ok(())
}

/// Parses a cursor argument of SCAN, HSCAN, SSCAN, ZSCAN.
pub(super) fn cursor(arg: &[u8]) -> Result<u64, CmdError> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| CmdError::msg("ERR invalid cursor"))
}

/// SCAN's and the collection scans' options.
pub(super) struct ScanOptions {
    pub pattern: Option<glob::Pattern>,
    pub count: usize,
    pub kind: Option<String>,
}

/// Parses `MATCH`, `COUNT` (and for SCAN, `TYPE`) from `argv[from..]`.
pub(super) fn scan_options(
    argv: &[Bytes],
    from: usize,
    allow_type: bool,
) -> Result<ScanOptions, CmdError> {
    let mut o = ScanOptions {
        pattern: None,
        count: DEFAULT_SCAN_COUNT,
        kind: None,
    };
    let mut i = from;
    while i < argv.len() {
        let v = argv.get(i + 1).ok_or_else(|| CmdError::msg(SYNTAX))?;
        if is(&argv[i], "match") {
            o.pattern = Some(glob::Pattern::new(v));
        } else if is(&argv[i], "count") {
            o.count = usize::try_from(int(v)?)
                .ok()
                .filter(|c| *c >= 1)
                .ok_or_else(|| CmdError::msg(SYNTAX))?;
        } else if allow_type && is(&argv[i], "type") {
            o.kind = Some(String::from_utf8_lossy(v).to_ascii_lowercase());
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 2;
    }
    Ok(o)
}

/// Where a scan with cursor `cursor` resumes: `None` for the start.
pub(super) fn resume(ctx: &Ctx<'_, '_>, cursor: u64) -> Result<Option<Vec<u8>>, CmdError> {
    if cursor == 0 {
        return Ok(None);
    }
    ctx.shared
        .cursors
        .resume(cursor)
        .map(Some)
        .ok_or_else(|| CmdError::msg("ERR invalid cursor"))
}

pub(super) fn scan(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let start = resume(ctx, cursor(&argv[1])?)?;
    let o = scan_options(argv, 2, true)?;
    let mut found = Vec::new();
    let mut seen = 0usize;
    let mut next: Option<Vec<u8>> = None;
    let skips = sk::walk_with(
        ctx.txn,
        start,
        &damage::SKIP_UNREADABLE,
        |engine_key, k, m| {
            if seen == o.count {
                next = Some(engine_key.to_vec());
                return false;
            }
            seen += 1;
            let type_ok = o.kind.as_deref().is_none_or(|want| want == m.kind.name());
            if type_ok && o.pattern.as_ref().is_none_or(|p| p.matches(k)) {
                found.push(k.to_vec());
            }
            true
        },
    )?;
    damage::report(&ctx.shared.metrics, "SCAN", &skips);
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
    let n = ctx.txn.db_size(ctx.txn.physical());
    ctx.w().integer(n as i64);
    Ok(())
}

fn flush_mode(argv: &[Bytes]) -> CmdResult {
    if let Some(a) = argv.get(1) {
        if argv.len() > 2 || !(is(a, "sync") || is(a, "async")) {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    Ok(())
}

pub(super) fn flushdb(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv)?;
    sk::flush_db(ctx.txn)?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn flushall(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv)?;
    sk::flush_all(ctx.txn)?;
    ctx.w().ok();
    Ok(())
}

pub(super) fn swapdb(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    if ctx.shared.store.replica().is_some() {
        // A follower maps databases as it did at open; swapping them would send its
        // READONLY reads to the wrong one.
        return Err(CmdError::msg(
            "ERR SWAPDB is not supported on a cluster node",
        ));
    }
    let index = |arg: &[u8], what: &'static str| -> Result<u8, CmdError> {
        let n = args::parse_i64(arg).ok_or_else(|| CmdError::msg(what))?;
        u8::try_from(n)
            .ok()
            .filter(|&d| usize::from(d) < DATABASES)
            .ok_or_else(|| CmdError::msg("ERR DB index is out of range"))
    };
    let a = index(&argv[1], "ERR invalid first DB index")?;
    let b = index(&argv[2], "ERR invalid second DB index")?;
    sk::swap_dbs(ctx.txn, a, b)?;
    for db in [a, b] {
        for key in ctx.shared.blocked.keys_in(db) {
            ctx.txn.ready_in(db, &key);
        }
    }
    ctx.w().ok();
    Ok(())
}
