//! `--device auto` for the batched Kalman filter and smoother: the GPU only where it
//! pays. Small jobs finish on the CPU before a GPU would have opened its context and
//! compiled its kernels (a 10^4 x 50 job: about 0.01 s on 2 cores, 0.09 s on an H100
//! with its kernels cached and 0.7 s without), so the choice compares a model of both.
//!
//! The model, from the measurements in the README and `docs/`:
//! - CPU: `target-steps / (1.2e7 x threads)` for the filter (the SIMD-lane fast path in
//!   f64 reaches 2.2e7-2.9e7 on 2 cores), half that rate with the smoother;
//! - GPU: opening the device (0.15 s, unless this process has it open) + compiling each
//!   kernel module that is not in the disk cache (0.6 s) or loading it (0.01 s) + moving
//!   the data between host and device at the host-to-host rate measured end to end
//!   (8 GB/s: pageable memory, copies and first touch) + the kernel at 2e10
//!   target-steps/s.

use super::source::{source, Part, MAX_NX, MAX_NY};
use crate::device::Device;
use crate::linalg::Real;
use crate::model::Model;

/// A device chosen by [`choose`], with the estimated times that decided it.
#[derive(Clone, Debug)]
pub struct AutoChoice {
    /// The device to run on.
    pub device: Device,
    /// Estimated seconds on the CPU.
    pub cpu_secs: f64,
    /// Estimated seconds on GPU 0 (infinite when there is none), set-up included.
    pub gpu_secs: f64,
    /// Estimated set-up part of `gpu_secs` (opening the device, compiling or loading).
    pub gpu_setup_secs: f64,
    /// Why, in words.
    pub reason: String,
}

/// Chooses the CPU or GPU 0 for `target_steps` target-steps of `model` in precision `T`
/// (`smooth`: filter and RTS smoother), by the model of the module documentation.
pub fn choose<T: Real>(model: &Model, target_steps: u64, smooth: bool) -> AutoChoice {
    let threads = rayon::current_num_threads().max(1) as f64;
    let rate = 1.2e7 * threads / if smooth { 2.0 } else { 1.0 };
    let n = target_steps as f64;
    let cpu_secs = n / rate;
    let cpu = |gpu_secs: f64, setup: f64, why: String| AutoChoice {
        device: Device::Cpu,
        cpu_secs,
        gpu_secs,
        gpu_setup_secs: setup,
        reason: why,
    };
    if let Err(why) = crate::cuda::available_without_opening(0) {
        return cpu(
            f64::INFINITY,
            f64::INFINITY,
            format!("no usable CUDA GPU: {why}"),
        );
    }
    let (nx, ny) = (model.nx(), model.ny());
    if nx > MAX_NX || ny > MAX_NY {
        return cpu(
            f64::INFINITY,
            f64::INFINITY,
            "the model is larger than the GPU kernels are built for".into(),
        );
    }
    let cc = match crate::cuda::compute_capability(0) {
        Ok(cc) => cc,
        Err(e) => return cpu(f64::INFINITY, f64::INFINITY, e.to_string()),
    };
    let parts: &[Part] = if smooth {
        &[Part::Filter, Part::Smooth]
    } else {
        &[Part::Filter]
    };
    let mut setup = if crate::cuda::is_open(0) { 0.0 } else { 0.15 };
    for &part in parts {
        let what = super::source::module_name::<T>(nx, ny, true, part);
        let src = source(nx, ny, T::NAME, Some(model), part);
        setup += if crate::cuda::nvrtc::is_cached(&src, cc, &what) {
            0.01
        } else {
            0.6
        };
    }
    let per = (ny + nx + nx * nx + 1 + if smooth { nx + nx * nx } else { 0 }) as f64;
    let bytes = n * per * std::mem::size_of::<T>() as f64;
    let gpu_secs = setup + bytes / 8e9 + n / 2e10;
    if gpu_secs < cpu_secs {
        AutoChoice {
            device: Device::Cuda(0),
            cpu_secs,
            gpu_secs,
            gpu_setup_secs: setup,
            reason: format!(
                "the GPU is estimated at {gpu_secs:.3} s (set-up {setup:.3} s) against {cpu_secs:.3} s on the CPU"
            ),
        }
    } else {
        cpu(
            gpu_secs,
            setup,
            format!(
                "a job this small is estimated at {cpu_secs:.3} s on the CPU against {gpu_secs:.3} s on the GPU (set-up {setup:.3} s)"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_jobs_stay_on_the_cpu_and_the_reason_is_given() {
        let m = crate::model::constant_velocity(2, 1.0, 0.5, 1.0, 10.0).expect("a valid model");
        let small = choose::<f32>(&m, 10_000 * 50, true);
        assert_eq!(small.device, Device::Cpu, "{}", small.reason);
        assert!(!small.reason.is_empty());
        assert!(small.cpu_secs < 0.1, "{}", small.cpu_secs);
        let big = choose::<f32>(&m, 1_000_000 * 100, false);
        match crate::cuda::available_without_opening(0) {
            // With a GPU, 10^8 target-steps go to it (several seconds on the CPU).
            Ok(()) => assert_eq!(big.device, Device::Cuda(0), "{}", big.reason),
            Err(_) => {
                assert_eq!(big.device, Device::Cpu);
                assert!(big.reason.contains("no usable CUDA GPU"), "{}", big.reason);
            }
        }
    }
}
