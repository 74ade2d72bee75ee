//! The replica's errors: what a caller (the server) does about each.

use crate::raft::{NodeId, NodeInfo};

/// Why a replicated operation did not complete.
#[derive(Debug, Clone)]
pub enum ReplError {
    /// This node is not the leader: send the request to `leader` (when known) instead. Nothing
    /// was written.
    NotLeader {
        /// The leader this node knows of.
        leader: Option<(NodeId, NodeInfo)>,
    },
    /// The Raft group could not complete the operation (no quorum, leadership lost while the
    /// entry was in flight, the node is stopping). A write may or may not have been applied.
    Unavailable(String),
    /// The engine failed (a write refused, or the database poisoned).
    Engine(shale::Error),
    /// An entry larger than [`crate::MAX_ENTRY_BYTES`].
    TooLarge(usize),
    /// The cluster settings are wrong.
    Config(String),
    /// A file of the replica's own (its log, a snapshot) could not be read or written.
    Io(String),
}

impl std::fmt::Display for ReplError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplError::NotLeader {
                leader: Some((id, n)),
            } => {
                write!(f, "not the leader; the leader is node {id} ({n})")
            }
            ReplError::NotLeader { leader: None } => write!(f, "not the leader; no leader known"),
            ReplError::Unavailable(m) => write!(f, "replication unavailable: {m}"),
            ReplError::Engine(e) => write!(f, "engine: {e}"),
            ReplError::TooLarge(n) => write!(
                f,
                "a write of {n} bytes exceeds the largest replicated entry ({} bytes)",
                crate::MAX_ENTRY_BYTES
            ),
            ReplError::Config(m) => write!(f, "cluster configuration: {m}"),
            ReplError::Io(m) => write!(f, "replica storage: {m}"),
        }
    }
}

impl std::error::Error for ReplError {}

impl From<shale::Error> for ReplError {
    fn from(e: shale::Error) -> ReplError {
        ReplError::Engine(e)
    }
}
