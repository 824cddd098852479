//! Time-varying models on the GPU: the batched sequential filter and RTS smoother (one
//! thread per track over the per-step matrices, `parallel/kernels/parallel_seq.cu`), the
//! parallel methods, and the retrodiction with and without covariances
//! (`parallel_means.cu`), on a model read from a file, equal the textbook loop over the
//! per-step matrices on fresh random inputs with missing values, f64 and f32. The GPU
//! runs poison every output with NaN first and fail on an unwritten (non-finite) element.
//! Skips without a GPU; `KESTREL_REQUIRE_GPU=1` makes a missing GPU a failure.

mod common;

use common::{max_rel_err, random_measurements, random_tv_model, textbook_filter, textbook_smooth};
use kestrel::model::{load_linear_model, save_time_varying_model, LinearModel};
use kestrel::parallel::{self, Moments};
use kestrel::{
    filter_on, smooth_on, Device, FilterMethod, FilterOptions, Measurements, Real, ScanAlgorithm,
    SmoothMethod, StateSpace,
};

fn gpu_or_skip() -> bool {
    match kestrel::parallel::cuda::available(0) {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("KESTREL_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("KESTREL_REQUIRE_GPU=1 but no GPU: {why}");
            }
            eprintln!("skipped: no GPU ({why})");
            false
        }
    }
}

fn flat<M: StateSpace>(m: &M, z: &Measurements<f64>) -> [Vec<f64>; 5] {
    let (ny, t) = (m.ny(), z.steps());
    let mut r: [Vec<f64>; 5] = Default::default();
    for b in 0..z.tracks() {
        let f = textbook_filter(m, &z.data()[b * t * ny..(b + 1) * t * ny], t);
        let (xs, ps) = textbook_smooth(m, &f);
        for k in 0..t {
            r[0].extend(f.mean[k].iter());
            r[1].extend(f.cov[k].transpose().iter());
            r[2].push(f.loglik[k]);
            r[3].extend(xs[k].iter());
            r[4].extend(ps[k].transpose().iter());
        }
    }
    r
}

fn close<T: Real>(what: &str, got: &[T], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let e = max_rel_err(got.iter().map(|v| v.to_f64()), want.iter().copied());
    assert!(
        e < tol,
        "{what}: max relative error {e:e} (tolerance {tol:e})"
    );
}

fn check<T: Real>(m: &LinearModel, z64: &Measurements<f64>, tol: f64, tag: &str) {
    let [mean, cov, ll, smean, scov] = flat(m, z64);
    let z: Measurements<T> = z64.cast();
    let gpu = Device::Cuda(0);
    let opts = FilterOptions::default();
    for method in [
        FilterMethod::Sequential,
        FilterMethod::Parallel(ScanAlgorithm::Fastest),
        FilterMethod::Parallel(ScanAlgorithm::Blelloch),
    ] {
        let f = filter_on(gpu, m, &z, method, &opts).unwrap().filtered;
        let w = format!("{tag} GPU filter {method:?}");
        close(&format!("{w} mean"), f.mean(), &mean, tol);
        close(&format!("{w} cov"), f.cov(), &cov, tol);
        close(&format!("{w} loglik"), f.loglik().unwrap(), &ll, tol);
    }
    for method in [
        SmoothMethod::Rts,
        SmoothMethod::ParallelRts(ScanAlgorithm::Fastest),
        SmoothMethod::TwoFilter(ScanAlgorithm::Fastest),
        SmoothMethod::ParallelRts(ScanAlgorithm::LadnerFischer),
    ] {
        let s = smooth_on(gpu, m, &z, method).unwrap();
        let w = format!("{tag} GPU smooth {method:?}");
        close(
            &format!("{w} filtered loglik"),
            s.filtered.loglik().unwrap(),
            &ll,
            tol,
        );
        close(&format!("{w} mean"), s.smoothed.mean(), &smean, tol);
        close(&format!("{w} cov"), s.smoothed.cov(), &scov, tol);
    }
    let f = filter_on(Device::Cpu, m, &z, FilterMethod::Sequential, &opts)
        .unwrap()
        .filtered;
    for alg in [
        ScanAlgorithm::Fastest,
        ScanAlgorithm::Sequential,
        ScanAlgorithm::Blelloch,
        ScanAlgorithm::HillisSteele,
        ScanAlgorithm::LadnerFischer,
        ScanAlgorithm::Sengupta(4),
    ] {
        let s = parallel::retrodict(gpu, m, &f, alg, Moments::MeansAndCovariances).unwrap();
        close(
            &format!("{tag} GPU retrodict {alg:?} mean"),
            s.mean(),
            &smean,
            tol,
        );
        close(
            &format!("{tag} GPU retrodict {alg:?} cov"),
            s.cov(),
            &scov,
            tol,
        );
        let s = parallel::retrodict(gpu, m, &f, alg, Moments::MeansOnly).unwrap();
        close(
            &format!("{tag} GPU retrodict means {alg:?}"),
            s.mean(),
            &smean,
            tol,
        );
        assert!(s.cov().is_empty(), "{tag}: means only holds no covariances");
    }
}

#[test]
fn gpu_time_varying_equals_the_textbook_loop() {
    if !gpu_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (case, &(nx, ny, t, b)) in [
        (4, 2, 1, 1),
        (4, 2, 300, 7),
        (3, 1, 1000, 2),
        (6, 3, 129, 300),
    ]
    .iter()
    .enumerate()
    {
        let seed = 40 + case as u64;
        let tv = random_tv_model(seed, nx, ny, t + 3);
        let toml = dir.path().join(format!("m{case}.toml"));
        save_time_varying_model(&tv, &toml, &dir.path().join(format!("s{case}.npz"))).unwrap();
        let m = load_linear_model(&toml).unwrap();
        let z = random_measurements(seed + 1, b, t, ny, 0.2);
        check::<f64>(&m, &z, 1e-8, &format!("f64 case {case}"));
        check::<f32>(&m, &z, 5e-3, &format!("f32 case {case}"));
    }
}

/// Too few steps in the model is refused on the GPU as on the CPU, naming both counts.
#[test]
fn gpu_time_varying_refuses_short_models() {
    if !gpu_or_skip() {
        return;
    }
    let m = random_tv_model(3, 2, 1, 10);
    let z = random_measurements(4, 2, 11, 1, 0.0);
    for e in [
        filter_on(
            Device::Cuda(0),
            &m,
            &z,
            FilterMethod::Sequential,
            &FilterOptions::default(),
        )
        .map(|_| ())
        .unwrap_err(),
        smooth_on(Device::Cuda(0), &m, &z, SmoothMethod::Rts)
            .map(|_| ())
            .unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(e.contains("10 steps") && e.contains("11"), "{e}");
    }
}
