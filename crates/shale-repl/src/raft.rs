//! The one module that names openraft's types: the type configuration, the adapter from
//! [`Transport`] to openraft's network traits, and [`Consensus`], the thin trait through which the
//! rest of the crate drives the Raft group. A new openraft release changes this file only.

// openraft's error types are large and not ours to box.
#![allow(clippy::result_large_err)]

use crate::command::Command;
use crate::error::ReplError;
use crate::network::{Rpc, RpcReply, Transport};
use crate::snapshot::SnapshotFiles;
use futures::future::BoxFuture;
use futures::FutureExt;
use openraft::error::{
    ClientWriteError, Fatal, NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError,
    Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{RaftNetwork, RaftNetworkFactory};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

/// A node's id in the cluster.
pub type NodeId = u64;

/// Where a node listens: its Raft address and its client (RESP) address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// `host:port` of the node's Raft listener.
    pub raft_addr: String,
    /// `host:port` clients use (the leader's is where followers forward requests).
    pub client_addr: String,
}

impl std::fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "raft {} client {}", self.raft_addr, self.client_addr)
    }
}

openraft::declare_raft_types!(
    /// Shale's Raft types.
    pub TypeConfig:
        D = Command,
        R = (),
        NodeId = NodeId,
        Node = NodeInfo,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = SnapshotFiles,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type Membership = openraft::Membership<NodeId, NodeInfo>;
pub type StoredMembership = openraft::StoredMembership<NodeId, NodeInfo>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, NodeInfo>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type Raft = openraft::Raft<TypeConfig>;
pub type AppendRequest = AppendEntriesRequest<TypeConfig>;
pub type AppendResponse = AppendEntriesResponse<NodeId>;
pub type VoteReq = VoteRequest<NodeId>;
pub type VoteResp = VoteResponse<NodeId>;
pub type SnapshotResp = SnapshotResponse<NodeId>;

/// Timing of the Raft group.
#[derive(Debug, Clone)]
pub struct RaftTiming {
    /// Milliseconds between heartbeats.
    pub heartbeat_ms: u64,
    /// A follower that hears nothing for a random time in `[min, max)` milliseconds starts an
    /// election.
    pub election_timeout_ms: (u64, u64),
    /// Log entries kept behind a snapshot, so a follower that lags by fewer catches up from the
    /// log rather than by snapshot.
    pub logs_kept_after_snapshot: u64,
    /// The read lease, in milliseconds (0: off): after a leadership confirmation that began at
    /// `t`, the leader serves reads without another until `t` plus this. Must be below
    /// `election_timeout_ms.0` (see `Replica::read_barrier`).
    pub read_lease_ms: u64,
}

/// Default [`RaftTiming::heartbeat_ms`].
pub const DEFAULT_HEARTBEAT_MS: u64 = 100;
/// Default [`RaftTiming::election_timeout_ms`]: a new leader within a second of a crash.
pub const DEFAULT_ELECTION_TIMEOUT_MS: (u64, u64) = (500, 1000);
/// Default [`RaftTiming::logs_kept_after_snapshot`].
pub const DEFAULT_LOGS_KEPT_AFTER_SNAPSHOT: u64 = 5000;
/// Default [`RaftTiming::read_lease_ms`]: half the shortest election timeout.
pub const DEFAULT_READ_LEASE_MS: u64 = DEFAULT_ELECTION_TIMEOUT_MS.0 / 2;

impl Default for RaftTiming {
    fn default() -> RaftTiming {
        RaftTiming {
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            election_timeout_ms: DEFAULT_ELECTION_TIMEOUT_MS,
            logs_kept_after_snapshot: DEFAULT_LOGS_KEPT_AFTER_SNAPSHOT,
            read_lease_ms: DEFAULT_READ_LEASE_MS,
        }
    }
}

/// openraft's configuration for `timing`. Snapshots are triggered by the replica after each
/// flush, never by openraft's own policy (a snapshot is the flushed state, not the applied one).
pub(crate) fn config(timing: &RaftTiming) -> Result<Arc<openraft::Config>, ReplError> {
    if timing.read_lease_ms >= timing.election_timeout_ms.0 {
        return Err(ReplError::Config(format!(
            "the read lease ({} ms) must be shorter than the shortest election timeout ({} ms)",
            timing.read_lease_ms, timing.election_timeout_ms.0
        )));
    }
    let config = openraft::Config {
        cluster_name: "shale".into(),
        heartbeat_interval: timing.heartbeat_ms,
        election_timeout_min: timing.election_timeout_ms.0,
        election_timeout_max: timing.election_timeout_ms.1,
        snapshot_policy: openraft::SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: timing.logs_kept_after_snapshot,
        max_payload_entries: 512,
        install_snapshot_timeout: 30_000,
        ..Default::default()
    };
    config
        .validate()
        .map(Arc::new)
        .map_err(|e| ReplError::Config(e.to_string()))
}

/// The operations the replica needs from the consensus library.
pub(crate) trait Consensus: Send + Sync + 'static {
    /// Appends `command` to the log (leader only) and resolves once it is applied here, with its
    /// log index.
    fn propose(
        &self,
        command: Command,
    ) -> impl Future<Output = Result<BoxFuture<'static, Result<u64, ReplError>>, ReplError>> + Send;
    /// Confirms leadership with a quorum and waits until the state machine has applied
    /// everything committed before the call.
    fn read_barrier(&self) -> impl Future<Output = Result<(), ReplError>> + Send;
}

impl Consensus for Raft {
    async fn propose(
        &self,
        command: Command,
    ) -> Result<BoxFuture<'static, Result<u64, ReplError>>, ReplError> {
        let rx = self
            .client_write_ff(command)
            .await
            .map_err(|e| ReplError::Unavailable(e.to_string()))?;
        Ok(async move {
            match rx.await {
                Ok(Ok(resp)) => Ok(resp.log_id.index),
                Ok(Err(ClientWriteError::ForwardToLeader(f))) => Err(ReplError::NotLeader {
                    leader: f.leader_id.zip(f.leader_node),
                }),
                Ok(Err(e)) => Err(ReplError::Unavailable(e.to_string())),
                Err(_) => Err(ReplError::Unavailable(
                    "the Raft node stopped before the entry was applied".into(),
                )),
            }
        }
        .boxed())
    }

    async fn read_barrier(&self) -> Result<(), ReplError> {
        match self.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f))) => {
                Err(ReplError::NotLeader {
                    leader: f.leader_id.zip(f.leader_node),
                })
            }
            Err(e) => Err(ReplError::Unavailable(e.to_string())),
        }
    }
}

/// Cluster membership as the replica reports it.
pub(crate) fn voters_and_learners(m: &Membership) -> (BTreeSet<NodeId>, BTreeSet<NodeId>) {
    (m.voter_ids().collect(), m.learner_ids().collect())
}

/// The nodes of a membership.
pub(crate) fn nodes(m: &Membership) -> BTreeMap<NodeId, NodeInfo> {
    m.nodes().map(|(id, n)| (*id, n.clone())).collect()
}

/// openraft's network factory over a [`Transport`].
pub(crate) struct Network {
    pub transport: Arc<dyn Transport>,
    pub from: NodeId,
}

/// A connection to one peer.
pub(crate) struct Peer {
    transport: Arc<dyn Transport>,
    from: NodeId,
    target: NodeId,
    info: NodeInfo,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &NodeInfo) -> Peer {
        Peer {
            transport: self.transport.clone(),
            from: self.from,
            target,
            info: node.clone(),
        }
    }
}

type RpcResult<T> = Result<T, RPCError<NodeId, NodeInfo, RaftError<NodeId>>>;

impl Peer {
    async fn call(&self, rpc: Rpc) -> RpcResult<RpcReply> {
        match self
            .transport
            .call(self.from, self.target, &self.info, rpc)
            .await
        {
            Ok(RpcReply::Failed(msg)) => {
                let e = std::io::Error::other(msg);
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Ok(reply) => Ok(reply),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                Err(RPCError::Network(NetworkError::new(&e)))
            }
            Err(e) => Err(RPCError::Unreachable(Unreachable::new(&e))),
        }
    }
}

fn unexpected<T>(reply: RpcReply) -> RpcResult<T> {
    let e = std::io::Error::other(format!("unexpected reply {reply:?}"));
    Err(RPCError::Network(NetworkError::new(&e)))
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendRequest,
        _option: RPCOption,
    ) -> RpcResult<AppendResponse> {
        match self.call(Rpc::Append(rpc)).await? {
            RpcReply::Append(r) => Ok(r),
            other => unexpected(other),
        }
    }

    async fn vote(&mut self, rpc: VoteReq, _option: RPCOption) -> RpcResult<VoteResp> {
        match self.call(Rpc::Vote(rpc)).await? {
            RpcReply::Vote(r) => Ok(r),
            other => unexpected(other),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResp, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let send = self.transport.send_snapshot(
            self.from,
            self.target,
            &self.info,
            vote,
            snapshot.meta,
            *snapshot.snapshot,
        );
        tokio::select! {
            r = send => match r {
                Ok(resp) => Ok(resp),
                Err(e) => Err(StreamingError::Unreachable(Unreachable::new(&e))),
            },
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }
}
