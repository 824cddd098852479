//! The tracker's translation unit: the Kalman prelude for the model, the per-step
//! kernels' shared code and `kernels/track.cu`; the kernels' names and launch sizes.

use crate::kalman::cuda::source::{prelude, COMMON, TRACKER};
use crate::model::Model;

pub(super) const TRACK: &str = include_str!("../kernels/track.cu");
pub(super) const KERNELS: &[&str] = &[
    "tk_predict",
    "tk_bounds",
    "tk_grid_setup",
    "tk_cells",
    "tk_scatter",
    "tk_gate",
    "tk_claim",
    "tk_update",
    "tk_pda",
    "tk_compact",
    "tk_scan_tiles",
    "tk_scan_sums",
    "tk_scan_apply",
];
/// Threads per block of the per-item kernels (TK_BLOCK).
pub(super) const BLOCK: u32 = 256;
/// Threads per block of the scan and values per thread (TK_SCAN_BLOCK, TK_SCAN_ITEMS).
pub(super) const SCAN_BLOCK: u32 = 256;
pub(super) const SCAN_TILE: usize = SCAN_BLOCK as usize * 4;
/// Scratch words (track.cu, SC_*).
pub(super) const SCRATCH: usize = 16;
/// Largest state and measurement sizes (registers hold the state).
pub(super) const MAX_NX: usize = 16;
pub(super) const MAX_NY: usize = 8;

/// The translation unit: the Kalman prelude (dimensions, f64, the model's numbers as
/// constants), the per-step kernels' shared code and the tracker's kernels.
pub fn source(model: &Model) -> String {
    let mut s = prelude(model.nx(), model.ny(), "f64", Some(model));
    for (name, text) in [
        ("kestrel.cuh", crate::cuda::DEVICE_HEADER),
        ("common.cuh", COMMON),
        ("tracker.cu", TRACKER),
        ("track.cu", TRACK),
    ] {
        s += &format!("// ---- {name}\n{text}\n");
    }
    s
}
