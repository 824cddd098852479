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
#[path = "nonlinear_kernels_on_cpu.rs"]
mod nonlinear_kernels_on_cpu;
#[path = "nonlinear_models.rs"]
mod nonlinear_models;
#[path = "nonlinear_reference.rs"]
mod nonlinear_reference;
#[path = "nonlinear_sim.rs"]
mod nonlinear_sim;
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
#[path = "parallel_sqrt_kernels_on_cpu.rs"]
mod parallel_sqrt_kernels_on_cpu;
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
#[path = "tracking_jpda_kernels_on_cpu.rs"]
mod tracking_jpda_kernels_on_cpu;
#[path = "tracking_kernels_on_cpu.rs"]
mod tracking_kernels_on_cpu;
#[path = "tracking_metrics.rs"]
mod tracking_metrics;
#[path = "tracking_nonlinear.rs"]
mod tracking_nonlinear;
#[path = "tracking_state.rs"]
mod tracking_state;
#[path = "tracking_tracker.rs"]
mod tracking_tracker;

#[path = "suite_guard.rs"]
mod suite_guard;

/// Every file of `tests/` is a module of one of this crate's test executables.
#[test]
fn every_test_file_is_compiled() {
    suite_guard::every_file_is_compiled(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
        include_str!("../Cargo.toml"),
        &["cpu.rs", "gpu.rs"],
    );
}
