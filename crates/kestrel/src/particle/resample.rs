//! Resampling: from N weighted particles, the ancestor index of each of N new ones.
//!
//! Each scheme is a separate piece with the same signature ([`resample`]); all take the
//! weights unnormalised (any scale: the filter passes `exp(lw - max lw)`) and draw their
//! uniforms from the counter-based generator ([`Draws`]), so a scheme run on the CPU and
//! on the GPU picks the same ancestors from the same seed.
//!
//! - **multinomial**: `a_j = C^{-1}(u_(j) W)` with `u_(j)` the order statistics of N
//!   uniforms (drawn in order from exponential spacings: one merge walk, no sort);
//! - **stratified**: `a_j = C^{-1}((j + u_j) W / N)`;
//! - **systematic**: `a_j = C^{-1}((j + u) W / N)`, one `u` for all;
//! - **residual**: `floor(N w_i / W)` copies of each, the remaining `R` drawn
//!   multinomially (as above) from the residual weights `N w_i / W - floor(N w_i / W)`;
//! - **metropolis(B)** (Murray, Lee & Jacob 2016, Alg. 3): B Metropolis steps on the
//!   index, accepting `i -> c` with probability `min(1, w_c / w_i)`: no prefix sum, no
//!   collective operation; biased for finite B (the bias vanishes as B grows; a rule for
//!   B: `B >= ln(eps) / ln(1 - mean(w) / max(w))`);
//! - **rejection** (Murray et al., Alg. 4): propose `c` uniformly, accept with probability
//!   `w_c / max w`: unbiased, no prefix sum, a random number of steps (expected
//!   `max(w) / mean(w)`; after 2^25 proposals a draw keeps its last candidate);
//! - **systematic:grid**, **stratified:grid** (Hendeby et al., eq. 6; `grid.rs`): the same
//!   positions and the same ancestors as systematic and stratified, each particle finding
//!   its slots from its cumulative weight snapped to the grid of positions in O(1)
//!   instead of a search per slot;
//! - **subsets:S** (`subsets.rs`): S subsets resampled locally, allocated by their weights,
//!   the surplus redistributed between them (Bolić et al.'s proportional allocation, the
//!   distributed resampling of Hendeby et al.).
//!
//! `C^{-1}(x)` is the first index `i` with `C_i > x`, where `C` is the inclusive
//! cumulative sum of the weights. It is summed in f64 whatever the particles' precision
//! (Murray et al. show prefix-sum resamplers become biased in single precision from about
//! 10^5 particles): chunks of [`CHUNK`] weights summed in order, then the chunk totals in
//! order, so the result does not depend on the number of threads.

use super::crew::Crew;
use super::philox::{counter, index, philox4x32_10, uniform_f64, Purpose};
use crate::error::{Error, Result};
use crate::linalg::Real;
use rayon::prelude::*;
use std::fmt;

/// Weights per chunk of the cumulative sum and of the ancestor loops (and particles per
/// task of the CPU filter): small enough that 10^4 particles keep two cores busy.
pub const CHUNK: usize = 1 << 11;

/// Metropolis steps when `metropolis` is given without `:B`.
pub const DEFAULT_METROPOLIS_STEPS: u32 = 32;

/// Proposals after which a rejection draw stops at its current candidate.
pub const REJECTION_LIMIT: u32 = 1 << 25;

/// Most proposals one rejection resampling may draw in all (about a minute of a core).
pub const REJECTION_BUDGET: u128 = 10_000_000_000;

/// A resampling scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resampler {
    /// Independent draws from the weights.
    Multinomial,
    /// One uniform draw in each of `N` equal strata.
    Stratified,
    /// One uniform offset shared by `N` equally spaced points.
    Systematic,
    /// The integer parts of `N w_i` deterministically, the rest multinomially.
    Residual,
    /// Metropolis with this many steps.
    Metropolis(u32),
    /// Rejection sampling against the largest weight (no sum over the weights).
    Rejection,
    /// Systematic positions, each particle's slots from the grid (`grid.rs`).
    SystematicGrid,
    /// Stratified positions, each particle's slots from the grid (`grid.rs`).
    StratifiedGrid,
    /// Resampling in this many subsets with redistribution (`subsets.rs`).
    Subsets(u32),
}

impl Resampler {
    /// Every scheme, Metropolis with its default number of steps.
    pub const ALL: [Resampler; 6] = [
        Resampler::Multinomial,
        Resampler::Stratified,
        Resampler::Systematic,
        Resampler::Residual,
        Resampler::Metropolis(DEFAULT_METROPOLIS_STEPS),
        Resampler::Rejection,
    ];

    /// Parses `systematic|stratified|multinomial|residual|metropolis[:B]|rejection|
    /// systematic:grid|stratified:grid|subsets[:S]`.
    pub fn parse(s: &str) -> Result<Resampler> {
        let unknown = || {
            Error::input(format!(
                "unknown resampler \"{s}\" (expected systematic, stratified, multinomial, residual, metropolis[:B], rejection, systematic:grid, stratified:grid or subsets[:S])"
            ))
        };
        if let Some(k) = s.strip_prefix("subsets:") {
            let max = super::subsets::MAX_SUBSETS;
            return match k.parse::<u32>() {
                Ok(k) if (1..=max).contains(&k) => Ok(Resampler::Subsets(k)),
                _ => Err(Error::input(format!(
                    "resampler \"{s}\": the number of subsets must be a whole number from 1 to {max}"
                ))),
            };
        }
        Ok(match s {
            "systematic:grid" => Resampler::SystematicGrid,
            "stratified:grid" => Resampler::StratifiedGrid,
            "subsets" => Resampler::Subsets(super::subsets::DEFAULT_SUBSETS),
            "systematic" => Resampler::Systematic,
            "stratified" => Resampler::Stratified,
            "multinomial" => Resampler::Multinomial,
            "residual" => Resampler::Residual,
            "rejection" => Resampler::Rejection,
            "metropolis" => Resampler::Metropolis(DEFAULT_METROPOLIS_STEPS),
            _ => {
                let b = s.strip_prefix("metropolis:").ok_or_else(unknown)?;
                let b: u32 = b.parse().map_err(|_| {
                    Error::input(format!(
                        "resampler \"{s}\": the number of Metropolis steps must be a whole number from 1 to {}",
                        1u32 << 25
                    ))
                })?;
                if b == 0 || b > 1 << 25 {
                    return Err(Error::input(format!(
                        "resampler \"{s}\": the number of Metropolis steps must be from 1 to {}",
                        1u32 << 25
                    )));
                }
                Resampler::Metropolis(b)
            }
        })
    }

    /// True for the schemes built on the cumulative sum of the weights.
    pub fn needs_prefix_sum(self) -> bool {
        !matches!(self, Resampler::Metropolis(_) | Resampler::Rejection)
    }
}

impl fmt::Display for Resampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resampler::Multinomial => f.write_str("multinomial"),
            Resampler::Stratified => f.write_str("stratified"),
            Resampler::Systematic => f.write_str("systematic"),
            Resampler::Residual => f.write_str("residual"),
            Resampler::Metropolis(b) => write!(f, "metropolis:{b}"),
            Resampler::Rejection => f.write_str("rejection"),
            Resampler::SystematicGrid => f.write_str("systematic:grid"),
            Resampler::StratifiedGrid => f.write_str("stratified:grid"),
            Resampler::Subsets(k) => write!(f, "subsets:{k}"),
        }
    }
}

/// Whose uniforms a resampling draws: generator key, filter `b`, step `k`.
#[derive(Clone, Copy, Debug)]
pub struct Draws {
    /// Generator key (from the seed).
    pub key: [u32; 2],
    /// Filter (track) index `b`.
    pub filter: u32,
    /// Step `k`.
    pub step: u32,
}

impl Draws {
    /// Block `j` of the resampling words of slot `i`.
    #[inline(always)]
    pub(crate) fn words(&self, i: u32, j: u32) -> [u32; 4] {
        philox4x32_10(
            counter(i, self.filter, self.step, Purpose::Resample, j),
            self.key,
        )
    }
}

/// Reusable buffers of [`resample`].
#[derive(Default)]
pub struct Scratch {
    cdf: Vec<f64>,
    counts: Vec<u32>,
    chunk: Vec<f64>,
}

/// Where a resampler's passes run: on the calling thread, on the pool's threads, or on
/// the crew that runs the filter's steps (whose helpers hold their cores between passes:
/// the pool's threads would compete with them).
#[derive(Clone, Copy)]
pub(crate) enum Par<'a> {
    Serial,
    Pool,
    Crew(&'a Crew),
}

/// Runs `f(chunk index, chunk)` over `CHUNK`-sized pieces of `out`.
fn for_chunks<X: Send>(par: Par<'_>, out: &mut [X], f: impl Fn(usize, &mut [X]) + Sync) {
    for_pieces(par, out, CHUNK, f)
}

/// Runs `f(piece index, piece)` over `size`-long pieces of `out` (the last may be
/// shorter).
pub(crate) fn for_pieces<X: Send>(
    par: Par<'_>,
    out: &mut [X],
    size: usize,
    f: impl Fn(usize, &mut [X]) + Sync,
) {
    match par {
        Par::Serial => out.chunks_mut(size).enumerate().for_each(|(c, s)| f(c, s)),
        Par::Pool => out
            .par_chunks_mut(size)
            .enumerate()
            .for_each(|(c, s)| f(c, s)),
        Par::Crew(crew) => crew.for_chunks(out, size, f),
    }
}

/// The inclusive cumulative sum of `w(i)` for `i in 0..n` in f64 into `cdf` (chunked,
/// thread-count independent); returns the total.
fn cumulative(par: Par<'_>, n: usize, w: impl Fn(usize) -> f64 + Sync, s: &mut Scratch) -> f64 {
    s.cdf.resize(n, 0.0);
    let chunks = n.div_ceil(CHUNK);
    s.chunk.resize(chunks, 0.0);
    let cdf = &mut s.cdf;
    for_chunks(par, cdf, |c, out| {
        let mut acc = 0.0f64;
        for (l, o) in out.iter_mut().enumerate() {
            acc += w(c * CHUNK + l);
            *o = acc;
        }
    });
    // Chunk offsets in order, then added to every chunk but the first.
    let mut off = 0.0f64;
    for c in 0..chunks {
        s.chunk[c] = off;
        off += cdf[((c + 1) * CHUNK).min(n) - 1];
    }
    let offs = &s.chunk;
    for_chunks(par, cdf, |c, out| {
        if c > 0 {
            let o = offs[c];
            out.iter_mut().for_each(|v| *v += o);
        }
    });
    off
}

/// `C^{-1}(x)`: the first `i` with `cdf[i] > x`, starting the search at `from` (a lower
/// bound); past the end (rounding at `x ~ W`), the last particle of positive weight.
#[inline]
fn first_above(cdf: &[f64], from: usize, x: f64) -> usize {
    let i = from + cdf[from..].partition_point(|&c| c <= x);
    if i < cdf.len() {
        return i;
    }
    let mut j = cdf.len() - 1;
    while j > 0 && cdf[j] == cdf[j - 1] {
        j -= 1;
    }
    j
}

/// Walks `out` (ancestors of slots `j0..`) over increasing positions `pos(j)`: one
/// binary search at the chunk's start, then a merge walk (same answers as a binary
/// search per slot).
#[inline]
fn walk_sorted(cdf: &[f64], j0: usize, out: &mut [u32], pos: impl Fn(usize) -> f64) {
    let mut i = first_above(cdf, 0, pos(j0));
    for (l, a) in out.iter_mut().enumerate() {
        let x = pos(j0 + l);
        while i < cdf.len() && cdf[i] <= x {
            i += 1;
        }
        if i == cdf.len() {
            i = first_above(cdf, 0, x);
        }
        *a = i as u32;
    }
}

/// Fills `ancestors` (length N = `w.len()`) with the indices chosen by `scheme` from the
/// weights `w` (non-negative, finite, not all zero). `par`: spread over all cores.
///
/// Rejection sampling draws about `N max(w) / mean(w)` proposals in all: its work is
/// bounded before it starts ([`crate::limits::work`], at most [`REJECTION_BUDGET`]), so
/// that weights peaked on a few particles are refused with advice instead of running
/// for hours.
pub fn resample<W: Real>(
    scheme: Resampler,
    w: &[W],
    draws: Draws,
    ancestors: &mut [u32],
    scratch: &mut Scratch,
    par: bool,
) -> crate::error::Result<()> {
    let par = if par { Par::Pool } else { Par::Serial };
    resample_on(scheme, w, draws, ancestors, scratch, par)
}

/// [`resample`] with its passes on `par`.
pub(crate) fn resample_on<W: Real>(
    scheme: Resampler,
    w: &[W],
    draws: Draws,
    ancestors: &mut [u32],
    scratch: &mut Scratch,
    par: Par<'_>,
) -> crate::error::Result<()> {
    let n = w.len();
    assert_eq!(ancestors.len(), n, "one ancestor per particle");
    if n == 0 {
        return Ok(());
    }
    let nf = n as f64;
    match scheme {
        Resampler::Systematic => {
            let total = cumulative(par, n, |i| w[i].to_f64(), scratch);
            let u = systematic_uniform(draws);
            let scale = total / nf;
            let cdf = &scratch.cdf;
            for_chunks(par, ancestors, |c, out| {
                walk_sorted(cdf, c * CHUNK, out, |j| (j as f64 + u) * scale)
            });
        }
        Resampler::Stratified => {
            let total = cumulative(par, n, |i| w[i].to_f64(), scratch);
            let scale = total / nf;
            let cdf = &scratch.cdf;
            for_chunks(par, ancestors, |c, out| {
                walk_sorted(cdf, c * CHUNK, out, |j| {
                    (j as f64 + uniform_f64(draws.words(j as u32, 0)[0])) * scale
                })
            });
        }
        Resampler::Multinomial => {
            let total = cumulative(par, n, |i| w[i].to_f64(), scratch);
            let (cdf, chunk) = (&scratch.cdf, &mut scratch.chunk);
            sorted_multinomial(cdf, total, draws, ancestors, chunk, par);
        }
        Resampler::Residual => residual(w, draws, ancestors, scratch, par),
        Resampler::Metropolis(steps) => {
            for_chunks(par, ancestors, |c, out| {
                for (l, a) in out.iter_mut().enumerate() {
                    let j = (c * CHUNK + l) as u32;
                    let mut k = j;
                    let mut wk = w[k as usize].to_f64();
                    for s in 0..steps {
                        let x = draws.words(j, s / 2);
                        let p = 2 * (s % 2) as usize;
                        let cand = index(x[p], n as u32);
                        let wc = w[cand as usize].to_f64();
                        if uniform_f64(x[p + 1]) * wk <= wc {
                            k = cand;
                            wk = wc;
                        }
                    }
                    *a = k;
                }
            });
        }
        Resampler::SystematicGrid | Resampler::StratifiedGrid => {
            let total = cumulative(par, n, |i| w[i].to_f64(), scratch);
            let stratified = scheme == Resampler::StratifiedGrid;
            let pos = super::grid::positions(draws, stratified, n, total);
            super::grid::grid_ancestors(&scratch.cdf, total, pos, ancestors);
        }
        Resampler::Subsets(k) => {
            let total = cumulative(par, n, |i| w[i].to_f64(), scratch);
            super::subsets::resample_subsets(&scratch.cdf, total, k as usize, draws, ancestors);
        }
        Resampler::Rejection => {
            let wmax = w.iter().fold(0.0f64, |m, v| m.max(v.to_f64()));
            let total: f64 = w.iter().map(|v| v.to_f64()).sum();
            // Expected proposals: N per particle times max / mean, each capped.
            let per = (wmax * nf / total).min(REJECTION_LIMIT as f64);
            crate::limits::work(
                &format!(
                    "rejection resampling of filter {} at step {} (the largest weight {} times the mean)",
                    draws.filter,
                    draws.step,
                    crate::limits::short(wmax * nf / total)
                ),
                &[
                    crate::limits::Size("particles", n),
                    crate::limits::Size("proposals per particle", per.ceil() as usize),
                ],
                REJECTION_BUDGET,
                "the weights are too peaked for rejection: use --resample systematic or metropolis",
            )?;
            for_chunks(par, ancestors, |c, out| {
                for (l, a) in out.iter_mut().enumerate() {
                    let j = (c * CHUNK + l) as u32;
                    *a = rejection_one(w, wmax, draws, j);
                }
            });
        }
    }
    Ok(())
}

/// The inclusive cumulative sum of `w` in f64 and its total, as [`resample`] forms them
/// (the prefix-sum schemes' input; for tests of other implementations of a scheme).
pub fn cumulative_weights<W: Real>(w: &[W]) -> (Vec<f64>, f64) {
    let mut s = Scratch::default();
    let total = cumulative(Par::Serial, w.len(), |i| w[i].to_f64(), &mut s);
    (s.cdf, total)
}

/// The one uniform of systematic resampling.
pub fn systematic_uniform(draws: Draws) -> f64 {
    uniform_f64(draws.words(0, 0)[0])
}

/// A cumulative sum of weights held as running sums within chunks of `chunk` particles
/// (`local`), each chunk's scale (`scale`: the filter's chunks sum their weights relative
/// to their own largest, `exp(lw - m_chunk)`, and `exp(m_chunk - m)` brings them to the
/// filter's) and the sum of the chunks before each chunk (`offsets`):
/// `C_i = offsets[c] + scale[c] local_i`, `c = i / chunk`. With scales of 1 and chunks of
/// [`CHUNK`] these are the values [`resample`] forms.
#[derive(Clone, Copy)]
pub struct ChunkedCdf<'a> {
    /// Running sums within each chunk.
    pub local: &'a [f64],
    /// Sum of the (scaled) weights of the chunks before each chunk (0 for the first).
    pub offsets: &'a [f64],
    /// Each chunk's scale.
    pub scale: &'a [f64],
    /// Particles per chunk.
    pub chunk: usize,
}

impl ChunkedCdf<'_> {
    #[inline(always)]
    fn at(&self, i: usize) -> f64 {
        let c = i / self.chunk;
        self.offsets[c] + self.scale[c] * self.local[i]
    }

    /// The first `i` with `C_i > x` (`N` when none).
    fn search(&self, x: f64) -> usize {
        let n = self.local.len();
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.at(mid) <= x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The last particle of positive weight (where positions past the total land).
    fn last_positive(&self) -> usize {
        let mut j = self.local.len() - 1;
        while j > 0 && self.at(j) == self.at(j - 1) {
            j -= 1;
        }
        j
    }
}

/// Sources whose counts [`systematic_ancestors`] forms together.
const BLOCK: usize = 256;

/// Systematic resampling for the slots `s0..s0 + anc.len()`: slot `j` takes the first
/// `i` with `C_i > (j + u) scale` (the choice of [`resample`] with
/// [`Resampler::Systematic`] for `scale = W / N` and the `u` of [`systematic_uniform`];
/// past the total, the last particle of positive weight).
///
/// Without a branch a particle: each source `i` in the slots' range of ancestors counts
/// the positions below `C_i`, `c_i = #{j : (j + u) scale < C_i}` (an estimate
/// `round(C_i / scale - u)`, within one of the count, corrected by comparing the two
/// positions around it, so the count is that of the comparisons themselves); source `i`
/// owns the slots `c_{i-1} <= j < c_i`, so it writes its index at slot `c_{i-1}` (sources
/// without slots are overwritten by the next owner), and a running maximum fills the
/// slots in between.
pub fn systematic_ancestors(cdf: ChunkedCdf<'_>, u: f64, scale: f64, s0: usize, anc: &mut [u32]) {
    let (end, last) = ancestor_marks(cdf, u, scale, s0, anc);
    let mut mx = 0u32;
    for (j, a) in anc.iter_mut().enumerate() {
        mx = mx.max(*a);
        *a = if s0 + j < end { mx } else { last };
    }
}

with_avx2! {
    /// The marks of [`systematic_ancestors`] (each owner's index at its first slot, 0
    /// elsewhere), and from which slot on the positions are past the total, with the
    /// particle those take.
    fn ancestor_marks[](
        cdf: ChunkedCdf<'_>,
        u: f64,
        scale: f64,
        s0: usize,
        anc: &mut [u32],
    ) -> (usize, u32) = marks_lanes[];
}

#[inline(always)]
fn marks_lanes(
    cdf: ChunkedCdf<'_>,
    u: f64,
    scale: f64,
    s0: usize,
    anc: &mut [u32],
) -> (usize, u32) {
    const ROUND: f64 = 6_755_399_441_055_744.0;
    const TWO52: f64 = 4_503_599_627_370_496.0;
    let len = anc.len();
    anc.fill(0);
    if len == 0 {
        return (s0, 0);
    }
    let n = cdf.local.len();
    let nf = n as f64;
    let s1 = s0 + len;
    let pos = |j: f64| (j + u) * scale;
    let inv = 1.0 / scale;
    // #{j >= 0 : pos(j) < c}, at most N.
    let count = |c: f64| -> f64 {
        let e = ((c * inv - u) + ROUND) - ROUND;
        let e = e.max(0.0).min(nf);
        let below = |j: f64| if pos(j) < c { 1.0 } else { 0.0 };
        (e - 1.0 + below(e - 1.0) + below(e)).min(nf)
    };
    let i_lo = cdf.search(pos(s0 as f64));
    let end = count(cdf.at(n - 1)) as usize;
    // Positions past the total (rounding) take the last particle of positive weight.
    let last = if end < s1 {
        cdf.last_positive() as u32
    } else {
        0
    };
    if i_lo == n {
        return (end, last);
    }
    let i_hi = cdf.search(pos((s1 - 1) as f64)).min(n - 1);
    let mut prev = if i_lo == 0 {
        0
    } else {
        count(cdf.at(i_lo - 1)) as usize
    };
    let mut counts = [0u32; BLOCK];
    let mut i = i_lo;
    while i <= i_hi {
        // A block of sources within one chunk: its offset and scale are constants.
        let c = i / cdf.chunk;
        let m = (i_hi + 1 - i).min(BLOCK).min((c + 1) * cdf.chunk - i);
        let (off, sc) = (cdf.offsets[c], cdf.scale[c]);
        for (o, &l) in counts[..m].iter_mut().zip(&cdf.local[i..i + m]) {
            *o = (count(off + sc * l) + TWO52).to_bits() as u32;
        }
        for (t, &cn) in counts[..m].iter().enumerate() {
            anc[prev.max(s0).min(s1 - 1) - s0] = (i + t) as u32;
            prev = cn as usize;
        }
        i += m;
    }
    (end, last)
}

/// `out[j] = x[anc[j]]` for particles of `nx` values.
pub fn gather<T: Copy>(x: &[T], nx: usize, anc: &[u32], out: &mut [T]) {
    // A state size known at compile time makes each copy a few moves.
    match nx {
        1 => gather_n::<T, 1>(x, nx, anc, out),
        2 => gather_n::<T, 2>(x, nx, anc, out),
        4 => gather_n::<T, 4>(x, nx, anc, out),
        _ => gather_n::<T, 0>(x, nx, anc, out),
    }
}

#[inline(always)]
fn gather_n<T: Copy, const NX: usize>(x: &[T], nx: usize, anc: &[u32], out: &mut [T]) {
    let nx = if NX > 0 { NX } else { nx };
    for (o, &a) in out.chunks_exact_mut(nx).zip(anc) {
        let a = a as usize;
        o.copy_from_slice(&x[a * nx..(a + 1) * nx]);
    }
}

/// One rejection draw for slot `j`: proposal `s` uses words `(2p, 2p+1)` of block `s/2`,
/// `p = s mod 2` (the candidate index, then the acceptance uniform); proposal 0 is `j`.
#[inline]
fn rejection_one<W: Real>(w: &[W], wmax: f64, draws: Draws, j: u32) -> u32 {
    let n = w.len() as u32;
    let mut x = [0u32; 4];
    let mut k = j;
    for s in 0..REJECTION_LIMIT {
        if s % 2 == 0 {
            x = draws.words(j, s / 2);
        }
        let p = 2 * (s % 2) as usize;
        if s > 0 {
            k = index(x[p], n);
        }
        if uniform_f64(x[p + 1]) * wmax <= w[k as usize].to_f64() {
            return k;
        }
    }
    k
}

/// Residual resampling: deterministic copies, then multinomial on the residuals.
fn residual<W: Real>(
    w: &[W],
    draws: Draws,
    ancestors: &mut [u32],
    scratch: &mut Scratch,
    par: Par<'_>,
) {
    let n = w.len();
    let nf = n as f64;
    let total = cumulative(par, n, |i| w[i].to_f64(), scratch);
    let scale = nf / total;
    // Copies of each particle, and their running total (the first slot of each).
    let mut counts = std::mem::take(&mut scratch.counts);
    counts.resize(n, 0);
    for_chunks(par, &mut counts, |c, out| {
        for (l, o) in out.iter_mut().enumerate() {
            *o = (w[c * CHUNK + l].to_f64() * scale).floor() as u32;
        }
    });
    let mut slot = 0usize;
    for (i, &m) in counts.iter().enumerate() {
        let m = (m as usize).min(n - slot);
        ancestors[slot..slot + m].fill(i as u32);
        slot += m;
    }
    let rest = n - slot;
    if rest > 0 {
        let counts_ref = &counts;
        let rtotal = cumulative(
            par,
            n,
            |i| w[i].to_f64() * scale - counts_ref[i] as f64,
            scratch,
        );
        let (cdf, chunk) = (&scratch.cdf, &mut scratch.chunk);
        sorted_multinomial(cdf, rtotal, draws, &mut ancestors[slot..], chunk, par);
    }
    scratch.counts = counts;
}

/// `m = out.len()` multinomial draws from the cumulative sum `cdf` (total `total`), in
/// increasing order: the order statistics of `m` uniforms are `U_(j) = S_j / S_m` with
/// `S_j` the running sum of `m + 1` standard exponentials `E_l = -ln u_l` (slot `l`),
/// so the draws come out sorted and one merge walk over `cdf` places them all (a binary
/// search per draw into a large `cdf` is one cache miss per level). The multiset of
/// ancestors has the multinomial law; their order carries no information.
fn sorted_multinomial(
    cdf: &[f64],
    total: f64,
    draws: Draws,
    out: &mut [u32],
    chunk_sums: &mut Vec<f64>,
    par: Par<'_>,
) {
    let m = out.len();
    let e = |l: usize| -uniform_f64(draws.words(l as u32, 0)[0]).ln();
    // Chunk totals of E_0..E_{m-1}, then their running offsets; E_m closes the sum.
    let chunks = m.div_ceil(CHUNK);
    chunk_sums.resize(chunks + 1, 0.0);
    let sums = &mut chunk_sums[..chunks];
    let fill = |c: usize, v: &mut f64| {
        *v = (c * CHUNK..((c + 1) * CHUNK).min(m)).map(e).sum::<f64>();
    };
    for_pieces(par, sums, 1, |c, v| fill(c, &mut v[0]));
    let mut acc = 0.0f64;
    for v in chunk_sums[..chunks].iter_mut() {
        let t = *v;
        *v = acc;
        acc += t;
    }
    let s_m = acc + e(m);
    let scale = total / s_m;
    let offs = &chunk_sums[..chunks];
    for_chunks(par, out, |c, o| {
        let mut s = offs[c];
        let mut i = 0usize;
        for (l, a) in o.iter_mut().enumerate() {
            s += e(c * CHUNK + l);
            let x = s * scale;
            if l == 0 {
                i = first_above(cdf, 0, x);
            }
            while i < cdf.len() && cdf[i] <= x {
                i += 1;
            }
            if i == cdf.len() {
                i = first_above(cdf, 0, x);
            }
            *a = i as u32;
        }
    });
}

/// Offspring counts `o_i` (how many new particles descend from particle `i`).
pub fn offspring(ancestors: &[u32], n: usize) -> Vec<u32> {
    let mut o = vec![0u32; n];
    for &a in ancestors {
        o[a as usize] += 1;
    }
    o
}
