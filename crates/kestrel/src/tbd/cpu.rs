//! The recursion on the CPU: a plain per-pixel reference (the definition, written to be
//! read) and the fast path (rayon over bands of rows; per row and vector one straight
//! pass over contiguous rows that samples, folds in the frame and keeps the running
//! max / arg-max, vectorised, AVX2 when present), which the reference checks bit for
//! bit. `pass.rs` runs several plain steps per pass over memory on top of it.
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
use super::pass::{MapRows, Pass, PASS_BAND};
use super::switch::Transition;
use crate::error::Result;
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

/// The running detection map of a row over the vectors: the best score so far and its
/// vector are read from `*_in` and written to `*_out`, two copies that the vectors
/// alternate between (a blend stored back where it was loaded from becomes a masked
/// store in the vectorised loop, which is slow on some CPUs).
struct MapRow<'a> {
    ax: &'a [f32],
    score_in: &'a [f32],
    arg_in: &'a [f32],
    score_out: &'a mut [f32],
    arg_out: &'a mut [f32],
}

/// The two copies of a row's running map (`*0`: the final one) and `alpha X`, from a
/// scratch of 4 W floats.
struct Copies<'a> {
    ax: &'a mut [f32],
    arg0: &'a mut [f32],
    score1: &'a mut [f32],
    arg1: &'a mut [f32],
}

impl<'a> Copies<'a> {
    fn new(scratch: &'a mut [f32], w: usize) -> Copies<'a> {
        let (ax, rest) = scratch.split_at_mut(w);
        let (arg0, rest) = rest.split_at_mut(w);
        let (score1, arg1) = rest[..2 * w].split_at_mut(w);
        Copies {
            ax,
            arg0,
            score1,
            arg1,
        }
    }

    /// Starts a row of `nv` vectors whose final scores go to `srow`: vector `vi` writes
    /// copy `(nv - 1 - vi) % 2`, so that the last one ends in copy 0; vector 0 reads
    /// -inf and vector 0.
    fn start(&mut self, srow: &mut [f32], nv: usize) {
        let (s, a) = if nv.is_multiple_of(2) {
            (srow, &mut *self.arg0)
        } else {
            (&mut *self.score1, &mut *self.arg1)
        };
        s.fill(f32::NEG_INFINITY);
        a.fill(0.0);
    }

    /// The running map as vector `vi` of `nv` reads and writes it.
    fn for_vector<'b>(&'b mut self, srow: &'b mut [f32], vi: usize, nv: usize) -> MapRow<'b> {
        if (nv - 1 - vi).is_multiple_of(2) {
            MapRow {
                ax: self.ax,
                score_in: self.score1,
                arg_in: self.arg1,
                score_out: srow,
                arg_out: self.arg0,
            }
        } else {
            MapRow {
                ax: self.ax,
                score_in: srow,
                arg_in: self.arg0,
                score_out: self.score1,
                arg_out: self.arg1,
            }
        }
    }

    /// The final arg-max row (after the last vector).
    fn finish(&self, arow: &mut [u16]) {
        for (a, &g) in arow.iter_mut().zip(self.arg0.iter()) {
            *a = g as u16;
        }
    }
}

/// `n` (vector `v`) into the running map at one pixel: strictly greater wins (the first
/// vector on ties, as in the reference).
#[inline(always)]
fn keep_max(n: f32, v: f32, s_in: f32, a_in: f32, s_out: &mut f32, a_out: &mut f32) {
    let gt = n > s_in;
    *s_out = if gt { n } else { s_in };
    *a_out = if gt { v } else { a_in };
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
                    map.arg_in[x],
                    &mut map.score_out[x],
                    &mut map.arg_out[x],
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
            let a_in = &map.arg_in[lo..hi];
            let a_out = &mut map.arg_out[lo..hi];
            for i in 0..n {
                let nv = c * vs(hs(a0[i], b0[i]), hs(a1[i], b1[i])) + ax[i];
                out[i] = nv;
                keep_max(nv, v, s_in[i], a_in[i], &mut s_out[i], &mut a_out[i]);
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

/// One plain step (`D = 1`) of row `y` for every vector: `rows` (`[V][W]`) from the
/// previous state's rows `src(v, r)` (row `r` of plane `v`, zeros outside the frame) and
/// the frame's row `x_row`, with the detection map's row (`srow`, `arow`); `scratch`
/// holds 4 W (`alpha X` and the second copy of the running map, see [`Copies`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn step_row<'s>(
    motions: &[Motion],
    c: f32,
    alpha: f32,
    y: usize,
    src: impl Fn(usize, i64) -> &'s [f32],
    x_row: &[f32],
    rows: &mut [f32],
    srow: &mut [f32],
    arow: &mut [u16],
    scratch: &mut [f32],
) {
    let w = x_row.len();
    let nv = motions.len();
    let mut copies = Copies::new(scratch, w);
    for (a, &x) in copies.ax.iter_mut().zip(x_row) {
        *a = alpha * x;
    }
    copies.start(srow, nv);
    for (vi, m) in motions.iter().enumerate() {
        let mut map = copies.for_vector(srow, vi, nv);
        let sh = Shift::new(-m.vx, -m.vy);
        let p0 = src(vi, y as i64 + sh.iy);
        let p1 = src(vi, y as i64 + sh.iy + 1);
        let op = RowOp {
            c,
            alpha,
            v: vi as f32,
        };
        row_case::<STEP>(p0, p1, sh, op, &mut rows[vi * w..(vi + 1) * w], &mut map);
    }
    copies.finish(arow);
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
    /// `[rows][W]`), with `scratch` (4 W, see [`Copies`]).
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
        if d == 1 {
            let rows = next.chunks_mut(nv * w).zip(score.chunks_mut(w));
            for (i, ((rows, srow), arow)) in rows.zip(arg.chunks_mut(w)).enumerate() {
                let y = y0 + i;
                let x = &self.frames[0][y * w..][..w];
                let src = |v, r| self.state_row(v, r);
                step_row(
                    self.motions,
                    self.c,
                    self.alpha,
                    y,
                    src,
                    x,
                    rows,
                    srow,
                    arow,
                    scratch,
                );
            }
            return;
        }
        let mut copies = Copies::new(scratch, w);
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
            for (a, &x) in copies.ax.iter_mut().zip(last) {
                *a = self.alpha * x;
            }
            copies.start(srow, nv);
            for (vi, m) in self.motions.iter().enumerate() {
                let acc = &mut rows[vi * w..(vi + 1) * w];
                let mut map = copies.for_vector(srow, vi, nv);
                let df = d as f32;
                let sh = Shift::new(-df * m.vx, -df * m.vy);
                let p0 = self.state_row(vi, y as i64 + sh.iy);
                let p1 = self.state_row(vi, y as i64 + sh.iy + 1);
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
                let MapRow {
                    ax,
                    score_in,
                    arg_in,
                    score_out,
                    arg_out,
                } = map;
                let (ax, score_in, arg_in) = (&ax[..w], &score_in[..w], &arg_in[..w]);
                let (score_out, arg_out) = (&mut score_out[..w], &mut arg_out[..w]);
                for i in 0..w {
                    let n = c * acc[i] + ax[i];
                    acc[i] = n;
                    keep_max(
                        n,
                        v,
                        score_in[i],
                        arg_in[i],
                        &mut score_out[i],
                        &mut arg_out[i],
                    );
                }
            }
            copies.finish(arow);
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
    /// Per band: `alpha X` and the second copy of a row's running map (4 W).
    scratch: Vec<f32>,
    /// Per task of a multi-step pass: its rings and scratch rows (made on first use).
    pass_scratch: Vec<f32>,
    pass_args: Vec<u16>,
    /// The Markov matrix between the vectors (`switch.rs`); None: the plain recursion.
    mix: Option<Box<Transition>>,
}

/// A zero vector of `len` floats for a large state: the kernel is asked to back it with
/// huge pages (fewer page faults on first touch, fewer TLB misses in every pass).
/// Allocated through `try_reserve`'s kin (`alloc::try_zeroed`): a refusal is an error.
fn state_vec(len: usize) -> Result<Vec<f32>> {
    let v: Vec<f32> = crate::data::alloc::try_zeroed("the track-before-detect state", len)?;
    #[cfg(target_os = "linux")]
    {
        let page = 4096usize;
        let start = (v.as_ptr() as usize).next_multiple_of(page);
        let end = (v.as_ptr() as usize + len * 4) & !(page - 1);
        if end > start {
            // SAFETY: advice on whole pages inside the vector's own allocation, which
            // changes how the kernel backs them, never their contents (still zero).
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    Ok(v)
}

impl CpuState {
    /// A zero state (`P_0 = 0`).
    pub fn new(h: usize, w: usize, motions: &[Motion], alpha: f32) -> Result<CpuState> {
        let len = h * w * motions.len();
        Ok(CpuState {
            h,
            w,
            motions: motions.to_vec(),
            alpha,
            state: state_vec(len)?,
            next: state_vec(len)?,
            zeros: vec![0.0; w],
            scratch: vec![0.0; h.div_ceil(BAND) * 4 * w],
            pass_scratch: Vec::new(),
            pass_args: Vec::new(),
            mix: None,
        })
    }

    /// The recursion with manoeuvres (`switch.rs`): before each frame the state is mixed
    /// by `m`, then the plain step runs from the mixed state. The identity (or None) is
    /// the plain recursion itself.
    pub fn with_transition(mut self, m: Option<Transition>) -> CpuState {
        self.mix = m.filter(|m| !m.is_identity()).map(Box::new);
        self
    }

    /// The recursion's Markov matrix, when it has one that is not the identity.
    pub fn transition(&self) -> Option<&Transition> {
        self.mix.as_deref()
    }

    /// One block of `frames.len()` frames (decimation D = the count; 1 = plain), writing
    /// the detection map and its arg-max (`score`, `arg`: `[H][W]`).
    /// With a transition matrix the frames are taken one at a time (the trajectories
    /// switch every frame) and the map is the one after the last.
    pub fn block(&mut self, frames: &[&[f32]], score: &mut [f32], arg: &mut [u16]) {
        if let Some(m) = self.mix.take() {
            for f in frames {
                m.mix_rows(&self.state, &mut self.next, self.w);
                std::mem::swap(&mut self.state, &mut self.next);
                self.plain_block(&[f], score, arg);
            }
            self.mix = Some(m);
            return;
        }
        self.plain_block(frames, score, arg);
    }

    fn plain_block(&mut self, frames: &[&[f32]], score: &mut [f32], arg: &mut [u16]) {
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
            .zip(self.scratch.par_chunks_mut(4 * w))
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

    /// `frames.len()` plain steps (`D = 1`) in one pass over memory (`pass.rs`): map `j`
    /// (`maps[j]`: score and arg-max, `[H][W]`) is the map after frame `j`. Bit for bit
    /// what `frames.len()` calls of [`CpuState::block`] with one frame each give; runs as
    /// those calls when the vectors shift rows too far for rows in cache to pay.
    pub fn steps(&mut self, frames: &[&[f32]], maps: &mut [MapRows]) {
        let (h, w, nv) = (self.h, self.w, self.motions.len());
        let k = frames.len();
        assert!(k >= 1 && maps.len() == k);
        let reach = self
            .motions
            .iter()
            .map(|m| m.vy.abs().ceil() as usize)
            .max()
            .unwrap_or(0);
        if k == 1 || reach > 4 || h <= 2 * reach * k || self.mix.is_some() {
            for (f, (s, a)) in frames.iter().zip(maps.iter_mut()) {
                self.block(&[f], s, a);
            }
            return;
        }
        assert!(frames.iter().all(|f| f.len() == h * w));
        assert!(maps
            .iter()
            .all(|(s, a)| s.len() == h * w && a.len() == h * w));
        let pass = Pass {
            h,
            w,
            motions: &self.motions,
            c: 1.0 - self.alpha,
            alpha: self.alpha,
            prev: &self.state,
            frames,
            zeros: &self.zeros,
            reach,
        };
        let tasks = h.div_ceil(PASS_BAND);
        let per = pass.ring_len() + 5 * w;
        if self.pass_scratch.len() != tasks * per {
            self.pass_scratch = vec![0.0; tasks * per];
            self.pass_args = vec![0; tasks * w];
        }
        // Each task's rows of every map.
        let mut rows: Vec<Vec<MapRows>> = (0..tasks).map(|_| Vec::with_capacity(k)).collect();
        for (s, a) in maps.iter_mut() {
            let chunks = s.chunks_mut(PASS_BAND * w).zip(a.chunks_mut(PASS_BAND * w));
            for (b, (s, a)) in chunks.enumerate() {
                rows[b].push((s, a));
            }
        }
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        self.next
            .par_chunks_mut(PASS_BAND * nv * w)
            .zip(rows.par_iter_mut())
            .zip(self.pass_scratch.par_chunks_mut(per))
            .zip(self.pass_args.par_chunks_mut(w))
            .enumerate()
            .for_each(|(b, (((next, maps), scratch), spare))| {
                let (y0, y1) = (b * PASS_BAND, ((b + 1) * PASS_BAND).min(h));
                let (rings, scratch) = scratch.split_at_mut(per - 5 * w);
                #[cfg(target_arch = "x86_64")]
                if avx2 {
                    // SAFETY: the CPU has AVX2 (checked above).
                    unsafe { pass.band_avx2(y0, y1, next, maps, rings, scratch, spare) };
                    return;
                }
                pass.band(y0, y1, next, maps, rings, scratch, spare);
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
