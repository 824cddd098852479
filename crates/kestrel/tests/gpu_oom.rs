//! Device out-of-memory (issue 42): a request bigger than the GPU is a clear error
//! naming the device (an input error, exit status 2 on the command line), not a crash,
//! and the process stays usable: the next call on the same device works. Skips without
//! a GPU; fails with KESTREL_REQUIRE_GPU=1.

mod gpu_common;

use kestrel::particle::{load_pf_model, particle_filter_on, PfOptions};
use kestrel::{Device, Measurements};
use std::path::Path;

#[test]
fn a_request_bigger_than_the_device_is_a_clear_error_and_the_next_call_works() {
    if !gpu_common::gpu_or_skip("gpu_oom") {
        return;
    }
    let model = load_pf_model(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/range-only.toml"),
    )
    .expect("the example model");
    let z = Measurements::<f64>::new(1, 3, 2, vec![100.0; 6]).unwrap();
    // 2^31 particles of 4 f64 components, twice (particles and their propagation),
    // plus weights: about 150 GB, more than any GPU of today holds.
    let huge = PfOptions::new(kestrel::particle::MAX_PARTICLES);
    let Err(e) = particle_filter_on::<f64>(Device::Cuda(0), &model, &z, &huge) else {
        panic!("a request bigger than the device must fail");
    };
    let msg = e.to_string();
    assert!(msg.contains("cuda:0"), "the device is not named: {msg}");
    assert!(msg.contains("GB"), "the sizes are not given: {msg}");
    assert!(
        e.is_bad_input(),
        "the request's fault, exit status 2: {msg}"
    );
    assert!(!msg.contains('\n'), "one line: {msg}");
    // The next call on the same device works, twice (the context is intact).
    for _ in 0..2 {
        let small = PfOptions::new(1000);
        let out = particle_filter_on::<f64>(Device::Cuda(0), &model, &z, &small)
            .expect("the next call works after an out-of-memory error");
        assert!(out.estimates.mean().iter().all(|v| v.is_finite()));
    }
}
