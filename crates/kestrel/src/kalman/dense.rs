//! The general Kalman filter and RTS smoother: any state and measurement size, per-step
//! (time-varying) matrices, one track at a time on row-major slices.
//!
//! This is the reference every other path is tested against. All buffers are allocated
//! once per track ([`Workspace`]); the step loop does not allocate.

use super::inputs::{TrackInputs, TrackModel};
use super::step::{entries, predict, row_major, update, StepMats};
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::linalg::{cholesky_in_place, solve_lower_in_place, solve_upper_t_in_place, Real};
use crate::model::StateSpace;

/// The model's matrices converted once to the working precision, row-major.
pub(crate) struct ConvertedModel<T> {
    pub nx: usize,
    pub ny: usize,
    pub steps: Vec<StepMats<T>>,
    pub x0: Vec<T>,
    pub p0: Vec<T>,
    /// True when every step has the same matrices (then `steps.len() == 1`).
    invariant: bool,
}

impl<T: Real> ConvertedModel<T> {
    /// Converts the first `steps` steps of `model` (all of them if it is time-invariant).
    pub fn new<M: StateSpace + ?Sized>(model: &M, steps: usize) -> Self {
        let invariant = model.as_invariant().is_some();
        let n = if invariant { 1 } else { steps };
        let conv = (0..n).map(|k| StepMats::of(model, k)).collect();
        let p = model.prior();
        ConvertedModel {
            nx: model.nx(),
            ny: model.ny(),
            steps: conv,
            x0: entries(&p.x0),
            p0: row_major(&p.p0),
            invariant,
        }
    }

    #[inline]
    pub fn at(&self, k: usize) -> &StepMats<T> {
        if self.invariant {
            &self.steps[0]
        } else {
            &self.steps[k]
        }
    }
}

/// Per-track scratch space, allocated once.
pub(crate) struct Workspace<T> {
    pub x: Vec<T>,
    pub p: Vec<T>,
    pub tmp: Vec<T>,
    pub y: Vec<T>,
    pub s: Vec<T>,
    pub wt: Vec<T>,
}

impl<T: Real> Workspace<T> {
    pub fn new(nx: usize, ny: usize) -> Self {
        Workspace {
            x: vec![T::zero(); nx],
            p: vec![T::zero(); nx * nx],
            tmp: vec![T::zero(); nx * nx],
            y: vec![T::zero(); ny],
            s: vec![T::zero(); ny * ny],
            wt: vec![T::zero(); ny * nx],
        }
    }
}

/// Where one track's outputs go: slices of the batch's estimates.
pub(crate) struct TrackOut<'a, T> {
    pub mean: &'a mut [T],
    pub cov: &'a mut [T],
    pub loglik: &'a mut [T],
    pub pred_mean: Option<&'a mut [T]>,
    pub pred_cov: Option<&'a mut [T]>,
    /// Keep every step (`true`) or only the final state (`false`: the slices hold one step
    /// and `loglik[0]` receives the track's total).
    pub keep_all: bool,
}

/// Filters one track. `z` is `[steps][ny]`; `tm`, when given, is the track's view of
/// the model with its per-track inputs (set to `track`).
pub(crate) fn filter_track<T: Real>(
    m: &ConvertedModel<T>,
    mut tm: Option<&mut TrackModel<'_, T>>,
    track: usize,
    z: &[T],
    steps: usize,
    ws: &mut Workspace<T>,
    out: TrackOut<'_, T>,
) -> Result<()> {
    let (nx, ny) = (m.nx, m.ny);
    let TrackOut {
        mean,
        cov,
        loglik,
        mut pred_mean,
        mut pred_cov,
        keep_all,
    } = out;
    match tm.as_deref() {
        Some(t) => {
            ws.x.copy_from_slice(&t.x0);
            ws.p.copy_from_slice(&t.p0);
        }
        None => {
            ws.x.copy_from_slice(&m.x0);
            ws.p.copy_from_slice(&m.p0);
        }
    }
    let mut total = T::zero();
    for k in 0..steps {
        let mats = match tm.as_deref_mut() {
            Some(t) => t.at(k),
            None => m.at(k),
        };
        if k > 0 {
            predict(nx, mats, &mut ws.x, &mut ws.p, &mut ws.tmp);
        }
        if let (Some(pm), Some(pc)) = (pred_mean.as_deref_mut(), pred_cov.as_deref_mut()) {
            pm[k * nx..(k + 1) * nx].copy_from_slice(&ws.x);
            pc[k * nx * nx..(k + 1) * nx * nx].copy_from_slice(&ws.p);
        }
        let zk = &z[k * ny..(k + 1) * ny];
        let ll = if zk.iter().any(|v| v.is_nan_value()) {
            T::zero()
        } else {
            update(
                nx, ny, mats, zk, &mut ws.x, &mut ws.p, &mut ws.y, &mut ws.s, &mut ws.wt,
            )
            .ok_or(Error::NotPositiveDefinite {
                track,
                step: k,
                what: "innovation covariance S",
            })?
        };
        total += ll;
        if keep_all {
            mean[k * nx..(k + 1) * nx].copy_from_slice(&ws.x);
            cov[k * nx * nx..(k + 1) * nx * nx].copy_from_slice(&ws.p);
            loglik[k] = ll;
        }
    }
    if !keep_all {
        mean.copy_from_slice(&ws.x);
        cov.copy_from_slice(&ws.p);
        loglik[0] = total;
    }
    Ok(())
}

/// Rauch-Tung-Striebel smoothing of one track in place: `mean` and `cov` hold the
/// filtered moments `[steps][nx]`, `[steps][nx][nx]` on entry and the smoothed ones on
/// exit.
///
/// With `x_{k+1|k} = F x_k + u`, `P_{k+1|k} = F P_k F^T + Q` (the matrices of step k+1):
/// `C_k = P_k F^T P_{k+1|k}^{-1}`, `x^s_k = x_k + C_k (x^s_{k+1} - x_{k+1|k})`,
/// `P^s_k = P_k + C_k (P^s_{k+1} - P_{k+1|k}) C_k^T` (Rauch, Tung & Striebel 1965;
/// Sarkka, *Bayesian Filtering and Smoothing*, Theorem 8.2). `C_k^T` is obtained by a
/// Cholesky solve `P_{k+1|k} C_k^T = F P_k`, never by an inverse. `tm` as in
/// [`filter_track`].
pub(crate) fn smooth_track<T: Real>(
    m: &ConvertedModel<T>,
    mut tm: Option<&mut TrackModel<'_, T>>,
    track: usize,
    steps: usize,
    mean: &mut [T],
    cov: &mut [T],
    ws: &mut RtsWorkspace<T>,
) -> Result<()> {
    let nx = m.nx;
    let n2 = nx * nx;
    for k in (0..steps.saturating_sub(1)).rev() {
        let mats = match tm.as_deref_mut() {
            Some(t) => t.at(k + 1),
            None => m.at(k + 1),
        };
        let f = &mats.f;
        let (head, tail) = mean.split_at_mut((k + 1) * nx);
        let xk = &mut head[k * nx..];
        let xs1 = &tail[..nx];
        let (chead, ctail) = cov.split_at_mut((k + 1) * n2);
        let pk = &mut chead[k * n2..];
        let ps1 = &ctail[..n2];
        // fp = F P_k ; xp = F x_k + u ; pp = fp F^T + Q
        for i in 0..nx {
            let mut s = mats.u[i];
            for j in 0..nx {
                s += f[i * nx + j] * xk[j];
            }
            ws.xp[i] = s;
            for j in 0..nx {
                let mut s = T::zero();
                for l in 0..nx {
                    s += f[i * nx + l] * pk[l * nx + j];
                }
                ws.fp[i * nx + j] = s;
            }
        }
        for i in 0..nx {
            for j in 0..=i {
                let mut s = mats.q[i * nx + j];
                for l in 0..nx {
                    s += ws.fp[i * nx + l] * f[j * nx + l];
                }
                ws.pp[i * nx + j] = s;
                ws.pp[j * nx + i] = s;
            }
        }
        ws.chol.copy_from_slice(&ws.pp);
        if !cholesky_in_place(&mut ws.chol, nx) {
            return Err(Error::NotPositiveDefinite {
                track,
                step: k + 1,
                what: "predicted covariance P(k+1|k) in the smoother",
            });
        }
        // ct = C^T = P_{k+1|k}^{-1} F P_k  (nx x nx)
        ws.ct.copy_from_slice(&ws.fp);
        solve_lower_in_place(&ws.chol, nx, &mut ws.ct, nx);
        solve_upper_t_in_place(&ws.chol, nx, &mut ws.ct, nx);
        // x^s_k = x_k + C (xs1 - xp)
        for i in 0..nx {
            ws.dx[i] = xs1[i] - ws.xp[i];
        }
        for i in 0..nx {
            let mut s = T::zero();
            for j in 0..nx {
                s += ws.ct[j * nx + i] * ws.dx[j];
            }
            xk[i] += s;
        }
        // P^s_k = P_k + C (Ps1 - Pp) C^T ; dp = Ps1 - Pp ; t = dp C^T (= dp ct)
        for i in 0..n2 {
            ws.dp[i] = ps1[i] - ws.pp[i];
        }
        for i in 0..nx {
            for j in 0..nx {
                let mut s = T::zero();
                for l in 0..nx {
                    s += ws.dp[i * nx + l] * ws.ct[l * nx + j];
                }
                ws.t[i * nx + j] = s;
            }
        }
        for i in 0..nx {
            for j in 0..=i {
                let mut s = T::zero();
                for l in 0..nx {
                    s += ws.ct[l * nx + i] * ws.t[l * nx + j];
                }
                let v = pk[i * nx + j] + s;
                let w = pk[j * nx + i] + s;
                let sym = (v + w) * T::of(0.5);
                pk[i * nx + j] = sym;
                pk[j * nx + i] = sym;
            }
        }
    }
    Ok(())
}

/// Scratch space of the smoother, allocated once per track.
pub(crate) struct RtsWorkspace<T> {
    xp: Vec<T>,
    dx: Vec<T>,
    fp: Vec<T>,
    pp: Vec<T>,
    chol: Vec<T>,
    ct: Vec<T>,
    dp: Vec<T>,
    t: Vec<T>,
}

impl<T: Real> RtsWorkspace<T> {
    pub fn new(nx: usize) -> Self {
        let z = |n| vec![T::zero(); n];
        RtsWorkspace {
            xp: z(nx),
            dx: z(nx),
            fp: z(nx * nx),
            pp: z(nx * nx),
            chol: z(nx * nx),
            ct: z(nx * nx),
            dp: z(nx * nx),
            t: z(nx * nx),
        }
    }
}

/// Filters a batch track by track (rayon across tracks) into `est` (shaped for the
/// kept steps, with log-likelihoods) and, when given, `pred` (all steps). `inputs`:
/// per-track inputs, checked before.
pub(crate) fn filter_batch<T: Real>(
    m: &ConvertedModel<T>,
    inputs: Option<&TrackInputs<'_>>,
    z: &Measurements<T>,
    keep_all: bool,
    est: &mut Estimates<T>,
    pred: Option<&mut Estimates<T>>,
) -> Result<()> {
    use rayon::prelude::*;
    let (nx, ny, steps) = (m.nx, m.ny, z.steps);
    let kept = if keep_all { steps } else { 1 };
    let ll = est.loglik.as_mut().expect("shaped with log-likelihoods");
    type Parts<'a, T> = (Vec<Option<&'a mut [T]>>, Vec<Option<&'a mut [T]>>);
    let (pm_chunks, pc_chunks): Parts<'_, T> = match pred {
        Some(p) => (
            p.mean.chunks_mut(steps * nx).map(Some).collect(),
            p.cov.chunks_mut(steps * nx * nx).map(Some).collect(),
        ),
        None => (
            (0..z.tracks).map(|_| None).collect(),
            (0..z.tracks).map(|_| None).collect(),
        ),
    };
    est.mean
        .par_chunks_mut(kept * nx)
        .zip(est.cov.par_chunks_mut(kept * nx * nx))
        .zip(ll.par_chunks_mut(kept))
        .zip(pm_chunks.into_par_iter().zip(pc_chunks.into_par_iter()))
        .enumerate()
        .try_for_each_init(
            || {
                let tm = inputs.map(|i| TrackModel::new(m, i, z.tracks, steps));
                (Workspace::new(nx, ny), tm)
            },
            |(ws, tm), (b, (((mean, cov), loglik), (pm, pc)))| {
                crate::cancel::check()?;
                if let Some(t) = tm.as_mut() {
                    t.set_track(b);
                }
                filter_track(
                    m,
                    tm.as_mut(),
                    b,
                    z.track(b),
                    steps,
                    ws,
                    TrackOut {
                        mean,
                        cov,
                        loglik,
                        pred_mean: pm,
                        pred_cov: pc,
                        keep_all,
                    },
                )
            },
        )
}

/// Smooths a batch of filtered estimates track by track (rayon across tracks), with the
/// per-track inputs the filter had.
pub(crate) fn smooth_batch<T: Real>(
    m: &ConvertedModel<T>,
    inputs: Option<&TrackInputs<'_>>,
    est: &mut Estimates<T>,
) -> Result<()> {
    use rayon::prelude::*;
    let (nx, steps, tracks) = (m.nx, est.steps, est.tracks);
    est.mean
        .par_chunks_mut(steps * nx)
        .zip(est.cov.par_chunks_mut(steps * nx * nx))
        .enumerate()
        .try_for_each_init(
            || {
                let tm = inputs.map(|i| TrackModel::new(m, i, tracks, steps));
                (RtsWorkspace::new(nx), tm)
            },
            |(ws, tm), (b, (mean, cov))| {
                crate::cancel::check()?;
                if let Some(t) = tm.as_mut() {
                    t.set_track(b);
                }
                smooth_track(m, tm.as_mut(), b, steps, mean, cov, ws)
            },
        )
}
