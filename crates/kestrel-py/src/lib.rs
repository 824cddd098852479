//! The native module of the kestrel Python package (`kestrel._kestrel`).
//!
//! Thin: every function converts its arguments, releases the GIL, calls the library and
//! converts the result. The Python layer (`python/kestrel/`) turns any array-like or
//! DLPack object into the C-contiguous NumPy arrays taken here, so the Rust side reads
//! the caller's buffer in place and never writes to it.
//!
//! Errors: [`kestrel::Error`] becomes `kestrel.ModelError` (a `ValueError`) for models
//! and model files, `ValueError` for bad inputs and options, `OSError` for files,
//! `MemoryError` for jobs too large, `RuntimeError` for device failures; a panic inside
//! the library is caught and becomes a `RuntimeError` naming it (never a crash).

use pyo3::create_exception;
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyMemoryError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;

mod arrays;
mod hmm;
mod interrupt;
mod kalman;
mod likelihood;
mod nonlinear;
mod particle;
mod progress;
mod sim;
mod split;
mod stream;
mod tbd;
mod tracking;
mod varying;

create_exception!(
    _kestrel,
    ModelError,
    PyValueError,
    "A model or model file that kestrel cannot use (its message names the file and field)."
);

/// The Python exception for a library error, with the CLI's message.
pub(crate) fn to_py(e: kestrel::Error) -> PyErr {
    use kestrel::Error as E;
    let msg = e.to_string();
    match e {
        E::Model { .. } | E::ModelFile { .. } => ModelError::new_err(msg),
        E::Io { .. } | E::Write { .. } => PyOSError::new_err(msg),
        E::TooLarge { .. } => PyMemoryError::new_err(msg),
        E::Cuda(_) | E::DeviceUnavailable(_) => PyRuntimeError::new_err(msg),
        E::Cancelled => PyKeyboardInterrupt::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

/// Runs `f` without the GIL, catching any panic: the interpreter never sees one.
/// Ctrl-C stops it within a fraction of a second ([`interrupt`]: the library's loops
/// poll `kestrel::cancel`) and raises `KeyboardInterrupt` (Python's own handler).
pub(crate) fn run_detached<R: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> kestrel::Result<R> + Send,
) -> PyResult<R> {
    let watch = interrupt::arm();
    let out = py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    if watch.finish() {
        // Python's handler for the Ctrl-C that arrived: KeyboardInterrupt by default.
        py.check_signals()?;
        if matches!(out, Ok(Err(kestrel::Error::Cancelled))) {
            return Err(PyKeyboardInterrupt::new_err("interrupted"));
        }
    }
    match out {
        Ok(r) => r.map_err(to_py),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".into());
            Err(PyRuntimeError::new_err(format!(
                "internal error in kestrel (please report it): {what}"
            )))
        }
    }
}

/// The library's warnings since the last call (printed by the Python layer through
/// `warnings.warn`).
#[pyfunction]
fn take_warnings() -> Vec<String> {
    kestrel::error::take_warnings()
}

/// The device `auto` resolves to, and why not a GPU when it is the CPU.
#[pyfunction]
fn auto_device() -> (String, Option<String>) {
    let a = kestrel::Device::auto();
    (kalman::device_name(a.device), a.why_not_gpu)
}

/// The number of CUDA devices usable on this host (0 without a GPU or driver).
#[pyfunction]
fn cuda_device_count() -> usize {
    kestrel::cuda::device_count()
}

/// Runs a kernel that faults on CUDA device `ordinal` (for tests of what follows a
/// fault): raises the fault's error; the device is then unusable to the process.
#[pyfunction]
fn _provoke_kernel_fault(py: Python<'_>, ordinal: usize) -> PyResult<()> {
    run_detached(py, || kestrel::cuda::provoke_kernel_fault(ordinal))
}

#[pymodule]
fn _kestrel(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ModelError", m.py().get_type::<ModelError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(take_warnings, m)?)?;
    m.add_function(wrap_pyfunction!(auto_device, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(_provoke_kernel_fault, m)?)?;
    hmm::register(m)?;
    kalman::register(m)?;
    likelihood::register(m)?;
    nonlinear::register(m)?;
    sim::register(m)?;
    split::register(m)?;
    stream::register(m)?;
    tracking::register(m)?;
    particle::register(m)?;
    tbd::register(m)?;
    varying::register(m)?;
    Ok(())
}
