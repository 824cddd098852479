//! The per-step API: a batch of targets whose Kalman filters advance one call at a
//! time, with room for gating and data association between the prediction and the
//! update.
//!
//! [`BatchState`] holds the mean and covariance of up to `capacity` targets in stable
//! slots. Each target is added with its own prior (or the model's) and keeps its slot
//! until removed. [`BatchState::predict`] moves every live target one step forward
//! (the model's `F`, `Q`, `u`; or a sampling interval, one for all or one per target,
//! for the kinematic builders; plus a per-target control input), and
//! [`BatchState::update`] applies one measurement per target (a mask or NaN leaves a
//! target at its prediction; an optional per-target `R`). Between the two,
//! [`BatchState::measure`] gives every target's predicted measurement `H x + d` and its
//! covariance `S = H P H^T + R`, and [`BatchState::score`] the Mahalanobis distance and
//! log-likelihood of a candidate measurement: what a gate and an assignment need.
//!
//! A target's state is "now": the prior given to [`BatchState::add_with_prior`] is the
//! state at the time of the next update, and the following `predict` moves it on. With
//! the batch filter's time convention (step 0 updates the prior, each later step is
//! predict-then-update), `update` at step 0 then `predict` + `update` for every later
//! step reproduces [`crate::filter`] bit for bit on the CPU.
//!
//! Models of the common tracking sizes run on the SIMD lanes of the batch filter's fast
//! path (8 targets per group, all cores); other sizes run the general path. Nothing is
//! allocated per step on the fast path. The state is `Send` and `Sync`.
//!
//! ```
//! use kestrel::kalman::BatchState;
//! use kestrel::model::{constant_velocity, Kinematics};
//!
//! # fn main() -> kestrel::Result<()> {
//! // 2-D constant velocity: state [px, vx, py, vy], positions measured.
//! let model = constant_velocity(2, 1.0, 0.5, 4.0, 100.0)?;
//! let mut state = BatchState::<f64>::new(&model, 1000)?
//!     .with_kinematics(Kinematics::constant_velocity(2, 0.5)?)?;
//! let a = state.add()?; // the model's prior
//! let b = state.add_with_prior(&[10.0, 1.0, 0.0, 0.0], &[
//!     4.0, 0.0, 0.0, 0.0, //
//!     0.0, 1.0, 0.0, 0.0, //
//!     0.0, 0.0, 4.0, 0.0, //
//!     0.0, 0.0, 0.0, 1.0,
//! ])?;
//! // One measurement row per slot ([capacity][ny]); NaN = no measurement.
//! let mut z = vec![f64::NAN; state.capacity() * state.ny()];
//! for t in 0..5 {
//!     if t > 0 {
//!         state.predict_dt(0.5)?; // or state.predict() for the model's own dt
//!     }
//!     // Gate: predicted measurements and S of every live target.
//!     state.measure(None)?;
//!     let detection = [10.0 + 0.5 * t as f64, 0.1];
//!     if state.score(b, &detection)?.mahalanobis2 < 9.21 {
//!         z[b * 2..b * 2 + 2].copy_from_slice(&detection);
//!     }
//!     state.update(&z, None, None)?;
//!     z.fill(f64::NAN);
//! }
//! println!("target b at {:?}, log-likelihood {}", state.mean(b), state.loglik(b).unwrap());
//! state.remove(a)?;
//! assert_eq!(state.len(), 1);
//! # Ok(())
//! # }
//! ```

mod fast;
mod general;
mod mixture;

pub use mixture::Mixture;

use crate::error::{Error, Result};
use crate::kalman::step::{entries, row_major, StepMats};
use crate::linalg::{cholesky_in_place, solve_lower_in_place, Real, LN_2PI};
use crate::model::{Kinematics, Model};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How far [`BatchState::predict_with`] moves the targets.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum Interval<'a> {
    /// One step of the model (its own `F` and `Q`).
    #[default]
    Model,
    /// The same sampling interval for every target (needs [`BatchState::with_kinematics`]).
    Dt(f64),
    /// One interval per slot, `[capacity]` (needs kinematics; free slots are ignored).
    PerTarget(&'a [f64]),
}

/// The arguments of [`BatchState::predict_with`].
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct Prediction<'a, T> {
    /// How far to predict.
    pub interval: Interval<'a>,
    /// A control input per slot, `[capacity][nx]`, added to the model's `u`
    /// (`x <- F x + u + c_b`).
    pub control: Option<&'a [T]>,
}

impl<'a, T> Prediction<'a, T> {
    /// One step of the model, no control input.
    pub fn new() -> Self {
        Prediction {
            interval: Interval::Model,
            control: None,
        }
    }

    /// Predicts over `dt` (every target).
    pub fn dt(mut self, dt: f64) -> Self {
        self.interval = Interval::Dt(dt);
        self
    }

    /// Predicts each slot over its own interval, `[capacity]`.
    pub fn per_target_dt(mut self, dts: &'a [f64]) -> Self {
        self.interval = Interval::PerTarget(dts);
        self
    }

    /// Adds a control input per slot, `[capacity][nx]`.
    pub fn control(mut self, c: &'a [T]) -> Self {
        self.control = Some(c);
        self
    }
}

/// The fit of a candidate measurement to one target's predicted measurement
/// ([`BatchState::score`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Score<T> {
    /// Squared Mahalanobis distance `y^T S^{-1} y` of the innovation `y = z - H x - d`:
    /// chi-square with `ny` degrees of freedom for the right target.
    pub mahalanobis2: T,
    /// `log N(z; H x + d, S)`, the log-likelihood the update would add.
    pub loglik: T,
}

/// The per-target buffers, slot-major: means `[cap][nx]`, covariances `[cap][nx][nx]`,
/// the log-likelihood of the last update `[cap]`, the predicted measurement `[cap][ny]`
/// and its covariance `S` `[cap][ny][ny]`. Free slots hold NaN.
pub(crate) struct Store<T> {
    pub nx: usize,
    pub ny: usize,
    pub cap: usize,
    pub x: Vec<T>,
    pub p: Vec<T>,
    pub live: Vec<bool>,
    pub ll: Vec<T>,
    pub zhat: Vec<T>,
    pub s: Vec<T>,
}

/// A resolved interval for the engines.
#[derive(Clone, Copy)]
pub(crate) enum Dt<'a> {
    Model,
    Uniform(f64),
    PerTarget(&'a [f64]),
}

/// The arithmetic behind [`BatchState`]: the lane path or the general path.
pub(crate) trait Engine<T: Real>: Send + Sync {
    fn predict(
        &mut self,
        st: &mut Store<T>,
        dt: Dt<'_>,
        kin: Option<&Kinematics>,
        control: Option<&[T]>,
    );
    /// Updates; returns the lowest slot whose `S` was not positive definite.
    fn update(
        &mut self,
        st: &mut Store<T>,
        z: &[T],
        mask: Option<&[bool]>,
        r: Option<&[T]>,
    ) -> Option<usize>;
    /// Fills `zhat` and `s` of every live slot from its current state.
    fn measure(&mut self, st: &mut Store<T>, r: Option<&[T]>);
}

/// A batch of targets filtered one call at a time (see the module documentation).
pub struct BatchState<T: Real> {
    st: Store<T>,
    engine: Box<dyn Engine<T>>,
    kin: Option<Kinematics>,
    x0: Vec<T>,
    p0: Vec<T>,
    /// The model's matrices in the working precision (the mixture update).
    mats: StepMats<T>,
    /// Free slots; `pop` gives the lowest.
    free: BinaryHeap<Reverse<usize>>,
    updates: usize,
    measured: bool,
}

/// Checks a target's own prior: `nx` finite mean values and an `nx x nx` finite,
/// symmetric positive semi-definite covariance (row-major).
pub(crate) fn check_prior<T: Real>(nx: usize, x0: &[T], p0: &[T]) -> Result<()> {
    if x0.len() != nx || p0.len() != nx * nx {
        return Err(Error::input(format!(
            "a prior needs {nx} mean and {} covariance values, got {} and {}",
            nx * nx,
            x0.len(),
            p0.len()
        )));
    }
    if x0.iter().chain(p0).any(|v| !v.is_finite_value()) {
        return Err(Error::input("a prior has a value that is not finite"));
    }
    let m = nalgebra::DMatrix::from_fn(nx, nx, |i, j| p0[i * nx + j].to_f64());
    crate::model::check_psd("P0", &m)
}

impl<T: Real> BatchState<T> {
    /// An empty batch of up to `capacity` targets of `model` (validated first).
    ///
    /// ```
    /// let model = kestrel::model::constant_velocity(2, 1.0, 0.5, 4.0, 100.0)?;
    /// let state = kestrel::kalman::BatchState::<f32>::new(&model, 10)?;
    /// assert_eq!((state.capacity(), state.len(), state.nx()), (10, 0, 4));
    /// # Ok::<(), kestrel::Error>(())
    /// ```
    pub fn new(model: &Model, capacity: usize) -> Result<Self> {
        model.validate()?;
        let (nx, ny) = (model.nx(), model.ny());
        let need = capacity
            .checked_mul(nx * nx + nx + ny * ny + ny + 1)
            .and_then(|n| n.checked_mul(std::mem::size_of::<T>()));
        if capacity == 0 || need.is_none() || need > Some(isize::MAX as usize) {
            return Err(Error::input(format!(
                "a batch state needs a capacity between 1 and what memory holds, got {capacity}"
            )));
        }
        let nan = T::nan();
        let st = Store {
            nx,
            ny,
            cap: capacity,
            x: vec![nan; capacity * nx],
            p: vec![nan; capacity * nx * nx],
            live: vec![false; capacity],
            ll: vec![nan; capacity],
            zhat: vec![nan; capacity * ny],
            s: vec![nan; capacity * ny * ny],
        };
        let engine: Box<dyn Engine<T>> = match fast::engine::<T>(model) {
            Some(e) => e,
            None => Box::new(general::General::new(model)),
        };
        Ok(BatchState {
            st,
            engine,
            kin: None,
            x0: entries(&model.prior.x0),
            p0: row_major(&model.prior.p0),
            mats: StepMats::of(model, 0),
            free: (0..capacity).map(Reverse).collect(),
            updates: 0,
            measured: false,
        })
    }

    /// Declares how `F` and `Q` depend on the sampling interval, which enables
    /// [`BatchState::predict_dt`] and per-target intervals. The kinematics must have the
    /// model's state size (the model's `H`, `R`, `u`, `d` are kept).
    ///
    /// ```
    /// use kestrel::{kalman::BatchState, model::{constant_velocity, Kinematics}};
    /// let model = constant_velocity(3, 1.0, 0.5, 4.0, 100.0)?;
    /// let state = BatchState::<f64>::new(&model, 4)?
    ///     .with_kinematics(Kinematics::constant_velocity(3, 0.5)?)?;
    /// # Ok::<(), kestrel::Error>(())
    /// ```
    pub fn with_kinematics(mut self, kin: Kinematics) -> Result<Self> {
        if kin.nx() != self.st.nx {
            return Err(Error::input(format!(
                "the kinematics have {} state components, the model has {}",
                kin.nx(),
                self.st.nx
            )));
        }
        self.kin = Some(kin);
        Ok(self)
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.st.nx
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        self.st.ny
    }

    /// The number of slots (the most targets at once).
    pub fn capacity(&self) -> usize {
        self.st.cap
    }

    /// The number of live targets.
    pub fn len(&self) -> usize {
        self.st.cap - self.free.len()
    }

    /// True when no target is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `slot` holds a live target.
    pub fn is_live(&self, slot: usize) -> bool {
        self.st.live.get(slot).copied().unwrap_or(false)
    }

    /// The live slots, in increasing order.
    pub fn live_slots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.st.cap).filter(|&s| self.st.live[s])
    }

    /// Updates run so far (the step number that errors name).
    pub fn updates(&self) -> usize {
        self.updates
    }

    /// Adds a target with the model's prior; returns its slot (the lowest free one),
    /// which stays its id until [`BatchState::remove`].
    pub fn add(&mut self) -> Result<usize> {
        let slot = self.take_slot()?;
        let (nx, x0, p0) = (self.st.nx, &self.x0, &self.p0);
        self.st.x[slot * nx..(slot + 1) * nx].copy_from_slice(x0);
        self.st.p[slot * nx * nx..(slot + 1) * nx * nx].copy_from_slice(p0);
        self.st.live[slot] = true;
        self.measured = false;
        Ok(slot)
    }

    /// Adds a target with its own prior: mean `x0` (`nx`) and covariance `p0` (`nx x nx`,
    /// row-major, symmetric positive semi-definite). Returns its slot.
    ///
    /// ```
    /// let model = kestrel::model::random_walk(1, 0.1, 1.0, 10.0)?;
    /// let mut state = kestrel::kalman::BatchState::<f64>::new(&model, 2)?;
    /// let s = state.add_with_prior(&[3.0], &[0.5])?;
    /// assert_eq!(state.mean(s), Some(&[3.0][..]));
    /// # Ok::<(), kestrel::Error>(())
    /// ```
    pub fn add_with_prior(&mut self, x0: &[T], p0: &[T]) -> Result<usize> {
        check_prior(self.st.nx, x0, p0)?;
        let slot = self.take_slot()?;
        self.write_state(slot, x0, p0);
        Ok(slot)
    }

    /// Replaces the state of a live target (re-initialisation), checked like a prior.
    pub fn set_state(&mut self, slot: usize, x: &[T], p: &[T]) -> Result<()> {
        self.check_slot(slot)?;
        check_prior(self.st.nx, x, p)?;
        self.write_state(slot, x, p);
        Ok(())
    }

    /// Stops tracking the target in `slot`; the slot becomes free.
    pub fn remove(&mut self, slot: usize) -> Result<()> {
        self.check_slot(slot)?;
        let (nx, ny) = (self.st.nx, self.st.ny);
        self.st.live[slot] = false;
        let nan = T::nan();
        self.st.x[slot * nx..(slot + 1) * nx].fill(nan);
        self.st.p[slot * nx * nx..(slot + 1) * nx * nx].fill(nan);
        self.st.ll[slot] = nan;
        self.st.zhat[slot * ny..(slot + 1) * ny].fill(nan);
        self.st.s[slot * ny * ny..(slot + 1) * ny * ny].fill(nan);
        self.free.push(Reverse(slot));
        Ok(())
    }

    /// Grows the batch to `capacity` slots (no change when it already has that many);
    /// live targets keep their slots, the new slots are free.
    ///
    /// ```
    /// let model = kestrel::model::random_walk(1, 0.1, 1.0, 10.0)?;
    /// let mut state = kestrel::kalman::BatchState::<f64>::new(&model, 1)?;
    /// state.add()?;
    /// state.reserve(4)?;
    /// assert_eq!((state.capacity(), state.add()?), (4, 1));
    /// # Ok::<(), kestrel::Error>(())
    /// ```
    pub fn reserve(&mut self, capacity: usize) -> Result<()> {
        let old = self.st.cap;
        if capacity <= old {
            return Ok(());
        }
        let (nx, ny) = (self.st.nx, self.st.ny);
        let need = capacity
            .checked_mul(nx * nx + nx + ny * ny + ny + 1)
            .and_then(|n| n.checked_mul(std::mem::size_of::<T>()));
        if need.is_none() || need > Some(isize::MAX as usize) {
            return Err(Error::input(format!(
                "a batch state of {capacity} targets would not fit in memory"
            )));
        }
        let nan = T::nan();
        let st = &mut self.st;
        st.x.resize(capacity * nx, nan);
        st.p.resize(capacity * nx * nx, nan);
        st.live.resize(capacity, false);
        st.ll.resize(capacity, nan);
        st.zhat.resize(capacity * ny, nan);
        st.s.resize(capacity * ny * ny, nan);
        st.cap = capacity;
        self.free.extend((old..capacity).map(Reverse));
        self.measured = false;
        Ok(())
    }

    /// Replaces the prior that [`BatchState::add`] and [`BatchState::add_with_mean`]
    /// give new targets (checked once here, so that adding is cheap).
    pub fn set_prior(&mut self, x0: &[T], p0: &[T]) -> Result<()> {
        check_prior(self.st.nx, x0, p0)?;
        self.x0.copy_from_slice(x0);
        self.p0.copy_from_slice(p0);
        Ok(())
    }

    /// Adds a target with its own mean `x0` (`nx`, finite) and the covariance of the
    /// prior ([`BatchState::set_prior`], else the model's): the usual start of a track
    /// from one detection. Returns its slot.
    pub fn add_with_mean(&mut self, x0: &[T]) -> Result<usize> {
        let nx = self.st.nx;
        if x0.len() != nx || x0.iter().any(|v| !v.is_finite_value()) {
            return Err(Error::input(format!(
                "a mean needs {nx} finite values, got {} values",
                x0.len()
            )));
        }
        let slot = self.take_slot()?;
        self.st.x[slot * nx..(slot + 1) * nx].copy_from_slice(x0);
        self.st.p[slot * nx * nx..(slot + 1) * nx * nx].copy_from_slice(&self.p0);
        self.st.live[slot] = true;
        Ok(slot)
    }

    /// Moves every live target one step with the model's `F`, `Q` and `u`.
    pub fn predict(&mut self) -> Result<()> {
        self.predict_with(&Prediction::new())
    }

    /// `n` model steps (what `n` missed measurements would do).
    pub fn predict_steps(&mut self, n: usize) -> Result<()> {
        for _ in 0..n {
            self.predict()?;
        }
        Ok(())
    }

    /// Moves every live target over the interval `dt` (finite, positive), with `F` and
    /// `Q` from the kinematics ([`BatchState::with_kinematics`]).
    pub fn predict_dt(&mut self, dt: f64) -> Result<()> {
        self.predict_with(&Prediction::new().dt(dt))
    }

    /// The general prediction: an interval (the model's step, one `dt`, or one per slot)
    /// and an optional per-slot control input.
    ///
    /// ```
    /// use kestrel::kalman::{BatchState, Prediction};
    /// use kestrel::model::{constant_velocity, Kinematics};
    /// let model = constant_velocity(1, 1.0, 0.1, 1.0, 10.0)?;
    /// let mut st = BatchState::<f64>::new(&model, 2)?
    ///     .with_kinematics(Kinematics::constant_velocity(1, 0.1)?)?;
    /// st.add_with_prior(&[0.0, 1.0], &[1.0, 0.0, 0.0, 1.0])?;
    /// st.add_with_prior(&[0.0, 1.0], &[1.0, 0.0, 0.0, 1.0])?;
    /// // Target 0 moves 0.5 time units, target 1 moves 2; a push on target 1's velocity.
    /// st.predict_with(&Prediction::new().per_target_dt(&[0.5, 2.0]).control(&[0.0, 0.0, 0.0, 0.25]))?;
    /// assert_eq!(st.mean(0).unwrap()[0], 0.5);
    /// assert_eq!(st.mean(1).unwrap(), &[2.0, 1.25]);
    /// # Ok::<(), kestrel::Error>(())
    /// ```
    pub fn predict_with(&mut self, pred: &Prediction<'_, T>) -> Result<()> {
        let (cap, nx) = (self.st.cap, self.st.nx);
        let dt = match pred.interval {
            Interval::Model => Dt::Model,
            Interval::Dt(dt) => {
                self.need_kinematics("a sampling interval")?;
                check_dt(dt, None)?;
                Dt::Uniform(dt)
            }
            Interval::PerTarget(dts) => {
                self.need_kinematics("per-target sampling intervals")?;
                check_len("per-target intervals", dts.len(), cap, 1)?;
                for s in self.live_slots() {
                    check_dt(dts[s], Some(s))?;
                }
                Dt::PerTarget(dts)
            }
        };
        if let Some(c) = pred.control {
            check_len("control inputs", c.len(), cap, nx)?;
            for s in self.live_slots() {
                if let Some(v) = c[s * nx..(s + 1) * nx]
                    .iter()
                    .find(|v| !v.is_finite_value())
                {
                    return Err(Error::input(format!(
                        "slot {s}: control input {v} is not finite"
                    )));
                }
            }
        }
        self.engine
            .predict(&mut self.st, dt, self.kin.as_ref(), pred.control);
        self.measured = false;
        Ok(())
    }

    /// Updates every live target with its row of `z`, `[capacity][ny]`: a row with a
    /// NaN, a `false` in `mask` (`[capacity]`), or a free slot means no measurement (the
    /// target keeps its prediction and its log-likelihood term is 0). `r`, when given,
    /// is the measurement noise per slot, `[capacity][ny][ny]`, in place of the model's.
    ///
    /// Afterwards [`BatchState::loglik`] holds each target's predictive log-likelihood
    /// and [`BatchState::predicted_measurement`] / [`BatchState::innovation_cov`] the
    /// `H x + d` and `S` the update used. A target whose `S` is not positive definite is
    /// reported as [`Error::NotPositiveDefinite`] (slot and update number) after all
    /// others were updated; its state is then undefined.
    pub fn update(&mut self, z: &[T], mask: Option<&[bool]>, r: Option<&[T]>) -> Result<()> {
        let (cap, ny) = (self.st.cap, self.st.ny);
        check_len("measurements", z.len(), cap, ny)?;
        if let Some(m) = mask {
            check_len("the mask", m.len(), cap, 1)?;
        }
        if let Some(r) = r {
            check_len("per-target R", r.len(), cap, ny * ny)?;
        }
        if let Some(i) = z
            .iter()
            .position(|v| !v.is_nan_value() && !v.is_finite_value())
        {
            return Err(Error::input(format!(
                "slot {}: measurement component z{} is infinite",
                i / ny,
                i % ny
            )));
        }
        let bad = self.engine.update(&mut self.st, z, mask, r);
        self.updated(bad)
    }

    /// Counts an update; `bad`, the lowest slot whose `S` was not positive definite, is
    /// the error.
    fn updated(&mut self, bad: Option<usize>) -> Result<()> {
        let step = self.updates;
        self.updates += 1;
        self.measured = false;
        match bad {
            Some(slot) => Err(Error::NotPositiveDefinite {
                track: slot,
                step,
                what: "innovation covariance S",
            }),
            None => Ok(()),
        }
    }

    /// Computes every live target's predicted measurement `H x + d` and innovation
    /// covariance `S = H P H^T + R` (`r`: per-slot noise `[capacity][ny][ny]`, else the
    /// model's) from the current state, for gating before [`BatchState::update`].
    pub fn measure(&mut self, r: Option<&[T]>) -> Result<()> {
        if let Some(r) = r {
            check_len(
                "per-target R",
                r.len(),
                self.st.cap,
                self.st.ny * self.st.ny,
            )?;
        }
        self.engine.measure(&mut self.st, r);
        self.measured = true;
        Ok(())
    }

    /// How well `z` (`ny` values) fits the target in `slot`, from the predicted
    /// measurement and `S` of the last [`BatchState::measure`] (which must come after
    /// the last change of the state).
    pub fn score(&self, slot: usize, z: &[T]) -> Result<Score<T>> {
        self.check_slot(slot)?;
        if !self.measured {
            return Err(Error::input(
                "score needs the predicted measurements: call measure after the last predict, update or add",
            ));
        }
        let ny = self.st.ny;
        if z.len() != ny {
            return Err(Error::input(format!(
                "a measurement has {ny} components, got {}",
                z.len()
            )));
        }
        let zhat = &self.st.zhat[slot * ny..(slot + 1) * ny];
        let mut l = [T::zero(); 36];
        let mut y = [T::zero(); 6];
        let (mut lh, mut yh);
        let (l, y): (&mut [T], &mut [T]) = if ny <= 6 {
            (&mut l[..ny * ny], &mut y[..ny])
        } else {
            lh = vec![T::zero(); ny * ny];
            yh = vec![T::zero(); ny];
            (&mut lh[..], &mut yh[..])
        };
        l.copy_from_slice(&self.st.s[slot * ny * ny..(slot + 1) * ny * ny]);
        for a in 0..ny {
            y[a] = z[a] - zhat[a];
        }
        if !cholesky_in_place(l, ny) {
            return Err(Error::NotPositiveDefinite {
                track: slot,
                step: self.updates,
                what: "innovation covariance S",
            });
        }
        solve_lower_in_place(l, ny, y, 1);
        let mut maha = T::zero();
        let mut logdet = T::zero();
        for a in 0..ny {
            maha += y[a] * y[a];
            logdet += l[a * ny + a].ln();
        }
        Ok(Score {
            mahalanobis2: maha,
            loglik: -(T::of(ny as f64 * LN_2PI) + maha) * T::of(0.5) - logdet,
        })
    }

    /// The mean of the target in `slot` (`None` for a free slot).
    pub fn mean(&self, slot: usize) -> Option<&[T]> {
        let nx = self.st.nx;
        self.is_live(slot)
            .then(|| &self.st.x[slot * nx..(slot + 1) * nx])
    }

    /// The covariance of the target in `slot`, `nx x nx` row-major.
    pub fn cov(&self, slot: usize) -> Option<&[T]> {
        let n2 = self.st.nx * self.st.nx;
        self.is_live(slot)
            .then(|| &self.st.p[slot * n2..(slot + 1) * n2])
    }

    /// The predictive log-likelihood of the target's last update (0 when it had no
    /// measurement; NaN before its first update).
    pub fn loglik(&self, slot: usize) -> Option<T> {
        self.is_live(slot).then(|| self.st.ll[slot])
    }

    /// `H x + d` of the last [`BatchState::measure`] or [`BatchState::update`].
    pub fn predicted_measurement(&self, slot: usize) -> Option<&[T]> {
        let ny = self.st.ny;
        self.is_live(slot)
            .then(|| &self.st.zhat[slot * ny..(slot + 1) * ny])
    }

    /// `S = H P H^T + R` (row-major) of the last [`BatchState::measure`] or
    /// [`BatchState::update`].
    pub fn innovation_cov(&self, slot: usize) -> Option<&[T]> {
        let n2 = self.st.ny * self.st.ny;
        self.is_live(slot)
            .then(|| &self.st.s[slot * n2..(slot + 1) * n2])
    }

    /// All means, `[capacity][nx]` (free slots NaN).
    pub fn means(&self) -> &[T] {
        &self.st.x
    }

    /// All covariances, `[capacity][nx][nx]` (free slots NaN).
    pub fn covs(&self) -> &[T] {
        &self.st.p
    }

    /// All log-likelihoods of the last update, `[capacity]`.
    pub fn logliks(&self) -> &[T] {
        &self.st.ll
    }

    /// All predicted measurements, `[capacity][ny]`.
    pub fn predicted_measurements(&self) -> &[T] {
        &self.st.zhat
    }

    /// All innovation covariances, `[capacity][ny][ny]`.
    pub fn innovation_covs(&self) -> &[T] {
        &self.st.s
    }

    fn take_slot(&mut self) -> Result<usize> {
        self.measured = false;
        self.free.pop().map(|Reverse(s)| s).ok_or_else(|| {
            Error::input(format!(
                "cannot add a target: all {} slots are taken",
                self.st.cap
            ))
        })
    }

    fn write_state(&mut self, slot: usize, x: &[T], p: &[T]) {
        let nx = self.st.nx;
        self.st.x[slot * nx..(slot + 1) * nx].copy_from_slice(x);
        self.st.p[slot * nx * nx..(slot + 1) * nx * nx].copy_from_slice(p);
        self.st.live[slot] = true;
        self.measured = false;
    }

    fn check_slot(&self, slot: usize) -> Result<()> {
        if !self.is_live(slot) {
            return Err(Error::input(format!("slot {slot} holds no target")));
        }
        Ok(())
    }

    fn need_kinematics(&self, what: &str) -> Result<()> {
        if self.kin.is_none() {
            return Err(Error::Unsupported(format!(
                "{what} needs the model's kinematics (BatchState::with_kinematics)"
            )));
        }
        Ok(())
    }
}

fn check_dt(dt: f64, slot: Option<usize>) -> Result<()> {
    if !(dt.is_finite() && dt > 0.0) {
        let at = slot.map(|s| format!("slot {s}: ")).unwrap_or_default();
        return Err(Error::input(format!(
            "{at}the sampling interval must be finite and positive, got {dt}"
        )));
    }
    Ok(())
}

fn check_len(what: &str, got: usize, cap: usize, per: usize) -> Result<()> {
    if got != cap * per {
        return Err(Error::input(format!(
            "{what}: expected {cap} slots x {per} = {} values, got {got}",
            cap * per
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
