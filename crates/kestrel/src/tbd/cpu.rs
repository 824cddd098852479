//! The recursion on the CPU: a plain per-pixel reference (the definition, written to be
//! read) and the fast path (rayon over rows, every inner loop a straight pass over
//! contiguous rows that the compiler vectorises), which the reference checks.
//!
//! A *block* is `D` frames folded along each trajectory (the seed's decimation): the
//! value at pixel `p` for vector `v` after the block is
//!
//! ```text
//! s = S(P_k, p - D v);   for j = 1..D:  s = (1 - alpha) s + alpha S(X_{k+j}, p - (D - j) v)
//! ```
//!
//! where `S` is the bilinear sample of `motion.rs` (taps outside read 0). `D = 1` is the
//! plain recursion `P_k(p) = (1 - alpha) S(P_{k-1}, p - v) + alpha X_k(p)`. For integer
//! vectors both are the same arithmetic in the same order, so a block equals `D` plain
//! steps exactly. For fractional vectors the plain recursion resamples the state every
//! frame (a bilinear blur per frame) while the block samples each frame once along the
//! straight trajectory: the block is the sharper of the two; both agree exactly on
//! affine images away from the borders (bilinear interpolation reproduces them).

use super::motion::{taps, Motion};
use rayon::prelude::*;

/// Bilinear sample of `img` (`h x w`, row-major, rows `stride` apart from `base`) at
/// `(x + sx, y + sy)`; taps outside the frame read 0 (`motion.rs` gives the order).
#[inline]
pub fn sample(
    img: &[f32],
    base: usize,
    stride: usize,
    h: usize,
    w: usize,
    x: usize,
    y: usize,
    sx: f32,
    sy: f32,
) -> f32 {
    let (ix, wx0, wx1) = taps(sx);
    let (iy, wy0, wy1) = taps(sy);
    let at = |r: i64, c: i64| -> f32 {
        if r < 0 || c < 0 || r >= h as i64 || c >= w as i64 {
            0.0
        } else {
            img[base + r as usize * stride + c as usize]
        }
    };
    let (r, c) = (y as i64 + iy, x as i64 + ix);
    wy0 * (wx0 * at(r, c) + wx1 * at(r, c + 1))
        + wy1 * (wx0 * at(r + 1, c) + wx1 * at(r + 1, c + 1))
}

/// The reference: one block of frames (`frames.len()` = D >= 1) applied to the state
/// `prev` (`[V][H][W]`), written to `next`; returns the detection map `max_v` and its
/// arg-max (the first vector on ties). Pixel by pixel, straight from the definition.
pub fn reference_block(
    prev: &[f32],
    frames: &[&[f32]],
    h: usize,
    w: usize,
    motions: &[Motion],
    alpha: f32,
    next: &mut [f32],
) -> (Vec<f32>, Vec<u16>) {
    let d = frames.len();
    let c = 1.0 - alpha;
    let n = h * w;
    let mut score = vec![f32::NEG_INFINITY; n];
    let mut arg = vec![0u16; n];
    for (vi, m) in motions.iter().enumerate() {
        for y in 0..h {
            for x in 0..w {
                let df = d as f32;
                let mut s = sample(prev, vi * n, w, h, w, x, y, -df * m.vx, -df * m.vy);
                for (j, f) in frames.iter().enumerate() {
                    let back = (d - 1 - j) as f32;
                    s = c * s + alpha * sample(f, 0, w, h, w, x, y, -back * m.vx, -back * m.vy);
                }
                next[vi * n + y * w + x] = s;
                if s > score[y * w + x] {
                    score[y * w + x] = s;
                    arg[y * w + x] = vi as u16;
                }
            }
        }
    }
    (score, arg)
}

/// Horizontal pass of the bilinear sample: `out[x] = wx0 row[x+ix] + wx1 row[x+ix+1]`,
/// taps outside read 0; `row = None` is a row outside the frame.
#[inline]
fn hsample(row: Option<&[f32]>, ix: i64, wx0: f32, wx1: f32, out: &mut [f32]) {
    let w = out.len() as i64;
    let Some(row) = row else {
        out.fill(0.0);
        return;
    };
    let at = |c: i64| {
        if c < 0 || c >= w {
            0.0
        } else {
            row[c as usize]
        }
    };
    if wx1 == 0.0 {
        // wx0 = 1: the blend is the lookup itself.
        let lo = (-ix).clamp(0, w);
        let hi = (w - ix).clamp(lo, w);
        out[..lo as usize].fill(0.0);
        out[hi as usize..].fill(0.0);
        if lo < hi {
            let src = &row[(lo + ix) as usize..(hi + ix) as usize];
            out[lo as usize..hi as usize].copy_from_slice(src);
        }
        return;
    }
    // Both taps inside for x in [lo, hi).
    let lo = (-ix).clamp(0, w);
    let hi = (w - ix - 1).clamp(lo, w);
    for x in 0..lo {
        out[x as usize] = wx0 * at(x + ix) + wx1 * at(x + ix + 1);
    }
    if lo < hi {
        let a = &row[(lo + ix) as usize..(hi + ix) as usize];
        let b = &row[(lo + ix + 1) as usize..(hi + ix + 1) as usize];
        for ((o, &p), &q) in out[lo as usize..hi as usize].iter_mut().zip(a).zip(b) {
            *o = wx0 * p + wx1 * q;
        }
    }
    for x in hi..w {
        out[x as usize] = wx0 * at(x + ix) + wx1 * at(x + ix + 1);
    }
}

/// Bilinear samples of a whole row: `out[x] = S(img, (x + sx, y + sy))`. `img` holds
/// rows of `out.len()` pixels, row `r` at `base + r * stride`.
#[inline]
fn sample_row(
    img: &[f32],
    base: usize,
    stride: usize,
    h: usize,
    y: usize,
    sx: f32,
    sy: f32,
    tmp: &mut [f32],
    out: &mut [f32],
) {
    let w = out.len();
    let (ix, wx0, wx1) = taps(sx);
    let (iy, wy0, wy1) = taps(sy);
    let row = |r: i64| (r >= 0 && r < h as i64).then(|| &img[base + r as usize * stride..][..w]);
    let r0 = y as i64 + iy;
    hsample(row(r0), ix, wx0, wx1, out);
    if wy1 != 0.0 {
        hsample(row(r0 + 1), ix, wx0, wx1, tmp);
        for (o, &t) in out.iter_mut().zip(tmp.iter()) {
            *o = wy0 * *o + wy1 * t;
        }
    }
}

/// The fast path's state: `[H][V][W]`, so that one row task owns the rows of every
/// vector at its `y` (the detection map is fused into the same pass).
pub struct CpuState {
    /// Frame height.
    pub h: usize,
    /// Frame width.
    pub w: usize,
    /// The motion hypotheses.
    pub motions: Vec<Motion>,
    /// Weight of the newest frame.
    pub alpha: f32,
    state: Vec<f32>,
    next: Vec<f32>,
}

impl CpuState {
    /// A zero state (`P_0 = 0`).
    pub fn new(h: usize, w: usize, motions: &[Motion], alpha: f32) -> CpuState {
        let len = h * w * motions.len();
        CpuState {
            h,
            w,
            motions: motions.to_vec(),
            alpha,
            state: vec![0.0; len],
            next: vec![0.0; len],
        }
    }

    /// One block of `frames.len()` frames (decimation D = the count; 1 = plain), writing
    /// the detection map and its arg-max (`score`, `arg`: `[H][W]`).
    pub fn block(&mut self, frames: &[&[f32]], score: &mut [f32], arg: &mut [u16]) {
        let (h, w, nv) = (self.h, self.w, self.motions.len());
        let d = frames.len();
        assert!(d >= 1 && frames.iter().all(|f| f.len() == h * w));
        assert!(score.len() == h * w && arg.len() == h * w);
        let c = 1.0 - self.alpha;
        let alpha = self.alpha;
        let motions = &self.motions;
        let prev = &self.state;
        self.next
            .par_chunks_mut(nv * w)
            .zip(score.par_chunks_mut(w))
            .zip(arg.par_chunks_mut(w))
            .enumerate()
            .for_each_init(
                || (vec![0.0f32; w], vec![0.0f32; w]),
                |(tmp, smp), (y, ((rows, srow), arow))| {
                    for (vi, m) in motions.iter().enumerate() {
                        let acc = &mut rows[vi * w..(vi + 1) * w];
                        let df = d as f32;
                        sample_row(prev, vi * w, nv * w, h, y, -df * m.vx, -df * m.vy, tmp, acc);
                        for (j, f) in frames.iter().enumerate() {
                            let back = (d - 1 - j) as f32;
                            let xs: &[f32] = if back == 0.0 {
                                &f[y * w..(y + 1) * w]
                            } else {
                                sample_row(f, 0, w, h, y, -back * m.vx, -back * m.vy, tmp, smp);
                                smp
                            };
                            for (a, &x) in acc.iter_mut().zip(xs) {
                                *a = c * *a + alpha * x;
                            }
                        }
                        if vi == 0 {
                            srow.copy_from_slice(acc);
                            arow.fill(0);
                        } else {
                            let v = vi as u16;
                            for ((s, a), &p) in srow.iter_mut().zip(arow.iter_mut()).zip(acc.iter())
                            {
                                if p > *s {
                                    *s = p;
                                    *a = v;
                                }
                            }
                        }
                    }
                },
            );
        std::mem::swap(&mut self.state, &mut self.next);
    }

    /// The state as `[V][H][W]`.
    pub fn state(&self) -> Vec<f32> {
        let (h, w, nv) = (self.h, self.w, self.motions.len());
        let mut out = vec![0.0; nv * h * w];
        for y in 0..h {
            for v in 0..nv {
                out[(v * h + y) * w..][..w].copy_from_slice(&self.state[(y * nv + v) * w..][..w]);
            }
        }
        out
    }

    /// Replaces the state (`[V][H][W]`).
    pub fn set_state(&mut self, s: &[f32]) {
        let (h, w, nv) = (self.h, self.w, self.motions.len());
        assert_eq!(s.len(), nv * h * w);
        for y in 0..h {
            for v in 0..nv {
                self.state[(y * nv + v) * w..][..w].copy_from_slice(&s[(v * h + y) * w..][..w]);
            }
        }
    }
}
