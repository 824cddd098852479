//! Track-before-detect with manoeuvres on the GPU (`tbd/cuda/switch.rs`) against the
//! CPU recursion with the same matrix: random stochastic matrices, the `--switch`
//! shorthand and the identity, f32 and f16 state, decimation (tails included) through
//! `Tbd` on `Device::Cuda`, outputs poisoned before every launch. The GPU may fuse
//! multiply-adds, so values agree to rounding (f32: 1e-5 of the largest; f16 state: its
//! storage bound). Skips without a GPU; fails with KESTREL_REQUIRE_GPU=1.

mod gpu_common;
mod tbd_common;

use gpu_common::gpu_or_skip;
use kestrel::tbd::cpu::CpuState;
use kestrel::tbd::cuda::switch::GpuSwitch;
use kestrel::tbd::switch::Transition;
use kestrel::tbd::{speeds_directions, Motion, Params, Tbd};
use kestrel::Device;
use rand::{Rng, SeedableRng};
use tbd_common::random_matrix;

fn check(what: &str, got: &[f32], want: &[f32], bound: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let e = (*g as f64 - *w as f64).abs();
        assert!(e <= bound, "{what}: {i}: {g} vs {w} (bound {bound:e})");
    }
}

#[test]
fn switching_kernel_equals_the_cpu_recursion_on_the_gpu() {
    if !gpu_or_skip("switching_kernel_equals_the_cpu_recursion_on_the_gpu") {
        return;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(3802);
    for case in 0..8 {
        let motions: Vec<Motion> = match case % 3 {
            0 => speeds_directions(&[0.0, 1.0], 12).unwrap(),
            1 => speeds_directions(&[0.0, 1.0, 2.0], 8).unwrap(),
            _ => (0..rng.gen_range(2..9))
                .map(|_| Motion::new(rng.gen_range(-2.5f32..2.5), rng.gen_range(-2.5f32..2.5)))
                .collect(),
        };
        let v = motions.len();
        let m = match case % 4 {
            0 | 1 => random_matrix(&mut rng, v),
            2 => Transition::switching(&motions, rng.gen_range(0.05..0.5)).unwrap(),
            _ => Transition::identity(v),
        };
        let half = case % 2 == 1;
        let (h, w) = (rng.gen_range(20..90), rng.gen_range(20..130));
        let n = h * w;
        let alpha = rng.gen_range(0.05f32..0.6);
        let params = Params {
            motions: motions.clone(),
            alpha,
            decimation: 1,
            transition: Some(m.clone()),
        };
        let mut g = GpuSwitch::new(0, &params, h, w, half).unwrap();
        let mut cpu = CpuState::new(h, w, &motions, alpha)
            .unwrap()
            .with_transition(Some(m.clone()));
        let (mut s, mut a) = (vec![0.0; n], vec![0; n]);
        for k in 0..6 {
            let f: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0f32..3.0)).collect();
            g.poison().unwrap();
            let (gs, ga) = g.run(&[&f]).unwrap();
            cpu.block(&[&f], &mut s, &mut a);
            let st = cpu.state();
            let scale = st.iter().fold(1e-30f32, |x, y| x.max(y.abs())) as f64;
            let bound = if half {
                2f64.powi(-11) * scale / alpha as f64 * 1.01 + 1e-5 * scale
            } else {
                1e-5 * scale
            };
            let what = format!(
                "case {case} ({v} vectors, {} state, {w} x {h}), frame {k}",
                if half { "f16" } else { "f32" }
            );
            check(&format!("{what}: map"), &gs, &s, bound);
            assert!(
                ga.iter().all(|&x| (x as usize) < v),
                "{what}: arg-max unwritten"
            );
            let near: usize = ga.iter().zip(&a).filter(|(x, y)| x != y).count();
            assert!(half || near * 100 <= n, "{what}: {near} arg-max differ");
            check(&format!("{what}: state"), &g.state().unwrap(), &st, bound);
            if half {
                // The CPU model follows the stored state from here.
                cpu.set_state(&g.state().unwrap());
            }
        }
    }
}

#[test]
fn switching_tbd_on_the_gpu_equals_the_cpu_with_decimation() {
    if !gpu_or_skip("switching_tbd_on_the_gpu_equals_the_cpu_with_decimation") {
        return;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(3803);
    let motions = speeds_directions(&[0.0, 1.0], 12).unwrap();
    let (h, w) = (61, 77);
    let frames: Vec<Vec<f32>> = (0..11)
        .map(|_| (0..h * w).map(|_| rng.gen_range(-1.0f32..3.0)).collect())
        .collect();
    for (d, m) in [
        (1, Transition::switching(&motions, 0.2).unwrap()),
        (4, random_matrix(&mut rng, motions.len())),
    ] {
        let params = Params {
            motions: motions.clone(),
            alpha: 0.15,
            decimation: d,
            transition: Some(m),
        };
        let run = |device| {
            let mut t = Tbd::new(params.clone(), h, w, device).unwrap();
            let mut maps = Vec::new();
            for f in &frames {
                maps.extend(t.push(f).unwrap());
            }
            maps.extend(t.finish().unwrap());
            (maps, t.state().unwrap())
        };
        let (gm, gs) = run(Device::Cuda(0));
        let (cm, cs) = run(Device::Cpu);
        assert_eq!(
            gm.iter().map(|m| m.t).collect::<Vec<_>>(),
            cm.iter().map(|m| m.t).collect::<Vec<_>>(),
            "D{d}: emitted frames"
        );
        let scale = cs.iter().fold(1e-30f32, |x, y| x.max(y.abs())) as f64;
        for (g, c) in gm.iter().zip(&cm) {
            check(
                &format!("D{d}: map {}", c.t),
                &g.score,
                &c.score,
                1e-5 * scale,
            );
        }
        check(&format!("D{d}: state"), &gs, &cs, 1e-5 * scale);
    }
}
