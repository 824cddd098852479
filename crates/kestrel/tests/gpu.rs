//! The library's GPU tests, as one test executable (the one `stage-gpu` carries to
//! the GPU machine): each skips with a printed reason without a GPU and fails instead
//! when `KESTREL_REQUIRE_GPU=1`. The two files that set `KESTREL_PAR_GROUP` stay
//! executables of their own, so that no other test reads the variable meanwhile.

// Each file declares the helper modules it uses (tests/common, emulation, ...), as it
// did when it was an executable of its own: a helper is compiled once per file using it.
#![allow(clippy::duplicate_mod)]

#[path = "gpu_fault.rs"]
mod gpu_fault;
#[path = "gpu_filter.rs"]
mod gpu_filter;
#[path = "gpu_inputs.rs"]
mod gpu_inputs;
#[path = "gpu_multi.rs"]
mod gpu_multi;
#[path = "gpu_oom.rs"]
mod gpu_oom;
#[path = "gpu_tracker.rs"]
mod gpu_tracker;
#[path = "gpu_transfer.rs"]
mod gpu_transfer;
#[path = "hmm_gpu.rs"]
mod hmm_gpu;
#[path = "likelihood_gpu.rs"]
mod likelihood_gpu;
#[path = "nonlinear_gpu.rs"]
mod nonlinear_gpu;
#[path = "parallel_sqrt_gpu.rs"]
mod parallel_sqrt_gpu;
#[path = "particle_gpu.rs"]
mod particle_gpu;
#[path = "particle_resample_gpu.rs"]
mod particle_resample_gpu;
#[path = "tbd_gpu.rs"]
mod tbd_gpu;
#[path = "tbd_switch_gpu.rs"]
mod tbd_switch_gpu;
#[path = "time_varying_gpu.rs"]
mod time_varying_gpu;
#[path = "tracking_assign_gpu.rs"]
mod tracking_assign_gpu;
#[path = "tracking_gpu.rs"]
mod tracking_gpu;
