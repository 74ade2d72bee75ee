//! Raft over TCP: each frame is a `u32` little-endian length and the bincode of a [`Frame`].
//!
//! A node keeps one connection per peer for Raft messages (one message in flight at a time, as
//! openraft sends them) and opens a separate connection for each snapshot transfer, so
//! heartbeats never wait behind a snapshot's megabytes; rubble mode's shipped and fetched files
//! travel the same way, each transfer on a connection of its own. A failed connection is dropped
//! and opened again at the next message, and so is one whose message was given up before its
//! reply came (openraft drops a call that timed out): a reply is only ever read by the call that
//! sent its message. See `docs/format/raft-wire.md`.

use super::{Rpc, RpcReply, Service, Transport};
use crate::raft::{NodeId, NodeInfo, SnapshotMeta, SnapshotResp, Vote};
use crate::snapshot::{send_files, Piece, Receiver, SnapshotFiles};
use bytes::{BufMut, BytesMut};
use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};

/// Largest frame accepted: a snapshot chunk or a batch of entries.
pub const MAX_FRAME: usize = 256 << 20;
/// How long a Raft message waits for its reply.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a connection attempt waits.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Everything that crosses a connection.
#[derive(Debug, Serialize, Deserialize)]
pub enum Frame {
    /// A Raft message.
    Rpc(Rpc),
    /// Its reply.
    Reply(RpcReply),
    /// A snapshot transfer begins.
    SnapshotBegin { vote: Vote, meta: SnapshotMeta },
    /// A piece of it.
    Piece(Piece),
    /// It is complete.
    SnapshotEnd,
    /// The receiver's answer.
    SnapshotReply(Result<SnapshotResp, String>),
    /// Rubble mode: shipped files follow (as `Piece`s, then `FilesEnd`), for staging.
    ShipBegin,
    /// The files of a `ShipBegin` or a `Fetch` are complete (or the sender failed).
    FilesEnd(Result<(), String>),
    /// The receiver holds the shipped files durably (or why not).
    ShipReply(Result<u64, String>),
    /// Rubble mode: send these edit files back (as `Piece`s, then `FilesEnd`).
    Fetch(Vec<String>),
}

async fn write_frame<W: AsyncWriteExt + Unpin>(w: &mut W, frame: &Frame) -> io::Result<()> {
    write_frame_counted(w, frame).await.map(|_| ())
}

/// Writes `frame` and returns its bytes on the wire.
async fn write_frame_counted<W: AsyncWriteExt + Unpin>(
    w: &mut W,
    frame: &Frame,
) -> io::Result<u64> {
    let body = bincode::serialize(frame).map_err(io::Error::other)?;
    if body.len() > MAX_FRAME {
        return Err(io::Error::other(format!(
            "frame of {} bytes is too large",
            body.len()
        )));
    }
    w.write_all(&(body.len() as u32).to_le_bytes()).await?;
    w.write_all(&body).await?;
    Ok(4 + body.len() as u64)
}

async fn read_frame<R: AsyncReadExt + Unpin>(r: &mut R) -> io::Result<Frame> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes is too large"),
        ));
    }
    // Read into memory that is neither zeroed first nor copied after: the frame's `Write`
    // entries are slices of it (`byte_string::decode_sharing`), kept as long as they are.
    let mut body = BytesMut::with_capacity(len);
    while body.len() < len {
        let want = len - body.len();
        if r.read_buf(&mut (&mut body).limit(want)).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    crate::byte_string::decode_sharing(&body.freeze())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

type Conn = (
    BufReader<tokio::net::tcp::OwnedReadHalf>,
    BufWriter<tokio::net::tcp::OwnedWriteHalf>,
);

async fn connect(addr: &str) -> io::Result<Conn> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to {addr} timed out"),
            )
        })??;
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    Ok((BufReader::new(r), BufWriter::new(w)))
}

/// A peer's connection, opened on demand.
type Slot = Arc<tokio::sync::Mutex<Option<Conn>>>;

/// The client side: connections to peers.
#[derive(Default, Clone)]
pub struct TcpTransport {
    conns: Arc<Mutex<HashMap<NodeId, Slot>>>,
    /// See [`Transport::rpc_bytes_sent`].
    rpc_bytes: Arc<AtomicU64>,
}

impl TcpTransport {
    /// No connections yet.
    pub fn new() -> TcpTransport {
        TcpTransport::default()
    }
}

impl Transport for TcpTransport {
    fn call(
        &self,
        _from: NodeId,
        target: NodeId,
        info: &NodeInfo,
        rpc: Rpc,
    ) -> BoxFuture<'static, io::Result<RpcReply>> {
        let slot = self.conns.lock().entry(target).or_default().clone();
        let addr = info.raft_addr.clone();
        let rpc_bytes = self.rpc_bytes.clone();
        async move {
            let mut slot = slot.lock().await;
            // The connection leaves its slot while the message is in flight and goes back only
            // once the reply was read whole. openraft times calls out by dropping them: a
            // connection kept after that would still carry the dropped call's reply, and the
            // next message would read it as its own (an AppendEntries "success" for entries
            // the peer never got, so a leader committed them without a quorum). Dropped with
            // the call, the connection closes, and the next message opens a fresh one.
            let taken = slot.take();
            let attempt = async {
                let (mut r, mut w) = match taken {
                    Some(c) => c,
                    None => connect(&addr).await?,
                };
                let sent = write_frame_counted(&mut w, &Frame::Rpc(rpc)).await?;
                w.flush().await?;
                rpc_bytes.fetch_add(sent, Ordering::Relaxed);
                match read_frame(&mut r).await? {
                    Frame::Reply(reply) => Ok((reply, (r, w))),
                    other => Err(unexpected(&other)),
                }
            };
            match tokio::time::timeout(CALL_TIMEOUT, attempt).await {
                Ok(Ok((reply, conn))) => {
                    *slot = Some(conn);
                    Ok(reply)
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no reply from {addr}"),
                )),
            }
        }
        .boxed()
    }

    fn send_snapshot(
        &self,
        _from: NodeId,
        _target: NodeId,
        info: &NodeInfo,
        vote: Vote,
        meta: SnapshotMeta,
        files: SnapshotFiles,
    ) -> BoxFuture<'static, io::Result<SnapshotResp>> {
        let addr = info.raft_addr.clone();
        async move {
            let (mut r, mut w) = connect(&addr).await?;
            write_frame(&mut w, &Frame::SnapshotBegin { vote, meta }).await?;
            let w = tokio::sync::Mutex::new(w);
            send_files(&files, |piece| {
                let w = &w;
                async move { write_frame(&mut *w.lock().await, &Frame::Piece(piece)).await }
            })
            .await?;
            let mut w = w.into_inner();
            write_frame(&mut w, &Frame::SnapshotEnd).await?;
            w.flush().await?;
            match read_frame(&mut r).await? {
                Frame::SnapshotReply(Ok(resp)) => Ok(resp),
                Frame::SnapshotReply(Err(e)) => Err(io::Error::other(e)),
                other => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected frame {other:?}"),
                )),
            }
        }
        .boxed()
    }

    fn ship_files(
        &self,
        _from: NodeId,
        _target: NodeId,
        info: &NodeInfo,
        files: SnapshotFiles,
    ) -> BoxFuture<'static, io::Result<u64>> {
        let addr = info.raft_addr.clone();
        async move {
            let (mut r, mut w) = connect(&addr).await?;
            write_frame(&mut w, &Frame::ShipBegin).await?;
            send_pieces(&mut w, &files).await?;
            write_frame(&mut w, &Frame::FilesEnd(Ok(()))).await?;
            w.flush().await?;
            match read_frame(&mut r).await? {
                Frame::ShipReply(Ok(flushed)) => Ok(flushed),
                Frame::ShipReply(Err(e)) => Err(io::Error::other(e)),
                other => Err(unexpected(&other)),
            }
        }
        .boxed()
    }

    fn fetch_files(
        &self,
        _from: NodeId,
        _target: NodeId,
        info: &NodeInfo,
        names: Vec<String>,
        mut into: Receiver,
    ) -> BoxFuture<'static, io::Result<Receiver>> {
        let addr = info.raft_addr.clone();
        async move {
            let result = async {
                let (mut r, mut w) = connect(&addr).await?;
                write_frame(&mut w, &Frame::Fetch(names)).await?;
                w.flush().await?;
                receive_pieces(&mut r, &mut into).await
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

    fn rpc_bytes_sent(&self) -> u64 {
        self.rpc_bytes.load(Ordering::Relaxed)
    }
}

fn unexpected(frame: &Frame) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected frame {frame:?}"),
    )
}

/// Runs file work that may block for long (writes, and above all `fsync`) so that the
/// runtime's other tasks go on meanwhile: on a multi-thread runtime the worker first hands them
/// to another thread (`block_in_place`). The runtime also answers Raft messages: a follower
/// whose two workers sync files it is shipped answers no AppendEntries meanwhile, and as every
/// follower receives the same files at the same time, the leader's commits wait for them all.
fn off_runtime<T>(work: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// Reads `Piece` frames into `receiver` until `FilesEnd`.
async fn receive_pieces<R: AsyncReadExt + Unpin>(
    r: &mut R,
    receiver: &mut Receiver,
) -> io::Result<()> {
    loop {
        match read_frame(r).await? {
            Frame::Piece(p) => off_runtime(|| receiver.piece(p))?,
            Frame::FilesEnd(Ok(())) => return Ok(()),
            Frame::FilesEnd(Err(e)) => return Err(io::Error::other(e)),
            other => return Err(unexpected(&other)),
        }
    }
}

/// Writes `files` as `Piece` frames.
async fn send_pieces<W: AsyncWriteExt + Unpin>(w: &mut W, files: &SnapshotFiles) -> io::Result<()> {
    let w = tokio::sync::Mutex::new(w);
    send_files(files, |piece| {
        let w = &w;
        async move { write_frame(&mut **w.lock().await, &Frame::Piece(piece)).await }
    })
    .await
}

/// Serves Raft connections on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, service: Service) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_connection(stream, service).await {
                if e.kind() != io::ErrorKind::UnexpectedEof {
                    tracing::debug!(error = %e, "a Raft connection ended");
                }
            }
        });
    }
}

async fn serve_connection(stream: TcpStream, service: Service) -> io::Result<()> {
    let (r, w) = stream.into_split();
    let (mut r, mut w) = (BufReader::new(r), BufWriter::new(w));
    loop {
        match read_frame(&mut r).await? {
            Frame::Rpc(rpc) => {
                let reply = service.handle(rpc).await;
                write_frame(&mut w, &Frame::Reply(reply)).await?;
                w.flush().await?;
            }
            Frame::SnapshotBegin { vote, meta } => {
                let mut receiver = service.begin_snapshot()?;
                let received = loop {
                    match read_frame(&mut r).await {
                        Ok(Frame::Piece(p)) => {
                            if let Err(e) = off_runtime(|| receiver.piece(p)) {
                                break Err(e);
                            }
                        }
                        Ok(Frame::SnapshotEnd) => break Ok(()),
                        Ok(other) => {
                            break Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("unexpected frame {other:?}"),
                            ))
                        }
                        Err(e) => break Err(e),
                    }
                };
                let reply = match received {
                    Ok(()) => service
                        .install_snapshot(vote, meta, receiver)
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => {
                        receiver.abandon();
                        Err(e.to_string())
                    }
                };
                write_frame(&mut w, &Frame::SnapshotReply(reply)).await?;
                w.flush().await?;
            }
            Frame::ShipBegin => {
                let mut receiver = service.begin_staging()?;
                let reply = match receive_pieces(&mut r, &mut receiver).await {
                    Ok(()) => {
                        off_runtime(|| service.finish_staging(receiver)).map_err(|e| e.to_string())
                    }
                    Err(e) => {
                        receiver.abandon_files();
                        Err(e.to_string())
                    }
                };
                write_frame(&mut w, &Frame::ShipReply(reply)).await?;
                w.flush().await?;
            }
            Frame::Fetch(names) => {
                let sent = async {
                    for files in service.files_for(&names)? {
                        send_pieces(&mut w, &files).await?;
                    }
                    Ok::<(), io::Error>(())
                }
                .await;
                write_frame(&mut w, &Frame::FilesEnd(sent.map_err(|e| e.to_string()))).await?;
                w.flush().await?;
            }
            other => return Err(unexpected(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::VoteReq;

    /// A peer that answers each vote request with `Failed("term N")`, N the request's term,
    /// taking `slow` before it answers term 1.
    async fn peer(slow: Duration) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let (r, w) = stream.into_split();
                    let (mut r, mut w) = (BufReader::new(r), BufWriter::new(w));
                    while let Ok(Frame::Rpc(Rpc::Vote(req))) = read_frame(&mut r).await {
                        let term = req.vote.leader_id().term;
                        if term == 1 {
                            tokio::time::sleep(slow).await;
                        }
                        let reply = Frame::Reply(RpcReply::Failed(format!("term {term}")));
                        if write_frame(&mut w, &reply).await.is_err() || w.flush().await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn vote(term: u64) -> Rpc {
        Rpc::Vote(VoteReq::new(Vote::new(term, 1), None))
    }

    fn answer(reply: RpcReply) -> String {
        match reply {
            RpcReply::Failed(s) => s,
            other => panic!("unexpected reply {other:?}"),
        }
    }

    /// Regression (issue 19): openraft drops a call that outlives its timeout; the next call on
    /// the connection read the dropped call's reply as its own, so a leader took a follower's
    /// "success" for entries it never got and committed them without a quorum.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reply_to_a_dropped_call_is_never_taken_for_the_next_ones() {
        let info = NodeInfo {
            raft_addr: peer(Duration::from_millis(300)).await,
            client_addr: String::new(),
        };
        let transport = TcpTransport::new();
        assert_eq!(
            answer(transport.call(1, 2, &info, vote(3)).await.unwrap()),
            "term 3"
        );
        let dropped = tokio::time::timeout(
            Duration::from_millis(50),
            transport.call(1, 2, &info, vote(1)),
        )
        .await;
        assert!(
            dropped.is_err(),
            "the slow call was not dropped: {dropped:?}"
        );
        for term in [2, 4, 5] {
            let got = answer(transport.call(1, 2, &info, vote(term)).await.unwrap());
            assert_eq!(got, format!("term {term}"));
        }
    }
}
