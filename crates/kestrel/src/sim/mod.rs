//! Simulation of truth and measurements from a model, seeded and reproducible: track `b`
//! draws from its own generator seeded with `(seed, b)`, so results do not depend on how
//! the work is split across threads.

use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::model::StateSpace;
use nalgebra::{DMatrix, DVector};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;

/// Simulated truth `[tracks][steps][nx]` and measurements `[tracks][steps][ny]`.
pub struct Simulation {
    pub truth: Vec<f64>,
    pub measurements: Measurements<f64>,
}

/// A square root `A` with `A A^T = M` of a symmetric positive semi-definite matrix, by
/// the symmetric eigendecomposition (a Cholesky factor need not exist for a singular `Q`).
fn sqrt_psd(m: &DMatrix<f64>) -> DMatrix<f64> {
    let e = m.clone().symmetric_eigen();
    let mut v = e.eigenvectors.clone();
    for (j, l) in e.eigenvalues.iter().enumerate() {
        let s = l.max(0.0).sqrt();
        v.column_mut(j).scale_mut(s);
    }
    v
}

fn track_seed(seed: u64, b: usize) -> u64 {
    // SplitMix64 finaliser: decorrelates neighbouring track indices.
    let mut z = seed ^ (b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Draws `tracks` independent trajectories of `steps` steps from `model` and measures
/// them; each measurement is missing (all NaN) with probability `missing`.
pub fn simulate<M: StateSpace + ?Sized>(
    model: &M,
    tracks: usize,
    steps: usize,
    seed: u64,
    missing: f64,
) -> Result<Simulation> {
    if !(0.0..=1.0).contains(&missing) {
        return Err(Error::input(format!(
            "missing probability must be in [0, 1], got {missing}"
        )));
    }
    if let Some(n) = model.steps_covered() {
        if n < steps {
            return Err(Error::input(format!(
                "the model has matrices for {n} steps, asked for {steps}"
            )));
        }
    }
    let (nx, ny) = (model.nx(), model.ny());
    let invariant = model.as_invariant().is_some();
    let nq = if invariant { 1 } else { steps.max(1) };
    let sq: Vec<DMatrix<f64>> = (0..nq).map(|k| sqrt_psd(model.transition(k).2)).collect();
    let sr: Vec<DMatrix<f64>> = (0..nq).map(|k| sqrt_psd(model.observation(k).2)).collect();
    let sp = sqrt_psd(&model.prior().p0);
    let mut truth = vec![0.0; tracks * steps * nx];
    let mut z = vec![0.0; tracks * steps * ny];
    truth
        .par_chunks_mut((steps * nx).max(1))
        .zip(z.par_chunks_mut((steps * ny).max(1)))
        .enumerate()
        .for_each(|(b, (xt, zt))| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(track_seed(seed, b));
            fn normal(rng: &mut rand::rngs::StdRng, n: usize) -> DVector<f64> {
                DVector::from_fn(n, |_, _| rng.sample::<f64, _>(StandardNormal))
            }
            let mut x = &model.prior().x0 + &sp * normal(&mut rng, nx);
            for k in 0..steps {
                let i = if invariant { 0 } else { k };
                if k > 0 {
                    let (f, u, _) = model.transition(k);
                    x = f * &x + u + &sq[i] * normal(&mut rng, nx);
                }
                xt[k * nx..(k + 1) * nx].copy_from_slice(x.as_slice());
                let (h, d, _) = model.observation(k);
                let zk = h * &x + d + &sr[i] * normal(&mut rng, ny);
                let miss = missing > 0.0 && rng.gen::<f64>() < missing;
                for j in 0..ny {
                    zt[k * ny + j] = if miss { f64::NAN } else { zk[j] };
                }
            }
        });
    Ok(Simulation {
        truth,
        measurements: Measurements::new(tracks, steps, ny, z)?,
    })
}
