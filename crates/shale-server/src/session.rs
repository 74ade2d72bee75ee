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
}

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
        }
    }
}
