//! The tracker on the GPU: `tracker.rs` ([`GpuTracker`]: one scan's prediction, grid
//! gating, association, update and life cycle, compaction on the device; kernels in
//! `kernels/track.cu` on the Kalman family's per-step arithmetic), `assign.rs`
//! (`GpuGnn`: GNN association of the gated pairs, clusters by a lock-free union-find
//! and their optimal assignments on the device; kernels in `kernels/assign.cu`) and
//! `jpda.rs` (`GpuJpda`: JPDA's marginals of the same clusters, enumerated or by belief
//! propagation; kernels in `kernels/jpda.cu`).

mod assemble;
pub mod assign;
mod buffers;
pub mod jpda;
mod params;
mod tracker;

pub use assemble::source;
pub use assign::{gnn_gpu, gnn_gpu_timed, GnnGpuRun, GnnStats};
pub use jpda::{jpda_gpu_timed, JpdaGpuRun, JpdaStats};
pub use tracker::GpuTracker;

#[cfg(test)]
mod tests {
    /// Every parameter struct matches its kernel's declaration.
    #[test]
    fn the_parameter_structs_match_the_kernels() {
        let src = String::from(super::assemble::TRACK)
            + &super::assign::source()
            + &super::jpda::source();
        crate::cuda::assert_matches(&src, super::params::SIGNATURES);
    }
}
