//! The operating system's file system.

use super::{FileLock, Fs, RandomAccessFile, WritableFile};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// User-space buffer in front of each writable file, so small appends cost no system call.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// The real file system, through `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealWritable {
    file: File,
    buf: Vec<u8>,
    len: u64,
}

impl WritableFile for RealWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if self.buf.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        if data.len() >= WRITE_BUFFER_BYTES {
            self.file.write_all(data)?;
        } else {
            self.buf.extend_from_slice(data);
        }
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let result = self.file.write_all(&self.buf);
            self.buf.clear();
            result?;
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        self.file.sync_data()
    }

    fn len(&self) -> u64 {
        self.len
    }
}

struct RealRandomAccess {
    file: File,
    len: u64,
}

impl RandomAccessFile for RealRandomAccess {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn len(&self) -> u64 {
        self.len
    }
}

struct RealLock {
    _file: File,
}

impl FileLock for RealLock {}

impl Fs for RealFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(RealWritable {
            file,
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
            len: 0,
        }))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Arc::new(RealRandomAccess { file, len }))
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path)? {
            if let Some(name) = entry?.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)?.len())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(RealLock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "held by another process",
            )),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
}
