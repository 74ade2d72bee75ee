//! Clients nobody here wrote, the way their users run them: a pymemcache session against
//! memcached 1.6 and against the cache, and a redis-py session (RESP2, and RESP3 where the
//! installed redis-py speaks it) against Redis and against the cache. Each session prints one line
//! per call (the result, or the exception's class and text); the cache's transcript must equal
//! the peer's. The sessions are in `tests/clients/`; CI installs python3-pymemcache and
//! python3-redis. `stats items` and `stats slabs`, whose figures differ between two servers by
//! nature (size classes, eviction), are read through pymemcache from both and held to the same
//! rules.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};

use common::{spawn_on_free_port, Memcached, TestServer};

/// Runs a session script against `port` and returns its transcript; the test fails if Python or
/// the client library is missing, or the script fails.
fn session(script: &str, port: u16) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(script);
    let out = Command::new("python3")
        .arg(&path)
        .arg(port.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}): install it (.ci/run does)"));
    assert!(
        out.status.success(),
        "{script} against port {port} failed (python3-pymemcache and python3-redis installed?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("a transcript is text")
}

/// The same session against the peer and the cache, at the same time; their transcripts.
fn both(script: &'static str, peer: u16, cache: u16) -> (String, String) {
    let peer = std::thread::spawn(move || session(script, peer));
    let ours = session(script, cache);
    (peer.join().expect("the peer's session"), ours)
}

fn assert_same(script: &str, peer: &str, ours: &str) {
    for (line, (want, got)) in peer.lines().zip(ours.lines()).enumerate() {
        assert_eq!(
            got,
            want,
            "{script}, line {}: the cache (left) answers differently from the peer (right)\n\
             whole transcript of the cache:\n{ours}",
            line + 1
        );
    }
    assert_eq!(
        peer.lines().count(),
        ours.lines().count(),
        "{script}: transcripts of different lengths\npeer:\n{peer}\ncache:\n{ours}"
    );
}

#[test]
fn pymemcache_sees_the_cache_as_memcached() {
    let memcached = Memcached::start(64);
    let cache = TestServer::start(64 << 20);
    let script = "pymemcache_session.py";
    let (peer, ours) = both(script, memcached.addr.port(), cache.memcache.port());
    assert!(peer.contains("set 1000000 bytes: True"), "{peer}");
    assert_same(script, &peer, &ours);
}

/// What pymemcache's `stats("items")`, `stats("slabs")` and `stats()` returned.
#[derive(Debug, Default)]
struct ClassReport {
    /// `items:<class>:<name>` and `<class>:<name>` figures, by class and name.
    items: BTreeMap<u32, BTreeMap<String, u64>>,
    slabs: BTreeMap<u32, BTreeMap<String, u64>>,
    /// `stats slabs` figures of no class, and the general `stats`.
    slab_totals: BTreeMap<String, u64>,
    general: BTreeMap<String, String>,
}

impl ClassReport {
    fn read(workload: &str, port: u16) -> ClassReport {
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/pymemcache_stats.py");
        let out = Command::new("python3")
            .arg(&path)
            .args([&port.to_string(), workload])
            .output()
            .unwrap_or_else(|e| panic!("cannot run python3 ({e}): install it (.ci/run does)"));
        assert!(
            out.status.success(),
            "pymemcache_stats.py {workload} against port {port} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut report = ClassReport::default();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut words = line.splitn(3, ' ');
            let (Some(section), Some(name), Some(value)) =
                (words.next(), words.next(), words.next())
            else {
                panic!("a line of three words: {line:?}");
            };
            let number = || {
                value
                    .parse::<u64>()
                    .unwrap_or_else(|_| panic!("a number: {line:?}"))
            };
            match (section, name.split(':').collect::<Vec<_>>().as_slice()) {
                ("items", ["items", class, stat]) => {
                    let class = class.parse().expect("a class number");
                    report
                        .items
                        .entry(class)
                        .or_default()
                        .insert(stat.to_string(), number());
                }
                ("slabs", [class, stat]) => {
                    let class = class.parse().expect("a class number");
                    report
                        .slabs
                        .entry(class)
                        .or_default()
                        .insert(stat.to_string(), number());
                }
                ("slabs", [total]) => {
                    report.slab_totals.insert(total.to_string(), number());
                }
                ("stats", _) => {
                    report.general.insert(name.to_string(), value.to_string());
                }
                _ => panic!("an unexpected stat line: {line:?}"),
            }
        }
        report
    }

    fn general(&self, name: &str) -> u64 {
        self.general
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("stats has a number {name}: {:?}", self.general))
    }

    /// The rules both servers' reports keep.
    fn check(&self, server: &str) {
        let stat = |table: &BTreeMap<String, u64>, name: &str| {
            *table
                .get(name)
                .unwrap_or_else(|| panic!("{server}: {name} missing from {table:?}"))
        };
        assert!(
            !self.items.is_empty(),
            "{server}: stats items is empty: {self:?}"
        );
        assert_eq!(
            self.items.keys().collect::<Vec<_>>(),
            self.slabs.keys().collect::<Vec<_>>(),
            "{server}: stats items and stats slabs name different classes"
        );
        assert_eq!(
            stat(&self.slab_totals, "active_slabs"),
            self.slabs.len() as u64,
            "{server}: active_slabs"
        );
        // memcached sums its per-class counts from the LRUs and its totals from per-thread
        // counters, and under eviction the two drift apart (7,148 items in the classes against a
        // curr_items of 7,080 in one CI run): memcached is held to 2%, the cache to the item.
        let slack = |total: u64| if server == "memcached" { total / 50 } else { 0 };
        let numbers: u64 = self.items.values().map(|c| stat(c, "number")).sum();
        let curr_items = self.general("curr_items");
        assert!(
            numbers.abs_diff(curr_items) <= slack(curr_items),
            "{server}: items per class {numbers} against curr_items {curr_items}"
        );
        let evicted: u64 = self.items.values().map(|c| stat(c, "evicted")).sum();
        let evictions = self.general("evictions");
        assert!(
            evicted.abs_diff(evictions) <= slack(evictions),
            "{server}: evicted per class {evicted} against evictions {evictions}"
        );
        let mut last_size = 0;
        let mut pages = 0;
        for (class, slab) in &self.slabs {
            let chunks = stat(slab, "total_chunks");
            assert_eq!(
                chunks,
                stat(slab, "total_pages") * stat(slab, "chunks_per_page"),
                "{server}: class {class}"
            );
            let used = stat(slab, "used_chunks");
            // The same drift between memcached's LRU counts and its slab counters (one CI run:
            // a class with more items than used chunks); the cache is held to the item.
            let number = stat(&self.items[class], "number");
            assert!(
                used + slack(number) >= number,
                "{server}: class {class} holds more items ({number}) than used chunks ({used})"
            );
            assert!(
                used + stat(slab, "free_chunks") + stat(slab, "free_chunks_end") <= chunks,
                "{server}: class {class}"
            );
            let size = stat(slab, "chunk_size");
            assert!(
                size > last_size,
                "{server}: chunk sizes grow with the class number"
            );
            last_size = size;
            pages += stat(slab, "total_pages");
        }
        assert_eq!(
            stat(&self.slab_totals, "total_malloced"),
            pages << 20,
            "{server}: total_malloced"
        );
    }

    /// (items, chunk size) per class.
    fn classes(&self) -> Vec<(u64, u64)> {
        self.items
            .iter()
            .map(|(class, items)| (items["number"], self.slabs[class]["chunk_size"]))
            .collect()
    }
}

/// memcached and the cache with `megabytes` each (running while the first two live), and their
/// memcached-protocol ports by name.
fn memcached_and_cache(megabytes: usize) -> (Memcached, TestServer, [(&'static str, u16); 2]) {
    let memcached = Memcached::start(megabytes);
    let cache = TestServer::start(megabytes << 20);
    let ports = [
        ("memcached", memcached.addr.port()),
        ("the cache", cache.memcache.port()),
    ];
    (memcached, cache, ports)
}

#[test]
fn pymemcache_reads_stats_items_and_slabs_as_from_memcached() {
    // Two sizes of item: two classes, holding 300 and 20 items.
    let (_memcached, _cache, servers) = memcached_and_cache(64);
    for (server, port) in servers {
        let report = ClassReport::read("sizes", port);
        report.check(server);
        let classes = report.classes();
        assert_eq!(classes.len(), 2, "{server}: {report:?}");
        assert_eq!(classes[0].0, 300, "{server}: {classes:?}");
        assert!(classes[0].1 < 100, "{server}: {classes:?}");
        assert_eq!(classes[1].0, 20, "{server}: {classes:?}");
        assert!(classes[1].1 > 5000, "{server}: {classes:?}");
    }
    // Thirty times what fits: the evictions show in their class.
    let (_memcached, _cache, servers) = memcached_and_cache(8);
    for (server, port) in servers {
        let report = ClassReport::read("evict", port);
        report.check(server);
        let evicted: Vec<u64> = report.items.values().map(|c| c["evicted"]).collect();
        assert!(
            evicted.iter().any(|&e| e > 0),
            "{server}: no class evicted: {report:?}"
        );
        assert!(
            report.general("curr_items") < 30_000,
            "{server}: {report:?}"
        );
        for items in report.items.values() {
            for name in ["outofmemory", "reclaimed"] {
                assert!(
                    items.contains_key(name),
                    "{server}: {name} missing: {items:?}"
                );
            }
        }
    }
}

/// A Redis server without persistence on a free port, killed when dropped.
struct Redis {
    child: Child,
    addr: SocketAddr,
}

impl Redis {
    fn start() -> Redis {
        let (child, addr) = spawn_on_free_port(
            "redis-server",
            |port| {
                let mut command = Command::new("redis-server");
                command
                    .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                    .args(["--save", "", "--appendonly", "no"])
                    .args(["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"])
                    .stdout(std::process::Stdio::null());
                command
            },
            b"INFO server\r\n",
            b"\r\n\r\n",
            |pid| format!("process_id:{pid}\r\n"),
        );
        Redis { child, addr }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn redis_py_sees_the_cache_as_redis() {
    let redis = Redis::start();
    let cache = TestServer::start(64 << 20);
    let script = "redis_py_session.py";
    let (peer, ours) = both(script, redis.addr.port(), cache.resp.port());
    assert!(peer.starts_with("# RESP2\nping: True\n"), "{peer}");
    assert_same(script, &peer, &ours);
}
