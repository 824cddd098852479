//! Sigma-point filters: the unscented Kalman filter with Wan & van der Merwe's scaled
//! points (Sarkka 2013, alg. 5.14) and the cubature Kalman filter (Arasaratnam & Haykin
//! 2009).
//!
//! Points from `(m, P)` with `P = L L^T` (lower Cholesky factor): `m`, and
//! `m +- sqrt(n + lambda) L_i` (UKF, `lambda = alpha^2 (n + kappa) - n`; weights
//! `W0m = lambda / (n + lambda)`, `W0c = W0m + 1 - alpha^2 + beta`,
//! `Wi = 1 / (2 (n + lambda))`) or `m +- sqrt(n) L_i` (CKF, `2n` points, weights `1/2n`).
//! Angle components of a transformed quantity are averaged as angles (the weighted
//! circular mean `atan2(sum W sin, sum W cos)`) and their deviations wrapped to
//! (-pi, pi].

use super::ekf::{moment_update, symmetrize, wrap, Fail, Work};
use super::expr::Function;
use super::models::NonlinearModel;
use nalgebra::{DMatrix, DVector};

/// A sigma-point rule for state size `n`.
#[derive(Clone, Debug)]
pub struct SigmaRule {
    n: usize,
    /// `sqrt(n + lambda)` (UKF) or `sqrt(n)` (CKF).
    scale: f64,
    /// Whether the central point `m` is one of the points (UKF).
    central: bool,
    wm: Vec<f64>,
    wc: Vec<f64>,
}

impl SigmaRule {
    /// The UKF's scaled points (`n + lambda = alpha^2 (n + kappa)` must be positive).
    pub fn unscented(n: usize, alpha: f64, beta: f64, kappa: f64) -> Result<Self, String> {
        let c = alpha * alpha * (n as f64 + kappa);
        if !(c > 0.0) || !c.is_finite() {
            return Err(format!(
                "alpha^2 (n + kappa) must be positive (n = {n}, alpha = {alpha}, kappa = {kappa})"
            ));
        }
        let lambda = c - n as f64;
        let wi = 1.0 / (2.0 * c);
        let mut wm = vec![lambda / c];
        let mut wc = vec![lambda / c + 1.0 - alpha * alpha + beta];
        wm.extend(std::iter::repeat_n(wi, 2 * n));
        wc.extend(std::iter::repeat_n(wi, 2 * n));
        Ok(SigmaRule {
            n,
            scale: c.sqrt(),
            central: true,
            wm,
            wc,
        })
    }

    /// The third-degree spherical-radial cubature rule.
    pub fn cubature(n: usize) -> Self {
        let w = 1.0 / (2 * n) as f64;
        SigmaRule {
            n,
            scale: (n as f64).sqrt(),
            central: false,
            wm: vec![w; 2 * n],
            wc: vec![w; 2 * n],
        }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.wm.len()
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        self.wm.is_empty()
    }

    /// The points' spread: `sqrt(n + lambda)` (UKF) or `sqrt(n)` (CKF).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Mean weights.
    pub fn wm(&self) -> &[f64] {
        &self.wm
    }

    /// Covariance weights.
    pub fn wc(&self) -> &[f64] {
        &self.wc
    }

    /// The points of `(m, P)`, `[len][n]` row-major into `pts`; `Err("P")` when `P` has
    /// no Cholesky factor.
    pub(super) fn points(
        &self,
        m: &DVector<f64>,
        p: &DMatrix<f64>,
        pts: &mut Vec<f64>,
    ) -> Result<(), Fail> {
        let n = self.n;
        let l = cholesky_psd(p).ok_or("P")?;
        pts.clear();
        if self.central {
            pts.extend(m.iter());
        }
        for sign in [1.0, -1.0] {
            for i in 0..n {
                for r in 0..n {
                    pts.push(m[r] + sign * self.scale * l[(r, i)]);
                }
            }
        }
        Ok(())
    }
}

/// The lower Cholesky factor of a positive semi-definite `P`: nalgebra's when `P` is
/// definite, else with a zero column where a pivot vanishes (to rounding).
fn cholesky_psd(p: &DMatrix<f64>) -> Option<DMatrix<f64>> {
    if let Some(c) = p.clone().cholesky() {
        return Some(c.l());
    }
    let n = p.nrows();
    let tol = 1e-12 * p.diagonal().amax().max(f64::MIN_POSITIVE);
    let mut l = DMatrix::<f64>::zeros(n, n);
    for j in 0..n {
        let mut d = p[(j, j)];
        for k in 0..j {
            d -= l[(j, k)] * l[(j, k)];
        }
        if d < -tol {
            return None;
        }
        if d <= tol {
            continue;
        }
        let d = d.sqrt();
        l[(j, j)] = d;
        for i in j + 1..n {
            let mut v = p[(i, j)];
            for k in 0..j {
                v -= l[(i, k)] * l[(j, k)];
            }
            l[(i, j)] = v / d;
        }
    }
    Some(l)
}

/// The unscented transform's moments of `y = g(x)` over the points `xs` (`[len][n]`) of
/// `(m, P)`: the mean `ybar` (angles as circular means), `Pyy = sum Wc dy dy^T` and the
/// cross covariance `C = sum Wc dx dy^T`.
pub(super) struct Moments {
    pub mean: DVector<f64>,
    pub cov: DMatrix<f64>,
    pub cross: DMatrix<f64>,
}

pub(super) fn transform(
    rule: &SigmaRule,
    g: &Function,
    angles: &[usize],
    m: &DVector<f64>,
    p: &DMatrix<f64>,
    w: &mut Work,
) -> Result<Moments, Fail> {
    let (n, d, np) = (rule.n, g.n_out(), rule.len());
    rule.points(m, p, &mut w.pts)?;
    w.out.resize(np * d, 0.0);
    g.value_batch(&w.pts, np, &mut w.out, &mut w.regs);
    let ys = &w.out;
    let mut mean = DVector::zeros(d);
    for (i, &wi) in rule.wm.iter().enumerate() {
        for r in 0..d {
            mean[r] += wi * ys[i * d + r];
        }
    }
    for &a in angles {
        let (mut s, mut c) = (0.0, 0.0);
        for (i, &wi) in rule.wm.iter().enumerate() {
            s += wi * ys[i * d + a].sin();
            c += wi * ys[i * d + a].cos();
        }
        mean[a] = s.atan2(c);
    }
    let mut cov = DMatrix::zeros(d, d);
    let mut cross = DMatrix::zeros(n, d);
    let mut dy = vec![0.0; d];
    let mut dx = vec![0.0; n];
    for (i, &wi) in rule.wc.iter().enumerate() {
        for r in 0..d {
            dy[r] = ys[i * d + r] - mean[r];
        }
        for &a in angles {
            dy[a] = wrap(dy[a]);
        }
        for r in 0..n {
            dx[r] = w.pts[i * n + r] - m[r];
        }
        for r in 0..d {
            for c in 0..=r {
                cov[(r, c)] += wi * dy[r] * dy[c];
            }
        }
        for r in 0..n {
            for c in 0..d {
                cross[(r, c)] += wi * dx[r] * dy[c];
            }
        }
    }
    for r in 0..d {
        for c in 0..r {
            cov[(c, r)] = cov[(r, c)];
        }
    }
    Ok(Moments { mean, cov, cross })
}

/// The sigma-point prediction of `(m, P)`; returns `D = Cov(x_{k-1}, x_k)`.
pub(super) fn predict(
    rule: &SigmaRule,
    model: &NonlinearModel,
    m: &mut DVector<f64>,
    p: &mut DMatrix<f64>,
    w: &mut Work,
) -> Result<DMatrix<f64>, Fail> {
    let t = transform(rule, &model.f, &[], m, p, w)?;
    *m = t.mean;
    *p = t.cov + &model.q;
    symmetrize(p);
    Ok(t.cross)
}

/// The sigma-point update of `(m, P)` with `z` (fresh points from the predicted
/// moments); returns the log-likelihood.
pub(super) fn update(
    rule: &SigmaRule,
    model: &NonlinearModel,
    z: &[f64],
    m: &mut DVector<f64>,
    p: &mut DMatrix<f64>,
    w: &mut Work,
) -> Result<f64, Fail> {
    let t = transform(rule, &model.h, &model.angles, m, p, w)?;
    let mut y = DVector::from_column_slice(z) - &t.mean;
    for &a in &model.angles {
        y[a] = wrap(y[a]);
    }
    let s = t.cov + &model.r;
    moment_update(m, p, &y, s, &t.cross)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_and_points_reproduce_the_moments() {
        let m = DVector::from_vec(vec![1.0, -2.0, 0.5]);
        let a = DMatrix::from_row_slice(3, 3, &[2.0, 0.3, 0.1, 0.3, 1.0, -0.2, 0.1, -0.2, 0.5]);
        for rule in [
            SigmaRule::unscented(3, 1.0, 0.0, 0.0).unwrap(),
            SigmaRule::unscented(3, 0.5, 2.0, 1.0).unwrap(),
            SigmaRule::cubature(3),
        ] {
            let sw: f64 = rule.wm().iter().sum();
            assert!((sw - 1.0).abs() < 1e-14);
            let mut pts = Vec::new();
            rule.points(&m, &a, &mut pts).unwrap();
            let mut mean = DVector::zeros(3);
            for (i, w) in rule.wm().iter().enumerate() {
                mean += DVector::from_column_slice(&pts[3 * i..3 * i + 3]) * *w;
            }
            assert!((&mean - &m).amax() < 1e-12);
            let mut cov = DMatrix::zeros(3, 3);
            // The points' spread (with the mean weights for the covariance: beta and
            // alpha only change W0c, whose deviation is zero).
            for (i, w) in rule.wc().iter().enumerate() {
                let d = DVector::from_column_slice(&pts[3 * i..3 * i + 3]) - &m;
                cov += &d * d.transpose() * *w;
            }
            assert!((&cov - &a).amax() < 1e-12);
        }
    }

    #[test]
    fn a_semidefinite_covariance_has_points() {
        let p = DMatrix::from_row_slice(2, 2, &[1.0, 1.0, 1.0, 1.0]);
        let l = cholesky_psd(&p).unwrap();
        assert!((&l * l.transpose() - &p).amax() < 1e-12);
        let neg = DMatrix::from_row_slice(2, 2, &[1.0, 0.0, 0.0, -1.0]);
        assert!(cholesky_psd(&neg).is_none());
    }
}
