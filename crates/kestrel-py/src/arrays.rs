//! NumPy arrays in and out.
//!
//! In: the Python layer hands over C-contiguous `float32` / `float64` arrays (any
//! other dtype, order, stride or DLPack object is converted there, once); this side
//! borrows them read-only. Out: the library's own buffers become NumPy arrays without a
//! copy (the array owns the `Vec`).

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The precision of a call, from its measurement array's dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F64,
}

/// The dtype of a NumPy array given to a native function (float32 or float64 only).
pub fn dtype_of(a: &Bound<'_, PyAny>, name: &str) -> PyResult<Dtype> {
    if a.extract::<PyReadonlyArrayDyn<'_, f64>>().is_ok() {
        Ok(Dtype::F64)
    } else if a.extract::<PyReadonlyArrayDyn<'_, f32>>().is_ok() {
        Ok(Dtype::F32)
    } else {
        Err(PyTypeError::new_err(format!(
            "{name}: expected a float32 or float64 NumPy array, got {}",
            a.get_type().name()?
        )))
    }
}

/// A read-only, C-contiguous view of a NumPy array of `T` with `ndim` axes: its shape and
/// its buffer (borrowed for as long as the guard lives).
pub fn c_slice<'a, 'py, T: numpy::Element>(
    guard: &'a PyReadonlyArrayDyn<'py, T>,
    name: &str,
    ndim: usize,
) -> PyResult<(Vec<usize>, &'a [T])> {
    let shape = guard.shape().to_vec();
    if shape.len() != ndim {
        return Err(PyValueError::new_err(format!(
            "{name}: expected {ndim} axes, got an array of shape {shape:?}"
        )));
    }
    let s = guard
        .as_slice()
        .map_err(|_| PyValueError::new_err(format!(
            "{name}: the array is not C-contiguous and aligned (pass it through kestrel's Python API, which converts it)"
        )))?;
    Ok((shape, s))
}

/// A NumPy array of shape `shape` owning `v` (no copy).
pub fn owned<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let a = PyArray1::from_vec(py, v);
    Ok(a.reshape(shape)?.into_any())
}

/// A row-major `f64` matrix from a nested sequence or array (2-D).
pub fn matrix(a: &Bound<'_, PyAny>, name: &str) -> PyResult<kestrel::nalgebra::DMatrix<f64>> {
    let g: PyReadonlyArrayDyn<'_, f64> = a
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{name}: expected a float64 array")))?;
    let shape = g.shape().to_vec();
    let (r, c) = match shape.as_slice() {
        [r, c] => (*r, *c),
        _ => {
            return Err(PyValueError::new_err(format!(
                "{name}: expected a matrix (2 axes), got shape {shape:?}"
            )))
        }
    };
    let v = g.as_array();
    Ok(kestrel::nalgebra::DMatrix::from_fn(r, c, |i, j| v[[i, j]]))
}

/// An `f64` vector from a 1-D array.
pub fn vector(a: &Bound<'_, PyAny>, name: &str) -> PyResult<kestrel::nalgebra::DVector<f64>> {
    let g: PyReadonlyArrayDyn<'_, f64> = a
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{name}: expected a float64 array")))?;
    let shape = g.shape().to_vec();
    if shape.len() != 1 {
        return Err(PyValueError::new_err(format!(
            "{name}: expected a vector (1 axis), got shape {shape:?}"
        )));
    }
    let v = g.as_array();
    Ok(kestrel::nalgebra::DVector::from_iterator(
        shape[0],
        v.iter().copied(),
    ))
}
