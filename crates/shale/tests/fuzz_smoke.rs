//! A short smoke run of the fuzz targets' entry points (`shale::fuzz_api`): random bytes, and real
//! WAL, MANIFEST and SST files from a database with random bytes flipped, truncated or spliced.
//! The real fuzzing runs with `cargo +nightly fuzz run <target>` (see `fuzz/`); this keeps the
//! decoders' never-panic contract checked in every test run.

use proptest::prelude::*;
use shale::fs::MemFs;
use shale::{fuzz_api, Db, Durability, Options, WriteBatch, WriteOptions};
use std::path::PathBuf;
use std::sync::Arc;

/// Every decoder, on the same bytes.
fn all_decoders(data: &[u8]) {
    fuzz_api::wal_replay(data);
    fuzz_api::manifest_edit(data);
    fuzz_api::manifest_replay(data);
    fuzz_api::sst_block(data);
    fuzz_api::sst_footer(data);
    fuzz_api::sst_table(data);
}

/// The files of a small database: (path, bytes), WALs, MANIFEST and SSTs.
fn real_files() -> Vec<(PathBuf, Vec<u8>)> {
    let fs = MemFs::new();
    let options = Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 8 << 10,
        block_size: 256,
        ..Options::default()
    };
    let db = Db::open("/smoke", options).unwrap();
    for i in 0..600u32 {
        let mut b = WriteBatch::new();
        b.put(
            format!("key{:04}", i % 250),
            format!("value-{i}-{}", "x".repeat((i % 13) as usize * 9)),
        );
        if i % 11 == 0 {
            b.delete(format!("key{:04}", (i * 7) % 250));
        }
        db.write(
            b,
            &WriteOptions {
                durability: Durability::Buffered,
            },
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.put("tail", "in the wal").unwrap();
    db.close().unwrap();
    let files: Vec<(PathBuf, Vec<u8>)> = fs
        .list_files()
        .into_iter()
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".log") || name.ends_with(".sst") || name.contains("MANIFEST-")
        })
        .map(|p| {
            let data = fs.read_file(&p).unwrap();
            (p, data)
        })
        .collect();
    assert!(
        files
            .iter()
            .any(|(p, _)| p.to_string_lossy().ends_with(".sst")),
        "no SST written"
    );
    files
}

#[test]
fn decoders_survive_mutated_real_files() {
    let files = real_files();
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for (_, data) in &files {
        all_decoders(data);
        if data.is_empty() {
            continue;
        }
        for _ in 0..200 {
            let mut bad = data.clone();
            match next() % 3 {
                0 => {
                    for _ in 0..1 + next() % 4 {
                        let i = (next() % bad.len() as u64) as usize;
                        bad[i] ^= 1 << (next() % 8);
                    }
                }
                1 => bad.truncate((next() % data.len() as u64) as usize),
                _ => {
                    let (a, b) = (
                        (next() % data.len() as u64) as usize,
                        (next() % data.len() as u64) as usize,
                    );
                    let (a, b) = (a.min(b), a.max(b));
                    bad.extend_from_slice(&data[a..b]);
                }
            }
            all_decoders(&bad);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn decoders_survive_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        all_decoders(&data);
    }
}

/// A blob file built byte by byte from `docs/format/blob.md`, independently of the crate's writer:
/// header, records, offsets array, footer.
fn blob_file_per_the_docs(logical: u64, records: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    const MAGIC: &[u8; 8] = b"SHALEBLB";
    fn varint(buf: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            buf.push(v as u8 | 0x80);
            v >>= 7;
        }
        buf.push(v as u8);
    }
    let mut file = Vec::new();
    file.extend_from_slice(MAGIC);
    file.extend_from_slice(&1u32.to_le_bytes());
    file.extend_from_slice(&logical.to_le_bytes());
    let crc = crc32c::crc32c(&file);
    file.extend_from_slice(&crc.to_le_bytes());
    let mut offsets = Vec::new();
    let mut value_bytes = 0u64;
    for (k, v) in records {
        offsets.extend_from_slice(&(file.len() as u32).to_le_bytes());
        let mut body = Vec::new();
        varint(&mut body, k.len() as u64);
        varint(&mut body, v.len() as u64);
        body.extend_from_slice(k);
        body.extend_from_slice(v);
        file.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        file.extend_from_slice(&body);
        value_bytes += v.len() as u64;
    }
    let mut footer = Vec::new();
    footer.extend_from_slice(&(file.len() as u64).to_le_bytes());
    footer.extend_from_slice(&(records.len() as u64).to_le_bytes());
    footer.extend_from_slice(&crc32c::crc32c(&offsets).to_le_bytes());
    footer.extend_from_slice(&value_bytes.to_le_bytes());
    footer.extend_from_slice(&logical.to_le_bytes());
    footer.extend_from_slice(MAGIC);
    footer.extend_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&footer);
    footer.extend_from_slice(&crc.to_le_bytes());
    file.extend_from_slice(&offsets);
    file.extend_from_slice(&footer);
    file
}

#[test]
fn blob_file_decoder_survives_mutated_real_files() {
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..40u32)
        .map(|i| {
            (
                format!("key{i:03}").into_bytes()[..(i % 7) as usize].to_vec(),
                vec![i as u8; (i as usize * 29) % 700],
            )
        })
        .collect();
    let data = blob_file_per_the_docs(7, &records);
    assert_eq!(
        fuzz_api::blob_file(&data),
        records.len(),
        "a file built from docs/format/blob.md reads back"
    );
    let mut state = 0x0fed_cba9_8765_4321u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..2000 {
        let mut bad = data.clone();
        match next() % 3 {
            0 => {
                for _ in 0..1 + next() % 4 {
                    let i = (next() % bad.len() as u64) as usize;
                    bad[i] ^= 1 << (next() % 8);
                }
                // Every record is checksummed: a flip costs at least one record or the file
                // (unless two flips cancel out).
                assert!(bad == data || fuzz_api::blob_file(&bad) < records.len());
            }
            1 => {
                bad.truncate((next() % data.len() as u64) as usize);
                assert_eq!(fuzz_api::blob_file(&bad), 0);
            }
            _ => {
                let (a, b) = (
                    (next() % data.len() as u64) as usize,
                    (next() % data.len() as u64) as usize,
                );
                let (a, b) = (a.min(b), a.max(b));
                bad.extend_from_slice(&data[a..b]);
                fuzz_api::blob_file(&bad);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn blob_file_decoder_survives_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzz_api::blob_file(&data);
    }
}
