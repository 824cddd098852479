//! The parallel filter, parallel RTS smoother and two-filter smoother equal the
//! sequential reference (general path) on random time-varying models with missing
//! measurements, for every scan algorithm, one track and many.

mod common;

use kestrel::model::{Prior, StepMatrices};
use kestrel::{
    parallel, Device, Error, Estimates, FilterOptions, Measurements, ScanAlgorithm,
    TimeVaryingModel,
};
use nalgebra::{DMatrix, DVector};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

fn gauss(rng: &mut impl Rng, r: usize, c: usize) -> DMatrix<f64> {
    DMatrix::from_fn(r, c, |_, _| rng.sample(StandardNormal))
}

/// The paper's random model (Section VI-A): per step, `F` = 0.99 x the orthogonal factor of a
/// Gaussian matrix, `Q = Xi Xi^T`, `R = Xi Xi^T`, Gaussian `H`, `u`, `d`; random prior.
fn random_model(rng: &mut impl Rng, nx: usize, ny: usize, steps: usize) -> TimeVaryingModel {
    let gram = |rng: &mut _, n| {
        let x = gauss(rng, n, n);
        &x * x.transpose()
    };
    let steps = (0..steps)
        .map(|_| StepMatrices {
            f: gauss(rng, nx, nx).qr().q() * 0.99,
            u: DVector::from_fn(nx, |_, _| rng.sample(StandardNormal)),
            q: gram(rng, nx),
            h: gauss(rng, ny, nx),
            d: DVector::from_fn(ny, |_, _| rng.sample(StandardNormal)),
            r: gram(rng, ny) + DMatrix::identity(ny, ny) * 0.01,
        })
        .collect();
    let prior = Prior {
        x0: DVector::from_fn(nx, |_, _| rng.sample(StandardNormal)),
        p0: gram(rng, nx) + DMatrix::identity(nx, nx) * 0.01,
    };
    TimeVaryingModel::new(steps, prior).expect("a valid random model")
}

/// Largest per-step relative difference, with a floor of 1e-3 (NaN is infinite).
fn rel_err(a: &[f64], b: &[f64], per: usize) -> f64 {
    common::rel_err(a, b, per, 1e-3)
}

fn assert_close(what: &str, got: &Estimates<f64>, want: &Estimates<f64>, tol: f64) {
    let nx = want.nx();
    let em = rel_err(got.mean(), want.mean(), nx);
    let ec = rel_err(got.cov(), want.cov(), nx * nx);
    assert!(
        em < tol && ec < tol,
        "{what}: mean error {em:e}, covariance error {ec:e}"
    );
    if let (Some(g), Some(w)) = (&got.loglik(), &want.loglik()) {
        let el = rel_err(g, w, 1);
        assert!(el < tol, "{what}: log-likelihood error {el:e}");
    }
}

fn algorithms() -> [ScanAlgorithm; 6] {
    [
        ScanAlgorithm::Sequential,
        ScanAlgorithm::HillisSteele,
        ScanAlgorithm::Blelloch,
        ScanAlgorithm::LadnerFischer,
        ScanAlgorithm::Sengupta(4),
        ScanAlgorithm::Fastest,
    ]
}

fn reference(model: &TimeVaryingModel, z: &Measurements<f64>) -> (Estimates<f64>, Estimates<f64>) {
    let opts = FilterOptions::default().with_force_general(true);
    let f = kestrel::filter(model, z, &opts).unwrap().filtered;
    let s = kestrel::smooth_filtered(model, &f).unwrap();
    (f, s)
}

#[test]
fn parallel_methods_equal_the_sequential_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2024);
    let cases = [
        (1, 1, 1, 1),
        (2, 1, 2, 1),
        (3, 2, 17, 3),
        (4, 2, 100, 1),
        (4, 2, 257, 5),
        (5, 3, 64, 2),
        (2, 2, 33, 1),
    ];
    for (case, &(nx, ny, steps, tracks)) in cases.iter().enumerate() {
        let model = random_model(&mut rng, nx, ny, steps);
        let z = kestrel::sim::simulate(&model, tracks, steps, case as u64, 0.2)
            .unwrap()
            .measurements;
        let (rf, rs) = reference(&model, &z);
        for alg in algorithms() {
            let tag = format!("case {case} (nx={nx}, ny={ny}, T={steps}, B={tracks}) {alg:?}");
            let f = parallel::filter(Device::Cpu, &model, &z, alg).unwrap();
            assert_close(&format!("filter {tag}"), &f, &rf, 1e-9);
            let (f2, s) = parallel::smooth_rts(Device::Cpu, &model, &z, alg).unwrap();
            assert_close(&format!("rts filter {tag}"), &f2, &rf, 1e-9);
            assert_close(&format!("rts {tag}"), &s, &rs, 1e-9);
            let (f3, s3) = parallel::smooth_two_filter(Device::Cpu, &model, &z, alg).unwrap();
            assert_close(&format!("two-filter filter {tag}"), &f3, &rf, 1e-9);
            assert_close(&format!("two-filter {tag}"), &s3, &rs, 1e-9);
            let r =
                parallel::retrodict(Device::Cpu, &model, &rf, alg, parallel::Moments::MeansOnly)
                    .unwrap();
            let em = rel_err(r.mean(), rs.mean(), nx);
            assert!(em < 1e-9, "retrodiction means {tag}: {em:e}");
        }
    }
}

#[test]
fn all_missing_and_first_missing_are_handled() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let model = random_model(&mut rng, 3, 2, 40);
    let mut z = kestrel::sim::simulate(&model, 2, 40, 9, 0.0)
        .unwrap()
        .measurements;
    // Track 0: everything missing; track 1: the first five and the last steps missing.
    for k in 0..40 {
        z.data_mut()[k * 2] = f64::NAN;
    }
    for k in (0..5).chain([39]) {
        z.data_mut()[(40 + k) * 2 + 1] = f64::NAN;
    }
    let (rf, rs) = reference(&model, &z);
    for alg in algorithms() {
        let (f, s) = parallel::smooth_two_filter(Device::Cpu, &model, &z, alg).unwrap();
        assert_close("two-filter filter", &f, &rf, 1e-9);
        assert_close("two-filter", &s, &rs, 1e-9);
        let (_, s) = parallel::smooth_rts(Device::Cpu, &model, &z, alg).unwrap();
        assert_close("rts", &s, &rs, 1e-9);
    }
}

/// In f32 the parallel forms stay within a small factor of the sequential f32 filter's
/// own rounding error (both against the f64 reference; observed within 2x).
#[test]
fn f32_parallel_filter_tracks_the_f64_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let model = random_model(&mut rng, 4, 2, 500);
    let z = kestrel::sim::simulate(&model, 1, 500, 1, 0.1)
        .unwrap()
        .measurements;
    let (rf, rs) = reference(&model, &z);
    let z32: Measurements<f32> = z.cast();
    let opts = FilterOptions::default().with_force_general(true);
    let f32_seq = kestrel::filter(&model, &z32, &opts)
        .unwrap()
        .filtered
        .cast::<f64>();
    let s32_seq = kestrel::smooth_filtered(&model, &f32_seq.cast::<f32>())
        .unwrap()
        .cast::<f64>();
    let base_f = rel_err(f32_seq.mean(), rf.mean(), 4).max(rel_err(f32_seq.cov(), rf.cov(), 16));
    let base_s = rel_err(s32_seq.mean(), rs.mean(), 4).max(rel_err(s32_seq.cov(), rs.cov(), 16));
    assert!(
        base_f > 0.0 && base_f < 1e-4 && base_s < 1e-4,
        "{base_f:e} {base_s:e}"
    );
    for alg in [
        ScanAlgorithm::LadnerFischer,
        ScanAlgorithm::Fastest,
        ScanAlgorithm::Blelloch,
    ] {
        let (f, s) = parallel::smooth_rts(Device::Cpu, &model, &z32, alg).unwrap();
        let (f, s) = (f.cast::<f64>(), s.cast::<f64>());
        let ef = rel_err(f.mean(), rf.mean(), 4).max(rel_err(f.cov(), rf.cov(), 16));
        let es = rel_err(s.mean(), rs.mean(), 4).max(rel_err(s.cov(), rs.cov(), 16));
        assert!(
            ef < 5.0 * base_f && es < 5.0 * base_s,
            "{alg:?}: filter {ef:e} (sequential f32 {base_f:e}), rts {es:e} ({base_s:e})"
        );
    }
}

#[test]
fn bad_inputs_and_cuda_are_errors() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let model = random_model(&mut rng, 2, 1, 10);
    let z = Measurements::new(1, 10, 2, vec![0.0; 20]).unwrap();
    assert!(matches!(
        parallel::filter(Device::Cpu, &model, &z, ScanAlgorithm::Fastest),
        Err(Error::Input { .. })
    ));
    let long = Measurements::new(1, 11, 1, vec![0.0; 11]).unwrap();
    assert!(matches!(
        parallel::smooth_rts(Device::Cpu, &model, &long, ScanAlgorithm::Fastest),
        Err(Error::Input { .. })
    ));
    // On a machine without a GPU, asking for one is a clean error; with one, the GPU
    // result equals the CPU result.
    let ok = Measurements::new(1, 10, 1, (0..10).map(|k| k as f64 * 0.3).collect()).unwrap();
    let on_gpu = parallel::filter(Device::Cuda(0), &model, &ok, ScanAlgorithm::Fastest);
    if kestrel::cuda::available(0).is_ok() {
        let cpu = parallel::filter(Device::Cpu, &model, &ok, ScanAlgorithm::Fastest).unwrap();
        let gpu = on_gpu.unwrap();
        assert!(rel_err(gpu.mean(), cpu.mean(), 2) < 1e-9);
        assert!(rel_err(gpu.cov(), cpu.cov(), 4) < 1e-9);
    } else {
        assert!(matches!(on_gpu, Err(Error::Unsupported(_))));
    }
}
