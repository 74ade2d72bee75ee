//! The command table: every command's name, arity, flags, key positions and handler.
//!
//! Arity follows Redis: `n > 0` means exactly `n` arguments counting the name, `n < 0` at least
//! `-n`. Key positions (`first`, `last`, `step`; `last < 0` counts from the end) tell the
//! executor which keys a write command touches, so it can lock their stripes before the batch
//! starts. Handlers write their reply into the batch's output and return `Err` for an error
//! reply; they validate every argument before staging a write, so an error reply never leaves a
//! half-done command behind.

mod args;
pub mod glob;
mod hash;
mod keys;
pub mod server;
mod strings;
mod zset;

use crate::session::Session;
use crate::shared::Shared;
use crate::store::Txn;
use bytes::{Bytes, BytesMut};
use rustc_hash::FxHashMap;
use shale_proto::resp::{ReplyWriter, Version};
use std::borrow::Cow;
use std::sync::OnceLock;

/// The command writes keys: its keys' stripes are locked for the batch.
pub const WRITE: u32 = 1;
/// The command only reads.
pub const READONLY: u32 = 1 << 1;
/// The command may run before `AUTH` on a server with a password.
pub const NO_AUTH: u32 = 1 << 2;
/// The command needs the whole keyspace to itself (FLUSHDB): it runs in a batch of its own.
pub const EXCLUSIVE: u32 = 1 << 3;
/// The command is about the server or the connection, not keys.
pub const ADMIN: u32 = 1 << 4;
/// Constant-time command (Redis's `fast` flag, shown by COMMAND).
pub const FAST: u32 = 1 << 5;

/// What a handler returns.
pub type CmdResult = Result<(), CmdError>;

/// An error reply.
#[derive(Debug)]
pub enum CmdError {
    /// The whole error line, code first (`ERR syntax error`).
    Msg(Cow<'static, str>),
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`.
    WrongType,
    /// An engine failure.
    Engine(shale::Error),
}

impl CmdError {
    /// An error from a static line.
    pub fn msg(line: &'static str) -> CmdError {
        CmdError::Msg(Cow::Borrowed(line))
    }

    /// Writes the reply.
    pub fn write(&self, out: &mut BytesMut, version: Version) {
        let mut w = ReplyWriter::new(out, version);
        match self {
            CmdError::Msg(m) => w.error(m.as_bytes()),
            CmdError::WrongType => w.error(WRONGTYPE.as_bytes()),
            CmdError::Engine(e) => w.error(engine_error_text(e).as_bytes()),
        }
    }
}

impl From<shale::Error> for CmdError {
    fn from(e: shale::Error) -> CmdError {
        CmdError::Engine(e)
    }
}

/// The error reply for an engine error: Redis's `-MISCONF` while the disk is full (writes are
/// refused until space returns, when they resume by themselves; reads keep working), `-ERR
/// engine: ...` otherwise.
pub fn engine_error_text(e: &shale::Error) -> String {
    let no_space = matches!(
        e.io_kind(),
        Some(std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
    );
    if no_space && e.kind() == shale::ErrorKind::Io {
        format!(
            "MISCONF shale cannot write to disk, so writes are refused until space returns (they \
             resume by themselves; reads still work): {}",
            e.message()
        )
    } else {
        format!("ERR engine: {e}")
    }
}

/// Redis's text for a type mismatch.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// Redis's text for a malformed option list.
pub const SYNTAX: &str = "ERR syntax error";

/// What a handler works with.
pub struct Ctx<'c, 'a> {
    /// The batch.
    pub txn: &'c mut Txn<'a>,
    /// The connection.
    pub session: &'c mut Session,
    /// Server-wide state.
    pub shared: &'a Shared,
    /// The batch's replies.
    pub out: &'c mut BytesMut,
}

impl Ctx<'_, '_> {
    /// A writer for this connection's protocol version.
    pub fn w(&mut self) -> ReplyWriter<'_> {
        ReplyWriter::new(self.out, self.session.version)
    }
}

/// A command handler.
pub type Handler = fn(&mut Ctx<'_, '_>, &[Bytes]) -> CmdResult;

/// Ends HDEL and ZREM: `removed` fields or members of the collection `key` (described by `meta`)
/// were deleted. Rewrites the length in its meta record, or deletes the collection (and its expiry
/// entry) when nothing is left, and replies with `removed`.
fn finish_removal(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    meta: &crate::store::format::Meta,
    kind: crate::store::format::Kind,
    removed: u64,
) -> CmdResult {
    use crate::store::format;
    let len = meta.len.saturating_sub(removed);
    if len == 0 {
        if meta.expire_at != 0 {
            ctx.txn.delete(&format::expiry_key(meta.expire_at, key));
        }
        ctx.txn.delete(&format::meta_key(key));
    } else if removed > 0 {
        ctx.txn.put(
            &format::meta_key(key),
            &format::collection_meta(kind, meta.expire_at, meta.generation, len),
        );
    }
    ctx.w().integer(removed as i64);
    Ok(())
}

/// One entry of the table.
pub struct Command {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity (see the module documentation).
    pub arity: i32,
    /// Flags ([`WRITE`], [`READONLY`], ...).
    pub flags: u32,
    /// First key argument (0: none).
    pub first_key: i32,
    /// Last key argument (negative: from the end).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// The handler.
    pub run: Handler,
}

impl Command {
    /// Whether `argc` arguments (name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// Whether this call replaces its keys without reading them (a plain `SET`, `MSET`): its
    /// stripes are locked shared instead of exclusively.
    pub fn writes_blindly(&self, argv: &[Bytes]) -> bool {
        match self.name {
            "mset" => true,
            "set" => !argv.iter().skip(3).any(|a| {
                ["nx", "xx", "get", "keepttl"]
                    .iter()
                    .any(|w| a.eq_ignore_ascii_case(w.as_bytes()))
            }),
            _ => false,
        }
    }

    /// Whether the command has flag `flag`.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The key arguments of `argv` (name first).
    pub fn keys<'v>(&self, argv: &'v [Bytes]) -> impl Iterator<Item = &'v Bytes> + 'v {
        let (first, step) = (self.first_key, self.step.max(1));
        let last = if self.last_key < 0 {
            argv.len() as i32 + self.last_key
        } else {
            self.last_key
        };
        let range = if first <= 0 {
            0..0
        } else {
            first as usize..(last.max(first - 1) + 1) as usize
        };
        argv.get(range)
            .unwrap_or_default()
            .iter()
            .step_by(step as usize)
    }
}

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    run: Handler,
) -> Command {
    Command {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
        run,
    }
}

const NONE: (i32, i32, i32) = (0, 0, 0);
const ONE: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
const PAIRS: (i32, i32, i32) = (1, -1, 2);
const W: u32 = WRITE;
const R: u32 = READONLY;
const WF: u32 = WRITE | FAST;
const RF: u32 = READONLY | FAST;
const A: u32 = ADMIN;

/// Every command, in the order `COMMAND` lists them.
pub static COMMANDS: &[Command] = &[
    // Connection and server.
    cmd("ping", -1, A | FAST, NONE, server::ping),
    cmd("echo", 2, A | FAST, NONE, server::echo),
    cmd("quit", -1, A | NO_AUTH, NONE, server::quit),
    cmd("hello", -1, A | NO_AUTH, NONE, server::hello),
    cmd("auth", -2, A | NO_AUTH, NONE, server::auth),
    cmd("select", 2, A, NONE, server::select),
    cmd("client", -2, A, NONE, server::client),
    cmd("command", -1, A, NONE, server::command),
    cmd("info", -1, A, NONE, server::info),
    cmd("config", -2, A, NONE, server::config),
    cmd("dbsize", 1, R, NONE, keys::dbsize),
    cmd("flushdb", -1, W | EXCLUSIVE, NONE, keys::flushdb),
    cmd("flushall", -1, W | EXCLUSIVE, NONE, keys::flushdb),
    cmd("shutdown", -1, A, NONE, server::shutdown),
    cmd("time", 1, A | FAST, NONE, server::time),
    // Strings.
    cmd("get", 2, RF, ONE, strings::get),
    cmd("set", -3, W, ONE, strings::set),
    cmd("getset", 3, WF, ONE, strings::getset),
    cmd("setnx", 3, WF, ONE, strings::setnx),
    cmd("mget", -2, RF, ALL, strings::mget),
    cmd("mset", -3, W, PAIRS, strings::mset),
    cmd("incr", 2, WF, ONE, strings::incr),
    cmd("incrby", 3, WF, ONE, strings::incrby),
    cmd("decr", 2, WF, ONE, strings::decr),
    cmd("decrby", 3, WF, ONE, strings::decrby),
    cmd("append", 3, WF, ONE, strings::append),
    cmd("strlen", 2, RF, ONE, strings::strlen),
    // Keys.
    cmd("del", -2, W, ALL, keys::del),
    cmd("unlink", -2, WF, ALL, keys::del),
    cmd("exists", -2, RF, ALL, keys::exists),
    cmd("expire", -3, WF, ONE, keys::expire),
    cmd("pexpire", -3, WF, ONE, keys::pexpire),
    cmd("ttl", 2, RF, ONE, keys::ttl),
    cmd("pttl", 2, RF, ONE, keys::pttl),
    cmd("persist", 2, WF, ONE, keys::persist),
    cmd("type", 2, RF, ONE, keys::type_of),
    cmd("scan", -2, R, NONE, keys::scan),
    cmd("keys", 2, R, NONE, keys::keys),
    // Hashes.
    cmd("hset", -4, WF, ONE, hash::hset),
    cmd("hmset", -4, WF, ONE, hash::hmset),
    cmd("hget", 3, RF, ONE, hash::hget),
    cmd("hmget", -3, RF, ONE, hash::hmget),
    cmd("hgetall", 2, R, ONE, hash::hgetall),
    cmd("hdel", -3, WF, ONE, hash::hdel),
    cmd("hlen", 2, RF, ONE, hash::hlen),
    cmd("hexists", 3, RF, ONE, hash::hexists),
    // Sorted sets.
    cmd("zadd", -4, WF, ONE, zset::zadd),
    cmd("zrem", -3, WF, ONE, zset::zrem),
    cmd("zrangebyscore", -4, R, ONE, zset::zrangebyscore),
    cmd("zcard", 2, RF, ONE, zset::zcard),
    cmd("zscore", 3, RF, ONE, zset::zscore),
];

/// Longest command name.
const MAX_NAME_LEN: usize = 16;

/// Command names to table indexes. Looked up for every request, so with a cheap hash (the keys
/// are a fixed set of short names, not input anyone can choose to collide).
fn index() -> &'static FxHashMap<&'static [u8], usize> {
    static INDEX: OnceLock<FxHashMap<&'static [u8], usize>> = OnceLock::new();
    INDEX.get_or_init(|| {
        COMMANDS
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_bytes(), i))
            .collect()
    })
}

/// The table index of the command named `name` (any letter case).
pub fn lookup(name: &[u8]) -> Option<usize> {
    if name.len() > MAX_NAME_LEN {
        return None;
    }
    let mut lower = [0u8; MAX_NAME_LEN];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    index().get(&*lower).copied()
}

/// Redis's reply to an unknown command:
/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' `.
pub fn unknown_command(argv: &[Bytes]) -> CmdError {
    let mut line = format!(
        "ERR unknown command '{}', with args beginning with: ",
        args::printable(&argv[0], 128)
    );
    for arg in argv[1..].iter().take(16) {
        line.push_str(&format!("'{}' ", args::printable(arg, 128)));
    }
    CmdError::Msg(Cow::Owned(line))
}

/// Redis's reply to a wrong argument count.
pub fn wrong_arity(name: &str) -> CmdError {
    CmdError::Msg(Cow::Owned(format!(
        "ERR wrong number of arguments for '{name}' command"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_positions_follow_the_table() {
        let mset = &COMMANDS[lookup(b"MSET").unwrap()];
        let argv: Vec<Bytes> = ["mset", "a", "1", "b", "2"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        let keys: Vec<_> = mset.keys(&argv).cloned().collect();
        assert_eq!(keys, vec![Bytes::from("a"), Bytes::from("b")]);
        let ping = &COMMANDS[lookup(b"ping").unwrap()];
        assert_eq!(ping.keys(&argv).count(), 0);
        assert!(COMMANDS.iter().all(|c| c.name.len() <= MAX_NAME_LEN));
    }
}
