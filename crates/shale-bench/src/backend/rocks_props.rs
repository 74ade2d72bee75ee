//! Properties of the `rocksdb` backend. The names follow YCSB-cpp's RocksDB binding (and the
//! AegonKV evaluation's `rocksdb.properties`), so its files carry over. Defaults are RocksDB 7.8's
//! own unless noted; the table is compiled in every build so that files are checked even when
//! the backend is not.

use crate::props::PropSpec;

/// Default database directory.
pub const DEFAULT_DBNAME: &str = "./bench-db/rocksdb";

/// The `rocksdb.*` properties.
pub(super) static PROPS: &[PropSpec] = &[
    PropSpec::new("rocksdb.dbname", DEFAULT_DBNAME, "database directory"),
    PropSpec::new(
        "rocksdb.destroy",
        "false",
        "remove the directory before opening",
    ),
    PropSpec::new(
        "rocksdb.format",
        "single",
        "record layout; only `single` (one value per record) exists",
    ),
    PropSpec::new(
        "rocksdb.compression",
        "no",
        "block compression: no, snappy, lz4, zstd, zlib, bzip2",
    ),
    PropSpec::new(
        "rocksdb.max_background_jobs",
        "2",
        "flush and compaction threads",
    ),
    PropSpec::new(
        "rocksdb.max_background_compactions",
        "",
        "deprecated RocksDB knob; set when given",
    ),
    PropSpec::new(
        "rocksdb.max_background_flushes",
        "",
        "deprecated RocksDB knob; set when given",
    ),
    PropSpec::new(
        "rocksdb.target_file_size_base",
        "67108864",
        "target SST size at L1",
    ),
    PropSpec::new(
        "rocksdb.target_file_size_multiplier",
        "1",
        "SST size growth per level",
    ),
    PropSpec::new(
        "rocksdb.max_bytes_for_level_base",
        "268435456",
        "target size of L1",
    ),
    PropSpec::new(
        "rocksdb.max_bytes_for_level_multiplier",
        "10",
        "level size growth",
    ),
    PropSpec::new("rocksdb.write_buffer_size", "67108864", "memtable size"),
    PropSpec::new(
        "rocksdb.max_write_buffer_number",
        "2",
        "memtables before writes stop",
    ),
    PropSpec::new(
        "rocksdb.level0_file_num_compaction_trigger",
        "4",
        "L0 files that trigger compaction",
    ),
    PropSpec::new(
        "rocksdb.level0_slowdown_writes_trigger",
        "20",
        "L0 files at which writes slow down",
    ),
    PropSpec::new(
        "rocksdb.level0_stop_writes_trigger",
        "36",
        "L0 files at which writes stop",
    ),
    PropSpec::new(
        "rocksdb.max_open_files",
        "-1",
        "table cache size; -1 keeps every file open",
    ),
    PropSpec::new(
        "rocksdb.use_direct_io_for_flush_compaction",
        "false",
        "O_DIRECT for background I/O",
    ),
    PropSpec::new("rocksdb.use_direct_reads", "false", "O_DIRECT for reads"),
    PropSpec::new("rocksdb.allow_mmap_writes", "false", "mmap for writes"),
    PropSpec::new("rocksdb.allow_mmap_reads", "false", "mmap for reads"),
    PropSpec::new(
        "rocksdb.cache_size",
        "8388608",
        "block cache bytes (0 disables it)",
    ),
    PropSpec::new(
        "rocksdb.bloom_bits",
        "10",
        "bloom filter bits per key; 0 or less disables filters",
    ),
    PropSpec::new(
        "rocksdb.statistics",
        "true",
        "collect statistics (needed for -statistics)",
    ),
    PropSpec::new("rocksdb.disable_wal", "false", "write without a WAL"),
    PropSpec::new("rocksdb.sync", "false", "fsync the WAL on every write"),
    PropSpec::new(
        "rocksdb.enable_blob_files",
        "false",
        "integrated BlobDB: values of min_blob_size or more go to blob files",
    ),
    PropSpec::new(
        "rocksdb.min_blob_size",
        "0",
        "smallest value stored in a blob file",
    ),
    PropSpec::new(
        "rocksdb.blob_file_size",
        "268435456",
        "blob file target size",
    ),
    PropSpec::new(
        "rocksdb.blob_compression",
        "no",
        "blob compression, as rocksdb.compression",
    ),
    PropSpec::new(
        "rocksdb.enable_blob_garbage_collection",
        "false",
        "relocate live blobs from old files during compaction",
    ),
    PropSpec::new(
        "rocksdb.blob_garbage_collection_age_cutoff",
        "0.25",
        "fraction of oldest blob files eligible for GC",
    ),
    PropSpec::new(
        "rocksdb.blob_garbage_collection_force_threshold",
        "1.0",
        "garbage ratio that forces compaction of a blob file's SSTs",
    ),
    PropSpec::new(
        "rocksdb.blob_compaction_readahead_size",
        "0",
        "readahead for blob reads in compaction",
    ),
    PropSpec::new(
        "rocksdb.compressed_cache_size",
        "0",
        "compressed block cache bytes (RocksDB 7's block_cache_compressed; 0: none)",
    ),
    PropSpec::new(
        "rocksdb.mergeupdate",
        "false",
        "merge-operator updates; no effect, as in YCSB-cpp's default build",
    ),
    PropSpec::new(
        "rocksdb.compaction_pri",
        "-1",
        "compaction priority; only -1 (RocksDB's default) is supported",
    ),
    PropSpec::new(
        "rocksdb.optionsfile",
        "",
        "a RocksDB options file; not supported (leave empty)",
    ),
    PropSpec::new("rocksdb.env_uri", "", "a RocksDB Env URI; not supported"),
    PropSpec::new(
        "rocksdb.fs_uri",
        "",
        "a RocksDB FileSystem URI; not supported",
    ),
    PropSpec::new(
        "rocksdb.increase_parallelism",
        "false",
        "RocksDB's IncreaseParallelism(number of CPUs)",
    ),
    PropSpec::new(
        "rocksdb.optimize_level_style_compaction",
        "false",
        "RocksDB's OptimizeLevelStyleCompaction()",
    ),
];
