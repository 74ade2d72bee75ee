//! A connection thread: rounds of (wait for readiness, read and parse every ready connection,
//! one scheduler pass, write every reply).
//!
//! Sockets are edge-triggered. A connection that still has unread bytes, unparsed requests or a
//! request waiting for memory stays on the ready list, and the next wait does not block.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use bytes::BytesMut;
use mio::net::{TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token};

use crate::cache::{Cache, Worker};
use crate::proto::megakv::UdpRound;
use crate::proto::{Output, Parsed, Protocol, Session, MAX_PENDING_OUTPUT};
use crate::stats::Stats;

pub(super) const WAKER: Token = Token(0);
const UDP: Token = Token(1);
const FIRST_CONN: usize = 2;

/// Bytes read from one connection per round at most.
const READ_PER_ROUND: usize = 256 * 1024;
/// Datagrams taken per round at most.
const DATAGRAMS_PER_ROUND: usize = 256;
/// The read buffer of a connection shrinks back to this when idle.
const IDLE_BUFFER: usize = 16 * 1024;

struct Conn {
    stream: TcpStream,
    session: Box<dyn Session + Send>,
    input: BytesMut,
    output: Output,
    /// On the ready list.
    ready: bool,
    /// Watching for writability (output was left unsent).
    writing: bool,
    /// Close once the output is sent.
    closing: bool,
    /// The peer is gone; drop at the end of the round.
    dead: bool,
    /// The peer has shut its side: read to the end of the stream.
    read_closed: bool,
    /// Parsed into this round (owes replies).
    active: bool,
}

struct Thread<'c> {
    poll: Poll,
    worker: Worker<'c>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    ready: VecDeque<usize>,
    active: Vec<usize>,
    udp: UdpSocket,
    udp_ready: bool,
    udp_round: UdpRound,
    scratch: Vec<u8>,
    stats: &'c Stats,
}

pub(super) fn run(
    thread: usize,
    poll: Poll,
    incoming: mpsc::Receiver<(TcpStream, Protocol)>,
    mut udp: UdpSocket,
    cache: Arc<Cache>,
    shutdown: Arc<AtomicBool>,
) {
    if let Err(e) = poll.registry().register(&mut udp, UDP, Interest::READABLE) {
        tracing::error!(error = %e, "cannot watch the UDP socket");
    }
    let mut t = Thread {
        poll,
        worker: cache.worker(thread),
        conns: Vec::new(),
        free: Vec::new(),
        ready: VecDeque::new(),
        active: Vec::new(),
        udp,
        udp_ready: true,
        udp_round: UdpRound::default(),
        scratch: vec![0; 64 * 1024],
        stats: cache.stats(),
    };
    let mut events = Events::with_capacity(1024);
    while !shutdown.load(Ordering::SeqCst) {
        let busy = !t.ready.is_empty() || t.udp_ready;
        let timeout = busy.then_some(std::time::Duration::ZERO);
        if let Err(e) = t.poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::error!(error = %e, "poll failed");
                break;
            }
        }
        t.worker.begin();
        for event in events.iter() {
            match event.token() {
                WAKER => t.adopt(&incoming),
                UDP => t.udp_ready = true,
                Token(token) => {
                    let closed = event.is_read_closed() || event.is_error();
                    let readable = event.is_readable() || closed;
                    t.event(token - FIRST_CONN, readable, event.is_writable(), closed);
                }
            }
        }
        t.round();
        t.worker.end();
    }
}

impl Thread<'_> {
    fn adopt(&mut self, incoming: &mpsc::Receiver<(TcpStream, Protocol)>) {
        while let Ok((mut stream, protocol)) = incoming.try_recv() {
            let slot = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let token = Token(slot + FIRST_CONN);
            if self
                .poll
                .registry()
                .register(&mut stream, token, Interest::READABLE)
                .is_err()
            {
                self.free.push(slot);
                Stats::add_signed_down(&self.stats.curr_connections);
                continue;
            }
            self.conns[slot] = Some(Conn {
                stream,
                session: protocol.session(),
                input: BytesMut::with_capacity(IDLE_BUFFER),
                output: Output::default(),
                ready: true,
                writing: false,
                closing: false,
                dead: false,
                read_closed: false,
                active: false,
            });
            self.ready.push_back(slot);
        }
    }

    fn event(&mut self, slot: usize, readable: bool, writable: bool, closed: bool) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        conn.read_closed |= closed;
        if writable && conn.writing {
            flush(conn, self.stats);
        }
        if (readable || writable) && !conn.ready {
            conn.ready = true;
            self.ready.push_back(slot);
        }
    }

    fn round(&mut self) {
        // Parse every ready connection.
        let mut again = Vec::new();
        while let Some(slot) = self.ready.pop_front() {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            conn.ready = false;
            if conn.output.len() > MAX_PENDING_OUTPUT {
                // Wait for the client to read its replies (a writable event re-queues it).
                continue;
            }
            let more_to_read = read(conn, &mut self.scratch, self.stats);
            let parsed = conn.session.parse(&mut conn.input, &mut self.worker);
            if !conn.active {
                conn.active = true;
                self.active.push(slot);
            }
            match parsed {
                Parsed::Close => conn.closing = true,
                Parsed::Budget | Parsed::Stalled => again.push(slot),
                Parsed::NeedMore if more_to_read => again.push(slot),
                Parsed::NeedMore => {}
            }
            if conn.dead {
                conn.closing = true;
            }
        }
        if self.udp_ready {
            self.udp_ready = self.receive_datagrams();
        }
        // One pass for everything queued.
        self.worker.execute();
        // Replies: all built, then the round's hits and misses counted, then sent, so a client
        // that reads its reply and then asks for `stats` sees its requests counted. They are
        // sent before the round ends (`Worker::end`): they may lend values from slab memory.
        let active = std::mem::take(&mut self.active);
        for &slot in &active {
            if let Some(conn) = self.conns[slot].as_mut() {
                conn.session.reply(&mut self.worker, &mut conn.output);
            }
        }
        self.worker.publish_counts();
        for slot in active {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            conn.active = false;
            flush(conn, self.stats);
            if conn.dead || (conn.closing && conn.output.is_empty()) {
                self.close(slot);
                continue;
            }
            if !conn.output.is_empty() && !conn.writing {
                conn.writing = true;
                let token = Token(slot + FIRST_CONN);
                let _ = self.poll.registry().reregister(
                    &mut conn.stream,
                    token,
                    Interest::READABLE | Interest::WRITABLE,
                );
            } else if conn.output.is_empty() && conn.writing {
                conn.writing = false;
                let token = Token(slot + FIRST_CONN);
                let _ =
                    self.poll
                        .registry()
                        .reregister(&mut conn.stream, token, Interest::READABLE);
            }
            if conn.input.is_empty() && conn.input.capacity() > 4 * IDLE_BUFFER {
                conn.input = BytesMut::with_capacity(IDLE_BUFFER);
            }
        }
        if !self.udp_round.is_empty() {
            let udp = &self.udp;
            let stats = self.stats;
            self.udp_round.replies(&mut self.worker, |to, bytes| {
                if udp.send_to(bytes, to).is_ok() {
                    Stats::add(&stats.bytes_written, bytes.len() as u64);
                }
            });
        }
        for slot in again {
            if let Some(conn) = self.conns[slot].as_mut() {
                if !conn.ready && !conn.closing {
                    conn.ready = true;
                    self.ready.push_back(slot);
                }
            }
        }
    }

    /// Takes datagrams until none is left or the round's share is used; true if more may wait.
    fn receive_datagrams(&mut self) -> bool {
        for _ in 0..DATAGRAMS_PER_ROUND {
            match self.udp.recv_from(&mut self.scratch) {
                Ok((n, from)) => {
                    Stats::add(&self.stats.bytes_read, n as u64);
                    let bytes = &self.scratch[..n];
                    self.udp_round.datagram(from, bytes, &mut self.worker);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ICMP errors from earlier sends and the like: nothing to do with this socket.
                Err(_) => return true,
            }
        }
        true
    }

    fn close(&mut self, slot: usize) {
        if let Some(mut conn) = self.conns[slot].take() {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            Stats::add_signed_down(&self.stats.curr_connections);
            self.free.push(slot);
        }
    }
}

/// Reads what the socket has, up to the round's share; true if it may have more.
fn read(conn: &mut Conn, scratch: &mut [u8], stats: &Stats) -> bool {
    let mut taken = 0;
    while taken < READ_PER_ROUND {
        match conn.stream.read(scratch) {
            Ok(0) => {
                conn.dead = true;
                return false;
            }
            Ok(n) => {
                conn.input.extend_from_slice(&scratch[..n]);
                taken += n;
                Stats::add(&stats.bytes_read, n as u64);
                if n < scratch.len() && !conn.read_closed {
                    // A short read usually drained the socket; edge-triggered readiness comes
                    // again if not.
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                conn.dead = true;
                return false;
            }
        }
    }
    true
}

/// Writes what the socket takes, then keeps the rest as the output's own bytes (values lent
/// from slab memory must not outlive the round).
fn flush(conn: &mut Conn, stats: &Stats) {
    while !conn.output.is_empty() {
        match conn.output.write_to(&mut conn.stream) {
            Ok(0) => {
                conn.dead = true;
                break;
            }
            Ok(n) => Stats::add(&stats.bytes_written, n as u64),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                conn.dead = true;
                conn.output.clear();
                break;
            }
        }
    }
    conn.output.keep();
}
