//! Small dense kernels on row-major slices for the element operators: products with
//! either factor transposed, an LU factorisation with partial pivoting and its solve.

use crate::linalg::Real;

/// `out = a b`, `a` is `m x k`, `b` is `k x n`.
#[inline(always)]
pub(crate) fn mul<T: Real>(a: &[T], b: &[T], out: &mut [T], m: usize, k: usize, n: usize) {
    for i in 0..m {
        for j in 0..n {
            let mut s = T::zero();
            for l in 0..k {
                s += a[i * k + l] * b[l * n + j];
            }
            out[i * n + j] = s;
        }
    }
}

/// `out = a b^T`, `a` is `m x k`, `b` is `n x k`.
#[inline(always)]
pub(crate) fn mul_nt<T: Real>(a: &[T], b: &[T], out: &mut [T], m: usize, k: usize, n: usize) {
    for i in 0..m {
        for j in 0..n {
            let mut s = T::zero();
            for l in 0..k {
                s += a[i * k + l] * b[j * k + l];
            }
            out[i * n + j] = s;
        }
    }
}

/// `out = a^T b`, `a` is `k x m`, `b` is `k x n`.
#[inline(always)]
pub(crate) fn mul_tn<T: Real>(a: &[T], b: &[T], out: &mut [T], m: usize, k: usize, n: usize) {
    for i in 0..m {
        for j in 0..n {
            let mut s = T::zero();
            for l in 0..k {
                s += a[l * m + i] * b[l * n + j];
            }
            out[i * n + j] = s;
        }
    }
}

/// `y = a x` (`a` is `m x n`), added to `y` when `add`.
#[inline(always)]
pub(crate) fn mat_vec<T: Real>(a: &[T], x: &[T], y: &mut [T], m: usize, n: usize, add: bool) {
    for i in 0..m {
        let mut s = if add { y[i] } else { T::zero() };
        for j in 0..n {
            s += a[i * n + j] * x[j];
        }
        y[i] = s;
    }
}

/// `y = a^T x` (`a` is `m x n`, `y` has `n`), added to `y` when `add`.
#[inline(always)]
pub(crate) fn mat_t_vec<T: Real>(a: &[T], x: &[T], y: &mut [T], m: usize, n: usize, add: bool) {
    for j in 0..n {
        let mut s = if add { y[j] } else { T::zero() };
        for i in 0..m {
            s += a[i * n + j] * x[i];
        }
        y[j] = s;
    }
}

/// Replaces the square `n x n` matrix `a` by `(a + a^T) / 2`.
#[inline(always)]
pub(crate) fn symmetrize<T: Real>(a: &mut [T], n: usize) {
    let half = T::of(0.5);
    for i in 0..n {
        for j in 0..i {
            let v = (a[i * n + j] + a[j * n + i]) * half;
            a[i * n + j] = v;
            a[j * n + i] = v;
        }
    }
}

/// Sets `a` (`n x n`) to the identity.
#[inline(always)]
pub(crate) fn set_identity<T: Real>(a: &mut [T], n: usize) {
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = if i == j { T::one() } else { T::zero() };
        }
    }
}

/// LU factorisation with partial pivoting, in place (`P a = L U`, unit `L` below the
/// diagonal). Returns `false` when a pivot is zero or not finite.
#[inline(always)]
pub(crate) fn lu_in_place<T: Real>(a: &mut [T], n: usize, piv: &mut [usize]) -> bool {
    for k in 0..n {
        let mut p = k;
        let mut best = a[k * n + k].abs();
        for i in (k + 1)..n {
            let v = a[i * n + k].abs();
            if v > best {
                best = v;
                p = i;
            }
        }
        piv[k] = p;
        if best <= T::zero() || !best.is_finite_value() {
            return false;
        }
        if p != k {
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
        }
        let d = a[k * n + k];
        for i in (k + 1)..n {
            let f = a[i * n + k] / d;
            a[i * n + k] = f;
            for j in (k + 1)..n {
                let u = a[k * n + j];
                a[i * n + j] -= f * u;
            }
        }
    }
    true
}

/// Solves `a x = b` with the factors of [`lu_in_place`], for the `m` columns of the
/// row-major `n x m` matrix `b`, in place.
#[inline(always)]
pub(crate) fn lu_solve<T: Real>(lu: &[T], n: usize, piv: &[usize], b: &mut [T], m: usize) {
    for (k, &p) in piv.iter().enumerate().take(n) {
        if p != k {
            for c in 0..m {
                b.swap(k * m + c, p * m + c);
            }
        }
    }
    for c in 0..m {
        for i in 0..n {
            let mut s = b[i * m + c];
            for k in 0..i {
                s -= lu[i * n + k] * b[k * m + c];
            }
            b[i * m + c] = s;
        }
        for i in (0..n).rev() {
            let mut s = b[i * m + c];
            for k in (i + 1)..n {
                s -= lu[i * n + k] * b[k * m + c];
            }
            b[i * m + c] = s / lu[i * n + i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lu_solves_a_system_that_needs_pivoting() {
        // a = [[0, 2, 1], [1, 1, 0], [3, 0, 1]], x = [1, -1, 2] -> b = [0, 0, 5].
        let mut a: [f64; 9] = [0.0, 2.0, 1.0, 1.0, 1.0, 0.0, 3.0, 0.0, 1.0];
        let mut piv = [0; 3];
        assert!(lu_in_place(&mut a, 3, &mut piv));
        let mut b: [f64; 3] = [0.0, 0.0, 5.0];
        lu_solve(&a, 3, &piv, &mut b, 1);
        for (g, w) in b.iter().zip([1.0, -1.0, 2.0]) {
            assert!((g - w).abs() < 1e-14, "{b:?}");
        }
        let mut s = [1.0, 2.0, 2.0, 4.0];
        assert!(!lu_in_place(&mut s, 2, &mut piv));
    }
}
