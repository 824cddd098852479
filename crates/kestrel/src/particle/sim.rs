//! Simulation of truth and measurements from a particle-filter model: the true state of
//! track `b` is "particle 0 of filter b" under purposes `SimState` (prior and process
//! noise), `SimMeasure` (measurement noise) and `SimMissing`, so a simulation is
//! reproducible and independent of the thread count.

use super::models::{ParticleModel, PfModel};
use super::philox::{counter, key_of, philox4x32_10, uniform_f64, Normals, Purpose};
use crate::data::Measurements;
use crate::error::{Error, Result};
use rayon::prelude::*;

/// Truth `[B][T][nx]` and measurements `[B][T][ny]` (a missing one is all NaN).
pub fn simulate(
    model: &PfModel,
    tracks: usize,
    steps: usize,
    seed: u64,
    missing: f64,
) -> Result<(Vec<f64>, Measurements<f64>)> {
    model.check_cpu()?;
    if !(0.0..=1.0).contains(&missing) {
        return Err(Error::input(format!(
            "missing probability must be in [0, 1], got {missing}"
        )));
    }
    let nx = ParticleModel::<f64>::nx(model);
    let ny = ParticleModel::<f64>::ny(model);
    let key = key_of(seed);
    let cells = tracks
        .checked_mul(steps)
        .filter(|c| {
            c.checked_mul(nx + ny)
                .is_some_and(|v| v < (isize::MAX as usize) / 8)
        })
        .ok_or_else(|| Error::input(format!("{tracks} tracks x {steps} steps is too large")))?;
    let mut truth = vec![0.0f64; cells * nx];
    let mut z = vec![0.0f64; cells * ny];
    truth
        .par_chunks_mut(steps * nx)
        .zip(z.par_chunks_mut(steps * ny))
        .enumerate()
        .for_each(|(b, (xt, zt))| {
            let mut x = vec![0.0f64; nx];
            for k in 0..steps {
                let mut noise = Normals::new(key, 0, b as u32, k as u32, Purpose::SimState);
                if k == 0 {
                    model.sample_prior(&mut x, &mut noise);
                } else {
                    model.propagate(k, &mut x, &mut noise);
                }
                xt[k * nx..(k + 1) * nx].copy_from_slice(&x);
                let zk = &mut zt[k * ny..(k + 1) * ny];
                let u = philox4x32_10(counter(0, b as u32, k as u32, Purpose::SimMissing, 0), key);
                if missing > 0.0 && uniform_f64(u[0]) < missing {
                    zk.fill(f64::NAN);
                } else {
                    let mut e = Normals::new(key, 0, b as u32, k as u32, Purpose::SimMeasure);
                    model.measure(k, &x, &mut e, zk);
                }
            }
        });
    Ok((truth, Measurements::new(tracks, steps, ny, z)?))
}
