//! Shale's replication: a cluster of nodes that agree, through Raft, on one log of writes, and
//! apply it to their engines in the same order.
//!
//! The Raft log is the write-ahead log: the engine runs with an external log
//! (`shale::Db::open_with_external_log`), a write is acknowledged once a majority has its entry
//! fsynced and this node has applied it, and after a restart a node replays the log from the
//! position its MANIFEST records as flushed. See `docs/design/0006-replication.md`.
//!
//! Layout, one concept per module:
//! - `command`: what the log carries (`Write`, `SwitchMemtable`, `InstallEdit`).
//! - `byte_string`: byte vectors in serde as one string, not byte by byte.
//! - `raft`: the only module that names openraft's types (the type configuration, the network
//!   adapter, the [`Consensus`](raft) trait the rest of the crate uses).
//! - `log`: the Raft log on disk (`format` holds its bytes).
//! - `state_machine`: applying entries to the engine; snapshots as checkpoints.
//! - `snapshot`: snapshot directories, their description, file-by-file transfer.
//! - `network`: messages, the `Transport` trait, the TCP and in-process transports.
//! - `replica`: a node: group commit, memtable switches, snapshots, read barriers, membership.
//! - `rubble`: rubble mode: the leader's flush, compaction and GC lanes, shipping and fetching
//!   files.

mod byte_string;
mod command;
mod error;
pub mod lincheck;
mod log;
pub mod network;
mod raft;
mod replica;
mod rubble;
mod snapshot;
mod state_machine;

pub use command::{Command, EditCommand};
pub use error::ReplError;
pub use log::LogStore;
pub use raft::{
    NodeId, NodeInfo, RaftTiming, DEFAULT_ELECTION_TIMEOUT_MS, DEFAULT_HEARTBEAT_MS,
    DEFAULT_LOGS_KEPT_AFTER_SNAPSHOT, DEFAULT_READ_LEASE_MS,
};
pub use replica::{
    ClusterStatus, FollowerStatus, PendingWrite, Replica, ReplicaConfig, Role, GROUP_BYTES,
    MAX_ENTRY_BYTES,
};
pub use rubble::{BeforePropose, InstallLag, ReplicationMode, RubbleSettings, RubbleStatus};
pub use snapshot::{FileInfo, Piece, Receiver, SnapshotFiles};
pub use state_machine::ApplyHook;
