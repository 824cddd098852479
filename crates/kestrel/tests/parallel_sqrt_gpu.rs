//! The square-root parallel filter and smoother on the GPU (`kernels/parallel_sqrt.cu`):
//! equal to the sequential CPU references (Kalman filter, RTS smoother) on fresh random
//! time-varying models with missing values, every scan algorithm, batches of tracks, f64
//! and f32; and on the ill-conditioned model where the standard parallel filter over
//! stored elements fails in f32 (on the GPU too), covariances within 1e-3 of f64 in f32
//! and means no further off than the sequential f32 Kalman filter's. Every GPU
//! run poisons its outputs with NaN first and fails on an unwritten element. Skips
//! without a GPU; `KESTREL_REQUIRE_GPU=1` makes a missing GPU a failure.

mod common;
mod gpu_common;

use common::ill_conditioned;
use gpu_common::gpu_or_skip;
use kestrel::parallel::{self, PaperModel};
use kestrel::{Device, Estimates, FilterOptions, Measurements, Real, ScanAlgorithm};

/// Largest per-step relative difference, with a floor of 1e-3 (NaN is infinite).
fn rel_err(a: &[f64], b: &[f64], per: usize) -> f64 {
    common::rel_err(a, b, per, 1e-3)
}

fn f64s<T: Real>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

fn check<T: Real>(
    tag: &str,
    (f, s): &(Estimates<T>, Estimates<T>),
    want_f: &Estimates<f64>,
    want_s: &Estimates<f64>,
    tol: f64,
) {
    let n = want_f.nx();
    let errs = [
        ("filter mean", rel_err(&f64s(f.mean()), want_f.mean(), n)),
        ("filter cov", rel_err(&f64s(f.cov()), want_f.cov(), n * n)),
        (
            "loglik",
            rel_err(&f64s(f.loglik().unwrap()), want_f.loglik().unwrap(), 1),
        ),
        ("rts mean", rel_err(&f64s(s.mean()), want_s.mean(), n)),
        ("rts cov", rel_err(&f64s(s.cov()), want_s.cov(), n * n)),
    ];
    for (what, e) in errs {
        assert!(e < tol, "{tag} {what}: {e:e}");
    }
}

#[test]
fn sqrt_filter_and_smoother_on_the_gpu_equal_the_reference() {
    if !gpu_or_skip("sqrt_filter_and_smoother_on_the_gpu_equal_the_reference") {
        return;
    }
    let opts = FilterOptions::default().with_force_general(true);
    for (case, &(nx, ny, t, b)) in [(4, 2, 1, 1), (4, 2, 333, 3), (3, 1, 200, 2), (6, 3, 97, 4)]
        .iter()
        .enumerate()
    {
        let seed = 900 + 10 * case as u64;
        let model = PaperModel::new(nx, ny, t, t, seed);
        let z = kestrel::sim::simulate(&model, b, t, seed + 1, 0.25)
            .unwrap()
            .measurements;
        let want_f = kestrel::filter(&model, &z, &opts).unwrap().filtered;
        let want_s = kestrel::smooth_filtered(&model, &want_f).unwrap();
        for alg in ScanAlgorithm::all() {
            let tag = format!("nx={nx} ny={ny} T={t} B={b} {alg:?}");
            let got = parallel::smooth_sqrt(Device::Cuda(0), &model, &z, alg).unwrap();
            check(&format!("{tag} f64"), &got, &want_f, &want_s, 1e-9);
            let f = parallel::filter_sqrt(Device::Cuda(0), &model, &z, alg).unwrap();
            assert_eq!(f.mean(), got.0.mean(), "{tag}: the filter alone differs");
            let z32: Measurements<f32> = z.cast();
            let got32 = parallel::smooth_sqrt(Device::Cuda(0), &model, &z32, alg).unwrap();
            check(&format!("{tag} f32"), &got32, &want_f, &want_s, 2e-3);
        }
    }
}

/// Largest per-step distance `sqrt((a - b)^T P^{-1} (a - b))` of means `a` from `b` in the
/// standard deviations of the covariances `p` (`n` states a step).
fn maha(a: &[f64], b: &[f64], p: &[f64], n: usize) -> f64 {
    use nalgebra::{DMatrix, DVector};
    let mut worst = 0.0f64;
    for k in 0..b.len() / n {
        let d = DVector::from_fn(n, |i, _| a[k * n + i] - b[k * n + i]);
        let pm = DMatrix::from_row_slice(n, n, &p[k * n * n..(k + 1) * n * n]);
        let v = pm
            .cholesky()
            .expect("the f64 reference is positive definite")
            .solve(&d);
        let m = d.dot(&v).sqrt();
        worst = if m.is_nan() {
            f64::INFINITY
        } else {
            worst.max(m)
        };
    }
    worst
}

/// The model of tests/parallel_sqrt.rs in f32, two tracks: the standard parallel filter
/// over stored elements (Ladner-Fischer, the CPU's operator) loses positive definiteness
/// or most of its accuracy there; the square-root form keeps its covariances within 1e-3
/// of f64 (filter and smoother), and its means are no further from f64, counted in the f64
/// posterior's standard deviations, than those of the sequential f32 Kalman filter and RTS
/// smoother (on the CPU, the textbook recursion in f32). Relative to the states' size the
/// means can be 1e-2 off in f32 (in directions the measurements leave uncertain: 0.07-0.2
/// standard deviations, where the sequential f32 filter is 0.6 off). The default fused
/// scan of the standard form sweeps each chunk with the Kalman recursion itself and does
/// not fail here; its covariance error is printed.
#[test]
fn sqrt_form_on_the_gpu_keeps_f32_where_the_standard_form_fails() {
    if !gpu_or_skip("sqrt_form_on_the_gpu_keeps_f32_where_the_standard_form_fails") {
        return;
    }
    let model = ill_conditioned(11, [1e3, 1.0, 1e-3], 1e-4, 0.99);
    let t = 200;
    let n = model.nx();
    let z = kestrel::sim::simulate(&model, 2, t, 12, 0.1)
        .unwrap()
        .measurements;
    let opts = FilterOptions::default().with_force_general(true);
    let want_f = kestrel::filter(&model, &z, &opts).unwrap().filtered;
    let want_s = kestrel::smooth_filtered(&model, &want_f).unwrap();
    let z32: Measurements<f32> = z.cast();
    let seq_f: Estimates<f64> = kestrel::filter(&model, &z32, &opts)
        .unwrap()
        .filtered
        .cast();
    let seq_s: Estimates<f64> = kestrel::smooth_filtered(
        &model,
        &kestrel::filter(&model, &z32, &opts).unwrap().filtered,
    )
    .unwrap()
    .cast();
    let (base_f, base_s) = (
        maha(seq_f.mean(), want_f.mean(), want_f.cov(), n),
        maha(seq_s.mean(), want_s.mean(), want_s.cov(), n),
    );
    let cov_err = |e: &kestrel::Result<Estimates<f32>>| match e {
        Ok(f) => rel_err(&f64s(f.cov()), want_f.cov(), n * n),
        Err(_) => f64::INFINITY,
    };
    let stored = parallel::filter(Device::Cuda(0), &model, &z32, ScanAlgorithm::LadnerFischer);
    let fused = parallel::filter(Device::Cuda(0), &model, &z32, ScanAlgorithm::Fastest);
    let (e_stored, e_fused) = (cov_err(&stored), cov_err(&fused));
    eprintln!(
        "GPU standard form f32: stored elements (ladner-fischer) {}, fused {}; sequential f32 on the CPU: means {base_f:.3} (filter), {base_s:.3} (RTS) standard deviations",
        match &stored {
            Ok(_) => format!("covariances {e_stored:.2e}"),
            Err(e) => format!("refused ({e})"),
        },
        match &fused {
            Ok(_) => format!("covariances {e_fused:.2e}"),
            Err(e) => format!("refused ({e})"),
        }
    );
    for alg in [ScanAlgorithm::Fastest, ScanAlgorithm::LadnerFischer] {
        let (f, s) = parallel::smooth_sqrt(Device::Cuda(0), &model, &z32, alg).unwrap();
        let (f, s): (Estimates<f64>, Estimates<f64>) = (f.cast(), s.cast());
        let (fm, fc) = (
            maha(f.mean(), want_f.mean(), want_f.cov(), n),
            rel_err(f.cov(), want_f.cov(), n * n),
        );
        let (sm, sc) = (
            maha(s.mean(), want_s.mean(), want_s.cov(), n),
            rel_err(s.cov(), want_s.cov(), n * n),
        );
        eprintln!("GPU square-root f32 {alg:?}: filter means {fm:.3} sd, covariances {fc:.2e}; smoother means {sm:.3} sd, covariances {sc:.2e}");
        assert!(
            fm <= base_f && sm <= base_s && fc < 1e-3 && sc < 1e-3,
            "GPU square-root f32 {alg:?}: filter {fm:e} sd {fc:e}, smoother {sm:e} sd {sc:e} (sequential f32: {base_f:e}, {base_s:e} sd)"
        );
        assert!(
            e_stored > 10.0 * fc,
            "the standard form over stored elements in f32 was expected to fail or be far less accurate: {e_stored:e} vs {fc:e}"
        );
    }
}
