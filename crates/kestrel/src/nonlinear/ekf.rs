//! The extended Kalman filter (Sarkka 2013, Bayesian Filtering and Smoothing, alg. 5.4)
//! and the Gaussian moment update every filter of the family ends in.
//!
//! Predict: `m' = f(m)`, `P' = F P F^T + Q` with `F` the exact Jacobian of `f` at `m`.
//! Update: `y = z - h(m)` (angle components wrapped to (-pi, pi]), `H` the Jacobian of
//! `h` at `m`, `S = H P H^T + R`, `C = P H^T`, then [`moment_update`].

use super::expr::Function;
use super::models::NonlinearModel;
use super::sigma::cholesky_into;
use nalgebra::{DMatrix, DVector};

/// The matrix that lost positive definiteness (`"S"`, `"P"`, ...), for
/// `Error::NotPositiveDefinite`.
pub(super) type Fail = &'static str;

/// Per-track scratch: tape registers and small buffers, allocated once per track.
#[derive(Default)]
pub(super) struct Work {
    pub regs: Vec<f64>,
    pub scratch: Vec<f64>,
    pub val: Vec<f64>,
    pub jac: Vec<f64>,
    pub pts: Vec<f64>,
    pub out: Vec<f64>,
    /// A Cholesky factor.
    pub l: Vec<f64>,
    /// The sigma-point moments ([`transform_into`](super::sigma::transform_into)).
    pub mean: Vec<f64>,
    pub cov: Vec<f64>,
    pub cross: Vec<f64>,
}

/// `a` wrapped to `(-pi, pi]`.
pub fn wrap(a: f64) -> f64 {
    use std::f64::consts::PI;
    if a > -PI && a <= PI {
        return a;
    }
    let r = a - 2.0 * PI * ((a + PI) / (2.0 * PI)).floor();
    if r == -PI {
        PI
    } else {
        r
    }
}

/// Wraps the `angles` components of `y` to `(-pi, pi]`.
pub fn wrap_angles(y: &mut [f64], angles: &[usize]) {
    for &a in angles {
        y[a] = wrap(y[a]);
    }
}

/// `(M + M^T) / 2` in place.
pub(super) fn symmetrize(p: &mut DMatrix<f64>) {
    let n = p.nrows();
    symmetrize_in(p.as_mut_slice(), n);
}

/// [`symmetrize`] of a square `p [n][n]`.
pub(super) fn symmetrize_in(p: &mut [f64], n: usize) {
    for i in 0..n {
        for j in 0..i {
            let v = 0.5 * (p[j * n + i] + p[i * n + j]);
            p[j * n + i] = v;
            p[i * n + j] = v;
        }
    }
}

/// The Gaussian update from moments: innovation `y`, its covariance `S` (R included) and
/// the cross covariance `C = Cov(x, z)`: `K = C S^-1`, `m += K y`, `P -= K S K^T`
/// (`= C K^T`, symmetrised), through the Cholesky factor `S = L L^T` (never an inverse).
/// Returns the log-likelihood `ln N(y; 0, S) = -(ny ln 2pi + |L^-1 y|^2)/2 - sum ln L_ii`.
pub(super) fn moment_update(
    m: &mut DVector<f64>,
    p: &mut DMatrix<f64>,
    y: &DVector<f64>,
    s: DMatrix<f64>,
    c: &DMatrix<f64>,
) -> Result<f64, Fail> {
    moment_update_in(
        m.as_mut_slice(),
        p.as_mut_slice(),
        y.as_slice(),
        s.as_slice(),
        c.as_slice(),
        &mut Vec::new(),
        &mut Vec::new(),
    )
}

/// [`moment_update`] on slices: `m [n]`, `p [n][n]` and `s [ny][ny]` symmetric, `c`
/// `[n][ny]` column-major; `l` and `kt` are scratch (the factor of `S` and `K^T`).
pub(super) fn moment_update_in(
    m: &mut [f64],
    p: &mut [f64],
    y: &[f64],
    s: &[f64],
    c: &[f64],
    l: &mut Vec<f64>,
    kt: &mut Vec<f64>,
) -> Result<f64, Fail> {
    with_sizes!(m.len(), y.len(), moment_update_sized(m, p, y, s, c, l, kt))
}

/// [`moment_update_in`] for state size `N` and measurement size `D` (0: the sizes of `m`
/// and `y`).
#[inline(always)]
fn moment_update_sized<const N: usize, const D: usize>(
    m: &mut [f64],
    p: &mut [f64],
    y: &[f64],
    s: &[f64],
    c: &[f64],
    l: &mut Vec<f64>,
    kt: &mut Vec<f64>,
) -> Result<f64, Fail> {
    let n = if N > 0 { N } else { m.len() };
    let ny = if D > 0 { D } else { y.len() };
    if !cholesky_into(s, ny, l) {
        return Err("S");
    }
    // K^T = S^-1 C^T, a column (one state component) at a time: L v = c_r, L^T k = v.
    kt.clear();
    kt.resize(n * ny, 0.0);
    for r in 0..n {
        let k = &mut kt[r * ny..(r + 1) * ny];
        for a in 0..ny {
            let mut v = c[a * n + r];
            for b in 0..a {
                v -= l[b * ny + a] * k[b];
            }
            k[a] = v / l[a * ny + a];
        }
        for a in (0..ny).rev() {
            let mut v = k[a];
            for b in a + 1..ny {
                v -= l[a * ny + b] * k[b];
            }
            k[a] = v / l[a * ny + a];
        }
    }
    // m += K y; P -= C K^T.
    for (r, mr) in m.iter_mut().enumerate() {
        let k = &kt[r * ny..(r + 1) * ny];
        let mut v = 0.0;
        for (ka, ya) in k.iter().zip(y) {
            v += ka * ya;
        }
        *mr += v;
    }
    for col in 0..n {
        let k = &kt[col * ny..(col + 1) * ny];
        for r in 0..n {
            let mut v = 0.0;
            for (a, ka) in k.iter().enumerate() {
                v += c[a * n + r] * ka;
            }
            p[col * n + r] -= v;
        }
    }
    symmetrize_in(p, n);
    // |L^-1 y|^2 by forward substitution.
    let mut e2 = 0.0;
    let mut logdet = 0.0;
    kt.truncate(0);
    kt.resize(ny, 0.0);
    for a in 0..ny {
        let mut v = y[a];
        for b in 0..a {
            v -= l[b * ny + a] * kt[b];
        }
        kt[a] = v / l[a * ny + a];
        e2 += kt[a] * kt[a];
        logdet += l[a * ny + a].ln();
    }
    Ok(-0.5 * (ny as f64 * crate::linalg::LN_2PI + e2) - logdet)
}

/// `f(m)` and its Jacobian `F` at `m`.
pub(super) fn f_jacobian(
    model: &NonlinearModel,
    m: &DVector<f64>,
    w: &mut Work,
) -> (DVector<f64>, DMatrix<f64>) {
    value_jacobian(&model.f, model.nx(), m, w)
}

/// `h(x)` and its Jacobian `H` at `x`.
pub(super) fn h_jacobian(
    model: &NonlinearModel,
    x: &DVector<f64>,
    w: &mut Work,
) -> (DVector<f64>, DMatrix<f64>) {
    value_jacobian(&model.h, model.ny(), x, w)
}

/// `g(x)` (`rows` values) and its Jacobian at `x`.
fn value_jacobian(
    g: &Function,
    rows: usize,
    x: &DVector<f64>,
    w: &mut Work,
) -> (DVector<f64>, DMatrix<f64>) {
    let n = x.len();
    w.val.resize(rows, 0.0);
    w.jac.resize(rows * n, 0.0);
    g.with_jacobian(
        x.as_slice(),
        &mut w.val,
        &mut w.jac,
        &mut w.scratch,
        &mut w.regs,
    );
    (
        DVector::from_column_slice(&w.val),
        DMatrix::from_row_slice(rows, n, &w.jac),
    )
}

/// The EKF prediction of `(m, P)` one step; returns the cross covariance
/// `D = Cov(x_{k-1}, x_k) = P F^T` (the RTS gain's numerator).
pub(super) fn predict(
    model: &NonlinearModel,
    m: &mut DVector<f64>,
    p: &mut DMatrix<f64>,
    w: &mut Work,
) -> DMatrix<f64> {
    let (fm, f) = f_jacobian(model, m, w);
    let d = &*p * f.transpose();
    *p = &f * &d + &model.q;
    symmetrize(p);
    *m = fm;
    d
}

/// The EKF update of `(m, P)` with `z`; returns the log-likelihood.
pub(super) fn update(
    model: &NonlinearModel,
    z: &[f64],
    m: &mut DVector<f64>,
    p: &mut DMatrix<f64>,
    w: &mut Work,
) -> Result<f64, Fail> {
    let (zhat, h) = h_jacobian(model, m, w);
    let mut y = DVector::from_column_slice(z) - zhat;
    wrap_angles(y.as_mut_slice(), &model.angles);
    let c = &*p * h.transpose();
    let s = &h * &c + &model.r;
    moment_update(m, p, &y, s, &c)
}

#[cfg(test)]
mod tests {
    use super::wrap;
    use std::f64::consts::PI;

    #[test]
    fn wrap_is_into_minus_pi_pi() {
        for (a, want) in [
            (0.0, 0.0),
            (PI, PI),
            (-PI, PI),
            (3.0 * PI, PI),
            (1.5 * PI, -0.5 * PI),
            (-1.5 * PI, 0.5 * PI),
            (7.0, 7.0 - 2.0 * PI),
        ] {
            assert!((wrap(a) - want).abs() < 1e-12, "{a}: {}", wrap(a));
        }
    }
}
