//! `kestrel filter` and `kestrel smooth`: measurements file in, estimates file out.

use super::{bad, choose_device, rate, Precision, Progress};
use kestrel::io::{self, Format, ESTIMATE_FORMATS, MEASUREMENT_FORMATS};
use kestrel::{
    Device, Estimates, FilterMethod, FilterOptions, Measurements, Model, Real, ScanAlgorithm,
    SmoothMethod,
};
use std::path::PathBuf;
use std::time::Instant;

/// Options shared by `filter` and `smooth`.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// Model file (TOML, explicit matrices or a builder form).
    #[arg(long, value_name = "M.toml")]
    model: PathBuf,
    /// Measurements: `.csv` (track,t,z0,..) or `.npy` ([B, T, ny]).
    #[arg(long, value_name = "Z.csv|Z.npy")]
    input: PathBuf,
    /// Estimates: `.csv` or `.npz`.
    #[arg(long, value_name = "OUT.csv|OUT.npz")]
    output: PathBuf,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Default: f64 on the CPU, f32 on a GPU.
    #[arg(long, value_enum)]
    precision: Option<Precision>,
    /// Scan algorithm of the parallel methods: sequential, hillis-steele, blelloch,
    /// ladner-fischer, sengupta[:N], fastest.
    #[arg(long, value_name = "ALG", default_value = "fastest")]
    scan: ScanAlgorithm,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum FilterMethodArg {
    #[default]
    Sequential,
    Parallel,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum SmoothMethodArg {
    #[default]
    Rts,
    ParallelRts,
    TwoFilter,
}

#[derive(clap::Args, Debug)]
pub struct FilterArgs {
    #[command(flatten)]
    common: Common,
    /// sequential: each track's steps in order; parallel: an associative scan over time
    /// (Sarkka & Garcia-Fernandez).
    #[arg(long, value_enum, default_value_t)]
    method: FilterMethodArg,
}

#[derive(clap::Args, Debug)]
pub struct SmoothArgs {
    #[command(flatten)]
    common: Common,
    /// rts: filter then Rauch-Tung-Striebel; parallel-rts: both as scans over time;
    /// two-filter: the parallel two-filter smoother.
    #[arg(long, value_enum, default_value_t)]
    method: SmoothMethodArg,
}

/// What to compute.
#[derive(Clone, Copy, Debug)]
pub enum Job {
    Filter(FilterMethod),
    Smooth(SmoothMethod),
}

impl Job {
    fn describe(self) -> String {
        match self {
            Job::Filter(FilterMethod::Sequential) => "filter (sequential)".into(),
            Job::Filter(FilterMethod::Parallel(s)) => format!("filter (parallel, scan {s:?})"),
            Job::Smooth(SmoothMethod::Rts) => "smooth (filter + RTS)".into(),
            Job::Smooth(SmoothMethod::ParallelRts(s)) => {
                format!("smooth (parallel RTS, scan {s:?})")
            }
            Job::Smooth(SmoothMethod::TwoFilter(s)) => format!("smooth (two-filter, scan {s:?})"),
        }
    }
}

pub fn run_filter(a: FilterArgs) -> anyhow::Result<()> {
    let method = match a.method {
        FilterMethodArg::Sequential => FilterMethod::Sequential,
        FilterMethodArg::Parallel => FilterMethod::Parallel(a.common.scan),
    };
    run(&a.common, Job::Filter(method))
}

pub fn run_smooth(a: SmoothArgs) -> anyhow::Result<()> {
    let method = match a.method {
        SmoothMethodArg::Rts => SmoothMethod::Rts,
        SmoothMethodArg::ParallelRts => SmoothMethod::ParallelRts(a.common.scan),
        SmoothMethodArg::TwoFilter => SmoothMethod::TwoFilter(a.common.scan),
    };
    run(&a.common, Job::Smooth(method))
}

fn run(c: &Common, job: Job) -> anyhow::Result<()> {
    // Everything that can be checked before the work is checked first.
    Format::of(&c.input, MEASUREMENT_FORMATS)?;
    Format::of(&c.output, ESTIMATE_FORMATS)?;
    let outputs = io::Outputs::plan(&[&c.model, &c.input], &[&c.output])?;
    let device = choose_device(&c.device)?;
    let model = kestrel::model::load_model(&c.model)?;
    match c.precision.unwrap_or(Precision::default_for(device)) {
        Precision::F64 => run_typed::<f64>(c, job, device, &model, outputs),
        Precision::F32 => run_typed::<f32>(c, job, device, &model, outputs),
    }
}

fn run_typed<T: Real>(
    c: &Common,
    job: Job,
    device: Device,
    model: &Model,
    outputs: io::Outputs,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let progress = Progress::new("reading");
    let z: Measurements<T> = io::read_measurements(&c.input)?;
    io::check_measurement_dim(&c.input, &z, model.ny())?;
    if z.tracks == 0 || z.steps == 0 {
        return Err(bad(format!(
            "{}: no measurements ({} tracks x {} steps)",
            c.input.display(),
            z.tracks,
            z.steps
        )));
    }
    let t_read = t0.elapsed().as_secs_f64();
    progress.phase(match job {
        Job::Filter(_) => "filtering",
        Job::Smooth(_) => "smoothing",
    });
    let t1 = Instant::now();
    let (est, loglik) = estimate(device, model, &z, job)?;
    let t_compute = t1.elapsed().as_secs_f64();
    progress.tracks("writing", z.tracks);
    let t2 = Instant::now();
    io::write_estimates_with_progress(&c.output, &est, &|n| progress.inc(n))?;
    outputs.commit()?;
    let t_write = t2.elapsed().as_secs_f64();
    progress.finish();
    let n = z.tracks * z.steps;
    errln!(
        "{}: {} tracks x {} steps on {device}, {}: total log-likelihood {loglik:.6e}; compute {t_compute:.3} s ({}); total {:.3} s (read {t_read:.3} s, write {t_write:.3} s) -> {}",
        job.describe(),
        z.tracks,
        z.steps,
        T::NAME,
        rate(n, t_compute),
        t0.elapsed().as_secs_f64(),
        c.output.display()
    );
    Ok(())
}

/// Runs `job` over all tracks of `z` at once (splitting the batch would cost a copy of
/// every output); returns the estimates the job writes (filtered for `filter`, smoothed
/// for `smooth`) and the total log-likelihood.
pub fn estimate<T: Real>(
    device: Device,
    model: &Model,
    z: &Measurements<T>,
    job: Job,
) -> kestrel::Result<(Estimates<T>, f64)> {
    match job {
        Job::Filter(m) => {
            let f = kestrel::filter_on(device, model, z, m, &FilterOptions::default())?.filtered;
            let ll = f.total_loglik();
            Ok((f, ll))
        }
        Job::Smooth(m) => {
            let (f, s) = kestrel::smooth_on(device, model, z, m)?;
            Ok((s, f.total_loglik()))
        }
    }
}
