//! The family's per-step API for a tracker: [`TrackBank`] holds every live track of one
//! nonlinear model (or IMM) in a slot, as `kalman::BatchState` does for linear models,
//! and runs the scan's phases over all of them (one rayon task per slot):
//!
//! - `predict`: each mode one step (IMM: mixing first); the mode probabilities become
//!   the predicted ones, `cbar = Pi^T mu`.
//! - `measure`: each mode's predicted measurement `zhat`, innovation covariance `S`
//!   (R included) and cross covariance `C = Cov(x, z)`, linearised as the filter does
//!   (EKF and IEKF: the Jacobian at the predicted mean; UKF/CKF: fresh sigma points of
//!   the predicted moments). The gate sees one `(zhat, S)` a track: the mode's, or for
//!   an IMM the moment-matched mixture over the modes with weights `cbar` (angles as
//!   circular means, deviations wrapped).
//! - `update`: one detection (GNN): each mode's Gaussian update with that linearisation
//!   (the IEKF iterates from it), `mu_j ~ cbar_j N(z; zhat_j, S_j)`.
//! - `update_mixture`: JPDA's weights `beta_i` (`beta_0 = 1 - sum beta_i`): each mode's
//!   PDA update (Bar-Shalom, Daum & Huang 2009) with `K = C S^-1`, `y_i = z_i - zhat_j`
//!   (angles wrapped), `ybar = sum beta_i y_i`, `m += K ybar`,
//!   `P -= (1 - beta_0) K S K^T - K (sum beta_i y_i y_i^T - ybar ybar^T) K^T`, and the
//!   IMM-PDA mode likelihood `L_j = (1 - pd pg) lambda + pd sum_i N(z_i; zhat_j, S_j)`
//!   (Bar-Shalom, Li & Kirubarajan 2001, 11.7.5; `lambda` the clutter density), so
//!   `mu_j ~ cbar_j L_j`. The IEKF's mixture update uses its first (EKF) linearisation.
//!
//! A track missed in a scan keeps its prediction and `mu = cbar`.
//!
//! New tracks start from one detection `z` by Gauss-Newton on `h(x) = z` with
//! minimum-norm steps `x += G (z - h(x))`, `G` the pseudo-inverse of the Jacobian `J` of
//! `h` (mode 0's): from the prior mean, or for a built-in range-bearing measurement from
//! the detection's exact inverse. At the solution `P = G R G^T + N P0 N^T` with
//! `N = I - G J`: the measured part from the detection, the rest from the prior. For a
//! linear `h` this is the linear tracker's rule `x = G (z - d) + N x0` after one step.

use super::ekf::{h_jacobian, moment_update, symmetrize, wrap, wrap_angles, Fail, Work};
use super::imm::mix;
use super::models::NonlinearModel;
use super::sigma::{transform, SigmaRule};
use super::{iterated, rule_for, FilterKind, NonlinearOptions, NonlinearProblem, Step};
use crate::error::{Error, Result};
use crate::linalg::LN_2PI;
use crate::model::Prior;
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// One mode of a track: its moments and the scan's linearisation of `h`.
#[derive(Clone)]
struct Mode {
    m: DVector<f64>,
    p: DMatrix<f64>,
    zh: DVector<f64>,
    s: DMatrix<f64>,
    c: DMatrix<f64>,
}

/// One track.
#[derive(Clone)]
struct Slot {
    modes: Vec<Mode>,
    /// Mode probabilities (after the update; after `predict`, the predicted ones).
    mu: Vec<f64>,
    /// The predicted mode probabilities of this scan.
    cbar: Vec<f64>,
    /// The moment-matched state (one mode: its own), `m` and `P` (symmetric).
    m: DVector<f64>,
    p: DMatrix<f64>,
    /// What the gate sees: `zhat` and `S` (row-major).
    zh: Vec<f64>,
    s: Vec<f64>,
}

/// Every live track of one nonlinear model or IMM (see the module documentation).
pub struct TrackBank {
    modes: Vec<NonlinearModel>,
    transition: DMatrix<f64>,
    initial: Vec<f64>,
    prior: Prior,
    kind: FilterKind,
    iterations: usize,
    rule: Option<SigmaRule>,
    slots: Vec<Option<Box<Slot>>>,
    free: Vec<usize>,
    live: usize,
}

/// Gauss-Newton steps of the initiation at most.
const INIT_STEPS: usize = 50;

/// Which slot failed, and how.
pub type SlotFail = (usize, Fail);

impl TrackBank {
    /// An empty bank for `problem` with the filter of `opts` (checked as the filters
    /// check them).
    pub fn new(problem: &NonlinearProblem, opts: &NonlinearOptions) -> Result<TrackBank> {
        if opts.iterations == 0 {
            return Err(Error::model("iterations", "must be at least 1"));
        }
        let nx = problem.nx();
        let rule = rule_for(opts, nx)?;
        let (modes, transition, initial, prior) = match problem {
            NonlinearProblem::Single(m) => (
                vec![m.clone()],
                DMatrix::from_element(1, 1, 1.0),
                vec![1.0],
                m.prior.clone(),
            ),
            NonlinearProblem::Imm(i) => (
                i.modes.clone(),
                i.transition.clone(),
                i.initial.iter().copied().collect(),
                i.prior.clone(),
            ),
        };
        Ok(TrackBank {
            modes,
            transition,
            initial,
            prior,
            kind: opts.kind,
            iterations: opts.iterations,
            rule,
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        })
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.prior.x0.len()
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        self.modes[0].ny()
    }

    /// Number of modes (1 without an IMM).
    pub fn modes(&self) -> usize {
        self.modes.len()
    }

    /// The measurement components that are angles.
    pub fn angles(&self) -> &[usize] {
        &self.modes[0].angles
    }

    /// Slots (live and free).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Live tracks.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True without live tracks.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn slot(&self, s: usize) -> Option<&Slot> {
        self.slots.get(s).and_then(|v| v.as_deref())
    }

    /// The state mean of `slot`.
    pub fn mean(&self, slot: usize) -> Option<&[f64]> {
        self.slot(slot).map(|s| s.m.as_slice())
    }

    /// The state covariance of `slot` (`nx x nx`, symmetric).
    pub fn cov(&self, slot: usize) -> Option<&[f64]> {
        self.slot(slot).map(|s| s.p.as_slice())
    }

    /// The mode probabilities of `slot` (one value without an IMM).
    pub fn mode_probs(&self, slot: usize) -> Option<&[f64]> {
        self.slot(slot).map(|s| s.mu.as_slice())
    }

    /// The gate's predicted measurement and `S` (row-major) of `slot`, after `measure`.
    pub fn predicted(&self, slot: usize) -> Option<(&[f64], &[f64])> {
        self.slot(slot).map(|s| (s.zh.as_slice(), s.s.as_slice()))
    }

    /// The variances of the measured quantities, `diag(J P J^T)` with `J` the Jacobian of
    /// `h` at the mean (for the tracker's covariance bound).
    pub fn measured_variances(&self, slot: usize) -> Vec<f64> {
        let Some(s) = self.slot(slot) else {
            return Vec::new();
        };
        let mut w = Work::default();
        let (_, j) = h_jacobian(&self.modes[0], &s.m, &mut w);
        let jp = &j * &s.p;
        (0..j.nrows()).map(|a| jp.row(a).dot(&j.row(a))).collect()
    }

    /// Starts a track from detection `z`; returns its slot, or why it could not start.
    pub fn add_from_detection(&mut self, z: &[f64]) -> std::result::Result<usize, String> {
        let (x, p) = self.initiation(z)?;
        let (nx, ny) = (self.nx(), self.ny());
        let r = self.modes.len();
        let mode = Mode {
            m: x.clone(),
            p: p.clone(),
            zh: DVector::zeros(ny),
            s: DMatrix::zeros(ny, ny),
            c: DMatrix::zeros(nx, ny),
        };
        let slot = Box::new(Slot {
            modes: vec![mode; r],
            mu: self.initial.clone(),
            cbar: self.initial.clone(),
            m: x,
            p,
            zh: vec![0.0; ny],
            s: vec![0.0; ny * ny],
        });
        self.live += 1;
        Ok(match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        })
    }

    /// Ends the track in `slot`.
    pub fn remove(&mut self, slot: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            if s.take().is_some() {
                self.free.push(slot);
                self.live -= 1;
            }
        }
    }

    /// The new track's moments from `z` (module documentation).
    fn initiation(&self, z: &[f64]) -> std::result::Result<(DVector<f64>, DMatrix<f64>), String> {
        let model = &self.modes[0];
        let nx = self.nx();
        let mut w = Work::default();
        let mut x = self.prior.x0.clone();
        if let Some(radar) = model.radar {
            x[0] = radar[0] + z[0] * z[1].cos();
            x[2] = radar[1] + z[0] * z[1].sin();
        }
        let zv = DVector::from_column_slice(z);
        let pinv = |j: DMatrix<f64>| -> std::result::Result<DMatrix<f64>, String> {
            if j.iter().any(|v| !v.is_finite()) {
                return Err("the Jacobian of h is not finite there".into());
            }
            j.pseudo_inverse(1e-12).map_err(|e| e.to_string())
        };
        let where_ = |x: &DVector<f64>| {
            let v: Vec<String> = x.iter().map(|v| format!("{v:.6}")).collect();
            format!("at x = [{}]", v.join(", "))
        };
        for _ in 0..INIT_STEPS {
            let (hx, j) = h_jacobian(model, &x, &mut w);
            let g = pinv(j).map_err(|e| format!("{e} ({})", where_(&x)))?;
            let mut r = &zv - hx;
            wrap_angles(r.as_mut_slice(), &model.angles);
            let dx = g * r;
            x += &dx;
            if x.iter().any(|v| !v.is_finite()) {
                return Err("the search for a state that explains it diverged".into());
            }
            if dx.amax() <= 1e-12 * (1.0 + x.amax()) {
                break;
            }
        }
        let (_, j) = h_jacobian(model, &x, &mut w);
        let g = pinv(j.clone()).map_err(|e| format!("{e} ({})", where_(&x)))?;
        let n = DMatrix::identity(nx, nx) - &g * &j;
        let mut p = &g * &model.r * g.transpose() + &n * &self.prior.p0 * n.transpose();
        symmetrize(&mut p);
        Ok((x, p))
    }

    /// Every track one step ahead (module documentation).
    pub fn predict(&mut self) -> std::result::Result<(), SlotFail> {
        let step = step_of(self.kind, self.iterations, self.rule.as_ref());
        let (modes, tr) = (&self.modes, &self.transition);
        each(&mut self.slots, |_, s, w| {
            predict_slot(&step, modes, tr, s, w)
        })
    }

    /// Every track's linearised measurement and what the gate sees.
    pub fn measure(&mut self) -> std::result::Result<(), SlotFail> {
        let (rule, modes) = (self.rule.as_ref(), &self.modes);
        each(&mut self.slots, |_, s, w| measure_slot(rule, modes, s, w))
    }

    /// The GNN update: `z` holds one row of `ny` values a slot, NaN where the slot took
    /// no detection.
    pub fn update(&mut self, z: &[f64]) -> std::result::Result<(), SlotFail> {
        let ny = self.ny();
        let (kind, iterations) = (self.kind, self.iterations);
        let modes = &self.modes;
        each(&mut self.slots, |i, s, w| {
            let zi = &z[i * ny..(i + 1) * ny];
            if zi.iter().any(|v| v.is_nan()) {
                return Ok(());
            }
            let mut logs = Vec::with_capacity(modes.len());
            for (model, md) in modes.iter().zip(&mut s.modes) {
                let ll = if kind == FilterKind::Iekf {
                    iterated::iekf_update(model, zi, &mut md.m, &mut md.p, iterations, w)?
                } else {
                    let mut y = DVector::from_column_slice(zi) - &md.zh;
                    wrap_angles(y.as_mut_slice(), &model.angles);
                    moment_update(&mut md.m, &mut md.p, &y, md.s.clone(), &md.c)?
                };
                logs.push(ll);
            }
            reweigh(s, &logs);
            combine(s);
            Ok(())
        })
    }

    /// The JPDA update: slot `b`'s candidates are rows `start[b]..start[b + 1]` of `z`
    /// (`[rows][ny]`) and `beta`; `pd`, the gate probability `pg` and the clutter
    /// density weigh an IMM's modes.
    pub fn update_mixture(
        &mut self,
        start: &[usize],
        z: &[f64],
        beta: &[f64],
        pd: f64,
        pg: f64,
        clutter: f64,
    ) -> std::result::Result<(), SlotFail> {
        let ny = self.ny();
        let modes = &self.modes;
        let ln_miss = ((1.0 - pd * pg) * clutter).ln();
        each(&mut self.slots, |i, s, _| {
            let rows = start[i]..start[i + 1];
            if rows.is_empty() {
                return Ok(());
            }
            let zs = &z[rows.start * ny..rows.end * ny];
            let bs = &beta[rows];
            let b0 = 1.0 - bs.iter().sum::<f64>();
            let mut logs = Vec::with_capacity(modes.len());
            for (model, md) in modes.iter().zip(&mut s.modes) {
                logs.push(pda_mode(model, md, zs, bs, b0, pd, ln_miss)?);
            }
            reweigh(s, &logs);
            combine(s);
            Ok(())
        })
    }
}

fn step_of(kind: FilterKind, iterations: usize, rule: Option<&SigmaRule>) -> Step<'_> {
    match (kind, rule) {
        (FilterKind::Iekf, _) => Step::Iekf(iterations),
        (_, Some(r)) => Step::Sigma(r),
        _ => Step::Ekf,
    }
}

/// Runs `f` on every live slot in parallel; the lowest failing slot.
fn each(
    slots: &mut [Option<Box<Slot>>],
    f: impl Fn(usize, &mut Slot, &mut Work) -> std::result::Result<(), Fail> + Sync,
) -> std::result::Result<(), SlotFail> {
    let bad = slots
        .par_iter_mut()
        .enumerate()
        .filter_map(|(i, s)| s.as_deref_mut().map(|s| (i, s)))
        .map_init(Work::default, |w, (i, s)| f(i, s, w).err().map(|e| (i, e)))
        .flatten()
        .min_by_key(|e| e.0);
    bad.map_or(Ok(()), Err)
}

/// Mixing (IMM) and prediction of one slot.
fn predict_slot(
    step: &Step<'_>,
    modes: &[NonlinearModel],
    tr: &DMatrix<f64>,
    s: &mut Slot,
    w: &mut Work,
) -> std::result::Result<(), Fail> {
    let r = modes.len();
    if r > 1 {
        let cbar: Vec<f64> = (0..r)
            .map(|j| (0..r).map(|i| tr[(i, j)] * s.mu[i]).sum())
            .collect();
        let ms: Vec<DVector<f64>> = s.modes.iter().map(|m| m.m.clone()).collect();
        let ps: Vec<DMatrix<f64>> = s.modes.iter().map(|m| m.p.clone()).collect();
        for j in 0..r {
            let wts: Vec<f64> = (0..r)
                .map(|i| {
                    if cbar[j] > 0.0 {
                        tr[(i, j)] * s.mu[i] / cbar[j]
                    } else {
                        f64::from(u8::from(i == j))
                    }
                })
                .collect();
            let (m, p) = mix(&ms, &ps, &wts);
            s.modes[j].m = m;
            s.modes[j].p = p;
        }
        s.cbar = cbar;
    }
    for (model, md) in modes.iter().zip(&mut s.modes) {
        step.advance(model, &mut md.m, &mut md.p, w)?;
    }
    s.mu = s.cbar.clone();
    combine(s);
    Ok(())
}

/// The linearisation of `h` for every mode of one slot, and the gate's view.
fn measure_slot(
    rule: Option<&SigmaRule>,
    modes: &[NonlinearModel],
    s: &mut Slot,
    w: &mut Work,
) -> std::result::Result<(), Fail> {
    for (model, md) in modes.iter().zip(&mut s.modes) {
        match rule {
            Some(rule) => {
                let t = transform(rule, &model.h, &model.angles, &md.m, &md.p, w)?;
                md.zh = t.mean;
                md.s = t.cov + &model.r;
                md.c = t.cross;
            }
            None => {
                let (hx, h) = h_jacobian(model, &md.m, w);
                md.c = &md.p * h.transpose();
                md.s = &h * &md.c + &model.r;
                md.zh = hx;
            }
        }
        symmetrize(&mut md.s);
    }
    let angles = &modes[0].angles;
    let ny = modes[0].ny();
    let (zh, sm) = if s.modes.len() == 1 {
        (s.modes[0].zh.clone(), s.modes[0].s.clone())
    } else {
        let mut zh = DVector::zeros(ny);
        for (md, &c) in s.modes.iter().zip(&s.cbar) {
            zh += &md.zh * c;
        }
        for &a in angles {
            let (mut sn, mut cs) = (0.0, 0.0);
            for (md, &c) in s.modes.iter().zip(&s.cbar) {
                sn += c * md.zh[a].sin();
                cs += c * md.zh[a].cos();
            }
            zh[a] = sn.atan2(cs);
        }
        let mut sm = DMatrix::zeros(ny, ny);
        for (md, &c) in s.modes.iter().zip(&s.cbar) {
            if c == 0.0 {
                continue;
            }
            let mut d = &md.zh - &zh;
            wrap_angles(d.as_mut_slice(), angles);
            sm += (&md.s + &d * d.transpose()) * c;
        }
        symmetrize(&mut sm);
        (zh, sm)
    };
    s.zh.clear();
    s.zh.extend(zh.iter());
    for &a in angles {
        s.zh[a] = wrap(s.zh[a]);
    }
    s.s.clear();
    s.s.extend(sm.transpose().iter());
    Ok(())
}

/// `ln N(y; 0, S)` from the Cholesky factor `L` of `S`.
fn log_normal(l: &DMatrix<f64>, y: &DVector<f64>) -> f64 {
    let ny = y.len();
    let e = l.solve_lower_triangular(y).unwrap_or_else(|| y.clone());
    let logdet: f64 = (0..ny).map(|i| l[(i, i)].ln()).sum();
    -0.5 * (ny as f64 * LN_2PI + e.norm_squared()) - logdet
}

/// The PDA update of one mode (module documentation); returns `ln L_j`.
fn pda_mode(
    model: &NonlinearModel,
    md: &mut Mode,
    zs: &[f64],
    bs: &[f64],
    b0: f64,
    pd: f64,
    ln_miss: f64,
) -> std::result::Result<f64, Fail> {
    let ny = md.zh.len();
    let chol = md.s.clone().cholesky().ok_or("S")?;
    let l = chol.l();
    // K^T = S^-1 C^T.
    let kt = chol.solve(&md.c.transpose());
    let mut ybar = DVector::zeros(ny);
    let mut spread = DMatrix::zeros(ny, ny);
    let mut lls = Vec::with_capacity(bs.len());
    for (zi, &b) in zs.chunks(ny).zip(bs) {
        let mut y = DVector::from_column_slice(zi) - &md.zh;
        wrap_angles(y.as_mut_slice(), &model.angles);
        lls.push(log_normal(&l, &y));
        ybar += &y * b;
        spread += &y * y.transpose() * b;
    }
    spread -= &ybar * ybar.transpose();
    md.m += kt.transpose() * &ybar;
    md.p -= (&md.c * &kt) * (1.0 - b0) - kt.transpose() * spread * &kt;
    symmetrize(&mut md.p);
    // ln((1 - pd pg) lambda + pd sum_i N_i), in log space.
    let mut terms = vec![ln_miss];
    terms.extend(lls.iter().map(|l| pd.ln() + l));
    Ok(log_sum_exp(&terms))
}

fn log_sum_exp(v: &[f64]) -> f64 {
    let top = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if top == f64::NEG_INFINITY {
        return top;
    }
    top + v.iter().map(|x| (x - top).exp()).sum::<f64>().ln()
}

/// `mu_j ~ cbar_j exp(logs_j)`; unchanged when every mode has likelihood 0.
fn reweigh(s: &mut Slot, logs: &[f64]) {
    if s.modes.len() == 1 {
        return;
    }
    let l: Vec<f64> = s.cbar.iter().zip(logs).map(|(c, l)| c.ln() + l).collect();
    let total = log_sum_exp(&l);
    if total.is_finite() {
        s.mu = l.iter().map(|v| (v - total).exp()).collect();
    }
}

/// The slot's moment-matched state from its modes and `mu`.
fn combine(s: &mut Slot) {
    if s.modes.len() == 1 {
        s.m.copy_from(&s.modes[0].m);
        s.p.copy_from(&s.modes[0].p);
        return;
    }
    let ms: Vec<DVector<f64>> = s.modes.iter().map(|m| m.m.clone()).collect();
    let ps: Vec<DMatrix<f64>> = s.modes.iter().map(|m| m.p.clone()).collect();
    let (m, p) = mix(&ms, &ps, &s.mu);
    s.m = m;
    s.p = p;
}
