//! The command table: every command's name, arity, flags, key positions and handler.
//!
//! Arity follows Redis: `n > 0` means exactly `n` arguments counting the name, `n < 0` at least
//! `-n`. Key positions tell the executor which keys a command touches, so it can lock their
//! stripes before the batch starts. Handlers parse their arguments, call the store (`store::*`,
//! which owns every type's records and rules) and write their reply into the batch's output;
//! they return `Err` for an error reply, and validate every argument before anything is staged,
//! so an error reply never leaves a half-done command behind.

mod args;
mod cluster;
pub mod config;
pub mod glob;
mod hash;
mod keys;
mod list;
pub mod server;
mod set;
mod sort;
mod strings;
mod zset;

use crate::session::Session;
use crate::shared::Shared;
use crate::store::{self, Txn};
use bytes::{Bytes, BytesMut};
use rustc_hash::FxHashMap;
use shale_proto::resp::{ReplyWriter, Version};
use std::borrow::Cow;
use std::sync::OnceLock;

pub use list::{serve_blocked, BlockOp};

/// The command writes keys: its keys' stripes are locked for the batch.
pub const WRITE: u32 = 1;
/// The command only reads.
pub const READONLY: u32 = 1 << 1;
/// The command may run before `AUTH` on a server with a password.
pub const NO_AUTH: u32 = 1 << 2;
/// The command needs the whole keyspace to itself (FLUSHDB, SWAPDB): it runs in a batch of its
/// own.
pub const EXCLUSIVE: u32 = 1 << 3;
/// The command is about the server or the connection, not keys.
pub const ADMIN: u32 = 1 << 4;
/// Constant-time command (Redis's `fast` flag, shown by COMMAND).
pub const FAST: u32 = 1 << 5;
/// A transaction command (MULTI, EXEC, DISCARD, WATCH, UNWATCH): run by the executor itself,
/// never queued.
pub const TXN: u32 = 1 << 6;
/// The command may block the client (BLPOP, ...): not inside MULTI, where it never blocks.
pub const BLOCKING: u32 = 1 << 7;

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

impl From<store::Error> for CmdError {
    fn from(e: store::Error) -> CmdError {
        match e {
            store::Error::WrongType => CmdError::WrongType,
            store::Error::Reply(line) => CmdError::Msg(line),
            store::Error::Engine(e) => CmdError::Engine(e),
        }
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
    /// The command runs inside EXEC: a blocking command answers at once instead of blocking.
    pub in_exec: bool,
}

impl Ctx<'_, '_> {
    /// A writer for this connection's protocol version.
    pub fn w(&mut self) -> ReplyWriter<'_> {
        ReplyWriter::new(self.out, self.session.version)
    }

    /// A seed for random picks: differs between calls.
    pub fn seed(&self) -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ CALLS.fetch_add(0x9e37_79b9, Ordering::Relaxed)
    }
}

/// A command handler.
pub type Handler = fn(&mut Ctx<'_, '_>, &[Bytes]) -> CmdResult;

/// Where a command's keys are among its arguments.
#[derive(Debug, Clone, Copy)]
pub enum Keys {
    /// None.
    None,
    /// `first..=last` every `step` (`last < 0` counts from the end).
    Range(i32, i32, i32),
    /// A count of keys at `numkeys`, the keys right after it, and `fixed` other key positions
    /// before it (ZUNIONSTORE's destination).
    Counted {
        /// The position of the count.
        numkeys: usize,
        /// A key position before the count (0: none).
        fixed: usize,
    },
    /// Positions found by a function of the arguments (SORT's STORE destination).
    Custom(fn(&[Bytes]) -> Vec<usize>),
}

/// One entry of the table.
pub struct Command {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity (see the module documentation).
    pub arity: i32,
    /// Flags ([`WRITE`], [`READONLY`], ...).
    pub flags: u32,
    /// Key positions.
    pub keys: Keys,
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

    /// Whether the command has flag `flag`.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The key arguments of `argv` (name first). A malformed count names no keys (the handler
    /// then answers with the error).
    pub fn keys<'v>(&self, argv: &'v [Bytes]) -> Vec<&'v Bytes> {
        let mut out = Vec::new();
        self.for_each_key(argv, |k| out.push(k));
        out
    }

    /// Calls `f` with each key argument of `argv`, in order, without allocating for the common
    /// key positions (every call of every batch comes here).
    pub fn for_each_key<'v>(&self, argv: &'v [Bytes], mut f: impl FnMut(&'v Bytes)) {
        match self.keys {
            Keys::None => {}
            Keys::Range(first, last, step) => {
                let last = if last < 0 {
                    argv.len() as i32 + last
                } else {
                    last
                };
                if first <= 0 || last < first {
                    return;
                }
                let end = (last as usize).min(argv.len().saturating_sub(1));
                if let Some(keys) = argv.get(first as usize..=end) {
                    keys.iter().step_by(step.max(1) as usize).for_each(f);
                }
            }
            Keys::Counted { numkeys, fixed } => {
                if fixed > 0 {
                    argv.get(fixed).into_iter().for_each(&mut f);
                }
                let n = argv
                    .get(numkeys)
                    .and_then(|n| store::strings::parse_i64(n))
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(0);
                if let Some(keys) =
                    argv.get(numkeys + 1..numkeys.saturating_add(1).saturating_add(n))
                {
                    keys.iter().for_each(f);
                }
            }
            Keys::Custom(positions) => positions(argv)
                .into_iter()
                .filter_map(|i| argv.get(i))
                .for_each(f),
        }
    }

    /// The flags COMMAND shows.
    pub fn flag_names(&self) -> Vec<&'static [u8]> {
        let mut flags: Vec<&[u8]> = Vec::new();
        if self.has(WRITE) {
            flags.push(b"write");
        }
        if self.has(READONLY) {
            flags.push(b"readonly");
        }
        if self.has(FAST) {
            flags.push(b"fast");
        }
        if self.has(BLOCKING) {
            flags.push(b"blocking");
        }
        flags
    }
}

const fn cmd(name: &'static str, arity: i32, flags: u32, keys: Keys, run: Handler) -> Command {
    Command {
        name,
        arity,
        flags,
        keys,
        run,
    }
}

const NONE: Keys = Keys::None;
const ONE: Keys = Keys::Range(1, 1, 1);
const TWO: Keys = Keys::Range(1, 2, 1);
const ALL: Keys = Keys::Range(1, -1, 1);
const PAIRS: Keys = Keys::Range(1, -1, 2);
const ALL_BUT_LAST: Keys = Keys::Range(1, -2, 1);
const COUNTED: Keys = Keys::Counted {
    numkeys: 1,
    fixed: 0,
};
const COUNTED_AFTER_TIMEOUT: Keys = Keys::Counted {
    numkeys: 2,
    fixed: 0,
};
const STORE_COUNTED: Keys = Keys::Counted {
    numkeys: 2,
    fixed: 1,
};
const W: u32 = WRITE;
const R: u32 = READONLY;
const WF: u32 = WRITE | FAST;
const RF: u32 = READONLY | FAST;
const A: u32 = ADMIN;
const B: u32 = WRITE | BLOCKING;

/// Every command, in the order `COMMAND` lists them.
pub static COMMANDS: &[Command] = &[
    // Connection and server.
    cmd("ping", -1, A | FAST, NONE, server::ping),
    cmd("echo", 2, A | FAST, NONE, server::echo),
    cmd("quit", -1, A | NO_AUTH, NONE, server::quit),
    cmd("reset", 1, TXN | NO_AUTH, NONE, server::transaction),
    cmd("hello", -1, A | NO_AUTH, NONE, server::hello),
    cmd("auth", -2, A | NO_AUTH, NONE, server::auth),
    cmd("select", 2, A, NONE, server::select),
    cmd("client", -2, A, NONE, server::client),
    cmd("command", -1, A, NONE, server::command),
    cmd("info", -1, A, NONE, server::info),
    cmd("config", -2, A, NONE, config::config),
    cmd("function", -2, A, NONE, server::function),
    cmd("debug", -2, A, NONE, server::debug),
    cmd("wait", 3, A, NONE, server::wait),
    cmd("lastsave", 1, A, NONE, server::lastsave),
    cmd("save", 1, A, NONE, server::save),
    cmd("bgsave", -1, A, NONE, server::save),
    cmd("bgrewriteaof", 1, A, NONE, server::save),
    cmd("dbsize", 1, RF, NONE, keys::dbsize),
    cmd("flushdb", -1, W | EXCLUSIVE, NONE, keys::flushdb),
    cmd("flushall", -1, W | EXCLUSIVE, NONE, keys::flushall),
    cmd("swapdb", 3, W | EXCLUSIVE, NONE, keys::swapdb),
    cmd("shutdown", -1, A, NONE, server::shutdown),
    cmd("time", 1, A | FAST, NONE, server::time),
    // Transactions.
    cmd("multi", 1, TXN | FAST, NONE, server::transaction),
    cmd("exec", 1, TXN, NONE, server::transaction),
    cmd("discard", 1, TXN | FAST, NONE, server::transaction),
    cmd("watch", -2, TXN | FAST, ALL, server::transaction),
    cmd("unwatch", 1, TXN | FAST, NONE, server::transaction),
    // Cluster.
    cmd("readonly", 1, A | FAST, NONE, cluster::readonly),
    cmd("readwrite", 1, A | FAST, NONE, cluster::readwrite),
    // Strings.
    cmd("get", 2, RF, ONE, strings::get),
    cmd("set", -3, W, ONE, strings::set),
    cmd("setex", 4, W, ONE, strings::setex),
    cmd("psetex", 4, W, ONE, strings::psetex),
    cmd("getex", -2, WF, ONE, strings::getex),
    cmd("getdel", 2, WF, ONE, strings::getdel),
    cmd("getset", 3, WF, ONE, strings::getset),
    cmd("setnx", 3, WF, ONE, strings::setnx),
    cmd("mget", -2, RF, ALL, strings::mget),
    cmd("mset", -3, W, PAIRS, strings::mset),
    cmd("msetnx", -3, W, PAIRS, strings::msetnx),
    cmd("incr", 2, WF, ONE, strings::incr),
    cmd("incrby", 3, WF, ONE, strings::incrby),
    cmd("decr", 2, WF, ONE, strings::decr),
    cmd("decrby", 3, WF, ONE, strings::decrby),
    cmd("incrbyfloat", 3, WF, ONE, strings::incrbyfloat),
    cmd("append", 3, WF, ONE, strings::append),
    cmd("strlen", 2, RF, ONE, strings::strlen),
    cmd("getrange", 4, R, ONE, strings::getrange),
    cmd("substr", 4, R, ONE, strings::getrange),
    cmd("setrange", 4, W, ONE, strings::setrange),
    cmd("getbit", 3, RF, ONE, strings::getbit),
    cmd("setbit", 4, W, ONE, strings::setbit),
    cmd("bitcount", -2, R, ONE, strings::bitcount),
    cmd("lcs", -3, R, TWO, strings::lcs),
    // Keys.
    cmd("del", -2, W, ALL, keys::del),
    cmd("unlink", -2, WF, ALL, keys::del),
    cmd("exists", -2, RF, ALL, keys::exists),
    cmd("touch", -2, RF, ALL, keys::exists),
    cmd("expire", -3, WF, ONE, keys::expire),
    cmd("pexpire", -3, WF, ONE, keys::pexpire),
    cmd("expireat", -3, WF, ONE, keys::expireat),
    cmd("pexpireat", -3, WF, ONE, keys::pexpireat),
    cmd("expiretime", 2, RF, ONE, keys::expiretime),
    cmd("pexpiretime", 2, RF, ONE, keys::pexpiretime),
    cmd("ttl", 2, RF, ONE, keys::ttl),
    cmd("pttl", 2, RF, ONE, keys::pttl),
    cmd("persist", 2, WF, ONE, keys::persist),
    cmd("type", 2, RF, ONE, keys::type_of),
    cmd("rename", 3, W, TWO, keys::rename),
    cmd("renamenx", 3, WF, TWO, keys::renamenx),
    cmd("move", 3, WF, ONE, keys::move_key),
    cmd("copy", -3, W, TWO, keys::copy),
    cmd("randomkey", 1, R, NONE, keys::randomkey),
    cmd("object", -2, R, Keys::Range(2, 2, 1), keys::object),
    cmd("memory", -2, R, Keys::Range(2, 2, 1), keys::memory),
    cmd("dump", 2, R, ONE, keys::dump),
    cmd("restore", -4, W, ONE, keys::restore),
    cmd("scan", -2, R, NONE, keys::scan),
    cmd("keys", 2, R, NONE, keys::keys),
    cmd("sort", -2, W, Keys::Custom(sort::keys), sort::sort),
    cmd("sort_ro", -2, R, ONE, sort::sort_ro),
    // Hashes.
    cmd("hset", -4, WF, ONE, hash::hset),
    cmd("hmset", -4, WF, ONE, hash::hmset),
    cmd("hsetnx", 4, WF, ONE, hash::hsetnx),
    cmd("hget", 3, RF, ONE, hash::hget),
    cmd("hmget", -3, RF, ONE, hash::hmget),
    cmd("hgetall", 2, R, ONE, hash::hgetall),
    cmd("hkeys", 2, R, ONE, hash::hkeys),
    cmd("hvals", 2, R, ONE, hash::hvals),
    cmd("hdel", -3, WF, ONE, hash::hdel),
    cmd("hlen", 2, RF, ONE, hash::hlen),
    cmd("hexists", 3, RF, ONE, hash::hexists),
    cmd("hstrlen", 3, RF, ONE, hash::hstrlen),
    cmd("hincrby", 4, WF, ONE, hash::hincrby),
    cmd("hincrbyfloat", 4, WF, ONE, hash::hincrbyfloat),
    cmd("hrandfield", -2, R, ONE, hash::hrandfield),
    cmd("hscan", -3, R, ONE, hash::hscan),
    // Sorted sets.
    cmd("zadd", -4, WF, ONE, zset::zadd),
    cmd("zincrby", 4, WF, ONE, zset::zincrby),
    cmd("zrem", -3, WF, ONE, zset::zrem),
    cmd("zcard", 2, RF, ONE, zset::zcard),
    cmd("zscore", 3, RF, ONE, zset::zscore),
    cmd("zmscore", -3, RF, ONE, zset::zmscore),
    cmd("zrange", -4, R, ONE, zset::zrange),
    cmd("zrangestore", -5, W, TWO, zset::zrangestore),
    cmd("zrevrange", -4, R, ONE, zset::zrevrange),
    cmd("zrangebyscore", -4, R, ONE, zset::zrangebyscore),
    cmd("zrevrangebyscore", -4, R, ONE, zset::zrevrangebyscore),
    cmd("zrangebylex", -4, R, ONE, zset::zrangebylex),
    cmd("zrevrangebylex", -4, R, ONE, zset::zrevrangebylex),
    cmd("zrank", 3, RF, ONE, zset::zrank),
    cmd("zrevrank", 3, RF, ONE, zset::zrevrank),
    cmd("zcount", 4, RF, ONE, zset::zcount),
    cmd("zlexcount", 4, RF, ONE, zset::zlexcount),
    cmd("zpopmin", -2, WF, ONE, zset::zpopmin),
    cmd("zpopmax", -2, WF, ONE, zset::zpopmax),
    cmd("bzpopmin", -3, B, ALL_BUT_LAST, zset::bzpopmin),
    cmd("bzpopmax", -3, B, ALL_BUT_LAST, zset::bzpopmax),
    cmd("zmpop", -4, W, COUNTED, zset::zmpop),
    cmd("bzmpop", -5, B, COUNTED_AFTER_TIMEOUT, zset::bzmpop),
    cmd("zremrangebyscore", 4, W, ONE, zset::zremrangebyscore),
    cmd("zremrangebyrank", 4, W, ONE, zset::zremrangebyrank),
    cmd("zremrangebylex", 4, W, ONE, zset::zremrangebylex),
    cmd("zunionstore", -4, W, STORE_COUNTED, zset::zunionstore),
    cmd("zinterstore", -4, W, STORE_COUNTED, zset::zinterstore),
    cmd("zdiffstore", -4, W, STORE_COUNTED, zset::zdiffstore),
    cmd("zunion", -3, R, COUNTED, zset::zunion),
    cmd("zinter", -3, R, COUNTED, zset::zinter),
    cmd("zdiff", -3, R, COUNTED, zset::zdiff),
    cmd("zintercard", -3, R, COUNTED, zset::zintercard),
    cmd("zrandmember", -2, R, ONE, zset::zrandmember),
    cmd("zscan", -3, R, ONE, zset::zscan),
    // Lists.
    cmd("lpush", -3, WF, ONE, list::lpush),
    cmd("rpush", -3, WF, ONE, list::rpush),
    cmd("lpushx", -3, WF, ONE, list::lpushx),
    cmd("rpushx", -3, WF, ONE, list::rpushx),
    cmd("lpop", -2, WF, ONE, list::lpop),
    cmd("rpop", -2, WF, ONE, list::rpop),
    cmd("lrange", 4, R, ONE, list::lrange),
    cmd("llen", 2, RF, ONE, list::llen),
    cmd("lindex", 3, R, ONE, list::lindex),
    cmd("lset", 4, W, ONE, list::lset),
    cmd("linsert", 5, W, ONE, list::linsert),
    cmd("lrem", 4, W, ONE, list::lrem),
    cmd("ltrim", 4, W, ONE, list::ltrim),
    cmd("lpos", -3, R, ONE, list::lpos),
    cmd("lmove", 5, W, TWO, list::lmove),
    cmd("rpoplpush", 3, W, TWO, list::rpoplpush),
    cmd("lmpop", -4, W, COUNTED, list::lmpop),
    cmd("blpop", -3, B, ALL_BUT_LAST, list::blpop),
    cmd("brpop", -3, B, ALL_BUT_LAST, list::brpop),
    cmd("blmove", 6, B, TWO, list::blmove),
    cmd("brpoplpush", 4, B, TWO, list::brpoplpush),
    cmd("blmpop", -5, B, COUNTED_AFTER_TIMEOUT, list::blmpop),
    // Sets.
    cmd("sadd", -3, WF, ONE, set::sadd),
    cmd("srem", -3, WF, ONE, set::srem),
    cmd("smembers", 2, R, ONE, set::smembers),
    cmd("sismember", 3, RF, ONE, set::sismember),
    cmd("smismember", -3, RF, ONE, set::smismember),
    cmd("scard", 2, RF, ONE, set::scard),
    cmd("spop", -2, WF, ONE, set::spop),
    cmd("srandmember", -2, R, ONE, set::srandmember),
    cmd("smove", 4, WF, TWO, set::smove),
    cmd("sinter", -2, R, ALL, set::sinter),
    cmd("sunion", -2, R, ALL, set::sunion),
    cmd("sdiff", -2, R, ALL, set::sdiff),
    cmd("sinterstore", -3, W, ALL, set::sinterstore),
    cmd("sunionstore", -3, W, ALL, set::sunionstore),
    cmd("sdiffstore", -3, W, ALL, set::sdiffstore),
    cmd("sintercard", -3, R, COUNTED, set::sintercard),
    cmd("sscan", -3, R, ONE, set::sscan),
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

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    #[test]
    fn key_positions_follow_the_table() {
        let mset = &COMMANDS[lookup(b"MSET").unwrap()];
        let a = argv(&["mset", "a", "1", "b", "2"]);
        let keys: Vec<_> = mset.keys(&a).into_iter().cloned().collect();
        assert_eq!(keys, vec![Bytes::from("a"), Bytes::from("b")]);
        let ping = &COMMANDS[lookup(b"ping").unwrap()];
        assert!(ping.keys(&a).is_empty());
        let zu = &COMMANDS[lookup(b"zunionstore").unwrap()];
        let a = argv(&["zunionstore", "dst", "2", "x", "y", "WEIGHTS", "1", "2"]);
        let keys: Vec<_> = zu.keys(&a).into_iter().cloned().collect();
        assert_eq!(keys, argv(&["dst", "x", "y"]));
        let blpop = &COMMANDS[lookup(b"blpop").unwrap()];
        let a = argv(&["blpop", "a", "b", "0"]);
        assert_eq!(blpop.keys(&a).len(), 2);
        let bad = argv(&["zunionstore", "dst", "99", "x"]);
        assert_eq!(zu.keys(&bad).len(), 1);
        assert!(COMMANDS.iter().all(|c| c.name.len() <= MAX_NAME_LEN));
    }
}
