//! The per-step likelihoods on the GPU: `window.rs` (the windowed filter, one thread a
//! step, `kernels/window.cu`) and `scan.rs` (the exact method, `kernels/scan.cu`), on the
//! shared runtime (`crate::cuda`).

mod params;
mod scan;
mod window;

pub(crate) use scan::exact;
pub use scan::{is_companion, scan_chunks, scan_source, SCAN_MAX_NX, SCAN_MAX_NY, SCAN_SOURCE};
pub(crate) use window::window;
pub use window::{prepare, source, tile_for, Plan, BLOCK, SOURCE, TILE};

/// Kernel time of the last `window` call on this thread, in milliseconds (benchmarks).
pub fn last_kernel_ms() -> f64 {
    LAST_MS.with(|c| c.get())
}

thread_local! {
    pub(super) static LAST_MS: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::NAN) };
}

#[cfg(test)]
mod tests {
    /// Every parameter struct matches its kernel's declaration.
    #[test]
    fn the_parameter_structs_match_the_kernels() {
        let src = String::from(super::SCAN_SOURCE) + super::SOURCE;
        crate::cuda::assert_matches(&src, super::params::SIGNATURES);
    }
}
