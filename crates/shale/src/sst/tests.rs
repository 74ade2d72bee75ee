//! Tests of the SST format: blocks, filters, properties, footer, builder and reader.

use super::block::{Block, BlockBuilder, BlockIter};
use super::builder::separator;
use super::filter::{build_filter, filter_hash, Filter};
use super::format::{BlockHandle, Footer, FOOTER_LEN};
use super::*;
use crate::cache::BlockCache;
use crate::error::ErrorKind;
use crate::fs::{Fs, MemFs};
use crate::iter::collect_forward;
use crate::iter::InternalIterator;
use crate::key::{compare_internal, internal_key, seek_key, user_key, ValueKind};
use proptest::prelude::*;
use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn new_fs() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/db")).expect("mkdir");
    fs
}

fn ikey(user: &[u8], seq: u64) -> Vec<u8> {
    internal_key(user, seq, ValueKind::Value)
}

fn opts(
    block_size: usize,
    restart_interval: usize,
    bloom: u32,
    compression: Compression,
) -> TableOptions {
    TableOptions {
        block_size,
        restart_interval,
        bloom_bits_per_key: bloom,
        compression,
    }
}

/// Builds a table at `path` in `fs` from sorted entries and opens it.
fn build(
    fs: &MemFs,
    path: &Path,
    entries: &[(Vec<u8>, Vec<u8>)],
    o: TableOptions,
) -> (TableInfo, Arc<Table>) {
    let info = write(fs, path, entries, o);
    (info, open(fs, path, None).expect("open"))
}

fn write(fs: &MemFs, path: &Path, entries: &[(Vec<u8>, Vec<u8>)], o: TableOptions) -> TableInfo {
    let file = fs.create(path).expect("create");
    let mut b = TableBuilder::new(file, path.to_path_buf(), o);
    for (k, v) in entries {
        b.add(k, v).expect("add");
    }
    b.finish().expect("finish")
}

fn open(fs: &MemFs, path: &Path, cache: Option<Arc<BlockCache>>) -> crate::Result<Arc<Table>> {
    let file = fs.open(path).expect("open file");
    Table::open(file, path.to_path_buf(), 1, cache).map(Arc::new)
}

fn sample_entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    // Two versions of every third key, to exercise several versions of one user key.
    let mut out = Vec::new();
    for i in 0..n {
        let user = format!("key{:06}", i * 7).into_bytes();
        if i % 3 == 0 {
            out.push((
                internal_key(&user, 1000 + i as u64, ValueKind::Deletion),
                Vec::new(),
            ));
        }
        out.push((
            ikey(&user, i as u64 + 1),
            format!("value-{i}-{}", "x".repeat(i % 40)).into_bytes(),
        ));
    }
    out
}

fn collect_backward(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    out.reverse();
    out
}

/// Index of the first entry `>= target`.
fn lower_bound(entries: &[(Vec<u8>, Vec<u8>)], target: &[u8]) -> usize {
    entries.partition_point(|(k, _)| compare_internal(k, target) == Ordering::Less)
}

/// Checks seek and seek_for_prev of `it` at `target` against `entries`.
fn check_seeks(it: &mut dyn InternalIterator, entries: &[(Vec<u8>, Vec<u8>)], target: &[u8]) {
    let lb = lower_bound(entries, target);
    it.seek(target);
    match entries.get(lb) {
        Some((k, v)) => {
            assert!(it.valid(), "seek {target:?}");
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        }
        None => assert!(!it.valid()),
    }
    // Last entry <= target.
    let ub = entries.partition_point(|(k, _)| compare_internal(k, target) != Ordering::Greater);
    it.seek_for_prev(target);
    match ub.checked_sub(1).and_then(|i| entries.get(i)) {
        Some((k, v)) => {
            assert!(it.valid(), "seek_for_prev {target:?}");
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        }
        None => assert!(!it.valid()),
    }
    assert!(it.status().is_ok());
}

fn build_block(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Block {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in entries {
        b.add(k, v).expect("add");
    }
    Block::new(b.finish().to_vec()).expect("valid block")
}

#[test]
fn block_round_trips_in_both_directions_and_seeks_at_and_between_keys() {
    for interval in [1, 2, 3, 16, 1000] {
        for n in [0, 1, 2, 5, 16, 17, 100] {
            let entries: Vec<_> = sample_entries(n);
            let block = build_block(&entries, interval);
            let mut it = BlockIter::new(&block);
            assert_eq!(
                collect_forward(&mut it),
                entries,
                "interval {interval} n {n}"
            );
            assert_eq!(
                collect_backward(&mut it),
                entries,
                "interval {interval} n {n}"
            );
            for (k, _) in &entries {
                check_seeks(&mut it, &entries, k);
                // Between keys: just after k (same user key, older) and just before.
                let u = user_key(k);
                check_seeks(&mut it, &entries, &seek_key(u, 0));
                check_seeks(&mut it, &entries, &seek_key(u, u64::MAX >> 8));
                let mut longer = u.to_vec();
                longer.push(0);
                check_seeks(&mut it, &entries, &seek_key(&longer, 5));
            }
            check_seeks(&mut it, &entries, &seek_key(b"", 0));
            check_seeks(&mut it, &entries, &seek_key(b"zzz", 0));
            // A scan that starts from a positioned cursor (the narrowed binary search).
            if let Some((k, _)) = entries.first() {
                it.seek(k);
                for (k2, _) in entries.iter().step_by(3) {
                    check_seeks(&mut it, &entries, k2);
                }
            }
        }
    }
}

#[test]
fn block_rejects_bad_restart_arrays() {
    assert!(Block::new(Vec::new()).is_err());
    assert!(Block::new(vec![0, 0, 0]).is_err());
    assert!(Block::new(vec![0, 0, 0, 0]).is_err(), "zero restarts");
    assert!(
        Block::new(vec![0xff, 0xff, 0xff, 0xff]).is_err(),
        "restart count too large"
    );
    // A restart pointing past the entries.
    assert!(Block::new(vec![1, 2, 3, 9, 0, 0, 0, 1, 0, 0, 0]).is_err());
    assert!(
        Block::new(vec![0, 0, 0, 0, 1, 0, 0, 0]).is_ok(),
        "the empty block"
    );
}

#[test]
fn bloom_filter_has_no_false_negatives_and_the_expected_false_positive_rate() {
    for bits in [4u32, 10, 16] {
        let n = 20_000;
        let hashes: Vec<u64> = (0..n)
            .map(|i| filter_hash(format!("present{i}").as_bytes()))
            .collect();
        let filter = Filter::new(build_filter(&hashes, bits)).expect("valid filter");
        for i in 0..n {
            assert!(
                filter.may_contain(format!("present{i}").as_bytes()),
                "false negative"
            );
        }
        let probes = 100_000;
        let fp = (0..probes)
            .filter(|i| filter.may_contain(format!("absent{i}").as_bytes()))
            .count();
        let rate = fp as f64 / probes as f64;
        let expected = Filter::expected_fp_rate(n, bits);
        assert!(
            rate < expected * 1.3 + 0.001 && rate > expected * 0.7 - 0.001,
            "bits {bits}: rate {rate} expected {expected}"
        );
        if bits == 10 {
            assert!(
                rate < 0.015,
                "10 bits per key should give about 1% false positives: {rate}"
            );
        }
    }
    assert!(
        build_filter(&[1, 2, 3], 0).is_empty(),
        "0 bits per key: no filter"
    );
}

#[test]
fn separator_is_short_and_between_the_keys() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"abcdefgh", b"abzz"),
        (b"abc", b"abd"),
        (b"abc", b"abcd"),
        (b"a\xff\xff", b"b"),
        (b"helloworld", b"hellz"),
        (b"same", b"same"),
    ];
    let mut out = Vec::new();
    for (a, b) in cases {
        let last = ikey(a, 5);
        let next = if a == b { ikey(b, 4) } else { ikey(b, 9) };
        separator(&last, &next, &mut out);
        assert_ne!(compare_internal(&out, &last), Ordering::Less, "{a:?} {b:?}");
        assert_eq!(compare_internal(&out, &next), Ordering::Less, "{a:?} {b:?}");
        assert!(out.len() <= last.len());
    }
    separator(&ikey(b"abcdefgh", 1), &ikey(b"abzz", 1), &mut out);
    assert_eq!(user_key(&out), b"abd");
}

#[test]
fn footer_round_trips_and_rejects_every_flipped_byte() {
    let footer = Footer {
        filter: BlockHandle {
            offset: 100,
            size: 20,
        },
        properties: BlockHandle {
            offset: 125,
            size: 30,
        },
        index: BlockHandle {
            offset: 160,
            size: 40,
        },
    };
    let bytes = footer.encode();
    assert_eq!(bytes.len(), FOOTER_LEN);
    assert_eq!(Footer::decode(&bytes), Ok(footer));
    for i in 0..FOOTER_LEN {
        let mut bad = bytes;
        bad[i] ^= 0x10;
        assert!(Footer::decode(&bad).is_err(), "flip at {i}");
    }
    assert!(Footer::decode(&bytes[1..]).is_err());
}

#[test]
fn builder_rejects_out_of_order_and_malformed_keys() {
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    let mut b = TableBuilder::new(
        fs.create(path).unwrap(),
        path.into(),
        opts(4096, 16, 10, Compression::None),
    );
    b.add(&ikey(b"b", 1), b"v").unwrap();
    assert_eq!(
        b.add(&ikey(b"a", 1), b"v").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        b.add(&ikey(b"b", 1), b"v").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        b.add(b"short", b"v").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    b.add(&ikey(b"b", 0), b"older version").unwrap();
}

#[test]
fn empty_table_opens_and_is_empty() {
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    let (info, table) = build(&fs, path, &[], opts(4096, 16, 10, Compression::Lz4));
    assert_eq!(info.properties.num_entries, 0);
    assert!(info.smallest.is_empty() && info.largest.is_empty());
    assert_eq!(table.get(&seek_key(b"a", 10)).unwrap(), None);
    let mut it = table.iter(true);
    assert!(collect_forward(&mut it).is_empty());
    it.seek_for_prev(&seek_key(b"a", 1));
    assert!(!it.valid() && it.status().is_ok());
}

#[test]
fn table_properties_and_info_describe_the_entries() {
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    let entries = sample_entries(300);
    let (info, table) = build(&fs, path, &entries, opts(512, 4, 10, Compression::None));
    let p = table.properties();
    assert_eq!(p, &info.properties);
    assert_eq!(p.num_entries, entries.len() as u64);
    assert_eq!(p.num_deletions, 100);
    assert_eq!(
        p.raw_key_bytes,
        entries.iter().map(|(k, _)| k.len() as u64).sum::<u64>()
    );
    assert_eq!(
        p.raw_value_bytes,
        entries.iter().map(|(_, v)| v.len() as u64).sum::<u64>()
    );
    assert_eq!((p.smallest_seq, p.largest_seq), (1, 1000 + 297));
    assert!(p.num_data_blocks > 10);
    assert!(p.index_size > 0 && p.filter_size > 0);
    assert!(p.blob_refs.is_empty());
    assert_eq!(info.smallest, entries[0].0);
    assert_eq!(info.largest, entries.last().unwrap().0);
    assert_eq!(info.file_size, fs.file_size(path).unwrap());
}

#[test]
fn blob_references_are_summed_per_blob_file() {
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    let mut b = TableBuilder::new(
        fs.create(path).unwrap(),
        path.into(),
        opts(4096, 16, 10, Compression::None),
    );
    b.add(&internal_key(b"k", 1, ValueKind::BlobRef), b"ref")
        .unwrap();
    b.add_blob_reference(9, 100);
    b.add_blob_reference(3, 10);
    b.add_blob_reference(9, 5);
    let info = b.finish().unwrap();
    assert_eq!(info.properties.blob_refs, vec![(3, 10), (9, 105)]);
    assert_eq!(
        open(&fs, path, None).unwrap().properties().blob_refs,
        vec![(3, 10), (9, 105)]
    );
}

#[test]
fn lz4_shrinks_compressible_tables_and_reads_back_the_same() {
    let entries: Vec<_> = (0..2000)
        .map(|i| {
            (
                ikey(format!("user{i:08}").as_bytes(), i + 1),
                format!("{:0>200}", i % 7).into_bytes(),
            )
        })
        .collect();
    let fs = new_fs();
    let plain = Path::new("/db/plain.sst");
    let lz4 = Path::new("/db/lz4.sst");
    let (plain_info, plain_table) =
        build(&fs, plain, &entries, opts(4096, 16, 10, Compression::None));
    let (lz4_info, lz4_table) = build(&fs, lz4, &entries, opts(4096, 16, 10, Compression::Lz4));
    assert!(
        lz4_info.file_size * 3 < plain_info.file_size,
        "{} vs {}",
        lz4_info.file_size,
        plain_info.file_size
    );
    for table in [plain_table, lz4_table] {
        assert_eq!(collect_forward(&mut table.iter(true)), entries);
        assert_eq!(collect_backward(&mut table.iter(false)), entries);
        for (k, v) in entries.iter().step_by(37) {
            assert_eq!(table.get(k).unwrap(), Some((k.clone(), v.clone())));
        }
    }
    // Incompressible data is stored as is even when LZ4 is asked for.
    let random: Vec<_> = (0..200u64)
        .map(|i| {
            let v: Vec<u8> = (0..300u64)
                .map(|j| (xxhash_rust::xxh3::xxh3_64(&(i * 1000 + j).to_le_bytes()) >> 7) as u8)
                .collect();
            (ikey(format!("r{i:05}").as_bytes(), 1), v)
        })
        .collect();
    let (a, _) = build(
        &fs,
        Path::new("/db/r1.sst"),
        &random,
        opts(4096, 16, 0, Compression::None),
    );
    let (b, t) = build(
        &fs,
        Path::new("/db/r2.sst"),
        &random,
        opts(4096, 16, 0, Compression::Lz4),
    );
    let data_bytes = |i: &TableInfo| i.file_size - i.properties.index_size;
    assert_eq!(
        data_bytes(&a),
        data_bytes(&b),
        "data blocks stored uncompressed"
    );
    assert_eq!(collect_forward(&mut t.iter(true)), random);
}

#[test]
fn block_cache_serves_repeated_reads_and_compaction_reads_do_not_fill_it() {
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    let entries = sample_entries(500);
    write(&fs, path, &entries, opts(1024, 16, 10, Compression::Lz4));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = open(&fs, path, Some(cache.clone())).unwrap();
    assert_eq!(collect_forward(&mut table.iter(false)), entries);
    assert_eq!(cache.usage_bytes(), 0, "fill_cache = false inserts nothing");
    let (k, v) = &entries[10];
    assert_eq!(table.get(k).unwrap(), Some((k.clone(), v.clone())));
    let misses = cache.misses();
    assert_eq!(table.get(k).unwrap(), Some((k.clone(), v.clone())));
    assert_eq!(cache.misses(), misses);
    assert!(cache.hits() >= 1);
    assert_eq!(collect_forward(&mut table.iter(true)), entries);
    assert!(cache.usage_bytes() > 0);
    assert_eq!(collect_backward(&mut table.iter(false)), entries);
}

#[test]
fn get_uses_the_bloom_filter_and_finds_only_matching_user_keys() {
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    let entries = sample_entries(200);
    let (_, table) = build(&fs, path, &entries, opts(256, 2, 10, Compression::None));
    for i in 0..200 {
        let user = format!("key{:06}", i * 7 + 1);
        assert_eq!(
            table
                .get(&seek_key(user.as_bytes(), u64::MAX >> 8))
                .unwrap(),
            None
        );
    }
    // A read at a sequence number older than every version of the key finds nothing.
    let user = format!("key{:06}", 7 * 5);
    assert_eq!(table.get(&seek_key(user.as_bytes(), 5)).unwrap(), None);
    let (k, v) = table.get(&seek_key(user.as_bytes(), 6)).unwrap().unwrap();
    assert_eq!(
        (user_key(&k), v.starts_with(b"value-5-")),
        (user.as_bytes(), true)
    );
}

/// Flips each byte of a small table (with and without compression) and checks that opening and
/// reading it either fails with `Corruption` or returns exactly the original data.
#[test]
fn every_flipped_byte_is_detected_or_harmless() {
    for compression in [Compression::None, Compression::Lz4] {
        let entries: Vec<_> = (0..40)
            .map(|i| {
                (
                    ikey(format!("k{:03}", i * 3).as_bytes(), i + 1),
                    format!("v{}", "ab".repeat(i as usize % 9)).into_bytes(),
                )
            })
            .collect();
        let fs = new_fs();
        let path = Path::new("/db/1.sst");
        write(&fs, path, &entries, opts(128, 3, 10, compression));
        let len = fs.file_size(path).unwrap();
        let mut harmless = 0;
        for offset in 0..len {
            for xor in [0x01u8, 0x80] {
                fs.corrupt_byte(path, offset, xor).unwrap();
                match read_everything(&fs, path, &entries) {
                    Ok(()) => harmless += 1,
                    Err(e) => assert_eq!(e.kind(), ErrorKind::Corruption, "offset {offset}: {e}"),
                }
                fs.corrupt_byte(path, offset, xor).unwrap();
            }
        }
        // Every byte is covered by a checksum and the regions tile the file: no flip goes unseen.
        assert_eq!(harmless, 0, "{compression:?}: flips that changed nothing");
        read_everything(&fs, path, &entries).expect("restored table reads back");
    }
}

/// Opens the table and reads it every way; any data returned must be the original.
fn read_everything(fs: &MemFs, path: &Path, entries: &[(Vec<u8>, Vec<u8>)]) -> crate::Result<()> {
    let table = open(fs, path, Some(Arc::new(BlockCache::new(1 << 20))))?;
    for (k, v) in entries {
        assert_eq!(table.get(k)?, Some((k.clone(), v.clone())));
    }
    let mut it = table.iter(true);
    let fwd = collect_forward(&mut it);
    it.status()?;
    assert_eq!(fwd, entries);
    let back = collect_backward(&mut it);
    it.status()?;
    assert_eq!(back, entries);
    Ok(())
}

#[test]
fn truncated_and_garbage_files_are_corruption() {
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    write(
        &fs,
        path,
        &sample_entries(50),
        opts(256, 4, 10, Compression::Lz4),
    );
    let len = fs.file_size(path).unwrap();
    for cut in [0, 1, 63, 64, len / 2, len - 1] {
        let bytes = fs.read_file(path).unwrap();
        let p = PathBuf::from(format!("/db/cut{cut}.sst"));
        fs.write_file(&p, &bytes[..cut as usize]).unwrap();
        let err = open(&fs, &p, None)
            .err()
            .expect("truncated file must not open");
        assert_eq!(err.kind(), ErrorKind::Corruption);
        assert!(err.message().contains(&*p.to_string_lossy()), "{err}");
    }
}

#[test]
fn fuzz_entry_points_accept_real_and_garbage_input() {
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    write(
        &fs,
        path,
        &sample_entries(50),
        opts(256, 4, 10, Compression::Lz4),
    );
    let bytes = fs.read_file(path).unwrap();
    fuzz_table(&bytes);
    fuzz_footer(&bytes[bytes.len() - FOOTER_LEN..]);
    let block = build_block(&sample_entries(30), 4);
    let _ = block;
    let mut b = BlockBuilder::new(4);
    for (k, v) in sample_entries(30) {
        b.add(&k, &v).unwrap();
    }
    let raw = b.finish().to_vec();
    fuzz_block(&raw);
    for i in 0..raw.len() {
        let mut bad = raw.clone();
        bad[i] ^= 0x41;
        fuzz_block(&bad);
        bad.truncate(i);
        fuzz_block(&bad);
    }
}

/// A model entry: user key ascending, then sequence number descending, as `compare_internal`.
type Model = BTreeMap<(Vec<u8>, Reverse<u64>), (ValueKind, Vec<u8>)>;

fn model_entries(model: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .map(|((u, Reverse(s)), (kind, v))| (internal_key(u, *s, *kind), v.clone()))
        .collect()
}

fn arb_model() -> impl Strategy<Value = Model> {
    let key = proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..12);
    let kind = prop_oneof![
        Just(ValueKind::Value),
        Just(ValueKind::Deletion),
        Just(ValueKind::BlobRef)
    ];
    let value = proptest::collection::vec(any::<u8>(), 0..80);
    proptest::collection::btree_map((key, (0u64..20).prop_map(Reverse)), (kind, value), 0..300)
}

fn arb_options() -> impl Strategy<Value = TableOptions> {
    (
        prop_oneof![Just(64usize), Just(200), Just(4096)],
        1usize..20,
        prop_oneof![Just(0u32), Just(1), Just(10)],
        prop_oneof![Just(Compression::None), Just(Compression::Lz4)],
    )
        .prop_map(|(b, r, f, c)| opts(b, r, f, c))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn table_round_trips_against_a_btreemap(model in arb_model(), o in arb_options(),
                                            probes in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..4), 0u64..25), 0..40)) {
        let fs = new_fs();
        let path = Path::new("/db/000001.sst");
        let entries = model_entries(&model);
        let (info, table) = build(&fs, path, &entries, o);
        prop_assert_eq!(info.properties.num_entries, entries.len() as u64);
        let mut it = table.iter(true);
        prop_assert_eq!(&collect_forward(&mut it), &entries);
        prop_assert_eq!(&collect_backward(&mut it), &entries);
        // Point lookups at every version and at random targets.
        let mut targets: Vec<Vec<u8>> = entries.iter().map(|(k, _)| k.clone()).collect();
        for (u, s) in &probes {
            let mut user = model.keys().nth(*s as usize % model.len().max(1)).map(|(u, _)| u.clone()).unwrap_or_default();
            user.extend_from_slice(u);
            targets.push(seek_key(&user, *s));
            targets.push(seek_key(u, *s));
        }
        for target in &targets {
            let lb = lower_bound(&entries, target);
            let expected = entries.get(lb).filter(|(k, _)| user_key(k) == user_key(target)).cloned();
            prop_assert_eq!(table.get(target).unwrap(), expected);
            check_seeks(&mut it, &entries, target);
        }
    }

    #[test]
    fn properties_round_trip(n in any::<u64>(), d in any::<u64>(), seqs in (any::<u64>(), any::<u64>()),
                             refs in proptest::collection::btree_map(any::<u64>(), any::<u64>(), 0..10)) {
        let p = Properties {
            num_entries: n.max(d), num_deletions: n.min(d), raw_key_bytes: n, raw_value_bytes: d,
            smallest_seq: seqs.0.min(seqs.1), largest_seq: seqs.0.max(seqs.1), num_data_blocks: 3,
            index_size: 7, filter_size: 0, blob_refs: refs.into_iter().collect(),
        };
        prop_assert_eq!(Properties::decode(&p.encode()), Ok(p));
    }

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        fuzz_block(&data);
        fuzz_footer(&data);
        fuzz_table(&data);
    }
}

#[test]
fn table_iterator_is_an_owned_send_cursor() {
    fn assert_owned_cursor<T: InternalIterator + Send + 'static>(_: &T) {}
    fn assert_shared<T: Send + Sync>() {}
    assert_shared::<Table>();
    let fs = new_fs();
    let path = Path::new("/db/1.sst");
    let entries = sample_entries(20);
    let (_, table) = build(&fs, path, &entries, opts(4096, 16, 10, Compression::None));
    let mut it = table.iter(true);
    assert_owned_cursor(&it);
    drop(table);
    let mut boxed: Box<dyn InternalIterator> = Box::new(it);
    assert_eq!(collect_forward(&mut boxed), entries);
    it = *Box::new(open(&fs, path, None).unwrap().iter(false));
    std::thread::spawn(move || assert_eq!(collect_backward(&mut it), entries))
        .join()
        .unwrap();
}
