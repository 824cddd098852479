//! The likelihood methods on the GPU against the CPU: `window:N` (the window kernels,
//! outputs poisoned with NaN before the run, fresh random inputs with missing values)
//! and `parallel` (the parallel-in-time GPU filter). Skips without a GPU; fails with
//! `KESTREL_REQUIRE_GPU=1`.

mod gpu_common;

use gpu_common::{gpu_or_skip, random_model};
use kestrel::likelihood::{loglik, Method, Options};
use kestrel::model::{ar, model_from_toml};
use kestrel::sim::simulate;
use kestrel::{Device, Measurements, Model, Real};
use std::path::Path;

fn compare<T: Real>(model: &Model, z: &Measurements<T>, method: Method, tol: f64) {
    let o = Options::default();
    let cpu = loglik(Device::Cpu, model, z, method, &o).unwrap();
    let gpu = loglik(Device::Cuda(0), model, z, method, &o).unwrap();
    for (i, (a, b)) in cpu.values.iter().zip(&gpu.values).enumerate() {
        let (a, b) = (a.to_f64(), b.to_f64());
        assert!(
            (a - b).abs() <= tol * a.abs().max(1.0),
            "{} {method:?}: track {}, step {}: cpu {a} vs gpu {b}",
            T::NAME,
            i / z.steps(),
            i % z.steps()
        );
    }
}

#[test]
fn gpu_equals_cpu() {
    if !gpu_or_skip("likelihood gpu_equals_cpu") {
        return;
    }
    for (seed, model) in [
        (
            1u64,
            ar(
                &[0.7, -0.2, 0.1, 0.05, 0.02, 0.0, 0.0, 0.0, 0.0, 0.01],
                1.0,
                0.5,
                2.0,
            )
            .unwrap(),
        ),
        (2, random_model(4, 2, 33)),
    ] {
        let mut z = simulate(&model, 5, 5000, seed, 0.0).unwrap().measurements;
        let ny = z.ny();
        for k in (5..z.steps()).step_by(20) {
            let t = z.steps();
            z.data_mut()[(t + k) * ny..(t + k + 1) * ny].fill(f64::NAN);
        }
        for k in [3usize, 1000, 1001, 4000] {
            let t = z.steps();
            z.data_mut()[(2 * t + k) * ny] = f64::NAN;
        }
        for n in [1usize, 9, 64, 700] {
            compare::<f64>(&model, &z, Method::Window(n), 1e-10);
            compare::<f32>(&model, &z.cast(), Method::Window(n), 2e-4);
        }
        compare::<f64>(&model, &z, Method::Parallel, 1e-9);
        compare::<f32>(&model, &z.cast(), Method::Parallel, 1e-3);
    }
}

/// The seed's AR(10) noise model (`examples/ar10-seismic-noise.toml`) with its
/// stationary prior, read from the file.
fn ar10() -> Model {
    let text = include_str!("../../../examples/ar10-seismic-noise.toml");
    model_from_toml(text, Path::new("examples/ar10-seismic-noise.toml")).unwrap()
}

fn worst_rel(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / x.abs().max(1.0))
        .fold(0.0, f64::max)
}

/// Long series (thousands of chunks per track, so the carry between chunks matters) and
/// many tracks: the GPU's exact method against the CPU's exact filter, and
/// `window:auto` (f64) within its tolerance of exact.
#[test]
fn ar10_long_and_batched() {
    if !gpu_or_skip("likelihood ar10_long_and_batched") {
        return;
    }
    let model = ar10();
    for (tracks, steps, seed) in [(1usize, 400_000usize, 11u64), (200, 3000, 12)] {
        let mut z = simulate(&model, tracks, steps, seed, 0.0)
            .unwrap()
            .measurements;
        // A measurement missing every 20 steps in the last track.
        let last = tracks - 1;
        for k in (19..steps).step_by(20) {
            z.data_mut()[last * steps + k] = f64::NAN;
        }
        let o = Options::default();
        let exact = loglik(Device::Cpu, &model, &z, Method::Exact, &o).unwrap();
        let ex: Vec<f64> = exact.values.clone();
        let g64 = loglik(Device::Cuda(0), &model, &z, Method::Parallel, &o).unwrap();
        let e64 = worst_rel(&ex, &g64.values);
        let z32: Measurements<f32> = z.cast();
        let g32 = loglik(Device::Cuda(0), &model, &z32, Method::Parallel, &o).unwrap();
        let v32: Vec<f64> = g32.values.iter().map(|v| v.to_f64()).collect();
        let e32 = worst_rel(&ex, &v32);
        let w = loglik(Device::Cuda(0), &model, &z, Method::WindowAuto(1e-6), &o).unwrap();
        let ew = ex
            .iter()
            .zip(&w.values)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        eprintln!(
            "B = {tracks}, T = {steps}: parallel f64 {e64:.2e}, f32 {e32:.2e}; window:auto N = {:?} error {ew:.2e}",
            w.window
        );
        assert!(e64 <= 1e-9, "parallel f64: {e64:e}");
        assert!(e32 <= 1e-3, "parallel f32: {e32:e}");
        assert!(ew <= 1e-6, "window:auto: {ew:e}");
    }
}
