//! `kestrel loglik`: per-step marginal log-likelihoods `log p(z_t | z_0:t-1)`.

use super::{bad, choose_device, rate, Precision, Progress};
use kestrel::io::{self, Format, MEASUREMENT_FORMATS, PER_STEP_FORMATS};
use kestrel::likelihood::{self, LogLik, Method, Options};
use kestrel::model::LinearModel;
use kestrel::{Device, Measurements, Real, ScanAlgorithm};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file (TOML, explicit matrices, a builder form or kind = "time-varying"; `prior = "stationary"` for
    /// the stationary prior of a stable model).
    #[arg(long, value_name = "M.toml")]
    model: PathBuf,
    /// Measurements: `.csv` (track,t,z0,..) or `.npy` ([B, T, ny]); NaN = missing.
    #[arg(long, value_name = "Z.csv|Z.npy")]
    input: PathBuf,
    /// Per-step log-likelihoods: `.npy` ([B, T]) or `.csv` (track,t,loglik).
    #[arg(long, value_name = "LL.npy|LL.csv")]
    output: PathBuf,
    /// exact (sequential Kalman filter), parallel (associative scan), window:N (the
    /// windowed filter of Lin, Moore & Russell over the N latest measurements) or
    /// window:auto[:TOL] (the smallest N whose error bound per step is below TOL,
    /// default 1e-6).
    #[arg(long, default_value = "exact")]
    method: String,
    /// Variance V of the windowed filter's vague start N(0, V I).
    #[arg(long, value_name = "V", default_value_t = likelihood::DEFAULT_VAGUE)]
    vague: f64,
    /// exact: switch to the steady-state gain once the predicted covariance changes by
    /// less than TOL (relative) in a step, as long as no measurement is missing.
    #[arg(long, value_name = "TOL")]
    steady: Option<f64>,
    /// auto, cpu, cuda or cuda:N (exact always runs on the CPU).
    #[arg(long, default_value = "auto")]
    device: String,
    /// Default: f64 on the CPU, f32 on a GPU.
    #[arg(long, value_enum)]
    precision: Option<Precision>,
    /// Scan algorithm of `parallel`: sequential, hillis-steele, blelloch, ladner-fischer,
    /// sengupta[:N], fastest.
    #[arg(long, value_name = "ALG", default_value = "fastest")]
    scan: ScanAlgorithm,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    // Everything that can be checked before the work is checked first.
    Format::of(&a.input, MEASUREMENT_FORMATS)?;
    Format::of(&a.output, PER_STEP_FORMATS)?;
    // The library names the method; the command line adds its flag.
    let method: Method = a
        .method
        .parse()
        .map_err(|e: kestrel::Error| bad(format!("--method: {e}")))?;
    let outputs = io::Outputs::plan(&[&a.model, &a.input], &[&a.output])?;
    if !(a.vague.is_finite() && a.vague > 0.0) {
        return Err(bad(format!(
            "--vague must be finite and positive, got {}",
            a.vague
        )));
    }
    if let Some(t) = a.steady {
        if !(t.is_finite() && t >= 0.0) {
            return Err(bad(format!(
                "--steady must be finite and non-negative, got {t}"
            )));
        }
        if method != Method::Exact {
            return Err(bad("--steady applies to --method exact only"));
        }
    }
    let model = super::load_any_linear_model(&a.model)?;
    // The windowed filter of a time-varying model runs on the CPU only.
    let cpu_only = matches!(method, Method::Window(_)) && model.is_varying();
    let device = if (method == Method::Exact || cpu_only) && a.device == "auto" {
        Device::Cpu
    } else {
        choose_device(&a.device)?
    };
    let opts = Options::default()
        .with_vague(a.vague)
        .with_steady(a.steady)
        .with_scan(a.scan);
    match a.precision.unwrap_or(Precision::default_for(device)) {
        Precision::F64 => run_typed::<f64>(&a, method, device, &model, &opts, outputs),
        Precision::F32 => run_typed::<f32>(&a, method, device, &model, &opts, outputs),
    }
}

fn run_typed<T: Real>(
    a: &Args,
    method: Method,
    device: Device,
    model: &LinearModel,
    opts: &Options,
    outputs: io::Outputs,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let progress = Progress::new("reading");
    let z: Measurements<T> = super::read_for_model(&a.input, &a.model, model)?;
    kestrel::estimate::warn_if_large_for_f32(&z);
    z.require_data(&a.input.display().to_string())?;
    progress.phase("computing log-likelihoods");
    let t1 = Instant::now();
    let ll: LogLik<T> = likelihood::loglik_linear(device, model, &z, method, opts)?;
    let t_compute = t1.elapsed().as_secs_f64();
    progress.phase("writing");
    io::write_per_step(&a.output, ll.tracks, ll.steps, &ll.values, "loglik")?;
    outputs.commit()?;
    progress.finish();
    print_totals(&ll);
    let window = match (ll.window, ll.bound) {
        (Some(n), Some(b)) => format!(", window {n} (error bound {b:.2e} per step)"),
        (Some(n), None) => format!(", window {n}"),
        _ => String::new(),
    };
    errln!(
        "loglik ({}{window}): {} x {} on {device}, {}; compute {t_compute:.3} s ({}); total {:.3} s -> {}",
        a.method,
        super::plural(z.tracks(), "track"),
        super::plural(z.steps(), "step"),
        T::NAME,
        rate(z.tracks() * z.steps(), t_compute),
        t0.elapsed().as_secs_f64(),
        a.output.display()
    );
    Ok(())
}

/// The total log-likelihood of each track on stdout (`track,total`), then the sum; a
/// summary only when there are many tracks.
fn print_totals<T: Real>(ll: &LogLik<T>) {
    let totals: Vec<f64> = (0..ll.tracks).map(|b| ll.total(b)).collect();
    let sum: f64 = totals.iter().sum();
    if ll.tracks <= 20 {
        outln!("track,total_loglik");
        for (b, t) in totals.iter().enumerate() {
            outln!("{b},{t:.10e}");
        }
    } else {
        let min = totals.iter().copied().fold(f64::INFINITY, f64::min);
        let max = totals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        outln!(
            "{} tracks: per-track totals from {min:.10e} to {max:.10e}",
            ll.tracks
        );
    }
    outln!("total,{sum:.10e}");
}
