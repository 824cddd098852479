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
pub enum FilterMethod {
    /// The sequential Kalman filter (each track's steps in order; tracks in parallel).
    #[default]
    Sequential,
    /// Parallel in time: an associative scan over the steps of each track.
    Parallel(ScanAlgorithm),
}

/// How to smooth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SmoothMethod {
    /// Sequential Kalman filter then Rauch-Tung-Striebel smoother.
    #[default]
    Rts,
    /// Parallel-in-time filter and RTS smoother.
    ParallelRts(ScanAlgorithm),
    /// Parallel two-filter smoother.
    TwoFilter(ScanAlgorithm),
}

fn invariant<'a, M: StateSpace + ?Sized>(
    model: &'a M,
    what: &str,
) -> Result<&'a crate::model::Model> {
    model
        .as_invariant()
        .ok_or_else(|| Error::Unsupported(format!("{what} on cuda needs a time-invariant model")))
}

/// Filters every track of `z` on `device` with `method`.
pub fn filter_on<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    method: FilterMethod,
    opts: &FilterOptions,
) -> Result<FilterOutput<T>> {
    match (method, device) {
        (FilterMethod::Sequential, Device::Cpu) => kalman::filter(model, z, opts),
        (FilterMethod::Sequential, Device::Cuda(i)) => {
            crate::kalman::cuda::filter(i, invariant(model, "the batched filter")?, z, opts)
        }
        (FilterMethod::Parallel(_), _) if opts.keep == kalman::Keep::Last => Err(
            Error::Unsupported("the parallel filter keeps every step: Keep::Last is not available with FilterMethod::Parallel".into()),
        ),
        (FilterMethod::Parallel(_), _) if opts.predicted => Err(Error::Unsupported(
            "the parallel filter does not return predicted moments (FilterOptions::predicted)".into(),
        )),
        (FilterMethod::Parallel(scan), d) => {
            let filtered = crate::parallel::filter(d, model, z, scan)?;
            Ok(FilterOutput {
                filtered,
                predicted: None,
            })
        }
    }
}

/// Smooths every track of `z` on `device` with `method`; returns `(filtered, smoothed)`.
pub fn smooth_on<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    method: SmoothMethod,
) -> Result<(Estimates<T>, Estimates<T>)> {
    match (method, device) {
        (SmoothMethod::Rts, Device::Cpu) => kalman::smooth(model, z),
        (SmoothMethod::Rts, Device::Cuda(i)) => {
            // Filter and smoother back to back on the device: the filtered moments stay
            // there between the two kernels.
            let m = invariant(model, "the batched smoother")?;
            crate::kalman::cuda::smooth(i, m, z, &crate::kalman::cuda::CudaOptions::default())
        }
        (SmoothMethod::ParallelRts(scan), d) => crate::parallel::smooth_rts(d, model, z, scan),
        (SmoothMethod::TwoFilter(scan), d) => crate::parallel::smooth_two_filter(d, model, z, scan),
    }
}
