//! The kernel configurations of the GPU path (what the autotuner chooses among): the
//! variants, their parameters, names (`lean4v3/ldg/unroll/f32/64x12/K4`) and checks.

use super::super::frames::Dtype;
use super::super::motion::Motion;
use super::assemble::{
    dynamic_shared_bytes, shrink, tiled_shared_bytes, MAX_BLOCK_SHARED, VEC_NAMES,
};
use crate::error::{Error, Result};

/// How the recursion is mapped onto the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One thread per pixel, all vectors in one kernel, several frames per launch.
    Fused,
    /// One kernel per motion vector (shifts compiled in), the map folded in between.
    PerVector,
    /// Tiles with halos in shared memory, every frame emitted.
    Tiled,
    /// The state on chip for `frames` frames in tiles with halos, each thread a column of
    /// `rows` cells in registers, every frame emitted; every vector-dependent choice made
    /// at compile time (exchange, register taps, folded weights).
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
    /// the f32 reference rather than 1e-5 (`packed.cu`, `PACKED`); never chosen by the
    /// autotuner. The tile is `2 block.0` x `block.1 * rows` pixels. Its maps stay on the
    /// device as f16 scores and u8 arg-max ([`KernelConfig::map_bytes`]), widened by
    /// [`GpuTbd::maps`](super::GpuTbd::maps); at most 256 vectors.
    Packed {
        /// Rows per thread.
        rows: u32,
        /// Vectors folded between two barriers (1 to 8).
        vecs: u32,
        /// 0: one block a tile, a launch of `frames` frames after the launch before
        /// (`packedRvG`). 1 to 255: the wave form (`packedRvGwPgL`), as [`Variant::Wave`]:
        /// `periods` x `frames` frames a launch, one block a tile and period in the
        /// order of [`wave_order`](super::wave_order), each tile waiting for the tiles around it to finish
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
    /// taken `lag` tile rows behind those of period j - 1 ([`wave_order`](super::wave_order)), so that the
    /// state between periods is read back from L2 (`staged.cu`, `WAVE_PERIODS`).
    Wave {
        /// Decimation periods per launch (1 to 255).
        periods: u32,
        /// Tile rows between consecutive periods in the work order (1 to 4095).
        lag: u32,
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
            Variant::Tiled | Variant::Lean { .. } | Variant::Packed { .. }
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
    /// vectors). [`GpuTbd::maps`](super::GpuTbd::maps) returns f32 and u16 either way.
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
    pub(super) fn late_px(&self) -> Option<u32> {
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
            Variant::Lean { rows, .. } => {
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
            Variant::FusedCells { px, py } => (bx * px as usize, by * py as usize),
            Variant::Staged { px } | Variant::Late { px } => (bx * px as usize, by),
            Variant::Wave { .. } => (bx * 2, by),
            _ => (bx, by),
        }
    }

    /// A short name, e.g. `fused/ldg/unroll/f32/32x8/D1` or
    /// `lean4v3/ldg/unroll/f32/64x12/K4` (4 rows per thread, 3 vectors between barriers).
    pub fn name(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}x{}/{}{}",
            match self.variant {
                Variant::Fused => "fused".to_string(),
                Variant::PerVector => "per-vector".to_string(),
                Variant::Tiled => "tiled".to_string(),
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
                if let Some(rest) = r.strip_prefix("lean") {
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
        if self.emits_every_frame() {
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
        if let Variant::Lean { rows, .. } | Variant::Packed { rows, .. } = self.variant {
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
