//! The GPU runtime of a build without the `cuda` feature: no device is ever available,
//! and every GPU entry point of the estimators answers [`Error::Unsupported`] naming
//! the feature.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// Why a GPU cannot be used in this build.
pub(crate) const NO_CUDA: &str = "kestrel was built without its `cuda` feature";

/// The error of a GPU entry point in a build without the `cuda` feature.
pub(crate) fn unsupported(what: &str) -> Error {
    Error::Unsupported(format!("{what} on a CUDA device: {NO_CUDA}"))
}

/// Always the reason: this build has no GPU backend.
pub fn available(_ordinal: usize) -> std::result::Result<(), String> {
    Err(NO_CUDA.into())
}

/// Always the reason: this build has no GPU backend.
pub fn available_without_opening(_ordinal: usize) -> std::result::Result<(), String> {
    Err(NO_CUDA.into())
}

/// 0: this build has no GPU backend.
pub fn device_count() -> usize {
    0
}

/// [`Error::DeviceUnavailable`]: this build has no GPU backend.
pub fn compute_capability(_ordinal: usize) -> Result<(i32, i32)> {
    Err(Error::DeviceUnavailable(NO_CUDA.into()))
}

/// [`Error::DeviceUnavailable`]: this build has no GPU backend.
pub fn device_name(_ordinal: usize) -> Result<String> {
    Err(Error::DeviceUnavailable(NO_CUDA.into()))
}

/// [`Error::DeviceUnavailable`]: this build has no GPU backend.
pub fn device_info(_ordinal: usize) -> Result<((i32, i32), usize)> {
    Err(Error::DeviceUnavailable(NO_CUDA.into()))
}

/// [`Error::DeviceUnavailable`]: this build has no GPU backend.
pub fn usable_memory(_ordinal: usize) -> Result<usize> {
    Err(Error::DeviceUnavailable(NO_CUDA.into()))
}

/// [`Error::DeviceUnavailable`]: this build has no GPU backend.
pub fn copy_rates(_dst: usize, _src: usize, _bytes: usize, _repeats: usize) -> Result<(f64, f64)> {
    Err(Error::DeviceUnavailable(NO_CUDA.into()))
}

/// [`Error::DeviceUnavailable`]: this build has no GPU backend.
#[doc(hidden)]
pub fn provoke_kernel_fault(_ordinal: usize) -> Result<()> {
    Err(Error::DeviceUnavailable(NO_CUDA.into()))
}

/// Accepted and ignored: this build has no GPU backend.
pub fn set_memory_budget(_bytes: Option<usize>) {}

/// `None`: this build has no GPU backend.
pub fn memory_budget() -> Option<usize> {
    None
}

/// Accepted and ignored: this build compiles no GPU kernels.
pub fn set_cache_dir(_dir: Option<PathBuf>) {}

/// `Ok` for the CPU; for a CUDA device, the error of a build without the `cuda` feature.
pub(crate) fn refuse(device: crate::device::Device, what: &str) -> Result<()> {
    match device {
        crate::device::Device::Cpu => Ok(()),
        _ => Err(unsupported(what)),
    }
}
