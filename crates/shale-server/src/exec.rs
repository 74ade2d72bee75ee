//! The batch executor: runs every request decoded from one read of a connection as one batch.
//!
//! The batch locks the stripes of every key its write commands name, runs the commands in order
//! (each writes its reply into the connection's output buffer), and commits their writes as one
//! engine `WriteBatch`; the connection then sends every reply with one write. A command that
//! needs the whole keyspace (FLUSHDB) splits the batch: the commands before it commit first, it
//! runs alone, and the rest form a new batch.
//!
//! This module knows nothing of sockets or RESP framing: it takes decoded requests and appends
//! replies, so a second protocol front end (Mega-KV's binary protocol) can drive the same store
//! through its own executor beside this one.

use crate::commands::{self, CmdError, Ctx, COMMANDS, EXCLUSIVE, NO_AUTH, READONLY, WRITE};
use crate::config::MAX_KEY_LEN;
use crate::metrics::add;
use crate::session::{After, Session};
use crate::shared::Shared;
use crate::store::{expiry, Mark, StripeSet, Txn};
use bytes::BytesMut;
use shale_proto::resp::Request;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The error for a key over [`MAX_KEY_LEN`].
pub const KEY_TOO_LONG: &str = "ERR key is too long (Shale keys are at most 67108800 bytes)";

/// Whether any of `requests` names a command that writes (under `appendfsync always` such a
/// batch waits for an fsync; a batch of reads does not).
pub fn writes_anything(requests: &[Request]) -> bool {
    requests
        .iter()
        .any(|r| commands::lookup(r.name()).is_some_and(|c| COMMANDS[c].has(WRITE)))
}

/// Runs `requests` in order, appending one reply per request to `out` (fewer when a command
/// ends the connection: QUIT, SHUTDOWN, the output limit).
pub fn execute(shared: &Shared, session: &mut Session, requests: &[Request], out: &mut BytesMut) {
    add(&shared.metrics.batches, 1);
    add(&shared.metrics.batched_requests, requests.len() as u64);
    let resolved: Vec<Option<usize>> = requests
        .iter()
        .map(|r| commands::lookup(r.name()))
        .collect();
    let mut start = 0;
    while start < requests.len() && session.after == After::Continue {
        let exclusive = |i: usize| resolved[i].is_some_and(|c| COMMANDS[c].has(EXCLUSIVE));
        let end = if exclusive(start) {
            start + 1
        } else {
            (start..requests.len())
                .find(|&i| exclusive(i))
                .unwrap_or(requests.len())
        };
        run_segment(
            shared,
            session,
            &requests[start..end],
            &resolved[start..end],
            out,
        );
        start = end;
    }
}

fn run_segment(
    shared: &Shared,
    session: &mut Session,
    requests: &[Request],
    resolved: &[Option<usize>],
    out: &mut BytesMut,
) {
    let store = &shared.store;
    let exclusive = resolved.len() == 1 && resolved[0].is_some_and(|c| COMMANDS[c].has(EXCLUSIVE));
    let mut txn = if exclusive && session.authenticated {
        store.exclusive_txn()
    } else {
        let mut stripes = StripeSet::new();
        for (r, c) in requests.iter().zip(resolved) {
            if let Some(c) = c.map(|c| &COMMANDS[c]) {
                if c.has(WRITE) && c.arity_ok(r.argv().len()) {
                    if c.writes_blindly(r.argv()) {
                        c.keys(r.argv()).for_each(|k| stripes.add_shared(k));
                    } else {
                        c.keys(r.argv()).for_each(|k| stripes.add(k));
                    }
                }
            }
        }
        store.txn(&stripes)
    };
    if session.authenticated {
        read_ahead(&mut txn, requests, resolved);
    }
    let limit = shared.config.client_output_buffer_limit;
    let mut ran = 0;
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
            shared, session, &mut txn, request, *command, out, &mut clock,
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
    }
    if txn.commit().is_err() {
        if let Some((failed, e)) = txn.take_failure() {
            replace_with_errors(session, out, failed, ran, &e);
        }
    }
    let expired = txn.take_expired();
    drop(txn);
    if !expired.is_empty() {
        match expiry::delete_expired(store, &expired) {
            Ok(n) => add(&shared.metrics.expired_keys, n as u64),
            Err(e) => tracing::warn!(error = %e, "deleting expired keys failed"),
        }
    }
}

/// Below this many keys named by read commands a batch reads them one by one: a lone lookup has
/// no other lookup to overlap.
const MIN_READ_AHEAD_KEYS: usize = 2;

/// Reads ahead the meta records of the keys that the batch's read-only commands name (see
/// [`Txn::read_ahead_meta`]).
fn read_ahead(txn: &mut Txn<'_>, requests: &[Request], resolved: &[Option<usize>]) {
    let keys = || {
        requests
            .iter()
            .zip(resolved)
            .filter_map(|(r, c)| {
                let c = &COMMANDS[(*c)?];
                (c.has(READONLY) && c.arity_ok(r.argv().len())).then(|| c.keys(r.argv()))
            })
            .flatten()
            .filter(|k| k.len() <= MAX_KEY_LEN)
    };
    if keys().nth(MIN_READ_AHEAD_KEYS - 1).is_some() {
        txn.read_ahead_meta(keys().map(|k| &k[..]));
    }
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

/// Runs one command, appending its reply. `clock` is the previous clock reading: the command's
/// latency runs from it, and it moves to the command's end.
fn run_one<'a>(
    shared: &'a Shared,
    session: &mut Session,
    txn: &mut Txn<'a>,
    request: &Request,
    command: Option<usize>,
    out: &mut BytesMut,
    clock: &mut Instant,
) {
    let argv = request.argv();
    let Some(index) = command else {
        add(&shared.metrics.unknown_commands, 1);
        commands::unknown_command(argv).write(out, session.version);
        return;
    };
    let c = &COMMANDS[index];
    let result = if !session.authenticated && !c.has(NO_AUTH) {
        Err(CmdError::msg("NOAUTH Authentication required."))
    } else if !c.arity_ok(argv.len()) {
        Err(commands::wrong_arity(c.name))
    } else if c.keys(argv).any(|k| k.len() > MAX_KEY_LEN) {
        Err(CmdError::msg(KEY_TOO_LONG))
    } else {
        let mut ctx = Ctx {
            txn,
            session,
            shared,
            out,
        };
        let r = (c.run)(&mut ctx, argv);
        let now = Instant::now();
        shared.metrics.commands[index]
            .latency
            .observe(now.saturating_duration_since(*clock));
        *clock = now;
        r
    };
    let stats = &shared.metrics.commands[index];
    stats.calls.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = result {
        stats.errors.fetch_add(1, Ordering::Relaxed);
        e.write(out, session.version);
    }
}
