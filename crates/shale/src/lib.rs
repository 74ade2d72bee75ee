//! Shale: a persistent key-value store.
//!
//! This crate is the embedded engine: an LSM tree with a write-ahead log, memtables, sorted string
//! tables (SSTs) in levels, background flushes and compactions, snapshots and double-ended iterators.
//! See `docs/design/` in the repository for the decisions behind it and `docs/format/` for the bytes
//! of every file.

mod batch;
mod blob;
mod blob_file_cache;
mod cache;
mod compaction;
mod db;
mod error;
mod filename;
pub mod fs;
#[doc(hidden)]
pub mod fuzz_api;
mod gc;
pub mod iter;
mod key;
pub mod memtable;
mod options;
mod sst;
mod table_cache;
mod varint;
mod version;
mod wal;

pub use batch::WriteBatch;
pub use db::{
    file_number, Checkpoint, Db, InstallEdit, InstallOutcome, KeyRange, LogPosition, OutputFile,
    PreparedWrite, Snapshot, Stats, RETIRED_DIR, STAGING_DIR,
};
pub use error::{Error, ErrorKind, Result};
pub use iter::{Skipped, SkippedKind};
pub use key::{SeqNo, ValueKind};
pub use options::*;
