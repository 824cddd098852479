//! `kestrel filter|smooth` with a nonlinear model, an IMM file, or `--filter` naming a
//! nonlinear Gaussian filter (ekf, ukf, ckf, iekf): the nonlinear family
//! (`kestrel::nonlinear`). Linear models without `--filter` or `[filter]` never come
//! here, so the Kalman family's behaviour is unchanged.

use super::{bad, rate, Precision, Progress};
use kestrel::data::Outputs;
use kestrel::io::{self, Format, ESTIMATE_FORMATS, MEASUREMENT_FORMATS};
use kestrel::nonlinear::{
    estimate_on, FilterChoice, FilterKind, NonlinearFile, NonlinearJob, NonlinearProblem,
    NonlinearSmoother,
};
use kestrel::{Device, Estimates, Measurements, Real};
use std::path::Path;
use std::time::Instant;

/// What `filter` / `smooth` were asked, as far as this family reads it.
pub struct Request<'a> {
    pub model: &'a Path,
    pub input: &'a Path,
    pub output: &'a Path,
    pub device: &'a str,
    pub precision: Option<Precision>,
    pub outputs: &'a str,
    pub output_precision: Option<Precision>,
    /// `--filter`.
    pub filter: Option<&'a str>,
    /// `--iterations`.
    pub iterations: Option<usize>,
    /// `None` for `filter`; the smoother otherwise.
    pub smooth: Option<NonlinearSmoother>,
    /// The linear family's method was not the default (parallel, two-filter): named.
    pub linear_method: Option<&'static str>,
}

/// The route a model file and `--filter` take.
pub enum Route {
    /// The Kalman family, with the model (read here when the file had a `[filter]` table
    /// the linear reader would refuse).
    Linear(Option<Box<kestrel::Model>>),
    /// This family.
    Nonlinear(Box<NonlinearFile>),
}

/// `--filter`, parsed (an unknown name is a usage error naming the choices).
pub fn filter_flag(filter: Option<&str>) -> anyhow::Result<Option<FilterChoice>> {
    filter
        .map(|s| {
            FilterChoice::parse(s).ok_or_else(|| {
                bad(format!(
                    "--filter {s}: unknown filter (expected kf, {})",
                    FilterKind::NAMES
                ))
            })
        })
        .transpose()
}

/// Whether `smooth` is one of the iterated smoothers.
fn iterated(smooth: Option<NonlinearSmoother>) -> bool {
    matches!(
        smooth,
        Some(NonlinearSmoother::Iterated | NonlinearSmoother::ParallelIterated)
    )
}

/// Decides the route: the Kalman family unless the file is nonlinear, has `[imm]` or
/// `[filter]`, or `--filter` names a nonlinear filter.
pub fn route(r: &Request<'_>) -> anyhow::Result<Route> {
    let flag = filter_flag(r.filter)?;
    // An unreadable file goes the linear way, whose reader reports it as before.
    let Ok(text) = std::fs::read_to_string(r.model) else {
        return Ok(Route::Linear(None));
    };
    let nonlinear_file = kestrel::nonlinear::is_nonlinear_text(&text);
    if !nonlinear_file && matches!(flag, None | Some(FilterChoice::Kf)) {
        if r.iterations.is_some() || iterated(r.smooth) {
            return Err(bad(
                "--method iterated, parallel-iterated and --iterations apply to the nonlinear filters: add --filter ekf, ukf, ckf or iekf",
            ));
        }
        return Ok(Route::Linear(None));
    }
    let file = kestrel::nonlinear::nonlinear_from_toml(&text, r.model)?;
    let choice = flag.or(file.filter);
    if choice == Some(FilterChoice::Kf) {
        return match (&file.linear, &file.problem) {
            (Some(m), _) if !iterated(r.smooth) && r.iterations.is_none() => {
                Ok(Route::Linear(Some(Box::new(m.clone()))))
            }
            (Some(_), _) => Err(bad(
                "--method iterated, parallel-iterated and --iterations apply to the nonlinear filters, not kf",
            )),
            (None, _) => Err(bad(format!(
                "{}: the Kalman filter (kf) needs a linear model; this one is nonlinear (use --filter ekf, ukf, ckf or iekf)",
                r.model.display()
            ))),
        };
    }
    if let Some(m) = r.linear_method {
        return Err(bad(format!(
            "--method {m} applies to the linear Kalman filter; the nonlinear filters run sequential (filter) or rts / iterated (smooth)"
        )));
    }
    Ok(Route::Nonlinear(Box::new(file)))
}

/// Runs this family's job for `file`.
pub fn run(r: &Request<'_>, mut file: NonlinearFile) -> anyhow::Result<()> {
    Format::of(r.input, MEASUREMENT_FORMATS)?;
    Format::of(r.output, ESTIMATE_FORMATS)?;
    let selection = Outputs::parse(r.outputs)?;
    let outputs = io::Outputs::plan(&[r.model, r.input], &[r.output])?;
    if let Some(FilterChoice::Gaussian(k)) = r.filter.and_then(FilterChoice::parse) {
        file.options.kind = k;
    }
    if let Some(n) = r.iterations {
        if n == 0 {
            return Err(bad("--iterations: must be at least 1"));
        }
        file.options.iterations = n;
    }
    let device = match r.device {
        "auto" | "cpu" => Device::Cpu,
        other => super::choose_device(other)?,
    };
    if let (NonlinearProblem::Imm(_), Some(_)) = (&file.problem, r.smooth) {
        return Err(bad(
            "smoothing an IMM model is not available: run kestrel filter",
        ));
    }
    // As every command: f64 on the CPU, f32 on a GPU.
    let default = match device {
        Device::Cpu => Precision::F64,
        _ => Precision::F32,
    };
    match r.precision.unwrap_or(default) {
        Precision::F64 => run_typed::<f64>(r, &file, device, selection, outputs),
        Precision::F32 => run_typed::<f32>(r, &file, device, selection, outputs),
    }
}

fn run_typed<T: Real>(
    r: &Request<'_>,
    file: &NonlinearFile,
    device: Device,
    selection: Outputs,
    outputs: io::Outputs,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let progress = Progress::new("reading");
    let z: Measurements<T> = io::read_measurements(r.input)?;
    io::check_measurement_dim(r.input, &z, file.problem.ny())?;
    z.require_data(&r.input.display().to_string())?;
    let t_read = t0.elapsed().as_secs_f64();
    progress.phase(if r.smooth.is_some() {
        "smoothing"
    } else {
        "filtering"
    });
    let job = match r.smooth {
        None => NonlinearJob::Filter,
        Some(m) => NonlinearJob::Smooth(m),
    };
    let t1 = Instant::now();
    let out = estimate_on(device, &file.problem, &z, &file.options, job)?;
    let t_compute = t1.elapsed().as_secs_f64();
    let loglik = out.filtered.total_loglik();
    let mut est: Estimates<T> = match out.smoothed {
        Some(s) => s,
        None => out.filtered,
    };
    selection.apply(&mut est);
    progress.phase("writing");
    let t2 = Instant::now();
    let n = z.tracks() * z.steps();
    let probs = out.mode_probs;
    match r.output_precision {
        Some(Precision::F32) if T::NAME != "f32" => write(
            r.output,
            &est.cast::<f32>(),
            probs.as_ref().map(|p| cast::<T, f32>(p)),
            n,
        )?,
        Some(Precision::F64) if T::NAME != "f64" => write(
            r.output,
            &est.cast::<f64>(),
            probs.as_ref().map(|p| cast::<T, f64>(p)),
            n,
        )?,
        _ => write(r.output, &est, probs, n)?,
    }
    outputs.commit()?;
    let t_write = t2.elapsed().as_secs_f64();
    progress.finish();
    let what = match (&file.problem, r.smooth) {
        (NonlinearProblem::Imm(i), _) => format!(
            "IMM filter ({} modes, {})",
            i.len(),
            file.options.kind.name()
        ),
        (_, None) => format!("filter ({})", file.options.kind.name()),
        (_, Some(NonlinearSmoother::Rts)) => format!("smooth ({} + RTS)", file.options.kind.name()),
        (_, Some(NonlinearSmoother::Iterated)) => format!(
            "smooth ({}, iterated, {} passes)",
            file.options.kind.name(),
            file.options.iterations
        ),
        (_, Some(NonlinearSmoother::ParallelIterated)) => format!(
            "smooth ({}, parallel iterated, {} passes)",
            file.options.kind.name(),
            file.options.iterations
        ),
    };
    errln!(
        "{what}: {} x {} on {device}, {}: total log-likelihood {loglik:.6e}; compute {t_compute:.3} s ({}); total {:.3} s (read {t_read:.3} s, write {t_write:.3} s) -> {}",
        super::plural(z.tracks(), "track"),
        super::plural(z.steps(), "step"),
        T::NAME,
        rate(z.tracks() * z.steps(), t_compute),
        t0.elapsed().as_secs_f64(),
        r.output.display()
    );
    Ok(())
}

fn cast<T: Real, U: Real>(v: &[T]) -> Vec<U> {
    v.iter().map(|x| U::of(x.to_f64())).collect()
}

/// The estimates, and the IMM's mode probabilities (`[B][T][r]` over `n` = B x T steps)
/// as columns `p0 ..` (CSV) or the array `mode_probs` [B, T, r] (NPZ).
fn write<U: Real>(
    path: &Path,
    est: &Estimates<U>,
    probs: Option<Vec<U>>,
    n: usize,
) -> anyhow::Result<()> {
    match probs {
        None => Ok(io::write_estimates(path, est)?),
        Some(p) => Ok(io::write_estimates_with_modes(
            path,
            est,
            &p,
            p.len() / n.max(1),
        )?),
    }
}
