//! The CUDA backend (placeholder: reports that no GPU path is built yet).

use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::kalman::{FilterOptions, FilterOutput};
use crate::linalg::Real;
use crate::model::Model;
use crate::Estimates;

/// `Ok` when the CUDA driver is loadable and device `ordinal` exists; else the reason.
pub fn available(_ordinal: usize) -> std::result::Result<(), String> {
    Err("the CUDA backend is not built yet".into())
}

/// The name of device `ordinal`.
pub fn device_name(_ordinal: usize) -> Result<String> {
    Err(Error::Unsupported(
        "the CUDA backend is not built yet".into(),
    ))
}

/// Batched Kalman filter on the GPU.
pub fn filter<T: Real>(
    _ordinal: usize,
    _model: &Model,
    _z: &Measurements<T>,
    _opts: &FilterOptions,
) -> Result<FilterOutput<T>> {
    Err(Error::Unsupported(
        "--device cuda: the CUDA backend is not built yet".into(),
    ))
}

/// Batched RTS smoother on the GPU over filtered estimates.
pub fn smooth_filtered<T: Real>(
    _ordinal: usize,
    _model: &Model,
    _filtered: &Estimates<T>,
) -> Result<Estimates<T>> {
    Err(Error::Unsupported(
        "--device cuda: the CUDA backend is not built yet".into(),
    ))
}

/// The parallel-in-time filter and smoothers on the GPU.
pub mod parallel;
