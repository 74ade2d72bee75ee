//! Regression (found by the replication cluster's linearizability check): a read racing a
//! compaction must still find the key. Reads used to take the sequence number before the super
//! version; a compaction installed in between could drop the only version visible at that
//! number (keeping a newer one), and the read found nothing.

use shale::fs::{FaultFs, MemFs};
use shale::{Db, MemtableKind, Options};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn a_read_never_misses_a_key_while_flushes_and_compactions_drop_old_versions() {
    for memtable in [MemtableKind::SkipList, MemtableKind::FloDb] {
        let fs = FaultFs::new(MemFs::new());
        let db = Arc::new(
            Db::open(
                "db",
                Options {
                    fs: Arc::new(fs),
                    memtable,
                    write_buffer_size: 8 << 10,
                    target_file_size: 64 << 10,
                    max_bytes_for_level_base: 256 << 10,
                    level0_compaction_trigger: 2,
                    ..Options::default()
                },
            )
            .unwrap(),
        );
        for k in 0..5 {
            db.put(format!("k{k}"), "first").unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut reads, mut misses) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    reads += 1;
                    let key = format!("k{}", reads % 5);
                    misses += u64::from(db.get(&key).unwrap().is_none());
                    let all = db.multi_get(&[key.as_str()]);
                    misses += u64::from(all[0].as_ref().unwrap().is_none());
                }
                (reads, misses)
            })
        };
        for i in 0..8_000u64 {
            db.put(format!("k{}", i % 5), format!("v{i}-{}", "x".repeat(40)))
                .unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        let (reads, misses) = reader.join().unwrap();
        assert!(reads > 1000, "{memtable:?}: the reader ran");
        assert_eq!(
            misses, 0,
            "{memtable:?}: {misses} of {reads} reads missed a present key"
        );
        assert!(db.stats().compactions > 10, "{memtable:?}: compactions ran");
    }
}
