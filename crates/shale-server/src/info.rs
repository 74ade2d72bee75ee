//! INFO: the sections Redis tools read (server, clients, memory, persistence, stats, replication,
//! keyspace), as `field:value` lines. Engine figures come from `Db::stats()`.
//!
//! The keyspace section reads each database's key count (kept by the store, O(1)) and counts
//! the expiry index's entries per database (O(keys with an expiry)), only when asked for
//! (`INFO`, `INFO keyspace`, `INFO all`).

use crate::commands::server::REDIS_COMPAT_VERSION;
use crate::session::Session;
use crate::shared::Shared;
use crate::store::format::{self, DATABASES};
use crate::store::Skips;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// The sections of `INFO` without arguments, in order.
pub const DEFAULT_SECTIONS: [&str; 7] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "keyspace",
];

/// The text of `INFO sections...`.
pub fn render(shared: &Shared, session: &Session, sections: &[String]) -> String {
    let all = sections.is_empty()
        || sections
            .iter()
            .any(|s| s == "all" || s == "default" || s == "everything");
    let mut out = String::new();
    for name in DEFAULT_SECTIONS {
        if all || sections.iter().any(|s| s == name) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            section(&mut out, shared, session, name);
        }
    }
    out
}

fn section(out: &mut String, shared: &Shared, _session: &Session, name: &str) {
    let m = &shared.metrics;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    // `line("# Name", &"")` writes a section header.
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = if k.starts_with('#') {
            write!(out, "{k}\r\n")
        } else {
            write!(out, "{k}:{v}\r\n")
        };
    };
    match name {
        "server" => {
            let uptime = shared.started.elapsed().as_secs();
            line("# Server", &"");
            line("redis_version", &REDIS_COMPAT_VERSION);
            line("shale_version", &env!("CARGO_PKG_VERSION"));
            line("redis_mode", &"standalone");
            line("os", &std::env::consts::OS);
            line("arch_bits", &(usize::BITS));
            line("process_id", &std::process::id());
            line("run_id", &shared.run_id);
            line("tcp_port", &shared.port.load(Ordering::Relaxed));
            line("uptime_in_seconds", &uptime);
            line("uptime_in_days", &(uptime / 86_400));
            line(
                "executable",
                &std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
        }
        "clients" => {
            line("# Clients", &"");
            line("connected_clients", &shared.clients.load(Ordering::Relaxed));
            line("maxclients", &shared.config.maxclients);
            line("blocked_clients", &shared.store.blocked_clients());
        }
        "memory" => {
            let s = shared.store.db().stats();
            line("# Memory", &"");
            let used = s.memtable_bytes + s.block_cache_bytes;
            line("used_memory", &used);
            line("used_memory_human", &human(used));
            line("shale_memtable_bytes", &s.memtable_bytes);
            line("shale_block_cache_bytes", &s.block_cache_bytes);
            line("mem_allocator", &"mimalloc");
            line("maxmemory", &0);
            line("maxmemory_policy", &"noeviction");
        }
        "persistence" => {
            let s = shared.store.db().stats();
            line("# Persistence", &"");
            line("loading", &0);
            line("rdb_changes_since_last_save", &0);
            line("rdb_bgsave_in_progress", &0);
            line("aof_enabled", &1);
            line("aof_rewrite_in_progress", &0);
            line("shale_appendfsync", &shared.store.appendfsync().name());
            line(
                "shale_last_wal_sync_time",
                &shared.last_sync.load(Ordering::Relaxed),
            );
            line("shale_wal_syncs", &s.wal_syncs);
            line("shale_wal_bytes_written", &s.wal_bytes_written);
            line("shale_on_disk_bytes", &s.on_disk_bytes);
            line("shale_flushes", &s.flushes);
            line("shale_compactions", &s.compactions);
            line("shale_compaction_bytes_read", &s.compaction_bytes_read);
            line(
                "shale_compaction_bytes_written",
                &s.compaction_bytes_written,
            );
            line(
                "shale_pending_compaction_bytes",
                &s.pending_compaction_bytes,
            );
            line(
                "shale_l0_files",
                &s.files_per_level.first().copied().unwrap_or(0),
            );
            line("shale_stall_micros", &s.stall_micros);
            line("shale_gc_runs", &s.gc_runs);
            line("shale_gc_bytes_written", &s.gc_bytes_written);
            line("shale_blob_garbage_bytes", &s.blob_garbage_bytes);
            line(
                "shale_space_amplification",
                &format!("{:.3}", s.space_amplification),
            );
        }
        "stats" => {
            line("# Stats", &"");
            line("total_connections_received", &load(&m.connections_total));
            line("total_commands_processed", &m.total_commands());
            line("total_net_input_bytes", &load(&m.net_input_bytes));
            line("total_net_output_bytes", &load(&m.net_output_bytes));
            line("rejected_connections", &load(&m.rejected_connections));
            line("acl_access_denied_auth", &load(&m.auth_failures));
            line("shale_accept_errors", &load(&m.accept_errors));
            line("shale_scan_skipped_blocks", &load(&m.scan_skipped));
            line("expired_keys", &load(&m.expired_keys));
            line("evicted_keys", &0);
            line("keyspace_hits", &0);
            line("keyspace_misses", &0);
            line(
                "total_error_replies",
                &m.commands
                    .iter()
                    .map(|c| c.errors.load(Ordering::Relaxed))
                    .sum::<u64>(),
            );
            line("shale_pipeline_batches", &load(&m.batches));
            line("shale_busy_batches", &load(&m.busy_batches));
            line("shale_unknown_commands", &load(&m.unknown_commands));
            line("shale_protocol_errors", &load(&m.protocol_errors));
        }
        "replication" => {
            line("# Replication", &"");
            match shared.store.replica() {
                Some(replica) => {
                    for (k, v) in crate::cluster::info_lines(replica) {
                        line(&k, &v);
                    }
                }
                None => {
                    line("role", &"master");
                    line("connected_slaves", &0);
                    line("master_repl_offset", &0);
                }
            }
        }
        "keyspace" => {
            line("# Keyspace", &"");
            match count_expiring(shared) {
                Ok((expires, skips)) => {
                    for db in 0..DATABASES as u8 {
                        let physical = shared.store.physical(db);
                        let keys = shared.store.db_size(physical);
                        if keys > 0 {
                            let e = expires[usize::from(physical)].min(keys);
                            line(
                                &format!("db{db}"),
                                &format!("keys={keys},expires={e},avg_ttl=0"),
                            );
                        }
                    }
                    // The key counts are records, exact; the expiry counts come from a walk that
                    // stepped over unreadable entries: say they may be short.
                    if skips.count > 0 {
                        crate::damage::report(m, "INFO keyspace", &skips);
                        line(
                            "shale_keyspace_unknown",
                            &format!(
                                "expires counts are lower bounds: {}",
                                crate::damage::describe(&skips)
                            ),
                        );
                    }
                }
                // An expiry count that stopped at unreadable data would be wrong: say it is
                // unknown.
                Err(e) => line(
                    "shale_keyspace_unknown",
                    &e.to_string().replace(['\r', '\n'], " "),
                ),
            }
        }
        _ => {}
    }
}

/// Entries of the expiry index per physical database, and what the walk stepped over (the
/// counts are then lower bounds).
///
/// # Errors
/// The engine's error when the index cannot be read (the counts are then unknown).
fn count_expiring(shared: &Shared) -> shale::Result<([u64; DATABASES], Skips)> {
    let mut out = [0; DATABASES];
    let prefix = vec![format::EXPIRY];
    let hi = crate::store::upper_bound(&prefix);
    let mut walk = shared.store.db().range_with(
        (std::ops::Bound::Included(prefix), hi),
        &crate::damage::SKIP_UNREADABLE,
    );
    for item in walk.by_ref() {
        let (k, _) = item?;
        if let Some((_, db, _)) = format::split_expiry_key(&k) {
            if let Some(n) = out.get_mut(usize::from(db)) {
                *n += 1;
            }
        }
    }
    let skips = Skips {
        count: walk.skipped_count(),
        pieces: walk.skipped(),
    };
    Ok((out, skips))
}

fn human(bytes: u64) -> String {
    let mb = bytes as f64 / (1024.0 * 1024.0);
    if mb >= 1024.0 {
        format!("{:.2}G", mb / 1024.0)
    } else {
        format!("{mb:.2}M")
    }
}
