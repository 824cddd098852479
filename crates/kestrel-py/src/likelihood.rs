//! The likelihood family: per-step marginal log-likelihoods `log p(z_t | z_0:t-1)`
//! (`kestrel loglik`).

use crate::arrays::{c_slice, dtype_of, owned, Dtype};
use crate::kalman::{device_name, PyModel};
use crate::progress::{chunks, Bar};
use crate::run_detached;
use crate::varying::PyTimeVaryingModel;
use kestrel::likelihood::{self, Method, Options};
use kestrel::model::LinearModel;
use kestrel::{Device, Measurements, Real, ScanAlgorithm};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The values of a run and how they were computed (`LogLik` without its sizes).
struct Run<T> {
    values: Vec<T>,
    window: Option<usize>,
    bound: Option<f64>,
}

/// The whole batch in one call.
fn whole<T: Real>(
    device: Device,
    model: &LinearModel,
    z: &Measurements<T>,
    method: Method,
    opts: &Options,
) -> kestrel::Result<Run<T>> {
    let ll = likelihood::loglik_linear(device, model, z, method, opts)?;
    Ok(Run {
        values: ll.values,
        window: ll.window,
        bound: ll.bound,
    })
}

/// About a hundred chunks of tracks, for the progress bar: `exact` and `parallel`,
/// whose values of a track depend on that track alone. The windowed methods run whole:
/// their window (`window:auto`), its bound and the taps of each pattern of missing values
/// come from the whole batch.
fn chunked<T: Real>(
    device: Device,
    model: &LinearModel,
    z: &Measurements<T>,
    method: Method,
    opts: &Options,
    bar: &Bar,
) -> kestrel::Result<Run<T>> {
    let (b, t, ny) = (z.tracks(), z.steps(), z.ny());
    let mut values = vec![T::zero(); b * t];
    for (start, len) in chunks(b, 64) {
        let part = Measurements::new(
            len,
            t,
            ny,
            z.data()[start * t * ny..(start + len) * t * ny].to_vec(),
        )?;
        let ll = likelihood::loglik_linear(device, model, &part, method, opts)?;
        values[start * t..(start + len) * t].copy_from_slice(&ll.values);
        bar.inc(len as u64);
    }
    Ok(Run {
        values,
        window: None,
        bound: None,
    })
}

#[allow(clippy::too_many_arguments)]
fn loglik_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    model: &LinearModel,
    z: &Bound<'py, PyAny>,
    device: Device,
    method: Method,
    opts: &Options,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let guard: PyReadonlyArrayDyn<'py, T> = z.extract()?;
    let (shape, data) = c_slice(&guard, "z", 3)?;
    if shape[2] != model.ny() {
        return Err(PyValueError::new_err(format!(
            "z: measurements have {} components, the model measures {}",
            shape[2],
            model.ny()
        )));
    }
    let (b, t, ny) = (shape[0], shape[1], shape[2]);
    kestrel::data::require_data("z", b, t).map_err(crate::to_py)?;
    let bar = Bar::new(progress, "log-likelihoods", b as u64, "tracks");
    let run = run_detached(py, || {
        // The caller's array read in place: no copy of the measurements.
        Measurements::in_place(b, t, ny, data, |z| {
            kestrel::estimate::warn_if_large_for_f32(z);
            if bar.on() && b > 1 && matches!(method, Method::Exact | Method::Parallel) {
                chunked(device, model, z, method, opts, &bar)
            } else {
                let r = whole(device, model, z, method, opts)?;
                bar.inc(b as u64);
                Ok(r)
            }
        })?
    })?;
    bar.finish();
    drop(guard);
    let out = PyDict::new(py);
    out.set_item("loglik", owned(py, run.values, &[b, t])?)?;
    out.set_item("window", run.window)?;
    out.set_item("bound", run.bound)?;
    out.set_item("device", device_name(device))?;
    Ok(out)
}

/// Per-step log-likelihoods of every track of `z` [B, T, ny] (float32 or float64, C
/// order) as `kestrel loglik` computes them: a dict of `loglik` [B, T], the `window`
/// and its error `bound` (windowed methods, else None) and the `device` it ran on.
/// `device` is resolved by the caller (`auto` here: the CPU for `exact`, else a GPU when
/// one is usable).
#[pyfunction]
#[pyo3(signature = (model, z, method="exact", vague=likelihood::DEFAULT_VAGUE, steady=None, device="auto", scan="fastest", progress=false))]
#[allow(clippy::too_many_arguments)]
fn loglik<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    z: &Bound<'py, PyAny>,
    method: &str,
    vague: f64,
    steady: Option<f64>,
    device: &str,
    scan: &str,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    // The command line's checks, in its order, with its messages less the dashes.
    let method: Method = method
        .parse()
        .map_err(|e: kestrel::Error| PyValueError::new_err(format!("method: {e}")))?;
    if !(vague.is_finite() && vague > 0.0) {
        return Err(PyValueError::new_err(format!(
            "vague must be finite and positive, got {vague}"
        )));
    }
    if let Some(t) = steady {
        if !(t.is_finite() && t >= 0.0) {
            return Err(PyValueError::new_err(format!(
                "steady must be finite and non-negative, got {t}"
            )));
        }
        if method != Method::Exact {
            return Err(PyValueError::new_err(
                "steady applies to method \"exact\" only",
            ));
        }
    }
    let scan: ScanAlgorithm = scan
        .parse()
        .map_err(|e| PyValueError::new_err(format!("scan: {e}")))?;
    let device = if method == Method::Exact && device == "auto" {
        Device::Cpu
    } else if device == "auto" {
        Device::auto().device
    } else {
        Device::parse(device).map_err(crate::to_py)?
    };
    let opts = Options::default()
        .with_vague(vague)
        .with_steady(steady)
        .with_scan(scan);
    // A `Model` or a `TimeVaryingModel` (its per-step matrices: `kestrel loglik` with a
    // time-varying file).
    let invariant;
    let model: &LinearModel = if let Ok(m) = model.cast::<PyModel>() {
        invariant = LinearModel::Invariant(m.get().inner.clone());
        &invariant
    } else if let Ok(m) = model.cast::<PyTimeVaryingModel>() {
        &m.get().inner
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "model: expected a kestrel Model or TimeVaryingModel, got {}",
            model.get_type().name()?
        )));
    };
    match dtype_of(z, "z")? {
        Dtype::F64 => loglik_typed::<f64>(py, model, z, device, method, &opts, progress),
        Dtype::F32 => loglik_typed::<f32>(py, model, z, device, method, &opts, progress),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(loglik, m)?)?;
    Ok(())
}
