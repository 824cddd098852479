//! The exact per-step log-likelihood: the sequential Kalman filter of `crate::kalman`
//! (its `predict` / `update` on row-major slices), keeping only the current state, with
//! an optional switch to the steady state.
//!
//! Steady state (as in Moore's sigvisa filter): for a time-invariant model the predicted
//! covariance `P_{k|k-1}` converges to the solution of the Riccati equation. Once it moves
//! by less than `tol` times its largest entry in one step, the gain `K = W L^{-1}`, the
//! Cholesky factor `L` of `S` and `log det S` are frozen and each step is the mean
//! recursion alone: `e = L^{-1} (z - H x - d)`, `ll = c - |e|^2 / 2`, `x <- F (x + W e) + u`
//! (for a companion-form `F`, a shift and one dot product). A missing measurement takes
//! the covariance off the steady state (`P_{k+1|k} = F P F^T + Q` without an update): the
//! full recursion resumes from the frozen `P` until it converges again.

use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::kalman::dense::{ConvertedModel, Workspace};
use crate::kalman::step::{predict, update, StepMats};
use crate::linalg::{solve_lower_in_place, Real, LN_2PI};
use crate::model::Model;
use rayon::prelude::*;

/// How `x <- F x + u` is computed: densely, or for a companion matrix (first row dense,
/// ones on the subdiagonal) as one dot product and a shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Structure {
    Dense,
    Companion,
}

impl Structure {
    pub fn of(f: &nalgebra::DMatrix<f64>) -> Structure {
        let n = f.nrows();
        let companion =
            (1..n).all(|i| (0..n).all(|j| f[(i, j)] == if j + 1 == i { 1.0 } else { 0.0 }));
        if n > 1 && companion {
            Structure::Companion
        } else {
            Structure::Dense
        }
    }
}

/// `x <- F x + u` with `tmp` (length `nx`) as scratch.
#[inline]
pub(crate) fn transition<T: Real>(
    st: Structure,
    nx: usize,
    m: &StepMats<T>,
    x: &mut [T],
    tmp: &mut [T],
) {
    match st {
        Structure::Companion => {
            let mut s = m.u[0];
            for l in 0..nx {
                s += m.f[l] * x[l];
            }
            for i in (1..nx).rev() {
                x[i] = x[i - 1] + m.u[i];
            }
            x[0] = s;
        }
        Structure::Dense => {
            for i in 0..nx {
                let mut s = m.u[i];
                for l in 0..nx {
                    s += m.f[i * nx + l] * x[l];
                }
                tmp[i] = s;
            }
            x.copy_from_slice(&tmp[..nx]);
        }
    }
}

/// The frozen steady-state update.
struct Steady<T> {
    /// Predicted covariance at the switch (restored after a missing measurement).
    p: Vec<T>,
    /// `L` of `S = L L^T` (row-major, lower).
    l: Vec<T>,
    /// `W^T = L^{-1} H P` (`ny x nx`): the gain is `W L^{-1}`.
    wt: Vec<T>,
    /// `-(ny ln 2 pi)/2 - sum ln L_ii`.
    c: T,
}

/// Log-likelihoods of every track of `z` into `out` (`[tracks][steps]`).
pub(crate) fn run<T: Real>(
    model: &Model,
    z: &Measurements<T>,
    steady: Option<f64>,
    out: &mut [T],
) -> Result<()> {
    let m = ConvertedModel::<T>::new(model, z.steps);
    let st = Structure::of(&model.f);
    let steps = z.steps;
    if let Some(p) = super::companion::applies(model) {
        return out
            .par_chunks_mut(steps)
            .enumerate()
            .try_for_each(|(b, o)| {
                crate::cancel::check()?;
                super::companion::track(p, &m, z.track(b), steady, o).map_err(|k| {
                    Error::NotPositiveDefinite {
                        track: b,
                        step: k,
                        what: "innovation covariance S",
                    }
                })
            });
    }
    out.par_chunks_mut(steps)
        .enumerate()
        .try_for_each(|(b, o)| {
            crate::cancel::check()?;
            track(&m, st, b, z.track(b), steady, o)
        })
}

/// One track: `z` is `[steps][ny]`, `out` receives `steps` values (fewer steps are
/// computed when `out` is shorter).
pub(crate) fn track<T: Real>(
    m: &ConvertedModel<T>,
    st: Structure,
    b: usize,
    z: &[T],
    steady: Option<f64>,
    out: &mut [T],
) -> Result<()> {
    let (nx, ny) = (m.nx, m.ny);
    let mats = m.at(0);
    let mut ws = Workspace::<T>::new(nx, ny);
    ws.x.copy_from_slice(&m.x0);
    ws.p.copy_from_slice(&m.p0);
    let mut prev = vec![T::zero(); nx * nx];
    let mut frozen: Option<Steady<T>> = None;
    let mut steady_now = false;
    // Two predictions compare only across an update: without one (a missing step) the
    // covariance may repeat itself (a stationary prior) far from the fixed point.
    let mut updated = false;
    let half_log2pi = T::of(0.5 * ny as f64 * LN_2PI);
    let tol = steady.map(T::of);
    let not_pd = |k| Error::NotPositiveDefinite {
        track: b,
        step: k,
        what: "innovation covariance S",
    };
    let mut k = 0;
    let steps = out.len();
    while k < steps {
        if steady_now {
            // The mean recursion alone, until the next missing measurement.
            let s = frozen.as_ref().expect("steady_now implies a frozen gain");
            while k < steps {
                if k > 0 {
                    transition(st, nx, mats, &mut ws.x, &mut ws.tmp);
                }
                let zk = &z[k * ny..(k + 1) * ny];
                if zk.iter().any(|v| v.is_nan_value()) {
                    out[k] = T::zero();
                    ws.p.copy_from_slice(&s.p);
                    steady_now = false;
                    updated = false;
                    k += 1;
                    break;
                }
                for a in 0..ny {
                    let mut hx = mats.d[a];
                    for l in 0..nx {
                        hx += mats.h[a * nx + l] * ws.x[l];
                    }
                    ws.y[a] = zk[a] - hx;
                }
                solve_lower_in_place(&s.l, ny, &mut ws.y, 1);
                let mut maha = T::zero();
                for a in 0..ny {
                    maha += ws.y[a] * ws.y[a];
                }
                for i in 0..nx {
                    let mut acc = T::zero();
                    for a in 0..ny {
                        acc += s.wt[a * nx + i] * ws.y[a];
                    }
                    ws.x[i] += acc;
                }
                out[k] = s.c - T::of(0.5) * maha;
                k += 1;
            }
            continue;
        }
        if k > 0 {
            predict(nx, mats, &mut ws.x, &mut ws.p, &mut ws.tmp);
        }
        // `prev` holds the previous step's predicted covariance.
        let converged = match tol {
            Some(tol) if updated => {
                let mut scale = T::zero();
                let mut diff = T::zero();
                for (a, b) in ws.p.iter().zip(&prev) {
                    scale = scale.max(a.abs());
                    diff = diff.max((*a - *b).abs());
                }
                diff <= tol * scale
            }
            _ => false,
        };
        if tol.is_some() {
            prev.copy_from_slice(&ws.p);
        }
        let zk = &z[k * ny..(k + 1) * ny];
        updated = !zk.iter().any(|v| v.is_nan_value());
        if !updated {
            out[k] = T::zero();
            k += 1;
            continue;
        }
        let p_pred = converged.then(|| ws.p.clone());
        out[k] = update(
            nx, ny, mats, zk, &mut ws.x, &mut ws.p, &mut ws.y, &mut ws.s, &mut ws.wt,
        )
        .ok_or_else(|| not_pd(k))?;
        if let Some(p) = p_pred {
            let mut logdet = T::zero();
            for a in 0..ny {
                logdet += ws.s[a * ny + a].ln();
            }
            frozen = Some(Steady {
                p,
                l: ws.s.clone(),
                wt: ws.wt.clone(),
                c: -half_log2pi - logdet,
            });
            steady_now = true;
        }
        k += 1;
    }
    Ok(())
}
