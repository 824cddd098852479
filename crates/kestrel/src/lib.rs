//! kestrel: Bayesian state estimation at scale.
//!
//! Batched Kalman filters and smoothers for very many targets, parallel-in-time filters
//! and smoothers for very long sequences, on the CPU and on NVIDIA GPUs. See the
//! repository's `ARCHITECTURE.md` for the map of modules.

pub mod cuda;
pub mod data;
pub mod device;
pub mod error;
pub mod estimate;
pub mod io;
pub mod kalman;
pub mod linalg;
pub mod model;
pub mod parallel;
pub mod particle;
pub mod scan;
pub mod sim;
pub mod tbd;
pub mod tracking;

/// The linear-algebra crate of kestrel's public API ([`Model`] holds `nalgebra`
/// matrices): use this re-export so that your matrices are the ones kestrel expects.
pub use nalgebra;
/// The array crate of the conversions `Measurements::from_array`, `Estimates::mean_view`, ...
pub use ndarray;

pub use data::{Estimates, Measurements};
pub use device::Device;
pub use error::{Error, Result};
pub use estimate::{filter_on, smooth_on, FilterMethod, SmoothMethod};
pub use kalman::{
    filter, filter_into, smooth, smooth_filtered, smooth_in_place, FilterOptions, FilterOutput,
    Keep,
};
pub use linalg::Real;
pub use model::{Model, StateSpace, TimeVaryingModel};
pub use scan::ScanAlgorithm;
