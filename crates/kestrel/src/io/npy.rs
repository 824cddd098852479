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
        let source = match a.as_slice() {
            Some(s) => s[i].to_f64(),
            None => a.iter().nth(i).map_or(f64::INFINITY, |v| v.to_f64()),
        };
        let what = if source.is_finite() {
            format!(
                "value {source:e} does not fit in {} (largest magnitude {:e})",
                T::NAME,
                if T::NAME == "f32" {
                    f32::MAX as f64
                } else {
                    f64::MAX
                }
            )
        } else {
            "infinite value (a missing value is NaN)".to_string()
        };
        return Err(parse_error(
            path,
            None,
            format!("track {tr}, step {k}, component z{j}: {what}"),
        ));
    }
    Measurements::new(b, t, ny, data)
}

/// The header of a `.npy` file, read as numpy reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// The dtype's descriptor string (`<f4`, `|u1`, ...).
    pub descr: String,
    /// Column-major data.
    pub fortran_order: bool,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Where the data starts, in bytes.
    pub data_offset: usize,
}

/// The one strict reader of `.npy` headers (frames, and the check of every other
/// `.npy` input), as numpy's `read_array_header` is: the magic string, version 1.0, 2.0
/// or 3.0, the header length, a header ending in a newline, ASCII (latin-1 text in
/// versions 1 and 2), a Python dict literal with exactly the keys `descr`,
/// `fortran_order` and `shape` (a duplicated key is refused, where a scan for the
/// first occurrence would take one and numpy the other), `descr` a string,
/// `fortran_order` a bool, `shape` a tuple of non-negative integers.
pub fn parse_npy_header(path: &Path, b: &[u8]) -> Result<NpyHeader> {
    let bad = |msg: String| parse_error(path, None, format!("not a valid .npy file: {msg}"));
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(parse_error(
            path,
            None,
            "not a valid .npy file: no NumPy magic string (not a .npy file)",
        ));
    }
    let (len, start): (usize, usize) = match (b[6], b[7]) {
        (1, 0) => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        (2, 0) | (3, 0) if b.len() >= 12 => {
            (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
        }
        (major, minor) => return Err(bad(format!("unsupported format version {major}.{minor}"))),
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= b.len())
        .ok_or_else(|| bad("truncated header".into()))?;
    let raw = &b[start..end];
    let Some((b'\n', body)) = raw.split_last() else {
        return Err(bad("the header does not end in a newline".into()));
    };
    let text = if b[6] == 3 {
        std::str::from_utf8(body).map_err(|_| bad("the header is not UTF-8".into()))?
    } else {
        if !body.is_ascii() {
            return Err(bad("the header is not ASCII".into()));
        }
        std::str::from_utf8(body).map_err(|_| bad("the header is not text".into()))?
    };
    let value: py_literal::Value = text
        .parse()
        .map_err(|_| bad("the header is not a Python literal".into()))?;
    let py_literal::Value::Dict(items) = value else {
        return Err(bad("the header is not a dict".into()));
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in items {
        let key = match k {
            py_literal::Value::String(k) => k,
            _ => return Err(bad("a header key is not a string".into())),
        };
        let slot_taken = match key.as_str() {
            "descr" => descr.is_some(),
            "fortran_order" => fortran.is_some(),
            "shape" => shape.is_some(),
            other => {
                return Err(bad(format!(
                    "unexpected header key '{}'",
                    super::excerpt(other.as_bytes())
                )))
            }
        };
        if slot_taken {
            return Err(bad(format!("the header names '{key}' twice")));
        }
        match key.as_str() {
            "descr" => match v {
                py_literal::Value::String(d) => descr = Some(d),
                _ => {
                    return Err(bad(
                        "'descr' is not a string (structured dtypes are not supported)".into(),
                    ))
                }
            },
            "fortran_order" => match v {
                py_literal::Value::Boolean(f) => fortran = Some(f),
                _ => return Err(bad("'fortran_order' is not True or False".into())),
            },
            _ => {
                let dims = match &v {
                    py_literal::Value::Tuple(d) => d,
                    _ => return Err(bad("'shape' is not a tuple".into())),
                };
                let mut s = Vec::with_capacity(dims.len());
                for d in dims {
                    let n = match d {
                        py_literal::Value::Integer(i) => i.to_string().parse::<usize>().ok(),
                        _ => None,
                    };
                    s.push(n.ok_or_else(|| {
                        bad("'shape' holds something other than a non-negative integer".into())
                    })?);
                }
                shape = Some(s);
            }
        }
    }
    match (descr, fortran, shape) {
        (Some(descr), Some(fortran_order), Some(shape)) => Ok(NpyHeader {
            descr,
            fortran_order,
            shape,
            data_offset: end,
        }),
        (None, _, _) => Err(bad("the header has no 'descr'".into())),
        (_, None, _) => Err(bad("the header has no 'fortran_order'".into())),
        _ => Err(bad("the header has no 'shape'".into())),
    }
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
    parse_npy_header(path, &map)?;
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

/// The shape of the `.npy` array in `path` (read from its header through a memory map),
/// or `None` when it cannot be viewed in place.
pub(super) fn peek_shape(path: &Path) -> Option<Vec<usize>> {
    let map = super::map_file(path, "a .npy array").ok()?;
    if let Ok(v) = ArrayViewD::<f64>::view_npy(&map) {
        return Some(v.shape().to_vec());
    }
    ArrayViewD::<f32>::view_npy(&map)
        .ok()
        .map(|v| v.shape().to_vec())
}

/// Writes `data` as one `.npy` array of `shape`.
pub(super) fn write_array<T: Real>(path: &Path, shape: &[usize], data: &[T]) -> Result<()> {
    let a = ArrayView::from_shape(IxDyn(shape), data).map_err(|e| Error::Input {
        msg: format!("{}: array of shape {shape:?}: {e}", path.display()),
    })?;
    super::write_atomic(path, |w| a.write_npy(w).map_err(std::io::Error::other))
}

/// Writes estimates as an uncompressed `.npz`: `mean`, `cov` and (filters) `loglik`,
/// each when the estimates hold it ([`crate::data::Outputs`]), by the parallel archive
/// writer ([`super::npz`]).
pub(super) fn write_estimates<T: Real>(path: &Path, est: &Estimates<T>) -> Result<()> {
    write_estimates_with_columns(path, est, &[])
}

/// [`write_estimates`] with more `[B, T]` arrays.
pub(super) fn write_estimates_with_columns<T: Real>(
    path: &Path,
    est: &Estimates<T>,
    columns: &[(&str, &[T])],
) -> Result<()> {
    let extra: Vec<(&str, usize, &[T])> = columns.iter().map(|&(n, v)| (n, 1, v)).collect();
    write_estimates_with_arrays(path, est, &extra)
}

/// [`write_estimates`] with more arrays `(name, k, values)` of shape `[B, T, k]`
/// (`[B, T]` where k = 1).
pub(super) fn write_estimates_with_arrays<T: Real>(
    path: &Path,
    est: &Estimates<T>,
    extra: &[(&str, usize, &[T])],
) -> Result<()> {
    let (b, t, nx) = (est.tracks, est.steps, est.nx);
    let descr = if T::NAME == "f64" { "<f8" } else { "<f4" };
    let mut arrays: Vec<(&str, Vec<usize>, &[T])> = Vec::new();
    if !est.mean.is_empty() {
        arrays.push(("mean", vec![b, t, nx], &est.mean));
    }
    match est.cov_output() {
        crate::data::CovOutput::Full => arrays.push(("cov", vec![b, t, nx, nx], &est.cov)),
        crate::data::CovOutput::Diag => arrays.push(("cov", vec![b, t, nx], &est.cov)),
        crate::data::CovOutput::None => {}
    }
    if let Some(l) = &est.loglik {
        arrays.push(("loglik", vec![b, t], l));
    }
    for &(name, k, v) in extra {
        arrays.push((name, if k == 1 { vec![b, t] } else { vec![b, t, k] }, v));
    }
    let mut members = Vec::with_capacity(arrays.len());
    for (name, shape, data) in arrays {
        if shape.iter().product::<usize>() != data.len() {
            return Err(Error::Input {
                msg: format!(
                    "{}: estimates: {name} holds {} values, not {shape:?}",
                    path.display(),
                    data.len()
                ),
            });
        }
        members.push(super::npz::Member {
            name,
            descr,
            shape,
            data: as_le_bytes(data),
        });
    }
    // Positioned writes on the temporary file itself (the buffered writer stays empty).
    super::write_atomic(path, |w| super::npz::write(w.get_ref(), &members))
}

/// The bytes of a slice of scalars, which the NPY files hold little-endian.
fn as_le_bytes<T: Real>(v: &[T]) -> &[u8] {
    const _: () = assert!(
        cfg!(target_endian = "little"),
        "NPY data are written little-endian"
    );
    // SAFETY: f32/f64 have no padding; any value is a valid sequence of bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// The array `name` of an `.npz` file with its shape, or `None` when the archive has no
/// such member; the file's values must be of type `T`.
pub(super) fn read_npz_array<T: crate::linalg::NpyElement + Copy>(
    path: &Path,
    name: &str,
) -> Result<Option<(Vec<usize>, Vec<T>)>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let bad = |e: ndarray_npy::ReadNpzError| {
        parse_error(path, None, format!("not a valid .npz (array {name}): {e}"))
    };
    let mut npz = ndarray_npy::NpzReader::new(std::io::BufReader::new(file)).map_err(bad)?;
    let names = npz.names().map_err(bad)?;
    if !names
        .iter()
        .any(|n| n == name || *n == format!("{name}.npy"))
    {
        return Ok(None);
    }
    let a: ArrayD<T> = npz.by_name(name).map_err(bad)?;
    let shape = a.shape().to_vec();
    Ok(Some((shape, a.iter().copied().collect())))
}

/// The array `name` of an `.npz` archive in its own precision, or `None` when there is no
/// such member.
pub(super) fn read_npz_array_any(path: &Path, name: &str) -> Result<Option<super::NpzArray>> {
    use super::NpzArray;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let bad = |e: ndarray_npy::ReadNpzError| {
        parse_error(path, None, format!("not a valid .npz (array {name}): {e}"))
    };
    let mut npz = ndarray_npy::NpzReader::new(std::io::BufReader::new(file)).map_err(bad)?;
    let names = npz.names().map_err(bad)?;
    let Some(member) = names
        .iter()
        .find(|n| *n == name || **n == format!("{name}.npy"))
        .cloned()
    else {
        return Ok(None);
    };
    match npz.by_name::<ndarray::OwnedRepr<f64>, IxDyn>(&member) {
        Ok(a) => Ok(Some(NpzArray::F64(
            a.shape().to_vec(),
            a.iter().copied().collect(),
        ))),
        Err(ndarray_npy::ReadNpzError::Npy(ReadNpyError::WrongDescriptor(_))) => {
            match npz.by_name::<ndarray::OwnedRepr<f32>, IxDyn>(&member) {
                Ok(a) => Ok(Some(NpzArray::F32(
                    a.shape().to_vec(),
                    a.iter().copied().collect(),
                ))),
                Err(ndarray_npy::ReadNpzError::Npy(ReadNpyError::WrongDescriptor(d))) => {
                    Err(parse_error(
                        path,
                        None,
                        format!("array {name}: unsupported dtype {d}: expected float64 or float32"),
                    ))
                }
                Err(e) => Err(bad(e)),
            }
        }
        Err(e) => Err(bad(e)),
    }
}

/// Writes f64 arrays `(name, shape, values)` as one `.npz` archive (atomically).
pub(super) fn write_npz_arrays(path: &Path, arrays: &[(&str, &[usize], &[f64])]) -> Result<()> {
    let mut members = Vec::with_capacity(arrays.len());
    for (name, shape, data) in arrays {
        if shape.iter().product::<usize>() != data.len() {
            return Err(Error::Input {
                msg: format!(
                    "{}: array {name} holds {} values, not {shape:?}",
                    path.display(),
                    data.len()
                ),
            });
        }
        members.push(super::npz::Member {
            name,
            descr: "<f8",
            shape: shape.to_vec(),
            data: as_le_bytes(data),
        });
    }
    super::write_atomic(path, |w| super::npz::write(w.get_ref(), &members))
}

/// Every array of an `.npz` archive as f64 (f32 members widened), with its name (without
/// `.npy`) and shape.
pub(super) fn read_npz_arrays_f64(path: &Path) -> Result<Vec<super::NamedArray>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let bad = |name: &str, e: ndarray_npy::ReadNpzError| {
        let what = if name.is_empty() {
            String::new()
        } else {
            format!(" (array {name})")
        };
        parse_error(path, None, format!("not a valid .npz{what}: {e}"))
    };
    let mut npz =
        ndarray_npy::NpzReader::new(std::io::BufReader::new(file)).map_err(|e| bad("", e))?;
    let names = npz.names().map_err(|e| bad("", e))?;
    let mut out = Vec::with_capacity(names.len());
    for member in names {
        let name = member.strip_suffix(".npy").unwrap_or(&member).to_string();
        let a: ArrayD<f64> = match npz.by_name::<ndarray::OwnedRepr<f64>, ndarray::IxDyn>(&member) {
            Ok(a) => a,
            Err(ndarray_npy::ReadNpzError::Npy(ReadNpyError::WrongDescriptor(_))) => {
                match npz.by_name::<ndarray::OwnedRepr<f32>, ndarray::IxDyn>(&member) {
                    Ok(a) => a.mapv(f64::from),
                    Err(ndarray_npy::ReadNpzError::Npy(ReadNpyError::WrongDescriptor(d))) => {
                        return Err(parse_error(
                            path,
                            None,
                            format!(
                                "array {name}: unsupported dtype {d}: expected float64 or float32"
                            ),
                        ))
                    }
                    Err(e) => return Err(bad(&name, e)),
                }
            }
            Err(e) => return Err(bad(&name, e)),
        };
        out.push((name, a.shape().to_vec(), a.iter().copied().collect()));
    }
    Ok(out)
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

/// Reads a `.npy` array of any float or integer dtype as its shape and f64 values (the
/// observation codes of a hidden Markov model may be stored as integers).
pub(super) fn read_array_any(path: &Path) -> Result<(Vec<usize>, Vec<f64>)> {
    let open = || {
        std::fs::File::open(path)
            .map(std::io::BufReader::new)
            .map_err(|e| Error::io(path, e))
    };
    macro_rules! try_int {
        ($($t:ty),*) => {$(
            match ArrayD::<$t>::read_npy(open()?) {
                Ok(a) => return Ok((a.shape().to_vec(), a.iter().map(|&v| v as f64).collect())),
                Err(ReadNpyError::WrongDescriptor(_)) => {}
                Err(e) => return Err(view_error(path, e)),
            }
        )*};
    }
    match read_array(path) {
        Err(Error::Parse { msg, .. }) if msg.starts_with("unsupported dtype") => {}
        other => return other,
    }
    try_int!(i64, i32, i16, i8, u8, u16, u32, u64);
    Err(parse_error(
        path,
        None,
        "unsupported dtype: expected float64, float32 or an integer type",
    ))
}

/// One array of an `.npz` archive to write: its name, NumPy `descr` and shape, and its
/// values as little-endian bytes.
pub struct NpzMember<'a> {
    /// The member's name (without `.npy`).
    pub name: &'a str,
    /// `<f8`, `<f4`, `<i8`, ...
    pub descr: &'static str,
    /// The shape.
    pub shape: Vec<usize>,
    /// The values, little-endian.
    pub data: &'a [u8],
}

/// Writes `arrays` as an uncompressed `.npz` (atomically).
pub(super) fn write_npz(path: &Path, arrays: &[NpzMember<'_>]) -> Result<()> {
    let members: Vec<super::npz::Member> = arrays
        .iter()
        .map(|a| super::npz::Member {
            name: a.name,
            descr: a.descr,
            shape: a.shape.clone(),
            data: a.data,
        })
        .collect();
    super::write_atomic(path, |w| super::npz::write(w.get_ref(), &members))
}
