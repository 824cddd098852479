//! The GPU path of track-before-detect: builds the translation unit of `kernels/tbd.cu`
//! for a motion set, frame type and kernel variant, and runs it on the shared CUDA
//! runtime (`crate::cuda`). Variants (the seed's, plus what an H100 allows):
//!
//! - [`Variant::Fused`]: one thread per pixel, all vectors in one kernel, `frames`
//!   frames per launch folded along each trajectory (the decimation D; D = 1 is plain);
//! - [`Variant::PerVector`]: one kernel per vector (shifts compiled in), the map folded
//!   in place across the launches;
//! - [`Variant::Tiled`]: tiles with halos in shared memory, the state read and written
//!   once per `frames` frames, the map written every frame (plain recursion);
//! - [`Variant::Resident`]: the same scheme (state on chip for `frames` frames, a map
//!   every frame) laid out for speed: one vector at a time, each thread a column of
//!   `rows` cells held in registers, the shifts compiled in, neighbours exchanged through
//!   a double-buffered shared tile (one barrier per frame), the per-frame max / arg-max
//!   of every frame kept in registers across the vectors (arg-max packed 4 or 8 bits);
//! - [`Variant::Lean`]: the resident scheme with every vector-dependent choice made at
//!   compile time: no exchange for (0, 0), edge rows only for vertical shifts, taps in
//!   the thread's own column read from registers, `(1 - alpha)` folded into the blend
//!   weights and `alpha X` computed once per block (fewer instructions per cell-frame);
//!   optionally two or three vectors folded between two barriers (`lean4v2`, `lean4v3`),
//!   so that each frame's barrier is shared and the latency of one vector's shared loads
//!   is hidden by the others' work;
//! - [`Variant::Stream`]: the state on chip for `frames` frames and a map every frame
//!   without shared memory or barriers: a warp walks down a strip of 32 columns, the
//!   frames' levels a row apart, the rows it needs in registers, horizontal taps by warp
//!   shuffles;
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
//! - and for each: read-only cached (`__ldg`) or plain loads, the vector loop unrolled
//!   or not, the block shape, f32 or f16 state storage (computed in f32).
//!
//! Every variant computes the CPU reference's arithmetic in the same order (`cpu.rs`);
//! tests run them on the GPU and, compiled as C++, on the CPU.

use super::frames::Dtype;
use super::motion::{taps, Motion};
use super::Params;
use crate::cuda::{self, Arg, DevBuf, Gpu, Module};
use crate::error::{Error, Result};
use std::sync::Arc;

pub mod switch;

/// A detection map and its arg-max vectors, `[H][W]` each.
pub type MapPair = (Vec<f32>, Vec<u16>);

/// The kernel source.
pub const TBD_CU: &str = include_str!("kernels/tbd.cu");

const VEC_NAMES: [&str; 64] = [
    "tbd_vec_0",
    "tbd_vec_1",
    "tbd_vec_2",
    "tbd_vec_3",
    "tbd_vec_4",
    "tbd_vec_5",
    "tbd_vec_6",
    "tbd_vec_7",
    "tbd_vec_8",
    "tbd_vec_9",
    "tbd_vec_10",
    "tbd_vec_11",
    "tbd_vec_12",
    "tbd_vec_13",
    "tbd_vec_14",
    "tbd_vec_15",
    "tbd_vec_16",
    "tbd_vec_17",
    "tbd_vec_18",
    "tbd_vec_19",
    "tbd_vec_20",
    "tbd_vec_21",
    "tbd_vec_22",
    "tbd_vec_23",
    "tbd_vec_24",
    "tbd_vec_25",
    "tbd_vec_26",
    "tbd_vec_27",
    "tbd_vec_28",
    "tbd_vec_29",
    "tbd_vec_30",
    "tbd_vec_31",
    "tbd_vec_32",
    "tbd_vec_33",
    "tbd_vec_34",
    "tbd_vec_35",
    "tbd_vec_36",
    "tbd_vec_37",
    "tbd_vec_38",
    "tbd_vec_39",
    "tbd_vec_40",
    "tbd_vec_41",
    "tbd_vec_42",
    "tbd_vec_43",
    "tbd_vec_44",
    "tbd_vec_45",
    "tbd_vec_46",
    "tbd_vec_47",
    "tbd_vec_48",
    "tbd_vec_49",
    "tbd_vec_50",
    "tbd_vec_51",
    "tbd_vec_52",
    "tbd_vec_53",
    "tbd_vec_54",
    "tbd_vec_55",
    "tbd_vec_56",
    "tbd_vec_57",
    "tbd_vec_58",
    "tbd_vec_59",
    "tbd_vec_60",
    "tbd_vec_61",
    "tbd_vec_62",
    "tbd_vec_63",
];

/// How the recursion is mapped onto the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One thread per pixel, all vectors in one kernel, several frames per launch.
    Fused,
    /// One kernel per motion vector (shifts compiled in), the map folded in between.
    PerVector,
    /// Tiles with halos in shared memory, every frame emitted.
    Tiled,
    /// Tiles with halos, each thread a column of `rows` cells in registers, one vector
    /// at a time, every frame emitted.
    Resident {
        /// Cells (rows) per thread; the tile is `block.0` x `block.1 * rows` cells.
        rows: u32,
    },
    /// The resident scheme with fewer instructions per cell and frame (compile-time
    /// exchange, register taps, folded weights); same tile and fields as `Resident`.
    Lean {
        /// Cells (rows) per thread; the tile is `block.0` x `block.1 * rows` cells.
        rows: u32,
        /// Vectors folded between two barriers (1 to 4; the autotuner times 1, 2 and 3):
        /// with G > 1 the group's exchanges share each frame's barrier (G times the
        /// independent work between barriers, a G-th of the barriers; the exchange tiles
        /// and `alpha X` in dynamic shared memory).
        vecs: u32,
    },
    /// The lean scheme with the state held and computed in f16, two neighbouring pixels
    /// a thread in one `f16x2` word (every multiply-add, max and compare on both at
    /// once): f16 state only, and within `(6 - 3 alpha) 2^-11 max|X| / (alpha - 2^-9)` of
    /// the f32 reference rather than 1e-5 (`tbd.cu`, `PACKED`); never chosen by the
    /// autotuner. The tile is `2 block.0` x `block.1 * rows` pixels. Its maps stay on the
    /// device as f16 scores and u8 arg-max ([`KernelConfig::map_bytes`]), widened by
    /// [`GpuTbd::maps`]; at most 256 vectors.
    Packed {
        /// Rows per thread.
        rows: u32,
        /// Vectors folded between two barriers (1 to 8).
        vecs: u32,
        /// 0: one block a tile, a launch of `frames` frames after the launch before
        /// (`packedRvG`). 1 to 255: the wave form (`packedRvGwPgL`), as [`Variant::Wave`]:
        /// `periods` x `frames` frames a launch, one block a tile and period in the
        /// order of [`wave_order`], each tile waiting for the tiles around it to finish
        /// the period before instead of for the whole launch before.
        periods: u32,
        /// Tile rows between consecutive periods in the work order (wave form: 1 to 4095;
        /// 0 otherwise).
        lag: u32,
    },
    /// Decimation with the frame tiles staged in shared memory, `px` pixels per thread
    /// along x (the block covers `block.0 * px` x `block.1` pixels).
    Staged {
        /// Pixels per thread along x (1 or 2).
        px: u32,
    },
    /// `Staged` with the state sampled after the frames (`c^D S + G`, `G` the frames
    /// folded from zero) and several blocks a multiprocessor, so that state loads overlap
    /// other blocks' frames; same tile and fields.
    Late {
        /// Pixels per thread along x (1 or 2).
        px: u32,
    },
    /// `Late` (2 pixels per thread) over `periods` decimation periods per launch
    /// (`periods` x `frames` frames, a map after each period), the tiles of period j
    /// taken `lag` tile rows behind those of period j - 1 ([`wave_order`]), so that the
    /// state between periods is read back from L2 (`tbd.cu`, `WAVE_PERIODS`).
    Wave {
        /// Decimation periods per launch (1 to 255).
        periods: u32,
        /// Tile rows between consecutive periods in the work order (1 to 4095).
        lag: u32,
    },
    /// The state on chip for `frames` frames and a map every frame, with neither shared
    /// memory nor barriers: each warp walks down a strip of 32 columns (one a lane,
    /// horizontal taps by warp shuffles) and `rows` output rows, the levels of the
    /// frames skewed by a row each, the taps of the rows above and below in registers
    /// (`tbd.cu`, `STREAM`). Blocks are 32 x (warps) threads: `groups` warps a chunk of
    /// rows, each folding its share of the vectors (`streamRvG`; the later groups' maps
    /// handed to the first through shared memory, a barrier every 2 x reach + 1 rows).
    /// On the H100 it runs at 0.8x the lean kernel (`docs/tbd-gpu.md`, eleventh round).
    Stream {
        /// Output rows per warp (the warp computes `rows` + 2 x frames x the reach).
        rows: u32,
        /// Warps that share a chunk, each a group of the vectors (1 to 8).
        groups: u32,
    },
    /// The fused kernel with `px` x `py` pixels per thread.
    FusedCells {
        /// Pixels per thread along x.
        px: u32,
        /// Pixels per thread along y.
        py: u32,
    },
}

/// One kernel configuration (what the autotuner chooses among).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelConfig {
    /// How the recursion is mapped onto the GPU.
    pub variant: Variant,
    /// f16 state storage (computed in f32; in f16 by [`Variant::Packed`]).
    pub half: bool,
    /// Read-only cached loads (`__ldg`) instead of plain loads.
    pub ldg: bool,
    /// The loop over vectors unrolled (every shift a compile-time constant).
    pub unroll: bool,
    /// Frames per launch: the decimation (Fused, PerVector) or the frames the state stays
    /// on chip (Tiled, which still emits a map every frame).
    pub frames: usize,
    /// Block shape (Tiled: also the tile).
    pub block: (u32, u32),
}

impl KernelConfig {
    /// The plain fused kernel: `frames` frames per launch, 32 x 8 blocks, cached loads.
    pub fn fused(frames: usize) -> KernelConfig {
        KernelConfig {
            variant: Variant::Fused,
            half: false,
            ldg: true,
            unroll: true,
            frames,
            block: (32, 8),
        }
    }

    /// The packed kernel (`packedRvG/ldg/unroll/f16/...`, or with `periods` > 0 its wave
    /// form `packedRvGwPgL`): `rows` rows a thread, `vecs` vectors between barriers,
    /// `frames` frames a period, blocks of `block`, cached loads, vectors unrolled.
    pub fn packed(
        rows: u32,
        vecs: u32,
        (periods, lag): (u32, u32),
        frames: usize,
        block: (u32, u32),
    ) -> KernelConfig {
        KernelConfig {
            variant: Variant::Packed {
                rows,
                vecs,
                periods,
                lag,
            },
            half: true,
            ldg: true,
            unroll: true,
            frames,
            block,
        }
    }

    /// The late kernel with 2 pixels a thread (`late2`): plain loads, vectors unrolled,
    /// `frames` frames per launch (the decimation), blocks of `block`.
    pub fn late(half: bool, frames: usize, block: (u32, u32)) -> KernelConfig {
        KernelConfig {
            variant: Variant::Late { px: 2 },
            half,
            ldg: false,
            unroll: true,
            frames,
            block,
        }
    }

    /// The state stays on chip for `frames` frames and a map is emitted every frame
    /// (the plain recursion; no decimation).
    pub fn emits_every_frame(&self) -> bool {
        matches!(
            self.variant,
            Variant::Tiled
                | Variant::Resident { .. }
                | Variant::Lean { .. }
                | Variant::Packed { .. }
                | Variant::Stream { .. }
        )
    }

    /// Maps written per launch.
    pub fn maps_per_launch(&self) -> usize {
        if self.emits_every_frame() {
            self.frames_per_launch()
        } else if let Variant::Wave { periods, .. } = self.variant {
            periods as usize
        } else {
            1
        }
    }

    /// Bytes a map pixel takes on the device: an f32 score and a u16 arg-max (6), or for
    /// [`Variant::Packed`] the f16 score it computes and a u8 arg-max (3; at most 256
    /// vectors). [`GpuTbd::maps`] returns f32 and u16 either way.
    pub fn map_bytes(&self) -> usize {
        match self.variant {
            Variant::Packed { .. } => 3,
            _ => 6,
        }
    }

    /// Frames consumed per launch: `frames`, times the periods of [`Variant::Wave`] and of
    /// the packed kernel's wave form.
    pub fn frames_per_launch(&self) -> usize {
        self.frames * self.wave().map_or(1, |(periods, _)| periods as usize)
    }

    /// (periods a launch, lag in tile rows) of a wave form ([`Variant::Wave`],
    /// [`Variant::Packed`] with periods), else None.
    pub fn wave(&self) -> Option<(u32, u32)> {
        match self.variant {
            Variant::Wave { periods, lag } => Some((periods, lag)),
            Variant::Packed { periods, lag, .. } if periods > 0 => Some((periods, lag)),
            _ => None,
        }
    }

    /// Pixels per thread of the late-sampling kernels (`Late`, `Wave`), else None.
    fn late_px(&self) -> Option<u32> {
        match self.variant {
            Variant::Late { px } => Some(px),
            Variant::Wave { .. } => Some(2),
            _ => None,
        }
    }

    /// Output pixels of one block (`x`, `y`): the tile less its halo for the kernels that
    /// keep the state on chip, else the block.
    pub fn out_tile(&self, motions: &[Motion]) -> (usize, usize) {
        let (bx, by) = (self.block.0 as usize, self.block.1 as usize);
        match self.variant {
            Variant::Resident { rows } | Variant::Lean { rows, .. } => {
                let halo = 2 * self.frames * shrink(motions);
                (
                    bx.saturating_sub(halo),
                    (by * rows as usize).saturating_sub(halo),
                )
            }
            Variant::Packed { rows, .. } => {
                // The halo (`SHRINK` is at least 1) rounded up to whole words (pixel
                // pairs) along x.
                let halo = self.frames * shrink(motions).max(1);
                (
                    (2 * bx).saturating_sub(2 * halo.div_ceil(2) * 2),
                    (by * rows as usize).saturating_sub(2 * halo),
                )
            }
            Variant::Stream { rows, groups } => (
                bx.saturating_sub(2 * self.frames * shrink(motions).max(1)),
                by / groups.max(1) as usize * rows as usize,
            ),
            Variant::FusedCells { px, py } => (bx * px as usize, by * py as usize),
            Variant::Staged { px } | Variant::Late { px } => (bx * px as usize, by),
            Variant::Wave { .. } => (bx * 2, by),
            _ => (bx, by),
        }
    }

    /// A short name, e.g. `fused/ldg/unroll/f32/32x8/D1` or
    /// `resident8/ldg/unroll/f32/64x8/K8` (8 rows per thread).
    pub fn name(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}x{}/{}{}",
            match self.variant {
                Variant::Fused => "fused".to_string(),
                Variant::PerVector => "per-vector".to_string(),
                Variant::Tiled => "tiled".to_string(),
                Variant::Resident { rows } => format!("resident{rows}"),
                Variant::Lean { rows, vecs: 1 } => format!("lean{rows}"),
                Variant::Lean { rows, vecs } => format!("lean{rows}v{vecs}"),
                Variant::Packed {
                    rows,
                    vecs,
                    periods: 0,
                    ..
                } => format!("packed{rows}v{vecs}"),
                Variant::Packed {
                    rows,
                    vecs,
                    periods,
                    lag,
                } => format!("packed{rows}v{vecs}w{periods}g{lag}"),
                Variant::Staged { px } => format!("staged{px}"),
                Variant::Late { px } => format!("late{px}"),
                Variant::Wave { periods, lag } => format!("wave{periods}g{lag}"),
                Variant::Stream { rows, groups: 1 } => format!("stream{rows}"),
                Variant::Stream { rows, groups } => format!("stream{rows}v{groups}"),
                Variant::FusedCells { px, py } => format!("fused{px}x{py}"),
            },
            if self.ldg { "ldg" } else { "plain" },
            if self.unroll { "unroll" } else { "loop" },
            if self.half { "f16" } else { "f32" },
            self.block.0,
            self.block.1,
            if self.emits_every_frame() { "K" } else { "D" },
            self.frames
        )
    }

    /// Parses [`KernelConfig::name`].
    pub fn parse(s: &str) -> Option<KernelConfig> {
        let p: Vec<&str> = s.trim().split('/').collect();
        if p.len() != 6 {
            return None;
        }
        let variant = match p[0] {
            "fused" => Variant::Fused,
            "per-vector" => Variant::PerVector,
            "tiled" => Variant::Tiled,
            r => {
                if let Some(rows) = r.strip_prefix("resident") {
                    Variant::Resident {
                        rows: rows.parse().ok()?,
                    }
                } else if let Some(rest) = r.strip_prefix("lean") {
                    let (rows, vecs) = rest.split_once('v').unwrap_or((rest, "1"));
                    Variant::Lean {
                        rows: rows.parse().ok()?,
                        vecs: vecs.parse().ok()?,
                    }
                } else if let Some(rest) = r.strip_prefix("packed") {
                    let (rows, rest) = rest.split_once('v')?;
                    let (vecs, wave) = match rest.split_once('w') {
                        Some((vecs, wave)) => (vecs, Some(wave.split_once('g')?)),
                        None => (rest, None),
                    };
                    let (periods, lag) = match wave {
                        Some((p, g)) => (p.parse().ok()?, g.parse().ok()?),
                        None => (0, 0),
                    };
                    Variant::Packed {
                        rows: rows.parse().ok()?,
                        vecs: vecs.parse().ok()?,
                        periods,
                        lag,
                    }
                } else if let Some(rest) = r.strip_prefix("stream") {
                    let (rows, groups) = rest.split_once('v').unwrap_or((rest, "1"));
                    Variant::Stream {
                        rows: rows.parse().ok()?,
                        groups: groups.parse().ok()?,
                    }
                } else if let Some(px) = r.strip_prefix("staged") {
                    Variant::Staged {
                        px: px.parse().ok()?,
                    }
                } else if let Some(rest) = r.strip_prefix("wave") {
                    let (periods, lag) = rest.split_once('g')?;
                    Variant::Wave {
                        periods: periods.parse().ok()?,
                        lag: lag.parse().ok()?,
                    }
                } else if let Some(px) = r.strip_prefix("late") {
                    Variant::Late {
                        px: px.parse().ok()?,
                    }
                } else {
                    let (px, py) = r.strip_prefix("fused")?.split_once('x')?;
                    Variant::FusedCells {
                        px: px.parse().ok()?,
                        py: py.parse().ok()?,
                    }
                }
            }
        };
        let (bx, by) = p[4].split_once('x')?;
        let frames = p[5].get(1..)?.parse().ok()?;
        Some(KernelConfig {
            variant,
            ldg: p[1] == "ldg",
            unroll: p[2] == "unroll",
            half: p[3] == "f16",
            frames,
            block: (bx.parse().ok()?, by.parse().ok()?),
        })
    }

    /// Checks that the configuration computes decimation `decimation`: a kernel that
    /// folds D frames a launch needs D, one that emits every frame needs 1.
    pub fn check_decimation(&self, decimation: usize) -> Result<()> {
        if !self.emits_every_frame() && self.frames != decimation {
            return Err(Error::input(format!(
                "kernel {} folds {} frames per launch, the decimation is {decimation}",
                self.name(),
                self.frames
            )));
        }
        if self.emits_every_frame() && decimation != 1 {
            return Err(Error::input(format!(
                "kernel {} emits every frame; decimation {decimation} needs a kernel that folds {decimation} frames a launch",
                self.name()
            )));
        }
        Ok(())
    }

    /// Checks the configuration against a motion set.
    pub fn check(&self, motions: &[Motion]) -> Result<()> {
        let bad = |m: String| Err(Error::input(format!("kernel {}: {m}", self.name())));
        let threads = self.block.0 as usize * self.block.1 as usize;
        if self.block.0 == 0 || self.block.1 == 0 || threads > 1024 {
            return bad(format!("{threads} threads per block"));
        }
        if self.frames == 0 || self.frames > 64 {
            return bad("frames per launch must be 1..=64".into());
        }
        if self.variant == Variant::PerVector && motions.len() > VEC_NAMES.len() {
            return bad(format!("at most {} vectors", VEC_NAMES.len()));
        }
        if let Variant::Stream { rows, groups } = self.variant {
            // A lane a column: horizontal taps come from the warp's other lanes.
            if self.block.0 != 32 || !self.unroll {
                return bad(
                    "the streaming kernel needs blocks 32 threads wide and its vectors unrolled"
                        .into(),
                );
            }
            if rows == 0 || rows > 1024 {
                return bad(format!("{rows} rows per warp (1..=1024)"));
            }
            if !(1..=8).contains(&groups)
                || groups as usize > motions.len()
                || !self.block.1.is_multiple_of(groups)
            {
                return bad(format!(
                    "{groups} groups of vectors (1..=8, at most one a vector, dividing the {} warps of a block)",
                    self.block.1
                ));
            }
            let smem = tiled_shared_bytes(self, motions);
            if smem > 48 * 1024 {
                return bad(format!(
                    "{smem} bytes of shared memory for the partial maps (at most 49152)"
                ));
            }
            // Each warp holds its vectors' rings in registers (about 30 registers a
            // vector at K = 4): past 32 vectors a warp they would only spill.
            let per_warp = motions.len().div_ceil(groups as usize);
            if per_warp > 32 {
                return bad(format!(
                    "{per_warp} vectors a warp (at most 32: their rings live in registers; more groups share them)"
                ));
            }
            if self.out_tile(motions).0 == 0 {
                return bad(format!(
                    "a strip of 32 columns is no wider than its halo ({} frames x {} pixels per frame on each side)",
                    self.frames,
                    shrink(motions).max(1)
                ));
            }
        } else if self.emits_every_frame() {
            let smem = tiled_shared_bytes(self, motions);
            if smem > 48 * 1024 {
                return bad(format!("{smem} bytes of shared memory (at most 49152)"));
            }
        }
        if let Variant::Staged { px } | Variant::Late { px } = self.variant {
            if !(1..=2).contains(&px) {
                return bad(format!("{px} pixels per thread (1 or 2)"));
            }
            let smem = tiled_shared_bytes(self, motions);
            if smem > 48 * 1024 {
                return bad(format!(
                    "{smem} bytes of shared memory for the frame tiles (at most 49152)"
                ));
            }
        }
        if let Variant::Wave { periods, lag } = self.variant {
            if !(1..=255).contains(&periods) || !(1..=4095).contains(&lag) {
                return bad(format!(
                    "{periods} periods per launch (1..=255), lag {lag} tile rows (1..=4095)"
                ));
            }
            // A tile samples the state of the tiles around it only: its reach (D x the
            // speed, one more tap, 16-byte chunks of up to 8 values on each side along x)
            // must lie within one tile.
            let reach = self.frames * shrink(motions).max(1) + 1;
            let (ox, oy) = self.out_tile(motions);
            if reach > oy || reach + 16 > ox {
                return bad(format!(
                    "a tile of {ox} x {oy} pixels is smaller than the state it samples ({reach} pixels on each side, {} along x with whole 16-byte chunks)",
                    reach + 16
                ));
            }
            let smem = tiled_shared_bytes(self, motions);
            if smem > 48 * 1024 {
                return bad(format!(
                    "{smem} bytes of shared memory for the frame tiles (at most 49152)"
                ));
            }
        }
        if let Variant::FusedCells { px, py } = self.variant {
            if !(1..=8).contains(&px) || !(1..=8).contains(&py) {
                return bad(format!("{px} x {py} pixels per thread (1..=8 each)"));
            }
        }
        if let Variant::Packed {
            vecs, periods, lag, ..
        } = self.variant
        {
            if !(1..=8).contains(&vecs) {
                return bad(format!("{vecs} vectors between barriers (1..=8)"));
            }
            if periods > 255 || (periods > 0 && !(1..=4095).contains(&lag)) {
                return bad(format!(
                    "{periods} periods per launch (1..=255), lag {lag} tile rows (1..=4095)"
                ));
            }
            // The wave form waits on the eight tiles around its own: the halo it reads
            // (frames x the speed, whole words along x) must lie within them.
            let (ox, oy) = self.out_tile(motions);
            let halo = self.frames * shrink(motions).max(1);
            if periods > 0 && (halo > oy || 2 * halo.div_ceil(2) > ox) {
                return bad(format!(
                    "a tile of {ox} x {oy} pixels is smaller than its halo ({halo} pixels on each side)"
                ));
            }
        }
        if let Variant::Lean { vecs, .. } = self.variant {
            if !(1..=4).contains(&vecs) {
                return bad(format!("{vecs} vectors between barriers (1..=4)"));
            }
        }
        if let Variant::Packed { .. } = self.variant {
            if !self.half {
                return bad("the packed kernel computes in f16: it needs the f16 state".into());
            }
            let total = dynamic_shared_bytes(self, motions, Dtype::F32);
            if total > MAX_BLOCK_SHARED {
                return bad(format!(
                    "{total} bytes of shared memory a block (at most {MAX_BLOCK_SHARED})"
                ));
            }
        }
        if let Variant::Resident { rows }
        | Variant::Lean { rows, .. }
        | Variant::Packed { rows, .. } = self.variant
        {
            if rows == 0 || rows > 32 {
                return bad(format!("{rows} rows per thread (1..=32)"));
            }
            if motions.len() > 256 {
                return bad(format!(
                    "{} vectors (the packed arg-max holds at most 256)",
                    motions.len()
                ));
            }
            let (ox, oy) = self.out_tile(motions);
            if ox == 0 || oy == 0 {
                return bad(format!(
                    "the tile is no larger than its halo ({} frames x {} pixels per frame on each side)",
                    self.frames,
                    shrink(motions)
                ));
            }
        }
        Ok(())
    }
}

/// Pixels a trajectory moves per frame, rounded up: the halo of a tile grows by this
/// much per frame kept on chip (taps at `floor(-v)` and, when fractional, one further).
pub fn shrink(motions: &[Motion]) -> usize {
    let axis = |v: f32| {
        let (i, _, w1) = taps(-v);
        let far = if w1 != 0.0 { (i + 1).abs() } else { 0 };
        i.abs().max(far) as usize
    };
    motions
        .iter()
        .map(|m| axis(m.vx).max(axis(m.vy)))
        .max()
        .unwrap_or(0)
}

/// Shared memory of the tiled, resident, lean and staged kernels in bytes.
pub fn tiled_shared_bytes(cfg: &KernelConfig, motions: &[Motion]) -> usize {
    let (tx, ty) = (cfg.block.0 as usize, cfg.block.1 as usize);
    let variant = match cfg.variant {
        Variant::Wave { .. } => Variant::Late { px: 2 },
        v => v,
    };
    match variant {
        Variant::Staged { px } | Variant::Late { px } => {
            // Two frame tiles (for the late kernel's copies of f32 frames four, the wave
            // kernel's three: `S_BUFS`) with a halo of (frames - 1) x the reach, rows of
            // even length (or, below, of whole 16-byte chunks).
            let halo = (cfg.frames - 1) * shrink(motions).max(1);
            let pw = if matches!(variant, Variant::Late { px: 2 }) {
                // Row-major rows of whole 16-byte chunks from a multiple of 4 columns left
                // of the block (`S_ROW16`: f32 frames of a width a multiple of 4), the
                // wider of the two forms, counted for every frame type and width.
                (halo.div_ceil(4) * 4 + tx * 2 + halo).div_ceil(4) * 4
            } else {
                (tx * px as usize + 2 * halo).div_ceil(2) * 2
            };
            let tiles = match cfg.variant {
                Variant::Wave { .. } => 3,
                Variant::Late { .. } => 4,
                _ => 2,
            };
            tiles * pw * (ty + 2 * halo) * 4
        }
        // Several vectors between barriers: the tiles are dynamic (`dynamic_shared_bytes`).
        Variant::Lean { vecs, .. } if vecs > 1 => 0,
        Variant::Packed { .. } => 0,
        Variant::Stream { groups, .. } => {
            // Two buffers a chunk of each group's max and arg-max, a ring cycle of steps
            // (2 x reach + 1) of every level (`pbest`, `parg` in `tbd.cu`); one small
            // unused buffer without groups.
            let chunks = if groups > 1 {
                2 * (ty / groups as usize)
            } else {
                1
            };
            let win = 2 * shrink(motions).max(1) + 1;
            chunks * groups as usize * win * cfg.frames * 32 * 8
        }
        Variant::Resident { rows } | Variant::Lean { rows, .. } => {
            // Two tiles padded by one frame's reach on each side.
            let pad = 2 * shrink(motions).max(1);
            2 * (tx + pad) * (ty * rows as usize + pad) * 4
        }
        _ => {
            let halo = cfg.frames * shrink(motions);
            2 * (tx + 2 * halo) * (ty + 2 * halo) * 4 + cfg.frames * tx * ty * 6
        }
    }
}

/// Dynamic shared memory of a kernel in bytes: the late kernel with 2 pixels a thread on
/// f32 frames keeps a copy of the state it samples there (`S_SST` in `tbd.cu`: per vector
/// `block.1 + 1` rows of whole 16-byte chunks covering `2 block.0 + 1` columns); the
/// lean kernel with several vectors between barriers keeps its exchange tiles there.
pub fn dynamic_shared_bytes(cfg: &KernelConfig, motions: &[Motion], frame: Dtype) -> usize {
    let variant = match cfg.variant {
        Variant::Wave { .. } => Variant::Late { px: 2 },
        v => v,
    };
    match variant {
        Variant::Lean { rows, vecs } if vecs > 1 => {
            // `2 L_VP` tiles of `L_PH x L_PW` floats, then (`L_AXS`, where the frames of a
            // launch would fit the registers) alpha X of every thread's cells (`tbd.cu`).
            let pad = shrink(motions).max(1);
            let (tx, ty) = (cfg.block.0 as usize, cfg.block.1 as usize);
            let ph = ty * rows as usize + 2 * pad + 1;
            let pw = tx + 2 * pad + 1;
            let ax = if cfg.frames * rows as usize <= 32 {
                cfg.frames * rows as usize * tx * ty
            } else {
                0
            };
            (2 * vecs as usize * ph * pw + ax) * 4
        }
        Variant::Packed { rows, vecs, .. } => {
            // `2 P_VP` tiles of `P_PH x P_PW` words, then alpha X of every thread's pixel
            // pairs, a word a row and frame (`tbd.cu`).
            let s = shrink(motions).max(1);
            let (tx, ty) = (cfg.block.0 as usize, cfg.block.1 as usize);
            let ph = ty * rows as usize + 2 * s + 1;
            let pw = tx + 2 * s.div_ceil(2) + 1;
            (2 * vecs as usize * ph * pw + cfg.frames * rows as usize * tx * ty) * 4
        }
        Variant::Late { px: 2 } if !matches!(frame, Dtype::U8 | Dtype::U16) => {
            let se = if cfg.half { 8 } else { 4 };
            let chunks = (2 * cfg.block.0 as usize).div_ceil(se) + 1;
            motions.len() * (cfg.block.1 as usize + 1) * chunks * 16
        }
        _ => 0,
    }
}

/// Shared memory a multiprocessor of an H100 (compute capability 9.0) gives one block.
const MAX_BLOCK_SHARED: usize = 227 * 1024;

fn floats(v: impl Iterator<Item = f32>) -> String {
    // `{:?}` prints the shortest string that reads back as the same f32.
    let items: Vec<String> = v.map(|x| format!("{:?}f", x)).collect();
    format!("{{{}}}", items.join(", "))
}

/// The complete translation unit for `motions`, frames of `frame` and width `w`, and
/// `cfg` (the width matters only as a multiple of 4 or not: whole 16-byte rows of f32).
pub fn source(motions: &[Motion], frame: Dtype, cfg: &KernelConfig, w: usize) -> String {
    let frame_t = match frame {
        Dtype::U8 => "unsigned char",
        Dtype::U16 => "unsigned short",
        _ => "float",
    };
    let mut s = String::new();
    s += &format!("#define NV {}\n", motions.len());
    s += &format!(
        "#define MOTIONS_VX {}\n",
        floats(motions.iter().map(|m| m.vx))
    );
    s += &format!(
        "#define MOTIONS_VY {}\n",
        floats(motions.iter().map(|m| m.vy))
    );
    s += &format!("#define STATE_HALF {}\n", cfg.half as u8);
    s += &format!("#define FRAME_T {frame_t}\n");
    if frame_t == "float" {
        s += "#define FRAME_F32 1\n";
    }
    s += &format!("#define FRAME_W4 {}\n", w.is_multiple_of(4) as u8);
    s += &format!("#define FRAME_W2 {}\n", w.is_multiple_of(2) as u8);
    s += &format!("#define USE_LDG {}\n", cfg.ldg as u8);
    s += &format!("#define UNROLL_V {}\n", cfg.unroll as u8);
    s += &format!("#define DEC {}\n", cfg.frames);
    s += &format!("#define TX {}\n#define TY {}\n", cfg.block.0, cfg.block.1);
    s += &format!("#define SHRINK {}\n", shrink(motions).max(1));
    if cfg.variant == Variant::Tiled {
        s += "#define TBD_TILED 1\n";
    }
    if let Variant::Resident { rows } = cfg.variant {
        s += &format!("#define RB {rows}\n");
    }
    if let Variant::Lean { rows, vecs } = cfg.variant {
        s += &format!("#define LEAN {rows}\n#define LEAN_VP {vecs}\n");
    }
    if let Variant::Packed {
        rows,
        vecs,
        periods,
        ..
    } = cfg.variant
    {
        // Blocks a multiprocessor: two of 512 threads (64 registers each), one of 1024.
        let minb = (1024 / (cfg.block.0 * cfg.block.1)).max(1);
        s += &format!("#define PACKED {rows}\n#define PACKED_VP {vecs}\n#define P_MINB {minb}\n");
        if periods > 0 {
            // Naps of 256 ns between looks at a flag, not 64: H100, 13 vectors, two runs
            // each in one call, packed3v4w4g4 101,014-101,114 -> 101,191-101,585 frames/s.
            s += &format!("#define WAVE_PERIODS {periods}\n#define WAVE_NAP_NS 256\n");
        }
    }
    if let Variant::Staged { px } = cfg.variant {
        s += &format!("#define STAGED {px}\n");
    }
    if let Some(px) = cfg.late_px() {
        // Blocks a multiprocessor: at least 1024 threads (at most 64 registers a thread
        // for 256-thread blocks). On the H100 at 13 vectors x D10, 256-thread blocks of
        // the kernel with copied frames: 4 a multiprocessor ran at 1.07x (f32) and 1.08x
        // (f16) the speed of 3, and 1.28x of 2; 384-thread blocks: 3 at 1.00x and 1.03x
        // of 2, 4 at 0.74x.
        let minb = 1024u32.div_ceil(cfg.block.0 * cfg.block.1);
        s += &format!("#define STAGED {px}\n#define STAGED_LATE 1\n#define S_MINB {minb}\n");
        if let Variant::Wave { periods, .. } = cfg.variant {
            s += &format!("#define WAVE_PERIODS {periods}\n");
        }
    }
    if let Variant::Stream { rows, groups } = cfg.variant {
        s += &format!("#define STREAM {rows}\n#define STREAM_G {groups}\n");
    }
    if let Variant::FusedCells { px, py } = cfg.variant {
        s += &format!("#define PX {px}\n#define PY {py}\n");
    }
    if cfg.variant == Variant::PerVector {
        let list: Vec<String> = (0..motions.len())
            .map(|i| format!("TBD_VEC({i})"))
            .collect();
        s += &format!("#define TBD_VEC_LIST {}\n", list.join(" "));
        let ptrs: Vec<String> = (0..motions.len()).map(|i| format!("tbd_vec_{i}")).collect();
        s += &format!("#define TBD_VEC_PTRS {{{}}}\n", ptrs.join(", "));
    }
    s += TBD_CU;
    s
}

/// The kernels of a configuration, in launch order.
pub fn kernel_names(cfg: &KernelConfig, nv: usize) -> Vec<&'static str> {
    match cfg.variant {
        Variant::Fused => vec!["tbd_fused"],
        Variant::Tiled => vec!["tbd_tiled"],
        Variant::Resident { .. } => vec!["tbd_resident"],
        Variant::Lean { .. } => vec!["tbd_lean"],
        Variant::Packed { .. } => vec!["tbd_packed"],
        Variant::Stream { .. } => vec!["tbd_stream"],
        Variant::Staged { .. } | Variant::Late { .. } | Variant::Wave { .. } => vec!["tbd_staged"],
        Variant::FusedCells { .. } => vec!["tbd_fused_cells"],
        Variant::PerVector => VEC_NAMES[..nv].to_vec(),
    }
}

/// The work order of a [`Variant::Wave`] launch over `tx` x `ty` tiles: item `j | r << 8 |
/// c << 20` (period `j` of the launch, tile row `r`, column `c`), sorted by `r + lag j`,
/// then `j`, then `c`. Period j's tile row r then comes `lag - 1` keys after the row
/// r + 1 of period j - 1 that it waits for (or, at lag 1, later in the same key): every
/// item's dependencies come before it, and a period's state is read about `lag` tile
/// rows of work after it is written.
pub fn wave_order(periods: u32, lag: u32, tx: usize, ty: usize) -> Vec<u32> {
    let (p, g) = (periods as usize, lag as usize);
    let mut v = Vec::with_capacity(p * tx * ty);
    for key in 0..ty + g * p.saturating_sub(1) {
        for j in 0..p {
            let Some(r) = key.checked_sub(g * j) else {
                break;
            };
            if r >= ty {
                continue;
            }
            for c in 0..tx {
                v.push(j as u32 | (r as u32) << 8 | (c as u32) << 20);
            }
        }
    }
    v
}

/// The device side of a [`Variant::Wave`] kernel: its work order, ticket counter, the
/// last period each tile finished (+ 1), and the counts kept by the host (tickets
/// taken, periods run).
struct WaveState {
    order: DevBuf<u32>,
    ticket: DevBuf<u64>,
    flags: DevBuf<u32>,
    items: usize,
    issued: u64,
    period: u32,
}

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

/// The recursion on one GPU with one kernel configuration; state, frames and maps stay
/// on the device between launches.
pub struct GpuTbd {
    gpu: Arc<Gpu>,
    module: Arc<Module>,
    /// The kernel configuration in use.
    pub cfg: KernelConfig,
    frame: Dtype,
    motions: Vec<Motion>,
    alpha: f32,
    /// Frame height.
    pub h: usize,
    /// Frame width.
    pub w: usize,
    state: [DevBuf<u8>; 2],
    cur: usize,
    /// `slots` launches' frames, one after the other; a launch reads slot `slot`.
    frames: DevBuf<u8>,
    slots: usize,
    slot: usize,
    score: DevBuf<f32>,
    arg: DevBuf<u16>,
    /// Dynamic shared memory of each launch in bytes ([`dynamic_shared_bytes`]).
    dynamic: u32,
    wave: Option<WaveState>,
}

/// Compiles (or loads from the cache) the module of `cfg` for `params` on frames `w`
/// wide on GPU `ordinal`, allocating nothing: [`GpuTbd::new`] then finds it in memory.
/// Sweeps call it from several threads at once, since NVRTC compiles on the host.
pub fn prepare(
    ordinal: usize,
    params: &Params,
    w: usize,
    cfg: KernelConfig,
    frame: Dtype,
) -> Result<()> {
    cfg.check(&params.motions)?;
    cuda::catch(|| {
        let gpu = cuda::gpu(ordinal)?;
        let src = source(&params.motions, frame, &cfg, w);
        gpu.module("tbd", &src, &kernel_names(&cfg, params.motions.len()))
            .map(|_| ())
    })
}

impl GpuTbd {
    /// A zero state on GPU `ordinal`; compiles (or loads from the cache) the module.
    pub fn new(
        ordinal: usize,
        params: &Params,
        h: usize,
        w: usize,
        cfg: KernelConfig,
        frame: Dtype,
    ) -> Result<GpuTbd> {
        params.check(h, w)?;
        cfg.check(&params.motions)?;
        if matches!(frame, Dtype::F64) {
            return Err(Error::Unsupported(
                "f64 frames on the GPU (convert to f32)".into(),
            ));
        }
        cuda::catch(|| {
            let gpu = cuda::gpu(ordinal)?;
            let n = h * w;
            let nv = params.motions.len();
            let sbytes = nv * n * if cfg.half { 2 } else { 4 };
            let maps = cfg.maps_per_launch();
            // The map buffers hold f32 scores and u16 arg-max whatever `map_bytes` (the
            // packed kernel uses the front of them).
            let need = 2 * sbytes + cfg.frames_per_launch() * n * frame.size() + maps * n * 6;
            let free = gpu.usable_memory()?;
            if need > free {
                return Err(Error::input(format!(
                    "{nv} motion vectors on {w} x {h} frames would need {:.2} GB of GPU memory ({:.2} GB free)",
                    need as f64 / 1e9,
                    free as f64 / 1e9
                )));
            }
            let src = source(&params.motions, frame, &cfg, w);
            let module = gpu.module("tbd", &src, &kernel_names(&cfg, nv))?;
            let dynamic = dynamic_shared_bytes(&cfg, &params.motions, frame);
            if dynamic > 0 {
                let total = dynamic + tiled_shared_bytes(&cfg, &params.motions);
                if total > MAX_BLOCK_SHARED {
                    return Err(Error::input(format!(
                        "kernel {}: {total} bytes of shared memory a block (at most {MAX_BLOCK_SHARED})",
                        cfg.name()
                    )));
                }
                for k in kernel_names(&cfg, nv) {
                    cuda::allow_dynamic_shared(&module, k, dynamic)?;
                }
            }
            let state = [
                DevBuf::<u8>::new(&gpu, sbytes, "the TBD state")?,
                DevBuf::<u8>::new(&gpu, sbytes, "the TBD state")?,
            ];
            let frames =
                DevBuf::<u8>::new(&gpu, cfg.frames_per_launch() * n * frame.size(), "frames")?;
            let wave = match cfg.wave() {
                Some((periods, lag)) => {
                    let (ox, oy) = cfg.out_tile(&params.motions);
                    let (tx, ty) = (w.div_ceil(ox), h.div_ceil(oy));
                    if tx > 4095 || ty > 4095 {
                        return Err(Error::input(format!(
                            "kernel {}: {tx} x {ty} tiles (at most 4095 each way)",
                            cfg.name()
                        )));
                    }
                    let order = wave_order(periods, lag, tx, ty);
                    let s = &gpu.stream;
                    let ws = WaveState {
                        order: DevBuf::from_slice(&gpu, s, &order, "the wave order")?,
                        ticket: DevBuf::from_slice(&gpu, s, &[0u64], "the wave ticket")?,
                        flags: DevBuf::from_slice(&gpu, s, &vec![0u32; tx * ty], "wave flags")?,
                        items: order.len(),
                        issued: 0,
                        period: 0,
                    };
                    cuda::sync(s, "setting up the wave kernel")?;
                    Some(ws)
                }
                _ => None,
            };
            let score = DevBuf::<f32>::new(&gpu, maps * n, "detection maps")?;
            let arg = DevBuf::<u16>::new(&gpu, maps * n, "arg-max vectors")?;
            let t = GpuTbd {
                gpu,
                module,
                cfg,
                frame,
                motions: params.motions.clone(),
                alpha: params.alpha,
                h,
                w,
                state,
                cur: 0,
                frames,
                slots: 1,
                slot: 0,
                score,
                arg,
                dynamic: dynamic as u32,
                wave,
            };
            t.zero_state()?;
            Ok(t)
        })
    }

    fn zero_state(&self) -> Result<()> {
        let zeros = vec![0u8; self.state[self.cur].len()];
        cuda::htod(
            &self.gpu.stream,
            &zeros,
            &self.state[self.cur],
            0,
            "zeroing the state",
        )?;
        cuda::sync(&self.gpu.stream, "zeroing the state")
    }

    /// The device's name.
    pub fn device_name(&self) -> String {
        self.gpu.name.clone()
    }

    /// Frames consumed per launch.
    pub fn frames_per_launch(&self) -> usize {
        self.cfg.frames_per_launch()
    }

    /// Fills the outputs (maps, the next state) with NaN, so that an unwritten value shows.
    pub fn poison(&self) -> Result<()> {
        cuda::catch(|| {
            self.score.poison(&self.gpu.stream)?;
            self.arg.poison(&self.gpu.stream)?;
            self.state[1 - self.cur].poison(&self.gpu.stream)
        })
    }

    /// Bytes of one launch's frames.
    fn launch_bytes(&self) -> usize {
        self.cfg.frames_per_launch() * self.h * self.w * self.frame.size()
    }

    /// Room for the frames of `slots` launches (1 unless set), the launches reading them in
    /// turn: a benchmark fills them once ([`GpuTbd::load_frames_into`]) so that each launch
    /// reads frames at addresses no recent launch read, as a stream's new frames are (one
    /// buffer read again each launch could be partly served from L2). The frames loaded
    /// before are dropped; the next launch reads slot 0.
    pub fn frame_slots(&mut self, slots: usize) -> Result<()> {
        if slots == 0 {
            return Err(Error::input("zero frame slots".to_string()));
        }
        let bytes = slots * self.launch_bytes();
        cuda::catch(|| {
            let free = self.gpu.usable_memory()? + self.frames.len();
            if bytes > free {
                return Err(Error::input(format!(
                    "{slots} launches of frames would need {:.2} GB of GPU memory ({:.2} GB free)",
                    bytes as f64 / 1e9,
                    free as f64 / 1e9
                )));
            }
            // The old buffer is freed first, so that both need not fit at once.
            self.frames = DevBuf::<u8>::new(&self.gpu, 1, "frames")?;
            self.frames = DevBuf::<u8>::new(&self.gpu, bytes, "frames")?;
            self.slots = slots;
            self.slot = 0;
            Ok(())
        })
    }

    /// Copies one launch's frames into slot `slot` (see [`GpuTbd::frame_slots`]).
    pub fn load_frames_into(&self, slot: usize, raw: &[u8]) -> Result<()> {
        if slot >= self.slots {
            return Err(Error::input(format!("frame slot {slot} of {}", self.slots)));
        }
        if raw.len() != self.launch_bytes() {
            return Err(Error::input(format!(
                "{} bytes of frames for a launch of {} frames of {} x {} {}",
                raw.len(),
                self.cfg.frames_per_launch(),
                self.w,
                self.h,
                self.frame.name()
            )));
        }
        let at = slot * self.launch_bytes();
        cuda::catch(|| cuda::htod(&self.gpu.stream, raw, &self.frames, at, "copying frames"))
    }

    /// Copies `frames_per_launch()` frames (bytes as stored, `[F][H][W]`) to the device,
    /// into the slot that the next launch reads.
    pub fn load_frames(&self, raw: &[u8]) -> Result<()> {
        self.load_frames_into(self.slot, raw)
    }

    /// One launch (asynchronous): the loaded frames advance the state; the maps are
    /// written on the device.
    pub fn launch(&mut self) -> Result<()> {
        cuda::catch(|| {
            let (bx, by) = self.cfg.block;
            let (ox, oy) = self.cfg.out_tile(&self.motions);
            let mut grid = (
                (self.w as u32).div_ceil(ox as u32),
                (self.h as u32).div_ceil(oy as u32),
                1,
            );
            let mut args = vec![
                Arg::Ptr(self.state[self.cur].ptr()),
                Arg::Ptr(self.state[1 - self.cur].ptr()),
                Arg::Ptr(self.frames.at(self.slot * self.launch_bytes())),
                Arg::Ptr(self.score.ptr()),
                Arg::Ptr(self.arg.ptr()),
                Arg::I32(self.h as i32),
                Arg::I32(self.w as i32),
                Arg::F32(self.alpha),
            ];
            if let Some(ws) = &self.wave {
                // One block a work item; the state buffers in fixed places, taken by the
                // parity of the period (`cur` follows it).
                grid = (ws.items as u32, 1, 1);
                args = vec![
                    Arg::Ptr(self.state[0].ptr()),
                    Arg::Ptr(self.state[1].ptr()),
                    args[2],
                    args[3],
                    args[4],
                    args[5],
                    args[6],
                    args[7],
                    Arg::Ptr(ws.order.ptr()),
                    Arg::Ptr(ws.ticket.ptr()),
                    Arg::Ptr(ws.flags.ptr()),
                    Arg::U64(ws.issued),
                    Arg::U32(ws.period),
                ];
            }
            // The late and packed kernels need the state of the launch before them only
            // after their first frames (`griddepcontrol.wait` in `tbd.cu`): their blocks
            // may start while that launch's last blocks run. The wave kernel waits on its
            // flags instead.
            let programmatic = matches!(
                self.cfg.variant,
                Variant::Late { .. } | Variant::Wave { .. } | Variant::Packed { .. }
            ) && self.gpu.cc.0 >= 9;
            for k in kernel_names(&self.cfg, self.motions.len()) {
                cuda::launch_ex(
                    &self.gpu.stream,
                    &self.module,
                    k,
                    grid,
                    (bx, by, 1),
                    self.dynamic,
                    &args,
                    programmatic,
                )?;
            }
            if let Some(ws) = &mut self.wave {
                ws.issued += ws.items as u64;
                ws.period = ws
                    .period
                    .wrapping_add(self.cfg.wave().map_or(1, |(p, _)| p));
                self.cur = (ws.period & 1) as usize;
            } else {
                self.cur = 1 - self.cur;
            }
            self.slot = (self.slot + 1) % self.slots;
            Ok(())
        })
    }

    /// Waits for the device.
    pub fn sync(&self) -> Result<()> {
        cuda::catch(|| cuda::sync(&self.gpu.stream, "track-before-detect"))
    }

    /// The maps of the last launch: `maps_per_launch()` pairs (score, arg), `[H][W]` each.
    pub fn maps(&self) -> Result<Vec<MapPair>> {
        cuda::catch(|| {
            let n = self.h * self.w;
            let m = self.cfg.maps_per_launch();
            let mut s = vec![0f32; m * n];
            let mut a = vec![0u16; m * n];
            if self.cfg.map_bytes() == 3 {
                // f16 scores and u8 arg-max in the front of the buffers (`tbd.cu`, PACKED).
                let mut sh = vec![0f32; (m * n).div_ceil(2)];
                let mut ab = vec![0u16; (m * n).div_ceil(2)];
                cuda::dtoh(&self.gpu.stream, &self.score, 0, &mut sh, "copying maps")?;
                cuda::dtoh(&self.gpu.stream, &self.arg, 0, &mut ab, "copying maps")?;
                cuda::sync(&self.gpu.stream, "copying maps")?;
                let halves = sh.iter().flat_map(|x| {
                    let b = x.to_bits();
                    [b as u16, (b >> 16) as u16]
                });
                for (d, h) in s.iter_mut().zip(halves) {
                    *d = half_to_f32(h);
                }
                for (d, b) in a.iter_mut().zip(ab.iter().flat_map(|x| x.to_le_bytes())) {
                    *d = b as u16;
                }
            } else {
                cuda::dtoh(&self.gpu.stream, &self.score, 0, &mut s, "copying maps")?;
                cuda::dtoh(&self.gpu.stream, &self.arg, 0, &mut a, "copying maps")?;
                cuda::sync(&self.gpu.stream, "copying maps")?;
            }
            Ok(s.chunks(n)
                .zip(a.chunks(n))
                .map(|(s, a)| (s.to_vec(), a.to_vec()))
                .collect())
        })
    }

    /// The state `[V][H][W]` as f32.
    pub fn state(&self) -> Result<Vec<f32>> {
        cuda::catch(|| {
            let buf = &self.state[self.cur];
            let mut raw = vec![0u8; buf.len()];
            cuda::dtoh(&self.gpu.stream, buf, 0, &mut raw, "copying the state")?;
            cuda::sync(&self.gpu.stream, "copying the state")?;
            Ok(if self.cfg.half {
                raw.chunks_exact(2)
                    .map(|b| half_to_f32(u16::from_le_bytes([b[0], b[1]])))
                    .collect()
            } else {
                raw.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            })
        })
    }

    /// Milliseconds of `launches` launches on device-resident frames, by CUDA events.
    pub fn time_launches(&mut self, launches: usize) -> Result<f64> {
        let timer = cuda::catch(|| cuda::EventTimer::new(&self.gpu))?;
        cuda::catch(|| timer.start(&self.gpu.stream))?;
        for _ in 0..launches {
            self.launch()?;
        }
        cuda::catch(|| {
            timer.stop(&self.gpu.stream)?;
            cuda::sync(&self.gpu.stream, "timing")?;
            Ok(timer.elapsed_ms()? as f64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tbd::speeds_directions;

    #[test]
    fn the_wave_order_puts_every_tile_after_what_it_waits_for() {
        // Each (period, row, column) once, and after the nine tiles of the period before
        // around it (what the kernel waits for), for lags of 1 to 9 and grids with one
        // row or column, or more rows than periods x lag.
        for (periods, lag, tx, ty) in [(3, 1, 4, 5), (2, 8, 16, 64), (4, 5, 3, 2), (5, 9, 1, 7)] {
            let order = wave_order(periods, lag, tx, ty);
            assert_eq!(order.len(), periods as usize * tx * ty);
            let mut at = std::collections::HashMap::new();
            for (i, &o) in order.iter().enumerate() {
                let key = (o & 0xff, (o >> 8) & 0xfff, o >> 20);
                assert!(at.insert(key, i).is_none(), "{key:?} twice");
            }
            for (&(j, r, c), &i) in &at {
                if j == 0 {
                    continue;
                }
                for dr in -1i64..=1 {
                    for dc in -1i64..=1 {
                        let (rr, cc) = (r as i64 + dr, c as i64 + dc);
                        if rr < 0 || cc < 0 || rr >= ty as i64 || cc >= tx as i64 {
                            continue;
                        }
                        let before = at[&(j - 1, rr as u32, cc as u32)];
                        assert!(
                            before < i,
                            "{periods} periods, lag {lag}: ({j}, {r}, {c}) at {i} before ({}, {rr}, {cc}) at {before}",
                            j - 1
                        );
                    }
                }
            }
        }
        // The kernel's check: a tile must hold the state it samples.
        let motions = speeds_directions(&[0.0, 1.0], 12).unwrap();
        let wave = |frames, block| KernelConfig {
            variant: Variant::Wave { periods: 3, lag: 6 },
            ..KernelConfig::late(false, frames, block)
        };
        assert!(wave(10, (32, 16)).check(&motions).is_ok());
        for (periods, lag) in [(0, 6), (256, 6), (3, 0), (3, 4096)] {
            let c = KernelConfig {
                variant: Variant::Wave { periods, lag },
                ..wave(10, (32, 16))
            };
            assert!(c.check(&motions).is_err(), "{}", c.name());
        }
        assert!(wave(10, (32, 8)).check(&motions).is_err());
        assert!(wave(16, (32, 16)).check(&motions).is_err());
        assert_eq!(wave(10, (32, 16)).frames_per_launch(), 30);
        assert_eq!(wave(10, (32, 16)).maps_per_launch(), 3);
    }

    #[test]
    fn late_frame_tiles_are_counted_at_their_wider_form() {
        // 13 vectors of speed <= 1, D10, 32 x 16 blocks of 2 pixels: tiles of 34 rows; the
        // split rows would be 82 cells wide (64 + 2 x 9), the row-major chunked ones (f16
        // and f32 state) are 88 (12 + 64 + 9, to a multiple of 4), the wider; four tiles
        // for the late kernel, three for the wave kernel.
        let m = speeds_directions(&[0.0, 1.0], 12).unwrap();
        let cfg = |half| KernelConfig::late(half, 10, (32, 16));
        for half in [false, true] {
            assert_eq!(tiled_shared_bytes(&cfg(half), &m), 4 * 88 * 34 * 4);
            assert!(cfg(half).check(&m).is_ok());
            let wave = KernelConfig {
                variant: Variant::Wave { periods: 3, lag: 6 },
                ..cfg(half)
            };
            assert_eq!(tiled_shared_bytes(&wave, &m), 3 * 88 * 34 * 4);
        }
        // Four tiles of 26 rows of 152 (64 x 8 blocks): more than 48 KB, refused.
        assert!(KernelConfig::late(false, 10, (64, 8)).check(&m).is_err());
        // The text the launcher compiles says which form a width gets.
        let src = |w| source(&m, Dtype::F32, &cfg(true), w);
        assert!(src(1024).contains("#define FRAME_W4 1\n"));
        assert!(src(1022).contains("#define FRAME_W4 0\n"));
        assert!(src(1022).contains("#define FRAME_W2 1\n"));
        assert!(src(1021).contains("#define FRAME_W2 0\n"));
    }
}
