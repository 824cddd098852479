//! The probabilistic data association (PDA) update of the per-step API: each target
//! updated with a weighted mixture of candidate measurements instead of one.

use super::{BatchState, Store};
use crate::error::{Error, Result};
use crate::kalman::step::{innovation, Innovation, StepMats};
use crate::linalg::{cholesky_in_place, solve_lower_in_place, Real};
use rayon::prelude::*;

/// Slots per rayon task at the least.
const MIN_SLOTS: usize = 64;

/// Candidate measurements and their weights for [`BatchState::update_mixture`], in
/// compressed rows: slot `b`'s candidates are rows `start[b]..start[b + 1]` of `z`
/// (`[rows][ny]`) and `beta` (`[rows]`).
#[derive(Clone, Copy, Debug)]
pub struct Mixture<'a, T> {
    /// `[capacity + 1]`, non-decreasing, from 0.
    pub start: &'a [usize],
    /// The candidate measurements, `[rows][ny]`.
    pub z: &'a [T],
    /// The probability that each candidate is the target's; a slot's weights sum to at
    /// most 1, the rest `beta_0 = 1 - sum beta` being "none of them".
    pub beta: &'a [T],
}

impl<T: Real> BatchState<T> {
    /// The PDA update of every live target that has candidates (Bar-Shalom, Daum & Huang,
    /// IEEE CSM 2009, eqs. 38-42): with `S = L L^T`, `W = P H^T L^{-T}`, whitened
    /// innovations `e_j = L^{-1} (z_j - H x - d)` and `ebar = sum_j beta_j e_j`,
    /// `x += W ebar` and
    /// `P -= W ((1 - beta_0) I - (sum_j beta_j e_j e_j^T - ebar ebar^T)) W^T`.
    /// Targets without candidates keep their prediction (log-likelihood term 0); the
    /// others get their `H x + d` and `S` refreshed and no log-likelihood (NaN: the
    /// mixture's depends on a clutter model this API does not know).
    ///
    /// ```
    /// use kestrel::kalman::{BatchState, Mixture};
    /// let model = kestrel::model::random_walk(1, 0.1, 1.0, 1.0)?;
    /// let mut st = BatchState::<f64>::new(&model, 2)?;
    /// st.add_with_prior(&[0.0], &[1.0])?;
    /// st.add_with_prior(&[0.0], &[1.0])?;
    /// // Slot 0: two candidates at -1 and +1, equally likely: the mean stays at 0 and
    /// // the spread of the candidates widens the covariance past a plain update's 0.5.
    /// let mix = Mixture { start: &[0, 2, 2], z: &[-1.0, 1.0], beta: &[0.5, 0.5] };
    /// st.update_mixture(&mix)?;
    /// assert_eq!(st.mean(0), Some(&[0.0][..]));
    /// assert!((st.cov(0).unwrap()[0] - 0.75).abs() < 1e-12);
    /// assert_eq!(st.cov(1), Some(&[1.0][..]));
    /// # Ok::<(), kestrel::Error>(())
    /// ```
    pub fn update_mixture(&mut self, mix: &Mixture<'_, T>) -> Result<()> {
        let (cap, ny) = (self.st.cap, self.st.ny);
        let start = mix.start;
        if start.len() != cap + 1 || start[0] != 0 || start.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::input(format!(
                "mixture: expected {} non-decreasing row starts from 0",
                cap + 1
            )));
        }
        let rows = start[cap];
        if mix.beta.len() != rows || mix.z.len() != rows * ny {
            return Err(Error::input(format!(
                "mixture: {rows} candidates need {rows} weights and {} values, got {} and {}",
                rows * ny,
                mix.beta.len(),
                mix.z.len()
            )));
        }
        if let Some(i) = mix.z.iter().position(|v| !v.is_finite_value()) {
            return Err(Error::input(format!(
                "mixture: candidate {} component z{} is not finite",
                i / ny,
                i % ny
            )));
        }
        let tol = T::of(1e-9);
        for b in 0..cap {
            let w = &mix.beta[start[b]..start[b + 1]];
            let mut sum = T::zero();
            for &v in w {
                if !(v.is_finite_value() && v >= T::zero()) {
                    return Err(Error::input(format!(
                        "mixture: slot {b}: weight {} is not a probability",
                        v.to_f64()
                    )));
                }
                sum += v;
            }
            if sum > T::one() + tol {
                return Err(Error::input(format!(
                    "mixture: slot {b}: weights sum to {} > 1",
                    sum.to_f64()
                )));
            }
        }
        let bad = pda(&mut self.st, &self.mats, mix);
        self.updated(bad)
    }
}

/// Scratch of one rayon task.
struct Scratch<T> {
    y: Vec<T>,
    s: Vec<T>,
    wt: Vec<T>,
    ebar: Vec<T>,
    m: Vec<T>,
}

/// The update of every slot with candidates; returns the lowest slot whose `S` was not
/// positive definite.
fn pda<T: Real>(st: &mut Store<T>, mats: &StepMats<T>, mix: &Mixture<'_, T>) -> Option<usize> {
    let (nx, ny) = (st.nx, st.ny);
    let live = &st.live;
    st.x.par_chunks_mut(nx)
        .zip(st.p.par_chunks_mut(nx * nx))
        .zip(st.ll.par_chunks_mut(1))
        .zip(st.zhat.par_chunks_mut(ny))
        .zip(st.s.par_chunks_mut(ny * ny))
        .enumerate()
        .with_min_len(MIN_SLOTS)
        .map_init(
            || {
                let z = |n| vec![T::zero(); n];
                Scratch {
                    y: z(ny),
                    s: z(ny * ny),
                    wt: z(ny * nx),
                    ebar: z(ny),
                    m: z(ny * ny),
                }
            },
            |sc, (b, ((((x, p), ll), zhat), s))| {
                if !live[b] {
                    return None;
                }
                let (r0, r1) = (mix.start[b], mix.start[b + 1]);
                if r0 == r1 {
                    ll[0] = T::zero();
                    return None;
                }
                let z0 = &mix.z[r0 * ny..(r0 + 1) * ny];
                let keep = Innovation {
                    zhat: &mut *zhat,
                    s,
                };
                innovation(
                    nx,
                    ny,
                    &mats.h,
                    &mats.d,
                    &mats.r,
                    z0,
                    x,
                    p,
                    &mut sc.y,
                    &mut sc.s,
                    &mut sc.wt,
                    Some(keep),
                );
                if !cholesky_in_place(&mut sc.s, ny) {
                    return Some(b);
                }
                // W^T = L^{-1} H P.
                solve_lower_in_place(&sc.s, ny, &mut sc.wt, nx);
                sc.ebar.fill(T::zero());
                sc.m.fill(T::zero());
                let mut detected = T::zero();
                for k in r0..r1 {
                    let beta = mix.beta[k];
                    detected += beta;
                    for a in 0..ny {
                        sc.y[a] = mix.z[k * ny + a] - zhat[a];
                    }
                    solve_lower_in_place(&sc.s, ny, &mut sc.y, 1);
                    for a in 0..ny {
                        sc.ebar[a] += beta * sc.y[a];
                        for c in 0..ny {
                            sc.m[a * ny + c] += beta * sc.y[a] * sc.y[c];
                        }
                    }
                }
                // M = (1 - beta_0) I - (sum beta e e^T - ebar ebar^T).
                for a in 0..ny {
                    for c in 0..ny {
                        let spread = sc.m[a * ny + c] - sc.ebar[a] * sc.ebar[c];
                        sc.m[a * ny + c] = if a == c { detected } else { T::zero() } - spread;
                    }
                }
                let wt = &sc.wt;
                for i in 0..nx {
                    let mut acc = T::zero();
                    for a in 0..ny {
                        acc += wt[a * nx + i] * sc.ebar[a];
                    }
                    x[i] += acc;
                }
                for i in 0..nx {
                    for j in 0..=i {
                        let mut acc = T::zero();
                        for a in 0..ny {
                            for c in 0..ny {
                                acc += wt[a * nx + i] * sc.m[a * ny + c] * wt[c * nx + j];
                            }
                        }
                        let v = p[i * nx + j] - acc;
                        p[i * nx + j] = v;
                        p[j * nx + i] = v;
                    }
                }
                ll[0] = T::nan();
                None
            },
        )
        .flatten()
        .min()
}
