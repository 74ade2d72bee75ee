//! The file system seam.
//!
//! Every byte the engine reads or writes goes through [`Fs`], so tests can swap the real file system
//! ([`RealFs`]) for an in-memory one ([`MemFs`]) or a fault-injecting one ([`FaultFs`]) that simulates
//! power loss and failing operations.
//!
//! Durability contract (what the engine relies on, and what `MemFs` models):
//! - data appended to a [`WritableFile`] is durable only after [`WritableFile::sync`] returns `Ok`;
//! - creating, renaming or removing a file is durable only after [`Fs::sync_dir`] on its directory;
//! - [`WritableFile::flush`] hands buffered bytes to the operating system: they then survive a process
//!   crash but not a power loss.
//!
//! Concurrency: an `Fs` is shared by all threads; a `WritableFile` has one owner at a time; a
//! `RandomAccessFile` is read by many threads at once.

mod fault;
mod mem;
mod real;
#[cfg(test)]
mod tests;

pub use fault::{Fault, FaultFs, FaultId, FaultOp, DEFAULT_FAULT_ERROR};
pub use mem::{MemFs, TORN_MAX_ZERO_BYTES, TORN_ZERO_FILL_ONE_IN};
pub use real::RealFs;

use std::io;
use std::path::Path;
use std::sync::Arc;

/// A file opened for appending.
pub trait WritableFile: Send {
    /// Appends `data`. It may stay in a user-space buffer until `flush` or `sync`.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Hands buffered bytes to the operating system.
    fn flush(&mut self) -> io::Result<()>;
    /// Makes every appended byte durable (`fdatasync`). Implies `flush`.
    fn sync(&mut self) -> io::Result<()>;
    /// Hands buffered bytes to the operating system (as `flush`) and returns a handle that makes
    /// them durable, callable from any thread without this file: a caller that serializes its
    /// appends under a lock can release the lock before the slow fsync. Syncing through the
    /// handle makes durable at least every byte appended before `sync_handle` was called.
    fn sync_handle(&mut self) -> io::Result<Arc<dyn SyncHandle>>;
    /// Bytes appended so far, buffered or not.
    fn len(&self) -> u64;
    /// Asks the file to keep zero-filled space ahead of its appends, `chunk` bytes at a time, so
    /// that most fsyncs only flush data written over blocks the file already has, with no
    /// file-size change for the file system to commit first. The file then ends in zeros: only
    /// for logs, whose reader takes zeros at a record boundary as the end. A hint that a file
    /// system may ignore (the default does).
    fn preallocate(&mut self, chunk: u64) {
        let _ = chunk;
    }
    /// Hands buffered bytes to the operating system, waits until the device has taken the
    /// bytes it was asked to write back at the previous call, and asks it to start writing back
    /// everything handed over since, without waiting for that (Linux `sync_file_range`). A
    /// writer of a large file calls it every few MiB: the file's dirty pages then never pile up
    /// into one long write-back that delays every other file's fsync behind it, and the final
    /// `sync` has little left to do. Durability still comes only from `sync`. A hint that a file
    /// system may ignore (the default only flushes).
    fn start_writeback(&mut self) -> io::Result<()> {
        self.flush()
    }
    /// True when nothing has been appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Makes a file's bytes durable; see [`WritableFile::sync_handle`].
pub trait SyncHandle: Send + Sync {
    /// `fdatasync`: every byte handed to the operating system so far is durable when it returns
    /// `Ok`.
    fn sync(&self) -> io::Result<()>;
}

/// A file read at arbitrary offsets by many threads at once.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` from `offset`. Reading past the end is an `UnexpectedEof` error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// The file's size when it was opened.
    fn len(&self) -> u64;
    /// The whole file as shared memory (a memory map, or a file system's own buffer), when the
    /// file system can give it without copying. Readers then slice it instead of reading, and must
    /// still verify what they read. `None` (the default) means: use `read_exact_at`.
    fn mapped(&self) -> Option<bytes::Bytes> {
        None
    }
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A held directory lock; released on drop.
pub trait FileLock: Send + Sync {}

/// The operations the engine needs from a file system.
pub trait Fs: Send + Sync + 'static {
    /// Creates `path` and its parents if missing.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Creates (or truncates) a file for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens an existing file for random reads.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file.
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let file = self.open(path)?;
        let len = usize::try_from(file.len()).map_err(|_| io::Error::other("file too large"))?;
        let mut buf = vec![0; len];
        file.read_exact_at(0, &mut buf)?;
        Ok(buf)
    }
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Names (not paths) of the entries in a directory.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// True when `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Size of a file in bytes.
    fn file_size(&self, path: &Path) -> io::Result<u64>;
    /// Makes creations, renames and removals in directory `path` durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Makes every byte of the existing file `path` durable (`fdatasync`), for a file written by
    /// an earlier process that may have left it in the page cache only.
    fn sync_file(&self, path: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (created if missing). Fails with `WouldBlock` when another
    /// holder has it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;
    /// Removes the empty directory `path`. File systems without directories of their own (the
    /// in-memory ones) have nothing to do (the default).
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let _ = path;
        Ok(())
    }
    /// Makes `to` (which must not exist) hold the same bytes as `from`, a file nobody appends to
    /// any more: a hard link where the file system has them, otherwise a copy (the default, which
    /// also syncs the copy). Like a creation, the new name is durable after [`Fs::sync_dir`].
    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.exists(to) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", to.display()),
            ));
        }
        let bytes = self.read_all(from)?;
        let mut file = self.create(to)?;
        file.append(&bytes)?;
        file.sync()
    }
}
