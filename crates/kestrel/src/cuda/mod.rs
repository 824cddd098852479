//! The GPU runtime: everything an estimator family needs to run its kernels on an NVIDIA
//! GPU, and nothing that names an estimator.
//!
//! - *Devices* (`gpu` / `Gpu`): the CUDA driver and NVRTC are loaded at run
//!   time through `cudarc`, so the crate builds and every CPU path runs on machines
//!   without CUDA; [`available`] says why a GPU cannot be used instead of failing later.
//!   One context and one default stream per device, opened once per process, with
//!   cudarc's per-buffer event tracking off: families order their work on their own
//!   streams and events.
//! - *Compilation* (`nvrtc.rs`, `Gpu::module`): a family hands a complete translation
//!   unit (its `.cu` files with its sizes, scalar type and constants written into the
//!   source) and the names of its kernels; it is compiled by NVRTC for the device's own
//!   architecture and cached in memory and on disk, keyed by a hash of the source.
//! - *Memory and launches* (`gpu.rs`): device buffers (`DevBuf`, freed on drop, poisoned
//!   with NaN on request so that unwritten outputs show in tests), page-locked host
//!   memory (`Pinned`), checked asynchronous copies and kernel launches (`launch` with a
//!   typed parameter struct, `params.rs`), copies between two devices (`copy_between`:
//!   peer to peer where allowed); every failure is an [`Error::Cuda`] naming what was being done.
//! - *Transfers* (`transfer.rs`): host copies through two page-locked staging buffers
//!   per device, the CPU side spread over all cores beside the DMA.
//! - *Chunks* (`chunks.rs`): the out-of-core pipeline of any "map over independent
//!   items" family: items in chunks that fit a memory budget, one or two buffer sets on
//!   their own streams so that one chunk's copies overlap the other's kernels.
//! - *Timing* (`EventTimer`): kernel time by CUDA events, for benchmarks.
//!
//! # Sharing a GPU
//!
//! All work of a process on one device goes through one context; each call of a family
//! (a batched filter, a tracker) uses its own streams, so calls from several threads
//! run side by side on the GPU. A batched call budgets its device memory from
//! `CudaOptions::memory_budget` (default: 80% of the memory free when it starts, capped
//! by [`set_memory_budget`]: two threads starting large batches at once should each set
//! a budget). Compiled kernels
//! are cached in memory per device and on disk: [`set_cache_dir`], else
//! `$KESTREL_CACHE_DIR`, `$XDG_CACHE_HOME/kestrel` or `~/.cache/kestrel`
//! (`KESTREL_CUDA_CACHE=0` turns the disk cache off).
//!
//! # Kernel faults
//!
//! A kernel fault (an illegal address, a trap) leaves the device unusable to the
//! process: the CUDA driver answers every later call on it with the same error until the
//! process ends (resetting the primary context and creating a new context were both
//! tried on the H200 with driver 580: each still answers the fault). The call that meets
//! the fault returns an [`Error::Cuda`] naming the device and the fault; every later
//! call on that device is refused at once with the same cause, without touching the
//! driver, so the process goes on: [`available`] says why, `Device::auto` chooses the
//! CPU, and the CPU and other devices work. No output of the faulted call is written.
//!
//! # Adding a family
//!
//! A family keeps its API, CPU path, launcher (`FAMILY/cuda.rs` or `FAMILY/cuda/`) and
//! kernels (`FAMILY/kernels/*.cu`) in its own folder. Its launcher builds the source
//! (`#define`s + `include_str!` of its `.cu` files), gets the device with `gpu(ordinal)`,
//! the module with `Gpu::module`, allocates `DevBuf`s, declares its kernels' parameters
//! with `params!` (`FAMILY/cuda/params.rs`, checked against the `.cu` files by a unit
//! test), launches with `launch`, and wraps
//! its public entry points in `catch`. The Kalman family (`kalman/cuda/`) is the worked
//! example of chunks, staging and graphs; `parallel/cuda/` of per-level scans.

mod chunks;
mod gpu;
pub(crate) mod nvrtc;
mod params;
mod transfer;

pub(crate) use chunks::{drive, plan, streams, ChunkSlot};
pub(crate) use gpu::{
    allow_dynamic_shared, as_bytes, ck, copy_between, dtoh, gpu, grid_for, htod, is_open, launch,
    launch_ex, sync, Arg, DevBuf, Gpu, Module, Pinned,
};
pub use nvrtc::set_cache_dir;
#[cfg(test)]
pub(crate) use params::{assert_matches, check, Signature};
pub(crate) use params::{group, params, Addr, Buf, Buffer, Field, Kind, Params};

/// The device code every family's kernels share (`kernels/kestrel.cuh`: the one
/// Cholesky factorisation and its policies), placed after a family's prelude (which
/// defines `real`) and before the family's own headers.
pub const DEVICE_HEADER: &str = include_str!("kernels/kestrel.cuh");
pub(crate) use transfer::{download, upload};

/// `$body` with the type `$d` naming the device precision of the host type `$t` (`f64`
/// for `f64`, `f32` for every other), so that one generic path is written once for both
/// of the kernels' precisions.
macro_rules! by_precision {
    ($t:ty, $d:ident => $body:expr) => {
        if <$t as $crate::linalg::Real>::NAME == "f64" {
            type $d = f64;
            $body
        } else {
            type $d = f32;
            $body
        }
    };
}
pub(crate) use by_precision;

use crate::error::{Error, Result};
use cudarc::driver::{CudaEvent, CudaStream};

/// The process's cap on the device memory one call plans with (0: none).
static MEMORY_BUDGET: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Caps the device memory that each GPU call of this process plans with, in bytes
/// (`None`: no cap, the default). A call budgets a share of the memory free when it
/// starts (the batched Kalman filter 80%, the parallel-in-time scans 70%, the particle
/// filter and track-before-detect all of it); with a cap, the share of
/// `min(free, cap)`. Threads that share a GPU set a cap so that their calls fit side by
/// side; a larger job is then processed in chunks (the batched filter and smoother) or
/// refused with a message naming its size. A per-call
/// `kalman::cuda::CudaOptions::memory_budget` takes precedence.
pub fn set_memory_budget(bytes: Option<usize>) {
    MEMORY_BUDGET.store(bytes.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
}

/// The cap set by [`set_memory_budget`].
pub fn memory_budget() -> Option<usize> {
    match MEMORY_BUDGET.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        b => Some(b),
    }
}

/// Runs `f`, turning a panic inside the CUDA libraries into [`Error::Cuda`].
pub(crate) fn catch<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    // cudarc panics when a library symbol is missing; keep that from unwinding through
    // callers that expect a Result.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Cuda(format!("the CUDA libraries failed: {msg}")))
        }
    }
}

/// `Ok` when the CUDA driver and NVRTC are loadable and device `ordinal` exists and
/// opens; else the reason.
pub fn available(ordinal: usize) -> std::result::Result<(), String> {
    if let Some(why) = gpu::libraries_missing() {
        return Err(why);
    }
    catch(|| gpu::gpu(ordinal).map(|_| ())).map_err(|e| e.to_string())
}

/// `Ok` when the CUDA driver and NVRTC load and device `ordinal` exists, checked without
/// creating a context (which costs a tenth of a second or more); else the reason.
pub fn available_without_opening(ordinal: usize) -> std::result::Result<(), String> {
    if let Some(why) = gpu::libraries_missing() {
        return Err(why);
    }
    let n = device_count();
    if ordinal >= n {
        return Err(format!("there is no CUDA device {ordinal} ({n} found)"));
    }
    Ok(())
}

/// The number of CUDA devices (0 when the driver is missing).
pub fn device_count() -> usize {
    if gpu::libraries_missing().is_some() {
        return 0;
    }
    catch(|| {
        ck(cudarc::driver::result::init(), "cuInit")?;
        ck(
            cudarc::driver::result::device::get_count(),
            "cuDeviceGetCount",
        )
    })
    .map(|n| n.max(0) as usize)
    .unwrap_or(0)
}

/// The compute capability of device `ordinal`, read without creating a context (cheap
/// next to opening the device).
pub fn compute_capability(ordinal: usize) -> Result<(i32, i32)> {
    if let Some(why) = gpu::libraries_missing() {
        return Err(Error::DeviceUnavailable(why));
    }
    catch(|| {
        use cudarc::driver::{result, sys::CUdevice_attribute as A};
        ck(result::init(), "cuInit")?;
        let dev = ck(result::device::get(ordinal as i32), "cuDeviceGet")?;
        // SAFETY: plain attribute queries of a valid device handle.
        let major = ck(
            unsafe {
                result::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            },
            "reading the compute capability",
        )?;
        let minor = ck(
            unsafe {
                result::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            },
            "reading the compute capability",
        )?;
        Ok((major, minor))
    })
}

/// The kernel of [`provoke_kernel_fault`].
const FAULT: &str =
    "extern \"C\" __global__ void kestrel_fault(volatile int *p) { p[threadIdx.x] = 1; }";

/// Runs a kernel that writes through an invalid pointer on device `ordinal` and waits
/// for it: the kernel fault that tests of what follows one need. It returns the fault's
/// error; the device is then unusable to the process (see "Kernel faults" above).
#[doc(hidden)]
pub fn provoke_kernel_fault(ordinal: usize) -> Result<()> {
    catch(|| {
        let g = gpu::gpu(ordinal)?;
        let m = g.module("kernel fault", FAULT, &["kestrel_fault"])?;
        // Address 16: never mapped (the first page is kept unmapped on every platform).
        let p = Fault { p: Arg::Ptr(16) };
        launch(&g.stream, &m, "kestrel_fault", (1, 1, 1), (32, 1, 1), &p)?;
        sync(&g.stream, "waiting for the faulting kernel")
    })
}

params! {
    /// `kestrel_fault`'s parameter: the address it writes through.
    struct Fault<'a> for ["kestrel_fault"] { p: Arg<'a> }
}

/// The name of device `ordinal`.
pub fn device_name(ordinal: usize) -> Result<String> {
    catch(|| Ok(gpu::gpu(ordinal)?.name.clone()))
}

/// The compute capability `(major, minor)` and multiprocessor count of device `ordinal`.
pub fn device_info(ordinal: usize) -> Result<((i32, i32), usize)> {
    catch(|| {
        let g = gpu::gpu(ordinal)?;
        Ok((g.cc, g.sms))
    })
}

/// The memory of device `ordinal` a call may plan with (its free memory, capped by
/// [`set_memory_budget`]), in bytes.
pub fn usable_memory(ordinal: usize) -> Result<usize> {
    catch(|| gpu::gpu(ordinal)?.usable_memory())
}

/// The bus between host and device `ordinal`, measured: `(host to device, device to
/// host)` in bytes per second for copies of `bytes` between page-locked host memory and
/// the device (median of 5 after one warm-up). The ceiling of every host-to-host figure.
#[doc(hidden)]
pub fn bus_bandwidth(ordinal: usize, bytes: usize) -> Result<(f64, f64)> {
    catch(|| {
        let g = gpu::gpu(ordinal)?;
        let n = bytes / 4;
        let mut host = Pinned::<f32>::new(&g, n)?;
        let dev = DevBuf::<f32>::new(&g, n, "bus bandwidth buffer")?;
        let timer = EventTimer::new(&g)?;
        let mut time = |up: bool| -> Result<f64> {
            let mut t = Vec::new();
            for i in 0..6 {
                timer.start(&g.stream)?;
                if up {
                    htod(&g.stream, host.as_slice(), &dev, 0, "timing the bus")?;
                } else {
                    dtoh(&g.stream, &dev, 0, host.as_mut_slice(), "timing the bus")?;
                }
                timer.stop(&g.stream)?;
                let ms = timer.elapsed_ms()? as f64;
                if i > 0 {
                    t.push(ms);
                }
            }
            t.sort_by(f64::total_cmp);
            Ok((n * 4) as f64 / (t[t.len() / 2] * 1e-3))
        };
        Ok((time(true)?, time(false)?))
    })
}

/// Measured rates of copying `bytes` bytes from device `src` to device `dst`, in GB/s
/// (medians of `repeats` after one warm-up): `(direct, through_host)`, the first by
/// `copy_between` (peer to peer where the devices allow it), the second through pageable
/// host memory (device to host, then host to device), as a family without peer copies
/// would move data. For benchmarks of work split over several devices.
pub fn copy_rates(dst: usize, src: usize, bytes: usize, repeats: usize) -> Result<(f64, f64)> {
    catch(|| {
        let (gd, gs) = (gpu::gpu(dst)?, gpu::gpu(src)?);
        let n = bytes.div_ceil(4).max(1);
        let a = DevBuf::<f32>::new(&gs, n, "the copy's source")?;
        let b = DevBuf::<f32>::new(&gd, n, "the copy's destination")?;
        let mut host = vec![0f32; n];
        let (mut direct, mut via) = (Vec::new(), Vec::new());
        for i in 0..=repeats.max(1) {
            sync(&gs.stream, "waiting for the source device")?;
            let t = std::time::Instant::now();
            copy_between(
                (&gd, b.ptr()),
                (&gs, a.ptr()),
                n * 4,
                &gd.stream,
                "a device copy",
            )?;
            sync(&gd.stream, "a device copy")?;
            let d = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            dtoh(&gs.stream, &a, 0, &mut host, "a copy to the host")?;
            sync(&gs.stream, "a copy to the host")?;
            htod(&gd.stream, &host, &b, 0, "a copy from the host")?;
            sync(&gd.stream, "a copy from the host")?;
            let h = t.elapsed().as_secs_f64();
            if i > 0 {
                direct.push(d);
                via.push(h);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let gb = (n * 4) as f64 / 1e9;
        Ok((gb / median(&mut direct), gb / median(&mut via)))
    })
}

/// Kernel time on a stream by a pair of CUDA events.
pub(crate) struct EventTimer {
    start: CudaEvent,
    stop: CudaEvent,
}

impl EventTimer {
    /// Two timing events on `g`'s context.
    pub fn new(g: &Gpu) -> Result<Self> {
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        Ok(EventTimer {
            start: ck(g.ctx.new_event(flags), "creating an event")?,
            stop: ck(g.ctx.new_event(flags), "creating an event")?,
        })
    }
    /// Records the start on `stream`.
    pub fn start(&self, stream: &CudaStream) -> Result<()> {
        ck(self.start.record(stream), "recording an event")
    }
    /// Records the stop on `stream`.
    pub fn stop(&self, stream: &CudaStream) -> Result<()> {
        ck(self.stop.record(stream), "recording an event")
    }
    /// Milliseconds between start and stop (waits for the stop).
    pub fn elapsed_ms(&self) -> Result<f32> {
        ck(self.stop.synchronize(), "waiting for an event")?;
        ck(self.start.elapsed_ms(&self.stop), "reading an event timer")
    }
}

/// Time by phase of a sequence of launches on one stream, for benchmarks: an event is
/// recorded after each launch (and one at the start), and the time between a mark and
/// the one before it is the phase's that the later mark names. Without `enabled` every
/// call is free.
pub(crate) struct PhaseClock {
    marks: Vec<(usize, CudaEvent)>,
    phases: usize,
    enabled: bool,
}

impl PhaseClock {
    /// A clock of `phases` phases; `enabled` false records nothing.
    pub fn new(phases: usize, enabled: bool) -> Self {
        PhaseClock {
            marks: Vec::new(),
            phases,
            enabled,
        }
    }
    /// Records a mark on `stream`: the work queued since the last mark is `phase`'s.
    pub fn mark(&mut self, g: &Gpu, stream: &CudaStream, phase: usize) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let e = gpu::ck(g.ctx.new_event(flags), "creating an event")?;
        gpu::ck(e.record(stream), "recording an event")?;
        self.marks.push((phase, e));
        Ok(())
    }
    /// Seconds per phase (waits for the last mark).
    pub fn totals(&self) -> Result<Vec<f64>> {
        let mut t = vec![0.0; self.phases];
        if let Some((_, last)) = self.marks.last() {
            gpu::ck(last.synchronize(), "waiting for an event")?;
        }
        for w in self.marks.windows(2) {
            let ms = gpu::ck(w[0].1.elapsed_ms(&w[1].1), "reading an event timer")?;
            t[w[1].0] += f64::from(ms) * 1e-3;
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn unavailable_is_an_explanation_not_a_panic() {
        // On machines without a GPU this must be an Err with a reason; with one, Ok.
        match super::available(0) {
            Ok(()) => assert!(super::device_name(0).is_ok()),
            Err(why) => assert!(!why.is_empty()),
        }
        assert!(super::available(1 << 20).is_err());
    }

    #[test]
    fn the_fault_kernels_parameters_match() {
        assert!(super::check(super::FAULT, super::SIGNATURES).is_empty());
        assert!(!super::check(super::FAULT, &[(&["kestrel_fault"], Vec::new)]).is_empty());
    }
}
