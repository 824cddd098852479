//! Measurements in, estimates out.
//!
//! Host layout is the one of the NumPy files of the contract: track-major, then step,
//! then component (`[B, T, ny]` for measurements, `[B, T, nx]` and `[B, T, nx, nx]` for
//! estimates), so files map straight onto these buffers. Device code converts to its
//! own structure-of-arrays layout once.

mod alloc;
mod outputs;

pub use outputs::{CovOutput, Outputs};

use crate::error::{Error, Result};
use crate::linalg::Real;

/// Measurements of `tracks` tracks over `steps` steps, `ny` components each, layout
/// `[tracks][steps][ny]`. A step with a NaN in any component is missing.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurements<T> {
    pub tracks: usize,
    pub steps: usize,
    pub ny: usize,
    pub data: Vec<T>,
}

impl<T: Real> Measurements<T> {
    /// Wraps a buffer, checking its length.
    pub fn new(tracks: usize, steps: usize, ny: usize, data: Vec<T>) -> Result<Self> {
        if data.len() != tracks * steps * ny {
            return Err(Error::input(format!(
                "measurement buffer has {} values, expected {tracks} tracks x {steps} steps x {ny} = {}",
                data.len(),
                tracks * steps * ny
            )));
        }
        Ok(Measurements {
            tracks,
            steps,
            ny,
            data,
        })
    }

    /// The measurement of track `b` at step `k`.
    #[inline]
    pub fn at(&self, b: usize, k: usize) -> &[T] {
        let o = (b * self.steps + k) * self.ny;
        &self.data[o..o + self.ny]
    }

    /// All steps of track `b`, `[steps][ny]`.
    #[inline]
    pub fn track(&self, b: usize) -> &[T] {
        let n = self.steps * self.ny;
        &self.data[b * n..(b + 1) * n]
    }

    /// True when step `k` of track `b` is missing.
    #[inline]
    pub fn is_missing(&self, b: usize, k: usize) -> bool {
        self.at(b, k).iter().any(|v| v.is_nan_value())
    }

    /// Converts to another precision.
    pub fn cast<U: Real>(&self) -> Measurements<U> {
        Measurements {
            tracks: self.tracks,
            steps: self.steps,
            ny: self.ny,
            data: self.data.iter().map(|v| U::of(v.to_f64())).collect(),
        }
    }

    /// Rejects infinities (NaN is allowed: it marks a missing value), naming the track
    /// and step.
    pub fn check_finite(&self) -> Result<()> {
        if let Some(i) = self
            .data
            .iter()
            .position(|v| !v.is_nan_value() && !v.is_finite_value())
        {
            let (b, k, j) = (
                i / (self.steps * self.ny),
                (i / self.ny) % self.steps,
                i % self.ny,
            );
            return Err(Error::input(format!(
                "track {b}, step {k}: measurement component z{j} is infinite"
            )));
        }
        Ok(())
    }
}

/// Gaussian estimates: means `[tracks][steps][nx]`, full covariances
/// `[tracks][steps][nx][nx]` (row-major), and for filters the per-step predictive
/// log-likelihood `[tracks][steps]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimates<T> {
    pub tracks: usize,
    pub steps: usize,
    pub nx: usize,
    pub mean: Vec<T>,
    pub cov: Vec<T>,
    pub loglik: Option<Vec<T>>,
}

impl<T: Real> Estimates<T> {
    /// Allocates estimates filled with NaN, so that an element nobody wrote shows.
    pub fn nan(tracks: usize, steps: usize, nx: usize, with_loglik: bool) -> Self {
        Estimates {
            tracks,
            steps,
            nx,
            mean: alloc::filled(tracks * steps * nx, T::nan()),
            cov: alloc::filled(tracks * steps * nx * nx, T::nan()),
            loglik: with_loglik.then(|| alloc::filled(tracks * steps, T::nan())),
        }
    }

    /// Allocates zeroed estimates without touching the memory (see `alloc::zeroed`): for
    /// paths that write every element.
    pub(crate) fn zeroed(tracks: usize, steps: usize, nx: usize, with_loglik: bool) -> Self {
        Estimates {
            tracks,
            steps,
            nx,
            mean: alloc::zeroed(tracks * steps * nx),
            cov: alloc::zeroed(tracks * steps * nx * nx),
            loglik: with_loglik.then(|| alloc::zeroed(tracks * steps)),
        }
    }

    /// A copy made in parallel into fresh memory (large batches copy several times
    /// faster than with `clone`).
    pub fn copy_parallel(&self) -> Self {
        Estimates {
            tracks: self.tracks,
            steps: self.steps,
            nx: self.nx,
            mean: alloc::copied(&self.mean),
            cov: alloc::copied(&self.cov),
            loglik: self.loglik.as_ref().map(|l| alloc::copied(l)),
        }
    }

    /// Reshapes for reuse: buffers keep their allocation; entries added by growing are
    /// NaN, entries already there keep stale values until overwritten.
    pub fn reshape(&mut self, tracks: usize, steps: usize, nx: usize, with_loglik: bool) {
        self.tracks = tracks;
        self.steps = steps;
        self.nx = nx;
        self.mean.resize(tracks * steps * nx, T::nan());
        self.cov.resize(tracks * steps * nx * nx, T::nan());
        match (&mut self.loglik, with_loglik) {
            (Some(l), true) => l.resize(tracks * steps, T::nan()),
            (l @ None, true) => *l = Some(vec![T::nan(); tracks * steps]),
            (l, false) => *l = None,
        }
    }

    #[inline]
    pub fn mean_at(&self, b: usize, k: usize) -> &[T] {
        let o = (b * self.steps + k) * self.nx;
        &self.mean[o..o + self.nx]
    }

    #[inline]
    pub fn cov_at(&self, b: usize, k: usize) -> &[T] {
        let n2 = self.nx * self.nx;
        let o = (b * self.steps + k) * n2;
        &self.cov[o..o + n2]
    }

    /// Sum of the per-step log-likelihoods of all tracks (0 without log-likelihoods).
    pub fn total_loglik(&self) -> f64 {
        self.loglik
            .as_ref()
            .map(|l| l.iter().map(|v| v.to_f64()).sum())
            .unwrap_or(0.0)
    }

    /// Converts to another precision.
    pub fn cast<U: Real>(&self) -> Estimates<U> {
        let c = |v: &Vec<T>| v.iter().map(|x| U::of(x.to_f64())).collect();
        Estimates {
            tracks: self.tracks,
            steps: self.steps,
            nx: self.nx,
            mean: c(&self.mean),
            cov: c(&self.cov),
            loglik: self.loglik.as_ref().map(c),
        }
    }
}
