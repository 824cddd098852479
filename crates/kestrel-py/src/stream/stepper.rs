//! The two back ends of `kestrel.BatchState` behind one trait: the library's
//! `kalman::BatchState` (CPU) and `kalman::cuda::BatchTracker` (GPU, state resident on
//! the device).

use kestrel::kalman::cuda::{BatchTracker, CudaOptions};
use kestrel::kalman::{BatchState, Prediction};
use kestrel::linalg::{cholesky_in_place, solve_lower_in_place, LN_2PI};
use kestrel::model::{Kinematics, Model};
use kestrel::{Real, Result};

/// What the class needs of a batch of per-step filters, on either device.
pub(super) trait Stepper<T: Real>: Send {
    fn capacity(&self) -> usize;
    fn live(&self) -> Vec<bool>;
    fn updates(&self) -> usize;
    /// Adds a target: the current prior, or `x0` with the prior's covariance, or both.
    fn add(&mut self, x0: Option<&[T]>, p0: Option<&[T]>) -> Result<usize>;
    fn remove(&mut self, slot: usize) -> Result<()>;
    fn set_prior(&mut self, x0: &[T], p0: &[T]) -> Result<()>;
    fn set_state(&mut self, slot: usize, x: &[T], p: &[T]) -> Result<()>;
    fn reserve(&mut self, capacity: usize) -> Result<()>;
    fn predict(&mut self, pred: &Prediction<'_, T>) -> Result<()>;
    fn update(&mut self, z: &[T], mask: Option<&[bool]>, r: Option<&[T]>) -> Result<()>;
    /// `H x + d` `[cap][ny]` and `S` `[cap][ny][ny]` of every slot from its current
    /// state (free slots NaN).
    fn measure(&mut self, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)>;
    /// `H x + d` and `S` of the last measure or update.
    fn innovations(&mut self) -> Result<(Vec<T>, Vec<T>)>;
    /// Means `[cap][nx]`, covariances `[cap][nx][nx]`, log-likelihoods `[cap]`.
    fn state(&mut self) -> Result<(Vec<T>, Vec<T>, Vec<T>)>;
    /// Squared Mahalanobis distances and log-likelihoods of `m` candidates per slot
    /// (`z`: `[cap][m][ny]`), after a measure with `r`: `[cap][m]` each, NaN for free
    /// slots.
    fn score(&mut self, z: &[T], m: usize, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)>;
}

impl<T: Real> Stepper<T> for BatchState<T> {
    fn capacity(&self) -> usize {
        BatchState::capacity(self)
    }
    fn live(&self) -> Vec<bool> {
        (0..BatchState::capacity(self))
            .map(|s| self.is_live(s))
            .collect()
    }
    fn updates(&self) -> usize {
        BatchState::updates(self)
    }
    fn add(&mut self, x0: Option<&[T]>, p0: Option<&[T]>) -> Result<usize> {
        match (x0, p0) {
            (None, None) => BatchState::add(self),
            (Some(x), None) => self.add_with_mean(x),
            (Some(x), Some(p)) => self.add_with_prior(x, p),
            (None, Some(_)) => Err(input("a prior covariance needs a mean")),
        }
    }
    fn remove(&mut self, slot: usize) -> Result<()> {
        BatchState::remove(self, slot)
    }
    fn set_prior(&mut self, x0: &[T], p0: &[T]) -> Result<()> {
        BatchState::set_prior(self, x0, p0)
    }
    fn set_state(&mut self, slot: usize, x: &[T], p: &[T]) -> Result<()> {
        BatchState::set_state(self, slot, x, p)
    }
    fn reserve(&mut self, capacity: usize) -> Result<()> {
        BatchState::reserve(self, capacity)
    }
    fn predict(&mut self, pred: &Prediction<'_, T>) -> Result<()> {
        self.predict_with(pred)
    }
    fn update(&mut self, z: &[T], mask: Option<&[bool]>, r: Option<&[T]>) -> Result<()> {
        BatchState::update(self, z, mask, r)
    }
    fn measure(&mut self, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        BatchState::measure(self, r)?;
        self.innovations()
    }
    fn innovations(&mut self) -> Result<(Vec<T>, Vec<T>)> {
        Ok((
            self.predicted_measurements().to_vec(),
            self.innovation_covs().to_vec(),
        ))
    }
    fn state(&mut self) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        Ok((
            self.means().to_vec(),
            self.covs().to_vec(),
            self.logliks().to_vec(),
        ))
    }
    fn score(&mut self, z: &[T], m: usize, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        BatchState::measure(self, r)?;
        let (cap, ny) = (BatchState::capacity(self), self.ny());
        let mut maha = vec![T::nan(); cap * m];
        let mut ll = vec![T::nan(); cap * m];
        for s in 0..cap {
            if !self.is_live(s) {
                continue;
            }
            for j in 0..m {
                let i = s * m + j;
                let sc = BatchState::score(self, s, &z[i * ny..(i + 1) * ny])?;
                maha[i] = sc.mahalanobis2;
                ll[i] = sc.loglik;
            }
        }
        Ok((maha, ll))
    }
}

/// The GPU tracker with the prior that `add` gives new targets kept on the host (the
/// tracker's own is the model's).
pub(super) struct Gpu<T: Real> {
    t: BatchTracker<T>,
    x0: Vec<T>,
    p0: Vec<T>,
}

fn unsupported_on_gpu(what: &str) -> kestrel::Error {
    kestrel::Error::Unsupported(format!(
        "{what} is not available on a GPU (the device tracker has a fixed capacity and \
         no re-initialisation); use device=\"cpu\""
    ))
}

impl<T: Real> Stepper<T> for Gpu<T> {
    fn capacity(&self) -> usize {
        self.t.capacity()
    }
    fn live(&self) -> Vec<bool> {
        (0..self.t.capacity()).map(|s| self.t.is_live(s)).collect()
    }
    fn updates(&self) -> usize {
        self.t.updates()
    }
    fn add(&mut self, x0: Option<&[T]>, p0: Option<&[T]>) -> Result<usize> {
        match (x0, p0) {
            (None, None) => {
                let (x, p) = (self.x0.clone(), self.p0.clone());
                self.t.add_with_prior(&x, &p)
            }
            (Some(x), None) => {
                let p = self.p0.clone();
                self.t.add_with_prior(x, &p)
            }
            (Some(x), Some(p)) => self.t.add_with_prior(x, p),
            (None, Some(_)) => Err(input("a prior covariance needs a mean")),
        }
    }
    fn remove(&mut self, slot: usize) -> Result<()> {
        self.t.remove(slot)
    }
    fn set_prior(&mut self, x0: &[T], p0: &[T]) -> Result<()> {
        let nx = self.t.nx();
        if x0.len() != nx || p0.len() != nx * nx {
            return Err(input(format!(
                "a prior needs {nx} mean and {} covariance values, got {} and {}",
                nx * nx,
                x0.len(),
                p0.len()
            )));
        }
        if x0.iter().chain(p0).any(|v| !v.is_finite_value()) {
            return Err(input("a prior has a value that is not finite"));
        }
        let m = kestrel::nalgebra::DMatrix::from_fn(nx, nx, |i, j| p0[i * nx + j].to_f64());
        kestrel::model::check_psd("P0", &m)?;
        self.x0 = x0.to_vec();
        self.p0 = p0.to_vec();
        Ok(())
    }
    fn set_state(&mut self, _: usize, _: &[T], _: &[T]) -> Result<()> {
        Err(unsupported_on_gpu("set_state"))
    }
    fn reserve(&mut self, capacity: usize) -> Result<()> {
        if capacity <= self.t.capacity() {
            return Ok(());
        }
        Err(unsupported_on_gpu("reserve"))
    }
    fn predict(&mut self, pred: &Prediction<'_, T>) -> Result<()> {
        self.t.predict_with(pred)
    }
    fn update(&mut self, z: &[T], mask: Option<&[bool]>, r: Option<&[T]>) -> Result<()> {
        self.t.update(z, mask, r)
    }
    fn measure(&mut self, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        self.t.measure(r)
    }
    fn innovations(&mut self) -> Result<(Vec<T>, Vec<T>)> {
        self.t.innovations()
    }
    fn state(&mut self) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        let e = self.t.state()?;
        let (mean, cov, ll) = e.into_parts();
        let cap = self.t.capacity();
        Ok((mean, cov, ll.unwrap_or_else(|| vec![T::nan(); cap])))
    }
    fn score(&mut self, z: &[T], m: usize, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        let (zhat, s) = self.t.measure(r)?;
        let (cap, ny) = (self.t.capacity(), self.t.ny());
        let live = Stepper::live(self);
        let mut maha = vec![T::nan(); cap * m];
        let mut ll = vec![T::nan(); cap * m];
        let mut l = vec![T::zero(); ny * ny];
        let mut y = vec![T::zero(); ny];
        for b in (0..cap).filter(|&b| live[b]) {
            // The arithmetic of `BatchState::score`, on the device's zhat and S.
            l.copy_from_slice(&s[b * ny * ny..(b + 1) * ny * ny]);
            if !cholesky_in_place(&mut l, ny) {
                return Err(kestrel::Error::NotPositiveDefinite {
                    track: b,
                    step: self.t.updates(),
                    what: "innovation covariance S",
                });
            }
            let mut logdet = T::zero();
            for a in 0..ny {
                logdet += l[a * ny + a].ln();
            }
            for j in 0..m {
                let i = b * m + j;
                for a in 0..ny {
                    y[a] = z[i * ny + a] - zhat[b * ny + a];
                }
                solve_lower_in_place(&l, ny, &mut y, 1);
                let mut d2 = T::zero();
                for v in &y {
                    d2 += *v * *v;
                }
                maha[i] = d2;
                ll[i] = -(T::of(ny as f64 * LN_2PI) + d2) * T::of(0.5) - logdet;
            }
        }
        Ok((maha, ll))
    }
}

pub(super) fn cpu<T: Real>(
    m: &Model,
    cap: usize,
    kin: Option<Kinematics>,
) -> Result<BatchState<T>> {
    let s = BatchState::<T>::new(m, cap)?;
    match kin {
        Some(k) => s.with_kinematics(k),
        None => Ok(s),
    }
}

pub(super) fn gpu<T: Real>(
    i: usize,
    m: &Model,
    cap: usize,
    kin: Option<Kinematics>,
) -> Result<Gpu<T>> {
    let t = BatchTracker::<T>::new(i, m, cap, &CudaOptions::default())?;
    let t = match kin {
        Some(k) => t.with_kinematics(k)?,
        None => t,
    };
    let nx = m.nx();
    Ok(Gpu {
        t,
        x0: m.prior().x0.iter().map(|v| T::of(*v)).collect(),
        p0: (0..nx * nx)
            .map(|i| T::of(m.prior().p0[(i / nx, i % nx)]))
            .collect(),
    })
}

/// A bad input, with its message.
pub(super) fn input(msg: impl Into<String>) -> kestrel::Error {
    kestrel::Error::Input { msg: msg.into() }
}
