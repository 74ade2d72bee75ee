//! A replica: one node of a Shale cluster. It owns the engine (opened with an external log), the
//! Raft log, the snapshots, and the Raft node, and runs:
//!
//! - the proposer: client batches queue up and are merged, as many as arrived, into one `Write`
//!   entry (group commit: many client writes per append, per fsync and per replication round),
//!   with a few entries in flight at once; a batch is answered once its entry is applied here,
//!   which is after a majority holds it durably;
//! - the memtable switcher: on the leader, when the active memtable is full, it appends
//!   `SwitchMemtable` (every node seals at that entry);
//! - the snapshot trigger: after each flush it asks Raft for a snapshot (the checkpoint at the
//!   flushed position), after which Raft purges the log up to it, keeping some entries for
//!   followers that lag a little;
//! - the read barrier: linearizable reads wait for one leadership confirmation that started after
//!   they asked, shared by every read that asked meanwhile; while the leader holds a read lease
//!   (a confirmation began less than `read_lease_ms` ago in its current term) they wait for none,
//!   and a confirmation renews the lease in the background before it runs out.
//!
//! Why a lease is safe. A confirmation that began at `t` (leader's clock) was acknowledged by a
//! quorum; each acknowledging follower refuses votes for `election_timeout_ms.1` after it
//! received that heartbeat (openraft's leader lease, counted on the follower's clock from after
//! `t`); a node refuses every vote for as long after it starts ([`Service`]: a restarted node
//! forgot when it last heard from a leader); and the leader drops its lease before it handles
//! any vote request, and keeps no lease from a confirmation that began before one. A new leader
//! needs votes from a majority, which overlaps the confirming quorum, so none can exist before
//! `t + election_timeout_ms.1`, while the lease ends at `t + read_lease_ms`, below
//! `election_timeout_ms.0`. The clock-drift margin: with the defaults (lease 250 ms, election
//! timeouts 500..1000 ms) the lease stays safe unless a follower's clock runs 4x
//! (`election_timeout_ms.1 / read_lease_ms`) faster than the leader's. A leader paused after
//! its lease check (SIGSTOP, a long GC-like stall) is harmless: it reads the state it had at
//! the check, and an isolated leader applies nothing new. Not covered: a leader machine
//! suspended and resumed inside a lease (the monotonic clock stops while suspended), so
//! deployments that suspend VMs should set `read_lease_ms = 0`, which turns leases off.
//!
//! Writes are refused (`ReplError::NotLeader`) on a follower; the server forwards them.

use crate::command::Command;
use crate::error::ReplError;
use crate::log::LogStore;
use crate::network::{Service, Transport};
use crate::raft::{self, Consensus, NodeId, NodeInfo, Raft, RaftTiming};
use crate::rubble::{
    self, Fetcher, FileNumbers, InstallLag, Lane, ReplicationMode, RubbleCounters, RubbleSettings,
    RubbleStatus,
};
use crate::snapshot::SnapshotStore;
use crate::state_machine::{ApplyHook, Shared, StateMachine};
use openraft::ServerState;
use parking_lot::Mutex;
use shale::{Db, Options, WriteBatch};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, Notify, Semaphore};
use tokio::task::JoinHandle;

/// A group of client batches grows to at most this many bytes before it is proposed.
pub const GROUP_BYTES: usize = 4 << 20;
/// The largest entry: a single client batch above it is refused (pitfall: big payloads in log
/// entries stall heartbeats and snapshots behind them).
pub const MAX_ENTRY_BYTES: usize = 64 << 20;
/// How long [`Replica::shutdown`] waits for an apply in progress to end.
pub const SHUTDOWN_APPLY_WAIT: Duration = Duration::from_secs(30);

/// `Write` entries proposed and not yet applied, at most. Two: one replicates while the next
/// gathers every batch that arrives meanwhile. Each entry costs the leader a round of thread
/// wakes (proposer, Raft core, log sync thread, one replication task per follower, applier,
/// writers) whatever it carries, so fewer, larger entries are cheaper: on two shared CPUs with 50
/// pipelining clients, 8 in flight made entries of 4-5 client batches and 2 of 12-13, and the
/// leader did the same writes on a quarter less CPU.
pub const MAX_IN_FLIGHT: usize = 2;
/// How often the switcher and the snapshot trigger look, besides being woken.
pub const HOUSEKEEPING_PERIOD: Duration = Duration::from_millis(20);

/// How a replica is set up.
#[derive(Clone)]
pub struct ReplicaConfig {
    /// This node's id (unique in the cluster, never reused for another node).
    pub id: NodeId,
    /// Where this node listens.
    pub info: NodeInfo,
    /// The node's directory: `engine/` (the database), `raft/log/`, `raft/snapshots/`.
    pub dir: PathBuf,
    /// Engine options; their file system holds the log and snapshots too.
    pub engine: Options,
    /// Raft timing.
    pub timing: RaftTiming,
    /// Called with every entry applied (tests).
    pub hook: Option<ApplyHook>,
    /// Who flushes and compacts: every node (`Baseline`), or the leader alone (`Rubble`). The
    /// same on every node of a cluster.
    pub mode: ReplicationMode,
    /// Rubble mode's knobs.
    pub rubble: RubbleSettings,
}

/// A node's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    Candidate,
    Learner,
    Stopped,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Candidate => "candidate",
            Role::Learner => "learner",
            Role::Stopped => "stopped",
        })
    }
}

/// A follower as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerStatus {
    pub id: NodeId,
    /// The last entry known to match the leader's log.
    pub matched: Option<u64>,
    /// Entries the follower is behind the leader's last one.
    pub lag: u64,
}

/// What `INFO replication` shows.
#[derive(Debug, Clone)]
pub struct ClusterStatus {
    pub id: NodeId,
    pub role: Role,
    pub leader: Option<(NodeId, NodeInfo)>,
    pub term: u64,
    pub last_log_index: Option<u64>,
    pub committed: Option<u64>,
    pub applied: u64,
    pub snapshot_index: Option<u64>,
    pub purged_index: Option<u64>,
    pub voters: BTreeSet<NodeId>,
    pub learners: BTreeSet<NodeId>,
    /// On the leader only.
    pub followers: Vec<FollowerStatus>,
    /// Memtables sealed by the log since open.
    pub memtable_switches: u64,
    /// The cluster's replication mode.
    pub mode: ReplicationMode,
    /// Rubble mode's figures (zero in baseline mode).
    pub rubble: RubbleStatus,
}

/// What a writer is told when its entry is applied (or cannot be).
type Settled = Box<dyn FnOnce(bool) + Send>;

/// A queued batch's writer: answered once, after its `settled` callback ran.
struct Waiter {
    reply: Option<oneshot::Sender<Result<u64, ReplError>>>,
    settled: Option<Settled>,
}

impl Waiter {
    fn new(settled: Option<Settled>) -> (Waiter, PendingWrite) {
        let (tx, rx) = oneshot::channel();
        (
            Waiter {
                reply: Some(tx),
                settled,
            },
            PendingWrite(rx),
        )
    }

    /// Runs the callback (the first call only).
    fn settle(&mut self, applied: bool) {
        if let Some(settled) = self.settled.take() {
            settled(applied);
        }
    }

    /// Answers the writer (after its callback, if it was not run yet).
    fn answer(mut self, r: Result<u64, ReplError>) {
        self.settle(r.is_ok());
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(r);
        }
    }
}

/// A writer dropped unanswered (the replica stopped, its runtime ended) still has its callback
/// run: it may hold locks that other batches wait for.
impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some(settled) = self.settled.take() {
            settled(false);
        }
    }
}

/// A write queued by [`Replica::submit`]: await it, or [`PendingWrite::wait`] for it.
pub struct PendingWrite(oneshot::Receiver<Result<u64, ReplError>>);

impl PendingWrite {
    /// Blocks until the write's entry is applied here and returns its index.
    ///
    /// # Errors
    /// As [`Replica::write`].
    pub fn wait(self) -> Result<u64, ReplError> {
        futures::executor::block_on(self)
    }
}

impl std::future::Future for PendingWrite {
    type Output = Result<u64, ReplError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|r| {
            r.unwrap_or_else(|_| Err(ReplError::Unavailable("the replica stopped".into())))
        })
    }
}

#[derive(Default)]
struct Queue {
    batches: Vec<(WriteBatch, Waiter)>,
    closed: bool,
}

/// The leader's read lease (see the module documentation).
#[derive(Default)]
pub(crate) struct Lease {
    /// The term it was won in and when it runs out.
    granted: Option<(u64, Instant)>,
    /// Vote requests this node received. Each one ends the lease at once (the node may grant
    /// the vote and step down before its term metric shows it), and a confirmation that began
    /// before one does not grant a lease.
    votes_seen: u64,
}

impl Lease {
    /// Called before this node handles a vote request.
    pub(crate) fn vote_requested(&mut self) {
        self.granted = None;
        self.votes_seen += 1;
    }
}

struct Inner {
    id: NodeId,
    raft: Raft,
    shared: Arc<Shared>,
    log: LogStore,
    queue: Mutex<Queue>,
    queued: Notify,
    applied_write: Notify,
    barrier: Mutex<Vec<oneshot::Sender<Result<(), ReplError>>>>,
    barrier_wanted: Notify,
    lease: Arc<Mutex<Lease>>,
    lease_len: Duration,
    /// A confirmation is wanted to renew the lease (no reader waits for it).
    renew: AtomicBool,
    barrier_rounds: AtomicU64,
    /// Votes are refused until then (see the module documentation).
    votes_from: Instant,
    stopping: AtomicBool,
    proposed_entries: AtomicU64,
    proposed_batches: AtomicU64,
    /// Microseconds new entries were held back by the engine's write pressure.
    pressure_micros: AtomicU64,
    mode: ReplicationMode,
    rubble: RubbleSettings,
    rubble_counters: Arc<RubbleCounters>,
    transport: Arc<dyn Transport>,
}

/// See the module documentation.
pub struct Replica {
    inner: Arc<Inner>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Rubble mode: the leader's lanes' shared part (its transfers end when the node stops).
    rubble_leader: Option<Arc<rubble::Leader>>,
}

impl Replica {
    /// Opens the node's engine, log and snapshots and starts its Raft node and tasks. Must run
    /// inside a multi-threaded tokio runtime.
    ///
    /// # Errors
    /// The engine cannot be opened, the log or snapshots cannot be read, or the settings are
    /// invalid.
    pub async fn open(
        config: ReplicaConfig,
        transport: Arc<dyn Transport>,
    ) -> Result<Replica, ReplError> {
        let fs = config.engine.fs.clone();
        let engine_dir = config.dir.join("engine");
        let options = config.engine.clone();
        let mode = config.mode;
        let db = tokio::task::spawn_blocking(move || match mode {
            ReplicationMode::Baseline => Db::open_with_external_log(&engine_dir, options),
            ReplicationMode::Rubble => Db::open_for_log_installs(&engine_dir, options),
        })
        .await
        .map_err(|e| ReplError::Io(e.to_string()))??;
        let db = Arc::new(db);
        let io = |e: std::io::Error| ReplError::Io(e.to_string());
        let log = LogStore::open(fs.clone(), &config.dir.join("raft").join("log")).map_err(io)?;
        let snapshots = SnapshotStore::open(fs.clone(), &config.dir.join("raft").join("snapshots"))
            .map_err(io)?;
        let counters = Arc::new(RubbleCounters::default());
        let fetcher = (mode == ReplicationMode::Rubble).then(|| Fetcher {
            id: config.id,
            transport: transport.clone(),
            fs: fs.clone(),
            settings: config.rubble.clone(),
            counters: counters.clone(),
            waiting: Mutex::new(None),
            lanes: Mutex::default(),
        });
        let shared =
            Arc::new(Shared::new(db.clone(), snapshots, config.hook.clone(), fetcher).map_err(io)?);
        let raft = Raft::new(
            config.id,
            raft::config(&config.timing)?,
            raft::Network {
                transport: transport.clone(),
                from: config.id,
            },
            log.clone(),
            StateMachine {
                shared: shared.clone(),
            },
        )
        .await
        .map_err(|e| ReplError::Unavailable(e.to_string()))?;
        let inner = Arc::new(Inner {
            id: config.id,
            raft,
            shared,
            log,
            queue: Mutex::new(Queue::default()),
            queued: Notify::new(),
            applied_write: Notify::new(),
            barrier: Mutex::new(Vec::new()),
            barrier_wanted: Notify::new(),
            lease: Arc::new(Mutex::new(Lease::default())),
            lease_len: Duration::from_millis(config.timing.read_lease_ms),
            renew: AtomicBool::new(false),
            barrier_rounds: AtomicU64::new(0),
            votes_from: if config.timing.read_lease_ms > 0 {
                Instant::now() + Duration::from_millis(config.timing.election_timeout_ms.1)
            } else {
                Instant::now()
            },
            stopping: AtomicBool::new(false),
            proposed_entries: AtomicU64::new(0),
            proposed_batches: AtomicU64::new(0),
            pressure_micros: AtomicU64::new(0),
            mode,
            rubble: config.rubble.clone(),
            rubble_counters: counters.clone(),
            transport: transport.clone(),
        });
        let mut tasks = vec![
            tokio::spawn(propose_loop(inner.clone())),
            tokio::spawn(switch_loop(inner.clone())),
            tokio::spawn(snapshot_loop(inner.clone())),
            tokio::spawn(barrier_loop(inner.clone())),
        ];
        let mut rubble_leader = None;
        if mode == ReplicationMode::Rubble {
            let leader = Arc::new(rubble::Leader {
                id: config.id,
                raft: inner.raft.clone(),
                db,
                fs,
                transport,
                settings: config.rubble.clone(),
                numbers: FileNumbers::new(counters.clone()),
                counters,
                shipments: Mutex::new(Some(tokio::task::JoinSet::new())),
            });
            for lane in [Lane::Flush, Lane::Compaction, Lane::Gc] {
                tasks.push(tokio::spawn(rubble::lane_loop(leader.clone(), lane)));
            }
            rubble_leader = Some(leader);
        }
        Ok(Replica {
            inner,
            tasks: Mutex::new(tasks),
            rubble_leader,
        })
    }

    /// Starts a new cluster of `members` (call it on each of them, with the same members; a node
    /// that already belongs to a cluster ignores it).
    ///
    /// # Errors
    /// The Raft node stopped.
    pub async fn initialize(&self, members: BTreeMap<NodeId, NodeInfo>) -> Result<(), ReplError> {
        match self.inner.raft.initialize(members).await {
            Ok(()) => Ok(()),
            Err(openraft::error::RaftError::APIError(
                openraft::error::InitializeError::NotAllowed(_),
            )) => Ok(()),
            Err(e) => Err(ReplError::Unavailable(e.to_string())),
        }
    }

    /// The receiving end for this node's messages (to attach to a transport's listener).
    pub fn service(&self) -> Service {
        Service {
            raft: self.inner.raft.clone(),
            shared: self.inner.shared.clone(),
            votes_from: self.inner.votes_from,
            lease: self.inner.lease.clone(),
        }
    }

    /// The engine. Read it freely; never write to it directly.
    pub fn db(&self) -> &Arc<Db> {
        &self.inner.shared.db
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// Replicates `batch` and resolves with its entry's index once the entry is applied here.
    ///
    /// # Errors
    /// `NotLeader` on a follower; `Unavailable` when leadership is lost or no quorum answers (the
    /// write may or may not be applied); `TooLarge`.
    pub async fn write(&self, batch: WriteBatch) -> Result<u64, ReplError> {
        self.submit(batch)?.await
    }

    /// [`Replica::write`] for a caller that may block its thread (not a runtime's worker that the
    /// replica itself needs).
    ///
    /// # Errors
    /// As [`Replica::write`].
    pub fn write_blocking(&self, batch: WriteBatch) -> Result<u64, ReplError> {
        self.submit(batch)?.wait()
    }

    /// Queues `batch` for replication and returns at once; the [`PendingWrite`] resolves once
    /// its entry is applied here. Batches are proposed in the order they were submitted, so a
    /// caller may submit under a lock that orders its batches and wait after releasing it.
    ///
    /// # Errors
    /// `NotLeader` on a follower; `Unavailable` while stopping; `TooLarge`.
    pub fn submit(&self, batch: WriteBatch) -> Result<PendingWrite, ReplError> {
        let (waiter, pending) = Waiter::new(None);
        self.enqueue(batch, waiter)?;
        Ok(pending)
    }

    /// [`Replica::submit`], and `settled` runs exactly once: with `true` once the entry is
    /// applied here, with `false` when the write failed or may not be applied (also when this
    /// call fails), always before the [`PendingWrite`] resolves. It runs on the replica's
    /// runtime and must not block: a caller releases there what it held for the write (the
    /// locks of the keys it wrote), so the next write of those keys need not wait until the
    /// writer itself is scheduled.
    ///
    /// # Errors
    /// As [`Replica::submit`].
    pub fn submit_then(
        &self,
        batch: WriteBatch,
        settled: impl FnOnce(bool) + Send + 'static,
    ) -> Result<PendingWrite, ReplError> {
        let (waiter, pending) = Waiter::new(Some(Box::new(settled)));
        self.enqueue(batch, waiter)?;
        Ok(pending)
    }

    fn enqueue(&self, batch: WriteBatch, waiter: Waiter) -> Result<(), ReplError> {
        if batch.encoded_len() > MAX_ENTRY_BYTES {
            return Err(ReplError::TooLarge(batch.encoded_len()));
        }
        if !self.is_leader() {
            return Err(ReplError::NotLeader {
                leader: self.leader(),
            });
        }
        let mut q = self.inner.queue.lock();
        if q.closed {
            return Err(ReplError::Unavailable("the replica is stopping".into()));
        }
        q.batches.push((batch, waiter));
        drop(q);
        self.inner.queued.notify_one();
        Ok(())
    }

    /// Waits until a read here is linearizable: leadership confirmed by a quorum after the call
    /// began, and everything committed before it applied; or returns at once while the leader
    /// holds its read lease (see the module documentation), since every write acknowledged to a
    /// client was applied here first and no other leader can exist yet.
    ///
    /// # Errors
    /// `NotLeader` on a follower; `Unavailable` without a quorum.
    pub async fn read_barrier(&self) -> Result<(), ReplError> {
        let Some(leading) = self.leading_term() else {
            return Err(ReplError::NotLeader {
                leader: self.leader(),
            });
        };
        let granted = self.inner.lease.lock().granted;
        if let Some((term, until)) = granted {
            let now = Instant::now();
            if now < until && term == leading {
                if until - now < self.inner.lease_len / 2
                    && !self.inner.renew.swap(true, Ordering::AcqRel)
                {
                    self.inner.barrier_wanted.notify_one();
                }
                return Ok(());
            }
        }
        let (tx, rx) = oneshot::channel();
        self.inner.barrier.lock().push(tx);
        self.inner.barrier_wanted.notify_one();
        rx.await
            .unwrap_or_else(|_| Err(ReplError::Unavailable("the replica stopped".into())))
    }

    /// The current Raft term as this node knows it.
    pub fn term(&self) -> u64 {
        self.inner.raft.metrics().borrow().current_term
    }

    /// Leadership confirmations run for read barriers (each is a heartbeat round).
    pub fn barrier_rounds(&self) -> u64 {
        self.inner.barrier_rounds.load(Ordering::Relaxed)
    }

    /// Whether this node believes it is the leader.
    pub fn is_leader(&self) -> bool {
        is_leader(&self.inner)
    }

    /// The term this node believes it leads in; `None` when it does not lead. One look at the
    /// Raft metrics (a per-batch call: each look takes the metrics' lock).
    pub fn leading_term(&self) -> Option<u64> {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        (m.state == ServerState::Leader && m.current_leader == Some(self.inner.id))
            .then_some(m.current_term)
    }

    /// The leader this node knows of.
    pub fn leader(&self) -> Option<(NodeId, NodeInfo)> {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        let id = m.current_leader?;
        let info = m.membership_config.membership().get_node(&id)?.clone();
        Some((id, info))
    }

    /// The index of the last entry applied here.
    pub fn applied_index(&self) -> u64 {
        self.inner.shared.applied_index.load(Ordering::Acquire)
    }

    /// Runs `f` between two applies: no entry or snapshot is being applied meanwhile, so what
    /// `f` reads of the database matches [`Replica::applied_index`] (an apply changes the
    /// database before it advances the applied index). For checks that compare nodes.
    pub fn between_applies<R>(&self, f: impl FnOnce() -> R) -> R {
        let _applying = self.inner.shared.applying.lock();
        f()
    }

    /// Indexes of the `SwitchMemtable` entries applied since open.
    pub fn switch_indexes(&self) -> Vec<u64> {
        self.inner.shared.inner.lock().switch_indexes.clone()
    }

    /// Bytes of Raft messages this node sent so far (0 where its transport does not count them).
    pub fn rpc_bytes_sent(&self) -> u64 {
        self.inner.transport.rpc_bytes_sent()
    }

    /// Client batches and entries proposed since open (their ratio is the group-commit factor).
    pub fn proposed(&self) -> (u64, u64) {
        (
            self.inner.proposed_batches.load(Ordering::Relaxed),
            self.inner.proposed_entries.load(Ordering::Relaxed),
        )
    }

    /// Microseconds since open that this node, as leader, held new write entries back because
    /// its engine was behind on flushes or compactions ([`shale::Db::write_pressure`]).
    pub fn write_pressure_micros(&self) -> u64 {
        self.inner.pressure_micros.load(Ordering::Relaxed)
    }

    /// Role, leader, term, indexes and followers' lag.
    pub fn status(&self) -> ClusterStatus {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        let (voters, learners) = raft::voters_and_learners(membership);
        let last = m.last_log_index;
        let followers = m
            .replication
            .as_ref()
            .map(|r| {
                r.iter()
                    .filter(|(id, _)| **id != self.inner.id)
                    .map(|(id, matched)| {
                        let matched = matched.map(|l| l.index);
                        FollowerStatus {
                            id: *id,
                            matched,
                            lag: last.unwrap_or(0).saturating_sub(matched.unwrap_or(0)),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let leader = m
            .current_leader
            .and_then(|id| membership.get_node(&id).map(|n| (id, n.clone())));
        ClusterStatus {
            id: self.inner.id,
            role: match m.state {
                ServerState::Leader => Role::Leader,
                ServerState::Follower => Role::Follower,
                ServerState::Candidate => Role::Candidate,
                ServerState::Learner => Role::Learner,
                ServerState::Shutdown => Role::Stopped,
            },
            leader,
            term: m.current_term,
            last_log_index: last,
            committed: self.inner.log.committed(),
            applied: self.applied_index(),
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            voters,
            learners,
            followers,
            memtable_switches: self.inner.shared.inner.lock().switch_indexes.len() as u64,
            mode: self.inner.mode,
            rubble: self.rubble_status(),
        }
    }

    /// Rubble mode's figures on this node.
    pub fn rubble_status(&self) -> RubbleStatus {
        let db = &self.inner.shared.db;
        let c = &self.inner.rubble_counters;
        let (installed, stale, fallback) = db.install_counts();
        let sealed = if self.inner.mode == ReplicationMode::Rubble {
            db.sealed_positions().len() as u64
        } else {
            0
        };
        RubbleStatus {
            sealed_not_installed: sealed,
            bytes_shipped: c.bytes_shipped.load(Ordering::Relaxed),
            bytes_fetched: c.bytes_fetched.load(Ordering::Relaxed),
            edits_proposed: c.edits_proposed.load(Ordering::Relaxed),
            edits_installed: installed,
            edits_stale: stale,
            fallback_flushes: fallback,
            job_terms: c.job_terms.load(Ordering::Relaxed),
            jobs_running: c.jobs_running.load(Ordering::Acquire),
            stall_micros: c.stall_micros.load(Ordering::Relaxed),
            fetch_wait_micros: c.fetch_wait_micros.load(Ordering::Relaxed),
            install_micros: c.install_micros.load(Ordering::Relaxed),
            install_lag: c
                .behind
                .lock()
                .iter()
                .map(|(&id, &(jobs, bytes))| InstallLag {
                    id,
                    jobs_behind: jobs,
                    bytes_behind: bytes,
                })
                .collect(),
            waiting_for_files: self
                .inner
                .shared
                .fetcher
                .as_ref()
                .and_then(|f| f.waiting.lock().clone()),
        }
    }

    /// The cluster's nodes as this node knows them.
    pub fn nodes(&self) -> BTreeMap<NodeId, NodeInfo> {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        raft::nodes(m.membership_config.membership())
    }

    /// Adds a node: it joins as a learner, catches up (by snapshot when the log it needs is
    /// purged), then becomes a voter. Leader only.
    ///
    /// # Errors
    /// `NotLeader`, or `Unavailable` when the change cannot commit.
    pub async fn add_node(&self, id: NodeId, info: NodeInfo) -> Result<(), ReplError> {
        let map = |e: openraft::error::RaftError<
            NodeId,
            openraft::error::ClientWriteError<NodeId, NodeInfo>,
        >| match e {
            openraft::error::RaftError::APIError(
                openraft::error::ClientWriteError::ForwardToLeader(f),
            ) => ReplError::NotLeader {
                leader: f.leader_id.zip(f.leader_node),
            },
            e => ReplError::Unavailable(e.to_string()),
        };
        self.inner
            .raft
            .add_learner(id, info, true)
            .await
            .map_err(map)?;
        let mut voters: BTreeSet<NodeId> = self.status().voters;
        voters.insert(id);
        self.inner
            .raft
            .change_membership(voters, false)
            .await
            .map_err(map)?;
        Ok(())
    }

    /// Removes a node (dead or alive) from the cluster. Leader only.
    ///
    /// # Errors
    /// `NotLeader`, or `Unavailable` when the change cannot commit.
    pub async fn remove_node(&self, id: NodeId) -> Result<(), ReplError> {
        let mut voters = self.status().voters;
        voters.remove(&id);
        self.inner
            .raft
            .change_membership(voters, false)
            .await
            .map(|_| ())
            .map_err(|e| match e {
                openraft::error::RaftError::APIError(
                    openraft::error::ClientWriteError::ForwardToLeader(f),
                ) => ReplError::NotLeader {
                    leader: f.leader_id.zip(f.leader_node),
                },
                e => ReplError::Unavailable(e.to_string()),
            })
    }

    /// Asks for a snapshot now (normally one follows each flush).
    pub async fn trigger_snapshot(&self) {
        let _ = self.inner.raft.trigger().snapshot().await;
    }

    /// Starts an election now (tests).
    pub async fn trigger_election(&self) {
        let _ = self.inner.raft.trigger().elect().await;
    }

    /// Stops the node: pending writes fail, the Raft node and its tasks stop, nothing is applied
    /// and no received file lands once it returns (an apply or a transfer's piece in progress is
    /// waited for, up to [`SHUTDOWN_APPLY_WAIT`]), the log is closed. The engine closes when the
    /// last handle to it is dropped.
    pub async fn shutdown(&self) {
        self.stop_tasks();
        let _ = self.inner.raft.shutdown().await;
        let shared = self.inner.shared.clone();
        let applies = tokio::task::spawn_blocking(move || shared.wait_applies());
        if tokio::time::timeout(SHUTDOWN_APPLY_WAIT, applies)
            .await
            .is_err()
        {
            tracing::warn!("an apply still runs after {SHUTDOWN_APPLY_WAIT:?} of shutdown");
        }
        // A running transfer fails at its next piece (`Receptions`).
        let receptions = &self.inner.shared.receptions;
        let deadline = tokio::time::Instant::now() + SHUTDOWN_APPLY_WAIT;
        while receptions.running() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if receptions.running() > 0 {
            tracing::warn!("a file transfer into this node still runs after {SHUTDOWN_APPLY_WAIT:?} of shutdown");
        }
        self.inner.log.close();
    }

    /// What stopping does without waiting: pending writes and reads fail, the replica's own
    /// tasks end, and an apply waiting for files gives up (so a runtime can shut down).
    fn stop_tasks(&self) {
        self.inner.stopping.store(true, Ordering::Release);
        self.inner.shared.stopping.store(true, Ordering::Release);
        self.inner.shared.receptions.stop();
        {
            let mut q = self.inner.queue.lock();
            q.closed = true;
            for (_, w) in q.batches.drain(..) {
                w.answer(Err(ReplError::Unavailable(
                    "the replica is stopping".into(),
                )));
            }
        }
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        if let Some(l) = &self.rubble_leader {
            l.stop();
        }
        for tx in self.inner.barrier.lock().drain(..) {
            let _ = tx.send(Err(ReplError::Unavailable(
                "the replica is stopping".into(),
            )));
        }
    }
}

/// A replica dropped without [`Replica::shutdown`] (a panicking test, a server that exits) still
/// stops its tasks and any apply blocked on files; the Raft node's own tasks end with the runtime.
impl Drop for Replica {
    fn drop(&mut self) {
        self.stop_tasks();
    }
}

fn is_leader(inner: &Inner) -> bool {
    let m = inner.raft.metrics();
    let m = m.borrow();
    m.state == ServerState::Leader && m.current_leader == Some(inner.id)
}

/// Takes a group of queued batches, at most [`GROUP_BYTES`] unless the first alone is larger.
fn take_group(inner: &Inner) -> Vec<(WriteBatch, Waiter)> {
    let mut q = inner.queue.lock();
    let mut bytes = 0;
    let mut n = 0;
    for (b, _) in &q.batches {
        if n > 0 && bytes + b.encoded_len() > GROUP_BYTES {
            break;
        }
        bytes += b.encoded_len();
        n += 1;
    }
    q.batches.drain(..n).collect()
}

/// One batch of the entries of `batches`, in order, built in one allocation of its final size.
fn merge<'a>(batches: impl Iterator<Item = &'a WriteBatch> + Clone) -> WriteBatch {
    let bytes = batches.clone().map(WriteBatch::encoded_len).sum();
    let mut merged = WriteBatch::with_capacity(bytes);
    for b in batches {
        merged.append(b);
    }
    merged
}

async fn propose_loop(inner: Arc<Inner>) {
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    loop {
        if inner.queue.lock().batches.is_empty() {
            inner.queued.notified().await;
            continue;
        }
        // A slot first, the group after: the batches that queue while every slot is taken (or
        // while writes are held back) all join the next entry. (Taken before the wait, the group
        // was whatever had queued since the last one, often one batch: entries carried two client
        // batches on average under 50 writing clients.)
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        // The leader's engine is behind on flushes or compactions: hold new entries back.
        if inner.shared.db.write_pressure() {
            let held = Instant::now();
            while inner.shared.db.write_pressure() && !inner.stopping.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            inner
                .pressure_micros
                .fetch_add(held.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        if inner.mode == ReplicationMode::Rubble {
            rubble_stall(&inner).await;
        }
        let group = take_group(&inner);
        if group.is_empty() {
            continue;
        }
        let merged = merge(group.iter().map(|(b, _)| b));
        let waiters: Vec<Waiter> = group.into_iter().map(|(_, w)| w).collect();
        inner.proposed_entries.fetch_add(1, Ordering::Relaxed);
        inner
            .proposed_batches
            .fetch_add(waiters.len() as u64, Ordering::Relaxed);
        match inner
            .raft
            .propose(Command::Write(merged.into_data().into()))
            .await
        {
            Ok(applied) => {
                let inner = inner.clone();
                tokio::spawn(async move {
                    let r = applied.await;
                    drop(permit);
                    // Every callback first (they release the writers' locks, which waiting
                    // batches then find free at once), then the answers.
                    let mut waiters = waiters;
                    for w in &mut waiters {
                        w.settle(r.is_ok());
                    }
                    for w in waiters {
                        w.answer(r.clone());
                    }
                    // The switcher is woken only when it has work (not once per entry).
                    if inner.shared.db.memtable_full() {
                        inner.applied_write.notify_one();
                    }
                });
            }
            Err(e) => {
                for w in waiters {
                    w.answer(Err(e.clone()));
                }
            }
        }
    }
}

/// Rubble mode's gradual stall: the more sealed memtables wait for their install, the longer a
/// new write entry waits (see `rubble::write_delay`).
async fn rubble_stall(inner: &Inner) {
    let start = std::time::Instant::now();
    loop {
        let sealed = inner.shared.db.sealed_positions().len();
        match rubble::write_delay(&inner.rubble, sealed) {
            Some(d) if d.is_zero() => break,
            Some(d) => {
                tokio::time::sleep(d).await;
                break;
            }
            None if inner.stopping.load(Ordering::Acquire) => break,
            None => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
    let waited = start.elapsed().as_micros() as u64;
    if waited > 0 {
        inner
            .rubble_counters
            .stall_micros
            .fetch_add(waited, Ordering::Relaxed);
    }
}

async fn switch_loop(inner: Arc<Inner>) {
    loop {
        tokio::select! {
            _ = inner.applied_write.notified() => {}
            _ = tokio::time::sleep(HOUSEKEEPING_PERIOD) => {}
        }
        if !is_leader(&inner) || !inner.shared.db.memtable_full() {
            continue;
        }
        match inner.raft.propose(Command::SwitchMemtable).await {
            Ok(applied) => {
                if let Err(e) = applied.await {
                    tracing::debug!(error = %e, "sealing the memtable through the log failed");
                }
            }
            Err(e) => tracing::debug!(error = %e, "proposing a memtable switch failed"),
        }
    }
}

async fn snapshot_loop(inner: Arc<Inner>) {
    let mut done = inner.shared.db.flushed_position().map_or(0, |p| p.index);
    loop {
        tokio::time::sleep(HOUSEKEEPING_PERIOD * 5).await;
        let flushed = inner.shared.db.flushed_position().map_or(0, |p| p.index);
        if flushed > done {
            if inner.raft.trigger().snapshot().await.is_err() {
                return;
            }
            done = flushed;
        }
    }
}

async fn barrier_loop(inner: Arc<Inner>) {
    loop {
        let waiting = std::mem::take(&mut *inner.barrier.lock());
        if waiting.is_empty() && !inner.renew.swap(false, Ordering::AcqRel) {
            inner.barrier_wanted.notified().await;
            continue;
        }
        let term = inner.raft.metrics().borrow().current_term;
        let votes_seen = inner.lease.lock().votes_seen;
        let began = Instant::now();
        inner.barrier_rounds.fetch_add(1, Ordering::Relaxed);
        let r = inner.raft.read_barrier().await;
        if r.is_ok() && !inner.lease_len.is_zero() {
            let mut lease = inner.lease.lock();
            if lease.votes_seen == votes_seen {
                lease.granted = Some((term, began + inner.lease_len));
            }
        }
        for tx in waiting {
            let _ = tx.send(r.clone());
        }
    }
}
