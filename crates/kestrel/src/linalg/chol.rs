//! In-place Cholesky factorisation and triangular solves on row-major slices.
//!
//! Written by hand rather than through `nalgebra::Cholesky` because the recursions call
//! them once per step on preallocated buffers: nalgebra's decomposition takes its matrix
//! by value and would allocate on every step.

use super::Real;

/// Factors the symmetric `n x n` matrix `a` (row-major) as `L L^T` in place; the lower
/// triangle of `a` receives `L`, the strict upper triangle is zeroed. Returns `false`
/// when a pivot is not positive (the matrix is not positive definite).
#[inline]
pub fn cholesky_in_place<T: Real>(a: &mut [T], n: usize) -> bool {
    for j in 0..n {
        let mut s = a[j * n + j];
        for k in 0..j {
            s -= a[j * n + k] * a[j * n + k];
        }
        if !(s > T::zero()) {
            return false;
        }
        let d = s.sqrt();
        a[j * n + j] = d;
        for i in (j + 1)..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
        for i in 0..j {
            a[i * n + j] = T::zero();
        }
    }
    true
}

/// Solves `L y = b` in place for `m` right-hand sides stored as the columns of the
/// row-major `n x m` matrix `b`, with `L` lower triangular (row-major, `n x n`).
#[inline]
pub fn solve_lower_in_place<T: Real>(l: &[T], n: usize, b: &mut [T], m: usize) {
    for c in 0..m {
        for i in 0..n {
            let mut s = b[i * m + c];
            for k in 0..i {
                s -= l[i * n + k] * b[k * m + c];
            }
            b[i * m + c] = s / l[i * n + i];
        }
    }
}

/// Solves `L^T y = b` in place (back substitution with the transpose of lower `L`), for
/// `m` right-hand sides in the columns of the row-major `n x m` matrix `b`.
#[inline]
pub fn solve_upper_t_in_place<T: Real>(l: &[T], n: usize, b: &mut [T], m: usize) {
    for c in 0..m {
        for i in (0..n).rev() {
            let mut s = b[i * m + c];
            for k in (i + 1)..n {
                s -= l[k * n + i] * b[k * m + c];
            }
            b[i * m + c] = s / l[i * n + i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_and_solve_a_known_matrix() {
        // A = [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt 2]].
        let mut a = [4.0, 2.0, 2.0, 3.0];
        assert!(cholesky_in_place(&mut a, 2));
        assert_eq!(a[0], 2.0);
        assert_eq!(a[1], 0.0);
        assert_eq!(a[2], 1.0);
        assert!((a[3] - 2f64.sqrt()).abs() < 1e-15);
        // Solve A x = [6, 5] -> x = [1, 1].
        let mut b = [6.0, 5.0];
        solve_lower_in_place(&a, 2, &mut b, 1);
        solve_upper_t_in_place(&a, 2, &mut b, 1);
        assert!((b[0] - 1.0).abs() < 1e-14 && (b[1] - 1.0).abs() < 1e-14);
    }

    #[test]
    fn rejects_indefinite() {
        let mut a = [1.0, 2.0, 2.0, 1.0];
        assert!(!cholesky_in_place(&mut a, 2));
    }
}
