//! `shale-bench`: Shale's evaluation harness.
//!
//! It follows YCSB-cpp's command line and output (so the AegonKV evaluation's scripts run
//! unchanged), runs the YCSB core workloads, the Social Graph (mixgraph) workload and Twitter
//! cache-trace replay against Shale and its peers (RocksDB plain and BlobDB, fjall) behind one
//! [`backend::Backend`] trait, and compares backends side by side over several rounds
//! (`shale-bench compare`), because the machine's capacity drifts between runs.
//!
//! Layout: `props` (configuration), `generator` and `rng` (YCSB's distributions), `record`
//! (keys and verifiable values), `workload` (what clients do), `runner` and `measure` (threads,
//! throttling, latency histograms, YCSB-cpp's lines), `backend` (engines), `app` (the main
//! mode), `compare`, `cpucheck`, `dbbench`, `large_values`, `plot`, `redis_compare`, `scan_bench` and `tracegen` (the subcommands).

pub mod app;
pub mod backend;
pub mod cache_index;
pub mod cache_load;
pub mod cli;
pub mod cluster_bench;
pub mod compare;
pub mod cpucheck;
pub mod dbbench;
pub mod error;
pub mod fmt;
pub mod generator;
pub mod large_values;
pub mod measure;
pub mod memtable_bench;
pub mod plot;
pub mod props;
pub mod record;
pub mod redis_compare;
pub mod rng;
pub mod runner;
pub mod scan_bench;
pub mod tracegen;
pub mod workload;

pub use error::{Error, ErrorKind, Result};
