//! Track-before-detect with manoeuvres (`tbd/switch.rs`) on the CPU: against the
//! definition (sample every source plane, sum in f64) on random frames and random
//! stochastic matrices; the identity is the plain recursion bit for bit; decimation
//! emits the every-frame maps at the block ends bit for bit.

mod tbd_common;

use kestrel::tbd::switch::{reference_step, Transition};
use kestrel::tbd::{speeds_directions, Motion, Params, Tbd};
use kestrel::Device;
use rand::{Rng, SeedableRng};
pub(crate) use tbd_common::random_matrix;

fn frames(rng: &mut impl Rng, t: usize, n: usize) -> Vec<Vec<f32>> {
    (0..t)
        .map(|_| (0..n).map(|_| rng.gen_range(-1.0f32..3.0)).collect())
        .collect()
}

fn params(motions: &[Motion], alpha: f32, d: usize, m: Option<Transition>) -> Params {
    Params {
        motions: motions.to_vec(),
        alpha,
        decimation: d,
        transition: m,
    }
}

/// Every map of a run, one frame at a time.
fn run_all(p: &Params, h: usize, w: usize, fr: &[Vec<f32>]) -> (Vec<kestrel::tbd::Map>, Vec<f32>) {
    let mut t = Tbd::new(p.clone(), h, w, Device::Cpu).unwrap();
    let mut maps = Vec::new();
    for f in fr {
        maps.extend(t.push(f).unwrap());
    }
    maps.extend(t.finish().unwrap());
    let st = t.state().unwrap();
    (maps, st)
}

#[test]
fn switching_equals_the_definition_on_random_matrices() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(38);
    for case in 0..6 {
        let (h, w) = (rng.gen_range(5..19), rng.gen_range(5..23));
        let motions = match case % 3 {
            0 => speeds_directions(&[0.0, 1.0], 8).unwrap(),
            1 => speeds_directions(&[0.0, 1.0, 1.5], 6).unwrap(),
            _ => (0..rng.gen_range(2..8))
                .map(|_| Motion::new(rng.gen_range(-2.0f32..2.0), rng.gen_range(-2.0f32..2.0)))
                .collect(),
        };
        let v = motions.len();
        let m = if case % 2 == 0 {
            random_matrix(&mut rng, v)
        } else {
            Transition::switching(&motions, rng.gen_range(0.05..0.6)).unwrap()
        };
        let alpha = rng.gen_range(0.05f32..0.6);
        let fr = frames(&mut rng, 7, h * w);
        let (maps, state) = run_all(&params(&motions, alpha, 1, Some(m.clone())), h, w, &fr);
        assert_eq!(maps.len(), fr.len());
        let n = h * w;
        let mut prev = vec![0.0f32; v * n];
        let mut next = vec![0.0f32; v * n];
        for (k, f) in fr.iter().enumerate() {
            let (score, arg) = reference_step(&prev, f, h, w, &motions, alpha, &m, &mut next);
            std::mem::swap(&mut prev, &mut next);
            let map = &maps[k];
            assert_eq!(map.t, k);
            for p in 0..n {
                let e = (map.score[p] as f64 - score[p]).abs();
                assert!(
                    e <= 1e-5 * (1.0 + score[p].abs()),
                    "case {case}, frame {k}, pixel {p}: {} vs {}",
                    map.score[p],
                    score[p]
                );
                if map.arg[p] != arg[p] {
                    // Only a near-tie may choose differently.
                    let other = prev[map.arg[p] as usize * n + p] as f64;
                    assert!(
                        (other - score[p]).abs() <= 1e-5 * (1.0 + score[p].abs()),
                        "case {case}, frame {k}, pixel {p}: arg {} vs {}",
                        map.arg[p],
                        arg[p]
                    );
                }
            }
        }
        for (i, (g, r)) in state.iter().zip(&prev).enumerate() {
            assert!(
                (g - r).abs() <= 1e-5 * (1.0 + r.abs()),
                "case {case}: state {i}: {g} vs {r}"
            );
        }
    }
}

#[test]
fn the_identity_is_the_plain_recursion_bit_for_bit() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (h, w) = (14, 19);
    let fract: Vec<Motion> = (0..5)
        .map(|_| Motion::new(rng.gen_range(-2.0f32..2.0), rng.gen_range(-2.0f32..2.0)))
        .collect();
    let motions = [speeds_directions(&[0.0, 1.0], 12).unwrap(), fract];
    for m in &motions {
        let fr = frames(&mut rng, 8, h * w);
        for d in [1, 3] {
            let plain = run_all(&params(m, 0.3, d, None), h, w, &fr);
            let eye = run_all(
                &params(m, 0.3, d, Some(Transition::identity(m.len()))),
                h,
                w,
                &fr,
            );
            let zero = run_all(
                &params(m, 0.3, d, Some(Transition::switching(m, 0.0).unwrap())),
                h,
                w,
                &fr,
            );
            assert_eq!(plain, eye, "D{d}: M = I");
            assert_eq!(plain, zero, "D{d}: --switch 0");
        }
    }
    // The mixed state of the identity is the state, bit for bit (-0 included), so the
    // switching step from it is the plain step.
    let v = 4;
    let mut st: Vec<f32> = (0..v * 3 * 7)
        .map(|_| rng.gen_range(-2.0f32..2.0))
        .collect();
    st[5] = -0.0;
    st[9] = f32::MIN_POSITIVE / 4.0;
    let mut out = vec![1.0f32; st.len()];
    Transition::identity(v).mix_rows(&st, &mut out, 7);
    assert!(st.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()));
    assert_eq!(Transition::identity(v).mix_planes(&st, 21), st);
}

#[test]
fn decimated_switching_emits_the_every_frame_maps() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let (h, w) = (12, 15);
    let motions = speeds_directions(&[0.0, 1.0, 1.5], 6).unwrap();
    let m = random_matrix(&mut rng, motions.len());
    // 8 frames in blocks of 3: maps after frames 2, 5 and 7 (the short last block).
    let fr = frames(&mut rng, 8, h * w);
    let (every, s1) = run_all(&params(&motions, 0.2, 1, Some(m.clone())), h, w, &fr);
    let (dec, s3) = run_all(&params(&motions, 0.2, 3, Some(m)), h, w, &fr);
    assert_eq!(dec.iter().map(|m| m.t).collect::<Vec<_>>(), vec![2, 5, 7]);
    for map in &dec {
        assert_eq!(map, &every[map.t], "frame {}", map.t);
    }
    assert_eq!(s1, s3);
}

#[test]
fn a_matrix_of_the_wrong_size_is_an_error() {
    let motions = speeds_directions(&[0.0, 1.0], 4).unwrap();
    let p = params(&motions, 0.2, 1, Some(Transition::identity(3)));
    let e = Tbd::new(p, 8, 8, Device::Cpu).err().unwrap();
    assert!(e.to_string().contains("3 x 3"), "{e}");
}
