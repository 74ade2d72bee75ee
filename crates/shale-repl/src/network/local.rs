//! An in-process network for cluster tests: every message is a call into the target node's
//! [`Service`], through a fault injector that drops, delays, duplicates (a copy arrives again
//! later, after newer messages: a reordering) and cuts links, one way or both, by a seeded
//! random source. Snapshots, and the files rubble mode ships and fetches, are streamed file by
//! file from the sender's file system to the receiver's, and may be cut short or damaged in
//! flight.

use super::{Rpc, RpcReply, Service, Transport};
use crate::raft::{NodeId, NodeInfo, SnapshotMeta, SnapshotResp, Vote};
use crate::snapshot::{send_files, Piece, Receiver, SnapshotFiles};
use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::sync::Arc;
use std::time::Duration;

/// What goes wrong in flight, each message independently.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Probability that a message is lost before it arrives.
    pub drop: f64,
    /// Probability that the reply is lost after the message was handled.
    pub drop_reply: f64,
    /// Probability that a message arrives a second time, later.
    pub duplicate: f64,
    /// Probability that a message is delayed, and by how long at most.
    pub delay: f64,
    /// Longest delay.
    pub max_delay: Duration,
    /// Probability that a snapshot transfer is cut short.
    pub snapshot_cut: f64,
    /// Probability that a snapshot chunk arrives with a flipped byte.
    pub snapshot_damage: f64,
}

/// Counts of what the injector did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub delivered: u64,
    pub dropped: u64,
    pub replies_dropped: u64,
    pub duplicated: u64,
    pub delayed: u64,
    pub blocked: u64,
    pub snapshots_sent: u64,
    pub snapshots_cut: u64,
    pub snapshots_damaged: u64,
    /// Bulk transfers (rubble mode) started: shipped by a leader, fetched by a node.
    pub files_shipped: u64,
    pub files_fetched: u64,
    /// Shipments that waited while their target's shipments were held ([`LocalNetwork::hold_shipments`]).
    pub shipments_held: u64,
}

struct State {
    services: HashMap<NodeId, Service>,
    /// Directed links that carry nothing.
    cut: BTreeSet<(NodeId, NodeId)>,
    /// Nodes that neither send nor receive shipped or fetched files (Raft messages still pass).
    files_blocked: BTreeSet<NodeId>,
    /// Nodes whose incoming shipments wait, once begun, until released.
    shipments_held: BTreeSet<NodeId>,
    faults: Faults,
    rng: u64,
    counts: FaultCounts,
}

impl State {
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn fires(&mut self, probability: fn(&Faults) -> f64) -> bool {
        let p = probability(&self.faults);
        self.chance(p)
    }

    fn delay(&mut self) -> Duration {
        let max = self.faults.max_delay.as_micros() as u64;
        if max == 0 || !self.chance(self.faults.delay) {
            return Duration::ZERO;
        }
        self.counts.delayed += 1;
        Duration::from_micros(self.next() % max)
    }
}

/// See the module documentation. Clones share the network.
#[derive(Clone)]
pub struct LocalNetwork {
    state: Arc<Mutex<State>>,
}

fn unreachable(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, what.to_string())
}

impl LocalNetwork {
    /// A network without faults; `seed` fixes the faults' random choices.
    pub fn new(seed: u64) -> LocalNetwork {
        LocalNetwork {
            state: Arc::new(Mutex::new(State {
                services: HashMap::new(),
                cut: BTreeSet::new(),
                files_blocked: BTreeSet::new(),
                shipments_held: BTreeSet::new(),
                faults: Faults::default(),
                rng: seed,
                counts: FaultCounts::default(),
            })),
        }
    }

    /// Connects a node (replacing an earlier incarnation).
    pub fn attach(&self, id: NodeId, service: Service) {
        self.state.lock().services.insert(id, service);
    }

    /// Disconnects a node: messages to it fail as to a dead host.
    pub fn detach(&self, id: NodeId) {
        self.state.lock().services.remove(&id);
    }

    /// Sets the faults applied from now on.
    pub fn set_faults(&self, faults: Faults) {
        self.state.lock().faults = faults;
    }

    /// Cuts the link from `from` to `to` (one way).
    pub fn cut(&self, from: NodeId, to: NodeId) {
        self.state.lock().cut.insert((from, to));
    }

    /// Cuts every link between `node` and the others, both ways.
    pub fn isolate(&self, node: NodeId, others: &[NodeId]) {
        let mut s = self.state.lock();
        for &o in others.iter().filter(|&&o| o != node) {
            s.cut.insert((node, o));
            s.cut.insert((o, node));
        }
    }

    /// Splits the nodes into groups that hear nothing from each other.
    pub fn partition(&self, groups: &[&[NodeId]]) {
        let mut s = self.state.lock();
        for (i, a) in groups.iter().enumerate() {
            for (j, b) in groups.iter().enumerate() {
                if i != j {
                    for &x in a.iter() {
                        for &y in b.iter() {
                            s.cut.insert((x, y));
                        }
                    }
                }
            }
        }
    }

    /// Blocks (or unblocks) every file transfer to and from `node`, leaving its Raft messages
    /// alone.
    pub fn block_files(&self, node: NodeId, blocked: bool) {
        mark(&mut self.state.lock().files_blocked, node, blocked);
    }

    /// Holds (or releases) the shipments to `node`: each waits before the end of each file (its
    /// bytes received, not yet under its name) until released, the node stops, or the sender
    /// gives up. A node's own fetches pass. (A slow bulk link: the files arrive after the node
    /// fetched them itself, or while it stops.)
    pub fn hold_shipments(&self, node: NodeId, held: bool) {
        mark(&mut self.state.lock().shipments_held, node, held);
    }

    /// Waits while shipments to `node` are held and `refused` says no.
    async fn wait_if_held(&self, node: NodeId, refused: impl Fn() -> bool) {
        let mut counted = false;
        while self.state.lock().shipments_held.contains(&node) && !refused() {
            if !counted {
                self.state.lock().counts.shipments_held += 1;
                counted = true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn files_pass(&self, a: NodeId, b: NodeId) -> bool {
        let s = self.state.lock();
        !s.files_blocked.contains(&a) && !s.files_blocked.contains(&b)
    }

    /// Restores every link and removes every fault.
    pub fn heal(&self) {
        let mut s = self.state.lock();
        s.cut.clear();
        s.files_blocked.clear();
        s.shipments_held.clear();
        s.faults = Faults::default();
    }

    /// What the injector has done so far.
    pub fn counts(&self) -> FaultCounts {
        self.state.lock().counts.clone()
    }

    fn route(&self, from: NodeId, to: NodeId) -> Option<Service> {
        let mut s = self.state.lock();
        if s.cut.contains(&(from, to)) {
            s.counts.blocked += 1;
            return None;
        }
        s.services.get(&to).cloned()
    }
}

impl Transport for LocalNetwork {
    fn call(
        &self,
        from: NodeId,
        target: NodeId,
        _info: &NodeInfo,
        rpc: Rpc,
    ) -> BoxFuture<'static, io::Result<RpcReply>> {
        let net = self.clone();
        async move {
            let (delay, drop, duplicate, dup_delay) = {
                let mut s = net.state.lock();
                let delay = s.delay();
                let drop = s.fires(|f| f.drop);
                let duplicate = !drop && s.fires(|f| f.duplicate);
                let dup_delay = s.faults.max_delay.max(Duration::from_millis(5)) * 2;
                (delay, drop, duplicate, dup_delay)
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let Some(service) = net.route(from, target) else {
                return Err(unreachable("link cut or node down"));
            };
            if drop {
                net.state.lock().counts.dropped += 1;
                return Err(unreachable("message lost"));
            }
            if duplicate {
                net.state.lock().counts.duplicated += 1;
                let (copy, svc, n) = (rpc.clone(), service.clone(), net.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(dup_delay).await;
                    if n.route(from, target).is_some() {
                        let _ = svc.handle(copy).await;
                    }
                });
            }
            let reply = service.handle(rpc).await;
            let mut s = net.state.lock();
            s.counts.delivered += 1;
            if s.cut.contains(&(target, from)) {
                s.counts.blocked += 1;
                return Err(unreachable("the reply's link is cut"));
            }
            if s.fires(|f| f.drop_reply) {
                s.counts.replies_dropped += 1;
                return Err(unreachable("reply lost"));
            }
            Ok(reply)
        }
        .boxed()
    }

    fn send_snapshot(
        &self,
        from: NodeId,
        target: NodeId,
        _info: &NodeInfo,
        vote: Vote,
        meta: SnapshotMeta,
        files: SnapshotFiles,
    ) -> BoxFuture<'static, io::Result<SnapshotResp>> {
        let net = self.clone();
        async move {
            let Some(service) = net.route(from, target) else {
                return Err(unreachable("link cut or node down"));
            };
            net.state.lock().counts.snapshots_sent += 1;
            let mut receiver = service.begin_snapshot()?;
            if let Err(e) = net.stream(from, target, &files, &mut receiver).await {
                receiver.abandon();
                return Err(e);
            }
            service.install_snapshot(vote, meta, receiver).await
        }
        .boxed()
    }

    fn ship_files(
        &self,
        from: NodeId,
        target: NodeId,
        _info: &NodeInfo,
        files: SnapshotFiles,
    ) -> BoxFuture<'static, io::Result<u64>> {
        let net = self.clone();
        async move {
            let Some(service) = net
                .route(from, target)
                .filter(|_| net.files_pass(from, target))
            else {
                return Err(unreachable("link cut or node down"));
            };
            net.state.lock().counts.files_shipped += 1;
            let mut receiver = service.begin_staging()?;
            if let Err(e) = net.stream_held(from, target, &files, &mut receiver).await {
                receiver.abandon_files();
                return Err(e);
            }
            let flushed = service.finish_staging(receiver)?;
            if net.route(target, from).is_none() {
                return Err(unreachable("the acknowledgement's link is cut"));
            }
            Ok(flushed)
        }
        .boxed()
    }

    fn fetch_files(
        &self,
        from: NodeId,
        target: NodeId,
        _info: &NodeInfo,
        names: Vec<String>,
        mut into: Receiver,
    ) -> BoxFuture<'static, io::Result<Receiver>> {
        let net = self.clone();
        async move {
            let Some(service) = net
                .route(from, target)
                .filter(|_| net.files_pass(from, target))
            else {
                return Err(unreachable("link cut or node down"));
            };
            net.state.lock().counts.files_fetched += 1;
            let result = async {
                for files in service.files_for(&names)? {
                    net.stream(target, from, &files, &mut into).await?;
                }
                Ok(())
            }
            .await;
            match result {
                Ok(()) => Ok(into),
                Err(e) => {
                    into.abandon_files();
                    Err(e)
                }
            }
        }
        .boxed()
    }
}

impl LocalNetwork {
    /// [`LocalNetwork::stream`] for a shipment: each file's end waits while shipments to `to`
    /// are held ([`LocalNetwork::hold_shipments`]).
    async fn stream_held(
        &self,
        from: NodeId,
        to: NodeId,
        files: &SnapshotFiles,
        receiver: &mut Receiver,
    ) -> io::Result<()> {
        let receiver = Mutex::new(receiver);
        let receiver = &receiver;
        send_files(files, |piece| async move {
            if matches!(piece, Piece::FileEnd(_)) {
                self.wait_if_held(to, || receiver.lock().refused()).await;
            }
            self.deliver(from, to, piece, &mut receiver.lock())
        })
        .await
    }

    /// Streams `files` from node `from` into `receiver` on node `to`, through the transfer
    /// faults (a cut link or `snapshot_cut` stops it, `snapshot_damage` flips a byte).
    async fn stream(
        &self,
        from: NodeId,
        to: NodeId,
        files: &SnapshotFiles,
        receiver: &mut Receiver,
    ) -> io::Result<()> {
        send_files(files, |piece| {
            std::future::ready(self.deliver(from, to, piece, receiver))
        })
        .await
    }

    /// One piece of a transfer from `from` to `to`, through the transfer faults.
    fn deliver(
        &self,
        from: NodeId,
        to: NodeId,
        mut piece: Piece,
        receiver: &mut Receiver,
    ) -> io::Result<()> {
        let mut s = self.state.lock();
        if s.cut.contains(&(from, to)) || s.fires(|f| f.snapshot_cut) {
            s.counts.snapshots_cut += 1;
            return Err(unreachable("file transfer cut"));
        }
        if let Piece::Chunk(bytes) = &mut piece {
            if !bytes.is_empty() && s.fires(|f| f.snapshot_damage) {
                s.counts.snapshots_damaged += 1;
                let i = (s.next() % bytes.len() as u64) as usize;
                if let Some(b) = bytes.get_mut(i) {
                    *b ^= 0x20;
                }
            }
        }
        drop(s);
        receiver.piece(piece)
    }
}

/// Puts `node` in `set` when `on`, takes it out otherwise.
fn mark(set: &mut BTreeSet<NodeId>, node: NodeId, on: bool) {
    if on {
        set.insert(node);
    } else {
        set.remove(&node);
    }
}
