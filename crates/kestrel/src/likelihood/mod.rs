//! Per-step marginal log-likelihoods `log p(z_t | z_0:t-1)` of long series.
//!
//! Three methods compute the same quantity:
//!
//! - [`Method::Exact`]: the sequential Kalman filter (the recursion of `crate::kalman`,
//!   keeping only the state of the current step), optionally switching to the
//!   steady-state gain once the predicted covariance has converged (the trick of Moore's
//!   sigvisa filter), which makes a time-invariant model's step cost a few dot products.
//! - [`Method::Parallel`]: on the CPU the associative-scan filter of `crate::parallel`
//!   (Sarkka & Garcia-Fernandez). On a GPU the data-free covariance recursion runs once
//!   on the host in `f64` until it reaches its fixed point ([`schedule`]) and the mean
//!   recursion, affine in the state, runs as a chunked parallel scan (`kernels/scan.cu`;
//!   for a companion `F` each step is a shift and one dot product): no covariance and no
//!   filtered moment is kept per step, so the device moves little more than `z` and the
//!   output.
//! - [`Method::Window`]: the windowed ("splash") filter of Lin, Moore & Russell
//!   (Algorithm 2): the value at step `t` comes from a Kalman filter over the `N` most
//!   recent measurements `z_{t-N+1..t}` started from a vague prior `N(0, V I)` placed as
//!   the predicted state at `t-N+1`. Where the window would start before step 0
//!   (`t < N-1`) the filter starts from the model's own prior at step 0, so those steps
//!   are exact. [`Method::WindowAuto`] picks the smallest `N` whose error bound
//!   (`docs/likelihood.md`, [`bound`]) is below a tolerance.
//!
//! The windowed filter's covariance recursion does not depend on the data, and its mean
//! recursion is linear in the window's measurements: unrolled, the predicted measurement
//! of a window is `y^_t = c + sum_i G_i z_{t-N+1+i}`, a filter with `N-1` taps computed
//! once per model (and once per pattern of missing values) in `f64` ([`taps`]). Each step
//! then costs `N ny^2` multiply-adds on any device, whatever the state dimension.

pub mod bound;
mod companion;
#[cfg(feature = "cuda")]
#[doc(hidden)]
pub mod cuda;
mod exact;
pub mod schedule;
pub mod taps;
mod varying;
mod window;

use crate::data::Measurements;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::Model;
use crate::scan::ScanAlgorithm;
use rayon::prelude::*;
use std::str::FromStr;

pub use bound::{choose_window, window_bound, WindowChoice};

/// Default variance of the windowed filter's vague start.
pub const DEFAULT_VAGUE: f64 = 1e6;
/// Default per-step tolerance of `window:auto`.
pub const DEFAULT_TOL: f64 = 1e-6;

/// How to compute the per-step log-likelihoods.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// The sequential Kalman filter.
    Exact,
    /// The associative-scan (parallel-in-time) filter.
    Parallel,
    /// The windowed filter with a window of `N` steps.
    Window(usize),
    /// The windowed filter with the smallest window whose error bound is below `TOL`.
    WindowAuto(f64),
}

impl FromStr for Method {
    type Err = Error;

    /// `exact`, `parallel`, `window:N` (N >= 1), `window:auto` or `window:auto:TOL` (TOL > 0).
    fn from_str(s: &str) -> Result<Method> {
        let bad = |msg: String| Error::input(format!("method \"{s}\": {msg}"));
        match s {
            "exact" => return Ok(Method::Exact),
            "parallel" => return Ok(Method::Parallel),
            "window:auto" => return Ok(Method::WindowAuto(DEFAULT_TOL)),
            _ => {}
        }
        if let Some(tol) = s.strip_prefix("window:auto:") {
            let v: f64 = tol
                .parse()
                .map_err(|_| bad(format!("tolerance \"{tol}\" is not a number")))?;
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(format!("tolerance must be positive, got {tol}")));
            }
            return Ok(Method::WindowAuto(v));
        }
        if let Some(n) = s.strip_prefix("window:") {
            let v: i64 = n.parse().map_err(|_| {
                bad(format!(
                    "window length \"{n}\" is not an integer (window:N or window:auto[:TOL])"
                ))
            })?;
            if v < 1 {
                return Err(bad(format!("window length must be at least 1, got {v}")));
            }
            return Ok(Method::Window(v as usize));
        }
        Err(bad(
            "expected exact, parallel, window:N or window:auto[:TOL]".into(),
        ))
    }
}

/// Options of [`loglik`].
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Variance `V` of the windowed filter's vague start `N(0, V I)`.
    pub vague: f64,
    /// `Exact` on the CPU: switch to the steady-state gain once every entry of the
    /// predicted covariance changes by less than `tol` times its largest entry between
    /// two steps (and back to the full recursion after a missing measurement).
    pub steady: Option<f64>,
    /// Scan algorithm of `Parallel`.
    pub scan: ScanAlgorithm,
}

setters!(Options {
    with_vague(vague: f64, "Sets [`Options::vague`]."),
    with_steady(steady: Option<f64>, "Sets [`Options::steady`]."),
    with_scan(scan: ScanAlgorithm, "Sets [`Options::scan`]."),
});

impl Default for Options {
    fn default() -> Self {
        Options {
            vague: DEFAULT_VAGUE,
            steady: None,
            scan: ScanAlgorithm::Fastest,
        }
    }
}

/// Per-step log-likelihoods `[tracks][steps]` and how they were computed.
#[derive(Clone, Debug)]
pub struct LogLik<T> {
    /// Number of tracks.
    pub tracks: usize,
    /// Steps per track.
    pub steps: usize,
    /// `log p(z_t | z_0:t-1)` of track `b` at `values[b * steps + t]`; 0 where `z_t` is
    /// missing.
    pub values: Vec<T>,
    /// The window length used (windowed methods; for `window:auto`, lengthened by the
    /// most missing values any window holds, see [`widen_for_missing`]).
    pub window: Option<usize>,
    /// The per-step error bound of the window used (windowed methods), see [`bound`].
    pub bound: Option<f64>,
}

impl<T: Real> LogLik<T> {
    /// Total log-likelihood of track `b` (summed in `f64`).
    pub fn total(&self, b: usize) -> f64 {
        self.values[b * self.steps..(b + 1) * self.steps]
            .iter()
            .map(|v| v.to_f64())
            .sum()
    }
}

/// Checks that `bytes` of working memory (`None`: an overflowing size) fit in memory
/// before allocating them (the shared [`crate::limits`] check).
pub(crate) fn check_memory(bytes: Option<usize>, what: &str) -> Result<()> {
    crate::limits::check_bytes(what, bytes.map_or(u128::MAX, |b| b as u128))
}

fn check_input<T: Real>(model: &Model, z: &Measurements<T>, opts: &Options) -> Result<()> {
    crate::model::check_fits(model, z.ny, z.steps)?;
    if z.steps == 0 || z.tracks == 0 {
        return Err(Error::input("measurements have no steps"));
    }
    if !(opts.vague.is_finite() && opts.vague > 0.0) {
        return Err(Error::input(format!(
            "the vague variance must be finite and positive, got {}",
            opts.vague
        )));
    }
    if let Some(tol) = opts.steady {
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(Error::input(format!(
                "the steady-state tolerance must be finite and non-negative, got {tol}"
            )));
        }
    }
    z.check_finite()
}

/// The largest `|z - d|` over all measurements: the scale of the state estimates that
/// the window bound needs (see [`bound`]).
pub fn data_scale<T: Real>(model: &Model, z: &Measurements<T>) -> f64 {
    let ny = z.ny;
    let d: Vec<f64> = model.d.iter().copied().collect();
    // In parallel over blocks of whole rows (a row with a NaN does not count).
    z.data
        .par_chunks(ny * 4096)
        .map(|block| {
            let mut m = 0.0f64;
            for v in block.chunks(ny) {
                if v.iter().any(|x| x.is_nan_value()) {
                    continue;
                }
                for (a, x) in v.iter().enumerate() {
                    m = m.max((x.to_f64() - d[a]).abs());
                }
            }
            m
        })
        .reduce(|| 0.0, f64::max)
}

/// [`loglik`] for a model file of any form: a time-invariant model goes to [`loglik`]; a
/// time-varying one to the filters' own log-likelihoods (exact: the sequential filter on
/// `device`; parallel: the parallel-in-time filter) or, for `window:N` on the CPU, a
/// windowed filter over the per-step matrices (`window:auto` and the steady-state switch
/// need a time-invariant model).
pub fn loglik_linear<T: Real>(
    device: Device,
    model: &crate::model::LinearModel,
    z: &Measurements<T>,
    method: Method,
    opts: &Options,
) -> Result<LogLik<T>> {
    match model {
        crate::model::LinearModel::Invariant(m) => loglik(device, m, z, method, opts),
        crate::model::LinearModel::Varying { model, .. } => {
            varying::loglik(device, model, z, method, opts)
        }
    }
}

/// Per-step log-likelihoods of every track of `z` on `device` with `method`.
pub fn loglik<T: Real>(
    device: Device,
    model: &Model,
    z: &Measurements<T>,
    method: Method,
    opts: &Options,
) -> Result<LogLik<T>> {
    check_input(model, z, opts)?;
    let n = z
        .tracks
        .checked_mul(z.steps)
        .ok_or_else(|| Error::input("tracks x steps overflows"))?;
    check_memory(n.checked_mul(std::mem::size_of::<T>()), "the output")?;
    let (values, window, bound) = match method {
        Method::Exact => {
            if let Device::Cuda(_) = device {
                return Err(Error::Unsupported(
                    "the exact sequential filter runs on the CPU; on a GPU use the parallel or windowed method"
                        .into(),
                ));
            }
            let mut out = vec![T::zero(); n];
            exact::run(model, z, opts.steady, &mut out)?;
            (out, None, None)
        }
        Method::Parallel => match device {
            // The covariance recursion on the host, the mean recursion as a scan.
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => (cuda::exact(i, model, z)?, None, None),
            _ => (parallel(device, model, z, opts.scan)?, None, None),
        },
        Method::Window(w) => {
            if w < 1 {
                return Err(Error::input(format!(
                    "window length must be at least 1, got {w}"
                )));
            }
            // A window longer than the tracks starts before step 0 at every step, where
            // the windowed filter is exact: the same values as a window of `steps + 1`,
            // without work (or memory) that grows with a length taken from input.
            let w = w.min(z.steps.saturating_add(1));
            let b = window_bound(model, w, opts.vague, data_scale(model, z)).ok();
            (window::run(device, model, z, w, opts.vague)?, Some(w), b)
        }
        Method::WindowAuto(tol) => {
            if !(tol.is_finite() && tol > 0.0) {
                return Err(Error::input(format!(
                    "window:auto: the tolerance must be positive, got {tol}"
                )));
            }
            let c = choose_window(model, tol, opts.vague, data_scale(model, z))?;
            let n = widen_for_missing(model, z, c.window, c.rho);
            (
                window::run(device, model, z, n, opts.vague)?,
                Some(n),
                Some(c.bound),
            )
        }
    };
    Ok(LogLik {
        tracks: z.tracks,
        steps: z.steps,
        values,
        window,
        bound,
    })
}

/// The window `window:auto` uses when measurements are missing. A step without a
/// measurement does not contract the vague start's error (by `rho`, the closed loop's
/// spectral radius) but may grow it by up to `|F|_2`, and the gain after a gap needs
/// about one more step to settle: each missing value in a window is paid for with
/// `2 + ln(max(|F|_2, 1)) / ln(1/rho)` extra steps, until every window of the data holds
/// enough (at most the series' length, where every step is exact). This is a rule of
/// thumb checked in the tests (missing at random and every 20 steps), not a bound.
pub fn widen_for_missing<T: Real>(model: &Model, z: &Measurements<T>, n: usize, rho: f64) -> usize {
    let norm_f = model.f.clone().singular_values().max().max(1.0);
    let cost = if rho > 0.0 && rho < 1.0 {
        2.0 + norm_f.ln() / (1.0 / rho).ln()
    } else {
        2.0
    };
    if !z.data.par_iter().any(|x| x.is_nan_value()) {
        // Nothing missing: nothing to pay for.
        return n;
    }
    let steps = z.steps;
    let missing: Vec<bool> = z
        .data
        .chunks(z.ny)
        .map(|v| v.iter().any(|x| x.is_nan_value()))
        .collect();
    let most_missing = |w: usize| -> usize {
        let mut most = 0;
        for b in 0..z.tracks {
            let m = &missing[b * steps..(b + 1) * steps];
            let mut count = 0;
            for t in 0..steps {
                count += m[t] as usize;
                if t >= w {
                    count -= m[t - w] as usize;
                }
                most = most.max(count);
            }
        }
        most
    };
    let mut w = n;
    while w < steps {
        let next = n + (cost * most_missing(w) as f64).ceil() as usize;
        if next <= w {
            break;
        }
        w = next;
    }
    w.min(steps.max(n))
}

/// The parallel-in-time filter's log-likelihoods (its moments are dropped).
fn parallel<T: Real>(
    device: Device,
    model: &Model,
    z: &Measurements<T>,
    scan: ScanAlgorithm,
) -> Result<Vec<T>> {
    let nx = model.nx();
    // Filtered moments plus the scan's elements (A, b, C, eta, J) per step.
    let per_step = (nx + nx * nx + 1) + (3 * nx * nx + 2 * nx);
    let bytes = z
        .tracks
        .checked_mul(z.steps)
        .and_then(|n| n.checked_mul(per_step))
        .and_then(|n| n.checked_mul(std::mem::size_of::<T>()));
    check_memory(bytes, "the parallel filter")?;
    let est = crate::parallel::filter(device, model, z, scan)?;
    est.loglik
        .ok_or_else(|| Error::Cuda("the parallel filter returned no log-likelihoods".into()))
}
