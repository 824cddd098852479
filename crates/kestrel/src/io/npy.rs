//! NumPy files: measurements `[B, T, ny]` in (`.npy`, f64 or f32), arrays out (`.npy`),
//! estimates out (`.npz`: `mean [B,T,nx]`, `cov [B,T,nx,nx]`, `loglik [B,T]`).
//!
//! Input files are memory-mapped and viewed in place (the `.npy` header pads the data to
//! a 64-byte boundary), so the data is copied once, into the precision asked for. Files
//! the view cannot take (big-endian, misaligned) are read through a buffer instead.

use super::parse_error;
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::linalg::Real;
use ndarray::{ArrayD, ArrayView, ArrayViewD, IxDyn};
use ndarray_npy::{ReadNpyError, ReadNpyExt, ViewNpyError, ViewNpyExt, WriteNpyExt};
use rayon::prelude::*;
use std::path::Path;

/// Copies an array of `[B, T, ny]` into measurements of precision `T`, rejecting
/// infinities (NaN marks a missing value).
fn to_measurements<S: Real, T: Real>(path: &Path, a: ArrayViewD<'_, S>) -> Result<Measurements<T>> {
    let shape = a.shape().to_vec();
    if shape.len() != 3 {
        return Err(parse_error(
            path,
            None,
            format!("expected a 3-D array [tracks, steps, ny], found shape {shape:?}"),
        ));
    }
    let (b, t, ny) = (shape[0], shape[1], shape[2]);
    if ny == 0 {
        return Err(parse_error(
            path,
            None,
            format!("shape {shape:?} has no measurement components"),
        ));
    }
    let data: Vec<T> = match a.as_slice() {
        Some(s) => s
            .par_iter()
            .with_min_len(1 << 16)
            .map(|&v| T::of(v.to_f64()))
            .collect(),
        None => a.iter().map(|&v| T::of(v.to_f64())).collect(),
    };
    if let Some(i) = data
        .iter()
        .position(|v| !v.is_nan_value() && !v.is_finite_value())
    {
        let (tr, k, j) = (i / (t * ny), (i / ny) % t, i % ny);
        return Err(parse_error(
            path,
            None,
            format!(
                "track {tr}, step {k}, component z{j}: infinite value (a missing value is NaN)"
            ),
        ));
    }
    Measurements::new(b, t, ny, data)
}

fn view_error(path: &Path, e: impl std::fmt::Display) -> Error {
    parse_error(path, None, format!("not a valid .npy file: {e}"))
}

fn dtype_error(path: &Path, descr: impl std::fmt::Display) -> Error {
    parse_error(
        path,
        None,
        format!("unsupported dtype {descr}: measurements must be float64 or float32"),
    )
}

/// Reads measurements from a `.npy` file holding `[B, T, ny]` of f64 or f32.
pub(super) fn read_measurements<T: Real>(path: &Path) -> Result<Measurements<T>> {
    let map = super::map_file(path, "a .npy array [tracks, steps, ny]")?;
    match ArrayViewD::<f64>::view_npy(&map) {
        Ok(v) => return to_measurements(path, v),
        Err(ViewNpyError::WrongDescriptor(_)) => match ArrayViewD::<f32>::view_npy(&map) {
            Ok(v) => return to_measurements(path, v),
            Err(ViewNpyError::WrongDescriptor(d)) => return Err(dtype_error(path, d)),
            Err(ViewNpyError::NonNativeEndian | ViewNpyError::MisalignedData) => {}
            Err(e) => return Err(view_error(path, e)),
        },
        Err(ViewNpyError::NonNativeEndian | ViewNpyError::MisalignedData) => {}
        Err(e) => return Err(view_error(path, e)),
    }
    // Big-endian or misaligned data: read through a buffer, converting as it comes.
    drop(map);
    let open = || {
        std::fs::File::open(path)
            .map(std::io::BufReader::new)
            .map_err(|e| Error::io(path, e))
    };
    match ArrayD::<f64>::read_npy(open()?) {
        Ok(a) => to_measurements(path, a.view()),
        Err(ReadNpyError::WrongDescriptor(_)) => match ArrayD::<f32>::read_npy(open()?) {
            Ok(a) => to_measurements(path, a.view()),
            Err(ReadNpyError::WrongDescriptor(d)) => Err(dtype_error(path, d)),
            Err(e) => Err(view_error(path, e)),
        },
        Err(e) => Err(view_error(path, e)),
    }
}

/// Reads a `.npy` array of f64 or f32 of any shape: its shape and its values as f64
/// (row-major).
pub(super) fn read_array(path: &Path) -> Result<(Vec<usize>, Vec<f64>)> {
    let open = || {
        std::fs::File::open(path)
            .map(std::io::BufReader::new)
            .map_err(|e| Error::io(path, e))
    };
    let a = match ArrayD::<f64>::read_npy(open()?) {
        Ok(a) => a,
        Err(ReadNpyError::WrongDescriptor(_)) => match ArrayD::<f32>::read_npy(open()?) {
            Ok(a) => a.mapv(f64::from),
            Err(ReadNpyError::WrongDescriptor(d)) => {
                return Err(parse_error(
                    path,
                    None,
                    format!("unsupported dtype {d}: expected float64 or float32"),
                ))
            }
            Err(e) => return Err(view_error(path, e)),
        },
        Err(e) => return Err(view_error(path, e)),
    };
    let shape = a.shape().to_vec();
    Ok((shape, a.iter().copied().collect()))
}

/// Writes `data` as one `.npy` array of `shape`.
pub(super) fn write_array<T: Real>(path: &Path, shape: &[usize], data: &[T]) -> Result<()> {
    let a = ArrayView::from_shape(IxDyn(shape), data).map_err(|e| Error::Input {
        msg: format!("{}: array of shape {shape:?}: {e}", path.display()),
    })?;
    super::write_atomic(path, |w| a.write_npy(w).map_err(std::io::Error::other))
}

/// Writes estimates as an uncompressed `.npz`: `mean`, `cov` and (filters) `loglik`.
pub(super) fn write_estimates<T: Real>(path: &Path, est: &Estimates<T>) -> Result<()> {
    write_estimates_with_columns(path, est, &[])
}

/// [`write_estimates`] with more `[B, T]` arrays.
pub(super) fn write_estimates_with_columns<T: Real>(
    path: &Path,
    est: &Estimates<T>,
    columns: &[(&str, &[T])],
) -> Result<()> {
    let (b, t, nx) = (est.tracks, est.steps, est.nx);
    let shape_err = |e: ndarray::ShapeError| Error::Input {
        msg: format!("{}: estimates: {e}", path.display()),
    };
    let mean = ArrayView::from_shape(IxDyn(&[b, t, nx]), &est.mean).map_err(shape_err)?;
    let cov = ArrayView::from_shape(IxDyn(&[b, t, nx, nx]), &est.cov).map_err(shape_err)?;
    let loglik = match &est.loglik {
        Some(l) => Some(ArrayView::from_shape(IxDyn(&[b, t]), l).map_err(shape_err)?),
        None => None,
    };
    let extra = columns
        .iter()
        .map(|(name, v)| {
            Ok((
                *name,
                ArrayView::from_shape(IxDyn(&[b, t]), v).map_err(shape_err)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    // Arrays of 4 GiB and more need the zip64 extensions.
    let large = std::mem::size_of_val(est.cov.as_slice()) as u64 >= (1 << 32) - (1 << 20);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(large);
    super::write_atomic(path, |w| {
        // The archive is finished explicitly; after a failed write the latch swallows
        // what the zip writer's drop still writes, so the error is reported once, here.
        let mut npz =
            ndarray_npy::NpzWriter::new_with_options(super::output::Latch::new(w), options);
        let added = (|| {
            npz.add_array("mean", &mean)?;
            npz.add_array("cov", &cov)?;
            if let Some(l) = &loglik {
                npz.add_array("loglik", l)?;
            }
            for (name, a) in &extra {
                npz.add_array(*name, a)?;
            }
            Ok::<_, ndarray_npy::WriteNpzError>(())
        })();
        let finished = match added {
            Ok(()) => npz.finish(),
            Err(e) => {
                drop(npz);
                Err(e)
            }
        };
        match finished {
            Ok(mut latch) => latch.take_error().map_or(Ok(()), Err),
            Err(e) => Err(npz_io_error(e)),
        }
    })
}

/// The I/O error inside an NPZ writer's error (the disk's own message, e.g. "No space
/// left on device"), or the writer's message.
fn npz_io_error(e: ndarray_npy::WriteNpzError) -> std::io::Error {
    use ndarray_npy::{WriteNpyError, WriteNpzError};
    match e {
        WriteNpzError::Zip(zip::result::ZipError::Io(io)) => io,
        WriteNpzError::Npy(WriteNpyError::Io(io)) => io,
        other => std::io::Error::other(other.to_string()),
    }
}

/// Reads estimates written by [`write_estimates`].
pub(super) fn read_estimates<T: Real>(path: &Path) -> Result<Estimates<T>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let bad = |e: ndarray_npy::ReadNpzError| {
        parse_error(path, None, format!("not a valid estimates .npz: {e}"))
    };
    let mut npz = ndarray_npy::NpzReader::new(std::io::BufReader::new(file)).map_err(bad)?;
    let names = npz.names().map_err(bad)?;
    let mean: ArrayD<T> = npz.by_name("mean").map_err(bad)?;
    let cov: ArrayD<T> = npz.by_name("cov").map_err(bad)?;
    let loglik: Option<ArrayD<T>> = if names.iter().any(|n| n == "loglik" || n == "loglik.npy") {
        Some(npz.by_name("loglik").map_err(bad)?)
    } else {
        None
    };
    let s = mean.shape().to_vec();
    if s.len() != 3 || cov.shape() != [s[0], s[1], s[2], s[2]] {
        return Err(parse_error(
            path,
            None,
            format!(
                "inconsistent shapes: mean {:?}, cov {:?}",
                mean.shape(),
                cov.shape()
            ),
        ));
    }
    let flat = |a: ArrayD<T>| a.iter().copied().collect::<Vec<T>>();
    Ok(Estimates {
        tracks: s[0],
        steps: s[1],
        nx: s[2],
        mean: flat(mean),
        cov: flat(cov),
        loglik: loglik.map(flat),
    })
}
