//! The per-step API on the GPU (`BatchTracker`) against the same API on the CPU
//! (`kalman::BatchState`) and the batch filter: the same calls give the same state (1e-10
//! in f64; in f32 the CPU's bit for bit, and the batch filter's to 1e-5); targets added
//! with their own priors and removed between calls;
//! per-target intervals, control inputs, masks and per-target R; a slot not written is
//! not updated again (no stale measurement). Skips without a GPU.

mod gpu_common;

use gpu_common::*;
use kestrel::kalman::cuda::{self, BatchTracker, CudaOptions};
use kestrel::kalman::{BatchState, Prediction};
use kestrel::model::{constant_velocity, Kinematics};
use kestrel::{kalman, FilterOptions, Keep, Measurements, Real};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn last_of<T: Real>(m: &kestrel::Model, z: &Measurements<T>) -> kestrel::Estimates<T> {
    let o = FilterOptions::default()
        .with_keep(Keep::Last)
        .with_force_general(true);
    kalman::filter(m, z, &o).expect("CPU reference").filtered
}

fn rows<T: Real>(z: &Measurements<T>, k: usize) -> Vec<T> {
    (0..z.tracks()).flat_map(|b| z.at(b, k).to_vec()).collect()
}

/// Every live slot of the GPU state against the CPU state: mean, covariance and
/// log-likelihood each to `tol` relative to its own largest magnitude (at least 1).
///
/// Norm-wise, not element by element: the update `P - W W^T` cancels, so an element of
/// the posterior covariance far smaller than the prior's carries the rounding error of
/// the prior's scale (an f32 variance of 0.56 after a prior of 30 differs by 2e-5 between
/// two correct orders of summation). The bound on that subtraction is norm-wise.
fn same_state<T: Real>(what: &str, gpu: &mut BatchTracker<T>, cpu: &BatchState<T>, tol: f64) {
    let g = gpu.state().expect("GPU state");
    let nx = cpu.nx();
    for s in 0..cpu.capacity() {
        if !cpu.is_live(s) {
            assert!(
                g.mean_at(s, 0)[0].is_nan_value(),
                "{what}: free slot {s} must read NaN"
            );
            continue;
        }
        let ll = cpu.loglik(s).expect("live");
        let gl = g.loglik().expect("loglik")[s];
        let parts: [(&str, &[T], &[T]); 3] = [
            ("mean", g.mean_at(s, 0), cpu.mean(s).expect("live")),
            ("covariance", g.cov_at(s, 0), cpu.cov(s).expect("live")),
            (
                "log-likelihood",
                std::slice::from_ref(&gl),
                std::slice::from_ref(&ll),
            ),
        ];
        for (name, gv, cv) in parts {
            let scale = cv
                .iter()
                .map(|v| v.to_f64().abs())
                .filter(|v| v.is_finite())
                .fold(1.0, f64::max);
            for (a, b) in gv.iter().zip(cv) {
                let (a, b) = (a.to_f64(), b.to_f64());
                if a.is_nan() && b.is_nan() {
                    continue;
                }
                assert!(
                    (a - b).abs() <= tol * scale,
                    "{what}: slot {s}: {name}: GPU {a}, CPU {b} (largest {scale}, nx {nx})"
                );
            }
        }
    }
}

/// f32 on the GPU against f32 on the CPU after the same calls. The per-step kernels round
/// exactly as the CPU's per-step API does (the same order of every sum, the same skipped
/// zeros, no fused multiply-adds), so mean and covariance are the CPU's bit for bit,
/// however much the update `P - W W^T` cancels; the log-likelihood, whose logarithm
/// comes from two math libraries, within 1e-5 relative (a few units in the last place).
fn same_bits(what: &str, gpu: &mut BatchTracker<f32>, cpu: &BatchState<f32>) {
    let g = gpu.state().expect("GPU state");
    for s in 0..cpu.capacity() {
        if !cpu.is_live(s) {
            assert!(
                g.mean_at(s, 0)[0].is_nan(),
                "{what}: free slot {s} must read NaN"
            );
            continue;
        }
        for (name, gv, cv) in [
            ("mean", g.mean_at(s, 0), cpu.mean(s).expect("live")),
            ("covariance", g.cov_at(s, 0), cpu.cov(s).expect("live")),
        ] {
            for (k, (a, b)) in gv.iter().zip(cv).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{what}: slot {s}: {name}[{k}]: GPU {a:e}, CPU {b:e}: not the same f32"
                );
            }
        }
        let (gl, cl) = (g.loglik().expect("loglik")[s], cpu.loglik(s).expect("live"));
        assert!(
            (gl - cl).abs() <= 1e-5 * cl.abs().max(1.0) || (gl.is_nan() && cl.is_nan()),
            "{what}: slot {s}: log-likelihood: GPU {gl}, CPU {cl}"
        );
    }
}

#[test]
fn per_step_on_the_gpu_equals_the_batch_filter() {
    if !gpu_or_skip("per_step_on_the_gpu_equals_the_batch_filter") {
        return;
    }
    for (nx, ny, seed) in [(4usize, 2usize, 10u64), (6, 2, 11), (3, 3, 12)] {
        let m = random_model(nx, ny, seed);
        let (b, t) = (500, 30);
        let z = random_measurements::<f64>(&m, b, t, seed + 100, 0.1);
        let mut tr = BatchTracker::<f64>::new(0, &m, b, &CudaOptions::default()).expect("tracker");
        for i in 0..b {
            assert_eq!(tr.add().expect("add"), i);
        }
        for k in 0..t {
            if k > 0 {
                tr.predict().expect("predict");
            }
            tr.update(&rows(&z, k), None, None).expect("update");
        }
        let got = tr.state().expect("state");
        let want = last_of(&m, &z);
        // The state matches; the log-likelihood is the last step's, not the total.
        let e = got.clone().without_loglik();
        let w = want.without_loglik();
        assert_close(&format!("tracker nx={nx} vs CPU"), &e, &w, 1e-10);
        let batch = cuda::filter(0, &m, &z, &FilterOptions::default().with_keep(Keep::Last))
            .expect("GPU batch")
            .filtered;
        let batch = batch.without_loglik();
        assert_close(&format!("tracker nx={nx} vs GPU batch"), &e, &batch, 1e-12);
    }
}

#[test]
fn per_step_on_the_gpu_in_f32_equals_the_batch_filter() {
    // f32: the per-step API on the GPU against the CPU's per-step API (bit for bit, every
    // step) and the batch filter in f32 on the GPU and on the CPU, to 1e-5 (relative to
    // each quantity's largest magnitude), over 30 steps with missing measurements.
    if !gpu_or_skip("per_step_on_the_gpu_in_f32_equals_the_batch_filter") {
        return;
    }
    for (nx, ny, seed) in [(4usize, 2usize, 20u64), (6, 2, 21), (3, 3, 22)] {
        let m = random_model(nx, ny, seed);
        let (b, t) = (500, 30);
        let z = random_measurements::<f32>(&m, b, t, seed + 100, 0.1);
        let mut tr = BatchTracker::<f32>::new(0, &m, b, &CudaOptions::default()).expect("tracker");
        let mut cpu = BatchState::<f32>::new(&m, b).expect("state");
        for _ in 0..b {
            tr.add().expect("add");
            cpu.add().expect("add");
        }
        for k in 0..t {
            if k > 0 {
                tr.predict().expect("predict");
                cpu.predict().expect("predict");
            }
            tr.update(&rows(&z, k), None, None).expect("update");
            cpu.update(&rows(&z, k), None, None).expect("update");
            // (6, 2) follows the CPU's SIMD lanes, (3, 3) its general path.
            same_bits(&format!("nx={nx} step {k}"), &mut tr, &cpu);
        }
        let got = tr.state().expect("state").without_loglik();
        let want = last_of(&m, &z).without_loglik();
        assert_close(
            &format!("f32 tracker nx={nx} vs CPU batch"),
            &got,
            &want,
            1e-5,
        );
        let batch = cuda::filter(0, &m, &z, &FilterOptions::default().with_keep(Keep::Last))
            .expect("GPU batch")
            .filtered
            .without_loglik();
        assert_close(
            &format!("f32 tracker nx={nx} vs GPU batch"),
            &got,
            &batch,
            1e-5,
        );
    }
}

#[test]
fn gpu_and_cpu_per_step_apis_agree_call_for_call() {
    if !gpu_or_skip("gpu_and_cpu_per_step_apis_agree_call_for_call") {
        return;
    }
    let m = constant_velocity(2, 1.0, 0.4, 1.5, 20.0).expect("cv");
    let kin = Kinematics::constant_velocity(2, 0.4).expect("kinematics");
    let cap = 1000;
    let mut rng = StdRng::seed_from_u64(5);
    let mut gpu = BatchTracker::<f32>::new(0, &m, cap, &CudaOptions::default())
        .expect("tracker")
        .with_kinematics(kin)
        .expect("kinematics");
    let mut cpu = BatchState::<f32>::new(&m, cap)
        .expect("state")
        .with_kinematics(kin)
        .expect("kinematics");
    for t in 0..40 {
        if t > 3 {
            let gone: Vec<usize> = cpu
                .live_slots()
                .filter(|_| rng.gen::<f64>() < 0.05)
                .collect();
            for s in gone {
                cpu.remove(s).expect("cpu remove");
                gpu.remove(s).expect("gpu remove");
            }
        }
        let n = if t == 0 {
            700
        } else {
            rng.gen_range(0..40).min(cap - cpu.len())
        };
        for _ in 0..n {
            let x0: Vec<f32> = (0..4).map(|_| rng.gen_range(-50.0..50.0)).collect();
            let v: f32 = rng.gen_range(1.0..30.0);
            let p0 = [
                v, 0.0, 0.0, 0.0, 0.0, v, 0.0, 0.0, 0.0, 0.0, v, 0.0, 0.0, 0.0, 0.0, v,
            ];
            let a = cpu.add_with_prior(&x0, &p0).expect("cpu add");
            let b = gpu.add_with_prior(&x0, &p0).expect("gpu add");
            assert_eq!(a, b, "both hand out the lowest free slot");
        }
        if t > 0 {
            let dts: Vec<f64> = (0..cap).map(|_| rng.gen_range(0.2..2.0)).collect();
            let ctrl: Vec<f32> = (0..cap * 4).map(|_| rng.gen_range(-0.1..0.1)).collect();
            let mut p = Prediction::new();
            if t % 2 == 1 {
                p = p.per_target_dt(&dts);
            }
            if t % 5 == 0 {
                p = p.control(&ctrl);
            }
            cpu.predict_with(&p).expect("cpu predict");
            gpu.predict_with(&p).expect("gpu predict");
        }
        // Detections for about half the targets; the others' rows are NaN this time.
        let z: Vec<f32> = (0..cap * 2)
            .map(|i| {
                if (i / 2 + t) % 2 == 0 {
                    rng.gen_range(-60.0..60.0)
                } else {
                    f32::NAN
                }
            })
            .collect();
        let mask: Vec<bool> = (0..cap).map(|s| s % 7 != t % 7).collect();
        let r: Vec<f32> = (0..cap)
            .flat_map(|_| {
                let v = rng.gen_range(0.5..4.0);
                [v, 0.1, 0.1, v]
            })
            .collect();
        let (mk, rr) = (
            (t % 3 == 0).then_some(&mask[..]),
            (t % 4 == 1).then_some(&r[..]),
        );
        cpu.update(&z, mk, rr).expect("cpu update");
        gpu.update(&z, mk, rr).expect("gpu update");
        same_bits(&format!("call {t}"), &mut gpu, &cpu);
        cpu.measure(None).expect("cpu measure");
        let (zh, s) = gpu.measure(None).expect("gpu measure");
        for sl in cpu.live_slots() {
            let c_zh = cpu.predicted_measurement(sl).expect("live");
            let c_s = cpu.innovation_cov(sl).expect("live");
            for (name, gv, cv) in [
                ("predicted measurement", &zh[sl * 2..sl * 2 + 2], c_zh),
                ("innovation covariance", &s[sl * 4..sl * 4 + 4], c_s),
            ] {
                for (a, b) in gv.iter().zip(cv) {
                    assert!(
                        a.to_bits() == b.to_bits(),
                        "call {t}: measure, slot {sl}: {name}: GPU {a:e}, CPU {b:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_slot_without_a_new_row_is_not_updated_again() {
    // The staging buffers of the old tracker kept rows written two steps earlier: a slot
    // not overwritten re-applied an old detection. Each update now copies every row.
    if !gpu_or_skip("a_slot_without_a_new_row_is_not_updated_again") {
        return;
    }
    let m = constant_velocity(1, 1.0, 0.1, 1.0, 10.0).expect("cv");
    let mut gpu = BatchTracker::<f64>::new(0, &m, 4, &CudaOptions::default()).expect("tracker");
    let mut cpu = BatchState::<f64>::new(&m, 4).expect("state");
    for _ in 0..4 {
        gpu.add().expect("add");
        cpu.add().expect("add");
    }
    let mut z = vec![f64::NAN; 4];
    for t in 0..6 {
        if t > 0 {
            gpu.predict().expect("predict");
            cpu.predict().expect("predict");
        }
        z.fill(f64::NAN);
        if t < 2 {
            z[1] = 3.0 + t as f64; // only the first two updates see target 1
        }
        gpu.update(&z, None, None).expect("update");
        cpu.update(&z, None, None).expect("update");
        same_state(&format!("update {t}"), &mut gpu, &cpu, 1e-10);
    }
    assert_eq!(gpu.state().expect("state").loglik().expect("ll")[1], 0.0);
}

#[test]
fn inconsistent_calls_are_errors() {
    if !gpu_or_skip("inconsistent_calls_are_errors") {
        return;
    }
    let m = random_model(4, 2, 20);
    let mut tr = BatchTracker::<f32>::new(0, &m, 8, &CudaOptions::default()).expect("tracker");
    assert!(tr.remove(3).is_err());
    for _ in 0..8 {
        tr.add().expect("add");
    }
    assert!(tr.add().is_err(), "adding past capacity must fail");
    assert!(tr.update(&[0.0; 15], None, None).is_err());
    assert!(tr.update(&[0.0; 16], Some(&[true; 7]), None).is_err());
    assert!(matches!(
        tr.predict_dt(0.5),
        Err(kestrel::Error::Unsupported(_))
    ));
    assert!(tr.add_with_prior(&[0.0; 4], &[1.0; 15]).is_err());
    fn send<S: Send>(_: &S) {}
    send(&tr);
}
