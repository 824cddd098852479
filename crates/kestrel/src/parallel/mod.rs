//! Parallel-in-time Kalman filter and smoothers from associative scans (Sarkka &
//! Garcia-Fernandez, *On the Performance of Prefix-Sum Parallel Kalman Filters and
//! Smoothers on GPUs*, Algorithms 5-7; Tager 2013, Chapter 3, for the retrodiction scan).
//!
//! kestrel's time convention maps onto the paper's as follows: the prior `(x0, P0)` is the
//! state at step 0 before the step-0 measurement, so kestrel's step 0 is the paper's
//! `k = 1` element (eq. 44) with the prior in place of the predicted moments:
//! `(0, x_{0|0}, P_{0|0}, 0, 0)`. Step `k >= 1` uses the transition into `k` and the
//! measurement at `k` (eqs. 43, 45). A missing measurement gives the bare prediction
//! element `(F, u, Q, 0, 0)`.
//!
//! On the CPU, many tracks are spread over the rayon pool one track per task (each scanned
//! serially); a few long tracks are scanned one at a time with every level on the pool.
//! `Device::Cuda` runs the same elements and operators as CUDA kernels
//! (`parallel::cuda`), all tracks of a batch in the same launches; the retrodiction scan
//! too. `Device::AllCuda` splits the time steps of the filter and of the two-filter
//! smoother over every GPU of the host (`parallel::cuda::filter_on_devices`: one element
//! per track crosses between neighbouring shares); the RTS smoother runs on the first GPU.

pub mod blocks;
#[cfg(feature = "cuda")]
#[doc(hidden)]
pub mod cuda;
pub mod filtering;
mod paper;
mod small;
pub mod smoothing;
pub mod sqrt;
mod track;

pub use filtering::FilterOp;
pub use paper::PaperModel;
pub use smoothing::SmoothOp;
pub use sqrt::{filter_sqrt, smooth_sqrt, SqrtFilterOp, SqrtSmoothOp};

use crate::data::{Estimates, Measurements};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kalman::dense::ConvertedModel;
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::scan::{Exec, ScanAlgorithm};
#[cfg(feature = "cuda")]
use cuda as gpu;
use rayon::prelude::*;
use track::TrackOut;

#[cfg(feature = "cuda")]
fn smoothed<T>(
    (f, s): (Estimates<T>, Option<Estimates<T>>),
) -> Result<(Estimates<T>, Estimates<T>)> {
    let s =
        s.ok_or_else(|| Error::Cuda("the GPU smoother returned no smoothed estimates".into()))?;
    Ok((f, s))
}

fn check<T: Real, M: StateSpace + ?Sized>(model: &M, z: &Measurements<T>) -> Result<()> {
    crate::model::check_fits(model, z.ny, z.steps)?;
    if z.steps == 0 {
        return Err(Error::Input {
            msg: "measurements have no steps".into(),
        });
    }
    z.check_finite()
}

/// The ordinals of every GPU of the host for [`Device::AllCuda`] when there are at least
/// two (the time steps are then split over them), `None` otherwise (one device runs it).
#[cfg(feature = "cuda")]
fn several_gpus(device: Device) -> Result<Option<Vec<usize>>> {
    if device != Device::AllCuda {
        return Ok(None);
    }
    match crate::cuda::device_count() {
        0 => Err(Error::Unsupported(
            "no CUDA device on this host (all CUDA devices were asked for)".into(),
        )),
        1 => Ok(None),
        n => Ok(Some((0..n).collect())),
    }
}

/// One optional output slice per track.
type Slices<'a, T> = Vec<Option<&'a mut [T]>>;

/// Runs `f(track, exec, out)` for every track: across tracks on the pool when there are
/// at least as many tracks as threads, else one track at a time with parallel levels.
fn for_tracks<T, F>(
    filtered: &mut Estimates<T>,
    smoothed: Option<&mut Estimates<T>>,
    f: F,
) -> Result<()>
where
    T: Real,
    F: Fn(usize, Exec, &mut TrackOut<'_, T>) -> Result<()> + Sync + Send,
{
    let (b, t, nx) = (filtered.tracks, filtered.steps, filtered.nx);
    let ll = filtered
        .loglik
        .as_mut()
        .expect("filtered estimates carry log-likelihoods");
    let (sm, sc): (Slices<'_, T>, Slices<'_, T>) = match smoothed {
        Some(s) => (
            s.mean.chunks_mut(t * nx).map(Some).collect(),
            s.cov.chunks_mut(t * nx * nx).map(Some).collect(),
        ),
        None => (
            (0..b).map(|_| None).collect(),
            (0..b).map(|_| None).collect(),
        ),
    };
    let outs: Vec<TrackOut<'_, T>> = filtered
        .mean
        .chunks_mut(t * nx)
        .zip(filtered.cov.chunks_mut(t * nx * nx))
        .zip(ll.chunks_mut(t))
        .zip(sm.into_iter().zip(sc))
        .map(|(((mean, cov), loglik), (smean, scov))| TrackOut {
            mean,
            cov,
            loglik,
            smean,
            scov,
        })
        .collect();
    if b >= rayon::current_num_threads() && b > 1 {
        outs.into_par_iter()
            .enumerate()
            .try_for_each(|(i, mut o)| f(i, Exec::Serial, &mut o))
    } else {
        outs.into_iter()
            .enumerate()
            .try_for_each(|(i, mut o)| f(i, Exec::Rayon, &mut o))
    }
}

/// Parallel-in-time Kalman filter (Algorithm 5): filtered moments and per-step
/// log-likelihoods of every track, with scan algorithm `scan`, on the CPU or the GPU
/// (`parallel::cuda`).
pub fn filter<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    scan: ScanAlgorithm,
) -> Result<Estimates<T>> {
    check(model, z)?;
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the parallel filter")?;
    #[cfg(feature = "cuda")]
    if let Some(all) = several_gpus(device)? {
        return gpu::filter_on_devices(&all, model, z, scan);
    }
    #[cfg(feature = "cuda")]
    if let Device::Cuda(i) = device.first() {
        return Ok(gpu::run(i, model, z, gpu::Method::Filter, scan)?.0);
    }
    let m = ConvertedModel::<T>::new(model, z.steps);
    let mut est = Estimates::nan(z.tracks, z.steps, m.nx, true);
    for_tracks(&mut est, None, |b, exec, out| {
        track::filter_track(&m, b, z.track(b), z.steps, scan, exec, out)
    })?;
    Ok(est)
}

/// Parallel filter then parallel RTS smoother (Algorithm 6); returns `(filtered, smoothed)`.
pub fn smooth_rts<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    scan: ScanAlgorithm,
) -> Result<(Estimates<T>, Estimates<T>)> {
    check(model, z)?;
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the parallel RTS smoother")?;
    #[cfg(feature = "cuda")]
    if let Device::Cuda(i) = device.first() {
        return smoothed(gpu::run(i, model, z, gpu::Method::Rts, scan)?);
    }
    let m = ConvertedModel::<T>::new(model, z.steps);
    let mut f = Estimates::nan(z.tracks, z.steps, m.nx, true);
    let mut s = Estimates::nan(z.tracks, z.steps, m.nx, false);
    for_tracks(&mut f, Some(&mut s), |b, exec, out| {
        track::filter_track(&m, b, z.track(b), z.steps, scan, exec, out)?;
        let (Some(sm), Some(sc)) = (out.smean.as_deref_mut(), out.scov.as_deref_mut()) else {
            unreachable!("smoothed outputs are allocated above")
        };
        track::retrodict_track(
            &m,
            b,
            z.steps,
            out.mean,
            out.cov,
            false,
            scan,
            exec,
            sm,
            Some(sc),
        )
    })?;
    Ok((f, s))
}

/// Parallel two-filter smoother (Algorithm 7); returns `(filtered, smoothed)`.
pub fn smooth_two_filter<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    scan: ScanAlgorithm,
) -> Result<(Estimates<T>, Estimates<T>)> {
    check(model, z)?;
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the parallel two-filter smoother")?;
    #[cfg(feature = "cuda")]
    if let Some(all) = several_gpus(device)? {
        return gpu::two_filter_on_devices(&all, model, z, scan);
    }
    #[cfg(feature = "cuda")]
    if let Device::Cuda(i) = device.first() {
        return smoothed(gpu::run(i, model, z, gpu::Method::TwoFilter, scan)?);
    }
    let m = ConvertedModel::<T>::new(model, z.steps);
    let mut f = Estimates::nan(z.tracks, z.steps, m.nx, true);
    let mut s = Estimates::nan(z.tracks, z.steps, m.nx, false);
    for_tracks(&mut f, Some(&mut s), |b, exec, out| {
        track::two_filter_track(&m, b, z.track(b), z.steps, scan, exec, out)
    })?;
    Ok((f, s))
}

/// Checks filtered estimates against the model before a retrodiction: state size, steps
/// (at least one, no more than a time-varying model covers), full covariances, finite
/// values.
fn check_filtered<T: Real, M: StateSpace + ?Sized>(model: &M, f: &Estimates<T>) -> Result<()> {
    let input = |msg: String| Err(Error::Input { msg });
    if f.nx != model.nx() {
        return input(format!(
            "filtered estimates have states of {} components, the model's state has {}",
            f.nx,
            model.nx()
        ));
    }
    if f.steps == 0 || f.tracks == 0 {
        return input(format!(
            "filtered estimates hold no steps ({})",
            crate::data::shape(f.tracks, f.steps)
        ));
    }
    if let Some(n) = model.steps_covered() {
        if n < f.steps {
            return input(format!(
                "the time-varying model has matrices for {n} steps, the filtered estimates have {}",
                f.steps
            ));
        }
    }
    let n = f.tracks * f.steps * f.nx;
    if f.mean.len() != n || f.cov.len() != n * f.nx {
        return input(format!(
            "filtered estimates need means [B, T, nx] and full covariances [B, T, nx, nx] ({} and {} values for B = {}, T = {}, nx = {}); these hold {} and {}",
            n,
            n * f.nx,
            f.tracks,
            f.steps,
            f.nx,
            f.mean.len(),
            f.cov.len()
        ));
    }
    for (what, v, per) in [("mean", &f.mean, f.nx), ("covariance", &f.cov, f.nx * f.nx)] {
        if let Some(i) = v.iter().position(|x| !x.is_finite_value()) {
            let k = i / per;
            return input(format!(
                "the filtered {what} of track {}, step {} is not finite ({})",
                k / f.steps,
                k % f.steps,
                v[i].to_f64()
            ));
        }
    }
    Ok(())
}

/// What [`retrodict`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Moments {
    /// Smoothed means and covariances.
    #[default]
    MeansAndCovariances,
    /// Smoothed means only: the thesis's pairs `(C_k, b_k)` without any covariance part
    /// (the result's covariances are empty, see [`Estimates::cov_output`]).
    MeansOnly,
}

/// The thesis's retrodiction as a scan (Tager 2013, Section 3.2) over filtered estimates
/// from any filter: smoothed means from the pairs `(C_k, b_k)`, and with
/// [`Moments::MeansAndCovariances`] smoothed covariances from the congruence part of the
/// same elements (Lemma 4). [`ScanAlgorithm::Sequential`] is the RTS recursion itself.
/// On `Device::Cuda` with [`Moments::MeansOnly`] no covariance is formed, stored or
/// copied back (`parallel/kernels/parallel_means.cu`).
pub fn retrodict<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    filtered: &Estimates<T>,
    scan: ScanAlgorithm,
    moments: Moments,
) -> Result<Estimates<T>> {
    let means_only = moments == Moments::MeansOnly;
    check_filtered(model, filtered)?;
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the retrodiction scan")?;
    #[cfg(feature = "cuda")]
    if let Device::Cuda(i) = device.first() {
        return gpu::retrodict(i, model, filtered, scan, means_only);
    }
    let m = ConvertedModel::<T>::new(model, filtered.steps);
    let (b, t, nx) = (filtered.tracks, filtered.steps, filtered.nx);
    let mut s = if means_only {
        Estimates::nan_means(b, t, nx)
    } else {
        Estimates::nan(b, t, nx, false)
    };
    let exec = if b >= rayon::current_num_threads() && b > 1 {
        Exec::Serial
    } else {
        Exec::Rayon
    };
    let work = |(i, (sm, sc)): (usize, (&mut [T], Option<&mut [T]>))| {
        let (fm, fc) = (
            &filtered.mean[i * t * nx..(i + 1) * t * nx],
            &filtered.cov[i * t * nx * nx..(i + 1) * t * nx * nx],
        );
        track::retrodict_track(&m, i, t, fm, fc, means_only, scan, exec, sm, sc)
    };
    let covs: Slices<'_, T> = if means_only {
        (0..b).map(|_| None).collect()
    } else {
        s.cov.chunks_mut(t * nx * nx).map(Some).collect()
    };
    let it = s.mean.chunks_mut(t * nx).zip(covs).enumerate();
    if exec == Exec::Serial {
        it.collect::<Vec<_>>().into_par_iter().try_for_each(work)?;
    } else {
        it.into_iter().try_for_each(work)?;
    }
    Ok(s)
}
