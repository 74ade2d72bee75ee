//! Mega-KV's binary protocol over TCP and UDP, driven by the codec's encoder
//! (`shale_proto::megakv`), and one keyspace shared by all three protocols.

mod common;

use std::io::Write;
use std::net::UdpSocket;
use std::time::Duration;

use bytes::BytesMut;
use common::{connect, exchange, TestServer, IO_TIMEOUT};
use shale_proto::megakv::{decode_reply, encode_batch, BatchEncoder, GetReply, Job, Limits};

fn replies(mut bytes: BytesMut, count: usize) -> Vec<GetReply> {
    let limits = Limits::default();
    let mut out = Vec::new();
    while out.len() < count {
        match decode_reply(&mut bytes, &limits).expect("well-formed reply") {
            Some(reply) => out.push(reply),
            None => panic!("{} of {count} replies, then a cut", out.len()),
        }
    }
    assert!(bytes.is_empty(), "{} bytes after the replies", bytes.len());
    out
}

/// Reads from `stream` until `count` whole replies have arrived.
fn read_replies(stream: &mut std::net::TcpStream, count: usize) -> Vec<GetReply> {
    use std::io::Read;
    let limits = Limits::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    while out.len() < count {
        while let Some(reply) = decode_reply(&mut buf, &limits).expect("well-formed reply") {
            out.push(reply);
        }
        if out.len() == count {
            break;
        }
        let n = stream.read(&mut chunk).expect("read replies");
        assert!(n > 0, "closed after {} of {count} replies", out.len());
        buf.extend_from_slice(&chunk[..n]);
    }
    out
}

fn value(key: &[u8], len: usize) -> Vec<u8> {
    key.iter().copied().cycle().take(len).collect()
}

#[test]
fn tcp_batches_answer_gets_in_order_for_every_workload_size() {
    let server = TestServer::start(64 << 20);
    let mut stream = connect(server.megakv);
    for (key_len, value_len) in [
        (8, 8),
        (16, 64),
        (32, 512),
        (128, 1024),
        (40, (1 << 20) - 100),
    ] {
        let keys: Vec<Vec<u8>> = (0..20)
            .map(|i| format!("{i:0>width$}", width = key_len).into_bytes())
            .collect();
        let mut out = BytesMut::new();
        let sets: Vec<Job> = keys
            .iter()
            .map(|k| Job::Set {
                key: k.clone().into(),
                value: value(k, value_len).into(),
            })
            .collect();
        encode_batch(&sets, &mut out).unwrap();
        let mut encoder = BatchEncoder::new(&mut out);
        for (i, k) in keys.iter().enumerate() {
            encoder.get(k).unwrap();
            if i % 3 == 0 {
                encoder.get(b"never stored").unwrap();
            }
        }
        let gets = encoder.finish();
        stream.write_all(&out).unwrap();
        let got = read_replies(&mut stream, gets);
        let mut want = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            want.push(GetReply::Value(value(k, value_len).into()));
            if i % 3 == 0 {
                want.push(GetReply::NotFound);
            }
        }
        assert!(
            got == want,
            "key {key_len} value {value_len}: replies differ"
        );
    }
}

#[test]
fn udp_datagrams_are_answered_by_datagrams() {
    let server = TestServer::start(64 << 20);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket.connect(server.megakv).unwrap();
    let mut out = BytesMut::new();
    let mut encoder = BatchEncoder::new(&mut out);
    for i in 0..50 {
        let key = format!("udp-key-{i:08}");
        encoder
            .set(key.as_bytes(), &value(key.as_bytes(), 600))
            .unwrap();
    }
    encoder.finish();
    socket.send(&out).unwrap();
    // SETs are not answered: ask for the values until they are there (UDP may reorder).
    let mut got = Vec::new();
    for _ in 0..50 {
        let mut out = BytesMut::new();
        let mut encoder = BatchEncoder::new(&mut out);
        for i in 0..50 {
            encoder.get(format!("udp-key-{i:08}").as_bytes()).unwrap();
        }
        encoder.finish();
        socket.send(&out).unwrap();
        // 50 values of 600 bytes: one datagram of about 30 KB.
        let mut buf = vec![0u8; 65536];
        let n = socket.recv(&mut buf).expect("a reply datagram");
        got = replies(BytesMut::from(&buf[..n]), 50);
        if got.iter().all(|r| matches!(r, GetReply::Value(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (i, reply) in got.iter().enumerate() {
        let key = format!("udp-key-{i:08}");
        assert_eq!(*reply, GetReply::Value(value(key.as_bytes(), 600).into()));
    }
    // Replies larger than a datagram are split between replies; a value that cannot fit one
    // datagram is answered "not found".
    let mut tcp = connect(server.megakv);
    let mut out = BytesMut::new();
    let mut encoder = BatchEncoder::new(&mut out);
    encoder.set(b"huge", &vec![7u8; 100_000]).unwrap();
    encoder.get(b"huge").unwrap();
    encoder.finish();
    tcp.write_all(&out).unwrap();
    assert!(matches!(&read_replies(&mut tcp, 1)[0], GetReply::Value(v) if v.len() == 100_000));
    let mut out = BytesMut::new();
    let mut encoder = BatchEncoder::new(&mut out);
    encoder.get(b"huge").unwrap();
    for i in 0..200 {
        encoder
            .get(format!("udp-key-{:08}", i % 50).as_bytes())
            .unwrap();
    }
    encoder.finish();
    socket.send(&out).unwrap();
    let mut all = BytesMut::new();
    let mut datagrams = 0;
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = socket.recv(&mut buf) {
        assert!(n <= 65_507);
        all.extend_from_slice(&buf[..n]);
        datagrams += 1;
        if let Ok(r) = std::panic::catch_unwind(|| replies(all.clone(), 201)) {
            assert_eq!(r[0], GetReply::NotFound, "an oversized value over UDP");
            assert!(r[1..]
                .iter()
                .all(|r| matches!(r, GetReply::Value(v) if v.len() == 600)));
            break;
        }
    }
    assert!(
        datagrams >= 2,
        "201 replies of 600 bytes need several datagrams"
    );
    let oversized = shale_cache::stats::Stats::get(&server.cache.stats().udp_oversized);
    assert_eq!(oversized, 1);
}

#[test]
fn one_keyspace_for_every_protocol() {
    let server = TestServer::start(64 << 20);
    let mut mc = connect(server.memcache);
    assert_eq!(
        exchange(&mut mc, b"set shared 0 0 5\r\nhello\r\n", b"\r\n"),
        b"STORED\r\n"
    );
    let mut mkv = connect(server.megakv);
    let mut out = BytesMut::new();
    let mut encoder = BatchEncoder::new(&mut out);
    encoder.get(b"shared").unwrap();
    encoder.set(b"from-megakv", b"binary").unwrap();
    encoder.finish();
    mkv.write_all(&out).unwrap();
    assert_eq!(
        read_replies(&mut mkv, 1),
        vec![GetReply::Value("hello".into())]
    );
    let mut resp = connect(server.resp);
    let got = exchange(
        &mut resp,
        b"*2\r\n$3\r\nGET\r\n$11\r\nfrom-megakv\r\n",
        b"binary\r\n",
    );
    assert_eq!(got, b"$6\r\nbinary\r\n");
    let got = exchange(&mut mc, b"get from-megakv\r\n", b"END\r\n");
    assert_eq!(got, b"VALUE from-megakv 0 6\r\nbinary\r\nEND\r\n");
}
