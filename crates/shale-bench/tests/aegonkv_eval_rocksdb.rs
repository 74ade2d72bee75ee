//! The AegonKV evaluation's RocksDB and BlobDB property files, taken whole by `-db rocksdb`.
#![cfg(feature = "rocksdb")]

mod common;

use common::{analyse, bench_in, eval_file, Script};

#[test]
fn the_evaluations_rocksdb_files_run_whole_and_read_as_sg_py_reads_them() {
    for file in ["rocksdb.properties", "rocksdb-blob.properties"] {
        let dir = tempfile::tempdir().unwrap();
        let (code, _, err) = bench_in(
            dir.path(),
            &[
                "gen-trace",
                "-benchmarks=mixgraph",
                "-num=3000",
                "-reads=12000",
                "-value_k=0.923",
                "-value_sigma=226.409",
                "-mix_get_ratio=0.55",
                "-mix_put_ratio=0.44",
                "-mix_seek_ratio=0.01",
                "-path_save_keys=./trans",
            ],
        );
        assert_eq!(code, 0, "{err}");
        let (code, out, err) = bench_in(
            dir.path(),
            &[
                "-load",
                "-run",
                "-db",
                "rocksdb",
                "-P",
                &eval_file("workload_meta"),
                "-P",
                &eval_file(file),
                "-s",
                "-statistics",
                "-p",
                "threadcount=4",
                "-p",
                "recordcount=3000",
                "-p",
                "operationcount=12000",
                // Small memtables and levels so that the run flushes and compacts.
                "-p",
                "rocksdb.write_buffer_size=131072",
                "-p",
                "rocksdb.target_file_size_base=65536",
                "-p",
                "rocksdb.max_bytes_for_level_base=262144",
            ],
        );
        assert_eq!(code, 0, "{file}: {out}\n{err}");
        assert!(
            !err.contains("warning"),
            "{file}: every name is known: {err}"
        );
        assert!(
            out.contains("Run operations success(ops): 12000\n"),
            "{out}"
        );
        let a = analyse(&out, 12_000, Script::LoadAndRun).unwrap();
        assert!(a.compact_write > 0, "{file}: {out}");
        // The second block counts the run alone: less than the load and run together.
        let first = analyse(&out, 12_000, Script::RunOnly).unwrap();
        assert!(out.contains("\nbench.settle.timeout COUNT : 0\n"), "{out}");
        assert_ne!(
            (first.compact_write, a.compact_write),
            (0, 0),
            "{file}: {out}"
        );
    }
}
