//! Standard tracking and time-series models.
//!
//! Kinematic models stack one block per spatial axis, state order
//! `[p_x, v_x, (a_x), p_y, v_y, (a_y), ...]`, and measure positions. Process noise is
//! continuous white noise on the highest derivative, discretised exactly over `dt` with
//! spectral density `q` (Bar-Shalom, Li & Kirubarajan, *Estimation with Applications to
//! Tracking and Navigation*, sec. 6.2). `r` is the variance of each position measurement.
//! The prior is `x0 = 0`, `P0 = p0 I`; change it with [`Model::with_prior`].

use super::Model;
use crate::error::{Error, Result};
use nalgebra::{DMatrix, DVector};

fn positive(field: &str, v: f64) -> Result<()> {
    if !(v.is_finite() && v > 0.0) {
        return Err(Error::model(
            field,
            format!("must be finite and positive, got {v}"),
        ));
    }
    Ok(())
}

fn non_negative(field: &str, v: f64) -> Result<()> {
    if !(v.is_finite() && v >= 0.0) {
        return Err(Error::model(
            field,
            format!("must be finite and non-negative, got {v}"),
        ));
    }
    Ok(())
}

/// `F` and `Q` of one axis of a kinematic model: order 2 = `[p, v]` (white-noise
/// acceleration), 3 = `[p, v, a]` (white-noise jerk); the first `order` rows and columns
/// are used. No allocation: the per-step API calls it for every target and interval.
pub(crate) fn axis_block(order: usize, dt: f64, q: f64) -> ([[f64; 3]; 3], [[f64; 3]; 3]) {
    if order == 2 {
        (
            [[1.0, dt, 0.0], [0.0, 1.0, 0.0], [0.0; 3]],
            [
                [dt.powi(3) / 3.0 * q, dt.powi(2) / 2.0 * q, 0.0],
                [dt.powi(2) / 2.0 * q, dt * q, 0.0],
                [0.0; 3],
            ],
        )
    } else {
        (
            [[1.0, dt, dt * dt / 2.0], [0.0, 1.0, dt], [0.0, 0.0, 1.0]],
            [
                [
                    dt.powi(5) / 20.0 * q,
                    dt.powi(4) / 8.0 * q,
                    dt.powi(3) / 6.0 * q,
                ],
                [
                    dt.powi(4) / 8.0 * q,
                    dt.powi(3) / 3.0 * q,
                    dt.powi(2) / 2.0 * q,
                ],
                [dt.powi(3) / 6.0 * q, dt.powi(2) / 2.0 * q, dt * q],
            ],
        )
    }
}

/// How a kinematic model's `F` and `Q` depend on the sampling interval: the
/// [`constant_velocity`] and [`constant_acceleration`] builders for any `dt`. The
/// per-step API ([`crate::kalman::BatchState`]) uses it for per-target intervals
/// (irregular sampling).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kinematics {
    dims: usize,
    order: usize,
    q: f64,
}

impl Kinematics {
    /// Constant velocity in `dims` = 1..=3 axes with white-noise acceleration intensity `q`.
    pub fn constant_velocity(dims: usize, q: f64) -> Result<Self> {
        Self::new(dims, 2, q)
    }

    /// Constant acceleration in `dims` = 1..=3 axes with white-noise jerk intensity `q`.
    pub fn constant_acceleration(dims: usize, q: f64) -> Result<Self> {
        Self::new(dims, 3, q)
    }

    fn new(dims: usize, order: usize, q: f64) -> Result<Self> {
        if !(1..=3).contains(&dims) {
            return Err(Error::model(
                "dims",
                format!("must be 1, 2 or 3, got {dims}"),
            ));
        }
        non_negative("q", q)?;
        Ok(Kinematics { dims, order, q })
    }

    /// State size, `dims x order`.
    pub fn nx(&self) -> usize {
        self.dims * self.order
    }

    /// Spatial axes.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Derivatives per axis, position included (2: velocity, 3: acceleration).
    pub fn order(&self) -> usize {
        self.order
    }

    /// White-noise intensity on the highest derivative.
    pub fn q(&self) -> f64 {
        self.q
    }

    /// Entry `(i, j)` of `F` and of `Q` over `dt`, from the axis block `blk`.
    #[inline]
    pub(crate) fn entry(
        &self,
        blk: &([[f64; 3]; 3], [[f64; 3]; 3]),
        i: usize,
        j: usize,
    ) -> (f64, f64) {
        let o = self.order;
        if i / o != j / o {
            (0.0, 0.0)
        } else {
            (blk.0[i % o][j % o], blk.1[i % o][j % o])
        }
    }

    /// The axis block over `dt` (see [`Kinematics::entry`]).
    #[inline]
    pub(crate) fn block(&self, dt: f64) -> ([[f64; 3]; 3], [[f64; 3]; 3]) {
        axis_block(self.order, dt, self.q)
    }

    /// `F` and `Q` over the interval `dt` (finite and positive).
    pub fn transition(&self, dt: f64) -> Result<(DMatrix<f64>, DMatrix<f64>)> {
        positive("dt", dt)?;
        let b = self.block(dt);
        let n = self.nx();
        Ok((
            DMatrix::from_fn(n, n, |i, j| self.entry(&b, i, j).0),
            DMatrix::from_fn(n, n, |i, j| self.entry(&b, i, j).1),
        ))
    }
}

fn kinematic(dims: usize, order: usize, dt: f64, q: f64, r: f64, p0: f64) -> Result<Model> {
    if !(1..=3).contains(&dims) {
        return Err(Error::model(
            "dims",
            format!("must be 1, 2 or 3, got {dims}"),
        ));
    }
    positive("dt", dt)?;
    non_negative("q", q)?;
    positive("r", r)?;
    positive("p0", p0)?;
    let (fb, qb) = axis_block(order, dt, q);
    let nx = dims * order;
    let mut f = DMatrix::zeros(nx, nx);
    let mut qm = DMatrix::zeros(nx, nx);
    let mut h = DMatrix::zeros(dims, nx);
    for a in 0..dims {
        let o = a * order;
        for i in 0..order {
            for j in 0..order {
                f[(o + i, o + j)] = fb[i][j];
                qm[(o + i, o + j)] = qb[i][j];
            }
        }
        h[(a, o)] = 1.0;
    }
    let rm = DMatrix::identity(dims, dims) * r;
    Model::new(
        f,
        qm,
        h,
        rm,
        DVector::zeros(nx),
        DMatrix::identity(nx, nx) * p0,
    )
}

/// Constant velocity (white-noise acceleration) in `dims` = 1, 2 or 3 axes:
/// `nx = 2 dims`, `ny = dims`.
pub fn constant_velocity(dims: usize, dt: f64, q: f64, r: f64, p0: f64) -> Result<Model> {
    kinematic(dims, 2, dt, q, r, p0)
}

/// Constant acceleration (white-noise jerk) in `dims` = 1, 2 or 3 axes:
/// `nx = 3 dims`, `ny = dims`.
pub fn constant_acceleration(dims: usize, dt: f64, q: f64, r: f64, p0: f64) -> Result<Model> {
    kinematic(dims, 3, dt, q, r, p0)
}

/// Random walk observed in noise, `n` independent components: `F = H = I`,
/// `Q = q I`, `R = r I`.
pub fn random_walk(n: usize, q: f64, r: f64, p0: f64) -> Result<Model> {
    if n == 0 {
        return Err(Error::model("dims", "must be at least 1"));
    }
    // Before any n x n matrix exists: a huge n from a file must not reach the allocator.
    crate::limits::check_dim("dims", n)?;
    non_negative("q", q)?;
    positive("r", r)?;
    positive("p0", p0)?;
    let i = DMatrix::<f64>::identity(n, n);
    Model::new(
        i.clone(),
        &i * q,
        i.clone(),
        &i * r,
        DVector::zeros(n),
        &i * p0,
    )
}

/// AR(p) process `y_k = sum_i coeffs[i] y_{k-1-i} + e_k`, `e_k ~ N(0, q)`, observed in
/// noise of variance `r`, in companion form: `x_k = [y_k, y_{k-1}, ..., y_{k-p+1}]`.
pub fn ar(coeffs: &[f64], q: f64, r: f64, p0: f64) -> Result<Model> {
    let p = coeffs.len();
    if p == 0 {
        return Err(Error::model(
            "coeffs",
            "an AR model needs at least one coefficient",
        ));
    }
    crate::limits::check_dim("coeffs", p)?;
    if let Some(c) = coeffs.iter().find(|c| !c.is_finite()) {
        return Err(Error::model("coeffs", format!("not finite: {c}")));
    }
    non_negative("q", q)?;
    positive("r", r)?;
    positive("p0", p0)?;
    let mut f = DMatrix::zeros(p, p);
    for (i, c) in coeffs.iter().enumerate() {
        f[(0, i)] = *c;
    }
    for i in 1..p {
        f[(i, i - 1)] = 1.0;
    }
    let mut qm = DMatrix::zeros(p, p);
    qm[(0, 0)] = q;
    let mut h = DMatrix::zeros(1, p);
    h[(0, 0)] = 1.0;
    Model::new(
        f,
        qm,
        h,
        DMatrix::from_element(1, 1, r),
        DVector::zeros(p),
        DMatrix::identity(p, p) * p0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cv_2d_shapes_and_blocks() {
        let m = constant_velocity(2, 0.5, 2.0, 3.0, 10.0).unwrap();
        assert_eq!((m.nx(), m.ny()), (4, 2));
        assert_eq!(m.f[(0, 1)], 0.5);
        assert_eq!(m.f[(2, 3)], 0.5);
        assert_eq!(m.f[(0, 2)], 0.0);
        assert!((m.q[(0, 0)] - 2.0 * 0.125 / 3.0).abs() < 1e-15);
        assert_eq!(m.q[(1, 1)], 1.0);
        assert_eq!(m.h[(1, 2)], 1.0);
        assert_eq!(m.r[(1, 1)], 3.0);
    }

    #[test]
    fn ca_3d_shapes() {
        let m = constant_acceleration(3, 1.0, 1.0, 1.0, 1.0).unwrap();
        assert_eq!((m.nx(), m.ny()), (9, 3));
        assert_eq!(m.f[(0, 2)], 0.5);
        assert!((m.q[(0, 0)] - 0.05).abs() < 1e-15);
    }

    #[test]
    fn ar_companion() {
        let m = ar(&[0.5, -0.2, 0.1], 1.0, 0.5, 1.0).unwrap();
        assert_eq!(m.f[(0, 1)], -0.2);
        assert_eq!(m.f[(2, 1)], 1.0);
        assert_eq!(m.f[(1, 1)], 0.0);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(constant_velocity(4, 1.0, 1.0, 1.0, 1.0).is_err());
        assert!(constant_velocity(2, 0.0, 1.0, 1.0, 1.0).is_err());
        assert!(constant_velocity(2, 1.0, 1.0, -1.0, 1.0).is_err());
        assert!(random_walk(1, f64::NAN, 1.0, 1.0).is_err());
    }
}
