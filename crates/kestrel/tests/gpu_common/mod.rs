//! Shared by the GPU tests: the skip-or-fail rule, random models and measurements, and
//! comparisons with the CPU reference.
#![allow(dead_code)]

use kestrel::{Estimates, Measurements, Model, Real};
use nalgebra::{DMatrix, DVector};
use rand::{Rng, SeedableRng};

/// `true` when a GPU is usable. Without one the test prints why and passes, unless
/// `KESTREL_REQUIRE_GPU=1`, when it fails.
pub fn gpu_or_skip(test: &str) -> bool {
    match kestrel::cuda::available(0) {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("KESTREL_REQUIRE_GPU")
                .map(|v| v == "1")
                .unwrap_or(false)
            {
                panic!("{test}: KESTREL_REQUIRE_GPU=1 but no usable GPU: {why}");
            }
            eprintln!("skipped {test}: no usable GPU: {why}");
            false
        }
    }
}

fn rand_mat(rng: &mut rand::rngs::StdRng, r: usize, c: usize, s: f64) -> DMatrix<f64> {
    DMatrix::from_fn(r, c, |_, _| rng.gen_range(-s..s))
}

fn spd(rng: &mut rand::rngs::StdRng, n: usize, scale: f64, floor: f64) -> DMatrix<f64> {
    let a = rand_mat(rng, n, n, scale);
    let m = &a * a.transpose() + DMatrix::identity(n, n) * floor;
    (&m + m.transpose()) * 0.5
}

/// A random, well-conditioned model: a stable F (diagonal in [0.6, 0.85], off-diagonal
/// entries below 0.1 / nx, so every Gershgorin disc lies inside the unit circle and the
/// states stay of order one), Q, R and P0 comfortably positive definite, random offsets
/// u and d. (With a growing state, f32 itself loses ~1e-4 of the log-likelihood to
/// cancellation in z - H x, whichever device computes it.)
pub fn random_model(nx: usize, ny: usize, seed: u64) -> Model {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut f = rand_mat(&mut rng, nx, nx, 0.1 / nx as f64);
    for i in 0..nx {
        f[(i, i)] = rng.gen_range(0.6..0.85);
    }
    let q = spd(&mut rng, nx, 0.3, 0.05);
    let h = rand_mat(&mut rng, ny, nx, 1.0);
    let r = spd(&mut rng, ny, 0.5, 0.3);
    let x0 = DVector::from_fn(nx, |_, _| rng.gen_range(-1.0..1.0));
    let p0 = spd(&mut rng, nx, 0.7, 0.5);
    let u = DVector::from_fn(nx, |_, _| rng.gen_range(-0.5..0.5));
    let d = DVector::from_fn(ny, |_, _| rng.gen_range(-0.5..0.5));
    Model::new(f, q, h, r, x0, p0)
        .and_then(|m| m.with_offsets(u, d))
        .expect("the random model is valid by construction")
}

/// Measurements simulated from `model` with a fraction `missing` of missing steps (one or
/// all components NaN).
pub fn random_measurements<T: Real>(
    model: &Model,
    tracks: usize,
    steps: usize,
    seed: u64,
    missing: f64,
) -> Measurements<T> {
    let sim = kestrel::sim::simulate(model, tracks, steps, seed, 0.0)
        .expect("simulation of a valid model");
    let mut z = sim.measurements;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
    let ny = z.ny();
    for s in z.data_mut().chunks_mut(ny) {
        if rng.gen::<f64>() < missing {
            if rng.gen::<bool>() {
                s.fill(f64::NAN);
            } else {
                s[rng.gen_range(0..ny)] = f64::NAN;
            }
        }
    }
    z.cast::<T>()
}

/// Largest normwise relative difference over blocks of `block` values:
/// max over blocks of ||a - b||_inf / max(||b||_inf, tiny). NaN anywhere in `a` is
/// infinite error (an output nobody wrote).
pub fn max_rel<T: Real>(a: &[T], b: &[T], block: usize) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    let mut worst = 0.0f64;
    for (x, y) in a.chunks(block).zip(b.chunks(block)) {
        let mut num = 0.0f64;
        let mut den = 0.0f64;
        for (p, q) in x.iter().zip(y) {
            let (p, q) = (p.to_f64(), q.to_f64());
            if p.is_nan() || q.is_nan() {
                return f64::INFINITY;
            }
            num = num.max((p - q).abs());
            den = den.max(q.abs());
        }
        worst = worst.max(num / den.max(1e-300));
    }
    worst
}

/// Asserts that two sets of estimates agree within `tol` (normwise relative per step).
pub fn assert_close<T: Real>(what: &str, got: &Estimates<T>, want: &Estimates<T>, tol: f64) {
    assert_eq!(
        (got.tracks(), got.steps(), got.nx()),
        (want.tracks(), want.steps(), want.nx()),
        "{what}: shapes"
    );
    let n = got.nx();
    let em = max_rel(got.mean(), want.mean(), n);
    let ec = max_rel(got.cov(), want.cov(), n * n);
    assert!(
        em <= tol,
        "{what}: means differ by {em:e} (tolerance {tol:e})"
    );
    assert!(
        ec <= tol,
        "{what}: covariances differ by {ec:e} (tolerance {tol:e})"
    );
    match (got.loglik(), want.loglik()) {
        (Some(g), Some(w)) => {
            let el = max_rel(g, w, 1);
            // Log-likelihoods near zero: compare against the scale of the whole set.
            let scale = w
                .iter()
                .map(|v| v.to_f64().abs())
                .fold(0.0, f64::max)
                .max(1.0);
            let abs = g
                .iter()
                .zip(w)
                .map(|(a, b)| (a.to_f64() - b.to_f64()).abs())
                .fold(0.0, f64::max);
            assert!(
                el <= tol || abs <= tol * scale,
                "{what}: log-likelihoods differ by {el:e} relative, {abs:e} absolute"
            );
        }
        (None, None) => {}
        _ => panic!("{what}: one side has log-likelihoods, the other not"),
    }
}
