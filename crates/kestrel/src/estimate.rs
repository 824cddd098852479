//! The entry points that take a [`Device`] and a method and dispatch to the CPU
//! reference, the CUDA backend or the parallel-in-time algorithms.

use crate::data::{Estimates, Measurements};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kalman::{self, FilterOptions, FilterOutput};
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::scan::ScanAlgorithm;

/// How to filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FilterMethod {
    /// The sequential Kalman filter (each track's steps in order; tracks in parallel).
    #[default]
    Sequential,
    /// Parallel in time: an associative scan over the steps of each track.
    Parallel(ScanAlgorithm),
    /// Parallel in time in square-root form (`parallel::filter_sqrt`): Cholesky factors
    /// through the scan, positive semi-definite covariances in any precision.
    ParallelSqrt(ScanAlgorithm),
}

/// How to smooth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SmoothMethod {
    /// Sequential Kalman filter then Rauch-Tung-Striebel smoother.
    #[default]
    Rts,
    /// Parallel-in-time filter and RTS smoother.
    ParallelRts(ScanAlgorithm),
    /// Parallel two-filter smoother.
    TwoFilter(ScanAlgorithm),
    /// Square-root parallel filter and RTS smoother (`parallel::smooth_sqrt`).
    ParallelSqrtRts(ScanAlgorithm),
}

/// The batched filter (and with `smooth` the RTS smoother) of a time-varying model on
/// GPU `ordinal`: one thread per track over the model's per-step matrices
/// (`parallel::cuda::sequential`); the filter's options as the parallel method takes them.
#[cfg(feature = "cuda")]
fn varying_on_gpu<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<T>,
    opts: &FilterOptions,
) -> Result<FilterOutput<T>> {
    if opts.keep == kalman::Keep::Last {
        return Err(Error::Unsupported(
            "the GPU filter of a time-varying model keeps every step: Keep::Last is not available"
                .into(),
        ));
    }
    if opts.predicted {
        return Err(Error::Unsupported(
            "the GPU filter of a time-varying model does not return predicted moments (FilterOptions::predicted)".into(),
        ));
    }
    let (mut filtered, _) = crate::parallel::cuda::sequential(ordinal, model, z, false)?;
    opts.outputs.apply(&mut filtered);
    Ok(FilterOutput {
        filtered,
        predicted: None,
    })
}

/// The ordinals of every CUDA device of this host (an error when there is none).
#[cfg(feature = "cuda")]
fn all_gpus() -> Result<Vec<usize>> {
    let n = crate::cuda::device_count();
    if n == 0 {
        return Err(Error::Unsupported(
            "no CUDA device on this host (all CUDA devices were asked for)".into(),
        ));
    }
    Ok((0..n).collect())
}

/// Filters every track of `z` on `device` with `method`. `Device::AllCuda` splits the
/// tracks over every GPU of the host (the sequential filter) or the time steps of every
/// track (the parallel-in-time filter, `parallel::cuda::filter_on_devices`).
pub fn filter_on<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    method: FilterMethod,
    opts: &FilterOptions,
) -> Result<FilterOutput<T>> {
    check_outputs("filter", model, z, 1)?;
    warn_if_large_for_f32(z);
    match (method, device) {
        (FilterMethod::Sequential, Device::Cpu) => kalman::filter(model, z, opts),
        #[cfg(feature = "cuda")]
        (FilterMethod::Sequential, Device::Cuda(i)) => match model.as_invariant() {
            Some(m) => crate::kalman::cuda::filter(i, m, z, opts),
            None => varying_on_gpu(i, model, z, opts),
        },
        #[cfg(feature = "cuda")]
        (FilterMethod::Sequential, Device::AllCuda) => match model.as_invariant() {
            Some(m) => crate::kalman::cuda::filter_on_devices(
                &all_gpus()?,
                m,
                z,
                opts,
                &crate::kalman::cuda::CudaOptions::default(),
            ),
            // A time-varying model's batch runs on the first GPU.
            None => varying_on_gpu(all_gpus()?[0], model, z, opts),
        },
        #[cfg(not(feature = "cuda"))]
        (FilterMethod::Sequential, d) => Err(crate::cuda::unsupported(&format!(
            "the batched filter ({d:?})"
        ))),
        (FilterMethod::Parallel(_) | FilterMethod::ParallelSqrt(_), _)
            if opts.keep == kalman::Keep::Last =>
        {
            Err(Error::Unsupported(format!(
                "the parallel filter keeps every step: Keep::Last is not available with {method:?}"
            )))
        }
        (FilterMethod::Parallel(_) | FilterMethod::ParallelSqrt(_), _) if opts.predicted => {
            Err(Error::Unsupported(
                "the parallel filter does not return predicted moments (FilterOptions::predicted)"
                    .into(),
            ))
        }
        (FilterMethod::Parallel(scan) | FilterMethod::ParallelSqrt(scan), d) => {
            let mut filtered = if matches!(method, FilterMethod::ParallelSqrt(_)) {
                crate::parallel::filter_sqrt(d, model, z, scan)?
            } else {
                crate::parallel::filter(d, model, z, scan)?
            };
            opts.outputs.apply(&mut filtered);
            Ok(FilterOutput {
                filtered,
                predicted: None,
            })
        }
    }
}

/// The time-invariant model and the GPUs of `device` for a batch with per-track inputs
/// (the GPU `what`, filter or smoother, takes a time-varying model alone).
#[cfg(feature = "cuda")]
fn inputs_on_gpus<'m, M: StateSpace + ?Sized>(
    device: Device,
    model: &'m M,
    inputs: &kalman::TrackInputs<'_>,
    what: &str,
) -> Result<(&'m crate::model::Model, Vec<usize>)> {
    let Some(m) = model.as_invariant() else {
        return Err(Error::Unsupported(format!(
            "{} on {device:?}: the GPU {what} of a time-varying model takes the model alone (use Device::Cpu)",
            inputs.names()
        )));
    };
    let ordinals = match device {
        Device::Cuda(i) => vec![i],
        _ => all_gpus()?,
    };
    Ok((m, ordinals))
}

/// [`filter_on`] with per-track and per-step inputs beyond the model
/// ([`kalman::TrackInputs`]: priors per track, control inputs `u`, measurement offsets
/// `d` and noise `R` per track and step, sampling intervals per track): the sequential
/// filter on the CPU ([`kalman::filter_with`]) or, for a time-invariant model, on GPUs
/// (`kalman::cuda::filter_inputs_on_devices`: every input but the sampling intervals).
/// The parallel-in-time methods take the model alone: with inputs they return
/// [`Error::Unsupported`] naming them.
pub fn filter_on_with<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    method: FilterMethod,
    opts: &FilterOptions,
    inputs: &kalman::TrackInputs<'_>,
) -> Result<FilterOutput<T>> {
    if inputs.is_empty() {
        return filter_on(device, model, z, method, opts);
    }
    match (method, device) {
        (FilterMethod::Sequential, Device::Cpu) => {
            check_outputs("filter", model, z, 1)?;
            kalman::filter_with(model, z, opts, inputs)
        }
        #[cfg(feature = "cuda")]
        (FilterMethod::Sequential, d @ (Device::Cuda(_) | Device::AllCuda)) => {
            let (m, ordinals) = inputs_on_gpus(d, model, inputs, "filter")?;
            check_outputs("filter", model, z, 1)?;
            crate::kalman::cuda::filter_inputs_on_devices(
                &ordinals,
                m,
                z,
                opts,
                &crate::kalman::cuda::CudaOptions::default(),
                inputs,
            )
        }
        #[cfg(not(feature = "cuda"))]
        (FilterMethod::Sequential, d) => Err(Error::Unsupported(format!(
            "{} on {d:?}: this build has no GPU support (use Device::Cpu)",
            inputs.names()
        ))),
        (m, _) => Err(Error::Unsupported(format!(
            "{} with FilterMethod::{m:?}: the parallel-in-time filters take the model alone (use FilterMethod::Sequential)",
            inputs.names()
        ))),
    }
}

/// [`smooth_on`] with per-track and per-step inputs ([`kalman::TrackInputs`]): the RTS
/// smoother on the CPU ([`kalman::smooth_with`]) or, for a time-invariant model, on
/// GPUs (every input but the sampling intervals); the parallel-in-time methods return
/// [`Error::Unsupported`] naming the inputs.
pub fn smooth_on_with<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    method: SmoothMethod,
    inputs: &kalman::TrackInputs<'_>,
) -> Result<Smoothed<T>> {
    if inputs.is_empty() {
        return smooth_on(device, model, z, method);
    }
    match (method, device) {
        (SmoothMethod::Rts, Device::Cpu) => {
            check_outputs("smoother", model, z, 2)?;
            kalman::smooth_with(model, z, inputs)
                .map(|(filtered, smoothed)| Smoothed { filtered, smoothed })
        }
        #[cfg(feature = "cuda")]
        (SmoothMethod::Rts, d @ (Device::Cuda(_) | Device::AllCuda)) => {
            let (m, ordinals) = inputs_on_gpus(d, model, inputs, "smoother")?;
            check_outputs("smoother", model, z, 2)?;
            crate::kalman::cuda::smooth_inputs_on_devices(
                &ordinals,
                m,
                z,
                &crate::kalman::cuda::CudaOptions::default(),
                inputs,
            )
            .map(|(filtered, smoothed)| Smoothed { filtered, smoothed })
        }
        #[cfg(not(feature = "cuda"))]
        (SmoothMethod::Rts, d) => Err(Error::Unsupported(format!(
            "{} on {d:?}: this build has no GPU support (use Device::Cpu)",
            inputs.names()
        ))),
        (m, _) => Err(Error::Unsupported(format!(
            "{} with {m:?}: the parallel-in-time smoothers take the model alone (use SmoothMethod::Rts)",
            inputs.names()
        ))),
    }
}

/// What [`smooth_on`] returns.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Smoothed<T> {
    /// The filtered moments (with per-step log-likelihoods).
    pub filtered: Estimates<T>,
    /// The smoothed moments.
    pub smoothed: Estimates<T>,
}

/// Smooths every track of `z` on `device` with `method`.
///
/// ```
/// use kestrel::{smooth_on, Device, SmoothMethod};
/// let model = kestrel::model::constant_velocity(1, 1.0, 0.5, 2.0, 10.0)?;
/// let z = kestrel::sim::simulate(&model, 3, 20, 1, 0.0)?.measurements;
/// let out = smooth_on(Device::Cpu, &model, &z, SmoothMethod::Rts)?;
/// assert_eq!(out.smoothed.steps(), 20);
/// # Ok::<(), kestrel::Error>(())
/// ```
pub fn smooth_on<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    method: SmoothMethod,
) -> Result<Smoothed<T>> {
    smooth_pair(device, model, z, method)
        .map(|(filtered, smoothed)| Smoothed { filtered, smoothed })
}

fn smooth_pair<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    method: SmoothMethod,
) -> Result<(Estimates<T>, Estimates<T>)> {
    check_outputs("smoother", model, z, 2)?;
    warn_if_large_for_f32(z);
    match (method, device) {
        (SmoothMethod::Rts, Device::Cpu) => kalman::smooth(model, z),
        #[cfg(feature = "cuda")]
        (SmoothMethod::Rts, Device::Cuda(i)) => match model.as_invariant() {
            // Filter and smoother back to back on the device: the filtered moments stay
            // there between the two kernels.
            Some(m) => {
                crate::kalman::cuda::smooth(i, m, z, &crate::kalman::cuda::CudaOptions::default())
            }
            None => varying_smooth_on_gpu(i, model, z),
        },
        #[cfg(feature = "cuda")]
        (SmoothMethod::Rts, Device::AllCuda) => match model.as_invariant() {
            Some(m) => crate::kalman::cuda::smooth_on_devices(
                &all_gpus()?,
                m,
                z,
                &crate::kalman::cuda::CudaOptions::default(),
            ),
            None => varying_smooth_on_gpu(all_gpus()?[0], model, z),
        },
        #[cfg(not(feature = "cuda"))]
        (SmoothMethod::Rts, d) => Err(crate::cuda::unsupported(&format!(
            "the batched smoother ({d:?})"
        ))),
        (SmoothMethod::ParallelRts(scan), d) => {
            crate::parallel::smooth_rts(d.first(), model, z, scan)
        }
        (SmoothMethod::TwoFilter(scan), d) => crate::parallel::smooth_two_filter(d, model, z, scan),
        (SmoothMethod::ParallelSqrtRts(scan), d) => {
            crate::parallel::smooth_sqrt(d.first(), model, z, scan)
        }
    }
}

/// The batched RTS smoother of a time-varying model on GPU `ordinal` (see
/// [`varying_on_gpu`]).
#[cfg(feature = "cuda")]
fn varying_smooth_on_gpu<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<T>,
) -> Result<(Estimates<T>, Estimates<T>)> {
    match crate::parallel::cuda::sequential(ordinal, model, z, true)? {
        (f, Some(s)) => Ok((f, s)),
        (_, None) => Err(Error::Cuda(
            "the GPU smoother returned no smoothed estimates".into(),
        )),
    }
}

/// Checks that `copies` sets of estimates (means, covariances, log-likelihoods) of the
/// size of `z` fit in memory, before any is allocated.
fn check_outputs<T: Real, M: StateSpace + ?Sized>(
    what: &str,
    model: &M,
    z: &Measurements<T>,
    copies: usize,
) -> Result<()> {
    use crate::limits::Size;
    let nx = model.nx();
    let per_step = nx
        .checked_mul(nx)
        .and_then(|c| c.checked_add(nx + 1))
        .unwrap_or(usize::MAX);
    crate::limits::check(
        &format!("{what} estimates"),
        &[
            Size("tracks", z.tracks),
            Size("steps", z.steps),
            Size("values per step", per_step),
            Size("copies", copies),
        ],
        std::mem::size_of::<T>(),
    )?;
    Ok(())
}

/// Measurements this large in magnitude cost an f32 filter its accuracy: the
/// log-likelihood's quadratic form loses about 6-15% at |z| ~ 5e7 (24-bit mantissa).
pub const F32_LARGE_MEASUREMENT: f64 = 1e7;

/// Records a warning when `z` is f32 and holds a value of magnitude beyond
/// [`F32_LARGE_MEASUREMENT`] (centre or scale such data, or use f64).
pub fn warn_if_large_for_f32<T: Real>(z: &Measurements<T>) {
    if T::NAME != "f32" {
        return;
    }
    // In parallel: a pass over every measurement (2e8 values for 10^6 x 100 x 2 took
    // 0.25 s in one thread, a fifth of the whole filter on 16 cores).
    use rayon::prelude::*;
    let big = z
        .data
        .par_chunks(1 << 16)
        .map(|c| {
            c.iter()
                .map(|v| v.to_f64().abs())
                .filter(|v| v.is_finite())
                .fold(0.0f64, f64::max)
        })
        .reduce(|| 0.0, f64::max);
    if big >= F32_LARGE_MEASUREMENT {
        crate::error::warn(format!(
            "measurements reach |z| = {big:.3e}: in f32 the log-likelihoods lose accuracy beyond |z| ~ {F32_LARGE_MEASUREMENT:.0e} (centre the data, or compute in f64)"
        ));
    }
}
