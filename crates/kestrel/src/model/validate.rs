//! Model checks: shapes, finiteness, symmetry and definiteness.

use super::Prior;
use crate::error::{Error, Result};
use nalgebra::{DMatrix, DVector};

fn check_shape(field: &str, m: &DMatrix<f64>, rows: usize, cols: usize) -> Result<()> {
    if m.nrows() != rows || m.ncols() != cols {
        return Err(Error::model(
            field,
            format!("expected {rows}x{cols}, got {}x{}", m.nrows(), m.ncols()),
        ));
    }
    Ok(())
}

fn check_finite(field: &str, m: &[f64], cols: usize) -> Result<()> {
    if let Some(i) = m.iter().position(|v| !v.is_finite()) {
        // nalgebra stores column-major.
        let rows = m.len() / cols.max(1);
        let (r, c) = (i % rows.max(1), i / rows.max(1));
        return Err(Error::model(
            field,
            format!("entry [{r}][{c}] is not finite ({})", m[i]),
        ));
    }
    Ok(())
}

fn check_symmetric(field: &str, m: &DMatrix<f64>) -> Result<()> {
    let n = m.nrows();
    let scale = m
        .iter()
        .fold(0f64, |a, v| a.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    for i in 0..n {
        for j in 0..i {
            if (m[(i, j)] - m[(j, i)]).abs() > 1e-9 * scale {
                return Err(Error::model(
                    field,
                    format!(
                        "not symmetric: [{i}][{j}] = {} but [{j}][{i}] = {}",
                        m[(i, j)],
                        m[(j, i)]
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks that `m` is symmetric positive semi-definite (eigenvalues >= -1e-12 x scale).
pub fn check_psd(field: &str, m: &DMatrix<f64>) -> Result<()> {
    check_symmetric(field, m)?;
    let scale = m
        .iter()
        .fold(0f64, |a, v| a.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    let eig = m.clone().symmetric_eigenvalues();
    if let Some(min) = eig.iter().cloned().reduce(f64::min) {
        if min < -1e-12 * scale {
            return Err(Error::model(
                field,
                format!("not positive semi-definite (smallest eigenvalue {min:.3e})"),
            ));
        }
    }
    Ok(())
}

/// Checks that `m` is symmetric positive definite (a Cholesky factorisation exists).
pub fn check_spd(field: &str, m: &DMatrix<f64>) -> Result<()> {
    check_symmetric(field, m)?;
    if m.clone().cholesky().is_none() {
        let eig = m.clone().symmetric_eigenvalues();
        let min = eig.iter().cloned().fold(f64::INFINITY, f64::min);
        return Err(Error::model(
            field,
            format!("not positive definite (smallest eigenvalue {min:.3e})"),
        ));
    }
    Ok(())
}

pub(super) fn validate_parts(
    prefix: &str,
    f: &DMatrix<f64>,
    q: &DMatrix<f64>,
    h: &DMatrix<f64>,
    r: &DMatrix<f64>,
    u: &DVector<f64>,
    d: &DVector<f64>,
) -> Result<()> {
    crate::limits::check_dim(&format!("{prefix}F"), f.nrows())?;
    crate::limits::check_dim(&format!("{prefix}H"), h.nrows())?;
    let nx = f.nrows();
    let ny = h.nrows();
    let name = |s: &str| format!("{prefix}{s}");
    if nx == 0 {
        return Err(Error::model(name("F"), "the state dimension is zero"));
    }
    if ny == 0 {
        return Err(Error::model(name("H"), "the measurement dimension is zero"));
    }
    check_shape(&name("F"), f, nx, nx)?;
    check_shape(&name("Q"), q, nx, nx)?;
    check_shape(&name("H"), h, ny, nx)?;
    check_shape(&name("R"), r, ny, ny)?;
    if u.len() != nx {
        return Err(Error::model(
            name("u"),
            format!("expected length {nx}, got {}", u.len()),
        ));
    }
    if d.len() != ny {
        return Err(Error::model(
            name("d"),
            format!("expected length {ny}, got {}", d.len()),
        ));
    }
    check_finite(&name("F"), f.as_slice(), nx)?;
    check_finite(&name("Q"), q.as_slice(), nx)?;
    check_finite(&name("H"), h.as_slice(), nx)?;
    check_finite(&name("R"), r.as_slice(), ny)?;
    check_finite(&name("u"), u.as_slice(), 1)?;
    check_finite(&name("d"), d.as_slice(), 1)?;
    check_psd(&name("Q"), q)?;
    check_spd(&name("R"), r)?;
    Ok(())
}

pub(super) fn validate_prior(nx: usize, p: &Prior) -> Result<()> {
    if p.x0.len() != nx {
        return Err(Error::model(
            "x0",
            format!("expected length {nx}, got {}", p.x0.len()),
        ));
    }
    check_shape("P0", &p.p0, nx, nx)?;
    check_finite("x0", p.x0.as_slice(), 1)?;
    check_finite("P0", p.p0.as_slice(), nx)?;
    check_psd("P0", &p.p0)
}
