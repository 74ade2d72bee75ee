//! Limits on what a Mega-KV client may send.

/// Longest key: everything the 16-bit length field can say.
pub const DEFAULT_MAX_KEY_LEN: usize = u16::MAX as usize;

/// Largest value (1 MiB): Mega-KV is a cache whose slab allocator descends from memcached's,
/// whose default largest item is 1 MiB. The 32-bit field could say 4 GiB.
pub const DEFAULT_MAX_VALUE_LEN: usize = 1024 * 1024;

/// Most jobs in one batch. The reference sends one UDP datagram per batch (at most about 120
/// small jobs); over TCP a batch may be larger, but the server executes it as one unit.
pub const DEFAULT_MAX_JOBS: usize = 64 * 1024;

/// Largest batch in bytes, magic and end mark included (64 MiB).
pub const DEFAULT_MAX_BATCH_LEN: usize = 64 * 1024 * 1024;

/// What a batch (and a reply) may contain. Exceeding a limit is a [`super::MegaKvError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest key ([`DEFAULT_MAX_KEY_LEN`]).
    pub max_key_len: usize,
    /// Largest value, in a SET or in a GET reply ([`DEFAULT_MAX_VALUE_LEN`]).
    pub max_value_len: usize,
    /// Most jobs in a batch ([`DEFAULT_MAX_JOBS`]).
    pub max_jobs: usize,
    /// Largest batch in bytes ([`DEFAULT_MAX_BATCH_LEN`]).
    pub max_batch_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_len: DEFAULT_MAX_KEY_LEN,
            max_value_len: DEFAULT_MAX_VALUE_LEN,
            max_jobs: DEFAULT_MAX_JOBS,
            max_batch_len: DEFAULT_MAX_BATCH_LEN,
        }
    }
}
