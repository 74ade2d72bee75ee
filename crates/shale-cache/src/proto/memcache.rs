//! The memcached text protocol (memcached's `protocol.txt`): get, gets, set, add, replace,
//! append, prepend, cas, delete, incr, decr, touch, gat, gats, flush_all, stats (general, settings, slabs,
//! items, cachedump), lru_crawler metadump, version, verbosity, quit, and `noreply` on every
//! command that takes it; and the meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`, module
//! [`meta`]). The two dumps are what memcached's admin tools list keys with
//! (libmemcached's memcdump, memcached's memcached-tool); they walk slab memory in slab order,
//! where memcached walks its LRU.
//!
//! Where memcached's behaviour is odd but clients rely on it, it is kept: a data block not ending
//! in `\r\n` is refused with `CLIENT_ERROR bad data chunk` and the stream goes on after it; a value
//! too large is refused with `SERVER_ERROR object too large for cache` and its bytes are skipped
//! as they arrive, never buffered. Where it is a quirk of its implementation it is not: `decr`
//! writes the number without memcached's trailing-space padding.

mod meta;

use std::fmt::Write as _;

use bytes::{Buf, BytesMut};

use super::output::LEND_AT_LEAST;
use super::{put_decimal, Output, Parsed, Session, MAX_REQUESTS_PER_ROUND};
use crate::cache::{StoreError, Worker};
use crate::item::{item_len, ItemRef, NEVER};
use crate::op::{IncrStyle, OpId, Outcome, SetMode};
use crate::slab::WalkCursor;
use crate::stats::Stats;

/// Longest key (memcached's `KEY_MAX_LENGTH`).
pub const MAX_KEY_LEN: usize = 250;

/// Longest command line; a longer line without its end closes the connection.
pub const MAX_LINE_LEN: usize = 64 * 1024;

/// Relative expiry times above this many seconds are Unix times (memcached's `REALTIME_MAXDELTA`,
/// 30 days).
pub const MAX_RELATIVE_EXPIRY: i64 = 60 * 60 * 24 * 30;

/// The `VERSION` reply: a memcached-style number first, since clients parse it.
pub const VERSION_LINE: &[u8] = b"VERSION 1.6.0 shale-cache-0.1.0\r\n";

const ERROR: &[u8] = b"ERROR\r\n";
const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
const BAD_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
const NO_MEMORY: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";
const LINE_TOO_LONG: &[u8] = b"CLIENT_ERROR line too long\r\n";
const BAD_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
const INVALID_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
const DELETE_USAGE: &[u8] =
    b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";

/// A request waiting for its reply.
#[derive(Debug)]
enum Pending {
    /// `get`/`gets`: ops `first .. first + count`.
    Get { first: OpId, count: u32, cas: bool },
    /// A store of any mode.
    Store { id: OpId, noreply: bool },
    /// `delete`.
    Delete { id: OpId, noreply: bool },
    /// `incr`/`decr`.
    Incr { id: OpId, noreply: bool },
    /// `touch`.
    Touch { id: OpId, noreply: bool },
    /// `flush_all` run now.
    Flush { id: OpId, noreply: bool },
    /// A fixed reply.
    Text(&'static [u8]),
    /// `stats` of a kind, built at reply time so it counts the ops before it.
    Stats(StatsKind),
    /// `stats cachedump <class> <limit>`: the class's items, at most `limit` (0: no limit) and
    /// [`CACHEDUMP_MAX_BYTES`] of text.
    CacheDump { class: Option<usize>, limit: usize },
    /// `lru_crawler metadump`: written over as many rounds as it takes; the requests after it
    /// wait (parsing stops while it runs).
    MetaDump(MetaDump),
    /// A meta command (`mg`, `ms`, `md`, `ma`).
    Meta(Box<meta::MetaReply>),
    /// `me <key>`: the get of its key.
    MetaDebug(OpId),
}

/// memcached's cap on a `stats cachedump` reply.
const CACHEDUMP_MAX_BYTES: usize = 2 << 20;

/// Text of an `lru_crawler metadump` written per round at most, so one dump does not hold up the
/// thread's other connections; a client that does not read stops it at [`MAX_PENDING_OUTPUT`].
///
/// [`MAX_PENDING_OUTPUT`]: super::MAX_PENDING_OUTPUT
const METADUMP_BYTES_PER_ROUND: usize = 256 * 1024;

/// Class numbers a dump accepts: memcached's (1 to 63) and ours if there are more.
fn dump_classes(worker: &Worker<'_>) -> usize {
    worker.cache().slabs().classes().len().max(63)
}

/// An `lru_crawler metadump` under way: the classes (ours, from 0) still to walk and where the
/// walk of the first stands.
#[derive(Debug)]
pub(crate) struct MetaDump {
    classes: Vec<usize>,
    next: usize,
    cursor: WalkCursor,
}

impl MetaDump {
    /// Writes the next part of the dump; true once it has ended (with `END`).
    fn write(&mut self, worker: &Worker<'_>, out: &mut Output) -> bool {
        let cache = worker.cache();
        let stop_at = out.len() + METADUMP_BYTES_PER_ROUND;
        let now = worker.now_ms();
        while let Some(&class) = self.classes.get(self.next) {
            // SAFETY: replies are written in the round, while the thread is pinned.
            let stopped = unsafe {
                cache.slabs().walk_live(class, self.cursor, |item| {
                    if out.len() >= stop_at {
                        return false;
                    }
                    if !item.expired(now) {
                        metadump_line(worker, class, &item, out);
                    }
                    true
                })
            };
            match stopped {
                Some(cursor) => {
                    self.cursor = cursor;
                    return false;
                }
                None => {
                    self.next += 1;
                    self.cursor = WalkCursor::default();
                }
            }
        }
        out.extend_from_slice(b"END\r\n");
        true
    }
}

/// One item as memcached's `lru_crawler metadump` writes it: `key=<key, %-escaped> exp=<unix
/// seconds, -1 for never> cas=<cas> cls=<class> size=<bytes>`, ended by `\n` alone as
/// memcached's are. memcached's `la` (last access) and `fetch` are not given: CLOCK keeps
/// neither (readers of the dump, memcached-tool's among them, take fields by name).
fn metadump_line(worker: &Worker<'_>, class: usize, item: &ItemRef<'_>, out: &mut Output) {
    out.extend_from_slice(b"key=");
    for &b in item.key() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.extend_from_slice(&[b]);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
    out.extend_from_slice(b" exp=");
    match unix_expiry(worker, item) {
        0 => out.extend_from_slice(b"-1"),
        at => put_decimal(out, at),
    }
    out.extend_from_slice(b" cas=");
    put_decimal(out, item.cas());
    out.extend_from_slice(b" cls=");
    put_decimal(out, class as u64 + 1);
    out.extend_from_slice(b" size=");
    put_decimal(out, item_len(item.key().len(), item.value().len()) as u64);
    out.extend_from_slice(b"\n");
}

/// When `item` expires, in Unix seconds; 0 for never (memcached's `exptime` convention).
fn unix_expiry(worker: &Worker<'_>, item: &ItemRef<'_>) -> u64 {
    match item.expire_ms() {
        NEVER => 0,
        at => (worker.cache().clock().to_unix_ms(at) / 1000).max(1),
    }
}

/// memcached's `stats cachedump`: `ITEM <key> [<value bytes> b; <expiry, Unix seconds or 0> s]`
/// per item, in slab order (memcached's is its LRU's order), then `END`.
fn cachedump_text(worker: &Worker<'_>, class: Option<usize>, limit: usize, out: &mut Output) {
    let end = b"END\r\n";
    let stop_at = out.len() + CACHEDUMP_MAX_BYTES - end.len();
    let now = worker.now_ms();
    if let Some(class) = class.filter(|&c| c < worker.cache().slabs().classes().len()) {
        let mut shown = 0;
        let mut line = Vec::new();
        // SAFETY: replies are written in the round, while the thread is pinned.
        unsafe {
            worker
                .cache()
                .slabs()
                .walk_live(class, WalkCursor::default(), |item| {
                    if item.expired(now) {
                        return true;
                    }
                    line.clear();
                    line.extend_from_slice(b"ITEM ");
                    line.extend_from_slice(item.key());
                    let _ = write!(
                        DisplayBytes(&mut line),
                        " [{} b; {} s]\r\n",
                        item.value().len(),
                        unix_expiry(worker, &item)
                    );
                    if out.len() + line.len() > stop_at {
                        return false;
                    }
                    out.extend_from_slice(&line);
                    shown += 1;
                    limit == 0 || shown < limit
                })
        };
    }
    out.extend_from_slice(end);
}

/// `fmt::Write` into a byte vector.
struct DisplayBytes<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for DisplayBytes<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Which `stats` report.
#[derive(Clone, Copy, Debug)]
enum StatsKind {
    General,
    Settings,
    Slabs,
    Items,
}

/// A memcached text-protocol connection.
#[derive(Debug, Default)]
pub(crate) struct MemcacheSession {
    pending: Vec<Pending>,
    /// Bytes of a refused value still to skip.
    swallow: usize,
    closing: bool,
}

/// The cache-clock expiry of a memcached `exptime`.
pub(crate) fn expiry_ms(worker: &Worker<'_>, exptime: i64) -> u64 {
    match exptime {
        0 => NEVER,
        e if e < 0 => 1,
        e if e <= MAX_RELATIVE_EXPIRY => worker.now_ms() + e as u64 * 1000,
        e => worker.cache().clock().from_unix_ms(e as u64 * 1000),
    }
}

fn parse_num<T: std::str::FromStr>(token: &[u8]) -> Option<T> {
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// A key as memcached takes it: 1 to 250 bytes, any but the space that separates words and NUL.
/// Control and high bytes are keys too (memcached stores `a\x10b`, and memaslap's keys are made of
/// such bytes), though the protocol text asks clients not to send them.
fn valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN && memchr::memchr2(b' ', 0, key).is_none()
}

/// memcached's refusal of a retrieval command's keys, if any: a key over [`MAX_KEY_LEN`] is a
/// bad format, another bad key (or none when `none_given`) an `ERROR`.
fn refuse_keys<'a, I: Iterator<Item = &'a [u8]>>(
    keys: impl Fn() -> I,
    none_given: bool,
) -> Option<&'static [u8]> {
    if keys().any(|k| k.len() > MAX_KEY_LEN) {
        Some(BAD_FORMAT)
    } else if none_given || !keys().all(valid_key) {
        Some(ERROR)
    } else {
        None
    }
}

/// The words of a command line: what lies between spaces, empty ones skipped. Found with memchr,
/// since a multi-get line runs to kilobytes and is walked more than once.
fn words(line: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut rest = line;
    std::iter::from_fn(move || loop {
        if rest.is_empty() {
            return None;
        }
        let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        let word = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or_default();
        if !word.is_empty() {
            return Some(word);
        }
    })
}

/// Most words of a command line looked at (a `get` reads all its keys separately).
const MAX_WORDS: usize = 8;

impl MemcacheSession {
    /// Parses one request at the front of `input`.
    fn parse_one(&mut self, input: &mut BytesMut, worker: &mut Worker<'_>) -> Step {
        if self.swallow > 0 {
            let n = self.swallow.min(input.len());
            input.advance(n);
            self.swallow -= n;
            return if self.swallow > 0 {
                Step::NeedMore
            } else {
                Step::Done
            };
        }
        let scan = input.len().min(MAX_LINE_LEN + 2);
        let Some(newline) = memchr::memchr(b'\n', &input[..scan]) else {
            if input.len() > MAX_LINE_LEN {
                self.pending.push(Pending::Text(LINE_TOO_LONG));
                return Step::Close;
            }
            return Step::NeedMore;
        };
        let (consume, step) = self.command(&input[..], newline + 1, worker);
        input.advance(consume);
        step
    }

    /// Handles the command whose line ends at `line_end` (just past its `\n`); returns how many
    /// bytes it took.
    fn command(&mut self, input: &[u8], line_end: usize, worker: &mut Worker<'_>) -> (usize, Step) {
        let line = &input[..line_end - 1];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let words = || words(line);
        let mut tokens: [&[u8]; MAX_WORDS] = [&[]; MAX_WORDS];
        let mut count = 0;
        for word in words() {
            if count < MAX_WORDS {
                tokens[count] = word;
            }
            count += 1;
        }
        let done = (line_end, Step::Done);
        if count == 0 {
            self.pending.push(Pending::Text(ERROR));
            return done;
        }
        let command = tokens[0];
        let args = &tokens[1..count.min(MAX_WORDS)];
        let noreply = count <= MAX_WORDS && args.last() == Some(&&b"noreply"[..]);
        match command {
            b"get" | b"gets" => {
                let keys = || words().skip(1);
                if let Some(refusal) = refuse_keys(keys, count == 1) {
                    self.pending.push(Pending::Text(refusal));
                    return done;
                }
                let first = OpId(worker.pending() as u32);
                for key in keys() {
                    worker.get(key);
                }
                self.pending.push(Pending::Get {
                    first,
                    count: (count - 1) as u32,
                    cas: command == b"gets",
                });
                done
            }
            b"gat" | b"gats" => {
                // Get and touch: each key's value as `get` finds it, then its expiry changed
                // (so `gat -1` still returns the value, as memcached's does).
                let Some(exptime) = tokens.get(1).filter(|_| count > 1) else {
                    self.pending.push(Pending::Text(ERROR));
                    return done;
                };
                let Some(exptime) = parse_num::<i64>(exptime) else {
                    self.pending.push(Pending::Text(INVALID_EXPTIME));
                    return done;
                };
                let keys = || words().skip(2);
                if let Some(refusal) = refuse_keys(keys, false) {
                    self.pending.push(Pending::Text(refusal));
                    return done;
                }
                let first = OpId(worker.pending() as u32);
                for key in keys() {
                    worker.get(key);
                }
                let expire_ms = expiry_ms(worker, exptime);
                for key in keys() {
                    worker.touch(key, expire_ms);
                }
                self.pending.push(Pending::Get {
                    first,
                    count: (count - 2) as u32,
                    cas: command == b"gats",
                });
                done
            }
            b"mg" | b"ms" | b"md" | b"ma" | b"mn" | b"me" => {
                let all: Vec<&[u8]> = words().take(meta::MAX_META_WORDS + 1).collect();
                self.meta(input, line_end, &all, count, worker)
            }
            _ if count > MAX_WORDS => {
                self.pending.push(Pending::Text(ERROR));
                done
            }
            b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
                self.parse_store(input, line_end, command, args, noreply, worker)
            }
            b"delete" if args.len() > 3 => {
                self.pending.push(Pending::Text(ERROR));
                done
            }
            b"delete" => {
                let plain = matches!(
                    args,
                    [_] | [_, b"noreply"] | [_, b"0"] | [_, b"0", b"noreply"]
                );
                if !plain {
                    self.pending.push(Pending::Text(DELETE_USAGE));
                } else if !valid_key(args[0]) {
                    self.pending.push(Pending::Text(BAD_FORMAT));
                } else {
                    let id = worker.delete(args[0]);
                    self.pending.push(Pending::Delete { id, noreply });
                }
                done
            }
            b"incr" | b"decr" => {
                match args {
                    [key, delta] | [key, delta, b"noreply"] if valid_key(key) => {
                        let delta = parse_num::<u64>(delta)
                            .filter(|_| delta.iter().all(u8::is_ascii_digit));
                        match delta {
                            Some(delta) => {
                                let decr = command == b"decr";
                                let id = worker.incr(key, delta, decr, IncrStyle::Memcached);
                                self.pending.push(Pending::Incr { id, noreply });
                            }
                            None => self.pending.push(Pending::Text(BAD_DELTA)),
                        }
                    }
                    _ => self.pending.push(Pending::Text(ERROR)),
                }
                done
            }
            b"touch" => {
                match args {
                    [key, exptime] | [key, exptime, b"noreply"] if valid_key(key) => {
                        match parse_num::<i64>(exptime) {
                            Some(exptime) => {
                                let id = worker.touch(key, expiry_ms(worker, exptime));
                                self.pending.push(Pending::Touch { id, noreply });
                            }
                            None => self.pending.push(Pending::Text(INVALID_EXPTIME)),
                        }
                    }
                    _ => self.pending.push(Pending::Text(ERROR)),
                }
                done
            }
            b"flush_all" => {
                let delay = match args {
                    [] | [b"noreply"] => Some(0),
                    [d] | [d, b"noreply"] => parse_num::<i64>(d),
                    _ => None,
                };
                match delay {
                    None => self.pending.push(Pending::Text(BAD_FORMAT)),
                    Some(d) if d > 0 => {
                        worker
                            .cache()
                            .flush_after(std::time::Duration::from_secs(d as u64));
                        if !noreply {
                            self.pending.push(Pending::Text(b"OK\r\n"));
                        }
                    }
                    Some(_) => {
                        let id = worker.flush();
                        self.pending.push(Pending::Flush { id, noreply });
                    }
                }
                done
            }
            b"version" => {
                self.pending.push(Pending::Text(VERSION_LINE));
                done
            }
            b"verbosity" => {
                match args {
                    [] => self.pending.push(Pending::Text(ERROR)),
                    [b"noreply"] | [_, b"noreply"] => {}
                    [_] => self.pending.push(Pending::Text(b"OK\r\n")),
                    _ => self.pending.push(Pending::Text(ERROR)),
                }
                done
            }
            b"stats" => {
                let pending = match args {
                    [] => Pending::Stats(StatsKind::General),
                    [b"settings"] => Pending::Stats(StatsKind::Settings),
                    [b"slabs"] => Pending::Stats(StatsKind::Slabs),
                    [b"items"] => Pending::Stats(StatsKind::Items),
                    // Item size histograms: memcached keeps none unless started with
                    // `-o track_sizes`, and says so; neither does the cache.
                    [b"sizes", ..] => Pending::Text(b"STAT sizes_status disabled\r\nEND\r\n"),
                    [b"cachedump", class, limit, ..] => {
                        match (parse_num::<u32>(class), parse_num::<u32>(limit)) {
                            (Some(class), Some(limit)) => {
                                if class as usize > dump_classes(worker) {
                                    Pending::Text(b"CLIENT_ERROR Illegal slab id\r\n")
                                } else {
                                    Pending::CacheDump {
                                        class: (class as usize).checked_sub(1),
                                        limit: limit as usize,
                                    }
                                }
                            }
                            _ => Pending::Text(BAD_FORMAT),
                        }
                    }
                    [b"cachedump", ..] => Pending::Text(b"CLIENT_ERROR bad command line\r\n"),
                    _ => Pending::Text(ERROR),
                };
                self.pending.push(pending);
                done
            }
            b"lru_crawler" => match args {
                [b"metadump", which] => {
                    let classes = match *which {
                        b"all" | b"hash" => Some((0..dump_classes(worker)).collect()),
                        list => list
                            .split(|&b| b == b',')
                            .map(|id| {
                                parse_num::<usize>(id)
                                    .filter(|&id| (1..=dump_classes(worker)).contains(&id))
                                    .map(|id| id - 1)
                            })
                            .collect::<Option<Vec<usize>>>(),
                    };
                    match classes {
                        Some(mut classes) => {
                            let ours = worker.cache().slabs().classes().len();
                            classes.retain(|&c| c < ours);
                            self.pending.push(Pending::MetaDump(MetaDump {
                                classes,
                                next: 0,
                                cursor: WalkCursor::default(),
                            }));
                            // The dump may take rounds: nothing after it is parsed until it ends.
                            (line_end, Step::Paused)
                        }
                        None => {
                            self.pending
                                .push(Pending::Text(b"BADCLASS invalid class id\r\n"));
                            done
                        }
                    }
                }
                _ => {
                    self.pending.push(Pending::Text(ERROR));
                    done
                }
            },
            b"quit" => (line_end, Step::Close),
            _ => {
                self.pending.push(Pending::Text(ERROR));
                done
            }
        }
    }

    fn parse_store(
        &mut self,
        input: &[u8],
        line_end: usize,
        command: &[u8],
        args: &[&[u8]],
        noreply: bool,
        worker: &mut Worker<'_>,
    ) -> (usize, Step) {
        let is_cas = command == b"cas";
        let want = if is_cas { 5 } else { 4 };
        let fields = if noreply && args.len() == want + 1 {
            &args[..want]
        } else {
            args
        };
        if fields.len() != want {
            // memcached answers a storage line with the wrong number of words as unknown.
            self.pending.push(Pending::Text(ERROR));
            return (line_end, Step::Done);
        }
        let parsed = Some(()).and_then(|()| {
            let key = fields[0];
            let flags = parse_num::<u32>(fields[1])?;
            let exptime = parse_num::<i64>(fields[2])?;
            let bytes = parse_num::<i64>(fields[3])?;
            let cas = if is_cas {
                parse_num::<u64>(fields[4])?
            } else {
                0
            };
            (valid_key(key) && bytes >= 0).then_some((key, flags, exptime, bytes as usize, cas))
        });
        let Some((key, flags, exptime, bytes, cas)) = parsed else {
            // memcached cannot know how much data follows a bad line; it goes on at the next line.
            self.pending.push(Pending::Text(BAD_FORMAT));
            return (line_end, Step::Done);
        };
        if bytes > worker.cache().slabs().max_item_len() {
            self.swallow = bytes + 2;
            Stats::add(&worker.cache().stats().store_too_large, 1);
            self.pending.push(Pending::Text(TOO_LARGE));
            return (line_end, Step::Done);
        }
        let total = line_end + bytes + 2;
        if input.len() < total {
            return (0, Step::NeedMore);
        }
        if &input[line_end + bytes..total] != b"\r\n" {
            self.pending.push(Pending::Text(BAD_CHUNK));
            return (total, Step::Done);
        }
        let mode = match command {
            b"set" => SetMode::Always,
            b"add" => SetMode::Add,
            b"replace" => SetMode::Replace,
            b"append" => SetMode::Append,
            b"prepend" => SetMode::Prepend,
            _ => SetMode::Cas(cas),
        };
        let expire = expiry_ms(worker, exptime);
        let data = &input[line_end..line_end + bytes];
        match worker.set(key, &[data], flags, expire, mode) {
            Ok(id) => self.pending.push(Pending::Store { id, noreply }),
            Err(StoreError::Retry) => return (0, Step::Stalled),
            Err(StoreError::TooLarge) => self.pending.push(Pending::Text(TOO_LARGE)),
            Err(StoreError::NoMemory) => self.pending.push(Pending::Text(NO_MEMORY)),
        }
        (total, Step::Done)
    }
}

/// The result of parsing one request.
enum Step {
    Done,
    NeedMore,
    Stalled,
    /// Taken, but parse no further this round (a dump is being written).
    Paused,
    Close,
}

impl Session for MemcacheSession {
    fn parse(&mut self, input: &mut BytesMut, worker: &mut Worker<'_>) -> Parsed {
        if self.closing {
            return Parsed::Close;
        }
        if matches!(self.pending.last(), Some(Pending::MetaDump(_))) {
            // A dump is being written: come back next round.
            return Parsed::Budget;
        }
        for _ in 0..MAX_REQUESTS_PER_ROUND {
            if input.is_empty() {
                return Parsed::NeedMore;
            }
            match self.parse_one(input, worker) {
                Step::Done => {}
                Step::NeedMore => return Parsed::NeedMore,
                Step::Stalled => return Parsed::Stalled,
                Step::Paused => return Parsed::Budget,
                Step::Close => {
                    self.closing = true;
                    return Parsed::Close;
                }
            }
        }
        Parsed::Budget
    }

    fn reply(&mut self, worker: &mut Worker<'_>, out: &mut Output) {
        // A dump is always the last request parsed in its round (parsing pauses after it).
        let mut pending = std::mem::take(&mut self.pending);
        for pending in pending.drain(..) {
            match pending {
                Pending::Get { first, count, cas } => {
                    for i in 0..count {
                        let id = OpId(first.0 + i);
                        if let Some(item) = worker.read(id) {
                            let value = item.value();
                            out.reserve(value.len().min(LEND_AT_LEAST) + item.key().len() + 48);
                            out.extend_from_slice(b"VALUE ");
                            out.extend_from_slice(item.key());
                            out.extend_from_slice(b" ");
                            put_decimal(out, u64::from(item.flags()));
                            out.extend_from_slice(b" ");
                            put_decimal(out, value.len() as u64);
                            if cas {
                                out.extend_from_slice(b" ");
                                put_decimal(out, item.cas());
                            }
                            out.extend_from_slice(b"\r\n");
                            out.value(&item);
                            out.extend_from_slice(b"\r\n");
                        }
                    }
                    out.extend_from_slice(b"END\r\n");
                }
                Pending::Store { id, noreply } => {
                    let reply: &[u8] = match worker.outcome(id) {
                        Outcome::Stored => b"STORED\r\n",
                        Outcome::NotStored => b"NOT_STORED\r\n",
                        Outcome::Exists => b"EXISTS\r\n",
                        Outcome::NotFound => b"NOT_FOUND\r\n",
                        _ => NO_MEMORY,
                    };
                    if !noreply {
                        out.extend_from_slice(reply);
                    }
                }
                Pending::Delete { id, noreply } => {
                    if !noreply {
                        out.extend_from_slice(match worker.outcome(id) {
                            Outcome::Deleted => b"DELETED\r\n",
                            _ => b"NOT_FOUND\r\n",
                        });
                    }
                }
                Pending::Incr { id, noreply } => {
                    let outcome = worker.outcome(id);
                    if noreply {
                        continue;
                    }
                    match outcome {
                        Outcome::Unsigned(n) => {
                            put_decimal(out, n);
                            out.extend_from_slice(b"\r\n");
                        }
                        Outcome::NotANumber => out.extend_from_slice(NON_NUMERIC),
                        Outcome::NotFound => out.extend_from_slice(b"NOT_FOUND\r\n"),
                        _ => out.extend_from_slice(NO_MEMORY),
                    }
                }
                Pending::Touch { id, noreply } => {
                    if !noreply {
                        out.extend_from_slice(match worker.outcome(id) {
                            Outcome::Touched => b"TOUCHED\r\n",
                            Outcome::NotFound => b"NOT_FOUND\r\n",
                            _ => NO_MEMORY,
                        });
                    }
                }
                Pending::Flush { id, noreply } => {
                    let _ = worker.outcome(id);
                    if !noreply {
                        out.extend_from_slice(b"OK\r\n");
                    }
                }
                Pending::Text(text) => out.extend_from_slice(text),
                Pending::Stats(kind) => out.extend_from_slice(&match kind {
                    StatsKind::General => stats_text(worker),
                    StatsKind::Settings => settings_text(worker),
                    StatsKind::Slabs => slabs_text(worker),
                    StatsKind::Items => items_text(worker),
                }),
                Pending::CacheDump { class, limit } => cachedump_text(worker, class, limit, out),
                Pending::Meta(meta) => meta.write(worker, out),
                Pending::MetaDebug(id) => meta::write_debug(worker, id, out),
                Pending::MetaDump(mut dump) => {
                    if !dump.write(worker, out) {
                        self.pending.push(Pending::MetaDump(dump));
                    }
                }
            }
        }
        // Keep the vector's capacity when nothing is left over.
        if self.pending.is_empty() {
            self.pending = pending;
        }
    }
}

/// memcached's general `stats`, plus the cache's own counters.
fn stats_text(worker: &Worker<'_>) -> Vec<u8> {
    let cache = worker.cache();
    let stats = cache.stats();
    let mut text = String::new();
    let uptime = worker.now_ms() / 1000;
    let now_unix = cache.clock().to_unix_ms(worker.now_ms()) / 1000;
    let mut stat = |name: &str, value: &dyn std::fmt::Display| {
        let _ = write!(text, "STAT {name} {value}\r\n");
    };
    stat("pid", &std::process::id());
    stat("uptime", &uptime);
    stat("time", &now_unix);
    stat("version", &"1.6.0");
    stat("pointer_size", &(usize::BITS));
    stat("threads", &cache.slabs().epochs().threads());
    stat("limit_maxbytes", &cache.memory());
    stat("curr_items", &cache.items());
    let slabs = cache.slabs().stats();
    stat("bytes", &slabs.assigned_bytes);
    stat("slabs_moved", &slabs.pages_moved);
    stat("index_engine", &cache.index_name());
    stat("index_slots", &cache.index_slots());
    for (name, value) in stats.snapshot() {
        stat(name, &value);
    }
    let batches = Stats::get(&stats.batches).max(1);
    let passes = Stats::get(&stats.passes).max(1);
    let ops = Stats::get(&stats.batch_searches)
        + Stats::get(&stats.batch_inserts)
        + Stats::get(&stats.batch_deletes);
    stat("batch_ops_mean", &(ops / batches));
    stat("batch_ops_p99", &stats.batch_ops.quantile(0.99));
    stat(
        "batch_index_nanos_mean",
        &(Stats::get(&stats.index_nanos) / batches),
    );
    stat("batch_micros_p99", &stats.batch_micros.quantile(0.99));
    stat(
        "pass_period_micros_mean",
        &(Stats::get(&stats.pass_period_nanos) / passes / 1000),
    );
    let hits = Stats::get(&stats.get_hits);
    let gets = Stats::get(&stats.cmd_get).max(1);
    stat(
        "hit_rate_percent",
        &format!("{:.2}", hits as f64 * 100.0 / gets as f64),
    );
    text.push_str("END\r\n");
    text.into_bytes()
}

fn settings_text(worker: &Worker<'_>) -> Vec<u8> {
    let cache = worker.cache();
    let mut text = String::new();
    let _ = write!(text, "STAT maxbytes {}\r\n", cache.memory());
    let _ = write!(
        text,
        "STAT item_size_max {}\r\n",
        cache.slabs().max_item_len()
    );
    let _ = write!(
        text,
        "STAT num_threads {}\r\n",
        cache.slabs().epochs().threads()
    );
    let _ = write!(text, "STAT evictions on\r\n");
    let _ = write!(text, "STAT index_engine {}\r\n", cache.index_name());
    text.push_str("END\r\n");
    text.into_bytes()
}

/// memcached's `stats slabs`: per class that holds memory, numbered from 1 as memcached's are.
/// memcached's per-class request counters (`get_hits`, `cmd_set`, ...) are not kept, so not
/// shown; `limbo_chunks` (freed slots waiting for readers) is the cache's own.
fn slabs_text(worker: &Worker<'_>) -> Vec<u8> {
    let stats = worker.cache().slabs().stats();
    let mut text = String::new();
    for class in &stats.classes {
        let id = class.class + 1;
        let mut stat = |name: &str, value: usize| {
            let _ = write!(text, "STAT {id}:{name} {value}\r\n");
        };
        stat("chunk_size", class.slot_size);
        stat("chunks_per_page", class.slots_per_page);
        stat("total_pages", class.pages);
        stat("total_chunks", class.slots());
        stat("used_chunks", class.used());
        stat("free_chunks", class.free);
        stat("free_chunks_end", class.uncut);
        stat("limbo_chunks", class.limbo);
    }
    let _ = write!(text, "STAT active_slabs {}\r\n", stats.classes.len());
    let _ = write!(text, "STAT total_malloced {}\r\n", stats.assigned_bytes);
    text.push_str("END\r\n");
    text.into_bytes()
}

/// memcached's `stats items`: per class that holds memory (numbered as in `stats slabs`), its
/// items and what was evicted from it. `age` is the seconds since the last read of the item the
/// CLOCK hand would evict next (memcached: of its LRU's tail item; both keep an item's read time
/// to the minute, [`crate::item::ACCESS_UPDATE_S`]); `evicted_time` the seconds between the last
/// read of the latest evicted item and its eviction. Of memcached's fields, those a CLOCK cache
/// has no counterpart for are left out: the LRU segments (`number_hot`, `age_warm`,
/// `moves_to_cold`, ...), the crawler's counters, `mem_requested`. Index entries lost to cuckoo
/// overflow are evictions too, counted in `stats` (`index_lossy`), not per class.
fn items_text(worker: &Worker<'_>) -> Vec<u8> {
    let slabs = worker.cache().slabs();
    let stats = slabs.stats();
    let now_s = worker.now_s();
    let mut text = String::new();
    for class in &stats.classes {
        let id = class.class + 1;
        // SAFETY: replies are written in the round, while the thread is pinned.
        let candidate = unsafe { slabs.clock_candidate(class.class) };
        let age = candidate.map_or(0, |item| now_s.saturating_sub(item.access_s()));
        let mut stat = |name: &str, value: u64| {
            let _ = write!(text, "STAT items:{id}:{name} {value}\r\n");
        };
        stat("number", class.items as u64);
        stat("age", u64::from(age));
        stat("evicted", class.evicted);
        stat("evicted_nonzero", class.evicted_nonzero);
        stat("evicted_time", class.evicted_time);
        stat("outofmemory", class.out_of_memory);
        stat("reclaimed", class.reclaimed);
        stat("expired_unfetched", class.expired_unfetched);
        stat("evicted_unfetched", class.evicted_unfetched);
    }
    text.push_str("END\r\n");
    text.into_bytes()
}
