//! The server's life: open the engine, bind, accept, run background tasks, shut down.
//!
//! Shutdown (SIGTERM, SIGINT or the SHUTDOWN command): stop accepting; every connection finishes
//! the batch it is running, sends its replies and closes; background tasks stop; the WAL is
//! synced and the database closed. Connections get [`DRAIN_TIMEOUT`] to finish before they are
//! cut.
//!
//! The front ends sit behind [`Frontend`]: today only RESP; Mega-KV's binary protocol will be a
//! second listener over the same [`Shared`] state.

use crate::cluster::Cluster;
use crate::config::{Appendfsync, Config};
use crate::shared::{Cursors, Shared};
use crate::store::{expiry, Store};
use crate::{connection, metrics, shutdown};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long connections get to finish their batch at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Period of the expiry sweep.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(100);
/// Period of the WAL sync under `appendfsync everysec`.
pub const EVERYSEC: Duration = Duration::from_secs(1);

/// A wire protocol the server listens for. Each has its own listener and connection loop; all
/// share the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frontend {
    /// The Redis protocol.
    Resp,
}

/// Runs the server until shutdown.
///
/// # Errors
/// A message when the configuration is invalid, the database cannot be opened, or the address
/// cannot be bound.
pub fn run(mut config: Config) -> Result<(), String> {
    config.validate()?;
    if let Some(warning) = crate::fdlimit::fit(&mut config) {
        println!("{warning}");
        tracing::warn!("{warning}");
    }
    let threads = match config.threads {
        0 => crate::config::default_threads(),
        n => n,
    };
    // The main runtime accepts, runs the background tasks and hands each connection to a shard.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("shale-main")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let shards = Shards::start(threads)?;
    let result = runtime.block_on(serve(config, &shards));
    shards.stop();
    result
}

/// The connection threads: each runs a single-threaded runtime that owns the connections handed
/// to it, from their socket's readiness to their last reply.
///
/// Why not one work-stealing runtime: with a request per round trip (`-P 1`), most of a
/// connection's work is waking its task when the socket turns readable. On a shared runtime the
/// wake often lands on the other worker's queue, which must be unparked (a futex call) or steals
/// it; a shard's socket readiness, task and reply stay on one thread, as in Redis's event loop.
/// Measured 2026-11-23 (BENCHMARKS.md): one worker beat two at `-P 1` by 10-20%, while two beat one
/// at pipelined GETs; shards keep both cores and lose the cross-thread wakes.
struct Shards {
    handles: Vec<tokio::runtime::Handle>,
    stop: Vec<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    next: AtomicUsize,
}

impl Shards {
    fn start(n: usize) -> Result<Shards, String> {
        let mut shards = Shards {
            handles: Vec::with_capacity(n),
            stop: Vec::with_capacity(n),
            threads: Vec::with_capacity(n),
            next: AtomicUsize::new(0),
        };
        for i in 0..n.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start connection runtime {i}: {e}"))?;
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            shards.handles.push(runtime.handle().clone());
            shards.stop.push(tx);
            let thread = std::thread::Builder::new()
                .name(format!("shale-conn-{i}"))
                .spawn(move || {
                    // Runs the shard's tasks until `stop`; dropping the runtime then cancels any
                    // that are left (the server waits for connections before it stops shards).
                    let _ = runtime.block_on(rx);
                })
                .map_err(|e| format!("cannot start connection thread {i}: {e}"))?;
            shards.threads.push(thread);
        }
        Ok(shards)
    }

    /// The shard for the next connection (round robin).
    fn next(&self) -> &tokio::runtime::Handle {
        &self.handles[self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len()]
    }

    fn stop(self) {
        drop(self.stop);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

async fn serve(config: Config, shards: &Shards) -> Result<(), String> {
    println!(
        "shale {} starting with:\n{config}",
        env!("CARGO_PKG_VERSION")
    );
    let options = config.engine_options();
    let listener = TcpListener::bind((config.bind.as_str(), config.port))
        .await
        .map_err(|e| format!("cannot listen on {}:{}: {e}", config.bind, config.port))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let (store, cluster) = if config.cluster.enabled() {
        let c = config.clone();
        let cluster = tokio::task::spawn_blocking(move || Cluster::start(&c, options, port))
            .await
            .map_err(|e| e.to_string())??;
        let store = Store::replicated(cluster.replica.clone(), config.appendfsync)
            .map_err(|e| format!("cannot read the database: {e}"))?;
        (store, Some(cluster))
    } else {
        let dir = config.dir.clone();
        let db = tokio::task::spawn_blocking(move || shale::Db::open(&dir, options))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot open the database in {}: {e}", config.dir.display()))?;
        let store = Store::new(db, config.appendfsync)
            .map_err(|e| format!("cannot read the database: {e}"))?;
        (store, None)
    };
    let metrics_listener = match config.metrics_port {
        Some(p) => Some(
            TcpListener::bind((config.bind.as_str(), p))
                .await
                .map_err(|e| format!("cannot listen for metrics on {}:{p}: {e}", config.bind))?,
        ),
        None => None,
    };
    let (shutdown_tx, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        store,
        metrics: metrics::Metrics::default(),
        cursors: Cursors::default(),
        blocked: Default::default(),
        knobs: Default::default(),
        started: Instant::now(),
        run_id: run_id(),
        clients: AtomicUsize::new(0),
        next_client_id: AtomicU64::new(1),
        port: AtomicU64::new(u64::from(port)),
        shutting_down: AtomicBool::new(false),
        shutdown_tx,
        last_sync: AtomicU64::new(0),
        cluster: parking_lot::Mutex::new(cluster),
        config,
    });
    let mut background = JoinSet::new();
    if let Some(l) = metrics_listener {
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        println!("metrics on http://{addr}/metrics");
        background.spawn(metrics::http::serve(l, shared.clone()));
    }
    background.spawn(everysec(shared.clone()));
    background.spawn(sweeper(shared.clone()));
    background.spawn(shutdown::on_signals(shared.clone()));
    let syncer = {
        let sh = shared.clone();
        std::thread::Builder::new()
            .name("shale-wal-sync".into())
            .spawn(move || sh.store.syncer.serve(|| sh.store.db().sync_wal()))
            .map_err(|e| format!("cannot start the WAL syncer: {e}"))?
    };
    if shared.config.requirepass.is_none() && !loopback_only(&shared.config.bind) {
        let warning = format!(
            "WARNING: listening on {} without requirepass: every host that can reach port {port} \
             can read and change every key. Set requirepass, or bind 127.0.0.1.",
            shared.config.bind
        );
        println!("{warning}");
        tracing::warn!("{warning}");
    }
    println!(
        "ready to accept connections on {}:{port}",
        shared.config.bind
    );
    accept(listener, &shared, shards, Frontend::Resp).await;
    background.abort_all();
    while background.join_next().await.is_some() {}
    shared.store.syncer.stop();
    let _ = tokio::task::spawn_blocking(move || syncer.join()).await;
    finish(shared).await
}

/// Accepts connections until shutdown starts, then waits for them to finish.
async fn accept(listener: TcpListener, shared: &Arc<Shared>, shards: &Shards, frontend: Frontend) {
    let Frontend::Resp = frontend;
    let mut connections = JoinSet::new();
    let mut shutdown = shared.shutdown_tx.subscribe();
    let mut accept_log = AcceptLog::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let mut stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        accept_failed(shared, &e, &mut accept_log).await;
                        continue;
                    }
                };
                metrics::add(&shared.metrics.connections_total, 1);
                if shared.clients.load(Ordering::Relaxed) >= shared.config.maxclients {
                    metrics::add(&shared.metrics.rejected_connections, 1);
                    let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                    continue;
                }
                shared.clients.fetch_add(1, Ordering::Relaxed);
                let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
                let sh = shared.clone();
                // The socket moves to its shard's reactor, so its readiness wakes that thread.
                let stream = stream.into_std();
                connections.spawn_on(async move {
                    if let Ok(stream) = stream.and_then(tokio::net::TcpStream::from_std) {
                        connection::serve(stream, sh.clone(), id).await;
                    }
                    sh.clients.fetch_sub(1, Ordering::Relaxed);
                }, shards.next());
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let deadline = tokio::time::sleep(DRAIN_TIMEOUT);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            next = connections.join_next() => if next.is_none() { break },
            _ = &mut deadline => {
                tracing::warn!(left = connections.len(), "connections still busy at shutdown; cutting them");
                connections.abort_all();
                while connections.join_next().await.is_some() {}
                break;
            }
        }
    }
}

/// Pause of the accept loop after `accept` fails for want of descriptors or memory (`EMFILE`,
/// `ENFILE`, `ENOBUFS`, `ENOMEM`): the waiting connection stays in the backlog, and retrying at
/// once would only spin (the connections that free descriptors need the CPU).
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The accept loop logs its failures at most this often.
pub const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Rate limit of the accept loop's failure log.
#[derive(Default)]
struct AcceptLog {
    last: Option<Instant>,
    suppressed: u64,
}

/// Counts, logs (rate-limited) and, when descriptors or memory ran out, waits out a failed
/// `accept`.
async fn accept_failed(shared: &Shared, e: &std::io::Error, log: &mut AcceptLog) {
    metrics::add(&shared.metrics.accept_errors, 1);
    let exhausted = matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    );
    if log.last.is_none_or(|t| t.elapsed() >= ACCEPT_LOG_INTERVAL) {
        tracing::warn!(
            error = %e,
            suppressed = log.suppressed,
            maxclients = shared.config.maxclients,
            "accepting a connection failed{}",
            if exhausted { "; pausing the accept loop (raise the open-file limit with ulimit -n)" } else { "" }
        );
        log.last = Some(Instant::now());
        log.suppressed = 0;
    } else {
        log.suppressed += 1;
    }
    if exhausted {
        tokio::time::sleep(ACCEPT_BACKOFF).await;
    }
}

/// True when every address in `bind` (space-separated, as Redis takes them) is a loopback one.
pub fn loopback_only(bind: &str) -> bool {
    bind.split_whitespace().all(|addr| {
        addr.eq_ignore_ascii_case("localhost")
            || addr
                .trim_start_matches('-')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// Syncs and closes the database.
async fn finish(shared: Arc<Shared>) -> Result<(), String> {
    tokio::task::spawn_blocking(move || {
        let sync = shared.store.db().sync_wal();
        if let Some(mut cluster) = shared.cluster.lock().take() {
            cluster.stop();
        }
        let close = match Arc::try_unwrap(shared) {
            Ok(sh) => match Arc::try_unwrap(sh.store.into_db()) {
                Ok(db) => db.close(),
                Err(_) => Ok(()), // Still shared: dropping the last handle closes it.
            },
            Err(_) => Ok(()),
        };
        sync.and(close)
            .map_err(|e| format!("closing the database failed: {e}"))
    })
    .await
    .map_err(|e| e.to_string())??;
    println!("shale stopped");
    Ok(())
}

/// `appendfsync everysec`: syncs the WAL once a second.
async fn everysec(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(EVERYSEC);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if shared.store.appendfsync() != Appendfsync::Everysec {
            continue;
        }
        let sh = shared.clone();
        let r = tokio::task::spawn_blocking(move || sh.store.db().sync_wal()).await;
        match r {
            Ok(Ok(())) => shared
                .last_sync
                .store(crate::store::now_ms() / 1000, Ordering::Relaxed),
            Ok(Err(e)) => tracing::error!(error = %e, "WAL sync failed"),
            Err(_) => return,
        }
    }
}

/// The bounded background expiry sweep.
async fn sweeper(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // On a cluster node only the leader expires keys (its deletions replicate).
        if shared.store.replica().is_some_and(|r| !r.is_leader()) {
            continue;
        }
        let sh = shared.clone();
        match tokio::task::spawn_blocking(move || expiry::sweep(&sh.store)).await {
            Ok(Ok(n)) => metrics::add(&shared.metrics.expired_keys, n as u64),
            Ok(Err(e)) => tracing::warn!(error = %e, "expiry sweep failed"),
            Err(_) => return,
        }
    }
}

fn run_id() -> String {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        ^ u128::from(std::process::id()) << 64;
    let mut x = seed as u64 ^ (seed >> 64) as u64;
    (0..5)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("{x:016x}")
        })
        .collect::<String>()[..40]
        .to_string()
}
