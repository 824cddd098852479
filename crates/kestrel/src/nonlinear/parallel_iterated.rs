//! `smooth --method parallel-iterated`: the fixed point of the iterated smoothers
//! (`iterated.rs`: the iterated extended RTS smoother for the EKF and IEKF, iterated
//! posterior linearisation for the UKF and CKF) with each pass's linearised filter and
//! RTS smoother run by the parallel scan, on the CPU or a GPU (Yaghoobi, Corenflos, Hassan
//! & Sarkka, "Parallel iterated extended and sigma-point Kalman smoothers", ICASSP 2021).
//!
//! Pass 1 is the method's own filter and RTS smoother on the CPU: the nominal trajectory,
//! as the sequential iterated smoothers start. Every later pass linearises every `f`
//! (step k-1 to k) and `h` (step k) about the previous pass's smoothed moments, all steps
//! at once, and runs [`crate::parallel::smooth_rts`] on that affine time-varying model
//! (`F = A`, `u = b`, `Q + Omega`; `H = A`, `d = b`, `R + Lambda`) on the device; on a
//! GPU the linearisation runs there too (`cuda::parallel_iterated`), so that only pass
//! 1's moments go up and the last pass's outputs come down. So after
//! N passes the result is the sequential iterated smoother's after N passes, to the
//! scan's rounding. Angle components of a measurement are unwrapped about the
//! linearisation's prediction `A m + b` (the linear scan does not wrap innovations): the
//! same as the sequential smoother's wrap while innovations stay within pi.
//!
//! The tracks are smoothed one after another, each with its steps in parallel: the method
//! is for long sequences; many short tracks run faster by `--method iterated`.

use super::ekf::{wrap, Fail, Work};
use super::iterated::{linearise, Affine};
use super::models::NonlinearModel;
use super::{NonlinearJob, NonlinearOptions, NonlinearProblem, NonlinearSmoother, Step};
use crate::data::{Estimates, Measurements};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::{Prior, StateSpace};
use crate::scan::ScanAlgorithm;
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// One track's affine model of one pass: `trans[k - 1]` carries step k-1 to k, `obs[k]`
/// measures step k.
struct AffineSeq {
    nx: usize,
    ny: usize,
    prior: Prior,
    trans: Vec<(DMatrix<f64>, DVector<f64>, DMatrix<f64>)>,
    obs: Vec<(DMatrix<f64>, DVector<f64>, DMatrix<f64>)>,
}

impl StateSpace for AffineSeq {
    fn nx(&self) -> usize {
        self.nx
    }
    fn ny(&self) -> usize {
        self.ny
    }
    fn transition(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        let t = &self.trans[k.max(1) - 1];
        (&t.0, &t.1, &t.2)
    }
    fn observation(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        let o = &self.obs[k];
        (&o.0, &o.1, &o.2)
    }
    fn prior(&self) -> &Prior {
        &self.prior
    }
    fn steps_covered(&self) -> Option<usize> {
        Some(self.obs.len())
    }
}

fn fail(track: usize, (step, what): (usize, Fail)) -> Error {
    Error::NotPositiveDefinite { track, step, what }
}

/// A one-track run's failure as track `track`'s of the batch.
fn of_track(e: Error, track: usize) -> Error {
    match e {
        Error::NotPositiveDefinite { step, what, .. } => {
            Error::NotPositiveDefinite { track, step, what }
        }
        e => e,
    }
}

/// The parallel iterated smoother of every track of `z` with `iterations` passes, the
/// later passes' scans on `device`; returns `(filtered, smoothed)` (the filtered moments
/// and log-likelihoods of the last pass's linearised filter).
pub(super) fn smooth<T: Real>(
    device: Device,
    step: &Step<'_>,
    model: &NonlinearModel,
    z: &Measurements<T>,
    opts: &NonlinearOptions,
) -> Result<(Estimates<T>, Estimates<T>)> {
    let iterations = opts.iterations;
    let (b, t, nx, ny) = (z.tracks(), z.steps(), model.nx(), model.ny());
    let n2 = nx * nx;
    let zf: Vec<f64> = z.data().iter().map(|v| v.to_f64()).collect();
    // Pass 1: the method's own filter and RTS smoother, in f64 on the CPU.
    let first = super::estimate_on::<f64>(
        Device::Cpu,
        &NonlinearProblem::Single(model.clone()),
        &Measurements::new(b, t, ny, zf.clone())?,
        opts,
        NonlinearJob::Smooth(NonlinearSmoother::Rts),
    )?;
    let smoothed = first
        .smoothed
        .expect("the RTS smoother returns smoothed moments");
    let (mut fmean, mut fcov) = (
        first.filtered.mean().to_vec(),
        first.filtered.cov().to_vec(),
    );
    let mut ll = first.filtered.loglik().unwrap_or(&[]).to_vec();
    let (mut smean, mut scov) = (smoothed.mean().to_vec(), smoothed.cov().to_vec());
    #[cfg(feature = "cuda")]
    if let (Device::Cuda(ordinal), true) = (device, iterations > 1) {
        return on_gpu(
            ordinal,
            step,
            model,
            &zf,
            (&smean, &scov),
            iterations - 1,
            t,
        );
    }
    for _ in 1..iterations {
        for i in 0..b {
            crate::cancel::check()?;
            let zt = &zf[i * t * ny..(i + 1) * t * ny];
            let (sm, sc) = (
                &smean[i * t * nx..(i + 1) * t * nx],
                &scov[i * t * n2..(i + 1) * t * n2],
            );
            let (affine, zu) = linearised(step, model, zt, sm, sc).map_err(|e| fail(i, e))?;
            let zm = Measurements::new(1, t, ny, zu.into_iter().map(T::of).collect())?;
            let (f, s) = crate::parallel::smooth_rts(device, &affine, &zm, ScanAlgorithm::Fastest)
                .map_err(|e| of_track(e, i))?;
            let put = |dst: &mut [f64], src: &[T]| {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = s.to_f64();
                }
            };
            put(&mut fmean[i * t * nx..(i + 1) * t * nx], f.mean());
            put(&mut fcov[i * t * n2..(i + 1) * t * n2], f.cov());
            if let Some(l) = f.loglik() {
                put(&mut ll[i * t..(i + 1) * t], l);
            }
            put(&mut smean[i * t * nx..(i + 1) * t * nx], s.mean());
            put(&mut scov[i * t * n2..(i + 1) * t * n2], s.cov());
        }
    }
    let cast = |v: Vec<f64>| -> Vec<T> { v.into_iter().map(T::of).collect() };
    Ok((
        Estimates::new(b, t, nx, cast(fmean), cast(fcov), Some(cast(ll)))?,
        Estimates::new(b, t, nx, cast(smean), cast(scov), None)?,
    ))
}

/// The later passes of every track on GPU `ordinal`, one track after another, each with
/// all its passes on the device (`nonlinear::cuda::parallel_iterated`), from the first
/// pass's smoothed moments `first` (f64, every track's).
#[cfg(feature = "cuda")]
fn on_gpu<T: Real>(
    ordinal: usize,
    step: &Step<'_>,
    model: &NonlinearModel,
    z: &[f64],
    (sm, sc): (&[f64], &[f64]),
    passes: usize,
    t: usize,
) -> Result<(Estimates<T>, Estimates<T>)> {
    use super::cuda::{MAX_NX, MAX_NY};
    let (nx, ny) = (model.nx(), model.ny());
    if nx > MAX_NX || ny > MAX_NY {
        return Err(Error::Unsupported(format!(
            "the parallel iterated smoother on cuda handles up to {MAX_NX} state and {MAX_NY} measurement components (this model: {nx} and {ny}); use --device cpu"
        )));
    }
    let rule = match step {
        Step::Sigma(r) => Some(*r),
        Step::Ekf | Step::Iekf(_) => None,
    };
    let b = z.len() / (t * ny).max(1);
    let (n1, n2) = (t * nx, t * nx * nx);
    let mut parts = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..b {
        crate::cancel::check()?;
        let (f, s) = super::cuda::parallel_iterated::later_passes::<T>(
            ordinal,
            model,
            rule,
            &z[i * t * ny..(i + 1) * t * ny],
            &sm[i * n1..(i + 1) * n1],
            &sc[i * n2..(i + 1) * n2],
            passes,
        )
        .map_err(|e| of_track(e, i))?;
        parts.0.extend_from_slice(f.mean());
        parts.1.extend_from_slice(f.cov());
        parts.2.extend_from_slice(f.loglik().unwrap_or(&[]));
        parts.3.extend_from_slice(s.mean());
        parts.4.extend_from_slice(s.cov());
    }
    let (fm, fc, ll, smean, scov) = parts;
    Ok((
        Estimates::new(b, t, nx, fm, fc, Some(ll))?,
        Estimates::new(b, t, nx, smean, scov, None)?,
    ))
}

/// One track's affine model about its smoothed moments `sm` [T][nx], `sc` [T][nx][nx]
/// (every step at once), and its measurements with angles unwrapped about the
/// linearisation's predictions.
fn linearised(
    step: &Step<'_>,
    model: &NonlinearModel,
    z: &[f64],
    sm: &[f64],
    sc: &[f64],
) -> std::result::Result<(AffineSeq, Vec<f64>), (usize, Fail)> {
    let (nx, ny) = (model.nx(), model.ny());
    let n2 = nx * nx;
    let t = z.len() / ny;
    type Pair = (Option<Affine>, Option<Affine>);
    let lin: Vec<Pair> = (0..t)
        .into_par_iter()
        .map_init(Work::default, |w, k| {
            let m = DVector::from_column_slice(&sm[k * nx..(k + 1) * nx]);
            let p = DMatrix::from_column_slice(nx, nx, &sc[k * n2..(k + 1) * n2]);
            let f = if k + 1 < t {
                Some(linearise(step, model, false, &m, &p, w).map_err(|e| (k, e))?)
            } else {
                None
            };
            let missing = z[k * ny..(k + 1) * ny].iter().any(|v| v.is_nan());
            let h = if missing {
                None
            } else {
                Some(linearise(step, model, true, &m, &p, w).map_err(|e| (k, e))?)
            };
            Ok((f, h))
        })
        .collect::<std::result::Result<_, (usize, Fail)>>()?;
    let mut zu = z.to_vec();
    let mut trans = Vec::with_capacity(t.saturating_sub(1));
    let mut obs = Vec::with_capacity(t);
    for (k, (f, h)) in lin.into_iter().enumerate() {
        if let Some(f) = f {
            trans.push((f.a, f.b, &model.q + &f.omega));
        }
        match h {
            Some(h) => {
                let m = DVector::from_column_slice(&sm[k * nx..(k + 1) * nx]);
                let yhat = &h.a * &m + &h.b;
                for &a in &model.angles {
                    let i = k * ny + a;
                    zu[i] = yhat[a] + wrap(z[i] - yhat[a]);
                }
                obs.push((h.a, h.b, &model.r + &h.omega));
            }
            // A missing step is not measured: any matrices do.
            None => obs.push((DMatrix::zeros(ny, nx), DVector::zeros(ny), model.r.clone())),
        }
    }
    if trans.is_empty() {
        // One step: no transition is used, but the model must have one.
        trans.push((
            DMatrix::identity(nx, nx),
            DVector::zeros(nx),
            model.q.clone(),
        ));
    }
    Ok((
        AffineSeq {
            nx,
            ny,
            prior: model.prior.clone(),
            trans,
            obs,
        },
        zu,
    ))
}

/// One track's affine model about its smoothed moments `sm` `[t][nx]`, `sc`
/// `[t][nx][nx]` as the GPU's parallel scan reads it: per step `F [nx][nx]`, `u [nx]`,
/// `Q [nx][nx]`, `H [ny][nx]`, `d [ny]`, `R [ny][ny]` (row-major, one record after the
/// other), and the measurements `z` `[t][ny]` with angles unwrapped; the CPU's, for the
/// tests of the device's linearisation (`kernels/linearise.cu`).
#[doc(hidden)]
pub fn linearised_records(
    model: &NonlinearModel,
    opts: &NonlinearOptions,
    z: &[f64],
    sm: &[f64],
    sc: &[f64],
) -> Result<(Vec<f64>, Vec<f64>)> {
    let rule = super::rule_for(opts, model.nx())?;
    let step = super::step_of(opts, rule.as_ref());
    let (affine, zu) = linearised(&step, model, z, sm, sc).map_err(|e| fail(0, e))?;
    let t = z.len() / model.ny();
    let conv = crate::kalman::dense::ConvertedModel::<f64>::new(&affine, t);
    let mut rec = Vec::new();
    for k in 0..t {
        let s = conv.at(k);
        for part in [&s.f, &s.u, &s.q, &s.h, &s.d, &s.r] {
            rec.extend_from_slice(part);
        }
    }
    Ok((rec, zu))
}
