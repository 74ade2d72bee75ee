//! What the log carries: the commands every replica applies in log order.
//!
//! | command | applied on every node |
//! |---|---|
//! | `Write(batch)` | into the active memtable, under the sequence numbers after the last one |
//! | `SwitchMemtable` | seals the active memtable: boundaries are identical everywhere |
//!
//! The leader decides when to seal (its memtable reached the engine's `write_buffer_size`); no
//! node seals on its own. RubbleDB's `InstallEdit { inputs, outputs, flushed_upto }` (files
//! compacted once by the leader and shipped) will be the next variant: serialized variants are
//! numbered in order, so adding one at the end keeps every stored entry readable.
//!
//! Encoding: bincode of [`Command`] inside the log record (see `log::format`). Do not reorder
//! the variants: stored entries name them by position.

use serde::{Deserialize, Serialize};

/// One command of the replicated log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// The bytes of one engine `WriteBatch` ([`shale::WriteBatch::data`]): the batches of many
    /// clients merged by the leader's group commit.
    Write(Vec<u8>),
    /// Seal the active memtable at this entry.
    SwitchMemtable,
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Write(data) => write!(f, "Write({} bytes)", data.len()),
            Command::SwitchMemtable => write!(f, "SwitchMemtable"),
        }
    }
}
