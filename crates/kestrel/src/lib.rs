//! kestrel: Bayesian state estimation at scale, on the CPU of any machine and on NVIDIA
//! GPUs, with the same API and the same results.
//!
//! The families, each the same on the CPU and on the GPU (a [`Device`]):
//!
//! - **Kalman filter and smoothers**: the batched linear-Gaussian filter and
//!   Rauch-Tung-Striebel smoother for many independent tracks: [`filter`], [`smooth`],
//!   [`filter_on`] / [`smooth_on`] (a [`Device`] and a method), f32 and f64,
//!   time-invariant ([`Model`]) or per-step ([`TimeVaryingModel`]) models, missing
//!   measurements (NaN), per-step predictive log-likelihoods; the per-step API for
//!   streaming and tracking, [`kalman::BatchState`] (CPU) and
//!   `kalman::cuda::BatchTracker` (GPU): predict, gate, update, add and remove targets.
//! - **Parallel in time** ([`parallel`]): Sarkka & Garcia-Fernandez's associative-scan
//!   filter, RTS and two-filter smoothers for very long sequences, on the scan engine of
//!   [`scan`]; retrodiction.
//! - **Per-step likelihoods** ([`likelihood`]): `log p(z_t | z_0:t-1)` of long series,
//!   exact, parallel, or windowed (Lin, Moore & Russell's splash filter) with an error
//!   bound.
//! - **Nonlinear filters and IMM** ([`nonlinear`]): EKF, iterated EKF, UKF and CKF and
//!   their smoothers on models written as expressions (exact Jacobians from the
//!   expression graph) or built in (coordinated turn, radar), and the IMM of any modes:
//!   [`nonlinear::estimate_on`].
//! - **Hidden Markov models** ([`hmm`]): finite-state filter, smoother, per-step
//!   likelihoods and the Viterbi path, sequential or parallel in time:
//!   [`hmm::hmm_on`].
//! - **Particle filter** ([`particle`]): the bootstrap (SIR) filter with five resamplers,
//!   Philox random numbers and nonlinear models (range-only, bearings-only,
//!   range-bearing, stochastic volatility).
//! - **Track-before-detect** (`tbd`, feature `io`; its GPU kernels with `cuda`): dim
//!   targets in image sequences by recursive accumulation along motion hypotheses
//!   (Mazurek), with decimation and manoeuvres: `tbd::Tbd`.
//! - **Multi-target tracking and metrics** (`tracking`, feature `io`): gating, GNN and
//!   JPDA association, the track life cycle, scenarios; GOSPA, OSPA and CLEAR MOT:
//!   `tracking::DeviceTracker` (the whole scan on the GPU for GNN).
//! - **Models** ([`model`]): explicit matrices, builders (constant velocity and
//!   acceleration, random walk, AR(p)), TOML files. **Files** (`io`): CSV and NumPy.
//!
//! The Python package `kestrel` (crate `kestrel-py`) and the `kestrel` command line
//! (crate `kestrel-cli`) sit on this library.
//!
//! Time convention: the prior `(x0, P0)` is the state at step 0 *before* the step-0
//! measurement; step 0 is an update of the prior, each later step is predict-then-update;
//! a measurement with a NaN is missing (predict only, log-likelihood term 0).
//!
//! ```
//! use kestrel::model::constant_velocity;
//! use kestrel::{filter_on, Device, FilterMethod, FilterOptions, Measurements};
//!
//! # fn main() -> kestrel::Result<()> {
//! let model = constant_velocity(2, 1.0, 0.5, 25.0, 100.0)?; // 2-D, dt, q, r, p0
//! let sim = kestrel::sim::simulate(&model, 100, 50, 7, 0.05)?; // 100 tracks x 50 steps
//! let z: Measurements<f64> = sim.measurements;
//! // The GPU when one is usable, else all cores of the CPU.
//! let device = Device::auto().device;
//! let out = filter_on(device, &model, &z, FilterMethod::Sequential, &FilterOptions::default())?;
//! println!("total log-likelihood {}", out.filtered.total_loglik());
//! # Ok(())
//! # }
//! ```
//!
//! Features (both default): `cuda`, the GPU backends (the driver and NVRTC are loaded at
//! run time, so a build with it runs anywhere; without it a CUDA [`Device`] is refused
//! with [`Error::Unsupported`]); `io`, files (CSV, NumPy, TOML models), the multi-target
//! tracker and, with `cuda`, track-before-detect. Threads sharing a GPU: see [`cuda`]
//! (`cuda::set_memory_budget`, `cuda::set_cache_dir`).
//!
//! The repository's `README.md` is the user guide (the command line, file formats,
//! Python), `docs/library.md` walks through this library, and `ARCHITECTURE.md` maps the
//! modules.

#![warn(missing_docs)]

/// Builder-style setters of an options struct (`#[non_exhaustive]`, so users build it
/// from `Default` or a constructor and these): `name(field: Type, "doc")`.
macro_rules! setters {
    ($ty:ty { $($name:ident($field:ident: $t:ty, $doc:literal)),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = $doc]
                #[must_use]
                pub fn $name(mut self, v: $t) -> Self {
                    self.$field = v;
                    self
                }
            )*
        }
    };
}

/// Declares `fn name<G>(args) -> R` (`-> R` optional) that runs `inner::<G>(args)` (an `#[inline(always)]`
/// function) compiled for AVX2 where the processor has it, and as compiled for the
/// target otherwise: the same operations either way, so the same results.
/// `fn name[T: Real](x: &[T]) -> R = inner[T];` (generics in brackets, empty for none).
macro_rules! with_avx2 {
    ($(#[$m:meta])* $vis:vis fn $name:ident [$($gp:tt)*] ($($a:ident: $t:ty),* $(,)?)
        $(-> $r:ty)? = $inner:ident [$($ga:tt)*];) => {
        $(#[$m])*
        $vis fn $name<$($gp)*>($($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2<$($gp)*>($($a: $t),*) $(-> $r)? {
                    $inner::<$($ga)*>($($a),*)
                }
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the processor has AVX2 (checked just above).
                    return unsafe { avx2::<$($ga)*>($($a),*) };
                }
            }
            $inner::<$($ga)*>($($a),*)
        }
    };
}

/// The README's Rust examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The Rust examples of `docs/library.md`, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryDoctests;

pub mod cancel;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "cuda/off.rs"]
pub mod cuda;
pub mod data;
pub mod device;
pub mod error;
pub mod estimate;
pub mod hmm;
#[cfg(feature = "io")]
pub mod io;
pub mod kalman;
pub mod likelihood;
pub mod limits;
pub mod linalg;
pub mod model;
pub mod nonlinear;
pub mod parallel;
pub mod particle;
pub mod scan;
pub mod sim;
#[cfg(feature = "io")]
pub mod tbd;
#[cfg(feature = "io")]
pub mod tracking;

/// The linear-algebra crate of kestrel's public API ([`Model`] holds `nalgebra`
/// matrices): use this re-export so that your matrices are the ones kestrel expects.
pub use nalgebra;
/// The array crate of the conversions `Measurements::from_array`, `Estimates::mean_view`, ...
pub use ndarray;

pub use data::{Estimates, Measurements};
pub use device::{AutoDevice, Device};
pub use error::{Error, Result};
pub use estimate::{
    filter_on, filter_on_with, smooth_on, smooth_on_with, FilterMethod, SmoothMethod, Smoothed,
};
pub use kalman::{
    filter, filter_into, filter_with, smooth, smooth_filtered, smooth_in_place, smooth_with,
    FilterOptions, FilterOutput, Keep, TrackInputs,
};
pub use linalg::Real;
pub use model::{Model, StateSpace, TimeVaryingModel};
pub use scan::ScanAlgorithm;
