//! Tests of blob files: format, writer, reader, bitmap, `BlobRef`, token bucket and GC engines.

use super::format::{
    decode_record, encode_record, parse_record, Footer, Header, FOOTER_LEN, HEADER_LEN,
    MIN_RECORD_LEN,
};
use super::*;
use crate::error::ErrorKind;
use crate::fs::{Fs, MemFs, RandomAccessFile};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn new_fs() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/db")).expect("mkdir");
    fs
}

fn path(n: u64) -> PathBuf {
    PathBuf::from(format!("/db/{n:06}.blob"))
}

type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// Writes `records` as logical file `logical` at `p`.
fn write(fs: &MemFs, p: &Path, logical: u64, records: &Records) -> (BlobFileInfo, Vec<BlobPos>) {
    let file = fs.create(p).expect("create");
    let mut w = BlobWriter::new(file, p.to_path_buf(), logical).expect("header");
    let positions = records
        .iter()
        .map(|(k, v)| w.add(k, v).expect("add"))
        .collect();
    (w.finish().expect("finish"), positions)
}

fn open(fs: &MemFs, p: &Path) -> Result<BlobReader, crate::Error> {
    BlobReader::open(fs.open(p).expect("open"), p.to_path_buf())
}

/// A file as a file system that cannot map it: every read is `read_exact_at`.
struct Unmapped(Arc<dyn RandomAccessFile>);

impl RandomAccessFile for Unmapped {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact_at(offset, buf)
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
}

fn sample(n: usize) -> Records {
    (0..n)
        .map(|i| {
            let key = if i % 17 == 0 {
                Vec::new()
            } else {
                format!("key{i:05}").into_bytes()
            };
            let value = if i % 13 == 0 {
                Vec::new()
            } else {
                vec![(i % 251) as u8; (i * 37) % 3000]
            };
            (key, value)
        })
        .collect()
}

fn assert_reads_back(r: &BlobReader, records: &Records, positions: &[BlobPos]) {
    assert_eq!(r.count() as usize, records.len());
    for (i, ((k, v), pos)) in records.iter().zip(positions).enumerate() {
        let i = i as u32;
        assert_eq!(pos.index, i);
        let rec = r.get(i).expect("get");
        assert_eq!((rec.key.as_ref(), rec.value.as_ref()), (&k[..], &v[..]));
        assert_eq!(r.get_at(pos.offset, i).expect("get_at"), rec);
        assert_eq!(r.record_offset(i).unwrap(), pos.offset);
        let mut encoded = Vec::new();
        encode_record(&mut encoded, k, v);
        assert_eq!(r.raw(i).expect("raw").as_ref(), &encoded[..]);
    }
}

fn corruption_message(e: &crate::Error) -> String {
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    e.message().to_string()
}

#[test]
fn blob_file_round_trips_many_records_with_empty_and_1mib_values() {
    let fs = new_fs();
    let mut records = sample(2000);
    records.push((b"big".to_vec(), vec![0xab; 1 << 20]));
    records.push((Vec::new(), Vec::new()));
    records.push((vec![7; 300], vec![9; (1 << 20) + 3]));
    let p = path(7);
    let (info, positions) = write(&fs, &p, 42, &records);
    let value_bytes: u64 = records.iter().map(|(_, v)| v.len() as u64).sum();
    assert_eq!(info.logical, 42);
    assert_eq!(info.count as usize, records.len());
    assert_eq!(info.value_bytes, value_bytes);
    assert_eq!(info.file_size, fs.file_size(&p).unwrap());
    assert_eq!(positions[0].offset, HEADER_LEN as u64);

    let r = open(&fs, &p).expect("open");
    assert_eq!(
        (r.logical(), r.count(), r.file_size(), r.value_bytes()),
        (42, info.count, info.file_size, value_bytes)
    );
    assert_reads_back(&r, &records, &positions);

    // The same through plain reads instead of a map.
    let unmapped = BlobReader::open(Arc::new(Unmapped(fs.open(&p).unwrap())), p.clone())
        .expect("open unmapped");
    assert_reads_back(&unmapped, &records, &positions);
}

#[test]
fn an_empty_blob_file_opens_with_no_records() {
    let fs = new_fs();
    let p = path(1);
    let (info, _) = write(&fs, &p, 1, &Vec::new());
    assert_eq!(info.count, 0);
    assert_eq!(info.file_size, (HEADER_LEN + FOOTER_LEN) as u64);
    let r = open(&fs, &p).expect("open");
    assert_eq!(r.count(), 0);
    assert_eq!(r.get(0).unwrap_err().kind(), ErrorKind::Corruption);
}

#[test]
fn writer_tracks_count_len_and_value_bytes() {
    let fs = new_fs();
    let p = path(1);
    let mut w = BlobWriter::new(fs.create(&p).unwrap(), p.clone(), 5).unwrap();
    assert_eq!(
        (w.count(), w.len(), w.value_bytes()),
        (0, HEADER_LEN as u64, 0)
    );
    let pos = w.add(b"k", b"value").unwrap();
    assert_eq!(
        pos,
        BlobPos {
            index: 0,
            offset: HEADER_LEN as u64
        }
    );
    assert_eq!(w.count(), 1);
    assert_eq!(w.len(), HEADER_LEN as u64 + 4 + 1 + 1 + 1 + 5);
    assert_eq!(w.value_bytes(), 5);
}

#[test]
fn writer_refuses_to_grow_past_its_limit_and_stays_usable() {
    let fs = new_fs();
    let p = path(1);
    let limit = 1000;
    let mut w = BlobWriter::new(fs.create(&p).unwrap(), p.clone(), 5)
        .unwrap()
        .with_limit(limit);
    let mut added = Records::new();
    loop {
        let (k, v) = (format!("k{}", added.len()).into_bytes(), vec![1u8; 100]);
        match w.add(&k, &v) {
            Ok(_) => added.push((k, v)),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
                assert!(e.message().contains(&p.display().to_string()));
                break;
            }
        }
    }
    let len_before = w.len();
    assert!(w.add(b"x", &[0; 2000]).is_err());
    assert_eq!(w.len(), len_before, "a refused record writes nothing");
    // A smaller record may still fit.
    let info = w.finish().unwrap();
    assert!(info.file_size <= limit);
    let r = open(&fs, &p).unwrap();
    assert_eq!(r.count() as usize, added.len());
    assert!(info.file_size + 120 > limit, "the limit was used up");
}

#[test]
fn the_size_limit_is_u32_max() {
    assert_eq!(MAX_BLOB_FILE_SIZE, u64::from(u32::MAX));
    // A value that alone passes the limit is refused up front, without writing.
    let fs = new_fs();
    let p = path(1);
    let mut w = BlobWriter::new(fs.create(&p).unwrap(), p.clone(), 5)
        .unwrap()
        .with_limit(HEADER_LEN as u64 + 64);
    let e = w.add(b"", &[0; 64]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn add_raw_copies_a_record_byte_for_byte_and_counts_its_value() {
    let fs = new_fs();
    let (src, dst) = (path(1), path(2));
    let records = sample(50);
    write(&fs, &src, 9, &records);
    let r = open(&fs, &src).unwrap();
    let mut w = BlobWriter::new(fs.create(&dst).unwrap(), dst.clone(), 9).unwrap();
    for i in (0..r.count()).rev() {
        let pos = w.add_raw(&r.raw(i).unwrap()).unwrap();
        assert_eq!(pos.index, r.count() - 1 - i);
    }
    let info = w.finish().unwrap();
    assert_eq!(info.value_bytes, r.value_bytes());
    let copy = open(&fs, &dst).unwrap();
    for i in 0..r.count() {
        assert_eq!(copy.get(r.count() - 1 - i).unwrap(), r.get(i).unwrap());
    }
}

#[test]
fn add_raw_rejects_a_malformed_record() {
    let fs = new_fs();
    let p = path(1);
    let mut w = BlobWriter::new(fs.create(&p).unwrap(), p.clone(), 5).unwrap();
    let mut rec = Vec::new();
    encode_record(&mut rec, b"key", b"value");
    for bad in [
        &rec[..rec.len() - 1],
        &[rec.as_slice(), &b"x"[..]].concat()[..],
        &rec[..3],
        &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff][..],
    ] {
        let e = w.add_raw(bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    assert_eq!(w.count(), 0);
    assert_eq!(w.len(), HEADER_LEN as u64);
}

#[test]
fn a_flipped_record_byte_is_corruption_naming_the_path_and_record_offset() {
    let fs = new_fs();
    let p = path(3);
    let records = sample(20);
    let (_, positions) = write(&fs, &p, 3, &records);
    let target = 5;
    let start = positions[target].offset;
    let end = positions[target + 1].offset;
    for at in start..end {
        let bad = path(4);
        fs.write_file(&bad, &fs.read_file(&p).unwrap()).unwrap();
        fs.corrupt_byte(&bad, at, 0x10).unwrap();
        let r = open(&fs, &bad).expect("open does not read records");
        let want = format!("{}: offset {start}:", bad.display());
        for e in [
            r.get(target as u32).unwrap_err(),
            r.raw(target as u32).unwrap_err(),
            r.get_at(start, target as u32).unwrap_err(),
        ] {
            let msg = corruption_message(&e);
            assert!(msg.starts_with(&want), "{msg} should start with {want}");
        }
        // Its neighbours are unaffected.
        assert!(r.get(target as u32 - 1).is_ok());
        assert!(r.get(target as u32 + 1).is_ok());
    }
}

#[test]
fn a_flipped_byte_anywhere_is_detected() {
    let fs = new_fs();
    let p = path(1);
    let records = sample(12);
    write(&fs, &p, 77, &records);
    let good = fs.read_file(&p).unwrap();
    for at in 0..good.len() {
        for xor in [0x01u8, 0x80] {
            let mut bad = good.clone();
            bad[at] ^= xor;
            let q = path(2);
            fs.write_file(&q, &bad).unwrap();
            let detected = match open(&fs, &q) {
                Err(e) => {
                    corruption_message(&e);
                    true
                }
                Ok(r) => (0..r.count()).any(|i| match r.get(i) {
                    Err(e) => {
                        corruption_message(&e);
                        true
                    }
                    Ok(rec) => {
                        let (k, v) = &records[i as usize];
                        assert_eq!((rec.key.as_ref(), rec.value.as_ref()), (&k[..], &v[..]));
                        false
                    }
                }),
            };
            assert!(detected, "flip of byte {at} by {xor:#x} went unnoticed");
        }
    }
}

#[test]
fn a_flipped_footer_or_offsets_array_fails_open() {
    let fs = new_fs();
    let p = path(1);
    let (info, _) = write(&fs, &p, 1, &sample(30));
    let footer_at = info.file_size - FOOTER_LEN as u64;
    let array_at = footer_at - 4 * u64::from(info.count);
    for at in (array_at..info.file_size).chain(0..HEADER_LEN as u64) {
        let q = path(2);
        fs.write_file(&q, &fs.read_file(&p).unwrap()).unwrap();
        fs.corrupt_byte(&q, at, 0x04).unwrap();
        let msg = corruption_message(&open(&fs, &q).unwrap_err());
        assert!(msg.contains("/db/000002.blob"), "{msg}");
    }
}

#[test]
fn a_truncated_file_is_corruption_never_a_panic() {
    let fs = new_fs();
    let p = path(1);
    let (info, _) = write(&fs, &p, 1, &sample(10));
    let good = fs.read_file(&p).unwrap();
    for len in 0..info.file_size {
        let q = path(2);
        fs.write_file(&q, &good[..len as usize]).unwrap();
        corruption_message(&open(&fs, &q).unwrap_err());
    }
}

#[test]
fn offsets_that_do_not_tile_the_record_area_fail_open() {
    // Rebuild a file whose offsets array is consistent with its checksum but wrong.
    let fs = new_fs();
    let p = path(1);
    let (info, positions) = write(&fs, &p, 1, &sample(4));
    let good = fs.read_file(&p).unwrap();
    let array_at = info.file_size as usize - FOOTER_LEN - 16;
    let offsets: Vec<u32> = positions.iter().map(|p| p.offset as u32).collect();
    let cases: [Vec<u32>; 4] = [
        vec![offsets[0] + 1, offsets[1], offsets[2], offsets[3]],
        vec![offsets[0], offsets[2], offsets[1], offsets[3]],
        vec![offsets[0], offsets[1], offsets[1], offsets[3]],
        vec![offsets[0], offsets[1], offsets[2], array_at as u32 - 1],
    ];
    for bad_offsets in cases {
        let mut bytes = good[..array_at].to_vec();
        let mut array = Vec::new();
        format::encode_offsets(&mut array, &bad_offsets);
        let footer = Footer {
            offsets_offset: array_at as u64,
            count: 4,
            offsets_crc: crc32c::crc32c(&array),
            value_bytes: 0,
            logical: 1,
        };
        bytes.extend_from_slice(&array);
        bytes.extend_from_slice(&footer.encode());
        let q = path(2);
        fs.write_file(&q, &bytes).unwrap();
        let msg = corruption_message(&open(&fs, &q).unwrap_err());
        assert!(msg.contains("entry"), "{msg}");
    }
}

#[test]
fn header_and_footer_must_name_the_same_logical_file() {
    let fs = new_fs();
    let p = path(1);
    write(&fs, &p, 1, &sample(3));
    let mut bytes = fs.read_file(&p).unwrap();
    let header = Header { logical: 2 }.encode();
    bytes[..HEADER_LEN].copy_from_slice(&header);
    fs.write_file(&p, &bytes).unwrap();
    let msg = corruption_message(&open(&fs, &p).unwrap_err());
    assert!(msg.contains("logical"), "{msg}");
}

#[test]
fn get_at_checks_the_offset_hint_and_the_index() {
    let fs = new_fs();
    let p = path(1);
    let (_, positions) = write(&fs, &p, 1, &sample(5));
    let r = open(&fs, &p).unwrap();
    assert!(r.get_at(positions[2].offset, 2).is_ok());
    let msg = corruption_message(&r.get_at(positions[3].offset, 2).unwrap_err());
    assert!(
        msg.contains(&format!("offset {}", positions[3].offset)),
        "{msg}"
    );
    corruption_message(&r.get(5).unwrap_err());
    corruption_message(&r.get(u32::MAX).unwrap_err());
    corruption_message(&r.raw(5).unwrap_err());
}

#[test]
fn blob_reader_is_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<BlobReader>();
    assert_send_sync::<Bitmap>();
    assert_send_sync::<WorkerGcEngine>();
    assert_send_sync::<InlineGcEngine>();
    fn assert_send_static<T: Send + 'static>() {}
    assert_send_static::<GcTask>();
}

#[test]
fn header_and_footer_round_trip() {
    let h = Header { logical: u64::MAX };
    assert_eq!(Header::decode(&h.encode()), Ok(h));
    let f = Footer {
        offsets_offset: 1,
        count: 2,
        offsets_crc: 3,
        value_bytes: 4,
        logical: 5,
    };
    assert_eq!(Footer::decode(&f.encode()), Ok(f));
    assert!(Footer::decode(&f.encode()[1..]).is_err());
    assert!(Header::decode(&[0; HEADER_LEN]).is_err());
}

#[test]
fn the_magic_is_shaleblb_in_ascii() {
    let h = Header { logical: 0 }.encode();
    assert_eq!(&h[..8], b"SHALEBLB");
}

#[test]
fn bitmap_decode_rejects_bits_past_the_length_and_truncation() {
    let mut b = Bitmap::new(70, false);
    b.set(69);
    let mut buf = Vec::new();
    b.encode(&mut buf);
    assert_eq!(buf.len(), 1 + 16);
    assert_eq!(Bitmap::decode(&mut buf.as_slice()), Some(b.clone()));
    let mut bad = buf.clone();
    *bad.last_mut().unwrap() |= 0x80; // bit 127 of a 70-bit map
    assert_eq!(Bitmap::decode(&mut bad.as_slice()), None);
    for len in 0..buf.len() {
        let mut s = &buf[..len];
        assert_eq!(Bitmap::decode(&mut s), None);
        assert_eq!(s.len(), len, "a failed decode consumes nothing");
    }
    // A huge claimed length with no words is refused without allocating.
    let mut huge = Vec::new();
    crate::varint::put_varint64(&mut huge, u64::MAX);
    assert_eq!(Bitmap::decode(&mut huge.as_slice()), None);
    // Decoding advances past exactly one bitmap.
    let mut two = buf.clone();
    two.extend_from_slice(&[1, 2, 3]);
    let mut s = two.as_slice();
    assert_eq!(Bitmap::decode(&mut s), Some(b));
    assert_eq!(s, &[1, 2, 3]);
}

#[test]
fn bitmap_basics() {
    let mut b = Bitmap::new(1000, true);
    assert_eq!((b.len(), b.count_ones()), (1000, 1000));
    assert!(!b.get(1000));
    assert!(!b.set(1000), "past the end is a no-op");
    assert!(!b.clear(5000));
    assert!(b.clear(3));
    assert!(!b.clear(3));
    assert_eq!(b.rank(3), 3);
    assert_eq!(b.rank(4), 3);
    assert_eq!(b.rank(999), 998);
    assert_eq!(b.rank(1000), 999);
    assert_eq!(b.rank(u64::MAX), 999);
    let mut dead = Bitmap::new(600, false);
    dead.set(0);
    dead.set(599);
    b.and_not(&dead);
    assert_eq!(b.count_ones(), 997);
    assert!(b.get(600) && !b.get(599) && !b.get(0));
    assert_eq!(b.rank(600), 597);
    let e = Bitmap::new(0, true);
    assert!(e.is_empty() && e.count_ones() == 0 && e.iter_ones().next().is_none());
}

#[test]
fn token_bucket_paces_with_an_injected_clock() {
    let b = TokenBucket::new(1000, 100);
    let t0 = Instant::now();
    // The burst is free.
    assert_eq!(b.reserve(100, t0), Duration::ZERO);
    // Then each byte costs a millisecond.
    assert_eq!(b.reserve(10, t0), Duration::from_millis(10));
    assert_eq!(b.reserve(10, t0), Duration::from_millis(20));
    // Time pays the debt back; idling refills at most the burst.
    assert_eq!(b.reserve(0, t0 + Duration::from_millis(20)), Duration::ZERO);
    let later = t0 + Duration::from_secs(10);
    assert_eq!(b.reserve(100, later), Duration::ZERO);
    assert_eq!(b.reserve(1, later), Duration::from_millis(1));
    // A request larger than the burst runs into debt instead of failing.
    let big = TokenBucket::new(1 << 20, 1 << 10);
    let w = big.reserve(4 << 20, t0);
    assert!(
        w > Duration::from_millis(3990) && w <= Duration::from_secs(4),
        "{w:?}"
    );
    assert_eq!(big.rate(), 1 << 20);
}

#[test]
fn token_bucket_acquire_sleeps_roughly_the_cost() {
    let b = TokenBucket::new(1 << 20, 0);
    let t = Instant::now();
    b.acquire(100 << 10); // ~98 ms
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(90), "{took:?}");
    assert!(took < Duration::from_millis(600), "{took:?}");
}

// ---- GC ----

fn noop() -> OnComplete {
    Arc::new(|| {})
}

fn task(
    fs: &MemFs,
    id: u64,
    input: u64,
    logical: u64,
    survivors: Option<Bitmap>,
    keep: Bitmap,
    output: u64,
) -> GcTask {
    GcTask {
        id,
        fs: Arc::new(fs.clone()),
        input_path: path(input),
        logical,
        old_survivors: survivors,
        keep,
        output_path: path(output),
        output_number: output,
    }
}

fn bitmap_of(len: u64, ones: impl IntoIterator<Item = u64>) -> Bitmap {
    let mut b = Bitmap::new(len, false);
    for o in ones {
        b.set(o);
    }
    b
}

fn run_inline(t: GcTask) -> Result<GcOutput, crate::Error> {
    let engine = InlineGcEngine::new(noop());
    let id = t.id;
    engine.submit(t).unwrap();
    let mut done = engine.completions();
    assert_eq!(done.len(), 1);
    let c = done.pop().unwrap();
    assert_eq!(c.task_id, id);
    c.result
}

#[test]
fn gc_copies_exactly_the_kept_records_in_order_and_rank_finds_them() {
    let fs = new_fs();
    let records = sample(100);
    let (info, _) = write(&fs, &path(10), 10, &records);
    let n = u64::from(info.count);

    // First rewrite: from the original file (every ordinal held).
    let keep1 = bitmap_of(n, (0..n).filter(|o| o % 3 != 0));
    let out1 = run_inline(task(&fs, 1, 10, 10, None, keep1.clone(), 11)).unwrap();
    assert_eq!(
        (out1.task_id, out1.logical, out1.output_number),
        (1, 10, 11)
    );
    assert_eq!(u64::from(out1.info.count), keep1.count_ones());
    assert_eq!(out1.bytes_written, fs.file_size(&path(11)).unwrap());
    let r1 = open(&fs, &path(11)).unwrap();
    assert_eq!(r1.logical(), 10);
    let expected_values: u64 = keep1
        .iter_ones()
        .map(|o| records[o as usize].1.len() as u64)
        .sum();
    assert_eq!(r1.value_bytes(), expected_values);
    for o in 0..n {
        if keep1.get(o) {
            let rec = r1.get(keep1.rank(o) as u32).unwrap();
            let (k, v) = &records[o as usize];
            assert_eq!((rec.key.as_ref(), rec.value.as_ref()), (&k[..], &v[..]));
        }
    }

    // Second rewrite: from the rewritten file, through its survivors.
    let keep2 = bitmap_of(n, keep1.iter_ones().filter(|o| o % 2 == 0));
    let out2 = run_inline(task(&fs, 2, 11, 10, Some(keep1.clone()), keep2.clone(), 12)).unwrap();
    assert_eq!(u64::from(out2.info.count), keep2.count_ones());
    let r2 = open(&fs, &path(12)).unwrap();
    let got: Vec<_> = (0..r2.count()).map(|i| r2.get(i).unwrap().key).collect();
    let want: Vec<_> = keep2
        .iter_ones()
        .map(|o| records[o as usize].0.clone())
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.as_ref(), &w[..]);
    }
    // Raw records are copied byte for byte.
    let r0 = open(&fs, &path(10)).unwrap();
    for o in keep2.iter_ones() {
        assert_eq!(
            r2.raw(keep2.rank(o) as u32).unwrap(),
            r0.raw(o as u32).unwrap()
        );
    }
}

#[test]
fn gc_of_a_corrupt_record_fails_and_removes_its_output() {
    let fs = new_fs();
    let (_, positions) = write(&fs, &path(10), 10, &sample(20));
    fs.corrupt_byte(path(10), positions[7].offset + 5, 0x01)
        .unwrap();
    let keep = Bitmap::new(20, true);
    let e = run_inline(task(&fs, 1, 10, 10, None, keep.clone(), 11)).unwrap_err();
    let msg = corruption_message(&e);
    assert!(
        msg.contains(&format!("offset {}", positions[7].offset)),
        "{msg}"
    );
    assert!(!fs.exists(&path(11)), "partial output left behind");
    // Without the bad record, the copy succeeds.
    let mut keep = keep;
    keep.clear(7);
    assert!(run_inline(task(&fs, 2, 10, 10, None, keep, 11)).is_ok());
}

#[test]
fn gc_rejects_a_task_that_does_not_match_its_input() {
    let fs = new_fs();
    write(&fs, &path(10), 10, &sample(10));
    // Wrong logical id.
    let e = run_inline(task(&fs, 1, 10, 99, None, Bitmap::new(10, true), 11)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption);
    // Kept ordinal past the file.
    let e = run_inline(task(&fs, 1, 10, 10, None, bitmap_of(20, [15]), 11)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // Survivors that do not match the file's count.
    let e = run_inline(task(
        &fs,
        1,
        10,
        10,
        Some(bitmap_of(20, 0..9)),
        bitmap_of(20, [1]),
        11,
    ))
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption);
    // Kept ordinal that is not a survivor.
    let e = run_inline(task(
        &fs,
        1,
        10,
        10,
        Some(bitmap_of(20, 0..10)),
        bitmap_of(20, [12]),
        11,
    ))
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // Missing input.
    let e = run_inline(task(&fs, 1, 55, 10, None, Bitmap::new(10, true), 11)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(!fs.exists(&path(11)));
}

#[test]
fn inline_and_worker_engines_write_identical_bytes() {
    let fs = new_fs();
    let records = sample(300);
    write(&fs, &path(10), 10, &records);
    let keep = bitmap_of(300, (0..300).filter(|o| o % 7 != 3));
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let on_complete: OnComplete = Arc::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
    });

    let inline = InlineGcEngine::new(on_complete.clone());
    inline
        .submit(task(&fs, 1, 10, 10, None, keep.clone(), 20))
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(inline.busy(), 0);
    assert_eq!(inline.caps().name, "inline");
    let a = inline.completions().pop().unwrap().result.unwrap();

    let worker = WorkerGcEngine::new(2, 0, on_complete).unwrap();
    worker
        .submit(task(&fs, 2, 10, 10, None, keep.clone(), 21))
        .unwrap();
    let done = wait_for(&worker, 1);
    let b = done[0].result.clone().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "on_complete not called");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.info, b.info);
    assert_eq!(
        fs.read_file(path(20)).unwrap(),
        fs.read_file(path(21)).unwrap()
    );
}

/// Waits (bounded) until `n` completions arrived.
fn wait_for(engine: &dyn GcEngine, n: usize) -> Vec<GcCompletion> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut done = Vec::new();
    while done.len() < n {
        assert!(Instant::now() < deadline, "completions did not arrive");
        done.extend(engine.completions());
        std::thread::sleep(Duration::from_millis(1));
    }
    done
}

#[test]
fn worker_engine_respects_its_io_budget() {
    let fs = new_fs();
    // About 1 MiB of records.
    let records: Records = (0..64u32)
        .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 16 << 10]))
        .collect();
    write(&fs, &path(10), 10, &records);
    let engine = WorkerGcEngine::new(1, 4 << 20, noop()).unwrap();
    let start = Instant::now();
    engine
        .submit(task(&fs, 1, 10, 10, None, Bitmap::new(64, true), 11))
        .unwrap();
    let done = wait_for(&engine, 1);
    let took = start.elapsed();
    let out = done[0].result.clone().unwrap();
    assert!(out.bytes_read >= 1 << 20);
    // 1 MiB at 4 MiB/s with a 50 ms burst: about 200 ms.
    assert!(took >= Duration::from_millis(180), "{took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert!(out.micros >= 180_000, "{}", out.micros);
}

#[test]
fn worker_engine_is_busy_when_full_and_abandons_queued_work_at_shutdown() {
    let fs = new_fs();
    let records: Records = (0..16u32)
        .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 64 << 10]))
        .collect();
    write(&fs, &path(10), 10, &records);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    // 1 MiB per task at 1 MiB/s: nothing finishes during the test.
    let engine = WorkerGcEngine::new(
        1,
        1 << 20,
        Arc::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }),
    )
    .unwrap();
    let caps = engine.caps();
    assert_eq!(caps.max_in_flight, WORKER_TASKS_PER_THREAD);
    assert_eq!(caps.name, "worker");
    for id in 0..caps.max_in_flight as u64 {
        engine
            .submit(task(&fs, id, 10, 10, None, Bitmap::new(16, true), 20 + id))
            .unwrap();
    }
    assert_eq!(engine.busy(), caps.max_in_flight);
    let e = engine
        .submit(task(&fs, 99, 10, 10, None, Bitmap::new(16, true), 99))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy);

    std::thread::sleep(Duration::from_millis(20)); // let the worker start one
    let t = Instant::now();
    engine.shutdown();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "shutdown waited for the budget"
    );
    assert_eq!(engine.busy(), 0);
    let mut done = engine.completions();
    done.sort_by_key(|c| c.task_id);
    assert_eq!(
        done.iter().map(|c| c.task_id).collect::<Vec<_>>(),
        vec![0, 1]
    );
    for c in &done {
        assert_eq!(c.result.as_ref().unwrap_err().kind(), ErrorKind::Closed);
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "no wake-ups after shutdown"
    );
    for id in 0..caps.max_in_flight as u64 {
        assert!(!fs.exists(&path(20 + id)), "partial output left behind");
    }
    let e = engine
        .submit(task(&fs, 5, 10, 10, None, Bitmap::new(16, true), 30))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Closed);
    engine.shutdown(); // idempotent
}

#[test]
fn fuzz_entry_point_reads_a_real_file_and_survives_damage() {
    let fs = new_fs();
    let records = sample(15);
    write(&fs, &path(1), 1, &records);
    let good = fs.read_file(path(1)).unwrap();
    assert_eq!(fuzz_file(&good), records.len());
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x41;
        assert!(fuzz_file(&bad) <= records.len());
        fuzz_file(&good[..i]);
    }
}

// ---- Property tests ----

fn arb_bitmap() -> impl Strategy<Value = Bitmap> {
    (
        0u64..2000,
        proptest::collection::vec(any::<u64>(), 0..64),
        any::<bool>(),
    )
        .prop_map(|(len, picks, all)| {
            let mut b = Bitmap::new(len, all);
            for p in picks {
                if len > 0 {
                    if all {
                        b.clear(p % len);
                    } else {
                        b.set(p % len);
                    }
                }
            }
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn record_round_trips(key in proptest::collection::vec(any::<u8>(), 0..300),
                          value in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let mut rec = Vec::new();
        encode_record(&mut rec, &key, &value);
        prop_assert_eq!(rec.len() as u64, format::record_len(key.len(), value.len()).unwrap());
        let layout = decode_record(&rec).unwrap();
        prop_assert_eq!(&rec[layout.key.clone()], &key[..]);
        prop_assert_eq!(&rec[layout.value.clone()], &value[..]);
        prop_assert_eq!(parse_record(&rec).unwrap(), layout);
        prop_assert!(rec.len() >= MIN_RECORD_LEN);
        // Any single flipped bit fails the checksum or the parse.
        let bit = (key.len() * 7 + value.len()) % (rec.len() * 8);
        rec[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(decode_record(&rec).is_err());
    }

    #[test]
    fn record_decoding_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_record(&data);
        let _ = parse_record(&data);
        let _ = Header::decode(&data);
        let _ = Footer::decode(&data);
    }

    #[test]
    fn blob_ref_round_trips(file: u64, ordinal: u32, value_len: u32, offset: u64, extra: u8) {
        let r = BlobRef { file, ordinal, value_len, offset };
        let mut buf = Vec::new();
        r.encode(&mut buf);
        prop_assert!(buf.len() <= MAX_BLOB_REF_LEN);
        prop_assert_eq!(BlobRef::decode(&buf), Some(r));
        prop_assert_eq!(r.to_vec(), buf.clone());
        for len in 0..buf.len() {
            prop_assert_eq!(BlobRef::decode(&buf[..len]), None);
        }
        buf.push(extra);
        prop_assert_eq!(BlobRef::decode(&buf), None);
    }

    #[test]
    fn bitmap_rank_matches_a_naive_count(b in arb_bitmap(), probes in proptest::collection::vec(any::<u64>(), 1..32)) {
        let ones: Vec<u64> = (0..b.len()).filter(|&i| b.get(i)).collect();
        prop_assert_eq!(b.iter_ones().collect::<Vec<_>>(), ones.clone());
        prop_assert_eq!(b.count_ones(), ones.len() as u64);
        for p in probes {
            let i = p % (b.len() + 2);
            let naive = ones.iter().filter(|&&o| o < i).count() as u64;
            prop_assert_eq!(b.rank(i), naive);
        }
        for (r, &o) in ones.iter().enumerate() {
            prop_assert_eq!(b.rank(o), r as u64);
        }
    }

    #[test]
    fn bitmap_round_trips_and_and_not_matches_a_model(a in arb_bitmap(), other in arb_bitmap()) {
        let mut buf = Vec::new();
        a.encode(&mut buf);
        let mut s = buf.as_slice();
        prop_assert_eq!(Bitmap::decode(&mut s), Some(a.clone()));
        prop_assert!(s.is_empty());
        let mut c = a.clone();
        c.and_not(&other);
        let model: Vec<u64> = a.iter_ones().filter(|&i| !other.get(i)).collect();
        prop_assert_eq!(c.iter_ones().collect::<Vec<_>>(), model.clone());
        prop_assert_eq!(c.count_ones(), model.len() as u64);
        // The rank index was rebuilt.
        if let Some(&last) = model.last() {
            prop_assert_eq!(c.rank(last), model.len() as u64 - 1);
        }
    }

    #[test]
    fn bitmap_decoding_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut s = data.as_slice();
        if let Some(b) = Bitmap::decode(&mut s) {
            let mut again = Vec::new();
            b.encode(&mut again);
            prop_assert_eq!(Bitmap::decode(&mut again.as_slice()), Some(b));
        }
    }

    #[test]
    fn blob_files_of_random_records_round_trip(records in proptest::collection::vec(
        (proptest::collection::vec(any::<u8>(), 0..40), proptest::collection::vec(any::<u8>(), 0..200)), 0..40)) {
        let fs = new_fs();
        let p = path(1);
        let (info, positions) = write(&fs, &p, 3, &records);
        let r = open(&fs, &p).unwrap();
        prop_assert_eq!(r.file_size(), info.file_size);
        assert_reads_back(&r, &records, &positions);
    }
}
