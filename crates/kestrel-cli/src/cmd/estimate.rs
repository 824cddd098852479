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
    #[arg(long, value_enum, default_value_t)]
    method: FilterMethodArg,
}

#[derive(clap::Args, Debug)]
pub struct SmoothArgs {
    #[command(flatten)]
    common: Common,
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
    let device = choose_device(&c.device)?;
    let model = kestrel::model::load_model(&c.model)?;
    match c.precision.unwrap_or(Precision::default_for(device)) {
        Precision::F64 => run_typed::<f64>(c, job, device, &model),
        Precision::F32 => run_typed::<f32>(c, job, device, &model),
    }
}

fn run_typed<T: Real>(c: &Common, job: Job, device: Device, model: &Model) -> anyhow::Result<()> {
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
    progress.set_length(z.tracks);
    progress.phase(if matches!(job, Job::Filter(_)) {
        "filtering"
    } else {
        "smoothing"
    });
    let t1 = Instant::now();
    let (est, loglik) = estimate_in_pieces(device, model, &z, job, &progress)?;
    let t_compute = t1.elapsed().as_secs_f64();
    progress.phase("writing");
    let t2 = Instant::now();
    io::write_estimates(&c.output, &est)?;
    let t_write = t2.elapsed().as_secs_f64();
    progress.finish();
    let n = z.tracks * z.steps;
    eprintln!(
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

/// Target-steps per piece: large enough that splitting costs little, small enough that
/// the progress bar moves.
const PIECE: usize = 1 << 21;

/// Runs `job` over the tracks of `z` a piece of tracks at a time (one piece when the
/// batch is small), returning the estimates the job writes (filtered for `filter`,
/// smoothed for `smooth`) and the total log-likelihood.
pub fn estimate_in_pieces<T: Real>(
    device: Device,
    model: &Model,
    z: &Measurements<T>,
    job: Job,
    progress: &Progress,
) -> kestrel::Result<(Estimates<T>, f64)> {
    let per_piece = (PIECE / z.steps.max(1)).max(1);
    let run_one = |zp: &Measurements<T>| -> kestrel::Result<(Estimates<T>, f64)> {
        match job {
            Job::Filter(m) => {
                let f =
                    kestrel::filter_on(device, model, zp, m, &FilterOptions::default())?.filtered;
                let ll = f.total_loglik();
                Ok((f, ll))
            }
            Job::Smooth(m) => {
                let (f, s) = kestrel::smooth_on(device, model, zp, m)?;
                Ok((s, f.total_loglik()))
            }
        }
    };
    if z.tracks <= 2 * per_piece {
        let r = run_one(z)?;
        progress.inc(z.tracks);
        return Ok(r);
    }
    let nx = model.nx();
    let (b, t, ny) = (z.tracks, z.steps, z.ny);
    let mut out: Option<Estimates<T>> = None;
    let mut loglik = 0.0;
    for b0 in (0..b).step_by(per_piece) {
        let b1 = (b0 + per_piece).min(b);
        let zp = Measurements::new(b1 - b0, t, ny, z.data[b0 * t * ny..b1 * t * ny].to_vec())?;
        let (e, ll) = run_one(&zp).map_err(|e| shift_track(e, b0))?;
        loglik += ll;
        let o = out.get_or_insert_with(|| Estimates {
            tracks: b,
            steps: t,
            nx,
            mean: Vec::with_capacity(b * t * nx),
            cov: Vec::with_capacity(b * t * nx * nx),
            loglik: e.loglik.as_ref().map(|_| Vec::with_capacity(b * t)),
        });
        o.mean.extend_from_slice(&e.mean);
        o.cov.extend_from_slice(&e.cov);
        if let (Some(all), Some(l)) = (&mut o.loglik, &e.loglik) {
            all.extend_from_slice(l);
        }
        progress.inc(b1 - b0);
    }
    // At least one piece ran: b > 2 * per_piece > 0.
    Ok((out.expect("at least one piece"), loglik))
}

/// Track numbers in errors of a piece are relative to the piece.
fn shift_track(e: kestrel::Error, by: usize) -> kestrel::Error {
    match e {
        kestrel::Error::NotPositiveDefinite { track, step, what } => {
            kestrel::Error::NotPositiveDefinite {
                track: track + by,
                step,
                what,
            }
        }
        other => other,
    }
}
