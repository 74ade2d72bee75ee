//! The batch executor: runs every request decoded from one read of a connection.
//!
//! Consecutive ordinary commands run as one batch ([`run_segment`]): the batch locks the stripes
//! of every key its write commands name, runs the commands in order (each writes its reply into
//! the connection's output buffer), and commits their writes as one engine `WriteBatch`; the
//! connection then sends every reply with one write. A command that needs the whole keyspace
//! (FLUSHDB, SWAPDB) runs in a batch of its own. The transaction commands (MULTI, EXEC, DISCARD,
//! WATCH, UNWATCH, RESET) are the executor's own ([`multi`]): between MULTI and EXEC commands are
//! queued, and EXEC runs the queue as one batch. A blocking command with nothing to pop ends
//! the batch: the connection waits ([`blocking`]) and then carries on with the requests after it.
//!
//! After a batch commits, clients blocked on the lists and sorted sets it filled are served
//! ([`blocking::Blocked::serve`]) before its replies go out.
//!
//! This module knows nothing of sockets or RESP framing: it takes decoded requests and appends
//! replies, so a second protocol front end (Mega-KV's binary protocol) can drive the same store
//! through its own executor beside this one.

pub mod blocking;
pub mod multi;

use crate::commands::{
    self, CmdError, Command, Ctx, COMMANDS, EXCLUSIVE, NO_AUTH, READONLY, TXN, WRITE,
};
use crate::config::MAX_KEY_LEN;
use crate::metrics::add;
use crate::session::{After, Session};
use crate::shared::Shared;
use crate::store::format::Kind;
use crate::store::{expiry, Deferred, ElementReads, Mark, StripeSet, Txn};
use bytes::BytesMut;
use shale_proto::resp::Request;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The error for a key over [`MAX_KEY_LEN`].
pub const KEY_TOO_LONG: &str = "ERR key is too long (Shale keys are at most 67108800 bytes)";

/// How long a batch under [`Session::must_not_wait`] waits for its locks before it stops with
/// [`Outcome::Busy`]: a batch of small commands holds its locks for microseconds, one that
/// writes a large value for as long as the value takes to reach the disk (a second or more
/// for hundreds of MiB), and a connection thread that waits stalls every connection it serves.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_micros(500);

/// On a cluster node, how many times a connection's batch that met a held lock awaits a release
/// and tries again on its thread ([`retry_after_busy`]) before it goes to a blocking thread,
/// whose wait for the lock is fair: a lock held again and again by other batches cannot starve
/// it there.
pub const BUSY_RETRIES: u32 = 64;

/// The longest wait for a release before a busy batch tries again anyway.
pub const BUSY_PATIENCE: std::time::Duration = std::time::Duration::from_millis(100);

/// After [`Outcome::Busy`] with `releases`: whether to run the rest on the connection's thread
/// again, after awaiting (without blocking the thread) the next release of locks, which on a
/// cluster node is most often the apply of the Raft entry that held them. `false` (run it on a
/// blocking thread, where it waits for the lock) on a single node, where locks are held for
/// microseconds unless a batch writes a large value, for a batch that needs the whole keyspace
/// (it waits for every batch, reads included, whose releases are not counted), and after
/// [`BUSY_RETRIES`] tries.
pub async fn retry_after_busy(shared: &Shared, releases: Option<u64>, tries: &mut u32) -> bool {
    let Some(releases) = releases else {
        return false;
    };
    if shared.store.replica().is_none() || *tries >= BUSY_RETRIES {
        return false;
    }
    *tries += 1;
    shared.store.released_since(releases, BUSY_PATIENCE).await;
    true
}

/// A batch's commit that a cluster node queued on its Raft log and has not applied yet (see
/// [`Txn::commit_deferred`]): the replies of the batch's commands wait for it.
pub struct PendingCommit {
    deferred: Deferred,
    /// Commands of the batch that ran (from its first).
    ran: usize,
    expired: Vec<(u8, Vec<u8>)>,
    ready: Vec<(u8, Vec<u8>)>,
}

/// Waits, without blocking the thread, for the commit `session` left pending, replaces the
/// replies of its commands with the error if it failed, and does what follows a commit.
pub async fn settle(shared: &Shared, session: &mut Session, out: &mut BytesMut) {
    if let Some(p) = session.pending.take() {
        let failed = p.deferred.failed;
        let result = p.deferred.settled(&shared.store).await;
        conclude(
            shared, session, out, failed, p.ran, result, p.expired, p.ready,
        );
    }
}

/// [`settle`], blocking the thread: the next batch of the session must not run before it.
fn settle_now(shared: &Shared, session: &mut Session, out: &mut BytesMut) {
    if let Some(p) = session.pending.take() {
        let failed = p.deferred.failed;
        let result = p.deferred.wait(&shared.store);
        conclude(
            shared, session, out, failed, p.ran, result, p.expired, p.ready,
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn conclude(
    shared: &Shared,
    session: &Session,
    out: &mut BytesMut,
    failed: Option<Mark>,
    ran: usize,
    result: shale::Result<()>,
    expired: Vec<(u8, Vec<u8>)>,
    ready: Vec<(u8, Vec<u8>)>,
) {
    if let (Err(e), Some(failed)) = (result, failed) {
        replace_with_errors(session, out, failed, ran, &e);
    }
    after_commit(shared, expired, ready);
}

/// Whether any of `requests` may write (under `appendfsync always` such a batch waits for an
/// fsync; a batch of reads does not). EXEC counts as a write.
pub fn writes_anything(requests: &[Request]) -> bool {
    requests.iter().any(|r| {
        commands::lookup(r.name())
            .is_some_and(|c| COMMANDS[c].has(WRITE) || COMMANDS[c].name == "exec")
    })
}

/// What a call of [`execute`] leaves to the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every request ran (or the connection is to close).
    Done,
    /// The request before `resume` blocked (its wait is in `Session::blocked`): once it is
    /// answered, execution goes on from `resume`.
    Blocked {
        /// The index of the first request not yet run.
        resume: usize,
    },
    /// Under [`Session::must_not_wait`]: the request at `resume` (and those after it) did not
    /// run, because a key lock its batch needs is held by another batch. The connection runs
    /// them where waiting harms no one else, or (on a cluster node) tries again once a batch
    /// released its locks after `releases` ([`Store::released_since`](crate::store::Store::released_since)).
    Busy {
        /// The index of the first request not yet run.
        resume: usize,
        /// [`Store::lock_releases`](crate::store::Store::lock_releases) before the locks were
        /// tried; `None` for a batch that needs the whole keyspace.
        releases: Option<u64>,
    },
}

/// Runs `requests` in order, appending one reply per request to `out` (fewer when a command
/// ends the connection or blocks).
pub fn execute(
    shared: &Shared,
    session: &mut Session,
    requests: &[Request],
    out: &mut BytesMut,
) -> Outcome {
    add(&shared.metrics.batches, 1);
    add(&shared.metrics.batched_requests, requests.len() as u64);
    let resolved: Vec<Option<usize>> = requests
        .iter()
        .map(|r| commands::lookup(r.name()))
        .collect();
    let command = |i: usize| resolved[i].map(|c| &COMMANDS[c]);
    let is_txn = |i: usize| command(i).is_some_and(|c| c.has(TXN));
    let exclusive = |i: usize| command(i).is_some_and(|c| c.has(EXCLUSIVE));
    let mut i = 0;
    while i < requests.len() && session.after == After::Continue {
        // Whatever runs next runs after the previous segment's commit.
        settle_now(shared, session, out);
        if session.multi.is_some() && !multi::runs_in_multi(command(i)) {
            multi::queue(session, &requests[i], command(i), out);
            i += 1;
            continue;
        }
        if let Some(c) = command(i).filter(|c| c.has(TXN)) {
            multi::control(shared, session, c, requests[i].argv(), out);
            i += 1;
            continue;
        }
        let end = if exclusive(i) {
            i + 1
        } else {
            (i + 1..requests.len())
                .find(|&j| exclusive(j) || is_txn(j))
                .unwrap_or(requests.len())
        };
        match run_segment(shared, session, &requests[i..end], &resolved[i..end], out) {
            SegmentEnd::Ran => {}
            SegmentEnd::Blocked(blocked) => {
                return Outcome::Blocked {
                    resume: i + blocked + 1,
                }
            }
            SegmentEnd::Busy { releases } => {
                return Outcome::Busy {
                    resume: i,
                    releases,
                }
            }
        }
        i = end;
    }
    Outcome::Done
}

/// The stripes a batch of `requests` locks: the keys of its write commands exclusively, and
/// (`lock_reads`, for EXEC) those of its read commands shared.
fn stripes_of<'r>(
    requests: impl Iterator<Item = (&'r Request, Option<&'static Command>)>,
    lock_reads: bool,
) -> StripeSet {
    let mut stripes = StripeSet::new();
    for (r, c) in requests {
        let Some(c) = c.filter(|c| c.arity_ok(r.argv().len())) else {
            continue;
        };
        if c.has(WRITE) {
            c.for_each_key(r.argv(), |k| stripes.add(k));
        } else if lock_reads {
            c.for_each_key(r.argv(), |k| stripes.add_shared(k));
        }
    }
    stripes
}

/// How a call of [`run_segment`] ended.
enum SegmentEnd {
    /// Every command ran (or the connection is to close).
    Ran,
    /// The command at this index blocked: the batch ended there.
    Blocked(usize),
    /// Nothing ran: a lock it needs is held elsewhere and the session must not wait.
    Busy {
        /// [`Store::lock_releases`](crate::store::Store::lock_releases) before the locks were
        /// tried; `None` for a batch that needs the whole keyspace.
        releases: Option<u64>,
    },
}

/// Runs consecutive ordinary commands as one batch.
fn run_segment(
    shared: &Shared,
    session: &mut Session,
    requests: &[Request],
    resolved: &[Option<usize>],
    out: &mut BytesMut,
) -> SegmentEnd {
    let store = &shared.store;
    let commands = || {
        requests
            .iter()
            .zip(resolved.iter().map(|c| c.map(|c| &COMMANDS[c])))
    };
    let exclusive = resolved.len() == 1 && resolved[0].is_some_and(|c| COMMANDS[c].has(EXCLUSIVE));
    // A cluster node's batch holds its locks until its Raft entry is applied, milliseconds:
    // waiting for one there is never short.
    let lock_wait = if store.replica().is_some() {
        std::time::Duration::ZERO
    } else {
        LOCK_WAIT
    };
    let releases = store.lock_releases();
    let mut txn = if exclusive && session.authenticated {
        if session.must_not_wait {
            match store.exclusive_txn_until(Instant::now() + lock_wait) {
                Some(txn) => txn,
                None => return SegmentEnd::Busy { releases: None },
            }
        } else {
            store.exclusive_txn()
        }
    } else if session.must_not_wait {
        match store.txn_until(&stripes_of(commands(), false), Instant::now() + lock_wait) {
            Some(txn) => txn,
            None => {
                return SegmentEnd::Busy {
                    releases: Some(releases),
                }
            }
        }
    } else {
        store.txn(&stripes_of(commands(), false))
    };
    txn.select(session.db);
    if session.authenticated {
        read_ahead(&mut txn, requests, resolved);
    }
    let limit = shared.config.client_output_buffer_limit;
    let mut ran = 0;
    let mut blocked = None;
    // One clock reading per command: each command's latency runs from the previous reading.
    let mut clock = Instant::now();
    for (i, (request, command)) in requests.iter().zip(resolved).enumerate() {
        if session.after != After::Continue {
            break;
        }
        let mark = Mark {
            out_len: out.len(),
            command: i,
        };
        txn.mark(mark);
        run_one(
            shared, session, &mut txn, request, *command, out, &mut clock, false,
        );
        ran = i + 1;
        if let Some((failed, e)) = txn.take_failure() {
            replace_with_errors(session, out, failed, i + 1, &e);
        }
        if out.len() > limit {
            out.truncate(mark.out_len);
            CmdError::msg("ERR reply exceeds client-output-buffer-limit; closing the connection")
                .write(out, session.version);
            session.after = After::Close;
        }
        if session.blocked.is_some() {
            blocked = Some(i);
            break;
        }
    }
    finish(shared, session, txn, out, ran);
    blocked.map_or(SegmentEnd::Ran, SegmentEnd::Blocked)
}

/// Commits a batch, reports a failed commit in the replies of the commands it carried, deletes
/// the keys it found expired and serves the clients blocked on keys it filled.
///
/// On a cluster node, a batch that must not wait leaves its commit in `session.pending`, its
/// locks handed to its Raft entry, and returns at once (see [`settle`]).
fn finish(
    shared: &Shared,
    session: &mut Session,
    mut txn: Txn<'_>,
    out: &mut BytesMut,
    ran: usize,
) {
    let committed = if session.must_not_wait {
        match txn.commit_deferred() {
            Ok(Some(deferred)) => {
                session.pending = Some(PendingCommit {
                    deferred,
                    ran,
                    expired: txn.take_expired(),
                    ready: txn.take_ready(),
                });
                return;
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        }
    } else {
        txn.commit()
    };
    if committed.is_err() {
        if let Some((failed, e)) = txn.take_failure() {
            replace_with_errors(session, out, failed, ran, &e);
        }
    }
    let expired = txn.take_expired();
    let ready = txn.take_ready();
    drop(txn);
    after_commit(shared, expired, ready);
}

/// What follows every commit once the batch's locks are released.
fn after_commit(shared: &Shared, expired: Vec<(u8, Vec<u8>)>, ready: Vec<(u8, Vec<u8>)>) {
    // A cluster follower leaves expired keys to the leader, whose deletions replicate.
    if !expired.is_empty() && shared.store.accepts_writes() {
        match expiry::delete_expired(&shared.store, &expired) {
            Ok(n) => add(&shared.metrics.expired_keys, n as u64),
            Err(e) => tracing::warn!(error = ?e, "deleting expired keys failed"),
        }
    }
    if !ready.is_empty() {
        shared.blocked.serve(shared, ready);
    }
}

/// Below this many keys a batch reads them one by one: a lone lookup has no other lookup to
/// overlap.
const MIN_READ_AHEAD_KEYS: usize = 2;

/// Reads ahead the meta records of the keys the batch's commands name, in order (see
/// [`Txn::read_ahead_meta`]). A write command's keys are locked by this batch, so what is read
/// ahead for them stays current until the batch itself writes them.
fn read_ahead(txn: &mut Txn<'_>, requests: &[Request], resolved: &[Option<usize>]) {
    let mut keys: Vec<&[u8]> = Vec::with_capacity(requests.len());
    for (r, c) in requests.iter().zip(resolved) {
        let Some(c) = c.map(|c| &COMMANDS[c]) else {
            continue;
        };
        if c.has(READONLY | WRITE) && !c.has(EXCLUSIVE) && c.arity_ok(r.argv().len()) {
            c.for_each_key(r.argv(), |k| {
                if k.len() <= MAX_KEY_LEN {
                    keys.push(k);
                }
            });
        }
    }
    if keys.len() < MIN_READ_AHEAD_KEYS {
        return;
    }
    txn.read_ahead_meta(keys.into_iter());
    let elements: Vec<ElementReads<'_>> = requests
        .iter()
        .zip(resolved)
        .filter_map(|(r, c)| {
            let c = &COMMANDS[(*c)?];
            (c.has(WRITE) && c.arity_ok(r.argv().len()))
                .then(|| element_reads(c.name, r.argv()))
                .flatten()
        })
        .collect();
    if !elements.is_empty() {
        txn.read_ahead_elements(&elements);
    }
}

/// The elements a write command names in its collection, whose records it reads to learn which
/// exist (see [`Txn::read_ahead_elements`]); `None` for other commands. Only a hint: a command
/// whose arguments turn out wrong reads nothing, and what was read for it is dropped.
fn element_reads<'r>(name: &str, argv: &'r [bytes::Bytes]) -> Option<ElementReads<'r>> {
    let args = |from: usize, step: usize| -> Vec<&'r [u8]> {
        argv.iter()
            .skip(from)
            .step_by(step)
            .map(|a| a.as_ref())
            .collect()
    };
    let (kind, names) = match name {
        "hset" | "hmset" => (Kind::Hash, args(2, 2)),
        "hsetnx" => (Kind::Hash, args(2, 3)),
        "hdel" => (Kind::Hash, args(2, 1)),
        "sadd" | "srem" => (Kind::Set, args(2, 1)),
        "zrem" => (Kind::ZSet, args(2, 1)),
        "zincrby" => (Kind::ZSet, args(3, 1)),
        "zadd" => {
            const FLAGS: [&[u8]; 6] = [b"nx", b"xx", b"gt", b"lt", b"ch", b"incr"];
            let flags = argv
                .iter()
                .skip(2)
                .take_while(|a| FLAGS.iter().any(|f| a.eq_ignore_ascii_case(f)))
                .count();
            (Kind::ZSet, args(3 + flags, 2))
        }
        _ => return None,
    };
    Some(ElementReads {
        key: argv.get(1)?.as_ref(),
        kind,
        names,
    })
}

/// Replaces the replies of commands `failed.command..end` with the commit error: their writes
/// were not applied.
fn replace_with_errors(
    session: &Session,
    out: &mut BytesMut,
    failed: Mark,
    end: usize,
    e: &shale::Error,
) {
    out.truncate(failed.out_len);
    for _ in failed.command..end {
        CmdError::Engine(e.clone()).write(out, session.version);
    }
}

/// The checks every command passes before its handler: authentication, arity, key length.
fn precheck(session: &Session, c: &Command, argv: &[bytes::Bytes]) -> Result<(), CmdError> {
    if !session.authenticated && !c.has(NO_AUTH) {
        Err(CmdError::msg("NOAUTH Authentication required."))
    } else if !c.arity_ok(argv.len()) {
        Err(commands::wrong_arity(c.name))
    } else if too_long(c, argv) {
        Err(CmdError::msg(KEY_TOO_LONG))
    } else {
        Ok(())
    }
}

/// Whether a key argument of `argv` is over [`MAX_KEY_LEN`].
pub(crate) fn too_long(c: &Command, argv: &[bytes::Bytes]) -> bool {
    let mut long = false;
    c.for_each_key(argv, |k| long |= k.len() > MAX_KEY_LEN);
    long
}

/// Runs one command, appending its reply. `clock` is the previous clock reading: the command's
/// latency runs from it, and it moves to the command's end. `in_exec`: the command runs inside
/// EXEC (it never blocks).
#[allow(clippy::too_many_arguments)]
fn run_one<'a>(
    shared: &'a Shared,
    session: &mut Session,
    txn: &mut Txn<'a>,
    request: &Request,
    command: Option<usize>,
    out: &mut BytesMut,
    clock: &mut Instant,
    in_exec: bool,
) {
    let argv = request.argv();
    let Some(index) = command else {
        add(&shared.metrics.unknown_commands, 1);
        commands::unknown_command(argv).write(out, session.version);
        return;
    };
    let c = &COMMANDS[index];
    let result = precheck(session, c, argv).and_then(|()| {
        txn.select(session.db);
        let mut ctx = Ctx {
            txn,
            session,
            shared,
            out,
            in_exec,
        };
        let r = (c.run)(&mut ctx, argv);
        let now = Instant::now();
        shared.metrics.commands[index]
            .latency
            .observe(now.saturating_duration_since(*clock));
        *clock = now;
        r
    });
    let stats = &shared.metrics.commands[index];
    stats.calls.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = result {
        stats.errors.fetch_add(1, Ordering::Relaxed);
        e.write(out, session.version);
    }
}

/// Releases what a closing connection holds: its WATCHes and a blocked command's registration.
pub fn end_session(shared: &Shared, session: &mut Session) {
    multi::unwatch_all(shared, session);
    if let Some(b) = session.blocked.take() {
        b.cancel(shared);
    }
}
