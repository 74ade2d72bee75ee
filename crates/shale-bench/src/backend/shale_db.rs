//! `shale`: the embedded Shale engine. Properties: [`super::shale_props`]; each maps to one
//! field of `shale::Options`, unset ones keep the engine's defaults. `titandb` and `diffkv` open
//! the same engine after [`super::titan_props::translate`] has turned their properties into
//! `shale.*` ones.
//!
//! Statistics: `shale::Stats` under RocksDB's names where one exists
//! (`rocksdb.compact.read.bytes`, `rocksdb.compact.write.bytes`, `rocksdb.stall.micros`), the rest
//! as `shale.*`, plus disk usage.

use super::{
    dir_size, prepare_dir, shale_props::DEFAULT_DBNAME, Backend, Settle, Statistics,
    DISK_USAGE_STAT, GC_WRITE_STAT,
};
use super::{COMPACT_READ_STAT, COMPACT_WRITE_STAT, STALL_MICROS_STAT};
use crate::error::{Error, Result};
use crate::props::{Origin, Properties};
use shale::{Compression, Db, Durability, MemtableKind, Options, WriteBatch, WriteOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// See the module documentation.
pub struct ShaleBackend {
    db: Db,
    options: Options,
    write_options: WriteOptions,
    dir: PathBuf,
}

fn shale_err(what: &str) -> impl Fn(shale::Error) -> Error + '_ {
    move |e| Error::backend(format!("shale {what}: {e}"))
}

fn set_usize(props: &Properties, key: &str, field: &mut usize) -> Result<()> {
    if props.contains(key) {
        *field = usize::try_from(props.get_u64(key, 0)?)
            .map_err(|_| Error::property(format!("bad value for property {key}: too large")))?;
    }
    Ok(())
}

fn set_f64(props: &Properties, key: &str, field: &mut f64) -> Result<()> {
    if let Some(v) = props.get(key) {
        *field = v
            .parse()
            .map_err(|_| Error::property(format!("bad value for property {key}: {v:?}")))?;
    }
    Ok(())
}

fn set_u64(props: &Properties, key: &str, field: &mut u64) -> Result<()> {
    if props.contains(key) {
        *field = props.get_u64(key, 0)?;
    }
    Ok(())
}

/// Builds `shale::Options` from the `shale.*` properties.
///
/// # Errors
/// `Property` for malformed values or options the engine rejects.
pub(crate) fn options_from(props: &Properties) -> Result<Options> {
    let mut o = Options::default();
    set_usize(props, "shale.write_buffer_size", &mut o.write_buffer_size)?;
    set_usize(props, "shale.max_write_buffers", &mut o.max_write_buffers)?;
    set_usize(
        props,
        "shale.level0_compaction_trigger",
        &mut o.level0_compaction_trigger,
    )?;
    set_usize(
        props,
        "shale.level0_slowdown_trigger",
        &mut o.level0_slowdown_trigger,
    )?;
    set_usize(
        props,
        "shale.level0_stop_trigger",
        &mut o.level0_stop_trigger,
    )?;
    set_u64(
        props,
        "shale.max_bytes_for_level_base",
        &mut o.max_bytes_for_level_base,
    )?;
    if props.contains("shale.level_size_multiplier") {
        o.level_size_multiplier = props.get_f64("shale.level_size_multiplier", 10.0)?;
    }
    set_usize(props, "shale.num_levels", &mut o.num_levels)?;
    set_u64(props, "shale.target_file_size", &mut o.target_file_size)?;
    set_usize(props, "shale.block_size", &mut o.block_size)?;
    if props.contains("shale.bloom_bits_per_key") {
        o.bloom_bits_per_key = u32::try_from(props.get_u64("shale.bloom_bits_per_key", 10)?)
            .map_err(|_| {
                Error::property("bad value for property shale.bloom_bits_per_key: too large")
            })?;
    }
    set_usize(props, "shale.block_cache_size", &mut o.block_cache_size)?;
    set_usize(props, "shale.max_open_files", &mut o.max_open_files)?;
    if props.contains("shale.compression") {
        o.compression = match props.get_choice("shale.compression", "lz4", &["none", "lz4"])? {
            "none" => Compression::None,
            _ => Compression::Lz4,
        };
    }
    set_usize(
        props,
        "shale.compression_start_level",
        &mut o.compression_start_level,
    )?;
    set_usize(props, "shale.background_threads", &mut o.background_threads)?;
    if props.contains("shale.memtable") {
        o.memtable = match props.get_choice("shale.memtable", "skiplist", &["skiplist", "flodb"])? {
            "flodb" => MemtableKind::FloDb,
            _ => MemtableKind::SkipList,
        };
    }
    set_usize(props, "shale.membuffer_size", &mut o.membuffer_size)?;
    if props.contains("shale.membuffer_prefix_bits") {
        o.membuffer_prefix_bits = Some(
            u32::try_from(props.get_u64("shale.membuffer_prefix_bits", 0)?).map_err(|_| {
                Error::property("bad value for property shale.membuffer_prefix_bits: too large")
            })?,
        );
    }
    set_usize(props, "shale.drain_threads", &mut o.drain_threads)?;
    if props.get("shale.min_blob_size") == Some("off") {
        o.min_blob_size = shale::NO_BLOB_FILES;
    } else {
        set_usize(props, "shale.min_blob_size", &mut o.min_blob_size)?;
    }
    set_u64(props, "shale.blob_file_size", &mut o.blob_file_size)?;
    set_f64(props, "shale.gc_threshold", &mut o.gc_threshold)?;
    set_f64(
        props,
        "shale.gc_space_amp_target",
        &mut o.gc_space_amp_target,
    )?;
    if props.contains("shale.gc_mode") {
        o.gc_mode = match props.get_choice("shale.gc_mode", "offload", &["offload", "titan"])? {
            "titan" => shale::GcMode::Titan,
            _ => shale::GcMode::Offload,
        };
    }
    if props.contains("shale.gc_engine") {
        o.gc_engine =
            match props.get_choice("shale.gc_engine", "background", &["background", "inline"])? {
                "inline" => shale::GcEngineKind::Inline,
                _ => shale::GcEngineKind::Background,
            };
    }
    set_usize(props, "shale.gc_threads", &mut o.gc_threads)?;
    set_u64(props, "shale.gc_bytes_per_sec", &mut o.gc_bytes_per_sec)?;
    o.validate()
        .map_err(|e| Error::property(format!("shale.* properties: {e}")))?;
    Ok(o)
}

impl ShaleBackend {
    /// Opens (creating if missing) the database named by `shale.dbname`.
    ///
    /// # Errors
    /// `Property` for bad properties, `Backend` when the engine fails to open.
    pub fn open(props: &Properties) -> Result<ShaleBackend> {
        let dir = prepare_dir(props, "shale", DEFAULT_DBNAME)?;
        let options = options_from(props)?;
        let durability = match props.get_choice(
            "shale.durability",
            "buffered",
            &["buffered", "sync", "unflushed"],
        )? {
            _ if props.get_bool("shale.sync", false)? => Durability::Sync,
            "sync" => Durability::Sync,
            "unflushed" => Durability::Unflushed,
            _ => Durability::Buffered,
        };
        let db = Db::open(&dir, options.clone())
            .map_err(|e| Error::backend(format!("cannot open shale at {}: {e}", dir.display())))?;
        Ok(ShaleBackend {
            db,
            options,
            write_options: WriteOptions { durability },
            dir,
        })
    }

    /// Opens Shale configured by the `<prefix>.*` properties of the AegonKV fork's Titan or DiffKV
    /// binding (`prefix` is `titandb` or `diffkv`); `shale.*` properties given as well win.
    ///
    /// # Errors
    /// As [`ShaleBackend::open`], and `Property` for fork properties with bad values.
    pub fn open_translated(props: &Properties, prefix: &str) -> Result<ShaleBackend> {
        let t = super::titan_props::translate(props, prefix)?;
        let mut p = props.clone();
        for (k, v) in &t.set {
            if !props.contains(k) {
                p.set(k.clone(), v.clone(), Origin::Harness);
            }
        }
        if !p.contains("shale.dbname") {
            p.set(
                "shale.dbname",
                format!("./bench-db/{prefix}"),
                Origin::Harness,
            );
        }
        ShaleBackend::open(&p)
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The durability of every write.
    pub fn durability(&self) -> Durability {
        self.write_options.durability
    }

    fn write_one(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        match value {
            Some(v) => batch.put(key, v),
            None => batch.delete(key),
        };
        self.db
            .write(batch, &self.write_options)
            .map_err(shale_err("write"))
    }
}

impl Backend for ShaleBackend {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get(key).map_err(shale_err("get"))
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut n = 0;
        for item in self.db.range(start.to_vec()..).take(count) {
            let (k, v) = item.map_err(shale_err("scan"))?;
            visit(&k, &v);
            n += 1;
        }
        Ok(n)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_one(key, Some(value))
    }

    fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_one(key, Some(value))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.write_one(key, None)
    }

    fn statistics(&self) -> Result<Statistics> {
        let st = self.db.stats();
        let mut s = Statistics::default();
        s.set(COMPACT_READ_STAT, st.compaction_bytes_read);
        s.set(COMPACT_WRITE_STAT, st.compaction_bytes_written);
        s.set(STALL_MICROS_STAT, st.stall_micros);
        s.set("rocksdb.bytes.written", st.user_bytes_written);
        s.set("rocksdb.wal.bytes", st.wal_bytes_written);
        s.set("rocksdb.wal.synced", st.wal_syncs);
        s.set("rocksdb.flush.write.bytes", st.flush_bytes_written);
        s.set("rocksdb.block.cache.hit", st.block_cache_hits);
        s.set("rocksdb.block.cache.miss", st.block_cache_misses);
        s.set("shale.flushes", st.flushes);
        s.set("shale.compactions", st.compactions);
        s.set("shale.trivial.moves", st.trivial_moves);
        s.set("shale.stop.micros", st.stop_micros);
        s.set_gauge("shale.live.data.bytes", st.live_data_bytes);
        s.set_gauge("shale.on.disk.bytes", st.on_disk_bytes);
        s.set(
            "rocksdb.blobdb.blob.file.bytes.written",
            st.blob_bytes_written,
        );
        s.set_gauge("shale.blob.files", st.blob_files);
        s.set_gauge("shale.blob.live.bytes", st.blob_live_bytes);
        s.set_gauge("shale.blob.garbage.bytes", st.blob_garbage_bytes);
        s.set_gauge(
            "shale.space.amplification.milli",
            (st.space_amplification * 1000.0).round() as u64,
        );
        s.set("shale.gc.bytes.read", st.gc_bytes_read);
        s.set("shale.gc.bytes.written", st.gc_bytes_written);
        s.set(GC_WRITE_STAT, st.gc_bytes_written);
        s.set("shale.gc.runs", st.gc_runs);
        s.set("shale.gc.micros", st.gc_micros);
        for (level, files) in st.files_per_level.iter().enumerate() {
            s.set_gauge(format!("shale.files.l{level}"), *files as u64);
        }
        s.set_gauge(DISK_USAGE_STAT, dir_size(&self.dir)?);
        Ok(s)
    }

    fn settle(&self, timeout: Duration) -> Result<Settle> {
        let start = Instant::now();
        let settled = self
            .db
            .wait_for_background(timeout)
            .map_err(shale_err("wait for background work"))?;
        Ok(if settled {
            Settle::Settled(start.elapsed())
        } else {
            Settle::TimedOut(start.elapsed())
        })
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.close().map_err(shale_err("close"))
    }
}
