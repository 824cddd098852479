//! Simulation from a nonlinear model: `x_0 ~ N(x0, P0)`, `x_k = f(x_{k-1}) + w_k`,
//! `z_k = h(x_k) + v_k` with Gaussian noise of covariances Q and R, each track from its
//! own generator seeded with `(seed, b)` as [`crate::sim::simulate`] does, so results do
//! not depend on how the work is split across threads.

use super::models::NonlinearModel;
use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::sim::{check_missing, check_size, sqrt_psd, track_seed, Simulation};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;

/// Draws `tracks` trajectories of `steps` steps from `model` and measures them; each
/// measurement is missing (all NaN) with probability `missing`. Angle components of the
/// measurement are wrapped to (-pi, pi] after their noise is added.
pub fn simulate(
    model: &NonlinearModel,
    tracks: usize,
    steps: usize,
    seed: u64,
    missing: f64,
) -> Result<Simulation> {
    check_missing(missing)?;
    let (nx, ny) = (model.nx(), model.ny());
    check_size(tracks, steps, nx, ny)?;
    let (sq, sr, sp) = (
        sqrt_psd(&model.q),
        sqrt_psd(&model.r),
        sqrt_psd(&model.prior.p0),
    );
    let mut truth = crate::limits::filled("simulated truth", tracks * steps * nx, 0.0)?;
    let mut z = crate::limits::filled("simulated measurements", tracks * steps * ny, 0.0)?;
    // The first (track, step, what) whose values are not finite.
    let bad = truth
        .par_chunks_mut((steps * nx).max(1))
        .zip(z.par_chunks_mut((steps * ny).max(1)))
        .enumerate()
        .filter_map(|(b, (xt, zt))| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(track_seed(seed, b));
            let mut regs = Vec::new();
            let noise =
                |rng: &mut rand::rngs::StdRng, s: &nalgebra::DMatrix<f64>, y: &mut [f64]| {
                    let e: Vec<f64> = (0..s.ncols()).map(|_| rng.sample(StandardNormal)).collect();
                    for (j, ej) in e.iter().enumerate() {
                        for (i, yi) in y.iter_mut().enumerate() {
                            *yi += s[(i, j)] * ej;
                        }
                    }
                };
            let mut x = model.prior.x0.as_slice().to_vec();
            noise(&mut rng, &sp, &mut x);
            let mut xn = vec![0.0; nx];
            for k in 0..steps {
                if k > 0 {
                    model.f.value(&x, &mut xn, &mut regs);
                    noise(&mut rng, &sq, &mut xn);
                    std::mem::swap(&mut x, &mut xn);
                }
                if x.iter().any(|v| !v.is_finite()) {
                    return Some((b, k, "truth"));
                }
                xt[k * nx..(k + 1) * nx].copy_from_slice(&x);
                let zk = &mut zt[k * ny..(k + 1) * ny];
                model.h.value(&x, zk, &mut regs);
                noise(&mut rng, &sr, zk);
                if zk.iter().any(|v| !v.is_finite()) {
                    return Some((b, k, "measurements"));
                }
                for &a in &model.angles {
                    zk[a] = super::ekf::wrap(zk[a]);
                }
                if missing > 0.0 && rng.gen::<f64>() < missing {
                    zk.fill(f64::NAN);
                }
            }
            None
        })
        .min();
    // A model that leaves its functions' domain or diverges gives no sample of itself
    // (and a NaN measurement would read back as a missing one).
    if let Some((track, step, what)) = bad {
        return Err(Error::NonFinite {
            what: format!("simulate: {what}"),
            track,
            step,
            msg: "not finite (the model's functions left their domain, or the state diverged)"
                .into(),
        });
    }
    Ok(Simulation {
        truth,
        measurements: Measurements::new(tracks, steps, ny, z)?,
    })
}
