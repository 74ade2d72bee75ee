//! Per-connection state: protocol version, authentication, client name, and what the connection
//! should do after the current batch.

use bytes::Bytes;
use shale_proto::resp::Version;

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

/// See the module documentation.
#[derive(Debug)]
pub struct Session {
    /// The connection's id (CLIENT ID).
    pub id: u64,
    /// RESP2 until `HELLO 3`.
    pub version: Version,
    /// Whether `AUTH` succeeded (always true on a server without a password).
    pub authenticated: bool,
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
            name: None,
            lib_name: None,
            lib_ver: None,
            peer,
            after: After::Continue,
            auth_failures: 0,
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
