//! The CUDA device behind the GPU index: opening it, compiling the kernels, memory, launches.
//!
//! The driver (`libcuda`) and NVRTC (`libnvrtc`) are loaded when a device is opened, so a build
//! with the `gpu` feature runs on machines without CUDA and reports there, at open, why the GPU
//! index cannot be used. cudarc reports a missing library or symbol by panicking; [`Device::open`]
//! checks for the libraries first and turns any panic during start-up into an error.
//!
//! Thread safety: a [`Device`] and its buffers move between threads (the index is `Send`); every
//! entry point binds the context to the calling thread before using the driver.

use std::sync::Arc;

use cudarc::driver::{
    result, sys, CudaContext, CudaFunction, CudaStream, LaunchArgs, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{self, CompileOptions};

use crate::index::IndexError;

/// The kernels' CUDA C source (compiled at open by NVRTC).
pub(crate) const KERNEL_SOURCE: &str = include_str!("kernels.cu");

/// Threads per CUDA block in every launch (whole warps, so a tile of 8 never straddles blocks).
const BLOCK_THREADS: u32 = 256;

/// Lanes serving one job (one slot of a bucket each).
const TILE_LANES: u64 = 8;

/// Oldest GPU generation supported: Turing (`sm_75`), the oldest CUDA 13's NVRTC compiles for. The
/// kernels assume only what Volta and later guarantee (independent thread scheduling).
const MIN_COMPUTE_CAPABILITY: (i32, i32) = (7, 5);

pub(crate) fn device_error(what: &str, error: impl std::fmt::Debug) -> IndexError {
    IndexError::Device(format!("CUDA {what} failed: {error:?}"))
}

/// The four kernels of one batch, in launch order.
pub(crate) struct Kernels {
    search: CudaFunction,
    delete: CudaFunction,
    update: CudaFunction,
    elect: CudaFunction,
    place: CudaFunction,
}

/// An opened GPU with the index kernels loaded.
pub(crate) struct Device {
    pub context: Arc<CudaContext>,
    pub name: String,
    pub kernels: Kernels,
}

impl Device {
    /// Opens GPU `ordinal` and compiles the kernels for it.
    ///
    /// # Errors
    /// `IndexError::Unavailable` when there is no usable GPU: no driver library, no device, a GPU
    /// older than Turing, no NVRTC library, or kernels the driver cannot load.
    pub fn open(ordinal: usize) -> Result<Device, IndexError> {
        match std::panic::catch_unwind(|| Self::open_checked(ordinal)) {
            Ok(result) => result,
            Err(panic) => Err(IndexError::Unavailable(format!(
                "the CUDA libraries could not be used: {}",
                panic_message(&panic)
            ))),
        }
    }

    fn open_checked(ordinal: usize) -> Result<Device, IndexError> {
        // SAFETY: only tries to load the library; no symbol is called.
        if !unsafe { sys::is_culib_present() } {
            return Err(IndexError::Unavailable(
                "no NVIDIA driver library (libcuda.so) could be loaded: the GPU index needs an NVIDIA GPU and its driver"
                    .into(),
            ));
        }
        result::init().map_err(|e| {
            IndexError::Unavailable(format!("the NVIDIA driver did not initialise: {e:?}"))
        })?;
        let count = CudaContext::device_count().map_err(|e| device_error("device count", e))?;
        if ordinal >= count.max(0) as usize {
            return Err(IndexError::Unavailable(format!(
                "no CUDA device {ordinal}: the driver reports {count} device(s)"
            )));
        }
        // SAFETY: only tries to load the library; no symbol is called.
        if !unsafe { nvrtc::sys::is_culib_present() } {
            return Err(no_nvrtc());
        }
        let context = CudaContext::new(ordinal).map_err(|e| device_error("context creation", e))?;
        // The index orders its streams itself with events (see `GpuIndex`); cudarc's per-buffer
        // tracking would add waits it does not need.
        // SAFETY: no cudarc-tracked buffer or stream has been created in this context yet.
        unsafe { context.disable_event_tracking() };
        let name = context.name().map_err(|e| device_error("device name", e))?;
        let (major, minor) = context
            .compute_capability()
            .map_err(|e| device_error("compute capability", e))?;
        if (major, minor) < MIN_COMPUTE_CAPABILITY {
            return Err(IndexError::Unavailable(format!(
                "{name} has compute capability {major}.{minor}; the GPU index needs {}.{} (Turing) or newer",
                MIN_COMPUTE_CAPABILITY.0, MIN_COMPUTE_CAPABILITY.1
            )));
        }
        let ptx = compile(major, minor)?;
        let module = context.load_module(ptx).map_err(|e| {
            IndexError::Unavailable(format!(
                "the driver could not load the index kernels: {e:?}"
            ))
        })?;
        let function = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| device_error("kernel lookup", e))
        };
        let kernels = Kernels {
            search: function("index_search")?,
            delete: function("index_delete")?,
            update: function("index_update")?,
            elect: function("index_elect")?,
            place: function("index_place")?,
        };
        Ok(Device {
            context,
            name,
            kernels,
        })
    }

    pub fn bind(&self) -> Result<(), IndexError> {
        self.context
            .bind_to_thread()
            .map_err(|e| device_error("context bind", e))
    }

    pub fn new_stream(&self) -> Result<Arc<CudaStream>, IndexError> {
        self.context
            .new_stream()
            .map_err(|e| device_error("stream creation", e))
    }
}

/// As [`compile`], after checking that NVRTC can be loaded (and turning a panic into an error).
pub(crate) fn compile_checked(major: i32, minor: i32) -> Result<String, IndexError> {
    std::panic::catch_unwind(|| {
        // SAFETY: only tries to load the library; no symbol is called.
        if !unsafe { nvrtc::sys::is_culib_present() } {
            return Err(no_nvrtc());
        }
        compile(major, minor).map(|ptx| ptx.to_src())
    })
    .unwrap_or_else(|panic| {
        Err(IndexError::Unavailable(format!(
            "NVRTC could not be used: {}",
            panic_message(&panic)
        )))
    })
}

fn no_nvrtc() -> IndexError {
    IndexError::Unavailable(
        "no NVRTC library (libnvrtc.so, CUDA 13) could be loaded: install CUDA's NVRTC and put its directory on \
         LD_LIBRARY_PATH"
            .into(),
    )
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown failure")
}

/// Compiles the kernels to PTX for compute capability `major.minor`.
pub(crate) fn compile(major: i32, minor: i32) -> Result<nvrtc::Ptx, IndexError> {
    let options = CompileOptions {
        options: vec![
            format!("--gpu-architecture=compute_{major}{minor}"),
            "--std=c++17".into(),
        ],
        name: Some("shale_index.cu".into()),
        ..Default::default()
    };
    nvrtc::compile_ptx_with_opts(KERNEL_SOURCE, options).map_err(|e| match e {
        nvrtc::CompileError::CompileError { log, .. } => IndexError::Device(format!(
            "NVRTC rejected the index kernels:\n{}",
            log.to_string_lossy()
        )),
        other => IndexError::Device(format!("NVRTC failed: {other:?}")),
    })
}

/// Device memory, freed on drop.
pub(crate) struct DeviceBuffer {
    context: Arc<CudaContext>,
    pointer: sys::CUdeviceptr,
    bytes: usize,
}

impl DeviceBuffer {
    pub fn new(context: &Arc<CudaContext>, bytes: usize) -> Result<Self, IndexError> {
        context
            .bind_to_thread()
            .map_err(|e| device_error("context bind", e))?;
        // SAFETY: a plain allocation of at least one byte; freed once in Drop.
        let pointer = unsafe { result::malloc_sync(bytes.max(1)) }
            .map_err(|e| device_error(&format!("allocation of {bytes} bytes of GPU memory"), e))?;
        Ok(DeviceBuffer {
            context: context.clone(),
            pointer,
            bytes,
        })
    }

    pub fn pointer(&self) -> u64 {
        self.pointer
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // Work still queued on the buffer must finish before it is freed.
        let _ = self.context.bind_to_thread();
        let _ = self.context.synchronize();
        // SAFETY: allocated by malloc_sync in `new`, freed only here.
        let _ = unsafe { result::free_sync(self.pointer) };
    }
}

// SAFETY: a device address is valid from any thread once the context is bound (every user binds).
unsafe impl Send for DeviceBuffer {}

/// Page-locked host memory (copies to and from it are asynchronous DMA), freed on drop.
pub(crate) struct PinnedBuffer {
    context: Arc<CudaContext>,
    pointer: *mut u8,
    bytes: usize,
}

impl PinnedBuffer {
    /// `write_combined`: for buffers the host only writes (faster over the bus, very slow to read).
    pub fn new(
        context: &Arc<CudaContext>,
        bytes: usize,
        write_combined: bool,
    ) -> Result<Self, IndexError> {
        context
            .bind_to_thread()
            .map_err(|e| device_error("context bind", e))?;
        let flags = if write_combined {
            sys::CU_MEMHOSTALLOC_WRITECOMBINED
        } else {
            0
        };
        // SAFETY: a plain allocation of at least one byte; freed once in Drop.
        let pointer = unsafe { result::malloc_host(bytes.max(1), flags) }.map_err(|e| {
            device_error(&format!("allocation of {bytes} bytes of pinned memory"), e)
        })?;
        // Zeroed so that reading any part of it is defined.
        // SAFETY: the allocation holds at least `bytes` bytes.
        unsafe { std::ptr::write_bytes(pointer.cast::<u8>(), 0, bytes) };
        Ok(PinnedBuffer {
            context: context.clone(),
            pointer: pointer.cast(),
            bytes,
        })
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The first `len` bytes. The caller must know that no copy into them is in flight.
    pub fn slice(&self, len: usize) -> &[u8] {
        assert!(len <= self.bytes);
        // SAFETY: in bounds and initialised (zeroed at allocation); exclusive use is the caller's.
        unsafe { std::slice::from_raw_parts(self.pointer, len) }
    }

    /// The first `len` bytes. The caller must know that no copy from them is in flight.
    pub fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.bytes);
        // SAFETY: as in `slice`, and `&mut self` is exclusive on the host side.
        unsafe { std::slice::from_raw_parts_mut(self.pointer, len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.context.bind_to_thread();
        let _ = self.context.synchronize();
        // SAFETY: allocated by malloc_host in `new`, freed only here.
        let _ = unsafe { result::free_host(self.pointer.cast()) };
    }
}

// SAFETY: page-locked memory is ordinary host memory; `&mut self` guards host-side writes.
unsafe impl Send for PinnedBuffer {}

/// Copies `len` bytes from host `source` to `target` on `stream`.
pub(crate) fn copy_in(
    stream: &CudaStream,
    target: &DeviceBuffer,
    source: &PinnedBuffer,
    len: usize,
) -> Result<(), IndexError> {
    assert!(len <= target.bytes && len <= source.bytes);
    if len == 0 {
        return Ok(());
    }
    // SAFETY: both regions hold `len` bytes; the pinned source is not written again until the
    // stage's completion event has fired (the pipeline's invariant).
    unsafe { result::memcpy_htod_async(target.pointer, source.slice(len), stream.cu_stream()) }
        .map_err(|e| device_error("copy to the GPU", e))
}

/// Copies `len` bytes from `source` to host `target` on `stream`.
pub(crate) fn copy_out(
    stream: &CudaStream,
    target: &mut PinnedBuffer,
    source: &DeviceBuffer,
    len: usize,
) -> Result<(), IndexError> {
    assert!(len <= target.bytes && len <= source.bytes);
    if len == 0 {
        return Ok(());
    }
    // SAFETY: both regions hold `len` bytes; the host reads the target only after the stage's
    // completion event has fired.
    unsafe { result::memcpy_dtoh_async(target.slice_mut(len), source.pointer, stream.cu_stream()) }
        .map_err(|e| device_error("copy from the GPU", e))
}

/// Zeroes `bytes` bytes at `target` on `stream`.
pub(crate) fn zero(stream: &CudaStream, target: &DeviceBuffer) -> Result<(), IndexError> {
    zero_range(stream, target.pointer, target.bytes)
}

/// Zeroes `bytes` bytes at device address `pointer` on `stream`.
pub(crate) fn zero_range(
    stream: &CudaStream,
    pointer: u64,
    bytes: usize,
) -> Result<(), IndexError> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: the caller names a range inside one of its buffers.
    unsafe { result::memset_d8_async(pointer, 0, bytes, stream.cu_stream()) }
        .map_err(|e| device_error("memset", e))
}

/// Addresses and sizes one batch's kernels work on.
pub(crate) struct BatchArgs {
    pub table: u64,
    pub bucket_mask: u32,
    pub block_mask: u32,
    pub search_keys: u64,
    pub searches: u32,
    pub found: u64,
    pub delete_keys: u64,
    pub delete_locations: u64,
    pub deletes: u32,
    pub insert_keys: u64,
    pub insert_locations: u64,
    pub inserts: u32,
    pub displaced: u64,
    pub lossy: u64,
    pub pending: u64,
    pub claim_keys: u64,
    pub claim_jobs: u64,
    pub claim_mask: u32,
}

/// A grid of one tile per job.
fn launch_config(jobs: u32) -> LaunchConfig {
    threads_config(u64::from(jobs) * TILE_LANES)
}

/// A grid of `threads` threads.
fn threads_config(threads: u64) -> LaunchConfig {
    let blocks = threads.div_ceil(u64::from(BLOCK_THREADS));
    LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Largest job count of one kind in one batch (the kernels take counts as u32).
pub(crate) const MAX_JOBS: usize = u32::MAX as usize;

/// A launch of `kernel` with its first arguments, the table's: address, bucket mask, block mask.
fn table_launch<'a>(
    stream: &'a CudaStream,
    kernel: &'a CudaFunction,
    a: &'a BatchArgs,
) -> LaunchArgs<'a> {
    let mut launch = stream.launch_builder(kernel);
    launch.arg(&a.table).arg(&a.bucket_mask).arg(&a.block_mask);
    launch
}

/// As [`table_launch`], then the arguments both insert passes start with: keys, locations,
/// count, displaced, pending.
fn insert_launch<'a>(
    stream: &'a CudaStream,
    kernel: &'a CudaFunction,
    a: &'a BatchArgs,
) -> LaunchArgs<'a> {
    let mut launch = table_launch(stream, kernel, a);
    launch
        .arg(&a.insert_keys)
        .arg(&a.insert_locations)
        .arg(&a.inserts)
        .arg(&a.displaced)
        .arg(&a.pending);
    launch
}

impl Kernels {
    pub fn search(&self, stream: &CudaStream, a: &BatchArgs) -> Result<(), IndexError> {
        if a.searches == 0 {
            return Ok(());
        }
        let mut launch = table_launch(stream, &self.search, a);
        launch.arg(&a.search_keys).arg(&a.searches).arg(&a.found);
        // SAFETY: the argument list matches `index_search`; every address covers its count.
        unsafe { launch.launch(launch_config(a.searches)) }
            .map_err(|e| device_error("search launch", e))?;
        Ok(())
    }

    pub fn delete(&self, stream: &CudaStream, a: &BatchArgs) -> Result<(), IndexError> {
        if a.deletes == 0 {
            return Ok(());
        }
        let mut launch = table_launch(stream, &self.delete, a);
        launch
            .arg(&a.delete_keys)
            .arg(&a.delete_locations)
            .arg(&a.deletes);
        // SAFETY: the argument list matches `index_delete`; every address covers its count.
        unsafe { launch.launch(launch_config(a.deletes)) }
            .map_err(|e| device_error("delete launch", e))?;
        Ok(())
    }

    /// The insert passes: update keys present in place, elect one insert per (pair,
    /// signature) among the absent ones, place the elected. The claim table and the lossy count
    /// must be zero.
    pub fn insert(&self, stream: &CudaStream, a: &BatchArgs) -> Result<(), IndexError> {
        if a.inserts == 0 {
            return Ok(());
        }
        let mut launch = insert_launch(stream, &self.update, a);
        // SAFETY: the argument list matches `index_update`; every address covers its count.
        unsafe { launch.launch(launch_config(a.inserts)) }
            .map_err(|e| device_error("update launch", e))?;

        let mut launch = stream.launch_builder(&self.elect);
        launch
            .arg(&a.bucket_mask)
            .arg(&a.block_mask)
            .arg(&a.insert_keys)
            .arg(&a.inserts)
            .arg(&a.pending)
            .arg(&a.claim_keys)
            .arg(&a.claim_jobs)
            .arg(&a.claim_mask);
        // SAFETY: the argument list matches `index_elect`; the claim table holds claim_mask + 1
        // entries, more than the inserts.
        unsafe { launch.launch(threads_config(u64::from(a.inserts))) }
            .map_err(|e| device_error("elect launch", e))?;

        let mut launch = insert_launch(stream, &self.place, a);
        launch
            .arg(&a.claim_keys)
            .arg(&a.claim_jobs)
            .arg(&a.claim_mask)
            .arg(&a.lossy);
        // SAFETY: the argument list matches `index_place`; every address covers its count.
        unsafe { launch.launch(launch_config(a.inserts)) }
            .map_err(|e| device_error("place launch", e))?;
        Ok(())
    }
}
