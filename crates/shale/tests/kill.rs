//! Process-kill test: a child process writes with `Durability::Sync`, `Buffered` and `Unflushed`
//! (some followed by `flush_wal`) and reports each acknowledgement; the parent kills it with SIGKILL mid-stream, reopens the database and checks
//! that every acknowledged write is there with its value.
//!
//! This test has its own `main` (harness = false): run without arguments it is the parent; with
//! `child <dir> <first key>` it is the writer.

use shale::{Db, Durability, Options, WriteBatch, WriteOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Kill rounds against the same directory; `SHALE_KILL_ROUNDS` raises it for a soak
/// (`SHALE_KILL_ROUNDS=100 cargo test --release -p shale --test kill`).
const DEFAULT_ROUNDS: u64 = 4;
/// Acknowledgements to wait for before killing (a round also ends after `ROUND_TIMEOUT`).
const ACKS_BEFORE_KILL: usize = 300;
const ROUND_TIMEOUT: Duration = Duration::from_secs(20);

fn value_for(key: u64) -> Vec<u8> {
    format!("value-of-{key}-{}", "x".repeat((key % 300) as usize)).into_bytes()
}

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        target_file_size: 32 << 10,
        max_bytes_for_level_base: 256 << 10,
        ..Options::default()
    }
}

fn child(dir: &Path, first: u64) -> ! {
    let db = Db::open(dir, options()).expect("child: open");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut key = first;
    loop {
        let mut batch = WriteBatch::new();
        batch.put(key.to_be_bytes(), value_for(key));
        batch.put(format!("mirror-{key}"), key.to_string());
        let durability = match key % 3 {
            0 => Durability::Sync,
            1 => Durability::Buffered,
            _ => Durability::Unflushed,
        };
        db.write(batch, &WriteOptions { durability })
            .expect("child: write");
        // Every fourth unflushed write is flushed and acknowledged: a SIGKILL keeps it.
        let flushed = durability == Durability::Unflushed && key.is_multiple_of(4);
        if flushed {
            db.flush_wal().expect("child: flush_wal");
        }
        if durability == Durability::Sync || flushed {
            // Everything up to this key is acknowledged: durable, or at least past the process.
            writeln!(out, "ACK {key}").expect("child: stdout");
            out.flush().expect("child: stdout");
        }
        key += 1;
    }
}

fn parent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("current exe");
    let mut acked: Vec<u64> = Vec::new();
    let rounds = std::env::var("SHALE_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_ROUNDS);
    for round in 0..rounds {
        let first = round * 1_000_000;
        let mut child = Command::new(&exe)
            .arg("child")
            .arg(dir.path())
            .arg(first.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let reader = BufReader::new(child.stdout.take().expect("child stdout"));
        let start = Instant::now();
        let mut last_ack = None;
        let mut count = 0usize;
        for line in reader.lines() {
            let line = line.expect("read child output");
            if let Some(k) = line.strip_prefix("ACK ") {
                last_ack = Some(k.parse::<u64>().expect("ack number"));
                count += 1;
            }
            if count >= ACKS_BEFORE_KILL || start.elapsed() > ROUND_TIMEOUT {
                break;
            }
        }
        child.kill().expect("SIGKILL the child");
        child.wait().expect("reap the child");
        let last_ack =
            last_ack.unwrap_or_else(|| panic!("round {round}: the child acknowledged nothing"));
        acked.push(last_ack);

        let db = Db::open(dir.path(), options()).expect("reopen after SIGKILL");
        for (r, &last) in acked.iter().enumerate() {
            let first = r as u64 * 1_000_000;
            for key in first..=last {
                assert_eq!(
                    db.get(key.to_be_bytes()).expect("get"),
                    Some(value_for(key)),
                    "round {round}: acknowledged key {key} is missing or wrong after SIGKILL"
                );
            }
        }
        // Nothing torn: both halves of every batch are present or absent together.
        for item in db.prefix(b"mirror-") {
            let (k, v) = item.expect("scan");
            let key: u64 = std::str::from_utf8(&v)
                .expect("utf8")
                .parse()
                .expect("number");
            assert_eq!(k, format!("mirror-{key}").into_bytes());
            assert_eq!(
                db.get(key.to_be_bytes()).expect("get"),
                Some(value_for(key)),
                "half-applied batch {key}"
            );
        }
        db.close().expect("close");
        println!(
            "round {round}: {} acknowledged writes survived SIGKILL",
            last_ack - first + 1
        );
    }
    println!("test sigkill_mid_write_loses_no_acknowledged_write ... ok");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        let dir = Path::new(args.get(2).expect("child: dir"));
        let first = args
            .get(3)
            .expect("child: first key")
            .parse()
            .expect("child: first key number");
        child(dir, first);
    }
    if args.iter().skip(1).any(|a| a == "--list") {
        println!("sigkill_mid_write_loses_no_acknowledged_write: test");
        return;
    }
    parent();
}
