//! Prometheus text exposition (format 0.0.4) of [`super::Metrics`] and the engine's statistics.

use super::{Histogram, LATENCY_BUCKETS_US};
use crate::commands::COMMANDS;
use crate::shared::Shared;
use std::fmt::Write;
use std::sync::atomic::Ordering;

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let sep = if labels.is_empty() { "" } else { "," };
    for (i, count) in h.cumulative().iter().enumerate() {
        let le = LATENCY_BUCKETS_US
            .get(i)
            .map_or("+Inf".to_string(), |us| format!("{}", *us as f64 / 1e6));
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {count}");
    }
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_us() as f64 / 1e6);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count());
}

/// The whole `/metrics` page.
pub fn render(shared: &Shared) -> String {
    let m = &shared.metrics;
    let mut out = String::with_capacity(16 * 1024);
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);

    header(
        &mut out,
        "shale_commands_total",
        "counter",
        "Commands executed, by command.",
    );
    for (c, s) in COMMANDS.iter().zip(&m.commands) {
        let calls = load(&s.calls);
        if calls > 0 {
            let _ = writeln!(out, "shale_commands_total{{cmd=\"{}\"}} {calls}", c.name);
        }
    }
    header(
        &mut out,
        "shale_command_errors_total",
        "counter",
        "Commands answered with an error, by command.",
    );
    for (c, s) in COMMANDS.iter().zip(&m.commands) {
        let errors = load(&s.errors);
        if errors > 0 {
            let _ = writeln!(
                out,
                "shale_command_errors_total{{cmd=\"{}\"}} {errors}",
                c.name
            );
        }
    }
    header(
        &mut out,
        "shale_command_duration_seconds",
        "histogram",
        "Command execution time (batch commit excluded), by command.",
    );
    for (c, s) in COMMANDS.iter().zip(&m.commands) {
        if s.latency.count() > 0 {
            histogram(
                &mut out,
                "shale_command_duration_seconds",
                &format!("cmd=\"{}\"", c.name),
                &s.latency,
            );
        }
    }
    header(
        &mut out,
        "shale_commit_duration_seconds",
        "histogram",
        "Engine write batch commit time (buffered; the fsync of appendfsync always is not included).",
    );
    histogram(
        &mut out,
        "shale_commit_duration_seconds",
        "",
        &shared.store.commit_latency,
    );

    let counters: [(&str, &str, u64); 13] = [
        (
            "shale_unknown_commands_total",
            "Requests naming no known command.",
            load(&m.unknown_commands),
        ),
        (
            "shale_connections_total",
            "Connections accepted.",
            load(&m.connections_total),
        ),
        (
            "shale_rejected_connections_total",
            "Connections refused over maxclients.",
            load(&m.rejected_connections),
        ),
        (
            "shale_auth_failures_total",
            "Failed AUTH attempts.",
            load(&m.auth_failures),
        ),
        (
            "shale_accept_errors_total",
            "Failed accept calls (the open-file limit, for example).",
            load(&m.accept_errors),
        ),
        (
            "shale_scan_skipped_blocks_total",
            "Unreadable SST blocks, SSTs and blob records that KEYS, SCAN and INFO stepped over.",
            load(&m.scan_skipped),
        ),
        (
            "shale_busy_batches_total",
            "Batches that met a key lock held by another batch and waited for it off their connection's thread (on a cluster node: for a release of locks).",
            load(&m.busy_batches),
        ),
        (
            "shale_protocol_errors_total",
            "Connections closed for a protocol error or a broken limit.",
            load(&m.protocol_errors),
        ),
        (
            "shale_net_input_bytes_total",
            "Bytes read from clients.",
            load(&m.net_input_bytes),
        ),
        (
            "shale_net_output_bytes_total",
            "Bytes written to clients.",
            load(&m.net_output_bytes),
        ),
        (
            "shale_batches_total",
            "Pipeline batches executed.",
            load(&m.batches),
        ),
        (
            "shale_batched_requests_total",
            "Requests executed in batches.",
            load(&m.batched_requests),
        ),
        (
            "shale_expired_keys_total",
            "Keys deleted by expiry.",
            load(&m.expired_keys),
        ),
    ];
    for (name, help, v) in counters {
        header(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {v}");
    }
    header(
        &mut out,
        "shale_connected_clients",
        "gauge",
        "Clients connected now.",
    );
    let _ = writeln!(
        out,
        "shale_connected_clients {}",
        shared.clients.load(Ordering::Relaxed)
    );

    let s = shared.store.db().stats();
    let l0 = s.files_per_level.first().copied().unwrap_or(0) as u64;
    let gauges: [(&str, &str, f64); 8] = [
        (
            "shale_engine_memtable_bytes",
            "Bytes of the active and sealed memtables.",
            s.memtable_bytes as f64,
        ),
        ("shale_engine_l0_files", "SSTs in level 0.", l0 as f64),
        (
            "shale_engine_pending_compaction_bytes",
            "Estimated bytes compaction must rewrite.",
            s.pending_compaction_bytes as f64,
        ),
        (
            "shale_engine_blob_garbage_bytes",
            "Bytes of unreachable blob records awaiting GC.",
            s.blob_garbage_bytes as f64,
        ),
        (
            "shale_engine_blob_live_bytes",
            "Bytes of reachable blob records.",
            s.blob_live_bytes as f64,
        ),
        (
            "shale_engine_space_amplification",
            "Bytes on disk divided by live logical bytes.",
            s.space_amplification,
        ),
        (
            "shale_engine_on_disk_bytes",
            "Bytes of every file the engine keeps.",
            s.on_disk_bytes as f64,
        ),
        (
            "shale_engine_sealed_memtables",
            "Sealed memtables waiting for flush.",
            s.sealed_memtables as f64,
        ),
    ];
    for (name, help, v) in gauges {
        header(&mut out, name, "gauge", help);
        let _ = writeln!(out, "{name} {v}");
    }
    let engine_counters: [(&str, &str, u64); 7] = [
        (
            "shale_engine_stall_micros_total",
            "Microseconds writers were slowed down or stopped.",
            s.stall_micros,
        ),
        ("shale_engine_wal_syncs_total", "WAL fsyncs.", s.wal_syncs),
        ("shale_engine_writes_total", "Engine write calls.", s.writes),
        ("shale_engine_flushes_total", "Memtable flushes.", s.flushes),
        (
            "shale_engine_compactions_total",
            "Compactions.",
            s.compactions,
        ),
        (
            "shale_engine_compaction_read_bytes_total",
            "Bytes read by compactions.",
            s.compaction_bytes_read,
        ),
        (
            "shale_engine_compaction_write_bytes_total",
            "Bytes written by compactions.",
            s.compaction_bytes_written,
        ),
    ];
    for (name, help, v) in engine_counters {
        header(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {v}");
    }
    header(
        &mut out,
        "shale_engine_level_files",
        "gauge",
        "SSTs per level.",
    );
    for (level, n) in s.files_per_level.iter().enumerate() {
        let _ = writeln!(out, "shale_engine_level_files{{level=\"{level}\"}} {n}");
    }
    out
}
