//! Large values go straight to blob files of their own (regression tests for issue 18, defect
//! 5): the WAL and the memtable carry only a reference, other writers do not wait behind the
//! value's copy, every read path finds the value before and after flush, compaction, GC and
//! reopen, and a crash at any point leaves either the value or nothing (never a reference to a
//! missing file), with orphaned files removed at the next open.

use shale::fs::{FaultFs, FaultOp, Fs, MemFs, RandomAccessFile, SyncHandle, WritableFile};
use shale::{Db, Durability, ErrorKind, Options, WriteBatch, WriteOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

const DIR: &str = "/large";
/// The tests' `large_value_size`: small, so the tests stay fast.
const LARGE: usize = 64 << 10;
/// How long a test waits for something that should take milliseconds.
const PATIENCE: Duration = Duration::from_secs(20);

fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        fs,
        large_value_size: LARGE,
        write_buffer_size: 1 << 20,
        ..Options::default()
    }
}

fn with(durability: Durability) -> WriteOptions {
    WriteOptions { durability }
}

fn big(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn put(db: &Db, key: &str, value: &[u8], durability: Durability) -> shale::Result<()> {
    let mut batch = WriteBatch::new();
    batch.put(key, value);
    db.write(batch, &with(durability))
}

/// Names of the files in the database directory ending in `ext`.
fn files(fs: &MemFs, ext: &str) -> Vec<String> {
    fs.list_dir(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(ext))
        .collect()
}

fn wal_bytes(fs: &MemFs) -> u64 {
    files(fs, ".log")
        .iter()
        .map(|n| fs.file_size(&Path::new(DIR).join(n)).unwrap())
        .sum()
}

fn check(db: &Db, key: &str, value: &[u8], stage: &str) {
    let got = db.get(key).unwrap();
    assert!(
        got.as_deref() == Some(value),
        "{stage}: wrong value of {key}"
    );
}

#[test]
fn a_large_value_skips_the_wal_and_reads_back_everywhere() {
    let fs = MemFs::new();
    let v1 = big(1, 1 << 20);
    let v2 = big(2, 3 * LARGE);
    {
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        put(&db, "a-small", b"x", Durability::Buffered).unwrap();
        put(&db, "b-large", &v1, Durability::Buffered).unwrap();
        let mut batch = WriteBatch::new();
        batch
            .put("c-large", &v2)
            .put("d-small", "y")
            .delete("a-small");
        db.write(batch, &with(Durability::Sync)).unwrap();
        assert!(
            wal_bytes(&fs) < LARGE as u64,
            "the WAL holds {} bytes: the values went through it",
            wal_bytes(&fs)
        );
        assert_eq!(files(&fs, ".blob").len(), 2);
        check(&db, "b-large", &v1, "before flush");
        check(&db, "c-large", &v2, "before flush");
        assert_eq!(db.get("a-small").unwrap(), None);
        let all: Vec<_> = db.iter().collect::<shale::Result<_>>().unwrap();
        assert_eq!(
            all,
            vec![
                (b"b-large".to_vec(), v1.clone()),
                (b"c-large".to_vec(), v2.clone()),
                (b"d-small".to_vec(), b"y".to_vec()),
            ]
        );
        let snap = db.snapshot();
        assert_eq!(snap.get("b-large").unwrap(), Some(v1.clone()));
        drop(snap);
    }
    // Reopened from the WAL: the references are replayed and their files found.
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    check(&db, "b-large", &v1, "after replay");
    check(&db, "c-large", &v2, "after replay");
    db.flush().unwrap();
    check(&db, "b-large", &v1, "after flush");
    db.compact_range(..).unwrap();
    check(&db, "c-large", &v2, "after compaction");
    db.collect_garbage().unwrap();
    let multi = db.multi_get(&["b-large", "c-large"]);
    assert_eq!(multi[0].as_ref().unwrap().as_deref(), Some(&v1[..]));
    assert_eq!(multi[1].as_ref().unwrap().as_deref(), Some(&v2[..]));
    drop(db);
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    check(&db, "b-large", &v1, "after flush and reopen");
    check(&db, "c-large", &v2, "after flush and reopen");
    assert_eq!(files(&fs, ".blob").len(), 2);
}

#[test]
fn an_overwritten_large_value_loses_its_blob_file() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    put(&db, "k", &big(1, 2 * LARGE), Durability::Buffered).unwrap();
    put(&db, "k", &big(2, 2 * LARGE), Durability::Buffered).unwrap();
    put(&db, "gone", &big(3, 2 * LARGE), Durability::Buffered).unwrap();
    db.delete("gone").unwrap();
    assert_eq!(files(&fs, ".blob").len(), 3);
    db.flush().unwrap();
    check(&db, "k", &big(2, 2 * LARGE), "after flush");
    // The overwritten value's file never reaches a version: it goes with its memtable. The
    // deleted one's reference stays in L0 under its tombstone until a compaction drops both.
    db.compact_range(..).unwrap();
    db.collect_garbage().unwrap();
    db.flush().unwrap();
    assert_eq!(files(&fs, ".blob").len(), 1, "{:?}", files(&fs, ".blob"));
    check(&db, "k", &big(2, 2 * LARGE), "after compaction");
    assert_eq!(db.get("gone").unwrap(), None);
}

#[test]
fn power_loss_keeps_synced_large_values_and_removes_orphans() {
    let fs = FaultFs::default();
    {
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        put(&db, "synced", &big(1, 2 * LARGE), Durability::Sync).unwrap();
        // Its blob file is synced, but its WAL record is not: the power loss takes the record.
        put(&db, "buffered", &big(2, 2 * LARGE), Durability::Buffered).unwrap();
        assert_eq!(files(fs.mem(), ".blob").len(), 2);
        fs.cut_power_after(0);
    }
    let after = fs.crash_clone();
    assert_eq!(files(after.mem(), ".blob").len(), 2);
    let db = Db::open(DIR, options(Arc::new(after.clone()))).unwrap();
    check(&db, "synced", &big(1, 2 * LARGE), "after power loss");
    assert_eq!(db.get("buffered").unwrap(), None);
    assert_eq!(
        files(after.mem(), ".blob").len(),
        1,
        "the orphaned blob file stays: {:?}",
        files(after.mem(), ".blob")
    );
}

#[test]
fn every_crash_point_of_a_large_write_leaves_the_value_or_nothing() {
    let scenario = |fs: &FaultFs| -> shale::Result<()> {
        let db = Db::open(DIR, options(Arc::new(fs.clone())))?;
        put(&db, "k", &big(7, 2 * LARGE), Durability::Sync)?;
        db.flush()
    };
    let dry = FaultFs::default();
    scenario(&dry).unwrap();
    let total = dry.mutating_ops();
    for crash_at in 0..=total {
        let fs = FaultFs::default();
        fs.cut_power_after(crash_at);
        let acked = {
            let db = Db::open(DIR, options(Arc::new(fs.clone())));
            db.and_then(|db| put(&db, "k", &big(7, 2 * LARGE), Durability::Sync))
                .is_ok()
        };
        let after = fs.crash_clone();
        if !after.exists(&Path::new(DIR).join("CURRENT")) {
            assert!(
                !acked,
                "crash at {crash_at}: acknowledged without a database"
            );
            continue;
        }
        let db = Db::open(DIR, options(Arc::new(after.clone())))
            .unwrap_or_else(|e| panic!("crash at {crash_at}: reopen failed: {e}"));
        match db.get("k") {
            Ok(Some(v)) => assert!(v == big(7, 2 * LARGE), "crash at {crash_at}: wrong value"),
            Ok(None) => assert!(!acked, "crash at {crash_at}: an acknowledged value is lost"),
            Err(e) => panic!("crash at {crash_at}: {e}"),
        }
        // No blob file outlives the open unless a reference needs it.
        let blobs = files(after.mem(), ".blob").len();
        let present = db.get("k").unwrap().is_some();
        assert_eq!(blobs, usize::from(present), "crash at {crash_at}");
    }
}

#[test]
fn a_missing_blob_file_named_by_the_wal_fails_the_open() {
    let fs = MemFs::new();
    {
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        put(&db, "k", &big(1, 2 * LARGE), Durability::Sync).unwrap();
    }
    for name in files(&fs, ".blob") {
        fs.remove_file(&Path::new(DIR).join(name)).unwrap();
    }
    let err = match Db::open(DIR, options(Arc::new(fs.clone()))) {
        Ok(_) => panic!("opened with a WAL record naming a missing blob file"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(".log") && text.contains(".blob"),
        "the error names neither the WAL nor the blob file: {text}"
    );
}

#[test]
fn a_failed_large_write_leaves_no_file_and_stops_no_other_write() {
    let fs = FaultFs::default();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let fault = fs.inject(
        shale::fs::Fault::new(FaultOp::Append)
            .path_contains(".blob")
            .error(io::ErrorKind::StorageFull)
            .once(),
    );
    let err = put(&db, "k", &big(1, 2 * LARGE), Durability::Sync).unwrap_err();
    assert!(fs.fired(fault) > 0);
    assert_eq!(err.io_kind(), Some(io::ErrorKind::StorageFull), "{err}");
    assert!(files(fs.mem(), ".blob").is_empty());
    put(&db, "small", b"v", Durability::Sync).unwrap();
    put(&db, "k", &big(1, 2 * LARGE), Durability::Sync).unwrap();
    check(&db, "k", &big(1, 2 * LARGE), "after a retry");
}

#[test]
fn a_batch_cannot_carry_blob_references() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs))).unwrap();
    // seqno, count 1, kind BlobRef (2), key "k", a reference to blob file 5.
    let mut data = vec![0u8; 8];
    data.extend_from_slice(&1u32.to_le_bytes());
    data.extend_from_slice(&[2, 1, b'k', 4, 5, 0, 1, 24]);
    let batch = WriteBatch::from_data(data).unwrap();
    let err = db.write(batch, &with(Durability::Buffered)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

/// A file system whose blob-file appends wait until the test opens the gate.
struct GatedFs {
    inner: MemFs,
    entered: Arc<AtomicBool>,
    open: Arc<Gate>,
}

/// A gate threads wait at until it is opened.
#[derive(Default)]
struct Gate {
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

struct GatedFile {
    inner: Box<dyn WritableFile>,
    entered: Arc<AtomicBool>,
    gate: Arc<Gate>,
}

impl WritableFile for GatedFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.entered.store(true, Ordering::SeqCst);
        self.gate.wait();
        self.inner.append(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn sync_handle(&mut self) -> io::Result<Arc<dyn SyncHandle>> {
        self.inner.sync_handle()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Fs for GatedFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = self.inner.create(path)?;
        if path.extension().is_some_and(|e| e == "blob") {
            return Ok(Box::new(GatedFile {
                inner: file,
                entered: self.entered.clone(),
                gate: self.open.clone(),
            }));
        }
        Ok(file)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.inner.file_size(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_file(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn shale::fs::FileLock>> {
        self.inner.lock(path)
    }
}

#[test]
fn other_writers_do_not_wait_for_a_large_value() {
    let gate = Arc::new(Gate::default());
    let entered = Arc::new(AtomicBool::new(false));
    let fs = GatedFs {
        inner: MemFs::new(),
        entered: entered.clone(),
        open: gate.clone(),
    };
    let db = Arc::new(Db::open(DIR, options(Arc::new(fs))).unwrap());
    let large = {
        let db = db.clone();
        std::thread::spawn(move || put(&db, "large", &big(1, 4 * LARGE), Durability::Sync))
    };
    let deadline = std::time::Instant::now() + PATIENCE;
    while !entered.load(Ordering::SeqCst) {
        if std::time::Instant::now() > deadline {
            gate.open();
            panic!("the large write never wrote a blob file of its own");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // The large write is stuck writing its value: small writes of every durability and reads
    // must still go through.
    let (tx, rx) = mpsc::channel();
    {
        let db = db.clone();
        std::thread::spawn(move || {
            let result = put(&db, "small-sync", b"1", Durability::Sync)
                .and_then(|()| put(&db, "small", b"2", Durability::Buffered))
                .and_then(|()| db.get("small"));
            let _ = tx.send(result);
        });
    }
    let small = rx.recv_timeout(PATIENCE);
    gate.open();
    let small = small.expect("small writes waited for the large value's copy");
    assert_eq!(small.unwrap(), Some(b"2".to_vec()));
    large.join().unwrap().unwrap();
    check(&db, "large", &big(1, 4 * LARGE), "after the gate opened");
}
