//! memcached's meta commands (memcached 1.6, `protocol.txt` "Meta Commands"), which modern
//! clients and memcached's own proxy speak: `mg` (get), `ms` (set), `md` (delete), `ma`
//! (arithmetic), `mn` (no-op) and `me` (debug).
//!
//! A meta command is a key and single-letter flags, some with a token (`T30`, `Oabc`). Replies
//! are two-letter codes (`VA`, `HD`, `EN`, `NS`, `EX`, `NF`, `MN`, `ME`) followed by the flags the
//! request asked back, in the order it asked them (as memcached 1.6.18 writes them), then for
//! `mg`/`ma` the recache marks `Z` (a recache token was handed out already), `X` (stale) and `W`
//! (this client won the right to recache).
//!
//! Each command becomes ops of the pipeline like the classic commands (a get, a conditional
//! store, a touch, ...), queued in the order memcached applies them, and its reply is built from
//! their outcomes and the items they located. Recache marks live in the item's header
//! ([`crate::item::TOKEN_SENT`], [`crate::item::STALE`]), set as memcached sets its item flags.
//!
//! Not taken, as memcached 1.6.18 does not take them: `E` (explicit CAS version, memcached
//! 1.6.21 on), `md ... x`, and `ms ... N` does nothing (1.6.18 answers `NS` to an append to a
//! missing key with `N`). Where 1.6.18 is off (its `me` prints a negative `exp` for a future
//! expiry), the cache gives the documented meaning (seconds left).

use bytes::BytesMut;

use super::{expiry_ms, valid_key, Output, Pending, Step, BAD_CHUNK, BAD_FORMAT, ERROR};
use super::{MemcacheSession, NON_NUMERIC, NO_MEMORY, TOO_LARGE};
use crate::cache::{StoreError, Worker};
use crate::item::{item_len, ItemRef, BINARY_KEY, NEVER, STALE, TOKEN_SENT};
use crate::op::{IncrStyle, OpId, Outcome, SetMode, KEEP_EXPIRY};
use crate::proto::put_decimal;
use crate::stats::Stats;

/// Most words of a meta command line, the command and key included (memcached 1.6.18 refuses a
/// 20th with "options flags are too long").
pub(super) const MAX_META_WORDS: usize = 19;

/// Longest opaque token (`O`), as memcached's.
const MAX_OPAQUE_LEN: usize = 32;

const BAD_TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format\r\n";
const INVALID_FLAG: &[u8] = b"CLIENT_ERROR invalid flag\r\n";
const DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR duplicate flag\r\n";
const INVALID_OR_DUPLICATE: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";
const OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long\r\n";
const BAD_KEY_ENCODING: &[u8] = b"CLIENT_ERROR error decoding key\r\n";
const BAD_SET_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ms M token\r\n";
const BAD_ARITH_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ma M token\r\n";
const TOO_MANY_WORDS: &[u8] = b"CLIENT_ERROR options flags are too long\r\n";

/// Which meta command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Command {
    Get,
    Set,
    Delete,
    Arith,
}

impl Command {
    /// Whether memcached 1.6.18 knows the flag. Every command takes every known flag (the
    /// parse is shared) and ignores those it has no use for; `P` and `L` are its proxy's.
    fn knows(flag: u8) -> bool {
        b"bcfhklqstuvCDFIJLMNOPRT".contains(&flag)
    }

    /// Whether the command writes the flag back in its reply.
    fn echoes(self, flag: u8) -> bool {
        let echoed: &[u8] = match self {
            Command::Get => b"cfhklstOT",
            Command::Set => b"ckO",
            Command::Delete => b"kO",
            Command::Arith => b"cktO",
        };
        echoed.contains(&flag)
    }
}

/// A meta command's flags, as given.
#[derive(Debug, Default)]
struct Flags {
    /// Flags to write back, in request order (`b` excluded: it follows `k`).
    order: Vec<u8>,
    opaque: Vec<u8>,
    base64: bool,
    quiet: bool,
    value: bool,
    no_bump: bool,
    invalidate: bool,
    /// `T`: new time to live, in memcached's exptime convention.
    ttl: Option<i64>,
    /// `N`: create on a miss with this time to live.
    vivify: Option<i64>,
    /// `R`: win the recache when less than this many seconds are left.
    recache: Option<i64>,
    /// `C`: required CAS version.
    cas: Option<u64>,
    /// `F`: client flags of a stored item.
    client_flags: u32,
    /// `M`: mode letter.
    mode: Option<u8>,
    /// `J`: initial value of a vivified counter.
    initial: u64,
    /// `D`: delta.
    delta: u64,
}

/// Why a flag list was refused: memcached's message for it.
type Refusal = &'static [u8];

impl Flags {
    fn parse(command: Command, words: &[&[u8]]) -> Result<Flags, Refusal> {
        let mut flags = Flags {
            delta: 1,
            ..Flags::default()
        };
        let mut seen = [false; 128];
        // md and ma answer every flag error alike.
        let generic = |refusal: Refusal| match command {
            Command::Delete | Command::Arith => INVALID_OR_DUPLICATE,
            _ => refusal,
        };
        let mut first_error = None;
        for word in words {
            let flag = word[0];
            let token = &word[1..];
            if flag >= 128 || seen[usize::from(flag)] {
                return Err(generic(DUPLICATE_FLAG));
            }
            seen[usize::from(flag)] = true;
            if !Command::knows(flag) {
                return Err(generic(INVALID_FLAG));
            }
            if command.echoes(flag) {
                flags.order.push(flag);
            }
            let number = |ok: bool| if ok { None } else { Some(generic(BAD_TOKEN)) };
            let error = match flag {
                b'b' => {
                    flags.base64 = true;
                    None
                }
                b'q' => {
                    flags.quiet = true;
                    None
                }
                b'v' => {
                    flags.value = true;
                    None
                }
                b'u' => {
                    flags.no_bump = true;
                    None
                }
                b'I' => {
                    flags.invalidate = true;
                    None
                }
                b'O' => {
                    if token.len() > MAX_OPAQUE_LEN {
                        // memcached checks its length apart: the same refusal for every command.
                        Some(OPAQUE_TOO_LONG)
                    } else {
                        flags.opaque = token.to_vec();
                        None
                    }
                }
                b'T' => {
                    flags.ttl = parse_i32(token);
                    number(flags.ttl.is_some())
                }
                b'N' => {
                    flags.vivify = parse_i32(token);
                    number(flags.vivify.is_some())
                }
                b'R' => {
                    flags.recache = parse_i32(token);
                    number(flags.recache.is_some())
                }
                b'C' => {
                    flags.cas = parse_u64(token);
                    number(flags.cas.is_some())
                }
                b'F' => match parse_u64(token) {
                    // memcached keeps the low 32 bits of a larger number.
                    Some(f) => {
                        flags.client_flags = f as u32;
                        None
                    }
                    None => Some(generic(BAD_FORMAT)),
                },
                b'M' => {
                    if token.len() == 1 {
                        flags.mode = Some(token[0]);
                        None
                    } else {
                        Some(generic(b"CLIENT_ERROR incorrect length for M token\r\n"))
                    }
                }
                b'J' => match parse_u64(token) {
                    Some(j) => {
                        flags.initial = j;
                        None
                    }
                    None => Some(generic(b"CLIENT_ERROR invalid numeric initial value\r\n")),
                },
                b'D' => match parse_u64(token) {
                    Some(d) => {
                        flags.delta = d;
                        None
                    }
                    None => Some(generic(b"CLIENT_ERROR invalid numeric delta value\r\n")),
                },
                // Flags only written back (c f h k l s t), or of no use here (P L).
                _ => None,
            };
            first_error = first_error.or(error);
        }
        match first_error {
            Some(refusal) => Err(refusal),
            None => Ok(flags),
        }
    }

    /// Whether `flag` was asked back before `other` (or `other` not at all).
    fn before(&self, flag: u8, other: u8) -> bool {
        let at = |f: u8| self.order.iter().position(|&x| x == f);
        match (at(flag), at(other)) {
            (Some(a), Some(b)) => a < b,
            (Some(_), None) => true,
            _ => false,
        }
    }
}

/// A number as memcached's `safe_strtol` into an `int32_t` takes it.
fn parse_i32(token: &[u8]) -> Option<i64> {
    let n: i64 = std::str::from_utf8(token).ok()?.parse().ok()?;
    (i64::from(i32::MIN)..=i64::from(i32::MAX))
        .contains(&n)
        .then_some(n)
}

/// A number as memcached's `safe_strtoull` takes it: digits only, no sign.
fn parse_u64(token: &[u8]) -> Option<u64> {
    if token.is_empty() || !token.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// A meta command waiting for its reply.
#[derive(Debug)]
pub(super) struct MetaReply {
    command: Command,
    flags: Flags,
    /// The key as the client wrote it (base64 text under `b`), for `k` on a miss.
    key: Vec<u8>,
    /// The op whose outcome decides the reply.
    op: OpId,
    /// A get queued after the command's writes, whose item the reply's flags describe.
    after: Option<OpId>,
    /// The store of a vivified item (`mg ... N`, `ma ... N`, `ms ... MA N`).
    vivify: Option<OpId>,
}

impl MemcacheSession {
    /// `mn`, `me`, `mg`, `ms`, `md`, `ma`: the command whose line ends at `line_end`.
    pub(super) fn meta(
        &mut self,
        input: &[u8],
        line_end: usize,
        words: &[&[u8]],
        word_count: usize,
        worker: &mut Worker<'_>,
    ) -> (usize, Step) {
        let done = (line_end, Step::Done);
        let command = match words[0] {
            b"mn" => {
                self.pending.push(Pending::Text(b"MN\r\n"));
                return done;
            }
            b"me" => {
                let key = match words {
                    [_, key] => Some(key.to_vec()),
                    [_, key, b"b"] => base64_decode(key),
                    _ => None,
                };
                match key.filter(|k| valid_key(k)) {
                    Some(key) => {
                        let id = worker.get(&key);
                        self.pending.push(Pending::MetaDebug(id));
                    }
                    None => self.pending.push(Pending::Text(BAD_FORMAT)),
                }
                return done;
            }
            b"mg" => Command::Get,
            b"ms" => Command::Set,
            b"md" => Command::Delete,
            _ => Command::Arith,
        };
        let Some(&raw_key) = words.get(1) else {
            self.pending.push(Pending::Text(ERROR));
            return done;
        };
        if word_count > MAX_META_WORDS {
            // Refused before the data's length is read: an ms's data is not skipped.
            self.pending.push(Pending::Text(if command == Command::Set {
                b"CLIENT_ERROR options flags too long\r\n"
            } else {
                TOO_MANY_WORDS
            }));
            return done;
        }
        if raw_key.len() > super::MAX_KEY_LEN || (!valid_key(raw_key) && command != Command::Set) {
            self.pending.push(Pending::Text(BAD_FORMAT));
            return done;
        }
        // ms: the data's length comes before the flags.
        let (data_len, flag_words) = if command == Command::Set {
            match words.get(2).and_then(|w| parse_u64(w)) {
                Some(n) => (Some(n as usize), &words[3.min(words.len())..]),
                None => {
                    self.pending.push(Pending::Text(BAD_FORMAT));
                    return done;
                }
            }
        } else {
            (None, &words[2.min(words.len())..])
        };
        // From here a refused ms still skips its data, as memcached does once it knows the length.
        let refuse = |session: &mut MemcacheSession, text: &'static [u8]| {
            session.pending.push(Pending::Text(text));
            match data_len {
                Some(n) => {
                    session.swallow = n.saturating_add(2);
                    (line_end, Step::Done)
                }
                None => (line_end, Step::Done),
            }
        };
        let flags = match Flags::parse(command, flag_words) {
            Ok(flags) => flags,
            Err(refusal) => return refuse(self, refusal),
        };
        let key = if flags.base64 {
            match base64_decode(raw_key).filter(|k| valid_key(k)) {
                Some(key) => key,
                None if matches!(command, Command::Delete | Command::Arith) => {
                    return refuse(self, INVALID_OR_DUPLICATE)
                }
                None => return refuse(self, BAD_KEY_ENCODING),
            }
        } else if valid_key(raw_key) {
            raw_key.to_vec()
        } else {
            return refuse(self, BAD_FORMAT);
        };
        let mut reply = MetaReply {
            command,
            flags,
            key: raw_key.to_vec(),
            op: OpId(0),
            after: None,
            vivify: None,
        };
        let f = &reply.flags;
        let binary = if f.base64 { BINARY_KEY } else { 0 };
        // A C of 0 matches no item (memcached's versions start at 1); the ops take 0 as "any".
        let cas = f
            .cas
            .map(|c| if c == 0 { u64::MAX } else { c })
            .unwrap_or(0);
        match command {
            Command::Get => {
                reply.op = worker.get(&key);
                if let Some(ttl) = f.ttl {
                    let expire = expiry_ms(worker, ttl);
                    worker.touch(&key, expire);
                }
                if let Some(ttl) = f.vivify {
                    let expire = expiry_ms(worker, ttl);
                    let state = TOKEN_SENT | binary;
                    match worker.set_marked(&key, &[], 0, expire, SetMode::Add, state) {
                        Ok(id) => reply.vivify = Some(id),
                        Err(StoreError::Retry) => return (0, Step::Stalled),
                        Err(_) => {}
                    }
                }
            }
            Command::Set => {
                let data_len = data_len.unwrap_or_default();
                if data_len > worker.cache().slabs().max_item_len() {
                    Stats::add(&worker.cache().stats().store_too_large, 1);
                    return refuse(self, TOO_LARGE);
                }
                let mode = match (f.mode.unwrap_or(b'S'), f.cas) {
                    (b'S', Some(cas)) if f.invalidate => SetMode::CasOrStale(cas),
                    (b'S' | b'R', Some(cas)) => SetMode::Cas(cas),
                    (b'S', None) => SetMode::Always,
                    (b'E', _) => SetMode::Add,
                    (b'R', None) => SetMode::Replace,
                    (b'A', None) => SetMode::Append,
                    (b'P', None) => SetMode::Prepend,
                    (b'A', Some(cas)) => SetMode::CasAppend {
                        cas,
                        prepend: false,
                    },
                    (b'P', Some(cas)) => SetMode::CasAppend { cas, prepend: true },
                    _ => return refuse(self, BAD_SET_MODE),
                };
                let total = line_end + data_len + 2;
                if input.len() < total {
                    return (0, Step::NeedMore);
                }
                if &input[line_end + data_len..total] != b"\r\n" {
                    self.pending.push(Pending::Text(BAD_CHUNK));
                    return (total, Step::Done);
                }
                let data = &input[line_end..line_end + data_len];
                let expire = expiry_ms(worker, f.ttl.unwrap_or(0));
                match worker.set_marked(&key, &[data], f.client_flags, expire, mode, binary) {
                    Ok(id) => reply.op = id,
                    Err(StoreError::Retry) => return (0, Step::Stalled),
                    Err(StoreError::TooLarge) => return refuse(self, TOO_LARGE),
                    Err(StoreError::NoMemory) => {
                        self.pending.push(Pending::Text(NO_MEMORY));
                        return (total, Step::Done);
                    }
                }
                if f.order.contains(&b'c') {
                    reply.after = Some(worker.get(&key));
                }
                self.pending.push(Pending::Meta(Box::new(reply)));
                return (total, Step::Done);
            }
            Command::Delete => {
                let expire = match f.ttl {
                    Some(ttl) if f.invalidate => expiry_ms(worker, ttl),
                    _ => KEEP_EXPIRY,
                };
                reply.op = worker.meta_delete(&key, cas, f.invalidate, expire);
            }
            Command::Arith => {
                let decr = match f.mode.unwrap_or(b'I') {
                    b'I' | b'+' => false,
                    b'D' | b'-' => true,
                    _ => return refuse(self, BAD_ARITH_MODE),
                };
                reply.op = worker.incr_if(&key, f.delta, decr, IncrStyle::Memcached, cas);
                if let Some(ttl) = f.vivify {
                    // Incremented first: on a miss the counter is created with J, not J + D.
                    let expire = expiry_ms(worker, ttl);
                    let initial = f.initial.to_string();
                    let value: [&[u8]; 1] = [initial.as_bytes()];
                    // memcached does not mark a counter it creates as stored with a base64 key.
                    match worker.set(&key, &value, 0, expire, SetMode::Add) {
                        Ok(id) => reply.vivify = Some(id),
                        Err(StoreError::Retry) => return (0, Step::Stalled),
                        Err(_) => {}
                    }
                }
                if let Some(ttl) = f.ttl {
                    let expire = expiry_ms(worker, ttl);
                    worker.touch(&key, expire);
                }
                if f.value || f.order.iter().any(|x| b"ct".contains(x)) {
                    reply.after = Some(worker.get(&key));
                }
            }
        }
        self.pending.push(Pending::Meta(Box::new(reply)));
        done
    }
}

impl MetaReply {
    /// Writes the reply.
    pub(super) fn write(&self, worker: &mut Worker<'_>, out: &mut Output) {
        match self.command {
            Command::Get => self.write_get(worker, out),
            Command::Set => {
                let outcome = worker.outcome(self.op);
                let code: &[u8] = match outcome {
                    Outcome::Stored => b"HD",
                    Outcome::NotStored => b"NS",
                    Outcome::Exists => b"EX",
                    Outcome::NotFound => b"NF",
                    _ => return out.extend_from_slice(NO_MEMORY),
                };
                if code == b"HD" && self.flags.quiet {
                    return;
                }
                let item = match code {
                    b"HD" => self.after.and_then(|id| worker.peek(id)),
                    _ => None,
                };
                out.extend_from_slice(code);
                self.write_flags(worker, item.as_ref(), out);
                out.extend_from_slice(b"\r\n");
            }
            Command::Delete => {
                let code: &[u8] = match worker.outcome(self.op) {
                    Outcome::Deleted if self.flags.quiet => return,
                    Outcome::Deleted => b"HD",
                    Outcome::NotFound => b"NF",
                    Outcome::Exists => b"EX",
                    _ => return out.extend_from_slice(NO_MEMORY),
                };
                out.extend_from_slice(code);
                self.write_flags(worker, None, out);
                out.extend_from_slice(b"\r\n");
            }
            Command::Arith => self.write_arith(worker, out),
        }
    }

    fn write_get(&self, worker: &mut Worker<'_>, out: &mut Output) {
        let vivified = self.vivify.and_then(|id| worker.stored(id));
        let found = match vivified {
            Some(item) => {
                // The miss still counts.
                let _ = worker.read_marked(self.op, false);
                Some((item, false))
            }
            None => worker.read_marked(self.op, !self.flags.no_bump),
        };
        let Some((item, fetched)) = found else {
            if !self.flags.quiet {
                out.extend_from_slice(b"EN");
                self.write_flags(worker, None, out);
                out.extend_from_slice(b"\r\n");
            }
            return;
        };
        let state = item.state();
        let token_sent = vivified.is_none() && state & TOKEN_SENT != 0;
        let stale = state & STALE != 0;
        let mut won = vivified.is_some();
        if !token_sent && !won {
            let expire = item.expire_ms();
            let closing = self
                .flags
                .recache
                .is_some_and(|r| expire != NEVER && expire < expiry_ms(worker, r));
            if closing || stale {
                won = true;
                item.mark(TOKEN_SENT);
            }
        }
        let value = item.value();
        if self.flags.value {
            out.extend_from_slice(b"VA ");
            put_decimal(out, value.len() as u64);
        } else {
            out.extend_from_slice(b"HD");
        }
        let ttl_first = self.flags.ttl.filter(|_| self.flags.before(b'T', b't'));
        let shown = Shown {
            item: Some(&item),
            fetched,
            expire_ms: ttl_first.map(|ttl| expiry_ms(worker, ttl)),
        };
        self.write_flags_of(worker, &shown, out);
        for (mark, on) in [(b'Z', token_sent), (b'X', stale), (b'W', won)] {
            if on {
                out.extend_from_slice(&[b' ', mark]);
            }
        }
        out.extend_from_slice(b"\r\n");
        if self.flags.value {
            out.value(&item);
            out.extend_from_slice(b"\r\n");
        }
    }

    fn write_arith(&self, worker: &mut Worker<'_>, out: &mut Output) {
        let number = match worker.outcome(self.op) {
            Outcome::Unsigned(n) => n,
            Outcome::NotFound => match self.vivify.map(|id| worker.outcome(id)) {
                Some(Outcome::Stored) => self.flags.initial,
                _ => {
                    out.extend_from_slice(b"NF");
                    self.write_flags(worker, None, out);
                    return out.extend_from_slice(b"\r\n");
                }
            },
            Outcome::NotANumber => return out.extend_from_slice(NON_NUMERIC),
            Outcome::Exists => {
                out.extend_from_slice(b"EX");
                self.write_flags(worker, None, out);
                return out.extend_from_slice(b"\r\n");
            }
            _ => return out.extend_from_slice(NO_MEMORY),
        };
        if self.flags.quiet {
            return;
        }
        let item = self.after.and_then(|id| worker.peek(id));
        let mut digits = BytesMut::new();
        put_decimal(&mut digits, number);
        if self.flags.value {
            out.extend_from_slice(b"VA ");
            put_decimal(out, digits.len() as u64);
        } else {
            out.extend_from_slice(b"HD");
        }
        self.write_flags(worker, item.as_ref(), out);
        out.extend_from_slice(b"\r\n");
        if self.flags.value {
            out.extend_from_slice(&digits);
            out.extend_from_slice(b"\r\n");
        }
    }

    fn write_flags(&self, worker: &Worker<'_>, item: Option<&ItemRef<'_>>, out: &mut Output) {
        let shown = Shown {
            item,
            fetched: false,
            expire_ms: None,
        };
        self.write_flags_of(worker, &shown, out);
    }

    /// The flags asked back, in request order: those of the item when there is one, `k` and
    /// `O` always (memcached writes those on a miss too), `c` as 0 for a store that did not
    /// happen.
    fn write_flags_of(&self, worker: &Worker<'_>, shown: &Shown<'_, '_>, out: &mut Output) {
        for &flag in &self.flags.order {
            match (flag, shown.item) {
                (b'O', _) => {
                    out.extend_from_slice(b" O");
                    out.extend_from_slice(&self.flags.opaque);
                }
                // mg: the key as the item was stored (base64 if it was stored with `b`); the
                // others, and a miss: as asked.
                (b'k', item) => {
                    out.extend_from_slice(b" k");
                    match item.filter(|_| self.command == Command::Get) {
                        Some(item) if item.state() & BINARY_KEY != 0 => {
                            base64_encode(item.key(), out);
                            out.extend_from_slice(b" b");
                        }
                        Some(item) => out.extend_from_slice(item.key()),
                        None => {
                            out.extend_from_slice(&self.key);
                            if self.flags.base64 {
                                out.extend_from_slice(b" b");
                            }
                        }
                    }
                }
                (b'c', None) if self.command == Command::Set => out.extend_from_slice(b" c0"),
                (b'c', Some(item)) => {
                    out.extend_from_slice(b" c");
                    put_decimal(out, item.cas());
                }
                (b'f', Some(item)) => {
                    out.extend_from_slice(b" f");
                    put_decimal(out, u64::from(item.flags()));
                }
                (b's', Some(item)) => {
                    out.extend_from_slice(b" s");
                    put_decimal(out, item.value().len() as u64);
                }
                (b't', Some(item)) => {
                    out.extend_from_slice(b" t");
                    match shown.expire_ms.unwrap_or_else(|| item.expire_ms()) {
                        NEVER => out.extend_from_slice(b"-1"),
                        at => put_decimal(out, seconds_left(worker, at)),
                    }
                }
                (b'h', Some(_)) => {
                    out.extend_from_slice(if shown.fetched { b" h1" } else { b" h0" });
                }
                (b'l', Some(item)) => {
                    out.extend_from_slice(b" l");
                    let idle = worker.now_s().saturating_sub(item.access_s());
                    put_decimal(out, u64::from(idle));
                }
                _ => {}
            }
        }
    }
}

/// What the flags of a reply describe.
struct Shown<'i, 'a> {
    item: Option<&'i ItemRef<'a>>,
    /// The item had been read before this request (`h`).
    fetched: bool,
    /// Its expiry as `t` shows it, when a `T` before `t` changed it.
    expire_ms: Option<u64>,
}

/// Whole seconds until `at` (cache clock), rounded up as memcached's second-granular clock shows
/// a time to live just set.
fn seconds_left(worker: &Worker<'_>, at: u64) -> u64 {
    at.saturating_sub(worker.now_ms()).div_ceil(1000)
}

/// `me <key>`: memcached's debug line for an item, `ME <key> exp=<seconds left, -1 for never>
/// la=<seconds since last read> cas=<cas> fetch=<yes|no> cls=<class> size=<bytes>`, or `EN`.
pub(super) fn write_debug(worker: &mut Worker<'_>, id: OpId, out: &mut Output) {
    let Some(item) = worker.peek(id) else {
        out.extend_from_slice(b"EN\r\n");
        return;
    };
    let size = item_len(item.key().len(), item.value().len());
    let class = worker.cache().slabs().classes().for_len(size).unwrap_or(0);
    out.extend_from_slice(b"ME ");
    out.extend_from_slice(item.key());
    out.extend_from_slice(b" exp=");
    match item.expire_ms() {
        NEVER => out.extend_from_slice(b"-1"),
        at => put_decimal(out, seconds_left(worker, at)),
    }
    out.extend_from_slice(b" la=");
    put_decimal(
        out,
        u64::from(worker.now_s().saturating_sub(item.access_s())),
    );
    out.extend_from_slice(b" cas=");
    put_decimal(out, item.cas());
    let fetched = item.state() & crate::item::FETCHED != 0;
    out.extend_from_slice(if fetched {
        b" fetch=yes cls="
    } else {
        b" fetch=no cls="
    });
    put_decimal(out, class as u64 + 1);
    out.extend_from_slice(b" size=");
    put_decimal(out, size as u64);
    out.extend_from_slice(b"\r\n");
}

/// Writes `bytes` in standard base64 with padding.
fn base64_encode(bytes: &[u8], out: &mut BytesMut) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.extend_from_slice(&[ALPHABET[(n >> (18 - 6 * i) & 63) as usize]]);
            } else {
                out.extend_from_slice(b"=");
            }
        }
    }
}

/// Standard base64 with padding (memcached's `b` keys); `None` for anything else.
fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    if text.is_empty() || !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let last = text.len() / 4 - 1;
    for (i, quad) in text.chunks_exact(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i != last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = n << 6 | sextet(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_keys_decode_as_memcached_expects() {
        assert_eq!(base64_decode(b"Zm9v").as_deref(), Some(&b"foo"[..]));
        assert_eq!(base64_decode(b"Zm8=").as_deref(), Some(&b"fo"[..]));
        assert_eq!(base64_decode(b"Zg==").as_deref(), Some(&b"f"[..]));
        assert_eq!(base64_decode(b"AP8A").as_deref(), Some(&[0u8, 255, 0][..]));
        for bytes in [&b"foo"[..], b"fo", b"f", &[0, 255, 0, 7]] {
            let mut text = BytesMut::new();
            base64_encode(bytes, &mut text);
            assert_eq!(base64_decode(&text).as_deref(), Some(bytes), "{text:?}");
        }
        for bad in [&b"!!!"[..], b"Zm9", b"Z===", b"Zg==Zm9v", b"", b"Zm 9"] {
            assert_eq!(base64_decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn flags_keep_request_order_and_refuse_as_memcached() {
        let f = Flags::parse(Command::Get, &[b"s", b"v", b"T30", b"t", b"Oab", b"k"]).unwrap();
        assert_eq!(f.order, b"sTtOk");
        assert!(f.value && f.before(b'T', b't'));
        assert_eq!(f.ttl, Some(30));
        let refused = |c, words: &[&[u8]]| Flags::parse(c, words).unwrap_err();
        assert_eq!(refused(Command::Get, &[b"v", b"v"]), DUPLICATE_FLAG);
        assert_eq!(refused(Command::Get, &[b"!"]), INVALID_FLAG);
        assert_eq!(refused(Command::Get, &[b"E5"]), INVALID_FLAG);
        let ignored = Flags::parse(Command::Delete, &[b"v", b"t", b"c", b"k", b"P1"]).unwrap();
        assert_eq!(ignored.order, b"k");
        assert_eq!(refused(Command::Get, &[b"Tx"]), BAD_TOKEN);
        assert_eq!(refused(Command::Arith, &[b"Dx"]), INVALID_OR_DUPLICATE);
        assert_eq!(refused(Command::Delete, &[b"E5"]), INVALID_OR_DUPLICATE);
        assert_eq!(refused(Command::Set, &[b"F-1"]), BAD_FORMAT);
        let long = [b'O'; 40];
        assert_eq!(refused(Command::Get, &[&long]), OPAQUE_TOO_LONG);
    }
}
