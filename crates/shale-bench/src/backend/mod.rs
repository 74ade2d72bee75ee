//! The engines under test, behind one trait.
//!
//! A [`Backend`] is one open database shared by all client threads (`Send + Sync`). It stores
//! opaque keys and values: the workloads encode records and values before they reach it, so every
//! backend does exactly the same work per operation.
//!
//! Backends:
//! - `shale`: the embedded Shale engine (this workspace's `shale` crate).
//! - `titandb`, `diffkv`: the same engine configured by the AegonKV evaluation's Titan and DiffKV
//!   property names ([`titan_props`] translates them and the run prints the translation).
//! - `rocksdb`: RocksDB through the `rocksdb` crate, plain or with integrated BlobDB
//!   (`rocksdb.enable_blob_files=true`); cargo feature `rocksdb`.
//! - `fjall`: fjall 3, with or without key-value separation (`fjall.kv_separation`); feature `fjall`.
//! - `resp`: a server over the Redis protocol (`shale serve`), strings only, no scans.
//! - `memory`: an ordered map in memory, for testing the harness itself; a floor, not a peer.
//!
//! Each backend reads its own properties, all prefixed with its name (`rocksdb.write_buffer_size`),
//! and declares them in a [`PropSpec`] table so unknown names are caught before a run starts.
//! `<name>.dbname` is the database directory of every on-disk backend.

#[cfg(feature = "fjall")]
mod fjall_db;
mod fjall_props;
mod memory;
mod resp;
mod resp_props;
#[cfg(feature = "rocksdb")]
mod rocks;
mod rocks_props;
#[cfg(feature = "shale-engine")]
pub mod shale_db;
mod shale_props;
pub mod titan_props;

use crate::error::{Error, Result};
use crate::props::{closest_names, PropSpec, Properties};
use std::path::Path;
use std::time::Duration;

/// Name of the statistic that every backend reports: bytes on disk under the database directory.
pub const DISK_USAGE_STAT: &str = "disk.used.bytes";
/// RocksDB's name for bytes read by compactions; Shale and fjall report under the same name.
pub const COMPACT_READ_STAT: &str = "rocksdb.compact.read.bytes";
/// RocksDB's name for bytes written by compactions.
pub const COMPACT_WRITE_STAT: &str = "rocksdb.compact.write.bytes";
/// Bytes written by blob garbage collection. Shale reports its GC engine's writes; RocksDB's
/// integrated BlobDB relocates blobs inside compactions and has no counter of its own, so its
/// figure is estimated as blob bytes written less user bytes written (a lower bound).
pub const GC_WRITE_STAT: &str = "gc.write.bytes";
/// RocksDB's name for microseconds writers were stalled.
pub const STALL_MICROS_STAT: &str = "rocksdb.stall.micros";

/// Engine statistics as `(name, value)` pairs, in the backend's order. Most are counters
/// (cumulative since the database was opened, as RocksDB's tickers); those named in `gauges` are
/// levels at the moment of reading (disk usage, files, live bytes).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Statistics {
    /// The statistics.
    pub entries: Vec<(String, u64)>,
    /// Names of the entries that are levels rather than counters.
    #[serde(default)]
    pub gauges: Vec<String>,
}

impl Statistics {
    /// Adds or replaces the counter `name`.
    pub fn set(&mut self, name: impl Into<String>, value: u64) {
        let name = name.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 = value,
            None => self.entries.push((name, value)),
        }
    }

    /// Adds or replaces the gauge `name`.
    pub fn set_gauge(&mut self, name: impl Into<String>, value: u64) {
        let name = name.into();
        if !self.gauges.contains(&name) {
            self.gauges.push(name.clone());
        }
        self.set(name, value);
    }

    /// What changed since `earlier`: counters less their value then (RocksDB's statistics after a
    /// `Reset()`), gauges as they are now.
    pub fn since(&self, earlier: &Statistics) -> Statistics {
        let mut out = self.clone();
        for (name, v) in &mut out.entries {
            if !self.gauges.contains(name) {
                *v = v.saturating_sub(earlier.get(name).unwrap_or(0));
            }
        }
        out
    }

    /// The value of `name`, if reported.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.entries.iter().find(|(n, _)| n == name).map(|e| e.1)
    }

    /// The lines `-statistics` prints: `NAME COUNT : VALUE`, RocksDB's ticker format.
    pub fn lines(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|(n, v)| format!("{n} COUNT : {v}"))
            .collect()
    }
}

/// One open database under test.
///
/// Every method reports engine failures as `Error` of kind `Backend`; "not found" is `Ok(None)`.
pub trait Backend: Send + Sync {
    /// The value of `key`, or `None` when absent.
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Visits up to `count` records with keys `>= start` in key order; returns how many it visited.
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize>;

    /// Writes a new record.
    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Overwrites a record (the same call as insert for every engine here; kept apart so a
    /// backend may treat them differently).
    fn update(&self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Removes a record.
    fn delete(&self, key: &[u8]) -> Result<()>;

    /// Whether [`Backend::update`] takes a record of only the fields to change and keeps the
    /// others (a hash per record, as YCSB's Redis binding stores them): an update of one field
    /// then sends that field without reading the record first, as YCSB does. Default: false (an
    /// update replaces the whole record).
    fn updates_fields(&self) -> bool {
        false
    }

    /// Engine statistics, with RocksDB's names where one exists, plus [`DISK_USAGE_STAT`].
    fn statistics(&self) -> Result<Statistics>;

    /// Waits, at most `timeout`, until the engine's background work (flushes, compactions, blob
    /// garbage collection) has settled.
    ///
    /// # Errors
    /// `Backend` when the engine fails while waiting.
    fn settle(&self, _timeout: Duration) -> Result<Settle> {
        Ok(Settle::Unobservable)
    }

    /// Flushes and closes the database.
    fn close(self: Box<Self>) -> Result<()>;
}

/// How waiting for background work ended ([`Backend::settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Nothing left to do, after waiting this long.
    Settled(Duration),
    /// Still busy when the bound was reached.
    TimedOut(Duration),
    /// The engine does not show its background work.
    Unobservable,
}

/// A backend the harness knows: its name, property table and whether this build includes it.
pub struct BackendInfo {
    /// The `-db` name.
    pub name: &'static str,
    /// Its properties (all prefixed with the name).
    pub props: &'static [PropSpec],
    /// The cargo feature that builds it, when it is optional.
    pub feature: Option<&'static str>,
    /// Whether this binary includes it.
    pub available: bool,
}

/// Every backend, available in this build or not.
pub fn all_backends() -> [BackendInfo; 7] {
    [
        BackendInfo {
            name: "shale",
            props: shale_props::PROPS,
            feature: Some("shale-engine"),
            available: cfg!(feature = "shale-engine"),
        },
        BackendInfo {
            name: "titandb",
            props: titan_props::TITANDB_PROPS,
            feature: Some("shale-engine"),
            available: cfg!(feature = "shale-engine"),
        },
        BackendInfo {
            name: "diffkv",
            props: titan_props::DIFFKV_PROPS,
            feature: Some("shale-engine"),
            available: cfg!(feature = "shale-engine"),
        },
        BackendInfo {
            name: "rocksdb",
            props: rocks_props::PROPS,
            feature: Some("rocksdb"),
            available: cfg!(feature = "rocksdb"),
        },
        BackendInfo {
            name: "fjall",
            props: fjall_props::PROPS,
            feature: Some("fjall"),
            available: cfg!(feature = "fjall"),
        },
        BackendInfo {
            name: "resp",
            props: resp_props::PROPS,
            feature: None,
            available: true,
        },
        BackendInfo {
            name: "memory",
            props: memory::PROPS,
            feature: None,
            available: true,
        },
    ]
}

/// The property tables a run with `-db name` accepts: the backend's own, and Shale's for the
/// backends that are Shale under other names (so `-p shale.memtable=skiplist` works with
/// `-db titandb`).
pub fn backend_tables(name: &str) -> Result<Vec<&'static [PropSpec]>> {
    let info = backend_info(name)?;
    Ok(match name {
        "titandb" | "diffkv" => vec![info.props, shale_props::PROPS],
        _ => vec![info.props],
    })
}

/// The property table of backend `name`.
///
/// # Errors
/// `Usage` for an unknown backend, with the closest names.
pub fn backend_info(name: &str) -> Result<BackendInfo> {
    let names: Vec<&str> = all_backends().iter().map(|b| b.name).collect();
    all_backends()
        .into_iter()
        .find(|b| b.name == name)
        .ok_or_else(|| {
            let close = closest_names(name, &names, 2);
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!(" (did you mean {}?)", close.join(" or "))
            };
            Error::usage(format!(
                "unknown database '{name}'{hint}; known: {}",
                names.join(", ")
            ))
        })
}

/// The property naming the database directory of `backend`, if it keeps one.
pub fn dbname_property(backend: &str) -> Option<String> {
    (backend != "memory" && backend != "resp").then(|| format!("{backend}.dbname"))
}

/// Opens backend `name` configured by `props`.
///
/// # Errors
/// `Usage` when the backend is unknown or not built in, `Property` for bad backend properties,
/// `Backend` when the engine fails to open.
pub fn open_backend(name: &str, props: &Properties) -> Result<Box<dyn Backend>> {
    let info = backend_info(name)?;
    if !info.available {
        return Err(Error::usage(format!(
            "database '{name}' is not built into this binary; rebuild with `--features {}`",
            info.feature.unwrap_or(name)
        )));
    }
    match name {
        "memory" => Ok(Box::new(memory::MemoryBackend::open(props)?)),
        "resp" => Ok(Box::new(resp::RespBackend::open(props)?)),
        #[cfg(feature = "shale-engine")]
        "shale" => Ok(Box::new(shale_db::ShaleBackend::open(props)?)),
        #[cfg(feature = "shale-engine")]
        "titandb" | "diffkv" => Ok(Box::new(shale_db::ShaleBackend::open_translated(
            props, name,
        )?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocks::RocksBackend::open(props)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(fjall_db::FjallBackend::open(props)?)),
        _ => Err(Error::usage(format!(
            "database '{name}' is not built into this binary"
        ))),
    }
}

/// Bytes used by the files under `path` (recursively; symbolic links are not followed).
/// A missing directory uses zero bytes.
///
/// # Errors
/// `Io` when a directory cannot be listed.
pub fn dir_size(path: &Path) -> Result<u64> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(format!("cannot stat {}", path.display()), e)),
    };
    if !meta.is_dir() {
        return Ok(meta.len());
    }
    let mut total = 0;
    let entries = std::fs::read_dir(path)
        .map_err(|e| Error::io(format!("cannot list {}", path.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("cannot list {}", path.display()), e))?;
        match dir_size(&entry.path()) {
            Ok(n) => total += n,
            // Engines delete obsolete files while we walk: a vanished file uses no space.
            Err(e) if e.kind() == crate::error::ErrorKind::Io && !entry.path().exists() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// Prepares the database directory of an on-disk backend: removes it first when
/// `<backend>.destroy=true`. Returns the directory.
///
/// # Errors
/// `Io` when the old directory cannot be removed.
#[cfg_attr(
    not(any(feature = "shale-engine", feature = "rocksdb", feature = "fjall")),
    allow(dead_code)
)]
pub(crate) fn prepare_dir(
    props: &Properties,
    backend: &str,
    default_dir: &str,
) -> Result<std::path::PathBuf> {
    let dir = std::path::PathBuf::from(props.get_str(&format!("{backend}.dbname"), default_dir));
    if props.get_bool(&format!("{backend}.destroy"), false)? && dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| Error::io(format!("cannot remove {}", dir.display()), e))?;
    }
    Ok(dir)
}
