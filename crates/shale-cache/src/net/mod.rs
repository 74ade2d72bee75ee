//! The cache's network front end: listeners for the three protocols, an acceptor thread, and the
//! connection threads (Mega-KV's receivers and senders in one) that run rounds of read, execute,
//! reply over their connections.
//!
//! # Threads
//! The acceptor hands each new connection to a connection thread, round robin, through a channel
//! and a wake-up. A connection thread owns its connections from then on: one `epoll` set, one
//! [`crate::Worker`]. All threads share the UDP socket of the Mega-KV port.
//!
//! # Shutdown
//! [`Server::stop`] raises a flag and wakes every thread; each closes its sockets and exits.

mod worker;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::cache::Cache;
use crate::proto::Protocol;
use crate::stats::Stats;

/// Where and how the cache listens.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address of every listener.
    pub bind: IpAddr,
    /// RESP port (0: any free port).
    pub resp_port: u16,
    /// memcached text-protocol port (0: any free port).
    pub memcache_port: u16,
    /// Mega-KV port, TCP and UDP (0: any free port).
    pub megakv_port: u16,
    /// Connection threads; the cache must have been built for this many.
    pub threads: usize,
    /// Most open connections; more are refused.
    pub maxclients: usize,
}

/// A running cache server.
pub struct Server {
    /// The RESP listener's address.
    pub resp: SocketAddr,
    /// The memcached listener's address.
    pub memcache: SocketAddr,
    /// The Mega-KV TCP listener's address (its UDP socket has the same).
    pub megakv: SocketAddr,
    shutdown: Arc<AtomicBool>,
    wakers: Vec<Arc<Waker>>,
    threads: Vec<JoinHandle<()>>,
}

const ACCEPT_WAKER: Token = Token(usize::MAX);

impl Server {
    /// Binds the listeners and starts the threads.
    ///
    /// # Errors
    /// If a listener cannot be bound or a thread cannot start.
    pub fn start(config: &ServerConfig, cache: Arc<Cache>) -> io::Result<Server> {
        let threads = config.threads.max(1);
        let resp = TcpListener::bind(SocketAddr::new(config.bind, config.resp_port))?;
        let memcache = TcpListener::bind(SocketAddr::new(config.bind, config.memcache_port))?;
        let (megakv, udp) = bind_megakv(config.bind, config.megakv_port)?;
        let addresses = (
            resp.local_addr()?,
            memcache.local_addr()?,
            megakv.local_addr()?,
        );
        let shutdown = Arc::new(AtomicBool::new(false));
        let mut wakers = Vec::new();
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for thread in 0..threads {
            let poll = Poll::new()?;
            let waker = Arc::new(Waker::new(poll.registry(), worker::WAKER)?);
            let (tx, rx) = mpsc::channel();
            let udp = udp.try_clone()?;
            udp.set_nonblocking(true)?;
            let udp = UdpSocket::from_std(udp);
            let cache = Arc::clone(&cache);
            let shutdown = Arc::clone(&shutdown);
            let handle = std::thread::Builder::new()
                .name(format!("shale-cache-{thread}"))
                .spawn(move || worker::run(thread, poll, rx, udp, cache, shutdown))?;
            wakers.push(Arc::clone(&waker));
            senders.push((tx, waker));
            handles.push(handle);
        }
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), ACCEPT_WAKER)?);
        wakers.push(Arc::clone(&waker));
        let acceptor = Acceptor {
            listeners: vec![
                (resp, Protocol::Resp),
                (memcache, Protocol::Memcache),
                (megakv, Protocol::MegaKv),
            ],
            senders,
            next: 0,
            cache,
            maxclients: config.maxclients,
        };
        let flag = Arc::clone(&shutdown);
        handles.push(
            std::thread::Builder::new()
                .name("shale-cache-accept".into())
                .spawn(move || acceptor.run(poll, flag))?,
        );
        Ok(Server {
            resp: addresses.0,
            memcache: addresses.1,
            megakv: addresses.2,
            shutdown,
            wakers,
            threads: handles,
        })
    }

    /// Stops every thread and waits for them.
    pub fn stop(self) {
        self.shutdown.store(true, Ordering::SeqCst);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
        for handle in self.threads {
            let _ = handle.join();
        }
    }

    /// Waits for the threads (they run until [`Server::stop`] from elsewhere, or forever).
    pub fn wait(self) {
        for handle in self.threads {
            let _ = handle.join();
        }
    }
}

/// Binds the Mega-KV TCP listener and a UDP socket on the same port.
fn bind_megakv(ip: IpAddr, port: u16) -> io::Result<(TcpListener, std::net::UdpSocket)> {
    let mut last = None;
    for _ in 0..16 {
        let tcp = TcpListener::bind(SocketAddr::new(ip, port))?;
        let actual = tcp.local_addr()?;
        match std::net::UdpSocket::bind(actual) {
            Ok(udp) => return Ok((tcp, udp)),
            // With port 0 the TCP port picked may be taken for UDP: try another.
            Err(e) if port == 0 => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no port free for both TCP and UDP")))
}

/// How the acceptor hands a connection to a connection thread: the channel, and the thread's
/// wake-up.
type Handoff = (mpsc::Sender<(TcpStream, Protocol)>, Arc<Waker>);

struct Acceptor {
    listeners: Vec<(TcpListener, Protocol)>,
    senders: Vec<Handoff>,
    next: usize,
    cache: Arc<Cache>,
    maxclients: usize,
}

impl Acceptor {
    fn run(mut self, mut poll: Poll, shutdown: Arc<AtomicBool>) {
        for (i, (listener, _)) in self.listeners.iter_mut().enumerate() {
            if let Err(e) = poll
                .registry()
                .register(listener, Token(i), Interest::READABLE)
            {
                tracing::error!(error = %e, "cannot watch a listener");
                return;
            }
        }
        let mut events = Events::with_capacity(64);
        while !shutdown.load(Ordering::SeqCst) {
            if let Err(e) = poll.poll(&mut events, None) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(error = %e, "accept loop failed");
                return;
            }
            for event in events.iter() {
                if event.token() == ACCEPT_WAKER {
                    continue;
                }
                self.accept_all(event.token().0);
            }
        }
    }

    fn accept_all(&mut self, listener: usize) {
        let stats = self.cache.stats();
        loop {
            let (listener_socket, protocol) = &self.listeners[listener];
            match listener_socket.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    if Stats::get(&stats.curr_connections) as usize >= self.maxclients {
                        refuse(&stream, *protocol);
                        continue;
                    }
                    Stats::add(&stats.total_connections, 1);
                    Stats::add(&stats.curr_connections, 1);
                    let (tx, waker) = &self.senders[self.next % self.senders.len()];
                    self.next += 1;
                    if tx.send((stream, *protocol)).is_ok() {
                        let _ = waker.wake();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors and the like: leave the rest for the next readiness.
                    tracing::warn!(error = %e, "accept failed");
                    return;
                }
            }
        }
    }
}

fn refuse(stream: &TcpStream, protocol: Protocol) {
    use std::io::Write;
    let mut s = stream;
    let _ = s.write(protocol.too_many_clients());
}
