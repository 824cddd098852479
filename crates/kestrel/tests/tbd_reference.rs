//! Track-before-detect on the CPU: the fast path against the per-pixel reference,
//! decimation against the plain recursion, a case by hand, detection and calibration.

use kestrel::tbd::cpu::{reference_block, CpuState};
use kestrel::tbd::cuda::MapPair;
use kestrel::tbd::{self, detect, Motion, Params};
use kestrel::Device;
use rand::{Rng, SeedableRng};

fn random_frames(rng: &mut rand::rngs::StdRng, t: usize, h: usize, w: usize) -> Vec<Vec<f32>> {
    (0..t)
        .map(|_| (0..h * w).map(|_| rng.gen_range(-1.0f32..3.0)).collect())
        .collect()
}

fn random_motions(rng: &mut rand::rngs::StdRng, n: usize, integer: bool) -> Vec<Motion> {
    (0..n)
        .map(|_| {
            if integer {
                Motion::new(rng.gen_range(-3..=3) as f32, rng.gen_range(-3..=3) as f32)
            } else {
                Motion::new(rng.gen_range(-2.5f32..2.5), rng.gen_range(-2.5f32..2.5))
            }
        })
        .collect()
}

/// Runs the reference over `frames` in blocks of `d`; returns the maps and final state.
fn reference_run(
    frames: &[Vec<f32>],
    h: usize,
    w: usize,
    m: &[Motion],
    alpha: f32,
    d: usize,
) -> (Vec<MapPair>, Vec<f32>) {
    let mut state = vec![0.0f32; m.len() * h * w];
    let mut next = state.clone();
    let mut maps = Vec::new();
    for block in frames.chunks(d) {
        let refs: Vec<&[f32]> = block.iter().map(|f| f.as_slice()).collect();
        maps.push(reference_block(&state, &refs, h, w, m, alpha, &mut next));
        std::mem::swap(&mut state, &mut next);
    }
    (maps, state)
}

fn fast_run(
    frames: &[Vec<f32>],
    h: usize,
    w: usize,
    m: &[Motion],
    alpha: f32,
    d: usize,
) -> (Vec<MapPair>, Vec<f32>) {
    let mut st = CpuState::new(h, w, m, alpha).unwrap();
    let mut maps = Vec::new();
    for block in frames.chunks(d) {
        let refs: Vec<&[f32]> = block.iter().map(|f| f.as_slice()).collect();
        let mut s = vec![f32::NAN; h * w];
        let mut a = vec![u16::MAX; h * w];
        st.block(&refs, &mut s, &mut a);
        maps.push((s, a));
    }
    (maps, st.state())
}

#[test]
fn fast_path_equals_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    for case in 0..12 {
        let (h, w) = (rng.gen_range(1..24), rng.gen_range(1..40));
        let integer = case % 2 == 0;
        let nv = rng.gen_range(1..8);
        let m = random_motions(&mut rng, nv, integer);
        let alpha = rng.gen_range(0.05f32..1.0);
        let d = [1, 1, 2, 3, 5][case % 5];
        let t = rng.gen_range(1..12);
        let frames = random_frames(&mut rng, t, h, w);
        let (want, ws) = reference_run(&frames, h, w, &m, alpha, d);
        let (got, gs) = fast_run(&frames, h, w, &m, alpha, d);
        // The same arithmetic in the same order: equal bit for bit.
        assert_eq!(got, want, "case {case}: maps ({h} x {w}, D {d}, {m:?})");
        assert_eq!(gs, ws, "case {case}: states");
    }
}

#[test]
fn decimation_equals_plain_for_integer_vectors() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    for case in 0..6 {
        let (h, w) = (rng.gen_range(8..30), rng.gen_range(8..30));
        let m = random_motions(&mut rng, 6, true);
        let d = rng.gen_range(2..7);
        let frames = random_frames(&mut rng, 3 * d, h, w);
        let (plain, ps) = fast_run(&frames, h, w, &m, 0.2, 1);
        let (dec, ds) = fast_run(&frames, h, w, &m, 0.2, d);
        for (b, map) in dec.iter().enumerate() {
            assert_eq!(
                map,
                &plain[(b + 1) * d - 1],
                "case {case}: block {b} (D {d})"
            );
        }
        assert_eq!(ds, ps, "case {case}: final states");
    }
}

#[test]
fn an_impulse_moves_with_its_vector() {
    // One bright pixel in frame 0, then empty frames: the state for v = (1, 0) carries
    // alpha (1 - alpha)^k to the pixel k to the right; v = (0.5, 0) splits it in two.
    let (h, w, alpha) = (5, 9, 0.25f32);
    let mut frames = vec![vec![0.0f32; h * w]; 4];
    frames[0][2 * w + 1] = 1.0;
    let m = [Motion::new(1.0, 0.0), Motion::new(0.5, 0.0)];
    let (_, state) = fast_run(&frames, h, w, &m, alpha, 1);
    let c = 1.0 - alpha;
    assert_eq!(state[2 * w + 4], alpha * c * c * c);
    assert_eq!(state[..h * w].iter().filter(|v| **v != 0.0).count(), 1);
    // Half-pixel steps: after 3 frames the mass spreads binomially over x = 1..4.
    let half = &state[h * w..];
    let total: f32 = half.iter().sum();
    assert!((total - alpha * c * c * c).abs() < 1e-7);
    let want = [1.0, 3.0, 3.0, 1.0].map(|b| b / 8.0 * alpha * c * c * c);
    for (k, wv) in want.iter().enumerate() {
        assert!((half[2 * w + 1 + k] - wv).abs() < 1e-7, "x {}", 1 + k);
    }
}

#[test]
fn fractional_decimation_is_sharper_and_exact_on_affine_images() {
    let (h, w) = (40, 40);
    let m = vec![Motion::new(0.5, 0.25), Motion::new(-0.75, 0.5)];
    let d = 4;
    // Affine frames: both schemes reproduce them exactly away from the borders.
    let frames: Vec<Vec<f32>> = (0..2 * d)
        .map(|k| {
            (0..h * w)
                .map(|i| 0.5 + 0.01 * (i % w) as f32 - 0.02 * (i / w) as f32 + 0.1 * k as f32)
                .collect()
        })
        .collect();
    let (plain, _) = fast_run(&frames, h, w, &m, 0.3, 1);
    let (dec, _) = fast_run(&frames, h, w, &m, 0.3, d);
    let margin = 2 * d + 2;
    for y in margin..h - margin {
        for x in margin..w - margin {
            let (a, b) = (plain[2 * d - 1].0[y * w + x], dec[1].0[y * w + x]);
            assert!(
                (a - b).abs() < 1e-5,
                "affine image at ({x}, {y}): {a} vs {b}"
            );
        }
    }
    // A point target moving with a fractional vector: the plain recursion blurs the
    // state every frame, the block does not, so its peak is higher.
    let v = Motion::new(0.5, 0.0);
    let frames: Vec<Vec<f32>> = (0..d)
        .map(|k| {
            let mut f = vec![0.0f32; h * w];
            let x = 10.0 + 0.5 * k as f32;
            let (x0, fx) = (x.floor() as usize, x.fract());
            f[20 * w + x0] = 1.0 - fx;
            f[20 * w + x0 + 1] += fx;
            f
        })
        .collect();
    let (plain, _) = fast_run(&frames, h, w, &[v], 0.3, 1);
    let (dec, _) = fast_run(&frames, h, w, &[v], 0.3, d);
    let peak = |s: &[f32]| s.iter().copied().fold(0.0f32, f32::max);
    let (pp, dp) = (peak(&plain[d - 1].0), peak(&dec[0].0));
    assert!(
        dp > pp * 1.05,
        "decimated peak {dp} should exceed plain {pp}"
    );
}

#[test]
fn non_maximum_suppression_keeps_local_maxima() {
    let (h, w) = (6, 8);
    let mut score = vec![0.0f32; h * w];
    score[w + 1] = 5.0;
    score[w + 2] = 4.0; // suppressed by its neighbour
    score[w + 6] = 3.0;
    score[4 * w + 4] = 2.0;
    score[4 * w + 5] = 2.0; // a tie: the first in raster order wins
    let map = tbd::Map {
        t: 7,
        h,
        w,
        score,
        arg: (0..h * w).map(|i| (i % 3) as u16).collect(),
    };
    let d = detect(&map, 1.0, 1).unwrap();
    let at: Vec<(usize, usize)> = d.iter().map(|d| (d.x, d.y)).collect();
    assert_eq!(at, vec![(1, 1), (6, 1), (4, 4)]);
    assert_eq!(d[0].motion, (w + 1) % 3);
    assert!(d.iter().all(|d| d.t == 7));
    assert_eq!(detect(&map, 4.5, 1).unwrap().len(), 1);
}

#[test]
fn calibrated_threshold_holds_its_false_alarm_rate() {
    let m = tbd::speeds_directions(&[0.0, 1.0], 8).unwrap();
    let (h, w) = (48, 48);
    let pfa = 1e-2;
    let noise = tbd::Noise::UNIT_GAUSSIAN;
    let thr = tbd::calibrate(Some((&m, 0.2, 1)), h, w, noise, &[pfa], 11).unwrap()[0];
    // Fresh noise: the measured rate is within sampling error of the target.
    let params = Params {
        motions: m,
        alpha: 0.2,
        decimation: 1,
        transition: None,
    };
    let gen = tbd::NoiseFrames::new(h, w, noise, 99);
    let mut t = tbd::Tbd::new(params, h, w, Device::Cpu).unwrap();
    let mut f = vec![0.0; h * w];
    let (mut over, mut n) = (0usize, 0usize);
    for k in 0..200 {
        gen.frame(k, &mut f);
        let map = t.push(&f).unwrap().pop().unwrap();
        if k >= tbd::detect::burn_in(0.2) {
            over += map.score.iter().filter(|&&s| s > thr).count();
            n += h * w;
        }
    }
    let rate = over as f64 / n as f64;
    assert!(
        (rate - pfa).abs() < 0.3 * pfa,
        "measured false-alarm rate {rate} for {pfa}"
    );
}

#[test]
fn bad_parameters_are_errors() {
    let m = vec![Motion::new(1.0, 0.0)];
    let p = |alpha: f32, d: usize, m: Vec<Motion>| Params {
        motions: m,
        alpha,
        decimation: d,
        transition: None,
    };
    assert!(tbd::Tbd::new(p(0.0, 1, m.clone()), 8, 8, Device::Cpu).is_err());
    assert!(tbd::Tbd::new(p(1.5, 1, m.clone()), 8, 8, Device::Cpu).is_err());
    assert!(tbd::Tbd::new(p(1.0, 1, m.clone()), 8, 8, Device::Cpu).is_ok());
    assert!(tbd::Tbd::new(p(0.5, 0, m.clone()), 8, 8, Device::Cpu).is_err());
    assert!(tbd::Tbd::new(p(0.5, 1, vec![Motion::new(9.0, 0.0)]), 8, 8, Device::Cpu).is_err());
    assert!(tbd::Tbd::new(p(0.5, 1, vec![]), 8, 8, Device::Cpu).is_err());
}

#[test]
fn streamed_maps_on_recycled_buffers_equal_the_fast_path() {
    // `Tbd` writes maps straight from the caller's frame (D = 1) or from its buffered
    // block (D > 1), into buffers given back by `recycle`: poisoned before they go
    // back, so a value the next block does not write shows up.
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let (h, w) = (19, 27);
    let m = random_motions(&mut rng, 5, false);
    let frames = random_frames(&mut rng, 7, h, w);
    for d in [1, 3] {
        let (want, ws) = fast_run(&frames, h, w, &m, 0.3, d);
        let params = Params {
            motions: m.clone(),
            alpha: 0.3,
            decimation: d,
            transition: None,
        };
        // Passes of 3 frames (D = 1): maps come back 3 at a time, the same maps.
        let mut t = tbd::Tbd::new(params, h, w, Device::Cpu)
            .unwrap()
            .with_cpu_frames_per_pass(3);
        let mut got = Vec::new();
        for (k, f) in frames.iter().enumerate() {
            let mut maps = t.push(f).unwrap();
            if k + 1 == frames.len() {
                maps.extend(t.finish().unwrap());
            }
            for mut map in maps {
                assert_eq!(
                    map.t,
                    if d == 1 {
                        got.len()
                    } else {
                        k.min((got.len() + 1) * d - 1)
                    }
                );
                got.push((map.score.clone(), map.arg.clone()));
                map.score.fill(f32::NAN);
                map.arg.fill(u16::MAX);
                t.recycle(map);
            }
        }
        assert_eq!(got, want, "D {d}: maps");
        assert_eq!(t.state().unwrap(), ws, "D {d}: state");
    }
}

#[test]
fn multi_step_passes_equal_single_steps() {
    // Bands of 64 rows with their recomputed edges, rows shifted by up to 3 (fractional
    // and integer vectors), passes of 2..6 frames and a shorter last one: every map and
    // the state equal one plain step at a time, bit for bit.
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    for case in 0..6 {
        let (h, w) = ([150, 70, 129, 200, 64, 97][case], rng.gen_range(5..40));
        let nv = rng.gen_range(1..6);
        let mut m = random_motions(&mut rng, nv, case % 2 == 0);
        m.push(Motion::new(0.5, [-2.5f32, 1.0, 3.0, 0.0, -0.25, 2.0][case]));
        let alpha = rng.gen_range(0.05f32..1.0);
        let k = 2 + case % 5;
        let frames = random_frames(&mut rng, 2 * k + 1, h, w);
        let (want, ws) = fast_run(&frames, h, w, &m, alpha, 1);
        let mut st = CpuState::new(h, w, &m, alpha).unwrap();
        let mut got = Vec::new();
        for pass in frames.chunks(k) {
            let refs: Vec<&[f32]> = pass.iter().map(|f| f.as_slice()).collect();
            let mut maps = vec![(vec![f32::NAN; h * w], vec![u16::MAX; h * w]); pass.len()];
            let mut rows: Vec<(&mut [f32], &mut [u16])> = maps
                .iter_mut()
                .map(|(s, a)| (&mut s[..], &mut a[..]))
                .collect();
            st.steps(&refs, &mut rows);
            got.extend(maps);
        }
        assert_eq!(got, want, "case {case}: maps ({h} x {w}, K {k}, {m:?})");
        assert_eq!(st.state(), ws, "case {case}: state");
    }
}
