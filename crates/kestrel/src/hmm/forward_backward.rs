//! The sequential forward-backward recursions in scaled form (Rabiner 1989, with the
//! per-step normaliser as the predictive likelihood): the filter
//! `p(x_t | y_0..t) ∝ p(y_t | x_t) sum_z p(x_t | z) p(z | y_0..t-1)` and the backward
//! (Rauch-Tung-Striebel-like) smoother
//! `p(x_t | y) = p(x_t | y_0..t) sum_z A(x_t, z) p(x_{t+1} = z | y) / p(x_{t+1} = z | y_0..t)`,
//! which is Definition 2's element applied step by step.

use super::emission::Prepared;
use crate::linalg::Real;

/// `pred = prev A` (row vector times the transition matrix).
#[inline]
pub(crate) fn predict<T: Real>(k: usize, a: &[T], prev: &[T], pred: &mut [T]) {
    pred.fill(T::zero());
    for (z, &pz) in prev.iter().enumerate() {
        if pz == T::zero() {
            continue;
        }
        let row = &a[z * k..(z + 1) * k];
        for (p, &r) in pred.iter_mut().zip(row) {
            *p += pz * r;
        }
    }
}

/// Scales `v` to sum to 1 (left alone when its sum is 0).
#[inline]
pub(crate) fn normalise<T: Real>(v: &mut [T]) {
    let s = v.iter().copied().fold(T::zero(), |a, b| a + b);
    if s > T::zero() {
        for x in v.iter_mut() {
            *x /= s;
        }
    }
}

/// The filter over one track's observations `y` (`[T][ny]`): `filtered` `[T][K]`,
/// `loglik` `[T]`. `Err(t)`: observation `t` has probability 0 given those before it.
pub fn filter_track<T: Real>(
    p: &Prepared<T>,
    y: &[T],
    ny: usize,
    filtered: &mut [T],
    loglik: &mut [T],
) -> Result<(), usize> {
    let k = p.k;
    let mut e = vec![T::zero(); k];
    for (t, ll) in loglik.iter_mut().enumerate() {
        let (before, rest) = filtered.split_at_mut(t * k);
        let cur = &mut rest[..k];
        if t == 0 {
            cur.copy_from_slice(&p.init);
        } else {
            predict(k, &p.a, &before[(t - 1) * k..], cur);
        }
        let yt = &y[t * ny..(t + 1) * ny];
        if yt.iter().any(|v| v.is_nan_value()) {
            // Missing: predict only; the log-likelihood is 0 exactly.
            normalise(cur);
            *ll = T::zero();
            continue;
        }
        let shift = p.scaled_emission(yt, &mut e);
        let mut c = T::zero();
        for (x, &ei) in cur.iter_mut().zip(&e) {
            *x *= ei;
            c += *x;
        }
        if !(c > T::zero() && c.is_finite_value()) {
            return Err(t);
        }
        for x in cur.iter_mut() {
            *x /= c;
        }
        *ll = c.ln() + shift;
    }
    Ok(())
}

/// The backward smoother from one track's `filtered` `[T][K]` into `smoothed` `[T][K]`.
pub fn smooth_track<T: Real>(p: &Prepared<T>, filtered: &[T], smoothed: &mut [T]) {
    let k = p.k;
    let steps = filtered.len() / k;
    if steps == 0 {
        return;
    }
    let last = (steps - 1) * k;
    smoothed[last..].copy_from_slice(&filtered[last..]);
    let mut pred = vec![T::zero(); k];
    for t in (0..steps - 1).rev() {
        let f = &filtered[t * k..(t + 1) * k];
        predict(k, &p.a, f, &mut pred);
        let (cur, next) = smoothed[t * k..].split_at_mut(k);
        // r(z) = p(x_{t+1} = z | y) / p(x_{t+1} = z | y_0..t), 0 where the latter is 0.
        for (pz, &sz) in pred.iter_mut().zip(&next[..k]) {
            *pz = if *pz > T::zero() { sz / *pz } else { T::zero() };
        }
        for (x, c) in cur.iter_mut().enumerate() {
            let row = &p.a[x * k..(x + 1) * k];
            let s = row
                .iter()
                .zip(&pred)
                .fold(T::zero(), |acc, (&a, &r)| acc + a * r);
            *c = f[x] * s;
        }
        normalise(cur);
    }
}
