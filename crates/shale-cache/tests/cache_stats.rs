//! The cache's stats as operators read them: memcached's `stats` and RESP's INFO report the hit
//! rate, evictions, lossy index drops, index batch sizes, pass periods and index time per batch,
//! with values that follow from what the test did, and the two protocols agree.

mod common;

use std::collections::HashMap;
use std::io::Write;

use common::{connect, exchange, read_until, TestServer};

/// `stats` over the memcached protocol as name -> value.
fn memcache_stats(server: &TestServer) -> HashMap<String, String> {
    let mut s = connect(server.memcache);
    let reply = exchange(&mut s, b"stats\r\n", b"END\r\n");
    String::from_utf8_lossy(&reply)
        .lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("STAT ")?.splitn(2, ' ');
            Some((f.next()?.to_string(), f.next()?.to_string()))
        })
        .collect()
}

/// INFO over RESP as name -> value.
fn info(server: &TestServer) -> HashMap<String, String> {
    let mut s = connect(server.resp);
    let reply = exchange(&mut s, b"*1\r\n$4\r\nINFO\r\n", b"avg_ttl=0\r\n\r\n");
    String::from_utf8_lossy(&reply)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

fn num(stats: &HashMap<String, String>, name: &str) -> f64 {
    stats
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {stats:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number: {stats:?}"))
}

#[test]
fn stats_and_info_report_hits_evictions_and_index_batches() {
    let server = TestServer::start(4 << 20);
    let mut s = connect(server.memcache);

    // 100 stores, then one pipeline of 150 gets: 100 hits, 50 misses.
    let mut script = Vec::new();
    for i in 0..100 {
        script.extend_from_slice(format!("set k{i} 0 0 5 noreply\r\nvalue\r\n").as_bytes());
    }
    s.write_all(&script).unwrap();
    let mut gets = Vec::new();
    for i in 0..150 {
        gets.extend_from_slice(format!("get k{i}\r\n").as_bytes());
    }
    gets.extend_from_slice(b"version\r\n");
    let reply = exchange(&mut s, &gets, b"\r\n");
    let mut reply = String::from_utf8_lossy(&reply).into_owned();
    while !reply.contains("VERSION ") {
        reply.push_str(&String::from_utf8_lossy(&read_until(&mut s, b"\r\n")));
    }
    assert_eq!(reply.matches("VALUE ").count(), 100, "{reply}");

    let stats = memcache_stats(&server);
    assert_eq!(num(&stats, "cmd_get"), 150.0);
    assert_eq!(num(&stats, "get_hits"), 100.0);
    assert_eq!(num(&stats, "get_misses"), 50.0);
    assert_eq!(num(&stats, "hit_rate_percent"), 66.67);
    assert_eq!(num(&stats, "evictions"), 0.0);
    assert_eq!(num(&stats, "index_lossy"), 0.0);
    // Every search, insert and delete went through an index batch that took engine time.
    let batches = num(&stats, "batches");
    let ops = num(&stats, "batch_searches") + num(&stats, "batch_inserts");
    assert!(batches >= 1.0 && ops >= 250.0, "{stats:?}");
    assert_eq!(num(&stats, "batch_searches"), 150.0, "{stats:?}");
    assert_eq!(num(&stats, "batch_ops_mean"), (ops / batches).floor());
    assert!(num(&stats, "batch_ops_p99") >= 1.0, "{stats:?}");
    assert!(num(&stats, "index_nanos") > 0.0, "{stats:?}");
    assert!(num(&stats, "batch_index_nanos_mean") > 0.0, "{stats:?}");
    assert!(num(&stats, "passes") >= batches, "{stats:?}");
    assert!(stats.contains_key("pass_period_micros_mean"), "{stats:?}");
    assert!(stats.contains_key("batch_micros_p99"), "{stats:?}");

    // Four times the memory in 1000-byte values: the cache must evict.
    let value = vec![b'x'; 1000];
    for chunk in 0..16 {
        let mut script = Vec::new();
        for i in 0..1024 {
            script.extend_from_slice(format!("set big{chunk}-{i} 0 0 1000 noreply\r\n").as_bytes());
            script.extend_from_slice(&value);
            script.extend_from_slice(b"\r\n");
        }
        s.write_all(&script).unwrap();
    }
    let reply = exchange(&mut s, b"version\r\n", b"\r\n");
    assert!(reply.starts_with(b"VERSION "), "{reply:?}");

    let stats = memcache_stats(&server);
    let evicted = num(&stats, "evictions") + num(&stats, "index_lossy");
    assert!(evicted >= 8000.0, "only {evicted} evictions: {stats:?}");
    assert!(num(&stats, "batch_inserts") >= 100.0 + 16384.0, "{stats:?}");
    // Evicted items leave the index as delete jobs.
    assert!(
        num(&stats, "batch_deletes") >= num(&stats, "evictions"),
        "{stats:?}"
    );

    // INFO says the same.
    let info = info(&server);
    assert_eq!(num(&info, "keyspace_hits"), num(&stats, "get_hits"));
    assert_eq!(num(&info, "keyspace_misses"), num(&stats, "get_misses"));
    assert_eq!(
        num(&info, "hit_rate_percent"),
        num(&stats, "hit_rate_percent")
    );
    assert_eq!(num(&info, "evicted_keys"), evicted);
    assert_eq!(num(&info, "index_lossy"), num(&stats, "index_lossy"));
    assert_eq!(num(&info, "batches"), num(&stats, "batches"));
    assert_eq!(
        num(&info, "batch_index_nanos_mean"),
        num(&stats, "batch_index_nanos_mean")
    );
    assert!(num(&info, "batch_ops_p50") >= 1.0, "{info:?}");
    assert!(info.contains_key("pass_period_micros_mean"), "{info:?}");
    assert_eq!(info.get("index_engine").map(String::as_str), Some("cpu"));
}

/// `stats items` as memcached-tool's display and exporters read it, per class: the age of the
/// item the CLOCK hand takes next (memcached: its LRU tail's), evictions and what the evicted
/// items were (with an expiry, never read), how long the latest evicted item had gone unread,
/// and expired items reclaimed unread.
#[test]
fn stats_items_describe_ages_and_what_was_evicted() {
    let server = TestServer::start(8 << 20);
    let mut s = connect(server.memcache);
    let value = vec![b'v'; 1000];
    let write = |s: &mut std::net::TcpStream, first: usize, count: usize, ttl: u32, len: usize| {
        let mut script = Vec::new();
        for i in first..first + count {
            script.extend_from_slice(format!("set k{i} 0 {ttl} {len} noreply\r\n").as_bytes());
            script.extend_from_slice(&value[..len]);
            script.extend_from_slice(b"\r\n");
        }
        script.extend_from_slice(b"mn\r\n");
        s.write_all(&script).unwrap();
        assert!(read_until(s, b"MN\r\n").ends_with(b"MN\r\n"));
    };
    // Items that will expire unread (a class of their own), and items left unread for 2 s.
    write(&mut s, 0, 10, 1, 100);
    write(&mut s, 100, 1000, 3600, 1000);
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let items = |s: &mut std::net::TcpStream| -> HashMap<String, u64> {
        let reply = exchange(s, b"stats items\r\n", b"END\r\n");
        let mut sums = HashMap::new();
        for line in String::from_utf8_lossy(&reply).lines() {
            let Some(stat) = line.strip_prefix("STAT items:") else {
                continue;
            };
            let (name, value) = stat.split_once(' ').unwrap();
            let field = name.split(':').nth(1).unwrap().to_string();
            let value: u64 = value.parse().unwrap();
            let sum = sums.entry(field.clone()).or_insert(0);
            *sum = if field == "age" || field == "evicted_time" {
                (*sum).max(value)
            } else {
                *sum + value
            };
        }
        sums
    };
    let before = items(&mut s);
    assert!(before["age"] >= 2, "{before:?}");
    assert_eq!(before["evicted"], 0, "{before:?}");
    // The expired ones, read now: reclaimed, never fetched.
    let gets: String = (0..10).map(|i| format!("get k{i}\r\n")).collect();
    let _ = exchange(&mut s, format!("{gets}mn\r\n").as_bytes(), b"MN\r\n");
    // Ten times the memory, unread: evictions of items with an expiry, never read.
    for round in 0..10 {
        write(&mut s, 10_000 + round * 8_000, 8_000, 3600, 1000);
    }
    let after = items(&mut s);
    assert!(after["evicted"] > 10_000, "{after:?}");
    assert_eq!(after["evicted_nonzero"], after["evicted"], "{after:?}");
    assert_eq!(after["evicted_unfetched"], after["evicted"], "{after:?}");
    assert!(after["evicted_time"] <= 60, "{after:?}");
    assert!(after["reclaimed"] >= 10, "{after:?}");
    assert!(after["expired_unfetched"] >= 10, "{after:?}");
}
