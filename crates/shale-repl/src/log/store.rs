//! The Raft log on disk, through the engine's [`Fs`] (so the fault-injecting file system can cut
//! the power under it as under the engine).
//!
//! Layout: segment files `raft-NNNNNN.log` in the log directory, each a sequence of records
//! (`format`). A segment begins with the vote, the purge point and the committed index as they
//! stood, so older segments can be deleted once every entry in them is purged. At open every
//! segment is replayed in order (a later entry at an index replaces that index and everything
//! after it), a torn or damaged tail of the last segment is cut, and a new segment is started: a
//! file that may end in a torn record is never appended to.
//!
//! Durability: `append` writes the entries to the segment and queues the caller's callback; the
//! sync thread hands the bytes to the operating system, fsyncs, and only then reports the
//! entries durable, for every append queued since its last fsync at once (group commit: one
//! fsync serves every entry, and every client write in them). A vote is fsynced before
//! `save_vote` returns. Truncations, purges and the committed index are written without an
//! fsync: they are durable with the next one, and replay is correct without them (an entry at
//! index i replaces everything from i; a purge only frees what a snapshot holds; the committed
//! index only speeds up replay).
//!
//! Memory: entries not yet purged are also kept in memory, to serve followers; the replica
//! purges after every flush, so this is bounded by the memtables plus the entries kept after a
//! snapshot for lagging followers.
//!
//! Concurrency: openraft calls the storage methods from one task; readers (replication to
//! followers) read through clones. One mutex guards the state; the sync thread takes it only to
//! hand the written bytes to the operating system.

use super::format;
use crate::raft::{Entry, LogId, StorageError, TypeConfig, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{RaftLogId, StorageIOError};
use parking_lot::Mutex;
use shale::fs::{Fs, WritableFile};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

/// A segment is closed and a new one started past this many bytes.
pub const SEGMENT_BYTES: u64 = 64 << 20;

/// The encoding buffer is not kept past this capacity (an append of large entries).
const KEPT_BUFFER: usize = 8 << 20;

/// The Raft log. Clones share it.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Inner>,
}

struct Inner {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    state: Mutex<State>,
    sync_tx: Mutex<Option<mpsc::Sender<LogFlushed<TypeConfig>>>>,
}

struct State {
    entries: BTreeMap<u64, Entry>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    purged: Option<LogId>,
    writer: Box<dyn WritableFile>,
    segment: u64,
    /// Segment number -> the largest entry index written to it (0 for none).
    segments: BTreeMap<u64, u64>,
    /// The first error of a write or sync: every later operation fails with it.
    failed: Option<String>,
    /// Encoding buffer, reused.
    buf: Vec<u8>,
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("raft-{n:06}.log"))
}

fn parse_segment(name: &str) -> Option<u64> {
    name.strip_prefix("raft-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

fn io_err(what: impl std::fmt::Display, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, replaying its segments.
    ///
    /// # Errors
    /// An I/O error, or damage before the tail of the last segment.
    pub fn open(fs: Arc<dyn Fs>, dir: &Path) -> io::Result<LogStore> {
        fs.create_dir_all(dir)?;
        let mut numbers: Vec<u64> = fs
            .list_dir(dir)?
            .iter()
            .filter_map(|n| parse_segment(n))
            .collect();
        numbers.sort_unstable();
        let mut entries = BTreeMap::new();
        let mut vote = None;
        let mut committed = None;
        let mut purged: Option<LogId> = None;
        let mut segments = BTreeMap::new();
        for (i, &n) in numbers.iter().enumerate() {
            let path = segment_path(dir, n);
            let data = fs.read_all(&path)?;
            let last = i + 1 == numbers.len();
            let mut pos = 0;
            let mut max_index = 0;
            loop {
                let (kind, body) = match format::next_record(&data, &mut pos) {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(damage) if last => {
                        tracing::warn!(file = %path.display(), offset = pos, ?damage, "cut the damaged tail of the Raft log");
                        break;
                    }
                    Err(damage) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("{} is damaged at byte {pos}: {damage:?}", path.display()),
                        ))
                    }
                };
                let bad = |e: bincode::Error| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{} holds an unreadable record at byte {pos}: {e}",
                            path.display()
                        ),
                    )
                };
                match kind {
                    format::KIND_ENTRY => {
                        let entry: Entry = bincode::deserialize(body).map_err(bad)?;
                        let index = entry.get_log_id().index;
                        drop(entries.split_off(&index));
                        max_index = max_index.max(index);
                        entries.insert(index, entry);
                    }
                    format::KIND_TRUNCATE => {
                        let index: u64 = bincode::deserialize(body).map_err(bad)?;
                        drop(entries.split_off(&index));
                    }
                    format::KIND_PURGE => {
                        let id: LogId = bincode::deserialize(body).map_err(bad)?;
                        entries = entries.split_off(&(id.index + 1));
                        if purged.as_ref().is_none_or(|p| p.index < id.index) {
                            purged = Some(id);
                        }
                    }
                    format::KIND_COMMITTED => {
                        committed = bincode::deserialize(body).map_err(bad)?
                    }
                    format::KIND_VOTE => vote = bincode::deserialize(body).map_err(bad)?,
                    other => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "{} holds a record of unknown kind {other} at byte {pos}",
                                path.display()
                            ),
                        ))
                    }
                }
            }
            segments.insert(n, max_index);
        }
        let segment = numbers.last().map_or(1, |n| n + 1);
        let writer = fs.create(&segment_path(dir, segment))?;
        segments.insert(segment, 0);
        let mut state = State {
            entries,
            vote,
            committed,
            purged,
            writer,
            segment,
            segments,
            failed: None,
            buf: Vec::new(),
        };
        write_header(&mut state)?;
        state.writer.sync()?;
        fs.sync_dir(dir)?;
        let inner = Arc::new(Inner {
            fs,
            dir: dir.to_path_buf(),
            state: Mutex::new(state),
            sync_tx: Mutex::new(None),
        });
        delete_purged_segments(&inner, &mut inner.state.lock());
        let (tx, rx) = mpsc::channel();
        *inner.sync_tx.lock() = Some(tx);
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("shale-raft-log-sync".into())
            .spawn(move || sync_loop(weak, rx))?;
        Ok(LogStore { inner })
    }

    /// The committed index as last saved.
    pub fn committed(&self) -> Option<u64> {
        self.inner.state.lock().committed.map(|c| c.index)
    }

    /// Indexes of the entries held (not purged).
    pub fn index_range(&self) -> Option<(u64, u64)> {
        let s = self.inner.state.lock();
        Some((*s.entries.keys().next()?, *s.entries.keys().next_back()?))
    }

    /// Stops the sync thread once the appends already queued are durable.
    pub fn close(&self) {
        self.inner.sync_tx.lock().take();
    }

    fn write(&self, kind: u8, body: &[u8]) -> io::Result<()> {
        let mut s = self.inner.state.lock();
        write_record(&mut s, kind, body)
    }
}

fn encode<T: serde::Serialize>(value: &T) -> io::Result<Vec<u8>> {
    bincode::serialize(value).map_err(|e| io_err("encode a Raft log record", e))
}

fn write_record(s: &mut State, kind: u8, body: &[u8]) -> io::Result<()> {
    if let Some(e) = &s.failed {
        return Err(io::Error::other(e.clone()));
    }
    s.buf.clear();
    format::put_record(&mut s.buf, kind, body);
    let r = s.writer.append(&s.buf);
    if let Err(e) = &r {
        s.failed = Some(format!("appending to the Raft log failed: {e}"));
    }
    r
}

/// The state a segment starts with.
fn write_header(s: &mut State) -> io::Result<()> {
    let vote = encode(&s.vote)?;
    write_record(s, format::KIND_VOTE, &vote)?;
    if let Some(p) = s.purged {
        let p = encode(&p)?;
        write_record(s, format::KIND_PURGE, &p)?;
    }
    let c = encode(&s.committed)?;
    write_record(s, format::KIND_COMMITTED, &c)
}

/// Starts a new segment once the current one is full: the old one is synced first, so replay
/// never finds a hole before durable records of the new one.
fn roll_if_full(inner: &Inner, s: &mut State) -> io::Result<()> {
    if s.writer.len() < SEGMENT_BYTES {
        return Ok(());
    }
    s.writer.sync()?;
    let n = s.segment + 1;
    let writer = inner.fs.create(&segment_path(&inner.dir, n))?;
    s.writer = writer;
    s.segment = n;
    s.segments.insert(n, 0);
    write_header(s)?;
    s.writer.sync()?;
    inner.fs.sync_dir(&inner.dir)
}

/// Deletes the segments whose entries are all purged, after syncing the purge record (without
/// it a replay would find entries missing before the first one left).
fn delete_purged_segments(inner: &Inner, s: &mut State) {
    let purged = s.purged.map_or(0, |p| p.index);
    let current = s.segment;
    let doomed: Vec<u64> = s
        .segments
        .iter()
        .filter(|(&n, &max)| n != current && max <= purged)
        .map(|(&n, _)| n)
        .collect();
    if doomed.is_empty() {
        return;
    }
    if let Err(e) = s.writer.sync() {
        tracing::warn!(error = %e, "syncing the Raft log before removing purged segments failed");
        return;
    }
    for n in doomed {
        s.segments.remove(&n);
        if let Err(e) = inner.fs.remove_file(&segment_path(&inner.dir, n)) {
            tracing::warn!(segment = n, error = %e, "removing a purged Raft log segment failed");
        }
    }
}

fn sync_loop(inner: std::sync::Weak<Inner>, rx: mpsc::Receiver<LogFlushed<TypeConfig>>) {
    while let Ok(first) = rx.recv() {
        let mut waiting = vec![first];
        waiting.extend(rx.try_iter());
        let Some(inner) = inner.upgrade() else { return };
        let handle = {
            let mut s = inner.state.lock();
            match &s.failed {
                Some(e) => Err(io::Error::other(e.clone())),
                None => s.writer.sync_handle(),
            }
        };
        let result = handle.and_then(|h| h.sync());
        if let Err(e) = &result {
            inner
                .state
                .lock()
                .failed
                .get_or_insert_with(|| format!("syncing the Raft log failed: {e}"));
        }
        for cb in waiting {
            cb.log_io_completed(match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            });
        }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let s = self.inner.state.lock();
        Ok(s.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let s = self.inner.state.lock();
        let last = s
            .entries
            .values()
            .next_back()
            .map(|e| *e.get_log_id())
            .or(s.purged);
        Ok(LogState {
            last_purged_log_id: s.purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let body = encode(&Some(*vote)).map_err(|e| StorageIOError::write_vote(&e))?;
        let mut s = self.inner.state.lock();
        let r = write_record(&mut s, format::KIND_VOTE, &body).and_then(|()| s.writer.sync());
        if let Err(e) = r {
            s.failed
                .get_or_insert_with(|| format!("saving the vote failed: {e}"));
            return Err(StorageIOError::write_vote(&e).into());
        }
        s.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.inner.state.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let body = encode(&committed).map_err(|e| StorageIOError::write(&e))?;
        self.write(format::KIND_COMMITTED, &body)
            .map_err(|e| StorageIOError::write(&e))?;
        self.inner.state.lock().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.inner.state.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        {
            let inner = &self.inner;
            let mut s = inner.state.lock();
            let s = &mut *s;
            if let Some(e) = &s.failed {
                return Err(StorageIOError::write_logs(&io::Error::other(e.clone())).into());
            }
            // Every entry encoded in place into one buffer, handed to the file at once.
            s.buf.clear();
            let entries: Vec<Entry> = entries.into_iter().collect();
            for entry in &entries {
                format::put_encoded_record(&mut s.buf, format::KIND_ENTRY, entry).map_err(|e| {
                    StorageIOError::write_logs(&io_err("encode a Raft log entry", e))
                })?;
            }
            let appended = s.writer.append(&s.buf);
            if s.buf.capacity() > KEPT_BUFFER {
                s.buf = Vec::new();
            }
            if let Err(e) = appended {
                s.failed = Some(format!("appending to the Raft log failed: {e}"));
                return Err(StorageIOError::write_logs(&e).into());
            }
            for entry in entries {
                let index = entry.get_log_id().index;
                if let Some(max) = s.segments.get_mut(&s.segment) {
                    *max = (*max).max(index);
                }
                s.entries.insert(index, entry);
            }
            roll_if_full(inner, s).map_err(|e| {
                s.failed
                    .get_or_insert_with(|| format!("starting a Raft log segment failed: {e}"));
                StorageIOError::write_logs(&e)
            })?;
        }
        let tx = self.inner.sync_tx.lock().clone();
        match tx {
            Some(tx) => {
                if let Err(mpsc::SendError(cb)) = tx.send(callback) {
                    cb.log_io_completed(Err(io::Error::other("the Raft log is closed")));
                }
            }
            None => callback.log_io_completed(Err(io::Error::other("the Raft log is closed"))),
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let body = encode(&log_id.index).map_err(|e| StorageIOError::write_logs(&e))?;
        let mut s = self.inner.state.lock();
        write_record(&mut s, format::KIND_TRUNCATE, &body)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        drop(s.entries.split_off(&log_id.index));
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let body = encode(&log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        let inner = &self.inner;
        let mut s = inner.state.lock();
        write_record(&mut s, format::KIND_PURGE, &body)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        s.entries = s.entries.split_off(&(log_id.index + 1));
        s.purged = Some(log_id);
        delete_purged_segments(inner, &mut s);
        Ok(())
    }
}
