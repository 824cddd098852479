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
//!
//! The filtering is a per-step API: every live track has a slot; one `predict` moves
//! them all, one `measure` gives every predicted measurement and `S` for the gate, one
//! `update` applies the GNN assignments (and one `update_mixture` the JPDA weights);
//! births take free slots and deaths free them. A linear model's tracks live in the
//! Kalman family's [`BatchState`]; a nonlinear model's or an IMM's
//! ([`Tracker::nonlinear`]) in the nonlinear family's
//! [`TrackBank`](crate::nonlinear::TrackBank), whose documentation gives their
//! linearisation, their JPDA update and how they start from one detection. Measurement
//! components that are angles (a radar's bearing) are gated and updated with their
//! innovations wrapped to (-pi, pi].

use super::associate::{clusters, gnn, gnn_costs, jpda, live_pairs, EXACT_EVENTS};
use super::bank::{Bank, FIRST_CAPACITY};
use super::chi2::chi2_quantile;
use super::gate::{gate_all_bounded, Innovations, MAX_PAIRS};
use crate::error::{Error, Result};
use crate::kalman::BatchState;
use crate::model::Model;
use crate::nonlinear::{NonlinearOptions, NonlinearProblem};
use std::time::Instant;

/// How detections are associated with tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assoc {
    /// Global nearest neighbour: the best joint assignment.
    Gnn,
    /// Joint probabilistic data association.
    Jpda,
}

/// How JPDA computes its marginal association probabilities in a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JpdaMarginals {
    /// Exact by enumeration while a cluster has at most
    /// [`EXACT_EVENTS`](super::associate::EXACT_EVENTS) joint events, loopy belief
    /// propagation past that.
    Auto,
    /// Loopy belief propagation in every cluster (as Stone Soup's `JPDAwithLBP`).
    Lbp,
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
    /// How JPDA's marginals are computed (JPDA only).
    pub marginals: JpdaMarginals,
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
    with_marginals(marginals: JpdaMarginals, "Sets [`TrackerConfig::marginals`]."),
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
            marginals: JpdaMarginals::Auto,
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
    /// Predicted measurements, their factors, the grid and the gate.
    pub gate: f64,
    /// Clusters of tracks that share gated detections.
    pub cluster: f64,
    /// GNN assignment or JPDA weights per cluster.
    pub associate: f64,
    /// Updates.
    pub update: f64,
    /// Confirmation, deletion and initiation.
    pub life: f64,
    /// Scans processed.
    pub scans: usize,
}

/// The tracker's state between scans.
pub struct Tracker {
    cfg: TrackerConfig,
    gamma: f64,
    nx: usize,
    ny: usize,
    bank: Bank,
    /// Track `i`'s slot in `bank`; tracks in birth order.
    slots: Vec<usize>,
    life: Vec<Life>,
    next_id: u64,
    /// One measurement row per slot for the GNN update, NaN where none.
    zbuf: Vec<f64>,
    /// Time spent in each phase so far.
    pub timing: Timing,
}

/// The update a scan's association asks for.
#[derive(Default)]
struct Decisions {
    /// GNN: (track, detection).
    pick: Vec<(usize, usize)>,
    /// JPDA: (track, detection, beta), grouped by track.
    mix: Vec<(usize, usize, f64)>,
}

/// `m`'s entries row by row.
pub(super) fn row_major(m: &nalgebra::DMatrix<f64>) -> Vec<f64> {
    (0..m.nrows())
        .flat_map(|i| (0..m.ncols()).map(move |j| m[(i, j)]))
        .collect()
}

/// Initiation's constants (module documentation): `G` (`nx x ny`, row-major), `N x0`
/// and the new track's covariance `G R G^T + N P0 N^T` (`nx x nx`, row-major,
/// symmetric).
pub(crate) fn initiation(model: &Model) -> Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let nx = model.nx();
    let g = model
        .h
        .clone()
        .pseudo_inverse(1e-12)
        .map_err(|e| Error::model("H", format!("no pseudo-inverse: {e}")))?;
    let n = nalgebra::DMatrix::identity(nx, nx) - &g * &model.h;
    let p = &g * &model.r * g.transpose() + &n * &model.prior.p0 * n.transpose();
    let p = (&p + p.transpose()) * 0.5;
    let n_x0: Vec<f64> = (&n * &model.prior.x0).iter().copied().collect();
    Ok((row_major(&g), n_x0, row_major(&p)))
}

impl Tracker {
    /// A tracker without tracks for targets of `model` (its prior initiates new tracks); `cfg` and the model are checked.
    pub fn new(model: &Model, cfg: TrackerConfig) -> Result<Tracker> {
        cfg.validate()?;
        model.validate()?;
        Ok(Self::with_bank(
            Bank::linear(model)?,
            model.nx(),
            model.ny(),
            cfg,
        ))
    }

    /// A tracker without tracks for targets of a nonlinear model or an IMM, each track
    /// filtered by the filter of `opts` (EKF, IEKF, UKF or CKF); new tracks start from a
    /// detection as the module documentation of
    /// [`TrackBank`](crate::nonlinear::TrackBank) says, the prior supplying what the
    /// sensor does not measure.
    pub fn nonlinear(
        problem: &NonlinearProblem,
        opts: &NonlinearOptions,
        cfg: TrackerConfig,
    ) -> Result<Tracker> {
        cfg.validate()?;
        Ok(Self::with_bank(
            Bank::nonlinear(problem, opts)?,
            problem.nx(),
            problem.ny(),
            cfg,
        ))
    }

    fn with_bank(bank: Bank, nx: usize, ny: usize, cfg: TrackerConfig) -> Tracker {
        Tracker {
            gamma: chi2_quantile(ny, cfg.gate),
            cfg,
            nx,
            ny,
            bank,
            slots: Vec::new(),
            life: Vec::new(),
            next_id: 0,
            zbuf: vec![f64::NAN; FIRST_CAPACITY * ny],
            timing: Timing::default(),
        }
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
        // Every track's slot is live.
        self.bank.mean(self.slots[i])
    }

    /// The state covariance of live track `i`, `nx x nx` row-major.
    pub fn cov(&self, i: usize) -> &[f64] {
        self.bank.cov(self.slots[i])
    }

    /// The mode probabilities of live track `i` (an IMM's tracks only).
    pub fn mode_probs(&self, i: usize) -> Option<&[f64]> {
        self.bank.mode_probs(self.slots[i])
    }

    /// Modes of an IMM tracker (1 otherwise).
    pub fn modes(&self) -> usize {
        self.bank.modes()
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.nx
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        self.ny
    }

    /// The per-step Kalman filter the tracks of a linear model live in (`None` for a
    /// nonlinear model or an IMM).
    pub fn state(&self) -> Option<&BatchState<f64>> {
        self.bank.state()
    }

    /// The track in `slot` of the batch state, for errors.
    fn track_of_slot(&self, e: Error) -> Error {
        match e {
            Error::NotPositiveDefinite { track, step, what } => Error::NotPositiveDefinite {
                track: self
                    .slots
                    .iter()
                    .position(|&s| s == track)
                    .map_or(track, |i| self.life[i].id as usize),
                step,
                what,
            },
            e => e,
        }
    }

    /// Processes one scan of detections `z` (`count x ny`, row-major): predicts every
    /// track to this scan, associates, updates, and runs the life cycle.
    pub fn step(&mut self, z: &[f64]) -> Result<()> {
        crate::cancel::check()?;
        let ny = self.ny;
        if !z.len().is_multiple_of(ny) {
            return Err(Error::input(format!(
                "a scan of {} values is not a whole number of {ny}-component detections",
                z.len()
            )));
        }
        let ndet = z.len() / ny;
        let n = self.life.len();
        let scan = self.timing.scans;
        let t0 = Instant::now();
        if n > 0 {
            self.bank.predict(scan).map_err(|e| self.track_of_slot(e))?;
        }
        let t1 = Instant::now();
        // The gate sees angle components wrapped to (-pi, pi], as the predictions are.
        let angles = self.bank.angles().to_vec();
        let wrapped: Vec<f64>;
        let zg: &[f64] = if angles.is_empty() {
            z
        } else {
            wrapped = z
                .chunks(ny)
                .flat_map(|row| {
                    let mut row = row.to_vec();
                    crate::nonlinear::wrap_angles(&mut row, &angles);
                    row
                })
                .collect();
            &wrapped
        };
        // Stage 1: confirmed tracks, with the chosen association, over every detection.
        // Stage 2: tentative tracks, by GNN, over the detections stage 1 left.
        let (mut confirmed, mut tentative) = (Vec::new(), Vec::new());
        let (mut inn_c, mut inn_t) = (
            Innovations::with_angles(ny, &angles),
            Innovations::with_angles(ny, &angles),
        );
        if n > 0 {
            self.bank.measure(scan).map_err(|e| self.track_of_slot(e))?;
            for (i, &slot) in self.slots.iter().enumerate() {
                let (list, inns) = if self.life[i].status == Status::Confirmed {
                    (&mut confirmed, &mut inn_c)
                } else {
                    (&mut tentative, &mut inn_t)
                };
                let (zh, s) = self.bank.predicted(slot);
                let ok = inns.push(zh, s);
                if !ok {
                    return Err(Error::NotPositiveDefinite {
                        track: self.life[i].id as usize,
                        step: self.timing.scans,
                        what: "innovation covariance S",
                    });
                }
                list.push(i);
            }
        }
        let mut detected = vec![false; n];
        let mut claimed = vec![false; ndet];
        let all: Vec<usize> = (0..ndet).collect();
        let mut spent = [0.0; 3];
        let mut first = self.associate(
            &confirmed,
            &inn_c,
            zg,
            &all,
            self.cfg.assoc,
            &mut detected,
            &mut claimed,
            &mut spent,
        )?;
        let rest: Vec<usize> = (0..ndet).filter(|&j| !claimed[j]).collect();
        let second = self.associate(
            &tentative,
            &inn_t,
            zg,
            &rest,
            Assoc::Gnn,
            &mut detected,
            &mut claimed,
            &mut spent,
        )?;
        let t2 = Instant::now();
        first.pick.extend(second.pick);
        self.apply(z, &first)?;
        let t3 = Instant::now();
        self.life_cycle(&detected);
        self.initiate(z, &claimed)?;
        let t4 = Instant::now();
        let tm = &mut self.timing;
        tm.predict += (t1 - t0).as_secs_f64();
        tm.gate += (t2 - t1).as_secs_f64() - spent[1] - spent[2];
        tm.cluster += spent[1];
        tm.associate += spent[2];
        tm.update += (t3 - t2).as_secs_f64();
        tm.life += (t4 - t3).as_secs_f64();
        tm.scans += 1;
        Ok(())
    }

    /// Associates the tracks `idx` (with innovations `inns`) with the detections `dets`
    /// of `z`: returns the updates, and marks the tracks `detected` and the detections
    /// they take `claimed` (GNN: the assigned ones; JPDA: those more likely a track's
    /// than its "no detection"). `spent` adds the seconds of gating, clustering and
    /// association.
    #[allow(clippy::too_many_arguments)]
    fn associate(
        &self,
        idx: &[usize],
        inns: &Innovations,
        z: &[f64],
        dets: &[usize],
        assoc: Assoc,
        detected: &mut [bool],
        claimed: &mut [bool],
        spent: &mut [f64; 3],
    ) -> Result<Decisions> {
        let mut out = Decisions::default();
        if idx.is_empty() || dets.is_empty() {
            return Ok(out);
        }
        let ny = self.ny;
        let t0 = Instant::now();
        let zs: Vec<f64>;
        let zs: &[f64] = if dets.len() * ny == z.len() {
            z
        } else {
            zs = dets
                .iter()
                .flat_map(|&j| z[j * ny..(j + 1) * ny].iter().copied())
                .collect();
            &zs
        };
        // A pair costs 16 bytes here and about as much again in the association.
        let max_pairs = crate::limits::available_memory()
            .map_or(MAX_PAIRS, |m| (m / 32).min(MAX_PAIRS as u128) as usize);
        let gated = gate_all_bounded(inns, zs, ny, self.gamma, max_pairs)
            .map_err(|e| Error::input(format!("scan {}: {e}", self.timing.scans)))?;
        let t1 = Instant::now();
        let (pd, clutter) = (self.cfg.pd, self.cfg.clutter);
        // GNN clusters only the pairs an optimal assignment can hold; JPDA weighs them all.
        let gated = match assoc {
            Assoc::Gnn => {
                let (gain, miss) = gnn_costs(pd, self.cfg.gate, clutter);
                live_pairs(&gated, gain, miss)
            }
            Assoc::Jpda => gated,
        };
        let cl = clusters(&gated, dets.len());
        let t2 = Instant::now();
        match assoc {
            Assoc::Gnn => {
                let pick = gnn(&cl, &gated, idx.len(), pd, self.cfg.gate, clutter);
                for (k, p) in pick.iter().enumerate() {
                    if let Some(l) = *p {
                        out.pick.push((idx[k], dets[l as usize]));
                        detected[idx[k]] = true;
                        claimed[dets[l as usize]] = true;
                    }
                }
            }
            Assoc::Jpda => {
                let exact_events = match self.cfg.marginals {
                    JpdaMarginals::Auto => EXACT_EVENTS,
                    JpdaMarginals::Lbp => 0.0,
                };
                let w = jpda(
                    &cl,
                    &gated,
                    idx.len(),
                    pd,
                    self.cfg.gate,
                    clutter,
                    exact_events,
                );
                for (k, wk) in w.iter().enumerate() {
                    // As Stone Soup's mixture tracker: a detection more likely the
                    // track's than "no detection" counts as detecting the track and is
                    // not free to start a new one.
                    for &(l, b) in &wk.det {
                        if b > wk.beta0 {
                            claimed[dets[l as usize]] = true;
                            detected[idx[k]] = true;
                        }
                        out.mix.push((idx[k], dets[l as usize], b));
                    }
                }
            }
        }
        let t3 = Instant::now();
        spent[0] += (t1 - t0).as_secs_f64();
        spent[1] += (t2 - t1).as_secs_f64();
        spent[2] += (t3 - t2).as_secs_f64();
        Ok(out)
    }

    /// The scan's updates through the batch state: one `update` with the GNN picks, one
    /// `update_mixture` with the JPDA weights.
    fn apply(&mut self, z: &[f64], dec: &Decisions) -> Result<()> {
        let (ny, cap) = (self.ny, self.bank.capacity());
        let scan = self.timing.scans;
        if !dec.pick.is_empty() {
            self.zbuf.resize(cap * ny, f64::NAN);
            for &(i, j) in &dec.pick {
                let s = self.slots[i];
                self.zbuf[s * ny..(s + 1) * ny].copy_from_slice(&z[j * ny..(j + 1) * ny]);
            }
            let r = self.bank.update(&self.zbuf, scan);
            for &(i, _) in &dec.pick {
                let s = self.slots[i];
                self.zbuf[s * ny..(s + 1) * ny].fill(f64::NAN);
            }
            r.map_err(|e| self.track_of_slot(e))?;
        }
        if !dec.mix.is_empty() {
            // Compressed rows by slot.
            let mut start = vec![0usize; cap + 1];
            for &(i, _, _) in &dec.mix {
                start[self.slots[i] + 1] += 1;
            }
            for s in 0..cap {
                start[s + 1] += start[s];
            }
            let rows = start[cap];
            let (mut zz, mut beta) = (vec![0.0; rows * ny], vec![0.0; rows]);
            let mut fill = start.clone();
            for &(i, j, b) in &dec.mix {
                let s = self.slots[i];
                let at = fill[s];
                fill[s] += 1;
                zz[at * ny..(at + 1) * ny].copy_from_slice(&z[j * ny..(j + 1) * ny]);
                beta[at] = b;
            }
            let weigh = (self.cfg.pd, self.cfg.gate, self.cfg.clutter);
            self.bank
                .update_mixture(&start, &zz, &beta, weigh, scan)
                .map_err(|e| self.track_of_slot(e))?;
        }
        Ok(())
    }

    /// Starts a tentative track from every detection no track claimed.
    fn initiate(&mut self, z: &[f64], claimed: &[bool]) -> Result<()> {
        let (nx, ny) = (self.nx, self.ny);
        let births = claimed.iter().filter(|&&c| !c).count();
        self.bank.reserve(births)?;
        let mut x = vec![0.0; nx];
        for (j, zj) in z.chunks(ny).enumerate() {
            if claimed[j] {
                continue;
            }
            let slot = self.bank.add(zj, &mut x).map_err(|e| match e {
                Error::Input { msg: m } => Error::input(format!(
                    "scan {}: no track could start from detection {j}: {m}",
                    self.timing.scans
                )),
                e => e,
            })?;
            self.slots.push(slot);
            self.life.push(Life {
                id: self.next_id,
                status: Status::Tentative,
                age: 1,
                hits: 1,
                misses: 0,
            });
            self.next_id += 1;
        }
        Ok(())
    }

    /// Confirmation, deletion; `detected[i]`: track `i` took a detection this scan.
    fn life_cycle(&mut self, detected: &[bool]) {
        let (m, n) = self.cfg.confirm;
        let k_del = self.cfg.delete;
        let k_tent = self.cfg.delete_tentative;
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
            if keep[i]
                && bound.is_finite()
                && self
                    .bank
                    .measured_variances(self.slots[i])
                    .iter()
                    .any(|&v| v > bound)
            {
                keep[i] = false;
            }
        }
        if keep.iter().all(|&k| k) {
            return;
        }
        for (i, &k) in keep.iter().enumerate() {
            if !k {
                self.bank.remove(self.slots[i]);
            }
        }
        let mut it = keep.iter();
        self.slots.retain(|_| *it.next().unwrap_or(&true));
        let mut it = keep.iter();
        self.life.retain(|_| *it.next().unwrap_or(&true));
    }
}
