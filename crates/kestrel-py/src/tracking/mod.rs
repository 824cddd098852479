//! Multi-target tracking: `kestrel track` (gating, GNN / JPDA, the life cycle),
//! `kestrel eval` (GOSPA, OSPA, CLEAR MOT) and `kestrel simulate --scenario`, over arrays.
//!
//! Every check and message is the command line's, with its flag named as the keyword
//! argument (`--gate` becomes `gate`); the computations are the library's own
//! (`kestrel::tracking`), so the results equal the command's files value for value.

mod metrics;

use crate::arrays::{c_slice, owned};
use crate::kalman::{device_name, PyModel};
use crate::progress::Bar;
use crate::run_detached;
use kestrel::nonlinear::{nonlinear_from_toml, FilterChoice, FilterKind, NonlinearProblem};
use kestrel::tracking::files::{scans, Detections, Scans};
use kestrel::tracking::scenario;
use kestrel::tracking::{
    check_finite, estimate_clutter, parse_confirm, Assoc, DeviceTracker, JpdaMarginals, Status,
    TrackerConfig, TrackerOptions,
};
use kestrel::{Device, Error};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn bad(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

fn f64_array<'py>(a: &Bound<'py, PyAny>, name: &str) -> PyResult<PyReadonlyArrayDyn<'py, f64>> {
    a.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!("{name}: expected a float64 NumPy array"))
    })
}

fn u64_array<'py>(a: &Bound<'py, PyAny>, name: &str) -> PyResult<PyReadonlyArrayDyn<'py, u64>> {
    a.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!("{name}: expected a uint64 NumPy array"))
    })
}

// kestrel track

/// The model a Python `track` call runs.
enum Family {
    Linear(Box<kestrel::Model>),
    Nonlinear(Box<kestrel::nonlinear::NonlinearFile>),
}

/// The options of `kestrel track` as given from Python.
struct TrackArgs {
    opts: TrackerOptions,
    clutter: Option<f64>,
    dt: Option<f64>,
}

/// `kestrel track`'s `config`: the same checks in the same order (errors name the
/// keywords).
fn config(a: &TrackArgs, clutter: f64) -> PyResult<TrackerConfig> {
    a.opts
        .config(clutter, |n| n.replace('-', "_"))
        .map_err(crate::to_py)
}

/// The rows of every scan's live tracks, as `kestrel track` writes them.
#[derive(Default)]
struct Rows {
    t: Vec<f64>,
    id: Vec<i64>,
    confirmed: Vec<bool>,
    x: Vec<f64>,
    p: Vec<f64>,
    /// An IMM's mode probabilities, `[R][r]` (empty otherwise).
    probs: Vec<f64>,
    confirmed_ids: std::collections::HashSet<u64>,
}

fn run_tracker(
    engine: &mut DeviceTracker,
    det: &Detections,
    sc: &Scans,
    dt: Option<f64>,
    bar: &Bar,
) -> kestrel::Result<Rows> {
    let ny = det.ny;
    let mut rows = Rows::default();
    let mut warned = false;
    for k in 0..sc.len() {
        let r = sc.rows(k);
        engine.step(&det.z[r.start * ny..r.end * ny])?;
        let tracker = engine.tracks()?;
        let step = sc.first + k as i64;
        check_finite(tracker, "tracks", step, &mut warned)?;
        let t = dt.map_or(step as f64, |dt| step as f64 * dt);
        for i in 0..tracker.len() {
            let c = tracker.status(i) == Status::Confirmed;
            rows.t.push(t);
            rows.id.push(tracker.id(i) as i64);
            rows.confirmed.push(c);
            rows.x.extend_from_slice(tracker.mean(i));
            rows.p.extend_from_slice(tracker.cov(i));
            if let Some(mu) = tracker.mode_probs(i) {
                rows.probs.extend_from_slice(mu);
            }
            if c {
                rows.confirmed_ids.insert(tracker.id(i));
            }
        }
        bar.inc(1);
    }
    Ok(rows)
}

/// Groups the detections into scans: by their times `t` as `kestrel track` does (errors
/// name the row), or `counts` detections a scan from step 0.
fn scans_of(det: &Detections, dt: Option<f64>, counts: Option<&[usize]>) -> PyResult<Scans> {
    if let Some(counts) = counts {
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut row = 0usize;
        starts.push(0);
        for &c in counts {
            row += c;
            starts.push(row);
        }
        if row != det.len() {
            return Err(bad(format!(
                "detections: the scans hold {row} detections, z has {}",
                det.len()
            )));
        }
        return Ok(Scans { first: 0, starts });
    }
    scans(det, dt, std::path::Path::new("t")).map_err(|e| match e {
        Error::Parse {
            line: Some(l), msg, ..
        } => bad(format!(
            "detections: t[{}]: {}",
            l - 2,
            msg.replace("--dt", "dt")
        )),
        Error::Parse { msg, .. } => bad(format!("detections: {}", msg.replace("--dt", "dt"))),
        e => crate::to_py(e),
    })
}

/// `kestrel track` over detections `z` [N, ny] at times `t` [N] (float64, C order),
/// or `counts` detections a scan from step 0: a dict of the rows `t`, `track`,
/// `confirmed`, `x` [R, nx], `P` [R, nx, nx] (an IMM's `mode_probs` [R, r]), and the
/// run's `clutter`, `gate_threshold`, `scans`, `confirmed_tracks` and `device`.
/// `model` is a linear model, or `None` with `nonlinear = (text, origin)` a nonlinear
/// model file's text (`filter` overriding its filter kind), as `kestrel track --model
/// --filter` reads them.
#[pyfunction]
#[pyo3(signature = (model, t, z, counts=None, assoc="gnn", jpda_marginals=None, gate=0.999,
    pd=0.9, clutter=None, confirm="2/3", delete=3, delete_tentative=None, max_variance=None,
    dt=None, device="cpu", progress=false, nonlinear=None, filter=None))]
#[allow(clippy::too_many_arguments)]
fn track<'py>(
    py: Python<'py>,
    model: Option<PyRef<'py, PyModel>>,
    t: &Bound<'py, PyAny>,
    z: &Bound<'py, PyAny>,
    counts: Option<Vec<usize>>,
    assoc: &str,
    jpda_marginals: Option<&str>,
    gate: f64,
    pd: f64,
    clutter: Option<f64>,
    confirm: &str,
    delete: u32,
    delete_tentative: Option<u32>,
    max_variance: Option<f64>,
    dt: Option<f64>,
    device: &str,
    progress: bool,
    nonlinear: Option<(String, String)>,
    filter: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let family = match (&model, nonlinear) {
        (Some(m), None) => Family::Linear(Box::new(m.inner.clone())),
        (None, Some((text, origin))) => {
            let mut file = nonlinear_from_toml(&text, origin.as_ref()).map_err(crate::to_py)?;
            match filter.map(|f| (f, FilterChoice::parse(f))) {
                None => {}
                Some((_, Some(FilterChoice::Gaussian(k)))) => file.options.kind = k,
                Some((_, Some(FilterChoice::Kf))) => {
                    return Err(bad(
                        "filter: kf is the linear Kalman filter's (give a linear model; here use ekf, ukf, ckf or iekf)",
                    ))
                }
                Some((f, None)) => {
                    return Err(bad(format!(
                        "filter: unknown filter \"{}\" (expected {})",
                        f.escape_debug(),
                        FilterKind::NAMES
                    )))
                }
            }
            Family::Nonlinear(Box::new(file))
        }
        _ => {
            return Err(bad(
                "track: give a linear model or a nonlinear model file's text",
            ))
        }
    };
    drop(model);
    let assoc = match assoc {
        "gnn" => Assoc::Gnn,
        "jpda" => Assoc::Jpda,
        s => {
            return Err(bad(format!(
                "assoc: unknown association \"{}\" (expected gnn or jpda)",
                s.escape_debug()
            )))
        }
    };
    let marginals = match jpda_marginals {
        None => None,
        Some("auto") => Some(JpdaMarginals::Auto),
        Some("lbp") => Some(JpdaMarginals::Lbp),
        Some(s) => {
            return Err(bad(format!(
                "jpda_marginals: unknown method \"{}\" (expected auto or lbp)",
                s.escape_debug()
            )))
        }
    };
    let a = TrackArgs {
        opts: TrackerOptions {
            assoc,
            marginals,
            gate,
            pd,
            confirm: confirm.to_string(),
            delete,
            delete_tentative,
            max_variance,
        },
        clutter,
        dt,
    };
    if let Some(c) = a.clutter {
        if !(c > 0.0 && c.is_finite()) {
            return Err(bad(format!(
                "clutter must be a positive, finite density, got {c}"
            )));
        }
    }
    if let Some(dt) = a.dt {
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(bad(format!("dt must be positive, got {dt}")));
        }
    }
    parse_confirm(&a.opts.confirm, "confirm").map_err(crate::to_py)?;
    let (nx, ny_model, modes) = match &family {
        Family::Linear(m) => (m.nx(), m.ny(), 0),
        Family::Nonlinear(f) => (
            f.problem.nx(),
            f.problem.ny(),
            match &f.problem {
                NonlinearProblem::Imm(i) => i.len(),
                NonlinearProblem::Single(_) => 0,
            },
        ),
    };
    let tg = f64_array(t, "t")?;
    let zg = f64_array(z, "z")?;
    let (tshape, tv) = c_slice(&tg, "t", 1)?;
    let (zshape, zv) = c_slice(&zg, "z", 2)?;
    if zshape[1] != ny_model {
        return Err(bad(format!(
            "detections have {} components (z0..z{}), the model measures {}",
            zshape[1],
            zshape[1].saturating_sub(1),
            ny_model
        )));
    }
    if tshape[0] != zshape[0] {
        return Err(bad(format!(
            "t: {} times for {} detections",
            tshape[0], zshape[0]
        )));
    }
    let det = Detections {
        ny: zshape[1],
        t: tv.to_vec(),
        z: zv.to_vec(),
    };
    drop((tg, zg));
    let sc = scans_of(&det, a.dt, counts.as_deref())?;
    let clutter = a
        .clutter
        .unwrap_or_else(|| estimate_clutter(&det, sc.len()));
    let cfg = config(&a, clutter)?;
    let linear = matches!(family, Family::Linear(_));
    if !linear && device.starts_with("cuda") {
        return Err(bad(format!(
            "device {device}: tracking with a nonlinear model or an IMM runs on the CPU only (use device cpu; the GPU tracker takes linear models)"
        )));
    }
    let device_arg = device.to_string();
    let bar = Bar::new(progress, "tracking", sc.len() as u64, "scans");
    let (rows, dev, gamma) = run_detached(py, || {
        // The nonlinear filters run on the CPU: `auto` picks it there.
        let device = if device_arg == "auto" {
            if !linear {
                Device::Cpu
            } else {
                Device::auto().device
            }
        } else {
            Device::parse(&device_arg)?
        };
        let mut engine = match &family {
            Family::Linear(m) => DeviceTracker::new(m, cfg, device)?,
            Family::Nonlinear(f) => DeviceTracker::nonlinear(&f.problem, &f.options, cfg, device)?,
        };
        let rows = run_tracker(&mut engine, &det, &sc, a.dt, &bar)?;
        Ok((rows, device, engine.gate_threshold()))
    })?;
    bar.finish();
    let n = rows.t.len();
    let out = PyDict::new(py);
    out.set_item("t", owned(py, rows.t, &[n])?)?;
    out.set_item("track", owned(py, rows.id, &[n])?)?;
    out.set_item("confirmed", owned(py, rows.confirmed, &[n])?)?;
    out.set_item("x", owned(py, rows.x, &[n, nx])?)?;
    out.set_item("P", owned(py, rows.p, &[n, nx, nx])?)?;
    if modes > 1 {
        out.set_item("mode_probs", owned(py, rows.probs, &[n, modes])?)?;
    }
    out.set_item("clutter", clutter)?;
    out.set_item("gate_threshold", gamma)?;
    out.set_item("scans", sc.len())?;
    out.set_item("first_step", sc.first)?;
    out.set_item("confirmed_tracks", rows.confirmed_ids.len())?;
    out.set_item("device", device_name(dev))?;
    Ok(out)
}

// kestrel simulate --scenario

/// `kestrel simulate --scenario`: the detections `t` [N], `z` [N, ny] and the truth
/// `truth_t` [M], `truth_id` [M], `truth_x` [M, nx] of a multi-target scenario, with the
/// clutter density the tracker should use.
#[pyfunction]
#[pyo3(signature = (model, tracks, steps, scenario="random", seed=0, pd=0.9, clutter=10.0, region=1000.0, births=0.0, death=0.0))]
#[allow(clippy::too_many_arguments)]
fn simulate_scenario<'py>(
    py: Python<'py>,
    model: &PyModel,
    tracks: usize,
    steps: usize,
    scenario: &str,
    seed: u64,
    pd: f64,
    clutter: f64,
    region: f64,
    births: f64,
    death: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let kind = match scenario {
        "random" => scenario::Kind::Random,
        "crossing" => scenario::Kind::Crossing,
        s => {
            return Err(bad(format!(
                "scenario: unknown scenario \"{}\" (expected random or crossing)",
                s.escape_debug()
            )))
        }
    };
    if steps == 0 {
        return Err(bad("steps must be at least 1"));
    }
    let s = scenario::Scenario {
        kind,
        targets: tracks,
        steps,
        pd,
        clutter,
        region,
        births,
        death,
        seed,
    };
    if !(s.pd > 0.0 && s.pd <= 1.0) {
        return Err(bad(format!("pd must be in (0, 1], got {}", s.pd)));
    }
    for (flag, v) in [("clutter", s.clutter), ("births", s.births)] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(bad(format!("{flag} must be non-negative, got {v}")));
        }
    }
    if !(s.region > 0.0 && s.region.is_finite()) {
        return Err(bad(format!("region must be positive, got {}", s.region)));
    }
    if !(0.0..=1.0).contains(&s.death) {
        return Err(bad(format!(
            "death must be a probability in [0, 1], got {}",
            s.death
        )));
    }
    let model = &model.inner;
    let (truth, det) = run_detached(py, || scenario::simulate(model, &s))?;
    let (n, m) = (det.len(), truth.t.len());
    let out = PyDict::new(py);
    out.set_item("t", owned(py, det.t, &[n])?)?;
    out.set_item("z", owned(py, det.z, &[n, det.ny])?)?;
    out.set_item("truth_t", owned(py, truth.t, &[m])?)?;
    let ids: Vec<i64> = truth.id.iter().map(|&i| i as i64).collect();
    out.set_item("truth_id", owned(py, ids, &[m])?)?;
    out.set_item("truth_x", owned(py, truth.x, &[m, truth.n])?)?;
    out.set_item("clutter_density", s.clutter_density(model.ny()))?;
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(track, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::metric_steps, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::metric_labelled, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_scenario, m)?)?;
    Ok(())
}
