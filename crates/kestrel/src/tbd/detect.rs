//! Detection on the map `D_k = max_v P_k`: a threshold (given, or calibrated for a
//! per-pixel false-alarm probability on noise-only frames), then non-maximum
//! suppression.

use super::cpu::CpuState;
use super::sim::{Noise, NoiseFrames};
use super::{Map, Motion, Params};
use crate::error::{Error, Result};
use rayon::prelude::*;

/// One detection: emitted frame `t`, pixel `(x, y)`, the arg-max motion vector index,
/// and the score `D_t(x, y)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detection {
    /// Emitted frame.
    pub t: usize,
    /// Pixel column.
    pub x: usize,
    /// Pixel row.
    pub y: usize,
    /// Index of the arg-max motion vector.
    pub motion: usize,
    /// The score `D_t(x, y)`.
    pub score: f32,
}

/// Pixels whose score exceeds `threshold` and is the largest in the
/// `(2 radius + 1)^2` window around them (ties go to the first pixel in raster order),
/// in raster order.
///
/// The window is clipped to the frame (a radius beyond the frame's larger side is that
/// side), and the work, the pixels over the threshold times the clipped window, is
/// bounded before the suppression starts ([`crate::limits::work`], at most
/// [`NMS_BUDGET`] comparisons a map): a map of noise under a low threshold with a wide
/// window is refused with the advice, not searched for hours.
pub fn detect(map: &Map, threshold: f32, radius: usize) -> Result<Vec<Detection>> {
    let (h, w) = (map.h, map.w);
    let s = &map.score;
    let r = radius.min(h.max(w)) as i64;
    let side = 2 * r as usize + 1;
    let over = s.par_iter().filter(|&&v| v > threshold).count();
    crate::limits::work(
        &format!("non-maximum suppression of map {}", map.t),
        &[
            crate::limits::Size("pixels over the threshold", over),
            crate::limits::Size("window rows", side.min(h)),
            crate::limits::Size("window columns", side.min(w)),
        ],
        NMS_BUDGET,
        "raise the threshold (or lower --pfa) or narrow the radius",
    )?;
    Ok((0..h)
        .into_par_iter()
        .flat_map_iter(|y| {
            let row = &s[y * w..(y + 1) * w];
            // Most rows hold nothing over the threshold: a vectorised pass over the row
            // skips them (no early exit, so the compiler can use every lane).
            let any = row.iter().fold(false, |any, &v| any | (v > threshold));
            let row = if any { row } else { &row[..0] };
            row.iter()
                .enumerate()
                .filter(move |&(_, &v)| v > threshold)
                .filter_map(move |(x, &v)| {
                    let (y0, x0) = (y as i64, x as i64);
                    for dy in (-r).max(-y0)..=r.min(h as i64 - 1 - y0) {
                        let yy = y0 + dy;
                        for dx in (-r).max(-x0)..=r.min(w as i64 - 1 - x0) {
                            let xx = x0 + dx;
                            if dx == 0 && dy == 0 {
                                continue;
                            }
                            let u = s[yy as usize * w + xx as usize];
                            let earlier = dy < 0 || (dy == 0 && dx < 0);
                            if u > v || (earlier && u == v) {
                                return None;
                            }
                        }
                    }
                    Some(Detection {
                        t: map.t,
                        x,
                        y,
                        motion: map.arg[y * w + x] as usize,
                        score: v,
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect())
}

/// Most cell updates (frames x pixels x motion vectors) a --pfa calibration may take.
pub const CALIBRATION_BUDGET: u128 = 50_000_000_000;

/// Most comparisons the suppression of one map may take (about ten seconds of a core).
pub const NMS_BUDGET: u128 = 20_000_000_000;

/// Frames after which the start (`P_0 = 0`) weighs less than 1e-3 in the state:
/// `(1 - alpha)^n < 1e-3`.
pub fn burn_in(alpha: f32) -> usize {
    if alpha >= 1.0 {
        return 1;
    }
    ((1e-3f64).ln() / (1.0 - alpha as f64).ln()).ceil() as usize
}

/// The `k` largest values seen (kept sorted descending after [`TopK::finish`]).
struct TopK {
    k: usize,
    v: Vec<f32>,
}

impl TopK {
    fn push_all(&mut self, xs: &[f32]) {
        let floor = if self.v.len() >= self.k {
            self.v.iter().copied().fold(f32::INFINITY, f32::min)
        } else {
            f32::NEG_INFINITY
        };
        self.v.extend(xs.iter().copied().filter(|&x| x > floor));
        if self.v.len() > 2 * self.k {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.v.len() > self.k {
            self.v
                .select_nth_unstable_by(self.k - 1, |a, b| b.total_cmp(a));
            self.v.truncate(self.k);
        }
    }

    fn finish(mut self) -> Vec<f32> {
        self.trim();
        self.v.sort_by(|a, b| b.total_cmp(a));
        self.v
    }
}

/// Thresholds on `D_k` for the per-pixel false-alarm probabilities `pfas`, calibrated
/// on simulated noise-only frames of `h x w` with the given noise: the recursion runs
/// past its burn-in, then the emitted maps are pooled until they hold at least
/// `100 / min(pfa)` pixel values, and each threshold is the `ceil(pfa N)`-th largest.
/// `detector = None` calibrates the single-frame detector (`D_k = X_k`) instead.
pub fn calibrate(
    detector: Option<(&[Motion], f32, usize)>,
    h: usize,
    w: usize,
    noise: Noise,
    pfas: &[f64],
    seed: u64,
) -> Result<Vec<f32>> {
    let params = detector.map(|(motions, alpha, decimation)| Params {
        motions: motions.to_vec(),
        alpha,
        decimation,
        transition: None,
    });
    calibrate_params(params.as_ref(), h, w, noise, pfas, seed)
}

/// [`calibrate`] for the recursion of `params` (with its transition matrix, if any);
/// None: the single-frame detector.
pub fn calibrate_params(
    detector: Option<&Params>,
    h: usize,
    w: usize,
    noise: Noise,
    pfas: &[f64],
    seed: u64,
) -> Result<Vec<f32>> {
    let pmin = pfas.iter().copied().fold(1.0, f64::min);
    let pmax = pfas.iter().copied().fold(0.0, f64::max);
    if pfas.is_empty() || !(pmin > 0.0) || !(pmax < 1.0) {
        return Err(Error::input(format!(
            "false-alarm probabilities must lie in (0, 1), got {pfas:?}"
        )));
    }
    let px = h * w;
    let needed = (100.0 / pmin).ceil();
    let maps = (needed / px as f64).ceil().max(2.0);
    let decimation = detector.map(|d| d.decimation).unwrap_or(1);
    let warm = detector.map(|d| burn_in(d.alpha)).unwrap_or(0);
    let frames = warm as f64 + maps * decimation as f64;
    // The cost counts every motion vector: each frame updates the state of each.
    let vectors = detector.map_or(1, |d| d.motions.len().max(1));
    crate::limits::work(
        &format!("the calibration of false-alarm probability {pmin:e}"),
        &[
            crate::limits::Size("frames", frames.min(u64::MAX as f64) as usize),
            crate::limits::Size("pixels", px),
            crate::limits::Size("motion vectors", vectors),
        ],
        CALIBRATION_BUDGET,
        "use a larger false-alarm probability, fewer vectors or smaller frames",
    )?;
    let maps = maps as usize;
    let total = maps * px;
    let k = ((pmax * total as f64).ceil() as usize).max(1);
    let mut top = TopK {
        k,
        v: Vec::with_capacity(2 * k + px),
    };
    let gen = NoiseFrames::new(h, w, noise, seed);
    let mut frame = vec![0.0f32; px];
    match detector {
        None => {
            for t in 0..maps {
                gen.frame(t, &mut frame);
                top.push_all(&frame);
            }
        }
        Some(p) => {
            let d = p.decimation;
            let mut st =
                CpuState::new(h, w, &p.motions, p.alpha)?.with_transition(p.switching().cloned());
            let mut score = vec![0.0f32; px];
            let mut arg = vec![0u16; px];
            let mut t = 0;
            let mut emitted = 0;
            let mut block: Vec<Vec<f32>> = Vec::with_capacity(d);
            while emitted < maps {
                block.clear();
                for _ in 0..d {
                    gen.frame(t, &mut frame);
                    block.push(frame.clone());
                    t += 1;
                }
                let refs: Vec<&[f32]> = block.iter().map(|f| f.as_slice()).collect();
                st.block(&refs, &mut score, &mut arg);
                if t >= warm {
                    top.push_all(&score);
                    emitted += 1;
                }
            }
        }
    }
    let sorted = top.finish();
    Ok(pfas
        .iter()
        .map(|&p| {
            let i = ((p * total as f64).ceil() as usize).clamp(1, sorted.len());
            sorted[i - 1]
        })
        .collect())
}
