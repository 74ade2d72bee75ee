//! Shale's cache mode: a memcached-class in-memory cache built the way Mega-KV (VLDB'15) builds
//! one. Connection threads parse requests and hash keys; a scheduler gathers every thread's jobs
//! into batches of searches, inserts and deletes; an index engine behind [`index::BatchIndex`]
//! (the CPU, or a GPU) runs them; replies are built from the located items after their keys are
//! verified, so a signature collision is a miss, never a wrong value.
//!
//! `docs/design/` in the repository records the decisions behind it.

pub mod cache;
pub mod epoch;
pub mod index;
pub mod item;
pub mod net;
pub mod op;
pub mod proto;
pub mod region;
mod sched;
pub mod slab;
pub mod stats;

pub use cache::{Cache, CacheConfig, StoreError, Worker};
pub use net::{Server, ServerConfig};
pub use op::{IncrStyle, OpId, Outcome, SetMode, KEEP_EXPIRY};
