//! Simulation of truth and measurements from a model, seeded and reproducible: track `b`
//! draws from its own generator seeded with `(seed, b)`, so results do not depend on how
//! the work is split across threads.

use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::model::StateSpace;
use nalgebra::DMatrix;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;

/// Simulated truth `[tracks][steps][nx]` and measurements `[tracks][steps][ny]`.
pub struct Simulation {
    /// True states `[tracks][steps][nx]`.
    pub truth: Vec<f64>,
    /// Noisy measurements, NaN where dropped.
    pub measurements: Measurements<f64>,
}

/// A square root `A` with `A A^T = M` of a symmetric positive semi-definite matrix, by
/// the symmetric eigendecomposition (a Cholesky factor need not exist for a singular `Q`).
pub(crate) fn sqrt_psd(m: &DMatrix<f64>) -> DMatrix<f64> {
    let e = m.clone().symmetric_eigen();
    let mut v = e.eigenvectors.clone();
    for (j, l) in e.eigenvalues.iter().enumerate() {
        let s = l.max(0.0).sqrt();
        v.column_mut(j).scale_mut(s);
    }
    v
}

pub(crate) fn track_seed(seed: u64, b: usize) -> u64 {
    // SplitMix64 finaliser: decorrelates neighbouring track indices.
    let mut z = seed ^ (b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Refuses a missing-measurement probability outside [0, 1].
pub(crate) fn check_missing(missing: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&missing) {
        return Err(Error::input(format!(
            "missing probability must be in [0, 1], got {missing}"
        )));
    }
    Ok(())
}

/// Refuses, before anything is allocated, a simulation whose truth and measurements
/// would not fit.
pub(crate) fn check_size(tracks: usize, steps: usize, nx: usize, ny: usize) -> Result<()> {
    use crate::limits::Size;
    let n = crate::limits::elements(
        "simulation",
        &[
            Size("tracks", tracks),
            Size("steps", steps),
            Size("values", nx + ny),
        ],
    )?;
    crate::limits::check_bytes(
        &format!("simulating {tracks} tracks x {steps} steps (nx {nx}, ny {ny})"),
        n as u128 * 8,
    )
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
    check_missing(missing)?;
    if let Some(n) = model.steps_covered() {
        if n < steps {
            return Err(Error::input(format!(
                "the model has matrices for {n} steps, asked for {steps}"
            )));
        }
    }
    let (nx, ny) = (model.nx(), model.ny());
    check_size(tracks, steps, nx, ny)?;
    let invariant = model.as_invariant().is_some();
    let nq = if invariant { 1 } else { steps.max(1) };
    let sq: Vec<DMatrix<f64>> = (0..nq).map(|k| sqrt_psd(model.transition(k).2)).collect();
    let sr: Vec<DMatrix<f64>> = (0..nq).map(|k| sqrt_psd(model.observation(k).2)).collect();
    let sp = sqrt_psd(&model.prior().p0);
    let mut truth = crate::limits::filled("simulated truth", tracks * steps * nx, 0.0)?;
    let mut z = crate::limits::filled("simulated measurements", tracks * steps * ny, 0.0)?;
    truth
        .par_chunks_mut((steps * nx).max(1))
        .zip(z.par_chunks_mut((steps * ny).max(1)))
        .enumerate()
        .for_each(|(b, (xt, zt))| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(track_seed(seed, b));
            // Buffers allocated once per track; the step loop does not allocate.
            let mut e = vec![0.0; nx.max(ny)];
            let mut x = vec![0.0; nx];
            let mut xn = vec![0.0; nx];
            let draw = |rng: &mut rand::rngs::StdRng, e: &mut [f64]| {
                for v in e.iter_mut() {
                    *v = rng.sample(StandardNormal);
                }
            };
            // y = a v (+ y when accumulate), a given column-major by nalgebra.
            fn mul_add(a: &DMatrix<f64>, v: &[f64], y: &mut [f64]) {
                for (j, vj) in v.iter().enumerate().take(a.ncols()) {
                    for (i, yi) in y.iter_mut().enumerate().take(a.nrows()) {
                        *yi += a[(i, j)] * vj;
                    }
                }
            }
            draw(&mut rng, &mut e[..nx]);
            x.copy_from_slice(model.prior().x0.as_slice());
            mul_add(&sp, &e[..nx], &mut x);
            for k in 0..steps {
                let i = if invariant { 0 } else { k };
                if k > 0 {
                    let (f, u, _) = model.transition(k);
                    xn.copy_from_slice(u.as_slice());
                    mul_add(f, &x, &mut xn);
                    draw(&mut rng, &mut e[..nx]);
                    mul_add(&sq[i], &e[..nx], &mut xn);
                    std::mem::swap(&mut x, &mut xn);
                }
                xt[k * nx..(k + 1) * nx].copy_from_slice(&x);
                let (h, d, _) = model.observation(k);
                let zk = &mut zt[k * ny..(k + 1) * ny];
                zk.copy_from_slice(d.as_slice());
                mul_add(h, &x, zk);
                draw(&mut rng, &mut e[..ny]);
                mul_add(&sr[i], &e[..ny], zk);
                if missing > 0.0 && rng.gen::<f64>() < missing {
                    zk.fill(f64::NAN);
                }
            }
        });
    // An unstable model can overflow the state; such a truth is no sample of the model
    // (and a NaN measurement would read back as a missing one).
    if let Some(i) = truth.iter().position(|v| !v.is_finite()) {
        let (b, k) = (i / (steps * nx), (i / nx) % steps);
        return Err(Error::NonFinite {
            what: "simulate: truth".into(),
            track: b,
            step: k,
            msg: format!(
                "state component x{} overflows to {} (the model is unstable over {steps} steps)",
                i % nx,
                truth[i]
            ),
        });
    }
    if let Some(i) = z.iter().position(|v| v.is_infinite()) {
        let (b, k) = (i / (steps * ny), (i / ny) % steps);
        return Err(Error::NonFinite {
            what: "simulate: measurements".into(),
            track: b,
            step: k,
            msg: format!("component z{} overflows", i % ny),
        });
    }
    Ok(Simulation {
        truth,
        measurements: Measurements::new(tracks, steps, ny, z)?,
    })
}
