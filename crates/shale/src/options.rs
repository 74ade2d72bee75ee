//! Options: every knob with its default as a named constant.

use crate::fs::{Fs, RealFs};
use std::fmt;
use std::sync::Arc;

/// Default for [`Options::write_buffer_size`]: 64 MiB.
pub const DEFAULT_WRITE_BUFFER_SIZE: usize = 64 << 20;
/// Default for [`Options::max_write_buffers`].
pub const DEFAULT_MAX_WRITE_BUFFERS: usize = 2;
/// Default for [`Options::level0_compaction_trigger`].
pub const DEFAULT_L0_COMPACTION_TRIGGER: usize = 4;
/// Default for [`Options::level0_slowdown_trigger`].
pub const DEFAULT_L0_SLOWDOWN_TRIGGER: usize = 20;
/// Default for [`Options::level0_stop_trigger`].
pub const DEFAULT_L0_STOP_TRIGGER: usize = 36;
/// Default for [`Options::max_bytes_for_level_base`]: 256 MiB.
pub const DEFAULT_MAX_BYTES_FOR_LEVEL_BASE: u64 = 256 << 20;
/// Default for [`Options::level_size_multiplier`].
pub const DEFAULT_LEVEL_SIZE_MULTIPLIER: f64 = 10.0;
/// Default for [`Options::num_levels`].
pub const DEFAULT_NUM_LEVELS: usize = 7;
/// Default for [`Options::target_file_size`]: 64 MiB.
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 64 << 20;
/// Default for [`Options::block_size`]: 4 KiB.
pub const DEFAULT_BLOCK_SIZE: usize = 4096;
/// Default for [`Options::block_restart_interval`].
pub const DEFAULT_BLOCK_RESTART_INTERVAL: usize = 16;
/// Default for [`Options::bloom_bits_per_key`].
pub const DEFAULT_BLOOM_BITS_PER_KEY: u32 = 10;
/// Default for [`Options::block_cache_size`]: 64 MiB.
pub const DEFAULT_BLOCK_CACHE_SIZE: usize = 64 << 20;
/// Default for [`Options::max_open_files`].
pub const DEFAULT_MAX_OPEN_FILES: usize = 1000;
/// Default for [`Options::compression_start_level`].
pub const DEFAULT_COMPRESSION_START_LEVEL: usize = 2;
/// Default for [`Options::background_threads`].
pub const DEFAULT_BACKGROUND_THREADS: usize = 2;
/// Default for [`Options::soft_pending_compaction_bytes`]: 64 GiB.
pub const DEFAULT_SOFT_PENDING_COMPACTION_BYTES: u64 = 64 << 30;
/// Default for [`Options::hard_pending_compaction_bytes`]: 256 GiB.
pub const DEFAULT_HARD_PENDING_COMPACTION_BYTES: u64 = 256 << 30;
/// Default for [`Options::delayed_write_rate`]: 16 MiB/s.
pub const DEFAULT_DELAYED_WRITE_RATE: u64 = 16 << 20;
/// Default for [`Options::max_manifest_size`]: 64 MiB.
pub const DEFAULT_MAX_MANIFEST_SIZE: u64 = 64 << 20;
/// Default for [`Options::max_key_size`]: 1 MiB.
pub const DEFAULT_MAX_KEY_SIZE: usize = 1 << 20;
/// Default for [`Options::max_value_size`]: 256 MiB.
pub const DEFAULT_MAX_VALUE_SIZE: usize = 256 << 20;
/// Default for [`Options::membuffer_size`]: 4 MiB.
pub const DEFAULT_MEMBUFFER_SIZE: usize = 4 << 20;
/// Default for [`Options::drain_threads`]: none, so a writer that finds its bucket full drains
/// it. On two cores a drain thread only takes CPU from the writers: measured 2026-11-23 with YCSB
/// A (1M x 100 B, 16 threads), read and update p99 0.91x and 0.87x the skiplist's without one,
/// 1.40x and 1.42x with one. Give it threads on a machine with cores to spare.
pub const DEFAULT_DRAIN_THREADS: usize = 0;
/// Default for [`Options::min_blob_size`]: values of 512 bytes or more go to blob files. See
/// `docs/design/0004-kv-separation.md` for the measurement behind it.
pub const DEFAULT_MIN_BLOB_SIZE: usize = 512;
/// [`Options::min_blob_size`] that turns key-value separation off: every value stays in the SSTs.
pub const NO_BLOB_FILES: usize = usize::MAX;
/// Default for [`Options::large_value_size`]: 8 MiB. Below it a value is cheaper through the WAL
/// (group commit, no fsync of its own); at 8 MiB the WAL append and the memtable copy already
/// hold every other writer for a few milliseconds, which the own file avoids.
pub const DEFAULT_LARGE_VALUE_SIZE: usize = 8 << 20;
/// [`Options::large_value_size`] that turns writing values straight to blob files off.
pub const NO_LARGE_VALUES: usize = usize::MAX;
/// Default for [`Options::blob_file_size`]: 32 MiB.
pub const DEFAULT_BLOB_FILE_SIZE: u64 = 32 << 20;
/// Default for [`Options::gc_threshold`]: a blob file is collected once half of it is garbage.
pub const DEFAULT_GC_THRESHOLD: f64 = 0.5;
/// Default for [`Options::gc_space_amp_target`]: blob files may hold 10% more than their live
/// records before GC escalates. Measured on YCSB A (BENCHMARKS.md): this keeps the whole store
/// (SSTs, WALs and memtables included) under 1.3 times its live data, at about a third of
/// BlobDB's compaction and GC writes.
pub const DEFAULT_GC_SPACE_AMP_TARGET: f64 = 1.1;
/// Default for [`Options::gc_threads`].
pub const DEFAULT_GC_THREADS: usize = 1;
/// Default for [`Options::gc_bytes_per_sec`]: 256 MiB/s of GC reads and writes together.
pub const DEFAULT_GC_BYTES_PER_SEC: u64 = 256 << 20;

/// How a write is made durable before the call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Durability {
    /// The write is in the WAL in the operating system's page cache: it survives a crash of the
    /// process but may be lost on power loss or a kernel crash.
    #[default]
    Buffered,
    /// The WAL was fsynced (`fdatasync`) before the call returned: the write survives power loss.
    /// Concurrent writers share one fsync (group commit).
    Sync,
    /// The write is in the WAL's buffer in this process: a crash of the process may lose it. It
    /// reaches the operating system at the next [`Db::flush_wal`](crate::Db::flush_wal) or
    /// [`Db::sync_wal`](crate::Db::sync_wal), with the next `Buffered` or `Sync` write, or when
    /// the buffer fills (RocksDB's `manual_wal_flush`). Readers see it at once. For a server that
    /// writes the WAL once per round of requests and answers them after that write, as Redis
    /// writes its append-only file once per event-loop iteration; writes still reach the WAL in
    /// order, so what a crash keeps is always a prefix of what was written.
    Unflushed,
}

/// Per-write options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteOptions {
    /// How durable the write is when the call returns. Default [`Durability::Buffered`].
    pub durability: Durability,
}

/// Per-read options of a scan ([`crate::Db::range_with`], [`crate::Snapshot::range_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadOptions {
    /// Step over unreadable data instead of failing: an SST data block that fails its checksum
    /// or cannot be decoded or read, an SST that cannot be opened, or a blob record that cannot
    /// be read. The scan yields every entry it can read and records each skipped piece, with the
    /// file, offset, error and range of user keys it covered, in
    /// [`crate::iter::DbIterator::skipped`] (a repair-style salvage read, like the data a RocksDB or
    /// LevelDB repair keeps). Keys inside a skipped range may be missing or show an older
    /// version; keys outside every range are exact. Default `false`: a scan fails with a
    /// `Corruption` (or `Io`) error naming the file and offset, and yields nothing after it.
    pub skip_unreadable: bool,
}

/// Block compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Blocks are stored as they are.
    None,
    /// Blocks are compressed with LZ4 when that saves at least 1/8 of the block.
    Lz4,
}

/// What recovery does with a damaged WAL record (RocksDB's `WALRecoveryMode`).
///
/// A WAL knows what it synced: after every fsync that made new bytes durable it writes a small
/// sync marker ("the first `n` bytes of this file are durable") and hands it to the operating
/// system at once, so a process crash keeps it (`docs/format/wal.md`). A damaged record that a
/// marker covers, or that intact records follow, held acknowledged writes: it is corruption, not a
/// torn tail. Only a damaged last record past every marker can be a write that was interrupted
/// before it was acknowledged as synced. (What a marker cannot cover: the last synced record after
/// a power loss that took the marker written after its fsync.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WalRecovery {
    /// The default. A damaged last record past every sync marker (an interrupted write that was
    /// never acknowledged as synced) is cut, with a warning naming the file and offset. Any other
    /// damage fails the open with `Corruption` naming the file and offset: nothing acknowledged is
    /// dropped silently. Like RocksDB's `kTolerateCorruptedTailRecords`, with the sync markers
    /// telling a torn tail from damaged synced bytes.
    #[default]
    TolerateTornTail,
    /// Any damage fails the open with `Corruption`, even the torn tail of an interrupted write.
    /// For stores that are always closed cleanly (RocksDB's `kAbsoluteConsistency`).
    AbsoluteConsistency,
    /// Replay stops at the first damaged record and keeps the prefix before it, even when the
    /// damage is in synced bytes: it opens a store the other modes refuse, and loses the writes
    /// after the damage (logged at ERROR, naming the file and offset). Never returns wrong data.
    /// RocksDB's `kPointInTimeRecovery`; the way to open after a `Corruption` error from the
    /// default mode, once the damaged file is saved for inspection.
    PointInTime,
}

/// Which memory component absorbs writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MemtableKind {
    /// A concurrent skiplist (RocksDB's default memtable).
    SkipList,
    /// FloDB's two-level component: a small hash table (the membuffer, [`Options::membuffer_size`])
    /// over the skiplist, drained into it in sorted batches by [`Options::drain_threads`] threads
    /// (or by the writers). The default: see BENCHMARKS.md for what it gains.
    #[default]
    FloDb,
}

/// How garbage in blob files is found and collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GcMode {
    /// AegonKV's design: compaction reports every blob reference it drops, so validity is a
    /// bitmap; garbage collection copies survivors into a new physical file behind the same logical
    /// file, and references in the LSM never change (no lookups, no write-back).
    #[default]
    Offload,
    /// Titan's design, kept as the ablation baseline: validity by an LSM point lookup per record,
    /// survivors written to a new blob file and their new locations written back through the
    /// write path.
    Titan,
}

/// Where garbage-collection tasks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GcEngineKind {
    /// Background worker threads ([`Options::gc_threads`]) with their own I/O budget
    /// ([`Options::gc_bytes_per_sec`]).
    #[default]
    Background,
    /// In the background thread that schedules the task, one task at a time (deterministic; for
    /// tests).
    Inline,
}

/// Options for [`crate::Db::open`]. `Options::default()` gives a reasonable general-purpose setup.
#[derive(Clone)]
pub struct Options {
    /// Create the directory and an empty database when missing. Default `true`.
    pub create_if_missing: bool,
    /// Fail if a database already exists. Default `false`.
    pub error_if_exists: bool,
    /// Bytes of writes a memtable absorbs before it is sealed and flushed.
    /// Default [`DEFAULT_WRITE_BUFFER_SIZE`].
    pub write_buffer_size: usize,
    /// Memtables (the active one plus sealed ones waiting for flush) before writes stop.
    /// Writes slow down one memtable earlier. Default [`DEFAULT_MAX_WRITE_BUFFERS`].
    pub max_write_buffers: usize,
    /// L0 files that trigger a compaction into L1. Default [`DEFAULT_L0_COMPACTION_TRIGGER`].
    pub level0_compaction_trigger: usize,
    /// L0 files at which writes slow down. Default [`DEFAULT_L0_SLOWDOWN_TRIGGER`].
    pub level0_slowdown_trigger: usize,
    /// L0 files at which writes stop until compaction catches up. Default [`DEFAULT_L0_STOP_TRIGGER`].
    pub level0_stop_trigger: usize,
    /// Target size of L1. Default [`DEFAULT_MAX_BYTES_FOR_LEVEL_BASE`].
    pub max_bytes_for_level_base: u64,
    /// Each level below L1 targets this many times the size of the one above.
    /// Default [`DEFAULT_LEVEL_SIZE_MULTIPLIER`].
    pub level_size_multiplier: f64,
    /// Number of levels, L0 included. Default [`DEFAULT_NUM_LEVELS`].
    pub num_levels: usize,
    /// Target size of an SST written by flush or compaction. Default [`DEFAULT_TARGET_FILE_SIZE`].
    pub target_file_size: u64,
    /// Uncompressed size of a data block. Default [`DEFAULT_BLOCK_SIZE`].
    pub block_size: usize,
    /// Keys between restart points in a block. Default [`DEFAULT_BLOCK_RESTART_INTERVAL`].
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default [`DEFAULT_BLOOM_BITS_PER_KEY`].
    pub bloom_bits_per_key: u32,
    /// Capacity of the shared block cache in bytes; 0 disables it. Default [`DEFAULT_BLOCK_CACHE_SIZE`].
    pub block_cache_size: usize,
    /// Capacity of the row cache in bytes (each key's newest entry per SST, for repeated point
    /// lookups, like RocksDB's `row_cache`); 0 disables it. Default 0.
    pub row_cache_size: usize,
    /// SSTs kept open in the table cache. Default [`DEFAULT_MAX_OPEN_FILES`].
    pub max_open_files: usize,
    /// Compression for levels at or below [`Options::compression_start_level`]. Default `Lz4`.
    pub compression: Compression,
    /// The first level whose blocks are compressed; shallower levels are rewritten too soon to
    /// repay the CPU. Default [`DEFAULT_COMPRESSION_START_LEVEL`].
    pub compression_start_level: usize,
    /// Threads for flushes and compactions (at least 1; one is kept for flushes when there are two
    /// or more). Default [`DEFAULT_BACKGROUND_THREADS`].
    pub background_threads: usize,
    /// Estimated compaction debt at which writes slow down. Default
    /// [`DEFAULT_SOFT_PENDING_COMPACTION_BYTES`].
    pub soft_pending_compaction_bytes: u64,
    /// Estimated compaction debt at which writes stop. Default [`DEFAULT_HARD_PENDING_COMPACTION_BYTES`].
    pub hard_pending_compaction_bytes: u64,
    /// Write rate, in bytes per second, imposed while writes are slowed down.
    /// Default [`DEFAULT_DELAYED_WRITE_RATE`].
    pub delayed_write_rate: u64,
    /// Durability of `put`, `delete` and other calls that take no [`WriteOptions`].
    /// Default [`Durability::Buffered`].
    pub default_durability: Durability,
    /// Size at which the MANIFEST is rewritten as a snapshot. Default [`DEFAULT_MAX_MANIFEST_SIZE`].
    pub max_manifest_size: u64,
    /// What to do with a damaged WAL at recovery. Default [`WalRecovery::TolerateTornTail`].
    pub wal_recovery: WalRecovery,
    /// Which memory component absorbs writes. Default [`MemtableKind::FloDb`].
    pub memtable: MemtableKind,
    /// With [`MemtableKind::FloDb`]: bytes of the membuffer hash table (FloDB's MHT); the
    /// skiplist below it holds the rest of `write_buffer_size` (MSL). A memtable takes at most
    /// `write_buffer_size / 8`, so small memtables get small membuffers. Default
    /// [`DEFAULT_MEMBUFFER_SIZE`].
    pub membuffer_size: usize,
    /// With [`MemtableKind::FloDb`]: leading key bits shared by all keys (a common prefix), skipped
    /// before the bucket index is taken from the key (FloDB's CLHT_K). `None` learns them: each
    /// memtable skips the bits that the smallest and largest key of the memtable before it share,
    /// and the first after open those of the SSTs' whole key range (none in an empty store).
    /// Default `None`.
    pub membuffer_prefix_bits: Option<u32>,
    /// With [`MemtableKind::FloDb`]: threads per memtable that drain the membuffer into the
    /// skiplist. Default [`DEFAULT_DRAIN_THREADS`].
    pub drain_threads: usize,
    /// Values at least this long are written to blob files at flush and the SST keeps a reference
    /// (key-value separation); [`NO_BLOB_FILES`] turns it off. Default [`DEFAULT_MIN_BLOB_SIZE`].
    pub min_blob_size: usize,
    /// Size at which a flush starts a new blob file. Default [`DEFAULT_BLOB_FILE_SIZE`].
    pub blob_file_size: u64,
    /// Values at least this long are written straight to a blob file of their own when they are
    /// written, and only a reference goes through the WAL and the memtable: the value is copied
    /// once (into the file), other writers do not wait behind its WAL append, and the memtable does
    /// not fill with it. Such a write syncs its blob file (and the directory) before its WAL
    /// record exists, whatever its durability asks, so a WAL record never names a blob file that a
    /// power loss could take; the cost is one fsync per large value. [`NO_LARGE_VALUES`] turns
    /// it off; it applies with or without `min_blob_size`, and not to a database with an
    /// external log. Default [`DEFAULT_LARGE_VALUE_SIZE`].
    pub large_value_size: usize,
    /// Share of garbage (by bytes) at which a blob file becomes a GC candidate, in (0, 1].
    /// Default [`DEFAULT_GC_THRESHOLD`].
    pub gc_threshold: f64,
    /// Space amplification of the blob files (their bytes over their live record bytes) above
    /// which GC escalates: it also takes files under `gc_threshold`, highest garbage ratio first,
    /// until their garbage would bring it back to the target, and runs twice as many tasks.
    /// Writers are never stalled for it. Default [`DEFAULT_GC_SPACE_AMP_TARGET`].
    pub gc_space_amp_target: f64,
    /// How garbage is found and collected. Default [`GcMode::Offload`].
    pub gc_mode: GcMode,
    /// Where GC tasks run. Default [`GcEngineKind::Background`].
    pub gc_engine: GcEngineKind,
    /// Worker threads of the background GC engine. Default [`DEFAULT_GC_THREADS`].
    pub gc_threads: usize,
    /// I/O budget of the background GC engine in bytes per second (reads plus writes); 0 is
    /// unlimited. Default [`DEFAULT_GC_BYTES_PER_SEC`].
    pub gc_bytes_per_sec: u64,
    /// Largest key accepted. Default [`DEFAULT_MAX_KEY_SIZE`].
    pub max_key_size: usize,
    /// Largest value accepted. Default [`DEFAULT_MAX_VALUE_SIZE`].
    pub max_value_size: usize,
    /// The file system. Default [`RealFs`].
    pub fs: Arc<dyn Fs>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            write_buffer_size: DEFAULT_WRITE_BUFFER_SIZE,
            max_write_buffers: DEFAULT_MAX_WRITE_BUFFERS,
            level0_compaction_trigger: DEFAULT_L0_COMPACTION_TRIGGER,
            level0_slowdown_trigger: DEFAULT_L0_SLOWDOWN_TRIGGER,
            level0_stop_trigger: DEFAULT_L0_STOP_TRIGGER,
            max_bytes_for_level_base: DEFAULT_MAX_BYTES_FOR_LEVEL_BASE,
            level_size_multiplier: DEFAULT_LEVEL_SIZE_MULTIPLIER,
            num_levels: DEFAULT_NUM_LEVELS,
            target_file_size: DEFAULT_TARGET_FILE_SIZE,
            block_size: DEFAULT_BLOCK_SIZE,
            block_restart_interval: DEFAULT_BLOCK_RESTART_INTERVAL,
            bloom_bits_per_key: DEFAULT_BLOOM_BITS_PER_KEY,
            block_cache_size: DEFAULT_BLOCK_CACHE_SIZE,
            row_cache_size: 0,
            max_open_files: DEFAULT_MAX_OPEN_FILES,
            compression: Compression::Lz4,
            compression_start_level: DEFAULT_COMPRESSION_START_LEVEL,
            background_threads: DEFAULT_BACKGROUND_THREADS,
            soft_pending_compaction_bytes: DEFAULT_SOFT_PENDING_COMPACTION_BYTES,
            hard_pending_compaction_bytes: DEFAULT_HARD_PENDING_COMPACTION_BYTES,
            delayed_write_rate: DEFAULT_DELAYED_WRITE_RATE,
            default_durability: Durability::Buffered,
            max_manifest_size: DEFAULT_MAX_MANIFEST_SIZE,
            wal_recovery: WalRecovery::TolerateTornTail,
            memtable: MemtableKind::FloDb,
            membuffer_size: DEFAULT_MEMBUFFER_SIZE,
            membuffer_prefix_bits: None,
            drain_threads: DEFAULT_DRAIN_THREADS,
            min_blob_size: DEFAULT_MIN_BLOB_SIZE,
            large_value_size: DEFAULT_LARGE_VALUE_SIZE,
            blob_file_size: DEFAULT_BLOB_FILE_SIZE,
            gc_threshold: DEFAULT_GC_THRESHOLD,
            gc_space_amp_target: DEFAULT_GC_SPACE_AMP_TARGET,
            gc_mode: GcMode::Offload,
            gc_engine: GcEngineKind::Background,
            gc_threads: DEFAULT_GC_THREADS,
            gc_bytes_per_sec: DEFAULT_GC_BYTES_PER_SEC,
            max_key_size: DEFAULT_MAX_KEY_SIZE,
            max_value_size: DEFAULT_MAX_VALUE_SIZE,
            fs: Arc::new(RealFs),
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_write_buffers", &self.max_write_buffers)
            .field("level0_compaction_trigger", &self.level0_compaction_trigger)
            .field("level0_slowdown_trigger", &self.level0_slowdown_trigger)
            .field("level0_stop_trigger", &self.level0_stop_trigger)
            .field("max_bytes_for_level_base", &self.max_bytes_for_level_base)
            .field("level_size_multiplier", &self.level_size_multiplier)
            .field("num_levels", &self.num_levels)
            .field("target_file_size", &self.target_file_size)
            .field("block_size", &self.block_size)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("block_cache_size", &self.block_cache_size)
            .field("row_cache_size", &self.row_cache_size)
            .field("compression", &self.compression)
            .field("compression_start_level", &self.compression_start_level)
            .field("background_threads", &self.background_threads)
            .field("default_durability", &self.default_durability)
            .field("memtable", &self.memtable)
            .field("membuffer_size", &self.membuffer_size)
            .field("membuffer_prefix_bits", &self.membuffer_prefix_bits)
            .field("drain_threads", &self.drain_threads)
            .field("min_blob_size", &self.min_blob_size)
            .field("blob_file_size", &self.blob_file_size)
            .field("gc_threshold", &self.gc_threshold)
            .field("gc_space_amp_target", &self.gc_space_amp_target)
            .field("gc_mode", &self.gc_mode)
            .field("gc_engine", &self.gc_engine)
            .field("gc_threads", &self.gc_threads)
            .field("gc_bytes_per_sec", &self.gc_bytes_per_sec)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Checks that the options are usable together.
    ///
    /// # Errors
    /// `InvalidArgument` naming the offending option.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |what: &str| {
            Err(crate::Error::invalid_argument(format!(
                "invalid option: {what}"
            )))
        };
        if self.write_buffer_size < 4096 {
            return bad("write_buffer_size must be at least 4096");
        }
        if self.max_write_buffers < 2 {
            return bad("max_write_buffers must be at least 2");
        }
        if self.num_levels < 2 || self.num_levels > 16 {
            return bad("num_levels must be between 2 and 16");
        }
        if self.level0_compaction_trigger == 0
            || self.level0_slowdown_trigger < self.level0_compaction_trigger
            || self.level0_stop_trigger < self.level0_slowdown_trigger
        {
            return bad("need 0 < level0_compaction_trigger <= level0_slowdown_trigger <= level0_stop_trigger");
        }
        if self.level_size_multiplier < 2.0 || !self.level_size_multiplier.is_finite() {
            return bad("level_size_multiplier must be at least 2");
        }
        if self.block_size < 64 || self.block_size > (64 << 20) {
            return bad("block_size must be between 64 bytes and 64 MiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if self.target_file_size < 1024 || self.max_bytes_for_level_base < 1024 {
            return bad("target_file_size and max_bytes_for_level_base must be at least 1024");
        }
        if self.background_threads == 0 {
            return bad("background_threads must be at least 1");
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        if self.soft_pending_compaction_bytes > self.hard_pending_compaction_bytes {
            return bad(
                "soft_pending_compaction_bytes must not exceed hard_pending_compaction_bytes",
            );
        }
        if self.delayed_write_rate == 0 {
            return bad("delayed_write_rate must be positive");
        }
        if self.max_key_size == 0 || self.max_key_size > (64 << 20) {
            return bad("max_key_size must be between 1 byte and 64 MiB");
        }
        if self.max_value_size > (1 << 30) {
            return bad("max_value_size must be at most 1 GiB");
        }
        if self.min_blob_size == 0 {
            return bad("min_blob_size must be at least 1 (NO_BLOB_FILES turns separation off)");
        }
        // A blob file may overshoot its target by one value (at most 1 GiB); its format caps it at
        // 4 GiB.
        if self.blob_file_size < 1024 || self.blob_file_size > (1 << 30) {
            return bad("blob_file_size must be between 1 KiB and 1 GiB");
        }
        if !(self.gc_threshold > 0.0 && self.gc_threshold <= 1.0) {
            return bad("gc_threshold must be in (0, 1]");
        }
        if !(self.gc_space_amp_target >= 1.0 && self.gc_space_amp_target.is_finite()) {
            return bad("gc_space_amp_target must be at least 1");
        }
        if self.gc_threads == 0 || self.gc_threads > 64 {
            return bad("gc_threads must be between 1 and 64");
        }
        if self.memtable == MemtableKind::FloDb {
            if self.membuffer_size < 64 {
                return bad("membuffer_size must be at least 64 bytes");
            }
            if self
                .membuffer_prefix_bits
                .is_some_and(|bits| bits as usize > 8 * self.max_key_size)
            {
                return bad("membuffer_prefix_bits must be at most 8 * max_key_size");
            }
            if self.drain_threads > 16 {
                return bad("drain_threads must be at most 16");
            }
        }
        Ok(())
    }

    /// The compression used for SSTs written to `level`.
    pub fn compression_for_level(&self, level: usize) -> Compression {
        if level >= self.compression_start_level {
            self.compression
        } else {
            Compression::None
        }
    }

    /// True when values of `len` bytes are written to blob files.
    pub fn separates(&self, len: usize) -> bool {
        len >= self.min_blob_size
    }

    /// The target size of `level` (L1 and deeper).
    pub fn max_bytes_for_level(&self, level: usize) -> u64 {
        let mut bytes = self.max_bytes_for_level_base as f64;
        for _ in 1..level {
            bytes *= self.level_size_multiplier;
        }
        bytes as u64
    }
}
