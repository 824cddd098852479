//! A bound on the windowed filter's per-step error, and the window `window:auto` picks.
//!
//! The derivation is in `docs/likelihood.md`. In short: the window starting at `s`
//! predicts `z_t` (`t = s + N - 1`) with the data-free covariance `S^w_{N-1}` of its
//! own recursion from `(0, V I)`; the exact filter with `S_t`. Relative to the exact
//! filter's estimate at `s`, the window's start is wrong by `x^_s` in the mean and
//! `V I - P_s` in the covariance. Its actual error covariance `Sigma_i` follows the
//! recursion of a filter with the (suboptimal) gains `K^w_i` (the Joseph form):
//!
//! ```text
//! Sigma_0 = P_s + m m^T,   Sigma_i^+ = (I - K^w_i H) Sigma_i (I - K^w_i H)^T + K^w_i R K^w_i^T,
//! Sigma_{i+1} = F Sigma_i^+ F^T + Q
//! ```
//!
//! (computed as the difference `Sigma - P` and `P^w - P` from the exact covariances,
//! whose recursions have no cancellation: see `walk`).
//!
//! The exact innovation is orthogonal to the past, so `Var(y^w_t - y^_t) = H Sigma_{N-1}
//! H^T + R - S_t`. With `L L^T = S_t`, two numbers measure the window's error:
//! `eps_c = max |eig(L^{-1} S^w L^{-T} - I)|` (the covariance) and `eps_m^2 =
//! max eig(L^{-1} Var(y^w - y^) L^{-T})` (the mean). For an exact innovation whose
//! whitened square is at most `c` (a chi-square quantile) the log-likelihood error is at
//! most
//!
//! ```text
//! B = ny/2 (-ln(1 - eps_c)) + eps_c/(1 - eps_c) c (1 + eps_m)^2 / 2 + c eps_m + c eps_m^2 / 2
//! ```
//!
//! Both `eps` contract like the closed loop `F (I - K H)` to the power `N` (`eps_m`) and
//! its square (`eps_c`). The covariance and gain sequences do not depend on `N`, so one
//! forward pass gives `B` for every `N`. `m` is the size of the exact estimate at the
//! window's start (`x0` at `s = 0`; for later `s` the largest `|z - d|` of the data);
//! `P_s` runs over the exact filter's covariances from the prior to the steady state.

use crate::error::{Error, Result};
use crate::model::{spectral_radius, Model};
use nalgebra::DMatrix;

/// Per-step probability that an exact innovation exceeds the quantile used by the bound.
pub const ALPHA: f64 = 1e-9;
/// The longest window considered.
pub const MAX_WINDOW: usize = 1 << 16;

/// What [`choose_window`] picked.
#[derive(Clone, Copy, Debug)]
pub struct WindowChoice {
    /// The window length `N` (steps).
    pub window: usize,
    /// The bound at that window.
    pub bound: f64,
    /// Spectral radius of the steady-state closed loop `F (I - K H)`: the per-step
    /// contraction of the vague start's error.
    pub rho: f64,
}

/// `c` with `P(chi2_ny > c) <= ALPHA` (Laurent & Massart 2000:
/// `P(X >= ny + 2 sqrt(ny x) + 2 x) <= e^-x`, and `(sqrt(ny) + sqrt(2x))^2` is larger).
fn quantile(ny: usize) -> f64 {
    let x = (1.0 / ALPHA).ln();
    ((ny as f64).sqrt() + (2.0 * x).sqrt()).powi(2)
}

fn sym(m: DMatrix<f64>) -> DMatrix<f64> {
    (&m + m.transpose()) * 0.5
}

/// One Kalman step of a covariance: `(P^+ , K, S)` for the predicted `p`.
fn update(model: &Model, p: &DMatrix<f64>) -> Option<(DMatrix<f64>, DMatrix<f64>, DMatrix<f64>)> {
    let (h, r) = (&model.h, &model.r);
    let s = sym(h * p * h.transpose() + r);
    let k = s.clone().cholesky()?.solve(&(h * p)).transpose();
    let pu = sym(p - &k * &s * k.transpose());
    Some((pu, k, s))
}

fn predict(model: &Model, p: &DMatrix<f64>) -> DMatrix<f64> {
    sym(&model.f * p * model.f.transpose() + &model.q)
}

/// The exact filter's predicted covariances from the prior, until they settle (or
/// `limit` steps); the last one is the steady state when `settled`.
fn exact_covariances(model: &Model, limit: usize) -> Result<(Vec<DMatrix<f64>>, bool)> {
    let mut p = model.prior.p0.clone();
    let mut out = vec![p.clone()];
    for _ in 0..limit {
        let (pu, _, _) = update(model, &p).ok_or_else(not_pd)?;
        let next = predict(model, &pu);
        let done = (&next - &p).amax() <= 1e-13 * next.amax().max(f64::MIN_POSITIVE);
        p = next;
        out.push(p.clone());
        if done {
            return Ok((out, true));
        }
    }
    Ok((out, false))
}

fn not_pd() -> Error {
    Error::input("the window bound's innovation covariance is not positive definite")
}

/// The bound's two terms at one step, `(eps_c, eps_m)`, from the exact `S`, the window's
/// `S^w - S` and the variance of the predicted measurements' difference.
fn eps(s_exact: &DMatrix<f64>, ds: &DMatrix<f64>, dm: &DMatrix<f64>) -> Option<(f64, f64)> {
    let l = s_exact.clone().cholesky()?.l();
    let whiten = |m: &DMatrix<f64>| -> Option<DMatrix<f64>> {
        let a = l.solve_lower_triangular(m)?;
        Some(sym(l.solve_lower_triangular(&a.transpose())?))
    };
    let c = whiten(ds)?;
    let ec = c
        .symmetric_eigenvalues()
        .iter()
        .fold(0f64, |a, v| a.max(v.abs()));
    let m = whiten(dm)?;
    let em2 = m
        .symmetric_eigenvalues()
        .iter()
        .fold(0f64, |a, v| a.max(*v));
    Some((ec, em2.max(0.0).sqrt()))
}

fn combine(ny: usize, ec: f64, em: f64) -> f64 {
    if !(ec < 1.0) {
        return f64::INFINITY;
    }
    let c = quantile(ny);
    0.5 * ny as f64 * -(1.0 - ec).ln()
        + 0.5 * ec / (1.0 - ec) * c * (1.0 + em).powi(2)
        + c * em
        + 0.5 * c * em * em
}

/// Walks the window recursion forward, calling `visit(N, bound)` for `N = 1, 2, ...`
/// until it returns false or `max_n` is reached. Returns the steady-state closed-loop
/// spectral radius.
fn walk(
    model: &Model,
    vague: f64,
    scale: f64,
    max_n: usize,
    mut visit: impl FnMut(usize, f64) -> bool,
) -> Result<f64> {
    let nx = model.nx();
    let (exact, settled) = exact_covariances(model, 100_000)?;
    if !settled {
        return Err(Error::input(
            "the window bound does not converge: the exact filter's covariance does not settle \
             (is the model detectable?); use the exact method",
        ));
    }
    let steady = exact.last().expect("at least the prior").clone();
    let (_, kbar, _) = update(model, &steady).ok_or_else(not_pd)?;
    let closed = &model.f * (DMatrix::identity(nx, nx) - &kbar * &model.h);
    let rho = spectral_radius(&closed);
    // Window starts s: 0, 1, 2, 4, ... through the exact filter's transient, then the
    // steady state.
    let mut starts: Vec<usize> = vec![0];
    let mut s = 1;
    while s < exact.len() - 1 {
        starts.push(s);
        s *= 2;
    }
    starts.push(exact.len() - 1);
    // Per start s: the mean part D = Sigma - P (the window's error covariance beyond the
    // exact one) and the covariance part E = P^w - P, each propagated as a difference so
    // that values far below the covariances' rounding stay exact:
    //   D^+ = (I - K^w H) D (I - K^w H)^T + (K^w - K) S (K^w - K)^T,  D' = F D^+ F^T
    //   E'  = F (I - K^w H) E (I - K H)^T F^T
    // (the first from the Joseph form of a suboptimal gain, the second the difference of
    // two Riccati solutions).
    struct Track {
        s: usize,
        d: DMatrix<f64>,
        e: DMatrix<f64>,
    }
    let mut tracks: Vec<Track> = starts
        .iter()
        .map(|&s| {
            let d = if s == 0 {
                &model.prior.x0 * model.prior.x0.transpose()
            } else {
                DMatrix::identity(nx, nx) * (scale * scale)
            };
            Track {
                s,
                d,
                e: DMatrix::identity(nx, nx) * vague - &exact[s],
            }
        })
        .collect();
    let (f, h) = (&model.f, &model.h);
    let mut pw = DMatrix::<f64>::identity(nx, nx) * vague;
    let ident = DMatrix::<f64>::identity(nx, nx);
    let mut last = f64::NAN;
    let mut flat = 0;
    for n in 1..=max_n {
        let (pwu, kw, _) = update(model, &pw).ok_or_else(not_pd)?;
        let aw = &ident - &kw * h;
        let mut worst = 0f64;
        for t in &mut tracks {
            let p = &exact[(t.s + n - 1).min(exact.len() - 1)];
            let (_, k, s_exact) = update(model, p).ok_or_else(not_pd)?;
            let ds = sym(h * &t.e * h.transpose());
            let dm = sym(h * &t.d * h.transpose());
            let (ec, em) = eps(&s_exact, &ds, &dm).ok_or_else(not_pd)?;
            worst = worst.max(combine(model.ny(), ec, em));
            let dk = &kw - &k;
            let du = sym(&aw * &t.d * aw.transpose() + &dk * &s_exact * dk.transpose());
            t.d = sym(f * du * f.transpose());
            let a = &ident - &k * h;
            t.e = sym(f * &aw * &t.e * a.transpose() * f.transpose());
        }
        if !visit(n, worst) {
            return Ok(rho);
        }
        // The bound stops moving once every recursion has settled.
        if (worst - last).abs() <= 1e-12 * worst.abs() {
            flat += 1;
            if flat > 50 {
                return Ok(rho);
            }
        } else {
            flat = 0;
        }
        last = worst;
        pw = predict(model, &pwu);
    }
    Ok(rho)
}

/// The bound on `|window:N - exact|` per step (see the module docs). `scale` is the size
/// of the state estimates (the largest `|z - d|` of the data).
pub fn window_bound(model: &Model, n: usize, vague: f64, scale: f64) -> Result<f64> {
    let mut out = f64::INFINITY;
    // An early stop (the bound has levelled off) leaves the level in `out`.
    walk(model, vague, scale, n, |k, b| {
        out = b;
        k < n
    })?;
    Ok(out)
}

/// The bound for every window length `1..=max_n` (stops early once it is flat: the
/// remaining entries repeat the last).
pub fn bound_curve(model: &Model, vague: f64, scale: f64, max_n: usize) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(max_n);
    walk(model, vague, scale, max_n, |_, b| {
        out.push(b);
        true
    })?;
    let last = out.last().copied().unwrap_or(f64::INFINITY);
    out.resize(max_n, last);
    Ok(out)
}

/// The smallest window whose bound is at most `tol`.
pub fn choose_window(model: &Model, tol: f64, vague: f64, scale: f64) -> Result<WindowChoice> {
    let mut found: Option<(usize, f64)> = None;
    let mut best = f64::INFINITY;
    let rho = walk(model, vague, scale, MAX_WINDOW, |n, b| {
        best = best.min(b);
        if b <= tol {
            found = Some((n, b));
            return false;
        }
        true
    })?;
    match found {
        Some((window, bound)) => Ok(WindowChoice { window, bound, rho }),
        None => Err(Error::input(format!(
            "window:auto: the window bound does not converge to {tol:e} (it levels off at \
             {best:.3e}; the vague start's error contracts by {rho:.6} per step); \
             use the exact method"
        ))),
    }
}
