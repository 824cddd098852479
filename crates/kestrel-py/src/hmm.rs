//! Hidden Markov models (`kestrel hmm`): `kestrel::hmm::hmm_on` over a model given as
//! arrays (or read from a model file's text).

use crate::arrays::{c_slice, dtype_of, owned, Dtype};
use crate::{run_detached, to_py};
use kestrel::hmm::{self, Emission, HiddenMarkovModel, HmmMethod, HmmOptions};
use kestrel::{Device, Measurements, Real, ScanAlgorithm};
use numpy::{PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A float64 array's shape and values (row-major).
fn values(a: &Bound<'_, PyAny>, name: &str) -> PyResult<(Vec<usize>, Vec<f64>)> {
    let g: PyReadonlyArrayDyn<'_, f64> = a
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{name}: expected a float64 array")))?;
    let shape = g.shape().to_vec();
    Ok((shape, g.as_array().iter().copied().collect()))
}

fn expect_shape(name: &str, shape: &[usize], want: &[usize]) -> PyResult<()> {
    if shape != want {
        return Err(PyValueError::new_err(format!(
            "{name}: expected shape {want:?}, got {shape:?}"
        )));
    }
    Ok(())
}

/// The model from arrays: `transition` [K, K], `initial` [K], and `probs` [K, M]
/// (categorical) or `means` [K, ny] and `covs` [K, ny, ny] (Gaussian).
fn model_of(
    transition: &Bound<'_, PyAny>,
    initial: &Bound<'_, PyAny>,
    kind: &str,
    probs: Option<&Bound<'_, PyAny>>,
    means: Option<&Bound<'_, PyAny>>,
    covs: Option<&Bound<'_, PyAny>>,
) -> PyResult<HiddenMarkovModel> {
    let (si, init) = values(initial, "initial")?;
    if si.len() != 1 {
        return Err(PyValueError::new_err(format!(
            "initial: expected a vector (1 axis), got shape {si:?}"
        )));
    }
    let k = si[0];
    let (st, tr) = values(transition, "transition")?;
    expect_shape("transition", &st, &[k, k])?;
    let emission = match kind {
        "categorical" => {
            let p = probs
                .ok_or_else(|| PyValueError::new_err("emission: categorical needs probs [K, M]"))?;
            let (sp, pv) = values(p, "probs")?;
            if sp.len() != 2 || sp[0] != k {
                return Err(PyValueError::new_err(format!(
                    "probs: expected shape [{k}, M], got {sp:?}"
                )));
            }
            Emission::Categorical {
                symbols: sp[1],
                probs: pv,
            }
        }
        "gaussian" => {
            let (m, c) = match (means, covs) {
                (Some(m), Some(c)) => (m, c),
                _ => {
                    return Err(PyValueError::new_err(
                        "emission: gaussian needs means [K, ny] and covs [K, ny, ny]",
                    ))
                }
            };
            let (sm, mv) = values(m, "means")?;
            if sm.len() != 2 || sm[0] != k {
                return Err(PyValueError::new_err(format!(
                    "means: expected shape [{k}, ny], got {sm:?}"
                )));
            }
            let ny = sm[1];
            let (sc, cv) = values(c, "covs")?;
            expect_shape("covs", &sc, &[k, ny, ny])?;
            Emission::Gaussian {
                ny,
                means: mv,
                covs: cv,
            }
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "emission: unknown kind \"{other}\" (expected categorical or gaussian)"
            )))
        }
    };
    HiddenMarkovModel::new(tr, init, emission).map_err(to_py)
}

/// Checks a model given as arrays: `(K, ny)`; raises `ModelError` naming the field.
#[pyfunction]
#[pyo3(signature = (transition, initial, kind, probs=None, means=None, covs=None))]
fn hmm_check(
    transition: &Bound<'_, PyAny>,
    initial: &Bound<'_, PyAny>,
    kind: &str,
    probs: Option<&Bound<'_, PyAny>>,
    means: Option<&Bound<'_, PyAny>>,
    covs: Option<&Bound<'_, PyAny>>,
) -> PyResult<(usize, usize)> {
    let m = model_of(transition, initial, kind, probs, means, covs)?;
    Ok((m.states(), m.ny()))
}

/// A model file's text (named `origin` in messages) as a dict of arrays: `transition`,
/// `initial`, `kind`, and `probs` or `means` and `covs`.
#[pyfunction]
fn hmm_from_toml<'py>(py: Python<'py>, text: &str, origin: &str) -> PyResult<Bound<'py, PyDict>> {
    let m = hmm::hmm_from_toml(text, origin.as_ref()).map_err(to_py)?;
    let k = m.states();
    let d = PyDict::new(py);
    d.set_item("transition", owned(py, m.transition().to_vec(), &[k, k])?)?;
    d.set_item("initial", owned(py, m.initial().to_vec(), &[k])?)?;
    d.set_item("kind", m.emission().kind())?;
    match m.emission() {
        Emission::Categorical { symbols, probs } => {
            d.set_item("probs", owned(py, probs.clone(), &[k, *symbols])?)?;
        }
        Emission::Gaussian { ny, means, covs } => {
            d.set_item("means", owned(py, means.clone(), &[k, *ny])?)?;
            d.set_item("covs", owned(py, covs.clone(), &[k, *ny, *ny])?)?;
        }
    }
    Ok(d)
}

fn typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    model: &HiddenMarkovModel,
    z: &Bound<'py, PyAny>,
    device: Device,
    opts: &HmmOptions,
) -> PyResult<Bound<'py, PyDict>> {
    let guard: PyReadonlyArrayDyn<'py, T> = z.extract()?;
    let (shape, data) = c_slice(&guard, "obs", 3)?;
    let out = run_detached(py, || {
        let z = Measurements::new(shape[0], shape[1], shape[2], data.to_vec())?;
        hmm::hmm_on(device, model, &z, opts)
    })?;
    drop(guard);
    let (b, t, k) = (out.tracks, out.steps, out.states);
    let d = PyDict::new(py);
    d.set_item("filtered", owned(py, out.filtered, &[b, t, k])?)?;
    d.set_item("smoothed", owned(py, out.smoothed, &[b, t, k])?)?;
    d.set_item("loglik", owned(py, out.loglik, &[b, t])?)?;
    d.set_item("path", owned(py, out.path, &[b, t])?)?;
    Ok(d)
}

/// Filtered and smoothed distributions, per-step log-likelihoods and Viterbi paths of
/// `obs` [B, T, ny] (float32 or float64, C order; categorical codes as numbers): a dict
/// of `filtered` [B, T, K], `smoothed` [B, T, K], `loglik` [B, T], `path` [B, T] (int64).
#[pyfunction]
#[pyo3(signature = (transition, initial, kind, probs, means, covs, obs, method="sequential", scan="fastest", device="cpu"))]
#[allow(clippy::too_many_arguments)]
fn hmm_run<'py>(
    py: Python<'py>,
    transition: &Bound<'py, PyAny>,
    initial: &Bound<'py, PyAny>,
    kind: &str,
    probs: Option<&Bound<'py, PyAny>>,
    means: Option<&Bound<'py, PyAny>>,
    covs: Option<&Bound<'py, PyAny>>,
    obs: &Bound<'py, PyAny>,
    method: &str,
    scan: &str,
    device: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let model = model_of(transition, initial, kind, probs, means, covs)?;
    let method =
        HmmMethod::parse(method).map_err(|e| PyValueError::new_err(format!("method: {e}")))?;
    let scan: ScanAlgorithm = scan
        .parse()
        .map_err(|e: String| PyValueError::new_err(format!("scan: {e}")))?;
    let device = Device::parse(device).map_err(to_py)?;
    let opts = HmmOptions::default().with_method(method).with_scan(scan);
    match dtype_of(obs, "obs")? {
        Dtype::F64 => typed::<f64>(py, &model, obs, device, &opts),
        Dtype::F32 => typed::<f32>(py, &model, obs, device, &opts),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hmm_check, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_from_toml, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_run, m)?)?;
    Ok(())
}
