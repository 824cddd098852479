//! `kestrel demo`: the README's main job. Simulates many targets moving with a 2-D
//! constant-velocity model (Bar-Shalom et al., sec. 6.2: white-noise acceleration),
//! filters and smooths them on the best device, and reports throughput and accuracy:
//! position RMSE of the raw measurements, the filter and the smoother, and the mean NEES
//! of filter and smoother (consistent estimates give about nx = 4). A few tracks are
//! plotted.

use super::plot::{write_svg, TrackPlot};
use super::{bad, choose_device, rate, Precision, Progress};
use kestrel::kalman::cuda::source::Part;
use kestrel::{Device, Estimates, FilterMethod, FilterOptions, Measurements, Real, SmoothMethod};
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

/// Spectral density of the white-noise acceleration (m^2/s^3).
const Q: f64 = 0.5;
/// Variance of each position measurement (m^2): 5 m standard deviation.
const R: f64 = 25.0;
/// Prior variance of every state component.
const P0: f64 = 100.0;
/// Probability that a measurement is missing.
const MISSING: f64 = 0.05;
/// Tracks drawn in the plot.
const PLOTTED: usize = 4;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of targets.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    tracks: usize,
    /// Steps per target (dt = 1 s).
    #[arg(long, value_name = "T", default_value_t = 100)]
    steps: usize,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Default: f64 on the CPU, f32 on a GPU.
    #[arg(long, value_enum)]
    precision: Option<Precision>,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run the particle-filter demo instead: the seed's target measured by two range
    /// sensors (one target, `--steps` steps), plotted with its particle cloud.
    #[arg(long)]
    pf: bool,
    /// Particles of the `--pf` demo.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    particles: usize,
    /// Where to write the plot of a few tracks (SVG).
    #[arg(long, value_name = "FILE.svg", default_value = "kestrel-demo.svg")]
    plot: PathBuf,
    /// Multi-target tracking instead: crossing targets in clutter, tracked with GNN and
    /// JPDA, scored with GOSPA and CLEAR MOT.
    #[arg(long)]
    tracking: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let ext = a
        .plot
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    if ext.as_deref() != Some("svg") {
        return Err(bad(format!(
            "--plot {}: the plot is written as SVG; name a .svg file",
            a.plot.display()
        )));
    }
    let outputs = kestrel::io::Outputs::plan(&[], &[&a.plot])?;
    if a.tracking {
        super::demo_tracking::run(&a.plot, a.seed)?;
        return Ok(outputs.commit()?);
    }
    if a.tracks == 0 || a.steps == 0 {
        return Err(bad("--tracks and --steps must be at least 1"));
    }
    let device = if a.device == "auto" && !a.pf {
        // The Kalman demo: the GPU only where it pays for its set-up.
        let model = kestrel::model::constant_velocity(2, 1.0, Q, R, P0)?;
        let rows = (a.tracks as u64).saturating_mul(a.steps as u64);
        let choice = kestrel::kalman::cuda::choose::<f32>(&model, rows, true);
        match kestrel::kalman::cuda::gpu_setup::<f32>(&model, true) {
            // The demo is there to show what the machine can do: a usable GPU is
            // shown, with its first-use cost apart (what --device auto would choose
            // for this job alone is said beside it).
            kestrel::kalman::cuda::GpuSetup::Secs(_) if choice.device == Device::Cpu => {
                super::note(format!(
                    "device: cuda:0 (auto: the demo shows the GPU; for this job alone --device auto chooses the CPU: {})",
                    choice.reason
                ));
                Device::Cuda(0)
            }
            _ => {
                super::note(format!(
                    "device: {} (auto: {})",
                    choice.device, choice.reason
                ));
                choice.device
            }
        }
    } else {
        choose_device(&a.device)?
    };
    if a.pf {
        if a.particles == 0 {
            return Err(bad("--particles must be at least 1"));
        }
        super::pf::demo(a.steps, a.particles, a.seed, device, &a.plot)?;
        outputs.commit()?;
        return Ok(());
    }
    match a.precision.unwrap_or(Precision::default_for(device)) {
        Precision::F64 => run_typed::<f64>(&a, device)?,
        Precision::F32 => run_typed::<f32>(&a, device)?,
    }
    outputs.commit()?;
    Ok(())
}

/// Mean NEES `(x - m)^T P^{-1} (x - m)` over all tracks and steps (the per-step
/// `kestrel::kalman::nees`, tracks in parallel).
fn mean_nees<T: Real>(est: &Estimates<T>, truth: &[f64]) -> f64 {
    let nx = est.nx();
    let sum: f64 = (0..est.tracks())
        .into_par_iter()
        .map(|b| {
            let mut err = vec![0.0; nx];
            let mut cov = vec![0.0; nx * nx];
            (0..est.steps())
                .map(|k| {
                    let o = (b * est.steps() + k) * nx;
                    for (i, m) in est.mean_at(b, k).iter().enumerate() {
                        err[i] = truth[o + i] - m.to_f64();
                    }
                    for (c, p) in cov.iter_mut().zip(est.cov_at(b, k)) {
                        *c = p.to_f64();
                    }
                    kestrel::kalman::nees(&err, &cov)
                })
                .sum::<f64>()
        })
        .sum();
    sum / (est.tracks() * est.steps()).max(1) as f64
}

/// Positions `(x, y)` (state components 0 and 2) of every track and step.
fn positions<T: Real>(e: &Estimates<T>) -> Vec<T> {
    e.mean().chunks(e.nx()).flat_map(|m| [m[0], m[2]]).collect()
}

fn run_typed<T: Real>(a: &Args, device: Device) -> anyhow::Result<()> {
    let model = kestrel::model::constant_velocity(2, 1.0, Q, R, P0)?;
    let (b, t) = (a.tracks, a.steps);
    let n = b * t;
    outln!(
        "kestrel demo: {b} targets x {t} steps, 2-D constant velocity (nx 4, ny 2, q {Q}, r {R}, {:.0}% of measurements missing), {} on {device}",
        MISSING * 100.0,
        T::NAME
    );
    // On a GPU, its set-up (opening the device, compiling or loading the kernels) is
    // timed apart from the filter and smoother.
    let setup = if let Device::Cuda(i) = device {
        let t0 = Instant::now();
        kestrel::cuda::device_name(i)?;
        let open = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let mut compiled = false;
        for part in [Part::Filter, Part::Smooth] {
            compiled |= !kestrel::kalman::cuda::kernels_cached::<T>(i, &model, true, part);
            kestrel::kalman::cuda::compile_kernels::<T>(i, &model, true, part)?;
        }
        Some((open, t0.elapsed().as_secs_f64(), compiled))
    } else {
        None
    };
    let progress = Progress::new("simulating");
    let t0 = Instant::now();
    let sim = kestrel::sim::simulate(&model, b, t, a.seed, MISSING)?;
    let t_sim = t0.elapsed().as_secs_f64();
    let z: Measurements<T> = sim.measurements.cast();

    progress.phase("filtering");
    let t1 = Instant::now();
    let f = kestrel::filter_on(
        device,
        &model,
        &z,
        FilterMethod::Sequential,
        &FilterOptions::default(),
    )?
    .filtered;
    let t_filter = t1.elapsed().as_secs_f64();
    let loglik = f.total_loglik();
    drop(f);

    progress.phase("smoothing");
    let t2 = Instant::now();
    let kestrel::Smoothed {
        filtered: f,
        smoothed: s,
        ..
    } = kestrel::smooth_on(device, &model, &z, SmoothMethod::Rts)?;
    let t_smooth = t2.elapsed().as_secs_f64();

    progress.phase("scoring");
    let truth_t: Vec<T> = sim.truth.iter().map(|&v| T::of(v)).collect();
    let pos = [0, 2];
    let rmse_raw = kestrel::kalman::rmse(z.data(), 2, &truth_t, 4, &pos);
    let rmse_f = kestrel::kalman::rmse(&positions(&f), 2, &truth_t, 4, &pos);
    let rmse_s = kestrel::kalman::rmse(&positions(&s), 2, &truth_t, 4, &pos);
    let nees_f = mean_nees(&f, &sim.truth);
    let nees_s = mean_nees(&s, &sim.truth);

    progress.phase("plotting");
    let xy = |v: &[f64], k: usize, w: usize, i: usize, j: usize| (v[k * w + i], v[k * w + j]);
    let shown: Vec<TrackPlot> = (0..b.min(PLOTTED))
        .map(|tr| {
            let truth = &sim.truth[tr * t * 4..(tr + 1) * t * 4];
            let zs = sim.measurements.track(tr);
            let fm: Vec<f64> = f.mean()[tr * t * 4..(tr + 1) * t * 4]
                .iter()
                .map(|v| v.to_f64())
                .collect();
            let sm: Vec<f64> = s.mean()[tr * t * 4..(tr + 1) * t * 4]
                .iter()
                .map(|v| v.to_f64())
                .collect();
            TrackPlot {
                track: tr,
                truth: (0..t).map(|k| xy(truth, k, 4, 0, 2)).collect(),
                measured: (0..t)
                    .map(|k| xy(zs, k, 2, 0, 1))
                    .filter(|p| !p.0.is_nan())
                    .collect(),
                filtered: (0..t).map(|k| xy(&fm, k, 4, 0, 2)).collect(),
                smoothed: (0..t).map(|k| xy(&sm, k, 4, 0, 2)).collect(),
            }
        })
        .collect();
    let title = format!(
        "kestrel demo: {} of {b} tracks, 2-D constant velocity, {}",
        shown.len(),
        T::NAME
    );
    write_svg(&a.plot, &shown, &title)?;
    progress.finish();

    if let Some((open, kernels, compiled)) = setup {
        outln!(
            "  GPU set-up           {:>8.3} s   (first use in this process: device {open:.3} s, kernels {kernels:.3} s {})",
            open + kernels,
            if compiled {
                "compiled, now cached on disk"
            } else {
                "loaded from the disk cache"
            }
        );
    }
    outln!("  simulate             {t_sim:>8.3} s");
    outln!(
        "  filter               {t_filter:>8.3} s   {}",
        rate(n, t_filter)
    );
    outln!(
        "  smoother (filter+RTS){t_smooth:>8.3} s   {}",
        rate(n, t_smooth)
    );
    outln!("  total log-likelihood {loglik:.6e}");
    outln!("  position RMSE        measurements {rmse_raw:.3}   filter {rmse_f:.3}   smoother {rmse_s:.3}");
    outln!("  mean NEES (nx = 4)   filter {nees_f:.3}   smoother {nees_s:.3}");
    outln!(
        "  plot of {} -> {}",
        super::plural(shown.len(), "track"),
        a.plot.display()
    );
    Ok(())
}
