//! The per-step API for streaming trackers: the library's `kalman::BatchState` on the
//! CPU, `kalman::cuda::BatchTracker` on a GPU (state resident on the device), behind one
//! Python class.
//!
//! The Python layer (`python/kestrel/stream.py`) checks shapes and converts every array
//! to the state's dtype, C order, before it comes here; the library checks them again.

mod kinematics;
mod stepper;

use crate::arrays::{c_slice, owned};
use crate::kalman::{device_name, PyModel};
use crate::run_detached;
use kestrel::kalman::Prediction;
use kestrel::model::Kinematics;
use kestrel::{Device, Result};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Mutex;
use stepper::{cpu, gpu, input, Stepper};

enum Inner {
    F64(Box<dyn Stepper<f64>>),
    F32(Box<dyn Stepper<f32>>),
}

/// A batch of targets in stable slots, filtered one call at a time (see
/// `kestrel.BatchState`, the Python class over this one).
#[pyclass(name = "BatchState", module = "kestrel._kestrel", frozen)]
pub struct PyBatchState {
    inner: Mutex<Inner>,
    nx: usize,
    ny: usize,
    device: Device,
    f64: bool,
    kin: Option<Kinematics>,
}

/// Reads the optional arrays `$names` (with their axes) as the state's dtype `$T`, runs
/// `$body` without the GIL with `$s` the stepper (locked there: a thread waiting for the
/// lock holds no GIL) and the slices bound to the same names, then `$post` with the GIL
/// and `$r` the body's result.
macro_rules! dispatch {
    ($self:ident, $py:ident, [$(($name:ident, $ndim:expr)),*], |$s:ident: $T:ident| $body:expr, |$r:ident| $post:expr) => {{
        if $self.f64 {
            dispatch!(@arm F64, f64, $self, $py, [$(($name, $ndim)),*], |$s: $T| $body, |$r| $post)
        } else {
            dispatch!(@arm F32, f32, $self, $py, [$(($name, $ndim)),*], |$s: $T| $body, |$r| $post)
        }
    }};
    (@arm $var:ident, $ty:ty, $self:ident, $py:ident, [$(($name:ident, $ndim:expr)),*], |$s:ident: $T:ident| $body:expr, |$r:ident| $post:expr) => {{
        #[allow(dead_code)]
        type $T = $ty;
        $( let $name = ro::<$ty>($name, stringify!($name))?; )*
        $( let $name = arr(&$name, stringify!($name), $ndim)?; )*
        let inner = &$self.inner;
        let $r = run_detached($py, || {
            let mut g = inner.lock().unwrap_or_else(|p| p.into_inner());
            match &mut *g {
                Inner::$var($s) => $body,
                #[allow(unreachable_patterns)]
                _ => Err(kestrel::Error::Unsupported("the state's dtype changed".into())),
            }
        })?;
        $post
    }};
}

/// A read-only C-contiguous slice of a NumPy array of the state's dtype, with `ndim`
/// axes.
fn arr<'a, 'py, T: numpy::Element>(
    a: &'a Option<PyReadonlyArrayDyn<'py, T>>,
    name: &str,
    ndim: usize,
) -> PyResult<Option<&'a [T]>> {
    match a {
        None => Ok(None),
        Some(g) => Ok(Some(c_slice(g, name, ndim)?.1)),
    }
}

fn ro<'py, T: numpy::Element>(
    a: Option<&Bound<'py, PyAny>>,
    name: &str,
) -> PyResult<Option<PyReadonlyArrayDyn<'py, T>>> {
    a.map(|a| {
        a.extract::<PyReadonlyArrayDyn<'py, T>>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{name}: expected a {} NumPy array",
                std::any::type_name::<T>()
            ))
        })
    })
    .transpose()
}

#[pymethods]
impl PyBatchState {
    /// An empty batch of `capacity` slots for `model` on `device` ("cpu", "cuda",
    /// "cuda:N") in float64 (`double=True`) or float32.
    #[new]
    #[pyo3(signature = (model, capacity, device="cpu", double=true, kinematics=None))]
    fn new(
        py: Python<'_>,
        model: &PyModel,
        capacity: usize,
        device: &str,
        double: bool,
        kinematics: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let m = &model.inner;
        let kin = match kinematics {
            None => None,
            Some(k) => kinematics::kinematics_of(m, k)?,
        };
        let device = Device::parse(device).map_err(crate::to_py)?;
        let inner = run_detached(py, || -> Result<Inner> {
            Ok(match (device, double) {
                (Device::Cpu, true) => Inner::F64(Box::new(cpu::<f64>(m, capacity, kin)?)),
                (Device::Cpu, false) => Inner::F32(Box::new(cpu::<f32>(m, capacity, kin)?)),
                (Device::Cuda(i), true) => Inner::F64(Box::new(gpu::<f64>(i, m, capacity, kin)?)),
                (Device::Cuda(i), false) => Inner::F32(Box::new(gpu::<f32>(i, m, capacity, kin)?)),
                (d, _) => {
                    return Err(kestrel::Error::Unsupported(format!(
                        "a batch state runs on the CPU or one GPU, not {}",
                        device_name(d)
                    )))
                }
            })
        })?;
        Ok(PyBatchState {
            inner: Mutex::new(inner),
            nx: m.nx(),
            ny: m.ny(),
            device,
            f64: double,
            kin,
        })
    }

    #[getter]
    fn nx(&self) -> usize {
        self.nx
    }
    #[getter]
    fn ny(&self) -> usize {
        self.ny
    }
    #[getter]
    fn device(&self) -> String {
        device_name(self.device)
    }
    #[getter]
    fn double(&self) -> bool {
        self.f64
    }
    /// The kinematics `(kind, dims, q)` that intervals use, or None.
    #[getter]
    fn kinematics(&self) -> Option<(&'static str, usize, f64)> {
        self.kin
            .map(|k| (if k.order() == 2 { "cv" } else { "ca" }, k.dims(), k.q()))
    }
    #[getter]
    fn capacity(&self, py: Python<'_>) -> PyResult<usize> {
        dispatch!(self, py, [], |s: T| Ok(s.capacity()), |r| Ok(r))
    }
    /// Updates run so far.
    #[getter]
    fn updates(&self, py: Python<'_>) -> PyResult<usize> {
        dispatch!(self, py, [], |s: T| Ok(s.updates()), |r| Ok(r))
    }
    /// Which slots hold a target, `[capacity]` booleans.
    #[getter]
    fn live<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = dispatch!(self, py, [], |s: T| Ok(s.live()), |r| r);
        let n = v.len();
        owned(py, v, &[n])
    }

    /// Adds one target; returns its slot.
    #[pyo3(signature = (x0=None, p0=None))]
    fn add(
        &self,
        py: Python<'_>,
        x0: Option<&Bound<'_, PyAny>>,
        p0: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        dispatch!(self, py, [(x0, 1), (p0, 2)], |s: T| s.add(x0, p0), |r| Ok(
            r
        ))
    }

    /// Adds `n` targets (`x0` `[n][nx]`, `p0` `[n][nx][nx]`, either absent: the prior's);
    /// returns their slots. All or none: on an error the targets added are removed.
    #[pyo3(signature = (n, x0=None, p0=None))]
    fn add_many(
        &self,
        py: Python<'_>,
        n: usize,
        x0: Option<&Bound<'_, PyAny>>,
        p0: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<usize>> {
        let (nx, n2) = (self.nx, self.nx * self.nx);
        dispatch!(
            self,
            py,
            [(x0, 2), (p0, 3)],
            |s: T| {
                if x0.is_some_and(|x| x.len() != n * nx) || p0.is_some_and(|p| p.len() != n * n2) {
                    return Err(input(format!(
                        "add: {n} priors need [{n}, {nx}] means and [{n}, {nx}, {nx}] covariances"
                    )));
                }
                let mut slots = Vec::with_capacity(n);
                for i in 0..n {
                    let x = x0.map(|x| &x[i * nx..(i + 1) * nx]);
                    let p = p0.map(|p| &p[i * n2..(i + 1) * n2]);
                    match s.add(x, p) {
                        Ok(slot) => slots.push(slot),
                        Err(e) => {
                            for &slot in slots.iter().rev() {
                                let _ = s.remove(slot);
                            }
                            return Err(e);
                        }
                    }
                }
                Ok(slots)
            },
            |r| Ok(r)
        )
    }

    /// Removes the targets in `slots` (checked first: all or none).
    fn remove(&self, py: Python<'_>, slots: Vec<usize>) -> PyResult<()> {
        dispatch!(
            self,
            py,
            [],
            |s: T| {
                let live = s.live();
                let mut seen = std::collections::HashSet::new();
                for &slot in &slots {
                    if !live.get(slot).copied().unwrap_or(false) || !seen.insert(slot) {
                        return Err(input(format!("slot {slot} holds no target")));
                    }
                }
                for &slot in &slots {
                    s.remove(slot)?;
                }
                Ok(())
            },
            |r| Ok(r)
        )
    }

    /// Sets the prior that `add` gives new targets.
    fn set_prior(
        &self,
        py: Python<'_>,
        x0: &Bound<'_, PyAny>,
        p0: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (x0, p0) = (Some(x0), Some(p0));
        dispatch!(
            self,
            py,
            [(x0, 1), (p0, 2)],
            |s: T| s.set_prior(x0.unwrap_or(&[]), p0.unwrap_or(&[])),
            |r| Ok(r)
        )
    }

    /// Replaces the state of the target in `slot`.
    fn set_state(
        &self,
        py: Python<'_>,
        slot: usize,
        x: &Bound<'_, PyAny>,
        p: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (x, p) = (Some(x), Some(p));
        dispatch!(
            self,
            py,
            [(x, 1), (p, 2)],
            |s: T| s.set_state(slot, x.unwrap_or(&[]), p.unwrap_or(&[])),
            |r| Ok(r)
        )
    }

    /// Grows the batch to `capacity` slots.
    fn reserve(&self, py: Python<'_>, capacity: usize) -> PyResult<()> {
        dispatch!(self, py, [], |s: T| s.reserve(capacity), |r| Ok(r))
    }

    /// Predicts every target: the model's step, one interval `dt`, or one per slot
    /// (`dts` `[capacity]`); `control` `[capacity][nx]` is added to `u`.
    #[pyo3(signature = (dt=None, dts=None, control=None))]
    fn predict(
        &self,
        py: Python<'_>,
        dt: Option<f64>,
        dts: Option<&Bound<'_, PyAny>>,
        control: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let dts = ro::<f64>(dts, "dt")?;
        let dts = arr(&dts, "dt", 1)?;
        dispatch!(
            self,
            py,
            [(control, 2)],
            |s: T| {
                let mut p = Prediction::<T>::new();
                if let Some(dt) = dt {
                    p = p.dt(dt);
                }
                if let Some(d) = dts {
                    p = p.per_target_dt(d);
                }
                if let Some(c) = control {
                    p = p.control(c);
                }
                s.predict(&p)
            },
            |r| Ok(r)
        )
    }

    /// Updates every target with its row of `z` `[capacity][ny]` (NaN, a false in `mask`
    /// `[capacity]` or a free slot: no update), with `r` `[capacity][ny][ny]` or the
    /// model's `R`.
    #[pyo3(signature = (z, mask=None, r=None))]
    fn update(
        &self,
        py: Python<'_>,
        z: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        r: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mask = ro::<bool>(mask, "mask")?;
        let mask = arr(&mask, "mask", 1)?;
        let z = Some(z);
        dispatch!(
            self,
            py,
            [(z, 2), (r, 3)],
            |s: T| s.update(z.unwrap_or(&[]), mask, r),
            |r| Ok(r)
        )
    }

    /// `H x + d` `[capacity][ny]` and `S = H P H^T + R` `[capacity][ny][ny]` of every
    /// target from its current state (free slots NaN).
    #[pyo3(signature = (r=None))]
    fn measure<'py>(
        &self,
        py: Python<'py>,
        r: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let ny = self.ny;
        dispatch!(self, py, [(r, 3)], |s: T| s.measure(r), |r| {
            let cap = r.0.len() / ny;
            Ok((owned(py, r.0, &[cap, ny])?, owned(py, r.1, &[cap, ny, ny])?))
        })
    }

    /// `H x + d` `[capacity][ny]` and `S` `[capacity][ny][ny]` of the last measure or
    /// update.
    fn innovations<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let ny = self.ny;
        dispatch!(self, py, [], |s: T| s.innovations(), |r| {
            let cap = r.0.len() / ny;
            Ok((owned(py, r.0, &[cap, ny])?, owned(py, r.1, &[cap, ny, ny])?))
        })
    }

    /// Squared Mahalanobis distances and log-likelihoods of `z` `[capacity][m][ny]` (m
    /// candidates per slot) against each target's predicted measurement (from its
    /// current state, with `r` or the model's `R`): `[capacity][m]` each, free slots NaN.
    #[pyo3(signature = (z, r=None))]
    fn score<'py>(
        &self,
        py: Python<'py>,
        z: &Bound<'py, PyAny>,
        r: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let m = z
            .getattr("shape")?
            .extract::<Vec<usize>>()?
            .get(1)
            .copied()
            .unwrap_or(0);
        let ny = self.ny;
        let z = Some(z);
        dispatch!(
            self,
            py,
            [(z, 3), (r, 3)],
            |s: T| {
                let z = z.unwrap_or(&[]);
                let cap = s.capacity();
                if z.len() != cap * m * ny {
                    return Err(input(format!(
                        "z: expected [{cap}, m, {ny}] candidates, got {} values",
                        z.len()
                    )));
                }
                s.score(z, m, r)
            },
            |r| {
                let cap = match r.0.len().checked_div(m) {
                    Some(c) => c,
                    None => self.capacity(py)?,
                };
                Ok((owned(py, r.0, &[cap, m])?, owned(py, r.1, &[cap, m])?))
            }
        )
    }

    /// The state of every slot: `(mean [capacity][nx], cov [capacity][nx][nx],
    /// loglik [capacity])` (the log-likelihood of each target's last update; free slots
    /// NaN).
    #[allow(clippy::type_complexity)]
    fn state<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let nx = self.nx;
        dispatch!(self, py, [], |s: T| s.state(), |r| {
            let cap = r.2.len();
            Ok((
                owned(py, r.0, &[cap, nx])?,
                owned(py, r.1, &[cap, nx, nx])?,
                owned(py, r.2, &[cap])?,
            ))
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "BatchState(nx={}, ny={}, capacity={}, device={})",
            self.nx,
            self.ny,
            self.capacity(py)?,
            device_name(self.device)
        ))
    }
}

/// The `prob` quantile of the chi-square distribution with `k` degrees of freedom (the
/// gate of a `k`-component measurement that holds the right one with probability
/// `prob`).
#[pyfunction]
fn chi2_quantile(k: usize, prob: f64) -> PyResult<f64> {
    if k == 0 || !(prob > 0.0 && prob < 1.0) {
        return Err(PyValueError::new_err(format!(
            "a gate needs k >= 1 and 0 < prob < 1, got k = {k}, prob = {prob}"
        )));
    }
    Ok(kestrel::tracking::chi2::chi2_quantile(k, prob))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBatchState>()?;
    m.add_function(wrap_pyfunction!(chi2_quantile, m)?)?;
    Ok(())
}
