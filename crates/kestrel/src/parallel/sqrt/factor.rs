//! The small dense kernels of the square-root filter: orthogonal triangularisation
//! (`tria`), a Cholesky factor that tolerates semi-definite matrices, products and a
//! triangular solve, on row-major slices.

use crate::linalg::Real;

/// `L` (`n x n`, lower, non-negative diagonal) with `L L^T = X X^T` for `x` (`n x m`,
/// row-major): Householder reflections from the right (`X Q = [L 0]`). `w` is scratch of
/// `n * m`.
pub(crate) fn tria<T: Real>(x: &[T], n: usize, m: usize, w: &mut Vec<T>, out: &mut [T]) {
    w.clear();
    w.extend_from_slice(&x[..n * m]);
    for i in 0..n.min(m) {
        let mut alpha = T::zero();
        for c in i..m {
            alpha += w[i * m + c] * w[i * m + c];
        }
        let alpha = alpha.sqrt();
        if alpha == T::zero() {
            continue;
        }
        let s = if w[i * m + i] > T::zero() {
            -alpha
        } else {
            alpha
        };
        // v = row i from column i on, minus s e_i; reflect rows i..n.
        let v0 = w[i * m + i] - s;
        let mut vn = v0 * v0;
        for c in i + 1..m {
            vn += w[i * m + c] * w[i * m + c];
        }
        if vn == T::zero() {
            continue;
        }
        for r in (i + 1)..n {
            let mut dot = w[r * m + i] * v0;
            for c in i + 1..m {
                dot += w[r * m + c] * w[i * m + c];
            }
            let f = (dot + dot) / vn;
            w[r * m + i] -= f * v0;
            for c in i + 1..m {
                let vc = w[i * m + c];
                w[r * m + c] -= f * vc;
            }
        }
        w[i * m + i] = s;
        for c in i + 1..m {
            w[i * m + c] = T::zero();
        }
    }
    out[..n * n].fill(T::zero());
    for c in 0..n.min(m) {
        let sign = if w[c * m + c] < T::zero() {
            -T::one()
        } else {
            T::one()
        };
        for r in c..n {
            out[r * n + c] = sign * w[r * m + c];
        }
    }
}

/// A lower factor `L` with `L L^T = A` for a symmetric positive semi-definite `a`:
/// Cholesky where a pivot below `1e-12` (relative to the largest diagonal) gives a zero
/// column. False when a pivot is clearly negative.
pub(crate) fn psd_factor<T: Real>(a: &[T], n: usize, out: &mut [T]) -> bool {
    let scale = (0..n).fold(T::zero(), |m, i| m.max(a[i * n + i].abs()));
    let tol = scale * T::of(1e-12);
    out[..n * n].fill(T::zero());
    for j in 0..n {
        let mut s = a[j * n + j];
        for k in 0..j {
            s -= out[j * n + k] * out[j * n + k];
        }
        if s <= tol {
            if s < -scale * T::of(1e-6) {
                return false;
            }
            continue;
        }
        let d = s.sqrt();
        out[j * n + j] = d;
        for i in j + 1..n {
            let mut t = (a[i * n + j] + a[j * n + i]) * T::of(0.5);
            for k in 0..j {
                t -= out[i * n + k] * out[j * n + k];
            }
            out[i * n + j] = t / d;
        }
    }
    true
}

/// `out = a b` for `m x k` times `k x n`, or with `a` (`ta`) / `b` (`tb`) transposed as
/// stored (`a` stored `k x m`, `b` stored `n x k`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<T: Real>(
    a: &[T],
    ta: bool,
    b: &[T],
    tb: bool,
    out: &mut [T],
    m: usize,
    k: usize,
    n: usize,
) {
    for i in 0..m {
        for j in 0..n {
            let mut s = T::zero();
            for l in 0..k {
                let x = if ta { a[l * m + i] } else { a[i * k + l] };
                let y = if tb { b[j * k + l] } else { b[l * n + j] };
                s += x * y;
            }
            out[i * n + j] = s;
        }
    }
}

/// Solves `L X = B` in place (`L` `n x n` lower with leading dimension `ld` at `l`, `B`
/// `n x w`); false on a zero pivot.
pub(crate) fn lower_solve<T: Real>(l: &[T], ld: usize, n: usize, b: &mut [T], w: usize) -> bool {
    for i in 0..n {
        let d = l[i * ld + i];
        if d == T::zero() {
            return false;
        }
        for c in 0..w {
            let mut s = b[i * w + c];
            for k in 0..i {
                s -= l[i * ld + k] * b[k * w + c];
            }
            b[i * w + c] = s / d;
        }
    }
    true
}
