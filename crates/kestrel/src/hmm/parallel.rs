//! The parallel-in-time forms: Sarkka & Garcia-Fernandez's Definitions 1-2 for a finite
//! state space (as in Hassan, Sarkka & Garcia-Fernandez, IEEE TSP 2021), their
//! associative operators on the engine of [`crate::scan`], and the Viterbi path by a
//! max-product scan followed by a scan of back-pointer maps.
//!
//! Filtering element of step `t` (Definition 1): `f_t(z, x) = p(x_t = x | y_t, x_{t-1} = z)`
//! (row-stochastic `K x K`) and `ln g_t(z) = ln p(y_t | x_{t-1} = z)`; step 0's rows are
//! all `p(x_0 | y_0)` and `ln p(y_0)`. The combination (Lemma 1 / eq. 8-9) is
//! `f_ij(z, x) = sum_y f_i(z, y) g_j(y) f_j(y, x) / N(z)`, `N(z) = sum_y f_i(z, y) g_j(y)`,
//! `ln g_ij(z) = ln g_i(z) + ln N(z)`; the prefix up to `t` has every row `p(x_t | y_0..t)`.
//! The per-step log-likelihood is then a local sum from the filtered distribution before
//! it, so no difference of two large cumulative sums is ever taken.
//!
//! Smoothing element (Definition 2): `E_t(z, x) = p(x_t = x | y_0..t, x_{t+1} = z)`, the
//! last one with every row `p(x_{T-1} | y)`; combined as matrix products in a reverse scan.

use super::emission::Prepared;
use super::forward_backward::{normalise, predict};
use super::viterbi::{argmax, best_from, grid_emission};
use crate::linalg::Real;
use crate::scan::{scan, AssocOp, Direction, Exec, ScanAlgorithm};
use rayon::prelude::*;

/// Runs `f(scratch, t, elem_t)` over the elements (`len` scalars each) of `data`.
fn each<S, W, I, F>(exec: Exec, data: &mut [S], len: usize, init: I, f: F)
where
    S: Send,
    I: Fn() -> W + Sync + Send,
    F: Fn(&mut W, usize, &mut [S]) + Sync + Send,
{
    match exec {
        Exec::Rayon => data
            .par_chunks_mut(len)
            .enumerate()
            .with_min_len(256)
            .for_each_init(init, |w, (t, c)| f(w, t, c)),
        Exec::Serial => {
            let mut w = init();
            for (t, c) in data.chunks_mut(len).enumerate() {
                f(&mut w, t, c)
            }
        }
    }
}

/// Declares operators over `K`-state elements: the struct (states `k`) and its `new`.
macro_rules! state_op {
    ($($(#[$m:meta])* $name:ident;)+) => {$(
        $(#[$m])*
        pub struct $name<T> {
            /// States.
            pub k: usize,
            _t: std::marker::PhantomData<T>,
        }

        impl<T> $name<T> {
            /// The operator for `k` states.
            pub fn new(k: usize) -> Self {
                $name {
                    k,
                    _t: std::marker::PhantomData,
                }
            }
        }
    )+};
}

state_op! {
    /// Definition 1's operator: elements `[f (K x K) | ln g (K)]`.
    FilterElemOp;
    /// Definition 2's operator: `K x K` row-stochastic elements, `a ⊗ b = b a` (the later
    /// element's matrix first).
    SmoothElemOp;
    /// The max-product operator in logarithms (max-plus matrix product), each result
    /// shifted to a largest entry of 0 (the path depends on differences only).
    MaxPlusOp;
}

impl<T: Real> AssocOp for FilterElemOp<T> {
    type Scalar = T;
    type Scratch = (Vec<T>, Vec<T>);
    fn elem_len(&self) -> usize {
        self.k * self.k + self.k
    }
    fn scratch(&self) -> Self::Scratch {
        (vec![T::zero(); self.k], vec![T::zero(); self.k])
    }
    fn identity(&self, out: &mut [T]) {
        diagonal(out, self.k, T::zero(), T::one());
    }
    fn combine(&self, a: &[T], b: &[T], out: &mut [T], s: &mut Self::Scratch) {
        let k = self.k;
        let (fa, la) = a.split_at(k * k);
        let (fb, lb) = b.split_at(k * k);
        let (fo, lo) = out.split_at_mut(k * k);
        let (gb, w) = s;
        let m = lb
            .iter()
            .copied()
            .fold(T::of(f64::NEG_INFINITY), |m, v| if v > m { v } else { m });
        let shift = if m.is_finite_value() { m } else { T::zero() };
        for (g, &l) in gb.iter_mut().zip(lb) {
            *g = (l - shift).exp();
        }
        for z in 0..k {
            let mut n = T::zero();
            for y in 0..k {
                w[y] = fa[z * k + y] * gb[y];
                n += w[y];
            }
            let row = &mut fo[z * k..(z + 1) * k];
            if n > T::zero() && la[z] > T::of(f64::NEG_INFINITY) {
                row.fill(T::zero());
                for (y, &wy) in w.iter().enumerate() {
                    if wy == T::zero() {
                        continue;
                    }
                    for (o, &f) in row.iter_mut().zip(&fb[y * k..(y + 1) * k]) {
                        *o += wy * f;
                    }
                }
                for o in row.iter_mut() {
                    *o /= n;
                }
                lo[z] = la[z] + n.ln() + shift;
            } else {
                // A conditioning state of probability 0: any distribution will do.
                row.fill(T::one() / T::of(k as f64));
                lo[z] = T::of(f64::NEG_INFINITY);
            }
        }
    }
}

impl<T: Real> AssocOp for SmoothElemOp<T> {
    type Scalar = T;
    type Scratch = ();
    fn elem_len(&self) -> usize {
        self.k * self.k
    }
    fn scratch(&self) {}
    fn identity(&self, out: &mut [T]) {
        diagonal(out, self.k, T::zero(), T::one());
    }
    fn combine(&self, a: &[T], b: &[T], out: &mut [T], _: &mut ()) {
        let k = self.k;
        for z in 0..k {
            let row = &mut out[z * k..(z + 1) * k];
            row.fill(T::zero());
            for y in 0..k {
                let byz = b[z * k + y];
                if byz == T::zero() {
                    continue;
                }
                for (o, &ay) in row.iter_mut().zip(&a[y * k..(y + 1) * k]) {
                    *o += byz * ay;
                }
            }
        }
    }
}

impl<T: Real> AssocOp for MaxPlusOp<T> {
    type Scalar = T;
    type Scratch = ();
    fn elem_len(&self) -> usize {
        self.k * self.k
    }
    fn scratch(&self) {}
    fn identity(&self, out: &mut [T]) {
        diagonal(out, self.k, T::of(f64::NEG_INFINITY), T::zero());
    }
    fn combine(&self, a: &[T], b: &[T], out: &mut [T], _: &mut ()) {
        let k = self.k;
        let ninf = T::of(f64::NEG_INFINITY);
        let mut top = ninf;
        for z in 0..k {
            for x in 0..k {
                let mut m = ninf;
                for y in 0..k {
                    let v = a[z * k + y] + b[y * k + x];
                    if v > m {
                        m = v;
                    }
                }
                out[z * k + x] = m;
                if m > top {
                    top = m;
                }
            }
        }
        if top.is_finite_value() {
            for o in out.iter_mut() {
                *o -= top;
            }
        }
    }
}

/// `out` (its first `k x k` entries a matrix) as `off` everywhere but `on` on the
/// diagonal: an operator's identity (the rest of `out` `off` too).
fn diagonal<T: Real>(out: &mut [T], k: usize, off: T, on: T) {
    out.fill(off);
    for i in 0..k {
        out[i * k + i] = on;
    }
}

/// Composition of maps of the states: `(a ⊗ b)(x) = a(b(x))`.
pub struct ComposeOp {
    /// States.
    pub k: usize,
}

impl AssocOp for ComposeOp {
    type Scalar = u32;
    type Scratch = ();
    fn elem_len(&self) -> usize {
        self.k
    }
    fn scratch(&self) {}
    fn identity(&self, out: &mut [u32]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = i as u32;
        }
    }
    fn combine(&self, a: &[u32], b: &[u32], out: &mut [u32], _: &mut ()) {
        for (o, &bx) in out.iter_mut().zip(b) {
            *o = a[bx as usize];
        }
    }
}

/// Step `t`'s filtering element into `el`; `e` is scratch of `K`.
pub(crate) fn filter_element<T: Real>(
    p: &Prepared<T>,
    yt: &[T],
    t: usize,
    el: &mut [T],
    e: &mut [T],
) {
    let k = p.k;
    let shift = p.scaled_emission(yt, e);
    let (f, lg) = el.split_at_mut(k * k);
    let uniform = T::one() / T::of(k as f64);
    let ninf = T::of(f64::NEG_INFINITY);
    for z in 0..k {
        let row = &mut f[z * k..(z + 1) * k];
        let from = if t == 0 {
            &p.init[..]
        } else {
            &p.a[z * k..(z + 1) * k]
        };
        let mut n = T::zero();
        for ((r, &a), &ei) in row.iter_mut().zip(from).zip(e.iter()) {
            *r = a * ei;
            n += *r;
        }
        if n > T::zero() {
            for r in row.iter_mut() {
                *r /= n;
            }
            lg[z] = n.ln() + shift;
        } else {
            row.fill(uniform);
            lg[z] = ninf;
        }
    }
}

/// The parallel filter of one track: `filtered` `[T][K]`, `loglik` `[T]`; `Err(t)` as
/// [`super::filter_track`].
pub(crate) fn filter<T: Real>(
    p: &Prepared<T>,
    y: &[T],
    ny: usize,
    filtered: &mut [T],
    loglik: &mut [T],
    alg: ScanAlgorithm,
    exec: Exec,
) -> Result<(), usize> {
    let k = p.k;
    let steps = loglik.len();
    let op = FilterElemOp::<T>::new(k);
    let len = op.elem_len();
    let mut el = vec![T::zero(); steps * len];
    each(
        exec,
        &mut el,
        len,
        || vec![T::zero(); k],
        |e, t, c| filter_element(p, &y[t * ny..(t + 1) * ny], t, c, e),
    );
    scan(&op, &mut el, alg, Direction::Forward, exec);
    each(
        exec,
        filtered,
        k,
        || (),
        |_, t, f| {
            f.copy_from_slice(&el[t * len..t * len + k]);
            normalise(f);
        },
    );
    let first_bad = std::sync::atomic::AtomicUsize::new(usize::MAX);
    let filtered: &[T] = filtered;
    each(
        exec,
        loglik,
        1,
        || (vec![T::zero(); k], vec![T::zero(); k]),
        |(e, pred), t, l| {
            let yt = &y[t * ny..(t + 1) * ny];
            let v = if yt.iter().any(|v| v.is_nan_value()) {
                T::zero()
            } else if t == 0 {
                el[k * k]
            } else {
                predict(k, &p.a, &filtered[(t - 1) * k..t * k], pred);
                let shift = p.scaled_emission(yt, e);
                let c = pred
                    .iter()
                    .zip(e.iter())
                    .fold(T::zero(), |s, (&a, &b)| s + a * b);
                if c > T::zero() {
                    c.ln() + shift
                } else {
                    T::of(f64::NEG_INFINITY)
                }
            };
            if !v.is_finite_value() {
                first_bad.fetch_min(t, std::sync::atomic::Ordering::Relaxed);
            }
            l[0] = v;
        },
    );
    match first_bad.into_inner() {
        usize::MAX => Ok(()),
        t => Err(t),
    }
}

/// The parallel smoother of one track from its `filtered` `[T][K]` into `smoothed`.
pub(crate) fn smooth<T: Real>(
    p: &Prepared<T>,
    filtered: &[T],
    smoothed: &mut [T],
    alg: ScanAlgorithm,
    exec: Exec,
) {
    let k = p.k;
    let steps = filtered.len() / k;
    let op = SmoothElemOp::<T>::new(k);
    let len = k * k;
    let mut el = vec![T::zero(); steps * len];
    each(
        exec,
        &mut el,
        len,
        || vec![T::zero(); k],
        |pred, t, c| {
            let f = &filtered[t * k..(t + 1) * k];
            if t + 1 == steps {
                for row in c.chunks_mut(k) {
                    row.copy_from_slice(f);
                }
                return;
            }
            predict(k, &p.a, f, pred);
            for z in 0..k {
                let row = &mut c[z * k..(z + 1) * k];
                if pred[z] > T::zero() {
                    for (x, r) in row.iter_mut().enumerate() {
                        *r = f[x] * p.a[x * k + z] / pred[z];
                    }
                } else {
                    row.copy_from_slice(f);
                }
            }
        },
    );
    scan(&op, &mut el, alg, Direction::Reverse, exec);
    each(
        exec,
        smoothed,
        k,
        || (),
        |_, t, s| {
            s.copy_from_slice(&el[t * len..t * len + k]);
            normalise(s);
        },
    );
}

/// The Viterbi path of one track by the max-product scan and the scan of back-pointer
/// maps; the same tie rule as [`super::viterbi_track`].
pub(crate) fn viterbi<T: Real>(
    p: &Prepared<f64>,
    y: &[T],
    ny: usize,
    path: &mut [i64],
    alg: ScanAlgorithm,
    exec: Exec,
) {
    let k = p.k;
    let steps = path.len();
    let op = MaxPlusOp::<f64>::new(k);
    let len = k * k;
    let mut el = vec![0.0; steps * len];
    each(
        exec,
        &mut el,
        len,
        || (vec![0.0; k], vec![0.0; ny]),
        |(l, y64), t, c| {
            grid_emission(p, &y[t * ny..(t + 1) * ny], y64, l);
            for z in 0..k {
                let from = if t == 0 {
                    &p.ln_init[..]
                } else {
                    &p.ln_a[z * k..(z + 1) * k]
                };
                for x in 0..k {
                    c[z * k + x] = from[x] + l[x];
                }
            }
        },
    );
    scan(&op, &mut el, alg, Direction::Forward, exec);
    // Map t: the back-pointers into step t + 1 (the last: the constant final state).
    let mut maps = vec![0u32; steps * k];
    each(
        exec,
        &mut maps,
        k,
        || (),
        |_, t, m| {
            let delta = &el[t * len..t * len + k];
            if t + 1 == steps {
                m.fill(argmax(delta) as u32);
            } else {
                for (j, mj) in m.iter_mut().enumerate() {
                    *mj = best_from(k, &p.ln_a, delta, j).0 as u32;
                }
            }
        },
    );
    scan(&ComposeOp { k }, &mut maps, alg, Direction::Reverse, exec);
    for (t, pt) in path.iter_mut().enumerate() {
        *pt = i64::from(maps[t * k]);
    }
}
