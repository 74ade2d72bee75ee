//! The Raft log: the replica's write-ahead log (see `store`) and its bytes (see `format`).

pub(crate) mod format;
mod store;

pub use store::LogStore;
