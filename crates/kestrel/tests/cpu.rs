//! The library's tests that need no GPU, as one test executable: each file of
//! `tests/` is a module here (one link and one copy of the library's generic code for
//! all of them, where one executable per file made CI's build several times longer).

// Each file declares the helper modules it uses (tests/common, emulation, ...), as it
// did when it was an executable of its own: a helper is compiled once per file using it.
#![allow(clippy::duplicate_mod)]

#[path = "gpu_kernels_on_cpu.rs"]
mod gpu_kernels_on_cpu;
#[path = "hmm_kernels_on_cpu.rs"]
mod hmm_kernels_on_cpu;
#[path = "hmm_reference.rs"]
mod hmm_reference;
#[path = "io_fuzz.rs"]
mod io_fuzz;
#[path = "kalman_consistency.rs"]
mod kalman_consistency;
#[path = "kalman_inputs.rs"]
mod kalman_inputs;
#[path = "kalman_properties.rs"]
mod kalman_properties;
#[path = "kalman_reference.rs"]
mod kalman_reference;
#[path = "kalman_state.rs"]
mod kalman_state;
#[path = "kalman_tracker_on_cpu.rs"]
mod kalman_tracker_on_cpu;
#[path = "lib_surface.rs"]
mod lib_surface;
#[path = "likelihood_kernels_on_cpu.rs"]
mod likelihood_kernels_on_cpu;
#[path = "likelihood_reference.rs"]
mod likelihood_reference;
#[path = "likelihood_window.rs"]
mod likelihood_window;
#[path = "nonlinear_reference.rs"]
mod nonlinear_reference;
#[path = "parallel_filters.rs"]
mod parallel_filters;
#[path = "parallel_kernels_on_cpu.rs"]
mod parallel_kernels_on_cpu;
#[path = "parallel_operators.rs"]
mod parallel_operators;
#[path = "parallel_seq_kernels_on_cpu.rs"]
mod parallel_seq_kernels_on_cpu;
#[path = "parallel_split_on_cpu.rs"]
mod parallel_split_on_cpu;
#[path = "parallel_sqrt.rs"]
mod parallel_sqrt;
#[path = "particle_filter.rs"]
mod particle_filter;
#[path = "particle_kernels_on_cpu.rs"]
mod particle_kernels_on_cpu;
#[path = "particle_models.rs"]
mod particle_models;
#[path = "particle_resample.rs"]
mod particle_resample;
#[path = "particle_resample_kernels_on_cpu.rs"]
mod particle_resample_kernels_on_cpu;
#[path = "tbd_detection.rs"]
mod tbd_detection;
#[path = "tbd_kernels_on_cpu.rs"]
mod tbd_kernels_on_cpu;
#[path = "tbd_reference.rs"]
mod tbd_reference;
#[path = "tbd_switch.rs"]
mod tbd_switch;
#[path = "tbd_switch_kernels_on_cpu.rs"]
mod tbd_switch_kernels_on_cpu;
#[path = "time_varying.rs"]
mod time_varying;
#[path = "tracking_assign.rs"]
mod tracking_assign;
#[path = "tracking_assign_kernels_on_cpu.rs"]
mod tracking_assign_kernels_on_cpu;
#[path = "tracking_kernels_on_cpu.rs"]
mod tracking_kernels_on_cpu;
#[path = "tracking_metrics.rs"]
mod tracking_metrics;
#[path = "tracking_state.rs"]
mod tracking_state;
#[path = "tracking_tracker.rs"]
mod tracking_tracker;

/// Every file of `tests/` is a module of one of the test executables that Cargo.toml
/// declares (automatic test discovery is off, so a file left out would never run).
#[test]
fn every_test_file_is_compiled() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests");
    if !std::path::Path::new(dir).is_dir() {
        eprintln!("skipped: {dir} is not here (a copy of the executable on another machine)");
        return;
    }
    let manifest = include_str!("../Cargo.toml");
    let roots: Vec<String> = SUITE_ROOTS
        .iter()
        .map(|r| std::fs::read_to_string(format!("{dir}/{r}")).expect("a suite root"))
        .collect();
    for entry in std::fs::read_dir(dir).expect("the tests directory") {
        let name = entry
            .expect("an entry")
            .file_name()
            .into_string()
            .expect("UTF-8");
        if !name.ends_with(".rs") || SUITE_ROOTS.contains(&name.as_str()) {
            continue;
        }
        let included = roots
            .iter()
            .any(|r| r.contains(&format!("#[path = \"{name}\"]")))
            || manifest.contains(&format!("path = \"tests/{name}\""));
        assert!(
            included,
            "tests/{name} is in no test executable: add `#[path = \"{name}\"] mod ...;` to one of {SUITE_ROOTS:?} or a [[test]] to Cargo.toml"
        );
    }
}

const SUITE_ROOTS: &[&str] = &["cpu.rs", "gpu.rs"];
