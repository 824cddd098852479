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

use super::ekf::{moment_update_in, symmetrize, wrap, Fail, Work};
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
    #[cfg(test)]
    pub(super) fn points(
        &self,
        m: &DVector<f64>,
        p: &DMatrix<f64>,
        pts: &mut Vec<f64>,
    ) -> Result<(), Fail> {
        let mut l = Vec::new();
        self.points_into(m.as_slice(), p.as_slice(), &mut l, pts)
    }

    /// [`points`](Self::points) from slices: `m [n]`, `p [n][n]` (symmetric), the
    /// Cholesky factor into `l` (column-major).
    fn points_into(
        &self,
        m: &[f64],
        p: &[f64],
        l: &mut Vec<f64>,
        pts: &mut Vec<f64>,
    ) -> Result<(), Fail> {
        let n = self.n;
        cholesky_psd(p, n, l).ok_or("P")?;
        pts.clear();
        if self.central {
            pts.extend_from_slice(m);
        }
        for sign in [1.0, -1.0] {
            for col in l.chunks_exact(n) {
                pts.extend(
                    m.iter()
                        .zip(col)
                        .map(|(&mr, &lr)| mr + sign * self.scale * lr),
                );
            }
        }
        Ok(())
    }
}

/// The lower Cholesky factor `L` (column-major, into `l`) of a symmetric `a [n][n]`,
/// column by column as `nalgebra`'s (each column less its products with the earlier
/// columns in order, then divided by its pivot); `false` when a pivot is not positive.
/// Written here so that the filters' steps factor their small matrices in their own
/// scratch, with no allocation a step.
pub(super) fn cholesky_into(a: &[f64], n: usize, l: &mut Vec<f64>) -> bool {
    factor(a, n, l, None)
}

/// The lower Cholesky factor of a positive semi-definite `p [n][n]` into `l`
/// (column-major): [`cholesky_into`]'s when `p` is definite, else with a zero column
/// where a pivot vanishes (to rounding); `None` when `p` is not semi-definite.
fn cholesky_psd(p: &[f64], n: usize, l: &mut Vec<f64>) -> Option<()> {
    if cholesky_into(p, n, l) {
        return Some(());
    }
    let amax = (0..n).map(|i| p[i * n + i].abs()).fold(0.0, f64::max);
    factor(p, n, l, Some(1e-12 * amax.max(f64::MIN_POSITIVE))).then_some(())
}

/// [`cholesky_into`] (`tol` None: every pivot positive) or, with `tol`, the
/// semi-definite factor: a pivot within `tol` of zero leaves its column zero, one below
/// `-tol` fails.
fn factor(a: &[f64], n: usize, l: &mut Vec<f64>, tol: Option<f64>) -> bool {
    // The common sizes known to the compiler (the same operations in the same order).
    match n {
        1 => factor_sized::<1>(a, n, l, tol),
        2 => factor_sized::<2>(a, n, l, tol),
        3 => factor_sized::<3>(a, n, l, tol),
        4 => factor_sized::<4>(a, n, l, tol),
        5 => factor_sized::<5>(a, n, l, tol),
        6 => factor_sized::<6>(a, n, l, tol),
        _ => factor_sized::<0>(a, n, l, tol),
    }
}

/// [`factor`] for size `N` (0: `n` at run time).
#[inline(always)]
fn factor_sized<const N: usize>(a: &[f64], n: usize, l: &mut Vec<f64>, tol: Option<f64>) -> bool {
    let n = if N > 0 { N } else { n };
    l.clear();
    if N > 0 && N <= SIZED {
        // The factor in an array of the stack, which the compiler keeps in registers.
        let mut f = [0.0; SIZED * SIZED];
        let ok = factor_columns(a, n, &mut f[..n * n], tol);
        l.extend_from_slice(&f[..n * n]);
        return ok;
    }
    l.resize(n * n, 0.0);
    factor_columns(a, n, l, tol)
}

/// The columns of [`factor`] into `l [n][n]` (zeroed on entry); inlined into
/// [`factor_sized`], where `n` is a constant for the common sizes.
#[inline(always)]
fn factor_columns(a: &[f64], n: usize, l: &mut [f64], tol: Option<f64>) -> bool {
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= l[k * n + j] * l[k * n + j];
        }
        match tol {
            None if !(d > 0.0) => return false,
            Some(t) if d < -t => return false,
            Some(t) if d <= t => continue,
            _ => {}
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut v = a[j * n + i];
            for k in 0..j {
                v -= l[k * n + i] * l[k * n + j];
            }
            l[j * n + i] = v / d;
        }
    }
    true
}

/// The unscented transform's moments of `y = g(x)` over the points `xs` (`[len][n]`) of
/// `(m, P)`: the mean `ybar` (angles as circular means), `Pyy = sum Wc dy dy^T` and the
/// cross covariance `C = sum Wc dx dy^T`.
pub(super) struct Moments {
    pub mean: DVector<f64>,
    pub cov: DMatrix<f64>,
    pub cross: DMatrix<f64>,
}

/// [`transform_into`], as matrices.
pub(super) fn transform(
    rule: &SigmaRule,
    g: &Function,
    angles: &[usize],
    m: &DVector<f64>,
    p: &DMatrix<f64>,
    w: &mut Work,
) -> Result<Moments, Fail> {
    transform_into(rule, g, angles, m.as_slice(), p.as_slice(), w, true)?;
    let (n, d) = (rule.n, g.n_out());
    Ok(Moments {
        mean: DVector::from_column_slice(&w.mean),
        cov: DMatrix::from_column_slice(d, d, &w.cov),
        cross: DMatrix::from_column_slice(n, d, &w.cross),
    })
}

/// The moments of [`Moments`] into `w.mean [d]`, `w.cov [d][d]` and `w.cross [n][d]`
/// (column-major), from `m [n]` and a symmetric `p [n][n]`. Every sum runs over the
/// points in order, from zero. The cross covariance only where `cross` (a filter's
/// prediction has no use for it).
pub(super) fn transform_into(
    rule: &SigmaRule,
    g: &Function,
    angles: &[usize],
    m: &[f64],
    p: &[f64],
    w: &mut Work,
    cross: bool,
) -> Result<(), Fail> {
    with_sizes!(
        rule.n,
        g.n_out(),
        transform_sized(rule, g, angles, m, p, w, cross)
    )
}

/// [`transform_into`] for state size `N` and output size `D` (0: the sizes of `rule` and
/// `g`, at run time).
#[inline(always)]
fn transform_sized<const N: usize, const D: usize>(
    rule: &SigmaRule,
    g: &Function,
    angles: &[usize],
    m: &[f64],
    p: &[f64],
    w: &mut Work,
    cross: bool,
) -> Result<(), Fail> {
    let n = if N > 0 { N } else { rule.n };
    let d = if D > 0 { D } else { g.n_out() };
    let np = rule.len();
    rule.points_into(m, p, &mut w.l, &mut w.pts)?;
    w.out.resize(np * d, 0.0);
    g.value_batch(&w.pts, np, &mut w.out, &mut w.regs);
    let wm = &rule.wm;
    let mean = &mut w.mean;
    mean.clear();
    mean.resize(d, 0.0);
    for (y, &wi) in w.out.chunks_exact(d).zip(wm) {
        for (mr, &yr) in mean.iter_mut().zip(y) {
            *mr += wi * yr;
        }
    }
    for &a in angles {
        let (mut s, mut c) = (0.0, 0.0);
        for (y, &wi) in w.out.chunks_exact(d).zip(wm) {
            s += wi * y[a].sin();
            c += wi * y[a].cos();
        }
        mean[a] = s.atan2(c);
    }
    // The deviations in place of the points and their images.
    for y in w.out.chunks_exact_mut(d) {
        for (yr, &mr) in y.iter_mut().zip(mean.iter()) {
            *yr -= mr;
        }
        for &a in angles {
            y[a] = wrap(y[a]);
        }
    }
    if cross {
        for x in w.pts.chunks_exact_mut(n) {
            for (xr, &mr) in x.iter_mut().zip(m) {
                *xr -= mr;
            }
        }
    }
    let (dy, dx) = (&w.out, &w.pts);
    let ncross = if cross { n * d } else { 0 };
    if N > 0 && D > 0 && N <= SIZED && D <= SIZED {
        // The sums in arrays of the stack, which the compiler keeps in registers.
        let (mut cov, mut cv, mut wy) = ([0.0; SIZED * SIZED], [0.0; SIZED * SIZED], [0.0; SIZED]);
        let (sums, cross_sums) = (&mut cov[..d * d], &mut cv[..ncross]);
        accumulate(n, d, dy, dx, &rule.wc, sums, cross_sums, &mut wy);
        w.cov.clear();
        w.cov.extend_from_slice(&cov[..d * d]);
        w.cross.clear();
        w.cross.extend_from_slice(&cv[..ncross]);
    } else {
        w.cov.clear();
        w.cov.resize(d * d, 0.0);
        w.cross.clear();
        w.cross.resize(ncross, 0.0);
        w.val.resize(n.max(d), 0.0);
        accumulate(n, d, dy, dx, &rule.wc, &mut w.cov, &mut w.cross, &mut w.val);
    }
    Ok(())
}

/// The largest state and output sizes that [`transform_sized`] sums on the stack.
const SIZED: usize = 6;

/// For state size `n` and output size `d` (constants where [`transform_sized`] inlines it
/// for the common sizes): the covariance `cov [d][d]` (`Pyy`, zeroed on entry, both
/// triangles on return) and, where `cv` is not empty, the cross covariance `cv [d][n]` of
/// the deviations `dy [np][d]` and `dx [np][n]` with weights `wc`; `wy`: scratch of `n`
/// or more. Each point's terms are added to every element in turn (independent sums,
/// which the compiler vectorizes); each element's sum still runs over the points in order.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn accumulate(
    n: usize,
    d: usize,
    dy: &[f64],
    dx: &[f64],
    wc: &[f64],
    cov: &mut [f64],
    cv: &mut [f64],
    wy: &mut [f64],
) {
    let cross = !cv.is_empty();
    for ((y, x), &wi) in dy.chunks_exact(d).zip(dx.chunks_exact(n)).zip(wc) {
        for r in 0..d {
            let wr = wi * y[r];
            for (c, &yc) in cov[r * d..r * d + r + 1].iter_mut().zip(y) {
                *c += wr * yc;
            }
        }
        if !cross {
            continue;
        }
        for (wxr, &xr) in wy.iter_mut().zip(x) {
            *wxr = wi * xr;
        }
        for (col, &yc) in cv.chunks_exact_mut(n).zip(y) {
            for (c, &wxr) in col.iter_mut().zip(wy.iter()) {
                *c += wxr * yc;
            }
        }
    }
    for r in 0..d {
        for c in 0..r {
            cov[c * d + r] = cov[r * d + c];
        }
    }
}

/// The sigma-point prediction of `(m, P)`; returns `D = Cov(x_{k-1}, x_k)`.
pub(super) fn predict(
    rule: &SigmaRule,
    model: &NonlinearModel,
    m: &mut DVector<f64>,
    p: &mut DMatrix<f64>,
    w: &mut Work,
) -> Result<DMatrix<f64>, Fail> {
    advance(rule, model, m, p, w, true)?;
    Ok(DMatrix::from_column_slice(rule.n, rule.n, &w.cross))
}

/// The sigma-point prediction of `(m, P)` in place, `D` into `w.cross` where `cross`.
pub(super) fn advance(
    rule: &SigmaRule,
    model: &NonlinearModel,
    m: &mut DVector<f64>,
    p: &mut DMatrix<f64>,
    w: &mut Work,
    cross: bool,
) -> Result<(), Fail> {
    transform_into(rule, &model.f, &[], m.as_slice(), p.as_slice(), w, cross)?;
    m.as_mut_slice().copy_from_slice(&w.mean);
    for ((pv, &cv), &qv) in p
        .as_mut_slice()
        .iter_mut()
        .zip(&w.cov)
        .zip(model.q.as_slice())
    {
        *pv = cv + qv;
    }
    symmetrize(p);
    Ok(())
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
    transform_into(
        rule,
        &model.h,
        &model.angles,
        m.as_slice(),
        p.as_slice(),
        w,
        true,
    )?;
    let Work {
        mean,
        cov,
        cross,
        scratch,
        l,
        ..
    } = w;
    // The innovation over the mean; its covariance over the image's, R added.
    for (v, &zv) in mean.iter_mut().zip(z) {
        *v = zv - *v;
    }
    for &a in &model.angles {
        mean[a] = wrap(mean[a]);
    }
    for (sv, &rv) in cov.iter_mut().zip(model.r.as_slice()) {
        *sv += rv;
    }
    moment_update_in(
        m.as_mut_slice(),
        p.as_mut_slice(),
        mean,
        cov,
        cross,
        l,
        scratch,
    )
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
        let mut l = Vec::new();
        cholesky_psd(p.as_slice(), 2, &mut l).unwrap();
        let l = DMatrix::from_column_slice(2, 2, &l);
        assert!((&l * l.transpose() - &p).amax() < 1e-12);
        let neg = DMatrix::from_row_slice(2, 2, &[1.0, 0.0, 0.0, -1.0]);
        assert!(cholesky_psd(neg.as_slice(), 2, &mut Vec::new()).is_none());
    }
}
