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
    current: Option<(FileInfo, Box<dyn WritableFile>, u32, u64)>,
}

impl Receiver {
    pub(crate) fn new(fs: Arc<dyn Fs>, dir: PathBuf) -> io::Result<Receiver> {
        fs.create_dir_all(&dir)?;
        Ok(Receiver {
            fs,
            dir,
            files: Vec::new(),
            current: None,
        })
    }

    fn invalid(msg: String) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, msg)
    }

    /// Takes the next piece.
    ///
    /// # Errors
    /// A piece out of order, a bad name, a size or checksum mismatch, or an I/O error.
    pub fn piece(&mut self, piece: Piece) -> io::Result<()> {
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
                let file = self.fs.create(&self.dir.join(&info.name))?;
                self.current = Some((info, file, 0, 0));
            }
            Piece::Chunk(bytes) => {
                let Some((info, file, crc, got)) = &mut self.current else {
                    return Err(Self::invalid("snapshot bytes outside a file".into()));
                };
                *got += bytes.len() as u64;
                if *got > info.len {
                    return Err(Self::invalid(format!(
                        "snapshot file {} is longer than announced",
                        info.name
                    )));
                }
                *crc = crc32c::crc32c_append(*crc, &bytes);
                file.append(&bytes)?;
            }
            Piece::FileEnd(expected) => {
                let Some((info, mut file, crc, got)) = self.current.take() else {
                    return Err(Self::invalid(
                        "a snapshot file ended that never began".into(),
                    ));
                };
                if got != info.len || crc != expected {
                    return Err(Self::invalid(format!(
                        "snapshot file {} arrived damaged ({got} of {} bytes, checksum {crc:08x} against {expected:08x})",
                        info.name, info.len
                    )));
                }
                file.sync()?;
                self.files.push(info);
            }
        }
        Ok(())
    }

    /// The received files, once every one is complete and synced with its directory.
    ///
    /// # Errors
    /// A file left incomplete, or an I/O error.
    pub fn finish(self) -> io::Result<SnapshotFiles> {
        if let Some((info, ..)) = &self.current {
            return Err(Self::invalid(format!(
                "snapshot file {} never ended",
                info.name
            )));
        }
        self.fs.sync_dir(&self.dir)?;
        Ok(SnapshotFiles {
            fs: self.fs,
            dir: self.dir,
            files: self.files,
        })
    }

    /// Removes what was received (a transfer that failed).
    pub fn abandon(self) {
        remove_dir(&self.fs, &self.dir);
    }

    /// Removes the files this transfer wrote, and only them (a failed transfer into a directory
    /// that holds other files: staging).
    pub fn abandon_files(self) {
        let names = self
            .files
            .iter()
            .chain(self.current.as_ref().map(|(info, ..)| info))
            .map(|f| f.name.clone());
        for name in names {
            let _ = self.fs.remove_file(&self.dir.join(name));
        }
    }
}
