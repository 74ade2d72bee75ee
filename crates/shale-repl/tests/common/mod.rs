//! An in-process cluster for tests: nodes on the fault-injecting file system, connected by the
//! fault-injecting local network, with the invariants every step must keep.

#![allow(dead_code)]

use parking_lot::Mutex;
use shale::fs::Fs;
use shale::fs::{FaultFs, MemFs};
use shale::{Options, WriteBatch};
use shale_repl::network::local::LocalNetwork;
use shale_repl::{
    ApplyHook, Command, NodeId, NodeInfo, RaftTiming, ReplError, Replica, ReplicaConfig,
    ReplicationMode, Role, RubbleSettings,
};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one node applied, per incarnation: (index, was it a memtable switch).
#[derive(Default)]
pub struct Applied {
    /// Incarnation -> indexes in apply order.
    pub by_incarnation: Vec<Vec<u64>>,
    /// Index -> what was applied there (see [`Applied::entry`]).
    pub entries: BTreeMap<u64, AppliedEntry>,
    /// Violations seen by the hook (an index applied twice, or out of order, in one incarnation;
    /// two different entries at one index).
    pub violations: Vec<String>,
}

/// An applied entry: its kind ("write", "switch", "edit", "raft") and a hash of its content (of
/// a `Write`'s batch bytes, of an `InstallEdit`'s fields; 0 for the others), so that two nodes
/// that applied different batches at one index are told apart, not only different kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedEntry {
    pub kind: &'static str,
    pub digest: u64,
}

impl Applied {
    /// What `command` (None: an entry of Raft's own) at an index is recorded as.
    pub fn entry(command: Option<&Command>) -> AppliedEntry {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let kind = match command {
            Some(Command::Write(data)) => {
                data.hash(&mut h);
                "write"
            }
            Some(Command::SwitchMemtable) => "switch",
            Some(Command::InstallEdit(e)) => {
                format!("{e:?}").hash(&mut h);
                "edit"
            }
            None => "raft",
        };
        AppliedEntry {
            kind,
            digest: match kind {
                "write" | "edit" => h.finish(),
                _ => 0,
            },
        }
    }
}

impl std::fmt::Display for AppliedEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:016x}", self.kind, self.digest)
    }
}

pub struct Node {
    pub fs: FaultFs,
    pub replica: Option<Arc<Replica>>,
    /// The engine of the node's last stopped incarnation, until it is released.
    pub stopped_engine: Option<std::sync::Weak<shale::Db>>,
    pub applied: Arc<Mutex<Applied>>,
}

/// Turns a hung test into a failure with a message: a thread that ends the test process when
/// the test is not done within its limit. Dropped normally it is disarmed; dropped while the
/// test panics (nodes may still be stopping) it leaves [`Watchdog::GRACE`] for the runtime to
/// shut down, so a failure that would hang is reported instead.
pub struct Watchdog {
    tx: std::sync::mpsc::Sender<bool>,
}

impl Watchdog {
    /// How long a panicking test's runtime may take to stop.
    pub const GRACE: Duration = Duration::from_secs(20);
    /// A test's limit unless it says otherwise (`SHALE_TEST_LIMIT_SECS` overrides it).
    pub const DEFAULT_LIMIT: Duration = Duration::from_secs(180);

    pub fn new(limit: Duration) -> Watchdog {
        let limit = std::env::var("SHALE_TEST_LIMIT_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(limit, Duration::from_secs);
        let name = std::thread::current()
            .name()
            .unwrap_or("a test")
            .to_string();
        let (tx, rx) = std::sync::mpsc::channel::<bool>();
        std::thread::spawn(move || {
            use std::sync::mpsc::RecvTimeoutError;
            let why = match rx.recv_timeout(limit) {
                Ok(false) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => format!("ran over its limit of {limit:?}"),
                Ok(true) => match rx.recv_timeout(Watchdog::GRACE) {
                    Ok(_) | Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => format!(
                        "panicked and its nodes did not stop within {:?}",
                        Watchdog::GRACE
                    ),
                },
            };
            // Written past the test harness's capture: the process ends before it would print.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "WATCHDOG: {name} {why}; it hangs. Ending the test process."
            );
            std::process::exit(101);
        });
        Watchdog { tx }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.tx.send(std::thread::panicking());
    }
}

pub struct Cluster {
    /// Ends the test process if the test hangs (see [`Watchdog`]).
    pub watchdog: Watchdog,
    pub net: LocalNetwork,
    pub nodes: BTreeMap<NodeId, Node>,
    pub timing: RaftTiming,
    pub memtable_bytes: usize,
    pub mode: ReplicationMode,
    pub rubble: RubbleSettings,
}

pub fn info(id: NodeId) -> NodeInfo {
    NodeInfo {
        raft_addr: format!("node-{id}"),
        client_addr: format!("client-{id}"),
    }
}

pub fn fast_timing() -> RaftTiming {
    RaftTiming {
        heartbeat_ms: 40,
        election_timeout_ms: (200, 400),
        logs_kept_after_snapshot: 30,
        read_lease_ms: 100,
    }
}

/// A checksum of the whole key space.
pub fn checksum(r: &Replica) -> (u64, usize) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut n = 0;
    for item in r.db().iter() {
        let (k, v) = item.expect("read the key space");
        for b in k
            .iter()
            .chain([0xffu8].iter())
            .chain(v.iter())
            .chain([0xfeu8].iter())
        {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        n += 1;
    }
    (h, n)
}

impl Cluster {
    pub fn new(seed: u64, memtable_bytes: usize) -> Cluster {
        Cluster {
            watchdog: Watchdog::new(Watchdog::DEFAULT_LIMIT),
            net: LocalNetwork::new(seed),
            nodes: BTreeMap::new(),
            timing: fast_timing(),
            memtable_bytes,
            mode: ReplicationMode::Baseline,
            rubble: RubbleSettings {
                fallback_after: Duration::from_secs(2),
                ship_timeout: Duration::from_secs(2),
                ..RubbleSettings::default()
            },
        }
    }

    /// A cluster in `mode`.
    pub fn with_mode(seed: u64, memtable_bytes: usize, mode: ReplicationMode) -> Cluster {
        Cluster {
            mode,
            ..Cluster::new(seed, memtable_bytes)
        }
    }

    fn options(&self, fs: &FaultFs) -> Options {
        Options {
            fs: Arc::new(fs.clone()),
            write_buffer_size: self.memtable_bytes,
            target_file_size: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            level0_compaction_trigger: 2,
            min_blob_size: 300,
            block_cache_size: 1 << 20,
            ..Options::default()
        }
    }

    /// Starts (or restarts) node `id` on its file system.
    pub async fn start(&mut self, id: NodeId) {
        let node = self.nodes.entry(id).or_insert_with(|| Node {
            fs: FaultFs::new(MemFs::new()),
            replica: None,
            stopped_engine: None,
            applied: Arc::new(Mutex::new(Applied::default())),
        });
        assert!(node.replica.is_none(), "node {id} is running");
        // A restart opens the same directory in this process: the stopped incarnation must have
        // released its engine. Work of it still in flight (a job's prepare, openraft's
        // state-machine task) holds it until that ends.
        if let Some(engine) = node.stopped_engine.take() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while engine.strong_count() > 0 {
                assert!(
                    Instant::now() < deadline,
                    "node {id}'s engine is still open 30 s after it stopped"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        node.applied.lock().by_incarnation.push(Vec::new());
        let applied = node.applied.clone();
        let hook: ApplyHook = Arc::new(move |index, command| {
            let mut a = applied.lock();
            let entry = Applied::entry(command);
            if let Some(&old) = a.entries.get(&index) {
                if old != entry {
                    a.violations
                        .push(format!("index {index} applied as {old} and as {entry}"));
                }
            }
            a.entries.insert(index, entry);
            let inc = a.by_incarnation.last_mut().expect("an incarnation");
            if let Some(&last) = inc.last() {
                if index <= last {
                    a.violations.push(format!(
                        "index {index} applied after {last} in one incarnation"
                    ));
                }
            }
            a.by_incarnation
                .last_mut()
                .expect("an incarnation")
                .push(index);
        });
        let fs = node.fs.clone();
        let config = ReplicaConfig {
            id,
            info: info(id),
            dir: PathBuf::from(format!("n{id}")),
            engine: self.options(&fs),
            timing: self.timing.clone(),
            hook: Some(hook),
            mode: self.mode,
            rubble: self.rubble.clone(),
        };
        let replica = Replica::open(config, Arc::new(self.net.clone()))
            .await
            .unwrap_or_else(|e| panic!("open node {id}: {e}"));
        self.net.attach(id, replica.service());
        self.nodes.get_mut(&id).expect("node").replica = Some(Arc::new(replica));
    }

    /// Starts nodes `ids` as a new cluster.
    pub async fn bootstrap(&mut self, ids: &[NodeId]) {
        for &id in ids {
            self.start(id).await;
        }
        let members: BTreeMap<NodeId, NodeInfo> = ids.iter().map(|&id| (id, info(id))).collect();
        for &id in ids {
            self.replica(id)
                .initialize(members.clone())
                .await
                .expect("initialize");
        }
        self.wait_leader(Duration::from_secs(10))
            .await
            .expect("a leader");
    }

    pub fn replica(&self, id: NodeId) -> Arc<Replica> {
        self.nodes[&id]
            .replica
            .clone()
            .unwrap_or_else(|| panic!("node {id} is down"))
    }

    pub fn running(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.replica.is_some())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Stops node `id`. With `power_loss`, everything it wrote and did not sync is lost.
    pub async fn kill(&mut self, id: NodeId, power_loss: bool) {
        let node = self.nodes.get_mut(&id).expect("node");
        self.net.detach(id);
        if power_loss {
            node.fs.cut_power_after(0);
        }
        if let Some(r) = node.replica.take() {
            r.shutdown().await;
            node.stopped_engine = Some(Arc::downgrade(r.db()));
        }
        if power_loss {
            node.fs = node.fs.crash_clone();
        }
    }

    /// Stops node `id` for good (after it left the cluster): `settle` no longer restarts it.
    pub async fn retire(&mut self, id: NodeId) {
        self.kill(id, false).await;
        self.nodes.remove(&id);
    }

    /// The leader, once one running node is leader and the others agree.
    pub async fn wait_leader(&self, timeout: Duration) -> Option<NodeId> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            for id in self.running() {
                let r = self.replica(id);
                if r.status().role == Role::Leader {
                    return Some(id);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// The running nodes that believe they lead, the highest term first: a deposed leader cut
    /// off from the others keeps believing it for a while, and a write sent to it only times
    /// out.
    pub fn leaders_newest_first(&self) -> Vec<NodeId> {
        let mut leaders: Vec<(u64, NodeId)> = self
            .running()
            .into_iter()
            .map(|id| (self.replica(id), id))
            .filter(|(r, _)| r.is_leader())
            .map(|(r, id)| (r.term(), id))
            .collect();
        leaders.sort_unstable();
        leaders.reverse();
        leaders.into_iter().map(|(_, id)| id).collect()
    }

    /// Writes `batch` through whichever node is leader, retrying other nodes on `NotLeader`
    /// until `timeout`. `Ok(true)`: acknowledged; `Ok(false)`: unknown outcome (it may or may not
    /// be applied); `Err`: refused before being proposed.
    pub async fn write(&self, batch: WriteBatch, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let mut proposed = false;
            for id in self.leaders_newest_first() {
                let r = self.replica(id);
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, r.write(batch.clone())).await {
                    Ok(Ok(_)) => return true,
                    Ok(Err(ReplError::NotLeader { .. })) => {}
                    Ok(Err(_)) | Err(_) => proposed = true,
                }
                if proposed {
                    return false;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Heals the network, restarts stopped nodes and waits until every node applied the
    /// leader's last entry.
    pub async fn settle(&mut self, timeout: Duration) {
        self.net.heal();
        let down: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.replica.is_none())
            .map(|(&i, _)| i)
            .collect();
        for id in down {
            self.start(id).await;
        }
        let deadline = Instant::now() + timeout;
        loop {
            // An entry of the leader's term commits everything before it. The target is the
            // newest leader's log: a deposed leader that has not heard of the new term yet
            // (one just healed from a cut) still says it leads, with an older, shorter log.
            let committed = self.wait_leader(Duration::from_secs(5)).await.is_some()
                && self.write(WriteBatch::new(), Duration::from_secs(2)).await;
            if let Some(&leader) = self.leaders_newest_first().first().filter(|_| committed) {
                let target = self.replica(leader).status().last_log_index.unwrap_or(0);
                let voters = self.replica(leader).status().voters;
                let caught_up = self
                    .running()
                    .iter()
                    .filter(|id| voters.contains(id))
                    .all(|&id| self.replica(id).applied_index() >= target);
                if caught_up {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not settle: {:?}",
                self.describe()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn describe(&self) -> Vec<String> {
        self.running()
            .iter()
            .map(|&id| {
                let s = self.replica(id).status();
                let waiting = s
                    .rubble
                    .waiting_for_files
                    .map(|w| format!(", waiting for files: {w}"))
                    .unwrap_or_default();
                format!(
                    "node {id}: {} term {} leader {:?} last {:?} committed {:?} applied {}{waiting}",
                    s.role,
                    s.term,
                    s.leader.map(|l| l.0),
                    s.last_log_index,
                    s.committed,
                    s.applied
                )
            })
            .collect()
    }

    /// The invariants, on a settled cluster: every node that applied the same index holds the
    /// same data; memtable switches sit at the same indexes; no index applied twice.
    pub fn check_invariants(&self) {
        let voters = self.running();
        let mut sums = HashMap::new();
        for &id in &voters {
            let r = self.replica(id);
            sums.entry((r.applied_index(), checksum(&r)))
                .or_insert_with(Vec::new)
                .push(id);
        }
        let by_index: HashMap<u64, Vec<(u64, usize)>> =
            sums.keys().fold(HashMap::new(), |mut m, (i, c)| {
                m.entry(*i).or_insert_with(Vec::new).push(*c);
                m
            });
        for (index, cs) in by_index {
            assert_eq!(
                cs.len(),
                1,
                "nodes at applied index {index} hold different data: {sums:?}"
            );
        }
        // Every index is the same entry on every node that applied it, byte for byte.
        let mut entries: BTreeMap<u64, (AppliedEntry, NodeId)> = BTreeMap::new();
        for (&id, node) in &self.nodes {
            let a = node.applied.lock();
            assert!(a.violations.is_empty(), "node {id}: {:?}", a.violations);
            for (&index, &entry) in &a.entries {
                if let Some((other, by)) = entries.insert(index, (entry, id)) {
                    assert_eq!(
                        other, entry,
                        "index {index}: node {by} applied {other}, node {id} applied {entry}"
                    );
                }
            }
        }
        let mut switches: Vec<Vec<u64>> = Vec::new();
        for &id in &voters {
            let r = self.replica(id);
            let since: Vec<u64> = r.switch_indexes();
            switches.push(since);
        }
        // Every switch index any node applied is a switch at that index on every node that
        // applied the index (checked through `entries` above); report them for the record.
        let _ = switches;
        if self.mode == ReplicationMode::Rubble {
            self.check_rubble();
        }
    }

    /// Rubble mode's invariants: nodes at the same applied index hold the same live files (names
    /// and checksums) and the same sealed memtables (sealed at the same indexes); a node that
    /// never led a job term ran no blob GC.
    pub fn check_rubble(&self) {
        let mut seen: HashMap<u64, (NodeId, LiveFiles, Vec<u64>)> = HashMap::new();
        for id in self.running() {
            let r = self.replica(id);
            // Between applies: an apply seals a memtable or installs files before it advances
            // the applied index.
            let (before, files, sealed) = r.between_applies(|| {
                (
                    r.applied_index(),
                    self.live_files(id),
                    r.db().sealed_positions(),
                )
            });
            if r.rubble_status().job_terms == 0 {
                assert_eq!(
                    r.db().stats().gc_runs,
                    0,
                    "node {id} never led and ran blob GC"
                );
            }
            match seen.get(&before) {
                Some((other, f, s)) => {
                    assert_eq!(
                        (f, s),
                        (&files, &sealed),
                        "nodes {other} and {id} at index {before} hold different files or \
                         memtables"
                    );
                }
                None => {
                    seen.insert(before, (id, files, sealed));
                }
            }
        }
    }

    /// Node `id`'s live SST and blob files with their CRC32C.
    pub fn live_files(&self, id: NodeId) -> LiveFiles {
        let r = self.replica(id);
        let fs = &self.nodes[&id].fs;
        r.db()
            .live_file_names()
            .into_iter()
            .filter_map(|n| {
                // A file deleted between listing and reading belongs to an older version.
                let data = fs.read_all(&r.db().path().join(&n)).ok()?;
                Some((n, crc32c::crc32c(&data)))
            })
            .collect()
    }

    /// Bytes of node `id`'s blob files on disk: those in its engine directory, in staging, and
    /// the retired copies of files no longer in the engine directory (a retired file is a hard
    /// link: it takes space of its own only once the original is gone).
    pub fn blob_disk_bytes(&self, id: NodeId) -> u64 {
        let r = self.replica(id);
        let fs = &self.nodes[&id].fs;
        let dir = r.db().path().to_path_buf();
        let mut seen = std::collections::HashSet::new();
        let mut files = Vec::new();
        let staging = r.db().staging_dir();
        let retired = dir.join(shale::RETIRED_DIR);
        let mut dirs = vec![dir.clone(), staging];
        for index in fs.list_dir(&retired).unwrap_or_default() {
            dirs.push(retired.join(index));
        }
        for d in dirs {
            for name in fs.list_dir(&d).unwrap_or_default() {
                if name.ends_with(".blob") && seen.insert(name.clone()) {
                    files.push(d.join(name));
                }
            }
        }
        files.iter().map(|f| fs.file_size(f).unwrap_or(0)).sum()
    }

    /// Table and blob files in node `id`'s engine directory that its live version does not
    /// name, and files left in its staging directory.
    pub fn orphans(&self, id: NodeId) -> Vec<String> {
        let r = self.replica(id);
        let fs = &self.nodes[&id].fs;
        let live = r.db().live_file_names();
        let mut out: Vec<String> = fs
            .list_dir(r.db().path())
            .expect("list the engine directory")
            .into_iter()
            .filter(|n| (n.ends_with(".sst") || n.ends_with(".blob")) && !live.contains(n))
            .collect();
        out.extend(
            fs.list_dir(&r.db().staging_dir())
                .unwrap_or_default()
                .into_iter()
                .map(|n| format!("staging/{n}")),
        );
        out
    }
}

/// Live file names with their CRC32C.
pub type LiveFiles = Vec<(String, u32)>;

/// A write of one key with a value naming it uniquely.
pub fn put(key: &str, value: &str) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(key, value);
    b
}
