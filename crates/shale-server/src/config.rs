//! Configuration: a TOML file (`--config`), command-line overrides, and the effective
//! configuration printed at start.
//!
//! Every setting has a named default below. Names follow Redis's where Redis has the setting
//! (`appendfsync`, `requirepass`, `proto-max-bulk-len`, `client-query-buffer-limit`, ...).

use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// Default `bind`: loopback only.
pub const DEFAULT_BIND: &str = "127.0.0.1";
/// Default `port`: Redis's.
pub const DEFAULT_PORT: u16 = 6379;
/// Default `dir`: the data directory.
pub const DEFAULT_DIR: &str = "./shale-data";
/// Default `maxclients`: Redis's.
pub const DEFAULT_MAXCLIENTS: usize = 10_000;
/// Default `proto-max-bulk-len` (largest argument, hence largest value): 64 MiB, an eighth of
/// Redis's 512 MiB, as most deployments lower it. Memory: while a value of `n` bytes is written,
/// the server holds about `2n` (the read buffer and the engine's write batch; the engine writes
/// a value of 8 MiB or more straight to a blob file of its own, not through the WAL and the
/// memtable), so each connection writing a value at this limit may take about 128 MiB for the
/// length of the write. Raise it only with the memory for that.
pub const DEFAULT_PROTO_MAX_BULK_LEN: usize = 64 << 20;
/// Default `max-multibulk-len` (most arguments in one request): 1 Mi. Redis allows `INT_MAX`;
/// a request with more arguments than this is refused before they are buffered.
pub const DEFAULT_MAX_MULTIBULK_LEN: usize = 1 << 20;
/// Default `client-query-buffer-limit` (largest request): Redis's 1 GiB.
pub const DEFAULT_CLIENT_QUERY_BUFFER_LIMIT: usize = shale_proto::resp::DEFAULT_MAX_REQUEST_LEN;
/// Default `client-output-buffer-limit` in bytes: a batch whose replies exceed it closes the
/// connection, as Redis closes a client over its hard limit.
pub const DEFAULT_CLIENT_OUTPUT_BUFFER_LIMIT: usize = 512 << 20;
/// Default `write-buffer-size` of the engine: 64 MiB.
pub const DEFAULT_WRITE_BUFFER_SIZE: usize = shale::DEFAULT_WRITE_BUFFER_SIZE;
/// Default `block-cache-size` of the engine: 256 MiB.
pub const DEFAULT_BLOCK_CACHE_SIZE: usize = 256 << 20;
/// Default `row-cache-size` of the engine: off. A cached row skips an SST's filter, index and data
/// block, but a miss costs a search plus an insert: with uniform keys (redis-benchmark `-r`) the
/// hit rate is too low to pay for it (GET -7% measured, BENCHMARKS.md). Turn it on for skewed keys.
pub const DEFAULT_ROW_CACHE_SIZE: usize = 0;

/// Default `memcache-port` (cache mode): memcached's.
pub const DEFAULT_MEMCACHE_PORT: u16 = 11211;
/// Default `megakv-port` (cache mode), TCP and UDP.
pub const DEFAULT_MEGAKV_PORT: u16 = 11214;

/// Largest engine key the server asks the engine to accept (the engine's own ceiling).
pub const ENGINE_MAX_KEY: usize = 64 << 20;
/// Largest user key: the engine's ceiling less room for the keyspace encoding's prefixes.
pub const MAX_KEY_LEN: usize = ENGINE_MAX_KEY - 64;
/// Largest engine value (the engine's ceiling).
pub const ENGINE_MAX_VALUE: usize = 1 << 30;

/// Redis's `appendfsync`: when a write reaches disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Appendfsync {
    /// Every write batch is fsynced before it is answered (group commit across connections).
    Always = 0,
    /// Writes are buffered and the WAL is fsynced once a second: a power loss loses at most about
    /// a second of writes; a crash of the process loses nothing.
    Everysec = 1,
    /// Writes are buffered; the operating system writes them back when it likes.
    No = 2,
}

impl Appendfsync {
    /// The name as Redis spells it.
    pub fn name(self) -> &'static str {
        match self {
            Appendfsync::Always => "always",
            Appendfsync::Everysec => "everysec",
            Appendfsync::No => "no",
        }
    }

    /// Parses Redis's spelling.
    pub fn parse(s: &str) -> Option<Appendfsync> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(Appendfsync::Always),
            "everysec" => Some(Appendfsync::Everysec),
            "no" => Some(Appendfsync::No),
            _ => None,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Appendfsync {
        match v {
            0 => Appendfsync::Always,
            2 => Appendfsync::No,
            _ => Appendfsync::Everysec,
        }
    }
}

/// The server's configuration. Field names are the TOML keys (kebab-case).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Address to listen on. Default [`DEFAULT_BIND`].
    pub bind: String,
    /// RESP port; 0 picks a free one. Default [`DEFAULT_PORT`].
    pub port: u16,
    /// Data directory. Default [`DEFAULT_DIR`].
    pub dir: PathBuf,
    /// When writes reach disk. Default [`Appendfsync::Everysec`].
    pub appendfsync: Appendfsync,
    /// Password clients must give with `AUTH`; none by default.
    pub requirepass: Option<String>,
    /// Port of the Prometheus `/metrics` endpoint (same address as `bind`); off by default.
    pub metrics_port: Option<u16>,
    /// Most connected clients. Default [`DEFAULT_MAXCLIENTS`]. Lowered at start, with a warning,
    /// when the open-file limit cannot hold them (see `fdlimit`).
    pub maxclients: usize,
    /// Files the engine keeps open in each of its table and blob file caches. Default
    /// [`shale::DEFAULT_MAX_OPEN_FILES`]; lowered at start when the open-file limit is small.
    pub max_open_files: usize,
    /// Largest argument in bytes. Default [`DEFAULT_PROTO_MAX_BULK_LEN`].
    pub proto_max_bulk_len: usize,
    /// Most arguments in one request. Default [`DEFAULT_MAX_MULTIBULK_LEN`].
    pub max_multibulk_len: usize,
    /// Largest request in bytes. Default [`DEFAULT_CLIENT_QUERY_BUFFER_LIMIT`].
    pub client_query_buffer_limit: usize,
    /// Most reply bytes one batch may produce. Default [`DEFAULT_CLIENT_OUTPUT_BUFFER_LIMIT`].
    pub client_output_buffer_limit: usize,
    /// Connection threads, each a single-threaded runtime that owns the connections handed to it;
    /// 0 means [`default_threads`] (half the CPUs, at least one). Default 0.
    pub threads: usize,
    /// Engine memtable size. Default [`DEFAULT_WRITE_BUFFER_SIZE`].
    pub write_buffer_size: usize,
    /// Engine SST size that compactions split their output at. Default the engine's.
    pub target_file_size: u64,
    /// Engine L1 size above which L1 compacts into L2 (each deeper level 10x). Default the
    /// engine's.
    pub max_bytes_for_level_base: u64,
    /// Engine values at least this long go to blob files (key-value separation); 0 turns that
    /// off. Default the engine's.
    pub min_blob_size: usize,
    /// Engine block cache size. Default [`DEFAULT_BLOCK_CACHE_SIZE`].
    pub block_cache_size: usize,
    /// Engine row cache size in bytes; 0 turns it off. Default [`DEFAULT_ROW_CACHE_SIZE`].
    pub row_cache_size: usize,
    /// Engine memory component. Default [`Memtable::Flodb`].
    pub memtable: Memtable,
    /// What the server is: the persistent store or the in-memory cache. Default [`Mode::Store`].
    pub mode: Mode,
    /// Cache mode: memory for items and the index, in bytes or with a unit (`64mb`, `2gb`); 0 is a
    /// quarter of the machine's memory. Default 0.
    pub maxmemory: MemSize,
    /// Cache mode: port of the memcached text protocol. Default [`DEFAULT_MEMCACHE_PORT`].
    pub memcache_port: u16,
    /// Cache mode: port of Mega-KV's binary protocol, TCP and UDP. Default [`DEFAULT_MEGAKV_PORT`].
    pub megakv_port: u16,
    /// Cache mode: Mega-KV's batch period in microseconds under load; 0 runs a batch as soon as
    /// the index engine is free. Default 0.
    pub batch_period_us: u64,
    /// Cache mode: index slots; 0 sizes the index from `maxmemory`. Default 0.
    pub index_slots: usize,
    /// Cache mode: the index engine. Default [`IndexEngine::Cpu`].
    pub index: IndexEngine,
    /// Replication: the `[cluster]` table. Off (a single node) unless `node-id` is set.
    pub cluster: ClusterConfig,
}

/// Default Raft heartbeat period in milliseconds.
pub const DEFAULT_HEARTBEAT_MS: u64 = shale_repl::DEFAULT_HEARTBEAT_MS;
/// Default election timeout range in milliseconds.
pub const DEFAULT_ELECTION_TIMEOUT_MS: (u64, u64) = shale_repl::DEFAULT_ELECTION_TIMEOUT_MS;
/// Connection threads when `threads` is 0: half the CPUs, at least one. A cluster node uses as
/// many: its connections await their Raft entries without blocking their thread (a 3-node
/// cluster on two CPUs ran cluster-bench with a fifth less leader CPU on one thread than on the
/// 64 it had when a write blocked its thread; BENCHMARKS.md).
///
/// The other half is left to the engine's flushes, compactions and WAL syncs, and to clients on
/// the same machine. Measured (BENCHMARKS.md, issue 16): on two CPUs shared with 16 YCSB client
/// threads, two connection threads put the server's read p99 at 0.7-1.0 ms against Redis's 0.3
/// ms, because the threads spent their time being woken and switched; one thread brought it to
/// Redis's.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// The `[cluster]` settings (command line: `--node-id`, `--raft-addr`, `--peers`, ...).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClusterConfig {
    /// This node's id; setting it turns replication on.
    pub node_id: Option<u64>,
    /// `host:port` of this node's Raft listener.
    pub raft_addr: Option<String>,
    /// `host:port` other nodes forward client requests to; default `bind:port`.
    pub advertise: Option<String>,
    /// The cluster's first members, this node included, as `ID=RAFT_HOST:PORT/CLIENT_HOST:PORT`.
    pub peers: Vec<String>,
    /// A node started to join a running cluster (added with `CLUSTER ADD` on the leader)
    /// rather than to start one with `peers`.
    pub join: bool,
    /// Raft heartbeat period. Default [`DEFAULT_HEARTBEAT_MS`].
    pub heartbeat_ms: u64,
    /// Shortest election timeout. Default [`DEFAULT_ELECTION_TIMEOUT_MS`]`.0`.
    pub election_timeout_min_ms: u64,
    /// Longest election timeout. Default [`DEFAULT_ELECTION_TIMEOUT_MS`]`.1`.
    pub election_timeout_max_ms: u64,
    /// Who flushes and compacts: every node (`"baseline"`, the default), or only the leader,
    /// which ships the files to the others (`"rubble"`). The same on every node of a cluster.
    #[serde(deserialize_with = "replication_mode")]
    pub replication_mode: shale_repl::ReplicationMode,
    /// The leader's read lease (reads without a heartbeat round while it holds one); 0 turns
    /// it off. Default half of `election-timeout-min-ms`; it must be shorter than that.
    pub read_lease_ms: Option<u64>,
}

fn replication_mode<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<shale_repl::ReplicationMode, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            node_id: None,
            raft_addr: None,
            advertise: None,
            peers: Vec::new(),
            join: false,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            election_timeout_min_ms: DEFAULT_ELECTION_TIMEOUT_MS.0,
            election_timeout_max_ms: DEFAULT_ELECTION_TIMEOUT_MS.1,
            replication_mode: shale_repl::ReplicationMode::Baseline,
            read_lease_ms: None,
        }
    }
}

/// Parses a peer, `ID=RAFT_HOST:PORT/CLIENT_HOST:PORT`.
///
/// # Errors
/// A message naming the malformed peer.
pub fn parse_peer(s: &str) -> Result<(u64, shale_repl::NodeInfo), String> {
    let bad = || format!("peer {s:?} is not ID=RAFT_HOST:PORT/CLIENT_HOST:PORT");
    let (id, addrs) = s.split_once('=').ok_or_else(bad)?;
    let (raft, client) = addrs.split_once('/').ok_or_else(bad)?;
    let id: u64 = id.trim().parse().map_err(|_| bad())?;
    for a in [raft, client] {
        if a.rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(bad());
        }
    }
    Ok((
        id,
        shale_repl::NodeInfo {
            raft_addr: raft.to_string(),
            client_addr: client.to_string(),
        },
    ))
}

impl ClusterConfig {
    /// The read lease in force, in milliseconds.
    pub fn read_lease_ms(&self) -> u64 {
        self.read_lease_ms
            .unwrap_or(self.election_timeout_min_ms / 2)
    }

    /// Whether replication is on.
    pub fn enabled(&self) -> bool {
        self.node_id.is_some()
    }

    /// The peers, parsed.
    ///
    /// # Errors
    /// A malformed peer.
    pub fn members(&self) -> Result<std::collections::BTreeMap<u64, shale_repl::NodeInfo>, String> {
        self.peers.iter().map(|p| parse_peer(p)).collect()
    }
}

/// Which engine runs the cache's index (`shale_cache::index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum IndexEngine {
    /// The CPU backend, on the cache's scheduler thread.
    Cpu,
    /// The GPU backend: an NVIDIA GPU with its driver and CUDA 13's NVRTC, in a build with the
    /// `gpu` feature. Without them the server fails at start; it never falls back to the CPU.
    Gpu,
}

impl IndexEngine {
    /// The name used in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            IndexEngine::Cpu => "cpu",
            IndexEngine::Gpu => "gpu",
        }
    }
}

/// What `shale serve` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The persistent store over RESP.
    Store,
    /// The in-memory cache (Mega-KV): RESP, memcached and Mega-KV protocols, no disk.
    Cache,
}

/// A size in bytes, written as a number or with a unit (`kb`, `mb`, `gb`, powers of 1024, as
/// Redis reads `maxmemory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemSize(pub u64);

impl std::str::FromStr for MemSize {
    type Err = String;
    fn from_str(s: &str) -> Result<MemSize, String> {
        let lower = s.trim().to_ascii_lowercase();
        let split = lower
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(lower.len());
        let (digits, unit) = lower.split_at(split);
        let scale: u64 = match unit {
            "" | "b" => 1,
            "k" | "kb" => 1 << 10,
            "m" | "mb" => 1 << 20,
            "g" | "gb" => 1 << 30,
            _ => return Err(format!("bad size {s:?}: use bytes or kb, mb, gb")),
        };
        let n: u64 = digits.parse().map_err(|_| format!("bad size {s:?}"))?;
        n.checked_mul(scale)
            .map(MemSize)
            .ok_or_else(|| format!("size {s:?} too large"))
    }
}

impl<'de> Deserialize<'de> for MemSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MemSize, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(MemSize(n)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// The engine's memory component (`shale::MemtableKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Memtable {
    /// A concurrent skiplist.
    Skiplist,
    /// FloDB's hash-table membuffer over the skiplist.
    Flodb,
}

impl Memtable {
    /// The name used in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Memtable::Skiplist => "skiplist",
            Memtable::Flodb => "flodb",
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bind: DEFAULT_BIND.to_string(),
            port: DEFAULT_PORT,
            dir: PathBuf::from(DEFAULT_DIR),
            appendfsync: Appendfsync::Everysec,
            requirepass: None,
            metrics_port: None,
            maxclients: DEFAULT_MAXCLIENTS,
            max_open_files: shale::DEFAULT_MAX_OPEN_FILES,
            proto_max_bulk_len: DEFAULT_PROTO_MAX_BULK_LEN,
            max_multibulk_len: DEFAULT_MAX_MULTIBULK_LEN,
            client_query_buffer_limit: DEFAULT_CLIENT_QUERY_BUFFER_LIMIT,
            client_output_buffer_limit: DEFAULT_CLIENT_OUTPUT_BUFFER_LIMIT,
            threads: 0,
            write_buffer_size: DEFAULT_WRITE_BUFFER_SIZE,
            target_file_size: shale::DEFAULT_TARGET_FILE_SIZE,
            max_bytes_for_level_base: shale::DEFAULT_MAX_BYTES_FOR_LEVEL_BASE,
            min_blob_size: shale::DEFAULT_MIN_BLOB_SIZE,
            block_cache_size: DEFAULT_BLOCK_CACHE_SIZE,
            row_cache_size: DEFAULT_ROW_CACHE_SIZE,
            memtable: Memtable::Flodb,
            mode: Mode::Store,
            maxmemory: MemSize(0),
            memcache_port: DEFAULT_MEMCACHE_PORT,
            megakv_port: DEFAULT_MEGAKV_PORT,
            batch_period_us: 0,
            index_slots: 0,
            index: IndexEngine::Cpu,
            cluster: ClusterConfig::default(),
        }
    }
}

impl Config {
    /// Reads a TOML file; settings it leaves out keep their defaults.
    ///
    /// # Errors
    /// A message naming the file and what is wrong (unknown key, bad value).
    pub fn from_file(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The RESP limits every connection enforces.
    pub fn limits(&self) -> shale_proto::resp::Limits {
        shale_proto::resp::Limits {
            max_bulk_len: self.proto_max_bulk_len,
            max_multibulk_len: self.max_multibulk_len,
            max_request_len: self.client_query_buffer_limit,
            auth_required: self.requirepass.is_some(),
            ..shale_proto::resp::Limits::default()
        }
    }

    /// The engine options.
    pub fn engine_options(&self) -> shale::Options {
        shale::Options {
            write_buffer_size: self.write_buffer_size,
            target_file_size: self.target_file_size,
            max_bytes_for_level_base: self.max_bytes_for_level_base,
            min_blob_size: match self.min_blob_size {
                0 => shale::NO_BLOB_FILES,
                n => n,
            },
            block_cache_size: self.block_cache_size,
            row_cache_size: self.row_cache_size,
            max_value_size: self
                .proto_max_bulk_len
                .saturating_add(64)
                .min(ENGINE_MAX_VALUE),
            max_key_size: ENGINE_MAX_KEY,
            max_open_files: self.max_open_files,
            // Skip the tag byte and the byte after it (a meta key's database, a generation's
            // top byte): the bucket comes from the key hash or the mixed generation
            // (docs/format/keyspace.md).
            membuffer_prefix_bits: Some(16),
            memtable: match self.memtable {
                Memtable::Skiplist => shale::MemtableKind::SkipList,
                Memtable::Flodb => shale::MemtableKind::FloDb,
            },
            ..shale::Options::default()
        }
    }

    /// `(name, value)` of every setting, as `CONFIG GET` and the start-up banner show them.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        vec![
            ("bind", self.bind.clone()),
            ("port", self.port.to_string()),
            ("dir", self.dir.display().to_string()),
            ("appendfsync", self.appendfsync.name().to_string()),
            (
                "requirepass",
                if self.requirepass.is_some() {
                    "(set)"
                } else {
                    ""
                }
                .to_string(),
            ),
            (
                "metrics-port",
                self.metrics_port.map_or("off".into(), |p| p.to_string()),
            ),
            ("maxclients", self.maxclients.to_string()),
            ("max-open-files", self.max_open_files.to_string()),
            ("proto-max-bulk-len", self.proto_max_bulk_len.to_string()),
            ("max-multibulk-len", self.max_multibulk_len.to_string()),
            (
                "client-query-buffer-limit",
                self.client_query_buffer_limit.to_string(),
            ),
            (
                "client-output-buffer-limit",
                self.client_output_buffer_limit.to_string(),
            ),
            ("threads", self.threads.to_string()),
            ("write-buffer-size", self.write_buffer_size.to_string()),
            ("target-file-size", self.target_file_size.to_string()),
            (
                "max-bytes-for-level-base",
                self.max_bytes_for_level_base.to_string(),
            ),
            ("min-blob-size", self.min_blob_size.to_string()),
            ("block-cache-size", self.block_cache_size.to_string()),
            ("row-cache-size", self.row_cache_size.to_string()),
            ("memtable", self.memtable.name().to_string()),
            ("mode", format!("{:?}", self.mode).to_lowercase()),
            ("maxmemory", self.maxmemory.0.to_string()),
            ("memcache-port", self.memcache_port.to_string()),
            ("megakv-port", self.megakv_port.to_string()),
            ("batch-period-us", self.batch_period_us.to_string()),
            ("index-slots", self.index_slots.to_string()),
            ("index", self.index.name().to_string()),
            (
                "cluster-node-id",
                self.cluster.node_id.map_or("off".into(), |n| n.to_string()),
            ),
            (
                "cluster-raft-addr",
                self.cluster.raft_addr.clone().unwrap_or_default(),
            ),
            ("cluster-peers", self.cluster.peers.join(",")),
            (
                "cluster-replication-mode",
                self.cluster.replication_mode.to_string(),
            ),
        ]
    }

    /// Checks the settings against each other.
    ///
    /// # Errors
    /// A message naming the bad setting.
    pub fn validate(&self) -> Result<(), String> {
        if self.maxclients == 0 {
            return Err("maxclients must be at least 1".into());
        }
        if self.max_open_files < crate::fdlimit::MIN_ENGINE_OPEN_FILES {
            return Err(format!(
                "max-open-files must be at least {}",
                crate::fdlimit::MIN_ENGINE_OPEN_FILES
            ));
        }
        if self.proto_max_bulk_len < 1024 {
            return Err("proto-max-bulk-len must be at least 1024".into());
        }
        if self.client_query_buffer_limit < 1024 * 1024 {
            return Err("client-query-buffer-limit must be at least 1048576".into());
        }
        if self.max_multibulk_len == 0 {
            return Err("max-multibulk-len must be at least 1".into());
        }
        let c = &self.cluster;
        if c.enabled() && self.mode == Mode::Cache {
            return Err("cluster: replication is for the store, not the cache mode".into());
        }
        if let Some(id) = c.node_id {
            if c.raft_addr.is_none() {
                return Err("cluster: node-id needs raft-addr".into());
            }
            let members = c.members()?;
            if !c.join && !members.contains_key(&id) {
                return Err(format!(
                    "cluster: peers must list this node ({id}) unless it joins a running cluster"
                ));
            }
            if c.heartbeat_ms == 0 || c.election_timeout_min_ms <= c.heartbeat_ms * 2 {
                return Err(
                    "cluster: election-timeout-min-ms must exceed twice heartbeat-ms".into(),
                );
            }
            if c.election_timeout_max_ms <= c.election_timeout_min_ms {
                return Err(
                    "cluster: election-timeout-max-ms must exceed election-timeout-min-ms".into(),
                );
            }
            if c.read_lease_ms() >= c.election_timeout_min_ms {
                return Err(
                    "cluster: read-lease-ms must be shorter than election-timeout-min-ms".into(),
                );
            }
        } else if !c.peers.is_empty() || c.raft_addr.is_some() {
            return Err("cluster: peers and raft-addr need node-id".into());
        }

        Ok(())
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, value) in self.entries() {
            writeln!(f, "  {name:<28} {value}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_file_overrides_only_what_it_names() {
        let c: Config = toml::from_str("port = 7000\nappendfsync = \"always\"\n").unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.appendfsync, Appendfsync::Always);
        assert_eq!(c.bind, DEFAULT_BIND);
        assert!(toml::from_str::<Config>("prot = 1\n").is_err());
    }

    #[test]
    fn cache_mode_and_maxmemory_units_parse() {
        let c: Config = toml::from_str("mode = \"cache\"\nmaxmemory = \"64mb\"\n").unwrap();
        assert_eq!(c.mode, Mode::Cache);
        assert_eq!(c.maxmemory, MemSize(64 << 20));
        let c: Config = toml::from_str("maxmemory = 1000\n").unwrap();
        assert_eq!(c.maxmemory, MemSize(1000));
        assert!("12xb".parse::<MemSize>().is_err());
        assert_eq!("2GB".parse::<MemSize>(), Ok(MemSize(2 << 30)));
    }

    #[test]
    fn cluster_settings_come_from_a_table_and_are_checked() {
        let c: Config = toml::from_str(
            "port = 6381\n[cluster]\nnode-id = 1\nraft-addr = \"127.0.0.1:7001\"\n\
             peers = [\"1=127.0.0.1:7001/127.0.0.1:6381\", \"2=127.0.0.1:7002/127.0.0.1:6382\"]\n",
        )
        .unwrap();
        assert_eq!(c.cluster.node_id, Some(1));
        c.validate().unwrap();
        assert_eq!(
            c.cluster.members().unwrap()[&2].client_addr,
            "127.0.0.1:6382"
        );
        let mut bad = c.clone();
        bad.cluster.peers = vec!["2=127.0.0.1:7002/127.0.0.1:6382".into()];
        assert!(bad.validate().is_err(), "peers must name the node itself");
        assert_eq!(
            c.cluster.read_lease_ms(),
            c.cluster.election_timeout_min_ms / 2
        );
        let mut long = c.clone();
        long.cluster.read_lease_ms = Some(long.cluster.election_timeout_min_ms);
        assert!(
            long.validate().is_err(),
            "a lease must end before another leader can be elected"
        );
        long.cluster.read_lease_ms = Some(0);
        long.validate().unwrap();
        for p in ["1", "x=a:1/b:2", "1=a:1", "1=a/b:2", "1=a:x/b:2"] {
            assert!(parse_peer(p).is_err(), "{p}");
        }
        assert!(Config::default().validate().is_ok());
        assert_eq!(
            c.cluster.replication_mode,
            shale_repl::ReplicationMode::Baseline
        );
    }

    #[test]
    fn replication_mode_is_rubble_or_baseline() {
        let table = |mode: &str| {
            toml::from_str::<Config>(&format!("[cluster]\nreplication-mode = \"{mode}\"\n"))
        };
        assert_eq!(
            table("rubble").unwrap().cluster.replication_mode,
            shale_repl::ReplicationMode::Rubble
        );
        assert_eq!(
            table("baseline").unwrap().cluster.replication_mode,
            shale_repl::ReplicationMode::Baseline
        );
        let e = table("chain").unwrap_err().to_string();
        assert!(e.contains("rubble"), "{e}");
    }
}
