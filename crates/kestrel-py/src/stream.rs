//! The per-step API for streaming trackers: the library's `kalman::BatchState` on the
//! CPU, `kalman::cuda::BatchTracker` on a GPU (state resident on the device), behind one
//! Python class.
//!
//! The Python layer (`python/kestrel/stream.py`) checks shapes and converts every array
//! to the state's dtype, C order, before it comes here; the library checks them again.

use crate::arrays::{c_slice, owned};
use crate::kalman::{device_name, PyModel};
use crate::run_detached;
use kestrel::kalman::cuda::{BatchTracker, CudaOptions};
use kestrel::kalman::{BatchState, Prediction};
use kestrel::linalg::{cholesky_in_place, solve_lower_in_place, LN_2PI};
use kestrel::model::{Kinematics, Model};
use kestrel::{Device, Real, Result};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Mutex;

/// What the class needs of a batch of per-step filters, on either device.
trait Stepper<T: Real>: Send {
    fn capacity(&self) -> usize;
    fn live(&self) -> Vec<bool>;
    fn updates(&self) -> usize;
    /// Adds a target: the current prior, or `x0` with the prior's covariance, or both.
    fn add(&mut self, x0: Option<&[T]>, p0: Option<&[T]>) -> Result<usize>;
    fn remove(&mut self, slot: usize) -> Result<()>;
    fn set_prior(&mut self, x0: &[T], p0: &[T]) -> Result<()>;
    fn set_state(&mut self, slot: usize, x: &[T], p: &[T]) -> Result<()>;
    fn reserve(&mut self, capacity: usize) -> Result<()>;
    fn predict(&mut self, pred: &Prediction<'_, T>) -> Result<()>;
    fn update(&mut self, z: &[T], mask: Option<&[bool]>, r: Option<&[T]>) -> Result<()>;
    /// `H x + d` `[cap][ny]` and `S` `[cap][ny][ny]` of every slot from its current
    /// state (free slots NaN).
    fn measure(&mut self, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)>;
    /// `H x + d` and `S` of the last measure or update.
    fn innovations(&mut self) -> Result<(Vec<T>, Vec<T>)>;
    /// Means `[cap][nx]`, covariances `[cap][nx][nx]`, log-likelihoods `[cap]`.
    fn state(&mut self) -> Result<(Vec<T>, Vec<T>, Vec<T>)>;
    /// Squared Mahalanobis distances and log-likelihoods of `m` candidates per slot
    /// (`z`: `[cap][m][ny]`), after a measure with `r`: `[cap][m]` each, NaN for free
    /// slots.
    fn score(&mut self, z: &[T], m: usize, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)>;
}

impl<T: Real> Stepper<T> for BatchState<T> {
    fn capacity(&self) -> usize {
        BatchState::capacity(self)
    }
    fn live(&self) -> Vec<bool> {
        (0..BatchState::capacity(self))
            .map(|s| self.is_live(s))
            .collect()
    }
    fn updates(&self) -> usize {
        BatchState::updates(self)
    }
    fn add(&mut self, x0: Option<&[T]>, p0: Option<&[T]>) -> Result<usize> {
        match (x0, p0) {
            (None, None) => BatchState::add(self),
            (Some(x), None) => self.add_with_mean(x),
            (Some(x), Some(p)) => self.add_with_prior(x, p),
            (None, Some(_)) => Err(input("a prior covariance needs a mean")),
        }
    }
    fn remove(&mut self, slot: usize) -> Result<()> {
        BatchState::remove(self, slot)
    }
    fn set_prior(&mut self, x0: &[T], p0: &[T]) -> Result<()> {
        BatchState::set_prior(self, x0, p0)
    }
    fn set_state(&mut self, slot: usize, x: &[T], p: &[T]) -> Result<()> {
        BatchState::set_state(self, slot, x, p)
    }
    fn reserve(&mut self, capacity: usize) -> Result<()> {
        BatchState::reserve(self, capacity)
    }
    fn predict(&mut self, pred: &Prediction<'_, T>) -> Result<()> {
        self.predict_with(pred)
    }
    fn update(&mut self, z: &[T], mask: Option<&[bool]>, r: Option<&[T]>) -> Result<()> {
        BatchState::update(self, z, mask, r)
    }
    fn measure(&mut self, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        BatchState::measure(self, r)?;
        self.innovations()
    }
    fn innovations(&mut self) -> Result<(Vec<T>, Vec<T>)> {
        Ok((
            self.predicted_measurements().to_vec(),
            self.innovation_covs().to_vec(),
        ))
    }
    fn state(&mut self) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        Ok((
            self.means().to_vec(),
            self.covs().to_vec(),
            self.logliks().to_vec(),
        ))
    }
    fn score(&mut self, z: &[T], m: usize, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        BatchState::measure(self, r)?;
        let (cap, ny) = (BatchState::capacity(self), self.ny());
        let mut maha = vec![T::nan(); cap * m];
        let mut ll = vec![T::nan(); cap * m];
        for s in 0..cap {
            if !self.is_live(s) {
                continue;
            }
            for j in 0..m {
                let i = s * m + j;
                let sc = BatchState::score(self, s, &z[i * ny..(i + 1) * ny])?;
                maha[i] = sc.mahalanobis2;
                ll[i] = sc.loglik;
            }
        }
        Ok((maha, ll))
    }
}

/// The GPU tracker with the prior that `add` gives new targets kept on the host (the
/// tracker's own is the model's).
struct Gpu<T: Real> {
    t: BatchTracker<T>,
    x0: Vec<T>,
    p0: Vec<T>,
}

fn unsupported_on_gpu(what: &str) -> kestrel::Error {
    kestrel::Error::Unsupported(format!(
        "{what} is not available on a GPU (the device tracker has a fixed capacity and \
         no re-initialisation); use device=\"cpu\""
    ))
}

impl<T: Real> Stepper<T> for Gpu<T> {
    fn capacity(&self) -> usize {
        self.t.capacity()
    }
    fn live(&self) -> Vec<bool> {
        (0..self.t.capacity()).map(|s| self.t.is_live(s)).collect()
    }
    fn updates(&self) -> usize {
        self.t.updates()
    }
    fn add(&mut self, x0: Option<&[T]>, p0: Option<&[T]>) -> Result<usize> {
        match (x0, p0) {
            (None, None) => {
                let (x, p) = (self.x0.clone(), self.p0.clone());
                self.t.add_with_prior(&x, &p)
            }
            (Some(x), None) => {
                let p = self.p0.clone();
                self.t.add_with_prior(x, &p)
            }
            (Some(x), Some(p)) => self.t.add_with_prior(x, p),
            (None, Some(_)) => Err(input("a prior covariance needs a mean")),
        }
    }
    fn remove(&mut self, slot: usize) -> Result<()> {
        self.t.remove(slot)
    }
    fn set_prior(&mut self, x0: &[T], p0: &[T]) -> Result<()> {
        let nx = self.t.nx();
        if x0.len() != nx || p0.len() != nx * nx {
            return Err(input(format!(
                "a prior needs {nx} mean and {} covariance values, got {} and {}",
                nx * nx,
                x0.len(),
                p0.len()
            )));
        }
        if x0.iter().chain(p0).any(|v| !v.is_finite_value()) {
            return Err(input("a prior has a value that is not finite"));
        }
        let m = kestrel::nalgebra::DMatrix::from_fn(nx, nx, |i, j| p0[i * nx + j].to_f64());
        kestrel::model::check_psd("P0", &m)?;
        self.x0 = x0.to_vec();
        self.p0 = p0.to_vec();
        Ok(())
    }
    fn set_state(&mut self, _: usize, _: &[T], _: &[T]) -> Result<()> {
        Err(unsupported_on_gpu("set_state"))
    }
    fn reserve(&mut self, capacity: usize) -> Result<()> {
        if capacity <= self.t.capacity() {
            return Ok(());
        }
        Err(unsupported_on_gpu("reserve"))
    }
    fn predict(&mut self, pred: &Prediction<'_, T>) -> Result<()> {
        self.t.predict_with(pred)
    }
    fn update(&mut self, z: &[T], mask: Option<&[bool]>, r: Option<&[T]>) -> Result<()> {
        self.t.update(z, mask, r)
    }
    fn measure(&mut self, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        self.t.measure(r)
    }
    fn innovations(&mut self) -> Result<(Vec<T>, Vec<T>)> {
        self.t.innovations()
    }
    fn state(&mut self) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        let e = self.t.state()?;
        let (mean, cov, ll) = e.into_parts();
        let cap = self.t.capacity();
        Ok((mean, cov, ll.unwrap_or_else(|| vec![T::nan(); cap])))
    }
    fn score(&mut self, z: &[T], m: usize, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        let (zhat, s) = self.t.measure(r)?;
        let (cap, ny) = (self.t.capacity(), self.t.ny());
        let live = Stepper::live(self);
        let mut maha = vec![T::nan(); cap * m];
        let mut ll = vec![T::nan(); cap * m];
        let mut l = vec![T::zero(); ny * ny];
        let mut y = vec![T::zero(); ny];
        for b in (0..cap).filter(|&b| live[b]) {
            // The arithmetic of `BatchState::score`, on the device's zhat and S.
            l.copy_from_slice(&s[b * ny * ny..(b + 1) * ny * ny]);
            if !cholesky_in_place(&mut l, ny) {
                return Err(kestrel::Error::NotPositiveDefinite {
                    track: b,
                    step: self.t.updates(),
                    what: "innovation covariance S",
                });
            }
            let mut logdet = T::zero();
            for a in 0..ny {
                logdet += l[a * ny + a].ln();
            }
            for j in 0..m {
                let i = b * m + j;
                for a in 0..ny {
                    y[a] = z[i * ny + a] - zhat[b * ny + a];
                }
                solve_lower_in_place(&l, ny, &mut y, 1);
                let mut d2 = T::zero();
                for v in &y {
                    d2 += *v * *v;
                }
                maha[i] = d2;
                ll[i] = -(T::of(ny as f64 * LN_2PI) + d2) * T::of(0.5) - logdet;
            }
        }
        Ok((maha, ll))
    }
}

enum Inner {
    F64(Box<dyn Stepper<f64>>),
    F32(Box<dyn Stepper<f32>>),
}

/// The kinematics of a model built by the constant-velocity or constant-acceleration
/// builder (any `dt`, `q`): `F` and `Q` equal to those of `Kinematics` over the `dt` read
/// from `F`, to rounding. None for any other model.
fn detect_kinematics(model: &Model) -> Option<Kinematics> {
    let (f, q) = (model.f(), model.q());
    let nx = model.nx();
    for order in [2usize, 3] {
        if !nx.is_multiple_of(order) || !(1..=3).contains(&(nx / order)) {
            continue;
        }
        let dims = nx / order;
        let dt = f[(0, 1)];
        if !(dt.is_finite() && dt > 0.0) {
            continue;
        }
        // The last derivative's own variance over dt is q dt.
        let qv = q[(order - 1, order - 1)] / dt;
        let kin = if order == 2 {
            Kinematics::constant_velocity(dims, qv)
        } else {
            Kinematics::constant_acceleration(dims, qv)
        };
        let Ok(kin) = kin else { continue };
        let Ok((kf, kq)) = kin.transition(dt) else {
            continue;
        };
        let close = |a: &kestrel::nalgebra::DMatrix<f64>, b: &kestrel::nalgebra::DMatrix<f64>| {
            let scale = b.amax().max(f64::MIN_POSITIVE);
            a.iter()
                .zip(b.iter())
                .all(|(x, y)| (x - y).abs() <= 1e-12 * scale)
        };
        if close(f, &kf) && close(q, &kq) {
            return Some(kin);
        }
    }
    None
}

/// `kinematics`: "auto" (detected), "none", or `("cv" | "ca", q)`.
fn kinematics_of(model: &Model, k: &Bound<'_, PyAny>) -> PyResult<Option<Kinematics>> {
    if let Ok(s) = k.extract::<String>() {
        return match s.as_str() {
            "auto" => Ok(detect_kinematics(model)),
            "none" => Ok(None),
            other => Err(PyValueError::new_err(format!(
                "kinematics: unknown kinematics \"{}\" (expected \"auto\", \"none\", or (\"cv\" | \"ca\", q))",
                other.escape_debug()
            ))),
        };
    }
    let (kind, q): (String, f64) = k.extract().map_err(|_| {
        PyTypeError::new_err("kinematics: expected \"auto\", None, or a pair (\"cv\" | \"ca\", q)")
    })?;
    let nx = model.nx();
    let order = match kind.as_str() {
        "cv" => 2,
        "ca" => 3,
        other => {
            return Err(PyValueError::new_err(format!(
                "kinematics: unknown kind \"{}\" (expected cv or ca)",
                other.escape_debug()
            )))
        }
    };
    if !nx.is_multiple_of(order) {
        return Err(PyValueError::new_err(format!(
            "kinematics: {kind} has {order} state components per axis, the model has {nx} in all"
        )));
    }
    let kin = if order == 2 {
        Kinematics::constant_velocity(nx / order, q)
    } else {
        Kinematics::constant_acceleration(nx / order, q)
    };
    kin.map(Some).map_err(crate::to_py)
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
            Some(k) => kinematics_of(m, k)?,
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

fn cpu<T: Real>(m: &Model, cap: usize, kin: Option<Kinematics>) -> Result<BatchState<T>> {
    let s = BatchState::<T>::new(m, cap)?;
    match kin {
        Some(k) => s.with_kinematics(k),
        None => Ok(s),
    }
}

fn gpu<T: Real>(i: usize, m: &Model, cap: usize, kin: Option<Kinematics>) -> Result<Gpu<T>> {
    let t = BatchTracker::<T>::new(i, m, cap, &CudaOptions::default())?;
    let t = match kin {
        Some(k) => t.with_kinematics(k)?,
        None => t,
    };
    let nx = m.nx();
    Ok(Gpu {
        t,
        x0: m.prior().x0.iter().map(|v| T::of(*v)).collect(),
        p0: (0..nx * nx)
            .map(|i| T::of(m.prior().p0[(i / nx, i % nx)]))
            .collect(),
    })
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

/// A bad input, with its message.
fn input(msg: impl Into<String>) -> kestrel::Error {
    kestrel::Error::Input { msg: msg.into() }
}
