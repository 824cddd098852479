//! Iterated methods: the iterated extended Kalman filter's update (Gauss-Newton on the
//! MAP of one step; Bell & Cathey 1993, Sarkka & Svensson 2023 section 7.4), and the iterated
//! smoothers over the whole track: the iterated extended RTS smoother (Gauss-Newton on
//! the trajectory; Bell 1994) and iterated posterior linearisation (Garcia-Fernandez,
//! Svensson, Morelande & Sarkka 2017) for the sigma-point filters.
//!
//! IEKF update, from `x^(0) = m` (the predicted mean), for `i = 0 .. I-1`:
//!
//! ```text
//! H = dh/dx at x^(i),  S = H P H^T + R,  K = P H^T S^-1
//! x^(i+1) = m + K (z - h(x^(i)) - H (m - x^(i)))
//! ```
//!
//! then `m = x^(I)`, `P = P - K S K^T` with the last `K`, `S`. One iteration is the EKF.
//! The log-likelihood is the EKF's (linearised at the predicted mean).
//!
//! Iterated smoothers (`iterations` N): pass 1 is the filter and RTS smoother of the
//! method itself (EKF + ERTS, UKF/CKF + sigma-point RTS); each later pass linearises
//! every `f` (step k-1 to k) and `h` (step k) about the previous pass's smoothed
//! posterior and runs the Kalman filter and RTS smoother of that affine model:
//!
//! ```text
//! f(x) ~ A x + b + N(0, Omega),  h(x) ~ H x + c + N(0, Lambda)
//! ```
//!
//! EKF/IEKF: `A` the Jacobian at the smoothed mean, `b = f(xbar) - A xbar`, `Omega = 0`
//! (Gauss-Newton). UKF/CKF: statistical linear regression on sigma points of the
//! smoothed `(ms, Ps)`: `A = C^T Ps^-1`, `b = ybar - A ms`, `Omega = Pyy - A Ps A^T`.
//! The filtered moments and log-likelihoods returned are those of the last pass.

use super::ekf::{h_jacobian, moment_update, symmetrize, wrap_angles, Fail, Work};
use super::models::NonlinearModel;
use super::sigma::{transform, SigmaRule};
use super::smoother::{rts_step, rts_track};
use super::Step;
use nalgebra::{DMatrix, DVector};

/// The IEKF update of `(m, P)` with `z`, `iterations >= 1`; returns the log-likelihood
/// of the first (EKF) linearisation.
pub(super) fn iekf_update(
    model: &NonlinearModel,
    z: &[f64],
    m: &mut DVector<f64>,
    p: &mut DMatrix<f64>,
    iterations: usize,
    w: &mut Work,
) -> Result<f64, Fail> {
    let zv = DVector::from_column_slice(z);
    let mut x = m.clone();
    let mut ll = 0.0;
    for i in 0..iterations.max(1) {
        let (hx, h) = h_jacobian(model, &x, w);
        let mut y = &zv - hx - &h * (&*m - &x);
        wrap_angles(y.as_mut_slice(), &model.angles);
        let c = &*p * h.transpose();
        let s = &h * &c + &model.r;
        let (mut mi, mut pi) = (m.clone(), p.clone());
        let l = moment_update(&mut mi, &mut pi, &y, s, &c)?;
        if i == 0 {
            ll = l;
        }
        x = mi;
        if i + 1 == iterations.max(1) {
            *p = pi;
        }
    }
    *m = x;
    Ok(ll)
}

/// An affine Gaussian approximation `g(x) ~ A x + b + N(0, Omega)`.
pub(super) struct Affine {
    pub a: DMatrix<f64>,
    pub b: DVector<f64>,
    pub omega: DMatrix<f64>,
}

/// `g` linearised about `(m, P)`: by Jacobian at `m` (extended) or by statistical linear
/// regression on sigma points (posterior linearisation).
pub(super) fn linearise(
    step: &Step<'_>,
    model: &NonlinearModel,
    measurement: bool,
    m: &DVector<f64>,
    p: &DMatrix<f64>,
    w: &mut Work,
) -> Result<Affine, Fail> {
    match step {
        Step::Ekf | Step::Iekf(_) => {
            let (gx, a) = if measurement {
                h_jacobian(model, m, w)
            } else {
                super::ekf::f_jacobian(model, m, w)
            };
            let b = gx - &a * m;
            let n = a.nrows();
            Ok(Affine {
                a,
                b,
                omega: DMatrix::zeros(n, n),
            })
        }
        Step::Sigma(rule) => slr(rule, model, measurement, m, p, w),
    }
}

fn slr(
    rule: &SigmaRule,
    model: &NonlinearModel,
    measurement: bool,
    m: &DVector<f64>,
    p: &DMatrix<f64>,
    w: &mut Work,
) -> Result<Affine, Fail> {
    let (g, angles) = if measurement {
        (&model.h, &model.angles[..])
    } else {
        (&model.f, &[][..])
    };
    let t = transform(rule, g, angles, m, p, w)?;
    // A = C^T P^-1 (P is positive definite here: its points exist; a semi-definite P
    // falls back to a least-squares solve).
    let a = match p.clone().cholesky() {
        Some(ch) => ch.solve(&t.cross).transpose(),
        None => {
            let pinv = p.clone().pseudo_inverse(1e-12).map_err(|_| "P")?;
            t.cross.transpose() * pinv
        }
    };
    let b = &t.mean - &a * m;
    let mut omega = t.cov - &a * p * a.transpose();
    symmetrize(&mut omega);
    Ok(Affine { a, b, omega })
}

/// The iterated smoother of one track (see the module documentation). `fmean`, `fcov`,
/// `ll` receive the last pass's filtered moments and log-likelihoods; `smean`, `scov`
/// the smoothed ones.
#[allow(clippy::too_many_arguments)]
pub(super) fn iterated_smooth_track(
    step: &Step<'_>,
    model: &NonlinearModel,
    z: &[f64],
    iterations: usize,
    fmean: &mut [f64],
    fcov: &mut [f64],
    ll: &mut [f64],
    smean: &mut [f64],
    scov: &mut [f64],
    w: &mut Work,
) -> Result<(), (usize, Fail)> {
    let (nx, ny) = (model.nx(), model.ny());
    let n2 = nx * nx;
    let t = fmean.len() / nx;
    super::filter_track(step, model, z, fmean, fcov, ll, w)?;
    rts_track(step, model, fmean, fcov, smean, scov, w)?;
    let mean_at = |s: &[f64], k: usize| DVector::from_column_slice(&s[k * nx..(k + 1) * nx]);
    let cov_at = |s: &[f64], k: usize| DMatrix::from_column_slice(nx, nx, &s[k * n2..(k + 1) * n2]);
    for _ in 1..iterations {
        // Linearise about the previous pass's smoothed posterior.
        let mut fs = Vec::with_capacity(t);
        let mut hs = Vec::with_capacity(t);
        for k in 0..t {
            let (m, p) = (mean_at(smean, k), cov_at(scov, k));
            fs.push(if k + 1 < t {
                Some(linearise(step, model, false, &m, &p, w).map_err(|e| (k, e))?)
            } else {
                None
            });
            let missing = z[k * ny..(k + 1) * ny].iter().any(|v| v.is_nan());
            hs.push(if missing {
                None
            } else {
                Some(linearise(step, model, true, &m, &p, w).map_err(|e| (k, e))?)
            });
        }
        // The affine model's Kalman filter.
        let mut m = model.prior.x0.clone();
        let mut p = model.prior.p0.clone();
        let mut preds: Vec<(DVector<f64>, DMatrix<f64>, DMatrix<f64>)> = Vec::with_capacity(t);
        for k in 0..t {
            if k > 0 {
                let f = fs[k - 1].as_ref().expect("every step but the last has one");
                let d = &p * f.a.transpose();
                m = &f.a * &m + &f.b;
                p = &f.a * &d + &model.q + &f.omega;
                symmetrize(&mut p);
                preds.push((m.clone(), p.clone(), d));
            }
            ll[k] = match &hs[k] {
                None => 0.0,
                Some(h) => {
                    let zk = DVector::from_column_slice(&z[k * ny..(k + 1) * ny]);
                    let mut y = zk - &h.a * &m - &h.b;
                    wrap_angles(y.as_mut_slice(), &model.angles);
                    let c = &p * h.a.transpose();
                    let s = &h.a * &c + &model.r + &h.omega;
                    moment_update(&mut m, &mut p, &y, s, &c).map_err(|e| (k, e))?
                }
            };
            fmean[k * nx..(k + 1) * nx].copy_from_slice(m.as_slice());
            fcov[k * n2..(k + 1) * n2].copy_from_slice(p.as_slice());
        }
        // Its RTS smoother.
        smean[(t - 1) * nx..].copy_from_slice(&fmean[(t - 1) * nx..]);
        scov[(t - 1) * n2..].copy_from_slice(&fcov[(t - 1) * n2..]);
        for k in (0..t - 1).rev() {
            let (mp, pp, d) = &preds[k];
            let (ms, ps) = rts_step(
                &mean_at(fmean, k),
                &cov_at(fcov, k),
                mp,
                pp,
                d,
                &mean_at(smean, k + 1),
                &cov_at(scov, k + 1),
            )
            .map_err(|e| (k + 1, e))?;
            smean[k * nx..(k + 1) * nx].copy_from_slice(ms.as_slice());
            scov[k * n2..(k + 1) * n2].copy_from_slice(ps.as_slice());
        }
    }
    Ok(())
}
