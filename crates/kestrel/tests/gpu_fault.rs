//! Kernel faults (issue 42): a kernel that faults gives one clear error line naming the
//! device, and the process stays usable: the next call on the device resets its context
//! and gives the same results as before the fault. Resetting a device ends every other
//! call on it, so the test runs itself again as a child process of its own (the other
//! GPU tests of this executable run beside it in threads). Skips without a GPU; fails
//! with KESTREL_REQUIRE_GPU=1.

mod gpu_common;

use gpu_common::*;
use kestrel::kalman::cuda::{self, CudaOptions};
use kestrel::particle::{load_pf_model, particle_filter_on, PfOptions};
use kestrel::{Device, FilterOptions, Measurements};
use std::path::Path;

const CHILD: &str = "KESTREL_FAULT_CHILD";
const NAME: &str = "gpu_fault::a_kernel_fault_names_the_device_and_the_next_call_works";

#[test]
fn a_kernel_fault_names_the_device_and_the_next_call_works() {
    if !gpu_or_skip("gpu_fault") {
        return;
    }
    if std::env::var_os(CHILD).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .expect("the test runs itself as a child");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        eprintln!("{text}");
        assert!(out.status.success(), "the child failed");
        assert!(text.contains("1 passed"), "the child ran no test");
        return;
    }
    let m = random_model(4, 2, 42);
    let z = random_measurements::<f64>(&m, 64, 50, 43, 0.1);
    let opts = CudaOptions::default().with_poison(true);
    let run = || cuda::filter_with(0, &m, &z, &FilterOptions::default(), &opts);
    let before = run().expect("the GPU filter before the fault").filtered;

    let pf_model = load_pf_model(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/range-only.toml"),
    )
    .expect("the example model");
    let pz = Measurements::<f64>::new(2, 5, 2, vec![100.0; 20]).unwrap();
    let pf = || particle_filter_on::<f64>(Device::Cuda(0), &pf_model, &pz, &PfOptions::new(2000));
    let pf_before = pf().expect("the particle filter before the fault");

    for round in 0..2 {
        let Err(e) = kestrel::cuda::provoke_kernel_fault(0) else {
            panic!("a write through an invalid pointer must fail");
        };
        let msg = e.to_string();
        eprintln!("round {round}: {msg}");
        assert!(msg.contains("cuda:0"), "the device is not named: {msg}");
        assert!(msg.contains("kernel fault"), "the cause is not named: {msg}");
        assert!(msg.contains("CUDA_ERROR_"), "the driver's code is missing: {msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
        assert!(!e.is_bad_input(), "a fault is not the input's: {msg}");

        let after = run().expect("the GPU filter after the fault").filtered;
        for w in kestrel::error::take_warnings() {
            eprintln!("round {round}: warning: {w}");
        }
        assert_eq!(after.mean(), before.mean(), "means differ after the reset");
        assert_eq!(after.cov(), before.cov(), "covariances differ after the reset");
        let pf_after = pf().expect("the particle filter after the fault");
        assert_eq!(
            pf_after.estimates.mean(),
            pf_before.estimates.mean(),
            "the particle filter differs after the reset"
        );
    }
}
