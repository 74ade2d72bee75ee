//! Raft snapshots: checkpoints of the engine's flushed files, kept on disk and streamed file by
//! file.
//!
//! A snapshot is a directory under `snapshots/` holding an engine checkpoint (hard links of the
//! SST and blob files plus a MANIFEST at the flushed log position, see `shale::Db::checkpoint`)
//! and a `SNAPSHOT` file describing it: the Raft snapshot meta and the list of files with their
//! sizes. `SNAPSHOT` is written last and synced with its directory, so a directory without a
//! readable one is incomplete and removed at open (openraft#896: the file list is persisted, not
//! rebuilt from whatever the directory holds).
//!
//! Transfer ([`send_files`], [`Receiver`]): file after file in chunks, each file followed by its
//! CRC32C; the receiver writes into a fresh directory, checks every size and checksum, syncs each
//! file and the directory, and only then hands the snapshot to Raft. Nothing is ever held in
//! memory whole (openraft#1392).
//!
//! A file arrives under a temporary name of its own transfer (`<name>.<n>.part`) and takes its
//! name only once complete and synced, so a file under its name is always whole and written by no
//! one. Staging needs that: the leader's shipment and the node's own fetch of the same file may
//! run at once, and an install moves a staged file into the database directory. When both wrote
//! one path, one transfer truncated the other's file, the first copy was checked and installed,
//! and the other's bytes were then appended to the live file (a blob file read as "footer's
//! offsets array does not fit").

use crate::log::format;
use crate::raft::{LogId, SnapshotMeta, StoredMembership};
use serde::{Deserialize, Serialize};
use shale::fs::{Fs, WritableFile};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Name of the file describing a snapshot. Do not change: on-disk format.
pub const DESCRIPTION: &str = "SNAPSHOT";
/// Bytes read and sent at a time.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Complete snapshots kept: the newest, and the one before it (a transfer may still read it).
pub const KEEP_SNAPSHOTS: usize = 2;

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// A plain file name (no directory part).
    pub name: String,
    /// Bytes.
    pub len: u64,
}

/// A snapshot's files on disk: openraft's snapshot data.
#[derive(Clone)]
pub struct SnapshotFiles {
    /// The file system holding them.
    pub fs: Arc<dyn Fs>,
    /// The snapshot's directory.
    pub dir: PathBuf,
    /// Its files (the description file not included).
    pub files: Vec<FileInfo>,
}

impl std::fmt::Debug for SnapshotFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotFiles")
            .field("dir", &self.dir)
            .field("files", &self.files.len())
            .finish()
    }
}

/// What `SNAPSHOT` holds.
#[derive(Serialize, Deserialize)]
struct Description {
    meta: SnapshotMeta,
    files: Vec<FileInfo>,
}

/// What a flushed position's context bytes hold: the log id of the entry that sealed the
/// memtable and the membership as of that entry.
#[derive(Serialize, Deserialize)]
pub(crate) struct PositionContext {
    pub log_id: LogId,
    pub membership: StoredMembership,
}

impl PositionContext {
    pub(crate) fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).unwrap_or_default()
    }

    pub(crate) fn decode(bytes: &[u8]) -> io::Result<PositionContext> {
        bincode::deserialize(bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the flushed log position in the MANIFEST is unreadable: {e}"),
            )
        })
    }
}

/// Whether `name` is a plain file name, safe to join to a directory.
pub(crate) fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The snapshots of one node.
pub(crate) struct SnapshotStore {
    fs: Arc<dyn Fs>,
    root: PathBuf,
    /// Complete snapshots, oldest first.
    complete: Vec<(SnapshotMeta, SnapshotFiles)>,
    next_id: u64,
}

impl SnapshotStore {
    /// Opens the snapshots under `root`, removing incomplete ones.
    pub(crate) fn open(fs: Arc<dyn Fs>, root: &Path) -> io::Result<SnapshotStore> {
        fs.create_dir_all(root)?;
        let mut complete = Vec::new();
        let mut next_id = 1;
        for name in fs.list_dir(root)? {
            let dir = root.join(&name);
            if let Some(n) = name.strip_prefix('s').and_then(|n| n.parse::<u64>().ok()) {
                next_id = next_id.max(n + 1);
            }
            match read_description(&fs, &dir) {
                Ok(Some(d)) => complete.push((
                    d.meta,
                    SnapshotFiles {
                        fs: fs.clone(),
                        dir,
                        files: d.files,
                    },
                )),
                Ok(None) => remove_dir(&fs, &dir),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "removing an unreadable snapshot");
                    remove_dir(&fs, &dir);
                }
            }
        }
        complete.sort_by_key(|(m, _)| m.last_log_id.map(|l| l.index));
        let mut store = SnapshotStore {
            fs,
            root: root.to_path_buf(),
            complete,
            next_id,
        };
        store.prune();
        Ok(store)
    }

    /// A fresh directory for a new snapshot (built here or received).
    pub(crate) fn new_dir(&mut self) -> PathBuf {
        let id = self.next_id;
        self.next_id += 1;
        self.root.join(format!("s{id:010}"))
    }

    /// The newest complete snapshot.
    pub(crate) fn current(&self) -> Option<(SnapshotMeta, SnapshotFiles)> {
        self.complete.last().cloned()
    }

    /// Records a snapshot whose files are complete in `files.dir`: writes its description and
    /// removes snapshots older than the ones kept.
    pub(crate) fn add(&mut self, meta: SnapshotMeta, files: SnapshotFiles) -> io::Result<()> {
        write_description(&self.fs, &files.dir, &meta, &files.files)?;
        self.complete.push((meta, files));
        self.complete
            .sort_by_key(|(m, _)| m.last_log_id.map(|l| l.index));
        self.prune();
        Ok(())
    }

    fn prune(&mut self) {
        while self.complete.len() > KEEP_SNAPSHOTS {
            let (_, old) = self.complete.remove(0);
            remove_dir(&self.fs, &old.dir);
        }
    }

    pub(crate) fn fs(&self) -> &Arc<dyn Fs> {
        &self.fs
    }
}

fn write_description(
    fs: &Arc<dyn Fs>,
    dir: &Path,
    meta: &SnapshotMeta,
    files: &[FileInfo],
) -> io::Result<()> {
    let body = bincode::serialize(&Description {
        meta: meta.clone(),
        files: files.to_vec(),
    })
    .map_err(io::Error::other)?;
    let mut record = Vec::new();
    format::put_record(&mut record, format::KIND_SNAPSHOT, &body);
    let path = dir.join(DESCRIPTION);
    let mut f = fs.create(&path)?;
    f.append(&record)?;
    f.sync()?;
    fs.sync_dir(dir)
}

fn read_description(fs: &Arc<dyn Fs>, dir: &Path) -> io::Result<Option<Description>> {
    let path = dir.join(DESCRIPTION);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let data = fs.read_all(&path)?;
    let mut pos = 0;
    match format::next_record(&data, &mut pos) {
        Ok(Some((format::KIND_SNAPSHOT, body))) => {
            let d: Description = bincode::deserialize(body)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            for f in &d.files {
                if !plain_name(&f.name) || fs.file_size(&dir.join(&f.name))? != f.len {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("snapshot file {} is missing or has the wrong size", f.name),
                    ));
                }
            }
            Ok(Some(d))
        }
        _ => Ok(None),
    }
}

/// Removes a snapshot directory and its files.
pub(crate) fn remove_dir(fs: &Arc<dyn Fs>, dir: &Path) {
    if let Ok(names) = fs.list_dir(dir) {
        for n in names {
            let _ = fs.remove_file(&dir.join(n));
        }
    }
    let _ = fs.remove_dir(dir);
}

/// The files of a checkpoint as a snapshot's file list.
pub(crate) fn file_list(
    fs: &Arc<dyn Fs>,
    dir: &Path,
    names: &[String],
) -> io::Result<Vec<FileInfo>> {
    names
        .iter()
        .map(|n| {
            Ok(FileInfo {
                name: n.clone(),
                len: fs.file_size(&dir.join(n))?,
            })
        })
        .collect()
}

/// What a snapshot transfer sends, in order.
#[derive(Debug, Serialize, Deserialize)]
pub enum Piece {
    /// The next file begins.
    File(FileInfo),
    /// Bytes of the current file.
    Chunk(#[serde(with = "crate::byte_string")] Vec<u8>),
    /// The current file is complete; its CRC32C.
    FileEnd(u32),
}

/// Reads the snapshot's files piece by piece and hands each piece to `send` (which may fail to
/// stop the transfer).
pub async fn send_files<F, Fut>(files: &SnapshotFiles, mut send: F) -> io::Result<()>
where
    F: FnMut(Piece) -> Fut,
    Fut: std::future::Future<Output = io::Result<()>>,
{
    for info in &files.files {
        let file = files.fs.open(&files.dir.join(&info.name))?;
        if file.len() != info.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("snapshot file {} changed size", info.name),
            ));
        }
        send(Piece::File(info.clone())).await?;
        let mut crc = 0u32;
        let mut offset = 0u64;
        while offset < info.len {
            let n = (info.len - offset).min(CHUNK_BYTES as u64) as usize;
            let mut buf = vec![0; n];
            file.read_exact_at(offset, &mut buf)?;
            crc = crc32c::crc32c_append(crc, &buf);
            offset += n as u64;
            send(Piece::Chunk(buf)).await?;
        }
        send(Piece::FileEnd(crc)).await?;
    }
    Ok(())
}

/// Receives a snapshot's pieces into a fresh directory, checking them (see the module
/// documentation).
pub struct Receiver {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    files: Vec<FileInfo>,
    current: Option<Incoming>,
    /// Counts this transfer among its node's (see [`Receptions`]); `None` for a node's own
    /// fetch, which its applier runs.
    reception: Option<Reception>,
}

/// A node's transfers in progress into its own directories (a snapshot's, staging): once the
/// node stops it refuses new ones and fails the next piece of those running, and its shutdown
/// waits until none runs. A transfer is driven by the sender (and, in process, by the sender's
/// task), so without this it could go on writing into the directories of a node that stopped,
/// after a restart opened them again: a file renamed into staging once open had cleared it
/// stayed there for good, and one renamed between the clearing's listing and its removal made
/// the open fail.
#[derive(Debug, Default)]
pub(crate) struct Receptions {
    stopped: std::sync::atomic::AtomicBool,
    running: std::sync::atomic::AtomicU64,
}

/// One transfer counted in [`Receptions`] while it lives.
#[derive(Debug)]
pub(crate) struct Reception(Arc<Receptions>);

impl Receptions {
    /// Counts a new transfer.
    ///
    /// # Errors
    /// The node is stopping.
    pub(crate) fn enter(self: &Arc<Self>) -> io::Result<Reception> {
        use std::sync::atomic::Ordering::SeqCst;
        // Counted before the check: `wait` that sees no transfer after `stop` means none starts.
        self.running.fetch_add(1, SeqCst);
        let reception = Reception(self.clone());
        reception.check()?;
        Ok(reception)
    }

    /// Refuses transfers from now on.
    pub(crate) fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Transfers running now.
    pub(crate) fn running(&self) -> u64 {
        self.running.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Reception {
    fn check(&self) -> io::Result<()> {
        if self.0.stopped.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the receiving node is stopping",
            ));
        }
        Ok(())
    }
}

impl Clone for Reception {
    fn clone(&self) -> Reception {
        self.0
            .running
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reception(self.0.clone())
    }
}

impl Drop for Reception {
    fn drop(&mut self) {
        self.0
            .running
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The file a [`Receiver`] is writing.
struct Incoming {
    info: FileInfo,
    /// Where its bytes go until it is complete: a name no other transfer uses.
    part: PathBuf,
    file: Box<dyn WritableFile>,
    crc: u32,
    got: u64,
}

/// Numbers the temporary names of the files being received (unique within the process; a
/// directory that holds them is either fresh or staging, which is cleared at open).
static NEXT_PART: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Receiver {
    pub(crate) fn new(fs: Arc<dyn Fs>, dir: PathBuf) -> io::Result<Receiver> {
        fs.create_dir_all(&dir)?;
        Ok(Receiver {
            fs,
            dir,
            files: Vec::new(),
            current: None,
            reception: None,
        })
    }

    /// Counts this transfer in `reception`'s node (see [`Receptions`]).
    pub(crate) fn counted(mut self, reception: Reception) -> Receiver {
        self.reception = Some(reception);
        self
    }

    /// Whether the receiving node stopped: the next piece fails.
    pub(crate) fn refused(&self) -> bool {
        self.reception.as_ref().is_some_and(|r| r.check().is_err())
    }

    /// Keeps this transfer counted past [`Receiver::finish`], for what its node does with the
    /// files.
    pub(crate) fn reception(&self) -> Option<Reception> {
        self.reception.clone()
    }

    fn invalid(msg: String) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, msg)
    }

    /// Takes the next piece.
    ///
    /// # Errors
    /// A piece out of order, a bad name, a size or checksum mismatch, or an I/O error.
    pub fn piece(&mut self, piece: Piece) -> io::Result<()> {
        if let Some(r) = &self.reception {
            r.check()?;
        }
        match piece {
            Piece::File(info) => {
                if self.current.is_some() {
                    return Err(Self::invalid(
                        "a snapshot file began before the last ended".into(),
                    ));
                }
                if !plain_name(&info.name)
                    || info.name == DESCRIPTION
                    || self.files.iter().any(|f| f.name == info.name)
                {
                    return Err(Self::invalid(format!(
                        "bad snapshot file name {:?}",
                        info.name
                    )));
                }
                let n = NEXT_PART.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let part = self.dir.join(format!("{}.{n}.part", info.name));
                let file = self.fs.create(&part)?;
                self.current = Some(Incoming {
                    info,
                    part,
                    file,
                    crc: 0,
                    got: 0,
                });
            }
            Piece::Chunk(bytes) => {
                let Some(c) = &mut self.current else {
                    return Err(Self::invalid("snapshot bytes outside a file".into()));
                };
                c.got += bytes.len() as u64;
                if c.got > c.info.len {
                    return Err(Self::invalid(format!(
                        "snapshot file {} is longer than announced",
                        c.info.name
                    )));
                }
                c.crc = crc32c::crc32c_append(c.crc, &bytes);
                c.file.append(&bytes)?;
            }
            Piece::FileEnd(expected) => {
                let Some(c) = &mut self.current else {
                    return Err(Self::invalid(
                        "a snapshot file ended that never began".into(),
                    ));
                };
                if c.got != c.info.len || c.crc != expected {
                    return Err(Self::invalid(format!(
                        "snapshot file {} arrived damaged ({} of {} bytes, checksum {:08x} against {expected:08x})",
                        c.info.name, c.got, c.info.len, c.crc
                    )));
                }
                c.file.sync()?;
                // Whole and synced: only now under its name (the directory sync in `finish`
                // makes the rename durable before anything is acknowledged).
                self.fs.rename(&c.part, &self.dir.join(&c.info.name))?;
                if let Some(c) = self.current.take() {
                    self.files.push(c.info);
                }
            }
        }
        Ok(())
    }

    /// The received files, once every one is complete and synced with its directory.
    ///
    /// # Errors
    /// A file left incomplete, or an I/O error.
    pub fn finish(mut self) -> io::Result<SnapshotFiles> {
        if let Some(c) = &self.current {
            return Err(Self::invalid(format!(
                "snapshot file {} never ended",
                c.info.name
            )));
        }
        self.fs.sync_dir(&self.dir)?;
        Ok(SnapshotFiles {
            fs: self.fs.clone(),
            dir: std::mem::take(&mut self.dir),
            files: std::mem::take(&mut self.files),
        })
    }

    /// Removes what was received (a transfer that failed).
    pub fn abandon(self) {
        remove_dir(&self.fs, &self.dir);
    }

    /// Removes the files this transfer wrote, and only them (a failed transfer into a directory
    /// that holds other files: staging). The file it was writing goes when it is dropped.
    pub fn abandon_files(self) {
        for f in &self.files {
            let _ = self.fs.remove_file(&self.dir.join(&f.name));
        }
    }
}

impl Drop for Receiver {
    /// A transfer stopped in the middle of a file (failed, or its future dropped) leaves no
    /// partial file behind.
    fn drop(&mut self) {
        if let Some(c) = self.current.take() {
            drop(c.file);
            let _ = self.fs.remove_file(&c.part);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale::fs::MemFs;

    fn pieces(bytes: &[u8]) -> (Piece, Piece, Piece) {
        (
            Piece::File(FileInfo {
                name: "8589934802.blob".into(),
                len: bytes.len() as u64,
            }),
            Piece::Chunk(bytes.to_vec()),
            Piece::FileEnd(crc32c::crc32c(bytes)),
        )
    }

    /// Issue 20's CI failure: the leader's shipment and the node's own fetch of one file into
    /// staging at once. The fetch completes, the install moves the file into the database
    /// directory, and only then does the shipment write its bytes: they must never reach the
    /// installed file (they were appended to it, which doubled a blob file).
    #[test]
    fn regression_issue_20_a_late_transfer_never_writes_into_an_installed_file() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let (db, staging) = (PathBuf::from("/db"), PathBuf::from("/db/staging"));
        let bytes: Vec<u8> = (0..3120u32).map(|i| (i % 251) as u8).collect();
        let mut shipped = Receiver::new(fs.clone(), staging.clone()).unwrap();
        let mut fetched = Receiver::new(fs.clone(), staging.clone()).unwrap();
        let (file, chunk, end) = pieces(&bytes);
        shipped.piece(file).unwrap();
        let (file2, chunk2, end2) = pieces(&bytes);
        fetched.piece(file2).unwrap();
        fetched.piece(chunk2).unwrap();
        fetched.piece(end2).unwrap();
        fetched.finish().unwrap();
        assert_eq!(
            fs.read_all(&staging.join("8589934802.blob")).unwrap(),
            bytes
        );
        // The install: staged file checked and moved.
        fs.rename(
            &staging.join("8589934802.blob"),
            &db.join("8589934802.blob"),
        )
        .unwrap();
        shipped.piece(chunk).unwrap();
        shipped.piece(end).unwrap();
        shipped.finish().unwrap();
        let installed = fs.read_all(&db.join("8589934802.blob")).unwrap();
        assert!(
            installed == bytes,
            "the installed file has {} bytes, {} were shipped",
            installed.len(),
            bytes.len()
        );
        // The late copy is whole, under its name in staging (`finish_staging` drops it).
        assert_eq!(
            fs.read_all(&staging.join("8589934802.blob")).unwrap(),
            bytes
        );
        assert_eq!(fs.list_dir(&staging).unwrap(), vec!["8589934802.blob"]);
    }

    /// A transfer that stops in the middle of a file (failed, or its future dropped) leaves
    /// nothing in the directory, and a damaged file never takes its name.
    #[test]
    fn a_transfer_stopped_or_damaged_mid_file_leaves_no_file() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let staging = PathBuf::from("/db/staging");
        let bytes = vec![7u8; 5000];
        let mut r = Receiver::new(fs.clone(), staging.clone()).unwrap();
        let (file, chunk, _) = pieces(&bytes);
        r.piece(file).unwrap();
        r.piece(chunk).unwrap();
        assert!(!fs.exists(&staging.join("8589934802.blob")));
        drop(r);
        assert_eq!(fs.list_dir(&staging).unwrap(), Vec::<String>::new());

        let mut r = Receiver::new(fs.clone(), staging.clone()).unwrap();
        let (file, chunk, _) = pieces(&bytes);
        r.piece(file).unwrap();
        r.piece(chunk).unwrap();
        assert!(r.piece(Piece::FileEnd(0)).is_err());
        r.abandon_files();
        assert_eq!(fs.list_dir(&staging).unwrap(), Vec::<String>::new());
    }
}
