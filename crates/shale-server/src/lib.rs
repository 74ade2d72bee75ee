//! Shale's network server: the Redis protocol (RESP2 and RESP3, pipelined) over the Shale
//! engine. The binary is `shale` (`shale serve`).
//!
//! Layout, one concept per module:
//! - `config`: settings, the TOML file and their defaults; `fdlimit`: fitting them into the
//!   open-file limit.
//! - `server`: the server's life (open, bind, accept, background tasks, shutdown); `shutdown`:
//!   signals.
//! - `connection`: one RESP connection (read, decode, execute, write).
//! - `exec`: runs a pipeline batch of requests against the store (protocol independent).
//! - `commands`: the command table and one module per family of commands.
//! - `store`: Redis types over the ordered engine (`store::format` holds the byte layout),
//!   striped key locks, expiry.
//! - `session`, `shared`: per-connection and server-wide state.
//! - `info`, `metrics`: INFO and the Prometheus endpoint.
//! - `alloc`: the binary's memory allocator (large blocks straight from the system).
//!
//! `docs/design/0005-server.md` explains the decisions.

pub mod alloc;
pub mod cache_mode;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod connection;
pub mod damage;
pub mod exec;
pub mod fdlimit;
pub mod info;
pub mod metrics;
pub mod server;
pub mod session;
pub mod shared;
pub mod shutdown;
pub mod store;

pub use config::{Appendfsync, Config};
pub use server::run;
