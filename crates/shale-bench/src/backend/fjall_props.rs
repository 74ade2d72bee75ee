//! Properties of the `fjall` backend (fjall 3). Defaults are fjall's own unless noted.

use crate::props::PropSpec;

/// Default database directory.
pub const DEFAULT_DBNAME: &str = "./bench-db/fjall";

/// The `fjall.*` properties.
pub(super) static PROPS: &[PropSpec] = &[
    PropSpec::new("fjall.dbname", DEFAULT_DBNAME, "database directory"),
    PropSpec::new(
        "fjall.destroy",
        "false",
        "remove the directory before opening",
    ),
    PropSpec::new(
        "fjall.cache_size",
        "",
        "block and blob cache bytes (fjall's default when unset)",
    ),
    PropSpec::new(
        "fjall.worker_threads",
        "",
        "background flush and compaction threads (fjall's default when unset)",
    ),
    PropSpec::new(
        "fjall.max_memtable_size",
        "",
        "memtable size of the keyspace (fjall's default when unset)",
    ),
    PropSpec::new(
        "fjall.kv_separation",
        "false",
        "store large values in blob files",
    ),
    PropSpec::new(
        "fjall.separation_threshold",
        "1024",
        "smallest value separated into a blob file",
    ),
    PropSpec::new("fjall.blob_file_size", "67108864", "blob file target size"),
    PropSpec::new(
        "fjall.blob_staleness_threshold",
        "0.25",
        "garbage ratio at which a blob file is collected",
    ),
    PropSpec::new(
        "fjall.blob_age_cutoff",
        "0.25",
        "fraction of oldest blob files eligible for collection",
    ),
    PropSpec::new("fjall.sync", "false", "fsync the journal after every write"),
];
