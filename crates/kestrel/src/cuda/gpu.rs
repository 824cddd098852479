//! One CUDA device: its context and stream, the compiled modules, device and pinned
//! buffers, and kernel launches. Every driver call is checked; a failure becomes
//! [`Error::Cuda`] naming what was being done (the kernel, the copy, the allocation).
//!
//! The context is the device's primary context with cudarc's per-buffer event tracking
//! turned off: kestrel orders its work itself (one stream per pipeline slot, events
//! between them) and frees device memory with `cuMemFree`, which waits for the device.

use super::nvrtc;
use super::params::Params;
use crate::error::{Error, Result};
use crate::linalg::Real;
use cudarc::driver::{
    result as cu, sys, CudaContext, CudaFunction, CudaModule, CudaStream, DriverError,
};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// Turns a driver error into [`Error::Cuda`] naming `what` was being done. After a
/// kernel fault (an error that leaves the context unusable), the message names the
/// device and the fault is recorded, so that later calls on the device are refused.
pub(crate) fn ck<T>(r: std::result::Result<T, DriverError>, what: &str) -> Result<T> {
    r.map_err(|e| {
        let name = e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut msg = format!("{what}: {:?} {name}", e.0);
        if is_sticky(e.0) {
            let on = fault_current(&format!("{:?}", e.0)).unwrap_or_else(|| "the device".into());
            msg.push_str(&format!(
                " (a kernel fault on {on}: this call's results are lost, and the CUDA driver \
                 takes no more work on that device from this process until it restarts)"
            ));
        }
        Error::Cuda(msg)
    })
}

/// Whether `e` leaves the context unusable: every later call on it fails the same way
/// until the process ends (the driver documents these as sticky errors).
fn is_sticky(e: sys::CUresult) -> bool {
    use sys::CUresult::*;
    matches!(
        e,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// The contexts this process opened: the driver's handle, the device's label and what
/// a kernel fault on it was. Kept apart from the device registry so that an error met
/// while the registry is locked (in `open`) can still be attributed.
type Contexts = Vec<(usize, String, Arc<Mutex<Option<String>>>)>;
fn contexts() -> &'static Mutex<Contexts> {
    static C: OnceLock<Mutex<Contexts>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(Vec::new()))
}

/// Records the fault `code` on the calling thread's current context; its device's label.
fn fault_current(code: &str) -> Option<String> {
    let cur = cu::ctx::get_current().ok().flatten()? as usize;
    let all = contexts().lock().ok()?;
    let (_, label, fault) = all.iter().find(|(c, _, _)| *c == cur)?;
    if let Ok(mut f) = fault.lock() {
        f.get_or_insert_with(|| code.to_string());
    }
    Some(label.clone())
}

/// The kernels of one compiled module.
pub(crate) struct Module {
    _module: Arc<CudaModule>,
    /// NVRTC's messages (warnings) from the compilation; empty when loaded from disk.
    pub log: String,
    funcs: HashMap<String, CudaFunction>,
}

impl Module {
    /// The kernel `name` (one of those named when the module was made).
    pub fn get(&self, name: &str) -> Result<&CudaFunction> {
        self.funcs
            .get(name)
            .ok_or_else(|| Error::Cuda(format!("kernel {name} is not in the module")))
    }
}

/// A CUDA device with its context, a default stream and compiled modules.
pub(crate) struct Gpu {
    pub ordinal: usize,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub name: String,
    pub cc: (i32, i32),
    pub sms: usize,
    /// Modules by the hash of their name and source.
    modules: Mutex<HashMap<u64, Arc<Module>>>,
    /// The driver's code of a kernel fault on this context, once one happened: the
    /// driver then refuses all work on it until the process ends (neither a reset of
    /// the primary context nor a new context helps, measured on the H200 with driver
    /// 580), so every later call is refused at once, naming the fault.
    fault: Arc<Mutex<Option<String>>>,
}

fn registry() -> &'static Mutex<HashMap<usize, Arc<Gpu>>> {
    static R: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Why the driver or NVRTC cannot be used, checked without touching either library's
/// symbols (loading a missing library through cudarc would panic).
pub(crate) fn libraries_missing() -> Option<String> {
    // SAFETY: only tries to open the shared libraries.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Some("the CUDA driver library (libcuda) was not found".into());
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Some("the NVRTC library (libnvrtc) was not found".into());
    }
    None
}

/// Whether this process has opened device `ordinal` already.
pub(crate) fn is_open(ordinal: usize) -> bool {
    registry()
        .lock()
        .map(|r| r.contains_key(&ordinal))
        .unwrap_or(false)
}

/// The device `ordinal`, opened once per process.
pub(crate) fn gpu(ordinal: usize) -> Result<Arc<Gpu>> {
    let mut reg = registry()
        .lock()
        .map_err(|_| Error::Cuda("device registry poisoned".into()))?;
    if let Some(g) = reg.get(&ordinal) {
        if let Some(code) = g.fault() {
            return Err(Error::Cuda(format!(
                "{}: a kernel fault earlier in this process ({code}) left the device \
                 unusable to it: the CUDA driver takes no more work on it from this process \
                 until the process restarts (the CPU and other devices still work)",
                g.label()
            )));
        }
        return Ok(g.clone());
    }
    if let Some(why) = libraries_missing() {
        return Err(Error::Unsupported(why));
    }
    let g = Arc::new(open(ordinal)?);
    reg.insert(ordinal, g.clone());
    Ok(g)
}

fn open(ordinal: usize) -> Result<Gpu> {
    ck(cu::init(), "cuInit")?;
    let n = ck(cu::device::get_count(), "cuDeviceGetCount")?;
    if ordinal >= n.max(0) as usize {
        return Err(Error::Unsupported(format!(
            "there is no CUDA device {ordinal} ({n} found)"
        )));
    }
    let ctx = ck(CudaContext::new(ordinal), "creating the CUDA context")?;
    // SAFETY: kestrel synchronises its own streams (see the module documentation).
    unsafe { ctx.disable_event_tracking() };
    let stream = ck(ctx.new_stream(), "creating a stream")?;
    let name = ck(ctx.name(), "cuDeviceGetName")?;
    let cc = ck(ctx.compute_capability(), "reading the compute capability")?;
    let sms = ck(
        ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        "reading the multiprocessor count",
    )? as usize;
    let fault = Arc::new(Mutex::new(None));
    contexts()
        .lock()
        .map_err(|_| Error::Cuda("context table poisoned".into()))?
        .push((
            ctx.cu_ctx() as usize,
            format!("cuda:{ordinal} ({name})"),
            fault.clone(),
        ));
    Ok(Gpu {
        ordinal,
        ctx,
        stream,
        name,
        cc,
        sms,
        modules: Mutex::new(HashMap::new()),
        fault,
    })
}

impl Gpu {
    /// Binds the context to the calling thread (raw driver calls need it).
    pub fn bind(&self) -> Result<()> {
        ck(self.ctx.bind_to_thread(), "binding the CUDA context")
    }

    /// The driver's code of the kernel fault that made this context unusable, if any.
    pub fn fault(&self) -> Option<String> {
        self.fault.lock().ok().and_then(|f| f.clone())
    }

    /// The module compiled from the complete translation unit `src` (sizes, scalar type
    /// and constants are part of the source), with the kernels `names` looked up;
    /// compiled by NVRTC on first use, then cached in memory and on disk. `what` names
    /// the module in errors and cache files.
    pub fn module(&self, what: &str, src: &str, names: &[&str]) -> Result<Arc<Module>> {
        // The kernels looked up are part of the key: two callers may compile the same
        // source and ask for different kernels of it.
        let mut key = nvrtc::fnv1a(src.as_bytes(), nvrtc::fnv1a(what.as_bytes(), nvrtc::FNV0));
        for n in names {
            key = nvrtc::fnv1a(n.as_bytes(), nvrtc::fnv1a(b"\0", key));
        }
        let cached = || -> Result<Option<Arc<Module>>> {
            let mods = self
                .modules
                .lock()
                .map_err(|_| Error::Cuda("module cache poisoned".into()))?;
            Ok(mods.get(&key).cloned())
        };
        if let Some(k) = cached()? {
            return Ok(k);
        }
        // Compiled without holding the lock, so that different modules compile in
        // parallel; two threads racing for one module both compile, the first one wins.
        let img = nvrtc::compile(src, self.cc, what)?;
        self.bind()?;
        let module = ck(
            self.ctx
                .load_module(cudarc::nvrtc::Ptx::from_binary(img.bytes.clone())),
            &format!("loading module {what}"),
        )?;
        let mut funcs = HashMap::new();
        for &k in names {
            let f = ck(
                module.load_function(k),
                &format!("finding kernel {k} in module {what}"),
            )?;
            funcs.insert(k.to_string(), f);
        }
        let k = Arc::new(Module {
            _module: module,
            log: img.log,
            funcs,
        });
        let mut mods = self
            .modules
            .lock()
            .map_err(|_| Error::Cuda("module cache poisoned".into()))?;
        Ok(mods.entry(key).or_insert(k).clone())
    }

    /// The device as errors name it: `cuda:0 (NVIDIA H200)`.
    pub fn label(&self) -> String {
        format!("cuda:{} ({})", self.ordinal, self.name)
    }

    /// Free and total device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        ck(self.ctx.mem_get_info(), "cuMemGetInfo")
    }

    /// The device memory a call may plan with: the free memory, capped by the process's
    /// budget ([`set_memory_budget`](super::set_memory_budget)).
    pub fn usable_memory(&self) -> Result<usize> {
        let free = self.mem_info()?.0;
        Ok(super::memory_budget().map_or(free, |b| b.min(free)))
    }
}

/// Device memory of `len` values of `T`, freed on drop (`cuMemFree` waits for the device),
/// or a caller's device memory borrowed for one call (never freed here).
pub(crate) struct DevBuf<T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    ctx: Arc<CudaContext>,
    owned: bool,
    _t: std::marker::PhantomData<T>,
}

// SAFETY: a device pointer may be used from any thread bound to its context.
unsafe impl<T> Send for DevBuf<T> {}
unsafe impl<T> Sync for DevBuf<T> {}

impl<T> DevBuf<T> {
    pub fn new(gpu: &Gpu, len: usize, what: &str) -> Result<Self> {
        gpu.bind()?;
        let bytes = len
            .max(1)
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::TooLarge {
                what: format!("{what} on {}", gpu.label()),
                bytes: len as u128 * std::mem::size_of::<T>() as u128,
                limit: "more than any device can address".into(),
            })?;
        // SAFETY: a plain allocation; the context is bound.
        let ptr = match unsafe { cu::malloc_sync(bytes) } {
            Ok(p) => p,
            // Not sticky: the context stays usable, so the error is the request's (exit
            // status 2), naming the device and what it has.
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = gpu.mem_info().unwrap_or((0, 0));
                return Err(Error::TooLarge {
                    what: format!("{what} on {}", gpu.label()),
                    bytes: bytes as u128,
                    limit: format!(
                        "more than the device's free memory ({:.1} of {:.1} GB free)",
                        free as f64 / 1e9,
                        total as f64 / 1e9
                    ),
                });
            }
            Err(e) => {
                return ck(
                    Err(e),
                    &format!("allocating {bytes} bytes for {what} on {}", gpu.label()),
                )
            }
        };
        Ok(DevBuf {
            ptr,
            len,
            ctx: gpu.ctx.clone(),
            owned: true,
            _t: std::marker::PhantomData,
        })
    }

    /// `len` values of `T` at `ptr`, device memory owned by someone else (an array of
    /// PyTorch or CuPy handed over through DLPack), used in place and not freed on drop.
    ///
    /// # Safety
    /// `ptr` must point to at least `len` values of `T` in memory of `gpu`'s context,
    /// valid and not used by anyone else for as long as the buffer is in use.
    pub unsafe fn borrowed(gpu: &Gpu, ptr: u64, len: usize) -> Self {
        DevBuf {
            ptr,
            len,
            ctx: gpu.ctx.clone(),
            owned: false,
            _t: std::marker::PhantomData,
        }
    }
    /// A buffer holding a copy of `v`, queued on `stream` (at least one element, so that
    /// an empty slice still gives a valid pointer).
    pub fn from_slice(gpu: &Gpu, stream: &CudaStream, v: &[T], what: &str) -> Result<Self> {
        let d = DevBuf::new(gpu, v.len().max(1), what)?;
        if !v.is_empty() {
            htod(stream, v, &d, 0, what)?;
        }
        Ok(d)
    }
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// Pointer to element `i`.
    pub fn at(&self, i: usize) -> u64 {
        self.ptr + (i * std::mem::size_of::<T>()) as u64
    }
    pub fn len(&self) -> usize {
        self.len
    }
    /// Fills with all-ones bytes (NaN for floats), so that unwritten elements show.
    pub fn poison(&self, stream: &CudaStream) -> Result<()> {
        // SAFETY: the range is inside the allocation.
        ck(
            unsafe {
                cu::memset_d8_async(
                    self.ptr,
                    0xff,
                    self.len * std::mem::size_of::<T>(),
                    stream.cu_stream(),
                )
            },
            "poisoning a buffer",
        )
    }
}

impl<T> Drop for DevBuf<T> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by cuMemAlloc, freed once.
        let _ = unsafe { cu::free_sync(self.ptr) };
    }
}

/// Page-locked host memory, so that copies are truly asynchronous.
pub(crate) struct Pinned<T> {
    ptr: *mut T,
    len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: plain host memory owned by this value.
unsafe impl<T: Send> Send for Pinned<T> {}
unsafe impl<T: Sync> Sync for Pinned<T> {}

impl<T: Copy + Default> Pinned<T> {
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        gpu.bind()?;
        let bytes = len.max(1) * std::mem::size_of::<T>();
        // SAFETY: a plain page-locked allocation, then initialised below.
        let ptr = ck(
            unsafe { cu::malloc_host(bytes, 0) },
            &format!("allocating {bytes} bytes of pinned host memory"),
        )? as *mut T;
        // SAFETY: the allocation holds `len` values and is exclusively ours.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }.fill(T::default());
        Ok(Pinned {
            ptr,
            len,
            ctx: gpu.ctx.clone(),
        })
    }
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: initialised in `new`, `len` values.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> Drop for Pinned<T> {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by cuMemHostAlloc, freed once.
        let _ = unsafe { cu::free_host(self.ptr as *mut c_void) };
    }
}

/// Checks that a copy of `n` values at element offset `at` stays inside a device buffer
/// of `len` values (the check every copy makes before its unsafe call).
pub(crate) fn check_span(len: usize, at: usize, n: usize, what: &str) -> Result<()> {
    match at.checked_add(n) {
        Some(end) if end <= len => Ok(()),
        _ => Err(Error::Cuda(format!(
            "{what}: copy of {n} values at {at} past the end of a buffer of {len}"
        ))),
    }
}

/// Asynchronous host-to-device copy of `src` to `dst` (element offset `at`).
pub(crate) fn htod<T>(
    stream: &CudaStream,
    src: &[T],
    dst: &DevBuf<T>,
    at: usize,
    what: &str,
) -> Result<()> {
    check_span(dst.len(), at, src.len(), what)?;
    // SAFETY: bounds checked; the caller keeps `src` alive until the stream passes.
    ck(
        unsafe { cu::memcpy_htod_async(dst.at(at), src, stream.cu_stream()) },
        what,
    )
}

/// Asynchronous device-to-host copy of `dst.len()` values from `src` (element offset `at`).
pub(crate) fn dtoh<T>(
    stream: &CudaStream,
    src: &DevBuf<T>,
    at: usize,
    dst: &mut [T],
    what: &str,
) -> Result<()> {
    check_span(src.len(), at, dst.len(), what)?;
    // SAFETY: bounds checked; the caller keeps `dst` alive until the stream passes.
    ck(
        unsafe { cu::memcpy_dtoh_async(dst, src.at(at), stream.cu_stream()) },
        what,
    )
}

/// Asynchronous copy of `bytes` bytes from device pointer `src.1` of device `src.0` to
/// `dst.1` of device `dst.0`, ordered on `stream` (a stream of the destination device):
/// peer to peer where the two devices allow it, else staged by the driver; a plain
/// device-to-device copy when both are the same device. The caller orders the source's
/// writes before the copy (e.g. by synchronising the source's stream).
pub(crate) fn copy_between(
    dst: (&Gpu, sys::CUdeviceptr),
    src: (&Gpu, sys::CUdeviceptr),
    bytes: usize,
    stream: &CudaStream,
    what: &str,
) -> Result<()> {
    dst.0.bind()?;
    if dst.0.ordinal != src.0.ordinal {
        enable_peer(dst.0, src.0);
    }
    // SAFETY: the caller passes live allocations of at least `bytes` bytes each.
    let r = unsafe {
        if dst.0.ordinal == src.0.ordinal {
            cu::memcpy_dtod_async(dst.1, src.1, bytes, stream.cu_stream())
        } else {
            cu::memcpy_peer_async(
                dst.0.ctx.cu_ctx(),
                dst.1,
                src.0.ctx.cu_ctx(),
                src.1,
                bytes,
                stream.cu_stream(),
            )
        }
    };
    ck(r, what)
}

/// Lets `dst`'s context reach `src`'s memory directly (once per pair of devices), so
/// that copies between them go peer to peer instead of through the host; where the
/// devices cannot, nothing changes (the driver stages such copies).
fn enable_peer(dst: &Gpu, src: &Gpu) {
    static DONE: OnceLock<Mutex<std::collections::HashSet<(usize, usize)>>> = OnceLock::new();
    let done = DONE.get_or_init(|| Mutex::new(std::collections::HashSet::new()));
    let Ok(mut done) = done.lock() else { return };
    if !done.insert((dst.ordinal, src.ordinal)) {
        return;
    }
    if dst.bind().is_err() {
        return;
    }
    // SAFETY: both contexts are live (held by their `Gpu`s for the process); an error
    // (already enabled, not supported) leaves copies working through the driver.
    let _ = unsafe { sys::cuCtxEnablePeerAccess(src.ctx.cu_ctx(), 0) };
}

/// A kernel argument: its value, kept alive until the launch.
// The scalar kinds a kernel parameter can have; a family uses those its kernels take.
#[allow(dead_code)]
#[derive(Clone, Copy)]
pub(crate) enum Arg<'a> {
    /// A device pointer.
    Ptr(u64),
    I32(i32),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    /// A by-value struct, as its bytes.
    Bytes(&'a [u8]),
}

impl Arg<'_> {
    /// The argument's bits in a 64-bit slot (a by-value struct is passed by pointer).
    fn slot(&self) -> u64 {
        match self {
            Arg::Ptr(p) | Arg::U64(p) => *p,
            Arg::I32(v) => *v as u32 as u64,
            Arg::U32(v) => u64::from(*v),
            Arg::F32(v) => u64::from(v.to_bits()),
            Arg::F64(v) => v.to_bits(),
            Arg::Bytes(_) => 0,
        }
    }
}

/// Launches kernel `name` of `k` on `stream` over `grid` blocks of `block` threads with
/// the parameters `p` (a struct of [`params!`](crate::cuda::params) that names `name`
/// among its kernels), checking the launch.
pub(crate) fn launch<'a, P: Params<'a>>(
    stream: &CudaStream,
    k: &Module,
    name: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    p: &P,
) -> Result<()> {
    launch_ex(stream, k, name, grid, block, 0, p, false)
}

/// Lets kernel `name` of `k` use `bytes` of dynamic shared memory (beyond the 48 KB a
/// launch may ask for without it).
pub(crate) fn allow_dynamic_shared(k: &Module, name: &str, bytes: usize) -> Result<()> {
    let f = k.get(name)?;
    // SAFETY: a function of a loaded module and a documented attribute.
    let r = unsafe {
        cu::function::set_function_attribute(
            f.cu_function(),
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
    };
    ck(
        r,
        &format!("allowing kernel {name} {bytes} bytes of dynamic shared memory"),
    )
}

/// [`launch`] with `shared` bytes of dynamic shared memory, and as a programmatic
/// dependent launch where `programmatic`: the
/// kernel may start while the kernel before it on `stream` still runs (once every block
/// of that one has executed `griddepcontrol.launch_dependents` or exited), so it must
/// execute `griddepcontrol.wait` before it reads what that kernel writes or writes what
/// that kernel reads. Compute capability 9.0 and later; where the operation before it on
/// the stream is not a kernel, the launch waits for it as any launch does.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_ex<'a, P: Params<'a>>(
    stream: &CudaStream,
    k: &Module,
    name: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    p: &P,
    programmatic: bool,
) -> Result<()> {
    if !P::KERNELS.iter().any(|k| super::params::names(k, name)) {
        return Err(Error::Cuda(format!(
            "kernel {name} launched with the parameters of {}",
            P::KERNELS.join(", ")
        )));
    }
    launch_args(
        stream,
        k,
        name,
        grid,
        block,
        shared,
        &p.args(stream),
        programmatic,
    )
}

/// [`launch_ex`] with the arguments in order.
#[allow(clippy::too_many_arguments)]
fn launch_args(
    stream: &CudaStream,
    k: &Module,
    name: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    args: &[Arg<'_>],
    programmatic: bool,
) -> Result<()> {
    let f = k.get(name)?;
    let mut vals: Vec<u64> = args.iter().map(Arg::slot).collect();
    let mut ptrs: Vec<*mut c_void> = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        match a {
            Arg::Bytes(b) => ptrs.push(b.as_ptr() as *mut c_void),
            // Little-endian: the low 4 bytes of the u64 slot hold a 4-byte argument.
            _ => ptrs.push(&mut vals[i] as *mut u64 as *mut c_void),
        }
    }
    if grid.0 == 0 {
        return Ok(());
    }
    if programmatic {
        // SAFETY: a zeroed attribute is valid; the field set is the one its id names.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let cfg = sys::CUlaunchConfig {
            gridDimX: grid.0,
            gridDimY: grid.1,
            gridDimZ: grid.2,
            blockDimX: block.0,
            blockDimY: block.1,
            blockDimZ: block.2,
            sharedMemBytes: shared,
            hStream: stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: as below; `cfg` and `attr` outlive the call.
        let r = unsafe {
            sys::cuLaunchKernelEx(
                &cfg,
                f.cu_function(),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result();
        return ck(r, &format!("launching kernel {name}"));
    }
    // SAFETY: the argument list matches the kernel's signature (the callers in this
    // families pass them in the order of their kernels' parameters); values outlive the call.
    let r = unsafe {
        cu::launch_kernel(
            f.cu_function(),
            grid,
            block,
            shared,
            stream.cu_stream(),
            &mut ptrs,
        )
    };
    ck(r, &format!("launching kernel {name}"))
}

/// Blocks of `block` threads covering `n` threads.
pub(crate) fn grid_for(n: usize, block: u32) -> (u32, u32, u32) {
    (n.div_ceil(block as usize) as u32, 1, 1)
}

/// The bytes of a slice of scalars (for a by-value struct argument).
pub(crate) fn as_bytes<T: Real>(v: &[T]) -> &[u8] {
    // SAFETY: f32/f64 have no padding and any byte pattern is readable as u8.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// Synchronises `stream`, naming what was waited for.
pub(crate) fn sync(stream: &CudaStream, what: &str) -> Result<()> {
    ck(stream.synchronize(), what)
}

#[cfg(test)]
mod tests {
    use super::Arg;

    #[test]
    fn arguments_keep_their_bits_in_the_low_bytes() {
        // The driver reads a 4-byte argument from the first 4 bytes of its slot.
        let low4 = |a: Arg| a.slot().to_le_bytes()[..4].to_vec();
        assert_eq!(low4(Arg::I32(-2)), (-2i32).to_le_bytes());
        assert_eq!(low4(Arg::U32(7)), 7u32.to_le_bytes());
        assert_eq!(low4(Arg::F32(1.5)), 1.5f32.to_le_bytes());
        assert_eq!(
            Arg::F64(-0.25).slot().to_le_bytes(),
            (-0.25f64).to_le_bytes()
        );
        assert_eq!(Arg::U64(u64::MAX - 1).slot(), u64::MAX - 1);
        assert_eq!(Arg::Ptr(0xdead_beef_0000).slot(), 0xdead_beef_0000);
    }
}
