//! The parallel filter and smoothers on the GPU equal the sequential CPU reference on
//! random time-varying models with missing measurements, for every GPU scan algorithm.
//! Skips without a GPU; `KESTREL_REQUIRE_GPU=1` makes a missing GPU a failure.

use kestrel::parallel::{self, PaperModel};
use kestrel::{Device, Estimates, FilterOptions, Measurements, ScanAlgorithm};

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

/// Largest per-step relative difference `||a_k - b_k||_inf / max(||b_k||_inf, 1e-3)`.
fn rel_err(a: &[f64], b: &[f64], per: usize) -> f64 {
    a.chunks(per)
        .zip(b.chunks(per))
        .map(|(x, y)| {
            let s = y.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-3);
            x.iter()
                .zip(y)
                .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()))
                / s
        })
        .fold(0.0, f64::max)
}

fn errs(got: &Estimates<f64>, want: &Estimates<f64>) -> f64 {
    let mut e = rel_err(got.mean(), want.mean(), want.nx()).max(rel_err(
        got.cov(),
        want.cov(),
        want.nx() * want.nx(),
    ));
    if let (Some(g), Some(w)) = (&got.loglik(), &want.loglik()) {
        e = e.max(rel_err(g, w, 1));
    }
    e
}

fn reference(model: &PaperModel, z: &Measurements<f64>) -> (Estimates<f64>, Estimates<f64>) {
    let opts = FilterOptions::default().with_force_general(true);
    let f = kestrel::filter(model, z, &opts).unwrap().filtered;
    let s = kestrel::smooth_filtered(model, &f).unwrap();
    (f, s)
}

const ALGS: [ScanAlgorithm; 7] = [
    ScanAlgorithm::Fastest,
    ScanAlgorithm::LadnerFischer,
    ScanAlgorithm::Blelloch,
    ScanAlgorithm::HillisSteele,
    ScanAlgorithm::Sengupta(1),
    ScanAlgorithm::Sengupta(64),
    ScanAlgorithm::Sequential,
];

#[test]
fn gpu_parallel_methods_equal_the_cpu_reference() {
    if !gpu_or_skip() {
        return;
    }
    let cases = [
        (4, 2, 1, 1),
        (4, 2, 2, 1),
        (4, 2, 17, 2),
        (4, 2, 1000, 1),
        (4, 2, 4097, 1),
        (3, 1, 300, 1),
    ];
    for (case, &(nx, ny, t, b)) in cases.iter().enumerate() {
        let model = PaperModel::new(nx, ny, t, t, 100 + case as u64);
        let z = kestrel::sim::simulate(&model, b, t, case as u64, 0.2)
            .unwrap()
            .measurements;
        let (rf, rs) = reference(&model, &z);
        for alg in ALGS {
            let tag = format!("nx={nx} ny={ny} T={t} B={b} {alg:?}");
            let f = parallel::filter(Device::Cuda(0), &model, &z, alg).unwrap();
            let e = errs(&f, &rf);
            assert!(e < 1e-8, "f64 filter {tag}: {e:e}");
            let (f2, s) = parallel::smooth_rts(Device::Cuda(0), &model, &z, alg).unwrap();
            let (ef, es) = (errs(&f2, &rf), errs(&s, &rs));
            assert!(ef < 1e-8 && es < 1e-8, "f64 rts {tag}: {ef:e} {es:e}");
            let (f3, s3) = parallel::smooth_two_filter(Device::Cuda(0), &model, &z, alg).unwrap();
            let (ef, es) = (errs(&f3, &rf), errs(&s3, &rs));
            assert!(
                ef < 1e-8 && es < 1e-8,
                "f64 two-filter {tag}: {ef:e} {es:e}"
            );
            let z32: Measurements<f32> = z.cast();
            let (f4, s4) = parallel::smooth_rts(Device::Cuda(0), &model, &z32, alg).unwrap();
            let (ef, es) = (errs(&f4.cast(), &rf), errs(&s4.cast(), &rs));
            eprintln!("{tag}: f32 rts errors {ef:.2e} {es:.2e}");
            assert!(ef < 1e-3 && es < 1e-3, "f32 rts {tag}: {ef:e} {es:e}");
        }
    }
}

#[test]
fn gpu_long_sequence_and_errors() {
    if !gpu_or_skip() {
        return;
    }
    let t = 100_000;
    let model = PaperModel::new(4, 2, t, 1000, 9);
    let z = kestrel::sim::simulate(&model, 1, t, 3, 0.05)
        .unwrap()
        .measurements;
    let (rf, rs) = reference(&model, &z);
    let (f, s) = parallel::smooth_rts(Device::Cuda(0), &model, &z, ScanAlgorithm::Fastest).unwrap();
    let (ef, es) = (errs(&f, &rf), errs(&s, &rs));
    assert!(ef < 1e-8 && es < 1e-8, "f64 T=1e5: {ef:e} {es:e}");
    let (f, s) = parallel::smooth_rts(
        Device::Cuda(0),
        &model,
        &z.cast::<f32>(),
        ScanAlgorithm::Fastest,
    )
    .unwrap();
    eprintln!(
        "f32 T=1e5: filter error {:.2e}, rts error {:.2e}",
        errs(&f.cast(), &rf),
        errs(&s.cast(), &rs)
    );
}

/// Many tracks in one launch (the track as the grid's second dimension), split into groups
/// of at most 5 tracks by `KESTREL_PAR_GROUP` so that the grouping is exercised too:
/// filter, RTS and two-filter smoother of every track equal the reference, both
/// precisions, time-varying model, missing measurements.
#[test]
fn gpu_batched_tracks_equal_the_cpu_reference() {
    if !gpu_or_skip() {
        return;
    }
    for (case, &(nx, ny, t, b, group)) in [(4, 2, 515, 37, "5"), (3, 2, 64, 300, "65535")]
        .iter()
        .enumerate()
    {
        std::env::set_var("KESTREL_PAR_GROUP", group);
        let model = PaperModel::new(nx, ny, t, t, 300 + case as u64);
        let z = kestrel::sim::simulate(&model, b, t, 40 + case as u64, 0.2)
            .unwrap()
            .measurements;
        let (rf, rs) = reference(&model, &z);
        for alg in [
            ScanAlgorithm::Fastest,
            ScanAlgorithm::LadnerFischer,
            ScanAlgorithm::Blelloch,
            ScanAlgorithm::HillisSteele,
            ScanAlgorithm::Sengupta(4),
            ScanAlgorithm::Sequential,
        ] {
            let tag = format!("nx={nx} ny={ny} T={t} B={b} group={group} {alg:?}");
            let (f, s) = parallel::smooth_rts(Device::Cuda(0), &model, &z, alg).unwrap();
            let (ef, es) = (errs(&f, &rf), errs(&s, &rs));
            assert!(ef < 1e-8 && es < 1e-8, "f64 rts {tag}: {ef:e} {es:e}");
            let (f, s) = parallel::smooth_two_filter(Device::Cuda(0), &model, &z, alg).unwrap();
            let (ef, es) = (errs(&f, &rf), errs(&s, &rs));
            assert!(
                ef < 1e-8 && es < 1e-8,
                "f64 two-filter {tag}: {ef:e} {es:e}"
            );
            let z32: Measurements<f32> = z.cast();
            let f = parallel::filter(Device::Cuda(0), &model, &z32, alg).unwrap();
            let ef = errs(&f.cast(), &rf);
            assert!(ef < 1e-3, "f32 filter {tag}: {ef:e}");
            let (_, s) = parallel::smooth_two_filter(Device::Cuda(0), &model, &z32, alg).unwrap();
            let es = errs(&s.cast(), &rs);
            assert!(es < 1e-3, "f32 two-filter {tag}: {es:e}");
        }
        std::env::remove_var("KESTREL_PAR_GROUP");
    }
}

/// The retrodiction scan on the GPU over the CPU's filtered estimates equals the RTS
/// smoother, covariances included, for a batch of tracks in both precisions; with
/// `means_only` there are no covariances and the means are unchanged.
#[test]
fn gpu_retrodiction_equals_the_rts_smoother() {
    if !gpu_or_skip() {
        return;
    }
    let (nx, ny, t, b) = (4, 2, 777, 9);
    let model = PaperModel::new(nx, ny, t, t, 77);
    let z = kestrel::sim::simulate(&model, b, t, 78, 0.2)
        .unwrap()
        .measurements;
    let (rf, rs) = reference(&model, &z);
    for alg in [
        ScanAlgorithm::Fastest,
        ScanAlgorithm::LadnerFischer,
        ScanAlgorithm::Blelloch,
        ScanAlgorithm::Sengupta(8),
    ] {
        let s = parallel::retrodict(
            Device::Cuda(0),
            &model,
            &rf,
            alg,
            parallel::Moments::MeansAndCovariances,
        )
        .unwrap();
        let e = errs(&s, &rs);
        assert!(e < 1e-8, "f64 retrodiction {alg:?}: {e:e}");
        let s32 = parallel::retrodict(
            Device::Cuda(0),
            &model,
            &rf.cast::<f32>(),
            alg,
            parallel::Moments::MeansAndCovariances,
        )
        .unwrap();
        let e = errs(&s32.cast(), &rs);
        assert!(e < 1e-3, "f32 retrodiction {alg:?}: {e:e}");
        let m = parallel::retrodict(
            Device::Cuda(0),
            &model,
            &rf,
            alg,
            parallel::Moments::MeansOnly,
        )
        .unwrap();
        assert!(m.cov().is_empty(), "means only: no covariances");
        assert!(rel_err(m.mean(), rs.mean(), nx) < 1e-8, "means only: means");
    }
}
