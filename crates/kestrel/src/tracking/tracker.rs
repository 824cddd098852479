//! The multi-target tracker: predict, gate, cluster, associate (GNN or JPDA), update,
//! then the life cycle - M-of-N confirmation of tentative tracks, deletion after K
//! consecutive misses or when the measured part of the covariance grows past a bound,
//! and initiation of tentative tracks from the detections no track claimed.
//!
//! Initiation uses a vague prior on what the sensor does not measure: with `G` the
//! pseudo-inverse of `H` and `N = I - G H` the projector onto the unmeasured subspace,
//! a detection `z` starts a track at `x = G (z - d) + N x0`,
//! `P = G R G^T + N P0 N^T` (for a constant-velocity model: the position from the
//! detection, the velocity from the model's prior).

use super::associate::{clusters, gnn, jpda};
use super::chi2::chi2_quantile;
use super::filter::{Bank, Innovation};
use super::gate::gate_all;
use crate::error::{Error, Result};
use crate::model::Model;
use rayon::prelude::*;
use std::time::Instant;

/// How detections are associated with tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assoc {
    /// Global nearest neighbour: the best joint assignment.
    Gnn,
    /// Joint probabilistic data association.
    Jpda,
}

/// A track's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not yet confirmed by enough detections.
    Tentative,
    /// Confirmed (`m` of `n` detections).
    Confirmed,
}

impl Status {
    /// `tentative` or `confirmed`, as in the track files.
    pub fn name(self) -> &'static str {
        match self {
            Status::Tentative => "tentative",
            Status::Confirmed => "confirmed",
        }
    }
}

/// Tracker settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TrackerConfig {
    /// How detections are associated with tracks.
    pub assoc: Assoc,
    /// Probability that a target's detection falls inside its gate.
    pub gate: f64,
    /// Detection probability, in (0, 1].
    pub pd: f64,
    /// Clutter density: false detections per unit measurement volume per scan (> 0).
    pub clutter: f64,
    /// Confirm a tentative track with `m` detections within its first `n` scans.
    pub confirm: (u32, u32),
    /// Delete a confirmed track after this many consecutive misses.
    pub delete: u32,
    /// Delete a tentative track after this many consecutive misses (`u32::MAX`: only
    /// when M of N can no longer be reached). With `confirm = (M, 2M - 1)` and 2, this is
    /// Stone Soup's `MultiMeasurementInitiator` with `UpdateTimeStepsDeleter(2)`: M
    /// detections with no two misses in a row.
    pub delete_tentative: u32,
    /// Delete a track when a diagonal element of `H P H^T` exceeds this.
    pub max_variance: f64,
}

setters!(TrackerConfig {
    with_assoc(assoc: Assoc, "Sets [`TrackerConfig::assoc`]."),
    with_gate(gate: f64, "Sets [`TrackerConfig::gate`]."),
    with_pd(pd: f64, "Sets [`TrackerConfig::pd`]."),
    with_clutter(clutter: f64, "Sets [`TrackerConfig::clutter`]."),
    with_confirm(confirm: (u32, u32), "Sets [`TrackerConfig::confirm`] (`(m, n)`)."),
    with_delete(delete: u32, "Sets [`TrackerConfig::delete`]."),
    with_delete_tentative(delete_tentative: u32, "Sets [`TrackerConfig::delete_tentative`]."),
    with_max_variance(max_variance: f64, "Sets [`TrackerConfig::max_variance`]."),
});

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            assoc: Assoc::Gnn,
            gate: 0.999,
            pd: 0.9,
            clutter: 1e-6,
            confirm: (2, 3),
            delete: 3,
            delete_tentative: u32::MAX,
            max_variance: f64::INFINITY,
        }
    }
}

impl TrackerConfig {
    /// Checks every setting; the messages name the command-line flags' quantities.
    pub fn validate(&self) -> Result<()> {
        if !(self.gate > 0.0 && self.gate < 1.0) {
            return Err(Error::input(format!(
                "gate probability must be in (0, 1), got {}",
                self.gate
            )));
        }
        if !(self.pd > 0.0 && self.pd <= 1.0) {
            return Err(Error::input(format!(
                "pd must be in (0, 1], got {}",
                self.pd
            )));
        }
        if !(self.clutter > 0.0 && self.clutter.is_finite()) {
            return Err(Error::input(format!(
                "clutter density must be positive and finite, got {}",
                self.clutter
            )));
        }
        let (m, n) = self.confirm;
        if m == 0 || m > n {
            return Err(Error::input(format!(
                "confirmation M/N = {m}/{n} needs 1 <= M <= N"
            )));
        }
        if self.delete == 0 || self.delete_tentative == 0 {
            return Err(Error::input("deletion after K misses needs K >= 1"));
        }
        if !(self.max_variance > 0.0) {
            return Err(Error::input(format!(
                "the covariance bound must be positive, got {}",
                self.max_variance
            )));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug)]
struct Life {
    id: u64,
    status: Status,
    /// Scans since birth, the birth scan included.
    age: u32,
    /// Detections while tentative.
    hits: u32,
    /// Consecutive misses.
    misses: u32,
}

/// Time spent in each phase of the scans so far, in seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    /// Prediction.
    pub predict: f64,
    /// Gating.
    pub gate: f64,
    /// Association.
    pub associate: f64,
    /// Updates.
    pub update: f64,
    /// Track initiation, confirmation and deletion.
    pub life: f64,
    /// Scans processed.
    pub scans: usize,
}

/// The tracker's state between scans.
pub struct Tracker {
    cfg: TrackerConfig,
    gamma: f64,
    bank: Bank,
    life: Vec<Life>,
    next_id: u64,
    /// Initiation: `x = G (z - d) + N x0`, `P = P_init`.
    g: Vec<f64>,
    n_x0: Vec<f64>,
    d: Vec<f64>,
    p_init: Vec<f64>,
    h: Vec<f64>,
    /// Time spent in each phase so far.
    pub timing: Timing,
}

impl Tracker {
    /// A tracker without tracks for targets of `model` (its prior initiates new tracks); `cfg` and the model are checked.
    pub fn new(model: &Model, cfg: TrackerConfig) -> Result<Tracker> {
        cfg.validate()?;
        model.validate()?;
        let (nx, ny) = (model.nx(), model.ny());
        let g = model
            .h
            .clone()
            .pseudo_inverse(1e-12)
            .map_err(|e| Error::model("H", format!("no pseudo-inverse: {e}")))?;
        let n = nalgebra::DMatrix::identity(nx, nx) - &g * &model.h;
        let p = &g * &model.r * g.transpose() + &n * &model.prior.p0 * n.transpose();
        let p = (&p + p.transpose()) * 0.5;
        let rm = |m: &nalgebra::DMatrix<f64>| -> Vec<f64> {
            (0..m.nrows())
                .flat_map(|i| (0..m.ncols()).map(move |j| m[(i, j)]))
                .collect()
        };
        let n_x0 = &n * &model.prior.x0;
        let _ = ny;
        Ok(Tracker {
            gamma: chi2_quantile(ny, cfg.gate),
            cfg,
            bank: Bank::new(model),
            life: Vec::new(),
            next_id: 0,
            g: rm(&g),
            n_x0: n_x0.iter().copied().collect(),
            d: model.d.iter().copied().collect(),
            p_init: rm(&p),
            h: rm(&model.h),
            timing: Timing::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &TrackerConfig {
        &self.cfg
    }

    /// The Mahalanobis gate threshold (the chi-square quantile).
    pub fn gate_threshold(&self) -> f64 {
        self.gamma
    }

    /// Live tracks (tentative and confirmed).
    pub fn len(&self) -> usize {
        self.life.len()
    }

    /// True without live tracks.
    pub fn is_empty(&self) -> bool {
        self.life.is_empty()
    }

    /// The identity of live track `i` (stable over its life).
    pub fn id(&self, i: usize) -> u64 {
        self.life[i].id
    }

    /// The status of live track `i`.
    pub fn status(&self, i: usize) -> Status {
        self.life[i].status
    }

    /// The state mean of live track `i`, length `nx`.
    pub fn mean(&self, i: usize) -> &[f64] {
        self.bank.mean(i)
    }

    /// The state covariance of live track `i`, `nx x nx` row-major.
    pub fn cov(&self, i: usize) -> &[f64] {
        self.bank.cov(i)
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.bank.nx
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        self.bank.ny
    }

    /// Processes one scan of detections `z` (`count x ny`, row-major): predicts every
    /// track to this scan, associates, updates, and runs the life cycle.
    pub fn step(&mut self, z: &[f64]) -> Result<()> {
        let ny = self.bank.ny;
        if !z.len().is_multiple_of(ny) {
            return Err(Error::input(format!(
                "a scan of {} values is not a whole number of {ny}-component detections",
                z.len()
            )));
        }
        let ndet = z.len() / ny;
        let t0 = Instant::now();
        self.bank.predict_all();
        let t1 = Instant::now();
        let bank = &self.bank;
        let inns: Vec<Option<Innovation>> = (0..bank.len())
            .into_par_iter()
            .with_min_len(256)
            .map(|i| {
                let mut inn = Innovation::default();
                bank.innovation(i, &mut inn).then_some(inn)
            })
            .collect();
        if let Some(i) = inns.iter().position(|v| v.is_none()) {
            return Err(Error::NotPositiveDefinite {
                track: self.life[i].id as usize,
                step: self.timing.scans,
                what: "innovation covariance S",
            });
        }
        let inns: Vec<Innovation> = inns.into_iter().map(|v| v.unwrap_or_default()).collect();
        let n = self.life.len();
        let mut detected = vec![false; n];
        let mut claimed = vec![false; ndet];
        // Stage 1: confirmed tracks, with the chosen association, over every detection.
        // Stage 2: tentative tracks, by GNN, over the detections stage 1 left.
        let (mut confirmed, mut tentative) = (Vec::new(), Vec::new());
        let (mut inn_c, mut inn_t) = (Vec::new(), Vec::new());
        for (i, inn) in inns.into_iter().enumerate() {
            if self.life[i].status == Status::Confirmed {
                confirmed.push(i);
                inn_c.push(inn);
            } else {
                tentative.push(i);
                inn_t.push(inn);
            }
        }
        let all: Vec<usize> = (0..ndet).collect();
        let mut spent = [0.0; 3];
        self.associate(
            &confirmed,
            &inn_c,
            z,
            &all,
            self.cfg.assoc,
            &mut detected,
            &mut claimed,
            &mut spent,
        )?;
        let rest: Vec<usize> = (0..ndet).filter(|&j| !claimed[j]).collect();
        self.associate(
            &tentative,
            &inn_t,
            z,
            &rest,
            Assoc::Gnn,
            &mut detected,
            &mut claimed,
            &mut spent,
        )?;
        let t4 = Instant::now();
        self.life_cycle(&detected);
        // Initiation from the detections no track claimed.
        let nx = self.bank.nx;
        let mut x = vec![0.0; nx];
        for j in (0..ndet).filter(|&j| !claimed[j]) {
            let zj = &z[j * ny..(j + 1) * ny];
            for r in 0..nx {
                let mut acc = self.n_x0[r];
                for a in 0..ny {
                    acc += self.g[r * ny + a] * (zj[a] - self.d[a]);
                }
                x[r] = acc;
            }
            self.bank.push(&x, &self.p_init);
            self.life.push(Life {
                id: self.next_id,
                status: Status::Tentative,
                age: 1,
                hits: 1,
                misses: 0,
            });
            self.next_id += 1;
        }
        let t5 = Instant::now();
        let tm = &mut self.timing;
        tm.predict += (t1 - t0).as_secs_f64();
        // Gating: the innovations, the grid and the gate itself.
        let rest = (t4 - t1).as_secs_f64() - spent[1] - spent[2];
        tm.gate += rest;
        tm.associate += spent[1];
        tm.update += spent[2];
        tm.life += (t5 - t4).as_secs_f64();
        tm.scans += 1;
        Ok(())
    }

    /// Associates the tracks `idx` (with innovations `inns`) with the detections `dets`
    /// of `z`, updates them, and marks them `detected` and the detections they take
    /// `claimed` (GNN: the assigned ones; JPDA: those more likely a track's than its
    /// "no detection"). `spent` adds the
    /// seconds of gating, association and update.
    #[allow(clippy::too_many_arguments)]
    fn associate(
        &mut self,
        idx: &[usize],
        inns: &[Innovation],
        z: &[f64],
        dets: &[usize],
        assoc: Assoc,
        detected: &mut [bool],
        claimed: &mut [bool],
        spent: &mut [f64; 3],
    ) -> Result<()> {
        if idx.is_empty() || dets.is_empty() {
            return Ok(());
        }
        let ny = self.bank.ny;
        let t0 = Instant::now();
        let zs: Vec<f64> = if dets.len() * ny == z.len() {
            z.to_vec()
        } else {
            dets.iter()
                .flat_map(|&j| z[j * ny..(j + 1) * ny].iter().copied())
                .collect()
        };
        let gated = gate_all(inns, &zs, ny, self.gamma);
        let t1 = Instant::now();
        let cl = clusters(&gated, dets.len());
        let (pd, clutter) = (self.cfg.pd, self.cfg.clutter);
        let t2;
        match assoc {
            Assoc::Gnn => {
                let pick = gnn(&cl, &gated, idx.len(), pd, self.cfg.gate, clutter);
                t2 = Instant::now();
                for (k, p) in pick.iter().enumerate() {
                    if let Some(l) = *p {
                        let l = l as usize;
                        self.bank.update(idx[k], &zs[l * ny..(l + 1) * ny])?;
                        detected[idx[k]] = true;
                        claimed[dets[l]] = true;
                    }
                }
            }
            Assoc::Jpda => {
                let w = jpda(&cl, &gated, idx.len(), pd, self.cfg.gate, clutter);
                t2 = Instant::now();
                let mut e = Vec::new();
                for (k, wk) in w.iter().enumerate() {
                    // As Stone Soup's mixture tracker: a detection more likely the
                    // track's than "no detection" counts as detecting the track and is
                    // not free to start a new one.
                    for &(l, b) in &wk.det {
                        if b > wk.beta0 {
                            claimed[dets[l as usize]] = true;
                            detected[idx[k]] = true;
                        }
                    }
                    if wk.det.is_empty() {
                        continue;
                    }
                    e.resize(wk.det.len() * ny, 0.0);
                    let mut betas = Vec::with_capacity(wk.det.len());
                    for (m, &(l, b)) in wk.det.iter().enumerate() {
                        let l = l as usize;
                        inns[k].whiten(&zs[l * ny..(l + 1) * ny], &mut e[m * ny..(m + 1) * ny]);
                        betas.push(b);
                    }
                    self.bank.update_mixture(idx[k], &inns[k], &e, &betas);
                }
            }
        }
        let t3 = Instant::now();
        spent[0] += (t1 - t0).as_secs_f64();
        spent[1] += (t2 - t1).as_secs_f64();
        spent[2] += (t3 - t2).as_secs_f64();
        Ok(())
    }

    /// Confirmation, deletion; `detected[i]`: track `i` took a detection this scan.
    fn life_cycle(&mut self, detected: &[bool]) {
        let (m, n) = self.cfg.confirm;
        let k_del = self.cfg.delete;
        let k_tent = self.cfg.delete_tentative;
        let (nx, ny) = (self.bank.nx, self.bank.ny);
        let bound = self.cfg.max_variance;
        let mut keep = vec![true; self.life.len()];
        for (i, l) in self.life.iter_mut().enumerate() {
            l.age += 1;
            if detected[i] {
                l.misses = 0;
            } else {
                l.misses += 1;
            }
            match l.status {
                Status::Tentative => {
                    if detected[i] {
                        l.hits += 1;
                    }
                    if l.hits >= m {
                        l.status = Status::Confirmed;
                    } else if l.hits + n.saturating_sub(l.age) < m || l.misses >= k_tent {
                        // M detections within N scans can no longer be reached.
                        keep[i] = false;
                    }
                }
                Status::Confirmed => {
                    if l.misses >= k_del {
                        keep[i] = false;
                    }
                }
            }
            if keep[i] && bound.is_finite() {
                let p = self.bank.cov(i);
                for a in 0..ny {
                    let ha = &self.h[a * nx..(a + 1) * nx];
                    let mut v = 0.0;
                    for r in 0..nx {
                        for c in 0..nx {
                            v += ha[r] * p[r * nx + c] * ha[c];
                        }
                    }
                    if v > bound {
                        keep[i] = false;
                    }
                }
            }
        }
        if keep.iter().all(|&k| k) {
            return;
        }
        self.bank.retain(&keep);
        let mut it = keep.iter();
        self.life.retain(|_| *it.next().unwrap_or(&true));
    }
}
