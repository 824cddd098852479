//! The filtering elements and operator of Sarkka & Garcia-Fernandez (Section IV-C):
//! `a_k = (A_k, b_k, C_k, eta_k, J_k)` with `p(x_k | y_k, x_{k-1}) = N(x_k; A_k x_{k-1} + b_k, C_k)`
//! and `p(y_k | x_{k-1}) ∝ N_I(x_{k-1}; eta_k, J_k)` (eq. 42).
//!
//! Layout of one element (row-major, `n = nx`): `A` (n²), `b` (n), `C` (n²), `eta` (n),
//! `J` (n²).
//!
//! The identity is `(I, 0, 0, 0, 0)`; the paper's "neutral element" `(0, 0, 0, 0, 0)` is
//! not one (its `A = 0` annihilates the `A` of the other side).

use super::small::{
    lu_in_place, lu_solve, mat_t_vec, mat_vec, mul, mul_nt, mul_tn, set_identity, symmetrize,
};
use crate::kalman::step::StepMats;
use crate::linalg::{cholesky_in_place, solve_lower_in_place, Real};
use crate::scan::AssocOp;
use std::marker::PhantomData;

/// Offsets of the parts of a filtering element.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FilterLayout {
    pub n: usize,
}

impl FilterLayout {
    pub fn len(&self) -> usize {
        3 * self.n * self.n + 2 * self.n
    }
    pub fn a(&self) -> std::ops::Range<usize> {
        0..self.n * self.n
    }
    pub fn b(&self) -> std::ops::Range<usize> {
        let o = self.n * self.n;
        o..o + self.n
    }
    pub fn c(&self) -> std::ops::Range<usize> {
        let o = self.n * self.n + self.n;
        o..o + self.n * self.n
    }
    pub fn eta(&self) -> std::ops::Range<usize> {
        let o = 2 * self.n * self.n + self.n;
        o..o + self.n
    }
    pub fn j(&self) -> std::ops::Range<usize> {
        let o = 2 * self.n * self.n + 2 * self.n;
        o..o + self.n * self.n
    }
}

/// The filtering operator of Lemma 3 (eq. 46).
pub struct FilterOp<T> {
    pub(crate) lay: FilterLayout,
    _t: PhantomData<T>,
}

impl<T: Real> FilterOp<T> {
    /// The operator for states of size `nx`.
    pub fn new(nx: usize) -> Self {
        FilterOp {
            lay: FilterLayout { n: nx },
            _t: PhantomData,
        }
    }
}

/// Scratch of one combine.
pub struct FilterScratch<T> {
    nmat: Vec<T>,
    piv: Vec<usize>,
    rhs: Vec<T>,
    t1: Vec<T>,
    t2: Vec<T>,
    v: Vec<T>,
}

impl<T: Real> AssocOp for FilterOp<T> {
    type Scalar = T;
    type Scratch = FilterScratch<T>;

    fn elem_len(&self) -> usize {
        self.lay.len()
    }

    fn scratch(&self) -> FilterScratch<T> {
        let n = self.lay.n;
        FilterScratch {
            nmat: vec![T::zero(); n * n],
            piv: vec![0; n],
            rhs: vec![T::zero(); n * (2 * n + 1)],
            t1: vec![T::zero(); n * n],
            t2: vec![T::zero(); n * n],
            v: vec![T::zero(); n],
        }
    }

    fn identity(&self, out: &mut [T]) {
        out.fill(T::zero());
        set_identity(&mut out[self.lay.a()], self.lay.n);
    }

    /// Lemma 3 with `M = I + C_i J_j` handled through one LU of `M^T = I + J_j C_i`:
    /// `A_j M^{-1} = (M^{-T} A_j^T)^T`, and `(I + J_j C_i)^{-1}` is `M^{-T}` itself. So one
    /// solve with right-hand sides `[A_j^T | eta_j - J_j b_i | J_j A_i]` gives
    /// ```text
    /// A_ij   = A_j M^{-1} A_i
    /// b_ij   = A_j M^{-1} (b_i + C_i eta_j) + b_j
    /// C_ij   = A_j M^{-1} C_i A_j^T + C_j
    /// eta_ij = A_i^T M^{-T} (eta_j - J_j b_i) + eta_i
    /// J_ij   = A_i^T M^{-T} J_j A_i + J_i
    /// ```
    /// `C_ij` and `J_ij` are symmetric in exact arithmetic and are symmetrised.
    fn combine(&self, ei: &[T], ej: &[T], out: &mut [T], s: &mut FilterScratch<T>) {
        match self.lay.n {
            2 => self.combine_n::<2>(ei, ej, out, s),
            3 => self.combine_n::<3>(ei, ej, out, s),
            4 => self.combine_n::<4>(ei, ej, out, s),
            6 => self.combine_n::<6>(ei, ej, out, s),
            _ => self.combine_n::<0>(ei, ej, out, s),
        }
    }
}

impl<T: Real> FilterOp<T> {
    /// The combine with the state size `N` known at compile time (`0`: read at run time),
    /// so that the small loops unroll.
    #[inline(always)]
    fn combine_n<const N: usize>(
        &self,
        ei: &[T],
        ej: &[T],
        out: &mut [T],
        s: &mut FilterScratch<T>,
    ) {
        let l = self.lay;
        let n = if N == 0 { l.n } else { N };
        let w = 2 * n + 1;
        let (ai, bi, ci, etai, ji) = (&ei[l.a()], &ei[l.b()], &ei[l.c()], &ei[l.eta()], &ei[l.j()]);
        let (aj, bj, cj, etaj, jj) = (&ej[l.a()], &ej[l.b()], &ej[l.c()], &ej[l.eta()], &ej[l.j()]);
        // N = I + J_j C_i
        mul(jj, ci, &mut s.nmat, n, n, n);
        for i in 0..n {
            s.nmat[i * n + i] += T::one();
        }
        if !lu_in_place(&mut s.nmat, n, &mut s.piv) {
            out.fill(T::nan());
            return;
        }
        // rhs = [A_j^T | eta_j - J_j b_i | J_j A_i]
        mul(jj, ai, &mut s.t1, n, n, n);
        for r in 0..n {
            for c in 0..n {
                s.rhs[r * w + c] = aj[c * n + r];
                s.rhs[r * w + n + 1 + c] = s.t1[r * n + c];
            }
            let mut acc = etaj[r];
            for c in 0..n {
                acc -= jj[r * n + c] * bi[c];
            }
            s.rhs[r * w + n] = acc;
        }
        lu_solve(&s.nmat, n, &s.piv, &mut s.rhs, w);
        // t1 = A_j M^{-1} = (first n columns)^T
        for r in 0..n {
            for c in 0..n {
                s.t1[r * n + c] = s.rhs[c * w + r];
            }
        }
        let (oa, rest) = out.split_at_mut(n * n);
        let (ob, rest) = rest.split_at_mut(n);
        let (oc, rest) = rest.split_at_mut(n * n);
        let (oeta, oj) = rest.split_at_mut(n);
        mul(&s.t1, ai, oa, n, n, n);
        // b_ij = t1 (b_i + C_i eta_j) + b_j
        s.v.copy_from_slice(bi);
        mat_vec(ci, etaj, &mut s.v, n, n, true);
        ob.copy_from_slice(bj);
        mat_vec(&s.t1, &s.v, ob, n, n, true);
        // C_ij = t1 C_i A_j^T + C_j
        mul(&s.t1, ci, &mut s.t2, n, n, n);
        mul_nt(&s.t2, aj, oc, n, n, n);
        for (o, c) in oc.iter_mut().zip(cj) {
            *o += *c;
        }
        symmetrize(oc, n);
        // eta_ij = A_i^T y + eta_i, J_ij = A_i^T Z + J_i with y, Z the other columns.
        for r in 0..n {
            s.v[r] = s.rhs[r * w + n];
            for c in 0..n {
                s.t2[r * n + c] = s.rhs[r * w + n + 1 + c];
            }
        }
        oeta.copy_from_slice(etai);
        mat_t_vec(ai, &s.v, oeta, n, n, true);
        mul_tn(ai, &s.t2, oj, n, n, n);
        for (o, j) in oj.iter_mut().zip(ji) {
            *o += *j;
        }
        symmetrize(oj, n);
    }
}

/// Scratch for building elements.
pub(crate) struct BuildScratch<T> {
    s: Vec<T>,
    wt: Vec<T>,
    g: Vec<T>,
    e: Vec<T>,
}

impl<T: Real> BuildScratch<T> {
    pub fn new(nx: usize, ny: usize) -> Self {
        BuildScratch {
            s: vec![T::zero(); ny * ny],
            wt: vec![T::zero(); ny * nx],
            g: vec![T::zero(); ny * nx],
            e: vec![T::zero(); ny],
        }
    }
}

/// The element of a step `k >= 1` (eqs. 43 and 45), from the transition into step `k` and
/// the measurement `z` at `k` (`None`: missing, the element is the bare prediction
/// `(F, u, Q, 0, 0)`). Returns `false` when `S_k` is not positive definite.
///
/// With `S = H Q H^T + R = L L^T`, `W^T = L^{-1} H Q`, `G = L^{-1} H F`,
/// `e = L^{-1} (z - H u - d)`: the gain is `K = W L^{-1}`, and
/// `A = F - W G`, `b = u + W e`, `C = Q - W W^T`, `eta = G^T e`, `J = G^T G`.
pub(crate) fn element_k<T: Real>(
    lay: FilterLayout,
    ny: usize,
    m: &StepMats<T>,
    z: Option<&[T]>,
    out: &mut [T],
    ws: &mut BuildScratch<T>,
) -> bool {
    let n = lay.n;
    out[lay.a()].copy_from_slice(&m.f);
    out[lay.b()].copy_from_slice(&m.u);
    out[lay.c()].copy_from_slice(&m.q);
    out[lay.eta()].fill(T::zero());
    out[lay.j()].fill(T::zero());
    let Some(z) = z else { return true };
    // wt = H Q, g = H F, S = H Q H^T + R
    mul(&m.h, &m.q, &mut ws.wt, ny, n, n);
    mul(&m.h, &m.f, &mut ws.g, ny, n, n);
    mul_nt(&ws.wt, &m.h, &mut ws.s, ny, n, ny);
    for (s, r) in ws.s.iter_mut().zip(&m.r) {
        *s += *r;
    }
    symmetrize(&mut ws.s, ny);
    if !cholesky_in_place(&mut ws.s, ny) {
        return false;
    }
    // e = z - H u - d
    for (a, e) in ws.e.iter_mut().enumerate() {
        let mut v = z[a] - m.d[a];
        for j in 0..n {
            v -= m.h[a * n + j] * m.u[j];
        }
        *e = v;
    }
    solve_lower_in_place(&ws.s, ny, &mut ws.wt, n);
    solve_lower_in_place(&ws.s, ny, &mut ws.g, n);
    solve_lower_in_place(&ws.s, ny, &mut ws.e, 1);
    let (a, rest) = out.split_at_mut(n * n);
    let (b, rest) = rest.split_at_mut(n);
    let (c, rest) = rest.split_at_mut(n * n);
    let (eta, j) = rest.split_at_mut(n);
    for r in 0..n {
        for col in 0..n {
            let mut sa = T::zero();
            let mut sc = T::zero();
            let mut sj = T::zero();
            for q in 0..ny {
                sa += ws.wt[q * n + r] * ws.g[q * n + col];
                sc += ws.wt[q * n + r] * ws.wt[q * n + col];
                sj += ws.g[q * n + r] * ws.g[q * n + col];
            }
            a[r * n + col] -= sa;
            c[r * n + col] -= sc;
            j[r * n + col] = sj;
        }
    }
    symmetrize(c, n);
    mat_t_vec(&ws.wt, &ws.e, b, ny, n, true);
    mat_t_vec(&ws.g, &ws.e, eta, ny, n, false);
    true
}

/// The element of step 0 (eq. 44 with the prior in place of the predicted moments):
/// `(0, x_{0|0}, P_{0|0}, 0, 0)` with the prior already updated by the step-0 measurement.
pub(crate) fn element_0<T: Real>(lay: FilterLayout, x00: &[T], p00: &[T], out: &mut [T]) {
    out.fill(T::zero());
    out[lay.b()].copy_from_slice(x00);
    out[lay.c()].copy_from_slice(p00);
}
