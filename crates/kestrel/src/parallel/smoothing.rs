//! The smoothing elements and operator of Sarkka & Garcia-Fernandez (Section IV-D), which
//! are also the thesis's retrodiction pairs (Tager 2013, Section 3.2): the RTS backward
//! step `x_{k|T} = E_k x_{k+1|T} + g_k` is the affine map of the thesis's `(C_k, b_k)`
//! (eq. 3.2.3.5), and the covariance step `P_{k|T} = E_k P_{k+1|T} E_k^T + L_k` is the same
//! map acting by congruence. Composing `(E, g, L)` directly (Lemma 4) does the covariance
//! part properly, in `n x n` matrices, instead of the thesis's `n² x n²` Kronecker form
//! `vec(P) -> (C ⊗ C) vec(P) + vec(L)` (eqs. 3.2.4.5-3.2.4.9), which it equals.
//!
//! Layout (row-major, `n = nx`): `E` (n²), `g` (n), `L` (n²). Identity `(I, 0, 0)`.
//! The scan runs in reverse: `s̄_k = a_k ⊗ ... ⊗ a_T = (0, x_{k|T}, P_{k|T})`.

use super::small::{mat_vec, mul, mul_nt, set_identity, symmetrize};
use crate::kalman::step::StepMats;
use crate::linalg::{cholesky_in_place, solve_lower_in_place, solve_upper_t_in_place, Real};
use crate::scan::AssocOp;
use std::marker::PhantomData;

/// The smoothing operator of Lemma 4 (eq. 51):
/// `E_ij = E_i E_j`, `g_ij = E_i g_j + g_i`, `L_ij = E_i L_j E_i^T + L_i`.
/// With `means_only`, elements are the thesis's `(C_k, b_k)` alone (`n² + n` scalars).
pub struct SmoothOp<T> {
    pub(crate) n: usize,
    pub(crate) means_only: bool,
    _t: PhantomData<T>,
}

impl<T: Real> SmoothOp<T> {
    /// The operator for states of size `nx`; `means_only` skips the covariance part.
    pub fn new(nx: usize, means_only: bool) -> Self {
        SmoothOp {
            n: nx,
            means_only,
            _t: PhantomData,
        }
    }
}

impl<T: Real> AssocOp for SmoothOp<T> {
    type Scalar = T;
    type Scratch = Vec<T>;

    fn elem_len(&self) -> usize {
        let n = self.n;
        if self.means_only {
            n * n + n
        } else {
            2 * n * n + n
        }
    }

    fn scratch(&self) -> Vec<T> {
        vec![T::zero(); self.n * self.n]
    }

    fn identity(&self, out: &mut [T]) {
        out.fill(T::zero());
        set_identity(&mut out[..self.n * self.n], self.n);
    }

    fn combine(&self, ei: &[T], ej: &[T], out: &mut [T], t: &mut Vec<T>) {
        match self.n {
            2 => self.combine_n::<2>(ei, ej, out, t),
            3 => self.combine_n::<3>(ei, ej, out, t),
            4 => self.combine_n::<4>(ei, ej, out, t),
            6 => self.combine_n::<6>(ei, ej, out, t),
            _ => self.combine_n::<0>(ei, ej, out, t),
        }
    }
}

impl<T: Real> SmoothOp<T> {
    /// The combine with the state size `N` known at compile time (`0`: read at run time).
    #[inline(always)]
    fn combine_n<const N: usize>(&self, ei: &[T], ej: &[T], out: &mut [T], t: &mut [T]) {
        let n = if N == 0 { self.n } else { N };
        let n2 = n * n;
        let (e_i, g_i) = (&ei[..n2], &ei[n2..n2 + n]);
        let (e_j, g_j) = (&ej[..n2], &ej[n2..n2 + n]);
        let (oe, rest) = out.split_at_mut(n2);
        let (og, ol) = rest.split_at_mut(n);
        mul(e_i, e_j, oe, n, n, n);
        og.copy_from_slice(g_i);
        mat_vec(e_i, g_j, og, n, n, true);
        if !self.means_only {
            mul(e_i, &ej[n2 + n..], t, n, n, n);
            mul_nt(t, e_i, ol, n, n, n);
            for (o, l) in ol.iter_mut().zip(&ei[n2 + n..]) {
                *o += *l;
            }
            symmetrize(ol, n);
        }
    }
}

/// Scratch for building smoothing elements.
pub(crate) struct SmoothBuild<T> {
    fp: Vec<T>,
    pp: Vec<T>,
    xp: Vec<T>,
}

impl<T: Real> SmoothBuild<T> {
    pub fn new(nx: usize) -> Self {
        SmoothBuild {
            fp: vec![T::zero(); nx * nx],
            pp: vec![T::zero(); nx * nx],
            xp: vec![T::zero(); nx],
        }
    }
}

/// The element of a step `k < T-1` (eq. 49), from the filtered `(x, P)` at `k` and the
/// transition into `k+1`: with `P_{k+1|k} = F P F^T + Q = L L^T` and `V = L^{-1} F P`,
/// `E = (L^{-T} V)^T = P F^T P_{k+1|k}^{-1}`, `g = x - E (F x + u)`, `L = P - V^T V`
/// (`= P - E F P`, positive semi-definite by construction). Returns `false` when
/// `P_{k+1|k}` is not positive definite.
pub(crate) fn element_k<T: Real>(
    op: &SmoothOp<T>,
    m: &StepMats<T>,
    x: &[T],
    p: &[T],
    out: &mut [T],
    ws: &mut SmoothBuild<T>,
) -> bool {
    let n = op.n;
    let n2 = n * n;
    mul(&m.f, p, &mut ws.fp, n, n, n);
    mul_nt(&ws.fp, &m.f, &mut ws.pp, n, n, n);
    for (a, q) in ws.pp.iter_mut().zip(&m.q) {
        *a += *q;
    }
    symmetrize(&mut ws.pp, n);
    if !cholesky_in_place(&mut ws.pp, n) {
        return false;
    }
    ws.xp.copy_from_slice(&m.u);
    mat_vec(&m.f, x, &mut ws.xp, n, n, true);
    // fp <- V = L^{-1} F P
    solve_lower_in_place(&ws.pp, n, &mut ws.fp, n);
    let (oe, rest) = out.split_at_mut(n2);
    let (og, ol) = rest.split_at_mut(n);
    if !op.means_only {
        for i in 0..n {
            for j in 0..n {
                let mut s = T::zero();
                for q in 0..n {
                    s += ws.fp[q * n + i] * ws.fp[q * n + j];
                }
                ol[i * n + j] = p[i * n + j] - s;
            }
        }
        symmetrize(ol, n);
    }
    // fp <- E^T = L^{-T} V
    solve_upper_t_in_place(&ws.pp, n, &mut ws.fp, n);
    for i in 0..n {
        let mut s = x[i];
        for j in 0..n {
            let e = ws.fp[j * n + i];
            oe[i * n + j] = e;
            s -= e * ws.xp[j];
        }
        og[i] = s;
    }
    true
}

/// The element of the last step (eq. 50): `(0, x_{T|T}, P_{T|T})`.
pub(crate) fn element_last<T: Real>(op: &SmoothOp<T>, x: &[T], p: &[T], out: &mut [T]) {
    let n = op.n;
    out.fill(T::zero());
    out[n * n..n * n + n].copy_from_slice(x);
    if !op.means_only {
        out[n * n + n..].copy_from_slice(p);
    }
}
