//! Track-before-detect (Mazurek): `kestrel tbd` and `kestrel simulate-frames` over NumPy
//! arrays (`simulate.rs`: the frames).
//!
//! The recursion `P_k(x, y; v) = (1 - alpha) P_{k-1}(x - vx, y - vy; v) + alpha X_k(x, y)`
//! and its detection map `D_k = max_v P_k` are the library's ([`kestrel::tbd`]); this module
//! does what the two commands do around it, in the same order and with the same
//! messages: frames converted to f32 one at a time (u8 / u16 / f64 as the `.npy` reader
//! converts them, f32 read in place), the threshold given or calibrated for a per-pixel
//! false-alarm probability on noise fitted to frame 0, non-maximum suppression per map.

use crate::arrays::owned;
use crate::kalman::device_name;
use crate::progress::Bar;
use crate::run_detached;
use kestrel::limits::{self, Size};
use kestrel::tbd::{self, Motion, Noise, Params, Tbd};
use kestrel::{Device, Error};
use numpy::PyReadonlyArrayDyn;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::path::PathBuf;

mod simulate;

/// Frames per pass over the state on the CPU with `D = 1`, as `kestrel tbd` runs it
/// (the maps are the same as one frame at a time, bit for bit).
const CPU_FRAMES_PER_PASS: usize = 4;

/// A bad input or option (`ValueError`), with the command's message.
fn input(msg: impl Into<String>) -> Error {
    Error::Input { msg: msg.into() }
}

/// A library error about an option as a `ValueError`, its `--flag` written as the
/// keyword argument (`--velocities` becomes `velocities`).
fn keywords(e: Error) -> PyErr {
    let msg = e.to_string();
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg.as_str();
    while let Some(i) = rest.find("--") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        if !after.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.push_str("--");
            rest = after;
            continue;
        }
        let end = after
            .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
            .unwrap_or(after.len());
        out.push_str(&after[..end].replace('-', "_"));
        rest = &after[end..];
    }
    out.push_str(rest);
    PyValueError::new_err(out)
}

/// An element type of a frame array: read as the `.npy` frame reader reads it.
trait Pixel: numpy::Element + Copy + Sync {
    /// Float frames are checked for values that are not finite.
    const FLOAT: bool;
    fn to_f32(self) -> f32;
    /// The frame as f32: borrowed when it already is, else converted into `buf`.
    fn as_f32<'a>(src: &'a [Self], buf: &'a mut [f32]) -> &'a [f32] {
        buf.iter_mut().zip(src).for_each(|(o, &v)| *o = v.to_f32());
        buf
    }
}

impl Pixel for u8 {
    const FLOAT: bool = false;
    fn to_f32(self) -> f32 {
        self as f32
    }
}

impl Pixel for u16 {
    const FLOAT: bool = false;
    fn to_f32(self) -> f32 {
        self as f32
    }
}

impl Pixel for f32 {
    const FLOAT: bool = true;
    fn to_f32(self) -> f32 {
        self
    }
    fn as_f32<'a>(src: &'a [f32], _: &'a mut [f32]) -> &'a [f32] {
        src
    }
}

impl Pixel for f64 {
    const FLOAT: bool = true;
    fn to_f32(self) -> f32 {
        self as f32
    }
}

/// Frame `t` of `frames` as f32 (`h * w` values), checked as the `.npy` reader checks it.
fn frame_f32<'a, T: Pixel>(
    frames: &'a [T],
    t: usize,
    w: usize,
    buf: &'a mut [f32],
) -> kestrel::Result<&'a [f32]> {
    let n = buf.len();
    let x = T::as_f32(&frames[t * n..(t + 1) * n], buf);
    if T::FLOAT && !x.iter().fold(true, |ok, v| ok & v.is_finite()) {
        let i = x.iter().position(|v| !v.is_finite()).unwrap_or(0);
        return Err(input(format!(
            "frames: frame {t}, pixel x {} y {}: value is not finite",
            i % w,
            i / w
        )));
    }
    Ok(x)
}

/// `--velocities` as text ("vx:vy,...") or as pairs of numbers.
fn velocities_of(v: &Bound<'_, PyAny>) -> PyResult<Vec<Motion>> {
    if let Ok(s) = v.cast::<PyString>() {
        return tbd::parse_velocities(s.to_str()?).map_err(keywords);
    }
    let pairs: Vec<(f32, f32)> = v.extract().map_err(|_| {
        PyTypeError::new_err(
            "velocities: expected \"vx:vy,...\" or a sequence of (vx, vy) pairs of numbers",
        )
    })?;
    if pairs.is_empty() {
        return Err(PyValueError::new_err("velocities: no motion vectors"));
    }
    for (i, &(vx, vy)) in pairs.iter().enumerate() {
        if !vx.is_finite() || !vy.is_finite() {
            return Err(PyValueError::new_err(format!(
                "velocities: item {} ({vx}, {vy}): not finite",
                i + 1
            )));
        }
    }
    Ok(pairs.into_iter().map(|(x, y)| Motion::new(x, y)).collect())
}

/// The motion set of `--velocities` / `--speeds` and `--directions`, else `default`
/// (the CLI's `MotionArgs::motions`).
pub(super) fn motions_of(
    velocities: Option<&Bound<'_, PyAny>>,
    speeds: Option<&Bound<'_, PyAny>>,
    directions: Option<usize>,
    default: impl FnOnce() -> Vec<Motion>,
) -> PyResult<Vec<Motion>> {
    if let Some(v) = velocities {
        return velocities_of(v);
    }
    if let Some(s) = speeds {
        let speeds: Vec<f32> = if let Ok(text) = s.cast::<PyString>() {
            let text = text.to_str()?;
            text.split(',')
                .map(|x| x.trim().parse::<f32>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| {
                    PyValueError::new_err(format!("speeds: \"{text}\" is not a list of numbers"))
                })?
        } else {
            s.extract().map_err(|_| {
                PyTypeError::new_err("speeds: expected \"s1,s2,...\" or a sequence of numbers")
            })?
        };
        return tbd::speeds_directions(&speeds, directions.unwrap_or(12)).map_err(keywords);
    }
    Ok(default())
}

/// `--transition` (a `.npy` path, or an array [V, V] of probabilities) or `--switch P`
/// over `motions` (the CLI's `SwitchArgs::transition`); None: the plain recursion.
fn transition_of(
    transition: Option<&Bound<'_, PyAny>>,
    switch: Option<f64>,
    motions: &[Motion],
) -> PyResult<Option<tbd::Transition>> {
    let v = motions.len();
    match (transition, switch) {
        (Some(_), Some(_)) => Err(PyValueError::new_err(
            "transition cannot be used with switch (give one of them)",
        )),
        (None, Some(p)) => Ok(Some(
            tbd::Transition::switching(motions, p).map_err(keywords)?,
        )),
        (None, None) => Ok(None),
        (Some(t), None) => {
            if let Ok(path) = t.extract::<PathBuf>() {
                if !path
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
                {
                    return Err(PyValueError::new_err(format!(
                        "transition {}: expected a .npy file",
                        path.display()
                    )));
                }
                return tbd::Transition::from_npy(&path, v)
                    .map(Some)
                    .map_err(crate::to_py);
            }
            let a: PyReadonlyArrayDyn<'_, f64> = t.extract().map_err(|_| {
                PyTypeError::new_err(
                    "transition: expected an array [V, V] of probabilities or a .npy path",
                )
            })?;
            let view = a.as_array();
            let vals: Vec<f64> = view.iter().copied().collect();
            tbd::Transition::from_array(view.shape(), &vals, v, "transition")
                .map(Some)
                .map_err(keywords)
        }
    }
}

/// The options of one `kestrel tbd` run (the command's flags).
struct Options {
    alpha: f32,
    decimation: usize,
    threshold: Option<f32>,
    pfa: Option<f64>,
    rayleigh: bool,
    nms: usize,
    device: String,
    f16_state: bool,
    kernel: Option<String>,
    state: bool,
    state_out: Option<PathBuf>,
    maps: bool,
    /// The Markov matrix between the vectors (`transition=` / `switch=`).
    transition: Option<tbd::Transition>,
}

/// What a run hands back: the detections (columns), the threshold, the fitted noise, the
/// final state and every map when asked for.
struct Out {
    t: Vec<i64>,
    x: Vec<i64>,
    y: Vec<i64>,
    motion: Vec<i64>,
    score: Vec<f32>,
    threshold: f32,
    noise: Option<Noise>,
    state: Option<Vec<f32>>,
    maps: Option<(Vec<i64>, Vec<f32>, Vec<u16>)>,
    device: Device,
    kernel: Option<String>,
}

/// `kestrel tbd::run` over frames in memory (`[f, h, w]`, row-major).
fn run_frames<T: Pixel>(
    data: &[T],
    (f, h, w): (usize, usize, usize),
    motions: &[Motion],
    o: &Options,
    bar: &Bar,
) -> kestrel::Result<Out> {
    let device = Device::parse(&o.device)?;
    if f == 0 {
        return Err(input("frames: empty sequence: no frames (T = 0)"));
    }
    if h == 0 || w == 0 {
        return Err(input(format!(
            "frames: frames of {h} x {w} pixels hold nothing"
        )));
    }
    limits::check("a frame", &[Size("rows", h), Size("columns", w)], 4)?;
    let params = Params {
        motions: motions.to_vec(),
        alpha: o.alpha,
        decimation: o.decimation,
        transition: o.transition.clone(),
    };
    params.check(h, w)?;
    let kernel = match &o.kernel {
        Some(k) => {
            let cfg = tbd::cuda::KernelConfig::parse(k)
                .ok_or_else(|| input(format!("kernel: unknown kernel name \"{k}\"")))?;
            cfg.check(motions)
                .and_then(|_| cfg.check_decimation(o.decimation))
                .map_err(|e| input(format!("kernel: {e}")))?;
            Some(cfg)
        }
        None => None,
    };
    let n = h * w;
    let n_maps = f.div_ceil(o.decimation);
    if o.maps {
        limits::check(
            "the maps",
            &[Size("maps", n_maps), Size("rows", h), Size("columns", w)],
            6,
        )?;
    }
    let opts = tbd::GpuOptions::default()
        .with_half(o.f16_state)
        .with_kernel(kernel);
    let mut engine = Tbd::with_gpu_options(params.clone(), h, w, device, opts)?
        .with_cpu_frames_per_pass(CPU_FRAMES_PER_PASS);
    // Named now: a sequence that ends inside a launch finishes on the CPU.
    let kernel_name = engine.kernel().map(|k| k.name());
    let mut first = vec![0.0f32; n];
    let first = frame_f32(data, 0, w, &mut first)?;
    let (threshold, noise) = match o.threshold {
        Some(t) => (t, None),
        None => {
            let pfa = o.pfa.unwrap_or(1e-4);
            let noise = Noise::fit(first, o.rayleigh);
            let thr = tbd::detect::calibrate_params(Some(&params), h, w, noise, &[pfa], 0)?[0];
            (thr, Some(noise))
        }
    };
    let mut maps = o.maps.then(|| {
        (
            Vec::with_capacity(n_maps),
            Vec::with_capacity(n_maps * n),
            Vec::with_capacity(n_maps * n),
        )
    });
    let mut dets = Vec::new();
    let mut buf = vec![0.0f32; n];
    for t in 0..f {
        kestrel::cancel::check()?;
        let x = if t > 0 {
            frame_f32(data, t, w, &mut buf)?
        } else {
            first
        };
        let mut out = engine.push(x)?;
        if t + 1 == f {
            out.extend(engine.finish()?);
        }
        for map in out {
            dets.extend(tbd::detect(&map, threshold, o.nms)?);
            if let Some((ts, score, arg)) = &mut maps {
                ts.push(map.t as i64);
                score.extend_from_slice(&map.score);
                arg.extend_from_slice(&map.arg);
            }
            engine.recycle(map);
        }
        bar.inc(1);
    }
    let state = if o.state || o.state_out.is_some() {
        let s = engine.state()?;
        if let Some(p) = &o.state_out {
            tbd::frames::write_npy(p, &[motions.len(), h, w], &s)?;
        }
        o.state.then_some(s)
    } else {
        None
    };
    Ok(Out {
        t: dets.iter().map(|d| d.t as i64).collect(),
        x: dets.iter().map(|d| d.x as i64).collect(),
        y: dets.iter().map(|d| d.y as i64).collect(),
        motion: dets.iter().map(|d| d.motion as i64).collect(),
        score: dets.iter().map(|d| d.score).collect(),
        threshold,
        noise,
        state,
        maps,
        device,
        kernel: kernel_name,
    })
}

fn noise_dict<'py>(py: Python<'py>, noise: Noise) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match noise {
        Noise::Gaussian { mean, std } => {
            d.set_item("kind", "gaussian")?;
            d.set_item("mean", mean)?;
            d.set_item("std", std)?;
        }
        Noise::Rayleigh { scale } => {
            d.set_item("kind", "rayleigh")?;
            d.set_item("scale", scale)?;
        }
    }
    Ok(d)
}

fn tbd_typed<'py, T: Pixel>(
    py: Python<'py>,
    frames: &Bound<'py, PyAny>,
    motions: &[Motion],
    o: &Options,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let guard: PyReadonlyArrayDyn<'py, T> = frames.extract()?;
    let (shape, data) = crate::arrays::c_slice(&guard, "frames", 3)?;
    let dims = (shape[0], shape[1], shape[2]);
    let bar = Bar::new(progress, "tbd", dims.0 as u64, "frames");
    let out = run_detached(py, || run_frames(data, dims, motions, o, &bar))?;
    bar.finish();
    drop(guard);
    let (h, w) = (dims.1, dims.2);
    let d = PyDict::new(py);
    let nd = out.t.len();
    d.set_item("t", owned(py, out.t, &[nd])?)?;
    d.set_item("x", owned(py, out.x, &[nd])?)?;
    d.set_item("y", owned(py, out.y, &[nd])?)?;
    d.set_item("motion", owned(py, out.motion, &[nd])?)?;
    d.set_item("score", owned(py, out.score, &[nd])?)?;
    d.set_item("threshold", out.threshold)?;
    match out.noise {
        Some(n) => d.set_item("noise", noise_dict(py, n)?)?,
        None => d.set_item("noise", py.None())?,
    }
    let v = motions.len();
    let mv: Vec<f32> = motions.iter().flat_map(|m| [m.vx, m.vy]).collect();
    d.set_item("motions", owned(py, mv, &[v, 2])?)?;
    match out.state {
        Some(s) => d.set_item("state", owned(py, s, &[v, h, w])?)?,
        None => d.set_item("state", py.None())?,
    }
    match out.maps {
        Some((ts, score, arg)) => {
            let m = ts.len();
            d.set_item("map_t", owned(py, ts, &[m])?)?;
            d.set_item("map_score", owned(py, score, &[m, h, w])?)?;
            d.set_item("map_arg", owned(py, arg, &[m, h, w])?)?;
        }
        None => {
            for k in ["map_t", "map_score", "map_arg"] {
                d.set_item(k, py.None())?;
            }
        }
    }
    d.set_item("device", device_name(out.device))?;
    d.set_item("kernel", out.kernel)?;
    Ok(d)
}

/// `kestrel tbd` over `frames` [T, H, W] (a C-contiguous u8, u16, f32 or f64 array):
/// a dict of the detections' columns (`t`, `x`, `y`, `motion`, `score`), the
/// `threshold`, the fitted `noise`, the `motions` [V, 2], the final `state` [V, H, W]
/// and the maps (`map_t`, `map_score`, `map_arg`) when asked for, the `device` and the
/// GPU `kernel`.
#[pyfunction]
#[pyo3(signature = (frames, velocities=None, speeds=None, directions=None, alpha=0.1, decimation=1, threshold=None, pfa=None, noise="gaussian", nms=2, state_out=None, device="auto", f16_state=false, kernel=None, return_state=false, return_maps=false, progress=false, transition=None, switch=None))]
#[allow(clippy::too_many_arguments)]
fn tbd_run<'py>(
    py: Python<'py>,
    frames: &Bound<'py, PyAny>,
    velocities: Option<&Bound<'py, PyAny>>,
    speeds: Option<&Bound<'py, PyAny>>,
    directions: Option<usize>,
    alpha: f32,
    decimation: usize,
    threshold: Option<f32>,
    pfa: Option<f64>,
    noise: &str,
    nms: usize,
    state_out: Option<PathBuf>,
    device: &str,
    f16_state: bool,
    kernel: Option<String>,
    return_state: bool,
    return_maps: bool,
    progress: bool,
    transition: Option<&Bound<'py, PyAny>>,
    switch: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    if let Some(s) = &state_out {
        if !s.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) {
            return Err(PyValueError::new_err(format!(
                "state_out {}: expected a .npy file",
                s.display()
            )));
        }
    }
    if let Some(p) = pfa {
        if !(p > 0.0 && p < 1.0) {
            return Err(PyValueError::new_err(format!(
                "pfa must lie in (0, 1), got {p}"
            )));
        }
    }
    if threshold.is_some_and(|t| !t.is_finite()) {
        return Err(PyValueError::new_err("threshold must be a finite number"));
    }
    let rayleigh = match noise {
        "gaussian" => false,
        "rayleigh" => true,
        other => {
            return Err(PyValueError::new_err(format!(
                "noise: invalid value '{}' [possible values: gaussian, rayleigh]",
                other.escape_debug()
            )))
        }
    };
    let motions = motions_of(velocities, speeds, directions, || {
        tbd::speeds_directions(&[0.0, 1.0], 12).expect("a valid default motion set")
    })?;
    let o = Options {
        alpha,
        decimation,
        threshold,
        pfa,
        rayleigh,
        nms,
        device: device.to_string(),
        f16_state,
        kernel,
        state: return_state,
        state_out,
        maps: return_maps,
        transition: transition_of(transition, switch, &motions)?,
    };
    if frames.extract::<PyReadonlyArrayDyn<'py, f32>>().is_ok() {
        tbd_typed::<f32>(py, frames, &motions, &o, progress)
    } else if frames.extract::<PyReadonlyArrayDyn<'py, f64>>().is_ok() {
        tbd_typed::<f64>(py, frames, &motions, &o, progress)
    } else if frames.extract::<PyReadonlyArrayDyn<'py, u8>>().is_ok() {
        tbd_typed::<u8>(py, frames, &motions, &o, progress)
    } else if frames.extract::<PyReadonlyArrayDyn<'py, u16>>().is_ok() {
        tbd_typed::<u16>(py, frames, &motions, &o, progress)
    } else {
        Err(PyTypeError::new_err(format!(
            "frames: expected a uint8, uint16, float32 or float64 NumPy array, got {}",
            frames.get_type().name()?
        )))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tbd_run, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::simulate_frames, m)?)?;
    Ok(())
}
