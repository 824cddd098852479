//! Per-track and per-step inputs of the batch filter and smoother beyond the model: a
//! prior per track, control inputs `u` and measurement offsets `d` per track and step, a
//! measurement noise `R` per track and step, and sampling intervals per track (irregular
//! sampling) for the kinematic builders.
//!
//! On the CPU they run on the general path ([`super::dense`]): one track at a time, the
//! model's matrices of each step copied into a per-track buffer and overridden there, so
//! the step loop allocates nothing. On a GPU (`kalman::cuda`) the priors, `u`, `d` and
//! `R` are read by the batch kernels beside the measurements.

use super::dense::ConvertedModel;
use super::step::StepMats;
use crate::error::{Error, Result};
use crate::linalg::{cholesky_in_place, Real};
use crate::model::{Kinematics, StateSpace};

/// Per-track and per-step inputs of [`filter_with`](super::filter_with) and
/// [`smooth_with`](super::smooth_with), each optional (row-major, `f64`):
///
/// - a prior per track: means `x0` `[tracks][nx]` and covariances `p0`
///   `[tracks][nx][nx]` (symmetric positive semi-definite), in place of the model's
///   prior (late-starting tracks need no NaN padding of a shared prior);
/// - a measurement noise covariance per track and step, `r` `[tracks][steps][ny][ny]`
///   (symmetric positive definite), in place of the model's `R`;
/// - control inputs per track and step, `u` `[tracks][steps][nx]`, in place of the
///   model's `u` (entry `k` enters the prediction from step `k - 1` to step `k`:
///   `x_k = F x_{k-1} + u_k`; entry 0 is not used);
/// - measurement offsets per track and step, `d` `[tracks][steps][ny]`, in place of the
///   model's `d` (`z_k = H x_k + d_k + v_k`);
/// - sampling intervals with the model's kinematics ([`Kinematics`], the
///   [`constant_velocity`](crate::model::constant_velocity) and
///   [`constant_acceleration`](crate::model::constant_acceleration) builders): one per
///   track, `[tracks]`, or one per track and step, `[tracks][steps]` (entry `k` is the
///   interval from step `k - 1` to step `k`; entry 0 is not used). `F` and `Q` of each
///   prediction come from the interval; the model's `u`, `H`, `d` and `R` are kept.
///
/// ```
/// use kestrel::kalman::{filter_with, TrackInputs};
/// use kestrel::model::{constant_velocity, Kinematics};
/// use kestrel::{FilterOptions, Measurements};
///
/// let model = constant_velocity(1, 1.0, 0.5, 4.0, 100.0)?; // state [p, v], p measured
/// let z = Measurements::<f64>::new(2, 3, 1, vec![0.0, 1.1, 1.9, 5.0, 5.4, 6.1])?;
/// let x0 = [0.0, 1.0, 5.0, 0.5]; // track 0 near 0 moving at 1, track 1 near 5
/// let p0 = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0];
/// let kin = Kinematics::constant_velocity(1, 0.5)?;
/// let dt = [1.0, 0.5]; // track 1 is sampled twice as often
/// let inputs = TrackInputs::new().with_priors(&x0, &p0).with_dt(&kin, &dt);
/// let out = filter_with(&model, &z, &FilterOptions::default(), &inputs)?;
/// assert_eq!(out.filtered.steps(), 3);
/// # Ok::<(), kestrel::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct TrackInputs<'a> {
    /// Prior means per track, `[tracks][nx]` (with `p0`).
    pub x0: Option<&'a [f64]>,
    /// Prior covariances per track, `[tracks][nx][nx]` (with `x0`).
    pub p0: Option<&'a [f64]>,
    /// Measurement noise per track and step, `[tracks][steps][ny][ny]`.
    pub r: Option<&'a [f64]>,
    /// Control inputs per track and step, `[tracks][steps][nx]` (entry 0 not used).
    pub u: Option<&'a [f64]>,
    /// Measurement offsets per track and step, `[tracks][steps][ny]`.
    pub d: Option<&'a [f64]>,
    /// The kinematics and the sampling intervals, `[tracks]` or `[tracks][steps]`.
    pub dt: Option<(&'a Kinematics, &'a [f64])>,
}

impl<'a> TrackInputs<'a> {
    /// No per-track input: the model alone.
    pub fn new() -> Self {
        Self::default()
    }

    /// A prior per track: means `[tracks][nx]`, covariances `[tracks][nx][nx]`.
    #[must_use]
    pub fn with_priors(mut self, x0: &'a [f64], p0: &'a [f64]) -> Self {
        self.x0 = Some(x0);
        self.p0 = Some(p0);
        self
    }

    /// A measurement noise covariance per track and step, `[tracks][steps][ny][ny]`.
    #[must_use]
    pub fn with_r(mut self, r: &'a [f64]) -> Self {
        self.r = Some(r);
        self
    }

    /// Control inputs per track and step, `[tracks][steps][nx]`: entry `k` enters the
    /// prediction into step `k` (entry 0 is not used).
    #[must_use]
    pub fn with_u(mut self, u: &'a [f64]) -> Self {
        self.u = Some(u);
        self
    }

    /// Measurement offsets per track and step, `[tracks][steps][ny]`.
    #[must_use]
    pub fn with_d(mut self, d: &'a [f64]) -> Self {
        self.d = Some(d);
        self
    }

    /// Sampling intervals, `[tracks]` or `[tracks][steps]`, with the kinematics that give
    /// `F` and `Q` for an interval.
    #[must_use]
    pub fn with_dt(mut self, kin: &'a Kinematics, dt: &'a [f64]) -> Self {
        self.dt = Some((kin, dt));
        self
    }

    /// True when no input is given (the model alone).
    pub fn is_empty(&self) -> bool {
        self.x0.is_none()
            && self.p0.is_none()
            && self.r.is_none()
            && self.u.is_none()
            && self.d.is_none()
            && self.dt.is_none()
    }

    /// The inputs given, by name (for messages: "per-track priors, per-step R").
    pub(crate) fn names(&self) -> String {
        let mut v = Vec::new();
        if self.x0.is_some() || self.p0.is_some() {
            v.push("per-track priors (TrackInputs::x0/p0)");
        }
        if self.r.is_some() {
            v.push("per-step R (TrackInputs::r)");
        }
        if self.u.is_some() {
            v.push("per-step control inputs (TrackInputs::u)");
        }
        if self.d.is_some() {
            v.push("per-step measurement offsets (TrackInputs::d)");
        }
        if self.dt.is_some() {
            v.push("per-track sampling intervals (TrackInputs::dt)");
        }
        v.join(", ")
    }

    /// Checks every input against the model and the sizes of the batch.
    pub(crate) fn check<M: StateSpace + ?Sized>(
        &self,
        model: &M,
        tracks: usize,
        steps: usize,
    ) -> Result<()> {
        let (nx, ny) = (model.nx(), model.ny());
        let len = |what: &str, got: usize, per: &[usize]| -> Result<()> {
            let want = per
                .iter()
                .try_fold(1usize, |a, &b| a.checked_mul(b))
                .ok_or_else(|| Error::input(format!("{what}: the size overflows")))?;
            if got != want {
                let dims: Vec<String> = per.iter().map(|d| d.to_string()).collect();
                return Err(Error::input(format!(
                    "{what}: expected {} = {want} values, got {got}",
                    dims.join(" x ")
                )));
            }
            Ok(())
        };
        match (self.x0, self.p0) {
            (None, None) => {}
            (Some(x0), Some(p0)) => {
                len("per-track prior means x0", x0.len(), &[tracks, nx])?;
                len(
                    "per-track prior covariances p0",
                    p0.len(),
                    &[tracks, nx, nx],
                )?;
                for b in 0..tracks {
                    let x = &x0[b * nx..(b + 1) * nx];
                    let p = &p0[b * nx * nx..(b + 1) * nx * nx];
                    if x.iter().chain(p).any(|v| !v.is_finite()) {
                        return Err(Error::input(format!(
                            "track {b}: the prior has a value that is not finite"
                        )));
                    }
                    let m = nalgebra::DMatrix::from_fn(nx, nx, |i, j| p[i * nx + j]);
                    crate::model::check_psd(&format!("track {b}: P0"), &m)?;
                }
            }
            _ => {
                return Err(Error::input(
                    "per-track priors need both the means x0 and the covariances p0",
                ))
            }
        }
        if let Some(r) = self.r {
            len("per-step R", r.len(), &[tracks, steps, ny, ny])?;
            let mut l = vec![0.0; ny * ny];
            for (i, rk) in r.chunks_exact(ny * ny).enumerate() {
                let (b, k) = (i / steps, i % steps);
                let sym = (0..ny).all(|a| (0..a).all(|c| rk[a * ny + c] == rk[c * ny + a]));
                l.copy_from_slice(rk);
                if !rk.iter().all(|v| v.is_finite()) || !sym || !cholesky_in_place(&mut l, ny) {
                    return Err(Error::input(format!(
                        "per-step R of track {b}, step {k} is not a finite symmetric positive definite matrix"
                    )));
                }
            }
        }
        for (what, v, n) in [
            ("per-step control inputs u", self.u, nx),
            ("per-step measurement offsets d", self.d, ny),
        ] {
            let Some(v) = v else { continue };
            len(what, v.len(), &[tracks, steps, n])?;
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                let (b, k) = (i / n / steps, i / n % steps);
                return Err(Error::input(format!(
                    "{what} of track {b}, step {k}: component {} is not finite ({})",
                    i % n,
                    v[i]
                )));
            }
        }
        if let Some((kin, dt)) = self.dt {
            if kin.nx() != nx {
                return Err(Error::input(format!(
                    "the kinematics have {} state components, the model has {nx}",
                    kin.nx()
                )));
            }
            if model.as_invariant().is_none() {
                return Err(Error::Unsupported(
                    "per-track sampling intervals need a time-invariant model (a kinematic builder)"
                        .into(),
                ));
            }
            let per_step = if dt.len() == tracks {
                false
            } else {
                len(
                    "sampling intervals (one per track, or one per track and step)",
                    dt.len(),
                    &[tracks, steps],
                )?;
                true
            };
            for (i, &v) in dt.iter().enumerate() {
                if per_step && i % steps == 0 {
                    continue;
                }
                if !(v.is_finite() && v > 0.0) {
                    let at = if per_step {
                        format!("track {}, step {}", i / steps, i % steps)
                    } else {
                        format!("track {i}")
                    };
                    return Err(Error::input(format!(
                        "{at}: the sampling interval must be finite and positive, got {v}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// One track's view of the model with its inputs applied: the matrices of the current
/// step in a buffer of the track's own, and its prior.
pub(crate) struct TrackModel<'a, T> {
    base: &'a ConvertedModel<T>,
    inputs: &'a TrackInputs<'a>,
    track: usize,
    steps: usize,
    /// Intervals per track and step (else one per track).
    dt_per_step: bool,
    /// The matrices of the step last asked for.
    mats: StepMats<T>,
    /// The track's prior mean.
    pub x0: Vec<T>,
    /// The track's prior covariance.
    pub p0: Vec<T>,
}

impl<'a, T: Real> TrackModel<'a, T> {
    /// Buffers for one track of a batch of `tracks` x `steps` (allocated once per worker;
    /// [`TrackModel::set_track`] picks the track).
    pub fn new(
        base: &'a ConvertedModel<T>,
        inputs: &'a TrackInputs<'a>,
        tracks: usize,
        steps: usize,
    ) -> Self {
        TrackModel {
            base,
            inputs,
            track: 0,
            steps,
            dt_per_step: inputs.dt.is_some_and(|(_, d)| d.len() != tracks),
            mats: base.at(0).clone(),
            x0: base.x0.clone(),
            p0: base.p0.clone(),
        }
    }

    /// Switches to `track`: its prior, then its matrices step by step.
    pub fn set_track(&mut self, track: usize) {
        let nx = self.base.nx;
        self.track = track;
        match (self.inputs.x0, self.inputs.p0) {
            (Some(x0), Some(p0)) => {
                for (d, s) in self.x0.iter_mut().zip(&x0[track * nx..(track + 1) * nx]) {
                    *d = T::of(*s);
                }
                let n2 = nx * nx;
                for (d, s) in self.p0.iter_mut().zip(&p0[track * n2..(track + 1) * n2]) {
                    *d = T::of(*s);
                }
            }
            _ => {
                self.x0.copy_from_slice(&self.base.x0);
                self.p0.copy_from_slice(&self.base.p0);
            }
        }
    }

    /// The matrices of step `k` of the current track (the transition into `k`, the
    /// measurement at `k`).
    pub fn at(&mut self, k: usize) -> &StepMats<T> {
        let (nx, ny) = (self.base.nx, self.base.ny);
        let base = self.base.at(k);
        let (b, steps) = (self.track, self.steps);
        match self.inputs.dt {
            Some((kin, dt)) if k > 0 => {
                let v = if self.dt_per_step {
                    dt[b * steps + k]
                } else {
                    dt[b]
                };
                let blk = kin.block(v);
                for i in 0..nx {
                    for j in 0..nx {
                        let (f, q) = kin.entry(&blk, i, j);
                        self.mats.f[i * nx + j] = T::of(f);
                        self.mats.q[i * nx + j] = T::of(q);
                    }
                }
            }
            _ => {
                self.mats.f.copy_from_slice(&base.f);
                self.mats.q.copy_from_slice(&base.q);
            }
        }
        let over = |dst: &mut [T], src: Option<&[f64]>, own: &[T], n: usize| match src {
            Some(v) => {
                let at = (b * steps + k) * n;
                for (d, s) in dst.iter_mut().zip(&v[at..at + n]) {
                    *d = T::of(*s);
                }
            }
            None => dst.copy_from_slice(own),
        };
        over(&mut self.mats.u, self.inputs.u, &base.u, nx);
        self.mats.h.copy_from_slice(&base.h);
        over(&mut self.mats.d, self.inputs.d, &base.d, ny);
        match self.inputs.r {
            Some(r) => {
                let at = (b * steps + k) * ny * ny;
                for (d, s) in self.mats.r.iter_mut().zip(&r[at..at + ny * ny]) {
                    *d = T::of(*s);
                }
            }
            None => self.mats.r.copy_from_slice(&base.r),
        }
        &self.mats
    }
}
