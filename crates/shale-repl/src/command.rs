//! What the log carries: the commands every replica applies in log order.
//!
//! | command | applied on every node |
//! |---|---|
//! | `Write(batch)` | into the active memtable, under the sequence numbers after the last one |
//! | `SwitchMemtable` | seals the active memtable: boundaries are identical everywhere |
//! | `InstallEdit` | (rubble mode) installs the files of a flush or compaction the leader made and shipped, or is a no-op on every node when its inputs are gone |
//!
//! The leader decides when to seal (its memtable reached the engine's `write_buffer_size`); no
//! node seals on its own. Serialized variants are numbered in order: a new one goes at the end,
//! so every stored entry stays readable.
//!
//! Encoding: bincode of [`Command`] inside the log record (see `log::format`). Do not reorder
//! the variants: stored entries name them by position.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// One command of the replicated log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// The bytes of one engine `WriteBatch` ([`shale::WriteBatch::data`]): the batches of many
    /// clients merged by the leader's group commit. Shared, not copied, by the log's memory, the
    /// replication to each follower and the apply; on a follower, a slice of the frame it
    /// arrived in.
    Write(#[serde(with = "crate::byte_string::shared")] Bytes),
    /// Seal the active memtable at this entry.
    SwitchMemtable,
    /// Install the output files of a job the leader ran (see `rubble`).
    InstallEdit(EditCommand),
}

/// A `shale::InstallEdit` as the log carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditCommand {
    /// Log indexes of the `SwitchMemtable` entries that sealed the input memtables.
    pub input_memtables: Vec<u64>,
    /// SST and blob file numbers the edit removes.
    pub input_files: Vec<u64>,
    /// The files it adds: name, bytes, CRC32C.
    pub outputs: Vec<(String, u64, u32)>,
    /// The log index whose writes the files hold after the edit, for a flush.
    pub flushed_upto: Option<u64>,
    /// The engine's version edit (MANIFEST encoding).
    #[serde(with = "crate::byte_string")]
    pub edit: Vec<u8>,
    /// Every node's flushed position was past this index when the leader proposed the edit:
    /// files retired by edits up to it are dropped (`shale::Db::drop_retired`).
    pub retired_upto: u64,
}

impl EditCommand {
    /// The log's form of `e`.
    pub fn new(e: &shale::InstallEdit, retired_upto: u64) -> EditCommand {
        EditCommand {
            input_memtables: e.input_memtables.clone(),
            input_files: e.input_files.clone(),
            outputs: e
                .outputs
                .iter()
                .map(|o| (o.name.clone(), o.len, o.crc32c))
                .collect(),
            flushed_upto: e.flushed_upto,
            edit: e.edit.clone(),
            retired_upto,
        }
    }

    /// The engine's form.
    pub fn to_engine(&self) -> shale::InstallEdit {
        shale::InstallEdit {
            input_memtables: self.input_memtables.clone(),
            input_files: self.input_files.clone(),
            outputs: self
                .outputs
                .iter()
                .map(|(name, len, crc32c)| shale::OutputFile {
                    name: name.clone(),
                    len: *len,
                    crc32c: *crc32c,
                })
                .collect(),
            flushed_upto: self.flushed_upto,
            edit: self.edit.clone(),
        }
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Write(data) => write!(f, "Write({} bytes)", data.len()),
            Command::SwitchMemtable => write!(f, "SwitchMemtable"),
            Command::InstallEdit(e) => write!(
                f,
                "InstallEdit({} memtables, {} inputs, {} outputs)",
                e.input_memtables.len(),
                e.input_files.len(),
                e.outputs.len()
            ),
        }
    }
}
