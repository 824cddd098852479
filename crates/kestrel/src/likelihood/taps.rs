//! The windowed filter unrolled into taps, computed once per model and missing pattern.
//!
//! A window of `N` steps starts at `s = t-N+1` from the vague prediction `(0, V I)`. Its
//! covariance recursion (Algorithm 2 of Lin, Moore & Russell, steps `i = 0..N-1`) does
//! not depend on the data:
//!
//! ```text
//! P_0 = V I;   P_i = F P_{i-1}^+ F^T + Q (i >= 1)
//! S_i = H P_i H^T + R,  K_i = P_i H^T S_i^{-1},  P_i^+ = P_i - K_i S_i K_i^T
//! (K_i = 0 and P_i^+ = P_i where z_{s+i} is missing)
//! ```
//!
//! and its mean recursion `x_{i+1} = F (I - K_i H) x_i + F K_i z_{s+i} + u - F K_i d`,
//! `x_0 = 0`, is linear in the measurements. The predicted measurement at the last step
//! is therefore `y^_t = H x_{N-1} + d = c + sum_{i<N-1} G_i z_{s+i}` with, backwards from
//! `A_{N-1} = H`, `c = d`:
//!
//! ```text
//! G_i = A_{i+1} F K_i,   c += A_{i+1} (u - F K_i d),   A_i = A_{i+1} F (I - K_i H)
//! ```
//!
//! and the step's log-likelihood is `log N(z_t; y^_t, S_{N-1})`. The recursion runs in
//! `f64` whatever the precision of the data. Once the predicted covariance has converged
//! (a change below `1e-14` of its scale), the rest of the window's gains are the
//! steady-state gain and are not recomputed.

use crate::error::{Error, Result};
use crate::model::Model;
use nalgebra::{DMatrix, DVector};

/// The taps of one window length and missing pattern.
#[derive(Clone, Debug)]
pub struct Taps {
    /// Window length `N`.
    pub n: usize,
    /// Measurement size.
    pub ny: usize,
    /// `G_i`, `[N-1][ny][ny]` row-major: the weight of `z_{t-N+1+i}` in `y^_t`.
    pub g: Vec<f64>,
    /// `c`, `[ny]`.
    pub c: Vec<f64>,
    /// `L` with `S_{N-1} = L L^T`, `[ny][ny]` row-major lower.
    pub l: Vec<f64>,
    /// `-(ny ln 2 pi)/2 - sum ln L_ii`: the log-density's constant.
    pub norm: f64,
    /// `present[i]`: `z_{t-N+1+i}` is used (false where the pattern has it missing).
    pub present: Vec<bool>,
}

/// The window's gains `K_i` (`nx x ny`, zero where missing), its predicted covariances
/// `P_i` and its last `S`.
pub(crate) struct Gains {
    pub k: Vec<DMatrix<f64>>,
    pub p: Vec<DMatrix<f64>>,
    pub s_last: DMatrix<f64>,
}

/// Runs the covariance recursion of a window of `n` steps with the measurements at the
/// relative positions `missing` (sorted, each `< n - 1`) absent. With `base` (the
/// recursion of the same window without missing values) the steps before the first
/// missing value are copied from it.
pub(crate) fn gains(
    model: &Model,
    n: usize,
    vague: f64,
    missing: &[usize],
    base: Option<&Gains>,
) -> Result<Gains> {
    let nx = model.nx();
    let (f, q, h, r) = (&model.f, &model.q, &model.h, &model.r);
    let first = match (base, missing.first()) {
        (Some(b), Some(&j)) if b.p.len() == n => j,
        _ => 0,
    };
    let mut ks = Vec::with_capacity(n.saturating_sub(1));
    let mut ps = Vec::with_capacity(n);
    let mut p = DMatrix::<f64>::identity(nx, nx) * vague;
    if first > 0 {
        let b = base.expect("first > 0 needs a base");
        ks.extend_from_slice(&b.k[..first]);
        ps.extend_from_slice(&b.p[..first]);
        p = b.p[first].clone();
    }
    let mut mi = 0;
    let mut converged: Option<DMatrix<f64>> = None;
    for i in first..n {
        if i > first && converged.is_none() {
            let next = f * &p * f.transpose() + q;
            let next = (&next + next.transpose()) * 0.5;
            let scale = next.amax();
            // The steady state: later gains equal this step's (no missing value follows).
            let settled = i > 1
                && ps
                    .last()
                    .is_some_and(|prev: &DMatrix<f64>| (&next - prev).amax() <= 1e-14 * scale)
                && mi >= missing.len();
            p = next;
            if settled {
                let s = h * &p * h.transpose() + r;
                let k = solve_gain(&p, h, &s)?;
                converged = Some(k);
            }
        }
        ps.push(p.clone());
        let s = h * &p * h.transpose() + r;
        if i == n - 1 {
            return Ok(Gains {
                k: ks,
                p: ps,
                s_last: s,
            });
        }
        if let Some(k) = &converged {
            ks.push(k.clone());
            continue;
        }
        if mi < missing.len() && missing[mi] == i {
            mi += 1;
            ks.push(DMatrix::zeros(nx, model.ny()));
            continue;
        }
        let k = solve_gain(&p, h, &s)?;
        p = &p - &k * &s * k.transpose();
        p = (&p + p.transpose()) * 0.5;
        ks.push(k);
    }
    unreachable!("the loop returns at i = n - 1")
}

/// `K = P H^T S^{-1}` by a Cholesky solve.
fn solve_gain(p: &DMatrix<f64>, h: &DMatrix<f64>, s: &DMatrix<f64>) -> Result<DMatrix<f64>> {
    let ch = s.clone().cholesky().ok_or_else(|| {
        Error::input("the windowed filter's innovation covariance is not positive definite")
    })?;
    // K^T = S^{-1} H P
    Ok(ch.solve(&(h * p)).transpose())
}

impl Taps {
    /// The taps of a window of `n >= 1` steps with the relative positions `missing`
    /// (sorted, each below `n - 1`) absent.
    pub fn new(model: &Model, n: usize, vague: f64, missing: &[usize]) -> Result<Taps> {
        Taps::from_gains(model, n, &gains(model, n, vague, missing, None)?, missing)
    }

    /// The taps of the gains `gs` of a window of `n` steps with `missing` absent.
    pub(crate) fn from_gains(
        model: &Model,
        n: usize,
        gs: &Gains,
        missing: &[usize],
    ) -> Result<Taps> {
        let ny = model.ny();
        let (f, h) = (&model.f, &model.h);
        let mut a = h.clone();
        let mut c: DVector<f64> = model.d.clone();
        let mut g = vec![0.0; (n - 1) * ny * ny];
        let mut present = vec![true; n - 1];
        for &i in missing {
            present[i] = false;
        }
        for i in (0..n - 1).rev() {
            let k = &gs.k[i];
            let af = &a * f;
            let gi = &af * k;
            c += &a * &model.u - &gi * &model.d;
            for r in 0..ny {
                for col in 0..ny {
                    g[(i * ny + r) * ny + col] = gi[(r, col)];
                }
            }
            a = &af - &gi * h;
        }
        let ch = gs.s_last.clone().cholesky().ok_or_else(|| {
            Error::input("the windowed filter's innovation covariance is not positive definite")
        })?;
        let lm = ch.l();
        let mut l = vec![0.0; ny * ny];
        let mut logdet = 0.0;
        for r in 0..ny {
            for col in 0..=r {
                l[r * ny + col] = lm[(r, col)];
            }
            logdet += lm[(r, r)].ln();
        }
        Ok(Taps {
            n,
            ny,
            g,
            c: c.iter().copied().collect(),
            l,
            norm: -0.5 * ny as f64 * crate::linalg::LN_2PI - logdet,
            present,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ar, random_walk};

    /// The taps reproduce the mean recursion they unroll, offsets included.
    #[test]
    fn taps_equal_the_mean_recursion() {
        let m = ar(&[0.6, -0.2, 0.1], 1.0, 0.5, 1.0)
            .unwrap()
            .with_offsets(
                DVector::from_vec(vec![0.3, 0.0, 0.0]),
                DVector::from_vec(vec![-0.7]),
            )
            .unwrap();
        for missing in [vec![], vec![1usize, 4]] {
            let n = 7;
            let t = Taps::new(&m, n, 1e4, &missing).unwrap();
            let gs = gains(&m, n, 1e4, &missing, None).unwrap();
            let base = gains(&m, n, 1e4, &[], None).unwrap();
            let shared = gains(&m, n, 1e4, &missing, Some(&base)).unwrap();
            for (a, b) in gs.k.iter().zip(&shared.k) {
                assert!((a - b).amax() <= 1e-12 * a.amax().max(1.0));
            }
            let z: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin() * 3.0).collect();
            let mut x = DVector::<f64>::zeros(3);
            for i in 0..n - 1 {
                let y = z[i] - (&m.h * &x)[0] - m.d[0];
                let xu = &x + &gs.k[i] * y;
                x = &m.f * xu + &m.u;
            }
            let direct = (&m.h * &x)[0] + m.d[0];
            let mut unrolled = t.c[0];
            for i in 0..n - 1 {
                if t.present[i] {
                    unrolled += t.g[i] * z[i];
                }
            }
            assert!((direct - unrolled).abs() < 1e-12, "{direct} vs {unrolled}");
        }
    }

    #[test]
    fn one_step_window_is_the_vague_prior() {
        let m = random_walk(2, 1.0, 0.5, 1.0).unwrap();
        let t = Taps::new(&m, 1, 100.0, &[]).unwrap();
        assert!(t.g.is_empty());
        assert!((t.l[0] - 100.5f64.sqrt()).abs() < 1e-12);
        assert!((t.l[3] - 100.5f64.sqrt()).abs() < 1e-12);
    }
}
