//! Connection and server commands: PING, ECHO, QUIT, HELLO, AUTH, SELECT, CLIENT, COMMAND, INFO,
//! FUNCTION, DEBUG, WAIT, LASTSAVE, SAVE, SHUTDOWN, TIME (CONFIG is in `config`).

use super::args::{self, is};
use super::{CmdError, CmdResult, Ctx, COMMANDS};
use crate::session::After;
use bytes::Bytes;
use shale_proto::resp::Version;

/// The Redis version Shale answers to (HELLO, INFO): the command set it follows.
pub const REDIS_COMPAT_VERSION: &str = "7.0.0";

pub(super) fn ping(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        1 => ctx.w().simple(b"PONG"),
        2 => ctx.w().bulk(&argv[1]),
        _ => return Err(super::wrong_arity("ping")),
    }
    Ok(())
}

pub(super) fn echo(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    ctx.w().bulk(&argv[1]);
    Ok(())
}

pub(super) fn quit(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> CmdResult {
    ctx.session.after = After::Close;
    ctx.w().ok();
    Ok(())
}

fn check_password(ctx: &mut Ctx<'_, '_>, user: Option<&[u8]>, pass: &[u8]) -> CmdResult {
    let Some(expected) = ctx.shared.config.requirepass.as_deref() else {
        return Err(CmdError::msg("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
    };
    let user_ok = user.is_none_or(|u| u == b"default");
    if user_ok && pass == expected.as_bytes() {
        ctx.session.authenticated = true;
        Ok(())
    } else {
        ctx.session.auth_failures = ctx.session.auth_failures.saturating_add(1);
        crate::metrics::add(&ctx.shared.metrics.auth_failures, 1);
        Err(CmdError::msg(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

pub(super) fn auth(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        2 => check_password(ctx, None, &argv[1])?,
        3 => check_password(ctx, Some(&argv[1]), &argv[2])?,
        _ => return Err(CmdError::msg(super::SYNTAX)),
    }
    ctx.w().ok();
    Ok(())
}

pub(super) fn hello(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let mut version = ctx.session.version;
    if let Some(v) = argv.get(1) {
        let n = args::parse_i64(v).ok_or_else(|| {
            CmdError::msg("ERR Protocol version is not an integer or out of range")
        })?;
        version = Version::from_protover(n)
            .ok_or_else(|| CmdError::msg("NOPROTO unsupported protocol version"))?;
    }
    let mut i = 2;
    let mut name = None;
    while i < argv.len() {
        if is(&argv[i], "auth") && i + 2 < argv.len() {
            check_password(ctx, Some(&argv[i + 1]), &argv[i + 2])?;
            i += 3;
        } else if is(&argv[i], "setname") && i + 1 < argv.len() {
            name = Some(argv[i + 1].clone());
            i += 2;
        } else {
            return Err(CmdError::Msg(
                format!(
                    "ERR Syntax error in HELLO option '{}'",
                    args::printable(&argv[i], 64)
                )
                .into(),
            ));
        }
    }
    if !ctx.session.authenticated {
        return Err(CmdError::msg("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if name.is_some() {
        ctx.session.name = name;
    }
    ctx.session.version = version;
    let id = ctx.session.id as i64;
    let mut w = ctx.w();
    w.map(7);
    w.bulk(b"server");
    w.bulk(b"redis");
    w.bulk(b"version");
    w.bulk(REDIS_COMPAT_VERSION.as_bytes());
    w.bulk(b"proto");
    w.integer(version.number());
    w.bulk(b"id");
    w.integer(id);
    w.bulk(b"mode");
    w.bulk(b"standalone");
    w.bulk(b"role");
    w.bulk(b"master");
    w.bulk(b"modules");
    w.array(0);
    Ok(())
}

pub(super) fn select(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let db = super::keys::db_index(&argv[1])?;
    ctx.session.db = db;
    ctx.txn.select(db);
    ctx.w().ok();
    Ok(())
}

/// The handler of MULTI, EXEC, DISCARD, WATCH, UNWATCH and RESET in the table: the executor runs
/// them itself, so this is never reached.
pub(super) fn transaction(_ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    Err(CmdError::Msg(
        format!(
            "ERR '{}' is run by the executor",
            args::printable(&argv[0], 32)
        )
        .into(),
    ))
}

pub(super) fn function(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let sub = &argv[1];
    if is(sub, "flush") {
        match argv.get(2) {
            None => {}
            Some(m) if argv.len() == 3 && (is(m, "sync") || is(m, "async")) => {}
            Some(_) => return Err(CmdError::msg(super::SYNTAX)),
        }
        // Shale runs no functions: there is nothing to flush.
        ctx.w().ok();
    } else if is(sub, "list") {
        ctx.w().array(0);
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR unknown subcommand '{}'. Shale has no functions.",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
    Ok(())
}

pub(super) fn debug(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let sub = &argv[1];
    if is(sub, "set-active-expire") && argv.len() == 3 {
        let on = args::int(&argv[2])? != 0;
        ctx.shared.store.set_active_expire(on);
        ctx.w().ok();
    } else if is(sub, "sleep") && argv.len() == 3 {
        let secs = args::parse_f64(&argv[2])
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| CmdError::msg(args::NOT_FLOAT))?;
        std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(60.0)));
        ctx.w().ok();
    } else if is(sub, "quicklist-packed-threshold") || is(sub, "listpack") {
        ctx.w().ok();
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR DEBUG {} is not supported by Shale",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
    Ok(())
}

pub(super) fn wait(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    args::int(&argv[1])?;
    args::int(&argv[2])?;
    // No replicas: none acknowledged.
    ctx.w().integer(0);
    Ok(())
}

pub(super) fn lastsave(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> CmdResult {
    let t = ctx
        .shared
        .last_sync
        .load(std::sync::atomic::Ordering::Relaxed);
    ctx.w().integer(t as i64);
    Ok(())
}

pub(super) fn save(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    // Every write is in the WAL already; a save syncs it.
    ctx.shared.store.db().sync_wal()?;
    if is(&argv[0], "bgsave") {
        ctx.w().simple(b"Background saving started");
    } else if is(&argv[0], "bgrewriteaof") {
        ctx.w()
            .simple(b"Background append only file rewriting started");
    } else {
        ctx.w().ok();
    }
    Ok(())
}

fn client_line(ctx: &Ctx<'_, '_>) -> String {
    let text = |b: &Option<Bytes>| {
        b.as_ref()
            .map_or(String::new(), |b| args::printable(b, 128))
    };
    format!(
        "id={} addr={} name={} db={} resp={} lib-name={} lib-ver={}\n",
        ctx.session.id,
        ctx.session.peer,
        text(&ctx.session.name),
        ctx.session.db,
        ctx.session.version.number(),
        text(&ctx.session.lib_name),
        text(&ctx.session.lib_ver),
    )
}

fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|b| (b'!'..=b'~').contains(b))
}

pub(super) fn client(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let sub = &argv[1];
    let arity = |n: usize| {
        if argv.len() == n {
            Ok(())
        } else {
            Err(CmdError::Msg(
                format!(
                    "ERR wrong number of arguments for 'client|{}' command",
                    args::printable(sub, 32).to_ascii_lowercase()
                )
                .into(),
            ))
        }
    };
    if is(sub, "setname") {
        arity(3)?;
        if !valid_name(&argv[2]) {
            return Err(CmdError::msg(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            ));
        }
        ctx.session.name = (!argv[2].is_empty()).then(|| argv[2].clone());
        ctx.w().ok();
    } else if is(sub, "getname") {
        arity(2)?;
        match ctx.session.name.clone() {
            Some(n) => ctx.w().bulk(&n),
            None => ctx.w().null(),
        }
    } else if is(sub, "setinfo") {
        arity(4)?;
        if !valid_name(&argv[3]) {
            return Err(CmdError::msg(
                "ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.",
            ));
        }
        if is(&argv[2], "lib-name") {
            ctx.session.lib_name = Some(argv[3].clone());
        } else if is(&argv[2], "lib-ver") {
            ctx.session.lib_ver = Some(argv[3].clone());
        } else {
            return Err(CmdError::Msg(
                format!(
                    "ERR Unrecognized option '{}'",
                    args::printable(&argv[2], 64)
                )
                .into(),
            ));
        }
        ctx.w().ok();
    } else if is(sub, "id") {
        arity(2)?;
        let id = ctx.session.id as i64;
        ctx.w().integer(id);
    } else if is(sub, "info") || is(sub, "list") {
        let line = client_line(ctx);
        ctx.w().bulk(line.as_bytes());
    } else if is(sub, "unblock") {
        if argv.len() != 3 && argv.len() != 4 {
            return Err(CmdError::msg(super::SYNTAX));
        }
        let id = args::parse_i64(&argv[2]).ok_or_else(|| CmdError::msg(args::NOT_INTEGER))? as u64;
        let error = match argv.get(3) {
            None => false,
            Some(m) if is(m, "timeout") => false,
            Some(m) if is(m, "error") => true,
            Some(_) => {
                return Err(CmdError::msg(
                    "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                ))
            }
        };
        let shared = ctx.shared;
        let done = shared.blocked.unblock(shared, id, error);
        ctx.w().integer(i64::from(done));
    } else if is(sub, "no-evict") || is(sub, "no-touch") {
        arity(3)?;
        ctx.w().ok();
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
    Ok(())
}

fn command_info(ctx: &mut Ctx<'_, '_>, index: usize) {
    let c = &COMMANDS[index];
    let flags = c.flag_names();
    let (first, last, step) = match c.keys {
        super::Keys::None => (0, 0, 0),
        super::Keys::Range(f, l, s) => (f, l, s),
        super::Keys::Counted { .. } | super::Keys::Custom(_) => (0, 0, 0),
    };
    let mut w = ctx.w();
    w.array(10);
    w.bulk(c.name.as_bytes());
    w.integer(i64::from(c.arity));
    w.set(flags.len());
    for f in flags {
        w.simple(f);
    }
    w.integer(i64::from(first));
    w.integer(i64::from(last));
    w.integer(i64::from(step));
    for _ in 0..4 {
        w.array(0);
    }
}

pub(super) fn command(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let Some(sub) = argv.get(1) else {
        ctx.w().array(COMMANDS.len());
        for i in 0..COMMANDS.len() {
            command_info(ctx, i);
        }
        return Ok(());
    };
    if is(sub, "count") {
        ctx.w().integer(COMMANDS.len() as i64);
    } else if is(sub, "docs") {
        // Shale keeps no command documentation; clients treat an empty reply as "no hints".
        ctx.w().map(0);
    } else if is(sub, "info") {
        ctx.w().array(argv.len() - 2);
        for name in &argv[2..] {
            match super::lookup(name) {
                Some(i) => command_info(ctx, i),
                None => ctx.w().null_array(),
            }
        }
    } else if is(sub, "list") {
        let mut w = ctx.w();
        w.array(COMMANDS.len());
        for c in COMMANDS {
            w.bulk(c.name.as_bytes());
        }
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
    Ok(())
}

pub(super) fn info(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let sections: Vec<String> = argv[1..]
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let text = crate::info::render(ctx.shared, ctx.session, &sections);
    ctx.w().verbatim(b"txt", text.as_bytes());
    Ok(())
}

pub(super) fn shutdown(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    for a in &argv[1..] {
        if !["nosave", "save", "now", "force"].iter().any(|w| is(a, w)) {
            return Err(CmdError::msg(super::SYNTAX));
        }
    }
    // As in Redis, a successful SHUTDOWN sends no reply: the connection just closes.
    ctx.session.after = After::Shutdown;
    Ok(())
}

pub(super) fn time(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut w = ctx.w();
    w.array(2);
    w.bulk(now.as_secs().to_string().as_bytes());
    w.bulk(now.subsec_micros().to_string().as_bytes());
    Ok(())
}
