//! Whole batches through the GPU in chunks of tracks: a chunk's measurements go up, the
//! kernels run, the estimates come down. With more than one chunk two slots alternate
//! on two streams: chunk i+1 is enqueued before chunk i is read back, so the copies of
//! one overlap the kernels of the other. A batch that fits the memory budget is one
//! chunk. Tracks are independent, so chunking does not change any number.

use super::slot::{budget, HostInputs, Shape, Slot};
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
    crate::model::check_fits(model, z.ny, z.steps)?;
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

/// Host destinations of a run, in the order of [`Slot::outputs`]: for each output the
/// slice to fill (`per` values a track) or `None` when it is not wanted (its device
/// buffer is then never copied down).
struct Dest<'a, T> {
    parts: Vec<Option<(&'a mut [T], usize)>>,
}

impl<'a, T> Dest<'a, T> {
    /// The first `tracks` tracks and the rest.
    fn split(self, tracks: usize) -> (Dest<'a, T>, Dest<'a, T>) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for p in self.parts {
            match p {
                Some((s, per)) => {
                    let (x, y) = s.split_at_mut(tracks * per);
                    a.push(Some((x, per)));
                    b.push(Some((y, per)));
                }
                None => {
                    a.push(None);
                    b.push(None);
                }
            }
        }
        (Dest { parts: a }, Dest { parts: b })
    }
}

/// What a run computes on each chunk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Filter,
    FilterSmooth,
}

/// Runs `run` for `tracks` tracks of `z` (`[tracks][steps][ny]`) on `gpu`, filling
/// `dest`; `first` is the index of the first track in the caller's batch (errors name
/// tracks of the whole batch).
#[allow(clippy::too_many_arguments)]
fn run_on<T: Real>(
    gpu: &Gpu,
    model: &Model,
    z: &[T],
    tracks: usize,
    first: usize,
    shape: Shape,
    copts: &CudaOptions,
    run: Run,
    mut dest: Dest<'_, T>,
    inputs: Option<&HostInputs<T>>,
) -> Result<()> {
    if tracks == 0 {
        return Ok(());
    }
    let (pf, ps) = shape.inputs.parts(run == Run::FilterSmooth);
    let kf = kernels::<T>(gpu, model, copts.bake_model, pf)?;
    let ks = match ps {
        Some(p) => Some(kernels::<T>(gpu, model, copts.bake_model, p)?),
        None => None,
    };
    let params = model_params::<T>(model);
    let slots = make_slots::<T>(gpu, tracks, shape, copts)?;
    let per_z = shape.steps * shape.ny;
    let what = match run {
        Run::Filter => "innovation covariance S",
        Run::FilterSmooth => "covariance (filter or smoother)",
    };
    drive(
        tracks,
        slots[0].cap,
        &slots,
        |s, b0, nb| {
            s.clear_err()?;
            if copts.poison {
                s.poison()?;
            }
            upload(
                gpu,
                &s.stream,
                &z[b0 * per_z..(b0 + nb) * per_z],
                &s.z,
                0,
                "copying measurements to the GPU",
            )?;
            if let Some(inp) = inputs {
                s.upload_inputs(gpu, &kf, inp, first + b0, nb)?;
            }
            s.filter(&kf, &params, nb)?;
            if let Some(ks) = &ks {
                s.smooth(ks, &params, nb)?;
            }
            s.to_host_layout(&kf, nb)?;
            if let Some(ks) = &ks {
                s.smoothed_to_host_layout(ks, nb)?;
            }
            Ok(())
        },
        |s, b0, nb| {
            for (src, d) in s.outputs().into_iter().zip(dest.parts.iter_mut()) {
                let (Some((buf, name)), Some((host, per))) = (src, d.as_mut()) else {
                    continue;
                };
                download(
                    gpu,
                    &s.stream,
                    buf,
                    0,
                    &mut host[b0 * *per..(b0 + nb) * *per],
                    &format!("copying {name}"),
                )?;
            }
            s.check_err(first + b0, what)
        },
    )
}

/// Splits `tracks` over `gpus` in contiguous shares (in order) and runs each share on
/// its device in its own thread; the first error (by device order) is returned.
fn run_split<T: Real>(
    gpus: &[std::sync::Arc<Gpu>],
    model: &Model,
    z: &Measurements<T>,
    shape: Shape,
    copts: &CudaOptions,
    run: Run,
    dest: Dest<'_, T>,
    inputs: Option<&HostInputs<T>>,
) -> Result<()> {
    if gpus.len() <= 1 {
        let g = gpus
            .first()
            .ok_or_else(|| Error::Unsupported("no CUDA device".into()))?;
        // The kernels first, so that the run's time is the host-to-host rate alone
        // (recorded for `--device auto` when every step is kept).
        let (pf, ps) = shape.inputs.parts(run == Run::FilterSmooth);
        for p in std::iter::once(pf).chain(ps) {
            kernels::<T>(g, model, copts.bake_model, p)?;
        }
        let bytes = (z.data.len()
            + dest
                .parts
                .iter()
                .flatten()
                .map(|(p, _)| p.len())
                .sum::<usize>())
            * std::mem::size_of::<T>();
        let t0 = std::time::Instant::now();
        run_on(
            g, model, &z.data, z.tracks, 0, shape, copts, run, dest, inputs,
        )?;
        if !shape.last && inputs.is_none() {
            super::auto::record_gpu(
                (z.tracks * z.steps) as u64,
                bytes as u64,
                t0.elapsed().as_secs_f64(),
            );
        }
        return Ok(());
    }
    let n = gpus.len();
    let per_z = z.steps * z.ny;
    let mut shares = Vec::with_capacity(n);
    let mut rest = dest;
    let mut b0 = 0;
    for i in 0..n {
        let nb = z.tracks / n + usize::from(i < z.tracks % n);
        let (mine, others) = rest.split(nb);
        shares.push((b0, nb, mine));
        rest = others;
        b0 += nb;
    }
    let results: Vec<Result<()>> = std::thread::scope(|sc| {
        let handles: Vec<_> = shares
            .into_iter()
            .zip(gpus)
            .map(|((b0, nb, d), g)| {
                let zs = &z.data[b0 * per_z..(b0 + nb) * per_z];
                sc.spawn(move || {
                    crate::cuda::catch(|| {
                        run_on(g, model, zs, nb, b0, shape, copts, run, d, inputs)
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Cuda("a device thread panicked".into())))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// The batched filter (see [`super::filter_with`]) on one device or, split by tracks,
/// on several.
pub(crate) fn filter<T: Real>(
    gpus: &[std::sync::Arc<Gpu>],
    model: &Model,
    z: &Measurements<T>,
    opts: &FilterOptions,
    copts: &CudaOptions,
    inputs: Option<&HostInputs<T>>,
) -> Result<FilterOutput<T>> {
    check_input(model, z, opts)?;
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
        inputs: inputs.map(|i| i.set()).unwrap_or_default(),
    };
    let out = opts.outputs;
    let mut est = host_estimates(z.tracks, kept, nx, true);
    let mut pred = opts
        .predicted
        .then(|| host_estimates::<T>(z.tracks, t, nx, false));
    {
        let ll = est
            .loglik
            .as_mut()
            .ok_or_else(|| Error::Cuda("no log-likelihood buffer".into()))?;
        let mut parts = vec![
            out.mean.then_some((&mut est.mean[..], kept * nx)),
            out.cov
                .wanted()
                .then_some((&mut est.cov[..], kept * nx * nx)),
            out.loglik.then_some((&mut ll[..], kept)),
        ];
        if let Some(p) = pred.as_mut() {
            parts.push(Some((&mut p.mean[..], t * nx)));
            parts.push(Some((&mut p.cov[..], t * nx * nx)));
        }
        run_split(
            gpus,
            model,
            z,
            shape,
            copts,
            Run::Filter,
            Dest { parts },
            inputs,
        )?;
    }
    out.apply(&mut est);
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
        inputs: Default::default(),
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

/// Filter then smoother without a round trip through the host in between, on one
/// device or, split by tracks, on several.
pub(crate) fn smooth<T: Real>(
    gpus: &[std::sync::Arc<Gpu>],
    model: &Model,
    z: &Measurements<T>,
    copts: &CudaOptions,
    inputs: Option<&HostInputs<T>>,
) -> Result<(Estimates<T>, Estimates<T>)> {
    check_input(model, z, &FilterOptions::default())?;
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
        inputs: inputs.map(|i| i.set()).unwrap_or_default(),
    };
    let mut f = host_estimates(z.tracks, t, nx, true);
    let mut sm = host_estimates(z.tracks, t, nx, false);
    {
        let ll = f
            .loglik
            .as_mut()
            .ok_or_else(|| Error::Cuda("no log-likelihood buffer".into()))?;
        let parts = vec![
            Some((&mut f.mean[..], t * nx)),
            Some((&mut f.cov[..], t * nx * nx)),
            Some((&mut ll[..], t)),
            Some((&mut sm.mean[..], t * nx)),
            Some((&mut sm.cov[..], t * nx * nx)),
        ];
        run_split(
            gpus,
            model,
            z,
            shape,
            copts,
            Run::FilterSmooth,
            Dest { parts },
            inputs,
        )?;
    }
    Ok((f, sm))
}
