//! A fault-injecting file system: simulated power loss and failing operations.
//!
//! [`FaultFs`] wraps a [`MemFs`] and consults its rules before every operation, so a test can make
//! any operation fail (a full disk on append, EIO on fsync, a failed rename) and check that the
//! engine reports a clean error or poisons itself, never that it corrupts data. It can also cut the
//! power after a given number of mutating operations and hand back the file system as the crash
//! left it, so a test can enumerate every crash point of a scenario:
//!
//! ```
//! # use shale::fs::{FaultFs, Fs};
//! # use std::path::Path;
//! fn scenario(fs: &FaultFs) -> std::io::Result<()> {
//!     fs.create_dir_all(Path::new("db"))?;
//!     let mut file = fs.create(Path::new("db/a"))?;
//!     file.append(b"hello")?;
//!     file.sync()?;
//!     fs.sync_dir(Path::new("db"))
//! }
//! let dry_run = FaultFs::default();
//! scenario(&dry_run).unwrap();
//! for crash_at in 0..=dry_run.mutating_ops() {
//!     let fs = FaultFs::default();
//!     fs.cut_power_after(crash_at);
//!     let finished = scenario(&fs).is_ok();
//!     let after = fs.crash_clone();
//!     // ... reopen on `after` and check that what was acknowledged survived.
//!     assert_eq!(finished, after.mem().read_file("db/a").as_deref() == Some(&b"hello"[..]));
//! }
//! ```
//!
//! # Semantics
//!
//! - An operation that fails, by a rule or by the power cut, has no effect at all: a failed append
//!   appends nothing, a failed sync makes nothing durable, a failed rename moves nothing.
//! - Rules are consulted in the order they were injected; the first one that fires decides the
//!   error, and the rules after it do not see that operation.
//! - *Mutating* operations are those that change the file system: see [`FaultOp::is_mutating`].
//!   [`FaultFs::mutating_ops`] counts those that passed every check and reached the `MemFs` (whether
//!   the `MemFs` then succeeded or not, for example a rename of a missing file). Once the power is
//!   cut, every mutating operation and every flush fails with `io::ErrorKind::Other`; reads still
//!   work, so a test can look around before it takes the crash clone.
//!
//! # Concurrency
//!
//! `Clone` gives another handle to the same `FaultFs`. The rules and counters sit behind one mutex
//! taken briefly by every operation; the decision to let a mutating operation through and its count
//! are taken together, so `cut_power_after(n)` lets exactly `n` operations through even when
//! threads race. Probabilistic rules are deterministic for a given seed only when operations arrive
//! in a deterministic order.

use super::mem::{MemFs, SplitMix64};
use super::{FileLock, Fs, RandomAccessFile, SyncHandle, WritableFile};
use parking_lot::Mutex;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The kind of an operation, as rules name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// Matches every operation (only meaningful in a rule).
    Any,
    /// [`Fs::create_dir_all`].
    CreateDir,
    /// [`Fs::create`].
    Create,
    /// [`WritableFile::append`].
    Append,
    /// [`WritableFile::flush`].
    Flush,
    /// [`WritableFile::sync`].
    Sync,
    /// [`Fs::sync_dir`].
    SyncDir,
    /// [`Fs::rename`]; a path filter matches either the source or the target.
    Rename,
    /// [`Fs::remove_file`].
    Remove,
    /// [`Fs::open`], and the opening step of [`Fs::read_all`].
    Open,
    /// [`RandomAccessFile::read_exact_at`], and the reading step of [`Fs::read_all`].
    Read,
    /// [`Fs::list_dir`].
    ListDir,
    /// [`Fs::file_size`].
    FileSize,
    /// [`Fs::lock`].
    Lock,
}

/// Number of `FaultOp` variants, the size of the per-kind counters.
const OP_KINDS: usize = 14;

impl FaultOp {
    /// True for the operations that change the file system: `CreateDir`, `Create`, `Append`,
    /// `Sync`, `SyncDir`, `Rename`, `Remove` and `Lock` (which creates the lock file). They are
    /// counted by [`FaultFs::mutating_ops`] and fail once the power is cut. `Flush` changes nothing
    /// a crash could observe, so it is not counted, but it fails too once the power is cut.
    pub fn is_mutating(self) -> bool {
        matches!(
            self,
            FaultOp::CreateDir
                | FaultOp::Create
                | FaultOp::Append
                | FaultOp::Sync
                | FaultOp::SyncDir
                | FaultOp::Rename
                | FaultOp::Remove
                | FaultOp::Lock
        )
    }

    fn fails_without_power(self) -> bool {
        self.is_mutating() || self == FaultOp::Flush
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// An injection rule: which operations fail, how, and when. Built with chained calls:
///
/// ```
/// # use shale::fs::{Fault, FaultOp};
/// # use std::io;
/// // The fourth sync of a WAL file fails with EIO, once.
/// let fault = Fault::new(FaultOp::Sync).path_contains(".log").error(io::ErrorKind::Other).after(3).once();
/// ```
///
/// Defaults: every path, error kind [`DEFAULT_FAULT_ERROR`], firing on every matching operation from
/// the first one on, with certainty.
#[derive(Debug, Clone)]
pub struct Fault {
    op: FaultOp,
    path_contains: Option<String>,
    kind: io::ErrorKind,
    /// Matching operations let through before the rule may fire.
    after: u64,
    /// The most times the rule fires; `None` for no limit.
    limit: Option<u64>,
    /// Chance of firing on an eligible operation, and the seed of its generator.
    probability: Option<(f64, u64)>,
}

/// The error kind of a [`Fault`] unless [`Fault::error`] says otherwise: `Other`, which is how an
/// `EIO` reads in Rust.
pub const DEFAULT_FAULT_ERROR: io::ErrorKind = io::ErrorKind::Other;

impl Fault {
    /// A rule failing every `op`; refine it with the other methods.
    pub fn new(op: FaultOp) -> Fault {
        Fault {
            op,
            path_contains: None,
            kind: DEFAULT_FAULT_ERROR,
            after: 0,
            limit: None,
            probability: None,
        }
    }

    /// Only operations on a path whose text contains `needle` (for example `".log"`, `".sst"`,
    /// `"MANIFEST"`) match.
    pub fn path_contains(mut self, needle: impl Into<String>) -> Fault {
        self.path_contains = Some(needle.into());
        self
    }

    /// Fail with `kind` (`StorageFull` for ENOSPC, `Other` for EIO, ...).
    pub fn error(mut self, kind: io::ErrorKind) -> Fault {
        self.kind = kind;
        self
    }

    /// Let the first `n` matching operations through; the rule may fire from the next one on.
    pub fn after(mut self, n: u64) -> Fault {
        self.after = n;
        self
    }

    /// Fire at most once.
    pub fn once(self) -> Fault {
        self.times(1)
    }

    /// Fire at most `n` times.
    pub fn times(mut self, n: u64) -> Fault {
        self.limit = Some(n);
        self
    }

    /// Fire on every eligible operation (the default; undoes `once` and `times`).
    pub fn always(mut self) -> Fault {
        self.limit = None;
        self
    }

    /// Fire on each eligible operation with probability `p` (`p <= 0` never, `p >= 1` always),
    /// drawn from a generator seeded with `seed`.
    pub fn probability(mut self, p: f64, seed: u64) -> Fault {
        self.probability = Some((p, seed));
        self
    }

    fn matches(&self, op: FaultOp, paths: &[&Path]) -> bool {
        (self.op == FaultOp::Any || self.op == op)
            && self.path_contains.as_deref().is_none_or(|needle| {
                paths
                    .iter()
                    .any(|path| path.to_string_lossy().contains(needle))
            })
    }
}

/// Names an injected rule, to ask how often it fired or to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultId(u64);

struct Rule {
    id: FaultId,
    fault: Fault,
    /// Matching operations seen.
    seen: u64,
    /// Times fired.
    fired: u64,
    rng: SplitMix64,
}

impl Rule {
    /// Counts a matching operation and decides whether the rule fires on it.
    fn fires(&mut self) -> bool {
        self.seen += 1;
        if self.seen <= self.fault.after || self.fault.limit.is_some_and(|l| self.fired >= l) {
            return false;
        }
        let fire = match self.fault.probability {
            Some((p, _)) => self.rng.chance(p),
            None => true,
        };
        if fire {
            self.fired += 1;
        }
        fire
    }
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    next_id: u64,
    mutating_ops: u64,
    /// The value of `mutating_ops` at which the power goes; `None` while it stays on.
    power_limit: Option<u64>,
    injected: [u64; OP_KINDS],
    power_failures: u64,
    /// The most bytes all files may hold together; `None` for no limit.
    space_limit: Option<u64>,
    /// Appends refused for lack of space.
    space_failures: u64,
}

/// A [`MemFs`] behind injection rules and a power switch. See the module documentation.
#[derive(Clone)]
pub struct FaultFs {
    inner: Arc<FaultInner>,
}

struct FaultInner {
    mem: MemFs,
    state: Mutex<State>,
}

impl Default for FaultFs {
    fn default() -> FaultFs {
        FaultFs::new(MemFs::new())
    }
}

impl fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.lock();
        f.debug_struct("FaultFs")
            .field("rules", &state.rules.len())
            .field("mutating_ops", &state.mutating_ops)
            .field("power_limit", &state.power_limit)
            .finish_non_exhaustive()
    }
}

fn describe(paths: &[&Path]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(" -> ")
}

impl FaultFs {
    /// Wraps `mem`, with no rules and the power on.
    pub fn new(mem: MemFs) -> FaultFs {
        FaultFs {
            inner: Arc::new(FaultInner {
                mem,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The wrapped file system (operations on it bypass every rule).
    pub fn mem(&self) -> &MemFs {
        &self.inner.mem
    }

    /// Adds a rule, consulted after those already there.
    pub fn inject(&self, fault: Fault) -> FaultId {
        let mut state = self.inner.state.lock();
        let id = FaultId(state.next_id);
        state.next_id += 1;
        let seed = fault.probability.map_or(0, |(_, seed)| seed);
        state.rules.push(Rule {
            id,
            fault,
            seen: 0,
            fired: 0,
            rng: SplitMix64::new(seed),
        });
        id
    }

    /// Removes one rule; false when it was not there.
    pub fn remove_fault(&self, id: FaultId) -> bool {
        let mut state = self.inner.state.lock();
        let before = state.rules.len();
        state.rules.retain(|rule| rule.id != id);
        state.rules.len() != before
    }

    /// Removes every rule. The power switch and the counters are unchanged.
    pub fn clear_faults(&self) {
        self.inner.state.lock().rules.clear();
    }

    /// How many times rule `id` fired; 0 for a rule no longer there.
    pub fn fired(&self, id: FaultId) -> u64 {
        let state = self.inner.state.lock();
        state
            .rules
            .iter()
            .find(|rule| rule.id == id)
            .map_or(0, |rule| rule.fired)
    }

    /// Failures injected by rules so far, of every kind (power-cut failures not included).
    pub fn injected(&self) -> u64 {
        self.inner.state.lock().injected.iter().sum()
    }

    /// Failures injected by rules so far into operations of kind `op` (`FaultOp::Any`: all).
    pub fn injected_for(&self, op: FaultOp) -> u64 {
        match op {
            FaultOp::Any => self.injected(),
            op => self.inner.state.lock().injected[op.index()],
        }
    }

    /// Makes the file system as large as `limit` bytes (all files together, as
    /// [`MemFs::total_bytes`] counts them): an append that would pass it fails with
    /// `StorageFull` (ENOSPC) and appends nothing. `None` lifts the limit, as when space is freed.
    pub fn set_space_limit(&self, limit: Option<u64>) {
        self.inner.state.lock().space_limit = limit;
    }

    /// Appends refused by [`FaultFs::set_space_limit`] so far.
    pub fn space_failures(&self) -> u64 {
        self.inner.state.lock().space_failures
    }

    /// Fails an append of `len` bytes that the space limit does not leave room for.
    fn check_space(&self, path: &Path, len: usize) -> io::Result<()> {
        let mut state = self.inner.state.lock();
        let Some(limit) = state.space_limit else {
            return Ok(());
        };
        if self.inner.mem.total_bytes() + len as u64 > limit {
            state.space_failures += 1;
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("no space left on the device: append to {}", path.display()),
            ));
        }
        Ok(())
    }

    /// Operations failed because the power was cut.
    pub fn power_cut_failures(&self) -> u64 {
        self.inner.state.lock().power_failures
    }

    /// Mutating operations let through so far (see [`FaultOp::is_mutating`]).
    pub fn mutating_ops(&self) -> u64 {
        self.inner.state.lock().mutating_ops
    }

    /// Lets `n` more mutating operations through, then fails every later mutating operation and
    /// flush, as if the machine died at that instant. Replaces an earlier cut.
    pub fn cut_power_after(&self, n: u64) {
        let mut state = self.inner.state.lock();
        state.power_limit = Some(state.mutating_ops.saturating_add(n));
    }

    /// True once the power is cut (the limit of `cut_power_after` is reached).
    pub fn is_power_cut(&self) -> bool {
        let state = self.inner.state.lock();
        state
            .power_limit
            .is_some_and(|limit| state.mutating_ops >= limit)
    }

    /// Turns the power back on (cancels `cut_power_after`). What failed stays failed.
    pub fn restore_power(&self) {
        self.inner.state.lock().power_limit = None;
    }

    /// A new `FaultFs`, without rules and with the power on, over [`MemFs::crash_clone`] of the
    /// wrapped file system: the state a power loss at this instant leaves.
    pub fn crash_clone(&self) -> FaultFs {
        FaultFs::new(self.inner.mem.crash_clone())
    }

    /// Like [`FaultFs::crash_clone`] over [`MemFs::crash_clone_torn`].
    pub fn crash_clone_torn(&self, seed: u64) -> FaultFs {
        FaultFs::new(self.inner.mem.crash_clone_torn(seed))
    }

    /// Decides whether `op` on `paths` may run; counts it when it is mutating and may.
    fn gate(&self, op: FaultOp, paths: &[&Path]) -> io::Result<()> {
        let mut state = self.inner.state.lock();
        let state = &mut *state;
        if op.fails_without_power()
            && state
                .power_limit
                .is_some_and(|limit| state.mutating_ops >= limit)
        {
            state.power_failures += 1;
            return Err(io::Error::other(format!(
                "power cut: {op:?} on {}",
                describe(paths)
            )));
        }
        let fired = state
            .rules
            .iter_mut()
            .filter(|rule| rule.fault.matches(op, paths))
            .find_map(|rule| rule.fires().then_some(rule.fault.kind));
        if let Some(kind) = fired {
            state.injected[op.index()] += 1;
            return Err(io::Error::new(
                kind,
                format!("injected fault: {op:?} on {}", describe(paths)),
            ));
        }
        if op.is_mutating() {
            state.mutating_ops += 1;
        }
        Ok(())
    }
}

struct FaultWritable {
    fs: FaultFs,
    path: PathBuf,
    inner: Box<dyn WritableFile>,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.fs.gate(FaultOp::Append, &[&self.path])?;
        self.fs.check_space(&self.path, data.len())?;
        self.inner.append(data)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.fs.gate(FaultOp::Flush, &[&self.path])?;
        self.inner.flush()
    }

    fn sync(&mut self) -> io::Result<()> {
        self.fs.gate(FaultOp::Sync, &[&self.path])?;
        self.inner.sync()
    }

    /// Counts as the flush it does; the handle's syncs are gated as syncs.
    fn sync_handle(&mut self) -> io::Result<Arc<dyn SyncHandle>> {
        self.fs.gate(FaultOp::Flush, &[&self.path])?;
        Ok(Arc::new(FaultSync {
            fs: self.fs.clone(),
            path: self.path.clone(),
            inner: self.inner.sync_handle()?,
        }))
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

struct FaultSync {
    fs: FaultFs,
    path: PathBuf,
    inner: Arc<dyn SyncHandle>,
}

impl SyncHandle for FaultSync {
    fn sync(&self) -> io::Result<()> {
        self.fs.gate(FaultOp::Sync, &[&self.path])?;
        self.inner.sync()
    }
}

struct FaultReadable {
    fs: FaultFs,
    path: PathBuf,
    inner: Arc<dyn RandomAccessFile>,
}

impl RandomAccessFile for FaultReadable {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.fs.gate(FaultOp::Read, &[&self.path])?;
        self.inner.read_exact_at(offset, buf)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Fs for FaultFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.gate(FaultOp::CreateDir, &[path])?;
        self.inner.mem.create_dir_all(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.gate(FaultOp::Create, &[path])?;
        let inner = self.inner.mem.create(path)?;
        Ok(Box::new(FaultWritable {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner,
        }))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.gate(FaultOp::Open, &[path])?;
        let inner = self.inner.mem.open(path)?;
        Ok(Arc::new(FaultReadable {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.gate(FaultOp::Rename, &[from, to])?;
        self.inner.mem.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.gate(FaultOp::Remove, &[path])?;
        self.inner.mem.remove_file(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.gate(FaultOp::ListDir, &[path])?;
        self.inner.mem.list_dir(path)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.mem.exists(path)
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.gate(FaultOp::FileSize, &[path])?;
        self.inner.mem.file_size(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.gate(FaultOp::SyncDir, &[path])?;
        self.inner.mem.sync_dir(path)
    }

    /// Gated as a [`FaultOp::Sync`].
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.gate(FaultOp::Sync, &[path])?;
        self.inner.mem.sync_file(path)
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.gate(FaultOp::Lock, &[path])?;
        self.inner.mem.lock(path)
    }
}
