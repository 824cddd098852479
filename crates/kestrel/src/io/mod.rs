//! Readers and writers: CSV and NPY measurements in, CSV and NPZ estimates out, in the
//! formats of the command-line contract (`DESIGN.md`):
//!
//! - measurements: CSV long form `track,t,z0,z1,...` (one row per track and step, empty
//!   field or `NaN` = missing) or NPY `[B, T, ny]` (f64 or f32, NaN = missing);
//! - truth: the same with `x0,x1,...` (CSV) or `[B, T, nx]` (NPY);
//! - estimates: CSV `track,t,x0..,P00..,loglik` or NPZ (`mean`, `cov`, `loglik`).
//!
//! The format follows the file extension; an unknown extension is an error. Every write
//! goes through [`output`] ([`write_atomic`], [`Outputs`]): a failure never leaves a
//! partial file, a temporary file or a clobbered input.

mod csv;
mod finite;
mod npy;
pub use npy::{parse_npy_header, NpyHeader};
mod npz;
pub mod output;

pub use finite::check_estimates;
pub use npy::NpzMember;
pub use output::{check_paths, set_fsync, write_atomic, Outputs};

use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::linalg::Real;
use std::path::Path;

/// File formats of the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated text with a header line.
    Csv,
    /// A NumPy `.npy` array.
    Npy,
    /// A NumPy `.npz` archive of named arrays.
    Npz,
}

impl Format {
    /// The format named by the extension of `path`, which must be one of `allowed`.
    pub fn of(path: &Path, allowed: &[Format]) -> Result<Format> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let f = match ext.as_str() {
            "csv" => Some(Format::Csv),
            "npy" => Some(Format::Npy),
            "npz" => Some(Format::Npz),
            _ => None,
        };
        match f {
            Some(f) if allowed.contains(&f) => Ok(f),
            _ => {
                let names: Vec<String> = allowed.iter().map(|f| format!(".{}", f.ext())).collect();
                let found = if ext.is_empty() {
                    "no extension".to_string()
                } else {
                    format!("extension .{ext}")
                };
                Err(parse_error(
                    path,
                    None,
                    format!(
                        "unsupported file type ({found}; expected {})",
                        names.join(" or ")
                    ),
                ))
            }
        }
    }

    fn ext(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Npy => "npy",
            Format::Npz => "npz",
        }
    }
}

/// Formats accepted for measurements and truth.
pub const MEASUREMENT_FORMATS: &[Format] = &[Format::Csv, Format::Npy];
/// Formats accepted for estimates.
pub const ESTIMATE_FORMATS: &[Format] = &[Format::Csv, Format::Npz];

/// Characters of a field or line quoted in an error message; longer text is cut.
pub const EXCERPT_CHARS: usize = 80;

/// `bytes` as text to quote in an error message: invalid UTF-8 replaced, control
/// characters escaped (`\r`, `\n`, `\0`, `\xNN`), cut after [`EXCERPT_CHARS`]
/// characters with the length of the rest said, so that an error stays one short line
/// whatever the file holds.
pub fn excerpt(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(4 * EXCERPT_CHARS)];
    let text = String::from_utf8_lossy(head);
    let mut chars = text.chars();
    let mut out = String::new();
    for c in chars.by_ref().take(EXCERPT_CHARS) {
        match c {
            '\n' => out += "\\n",
            '\r' => out += "\\r",
            '\t' => out += "\\t",
            '\0' => out += "\\0",
            c if c.is_control() => out += &format!("\\x{:02x}", c as u32),
            c => out.push(c),
        }
    }
    if chars.next().is_some() || bytes.len() > head.len() {
        out += &format!("... ({} bytes in all)", bytes.len());
    }
    out
}

pub(crate) fn parse_error(path: &Path, line: Option<usize>, msg: impl Into<String>) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line,
        msg: msg.into(),
    }
}

/// Opens `path` and maps it into memory for reading. A directory or an empty file is a
/// parse error; `expected` says what the file should hold.
pub(crate) fn map_file(path: &Path, expected: &str) -> Result<memmap2::Mmap> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(parse_error(
            path,
            None,
            format!("is a directory, not a file ({expected})"),
        ));
    }
    if meta.len() == 0 {
        return Err(parse_error(
            path,
            None,
            format!("empty file (expected {expected})"),
        ));
    }
    // SAFETY: the map is read-only and lives only while a reader parses it. Another
    // process truncating the file meanwhile is outside what any reader can defend
    // against (as with every memory-mapped reader).
    // Populating the map up front costs one pass instead of a page fault per page.
    unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map_err(|e| Error::io(path, e))
}

/// Reads measurements from a `.csv` or `.npy` file into precision `T`.
pub fn read_measurements<T: Real>(path: impl AsRef<Path>) -> Result<Measurements<T>> {
    let path = path.as_ref();
    match Format::of(path, MEASUREMENT_FORMATS)? {
        Format::Csv => csv::read_measurements(path),
        _ => npy::read_measurements(path),
    }
}

/// The number of measurement rows (tracks x steps) in `path`, without reading it: exact
/// from an `.npy` header, estimated from the file size and the first rows' length for
/// a `.csv`. For choosing a device before the work; `None` when it cannot be told.
pub fn peek_rows(path: impl AsRef<Path>) -> Option<u64> {
    let path = path.as_ref();
    match Format::of(path, MEASUREMENT_FORMATS).ok()? {
        Format::Csv => {
            use std::io::Read;
            let len = std::fs::metadata(path).ok()?.len();
            let mut head = vec![0u8; 1 << 16];
            let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
            let lines = head[..n].iter().filter(|&&b| b == b'\n').count() as u64;
            (lines > 1).then(|| len * lines.saturating_sub(1) / n as u64)
        }
        _ => {
            let s = npy::peek_shape(path)?;
            (s.len() == 3).then(|| (s[0] as u64).saturating_mul(s[1] as u64))
        }
    }
}

/// Checks that measurements read from `path` have the `ny` components the model
/// measures, naming the file when they do not.
pub fn check_measurement_dim<T>(
    path: impl AsRef<Path>,
    z: &Measurements<T>,
    ny: usize,
) -> Result<()> {
    let path = path.as_ref();
    if z.ny != ny {
        return Err(parse_error(
            path,
            None,
            format!(
                "measurements have {} components (z0..z{}), the model measures {ny}",
                z.ny,
                z.ny.saturating_sub(1)
            ),
        ));
    }
    Ok(())
}

/// Writes measurements as `.csv` (`track,t,z0,..`) or `.npy` (`[B, T, ny]`).
pub fn write_measurements<T: Real>(path: impl AsRef<Path>, z: &Measurements<T>) -> Result<()> {
    let path = path.as_ref();
    write_series(path, z.tracks, z.steps, z.ny, &z.data, 'z')
}

/// Writes simulated truth `[tracks][steps][nx]` as `.csv` (`track,t,x0,..`) or `.npy`.
pub fn write_truth<T: Real>(
    path: impl AsRef<Path>,
    tracks: usize,
    steps: usize,
    nx: usize,
    truth: &[T],
) -> Result<()> {
    let path = path.as_ref();
    if truth.len() != tracks * steps * nx {
        return Err(Error::Input {
            msg: format!(
                "truth has {} values, expected {tracks} x {steps} x {nx}",
                truth.len()
            ),
        });
    }
    write_series(path, tracks, steps, nx, truth, 'x')
}

fn write_series<T: Real>(
    path: &Path,
    tracks: usize,
    steps: usize,
    n: usize,
    data: &[T],
    prefix: char,
) -> Result<()> {
    match Format::of(path, MEASUREMENT_FORMATS)? {
        Format::Csv => csv::write_series(path, tracks, steps, n, data, prefix),
        _ => npy::write_array(path, &[tracks, steps, n], data),
    }
}

/// Formats accepted for per-step values (`[B, T]`, such as log-likelihoods).
pub const PER_STEP_FORMATS: &[Format] = &[Format::Csv, Format::Npy];

/// Writes one value per track and step, `[tracks][steps]`, as `.npy` (`[B, T]`) or `.csv`
/// (`track,t,{column}`); a value that is not finite is an error naming its track and step.
pub fn write_per_step<T: Real>(
    path: &Path,
    tracks: usize,
    steps: usize,
    data: &[T],
    column: &str,
) -> Result<()> {
    if data.len() != tracks * steps {
        return Err(Error::Input {
            msg: format!(
                "{} values, expected {tracks} tracks x {steps} steps",
                data.len()
            ),
        });
    }
    let format = Format::of(path, PER_STEP_FORMATS)?;
    finite::check_per_step(path, steps, data, column)?;
    match format {
        Format::Csv => csv::write_per_step(path, tracks, steps, data, column),
        _ => npy::write_array(path, &[tracks, steps], data),
    }
}

/// Reads a `.npy` array (f64 or f32, any shape) as its shape and row-major f64 values.
pub fn read_npy_array(path: impl AsRef<Path>) -> Result<(Vec<usize>, Vec<f64>)> {
    let path = path.as_ref();
    npy::read_array(path)
}

/// Reads a `.npy` array of any float or integer dtype: its shape and row-major f64 values.
pub fn read_npy_any(path: impl AsRef<Path>) -> Result<(Vec<usize>, Vec<f64>)> {
    npy::read_array_any(path.as_ref())
}

/// Writes named arrays as one uncompressed `.npz` archive (atomically).
pub fn write_npz(path: impl AsRef<Path>, arrays: &[NpzMember<'_>]) -> Result<()> {
    npy::write_npz(path.as_ref(), arrays)
}

/// The bytes of reals as `.npy` data holds them (little-endian), and their `descr`.
pub fn real_bytes<T: Real>(v: &[T]) -> (&[u8], &'static str) {
    const _: () = assert!(cfg!(target_endian = "little"), "NPY data are little-endian");
    // SAFETY: f32/f64 have no padding; any value is a valid sequence of bytes.
    let b =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    (b, if T::NAME == "f64" { "<f8" } else { "<f4" })
}

/// The bytes of 64-bit integers as `.npy` data holds them (`<i8`).
pub fn i64_bytes(v: &[i64]) -> &[u8] {
    // SAFETY: i64 has no padding; any value is a valid sequence of bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// Writes `data` as one `.npy` array of `shape` (atomically).
pub fn write_npy_array<T: Real>(path: impl AsRef<Path>, shape: &[usize], data: &[T]) -> Result<()> {
    let path = path.as_ref();
    npy::write_array(path, shape, data)
}

/// Writes estimates as `.csv` or `.npz` (see the module documentation). The
/// log-likelihood column / array is written when the estimates carry one.
pub fn write_estimates<T: Real>(path: impl AsRef<Path>, est: &Estimates<T>) -> Result<()> {
    let path = path.as_ref();
    write_estimates_with_progress(path, est, &|_| {})
}

/// Like [`write_estimates`]; `tick(n)` is called each time `n` more tracks are written
/// (CSV only: an `.npz` is written in one go).
pub fn write_estimates_with_progress<T: Real>(
    path: impl AsRef<Path>,
    est: &Estimates<T>,
    tick: &(dyn Fn(usize) + Sync),
) -> Result<()> {
    let path = path.as_ref();
    let format = Format::of(path, ESTIMATE_FORMATS)?;
    check_estimates(path, est)?;
    match format {
        Format::Csv => csv::write_estimates(path, est, tick),
        _ => npy::write_estimates(path, est),
    }
}

/// Like [`write_estimates`], with more per-step values `[tracks][steps]` after the
/// log-likelihood: named CSV columns, or `.npz` arrays of shape `[B, T]` (the particle
/// filter's `ess`).
pub fn write_estimates_with_columns<T: Real>(
    path: &Path,
    est: &Estimates<T>,
    columns: &[(&str, &[T])],
) -> Result<()> {
    for (name, v) in columns {
        if v.len() != est.tracks * est.steps {
            return Err(Error::Input {
                msg: format!(
                    "{}: column {name} has {} values, expected {} x {}",
                    path.display(),
                    v.len(),
                    est.tracks,
                    est.steps
                ),
            });
        }
    }
    let format = Format::of(path, ESTIMATE_FORMATS)?;
    finite::check_estimates_with_columns(path, est, columns)?;
    match format {
        Format::Csv => csv::write_estimates_with_columns(path, est, columns, &|_| {}),
        _ => npy::write_estimates_with_columns(path, est, columns),
    }
}

/// Writes estimates with an IMM's mode probabilities `probs` (`[B][T][r]`, r modes): in
/// a CSV file as the columns `p0 .. p{r-1}`, in an NPZ archive as the array
/// `mode_probs` of shape `[B, T, r]` beside the estimates'.
pub fn write_estimates_with_modes<T: Real>(
    path: &Path,
    est: &Estimates<T>,
    probs: &[T],
    r: usize,
) -> Result<()> {
    let n = est.tracks * est.steps;
    if probs.len() != n * r {
        return Err(Error::Input {
            msg: format!(
                "{}: mode probabilities hold {} values, expected {} x {} x {r}",
                path.display(),
                probs.len(),
                est.tracks,
                est.steps
            ),
        });
    }
    let cols: Vec<Vec<T>> = (0..r)
        .map(|j| (0..n).map(|i| probs[i * r + j]).collect())
        .collect();
    let names: Vec<String> = (0..r).map(|j| format!("p{j}")).collect();
    let columns: Vec<(&str, &[T])> = names
        .iter()
        .zip(&cols)
        .map(|(n, c)| (n.as_str(), c.as_slice()))
        .collect();
    let format = Format::of(path, ESTIMATE_FORMATS)?;
    finite::check_estimates_with_columns(path, est, &columns)?;
    match format {
        Format::Csv => csv::write_estimates_with_columns(path, est, &columns, &|_| {}),
        _ => npy::write_estimates_with_arrays(path, est, &[("mode_probs", r, probs)]),
    }
}

/// Writes f64 arrays `(name, shape, values)` as one `.npz` file (temporary file, then
/// rename).
pub fn write_npz_arrays(path: &Path, arrays: &[(&str, &[usize], &[f64])]) -> Result<()> {
    npy::write_npz_arrays(path, arrays)
}

/// An array of an `.npz` file in its own precision: shape and row-major values.
#[derive(Clone, Debug, PartialEq)]
pub enum NpzArray {
    /// A float64 array.
    F64(Vec<usize>, Vec<f64>),
    /// A float32 array.
    F32(Vec<usize>, Vec<f32>),
}

impl NpzArray {
    /// The array's shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            NpzArray::F64(s, _) | NpzArray::F32(s, _) => s,
        }
    }

    /// `"f64"` or `"f32"`.
    pub fn dtype(&self) -> &'static str {
        match self {
            NpzArray::F64(..) => "f64",
            NpzArray::F32(..) => "f32",
        }
    }
}

/// The array `name` of an `.npz` file (f64 or f32, kept in its precision), or `None` when
/// the archive has no such member.
pub fn read_npz_array_any(path: &Path, name: &str) -> Result<Option<NpzArray>> {
    npy::read_npz_array_any(path, name)
}

/// An array of an `.npz` file: its name, shape and row-major values.
pub type NamedArray = (String, Vec<usize>, Vec<f64>);

/// Every array of an `.npz` file (f64 or f32) by name, with its shape and its values as
/// f64 (row-major), in the archive's order.
pub fn read_npz_arrays_f64(path: &Path) -> Result<Vec<NamedArray>> {
    npy::read_npz_arrays_f64(path)
}

/// Reads estimates back from a `.npz` file written by [`write_estimates`] (for checks
/// and tests; the precision of the file must be `T`).
pub fn read_estimates_npz<T: Real>(path: impl AsRef<Path>) -> Result<Estimates<T>> {
    let path = path.as_ref();
    npy::read_estimates(path)
}

/// The array `name` of an `.npz` file (its shape and values), or `None` when there is no
/// such member; the file's values must be of type `T` (f32, f64, i64, ...).
pub fn read_npz_array<T: crate::linalg::NpyElement + Copy>(
    path: &Path,
    name: &str,
) -> Result<Option<(Vec<usize>, Vec<T>)>> {
    npy::read_npz_array(path, name)
}

#[cfg(test)]
mod tests;
