//! Per-step log-likelihoods of time-varying models ([`crate::model::LinearModel`]'s
//! per-step matrices): the exact and parallel methods through the filters of the Kalman
//! family, and the windowed filter (Lin, Moore & Russell, Algorithm 2) written out
//! plainly: the value at step `t >= N-1` is the predictive log-likelihood of `z_t` from a
//! Kalman filter over `z_{t-N+1..t}` with the matrices of those steps, started from the
//! vague `N(0, V I)` as the predicted state at `t-N+1`; earlier steps are exact. The taps
//! of the time-invariant path need one model for every window, so here each window runs
//! its own filter: `O(N)` steps per value, windows in parallel.

use super::{LogLik, Method, Options};
use crate::data::Measurements;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::estimate::{filter_on, FilterMethod};
use crate::kalman::dense::{ConvertedModel, Workspace};
use crate::kalman::step::{predict, update};
use crate::kalman::FilterOptions;
use crate::linalg::Real;
use crate::model::StateSpace;
use rayon::prelude::*;

/// [`super::loglik`] for a model with per-step matrices.
pub(super) fn loglik<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    method: Method,
    opts: &Options,
) -> Result<LogLik<T>> {
    crate::model::check_fits(model, z.ny, z.steps)?;
    z.check_finite()?;
    if opts.steady.is_some() {
        return Err(Error::input(
            "the steady-state switch needs a time-invariant model (a time-varying model's gain has no fixed point)",
        ));
    }
    let from_filter = |m: FilterMethod| -> Result<Vec<T>> {
        let o = FilterOptions::default().with_outputs(crate::data::Outputs {
            mean: false,
            cov: crate::data::CovOutput::None,
            loglik: true,
        });
        let f = filter_on(device, model, z, m, &o)?.filtered;
        f.loglik
            .ok_or_else(|| Error::Unsupported("the filter returned no log-likelihoods".into()))
    };
    let (values, window) = match method {
        Method::Exact => (from_filter(FilterMethod::Sequential)?, None),
        Method::Parallel => (from_filter(FilterMethod::Parallel(opts.scan))?, None),
        Method::Window(w) => {
            if w < 1 {
                return Err(Error::input(format!(
                    "window length must be at least 1, got {w}"
                )));
            }
            if device != Device::Cpu {
                return Err(Error::Unsupported(format!(
                    "the windowed filter of a time-varying model runs on the CPU ({device} was asked for)"
                )));
            }
            let w = w.min(z.steps.saturating_add(1));
            (windowed(model, z, w, opts.vague)?, Some(w))
        }
        Method::WindowAuto(_) => {
            return Err(Error::Unsupported(
                "window:auto bounds the error of a time-invariant model; for a time-varying model give the window (window:N), or use exact or parallel".into(),
            ))
        }
    };
    Ok(LogLik {
        tracks: z.tracks,
        steps: z.steps,
        values,
        window,
        bound: None,
    })
}

/// The windowed filter, every window its own filter over the model's step matrices.
fn windowed<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    n: usize,
    vague: f64,
) -> Result<Vec<T>> {
    let (t, nx, ny) = (z.steps, model.nx(), model.ny());
    let m = ConvertedModel::<T>::new(model, t);
    let mut out = vec![T::zero(); z.tracks * t];
    out.par_chunks_mut(t)
        .enumerate()
        .try_for_each(|(b, ll)| -> Result<()> {
            let zb = z.track(b);
            let mut ws = Workspace::<T>::new(nx, ny);
            // Steps before N-1: the exact filter from the prior (one pass).
            let exact = (n - 1).min(t);
            window_pass(&m, zb, 0, exact, None, &mut ws, |k, v| ll[k] = v, b)?;
            // Later steps: a filter over the window ending there.
            for end in exact..t {
                let start = end + 1 - n;
                window_pass(
                    &m,
                    zb,
                    start,
                    end + 1,
                    Some(vague),
                    &mut ws,
                    |k, v| {
                        if k == end {
                            ll[k] = v
                        }
                    },
                    b,
                )?;
            }
            Ok(())
        })?;
    Ok(out)
}

/// Filters steps `from..to` of one track `zb`: from the model's prior at step 0, or from
/// `N(0, vague I)` as the predicted state at `from`; `put(k, ll_k)` for every step.
#[allow(clippy::too_many_arguments)]
fn window_pass<T: Real>(
    m: &ConvertedModel<T>,
    zb: &[T],
    from: usize,
    to: usize,
    vague: Option<f64>,
    ws: &mut Workspace<T>,
    mut put: impl FnMut(usize, T),
    track: usize,
) -> Result<()> {
    let (nx, ny) = (m.nx, m.ny);
    match vague {
        None => {
            ws.x.copy_from_slice(&m.x0);
            ws.p.copy_from_slice(&m.p0);
        }
        Some(v) => {
            ws.x.fill(T::zero());
            ws.p.fill(T::zero());
            for i in 0..nx {
                ws.p[i * nx + i] = T::of(v);
            }
        }
    }
    for k in from..to {
        if k > from {
            predict(nx, m.at(k), &mut ws.x, &mut ws.p, &mut ws.tmp);
        }
        let zk = &zb[k * ny..(k + 1) * ny];
        let ll = if zk.iter().any(|v| v.is_nan_value()) {
            T::zero()
        } else {
            update(
                nx,
                ny,
                m.at(k),
                zk,
                &mut ws.x,
                &mut ws.p,
                &mut ws.y,
                &mut ws.s,
                &mut ws.wt,
            )
            .ok_or(Error::NotPositiveDefinite {
                track,
                step: k,
                what: "the innovation covariance S of the windowed filter",
            })?
        };
        put(k, ll);
    }
    Ok(())
}
