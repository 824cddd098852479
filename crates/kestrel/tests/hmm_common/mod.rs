//! Shared by the HMM tests: random models and observations, and plain references
//! written here from the textbook (Rabiner 1989): the unscaled forward-backward in f64,
//! and enumeration of every path for tiny K and T.
#![allow(dead_code)]

use kestrel::hmm::{Emission, HiddenMarkovModel};
use kestrel::{Measurements, Real};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A random distribution over `n` outcomes (a few exact zeros when `zeros`).
pub fn dist(rng: &mut StdRng, n: usize, zeros: bool) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n).map(|_| rng.gen_range(0.05..1.0)).collect();
    if zeros && n > 1 {
        let i = rng.gen_range(0..n);
        v[i] = 0.0;
    }
    let s: f64 = v.iter().sum();
    v.iter().map(|x| x / s).collect()
}

/// A random model: `k` states, categorical with `m` symbols (`gauss = None`) or Gaussian
/// with `ny` components.
pub fn random_model(
    rng: &mut StdRng,
    k: usize,
    m: usize,
    gauss: Option<usize>,
) -> HiddenMarkovModel {
    let transition: Vec<f64> = (0..k).flat_map(|_| dist(rng, k, false)).collect();
    let initial = dist(rng, k, false);
    let emission = match gauss {
        None => Emission::Categorical {
            symbols: m,
            probs: (0..k).flat_map(|_| dist(rng, m, false)).collect(),
        },
        Some(ny) => {
            let means: Vec<f64> = (0..k * ny).map(|_| rng.gen_range(-2.0..2.0)).collect();
            let mut covs = Vec::new();
            for _ in 0..k {
                let g: Vec<f64> = (0..ny * ny).map(|_| rng.gen_range(-1.0..1.0)).collect();
                for i in 0..ny {
                    for j in 0..ny {
                        let mut s = if i == j { 0.5 } else { 0.0 };
                        for p in 0..ny {
                            s += g[i * ny + p] * g[j * ny + p];
                        }
                        covs.push(s);
                    }
                }
            }
            Emission::Gaussian { ny, means, covs }
        }
    };
    HiddenMarkovModel::new(transition, initial, emission).unwrap()
}

/// Observations drawn from the model (`b` tracks, `t` steps), a fraction `missing` NaN.
pub fn simulate<T: Real>(
    rng: &mut StdRng,
    m: &HiddenMarkovModel,
    b: usize,
    t: usize,
    missing: f64,
) -> Measurements<T> {
    let k = m.states();
    let ny = m.ny();
    let draw = |rng: &mut StdRng, p: &[f64]| -> usize {
        let u: f64 = rng.gen();
        let mut c = 0.0;
        for (i, &pi) in p.iter().enumerate() {
            c += pi;
            if u < c {
                return i;
            }
        }
        p.len() - 1
    };
    let mut data = Vec::with_capacity(b * t * ny);
    for _ in 0..b {
        let mut x = draw(rng, m.initial());
        for s in 0..t {
            if s > 0 {
                x = draw(rng, &m.transition()[x * k..(x + 1) * k]);
            }
            let miss = rng.gen::<f64>() < missing;
            match m.emission() {
                Emission::Categorical { symbols, probs } => {
                    let c = draw(rng, &probs[x * symbols..(x + 1) * symbols]);
                    data.push(if miss { T::nan() } else { T::of(c as f64) });
                }
                Emission::Gaussian { ny, means, covs } => {
                    let ny = *ny;
                    let n: Vec<f64> = (0..ny)
                        .map(|_| rand_distr::Distribution::sample(&rand_distr::StandardNormal, rng))
                        .collect();
                    let l = chol(&covs[x * ny * ny..(x + 1) * ny * ny], ny);
                    for i in 0..ny {
                        let mut v = means[x * ny + i];
                        for j in 0..=i {
                            v += l[i * ny + j] * n[j];
                        }
                        data.push(if miss { T::nan() } else { T::of(v) });
                    }
                }
            }
        }
    }
    Measurements::new(b, t, ny, data).unwrap()
}

fn chol(a: &[f64], n: usize) -> Vec<f64> {
    let m = nalgebra::DMatrix::from_row_slice(n, n, a);
    let l = m.cholesky().expect("SPD").l();
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = l[(i, j)];
        }
    }
    out
}

/// `p(y | x = s)` from the definitions (NaN anywhere: 1).
pub fn density(m: &HiddenMarkovModel, y: &[f64], s: usize) -> f64 {
    if y.iter().any(|v| v.is_nan()) {
        return 1.0;
    }
    match m.emission() {
        Emission::Categorical { symbols, probs } => probs[s * symbols + y[0] as usize],
        Emission::Gaussian { ny, means, covs } => {
            let ny = *ny;
            let c =
                nalgebra::DMatrix::from_row_slice(ny, ny, &covs[s * ny * ny..(s + 1) * ny * ny]);
            let d = nalgebra::DVector::from_fn(ny, |i, _| y[i] - means[s * ny + i]);
            let q = (d.transpose() * c.clone().try_inverse().unwrap() * &d)[(0, 0)];
            (-0.5 * q).exp()
                / ((2.0 * std::f64::consts::PI).powi(ny as i32) * c.determinant()).sqrt()
        }
    }
}

/// The textbook forward-backward of one track in f64, unscaled: (filtered, smoothed,
/// per-step log-likelihoods).
pub fn textbook(m: &HiddenMarkovModel, y: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let k = m.states();
    let ny = m.ny();
    let t = y.len() / ny;
    let a = m.transition();
    let e = |s: usize, x: usize| density(m, &y[s * ny..(s + 1) * ny], x);
    let mut alpha = vec![0.0; t * k];
    for s in 0..t {
        for x in 0..k {
            let prior = if s == 0 {
                m.initial()[x]
            } else {
                (0..k).map(|z| alpha[(s - 1) * k + z] * a[z * k + x]).sum()
            };
            alpha[s * k + x] = prior * e(s, x);
        }
    }
    let mut beta = vec![1.0; t * k];
    for s in (0..t.saturating_sub(1)).rev() {
        for x in 0..k {
            beta[s * k + x] = (0..k)
                .map(|z| a[x * k + z] * e(s + 1, z) * beta[(s + 1) * k + z])
                .sum();
        }
    }
    let mut filt = vec![0.0; t * k];
    let mut smooth = vec![0.0; t * k];
    let mut ll = vec![0.0; t];
    let mut prev = 0.0;
    for s in 0..t {
        let z: f64 = alpha[s * k..(s + 1) * k].iter().sum();
        let zs: f64 = (0..k).map(|x| alpha[s * k + x] * beta[s * k + x]).sum();
        for x in 0..k {
            filt[s * k + x] = alpha[s * k + x] / z;
            smooth[s * k + x] = alpha[s * k + x] * beta[s * k + x] / zs;
        }
        ll[s] = z.ln() - prev;
        prev = z.ln();
    }
    (filt, smooth, ll)
}

/// Every path's log-probability jointly with `y`: (log p(y), the optimal paths' log
/// probability, the path chosen by the documented tie rule among those within `tie`
/// of the best: smallest last state, then the smallest before it, ...).
pub fn brute_force(m: &HiddenMarkovModel, y: &[f64], tie: f64) -> (f64, f64, Vec<usize>) {
    let k = m.states();
    let ny = m.ny();
    let t = y.len() / ny;
    let a = m.transition();
    let n = k.pow(t as u32);
    let mut scores = Vec::with_capacity(n);
    let mut total = 0.0;
    for code in 0..n {
        let path: Vec<usize> = (0..t).map(|s| (code / k.pow(s as u32)) % k).collect();
        let mut p = m.initial()[path[0]] * density(m, &y[..ny], path[0]);
        for s in 1..t {
            p *= a[path[s - 1] * k + path[s]] * density(m, &y[s * ny..(s + 1) * ny], path[s]);
        }
        total += p;
        scores.push((p.ln(), path));
    }
    let best = scores.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
    let mut cands: Vec<Vec<usize>> = scores
        .into_iter()
        .filter(|(s, _)| *s >= best - tie * (1.0 + best.abs()))
        .map(|(_, p)| p)
        .collect();
    cands.sort_by(|p, q| p.iter().rev().cmp(q.iter().rev()));
    (total.ln(), best, cands.swap_remove(0))
}

/// The largest absolute difference.
pub fn max_diff<T: Real>(a: &[T], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x.to_f64() - y).abs())
        .fold(0.0, f64::max)
}
