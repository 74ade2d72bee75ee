//! `-db titandb` and `-db diffkv`: Shale, configured by the AegonKV evaluation's own property
//! files (`titandb/aegonkv.properties`, `titandb/titandb.properties`,
//! `titandb/diffkv.properties`, `diffkv/diffkv.properties`).
//!
//! Every name the fork's Titan and DiffKV bindings read is known here. [`translate`] turns each
//! into the `shale.*` property with the same meaning, reports the ones whose value is already what
//! Shale does, and the ones Shale has no equivalent for; the run prints all three lists at start
//! ([`Translation::report`]). A `shale.*` property given as well overrides the translation.
//!
//! The choice of GC follows the AegonKV switches: `use_bitmap` (validity from compaction) or
//! `gc_offload` (GC off the write path) selects Shale's offload mode; both false (Titan's own GC,
//! as `titandb.properties` sets them) selects Shale's Titan mode. `disable_background_gc=true`
//! leaves only whole dead blob files to be dropped. `disable_wal=true` cannot turn Shale's WAL off:
//! it maps to [`shale::Durability::Unflushed`] (writes are logged in batches from a buffer in the
//! process), the closest Shale has.

use crate::error::{Error, Result};
use crate::props::{PropSpec, Properties};

/// Declares a table of `<prefix>.<name>` properties.
macro_rules! titan_family {
    ($table:ident, $prefix:literal, [$(($name:literal, $default:literal, $help:literal)),* $(,)?]) => {
        /// Properties of this backend, as the AegonKV fork names them.
        pub(super) static $table: &[PropSpec] = &[
            $(PropSpec::new(concat!($prefix, ".", $name), $default, $help)),*
        ];
    };
}

titan_family!(
    TITANDB_PROPS,
    "titandb",
    [
        ("dbname", "./bench-db/titandb", "database directory"),
        ("format", "single", "record layout; only single exists"),
        ("destroy", "false", "remove the directory before opening"),
        (
            "mergeupdate",
            "false",
            "merge-operator updates (no equivalent)"
        ),
        ("compression", "no", "no, or a compression (Shale's is lz4)"),
        ("target_file_size_base", "0", "target SST size"),
        (
            "target_file_size_multiplier",
            "0",
            "SST size growth per level"
        ),
        ("max_bytes_for_level_base", "0", "target size of L1"),
        ("max_bytes_for_level_multiplier", "10", "level size growth"),
        ("write_buffer_size", "0", "memtable size"),
        (
            "max_write_buffer_number",
            "0",
            "memtables before writes stop"
        ),
        (
            "compaction_pri",
            "-1",
            "compaction priority (no equivalent)"
        ),
        (
            "max_open_files",
            "-1",
            "table cache size; -1 keeps every file open"
        ),
        (
            "level0_file_num_compaction_trigger",
            "0",
            "L0 files that trigger compaction"
        ),
        (
            "level0_slowdown_writes_trigger",
            "0",
            "L0 files at which writes slow down"
        ),
        (
            "level0_stop_writes_trigger",
            "0",
            "L0 files at which writes stop"
        ),
        (
            "use_direct_io_for_flush_compaction",
            "false",
            "O_DIRECT for background I/O"
        ),
        ("use_direct_reads", "false", "O_DIRECT for reads"),
        ("allow_mmap_writes", "false", "mmap for writes"),
        ("allow_mmap_reads", "false", "mmap for reads"),
        ("cache_size", "0", "block cache bytes"),
        ("compressed_cache_size", "0", "compressed block cache bytes"),
        (
            "bloom_bits",
            "-1",
            "bloom filter bits per key; 0 or less: none"
        ),
        (
            "increase_parallelism",
            "false",
            "RocksDB's IncreaseParallelism()"
        ),
        (
            "optimize_level_style_compaction",
            "false",
            "RocksDB's OptimizeLevelStyleCompaction()"
        ),
        ("optionsfile", "", "a RocksDB options file (no equivalent)"),
        ("env_uri", "", "a RocksDB Env URI (no equivalent)"),
        ("fs_uri", "", "a RocksDB FileSystem URI (no equivalent)"),
        ("max_background_compactions", "0", "compaction threads"),
        ("max_background_flushes", "0", "flush threads"),
        ("disable_wal", "false", "write without a WAL"),
        ("disable_background_gc", "false", "no background blob GC"),
        ("titan_max_background_gc", "1", "GC threads"),
        (
            "blob_file_discardable_ratio",
            "0.5",
            "garbage ratio at which a blob file is collected"
        ),
        ("blob_db_file_size", "268435456", "blob file target size"),
        (
            "titan_min_blob_size",
            "4096",
            "smallest value stored in a blob file"
        ),
        (
            "max_gc_batch_size",
            "1073741824",
            "bytes of blob files per GC job"
        ),
        (
            "min_gc_batch_size",
            "134217728",
            "least bytes of blob files per GC job"
        ),
        (
            "titan_gc_time_path",
            "",
            "file for Titan's GC time breakdown"
        ),
        ("level_merge", "false", "Titan's level merge"),
        ("range_merge", "false", "Titan's range merge"),
        ("max_sorted_runs", "20", "sorted runs before a range merge"),
        (
            "use_bitmap",
            "false",
            "AegonKV: validity bitmaps fed by compaction"
        ),
        ("gc_offload", "false", "AegonKV: GC on the offload engine"),
        ("binary_file_path", "", "AegonKV: the SmartSSD GC kernel"),
        (
            "enable_pipelined_write",
            "false",
            "RocksDB's pipelined write"
        ),
        ("unordered_write", "false", "RocksDB's unordered write"),
        (
            "enable_multi_batch_write",
            "false",
            "TiKV RocksDB's multi-batch write"
        ),
    ]
);

titan_family!(
    DIFFKV_PROPS,
    "diffkv",
    [
        ("dbname", "./bench-db/diffkv", "database directory"),
        ("format", "single", "record layout; only single exists"),
        ("destroy", "false", "remove the directory before opening"),
        (
            "mergeupdate",
            "false",
            "merge-operator updates (no equivalent)"
        ),
        ("compression", "no", "no, or a compression (Shale's is lz4)"),
        ("target_file_size_base", "0", "target SST size"),
        (
            "target_file_size_multiplier",
            "0",
            "SST size growth per level"
        ),
        ("max_bytes_for_level_base", "0", "target size of L1"),
        ("write_buffer_size", "0", "memtable size"),
        (
            "max_write_buffer_number",
            "0",
            "memtables before writes stop"
        ),
        (
            "compaction_pri",
            "-1",
            "compaction priority (no equivalent)"
        ),
        (
            "max_open_files",
            "-1",
            "table cache size; -1 keeps every file open"
        ),
        (
            "level0_file_num_compaction_trigger",
            "0",
            "L0 files that trigger compaction"
        ),
        (
            "level0_slowdown_writes_trigger",
            "0",
            "L0 files at which writes slow down"
        ),
        (
            "level0_stop_writes_trigger",
            "0",
            "L0 files at which writes stop"
        ),
        (
            "use_direct_io_for_flush_compaction",
            "false",
            "O_DIRECT for background I/O"
        ),
        ("use_direct_reads", "false", "O_DIRECT for reads"),
        ("allow_mmap_writes", "false", "mmap for writes"),
        ("allow_mmap_reads", "false", "mmap for reads"),
        ("cache_size", "0", "block cache bytes"),
        ("compressed_cache_size", "0", "compressed block cache bytes"),
        (
            "bloom_bits",
            "-1",
            "bloom filter bits per key; 0 or less: none"
        ),
        (
            "increase_parallelism",
            "false",
            "RocksDB's IncreaseParallelism()"
        ),
        (
            "optimize_level_style_compaction",
            "false",
            "RocksDB's OptimizeLevelStyleCompaction()"
        ),
        ("optionsfile", "", "a RocksDB options file (no equivalent)"),
        ("env_uri", "", "a RocksDB Env URI (no equivalent)"),
        ("fs_uri", "", "a RocksDB FileSystem URI (no equivalent)"),
        ("max_background_compactions", "0", "compaction threads"),
        ("max_background_flushes", "0", "flush threads"),
        ("disable_wal", "false", "write without a WAL"),
        ("titan_max_background_gc", "1", "GC threads"),
        (
            "blob_file_discardable_ratio",
            "0.5",
            "garbage ratio at which a blob file is collected"
        ),
        ("blob_db_file_size", "268435456", "blob file target size"),
        (
            "titan_min_blob_size",
            "4096",
            "smallest value stored in a blob file"
        ),
        (
            "max_gc_batch_size",
            "1073741824",
            "bytes of blob files per GC job"
        ),
        (
            "min_gc_batch_size",
            "134217728",
            "least bytes of blob files per GC job"
        ),
        ("level_merge", "false", "DiffKV's level merge"),
        ("range_merge", "false", "DiffKV's range merge"),
        ("lazy_merge", "false", "DiffKV's lazy merge"),
        (
            "sep_before_flush",
            "false",
            "DiffKV: separate values before flush"
        ),
        ("max_sorted_runs", "20", "sorted runs before a range merge"),
        ("block_write_size", "0", "DiffKV's block write size"),
        (
            "intra_compaction",
            "false",
            "DiffKV's intra-level compaction"
        ),
    ]
);

/// `max_open_files=-1` ("keep every file open") becomes this many table-cache entries.
pub const OPEN_FILES_FOR_UNLIMITED: u64 = 65_536;
/// RocksDB's block cache when none is configured (`cache_size=0` in the fork's binding).
pub const ROCKSDB_DEFAULT_CACHE: u64 = 8 << 20;
/// `disable_background_gc=true`: a garbage ratio so high that only blob files with no live record
/// are collected, and a space-amplification target GC never escalates for.
pub const NO_GC_THRESHOLD: &str = "1.0";
/// See [`NO_GC_THRESHOLD`].
pub const NO_GC_SPACE_AMP_TARGET: &str = "1000000";
/// Background threads of RocksDB's `IncreaseParallelism()` with its default argument.
pub const INCREASE_PARALLELISM_THREADS: u64 = 16;

/// The outcome of [`translate`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Translation {
    /// `shale.*` properties to set, in order.
    pub set: Vec<(String, String)>,
    /// One line per fork property (or group of them) that became `shale.*` settings.
    pub mapped: Vec<String>,
    /// Fork properties whose value is what Shale does anyway.
    pub same: Vec<String>,
    /// Fork properties Shale has no equivalent for, each with the reason.
    pub no_equivalent: Vec<String>,
}

impl Translation {
    fn map(&mut self, from: String, to: &[(&str, String)]) {
        let targets: Vec<String> = to.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.mapped
            .push(format!("{from} -> {}", targets.join(", ")));
        self.set
            .extend(to.iter().map(|(k, v)| (k.to_string(), v.clone())));
    }

    /// The lines printed at start.
    pub fn report(&self, db: &str) -> Vec<String> {
        let mut out = vec![format!(
            "Property mapping: -db {db} runs Shale with the {db}.* properties translated"
        )];
        out.extend(self.mapped.iter().map(|l| format!("  {l}")));
        if !self.same.is_empty() {
            out.push("Already Shale's behaviour (nothing to set):".into());
            out.extend(self.same.iter().map(|l| format!("  {l}")));
        }
        if !self.no_equivalent.is_empty() {
            out.push("No Shale equivalent (ignored):".into());
            out.extend(self.no_equivalent.iter().map(|l| format!("  {l}")));
        }
        out
    }
}

/// Translates the `<prefix>.*` properties (`prefix` is `titandb` or `diffkv`) into `shale.*`
/// settings. Unset properties keep Shale's defaults.
///
/// # Errors
/// `Property` for malformed values and for `format` other than `single`.
pub fn translate(props: &Properties, prefix: &str) -> Result<Translation> {
    let mut t = Translation::default();
    let key = |s: &str| format!("{prefix}.{s}");
    let shown = |s: &str| format!("{prefix}.{s}={}", props.get_str(&key(s), ""));
    let get = |s: &str| props.get(&key(s));
    let int = |s: &str| props.get_i64(&key(s), 0);
    let flag = |s: &str| props.get_bool(&key(s), false);

    for s in ["dbname", "destroy"] {
        if let Some(v) = get(s) {
            t.map(shown(s), &[(&format!("shale.{s}"), v.to_string())]);
        }
    }
    if get("format").is_some() {
        props.get_choice(&key("format"), "single", &["single"])?;
        t.same
            .push(format!("{} (one value per record)", shown("format")));
    }
    match get("compression") {
        None => {}
        Some("no") => t.map(
            shown("compression"),
            &[("shale.compression", "none".into())],
        ),
        Some(_) => t.map(
            format!("{} (Shale compresses with lz4 only)", shown("compression")),
            &[
                ("shale.compression", "lz4".into()),
                ("shale.compression_start_level", "0".into()),
            ],
        ),
    }
    // Sizes the fork's binding sets only when non-zero (zero keeps RocksDB's default).
    for (s, to) in [
        ("target_file_size_base", "shale.target_file_size"),
        ("max_bytes_for_level_base", "shale.max_bytes_for_level_base"),
        (
            "max_bytes_for_level_multiplier",
            "shale.level_size_multiplier",
        ),
        ("write_buffer_size", "shale.write_buffer_size"),
        (
            "level0_file_num_compaction_trigger",
            "shale.level0_compaction_trigger",
        ),
        (
            "level0_slowdown_writes_trigger",
            "shale.level0_slowdown_trigger",
        ),
        ("level0_stop_writes_trigger", "shale.level0_stop_trigger"),
    ] {
        if get(s).is_some() {
            match int(s)? {
                0 => t
                    .same
                    .push(format!("{} (unset: the engine's default)", shown(s))),
                v if v < 0 => {
                    return Err(Error::property(format!(
                        "bad value for property {}: must not be negative",
                        key(s)
                    )))
                }
                v => t.map(shown(s), &[(to, v.to_string())]),
            }
        }
    }
    if get("max_write_buffer_number").is_some() {
        match int("max_write_buffer_number")? {
            v if v <= 0 => t.same.push(format!(
                "{} (unset: the engine's default)",
                shown("max_write_buffer_number")
            )),
            1 => t.map(
                format!(
                    "{} (Shale needs two: one filling, one flushing)",
                    shown("max_write_buffer_number")
                ),
                &[("shale.max_write_buffers", "2".into())],
            ),
            v => t.map(
                shown("max_write_buffer_number"),
                &[("shale.max_write_buffers", v.to_string())],
            ),
        }
    }
    if get("target_file_size_multiplier").is_some() {
        match int("target_file_size_multiplier")? {
            0 | 1 => t.same.push(format!(
                "{} (SSTs have one target size at every level)",
                shown("target_file_size_multiplier")
            )),
            _ => t.no_equivalent.push(format!(
                "{} (SSTs have one target size at every level)",
                shown("target_file_size_multiplier")
            )),
        }
    }
    if get("max_open_files").is_some() {
        match int("max_open_files")? {
            0 => {}
            v if v < 0 => t.map(
                format!("{} (keep every file open)", shown("max_open_files")),
                &[("shale.max_open_files", OPEN_FILES_FOR_UNLIMITED.to_string())],
            ),
            v => t.map(
                shown("max_open_files"),
                &[("shale.max_open_files", v.max(16).to_string())],
            ),
        }
    }
    if get("cache_size").is_some() {
        match int("cache_size")? {
            v if v <= 0 => t.map(
                format!("{} (RocksDB's default block cache)", shown("cache_size")),
                &[("shale.block_cache_size", ROCKSDB_DEFAULT_CACHE.to_string())],
            ),
            v => t.map(
                shown("cache_size"),
                &[("shale.block_cache_size", v.to_string())],
            ),
        }
    }
    if get("bloom_bits").is_some() {
        let bits = int("bloom_bits")?.max(0);
        t.map(
            shown("bloom_bits"),
            &[("shale.bloom_bits_per_key", bits.to_string())],
        );
    }
    let compactions = int("max_background_compactions")?.max(0);
    let flushes = int("max_background_flushes")?.max(0);
    if compactions + flushes > 0 {
        t.map(
            format!(
                "{} + {}",
                shown("max_background_compactions"),
                shown("max_background_flushes")
            ),
            &[(
                "shale.background_threads",
                (compactions + flushes).to_string(),
            )],
        );
    } else if get("max_background_compactions").is_some() || get("max_background_flushes").is_some()
    {
        t.same
            .push("max_background_compactions/flushes of 0 (unset: the engine's default)".into());
    }
    if flag("increase_parallelism")? {
        if compactions + flushes == 0 {
            t.map(
                shown("increase_parallelism"),
                &[(
                    "shale.background_threads",
                    INCREASE_PARALLELISM_THREADS.to_string(),
                )],
            );
        } else {
            t.no_equivalent.push(format!(
                "{} (background threads come from max_background_*)",
                shown("increase_parallelism")
            ));
        }
    }
    if get("disable_wal").is_some() {
        if flag("disable_wal")? {
            t.map(
                format!(
                    "{} (Shale always logs: writes reach the WAL in batches from a buffer in the process)",
                    shown("disable_wal")
                ),
                &[("shale.durability", "unflushed".into())],
            );
        } else {
            t.same.push(format!(
                "{} (writes are logged; no fsync per write)",
                shown("disable_wal")
            ));
        }
    }
    translate_blob(props, prefix, &mut t)?;
    translate_unsupported(props, prefix, &mut t)?;
    Ok(t)
}

/// The key-value separation and GC properties.
fn translate_blob(props: &Properties, prefix: &str, t: &mut Translation) -> Result<()> {
    let key = |s: &str| format!("{prefix}.{s}");
    let shown = |s: &str| format!("{prefix}.{s}={}", props.get_str(&key(s), ""));
    let get = |s: &str| props.get(&key(s));
    if get("titan_min_blob_size").is_some() {
        match props.get_u64(&key("titan_min_blob_size"), 0)? {
            0 => t.map(
                format!(
                    "{} (every value in blob files)",
                    shown("titan_min_blob_size")
                ),
                &[("shale.min_blob_size", "1".into())],
            ),
            v => t.map(
                shown("titan_min_blob_size"),
                &[("shale.min_blob_size", v.to_string())],
            ),
        }
    }
    if let Some(v) = get("blob_db_file_size") {
        t.map(
            shown("blob_db_file_size"),
            &[("shale.blob_file_size", v.into())],
        );
    }
    if let Some(v) = get("blob_file_discardable_ratio") {
        t.map(
            shown("blob_file_discardable_ratio"),
            &[("shale.gc_threshold", v.into())],
        );
    }
    if let Some(v) = get("titan_max_background_gc") {
        let n = props.get_u64(&key("titan_max_background_gc"), 1)?.max(1);
        let note = if v == "0" { " (at least one)" } else { "" };
        t.map(
            format!("{}{note}", shown("titan_max_background_gc")),
            &[("shale.gc_threads", n.to_string())],
        );
    }
    let bitmap = props.get_bool(&key("use_bitmap"), false)?;
    let offload = props.get_bool(&key("gc_offload"), false)?;
    if get("use_bitmap").is_some() || get("gc_offload").is_some() {
        let from = format!("{}, {}", shown("use_bitmap"), shown("gc_offload"));
        if bitmap || offload {
            let note = if bitmap && offload {
                "validity bitmaps fed by compaction, GC on the background engine"
            } else {
                "Shale's offload mode always pairs validity bitmaps with GC off the write path"
            };
            t.map(
                format!("{from} ({note})"),
                &[("shale.gc_mode", "offload".into())],
            );
        } else {
            t.map(
                format!("{from} (Titan's GC: validity by lookup, new locations written back)"),
                &[("shale.gc_mode", "titan".into())],
            );
        }
    }
    if props.get_bool(&key("disable_background_gc"), false)? {
        t.map(
            format!(
                "{} (only blob files with no live record are dropped)",
                shown("disable_background_gc")
            ),
            &[
                ("shale.gc_threshold", NO_GC_THRESHOLD.into()),
                ("shale.gc_space_amp_target", NO_GC_SPACE_AMP_TARGET.into()),
            ],
        );
    } else if get("disable_background_gc").is_some() {
        t.same.push(format!(
            "{} (GC runs in the background)",
            shown("disable_background_gc")
        ));
    }
    Ok(())
}

/// Properties with no Shale equivalent: reported when they ask for something, or listed as
/// Shale's behaviour when their value is the neutral one.
fn translate_unsupported(props: &Properties, prefix: &str, t: &mut Translation) -> Result<()> {
    let key = |s: &str| format!("{prefix}.{s}");
    let shown = |s: &str| format!("{prefix}.{s}={}", props.get_str(&key(s), ""));
    // Booleans whose `false` is what Shale does.
    for (s, why) in [
        (
            "use_direct_io_for_flush_compaction",
            "Shale's I/O goes through the page cache",
        ),
        (
            "use_direct_reads",
            "Shale's I/O goes through the page cache",
        ),
        ("allow_mmap_writes", "Shale writes with write(2)"),
        ("allow_mmap_reads", "Shale reads with pread(2)"),
        ("optimize_level_style_compaction", "a RocksDB preset"),
        (
            "mergeupdate",
            "updates are read-modify-write, no merge operator",
        ),
        ("level_merge", "no level merge"),
        ("range_merge", "no range merge"),
        ("lazy_merge", "DiffKV's lazy merge"),
        ("sep_before_flush", "values are separated at flush"),
        ("intra_compaction", "DiffKV's intra-level compaction"),
        ("enable_pipelined_write", "Shale commits writes in groups"),
        ("unordered_write", "Shale commits writes in groups"),
        ("enable_multi_batch_write", "Shale commits writes in groups"),
    ] {
        if props.get(&key(s)).is_some() {
            let line = format!("{} ({why})", shown(s));
            if props.get_bool(&key(s), false)? {
                t.no_equivalent.push(line);
            } else {
                t.same.push(line);
            }
        }
    }
    // Values with no counterpart at all.
    for (s, neutral, why) in [
        (
            "compaction_pri",
            "-1",
            "Shale picks the file whose range overlaps least",
        ),
        (
            "compressed_cache_size",
            "0",
            "Shale has no compressed block cache",
        ),
        (
            "max_gc_batch_size",
            "",
            "a Shale GC task collects one blob file",
        ),
        (
            "min_gc_batch_size",
            "",
            "a Shale GC task collects one blob file",
        ),
        ("max_sorted_runs", "", "used by range merge only"),
        ("block_write_size", "0", "DiffKV's block writes"),
        (
            "titan_gc_time_path",
            "",
            "Shale reports GC time as shale.gc.micros in -statistics",
        ),
        (
            "binary_file_path",
            "",
            "the SmartSSD GC kernel: Shale's GC engine runs on the host",
        ),
        ("optionsfile", "", "a RocksDB options file"),
        ("env_uri", "", "a RocksDB Env"),
        ("fs_uri", "", "a RocksDB FileSystem"),
    ] {
        if let Some(v) = props.get(&key(s)) {
            let line = format!("{} ({why})", shown(s));
            if v == neutral {
                t.same.push(line);
            } else {
                t.no_equivalent.push(line);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::props::Origin;

    fn props(text: &str) -> Properties {
        let mut p = Properties::new();
        for (line, k, v) in crate::props::parse_java_properties(text, "t").unwrap() {
            p.set(
                k,
                v,
                Origin::File {
                    path: "t".into(),
                    line,
                },
            );
        }
        p
    }

    fn value<'a>(t: &'a Translation, k: &str) -> Option<&'a str> {
        t.set
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn aegonkv_switches_select_offload_and_titan_switches_titan_mode() {
        let t = translate(
            &props("titandb.use_bitmap=true\ntitandb.gc_offload=true\n"),
            "titandb",
        )
        .unwrap();
        assert_eq!(value(&t, "shale.gc_mode"), Some("offload"));
        let t = translate(
            &props("titandb.use_bitmap=false\ntitandb.gc_offload=false\ntitandb.disable_background_gc=true\n"),
            "titandb",
        )
        .unwrap();
        assert_eq!(value(&t, "shale.gc_mode"), Some("titan"));
        assert_eq!(value(&t, "shale.gc_threshold"), Some(NO_GC_THRESHOLD));
    }

    #[test]
    fn zero_sizes_keep_defaults_and_neutral_values_are_shales_behaviour() {
        let t = translate(
            &props(
                "diffkv.write_buffer_size=0\ndiffkv.use_direct_reads=false\ndiffkv.lazy_merge = false\n\
                 diffkv.block_write_size = 0\ndiffkv.titan_min_blob_size=0\n",
            ),
            "diffkv",
        )
        .unwrap();
        assert_eq!(value(&t, "shale.write_buffer_size"), None);
        assert_eq!(value(&t, "shale.min_blob_size"), Some("1"));
        assert!(t.no_equivalent.is_empty(), "{:?}", t.no_equivalent);
        assert_eq!(t.same.len(), 4, "{:?}", t.same);
    }

    #[test]
    fn a_format_other_than_single_is_an_error() {
        assert!(translate(&props("titandb.format=row\n"), "titandb").is_err());
    }
}
