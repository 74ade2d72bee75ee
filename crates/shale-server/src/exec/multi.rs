//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH (and RESET), with Redis's semantics.
//!
//! Between MULTI and EXEC every command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is
//! checked (known, arity, authenticated, key length) and queued: `+QUEUED`. A command that fails
//! the check is answered with its error and marks the transaction, whose EXEC then answers
//! `EXECABORT` and runs nothing. EXEC runs the queue as one batch: it locks the stripes of every
//! key the queued commands write (exclusive) and read (shared) and of every WATCHed key (shared),
//! then checks WATCH — a watched key modified since WATCH (by anyone, this client included),
//! or expired since, makes EXEC answer a null array and run nothing — then runs the commands in
//! order into one `WriteBatch`, committed once: either every write of the transaction reaches the
//! engine (and survives a crash) or none does. A command that fails at run time (WRONGTYPE) gets
//! its error in EXEC's reply; the others still apply, as in Redis. Blocking commands inside EXEC
//! answer at once. EXEC, DISCARD and a closed connection forget every WATCH.

use super::{after_commit, run_one, stripes_of};
use crate::commands::{self, CmdError, Command, COMMANDS, EXCLUSIVE, NO_AUTH};
use crate::session::{After, Multi, Session};
use crate::shared::Shared;
use crate::store::{Mark, StripeSet};
use bytes::{Bytes, BytesMut};
use shale_proto::resp::{ReplyWriter, Request};
use std::time::Instant;

/// Whether command `c` runs at once inside MULTI rather than being queued.
pub fn runs_in_multi(c: Option<&Command>) -> bool {
    c.is_some_and(|c| {
        matches!(
            c.name,
            "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
        )
    })
}

/// Queues `request` in the open transaction, or answers the error that aborts it.
pub fn queue(
    session: &mut Session,
    request: &Request,
    command: Option<&Command>,
    out: &mut BytesMut,
) {
    let argv = request.argv();
    let check = match command {
        None => Err(commands::unknown_command(argv)),
        Some(c) if !session.authenticated && !c.has(NO_AUTH) => {
            Err(CmdError::msg("NOAUTH Authentication required."))
        }
        Some(c) if !c.arity_ok(argv.len()) => Err(commands::wrong_arity(c.name)),
        Some(c) if super::too_long(c, argv) => Err(CmdError::msg(super::KEY_TOO_LONG)),
        Some(_) => Ok(()),
    };
    let multi = session.multi.get_or_insert_with(Multi::default);
    match check {
        Ok(()) => {
            multi.queued.push(request.clone());
            ReplyWriter::new(out, session.version).simple(b"QUEUED");
        }
        Err(e) => {
            multi.aborted = true;
            e.write(out, session.version);
        }
    }
}

/// Runs a transaction command.
pub fn control(
    shared: &Shared,
    session: &mut Session,
    c: &Command,
    argv: &[Bytes],
    out: &mut BytesMut,
) {
    if let Err(e) = check(session, c, argv) {
        if let Some(m) = session.multi.as_mut() {
            m.aborted = true;
        }
        e.write(out, session.version);
        return;
    }
    let version = session.version;
    let reply = |out: &mut BytesMut, r: Result<&[u8], CmdError>| match r {
        Ok(line) => ReplyWriter::new(out, version).simple(line),
        Err(e) => e.write(out, version),
    };
    match c.name {
        "multi" => {
            if session.multi.is_some() {
                reply(out, Err(CmdError::msg("ERR MULTI calls can not be nested")));
            } else {
                session.multi = Some(Multi::default());
                reply(out, Ok(b"OK"));
            }
        }
        "discard" => {
            if session.multi.take().is_none() {
                reply(out, Err(CmdError::msg("ERR DISCARD without MULTI")));
            } else {
                unwatch_all(shared, session);
                reply(out, Ok(b"OK"));
            }
        }
        "exec" => match session.multi.take() {
            None => reply(out, Err(CmdError::msg("ERR EXEC without MULTI"))),
            Some(m) if m.aborted => {
                unwatch_all(shared, session);
                reply(
                    out,
                    Err(CmdError::msg(
                        "EXECABORT Transaction discarded because of previous errors.",
                    )),
                );
            }
            Some(m) => exec(shared, session, &m.queued, out),
        },
        "watch" => {
            if session.multi.is_some() {
                reply(
                    out,
                    Err(CmdError::msg("ERR WATCH inside MULTI is not allowed")),
                );
            } else {
                match watch(shared, session, &argv[1..]) {
                    Ok(()) => reply(out, Ok(b"OK")),
                    Err(e) => reply(out, Err(e)),
                }
            }
        }
        "unwatch" => {
            unwatch_all(shared, session);
            reply(out, Ok(b"OK"));
        }
        "reset" => {
            session.multi = None;
            unwatch_all(shared, session);
            session.db = 0;
            session.version = shale_proto::resp::Version::Resp2;
            session.name = None;
            session.readonly = false;
            session.authenticated = shared.config.requirepass.is_none();
            reply(out, Ok(b"RESET"));
        }
        _ => reply(out, Err(CmdError::msg("ERR unknown transaction command"))),
    }
}

fn check(session: &Session, c: &Command, argv: &[Bytes]) -> Result<(), CmdError> {
    if !session.authenticated && !c.has(NO_AUTH) {
        return Err(CmdError::msg("NOAUTH Authentication required."));
    }
    if !c.arity_ok(argv.len()) {
        return Err(commands::wrong_arity(c.name));
    }
    Ok(())
}

/// WATCH: registers `keys` of the current database.
fn watch(shared: &Shared, session: &mut Session, keys: &[Bytes]) -> Result<(), CmdError> {
    let store = &shared.store;
    // Registered under the keys' locks: a batch writing one of them either committed before
    // (the client's next read sees it) or stages its write after, when it sees the watcher and
    // reports the key at its commit. Without the lock, a batch that looked for watchers before
    // this registration could commit after the client's read, unreported: a lost update.
    let mut stripes = StripeSet::new();
    for key in keys {
        stripes.add_shared(key);
    }
    let mut txn = store.txn(&stripes);
    txn.select(session.db);
    let physical = txn.physical();
    let now = txn.now_ms();
    for key in keys {
        if session
            .watched
            .iter()
            .any(|(db, k, _)| *db == session.db && k.as_slice() == key.as_ref())
        {
            continue;
        }
        let stale = txn
            .meta_even_expired_in(physical, key)?
            .is_some_and(|m| m.is_expired(now));
        store
            .watches
            .watch(session.db, key, &session.watch_flag, stale);
        session.watched.push((session.db, key.to_vec(), stale));
    }
    Ok(())
}

/// Forgets every key the client watches.
pub fn unwatch_all(shared: &Shared, session: &mut Session) {
    if !session.watched.is_empty() {
        let keys: Vec<(u8, Vec<u8>)> = session
            .watched
            .drain(..)
            .map(|(db, k, _)| (db, k))
            .collect();
        shared.store.watches.unwatch(&keys, &session.watch_flag);
    }
    session.watch_flag.clear();
}

/// EXEC: runs `queued` as one batch (see the module documentation).
fn exec(shared: &Shared, session: &mut Session, queued: &[Request], out: &mut BytesMut) {
    let store = &shared.store;
    let resolved: Vec<Option<usize>> = queued.iter().map(|r| commands::lookup(r.name())).collect();
    let exclusive = resolved
        .iter()
        .any(|c| c.is_some_and(|c| COMMANDS[c].has(EXCLUSIVE)));
    let mut txn = if exclusive {
        store.exclusive_txn()
    } else {
        let mut stripes = stripes_of(
            queued
                .iter()
                .zip(resolved.iter().map(|c| c.map(|c| &COMMANDS[c]))),
            true,
        );
        for (_, key, _) in &session.watched {
            stripes.add_shared(key);
        }
        store.txn(&stripes)
    };
    // WATCH: a modification set the flag under the key's lock, which we now hold.
    let now = txn.now_ms();
    let mut dirty = session.watch_flag.is_dirty();
    for (db, key, stale) in &session.watched {
        if dirty {
            break;
        }
        if !*stale {
            let physical = store.physical(*db);
            dirty =
                matches!(txn.meta_even_expired_in(physical, key), Ok(Some(m)) if m.is_expired(now));
        }
    }
    unwatch_all(shared, session);
    if dirty {
        drop(txn);
        ReplyWriter::new(out, session.version).null_array();
        return;
    }
    let start = out.len();
    ReplyWriter::new(out, session.version).array(queued.len());
    let mut clock = Instant::now();
    // A command that ends the connection (SHUTDOWN) takes effect after the whole transaction.
    let mut ending = None;
    for (i, (request, command)) in queued.iter().zip(&resolved).enumerate() {
        txn.mark(Mark {
            out_len: start,
            command: i,
        });
        if command.is_some_and(|c| COMMANDS[c].name == "unwatch") {
            ReplyWriter::new(out, session.version).ok();
            continue;
        }
        run_one(
            shared, session, &mut txn, request, *command, out, &mut clock, true,
        );
        if session.after != After::Continue {
            ending = Some(std::mem::take(&mut session.after));
        }
    }
    if let Some(after) = ending {
        session.after = after;
    }
    let failed = txn
        .commit()
        .err()
        .or_else(|| txn.take_failure().map(|(_, e)| e));
    if let Some(e) = failed {
        out.truncate(start);
        CmdError::Engine(e).write(out, session.version);
    }
    let expired = txn.take_expired();
    let ready = txn.take_ready();
    drop(txn);
    after_commit(shared, expired, ready);
}
