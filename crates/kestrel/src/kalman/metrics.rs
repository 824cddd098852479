//! Consistency and accuracy measures: NEES, NIS, RMSE.

use crate::data::{Estimates, Measurements};
use crate::linalg::{cholesky_in_place, solve_lower_in_place, Real};

/// `e^T P^{-1} e` for an error `e` and covariance `P` (row-major), via Cholesky.
/// Returns NaN when `P` is not positive definite.
pub fn nees(err: &[f64], cov: &[f64]) -> f64 {
    let n = err.len();
    let mut l = cov.to_vec();
    if !cholesky_in_place(&mut l, n) {
        return f64::NAN;
    }
    let mut e = err.to_vec();
    solve_lower_in_place(&l, n, &mut e, 1);
    e.iter().map(|v| v * v).sum()
}

/// Mean normalised estimation error squared over all tracks and steps; `truth` is
/// `[tracks][steps][nx]`. Consistent estimates give a mean near `nx`.
pub fn mean_nees<T: Real>(est: &Estimates<T>, truth: &[T]) -> f64 {
    let nx = est.nx;
    let mut sum = 0.0;
    let mut n = 0usize;
    let mut err = vec![0.0; nx];
    for b in 0..est.tracks {
        for k in 0..est.steps {
            let m = est.mean_at(b, k);
            let o = (b * est.steps + k) * nx;
            for i in 0..nx {
                err[i] = truth[o + i].to_f64() - m[i].to_f64();
            }
            let c: Vec<f64> = est.cov_at(b, k).iter().map(|v| v.to_f64()).collect();
            sum += nees(&err, &c);
            n += 1;
        }
    }
    sum / n.max(1) as f64
}

/// Mean normalised innovation squared `y^T S^{-1} y` over the present measurements,
/// from the filter's per-step log-likelihoods: `-2 ll - ny ln 2 pi - ln det S` would need
/// `S`, so this takes the predicted moments and the model instead.
pub fn mean_nis<T: Real, M: crate::model::StateSpace + ?Sized>(
    model: &M,
    predicted: &Estimates<T>,
    z: &Measurements<T>,
) -> f64 {
    let (nx, ny) = (model.nx(), model.ny());
    let mut sum = 0.0;
    let mut n = 0usize;
    for b in 0..z.tracks {
        for k in 0..z.steps {
            if z.is_missing(b, k) {
                continue;
            }
            let (h, d, r) = model.observation(k);
            let x = nalgebra::DVector::from_iterator(
                nx,
                predicted.mean_at(b, k).iter().map(|v| v.to_f64()),
            );
            let p = nalgebra::DMatrix::from_row_iterator(
                nx,
                nx,
                predicted.cov_at(b, k).iter().map(|v| v.to_f64()),
            );
            let zk = nalgebra::DVector::from_iterator(ny, z.at(b, k).iter().map(|v| v.to_f64()));
            let y = zk - h * x - d;
            let s = h * p * h.transpose() + r;
            let s_rm: Vec<f64> = (0..ny)
                .flat_map(|i| (0..ny).map(move |j| (i, j)))
                .map(|(i, j)| s[(i, j)])
                .collect();
            sum += nees(y.as_slice(), &s_rm);
            n += 1;
        }
    }
    sum / n.max(1) as f64
}

/// Root mean square error over all tracks and steps of the components `comps` of the
/// estimate (`values` is `[tracks][steps][width]`, `truth` is `[tracks][steps][nx]`,
/// `comps[i]` names the truth component that `values` column `i` estimates).
pub fn rmse<T: Real>(values: &[T], width: usize, truth: &[T], nx: usize, comps: &[usize]) -> f64 {
    let n = values.len() / width;
    let mut sum = 0.0;
    let mut cnt = 0usize;
    for s in 0..n {
        for (i, &c) in comps.iter().enumerate() {
            let v = values[s * width + i].to_f64();
            if v.is_nan() {
                continue;
            }
            let e = v - truth[s * nx + c].to_f64();
            sum += e * e;
            cnt += 1;
        }
    }
    (sum / cnt.max(1) as f64).sqrt()
}
