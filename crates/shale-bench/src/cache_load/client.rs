//! The load engine: client threads, each driving its share of the connections from one `epoll`
//! loop. A connection sends a pipeline of `depth` requests, waits for every reply, and sends the
//! next (what redis-benchmark's `-P` and memtier's `--pipeline` mean), so pipeline depth 1 is one
//! request per round trip.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use bytes::BytesMut;

use super::protocol::{encode, parse, write_key, Answer, Wire};
use crate::error::{Error, Result};

/// What a load does.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// Server address.
    pub addr: SocketAddr,
    /// Protocol.
    pub wire: Wire,
    /// Connections in all.
    pub connections: usize,
    /// Client threads.
    pub threads: usize,
    /// Requests per pipeline.
    pub depth: usize,
    /// Percent of requests that are GETs.
    pub get_percent: u32,
    /// Key length in bytes.
    pub key_len: usize,
    /// Value length in bytes.
    pub value_len: usize,
    /// The key of each request in turn (indexes below `keys`), cycled; per thread an offset.
    pub sequence: Arc<Vec<u32>>,
    /// Where in `sequence` the threads start (added to each thread's offset).
    pub start: usize,
    /// A GET that misses is followed by a SET of its key (cache-aside), as a cache's user does.
    pub set_on_miss: bool,
}

/// Counters a load keeps.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests answered.
    pub ops: AtomicU64,
    /// GETs answered.
    pub gets: AtomicU64,
    /// GETs that found a value.
    pub hits: AtomicU64,
    /// Error replies or values of the wrong length.
    pub errors: AtomicU64,
}

/// A running load; counters are live while it runs.
pub struct Load {
    /// The counters.
    pub counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Result<()>>>,
}

impl Load {
    /// Starts the client threads.
    ///
    /// # Errors
    /// If a connection cannot be made.
    pub fn start(spec: &LoadSpec) -> Result<Load> {
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for t in 0..spec.threads.max(1) {
            let conns = spec.connections / spec.threads.max(1)
                + usize::from(t < spec.connections % spec.threads.max(1));
            let spec = spec.clone();
            let counters = Arc::clone(&counters);
            let stop = Arc::clone(&stop);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("load-{t}"))
                    .spawn(move || client_thread(&spec, t, conns, &counters, &stop))
                    .map_err(|e| Error::io("cannot start a client thread", e))?,
            );
        }
        Ok(Load {
            counters,
            stop,
            threads,
        })
    }

    /// Stops the threads and reports the first error any had.
    ///
    /// # Errors
    /// A connection that failed or a server that answered with errors.
    pub fn stop(self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        let mut first = Ok(());
        for t in self.threads {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(Error::backend("a client thread panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

struct Conn {
    stream: TcpStream,
    out: BytesMut,
    written: usize,
    input: Vec<u8>,
    // The pending requests' kinds (true: GET) and keys, in order.
    expect: Vec<(bool, u32)>,
    next_reply: usize,
    refill: Vec<u32>,
}

fn client_thread(
    spec: &LoadSpec,
    thread: usize,
    conns: usize,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<()> {
    let mut poll = Poll::new().map_err(|e| Error::io("poll", e))?;
    let mut connections = Vec::new();
    for i in 0..conns {
        let std = std::net::TcpStream::connect(spec.addr)
            .map_err(|e| Error::io(format!("cannot connect to {}", spec.addr), e))?;
        std.set_nodelay(true).map_err(|e| Error::io("nodelay", e))?;
        std.set_nonblocking(true)
            .map_err(|e| Error::io("nonblocking", e))?;
        let mut stream = TcpStream::from_std(std);
        poll.registry()
            .register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| Error::io("register", e))?;
        connections.push(Conn {
            stream,
            out: BytesMut::new(),
            written: 0,
            input: Vec::new(),
            expect: Vec::new(),
            next_reply: 0,
            refill: Vec::new(),
        });
    }
    let value = vec![b'v'; spec.value_len];
    let sequence = &spec.sequence;
    // The threads start evenly apart in the sequence: a thread must not re-read, a fixed
    // distance behind, the keys another has just read (7919 * 1024 apart landed 3.9M positions
    // into a 4M sequence, a quarter-million positions behind the first thread).
    let len = sequence.len().max(1);
    let mut cursor = (spec.start + thread * (len / spec.threads.max(1))) % len;
    let mut rng = 0x9e37_79b9_u64 ^ thread as u64;
    let key_len = spec.key_len;
    let mut send = |conn: &mut Conn| {
        conn.out.clear();
        conn.written = 0;
        conn.expect.clear();
        conn.next_reply = 0;
        for key in conn.refill.drain(..).take(spec.depth) {
            conn.expect.push((false, key));
        }
        while conn.expect.len() < spec.depth {
            let key = sequence[cursor];
            cursor = (cursor + 1) % sequence.len();
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let get = ((rng >> 33) % 100) < u64::from(spec.get_percent);
            conn.expect.push((get, key));
        }
        encode(
            spec.wire,
            &conn.expect,
            |i, out| write_key(i, key_len, out),
            &value,
            &mut conn.out,
        );
    };
    let mut chunk = vec![0u8; 256 * 1024];
    for conn in &mut connections {
        send(conn);
        write_some(conn)?;
        advance(conn, spec, counters, &mut send)?;
    }
    let mut events = Events::with_capacity(1024);
    while !stop.load(Ordering::Relaxed) {
        poll.poll(&mut events, Some(Duration::from_millis(100)))
            .map_err(|e| Error::io("poll", e))?;
        for event in events.iter() {
            let conn = &mut connections[event.token().0];
            if event.is_writable() && conn.written < conn.out.len() {
                write_some(conn)?;
            }
            if event.is_readable() {
                loop {
                    match conn.stream.read(&mut chunk) {
                        Ok(0) => return Err(Error::backend("the server closed a connection")),
                        Ok(n) => conn.input.extend_from_slice(&chunk[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(Error::io("read", e)),
                    }
                }
            }
            advance(conn, spec, counters, &mut send)?;
        }
    }
    Ok(())
}

/// Takes every complete reply; sends the next pipeline when the last reply is in and the
/// pipeline is fully written (at once again when a pipeline owes no replies: Mega-KV SETs).
fn advance(
    conn: &mut Conn,
    spec: &LoadSpec,
    counters: &Counters,
    send: &mut impl FnMut(&mut Conn),
) -> Result<()> {
    loop {
        let mut used = 0;
        let (mut answered, mut gets, mut hits, mut errors) = (0u64, 0u64, 0u64, 0u64);
        while conn.next_reply < conn.expect.len() {
            let (get, key) = conn.expect[conn.next_reply];
            let Some((answer, n)) = parse(spec.wire, get, &conn.input[used..]) else {
                break;
            };
            used += n;
            conn.next_reply += 1;
            answered += 1;
            match answer {
                Answer::Hit(len) => {
                    gets += 1;
                    hits += 1;
                    errors += u64::from(len != spec.value_len);
                }
                Answer::Miss => {
                    gets += 1;
                    if spec.set_on_miss {
                        conn.refill.push(key);
                    }
                }
                Answer::Stored => {}
                Answer::Error => errors += 1,
            }
        }
        conn.input.drain(..used);
        counters.ops.fetch_add(answered, Ordering::Relaxed);
        counters.gets.fetch_add(gets, Ordering::Relaxed);
        counters.hits.fetch_add(hits, Ordering::Relaxed);
        counters.errors.fetch_add(errors, Ordering::Relaxed);
        if conn.next_reply < conn.expect.len() || conn.written < conn.out.len() {
            return Ok(());
        }
        if !conn.input.is_empty() {
            return Err(Error::backend("the server sent more replies than requests"));
        }
        send(conn);
        write_some(conn)?;
    }
}

fn write_some(conn: &mut Conn) -> Result<()> {
    while conn.written < conn.out.len() {
        match conn.stream.write(&conn.out[conn.written..]) {
            Ok(n) => conn.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("write", e)),
        }
    }
    Ok(())
}

/// Runs a load for `warmup` then measures for `duration`: (ops/s, gets, hits, errors) over the
/// measured window.
///
/// # Errors
/// As for [`Load::start`] and [`Load::stop`].
pub fn measure(spec: &LoadSpec, warmup: Duration, duration: Duration) -> Result<Measured> {
    let load = Load::start(spec)?;
    std::thread::sleep(warmup);
    let start = snapshot(&load.counters);
    let started = Instant::now();
    std::thread::sleep(duration);
    let end = snapshot(&load.counters);
    let secs = started.elapsed().as_secs_f64();
    load.stop()?;
    Ok(Measured::between(start, end, secs))
}

/// The counters at one moment: (ops, gets, hits, errors).
type Snapshot = (u64, u64, u64, u64);

fn snapshot(c: &Counters) -> Snapshot {
    (
        c.ops.load(Ordering::Relaxed),
        c.gets.load(Ordering::Relaxed),
        c.hits.load(Ordering::Relaxed),
        c.errors.load(Ordering::Relaxed),
    )
}

/// Runs a load for `warmup` requests, then measures over the next `measured` requests: a hit
/// rate that does not depend on how fast the server is (over a fixed time, a faster server reads
/// further into the key sequence, a slower one re-reads what it was just handed). Each phase
/// gives up after `cap`.
///
/// # Errors
/// As [`measure`].
pub fn measure_requests(
    spec: &LoadSpec,
    warmup: u64,
    measured: u64,
    cap: Duration,
) -> Result<Measured> {
    let load = Load::start(spec)?;
    let c = &load.counters;
    let wait_for = |ops: u64| {
        let deadline = Instant::now() + cap;
        while c.ops.load(Ordering::Relaxed) < ops && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    wait_for(warmup);
    let start = snapshot(c);
    let started = Instant::now();
    wait_for(start.0 + measured);
    let end = snapshot(c);
    let secs = started.elapsed().as_secs_f64();
    load.stop()?;
    Ok(Measured::between(start, end, secs))
}

/// The result of [`measure`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Requests answered per second.
    pub ops_per_sec: f64,
    /// GETs answered.
    pub gets: u64,
    /// Of which hits.
    pub hits: u64,
    /// Errors.
    pub errors: u64,
}

impl Measured {
    fn between(start: Snapshot, end: Snapshot, secs: f64) -> Measured {
        Measured {
            ops_per_sec: (end.0 - start.0) as f64 / secs,
            gets: end.1 - start.1,
            hits: end.2 - start.2,
            errors: end.3 - start.3,
        }
    }

    /// Hits per GET.
    pub fn hit_rate(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.hits as f64 / self.gets as f64
        }
    }
}
