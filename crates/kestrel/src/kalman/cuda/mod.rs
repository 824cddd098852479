//! The Kalman family on the GPU: the batched Kalman filter, the batched RTS smoother
//! and streaming tracking of many targets on an NVIDIA GPU, on the shared runtime
//! (`crate::cuda`: devices, NVRTC cache, buffers, staging, the chunk pipeline).
//!
//! # Design
//!
//! *Compilation.* The kernels (`kalman/kernels/*.cu`, one translation unit per [`source::Part`]) are compiled
//! by NVRTC for the device's own architecture (`--gpu-architecture=sm_XY` from its
//! compute capability) with `NX`, `NY` and the scalar type fixed at compile time, so
//! every loop over the state is unrolled and the mean, the covariance (packed lower
//! triangle, `NX (NX + 1) / 2` values) and every intermediate live in registers. By
//! default the model's numbers are compiled in as well ([`CudaOptions::bake_model`]):
//! products with structural zeros of `F` and `H` vanish and ones fold away, which for
//! the constant-velocity and -acceleration models removes most of the arithmetic.
//! Otherwise the model is a by-value kernel parameter (the constant bank: uniform loads).
//! Images are cached in memory per device and on disk by the runtime.
//!
//! *Mapping.* One thread per track, the time loop inside the kernel (the thesis's
//! "map over independent items"; ARCHITECTURE.md). Each thread reads its own measurements in
//! the host layout `[B][T][NY]`, one step ahead of use; consecutive steps share 32-byte
//! sectors that stay in L2, so DRAM moves each byte once. Outputs are written either
//! straight in the host layout ([`OutputLayout::Host`]: `[B][T][NX]`, full
//! `[B][T][NX][NX]`; no conversion pass, one copy down) or as structure of arrays
//! ([`OutputLayout::Soa`]: `[T][NX][B]`, packed `[T][NP][B]`; every warp store is one
//! line, fewest bytes; the default) followed by a tiled transpose on the device. On the
//! H100 the SoA layout reaches 70% of the memory bandwidth, the host layout 8%.
//!
//! *Numerics.* The same recursion, in the same order of summation, as the CPU
//! reference (`kalman/step.rs`, `kalman/dense.rs`): `S = H P H^T + R = L L^T`,
//! `W = P H^T L^{-T}`, `x += W L^{-1} y`, `P -= W W^T`; the smoother solves with the
//! Cholesky factor of `P_{k+1|k}`. A covariance that is not positive definite stops that
//! track and is reported as [`crate::Error::NotPositiveDefinite`] with the track and step.
//!
//! *Batches larger than memory* are processed in chunks of tracks with two buffer sets
//! on two streams, one chunk's copies overlapping the other's kernels
//! ([`CudaOptions::memory_budget`]; the runtime's chunk pipeline). Host copies go
//! through the runtime's two pinned staging buffers, the CPU side of each copy spread
//! over all cores. *Streaming*: [`BatchTracker`]. Files and measured throughput:
//! `src/cuda/README.md`, `docs/cuda-perf.md`.

mod auto;
mod batch;
mod params;
mod pipeline;
mod resident;
mod slot;
pub mod source;
mod tracker;

pub use crate::cuda::{available, device_info, device_name};
pub use auto::{
    choose, choose_for, decide, gpu_setup, job_bytes, record_cpu, record_gpu, AutoChoice, GpuSetup,
    Rates,
};
pub use batch::DeviceBatch;
pub use resident::{estimate_resident, release_scratch, DeviceArrays};
pub use tracker::BatchTracker;

use crate::cuda::{catch, gpu};
use crate::data::Measurements;
use crate::error::Result;
use crate::kalman::{FilterOptions, FilterOutput};
use crate::linalg::Real;
use crate::model::Model;
use crate::Estimates;

/// How the filter writes its outputs on the device (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OutputLayout {
    /// Straight in the host layout (each thread writes its own rows: partial-sector
    /// writes, about 11x slower than `Soa` on the H100; kept for comparison and for the
    /// predicted moments).
    Host,
    /// Structure of arrays with packed covariances, then a transpose on the device.
    #[default]
    Soa,
}

/// Options of the CUDA paths.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct CudaOptions {
    /// Compile the model's numbers into the kernels (one compilation per model).
    pub bake_model: bool,
    /// Device memory the batch may use, in bytes (default: 80% of the free memory).
    /// A batch that needs more is processed in chunks.
    pub memory_budget: Option<usize>,
    /// Output layout of the filter kernel.
    pub layout: OutputLayout,
    /// Fill device outputs with NaN before each run (tests: an unwritten value shows).
    pub poison: bool,
}

setters!(CudaOptions {
    with_bake_model(bake_model: bool, "Sets [`CudaOptions::bake_model`]."),
    with_memory_budget(memory_budget: Option<usize>, "Sets [`CudaOptions::memory_budget`] (bytes; `None`: 80% of the free memory)."),
    with_layout(layout: OutputLayout, "Sets [`CudaOptions::layout`]."),
    with_poison(poison: bool, "Sets [`CudaOptions::poison`]."),
});

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            bake_model: true,
            memory_budget: None,
            layout: OutputLayout::Soa,
            poison: false,
        }
    }
}

/// Compiles (or finds in the caches) the kernels for `model` and type `T` on GPU
/// `ordinal`; returns NVRTC's log (empty when the module came from a cache). A failure
/// carries NVRTC's full log.
pub fn compile_kernels<T: Real>(
    ordinal: usize,
    model: &Model,
    bake_model: bool,
    part: source::Part,
) -> Result<String> {
    catch(|| {
        Ok(
            source::kernels::<T>(&*gpu(ordinal)?, model, bake_model, part)?
                .log
                .clone(),
        )
    })
}

/// Whether the kernels of `part` for `model` in type `T` are in the disk cache for GPU
/// `ordinal` (so that first use loads them instead of compiling them).
pub fn kernels_cached<T: Real>(
    ordinal: usize,
    model: &Model,
    bake_model: bool,
    part: source::Part,
) -> bool {
    let (nx, ny) = (model.nx(), model.ny());
    crate::cuda::compute_capability(ordinal).is_ok_and(|cc| {
        crate::cuda::nvrtc::is_cached(
            &source::source(nx, ny, T::NAME, bake_model.then_some(model), part),
            cc,
            &source::module_name::<T>(nx, ny, bake_model, part),
        )
    })
}

/// Batched Kalman filter on GPU `ordinal` with the default [`CudaOptions`].
pub fn filter<T: Real>(
    ordinal: usize,
    model: &Model,
    z: &Measurements<T>,
    opts: &FilterOptions,
) -> Result<FilterOutput<T>> {
    filter_with(ordinal, model, z, opts, &CudaOptions::default())
}

/// Batched Kalman filter: every track of `z` with `model`, one GPU thread per track.
/// Same outputs, layout and time convention as [`crate::kalman::filter`].
pub fn filter_with<T: Real>(
    ordinal: usize,
    model: &Model,
    z: &Measurements<T>,
    opts: &FilterOptions,
    copts: &CudaOptions,
) -> Result<FilterOutput<T>> {
    catch(|| pipeline::filter(&[gpu(ordinal)?], model, z, opts, copts, None))
}

/// Batched RTS smoother on GPU `ordinal` over filtered estimates (all steps kept).
pub fn smooth_filtered<T: Real>(
    ordinal: usize,
    model: &Model,
    filtered: &Estimates<T>,
) -> Result<Estimates<T>> {
    smooth_filtered_with(ordinal, model, filtered, &CudaOptions::default())
}

/// [`smooth_filtered`] with options. Same outputs as [`crate::kalman::smooth_filtered`].
pub fn smooth_filtered_with<T: Real>(
    ordinal: usize,
    model: &Model,
    filtered: &Estimates<T>,
    copts: &CudaOptions,
) -> Result<Estimates<T>> {
    catch(|| pipeline::smooth_filtered(&*gpu(ordinal)?, model, filtered, copts))
}

/// Filter and RTS smoother on the GPU, the filtered estimates going from one kernel to
/// the next without leaving the device; returns `(filtered, smoothed)` like
/// [`crate::kalman::smooth`].
pub fn smooth<T: Real>(
    ordinal: usize,
    model: &Model,
    z: &Measurements<T>,
    copts: &CudaOptions,
) -> Result<(Estimates<T>, Estimates<T>)> {
    catch(|| pipeline::smooth(&[gpu(ordinal)?], model, z, copts, None))
}

fn open_all(ordinals: &[usize]) -> Result<Vec<std::sync::Arc<crate::cuda::Gpu>>> {
    if ordinals.is_empty() {
        return Err(crate::Error::Unsupported("no CUDA device was named".into()));
    }
    ordinals.iter().map(|&i| gpu(i)).collect()
}

/// [`filter_with`] with the tracks split over the GPUs `ordinals` (contiguous shares
/// in order, one host thread per device, each device running the chunked pipeline on
/// its share); the outputs are gathered in track order and equal one GPU's bit for bit
/// (tracks are independent and every device runs the same kernels).
pub fn filter_on_devices<T: Real>(
    ordinals: &[usize],
    model: &Model,
    z: &Measurements<T>,
    opts: &FilterOptions,
    copts: &CudaOptions,
) -> Result<FilterOutput<T>> {
    catch(|| pipeline::filter(&open_all(ordinals)?, model, z, opts, copts, None))
}

/// [`smooth`] with the tracks split over the GPUs `ordinals` (see [`filter_on_devices`]).
pub fn smooth_on_devices<T: Real>(
    ordinals: &[usize],
    model: &Model,
    z: &Measurements<T>,
    copts: &CudaOptions,
) -> Result<(Estimates<T>, Estimates<T>)> {
    catch(|| pipeline::smooth(&open_all(ordinals)?, model, z, copts, None))
}

/// Checks per-track inputs for the GPU and converts them to the working precision:
/// sampling intervals are refused (the kernels take the model's `F` and `Q`).
pub(crate) fn gpu_inputs<T: Real>(
    model: &Model,
    z: &Measurements<T>,
    inputs: &crate::kalman::TrackInputs<'_>,
) -> Result<slot::HostInputs<T>> {
    if inputs.dt.is_some() {
        return Err(crate::Error::Unsupported(
            "per-track sampling intervals (TrackInputs::dt) on a GPU: the GPU kernels take the model's F and Q (use Device::Cpu)"
                .into(),
        ));
    }
    inputs.check(model, z.tracks, z.steps)?;
    Ok(slot::HostInputs::new(inputs))
}

/// [`filter_on_devices`] with per-track priors, control inputs `u`, measurement offsets
/// `d` and noise `R` ([`crate::kalman::TrackInputs`], same meaning and checks as
/// [`crate::kalman::filter_with`]), read by the batch kernels beside the measurements.
/// Sampling intervals are refused with [`crate::Error::Unsupported`].
pub fn filter_inputs_on_devices<T: Real>(
    ordinals: &[usize],
    model: &Model,
    z: &Measurements<T>,
    opts: &FilterOptions,
    copts: &CudaOptions,
    inputs: &crate::kalman::TrackInputs<'_>,
) -> Result<FilterOutput<T>> {
    pipeline::check_input(model, z, opts)?;
    let host = gpu_inputs(model, z, inputs)?;
    catch(|| pipeline::filter(&open_all(ordinals)?, model, z, opts, copts, Some(&host)))
}

/// [`smooth_on_devices`] with per-track inputs (see [`filter_inputs_on_devices`]).
pub fn smooth_inputs_on_devices<T: Real>(
    ordinals: &[usize],
    model: &Model,
    z: &Measurements<T>,
    copts: &CudaOptions,
    inputs: &crate::kalman::TrackInputs<'_>,
) -> Result<(Estimates<T>, Estimates<T>)> {
    pipeline::check_input(model, z, &FilterOptions::default())?;
    let host = gpu_inputs(model, z, inputs)?;
    catch(|| pipeline::smooth(&open_all(ordinals)?, model, z, copts, Some(&host)))
}

#[cfg(test)]
mod param_tests {
    /// Every parameter struct matches its kernels' declarations.
    #[test]
    fn the_parameter_structs_match_the_kernels() {
        use super::source::{FILTER, LAYOUT, SMOOTH, TRACKER};
        let src = String::from(FILTER) + SMOOTH + LAYOUT + TRACKER;
        crate::cuda::assert_matches(&src, super::params::SIGNATURES);
    }
}
