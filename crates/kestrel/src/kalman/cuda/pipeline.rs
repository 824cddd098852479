//! Whole batches through the GPU in chunks of tracks: a chunk's measurements go up, the
//! kernels run, the estimates come down. With more than one chunk two slots alternate
//! on two streams: chunk i+1 is enqueued before chunk i is read back, so the copies of
//! one overlap the kernels of the other. A batch that fits the memory budget is one
//! chunk. Tracks are independent, so chunking does not change any number.

use super::slot::{budget, Shape, Slot};
use super::source::{kernels, model_params, Part};
use super::{CudaOptions, OutputLayout};
use crate::cuda::{download, drive, plan, streams, upload, Gpu};
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::kalman::{FilterOptions, FilterOutput, Keep};
use crate::linalg::Real;
use crate::model::Model;

/// Checks what the CPU reference checks, with the same messages.
pub(crate) fn check_input<T: Real>(
    model: &Model,
    z: &Measurements<T>,
    opts: &FilterOptions,
) -> Result<()> {
    if z.ny != model.ny() {
        return Err(Error::Input {
            msg: format!(
                "measurements have {} components, the model measures {}",
                z.ny,
                model.ny()
            ),
        });
    }
    z.check_finite()?;
    if z.steps == 0 {
        return Err(Error::Input {
            msg: "measurements have no steps".into(),
        });
    }
    if opts.predicted && opts.keep == Keep::Last {
        return Err(Error::Input {
            msg: "predicted moments need all steps kept".into(),
        });
    }
    if z.steps > i32::MAX as usize {
        return Err(Error::Unsupported(format!(
            "{} steps exceed the CUDA kernels' limit",
            z.steps
        )));
    }
    Ok(())
}

/// Host estimates for the copies to fill: zeroed pages straight from the allocator
/// (`Estimates::zeroed`, huge pages where possible), first touched by the parallel copies
/// out of the staging buffers. Every value is overwritten by a copy of a device buffer
/// (the buffers the tests poison with NaN), so no fill pass is needed.
fn host_estimates<T: Real>(tracks: usize, steps: usize, nx: usize, loglik: bool) -> Estimates<T> {
    Estimates::zeroed(tracks, steps, nx, loglik)
}

/// One slot for the whole batch when it fits the budget, else two of a chunk each.
/// Starts a chunk of tracks `b0..b0 + nb` on slot `s`: clears its error flag, poisons
/// its outputs when asked, and queues the copy of the chunk's measurements.
fn load_measurements<T: Real>(
    gpu: &Gpu,
    s: &Slot<T>,
    z: &Measurements<T>,
    b0: usize,
    nb: usize,
    copts: &CudaOptions,
) -> Result<()> {
    s.clear_err()?;
    if copts.poison {
        s.poison()?;
    }
    let per = z.steps * z.ny;
    upload(
        gpu,
        &s.stream,
        &z.data[b0 * per..(b0 + nb) * per],
        &s.z,
        0,
        "copying measurements to the GPU",
    )
}

fn make_slots<T: Real>(
    gpu: &Gpu,
    tracks: usize,
    shape: Shape,
    opts: &CudaOptions,
) -> Result<Vec<Slot<T>>> {
    let per = shape.bytes_per_track(std::mem::size_of::<T>());
    let (cap, ns) = plan(tracks, per, budget(gpu, opts)?, i32::MAX as usize / 2);
    let mut slots = Vec::with_capacity(ns);
    for stream in streams(gpu, ns)? {
        slots.push(Slot::new(gpu, cap, shape, stream)?);
    }
    Ok(slots)
}

/// The batched filter (see [`super::filter_with`]).
pub(crate) fn filter<T: Real>(
    gpu: &Gpu,
    model: &Model,
    z: &Measurements<T>,
    opts: &FilterOptions,
    copts: &CudaOptions,
) -> Result<FilterOutput<T>> {
    check_input(model, z, opts)?;
    let k = kernels::<T>(gpu, model, copts.bake_model, Part::Filter)?;
    let params = model_params::<T>(model);
    let (nx, ny, t) = (model.nx(), model.ny(), z.steps);
    let last = opts.keep == Keep::Last;
    let kept = if last { 1 } else { t };
    let shape = Shape {
        nx,
        ny,
        steps: t,
        kept,
        last,
        predicted: opts.predicted,
        layout: if opts.predicted {
            OutputLayout::Host
        } else {
            copts.layout
        },
        smoothed: false,
    };
    let slots = make_slots::<T>(gpu, z.tracks, shape, copts)?;
    let mut est = host_estimates(z.tracks, kept, nx, true);
    let mut pred = opts
        .predicted
        .then(|| host_estimates::<T>(z.tracks, t, nx, false));
    drive(
        z.tracks,
        slots[0].cap,
        &slots,
        |s, b0, nb| {
            load_measurements(gpu, s, z, b0, nb, copts)?;
            s.filter(&k, &params, nb)?;
            s.to_host_layout(&k, nb)
        },
        |s, b0, nb| {
            let ll = est
                .loglik
                .as_mut()
                .ok_or_else(|| Error::Cuda("no log-likelihood buffer".into()))?;
            download(
                gpu,
                &s.stream,
                &s.mean,
                0,
                &mut est.mean[b0 * kept * nx..(b0 + nb) * kept * nx],
                "copying means",
            )?;
            download(
                gpu,
                &s.stream,
                &s.cov,
                0,
                &mut est.cov[b0 * kept * nx * nx..(b0 + nb) * kept * nx * nx],
                "copying covariances",
            )?;
            download(
                gpu,
                &s.stream,
                &s.ll,
                0,
                &mut ll[b0 * kept..(b0 + nb) * kept],
                "copying log-likelihoods",
            )?;
            if let (Some(p), Some(pm), Some(pc)) = (pred.as_mut(), &s.pmean, &s.pcov) {
                download(
                    gpu,
                    &s.stream,
                    pm,
                    0,
                    &mut p.mean[b0 * t * nx..(b0 + nb) * t * nx],
                    "copying predicted means",
                )?;
                download(
                    gpu,
                    &s.stream,
                    pc,
                    0,
                    &mut p.cov[b0 * t * nx * nx..(b0 + nb) * t * nx * nx],
                    "copying predicted covariances",
                )?;
            }
            s.check_err(b0, "innovation covariance S")
        },
    )?;
    Ok(FilterOutput {
        filtered: est,
        predicted: pred,
    })
}

/// The batched RTS smoother over filtered estimates (see [`super::smooth_filtered_with`]).
pub(crate) fn smooth_filtered<T: Real>(
    gpu: &Gpu,
    model: &Model,
    filtered: &Estimates<T>,
    copts: &CudaOptions,
) -> Result<Estimates<T>> {
    let nx = model.nx();
    if filtered.nx != nx {
        return Err(Error::Input {
            msg: format!(
                "estimates have {} state components, the model has {nx}",
                filtered.nx
            ),
        });
    }
    let t = filtered.steps;
    if t == 0 || filtered.tracks == 0 {
        let mut e = filtered.clone();
        e.loglik = None;
        return Ok(e);
    }
    let k = kernels::<T>(gpu, model, copts.bake_model, Part::Smooth)?;
    let params = model_params::<T>(model);
    let shape = Shape {
        nx,
        ny: 0,
        steps: t,
        kept: t,
        last: false,
        predicted: false,
        layout: OutputLayout::Host,
        smoothed: false,
    };
    let slots = make_slots::<T>(gpu, filtered.tracks, shape, copts)?;
    let mut out = host_estimates(filtered.tracks, t, nx, false);
    let (m1, c1) = (t * nx, t * nx * nx);
    drive(
        filtered.tracks,
        slots[0].cap,
        &slots,
        |s, b0, nb| {
            s.clear_err()?;
            upload(
                gpu,
                &s.stream,
                &filtered.mean[b0 * m1..(b0 + nb) * m1],
                &s.mean,
                0,
                "copying filtered means to the GPU",
            )?;
            upload(
                gpu,
                &s.stream,
                &filtered.cov[b0 * c1..(b0 + nb) * c1],
                &s.cov,
                0,
                "copying filtered covariances to the GPU",
            )?;
            s.smooth(&k, &params, nb)
        },
        |s, b0, nb| {
            download(
                gpu,
                &s.stream,
                &s.mean,
                0,
                &mut out.mean[b0 * m1..(b0 + nb) * m1],
                "copying smoothed means",
            )?;
            download(
                gpu,
                &s.stream,
                &s.cov,
                0,
                &mut out.cov[b0 * c1..(b0 + nb) * c1],
                "copying smoothed covariances",
            )?;
            s.check_err(b0, "predicted covariance P(k+1|k) in the smoother")
        },
    )?;
    Ok(out)
}

/// Filter then smoother without a round trip through the host in between.
pub(crate) fn smooth<T: Real>(
    gpu: &Gpu,
    model: &Model,
    z: &Measurements<T>,
    copts: &CudaOptions,
) -> Result<(Estimates<T>, Estimates<T>)> {
    check_input(model, z, &FilterOptions::default())?;
    let kf = kernels::<T>(gpu, model, copts.bake_model, Part::Filter)?;
    let ks = kernels::<T>(gpu, model, copts.bake_model, Part::Smooth)?;
    let params = model_params::<T>(model);
    let (nx, ny, t) = (model.nx(), model.ny(), z.steps);
    let shape = Shape {
        nx,
        ny,
        steps: t,
        kept: t,
        last: false,
        predicted: false,
        layout: copts.layout,
        smoothed: true,
    };
    let slots = make_slots::<T>(gpu, z.tracks, shape, copts)?;
    let mut f = host_estimates(z.tracks, t, nx, true);
    let mut sm = host_estimates(z.tracks, t, nx, false);
    let (m1, c1) = (t * nx, t * nx * nx);
    drive(
        z.tracks,
        slots[0].cap,
        &slots,
        |s, b0, nb| {
            load_measurements(gpu, s, z, b0, nb, copts)?;
            s.filter(&kf, &params, nb)?;
            s.smooth(&ks, &params, nb)?;
            s.to_host_layout(&kf, nb)?;
            s.smoothed_to_host_layout(&ks, nb)
        },
        |s, b0, nb| {
            let ll = f
                .loglik
                .as_mut()
                .ok_or_else(|| Error::Cuda("no log-likelihood buffer".into()))?;
            download(
                gpu,
                &s.stream,
                &s.mean,
                0,
                &mut f.mean[b0 * m1..(b0 + nb) * m1],
                "copying filtered means",
            )?;
            download(
                gpu,
                &s.stream,
                &s.cov,
                0,
                &mut f.cov[b0 * c1..(b0 + nb) * c1],
                "copying filtered covariances",
            )?;
            download(
                gpu,
                &s.stream,
                &s.ll,
                0,
                &mut ll[b0 * t..(b0 + nb) * t],
                "copying log-likelihoods",
            )?;
            let (Some(smean), Some(scov)) = (&s.smean, &s.scov) else {
                return Err(Error::Cuda("no smoothed buffers".into()));
            };
            download(
                gpu,
                &s.stream,
                smean,
                0,
                &mut sm.mean[b0 * m1..(b0 + nb) * m1],
                "copying smoothed means",
            )?;
            download(
                gpu,
                &s.stream,
                scov,
                0,
                &mut sm.cov[b0 * c1..(b0 + nb) * c1],
                "copying smoothed covariances",
            )?;
            s.check_err(b0, "covariance (filter or smoother)")
        },
    )?;
    Ok((f, sm))
}
