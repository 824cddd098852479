//! One sequence's time steps cut into blocks that run in different processes or hosts
//! (the Python package's `kestrel.dask`), the CPU counterpart of `parallel::cuda::split`.
//!
//! The parallel filter (Algorithm 5 of Sarkka & Garcia-Fernandez) in three passes:
//! 1. each block reduces its filtering elements `(A, b, C, eta, J)` (eqs. 43-45) to one
//!    total per track, `a_{k0} x ... x a_{k1-1}` with the operator of Lemma 3
//!    ([`filter_block_total`]);
//! 2. the totals of the blocks are scanned ([`filter_carries`]): block `j`'s incoming
//!    carry is the combination of every element before it, `total_0 x ... x total_{j-1}`;
//!    since step 0's element has `A = 0`, the carry is `(0, x_{k0-1|k0-1}, P_{k0-1|k0-1},
//!    0, 0)`, the filtered moments of the step before the block;
//! 3. each block rebuilds its elements, puts its carry in front and scans them
//!    ([`filter_block`]): the prefixes are the filtered moments (eq. 47), the same as the
//!    single-process run up to the order of the combines (rounding).
//!
//! The parallel RTS smoother (Algorithm 6) does the same from the right over the smoothing
//! elements `(E, g, L)` of Lemma 4 (eqs. 49-52), built from each block's filtered moments:
//! [`smooth_block_total`], [`smooth_carries`] (block `j`'s carry is
//! `total_{j+1} x ... x total_{last}`), [`smooth_block`].
//!
//! A finish keeps the elements of one piece of its block at a time when its tracks share
//! the thread pool one per task (the piece's last prefix is carried into the next piece),
//! so its memory is its outputs and a few thousand elements a track.
//!
//! What crosses between blocks is one element per track and block boundary, each way:
//! [`filter_elem_len`] and [`smooth_elem_len`] scalars. Every function is pure (no state,
//! no randomness): a lost block can be recomputed with the same result.

use super::filtering::{self, BuildScratch, FilterOp};
use super::smoothing::{self, SmoothBuild, SmoothOp};
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::kalman::step::{entries, predict, row_major, update, StepMats};
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::scan::{scan, AssocOp, Direction, Exec, ScanAlgorithm};
use rayon::prelude::*;

/// Where a block sits in the whole batch: the global index of its first track (only for
/// error messages) and of its first step (which element each step gets, and which
/// matrices of a time-varying model it reads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockAt {
    /// Global index of the block's first track.
    pub track: usize,
    /// Global index of the block's first step.
    pub step: usize,
}

/// Scalars of one filtering element `(A, b, C, eta, J)` for states of size `nx`:
/// `3 nx² + 2 nx`.
pub fn filter_elem_len(nx: usize) -> usize {
    3 * nx * nx + 2 * nx
}

/// Scalars of one smoothing element `(E, g, L)` for states of size `nx`: `2 nx² + nx`.
pub fn smooth_elem_len(nx: usize) -> usize {
    2 * nx * nx + nx
}

/// The matrices of the global steps `[lo, hi)` of a model (one set when it is
/// time-invariant), and its prior.
struct Window<T> {
    lo: usize,
    steps: Vec<StepMats<T>>,
    invariant: bool,
    x0: Vec<T>,
    p0: Vec<T>,
}

impl<T: Real> Window<T> {
    fn new<M: StateSpace + ?Sized>(model: &M, lo: usize, hi: usize) -> Self {
        let invariant = model.as_invariant().is_some();
        let range = if invariant { 0..1 } else { lo..hi };
        let steps = range.map(|k| StepMats::of(model, k)).collect();
        let p = model.prior();
        Window {
            lo,
            steps,
            invariant,
            x0: entries(&p.x0),
            p0: row_major(&p.p0),
        }
    }

    fn at(&self, k: usize) -> &StepMats<T> {
        if self.invariant {
            &self.steps[0]
        } else {
            &self.steps[k - self.lo]
        }
    }
}

fn input(msg: String) -> Error {
    Error::Input { msg }
}

/// Checks that the model covers the global steps `[0, end)` of a block.
pub(crate) fn covers<M: StateSpace + ?Sized>(model: &M, end: usize) -> Result<()> {
    match model.steps_covered() {
        Some(n) if n < end => Err(input(format!(
            "the time-varying model has matrices for {n} steps, the block needs {end}"
        ))),
        _ => Ok(()),
    }
}

pub(crate) fn check_z<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
) -> Result<()> {
    crate::model::check_fits(model, z.ny, z.steps)?;
    crate::data::require_data("z", z.tracks, z.steps)?;
    z.check_finite()
}

pub(crate) fn check_carry<T>(
    carry: Option<&[T]>,
    want: bool,
    tracks: usize,
    len: usize,
    what: &str,
) -> Result<()> {
    match (carry, want) {
        (None, false) => Ok(()),
        (Some(c), true) if c.len() == tracks * len => Ok(()),
        (Some(c), true) => Err(input(format!(
            "the {what} carry has {} values, expected {tracks} tracks x {len}",
            c.len()
        ))),
        (None, true) => Err(input(format!("this block needs the {what} carry"))),
        (Some(_), false) => Err(input(format!("this block takes no {what} carry"))),
    }
}

fn measurement<T: Real>(z: &[T], ny: usize, k: usize) -> Option<&[T]> {
    let zk = &z[k * ny..(k + 1) * ny];
    (!zk.iter().any(|v| v.is_nan_value())).then_some(zk)
}

fn not_pd(track: usize, step: usize, what: &'static str) -> Error {
    Error::NotPositiveDefinite { track, step, what }
}

/// How the tracks of a block share the pool: one track per task when there are enough
/// tracks, else one track at a time with its steps on the pool.
fn exec_for(tracks: usize) -> Exec {
    if tracks >= rayon::current_num_threads() && tracks > 1 {
        Exec::Serial
    } else {
        Exec::Rayon
    }
}

/// Runs `f(track, exec, out_track)` for every track's piece of `out` (`per` scalars).
fn per_track<T: Real, F>(out: &mut [T], per: usize, f: F) -> Result<()>
where
    F: Fn(usize, Exec, &mut [T]) -> Result<()> + Sync + Send,
{
    let tracks = out.len() / per.max(1);
    let exec = exec_for(tracks);
    if exec == Exec::Serial {
        out.par_chunks_mut(per)
            .enumerate()
            .try_for_each(|(b, o)| f(b, exec, o))
    } else {
        out.chunks_mut(per)
            .enumerate()
            .try_for_each(|(b, o)| f(b, exec, o))
    }
}

/// What the filtering element of a track's local step needs.
struct FilterBuild<'a, T> {
    w: &'a Window<T>,
    nx: usize,
    ny: usize,
    k0: usize,
    track: usize,
}

/// Scratch of one element build (the step-0 update included).
struct Scratch<T> {
    bs: BuildScratch<T>,
    x: Vec<T>,
    p: Vec<T>,
    tmp: Vec<T>,
    y: Vec<T>,
    s: Vec<T>,
    wt: Vec<T>,
}

impl<T: Real> Scratch<T> {
    fn new(nx: usize, ny: usize) -> Self {
        Scratch {
            bs: BuildScratch::new(nx, ny),
            x: vec![T::zero(); nx],
            p: vec![T::zero(); nx * nx],
            tmp: vec![T::zero(); nx * nx],
            y: vec![T::zero(); ny],
            s: vec![T::zero(); ny * ny],
            wt: vec![T::zero(); ny * nx],
        }
    }
}

impl<T: Real> FilterBuild<'_, T> {
    /// The element of local step `i` of the track's measurements `z`.
    fn element(&self, z: &[T], i: usize, out: &mut [T], ws: &mut Scratch<T>) -> Result<()> {
        let (nx, ny) = (self.nx, self.ny);
        let lay = filtering::FilterLayout { n: nx };
        let k = self.k0 + i;
        let zk = measurement(z, ny, i);
        if k == 0 {
            ws.x.copy_from_slice(&self.w.x0);
            ws.p.copy_from_slice(&self.w.p0);
            if let Some(zk) = zk {
                update(
                    nx,
                    ny,
                    self.w.at(0),
                    zk,
                    &mut ws.x,
                    &mut ws.p,
                    &mut ws.y,
                    &mut ws.s,
                    &mut ws.wt,
                )
                .ok_or_else(|| not_pd(self.track, 0, "innovation covariance S"))?;
            }
            filtering::element_0(lay, &ws.x, &ws.p, out);
            Ok(())
        } else if filtering::element_k(lay, ny, self.w.at(k), zk, out, &mut ws.bs) {
            Ok(())
        } else {
            Err(not_pd(
                self.track,
                k,
                "innovation covariance S of the filtering element",
            ))
        }
    }
}

/// Folds `count` elements made by `make(i, out, scratch)` (local index `i`) with `op`, in
/// order, into `acc` (`identity` first): serially, or in pieces on the pool whose totals
/// are folded in order.
fn fold<T, O, W, I, F>(
    op: &O,
    count: usize,
    exec: Exec,
    init: I,
    make: F,
    acc: &mut [T],
) -> Result<()>
where
    T: Real,
    O: AssocOp<Scalar = T> + Sync,
    I: Fn() -> W + Sync + Send,
    F: Fn(usize, &mut [T], &mut W) -> Result<()> + Sync + Send,
{
    let len = op.elem_len();
    let run = |range: std::ops::Range<usize>, acc: &mut [T]| -> Result<()> {
        let mut w = init();
        let mut s = op.scratch();
        let mut el = vec![T::zero(); len];
        let mut tmp = vec![T::zero(); len];
        op.identity(acc);
        for i in range {
            make(i, &mut el, &mut w)?;
            op.combine(acc, &el, &mut tmp, &mut s);
            acc.copy_from_slice(&tmp);
        }
        Ok(())
    };
    let pieces = match exec {
        Exec::Serial => 1,
        Exec::Rayon => (count / 1024).clamp(1, 4 * rayon::current_num_threads()),
    };
    if pieces == 1 {
        return run(0..count, acc);
    }
    let mut totals = vec![T::zero(); pieces * len];
    totals
        .par_chunks_mut(len)
        .enumerate()
        .try_for_each(|(p, t)| run(count * p / pieces..count * (p + 1) / pieces, t))?;
    let mut s = op.scratch();
    let mut tmp = vec![T::zero(); len];
    op.identity(acc);
    for t in totals.chunks(len) {
        op.combine(acc, t, &mut tmp, &mut s);
        acc.copy_from_slice(&tmp);
    }
    Ok(())
}

/// Pass 1 of the split filter: every track's total `a_{k0} x ... x a_{k0+n-1}` of the
/// filtering elements of the block's `n` steps (eqs. 43-45; step 0 from the prior updated
/// by its measurement), `[tracks][filter_elem_len(nx)]`. `z` holds the block's steps of
/// every track; `at.step` is the global index of its first step.
pub fn filter_block_total<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    at: BlockAt,
) -> Result<Vec<T>> {
    check_z(model, z)?;
    covers(model, at.step + z.steps)?;
    let (nx, ny, n) = (model.nx(), model.ny(), z.steps);
    let w = Window::<T>::new(model, at.step, at.step + n);
    let op = FilterOp::<T>::new(nx);
    let fe = op.elem_len();
    let mut out = vec![T::zero(); z.tracks * fe];
    per_track(&mut out, fe, |b, exec, acc| {
        let fb = FilterBuild {
            w: &w,
            nx,
            ny,
            k0: at.step,
            track: at.track + b,
        };
        let zt = z.track(b);
        fold(
            &op,
            n,
            exec,
            || Scratch::new(nx, ny),
            |i, el, ws| fb.element(zt, i, el, ws),
            acc,
        )
    })?;
    Ok(out)
}

/// [`filter_block_total`] on `device`: the CPU, or a GPU
/// (`parallel::cuda::filter_block_total`, the same totals to rounding; `cuda:all` runs on
/// the first GPU).
pub fn filter_block_total_on<T: Real, M: StateSpace + ?Sized>(
    device: crate::Device,
    model: &M,
    z: &Measurements<T>,
    at: BlockAt,
) -> Result<Vec<T>> {
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the split parallel filter's block")?;
    #[cfg(feature = "cuda")]
    if let crate::Device::Cuda(i) = device.first() {
        return super::cuda::filter_block_total(i, model, z, at);
    }
    filter_block_total(model, z, at)
}

/// [`filter_block`] on `device`: the CPU, or a GPU (`parallel::cuda::filter_block`, the
/// same moments to rounding; `cuda:all` runs on the first GPU).
pub fn filter_block_on<T: Real, M: StateSpace + ?Sized>(
    device: crate::Device,
    model: &M,
    z: &Measurements<T>,
    at: BlockAt,
    carry: Option<&[T]>,
    alg: ScanAlgorithm,
) -> Result<Estimates<T>> {
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the split parallel filter's block")?;
    #[cfg(feature = "cuda")]
    if let crate::Device::Cuda(i) = device.first() {
        return super::cuda::filter_block(i, model, z, at, carry, alg);
    }
    filter_block(model, z, at, carry, alg)
}

/// Pass 2 of the split filter: the incoming carry of every block from the totals of
/// [`filter_block_total`] in time order (`totals[j]`: `[tracks][filter_elem_len(nx)]`):
/// `None` for block 0, `total_0 x ... x total_{j-1}` for block `j` (Lemma 3).
pub fn filter_carries<T: Real>(nx: usize, totals: &[&[T]]) -> Result<Vec<Option<Vec<T>>>> {
    carries(&FilterOp::<T>::new(nx), totals, false)
}

/// Pass 2 of the split RTS smoother: the incoming carry of every block from the totals of
/// [`smooth_block_total`] in time order: `total_{j+1} x ... x total_{last}` for block `j`
/// (Lemma 4), `None` for the last block.
pub fn smooth_carries<T: Real>(nx: usize, totals: &[&[T]]) -> Result<Vec<Option<Vec<T>>>> {
    carries(&SmoothOp::<T>::new(nx, false), totals, true)
}

fn carries<T: Real, O: AssocOp<Scalar = T>>(
    op: &O,
    totals: &[&[T]],
    from_right: bool,
) -> Result<Vec<Option<Vec<T>>>> {
    let len = op.elem_len();
    let Some(first) = totals.first() else {
        return Ok(Vec::new());
    };
    if first.len() % len != 0 || totals.iter().any(|t| t.len() != first.len()) {
        return Err(input(format!(
            "block totals of {} values do not all hold whole elements of {len} values for the same tracks",
            totals.iter().map(|t| t.len().to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    let tracks = first.len() / len;
    let g = totals.len();
    let mut out: Vec<Option<Vec<T>>> = vec![None; g];
    let mut s = op.scratch();
    let mut acc: Option<Vec<T>> = None;
    let order: Vec<usize> = if from_right {
        (0..g).rev().collect()
    } else {
        (0..g).collect()
    };
    for j in order {
        out[j] = acc.clone();
        let t = totals[j];
        acc = Some(match acc {
            None => t.to_vec(),
            Some(a) => {
                let mut next = vec![T::zero(); tracks * len];
                for b in 0..tracks {
                    let (ab, tb) = (&a[b * len..(b + 1) * len], &t[b * len..(b + 1) * len]);
                    let o = &mut next[b * len..(b + 1) * len];
                    if from_right {
                        op.combine(tb, ab, o, &mut s);
                    } else {
                        op.combine(ab, tb, o, &mut s);
                    }
                }
                next
            }
        });
    }
    Ok(out)
}

/// Pass 3 of the split filter: the filtered means, covariances and per-step
/// log-likelihoods of the block's steps, from its measurements and its incoming carry
/// (from [`filter_carries`]; `None` exactly when the block starts at step 0). The carry
/// is put in front of the block's elements and they are scanned with `alg`; the
/// prefixes are `x_{k|k}`, `P_{k|k}` (eq. 47). The log-likelihood of step `k` is
/// `log N(z_k; H x_{k|k-1} + d, S_k)`, predicted from the filtered moments of step `k-1`
/// (the carry's for the block's first step).
pub fn filter_block<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    at: BlockAt,
    carry: Option<&[T]>,
    alg: ScanAlgorithm,
) -> Result<Estimates<T>> {
    check_z(model, z)?;
    covers(model, at.step + z.steps)?;
    let (nx, ny, n) = (model.nx(), model.ny(), z.steps);
    let op = FilterOp::<T>::new(nx);
    let lay = op.lay;
    let fe = op.elem_len();
    check_carry(carry, at.step > 0, z.tracks, fe, "filter")?;
    let w = Window::<T>::new(model, at.step, at.step + n);
    let mut est = Estimates::zeroed(z.tracks, n, nx, true);
    let exec = exec_for(z.tracks);
    let piece = piece_len(exec, n);
    let ll = est.loglik.as_mut().expect("allocated with log-likelihoods");
    let outs: Vec<_> = est
        .mean
        .chunks_mut(n * nx)
        .zip(est.cov.chunks_mut(n * nx * nx))
        .zip(ll.chunks_mut(n))
        .enumerate()
        .collect();
    let work = |(b, ((mean, cov), ll)): FilterOuts<'_, T>| -> Result<()> {
        let fb = FilterBuild {
            w: &w,
            nx,
            ny,
            k0: at.step,
            track: at.track + b,
        };
        let zt = z.track(b);
        // The elements of one piece of the block behind the prefix of every step before
        // it (the carry, then the last prefix of the piece before): memory for a piece,
        // not for the whole block.
        let mut el = vec![T::zero(); (piece + 1) * fe];
        let mut prev: Option<Vec<T>> = carry.map(|c| c[b * fe..(b + 1) * fe].to_vec());
        for p0 in (0..n).step_by(piece) {
            let len = piece.min(n - p0);
            let off = usize::from(prev.is_some());
            let el = &mut el[..(len + off) * fe];
            if let Some(c) = &prev {
                el[..fe].copy_from_slice(c);
            }
            super::track::each(
                exec,
                &mut el[off * fe..],
                fe,
                || Scratch::new(nx, ny),
                |ws, i, out| fb.element(zt, p0 + i, out, ws),
            )?;
            scan(&op, el, alg, Direction::Forward, exec);
            for i in 0..len {
                let e = &el[(i + off) * fe..(i + off + 1) * fe];
                let (bb, c) = (&e[lay.b()], &e[lay.c()]);
                if !bb.iter().chain(c).all(|v| v.is_finite_value()) {
                    return Err(not_pd(
                        at.track + b,
                        at.step + p0 + i,
                        "filtered covariance (a combine of the parallel filter was singular)",
                    ));
                }
                let g = p0 + i;
                mean[g * nx..(g + 1) * nx].copy_from_slice(bb);
                cov[g * nx * nx..(g + 1) * nx * nx].copy_from_slice(c);
            }
            let elr = &*el;
            super::track::each(
                exec,
                &mut ll[p0..p0 + len],
                1,
                || Scratch::new(nx, ny),
                |ws, i, out| {
                    let Some(zk) = measurement(zt, ny, p0 + i) else {
                        out[0] = T::zero();
                        return Ok(());
                    };
                    let k = at.step + p0 + i;
                    if k == 0 {
                        ws.x.copy_from_slice(&w.x0);
                        ws.p.copy_from_slice(&w.p0);
                    } else {
                        // The filtered moments of step k-1: the scanned element before
                        // this step's (the carried prefix for the piece's first step).
                        let e = &elr[(i + off - 1) * fe..(i + off) * fe];
                        ws.x.copy_from_slice(&e[lay.b()]);
                        ws.p.copy_from_slice(&e[lay.c()]);
                        predict(nx, w.at(k), &mut ws.x, &mut ws.p, &mut ws.tmp);
                    }
                    out[0] = update(
                        nx,
                        ny,
                        w.at(k),
                        zk,
                        &mut ws.x,
                        &mut ws.p,
                        &mut ws.y,
                        &mut ws.s,
                        &mut ws.wt,
                    )
                    .ok_or_else(|| not_pd(at.track + b, k, "innovation covariance S"))?;
                    Ok(())
                },
            )?;
            prev = Some(el[(len + off - 1) * fe..(len + off) * fe].to_vec());
        }
        Ok(())
    };
    if exec == Exec::Serial {
        outs.into_par_iter().try_for_each(work)?;
    } else {
        outs.into_iter().try_for_each(work)?;
    }
    Ok(est)
}

/// One track's filter outputs: its index, means, covariances and log-likelihoods.
type FilterOuts<'a, T> = (usize, ((&'a mut [T], &'a mut [T]), &'a mut [T]));

/// Steps a track's finish scans at once: pieces of 4096 when the tracks share the pool
/// one per task (a serial scan gains nothing from a longer buffer, and a short one stays
/// in cache), the whole block when one track has the pool to itself.
fn piece_len(exec: Exec, n: usize) -> usize {
    // Short pieces in the unit tests, so that their blocks cross several.
    const PIECE: usize = if cfg!(test) { 5 } else { 4096 };
    match exec {
        Exec::Serial => n.clamp(1, PIECE),
        Exec::Rayon => n.max(1),
    }
}

fn check_filtered<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    f: &Estimates<T>,
    at: BlockAt,
    last: bool,
) -> Result<()> {
    if f.nx != model.nx() || f.steps == 0 || f.tracks == 0 {
        return Err(input(format!(
            "filtered estimates ({} tracks, {} steps, nx = {}) do not fit the model (nx = {})",
            f.tracks,
            f.steps,
            f.nx,
            model.nx()
        )));
    }
    covers(model, at.step + f.steps + usize::from(!last))
}

/// The smoothing element of local step `i` of one track's filtered moments.
#[allow(clippy::too_many_arguments)]
fn smooth_element<T: Real>(
    op: &SmoothOp<T>,
    w: &Window<T>,
    mean: &[T],
    cov: &[T],
    i: usize,
    n: usize,
    last: bool,
    at: BlockAt,
    track: usize,
    out: &mut [T],
    ws: &mut SmoothBuild<T>,
) -> Result<()> {
    let nx = op.n;
    let (x, p) = (
        &mean[i * nx..(i + 1) * nx],
        &cov[i * nx * nx..(i + 1) * nx * nx],
    );
    if last && i + 1 == n {
        smoothing::element_last(op, x, p, out);
        Ok(())
    } else if smoothing::element_k(op, w.at(at.step + i + 1), x, p, out, ws) {
        Ok(())
    } else {
        Err(not_pd(
            track,
            at.step + i + 1,
            "predicted covariance P(k+1|k) in the smoother",
        ))
    }
}

/// Pass 1 of the split RTS smoother: every track's total `a_{k0} x ... x a_{k0+n-1}` of
/// the smoothing elements (eqs. 49-50) of the block's filtered moments `filtered` (its
/// `n` steps of every track, from [`filter_block`]), `[tracks][smooth_elem_len(nx)]`.
/// `last`: the block ends the sequence (its last step takes `(0, x_{T|T}, P_{T|T})`);
/// otherwise the element of its last step reads the transition into the next block.
pub fn smooth_block_total<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    filtered: &Estimates<T>,
    at: BlockAt,
    last: bool,
) -> Result<Vec<T>> {
    check_filtered(model, filtered, at, last)?;
    let (nx, n) = (model.nx(), filtered.steps);
    let w = Window::<T>::new(model, at.step, at.step + n + usize::from(!last));
    let op = SmoothOp::<T>::new(nx, false);
    let se = op.elem_len();
    let mut out = vec![T::zero(); filtered.tracks * se];
    per_track(&mut out, se, |b, exec, acc| {
        let mean = &filtered.mean[b * n * nx..(b + 1) * n * nx];
        let cov = &filtered.cov[b * n * nx * nx..(b + 1) * n * nx * nx];
        fold(
            &op,
            n,
            exec,
            || SmoothBuild::new(nx),
            |i, el, ws| smooth_element(&op, &w, mean, cov, i, n, last, at, at.track + b, el, ws),
            acc,
        )
    })?;
    Ok(out)
}

/// Pass 3 of the split RTS smoother: the smoothed means and covariances `x_{k|T}`,
/// `P_{k|T}` of the block's steps (no log-likelihoods), from its filtered moments and its
/// incoming carry (from [`smooth_carries`]; `None` exactly when `last`): the carry is put
/// behind the block's smoothing elements and they are scanned in reverse with `alg`.
pub fn smooth_block<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    filtered: &Estimates<T>,
    at: BlockAt,
    last: bool,
    carry: Option<&[T]>,
    alg: ScanAlgorithm,
) -> Result<Estimates<T>> {
    check_filtered(model, filtered, at, last)?;
    let (nx, n) = (model.nx(), filtered.steps);
    let op = SmoothOp::<T>::new(nx, false);
    let se = op.elem_len();
    check_carry(carry, !last, filtered.tracks, se, "smoother")?;
    let w = Window::<T>::new(model, at.step, at.step + n + usize::from(!last));
    let mut est = Estimates::zeroed(filtered.tracks, n, nx, false);
    let exec = exec_for(filtered.tracks);
    let piece = piece_len(exec, n);
    let n2 = nx * nx;
    let outs: Vec<_> = est
        .mean
        .chunks_mut(n * nx)
        .zip(est.cov.chunks_mut(n * n2))
        .enumerate()
        .collect();
    let work = |(b, (sm, sc)): (usize, (&mut [T], &mut [T]))| -> Result<()> {
        let mean = &filtered.mean[b * n * nx..(b + 1) * n * nx];
        let cov = &filtered.cov[b * n * n2..(b + 1) * n * n2];
        // Pieces from the right, each scanned in reverse ahead of the suffix of every
        // step after it (the carry, then the first suffix of the piece after).
        let mut el = vec![T::zero(); (piece + 1) * se];
        let mut next: Option<Vec<T>> = carry.map(|c| c[b * se..(b + 1) * se].to_vec());
        let mut end = n;
        while end > 0 {
            let p0 = end.saturating_sub(piece);
            let len = end - p0;
            let extra = usize::from(next.is_some());
            let el = &mut el[..(len + extra) * se];
            if let Some(c) = &next {
                el[len * se..].copy_from_slice(c);
            }
            let opr = &op;
            super::track::each(
                exec,
                &mut el[..len * se],
                se,
                || SmoothBuild::new(nx),
                |ws, i, out| {
                    smooth_element(
                        opr,
                        &w,
                        mean,
                        cov,
                        p0 + i,
                        n,
                        last,
                        at,
                        at.track + b,
                        out,
                        ws,
                    )
                },
            )?;
            scan(&op, el, alg, Direction::Reverse, exec);
            for (i, e) in el.chunks(se).take(len).enumerate() {
                let g = p0 + i;
                sm[g * nx..(g + 1) * nx].copy_from_slice(&e[n2..n2 + nx]);
                sc[g * n2..(g + 1) * n2].copy_from_slice(&e[n2 + nx..]);
            }
            next = Some(el[..se].to_vec());
            end = p0;
        }
        Ok(())
    };
    if exec == Exec::Serial {
        outs.into_par_iter().try_for_each(work)?;
    } else {
        outs.into_iter().try_for_each(work)?;
    }
    Ok(est)
}

#[cfg(test)]
mod tests;
