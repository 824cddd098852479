//! Parallel-in-time Kalman filter and smoothers (placeholder).

use crate::data::{Estimates, Measurements};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::scan::ScanAlgorithm;

/// Parallel-in-time Kalman filter (Sarkka & Garcia-Fernandez): filtered moments and
/// per-step log-likelihoods.
pub fn filter<T: Real, M: StateSpace + ?Sized>(
    _device: Device,
    _model: &M,
    _z: &Measurements<T>,
    _scan: ScanAlgorithm,
) -> Result<Estimates<T>> {
    Err(Error::Unsupported(
        "--method parallel is not built yet".into(),
    ))
}

/// Parallel-in-time RTS smoother.
pub fn smooth_rts<T: Real, M: StateSpace + ?Sized>(
    _device: Device,
    _model: &M,
    _z: &Measurements<T>,
    _scan: ScanAlgorithm,
) -> Result<(Estimates<T>, Estimates<T>)> {
    Err(Error::Unsupported(
        "--method parallel-rts is not built yet".into(),
    ))
}

/// Parallel two-filter smoother.
pub fn smooth_two_filter<T: Real, M: StateSpace + ?Sized>(
    _device: Device,
    _model: &M,
    _z: &Measurements<T>,
    _scan: ScanAlgorithm,
) -> Result<(Estimates<T>, Estimates<T>)> {
    Err(Error::Unsupported(
        "--method two-filter is not built yet".into(),
    ))
}
