//! One sequence split over several devices: the parallel filter and the two-filter
//! smoother with the time steps of every track cut into contiguous shares, one share per
//! device (the same ordinal may appear more than once: its shares then run one after
//! the other on that device, which exercises the crossing on a single GPU).
//!
//! Each device runs the fused scan (`kernels/parallel_fused.cu`, the `_at` kernels) over
//! its share: the reduce of its chunks and the scan of its chunk totals. That scan leaves
//! the share's total (the combination of all of its elements) in the last chunk total;
//! one element per track crosses to the host, where the prefix of every share before
//! share `k` is combined (`carry_{k+1} = carry_k x total_k`, the CPU operator of
//! `parallel::filtering`, one combine per share and track), and crosses back to device
//! `k`. The sweep then starts each chunk from `carry_k x prefix` (one extra combine per
//! chunk, no extra pass over the steps). The backward filter of the two-filter smoother
//! does the same from the right: the suffix of every share after share `k` crosses to
//! device `k` and is combined behind each chunk's scanned suffix. So the only traffic
//! between the devices is one element per track and share, each way.
//!
//! A share of a time-varying model holds the matrices of its own steps and one more on
//! each side (the step before, so that the window never starts a later share at step 0;
//! the step after, whose element the backward filter's last step takes).

use super::{
    check_finite, est_as, fe_len, kernels, out_as, vec_as, with_as, GpuReal, Output, MAX_GROUP,
};
use crate::cuda::{by_precision, catch, gpu, Gpu, Module as Kernels};
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::kalman::dense::ConvertedModel;
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::parallel::blocks::BlockAt;
use crate::parallel::FilterOp;
use crate::scan::{AssocOp, ScanAlgorithm};
use std::sync::Arc;

use super::run::Method;

mod share;
#[cfg(test)]
mod tests;

use share::{Fetched, Share};

/// The parallel filter (Algorithm 5) with every track's steps split over the devices
/// `ordinals` (one contiguous share each, in order); equal to `super::run` with
/// [`Method::Filter`] on one device to rounding (the elements are combined in another
/// order). The chunk totals of each share are scanned with `alg`.
pub fn filter_on_devices<T: Real, M: StateSpace + ?Sized>(
    ordinals: &[usize],
    model: &M,
    z: &Measurements<T>,
    alg: ScanAlgorithm,
) -> Result<Estimates<T>> {
    time_on_devices(ordinals, model, z, Method::Filter, alg, 0, 1).map(|(_, (f, _))| f)
}

/// The two-filter smoother (Algorithm 7) with every track's steps split over the devices
/// `ordinals`, forward and backward filter both; returns `(filtered, smoothed)`.
pub fn two_filter_on_devices<T: Real, M: StateSpace + ?Sized>(
    ordinals: &[usize],
    model: &M,
    z: &Measurements<T>,
    alg: ScanAlgorithm,
) -> Result<(Estimates<T>, Estimates<T>)> {
    let (_, (f, s)) = time_on_devices(ordinals, model, z, Method::TwoFilter, alg, 0, 1)?;
    let s =
        s.ok_or_else(|| Error::Cuda("the split smoother returned no smoothed estimates".into()))?;
    Ok((f, s))
}

/// Like [`filter_on_devices`] / [`two_filter_on_devices`] (`method` is
/// [`Method::Filter`] or [`Method::TwoFilter`]), timing `repeats` runs after `warmup`
/// with the data resident on the devices: wall clock from the first launch until every
/// device is done, the crossing of the share totals included.
pub fn time_on_devices<T: Real, M: StateSpace + ?Sized>(
    ordinals: &[usize],
    model: &M,
    z: &Measurements<T>,
    method: Method,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Output<T>)> {
    if !matches!(method, Method::Filter | Method::TwoFilter) {
        return Err(Error::Unsupported(format!(
            "{method:?} is not split over devices (the filter and the two-filter smoother are)"
        )));
    }
    if ordinals.is_empty() {
        return Err(Error::Input {
            msg: "no CUDA device to split over".into(),
        });
    }
    if z.steps == 0 {
        return Err(Error::Input {
            msg: "measurements have no steps".into(),
        });
    }
    let run = |ord: &[usize]| -> Result<(Vec<f64>, Output<T>)> {
        by_precision!(T, D => {
            let (t, o) = with_as::<T, D, _>(z, |z| {
                catch(|| run_split::<D, M>(ord, model, z, method, alg, warmup, repeats))
            })?;
            Ok((t, out_as(o)))
        })
    };
    // No share shorter than one step.
    run(&ordinals[..ordinals.len().min(z.steps)])
}

/// Pass 1 of the split parallel filter (`parallel::blocks`) on GPU `ordinal`: every
/// track's total of the filtering elements of a block, `[tracks][3 nx² + 2 nx]`, in the
/// layout of the CPU's `blocks::filter_block_total` (so `blocks::filter_carries` combines
/// totals from either). `z` holds the block's steps `[k0, k0 + n)` of every track (`k0` =
/// `at.step`); the model covers the sequence.
pub fn filter_block_total<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<T>,
    at: BlockAt,
) -> Result<Vec<T>> {
    let alg = ScanAlgorithm::default();
    by_precision!(T, D => {
        let (tot, _) = with_as::<T, D, _>(z, |z| {
            catch(|| block_on::<D, M>(ordinal, model, z, at, None, alg))
        })?;
        Ok(vec_as(tot))
    })
}

/// Pass 3 of the split parallel filter on GPU `ordinal`: the filtered moments and
/// log-likelihoods of the block's steps behind its incoming `carry` (`None` for the block
/// that starts the sequence), as the CPU's `blocks::filter_block`; the chunk totals of
/// the block are scanned with `alg`.
pub fn filter_block<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<T>,
    at: BlockAt,
    carry: Option<&[T]>,
    alg: ScanAlgorithm,
) -> Result<Estimates<T>> {
    let est = by_precision!(T, D => {
        let c: Option<Vec<D>> = carry.map(|c| vec_as(c.to_vec()));
        let (_, e) = with_as::<T, D, _>(z, |z| {
            catch(|| block_on::<D, M>(ordinal, model, z, at, Some(c.as_deref()), alg))
        })?;
        e.map(est_as)
    });
    est.ok_or_else(|| Error::Cuda("the block's sweep returned no estimates".into()))
}

/// One block of the split filter on one device, in groups of tracks that fit: with
/// `sweep = None` the block totals (pass 1), with `Some(carry)` the filtered moments
/// behind the carry (pass 3).
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn block_on<D: GpuReal, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<D>,
    at: BlockAt,
    sweep: Option<Option<&[D]>>,
    alg: ScanAlgorithm,
) -> Result<(Vec<D>, Option<Estimates<D>>)> {
    crate::parallel::blocks::check_z(model, z)?;
    crate::parallel::blocks::covers(model, at.step + z.steps)?;
    let (nx, ny, n) = (model.nx(), model.ny(), z.steps);
    let k0 = at.step;
    let t = k0 + n;
    let fe = fe_len(nx);
    if let Some(carry) = sweep {
        crate::parallel::blocks::check_carry(carry, k0 > 0, z.tracks, fe, "filter")?;
    }
    let m = ConvertedModel::<D>::new(model, t);
    let varying = model.as_invariant().is_none();
    let g = gpu(ordinal)?;
    let k = kernels::<D>(&g, nx, ny)?;
    let (off, end) = window(k0, n, t, false);
    let per = [scalars_per_track(nx, ny, n, end - off, false)];
    let group = budget_group::<D>(std::slice::from_ref(&g), &[ordinal], &per, t, z.tracks)?;
    let mut tot = Vec::new();
    let mut est = sweep.map(|_| Estimates::nan(z.tracks, n, nx, true));
    let mut b0 = 0;
    while b0 < z.tracks {
        let nb = group.min(z.tracks - b0);
        let mut sh = Share::new(&g, &k, &m, varying, z, (b0, nb), (k0, n), (k0, t), false)?;
        match sweep {
            None => {
                sh.reduce(alg, false)?;
                tot.extend(sh.totals(false)?.0);
            }
            Some(carry) => {
                sh.poison(false)?;
                sh.reduce(alg, false)?;
                sh.sweep(carry.map(|c| &c[b0 * fe..(b0 + nb) * fe]), None, false)?;
                let got = sh.fetch(false)?;
                let e = est.as_mut().expect("allocated for the sweep");
                // The share's steps are the block's: placed at step 0 of `e`.
                sh.k0 = 0;
                sh.place(got, e, None, b0, nb, n);
            }
        }
        b0 += nb;
    }
    if let Some(e) = est.as_ref() {
        check_finite(
            e,
            0..e.tracks,
            (at.track, k0),
            "a covariance of the split parallel filter's block on the GPU (a solve or Cholesky failed)",
        )?;
    } else if let Some(i) = tot.iter().position(|x| x.is_nan_value()) {
        return Err(Error::NotPositiveDefinite {
            track: at.track + i / fe,
            step: k0,
            what: "a block total of the split parallel filter on the GPU (a solve failed in the block)",
        });
    }
    Ok((tot, est))
}
/// The shares `[k0, k0 + n)` of `t` steps over `parts` devices (sizes differ by at most
/// one).
fn shares(t: usize, parts: usize) -> Vec<(usize, usize)> {
    (0..parts)
        .map(|i| {
            let a = t * i / parts;
            let b = t * (i + 1) / parts;
            (a, b - a)
        })
        .collect()
}

/// The window of a share: `[off, end)` of the global steps.
fn window(k0: usize, n: usize, t: usize, backward: bool) -> (usize, usize) {
    let off = k0.saturating_sub(1);
    let end = if backward {
        (k0 + n + 1).min(t)
    } else {
        k0 + n
    };
    (off, end)
}

/// Scalars of device memory a track needs on a device for one share of `n` steps in a
/// window of `ta` (measurements, chunk totals, crossing elements and outputs).
pub(super) fn scalars_per_track(
    nx: usize,
    ny: usize,
    n: usize,
    ta: usize,
    tf: bool,
) -> Option<usize> {
    let fe = fe_len(nx);
    // Chunk totals: at least 4 steps a chunk, and the chunked scan's work space.
    let per_step_tot = fe / 2;
    let outs = if tf {
        2 * (nx + nx * nx) + 1
    } else {
        nx + nx * nx + 1
    };
    let copies = if tf { 2 } else { 1 };
    n.checked_mul(copies * per_step_tot + outs)?
        .checked_add(ta.checked_mul(ny)?)?
        .checked_add(4 * fe)
}

/// The crossing on the host: from the share totals of every track, `lasts[g]` (the
/// forward total of share g) and `firsts[g]` (its backward total, for the two-filter
/// smoother), the carried prefix of each share, `fwd[g] = lasts[0] x ... x lasts[g-1]`
/// (`None` for share 0), and the carried suffix, `bwd[g] = firsts[g+1] x ... x
/// firsts[G-1]` (`None` for the last share, and for all without `firsts`).
type Carries<D> = (Vec<Option<Vec<D>>>, Vec<Option<Vec<D>>>);
fn carries<D: Real>(op: &FilterOp<D>, lasts: &[Vec<D>], firsts: Option<&[Vec<D>]>) -> Carries<D> {
    let fe = op.elem_len();
    let mut scratch = op.scratch();
    let mut combine_all = |a: &[D], b: &[D]| -> Vec<D> {
        let mut out = vec![D::zero(); a.len()];
        for ((ea, eb), o) in a.chunks(fe).zip(b.chunks(fe)).zip(out.chunks_mut(fe)) {
            op.combine(ea, eb, o, &mut scratch);
        }
        out
    };
    let p = lasts.len();
    let mut fwd: Vec<Option<Vec<D>>> = vec![None; p];
    for i in 1..p {
        fwd[i] = Some(match &fwd[i - 1] {
            None => lasts[i - 1].clone(),
            Some(c) => combine_all(c, &lasts[i - 1]),
        });
    }
    let mut bwd: Vec<Option<Vec<D>>> = vec![None; p];
    if let Some(firsts) = firsts {
        for i in (0..p.saturating_sub(1)).rev() {
            bwd[i] = Some(match &bwd[i + 1] {
                None => firsts[i + 1].clone(),
                Some(c) => combine_all(&firsts[i + 1], c),
            });
        }
    }
    (fwd, bwd)
}

/// Tracks per group: what fits in 70% of each device's free memory, divided among the
/// parts that device holds; `per[i]` scalars a track of part `i` (on `gpus[i]`, ordinal
/// `ordinals[i]`) needs, `None` when that overflows; `t` steps a track.
pub(super) fn budget_group<D: GpuReal>(
    gpus: &[Arc<Gpu>],
    ordinals: &[usize],
    per: &[Option<usize>],
    t: usize,
    tracks: usize,
) -> Result<usize> {
    // `KESTREL_PAR_GROUP` caps the group as on one device (tests cross group boundaries).
    let cap = std::env::var("KESTREL_PAR_GROUP")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&c: &usize| c >= 1)
        .unwrap_or(MAX_GROUP);
    let mut group = MAX_GROUP.min(cap).min(tracks.max(1));
    for (i, g) in gpus.iter().enumerate() {
        let bytes = per[i]
            .and_then(|s| s.checked_mul(std::mem::size_of::<D>()))
            .ok_or_else(|| Error::Input {
                msg: format!("a track of {t} steps is too long to address"),
            })?;
        let on_device = ordinals.iter().filter(|&&o| o == ordinals[i]).count();
        let (free, _) = g.mem_info()?;
        let budget = free / 10 * 7 / on_device;
        if bytes > budget {
            return Err(Error::Unsupported(format!(
                "one track of {t} steps would need {:.2} GB on GPU {} for its part, {:.2} GB are free for it",
                bytes as f64 / 1e9,
                ordinals[i],
                budget as f64 / 1e9
            )));
        }
        group = group.min((budget / bytes.max(1)).max(1));
    }
    Ok(group)
}

#[allow(clippy::too_many_arguments)]
fn run_split<D: GpuReal, M: StateSpace + ?Sized>(
    ordinals: &[usize],
    model: &M,
    z: &Measurements<D>,
    method: Method,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Output<D>)> {
    let (nx, ny, t) = (model.nx(), model.ny(), z.steps);
    let tf = method == Method::TwoFilter;
    let m = ConvertedModel::<D>::new(model, t);
    let varying = model.as_invariant().is_none();
    let parts = shares(t, ordinals.len());
    let gpus: Vec<Arc<Gpu>> = ordinals.iter().map(|&o| gpu(o)).collect::<Result<_>>()?;
    let ks: Vec<Arc<Kernels>> = gpus
        .iter()
        .map(|g| kernels::<D>(g, nx, ny))
        .collect::<Result<_>>()?;
    let per: Vec<Option<usize>> = parts
        .iter()
        .map(|&(k0, n)| {
            let (off, end) = window(k0, n, t, tf);
            scalars_per_track(nx, ny, n, end - off, tf)
        })
        .collect();
    let group = budget_group::<D>(&gpus, ordinals, &per, t, z.tracks)?;
    let mut f = Estimates::nan(z.tracks, t, nx, true);
    let mut s = tf.then(|| Estimates::nan(z.tracks, t, nx, false));
    let mut times = vec![0.0; repeats];
    let op = FilterOp::<D>::new(nx);
    let mut b0 = 0;
    while b0 < z.tracks {
        let nb = group.min(z.tracks - b0);
        let mut sh = Vec::with_capacity(parts.len());
        for (i, &(k0, n)) in parts.iter().enumerate() {
            sh.push(Share::new(
                &gpus[i],
                &ks[i],
                &m,
                varying,
                z,
                (b0, nb),
                (k0, n),
                (0, t),
                tf,
            )?);
        }
        for rep in 0..warmup + repeats {
            for x in sh.iter_mut() {
                x.poison(tf)?;
            }
            for x in &sh {
                x.sync("poisoning the outputs")?;
            }
            let start = std::time::Instant::now();
            for x in sh.iter_mut() {
                x.reduce(alg, tf)?;
            }
            // The crossing: each share's total(s) to the host (in order: the devices work
            // concurrently meanwhile), the carries combined there and sent back.
            let mut lasts = Vec::with_capacity(sh.len());
            let mut firsts = Vec::with_capacity(sh.len());
            for x in &sh {
                let (l, fst) = x.totals(tf)?;
                lasts.push(l);
                firsts.push(fst);
            }
            let (fwd, bwd) = carries(&op, &lasts, tf.then_some(&firsts[..]));
            for (i, x) in sh.iter_mut().enumerate() {
                x.sweep(fwd[i].as_deref(), bwd[i].as_deref(), tf)?;
            }
            for x in &sh {
                x.sync("running the split parallel kernels")?;
            }
            if rep >= warmup {
                times[rep - warmup] += start.elapsed().as_secs_f64();
            }
        }
        // Every device's outputs at once (one host thread each: the copies share no
        // link), then put in place.
        let got: Vec<Result<Fetched<D>>> = std::thread::scope(|sc| {
            let hs: Vec<_> = sh.iter().map(|x| sc.spawn(move || x.fetch(tf))).collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::Cuda("reading a share panicked".into())))
                })
                .collect()
        });
        for (x, g) in sh.iter().zip(got) {
            x.place(g?, &mut f, s.as_mut(), b0, nb, t);
        }
        b0 += nb;
    }
    check_finite(
        &f,
        0..f.tracks,
        (0, 0),
        "a covariance of the split parallel filter on the GPUs (a solve or Cholesky failed)",
    )?;
    if let Some(s) = s.as_ref() {
        check_finite(
            s,
            0..s.tracks,
            (0, 0),
            "a covariance of the split two-filter smoother on the GPUs (a solve or Cholesky failed)",
        )?;
    }
    Ok((times, (f, s)))
}
