//! Track-before-detect on the GPU against the CPU reference: every kernel variant on
//! fresh random frames and vector sets with NaN-poisoned outputs, the benchmark-sized
//! configurations, the end-to-end `Tbd` on `Device::Cuda` (tails and decimation
//! included) and the autotuner. Skips without a GPU; fails with KESTREL_REQUIRE_GPU=1.

mod gpu_common;
mod tbd_common;

use gpu_common::gpu_or_skip;
use kestrel::tbd::cuda::{GpuTbd, KernelConfig, MapPair, Variant};
use kestrel::tbd::{self, Dtype, Motion, Params, Tbd};
use kestrel::Device;
use tbd_common::*;

fn run_gpu(c: &Case, cfg: &KernelConfig, launches: usize) -> (Vec<MapPair>, Vec<f32>) {
    let params = Params {
        motions: c.motions.clone(),
        alpha: c.alpha,
        decimation: 1,
        transition: None,
    };
    let mut g = GpuTbd::new(0, &params, c.h, c.w, *cfg, c.frame).unwrap();
    let per = c.h * c.w * c.frame.size() * cfg.frames_per_launch();
    let mut maps = Vec::new();
    for l in 0..launches {
        g.poison().unwrap();
        g.load_frames(&c.raw[l * per..(l + 1) * per]).unwrap();
        g.launch().unwrap();
        maps.extend(g.maps().unwrap());
    }
    (maps, g.state().unwrap())
}

/// The benchmark's pattern: the frames of `c` loaded once into a ring of `slots` slots,
/// then `launches` launches one after another with nothing between them (launch l reads
/// slot l % slots). `c.frames` becomes the frames in the order the launches read them;
/// returns the last launch's maps and the final state.
fn run_back_to_back(
    c: &mut Case,
    cfg: &KernelConfig,
    slots: usize,
    launches: usize,
) -> (Vec<MapPair>, Vec<f32>) {
    let per = c.frames.len() / slots;
    let ring = c.frames.clone();
    c.frames = (0..launches)
        .flat_map(|l| {
            ring[(l % slots) * per..(l % slots + 1) * per]
                .iter()
                .cloned()
        })
        .collect();
    let params = Params {
        motions: c.motions.clone(),
        alpha: c.alpha,
        decimation: 1,
        transition: None,
    };
    let mut g = GpuTbd::new(0, &params, c.h, c.w, *cfg, c.frame).unwrap();
    g.poison().unwrap();
    g.frame_slots(slots).unwrap();
    let raw = c.raw.len() / slots;
    for sl in 0..slots {
        g.load_frames_into(sl, &c.raw[sl * raw..(sl + 1) * raw])
            .unwrap();
    }
    assert!(g.load_frames_into(slots, &c.raw[..raw]).is_err());
    for _ in 0..launches {
        g.launch().unwrap();
    }
    (g.maps().unwrap(), g.state().unwrap())
}

#[test]
fn every_variant_equals_the_cpu_reference() {
    if !gpu_or_skip("tbd every_variant_equals_the_cpu_reference") {
        return;
    }
    let mut k = 0;
    let mut all = configs();
    // The benchmark's shapes too.
    for half in [false, true] {
        all.push(KernelConfig {
            block: (32, 8),
            ..KernelConfig::fused(1)
        });
        all.push(KernelConfig {
            half,
            ..KernelConfig::fused(10)
        });
        all.push(KernelConfig {
            variant: Variant::Tiled,
            half,
            ldg: true,
            unroll: false,
            frames: 8,
            block: (32, 16),
        });
        for (rows, vecs, frames, block) in [
            (4, 1, 4, (128, 8)),
            (8, 1, 4, (128, 4)),
            (4, 3, 4, (96, 8)),
            (3, 2, 3, (40, 6)),
        ] {
            all.push(KernelConfig {
                variant: Variant::Lean { rows, vecs },
                half,
                ldg: true,
                unroll: true,
                frames,
                block,
            });
        }
        for d in [1, 10] {
            all.push(KernelConfig {
                variant: Variant::FusedCells { px: 4, py: 2 },
                half,
                block: (32, 4),
                ..KernelConfig::fused(d)
            });
        }
    }
    for (ci, cfg) in all.iter().enumerate() {
        // f32 frames with integer vectors, and u8 or u16 frames with fractional ones.
        let other = [Dtype::U8, Dtype::U16][ci % 2];
        for (frame, integer) in [(Dtype::F32, true), (other, false)] {
            {
                k += 1;
                let launches = 3;
                let c = case(500 + k, 67, 93, launches * cfg.frames, frame, integer);
                let (got, gs) = run_gpu(&c, cfg, launches);
                let (want, ws) = expected(&c, cfg, launches);
                let what = format!("{} ({frame:?}, integer {integer})", cfg.name());
                compare(&what, &c, cfg, &got, &gs, &want, &ws, 1e-5);
            }
        }
    }
}

#[test]
fn tile_kernels_on_a_frame_with_interior_tiles() {
    // The benchmark's tile shapes on a frame large enough that some blocks lie wholly
    // inside it (the path without per-cell tests), integer and fractional vectors.
    if !gpu_or_skip("tbd tile_kernels_on_a_frame_with_interior_tiles") {
        return;
    }
    let mut k = 0;
    for half in [false, true] {
        for (variant, frames, block) in [
            (Variant::Lean { rows: 4, vecs: 1 }, 4, (128, 8)),
            (Variant::Lean { rows: 4, vecs: 1 }, 4, (96, 8)),
            (Variant::Lean { rows: 8, vecs: 1 }, 4, (128, 4)),
            (Variant::Lean { rows: 8, vecs: 1 }, 8, (128, 4)),
            (Variant::Lean { rows: 2, vecs: 1 }, 4, (64, 16)),
            (Variant::Lean { rows: 4, vecs: 2 }, 4, (96, 8)),
            (Variant::Lean { rows: 4, vecs: 3 }, 4, (96, 8)),
            (Variant::Lean { rows: 4, vecs: 3 }, 4, (64, 12)),
        ] {
            let cfg = KernelConfig {
                variant,
                half,
                ldg: true,
                unroll: true,
                frames,
                block,
            };
            for (frame, integer) in [(Dtype::F32, false), (Dtype::U8, true)] {
                k += 1;
                let launches = 2;
                let mut c = case(900 + k, 150, 333, launches * frames, frame, integer);
                // At most one pixel per frame, as the benchmark's vectors (K = 8 tiles of
                // 32 rows keep 16 of them).
                for m in &mut c.motions {
                    *m = Motion::new(m.vx.clamp(-1.0, 1.0), m.vy.clamp(-1.0, 1.0));
                }
                let (got, gs) = run_gpu(&c, &cfg, launches);
                let (want, ws) = expected(&c, &cfg, launches);
                let what = format!("{} ({frame:?}, integer {integer})", cfg.name());
                compare(&what, &c, &cfg, &got, &gs, &want, &ws, 1e-5);
            }
        }
    }
}

#[test]
fn late_kernels_on_frames_of_whole_and_partial_chunks() {
    // The benchmark's late shapes on frames with interior blocks: widths a multiple of 8
    // (the sampled state copied to shared memory in 16-byte chunks, f32 and f16) and
    // not (sampled from global memory), f32 frames (copied tiles) and u8 frames.
    if !gpu_or_skip("tbd late_kernels_on_frames_of_whole_and_partial_chunks") {
        return;
    }
    let mut k = 0;
    for half in [false, true] {
        for (frames, block) in [(10, (32, 16)), (10, (32, 8)), (3, (32, 12)), (1, (32, 16))] {
            let cfg = KernelConfig::late(half, frames, block);
            for (w, frame, integer) in [
                (336, Dtype::F32, false),
                (336, Dtype::F32, true),
                (333, Dtype::F32, false),
                (336, Dtype::U8, false),
            ] {
                k += 1;
                let launches = 2;
                let mut c = case(1300 + k, 150, w, launches * frames, frame, integer);
                for m in &mut c.motions {
                    *m = Motion::new(m.vx.clamp(-1.0, 1.0), m.vy.clamp(-1.0, 1.0));
                }
                let (got, gs) = run_gpu(&c, &cfg, launches);
                let (want, ws) = expected(&c, &cfg, launches);
                let what = format!("{} ({frame:?}, {w} wide, integer {integer})", cfg.name());
                compare(&what, &c, &cfg, &got, &gs, &want, &ws, 1e-5);
            }
        }
    }
}

#[test]
fn late_kernel_launches_back_to_back() {
    // The benchmark's pattern: frames loaded once into a ring of slots, then launches one
    // after another with nothing between them, so that each (programmatic) launch of the
    // late kernel starts while the one before it still runs its last blocks (about two
    // waves here); it must still read the state that launch wrote, and the frames of its
    // own slot (three slots of different frames, five launches: slots 0, 1, 2, 0, 1).
    // Against the CPU reference on those frames in that order, f32 and f16 state. (A
    // kernel built without its griddepcontrol.wait passed
    // this test too on the H100: blocks start in index order, so the few that start early
    // sample state that the first wave wrote long before. The test guards the results of
    // back-to-back launches, not the wait itself.)
    if !gpu_or_skip("tbd late_kernel_launches_back_to_back") {
        return;
    }
    let launches = 5;
    for (k, half) in [false, true].into_iter().enumerate() {
        let cfg = KernelConfig::late(half, 10, (32, 16));
        let slots = 3;
        let mut c = case(
            1700 + k as u64,
            512,
            1024,
            slots * cfg.frames,
            Dtype::F32,
            false,
        );
        for m in &mut c.motions {
            *m = Motion::new(m.vx.clamp(-1.0, 1.0), m.vy.clamp(-1.0, 1.0));
        }
        let (got, gs) = run_back_to_back(&mut c, &cfg, slots, launches);
        let (want, ws) = expected(&c, &cfg, launches);
        let what = format!("{} back to back, {slots} frame slots", cfg.name());
        compare(&what, &c, &cfg, &got, &gs, &want[launches - 1..], &ws, 1e-5);
    }
}

#[test]
fn packed_kernel_launches_back_to_back() {
    // As `late_kernel_launches_back_to_back`, for the packed kernel (also a programmatic
    // launch: its blocks load their frames before `griddepcontrol.wait`): frames in a ring
    // of three slots, five launches with nothing between them, on 512 x 1024 frames (about
    // 2.3 waves of blocks, so that the next launch's blocks start while this one's last
    // ones run). The last launch's maps and the final state equal the model of the
    // kernel's f16 arithmetic (`packed_expected`) bit for bit.
    if !gpu_or_skip("tbd packed_kernel_launches_back_to_back") {
        return;
    }
    // The wave form too: its launches overlap without a wait for the launch before, its
    // tiles waiting on the flags of the last one's.
    let launches = 5;
    let slots = 3;
    for (vecs, periods, lag) in [(5, 0, 0), (4, 4, 4), (4, 3, 5)] {
        let cfg = KernelConfig::packed(3, vecs, (periods, lag), 4, (32, 11));
        let f = cfg.frames_per_launch();
        let mut c = case(1750, 512, 1024, slots * f, Dtype::F32, false);
        c.motions = tbd::motion::speeds_directions(&[0.0, 1.0], 12).unwrap();
        let (got, gs) = run_back_to_back(&mut c, &cfg, slots, launches);
        let (want, ws) = packed_expected(&c, &cfg, launches);
        let what = format!("{} back to back, {slots} frame slots", cfg.name());
        assert_same_bits(&what, &got, &gs, &want[(launches - 1) * f..], &ws);
        println!("{what}: bit for bit");
    }
}

#[test]
fn tbd_on_cuda_equals_tbd_on_cpu() {
    if !gpu_or_skip("tbd_on_cuda_equals_tbd_on_cpu") {
        return;
    }
    let c = case(9, 70, 90, 23, Dtype::F32, false);
    for (d, kernel) in [
        (1, None),
        (
            1,
            Some(KernelConfig {
                variant: Variant::Tiled,
                half: false,
                ldg: true,
                unroll: false,
                frames: 4,
                block: (32, 8),
            }),
        ),
        (
            1,
            Some(KernelConfig {
                variant: Variant::Lean { rows: 4, vecs: 1 },
                half: false,
                ldg: true,
                unroll: true,
                frames: 3,
                block: (32, 8),
            }),
        ),
        (5, None),
        (
            5,
            Some(KernelConfig {
                variant: Variant::FusedCells { px: 4, py: 2 },
                block: (8, 4),
                ..KernelConfig::fused(5)
            }),
        ),
        (
            5,
            Some(KernelConfig {
                variant: Variant::PerVector,
                ..KernelConfig::fused(5)
            }),
        ),
        // Two periods of 3 frames a launch (23 frames: three launches, then a tail of 5
        // frames on the CPU in blocks of 3 and 2, each with its map).
        (
            3,
            Some(KernelConfig {
                variant: Variant::Wave { periods: 2, lag: 1 },
                ..KernelConfig::late(false, 3, (16, 8))
            }),
        ),
    ] {
        let params = Params {
            motions: c.motions.clone(),
            alpha: c.alpha,
            decimation: d,
            transition: None,
        };
        let mut cpu = Tbd::new(params.clone(), c.h, c.w, Device::Cpu).unwrap();
        let opts = tbd::GpuOptions::default()
            .with_half(false)
            .with_kernel(kernel);
        let mut gpu = Tbd::with_gpu_options(params, c.h, c.w, Device::Cuda(0), opts).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for f in &c.frames {
            a.extend(cpu.push(f).unwrap());
            b.extend(gpu.push(f).unwrap());
        }
        a.extend(cpu.finish().unwrap());
        b.extend(gpu.finish().unwrap());
        assert_eq!(a.len(), b.len(), "D {d} {kernel:?}: maps");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.t, y.t);
            let scale = x.score.iter().fold(1e-30f32, |m, v| m.max(v.abs())) as f64;
            for (p, q) in x.score.iter().zip(&y.score) {
                assert!(
                    ((p - q).abs() as f64) <= 1e-5 * scale,
                    "D {d} {kernel:?}, frame {}: {p} vs {q}",
                    x.t
                );
            }
        }
        let (sa, sb) = (cpu.state().unwrap(), gpu.state().unwrap());
        let scale = sa.iter().fold(1e-30f32, |m, v| m.max(v.abs())) as f64;
        assert!(
            sa.iter()
                .zip(&sb)
                .all(|(p, q)| ((p - q).abs() as f64) <= 1e-5 * scale),
            "D {d}: states"
        );
    }
}

#[test]
fn autotuner_picks_a_kernel_that_runs() {
    if !gpu_or_skip("autotuner_picks_a_kernel_that_runs") {
        return;
    }
    let motions = tbd::speeds_directions(&[0.0, 1.0], 12).unwrap();
    for d in [1, 4] {
        let params = Params {
            motions: motions.clone(),
            alpha: 0.1,
            decimation: d,
            transition: None,
        };
        let cfg = tbd::autotune::choose(0, &params, 256, 256, Dtype::F32, false).unwrap();
        assert!(d == 1 || cfg.frames == d, "{cfg:?}");
        // Cached: the same answer again without timing.
        let again = tbd::autotune::choose(0, &params, 256, 256, Dtype::F32, false).unwrap();
        assert_eq!(cfg, again);
        eprintln!("D {d}: {}", cfg.name());
    }
}

#[test]
fn an_f16_state_refuses_a_frame_beyond_f16() {
    // The f16 state holds a weighted mean of frames: a pixel above 65504 would make it
    // infinite. The frame is refused by name (frame, row, column), before any work.
    if !gpu_or_skip("an_f16_state_refuses_a_frame_beyond_f16") {
        return;
    }
    let (h, w) = (32, 48);
    let params = Params {
        motions: tbd::speeds_directions(&[0.0, 1.0], 4).unwrap(),
        alpha: 0.2,
        decimation: 1,
        transition: None,
    };
    let opts = tbd::GpuOptions::default()
        .with_half(true)
        .with_kernel(Some(KernelConfig {
            half: true,
            ..KernelConfig::fused(1)
        }));
    let mut gpu = Tbd::with_gpu_options(params, h, w, Device::Cuda(0), opts).unwrap();
    let mut f = vec![1.0f32; h * w];
    gpu.push(&f).unwrap();
    f[5 * w + 7] = 7.0e4;
    let e = gpu.push(&f).unwrap_err().to_string();
    assert!(
        e.contains("frame 1, row 5, column 7") && e.contains("does not fit in f16"),
        "{e}"
    );
    // The largest half still fits.
    f[5 * w + 7] = 65504.0;
    gpu.push(&f).unwrap();
    assert_eq!(gpu.frames_seen(), 2);
}

#[test]
fn wave_kernel_equals_the_late_kernel_bit_for_bit() {
    // The late kernel over several periods a launch (tiles waiting on their neighbours'
    // flags, the state between periods dropped from L2 once read, launches following
    // each other through the flags) does the late kernel's arithmetic: its maps and state
    // equal the late kernel's bit for bit, run period by period on the same frames, with
    // every output poisoned first. The benchmark's vectors and tile; frames whose tiles
    // are whole (256 x 1024) and not (150 x 336); f32 and f16 state;
    // launches with the maps read after each, and launches back to back over frame slots.
    if !gpu_or_skip("tbd wave_kernel_equals_the_late_kernel_bit_for_bit") {
        return;
    }
    let motions = tbd::speeds_directions(&[0.0, 1.0], 12).unwrap();
    for (k, (half, periods, lag, h, w)) in [
        (false, 4, 6, 256, 1024),
        (true, 5, 5, 256, 1024),
        (false, 3, 2, 150, 336),
        (true, 10, 3, 150, 336),
    ]
    .into_iter()
    .enumerate()
    {
        let late = KernelConfig::late(half, 10, (32, 16));
        let wave = KernelConfig {
            variant: Variant::Wave { periods, lag },
            ..late
        };
        let launches = 3;
        let per_launch = wave.frames_per_launch();
        let mut c = case(
            2100 + k as u64,
            h,
            w,
            launches * per_launch,
            Dtype::F32,
            false,
        );
        c.motions = motions.clone();
        let params = Params {
            motions: c.motions.clone(),
            alpha: c.alpha,
            decimation: 10,
            transition: None,
        };
        // The reference: the late kernel, one period a launch.
        let (lm, ls) = run_gpu(&c, &late, launches * periods as usize);
        let per = h * w * c.frame.size() * per_launch;
        // Maps read after each launch.
        let (wm, ws) = run_gpu(&c, &wave, launches);
        let what = format!("{} on {w} x {h}", wave.name());
        assert_eq!(wm.len(), lm.len(), "{what}: maps");
        for (i, (a, b)) in wm.iter().zip(&lm).enumerate() {
            assert!(
                a.0.iter().all(|v| v.is_finite()),
                "{what}: map {i} not all written"
            );
            assert!(a.0 == b.0, "{what}: map {i} differs from the late kernel's");
            assert!(
                a.1 == b.1,
                "{what}: arg-max {i} differs from the late kernel's"
            );
        }
        assert!(ws == ls, "{what}: final state");
        // Back to back: the launches' frames in slots, nothing between the launches.
        let mut g = GpuTbd::new(0, &params, h, w, wave, c.frame).unwrap();
        g.poison().unwrap();
        g.frame_slots(launches).unwrap();
        for l in 0..launches {
            g.load_frames_into(l, &c.raw[l * per..(l + 1) * per])
                .unwrap();
        }
        for _ in 0..launches {
            g.launch().unwrap();
        }
        let last = g.maps().unwrap();
        assert!(
            last[..] == lm[lm.len() - periods as usize..],
            "{what}: back to back, the last launch's maps"
        );
        assert!(
            g.state().unwrap() == ls,
            "{what}: back to back, final state"
        );
    }
}

#[test]
fn the_packed_kernel_is_its_f16_arithmetic_on_the_gpu() {
    // The packed kernel (the state in f16x2 words) against a model of its f16 arithmetic
    // (`packed_expected`), bit for bit: the benchmark's vectors and tile shapes on frames
    // with interior tiles, of even width (words) and odd (halves), f32 and u8 frames; small
    // tiles on random vector sets. Outputs poisoned before every launch. The model lies
    // within `packed_bound` of the f32 reference. The wave forms (periods, lag) likewise.
    if !gpu_or_skip("tbd the_packed_kernel_is_its_f16_arithmetic_on_the_gpu") {
        return;
    }
    let bench = tbd::motion::speeds_directions(&[0.0, 1.0], 12).unwrap();
    let mut k = 0;
    for (rows, vecs, frames, block, h, w, frame, big, wave) in [
        (4, 3, 4, (64, 12), 150, 334, Dtype::F32, true, (0, 0)),
        (4, 3, 4, (64, 12), 149, 333, Dtype::U8, true, (0, 0)),
        (2, 5, 4, (32, 16), 150, 334, Dtype::F32, true, (0, 0)),
        (2, 5, 4, (32, 16), 149, 333, Dtype::U8, true, (0, 0)),
        (2, 4, 4, (64, 16), 150, 334, Dtype::F32, true, (0, 0)),
        (3, 5, 4, (32, 11), 149, 333, Dtype::F32, true, (0, 0)),
        (3, 4, 4, (32, 11), 150, 334, Dtype::U8, true, (0, 0)),
        (4, 1, 4, (64, 8), 150, 334, Dtype::U8, true, (0, 0)),
        (2, 3, 4, (64, 16), 150, 334, Dtype::F32, true, (0, 0)),
        (3, 3, 4, (64, 16), 149, 333, Dtype::F32, true, (0, 0)),
        (4, 3, 4, (32, 16), 150, 334, Dtype::F32, true, (0, 0)),
        (3, 2, 2, (8, 4), 67, 93, Dtype::F32, false, (0, 0)),
        (2, 3, 3, (16, 8), 67, 94, Dtype::U8, false, (0, 0)),
        (3, 4, 4, (32, 11), 150, 334, Dtype::F32, true, (4, 4)),
        (3, 4, 4, (32, 11), 149, 333, Dtype::U8, true, (3, 5)),
        (3, 2, 2, (8, 4), 67, 93, Dtype::F32, false, (3, 1)),
        (3, 3, 2, (16, 8), 67, 94, Dtype::U8, false, (2, 2)),
    ] {
        k += 1;
        let cfg = KernelConfig::packed(rows, vecs, wave, frames, block);
        let launches = 2;
        let mut c = case(
            900 + k,
            h,
            w,
            launches * cfg.frames_per_launch(),
            frame,
            false,
        );
        if big {
            c.motions = bench.clone();
        }
        let (got, gs) = run_gpu(&c, &cfg, launches);
        let (want, ws) = packed_expected(&c, &cfg, launches);
        let what = format!("{} ({frame:?}, {h} x {w})", cfg.name());
        assert_same_bits(&what, &got, &gs, &want, &ws);
        let (rm, rs) = expected(&c, &cfg, launches);
        let e = max_diff(&want, &ws, &rm, &rs);
        let bound = packed_bound(&c);
        assert!(
            e <= bound,
            "{what}: {e:e} from the f32 reference (bound {bound:e})"
        );
        println!("{what}: bit for bit; {e:e} from the f32 reference (bound {bound:e})");
    }
}
