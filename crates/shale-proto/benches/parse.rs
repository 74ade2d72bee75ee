//! Parsing a pipelined read buffer of 16 commands, as `redis-benchmark -P 16 -d 100` sends them:
//! alternating `SET key:<n> <100-byte value>` and `GET key:<n>`. Also the matching reply
//! encoding and Mega-KV batches of the same shape.
//!
//! Kept short (small sample, brief measurement) so `cargo bench -p shale-proto` finishes quickly
//! on the shared machine; pass criterion's own flags for longer runs.

use std::hint::black_box;
use std::time::Duration;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use shale_proto::megakv;
use shale_proto::resp::{
    encode_command, parse_requests, Limits, ReplyWriter, RequestDecoder, Version,
};

/// Commands per pipelined read.
const PIPELINE: usize = 16;
/// Value size, as `redis-benchmark -d 100`.
const VALUE_LEN: usize = 100;

fn pipeline() -> Vec<u8> {
    let value = vec![b'x'; VALUE_LEN];
    let mut out = BytesMut::new();
    for i in 0..PIPELINE {
        let key = format!("key:{:012}", i * 7919);
        if i % 2 == 0 {
            encode_command(&mut out, &[b"SET".as_slice(), key.as_bytes(), &value]);
        } else {
            encode_command(&mut out, &[b"GET".as_slice(), key.as_bytes()]);
        }
    }
    out.to_vec()
}

fn bench_requests(c: &mut Criterion) {
    let bytes = pipeline();
    let mut group = c.benchmark_group("resp_requests");
    group.throughput(Throughput::Elements(PIPELINE as u64));
    group.bench_function("decode_all_16_set_get_100b", |b| {
        let mut decoder = RequestDecoder::default();
        let mut out = Vec::with_capacity(PIPELINE);
        b.iter_batched_ref(
            || BytesMut::from(&bytes[..]),
            |buf| {
                out.clear();
                let n = decoder.decode_all(buf, &mut out).unwrap();
                assert_eq!(n, PIPELINE);
                black_box(&out);
            },
            BatchSize::SmallInput,
        );
    });
    group.bench_function("parse_requests_slice_16_set_get_100b", |b| {
        let limits = Limits::default();
        let mut out = Vec::with_capacity(PIPELINE);
        b.iter(|| {
            out.clear();
            let consumed = parse_requests(black_box(&bytes), &limits, &mut out).unwrap();
            assert_eq!(consumed, bytes.len());
            black_box(&out);
        });
    });
    group.finish();
}

fn bench_replies(c: &mut Criterion) {
    let value = vec![b'x'; VALUE_LEN];
    let mut group = c.benchmark_group("resp_replies");
    group.throughput(Throughput::Elements(PIPELINE as u64));
    group.bench_function("encode_16_ok_and_bulk_100b", |b| {
        let mut out = BytesMut::with_capacity(4096);
        b.iter(|| {
            out.clear();
            let mut writer = ReplyWriter::new(&mut out, Version::Resp2);
            for i in 0..PIPELINE {
                if i % 2 == 0 {
                    writer.ok();
                } else {
                    writer.bulk(black_box(&value));
                }
            }
            black_box(&out);
        });
    });
    group.finish();
}

fn bench_megakv(c: &mut Criterion) {
    let value = vec![b'x'; VALUE_LEN];
    let mut bytes = BytesMut::new();
    let mut encoder = megakv::BatchEncoder::new(&mut bytes);
    for i in 0..PIPELINE {
        let key = format!("key:{:012}", i * 7919);
        if i % 2 == 0 {
            encoder.set(key.as_bytes(), &value).unwrap();
        } else {
            encoder.get(key.as_bytes()).unwrap();
        }
    }
    encoder.finish();
    let bytes = bytes.to_vec();
    let mut group = c.benchmark_group("megakv");
    group.throughput(Throughput::Elements(PIPELINE as u64));
    group.bench_function("decode_batch_16_set_get_100b", |b| {
        let limits = megakv::Limits::default();
        b.iter_batched_ref(
            || BytesMut::from(&bytes[..]),
            |buf| black_box(megakv::decode_batch(buf, &limits).unwrap().unwrap()),
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

fn quick() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! {
    name = benches;
    config = quick();
    targets = bench_requests, bench_replies, bench_megakv
}
criterion_main!(benches);
