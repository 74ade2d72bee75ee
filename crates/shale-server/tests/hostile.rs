//! Malformed and hostile input: truncated frames, huge declared lengths, binary garbage, a slow
//! client, oversize values and requests. Each gets Redis's error (the connection closes after a
//! protocol error, as in Redis), the server never crashes, and other clients are unaffected.

mod common;

use common::{is_closed, read_available, send_raw, Server};
use std::io::Write;
use std::time::{Duration, Instant};

fn healthy(s: &mut Server) {
    assert!(s.alive(), "the server died");
    let mut other = s.raw();
    assert_eq!(send_raw(&mut other, b"*1\r\n$4\r\nPING\r\n"), b"+PONG\r\n");
}

#[test]
fn protocol_errors_get_redis_errors_and_close_only_that_connection() {
    let mut s = Server::start(&[]);
    let cases: [(&[u8], &[u8]); 6] = [
        (
            b"*1\r\n$99999999999\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*abc\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*99999999999\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*2\r\nxx\r\n",
            b"-ERR Protocol error: expected '$', got 'x'\r\n",
        ),
        (
            b"SET \"unbalanced\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (input, reply) in cases {
        let mut t = s.raw();
        assert_eq!(
            send_raw(&mut t, input),
            reply,
            "input {:?}",
            String::from_utf8_lossy(input)
        );
        assert!(
            is_closed(&mut t),
            "connection left open after a protocol error"
        );
        healthy(&mut s);
    }
    // Requests before the error in the same read are answered first.
    let mut t = s.raw();
    let got = send_raw(&mut t, b"*1\r\n$4\r\nPING\r\n*1\r\n$x\r\n");
    assert_eq!(
        got,
        b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"
    );
}

#[test]
fn garbage_and_truncated_frames_do_not_hurt_the_server() {
    let mut s = Server::start(&[]);
    // Binary garbage from a deterministic generator, in several shapes.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..20 {
        let mut t = s.raw();
        let len = 1 + round * 97;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let _ = t.write_all(&bytes);
        // End the stream so an incomplete frame is not waited for.
        let _ = t.shutdown(std::net::Shutdown::Write);
        let _ = is_closed(&mut t);
    }
    healthy(&mut s);
    // Truncated frames, then the client leaves.
    for frame in [
        &b"*3\r\n$3\r\nSET\r\n$1\r\nk"[..],
        b"*2\r\n$3\r\nGET\r\n",
        b"*1",
        b"$5\r\nhel",
    ] {
        let mut t = s.raw();
        t.write_all(frame).unwrap();
        drop(t);
    }
    healthy(&mut s);
    let mut c = s.client();
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, None, "a truncated SET must not be applied");
}

#[test]
fn a_slow_client_does_not_hold_up_others() {
    let mut s = Server::start(&[]);
    let mut slow = s.raw();
    let request = b"*3\r\n$3\r\nSET\r\n$4\r\nslow\r\n$5\r\nvalue\r\n";
    let started = Instant::now();
    for (i, byte) in request.iter().enumerate() {
        slow.write_all(&[*byte]).unwrap();
        if i % 4 == 0 {
            // Meanwhile another client is served at once.
            let t0 = Instant::now();
            healthy(&mut s);
            assert!(t0.elapsed() < Duration::from_secs(2));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(read_available(&mut slow), b"+OK\r\n");
    let mut c = s.client();
    let v: String = redis::cmd("GET").arg("slow").query(&mut c).unwrap();
    assert_eq!(v, "value");
}

#[test]
fn limits_are_enforced_with_clear_errors() {
    let mut s = Server::start(&[
        "--proto-max-bulk-len",
        "65536",
        "--max-multibulk-len",
        "100",
        "--client-query-buffer-limit",
        "1048576",
    ]);
    // A value over proto-max-bulk-len is refused before it is read.
    let mut t = s.raw();
    let got = send_raw(&mut t, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$70000\r\n");
    assert_eq!(got, b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(is_closed(&mut t));
    // Too many arguments.
    let mut t = s.raw();
    let got = send_raw(&mut t, b"*101\r\n");
    assert_eq!(got, b"-ERR Protocol error: invalid multibulk length\r\n");
    // A request over client-query-buffer-limit, made of many legal arguments.
    let mut t = s.raw();
    let mut req = b"*30\r\n$4\r\nMSET\r\n".to_vec();
    let value = vec![b'v'; 60_000];
    for i in 0..29 {
        req.extend_from_slice(format!("${}\r\n", value.len()).as_bytes());
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n");
        if i == 0 {
            continue;
        }
    }
    let _ = t.write_all(&req);
    let got = read_available(&mut t);
    assert!(
        got.starts_with(b"-ERR Protocol error: request exceeds the 1048576 byte limit"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    healthy(&mut s);
    // APPEND past proto-max-bulk-len is an error reply; the connection stays usable.
    let mut c = s.client();
    let chunk = vec![b'a'; 40_000];
    let _: i64 = redis::cmd("APPEND")
        .arg("big")
        .arg(&chunk[..])
        .query(&mut c)
        .unwrap();
    let e = redis::cmd("APPEND")
        .arg("big")
        .arg(&chunk[..])
        .query::<i64>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("proto-max-bulk-len"), "{e}");
    let n: i64 = redis::cmd("STRLEN").arg("big").query(&mut c).unwrap();
    assert_eq!(n, 40_000);
}

#[test]
fn large_values_round_trip() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let big: Vec<u8> = (0..4 << 20).map(|i| (i % 251) as u8).collect();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big[..])
        .query(&mut c)
        .unwrap();
    let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert_eq!(back, big);
}
