//! Properties of the `shale` backend. Each maps to a field of `shale::Options`; unset ones keep
//! the engine's defaults (the `DEFAULT_*` constants of the `shale` crate), so the table shows no
//! defaults of its own.

use crate::props::PropSpec;

/// Default database directory.
pub const DEFAULT_DBNAME: &str = "./bench-db/shale";

/// The `shale.*` properties.
pub(super) static PROPS: &[PropSpec] = &[
    PropSpec::new("shale.dbname", DEFAULT_DBNAME, "database directory"),
    PropSpec::new(
        "shale.destroy",
        "false",
        "remove the directory before opening",
    ),
    PropSpec::new(
        "shale.sync",
        "false",
        "every write waits for an fsync of the WAL (Durability::Sync)",
    ),
    PropSpec::new(
        "shale.durability",
        "buffered",
        "buffered (WAL in the page cache), sync (fsynced) or unflushed (WAL buffered in the process)",
    ),
    PropSpec::new("shale.write_buffer_size", "", "memtable size in bytes"),
    PropSpec::new(
        "shale.max_write_buffers",
        "",
        "memtables (active + sealed) before writes stop",
    ),
    PropSpec::new(
        "shale.level0_compaction_trigger",
        "",
        "L0 files that trigger compaction",
    ),
    PropSpec::new(
        "shale.level0_slowdown_trigger",
        "",
        "L0 files at which writes slow down",
    ),
    PropSpec::new(
        "shale.level0_stop_trigger",
        "",
        "L0 files at which writes stop",
    ),
    PropSpec::new("shale.max_bytes_for_level_base", "", "target size of L1"),
    PropSpec::new("shale.level_size_multiplier", "", "level size growth"),
    PropSpec::new("shale.num_levels", "", "number of levels, L0 included"),
    PropSpec::new("shale.target_file_size", "", "target SST size"),
    PropSpec::new("shale.block_size", "", "data block size"),
    PropSpec::new(
        "shale.bloom_bits_per_key",
        "",
        "bloom filter bits per key; 0 disables filters",
    ),
    PropSpec::new(
        "shale.block_cache_size",
        "",
        "block cache bytes; 0 disables it",
    ),
    PropSpec::new("shale.max_open_files", "", "table cache size"),
    PropSpec::new("shale.compression", "", "none or lz4"),
    PropSpec::new(
        "shale.compression_start_level",
        "",
        "first compressed level",
    ),
    PropSpec::new(
        "shale.background_threads",
        "",
        "flush and compaction threads",
    ),
    PropSpec::new("shale.memtable", "", "flodb (default) or skiplist"),
    PropSpec::new("shale.membuffer_size", "", "FloDB membuffer bytes"),
    PropSpec::new(
        "shale.membuffer_prefix_bits",
        "",
        "FloDB: leading key bits shared by all keys, skipped by the bucket index (unset: learned from the keys)",
    ),
    PropSpec::new(
        "shale.drain_threads",
        "",
        "FloDB drain threads per memtable",
    ),
    PropSpec::new(
        "shale.min_blob_size",
        "",
        "values this long or longer go to blob files; 'off' keeps every value inline",
    ),
    PropSpec::new("shale.blob_file_size", "", "blob file target size"),
    PropSpec::new(
        "shale.gc_threshold",
        "",
        "garbage ratio at which a blob file is collected",
    ),
    PropSpec::new(
        "shale.gc_space_amp_target",
        "",
        "space amplification above which GC escalates",
    ),
    PropSpec::new(
        "shale.gc_mode",
        "",
        "offload (validity bitmap, stable handles) or titan (lookups and write-back)",
    ),
    PropSpec::new("shale.gc_engine", "", "background or inline"),
    PropSpec::new("shale.gc_threads", "", "background GC worker threads"),
    PropSpec::new(
        "shale.gc_bytes_per_sec",
        "",
        "GC I/O budget in bytes per second; 0 is unlimited",
    ),
];
