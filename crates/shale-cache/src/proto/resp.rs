//! RESP (the Redis protocol) for the cache: the string subset, GET, SET (EX, PX, EXAT, PXAT, NX,
//! XX), DEL, MGET, MSET, EXISTS, EXPIRE, PEXPIRE, TTL, PTTL, INCR, DECR, INCRBY, DECRBY, FLUSHALL,
//! FLUSHDB, INFO, DBSIZE, PING, ECHO, plus what clients send on connecting (SELECT 0, CLIENT,
//! COMMAND, CONFIG GET, HELLO) and QUIT. Replies are RESP2 until the client sends `HELLO 3`, RESP3
//! from then on (what redis-py 8 and other RESP3 clients send first on every connection).
//!
//! Error texts are Redis's, so clients that match on them behave as with Redis.

use std::collections::VecDeque;
use std::fmt::Write as _;

use bytes::{Bytes, BytesMut};
use shale_proto::resp::{Limits, ReplyWriter, Request, RequestDecoder, Version};

use super::{Output, Parsed, Session, MAX_REQUESTS_PER_ROUND};
use crate::cache::{StoreError, Worker};
use crate::item::{ItemRef, NEVER};
use crate::op::{IncrStyle, OpId, Outcome, SetMode};
use crate::stats::Stats;

const OOM: &[u8] = b"OOM command not allowed when used memory > 'maxmemory'.";
const NOT_INTEGER: &[u8] = b"ERR value is not an integer or out of range";
const SYNTAX: &[u8] = b"ERR syntax error";
const TOO_LARGE: &[u8] = b"ERR string exceeds maximum allowed size (the cache's largest item)";

/// A request waiting for its reply.
#[derive(Debug)]
enum Pending {
    Get(OpId),
    /// SET: OK, or a null reply when NX/XX refused it.
    Set(OpId),
    /// DEL, EXISTS: how many of the ops found their key.
    Count {
        first: OpId,
        count: u32,
        exists: bool,
    },
    MGet {
        first: OpId,
        count: u32,
    },
    /// MSET: OK unless a store failed.
    MSet {
        first: OpId,
        count: u32,
    },
    /// EXPIRE and friends: 1 if the key was there.
    Expire(OpId),
    Ttl {
        id: OpId,
        millis: bool,
    },
    Incr(OpId),
    Flush(OpId),
    DbSize,
    Info,
    Ok,
    Error(&'static [u8]),
    OwnedError(String),
    Simple(&'static [u8]),
    Bulk(Bytes),
    EmptyArray,
    EmptyMap,
    /// HELLO: switches to the version (if any) before its own reply.
    Hello(Option<Version>),
}

/// A RESP connection.
#[derive(Debug)]
pub(crate) struct RespSession {
    decoder: RequestDecoder,
    backlog: VecDeque<Request>,
    pending: Vec<Pending>,
    closing: bool,
    /// The version replies are written in (what the last answered HELLO chose).
    version: Version,
}

impl Default for RespSession {
    fn default() -> Self {
        RespSession {
            decoder: RequestDecoder::new(Limits {
                max_bulk_len: 64 << 20,
                max_multibulk_len: 1 << 20,
                max_request_len: 256 << 20,
                ..Limits::default()
            }),
            backlog: VecDeque::new(),
            pending: Vec::new(),
            closing: false,
            version: Version::Resp2,
        }
    }
}

fn upper(name: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    if name.len() <= 16 {
        for (o, b) in out.iter_mut().zip(name) {
            *o = b.to_ascii_uppercase();
        }
    }
    out
}

fn is(name: &[u8; 16], what: &[u8]) -> bool {
    what.len() <= 16 && name[..what.len()] == *what && name[what.len()..].iter().all(|&b| b == 0)
}

fn parse_i64(arg: &[u8]) -> Option<i64> {
    crate::sched::pass::parse_signed(arg)
}

/// What a request turned into.
enum Handled {
    Queued,
    Stalled,
    Close,
}

impl RespSession {
    fn handle(&mut self, request: &Request, worker: &mut Worker<'_>) -> Handled {
        let argv = request.argv();
        let name = upper(&argv[0]);
        let args = &argv[1..];
        let arity_error = |this: &mut Self| {
            this.pending.push(Pending::OwnedError(format!(
                "ERR wrong number of arguments for '{}' command",
                String::from_utf8_lossy(&argv[0]).to_lowercase()
            )));
            Handled::Queued
        };
        let p = &mut self.pending;
        if is(&name, b"GET") {
            let [key] = args else {
                return arity_error(self);
            };
            p.push(Pending::Get(worker.get(key)));
        } else if is(&name, b"SET") {
            if args.len() < 2 {
                return arity_error(self);
            }
            return self.set(args, worker);
        } else if is(&name, b"DEL") || is(&name, b"UNLINK") || is(&name, b"EXISTS") {
            if args.is_empty() {
                return arity_error(self);
            }
            let exists = is(&name, b"EXISTS");
            let first = OpId(worker.pending() as u32);
            for key in args {
                if exists {
                    worker.get(key);
                } else {
                    worker.delete(key);
                }
            }
            p.push(Pending::Count {
                first,
                count: args.len() as u32,
                exists,
            });
        } else if is(&name, b"MGET") {
            if args.is_empty() {
                return arity_error(self);
            }
            let first = OpId(worker.pending() as u32);
            for key in args {
                worker.get(key);
            }
            p.push(Pending::MGet {
                first,
                count: args.len() as u32,
            });
        } else if is(&name, b"MSET") {
            if args.is_empty() || !args.len().is_multiple_of(2) {
                return arity_error(self);
            }
            let first = OpId(worker.pending() as u32);
            let mut count = 0;
            for pair in args.chunks(2) {
                match worker.set(&pair[0], &[&pair[1]], 0, NEVER, SetMode::Always) {
                    Ok(_) => count += 1,
                    // Earlier pairs are queued already: they run; the rest waits for a retry.
                    Err(StoreError::Retry) if count == 0 => return Handled::Stalled,
                    Err(StoreError::Retry) => {
                        // Store the rest in a later round: keep the unprocessed pairs.
                        return self.requeue_mset(first, count, &args[count as usize * 2..]);
                    }
                    Err(e) => {
                        self.pending.push(store_error(e));
                        return Handled::Queued;
                    }
                }
            }
            self.pending.push(Pending::MSet { first, count });
        } else if is(&name, b"EXPIRE")
            || is(&name, b"PEXPIRE")
            || is(&name, b"EXPIREAT")
            || is(&name, b"PEXPIREAT")
        {
            let [key, when] = args else {
                return arity_error(self);
            };
            let Some(when) = parse_i64(when) else {
                p.push(Pending::Error(NOT_INTEGER));
                return Handled::Queued;
            };
            let at = match expire_at(&name, when, worker) {
                Some(at) => at,
                None => {
                    p.push(Pending::OwnedError(format!(
                        "ERR invalid expire time in '{}' command",
                        String::from_utf8_lossy(&argv[0]).to_lowercase()
                    )));
                    return Handled::Queued;
                }
            };
            let id = if at <= worker.now_ms() {
                worker.delete(key)
            } else {
                worker.touch(key, at)
            };
            p.push(Pending::Expire(id));
        } else if is(&name, b"TTL") || is(&name, b"PTTL") {
            let [key] = args else {
                return arity_error(self);
            };
            p.push(Pending::Ttl {
                id: worker.get(key),
                millis: is(&name, b"PTTL"),
            });
        } else if is(&name, b"INCR") || is(&name, b"DECR") {
            let [key] = args else {
                return arity_error(self);
            };
            p.push(Pending::Incr(worker.incr(
                key,
                1,
                is(&name, b"DECR"),
                IncrStyle::Redis,
            )));
        } else if is(&name, b"INCRBY") || is(&name, b"DECRBY") {
            let [key, by] = args else {
                return arity_error(self);
            };
            let Some(by) = parse_i64(by) else {
                p.push(Pending::Error(NOT_INTEGER));
                return Handled::Queued;
            };
            let decr = is(&name, b"DECRBY") != (by < 0);
            p.push(Pending::Incr(worker.incr(
                key,
                by.unsigned_abs(),
                decr,
                IncrStyle::Redis,
            )));
        } else if is(&name, b"FLUSHALL") || is(&name, b"FLUSHDB") {
            match args {
                [] => {}
                [mode]
                    if mode.eq_ignore_ascii_case(b"async")
                        || mode.eq_ignore_ascii_case(b"sync") => {}
                _ => {
                    p.push(Pending::Error(SYNTAX));
                    return Handled::Queued;
                }
            }
            p.push(Pending::Flush(worker.flush()));
        } else if is(&name, b"DBSIZE") {
            p.push(Pending::DbSize);
        } else if is(&name, b"INFO") {
            p.push(Pending::Info);
        } else if is(&name, b"PING") {
            match args {
                [] => p.push(Pending::Simple(b"PONG")),
                [msg] => p.push(Pending::Bulk(msg.clone())),
                _ => return arity_error(self),
            }
        } else if is(&name, b"ECHO") {
            let [msg] = args else {
                return arity_error(self);
            };
            p.push(Pending::Bulk(msg.clone()));
        } else if is(&name, b"SELECT") {
            let [db] = args else { return arity_error(self) };
            if &db[..] == b"0" {
                p.push(Pending::Ok);
            } else {
                p.push(Pending::Error(b"ERR DB index is out of range"));
            }
        } else if is(&name, b"CLIENT") {
            p.push(Pending::Ok);
        } else if is(&name, b"COMMAND") {
            p.push(Pending::EmptyArray);
        } else if is(&name, b"CONFIG") {
            match args {
                [sub, _] if sub.eq_ignore_ascii_case(b"get") => p.push(Pending::EmptyMap),
                _ => p.push(Pending::Error(
                    b"ERR CONFIG in cache mode supports only GET",
                )),
            }
        } else if is(&name, b"HELLO") {
            p.push(hello(args));
        } else if is(&name, b"QUIT") {
            p.push(Pending::Ok);
            return Handled::Close;
        } else {
            let mut message = format!(
                "ERR unknown command '{}', with args beginning with: ",
                String::from_utf8_lossy(&argv[0][..argv[0].len().min(128)])
            );
            for arg in args.iter().take(8) {
                let _ = write!(
                    message,
                    "'{}' ",
                    String::from_utf8_lossy(&arg[..arg.len().min(64)])
                );
            }
            p.push(Pending::OwnedError(message));
        }
        Handled::Queued
    }

    fn requeue_mset(&mut self, first: OpId, count: u32, rest: &[Bytes]) -> Handled {
        // The queued pairs run now and answer nothing; the rest comes back as its own MSET whose
        // reply stands for the whole command.
        let _ = (first, count);
        let mut argv = vec![Bytes::from_static(b"MSET")];
        argv.extend(rest.iter().cloned());
        if let Some(request) = Request::new(argv) {
            self.backlog.push_front(request);
        }
        Handled::Queued
    }

    fn set(&mut self, args: &[Bytes], worker: &mut Worker<'_>) -> Handled {
        let (key, value) = (&args[0], &args[1]);
        let mut mode = SetMode::Always;
        let mut expire = NEVER;
        let mut i = 2;
        while i < args.len() {
            let option = upper(&args[i]);
            if is(&option, b"NX") && mode == SetMode::Always {
                mode = SetMode::Add;
            } else if is(&option, b"XX") && mode == SetMode::Always {
                mode = SetMode::Replace;
            } else if (is(&option, b"EX")
                || is(&option, b"PX")
                || is(&option, b"EXAT")
                || is(&option, b"PXAT"))
                && expire == NEVER
                && i + 1 < args.len()
            {
                let Some(n) = parse_i64(&args[i + 1]) else {
                    self.pending.push(Pending::Error(NOT_INTEGER));
                    return Handled::Queued;
                };
                match expire_at(&option, n, worker) {
                    Some(at) => expire = at,
                    None => {
                        self.pending
                            .push(Pending::Error(b"ERR invalid expire time in 'set' command"));
                        return Handled::Queued;
                    }
                }
                i += 1;
            } else {
                self.pending.push(Pending::Error(SYNTAX));
                return Handled::Queued;
            }
            i += 1;
        }
        match worker.set(key, &[value], 0, expire, mode) {
            Ok(id) => self.pending.push(Pending::Set(id)),
            Err(StoreError::Retry) => return Handled::Stalled,
            Err(e) => self.pending.push(store_error(e)),
        }
        Handled::Queued
    }
}

/// A bulk reply of `item`'s value (the null reply if there is none), the value lent from slab
/// memory when it is long ([`Output::value`]).
fn bulk_value(out: &mut Output, version: Version, item: Option<ItemRef<'_>>) {
    let Some(item) = item else {
        ReplyWriter::new(out, version).null();
        return;
    };
    ReplyWriter::new(out, version).bulk_header(item.value().len());
    out.value(&item);
    out.extend_from_slice(b"\r\n");
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`, answered as Redis answers
/// it. The cache has no passwords: like Redis's default user without one, `AUTH default <any>`
/// is accepted and any other user refused.
fn hello(args: &[Bytes]) -> Pending {
    let Some((protover, options)) = args.split_first() else {
        return Pending::Hello(None);
    };
    let Some(protover) = parse_i64(protover) else {
        return Pending::Error(b"ERR Protocol version is not an integer or out of range");
    };
    let Some(version) = Version::from_protover(protover) else {
        return Pending::Error(b"NOPROTO unsupported protocol version");
    };
    let mut i = 0;
    while i < options.len() {
        let option = upper(&options[i]);
        if is(&option, b"AUTH") && i + 2 < options.len() {
            if !options[i + 1].eq_ignore_ascii_case(b"default") {
                return Pending::Error(
                    b"WRONGPASS invalid username-password pair or user is disabled.",
                );
            }
            i += 3;
        } else if is(&option, b"SETNAME") && i + 1 < options.len() {
            i += 2;
        } else {
            let shown = &options[i][..options[i].len().min(64)];
            return Pending::OwnedError(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(shown)
            ));
        }
    }
    Pending::Hello(Some(version))
}

fn store_error(error: StoreError) -> Pending {
    match error {
        StoreError::TooLarge => Pending::Error(TOO_LARGE),
        _ => Pending::Error(OOM),
    }
}

/// The cache-clock expiry of an EX/PX/EXAT/PXAT (or EXPIRE family) argument; `None` if invalid.
/// Relative times must be positive for SET; EXPIRE accepts any and deletes at once if not.
fn expire_at(option: &[u8; 16], n: i64, worker: &Worker<'_>) -> Option<u64> {
    let now = worker.now_ms();
    let clock = worker.cache().clock();
    let is_set_option =
        is(option, b"EX") || is(option, b"PX") || is(option, b"EXAT") || is(option, b"PXAT");
    if is_set_option && n <= 0 {
        return None;
    }
    let ms = |secs: i64| secs.checked_mul(1000);
    let at = if is(option, b"EX") || is(option, b"EXPIRE") {
        (now as i64).checked_add(ms(n)?)?
    } else if is(option, b"PX") || is(option, b"PEXPIRE") {
        (now as i64).checked_add(n)?
    } else if is(option, b"EXAT") || is(option, b"EXPIREAT") {
        clock.from_unix_ms(ms(n)?.max(0) as u64) as i64
    } else {
        clock.from_unix_ms(n.max(0) as u64) as i64
    };
    Some(at.max(1) as u64)
}

impl Session for RespSession {
    fn parse(&mut self, input: &mut BytesMut, worker: &mut Worker<'_>) -> Parsed {
        if self.closing {
            return Parsed::Close;
        }
        let mut handled = 0;
        loop {
            while let Some(request) = self.backlog.pop_front() {
                if handled >= MAX_REQUESTS_PER_ROUND {
                    self.backlog.push_front(request);
                    return Parsed::Budget;
                }
                match self.handle(&request, worker) {
                    Handled::Queued => handled += 1,
                    Handled::Stalled => {
                        self.backlog.push_front(request);
                        return Parsed::Stalled;
                    }
                    Handled::Close => {
                        self.closing = true;
                        return Parsed::Close;
                    }
                }
            }
            if input.is_empty() {
                return Parsed::NeedMore;
            }
            let mut decoded = Vec::new();
            match self.decoder.decode_all(input, &mut decoded) {
                Ok(0) => return Parsed::NeedMore,
                Ok(_) => self.backlog.extend(decoded),
                Err(error) => {
                    self.backlog.extend(decoded);
                    // Run what came before the error, then answer it and close.
                    while let Some(request) = self.backlog.pop_front() {
                        if let Handled::Stalled = self.handle(&request, worker) {
                            self.backlog.push_front(request);
                            break;
                        }
                    }
                    Stats::add(&worker.cache().stats().protocol_errors, 1);
                    let message = String::from_utf8_lossy(&error.message()).into_owned();
                    self.pending
                        .push(Pending::OwnedError(format!("ERR {message}")));
                    self.closing = true;
                    return Parsed::Close;
                }
            }
        }
    }

    fn reply(&mut self, worker: &mut Worker<'_>, out: &mut Output) {
        let mut version = self.version;
        for pending in self.pending.drain(..) {
            if let Pending::Hello(Some(chosen)) = pending {
                version = chosen;
            }
            let mut w = ReplyWriter::new(out, version);
            match pending {
                Pending::Get(id) => bulk_value(out, version, worker.read(id)),
                Pending::Set(id) => match worker.outcome(id) {
                    Outcome::Stored => w.ok(),
                    Outcome::NotStored => w.null(),
                    _ => w.error(OOM),
                },
                Pending::Count {
                    first,
                    count,
                    exists,
                } => {
                    let mut n = 0;
                    for i in 0..count {
                        let id = OpId(first.0 + i);
                        let hit = if exists {
                            worker.read(id).is_some()
                        } else {
                            worker.outcome(id) == Outcome::Deleted
                        };
                        n += i64::from(hit);
                    }
                    w.integer(n);
                }
                Pending::MGet { first, count } => {
                    w.array(count as usize);
                    for i in 0..count {
                        bulk_value(out, version, worker.read(OpId(first.0 + i)));
                    }
                }
                Pending::MSet { first, count } => {
                    let all =
                        (0..count).all(|i| worker.outcome(OpId(first.0 + i)) == Outcome::Stored);
                    if all {
                        w.ok();
                    } else {
                        w.error(OOM);
                    }
                }
                Pending::Expire(id) => {
                    let hit = matches!(worker.outcome(id), Outcome::Touched | Outcome::Deleted);
                    w.integer(i64::from(hit));
                }
                Pending::Ttl { id, millis } => {
                    let now = worker.now_ms();
                    let ttl = match worker.read(id) {
                        None => -2,
                        Some(item) if item.expire_ms() == NEVER => -1,
                        Some(item) => {
                            let left = item.expire_ms().saturating_sub(now) as i64;
                            if millis {
                                left
                            } else {
                                (left + 500) / 1000
                            }
                        }
                    };
                    w.integer(ttl);
                }
                Pending::Incr(id) => match worker.outcome(id) {
                    Outcome::Signed(n) => w.integer(n),
                    Outcome::NotANumber => w.error(NOT_INTEGER),
                    Outcome::Overflow => w.error(b"ERR increment or decrement would overflow"),
                    _ => w.error(OOM),
                },
                Pending::Flush(id) => {
                    let _ = worker.outcome(id);
                    w.ok();
                }
                Pending::DbSize => w.integer(worker.cache().items() as i64),
                Pending::Info => w.verbatim(b"txt", info_text(worker).as_bytes()),
                Pending::Ok => w.ok(),
                Pending::Error(e) => w.error(e),
                Pending::OwnedError(e) => w.error(e.as_bytes()),
                Pending::Simple(s) => w.simple(s),
                Pending::Bulk(b) => w.bulk(&b),
                Pending::EmptyArray => w.array(0),
                Pending::EmptyMap => w.map(0),
                Pending::Hello(_) => {
                    w.map(7);
                    for (name, value) in [("server", "shale-cache"), ("version", "0.1.0")] {
                        w.bulk(name.as_bytes());
                        w.bulk(value.as_bytes());
                    }
                    w.bulk(b"proto");
                    w.integer(version.number());
                    w.bulk(b"id");
                    w.integer(0);
                    for (name, value) in [("mode", "standalone"), ("role", "master")] {
                        w.bulk(name.as_bytes());
                        w.bulk(value.as_bytes());
                    }
                    w.bulk(b"modules");
                    w.array(0);
                }
            }
        }
        self.version = version;
    }
}

/// Redis-style INFO: the sections clients and tools read, with the cache's own counters.
fn info_text(worker: &Worker<'_>) -> String {
    let cache = worker.cache();
    let stats = cache.stats();
    let get = |c: &std::sync::atomic::AtomicU64| Stats::get(c);
    let mut s = String::new();
    let _ = write!(
        s,
        "# Server\r\nredis_version:7.0.0\r\nshale_mode:cache\r\nprocess_id:{}\r\nuptime_in_seconds:{}\r\n\r\n",
        std::process::id(),
        worker.now_ms() / 1000
    );
    let _ = write!(
        s,
        "# Clients\r\nconnected_clients:{}\r\n\r\n",
        get(&stats.curr_connections)
    );
    let _ = write!(
        s,
        "# Memory\r\nused_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:allkeys-clock\r\n\r\n",
        cache.slabs().stats().assigned_bytes + cache.index_slots() * 8,
        cache.memory()
    );
    let _ = write!(
        s,
        "# Stats\r\ntotal_connections_received:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\nevicted_keys:{}\r\nexpired_keys:{}\r\n\r\n",
        get(&stats.total_connections),
        get(&stats.get_hits),
        get(&stats.get_misses),
        get(&stats.evictions) + get(&stats.index_lossy),
        get(&stats.expired_reclaimed),
    );
    s.push_str("# Cache\r\n");
    let _ = write!(
        s,
        "index_engine:{}\r\nindex_slots:{}\r\n",
        cache.index_name(),
        cache.index_slots()
    );
    for (name, value) in stats.snapshot() {
        let _ = write!(s, "{name}:{value}\r\n");
    }
    let batches = get(&stats.batches).max(1);
    let passes = get(&stats.passes).max(1);
    let _ = write!(
        s,
        "batch_ops_p50:{}\r\nbatch_ops_p99:{}\r\nbatch_micros_p99:{}\r\nbatch_index_nanos_mean:{}\r\npass_period_micros_mean:{}\r\nhit_rate_percent:{:.2}\r\n\r\n",
        stats.batch_ops.quantile(0.5),
        stats.batch_ops.quantile(0.99),
        stats.batch_micros.quantile(0.99),
        get(&stats.index_nanos) / batches,
        get(&stats.pass_period_nanos) / passes / 1000,
        get(&stats.get_hits) as f64 * 100.0 / get(&stats.cmd_get).max(1) as f64,
    );
    let _ = write!(
        s,
        "# Keyspace\r\ndb0:keys={},expires=0,avg_ttl=0\r\n",
        cache.items()
    );
    s
}
