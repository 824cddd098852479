//! The kernel source assembly: the compile-time parameters of a configuration, the
//! shared device header (`kernels/common.cuh`) and the variant's kernel file; the
//! kernels' names and shared memory; the wave form's work order.

use super::super::frames::Dtype;
use super::super::motion::{taps, Motion};
use super::config::{KernelConfig, Variant};

/// The device helpers every kernel file uses.
pub const COMMON_CUH: &str = include_str!("../kernels/common.cuh");
/// The trajectory kernels: fused, per-vector, several pixels a thread.
pub const FUSED_CU: &str = include_str!("../kernels/fused.cu");
/// Tiles with halos in shared memory.
pub const TILED_CU: &str = include_str!("../kernels/tiled.cu");
/// The lean kernel.
pub const LEAN_CU: &str = include_str!("../kernels/lean.cu");
/// Frame tiles staged in shared memory: staged, late and wave.
pub const STAGED_CU: &str = include_str!("../kernels/staged.cu");
/// The f16x2 kernel.
pub const PACKED_CU: &str = include_str!("../kernels/packed.cu");

/// The kernel file of a variant.
pub fn kernel_file(variant: Variant) -> &'static str {
    match variant {
        Variant::Fused | Variant::PerVector | Variant::FusedCells { .. } => FUSED_CU,
        Variant::Tiled => TILED_CU,
        Variant::Lean { .. } => LEAN_CU,
        Variant::Staged { .. } | Variant::Late { .. } | Variant::Wave { .. } => STAGED_CU,
        Variant::Packed { .. } => PACKED_CU,
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

/// Shared memory of the tiled, lean and staged kernels in bytes.
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
        Variant::Lean { rows, .. } => {
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
/// f32 frames keeps a copy of the state it samples there (`S_SST` in `staged.cu`: per vector
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
            // launch would fit the registers) alpha X of every thread's cells (`lean.cu`).
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
            // pairs, a word a row and frame (`packed.cu`).
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
pub(super) const MAX_BLOCK_SHARED: usize = 227 * 1024;

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
    if cfg.variant == Variant::Fused {
        s += "#define FUSED 1\n";
    }
    if cfg.variant == Variant::Tiled {
        s += "#define TBD_TILED 1\n";
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
    s += COMMON_CUH;
    s += kernel_file(cfg.variant);
    s
}

/// The kernels of a configuration, in launch order.
pub fn kernel_names(cfg: &KernelConfig, nv: usize) -> Vec<&'static str> {
    match cfg.variant {
        Variant::Fused => vec!["tbd_fused"],
        Variant::Tiled => vec!["tbd_tiled"],
        Variant::Lean { .. } => vec!["tbd_lean"],
        Variant::Packed { .. } => vec!["tbd_packed"],
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

pub(super) const VEC_NAMES: [&str; 64] = [
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
