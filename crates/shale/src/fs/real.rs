//! The operating system's file system.

use super::{FileLock, Fs, RandomAccessFile, SyncHandle, WritableFile};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// User-space buffer in front of each writable file, so small appends cost no system call.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// The real file system, through `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealWritable {
    file: Arc<File>,
    buf: Vec<u8>,
    len: u64,
    /// Bytes handed to the operating system (written at the file's cursor).
    written: u64,
    /// Zero-fill ahead of the appends, in chunks of this many bytes; 0 when off (see
    /// [`WritableFile::preallocate`]).
    zero_chunk: u64,
    // INVARIANT: when `zero_chunk > 0`, the bytes from `written` up to `zeroed_to` (if any) are
    // zeros handed to the operating system, and the file ends at `zeroed_to` or before.
    zeroed_to: u64,
}

/// A source of zeros for [`RealWritable::zero_ahead`].
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

impl RealWritable {
    /// Writes `data` at the file's cursor, zero-filling ahead of it first when asked to.
    fn write_out(&mut self, data: &[u8]) -> io::Result<()> {
        self.zero_ahead(data.len() as u64);
        (&*self.file).write_all(data)?;
        self.written += data.len() as u64;
        Ok(())
    }

    /// Makes sure zeros lie past the next `n` bytes: when those bytes reach beyond the zeroed
    /// space, zero-fills one chunk after them (the write itself covers the bytes before, so a
    /// large write is not zeroed first). A failure (a full disk) only ends the zero-filling: the
    /// appends go on as plain appends and report their own errors.
    fn zero_ahead(&mut self, n: u64) {
        let end = self.written + n;
        if self.zero_chunk == 0 || self.zeroed_to >= end {
            return;
        }
        let (mut at, stop) = (end, end + self.zero_chunk);
        while at < stop {
            let take = ZEROS.len().min((stop - at) as usize);
            if let Err(e) = self.file.write_all_at(&ZEROS[..take], at) {
                tracing::warn!(error = %e, "zero-filling ahead of a log failed; appending plainly");
                self.zero_chunk = 0;
                return;
            }
            at += take as u64;
        }
        self.zeroed_to = stop;
    }
}

impl WritableFile for RealWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if self.buf.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        if data.len() >= WRITE_BUFFER_BYTES {
            self.write_out(data)?;
        } else {
            self.buf.extend_from_slice(data);
        }
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let buf = std::mem::take(&mut self.buf);
            let result = self.write_out(&buf);
            self.buf = buf;
            self.buf.clear();
            result?;
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        self.file.sync_data()
    }

    fn sync_handle(&mut self) -> io::Result<Arc<dyn SyncHandle>> {
        self.flush()?;
        Ok(Arc::new(RealSync(self.file.clone())))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn preallocate(&mut self, chunk: u64) {
        self.zero_chunk = chunk;
    }

    fn start_writeback(&mut self) -> io::Result<()> {
        self.flush()?;
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE;
        // SAFETY: a plain system call on the file's own open descriptor; offset 0 and length 0
        // cover the whole file, and no memory is passed.
        let rc = unsafe { libc::sync_file_range(self.file.as_raw_fd(), 0, 0, flags) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            // Not every file system supports it; it is only a hint.
            if !matches!(
                e.raw_os_error(),
                Some(libc::ENOSYS | libc::EINVAL | libc::ESPIPE)
            ) {
                return Err(e);
            }
        }
        Ok(())
    }
}

struct RealSync(Arc<File>);

impl SyncHandle for RealSync {
    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

struct RealRandomAccess {
    file: File,
    len: u64,
    map: Option<bytes::Bytes>,
}

/// A read-only shared memory map of a whole file, unmapped on drop.
///
/// The engine maps only files it never modifies after creating them (SSTs; the WAL and MANIFEST
/// are read with `read_all`). A map of a file that something else truncates would fault on access,
/// as it would for any memory-mapped reader.
struct Mmap {
    // INVARIANT: `ptr` is the start of a live mapping of exactly `len` readable bytes.
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and never changes owner-side; any thread may read it.
unsafe impl Send for Mmap {}
// SAFETY: as above: shared reads of immutable memory.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `file` (of `len` bytes), or `None` when it is empty or mapping fails (the caller then
    /// reads with `pread`).
    fn new(file: &File, len: u64) -> Option<Mmap> {
        use std::os::fd::AsRawFd;
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        // SAFETY: a fresh private address range is requested (addr null); the fd is valid for the
        // call; the result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Mmap { ptr, len })
    }
}

impl AsRef<[u8]> for Mmap {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: by the invariant, `ptr..ptr+len` is mapped and readable while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range mapped in `new`; no slice of it outlives `self`
        // (`Bytes` keeps the owner alive while any slice exists).
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

impl RandomAccessFile for RealRandomAccess {
    fn mapped(&self) -> Option<bytes::Bytes> {
        self.map.clone()
    }

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
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(path)?.sync_data()
    }

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
            file: Arc::new(file),
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
            len: 0,
            written: 0,
            zero_chunk: 0,
            zeroed_to: 0,
        }))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let map = Mmap::new(&file, len).map(bytes::Bytes::from_owner);
        Ok(Arc::new(RealRandomAccess { file, len, map }))
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

    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
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
