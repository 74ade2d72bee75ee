//! The Prometheus endpoint: per-command counts and latency histograms, connections, engine
//! statistics.

mod common;

use common::Server;
use std::io::{Read, Write};
use std::net::TcpStream;

fn http_get(port: u16, path: &str) -> String {
    let mut t = TcpStream::connect(("127.0.0.1", port)).unwrap();
    t.set_read_timeout(Some(common::IO_TIMEOUT)).unwrap();
    write!(t, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    t.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn metrics_endpoint_serves_prometheus_text() {
    let s = Server::start(&["--metrics-port", "0"]);
    let port = s.metrics_port.expect("metrics port printed");
    let mut c = s.client();
    for i in 0..10 {
        let _: () = redis::cmd("SET").arg(i).arg(i).query(&mut c).unwrap();
    }
    let _: Option<String> = redis::cmd("GET").arg(1).query(&mut c).unwrap();
    let _ = redis::cmd("NOPE").query::<()>(&mut c);
    let page = http_get(port, "/metrics");
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    for needle in [
        "shale_commands_total{cmd=\"set\"} 10",
        "shale_commands_total{cmd=\"get\"} 1",
        "shale_command_duration_seconds_bucket{cmd=\"set\",le=\"+Inf\"} 10",
        "shale_unknown_commands_total 1",
        "shale_connected_clients 1",
        "shale_engine_memtable_bytes",
        "shale_engine_l0_files",
        "shale_engine_pending_compaction_bytes",
        "shale_engine_stall_micros_total",
        "shale_engine_blob_garbage_bytes",
        "shale_engine_space_amplification",
        "shale_commit_duration_seconds_count",
    ] {
        assert!(page.contains(needle), "missing {needle}:\n{page}");
    }
    assert!(http_get(port, "/nope").starts_with("HTTP/1.1 404"));
}
