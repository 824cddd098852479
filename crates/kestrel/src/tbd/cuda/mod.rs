//! The GPU path of track-before-detect, in layers: `config.rs` (the variants and their
//! parameters: what the autotuner chooses among), `assemble.rs` (the translation unit of a
//! configuration: its compile-time parameters, `kernels/common.cuh` and the variant's
//! kernel file), this file (the launcher, [`GpuTbd`], on the shared CUDA runtime
//! `crate::cuda`) and `switch.rs` (manoeuvres). Variants (the seed's, plus what an H100
//! allows), each kernel file under `kernels/` named:
//!
//! - [`Variant::Fused`]: one thread per pixel, all vectors in one kernel, `frames`
//!   frames per launch folded along each trajectory (the decimation D; D = 1 is plain);
//! - [`Variant::PerVector`]: one kernel per vector (shifts compiled in), the map folded
//!   in place across the launches;
//! - [`Variant::Tiled`]: tiles with halos in shared memory, the state read and written
//!   once per `frames` frames, the map written every frame (plain recursion);
//! - [`Variant::Lean`]: the same scheme (state on chip for `frames` frames, a map every
//!   frame) laid out for speed: one vector at a time, each thread a column of `rows`
//!   cells held in registers, neighbours exchanged through a double-buffered shared tile
//!   (one barrier per frame), the per-frame max / arg-max of every frame in registers
//!   across the vectors, and every vector-dependent choice made at compile time: no
//!   exchange for (0, 0), edge rows only for vertical shifts, taps in the thread's own
//!   column read from registers, `(1 - alpha)` folded into the blend weights and
//!   `alpha X` computed once per block; optionally two or three vectors folded between
//!   two barriers (`lean4v2`, `lean4v3`), so that each frame's barrier is shared and the
//!   latency of one vector's shared loads is hidden by the others' work;
//! - [`Variant::Staged`]: decimation, the fused kernel's trajectories and a map per launch,
//!   with each frame's tile staged once in shared memory as `alpha X` (zeros outside the
//!   frame, the next tile loaded while the current one is used), every vector's
//!   trajectory through the thread's `px` (1 or 2) pixels in registers;
//! - [`Variant::Late`]: `Staged` with the state sampled after the frames, not before (the
//!   frames folded from zero, then `c^D S` added), so that no state load waits before the
//!   first frame and several blocks share a multiprocessor;
//! - [`Variant::Wave`]: `Late` over several decimation periods a launch, one tile and
//!   period a block in a skewed order (each period a few tile rows behind the one
//!   before), so that a period reads the state the one before wrote from L2, not DRAM;
//!   tiles wait on flags for their neighbours' previous period;
//! - [`Variant::FusedCells`]: the fused kernel with `px` x `py` pixels per thread, the
//!   taps and horizontal blends that neighbouring pixels share loaded and computed once,
//!   no bounds checks where a thread's footprint lies inside the frame;
//! - [`Variant::Packed`]: the lean scheme with the state held and computed in f16, two
//!   pixels a thread in one `f16x2` word (plain, or a wave form of several periods a
//!   launch); run only when named, never chosen by the autotuner;
//! - and for each: read-only cached (`__ldg`) or plain loads, the vector loop unrolled
//!   or not, the block shape, f32 or f16 state storage (computed in f32).
//!
//! The tiled and staged kernels are the seed's shared-memory schemes, kept for its figure
//! (`kestrel bench --seed mazurek`) and by name, not among the autotuner's candidates; the
//! resident and streaming kernels were retired (docs/tbd-gpu.md, "Retired variants").
//!
//! Every variant computes the CPU reference's arithmetic in the same order (`cpu.rs`);
//! tests run them on the GPU and, compiled as C++, on the CPU.

mod assemble;
mod config;
#[cfg(feature = "cuda")]
mod launch;
#[cfg(feature = "cuda")]
mod params;
pub mod switch;

pub use assemble::{
    dynamic_shared_bytes, kernel_names, shrink, source, tiled_shared_bytes, wave_order,
};
pub use config::{KernelConfig, Variant};
#[cfg(feature = "cuda")]
pub use launch::{prepare, GpuTbd};

/// A detection map and its arg-max vectors, `[H][W]` each.
pub type MapPair = (Vec<f32>, Vec<u16>);

/// IEEE half to f32.
pub fn half_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: value = man * 2^-24.
            return f32::from_bits(sign)
                + (if sign != 0 { -1.0 } else { 1.0 }) * man as f32 * 2f32.powi(-24);
        }
    } else if exp == 31 {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests;

#[cfg(all(test, feature = "cuda"))]
mod param_tests {
    /// Every parameter struct matches its kernels' declarations (the staged and packed
    /// kernels' lists with and without their wave parameters).
    #[test]
    fn the_parameter_structs_match_the_kernels() {
        use super::assemble::{FUSED_CU, LEAN_CU, PACKED_CU, STAGED_CU, TILED_CU};
        let src = [
            FUSED_CU,
            TILED_CU,
            LEAN_CU,
            STAGED_CU,
            PACKED_CU,
            super::switch::SWITCH_CU,
        ];
        crate::cuda::assert_matches(&src.concat(), super::params::SIGNATURES);
    }
}
