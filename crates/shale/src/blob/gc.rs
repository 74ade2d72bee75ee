//! The GC offload seam (DESIGN.md section 3 item 5): a [`GcTask`] is a self-contained description
//! of one blob file rewrite, a [`GcEngine`] runs tasks and hands back [`GcCompletion`]s.
//!
//! A task copies the records of one physical blob file whose original ordinals are set in `keep`
//! into a new physical file for the same logical id, byte for byte, in ordinal order. The new file's
//! survivors bitmap is `keep` itself: the record of ordinal `o` lands at index `keep.rank(o)`. The
//! task needs no LSM access, so it runs anywhere that can read the input and write the output: on
//! the calling thread ([`InlineGcEngine`]), on background workers under an I/O budget
//! ([`WorkerGcEngine`]), and in the future in another process or on a computational-storage
//! device behind the same trait.
//!
//! Invariants:
//! - every copied record passes its checksum first ([`BlobReader::raw`]): a corrupt input makes the
//!   task fail, it never spreads a bad record;
//! - a failed task removes its partial output (best effort) and reports the error in its
//!   completion; `submit` itself fails only when the task was not accepted;
//! - every accepted task yields exactly one completion, including tasks abandoned at shutdown;
//! - the output file is synced, its directory entry is not: the host syncs the directory before
//!   it installs the result in the MANIFEST.
//!
//! Concurrency: engines are `Send + Sync` and shared by the host's threads. `on_complete` is called
//! on the thread that finished a task (the submitter for the inline engine, a worker otherwise),
//! with no engine lock held; it should only wake the host, which then calls
//! [`GcEngine::completions`].

use super::bitmap::Bitmap;
use super::rate::TokenBucket;
use super::reader::BlobReader;
use super::writer::{BlobFileInfo, BlobWriter};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::fs::Fs;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Tasks each worker thread may have queued or running before `submit` answers `Busy`.
pub(crate) const WORKER_TASKS_PER_THREAD: usize = 2;

/// The token bucket's burst is this fraction of a second of its rate (1/20: 50 ms).
pub(crate) const GC_BURST_DIVISOR: u64 = 20;

/// A worker waiting for its I/O budget checks for shutdown at least this often.
const CANCEL_CHECK_INTERVAL: Duration = Duration::from_millis(10);

/// Wakes the host when completions are ready. Called with no engine lock held.
pub(crate) type OnComplete = Arc<dyn Fn() + Send + Sync>;

/// One blob file rewrite, self-contained.
#[derive(Clone)]
pub(crate) struct GcTask {
    /// The host's id for the task, echoed in its completion.
    pub id: u64,
    /// Where the input is read and the output written.
    pub fs: Arc<dyn Fs>,
    /// The current physical file of the logical blob file.
    pub input_path: PathBuf,
    /// The logical blob file id (checked against the input's header).
    pub logical: u64,
    /// Which original ordinals the input holds, in order: the record of ordinal `o` is at index
    /// `rank(o)`. `None` when the input is the first physical file (it holds every ordinal).
    pub old_survivors: Option<Bitmap>,
    /// The original ordinals to copy; a subset of `old_survivors` (or of `0..count`). It becomes
    /// the output's survivors bitmap.
    pub keep: Bitmap,
    /// The file to create.
    pub output_path: PathBuf,
    /// The host's file number of the output, echoed in the result.
    pub output_number: u64,
}

impl fmt::Debug for GcTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcTask")
            .field("id", &self.id)
            .field("input_path", &self.input_path)
            .field("logical", &self.logical)
            .field("old_survivors", &self.old_survivors)
            .field("keep", &self.keep)
            .field("output_path", &self.output_path)
            .field("output_number", &self.output_number)
            .finish_non_exhaustive()
    }
}

/// What a successful task produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GcOutput {
    pub task_id: u64,
    pub logical: u64,
    pub output_number: u64,
    /// The output file; `info.count == keep.count_ones()`.
    pub info: BlobFileInfo,
    /// Bytes read from the input: header, footer, offsets array and the copied records.
    pub bytes_read: u64,
    /// Bytes written: the whole output file.
    pub bytes_written: u64,
    /// Wall time of the task, waits for the I/O budget included.
    pub micros: u64,
}

/// The outcome of one accepted task.
#[derive(Debug, Clone)]
pub(crate) struct GcCompletion {
    pub task_id: u64,
    pub result: Result<GcOutput>,
}

/// What an engine can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GcCaps {
    /// Tasks accepted and not yet completed beyond which `submit` answers `Busy`.
    pub max_in_flight: usize,
    /// The backend, for logs and statistics.
    pub name: &'static str,
}

/// Runs GC tasks somewhere. See the module documentation.
pub(crate) trait GcEngine: Send + Sync {
    /// Accepts `task`. Its outcome, success or failure, arrives later through `completions`.
    ///
    /// # Errors
    /// `Busy` when `caps().max_in_flight` tasks are in flight (the host keeps going and retries
    /// later); `Closed` after shutdown. The task is dropped in both cases.
    fn submit(&self, task: GcTask) -> Result<()>;
    /// Takes the completions that arrived since the last call, in completion order.
    fn completions(&self) -> Vec<GcCompletion>;
    /// What this engine can do.
    fn caps(&self) -> GcCaps;
    /// Tasks accepted and not yet completed.
    #[allow(dead_code)] // API of the blob layer; only tests use it so far
    fn busy(&self) -> usize;
}

/// How a running task is paced and stopped.
#[derive(Clone, Copy, Default)]
struct Pace<'a> {
    bucket: Option<&'a TokenBucket>,
    cancel: Option<&'a AtomicBool>,
}

impl Pace<'_> {
    fn cancelled(&self) -> bool {
        self.cancel.is_some_and(|c| c.load(Ordering::Acquire))
    }

    /// Takes `bytes` of budget, waiting in short slices so that shutdown is not held up.
    fn charge(&self, bytes: u64) -> Result<()> {
        if let Some(bucket) = self.bucket {
            let deadline = Instant::now() + bucket.reserve(bytes, Instant::now());
            loop {
                if self.cancelled() {
                    break;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::sleep(left.min(CANCEL_CHECK_INTERVAL));
            }
        }
        if self.cancelled() {
            return Err(shut_down());
        }
        Ok(())
    }
}

fn shut_down() -> Error {
    Error::new(
        ErrorKind::Closed,
        "GC engine shut down before the task finished",
    )
}

/// Runs `task` on this thread. On failure the partial output is removed (best effort).
fn run_task(task: &GcTask, pace: Pace<'_>) -> Result<GcOutput> {
    let start = Instant::now();
    let mut created = false;
    let result = copy_survivors(task, pace, &mut created);
    if result.is_err() && created {
        let _ = task.fs.remove_file(&task.output_path);
    }
    let (info, bytes_read) = result?;
    Ok(GcOutput {
        task_id: task.id,
        logical: task.logical,
        output_number: task.output_number,
        info,
        bytes_read,
        bytes_written: info.file_size,
        micros: u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
    })
}

/// Runs `task` on the calling thread, unpaced, for a host that runs a collection as a job of its
/// own (rubble mode's leader: `db::gc::prepare_for_log`). As [`run_task`].
pub(crate) fn run_now(task: &GcTask) -> Result<GcOutput> {
    run_task(task, Pace::default())
}

/// The copy itself; sets `created` once the output file exists.
fn copy_survivors(
    task: &GcTask,
    pace: Pace<'_>,
    created: &mut bool,
) -> Result<(BlobFileInfo, u64)> {
    let input = task
        .fs
        .open(&task.input_path)
        .ctx(|| format!("open blob file {}", task.input_path.display()))?;
    let reader = BlobReader::open(input, task.input_path.clone())?;
    if reader.logical() != task.logical {
        return Err(Error::corruption(
            &task.input_path,
            0,
            format!(
                "holds logical blob file {}, not {}",
                reader.logical(),
                task.logical
            ),
        ));
    }
    check_task(task, &reader)?;

    let output = task
        .fs
        .create(&task.output_path)
        .ctx(|| format!("create blob file {}", task.output_path.display()))?;
    *created = true;
    let mut writer = BlobWriter::new(output, task.output_path.clone(), task.logical)?;
    let mut bytes_read = reader.metadata_len();
    for ordinal in task.keep.iter_ones() {
        let index = match &task.old_survivors {
            Some(s) => s.rank(ordinal),
            None => ordinal,
        };
        // check_task bounded every kept ordinal's index by the input's count.
        let index = u32::try_from(index)
            .map_err(|_| Error::invalid_argument("GC task ordinal out of range"))?;
        let raw = reader.raw(index)?;
        pace.charge(raw.len() as u64)?;
        writer.add_raw(&raw)?;
        bytes_read += raw.len() as u64;
    }
    if pace.cancelled() {
        return Err(shut_down());
    }
    Ok((writer.finish()?, bytes_read))
}

/// Checks the task's bitmaps against the input before anything is written.
fn check_task(task: &GcTask, reader: &BlobReader) -> Result<()> {
    let count = u64::from(reader.count());
    let bad_keep = |o: u64| {
        Error::invalid_argument(format!(
            "GC task {}: kept ordinal {o} is not held by {}",
            task.id,
            task.input_path.display()
        ))
    };
    match &task.old_survivors {
        Some(s) => {
            if s.count_ones() != count {
                return Err(Error::corruption(
                    &task.input_path,
                    0,
                    format!(
                        "holds {count} records but its survivors bitmap lists {}",
                        s.count_ones()
                    ),
                ));
            }
            if let Some(o) = task.keep.iter_ones().find(|&o| !s.get(o)) {
                return Err(bad_keep(o));
            }
        }
        None => {
            if let Some(o) = task.keep.iter_ones().find(|&o| o >= count) {
                return Err(bad_keep(o));
            }
        }
    }
    Ok(())
}

/// Runs each task inside `submit`, on the caller's thread: deterministic, for tests and for hosts
/// that want GC on their own background thread.
pub(crate) struct InlineGcEngine {
    completions: Mutex<Vec<GcCompletion>>,
    running: AtomicUsize,
    on_complete: OnComplete,
}

impl InlineGcEngine {
    /// An engine calling `on_complete` after each task.
    pub(crate) fn new(on_complete: OnComplete) -> InlineGcEngine {
        InlineGcEngine {
            completions: Mutex::new(Vec::new()),
            running: AtomicUsize::new(0),
            on_complete,
        }
    }
}

impl GcEngine for InlineGcEngine {
    /// Runs the task to completion before returning; never `Busy`.
    fn submit(&self, task: GcTask) -> Result<()> {
        self.running.fetch_add(1, Ordering::AcqRel);
        let result = run_task(&task, Pace::default());
        self.completions.lock().push(GcCompletion {
            task_id: task.id,
            result,
        });
        self.running.fetch_sub(1, Ordering::AcqRel);
        (self.on_complete)();
        Ok(())
    }

    fn completions(&self) -> Vec<GcCompletion> {
        std::mem::take(&mut *self.completions.lock())
    }

    fn caps(&self) -> GcCaps {
        GcCaps {
            max_in_flight: 1,
            name: "inline",
        }
    }

    fn busy(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }
}

/// Background worker threads fed by a queue, copying under one shared [`TokenBucket`].
///
/// Shutdown (explicit or on drop) abandons work rather than finishing it: tasks still queued
/// complete at once with a `Closed` error, a running task stops at its next record (or budget
/// wait) with a `Closed` error and removes its partial output, and the workers are joined. After
/// shutdown begins `on_complete` is no longer called, but [`GcEngine::completions`] still returns
/// every completion. Do not shut the engine down while holding a lock that `on_complete` takes.
pub(crate) struct WorkerGcEngine {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    max_in_flight: usize,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    completions: Mutex<Vec<GcCompletion>>,
    // Set at shutdown; running tasks poll it.
    cancel: AtomicBool,
    bucket: Option<TokenBucket>,
    on_complete: OnComplete,
}

struct State {
    queue: VecDeque<GcTask>,
    // INVARIANT: tasks accepted whose completion is not yet pushed (queued + running).
    in_flight: usize,
    shutdown: bool,
}

impl WorkerGcEngine {
    /// Starts `threads` workers (at least 1) sharing an I/O budget of `bytes_per_sec` bytes
    /// copied per second (0: unlimited), with a burst of 1/[`GC_BURST_DIVISOR`] of a second.
    /// At most `threads *` [`WORKER_TASKS_PER_THREAD`] tasks are in flight.
    ///
    /// # Errors
    /// `Io` when a thread cannot be spawned (the ones already started are stopped).
    pub(crate) fn new(
        threads: usize,
        bytes_per_sec: u64,
        on_complete: OnComplete,
    ) -> Result<WorkerGcEngine> {
        let threads = threads.max(1);
        let bucket = (bytes_per_sec > 0)
            .then(|| TokenBucket::new(bytes_per_sec, bytes_per_sec / GC_BURST_DIVISOR));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                in_flight: 0,
                shutdown: false,
            }),
            wake: Condvar::new(),
            completions: Mutex::new(Vec::new()),
            cancel: AtomicBool::new(false),
            bucket,
            on_complete,
        });
        let engine = WorkerGcEngine {
            shared: shared.clone(),
            workers: Mutex::new(Vec::with_capacity(threads)),
            max_in_flight: threads.saturating_mul(WORKER_TASKS_PER_THREAD),
        };
        for i in 0..threads {
            let shared = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("shale-gc-{i}"))
                .spawn(move || worker(&shared))
                .ctx(|| "spawn GC worker thread".to_string())?; // drop(engine) stops the others
            engine.workers.lock().push(handle);
        }
        Ok(engine)
    }

    /// Stops the workers as described on the type and waits for them. Idempotent.
    pub(crate) fn shutdown(&self) {
        let abandoned: Vec<GcTask> = {
            let mut st = self.shared.state.lock();
            st.shutdown = true;
            self.shared.cancel.store(true, Ordering::Release);
            st.queue.drain(..).collect()
        };
        self.shared.wake.notify_all();
        for task in abandoned {
            self.shared.complete(task.id, Err(shut_down()));
        }
        let handles = std::mem::take(&mut *self.workers.lock());
        let me = std::thread::current().id();
        for h in handles {
            // A worker that drops the engine from `on_complete` cannot join itself.
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

impl Shared {
    /// Publishes a completion, then wakes the host unless shutting down.
    fn complete(&self, task_id: u64, result: Result<GcOutput>) {
        self.completions
            .lock()
            .push(GcCompletion { task_id, result });
        let notify = {
            let mut st = self.state.lock();
            st.in_flight = st.in_flight.saturating_sub(1);
            !st.shutdown
        };
        if notify {
            (self.on_complete)();
        }
    }
}

fn worker(shared: &Shared) {
    loop {
        let task = {
            let mut st = shared.state.lock();
            loop {
                if st.shutdown {
                    return;
                }
                if let Some(task) = st.queue.pop_front() {
                    break task;
                }
                shared.wake.wait(&mut st);
            }
        };
        let pace = Pace {
            bucket: shared.bucket.as_ref(),
            cancel: Some(&shared.cancel),
        };
        let result = run_task(&task, pace);
        let id = task.id;
        drop(task);
        shared.complete(id, result);
    }
}

impl GcEngine for WorkerGcEngine {
    fn submit(&self, task: GcTask) -> Result<()> {
        {
            let mut st = self.shared.state.lock();
            if st.shutdown {
                return Err(Error::new(ErrorKind::Closed, "GC engine is shut down"));
            }
            if st.in_flight >= self.max_in_flight {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!("GC engine busy: {} tasks in flight", st.in_flight),
                ));
            }
            st.in_flight += 1;
            st.queue.push_back(task);
        }
        self.shared.wake.notify_one();
        Ok(())
    }

    fn completions(&self) -> Vec<GcCompletion> {
        std::mem::take(&mut *self.shared.completions.lock())
    }

    fn caps(&self) -> GcCaps {
        GcCaps {
            max_in_flight: self.max_in_flight,
            name: "worker",
        }
    }

    fn busy(&self) -> usize {
        self.shared.state.lock().in_flight
    }
}

impl Drop for WorkerGcEngine {
    fn drop(&mut self) {
        self.shutdown();
    }
}
