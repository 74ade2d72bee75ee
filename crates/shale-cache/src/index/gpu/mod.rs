//! The GPU backend of [`BatchIndex`]: Mega-KV's index on an NVIDIA GPU (feature `gpu`).
//!
//! The table lives in GPU memory: `slots / 8` buckets of 8 packed `(signature, location)` slots,
//! laid out and probed exactly as the CPU backend does (see `kernels.cu` for the layout and the
//! kernels). A batch is packed into page-locked host memory, copied in as one transfer, served by
//! five kernels (search; delete; inserts as update in place, election of one insert per bucket
//! pair and signature, placement with bounded cuckoo displacement) and its results copied out as
//! one transfer.
//!
//! Pipeline: [`STAGES`] stages, each with its own stream and its own input and output buffers on
//! both sides, rotate as Mega-KV's buffers do (one being filled, one on the GPU, one being read
//! back), so the copy-in, kernels and copy-out of consecutive batches overlap.
//!
//! Ordering (the batch contract): a batch's kernels run after every earlier batch's kernels
//! (each stream waits for the `table_ready` event that the previous batch's last kernel recorded),
//! so the index moves from batch to batch exactly as with one batch at a time. Within a batch the
//! kernels run in contract order on one stream: searches see the table as before the batch, then
//! deletes, then inserts. Batches complete in submission order.
//!
//! Inserts are lossy by design: an insert that finds both candidate buckets full evicts, at most
//! [`MAX_DISPLACEMENTS`] times, and the entry still homeless after that is dropped (reported in
//! `displaced` and counted in `lossy`). `displaced` also holds the old location of an entry an
//! insert replaced, and the location of an insert that lost to a later insert of the same bucket
//! pair and signature in the batch (the later one is kept, as applying them in order would).
//!
//! Errors: an asynchronous CUDA failure (a kernel fault, a lost device) leaves the table in an
//! unknown state; it is reported as `IndexError::Device` by the call that observes it, and the
//! index should then be dropped.

mod device;
mod layout;

use std::collections::VecDeque;
use std::sync::Arc;

use cudarc::driver::{sys, CudaEvent, CudaStream};

use crate::index::{
    BatchIndex, IndexBatch, IndexError, IndexResults, TableShape, MAX_DISPLACEMENTS,
};
use device::{
    copy_in, copy_out, device_error, zero, zero_range, BatchArgs, Device, DeviceBuffer,
    PinnedBuffer, MAX_JOBS,
};
use layout::{BatchLayout, ScratchLayout};

/// Batches that may be in flight at once (triple buffering).
pub const STAGES: usize = 3;

/// `MAX_DISPLACEMENTS` in `kernels.cu`, which must match the contract's bound.
const KERNEL_MAX_DISPLACEMENTS: usize = 5;
const _: () = assert!(KERNEL_MAX_DISPLACEMENTS == MAX_DISPLACEMENTS);

/// Most host threads that pack and unpack one batch by default.
pub const MAX_HOST_THREADS: usize = 8;

fn default_host_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).clamp(1, MAX_HOST_THREADS)
}

/// Initial size of each stage's buffers (bytes); they grow to the largest batch seen.
const INITIAL_STAGE_BYTES: usize = 64 << 10;

/// Where the time of one batch went on the GPU, from events around each step (milliseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseTimes {
    pub copy_in: f32,
    pub search: f32,
    pub delete: f32,
    pub insert: f32,
    pub copy_out: f32,
}

impl PhaseTimes {
    pub fn kernels(&self) -> f32 {
        self.search + self.delete + self.insert
    }

    pub fn total(&self) -> f32 {
        self.copy_in + self.kernels() + self.copy_out
    }
}

/// Mega-KV's index on an NVIDIA GPU.
pub struct GpuIndex {
    // Field order is drop order: buffers go before the device (and its context).
    stages: Vec<Stage>,
    table: DeviceBuffer,
    table_ready: CudaEvent,
    control: Arc<CudaStream>,
    shape: TableShape,
    /// Results buffers handed back by the caller, reused by later batches.
    spare: Vec<IndexResults>,
    /// Threads that pack and unpack large batches (see [`GpuIndex::set_host_threads`]).
    host_threads: usize,
    /// The stage the next batch goes to.
    next: usize,
    /// Stages holding a submitted batch, oldest first. INVARIANT: stages enter in rotation order.
    in_flight: VecDeque<usize>,
    device: Device,
}

/// One of the rotating buffer sets.
struct Stage {
    stream: Arc<CudaStream>,
    host_in: PinnedBuffer,
    host_out: PinnedBuffer,
    device_in: DeviceBuffer,
    device_out: DeviceBuffer,
    /// GPU-only scratch of the insert passes ([`ScratchLayout`]).
    scratch: DeviceBuffer,
    /// Recorded after the copy-out; the host reads `host_out` and rewrites `host_in` only after it.
    done: CudaEvent,
    batch: Option<(IndexBatch, BatchLayout)>,
}

/// Events around each step of a timed batch.
struct Timers {
    events: [CudaEvent; 6],
}

impl GpuIndex {
    /// Opens an index of at least `slots` slots ([`TableShape::for_slots`]) on GPU 0.
    ///
    /// # Errors
    /// `IndexError::Unavailable` when no usable NVIDIA GPU, driver or NVRTC library is present;
    /// `IndexError::Unavailable` also when the table does not fit in the GPU's memory;
    /// `IndexError::InvalidBatch` for more than 2^35 slots.
    pub fn open(slots: usize) -> Result<Self, IndexError> {
        Self::open_on(0, slots)
    }

    /// As [`GpuIndex::open`], on GPU `ordinal`.
    pub fn open_on(ordinal: usize, slots: usize) -> Result<Self, IndexError> {
        if slots > MAX_SLOTS {
            return Err(IndexError::InvalidBatch(format!(
                "an index of {slots} slots is too large (at most {MAX_SLOTS})"
            )));
        }
        let shape = TableShape::for_slots(slots);
        let device = Device::open(ordinal)?;
        device.bind()?;
        let table_bytes = shape.slots() * 8;
        let table = DeviceBuffer::new(&device.context, table_bytes).map_err(|e| {
            IndexError::Unavailable(format!(
                "a table of {} slots ({table_bytes} bytes) does not fit on the GPU: {e}",
                shape.slots()
            ))
        })?;
        let control = device.new_stream()?;
        zero(&control, &table)?;
        let table_ready = device
            .context
            .new_event(None)
            .map_err(|e| device_error("event creation", e))?;
        table_ready
            .record(&control)
            .map_err(|e| device_error("event record", e))?;
        let mut stages = Vec::with_capacity(STAGES);
        for _ in 0..STAGES {
            stages.push(Stage::new(&device, INITIAL_STAGE_BYTES)?);
        }
        control
            .synchronize()
            .map_err(|e| device_error("table clear", e))?;
        Ok(GpuIndex {
            stages,
            table,
            table_ready,
            control,
            shape,
            spare: Vec::new(),
            host_threads: default_host_threads(),
            next: 0,
            in_flight: VecDeque::with_capacity(STAGES),
            device,
        })
    }

    /// Sets how many host threads copy a large batch (at least 2^17 operations) into and out of
    /// the transfer buffers; default [`MAX_HOST_THREADS`] or half the cores, whichever is fewer.
    /// Those copies, not the GPU, bound a large batch's time through [`BatchIndex`]; 1 keeps them
    /// on the calling thread.
    pub fn set_host_threads(&mut self, threads: usize) {
        self.host_threads = threads.max(1);
    }

    /// Threads that pack and unpack a large batch.
    pub fn host_threads(&self) -> usize {
        self.host_threads
    }

    /// The GPU's name as the driver reports it (e.g. "NVIDIA H100 80GB HBM3").
    pub fn device_name(&self) -> &str {
        &self.device.name
    }

    /// Runs one batch alone with events around each step and returns where the time went.
    /// Nothing may be in flight. Used by the benchmarks to separate kernel time from transfers.
    ///
    /// # Errors
    /// `IndexError::Busy` if batches are in flight; otherwise as [`BatchIndex::submit`].
    pub fn run_timed(
        &mut self,
        batch: IndexBatch,
    ) -> Result<(IndexBatch, IndexResults, PhaseTimes), IndexError> {
        if !self.in_flight.is_empty() {
            return Err(IndexError::Busy);
        }
        self.device.bind()?;
        let new_event = || {
            self.device
                .context
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| device_error("event creation", e))
        };
        let timers = Timers {
            events: [
                new_event()?,
                new_event()?,
                new_event()?,
                new_event()?,
                new_event()?,
                new_event()?,
            ],
        };
        self.enqueue(batch, Some(&timers))?;
        let (batch, results) = self
            .complete()?
            .expect("the timed batch was just submitted");
        let e = &timers.events;
        let span = |i: usize| {
            e[i].elapsed_ms(&e[i + 1])
                .map_err(|err| device_error("event timing", err))
        };
        let times = PhaseTimes {
            copy_in: span(0)?,
            search: span(1)?,
            delete: span(2)?,
            insert: span(3)?,
            copy_out: span(4)?,
        };
        Ok((batch, results, times))
    }

    fn enqueue(&mut self, batch: IndexBatch, timers: Option<&Timers>) -> Result<(), IndexError> {
        if self.in_flight.len() == STAGES {
            return Err(IndexError::Busy);
        }
        validate(&batch)?;
        let layout = BatchLayout::of(&batch);
        let scratch = ScratchLayout::new(layout.inserts);
        let stage = &mut self.stages[self.next];
        stage.reserve(&self.device, &layout, &scratch)?;
        layout.pack(
            &batch,
            stage.host_in.slice_mut(layout.in_bytes),
            self.host_threads,
        );

        let stream = &stage.stream;
        let mark = |i: usize| match timers {
            Some(t) => t.events[i]
                .record(stream)
                .map_err(|e| device_error("event record", e)),
            None => Ok(()),
        };
        mark(0)?;
        copy_in(stream, &stage.device_in, &stage.host_in, layout.in_bytes)?;
        // The kernels wait for every earlier batch's kernels; the copy-in above does not.
        stream
            .wait(&self.table_ready)
            .map_err(|e| device_error("stream wait", e))?;
        mark(1)?;
        let input = stage.device_in.pointer();
        let output = stage.device_out.pointer();
        let work = stage.scratch.pointer();
        let args = BatchArgs {
            table: self.table.pointer(),
            bucket_mask: self.shape.mask(),
            block_mask: self.shape.block_mask(),
            search_keys: input + layout.search_keys as u64,
            searches: layout.searches as u32,
            found: output + layout.found as u64,
            delete_keys: input + layout.delete_keys as u64,
            delete_locations: input + layout.delete_locations as u64,
            deletes: layout.deletes as u32,
            insert_keys: input + layout.insert_keys as u64,
            insert_locations: input + layout.insert_locations as u64,
            inserts: layout.inserts as u32,
            displaced: output + layout.displaced as u64,
            lossy: output + layout.lossy as u64,
            pending: work + scratch.pending as u64,
            claim_keys: work + scratch.claim_keys as u64,
            claim_jobs: work + scratch.claim_jobs as u64,
            claim_mask: (scratch.claims - 1) as u32,
        };
        let kernels = &self.device.kernels;
        kernels.search(stream, &args)?;
        mark(2)?;
        kernels.delete(stream, &args)?;
        mark(3)?;
        zero_range(stream, args.lossy, 4)?;
        if layout.inserts > 0 {
            zero_range(stream, args.claim_keys, scratch.bytes - scratch.claim_keys)?;
        }
        kernels.insert(stream, &args)?;
        self.table_ready
            .record(stream)
            .map_err(|e| device_error("event record", e))?;
        mark(4)?;
        copy_out(
            stream,
            &mut stage.host_out,
            &stage.device_out,
            layout.out_bytes,
        )?;
        mark(5)?;
        stage
            .done
            .record(stream)
            .map_err(|e| device_error("event record", e))?;
        stage.batch = Some((batch, layout));
        self.in_flight.push_back(self.next);
        self.next = (self.next + 1) % STAGES;
        Ok(())
    }
}

/// Compiles the kernels with NVRTC for compute capability `major.minor`, with no GPU needed, and
/// returns the PTX. Lets a machine without a GPU check the kernel source.
///
/// # Errors
/// `IndexError::Unavailable` without an NVRTC library; `IndexError::Device` with NVRTC's log when
/// the source does not compile.
pub fn compile_kernels(major: i32, minor: i32) -> Result<String, IndexError> {
    device::compile_checked(major, minor)
}

/// Most slots an index may have: 2^32 buckets.
const MAX_SLOTS: usize = 1 << 35;

/// Rejects what every backend rejects (location 0) and counts beyond the kernels' u32.
fn validate(batch: &IndexBatch) -> Result<(), IndexError> {
    batch.validate()?;
    for (what, count) in [
        ("searches", batch.searches.len()),
        ("deletes", batch.deletes.len()),
        ("inserts", batch.inserts.len()),
    ] {
        if count > MAX_JOBS {
            return Err(IndexError::InvalidBatch(format!(
                "{count} {what} in one batch; at most {MAX_JOBS}"
            )));
        }
    }
    Ok(())
}

impl Stage {
    fn new(device: &Device, bytes: usize) -> Result<Self, IndexError> {
        let context = &device.context;
        Ok(Stage {
            stream: device.new_stream()?,
            host_in: PinnedBuffer::new(context, bytes, true)?,
            host_out: PinnedBuffer::new(context, bytes, false)?,
            device_in: DeviceBuffer::new(context, bytes)?,
            device_out: DeviceBuffer::new(context, bytes)?,
            scratch: DeviceBuffer::new(context, bytes)?,
            done: context
                .new_event(None)
                .map_err(|e| device_error("event creation", e))?,
            batch: None,
        })
    }

    /// Grows the buffers to hold `layout` (to the next power of two). The stage must be idle.
    fn reserve(
        &mut self,
        device: &Device,
        layout: &BatchLayout,
        scratch: &ScratchLayout,
    ) -> Result<(), IndexError> {
        let context = &device.context;
        if self.host_in.bytes() < layout.in_bytes {
            let bytes = layout.in_bytes.next_power_of_two();
            self.host_in = PinnedBuffer::new(context, bytes, true)?;
            self.device_in = DeviceBuffer::new(context, bytes)?;
        }
        if self.host_out.bytes() < layout.out_bytes {
            let bytes = layout.out_bytes.next_power_of_two();
            self.host_out = PinnedBuffer::new(context, bytes, false)?;
            self.device_out = DeviceBuffer::new(context, bytes)?;
        }
        if self.scratch.bytes() < scratch.bytes {
            self.scratch = DeviceBuffer::new(context, scratch.bytes.next_power_of_two())?;
        }
        Ok(())
    }
}

impl BatchIndex for GpuIndex {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn slots(&self) -> usize {
        self.shape.slots()
    }

    fn max_in_flight(&self) -> usize {
        STAGES
    }

    fn max_batch_ops(&self) -> usize {
        MAX_JOBS
    }

    fn submit(&mut self, batch: IndexBatch) -> Result<(), IndexError> {
        self.device.bind()?;
        self.enqueue(batch, None)
    }

    fn complete(&mut self) -> Result<Option<(IndexBatch, IndexResults)>, IndexError> {
        let Some(&oldest) = self.in_flight.front() else {
            return Ok(None);
        };
        self.device.bind()?;
        let stage = &mut self.stages[oldest];
        stage
            .done
            .synchronize()
            .map_err(|e| device_error("batch", e))?;
        self.in_flight.pop_front();
        let (batch, layout) = stage
            .batch
            .take()
            .ok_or_else(|| IndexError::Device("an in-flight stage lost its batch".into()))?;
        let mut results = self.spare.pop().unwrap_or_default();
        layout.unpack(
            stage.host_out.slice(layout.out_bytes),
            &mut results,
            self.host_threads,
        );
        Ok(Some((batch, results)))
    }

    fn recycle(&mut self, results: IndexResults) {
        if self.spare.len() < STAGES {
            self.spare.push(results);
        }
    }

    fn clear(&mut self) -> Result<(), IndexError> {
        if !self.in_flight.is_empty() {
            return Err(IndexError::Busy);
        }
        self.device.bind()?;
        self.control
            .wait(&self.table_ready)
            .map_err(|e| device_error("stream wait", e))?;
        zero(&self.control, &self.table)?;
        self.table_ready
            .record(&self.control)
            .map_err(|e| device_error("event record", e))?;
        self.control
            .synchronize()
            .map_err(|e| device_error("table clear", e))
    }
}

impl Drop for GpuIndex {
    fn drop(&mut self) {
        // Nothing may still use the buffers when they are freed.
        let _ = self.device.bind();
        let _ = self.device.context.synchronize();
    }
}
