//! The server as a node of a replicated cluster (`[cluster]` settings; `shale-repl` does the
//! replication).
//!
//! Any node accepts every command. A batch that writes, reads without the connection's
//! `READONLY` opt-in, or belongs to a transaction must run on the leader ([`dispatch`]): on a
//! follower the connection forwards its runs of such commands to the leader's client port over
//! a connection of its own and relays the replies, while connection commands (SELECT, HELLO,
//! CLIENT, ...) run here, in order; on the leader, a batch that reads (or reads before it
//! writes) first passes a read barrier (the leadership confirmed by a quorum, everything
//! committed applied), and its writes commit through the Raft log: the batch's commit proposes
//! its `WriteBatch` and waits, holding the batch's key locks, until the entry is applied here,
//! which is after a majority has it fsynced. A MULTI/EXEC transaction is one batch, so one
//! entry. A connection that sent `READONLY` reads from the node it is connected to, possibly
//! stale.
//!
//! A transaction (MULTI or WATCH) lives on the node that leads when it starts: forwarded, every
//! later command of the connection follows it upstream until EXEC, DISCARD or RESET; opened
//! here, it is discarded and the connection closed if this node stops leading before EXEC.
//!
//! Outcomes the client sees: a write refused before it reached the log (no leader yet) gets
//! `-TRYAGAIN`; a write whose entry may or may not commit (leadership lost in flight, no quorum)
//! gets an error too, and may have been applied, as with any database whose connection drops.

use crate::commands::{self, Command, BLOCKING, COMMANDS, READONLY, TXN, WRITE};
use crate::config::Config;
use crate::session::{After, Session};
use crate::shared::Shared;
use bytes::BytesMut;
use shale_proto::resp::{encode_command, parse_reply, ReplyLimits, ReplyWriter, Request, Version};
use shale_repl::network::tcp::{self, TcpTransport};
use shale_repl::{NodeInfo, RaftTiming, ReplError, Replica, ReplicaConfig};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Threads of the runtime that runs Raft (messages, log, state machine, snapshots).
pub const RAFT_THREADS: usize = 2;
/// How long a forwarded batch waits for the leader's replies.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);

/// This node's replica and the runtime it runs on.
pub struct Cluster {
    /// The replica (the engine is `replica.db()`).
    pub replica: Arc<Replica>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Cluster {
    /// Opens the replica in `config.dir`, listens for Raft on `raft-addr`, and starts a new
    /// cluster of `peers` unless the node joins a running one (or already belongs to one).
    ///
    /// # Errors
    /// A message when the settings are wrong, the data cannot be opened, or the Raft address
    /// cannot be bound.
    pub fn start(config: &Config, engine: shale::Options, port: u16) -> Result<Cluster, String> {
        let c = &config.cluster;
        let id = c.node_id.ok_or("cluster: no node-id")?;
        let raft_addr = c.raft_addr.clone().ok_or("cluster: no raft-addr")?;
        let advertise = c
            .advertise
            .clone()
            .unwrap_or_else(|| format!("{}:{port}", config.bind));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RAFT_THREADS)
            .thread_name("shale-raft")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the Raft runtime: {e}"))?;
        let members = c.members()?;
        let replica_config = ReplicaConfig {
            id,
            info: NodeInfo {
                raft_addr: raft_addr.clone(),
                client_addr: advertise,
            },
            dir: config.dir.clone(),
            engine,
            timing: RaftTiming {
                heartbeat_ms: c.heartbeat_ms,
                election_timeout_ms: (c.election_timeout_min_ms, c.election_timeout_max_ms),
                read_lease_ms: c.read_lease_ms(),
                ..RaftTiming::default()
            },
            hook: None,
            mode: c.replication_mode,
            rubble: shale_repl::RubbleSettings::default(),
        };
        let join = c.join;
        let replica = runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind(&raft_addr)
                .await
                .map_err(|e| format!("cannot listen for Raft on {raft_addr}: {e}"))?;
            let replica = Replica::open(replica_config, Arc::new(TcpTransport::new()))
                .await
                .map_err(|e| format!("cannot open the replica in its directory: {e}"))?;
            tokio::spawn(tcp::serve(listener, replica.service()));
            if !join {
                replica
                    .initialize(members)
                    .await
                    .map_err(|e| format!("cannot start the cluster: {e}"))?;
            }
            Ok::<_, String>(Arc::new(replica))
        })?;
        Ok(Cluster {
            replica,
            runtime: Some(runtime),
        })
    }

    /// Runs `f` on the Raft runtime (membership changes from a connection).
    pub fn spawn<F>(&self, f: F) -> Option<tokio::task::JoinHandle<F::Output>>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime.as_ref().map(|r| r.spawn(f))
    }

    /// Stops the replica and its runtime.
    pub fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            let replica = self.replica.clone();
            rt.block_on(async move { replica.shutdown().await });
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// Where a batch must run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Here, as is (no data read, or stale reads allowed, and nothing written).
    Local,
    /// On the leader; reads first wait for a read barrier.
    Leader { barrier: bool },
}

fn command_of(r: &Request) -> Option<&'static Command> {
    commands::lookup(r.name()).map(|c| &COMMANDS[c])
}

/// Whether `r` may run on any node for `session`: it writes nothing, is no transaction command,
/// and reads data only when the connection allowed stale reads. Unknown commands run here (to
/// be refused).
fn runs_anywhere(r: &Request, session: &Session) -> bool {
    command_of(r)
        .is_none_or(|c| !c.has(WRITE) && !c.has(TXN) && (!c.has(READONLY) || session.readonly))
}

/// Where `requests` must run for `session`.
pub fn route(requests: &[Request], session: &Session) -> Route {
    let mut leader = false;
    let mut barrier = false;
    for r in requests {
        if runs_anywhere(r, session) {
            continue;
        }
        leader = true;
        let Some(c) = command_of(r) else { continue };
        // A read-modify-write reads what it writes, and EXEC reads: the leader must have applied
        // everything committed before them.
        barrier |= !c.has(WRITE) || !writes_blindly(c, r.argv());
    }
    if leader {
        Route::Leader { barrier }
    } else {
        Route::Local
    }
}

/// Whether this call replaces its keys without its reply depending on what they held (a plain
/// `SET`, `MSET`): on a leader whose state is current it needs no read barrier, since every
/// entry committed before it is this leader's own and applied before its commit returned.
fn writes_blindly(c: &Command, argv: &[bytes::Bytes]) -> bool {
    match c.name {
        "mset" => true,
        "set" => !argv.iter().skip(3).any(|a| {
            ["nx", "xx", "get", "keepttl"]
                .iter()
                .any(|w| a.eq_ignore_ascii_case(w.as_bytes()))
        }),
        _ => false,
    }
}

/// Decides where a cluster node's batch runs. Returns true when the caller is to execute it here
/// now (a local batch, or this node leads and the batch passed its read barrier); otherwise the
/// batch was answered (forwarded to the leader, run here in parts, or refused) into `out`.
pub async fn dispatch(
    shared: &Shared,
    session: &mut Session,
    batch: &[Request],
    out: &mut BytesMut,
    upstream: &mut Option<Upstream>,
) -> bool {
    let Some(replica) = shared.store.replica() else {
        return true;
    };
    // A transaction queued upstream stays there; one opened here stays here.
    let pinned = upstream.as_ref().is_some_and(|u| u.in_txn);
    let local_txn = session.multi.is_some() || !session.watched.is_empty();
    let barrier = match (pinned, local_txn, route(batch, session)) {
        (true, _, _) => false,
        (false, true, _) => true,
        (false, false, Route::Local) => return true,
        (false, false, Route::Leader { barrier }) => barrier,
    };
    let leading = if pinned { None } else { replica.leading_term() };
    if let Some(term) = leading {
        let current = shared.store.state_is_current(term);
        // The first batch of a term waits for everything committed before it, then reloads the
        // store's state from the engine.
        let ready = if barrier || !current {
            replica.read_barrier().await
        } else {
            Ok(())
        };
        let ready = ready.and_then(|()| {
            shared
                .store
                .take_leadership(term)
                .map_err(ReplError::Engine)
        });
        match ready {
            Ok(()) => return true,
            Err(ReplError::NotLeader { .. }) => {}
            Err(e) => {
                error_all(out, session.version, batch.len(), &error_line(&e));
                return false;
            }
        }
    }
    if local_txn {
        error_all(
            out,
            session.version,
            batch.len(),
            "TRYAGAIN this node stopped leading during the transaction; it was discarded",
        );
        crate::exec::end_session(shared, session);
        session.multi = None;
        session.after = After::Close;
        return false;
    }
    let password = shared.config.requirepass.as_deref();
    let mut i = 0;
    while i < batch.len() && session.after == After::Continue {
        let here = !pinned && runs_anywhere(&batch[i], session);
        let end = (i + 1..batch.len())
            .find(|&j| pinned || runs_anywhere(&batch[j], session) != here)
            .unwrap_or(batch.len());
        let end = if pinned { batch.len() } else { end };
        let run = &batch[i..end];
        if here {
            crate::exec::execute(shared, session, run, out);
            i = end;
            continue;
        }
        let forwarded = match replica.leader() {
            Some((id, leader)) if id != replica.id() => {
                forward(upstream, &leader.client_addr, session, password, run, out)
                    .await
                    .map_err(|e| {
                        format!(
                            "TRYAGAIN forwarding to the leader at {} failed: {e}",
                            leader.client_addr
                        )
                    })
            }
            _ => Err("TRYAGAIN no leader is elected yet".to_string()),
        };
        if let Err(line) = forwarded {
            error_all(out, session.version, batch.len() - i, &line);
            if pinned {
                // The transaction upstream is lost with its connection.
                session.after = After::Close;
            }
            return false;
        }
        i = end;
    }
    false
}

fn error_all(out: &mut BytesMut, version: Version, n: usize, line: &str) {
    for _ in 0..n {
        ReplyWriter::new(out, version).error(line.as_bytes());
    }
}

/// A connection to the leader's client port, for forwarding.
pub struct Upstream {
    addr: String,
    stream: TcpStream,
    buf: BytesMut,
    /// The protocol version it was opened with.
    version: Version,
    /// The logical database it has selected.
    db: u8,
    /// A MULTI or WATCH was forwarded and no EXEC, DISCARD or RESET since.
    in_txn: bool,
}

impl Upstream {
    async fn connect(
        addr: &str,
        session: &Session,
        password: Option<&str>,
    ) -> io::Result<Upstream> {
        let stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connecting to the leader timed out",
                )
            })??;
        stream.set_nodelay(true)?;
        let mut up = Upstream {
            addr: addr.to_string(),
            stream,
            buf: BytesMut::new(),
            version: session.version,
            db: 0,
            in_txn: false,
        };
        // The upstream connection speaks as the client's does.
        let mut setup: Vec<Vec<&[u8]>> = Vec::new();
        if let Some(p) = password {
            setup.push(vec![b"AUTH", p.as_bytes()]);
        }
        if session.version == Version::Resp3 {
            setup.push(vec![b"HELLO", b"3"]);
        }
        if !setup.is_empty() {
            let mut out = BytesMut::new();
            for argv in &setup {
                encode_command(&mut out, argv);
            }
            up.stream.write_all(&out).await?;
            let mut sink = BytesMut::new();
            up.read_replies(setup.len(), &mut sink).await?;
        }
        Ok(up)
    }

    /// Reads `n` whole replies and appends their bytes to `out`.
    async fn read_replies(&mut self, n: usize, out: &mut BytesMut) -> io::Result<()> {
        let limits = ReplyLimits::default();
        let mut got = 0;
        while got < n {
            match parse_reply(&self.buf, &limits) {
                Ok(Some((_, len))) => {
                    out.extend_from_slice(&self.buf.split_to(len));
                    got += 1;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the leader's reply does not parse: {e:?}"),
                    ))
                }
            }
            self.buf.reserve(16 * 1024);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the leader closed the connection",
                ));
            }
        }
        Ok(())
    }
}

/// Sends `requests` to the leader at `addr` (through `upstream`, opened or replaced as needed)
/// and appends its replies to `out`.
///
/// # Errors
/// The leader cannot be reached or answers garbage; `out` is then unchanged and the connection
/// dropped.
pub async fn forward(
    upstream: &mut Option<Upstream>,
    addr: &str,
    session: &Session,
    password: Option<&str>,
    requests: &[Request],
    out: &mut BytesMut,
) -> io::Result<()> {
    if upstream
        .as_ref()
        .is_some_and(|u| u.addr != addr || u.version != session.version)
    {
        if upstream.as_ref().is_some_and(|u| u.in_txn) {
            return Err(io::Error::other(
                "the leader changed during the transaction",
            ));
        }
        *upstream = None;
    }
    if upstream.is_none() {
        *upstream = Some(Upstream::connect(addr, session, password).await?);
    }
    let up = upstream
        .as_mut()
        .ok_or_else(|| io::Error::other("no upstream"))?;
    let mut req = BytesMut::new();
    // The upstream reads and writes the database this connection selected.
    let select = up.db != session.db && !up.in_txn;
    let db = session.db.to_string();
    if select {
        encode_command(&mut req, &[b"SELECT".as_slice(), db.as_bytes()]);
    }
    for r in requests {
        encode_command(&mut req, r.argv());
    }
    // A blocking command may wait for as long as its client asked.
    let blocks = requests
        .iter()
        .any(|r| command_of(r).is_some_and(|c| c.has(BLOCKING)));
    let mut replies = BytesMut::new();
    let exchange = async {
        up.stream.write_all(&req).await?;
        if select {
            let mut sink = BytesMut::new();
            up.read_replies(1, &mut sink).await?;
        }
        up.read_replies(requests.len(), &mut replies).await
    };
    let result = if blocks {
        exchange.await
    } else {
        tokio::time::timeout(FORWARD_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the leader did not answer in time",
                ))
            })
    };
    match result {
        Ok(()) => {
            if select {
                up.db = session.db;
            }
            for r in requests {
                match command_of(r).map(|c| c.name) {
                    Some("multi" | "watch") => up.in_txn = true,
                    Some("exec" | "discard") => up.in_txn = false,
                    Some("reset") => (up.in_txn, up.db) = (false, 0),
                    _ => {}
                }
            }
            out.extend_from_slice(&replies);
            Ok(())
        }
        Err(e) => {
            *upstream = None;
            Err(e)
        }
    }
}

/// The error line for a replication failure.
pub fn error_line(e: &ReplError) -> String {
    match e {
        ReplError::NotLeader { .. } => format!("TRYAGAIN {e}"),
        ReplError::Unavailable(_) => format!("TRYAGAIN {e}"),
        _ => format!("ERR {e}"),
    }
}

/// `INFO replication` lines.
pub fn info_lines(replica: &Replica) -> Vec<(String, String)> {
    let s = replica.status();
    let leader = s.role == shale_repl::Role::Leader;
    let mut lines = vec![
        (
            "role".to_string(),
            if leader { "master" } else { "slave" }.to_string(),
        ),
        ("raft_role".into(), s.role.to_string()),
        ("raft_node_id".into(), s.id.to_string()),
        ("raft_term".into(), s.term.to_string()),
        (
            "raft_leader_id".into(),
            s.leader
                .as_ref()
                .map_or("none".into(), |(id, _)| id.to_string()),
        ),
        (
            "raft_last_log_index".into(),
            s.last_log_index.map_or(-1, |i| i as i64).to_string(),
        ),
        (
            "raft_commit_index".into(),
            s.committed.map_or(-1, |i| i as i64).to_string(),
        ),
        ("raft_applied_index".into(), s.applied.to_string()),
        (
            "raft_snapshot_index".into(),
            s.snapshot_index.map_or(-1, |i| i as i64).to_string(),
        ),
        (
            "raft_purged_index".into(),
            s.purged_index.map_or(-1, |i| i as i64).to_string(),
        ),
        (
            "raft_voters".into(),
            s.voters
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(","),
        ),
        (
            "raft_memtable_switches".into(),
            s.memtable_switches.to_string(),
        ),
    ];
    lines.push(("raft_replication_mode".into(), s.mode.to_string()));
    if s.mode == shale_repl::ReplicationMode::Rubble {
        let r = &s.rubble;
        for (name, value) in [
            ("sealed_not_installed", r.sealed_not_installed),
            ("bytes_shipped", r.bytes_shipped),
            ("bytes_fetched", r.bytes_fetched),
            ("edits_proposed", r.edits_proposed),
            ("edits_installed", r.edits_installed),
            ("edits_stale", r.edits_stale),
            ("fallback_flushes", r.fallback_flushes),
            ("job_terms", r.job_terms),
            ("jobs_running", r.jobs_running),
            ("stall_micros", r.stall_micros),
            ("fetch_wait_micros", r.fetch_wait_micros),
            ("install_micros", r.install_micros),
        ] {
            lines.push((format!("rubble_{name}"), value.to_string()));
        }
        for lag in &r.install_lag {
            lines.push((
                format!("rubble_install_lag_node{}", lag.id),
                format!("jobs={},bytes={}", lag.jobs_behind, lag.bytes_behind),
            ));
        }
        if let Some(w) = &r.waiting_for_files {
            lines.push((
                "rubble_waiting_for_files".into(),
                w.replace(['\r', '\n'], " "),
            ));
        }
    }
    let (batches, entries) = replica.proposed();
    lines.push(("raft_proposed_batches".into(), batches.to_string()));
    lines.push(("raft_proposed_entries".into(), entries.to_string()));
    lines.push((
        "raft_write_pressure_micros".into(),
        replica.write_pressure_micros().to_string(),
    ));
    lines.push((
        "raft_rpc_bytes_sent".into(),
        replica.rpc_bytes_sent().to_string(),
    ));
    if leader {
        lines.push(("connected_slaves".into(), s.followers.len().to_string()));
        let nodes = replica.nodes();
        for (i, f) in s.followers.iter().enumerate() {
            let addr = nodes
                .get(&f.id)
                .map(|n| n.client_addr.clone())
                .unwrap_or_default();
            let (ip, port) = addr.rsplit_once(':').unwrap_or((&addr, "0"));
            lines.push((
                format!("slave{i}"),
                format!(
                    "id={},ip={ip},port={port},state={},offset={},lag={}",
                    f.id,
                    if f.matched.is_some() {
                        "online"
                    } else {
                        "wait_bgsave"
                    },
                    f.matched.unwrap_or(0),
                    f.lag
                ),
            ));
        }
    } else if let Some((_, info)) = &s.leader {
        let (host, port) = info
            .client_addr
            .rsplit_once(':')
            .unwrap_or((&info.client_addr, "0"));
        lines.push(("master_host".into(), host.to_string()));
        lines.push(("master_port".into(), port.to_string()));
        lines.push(("master_link_status".into(), "up".into()));
    } else {
        lines.push(("master_link_status".into(), "down".into()));
    }
    lines.push(("master_repl_offset".into(), s.applied.to_string()));
    lines
}
