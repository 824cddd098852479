//! `kestrel simulate-frames` over arrays: frames with point targets in noise, held in
//! memory instead of streamed to a file, equal to the command's file value for value
//! (the SNR convention and the draws are `kestrel::tbd::sim`'s).

use super::motions_of;
use crate::arrays::owned;
use crate::progress::Bar;
use crate::run_detached;
use kestrel::limits::{self, Size};
use kestrel::tbd::{self, sim::amplitude, Motion, Noise, NoiseFrames, Target};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// A `--target` "x:y:vx:vy", or four numbers.
fn target_of(item: &Bound<'_, PyAny>, amp: f64) -> PyResult<Target> {
    let v: Vec<f64> = if let Ok(s) = item.cast::<PyString>() {
        let s = s.to_str()?;
        s.split(':')
            .map(|x| x.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| {
                PyValueError::new_err(format!("target \"{s}\": expected X:Y:VX:VY (numbers)"))
            })?
    } else {
        item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "target: expected \"x:y:vx:vy\" or four numbers, got {}",
                item.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?
    };
    if v.len() != 4 || v.iter().any(|x| !x.is_finite()) {
        let shown = match item.cast::<PyString>() {
            Ok(s) => s.to_str()?.to_string(),
            Err(_) => v
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(":"),
        };
        return Err(PyValueError::new_err(format!(
            "target \"{shown}\": expected X:Y:VX:VY (four finite numbers)"
        )));
    }
    Ok(Target {
        x: v[0],
        y: v[1],
        vx: v[2],
        vy: v[3],
        amplitude: amp,
    })
}

/// `kestrel simulate-frames` in memory: a dict of `frames` [T, H, W] (float32, uint8 or
/// uint16: integer types hold `round(offset + scale X)` clamped, u8 with 64 and 16, u16
/// with 4096 and 256), the `targets` (x, y, vx, vy, amplitude; the given ones first,
/// then the random ones), and the truth columns (`truth_t`, `truth_target`, `truth_x`,
/// `truth_y`: one row per frame and target inside the frame).
#[pyfunction]
#[pyo3(signature = (frames, height=256, width=256, target=Vec::new(), targets=0, velocities=None, speeds=None, directions=None, snr=3.0, noise="gaussian", dtype="f32", seed=0, progress=false))]
#[allow(clippy::too_many_arguments)]
pub(super) fn simulate_frames<'py>(
    py: Python<'py>,
    frames: usize,
    height: usize,
    width: usize,
    target: Vec<Bound<'py, PyAny>>,
    targets: usize,
    velocities: Option<&Bound<'py, PyAny>>,
    speeds: Option<&Bound<'py, PyAny>>,
    directions: Option<usize>,
    snr: f64,
    noise: &str,
    dtype: &str,
    seed: u64,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (t, h, w) = (frames, height, width);
    if t == 0 || h == 0 || w == 0 {
        return Err(PyValueError::new_err(format!(
            "frames, height and width must be at least 1 (got {t}, {h}, {w})"
        )));
    }
    kestrel::tbd::sim::check_snr("snr", snr).map_err(crate::to_py)?;
    let size = match dtype {
        "f32" => 4,
        "u16" => 2,
        "u8" => 1,
        other => {
            return Err(PyValueError::new_err(format!(
                "dtype: invalid value '{}' [possible values: f32, u8, u16]",
                other.escape_debug()
            )))
        }
    };
    let noise = match noise {
        "gaussian" => Noise::UNIT_GAUSSIAN,
        "rayleigh" => Noise::UNIT_RAYLEIGH,
        other => {
            return Err(PyValueError::new_err(format!(
                "noise: invalid value '{}' [possible values: gaussian, rayleigh]",
                other.escape_debug()
            )))
        }
    };
    // All the frames are held in memory (the command streams them to its file).
    limits::check(
        "the frames",
        &[Size("frames", t), Size("rows", h), Size("columns", w)],
        size,
    )
    .map_err(crate::to_py)?;
    limits::check("a frame", &[Size("rows", h), Size("columns", w)], 4 + size)
        .map_err(crate::to_py)?;
    limits::check(
        "random targets",
        &[Size("targets", targets)],
        std::mem::size_of::<Target>(),
    )
    .map_err(crate::to_py)?;
    let amp = amplitude(snr);
    let mut all: Vec<Target> = target
        .iter()
        .map(|s| target_of(s, amp))
        .collect::<PyResult<_>>()?;
    if targets > 0 {
        let motions = motions_of(velocities, speeds, directions, || {
            (-1..=1)
                .flat_map(|vy| (-1..=1).map(move |vx| Motion::new(vx as f32, vy as f32)))
                .collect()
        })?;
        all.extend(tbd::sim::random_targets(&motions, targets, h, w, amp, seed));
    }
    let bar = Bar::new(progress, "simulate-frames", t as u64, "frames");
    let gen = NoiseFrames::new(h, w, noise, seed);
    let n = h * w;
    let frames_out = run_detached(py, || {
        let mut frame = vec![0.0f32; n];
        let mut f32s: Vec<f32> = Vec::new();
        let mut u16s: Vec<u16> = Vec::new();
        let mut u8s: Vec<u8> = Vec::new();
        let out = match size {
            4 => &mut f32s as &mut dyn Extend,
            2 => &mut u16s,
            _ => &mut u8s,
        };
        out.reserve(t * n);
        for k in 0..t {
            gen.frame_with(k, &mut frame, &all);
            out.put(&frame);
            bar.inc(1);
        }
        Ok((f32s, u16s, u8s))
    })?;
    bar.finish();
    let d = PyDict::new(py);
    let shape = [t, h, w];
    match size {
        4 => d.set_item("frames", owned(py, frames_out.0, &shape)?)?,
        2 => d.set_item("frames", owned(py, frames_out.1, &shape)?)?,
        _ => d.set_item("frames", owned(py, frames_out.2, &shape)?)?,
    }
    let nt = all.len();
    let tv: Vec<f64> = all
        .iter()
        .flat_map(|g| [g.x, g.y, g.vx, g.vy, g.amplitude])
        .collect();
    d.set_item("targets", owned(py, tv, &[nt, 5])?)?;
    let (mut tt, mut ti, mut tx, mut ty) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for k in 0..t {
        for (i, g) in all.iter().enumerate() {
            if g.pixel(k, h, w).is_some() {
                let (x, y) = g.at(k);
                tt.push(k as i64);
                ti.push(i as i64);
                tx.push(x);
                ty.push(y);
            }
        }
    }
    let m = tt.len();
    d.set_item("truth_t", owned(py, tt, &[m])?)?;
    d.set_item("truth_target", owned(py, ti, &[m])?)?;
    d.set_item("truth_x", owned(py, tx, &[m])?)?;
    d.set_item("truth_y", owned(py, ty, &[m])?)?;
    d.set_item("amplitude", amp)?;
    Ok(d)
}

/// The frame buffers of `simulate_frames`: each element type's conversion of the f32
/// frame (`kestrel simulate-frames`'s, bit for bit).
trait Extend {
    fn reserve(&mut self, n: usize);
    fn put(&mut self, frame: &[f32]);
}

impl Extend for Vec<f32> {
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n)
    }
    fn put(&mut self, frame: &[f32]) {
        self.extend_from_slice(frame)
    }
}

impl Extend for Vec<u16> {
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n)
    }
    fn put(&mut self, frame: &[f32]) {
        self.extend(
            frame
                .iter()
                .map(|v| (4096.0 + 256.0 * v).round().clamp(0.0, 65535.0) as u16),
        )
    }
}

impl Extend for Vec<u8> {
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n)
    }
    fn put(&mut self, frame: &[f32]) {
        self.extend(
            frame
                .iter()
                .map(|v| (64.0 + 16.0 * v).round().clamp(0.0, 255.0) as u8),
        )
    }
}
