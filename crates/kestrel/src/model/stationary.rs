//! The stationary distribution of a stable model: the prior `prior = "stationary"`.
//!
//! For `x_{k+1} = F x_k + u + w_k` with every eigenvalue of `F` inside the unit circle the
//! state has a stationary law `N(m, P)` with `m = (I - F)^{-1} u` and `P` the solution of
//! the discrete Lyapunov equation `P = F P F^T + Q`. `P` is found by the doubling
//! iteration (Smith 1968): `P <- P + A P A^T`, `A <- A^2`, starting from `P = Q`,
//! `A = F`; after `j` rounds `P = sum_{i < 2^j} F^i Q F^iT`, so the error falls
//! quadratically once `A` is small.

use super::Model;
use crate::error::{Error, Result};
use nalgebra::{DMatrix, DVector};

/// Solves `P = F P F^T + Q` for a stable `F` (spectral radius below 1).
pub fn lyapunov(f: &DMatrix<f64>, q: &DMatrix<f64>) -> Result<DMatrix<f64>> {
    let rho = spectral_radius(f);
    if !(rho < 1.0) {
        return Err(Error::model(
            "prior",
            format!(
                "\"stationary\" needs a stable F (every eigenvalue inside the unit circle); \
                 its spectral radius is {rho:.6}"
            ),
        ));
    }
    let mut p = q.clone();
    let mut a = f.clone();
    for _ in 0..200 {
        let add = &a * &p * a.transpose();
        p += &add;
        a = &a * &a;
        let scale = p.amax().max(f64::MIN_POSITIVE);
        if add.amax() <= 1e-17 * scale && a.amax() < 1e-8 {
            return Ok((&p + p.transpose()) * 0.5);
        }
    }
    Err(Error::model(
        "prior",
        format!(
            "the Lyapunov equation P = F P F^T + Q did not converge (spectral radius of F {rho:.6})"
        ),
    ))
}

/// The largest eigenvalue modulus of a square matrix.
pub fn spectral_radius(f: &DMatrix<f64>) -> f64 {
    f.complex_eigenvalues()
        .iter()
        .fold(0f64, |a, v| a.max(v.norm()))
}

/// The model's stationary law `(m, P)`.
pub fn stationary(model: &Model) -> Result<(DVector<f64>, DMatrix<f64>)> {
    let p = lyapunov(&model.f, &model.q)?;
    let n = model.nx();
    let m = (DMatrix::identity(n, n) - &model.f)
        .lu()
        .solve(&model.u)
        .ok_or_else(|| Error::model("prior", "I - F is singular: no stationary mean"))?;
    Ok((m, p))
}

impl Model {
    /// Replaces the prior by the stationary law of the state (see the module docs).
    pub fn with_stationary_prior(self) -> Result<Model> {
        let (m, p) = stationary(&self)?;
        self.with_prior(m, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ar;

    #[test]
    fn ar1_closed_form() {
        // AR(1): Var = q / (1 - phi^2).
        let m = ar(&[0.8], 2.0, 1.0, 1.0)
            .unwrap()
            .with_stationary_prior()
            .unwrap();
        assert!((m.prior.p0[(0, 0)] - 2.0 / (1.0 - 0.64)).abs() < 1e-12);
    }

    #[test]
    fn ar3_satisfies_the_equation() {
        let m = ar(&[0.5, -0.3, 0.2], 1.5, 1.0, 1.0).unwrap();
        let p = lyapunov(&m.f, &m.q).unwrap();
        let resid = &m.f * &p * m.f.transpose() + &m.q - &p;
        assert!(resid.amax() < 1e-12 * p.amax(), "{resid}");
        // Yule-Walker: gamma_1 = phi_1 gamma_0 + phi_2 gamma_1 + phi_3 gamma_2, with
        // gamma_k = P[0][k] (the state is [y_k, y_{k-1}, y_{k-2}]).
        let g = |k: usize| p[(0, k)];
        let yw = 0.5 * g(0) - 0.3 * g(1) + 0.2 * g(2);
        assert!((yw - g(1)).abs() < 1e-12 * g(0), "{yw} vs {}", g(1));
    }

    #[test]
    fn unstable_is_an_error() {
        let m = ar(&[1.0], 1.0, 1.0, 1.0).unwrap();
        let e = m.with_stationary_prior().unwrap_err().to_string();
        assert!(e.contains("stable") && e.contains("spectral radius"), "{e}");
    }
}
