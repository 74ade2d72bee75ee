//! Connection and server commands: PING, ECHO, QUIT, HELLO, AUTH, SELECT, CLIENT, COMMAND, INFO,
//! CONFIG, SHUTDOWN, TIME.

use super::args::{self, is};
use super::{glob, CmdError, CmdResult, Ctx, COMMANDS, FAST, READONLY, WRITE};
use crate::config::Appendfsync;
use crate::session::After;
use bytes::Bytes;
use shale_proto::resp::Version;
use std::borrow::Cow;

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
    match args::int(&argv[1])? {
        0 => ctx.w().ok(),
        _ => return Err(CmdError::msg("ERR DB index is out of range")),
    }
    Ok(())
}

fn client_line(ctx: &Ctx<'_, '_>) -> String {
    let text = |b: &Option<Bytes>| {
        b.as_ref()
            .map_or(String::new(), |b| args::printable(b, 128))
    };
    format!(
        "id={} addr={} name={} db=0 resp={} lib-name={} lib-ver={}\n",
        ctx.session.id,
        ctx.session.peer,
        text(&ctx.session.name),
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
    let mut flags: Vec<&[u8]> = Vec::new();
    if c.has(WRITE) {
        flags.push(b"write");
    }
    if c.has(READONLY) {
        flags.push(b"readonly");
    }
    if c.has(FAST) {
        flags.push(b"fast");
    }
    let mut w = ctx.w();
    w.array(10);
    w.bulk(c.name.as_bytes());
    w.integer(i64::from(c.arity));
    w.set(flags.len());
    for f in flags {
        w.simple(f);
    }
    w.integer(i64::from(c.first_key));
    w.integer(i64::from(c.last_key));
    w.integer(i64::from(c.step));
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

/// Every parameter CONFIG GET knows, with its current value.
fn config_params(ctx: &Ctx<'_, '_>) -> Vec<(Cow<'static, str>, String)> {
    let shared = ctx.shared;
    let mut params: Vec<(Cow<'static, str>, String)> = shared
        .config
        .entries()
        .into_iter()
        .filter(|(name, _)| *name != "appendfsync" && *name != "requirepass")
        .map(|(n, v)| (Cow::Borrowed(n), v))
        .collect();
    let fixed = [
        ("appendfsync", shared.store.appendfsync().name().to_string()),
        ("appendonly", "yes".to_string()),
        ("save", String::new()),
        ("databases", "1".to_string()),
        ("timeout", "0".to_string()),
        ("maxmemory", "0".to_string()),
        (
            "requirepass",
            shared.config.requirepass.clone().unwrap_or_default(),
        ),
    ];
    params.extend(fixed.into_iter().map(|(n, v)| (Cow::Borrowed(n), v)));
    params
}

pub(super) fn config(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> CmdResult {
    let sub = &argv[1];
    if is(sub, "get") {
        if argv.len() < 3 {
            return Err(super::wrong_arity("config|get"));
        }
        let params = config_params(ctx);
        let found: Vec<_> = params
            .iter()
            .filter(|(name, _)| {
                argv[2..]
                    .iter()
                    .any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
            })
            .collect();
        let mut w = ctx.w();
        w.map(found.len());
        for (n, v) in found {
            w.bulk(n.as_bytes());
            w.bulk(v.as_bytes());
        }
    } else if is(sub, "set") {
        if argv.len() < 4 || !argv.len().is_multiple_of(2) {
            return Err(super::wrong_arity("config|set"));
        }
        for pair in argv[2..].chunks_exact(2) {
            if !is(&pair[0], "appendfsync") {
                return Err(CmdError::Msg(
                    format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                        args::printable(&pair[0], 64)
                    )
                    .into(),
                ));
            }
            let mode = std::str::from_utf8(&pair[1])
                .ok()
                .and_then(Appendfsync::parse)
                .ok_or_else(|| {
                    CmdError::msg("ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: always, everysec, no")
                })?;
            ctx.shared.store.set_appendfsync(mode);
        }
        ctx.w().ok();
    } else if is(sub, "resetstat") {
        ctx.w().ok();
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR unknown subcommand '{}'. Try CONFIG HELP.",
                args::printable(sub, 64)
            )
            .into(),
        ));
    }
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
