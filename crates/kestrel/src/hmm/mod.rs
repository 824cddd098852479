//! Hidden Markov models: filtering, smoothing, per-step likelihoods and the Viterbi path
//! of a finite-state Markov chain observed through categorical or Gaussian emissions,
//! batched over many tracks, sequential or parallel in time.
//!
//! The parallel forms are Sarkka & Garcia-Fernandez's general Bayesian filter and
//! smoother (*Temporal parallelization of Bayesian smoothers*, IEEE TAC 2021,
//! Definitions 1-2) with a finite state space, as in Hassan, Sarkka & Garcia-Fernandez,
//! *Temporal parallelization of inference in hidden Markov models* (IEEE TSP 2021):
//! the filtering element of step `t` is the pair (`f_t(z, x) = p(x_t = x | y_t, x_{t-1} = z)`,
//! `g_t(z) = p(y_t | x_{t-1} = z)`), a row-stochastic `K x K` matrix and a vector kept in
//! logarithms; the smoothing element is `E_t(z, x) = p(x_t = x | y_0..t, x_{t+1} = z)`;
//! the Viterbi path comes from a max-product (max-plus in logarithms) scan and a scan of
//! back-pointer maps (`parallel.rs`). Every quantity stays normalised, so `T = 10^6`
//! steps neither underflow nor lose the per-step log-likelihoods to cancellation.
//!
//! Conventions. `initial` is the state's distribution at step 0 *before* observation 0;
//! `transition[i][j] = p(x_t = j | x_{t-1} = i)` (row = from). An observation with a NaN
//! (any component, for the Gaussian kind) is missing: that step only predicts and its
//! log-likelihood is 0. Categorical observations are integer codes `0..M-1` stored as
//! numbers; a code that is not an integer in range is an error naming track and step.
//!
//! Viterbi ties: among paths of equal probability the one returned has the smallest
//! last state, then (given it) the smallest state before it, and so on backwards (each
//! back-pointer and the final state are the smallest maximising index). The scores are
//! sums of logarithms rounded to a grid of `2^-26` and added exactly in f64 (see
//! `viterbi.rs`), so the sequential and parallel forms (and the GPU) compute the same
//! scores bit for bit and agree on every tie.

mod emission;
#[cfg(feature = "io")]
mod file;
mod forward_backward;
mod parallel;
mod viterbi;

#[cfg(feature = "cuda")]
pub mod cuda;

pub use emission::Emission;
#[cfg(feature = "io")]
pub use file::{hmm_from_toml, load_hmm};
pub use forward_backward::{filter_track, smooth_track};
pub use parallel::{ComposeOp, FilterElemOp, MaxPlusOp, SmoothElemOp};
pub use viterbi::viterbi_track;

use crate::data::Measurements;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::scan::{Exec, ScanAlgorithm};
use emission::Prepared;
use rayon::prelude::*;

/// Rows of `transition` and `initial` must sum to 1 within this.
pub const SUM_TOL: f64 = 1e-6;

/// A hidden Markov model with `k` states.
#[derive(Clone, Debug, PartialEq)]
pub struct HiddenMarkovModel {
    k: usize,
    /// `K x K`, row-major, row = from.
    transition: Vec<f64>,
    /// `K`: the distribution at step 0 before observation 0.
    initial: Vec<f64>,
    emission: Emission,
}

fn check_distribution(field: &str, v: &[f64]) -> Result<()> {
    if let Some(i) = v.iter().position(|x| !x.is_finite() || *x < 0.0) {
        return Err(Error::model(
            field,
            format!(
                "entry {i} is {}: probabilities must be finite and non-negative",
                v[i]
            ),
        ));
    }
    let s: f64 = v.iter().sum();
    if (s - 1.0).abs() > SUM_TOL {
        return Err(Error::model(
            field,
            format!("sums to {s}, not 1 (within {SUM_TOL:e})"),
        ));
    }
    Ok(())
}

impl HiddenMarkovModel {
    /// A model from its `K x K` transition matrix (row-major, row = from, rows summing to
    /// 1), initial distribution (`K`, summing to 1) and emission; checked.
    pub fn new(transition: Vec<f64>, initial: Vec<f64>, emission: Emission) -> Result<Self> {
        let k = initial.len();
        if k == 0 {
            return Err(Error::model("initial", "has no states"));
        }
        crate::limits::check_dim("initial", k)?;
        if transition.len() != k * k {
            return Err(Error::model(
                "transition",
                format!(
                    "has {} entries, expected {k} x {k} (initial has {k} states)",
                    transition.len()
                ),
            ));
        }
        for i in 0..k {
            check_distribution(
                &format!("transition row {i}"),
                &transition[i * k..(i + 1) * k],
            )?;
        }
        check_distribution("initial", &initial)?;
        emission.check(k)?;
        Ok(HiddenMarkovModel {
            k,
            transition,
            initial,
            emission,
        })
    }

    /// Number of states.
    pub fn states(&self) -> usize {
        self.k
    }
    /// The transition matrix, row-major, row = from.
    pub fn transition(&self) -> &[f64] {
        &self.transition
    }
    /// The distribution at step 0 before observation 0.
    pub fn initial(&self) -> &[f64] {
        &self.initial
    }
    /// The emission.
    pub fn emission(&self) -> &Emission {
        &self.emission
    }
    /// Components of one observation (1 for categorical codes).
    pub fn ny(&self) -> usize {
        self.emission.ny()
    }
}

/// Sequential (each track's steps in order) or parallel in time (associative scans).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HmmMethod {
    /// Forward-backward and Viterbi, step after step.
    #[default]
    Sequential,
    /// The associative scans of Definitions 1-2 and the max-product scan.
    Parallel,
}

impl HmmMethod {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            HmmMethod::Sequential => "sequential",
            HmmMethod::Parallel => "parallel",
        }
    }

    /// From its name.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "sequential" => Ok(HmmMethod::Sequential),
            "parallel" => Ok(HmmMethod::Parallel),
            _ => Err(Error::Unsupported(format!(
                "unknown method \"{s}\" (expected sequential or parallel)"
            ))),
        }
    }
}

/// Options of [`hmm_on`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HmmOptions {
    /// Sequential or parallel.
    pub method: HmmMethod,
    /// The scan algorithm of the parallel method (CPU; the GPU runs its chunked scan,
    /// `fastest`).
    pub scan: ScanAlgorithm,
}

setters!(HmmOptions {
    with_method(method: HmmMethod, "Sets the method."),
    with_scan(scan: ScanAlgorithm, "Sets the scan algorithm of the parallel method."),
});

/// Everything [`hmm_on`] computes, batch-first.
#[derive(Clone, Debug, PartialEq)]
pub struct HmmOutput<T> {
    /// Tracks.
    pub tracks: usize,
    /// Steps.
    pub steps: usize,
    /// States.
    pub states: usize,
    /// `[B][T][K]`: `p(x_t | y_0..t)`.
    pub filtered: Vec<T>,
    /// `[B][T][K]`: `p(x_t | y_0..T-1)`.
    pub smoothed: Vec<T>,
    /// `[B][T]`: `log p(y_t | y_0..t-1)` (0 for a missing observation).
    pub loglik: Vec<T>,
    /// `[B][T]`: the Viterbi path.
    pub path: Vec<i64>,
}

impl<T: Real> HmmOutput<T> {
    /// The total log-likelihood of track `b`.
    pub fn total_loglik(&self, b: usize) -> f64 {
        self.loglik[b * self.steps..(b + 1) * self.steps]
            .iter()
            .map(|v| v.to_f64())
            .sum()
    }
}

/// Checks that `obs` fits `model`: its components, and every categorical code an
/// integer in `0..M` (or NaN). Errors name the track and step.
pub fn check_observations<T: Real>(model: &HiddenMarkovModel, obs: &Measurements<T>) -> Result<()> {
    let ny = model.ny();
    if obs.ny() != ny {
        return Err(Error::input(format!(
            "observations have {} components per step, the model's {} emission takes {ny}",
            obs.ny(),
            model.emission.kind()
        )));
    }
    let steps = obs.steps();
    let bad = obs
        .data()
        .par_iter()
        .enumerate()
        .with_min_len(1 << 14)
        .find_first(|(_, v)| !model.emission.accepts(v.to_f64()));
    if let Some((i, v)) = bad {
        let (b, t) = (i / ny / steps.max(1), (i / ny) % steps.max(1));
        return Err(Error::input(format!(
            "observation at track {b}, step {t}: {}",
            model.emission.why_not(v.to_f64())
        )));
    }
    Ok(())
}

/// Filtered and smoothed distributions, per-step log-likelihoods and the Viterbi path of
/// every track of `obs` (`[B, T, ny]`), on `device`.
pub fn hmm_on<T: Real>(
    device: Device,
    model: &HiddenMarkovModel,
    obs: &Measurements<T>,
    opts: &HmmOptions,
) -> Result<HmmOutput<T>> {
    check_observations(model, obs)?;
    match device {
        Device::Cpu => run_cpu(model, obs, opts),
        #[cfg(feature = "cuda")]
        Device::Cuda(n) => cuda::run(n, model, obs, opts),
        #[cfg(feature = "cuda")]
        Device::AllCuda => cuda::run(0, model, obs, opts),
        #[cfg(not(feature = "cuda"))]
        _ => Err(Error::Unsupported(format!(
            "{device}: this build of kestrel has no GPU support (feature `cuda`)"
        ))),
    }
}

/// The error of an observation impossible under the model.
pub(crate) fn impossible(track: usize, step: usize) -> Error {
    Error::Input {
        msg: format!(
            "observation at track {track}, step {step} has probability 0 under the model given the observations before it"
        ),
    }
}

fn run_cpu<T: Real>(
    model: &HiddenMarkovModel,
    obs: &Measurements<T>,
    opts: &HmmOptions,
) -> Result<HmmOutput<T>> {
    let (b, steps, k) = (obs.tracks(), obs.steps(), model.k);
    use crate::limits::{check, Size};
    let n = check(
        "HMM outputs",
        &[Size("tracks", b), Size("steps", steps), Size("states", k)],
        2 * std::mem::size_of::<T>(),
    )?;
    let mut out = HmmOutput {
        tracks: b,
        steps,
        states: k,
        filtered: crate::limits::filled("filtered distributions", n, T::zero())?,
        smoothed: crate::limits::filled("smoothed distributions", n, T::zero())?,
        loglik: crate::limits::filled("log-likelihoods", b * steps, T::zero())?,
        path: crate::limits::filled("Viterbi paths", b * steps, 0i64)?,
    };
    if b == 0 || steps == 0 {
        return Ok(out);
    }
    let p = Prepared::<T>::new(model);
    let p64 = Prepared::<f64>::new(model);
    let ny = model.ny();
    // Many tracks: one per task, each scanned serially; few: each scan on the pool.
    let many = b >= rayon::current_num_threads();
    let exec = if many { Exec::Serial } else { Exec::Rayon };
    let one = |tr: usize, f: &mut [T], s: &mut [T], l: &mut [T], path: &mut [i64]| -> Result<()> {
        let y = obs.track(tr);
        match opts.method {
            HmmMethod::Sequential => {
                forward_backward::filter_track(&p, y, ny, f, l).map_err(|t| impossible(tr, t))?;
                forward_backward::smooth_track(&p, f, s);
                viterbi::viterbi_track(&p64, y, ny, path);
            }
            HmmMethod::Parallel => {
                parallel::filter(&p, y, ny, f, l, opts.scan, exec)
                    .map_err(|t| impossible(tr, t))?;
                parallel::smooth(&p, f, s, opts.scan, exec);
                parallel::viterbi(&p64, y, ny, path, opts.scan, exec);
            }
        }
        Ok(())
    };
    let tk = steps * k;
    if many {
        out.filtered
            .par_chunks_mut(tk)
            .zip(out.smoothed.par_chunks_mut(tk))
            .zip(out.loglik.par_chunks_mut(steps))
            .zip(out.path.par_chunks_mut(steps))
            .enumerate()
            .try_for_each(|(tr, (((f, s), l), pa))| one(tr, f, s, l, pa))?;
    } else {
        for (tr, (((f, s), l), pa)) in out
            .filtered
            .chunks_mut(tk)
            .zip(out.smoothed.chunks_mut(tk))
            .zip(out.loglik.chunks_mut(steps))
            .zip(out.path.chunks_mut(steps))
            .enumerate()
        {
            one(tr, f, s, l, pa)?;
        }
    }
    Ok(out)
}
