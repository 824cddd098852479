//! Several plain steps (`D = 1`) per pass over memory: the CPU's form of keeping the
//! state on chip across K frames while still emitting the map after every frame.
//!
//! One plain step reads and writes the whole state (`V x H x W` floats, far larger than
//! the caches), so it runs at the speed of memory, not of arithmetic. A pass of K steps
//! works through a band of rows as a wavefront: the state after frame `j` is kept only
//! as a ring of rows in cache, and row `y` of step `j + 1` is made as soon as rows
//! `y - r ..= y + r` of step `j` exist (`r`: the largest row shift of any vector,
//! rounded up). A band also makes the `(K - j) r` rows of step `j` beyond each of its
//! edges that its own rows of the last step depend on (its neighbours make the same
//! rows, with the same arithmetic). The state is read once and written once per pass,
//! and every value is computed exactly as the plain step computes it: the results are
//! those of K single steps, bit for bit.

use super::cpu::step_row;
use super::motion::Motion;

/// Rows of the last step that one task of a pass makes.
pub(super) const PASS_BAND: usize = 64;

/// The inputs of one pass.
pub(super) struct Pass<'a> {
    pub h: usize,
    pub w: usize,
    pub motions: &'a [Motion],
    pub c: f32,
    pub alpha: f32,
    /// The state before the pass, `[H][V][W]`.
    pub prev: &'a [f32],
    /// The pass's frames, in order (K of them).
    pub frames: &'a [&'a [f32]],
    /// A row of zeros: the rows outside the frame.
    pub zeros: &'a [f32],
    /// The largest row shift of any vector, rounded up.
    pub reach: usize,
}

/// The rows of one task's map of step `j`: score and arg-max, `[rows][W]`.
pub(super) type MapRows<'m> = (&'m mut [f32], &'m mut [u16]);

impl Pass<'_> {
    /// Floats of one task's ring buffers: `K - 1` rings of `2 r + 1` rows of every vector.
    pub fn ring_len(&self) -> usize {
        self.frames.len().saturating_sub(1) * (2 * self.reach + 1) * self.motions.len() * self.w
    }

    /// Rows `y0..y1` of the state after the pass into `next` (`[rows][V][W]`) and of the
    /// map after each step `j` into `maps[j]`. `rings`: [`Pass::ring_len`] floats;
    /// `scratch`: 5 W floats; `spare_arg`: W (the map rows of rows beyond the band).
    #[inline(always)]
    pub fn band(
        &self,
        y0: usize,
        y1: usize,
        next: &mut [f32],
        maps: &mut [MapRows],
        rings: &mut [f32],
        scratch: &mut [f32],
        spare_arg: &mut [u16],
    ) {
        let (h, w, nv, r) = (self.h, self.w, self.motions.len(), self.reach);
        let k = self.frames.len();
        let row_len = nv * w;
        let ring_rows = 2 * r + 1;
        let ring_len = ring_rows * row_len;
        let (scratch, spare_score) = scratch.split_at_mut(4 * w);
        // Rows of step j (1-based) that the band needs.
        let lo = |j: usize| y0.saturating_sub((k - j) * r);
        let hi = |j: usize| (y1 + (k - j) * r).min(h);
        // At time t, step j makes its row t - (j - 1) r: the rows of step j - 1 it reads
        // (up to r below) were made at time t or before, and are still in the ring
        // (2 r + 1 rows: the oldest one read is t - j r, the newest t - (j - 2) r).
        for t in lo(1)..y1 + (k - 1) * r {
            for j in 1..=k {
                let Some(y) = t.checked_sub((j - 1) * r) else {
                    continue;
                };
                if y < lo(j) || y >= hi(j) {
                    continue;
                }
                let x = &self.frames[j - 1][y * w..][..w];
                let (srow, arow) = if y >= y0 && y < y1 {
                    let (s, a) = &mut maps[j - 1];
                    (&mut s[(y - y0) * w..][..w], &mut a[(y - y0) * w..][..w])
                } else {
                    (&mut spare_score[..], &mut spare_arg[..])
                };
                // Step j reads step j - 1 (the state itself for j = 1, else ring j - 2)
                // and writes ring j - 1 (the band's rows of `next` for j = K).
                let (lower, upper) = rings.split_at_mut((j - 1) * ring_len);
                let read: &[f32] = if j >= 2 {
                    &lower[(j - 2) * ring_len..]
                } else {
                    &[]
                };
                let out = if j == k {
                    &mut next[(y - y0) * row_len..][..row_len]
                } else {
                    &mut upper[(y % ring_rows) * row_len..][..row_len]
                };
                let zeros = self.zeros;
                let inside = |q: i64| q >= 0 && q < h as i64;
                // One call, two sources (the previous frame, or the ring), each a
                // closure of its own type, so each call is compiled for its source.
                macro_rules! step {
                    (|$v:ident, $q:ident| $row:expr) => {
                        step_row(
                            self.motions,
                            self.c,
                            self.alpha,
                            y,
                            |$v: usize, $q: i64| if inside($q) { $row } else { zeros },
                            x,
                            out,
                            srow,
                            arow,
                            scratch,
                        )
                    };
                }
                if j == 1 {
                    let prev = self.prev;
                    step!(|v, q| &prev[(q as usize * nv + v) * w..][..w]);
                } else {
                    step!(|v, q| &read[(q as usize % ring_rows) * row_len + v * w..][..w]);
                }
            }
        }
    }

    /// [`Pass::band`] compiled for AVX2 (eight f32 lanes; no FMA, so the same results).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn band_avx2(
        &self,
        y0: usize,
        y1: usize,
        next: &mut [f32],
        maps: &mut [MapRows],
        rings: &mut [f32],
        scratch: &mut [f32],
        spare_arg: &mut [u16],
    ) {
        self.band(y0, y1, next, maps, rings, scratch, spare_arg)
    }
}
