//! Emissions `p(y | x)`: categorical codes or Gaussian vectors, and the model converted
//! once to the precision of a run ([`Prepared`]).

use super::HiddenMarkovModel;
use crate::error::{Error, Result};
use crate::linalg::Real;

/// How a state emits its observation.
#[derive(Clone, Debug, PartialEq)]
pub enum Emission {
    /// `probs` (`K x M`, row-major, rows summing to 1): `p(y = c | x = i) = probs[i][c]`;
    /// observations are integer codes `0..M-1`.
    Categorical {
        /// Symbols `M`.
        symbols: usize,
        /// `K x M`, row-major.
        probs: Vec<f64>,
    },
    /// `y | x = i ~ N(means[i], covs[i])`.
    Gaussian {
        /// Components `ny` of an observation.
        ny: usize,
        /// `K x ny`, row-major.
        means: Vec<f64>,
        /// `K x ny x ny`, row-major, each symmetric positive definite.
        covs: Vec<f64>,
    },
}

impl Emission {
    /// `categorical` or `gaussian`.
    pub fn kind(&self) -> &'static str {
        match self {
            Emission::Categorical { .. } => "categorical",
            Emission::Gaussian { .. } => "gaussian",
        }
    }

    /// Components of an observation.
    pub fn ny(&self) -> usize {
        match self {
            Emission::Categorical { .. } => 1,
            Emission::Gaussian { ny, .. } => *ny,
        }
    }

    pub(super) fn check(&self, k: usize) -> Result<()> {
        match self {
            Emission::Categorical { symbols, probs } => {
                let m = *symbols;
                if m == 0 || probs.len() != k * m {
                    return Err(Error::model(
                        "emission.probs",
                        format!(
                            "has {} entries, expected {k} x M (one row per state, M >= 1 symbols)",
                            probs.len()
                        ),
                    ));
                }
                for i in 0..k {
                    super::check_distribution(
                        &format!("emission.probs row {i}"),
                        &probs[i * m..(i + 1) * m],
                    )?;
                }
            }
            Emission::Gaussian { ny, means, covs } => {
                let ny = *ny;
                if ny == 0 {
                    return Err(Error::model(
                        "emission.means",
                        "observations have no components",
                    ));
                }
                crate::limits::check_dim("emission.means", ny)?;
                if means.len() != k * ny {
                    return Err(Error::model(
                        "emission.means",
                        format!("has {} entries, expected {k} x {ny}", means.len()),
                    ));
                }
                if covs.len() != k * ny * ny {
                    return Err(Error::model(
                        "emission.covs",
                        format!("has {} entries, expected {k} x {ny} x {ny}", covs.len()),
                    ));
                }
                if let Some(i) = means.iter().position(|v| !v.is_finite()) {
                    return Err(Error::model(
                        "emission.means",
                        format!("state {}, component {}: not finite", i / ny, i % ny),
                    ));
                }
                for s in 0..k {
                    let c = &covs[s * ny * ny..(s + 1) * ny * ny];
                    cholesky(c, ny).ok_or_else(|| {
                        Error::model(
                            format!("emission.covs[{s}]"),
                            "is not symmetric positive definite",
                        )
                    })?;
                }
            }
        }
        Ok(())
    }

    /// True for a value an observation may hold (NaN: missing).
    pub(super) fn accepts(&self, v: f64) -> bool {
        match self {
            _ if v.is_nan() => true,
            Emission::Categorical { symbols, .. } => {
                v.is_finite() && v >= 0.0 && v == v.trunc() && v < *symbols as f64
            }
            Emission::Gaussian { .. } => v.is_finite(),
        }
    }

    /// Why [`Emission::accepts`] refused `v`.
    pub(super) fn why_not(&self, v: f64) -> String {
        match self {
            _ if !v.is_finite() => format!("{v} is not a finite value (a missing one is NaN)"),
            Emission::Categorical { symbols, .. } if v == v.trunc() => format!(
                "code {v} is out of range (the emission has {symbols} symbols, codes 0..{})",
                symbols - 1
            ),
            Emission::Categorical { .. } => format!("code {v} is not an integer"),
            Emission::Gaussian { .. } => format!("{v} is not accepted"),
        }
    }
}

/// The lower Cholesky factor of a symmetric positive definite `n x n` matrix, or `None`.
pub(crate) fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    for i in 0..n {
        for j in 0..i {
            let (x, y) = (a[i * n + j], a[j * n + i]);
            if !x.is_finite() || (x - y).abs() > 1e-9 * (1.0 + x.abs().max(y.abs())) {
                return None;
            }
        }
    }
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i * n + j];
            for p in 0..j {
                s -= l[i * n + p] * l[j * n + p];
            }
            if i == j {
                if !(s > 0.0 && s.is_finite()) {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// The model in precision `T`, with what every step reads precomputed: logarithms of the
/// transition and initial probabilities, the categorical log-probabilities by code
/// (`[M][K]`), the Gaussian Cholesky factors and normalisers.
pub struct Prepared<T> {
    /// States.
    pub k: usize,
    /// Components of an observation.
    pub ny: usize,
    /// `K x K`, row = from.
    pub a: Vec<T>,
    /// `ln a` (`-inf` for zeros; on the Viterbi grid in f64).
    pub ln_a: Vec<T>,
    /// The initial distribution.
    pub init: Vec<T>,
    /// `ln init`.
    pub ln_init: Vec<T>,
    /// Categorical: `ln p(c | i)` at `[c][i]`; empty for Gaussian.
    pub ln_probs: Vec<T>,
    /// Gaussian: means `[K][ny]`, Cholesky factors `[K][ny][ny]`, normalisers `[K]`
    /// (`-ny/2 ln 2 pi - sum ln L_jj`).
    pub means: Vec<T>,
    /// See `means`.
    pub chol: Vec<T>,
    /// See `means`.
    pub norm: Vec<T>,
}

fn ln(v: f64) -> f64 {
    if v > 0.0 {
        v.ln()
    } else {
        f64::NEG_INFINITY
    }
}

impl<T: Real> Prepared<T> {
    /// Converts `model`.
    pub fn new(model: &HiddenMarkovModel) -> Self {
        let c = |v: &[f64]| -> Vec<T> { v.iter().map(|&x| T::of(x)).collect() };
        // Logarithms of the model go on the Viterbi grid (exact sums, see viterbi.rs).
        let cl = |v: &[f64]| -> Vec<T> {
            v.iter()
                .map(|&x| T::of(super::viterbi::on_grid(ln(x))))
                .collect()
        };
        let k = model.k;
        let mut p = Prepared {
            k,
            ny: model.ny(),
            a: c(&model.transition),
            ln_a: cl(&model.transition),
            init: c(&model.initial),
            ln_init: cl(&model.initial),
            ln_probs: Vec::new(),
            means: Vec::new(),
            chol: Vec::new(),
            norm: Vec::new(),
        };
        match &model.emission {
            Emission::Categorical { symbols, probs } => {
                let m = *symbols;
                p.ln_probs = (0..m * k)
                    .map(|i| T::of(ln(probs[(i % k) * m + i / k])))
                    .collect();
            }
            Emission::Gaussian { ny, means, covs } => {
                let ny = *ny;
                p.means = c(means);
                for s in 0..k {
                    // Checked positive definite when the model was made.
                    let l = cholesky(&covs[s * ny * ny..(s + 1) * ny * ny], ny)
                        .unwrap_or_else(|| vec![f64::NAN; ny * ny]);
                    let logdet: f64 = (0..ny).map(|j| l[j * ny + j].ln()).sum();
                    p.norm.push(T::of(
                        -0.5 * ny as f64 * (2.0 * std::f64::consts::PI).ln() - logdet,
                    ));
                    p.chol.extend(l.iter().map(|&x| T::of(x)));
                }
            }
        }
        p
    }

    /// `ln p(y | x = i)` for every state into `out`; false (and `out` untouched) when `y`
    /// is missing. `y` was checked ([`super::check_observations`]).
    #[inline]
    pub fn log_emission(&self, y: &[T], out: &mut [T]) -> bool {
        if y.iter().any(|v| v.is_nan_value()) {
            return false;
        }
        let k = self.k;
        if !self.ln_probs.is_empty() {
            let c = y[0].to_f64() as usize;
            out.copy_from_slice(&self.ln_probs[c * k..(c + 1) * k]);
            return true;
        }
        let ny = self.ny;
        for (s, o) in out.iter_mut().enumerate() {
            let l = &self.chol[s * ny * ny..(s + 1) * ny * ny];
            let mu = &self.means[s * ny..(s + 1) * ny];
            let mut maha = T::zero();
            // Forward substitution L v = y - mu, one component at a time.
            let mut v = [T::zero(); 16];
            let mut big = Vec::new();
            let v: &mut [T] = if ny <= 16 {
                &mut v[..ny]
            } else {
                big.resize(ny, T::zero());
                &mut big
            };
            for a in 0..ny {
                let mut r = y[a] - mu[a];
                for b in 0..a {
                    r -= l[a * ny + b] * v[b];
                }
                r /= l[a * ny + a];
                v[a] = r;
                maha += r * r;
            }
            *o = self.norm[s] - T::of(0.5) * maha;
        }
        true
    }

    /// The emission likelihoods scaled by their largest: `e[i] = p(y | i) / max_j p(y | j)`
    /// into `e`, and `ln max_j p(y | j)` returned (0 with `e = 1` for a missing `y`, 0
    /// with `e = 0` when no state can emit `y`).
    #[inline]
    pub fn scaled_emission(&self, y: &[T], e: &mut [T]) -> T {
        if !self.log_emission(y, e) {
            e.fill(T::one());
            return T::zero();
        }
        let shift = e
            .iter()
            .copied()
            .fold(T::of(f64::NEG_INFINITY), |m, v| if v > m { v } else { m });
        let shift = if shift.is_finite_value() {
            shift
        } else {
            T::zero()
        };
        for v in e.iter_mut() {
            *v = (*v - shift).exp();
        }
        shift
    }
}
