//! Kernel faults (issue 42): a kernel that faults gives one clear error line naming the
//! device; the driver then takes no more work on that device from the process, so every
//! later GPU call is refused at once with the same cause, `auto` chooses the CPU, and CPU
//! calls work and give the results the GPU gave before the fault. A fault ends the
//! device for the whole process, so the test runs itself again as a child process of its
//! own (the other GPU tests of this executable run beside it in threads). Skips without
//! a GPU; fails with KESTREL_REQUIRE_GPU=1.

mod gpu_common;

use gpu_common::*;
use kestrel::kalman::cuda::{self, CudaOptions};
use kestrel::{Device, FilterOptions};

const CHILD: &str = "KESTREL_FAULT_CHILD";
const NAME: &str = "gpu_fault::a_kernel_fault_names_the_device_and_the_process_goes_on";

#[test]
fn a_kernel_fault_names_the_device_and_the_process_goes_on() {
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
    let before = cuda::filter_with(0, &m, &z, &FilterOptions::default(), &opts)
        .expect("the GPU filter before the fault")
        .filtered;

    let Err(e) = kestrel::cuda::provoke_kernel_fault(0) else {
        panic!("a write through an invalid pointer must fail");
    };
    let msg = e.to_string();
    eprintln!("the fault: {msg}");
    assert!(msg.contains("cuda:0"), "the device is not named: {msg}");
    assert!(
        msg.contains("kernel fault"),
        "the cause is not named: {msg}"
    );
    assert!(
        msg.contains("CUDA_ERROR_"),
        "the driver's code is missing: {msg}"
    );
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(!e.is_bad_input(), "a fault is not the input's: {msg}");

    // Every later call on the device: refused at once, naming the device and the fault.
    for _ in 0..2 {
        let t = std::time::Instant::now();
        let Err(e) = cuda::filter_with(0, &m, &z, &FilterOptions::default(), &opts) else {
            panic!("the driver takes no more work on a faulted device");
        };
        let msg = e.to_string();
        eprintln!("a later call: {msg}");
        assert!(
            msg.contains("cuda:0") && msg.contains("kernel fault earlier"),
            "{msg}"
        );
        assert!(msg.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
        assert!(t.elapsed().as_secs_f64() < 1.0, "refused at once");
    }
    // The process goes on: auto chooses the CPU, which gives the GPU's results.
    let auto = Device::auto();
    assert_eq!(auto.device, Device::Cpu);
    assert!(auto
        .why_not_gpu
        .unwrap_or_default()
        .contains("kernel fault"));
    let after = kestrel::filter_on(
        auto.device,
        &m,
        &z,
        kestrel::FilterMethod::Sequential,
        &FilterOptions::default(),
    )
    .expect("the CPU after the fault")
    .filtered;
    assert_close("after the fault", &after, &before, 1e-9);
}
