//! The likelihood methods on the GPU against the CPU: `window:N` (the window kernels,
//! outputs poisoned with NaN before the run, fresh random inputs with missing values)
//! and `parallel` (the parallel-in-time GPU filter). Skips without a GPU; fails with
//! `KESTREL_REQUIRE_GPU=1`.

mod gpu_common;

use gpu_common::{gpu_or_skip, random_model};
use kestrel::likelihood::{loglik, Method, Options};
use kestrel::model::ar;
use kestrel::sim::simulate;
use kestrel::{Device, Measurements, Model, Real};

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
