//! Several GPUs of one host (`Device::AllCuda`, `kalman::cuda::*_on_devices`): the batch
//! split by tracks over the devices gives the one-GPU result bit for bit, and output
//! selection on the GPU keeps exactly what was asked. The two-GPU tests skip with a
//! reason on a host with fewer than 2 GPUs and fail instead with KESTREL_REQUIRE_GPU=2.

mod gpu_common;

use gpu_common::*;
use kestrel::data::{CovOutput, Outputs};
use kestrel::kalman::cuda::{self, CudaOptions};
use kestrel::{Device, FilterMethod, FilterOptions};

fn two_gpus_or_skip(test: &str) -> bool {
    let n = kestrel::cuda::device_count();
    if n >= 2 {
        return true;
    }
    if std::env::var("KESTREL_REQUIRE_GPU")
        .map(|v| v == "2")
        .unwrap_or(false)
    {
        panic!("{test}: KESTREL_REQUIRE_GPU=2 but this host has {n} usable GPU(s)");
    }
    eprintln!("skipped {test}: needs 2 GPUs, this host has {n}");
    false
}

fn poisoned() -> CudaOptions {
    CudaOptions::default().with_poison(true)
}

#[test]
fn tracks_split_over_two_gpus_equal_one_gpu_bit_for_bit() {
    if !two_gpus_or_skip("tracks_split_over_two_gpus_equal_one_gpu_bit_for_bit") {
        return;
    }
    let m = random_model(4, 2, 11);
    // An odd number of tracks: the shares differ by one.
    let z = random_measurements::<f32>(&m, 1001, 37, 5, 0.1);
    let opts = FilterOptions::default();
    let one = cuda::filter_with(0, &m, &z, &opts, &poisoned()).expect("one GPU");
    let n = kestrel::cuda::device_count();
    let all: Vec<usize> = (0..n).collect();
    let split = cuda::filter_on_devices(&all, &m, &z, &opts, &poisoned()).expect("all GPUs");
    assert_eq!(one.filtered.mean(), split.filtered.mean());
    assert_eq!(one.filtered.cov(), split.filtered.cov());
    assert_eq!(one.filtered.loglik(), split.filtered.loglik());
    // Chunked on each device as well (a budget of a few tracks' worth).
    let small = poisoned().with_memory_budget(Some(64 * 37 * 40 * 4));
    let chunked = cuda::filter_on_devices(&all, &m, &z, &opts, &small).expect("chunked");
    assert_eq!(one.filtered.mean(), chunked.filtered.mean());
    assert_eq!(one.filtered.cov(), chunked.filtered.cov());
    let (f1, s1) = cuda::smooth(0, &m, &z, &poisoned()).expect("one GPU smoother");
    let (f2, s2) = cuda::smooth_on_devices(&all, &m, &z, &poisoned()).expect("all GPUs");
    assert_eq!(f1.mean(), f2.mean());
    assert_eq!(f1.loglik(), f2.loglik());
    assert_eq!(s1.mean(), s2.mean());
    assert_eq!(s1.cov(), s2.cov());
    // Through the device-generic entry point.
    let d = kestrel::filter_on(Device::AllCuda, &m, &z, FilterMethod::Sequential, &opts)
        .expect("AllCuda");
    assert_eq!(one.filtered.mean(), d.filtered.mean());
}

#[test]
fn gpu_output_selection_keeps_what_was_asked() {
    if !gpu_or_skip("gpu_output_selection_keeps_what_was_asked") {
        return;
    }
    let m = random_model(4, 2, 12);
    let z = random_measurements::<f32>(&m, 300, 20, 6, 0.1);
    let full = cuda::filter_with(0, &m, &z, &FilterOptions::default(), &poisoned())
        .expect("GPU")
        .filtered;
    for list in ["mean,loglik", "diag", "mean,cov", "loglik"] {
        let o = Outputs::parse(list).expect("a valid list");
        let opts = FilterOptions::default().with_outputs(o);
        let got = cuda::filter_with(0, &m, &z, &opts, &poisoned())
            .expect("GPU")
            .filtered;
        let mut want = full.clone();
        o.apply(&mut want);
        assert_eq!(got.mean(), want.mean(), "{list}");
        assert_eq!(got.cov(), want.cov(), "{list}");
        assert_eq!(got.loglik(), want.loglik(), "{list}");
        assert_eq!(got.cov_output(), o.cov, "{list}");
        if o.cov == CovOutput::None {
            assert!(got.cov().is_empty());
        }
    }
}
