//! The square-root (Cholesky-factor) form of the parallel filter, after Yaghoobi,
//! Corenflos, Hassan & Sarkka, *Parallel square-root statistical linear regression for
//! inference in nonlinear state space models* (2022; the linear case), the form cuthbert
//! uses: the element `(A, b, U, eta, Z)` carries factors with `C = U U^T` and
//! `J = Z Z^T`, every covariance is rebuilt as a product of a factor with itself, and every
//! factor comes out of an orthogonal triangularisation (`tria`), so that no covariance can
//! lose positive semi-definiteness to rounding, in `f32` too.
//!
//! Combine of `a_i` (earlier) and `a_j` (later), with `tria` of the `2n x 2n` matrix
//! ```text
//! [ U_i^T Z_j   I ]          [ X11   0  ]
//! [ Z_j         0 ]  -> tria [ X21  X22 ]
//! ```
//! (`X11 X11^T = I + U_i^T J_j U_i`, so `X11` is never singular), `Y = U_i X11^{-T}` and
//! `D = I - Y X21^T = (I + C_i J_j)^{-1}`:
//! ```text
//! A_ij   = A_j D A_i
//! b_ij   = A_j D (b_i + U_i U_i^T eta_j) + b_j
//! U_ij   = tria [A_j Y | U_j]
//! eta_ij = A_i^T D^T (eta_j - Z_j Z_j^T b_i) + eta_i
//! Z_ij   = tria [A_i^T X22 | Z_i]
//! ```
//! which is Lemma 3 of Sarkka & Garcia-Fernandez with the factors substituted
//! (`(I + C_i J_j)^{-1} C_i = Y Y^T`, `(I + J_j C_i)^{-1} J_j = X22 X22^T`).
//!
//! The element of step `k` (eqs. 43-45 in factors): `tria` of
//! `[[H L_Q, L_R], [L_Q, 0]]` gives `S^{1/2}` (`P11`), `Q H^T S^{-T/2}` (`P21`) and the
//! factor of `(I - K H) Q` (`P22`); `K = P21 P11^{-1}`, `A = F - K H F`,
//! `b = u + K (z - H u - d)`, `U = P22`, `eta = G P11^{-1} (z - H u - d)` and
//! `Z = tria(G)` with `G = (H F)^T P11^{-T}`. `L_Q` is a Cholesky factor of `Q` that
//! tolerates a singular `Q` (zero pivots give zero columns).

use super::filtering::FilterLayout;
use super::track::each;
use crate::data::{Estimates, Measurements};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kalman::dense::ConvertedModel;
use crate::kalman::step::StepMats;
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::scan::{scan, AssocOp, Direction, Exec, ScanAlgorithm};
pub(crate) use factor::psd_factor;
use factor::{gemm, lower_solve, tria};
use std::marker::PhantomData;

mod factor;
mod smooth;

pub use smooth::SqrtSmoothOp;

/// The square-root filtering operator (same layout as `FilterLayout`, with `U` in
/// place of `C` and `Z` in place of `J`, both lower triangular).
pub struct SqrtFilterOp<T> {
    pub(crate) lay: FilterLayout,
    _t: PhantomData<T>,
}

impl<T: Real> SqrtFilterOp<T> {
    /// The operator for states of size `nx`.
    pub fn new(nx: usize) -> Self {
        SqrtFilterOp {
            lay: FilterLayout { n: nx },
            _t: PhantomData,
        }
    }
}

/// Scratch of one square-root combine.
pub struct SqrtScratch<T> {
    phi: Vec<T>,
    xi: Vec<T>,
    w: Vec<T>,
    y: Vec<T>,
    d: Vec<T>,
    t1: Vec<T>,
    t2: Vec<T>,
    wide: Vec<T>,
    v1: Vec<T>,
    v2: Vec<T>,
}

impl<T: Real> AssocOp for SqrtFilterOp<T> {
    type Scalar = T;
    type Scratch = SqrtScratch<T>;

    fn elem_len(&self) -> usize {
        self.lay.len()
    }

    fn scratch(&self) -> SqrtScratch<T> {
        let n = self.lay.n;
        let z = |k: usize| vec![T::zero(); k];
        SqrtScratch {
            phi: z(4 * n * n),
            xi: z(4 * n * n),
            w: z(4 * n * n),
            y: z(n * n),
            d: z(n * n),
            t1: z(n * n),
            t2: z(n * n),
            wide: z(2 * n * n),
            v1: z(n),
            v2: z(n),
        }
    }

    fn identity(&self, out: &mut [T]) {
        let n = self.lay.n;
        out.fill(T::zero());
        for i in 0..n {
            out[self.lay.a().start + i * n + i] = T::one();
        }
    }

    fn combine(&self, ei: &[T], ej: &[T], out: &mut [T], s: &mut SqrtScratch<T>) {
        let lay = self.lay;
        let n = lay.n;
        let (ai, bi, ui, etai, zi) = (
            &ei[lay.a()],
            &ei[lay.b()],
            &ei[lay.c()],
            &ei[lay.eta()],
            &ei[lay.j()],
        );
        let (aj, bj, uj, etaj, zj) = (
            &ej[lay.a()],
            &ej[lay.b()],
            &ej[lay.c()],
            &ej[lay.eta()],
            &ej[lay.j()],
        );
        let m = 2 * n;
        // Phi = [[U_i^T Z_j, I], [Z_j, 0]].
        gemm(ui, true, zj, false, &mut s.t1, n, n, n);
        s.phi.fill(T::zero());
        for r in 0..n {
            for c in 0..n {
                s.phi[r * m + c] = s.t1[r * n + c];
                s.phi[(n + r) * m + c] = zj[r * n + c];
            }
            s.phi[r * m + n + r] = T::one();
        }
        tria(&s.phi, m, m, &mut s.w, &mut s.xi);
        // Y^T = X11^{-1} U_i^T.
        for r in 0..n {
            for c in 0..n {
                s.t1[r * n + c] = ui[c * n + r];
            }
        }
        if !lower_solve(&s.xi, m, n, &mut s.t1, n) {
            out.fill(T::nan());
            return;
        }
        for r in 0..n {
            for c in 0..n {
                s.y[r * n + c] = s.t1[c * n + r];
            }
        }
        // D = I - Y X21^T.
        for r in 0..n {
            for c in 0..n {
                let mut v = if r == c { T::one() } else { T::zero() };
                for l in 0..n {
                    v -= s.y[r * n + l] * s.xi[(n + c) * m + l];
                }
                s.d[r * n + c] = v;
            }
        }
        // A_ij = A_j D A_i; b_ij = A_j D (b_i + U_i U_i^T eta_j) + b_j.
        gemm(aj, false, &s.d, false, &mut s.t2, n, n, n);
        gemm(&s.t2, false, ai, false, &mut out[lay.a()], n, n, n);
        for r in 0..n {
            let mut v = T::zero();
            for l in 0..n {
                v += ui[l * n + r] * etaj[l];
            }
            s.v1[r] = v;
        }
        for r in 0..n {
            let mut v = bi[r];
            for l in 0..n {
                v += ui[r * n + l] * s.v1[l];
            }
            s.v2[r] = v;
        }
        for r in 0..n {
            let mut v = bj[r];
            for l in 0..n {
                v += s.t2[r * n + l] * s.v2[l];
            }
            out[lay.b().start + r] = v;
        }
        // U_ij = tria [A_j Y | U_j].
        gemm(aj, false, &s.y, false, &mut s.t1, n, n, n);
        for r in 0..n {
            for c in 0..n {
                s.wide[r * m + c] = s.t1[r * n + c];
                s.wide[r * m + n + c] = uj[r * n + c];
            }
        }
        tria(&s.wide, n, m, &mut s.w, &mut out[lay.c()]);
        // eta_ij = A_i^T D^T (eta_j - Z_j Z_j^T b_i) + eta_i.
        for r in 0..n {
            let mut v = T::zero();
            for l in 0..n {
                v += zj[l * n + r] * bi[l];
            }
            s.v1[r] = v;
        }
        for r in 0..n {
            let mut v = etaj[r];
            for l in 0..n {
                v -= zj[r * n + l] * s.v1[l];
            }
            s.v2[r] = v;
        }
        for r in 0..n {
            let mut v = T::zero();
            for l in 0..n {
                v += s.d[l * n + r] * s.v2[l];
            }
            s.v1[r] = v;
        }
        for r in 0..n {
            let mut v = etai[r];
            for l in 0..n {
                v += ai[l * n + r] * s.v1[l];
            }
            out[lay.eta().start + r] = v;
        }
        // Z_ij = tria [A_i^T X22 | Z_i].
        for r in 0..n {
            for c in 0..n {
                let mut v = T::zero();
                for l in 0..n {
                    v += ai[l * n + r] * s.xi[(n + l) * m + n + c];
                }
                s.wide[r * m + c] = v;
                s.wide[r * m + n + c] = zi[r * n + c];
            }
        }
        tria(&s.wide, n, m, &mut s.w, &mut out[lay.j()]);
    }
}

/// Factors and scratch of element building and of the log-likelihoods.
struct Build<T> {
    lq: Vec<T>,
    lr: Vec<T>,
    psi: Vec<T>,
    tri: Vec<T>,
    w: Vec<T>,
    hf: Vec<T>,
    g: Vec<T>,
    e: Vec<T>,
    k: Vec<T>,
}

impl<T: Real> Build<T> {
    fn new(nx: usize, ny: usize) -> Self {
        let z = |k: usize| vec![T::zero(); k];
        let m = 2 * nx + ny;
        Build {
            lq: z(nx * nx),
            lr: z(ny * ny),
            psi: z((nx + ny) * m),
            tri: z((nx + ny) * (nx + ny)),
            w: z((nx + ny) * m),
            hf: z(ny * nx),
            g: z(nx * ny),
            e: z(ny),
            k: z(nx * ny),
        }
    }

    /// Factors `L_Q` and `L_R` of step `st`; false when `Q` or `R` is not PSD / PD.
    fn factors(&mut self, st: &StepMats<T>, nx: usize, ny: usize) -> bool {
        psd_factor(&st.q, nx, &mut self.lq)
            && psd_factor(&st.r, ny, &mut self.lr)
            && (0..ny).all(|i| self.lr[i * ny + i] > T::zero())
    }

    /// `tria [[H L, L_R], [L, 0]]` for the factor `l` (`nx x nx`) into `tri`
    /// (`(ny + nx)^2`, blocks `P11` (ny x ny), `P21`, `P22`), and `K = P21 P11^{-1}`.
    fn update_factors(&mut self, st: &StepMats<T>, l: &[T], nx: usize, ny: usize) -> bool {
        let (rows, cols) = (ny + nx, nx + ny);
        self.psi.resize(rows * cols, T::zero());
        self.psi.fill(T::zero());
        for a in 0..ny {
            for c in 0..nx {
                let mut v = T::zero();
                for q in 0..nx {
                    v += st.h[a * nx + q] * l[q * nx + c];
                }
                self.psi[a * cols + c] = v;
            }
            for c in 0..ny {
                self.psi[a * cols + nx + c] = self.lr[a * ny + c];
            }
        }
        for r in 0..nx {
            for c in 0..nx {
                self.psi[(ny + r) * cols + c] = l[r * nx + c];
            }
        }
        tria(&self.psi, rows, cols, &mut self.w, &mut self.tri);
        // K^T = P11^{-T} P21^T: solve P11^T K^T = P21^T by back substitution.
        for i in (0..ny).rev() {
            let d = self.tri[i * rows + i];
            if d <= T::zero() {
                return false;
            }
            for c in 0..nx {
                let mut v = self.tri[(ny + c) * rows + i];
                for q in i + 1..ny {
                    v -= self.tri[q * rows + i] * self.k[c * ny + q];
                }
                self.k[c * ny + i] = v / d;
            }
        }
        true
    }

    /// The innovation `e = z - d - H x` of step `st` (`z - d` first, then the products
    /// subtracted in ascending order).
    fn residual(&mut self, st: &StepMats<T>, zk: &[T], x: &[T], nx: usize, ny: usize) {
        for a in 0..ny {
            let mut v = zk[a] - st.d[a];
            for q in 0..nx {
                v -= st.h[a * nx + q] * x[q];
            }
            self.e[a] = v;
        }
    }

    /// The update's read-out into the element `out`: `b = x + K e` and the factor `P22`.
    fn correct(&self, x: &[T], nx: usize, ny: usize, out: &mut [T]) {
        let (lay, rows) = (FilterLayout { n: nx }, ny + nx);
        for r in 0..nx {
            let mut v = x[r];
            for a in 0..ny {
                v += self.k[r * ny + a] * self.e[a];
            }
            out[lay.b().start + r] = v;
            let p22 = (ny + r) * rows + ny;
            out[lay.c().start + r * nx..][..nx].copy_from_slice(&self.tri[p22..p22 + nx]);
        }
    }
}

/// The square-root element of step `k` into `out`; false when a factor fails.
fn element<T: Real>(
    m: &ConvertedModel<T>,
    lp0: &[T],
    z: Option<&[T]>,
    k: usize,
    out: &mut [T],
    bs: &mut Build<T>,
) -> bool {
    let (nx, ny) = (m.nx, m.ny);
    let lay = FilterLayout { n: nx };
    let st = m.at(k);
    out.fill(T::zero());
    if !bs.factors(st, nx, ny) {
        return false;
    }
    let rows = ny + nx;
    if k == 0 {
        out[lay.b()].copy_from_slice(&m.x0);
        out[lay.c()].copy_from_slice(lp0);
        let Some(zk) = z else { return true };
        if !bs.update_factors(st, lp0, nx, ny) {
            return false;
        }
        bs.residual(st, zk, &m.x0, nx, ny);
        bs.correct(&m.x0, nx, ny, out);
        return true;
    }
    out[lay.a()].copy_from_slice(&st.f);
    out[lay.b()].copy_from_slice(&st.u);
    let lq = bs.lq.clone();
    out[lay.c()].copy_from_slice(&lq);
    let Some(zk) = z else { return true };
    if !bs.update_factors(st, &lq, nx, ny) {
        return false;
    }
    gemm(&st.h, false, &st.f, false, &mut bs.hf, ny, nx, nx);
    bs.residual(st, zk, &st.u, nx, ny);
    bs.correct(&st.u, nx, ny, out);
    for r in 0..nx {
        for c in 0..nx {
            let mut a_rc = st.f[r * nx + c];
            for a in 0..ny {
                a_rc -= bs.k[r * ny + a] * bs.hf[a * nx + c];
            }
            out[lay.a().start + r * nx + c] = a_rc;
        }
    }
    // G^T = P11^{-1} H F (ny x nx), w = P11^{-1} e.
    let mut gt = bs.hf.clone();
    if !lower_solve(&bs.tri, rows, ny, &mut gt, nx) || !lower_solve(&bs.tri, rows, ny, &mut bs.e, 1)
    {
        return false;
    }
    for r in 0..nx {
        let mut v = T::zero();
        for a in 0..ny {
            v += gt[a * nx + r] * bs.e[a];
            bs.g[r * ny + a] = gt[a * nx + r];
        }
        out[lay.eta().start + r] = v;
    }
    let g = bs.g.clone();
    tria(&g, nx, ny, &mut bs.w, &mut out[lay.j()]);
    true
}

fn measurement<T: Real>(z: &[T], ny: usize, k: usize) -> Option<&[T]> {
    let zk = &z[k * ny..(k + 1) * ny];
    (!zk.iter().any(|v| v.is_nan_value())).then_some(zk)
}

fn not_pd(track: usize, step: usize, what: &'static str) -> Error {
    Error::NotPositiveDefinite { track, step, what }
}

/// One track: elements, scan, then means, covariances `U U^T` and log-likelihoods from
/// the predicted factor `tria [H F U_{k-1} | H L_Q | L_R]`.
#[allow(clippy::too_many_arguments)]
fn filter_track<T: Real>(
    m: &ConvertedModel<T>,
    lp0: &[T],
    track: usize,
    z: &[T],
    steps: usize,
    alg: ScanAlgorithm,
    exec: Exec,
    mean: &mut [T],
    cov: &mut [T],
    ll: &mut [T],
) -> Result<Vec<T>> {
    let (nx, ny) = (m.nx, m.ny);
    let op = SqrtFilterOp::<T>::new(nx);
    let lay = op.lay;
    let mut el = vec![T::zero(); steps * lay.len()];
    each(
        exec,
        &mut el,
        lay.len(),
        || Build::new(nx, ny),
        |bs, k, out| {
            if element(m, lp0, measurement(z, ny, k), k, out, bs) {
                Ok(())
            } else {
                Err(not_pd(track, k, "a factor of the square-root element"))
            }
        },
    )?;
    scan(&op, &mut el, alg, Direction::Forward, exec);
    for (k, e) in el.chunks(lay.len()).enumerate() {
        let (b, u) = (&e[lay.b()], &e[lay.c()]);
        if !b.iter().chain(u).all(|v| v.is_finite_value()) {
            return Err(not_pd(track, k, "the square-root filter's factor"));
        }
        mean[k * nx..(k + 1) * nx].copy_from_slice(b);
        gemm(
            u,
            false,
            u,
            true,
            &mut cov[k * nx * nx..(k + 1) * nx * nx],
            nx,
            nx,
            nx,
        );
    }
    each(
        exec,
        ll,
        1,
        || (Build::new(nx, ny), vec![T::zero(); nx * nx]),
        |(bs, hfu), k, out| {
            let Some(zk) = measurement(z, ny, k) else {
                out[0] = T::zero();
                return Ok(());
            };
            let st = m.at(k);
            if !bs.factors(st, nx, ny) {
                return Err(not_pd(track, k, "a factor of Q or R"));
            }
            // Predicted mean and the factor columns [H F U | H L_Q | L_R] (k > 0), or
            // [H L_P0 | L_R] at step 0.
            let cols = 2 * nx + ny;
            let mut xp = vec![T::zero(); nx];
            bs.psi.resize(ny * cols, T::zero());
            bs.psi.fill(T::zero());
            if k == 0 {
                xp.copy_from_slice(&m.x0);
                gemm(&st.h, false, lp0, false, hfu, ny, nx, nx);
                for a in 0..ny {
                    for c in 0..nx {
                        bs.psi[a * cols + c] = hfu[a * nx + c];
                    }
                }
            } else {
                let prev = &el[(k - 1) * lay.len()..k * lay.len()];
                let (b, u) = (&prev[lay.b()], &prev[lay.c()]);
                for r in 0..nx {
                    let mut v = st.u[r];
                    for l in 0..nx {
                        v += st.f[r * nx + l] * b[l];
                    }
                    xp[r] = v;
                }
                gemm(&st.h, false, &st.f, false, &mut bs.hf, ny, nx, nx);
                gemm(&bs.hf, false, u, false, hfu, ny, nx, nx);
                for a in 0..ny {
                    for c in 0..nx {
                        bs.psi[a * cols + c] = hfu[a * nx + c];
                        let mut v = T::zero();
                        for l in 0..nx {
                            v += st.h[a * nx + l] * bs.lq[l * nx + c];
                        }
                        bs.psi[a * cols + nx + c] = v;
                    }
                }
            }
            for a in 0..ny {
                for c in 0..ny {
                    bs.psi[a * cols + 2 * nx + c] = bs.lr[a * ny + c];
                }
            }
            let psi = bs.psi.clone();
            tria(&psi, ny, cols, &mut bs.w, &mut bs.tri);
            bs.residual(st, zk, &xp, nx, ny);
            if !lower_solve(&bs.tri, ny, ny, &mut bs.e, 1) {
                return Err(not_pd(track, k, "innovation covariance S"));
            }
            let mut logdet = T::zero();
            let mut maha = T::zero();
            for a in 0..ny {
                logdet += bs.tri[a * ny + a].ln();
                maha += bs.e[a] * bs.e[a];
            }
            out[0] = -T::of(0.5) * (T::of(ny as f64 * (2.0 * std::f64::consts::PI).ln()) + maha)
                - logdet;
            Ok(())
        },
    )?;
    Ok(el)
}

/// One track's square-root RTS smoother over its scanned filtering elements `el`:
/// smoothing elements from the filtered means and factors, the reverse scan, then means
/// and covariances `D D^T`.
#[allow(clippy::too_many_arguments)]
fn smooth_track<T: Real>(
    m: &ConvertedModel<T>,
    track: usize,
    el: &[T],
    steps: usize,
    alg: ScanAlgorithm,
    exec: Exec,
    smean: &mut [T],
    scov: &mut [T],
) -> Result<()> {
    let nx = m.nx;
    let lay = FilterLayout { n: nx };
    let op = SqrtSmoothOp::<T>::new(nx);
    let len = op.elem_len();
    let mut se = vec![T::zero(); steps * len];
    each(
        exec,
        &mut se,
        len,
        || smooth::SmoothBuild::new(nx),
        |ws, k, out| {
            let e = &el[k * lay.len()..(k + 1) * lay.len()];
            let (x, u) = (&e[lay.b()], &e[lay.c()]);
            if k + 1 == steps {
                smooth::element_last(x, u, out);
            } else if !smooth::element_k(m.at(k + 1), x, u, out, ws) {
                return Err(not_pd(
                    track,
                    k + 1,
                    "the predicted factor in the square-root smoother",
                ));
            }
            Ok(())
        },
    )?;
    scan(&op, &mut se, alg, Direction::Reverse, exec);
    let n2 = nx * nx;
    for (k, e) in se.chunks(len).enumerate() {
        let (g, d) = (&e[n2..n2 + nx], &e[n2 + nx..]);
        if !g.iter().chain(d).all(|v| v.is_finite_value()) {
            return Err(not_pd(track, k, "the square-root smoother's factor"));
        }
        smean[k * nx..(k + 1) * nx].copy_from_slice(g);
        gemm(
            d,
            false,
            d,
            true,
            &mut scov[k * n2..(k + 1) * n2],
            nx,
            nx,
            nx,
        );
    }
    Ok(())
}

/// The square-root parallel filter: filtered moments and per-step log-likelihoods of every
/// track, equal to [`super::filter`] in exact arithmetic and positive semi-definite by
/// construction in any precision. On the CPU or one GPU (`parallel::cuda`, the same
/// elements and operator as CUDA kernels, all tracks batched).
pub fn filter_sqrt<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    scan_alg: ScanAlgorithm,
) -> Result<Estimates<T>> {
    super::check(model, z)?;
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the square-root parallel filter")?;
    #[cfg(feature = "cuda")]
    if let Device::Cuda(i) = device.first() {
        return Ok(super::cuda::run(i, model, z, super::cuda::Method::SqrtFilter, scan_alg)?.0);
    }
    Ok(run_cpu(model, z, scan_alg, false)?.0)
}

/// The square-root parallel filter then the square-root parallel RTS smoother; returns
/// `(filtered, smoothed)`, equal to [`super::smooth_rts`] in exact arithmetic, every
/// covariance a factor's product with itself. On the CPU or one GPU.
pub fn smooth_sqrt<T: Real, M: StateSpace + ?Sized>(
    device: Device,
    model: &M,
    z: &Measurements<T>,
    scan_alg: ScanAlgorithm,
) -> Result<(Estimates<T>, Estimates<T>)> {
    super::check(model, z)?;
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the square-root parallel smoother")?;
    #[cfg(feature = "cuda")]
    if let Device::Cuda(i) = device.first() {
        return super::smoothed(super::cuda::run(
            i,
            model,
            z,
            super::cuda::Method::SqrtRts,
            scan_alg,
        )?);
    }
    let (f, s) = run_cpu(model, z, scan_alg, true)?;
    Ok((f, s.expect("the smoother's estimates are allocated")))
}

/// Every track on the CPU (`super::for_tracks`: across tracks on the pool, or one track
/// at a time with parallel levels): the filter, and with `smooth` the smoother over the
/// filter's scanned elements.
fn run_cpu<T: Real, M: StateSpace + ?Sized>(
    model: &M,
    z: &Measurements<T>,
    scan_alg: ScanAlgorithm,
    smooth: bool,
) -> Result<(Estimates<T>, Option<Estimates<T>>)> {
    let m = ConvertedModel::<T>::new(model, z.steps);
    let (nx, t) = (m.nx, z.steps);
    let mut lp0 = vec![T::zero(); nx * nx];
    if !psd_factor(&m.p0, nx, &mut lp0) {
        return Err(not_pd(0, 0, "the prior covariance P0"));
    }
    let mut est = Estimates::nan(z.tracks, t, nx, true);
    let mut sm = smooth.then(|| Estimates::nan(z.tracks, t, nx, false));
    super::for_tracks(&mut est, sm.as_mut(), |b, exec, out| {
        let el = filter_track(
            &m,
            &lp0,
            b,
            z.track(b),
            t,
            scan_alg,
            exec,
            out.mean,
            out.cov,
            out.loglik,
        )?;
        match (out.smean.as_deref_mut(), out.scov.as_deref_mut()) {
            (Some(smean), Some(scov)) => smooth_track(&m, b, &el, t, scan_alg, exec, smean, scov),
            _ => Ok(()),
        }
    })?;
    Ok((est, sm))
}
