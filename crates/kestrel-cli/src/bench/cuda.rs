//! Benchmarks of the CUDA paths: the batched filter and smoother kernels timed alone with
//! CUDA events (device-resident batches), the same end to end with the host copies, the
//! streaming tracker's step, and the thesis's 6-state model. Medians after warm-up.
//!
//! Roofline: bytes that must move per target-step (read z, write mean, covariance and
//! log-likelihood) over the device bandwidth measured in the run
//! ([`super::device_bandwidth`]: 2.9 TB/s on the H100, about 4.0 on the H200), and the
//! dense recursion's flops over 51 TFLOP/s FP32 (DESIGN.md).

use super::{median, time_runs, Record, Sink};
use kestrel::kalman::cuda::{self, BatchTracker, CudaOptions, DeviceBatch, OutputLayout};
use kestrel::kalman::TrackInputs;
use kestrel::{FilterOptions, Keep, Measurements, Model};
use serde_json::json;
use std::time::Instant;

const STEPS: usize = 100;
/// FP32 peak, flop/s.
const PEAK: f64 = 5.08e13;

/// Flops of one dense predict + update step (no structural zeros exploited).
fn flops_per_step(nx: usize, ny: usize) -> f64 {
    let (nx, ny) = (nx as f64, ny as f64);
    let np = nx * (nx + 1.0) / 2.0;
    let nyp = ny * (ny + 1.0) / 2.0;
    let predict = 2.0 * nx * nx + 2.0 * nx * nx * nx + 2.0 * np * nx;
    let update = 2.0 * ny * nx
        + 2.0 * ny * nx * nx
        + 2.0 * nyp * nx
        + ny * ny * ny / 3.0
        + 2.0 * ny * ny * (nx + 1.0)
        + 4.0 * nx * ny
        + 2.0 * np * ny;
    predict + update
}

/// Bytes per target-step of the filter kernel's traffic.
fn filter_bytes(nx: usize, ny: usize, layout: OutputLayout, keep_all: bool) -> f64 {
    let cov = match layout {
        OutputLayout::Host => nx * nx,
        OutputLayout::Soa => nx * (nx + 1) / 2,
    };
    let out = if keep_all { nx + cov + 1 } else { 0 };
    ((ny + out) * 4) as f64
}

fn roofline(bytes_per_step: f64, flops: f64, target_steps: f64, secs: f64) -> serde_json::Value {
    let bw = bytes_per_step * target_steps / secs;
    let device = super::device_bandwidth();
    json!({
        "bytes_per_target_step": bytes_per_step,
        "bandwidth_GBps": bw / 1e9,
        "fraction_of_bandwidth_roofline": bw / device,
        "bytes_floor_s": bytes_per_step * target_steps / device,
        "dense_flops_per_target_step": flops,
        "flops_floor_s": flops * target_steps / PEAK,
    })
}

/// `tracks` tracks of simulated measurements: a simulated block of at most 10^4 tracks
/// repeated (the kernels' cost does not depend on the values).
fn measurements(model: &Model, tracks: usize, steps: usize) -> anyhow::Result<Measurements<f32>> {
    let base = tracks.min(10_000);
    let z = kestrel::sim::simulate(model, base, steps, 11, 0.02)?
        .measurements
        .cast::<f32>();
    let per = steps * z.ny();
    let mut data = Vec::with_capacity(tracks * per);
    while data.len() < tracks * per {
        let take = (tracks * per - data.len()).min(z.data().len());
        data.extend_from_slice(&z.data()[..take]);
    }
    Ok(Measurements::new(tracks, steps, z.ny(), data)?)
}

fn kernel_times(
    warm: usize,
    reps: usize,
    mut f: impl FnMut() -> kestrel::Result<f64>,
) -> anyhow::Result<Vec<f64>> {
    for _ in 0..warm {
        f()?;
    }
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        t.push(f()?);
    }
    Ok(t)
}

/// Runs this family's benchmarks; `quick` keeps sizes small.
pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    if let Err(why) = cuda::available(0) {
        outln!("cuda benchmarks skipped: no usable GPU: {why}");
        return Ok(());
    }
    let dev = format!("cuda:0 ({})", cuda::device_name(0)?);
    let cv = kestrel::model::constant_velocity(2, 1.0, 0.5, 25.0, 100.0)?;
    if let Some(e2e) = multi_only()? {
        return multi_gpu(sink, &cv, quick, e2e);
    }
    let sizes: &[usize] = if quick {
        &[10_000, 100_000]
    } else {
        &[10_000, 100_000, 1_000_000]
    };
    let opts = CudaOptions::default();
    let fl = flops_per_step(4, 2);
    for &b in sizes {
        let z = measurements(&cv, b, STEPS)?;
        let ts = (b * STEPS) as f64;
        let rec = |name: &str, times: &[f64], extra: serde_json::Value| {
            let mut r = Record::new(name, dev.clone(), "f32", b, STEPS, 4, 2, times);
            r.extra = extra;
            r
        };
        let (warm, reps) = (2, 7);
        for (layout, tag) in [(OutputLayout::Host, "host"), (OutputLayout::Soa, "soa")] {
            let db = DeviceBatch::new(0, &cv, &z, Keep::All, layout, false, &opts)?;
            let t = kernel_times(warm, reps, || db.filter())?;
            let by = filter_bytes(4, 2, layout, true);
            sink.push(rec(
                &format!("cuda filter kernel ({tag} layout)"),
                &t,
                roofline(by, fl, ts, median(&t)),
            ));
            if layout == OutputLayout::Soa {
                let t = kernel_times(warm, reps, || db.to_host_layout())?;
                sink.push(rec(
                    "cuda soa->host transpose kernel",
                    &t,
                    json!({"bytes_per_target_step": (4 + 10 + 1 + 4 + 16 + 1) * 4}),
                ));
            }
        }
        {
            let db = DeviceBatch::new(0, &cv, &z, Keep::Last, OutputLayout::Host, false, &opts)?;
            let t = kernel_times(warm, reps, || db.filter())?;
            sink.push(rec(
                "cuda filter kernel (keep last)",
                &t,
                roofline(
                    filter_bytes(4, 2, OutputLayout::Host, false),
                    fl,
                    ts,
                    median(&t),
                ),
            ));
        }
        for (layout, tag, by) in [
            (OutputLayout::Soa, "soa", 112.0),
            (OutputLayout::Host, "host", 160.0),
        ] {
            // Read filtered mean + covariance, write smoothed mean + covariance.
            let db = DeviceBatch::new(0, &cv, &z, Keep::All, layout, true, &opts)?;
            db.filter()?;
            let t = kernel_times(warm, reps, || db.smooth())?;
            let name = format!("cuda rts smoother kernel ({tag} layout)");
            sink.push(rec(&name, &t, roofline(by, 0.0, ts, median(&t))));
            if layout == OutputLayout::Soa {
                let t = kernel_times(warm, reps, || db.smoothed_to_host_layout())?;
                sink.push(rec(
                    "cuda smoothed soa->host transpose kernel",
                    &t,
                    serde_json::Value::Null,
                ));
            }
        }
        if b == *sizes.last().unwrap_or(&b) {
            let generic = opts.with_bake_model(false);
            let db = DeviceBatch::new(0, &cv, &z, Keep::All, OutputLayout::Soa, false, &generic)?;
            let t = kernel_times(warm, reps, || db.filter())?;
            sink.push(rec(
                "cuda filter kernel (soa, model as parameters)",
                &t,
                roofline(68.0, fl, ts, median(&t)),
            ));
            let db = DeviceBatch::new(0, &cv, &z, Keep::Last, OutputLayout::Host, false, &generic)?;
            let t = kernel_times(warm, reps, || db.filter())?;
            sink.push(rec(
                "cuda filter kernel (keep last, model as parameters)",
                &t,
                roofline(8.0, fl, ts, median(&t)),
            ));
            // Per-track inputs (kalman::TrackInputs) against the shared model, each a
            // pair measured alternately on the same batch.
            let (nb, nt) = (z.tracks(), z.steps());
            let x0: Vec<f64> = (0..nb).flat_map(|_| [0.0, 1.0, 0.0, 1.0]).collect();
            let p0: Vec<f64> = (0..nb)
                .flat_map(|_| (0..16).map(|i| if i % 5 == 0 { 100.0 } else { 0.0 }))
                .collect();
            let u = vec![0.01; nb * nt * 4];
            let d = vec![0.5; nb * nt * 2];
            let r: Vec<f64> = (0..nb * nt).flat_map(|_| [25.0, 0.0, 0.0, 25.0]).collect();
            let shared = DeviceBatch::new(0, &cv, &z, Keep::All, OutputLayout::Soa, false, &opts)?;
            for (tag, inputs, extra_bytes) in [
                ("priors", TrackInputs::new().with_priors(&x0, &p0), 0.0),
                (
                    "priors, u, d",
                    TrackInputs::new()
                        .with_priors(&x0, &p0)
                        .with_u(&u)
                        .with_d(&d),
                    24.0,
                ),
                (
                    "priors, u, d, R",
                    TrackInputs::new()
                        .with_priors(&x0, &p0)
                        .with_u(&u)
                        .with_d(&d)
                        .with_r(&r),
                    40.0,
                ),
            ] {
                let db = DeviceBatch::with_inputs(
                    0,
                    &cv,
                    &z,
                    Keep::All,
                    OutputLayout::Soa,
                    false,
                    &opts,
                    &inputs,
                )?;
                let (mut tw, mut ts0) = (Vec::new(), Vec::new());
                for _ in 0..warm {
                    db.filter()?;
                    shared.filter()?;
                }
                for _ in 0..reps {
                    tw.push(db.filter()?);
                    ts0.push(shared.filter()?);
                }
                let by = filter_bytes(4, 2, OutputLayout::Soa, true) + extra_bytes;
                let mut extra = roofline(by, fl, ts, median(&tw));
                extra["shared_model_s"] = json!(median(&ts0));
                extra["throughput_vs_shared_model"] = json!(median(&ts0) / median(&tw));
                errln!(
                    "cuda filter kernel with track inputs ({tag}): {:.3} ms, shared model {:.3} ms ({:.0}%)",
                    median(&tw) * 1e3,
                    median(&ts0) * 1e3,
                    100.0 * median(&ts0) / median(&tw)
                );
                sink.push(rec(
                    &format!("cuda filter kernel with track inputs ({tag}; soa)"),
                    &tw,
                    extra,
                ));
            }
        }
        // End to end: host measurements in, host estimates out (copies, allocation).
        let reps_e2e = if b >= 1_000_000 { 3 } else { 5 };
        let fo = FilterOptions::default();
        let t = time_runs(1, reps_e2e, || {
            let _ = std::hint::black_box(cuda::filter_with(0, &cv, &z, &fo, &opts));
        });
        sink.push(rec(
            "cuda filter end to end",
            &t,
            json!({"includes": "H2D z, kernel, D2H mean+cov+loglik, host allocation"}),
        ));
        let e2e_all = median(&t);
        let t = time_runs(1, reps_e2e, || {
            let _ = std::hint::black_box(cuda::smooth(0, &cv, &z, &opts));
        });
        sink.push(rec(
            "cuda filter+smoother end to end",
            &t,
            json!({"includes": "H2D z, both kernels, D2H filtered and smoothed"}),
        ));
        // Only the mean and the log-likelihood brought back (--outputs mean,loglik).
        let sel =
            FilterOptions::default().with_outputs(kestrel::data::Outputs::parse("mean,loglik")?);
        let t = time_runs(1, reps_e2e, || {
            let _ = std::hint::black_box(cuda::filter_with(0, &cv, &z, &sel, &opts));
        });
        sink.push(rec(
            "cuda filter end to end (mean,loglik)",
            &t,
            json!({"includes": "H2D z, kernel, D2H mean+loglik, host allocation"}),
        ));
        if b == *sizes.last().unwrap_or(&b) {
            // The bus: the ceiling of every host-to-host figure above.
            let (up, down) = cuda_bus(256 << 20)?;
            let out_bytes = (b * STEPS * (4 + 16 + 1) * 4) as f64;
            let in_bytes = (b * STEPS * 2 * 4) as f64;
            let floor = in_bytes / up + out_bytes / down;
            let mut r = rec(
                "cuda bus floor of filter end to end",
                &[floor],
                json!({
                    "h2d_GBps": up / 1e9,
                    "d2h_GBps": down / 1e9,
                    "bytes_in": in_bytes,
                    "bytes_out": out_bytes,
                    "end_to_end_s": e2e_all,
                    "end_to_end_fraction_of_bus": floor / e2e_all,
                }),
            );
            r.repeats = 1;
            sink.push(r);
        }
    }
    multi_gpu(sink, &cv, quick, true)?;
    if !quick {
        let b = 4_000_000;
        let z = measurements(&cv, b, STEPS)?;
        let db = DeviceBatch::new(0, &cv, &z, Keep::Last, OutputLayout::Host, false, &opts)?;
        let t = kernel_times(2, 7, || db.filter())?;
        let mut r = Record::new(
            "cuda filter kernel (keep last)",
            dev.clone(),
            "f32",
            b,
            STEPS,
            4,
            2,
            &t,
        );
        r.extra = roofline(8.0, fl, (b * STEPS) as f64, median(&t));
        sink.push(r);
    }
    tracker(sink, &dev, &cv, if quick { 100_000 } else { 1_000_000 })?;
    thesis(sink, &dev, quick)?;
    Ok(())
}

/// Bus bandwidth `(H2D, D2H)` of device 0 in bytes/s.
fn cuda_bus(bytes: usize) -> anyhow::Result<(f64, f64)> {
    Ok(kestrel::cuda::bus_bandwidth(0, bytes)?)
}

/// `KESTREL_BENCH_CUDA`: unset, the whole family (`None`); `multi`, the comparison of one
/// GPU with several alone (`Some(true)`); `multi-kernels`, its kernel-only part
/// (`Some(false)`). Any other value is a usage error (`kestrel bench` checks the knobs
/// before any family runs).
pub fn multi_only() -> anyhow::Result<Option<bool>> {
    match std::env::var("KESTREL_BENCH_CUDA") {
        Err(_) => Ok(None),
        Ok(v) => match v.trim() {
            "multi" => Ok(Some(true)),
            "multi-kernels" => Ok(Some(false)),
            _ => Err(crate::cmd::bad(format!(
                "KESTREL_BENCH_CUDA={v:?}: expected multi or multi-kernels"
            ))),
        },
    }
}

/// Tracks of the multi-GPU comparison: `KESTREL_BENCH_MULTI_TRACKS` (default 2x10^6,
/// 2x10^5 `quick`). A given value that is not a positive number, or whose host arrays (the
/// measurements, and with `e2e` the filtered and smoothed estimates) exceed the memory
/// available, is a usage error.
pub fn multi_tracks(quick: bool, e2e: bool) -> anyhow::Result<usize> {
    let b = match std::env::var("KESTREL_BENCH_MULTI_TRACKS") {
        Err(_) if quick => return Ok(200_000),
        Err(_) => return Ok(2_000_000),
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&b| b >= 1)
            .ok_or_else(|| {
                crate::cmd::bad(format!(
                    "KESTREL_BENCH_MULTI_TRACKS={v:?}: expected a number of tracks >= 1"
                ))
            })?,
    };
    // f32 scalars a track-step: measurements (ny 2), and the filter's and smoother's
    // means, covariances and log-likelihoods (nx 4).
    let per = if e2e { 2 + 2 * (4 + 16) + 1 } else { 2 };
    kestrel::limits::check_bytes(
        "KESTREL_BENCH_MULTI_TRACKS",
        b as u128 * STEPS as u128 * per * 4,
    )
    .map_err(|e| crate::cmd::bad(format!("KESTREL_BENCH_MULTI_TRACKS={b}: {e}")))?;
    Ok(b)
}

/// `KESTREL_BENCH_MULTI_PIECE`: the most tracks of one device-resident piece of the
/// multi-GPU kernel comparison (unset: no cap beyond memory); a value that is not a
/// positive number is a usage error.
pub fn piece_cap() -> anyhow::Result<usize> {
    match std::env::var("KESTREL_BENCH_MULTI_PIECE") {
        Err(_) => Ok(usize::MAX),
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&c| c >= 1)
            .ok_or_else(|| {
                crate::cmd::bad(format!(
                    "KESTREL_BENCH_MULTI_PIECE={v:?}: expected a number of tracks >= 1"
                ))
            }),
    }
}

/// All GPUs of the host against one (`--device cuda:all`): B tracks of T = 100 steps
/// (`KESTREL_BENCH_MULTI_TRACKS`, default 2x10^6, 2x10^5 quick) on 1, 2, 4, ... of the
/// host's GPUs (and all of them), each count a pair with one GPU in the same run:
/// - end to end from host arrays (`kalman::cuda::{filter,smooth}_on_devices`): the
///   filter with all outputs and with mean and log-likelihood, and the filter + RTS
///   smoother;
/// - kernel only (device-resident data, SoA layout as the pipeline runs it): each GPU
///   takes its share in pieces that fit its memory, all GPUs at once, one host thread
///   each; the figure is the slowest GPU's sum of its pieces' median kernel times.
///
/// `extra` names the GPUs, the speedup over one and the scaling efficiency (speedup /
/// GPUs). Without `e2e` the kernel-only part alone.
fn multi_gpu(sink: &mut Sink, model: &Model, quick: bool, e2e: bool) -> anyhow::Result<()> {
    let n = kestrel::cuda::device_count();
    if n < 2 {
        outln!("multi-GPU benchmark skipped: {n} CUDA device(s) on this host");
        return Ok(());
    }
    let b = multi_tracks(quick, e2e)?;
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |k| Some(k * 2))
        .take_while(|&k| k <= n)
        .collect();
    if counts.last() != Some(&n) {
        counts.push(n);
    }
    let opts = CudaOptions::default();
    let name0 = kestrel::cuda::device_name(0)?;
    let record = |name: String, k: usize, t: &[f64], one: Option<f64>| {
        let mut r = Record::new(
            name,
            format!("cuda:0..{} ({name0})", k - 1),
            "f32",
            b,
            STEPS,
            4,
            2,
            t,
        );
        let speedup = one.map_or(1.0, |o| o / median(t));
        r.extra = json!({"devices": k, "speedup_over_one": speedup,
                         "efficiency": speedup / k as f64});
        r
    };
    if e2e {
        // End to end, host arrays in and out.
        let z = measurements(model, b, STEPS)?;
        let reps = if b >= 5_000_000 { 3 } else { 5 };
        type Job<'a> = (&'a str, Box<dyn Fn(&[usize]) -> kestrel::Result<()> + 'a>);
        let jobs: Vec<Job<'_>> = vec![
            (
                "cuda filter end to end (mean,cov,loglik)",
                Box::new(|devs| {
                    let fo = FilterOptions::default();
                    cuda::filter_on_devices(devs, model, &z, &fo, &opts).map(drop)
                }),
            ),
            (
                "cuda filter end to end (mean,loglik)",
                Box::new(|devs| {
                    let fo = FilterOptions::default()
                        .with_outputs(kestrel::data::Outputs::parse("mean,loglik")?);
                    cuda::filter_on_devices(devs, model, &z, &fo, &opts).map(drop)
                }),
            ),
            (
                "cuda filter+smoother end to end",
                Box::new(|devs| cuda::smooth_on_devices(devs, model, &z, &opts).map(drop)),
            ),
        ];
        for (name, job) in &jobs {
            let mut one = None;
            for &k in &counts {
                let devs: Vec<usize> = (0..k).collect();
                let mut err = None;
                let t = time_runs(1, reps, || {
                    if let Err(e) = job(&devs) {
                        err.get_or_insert(e);
                    }
                });
                if let Some(e) = err {
                    return Err(anyhow::anyhow!("{name} on {k} GPU(s), B = {b}: {e}"));
                }
                sink.push(record(format!("{name}, {k} GPU(s)"), k, &t, one));
                one = one.or(Some(median(&t)));
            }
        }
    }
    // Kernel only.
    for smoothed in [false, true] {
        let name = if smoothed {
            "cuda filter+smoother kernels"
        } else {
            "cuda filter kernel"
        };
        let mut one = None;
        for &k in &counts {
            let (t, pieces) = kernels_at_once(model, b, k, smoothed, &opts)?;
            let mut r = record(
                format!("{name}, {k} GPU(s) at once (device-resident, soa)"),
                k,
                &t,
                one,
            );
            r.extra["pieces_per_gpu"] = json!(pieces
                .iter()
                .map(|p| p
                    .iter()
                    .map(|&(n, s)| json!({"tracks": n, "median_s": s}))
                    .collect::<Vec<_>>())
                .collect::<Vec<_>>());
            sink.push(r);
            one = one.or(Some(median(&t)));
        }
    }
    Ok(())
}

/// The filter kernel (and the RTS smoother's, `smoothed`) on GPUs `0..k` at once, B
/// tracks split evenly, each GPU's share in pieces that fit 80% of its usable memory
/// and 64 GB:
/// per repeat, the slowest GPU's total kernel time (CUDA events) over its pieces, 7
/// repeats after a warm-up; and each GPU's pieces (tracks, median kernel time).
/// `KESTREL_BENCH_MULTI_PIECE` caps a piece's tracks.
#[allow(clippy::type_complexity)]
fn kernels_at_once(
    model: &Model,
    b: usize,
    k: usize,
    smoothed: bool,
    opts: &CudaOptions,
) -> anyhow::Result<(Vec<f64>, Vec<Vec<(usize, f64)>>)> {
    let piece_cap = piece_cap()?;
    const REPS: usize = 7;
    let per_track =
        DeviceBatch::<f32>::bytes_per_track(model, STEPS, Keep::All, OutputLayout::Soa, smoothed);
    let per_dev: Vec<(Vec<f64>, Vec<(usize, f64)>)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..k)
            .map(|d| {
                sc.spawn(move || -> anyhow::Result<(Vec<f64>, Vec<(usize, f64)>)> {
                    let share = b / k + usize::from(d < b % k);
                    // At most 64 GB of buffers a piece: on the H200 a launch over ~120 GB
                    // of buffers ran 2.2-2.7x slower a track than one over 38-76 GB.
                    let room = (kestrel::cuda::usable_memory(d)? / 10 * 8).min(64 << 30);
                    let cap = (room / per_track).clamp(1, piece_cap);
                    let mut total = vec![0.0; REPS];
                    let mut pieces = Vec::new();
                    let mut left = share;
                    while left > 0 {
                        let piece = cap.min(left);
                        left -= piece;
                        let zs = measurements(model, piece, STEPS)?;
                        let db = DeviceBatch::new(
                            d,
                            model,
                            &zs,
                            Keep::All,
                            OutputLayout::Soa,
                            smoothed,
                            opts,
                        )?;
                        let run = || -> kestrel::Result<f64> {
                            let mut t = db.filter()?;
                            if smoothed {
                                t += db.smooth()?;
                            }
                            Ok(t)
                        };
                        // The pieces of one GPU run one after the other.
                        let t = kernel_times(1, REPS, run)?;
                        pieces.push((piece, median(&t)));
                        for (x, y) in total.iter_mut().zip(t) {
                            *x += y;
                        }
                    }
                    Ok((total, pieces))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a device thread panicked")))
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    Ok((
        (0..REPS)
            .map(|i| per_dev.iter().map(|w| w.0[i]).fold(0.0, f64::max))
            .collect(),
        per_dev.into_iter().map(|w| w.1).collect(),
    ))
}

/// The per-step API on the GPU: one predict and one update of every target per step,
/// the update's measurements copied from the caller's rows each time.
fn tracker(sink: &mut Sink, dev: &str, model: &Model, n: usize) -> anyhow::Result<()> {
    let mut tr = BatchTracker::<f32>::new(0, model, n, &CudaOptions::default())?;
    for _ in 0..n {
        tr.add()?;
    }
    let z = measurements(model, n, 1)?;
    tr.update(z.data(), None, None)?;
    tr.synchronize()?;
    let steps = 200;
    let mut wall = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        for _ in 0..steps {
            tr.predict()?;
            tr.update(z.data(), None, None)?;
        }
        tr.synchronize()?;
        wall.push(t0.elapsed().as_secs_f64() / steps as f64);
    }
    let h2d = (n * 2 * 4) as f64;
    let mut r = Record::new(
        "cuda per-step predict + update (with H2D copy)",
        dev.to_string(),
        "f32",
        n,
        1,
        4,
        2,
        &wall,
    );
    r.extra = json!({"us_per_step": median(&wall) * 1e6, "h2d_bytes_per_step": h2d,
                     "h2d_GBps": h2d / median(&wall) / 1e9});
    sink.push(r);
    let mut dev_t = Vec::new();
    for _ in 0..5 {
        let t = tr.time_device(|t| {
            for _ in 0..steps {
                t.predict()?;
            }
            Ok(())
        })?;
        dev_t.push(t / steps as f64);
    }
    tr.synchronize()?;
    let mut r = Record::new(
        "cuda per-step predict (kernel only)",
        dev.to_string(),
        "f32",
        n,
        1,
        4,
        2,
        &dev_t,
    );
    // Read and write mean + packed covariance, read the slot flag.
    let by = (2 * (4 + 10)) as f64 * 4.0 + 1.0;
    r.extra = json!({"us_per_step": median(&dev_t) * 1e6, "bytes_per_target": by,
                     "fraction_of_bandwidth_roofline": by * n as f64 / median(&dev_t) / super::device_bandwidth()});
    sink.push(r);
    Ok(())
}

/// The thesis's model (2-D constant acceleration, nx 6, ny 2, f32): 262,144
/// measurements (2,048 targets x 128 steps), end to end, beside its Table 2.4 (1.74 s
/// on a GTX 570), and the kernel's throughput on 10^6 targets.
fn thesis(sink: &mut Sink, dev: &str, quick: bool) -> anyhow::Result<()> {
    let ca = kestrel::model::constant_acceleration(2, 1.0, 0.5, 25.0, 100.0)?;
    let z = measurements(&ca, 2048, 128)?;
    let opts = CudaOptions::default();
    let fo = FilterOptions::default();
    let t = time_runs(1, 7, || {
        let _ = std::hint::black_box(cuda::filter_with(0, &ca, &z, &fo, &opts));
    });
    let mut r = Record::new(
        "cuda thesis model end to end (262,144 meas.)",
        dev.to_string(),
        "f32",
        2048,
        128,
        6,
        2,
        &t,
    );
    r.extra = json!({"thesis_table_2_4_s": 1.737119, "speedup_vs_thesis": 1.737119 / median(&t)});
    sink.push(r);
    let b = if quick { 100_000 } else { 1_000_000 };
    let z = measurements(&ca, b, STEPS)?;
    let db = DeviceBatch::new(0, &ca, &z, Keep::All, OutputLayout::Soa, false, &opts)?;
    let t = kernel_times(2, 7, || db.filter())?;
    let mut r = Record::new(
        "cuda thesis model filter kernel",
        dev.to_string(),
        "f32",
        b,
        STEPS,
        6,
        2,
        &t,
    );
    r.extra = roofline(
        ((2 + 6 + 21 + 1) * 4) as f64,
        flops_per_step(6, 2),
        (b * STEPS) as f64,
        median(&t),
    );
    sink.push(r);
    Ok(())
}
