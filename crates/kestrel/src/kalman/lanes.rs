//! The fast path of the CPU filter and smoother: a time-invariant model of one of the
//! common tracking sizes, tracks processed `L` at a time in SIMD lanes.
//!
//! Every quantity of the recursion is held as `[T; L]`, one entry per track, and every
//! arithmetic loop runs innermost over the lanes, so the compiler turns each scalar
//! operation of the textbook filter into one vector instruction across `L` tracks. Sizes
//! are const generics: all matrix loops are unrolled, nothing is allocated per step. The
//! arithmetic is that of [`super::step`] (same order of operations up to summation order),
//! and the tests compare the two paths.
//!
//! On x86-64 a copy compiled for AVX2 is chosen at run time when the processor has it.

use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::linalg::{Real, LN_2PI};
use crate::model::Model;
use rayon::prelude::*;

/// Tracks per SIMD group.
pub(crate) const L: usize = 8;

/// One value per lane.
pub(crate) type V<T> = [T; L];

/// The model in fixed-size arrays.
///
/// The products with `F` and `H` skip their exact zeros: kinematic models are mostly
/// zeros, the test is the same for every lane and every step (so branch prediction makes
/// it free), and dropping a `+ 0 * p` term leaves every result bit-identical.
#[derive(Clone)]
pub(crate) struct Fixed<T, const NX: usize, const NY: usize> {
    pub f: [[T; NX]; NX],
    pub u: [T; NX],
    pub q: [[T; NX]; NX],
    pub h: [[T; NX]; NY],
    pub d: [T; NY],
    pub r: [[T; NY]; NY],
    pub x0: [T; NX],
    pub p0: [[T; NX]; NX],
}

impl<T: Real, const NX: usize, const NY: usize> Fixed<T, NX, NY> {
    pub fn new(m: &Model) -> Self {
        let c = |v: f64| T::of(v);
        Fixed {
            f: std::array::from_fn(|i| std::array::from_fn(|j| c(m.f[(i, j)]))),
            u: std::array::from_fn(|i| c(m.u[i])),
            q: std::array::from_fn(|i| std::array::from_fn(|j| c(m.q[(i, j)]))),
            h: std::array::from_fn(|i| std::array::from_fn(|j| c(m.h[(i, j)]))),
            d: std::array::from_fn(|i| c(m.d[i])),
            r: std::array::from_fn(|i| std::array::from_fn(|j| c(m.r[(i, j)]))),
            x0: std::array::from_fn(|i| c(m.prior.x0[i])),
            p0: std::array::from_fn(|i| std::array::from_fn(|j| c(m.prior.p0[(i, j)]))),
        }
    }
}

/// Views `NX * NX` consecutive entries as a square array.
#[inline(always)]
fn as_square<T, const NX: usize>(v: &mut [T]) -> &mut [[T; NX]; NX] {
    assert_eq!(v.len(), NX * NX);
    // SAFETY: `[[T; NX]; NX]` has the layout of `NX * NX` consecutive `T`, the length was
    // checked, and the borrow is carried over from `v`.
    unsafe { &mut *(v.as_mut_ptr() as *mut [[T; NX]; NX]) }
}

#[inline(always)]
pub(crate) fn splat<T: Copy>(v: T) -> V<T> {
    [v; L]
}

/// Cholesky factorisation `A = L L^T` of one symmetric `N x N` matrix per lane, in
/// place: the lower triangle of `a` is read and replaced by `L` (the strict upper
/// triangle is left as it was and never read). Fills `inv_diag` with `1 / L_jj` and
/// returns, per lane, whether a pivot was not positive (NaN counts as not positive).
#[inline(always)]
fn cholesky_lanes<T: Real, const N: usize>(
    a: &mut [[V<T>; N]; N],
    inv_diag: &mut [V<T>; N],
) -> [bool; L] {
    let zero = T::zero();
    let mut bad = [false; L];
    for j in 0..N {
        let mut sjj = a[j][j];
        for kk in 0..j {
            for l in 0..L {
                sjj[l] -= a[j][kk][l] * a[j][kk][l];
            }
        }
        for l in 0..L {
            bad[l] |= !(sjj[l] > zero);
            let dj = sjj[l].sqrt();
            a[j][j][l] = dj;
            inv_diag[j][l] = T::one() / dj;
        }
        for i in (j + 1)..N {
            let mut sij = a[i][j];
            for kk in 0..j {
                for l in 0..L {
                    sij[l] -= a[i][kk][l] * a[j][kk][l];
                }
            }
            for l in 0..L {
                a[i][j][l] = sij[l] * inv_diag[j][l];
            }
        }
    }
    bad
}

/// Outputs of one group of up to `L` tracks: slices of the batch's estimates starting at
/// the group's first track.
struct GroupOut<'a, T> {
    mean: &'a mut [T],
    cov: &'a mut [T],
    loglik: &'a mut [T],
}

/// Lane-wise state of one group: means `[NX][L]`, covariances `[NX][NX][L]`.
pub(crate) type LaneMean<T, const NX: usize> = [V<T>; NX];
/// Lane-wise covariances, `[NX][NX][L]`.
pub(crate) type LaneCov<T, const NX: usize> = [[V<T>; NX]; NX];

/// `acc += sum_m c[m] rows[m]` lane by lane, `m` ascending, exact zeros of `c` skipped:
/// a row of a model matrix times lane vectors, in the one order every path here sums.
#[inline(always)]
fn acc_rows<T: Real, const N: usize>(acc: &mut V<T>, c: &[T; N], rows: &[V<T>; N]) {
    for (&cm, row) in c.iter().zip(rows) {
        if cm == T::zero() {
            continue;
        }
        for l in 0..L {
            acc[l] += cm * row[l];
        }
    }
}

/// [`acc_rows`] with a coefficient per lane: `acc += sum_m c[m] rows[m]` lane by lane,
/// `m` ascending, skipping where `skip[m]` (a coefficient zero in every lane).
#[inline(always)]
fn acc_lanes<T: Real, const N: usize>(
    acc: &mut V<T>,
    skip: &[bool; N],
    c: &[V<T>; N],
    rows: &[V<T>; N],
) {
    for ((&sk, cm), row) in skip.iter().zip(c).zip(rows) {
        if sk {
            continue;
        }
        for l in 0..L {
            acc[l] += cm[l] * row[l];
        }
    }
}

/// `(F P, F x + u)` of a group (exact zeros of `F` skipped): each entry summed over the
/// inner index in ascending order, the order [`predict_fixed`] and the smoother share.
#[inline(always)]
fn f_times<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    u: &[V<T>; NX],
    x: &LaneMean<T, NX>,
    p: &LaneCov<T, NX>,
) -> (LaneCov<T, NX>, LaneMean<T, NX>) {
    let zero = T::zero();
    let mut fp: LaneCov<T, NX> = [[splat(zero); NX]; NX];
    let mut xp: LaneMean<T, NX> = *u;
    for i in 0..NX {
        acc_rows(&mut xp[i], &m.f[i], x);
        for mm in 0..NX {
            let fim = m.f[i][mm];
            if fim == zero {
                continue;
            }
            for j in 0..NX {
                for l in 0..L {
                    fp[i][j][l] += fim * p[mm][j][l];
                }
            }
        }
    }
    (fp, xp)
}

/// `(F P) F^T + Q` from `F P` (lower triangle computed, mirrored).
#[inline(always)]
fn cov_from_fp<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    fp: &LaneCov<T, NX>,
) -> LaneCov<T, NX> {
    let zero = T::zero();
    let mut pp: LaneCov<T, NX> = [[splat(zero); NX]; NX];
    for i in 0..NX {
        for j in 0..=i {
            let mut acc = splat(m.q[i][j]);
            acc_rows(&mut acc, &m.f[j], &fp[i]);
            pp[i][j] = acc;
            pp[j][i] = acc;
        }
    }
    pp
}

/// One prediction of a group with the model's `F` and `Q` (exact zeros of `F` skipped):
/// `x <- F x + u`, `P <- F P F^T + Q` (lower triangle computed, mirrored). `u` holds the
/// offset per lane (the model's `u`, plus a control input where there is one).
#[inline(always)]
pub(crate) fn predict_fixed<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    u: &[V<T>; NX],
    x: &mut LaneMean<T, NX>,
    p: &mut LaneCov<T, NX>,
) {
    let (fp, xp) = f_times(m, u, x, p);
    *p = cov_from_fp(m, &fp);
    *x = xp;
}

/// One prediction of a group whose `F` and `Q` differ from lane to lane (per-target
/// sampling intervals). `skip[i][j]` marks entries of `F` that are zero in every lane
/// (structural zeros): skipping them leaves every result bit-identical, as in
/// [`predict_fixed`], whose order of summation this follows.
#[inline(always)]
pub(crate) fn predict_lanes<T: Real, const NX: usize>(
    f: &[[V<T>; NX]; NX],
    skip: &[[bool; NX]; NX],
    q: &[[V<T>; NX]; NX],
    u: &[V<T>; NX],
    x: &mut LaneMean<T, NX>,
    p: &mut LaneCov<T, NX>,
) {
    let zero = T::zero();
    let mut tmp: [[V<T>; NX]; NX] = [[splat(zero); NX]; NX];
    for i in 0..NX {
        for j in 0..NX {
            for mm in 0..NX {
                if skip[i][mm] {
                    continue;
                }
                for l in 0..L {
                    tmp[i][j][l] += f[i][mm][l] * p[mm][j][l];
                }
            }
        }
    }
    for i in 0..NX {
        for j in 0..=i {
            let mut acc = q[i][j];
            acc_lanes(&mut acc, &skip[j], &f[j], &tmp[i]);
            p[i][j] = acc;
            p[j][i] = acc;
        }
    }
    let mut xn: [V<T>; NX] = [splat(zero); NX];
    for i in 0..NX {
        xn[i] = u[i];
        acc_lanes(&mut xn[i], &skip[i], &f[i], x);
    }
    *x = xn;
}

/// What one lane-wise update reports besides the new state.
pub(crate) struct LaneUpdate<T, const NY: usize> {
    /// Predictive log-likelihood per lane (0 where the lane was not updated).
    pub ll: V<T>,
    /// Lanes whose innovation covariance was not positive definite.
    pub bad: [bool; L],
    /// The predicted measurement `H x + d` per lane.
    pub zhat: [V<T>; NY],
    /// The innovation covariance `S = H P H^T + R` (lower triangle; the strict upper
    /// triangle is zero).
    pub s: [[V<T>; NY]; NY],
}

/// One measurement update of a group. `zz` holds the measurements, `w` 1 for lanes to
/// update and 0 for lanes that only keep their prediction (missing measurement), `r` the
/// measurement noise per lane. The equations are those of [`super::step::update`].
#[inline(always)]
pub(crate) fn update_lanes<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    r: &[[V<T>; NY]; NY],
    zz: &[V<T>; NY],
    w: &V<T>,
    x: &mut LaneMean<T, NX>,
    p: &mut LaneCov<T, NX>,
) -> LaneUpdate<T, NY> {
    let zero = T::zero();
    let half = T::of(0.5);
    let c0 = T::of(NY as f64 * LN_2PI);
    // y = z - H x - d (0 where missing) ; hp = H P
    let mut y: [V<T>; NY] = [splat(zero); NY];
    let mut zhat: [V<T>; NY] = [splat(zero); NY];
    let mut hp: [[V<T>; NX]; NY] = [[splat(zero); NX]; NY];
    for a in 0..NY {
        let mut hx = splat(m.d[a]);
        acc_rows(&mut hx, &m.h[a], x);
        zhat[a] = hx;
        for l in 0..L {
            y[a][l] = if w[l] > zero { zz[a][l] - hx[l] } else { zero };
        }
        for j in 0..NX {
            for mm in 0..NX {
                let ham = m.h[a][mm];
                if ham == zero {
                    continue;
                }
                for l in 0..L {
                    hp[a][j][l] += ham * p[mm][j][l];
                }
            }
        }
    }
    // S = H P H^T + R, then its Cholesky factor in place (lower triangle).
    let mut s: [[V<T>; NY]; NY] = [[splat(zero); NY]; NY];
    for a in 0..NY {
        for b in 0..=a {
            let mut acc = r[a][b];
            acc_rows(&mut acc, &m.h[b], &hp[a]);
            s[a][b] = acc;
        }
    }
    let s_full = s;
    let mut inv_diag: [V<T>; NY] = [splat(zero); NY];
    let bad = cholesky_lanes(&mut s, &mut inv_diag);
    let mut det: V<T> = splat(T::one());
    for j in 0..NY {
        for l in 0..L {
            det[l] *= s[j][j][l];
        }
    }
    // W^T = L^{-1} H P (forward substitution, NX right-hand sides) ; e = L^{-1} y.
    for a in 0..NY {
        for bb in 0..a {
            for l in 0..L {
                let sab = s[a][bb][l];
                y[a][l] -= sab * y[bb][l];
            }
            for j in 0..NX {
                for l in 0..L {
                    hp[a][j][l] -= s[a][bb][l] * hp[bb][j][l];
                }
            }
        }
        for l in 0..L {
            // Lanes not updated get no update: zero their gain.
            let g = inv_diag[a][l] * w[l];
            y[a][l] *= g;
            for j in 0..NX {
                hp[a][j][l] *= g;
            }
        }
    }
    let mut maha = splat(zero);
    for a in 0..NY {
        for l in 0..L {
            maha[l] += y[a][l] * y[a][l];
        }
    }
    for i in 0..NX {
        for a in 0..NY {
            for l in 0..L {
                x[i][l] += hp[a][i][l] * y[a][l];
            }
        }
    }
    for i in 0..NX {
        for j in 0..=i {
            let mut acc = p[i][j];
            for a in 0..NY {
                for l in 0..L {
                    acc[l] -= hp[a][i][l] * hp[a][j][l];
                }
            }
            p[i][j] = acc;
            p[j][i] = acc;
        }
    }
    let mut ll: V<T> = splat(zero);
    for l in 0..L {
        ll[l] = if w[l] > zero {
            -(c0 + maha[l]) * half - det[l].ln()
        } else {
            zero
        };
    }
    LaneUpdate {
        ll,
        bad,
        zhat,
        s: s_full,
    }
}

/// Filters one group of `n` (1..=L) tracks; `z` holds their measurements `[n][steps][NY]`.
/// Lanes past `n` repeat the last track and are not written.
#[inline(always)]
fn filter_group<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    first_track: usize,
    n: usize,
    z: &[T],
    steps: usize,
    keep_all: bool,
    out: GroupOut<'_, T>,
) -> Result<()> {
    let zero = T::zero();
    let mut x: [V<T>; NX] = std::array::from_fn(|i| splat(m.x0[i]));
    let mut p: [[V<T>; NX]; NX] =
        std::array::from_fn(|i| std::array::from_fn(|j| splat(m.p0[i][j])));
    let mut total: V<T> = splat(zero);
    let u: [V<T>; NX] = std::array::from_fn(|i| splat(m.u[i]));
    let r: [[V<T>; NY]; NY] = std::array::from_fn(|a| std::array::from_fn(|b| splat(m.r[a][b])));
    for k in 0..steps {
        if k > 0 {
            predict_fixed(m, &u, &mut x, &mut p);
        }
        // Gather the measurements of the group at step k.
        let mut zz: [V<T>; NY] = [splat(zero); NY];
        let mut w: V<T> = splat(T::one());
        for l in 0..L {
            let b = l.min(n - 1);
            let o = (b * steps + k) * NY;
            for a in 0..NY {
                let v = z[o + a];
                zz[a][l] = v;
                if v.is_nan_value() {
                    w[l] = zero;
                }
            }
        }
        let up = update_lanes(m, &r, &zz, &w, &mut x, &mut p);
        if let Some(l) = (0..n).find(|&l| up.bad[l] && w[l] > zero) {
            return Err(Error::NotPositiveDefinite {
                track: first_track + l,
                step: k,
                what: "innovation covariance S",
            });
        }
        let ll = up.ll;
        for l in 0..L {
            total[l] += ll[l];
        }
        if keep_all {
            for l in 0..n {
                let o = l * steps + k;
                let mo: &mut [T; NX] = (&mut out.mean[o * NX..(o + 1) * NX])
                    .try_into()
                    .expect("NX entries");
                let co: &mut [[T; NX]; NX] =
                    as_square(&mut out.cov[o * NX * NX..(o + 1) * NX * NX]);
                for i in 0..NX {
                    mo[i] = x[i][l];
                    for j in 0..NX {
                        co[i][j] = p[i][j][l];
                    }
                }
                out.loglik[o] = ll[l];
            }
        }
    }
    if !keep_all {
        for l in 0..n {
            for i in 0..NX {
                out.mean[l * NX + i] = x[i][l];
                for j in 0..NX {
                    out.cov[(l * NX + i) * NX + j] = p[i][j][l];
                }
            }
            out.loglik[l] = total[l];
        }
    }
    Ok(())
}

/// RTS smoothing of one group of `n` tracks in place (see [`super::dense::smooth_track`]
/// for the equations): `mean` and `cov` hold the group's filtered moments on entry.
#[inline(always)]
fn smooth_group<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    first_track: usize,
    n: usize,
    steps: usize,
    mean: &mut [T],
    cov: &mut [T],
) -> Result<()> {
    let zero = T::zero();
    let half = T::of(0.5);
    let load = |mean: &[T], cov: &[T], k: usize| {
        let mut x: [V<T>; NX] = [splat(zero); NX];
        let mut p: [[V<T>; NX]; NX] = [[splat(zero); NX]; NX];
        for l in 0..L {
            let o = l.min(n - 1) * steps + k;
            for i in 0..NX {
                x[i][l] = mean[o * NX + i];
                for j in 0..NX {
                    p[i][j][l] = cov[(o * NX + i) * NX + j];
                }
            }
        }
        (x, p)
    };
    if steps < 2 {
        return Ok(());
    }
    let u: [V<T>; NX] = std::array::from_fn(|i| splat(m.u[i]));
    let (mut xs, mut ps) = load(mean, cov, steps - 1);
    for k in (0..steps - 1).rev() {
        let (x, p) = load(mean, cov, k);
        // fp = F P ; xp = F x + u ; pp = fp F^T + Q
        let (fp, xp) = f_times(m, &u, &x, &p);
        let pp = cov_from_fp(m, &fp);
        // Cholesky of pp into c (lower).
        let mut c = pp;
        let mut inv_diag: [V<T>; NX] = [splat(zero); NX];
        let bad = cholesky_lanes(&mut c, &mut inv_diag);
        if let Some(l) = (0..n).find(|&l| bad[l]) {
            return Err(Error::NotPositiveDefinite {
                track: first_track + l,
                step: k + 1,
                what: "predicted covariance P(k+1|k) in the smoother",
            });
        }
        // ct = C^T = pp^{-1} fp: forward then backward substitution on NX columns.
        let mut ct = fp;
        for i in 0..NX {
            for kk in 0..i {
                for j in 0..NX {
                    for l in 0..L {
                        ct[i][j][l] -= c[i][kk][l] * ct[kk][j][l];
                    }
                }
            }
            for j in 0..NX {
                for l in 0..L {
                    ct[i][j][l] *= inv_diag[i][l];
                }
            }
        }
        for i in (0..NX).rev() {
            for kk in (i + 1)..NX {
                for j in 0..NX {
                    for l in 0..L {
                        ct[i][j][l] -= c[kk][i][l] * ct[kk][j][l];
                    }
                }
            }
            for j in 0..NX {
                for l in 0..L {
                    ct[i][j][l] *= inv_diag[i][l];
                }
            }
        }
        // xs_k = x + C (xs - xp) ; ps_k = P + C (ps - pp) C^T
        let mut dx: [V<T>; NX] = [splat(zero); NX];
        for i in 0..NX {
            for l in 0..L {
                dx[i][l] = xs[i][l] - xp[i][l];
            }
        }
        let mut xn = x;
        for i in 0..NX {
            for j in 0..NX {
                for l in 0..L {
                    xn[i][l] += ct[j][i][l] * dx[j][l];
                }
            }
        }
        let mut t: [[V<T>; NX]; NX] = [[splat(zero); NX]; NX];
        for i in 0..NX {
            for j in 0..NX {
                for mm in 0..NX {
                    for l in 0..L {
                        t[i][j][l] += (ps[i][mm][l] - pp[i][mm][l]) * ct[mm][j][l];
                    }
                }
            }
        }
        let mut pn = p;
        for i in 0..NX {
            for j in 0..=i {
                let mut acc: V<T> = splat(zero);
                for mm in 0..NX {
                    for l in 0..L {
                        acc[l] += ct[mm][i][l] * t[mm][j][l];
                    }
                }
                for l in 0..L {
                    let v = (p[i][j][l] + p[j][i][l]) * half + acc[l];
                    pn[i][j][l] = v;
                    pn[j][i][l] = v;
                }
            }
        }
        for l in 0..n {
            let o = l * steps + k;
            for i in 0..NX {
                mean[o * NX + i] = xn[i][l];
                for j in 0..NX {
                    cov[(o * NX + i) * NX + j] = pn[i][j][l];
                }
            }
        }
        xs = xn;
        ps = pn;
    }
    Ok(())
}

/// Runs `$body` (an expression using `NX`, `NY` as consts) for the supported sizes.
macro_rules! with_dims {
    ($nx:expr, $ny:expr, |$NX:ident, $NY:ident| $body:expr) => {
        $crate::kalman::lanes::with_dims!(@sizes ($nx, $ny), $NX, $NY, $body;
            (1, 1) (2, 1) (3, 1) (4, 2) (6, 2) (6, 3) (9, 3))
    };
    (@sizes $key:expr, $NX:ident, $NY:ident, $body:expr; $(($a:literal, $b:literal))*) => {
        match $key {
            $(($a, $b) => {
                const $NX: usize = $a;
                const $NY: usize = $b;
                Some($body)
            })*
            _ => None,
        }
    };
}

pub(crate) use with_dims;

/// Whether the fast path covers a model of this size.
pub fn supports(nx: usize, ny: usize) -> bool {
    with_dims!(nx, ny, |NX, NY| (NX, NY)).is_some()
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn have_avx2() -> bool {
    std::is_x86_feature_detected!("avx2")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn filter_group_avx2<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    first_track: usize,
    n: usize,
    z: &[T],
    steps: usize,
    keep_all: bool,
    out: GroupOut<'_, T>,
) -> Result<()> {
    filter_group(m, first_track, n, z, steps, keep_all, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn smooth_group_avx2<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    first_track: usize,
    n: usize,
    steps: usize,
    mean: &mut [T],
    cov: &mut [T],
) -> Result<()> {
    smooth_group(m, first_track, n, steps, mean, cov)
}

fn filter_fixed<T: Real, const NX: usize, const NY: usize>(
    model: &Model,
    z: &Measurements<T>,
    keep_all: bool,
    est: &mut Estimates<T>,
) -> Result<()> {
    let m = Fixed::<T, NX, NY>::new(model);
    let steps = z.steps;
    let kept = if keep_all { steps } else { 1 };
    #[cfg(target_arch = "x86_64")]
    let avx2 = have_avx2();
    let ll = est.loglik.as_mut().expect("allocated with log-likelihoods");
    est.mean
        .par_chunks_mut(L * kept * NX)
        .zip(est.cov.par_chunks_mut(L * kept * NX * NX))
        .zip(ll.par_chunks_mut(L * kept))
        .enumerate()
        .try_for_each(|(g, ((mean, cov), loglik))| {
            crate::cancel::check()?;
            let first = g * L;
            let n = (z.tracks - first).min(L);
            let zg = &z.data[first * steps * NY..(first + n) * steps * NY];
            let out = GroupOut { mean, cov, loglik };
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the processor was checked for AVX2 above.
                return unsafe { filter_group_avx2(&m, first, n, zg, steps, keep_all, out) };
            }
            filter_group(&m, first, n, zg, steps, keep_all, out)
        })
}

fn smooth_fixed<T: Real, const NX: usize, const NY: usize>(
    model: &Model,
    est: &mut Estimates<T>,
) -> Result<()> {
    let m = Fixed::<T, NX, NY>::new(model);
    let steps = est.steps;
    #[cfg(target_arch = "x86_64")]
    let avx2 = have_avx2();
    est.mean
        .par_chunks_mut(L * steps * NX)
        .zip(est.cov.par_chunks_mut(L * steps * NX * NX))
        .enumerate()
        .try_for_each(|(g, (mean, cov))| {
            crate::cancel::check()?;
            let first = g * L;
            let n = mean.len() / (steps * NX);
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the processor was checked for AVX2 above.
                return unsafe { smooth_group_avx2(&m, first, n, steps, mean, cov) };
            }
            smooth_group(&m, first, n, steps, mean, cov)
        })
}

/// Filters with the fast path into `est` (already shaped, with log-likelihoods), or
/// `None` when the model's size has none.
pub(crate) fn filter<T: Real>(
    m: &Model,
    z: &Measurements<T>,
    keep_all: bool,
    est: &mut Estimates<T>,
) -> Option<Result<()>> {
    if z.tracks == 0 {
        return None;
    }
    with_dims!(m.nx(), m.ny(), |NX, NY| filter_fixed::<T, NX, NY>(
        m, z, keep_all, est
    ))
}

/// Smooths in place with the fast path, or `None` when the model's size has none.
pub(crate) fn smooth<T: Real>(m: &Model, est: &mut Estimates<T>) -> Option<Result<()>> {
    if est.tracks == 0 {
        return None;
    }
    with_dims!(m.nx(), m.ny(), |NX, NY| smooth_fixed::<T, NX, NY>(m, est))
}
