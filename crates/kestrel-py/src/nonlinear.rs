//! The nonlinear Gaussian filters (`kestrel filter|smooth --filter ekf|ukf|ckf|iekf`,
//! IMM files): `kestrel::nonlinear::estimate_on` over a model file's text.

use crate::arrays::{c_slice, dtype_of, owned, Dtype};
use crate::progress::Bar;
use crate::{run_detached, to_py};
use kestrel::nonlinear::{
    estimate_on, nonlinear_from_toml, FilterChoice, FilterKind, NonlinearFile, NonlinearJob,
    NonlinearProblem, NonlinearSmoother,
};
use kestrel::{Device, Measurements, Real};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn parse(text: &str, origin: &str) -> PyResult<NonlinearFile> {
    nonlinear_from_toml(text, origin.as_ref()).map_err(to_py)
}

/// Checks a nonlinear model file's text: `(nx, ny, modes, filter kind of its [filter]
/// table or None)`; raises `ModelError` with the CLI's message.
#[pyfunction]
fn nonlinear_check(text: &str, origin: &str) -> PyResult<(usize, usize, usize, Option<String>)> {
    let f = parse(text, origin)?;
    let modes = match &f.problem {
        NonlinearProblem::Imm(i) => i.len(),
        NonlinearProblem::Single(_) => 0,
    };
    let kind = f.filter.map(|c| match c {
        FilterChoice::Kf => "kf".to_string(),
        FilterChoice::Gaussian(k) => k.name().to_string(),
    });
    Ok((f.problem.nx(), f.problem.ny(), modes, kind))
}

/// Whether a model file's text is the nonlinear family's (a nonlinear kind, `[imm]` or
/// `[filter]`), as the command line decides.
#[pyfunction]
fn nonlinear_text(text: &str) -> bool {
    kestrel::nonlinear::is_nonlinear_text(text)
}

#[allow(clippy::too_many_arguments)]
fn typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    file: &NonlinearFile,
    z: &Bound<'py, PyAny>,
    job: NonlinearJob,
    device: Device,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let guard: PyReadonlyArrayDyn<'py, T> = z.extract()?;
    let (shape, data) = c_slice(&guard, "z", 3)?;
    let ny = file.problem.ny();
    if shape[2] != ny {
        return Err(PyValueError::new_err(format!(
            "z: measurements have {} components, the model measures {ny}",
            shape[2]
        )));
    }
    let what = if matches!(job, NonlinearJob::Filter) {
        "filtering"
    } else {
        "smoothing"
    };
    let bar = Bar::new(progress, what, shape[0] as u64, "tracks");
    let out = run_detached(py, || {
        let z = Measurements::new(shape[0], shape[1], shape[2], data.to_vec())?;
        let out = estimate_on(device, &file.problem, &z, &file.options, job)?;
        bar.inc(shape[0] as u64);
        Ok(out)
    })?;
    bar.finish();
    drop(guard);
    let (b, t, nx) = (shape[0], shape[1], file.problem.nx());
    let loglik = out.filtered.loglik().map(|l| l.to_vec());
    let est = out.smoothed.unwrap_or(out.filtered);
    let (mean, cov, _) = est.into_parts();
    let d = PyDict::new(py);
    d.set_item("mean", owned(py, mean, &[b, t, nx])?)?;
    d.set_item("cov", owned(py, cov, &[b, t, nx, nx])?)?;
    match loglik {
        Some(l) => d.set_item("loglik", owned(py, l, &[b, t])?)?,
        None => d.set_item("loglik", py.None())?,
    }
    match out.mode_probs {
        Some(p) => {
            let r = p.len() / (b * t).max(1);
            d.set_item("mode_probs", owned(py, p, &[b, t, r])?)?
        }
        None => d.set_item("mode_probs", py.None())?,
    }
    Ok(d)
}

/// The nonlinear filter or smoother of the model file `text` (named `origin` in
/// messages) over `z` [B, T, ny] (float32 or float64, C order), on the CPU: a dict of
/// `mean` [B, T, nx], `cov` [B, T, nx, nx], `loglik` [B, T] (the filter's; for the
/// iterated smoothers the last pass's) and `mode_probs` [B, T, r] (IMM; else None).
/// `filter`, `iterations`, `alpha`, `beta`, `kappa` override the file's `[filter]`.
#[pyfunction]
#[pyo3(signature = (text, origin, z, filter=None, smooth=false, method="rts", iterations=None, alpha=None, beta=None, kappa=None, device="cpu", progress=false))]
#[allow(clippy::too_many_arguments)]
fn nonlinear_estimate<'py>(
    py: Python<'py>,
    text: &str,
    origin: &str,
    z: &Bound<'py, PyAny>,
    filter: Option<&str>,
    smooth: bool,
    method: &str,
    iterations: Option<usize>,
    alpha: Option<f64>,
    beta: Option<f64>,
    kappa: Option<f64>,
    device: &str,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let mut file = parse(text, origin)?;
    // "auto" stays on the CPU: the GPU runs the filters and RTS smoothers but not the
    // iterated smoother's passes, so auto could not choose it for every call alike.
    // A CUDA device is opened by the call (after what the GPU does not run is refused).
    let device = match device {
        "auto" => Device::Cpu,
        "cuda" => Device::Cuda(0),
        d => match d.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
            Some(n) => Device::Cuda(n),
            None => Device::parse(d).map_err(to_py)?,
        },
    };
    let kind = match filter {
        Some(s) => Some(FilterChoice::parse(s).ok_or_else(|| {
            PyValueError::new_err(format!(
                "filter: unknown filter \"{s}\" (expected {})",
                FilterKind::NAMES
            ))
        })?),
        None => file.filter,
    };
    match kind {
        Some(FilterChoice::Kf) => {
            return Err(PyValueError::new_err(
                "filter: kf is kestrel.KalmanFilter's (use ekf, ukf, ckf or iekf here)",
            ))
        }
        Some(FilterChoice::Gaussian(k)) => file.options.kind = k,
        None => {}
    }
    if let Some(n) = iterations {
        if n == 0 {
            return Err(PyValueError::new_err("iterations: must be at least 1"));
        }
        file.options.iterations = n;
    }
    if let Some(a) = alpha {
        file.options.alpha = a;
    }
    if let Some(b) = beta {
        file.options.beta = b;
    }
    if kappa.is_some() {
        file.options.kappa = kappa;
    }
    let job = match (smooth, method) {
        (false, _) => NonlinearJob::Filter,
        (true, "rts") => NonlinearJob::Smooth(NonlinearSmoother::Rts),
        (true, "iterated") => NonlinearJob::Smooth(NonlinearSmoother::Iterated),
        (true, "parallel-iterated") => NonlinearJob::Smooth(NonlinearSmoother::ParallelIterated),
        (true, m) => {
            return Err(PyValueError::new_err(format!(
                "method: unknown smoother \"{m}\" (expected rts, iterated or parallel-iterated)"
            )))
        }
    };
    match dtype_of(z, "z")? {
        Dtype::F64 => typed::<f64>(py, &file, z, job, device, progress),
        Dtype::F32 => typed::<f32>(py, &file, z, job, device, progress),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(nonlinear_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(nonlinear_check, m)?)?;
    m.add_function(wrap_pyfunction!(nonlinear_text, m)?)?;
    Ok(())
}
