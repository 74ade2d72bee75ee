//! Rubble mode (RubbleDB's "compact once, ship the files" on Raft): only the leader flushes,
//! compacts and collects blob garbage; the other nodes install the files it made.
//!
//! On the leader three lanes run, one for flushes (in seal order), one for compactions and one
//! for blob GC, each doing one job at a time:
//! 1. prepare the job on the engine (`Db::prepare_flush` / `prepare_compaction` /
//!    `prepare_gc`): output files named `(term, counter)` by the leader's term, inputs held;
//! 2. ship the outputs to every other node over the bulk channel (`Transport::ship_files`, a
//!    connection of its own, never the Raft one), where they land in the engine's staging
//!    directory, synced with the directory before the node answers;
//! 3. once a quorum (the leader included) holds them, propose `InstallEdit` through the log;
//!    every node applies it in log order (`state_machine`), fetching a file it lacks from the
//!    leader or any other node first.
//!
//! A job whose term ended before its proposal, that no quorum received in time, or whose proposal
//! failed, is abandoned (its inputs freed, its outputs removed unless an install made them live);
//! an edit that commits anyway finds its files on the nodes that acknowledged them.
//!
//! Staging files of older terms are removed once an entry of a newer term is applied (log terms
//! never decrease, and an edit's files carry its entry's term), files of a lane that an applied
//! edit of the same lane supersedes once it applies ([`AppliedLanes`]), and all of them at open.
//!
//! Writes slow down gradually as sealed memtables wait for their install (pitfall: a dead
//! follower must not pin memory forever): see [`RubbleSettings`].

use crate::command::{Command, EditCommand};
use crate::network::Transport;
use crate::raft::{Consensus, NodeId, NodeInfo, Raft};
use crate::snapshot::{FileInfo, SnapshotFiles};
use parking_lot::Mutex;
use shale::fs::Fs;
use shale::{file_number, Db, InstallEdit};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Which node does the flushes and compactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReplicationMode {
    /// Every node flushes and compacts its own engine.
    #[default]
    Baseline,
    /// Only the leader does; the others install the files it ships.
    Rubble,
}

impl std::str::FromStr for ReplicationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<ReplicationMode, String> {
        match s {
            "baseline" => Ok(ReplicationMode::Baseline),
            "rubble" => Ok(ReplicationMode::Rubble),
            other => Err(format!(
                "replication-mode {other:?}: expected \"rubble\" or \"baseline\""
            )),
        }
    }
}

impl std::fmt::Display for ReplicationMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReplicationMode::Baseline => "baseline",
            ReplicationMode::Rubble => "rubble",
        })
    }
}

/// Called once a quorum holds a job's files, just before its edit is proposed; the lane waits
/// for the pause it returns (tests stop or depose a leader there).
pub type BeforePropose = Arc<dyn Fn() -> Option<Duration> + Send + Sync>;

/// Rubble mode's knobs.
#[derive(Clone)]
pub struct RubbleSettings {
    /// How long a node keeps trying to get an edit's files before it writes a flush's outputs
    /// itself (`Db::write_flush_outputs`).
    pub fallback_after: Duration,
    /// How long the leader waits for a quorum to hold a job's files before it gives the job up.
    pub ship_timeout: Duration,
    /// Sealed memtables waiting for their install above which each new write entry waits
    /// [`RubbleSettings::slowdown_step`] per memtable over.
    pub slowdown_sealed: usize,
    /// The delay per sealed memtable above [`RubbleSettings::slowdown_sealed`].
    pub slowdown_step: Duration,
    /// Sealed memtables waiting at which writes stop until an install makes room.
    pub stop_sealed: usize,
    /// Bytes per second the leader ships to each node at most (0: no limit).
    pub ship_bytes_per_sec: u64,
    /// See [`BeforePropose`].
    pub before_propose: Option<BeforePropose>,
}

impl std::fmt::Debug for RubbleSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RubbleSettings")
            .field("fallback_after", &self.fallback_after)
            .field("ship_timeout", &self.ship_timeout)
            .field("slowdown_sealed", &self.slowdown_sealed)
            .field("slowdown_step", &self.slowdown_step)
            .field("stop_sealed", &self.stop_sealed)
            .field("ship_bytes_per_sec", &self.ship_bytes_per_sec)
            .finish_non_exhaustive()
    }
}

impl Default for RubbleSettings {
    fn default() -> RubbleSettings {
        RubbleSettings {
            fallback_after: Duration::from_secs(10),
            ship_timeout: Duration::from_secs(10),
            slowdown_sealed: 4,
            slowdown_step: Duration::from_millis(2),
            stop_sealed: 12,
            ship_bytes_per_sec: 0,
            before_propose: None,
        }
    }
}

/// What rubble mode did on one node, since open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RubbleStatus {
    /// Sealed memtables whose flush is not installed yet.
    pub sealed_not_installed: u64,
    /// Bytes of files this node shipped (as leader) and fetched.
    pub bytes_shipped: u64,
    pub bytes_fetched: u64,
    /// Edits this node proposed; edits it applied as installs, as stale no-ops; flushes it
    /// wrote itself because it could not get the files.
    pub edits_proposed: u64,
    pub edits_installed: u64,
    pub edits_stale: u64,
    pub fallback_flushes: u64,
    /// Terms in which this node led and wrote job outputs: its flushes and compactions all
    /// happened in them (0 on a node that never led a job).
    pub job_terms: u64,
    /// Jobs this node's lanes are preparing, shipping or proposing now (a deposed leader's job
    /// runs on until it is given up; its outputs are not orphans before then).
    pub jobs_running: u64,
    /// Microseconds writes waited for installs (the gradual stall).
    pub stall_micros: u64,
    /// Microseconds this node's applier spent on `InstallEdit` entries: waiting for their files
    /// (`fetch_wait_micros`), and installing them (`install_micros`: moves, syncs, MANIFEST).
    /// The entries behind an edit wait meanwhile.
    pub fetch_wait_micros: u64,
    pub install_micros: u64,
    /// On the leader: per node, the jobs whose files it does not hold yet.
    pub install_lag: Vec<InstallLag>,
    /// While this node's applier waits for an edit's files: which, for how long, and why the
    /// last fetches failed.
    pub waiting_for_files: Option<String>,
}

/// How far one node is behind in holding the leader's files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallLag {
    pub id: NodeId,
    /// Jobs shipped to it and not acknowledged yet.
    pub jobs_behind: u64,
    /// Their bytes.
    pub bytes_behind: u64,
}

/// Counters shared by the replica and its state machine.
#[derive(Default)]
pub(crate) struct RubbleCounters {
    pub bytes_shipped: AtomicU64,
    pub bytes_fetched: AtomicU64,
    pub edits_proposed: AtomicU64,
    pub stall_micros: AtomicU64,
    /// See [`RubbleStatus::install_micros`].
    pub fetch_wait_micros: AtomicU64,
    pub install_micros: AtomicU64,
    /// See [`RubbleStatus::job_terms`].
    pub job_terms: AtomicU64,
    /// See [`RubbleStatus::jobs_running`].
    pub jobs_running: AtomicU64,
    /// Per node: (jobs, bytes) shipped and not acknowledged.
    pub behind: Mutex<BTreeMap<NodeId, (u64, u64)>>,
    /// Per node: its flushed log index, as its last acknowledgement said.
    pub flushed: Mutex<BTreeMap<NodeId, u64>>,
}

/// Hands out the leader's file numbers: `(term, counter)`, the counter starting over in each
/// term (a term has one leader, and a node never leads the same term twice). The counter's low
/// [`LANE_BITS`] name the lane whose job wrote the file (see [`AppliedLanes`]).
pub(crate) struct FileNumbers {
    state: Mutex<(u64, u64)>,
    /// Counts the terms (`job_terms`).
    counters: Arc<RubbleCounters>,
}

impl FileNumbers {
    pub(crate) fn new(counters: Arc<RubbleCounters>) -> FileNumbers {
        FileNumbers {
            state: Mutex::new((0, 0)),
            counters,
        }
    }

    pub(crate) fn next(&self, term: u64, lane: Lane) -> u64 {
        let mut s = self.state.lock();
        if s.0 != term {
            *s = (term, 0);
            self.counters.job_terms.fetch_add(1, Ordering::Relaxed);
        }
        s.1 += 1;
        file_number(term, (s.1 << LANE_BITS) | lane.bits())
    }
}

/// Bits of a file number's counter that name its lane.
const LANE_BITS: u32 = 2;

/// The staged files a node no longer needs, from the edits it applied. A lane prepares one job
/// at a time and proposes it (or gives it up) before it prepares the next, and the counters of
/// one term grow: once an edit of a lane is applied here, no later log entry names a file of
/// that lane and term with a counter at or below the edit's. So a staged file of that kind is
/// one whose edit is applied (the leader's shipment came after this node fetched the files
/// itself, or restarted) or a job the leader gave up: no edit installs it.
#[derive(Debug, Default)]
pub(crate) struct AppliedLanes {
    /// The newest term of an applied output.
    term: u64,
    /// Per lane, the highest counter of an applied output of that term.
    upto: [u64; 1 << LANE_BITS],
}

impl AppliedLanes {
    /// Takes in the outputs of an edit applied here (installed or stale).
    pub(crate) fn applied(&mut self, edit: &InstallEdit) {
        for o in &edit.outputs {
            // `NUMBER.sst` or `NUMBER.blob`.
            let Some(n) = o.name.split('.').next().and_then(|n| n.parse().ok()) else {
                continue;
            };
            let (term, counter) = split_number(n);
            if term > self.term {
                *self = AppliedLanes {
                    term,
                    ..AppliedLanes::default()
                };
            }
            if term == self.term {
                let lane = &mut self.upto[lane_bits(counter)];
                *lane = (*lane).max(counter);
            }
        }
    }

    /// Whether no later edit names the file numbered `number`.
    pub(crate) fn unneeded(&self, number: u64) -> bool {
        let (term, counter) = split_number(number);
        term == self.term && counter <= self.upto[lane_bits(counter)]
    }
}

fn split_number(n: u64) -> (u64, u64) {
    (n >> 32, n & 0xffff_ffff)
}

fn lane_bits(counter: u64) -> usize {
    (counter & ((1 << LANE_BITS) - 1)) as usize
}

/// Which job a lane prepares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    Flush,
    Compaction,
    /// Blob garbage collection: new physical files for logical blob files (`Db::prepare_gc`).
    Gc,
}

impl Lane {
    /// The lane in a file number's counter (see [`FileNumbers`]).
    fn bits(self) -> u64 {
        match self {
            Lane::Flush => 0,
            Lane::Compaction => 1,
            Lane::Gc => 2,
        }
    }
}

/// What the leader's lanes need.
pub(crate) struct Leader {
    pub id: NodeId,
    pub raft: Raft,
    pub db: Arc<Db>,
    pub fs: Arc<dyn Fs>,
    pub transport: Arc<dyn Transport>,
    pub settings: RubbleSettings,
    pub numbers: FileNumbers,
    pub counters: Arc<RubbleCounters>,
    /// Transfers to the nodes beyond the quorum, still running: they end when the node stops
    /// ([`Leader::stop`]), as they hold its engine; `None` once it stopped.
    pub shipments: Mutex<Option<tokio::task::JoinSet<()>>>,
}

impl Leader {
    /// Ends the transfers still running, and refuses new ones (the node stops).
    pub(crate) fn stop(&self) {
        if let Some(mut s) = self.shipments.lock().take() {
            s.abort_all();
        }
    }
}

/// The leader's term when this node leads, else `None`.
pub(crate) fn leading_term(raft: &Raft, id: NodeId) -> Option<u64> {
    let m = raft.metrics();
    let m = m.borrow();
    (m.state == openraft::ServerState::Leader && m.current_leader == Some(id))
        .then_some(m.current_term)
}

/// The other nodes of the cluster (voters and learners) and how many voters make a quorum.
fn peers(raft: &Raft, id: NodeId) -> (Vec<(NodeId, NodeInfo, bool)>, usize) {
    let m = raft.metrics();
    let m = m.borrow();
    let membership = m.membership_config.membership();
    let (voters, _) = crate::raft::voters_and_learners(membership);
    let quorum = voters.len() / 2 + 1;
    let others = crate::raft::nodes(membership)
        .into_iter()
        .filter(|(n, _)| *n != id)
        .map(|(n, info)| (n, info, voters.contains(&n)))
        .collect();
    (others, quorum)
}

/// One lane of the leader: prepares, ships and proposes jobs while this node leads.
pub(crate) async fn lane_loop(leader: Arc<Leader>, lane: Lane) {
    loop {
        tokio::time::sleep(crate::replica::HOUSEKEEPING_PERIOD).await;
        while let Some(term) = leading_term(&leader.raft, leader.id) {
            match run_job(&leader, lane, term).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    tracing::debug!(error = %e, ?lane, "a rubble job failed");
                    tokio::time::sleep(crate::replica::HOUSEKEEPING_PERIOD).await;
                    break;
                }
            }
        }
    }
}

/// Counts a job in [`RubbleCounters::jobs_running`] while it lives.
struct Running<'a>(&'a AtomicU64);

impl<'a> Running<'a> {
    fn new(count: &'a AtomicU64) -> Running<'a> {
        count.fetch_add(1, Ordering::AcqRel);
        Running(count)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Prepares, ships and proposes one job; `Ok(false)` when there was none.
async fn run_job(leader: &Arc<Leader>, lane: Lane, term: u64) -> Result<bool, String> {
    let _running = Running::new(&leader.counters.jobs_running);
    let prepared = {
        let leader = leader.clone();
        tokio::task::spawn_blocking(move || {
            let mut next = || leader.numbers.next(term, lane);
            match lane {
                Lane::Flush => leader.db.prepare_flush(&mut next),
                Lane::Compaction => leader.db.prepare_compaction(&mut next),
                Lane::Gc => leader.db.prepare_gc(&mut next),
            }
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?
    };
    let Some(edit) = prepared else {
        return Ok(false);
    };
    if let Err(e) = ship_to_quorum(leader, &edit).await {
        leader.db.abandon_prepared(&edit);
        return Err(e);
    }
    if let Some(pause) = leader.settings.before_propose.as_ref().and_then(|h| h()) {
        tokio::time::sleep(pause).await;
    }
    if leading_term(&leader.raft, leader.id) != Some(term) {
        leader.db.abandon_prepared(&edit);
        return Err("leadership changed before the edit was proposed".into());
    }
    leader
        .counters
        .edits_proposed
        .fetch_add(1, Ordering::Relaxed);
    let retired_upto = retired_watermark(leader);
    let applied = leader
        .raft
        .propose(Command::InstallEdit(EditCommand::new(&edit, retired_upto)))
        .await;
    let result = match applied {
        Ok(applied) => tokio::select! {
            done = applied => done.map(|_| ()).map_err(|e| e.to_string()),
            // A deposed leader's entry may never be answered: stop waiting once the term ended.
            () = term_ended(leader, term) => {
                Err("leadership changed before the edit was applied".into())
            }
        },
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = result {
        // Not applied here (yet): free the job, whether or not the edit is still current (an
        // edit of the new leader may have consumed its inputs already: its outputs would stay
        // here as orphans). If the entry commits later, this node fetches the files back from a
        // node that acknowledged them; an installed file is live and stays.
        leader.db.abandon_prepared(&edit);
        return Err(e);
    }
    Ok(true)
}

/// Resolves once this node no longer leads `term`.
async fn term_ended(leader: &Leader, term: u64) {
    while leading_term(&leader.raft, leader.id) == Some(term) {
        tokio::time::sleep(crate::replica::HOUSEKEEPING_PERIOD).await;
    }
}

/// The lowest flushed index of any node as far as this leader knows (0 for a node that never
/// acknowledged a transfer): no node replays an edit at or below it any more.
fn retired_watermark(leader: &Leader) -> u64 {
    let (others, _) = peers(&leader.raft, leader.id);
    let flushed = leader.counters.flushed.lock();
    let own = leader.db.flushed_position().map_or(0, |p| p.index);
    others
        .iter()
        .map(|(id, _, _)| flushed.get(id).copied().unwrap_or(0))
        .fold(own, u64::min)
}

/// Ships `edit`'s outputs to every other node and returns once a quorum (this node included)
/// holds them; the transfers to the rest go on in the background.
async fn ship_to_quorum(leader: &Arc<Leader>, edit: &InstallEdit) -> Result<(), String> {
    let (others, quorum) = peers(&leader.raft, leader.id);
    let bytes: u64 = edit.outputs.iter().map(|o| o.len).sum();
    if edit.outputs.is_empty() {
        return Ok(());
    }
    let files = outputs_of(&leader.db, &leader.fs, edit)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    {
        let mut guard = leader.shipments.lock();
        let Some(shipments) = guard.as_mut() else {
            return Err("the node is stopping".into());
        };
        while shipments.try_join_next().is_some() {}
        for (id, info, voter) in others {
            let (leader, files, tx) = (leader.clone(), files.clone(), tx.clone());
            {
                let mut behind = leader.counters.behind.lock();
                let e = behind.entry(id).or_default();
                e.0 += 1;
                e.1 += bytes;
            }
            shipments.spawn(async move {
                let flushed = ship_all(&leader, id, &info, files).await;
                if let Some(f) = flushed {
                    let mut known = leader.counters.flushed.lock();
                    let e = known.entry(id).or_default();
                    *e = (*e).max(f);
                }
                let ok = flushed.is_some();
                {
                    let mut behind = leader.counters.behind.lock();
                    let e = behind.entry(id).or_default();
                    e.0 = e.0.saturating_sub(1);
                    e.1 = e.1.saturating_sub(bytes);
                }
                if ok {
                    leader
                        .counters
                        .bytes_shipped
                        .fetch_add(bytes, Ordering::Relaxed);
                }
                let _ = tx.send(ok && voter);
            });
        }
    }
    drop(tx);
    let mut holders = 1;
    let deadline = tokio::time::sleep(leader.settings.ship_timeout);
    tokio::pin!(deadline);
    while holders < quorum {
        tokio::select! {
            got = rx.recv() => match got {
                Some(true) => holders += 1,
                Some(false) => {}
                None => return Err(format!("only {holders} of {quorum} nodes hold the files")),
            },
            _ = &mut deadline => {
                return Err(format!("only {holders} of {quorum} nodes hold the files in time"));
            }
        }
    }
    Ok(())
}

/// Ships `files` to node `id`, retrying a failed transfer while the deadline allows.
/// (Returns the node's flushed index once it holds them all.)
async fn ship_all(
    leader: &Leader,
    id: NodeId,
    info: &NodeInfo,
    files: Vec<SnapshotFiles>,
) -> Option<u64> {
    let deadline = tokio::time::Instant::now() + leader.settings.ship_timeout;
    let mut flushed = 0;
    for mut f in files {
        loop {
            if let Some(pause) = rate_pause(&leader.settings, &f) {
                tokio::time::sleep(pause).await;
            }
            let sent = tokio::time::timeout_at(
                deadline,
                leader.transport.ship_files(leader.id, id, info, f.clone()),
            )
            .await;
            match sent {
                Ok(Ok(f)) => {
                    flushed = f;
                    break;
                }
                Ok(Err(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(node = id, error = %e, "shipping a file failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    // An install may have moved it (retired); once it is gone here its job was
                    // applied or given up, and a node that still needs it fetches it.
                    match f
                        .files
                        .first()
                        .and_then(|i| leader.db.edit_file_path(&i.name))
                    {
                        Some(path) => {
                            f.dir = path.parent().map(|p| p.to_path_buf()).unwrap_or_default()
                        }
                        None => return None,
                    }
                }
                _ => return None,
            }
        }
    }
    Some(flushed)
}

/// The time the rate limit asks a transfer of `files` to take, paid before it.
fn rate_pause(settings: &RubbleSettings, files: &SnapshotFiles) -> Option<Duration> {
    if settings.ship_bytes_per_sec == 0 {
        return None;
    }
    let bytes: u64 = files.files.iter().map(|f| f.len).sum();
    Some(Duration::from_secs_f64(
        bytes as f64 / settings.ship_bytes_per_sec as f64,
    ))
}

/// `edit`'s outputs on this node, one transfer per file (a file may be in the database
/// directory or in staging).
pub(crate) fn outputs_of(
    db: &Db,
    fs: &Arc<dyn Fs>,
    edit: &InstallEdit,
) -> Result<Vec<SnapshotFiles>, String> {
    edit.outputs
        .iter()
        .map(|o| {
            let path = db
                .edit_file_path(&o.name)
                .ok_or_else(|| format!("file {} is not here", o.name))?;
            Ok(SnapshotFiles {
                fs: fs.clone(),
                dir: path.parent().map(|p| p.to_path_buf()).unwrap_or_default(),
                files: vec![FileInfo {
                    name: o.name.clone(),
                    len: o.len,
                }],
            })
        })
        .collect()
}

/// How long the proposer waits before a new write entry, given the sealed memtables waiting
/// for their install: nothing up to the slowdown threshold, then a step per memtable over it;
/// `None` at the stop threshold (wait until an install).
pub(crate) fn write_delay(settings: &RubbleSettings, sealed: usize) -> Option<Duration> {
    if sealed >= settings.stop_sealed {
        return None;
    }
    let over = sealed.saturating_sub(settings.slowdown_sealed) as u32;
    Some(settings.slowdown_step * over)
}

/// Gets an edit's files onto a node that lacks them: from any other node (the leader, or a
/// node that acknowledged them), and after [`RubbleSettings::fallback_after`] by writing a
/// flush's outputs itself.
pub(crate) struct Fetcher {
    pub id: NodeId,
    pub transport: Arc<dyn Transport>,
    pub fs: Arc<dyn Fs>,
    pub settings: RubbleSettings,
    pub counters: Arc<RubbleCounters>,
    /// While the applier waits for files: which, for how long, and why the last fetches failed.
    pub waiting: Mutex<Option<String>>,
    /// What the edits applied here say about staged files.
    pub lanes: Mutex<AppliedLanes>,
}

/// How long one fetch from one node may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between rounds of fetch attempts.
const FETCH_RETRY: Duration = Duration::from_millis(50);

impl Fetcher {
    /// Blocks (the state machine's thread) until every file of the current `edit` is here, the
    /// node stops (`Err`), or the fallback wrote them. `nodes` lists the cluster's nodes.
    pub(crate) fn obtain(
        &self,
        db: &Db,
        edit: &InstallEdit,
        nodes: &BTreeMap<NodeId, NodeInfo>,
        stopping: &std::sync::atomic::AtomicBool,
    ) -> Result<(), String> {
        let start = std::time::Instant::now();
        let handle = tokio::runtime::Handle::current();
        let mut fallback_tried = false;
        loop {
            let missing = db.missing_outputs(edit);
            if missing.is_empty() {
                return Ok(());
            }
            if stopping.load(Ordering::Acquire) {
                return Err("the node is stopping".into());
            }
            let names: Vec<String> = missing.iter().map(|o| o.name.clone()).collect();
            let bytes: u64 = missing.iter().map(|o| o.len).sum();
            let mut failures = Vec::new();
            for (&peer, info) in nodes.iter().filter(|(n, _)| **n != self.id) {
                let receiver = crate::snapshot::Receiver::new(self.fs.clone(), db.staging_dir())
                    .map_err(|e| e.to_string())?;
                let fetch = tokio::time::timeout(
                    FETCH_TIMEOUT,
                    self.transport
                        .fetch_files(self.id, peer, info, names.clone(), receiver),
                );
                let Some(fetched) = block_unless_stopping(&handle, fetch, stopping) else {
                    return Err("the node is stopping".into());
                };
                match fetched {
                    Ok(Ok(receiver)) => match receiver.finish() {
                        Ok(_) => {
                            self.counters
                                .bytes_fetched
                                .fetch_add(bytes, Ordering::Relaxed);
                            break;
                        }
                        Err(e) => failures.push(format!("node {peer}: {e}")),
                    },
                    Ok(Err(e)) => failures.push(format!("node {peer}: {e}")),
                    Err(_) => failures.push(format!("node {peer}: timed out")),
                }
            }
            if db.missing_outputs(edit).is_empty() {
                *self.waiting.lock() = None;
                return Ok(());
            }
            let why = format!(
                "missing {} for {:.1?}: {}",
                names.join(" "),
                start.elapsed(),
                failures.join("; ")
            );
            tracing::debug!("{why}");
            *self.waiting.lock() = Some(why);
            if !fallback_tried
                && edit.input_memtables.len() == 1
                && start.elapsed() >= self.settings.fallback_after
            {
                fallback_tried = true;
                match db.write_flush_outputs(edit) {
                    Ok(true) => {
                        *self.waiting.lock() = None;
                        tracing::warn!(
                            memtable = edit.input_memtables[0],
                            "no node could send a flush's files: wrote them here"
                        );
                        return Ok(());
                    }
                    Ok(false) => {
                        tracing::warn!("a flush written here differs from the shipped one")
                    }
                    Err(e) => tracing::warn!(error = %e, "writing a flush here failed"),
                }
            }
            std::thread::sleep(FETCH_RETRY);
        }
    }
}

/// Runs `work` to its end on `handle` from a blocking thread, or gives it up (`None`) as soon
/// as `stopping` is set, so that a stopping node's applier never waits out a transfer.
fn block_unless_stopping<F: std::future::Future>(
    handle: &tokio::runtime::Handle,
    work: F,
    stopping: &std::sync::atomic::AtomicBool,
) -> Option<F::Output> {
    handle.block_on(async {
        tokio::select! {
            out = work => Some(out),
            _ = async {
                while !stopping.load(Ordering::Acquire) {
                    tokio::time::sleep(STOP_POLL).await;
                }
            } => None,
        }
    })
}

/// How often a blocked applier looks whether its node is stopping.
const STOP_POLL: Duration = Duration::from_millis(20);
