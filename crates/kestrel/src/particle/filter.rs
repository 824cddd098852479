//! The bootstrap (SIR) particle filter on the CPU: the reference of the GPU path.
//!
//! For each filter `b` and step `k` (time convention of the README: step 0 weights the
//! prior's particles by `z_0`, later steps propagate then weight):
//!
//! 1. draw (`k = 0`: the prior) or propagate each particle, and add `ln p(z_k | x_k^i)` to
//!    its log-weight `lw_i` (a missing `z_k`, NaN in any component, adds nothing);
//! 2. `m = max lw`, `w_i = exp(lw_i - m)` (the max-shift: the largest weight is 1, so
//!    tiny likelihoods never underflow all together), `S = sum w_i`;
//!    `ln p^(z_k | z_0:k-1) = m + ln S - ln S_prev` with `ln S_prev` the same
//!    log-sum of the weights before this step's update (`ln N` right after resampling);
//!    mean `sum w_i x_i / S`, covariance `sum w_i (x_i - c)(x_i - c)^T / S - (m - c)(m - c)^T`
//!    around the reference point `c = x_0` (one pass, no cancellation while `c` is near
//!    the cloud), `ESS = S^2 / sum w_i^2`, all sums in f64;
//! 3. if `ESS < threshold N` (and `k` is not the last step), resample, copy the chosen
//!    particles and reset `lw = 0`.
//!
//! One pass over the particles a step, in chunks of [`chunk_len`] particles (a function
//! of N alone), all of a chunk's work while it is in cache: resampling's choice for the
//! chunk's slots (systematic: [`systematic_ancestors`], no branch a particle) and the copy
//! of the chosen particles, the move and the likelihood ([`ParticleModel::advance_batch`]:
//! the built-in kinds draw the noise of several particles at once), the chunk's largest
//! log-weight `m_c`, its weights `exp(lw - m_c)` and their sums around the chunk's first
//! particle, and the running sums of its weights. Then, once per step, the chunks'
//! records are combined as the GPU's `pf_combine` does: `m = max m_c`, each chunk's scale
//! `exp(m_c - m)`, the totals moved to chunk 0's reference, and the chunks' offsets in the
//! cumulative sum that the next step's resampling searches. Each chunk's sums are formed
//! in a fixed order (its running sums in particle order; with four-component states the
//! other sums in four lanes, `sums::sums4_lanes`) and the chunks combined in order, so
//! results are identical for every thread
//! count, whether the filters run side by side (many filters) or one filter's particles
//! are spread over all cores (few filters, many particles).

use super::batch::{as_f64, as_f64_mut};
use super::crew::{Crew, Shared};
use super::lanes::{exp_nonpositive, L};
use super::models::{Batch, ParticleModel};
use super::philox::key_of;
use super::resample::{
    for_pieces, resample_on, systematic_ancestors, systematic_uniform, ChunkedCdf, Draws, Par,
    Resampler, Scratch, CHUNK,
};
use super::{PfOptions, PfOutput};
use crate::data::alloc::{try_filled, try_zeroed};
use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::Estimates;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use sums::chunk_sums;

mod sums;

/// Particles per chunk of a filter of `n` particles: about 16 chunks (two cores stay
/// evenly busy at N = 10^4), from 256 to [`CHUNK`], a multiple of the lanes. It depends on
/// N alone, so results do not depend on the thread count.
pub(crate) fn chunk_len(n: usize) -> usize {
    n.div_ceil(16).next_multiple_of(L).clamp(256, CHUNK)
}

/// The working buffers of one filter.
struct Buffers<T> {
    /// Particles per chunk.
    chunk: usize,
    /// The particles of the current step, `[N][nx]`.
    x: Vec<T>,
    /// The previous step's particles (the source of resampling's copies).
    x_next: Vec<T>,
    lw: Vec<T>,
    /// The weights on one scale (`exp(lw - m)`), formed only for the resamplers other
    /// than systematic and for the particles' output.
    w: Vec<T>,
    /// Running sums of the weights within each chunk (systematic resampling), this
    /// step's and the previous step's.
    local_cdf: Vec<f64>,
    local_prev: Vec<f64>,
    /// Sum of the scaled weights of the chunks before each chunk.
    offsets: Vec<f64>,
    /// Each chunk's scale `exp(m_c - m)`.
    coef: Vec<f64>,
    ancestors: Vec<u32>,
    /// One record a chunk: `m_c`, its sums ([`stride`]), its first particle.
    rec: Vec<f64>,
    /// The totals of the sums.
    tot: Vec<f64>,
    scratch: Scratch,
}

impl<T: Real> Buffers<T> {
    fn new(n: usize, nx: usize) -> Result<Self> {
        let chunk = chunk_len(n);
        let chunks = n.div_ceil(chunk);
        // The buffers of every step are written now (huge pages where large), not left
        // to fault page by page in the first steps; the others (`w`, `ancestors`) only
        // serve some resamplers.
        const WHAT: &str = "the particle buffers";
        Ok(Buffers {
            chunk,
            x: try_filled(WHAT, n * nx, T::zero())?,
            x_next: try_filled(WHAT, n * nx, T::zero())?,
            lw: try_filled(WHAT, n, T::zero())?,
            w: try_zeroed(WHAT, n)?,
            local_cdf: try_filled(WHAT, n, 0.0)?,
            local_prev: try_filled(WHAT, n, 0.0)?,
            offsets: try_filled(WHAT, chunks, 0.0)?,
            coef: try_filled(WHAT, chunks, 0.0)?,
            ancestors: try_filled(WHAT, n, 0)?,
            rec: try_filled(WHAT, chunks * record(nx), 0.0)?,
            tot: vec![0.0; stride(nx)],
            scratch: Scratch::default(),
        })
    }
}

/// Values of a chunk's record: `m_c`, its sums, its first particle.
fn record(nx: usize) -> usize {
    1 + stride(nx) + nx
}

/// Values of one chunk's sums: `S`, `sum w^2`, `sum w (x - c)` (nx), the upper triangle
/// of `sum w (x - c)(x - c)^T`.
fn stride(nx: usize) -> usize {
    2 + nx + nx * (nx + 1) / 2
}

/// The outputs of one filter: mean `[T][nx]`, cov `[T][nx][nx]`, loglik `[T]`, ess `[T]`.
struct Out<'a, T> {
    mean: &'a mut [T],
    cov: &'a mut [T],
    loglik: &'a mut [T],
    ess: &'a mut [T],
    cloud: Option<(&'a mut [T], &'a mut [T])>,
}

/// Runs `f(c, a_c, b_c, p_c, q_c)` over chunk `c` of four buffers (chunk sizes `ca`,
/// `cb`, `cp`, `cq`; the same number of chunks in each), on the crew's threads when
/// there is one.
fn chunks4<A: Send, B: Send, P: Send, Q: Send>(
    crew: Option<&Crew>,
    (a, ca): (&mut [A], usize),
    (b, cb): (&mut [B], usize),
    (p, cp): (&mut [P], usize),
    (q, cq): (&mut [Q], usize),
    f: impl Fn(usize, &mut [A], &mut [B], &mut [P], &mut [Q]) + Sync,
) {
    let Some(crew) = crew else {
        a.chunks_mut(ca)
            .zip(b.chunks_mut(cb))
            .zip(p.chunks_mut(cp))
            .zip(q.chunks_mut(cq))
            .enumerate()
            .for_each(|(c, (((a, b), p), q))| f(c, a, b, p, q));
        return;
    };
    let n = a.len().div_ceil(ca);
    assert!(b.len().div_ceil(cb) == n && p.len().div_ceil(cp) == n && q.len().div_ceil(cq) == n);
    let (a, b, p, q) = (Shared::of(a), Shared::of(b), Shared::of(p), Shared::of(q));
    crew.run(n, &|c| {
        // SAFETY: the crew runs each chunk index once, so the chunks are disjoint.
        let (sa, sb, sp, sq) = unsafe {
            (
                a.chunk(c, ca),
                b.chunk(c, cb),
                p.chunk(c, cp),
                q.chunk(c, cq),
            )
        };
        f(c, sa, sb, sp, sq)
    });
}

/// The first elements of a chunk-sized stack buffer, set to zero: only as many as the
/// chunk has (at N = 10^4, 640 of [`CHUNK`]).
fn init_zero<V: Copy + Default>(b: &mut [MaybeUninit<V>]) -> &mut [V] {
    for v in b.iter_mut() {
        v.write(V::default());
    }
    // SAFETY: every element was just initialised, and MaybeUninit<V> has V's layout.
    unsafe { &mut *(b as *mut [MaybeUninit<V>] as *mut [V]) }
}

/// How the particles of the previous step become this step's, before they move.
#[derive(Clone, Copy)]
enum Entry {
    /// Step 0: drawn from the prior.
    Prior,
    /// Not resampled: they move where they are, keeping their log-weights.
    Kept,
    /// Systematic resampling with this uniform and position scale `W / N`, done chunk
    /// by chunk with the copy of the chosen particles.
    Systematic(f64, f64),
    /// Any other scheme: the ancestors are in the buffers.
    Ancestors,
}

/// `w_i = exp(lw_i - m)` for one chunk.
fn weights_of<T: Real>(lw: &[T], m: f64, w: &mut [T]) {
    if let (Some(lw), Some(w)) = (as_f64(lw), as_f64_mut(w)) {
        exp_f64(lw, m, w);
        return;
    }
    let mt = T::of(m);
    for (wi, &l) in w.iter_mut().zip(lw) {
        *wi = (l - mt).exp();
    }
}

#[inline(always)]
fn exp_lanes(lw: &[f64], m: f64, w: &mut [f64]) {
    for (wi, &l) in w.iter_mut().zip(lw) {
        *wi = exp_nonpositive(l - m);
    }
}

with_avx2! {
    /// [`exp_lanes`], AVX2 where the processor has it.
    fn exp_f64[](lw: &[f64], m: f64, w: &mut [f64]) = exp_lanes[];
}

with_avx2! {
    /// The end of a chunk's work once its particles have moved (`ll`: their
    /// log-likelihoods): the log-weights, the record `r` (`m_c`, the sums of the weights
    /// `exp(lw - m_c)` around the chunk's first particle, that particle) and the running sums
    /// of the weights; AVX2 where the processor has it (the same operations, the same
    /// results).
    fn finish_chunk[T: Real](
        lw: &mut [T],
        ll: &mut [T],
        fresh: bool,
        observed: bool,
        xs: &[T],
        r: &mut [f64],
        cdf: &mut [f64],
    ) = finish_chunk_lanes[T];
}

#[inline(always)]
fn finish_chunk_lanes<T: Real>(
    lw: &mut [T],
    ll: &mut [T],
    fresh: bool,
    observed: bool,
    xs: &[T],
    r: &mut [f64],
    cdf: &mut [f64],
) {
    let nx = xs.len() / lw.len();
    let m = update_log_weights(lw, ll, fresh, observed);
    let (m_c, rest) = r.split_at_mut(1);
    let (p, rf) = rest.split_at_mut(stride(nx));
    m_c[0] = m;
    for (o, v) in rf.iter_mut().zip(&xs[..nx]) {
        *o = v.to_f64();
    }
    if m > f64::NEG_INFINITY && m < f64::INFINITY {
        weights_of(lw, m, ll);
        chunk_sums(ll, xs, rf, p, cdf);
    } else {
        cdf.iter_mut().for_each(|v| *v = 0.0);
        p.iter_mut().for_each(|v| *v = 0.0);
    }
}

/// `lw += ll` (`lw = ll` when `fresh`, the buffers being reused from filter to filter;
/// unchanged when not `observed`), a NaN likelihood (a particle that left the model's
/// domain) counting as zero; returns the largest log-weight (eight running maxima, which
/// vector instructions keep, then their maximum: the same value).
#[inline(always)]
fn update_log_weights<T: Real>(lw: &mut [T], ll: &[T], fresh: bool, observed: bool) -> f64 {
    let ninf = T::of(f64::NEG_INFINITY);
    let mut mm = [f64::NEG_INFINITY; 8];
    let upd = |lwi: &mut T, l: T| {
        let base = if fresh { T::zero() } else { *lwi };
        let v = if !observed {
            base
        } else if l.is_nan_value() {
            ninf
        } else {
            base + l
        };
        *lwi = v;
        v.to_f64()
    };
    let mut a = lw.chunks_exact_mut(8);
    let mut b = ll.chunks_exact(8);
    for (lc, llc) in (&mut a).zip(&mut b) {
        for q in 0..8 {
            // Not `f64::max`: a NaN log-weight (`-inf + inf`) is passed over all the
            // same, and the comparison alone is one vector instruction.
            let v = upd(&mut lc[q], llc[q]);
            mm[q] = if v > mm[q] { v } else { mm[q] };
        }
    }
    for (lwi, &l) in a.into_remainder().iter_mut().zip(b.remainder()) {
        mm[0] = mm[0].max(upd(lwi, l));
    }
    mm.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v))
}

/// One filter over all steps of its measurements `zb` (`[T][ny]`).
fn run_one<T: Real, M: ParticleModel<T> + ?Sized>(
    model: &M,
    zb: &[T],
    b: usize,
    opts: &PfOptions,
    buf: &mut Buffers<T>,
    out: Out<'_, T>,
    crew: Option<&Crew>,
) -> Result<()> {
    let (nx, ny, n) = (model.nx(), model.ny(), opts.particles);
    let steps = out.loglik.len();
    let key = key_of(opts.seed);
    // The filter's random streams: its track's index in the whole batch.
    let stream = opts.track_offset.wrapping_add(b as u32);
    let (st, rs, ch) = (stride(nx), record(nx), buf.chunk);
    let nf = n as f64;
    let mut log_prev = nf.ln();
    let always = opts.ess_threshold >= 1.0;
    // Where the passes after the combined records run (the weights' scaling, the other
    // resamplers).
    let par = crew.map_or(Par::Serial, Par::Crew);
    let mut entry = Entry::Prior;
    for k in 0..steps {
        crate::cancel::check()?;
        let z = &zb[k * ny..(k + 1) * ny];
        let observed = !z.iter().any(|v| v.is_nan_value());
        // 1. Each chunk: bring in the particles (resampled ones are copied from their
        // ancestors), move and weight them (the step's log-likelihoods pass through `w`),
        // then its largest log-weight, its weights and sums and their running sums.
        let resampled = matches!(entry, Entry::Systematic(..) | Entry::Ancestors);
        if resampled {
            std::mem::swap(&mut buf.x, &mut buf.x_next);
            std::mem::swap(&mut buf.local_cdf, &mut buf.local_prev);
        }
        {
            let (src, anc) = (&buf.x_next, &buf.ancestors);
            let cdf = ChunkedCdf {
                local: &buf.local_prev,
                offsets: &buf.offsets,
                scale: &buf.coef,
                chunk: ch,
            };
            chunks4(
                crew,
                (&mut buf.x, ch * nx),
                (&mut buf.lw, ch),
                (&mut buf.local_cdf, ch),
                (&mut buf.rec, rs),
                |c, xs, lw, cdf_out, r| {
                    let s0 = c * ch;
                    // The chunk's log-likelihoods, then its weights: in cache only.
                    let mut wbuf = [const { MaybeUninit::<T>::uninit() }; CHUNK];
                    let ll = init_zero(&mut wbuf[..lw.len()]);
                    // Resampled particles are read from their ancestors where they are
                    // (no copy first).
                    let zl = observed.then_some((z, &mut *ll));
                    let at = Batch {
                        k,
                        key,
                        b: stream,
                        first: s0 as u32,
                    };
                    match entry {
                        Entry::Systematic(u, scale) => {
                            let mut ab = [const { MaybeUninit::<u32>::uninit() }; CHUNK];
                            let a = init_zero(&mut ab[..lw.len()]);
                            systematic_ancestors(cdf, u, scale, s0, a);
                            model.advance_batch_from(at, src, a, xs, zl);
                        }
                        Entry::Ancestors => {
                            let a = &anc[s0..s0 + lw.len()];
                            model.advance_batch_from(at, src, a, xs, zl);
                        }
                        Entry::Prior | Entry::Kept => model.advance_batch(at, xs, zl),
                    }
                    finish_chunk(lw, ll, k == 0 || resampled, observed, xs, r, cdf_out);
                },
            );
        }
        // 2. The chunks' records combined: the largest log-weight, each chunk's scale,
        // the totals around chunk 0's first particle, the chunks' offsets in the
        // cumulative sum of the weights.
        let m = buf
            .rec
            .chunks_exact(rs)
            .fold(f64::NEG_INFINITY, |a, q| a.max(q[0]));
        if !(m > f64::NEG_INFINITY) || m == f64::INFINITY {
            return Err(Error::input(format!(
                "track {b}, step {k}: every particle has likelihood zero (or not a number): the measurement {:?} is impossible under the model",
                z.iter().map(|v| v.to_f64()).collect::<Vec<_>>()
            )));
        }
        let tot = &mut buf.tot;
        tot.iter_mut().for_each(|v| *v = 0.0);
        let r0 = &buf.rec[1 + st..rs];
        let mut off = 0.0f64;
        for ((q, cj), o) in buf
            .rec
            .chunks_exact(rs)
            .zip(buf.coef.iter_mut())
            .zip(buf.offsets.iter_mut())
        {
            let c = if q[0] > f64::NEG_INFINITY {
                (q[0] - m).exp()
            } else {
                0.0
            };
            *cj = c;
            let s0 = q[1];
            *o = off;
            off += c * s0;
            tot[0] += c * s0;
            tot[1] += c * c * q[2];
            // The chunk's sums moved from its first particle to chunk 0's.
            let e = |a: usize| q[1 + st + a] - r0[a];
            let m1 = |a: usize| q[3 + a];
            for a in 0..nx {
                tot[2 + a] += c * (m1(a) + s0 * e(a));
            }
            let mut t = 2 + nx;
            for a in 0..nx {
                for d in a..nx {
                    tot[t] += c * (q[1 + t] + e(a) * m1(d) + m1(a) * e(d) + s0 * e(a) * e(d));
                    t += 1;
                }
            }
        }
        let (s, s2) = (tot[0], tot[1]);
        let log_now = m + s.ln();
        out.loglik[k] = T::of(if observed { log_now - log_prev } else { 0.0 });
        log_prev = log_now;
        let ess = s * s / s2;
        out.ess[k] = T::of(ess);
        let mean = &mut out.mean[k * nx..(k + 1) * nx];
        let dm = |a: usize| tot[2 + a] / s;
        for a in 0..nx {
            mean[a] = T::of(r0[a] + dm(a));
        }
        let cov = &mut out.cov[k * nx * nx..(k + 1) * nx * nx];
        let mut t = 2 + nx;
        for a in 0..nx {
            for bb in a..nx {
                let v = T::of(tot[t] / s - dm(a) * dm(bb));
                cov[a * nx + bb] = v;
                cov[bb * nx + a] = v;
                t += 1;
            }
        }
        let last = k + 1 == steps;
        let resample_now = !last && (always || ess < opts.ess_threshold * nf);
        if (resample_now && opts.resampler != Resampler::Systematic)
            || (last && out.cloud.is_some())
        {
            // The weights on one scale (the filter's largest weight is 1): each chunk's
            // weights as the pass formed them, times its scale.
            let (coef, rec, lw) = (&buf.coef, &buf.rec, &buf.lw);
            let scale_chunk = |c: usize, w: &mut [T]| {
                let lw = &lw[c * ch..c * ch + w.len()];
                if coef[c] > 0.0 {
                    weights_of(lw, rec[c * rs], w);
                    let f = T::of(coef[c]);
                    w.iter_mut().for_each(|v| *v *= f);
                } else {
                    w.iter_mut().for_each(|v| *v = T::zero());
                }
            };
            for_pieces(par, &mut buf.w, ch, scale_chunk);
        }
        // 3. Resample: the systematic scheme is done by the next step's pass.
        entry = Entry::Kept;
        if resample_now {
            let draws = Draws {
                key,
                filter: stream,
                step: k as u32,
            };
            if opts.resampler == Resampler::Systematic {
                entry = Entry::Systematic(systematic_uniform(draws), off / nf);
            } else {
                resample_on(
                    opts.resampler,
                    &buf.w,
                    draws,
                    &mut buf.ancestors,
                    &mut buf.scratch,
                    par,
                )?;
                entry = Entry::Ancestors;
            }
            log_prev = nf.ln();
        }
        if last {
            if let Some((xs, ws)) = out.cloud {
                xs.copy_from_slice(&buf.x);
                let inv = T::of(1.0 / s);
                for (o, &w) in ws.iter_mut().zip(&buf.w) {
                    *o = w * inv;
                }
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The bootstrap filter over every track of `z` on the CPU (see the module docs).
pub fn particle_filter_cpu<T: Real, M: ParticleModel<T> + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    opts: &PfOptions,
) -> Result<PfOutput<T>> {
    let (nx, n) = (model.nx(), opts.particles);
    super::check(nx, model.ny(), z, opts)?;
    let threads = rayon::current_num_threads();
    // Many filters: one per task; few filters with many particles: chunks on all cores.
    let side_by_side = z.tracks >= 2 * threads || n < 4 * chunk_len(n);
    let in_flight = if side_by_side {
        threads.min(z.tracks)
    } else {
        1
    };
    super::check_memory::<T>(z.tracks, z.steps, nx, n, in_flight)?;
    let mut est = Estimates::<T>::try_nan(z.tracks, z.steps, nx, true)?;
    let mut ess = try_filled("the ESS output", z.tracks * z.steps, T::nan())?;
    let steps = z.steps;
    let mut cloud = match opts.keep_particles {
        true => Some((
            try_filled("the particle output", z.tracks * n * nx, T::nan())?,
            try_filled("the particle output", z.tracks * n, T::nan())?,
        )),
        false => None,
    };
    {
        let loglik = est
            .loglik
            .as_mut()
            .expect("allocated with a log-likelihood");
        let mut clouds: Vec<Option<(&mut [T], &mut [T])>> = match &mut cloud {
            Some((xs, ws)) => xs
                .chunks_mut(n * nx)
                .zip(ws.chunks_mut(n))
                .map(|(x, w)| Some((x, w)))
                .collect(),
            None => (0..z.tracks).map(|_| None).collect(),
        };
        let per = est
            .mean
            .chunks_mut(steps * nx)
            .zip(est.cov.chunks_mut(steps * nx * nx))
            .zip(loglik.chunks_mut(steps))
            .zip(ess.chunks_mut(steps))
            .zip(clouds.iter_mut())
            .enumerate()
            .map(|(b, ((((mean, cov), loglik), ess), cloud))| {
                (
                    b,
                    Out {
                        mean,
                        cov,
                        loglik,
                        ess,
                        cloud: cloud.take(),
                    },
                )
            });
        if side_by_side {
            per.collect::<Vec<_>>().into_par_iter().try_for_each_init(
                || Buffers::<T>::new(n, nx),
                |buf, (b, out)| match buf {
                    Ok(buf) => run_one(model, z.track(b), b, opts, buf, out, None),
                    Err(e) => Err(Error::input(e.to_string())),
                },
            )?;
        } else {
            // A crew of threads that stay awake from step to step (see `crew`).
            Crew::with(threads, |crew| -> Result<()> {
                let crew = (crew.threads() > 1).then_some(crew);
                let mut buf = Buffers::<T>::new(n, nx)?;
                for (b, out) in per {
                    run_one(model, z.track(b), b, opts, &mut buf, out, crew)?;
                }
                Ok(())
            })?;
        }
    }
    Ok(PfOutput {
        estimates: est,
        ess,
        particles: cloud,
    })
}

#[cfg(test)]
mod tests;
