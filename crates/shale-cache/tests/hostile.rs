//! Hostile input on every port: garbage, lies about lengths, cut requests, floods of datagrams.
//! The server answers with the protocol's error where it has one, closes what cannot be framed,
//! never crashes, and keeps serving everyone else.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use common::{connect, exchange, read_until, TestServer};
use shale_cache::index::contract::Rng;

/// The server still answers each protocol on a fresh connection.
fn still_serving(server: &TestServer) {
    let mut resp = connect(server.resp);
    assert_eq!(exchange(&mut resp, b"PING\r\n", b"\r\n"), b"+PONG\r\n");
    let mut mc = connect(server.memcache);
    assert!(exchange(&mut mc, b"version\r\n", b"\r\n").starts_with(b"VERSION "));
    let mut mkv = connect(server.megakv);
    // An empty batch is answered by nothing; a GET by one reply.
    mkv.write_all(&[
        0x34, 0x12, 0xff, 0xff, 0x34, 0x12, 2, 0, 1, 0, b'z', 0xff, 0xff,
    ])
    .unwrap();
    assert_eq!(read_until(&mut mkv, &[2]), vec![2]);
}

/// Sends `bytes` and reads until the server closes or goes quiet; returns what came back.
fn send_and_drain(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[test]
fn random_garbage_on_every_port() {
    let server = TestServer::start(32 << 20);
    let mut rng = Rng::new(0xbad);
    for round in 0..20 {
        for addr in [server.resp, server.memcache, server.megakv] {
            let len = 1 + rng.below(if round % 5 == 0 { 200_000 } else { 2_000 });
            let bytes: Vec<u8> = (0..len)
                .map(|_| match rng.below(4) {
                    0 => b"\r\n $*:0123456789"[rng.below(16)],
                    _ => rng.next_u64() as u8,
                })
                .collect();
            let _ = send_and_drain(addr, &bytes);
        }
    }
    still_serving(&server);
}

#[test]
fn resp_errors_and_lies_about_lengths() {
    let server = TestServer::start(32 << 20);
    let got = send_and_drain(server.resp, b"*1\r\n$-5\r\n");
    assert!(
        got.starts_with(b"-ERR Protocol error"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    let got = send_and_drain(server.resp, b"*2\r\n$3\r\nGET\r\n$999999999999\r\n");
    assert!(
        got.starts_with(b"-ERR Protocol error"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    // A bulk just over the cache's limit is refused before it is buffered.
    let got = send_and_drain(
        server.resp,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000000\r\n",
    );
    assert!(
        got.starts_with(b"-ERR Protocol error"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    // A value larger than an item is refused with an error, and the connection goes on.
    let mut s = connect(server.resp);
    let big = vec![b'v'; 2 << 20];
    let mut req = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", big.len()).into_bytes();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\nPING\r\n");
    let got = exchange(&mut s, &req, b"+PONG\r\n");
    assert!(
        got.starts_with(b"-ERR string exceeds"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    still_serving(&server);
}

#[test]
fn memcache_errors_and_lies_about_lengths() {
    let server = TestServer::start(32 << 20);
    // A line without its end, longer than any command line: refused, closed.
    let got = send_and_drain(server.memcache, &vec![b'g'; 100_000]);
    assert_eq!(got, b"CLIENT_ERROR line too long\r\n");
    // A value of 4 GiB announced: refused at once; its bytes would be skipped as they come.
    let got = send_and_drain(server.memcache, b"set k 0 0 4294967295\r\nabc");
    assert_eq!(got, b"SERVER_ERROR object too large for cache\r\n");
    let got = send_and_drain(server.memcache, b"set k 0 0 99999999999999999999999\r\n");
    assert_eq!(got, b"CLIENT_ERROR bad command line format\r\n");
    // An unknown command of binary bytes; then a key of one control byte, which memcached takes.
    let got = send_and_drain(server.memcache, b"\x00\x01\x02\xff\r\nget \x7f\r\n");
    assert_eq!(got, b"ERROR\r\nEND\r\n");
    // The same lies in meta commands.
    let got = send_and_drain(server.memcache, b"ms k 4294967295 T0\r\nabc");
    assert_eq!(got, b"SERVER_ERROR object too large for cache\r\n");
    let got = send_and_drain(server.memcache, b"ms k 18446744073709551615 T0\r\nabc");
    assert_eq!(got, b"SERVER_ERROR object too large for cache\r\n");
    let got = send_and_drain(server.memcache, b"ms k 18446744073709551615 !\r\nabc");
    assert_eq!(got, b"CLIENT_ERROR invalid flag\r\n");
    let got = send_and_drain(server.memcache, b"ms k 99999999999999999999999\r\n");
    assert_eq!(got, b"CLIENT_ERROR bad command line format\r\n");
    let got = send_and_drain(server.memcache, b"mg \x00\x01 v\r\nma \xff\r\nmn\r\n");
    assert_eq!(got, b"CLIENT_ERROR bad command line format\r\nNF\r\nMN\r\n");
    // Cut in the middle of a value, then gone.
    let _ = send_and_drain(server.memcache, b"set k 0 0 10\r\nabc");
    let _ = send_and_drain(server.memcache, b"ms k 10 T5\r\nabc");
    still_serving(&server);
}

/// Meta commands with random flags, tokens and keys (numbers out of range, signs, letters,
/// duplicates, base64 that is not, empty and huge opaque tokens): every line answered, the
/// stream stays framed (an `mn` at the end answers `MN`), the server keeps serving.
#[test]
fn meta_commands_with_random_flags() {
    let server = TestServer::start(32 << 20);
    let mut rng = Rng::new(21);
    let tokens: [&[u8]; 12] = [
        b"",
        b"0",
        b"-1",
        b"30",
        b"x",
        b"99999999999999999999999",
        b"18446744073709551615",
        b"2147483648",
        b"-2147483649",
        b"A",
        b"+",
        b"=",
    ];
    let letters = b"bcfhklqstuvCDEFIJLMNOPRTxZ!~";
    let commands: [&[u8]; 5] = [b"mg", b"ms", b"md", b"ma", b"me"];
    let mut script = Vec::new();
    for _ in 0..3000 {
        let command = commands[rng.below(commands.len())];
        script.extend_from_slice(command);
        let key: &[u8] = match rng.below(5) {
            0 => b"Zm9v",
            1 => b"!!!",
            2 => b"k",
            3 => b"n",
            _ => b"",
        };
        if !key.is_empty() {
            script.push(b' ');
            script.extend_from_slice(key);
        }
        let data_len = rng.below(40);
        if command == b"ms" {
            script.extend_from_slice(format!(" {data_len}").as_bytes());
        }
        for _ in 0..rng.below(22) {
            script.push(b' ');
            script.push(letters[rng.below(letters.len())]);
            script.extend_from_slice(tokens[rng.below(tokens.len())]);
        }
        script.extend_from_slice(b"\r\n");
        if command == b"ms" {
            script.extend((0..data_len).map(|i| b'0' + (i % 10) as u8));
            script.extend_from_slice(b"\r\n");
        }
    }
    script.extend_from_slice(b"mn\r\n");
    let mut stream = connect(server.memcache);
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        std::thread::spawn(move || stream.write_all(&script))
    };
    let got = read_until(&mut stream, b"MN\r\n");
    writer.join().unwrap().unwrap();
    assert!(got.ends_with(b"MN\r\n"), "the stream lost its framing");
    let text = String::from_utf8_lossy(&got);
    assert!(!text.contains("SERVER_ERROR"), "{text}");
    still_serving(&server);
}

#[test]
fn megakv_errors_and_lies_about_lengths() {
    let server = TestServer::start(32 << 20);
    // Wrong magic, unknown job, value length of 4 GiB, key length past the batch: each closes.
    for bytes in [
        &b"\x00\x00\x02\x00"[..],
        &b"\x34\x12\x09\x00\x01\x00k"[..],
        &b"\x34\x12\x03\x00\x01\x00\xff\xff\xff\xffk"[..],
    ] {
        let got = send_and_drain(server.megakv, bytes);
        assert!(got.is_empty(), "{got:?}");
    }
    // Garbage datagrams are dropped; the socket keeps answering good ones.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rng = Rng::new(7);
    let get = [0x34, 0x12, 2, 0, 1, 0, b'q', 0xff, 0xff];
    for i in 0..2000 {
        let len = rng.below(1400);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        udp.send_to(&bytes, server.megakv).unwrap();
        if i % 50 == 49 {
            // Pace the flood: once a good request after them is answered, the datagrams before
            // it were read, so a loaded machine's full receive buffer does not drop most of them.
            let mut buf = [0u8; 100];
            for _ in 0..20 {
                udp.send_to(&get, server.megakv).unwrap();
                if udp.recv_from(&mut buf).is_ok() {
                    break;
                }
            }
        }
    }
    let mut buf = [0u8; 100];
    let mut answered = false;
    for _ in 0..20 {
        udp.send_to(&get, server.megakv).unwrap();
        if let Ok((n, _)) = udp.recv_from(&mut buf) {
            assert_eq!(&buf[..n], &[2]);
            answered = true;
            break;
        }
    }
    assert!(answered, "no answer after a flood of garbage datagrams");
    let errors = shale_cache::stats::Stats::get(&server.cache.stats().protocol_errors);
    assert!(errors > 1000, "only {errors} malformed datagrams counted");
    still_serving(&server);
}

#[test]
fn many_connections_that_vanish_mid_request() {
    let server = TestServer::start(32 << 20);
    for i in 0..200 {
        let addr = [server.resp, server.memcache, server.megakv][i % 3];
        let mut s = TcpStream::connect(addr).unwrap();
        let partial: &[u8] = match i % 3 {
            0 => b"*3\r\n$3\r\nSET\r\n$1\r\nk",
            1 => b"get a b c",
            _ => b"\x34\x12\x03\x00\x05\x00",
        };
        let _ = s.write_all(partial);
    }
    std::thread::sleep(Duration::from_millis(200));
    still_serving(&server);
    let open = shale_cache::stats::Stats::get(&server.cache.stats().curr_connections);
    assert!(open <= 3, "{open} connections still counted open");
}
