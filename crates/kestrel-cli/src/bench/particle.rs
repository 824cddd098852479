//! Particle filter benchmarks: particle-steps per second of the bootstrap filter on the
//! seed's case (two range sensors, 2-D constant velocity) for N = 10^3 ... 10^7 (B = 1)
//! and B = 10^4 filters x N = 10^3, resampling every step; each resampler alone; CPU
//! (f64) and GPU (f32). GPU records carry the roofline: the bytes a particle-step must
//! move (kernels/pf.cu) over the device's bandwidth measured in the same run.

use super::{fmt_time, time_runs, Record, Sink};
use kestrel::particle::philox::{counter, key_of, philox4x32_10, uniform_f64, Purpose};
use kestrel::particle::resample::{resample, Draws, Scratch};
use kestrel::particle::{particle_filter_on, pf_model_from_toml, PfModel, PfOptions, Resampler};
use kestrel::{Device, Measurements, Real};
use std::path::Path;

/// Bytes one particle-step moves on the GPU with resampling every step (f32, nx = 4):
/// ancestors (the cumulative weights staged once, f64, an index written: 12), step (the
/// index and the ancestor read, the particle and its log-weight written: 40), cumulative
/// sum (log-weight read, f64 written: 12).
const GPU_BYTES_PER_PARTICLE_STEP: f64 = 64.0;
/// The same without resampling: the particle and its log-weight read and written (40).
const GPU_BYTES_NO_RESAMPLING: f64 = 40.0;

fn model() -> anyhow::Result<PfModel> {
    Ok(pf_model_from_toml(
        crate::cmd::pf::DEMO_MODEL,
        Path::new("bench model"),
    )?)
}

fn measurements<T: Real>(b: usize, t: usize) -> anyhow::Result<Measurements<T>> {
    let (_, z) = kestrel::particle::simulate(&model()?, b, t, 1, 0.0)?;
    Ok(z.cast())
}

fn filter_record<T: Real>(
    sink: &mut Sink,
    device: Device,
    b: usize,
    n: usize,
    t: usize,
    ess: f64,
    repeats: usize,
) -> anyhow::Result<f64> {
    let m = model()?;
    let z = measurements::<T>(b, t)?;
    let mut opts = PfOptions::new(n);
    opts.ess_threshold = ess;
    let mut err = None;
    let times = time_runs(1, repeats, || {
        if let Err(e) = particle_filter_on(device, &m, &z, &opts) {
            err = Some(e);
        }
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    let mut r = Record::new(
        format!(
            "pf/range-only/N={n}{}",
            if ess >= 1.0 { "" } else { "/no-resampling" }
        ),
        device.to_string(),
        T::NAME,
        b,
        t,
        4,
        2,
        &times,
    );
    let ps = (b * t * n) as f64 / r.median_s;
    let mut extra = serde_json::json!({ "particles": n, "particle_steps_per_s": ps, "resampler": "systematic", "ess_threshold": ess });
    if matches!(device, Device::Cuda(_)) {
        let bandwidth = super::device_bandwidth();
        let bytes = if ess > 0.0 {
            GPU_BYTES_PER_PARTICLE_STEP
        } else {
            GPU_BYTES_NO_RESAMPLING
        };
        let roof = bandwidth / bytes;
        extra["bytes_per_particle_step"] = serde_json::json!(bytes);
        extra["bandwidth_Bps"] = serde_json::json!(bandwidth);
        extra["roofline_particle_steps_per_s"] = serde_json::json!(roof);
        extra["fraction_of_roofline"] = serde_json::json!(ps / roof);
    }
    r.extra = extra;
    errln!(
        "pf {} {} B={b} N={n} T={t}: {} per run, {ps:.3e} particle-steps/s",
        device,
        T::NAME,
        fmt_time(r.median_s)
    );
    let secs = r.median_s;
    sink.push(r);
    Ok(secs)
}

fn resampler_records(sink: &mut Sink, n: usize, repeats: usize) {
    let key = key_of(3);
    let w: Vec<f64> = (0..n)
        .map(|i| {
            let u =
                uniform_f64(philox4x32_10(counter(i as u32, 0, 0, Purpose::SimState, 0), key)[0]);
            (-4.0 * u).exp()
        })
        .collect();
    let mut anc = vec![0u32; n];
    let mut scratch = Scratch::default();
    for scheme in Resampler::ALL {
        let mut k = 0u32;
        let times = time_runs(1, repeats, || {
            k += 1;
            let d = Draws {
                key,
                filter: 0,
                step: k,
            };
            resample(scheme, &w, d, &mut anc, &mut scratch, true)
                .expect("the benchmark's weights are within the rejection budget");
        });
        let mut r = Record::new(
            format!("resample/{scheme}/N={n}"),
            Device::Cpu.to_string(),
            "f64",
            1,
            1,
            0,
            0,
            &times,
        );
        r.extra = serde_json::json!({ "particles": n, "particles_per_s": n as f64 / r.median_s });
        errln!("resample {scheme} N={n} (cpu): {}", fmt_time(r.median_s));
        sink.push(r);
    }
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    let (t, sizes): (usize, &[usize]) = if quick {
        (20, &[1_000, 10_000, 100_000])
    } else {
        (100, &[1_000, 10_000, 100_000, 1_000_000])
    };
    if std::env::var("KESTREL_BENCH_GPU_ONLY").is_err() {
        for &n in sizes {
            let reps = if n >= 1_000_000 { 2 } else { 3 };
            filter_record::<f64>(sink, Device::Cpu, 1, n, t, 1.0, reps)?;
        }
        filter_record::<f64>(
            sink,
            Device::Cpu,
            if quick { 1_000 } else { 10_000 },
            1_000,
            if quick { 2 } else { 5 },
            1.0,
            2,
        )?;
        resampler_records(sink, if quick { 100_000 } else { 1_000_000 }, 3);
    }
    if kestrel::cuda::available(0).is_err() {
        errln!("bench particle: no usable GPU, CPU records only");
        return Ok(());
    }
    let gpu = Device::Cuda(0);
    let gsizes: &[usize] = if quick {
        &[1_000, 100_000, 1_000_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    };
    let tg = if quick { 20 } else { 100 };
    for &n in gsizes {
        // The seed's length (T = 1000) at the largest size of the full run.
        let tg = if !quick && n >= 10_000_000 { 1000 } else { tg };
        let with = filter_record::<f32>(sink, gpu, 1, n, tg, 1.0, 3)?;
        if n == *gsizes.last().unwrap() {
            // Resampling alone: the same run with and without resampling.
            let without = filter_record::<f32>(sink, gpu, 1, n, tg, 0.0, 3)?;
            let per_step = (with - without) / tg as f64;
            errln!("pf cuda f32 N={n}: resampling (cumulative sum, systematic ancestors, gather) {} per step", fmt_time(per_step));
            let mut r = Record::new(
                format!("pf/resampling-per-step/N={n}"),
                gpu.to_string(),
                "f32",
                1,
                1,
                4,
                2,
                &[per_step.max(0.0)],
            );
            r.extra = serde_json::json!({ "particles": n, "resampler": "systematic", "note": "difference of runs with and without resampling, per step" });
            sink.push(r);
        }
    }
    filter_record::<f32>(sink, gpu, 10_000, 1_000, tg, 1.0, 3)?;
    if !quick {
        block_records(sink, tg)?;
    }
    // Each resampler alone on the GPU: its runs less the same filter without resampling.
    let n_alone = if quick { 1_000_000 } else { 10_000_000 };
    let without = filter_record::<f32>(sink, gpu, 1, n_alone, tg, 0.0, 3)?;
    // The searches beside Hendeby et al.'s grid selection (the same ancestors), the
    // GPU multinomial and resampling in subsets.
    let mut alone_of = std::collections::HashMap::new();
    for scheme in [
        Resampler::Systematic,
        Resampler::Stratified,
        Resampler::Metropolis(32),
        Resampler::Rejection,
        Resampler::SystematicGrid,
        Resampler::StratifiedGrid,
        Resampler::Multinomial,
        Resampler::Subsets(64),
    ] {
        let m = model()?;
        let n = n_alone;
        let z = measurements::<f32>(1, tg)?;
        let mut opts = PfOptions::new(n);
        opts.resampler = scheme;
        opts.ess_threshold = 1.0;
        let mut err = None;
        let times = time_runs(1, 3, || {
            if let Err(e) = particle_filter_on(gpu, &m, &z, &opts) {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(e.into());
        }
        let mut r = Record::new(
            format!("pf/range-only/{scheme}/N={n}"),
            gpu.to_string(),
            "f32",
            1,
            tg,
            4,
            2,
            &times,
        );
        let ps = (tg * n) as f64 / r.median_s;
        r.extra = serde_json::json!({ "particles": n, "particle_steps_per_s": ps, "resampler": scheme.to_string() });
        errln!("pf cuda f32 {scheme} N={n}: {ps:.3e} particle-steps/s");
        let alone = (r.median_s - without) / tg as f64;
        sink.push(r);
        errln!(
            "pf cuda f32 N={n}: {scheme} resampling alone {} per step",
            fmt_time(alone)
        );
        let mut a = Record::new(
            format!("pf/resampling-per-step/{scheme}/N={n}"),
            gpu.to_string(),
            "f32",
            1,
            1,
            4,
            2,
            &[alone.max(0.0)],
        );
        a.extra = serde_json::json!({ "particles": n, "resampler": scheme.to_string(), "note": "difference of runs with and without resampling, per step" });
        sink.push(a);
        alone_of.insert(scheme, alone.max(1e-9));
    }
    for (search, grid) in [
        (Resampler::Systematic, Resampler::SystematicGrid),
        (Resampler::Stratified, Resampler::StratifiedGrid),
    ] {
        let (ts, tg_) = (alone_of[&search], alone_of[&grid]);
        errln!(
            "pf cuda f32 N={n_alone}: {search} by pf_offspring {} a step, by the grid {} ({:.2}x)",
            fmt_time(ts),
            fmt_time(tg_),
            ts / tg_
        );
        let mut r = Record::new(
            format!("pf/grid-vs-search/{search}/N={n_alone}"),
            gpu.to_string(),
            "f32",
            1,
            1,
            4,
            2,
            &[tg_],
        );
        r.extra = serde_json::json!({ "particles": n_alone, "search_s": ts, "grid_s": tg_, "speedup": ts / tg_, "note": "resampling alone per step: pf_offspring (the cumulative sum, each particle writing its slots) against the grid selection of pf_grid (cumulative sum and count)" });
        sink.push(r);
    }
    Ok(())
}

/// Threads per block of the GPU filter (the default is `particle::cuda::block_for`):
/// B = 10^4 x N = 10^3 and B = 1 x N = 10^7, f32, resampling every step.
fn block_records(sink: &mut Sink, t: usize) -> anyhow::Result<()> {
    let m = model()?;
    for (b, n) in [(10_000usize, 1_000usize), (1, 10_000_000)] {
        let z = measurements::<f32>(b, t)?;
        let opts = PfOptions::new(n);
        for block in [64u32, 128, 256, 512] {
            let mut err = None;
            let times = time_runs(1, 3, || {
                if let Err(e) =
                    kestrel::particle::cuda::particle_filter_cuda_block(0, &m, &z, &opts, block)
                {
                    err = Some(e);
                }
            });
            if let Some(e) = err {
                return Err(e.into());
            }
            let mut r = Record::new(
                format!("pf/block-{block}/B={b}/N={n}"),
                Device::Cuda(0).to_string(),
                "f32",
                b,
                t,
                4,
                2,
                &times,
            );
            let ps = (b * t * n) as f64 / r.median_s;
            r.extra =
                serde_json::json!({ "particles": n, "block": block, "particle_steps_per_s": ps });
            errln!("pf cuda f32 B={b} N={n} block {block}: {ps:.3e} particle-steps/s");
            sink.push(r);
        }
    }
    Ok(())
}
