//! Mega-KV's binary protocol over TCP (batches follow each other on the stream) and over UDP
//! (one batch per datagram, answered by datagrams to the sender). The codec is
//! `shale_proto::megakv`; this module runs its jobs.
//!
//! Only GETs are answered, in request order. A SET the cache refuses (too large, no memory) has
//! no way to say so in this protocol: it is dropped and counted (`store_too_large`,
//! `store_no_memory`). A malformed batch closes a TCP connection; a malformed datagram is
//! dropped.

use bytes::BytesMut;
use shale_proto::megakv::{
    decode_batch, encode_reply, encode_value_reply_header, parse_batch, GetReply, Job, Limits,
};

use super::{Output, Parsed, Session, MAX_REQUESTS_PER_ROUND};
use crate::cache::{StoreError, Worker};
use crate::item::NEVER;
use crate::op::{OpId, SetMode};
use crate::stats::Stats;

/// Most payload in one reply datagram (IPv4's UDP maximum).
pub const MAX_DATAGRAM: usize = 65_507;

/// The limits the cache enforces on Mega-KV batches: the codec's, with values capped at the
/// largest item.
pub(crate) fn limits(worker: &Worker<'_>) -> Limits {
    Limits {
        max_value_len: worker.cache().slabs().max_item_len(),
        ..Limits::default()
    }
}

/// Queues `job`; `Err(())` if it must wait for memory.
fn queue(job: &Job, worker: &mut Worker<'_>, gets: &mut Vec<OpId>) -> Result<(), ()> {
    match job {
        Job::Get { key } => gets.push(worker.get(key)),
        Job::Set { key, value } => match worker.set(key, &[value], 0, NEVER, SetMode::Always) {
            Ok(_) | Err(StoreError::TooLarge) | Err(StoreError::NoMemory) => {}
            Err(StoreError::Retry) => return Err(()),
        },
    }
    Ok(())
}

/// Appends the reply of each GET in `gets`, long values lent from slab memory
/// ([`Output::value`]).
fn reply_gets(gets: &[OpId], worker: &mut Worker<'_>, out: &mut Output) {
    for &id in gets {
        match worker.read(id) {
            // Values are at most an item long, far below the 32-bit length: the header is
            // always written.
            Some(item) => {
                if encode_value_reply_header(item.value().len(), out).is_ok() {
                    out.value(&item);
                }
            }
            None => {
                let _ = encode_reply(&GetReply::NotFound, out);
            }
        }
    }
}

/// A Mega-KV TCP connection.
#[derive(Debug, Default)]
pub(crate) struct MegaKvSession {
    /// A decoded batch not fully queued yet, and the next job to queue.
    current: Option<(shale_proto::megakv::Batch, usize)>,
    gets: Vec<OpId>,
    closing: bool,
}

impl Session for MegaKvSession {
    fn parse(&mut self, input: &mut BytesMut, worker: &mut Worker<'_>) -> Parsed {
        if self.closing {
            return Parsed::Close;
        }
        let limits = limits(worker);
        let mut queued = 0;
        loop {
            if self.current.is_none() {
                match decode_batch(input, &limits) {
                    Ok(Some(batch)) => self.current = Some((batch, 0)),
                    Ok(None) => return Parsed::NeedMore,
                    Err(_) => {
                        Stats::add(&worker.cache().stats().protocol_errors, 1);
                        self.closing = true;
                        return Parsed::Close;
                    }
                }
            }
            let (batch, next) = self.current.as_mut().expect("a batch");
            while *next < batch.jobs.len() {
                if queue(&batch.jobs[*next], worker, &mut self.gets).is_err() {
                    return Parsed::Stalled;
                }
                *next += 1;
                queued += 1;
            }
            self.current = None;
            if queued >= MAX_REQUESTS_PER_ROUND {
                return Parsed::Budget;
            }
        }
    }

    fn reply(&mut self, worker: &mut Worker<'_>, out: &mut Output) {
        reply_gets(&self.gets, worker, out);
        self.gets.clear();
    }
}

/// The datagrams a worker has taken in this round and the GETs each is owed.
#[derive(Debug, Default)]
pub(crate) struct UdpRound {
    requests: Vec<(std::net::SocketAddr, Vec<OpId>)>,
}

impl UdpRound {
    /// Queues the jobs of one datagram from `from`. A malformed datagram is dropped; a SET that
    /// must wait for memory is dropped too (UDP gives no delivery promise).
    pub(crate) fn datagram(
        &mut self,
        from: std::net::SocketAddr,
        bytes: &[u8],
        worker: &mut Worker<'_>,
    ) {
        let limits = limits(worker);
        let batch = match parse_batch(bytes, &limits) {
            Ok(Some((batch, _))) => batch,
            _ => {
                Stats::add(&worker.cache().stats().protocol_errors, 1);
                return;
            }
        };
        let mut gets = Vec::new();
        for job in &batch.jobs {
            if queue(job, worker, &mut gets).is_err() {
                Stats::add(&worker.cache().stats().store_no_memory, 1);
            }
        }
        if !gets.is_empty() {
            self.requests.push((from, gets));
        }
    }

    /// Whether any datagram waits for replies.
    pub(crate) fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Builds the reply datagrams: replies in order, cut between replies so each datagram fits;
    /// a single reply too large for a datagram is sent as not-found (and counted).
    pub(crate) fn replies(
        &mut self,
        worker: &mut Worker<'_>,
        mut send: impl FnMut(std::net::SocketAddr, &[u8]),
    ) {
        let mut datagram = BytesMut::new();
        let mut one = Output::copying();
        for (to, gets) in self.requests.drain(..) {
            datagram.clear();
            for id in gets {
                one.clear();
                reply_gets(&[id], worker, &mut one);
                if one.len() > MAX_DATAGRAM {
                    Stats::add(&worker.cache().stats().udp_oversized, 1);
                    one.clear();
                    let _ = encode_reply(&GetReply::NotFound, &mut one);
                }
                if datagram.len() + one.len() > MAX_DATAGRAM {
                    send(to, &datagram);
                    datagram.clear();
                }
                datagram.extend_from_slice(&one);
            }
            if !datagram.is_empty() {
                send(to, &datagram);
            }
        }
    }
}
