//! The sequential Kalman filter and the Rauch-Tung-Striebel smoother on the CPU: the
//! reference every other path is tested against.
//!
//! Time convention: the prior `(x0, P0)` is the state at step 0 *before* the step-0
//! measurement; step 0 is an update of the prior, each later step is predict-then-update.
//! A measurement with a NaN in any component is missing: that step is predict only and its
//! log-likelihood term is 0.
//!
//! Two paths compute the same thing: `dense` (any size, time-varying models, one track
//! at a time) and `lanes` (time-invariant models of the common tracking sizes, tracks
//! processed in SIMD lanes). [`filter`] and [`smooth`] choose between them.

#[cfg(feature = "cuda")]
pub mod cuda;
pub(crate) mod dense;
mod inputs;
pub(crate) mod lanes;
mod metrics;
mod state;
pub(crate) mod step;

pub use inputs::TrackInputs;
pub use lanes::supports as has_fast_path;
pub use metrics::{mean_nees, mean_nis, nees, rmse};
pub use state::{BatchState, Interval, Mixture, Prediction, Score};

use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::StateSpace;

/// Which filtered states to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Keep {
    /// Every step's filtered mean, covariance and log-likelihood.
    #[default]
    All,
    /// Only the final state of each track (online tracking); its `loglik` holds the
    /// track's total log-likelihood.
    Last,
}

/// Options of [`filter`].
///
/// ```
/// use kestrel::{FilterOptions, Keep};
/// let opts = FilterOptions::default().with_keep(Keep::Last).with_predicted(false);
/// # let _ = opts;
/// ```
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct FilterOptions {
    /// Which steps' filtered moments to return (default: every step).
    pub keep: Keep,
    /// Also return the predicted moments `x_{k|k-1}`, `P_{k|k-1}` (with `Keep::All`).
    pub predicted: bool,
    /// Force the general path even where a fixed-size fast path exists.
    pub force_general: bool,
    /// Which filtered estimates to return (default: all, full covariances). What is not
    /// wanted is left empty ([`crate::data::Outputs`]); on a GPU it is never copied to
    /// the host.
    pub outputs: crate::data::Outputs,
}

setters!(FilterOptions {
    with_keep(keep: Keep, "Sets [`FilterOptions::keep`]."),
    with_predicted(predicted: bool, "Sets [`FilterOptions::predicted`]."),
    with_force_general(force_general: bool, "Sets [`FilterOptions::force_general`]."),
    with_outputs(outputs: crate::data::Outputs, "Sets [`FilterOptions::outputs`]."),
});

/// What [`filter`] returns.
#[derive(Clone, Debug)]
pub struct FilterOutput<T> {
    /// Filtered moments `x_{k|k}`, `P_{k|k}` and per-step log-likelihood.
    pub filtered: Estimates<T>,
    /// Predicted moments (step 0: the prior), when asked for.
    pub predicted: Option<Estimates<T>>,
}

fn check_dims<T: Real, M: StateSpace + ?Sized>(model: &M, z: &Measurements<T>) -> Result<()> {
    crate::model::check_fits(model, z.ny, z.steps)?;
    z.check_finite()
}

/// Runs the Kalman filter over every track of `z`.
pub fn filter<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    opts: &FilterOptions,
) -> Result<FilterOutput<T>> {
    let t0 = std::time::Instant::now();
    let kept = if opts.keep == Keep::All { z.steps } else { 1 };
    let fast = model.as_invariant().is_some()
        && lanes::supports(model.nx(), model.ny())
        && !opts.predicted
        && !opts.force_general;
    // The fast path writes every element: its outputs need no NaN fill (the tests compare
    // every element with the reference, so an unwritten zero would show).
    let mut filtered = if fast {
        Estimates::zeroed(z.tracks, kept, model.nx(), true)
    } else {
        Estimates::nan(z.tracks, kept, model.nx(), true)
    };
    let mut predicted = opts
        .predicted
        .then(|| Estimates::nan(z.tracks, z.steps, model.nx(), false));
    filter_impl(model, z, opts, &mut filtered, predicted.as_mut())?;
    if opts.keep == Keep::All {
        record_cpu::<T>(z, t0, false);
    }
    opts.outputs.apply(&mut filtered);
    Ok(FilterOutput {
        filtered,
        predicted,
    })
}

/// Like [`filter`], writing the filtered moments into `out`, whose buffers are reused
/// (reshaped as needed): filtering batch after batch then allocates nothing and touches
/// no fresh memory. Predicted moments are not available here.
pub fn filter_into<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    opts: &FilterOptions,
    out: &mut Estimates<T>,
) -> Result<()> {
    if opts.predicted {
        return Err(Error::input(
            "filter_into does not return predicted moments; use filter",
        ));
    }
    let kept = if opts.keep == Keep::All { z.steps } else { 1 };
    out.reshape(z.tracks, kept, model.nx(), true);
    filter_impl(model, z, opts, out, None)
}

fn filter_impl<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    opts: &FilterOptions,
    out: &mut Estimates<T>,
    pred: Option<&mut Estimates<T>>,
) -> Result<()> {
    check_dims(model, z)?;
    if z.steps == 0 {
        return Err(Error::input("measurements have no steps"));
    }
    if opts.predicted && opts.keep == Keep::Last {
        return Err(Error::input("predicted moments need all steps kept"));
    }
    let keep_all = opts.keep == Keep::All;
    if let Some(inv) = model.as_invariant() {
        if pred.is_none() && !opts.force_general {
            if let Some(r) = lanes::filter(inv, z, keep_all, out) {
                return r;
            }
        }
    }
    let m = dense::ConvertedModel::new(model, z.steps);
    dense::filter_batch(&m, None, z, keep_all, out, pred)
}

/// Rauch-Tung-Striebel smoother (the thesis's *retrodiction*) over filtered estimates
/// with all steps kept; returns the smoothed means and covariances (no log-likelihood).
pub fn smooth_filtered<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    filtered: &Estimates<T>,
) -> Result<Estimates<T>> {
    let mut est = filtered.copy_parallel();
    smooth_in_place(model, &mut est)?;
    Ok(est)
}

/// Like [`smooth_filtered`], overwriting the filtered estimates with the smoothed ones
/// (their log-likelihoods are dropped).
pub fn smooth_in_place<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    est: &mut Estimates<T>,
) -> Result<()> {
    if est.nx != model.nx() {
        return Err(Error::input(format!(
            "estimates have {} state components, the model has {}",
            est.nx,
            model.nx()
        )));
    }
    if let Some(n) = model.steps_covered() {
        if n < est.steps {
            return Err(Error::input(format!(
                "the time-varying model has matrices for {n} steps, the estimates have {}",
                est.steps
            )));
        }
    }
    est.loglik = None;
    if let Some(inv) = model.as_invariant() {
        if let Some(r) = lanes::smooth(inv, est) {
            return r;
        }
    }
    let m = dense::ConvertedModel::new(model, est.steps);
    dense::smooth_batch(&m, None, est)
}

/// Like [`filter`], with per-track and per-step inputs beyond the model
/// ([`TrackInputs`]: a prior per track, `R` per track and step, sampling intervals per
/// track for the kinematic builders), on the CPU. Without inputs this is [`filter`];
/// with them the general path runs (all sizes, all options of [`FilterOptions`]).
///
/// ```
/// use kestrel::kalman::{filter_with, TrackInputs};
/// use kestrel::{FilterOptions, Measurements};
/// let model = kestrel::model::random_walk(1, 0.1, 1.0, 10.0)?;
/// let z = Measurements::<f64>::new(2, 2, 1, vec![1.0, 1.2, -3.0, -2.9])?;
/// // Track 0 starts near 1, track 1 near -3; the second step of track 1 is noisier.
/// let inputs = TrackInputs::new()
///     .with_priors(&[1.0, -3.0], &[0.5, 0.5])
///     .with_r(&[1.0, 1.0, 1.0, 4.0]);
/// let out = filter_with(&model, &z, &FilterOptions::default(), &inputs)?;
/// assert!(out.filtered.mean_at(1, 1)[0] < -2.0);
/// # Ok::<(), kestrel::Error>(())
/// ```
pub fn filter_with<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    opts: &FilterOptions,
    inputs: &TrackInputs<'_>,
) -> Result<FilterOutput<T>> {
    if inputs.is_empty() {
        return filter(model, z, opts);
    }
    check_dims(model, z)?;
    if z.steps == 0 {
        return Err(Error::input("measurements have no steps"));
    }
    if opts.predicted && opts.keep == Keep::Last {
        return Err(Error::input("predicted moments need all steps kept"));
    }
    inputs.check(model, z.tracks, z.steps)?;
    let keep_all = opts.keep == Keep::All;
    let kept = if keep_all { z.steps } else { 1 };
    let mut filtered = Estimates::nan(z.tracks, kept, model.nx(), true);
    let mut predicted = opts
        .predicted
        .then(|| Estimates::nan(z.tracks, z.steps, model.nx(), false));
    let m = dense::ConvertedModel::new(model, z.steps);
    dense::filter_batch(
        &m,
        Some(inputs),
        z,
        keep_all,
        &mut filtered,
        predicted.as_mut(),
    )?;
    opts.outputs.apply(&mut filtered);
    Ok(FilterOutput {
        filtered,
        predicted,
    })
}

/// Like [`smooth`], with per-track and per-step inputs ([`TrackInputs`]), on the CPU:
/// the filter of [`filter_with`], then the RTS smoother with each track's own `F` and
/// `Q` (its sampling intervals). Returns `(filtered, smoothed)`.
///
/// ```
/// use kestrel::kalman::{smooth_with, TrackInputs};
/// use kestrel::model::{constant_velocity, Kinematics};
/// let model = constant_velocity(1, 1.0, 0.5, 1.0, 10.0)?;
/// let z = kestrel::sim::simulate(&model, 2, 10, 3, 0.0)?.measurements;
/// let kin = Kinematics::constant_velocity(1, 0.5)?;
/// let dt: Vec<f64> = (0..20).map(|i| 0.5 + 0.1 * (i % 3) as f64).collect(); // [2][10]
/// let (filtered, smoothed) = smooth_with(&model, &z, &TrackInputs::new().with_dt(&kin, &dt))?;
/// assert_eq!((filtered.steps(), smoothed.steps()), (10, 10));
/// # Ok::<(), kestrel::Error>(())
/// ```
pub fn smooth_with<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    inputs: &TrackInputs<'_>,
) -> Result<(Estimates<T>, Estimates<T>)> {
    if inputs.is_empty() {
        return smooth(model, z);
    }
    let f = filter_with(model, z, &FilterOptions::default(), inputs)?.filtered;
    let mut s = f.copy_parallel();
    s.loglik = None;
    let m = dense::ConvertedModel::new(model, z.steps);
    dense::smooth_batch(&m, Some(inputs), &mut s)?;
    Ok((f, s))
}

/// Filters then smooths. Returns `(filtered, smoothed)`.
pub fn smooth<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
) -> Result<(Estimates<T>, Estimates<T>)> {
    let t0 = std::time::Instant::now();
    let f = filter(model, z, &FilterOptions::default())?.filtered;
    let s = smooth_filtered(model, &f)?;
    record_cpu::<T>(z, t0, true);
    Ok((f, s))
}

/// Records a CPU run's rate for `--device auto` (`cuda::record_cpu`).
fn record_cpu<T: Real>(z: &Measurements<T>, t0: std::time::Instant, smooth: bool) {
    #[cfg(feature = "cuda")]
    cuda::record_cpu::<T>(
        (z.tracks * z.steps) as u64,
        rayon::current_num_threads(),
        t0.elapsed().as_secs_f64(),
        smooth,
    );
    #[cfg(not(feature = "cuda"))]
    let _ = (z, t0, smooth);
}
