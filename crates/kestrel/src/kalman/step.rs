//! One predict and one update on row-major slices, for any size.

use crate::linalg::{cholesky_in_place, solve_lower_in_place, Real, LN_2PI};
use crate::model::StateSpace;
use nalgebra::{DMatrix, DVector};

/// `m`'s entries row by row, in the working precision.
pub(crate) fn row_major<T: Real>(m: &DMatrix<f64>) -> Vec<T> {
    (0..m.nrows())
        .flat_map(|i| (0..m.ncols()).map(move |j| T::of(m[(i, j)])))
        .collect()
}

/// `v`'s entries in the working precision.
pub(crate) fn entries<T: Real>(v: &DVector<f64>) -> Vec<T> {
    v.iter().map(|x| T::of(*x)).collect()
}

/// The matrices of one step, row-major, in the working precision.
#[derive(Clone, Debug)]
pub(crate) struct StepMats<T> {
    pub f: Vec<T>,
    pub u: Vec<T>,
    pub q: Vec<T>,
    pub h: Vec<T>,
    pub d: Vec<T>,
    pub r: Vec<T>,
}

impl<T: Real> StepMats<T> {
    /// Step `k`'s `F, u, Q` and `H, d, R` of `model` in the working precision, row-major.
    pub(crate) fn of<M: StateSpace + ?Sized>(model: &M, k: usize) -> Self {
        let ((f, u, q), (h, d, r)) = (model.transition(k), model.observation(k));
        StepMats {
            f: row_major(f),
            u: entries(u),
            q: row_major(q),
            h: row_major(h),
            d: entries(d),
            r: row_major(r),
        }
    }
}

/// `out = A B` for `A` (`rows x n`) and `B` (`n x n`), each entry summed in ascending order.
#[inline]
fn product<T: Real>(rows: usize, n: usize, a: &[T], b: &[T], out: &mut [T]) {
    for i in 0..rows {
        for j in 0..n {
            let mut s = T::zero();
            for l in 0..n {
                s += a[i * n + l] * b[l * n + j];
            }
            out[i * n + j] = s;
        }
    }
}

/// `out = A B^T + C` for `A`, `B` (`rows x n`) where it is known to be symmetric: the
/// lower triangle computed (each entry from `C`'s, then summed in ascending order) and
/// mirrored.
#[inline]
fn sym_abt_plus<T: Real>(rows: usize, n: usize, a: &[T], b: &[T], c: &[T], out: &mut [T]) {
    for i in 0..rows {
        for j in 0..=i {
            let mut s = c[i * rows + j];
            for l in 0..n {
                s += a[i * n + l] * b[j * n + l];
            }
            out[i * rows + j] = s;
            out[j * rows + i] = s;
        }
    }
}

/// `x <- F x + u`, `P <- F P F^T + Q` (symmetric by construction: only the lower
/// triangle is computed and mirrored). `tmp` holds `nx x nx`.
#[inline]
pub(crate) fn predict<T: Real>(
    nx: usize,
    m: &StepMats<T>,
    x: &mut [T],
    p: &mut [T],
    tmp: &mut [T],
) {
    predict_parts(nx, &m.f, &m.u, &m.q, x, p, tmp)
}

/// [`predict`] with `F`, `u`, `Q` given apart (per-target intervals, control inputs).
#[inline]
pub(crate) fn predict_parts<T: Real>(
    nx: usize,
    f: &[T],
    u: &[T],
    q: &[T],
    x: &mut [T],
    p: &mut [T],
    tmp: &mut [T],
) {
    // tmp = F P ; P = tmp F^T + Q
    product(nx, nx, f, p, tmp);
    sym_abt_plus(nx, nx, tmp, f, q, p);
    // x = F x + u, using tmp's first row as scratch.
    for i in 0..nx {
        let mut s = u[i];
        for l in 0..nx {
            s += f[i * nx + l] * x[l];
        }
        tmp[i] = s;
    }
    x.copy_from_slice(&tmp[..nx]);
}

/// Measurement update with `z` (no NaN), returning the predictive log-likelihood
/// `log N(z; H x + d, S)`, or `None` when `S` is not positive definite.
///
/// With `S = H P H^T + R = L L^T` and `W = P H^T L^{-T}`, the gain is `K = W L^{-1}`, the
/// mean `x + W (L^{-1} y)`, and the covariance `P - W W^T`: the optimal-gain update
/// written so that it is symmetric by construction and needs no inverse (equal to the
/// Joseph form for the optimal gain).
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn update<T: Real>(
    nx: usize,
    ny: usize,
    m: &StepMats<T>,
    z: &[T],
    x: &mut [T],
    p: &mut [T],
    y: &mut [T],
    s: &mut [T],
    wt: &mut [T],
) -> Option<T> {
    update_parts(nx, ny, &m.h, &m.d, &m.r, z, x, p, y, s, wt, None)
}

/// Where [`update_parts`] copies the predicted measurement `H x + d` and the innovation
/// covariance `S` (full, before factoring).
pub(crate) struct Innovation<'a, T> {
    pub zhat: &'a mut [T],
    pub s: &'a mut [T],
}

/// [`update`] with `H`, `d`, `R` given apart (per-target noise); `keep` receives the
/// predicted measurement and `S`. `z` must have no NaN; callers that want only the
/// predicted measurement and `S` call [`innovation`].
#[inline]
pub(crate) fn update_parts<T: Real>(
    nx: usize,
    ny: usize,
    h: &[T],
    d: &[T],
    r: &[T],
    z: &[T],
    x: &mut [T],
    p: &mut [T],
    y: &mut [T],
    s: &mut [T],
    wt: &mut [T],
    keep: Option<Innovation<'_, T>>,
) -> Option<T> {
    innovation(nx, ny, h, d, r, z, x, p, y, s, wt, keep);
    correct(nx, ny, x, p, y, s, wt)
}

/// The second half of an update, after [`innovation`] filled `y`, `s` and `wt`: the
/// corrected `x` and `P` and the step's log-likelihood (`None` where `S` is not
/// positive definite; `s`, `y` and `wt` are left as scratch).
#[inline]
pub(crate) fn correct<T: Real>(
    nx: usize,
    ny: usize,
    x: &mut [T],
    p: &mut [T],
    y: &mut [T],
    s: &mut [T],
    wt: &mut [T],
) -> Option<T> {
    if !cholesky_in_place(s, ny) {
        return None;
    }
    // wt <- L^{-1} (H P) = W^T ; y <- L^{-1} y = e
    solve_lower_in_place(s, ny, wt, nx);
    solve_lower_in_place(s, ny, y, 1);
    let mut logdet = T::zero();
    let mut maha = T::zero();
    for a in 0..ny {
        logdet += s[a * ny + a].ln();
        maha += y[a] * y[a];
    }
    for i in 0..nx {
        let mut acc = T::zero();
        for a in 0..ny {
            acc += wt[a * nx + i] * y[a];
        }
        x[i] += acc;
    }
    for i in 0..nx {
        for j in 0..=i {
            let mut acc = T::zero();
            for a in 0..ny {
                acc += wt[a * nx + i] * wt[a * nx + j];
            }
            let v = p[i * nx + j] - acc;
            p[i * nx + j] = v;
            p[j * nx + i] = v;
        }
    }
    Some(-(T::of(ny as f64 * LN_2PI) + maha) * T::of(0.5) - logdet)
}

/// The first half of an update: `y = z - H x - d`, `wt = H P`, `S = H P H^T + R` (full),
/// copied into `keep` when given.
#[inline]
pub(crate) fn innovation<T: Real>(
    nx: usize,
    ny: usize,
    h: &[T],
    d: &[T],
    r: &[T],
    z: &[T],
    x: &[T],
    p: &[T],
    y: &mut [T],
    s: &mut [T],
    wt: &mut [T],
    mut keep: Option<Innovation<'_, T>>,
) {
    // y = z - H x - d ; wt = (P H^T)^T = H P  (ny x nx, P symmetric)
    for a in 0..ny {
        let mut hx = d[a];
        for l in 0..nx {
            hx += h[a * nx + l] * x[l];
        }
        if let Some(k) = &mut keep {
            k.zhat[a] = hx;
        }
        y[a] = z[a] - hx;
    }
    product(ny, nx, h, p, wt);
    // S = H (H P)^T + R
    sym_abt_plus(ny, nx, h, wt, r, s);
    if let Some(k) = keep {
        k.s.copy_from_slice(s);
    }
}
