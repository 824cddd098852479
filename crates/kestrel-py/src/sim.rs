//! Simulation: truth and measurements drawn from a linear-Gaussian model
//! (`kestrel simulate` without `--scenario`).

use crate::arrays::owned;
use crate::run_detached;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `tracks` independent trajectories of `steps` steps drawn from `model`
/// (`x_0 ~ N(x0, P0)`, `x_k = F x_{k-1} + u + w_k`, `z_k = H x_k + d + v_k`), each
/// measurement missing (NaN) with probability `missing`. Track `b` draws from its own
/// generator seeded by `(seed, b)`: the command line's numbers, whatever the thread
/// count. Returns `(truth [B, T, nx], z [B, T, ny])` in float64.
#[pyfunction]
#[pyo3(signature = (model, tracks, steps, seed=0, missing=0.0))]
fn simulate<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    tracks: usize,
    steps: usize,
    seed: u64,
    missing: f64,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    if tracks == 0 || steps == 0 {
        return Err(PyValueError::new_err(format!(
            "tracks and steps must be at least 1 (got {tracks} and {steps})"
        )));
    }
    if !(0.0..=1.0).contains(&missing) {
        return Err(PyValueError::new_err(format!(
            "missing must be a probability in [0, 1], got {missing}"
        )));
    }
    // A `Model` or a `TimeVaryingModel` (at most its steps).
    let m = crate::varying::state_space(model)?;
    let (nx, ny) = (m.nx(), m.ny());
    let sim = run_detached(py, || {
        kestrel::sim::simulate(m, tracks, steps, seed, missing)
    })?;
    let truth = owned(py, sim.truth, &[tracks, steps, nx])?;
    let z = owned(py, sim.measurements.into_data(), &[tracks, steps, ny])?;
    Ok((truth, z))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    Ok(())
}
