//! The track-before-detect kernels (`tbd/kernels/`: `common.cuh` and each variant's `.cu`) compiled as plain C++ by the
//! host compiler and run on the CPU (a block's threads as std::threads where the kernel
//! synchronises) against the CPU reference: every variant, f32 and f16 state, u8 / u16 /
//! f32 frames, integer and fractional vectors, frames whose size is not a multiple of
//! the block. Skips with a printed reason when there is no C++20 compiler.

mod emulation;
mod tbd_common;

use emulation::{compile, compiler_for, run_piped};
use kestrel::tbd::cuda::MapPair;
use kestrel::tbd::cuda::{source, wave_order, KernelConfig, Variant};
use kestrel::tbd::{Dtype, Motion};
use tbd_common::*;

const SHIM: &str = include_str!("tbd_emulation/shim.h");
const HARNESS: &str = include_str!("tbd_emulation/harness.inc");

/// The host compiler, if it has C++20's `<barrier>` (the shim's `__syncthreads`).
fn compiler() -> Option<String> {
    compiler_for(&["-std=c++20"], "#include <barrier>\nint main() {}\n")
}

fn run_emulated(
    cxx: &str,
    dir: &std::path::Path,
    tag: &str,
    c: &Case,
    cfg: &KernelConfig,
    launches: usize,
) -> (Vec<MapPair>, Vec<f32>) {
    run_emulated_as(cxx, dir, tag, c, cfg, launches, c.w)
}

/// `run_emulated` with the kernels compiled for frames of width `src_w` (the source
/// depends on the width only through whether it holds whole 16-byte chunks of f32).
fn run_emulated_as(
    cxx: &str,
    dir: &std::path::Path,
    tag: &str,
    c: &Case,
    cfg: &KernelConfig,
    launches: usize,
    src_w: usize,
) -> (Vec<MapPair>, Vec<f32>) {
    let src = format!(
        "{SHIM}\n{}\n{HARNESS}",
        source(&c.motions, c.frame, cfg, src_w)
    );
    let exe = compile(
        cxx,
        dir,
        tag,
        &src,
        &["-std=c++20", "-O0", "-w", "-pthread"],
    );
    let n = c.h * c.w;
    let kind = match cfg.variant {
        Variant::Fused => 0,
        Variant::PerVector => 1,
        Variant::Tiled => 2,
        Variant::FusedCells { .. } => 4,
        Variant::Lean { .. } => 5,
        Variant::Staged { .. } | Variant::Late { .. } => 6,
        Variant::Wave { .. } => 7,
        Variant::Packed { .. } => 9,
    };
    let mut input = Vec::new();
    for v in [
        kind,
        c.h as i32,
        c.w as i32,
        cfg.block.0 as i32,
        cfg.block.1 as i32,
        launches as i32,
    ] {
        input.extend(v.to_le_bytes());
    }
    input.extend(c.alpha.to_le_bytes());
    if let Some((periods, lag)) = cfg.wave() {
        // The wave forms' work order as the launcher lays it out.
        let (ox, oy) = cfg.out_tile(&c.motions);
        let order = wave_order(periods, lag, c.w.div_ceil(ox), c.h.div_ceil(oy));
        input.extend((order.len() as u32).to_le_bytes());
        for o in order {
            input.extend(o.to_le_bytes());
        }
    }
    input.extend(vec![
        0u8;
        c.motions.len() * n * if cfg.half { 2 } else { 4 }
    ]);
    input.extend(&c.raw[..launches * cfg.frames_per_launch() * n * c.frame.size()]);
    let b = run_piped(&exe, input, tag);
    let mut at = 0;
    let mut maps = Vec::new();
    for _ in 0..launches {
        for _ in 0..cfg.maps_per_launch() {
            let s: Vec<f32> = b[at..at + 4 * n]
                .chunks(4)
                .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
                .collect();
            at += 4 * n;
            maps.push(s);
        }
        let mut args = Vec::new();
        for _ in 0..cfg.maps_per_launch() {
            let a: Vec<u16> = b[at..at + 2 * n]
                .chunks(2)
                .map(|x| u16::from_le_bytes([x[0], x[1]]))
                .collect();
            at += 2 * n;
            args.push(a);
        }
        let k = maps.len() - args.len();
        let scores: Vec<Vec<f32>> = maps.drain(k..).collect();
        maps.extend(scores.into_iter().zip(args).map(|(s, a)| {
            // Keep (score, arg) pairs in one list; encoded below.
            let mut v = s;
            v.extend(a.iter().map(|&x| x as f32));
            v
        }));
    }
    let state: Vec<f32> = if cfg.half {
        b[at..]
            .chunks(2)
            .map(|x| kestrel::tbd::cuda::half_to_f32(u16::from_le_bytes([x[0], x[1]])))
            .collect()
    } else {
        b[at..]
            .chunks(4)
            .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
            .collect()
    };
    assert_eq!(state.len(), c.motions.len() * n, "{tag}: state length");
    let pairs = maps
        .into_iter()
        .map(|v| (v[..n].to_vec(), v[n..].iter().map(|&x| x as u16).collect()))
        .collect();
    (pairs, state)
}

#[test]
fn every_variant_equals_the_cpu_reference() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let all = configs();
    // Two at a time: the C++ compiles dominate.
    std::thread::scope(|sc| {
        for part in 0..2 {
            let (all, cxx, dir) = (&all, &cxx, dir.path());
            sc.spawn(move || {
                for (ci, cfg) in all.iter().enumerate().filter(|(i, _)| i % 2 == part) {
                    // Each configuration on one frame type and one kind of vectors, in rotation.
                    // The late kernel mostly on f32 frames (its copies), on frames of
                    // odd and even width and of widths that hold whole 16-byte chunks.
                    let frame = match cfg.variant {
                        Variant::Late { .. } => [Dtype::F32, Dtype::F32, Dtype::U8][ci % 3],
                        _ => [Dtype::F32, Dtype::U8, Dtype::U16][ci % 3],
                    };
                    let integer = ci % 2 == 0;
                    let launches = 3;
                    // The kernels with pixels per thread on frames large enough that
                    // some threads lie inside (no bounds checks) at every decimation.
                    let (h, widths) = match cfg.variant {
                        Variant::FusedCells { .. } => (29, vec![37]),
                        // Widths a multiple of 8 copy the state to shared memory
                        // (16-byte rows for f32 and f16) and, with f32 frames and f16
                        // state, the frame tiles in 16-byte chunks: every D1 run, and
                        // the others at 24 and at an odd or even width that is not.
                        Variant::Late { .. } => (
                            13,
                            if cfg.frames == 1 {
                                vec![24]
                            } else {
                                vec![24, [21, 22][ci % 2]]
                            },
                        ),
                        _ => (13, vec![21]),
                    };
                    for w in widths {
                        let c = case(101 + ci as u64, h, w, launches * cfg.frames, frame, integer);
                        let (got, gs) =
                            run_emulated(cxx, dir, &format!("c{ci}w{w}"), &c, cfg, launches);
                        let (want, ws) = expected(&c, cfg, launches);
                        let what = format!(
                            "{} ({:?} frames, {} vectors, width {w})",
                            cfg.name(),
                            frame,
                            if integer { "integer" } else { "fractional" }
                        );
                        compare(&what, &c, cfg, &got, &gs, &want, &ws, 1e-6);
                    }
                }
            });
        }
    });
}

#[test]
fn decimated_kernels_equal_the_lean_kernel_at_emitted_frames() {
    // Integer vectors: a trajectory folded through D frames (fused, fused4x2, staged) is the
    // plain recursion's arithmetic in the same order, so its map and state equal, bit for
    // bit, the lean kernel's (plain, every frame) at frames D-1, 2D-1, ...
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (d, launches) = (3, 2);
    let c = case(77, 19, 29, d * launches, Dtype::F32, true);
    let lean = KernelConfig {
        variant: Variant::Lean { rows: 4, vecs: 1 },
        ldg: true,
        unroll: true,
        frames: d,
        block: (24, 5),
        half: false,
    };
    let (plain, plain_state) = run_emulated(&cxx, dir.path(), "lean", &c, &lean, launches);
    assert_eq!(plain.len(), d * launches);
    // The other kernels of the plain recursion, every frame, are the same arithmetic for
    // integer vectors: equal bit for bit.
    for (tag, cfg) in [
        (
            "lean2",
            KernelConfig {
                variant: Variant::Lean { rows: 4, vecs: 2 },
                ..lean
            },
        ),
        (
            "tiled",
            KernelConfig {
                variant: Variant::Tiled,
                unroll: false,
                block: (8, 4),
                ..lean
            },
        ),
    ] {
        let (m, st) = run_emulated(&cxx, dir.path(), tag, &c, &cfg, launches);
        assert_eq!(m, plain, "{}: maps", cfg.name());
        assert_eq!(st, plain_state, "{}: final state", cfg.name());
    }
    for (tag, cfg) in [
        ("fused", KernelConfig::fused(d)),
        (
            "cells",
            KernelConfig {
                variant: Variant::FusedCells { px: 4, py: 2 },
                block: (2, 2),
                ..KernelConfig::fused(d)
            },
        ),
        (
            "staged",
            KernelConfig {
                variant: Variant::Staged { px: 2 },
                block: (4, 4),
                ..KernelConfig::fused(d)
            },
        ),
    ] {
        let (dec, dec_state) = run_emulated(&cxx, dir.path(), tag, &c, &cfg, launches);
        assert_eq!(dec.len(), launches, "{tag}");
        for (l, (s, a)) in dec.iter().enumerate() {
            let (ps, pa) = &plain[(l + 1) * d - 1];
            assert!(
                s.iter().all(|v| v.is_finite()),
                "{tag}: map {l} not all written"
            );
            assert_eq!(s, ps, "{tag}: map after frame {}", (l + 1) * d - 1);
            assert_eq!(a, pa, "{tag}: arg-max after frame {}", (l + 1) * d - 1);
        }
        assert_eq!(dec_state, plain_state, "{tag}: final state");
    }
}

/// Five vectors whose shifts need no exchange, whole columns and edge rows, up to two
/// pixels a frame (fractional: four taps).
fn five_vectors() -> Vec<Motion> {
    [
        (0.0, 0.0),
        (0.866, 0.5),
        (-0.5, 0.866),
        (1.0, 0.0),
        (0.25, -1.5),
    ]
    .iter()
    .map(|&(x, y)| Motion::new(x, y))
    .collect()
}

#[test]
fn several_vectors_between_barriers_give_the_lean_kernels_bits() {
    // Folding two or three vectors between barriers only reorders independent work: on
    // fractional vectors (whole-column and edge-row exchanges) and f16 state, its maps,
    // arg-max and state equal the one-vector kernel's bit for bit, unrolled or not.
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let launches = 2;
    for (unroll, half) in [(true, true), (false, false)] {
        let one = KernelConfig {
            variant: Variant::Lean { rows: 3, vecs: 1 },
            ldg: true,
            unroll,
            frames: 3,
            block: (20, 5),
            half,
        };
        let mut c = case(91, 23, 31, 3 * launches, Dtype::F32, false);
        // Groups of 2 + 2 + 1 and 3 + 2.
        c.motions = five_vectors();
        let tag = format!("u{}h{}", unroll as u8, half as u8);
        let (m1, s1) = run_emulated(&cxx, dir.path(), &format!("{tag}v1"), &c, &one, launches);
        assert_eq!(m1.len(), 3 * launches);
        for vecs in [2, 3] {
            let more = KernelConfig {
                variant: Variant::Lean { rows: 3, vecs },
                ..one
            };
            let t = format!("{tag}v{vecs}");
            let (m, st) = run_emulated(&cxx, dir.path(), &t, &c, &more, launches);
            assert_eq!(m, m1, "{}: maps", more.name());
            assert_eq!(st, s1, "{}: final state", more.name());
        }
    }
}

#[test]
fn the_late_kernels_row_major_tiles_give_the_split_tiles_bits() {
    // f32 frames, f16 and f32 state, a width of whole 16-byte chunks: the frame tiles
    // copied in chunks into row-major rows read the same taps as the split rows (the kernel
    // compiled as for a width that is not a multiple of 4) and do the same arithmetic, so
    // maps, arg-max and state are equal bit for bit, on fractional vectors whose taps meet
    // every edge (halos of up to 9 pixels on 13 x 24 frames).
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let launches = 2;
    for (d, block, half) in [(3, (4, 4), true), (10, (4, 2), true), (10, (4, 2), false)] {
        let cfg = KernelConfig::late(half, d, block);
        let c = case(59 + d as u64, 13, 24, d * launches, Dtype::F32, false);
        let tag = format!("{d}{}", if half { "h" } else { "f" });
        let (rm, rs) =
            run_emulated_as(&cxx, dir.path(), &format!("r{tag}"), &c, &cfg, launches, 24);
        let (sm, ss) =
            run_emulated_as(&cxx, dir.path(), &format!("s{tag}"), &c, &cfg, launches, 23);
        assert_eq!(rm.len(), launches);
        assert!(
            rm.iter().all(|(s, _)| s.iter().all(|v| v.is_finite())),
            "{tag}: a map not all written"
        );
        assert_eq!(rm, sm, "{tag}: maps");
        assert_eq!(rs, ss, "{tag}: final state");
    }
}

#[test]
fn the_wave_kernel_gives_the_late_kernels_bits() {
    // Several periods a launch in the skewed work order (in the emulator one block after
    // another in ticket order; a block that would have to wait for a tile stops the run),
    // each period reading the state buffer the one before wrote, is the late kernel's
    // arithmetic: maps, arg-max and state equal bit for bit, over launches that follow
    // each other through the flags. Fractional vectors whose samples reach into every
    // neighbouring tile; tiles that divide the frame and tiles that do not; f32 and f16
    // state, f32 (state copied to shared memory or, at widths of no whole 16-byte rows,
    // sampled from global memory) and u8 frames; lags of 1, 2 and 3; odd period counts
    // (the state buffers change parity between launches).
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = 3;
    for (k, (periods, lag, half, frame, h, w)) in [
        (3, 2, false, Dtype::F32, 16, 64),
        (2, 1, true, Dtype::F32, 24, 64),
        (4, 3, false, Dtype::F32, 33, 52),
        (3, 2, true, Dtype::F32, 13, 44),
        (3, 2, false, Dtype::U8, 16, 64),
    ]
    .into_iter()
    .enumerate()
    {
        let late = KernelConfig::late(half, d, (16, 8));
        let wave = KernelConfig {
            variant: Variant::Wave { periods, lag },
            ..late
        };
        let launches = 2;
        let frames = launches * periods as usize * d;
        let c = case(300 + k as u64, h, w, frames, frame, false);
        assert!(
            wave.check(&c.motions).is_ok(),
            "{:?}",
            wave.check(&c.motions)
        );
        let (wm, ws) = run_emulated(&cxx, dir.path(), &format!("w{k}"), &c, &wave, launches);
        let (lm, ls) = run_emulated(
            &cxx,
            dir.path(),
            &format!("l{k}"),
            &c,
            &late,
            launches * periods as usize,
        );
        assert_eq!(wm.len(), launches * periods as usize);
        assert!(
            wm.iter().all(|(s, _)| s.iter().all(|v| v.is_finite())),
            "{}: a map not all written",
            wave.name()
        );
        assert_eq!(wm, lm, "{} on {w} x {h}: maps", wave.name());
        assert_eq!(ws, ls, "{} on {w} x {h}: final state", wave.name());
    }
}

#[test]
fn the_packed_kernel_is_its_f16_arithmetic() {
    // The packed kernel (the state in f16x2 words, two pixels a thread) against a model of
    // its arithmetic (`packed_expected`): maps, arg-max and state equal bit for bit. Tiles
    // meeting every edge; odd widths (the state in halves) and even ones (in words); the
    // five vectors and two vertical ones (shifts of up to 2 pixels, whole-column and
    // edge-row exchanges) and random sets; f32, u8 and u16 frames; 1 to 5 vectors between
    // barriers, the last group short; the vector loop unrolled or not. The model itself
    // lies within `packed_bound` of the f32 reference.
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let launches = 2;
    for (k, &(rows, vecs, frames, block, unroll, h, w, frame, five)) in [
        (3, 1, 2, (8, 4), true, 23, 31, Dtype::F32, true),
        (2, 2, 3, (10, 8), true, 29, 36, Dtype::U8, true),
        (4, 3, 2, (12, 3), false, 19, 40, Dtype::F32, false),
        (3, 2, 1, (6, 4), true, 17, 25, Dtype::U8, false),
        (2, 5, 2, (8, 6), true, 21, 34, Dtype::U16, false),
    ]
    .iter()
    .enumerate()
    {
        let cfg = KernelConfig {
            ldg: k % 2 == 0,
            unroll,
            ..KernelConfig::packed(rows, vecs, (0, 0), frames, block)
        };
        let mut c = case(301 + k as u64, h, w, frames * launches, frame, false);
        if five {
            // And two vertical shifts, which exchange only edge rows (one below, two
            // blended rows above).
            c.motions = five_vectors();
            c.motions.push(Motion::new(0.0, 1.0));
            c.motions.push(Motion::new(0.0, -1.5));
        }
        cfg.check(&c.motions).unwrap();
        let tag = format!("p{k}");
        let (got, gs) = run_emulated(&cxx, dir.path(), &tag, &c, &cfg, launches);
        let (want, ws) = packed_expected(&c, &cfg, launches);
        assert_eq!(got.len(), frames * launches, "{tag}: maps");
        assert!(
            got.iter().all(|(s, _)| s.iter().all(|v| v.is_finite())),
            "{}: a map not all written",
            cfg.name()
        );
        assert_same_bits(
            &format!("{} ({frame:?})", cfg.name()),
            &got,
            &gs,
            &want,
            &ws,
        );
        let (rm, rs) = expected(&c, &cfg, launches);
        let e = max_diff(&want, &ws, &rm, &rs);
        let bound = packed_bound(&c);
        assert!(
            e <= bound,
            "{}: {e:e} from the f32 reference (bound {bound:e})",
            cfg.name()
        );
        eprintln!(
            "{}: {e:e} from the f32 reference (bound {bound:e})",
            cfg.name()
        );
    }
}

#[test]
fn the_packed_wave_form_gives_the_packed_kernels_bits() {
    // The packed kernel's wave form (several periods a launch in the skewed work order,
    // each tile waiting on the flags of the tiles around it; in the emulator one block
    // after another in ticket order, and a block that would have to wait stops the run)
    // is the packed kernel's arithmetic: maps, arg-max and state equal bit for bit to
    // one launch a period, over launches that follow each other through the flags. Halos
    // that reach into every neighbouring tile (the five vectors: up to 2 pixels a frame);
    // tiles that divide the frame and tiles that do not; odd and even widths; f32, u8 and
    // u16 frames; lags of 1 to 3; odd period counts (the state buffers change parity
    // between launches); the vector loop unrolled or not.
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let launches = 2;
    for (k, &(periods, lag, rows, vecs, frames, block, unroll, h, w, frame, five)) in [
        (3, 2, 3, 2, 2, (8, 4), true, 23, 31, Dtype::F32, true),
        (2, 1, 2, 3, 2, (8, 6), true, 24, 32, Dtype::U8, false),
        (4, 3, 3, 4, 1, (6, 4), false, 21, 34, Dtype::F32, false),
        (1, 1, 3, 2, 2, (10, 8), true, 45, 37, Dtype::U16, true),
    ]
    .iter()
    .enumerate()
    {
        let plain = KernelConfig {
            ldg: k % 2 == 0,
            unroll,
            ..KernelConfig::packed(rows, vecs, (0, 0), frames, block)
        };
        let wave = KernelConfig {
            variant: KernelConfig::packed(rows, vecs, (periods, lag), frames, block).variant,
            ..plain
        };
        let mut c = case(
            320 + k as u64,
            h,
            w,
            frames * periods as usize * launches,
            frame,
            false,
        );
        if five {
            c.motions = five_vectors();
            c.motions.push(Motion::new(0.0, 1.0));
            c.motions.push(Motion::new(0.0, -1.5));
        }
        wave.check(&c.motions).unwrap();
        let (ox, oy) = wave.out_tile(&c.motions);
        assert!(
            w.div_ceil(ox) > 2 && h.div_ceil(oy) > 2,
            "{}: interior tiles",
            wave.name()
        );
        let (wm, ws) = run_emulated(&cxx, dir.path(), &format!("pw{k}"), &c, &wave, launches);
        let (pm, ps) = run_emulated(
            &cxx,
            dir.path(),
            &format!("pp{k}"),
            &c,
            &plain,
            launches * periods as usize,
        );
        assert_eq!(wm.len(), frames * periods as usize * launches);
        assert!(
            wm.iter().all(|(s, _)| s.iter().all(|v| v.is_finite())),
            "{}: a map not all written",
            wave.name()
        );
        assert_same_bits(&wave.name(), &wm, &ws, &pm, &ps);
    }
}
