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

/// The taps of one shift `(sx, sy)` (`motion.rs`): first tap offsets and weights.
#[derive(Clone, Copy)]
struct Shift {
    ix: i64,
    wx0: f32,
    wx1: f32,
    iy: i64,
    wy0: f32,
    wy1: f32,
}

impl Shift {
    fn new(sx: f32, sy: f32) -> Shift {
        let (ix, wx0, wx1) = taps(sx);
        let (iy, wy0, wy1) = taps(sy);
        Shift {
            ix,
            wx0,
            wx1,
            iy,
            wy0,
            wy1,
        }
    }
}

/// What a row pass does with the sample `s` at each pixel.
const SET: u8 = 0; // out = s
const FOLD: u8 = 1; // out = c out + alpha s
const STEP: u8 = 2; // out = c s + (alpha X)[x], and the running max / arg-max

/// The scalars of a row pass.
#[derive(Clone, Copy)]
struct RowOp {
    c: f32,
    alpha: f32,
    /// The vector's index as f32 (the arg-max is kept in f32 lanes, beside the score).
    v: f32,
}

/// The running detection map of a row: the best score so far is read from `score_in`
/// and written to `score_out` (two rows: a select stored back to where it was loaded
/// from becomes a masked store, which is slow on some CPUs), the arg-max in place.
struct MapRow<'a> {
    ax: &'a [f32],
    score_in: &'a [f32],
    score_out: &'a mut [f32],
    argf: &'a mut [f32],
}

/// `n` into the running map at one pixel: strictly greater wins (the first vector on
/// ties, as in the reference).
#[inline(always)]
fn keep_max(n: f32, v: f32, s_in: f32, s_out: &mut f32, arg: &mut f32) {
    let gt = n > s_in;
    *s_out = if gt { n } else { s_in };
    *arg = if gt { v } else { *arg };
}

/// One row of samples `S(img, (x, y) + shift)` for every `x`, combined into `out` as `OP`
/// says. `p0` and `p1` are the source rows `y + iy` and `y + iy + 1` (rows outside the
/// frame are zero rows). `FX`/`FY`: the horizontal/vertical weight of the second tap is
/// not zero (else that tap is skipped, as in the reference's lookups). Pixels whose taps
/// all lie inside the row run as straight passes over contiguous slices (vectorised);
/// the few at the ends read 0 outside. The arithmetic is the reference's, in its order:
/// `wy0 (wx0 a + wx1 b) + wy1 (wx0 c + wx1 d)`, then `c s + alpha x`, no fused multiply-add.
#[inline(always)]
fn row_pass<const FX: bool, const FY: bool, const OP: u8>(
    p0: &[f32],
    p1: &[f32],
    sh: Shift,
    op: RowOp,
    out: &mut [f32],
    map: &mut MapRow,
) {
    let w = out.len();
    let wi = w as i64;
    let Shift {
        ix,
        wx0,
        wx1,
        wy0,
        wy1,
        ..
    } = sh;
    let RowOp { c, alpha, v } = op;
    // Closures by value (`move`): captured references turn selects of values into
    // selects of addresses, which do not vectorise.
    let hs = move |a: f32, b: f32| if FX { wx0 * a + wx1 * b } else { a };
    let vs = move |h0: f32, h1: f32| if FY { wy0 * h0 + wy1 * h1 } else { h0 };
    // Every tap inside the row for x in [lo, hi); the ends read 0 outside.
    let lo = (-ix).clamp(0, wi) as usize;
    let hi = (wi - ix - FX as i64).clamp(lo as i64, wi) as usize;
    let at = move |r: &[f32], c: i64| if c < 0 || c >= wi { 0.0 } else { r[c as usize] };
    for x in (0..lo).chain(hi..w) {
        let c0 = x as i64 + ix;
        let s = vs(
            hs(at(p0, c0), at(p0, c0 + 1)),
            hs(at(p1, c0), at(p1, c0 + 1)),
        );
        match OP {
            SET => out[x] = s,
            FOLD => out[x] = c * out[x] + alpha * s,
            _ => {
                let n = c * s + map.ax[x];
                out[x] = n;
                keep_max(
                    n,
                    v,
                    map.score_in[x],
                    &mut map.score_out[x],
                    &mut map.argf[x],
                );
            }
        }
    }
    let n = hi - lo;
    if n == 0 {
        return;
    }
    let s0 = (lo as i64 + ix) as usize;
    let fx = FX as usize;
    let (a0, b0) = (&p0[s0..s0 + n], &p0[s0 + fx..s0 + fx + n]);
    let (a1, b1) = (&p1[s0..s0 + n], &p1[s0 + fx..s0 + fx + n]);
    let out = &mut out[lo..hi];
    match OP {
        SET => {
            for i in 0..n {
                out[i] = vs(hs(a0[i], b0[i]), hs(a1[i], b1[i]));
            }
        }
        FOLD => {
            for i in 0..n {
                out[i] = c * out[i] + alpha * vs(hs(a0[i], b0[i]), hs(a1[i], b1[i]));
            }
        }
        _ => {
            let ax = &map.ax[lo..hi];
            let s_in = &map.score_in[lo..hi];
            let s_out = &mut map.score_out[lo..hi];
            let argf = &mut map.argf[lo..hi];
            for i in 0..n {
                let nv = c * vs(hs(a0[i], b0[i]), hs(a1[i], b1[i])) + ax[i];
                out[i] = nv;
                keep_max(nv, v, s_in[i], &mut s_out[i], &mut argf[i]);
            }
        }
    }
}

/// [`row_pass`] for the shift's case (which taps have weight).
#[inline(always)]
fn row_case<const OP: u8>(
    p0: &[f32],
    p1: &[f32],
    sh: Shift,
    op: RowOp,
    out: &mut [f32],
    map: &mut MapRow,
) {
    match (sh.wx1 != 0.0, sh.wy1 != 0.0) {
        (false, false) => row_pass::<false, false, OP>(p0, p1, sh, op, out, map),
        (true, false) => row_pass::<true, false, OP>(p0, p1, sh, op, out, map),
        (false, true) => row_pass::<false, true, OP>(p0, p1, sh, op, out, map),
        (true, true) => row_pass::<true, true, OP>(p0, p1, sh, op, out, map),
    }
}

/// Rows of the fast path's frames and states, for one block.
struct Block<'a> {
    h: usize,
    w: usize,
    motions: &'a [Motion],
    c: f32,
    alpha: f32,
    /// The state before the block, `[H][V][W]`.
    prev: &'a [f32],
    frames: &'a [&'a [f32]],
    /// A row of zeros: the rows outside the frame.
    zeros: &'a [f32],
}

impl Block<'_> {
    /// Row `r` of plane `v` of the previous state (zeros outside).
    #[inline(always)]
    fn state_row(&self, v: usize, r: i64) -> &[f32] {
        if r < 0 || r >= self.h as i64 {
            self.zeros
        } else {
            let nv = self.motions.len();
            &self.prev[(r as usize * nv + v) * self.w..][..self.w]
        }
    }

    /// Row `r` of frame `j` (zeros outside).
    #[inline(always)]
    fn frame_row(&self, j: usize, r: i64) -> &[f32] {
        if r < 0 || r >= self.h as i64 {
            self.zeros
        } else {
            &self.frames[j][r as usize * self.w..][..self.w]
        }
    }

    /// The rows `y0..` of the band: `next` (`[rows][V][W]`), the map (`score`, `arg`:
    /// `[rows][W]`), with `scratch` (3 W): `alpha X`, the arg-max in f32 and a second
    /// score row.
    #[inline(always)]
    fn band(
        &self,
        y0: usize,
        next: &mut [f32],
        score: &mut [f32],
        arg: &mut [u16],
        scratch: &mut [f32],
    ) {
        let (w, nv) = (self.w, self.motions.len());
        let d = self.frames.len();
        let (ax, rest) = scratch.split_at_mut(w);
        let (argf, score2) = rest.split_at_mut(w);
        let op = |v: usize| RowOp {
            c: self.c,
            alpha: self.alpha,
            v: v as f32,
        };
        for (i, ((rows, srow), arow)) in next
            .chunks_mut(nv * w)
            .zip(score.chunks_mut(w))
            .zip(arg.chunks_mut(w))
            .enumerate()
        {
            let y = y0 + i;
            let last = &self.frames[d - 1][y * w..][..w];
            for (a, &x) in ax.iter_mut().zip(last) {
                *a = self.alpha * x;
            }
            // Vector vi writes its running max into srow when nv - 1 - vi is even (so
            // the last one ends there), into score2 otherwise; vector 0 reads -inf.
            if nv % 2 == 0 {
                srow.fill(f32::NEG_INFINITY);
            } else {
                score2.fill(f32::NEG_INFINITY);
            }
            argf.fill(0.0);
            for (vi, m) in self.motions.iter().enumerate() {
                let acc = &mut rows[vi * w..(vi + 1) * w];
                let (score_in, score_out): (&[f32], &mut [f32]) = if (nv - 1 - vi) % 2 == 0 {
                    (score2, srow)
                } else {
                    (srow, score2)
                };
                let mut map = MapRow {
                    ax,
                    score_in,
                    score_out,
                    argf,
                };
                let df = d as f32;
                let sh = Shift::new(-df * m.vx, -df * m.vy);
                let p0 = self.state_row(vi, y as i64 + sh.iy);
                let p1 = self.state_row(vi, y as i64 + sh.iy + 1);
                if d == 1 {
                    row_case::<STEP>(p0, p1, sh, op(vi), acc, &mut map);
                    continue;
                }
                row_case::<SET>(p0, p1, sh, op(vi), acc, &mut map);
                for j in 0..d - 1 {
                    let back = (d - 1 - j) as f32;
                    let sh = Shift::new(-back * m.vx, -back * m.vy);
                    let f0 = self.frame_row(j, y as i64 + sh.iy);
                    let f1 = self.frame_row(j, y as i64 + sh.iy + 1);
                    row_case::<FOLD>(f0, f1, sh, op(vi), acc, &mut map);
                }
                // The newest frame is the lookup itself: s = c s + alpha X.
                let (v, c) = (vi as f32, self.c);
                for i in 0..w {
                    let n = c * acc[i] + map.ax[i];
                    acc[i] = n;
                    keep_max(
                        n,
                        v,
                        map.score_in[i],
                        &mut map.score_out[i],
                        &mut map.argf[i],
                    );
                }
            }
            for (a, &g) in arow.iter_mut().zip(argf.iter()) {
                *a = g as u16;
            }
        }
    }

    /// [`Block::band`] compiled for AVX2 (eight f32 lanes; no FMA, so the same results).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn band_avx2(
        &self,
        y0: usize,
        next: &mut [f32],
        score: &mut [f32],
        arg: &mut [u16],
        scratch: &mut [f32],
    ) {
        self.band(y0, next, score, arg, scratch)
    }
}

/// Rows per task of the fast path: a band's rows of every vector stay in cache while
/// it runs, its rows are read from memory once (the neighbours' rows from cache).
const BAND: usize = 16;

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
    zeros: Vec<f32>,
    /// Per band: `alpha X`, the arg-max and a second score row (3 W).
    scratch: Vec<f32>,
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
            zeros: vec![0.0; w],
            scratch: vec![0.0; h.div_ceil(BAND) * 3 * w],
        }
    }

    /// One block of `frames.len()` frames (decimation D = the count; 1 = plain), writing
    /// the detection map and its arg-max (`score`, `arg`: `[H][W]`).
    pub fn block(&mut self, frames: &[&[f32]], score: &mut [f32], arg: &mut [u16]) {
        let (h, w, nv) = (self.h, self.w, self.motions.len());
        let d = frames.len();
        assert!(d >= 1 && frames.iter().all(|f| f.len() == h * w));
        assert!(score.len() == h * w && arg.len() == h * w);
        let blk = Block {
            h,
            w,
            motions: &self.motions,
            c: 1.0 - self.alpha,
            alpha: self.alpha,
            prev: &self.state,
            frames,
            zeros: &self.zeros,
        };
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        self.next
            .par_chunks_mut(BAND * nv * w)
            .zip(score.par_chunks_mut(BAND * w))
            .zip(arg.par_chunks_mut(BAND * w))
            .zip(self.scratch.par_chunks_mut(3 * w))
            .enumerate()
            .for_each(|(b, (((next, score), arg), scratch))| {
                #[cfg(target_arch = "x86_64")]
                if avx2 {
                    // SAFETY: the CPU has AVX2 (checked above).
                    unsafe { blk.band_avx2(b * BAND, next, score, arg, scratch) };
                    return;
                }
                blk.band(b * BAND, next, score, arg, scratch);
            });
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
