//! An in-memory file system that keeps written and synced state apart.
//!
//! [`MemFs`] is the file system of the engine's crash tests. Every file and every directory holds two
//! views: what was written (the *current* view, which every read sees) and what would survive a
//! power loss (the *durable* view). [`MemFs::crash_clone`] builds a new file system from the durable
//! view alone; [`MemFs::crash_clone_torn`] adds a seeded, partial survival of unsynced appends.
//!
//! # Model
//!
//! - Files are inodes. A directory entry names an inode, so a file keeps its synced bytes across a
//!   rename, and a [`WritableFile`] keeps appending to its inode after the name is removed or renamed
//!   (as on Unix).
//! - A file's durable bytes are its bytes as of the last successful [`WritableFile::sync`].
//!   [`Fs::create`] on an existing file truncates that inode (like `O_TRUNC`); the truncation itself
//!   becomes durable only at the next `sync`.
//! - A directory's durable entries are its entries as of the last [`Fs::sync_dir`] on it. Creating,
//!   renaming and removing a file therefore survive a crash only after `sync_dir` of the parent (of
//!   both parents, for a rename across directories).
//! - Directories created by [`Fs::create_dir_all`] are durable at once. This is a deliberate
//!   simplification: the engine creates its directory once, before it writes any data, and modelling
//!   the parent's fsync would test the caller's setup rather than the engine.
//! - [`WritableFile::flush`] does nothing: there is no user-space buffer, so every appended byte is
//!   already "in the operating system". A process crash loses nothing; a power loss loses what was
//!   not synced.
//! - [`Fs::open`] returns a snapshot of the file's current bytes; later appends are not visible
//!   through it. Taking the snapshot is O(1); the next append to that file copies it once.
//!
//! # Paths
//!
//! There is no current working directory. A relative path lives under the top of the file system,
//! an absolute one under the top's entry `/`, so `"db/CURRENT"` and `"/db/CURRENT"` are different
//! files and every path reads back ([`MemFs::list_files`]) as it was spelled. `.` components are
//! ignored and `..` removes the previous component (never climbing above the top or `/`). Names must
//! be valid UTF-8.
//!
//! # Concurrency
//!
//! A `MemFs` is a handle: clones share one file system, and every method takes `&self`. The
//! directory tree sits behind one mutex, each file's bytes behind their own, so appends to different
//! files never contend and an append never waits for a directory operation. Lock order: tree, then
//! file.

use super::{FileLock, Fs, RandomAccessFile, SyncHandle, WritableFile};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// In a torn crash clone, a file whose unsynced tail was only partly kept gets zero bytes after the
/// kept part with a chance of one in this many.
pub const TORN_ZERO_FILL_ONE_IN: u64 = 4;

/// The most zero bytes a torn crash clone appends after the kept part of an unsynced tail.
pub const TORN_MAX_ZERO_BYTES: u64 = 64;

/// The directory every path starts from.
const TOP: DirId = 0;

/// The name, in the top directory, of the directory that absolute paths start from.
const ABSOLUTE_ROOT: &str = "/";

type DirId = usize;

/// An in-memory [`Fs`] that can simulate a power loss. See the module documentation for the model.
///
/// `Clone` gives another handle to the same file system; [`MemFs::crash_clone`] gives a new one.
#[derive(Clone)]
pub struct MemFs {
    inner: Arc<Inner>,
}

struct Inner {
    tree: Mutex<Tree>,
    /// Paths (normalized) whose lock is held.
    locks: Mutex<HashSet<Vec<String>>>,
}

/// The directory tree.
struct Tree {
    // INVARIANT: directories are never freed, so a `DirId` stays valid for the tree's lifetime;
    // `dirs[TOP]` is the top directory and it holds the directory `ABSOLUTE_ROOT` (both views).
    dirs: Vec<Dir>,
}

#[derive(Default)]
struct Dir {
    current: BTreeMap<String, Entry>,
    durable: BTreeMap<String, Entry>,
}

#[derive(Clone)]
enum Entry {
    File(Arc<Inode>),
    Dir(DirId),
}

/// A file's bytes, behind their own lock.
struct Inode {
    data: Mutex<FileData>,
}

struct FileData {
    /// The current bytes. Shared with the snapshots handed out by `open`.
    bytes: Arc<Vec<u8>>,
    durable: Durable,
}

/// The bytes that survive a power loss.
enum Durable {
    /// The first `n` current bytes. INVARIANT: `n <= bytes.len()`.
    Prefix(usize),
    /// Bytes no longer a prefix of the current ones: the file was truncated by `create` and not
    /// synced since.
    Detached(Vec<u8>),
}

impl FileData {
    fn new(bytes: Vec<u8>, durable: bool) -> FileData {
        let durable = Durable::Prefix(if durable { bytes.len() } else { 0 });
        FileData {
            bytes: Arc::new(bytes),
            durable,
        }
    }

    fn durable_bytes(&self) -> Vec<u8> {
        match &self.durable {
            Durable::Prefix(n) => self.bytes[..*n].to_vec(),
            Durable::Detached(bytes) => bytes.clone(),
        }
    }

    /// The durable bytes plus a seeded prefix of the unsynced tail, and sometimes a few zeros.
    fn torn_bytes(&self, rng: &mut SplitMix64) -> Vec<u8> {
        let n = match &self.durable {
            Durable::Prefix(n) => *n,
            Durable::Detached(bytes) => return bytes.clone(),
        };
        let unsynced = (self.bytes.len() - n) as u64;
        let kept = rng.below(unsynced + 1);
        let mut out = self.bytes[..n + kept as usize].to_vec();
        let lost = unsynced - kept;
        if lost > 0 && rng.below(TORN_ZERO_FILL_ONE_IN) == 0 {
            let zeros = 1 + rng.below(lost.min(TORN_MAX_ZERO_BYTES));
            out.resize(out.len() + zeros as usize, 0);
        }
        out
    }

    /// Empties the file as `O_TRUNC` does; the old durable bytes stay durable until the next sync.
    fn truncate_for_create(&mut self) {
        if let Durable::Prefix(n) = self.durable {
            if n > 0 {
                self.durable = Durable::Detached(self.bytes[..n].to_vec());
            }
        }
        self.bytes = Arc::new(Vec::new());
    }
}

impl Inode {
    fn new(data: FileData) -> Arc<Inode> {
        Arc::new(Inode {
            data: Mutex::new(data),
        })
    }
}

fn err(kind: io::ErrorKind, path: &Path, what: &str) -> io::Error {
    io::Error::new(kind, format!("{}: {what}", path.display()))
}

fn not_found(path: &Path) -> io::Error {
    err(io::ErrorKind::NotFound, path, "no such file or directory")
}

/// Splits a path into normalized components; see "Paths" in the module documentation.
fn components(path: &Path) -> io::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir => {
                out.clear();
                out.push(ABSOLUTE_ROOT.to_owned());
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if out.last().is_some_and(|last| last != ABSOLUTE_ROOT) {
                    out.pop();
                }
            }
            Component::Normal(name) => match name.to_str() {
                Some(name) => out.push(name.to_owned()),
                None => {
                    return Err(err(io::ErrorKind::InvalidInput, path, "name is not UTF-8"));
                }
            },
            Component::Prefix(_) => {
                return Err(err(
                    io::ErrorKind::InvalidInput,
                    path,
                    "path prefixes are not supported",
                ));
            }
        }
    }
    Ok(out)
}

/// Rebuilds a path from normalized components.
fn path_of(components: &[String]) -> PathBuf {
    components.iter().collect()
}

/// A path split into its parent directory's components and its last name.
fn split_parent<'a>(path: &Path, comps: &'a [String]) -> io::Result<(&'a [String], &'a str)> {
    match comps.split_last() {
        Some((name, parent)) if name != ABSOLUTE_ROOT => Ok((parent, name)),
        _ => Err(err(io::ErrorKind::InvalidInput, path, "not a file name")),
    }
}

impl Tree {
    fn new() -> Tree {
        let mut tree = Tree::bare();
        tree.insert_dir_durably(TOP, ABSOLUTE_ROOT);
        tree
    }

    /// A tree with an empty top directory and nothing else.
    fn bare() -> Tree {
        Tree {
            dirs: vec![Dir::default()],
        }
    }

    fn insert_dir_durably(&mut self, parent: DirId, name: &str) -> DirId {
        let id = self.dirs.len();
        self.dirs.push(Dir::default());
        let dir = &mut self.dirs[parent];
        dir.current.insert(name.to_owned(), Entry::Dir(id));
        dir.durable.insert(name.to_owned(), Entry::Dir(id));
        id
    }

    /// The entry at `comps` in the current view.
    fn lookup(&self, comps: &[String]) -> Option<Entry> {
        let mut entry = Entry::Dir(TOP);
        for name in comps {
            let Entry::Dir(dir) = entry else {
                return None;
            };
            entry = self.dirs[dir].current.get(name)?.clone();
        }
        Some(entry)
    }

    fn dir(&self, path: &Path, comps: &[String]) -> io::Result<DirId> {
        match self.lookup(comps) {
            Some(Entry::Dir(id)) => Ok(id),
            Some(Entry::File(_)) => Err(err(io::ErrorKind::NotADirectory, path, "not a directory")),
            None => Err(not_found(path)),
        }
    }

    fn file(&self, path: &Path, comps: &[String]) -> io::Result<Arc<Inode>> {
        match self.lookup(comps) {
            Some(Entry::File(inode)) => Ok(inode),
            Some(Entry::Dir(_)) => Err(err(io::ErrorKind::IsADirectory, path, "is a directory")),
            None => Err(not_found(path)),
        }
    }

    /// The file at `path`, created empty (and not durable) when missing.
    fn open_or_create(&mut self, path: &Path, comps: &[String]) -> io::Result<(Arc<Inode>, bool)> {
        let (parent, name) = split_parent(path, comps)?;
        let parent = self.dir(path, parent)?;
        match self.dirs[parent].current.get(name) {
            Some(Entry::File(inode)) => Ok((inode.clone(), false)),
            Some(Entry::Dir(_)) => Err(err(io::ErrorKind::IsADirectory, path, "is a directory")),
            None => {
                let inode = Inode::new(FileData::new(Vec::new(), false));
                let entry = Entry::File(inode.clone());
                self.dirs[parent].current.insert(name.to_owned(), entry);
                Ok((inode, true))
            }
        }
    }

    /// Every file of the current view, with its path, sorted by path; a file reachable by two paths
    /// is listed under both.
    fn files(&self) -> Vec<(Vec<String>, Arc<Inode>)> {
        let mut out = Vec::new();
        let mut stack = vec![(TOP, Vec::new())];
        while let Some((dir, prefix)) = stack.pop() {
            for (name, entry) in &self.dirs[dir].current {
                let mut path: Vec<String> = prefix.clone();
                path.push(name.clone());
                match entry {
                    Entry::File(inode) => out.push((path, inode.clone())),
                    Entry::Dir(id) => stack.push((*id, path)),
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A new tree from the durable view. `tear` is the seed of a torn clone.
    fn durable_clone(&self, tear: Option<u64>) -> Tree {
        let mut out = Tree::bare();
        // Old inode -> new inode, so that a file reachable by two durable names stays one file.
        let mut cloned: HashMap<*const Inode, Arc<Inode>> = HashMap::new();
        let mut stack = vec![(TOP, TOP, Vec::<String>::new())];
        while let Some((old, new, prefix)) = stack.pop() {
            for (name, entry) in &self.dirs[old].durable {
                let mut path = prefix.clone();
                path.push(name.clone());
                let new_entry = match entry {
                    Entry::Dir(id) => {
                        let new_id = out.dirs.len();
                        out.dirs.push(Dir::default());
                        stack.push((*id, new_id, path));
                        Entry::Dir(new_id)
                    }
                    Entry::File(inode) => {
                        let key = Arc::as_ptr(inode);
                        let copy = cloned.entry(key).or_insert_with(|| {
                            let data = inode.data.lock();
                            let bytes = match tear {
                                None => data.durable_bytes(),
                                Some(seed) => {
                                    let mut rng = SplitMix64::new(seed ^ stable_hash(&path));
                                    data.torn_bytes(&mut rng)
                                }
                            };
                            Inode::new(FileData::new(bytes, true))
                        });
                        Entry::File(copy.clone())
                    }
                };
                let dir = &mut out.dirs[new];
                dir.current.insert(name.clone(), new_entry.clone());
                dir.durable.insert(name.clone(), new_entry);
            }
        }
        out
    }
}

/// FNV-1a over the components, so a torn clone tears a file the same way whatever else exists.
fn stable_hash(comps: &[String]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for comp in comps {
        for byte in comp.bytes().chain(std::iter::once(0)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// A small deterministic generator (SplitMix64) for torn clones and probabilistic faults. Not for
/// anything that needs unpredictability.
#[derive(Debug, Clone)]
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    pub(super) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; 0 when `n` is 0.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p`: never for `p <= 0` (or NaN), always for `p >= 1`.
    pub(super) fn chance(&mut self, p: f64) -> bool {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }
}

impl MemFs {
    /// An empty file system.
    pub fn new() -> MemFs {
        MemFs::from_tree(Tree::new())
    }

    fn from_tree(tree: Tree) -> MemFs {
        MemFs {
            inner: Arc::new(Inner {
                tree: Mutex::new(tree),
                locks: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// A new, independent file system holding only the durable state: what a power loss at this
    /// instant would leave. Every file holds its synced bytes; only directory entries made durable
    /// by `sync_dir` exist (directories themselves always do). No lock is held in the clone.
    /// Handles open on `self` keep working on `self` and never affect the clone.
    pub fn crash_clone(&self) -> MemFs {
        MemFs::from_tree(self.inner.tree.lock().durable_clone(None))
    }

    /// Like [`MemFs::crash_clone`], but models writes that were in flight when the power went:
    /// the set of surviving names is exactly that of `crash_clone`, and each surviving file holds
    /// its synced bytes followed by a prefix, of seeded-random length from none to all, of the
    /// bytes appended to it since its last sync. When that prefix is not the whole unsynced tail,
    /// then with a chance of one in [`TORN_ZERO_FILL_ONE_IN`] between 1 and [`TORN_MAX_ZERO_BYTES`]
    /// zero bytes follow it (never more than the bytes lost), as when a file's size reached the disk
    /// but its data did not. Bytes are never reordered or corrupted otherwise, and synced bytes are
    /// always intact. A file truncated by `create` and not synced since keeps its old synced bytes.
    ///
    /// The same seed and the same history give the same clone; a file's tear depends only on the
    /// seed and its path.
    pub fn crash_clone_torn(&self, seed: u64) -> MemFs {
        MemFs::from_tree(self.inner.tree.lock().durable_clone(Some(seed)))
    }

    /// The current bytes of the file at `path`, or `None` when there is no such file.
    pub fn read_file(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let comps = components(path.as_ref()).ok()?;
        match self.inner.tree.lock().lookup(&comps)? {
            Entry::File(inode) => Some(inode.data.lock().bytes.to_vec()),
            Entry::Dir(_) => None,
        }
    }

    /// Writes a whole file durably: the parent directories are created, the file holds `bytes` in
    /// both views and its name is durable. An existing file is replaced by a new inode, so handles
    /// open on the old one do not see the change.
    ///
    /// # Errors
    /// `InvalidInput` for a path with no file name, `IsADirectory` when `path` is a directory,
    /// `NotADirectory` when a parent is a file.
    pub fn write_file(&self, path: impl AsRef<Path>, bytes: &[u8]) -> io::Result<()> {
        let path = path.as_ref();
        let comps = components(path)?;
        let (parent, name) = split_parent(path, &comps)?;
        let mut tree = self.inner.tree.lock();
        let parent = create_dirs(&mut tree, path, parent)?;
        if let Some(Entry::Dir(_)) = tree.dirs[parent].current.get(name) {
            return Err(err(io::ErrorKind::IsADirectory, path, "is a directory"));
        }
        let entry = Entry::File(Inode::new(FileData::new(bytes.to_vec(), true)));
        let dir = &mut tree.dirs[parent];
        dir.current.insert(name.to_owned(), entry.clone());
        dir.durable.insert(name.to_owned(), entry);
        Ok(())
    }

    /// XORs the byte at `offset` of the file at `path` with `xor`, in both the current and the
    /// durable bytes (where the durable bytes reach that far), so the damage survives a crash clone.
    ///
    /// # Errors
    /// `NotFound` for a missing file, `InvalidInput` when `offset` is past the end.
    pub fn corrupt_byte(&self, path: impl AsRef<Path>, offset: u64, xor: u8) -> io::Result<()> {
        let path = path.as_ref();
        let inode = self.inner.tree.lock().file(path, &components(path)?)?;
        let mut data = inode.data.lock();
        let at = usize::try_from(offset)
            .ok()
            .filter(|at| *at < data.bytes.len())
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, path, "offset past the end"))?;
        Arc::make_mut(&mut data.bytes)[at] ^= xor;
        if let Durable::Detached(bytes) = &mut data.durable {
            if let Some(byte) = bytes.get_mut(at) {
                *byte ^= xor;
            }
        }
        Ok(())
    }

    /// Shortens the file at `path` to `len` bytes, in both the current and the durable bytes.
    ///
    /// # Errors
    /// `NotFound` for a missing file, `InvalidInput` when `len` is larger than the file.
    pub fn truncate(&self, path: impl AsRef<Path>, len: u64) -> io::Result<()> {
        let path = path.as_ref();
        let inode = self.inner.tree.lock().file(path, &components(path)?)?;
        let mut data = inode.data.lock();
        let len = usize::try_from(len)
            .ok()
            .filter(|len| *len <= data.bytes.len())
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, path, "cannot grow a file"))?;
        Arc::make_mut(&mut data.bytes).truncate(len);
        match &mut data.durable {
            Durable::Prefix(n) => *n = (*n).min(len),
            Durable::Detached(bytes) => bytes.truncate(len),
        }
        Ok(())
    }

    /// The sum of the current sizes of all files, each inode counted once.
    pub fn total_bytes(&self) -> u64 {
        let files = self.inner.tree.lock().files();
        let mut seen = HashSet::new();
        files
            .iter()
            .filter(|(_, inode)| seen.insert(Arc::as_ptr(inode)))
            .map(|(_, inode)| inode.data.lock().bytes.len() as u64)
            .sum()
    }

    /// The paths of all files in the current view, sorted, spelled as described under "Paths" in
    /// the module documentation.
    pub fn list_files(&self) -> Vec<PathBuf> {
        let files = self.inner.tree.lock().files();
        files.iter().map(|(comps, _)| path_of(comps)).collect()
    }
}

/// Creates the directories `comps` (durably) and returns the last one.
fn create_dirs(tree: &mut Tree, path: &Path, comps: &[String]) -> io::Result<DirId> {
    let mut dir = TOP;
    for name in comps {
        dir = match tree.dirs[dir].current.get(name) {
            Some(Entry::Dir(id)) => *id,
            Some(Entry::File(_)) => {
                return Err(err(
                    io::ErrorKind::NotADirectory,
                    path,
                    "a parent is a file",
                ));
            }
            None => tree.insert_dir_durably(dir, name),
        };
    }
    Ok(dir)
}

impl Default for MemFs {
    fn default() -> MemFs {
        MemFs::new()
    }
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let files = self.inner.tree.lock().files().len();
        f.debug_struct("MemFs")
            .field("files", &files)
            .finish_non_exhaustive()
    }
}

struct MemWritable {
    inode: Arc<Inode>,
    /// Bytes appended through this handle.
    len: u64,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let mut file = self.inode.data.lock();
        Arc::make_mut(&mut file.bytes).extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        sync_inode(&self.inode);
        Ok(())
    }

    fn sync_handle(&mut self) -> io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(MemSync(self.inode.clone())))
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// Makes every byte of the file durable.
fn sync_inode(inode: &Inode) {
    let mut file = inode.data.lock();
    file.durable = Durable::Prefix(file.bytes.len());
}

struct MemSync(Arc<Inode>);

impl SyncHandle for MemSync {
    fn sync(&self) -> io::Result<()> {
        sync_inode(&self.0);
        Ok(())
    }
}

struct MemReadable {
    bytes: Arc<Vec<u8>>,
}

/// A snapshot's bytes as the owner of a `Bytes`.
struct SharedBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl RandomAccessFile for MemReadable {
    fn mapped(&self) -> Option<bytes::Bytes> {
        Some(bytes::Bytes::from_owner(SharedBytes(self.bytes.clone())))
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| self.bytes.get(start..start.checked_add(buf.len())?))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read past the end of the file",
                )
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

struct MemLock {
    inner: Arc<Inner>,
    key: Vec<String>,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.inner.locks.lock().remove(&self.key);
    }
}

impl Fs for MemFs {
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let comps = components(path)?;
        match self.inner.tree.lock().lookup(&comps) {
            Some(Entry::File(inode)) => {
                sync_inode(&inode);
                Ok(())
            }
            Some(Entry::Dir(_)) => Err(err(io::ErrorKind::IsADirectory, path, "is a directory")),
            None => Err(err(io::ErrorKind::NotFound, path, "no such file")),
        }
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let comps = components(path)?;
        create_dirs(&mut self.inner.tree.lock(), path, &comps).map(|_| ())
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let comps = components(path)?;
        let (inode, created) = self.inner.tree.lock().open_or_create(path, &comps)?;
        if !created {
            inode.data.lock().truncate_for_create();
        }
        Ok(Box::new(MemWritable { inode, len: 0 }))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let inode = self.inner.tree.lock().file(path, &components(path)?)?;
        let bytes = inode.data.lock().bytes.clone();
        Ok(Arc::new(MemReadable { bytes }))
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let inode = self.inner.tree.lock().file(path, &components(path)?)?;
        let bytes = inode.data.lock().bytes.to_vec();
        Ok(bytes)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let from_comps = components(from)?;
        let to_comps = components(to)?;
        let (from_parent, from_name) = split_parent(from, &from_comps)?;
        let (to_parent, to_name) = split_parent(to, &to_comps)?;
        let mut tree = self.inner.tree.lock();
        let from_dir = tree.dir(from, from_parent)?;
        let to_dir = tree.dir(to, to_parent)?;
        let entry = tree.dirs[from_dir]
            .current
            .get(from_name)
            .cloned()
            .ok_or_else(|| not_found(from))?;
        if from_comps == to_comps {
            return Ok(());
        }
        match (&entry, tree.dirs[to_dir].current.get(to_name)) {
            (Entry::File(_), Some(Entry::Dir(_))) => {
                return Err(err(io::ErrorKind::IsADirectory, to, "is a directory"));
            }
            (Entry::Dir(_), Some(Entry::File(_))) => {
                return Err(err(io::ErrorKind::NotADirectory, to, "not a directory"));
            }
            (Entry::Dir(_), Some(Entry::Dir(target))) if !tree.dirs[*target].current.is_empty() => {
                return Err(err(
                    io::ErrorKind::DirectoryNotEmpty,
                    to,
                    "directory not empty",
                ));
            }
            (Entry::Dir(_), _) if to_comps.starts_with(&from_comps) => {
                return Err(err(
                    io::ErrorKind::InvalidInput,
                    to,
                    "inside the directory it moves",
                ));
            }
            _ => {}
        }
        tree.dirs[from_dir].current.remove(from_name);
        tree.dirs[to_dir].current.insert(to_name.to_owned(), entry);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let comps = components(path)?;
        let (parent, name) = split_parent(path, &comps)?;
        let mut tree = self.inner.tree.lock();
        let parent = tree.dir(path, parent)?;
        match tree.dirs[parent].current.get(name) {
            Some(Entry::File(_)) => {
                tree.dirs[parent].current.remove(name);
                Ok(())
            }
            Some(Entry::Dir(_)) => Err(err(io::ErrorKind::IsADirectory, path, "is a directory")),
            None => Err(not_found(path)),
        }
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let comps = components(path)?;
        let tree = self.inner.tree.lock();
        let dir = tree.dir(path, &comps)?;
        let names = tree.dirs[dir].current.keys();
        let is_top = dir == TOP;
        Ok(names
            .filter(|name| !(is_top && *name == ABSOLUTE_ROOT))
            .cloned()
            .collect())
    }

    fn exists(&self, path: &Path) -> bool {
        components(path).is_ok_and(|comps| self.inner.tree.lock().lookup(&comps).is_some())
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        let inode = self.inner.tree.lock().file(path, &components(path)?)?;
        let len = inode.data.lock().bytes.len() as u64;
        Ok(len)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let comps = components(path)?;
        let mut tree = self.inner.tree.lock();
        let dir = tree.dir(path, &comps)?;
        let dir = &mut tree.dirs[dir];
        dir.durable = dir.current.clone();
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let comps = components(path)?;
        // The tree lock is released at the end of this statement, before `locks` is taken.
        self.inner.tree.lock().open_or_create(path, &comps)?;
        if !self.inner.locks.lock().insert(comps.clone()) {
            return Err(err(
                io::ErrorKind::WouldBlock,
                path,
                "lock held by another holder",
            ));
        }
        Ok(Box::new(MemLock {
            inner: self.inner.clone(),
            key: comps,
        }))
    }
}
