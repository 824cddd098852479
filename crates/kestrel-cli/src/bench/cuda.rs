//! Benchmarks of the CUDA paths: the batched filter and smoother kernels timed alone with
//! CUDA events (device-resident batches), the same end to end with the host copies, the
//! streaming tracker's step, and the thesis's 6-state model. Medians after warm-up.
//!
//! Roofline: bytes that must move per target-step (read z, write mean, covariance and
//! log-likelihood) over the H100's 2.9 TB/s device bandwidth, and the dense recursion's
//! flops over 51 TFLOP/s FP32 (DESIGN.md).

use super::{median, time_runs, Record, Sink};
use kestrel::kalman::cuda::{self, BatchTracker, CudaOptions, DeviceBatch, OutputLayout};
use kestrel::{FilterOptions, Keep, Measurements, Model};
use serde_json::json;
use std::time::Instant;

const STEPS: usize = 100;
/// Measured device-to-device bandwidth of the H100 here (ANCHORS.md), bytes/s.
const BANDWIDTH: f64 = 2.9e12;
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
    json!({
        "bytes_per_target_step": bytes_per_step,
        "bandwidth_GBps": bw / 1e9,
        "fraction_of_bandwidth_roofline": bw / BANDWIDTH,
        "bytes_floor_s": bytes_per_step * target_steps / BANDWIDTH,
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
        let t = time_runs(1, reps_e2e, || {
            let _ = std::hint::black_box(cuda::smooth(0, &cv, &z, &opts));
        });
        sink.push(rec(
            "cuda filter+smoother end to end",
            &t,
            json!({"includes": "H2D z, both kernels, D2H filtered and smoothed"}),
        ));
    }
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
                     "fraction_of_bandwidth_roofline": by * n as f64 / median(&dev_t) / BANDWIDTH});
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
