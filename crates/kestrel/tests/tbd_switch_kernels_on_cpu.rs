//! The switching kernel (`tbd/kernels/switch.cu`, after `common.cuh` and `fused.cu`) compiled as
//! plain C++ and run on the CPU (a block's threads as std::threads at a barrier): equal
//! bit for bit to the CPU's recursion with the same transition matrix (random stochastic
//! matrices, the `--switch` shorthand, the identity = the plain recursion), f32 state;
//! with f16 state equal bit for bit to the CPU recursion whose state is rounded to f16
//! after every frame; decimation (maps at the block ends only); frames whose size is not
//! a multiple of the block. Skips with a printed reason when there is no C++20 compiler.

mod emulation;

use super::tbd_switch::random_matrix;
use emulation::{compile, compiler_for, run_piped};
use kestrel::tbd::cpu::CpuState;
use kestrel::tbd::cuda::half_to_f32;
use kestrel::tbd::cuda::switch::switch_source;
use kestrel::tbd::switch::Transition;
use kestrel::tbd::{speeds_directions, Motion};
use rand::{Rng, SeedableRng};

const SHIM: &str = include_str!("tbd_emulation/shim.h");
const HARNESS: &str = include_str!("tbd_emulation/switch_harness.inc");

fn compiler() -> Option<String> {
    compiler_for(&["-std=c++20"], "#include <barrier>\nint main() {}\n")
}

type Maps = Vec<(Vec<f32>, Vec<u16>)>;

struct Run<'a> {
    h: usize,
    w: usize,
    motions: &'a [Motion],
    m: &'a Transition,
    alpha: f32,
    d: usize,
    frames: &'a [Vec<f32>],
    half: bool,
    block: (u32, u32),
}

fn emulate(cxx: &str, dir: &std::path::Path, tag: &str, r: &Run) -> (Maps, Vec<f32>) {
    let src = format!(
        "{SHIM}\n{}\n{HARNESS}",
        switch_source(r.motions, r.half, r.block, r.w)
    );
    let exe = compile(
        cxx,
        dir,
        tag,
        &src,
        &["-std=c++20", "-O1", "-w", "-pthread"],
    );
    let mut input = Vec::new();
    for v in [r.h, r.w, r.frames.len(), r.d] {
        input.extend((v as i32).to_le_bytes());
    }
    input.extend(r.alpha.to_le_bytes());
    let (start, src, wt) = r.m.columns();
    start.iter().for_each(|x| input.extend(x.to_le_bytes()));
    input.extend((src.len() as u32).to_le_bytes());
    src.iter().for_each(|x| input.extend(x.to_le_bytes()));
    wt.iter().for_each(|x| input.extend(x.to_le_bytes()));
    r.frames
        .iter()
        .flatten()
        .for_each(|x| input.extend(x.to_le_bytes()));
    let b = run_piped(&exe, input, tag);
    let n = r.h * r.w;
    let emitted = r.frames.len().div_ceil(r.d);
    let mut at = 0;
    let mut maps = Vec::new();
    for _ in 0..emitted {
        let s = b[at..at + 4 * n]
            .chunks(4)
            .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
            .collect();
        at += 4 * n;
        let a = b[at..at + 2 * n]
            .chunks(2)
            .map(|x| u16::from_le_bytes([x[0], x[1]]))
            .collect();
        at += 2 * n;
        maps.push((s, a));
    }
    let state: Vec<f32> = if r.half {
        b[at..]
            .chunks(2)
            .map(|x| half_to_f32(u16::from_le_bytes([x[0], x[1]])))
            .collect()
    } else {
        b[at..]
            .chunks(4)
            .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
            .collect()
    };
    assert_eq!(state.len(), r.motions.len() * n, "{tag}: state length");
    (maps, state)
}

/// f32 to f16 and back, nearest even (as cvt.rn.f16.f32), for the magnitudes here.
fn round_half(x: f32) -> f32 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let a = x.abs() as f64;
    let e = (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(-14);
    let ulp = 2f64.powi(e - 10);
    (((a / ulp).round_ties_even() * ulp) as f32).copysign(x)
}

/// The CPU's recursion: maps at the block ends; with `half`, the state rounded to f16
/// after every frame (what the kernel stores).
fn expected(r: &Run) -> (Maps, Vec<f32>) {
    let n = r.h * r.w;
    let mut st = CpuState::new(r.h, r.w, r.motions, r.alpha)
        .unwrap()
        .with_transition(Some(r.m.clone()));
    let mut maps = Vec::new();
    let (mut s, mut a) = (vec![0.0; n], vec![0; n]);
    for (k, f) in r.frames.iter().enumerate() {
        st.block(&[f], &mut s, &mut a);
        if r.half {
            let rounded: Vec<f32> = st.state().iter().map(|&x| round_half(x)).collect();
            st.set_state(&rounded);
        }
        if (k + 1) % r.d == 0 || k + 1 == r.frames.len() {
            maps.push((s.clone(), a.clone()));
        }
    }
    (maps, st.state())
}

fn same_bits(what: &str, got: &(Maps, Vec<f32>), want: &(Maps, Vec<f32>)) {
    assert_eq!(got.0.len(), want.0.len(), "{what}: number of maps");
    for (k, ((gs, ga), (ws, wa))) in got.0.iter().zip(&want.0).enumerate() {
        for i in 0..gs.len() {
            assert!(
                gs[i].to_bits() == ws[i].to_bits() && ga[i] == wa[i],
                "{what}: map {k}, pixel {i}: {} ({}) vs {} ({})",
                gs[i],
                ga[i],
                ws[i],
                wa[i]
            );
        }
    }
    for (i, (g, w)) in got.1.iter().zip(&want.1).enumerate() {
        assert!(g.to_bits() == w.to_bits(), "{what}: state {i}: {g} vs {w}");
    }
}

#[test]
fn the_switching_kernel_equals_the_cpu_recursion() {
    let Some(cxx) = compiler() else {
        eprintln!("skipped: no C++20 compiler with <barrier>");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3801);
    // (vectors, matrix kind, f16 state, decimation, block)
    type Kind = (usize, usize, bool, usize, (u32, u32));
    let cases: [Kind; 6] = [
        (0, 0, false, 1, (8, 4)),
        (1, 1, false, 3, (8, 4)),
        (2, 0, true, 1, (8, 4)),
        (0, 1, true, 2, (32, 8)),
        (2, 2, false, 1, (8, 4)),
        (1, 0, false, 1, (32, 8)),
    ];
    std::thread::scope(|sc| {
        for part in 0..2 {
            let (cxx, dir) = (&cxx, dir.path());
            let mine: Vec<_> = cases
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == part)
                .map(|(i, c)| (i, *c, rng.gen::<u64>()))
                .collect();
            sc.spawn(move || {
                for (ci, (vk, mk, half, d, block), seed) in mine {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                    let motions = match vk {
                        0 => speeds_directions(&[0.0, 1.0], 8).unwrap(),
                        1 => speeds_directions(&[0.0, 1.0, 2.0], 6).unwrap(),
                        _ => (0..rng.gen_range(2..6))
                            .map(|_| {
                                Motion::new(rng.gen_range(-2.0f32..2.0), rng.gen_range(-2.0f32..2.0))
                            })
                            .collect(),
                    };
                    let m = match mk {
                        0 => random_matrix(&mut rng, motions.len()),
                        1 => Transition::switching(&motions, rng.gen_range(0.05..0.5)).unwrap(),
                        _ => Transition::identity(motions.len()),
                    };
                    let (h, w) = (rng.gen_range(9..15), rng.gen_range(13..23));
                    let frames: Vec<Vec<f32>> = (0..5)
                        .map(|_| (0..h * w).map(|_| rng.gen_range(-1.0f32..3.0)).collect())
                        .collect();
                    let r = Run {
                        h,
                        w,
                        motions: &motions,
                        m: &m,
                        alpha: rng.gen_range(0.05f32..0.6),
                        d,
                        frames: &frames,
                        half,
                        block,
                    };
                    let got = emulate(cxx, dir, &format!("sw{ci}"), &r);
                    let what = format!(
                        "case {ci}: {} vectors, matrix {mk}, {} state, D{d}, block {block:?}, {w} x {h}",
                        motions.len(),
                        if half { "f16" } else { "f32" }
                    );
                    // The identity: the CPU's plain recursion (no transition at all).
                    let want = if mk == 2 {
                        let mut st = CpuState::new(h, w, &motions, r.alpha).unwrap();
                        let n = h * w;
                        let (mut s, mut a) = (vec![0.0; n], vec![0; n]);
                        let mut maps = Vec::new();
                        for (k, f) in frames.iter().enumerate() {
                            st.block(&[f], &mut s, &mut a);
                            if (k + 1) % d == 0 || k + 1 == frames.len() {
                                maps.push((s.clone(), a.clone()));
                            }
                        }
                        (maps, st.state())
                    } else {
                        expected(&r)
                    };
                    same_bits(&what, &got, &want);
                }
            });
        }
    });
}
