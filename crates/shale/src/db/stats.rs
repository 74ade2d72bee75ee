//! Engine statistics: counters bumped on the hot paths, and the plain-data snapshot users read.

use std::sync::atomic::{AtomicU64, Ordering};

/// A point-in-time view of the engine's statistics (plain data; cheap to copy around).
///
/// Byte counters are cumulative since open. Where RocksDB has a statistic with the same meaning the
/// field documents its name, so tools can print both side by side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Bytes of keys and values accepted from the user (`rocksdb.bytes.written`).
    pub user_bytes_written: u64,
    /// Write calls (`put`, `delete`, `write`) that succeeded.
    pub writes: u64,
    /// Bytes appended to the WAL (`rocksdb.wal.bytes`).
    pub wal_bytes_written: u64,
    /// WAL fsyncs (`rocksdb.wal.synced`). Group commit shares one among many writers.
    pub wal_syncs: u64,
    /// Bytes of SSTs written by flushes (`rocksdb.flush.write.bytes`).
    pub flush_bytes_written: u64,
    /// Completed flushes.
    pub flushes: u64,
    /// Bytes of blob files written by flushes (`rocksdb.blobdb.blob.file.bytes.written`).
    pub blob_bytes_written: u64,
    /// Bytes read by compactions (`rocksdb.compact.read.bytes`).
    pub compaction_bytes_read: u64,
    /// Bytes written by compactions (`rocksdb.compact.write.bytes`).
    pub compaction_bytes_written: u64,
    /// Completed compactions, trivial moves excluded.
    pub compactions: u64,
    /// Files moved to the next level without being rewritten.
    pub trivial_moves: u64,
    /// Microseconds writers spent slowed down or stopped (`rocksdb.stall.micros`).
    pub stall_micros: u64,
    /// Microseconds of `stall_micros` spent fully stopped (not merely slowed down).
    pub stop_micros: u64,
    /// Files per level, L0 first.
    pub files_per_level: Vec<usize>,
    /// Bytes of SSTs per level, L0 first.
    pub bytes_per_level: Vec<u64>,
    /// Block cache lookups that found the block (`rocksdb.block.cache.hit`).
    pub block_cache_hits: u64,
    /// Block cache lookups that read the block from disk (`rocksdb.block.cache.miss`).
    pub block_cache_misses: u64,
    /// Bytes held by the block cache.
    pub block_cache_bytes: u64,
    /// Bytes of the active and sealed memtables.
    pub memtable_bytes: u64,
    /// Sealed memtables waiting for flush.
    pub sealed_memtables: u64,
    /// With the FloDB memtable: the leading key bits the active memtable's membuffer skips before
    /// its bucket index, fixed by the options or learned from the keys
    /// ([`crate::Options::membuffer_prefix_bits`]); `None` with the skiplist.
    pub membuffer_prefix_bits: Option<u32>,
    /// Estimated bytes compaction must rewrite to meet the level targets.
    pub pending_compaction_bytes: u64,
    /// Estimated bytes of live user data: keys and values of the newest versions, as recorded in SST
    /// properties (entries shadowed in upper levels are counted once per level, so this is an upper
    /// bound) plus the memtables (`rocksdb.estimate-live-data-size`).
    pub live_data_bytes: u64,
    /// Bytes of all files the database keeps on disk: SSTs, WALs, MANIFEST.
    pub on_disk_bytes: u64,
    /// Sequence number of the last write.
    pub last_sequence: u64,
    /// Live snapshots.
    pub snapshots: u64,
    /// Bytes of blob records still referenced by the newest version of some key or by a live
    /// snapshot (`rocksdb.blobdb.live-blob-file-size` counts whole files; this counts records).
    pub blob_live_bytes: u64,
    /// Bytes of blob records no reader can reach any more, waiting for garbage collection.
    pub blob_garbage_bytes: u64,
    /// Blob files in the current version.
    pub blob_files: u64,
    /// Bytes on disk divided by live logical bytes (1.0 means no overhead; 0.0 for an empty store).
    pub space_amplification: f64,
    /// Bytes garbage collection read (`rocksdb.blobdb.gc.bytes.read` in spirit).
    pub gc_bytes_read: u64,
    /// Bytes garbage collection wrote (`rocksdb.blobdb.gc.bytes.relocated` in spirit).
    pub gc_bytes_written: u64,
    /// Completed garbage-collection runs.
    pub gc_runs: u64,
    /// Microseconds spent in garbage-collection tasks (copying survivors, not installing).
    pub gc_micros: u64,
}

/// Counters updated concurrently by writers and background threads.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub user_bytes_written: AtomicU64,
    pub writes: AtomicU64,
    pub wal_bytes_written: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub flush_bytes_written: AtomicU64,
    pub blob_bytes_written: AtomicU64,
    pub gc_bytes_read: AtomicU64,
    pub gc_bytes_written: AtomicU64,
    pub gc_runs: AtomicU64,
    pub gc_micros: AtomicU64,
    pub flushes: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    pub compactions: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub stall_micros: AtomicU64,
    pub stop_micros: AtomicU64,
}

impl Counters {
    /// Copies the counters into `stats`.
    pub(crate) fn fill(&self, stats: &mut Stats) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        stats.user_bytes_written = get(&self.user_bytes_written);
        stats.writes = get(&self.writes);
        stats.wal_bytes_written = get(&self.wal_bytes_written);
        stats.wal_syncs = get(&self.wal_syncs);
        stats.flush_bytes_written = get(&self.flush_bytes_written);
        stats.flushes = get(&self.flushes);
        stats.blob_bytes_written = get(&self.blob_bytes_written);
        stats.gc_bytes_read = get(&self.gc_bytes_read);
        stats.gc_bytes_written = get(&self.gc_bytes_written);
        stats.gc_runs = get(&self.gc_runs);
        stats.gc_micros = get(&self.gc_micros);
        stats.compaction_bytes_read = get(&self.compaction_bytes_read);
        stats.compaction_bytes_written = get(&self.compaction_bytes_written);
        stats.compactions = get(&self.compactions);
        stats.trivial_moves = get(&self.trivial_moves);
        stats.stall_micros = get(&self.stall_micros);
        stats.stop_micros = get(&self.stop_micros);
    }
}
