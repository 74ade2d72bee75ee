//! The `shale` binary: `shale serve` runs the Redis-protocol server.

use clap::{Args, Parser, Subcommand};
use shale_server::{Appendfsync, Config};
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc: the server allocates and frees small buffers per request on several threads, which
/// glibc's allocator serves with more locking and consolidation work. Blocks of large values are
/// mappings of their own, returned to the system when freed (`shale_server::alloc`).
#[global_allocator]
static ALLOCATOR: shale_server::alloc::ServerAlloc = shale_server::alloc::ServerAlloc;

#[derive(Parser)]
#[command(
    name = "shale",
    version,
    about = "Shale: a persistent key-value store speaking the Redis protocol"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the Redis protocol (default 127.0.0.1:6379, data in ./shale-data).
    Serve(ServeArgs),
}

/// Command-line settings; each overrides the same setting of the configuration file.
#[derive(Args)]
struct ServeArgs {
    /// TOML configuration file (keys as in `CONFIG GET *`, for example `port = 6380`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long)]
    bind: Option<String>,
    /// Port to listen on; 0 picks a free one [default: 6379].
    #[arg(long)]
    port: Option<u16>,
    /// Data directory [default: ./shale-data].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// When writes reach disk [default: everysec].
    #[arg(long, value_enum)]
    appendfsync: Option<Appendfsync>,
    /// Password clients must give with AUTH.
    #[arg(long)]
    requirepass: Option<String>,
    /// Port of the Prometheus /metrics endpoint [default: off].
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Most connected clients [default: 10000].
    #[arg(long)]
    maxclients: Option<usize>,
    /// Largest argument (hence value) in bytes [default: 536870912].
    #[arg(long)]
    proto_max_bulk_len: Option<usize>,
    /// Most arguments in one request [default: 1048576].
    #[arg(long)]
    max_multibulk_len: Option<usize>,
    /// Largest request in bytes [default: 1073741824].
    #[arg(long)]
    client_query_buffer_limit: Option<usize>,
    /// Most reply bytes one pipeline batch may produce [default: 536870912].
    #[arg(long)]
    client_output_buffer_limit: Option<usize>,
    /// Connection threads (each a single-threaded runtime); 0 is half the CPUs, at least one [default: 0].
    #[arg(long)]
    threads: Option<usize>,
    /// Engine row cache in bytes; 0 turns it off [default: 0].
    #[arg(long)]
    row_cache_size: Option<usize>,
    /// Engine memtable size in bytes [default: 67108864].
    #[arg(long)]
    write_buffer_size: Option<usize>,
    /// Engine SST size compactions split at, in bytes [default: 67108864].
    #[arg(long)]
    target_file_size: Option<u64>,
    /// Engine L1 size in bytes above which L1 compacts into L2 [default: 268435456].
    #[arg(long)]
    max_bytes_for_level_base: Option<u64>,
    /// Engine values of at least this many bytes go to blob files; 0 keeps them in the SSTs
    /// [default: 512].
    #[arg(long)]
    min_blob_size: Option<usize>,
    /// Engine memory component [default: flodb].
    #[arg(long, value_enum)]
    memtable: Option<shale_server::config::Memtable>,
    /// The persistent store, or the in-memory cache [default: store].
    #[arg(long, value_enum)]
    mode: Option<shale_server::config::Mode>,
    /// Cache mode: memory for items and index (`64mb`, `2gb`) [default: a quarter of RAM].
    #[arg(long)]
    maxmemory: Option<shale_server::config::MemSize>,
    /// Cache mode: memcached text-protocol port [default: 11211].
    #[arg(long)]
    memcache_port: Option<u16>,
    /// Cache mode: Mega-KV protocol port, TCP and UDP [default: 11214].
    #[arg(long)]
    megakv_port: Option<u16>,
    /// Cache mode: batch period under load in microseconds; 0 runs at once [default: 0].
    #[arg(long)]
    batch_period_us: Option<u64>,
    /// Cache mode: index slots; 0 sizes the index from maxmemory [default: 0].
    #[arg(long)]
    index_slots: Option<usize>,
    /// Cache mode: index engine; gpu needs an NVIDIA GPU and a build with the gpu feature
    /// [default: cpu].
    #[arg(long, value_enum)]
    index: Option<shale_server::config::IndexEngine>,
    /// Cluster: this node's id (turns replication on).
    #[arg(long)]
    node_id: Option<u64>,
    /// Cluster: HOST:PORT of this node's Raft listener.
    #[arg(long)]
    raft_addr: Option<String>,
    /// Cluster: the first members, ID=RAFT_HOST:PORT/CLIENT_HOST:PORT, comma-separated.
    #[arg(long, value_delimiter = ',')]
    peers: Option<Vec<String>>,
    /// Cluster: HOST:PORT other nodes forward clients to [default: bind:port].
    #[arg(long)]
    advertise: Option<String>,
    /// Cluster: join a running cluster (added on its leader) instead of starting one.
    #[arg(long)]
    join: bool,
    /// Cluster: Raft heartbeat period in milliseconds [default: 100].
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    /// Cluster: election timeout range in milliseconds, MIN-MAX [default: 500-1000].
    #[arg(long)]
    election_timeout_ms: Option<String>,
    /// Cluster: who flushes and compacts, every node (baseline) or only the leader, which
    /// ships the files (rubble) [default: baseline].
    #[arg(long)]
    replication_mode: Option<shale_repl::ReplicationMode>,
    /// Cluster: the leader's read lease in milliseconds, 0 for none [default: half the shortest
    /// election timeout].
    #[arg(long)]
    read_lease_ms: Option<u64>,
}

impl ServeArgs {
    fn into_config(self) -> Result<Config, String> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        macro_rules! set {
            ($($field:ident),*) => { $(if let Some(v) = self.$field { c.$field = v; })* };
        }
        set!(
            bind,
            port,
            dir,
            appendfsync,
            maxclients,
            proto_max_bulk_len,
            max_multibulk_len,
            client_query_buffer_limit,
            client_output_buffer_limit,
            threads,
            row_cache_size,
            memtable,
            mode,
            maxmemory,
            memcache_port,
            megakv_port,
            batch_period_us,
            index_slots,
            index,
            write_buffer_size,
            target_file_size,
            max_bytes_for_level_base,
            min_blob_size
        );
        if self.requirepass.is_some() {
            c.requirepass = self.requirepass;
        }
        if self.metrics_port.is_some() {
            c.metrics_port = self.metrics_port;
        }
        let cl = &mut c.cluster;
        if self.node_id.is_some() {
            cl.node_id = self.node_id;
        }
        if self.raft_addr.is_some() {
            cl.raft_addr = self.raft_addr;
        }
        if let Some(p) = self.peers {
            cl.peers = p;
        }
        if self.advertise.is_some() {
            cl.advertise = self.advertise;
        }
        cl.join |= self.join;
        if let Some(h) = self.heartbeat_ms {
            cl.heartbeat_ms = h;
        }
        if let Some(m) = self.replication_mode {
            cl.replication_mode = m;
        }
        if let Some(range) = &self.election_timeout_ms {
            let (lo, hi) = range
                .split_once('-')
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                .ok_or_else(|| format!("--election-timeout-ms {range:?} is not MIN-MAX"))?;
            cl.election_timeout_min_ms = lo;
            cl.election_timeout_max_ms = hi;
        }
        if self.read_lease_ms.is_some() {
            cl.read_lease_ms = self.read_lease_ms;
        }
        Ok(c)
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let Cmd::Serve(args) = Cli::parse().command;
    let run = |config: Config| match config.mode {
        shale_server::config::Mode::Cache => shale_server::cache_mode::run(config),
        shale_server::config::Mode::Store => shale_server::run(config),
    };
    match args.into_config().and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale: {e}");
            ExitCode::FAILURE
        }
    }
}
