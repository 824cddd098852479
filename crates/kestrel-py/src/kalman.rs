//! The Kalman family: the model, the batched filter and smoothers.

use crate::arrays::{c_slice, dtype_of, matrix, owned, vector, Dtype};
use crate::progress::{chunks, Bar};
use crate::{run_detached, to_py};
use kestrel::data::{CovOutput, Outputs};
use kestrel::{
    Device, FilterMethod, FilterOptions, Measurements, Model, Real, ScanAlgorithm, SmoothMethod,
    StateSpace,
};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// A time-invariant linear-Gaussian model `x_k = F x_{k-1} + u + w`, `z_k = H x_k + d + v`,
/// `w ~ N(0, Q)`, `v ~ N(0, R)`, with the prior `(x0, P0)` of step 0.
#[pyclass(name = "Model", module = "kestrel._kestrel", frozen)]
#[derive(Clone)]
pub struct PyModel {
    pub inner: Model,
}

fn mat<'py>(py: Python<'py>, m: &kestrel::nalgebra::DMatrix<f64>) -> PyResult<Bound<'py, PyAny>> {
    let v: Vec<f64> = (0..m.nrows())
        .flat_map(|i| (0..m.ncols()).map(move |j| m[(i, j)]))
        .collect();
    owned(py, v, &[m.nrows(), m.ncols()])
}

fn vec1<'py>(py: Python<'py>, v: &kestrel::nalgebra::DVector<f64>) -> PyResult<Bound<'py, PyAny>> {
    owned(py, v.iter().copied().collect(), &[v.len()])
}

#[pymethods]
impl PyModel {
    /// Builds and checks a model from float64 arrays (`u`, `d` default to zeros).
    #[new]
    #[pyo3(signature = (F, H, Q, R, x0, P0, u=None, d=None))]
    #[allow(non_snake_case)]
    fn new(
        F: &Bound<'_, PyAny>,
        H: &Bound<'_, PyAny>,
        Q: &Bound<'_, PyAny>,
        R: &Bound<'_, PyAny>,
        x0: &Bound<'_, PyAny>,
        P0: &Bound<'_, PyAny>,
        u: Option<&Bound<'_, PyAny>>,
        d: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let f = matrix(F, "F")?;
        let h = matrix(H, "H")?;
        let q = matrix(Q, "Q")?;
        let r = matrix(R, "R")?;
        let x0 = vector(x0, "x0")?;
        let p0 = matrix(P0, "P0")?;
        let (nx, ny) = (f.nrows(), h.nrows());
        let u = u.map(|u| vector(u, "u")).transpose()?;
        let d = d.map(|d| vector(d, "d")).transpose()?;
        let m = Model::new(f, q, h, r, x0, p0).map_err(to_py)?;
        let m = if u.is_some() || d.is_some() {
            let u = u.unwrap_or_else(|| kestrel::nalgebra::DVector::zeros(nx));
            let d = d.unwrap_or_else(|| kestrel::nalgebra::DVector::zeros(ny));
            m.with_offsets(u, d).map_err(to_py)?
        } else {
            m
        };
        Ok(PyModel { inner: m })
    }

    /// Reads a model file (every form `kestrel filter --model` reads).
    #[staticmethod]
    fn from_toml(path: PathBuf) -> PyResult<Self> {
        kestrel::model::load_model(&path)
            .map(|inner| PyModel { inner })
            .map_err(to_py)
    }

    /// Parses a model from TOML text (`origin` names it in errors).
    #[staticmethod]
    #[pyo3(signature = (text, origin="<string>"))]
    fn from_toml_str(text: &str, origin: &str) -> PyResult<Self> {
        kestrel::model::model_from_toml(text, std::path::Path::new(origin))
            .map(|inner| PyModel { inner })
            .map_err(to_py)
    }

    /// The model in the explicit TOML form (numbers round-trip exactly).
    fn to_toml(&self) -> String {
        kestrel::model::model_to_toml(&self.inner)
    }

    /// Writes the model file (explicit form).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        kestrel::model::save_model(&self.inner, &path).map_err(to_py)
    }

    #[getter]
    fn nx(&self) -> usize {
        self.inner.nx()
    }
    #[getter]
    fn ny(&self) -> usize {
        self.inner.ny()
    }
    #[getter(F)]
    fn f<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        mat(py, self.inner.f())
    }
    #[getter(H)]
    fn h<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        mat(py, self.inner.h())
    }
    #[getter(Q)]
    fn q<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        mat(py, self.inner.q())
    }
    #[getter(R)]
    fn r<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        mat(py, self.inner.r())
    }
    #[getter]
    fn x0<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        vec1(py, &self.inner.prior().x0)
    }
    #[getter(P0)]
    fn p0<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        mat(py, &self.inner.prior().p0)
    }
    #[getter]
    fn u<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        vec1(py, self.inner.u())
    }
    #[getter]
    fn d<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        vec1(py, self.inner.d())
    }

    /// Pickling (Dask ships models to its workers): through the exact TOML form.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let ctor = slf.get_type().getattr("from_toml_str")?;
        Ok((ctor, (slf.get().to_toml(),)))
    }

    fn __repr__(&self) -> String {
        format!("Model(nx={}, ny={})", self.inner.nx(), self.inner.ny())
    }
}

/// `--device`: `auto` chooses by the size of the job for the sequential filter and RTS
/// smoother (as the CLI does), else the GPU when one is usable.
pub(crate) fn resolve_device<T: Real>(
    name: &str,
    model: Option<&Model>,
    target_steps: usize,
    sequential: bool,
    smooth: bool,
) -> kestrel::Result<Device> {
    if name == "auto" {
        if let (true, Some(model)) = (sequential, model) {
            return Ok(
                kestrel::kalman::cuda::choose::<T>(model, target_steps as u64, smooth).device,
            );
        }
        return Ok(Device::auto().device);
    }
    Device::parse(name)
}

/// The short name of a device (`cpu`, `cuda:0`, `cuda:all`).
pub fn device_name(d: Device) -> String {
    match d {
        Device::Cpu => "cpu".into(),
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::AllCuda => "cuda:all".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// `outputs=`: the command line's `--outputs` list.
fn outputs_of(s: &str) -> PyResult<Outputs> {
    Outputs::parse(s).map_err(|e| PyValueError::new_err(format!("outputs: {e}")))
}

pub(crate) fn scan_of(s: &str) -> PyResult<ScanAlgorithm> {
    s.parse::<ScanAlgorithm>()
        .map_err(|e| PyValueError::new_err(format!("scan: {e}")))
}

#[derive(Clone, Copy)]
enum Job {
    Filter(FilterMethod),
    Smooth(SmoothMethod),
}

fn job_of(smooth: bool, method: &str, scan: ScanAlgorithm) -> PyResult<Job> {
    Ok(match (smooth, method) {
        (false, "sequential") => Job::Filter(FilterMethod::Sequential),
        (false, "parallel") => Job::Filter(FilterMethod::Parallel(scan)),
        (true, "rts") => Job::Smooth(SmoothMethod::Rts),
        (true, "parallel-rts") => Job::Smooth(SmoothMethod::ParallelRts(scan)),
        (true, "two-filter") => Job::Smooth(SmoothMethod::TwoFilter(scan)),
        (false, "parallel-sqrt") => Job::Filter(FilterMethod::ParallelSqrt(scan)),
        (true, "parallel-sqrt-rts") => Job::Smooth(SmoothMethod::ParallelSqrtRts(scan)),
        (false, m) => {
            return Err(PyValueError::new_err(format!(
                "method: unknown filter method \"{}\" (expected sequential, parallel or parallel-sqrt)",
                m.escape_debug()
            )))
        }
        (true, m) => {
            return Err(PyValueError::new_err(format!(
                "method: unknown smoother method \"{}\" (expected rts, parallel-rts, two-filter or parallel-sqrt-rts)",
                m.escape_debug()
            )))
        }
    })
}

/// The buffers of one job: `(tracks, steps, mean, cov, loglik)`, reduced to the outputs
/// asked for (a smoother's log-likelihoods are its filter's).
type Raw<T> = (usize, usize, Vec<T>, Vec<T>, Option<Vec<T>>);

fn run_job<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    job: Job,
    outputs: Outputs,
) -> kestrel::Result<Raw<T>> {
    let (b, t) = (z.tracks(), z.steps());
    match job {
        Job::Filter(m) => {
            let opts = FilterOptions::default().with_outputs(outputs);
            let (mean, cov, ll) = kestrel::filter_on(device, model, z, m, &opts)?
                .filtered
                .into_parts();
            Ok((b, t, mean, cov, ll))
        }
        Job::Smooth(m) => {
            let s = kestrel::smooth_on(device, model, z, m)?;
            let mut sm = s.smoothed;
            outputs.apply(&mut sm);
            let (mean, cov, _) = sm.into_parts();
            let (_, _, ll) = s.filtered.into_parts();
            Ok((b, t, mean, cov, if outputs.loglik { ll } else { None }))
        }
    }
}

/// What a job hands back to Python: the three buffers and their shapes.
struct Parts<T> {
    mean: Option<(Vec<T>, Vec<usize>)>,
    cov: Option<(Vec<T>, Vec<usize>)>,
    loglik: Option<(Vec<T>, Vec<usize>)>,
}

fn shaped<T: Real>(r: Raw<T>, nx: usize, outputs: Outputs) -> Parts<T> {
    let (b, t, mean, cov, ll) = r;
    let cov_shape = match outputs.cov {
        CovOutput::Full => vec![b, t, nx, nx],
        CovOutput::Diag => vec![b, t, nx],
        CovOutput::None => vec![],
    };
    Parts {
        mean: outputs.mean.then(|| (mean, vec![b, t, nx])),
        cov: outputs.cov.wanted().then_some((cov, cov_shape)),
        loglik: if outputs.loglik {
            ll.map(|l| (l, vec![b, t]))
        } else {
            None
        },
    }
}

/// Runs the job over the whole batch at once, or (with a progress bar) over about a
/// hundred chunks of tracks written into one set of buffers.
fn run_batched<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    shape: &[usize],
    data: &[T],
    job: Job,
    outputs: Outputs,
    bar: &Bar,
) -> kestrel::Result<Parts<T>> {
    let (b, t, ny) = (shape[0], shape[1], shape[2]);
    kestrel::data::require_data("z", b, t)?;
    if !bar.on() || b == 1 {
        // The caller's array read in place: no copy of the measurements.
        let r =
            Measurements::in_place(b, t, ny, data, |z| run_job(device, model, z, job, outputs))??;
        bar.inc(b as u64);
        return Ok(shaped(r, model.nx(), outputs));
    }
    let nx = model.nx();
    let per_cov = match outputs.cov {
        CovOutput::Full => nx * nx,
        CovOutput::Diag => nx,
        CovOutput::None => 0,
    };
    let mut mean = vec![T::zero(); if outputs.mean { b * t * nx } else { 0 }];
    let mut cov = vec![T::zero(); b * t * per_cov];
    let mut ll = vec![T::zero(); if outputs.loglik { b * t } else { 0 }];
    for (start, len) in chunks(b, 256) {
        let zs = &data[start * t * ny..(start + len) * t * ny];
        let (_, _, m, c, l) =
            Measurements::in_place(len, t, ny, zs, |z| run_job(device, model, z, job, outputs))??;
        if outputs.mean {
            mean[start * t * nx..(start + len) * t * nx].copy_from_slice(&m);
        }
        if per_cov > 0 {
            cov[start * t * per_cov..(start + len) * t * per_cov].copy_from_slice(&c);
        }
        if let (true, Some(l)) = (outputs.loglik, l) {
            ll[start * t..(start + len) * t].copy_from_slice(&l);
        }
        bar.inc(len as u64);
    }
    Ok(shaped((b, t, mean, cov, Some(ll)), nx, outputs))
}

#[allow(clippy::too_many_arguments)]
fn estimate_typed<'py, T: Real + numpy::Element, M: StateSpace + ?Sized>(
    py: Python<'py>,
    model: &M,
    z: &Bound<'py, PyAny>,
    device: &str,
    job: Job,
    outputs: Outputs,
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
    let (sequential, smooth) = match job {
        Job::Filter(FilterMethod::Sequential) => (true, false),
        Job::Smooth(SmoothMethod::Rts) => (true, true),
        Job::Smooth(_) => (false, true),
        Job::Filter(_) => (false, false),
    };
    let what = if smooth { "smoothing" } else { "filtering" };
    let bar = Bar::new(progress, what, shape[0] as u64, "tracks");
    let (parts, dev) = run_detached(py, || {
        let dev = resolve_device::<T>(
            device,
            model.as_invariant(),
            shape[0] * shape[1],
            sequential,
            smooth,
        )?;
        let parts = run_batched(dev, model, &shape, data, job, outputs, &bar)?;
        Ok((parts, dev))
    })?;
    bar.finish();
    drop(guard);
    let out = PyDict::new(py);
    for (key, p) in [
        ("mean", parts.mean),
        ("cov", parts.cov),
        ("loglik", parts.loglik),
    ] {
        match p {
            Some((v, s)) => out.set_item(key, owned(py, v, &s)?)?,
            None => out.set_item(key, py.None())?,
        }
    }
    out.set_item("device", device_name(dev))?;
    Ok(out)
}

/// The batched filter or smoother over `z` [B, T, ny] (float32 or float64, C order):
/// a dict of `mean` [B, T, nx], `cov` [B, T, nx, nx] (or its diagonal [B, T, nx]),
/// `loglik` [B, T] (None where not asked for) and the `device` it ran on. `model` is a
/// `Model` or a `TimeVaryingModel`.
#[pyfunction]
#[pyo3(signature = (model, z, smooth=false, device="auto", method=None, scan="fastest", outputs="all", progress=false))]
#[allow(clippy::too_many_arguments)]
fn kalman_estimate<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    z: &Bound<'py, PyAny>,
    smooth: bool,
    device: &str,
    method: Option<&str>,
    scan: &str,
    outputs: &str,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let method = method.unwrap_or(if smooth { "rts" } else { "sequential" });
    let job = job_of(smooth, method, scan_of(scan)?)?;
    let outputs = outputs_of(outputs)?;
    let model = crate::varying::state_space(model)?;
    match dtype_of(z, "z")? {
        Dtype::F64 => estimate_typed::<f64, _>(py, model, z, device, job, outputs, progress),
        Dtype::F32 => estimate_typed::<f32, _>(py, model, z, device, job, outputs, progress),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyModel>()?;
    m.add_function(wrap_pyfunction!(kalman_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(bench_library, m)?)?;
    m.add_function(wrap_pyfunction!(kalman_estimate_resident, m)?)?;
    m.add_function(wrap_pyfunction!(bench_device_kernels, m)?)?;
    Ok(())
}

/// The library's own time for the call `kalman_estimate` makes (seconds per repeat):
/// the measurements built once outside the timing, then `filter_on` / `smooth_on` alone.
/// `python -m kestrel.bench` sets it beside the Python call's time.
#[pyfunction]
#[pyo3(signature = (model, z, smooth=false, device="cpu", method=None, outputs="all", repeats=3))]
#[allow(clippy::too_many_arguments)]
fn bench_library<'py>(
    py: Python<'py>,
    model: &PyModel,
    z: &Bound<'py, PyAny>,
    smooth: bool,
    device: &str,
    method: Option<&str>,
    outputs: &str,
    repeats: usize,
) -> PyResult<Vec<f64>> {
    fn typed<T: Real + numpy::Element>(
        py: Python<'_>,
        model: &Model,
        z: &Bound<'_, PyAny>,
        device: &str,
        job: Job,
        outputs: Outputs,
        repeats: usize,
    ) -> PyResult<Vec<f64>> {
        let guard: PyReadonlyArrayDyn<'_, T> = z.extract()?;
        let (shape, data) = c_slice(&guard, "z", 3)?;
        run_detached(py, || {
            let dev = Device::parse(device)?;
            let z = Measurements::new(shape[0], shape[1], shape[2], data.to_vec())?;
            let mut times = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let t = std::time::Instant::now();
                let r = run_job(dev, model, &z, job, outputs)?;
                times.push(t.elapsed().as_secs_f64());
                drop(r);
            }
            Ok(times)
        })
    }
    let method = method.unwrap_or(if smooth { "rts" } else { "sequential" });
    let job = job_of(smooth, method, ScanAlgorithm::default())?;
    let outputs = outputs_of(outputs)?;
    match dtype_of(z, "z")? {
        Dtype::F64 => typed::<f64>(py, &model.inner, z, device, job, outputs, repeats),
        Dtype::F32 => typed::<f32>(py, &model.inner, z, device, job, outputs, repeats),
    }
}

/// The filter (or filter and RTS smoother) over measurements already on GPU `ordinal`
/// (a PyTorch or CuPy array's device address, C-contiguous `[B, T, ny]` of `dtype`
/// "f32" or "f64"), writing the outputs into the caller's device arrays whose addresses
/// are given (None: not wanted). The Python layer allocates those arrays with the
/// caller's library on the same device and synchronises that device before the call.
#[pyfunction]
#[pyo3(signature = (model, z, tracks, steps, ny, dtype, ordinal, smooth, mean=None, cov=None, loglik=None))]
#[allow(clippy::too_many_arguments)]
fn kalman_estimate_resident(
    py: Python<'_>,
    model: &PyModel,
    z: u64,
    tracks: usize,
    steps: usize,
    ny: usize,
    dtype: &str,
    ordinal: usize,
    smooth: bool,
    mean: Option<u64>,
    cov: Option<u64>,
    loglik: Option<u64>,
) -> PyResult<()> {
    use kestrel::kalman::cuda::{estimate_resident, CudaOptions, DeviceArrays};
    let a = DeviceArrays {
        z,
        tracks,
        steps,
        ny,
        mean,
        cov,
        loglik,
    };
    let poison = std::env::var_os("KESTREL_POISON").is_some();
    let copts = CudaOptions::default().with_poison(poison);
    let m = &model.inner;
    // SAFETY: the Python layer passes the addresses of live, C-contiguous arrays of
    // these shapes and dtype on device `ordinal`, outputs freshly allocated there.
    match dtype {
        "f32" => run_detached(py, || unsafe {
            estimate_resident::<f32>(ordinal, m, &a, smooth, &copts)
        }),
        "f64" => run_detached(py, || unsafe {
            estimate_resident::<f64>(ordinal, m, &a, smooth, &copts)
        }),
        other => Err(PyValueError::new_err(format!(
            "dtype: expected f32 or f64, got {other}"
        ))),
    }
}

/// The kernel-only time of the device-resident filter (seconds, median of `repeats`
/// after a warm-up): the same kernels and layout conversion on buffers allocated and
/// filled on the device beforehand, timed with CUDA events; the outputs asked for are
/// converted into device buffers as the resident call does (`python -m kestrel.bench`):
/// "the kernel-only figure plus the output copy the caller asked for".
#[pyfunction]
#[pyo3(signature = (model, z, device="cuda", outputs="mean", repeats=5))]
fn bench_device_kernels<'py>(
    py: Python<'py>,
    model: &PyModel,
    z: &Bound<'py, PyAny>,
    device: &str,
    outputs: &str,
    repeats: usize,
) -> PyResult<f64> {
    let outputs = outputs_of(outputs)?;
    fn typed<T: Real + numpy::Element>(
        py: Python<'_>,
        model: &Model,
        z: &Bound<'_, PyAny>,
        device: &str,
        outputs: Outputs,
        repeats: usize,
    ) -> PyResult<f64> {
        let guard: PyReadonlyArrayDyn<'_, T> = z.extract()?;
        let (shape, data) = c_slice(&guard, "z", 3)?;
        run_detached(py, || {
            use kestrel::kalman::cuda::{CudaOptions, DeviceBatch, OutputLayout};
            let ordinal = match Device::parse(device)? {
                Device::Cuda(i) => i,
                d => {
                    return Err(kestrel::Error::Unsupported(format!(
                        "bench_device_kernels needs one CUDA device, got {}",
                        device_name(d)
                    )))
                }
            };
            let z = Measurements::new(shape[0], shape[1], shape[2], data.to_vec())?;
            let b = DeviceBatch::new(
                ordinal,
                model,
                &z,
                kestrel::Keep::All,
                OutputLayout::Soa,
                false,
                &CudaOptions::default(),
            )?;
            b.filter()?;
            let mut times = Vec::with_capacity(repeats);
            for _ in 0..repeats.max(1) {
                times.push(b.filter()? + b.to_host_layout_of(outputs)?);
            }
            times.sort_by(f64::total_cmp);
            Ok(times[times.len() / 2])
        })
    }
    match dtype_of(z, "z")? {
        Dtype::F64 => typed::<f64>(py, &model.inner, z, device, outputs, repeats),
        Dtype::F32 => typed::<f32>(py, &model.inner, z, device, outputs, repeats),
    }
}
