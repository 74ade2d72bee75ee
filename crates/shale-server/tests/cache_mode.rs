//! `shale serve --mode cache` as users run it: the binary, its banner, its TOML setting, and
//! memory that stays under `maxmemory` while ten times as much is written.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Resident memory the process may use beyond `maxmemory`: the binary and its libraries, thread
/// stacks, the allocator's arenas, connection buffers. Documented in docs/design/0021-cache.md.
const RSS_OVERHEAD: u64 = 48 << 20;

struct Cache {
    child: Child,
    memcache: u16,
    resp: u16,
    banner: Vec<String>,
}

impl Cache {
    fn start(args: &[&str]) -> Cache {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
            .args(["serve", "--mode", "cache", "--threads", "2", "--port", "0"])
            .args(["--memcache-port", "0", "--megakv-port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the shale binary");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut memcache, mut resp, mut banner) = (0, 0, Vec::new());
        let deadline = Instant::now() + Duration::from_secs(20);
        while resp == 0 && Instant::now() < deadline {
            let Some(Ok(line)) = lines.next() else { break };
            let port = || {
                line.rsplit(':')
                    .next()
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            if line.starts_with("memcached protocol on ") {
                memcache = port();
            }
            if line.starts_with("ready to accept connections on ") {
                resp = port();
            }
            banner.push(line);
        }
        assert!(
            resp != 0 && memcache != 0,
            "the cache did not start: {banner:?}"
        );
        std::thread::spawn(move || for _ in lines {});
        Cache {
            child,
            memcache,
            resp,
            banner,
        }
    }

    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kb * 1024
    }

    fn connect(&self, port: u16) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_until(s: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !got.ends_with(end) {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed");
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[test]
fn rss_stays_under_maxmemory_while_ten_times_as_much_is_written() {
    const MAXMEMORY: u64 = 64 << 20;
    let cache = Cache::start(&["--maxmemory", "64mb"]);
    assert!(
        cache
            .banner
            .iter()
            .any(|l| l.contains("maxmemory 67108864 bytes")),
        "{:?}",
        cache.banner
    );
    let mut s = cache.connect(cache.memcache);
    let mut written = 0u64;
    let mut peak = 0;
    let mut i = 0u64;
    // Values from 100 bytes to 8 KiB, spread over several size classes.
    while written < 10 * MAXMEMORY {
        let mut batch = Vec::new();
        for _ in 0..200 {
            let len = 100 + (i * 7919 % 8000) as usize;
            batch.extend_from_slice(format!("set key:{i} 0 0 {len} noreply\r\n").as_bytes());
            batch.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
            batch.extend_from_slice(b"\r\n");
            written += len as u64;
            i += 1;
        }
        batch.extend_from_slice(b"version\r\n");
        s.write_all(&batch).unwrap();
        read_until(&mut s, b"\r\n");
        peak = peak.max(cache.rss());
    }
    assert!(
        peak <= MAXMEMORY + RSS_OVERHEAD,
        "RSS peaked at {} MiB for maxmemory {} MiB",
        peak >> 20,
        MAXMEMORY >> 20
    );
    // Evictions happened, and the newest keys are there.
    s.write_all(b"stats\r\n").unwrap();
    let stats = String::from_utf8(read_until(&mut s, b"END\r\n")).unwrap();
    let stat = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
    };
    assert!(stat("evictions") > 10_000, "{stats}");
    let mut found = 0;
    for k in i - 100..i {
        s.write_all(format!("get key:{k}\r\n").as_bytes()).unwrap();
        let reply = read_until(&mut s, b"END\r\n");
        found += usize::from(reply.starts_with(b"VALUE"));
    }
    assert!(found >= 95, "only {found} of the 100 newest keys are there");
    println!(
        "peak RSS {} MiB, {} evictions",
        peak >> 20,
        stat("evictions")
    );
}

#[test]
fn cache_mode_from_the_toml_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shale.toml");
    std::fs::write(&path, "mode = \"cache\"\nmaxmemory = \"32mb\"\n").unwrap();
    let cache = Cache::start(&["--config", path.to_str().unwrap()]);
    assert!(
        cache
            .banner
            .iter()
            .any(|l| l.contains("maxmemory 33554432 bytes")),
        "{:?}",
        cache.banner
    );
    let mut s = cache.connect(cache.resp);
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
        .unwrap();
    assert_eq!(read_until(&mut s, b"v\r\n"), b"+OK\r\n$1\r\nv\r\n");
}

/// Starts `shale serve --mode cache` with `args` and returns its banner (up to "ready") and, if
/// it exited instead of serving, its status and stderr. A server that started is killed.
fn start_or_fail(args: &[&str]) -> (Vec<String>, Option<(std::process::ExitStatus, String)>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--mode", "cache", "--threads", "2"])
        .args(["--port", "0", "--memcache-port", "0", "--megakv-port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the shale binary");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut banner = Vec::new();
    for line in stdout.lines() {
        let line = line.expect("read the banner");
        let ready = line.starts_with("ready to accept connections on ");
        banner.push(line);
        if ready {
            let _ = child.kill();
            let _ = child.wait();
            return (banner, None);
        }
    }
    let status = child.wait().expect("wait for shale");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (banner, Some((status, stderr)))
}

/// Whether this machine has an NVIDIA driver a `gpu` build could use (the GPU test machine).
fn nvidia_driver_present() -> bool {
    std::path::Path::new("/dev/nvidiactl").exists()
}

/// `--index gpu` where the GPU index cannot run (a build without the `gpu` feature, or no usable
/// NVIDIA GPU) stops at start with a message that says why; it never serves on the CPU index.
/// Where it can run (a gpu build on a GPU machine), the banner names the GPU engine.
#[test]
fn index_gpu_fails_at_start_without_a_usable_gpu() {
    let (banner, failed) = start_or_fail(&["--index", "gpu", "--maxmemory", "64mb"]);
    let Some((status, stderr)) = failed else {
        assert!(
            cfg!(feature = "gpu") && nvidia_driver_present(),
            "started with --index gpu where no GPU index can run: {banner:?}"
        );
        assert!(
            banner.iter().any(|l| l.contains(", index gpu (")),
            "started with --index gpu but the banner names another index: {banner:?}"
        );
        return;
    };
    assert!(
        !status.success(),
        "shale exited 0 without serving: {banner:?}"
    );
    assert!(
        !banner.iter().any(|l| l.contains("index cpu")),
        "fell back to the CPU index: {banner:?}"
    );
    assert!(
        stderr.contains("--index gpu: "),
        "the failure does not say what failed: {stderr}"
    );
    if cfg!(feature = "gpu") {
        assert!(
            stderr.contains("index backend unavailable: "),
            "the failure does not say why the GPU cannot be used: {stderr}"
        );
    } else {
        assert!(
            stderr.contains("built without the GPU index") && stderr.contains("--features gpu"),
            "the failure does not say how to build the GPU index: {stderr}"
        );
    }
}

/// `index` in the TOML file picks the engine as `--index` does; an unknown engine is refused.
#[test]
fn index_engine_from_the_toml_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shale.toml");
    let path_arg = path.to_str().unwrap();
    std::fs::write(
        &path,
        "mode = \"cache\"\nmaxmemory = \"32mb\"\nindex = \"cpu\"\n",
    )
    .unwrap();
    let (banner, failed) = start_or_fail(&["--config", path_arg]);
    assert!(
        failed.is_none(),
        "index = \"cpu\" did not start: {failed:?}"
    );
    assert!(
        banner.iter().any(|l| l.contains(", index cpu (")),
        "{banner:?}"
    );

    std::fs::write(
        &path,
        "mode = \"cache\"\nmaxmemory = \"32mb\"\nindex = \"gpu\"\n",
    )
    .unwrap();
    let (banner, failed) = start_or_fail(&["--config", path_arg]);
    if let Some((status, stderr)) = failed {
        assert!(!status.success());
        assert!(stderr.contains("--index gpu: "), "{stderr}");
    } else {
        assert!(
            cfg!(feature = "gpu") && nvidia_driver_present(),
            "{banner:?}"
        );
    }

    std::fs::write(
        &path,
        "mode = \"cache\"\nmaxmemory = \"32mb\"\nindex = \"tpu\"\n",
    )
    .unwrap();
    let (banner, failed) = start_or_fail(&["--config", path_arg]);
    let (status, stderr) = failed.unwrap_or_else(|| panic!("index = \"tpu\" started: {banner:?}"));
    assert!(!status.success());
    assert!(
        stderr.contains("tpu"),
        "the error does not name the bad value: {stderr}"
    );
}
