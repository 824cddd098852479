//! Simulated multi-target scenarios: targets that move by the model, are born and die,
//! cross each other, are detected with probability `pd`, among Poisson clutter spread
//! uniformly over the surveillance region `[-A, A]^ny` of measurement space.
//!
//! New targets are placed uniformly in the region: with `G = H^+` and `N = I - G H`,
//! `x = G (p - d) + N x'` for a uniform point `p` and `x' ~ N(x0, P0)` (the model's
//! prior supplies what is not measured, such as the velocity). In the crossing
//! scenario targets come in pairs that meet at the same point at the middle step: the
//! meeting states are drawn as above and run backwards through `F^{-1}` to the start,
//! then forwards with process noise.

use super::files::{Detections, Labelled};
use crate::error::{Error, Result};
use crate::model::Model;
use nalgebra::{DMatrix, DVector};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Poisson, StandardNormal};

/// Which scenario to draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Targets start anywhere in the region.
    Random,
    /// Targets start in pairs that meet at the middle step.
    Crossing,
}

/// The scenario's settings.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// How targets start.
    pub kind: Kind,
    /// Targets alive at step 0.
    pub targets: usize,
    /// Steps (scans) to draw.
    pub steps: usize,
    /// Detection probability of each target at each step.
    pub pd: f64,
    /// Mean number of clutter detections per scan (Poisson).
    pub clutter: f64,
    /// Half-width `A` of the region `[-A, A]^ny`.
    pub region: f64,
    /// Mean number of births per step after step 0 (Poisson).
    pub births: f64,
    /// Probability that a target dies at each step after step 0.
    pub death: f64,
    /// Seed of every draw.
    pub seed: u64,
}

/// Bytes a row of truth and detections takes, about (times, identities, a few
/// components each, and the vectors' growth).
const ROW_BYTES: usize = 64;

impl Scenario {
    /// The clutter density per unit measurement volume that the tracker should use.
    pub fn clutter_density(&self, ny: usize) -> f64 {
        self.clutter / (2.0 * self.region).powi(ny as i32)
    }

    fn validate(&self) -> Result<()> {
        use crate::limits::End::{Ex, In};
        if !(self.pd > 0.0 && self.pd <= 1.0) {
            return Err(Error::input(format!(
                "pd must be in (0, 1], got {}",
                self.pd
            )));
        }
        for (name, v) in [("clutter", self.clutter), ("births", self.births)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(Error::input(format!(
                    "{name} must be non-negative and finite, got {v}"
                )));
            }
        }
        if !(self.death >= 0.0 && self.death <= 1.0) {
            return Err(Error::input(format!(
                "death probability must be in [0, 1], got {}",
                self.death
            )));
        }
        // The region's width 2A is a sampling range and (2A)^ny a volume: bounded so
        // that neither overflows (a range of infinite width panics in the sampler).
        crate::limits::range("region", self.region, Ex(0.0), In(1e100))?;
        if self.steps == 0 {
            return Err(Error::input("a scenario needs at least one step"));
        }
        // The rows drawn are bounded before any is: about steps x (targets + births x
        // steps + clutter) rows of truth and detections, checked against the memory.
        let per_scan = self.targets as f64 + self.births * self.steps as f64 + self.clutter;
        crate::limits::check(
            "the scenario",
            &[
                crate::limits::Size("steps", self.steps),
                crate::limits::Size("rows per scan", per_scan.min(1e30).ceil() as usize),
            ],
            ROW_BYTES,
        )?;
        Ok(())
    }
}

/// Draws a standard normal vector of length `n`.
fn normal(rng: &mut impl Rng, n: usize) -> DVector<f64> {
    DVector::from_fn(n, |_, _| rng.sample::<f64, _>(StandardNormal))
}

fn sqrt_psd(m: &DMatrix<f64>) -> DMatrix<f64> {
    let e = m.clone().symmetric_eigen();
    let mut v = e.eigenvectors.clone();
    for (j, l) in e.eigenvalues.iter().enumerate() {
        v.column_mut(j).scale_mut(l.max(0.0).sqrt());
    }
    v
}

fn poisson(rng: &mut impl Rng, mean: f64) -> usize {
    if mean <= 0.0 {
        return 0;
    }
    // The mean is positive and finite (checked), so the distribution exists.
    Poisson::new(mean)
        .map(|p| p.sample(rng) as usize)
        .unwrap_or(0)
}

/// The truth (`t,id,x..` rows, step by step) and the detections of a scenario.
pub fn simulate(model: &Model, s: &Scenario) -> Result<(Labelled, Detections)> {
    s.validate()?;
    model.validate()?;
    let (nx, ny) = (model.nx(), model.ny());
    let expected = (s.targets as f64 + s.births * s.steps as f64) * s.steps as f64
        + s.clutter * s.steps as f64;
    // `as` saturates: an absurd expectation is u128::MAX bytes, never a wrapped one.
    crate::limits::check_bytes(
        &format!(
            "the scenario ({} targets, {} steps, {} births and {} clutter per step)",
            s.targets, s.steps, s.births, s.clutter
        ),
        (expected * (nx + ny) as f64 * 8.0) as u128,
    )?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(s.seed);
    let g = model
        .h
        .clone()
        .pseudo_inverse(1e-12)
        .map_err(|e| Error::model("H", format!("no pseudo-inverse: {e}")))?;
    let proj = DMatrix::identity(nx, nx) - &g * &model.h;
    let p0 = sqrt_psd(&model.prior.p0);
    let q = sqrt_psd(&model.q);
    let r = sqrt_psd(&model.r);
    let a = s.region;
    let place = |rng: &mut rand::rngs::StdRng, spread: f64| -> DVector<f64> {
        let p = DVector::from_fn(ny, |_, _| rng.gen_range(-spread..spread));
        let prior = &model.prior.x0 + &p0 * normal(rng, nx);
        &g * (p - &model.d) + &proj * prior
    };
    let mut alive: Vec<(u64, DVector<f64>)> = Vec::with_capacity(s.targets);
    match s.kind {
        Kind::Random => {
            for id in 0..s.targets {
                alive.push((id as u64, place(&mut rng, a)));
            }
        }
        Kind::Crossing => {
            let finv = model.f.clone().try_inverse().ok_or_else(|| {
                Error::model(
                    "F",
                    "the crossing scenario runs targets backwards and needs an invertible F",
                )
            })?;
            let meet = s.steps / 2;
            let mut id = 0u64;
            while (id as usize) < s.targets {
                let centre = DVector::from_fn(ny, |_, _| rng.gen_range(-0.5 * a..0.5 * a));
                for _ in 0..2 {
                    if id as usize == s.targets {
                        break;
                    }
                    let prior = &model.prior.x0 + &p0 * normal(&mut rng, nx);
                    let mut x = &g * (&centre - &model.d) + &proj * prior;
                    for _ in 0..meet {
                        x = &finv * (x - &model.u);
                    }
                    alive.push((id, x));
                    id += 1;
                }
            }
        }
    }
    let mut next_id = s.targets as u64;
    let mut truth = Labelled {
        n: nx,
        ..Default::default()
    };
    let mut det = Detections {
        ny,
        ..Default::default()
    };
    let mut scan: Vec<f64> = Vec::new();
    for k in 0..s.steps {
        if k > 0 {
            alive.retain(|_| !rng.gen_bool(s.death));
            for (_, x) in alive.iter_mut() {
                *x = &model.f * &*x + &model.u + &q * normal(&mut rng, nx);
            }
            for _ in 0..poisson(&mut rng, s.births) {
                alive.push((next_id, place(&mut rng, a)));
                next_id += 1;
            }
        }
        scan.clear();
        for (id, x) in &alive {
            truth.t.push(k as f64);
            truth.id.push(*id);
            truth.confirmed.push(true);
            truth.x.extend(x.iter());
            if rng.gen_bool(s.pd) {
                let z = &model.h * x + &model.d + &r * normal(&mut rng, ny);
                scan.extend(z.iter());
            }
        }
        for _ in 0..poisson(&mut rng, s.clutter) {
            for _ in 0..ny {
                scan.push(rng.gen_range(-a..a));
            }
        }
        // Detections carry no order that could identify their source.
        let mut rows: Vec<&[f64]> = scan.chunks(ny).collect();
        rows.shuffle(&mut rng);
        for row in rows {
            det.t.push(k as f64);
            det.z.extend_from_slice(row);
        }
    }
    Ok((truth, det))
}
