//! `shale serve --mode cache`: the in-memory Mega-KV cache of `shale-cache`, with no disk. This
//! module only turns the configuration into the cache's, prints what it runs with, and stops it
//! on SIGTERM or SIGINT; everything else lives in `shale-cache`.

use std::sync::Arc;
use std::time::Duration;

use shale_cache::{Cache, CacheConfig, Server, ServerConfig};

use crate::config::{Config, IndexEngine};

/// The fraction of the machine's memory `maxmemory` defaults to.
pub const DEFAULT_MAXMEMORY_SHARE: u64 = 4;

/// Total memory of the machine in bytes (0 if unknown).
fn physical_memory() -> u64 {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page <= 0 {
        0
    } else {
        pages as u64 * page as u64
    }
}

/// Runs the cache until SIGTERM or SIGINT.
///
/// # Errors
/// A message when the configuration is invalid or a port cannot be bound.
pub fn run(config: Config) -> Result<(), String> {
    config.validate()?;
    let threads = if config.threads == 0 {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    } else {
        config.threads
    };
    let maxmemory = match config.maxmemory.0 {
        0 => physical_memory() / DEFAULT_MAXMEMORY_SHARE,
        n => n,
    };
    if maxmemory < 2 << 20 {
        return Err(format!(
            "maxmemory {maxmemory} is below the 2 MiB a cache needs"
        ));
    }
    let bind = config
        .bind
        .parse()
        .map_err(|e| format!("bad bind address {:?}: {e}", config.bind))?;
    let mut cache_config = CacheConfig::new(maxmemory as usize, threads);
    cache_config.batch_period = Duration::from_micros(config.batch_period_us);
    if config.index_slots > 0 {
        cache_config.index_slots = Some(config.index_slots);
    }
    let cache = Arc::new(open_cache(config.index, &cache_config)?);
    let server = Server::start(
        &ServerConfig {
            bind,
            resp_port: config.port,
            memcache_port: config.memcache_port,
            megakv_port: config.megakv_port,
            threads,
            maxclients: config.maxclients,
        },
        Arc::clone(&cache),
    )
    .map_err(|e| format!("cannot listen: {e}"))?;
    println!(
        "shale cache: maxmemory {maxmemory} bytes ({} MiB), index {} ({} slots, {} MiB), {} MiB of slabs, {threads} threads",
        maxmemory >> 20,
        cache.index_name(),
        cache.index_slots(),
        (cache.index_slots() * 8) >> 20,
        cache.slabs().pages(),
    );
    println!("memcached protocol on {}", server.memcache);
    println!("Mega-KV protocol on {} (TCP and UDP)", server.megakv);
    println!("ready to accept connections on {}", server.resp);
    wait_for_signal()?;
    println!("received a signal; shutting down");
    server.stop();
    println!("shale stopped");
    Ok(())
}

/// The cache over the index engine the configuration names. The GPU engine fails here, at start,
/// when it cannot run; it never falls back to the CPU.
fn open_cache(engine: IndexEngine, config: &CacheConfig) -> Result<Cache, String> {
    match engine {
        IndexEngine::Cpu => {
            Cache::with_cpu_index(config).map_err(|e| format!("cannot set up the cache: {e}"))
        }
        IndexEngine::Gpu => gpu_cache(config),
    }
}

#[cfg(feature = "gpu")]
fn gpu_cache(config: &CacheConfig) -> Result<Cache, String> {
    let index = shale_cache::index::gpu::GpuIndex::open(config.index_slots())
        .map_err(|e| format!("--index gpu: {e}"))?;
    println!("index engine: {}", index.device_name());
    Cache::new(config, Box::new(index)).map_err(|e| format!("cannot set up the cache: {e}"))
}

#[cfg(not(feature = "gpu"))]
fn gpu_cache(_config: &CacheConfig) -> Result<Cache, String> {
    Err(
        "--index gpu: this shale was built without the GPU index; build it with \
         `cargo build --release -p shale-server --features gpu`"
            .to_string(),
    )
}

fn wait_for_signal() -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return Err("cannot install signal handlers".to_string());
        };
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
        Ok(())
    })
}
