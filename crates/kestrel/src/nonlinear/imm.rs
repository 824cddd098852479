//! The interacting multiple model filter (Blom & Bar-Shalom 1988; Bar-Shalom, Li &
//! Kirubarajan 2001, 11.6.6) over `r` modes, each a nonlinear (or linear) model of the
//! same state with its filter, `Pi[i][j] = P(mode j at k | mode i at k-1)`.
//!
//! Step 0 updates every mode from the prior and `mu = initial`; each later step:
//!
//! ```text
//! cbar_j   = sum_i Pi_ij mu_i                       predicted mode probabilities
//! mu_i|j   = Pi_ij mu_i / cbar_j                    mixing probabilities
//! m0_j     = sum_i mu_i|j m_i,  P0_j = sum_i mu_i|j (P_i + (m_i - m0_j)(m_i - m0_j)^T)
//! (m_j, P_j, L_j) = predict and update mode j from (m0_j, P0_j)
//! mu_j     = cbar_j L_j / c,    c = sum_j cbar_j L_j,   loglik = ln c
//! ```
//!
//! (at step 0, `cbar = initial`). Outputs: the moment-matched mean `sum mu_j m_j` and
//! covariance `sum mu_j (P_j + (m_j - m)(m_j - m)^T)`, and `mu`. A missing step predicts
//! only: `mu = cbar`, loglik 0. Likelihoods are combined in log space (a mode far from
//! the data underflows to probability 0, not NaN).

use super::ekf::{symmetrize, Fail, Work};
use super::{ImmModel, Step};
use nalgebra::{DMatrix, DVector};

/// The IMM filter of one track: `z [T][ny]` into `mean [T][nx]`, `cov [T][nx][nx]`,
/// `ll [T]`, `probs [T][r]`.
#[allow(clippy::too_many_arguments)]
pub(super) fn imm_track(
    step: &Step<'_>,
    imm: &ImmModel,
    z: &[f64],
    mean: &mut [f64],
    cov: &mut [f64],
    ll: &mut [f64],
    probs: &mut [f64],
    w: &mut Work,
) -> Result<(), (usize, Fail)> {
    let r = imm.modes.len();
    let nx = imm.prior.x0.len();
    let ny = imm.modes[0].ny();
    let n2 = nx * nx;
    let t = ll.len();
    let mut ms: Vec<DVector<f64>> = vec![imm.prior.x0.clone(); r];
    let mut ps: Vec<DMatrix<f64>> = vec![imm.prior.p0.clone(); r];
    let mut mu: Vec<f64> = imm.initial.iter().copied().collect();
    let mut lls = vec![0.0; r];
    for k in 0..t {
        let cbar: Vec<f64> = if k == 0 {
            mu.clone()
        } else {
            let cbar: Vec<f64> = (0..r)
                .map(|j| (0..r).map(|i| imm.transition[(i, j)] * mu[i]).sum())
                .collect();
            // Mixing.
            let mut m0 = Vec::with_capacity(r);
            let mut p0 = Vec::with_capacity(r);
            for j in 0..r {
                let wts: Vec<f64> = (0..r)
                    .map(|i| {
                        if cbar[j] > 0.0 {
                            imm.transition[(i, j)] * mu[i] / cbar[j]
                        } else {
                            // An unreachable mode: keep its own moments.
                            f64::from(u8::from(i == j))
                        }
                    })
                    .collect();
                let (m, p) = mix(&ms, &ps, &wts);
                m0.push(m);
                p0.push(p);
            }
            ms = m0;
            ps = p0;
            for j in 0..r {
                step.advance(&imm.modes[j], &mut ms[j], &mut ps[j], w)
                    .map_err(|e| (k, e))?;
            }
            cbar
        };
        let zk = &z[k * ny..(k + 1) * ny];
        if zk.iter().any(|v| v.is_nan()) {
            mu = cbar;
            ll[k] = 0.0;
        } else {
            for j in 0..r {
                lls[j] = step
                    .update(&imm.modes[j], zk, &mut ms[j], &mut ps[j], w)
                    .map_err(|e| (k, e))?;
            }
            let logs: Vec<f64> = (0..r).map(|j| cbar[j].ln() + lls[j]).collect();
            let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = logs.iter().map(|l| (l - top).exp()).sum();
            let lc = top + sum.ln();
            mu = logs.iter().map(|l| (l - lc).exp()).collect();
            ll[k] = lc;
        }
        let (m, p) = mix(&ms, &ps, &mu);
        mean[k * nx..(k + 1) * nx].copy_from_slice(m.as_slice());
        cov[k * n2..(k + 1) * n2].copy_from_slice(p.as_slice());
        probs[k * r..(k + 1) * r].copy_from_slice(&mu);
    }
    Ok(())
}

/// The moment-matched mixture `sum w_i N(m_i, P_i)`.
pub(super) fn mix(
    ms: &[DVector<f64>],
    ps: &[DMatrix<f64>],
    w: &[f64],
) -> (DVector<f64>, DMatrix<f64>) {
    let nx = ms[0].len();
    let mut m = DVector::zeros(nx);
    for (mi, &wi) in ms.iter().zip(w) {
        m += mi * wi;
    }
    let mut p = DMatrix::zeros(nx, nx);
    for ((mi, pi), &wi) in ms.iter().zip(ps).zip(w) {
        if wi == 0.0 {
            continue;
        }
        let d = mi - &m;
        p += (pi + &d * d.transpose()) * wi;
    }
    symmetrize(&mut p);
    (m, p)
}
