//! The harness's error type.
//!
//! Every failure the harness reports to a person goes through [`Error`]: bad command lines,
//! bad properties, unreadable files, backend failures. The message is complete on its own (it
//! names the property, file, line or backend involved), so `main` only has to print it.

use std::fmt;

/// What went wrong, coarsely: it decides the exit status and the prefix of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command line is malformed (unknown flag, missing argument).
    Usage,
    /// A property is unknown, or its value is malformed or out of range.
    Property,
    /// A file could not be read or written.
    Io,
    /// The backend (the engine under test) failed.
    Backend,
    /// A trace or other input file is malformed.
    Input,
    /// A value read back did not match what was written (`-p verify=true`).
    Verify,
}

/// An error with a kind and a complete, human-readable message.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

/// Result alias used throughout the harness.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Creates an error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// A malformed command line.
    pub fn usage(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Usage, message)
    }

    /// A bad or unknown property.
    pub fn property(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Property, message)
    }

    /// A failed file operation; `context` says what was being done.
    pub fn io(context: impl fmt::Display, err: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, format!("{context}: {err}"))
    }

    /// A failure of the engine under test.
    pub fn backend(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Backend, message)
    }

    /// A malformed input file (trace, result file).
    pub fn input(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Input, message)
    }

    /// A value that did not verify.
    pub fn verify(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Verify, message)
    }

    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without a kind prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
