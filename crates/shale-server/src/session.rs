//! Per-connection state: protocol version, authentication, selected database, client name, the
//! MULTI queue and WATCHed keys, a blocked command's wait, and what the connection should do
//! after the current batch.

use crate::exec::blocking::Blocking;
use crate::store::watch::WatchFlag;
use bytes::Bytes;
use shale_proto::resp::{Request, Version};
use std::sync::Arc;

/// What the connection does after writing the batch's replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum After {
    /// Keep reading.
    #[default]
    Continue,
    /// Close the connection (QUIT, a protocol error, an output limit).
    Close,
    /// Close the connection and shut the server down (SHUTDOWN).
    Shutdown,
}

/// A transaction being queued (between MULTI and EXEC).
#[derive(Debug, Default)]
pub struct Multi {
    /// The queued commands.
    pub queued: Vec<Request>,
    /// A command failed to queue: EXEC answers EXECABORT.
    pub aborted: bool,
}

/// A WATCHed key: logical db, key, and whether it was already expired when watched.
pub type Watched = (u8, Vec<u8>, bool);

/// See the module documentation.
pub struct Session {
    /// The connection's id (CLIENT ID).
    pub id: u64,
    /// RESP2 until `HELLO 3`.
    pub version: Version,
    /// Whether `AUTH` succeeded (always true on a server without a password).
    pub authenticated: bool,
    /// The selected logical database (SELECT).
    pub db: u8,
    /// CLIENT SETNAME.
    pub name: Option<Bytes>,
    /// CLIENT SETINFO LIB-NAME.
    pub lib_name: Option<Bytes>,
    /// CLIENT SETINFO LIB-VER.
    pub lib_ver: Option<Bytes>,
    /// The peer's address.
    pub peer: String,
    /// Set by commands that end the connection.
    pub after: After,
    /// Failed `AUTH` attempts on this connection: each delays the replies (see
    /// [`Session::auth_delay`]).
    pub auth_failures: u32,
    /// The open transaction, between MULTI and EXEC or DISCARD.
    pub multi: Option<Multi>,
    /// WATCHed keys.
    pub watched: Vec<Watched>,
    /// Set when a WATCHed key is modified.
    pub watch_flag: Arc<WatchFlag>,
    /// The wait of a blocked command (BLPOP, ...), set by the command, taken by the connection.
    pub blocked: Option<Blocking>,
    /// `READONLY`: on a cluster node, reads run here even when it is a follower (possibly
    /// stale) instead of going to the leader.
    pub readonly: bool,
    /// Set while the connection runs a batch on its own thread, which serves other connections
    /// too: a batch whose key locks are held by another batch then stops with
    /// [`Outcome::Busy`](crate::exec::Outcome::Busy) instead of waiting; on a cluster node its
    /// commit does not wait for its Raft entry either, but leaves it in `pending`.
    pub must_not_wait: bool,
    /// A cluster node's commit queued on the Raft log and not yet applied: the connection awaits
    /// it ([`crate::exec::settle`]) before it answers or runs anything else.
    pub pending: Option<crate::exec::PendingCommit>,
}

/// The delay after a connection's first failed `AUTH`; each later failure doubles it.
pub const AUTH_FAILURE_DELAY: std::time::Duration = std::time::Duration::from_millis(50);
/// The longest delay after a failed `AUTH`.
pub const MAX_AUTH_FAILURE_DELAY: std::time::Duration = std::time::Duration::from_secs(2);

impl Session {
    /// A new connection's state.
    pub fn new(id: u64, peer: String, needs_auth: bool) -> Session {
        Session {
            id,
            version: Version::Resp2,
            authenticated: !needs_auth,
            db: 0,
            name: None,
            lib_name: None,
            lib_ver: None,
            peer,
            after: After::Continue,
            auth_failures: 0,
            multi: None,
            watched: Vec::new(),
            watch_flag: Arc::new(WatchFlag::default()),
            blocked: None,
            readonly: false,
            must_not_wait: false,
            pending: None,
        }
    }

    /// How long the replies wait after the connection's `failures`-th failed `AUTH`:
    /// [`AUTH_FAILURE_DELAY`] doubled per earlier failure, at most [`MAX_AUTH_FAILURE_DELAY`]. A
    /// password guesser on one connection gets a few dozen tries a minute; other connections are
    /// not slowed (the wait does not block the connection's thread).
    pub fn auth_delay(failures: u32) -> std::time::Duration {
        let doublings = failures.saturating_sub(1).min(16);
        AUTH_FAILURE_DELAY
            .saturating_mul(1 << doublings)
            .min(MAX_AUTH_FAILURE_DELAY)
    }
}
