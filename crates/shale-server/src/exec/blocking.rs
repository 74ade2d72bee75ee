//! Clients blocked on lists and sorted sets (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP).
//!
//! A blocking command that finds its keys empty registers a [`Waiter`] under each of its keys
//! (logical db, key) while its batch still holds the keys' stripes, and leaves a [`Blocking`] in
//! the session; the connection writes the replies before it and waits on it. A batch that gives
//! a list or sorted set elements records the key ([`crate::store::Txn::ready`]); after it commits,
//! [`Blocked::serve`] serves that key's waiters in arrival order, each in a batch of its own
//! (locking the key and a move's destination), until the key is empty. A served client gets its
//! reply through a channel; a move that fills another key makes that key ready in turn.
//!
//! Timeouts race with serving: whoever takes the waiter's reply sender first wins. The server
//! takes it before it pops, so an element is never popped for a client that already timed out;
//! a client whose timeout finds the sender taken waits for the reply being made (the server then
//! answers it, with the timeout's null when the key turned out empty after the deadline).

use crate::commands::{serve_blocked, BlockOp, CmdError};
use crate::session::Session;
use crate::shared::Shared;
use crate::store::StripeSet;
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use shale_proto::resp::{ReplyWriter, Version};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A blocked client, as the registry holds it.
pub struct Waiter {
    client: u64,
    db: u8,
    keys: Vec<Bytes>,
    op: BlockOp,
    version: Version,
    deadline: Option<Instant>,
    reply: Mutex<Option<oneshot::Sender<BytesMut>>>,
    /// Still under its keys in the registry (cleared exactly once).
    registered: AtomicBool,
}

impl Waiter {
    fn take_sender(&self) -> Option<oneshot::Sender<BytesMut>> {
        self.reply.lock().take()
    }

    /// The reply of a timeout: a null array for the pops, a null bulk for the moves.
    fn null_reply(&self) -> BytesMut {
        let mut out = BytesMut::new();
        let mut w = ReplyWriter::new(&mut out, self.version);
        if self.op.null_is_array() {
            w.null_array();
        } else {
            w.null();
        }
        out
    }

    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// A blocked command's wait, held by its connection.
pub struct Blocking {
    waiter: Arc<Waiter>,
    rx: oneshot::Receiver<BytesMut>,
    /// Cleared once the timeout found the reply already being made.
    deadline: Option<Instant>,
}

impl Blocking {
    /// The command's reply: the served one, or the timeout's null. Cancel-safe: call it again
    /// after another branch of a `select!` won.
    pub async fn reply(&mut self, shared: &Shared) -> BytesMut {
        loop {
            let Some(deadline) = self.deadline else {
                return (&mut self.rx)
                    .await
                    .unwrap_or_else(|_| self.waiter.null_reply());
            };
            tokio::select! {
                r = &mut self.rx => return r.unwrap_or_else(|_| self.waiter.null_reply()),
                _ = tokio::time::sleep_until(deadline.into()) => {
                    if self.waiter.take_sender().is_some() {
                        shared.blocked.unregister(shared, &self.waiter);
                        return self.waiter.null_reply();
                    }
                    // The server is serving us: wait for what it sends.
                    self.deadline = None;
                }
            }
        }
    }

    /// Gives up the wait (the client left).
    pub fn cancel(self, shared: &Shared) {
        if self.waiter.take_sender().is_some() {
            shared.blocked.unregister(shared, &self.waiter);
        }
    }
}

/// The waiters of each (logical db, key), in arrival order.
type Queues = FxHashMap<(u8, Vec<u8>), VecDeque<Arc<Waiter>>>;

/// The registry (see the module documentation).
#[derive(Default)]
pub struct Blocked {
    queues: Mutex<Queues>,
}

impl Blocked {
    /// Blocks the client of `session` on `keys` of logical database `db` for `timeout`
    /// (`None`: forever), to do `op` when one gets elements.
    pub fn block(
        &self,
        shared: &Shared,
        session: &mut Session,
        db: u8,
        keys: &[Bytes],
        op: BlockOp,
        timeout: Option<Duration>,
    ) {
        let (tx, rx) = oneshot::channel();
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut unique: Vec<Bytes> = Vec::with_capacity(keys.len());
        for k in keys {
            if !unique.contains(k) {
                unique.push(k.clone());
            }
        }
        let waiter = Arc::new(Waiter {
            client: session.id,
            db,
            keys: unique,
            op,
            version: session.version,
            deadline,
            reply: Mutex::new(Some(tx)),
            registered: AtomicBool::new(true),
        });
        {
            let mut queues = self.queues.lock();
            for k in &waiter.keys {
                queues
                    .entry((db, k.to_vec()))
                    .or_default()
                    .push_back(waiter.clone());
            }
        }
        shared.store.note_blocked(1);
        session.blocked = Some(Blocking {
            waiter,
            rx,
            deadline,
        });
    }

    /// Removes `waiter` from the registry (once).
    fn unregister(&self, shared: &Shared, waiter: &Arc<Waiter>) {
        if !waiter.registered.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut queues = self.queues.lock();
        for k in &waiter.keys {
            let id = (waiter.db, k.to_vec());
            if let Some(q) = queues.get_mut(&id) {
                q.retain(|w| !Arc::ptr_eq(w, waiter));
                if q.is_empty() {
                    queues.remove(&id);
                }
            }
        }
        drop(queues);
        shared.store.note_blocked(-1);
    }

    /// The keys of logical database `db` that clients wait on (SWAPDB rechecks them).
    pub fn keys_in(&self, db: u8) -> Vec<Vec<u8>> {
        self.queues
            .lock()
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// CLIENT UNBLOCK: answers client `id`'s blocked command now, with the timeout's null or
    /// (`error`) an `UNBLOCKED` error. Returns whether the client was blocked.
    pub fn unblock(&self, shared: &Shared, id: u64, error: bool) -> bool {
        let waiter = self
            .queues
            .lock()
            .values()
            .flatten()
            .find(|w| w.client == id)
            .cloned();
        let Some(waiter) = waiter else {
            return false;
        };
        let Some(tx) = waiter.take_sender() else {
            return false;
        };
        self.unregister(shared, &waiter);
        let reply = if error {
            let mut out = BytesMut::new();
            ReplyWriter::new(&mut out, waiter.version)
                .error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK");
            out
        } else {
            waiter.null_reply()
        };
        let _ = tx.send(reply);
        true
    }

    fn front(&self, db: u8, key: &[u8]) -> Option<Arc<Waiter>> {
        self.queues
            .lock()
            .get(&(db, key.to_vec()))
            .and_then(|q| q.front().cloned())
    }

    /// Serves the clients blocked on `ready` keys (logical db, key), in order, each key until it
    /// is empty or has no waiter left (see the module documentation).
    pub fn serve(&self, shared: &Shared, ready: Vec<(u8, Vec<u8>)>) {
        let mut queue: VecDeque<(u8, Vec<u8>)> = VecDeque::new();
        for r in ready {
            if !queue.contains(&r) {
                queue.push_back(r);
            }
        }
        while let Some((db, key)) = queue.pop_front() {
            while let Some(waiter) = self.front(db, &key) {
                let Some(tx) = waiter.take_sender() else {
                    self.unregister(shared, &waiter);
                    continue;
                };
                if tx.is_closed() {
                    self.unregister(shared, &waiter);
                    continue;
                }
                let mut stripes = StripeSet::new();
                stripes.add(&key);
                if let BlockOp::Move { dst, .. } = &waiter.op {
                    stripes.add(dst);
                }
                let mut txn = shared.store.txn(&stripes);
                txn.select(db);
                let mut out = BytesMut::new();
                match serve_blocked(&mut txn, waiter.version, &waiter.op, &key, &mut out, true) {
                    Ok(true) => {
                        if let Err(e) = txn.commit() {
                            out.clear();
                            CmdError::Engine(e).write(&mut out, waiter.version);
                        }
                        let more = txn.take_ready();
                        drop(txn);
                        self.unregister(shared, &waiter);
                        let _ = tx.send(out);
                        for r in more {
                            if !queue.contains(&r) {
                                queue.push_back(r);
                            }
                        }
                    }
                    Ok(false) => {
                        drop(txn);
                        if waiter.expired() {
                            self.unregister(shared, &waiter);
                            let _ = tx.send(waiter.null_reply());
                        } else {
                            *waiter.reply.lock() = Some(tx);
                        }
                        break;
                    }
                    Err(e) => {
                        drop(txn);
                        out.clear();
                        e.write(&mut out, waiter.version);
                        self.unregister(shared, &waiter);
                        let _ = tx.send(out);
                    }
                }
            }
        }
    }
}
