//! How nodes talk: the messages, the [`Transport`] that carries them, and [`Service`], the
//! receiving end that hands them to the local Raft node.
//!
//! Two transports: `tcp` (real servers: framed bincode over TCP, one connection per peer for
//! Raft messages and a connection of its own per snapshot transfer, so a snapshot never queues
//! heartbeats behind it) and `local` (in-process clusters for tests, with injected faults).

pub mod local;
pub mod tcp;

use crate::raft::{
    AppendRequest, AppendResponse, NodeId, NodeInfo, Raft, SnapshotMeta, SnapshotResp, Vote,
    VoteReq, VoteResp,
};
use crate::snapshot::{Piece, Receiver, SnapshotFiles};
use crate::state_machine::Shared;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::io;
use std::sync::Arc;

/// A Raft message from one node to another.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Rpc {
    /// Log entries or a heartbeat.
    Append(AppendRequest),
    /// A request for a vote.
    Vote(VoteReq),
}

/// The answer to an [`Rpc`].
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcReply {
    /// To `Append`.
    Append(AppendResponse),
    /// To `Vote`.
    Vote(VoteResp),
    /// The receiving node could not handle the message (it is stopping).
    Failed(String),
}

/// Carries messages and snapshots between nodes.
pub trait Transport: Send + Sync + 'static {
    /// Sends `rpc` from node `from` to node `target` (listening at `info`) and waits for the reply.
    /// An error means no reply came (the message may or may not have arrived).
    fn call(
        &self,
        from: NodeId,
        target: NodeId,
        info: &NodeInfo,
        rpc: Rpc,
    ) -> BoxFuture<'static, io::Result<RpcReply>>;

    /// Streams the snapshot `files` to `target`, which installs it; returns its answer.
    fn send_snapshot(
        &self,
        from: NodeId,
        target: NodeId,
        info: &NodeInfo,
        vote: Vote,
        meta: SnapshotMeta,
        files: SnapshotFiles,
    ) -> BoxFuture<'static, io::Result<SnapshotResp>>;

    /// Bulk channel (rubble mode): streams `files` into `target`'s staging directory; `Ok` once
    /// the target holds them durably (each file and the directory synced), with the target's
    /// flushed log index.
    fn ship_files(
        &self,
        from: NodeId,
        target: NodeId,
        info: &NodeInfo,
        files: SnapshotFiles,
    ) -> BoxFuture<'static, io::Result<u64>>;

    /// Bulk channel (rubble mode): has `target` stream the edit files `names` (from its
    /// database directory or staging) into `into`, which is returned to be finished.
    fn fetch_files(
        &self,
        from: NodeId,
        target: NodeId,
        info: &NodeInfo,
        names: Vec<String>,
        into: Receiver,
    ) -> BoxFuture<'static, io::Result<Receiver>>;

    /// Bytes of Raft messages (not snapshots or files) sent so far; 0 where the transport does
    /// not count them.
    fn rpc_bytes_sent(&self) -> u64 {
        0
    }
}

/// The receiving end of one node: hands messages to its Raft node and receives snapshots.
#[derive(Clone)]
pub struct Service {
    pub(crate) raft: Raft,
    pub(crate) shared: Arc<Shared>,
    /// Votes are refused until then: a node that restarted does not know which leader it
    /// promised a lease to (see `replica`'s module documentation).
    pub(crate) votes_from: std::time::Instant,
    pub(crate) lease: Arc<parking_lot::Mutex<crate::replica::Lease>>,
}

impl Service {
    /// Handles one message.
    pub async fn handle(&self, rpc: Rpc) -> RpcReply {
        match rpc {
            Rpc::Append(req) => match self.raft.append_entries(req).await {
                Ok(r) => RpcReply::Append(r),
                Err(e) => RpcReply::Failed(e.to_string()),
            },
            Rpc::Vote(_) if std::time::Instant::now() < self.votes_from => RpcReply::Failed(
                "started recently: no vote before the leases it may have granted run out".into(),
            ),
            Rpc::Vote(req) => {
                self.lease.lock().vote_requested();
                match self.raft.vote(req).await {
                    Ok(r) => RpcReply::Vote(r),
                    Err(e) => RpcReply::Failed(e.to_string()),
                }
            }
        }
    }

    /// Starts receiving a snapshot into a fresh directory.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn begin_snapshot(&self) -> io::Result<Receiver> {
        let (fs, dir) = {
            let mut store = self.shared.snapshots.lock();
            (store.fs().clone(), store.new_dir())
        };
        let reception = self.shared.receptions.enter()?;
        Ok(Receiver::new(fs, dir)?.counted(reception))
    }

    /// Installs a completely received snapshot.
    ///
    /// # Errors
    /// The files are incomplete, or the node is stopping.
    pub async fn install_snapshot(
        &self,
        vote: Vote,
        meta: SnapshotMeta,
        receiver: Receiver,
    ) -> io::Result<SnapshotResp> {
        let files = receiver.finish()?;
        let dir = files.dir.clone();
        let fs = files.fs.clone();
        let snapshot = openraft::Snapshot {
            meta,
            snapshot: Box::new(files),
        };
        match self.raft.install_full_snapshot(vote, snapshot).await {
            Ok(r) => Ok(r),
            Err(e) => {
                crate::snapshot::remove_dir(&fs, &dir);
                Err(io::Error::other(e.to_string()))
            }
        }
    }

    /// Starts receiving shipped files into the engine's staging directory.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn begin_staging(&self) -> io::Result<Receiver> {
        let reception = self.shared.receptions.enter()?;
        let fs = self.shared.snapshots.lock().fs().clone();
        Ok(Receiver::new(fs, self.shared.db.staging_dir())?.counted(reception))
    }

    /// Completes a transfer into staging: files synced with the directory; a file that arrived
    /// after its edit was applied here (the node fetched it meanwhile; it may be gone again
    /// since, compacted or collected) is dropped again (`Db::drop_unneeded_staged`). Returns
    /// this node's flushed log index, for the acknowledgement.
    ///
    /// # Errors
    /// A file left incomplete, or an I/O error.
    pub fn finish_staging(&self, receiver: Receiver) -> io::Result<u64> {
        let _counted = receiver.reception();
        let files = receiver.finish()?;
        let names: Vec<String> = files.files.iter().map(|f| f.name.clone()).collect();
        let lanes = self.shared.fetcher.as_ref().map(|f| &f.lanes);
        self.shared
            .db
            .drop_unneeded_staged(&names, |n| lanes.is_some_and(|l| l.lock().unneeded(n)));
        Ok(self.flushed_index())
    }

    /// This node's flushed log index (0 before the first flush).
    pub fn flushed_index(&self) -> u64 {
        self.shared.db.flushed_position().map_or(0, |p| p.index)
    }

    /// The edit files `names` as this node holds them, one transfer each.
    ///
    /// # Errors
    /// A file this node does not have.
    pub fn files_for(&self, names: &[String]) -> io::Result<Vec<SnapshotFiles>> {
        let fs = self.shared.snapshots.lock().fs().clone();
        names
            .iter()
            .map(|name| {
                let path = self.shared.db.edit_file_path(name).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, format!("no file {name} here"))
                })?;
                let len = fs.file_size(&path)?;
                Ok(SnapshotFiles {
                    fs: fs.clone(),
                    dir: path.parent().map(|p| p.to_path_buf()).unwrap_or_default(),
                    files: vec![crate::snapshot::FileInfo {
                        name: name.clone(),
                        len,
                    }],
                })
            })
            .collect()
    }

    /// Receives a whole snapshot from `pieces` and installs it.
    ///
    /// # Errors
    /// A damaged or incomplete transfer (what was received is removed), or the node is stopping.
    pub async fn receive_snapshot<S>(
        &self,
        vote: Vote,
        meta: SnapshotMeta,
        mut pieces: S,
    ) -> io::Result<SnapshotResp>
    where
        S: futures::Stream<Item = io::Result<Piece>> + Unpin,
    {
        use futures::StreamExt;
        let mut receiver = self.begin_snapshot()?;
        while let Some(piece) = pieces.next().await {
            if let Err(e) = piece.and_then(|p| receiver.piece(p)) {
                receiver.abandon();
                return Err(e);
            }
        }
        self.install_snapshot(vote, meta, receiver).await
    }
}
