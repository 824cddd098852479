//! The parallel filter and the two-filter smoother with every track's time steps split
//! over several GPUs (`parallel::cuda::filter_on_devices`, `two_filter_on_devices`,
//! `Device::AllCuda`): equal to the one-GPU run and to the sequential CPU reference on
//! random time-varying models with missing measurements, f64 and f32 (every output is
//! poisoned with NaN before each run, and a NaN left is an error of the run).
//!
//! The split runs on a single GPU too, with the same ordinal several times (`[0, 0]`):
//! the shares then run one after the other on that device and everything else (the
//! share totals crossing through the host, the carries combined in, the sweeps) is the
//! same. Those tests skip with a reason without a GPU and fail with
//! `KESTREL_REQUIRE_GPU=1`; the tests on two distinct GPUs skip on a host with fewer and
//! fail with `KESTREL_REQUIRE_GPU=2`.
//!
//! The two-filter smoother split by direction (`time_two_filter_by_direction`: forward
//! filter on one GPU, backward on another, the backward chunk totals copied over) runs
//! the one-GPU kernels over the same chunks and must equal one GPU bit for bit.
//!
//! Tolerances of the time split: f64 results within 1e-8 (per-step normwise relative) of the CPU reference
//! and 1e-9 of the one-GPU run: the split only re-associates the scan (other chunk and
//! share boundaries), which in f64 moves results by ~1e-13 on these stable models, while an
//! indexing or carry error moves them by O(1). f32 within 1e-3 of the reference (as the
//! one-GPU tests: f32 rounding through 10^3-10^5 combines) and of the one-GPU run.

mod common;

use kestrel::parallel::{self, cuda, PaperModel};
use kestrel::{
    Device, Estimates, FilterMethod, FilterOptions, Measurements, ScanAlgorithm, SmoothMethod,
};

fn gpu_or_skip(test: &str) -> bool {
    match cuda::available(0) {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("KESTREL_REQUIRE_GPU").is_ok_and(|v| v == "1" || v == "2") {
                panic!("{test}: KESTREL_REQUIRE_GPU is set but there is no GPU: {why}");
            }
            eprintln!("skipped {test}: no GPU ({why})");
            false
        }
    }
}

fn two_gpus_or_skip(test: &str) -> bool {
    let n = kestrel::cuda::device_count();
    if n >= 2 {
        return true;
    }
    if std::env::var("KESTREL_REQUIRE_GPU").is_ok_and(|v| v == "2") {
        panic!("{test}: KESTREL_REQUIRE_GPU=2 but this host has {n} usable GPU(s)");
    }
    eprintln!("skipped {test}: needs 2 GPUs, this host has {n}");
    false
}

/// Largest per-step relative difference, with a floor of 1e-3 (NaN is infinite).
fn rel_err(a: &[f64], b: &[f64], per: usize) -> f64 {
    common::rel_err(a, b, per, 1e-3)
}

fn errs(got: &Estimates<f64>, want: &Estimates<f64>) -> f64 {
    let nx = want.nx();
    let mut e = rel_err(got.mean(), want.mean(), nx).max(rel_err(got.cov(), want.cov(), nx * nx));
    match (got.loglik(), want.loglik()) {
        (Some(g), Some(w)) => e = e.max(rel_err(g, w, 1)),
        (None, None) => {}
        _ => panic!("one side has log-likelihoods, the other not"),
    }
    e
}

fn reference(model: &PaperModel, z: &Measurements<f64>) -> (Estimates<f64>, Estimates<f64>) {
    let opts = FilterOptions::default().with_force_general(true);
    let f = kestrel::filter(model, z, &opts).unwrap().filtered;
    let s = kestrel::smooth_filtered(model, &f).unwrap();
    (f, s)
}

/// Split over `ordinals` against one GPU and the CPU reference, f64 and f32.
fn check_split(ordinals: &[usize], nx: usize, ny: usize, t: usize, b: usize, seed: u64) {
    let tag = format!("{ordinals:?} nx={nx} ny={ny} T={t} B={b}");
    let model = PaperModel::new(nx, ny, t, t.min(5000), seed);
    let z = kestrel::sim::simulate(&model, b, t, seed + 1, 0.2)
        .unwrap()
        .measurements;
    let (rf, rs) = reference(&model, &z);
    let alg = ScanAlgorithm::Fastest;
    let one = parallel::filter(Device::Cuda(ordinals[0]), &model, &z, alg).unwrap();
    let f = cuda::filter_on_devices(ordinals, &model, &z, alg).unwrap();
    let (ec, eg) = (errs(&f, &rf), errs(&f, &one));
    assert!(
        ec < 1e-8 && eg < 1e-9,
        "f64 filter {tag}: {ec:e} from the CPU, {eg:e} from one GPU"
    );
    let (f1, s1) = parallel::smooth_two_filter(Device::Cuda(ordinals[0]), &model, &z, alg).unwrap();
    let (f2, s2) = cuda::two_filter_on_devices(ordinals, &model, &z, alg).unwrap();
    let (ec, eg) = (errs(&s2, &rs), errs(&s2, &s1));
    assert!(
        ec < 1e-8 && eg < 1e-9,
        "f64 two-filter {tag}: {ec:e} from the CPU, {eg:e} from one GPU"
    );
    assert!(errs(&f2, &f1) < 1e-9, "f64 two-filter's filter {tag}");
    let z32: Measurements<f32> = z.cast();
    let one32 = parallel::filter(Device::Cuda(ordinals[0]), &model, &z32, alg).unwrap();
    let f32s = cuda::filter_on_devices(ordinals, &model, &z32, alg).unwrap();
    let (ec, eg) = (errs(&f32s.cast(), &rf), errs(&f32s.cast(), &one32.cast()));
    eprintln!("{tag}: f32 filter {ec:.2e} from the CPU, {eg:.2e} from one GPU");
    assert!(ec < 1e-3 && eg < 1e-3, "f32 filter {tag}: {ec:e} {eg:e}");
    let (_, s32) = cuda::two_filter_on_devices(ordinals, &model, &z32, alg).unwrap();
    let (_, s132) =
        parallel::smooth_two_filter(Device::Cuda(ordinals[0]), &model, &z32, alg).unwrap();
    let (ec, eg) = (errs(&s32.cast(), &rs), errs(&s32.cast(), &s132.cast()));
    eprintln!("{tag}: f32 two-filter {ec:.2e} from the CPU, {eg:.2e} from one GPU");
    assert!(
        ec < 1e-3 && eg < 1e-3,
        "f32 two-filter {tag}: {ec:e} {eg:e}"
    );
}

const CASES: [(usize, usize, usize, usize); 6] = [
    // Fewer steps than shares: as many shares as steps.
    (4, 2, 1, 1),
    (4, 2, 2, 1),
    (4, 2, 1001, 1),
    (4, 2, 4097, 3),
    (3, 1, 300, 2),
    (4, 2, 100_000, 1),
];

#[test]
fn split_on_one_gpu_equals_one_gpu_and_the_cpu() {
    if !gpu_or_skip("split_on_one_gpu_equals_one_gpu_and_the_cpu") {
        return;
    }
    for (i, &(nx, ny, t, b)) in CASES.iter().enumerate() {
        check_split(&[0, 0], nx, ny, t, b, 40 + i as u64);
    }
    // Three shares: a middle share carries from both sides.
    check_split(&[0, 0, 0], 4, 2, 3001, 2, 60);
    check_split(&[0, 0, 0, 0, 0], 3, 2, 7, 1, 61);
}

#[test]
fn split_in_groups_of_tracks_equals_one_gpu_and_the_cpu() {
    if !gpu_or_skip("split_in_groups_of_tracks_equals_one_gpu_and_the_cpu") {
        return;
    }
    // 7 tracks in groups of at most 3 (the last group of 1), each group split in two;
    // the only test here that sets the variable, and it reads the same value throughout.
    std::env::set_var("KESTREL_PAR_GROUP", "3");
    check_split(&[0, 0], 4, 2, 501, 7, 62);
    check_by_direction([0, 0], 4, 2, 501, 7, 63);
    std::env::remove_var("KESTREL_PAR_GROUP");
}

/// The smoother split by direction (forward filter on `ordinals[0]`, backward on
/// `ordinals[1]`) runs the one-GPU kernels over the same chunks: equal bit for bit.
fn check_by_direction(ordinals: [usize; 2], nx: usize, ny: usize, t: usize, b: usize, seed: u64) {
    let tag = format!("{ordinals:?} nx={nx} ny={ny} T={t} B={b}");
    let model = PaperModel::new(nx, ny, t, t.min(5000), seed);
    let z = kestrel::sim::simulate(&model, b, t, seed + 1, 0.2)
        .unwrap()
        .measurements;
    let (_, rs) = reference(&model, &z);
    let alg = ScanAlgorithm::Fastest;
    let (f1, s1) = parallel::smooth_two_filter(Device::Cuda(ordinals[0]), &model, &z, alg).unwrap();
    let (_, (f2, s2)) =
        cuda::time_two_filter_by_direction(ordinals, &model, &z, alg, 0, 1).unwrap();
    let s2 = s2.expect("smoothed estimates");
    assert_eq!(f1.mean(), f2.mean(), "{tag}: filtered means");
    assert_eq!(f1.cov(), f2.cov(), "{tag}: filtered covariances");
    assert_eq!(f1.loglik(), f2.loglik(), "{tag}: log-likelihoods");
    assert_eq!(s1.mean(), s2.mean(), "{tag}: smoothed means");
    assert_eq!(s1.cov(), s2.cov(), "{tag}: smoothed covariances");
    assert!(
        errs(&s2, &rs) < 1e-8,
        "{tag}: from the CPU {:e}",
        errs(&s2, &rs)
    );
    let z32: Measurements<f32> = z.cast();
    let (_, s1) =
        parallel::smooth_two_filter(Device::Cuda(ordinals[0]), &model, &z32, alg).unwrap();
    let (_, (_, s2)) =
        cuda::time_two_filter_by_direction(ordinals, &model, &z32, alg, 0, 1).unwrap();
    let s2 = s2.expect("smoothed estimates");
    assert_eq!(s1.mean(), s2.mean(), "{tag} f32: smoothed means");
    assert_eq!(s1.cov(), s2.cov(), "{tag} f32: smoothed covariances");
}

#[test]
fn by_direction_on_one_gpu_equals_one_gpu() {
    if !gpu_or_skip("by_direction_on_one_gpu_equals_one_gpu") {
        return;
    }
    for (i, &(nx, ny, t, b)) in CASES.iter().enumerate() {
        check_by_direction([0, 0], nx, ny, t, b, 20 + i as u64);
    }
}

#[test]
fn split_errors_name_the_problem() {
    if !gpu_or_skip("split_errors_name_the_problem") {
        return;
    }
    let model = PaperModel::new(4, 2, 50, 50, 70);
    let z = kestrel::sim::simulate(&model, 1, 50, 71, 0.0)
        .unwrap()
        .measurements;
    let e = cuda::filter_on_devices(&[], &model, &z, ScanAlgorithm::Fastest).unwrap_err();
    assert!(e.to_string().contains("no CUDA device"), "{e}");
    let e = cuda::time_on_devices(
        &[0, 0],
        &model,
        &z,
        cuda::Method::Rts,
        ScanAlgorithm::Fastest,
        0,
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("not split"), "{e}");
}

#[test]
fn split_over_two_gpus_equals_one_gpu_and_the_cpu() {
    if !two_gpus_or_skip("split_over_two_gpus_equals_one_gpu_and_the_cpu") {
        return;
    }
    let n = kestrel::cuda::device_count();
    let all: Vec<usize> = (0..n).collect();
    for (i, &(nx, ny, t, b)) in CASES.iter().enumerate() {
        check_split(&all, nx, ny, t, b, 80 + i as u64);
    }
    // Another order, and a device holding two shares.
    check_split(&[1, 0], 4, 2, 2001, 2, 90);
    check_split(&[0, 1, 0], 4, 2, 2001, 1, 91);
    // Forward filter on one GPU, backward on the other (the totals cross peer to peer).
    for (i, &(nx, ny, t, b)) in CASES.iter().enumerate() {
        check_by_direction([0, 1], nx, ny, t, b, 100 + i as u64);
    }
    check_by_direction([1, 0], 4, 2, 3001, 2, 110);
}

#[test]
fn all_gpus_device_splits_the_parallel_methods() {
    if !two_gpus_or_skip("all_gpus_device_splits_the_parallel_methods") {
        return;
    }
    let t = 20_000;
    let model = PaperModel::new(4, 2, t, 1000, 95);
    let z = kestrel::sim::simulate(&model, 1, t, 96, 0.1)
        .unwrap()
        .measurements;
    let (rf, rs) = reference(&model, &z);
    let alg = ScanAlgorithm::Fastest;
    let f = kestrel::filter_on(
        Device::AllCuda,
        &model,
        &z,
        FilterMethod::Parallel(alg),
        &FilterOptions::default(),
    )
    .unwrap()
    .filtered;
    assert!(errs(&f, &rf) < 1e-8, "AllCuda filter: {:e}", errs(&f, &rf));
    let s = kestrel::smooth_on(Device::AllCuda, &model, &z, SmoothMethod::TwoFilter(alg)).unwrap();
    assert!(errs(&s.smoothed, &rs) < 1e-8, "AllCuda two-filter");
    // The RTS smoother is not split: it runs on the first GPU.
    let r =
        kestrel::smooth_on(Device::AllCuda, &model, &z, SmoothMethod::ParallelRts(alg)).unwrap();
    assert!(errs(&r.smoothed, &rs) < 1e-8, "AllCuda RTS");
}
