//! The cache's three protocols, as sessions over a connection's buffers.
//!
//! A session turns the bytes a connection has read into ops of the round ([`Session::parse`])
//! and, once the round's pass has run, writes every reply in request order
//! ([`Session::reply`]). Errors found while parsing are queued as replies in their place, so a
//! pipeline's replies keep their order. Parsing stops early when a request needs memory that is
//! still being evicted ([`Parsed::Stalled`]): the request is kept and retried next round.
//!
//! # Contract for untrusted input
//! No byte sequence makes a session panic or allocate more than its limits; a malformed request
//! gets the protocol's error reply, and a stream that cannot be framed any more is answered (where
//! the protocol can) and closed.

pub(crate) mod megakv;
pub(crate) mod memcache;
pub(crate) mod output;
pub(crate) mod resp;

use bytes::BytesMut;

use crate::cache::Worker;
pub(crate) use output::Output;

/// Most requests one connection parses per round, so one busy pipeline cannot starve the others
/// or hold a round's memory without bound.
pub const MAX_REQUESTS_PER_ROUND: usize = 1024;

/// Reply bytes a connection may hold unsent before it is parsed no further (back pressure on a
/// client that does not read its replies).
pub const MAX_PENDING_OUTPUT: usize = 16 << 20;

/// How far a parse got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Every complete request was taken; more bytes are needed for the next.
    NeedMore,
    /// The per-round budget ran out with complete requests left.
    Budget,
    /// A request waits for memory; retry next round.
    Stalled,
    /// Close the connection once the queued replies are written.
    Close,
}

/// One protocol's state on one connection.
pub(crate) trait Session {
    /// Queues the ops of as many complete requests in `input` as the budget allows, consuming
    /// their bytes (or keeping them internally until they run).
    fn parse(&mut self, input: &mut BytesMut, worker: &mut Worker<'_>) -> Parsed;

    /// Writes the replies of every request queued since the last call (large values lent, see
    /// [`Output`]).
    fn reply(&mut self, worker: &mut Worker<'_>, output: &mut Output);
}

/// Which protocol a listener speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// RESP, the Redis protocol (the string subset).
    Resp,
    /// The memcached text protocol.
    Memcache,
    /// Mega-KV's binary protocol.
    MegaKv,
}

impl Protocol {
    /// A fresh session of this protocol.
    pub(crate) fn session(self) -> Box<dyn Session + Send> {
        match self {
            Protocol::Resp => Box::new(resp::RespSession::default()),
            Protocol::Memcache => Box::new(memcache::MemcacheSession::default()),
            Protocol::MegaKv => Box::new(megakv::MegaKvSession::default()),
        }
    }

    /// The refusal a connection over `maxclients` gets before it is closed.
    pub(crate) fn too_many_clients(self) -> &'static [u8] {
        match self {
            Protocol::Resp => b"-ERR max number of clients reached\r\n",
            Protocol::Memcache => b"SERVER_ERROR Too many open connections\r\n",
            Protocol::MegaKv => b"",
        }
    }
}

/// Appends the decimal digits of `n`.
pub(crate) fn put_decimal(out: &mut BytesMut, n: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut v = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}
