//! Shared by the track-before-detect kernel tests: random cases, the kernel
//! configurations to cover, the CPU expectation of a run and the comparison.
#![allow(dead_code)]

use kestrel::tbd::cpu::CpuState;
use kestrel::tbd::cuda::MapPair;
use kestrel::tbd::cuda::{KernelConfig, Variant};
use kestrel::tbd::motion::taps;
use kestrel::tbd::switch::Transition;
use kestrel::tbd::{Dtype, Motion};
use rand::{Rng, SeedableRng};

pub struct Case {
    pub h: usize,
    pub w: usize,
    pub motions: Vec<Motion>,
    pub alpha: f32,
    pub frame: Dtype,
    /// Frames as stored (bytes) and as the CPU reads them (f32), `[T][H][W]`.
    pub raw: Vec<u8>,
    pub frames: Vec<Vec<f32>>,
}

pub fn case(seed: u64, h: usize, w: usize, t: usize, frame: Dtype, integer: bool) -> Case {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let nv = rng.gen_range(2..7);
    let motions = (0..nv)
        .map(|_| {
            if integer {
                Motion::new(rng.gen_range(-2..=2) as f32, rng.gen_range(-2..=2) as f32)
            } else {
                Motion::new(rng.gen_range(-2.0f32..2.0), rng.gen_range(-2.0f32..2.0))
            }
        })
        .collect();
    let mut raw = Vec::new();
    let mut frames = Vec::new();
    for _ in 0..t {
        let mut f = Vec::with_capacity(h * w);
        for _ in 0..h * w {
            match frame {
                Dtype::U8 => {
                    let v: u8 = rng.gen();
                    raw.push(v);
                    f.push(v as f32);
                }
                Dtype::U16 => {
                    let v: u16 = rng.gen();
                    raw.extend(v.to_le_bytes());
                    f.push(v as f32);
                }
                _ => {
                    let v: f32 = rng.gen_range(-1.0..3.0);
                    raw.extend(v.to_le_bytes());
                    f.push(v);
                }
            }
        }
        frames.push(f);
    }
    Case {
        h,
        w,
        motions,
        alpha: rng.gen_range(0.05..0.6),
        frame,
        raw,
        frames,
    }
}

/// The configurations every test covers (small tiles, so that the tests are quick and
/// tiles meet the frame's edges).
pub fn configs() -> Vec<KernelConfig> {
    let k = |variant, half, ldg, unroll, frames, block| KernelConfig {
        variant,
        half,
        ldg,
        unroll,
        frames,
        block,
    };
    use Variant::*;
    vec![
        k(Fused, false, true, true, 1, (8, 4)),
        k(Fused, false, true, true, 3, (8, 4)),
        k(Fused, false, false, false, 1, (8, 4)),
        k(Fused, false, false, false, 2, (16, 2)),
        k(PerVector, false, true, true, 1, (16, 2)),
        k(PerVector, false, false, true, 2, (8, 4)),
        k(Tiled, false, true, false, 1, (8, 4)),
        k(Tiled, false, true, false, 3, (8, 4)),
        k(Tiled, false, false, false, 2, (16, 8)),
        k(Fused, true, true, true, 1, (8, 4)),
        k(Fused, true, true, true, 3, (8, 4)),
        k(PerVector, true, true, true, 1, (16, 2)),
        k(Tiled, true, true, false, 3, (8, 4)),
        // The lean kernel: tiles of 16 x 12, 24 x 20 and 12 x 8 cells (halos of up to 6
        // pixels meet the edges), f32 and f16 state, frames in registers or read per
        // vector (6 x 6), shifts of up to 2 pixels (edge rows of
        // one or two cells per thread), the vector loop unrolled or not.
        k(Lean { rows: 3, vecs: 1 }, false, true, true, 2, (16, 4)),
        k(Lean { rows: 4, vecs: 1 }, false, false, true, 3, (24, 5)),
        k(Lean { rows: 2, vecs: 1 }, false, true, false, 1, (12, 4)),
        k(Lean { rows: 3, vecs: 1 }, true, true, true, 2, (16, 4)),
        k(Lean { rows: 6, vecs: 1 }, false, true, true, 6, (32, 5)),
        k(Lean { rows: 1, vecs: 1 }, false, true, true, 2, (16, 12)),
        // Two or three vectors between barriers (random vector counts: the last group is
        // short where the count is not a multiple), f16 state, the loop unrolled or not.
        k(Lean { rows: 3, vecs: 2 }, false, true, true, 2, (16, 4)),
        k(Lean { rows: 4, vecs: 2 }, true, false, true, 3, (24, 5)),
        k(Lean { rows: 2, vecs: 2 }, false, true, false, 1, (12, 4)),
        k(Lean { rows: 3, vecs: 3 }, true, true, true, 2, (16, 4)),
        // Frame tiles staged in shared memory: 1 and 2 pixels per thread, blocks of 8 x 4
        // and 4 x 3 pixels (halos of up to (D - 1) x 2 meet every edge), f16 state.
        k(Staged { px: 2 }, false, false, true, 3, (4, 4)),
        k(Staged { px: 1 }, false, true, true, 2, (4, 3)),
        k(Staged { px: 2 }, false, false, true, 1, (2, 3)),
        k(Staged { px: 2 }, true, false, true, 4, (4, 2)),
        // The state sampled after the frames: the same shapes, f16 state too.
        k(Late { px: 2 }, false, false, true, 3, (4, 4)),
        k(Late { px: 1 }, false, true, true, 2, (4, 3)),
        k(Late { px: 2 }, false, false, true, 1, (2, 3)),
        k(Late { px: 2 }, true, false, true, 4, (4, 2)),
        k(Late { px: 2 }, false, false, true, 4, (4, 2)),
        k(Late { px: 2 }, true, false, true, 3, (4, 4)),
        k(Late { px: 2 }, true, true, true, 2, (4, 3)),
        // 4 x 2 and 2 x 3 pixels per thread on 13 x 21 frames: threads inside the frame
        // (no bounds checks) only where the reach allows, ragged right and bottom edges.
        k(FusedCells { px: 4, py: 2 }, false, true, true, 1, (2, 2)),
        k(FusedCells { px: 4, py: 2 }, false, false, true, 3, (2, 2)),
        k(FusedCells { px: 2, py: 3 }, false, true, false, 2, (4, 2)),
        k(FusedCells { px: 4, py: 2 }, true, true, true, 3, (2, 2)),
    ]
}

/// What a run of `launches` launches must give: the maps in order and the final state
/// (fused and per-vector: decimated blocks of `cfg.frames`; tiled: plain, every frame;
/// `frames_per_launch` frames a launch).
pub fn expected(c: &Case, cfg: &KernelConfig, launches: usize) -> (Vec<MapPair>, Vec<f32>) {
    let n = c.h * c.w;
    let mut st = CpuState::new(c.h, c.w, &c.motions, c.alpha).unwrap();
    let mut maps = Vec::new();
    let per = if cfg.emits_every_frame() {
        1
    } else {
        cfg.frames
    };
    for block in c.frames[..launches * cfg.frames_per_launch()].chunks(per) {
        let refs: Vec<&[f32]> = block.iter().map(|f| f.as_slice()).collect();
        let mut s = vec![0.0; n];
        let mut a = vec![0; n];
        st.block(&refs, &mut s, &mut a);
        maps.push((s, a));
    }
    (maps, st.state())
}

/// The bound on f16 state storage: each store rounds by at most 2^-11 relative, and a
/// launch of F frames shrinks earlier errors by (1 - alpha)^F, so the error stays below
/// 2^-11 max|P| / (1 - (1 - alpha)^F).
pub fn half_bound(c: &Case, cfg: &KernelConfig, scale: f32) -> f64 {
    let keep = (1.0 - c.alpha as f64).powi(cfg.frames as i32);
    2f64.powi(-11) * scale as f64 / (1.0 - keep) * 1.01
}

/// Compares a run with the expectation: f32 state to `tol` relative (to the largest
/// value), f16 to its bound; the arg-max wherever the top two vectors are apart by more
/// than the error. NaN anywhere (an output nobody wrote) fails.
pub fn compare(
    what: &str,
    c: &Case,
    cfg: &KernelConfig,
    got: &[(Vec<f32>, Vec<u16>)],
    got_state: &[f32],
    want: &[(Vec<f32>, Vec<u16>)],
    want_state: &[f32],
    tol: f64,
) {
    let scale = want_state.iter().fold(1e-30f32, |m, v| m.max(v.abs()));
    let bound = if cfg.half {
        half_bound(c, cfg, scale)
    } else {
        tol * scale as f64
    };
    assert_eq!(got.len(), want.len(), "{what}: number of maps");
    for (k, ((gs, ga), (ws, wa))) in got.iter().zip(want).enumerate() {
        for i in 0..gs.len() {
            let e = (gs[i] as f64 - ws[i] as f64).abs();
            assert!(
                e <= bound,
                "{what}: map {k}, pixel {i}: {} vs {} (bound {bound:e})",
                gs[i],
                ws[i]
            );
            if ga[i] != wa[i] {
                // Only a near-tie may choose differently.
                let v = ga[i] as usize;
                assert!(v < c.motions.len(), "{what}: map {k}, pixel {i}: arg {v}");
            }
        }
        let ties_ok = ga.iter().zip(wa).filter(|(a, b)| a != b).count();
        assert!(
            cfg.half || ties_ok * 100 <= ga.len(),
            "{what}: map {k}: {ties_ok} arg-max differ"
        );
    }
    for (i, (g, w)) in got_state.iter().zip(want_state).enumerate() {
        let e = (*g as f64 - *w as f64).abs();
        assert!(
            e <= bound,
            "{what}: state {i}: {g} vs {w} (bound {bound:e})"
        );
    }
}

/// `x` rounded to f16 (nearest, ties to even), as f64: every operation of the packed
/// kernel (`Variant::Packed`) rounds so.
pub fn rn16(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let a = x.abs();
    if a >= 65520.0 {
        return f64::INFINITY.copysign(x);
    }
    let e = (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(-14);
    let ulp = 2f64.powi(e - 10);
    ((a / ulp).round_ties_even() * ulp).copysign(x)
}

/// What a run of the packed kernel must give, bit for bit: its f16 arithmetic in its
/// order (`packed.cu`, `PACKED`), every frame a map: alpha X rounded from the f32 product;
/// per vector the horizontal blend `wx1 t1 + (wx0 t0)` (a product, then a fused
/// multiply-add, each rounded), then `cw1 h1 + (cw0 h0 + alpha X)` with `cw = (1 - alpha)
/// wy` rounded from f32 (an integer shift along y: `(1 - alpha) h0 + alpha X`); taps outside
/// the frame read 0; the max and the first vector that reaches it.
pub fn packed_expected(c: &Case, cfg: &KernelConfig, launches: usize) -> (Vec<MapPair>, Vec<f32>) {
    let (h, w) = (c.h, c.w);
    let n = h * w;
    let alpha = c.alpha;
    let cc = 1.0f32 - alpha;
    let c2 = rn16(cc as f64);
    struct Vw {
        ix: i64,
        iy: i64,
        hx: bool,
        hy: bool,
        wx0: f64,
        wx1: f64,
        cw0: f64,
        cw1: f64,
    }
    let vw: Vec<Vw> = c
        .motions
        .iter()
        .map(|m| {
            // The convention's taps of the shift by -v (motion.rs), as the kernel takes them.
            let (ix, wx0, fx) = taps(-m.vx);
            let (iy, wy0, fy) = taps(-m.vy);
            Vw {
                ix,
                iy,
                hx: fx != 0.0,
                hy: fy != 0.0,
                wx0: rn16(wx0 as f64),
                wx1: rn16(fx as f64),
                cw0: rn16((cc * wy0) as f64),
                cw1: rn16((cc * fy) as f64),
            }
        })
        .collect();
    let mut s = vec![vec![0.0f64; n]; c.motions.len()];
    let mut maps = Vec::new();
    for x_k in &c.frames[..launches * cfg.frames_per_launch()] {
        let ax: Vec<f64> = x_k.iter().map(|&x| rn16((alpha * x) as f64)).collect();
        let mut best = vec![0.0f64; n];
        let mut barg = vec![0u16; n];
        for (v, (sv, q)) in s.iter_mut().zip(&vw).enumerate() {
            let at = |r: i64, col: i64| -> f64 {
                if r < 0 || col < 0 || r >= h as i64 || col >= w as i64 {
                    0.0
                } else {
                    sv[r as usize * w + col as usize]
                }
            };
            let hr = |r: i64, x: i64| -> f64 {
                let t0 = at(r, x + q.ix);
                if q.hx {
                    rn16(q.wx1 * at(r, x + q.ix + 1) + rn16(q.wx0 * t0))
                } else {
                    t0
                }
            };
            let mut next = vec![0.0f64; n];
            for y in 0..h as i64 {
                for x in 0..w as i64 {
                    let p = y as usize * w + x as usize;
                    let val = if q.hy {
                        rn16(q.cw1 * hr(y + q.iy + 1, x) + rn16(q.cw0 * hr(y + q.iy, x) + ax[p]))
                    } else {
                        rn16(c2 * hr(y + q.iy, x) + ax[p])
                    };
                    next[p] = val;
                    if v == 0 || val > best[p] {
                        best[p] = val;
                        barg[p] = v as u16;
                    }
                }
            }
            *sv = next;
        }
        maps.push((best.iter().map(|&b| b as f32).collect(), barg));
    }
    let state = s.concat().iter().map(|&v| v as f32).collect();
    (maps, state)
}

/// The packed kernel's bound against the f32 reference (`packed.cu`, `PACKED`): at most
/// (6 - 3 alpha) roundings of 2^-11 x max|X| a frame (three in the horizontal blend and
/// its weights, carried by weights summing to 1 - alpha; one for the vertical weights,
/// two for the vertical blend, alpha for alpha X), earlier errors carried by rounded
/// weights summing to at most 1 - alpha + 4 x 2^-11; 1% for the reference's own f32.
pub fn packed_bound(c: &Case) -> f64 {
    let xmax = c
        .frames
        .iter()
        .flatten()
        .fold(0.0f64, |m, &x| m.max(x.abs() as f64));
    let u = 2f64.powi(-11);
    let a = c.alpha as f64;
    (6.0 - 3.0 * a) * u * xmax / (a - 4.0 * u) * 1.01
}

/// The largest difference between two runs' maps and final states.
pub fn max_diff(a: &[MapPair], sa: &[f32], b: &[MapPair], sb: &[f32]) -> f64 {
    let mut e = 0.0f64;
    for ((x, _), (y, _)) in a.iter().zip(b) {
        for (p, q) in x.iter().zip(y) {
            e = e.max((*p as f64 - *q as f64).abs());
        }
    }
    for (p, q) in sa.iter().zip(sb) {
        e = e.max((*p as f64 - *q as f64).abs());
    }
    e
}

/// Asserts that a run's maps equal `want` bit for bit (scores by their bits, arg-max
/// exactly) and its final state `ws` exactly.
pub fn assert_same_bits(what: &str, got: &[MapPair], gs: &[f32], want: &[MapPair], ws: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: maps");
    for (m, (g, e)) in got.iter().zip(want).enumerate() {
        let bad =
            g.0.iter()
                .zip(&e.0)
                .position(|(a, b)| a.to_bits() != b.to_bits());
        assert!(bad.is_none(), "{what}: map {m}, pixel {bad:?}");
        assert_eq!(g.1, e.1, "{what}: arg-max {m}");
    }
    assert_eq!(gs, ws, "{what}: final state");
}

/// A random stochastic matrix: each row random weights, about a third of them zero
/// (never the whole row), normalised.
pub fn random_matrix(rng: &mut impl Rng, v: usize) -> Transition {
    let mut m = vec![0.0f64; v * v];
    for r in 0..v {
        let row = &mut m[r * v..(r + 1) * v];
        for x in row.iter_mut() {
            *x = if rng.gen_bool(0.35) {
                0.0
            } else {
                rng.gen_range(0.01..1.0)
            };
        }
        row[rng.gen_range(0..v)] += 0.5;
        let s: f64 = row.iter().sum();
        row.iter_mut().for_each(|x| *x /= s);
    }
    Transition::new(v, &m, "random").unwrap()
}
