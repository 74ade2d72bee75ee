//! `rocksdb`: RocksDB (Debian's librocksdb 7.8) through the `rocksdb` crate, plain or with
//! integrated BlobDB. Properties: [`super::rocks_props`].
//!
//! Statistics come from RocksDB's own statistics object (`rocksdb.statistics=true`), parsed from
//! its text dump: every ticker line `NAME COUNT : N` becomes one entry, so
//! `rocksdb.compact.read.bytes`, `rocksdb.compact.write.bytes` and `rocksdb.stall.micros` appear
//! under their RocksDB names.
//!
//! As in YCSB-cpp's binding, a size or count of 0 keeps RocksDB's default, so the AegonKV
//! evaluation's `rocksdb.properties` and `rocksdb-blob.properties` mean what they meant there.
//! Background work has settled ([`Backend::settle`]) when RocksDB reports no flush or compaction
//! running or pending.

use super::{
    dir_size, prepare_dir, rocks_props::DEFAULT_DBNAME, Backend, Settle, Statistics,
    DISK_USAGE_STAT, GC_WRITE_STAT,
};
use crate::error::{Error, Result};
use crate::props::Properties;
use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, WriteOptions, DB};
use std::path::PathBuf;

/// See the module documentation.
pub struct RocksBackend {
    db: DB,
    options: Options,
    write_options: WriteOptions,
    dir: PathBuf,
    // Keep the block caches alive as long as the database.
    _caches: Vec<Cache>,
}

/// How often [`RocksBackend::settle`] polls RocksDB's background-work properties.
const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(20);
/// Consecutive idle polls that count as settled (a flush can start a compaction just after).
const SETTLE_IDLE_POLLS: u32 = 3;

fn compression(props: &Properties, key: &str) -> Result<DBCompressionType> {
    Ok(
        match props.get_choice(
            key,
            "no",
            &["no", "none", "snappy", "lz4", "zstd", "zlib", "bzip2"],
        )? {
            "snappy" => DBCompressionType::Snappy,
            "lz4" => DBCompressionType::Lz4,
            "zstd" => DBCompressionType::Zstd,
            "zlib" => DBCompressionType::Zlib,
            "bzip2" => DBCompressionType::Bz2,
            _ => DBCompressionType::None,
        },
    )
}

fn int(props: &Properties, key: &str, default: i64) -> Result<i32> {
    let v = props.get_i64(key, default)?;
    i32::try_from(v).map_err(|_| {
        Error::property(format!(
            "bad value for property {key}: {v} does not fit in 32 bits"
        ))
    })
}

/// An unsigned size that YCSB-cpp's binding sets only when it is not 0.
fn nonzero(props: &Properties, key: &str, default: u64) -> Result<u64> {
    match props.get_u64(key, default)? {
        0 => Ok(default),
        v => Ok(v),
    }
}

fn rocks_err(what: &str) -> impl Fn(rocksdb::Error) -> Error + '_ {
    move |e| Error::backend(format!("rocksdb {what}: {e}"))
}

impl RocksBackend {
    /// Opens (creating if missing) the database named by `rocksdb.dbname`.
    ///
    /// # Errors
    /// `Property` for bad properties, `Backend` when RocksDB fails to open.
    pub fn open(props: &Properties) -> Result<RocksBackend> {
        props.get_choice("rocksdb.format", "single", &["single"])?;
        for k in ["rocksdb.optionsfile", "rocksdb.env_uri", "rocksdb.fs_uri"] {
            if props.get(k).is_some_and(|v| !v.is_empty()) {
                return Err(Error::property(format!(
                    "{k} is not supported: give the options as rocksdb.* properties"
                )));
            }
        }
        if props.get_i64("rocksdb.compaction_pri", -1)? != -1 {
            return Err(Error::property(
                "rocksdb.compaction_pri is not supported by the rocksdb crate this harness links; leave it -1",
            ));
        }
        let dir = prepare_dir(props, "rocksdb", DEFAULT_DBNAME)?;
        let mut o = Options::default();
        o.create_if_missing(true);
        if props.get_bool("rocksdb.increase_parallelism", false)? {
            let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
            o.increase_parallelism(i32::try_from(cpus).unwrap_or(2));
        }
        if props.get_bool("rocksdb.optimize_level_style_compaction", false)? {
            o.optimize_level_style_compaction(512 << 20);
        }
        o.set_compression_type(compression(props, "rocksdb.compression")?);
        o.set_max_background_jobs(int(props, "rocksdb.max_background_jobs", 2)?);
        if int(props, "rocksdb.max_background_compactions", 0)? != 0 {
            #[allow(deprecated)]
            o.set_max_background_compactions(int(props, "rocksdb.max_background_compactions", 1)?);
        }
        if int(props, "rocksdb.max_background_flushes", 0)? != 0 {
            #[allow(deprecated)]
            o.set_max_background_flushes(int(props, "rocksdb.max_background_flushes", 1)?);
        }
        o.set_target_file_size_base(nonzero(props, "rocksdb.target_file_size_base", 64 << 20)?);
        o.set_target_file_size_multiplier(
            i32::try_from(nonzero(props, "rocksdb.target_file_size_multiplier", 1)?)
                .unwrap_or(i32::MAX),
        );
        o.set_max_bytes_for_level_base(nonzero(
            props,
            "rocksdb.max_bytes_for_level_base",
            256 << 20,
        )?);
        let multiplier =
            props.get_f64_in("rocksdb.max_bytes_for_level_multiplier", 10.0, 0.0, 1000.0)?;
        o.set_max_bytes_for_level_multiplier(if multiplier == 0.0 { 10.0 } else { multiplier });
        o.set_write_buffer_size(
            usize::try_from(nonzero(props, "rocksdb.write_buffer_size", 64 << 20)?)
                .unwrap_or(usize::MAX),
        );
        o.set_max_write_buffer_number(
            i32::try_from(nonzero(props, "rocksdb.max_write_buffer_number", 2)?).unwrap_or(2),
        );
        o.set_level_zero_file_num_compaction_trigger(int(
            props,
            "rocksdb.level0_file_num_compaction_trigger",
            4,
        )?);
        o.set_level_zero_slowdown_writes_trigger(int(
            props,
            "rocksdb.level0_slowdown_writes_trigger",
            20,
        )?);
        o.set_level_zero_stop_writes_trigger(int(props, "rocksdb.level0_stop_writes_trigger", 36)?);
        o.set_max_open_files(int(props, "rocksdb.max_open_files", -1)?);
        o.set_use_direct_io_for_flush_and_compaction(
            props.get_bool("rocksdb.use_direct_io_for_flush_compaction", false)?,
        );
        o.set_use_direct_reads(props.get_bool("rocksdb.use_direct_reads", false)?);
        o.set_allow_mmap_writes(props.get_bool("rocksdb.allow_mmap_writes", false)?);
        o.set_allow_mmap_reads(props.get_bool("rocksdb.allow_mmap_reads", false)?);
        if props.get_bool("rocksdb.statistics", true)? {
            o.enable_statistics();
        }
        o.set_enable_blob_files(props.get_bool("rocksdb.enable_blob_files", false)?);
        o.set_min_blob_size(props.get_u64("rocksdb.min_blob_size", 0)?);
        o.set_blob_file_size(props.get_u64("rocksdb.blob_file_size", 256 << 20)?);
        o.set_blob_compression_type(compression(props, "rocksdb.blob_compression")?);
        o.set_enable_blob_gc(props.get_bool("rocksdb.enable_blob_garbage_collection", false)?);
        o.set_blob_gc_age_cutoff(props.get_f64_in(
            "rocksdb.blob_garbage_collection_age_cutoff",
            0.25,
            0.0,
            1.0,
        )?);
        o.set_blob_gc_force_threshold(props.get_f64_in(
            "rocksdb.blob_garbage_collection_force_threshold",
            1.0,
            0.0,
            1.0,
        )?);
        o.set_blob_compaction_readahead_size(
            props.get_u64("rocksdb.blob_compaction_readahead_size", 0)?,
        );

        let mut table = BlockBasedOptions::default();
        let mut caches = Vec::new();
        let cache_size = props.get_u64("rocksdb.cache_size", 8 << 20)?;
        if cache_size > 0 {
            let c = Cache::new_lru_cache(usize::try_from(cache_size).unwrap_or(usize::MAX))
                .map_err(rocks_err("block cache"))?;
            table.set_block_cache(&c);
            caches.push(c);
        } else {
            table.disable_cache();
        }
        let compressed = props.get_u64("rocksdb.compressed_cache_size", 0)?;
        if compressed > 0 {
            let c = Cache::new_lru_cache(usize::try_from(compressed).unwrap_or(usize::MAX))
                .map_err(rocks_err("compressed block cache"))?;
            table.set_block_cache_compressed(&c);
            caches.push(c);
        }
        let bloom_bits = props.get_i64("rocksdb.bloom_bits", 10)?;
        if bloom_bits > 0 {
            table.set_bloom_filter(bloom_bits as f64, false);
        }
        o.set_block_based_table_factory(&table);

        let mut w = WriteOptions::default();
        w.disable_wal(props.get_bool("rocksdb.disable_wal", false)?);
        w.set_sync(props.get_bool("rocksdb.sync", false)?);

        let db = DB::open(&o, &dir).map_err(|e| {
            Error::backend(format!("cannot open rocksdb at {}: {e}", dir.display()))
        })?;
        Ok(RocksBackend {
            db,
            options: o,
            write_options: w,
            dir,
            _caches: caches,
        })
    }
}

/// Parses RocksDB's statistics dump; ticker lines look like `rocksdb.stall.micros COUNT : 0`.
pub(crate) fn parse_rocksdb_statistics(dump: &str, out: &mut Statistics) {
    for line in dump.lines() {
        if let Some((name, rest)) = line.split_once(" COUNT : ") {
            if let Ok(v) = rest.trim().parse::<u64>() {
                out.set(name.trim(), v);
            }
        }
    }
}

impl Backend for RocksBackend {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .db
            .get_pinned(key)
            .map_err(rocks_err("get"))?
            .map(|v| v.to_vec()))
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut it = self.db.raw_iterator();
        it.seek(start);
        let mut n = 0;
        while n < count && it.valid() {
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                visit(k, v);
                n += 1;
            }
            it.next();
        }
        it.status().map_err(rocks_err("scan"))?;
        Ok(n)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db
            .put_opt(key, value, &self.write_options)
            .map_err(rocks_err("put"))
    }

    fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.insert(key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db
            .delete_opt(key, &self.write_options)
            .map_err(rocks_err("delete"))
    }

    fn statistics(&self) -> Result<Statistics> {
        let mut s = Statistics::default();
        if let Some(dump) = self.options.get_statistics() {
            parse_rocksdb_statistics(&dump, &mut s);
        }
        for prop in [
            "rocksdb.total-sst-files-size",
            "rocksdb.live-sst-files-size",
            "rocksdb.total-blob-file-size",
            "rocksdb.live-blob-file-size",
        ] {
            if let Ok(Some(v)) = self.db.property_int_value(prop) {
                s.set_gauge(prop, v);
            }
        }
        if let (Some(blob), Some(user)) = (
            s.get("rocksdb.blobdb.blob.file.bytes.written"),
            s.get("rocksdb.bytes.written"),
        ) {
            s.set(GC_WRITE_STAT, blob.saturating_sub(user));
        }
        s.set_gauge(DISK_USAGE_STAT, dir_size(&self.dir)?);
        Ok(s)
    }

    fn settle(&self, timeout: std::time::Duration) -> Result<Settle> {
        let start = std::time::Instant::now();
        let mut idle_polls = 0;
        loop {
            let mut busy = false;
            for prop in [
                "rocksdb.num-running-flushes",
                "rocksdb.num-running-compactions",
                "rocksdb.mem-table-flush-pending",
                "rocksdb.compaction-pending",
            ] {
                busy |= self
                    .db
                    .property_int_value(prop)
                    .map_err(rocks_err("read a property"))?
                    .unwrap_or(0)
                    > 0;
            }
            idle_polls = if busy { 0 } else { idle_polls + 1 };
            if idle_polls >= SETTLE_IDLE_POLLS {
                return Ok(Settle::Settled(start.elapsed()));
            }
            if start.elapsed() >= timeout {
                return Ok(Settle::TimedOut(start.elapsed()));
            }
            std::thread::sleep(SETTLE_POLL);
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.flush_wal(true).map_err(rocks_err("flush WAL"))?;
        drop(self);
        Ok(())
    }
}
