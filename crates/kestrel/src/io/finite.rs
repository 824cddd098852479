//! The shared check that no output carries a NaN or an infinity silently.
//!
//! Every estimates writer runs [`check_estimates`] before writing: a non-finite mean or
//! log-likelihood, or a NaN anywhere, is an [`Error::NonFinite`] naming the output, the
//! track, the step and the entry (the recursion broke down numerically: an unstable
//! model whose unobserved part overflows, typically). An infinite covariance entry with
//! finite means is mathematically right (nothing bounds an unobserved component of an
//! unstable model) and is written, with a warning ([`crate::error::warn`]).

use crate::data::Estimates;
use crate::error::{Error, Result};
use crate::linalg::Real;
use rayon::prelude::*;
use std::path::Path;

fn first_bad<T: Real>(v: &[T], bad: impl Fn(T) -> bool + Sync) -> Option<usize> {
    crate::data::first_where(v, bad)
}

fn non_finite(path: &Path, track: usize, step: usize, msg: String) -> Error {
    Error::NonFinite {
        what: path.display().to_string(),
        track,
        step,
        msg,
    }
}

const WHY: &str =
    "the recursion broke down numerically (an unstable model with an unobserved component?)";

/// Checks per-step values `[tracks][steps]` (log-likelihoods) before they are written
/// to `path`: every one must be finite; the first that is not is an
/// [`Error::NonFinite`] naming the track and step.
pub fn check_per_step<T: Real>(path: &Path, steps: usize, data: &[T], column: &str) -> Result<()> {
    let steps = steps.max(1);
    if let Some(i) = first_bad(data, |x| !x.is_finite_value()) {
        return Err(non_finite(
            path,
            i / steps,
            i % steps,
            format!("{column} is {}: {WHY}", data[i].to_f64()),
        ));
    }
    Ok(())
}

/// Checks `est` before it is written to `path` (see the module documentation). Means or
/// covariances left out (empty) and diagonal-only covariances are understood.
pub fn check_estimates<T: Real>(path: &Path, est: &Estimates<T>) -> Result<()> {
    check_estimates_with_columns(path, est, &[])
}

/// [`check_estimates`] and per-step columns `[tracks][steps]` (the particle filter's
/// `ess`), which must be finite.
pub fn check_estimates_with_columns<T: Real>(
    path: &Path,
    est: &Estimates<T>,
    columns: &[(&str, &[T])],
) -> Result<()> {
    let (steps, nx) = (est.steps.max(1), est.nx.max(1));
    for (name, v) in columns {
        if let Some(i) = first_bad(v, |x| !x.is_finite_value()) {
            return Err(non_finite(
                path,
                i / steps,
                i % steps,
                format!("{name} is {}: {WHY}", v[i].to_f64()),
            ));
        }
    }
    if let Some(i) = first_bad(&est.mean, |x| !x.is_finite_value()) {
        let (b, k) = (i / (steps * nx), (i / nx) % steps);
        return Err(non_finite(
            path,
            b,
            k,
            format!("mean x{} is {}: {WHY}", i % nx, est.mean[i].to_f64()),
        ));
    }
    if let Some(ll) = &est.loglik {
        if let Some(i) = first_bad(ll, |x| !x.is_finite_value()) {
            return Err(non_finite(
                path,
                i / steps,
                i % steps,
                format!("log-likelihood is {}: {WHY}", ll[i].to_f64()),
            ));
        }
    }
    // Full covariances (nx x nx a step) or their diagonals (nx a step).
    let diag = est.cov.len() != est.tracks * est.steps * nx * nx;
    let nn = if diag { nx } else { nx * nx };
    let entry = |e: usize| {
        if diag {
            format!("P{e}{e}")
        } else {
            format!("P{}{}", e / nx, e % nx)
        }
    };
    if let Some(i) = first_bad(&est.cov, |x| x.is_nan_value()) {
        let (b, k, e) = (i / (steps * nn), (i / nn) % steps, i % nn);
        return Err(non_finite(
            path,
            b,
            k,
            format!("covariance {} is NaN: {WHY}", entry(e)),
        ));
    }
    if let Some(i) = first_bad(&est.cov, |x| !x.is_finite_value()) {
        let count = est
            .cov
            .par_iter()
            .with_min_len(1 << 16)
            .filter(|x| !x.is_finite_value())
            .count();
        let (b, k, e) = (i / (steps * nn), (i / nn) % steps, i % nn);
        crate::error::warn(format!(
            "{}: {count} covariance entries are infinite, the first at track {b}, step {k} ({}): the model is unstable and that part of the state is not observed; the means are finite",
            path.display(),
            entry(e)
        ));
    }
    Ok(())
}
