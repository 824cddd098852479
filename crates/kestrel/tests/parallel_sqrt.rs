//! The square-root parallel filter and smoother (`parallel::filter_sqrt`,
//! `parallel::smooth_sqrt`): equal to the sequential references (Kalman filter, RTS
//! smoother) in f64 on random time-varying models with missing values for every scan
//! algorithm, and, on an ill-conditioned nx = 6 model where the standard parallel filter
//! loses positive definiteness in f32, within 1e-3 of the f64 reference in f32.

mod common;

use common::{ill_conditioned, rel_err};
use kestrel::parallel::{self, PaperModel};
use kestrel::{Device, Estimates, FilterOptions, Measurements, ScanAlgorithm};

fn errs(got: &Estimates<f64>, want: &Estimates<f64>) -> (f64, f64, f64) {
    let n = want.nx();
    (
        rel_err(got.mean(), want.mean(), n, 1e-3),
        rel_err(got.cov(), want.cov(), n * n, 1e-3),
        rel_err(got.loglik().unwrap(), want.loglik().unwrap(), 1, 1.0),
    )
}

fn reference<M: kestrel::StateSpace + ?Sized>(model: &M, z: &Measurements<f64>) -> Estimates<f64> {
    let opts = FilterOptions::default().with_force_general(true);
    kestrel::filter(model, z, &opts).unwrap().filtered
}

#[test]
fn sqrt_filter_equals_the_reference_in_f64() {
    for (case, &(nx, ny, t, b)) in [(4, 2, 1, 1), (4, 2, 200, 3), (3, 1, 77, 1), (6, 3, 50, 2)]
        .iter()
        .enumerate()
    {
        let model = PaperModel::new(nx, ny, t, t, 500 + case as u64);
        let z = kestrel::sim::simulate(&model, b, t, 600 + case as u64, 0.25)
            .unwrap()
            .measurements;
        let want = reference(&model, &z);
        for alg in ScanAlgorithm::all() {
            let got = parallel::filter_sqrt(Device::Cpu, &model, &z, alg).unwrap();
            let (em, ec, el) = errs(&got, &want);
            assert!(
                em < 1e-9 && ec < 1e-9 && el < 1e-9,
                "nx={nx} ny={ny} T={t} B={b} {alg:?}: {em:e} {ec:e} {el:e}"
            );
        }
    }
}

fn smooth_errs(got: &Estimates<f64>, want: &Estimates<f64>) -> (f64, f64) {
    let n = want.nx();
    (
        rel_err(got.mean(), want.mean(), n, 1e-3),
        rel_err(got.cov(), want.cov(), n * n, 1e-3),
    )
}

#[test]
fn sqrt_smoother_equals_the_rts_reference_in_f64() {
    for (case, &(nx, ny, t, b)) in [(4, 2, 1, 1), (4, 2, 150, 3), (3, 1, 77, 1), (6, 3, 40, 2)]
        .iter()
        .enumerate()
    {
        let model = PaperModel::new(nx, ny, t, t, 700 + case as u64);
        let z = kestrel::sim::simulate(&model, b, t, 800 + case as u64, 0.25)
            .unwrap()
            .measurements;
        let want_f = reference(&model, &z);
        let want_s = kestrel::smooth_filtered(&model, &want_f).unwrap();
        for alg in ScanAlgorithm::all() {
            let (f, s) = parallel::smooth_sqrt(Device::Cpu, &model, &z, alg).unwrap();
            let (em, ec, el) = errs(&f, &want_f);
            let (sm, sc) = smooth_errs(&s, &want_s);
            assert!(
                em < 1e-9 && ec < 1e-9 && el < 1e-9 && sm < 1e-9 && sc < 1e-9,
                "nx={nx} ny={ny} T={t} B={b} {alg:?}: filter {em:e} {ec:e} {el:e}, smoother {sm:e} {sc:e}"
            );
        }
    }
}

/// Process noise from 1e3 down to 1e-3 per block, measurement noise 1e-4: the standard
/// form loses positive definiteness in f32 (a later innovation covariance is no longer
/// positive definite), the square-root form stays within 1e-3 of f64 in means and
/// covariances, and its per-step log-likelihoods are no worse than those of the sequential
/// f32 Kalman filter (whose own f32 error there is a few 1e-2, from the precise
/// measurements of states of order 1e2).
#[test]
fn sqrt_filter_keeps_f32_where_the_standard_form_fails() {
    let model = ill_conditioned(11, [1e3, 1.0, 1e-3], 1e-4, 0.99);
    let t = 200;
    let z = kestrel::sim::simulate(&model, 1, t, 12, 0.1)
        .unwrap()
        .measurements;
    let want = reference(&model, &z);
    let sq64 = parallel::filter_sqrt(Device::Cpu, &model, &z, ScanAlgorithm::Fastest).unwrap();
    let (em, ec, el) = errs(&sq64, &want);
    assert!(
        em < 1e-6 && ec < 1e-6 && el < 1e-6,
        "square-root f64: {em:e} {ec:e} {el:e}"
    );
    let z32: Measurements<f32> = z.cast();
    let std32 = parallel::filter(Device::Cpu, &model, &z32, ScanAlgorithm::Fastest);
    assert!(
        matches!(std32, Err(kestrel::Error::NotPositiveDefinite { .. })),
        "the standard form in f32 was expected to lose positive definiteness"
    );
    let seq32 = kestrel::filter(
        &model,
        &z32,
        &FilterOptions::default().with_force_general(true),
    )
    .unwrap()
    .filtered;
    let (_, _, el_seq) = errs(&seq32.cast(), &want);
    for alg in [
        ScanAlgorithm::Fastest,
        ScanAlgorithm::LadnerFischer,
        ScanAlgorithm::Sequential,
    ] {
        let sq32 = parallel::filter_sqrt(Device::Cpu, &model, &z32, alg).unwrap();
        let (em, ec, el) = errs(&sq32.cast(), &want);
        eprintln!("square-root f32 {alg:?}: means {em:.2e}, covariances {ec:.2e}, log-likelihoods {el:.2e} (sequential f32: {el_seq:.2e})");
        assert!(
            em < 1e-3 && ec < 1e-3,
            "square-root f32 {alg:?}: {em:e} {ec:e}"
        );
        assert!(
            el <= el_seq,
            "square-root f32 {alg:?}: log-likelihoods {el:e} vs {el_seq:e}"
        );
    }
}

/// The smoother on the same ill-conditioned model: in f32 within 1e-3 of the f64 RTS
/// smoother in means and covariances, where the standard parallel RTS smoother's filter
/// already fails.
#[test]
fn sqrt_smoother_keeps_f32_where_the_standard_form_fails() {
    let model = ill_conditioned(11, [1e3, 1.0, 1e-3], 1e-4, 0.99);
    let t = 200;
    let z = kestrel::sim::simulate(&model, 1, t, 12, 0.1)
        .unwrap()
        .measurements;
    let want = kestrel::smooth_filtered(&model, &reference(&model, &z)).unwrap();
    let z32: Measurements<f32> = z.cast();
    assert!(matches!(
        parallel::smooth_rts(Device::Cpu, &model, &z32, ScanAlgorithm::Fastest),
        Err(kestrel::Error::NotPositiveDefinite { .. })
    ));
    for alg in [ScanAlgorithm::Fastest, ScanAlgorithm::LadnerFischer] {
        let (_, s32) = parallel::smooth_sqrt(Device::Cpu, &model, &z32, alg).unwrap();
        let (sm, sc) = smooth_errs(&s32.cast(), &want);
        eprintln!("square-root smoother f32 {alg:?}: means {sm:.2e}, covariances {sc:.2e}");
        assert!(
            sm < 1e-3 && sc < 1e-3,
            "square-root smoother f32 {alg:?}: {sm:e} {sc:e}"
        );
    }
}
