//! An independent textbook Kalman filter and RTS smoother (nalgebra, explicit inverses,
//! Joseph-form covariance update) and random models, for the tests.
#![allow(dead_code)]

use kestrel::model::{Prior, StepMatrices, TimeVaryingModel};
use kestrel::{Measurements, StateSpace};
use nalgebra::{DMatrix, DVector};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub struct Textbook {
    pub mean: Vec<DVector<f64>>,
    pub cov: Vec<DMatrix<f64>>,
    pub loglik: Vec<f64>,
    pub pred_mean: Vec<DVector<f64>>,
    pub pred_cov: Vec<DMatrix<f64>>,
}

/// Kalman filter of one track, written from the textbook equations.
pub fn textbook_filter<M: StateSpace>(m: &M, z: &[f64], steps: usize) -> Textbook {
    let (nx, ny) = (m.nx(), m.ny());
    let mut x = m.prior().x0.clone();
    let mut p = m.prior().p0.clone();
    let mut out = Textbook {
        mean: vec![],
        cov: vec![],
        loglik: vec![],
        pred_mean: vec![],
        pred_cov: vec![],
    };
    for k in 0..steps {
        if k > 0 {
            let (f, u, q) = m.transition(k);
            x = f * &x + u;
            p = f * &p * f.transpose() + q;
        }
        out.pred_mean.push(x.clone());
        out.pred_cov.push(p.clone());
        let zk = DVector::from_row_slice(&z[k * ny..(k + 1) * ny]);
        if zk.iter().any(|v| v.is_nan()) {
            out.loglik.push(0.0);
        } else {
            let (h, d, r) = m.observation(k);
            let y = &zk - h * &x - d;
            let s = h * &p * h.transpose() + r;
            let si = s.clone().try_inverse().expect("S invertible");
            let k_gain = &p * h.transpose() * &si;
            x = &x + &k_gain * &y;
            let ikh = DMatrix::identity(nx, nx) - &k_gain * h;
            p = &ikh * &p * ikh.transpose() + &k_gain * r * k_gain.transpose();
            let maha = (y.transpose() * &si * &y)[(0, 0)];
            let ll = -0.5
                * (ny as f64 * (2.0 * std::f64::consts::PI).ln() + s.determinant().ln() + maha);
            out.loglik.push(ll);
        }
        out.mean.push(x.clone());
        out.cov.push(p.clone());
    }
    out
}

/// RTS smoother over a textbook filter's output.
pub fn textbook_smooth<M: StateSpace>(
    m: &M,
    f: &Textbook,
) -> (Vec<DVector<f64>>, Vec<DMatrix<f64>>) {
    let t = f.mean.len();
    let mut xs = f.mean.clone();
    let mut ps = f.cov.clone();
    for k in (0..t - 1).rev() {
        let (fm, u, q) = m.transition(k + 1);
        let xp = fm * &f.mean[k] + u;
        let pp = fm * &f.cov[k] * fm.transpose() + q;
        let g = &f.cov[k] * fm.transpose() * pp.try_inverse().expect("P(k+1|k) invertible");
        xs[k] = &f.mean[k] + &g * (&xs[k + 1] - xp);
        ps[k] =
            &f.cov[k] + &g * (&ps[k + 1] - (fm * &f.cov[k] * fm.transpose() + q)) * g.transpose();
    }
    (xs, ps)
}

fn random_spd(rng: &mut StdRng, n: usize, scale: f64, floor: f64) -> DMatrix<f64> {
    let a = DMatrix::from_fn(n, n, |_, _| rng.gen_range(-1.0..1.0));
    (&a * a.transpose()) * scale + DMatrix::identity(n, n) * floor
}

/// A random, well-conditioned step of a model: `F = 0.95 x` a random orthogonal matrix
/// (stable, as in Sarkka & Garcia-Fernandez's experiments), so covariances stay bounded.
pub fn random_step(rng: &mut StdRng, nx: usize, ny: usize) -> StepMatrices {
    let a = DMatrix::from_fn(nx, nx, |_, _| rng.gen_range(-1.0..1.0));
    let f = a.qr().q() * 0.95;
    StepMatrices {
        f,
        u: DVector::from_fn(nx, |_, _| rng.gen_range(-1.0..1.0)),
        q: random_spd(rng, nx, 0.1, 0.01),
        h: DMatrix::from_fn(ny, nx, |_, _| rng.gen_range(-1.0..1.0)),
        d: DVector::from_fn(ny, |_, _| rng.gen_range(-1.0..1.0)),
        r: random_spd(rng, ny, 0.5, 0.1),
    }
}

pub fn random_prior(rng: &mut StdRng, nx: usize) -> Prior {
    Prior {
        x0: DVector::from_fn(nx, |_, _| rng.gen_range(-1.0..1.0)),
        p0: random_spd(rng, nx, 1.0, 0.1),
    }
}

/// A random time-invariant model with offsets.
pub fn random_model(seed: u64, nx: usize, ny: usize) -> kestrel::Model {
    let mut rng = StdRng::seed_from_u64(seed);
    let s = random_step(&mut rng, nx, ny);
    let p = random_prior(&mut rng, nx);
    kestrel::Model::new(s.f, s.q, s.h, s.r, p.x0, p.p0)
        .and_then(|m| m.with_offsets(s.u, s.d))
        .expect("the random model is valid by construction")
}

/// A random time-varying model of `steps` steps.
pub fn random_tv_model(seed: u64, nx: usize, ny: usize, steps: usize) -> TimeVaryingModel {
    let mut rng = StdRng::seed_from_u64(seed);
    let s = (0..steps).map(|_| random_step(&mut rng, nx, ny)).collect();
    let p = random_prior(&mut rng, nx);
    TimeVaryingModel::new(s, p).expect("random model is valid")
}

/// Random measurements with a fraction `missing` of missing steps.
pub fn random_measurements(
    seed: u64,
    tracks: usize,
    steps: usize,
    ny: usize,
    missing: f64,
) -> Measurements<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut data = vec![0.0; tracks * steps * ny];
    for s in 0..tracks * steps {
        let miss = rng.gen::<f64>() < missing;
        for j in 0..ny {
            data[s * ny + j] = if miss {
                f64::NAN
            } else {
                rng.gen_range(-3.0..3.0)
            };
        }
    }
    Measurements::new(tracks, steps, ny, data).unwrap()
}

/// max |a - b| / max(1, |b|) over two slices.
pub fn max_rel_err(a: impl IntoIterator<Item = f64>, b: impl IntoIterator<Item = f64>) -> f64 {
    a.into_iter()
        .zip(b)
        .map(|(x, y)| {
            if x.is_nan() || y.is_nan() {
                f64::INFINITY
            } else {
                (x - y).abs() / y.abs().max(1.0)
            }
        })
        .fold(0.0, f64::max)
}

/// Wilson-Hilferty approximation of the chi-square quantile with `dof` degrees of freedom
/// at standard-normal quantile `zq` (accurate to well under 1% for dof >= 30).
pub fn chi2_quantile(dof: f64, zq: f64) -> f64 {
    let a = 2.0 / (9.0 * dof);
    dof * (1.0 - a + zq * a.sqrt()).powi(3)
}

/// Three damped constant-velocity blocks mixed by a random rotation, measured (three
/// combinations of the positions) with a noise variance of 1e-8 against a process noise of
/// order one: the filtered covariances span eight orders of magnitude (condition ~1e8,
/// beyond f32's 1e7) while the states stay of order one. The standard form's
/// `C = Q - K H Q` then cancels to rounding noise in f32.
pub fn ill_conditioned(seed: u64, scales: [f64; 3], rv: f64, damp: f64) -> kestrel::Model {
    let mut rng = StdRng::seed_from_u64(seed);
    let nx = 6;
    let mut f = DMatrix::zeros(nx, nx);
    let mut q = DMatrix::zeros(nx, nx);
    for (blk, s) in scales.iter().enumerate() {
        let o = 2 * blk;
        f[(o, o)] = damp;
        f[(o, o + 1)] = 1.0;
        f[(o + 1, o + 1)] = 0.8;
        q[(o, o)] = s / 3.0;
        q[(o, o + 1)] = s / 2.0;
        q[(o + 1, o)] = s / 2.0;
        q[(o + 1, o + 1)] = *s;
    }
    let mut h = DMatrix::zeros(3, nx);
    for i in 0..3 {
        for j in 0..3 {
            h[(i, 2 * j)] = if i == j {
                1.0
            } else {
                rng.gen_range(-0.3..0.3)
            };
        }
    }
    let r = DMatrix::identity(3, 3) * rv;
    let g = DMatrix::from_fn(nx, nx, |_, _| rng.gen_range(-1.0..1.0));
    let rot = g.qr().q();
    let f = &rot * f * rot.transpose();
    let q = &rot * q * rot.transpose();
    let q = (&q + q.transpose()) * 0.5;
    let h = h * rot.transpose();
    kestrel::Model::new(f, q, h, r, DVector::zeros(nx), DMatrix::identity(nx, nx)).unwrap()
}

/// Largest per-step relative difference `||a_k - b_k||_inf / max(||b_k||_inf, floor)`;
/// NaN is infinite, and the lengths must agree.
pub fn rel_err(a: &[f64], b: &[f64], per: usize, floor: f64) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.chunks(per)
        .zip(b.chunks(per))
        .map(|(x, y)| {
            let s = y.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(floor);
            x.iter().zip(y).fold(0.0f64, |m, (p, q)| {
                if (p - q).is_nan() {
                    f64::INFINITY
                } else {
                    m.max((p - q).abs())
                }
            }) / s
        })
        .fold(0.0, f64::max)
}
