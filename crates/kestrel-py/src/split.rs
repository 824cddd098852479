//! One sequence's time steps split into blocks that run on different workers
//! (`kestrel.dask`): the three passes of `kestrel::parallel::blocks` for the parallel
//! filter (Sarkka & Garcia-Fernandez, Algorithm 5, the elements of eqs. 43-45 and the
//! operator of Lemma 3) and the parallel RTS smoother (Algorithm 6, eqs. 49-52, Lemma 4).
//!
//! Each function takes one block (`[B, n, ny]` measurements, or `[B, n, nx]` /
//! `[B, n, nx, nx]` filtered moments) with the global index of its first track and step,
//! and returns new NumPy arrays; nothing is kept between calls (a lost block is
//! recomputed with the same numbers).

use crate::arrays::{c_slice, dtype_of, owned, Dtype};
use crate::run_detached;
use crate::varying::state_space;
use kestrel::parallel::blocks::{self, BlockAt};
use kestrel::{Device, Estimates, Measurements, Real, ScanAlgorithm, StateSpace};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// `device=` of a block: `cpu`, `cuda`, `cuda:N`, `cuda:all` (its first GPU) or `auto`
/// (the GPU when one is usable, else the CPU).
fn device_of(s: &str) -> PyResult<Device> {
    Device::parse(s).map_err(crate::to_py)
}

fn scan_of(s: &str) -> PyResult<ScanAlgorithm> {
    s.parse::<ScanAlgorithm>()
        .map_err(|e| PyValueError::new_err(format!("scan: {e}")))
}

fn measurements<T: Real + numpy::Element>(z: &Bound<'_, PyAny>) -> PyResult<Measurements<T>> {
    let g: PyReadonlyArrayDyn<'_, T> = z.extract()?;
    let (shape, data) = c_slice(&g, "z", 3)?;
    Measurements::new(shape[0], shape[1], shape[2], data.to_vec()).map_err(crate::to_py)
}

/// The block's filtered moments as the library's estimates (`mean` [B, n, nx], `cov`
/// [B, n, nx, nx]).
fn filtered<T: Real + numpy::Element>(
    mean: &Bound<'_, PyAny>,
    cov: &Bound<'_, PyAny>,
) -> PyResult<Estimates<T>> {
    let gm: PyReadonlyArrayDyn<'_, T> = mean.extract()?;
    let gc: PyReadonlyArrayDyn<'_, T> = cov.extract()?;
    let (sm, m) = c_slice(&gm, "mean", 3)?;
    let (sc, c) = c_slice(&gc, "cov", 4)?;
    if sc[..3] != sm[..] || sc[3] != sm[2] {
        return Err(PyValueError::new_err(format!(
            "cov: expected shape [{}, {}, {}, {}] to match mean, got {sc:?}",
            sm[0], sm[1], sm[2], sm[2]
        )));
    }
    Estimates::new(sm[0], sm[1], sm[2], m.to_vec(), c.to_vec(), None).map_err(crate::to_py)
}

fn carry_of<T: Real + numpy::Element>(
    carry: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Vec<T>>> {
    let Some(c) = carry else { return Ok(None) };
    if c.is_none() {
        return Ok(None);
    }
    let g: PyReadonlyArrayDyn<'_, T> = c.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err("carry: expected an array of the block's dtype")
    })?;
    let (_, s) = c_slice(&g, "carry", 2)?;
    Ok(Some(s.to_vec()))
}

/// Pass 1 of the split parallel filter: every track's total of the block's filtering
/// elements `(A, b, C, eta, J)` (eqs. 43-45, combined with Lemma 3), [B, 3 nx² + 2 nx].
/// `track0`, `step0`: the global index of the block's first track and step. `device`:
/// `cpu`, `cuda:N` or `auto` (the GPU when one is usable).
#[pyfunction]
#[pyo3(signature = (model, z, track0, step0, device="cpu"))]
fn split_filter_total<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    z: &Bound<'py, PyAny>,
    track0: usize,
    step0: usize,
    device: &str,
) -> PyResult<Bound<'py, PyAny>> {
    fn typed<'py, T: Real + numpy::Element>(
        py: Python<'py>,
        model: &dyn StateSpace,
        z: &Bound<'py, PyAny>,
        at: BlockAt,
        dev: Device,
    ) -> PyResult<Bound<'py, PyAny>> {
        let zz = measurements::<T>(z)?;
        let b = zz.tracks();
        let fe = blocks::filter_elem_len(model.nx());
        let v = run_detached(py, || blocks::filter_block_total_on(dev, model, &zz, at))?;
        owned(py, v, &[b, fe])
    }
    let at = BlockAt {
        track: track0,
        step: step0,
    };
    let dev = device_of(device)?;
    let model = state_space(model)?;
    match dtype_of(z, "z")? {
        Dtype::F64 => typed::<f64>(py, model, z, at, dev),
        Dtype::F32 => typed::<f32>(py, model, z, at, dev),
    }
}

/// Pass 1 of the split parallel RTS smoother: every track's total of the block's
/// smoothing elements `(E, g, L)` (eqs. 49-50, Lemma 4) from its filtered moments,
/// [B, 2 nx² + nx]. `last`: the block ends the sequence.
#[pyfunction]
#[pyo3(signature = (model, mean, cov, track0, step0, last))]
fn split_smooth_total<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    mean: &Bound<'py, PyAny>,
    cov: &Bound<'py, PyAny>,
    track0: usize,
    step0: usize,
    last: bool,
) -> PyResult<Bound<'py, PyAny>> {
    fn typed<'py, T: Real + numpy::Element>(
        py: Python<'py>,
        model: &dyn StateSpace,
        mean: &Bound<'py, PyAny>,
        cov: &Bound<'py, PyAny>,
        at: BlockAt,
        last: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f = filtered::<T>(mean, cov)?;
        let b = f.tracks();
        let se = blocks::smooth_elem_len(model.nx());
        let v = run_detached(py, || blocks::smooth_block_total(model, &f, at, last))?;
        owned(py, v, &[b, se])
    }
    let at = BlockAt {
        track: track0,
        step: step0,
    };
    let model = state_space(model)?;
    match dtype_of(mean, "mean")? {
        Dtype::F64 => typed::<f64>(py, model, mean, cov, at, last),
        Dtype::F32 => typed::<f32>(py, model, mean, cov, at, last),
    }
}

/// Pass 2: the incoming carry of every block from the block totals in time order (a list
/// of [B, len] arrays of one dtype): for the filter (`smoother=False`) block j's is
/// `total_0 x ... x total_{j-1}` (None for block 0); for the smoother, `total_{j+1} x ...
/// x total_{last}` (None for the last block).
#[pyfunction]
#[pyo3(signature = (nx, totals, smoother=false))]
fn split_carries<'py>(
    py: Python<'py>,
    nx: usize,
    totals: Vec<Bound<'py, PyAny>>,
    smoother: bool,
) -> PyResult<Bound<'py, PyList>> {
    fn typed<'py, T: Real + numpy::Element>(
        py: Python<'py>,
        nx: usize,
        totals: &[Bound<'py, PyAny>],
        smoother: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let guards = totals
            .iter()
            .map(|t| t.extract::<PyReadonlyArrayDyn<'py, T>>())
            .collect::<PyResult<Vec<_>>>()
            .map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err("totals: expected arrays of one float dtype")
            })?;
        let mut views: Vec<&[T]> = Vec::with_capacity(guards.len());
        let mut tracks = 0;
        for g in &guards {
            let (s, v) = c_slice(g, "totals", 2)?;
            tracks = s[0];
            views.push(v);
        }
        let out = run_detached(py, || {
            if smoother {
                blocks::smooth_carries(nx, &views)
            } else {
                blocks::filter_carries(nx, &views)
            }
        })?;
        let len = if smoother {
            blocks::smooth_elem_len(nx)
        } else {
            blocks::filter_elem_len(nx)
        };
        let list = PyList::empty(py);
        for c in out {
            match c {
                Some(v) => list.append(owned(py, v, &[tracks, len])?)?,
                None => list.append(py.None())?,
            }
        }
        Ok(list)
    }
    let Some(first) = totals.first() else {
        return Ok(PyList::empty(py));
    };
    match dtype_of(first, "totals")? {
        Dtype::F64 => typed::<f64>(py, nx, &totals, smoother),
        Dtype::F32 => typed::<f32>(py, nx, &totals, smoother),
    }
}

/// Pass 3 of the split parallel filter: the block's filtered `mean` [B, n, nx], `cov`
/// [B, n, nx, nx] and per-step `loglik` [B, n] from its measurements and incoming carry
/// (None exactly for the block that starts at step 0), scanned with `scan`, on `device`
/// (`cpu`, `cuda:N`, or `auto`: the GPU when one is usable); `device` in the result names
/// where it ran.
#[pyfunction]
#[pyo3(signature = (model, z, track0, step0, carry=None, scan="fastest", device="cpu"))]
#[allow(clippy::too_many_arguments)]
fn split_filter_block<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    z: &Bound<'py, PyAny>,
    track0: usize,
    step0: usize,
    carry: Option<&Bound<'py, PyAny>>,
    scan: &str,
    device: &str,
) -> PyResult<Bound<'py, PyDict>> {
    #[allow(clippy::too_many_arguments)]
    fn typed<'py, T: Real + numpy::Element>(
        py: Python<'py>,
        model: &dyn StateSpace,
        z: &Bound<'py, PyAny>,
        at: BlockAt,
        carry: Option<&Bound<'py, PyAny>>,
        alg: ScanAlgorithm,
        dev: Device,
    ) -> PyResult<Bound<'py, PyDict>> {
        let zz = measurements::<T>(z)?;
        let c = carry_of::<T>(carry)?;
        let (b, n, nx) = (zz.tracks(), zz.steps(), model.nx());
        let est = run_detached(py, || {
            blocks::filter_block_on(dev, model, &zz, at, c.as_deref(), alg)
        })?;
        let (m, cv, ll) = est.into_parts();
        let out = PyDict::new(py);
        out.set_item("mean", owned(py, m, &[b, n, nx])?)?;
        out.set_item("cov", owned(py, cv, &[b, n, nx, nx])?)?;
        out.set_item("loglik", owned(py, ll.unwrap_or_default(), &[b, n])?)?;
        out.set_item("device", crate::kalman::device_name(dev.first()))?;
        Ok(out)
    }
    let alg = scan_of(scan)?;
    let at = BlockAt {
        track: track0,
        step: step0,
    };
    let dev = device_of(device)?;
    let model = state_space(model)?;
    match dtype_of(z, "z")? {
        Dtype::F64 => typed::<f64>(py, model, z, at, carry, alg, dev),
        Dtype::F32 => typed::<f32>(py, model, z, at, carry, alg, dev),
    }
}

/// Pass 3 of the split parallel RTS smoother: the block's smoothed `mean` [B, n, nx] and
/// `cov` [B, n, nx, nx] from its filtered moments and incoming carry (None exactly for
/// the last block), scanned in reverse with `scan`.
#[pyfunction]
#[pyo3(signature = (model, mean, cov, track0, step0, last, carry=None, scan="fastest"))]
#[allow(clippy::too_many_arguments)]
fn split_smooth_block<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    mean: &Bound<'py, PyAny>,
    cov: &Bound<'py, PyAny>,
    track0: usize,
    step0: usize,
    last: bool,
    carry: Option<&Bound<'py, PyAny>>,
    scan: &str,
) -> PyResult<Bound<'py, PyDict>> {
    #[allow(clippy::too_many_arguments)]
    fn typed<'py, T: Real + numpy::Element>(
        py: Python<'py>,
        model: &dyn StateSpace,
        mean: &Bound<'py, PyAny>,
        cov: &Bound<'py, PyAny>,
        at: BlockAt,
        last: bool,
        carry: Option<&Bound<'py, PyAny>>,
        alg: ScanAlgorithm,
    ) -> PyResult<Bound<'py, PyDict>> {
        let f = filtered::<T>(mean, cov)?;
        let c = carry_of::<T>(carry)?;
        let (b, n, nx) = (f.tracks(), f.steps(), f.nx());
        let est = run_detached(py, || {
            blocks::smooth_block(model, &f, at, last, c.as_deref(), alg)
        })?;
        let (m, cv, _) = est.into_parts();
        let out = PyDict::new(py);
        out.set_item("mean", owned(py, m, &[b, n, nx])?)?;
        out.set_item("cov", owned(py, cv, &[b, n, nx, nx])?)?;
        Ok(out)
    }
    let alg = scan_of(scan)?;
    let at = BlockAt {
        track: track0,
        step: step0,
    };
    let model = state_space(model)?;
    match dtype_of(mean, "mean")? {
        Dtype::F64 => typed::<f64>(py, model, mean, cov, at, last, carry, alg),
        Dtype::F32 => typed::<f32>(py, model, mean, cov, at, last, carry, alg),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(split_filter_total, m)?)?;
    m.add_function(wrap_pyfunction!(split_smooth_total, m)?)?;
    m.add_function(wrap_pyfunction!(split_carries, m)?)?;
    m.add_function(wrap_pyfunction!(split_filter_block, m)?)?;
    m.add_function(wrap_pyfunction!(split_smooth_block, m)?)?;
    Ok(())
}
