//! The public error type.
//!
//! Errors follow a simple contract: a coarse [`ErrorKind`] that tells the caller what to do, and a
//! message rich enough for a human (file names and offsets for corruption). "Not found" is never an
//! error: lookups return `Ok(None)`.

use std::fmt;
use std::path::Path;

/// What went wrong, at the granularity a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The operating system reported an I/O failure (including a full disk). Retrying may help.
    Io,
    /// Bytes read from disk failed validation. The message names the file and the offset.
    Corruption,
    /// The caller passed something the engine cannot accept (oversized key, bad option, ...).
    InvalidArgument,
    /// The operation is not supported by this build or configuration.
    NotSupported,
    /// The database was closed.
    Closed,
    /// An earlier failure (for example a failed fsync) left the database unable to guarantee
    /// durability; every later write fails with this kind. Reopen the database to recover.
    Poisoned,
    /// A resource is held by someone else (for example the directory lock of another process).
    Busy,
}

/// The error returned by every fallible Shale operation.
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    /// The raw OS error kind when the error came from the file system.
    io_kind: Option<std::io::ErrorKind>,
    /// Set on failures after which durability is uncertain (a MANIFEST write): never handled as a
    /// mere lack of space, whatever the OS error.
    fatal: bool,
}

/// Shorthand for `std::result::Result<T, shale::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Creates an error of `kind` with a human-readable `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            io_kind: None,
            fatal: false,
        }
    }

    /// A `Corruption` error naming the file and the byte offset where validation failed.
    pub fn corruption(file: &Path, offset: u64, what: impl fmt::Display) -> Error {
        Error::new(
            ErrorKind::Corruption,
            format!("{}: offset {offset}: {what}", file.display()),
        )
    }

    /// An `InvalidArgument` error.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// An `Io` error with the operation and path that failed.
    pub fn io(err: std::io::Error, what: impl fmt::Display) -> Error {
        Error {
            kind: ErrorKind::Io,
            message: format!("{what}: {err}"),
            io_kind: Some(err.kind()),
            fatal: false,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The operating system's error kind, when this error came from the file system.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.io_kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with `context` prepended to the message.
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// The same error re-labelled as `Poisoned`, used when a failure makes durability uncertain.
    pub(crate) fn into_poisoned(self) -> Error {
        Error {
            kind: ErrorKind::Poisoned,
            message: format!("database poisoned by an earlier failure: {}", self.message),
            io_kind: self.io_kind,
            fatal: true,
        }
    }

    /// The same error with `dir/` taken out of its message, so that the files it names read
    /// relative to the data directory (`000012.log`, not an absolute path).
    pub(crate) fn relative_to(mut self, dir: &Path) -> Error {
        let prefix = format!("{}/", dir.display());
        if prefix.len() > 1 && self.message.contains(&prefix) {
            self.message = self.message.replace(&prefix, "");
        }
        self
    }

    /// The same error marked as one after which durability is uncertain (see `fatal`).
    pub(crate) fn fatal(mut self) -> Error {
        self.fatal = true;
        self
    }

    /// True for an error marked [`Error::fatal`].
    pub(crate) fn is_fatal(&self) -> bool {
        self.fatal
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        let kind = e.io_kind.unwrap_or(match e.kind {
            ErrorKind::Corruption => std::io::ErrorKind::InvalidData,
            ErrorKind::InvalidArgument => std::io::ErrorKind::InvalidInput,
            ErrorKind::NotSupported => std::io::ErrorKind::Unsupported,
            ErrorKind::Busy => std::io::ErrorKind::WouldBlock,
            _ => std::io::ErrorKind::Other,
        });
        std::io::Error::new(kind, e)
    }
}

/// Attaches a description of the failed operation to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::io(e, what()))
    }
}
