//! The Viterbi path, sequentially (Viterbi 1967; Rabiner 1989, Section III-B) in
//! logarithms: `delta_t(j) = max_i (delta_{t-1}(i) + ln A(i, j)) + ln p(y_t | j)`, shifted
//! to a maximum of 0 each step, back-pointers kept, then followed back from the end.
//! Ties go to the smallest index (see the module documentation of [`super`]).
//!
//! The scores are computed in f64 whatever the precision of the run, from logarithms
//! rounded to multiples of [`GRID`] (`2^-26`): sums of such numbers are exact (below
//! `2^27` in size), so every association order, the sequential recursion, the scans
//! and the GPU's chunks, gives the same scores bit for bit and the same path, ties
//! included. The rounding moves a path's log-probability by at most `T 2^-27`.

use super::emission::Prepared;
use crate::linalg::Real;

/// The grid of the Viterbi scores' logarithms.
pub const GRID: f64 = 1.0 / (1u64 << 26) as f64;

/// `v` rounded to a multiple of [`GRID`] (infinities kept).
#[inline]
pub fn on_grid(v: f64) -> f64 {
    if v.is_finite() {
        (v * (1u64 << 26) as f64).round() * GRID
    } else {
        v
    }
}

/// The log-emissions of `y` on the grid into `l` (zeros for a missing `y`).
#[inline]
pub(crate) fn grid_emission<T: Real>(p: &Prepared<f64>, y: &[T], y64: &mut [f64], l: &mut [f64]) {
    for (a, b) in y64.iter_mut().zip(y) {
        *a = b.to_f64();
    }
    if p.log_emission(y64, l) {
        for v in l.iter_mut() {
            *v = on_grid(*v);
        }
    } else {
        l.fill(0.0);
    }
}

/// The smallest index of the largest value (`-inf` everywhere gives 0).
#[inline]
pub(crate) fn argmax<T: Real>(v: &[T]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate().skip(1) {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// Subtracts the largest value from `v` when it is finite.
#[inline]
pub(crate) fn shift_to_zero<T: Real>(v: &mut [T]) {
    let m = v[argmax(v)];
    if m.is_finite_value() {
        for x in v.iter_mut() {
            *x -= m;
        }
    }
}

/// The back-pointer into state `j`: the smallest `i` maximising `delta(i) + ln A(i, j)`.
#[inline]
pub(crate) fn best_from<T: Real>(k: usize, ln_a: &[T], delta: &[T], j: usize) -> (usize, T) {
    let mut bi = 0;
    let mut bv = delta[0] + ln_a[j];
    for i in 1..k {
        let v = delta[i] + ln_a[i * k + j];
        if v > bv {
            bi = i;
            bv = v;
        }
    }
    (bi, bv)
}

/// The Viterbi path of one track's observations `y` (`[T][ny]`) into `path` (`[T]`).
pub fn viterbi_track<T: Real>(p: &Prepared<f64>, y: &[T], ny: usize, path: &mut [i64]) {
    let k = p.k;
    let steps = path.len();
    if steps == 0 {
        return;
    }
    let mut back = vec![0u32; steps * k];
    let mut delta = p.ln_init.clone();
    let mut next = vec![0.0; k];
    let mut l = vec![0.0; k];
    let mut y64 = vec![0.0; ny];
    for t in 0..steps {
        if t > 0 {
            for (j, n) in next.iter_mut().enumerate() {
                let (bi, bv) = best_from(k, &p.ln_a, &delta, j);
                back[t * k + j] = bi as u32;
                *n = bv;
            }
            std::mem::swap(&mut delta, &mut next);
        }
        grid_emission(p, &y[t * ny..(t + 1) * ny], &mut y64, &mut l);
        for (d, &li) in delta.iter_mut().zip(&l) {
            *d += li;
        }
        shift_to_zero(&mut delta);
    }
    let mut s = argmax(&delta);
    for t in (0..steps).rev() {
        path[t] = s as i64;
        s = back[t * k + s] as usize;
    }
}
