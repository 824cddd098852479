//! `kestrel filter` and `kestrel smooth`: measurements file in, estimates file out.

use super::{bad, choose_device, rate, Precision, Progress};
use kestrel::data::Outputs;
use kestrel::io::{self, Format, ESTIMATE_FORMATS, MEASUREMENT_FORMATS};
use kestrel::model::LinearModel;
use kestrel::{
    Device, Estimates, FilterMethod, FilterOptions, Measurements, Model, Real, ScanAlgorithm,
    SmoothMethod, StateSpace,
};
use std::path::PathBuf;
use std::time::Instant;

/// Options shared by `filter` and `smooth`.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// Model file (TOML: explicit matrices, a builder form, or kind = "time-varying" with
    /// per-step matrices from an .npz).
    #[arg(long, value_name = "M.toml")]
    model: PathBuf,
    /// Measurements: `.csv` (track,t,z0,..) or `.npy` ([B, T, ny]).
    #[arg(long, value_name = "Z.csv|Z.npy")]
    input: PathBuf,
    /// Estimates: `.csv` or `.npz`.
    #[arg(long, value_name = "OUT.csv|OUT.npz")]
    output: PathBuf,
    /// auto, cpu, cuda or cuda:N. Nonlinear model files: auto is the CPU, and a GPU
    /// runs the ekf, ukf and ckf filters of one model.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Default: f64 on the CPU, f32 on a GPU.
    #[arg(long, value_enum)]
    precision: Option<Precision>,
    /// Scan algorithm of the parallel methods: sequential, hillis-steele, blelloch,
    /// ladner-fischer, sengupta[:N], fastest.
    #[arg(long, value_name = "ALG", default_value = "fastest")]
    scan: ScanAlgorithm,
    /// Which estimates to write, comma-separated: mean, cov (full covariances), diag
    /// (their diagonals), loglik; or all. What is not asked for is not copied off a GPU.
    #[arg(long, value_name = "LIST", default_value = "all")]
    outputs: String,
    /// Precision of the numbers written (default: the precision of the run).
    #[arg(long, value_enum, value_name = "f32|f64")]
    output_precision: Option<Precision>,
    /// kf, ekf, ukf, ckf or iekf: the Gaussian filter (overrides the model file's
    /// [filter] kind). Default: kf for linear models, the file's [filter] kind or ekf
    /// for nonlinear ones.
    #[arg(long, value_name = "KIND")]
    filter: Option<String>,
    /// Nonlinear filters: IEKF iterations of each update, passes of --method iterated
    /// (default: the file's [filter] iterations, else 10).
    #[arg(long, value_name = "N")]
    iterations: Option<usize>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum FilterMethodArg {
    #[default]
    Sequential,
    Parallel,
    /// The parallel filter in square-root form: Cholesky factors through the scan.
    ParallelSqrt,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum SmoothMethodArg {
    #[default]
    Rts,
    ParallelRts,
    TwoFilter,
    /// The parallel filter and RTS smoother in square-root form.
    ParallelSqrtRts,
    /// Nonlinear filters: the iterated extended smoother (ekf, iekf) or iterated
    /// posterior linearisation (ukf, ckf).
    Iterated,
    /// Nonlinear filters: the same passes, each pass's linearised filter and smoother
    /// run by the parallel scan (CPU or GPU).
    ParallelIterated,
}

#[derive(clap::Args, Debug)]
pub struct FilterArgs {
    #[command(flatten)]
    common: Common,
    /// sequential: each track's steps in order; parallel: an associative scan over time
    /// (Sarkka & Garcia-Fernandez); parallel-sqrt: the same scan over Cholesky factors
    /// (positive semi-definite covariances in f32 too).
    #[arg(long, value_enum, default_value_t)]
    method: FilterMethodArg,
}

#[derive(clap::Args, Debug)]
pub struct SmoothArgs {
    #[command(flatten)]
    common: Common,
    /// rts: filter then Rauch-Tung-Striebel; parallel-rts: both as scans over time;
    /// two-filter: the parallel two-filter smoother; parallel-sqrt-rts: parallel-rts over
    /// Cholesky factors; iterated: the nonlinear filters' iterated smoothers.
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
            Job::Filter(FilterMethod::Parallel(s)) => {
                format!("filter (parallel, scan {})", s.name())
            }
            Job::Smooth(SmoothMethod::Rts) => "smooth (filter + RTS)".into(),
            Job::Smooth(SmoothMethod::ParallelRts(s)) => {
                format!("smooth (parallel RTS, scan {})", s.name())
            }
            Job::Smooth(SmoothMethod::TwoFilter(s)) => {
                format!("smooth (two-filter, scan {})", s.name())
            }
            Job::Filter(FilterMethod::ParallelSqrt(s)) => {
                format!("filter (parallel square-root, scan {})", s.name())
            }
            Job::Smooth(SmoothMethod::ParallelSqrtRts(s)) => {
                format!("smooth (parallel square-root RTS, scan {})", s.name())
            }
            Job::Filter(_) => "filter".into(),
            Job::Smooth(_) => "smooth".into(),
        }
    }
}

pub fn run_filter(a: FilterArgs) -> anyhow::Result<()> {
    let method = match a.method {
        FilterMethodArg::Sequential => FilterMethod::Sequential,
        FilterMethodArg::Parallel => FilterMethod::Parallel(a.common.scan),
        FilterMethodArg::ParallelSqrt => FilterMethod::ParallelSqrt(a.common.scan),
    };
    let linear_method = match a.method {
        FilterMethodArg::Sequential => None,
        FilterMethodArg::Parallel => Some("parallel"),
        FilterMethodArg::ParallelSqrt => Some("parallel-sqrt"),
    };
    let Some(model) = routed(&a.common, None, linear_method)? else {
        return Ok(());
    };
    run(&a.common, Job::Filter(method), model)
}

pub fn run_smooth(a: SmoothArgs) -> anyhow::Result<()> {
    use kestrel::nonlinear::NonlinearSmoother;
    let (method, smoother, linear_method) = match a.method {
        SmoothMethodArg::Rts => (SmoothMethod::Rts, NonlinearSmoother::Rts, None),
        SmoothMethodArg::ParallelRts => (
            SmoothMethod::ParallelRts(a.common.scan),
            NonlinearSmoother::Rts,
            Some("parallel-rts"),
        ),
        SmoothMethodArg::TwoFilter => (
            SmoothMethod::TwoFilter(a.common.scan),
            NonlinearSmoother::Rts,
            Some("two-filter"),
        ),
        SmoothMethodArg::ParallelSqrtRts => (
            SmoothMethod::ParallelSqrtRts(a.common.scan),
            NonlinearSmoother::Rts,
            Some("parallel-sqrt-rts"),
        ),
        // The route refuses it for the Kalman family.
        SmoothMethodArg::Iterated => (SmoothMethod::Rts, NonlinearSmoother::Iterated, None),
        SmoothMethodArg::ParallelIterated => {
            (SmoothMethod::Rts, NonlinearSmoother::ParallelIterated, None)
        }
    };
    let Some(model) = routed(&a.common, Some(smoother), linear_method)? else {
        return Ok(());
    };
    run(&a.common, Job::Smooth(method), model)
}

/// Sends nonlinear models, IMM files and `--filter ekf|ukf|ckf|iekf` to the nonlinear
/// family (cmd/nonlinear.rs), which runs them: `None`. Otherwise `Some`, with the
/// linear model when that route read it.
fn routed(
    c: &Common,
    smooth: Option<kestrel::nonlinear::NonlinearSmoother>,
    linear_method: Option<&'static str>,
) -> anyhow::Result<Option<Option<Model>>> {
    use super::nonlinear::{route, Request, Route};
    let req = Request {
        model: &c.model,
        input: &c.input,
        output: &c.output,
        device: &c.device,
        precision: c.precision,
        outputs: &c.outputs,
        output_precision: c.output_precision,
        filter: c.filter.as_deref(),
        iterations: c.iterations,
        smooth,
        linear_method,
    };
    match route(&req)? {
        Route::Linear(m) => Ok(Some(m.map(|m| *m))),
        Route::Nonlinear(file) => super::nonlinear::run(&req, *file).map(|()| None),
    }
}

fn run(c: &Common, job: Job, model: Option<Model>) -> anyhow::Result<()> {
    let model = model.map(LinearModel::Invariant);
    // Everything that can be checked before the work is checked first.
    Format::of(&c.input, MEASUREMENT_FORMATS)?;
    Format::of(&c.output, ESTIMATE_FORMATS)?;
    let selection = Outputs::parse(&c.outputs)?;
    let outputs = io::Outputs::plan(&[&c.model, &c.input], &[&c.output])?;
    let model = match model {
        Some(m) => m,
        None => super::load_any_linear_model(&c.model)?,
    };
    let device = match (c.device.as_str(), job, model.invariant()) {
        // The sequential filter and RTS: the GPU only where it pays for its set-up.
        (
            "auto",
            Job::Filter(FilterMethod::Sequential) | Job::Smooth(SmoothMethod::Rts),
            Some(m),
        ) => auto_device(
            m,
            &c.input,
            matches!(job, Job::Smooth(_)),
            c.precision,
            selection,
        ),
        _ => choose_device(&c.device)?,
    };
    match c.precision.unwrap_or(Precision::default_for(device)) {
        Precision::F64 => run_typed::<f64>(c, job, device, &model, selection, outputs),
        Precision::F32 => run_typed::<f32>(c, job, device, &model, selection, outputs),
    }
}

/// On a GPU, opens the device and compiles (or loads from the cache) the kernels of the
/// sequential filter / RTS smoother before the timed work, so that the summary shows
/// set-up apart from compute; returns that part of the summary line.
fn gpu_setup<T: Real>(device: Device, model: &LinearModel, job: Job) -> anyhow::Result<String> {
    use kestrel::kalman::cuda::source::Part;
    // A time-varying model's kernels take the model from memory (compiled on first use).
    let Some(model) = model.invariant() else {
        return Ok(String::new());
    };
    let parts: &[Part] = match job {
        Job::Filter(FilterMethod::Sequential) => &[Part::Filter],
        Job::Smooth(SmoothMethod::Rts) => &[Part::Filter, Part::Smooth],
        _ => return Ok(String::new()),
    };
    let ordinals: Vec<usize> = match device {
        Device::Cuda(i) => vec![i],
        Device::AllCuda => (0..kestrel::cuda::device_count()).collect(),
        _ => return Ok(String::new()),
    };
    let t = Instant::now();
    for &i in &ordinals {
        kestrel::cuda::device_name(i)?;
    }
    let open = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for &i in &ordinals {
        for &part in parts {
            kestrel::kalman::cuda::compile_kernels::<T>(i, model, true, part)?;
        }
    }
    let compile = t.elapsed().as_secs_f64();
    Ok(format!(
        "GPU set-up {:.3} s (device {open:.3} s, kernels {compile:.3} s); ",
        open + compile
    ))
}

/// `--device auto` for the batched filter and smoother: the size of the job (read from
/// the input's header, or estimated from a CSV's size) against a model of CPU and GPU
/// time, set-up included (`kestrel::kalman::cuda::choose`); the choice and its reason
/// go to the notes printed after success.
fn auto_device(
    model: &Model,
    input: &std::path::Path,
    smooth: bool,
    p: Option<Precision>,
    outputs: Outputs,
) -> Device {
    use kestrel::kalman::cuda::choose_for;
    let rows = io::peek_rows(input).unwrap_or(u64::MAX);
    let choice = match p {
        Some(Precision::F64) => choose_for::<f64>(model, rows, smooth, outputs),
        _ => choose_for::<f32>(model, rows, smooth, outputs),
    };
    super::note(format!(
        "device: {} (auto: {})",
        choice.device, choice.reason
    ));
    choice.device
}

/// Writes `est` in the precision asked for (a value too large for f32 is an error).
fn write_in<T: Real>(
    c: &Common,
    est: &Estimates<T>,
    tick: &(dyn Fn(usize) + Sync),
) -> anyhow::Result<()> {
    match c.output_precision {
        Some(Precision::F32) if T::NAME != "f32" => {
            let e32: Estimates<f32> = est.cast();
            check_fits_f32(est, &e32)?;
            Ok(io::write_estimates_with_progress(&c.output, &e32, tick)?)
        }
        Some(Precision::F64) if T::NAME != "f64" => {
            let e64: Estimates<f64> = est.cast();
            Ok(io::write_estimates_with_progress(&c.output, &e64, tick)?)
        }
        _ => Ok(io::write_estimates_with_progress(&c.output, est, tick)?),
    }
}

/// A finite value that became infinite in f32 does not fit: say where.
fn check_fits_f32<T: Real>(est: &Estimates<T>, e32: &Estimates<f32>) -> anyhow::Result<()> {
    let arrays: [(&str, &[T], &[f32], usize); 3] = [
        ("mean", est.mean(), e32.mean(), est.nx()),
        (
            "cov",
            est.cov(),
            e32.cov(),
            est.cov().len() / (est.tracks() * est.steps()).max(1),
        ),
        (
            "loglik",
            est.loglik().unwrap_or(&[]),
            e32.loglik().unwrap_or(&[]),
            1,
        ),
    ];
    for (name, a, b, per) in arrays {
        if let Some(i) = a
            .iter()
            .zip(b)
            .position(|(x, y)| x.is_finite_value() && !y.is_finite())
        {
            let (k, track) = (i / per.max(1), i / per.max(1) / est.steps().max(1));
            return Err(bad(format!(
                "--output-precision f32: {name} of track {track}, step {} is {} and does not fit in f32",
                k % est.steps().max(1),
                a[i].to_f64()
            )));
        }
    }
    Ok(())
}

fn run_typed<T: Real>(
    c: &Common,
    job: Job,
    device: Device,
    model: &LinearModel,
    selection: Outputs,
    outputs: io::Outputs,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let progress = Progress::new("reading");
    let z: Measurements<T> = super::read_for_model(&c.input, &c.model, model)?;
    z.require_data(&c.input.display().to_string())?;
    let t_read = t0.elapsed().as_secs_f64();
    progress.phase(match job {
        Job::Filter(_) => "filtering",
        Job::Smooth(_) => "smoothing",
    });
    let setup = gpu_setup::<T>(device, model, job)?;
    let t1 = Instant::now();
    let (est, loglik) = estimate(device, model, &z, job, selection)?;
    let t_compute = t1.elapsed().as_secs_f64();
    progress.tracks("writing", z.tracks());
    let t2 = Instant::now();
    write_in(c, &est, &|n| progress.inc(n))?;
    outputs.commit()?;
    let t_write = t2.elapsed().as_secs_f64();
    progress.finish();
    let n = z.tracks() * z.steps();
    errln!(
        "{}: {} x {} on {device}, {}: total log-likelihood {loglik:.6e}; {setup}compute {t_compute:.3} s ({}); total {:.3} s (read {t_read:.3} s, write {t_write:.3} s) -> {}",
        job.describe(),
        super::plural(z.tracks(), "track"),
        super::plural(z.steps(), "step"),
        T::NAME,
        rate(n, t_compute),
        t0.elapsed().as_secs_f64(),
        c.output.display()
    );
    Ok(())
}

/// Runs `job` over all tracks of `z` at once (splitting the batch would cost a copy of
/// every output); returns the estimates the job writes (filtered for `filter`, smoothed
/// for `smooth`), reduced to `outputs`, and the total log-likelihood (NaN when a
/// filter's log-likelihoods were not kept).
pub fn estimate<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    job: Job,
    outputs: Outputs,
) -> kestrel::Result<(Estimates<T>, f64)> {
    match job {
        Job::Filter(m) => {
            let opts = FilterOptions::default().with_outputs(outputs);
            let f = kestrel::filter_on(device, model, z, m, &opts)?.filtered;
            let ll = if f.loglik().is_some() {
                f.total_loglik()
            } else {
                f64::NAN
            };
            Ok((f, ll))
        }
        Job::Smooth(m) => {
            let kestrel::Smoothed {
                filtered: f,
                smoothed: mut s,
                ..
            } = kestrel::smooth_on(device, model, z, m)?;
            outputs.apply(&mut s);
            Ok((s, f.total_loglik()))
        }
    }
}
