//! The tracker's Kalman filtering, kept behind this one adapter: a bank of targets with
//! their own means and covariances, a predict of all of them, the predicted measurement
//! of each, and the GNN (one detection) and JPDA (a weighted mixture) updates. The
//! arithmetic is `kalman::step`'s (the reference recursion); the tracker touches Kalman
//! filtering nowhere else.

use crate::error::{Error, Result};
use crate::kalman::step::{predict, update, StepMats};
use crate::linalg::{cholesky_in_place, solve_lower_in_place, LN_2PI};
use crate::model::Model;
use nalgebra::DMatrix;
use rayon::prelude::*;

fn row_major(m: &DMatrix<f64>) -> Vec<f64> {
    let mut v = Vec::with_capacity(m.len());
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            v.push(m[(i, j)]);
        }
    }
    v
}

/// What the gate and the updates need from one target's prediction:
/// `zhat = H x + d`, the Cholesky factor `L` of `S = H P H^T + R`, `W^T = L^{-1} H P`
/// (so that the gain is `K = W L^{-1}`) and `ln |S| / 2 = sum ln L_ii`.
#[derive(Clone, Debug, Default)]
pub struct Innovation {
    /// Predicted measurement `H x + d`, length `ny`.
    pub zhat: Vec<f64>,
    /// Lower Cholesky factor of `S`, `ny x ny` row-major.
    pub l: Vec<f64>,
    /// `W^T = L^{-1} H P`, `ny x nx` row-major.
    pub wt: Vec<f64>,
    /// `ln |S| / 2`.
    pub half_logdet: f64,
}

impl Innovation {
    /// Whitened innovation `e = L^{-1} (z - zhat)` into `e`; returns `|e|^2`, the squared
    /// Mahalanobis distance.
    pub fn whiten(&self, z: &[f64], e: &mut [f64]) -> f64 {
        let ny = self.zhat.len();
        for a in 0..ny {
            e[a] = z[a] - self.zhat[a];
        }
        solve_lower_in_place(&self.l, ny, e, 1);
        e.iter().map(|v| v * v).sum()
    }

    /// `ln N(z; zhat, S)` from the squared Mahalanobis distance.
    pub fn log_likelihood(&self, maha: f64) -> f64 {
        -0.5 * (self.zhat.len() as f64 * LN_2PI + maha) - self.half_logdet
    }
}

/// Targets' means and covariances, structure of arrays (`x`: `len x nx`, `p`:
/// `len x nx x nx`, row-major).
#[derive(Clone, Debug)]
pub struct Bank {
    pub nx: usize,
    pub ny: usize,
    m: StepMats<f64>,
    pub x: Vec<f64>,
    pub p: Vec<f64>,
}

impl Bank {
    pub fn new(model: &Model) -> Bank {
        Bank {
            nx: model.nx(),
            ny: model.ny(),
            m: StepMats {
                f: row_major(&model.f),
                u: model.u.iter().copied().collect(),
                q: row_major(&model.q),
                h: row_major(&model.h),
                d: model.d.iter().copied().collect(),
                r: row_major(&model.r),
            },
            x: Vec::new(),
            p: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.x.len() / self.nx
    }

    pub fn push(&mut self, x: &[f64], p: &[f64]) {
        self.x.extend_from_slice(x);
        self.p.extend_from_slice(p);
    }

    pub fn mean(&self, i: usize) -> &[f64] {
        &self.x[i * self.nx..(i + 1) * self.nx]
    }

    pub fn cov(&self, i: usize) -> &[f64] {
        let n2 = self.nx * self.nx;
        &self.p[i * n2..(i + 1) * n2]
    }

    /// Predicts every target one step.
    pub fn predict_all(&mut self) {
        let (nx, m) = (self.nx, &self.m);
        self.x
            .par_chunks_mut(nx)
            .zip(self.p.par_chunks_mut(nx * nx))
            .with_min_len(256)
            .for_each_init(
                || vec![0.0; nx * nx],
                |tmp, (x, p)| predict(nx, m, x, p, tmp),
            );
    }

    /// The predicted measurement of target `i`; `false` when `S` is not positive definite.
    pub fn innovation(&self, i: usize, out: &mut Innovation) -> bool {
        let (nx, ny, h) = (self.nx, self.ny, &self.m.h);
        let (x, p) = (self.mean(i), self.cov(i));
        out.zhat.resize(ny, 0.0);
        out.l.resize(ny * ny, 0.0);
        out.wt.resize(ny * nx, 0.0);
        for a in 0..ny {
            let mut hx = self.m.d[a];
            for l in 0..nx {
                hx += h[a * nx + l] * x[l];
            }
            out.zhat[a] = hx;
            for j in 0..nx {
                let mut acc = 0.0;
                for l in 0..nx {
                    acc += h[a * nx + l] * p[l * nx + j];
                }
                out.wt[a * nx + j] = acc;
            }
        }
        for a in 0..ny {
            for b in 0..=a {
                let mut acc = self.m.r[a * ny + b];
                for l in 0..nx {
                    acc += h[a * nx + l] * out.wt[b * nx + l];
                }
                out.l[a * ny + b] = acc;
                out.l[b * ny + a] = acc;
            }
        }
        if !cholesky_in_place(&mut out.l, ny) {
            return false;
        }
        solve_lower_in_place(&out.l, ny, &mut out.wt, nx);
        out.half_logdet = (0..ny).map(|a| out.l[a * ny + a].ln()).sum();
        true
    }

    /// The Kalman update of target `i` with detection `z` (the reference update).
    pub fn update(&mut self, i: usize, z: &[f64]) -> Result<()> {
        let (nx, ny) = (self.nx, self.ny);
        let (mut y, mut s, mut wt) = (vec![0.0; ny], vec![0.0; ny * ny], vec![0.0; ny * nx]);
        let x = &mut self.x[i * nx..(i + 1) * nx];
        let p = &mut self.p[i * nx * nx..(i + 1) * nx * nx];
        update(nx, ny, &self.m, z, x, p, &mut y, &mut s, &mut wt)
            .map(|_| ())
            .ok_or_else(|| {
                Error::input(format!(
                    "target {i}: innovation covariance not positive definite"
                ))
            })
    }

    /// The PDA update of target `i` (Bar-Shalom, Daum & Huang, IEEE CSM 2009, eqs. 38-42):
    /// with whitened innovations `e_j = L^{-1}(z_j - zhat)` weighted by `beta_j` and
    /// `beta_0 = 1 - sum beta_j` for "no detection",
    /// `x += W ebar`, `ebar = sum beta_j e_j`, and
    /// `P -= (1 - beta_0) W W^T - W (sum beta_j e_j e_j^T - ebar ebar^T) W^T`.
    pub fn update_mixture(&mut self, i: usize, inn: &Innovation, e: &[f64], beta: &[f64]) {
        let (nx, ny) = (self.nx, self.ny);
        let mut ebar = vec![0.0; ny];
        let mut spread = vec![0.0; ny * ny];
        let mut detected = 0.0;
        for (k, &b) in beta.iter().enumerate() {
            let ek = &e[k * ny..(k + 1) * ny];
            detected += b;
            for a in 0..ny {
                ebar[a] += b * ek[a];
                for c in 0..ny {
                    spread[a * ny + c] += b * ek[a] * ek[c];
                }
            }
        }
        for a in 0..ny {
            for c in 0..ny {
                spread[a * ny + c] -= ebar[a] * ebar[c];
            }
        }
        // M = (1 - beta_0) I - spread; P -= W M W^T.
        for a in 0..ny {
            for c in 0..ny {
                spread[a * ny + c] = if a == c { detected } else { 0.0 } - spread[a * ny + c];
            }
        }
        let wt = &inn.wt;
        let x = &mut self.x[i * nx..(i + 1) * nx];
        for r in 0..nx {
            let mut acc = 0.0;
            for a in 0..ny {
                acc += wt[a * nx + r] * ebar[a];
            }
            x[r] += acc;
        }
        let p = &mut self.p[i * nx * nx..(i + 1) * nx * nx];
        for r in 0..nx {
            for c in 0..=r {
                let mut acc = 0.0;
                for a in 0..ny {
                    for b in 0..ny {
                        acc += wt[a * nx + r] * spread[a * ny + b] * wt[b * nx + c];
                    }
                }
                let v = p[r * nx + c] - acc;
                p[r * nx + c] = v;
                p[c * nx + r] = v;
            }
        }
    }

    /// Keeps the targets whose `keep` flag is set, in order.
    pub fn retain(&mut self, keep: &[bool]) {
        let (nx, n2) = (self.nx, self.nx * self.nx);
        let mut w = 0;
        for (i, &k) in keep.iter().enumerate() {
            if k {
                if w != i {
                    self.x.copy_within(i * nx..(i + 1) * nx, w * nx);
                    self.p.copy_within(i * n2..(i + 1) * n2, w * n2);
                }
                w += 1;
            }
        }
        self.x.truncate(w * nx);
        self.p.truncate(w * n2);
    }
}
