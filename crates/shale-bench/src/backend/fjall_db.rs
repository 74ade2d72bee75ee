//! `fjall`: fjall 3, one keyspace, with or without key-value separation. Properties:
//! [`super::fjall_props`].
//!
//! fjall does not count compaction bytes or stall time; its statistics are what it does expose
//! (compaction time and count, tables, blob files, fragmented blob bytes) plus disk usage.

use super::{
    dir_size, fjall_props::DEFAULT_DBNAME, prepare_dir, Backend, Statistics, DISK_USAGE_STAT,
};
use crate::error::{Error, Result};
use crate::props::Properties;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode};
use std::path::PathBuf;

/// Name of the single keyspace the benchmark uses.
const KEYSPACE: &str = "usertable";

/// See the module documentation.
pub struct FjallBackend {
    db: Database,
    keyspace: Keyspace,
    sync: bool,
    dir: PathBuf,
}

fn fjall_err(what: &str) -> impl Fn(fjall::Error) -> Error + '_ {
    move |e| Error::backend(format!("fjall {what}: {e}"))
}

impl FjallBackend {
    /// Opens (creating if missing) the database named by `fjall.dbname`.
    ///
    /// # Errors
    /// `Property` for bad properties, `Backend` when fjall fails to open.
    pub fn open(props: &Properties) -> Result<FjallBackend> {
        let dir = prepare_dir(props, "fjall", DEFAULT_DBNAME)?;
        let mut builder = Database::builder(&dir);
        if props.contains("fjall.cache_size") {
            builder = builder.cache_size(props.get_u64("fjall.cache_size", 0)?);
        }
        if props.contains("fjall.worker_threads") {
            builder = builder
                .worker_threads(props.get_u64_in("fjall.worker_threads", 1, 1, 1024)? as usize);
        }
        let db = builder
            .open()
            .map_err(|e| Error::backend(format!("cannot open fjall at {}: {e}", dir.display())))?;

        let kv = props.get_bool("fjall.kv_separation", false)?;
        let separation = KvSeparationOptions::default()
            .separation_threshold(u32::try_from(props.get_u64("fjall.separation_threshold", 1024)?).map_err(|_| {
                Error::property("bad value for property fjall.separation_threshold: must fit in 32 bits")
            })?)
            .file_target_size(props.get_u64("fjall.blob_file_size", 64 << 20)?)
            .staleness_threshold(props.get_f64_in("fjall.blob_staleness_threshold", 0.25, 0.0, 1.0)? as f32)
            .age_cutoff(props.get_f64_in("fjall.blob_age_cutoff", 0.25, 0.0, 1.0)? as f32);
        let max_memtable = if props.contains("fjall.max_memtable_size") {
            Some(props.get_u64("fjall.max_memtable_size", 0)?)
        } else {
            None
        };
        let keyspace = db
            .keyspace(KEYSPACE, move || {
                let mut o = KeyspaceCreateOptions::default()
                    .with_kv_separation(kv.then(|| separation.clone()));
                if let Some(bytes) = max_memtable {
                    o = o.max_memtable_size(bytes);
                }
                o
            })
            .map_err(fjall_err("open keyspace"))?;
        Ok(FjallBackend {
            db,
            keyspace,
            sync: props.get_bool("fjall.sync", false)?,
            dir,
        })
    }

    fn persist_if_sync(&self) -> Result<()> {
        if self.sync {
            self.db
                .persist(PersistMode::SyncAll)
                .map_err(fjall_err("persist"))?;
        }
        Ok(())
    }
}

impl Backend for FjallBackend {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .keyspace
            .get(key)
            .map_err(fjall_err("get"))?
            .map(|v| v.to_vec()))
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut n = 0;
        for guard in self.keyspace.range(start..).take(count) {
            let (k, v) = guard.into_inner().map_err(fjall_err("scan"))?;
            visit(&k, &v);
            n += 1;
        }
        Ok(n)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.keyspace
            .insert(key, value)
            .map_err(fjall_err("insert"))?;
        self.persist_if_sync()
    }

    fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.insert(key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.keyspace.remove(key).map_err(fjall_err("remove"))?;
        self.persist_if_sync()
    }

    fn statistics(&self) -> Result<Statistics> {
        let mut s = Statistics::default();
        s.set(
            "fjall.compaction.micros",
            u64::try_from(self.db.time_compacting().as_micros()).unwrap_or(u64::MAX),
        );
        s.set(
            "fjall.compactions.completed",
            self.db.compactions_completed() as u64,
        );
        s.set_gauge("fjall.tables", self.keyspace.table_count() as u64);
        s.set_gauge("fjall.blob.files", self.keyspace.blob_file_count() as u64);
        s.set_gauge(
            "fjall.blob.fragmented.bytes",
            self.keyspace.fragmented_blob_bytes(),
        );
        s.set_gauge(DISK_USAGE_STAT, dir_size(&self.dir)?);
        Ok(s)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(fjall_err("persist"))?;
        Ok(())
    }
}
