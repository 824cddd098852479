//! Time-varying models (`[model] kind = "time-varying"`, per-step matrices from an
//! `.npz`) and the retrodiction of stored filter estimates (Tager 2013, ch. 3).

use crate::arrays::{c_slice, dtype_of, owned, Dtype};
use crate::kalman::{device_name, resolve_device, scan_of, PyModel};
use crate::{run_detached, to_py};
use kestrel::model::LinearModel;
use kestrel::parallel::Moments;
use kestrel::{Estimates, Real, ScanAlgorithm, StateSpace};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// A linear-Gaussian model with per-step matrices: `F`, `Q` `[T, nx, nx]`, `H`
/// `[T, ny, nx]`, `R` `[T, ny, ny]`, `u` `[T, nx]`, `d` `[T, ny]` (entry `k` is the
/// transition into step `k` and the measurement model of step `k`; `F[0]`, `Q[0]`,
/// `u[0]` are unused), with the prior `(x0, P0)` of step 0. Read from a model file
/// with `kind = "time-varying"` (`kestrel.load_model`).
#[pyclass(name = "TimeVaryingModel", module = "kestrel._kestrel", frozen)]
pub struct PyTimeVaryingModel {
    pub inner: LinearModel,
}

fn stacked<'py>(
    py: Python<'py>,
    m: &LinearModel,
    part: impl Fn(&kestrel::model::StepMatrices) -> Vec<f64>,
    dims: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let steps = m.varying().map_or(&[][..], |v| v.steps());
    let v: Vec<f64> = steps.iter().flat_map(part).collect();
    let mut shape = vec![steps.len()];
    shape.extend_from_slice(dims);
    owned(py, v, &shape)
}

fn rows(a: &kestrel::nalgebra::DMatrix<f64>) -> Vec<f64> {
    (0..a.nrows())
        .flat_map(|i| (0..a.ncols()).map(move |j| a[(i, j)]))
        .collect()
}

#[pymethods]
impl PyTimeVaryingModel {
    /// Reads a time-varying model file.
    #[staticmethod]
    fn from_toml(path: PathBuf) -> PyResult<Self> {
        let inner = kestrel::model::load_linear_model(&path).map_err(to_py)?;
        if !inner.is_varying() {
            return Err(PyValueError::new_err(format!(
                "{}: not a time-varying model (kind = \"time-varying\"): read it with Model.from_toml",
                path.display()
            )));
        }
        Ok(PyTimeVaryingModel { inner })
    }

    #[getter]
    fn nx(&self) -> usize {
        self.inner.nx()
    }
    #[getter]
    fn ny(&self) -> usize {
        self.inner.ny()
    }
    /// How many steps the model has matrices for.
    #[getter]
    fn steps(&self) -> usize {
        self.inner.steps_covered().unwrap_or(0)
    }
    /// The `.npz` the per-step matrices came from.
    #[getter]
    fn file(&self) -> String {
        match &self.inner {
            LinearModel::Varying { file, .. } => file.display().to_string(),
            LinearModel::Invariant(_) => String::new(),
        }
    }
    #[getter(F)]
    fn f<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let n = self.nx();
        stacked(py, &self.inner, |s| rows(&s.f), &[n, n])
    }
    #[getter(Q)]
    fn q<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let n = self.nx();
        stacked(py, &self.inner, |s| rows(&s.q), &[n, n])
    }
    #[getter(H)]
    fn h<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        stacked(py, &self.inner, |s| rows(&s.h), &[self.ny(), self.nx()])
    }
    #[getter(R)]
    fn r<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let n = self.ny();
        stacked(py, &self.inner, |s| rows(&s.r), &[n, n])
    }
    #[getter]
    fn u<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        stacked(
            py,
            &self.inner,
            |s| s.u.iter().copied().collect(),
            &[self.nx()],
        )
    }
    #[getter]
    fn d<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        stacked(
            py,
            &self.inner,
            |s| s.d.iter().copied().collect(),
            &[self.ny()],
        )
    }
    #[getter]
    fn x0<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let x0 = &self.inner.prior().x0;
        owned(py, x0.iter().copied().collect(), &[x0.len()])
    }
    #[getter(P0)]
    fn p0<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let n = self.nx();
        owned(py, rows(&self.inner.prior().p0), &[n, n])
    }

    fn __repr__(&self) -> String {
        format!(
            "TimeVaryingModel(nx={}, ny={}, steps={})",
            self.nx(),
            self.ny(),
            self.steps()
        )
    }
}

/// The model behind a `Model` or a `TimeVaryingModel` object.
pub fn state_space<'a>(model: &'a Bound<'_, PyAny>) -> PyResult<&'a dyn StateSpace> {
    if let Ok(m) = model.cast::<PyModel>() {
        return Ok(&m.get().inner);
    }
    if let Ok(m) = model.cast::<PyTimeVaryingModel>() {
        return Ok(&m.get().inner);
    }
    Err(PyTypeError::new_err(format!(
        "model: expected a kestrel Model or TimeVaryingModel, got {}",
        model.get_type().name()?
    )))
}

/// Reads a linear-Gaussian model file of any form: a `Model`, or a `TimeVaryingModel`
/// for `kind = "time-varying"`.
#[pyfunction]
fn load_linear_model(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    match kestrel::model::load_linear_model(&path).map_err(to_py)? {
        LinearModel::Invariant(inner) => Ok(Py::new(py, PyModel { inner })?.into_any()),
        v => Ok(Py::new(py, PyTimeVaryingModel { inner: v })?.into_any()),
    }
}

/// The retrodiction of stored filter estimates: `mean` [B, T, nx] and `cov`
/// [B, T, nx, nx] (float32 or float64, the same) smoothed with `method` `"rts"` (the RTS
/// recursion) or `"parallel"` (the reverse scan of the pairs `(C_k, b_k)` with `scan`);
/// with `means_only` the means alone (no covariance formed on a GPU). A dict of `mean`,
/// `cov` (None with `means_only`) and the `device`.
#[pyfunction]
#[pyo3(signature = (model, mean, cov, means_only=false, method="rts", scan="fastest", device="auto"))]
#[allow(clippy::too_many_arguments)]
fn kalman_retrodict<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    mean: &Bound<'py, PyAny>,
    cov: &Bound<'py, PyAny>,
    means_only: bool,
    method: &str,
    scan: &str,
    device: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let model = state_space(model)?;
    let alg = match method {
        "rts" => ScanAlgorithm::Sequential,
        "parallel" => scan_of(scan)?,
        m => {
            return Err(PyValueError::new_err(format!(
                "method: unknown retrodiction method \"{}\" (expected rts or parallel)",
                m.escape_debug()
            )))
        }
    };
    let moments = if means_only {
        Moments::MeansOnly
    } else {
        Moments::MeansAndCovariances
    };
    let (dm, dc) = (dtype_of(mean, "mean")?, dtype_of(cov, "cov")?);
    if dm != dc {
        return Err(PyTypeError::new_err(
            "mean and cov: expected the same dtype (both float32 or both float64)",
        ));
    }
    match dm {
        Dtype::F64 => typed::<f64>(py, model, mean, cov, alg, moments, device),
        Dtype::F32 => typed::<f32>(py, model, mean, cov, alg, moments, device),
    }
}

fn typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    model: &dyn StateSpace,
    mean: &Bound<'py, PyAny>,
    cov: &Bound<'py, PyAny>,
    alg: ScanAlgorithm,
    moments: Moments,
    device: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let gm: PyReadonlyArrayDyn<'py, T> = mean.extract()?;
    let gc: PyReadonlyArrayDyn<'py, T> = cov.extract()?;
    let (ms, md) = c_slice(&gm, "mean", 3)?;
    let (cs, cd) = c_slice(&gc, "cov", 4)?;
    let nx = model.nx();
    if ms[2] != nx || cs != [ms[0], ms[1], nx, nx] {
        return Err(PyValueError::new_err(format!(
            "mean {ms:?} and cov {cs:?}: expected [B, T, nx] and [B, T, nx, nx] with the model's nx = {nx}"
        )));
    }
    let (s, dev) = run_detached(py, || {
        let dev = resolve_device::<T>(device, None, 0, false, false)?;
        let f = Estimates::new(ms[0], ms[1], nx, md.to_vec(), cd.to_vec(), None)?;
        let s = kestrel::parallel::retrodict(dev, model, &f, alg, moments)?;
        Ok((s, dev))
    })?;
    let (b, t) = (s.tracks(), s.steps());
    let (m, c, _) = s.into_parts();
    let out = PyDict::new(py);
    out.set_item("mean", owned(py, m, &[b, t, nx])?)?;
    if moments == Moments::MeansOnly {
        out.set_item("cov", py.None())?;
    } else {
        out.set_item("cov", owned(py, c, &[b, t, nx, nx])?)?;
    }
    out.set_item("device", device_name(dev))?;
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTimeVaryingModel>()?;
    m.add_function(wrap_pyfunction!(load_linear_model, m)?)?;
    m.add_function(wrap_pyfunction!(kalman_retrodict, m)?)?;
    Ok(())
}
