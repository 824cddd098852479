//! Models of the particle filter: the [`ParticleModel`] trait (what the CPU filter needs
//! from any model, user models included) and the built-in kinds of the model file
//! ([`PfModel`]).
//!
//! Every kind draws its noise from the particle's own [`Normals`] stream in a fixed
//! order (documented per kind), the same order as the CUDA kernels (`kernels/models.cuh`),
//! so that both devices propagate a particle identically from the same seed.

use super::philox::{Normals, Purpose};
use crate::error::{Error, Result};
use crate::linalg::{Real, LN_2PI};
use crate::model::Model;
use nalgebra::{DMatrix, DVector};

/// Where a batch of particles stands: step `k`, the run's random `key`, filter `b`, and
/// the slot of the batch's first particle (particle `i` of the batch is slot
/// `first + i`, with its own [`Normals`] stream of [`Purpose::Propagate`] under `key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The step.
    pub k: usize,
    /// The run's key of the random streams.
    pub key: [u32; 2],
    /// The filter (track) the particles belong to.
    pub b: u32,
    /// The slot of the first particle.
    pub first: u32,
}

/// What the bootstrap filter needs from a model. `x` is one particle's state (length
/// `nx`), `z` one measurement (length `ny`, never missing when passed).
pub trait ParticleModel<T: Real>: Sync {
    /// State size.
    fn nx(&self) -> usize;
    /// Measurement size.
    fn ny(&self) -> usize;
    /// Draws the state at step 0 from the prior.
    fn sample_prior(&self, x: &mut [T], noise: &mut Normals<T>);
    /// Moves `x` from step `k - 1` to step `k` (`k >= 1`), drawing the process noise.
    fn propagate(&self, k: usize, x: &mut [T], noise: &mut Normals<T>);
    /// `ln p(z_k | x_k)`.
    fn log_likelihood(&self, k: usize, x: &[T], z: &[T]) -> T;
    /// Draws a measurement `z_k` of the state `x` (simulation).
    fn measure(&self, k: usize, x: &[T], noise: &mut Normals<T>, z: &mut [T]);

    /// Many particles at once: draws (`k = 0`) or propagates the particles `xs`
    /// (`[n][nx]`, slots `first..first + n` of filter `b`, each with its own [`Normals`]
    /// stream of [`Purpose::Propagate`] under `key`) and, when `z = Some((z_k, ll))`,
    /// writes `ll[i] = ln p(z_k | x_i)`. The default goes one particle at a time through
    /// the methods above; the built-in kinds draw the noise of several particles together
    /// in f64 (the same numbers, to rounding).
    fn advance_batch(&self, at: Batch, xs: &mut [T], z: Option<(&[T], &mut [T])>) {
        advance_one_by_one(self, at, xs, z)
    }

    /// [`advance_batch`](ParticleModel::advance_batch) of the particles
    /// `src[anc[i]]` (resampled ancestors), written to `xs`: the default copies them and
    /// advances the copy; the built-in kinds read them where they are.
    fn advance_batch_from(
        &self,
        at: Batch,
        src: &[T],
        anc: &[u32],
        xs: &mut [T],
        z: Option<(&[T], &mut [T])>,
    ) {
        super::resample::gather(src, self.nx(), anc, xs);
        self.advance_batch(at, xs, z)
    }
}

/// [`ParticleModel::advance_batch`] one particle at a time.
pub fn advance_one_by_one<T: Real, M: ParticleModel<T> + ?Sized>(
    model: &M,
    at: Batch,
    xs: &mut [T],
    mut z: Option<(&[T], &mut [T])>,
) {
    let Batch { k, key, b, first } = at;
    let nx = model.nx();
    for (l, x) in xs.chunks_exact_mut(nx).enumerate() {
        let i = first.wrapping_add(l as u32);
        let mut noise = Normals::new(key, i, b, k as u32, Purpose::Propagate);
        if k == 0 {
            model.sample_prior(x, &mut noise);
        } else {
            model.propagate(k, x, &mut noise);
        }
        if let Some((zk, ll)) = &mut z {
            ll[l] = model.log_likelihood(k, x, zk);
        }
    }
}

/// A Gaussian prior in the form the samplers use: mean and a square root `L`
/// (`L L^T = P0`, lower triangular when `P0` is positive definite).
#[derive(Clone, Debug, PartialEq)]
pub struct GaussianPrior {
    /// The prior mean, length `nx`.
    pub x0: Vec<f64>,
    /// Row-major `nx x nx`.
    pub sqrt_p0: Vec<f64>,
}

impl GaussianPrior {
    /// From the mean and covariance (`P0` positive semi-definite, checked).
    pub fn new(x0: &DVector<f64>, p0: &DMatrix<f64>) -> Result<Self> {
        Ok(GaussianPrior {
            x0: x0.iter().copied().collect(),
            sqrt_p0: row_major(&sqrt_psd("P0", p0)?),
        })
    }
}

/// The 2-D constant-velocity motion of the tracking kinds: state `[px, vx, py, vy]`,
/// white-noise acceleration of spectral density `q` discretised over `dt` (the same `Q`
/// as the `cv` builder). Noise order: `n0, n1` for the x axis, `n2, n3` for y:
/// `p += dt v + a n0`, `v += b n0 + c n1` with `[[a, 0], [b, c]]` the Cholesky factor of
/// `q [[dt^3/3, dt^2/2], [dt^2/2, dt]]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConstantVelocity {
    /// Sampling interval.
    pub dt: f64,
    /// Spectral density of the white-noise acceleration.
    pub q: f64,
}

impl ConstantVelocity {
    /// `(a, b, c)`, the Cholesky factor of one axis' process noise.
    pub fn noise_factor(&self) -> (f64, f64, f64) {
        let (dt, q) = (self.dt, self.q);
        let a = (q * dt * dt * dt / 3.0).sqrt();
        if a == 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let b = q * dt * dt / 2.0 / a;
        let c = (q * dt - b * b).max(0.0).sqrt();
        (a, b, c)
    }

    #[inline(always)]
    fn propagate<T: Real>(&self, x: &mut [T], noise: &mut Normals<T>) {
        let (a, b, c) = self.noise_factor();
        let (dt, a, b, c) = (T::of(self.dt), T::of(a), T::of(b), T::of(c));
        let n = [noise.draw(), noise.draw(), noise.draw(), noise.draw()];
        x[0] = x[0] + dt * x[1] + a * n[0];
        x[1] = x[1] + b * n[0] + c * n[1];
        x[2] = x[2] + dt * x[3] + a * n[2];
        x[3] = x[3] + b * n[2] + c * n[3];
    }
}

/// The built-in kinds of the model file.
#[derive(Clone, Debug, PartialEq)]
pub enum PfKind {
    /// Any explicit linear-Gaussian model (the Kalman filter's): noise order `n0..n{nx-1}`
    /// through a square root of `Q`.
    Linear(LinearGaussian),
    /// Sensors at positions `s_j`, each measuring the range `|p - s_j|` with variance `r`.
    RangeOnly {
        /// The motion.
        cv: ConstantVelocity,
        /// Sensor positions `[x, y]`.
        sensors: Vec<[f64; 2]>,
        /// Measurement variance of each sensor.
        r: f64,
    },
    /// Sensors measuring the bearing `atan2(py - s_y, px - s_x)` with variance `r`
    /// (radians^2); the innovation is wrapped to `(-pi, pi]`.
    BearingsOnly {
        /// The motion.
        cv: ConstantVelocity,
        /// Sensor positions `[x, y]`.
        sensors: Vec<[f64; 2]>,
        /// Measurement variance of each sensor.
        r: f64,
    },
    /// A radar at `radar` measuring `[range, bearing]` with variances
    /// `r_range`, `r_bearing`.
    RangeBearing {
        /// The motion.
        cv: ConstantVelocity,
        /// Radar position `[x, y]`.
        radar: [f64; 2],
        /// Range variance.
        r_range: f64,
        /// Bearing variance (radians^2).
        r_bearing: f64,
    },
    /// `x_0 ~ N(mu, sigma^2 / (1 - phi^2))`, `x_k = mu + phi (x_{k-1} - mu) + sigma v_k`,
    /// `z_k ~ N(0, exp(x_k))`.
    StochasticVolatility {
        /// Mean log-variance.
        mu: f64,
        /// Persistence, `|phi| < 1`.
        phi: f64,
        /// Volatility of the log-variance.
        sigma: f64,
    },
    /// A CUDA C++ model (GPU only): see `particle/README.md`.
    Custom {
        /// The CUDA C++ source of the model.
        source: String,
        /// Where the source was read from (for messages).
        origin: std::path::PathBuf,
        /// State size.
        nx: usize,
        /// Measurement size.
        ny: usize,
    },
}

/// A model of the particle filter: a kind and (tracking and linear kinds) a prior.
#[derive(Clone, Debug, PartialEq)]
pub struct PfModel {
    /// Dynamics and measurement model.
    pub kind: PfKind,
    /// The prior of the tracking, linear and custom kinds (`None` for the stochastic
    /// volatility model, whose prior is its stationary law).
    pub prior: Option<GaussianPrior>,
}

/// An explicit linear-Gaussian model prepared for sampling and weighting.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearGaussian {
    /// State size.
    pub nx: usize,
    /// Measurement size.
    pub ny: usize,
    /// Row-major `F`, `H`; `sqrt_q` with `sqrt_q sqrt_q^T = Q`; `chol_r` the lower
    /// Cholesky factor of `R`.
    pub f: Vec<f64>,
    /// `nx x nx`, row-major.
    pub sqrt_q: Vec<f64>,
    /// `ny x nx`, row-major.
    pub h: Vec<f64>,
    /// `ny x ny`, row-major, lower triangular.
    pub chol_r: Vec<f64>,
    /// Transition offset, length `nx`.
    pub u: Vec<f64>,
    /// Measurement offset, length `ny`.
    pub d: Vec<f64>,
    /// `sum ln L_ii + ny ln(2 pi) / 2`.
    pub log_norm: f64,
}

fn row_major(m: &DMatrix<f64>) -> Vec<f64> {
    let mut v = Vec::with_capacity(m.nrows() * m.ncols());
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            v.push(m[(i, j)]);
        }
    }
    v
}

/// A square root of a symmetric positive semi-definite matrix: the Cholesky factor when
/// it exists, else `V sqrt(Lambda)` from the eigendecomposition.
fn sqrt_psd(field: &str, m: &DMatrix<f64>) -> Result<DMatrix<f64>> {
    if m.iter().any(|v| !v.is_finite()) {
        return Err(Error::model(field, "has a non-finite entry"));
    }
    if let Some(c) = m.clone().cholesky() {
        return Ok(c.l());
    }
    let e = m.clone().symmetric_eigen();
    let mut v = e.eigenvectors.clone();
    for (j, l) in e.eigenvalues.iter().enumerate() {
        if *l < -1e-9 * m.amax().max(1.0) {
            return Err(Error::model(field, "is not positive semi-definite"));
        }
        let s = l.max(0.0).sqrt();
        v.column_mut(j).scale_mut(s);
    }
    Ok(v)
}

impl LinearGaussian {
    /// Prepares a validated Kalman model.
    pub fn new(m: &Model) -> Result<Self> {
        m.validate()?;
        let chol_r =
            m.r.clone()
                .cholesky()
                .ok_or_else(|| Error::model("R", "is not positive definite"))?
                .l();
        let ny = m.ny();
        let log_norm = (0..ny).map(|i| chol_r[(i, i)].ln()).sum::<f64>() + 0.5 * ny as f64 * LN_2PI;
        Ok(LinearGaussian {
            nx: m.nx(),
            ny,
            f: row_major(&m.f),
            sqrt_q: row_major(&sqrt_psd("Q", &m.q)?),
            h: row_major(&m.h),
            chol_r: row_major(&chol_r),
            u: m.u.iter().copied().collect(),
            d: m.d.iter().copied().collect(),
            log_norm,
        })
    }
}

impl PfModel {
    /// The particle model of a Kalman model.
    pub fn linear(m: &Model) -> Result<PfModel> {
        Ok(PfModel {
            kind: PfKind::Linear(LinearGaussian::new(m)?),
            prior: Some(GaussianPrior::new(&m.prior.x0, &m.prior.p0)?),
        })
    }

    /// The kind's name as written in the model file.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            PfKind::Linear(_) => "linear-gaussian",
            PfKind::RangeOnly { .. } => "range-only",
            PfKind::BearingsOnly { .. } => "bearings-only",
            PfKind::RangeBearing { .. } => "range-bearing",
            PfKind::StochasticVolatility { .. } => "stochastic-volatility",
            PfKind::Custom { .. } => "custom",
        }
    }

    /// Checks that the model can run on the CPU (custom models are CUDA C++).
    pub fn check_cpu(&self) -> Result<()> {
        if let PfKind::Custom { origin, .. } = &self.kind {
            return Err(Error::Unsupported(format!(
                "{}: kind = \"custom\" is CUDA C++ and runs on a GPU only (on the CPU, implement the ParticleModel trait instead)",
                origin.display()
            )));
        }
        Ok(())
    }
}

/// A scratch vector of a particle's size: on the stack up to 16 values (every model the
/// CPU filter meets in practice), on the heap beyond, so a step allocates nothing.
struct Scratch<T> {
    stack: [T; 16],
    heap: Vec<T>,
}

impl<T: Real> Scratch<T> {
    #[inline(always)]
    fn new() -> Self {
        Scratch {
            stack: [T::zero(); 16],
            heap: Vec::new(),
        }
    }

    /// `n` values (zeros the first time).
    #[inline(always)]
    fn take(&mut self, n: usize) -> &mut [T] {
        if n <= 16 {
            &mut self.stack[..n]
        } else {
            self.heap.resize(n, T::zero());
            &mut self.heap
        }
    }

    /// `n` standard normal draws.
    #[inline(always)]
    fn draws(&mut self, n: usize, noise: &mut Normals<T>) -> &mut [T] {
        let v = self.take(n);
        for e in v.iter_mut() {
            *e = noise.draw();
        }
        v
    }
}

#[inline(always)]
fn sample_gaussian<T: Real>(p: &GaussianPrior, x: &mut [T], noise: &mut Normals<T>) {
    let nx = p.x0.len();
    let mut scratch = Scratch::new();
    let n = scratch.draws(nx, noise);
    for i in 0..nx {
        let mut acc = T::of(p.x0[i]);
        for j in 0..nx {
            let l = p.sqrt_p0[i * nx + j];
            if l != 0.0 {
                acc += T::of(l) * n[j];
            }
        }
        x[i] = acc;
    }
}

#[inline(always)]
fn gauss_ll<T: Real>(y: T, var: f64) -> T {
    T::of(-0.5 * (LN_2PI + var.ln())) - T::of(0.5 / var) * y * y
}

#[inline(always)]
fn wrap_angle<T: Real>(a: T) -> T {
    let pi = T::of(std::f64::consts::PI);
    let two_pi = T::of(std::f64::consts::TAU);
    let mut a = a;
    // At most one turn off: a is the difference of two angles in (-pi, pi].
    if a > pi {
        a -= two_pi;
    } else if a <= -pi {
        a += two_pi;
    }
    a
}

impl<T: Real> ParticleModel<T> for PfModel {
    fn nx(&self) -> usize {
        match &self.kind {
            PfKind::Linear(l) => l.nx,
            PfKind::RangeOnly { .. }
            | PfKind::BearingsOnly { .. }
            | PfKind::RangeBearing { .. } => 4,
            PfKind::StochasticVolatility { .. } => 1,
            PfKind::Custom { nx, .. } => *nx,
        }
    }

    fn ny(&self) -> usize {
        match &self.kind {
            PfKind::Linear(l) => l.ny,
            PfKind::RangeOnly { sensors, .. } | PfKind::BearingsOnly { sensors, .. } => {
                sensors.len()
            }
            PfKind::RangeBearing { .. } => 2,
            PfKind::StochasticVolatility { .. } => 1,
            PfKind::Custom { ny, .. } => *ny,
        }
    }

    fn sample_prior(&self, x: &mut [T], noise: &mut Normals<T>) {
        match (&self.kind, &self.prior) {
            (PfKind::StochasticVolatility { mu, phi, sigma }, _) => {
                let sd = sigma / (1.0 - phi * phi).sqrt();
                x[0] = T::of(*mu) + T::of(sd) * noise.draw();
            }
            (_, Some(p)) => sample_gaussian(p, x, noise),
            // Every kind but stochastic volatility is built with a prior.
            (_, None) => x.iter_mut().for_each(|v| *v = T::zero()),
        }
    }

    fn propagate(&self, _k: usize, x: &mut [T], noise: &mut Normals<T>) {
        match &self.kind {
            PfKind::Linear(l) => {
                let nx = l.nx;
                let (mut s_prev, mut s_n) = (Scratch::new(), Scratch::new());
                let prev = s_prev.take(nx);
                prev.copy_from_slice(x);
                let n = s_n.draws(nx, noise);
                for i in 0..nx {
                    let mut acc = T::of(l.u[i]);
                    for j in 0..nx {
                        let f = l.f[i * nx + j];
                        if f != 0.0 {
                            acc += T::of(f) * prev[j];
                        }
                        let s = l.sqrt_q[i * nx + j];
                        if s != 0.0 {
                            acc += T::of(s) * n[j];
                        }
                    }
                    x[i] = acc;
                }
            }
            PfKind::RangeOnly { cv, .. }
            | PfKind::BearingsOnly { cv, .. }
            | PfKind::RangeBearing { cv, .. } => cv.propagate(x, noise),
            PfKind::StochasticVolatility { mu, phi, sigma } => {
                let mu = T::of(*mu);
                x[0] = mu + T::of(*phi) * (x[0] - mu) + T::of(*sigma) * noise.draw();
            }
            PfKind::Custom { .. } => {}
        }
    }

    fn log_likelihood(&self, _k: usize, x: &[T], z: &[T]) -> T {
        match &self.kind {
            PfKind::Linear(l) => {
                let (nx, ny) = (l.nx, l.ny);
                // y = z - H x - d, then L^{-1} y by forward substitution.
                let mut scratch = Scratch::new();
                let y = scratch.take(ny);
                for i in 0..ny {
                    let mut acc = z[i] - T::of(l.d[i]);
                    for j in 0..nx {
                        let h = l.h[i * nx + j];
                        if h != 0.0 {
                            acc -= T::of(h) * x[j];
                        }
                    }
                    y[i] = acc;
                }
                let mut q = T::zero();
                for i in 0..ny {
                    let mut acc = y[i];
                    for j in 0..i {
                        acc -= T::of(l.chol_r[i * ny + j]) * y[j];
                    }
                    let v = acc / T::of(l.chol_r[i * ny + i]);
                    y[i] = v;
                    q += v * v;
                }
                -T::of(l.log_norm) - T::of(0.5) * q
            }
            PfKind::RangeOnly { sensors, r, .. } => {
                let mut ll = T::zero();
                for (s, &zs) in sensors.iter().zip(z) {
                    let dx = x[0] - T::of(s[0]);
                    let dy = x[2] - T::of(s[1]);
                    ll += gauss_ll(zs - (dx * dx + dy * dy).sqrt(), *r);
                }
                ll
            }
            PfKind::BearingsOnly { sensors, r, .. } => {
                let mut ll = T::zero();
                for (s, &zs) in sensors.iter().zip(z) {
                    let b = (x[2] - T::of(s[1])).atan2(x[0] - T::of(s[0]));
                    ll += gauss_ll(wrap_angle(zs - b), *r);
                }
                ll
            }
            PfKind::RangeBearing {
                radar,
                r_range,
                r_bearing,
                ..
            } => {
                let dx = x[0] - T::of(radar[0]);
                let dy = x[2] - T::of(radar[1]);
                gauss_ll(z[0] - (dx * dx + dy * dy).sqrt(), *r_range)
                    + gauss_ll(wrap_angle(z[1] - dy.atan2(dx)), *r_bearing)
            }
            PfKind::StochasticVolatility { .. } => {
                T::of(-0.5 * LN_2PI) - T::of(0.5) * (x[0] + z[0] * z[0] * (-x[0]).exp())
            }
            PfKind::Custom { .. } => T::nan(),
        }
    }

    fn advance_batch(&self, at: Batch, xs: &mut [T], z: Option<(&[T], &mut [T])>) {
        if super::batch::covers::<T>(self) {
            return super::batch::advance(self, at, None, xs, z);
        }
        advance_one_by_one(self, at, xs, z)
    }

    fn advance_batch_from(
        &self,
        at: Batch,
        src: &[T],
        anc: &[u32],
        xs: &mut [T],
        z: Option<(&[T], &mut [T])>,
    ) {
        if super::batch::covers::<T>(self) {
            return super::batch::advance(self, at, Some((src, anc)), xs, z);
        }
        super::resample::gather(src, ParticleModel::<T>::nx(self), anc, xs);
        advance_one_by_one(self, at, xs, z)
    }

    fn measure(&self, _k: usize, x: &[T], noise: &mut Normals<T>, z: &mut [T]) {
        match &self.kind {
            PfKind::Linear(l) => {
                let (nx, ny) = (l.nx, l.ny);
                let mut scratch = Scratch::new();
                let e = scratch.draws(ny, noise);
                for i in 0..ny {
                    let mut acc = T::of(l.d[i]);
                    for j in 0..nx {
                        acc += T::of(l.h[i * nx + j]) * x[j];
                    }
                    for j in 0..=i {
                        acc += T::of(l.chol_r[i * ny + j]) * e[j];
                    }
                    z[i] = acc;
                }
            }
            PfKind::RangeOnly { sensors, r, .. } => {
                for (s, zs) in sensors.iter().zip(z.iter_mut()) {
                    let dx = x[0] - T::of(s[0]);
                    let dy = x[2] - T::of(s[1]);
                    *zs = (dx * dx + dy * dy).sqrt() + T::of(r.sqrt()) * noise.draw();
                }
            }
            PfKind::BearingsOnly { sensors, r, .. } => {
                for (s, zs) in sensors.iter().zip(z.iter_mut()) {
                    let b = (x[2] - T::of(s[1])).atan2(x[0] - T::of(s[0]));
                    *zs = wrap_angle(b + T::of(r.sqrt()) * noise.draw());
                }
            }
            PfKind::RangeBearing {
                radar,
                r_range,
                r_bearing,
                ..
            } => {
                let dx = x[0] - T::of(radar[0]);
                let dy = x[2] - T::of(radar[1]);
                z[0] = (dx * dx + dy * dy).sqrt() + T::of(r_range.sqrt()) * noise.draw();
                z[1] = wrap_angle(dy.atan2(dx) + T::of(r_bearing.sqrt()) * noise.draw());
            }
            PfKind::StochasticVolatility { .. } => {
                z[0] = (T::of(0.5) * x[0]).exp() * noise.draw();
            }
            PfKind::Custom { .. } => z.iter_mut().for_each(|v| *v = T::nan()),
        }
    }
}
