//! Which kinematics `predict(dt=...)` uses: recognised in a constant-velocity or
//! constant-acceleration model, or named.

use kestrel::model::{Kinematics, Model};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The kinematics of a model built by the constant-velocity or constant-acceleration
/// builder (any `dt`, `q`): `F` and `Q` equal to those of `Kinematics` over the `dt` read
/// from `F`, to rounding. None for any other model.
pub(super) fn detect_kinematics(model: &Model) -> Option<Kinematics> {
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
pub(super) fn kinematics_of(model: &Model, k: &Bound<'_, PyAny>) -> PyResult<Option<Kinematics>> {
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
