//! Nonlinear Gaussian filters and smoothers: the extended (EKF), iterated extended
//! (IEKF), unscented (UKF) and cubature (CKF) Kalman filters, their RTS smoothers and
//! iterated smoothers, and the interacting multiple model filter (IMM), batched over
//! many tracks (one track per rayon task).
//!
//! Models ([`NonlinearModel`]) have additive Gaussian noise, `x_k = f(x_{k-1}) + w_k`,
//! `z_k = h(x_k) + v_k`, with `f` and `h` written in the expression language of
//! [`expr`] (compiled to a tape, exact Jacobians by symbolic differentiation) or built in
//! ([`models`]: linear, coordinated turn, the particle filter's tracking kinds). Model
//! files: `load_nonlinear` (feature `io`; the forms are documented in `file.rs`).
//!
//! kestrel's time convention holds: the prior is the state at step 0 before the step-0
//! measurement; step 0 updates it, each later step predicts then updates; a measurement
//! with a NaN is missing (that step only predicts, log-likelihood 0). The CPU path
//! computes in f64 whatever the precision of the measurements, and converts the
//! outputs. On a CUDA [`Device`] the EKF, IEKF, UKF and CKF filters of one model and the
//! IMM of them run batched, one thread a track, in the measurements' precision
//! ([`cuda`]), and so do the smoothers of one model: the RTS smoothers (the filter's
//! outputs smoothed in place on the device), the iterated smoothers (every pass on the
//! device, one thread a track) and the parallel iterated smoother.
//!
//! For trackers, [`TrackBank`] is the per-step form: every live track of one model (or
//! IMM) in a slot, predicted, linearised for the gate and updated scan by scan.
//!
//! Filter options ([`NonlinearOptions`]) and their defaults: `kind` EKF; the UKF's
//! `alpha = 1`, `beta = 0`, `kappa = 3 - n` (Sarkka 2013's choice, the same as Julier's
//! original unscented transform: `n + lambda = 3`); `iterations = 10` (IEKF
//! Gauss-Newton iterations of each update, and the passes of the iterated smoothers).

/// `$f::<N, D>(args)` with the state size `$n` and the output size `$d` known to the
/// compiler where they are common sizes (loops unrolled, sums on the stack), else
/// `$f::<0, 0>`, which reads the sizes at run time: the same operations in the same order
/// either way, so the same bits.
macro_rules! with_sizes {
    ($n:expr, $d:expr, $f:ident $args:tt) => {
        with_sizes!(@ ($n, $d), $f $args;
            (2, 1), (2, 2), (3, 1), (3, 2), (3, 3), (4, 1), (4, 2), (4, 3), (4, 4),
            (5, 1), (5, 2), (5, 3), (5, 5), (6, 1), (6, 2), (6, 3), (6, 6))
    };
    (@ $nd:expr, $f:ident $args:tt; $(($sn:literal, $sd:literal)),*) => {
        match $nd {
            $(($sn, $sd) => $f::<$sn, $sd> $args,)*
            _ => $f::<0, 0> $args,
        }
    };
}

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod expr;
#[cfg(feature = "io")]
mod file;
pub mod models;
pub mod sigma;

mod bank;
mod ekf;
mod imm;
mod iterated;
mod parallel_iterated;
pub use parallel_iterated::linearised_records;
mod sim;
mod smoother;

pub use bank::TrackBank;
pub use ekf::{wrap, wrap_angles};
#[cfg(feature = "io")]
pub use file::{
    is_gaussian_only_text, is_nonlinear_text, load_nonlinear, nonlinear_from_toml, FilterChoice,
    NonlinearFile, KINDS,
};
pub use models::{Measure, NonlinearModel, TurnRate};
pub use sim::simulate;

use crate::data::{Estimates, Measurements};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::Prior;
use ekf::{Fail, Work};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use sigma::SigmaRule;

/// The Gaussian filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FilterKind {
    /// The extended Kalman filter.
    #[default]
    Ekf,
    /// The unscented Kalman filter (Wan & van der Merwe's scaled points).
    Ukf,
    /// The cubature Kalman filter.
    Ckf,
    /// The iterated extended Kalman filter (Gauss-Newton iterations of each update).
    Iekf,
}

impl FilterKind {
    /// Every kind's name, for messages.
    pub const NAMES: &'static str = "ekf, ukf, ckf or iekf";

    /// The name as written in model files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::Ekf => "ekf",
            FilterKind::Ukf => "ukf",
            FilterKind::Ckf => "ckf",
            FilterKind::Iekf => "iekf",
        }
    }

    /// From its name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ekf" => FilterKind::Ekf,
            "ukf" => FilterKind::Ukf,
            "ckf" => FilterKind::Ckf,
            "iekf" => FilterKind::Iekf,
            _ => return None,
        })
    }
}

/// Options of the nonlinear filters (see the module documentation for the defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct NonlinearOptions {
    /// Which filter.
    pub kind: FilterKind,
    /// UKF spread (`alpha > 0`).
    pub alpha: f64,
    /// UKF prior-knowledge term in `W0c`.
    pub beta: f64,
    /// UKF secondary scaling; `None`: `3 - n`.
    pub kappa: Option<f64>,
    /// IEKF iterations of each update, and passes of the iterated smoothers (>= 1).
    pub iterations: usize,
    /// Every step's estimates, or (filters of one model) only each track's last state,
    /// its `loglik` the track's total (online tracking; the GPU then writes nothing else).
    pub keep: crate::Keep,
}

impl Default for NonlinearOptions {
    fn default() -> Self {
        NonlinearOptions {
            kind: FilterKind::Ekf,
            alpha: 1.0,
            beta: 0.0,
            kappa: None,
            iterations: 10,
            keep: crate::Keep::All,
        }
    }
}

setters!(NonlinearOptions {
    with_kind(kind: FilterKind, "Sets the filter kind."),
    with_alpha(alpha: f64, "Sets the UKF's alpha."),
    with_beta(beta: f64, "Sets the UKF's beta."),
    with_kappa(kappa: Option<f64>, "Sets the UKF's kappa (`None`: 3 - n)."),
    with_iterations(iterations: usize, "Sets the iterations (IEKF, iterated smoothers)."),
    with_keep(keep: crate::Keep, "Sets what is kept: every step, or each track's last state."),
});

/// How to smooth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NonlinearSmoother {
    /// The RTS smoother with the filter's linearisation.
    #[default]
    Rts,
    /// Iterated: the iterated extended RTS smoother (ekf, iekf) or iterated posterior
    /// linearisation (ukf, ckf), with [`NonlinearOptions::iterations`] passes.
    Iterated,
    /// The same passes with each pass's linearised filter and RTS smoother run by the
    /// parallel scan, on the CPU or a GPU (`parallel_iterated.rs`).
    ParallelIterated,
}

/// What to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonlinearJob {
    /// Filter.
    Filter,
    /// Filter and smooth.
    Smooth(NonlinearSmoother),
}

/// An IMM model: modes of the same state size, `transition[i][j] = P(j at k | i at
/// k-1)` (rows sum to 1), `initial` mode probabilities, one prior for all modes.
#[derive(Clone, Debug)]
pub struct ImmModel {
    pub(crate) modes: Vec<NonlinearModel>,
    pub(crate) transition: DMatrix<f64>,
    pub(crate) initial: DVector<f64>,
    pub(crate) prior: Prior,
}

impl ImmModel {
    /// Checks sizes and probabilities; the prior is `prior` (the modes' own are not used).
    pub fn new(
        modes: Vec<NonlinearModel>,
        transition: DMatrix<f64>,
        initial: DVector<f64>,
        prior: Prior,
    ) -> Result<Self> {
        let r = modes.len();
        if r == 0 {
            return Err(Error::model("imm.mode", "no mode"));
        }
        let (nx, ny) = (modes[0].nx(), modes[0].ny());
        for (j, m) in modes.iter().enumerate() {
            if m.nx() != nx || m.ny() != ny {
                return Err(Error::model(
                    format!("imm.mode[{j}]"),
                    format!(
                        "has nx = {}, ny = {}; mode 0 has nx = {nx}, ny = {ny} (every mode must have the same sizes)",
                        m.nx(),
                        m.ny()
                    ),
                ));
            }
        }
        if transition.nrows() != r || transition.ncols() != r {
            return Err(Error::model(
                "transition",
                format!(
                    "must be {r} x {r} (one row and column per mode), got {} x {}",
                    transition.nrows(),
                    transition.ncols()
                ),
            ));
        }
        let stochastic = |v: &[f64]| {
            v.iter().all(|x| x.is_finite() && *x >= 0.0)
                && (v.iter().sum::<f64>() - 1.0).abs() < 1e-9
        };
        for i in 0..r {
            let row: Vec<f64> = transition.row(i).iter().copied().collect();
            if !stochastic(&row) {
                return Err(Error::model(
                    "transition",
                    format!("row {i} must be probabilities summing to 1, got {row:?}"),
                ));
            }
        }
        if initial.len() != r || !stochastic(initial.as_slice()) {
            return Err(Error::model(
                "initial",
                format!(
                    "must be {r} probabilities summing to 1, got {:?}",
                    initial.as_slice()
                ),
            ));
        }
        let modes = modes
            .into_iter()
            .map(|m| m.with_prior(prior.clone()))
            .collect::<Result<Vec<_>>>()?;
        Ok(ImmModel {
            modes,
            transition,
            initial,
            prior,
        })
    }

    /// The modes.
    pub fn modes(&self) -> &[NonlinearModel] {
        &self.modes
    }

    /// Number of modes.
    pub fn len(&self) -> usize {
        self.modes.len()
    }

    /// `transition[i][j] = P(mode j at k | mode i at k-1)`.
    pub fn transition(&self) -> &DMatrix<f64> {
        &self.transition
    }

    /// The mode probabilities at step 0.
    pub fn initial(&self) -> &DVector<f64> {
        &self.initial
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        self.modes.is_empty()
    }
}

/// What the family estimates: one model, or an IMM over several.
// One value per run: the size difference of the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum NonlinearProblem {
    /// One model.
    Single(NonlinearModel),
    /// The interacting multiple model filter.
    Imm(ImmModel),
}

impl NonlinearProblem {
    /// State size.
    pub fn nx(&self) -> usize {
        match self {
            NonlinearProblem::Single(m) => m.nx(),
            NonlinearProblem::Imm(i) => i.modes[0].nx(),
        }
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        match self {
            NonlinearProblem::Single(m) => m.ny(),
            NonlinearProblem::Imm(i) => i.modes[0].ny(),
        }
    }
}

/// The results: filtered moments with per-step log-likelihoods, the smoothed moments
/// when smoothing, and the IMM's mode probabilities `[tracks][steps][r]`.
#[derive(Clone, Debug)]
pub struct NonlinearOutput<T> {
    /// Filtered moments and log-likelihoods (for the iterated smoothers: the last pass's).
    pub filtered: Estimates<T>,
    /// Smoothed moments (without log-likelihoods).
    pub smoothed: Option<Estimates<T>>,
    /// IMM mode probabilities, `[tracks][steps][r]`.
    pub mode_probs: Option<Vec<T>>,
}

/// One filter's predict and update, dispatched by kind.
enum Step<'a> {
    Ekf,
    Iekf(usize),
    Sigma(&'a SigmaRule),
}

impl Step<'_> {
    /// Predicts `(m, P)` one step; returns `D = Cov(x_{k-1}, x_k)`.
    fn predict(
        &self,
        model: &NonlinearModel,
        m: &mut DVector<f64>,
        p: &mut DMatrix<f64>,
        w: &mut Work,
    ) -> Result<DMatrix<f64>, Fail> {
        match self {
            Step::Ekf | Step::Iekf(_) => Ok(ekf::predict(model, m, p, w)),
            Step::Sigma(rule) => sigma::predict(rule, model, m, p, w),
        }
    }

    /// Predicts `(m, P)` one step, without `D` (the filters' prediction).
    fn advance(
        &self,
        model: &NonlinearModel,
        m: &mut DVector<f64>,
        p: &mut DMatrix<f64>,
        w: &mut Work,
    ) -> Result<(), Fail> {
        match self {
            Step::Ekf | Step::Iekf(_) => {
                ekf::predict(model, m, p, w);
                Ok(())
            }
            Step::Sigma(rule) => sigma::advance(rule, model, m, p, w, false),
        }
    }

    /// Updates `(m, P)` with `z`; returns the log-likelihood.
    fn update(
        &self,
        model: &NonlinearModel,
        z: &[f64],
        m: &mut DVector<f64>,
        p: &mut DMatrix<f64>,
        w: &mut Work,
    ) -> Result<f64, Fail> {
        match self {
            Step::Ekf => ekf::update(model, z, m, p, w),
            Step::Iekf(n) => iterated::iekf_update(model, z, m, p, *n, w),
            Step::Sigma(rule) => sigma::update(rule, model, z, m, p, w),
        }
    }
}

/// The filter of one track: `z [T][ny]` into `mean [T][nx]`, `cov [T][nx][nx]`, `ll [T]`.
fn filter_track(
    step: &Step<'_>,
    model: &NonlinearModel,
    z: &[f64],
    mean: &mut [f64],
    cov: &mut [f64],
    ll: &mut [f64],
    w: &mut Work,
) -> Result<(), (usize, Fail)> {
    let (nx, ny) = (model.nx(), model.ny());
    let n2 = nx * nx;
    let mut m = model.prior.x0.clone();
    let mut p = model.prior.p0.clone();
    for k in 0..ll.len() {
        if k > 0 {
            step.advance(model, &mut m, &mut p, w).map_err(|e| (k, e))?;
        }
        let zk = &z[k * ny..(k + 1) * ny];
        ll[k] = if zk.iter().any(|v| v.is_nan()) {
            0.0
        } else {
            step.update(model, zk, &mut m, &mut p, w)
                .map_err(|e| (k, e))?
        };
        mean[k * nx..(k + 1) * nx].copy_from_slice(m.as_slice());
        cov[k * n2..(k + 1) * n2].copy_from_slice(p.as_slice());
    }
    Ok(())
}

/// Each track's last estimate, its log-likelihood the track's total.
fn last_only<T: Real>(e: &Estimates<T>) -> Result<Estimates<T>> {
    let (b, t, nx) = (e.tracks, e.steps, e.nx);
    let (n2, (m, c)) = (nx * nx, (e.mean(), e.cov()));
    let mean = (0..b)
        .flat_map(|i| m[(i * t + t - 1) * nx..(i * t + t) * nx].to_vec())
        .collect();
    let cov = (0..b)
        .flat_map(|i| c[(i * t + t - 1) * n2..(i * t + t) * n2].to_vec())
        .collect();
    let ll = e.loglik().map(|l| {
        (0..b)
            .map(|i| T::of(l[i * t..(i + 1) * t].iter().map(|v| v.to_f64()).sum()))
            .collect()
    });
    Estimates::new(b, 1, nx, mean, cov, ll)
}

/// The GPU path: the EKF, IEKF, UKF and CKF filters of one model or an IMM, their RTS
/// smoothers and iterated smoothers (one model).
fn estimate_gpu<T: Real>(
    device: Device,
    problem: &NonlinearProblem,
    z: &Measurements<T>,
    opts: &NonlinearOptions,
    job: NonlinearJob,
    rule: Option<&SigmaRule>,
) -> Result<NonlinearOutput<T>> {
    #[cfg(feature = "cuda")]
    {
        let ordinal = match device {
            Device::Cuda(n) => n,
            _ => 0,
        };
        let last = opts.keep == crate::Keep::Last;
        let gjob = match (problem, job) {
            (NonlinearProblem::Single(m), NonlinearJob::Filter) => cuda::Job::Filter(m, last),
            (NonlinearProblem::Single(m), NonlinearJob::Smooth(NonlinearSmoother::Iterated)) => {
                cuda::Job::Iterated(m, opts.iterations)
            }
            (NonlinearProblem::Single(m), NonlinearJob::Smooth(_)) => cuda::Job::Smooth(m),
            (NonlinearProblem::Imm(i), NonlinearJob::Filter) => cuda::Job::Imm(i),
            (NonlinearProblem::Imm(_), NonlinearJob::Smooth(_)) => {
                return Err(Error::Unsupported(
                    "smoothing an IMM model is not available (kestrel filter runs the IMM filter)"
                        .into(),
                ))
            }
        };
        let iterations = if opts.kind == FilterKind::Iekf {
            opts.iterations
        } else {
            1
        };
        let out = cuda::filter(ordinal, gjob, rule, iterations, z)?;
        if let Some((track, step, what)) = out.fail {
            return Err(Error::NotPositiveDefinite { track, step, what });
        }
        let (b, nx) = (z.tracks(), problem.nx());
        let t = if last { 1 } else { z.steps() };
        let filtered = Estimates::new(b, t, nx, out.mean, out.cov, Some(out.ll))?;
        if let Some(i) = filtered.mean().iter().position(|v| !v.is_finite_value()) {
            return Err(Error::NonFinite {
                what: "filtered mean".into(),
                track: i / (t * nx),
                step: i / nx % t,
                msg: "not finite (the model's functions left their domain?)".into(),
            });
        }
        let smoothed = if smoothing_job(job) {
            let s = Estimates::new(b, t, nx, out.smean, out.scov, None)?;
            if let Some(i) = s.mean().iter().position(|v| !v.is_finite_value()) {
                return Err(Error::NonFinite {
                    what: "smoothed mean".into(),
                    track: i / (t * nx),
                    step: i / nx % t,
                    msg: "not finite (the model's functions left their domain?)".into(),
                });
            }
            Some(s)
        } else {
            None
        };
        let imm = matches!(problem, NonlinearProblem::Imm(_));
        Ok(NonlinearOutput {
            filtered,
            smoothed,
            mode_probs: imm.then_some(out.probs),
        })
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (device, problem, z, opts, job, rule);
        Err(crate::cuda::unsupported("the nonlinear filters"))
    }
}

fn rule_for(opts: &NonlinearOptions, nx: usize) -> Result<Option<SigmaRule>> {
    Ok(match opts.kind {
        FilterKind::Ukf => Some(
            SigmaRule::unscented(
                nx,
                opts.alpha,
                opts.beta,
                opts.kappa.unwrap_or(3.0 - nx as f64),
            )
            .map_err(|m| Error::model("filter", m))?,
        ),
        FilterKind::Ckf => Some(SigmaRule::cubature(nx)),
        _ => None,
    })
}

/// The per-step form of `opts`'s filter, with `rule` from [`rule_for`].
fn step_of<'a>(opts: &NonlinearOptions, rule: Option<&'a SigmaRule>) -> Step<'a> {
    match (opts.kind, rule) {
        (FilterKind::Ekf, _) => Step::Ekf,
        (FilterKind::Iekf, _) => Step::Iekf(opts.iterations),
        (_, Some(r)) => Step::Sigma(r),
        (_, None) => unreachable!("rule_for makes a rule for ukf and ckf"),
    }
}

fn smoothing_job(job: NonlinearJob) -> bool {
    matches!(job, NonlinearJob::Smooth(_))
}

/// Filters (and smooths) every track of `z` on `device`: the family's one entry point.
///
/// ```
/// use kestrel::nonlinear::{estimate_on, NonlinearJob, NonlinearModel, NonlinearOptions,
///     NonlinearProblem, FilterKind};
/// use kestrel::model::Prior;
/// use kestrel::nalgebra::{DMatrix, DVector};
/// # fn main() -> kestrel::Result<()> {
/// // A pendulum (Sarkka 2013, example 5.1): angle and rate, sin(angle) measured.
/// let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
/// let model = NonlinearModel::from_expressions(
///     &s(&["a", "w"]),
///     &s(&["a + w * dt", "w - g * sin(a) * dt"]),
///     &s(&["sin(a)"]),
///     DMatrix::from_row_slice(2, 2, &[1e-6 / 3.0, 5e-5, 5e-5, 0.01]),
///     DMatrix::from_element(1, 1, 0.1),
///     &[("dt".into(), 0.01), ("g".into(), 9.81)],
///     &[],
///     Prior { x0: DVector::from_vec(vec![1.5, 0.0]), p0: DMatrix::identity(2, 2) * 0.1 },
/// )?;
/// let z = kestrel::Measurements::new(1, 3, 1, vec![0.99, 0.98, f64::NAN])?;
/// let opts = NonlinearOptions::default().with_kind(FilterKind::Ukf);
/// let out = estimate_on(kestrel::Device::Cpu, &NonlinearProblem::Single(model), &z, &opts,
///     NonlinearJob::Filter)?;
/// assert_eq!(out.filtered.mean().len(), 6);
/// # Ok(())
/// # }
/// ```
pub fn estimate_on<T: Real>(
    device: Device,
    problem: &NonlinearProblem,
    z: &Measurements<T>,
    opts: &NonlinearOptions,
    job: NonlinearJob,
) -> Result<NonlinearOutput<T>> {
    let (nx, ny) = (problem.nx(), problem.ny());
    if z.ny() != ny {
        return Err(Error::input(format!(
            "the measurements have {} components, the model measures {ny}",
            z.ny()
        )));
    }
    if opts.iterations == 0 {
        return Err(Error::model("iterations", "must be at least 1"));
    }
    if !(opts.alpha > 0.0) || !opts.beta.is_finite() || opts.kappa.is_some_and(|k| !k.is_finite()) {
        return Err(Error::model(
            "filter",
            format!(
                "alpha must be positive and beta, kappa finite (alpha = {}, beta = {}, kappa = {:?})",
                opts.alpha, opts.beta, opts.kappa
            ),
        ));
    }
    let (b, t) = (z.tracks(), z.steps());
    if t == 0 {
        return Err(Error::input("no steps to filter"));
    }
    use crate::limits::{check, Size};
    let copies = if smoothing_job(job) { 2 } else { 1 };
    check(
        "the nonlinear filter's estimates",
        &[
            Size("copies", copies),
            Size("tracks", b),
            Size("steps", t),
            Size("(nx + 1)^2", (nx + 1) * (nx + 1)),
        ],
        8,
    )?;
    let rule = rule_for(opts, nx)?;
    if opts.keep == crate::Keep::Last
        && (smoothing_job(job) || matches!(problem, NonlinearProblem::Imm(_)))
    {
        return Err(Error::input(
            "keeping only the last state is for the filters of one model (not the smoothers or the IMM)",
        ));
    }
    let step = step_of(opts, rule.as_ref());
    if job == NonlinearJob::Smooth(NonlinearSmoother::ParallelIterated) {
        let NonlinearProblem::Single(model) = problem else {
            return Err(Error::Unsupported(
                "smoothing an IMM model is not available (kestrel filter runs the IMM filter)"
                    .into(),
            ));
        };
        let (filtered, smoothed) = parallel_iterated::smooth(device, &step, model, z, opts)?;
        if let Some(i) = smoothed.mean().iter().position(|v| !v.is_finite_value()) {
            return Err(Error::NonFinite {
                what: "smoothed mean".into(),
                track: i / (z.steps() * nx),
                step: i / nx % z.steps(),
                msg: "not finite (the model's functions left their domain?)".into(),
            });
        }
        return Ok(NonlinearOutput {
            filtered,
            smoothed: Some(smoothed),
            mode_probs: None,
        });
    }
    if device != Device::Cpu {
        return estimate_gpu(device, problem, z, opts, job, rule.as_ref());
    }
    let zf: Vec<f64> = z.data().iter().map(|v| v.to_f64()).collect();
    let smoothing = smoothing_job(job);
    let r = match problem {
        NonlinearProblem::Imm(i) => i.len(),
        NonlinearProblem::Single(_) => 0,
    };
    if smoothing && r > 0 {
        return Err(Error::Unsupported(
            "smoothing an IMM model is not available (kestrel filter runs the IMM filter)".into(),
        ));
    }
    let mut fmean = vec![0.0; b * t * nx];
    let mut fcov = vec![0.0; b * t * nx * nx];
    let mut ll = vec![0.0; b * t];
    let mut smean = vec![0.0; if smoothing { b * t * nx } else { 0 }];
    let mut scov = vec![0.0; if smoothing { b * t * nx * nx } else { 0 }];
    let mut probs = vec![0.0; b * t * r];
    let first_error = std::sync::Mutex::new(None::<(usize, usize, Fail)>);
    let per = |track: usize,
               zt: &[f64],
               fm: &mut [f64],
               fc: &mut [f64],
               l: &mut [f64],
               sm: &mut [f64],
               sc: &mut [f64],
               pr: &mut [f64]| {
        let mut w = Work::default();
        let res = match (problem, job) {
            (NonlinearProblem::Imm(imm), _) => {
                imm::imm_track(&step, imm, zt, fm, fc, l, pr, &mut w)
            }
            (NonlinearProblem::Single(m), NonlinearJob::Filter) => {
                filter_track(&step, m, zt, fm, fc, l, &mut w)
            }
            (NonlinearProblem::Single(m), NonlinearJob::Smooth(NonlinearSmoother::Rts)) => {
                filter_track(&step, m, zt, fm, fc, l, &mut w)
                    .and_then(|()| smoother::rts_track(&step, m, fm, fc, sm, sc, &mut w))
            }
            (
                NonlinearProblem::Single(m),
                NonlinearJob::Smooth(
                    NonlinearSmoother::Iterated | NonlinearSmoother::ParallelIterated,
                ),
            ) => iterated::iterated_smooth_track(
                &step,
                m,
                zt,
                opts.iterations,
                fm,
                fc,
                l,
                sm,
                sc,
                &mut w,
            ),
        };
        if let Err((k, what)) = res {
            let mut e = first_error.lock().unwrap_or_else(|p| p.into_inner());
            if e.is_none_or(|(tr, _, _)| track < tr) {
                *e = Some((track, k, what));
            }
        }
    };
    let (snx, snn) = if smoothing {
        (t * nx, t * nx * nx)
    } else {
        (1, 1)
    };
    let smean_chunks: Vec<&mut [f64]> = if smoothing {
        smean.chunks_mut(snx).collect()
    } else {
        (0..b).map(|_| &mut [][..]).collect()
    };
    let scov_chunks: Vec<&mut [f64]> = if smoothing {
        scov.chunks_mut(snn).collect()
    } else {
        (0..b).map(|_| &mut [][..]).collect()
    };
    let prob_chunks: Vec<&mut [f64]> = if r > 0 {
        probs.chunks_mut(t * r).collect()
    } else {
        (0..b).map(|_| &mut [][..]).collect()
    };
    fmean
        .par_chunks_mut(t * nx)
        .zip(fcov.par_chunks_mut(t * nx * nx))
        .zip(ll.par_chunks_mut(t))
        .zip(smean_chunks.into_par_iter())
        .zip(scov_chunks.into_par_iter())
        .zip(prob_chunks.into_par_iter())
        .enumerate()
        .for_each(|(track, (((((fm, fc), l), sm), sc), pr))| {
            if crate::cancel::requested() {
                return;
            }
            per(
                track,
                &zf[track * t * ny..(track + 1) * t * ny],
                fm,
                fc,
                l,
                sm,
                sc,
                pr,
            )
        });
    crate::cancel::check()?;
    if let Some((track, step, what)) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(Error::NotPositiveDefinite { track, step, what });
    }
    let cast = |v: Vec<f64>| -> Vec<T> { v.into_iter().map(T::of).collect() };
    let filtered = Estimates::new(b, t, nx, cast(fmean), cast(fcov), Some(cast(ll)))?;
    if let Some(i) = filtered.mean().iter().position(|v| !v.is_finite_value()) {
        return Err(Error::NonFinite {
            what: "filtered mean".into(),
            track: i / (t * nx),
            step: i / nx % t,
            msg: "not finite (the model's functions left their domain?)".into(),
        });
    }
    let smoothed = if smoothing {
        Some(Estimates::new(b, t, nx, cast(smean), cast(scov), None)?)
    } else {
        None
    };
    let filtered = match opts.keep {
        crate::Keep::All => filtered,
        crate::Keep::Last => last_only(&filtered)?,
    };
    Ok(NonlinearOutput {
        filtered,
        smoothed,
        mode_probs: (r > 0).then(|| cast(probs)),
    })
}
