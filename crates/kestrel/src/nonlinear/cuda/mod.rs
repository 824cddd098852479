//! The nonlinear filters on the GPU: the EKF, IEKF, UKF and CKF of every track batched,
//! one thread a track with its state in registers (`kernels/filter.cu`), their RTS
//! smoothers (`nl_rts`, in place over the filter's outputs on the device), and the IMM of
//! any of them with every mode's moments in registers (`kernels/imm.cu`); the models'
//! functions emitted as CUDA from their tapes (`source.rs`) and compiled once per model
//! and precision. Inputs and outputs are transposed on the device between the host's
//! `[B][T][..]` and the kernel's structure of arrays; tracks go in groups that fit the
//! device's memory. Equal to the CPU path (`super::filter_track`) to rounding.

pub(crate) mod parallel_iterated;
mod params;
#[doc(hidden)]
pub mod source;

use super::models::NonlinearModel;
use super::sigma::SigmaRule;
use super::ImmModel;
use crate::cuda::{catch, download, gpu, launch, sync, upload, DevBuf};
use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::linalg::Real;
use params::{NlFilter, NlImm, NlIterated, NlRts, NlTranspose};

/// The largest state the kernels are compiled for (a thread holds its covariance and,
/// for the sigma-point filters, all points' images).
pub const MAX_NX: usize = 12;
/// The largest measurement.
pub const MAX_NY: usize = 8;
/// The most modes of an IMM on the GPU (a thread holds every mode's moments twice).
pub const MAX_MODES: usize = 8;
const BLOCK: u32 = 128;

thread_local! {
    static LAST_MS: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::NAN) };
}

/// Kernel time of the last filter run on this thread, in milliseconds, the filter kernel
/// alone (benchmarks).
pub fn last_kernel_ms() -> f64 {
    LAST_MS.with(|c| c.get())
}

/// The filter's outputs, `[B][T][..]` in the run's precision (an IMM's mode
/// probabilities `[B][T][r]`, the smoothed moments when smoothing, else empty), and the
/// first failure `(track, step, what)`.
pub(crate) struct GpuFiltered<T> {
    pub mean: Vec<T>,
    pub cov: Vec<T>,
    pub ll: Vec<T>,
    pub probs: Vec<T>,
    pub smean: Vec<T>,
    pub scov: Vec<T>,
    pub fail: Option<(usize, usize, &'static str)>,
}

/// What a run computes: the filter of one model (with `last`, only each track's final
/// state and total log-likelihood, `[B][1][..]`), the filter and RTS smoother of one
/// model, the iterated smoother of one model (its passes), or the IMM.
#[derive(Clone, Copy)]
pub(crate) enum Job<'a> {
    Filter(&'a NonlinearModel, bool),
    Smooth(&'a NonlinearModel),
    Iterated(&'a NonlinearModel, usize),
    Imm(&'a ImmModel),
}

/// `job` over every track of `z` on GPU `ordinal`, each track (or mode) filtered by the
/// EKF where `rule` is `None` (`iterations > 1`: the iterated EKF), else by the
/// sigma-point filter of `rule`.
pub(crate) fn filter<T: Real>(
    ordinal: usize,
    job: Job<'_>,
    rule: Option<&SigmaRule>,
    iterations: usize,
    z: &Measurements<T>,
) -> Result<GpuFiltered<T>> {
    let models: Vec<&NonlinearModel> = match job {
        Job::Filter(m, _) | Job::Smooth(m) | Job::Iterated(m, _) => vec![m],
        Job::Imm(i) => i.modes.iter().collect(),
    };
    let (nx, ny) = (models[0].nx(), models[0].ny());
    if nx > MAX_NX || ny > MAX_NY {
        return Err(Error::Unsupported(format!(
            "the nonlinear filters on cuda handle up to {MAX_NX} state and {MAX_NY} measurement components (this model: {nx} and {ny}); use --device cpu"
        )));
    }
    if models.len() > MAX_MODES {
        return Err(Error::Unsupported(format!(
            "the IMM on cuda handles up to {MAX_MODES} modes (this one: {}); use --device cpu",
            models.len()
        )));
    }
    if models.iter().any(|m| m.angles != models[0].angles) {
        return Err(Error::Unsupported(
            "the IMM on cuda needs every mode to measure the same angle components; use --device cpu".into(),
        ));
    }
    catch(|| run(ordinal, job, &models, rule, iterations, z))
}

/// A smoother kernel's failure code, 3 (k + 1) + (0: a P has no factor; 1: S is not
/// positive definite; 2: the predicted P is not), as `(track, step, what)`.
fn smoother_failure(track: usize, e: i32) -> (usize, usize, &'static str) {
    let what = ["P", "S", "the predicted P"][(e % 3) as usize];
    (track, (e / 3 - 1) as usize, what)
}

fn run<T: Real>(
    ordinal: usize,
    job: Job<'_>,
    models: &[&NonlinearModel],
    rule: Option<&SigmaRule>,
    iterations: usize,
    z: &Measurements<T>,
) -> Result<GpuFiltered<T>> {
    let g = gpu(ordinal)?;
    let (nx, ny) = (models[0].nx(), models[0].ny());
    let (b, t) = (z.tracks(), z.steps());
    let (last, imm, smooth, passes) = match job {
        Job::Filter(_, last) => (last, None, false, 0),
        Job::Smooth(_) => (false, None, true, 0),
        Job::Iterated(_, passes) => (false, None, false, passes.max(1)),
        Job::Imm(i) => (false, Some(i), false, 0),
    };
    // The iterated smoother writes the smoothed moments beside the filtered ones.
    let iterated = passes > 0;
    let r = if imm.is_some() { models.len() } else { 0 };
    let what = match (imm, rule, iterations > 1) {
        _ if iterated => "the iterated smoother",
        (Some(_), _, _) => "the IMM filter",
        (_, Some(_), _) => "the sigma-point filter",
        (_, None, true) => "the iterated extended Kalman filter",
        (_, None, false) => "the extended Kalman filter",
    };
    let kernel = match (imm.is_some(), iterated) {
        (true, _) => "nl_imm",
        (false, true) => "nl_iterated",
        (false, false) => "nl_filter",
    };
    let src = source::source_of::<T>(
        models,
        rule,
        if rule.is_some() { 1 } else { iterations },
        imm.map(|i| (&i.transition, &i.initial)),
    );
    let names: &[&str] = if smooth {
        &[kernel, "nl_rts", "nl_transpose"]
    } else {
        &[kernel, "nl_transpose"]
    };
    let module = g.module(what, &src, names)?;
    let st = &g.stream;
    let sz = std::mem::size_of::<T>();
    // Per track: z, mean, cov, ll (and probs), each twice (host layout and the
    // kernel's), and err; the iterated smoother's smoothed moments in the kernel's layout.
    let to = if last { 1 } else { t };
    let per_track = 2 * (t * ny + to * (nx + nx * nx + 1 + r)) * sz
        + 4
        + if iterated { t * (nx + nx * nx) * sz } else { 0 };
    let budget = g.usable_memory()? * 7 / 10;
    if budget < per_track {
        return Err(Error::TooLarge {
            what: format!("{what} on {}: one track of {t} steps", g.label()),
            bytes: per_track as u128,
            limit: format!("70% of the GPU's free memory ({budget} bytes)"),
        });
    }
    let group = (budget / per_track).min(b.max(1)).min(i32::MAX as usize);
    let mut out = GpuFiltered {
        mean: vec![T::zero(); b * to * nx],
        cov: vec![T::zero(); b * to * nx * nx],
        ll: vec![T::zero(); b * to],
        probs: vec![T::zero(); b * to * r],
        smean: vec![T::zero(); if smooth || iterated { b * t * nx } else { 0 }],
        scov: vec![
            T::zero();
            if smooth || iterated {
                b * t * nx * nx
            } else {
                0
            }
        ],
        fail: None,
    };
    let buf = |n: usize, w: &str| DevBuf::<T>::new(&g, group * n, w);
    // The host layout's buffers and the kernel's.
    let (zh, mh, ch, lh) = (
        buf(t * ny, "measurements")?,
        buf(to * nx, "means")?,
        buf(to * nx * nx, "covariances")?,
        buf(to, "log-likelihoods")?,
    );
    let (zs, ms, cs, ls) = (
        buf(t * ny, "measurements")?,
        buf(to * nx, "means")?,
        buf(to * nx * nx, "covariances")?,
        buf(to, "log-likelihoods")?,
    );
    // An IMM's mode probabilities (one element each without: never written).
    let (ph, ps) = (
        buf(to * r.max(1), "mode probabilities")?,
        buf(to * r.max(1), "mode probabilities")?,
    );
    // The iterated smoother's smoothed moments (one element each without).
    let (ssm, ssc) = if iterated {
        (
            buf(t * nx, "smoothed means")?,
            buf(t * nx * nx, "smoothed covariances")?,
        )
    } else {
        (buf(1, "smoothed means")?, buf(1, "smoothed covariances")?)
    };
    let err = DevBuf::<i32>::new(&g, group, "failures")?;
    let timer = crate::cuda::EventTimer::new(&g)?;
    let transpose = |src: &DevBuf<T>, dst: &DevBuf<T>, rows: usize, cols: usize| {
        let grid = (
            cols.div_ceil(32) as u32,
            rows.div_ceil(32).min(65_535) as u32,
            1,
        );
        launch(
            st,
            &module,
            "nl_transpose",
            grid,
            (32, 8, 1),
            &NlTranspose {
                r#in: &src,
                out: &dst,
                r: rows as i64,
                c: cols as i64,
            },
        )
    };
    let mut ms_total = 0.0;
    let mut errs = vec![0i32; group];
    let mut b0 = 0;
    while b0 < b {
        crate::cancel::check()?;
        let nb = group.min(b - b0);
        upload(
            &g,
            st,
            &z.data()[b0 * t * ny..(b0 + nb) * t * ny],
            &zh,
            0,
            "measurements",
        )?;
        for buf in [&ms, &cs, &ls, &mh, &ch, &lh, &ps, &ph, &ssm, &ssc] {
            buf.poison(st)?;
        }
        err.poison(st)?;
        transpose(&zh, &zs, nb, t * ny)?;
        timer.start(st)?;
        let (z, ll, nb32, steps) = (&zs, &ls, nb as i32, t as i32);
        let grid = crate::cuda::grid_for(nb, BLOCK);
        let blk = (BLOCK, 1, 1);
        match kernel {
            "nl_imm" => {
                let (mean, cov, probs) = (&ms, &cs, &ps);
                let p = NlImm {
                    z,
                    mean,
                    cov,
                    ll,
                    probs,
                    err: &err,
                    nb: nb32,
                    steps,
                };
                launch(st, &module, kernel, grid, blk, &p)?;
            }
            "nl_iterated" => {
                let passes = passes.min(i32::MAX as usize) as i32;
                let (fmean, fcov, smean, scov) = (&ms, &cs, &ssm, &ssc);
                let p = NlIterated {
                    z,
                    fmean,
                    fcov,
                    ll,
                    smean,
                    scov,
                    err: &err,
                    nb: nb32,
                    steps,
                    passes,
                };
                launch(st, &module, kernel, grid, blk, &p)?;
            }
            _ => {
                let (mean, cov, last) = (&ms, &cs, i32::from(last));
                let p = NlFilter {
                    z,
                    mean,
                    cov,
                    ll,
                    err: &err,
                    nb: nb32,
                    steps,
                    last,
                };
                launch(st, &module, kernel, grid, blk, &p)?;
            }
        }
        timer.stop(st)?;
        transpose(&ms, &mh, to * nx, nb)?;
        transpose(&cs, &ch, to * nx * nx, nb)?;
        transpose(&ls, &lh, to, nb)?;
        let span = |n: usize| b0 * to * n..(b0 + nb) * to * n;
        if r > 0 {
            transpose(&ps, &ph, to * r, nb)?;
            download(
                &g,
                st,
                &ph,
                0,
                &mut out.probs[span(r)],
                "mode probabilities",
            )?;
        }
        download(&g, st, &mh, 0, &mut out.mean[span(nx)], "means")?;
        download(&g, st, &ch, 0, &mut out.cov[span(nx * nx)], "covariances")?;
        download(&g, st, &lh, 0, &mut out.ll[span(1)], "log-likelihoods")?;
        crate::cuda::dtoh(st, &err, 0, &mut errs[..nb], "failures")?;
        sync(st, what)?;
        ms_total += f64::from(timer.elapsed_ms()?);
        if out.fail.is_none() {
            if let Some((i, &e)) = errs[..nb].iter().enumerate().find(|(_, &e)| e != 0) {
                out.fail = Some(if iterated {
                    smoother_failure(b0 + i, e)
                } else {
                    let what = if e % 2 == 0 { "P" } else { "S" };
                    (b0 + i, (e / 2 - 1) as usize, what)
                });
            }
        }
        // The smoothed moments (kernel layout in sm, sc) to the host through the same
        // host-layout buffers as the filtered ones.
        let smoothed_out = |sm: &DevBuf<T>, sc: &DevBuf<T>, mean: &mut [T], cov: &mut [T]| {
            mh.poison(st)?;
            ch.poison(st)?;
            transpose(sm, &mh, t * nx, nb)?;
            transpose(sc, &ch, t * nx * nx, nb)?;
            download(&g, st, &mh, 0, mean, "smoothed means")?;
            download(&g, st, &ch, 0, cov, "smoothed covariances")
        };
        let span = |n: usize| b0 * t * n..(b0 + nb) * t * n;
        if iterated && out.fail.is_none() {
            smoothed_out(
                &ssm,
                &ssc,
                &mut out.smean[span(nx)],
                &mut out.scov[span(nx * nx)],
            )?;
            sync(st, what)?;
        }
        if smooth && out.fail.is_none() {
            // The smoother over the filtered moments still in the kernel's layout, in
            // place; its results through the same host-layout buffers.
            err.poison(st)?;
            launch(
                st,
                &module,
                "nl_rts",
                crate::cuda::grid_for(nb, BLOCK),
                (BLOCK, 1, 1),
                &NlRts {
                    mean: &ms,
                    cov: &cs,
                    err: &err,
                    nb: nb as i32,
                    steps: t as i32,
                },
            )?;
            smoothed_out(
                &ms,
                &cs,
                &mut out.smean[span(nx)],
                &mut out.scov[span(nx * nx)],
            )?;
            crate::cuda::dtoh(st, &err, 0, &mut errs[..nb], "failures")?;
            sync(st, "the RTS smoother")?;
            if let Some((i, &e)) = errs[..nb].iter().enumerate().find(|(_, &e)| e != 0) {
                out.fail = Some(smoother_failure(b0 + i, e));
            }
        }
        b0 += nb;
    }
    LAST_MS.with(|c| c.set(ms_total));
    Ok(out)
}

#[cfg(test)]
mod param_tests {
    /// Every parameter struct matches its kernel's declaration.
    #[test]
    fn the_parameter_structs_match_the_kernels() {
        use super::source::{FILTER, IMM, LINEARISE};
        let src = String::from(FILTER) + IMM + LINEARISE;
        crate::cuda::assert_matches(&src, super::params::SIGNATURES);
    }
}
