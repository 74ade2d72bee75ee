//! Limits on what a client may send, with Redis's defaults.
//!
//! A server keeps one [`Limits`] per connection (it may flip [`Limits::auth_required`] once the
//! client authenticates). Every limit is checked as soon as the bytes that could break it are
//! known, so a hostile length is refused before anything is buffered or allocated for it.

/// Largest bulk string argument, in bytes: Redis's `proto-max-bulk-len` default (512 MiB).
pub const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;

/// Most arguments in one multibulk request: Redis accepts any count up to `INT_MAX`.
pub const DEFAULT_MAX_MULTIBULK_LEN: usize = i32::MAX as usize;

/// Longest inline request line and longest multibulk or bulk header line, in bytes: Redis's
/// `PROTO_INLINE_MAX_SIZE` (64 KiB).
pub const DEFAULT_MAX_INLINE_LEN: usize = 64 * 1024;

/// Largest whole request (every header, argument and terminator), in bytes: Redis's
/// `client-query-buffer-limit` default (1 GiB).
pub const DEFAULT_MAX_REQUEST_LEN: usize = 1024 * 1024 * 1024;

/// Most arguments a client that has not authenticated may send in one request (Redis: 10).
pub const UNAUTHENTICATED_MAX_MULTIBULK_LEN: usize = 10;

/// Largest argument a client that has not authenticated may send, in bytes (Redis: 16 KiB).
pub const UNAUTHENTICATED_MAX_BULK_LEN: usize = 16 * 1024;

/// Most argument slots reserved up front for a request, whatever count it announces; more are
/// allocated only as arguments actually arrive (Redis reserves the same at most).
pub(crate) const ARGV_PREALLOC_MAX: usize = 1024;

/// What a request may contain. Exceeding a limit is a [`super::ProtocolError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string argument ([`DEFAULT_MAX_BULK_LEN`]).
    pub max_bulk_len: usize,
    /// Most arguments in a multibulk request ([`DEFAULT_MAX_MULTIBULK_LEN`]).
    pub max_multibulk_len: usize,
    /// Longest inline request and longest header line ([`DEFAULT_MAX_INLINE_LEN`]).
    pub max_inline_len: usize,
    /// Largest whole request in bytes ([`DEFAULT_MAX_REQUEST_LEN`]).
    pub max_request_len: usize,
    /// While true, the tighter [`UNAUTHENTICATED_MAX_MULTIBULK_LEN`] and
    /// [`UNAUTHENTICATED_MAX_BULK_LEN`] also apply, as Redis applies them to a connection that
    /// has not passed `AUTH` on a server with a password. Default: false.
    pub auth_required: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_multibulk_len: DEFAULT_MAX_MULTIBULK_LEN,
            max_inline_len: DEFAULT_MAX_INLINE_LEN,
            max_request_len: DEFAULT_MAX_REQUEST_LEN,
            auth_required: false,
        }
    }
}
