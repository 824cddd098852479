//! The square-root form of the parallel RTS smoother (Yaghoobi et al. 2022, the linear
//! case): the smoothing element `(E, g, D)` of Sarkka & Garcia-Fernandez (eqs. 49-50)
//! with `L = D D^T` carried as its factor.
//!
//! Element of a step `k < T-1`, from the filtered mean `x` and factor `U` (`P = U U^T`)
//! and the transition into `k+1`: `tria` of the `2n x 2n` matrix
//! ```text
//! [ F U   L_Q ]          [ P11   0  ]
//! [ U     0   ]  -> tria [ P21  P22 ]
//! ```
//! gives `P11 P11^T = F P F^T + Q`, `P21 P11^T = P F^T` and `P22 P22^T = P - E F P`, so
//! `E = P21 P11^{-1}`, `g = x - E (F x + u)` and `D = P22`. The last step's element is
//! `(0, x, U)`. Combine (the reverse scan's `a_i` before `a_j`):
//! `E_ij = E_i E_j`, `g_ij = E_i g_j + g_i`, `D_ij = tria [E_i D_j | D_i]`.
//! The suffix from step `k` to the end is `(0, x_{k|T}, D_{k|T})`.

use super::factor::{gemm, psd_factor, tria};
use crate::kalman::step::StepMats;
use crate::linalg::Real;
use crate::scan::AssocOp;
use std::marker::PhantomData;

/// The square-root smoothing operator: elements `E` (n²), `g` (n), `D` (n², lower).
pub struct SqrtSmoothOp<T> {
    pub(crate) n: usize,
    _t: PhantomData<T>,
}

impl<T: Real> SqrtSmoothOp<T> {
    /// The operator for states of size `nx`.
    pub fn new(nx: usize) -> Self {
        SqrtSmoothOp {
            n: nx,
            _t: PhantomData,
        }
    }
}

/// Scratch of one square-root smoothing combine.
pub struct SmoothScratch<T> {
    wide: Vec<T>,
    w: Vec<T>,
}

impl<T: Real> AssocOp for SqrtSmoothOp<T> {
    type Scalar = T;
    type Scratch = SmoothScratch<T>;

    fn elem_len(&self) -> usize {
        2 * self.n * self.n + self.n
    }

    fn scratch(&self) -> SmoothScratch<T> {
        let n = self.n;
        SmoothScratch {
            wide: vec![T::zero(); 2 * n * n],
            w: vec![T::zero(); 2 * n * n],
        }
    }

    fn identity(&self, out: &mut [T]) {
        let n = self.n;
        out.fill(T::zero());
        for i in 0..n {
            out[i * n + i] = T::one();
        }
    }

    fn combine(&self, ei: &[T], ej: &[T], out: &mut [T], s: &mut SmoothScratch<T>) {
        let n = self.n;
        let n2 = n * n;
        let (e_i, g_i, d_i) = (&ei[..n2], &ei[n2..n2 + n], &ei[n2 + n..]);
        let (e_j, g_j, d_j) = (&ej[..n2], &ej[n2..n2 + n], &ej[n2 + n..]);
        let (oe, rest) = out.split_at_mut(n2);
        let (og, od) = rest.split_at_mut(n);
        gemm(e_i, false, e_j, false, oe, n, n, n);
        for r in 0..n {
            let mut v = g_i[r];
            for l in 0..n {
                v += e_i[r * n + l] * g_j[l];
            }
            og[r] = v;
        }
        // [E_i D_j | D_i], n x 2n.
        let m = 2 * n;
        for r in 0..n {
            for c in 0..n {
                let mut v = T::zero();
                for l in 0..n {
                    v += e_i[r * n + l] * d_j[l * n + c];
                }
                s.wide[r * m + c] = v;
                s.wide[r * m + n + c] = d_i[r * n + c];
            }
        }
        tria(&s.wide, n, m, &mut s.w, od);
    }
}

/// Scratch of building square-root smoothing elements.
pub(crate) struct SmoothBuild<T> {
    lq: Vec<T>,
    psi: Vec<T>,
    tri: Vec<T>,
    w: Vec<T>,
    fu: Vec<T>,
    xp: Vec<T>,
}

impl<T: Real> SmoothBuild<T> {
    pub fn new(nx: usize) -> Self {
        let z = |k: usize| vec![T::zero(); k];
        SmoothBuild {
            lq: z(nx * nx),
            psi: z(4 * nx * nx),
            tri: z(4 * nx * nx),
            w: z(4 * nx * nx),
            fu: z(nx * nx),
            xp: z(nx),
        }
    }
}

/// The element of a step `k < T-1` from the filtered mean `x` and factor `u` at `k` and
/// the transition `m` into `k+1`; false when `Q` is not positive semi-definite or the
/// predicted covariance is singular.
pub(crate) fn element_k<T: Real>(
    m: &StepMats<T>,
    x: &[T],
    u: &[T],
    out: &mut [T],
    ws: &mut SmoothBuild<T>,
) -> bool {
    let n = x.len();
    let n2 = n * n;
    if !psd_factor(&m.q, n, &mut ws.lq) {
        return false;
    }
    let w2 = 2 * n;
    gemm(&m.f, false, u, false, &mut ws.fu, n, n, n);
    ws.psi.fill(T::zero());
    for r in 0..n {
        for c in 0..n {
            ws.psi[r * w2 + c] = ws.fu[r * n + c];
            ws.psi[r * w2 + n + c] = ws.lq[r * n + c];
            ws.psi[(n + r) * w2 + c] = u[r * n + c];
        }
    }
    tria(&ws.psi, w2, w2, &mut ws.w, &mut ws.tri);
    // E^T = P11^{-T} P21^T: back substitution with P11^T (upper), column by column of E.
    let (oe, rest) = out.split_at_mut(n2);
    let (og, od) = rest.split_at_mut(n);
    for r in 0..n {
        for i in (0..n).rev() {
            let d = ws.tri[i * w2 + i];
            if d <= T::zero() {
                return false;
            }
            let mut v = ws.tri[(n + r) * w2 + i];
            for q in i + 1..n {
                v -= ws.tri[q * w2 + i] * oe[r * n + q];
            }
            oe[r * n + i] = v / d;
        }
    }
    for c in 0..n {
        let mut v = m.u[c];
        for l in 0..n {
            v += m.f[c * n + l] * x[l];
        }
        ws.xp[c] = v;
    }
    for r in 0..n {
        let mut v = x[r];
        for c in 0..n {
            v -= oe[r * n + c] * ws.xp[c];
        }
        og[r] = v;
        for c in 0..n {
            od[r * n + c] = ws.tri[(n + r) * w2 + n + c];
        }
    }
    true
}

/// The element of the last step: `(0, x, U)`.
pub(crate) fn element_last<T: Real>(x: &[T], u: &[T], out: &mut [T]) {
    let n = x.len();
    out.fill(T::zero());
    out[n * n..n * n + n].copy_from_slice(x);
    out[n * n + n..].copy_from_slice(u);
}
