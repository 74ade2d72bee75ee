//! A client that reads its replies late, on each TCP protocol: large values are sent straight
//! from slab memory, and what the socket does not take within the round is copied out before the
//! round ends, so the reply stays the value the client asked for even when its item is replaced,
//! evicted and its memory written over before the client reads.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use bytes::{Bytes, BytesMut};
use common::{connect, exchange, read_until, TestServer};
use shale_proto::megakv::{encode_batch, encode_reply, GetReply, Job};

/// Bytes of each value: large enough to be sent from slab memory.
const VALUE_LEN: usize = 100_000;
/// Keys the slow client asks for.
const KEYS: usize = 40;
/// Times each key is named in the one multi-key request: the reply (20 MB) is far more than the
/// loopback socket buffers hold.
const REPEATS: usize = 5;
/// The cache's memory.
const MEMORY: usize = 16 << 20;
/// Items written after the multi-get: ten times the memory.
const FILLER_ITEMS: usize = 10 * MEMORY / VALUE_LEN;

fn value(key: usize, generation: u8) -> Vec<u8> {
    (0..VALUE_LEN)
        .map(|i| b'a' + ((i * 7 + key * 13 + usize::from(generation) * 5) % 26) as u8)
        .collect()
}

/// Sets every (key, value) of `items`, pipelined, and checks every reply.
fn set_all(stream: &mut std::net::TcpStream, items: &[(String, Vec<u8>)]) {
    for chunk in items.chunks(20) {
        let mut script = Vec::new();
        for (key, value) in chunk {
            script.extend_from_slice(format!("set {key} 0 0 {}\r\n", value.len()).as_bytes());
            script.extend_from_slice(value);
            script.extend_from_slice(b"\r\n");
        }
        stream.write_all(&script).unwrap();
        let mut replies = Vec::new();
        while replies.len() < chunk.len() * b"STORED\r\n".len() {
            let more = read_until(stream, b"\r\n");
            assert!(!more.is_empty(), "the server stopped answering SETs");
            replies.extend(more);
        }
        assert_eq!(
            replies,
            b"STORED\r\n".repeat(chunk.len()),
            "a SET was not stored"
        );
    }
}

/// The keys the slow client asks for, in order: every key, `REPEATS` times.
fn asked() -> Vec<usize> {
    (0..REPEATS).flat_map(|_| 0..KEYS).collect()
}

/// Stores the keys, sends `request` on `port` of the server (a request for the keys of
/// [`asked`]) from a client with a small receive buffer, reads its first bytes only, replaces
/// every key and writes ten times the memory after them, then reads the rest: it must be
/// `want`, the replies of the values as they were when asked for.
fn slow_reader_keeps_its_values(port: fn(&TestServer) -> SocketAddr, request: &[u8], want: &[u8]) {
    let server = TestServer::start(MEMORY);
    let mut writer = connect(server.memcache);
    let first: Vec<(String, Vec<u8>)> = (0..KEYS).map(|k| (format!("k{k}"), value(k, 0))).collect();
    set_all(&mut writer, &first);

    let mut slow = connect(port(&server));
    let small: libc::c_int = 16 * 1024;
    // SAFETY: a valid socket and an int option of the size given.
    let rc = unsafe {
        libc::setsockopt(
            slow.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &small as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_RCVBUF");
    slow.write_all(request).unwrap();
    let mut got = vec![0u8; 4096];
    let n = slow.read(&mut got).unwrap();
    assert!(n > 0, "no reply began");
    got.truncate(n);

    // Meanwhile every key gets a new value and ten times the memory is written after it, so the
    // items the request found are evicted and their memory holds other items.
    let second: Vec<(String, Vec<u8>)> =
        (0..KEYS).map(|k| (format!("k{k}"), value(k, 1))).collect();
    set_all(&mut writer, &second);
    let filler: Vec<(String, Vec<u8>)> = (0..FILLER_ITEMS)
        .map(|i| (format!("fill:{i}"), value(i, 2)))
        .collect();
    set_all(&mut writer, &filler);
    let stats = String::from_utf8(exchange(&mut writer, b"stats\r\n", b"END\r\n")).unwrap();
    let evictions: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("STAT evictions "))
        .and_then(|v| v.trim().parse().ok())
        .expect("stats evictions");
    assert!(evictions >= 100, "the cache evicted only {evictions} items");

    // Now the slow client reads everything.
    let tail = &want[want.len() - 16..];
    while got.len() < want.len() {
        let more = read_until(&mut slow, tail);
        if more.is_empty() {
            break;
        }
        got.extend(more);
    }
    assert_eq!(got.len(), want.len(), "reply length");
    let differs = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(
        differs.is_none(),
        "the reply differs from the values asked for at byte {differs:?}"
    );
}

#[test]
fn a_slow_memcached_reader_gets_the_values_it_asked_for_after_their_memory_is_reused() {
    let mut request = String::from("get");
    let mut want = Vec::new();
    for k in asked() {
        request.push_str(&format!(" k{k}"));
        want.extend_from_slice(format!("VALUE k{k} 0 {VALUE_LEN}\r\n").as_bytes());
        want.extend_from_slice(&value(k, 0));
        want.extend_from_slice(b"\r\n");
    }
    request.push_str("\r\n");
    want.extend_from_slice(b"END\r\n");
    slow_reader_keeps_its_values(|s| s.memcache, request.as_bytes(), &want);
}

#[test]
fn a_slow_resp_reader_gets_the_values_it_asked_for_after_their_memory_is_reused() {
    let keys = asked();
    let mut request = format!("*{}\r\n$4\r\nMGET\r\n", keys.len() + 1).into_bytes();
    let mut want = format!("*{}\r\n", keys.len()).into_bytes();
    for &k in &keys {
        let key = format!("k{k}");
        request.extend_from_slice(format!("${}\r\n{key}\r\n", key.len()).as_bytes());
        want.extend_from_slice(format!("${VALUE_LEN}\r\n").as_bytes());
        want.extend_from_slice(&value(k, 0));
        want.extend_from_slice(b"\r\n");
    }
    slow_reader_keeps_its_values(|s| s.resp, &request, &want);
}

#[test]
fn a_slow_megakv_reader_gets_the_values_it_asked_for_after_their_memory_is_reused() {
    let keys = asked();
    let jobs: Vec<Job> = keys
        .iter()
        .map(|k| Job::Get {
            key: Bytes::from(format!("k{k}")),
        })
        .collect();
    let mut request = BytesMut::new();
    encode_batch(&jobs, &mut request).unwrap();
    let mut want = BytesMut::new();
    for &k in &keys {
        encode_reply(&GetReply::Value(Bytes::from(value(k, 0))), &mut want).unwrap();
    }
    slow_reader_keeps_its_values(|s| s.megakv, &request, &want);
}
