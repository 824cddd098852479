//! The particle filter family: the model (every kind `kestrel pf --model` reads, or a
//! Kalman model) and the bootstrap filter (`kestrel pf`), with the same options and the
//! same messages as the command line.

use crate::arrays::{c_slice, dtype_of, owned, Dtype};
use crate::kalman::{device_name, PyModel};
use crate::progress::Bar;
use crate::{run_detached, to_py};
use kestrel::particle::{
    load_pf_model, particle_filter_on, pf_model_from_toml, Batch, ParticleModel, PfModel,
    PfOptions, PfOutput, Resampler,
};
use kestrel::{Device, Error, Measurements, Real};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// A model of the particle filter: a linear-Gaussian model (any kind `kestrel filter`
/// reads), range-only, bearings-only, range-bearing, stochastic volatility or a custom
/// CUDA C++ model (GPU only). It keeps the TOML text it was read from, for pickling.
#[pyclass(name = "PfModel", module = "kestrel._kestrel", frozen)]
pub struct PyPfModel {
    inner: PfModel,
    text: String,
    origin: PathBuf,
}

fn dims(m: &PfModel) -> (usize, usize) {
    (ParticleModel::<f64>::nx(m), ParticleModel::<f64>::ny(m))
}

#[pymethods]
impl PyPfModel {
    /// Reads a model file (every kind `kestrel pf --model` reads).
    #[staticmethod]
    fn from_toml(path: PathBuf) -> PyResult<Self> {
        let inner = load_pf_model(&path).map_err(to_py)?;
        // The file was just read whole; a second read cannot fail but for a race, and
        // then pickling the model fails, not this call.
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        Ok(PyPfModel {
            inner,
            text,
            origin: path,
        })
    }

    /// Parses a model from TOML text (`origin` names it in errors and locates a custom
    /// model's `source`).
    #[staticmethod]
    #[pyo3(signature = (text, origin="<string>"))]
    fn from_toml_str(text: &str, origin: &str) -> PyResult<Self> {
        let origin = PathBuf::from(origin);
        let inner = pf_model_from_toml(text, &origin).map_err(to_py)?;
        Ok(PyPfModel {
            inner,
            text: text.to_string(),
            origin,
        })
    }

    /// The particle model of a linear-Gaussian (Kalman) model.
    #[staticmethod]
    fn from_linear(model: &PyModel) -> PyResult<Self> {
        let inner = PfModel::linear(&model.inner).map_err(to_py)?;
        Ok(PyPfModel {
            inner,
            text: kestrel::model::model_to_toml(&model.inner),
            origin: PathBuf::from("<kalman model>"),
        })
    }

    /// The kind as the model file names it (`linear-gaussian` for the linear kinds).
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind_name()
    }
    #[getter]
    fn nx(&self) -> usize {
        dims(&self.inner).0
    }
    #[getter]
    fn ny(&self) -> usize {
        dims(&self.inner).1
    }
    /// The TOML text the model was read from.
    fn to_toml(&self) -> String {
        self.text.clone()
    }

    /// Pickling: through the TOML text and its origin (a custom model's source is read
    /// again, relative to the origin).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String, String))> {
        let ctor = slf.get_type().getattr("from_toml_str")?;
        let me = slf.get();
        Ok((
            ctor,
            (me.text.clone(), me.origin.to_string_lossy().into_owned()),
        ))
    }

    fn __repr__(&self) -> String {
        let (nx, ny) = dims(&self.inner);
        format!(
            "PfModel(kind={:?}, nx={nx}, ny={ny})",
            self.inner.kind_name()
        )
    }
}

/// The options, checked as `kestrel pf` checks them (its messages without the dashes).
fn options(
    particles: usize,
    resample: &str,
    ess: f64,
    seed: u64,
    keep: bool,
    first_track: u64,
) -> PyResult<PfOptions> {
    // The command line's checks and words (`kestrel pf --particles --ess`).
    use kestrel::limits::{count, range, End::In};
    count("particles", particles as u64, 1, u64::MAX).map_err(to_py)?;
    // A fraction of N: above 1 would be the same as 1 (every step), so it is refused.
    range("ess", ess, In(0.0), In(1.0)).map_err(to_py)?;
    let first_track = u32::try_from(first_track).map_err(|_| {
        PyValueError::new_err(format!(
            "first_track: tracks are numbered below 2^32 (got {first_track})"
        ))
    })?;
    let resampler =
        Resampler::parse(resample).map_err(|e| PyValueError::new_err(format!("resample: {e}")))?;
    Ok(PfOptions::new(particles)
        .with_resampler(resampler)
        .with_ess_threshold(ess)
        .with_seed(seed)
        .with_keep_particles(keep)
        .with_track_offset(first_track))
}

/// `device="auto"`: the GPU when one is usable, as `kestrel pf --device auto`.
fn resolve_device(name: &str) -> kestrel::Result<Device> {
    if name == "auto" {
        return Ok(Device::auto().device);
    }
    Device::parse(name)
}

/// A model that counts the particles it moves on a progress bar (the CPU filter's
/// only hook inside a run): the same draws and arithmetic as the model itself.
struct Counted<'a> {
    inner: &'a PfModel,
    bar: &'a Bar,
}

impl<T: Real> ParticleModel<T> for Counted<'_> {
    fn nx(&self) -> usize {
        ParticleModel::<T>::nx(self.inner)
    }
    fn ny(&self) -> usize {
        ParticleModel::<T>::ny(self.inner)
    }
    fn sample_prior(&self, x: &mut [T], noise: &mut kestrel::particle::philox::Normals<T>) {
        self.inner.sample_prior(x, noise)
    }
    fn propagate(&self, k: usize, x: &mut [T], noise: &mut kestrel::particle::philox::Normals<T>) {
        self.inner.propagate(k, x, noise)
    }
    fn log_likelihood(&self, k: usize, x: &[T], z: &[T]) -> T {
        self.inner.log_likelihood(k, x, z)
    }
    fn measure(
        &self,
        k: usize,
        x: &[T],
        noise: &mut kestrel::particle::philox::Normals<T>,
        z: &mut [T],
    ) {
        self.inner.measure(k, x, noise, z)
    }
    fn advance_batch(&self, at: Batch, xs: &mut [T], z: Option<(&[T], &mut [T])>) {
        self.bar
            .inc((xs.len() / ParticleModel::<T>::nx(self.inner)) as u64);
        self.inner.advance_batch(at, xs, z)
    }
    fn advance_batch_from(
        &self,
        at: Batch,
        src: &[T],
        anc: &[u32],
        xs: &mut [T],
        z: Option<(&[T], &mut [T])>,
    ) {
        self.bar.inc(anc.len() as u64);
        self.inner.advance_batch_from(at, src, anc, xs, z)
    }
}

fn run<T: Real>(
    device: Device,
    model: &PfModel,
    z: &Measurements<T>,
    opts: &PfOptions,
    bar: &Bar,
    work: u64,
) -> kestrel::Result<PfOutput<T>> {
    if device == Device::Cpu {
        model.check_cpu().map_err(|e| match e {
            Error::Unsupported(m) => {
                Error::Unsupported(format!("{m}: run it with device=\"cuda\""))
            }
            other => other,
        })?;
        if bar.on() {
            let counted = Counted { inner: model, bar };
            return kestrel::particle::particle_filter_cpu(&counted, z, opts);
        }
    }
    // The GPU filter has no hook inside a run: its bar moves once, at the end.
    let out = particle_filter_on(device, model, z, opts)?;
    bar.inc(work);
    Ok(out)
}

struct Raw<T> {
    out: PfOutput<T>,
    device: Device,
}

#[allow(clippy::too_many_arguments)]
fn filter_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    model: &PfModel,
    z: &Bound<'py, PyAny>,
    opts: PfOptions,
    device: &str,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (nx, ny) = dims(model);
    let guard: PyReadonlyArrayDyn<'py, T> = z.extract()?;
    let (shape, data) = c_slice(&guard, "z", 3)?;
    let (b, t) = (shape[0], shape[1]);
    if shape[2] != ny {
        return Err(PyValueError::new_err(format!(
            "z: measurements have {} components, the model measures {ny}",
            shape[2]
        )));
    }
    let work = (b as u64)
        .saturating_mul(t as u64)
        .saturating_mul(opts.particles as u64);
    let bar = Bar::new(progress, "particle filter", work, "particle-steps");
    let raw = run_detached(py, || {
        kestrel::data::require_data("z", b, t)?;
        // The particle filter runs on one GPU: `cuda:all` is its first.
        let device = match resolve_device(device)? {
            Device::AllCuda => Device::Cuda(0),
            d => d,
        };
        let z = Measurements::new(b, t, ny, data.to_vec())?;
        kestrel::estimate::warn_if_large_for_f32(&z);
        let out = run(device, model, &z, &opts, &bar, work)?;
        Ok(Raw { out, device })
    })?;
    bar.finish();
    drop(guard);
    let Raw { out, device } = raw;
    let (mean, cov, loglik) = out.estimates.into_parts();
    let d = PyDict::new(py);
    d.set_item("mean", owned(py, mean, &[b, t, nx])?)?;
    d.set_item("cov", owned(py, cov, &[b, t, nx, nx])?)?;
    match loglik {
        Some(l) => d.set_item("loglik", owned(py, l, &[b, t])?)?,
        None => d.set_item("loglik", py.None())?,
    }
    d.set_item("ess", owned(py, out.ess, &[b, t])?)?;
    match out.particles {
        Some((xs, ws)) => {
            let n = opts.particles;
            d.set_item("particles", owned(py, xs, &[b, n, nx])?)?;
            d.set_item("weights", owned(py, ws, &[b, n])?)?;
        }
        None => {
            d.set_item("particles", py.None())?;
            d.set_item("weights", py.None())?;
        }
    }
    d.set_item("device", device_name(device))?;
    Ok(d)
}

/// The bootstrap particle filter (`kestrel pf`) over `z` [B, T, ny] (float32 or
/// float64, C order, NaN = missing): a dict of `mean` [B, T, nx], `cov` [B, T, nx, nx],
/// `loglik` [B, T], `ess` [B, T], with `keep_particles` the last step's `particles`
/// [B, N, nx] and normalised `weights` [B, N] (else None), and the `device` it ran on.
#[pyfunction]
#[pyo3(signature = (model, z, particles, resample="systematic", ess=0.5, seed=0, device="auto", keep_particles=false, progress=false, first_track=0))]
#[allow(clippy::too_many_arguments)]
fn particle_filter<'py>(
    py: Python<'py>,
    model: &PyPfModel,
    z: &Bound<'py, PyAny>,
    particles: usize,
    resample: &str,
    ess: f64,
    seed: u64,
    device: &str,
    keep_particles: bool,
    progress: bool,
    first_track: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = options(particles, resample, ess, seed, keep_particles, first_track)?;
    match dtype_of(z, "z")? {
        Dtype::F64 => filter_typed::<f64>(py, &model.inner, z, opts, device, progress),
        Dtype::F32 => filter_typed::<f32>(py, &model.inner, z, opts, device, progress),
    }
}

/// Truth [B, T, nx] and measurements [B, T, ny] (float64; a missing step all NaN) drawn
/// from the model: `kestrel simulate --model` for the nonlinear kinds.
#[pyfunction]
#[pyo3(signature = (model, tracks, steps, seed=0, missing=0.0))]
fn pf_simulate<'py>(
    py: Python<'py>,
    model: &PyPfModel,
    tracks: usize,
    steps: usize,
    seed: u64,
    missing: f64,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let m = &model.inner;
    let (x, z) = run_detached(py, || {
        kestrel::particle::simulate(m, tracks, steps, seed, missing)
    })?;
    let (nx, ny) = dims(m);
    Ok((
        owned(py, x, &[tracks, steps, nx])?,
        owned(py, z.into_data(), &[tracks, steps, ny])?,
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPfModel>()?;
    m.add_function(wrap_pyfunction!(particle_filter, m)?)?;
    m.add_function(wrap_pyfunction!(pf_simulate, m)?)?;
    Ok(())
}
