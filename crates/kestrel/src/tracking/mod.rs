//! Multi-target tracking: gating, data association (GNN and JPDA), the track life cycle,
//! scenario simulation and the metrics that score a tracker (GOSPA, OSPA, CLEAR MOT).
//!
//! Names follow the tracking literature (and Stone Soup's components): a *hypothesiser*
//! gates detections against each track's predicted measurement, an *associator* decides
//! (GNN) or weighs (JPDA) which detection updates which track, an *initiator* starts
//! tentative tracks from detections no track claimed, and a *deleter* ends tracks.

pub mod assign;
pub mod associate;
mod bank;
pub mod chi2;
#[cfg(feature = "cuda")]
pub mod cuda;
mod device;
pub mod files;
pub mod gate;
mod jpda;
pub mod metrics;
mod options;
pub mod scenario;
mod tracker;
pub mod tracks;

pub use assign::Assignment;
pub use device::DeviceTracker;
pub use gate::Innovations;
pub use options::{estimate_clutter, parse_confirm, TrackerOptions};
pub use tracker::{Assoc, JpdaMarginals, Status, Timing, Tracker, TrackerConfig};
pub use tracks::{check_finite, TrackSet, Tracks};
