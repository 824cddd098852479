//! Linear-Gaussian state-space models.
//!
//! ```text
//! x_{k+1} = F x_k + u + w_k,   w_k ~ N(0, Q)
//! z_k     = H x_k + d + v_k,   v_k ~ N(0, R)
//! x_0 ~ N(x0, P0)   (the state at step 0, before the step-0 measurement)
//! ```
//!
//! [`Model`] is time-invariant; [`TimeVaryingModel`] carries per-step matrices. Both
//! implement [`StateSpace`], which is what the recursions read. Matrices are stored in
//! `f64`; the recursions convert them once to the precision they run in.

mod builders;
#[cfg(feature = "io")]
pub mod family;
#[cfg(feature = "io")]
mod file;
mod linear;
mod stationary;
mod validate;
#[cfg(feature = "io")]
mod varying_file;

pub use builders::{ar, constant_acceleration, constant_velocity, random_walk, Kinematics};
#[cfg(feature = "io")]
pub use file::{
    linear_model_from_toml, load_linear_model, load_model, model_from_str, model_from_toml,
    model_to_toml, save_model,
};
pub use linear::LinearModel;
pub use stationary::{lyapunov, spectral_radius, stationary};
pub use validate::{check_psd, check_spd};
#[cfg(feature = "io")]
pub use varying_file::{is_time_varying_text, save_time_varying_model};

use crate::error::{Error, Result};
use nalgebra::{DMatrix, DVector};

/// The Gaussian prior on the state at step 0, before the step-0 measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Prior {
    /// Mean of the state at step 0, length `nx`.
    pub x0: DVector<f64>,
    /// Covariance of the state at step 0, `nx x nx`, symmetric positive semi-definite.
    pub p0: DMatrix<f64>,
}

/// A time-invariant linear-Gaussian model.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// State transition, `nx x nx`.
    pub(crate) f: DMatrix<f64>,
    /// Process noise covariance, `nx x nx`, symmetric positive semi-definite.
    pub(crate) q: DMatrix<f64>,
    /// Measurement matrix, `ny x nx`.
    pub(crate) h: DMatrix<f64>,
    /// Measurement noise covariance, `ny x ny`, symmetric positive definite.
    pub(crate) r: DMatrix<f64>,
    /// Transition offset (control input), length `nx`.
    pub(crate) u: DVector<f64>,
    /// Measurement offset, length `ny`.
    pub(crate) d: DVector<f64>,
    /// Prior on the state at step 0.
    pub(crate) prior: Prior,
}

/// Checks that measurements of `ny` components over `steps` steps fit `model`: the sizes
/// agree and a time-varying model has matrices for every step (the one message of every
/// family's check).
pub(crate) fn check_fits<M: StateSpace + ?Sized>(model: &M, ny: usize, steps: usize) -> Result<()> {
    if ny != model.ny() {
        return Err(Error::input(format!(
            "measurements have {ny} components, the model measures {}",
            model.ny()
        )));
    }
    if let Some(n) = model.steps_covered() {
        if n < steps {
            return Err(Error::input(format!(
                "the time-varying model has matrices for {n} steps, the measurements have {steps}"
            )));
        }
    }
    Ok(())
}

/// What a recursion needs from a model: the matrices of each step and the prior.
///
/// `transition(k)` gives `(F, u, Q)` of the prediction *into* step `k` (from `k-1`), for
/// `k >= 1`; `observation(k)` gives `(H, d, R)` of the measurement at step `k`.
pub trait StateSpace: Sync {
    /// State size.
    fn nx(&self) -> usize;
    /// Measurement size.
    fn ny(&self) -> usize;
    /// `(F, u, Q)` of the prediction from step `k - 1` into step `k` (`k >= 1`).
    fn transition(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>);
    /// `(H, d, R)` of the measurement at step `k`.
    fn observation(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>);
    /// The prior on the state at step 0, before the step-0 measurement.
    fn prior(&self) -> &Prior;
    /// How many steps the model has matrices for (`None`: any number).
    fn steps_covered(&self) -> Option<usize> {
        None
    }
    /// The time-invariant model, when this is one (enables the fast paths).
    fn as_invariant(&self) -> Option<&Model> {
        None
    }
}

impl Model {
    /// Builds a model with zero offsets and checks it.
    pub fn new(
        f: DMatrix<f64>,
        q: DMatrix<f64>,
        h: DMatrix<f64>,
        r: DMatrix<f64>,
        x0: DVector<f64>,
        p0: DMatrix<f64>,
    ) -> Result<Self> {
        let nx = f.nrows();
        let ny = h.nrows();
        let m = Model {
            f,
            q,
            h,
            r,
            u: DVector::zeros(nx),
            d: DVector::zeros(ny),
            prior: Prior { x0, p0 },
        };
        m.validate()?;
        Ok(m)
    }

    /// Builds a model from row-major slices: `f`, `q` (`nx x nx`), `h` (`ny x nx`), `r`
    /// (`ny x ny`), `x0` (`nx`), `p0` (`nx x nx`); zero offsets. Lengths and the model are
    /// checked.
    ///
    /// ```
    /// // A scalar random walk observed in noise.
    /// let m = kestrel::Model::from_row_slices(1, 1, &[1.0], &[0.1], &[1.0], &[2.0], &[0.0], &[10.0])?;
    /// assert_eq!(m.r()[(0, 0)], 2.0);
    /// # Ok::<(), kestrel::Error>(())
    /// ```
    pub fn from_row_slices(
        nx: usize,
        ny: usize,
        f: &[f64],
        q: &[f64],
        h: &[f64],
        r: &[f64],
        x0: &[f64],
        p0: &[f64],
    ) -> Result<Self> {
        let mat = |field: &str, v: &[f64], rows: usize, cols: usize| {
            if rows.checked_mul(cols) != Some(v.len()) {
                return Err(Error::model(
                    field,
                    format!("{} values given, {rows} x {cols} expected", v.len()),
                ));
            }
            Ok(DMatrix::from_row_slice(rows, cols, v))
        };
        if x0.len() != nx {
            return Err(Error::model(
                "x0",
                format!("{} values given, {nx} expected", x0.len()),
            ));
        }
        Model::new(
            mat("F", f, nx, nx)?,
            mat("Q", q, nx, nx)?,
            mat("H", h, ny, nx)?,
            mat("R", r, ny, ny)?,
            DVector::from_column_slice(x0),
            mat("P0", p0, nx, nx)?,
        )
    }

    /// State transition `F`, `nx x nx`.
    pub fn f(&self) -> &DMatrix<f64> {
        &self.f
    }

    /// Process noise covariance `Q`, `nx x nx`.
    pub fn q(&self) -> &DMatrix<f64> {
        &self.q
    }

    /// Measurement matrix `H`, `ny x nx`.
    pub fn h(&self) -> &DMatrix<f64> {
        &self.h
    }

    /// Measurement noise covariance `R`, `ny x ny`.
    pub fn r(&self) -> &DMatrix<f64> {
        &self.r
    }

    /// Transition offset `u`, length `nx`.
    pub fn u(&self) -> &DVector<f64> {
        &self.u
    }

    /// Measurement offset `d`, length `ny`.
    pub fn d(&self) -> &DVector<f64> {
        &self.d
    }

    /// The prior on the state at step 0.
    pub fn prior(&self) -> &Prior {
        &self.prior
    }

    /// Replaces the measurement noise covariance (checked): per-sensor noise without
    /// rebuilding the model.
    pub fn with_r(mut self, r: DMatrix<f64>) -> Result<Self> {
        self.r = r;
        self.validate()?;
        Ok(self)
    }

    /// Replaces the process noise covariance (checked).
    pub fn with_q(mut self, q: DMatrix<f64>) -> Result<Self> {
        self.q = q;
        self.validate()?;
        Ok(self)
    }

    /// Replaces the offsets `u` and `d` (checked).
    pub fn with_offsets(mut self, u: DVector<f64>, d: DVector<f64>) -> Result<Self> {
        self.u = u;
        self.d = d;
        self.validate()?;
        Ok(self)
    }

    /// Replaces the prior (checked).
    pub fn with_prior(mut self, x0: DVector<f64>, p0: DMatrix<f64>) -> Result<Self> {
        self.prior = Prior { x0, p0 };
        self.validate()?;
        Ok(self)
    }

    /// State size `nx` (rows of `F`).
    pub fn nx(&self) -> usize {
        self.f.nrows()
    }

    /// Measurement size `ny` (rows of `H`).
    pub fn ny(&self) -> usize {
        self.h.nrows()
    }

    /// Checks shapes, finiteness, and the definiteness of `Q`, `R` and `P0`.
    pub fn validate(&self) -> Result<()> {
        validate::validate_parts("", &self.f, &self.q, &self.h, &self.r, &self.u, &self.d)?;
        validate::validate_prior(self.nx(), &self.prior)
    }
}

impl StateSpace for Model {
    fn nx(&self) -> usize {
        self.f.nrows()
    }
    fn ny(&self) -> usize {
        self.h.nrows()
    }
    fn transition(&self, _k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        (&self.f, &self.u, &self.q)
    }
    fn observation(&self, _k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        (&self.h, &self.d, &self.r)
    }
    fn prior(&self) -> &Prior {
        &self.prior
    }
    fn as_invariant(&self) -> Option<&Model> {
        Some(self)
    }
}

/// The matrices of one step of a time-varying model.
#[derive(Clone, Debug, PartialEq)]
pub struct StepMatrices {
    /// Transition into this step (unused at step 0).
    pub f: DMatrix<f64>,
    /// Transition offset (control input) into this step, length `nx`.
    pub u: DVector<f64>,
    /// Process noise covariance into this step, `nx x nx`.
    pub q: DMatrix<f64>,
    /// Measurement at this step.
    pub h: DMatrix<f64>,
    /// Measurement offset at this step, length `ny`.
    pub d: DVector<f64>,
    /// Measurement noise covariance at this step, `ny x ny`.
    pub r: DMatrix<f64>,
}

/// A model whose matrices change from step to step: `steps[k]` holds the transition
/// into step `k` and the measurement model of step `k`. Sequences longer than `steps`
/// are rejected by the recursions.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeVaryingModel {
    pub(crate) steps: Vec<StepMatrices>,
    pub(crate) prior: Prior,
}

impl TimeVaryingModel {
    /// Builds and checks a time-varying model; all steps must share `nx` and `ny`.
    pub fn new(steps: Vec<StepMatrices>, prior: Prior) -> Result<Self> {
        if steps.is_empty() {
            return Err(Error::model(
                "steps",
                "a time-varying model needs at least one step",
            ));
        }
        let m = TimeVaryingModel { steps, prior };
        let nx = m.steps[0].f.nrows();
        let ny = m.steps[0].h.nrows();
        for (k, s) in m.steps.iter().enumerate() {
            if s.f.nrows() != nx || s.h.nrows() != ny {
                return Err(Error::model(
                    format!("step {k}"),
                    format!("dimensions differ from step 0 (nx={nx}, ny={ny})"),
                ));
            }
            validate::validate_parts(&format!("step {k}: "), &s.f, &s.q, &s.h, &s.r, &s.u, &s.d)?;
        }
        validate::validate_prior(nx, &m.prior)?;
        Ok(m)
    }

    /// Repeats a time-invariant model for `t` steps.
    pub fn from_model(m: &Model, t: usize) -> Self {
        let s = StepMatrices {
            f: m.f.clone(),
            u: m.u.clone(),
            q: m.q.clone(),
            h: m.h.clone(),
            d: m.d.clone(),
            r: m.r.clone(),
        };
        TimeVaryingModel {
            steps: vec![s; t.max(1)],
            prior: m.prior.clone(),
        }
    }

    /// The per-step matrices: `steps()[k]` holds the transition into step `k` and the
    /// measurement model of step `k`.
    pub fn steps(&self) -> &[StepMatrices] {
        &self.steps
    }

    /// The prior on the state at step 0.
    pub fn prior(&self) -> &Prior {
        &self.prior
    }

    /// Number of steps the model has matrices for.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True when the model has matrices for no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

impl StateSpace for TimeVaryingModel {
    fn nx(&self) -> usize {
        self.steps[0].f.nrows()
    }
    fn ny(&self) -> usize {
        self.steps[0].h.nrows()
    }
    fn transition(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        let s = &self.steps[k];
        (&s.f, &s.u, &s.q)
    }
    fn observation(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        let s = &self.steps[k];
        (&s.h, &s.d, &s.r)
    }
    fn prior(&self) -> &Prior {
        &self.prior
    }
    fn steps_covered(&self) -> Option<usize> {
        Some(self.steps.len())
    }
}
