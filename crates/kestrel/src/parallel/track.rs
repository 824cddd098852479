//! One track's parallel filter, RTS smoother and two-filter smoother: build the elements
//! (a parallel map over steps), scan them, extract the moments (another parallel map).

use super::filtering::{self, BuildScratch, FilterOp};
use super::small::{lu_in_place, lu_solve, mul, symmetrize};
use super::smoothing::{self, SmoothBuild, SmoothOp};
use crate::error::{Error, Result};
use crate::kalman::dense::ConvertedModel;
use crate::kalman::step::{predict, update};
use crate::linalg::Real;
use crate::scan::{scan, AssocOp, Direction, Exec, ScanAlgorithm};
use rayon::prelude::*;

/// Runs `f(scratch, k, chunk_k)` over the `chunk`-sized pieces of `data`, in parallel
/// under [`Exec::Rayon`]; stops at the first error.
pub(crate) fn each<S, W, I, F>(
    exec: Exec,
    data: &mut [S],
    chunk: usize,
    init: I,
    f: F,
) -> Result<()>
where
    S: Send,
    I: Fn() -> W + Sync + Send,
    F: Fn(&mut W, usize, &mut [S]) -> Result<()> + Sync + Send,
{
    match exec {
        Exec::Rayon => data
            .par_chunks_mut(chunk)
            .enumerate()
            .with_min_len(256)
            .try_for_each_init(init, |w, (k, c)| f(w, k, c)),
        Exec::Serial => {
            let mut w = init();
            data.chunks_mut(chunk)
                .enumerate()
                .try_for_each(|(k, c)| f(&mut w, k, c))
        }
    }
}

fn measurement<T: Real>(z: &[T], ny: usize, k: usize) -> Option<&[T]> {
    let zk = &z[k * ny..(k + 1) * ny];
    (!zk.iter().any(|v| v.is_nan_value())).then_some(zk)
}

/// Scratch of one Kalman step (for the step-0 element and the log-likelihoods).
struct StepScratch<T> {
    x: Vec<T>,
    p: Vec<T>,
    tmp: Vec<T>,
    y: Vec<T>,
    s: Vec<T>,
    wt: Vec<T>,
}

impl<T: Real> StepScratch<T> {
    fn new(nx: usize, ny: usize) -> Self {
        StepScratch {
            x: vec![T::zero(); nx],
            p: vec![T::zero(); nx * nx],
            tmp: vec![T::zero(); nx * nx],
            y: vec![T::zero(); ny],
            s: vec![T::zero(); ny * ny],
            wt: vec![T::zero(); ny * nx],
        }
    }
}

fn not_pd(track: usize, step: usize, what: &'static str) -> Error {
    Error::NotPositiveDefinite { track, step, what }
}

/// The filtering elements of one track (eqs. 43-45, step 0 from the prior).
pub(crate) fn filter_elements<T: Real>(
    m: &ConvertedModel<T>,
    track: usize,
    z: &[T],
    steps: usize,
    exec: Exec,
) -> Result<Vec<T>> {
    let (nx, ny) = (m.nx, m.ny);
    let op = FilterOp::<T>::new(nx);
    let lay = op.lay;
    let mut el = vec![T::zero(); steps * lay.len()];
    each(
        exec,
        &mut el,
        lay.len(),
        || (BuildScratch::new(nx, ny), StepScratch::new(nx, ny)),
        |(bs, ss), k, out| {
            if k == 0 {
                ss.x.copy_from_slice(&m.x0);
                ss.p.copy_from_slice(&m.p0);
                if let Some(zk) = measurement(z, ny, 0) {
                    update(
                        nx,
                        ny,
                        m.at(0),
                        zk,
                        &mut ss.x,
                        &mut ss.p,
                        &mut ss.y,
                        &mut ss.s,
                        &mut ss.wt,
                    )
                    .ok_or_else(|| not_pd(track, 0, "innovation covariance S"))?;
                }
                filtering::element_0(lay, &ss.x, &ss.p, out);
                Ok(())
            } else if filtering::element_k(lay, ny, m.at(k), measurement(z, ny, k), out, bs) {
                Ok(())
            } else {
                Err(not_pd(
                    track,
                    k,
                    "innovation covariance S of the filtering element",
                ))
            }
        },
    )?;
    Ok(el)
}

/// Copies the filtered moments `x_{k|k} = b_k^+`, `P_{k|k} = C_k^+` (eq. 47) out of the
/// scanned elements, checking that they are finite.
fn extract_filtered<T: Real>(
    op: &FilterOp<T>,
    track: usize,
    el: &[T],
    mean: &mut [T],
    cov: &mut [T],
) -> Result<()> {
    let lay = op.lay;
    let (n, len) = (lay.n, lay.len());
    for (k, e) in el.chunks(len).enumerate() {
        let (b, c) = (&e[lay.b()], &e[lay.c()]);
        if !b.iter().chain(c).all(|v| v.is_finite_value()) {
            return Err(not_pd(
                track,
                k,
                "filtered covariance (a combine of the parallel filter was singular)",
            ));
        }
        mean[k * n..(k + 1) * n].copy_from_slice(b);
        cov[k * n * n..(k + 1) * n * n].copy_from_slice(c);
    }
    Ok(())
}

/// Per-step log-likelihood `log N(z_k; H x_{k|k-1} + d, S_k)`: the predicted moments come
/// from the filtered ones of step `k-1` (the prior at step 0), so each step is independent.
fn logliks<T: Real>(
    m: &ConvertedModel<T>,
    track: usize,
    z: &[T],
    mean: &[T],
    cov: &[T],
    ll: &mut [T],
    exec: Exec,
) -> Result<()> {
    let (nx, ny) = (m.nx, m.ny);
    each(
        exec,
        ll,
        1,
        || StepScratch::new(nx, ny),
        |ss, k, out| {
            let Some(zk) = measurement(z, ny, k) else {
                out[0] = T::zero();
                return Ok(());
            };
            if k == 0 {
                ss.x.copy_from_slice(&m.x0);
                ss.p.copy_from_slice(&m.p0);
            } else {
                ss.x.copy_from_slice(&mean[(k - 1) * nx..k * nx]);
                ss.p.copy_from_slice(&cov[(k - 1) * nx * nx..k * nx * nx]);
                predict(nx, m.at(k), &mut ss.x, &mut ss.p, &mut ss.tmp);
            }
            out[0] = update(
                nx,
                ny,
                m.at(k),
                zk,
                &mut ss.x,
                &mut ss.p,
                &mut ss.y,
                &mut ss.s,
                &mut ss.wt,
            )
            .ok_or_else(|| not_pd(track, k, "innovation covariance S"))?;
            Ok(())
        },
    )
}

/// Where one track's results go.
pub(crate) struct TrackOut<'a, T> {
    pub mean: &'a mut [T],
    pub cov: &'a mut [T],
    pub loglik: &'a mut [T],
    pub smean: Option<&'a mut [T]>,
    pub scov: Option<&'a mut [T]>,
}

/// Algorithm 5: the parallel Kalman filter of one track, with log-likelihoods.
pub(crate) fn filter_track<T: Real>(
    m: &ConvertedModel<T>,
    track: usize,
    z: &[T],
    steps: usize,
    alg: ScanAlgorithm,
    exec: Exec,
    out: &mut TrackOut<'_, T>,
) -> Result<()> {
    let op = FilterOp::<T>::new(m.nx);
    let mut el = filter_elements(m, track, z, steps, exec)?;
    scan(&op, &mut el, alg, Direction::Forward, exec);
    extract_filtered(&op, track, &el, out.mean, out.cov)?;
    logliks(m, track, z, out.mean, out.cov, out.loglik, exec)
}

/// Algorithm 6 after the filter: the parallel RTS smoother (the thesis's retrodiction)
/// from filtered moments, by a reverse scan of the smoothing elements (eqs. 49-52).
#[allow(clippy::too_many_arguments)]
pub(crate) fn retrodict_track<T: Real>(
    m: &ConvertedModel<T>,
    track: usize,
    steps: usize,
    mean: &[T],
    cov: &[T],
    means_only: bool,
    alg: ScanAlgorithm,
    exec: Exec,
    smean: &mut [T],
    scov: Option<&mut [T]>,
) -> Result<()> {
    let nx = m.nx;
    let op = SmoothOp::<T>::new(nx, means_only);
    let len = op.elem_len();
    let mut el = vec![T::zero(); steps * len];
    let opr = &op;
    each(
        exec,
        &mut el,
        len,
        || SmoothBuild::new(nx),
        |ws, k, out| {
            let (x, p) = (
                &mean[k * nx..(k + 1) * nx],
                &cov[k * nx * nx..(k + 1) * nx * nx],
            );
            if k + 1 == steps {
                smoothing::element_last(opr, x, p, out);
            } else if !smoothing::element_k(opr, m.at(k + 1), x, p, out, ws) {
                return Err(not_pd(
                    track,
                    k + 1,
                    "predicted covariance P(k+1|k) in the smoother",
                ));
            }
            Ok(())
        },
    )?;
    scan(&op, &mut el, alg, Direction::Reverse, exec);
    let n2 = nx * nx;
    for (k, e) in el.chunks(len).enumerate() {
        smean[k * nx..(k + 1) * nx].copy_from_slice(&e[n2..n2 + nx]);
    }
    if let Some(scov) = scov {
        for (k, e) in el.chunks(len).enumerate() {
            scov[k * n2..(k + 1) * n2].copy_from_slice(&e[n2 + nx..]);
        }
    }
    Ok(())
}

/// Algorithm 7: the parallel two-filter smoother. The forward scan of the filtering
/// elements gives `p(x_k | y_{0:k})`; a reverse scan of `(a_{k+1}, ..., a_{T-1}, e)` (eq. 54,
/// `e = (I, 0, 0, 0, 0)`) gives `p(y_{k+1:T-1} | x_k) ∝ N_I(x_k; eta, J)`; their product is
/// (eqs. 25-26) `P_{k|T} = (I + P J)^{-1} P`, `x_{k|T} = (I + P J)^{-1} (x + P eta)`.
/// `I + P J` is invertible for any positive semi-definite `P` and `J` (its eigenvalues are
/// those of `I + P^{1/2} J P^{1/2}`), so a singular backward information matrix (at the
/// last step, or where few measurements follow) needs no special case: no inverse of `J`
/// is ever formed.
pub(crate) fn two_filter_track<T: Real>(
    m: &ConvertedModel<T>,
    track: usize,
    z: &[T],
    steps: usize,
    alg: ScanAlgorithm,
    exec: Exec,
    out: &mut TrackOut<'_, T>,
) -> Result<()> {
    let nx = m.nx;
    let op = FilterOp::<T>::new(nx);
    let lay = op.lay;
    let len = lay.len();
    let mut el = filter_elements(m, track, z, steps, exec)?;
    let mut back = Vec::with_capacity(el.len());
    back.extend_from_slice(&el[len..]);
    let mut e = vec![T::zero(); len];
    op.identity(&mut e);
    back.extend_from_slice(&e);
    scan(&op, &mut el, alg, Direction::Forward, exec);
    extract_filtered(&op, track, &el, out.mean, out.cov)?;
    drop(el);
    logliks(m, track, z, out.mean, out.cov, out.loglik, exec)?;
    scan(&op, &mut back, alg, Direction::Reverse, exec);
    let (mean, cov) = (&*out.mean, &*out.cov);
    let n2 = nx * nx;
    // Overwrite each backward element with the smoothed (x, P) in its first n + n² slots.
    each(
        exec,
        &mut back,
        len,
        || {
            (
                vec![T::zero(); n2],
                vec![0usize; nx],
                vec![T::zero(); nx * (nx + 1)],
            )
        },
        |(mm, piv, rhs), k, el| {
            let (x, p) = (&mean[k * nx..(k + 1) * nx], &cov[k * n2..(k + 1) * n2]);
            let (eta, j) = (&el[lay.eta()], &el[lay.j()]);
            mul(p, j, mm, nx, nx, nx);
            for i in 0..nx {
                mm[i * nx + i] += T::one();
            }
            let w = nx + 1;
            for r in 0..nx {
                rhs[r * w + nx] = x[r];
                for c in 0..nx {
                    rhs[r * w + c] = p[r * nx + c];
                }
            }
            for r in 0..nx {
                let mut s = T::zero();
                for c in 0..nx {
                    s += p[r * nx + c] * eta[c];
                }
                rhs[r * w + nx] += s;
            }
            if !lu_in_place(mm, nx, piv) {
                return Err(not_pd(track, k, "I + P J of the two-filter smoother"));
            }
            lu_solve(mm, nx, piv, rhs, w);
            for r in 0..nx {
                el[r] = rhs[r * w + nx];
                for c in 0..nx {
                    el[nx + r * nx + c] = rhs[r * w + c];
                }
            }
            symmetrize(&mut el[nx..nx + n2], nx);
            Ok(())
        },
    )?;
    let (Some(smean), Some(scov)) = (out.smean.as_deref_mut(), out.scov.as_deref_mut()) else {
        return Ok(());
    };
    for (k, e) in back.chunks(len).enumerate() {
        smean[k * nx..(k + 1) * nx].copy_from_slice(&e[..nx]);
        scov[k * n2..(k + 1) * n2].copy_from_slice(&e[nx..nx + n2]);
    }
    Ok(())
}
