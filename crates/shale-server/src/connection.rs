//! One RESP connection: read, decode every complete request, execute them as one batch, write
//! every reply with one write, repeat.
//!
//! A batch runs on the runtime thread that read it: an engine write is a memory insert plus a
//! WAL append to the process's buffer, cheaper than a hop to another thread. Before it answers,
//! a batch that wrote yields once, so the other ready connections of its thread run theirs, and
//! then hands the WAL to the operating system: one `write` for the round, as Redis writes its
//! append-only file once per event-loop iteration, and no reply before its write left the
//! process. Under `appendfsync always` a batch
//! with writes then waits, without blocking the thread, for a ticket of the WAL syncer
//! (`store::syncer`): one fsync covers the batches of every connection.
//!
//! A protocol error (malformed frame, a broken limit) is answered with Redis's error text after
//! the replies to the requests before it, and the connection is closed, as Redis does.
//! At shutdown the connection stops reading but finishes the batch it is running.
//!
//! On a cluster node a batch first passes `cluster::dispatch`, which runs it here (its writes
//! are durable once committed through the Raft log, so nothing is flushed or synced here) or
//! forwards it to the leader. A batch run here awaits its Raft entry without blocking the thread
//! (`exec::settle`): the entry's apply releases the batch's key locks, and the thread serves its
//! other connections meanwhile, whose batches join the same entries. A batch that meets a key
//! lock held by another (usually one whose entry is in flight) awaits the next release of locks
//! and tries again here (`exec::retry_after_busy`) instead of blocking a thread for a round trip.

use crate::cluster;
use crate::config::Appendfsync;
use crate::exec;
use crate::metrics::add;
use crate::session::{After, Session};
use crate::shared::Shared;
use bytes::{Bytes, BytesMut};
use shale_proto::resp::{ReplyWriter, Request, RequestDecoder};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// Bytes reserved in the read buffer before each read.
pub const READ_CHUNK: usize = 16 * 1024;
/// Reads reserve at most this much unless a larger argument is known to be on its way; reply
/// buffers above it are not kept between batches.
pub const MAX_READ_RESERVE: usize = 1 << 20;
/// A batch with an argument at least this long runs on a blocking thread, not on the
/// connection's runtime thread: copying and logging a large value takes long enough (a 64 MiB
/// value, tens of milliseconds) to stall every other connection of the thread.
pub const LARGE_ARGUMENT: usize = 1 << 20;
/// One read takes at most this many bytes, and while a large argument arrives the connection
/// yields to the others of its thread after each read: one `recv` of a socket's whole receive
/// queue into memory touched for the first time takes milliseconds.
pub const MAX_RECV: usize = 256 << 10;

/// Serves one client until it leaves, breaks the protocol, or the server shuts down.
pub async fn serve(mut stream: TcpStream, shared: Arc<Shared>, id: u64) {
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut session = Some(Session::new(id, peer, shared.config.requirepass.is_some()));
    let mut decoder = RequestDecoder::new(shared.config.limits());
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = Some(BytesMut::with_capacity(READ_CHUNK));
    let mut shutdown = shared.shutdown_tx.subscribe();
    let mut requests: Vec<Request> = Vec::new();
    // Input read while a command was blocked, not yet decoded.
    let mut pending_input = false;
    // On a cluster follower: the connection to the leader that batches are forwarded over.
    let mut upstream: Option<cluster::Upstream> = None;
    loop {
        if *shutdown.borrow() {
            break;
        }
        reserve_read(&mut buf, decoder.bytes_needed());
        if !std::mem::take(&mut pending_input) {
            let n = tokio::select! {
                r = read_some(&stream, &mut buf) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                },
                _ = shutdown.changed() => break,
            };
            add(&shared.metrics.net_input_bytes, n as u64);
        }
        let decoded = decoder.decode_all(&mut buf, &mut requests);
        if requests.is_empty() && decoded.is_ok() && decoder.bytes_needed() > MAX_READ_RESERVE {
            // The rest of a large argument is on its way: let the other connections run.
            tokio::task::yield_now().await;
            continue;
        }
        let mut o = out.take().unwrap_or_default();
        let mut s = session.take().expect("session is always put back");
        let auth_failures = s.auth_failures;
        if !requests.is_empty() {
            let mut batch = std::mem::take(&mut requests);
            let here = shared.store.replica().is_none()
                || cluster::dispatch(&shared, &mut s, &batch, &mut o, &mut upstream).await;
            let mut from = if here { 0 } else { batch.len() };
            // The read buffer shares the memory of the batch's arguments: with a large one, what
            // it holds of the next request moves to a fresh buffer, and the old one goes with
            // the arguments, freed on the blocking thread (unmapping hundreds of MiB takes
            // milliseconds).
            let mut spent = (here && has_large_argument(&batch)).then(|| {
                let mut fresh = BytesMut::with_capacity(READ_CHUNK.max(buf.len()));
                fresh.extend_from_slice(&buf);
                std::mem::replace(&mut buf, fresh)
            });
            // Where the batch runs: a batch with a large argument on a blocking thread, others
            // here until they would wait for a lock held by another thread's batch.
            let mut place = if has_large_argument(&batch[from..]) {
                Place::Blocking
            } else {
                Place::Here
            };
            let mut busy_tries = 0;
            while from < batch.len() {
                let Some((back, batch_back, out_back, outcome, durable)) =
                    execute_durably(&shared, s, batch, from, o, spent.take(), place).await
                else {
                    // The thread running the batch died: nothing to answer with.
                    return;
                };
                (s, batch, o) = (back, batch_back, out_back);
                if let Err(e) = durable {
                    o.clear();
                    for _ in &batch[from..] {
                        ReplyWriter::new(&mut o, s.version).error(e.as_bytes());
                    }
                    if matches!(outcome, exec::Outcome::Busy { .. }) {
                        break;
                    }
                }
                if let exec::Outcome::Busy { resume, releases } = outcome {
                    // The rest waits for a lock held by another batch: on a blocking thread, or
                    // on a cluster node here again once a batch released its locks.
                    add(&shared.metrics.busy_batches, 1);
                    from += resume;
                    place = if exec::retry_after_busy(&shared, releases, &mut busy_tries).await {
                        Place::Here
                    } else {
                        Place::Blocking
                    };
                    continue;
                }
                let exec::Outcome::Blocked { resume } = outcome else {
                    break;
                };
                // A blocked command: send the replies before it, then wait for its own (while
                // buffering what the client sends meanwhile, and noticing if it leaves).
                let Some(mut blocked) = s.blocked.take() else {
                    break;
                };
                if !o.is_empty() {
                    add(&shared.metrics.net_output_bytes, o.len() as u64);
                    if stream.write_all(&o).await.is_err() {
                        blocked.cancel(&shared);
                        s.after = After::Close;
                        break;
                    }
                    o.clear();
                }
                let reply = loop {
                    buf.reserve(READ_CHUNK);
                    tokio::select! {
                        r = blocked.reply(&shared) => break Some(r),
                        r = read_some(&stream, &mut buf) => match r {
                            Ok(0) | Err(_) => break None,
                            Ok(_) => continue,
                        },
                        _ = shutdown.changed() => break None,
                    }
                };
                let Some(reply) = reply else {
                    blocked.cancel(&shared);
                    s.after = After::Close;
                    break;
                };
                // The batch that served us wrote our pop; it reaches the operating system (or
                // the disk, under `always`) before we answer.
                if let Err(e) = settle(&shared, true).await {
                    ReplyWriter::new(&mut o, s.version).error(e.as_bytes());
                } else {
                    o.extend_from_slice(&reply);
                }
                from += resume;
                pending_input = !buf.is_empty();
            }
            requests = batch;
            requests.clear();
        }
        if let Err(e) = decoded {
            if s.after == After::Continue {
                add(&shared.metrics.protocol_errors, 1);
                e.write_reply(&mut o);
                s.after = After::Close;
            }
        }
        if s.authenticated && decoder.limits().auth_required {
            decoder.set_auth_required(false);
        }
        if s.auth_failures > auth_failures {
            // A failed AUTH: the replies wait (without blocking the thread), so that guessing
            // passwords on one connection is slow.
            tokio::time::sleep(Session::auth_delay(s.auth_failures)).await;
        }
        if !o.is_empty() {
            add(&shared.metrics.net_output_bytes, o.len() as u64);
            if stream.write_all(&o).await.is_err() {
                s.after = After::Close;
            }
            o.clear();
        }
        // A huge reply should not pin its buffer for the connection's lifetime.
        if o.capacity() > MAX_READ_RESERVE {
            o = BytesMut::with_capacity(READ_CHUNK);
        }
        let after = s.after;
        session = Some(s);
        out = Some(o);
        match after {
            After::Continue => {}
            After::Close => break,
            After::Shutdown => {
                shared.request_shutdown();
                break;
            }
        }
    }
    if let Some(mut s) = session {
        exec::end_session(&shared, &mut s);
    }
    let _ = stream.shutdown().await;
}

/// Makes room in `buf` for the next read, `needed` being what the decoder still needs
/// ([`RequestDecoder::bytes_needed`]).
///
/// A large argument on its way gets room for all of it at once, so the buffer is never copied as
/// it grows (copying tens of MiB into fresh memory stalls the thread for hundreds of
/// milliseconds). It is bounded by proto-max-bulk-len, and its pages are only touched as the
/// bytes arrive. While the buffer holds more than [`MAX_READ_RESERVE`] bytes (the part of a large
/// argument that has arrived, or a long pipeline), it gets only what the decoder needs: near the
/// end of a large argument the room reserved for it still holds the rest, and asking for
/// [`READ_CHUNK`] bytes when fewer are left would grow the buffer, which doubles it and copies
/// every byte in it (a 300 MB value: a second or more on the connection thread, stalling its
/// other clients, and the value's memory twice over).
fn reserve_read(buf: &mut BytesMut, needed: usize) {
    let want = if needed > MAX_READ_RESERVE || buf.len() > MAX_READ_RESERVE {
        needed
    } else {
        needed.max(READ_CHUNK)
    };
    buf.reserve(want);
}

/// Where a batch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// On the connection's thread, which serves other connections too: the batch must not wait
    /// for locks ([`Session::must_not_wait`]).
    Here,
    /// On a blocking thread, where it may wait for locks: a batch with a large argument (copying
    /// and logging it takes long enough to stall every other connection of the thread), or the
    /// rest of a batch that met a lock held by another batch.
    Blocking,
}

/// Executes `batch[from..]` at `place`, appending its replies to `out`, and makes its writes as
/// durable as `appendfsync` asks before any reply leaves (see the module documentation). A batch
/// on a blocking thread hands the WAL to the operating system there too: a value below the
/// engine's large-value size goes through the WAL, and a `write` of megabytes can sleep in the
/// kernel's dirty-page throttling. Returns what it took, the outcome and, on a durability
/// failure, the error line to answer with; `None` when the thread that ran it died.
async fn execute_durably(
    shared: &Arc<Shared>,
    mut s: Session,
    batch: Vec<Request>,
    from: usize,
    mut o: BytesMut,
    spent: Option<BytesMut>,
    place: Place,
) -> Option<(
    Session,
    Vec<Request>,
    BytesMut,
    exec::Outcome,
    Result<(), String>,
)> {
    let part = &batch[from..];
    // A cluster node's writes are durable when their commit returns.
    let writes = exec::writes_anything(part) && shared.store.replica().is_none();
    let always = shared.store.appendfsync() == Appendfsync::Always && writes;
    let (ticket, outcome, s, batch, o, flushed) = if place == Place::Here {
        s.must_not_wait = true;
        let (ticket, outcome) = execute(shared, &mut s, part, &mut o, always);
        s.must_not_wait = false;
        // A cluster node's commit, awaited while the thread serves its other connections.
        exec::settle(shared, &mut s, &mut o).await;
        (ticket, outcome, s, batch, o, None)
    } else {
        let sh = shared.clone();
        tokio::task::spawn_blocking(move || {
            let mut batch = batch;
            let (ticket, outcome) = execute(&sh, &mut s, &batch[from..], &mut o, always);
            let flushed = (writes && ticket.is_none()).then(|| flush_wal(&sh));
            if !matches!(outcome, exec::Outcome::Blocked { .. }) {
                // Done with the arguments: free them here, not on the connection's thread. A
                // request's name is all that its reply's failure handling needs.
                for r in &mut batch[from..] {
                    let name = Bytes::copy_from_slice(r.name());
                    *r = Request::new(vec![name]).expect("one argument");
                }
            }
            drop(spent);
            (ticket, outcome, s, batch, o, flushed)
        })
        .await
        .ok()?
    };
    let durable = match ticket {
        // Replies wait for the fsync that covers the batch's writes.
        Some(ticket) => ticket
            .await
            .unwrap_or_else(|_| Err("the WAL syncer stopped".into()))
            .map_err(|e| format!("ERR engine: {e}")),
        None if writes => match flushed {
            Some(flushed) => flushed,
            None => settle(shared, false).await,
        },
        None => Ok(()),
    };
    Some((s, batch, o, outcome, durable))
}

/// Whether a request of `batch` has an argument of at least [`LARGE_ARGUMENT`] bytes.
fn has_large_argument(batch: &[Request]) -> bool {
    batch
        .iter()
        .any(|r| r.argv().iter().any(|a| a.len() >= LARGE_ARGUMENT))
}

/// Executes `batch`, appending its replies to `out`; under `always` also returns the ticket of
/// the fsync that will cover its writes.
fn execute(
    shared: &Shared,
    session: &mut Session,
    batch: &[Request],
    out: &mut BytesMut,
    always: bool,
) -> (
    Option<tokio::sync::oneshot::Receiver<crate::store::syncer::SyncResult>>,
    exec::Outcome,
) {
    if always {
        let _executing = shared.store.syncer.executing();
        let outcome = exec::execute(shared, session, batch, out);
        (Some(shared.store.syncer.ticket()), outcome)
    } else {
        (None, exec::execute(shared, session, batch, out))
    }
}

/// Makes the writes before now leave the process (`Db::flush_wal`), or, under `appendfsync
/// always` when `sync_always`, reach the disk. The error is the line to answer with.
async fn settle(shared: &Shared, sync_always: bool) -> Result<(), String> {
    if shared.store.replica().is_some() {
        return Ok(());
    }
    if sync_always && shared.store.appendfsync() == Appendfsync::Always {
        return shared
            .store
            .syncer
            .ticket()
            .await
            .unwrap_or_else(|_| Err("the WAL syncer stopped".into()))
            .map_err(|e| format!("ERR engine: {e}"));
    }
    // The engine wrote the batch unflushed. Let the other connections of this thread that are
    // ready run their batches first, then hand the WAL to the operating system once for all of
    // them (the first to get here writes, the others find nothing left) before anyone answers.
    tokio::task::yield_now().await;
    flush_wal(shared)
}

/// `Db::flush_wal`, with the error as the line to answer with.
fn flush_wal(shared: &Shared) -> Result<(), String> {
    shared
        .store
        .db()
        .flush_wal()
        .map_err(|e| crate::commands::engine_error_text(&e))
}

/// Waits until the socket is readable and reads what it holds into `buf`'s spare capacity (which
/// the caller reserved). `Ok(0)` is the end of the stream.
///
/// A read that returns less than the room it was given has emptied the socket's receive queue,
/// so the runtime is told the socket is no longer readable (by reporting `WouldBlock` out of
/// `try_io`, which clears the readiness it observed and no later one). Without this the next
/// read would be a system call that only returns `EAGAIN`: one extra call per request, a quarter
/// of the system calls of an unpipelined `GET`.
async fn read_some(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        let mut got = None;
        let result = stream.try_io(Interest::READABLE, || {
            let spare = buf.spare_capacity_mut();
            let room = spare.len().min(MAX_RECV);
            // SAFETY: `recv` writes at most `room` bytes into the spare capacity, which is
            // allocated and exclusively ours for the call; the descriptor is the stream's own.
            let n = unsafe { libc::recv(stream.as_raw_fd(), spare.as_mut_ptr().cast(), room, 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = n as usize;
            // SAFETY: the kernel initialized the first `n <= room` spare bytes.
            unsafe { buf.set_len(buf.len() + n) };
            got = Some(n);
            if n > 0 && n < room {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(n)
            }
        });
        match (result, got) {
            (_, Some(n)) => return Ok(n),
            (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => continue,
            (Err(e), None) if e.kind() == io::ErrorKind::Interrupted => continue,
            (Err(e), None) => return Err(e),
            (Ok(n), None) => return Ok(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_proto::resp::Limits;

    /// A large argument arriving in pieces smaller than [`READ_CHUNK`] (as a loaded sender's
    /// segments do) fills the room reserved for it when its length was read: the buffer is never
    /// reallocated, so its bytes are never copied on the connection thread. Before the fix the
    /// read before the last asked for `READ_CHUNK` bytes with fewer left, which doubled the
    /// buffer and copied the whole argument.
    #[test]
    fn a_large_argument_is_read_into_the_room_reserved_for_it_without_a_copy() {
        const VALUE: usize = 40 << 20;
        const PIECE: usize = 10_000;
        let mut decoder = RequestDecoder::new(Limits::default());
        let mut requests = Vec::new();
        let mut buf = BytesMut::new();
        let header = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${VALUE}\r\n");
        let mut input = header.into_bytes();
        input.extend(std::iter::repeat_n(b'v', VALUE));
        input.extend_from_slice(b"\r\n");
        let mut sent = 0;
        // Where the room for the argument starts and how much there is, once it was reserved.
        let mut room: Option<(*const u8, usize)> = None;
        while requests.is_empty() {
            reserve_read(&mut buf, decoder.bytes_needed());
            let spare = buf.capacity() - buf.len();
            assert!(spare > 0, "no room to read into with {sent} bytes sent");
            match room {
                Some(r) => assert_eq!(
                    (buf.as_ptr(), buf.capacity()),
                    r,
                    "the buffer was reallocated with {} bytes left to read",
                    input.len() - sent
                ),
                None if buf.capacity() > VALUE => room = Some((buf.as_ptr(), buf.capacity())),
                None => {}
            }
            // The header arrives on its own; then the value, a piece at a time.
            let n = if sent == 0 {
                input.len() - VALUE - 2
            } else {
                PIECE.min(spare).min(input.len() - sent)
            };
            buf.extend_from_slice(&input[sent..sent + n]);
            sent += n;
            decoder.decode_all(&mut buf, &mut requests).unwrap();
        }
        assert!(room.is_some(), "no room was reserved for the argument");
        assert_eq!(sent, input.len());
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].argv()[2].len(), VALUE);
    }
}
