//! `kestrel pf`: the bootstrap particle filter, measurements in, estimates out; the
//! nonlinear kinds of `kestrel simulate`; and `kestrel demo --pf`, the seed's two range
//! sensors (Hendeby, Karlsson & Gustafsson) with a plot of truth, the particles' mean
//! and the particle cloud.

use super::{bad, choose_device, Precision, Progress};
use kestrel::io::{self, Format, ESTIMATE_FORMATS, MEASUREMENT_FORMATS};
use kestrel::particle::{
    load_pf_model, particle_filter_on, PfKind, PfModel, PfOptions, PfOutput, Resampler,
};
use kestrel::{Device, Measurements, Real};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file (TOML): any kind `kestrel filter` accepts, or range-only,
    /// bearings-only, range-bearing, stochastic-volatility, custom.
    #[arg(long, value_name = "M.toml")]
    model: PathBuf,
    /// Measurements: `.csv` (track,t,z0,..) or `.npy` ([B, T, ny]); NaN = missing.
    #[arg(long, value_name = "Z.csv|Z.npy")]
    input: PathBuf,
    /// Estimates: `.npz` (mean, cov, loglik, ess) or `.csv` (track,t,x..,P..,loglik,ess).
    #[arg(long, value_name = "OUT.npz|OUT.csv")]
    output: PathBuf,
    /// Particles per track, N.
    #[arg(long, value_name = "N")]
    particles: usize,
    /// systematic, stratified, multinomial, residual, metropolis[:B], rejection,
    /// systematic:grid or stratified:grid (each particle's slots from the grid of
    /// positions, Hendeby et al.; the same ancestors), or subsets[:S] (S subsets resampled
    /// locally, the surplus redistributed; default 16).
    #[arg(long, value_name = "SCHEME", default_value = "systematic")]
    resample: String,
    /// Resample when the effective sample size falls below this fraction of N (1: every step).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    ess: f64,
    /// Seed of the counter-based generator (results do not depend on threads or device).
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Default: f64 on the CPU, f32 on a GPU.
    #[arg(long, value_enum)]
    precision: Option<Precision>,
}

fn options(a: &Args) -> anyhow::Result<PfOptions> {
    use kestrel::limits::{count, range, End::In};
    // The upper bound is the library's (N particles per filter: at most 2^31).
    count("--particles", a.particles as u64, 1, u64::MAX)?;
    // A fraction of N: above 1 would be the same as 1 (every step), so it is refused.
    range("--ess", a.ess, In(0.0), In(1.0))?;
    let mut o = PfOptions::new(a.particles);
    o.resampler = Resampler::parse(&a.resample).map_err(|e| bad(format!("--resample: {e}")))?;
    o.ess_threshold = a.ess;
    o.seed = a.seed;
    Ok(o)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    Format::of(&a.input, MEASUREMENT_FORMATS)?;
    Format::of(&a.output, ESTIMATE_FORMATS)?;
    let opts = options(&a)?;
    let outputs = io::Outputs::plan(&[&a.model, &a.input], &[&a.output])?;
    let model = load_pf_model(&a.model)?;
    let device = choose_device(&a.device)?;
    if device == Device::Cpu {
        model.check_cpu().map_err(|e| {
            let msg = e.to_string();
            anyhow::Error::new(e).context(format!("{msg}: run it with --device cuda"))
        })?;
    }
    match a.precision.unwrap_or(Precision::default_for(device)) {
        Precision::F64 => run_typed::<f64>(&a, &model, device, &opts)?,
        Precision::F32 => run_typed::<f32>(&a, &model, device, &opts)?,
    }
    outputs.commit()?;
    Ok(())
}

fn dims(model: &PfModel) -> (usize, usize) {
    use kestrel::particle::ParticleModel;
    (
        ParticleModel::<f64>::nx(model),
        ParticleModel::<f64>::ny(model),
    )
}

fn run_typed<T: Real>(
    a: &Args,
    model: &PfModel,
    device: Device,
    opts: &PfOptions,
) -> anyhow::Result<()> {
    let progress = Progress::new("reading");
    let z: Measurements<T> = io::read_measurements(&a.input)?;
    let (nx, ny) = dims(model);
    io::check_measurement_dim(&a.input, &z, ny)?;
    z.require_data(&a.input.display().to_string())?;
    kestrel::estimate::warn_if_large_for_f32(&z);
    let setup = gpu_setup::<T>(device, model, &z, opts)?;
    progress.phase("filtering");
    let t0 = Instant::now();
    let out: PfOutput<T> = particle_filter_on(device, model, &z, opts)?;
    let secs = t0.elapsed().as_secs_f64();
    progress.phase("writing");
    io::write_estimates_with_columns(&a.output, &out.estimates, &[("ess", &out.ess)])?;
    progress.finish();
    let ps = (z.tracks() * z.steps()) as f64 * opts.particles as f64;
    errln!(
        "pf: {} x {} (kind {}, nx {nx}, ny {ny}), {} particles, {} resampling below ESS {} N, seed {}, {} on {device}: {secs:.3} s, {:.3e} particle-steps/s{setup}, total log-likelihood {:.6e} -> {}",
        super::plural(z.tracks(), "track"),
        super::plural(z.steps(), "step"),
        model.kind_name(),
        opts.particles,
        opts.resampler,
        opts.ess_threshold,
        opts.seed,
        T::NAME,
        ps / secs.max(1e-12),
        out.estimates.total_loglik(),
        a.output.display()
    );
    Ok(())
}

/// On a GPU, opens the device and compiles (or loads from the cache) the filter's kernels
/// before the timed work, so that the summary's time is the filter's (a first run
/// compiles for about a second); returns that part of the summary line.
fn gpu_setup<T: Real>(
    device: Device,
    model: &PfModel,
    z: &Measurements<T>,
    opts: &PfOptions,
) -> anyhow::Result<String> {
    let Device::Cuda(i) = device else {
        return Ok(String::new());
    };
    let t = Instant::now();
    kestrel::cuda::device_name(i)?;
    let open = t.elapsed().as_secs_f64();
    let t = Instant::now();
    kestrel::particle::cuda::compile_kernels::<T>(i, model, z.tracks(), opts.particles)?;
    let compile = t.elapsed().as_secs_f64();
    Ok(format!(
        " (GPU set-up {:.3} s before: device {open:.3} s, kernels {compile:.3} s)",
        open + compile
    ))
}

/// `kestrel simulate` for the particle filter's nonlinear kinds: `Some` when the model
/// file holds a linear-Gaussian kind (the Kalman simulation handles those, and gets the
/// planned `outputs` back).
pub fn simulate_nonlinear(
    model_path: &Path,
    (tracks, steps, seed, missing): (usize, usize, u64, f64),
    output: &Path,
    truth: Option<&Path>,
    outputs: io::Outputs,
) -> anyhow::Result<Option<io::Outputs>> {
    let model = load_pf_model(model_path)?;
    if matches!(model.kind, PfKind::Linear(_)) {
        return Ok(Some(outputs));
    }
    let (nx, ny) = dims(&model);
    let t0 = Instant::now();
    let (x, z) = kestrel::particle::simulate(&model, tracks, steps, seed, missing)?;
    io::write_measurements(output, &z)?;
    if let Some(t) = truth {
        io::write_truth(t, tracks, steps, nx, &x)?;
    }
    // Both files or neither.
    outputs.commit()?;
    errln!(
        "simulate: {} x {} (kind {}, nx {nx}, ny {ny}), seed {seed}; {:.3} s -> {}{}",
        super::plural(tracks, "track"),
        super::plural(steps, "step"),
        model.kind_name(),
        t0.elapsed().as_secs_f64(),
        output.display(),
        truth
            .map(|t| format!(", truth -> {}", t.display()))
            .unwrap_or_default()
    );
    Ok(None)
}

/// The demo's scenario: the seed's target measured by two range sensors
/// (`examples/range-only.toml`, which the README's example reads).
pub const DEMO_MODEL: &str = include_str!("../../../../examples/range-only.toml");

/// `kestrel demo --pf`: simulate the seed's case, filter it with `particles` particles,
/// report speed and accuracy, plot truth, mean and the final particle cloud.
pub fn demo(
    steps: usize,
    particles: usize,
    seed: u64,
    device: Device,
    plot: &Path,
) -> anyhow::Result<()> {
    let model = kestrel::particle::pf_model_from_toml(DEMO_MODEL, Path::new("demo model"))?;
    let (x, z) = kestrel::particle::simulate(&model, 1, steps, seed, 0.0)?;
    let mut opts = PfOptions::new(particles);
    opts.seed = seed;
    opts.keep_particles = true;
    outln!(
        "kestrel demo --pf: one target x {steps} steps, two range sensors (r 1 m^2), {particles} particles, systematic resampling below ESS N/2, f64 on {device}"
    );
    let t0 = Instant::now();
    let out = particle_filter_on::<f64>(device, &model, &z, &opts)?;
    let secs = t0.elapsed().as_secs_f64();
    let est = &out.estimates;
    let mut se = 0.0;
    for k in 0..steps {
        let m = est.mean_at(0, k);
        se += (m[0] - x[k * 4]).powi(2) + (m[2] - x[k * 4 + 2]).powi(2);
    }
    let rmse = (se / steps as f64).sqrt();
    let mean_ess = out.ess.iter().sum::<f64>() / steps as f64;
    outln!(
        "  filter               {secs:>8.3} s   {:.3e} particle-steps/s",
        (steps * particles) as f64 / secs.max(1e-12)
    );
    outln!("  total log-likelihood {:.6e}", est.total_loglik());
    outln!("  position RMSE        {rmse:.3} m   mean ESS {mean_ess:.0} of {particles}");
    let truth: Vec<(f64, f64)> = (0..steps).map(|k| (x[k * 4], x[k * 4 + 2])).collect();
    let mean: Vec<(f64, f64)> = (0..steps)
        .map(|k| (est.mean_at(0, k)[0], est.mean_at(0, k)[2]))
        .collect();
    let (px, _) = out.particles.as_ref().expect("asked for the particles");
    // At most 5000 particles of the cloud: enough to see its shape.
    let every = (particles / 5000).max(1);
    let cloud: Vec<(f64, f64)> = px
        .chunks_exact(4)
        .step_by(every)
        .map(|p| (p[0], p[2]))
        .collect();
    let sensors = match &model.kind {
        PfKind::RangeOnly { sensors, .. } => sensors.iter().map(|s| (s[0], s[1])).collect(),
        _ => vec![],
    };
    write_plot(plot, &truth, &mean, &cloud, &sensors)?;
    outln!("  plot -> {}", plot.display());
    Ok(())
}

fn write_plot(
    path: &Path,
    truth: &[(f64, f64)],
    mean: &[(f64, f64)],
    cloud: &[(f64, f64)],
    sensors: &[(f64, f64)],
) -> anyhow::Result<()> {
    let mut svg = String::new();
    draw(&mut svg, truth, mean, cloud, sensors)
        .map_err(|e| anyhow::anyhow!("plot {}: {e}", path.display()))?;
    io::write_atomic(path, |w| {
        use std::io::Write;
        w.write_all(svg.as_bytes())
    })?;
    Ok(())
}

fn draw(
    svg: &mut String,
    truth: &[(f64, f64)],
    mean: &[(f64, f64)],
    cloud: &[(f64, f64)],
    sensors: &[(f64, f64)],
) -> Result<(), Box<dyn std::error::Error>> {
    let all = truth.iter().chain(mean).chain(sensors);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all.filter(|(x, y)| x.is_finite() && y.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    let half = 0.5 * (x1 - x0).max(y1 - y0).max(1.0) * 1.1;
    let (cx, cy) = (0.5 * (x0 + x1), 0.5 * (y0 + y1));
    let root = SVGBackend::with_string(svg, (720, 720)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "kestrel demo --pf: two range sensors, bootstrap particle filter",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(cx - half..cx + half, cy - half..cy + half)?;
    chart.configure_mesh().x_desc("x").y_desc("y").draw()?;
    let cloud_color = RGBColor(255, 127, 14);
    let mean_color = RGBColor(31, 119, 180);
    chart
        .draw_series(
            cloud
                .iter()
                .map(|&p| Circle::new(p, 1, cloud_color.mix(0.35).filled())),
        )?
        .label("particles (last step)")
        .legend(move |(x, y)| Circle::new((x + 9, y), 3, cloud_color.filled()));
    chart
        .draw_series(LineSeries::new(
            truth.iter().copied(),
            BLACK.stroke_width(2),
        ))?
        .label("truth")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            mean.iter().copied(),
            mean_color.stroke_width(2),
        ))?
        .label("particle mean")
        .legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], mean_color.stroke_width(2))
        });
    chart
        .draw_series(
            sensors
                .iter()
                .map(|&p| TriangleMarker::new(p, 8, RED.filled())),
        )?
        .label("range sensors")
        .legend(|(x, y)| TriangleMarker::new((x + 9, y), 6, RED.filled()));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}
