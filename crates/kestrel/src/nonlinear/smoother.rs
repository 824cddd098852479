//! Rauch-Tung-Striebel smoothers with the filter's linearisation (Sarkka 2013, alg. 9.3
//! extended RTS, alg. 9.10 unscented RTS): from each filtered `(m_k, P_k)` the
//! prediction `(m', P')` and the cross covariance `D = Cov(x_k, x_{k+1})` are formed as
//! the filter forms them (EKF: the Jacobian of `f` at the filtered mean, `D = P F^T`;
//! UKF/CKF: sigma points of `(m_k, P_k)`, `D = sum Wc dx dy^T`), then
//!
//! ```text
//! G = D P'^-1    (a Cholesky solve, never an inverse)
//! ms_k = m_k + G (ms_{k+1} - m')
//! Ps_k = P_k + G (Ps_{k+1} - P') G^T
//! ```

use super::ekf::{symmetrize, Fail, Work};
use super::models::NonlinearModel;
use super::Step;
use nalgebra::{DMatrix, DVector};

/// One RTS step: the smoothed `(ms, Ps)` at `k` from the filtered `(m, P)` at `k`, the
/// prediction from it and the smoothed moments at `k + 1`.
pub(super) fn rts_step(
    m: &DVector<f64>,
    p: &DMatrix<f64>,
    mp: &DVector<f64>,
    pp: &DMatrix<f64>,
    d: &DMatrix<f64>,
    ms_next: &DVector<f64>,
    ps_next: &DMatrix<f64>,
) -> Result<(DVector<f64>, DMatrix<f64>), Fail> {
    let chol = pp.clone().cholesky().ok_or("the predicted P")?;
    // G^T = P'^-1 D^T
    let gt = chol.solve(&d.transpose());
    let g = gt.transpose();
    let ms = m + &g * (ms_next - mp);
    let mut ps = p + &g * (ps_next - pp) * &gt;
    symmetrize(&mut ps);
    Ok((ms, ps))
}

/// The RTS smoother of one track: `fmean [T][nx]`, `fcov [T][nx][nx]` filtered, into
/// `smean`, `scov`. Errors name the step.
pub(super) fn rts_track(
    step: &Step<'_>,
    model: &NonlinearModel,
    fmean: &[f64],
    fcov: &[f64],
    smean: &mut [f64],
    scov: &mut [f64],
    w: &mut Work,
) -> Result<(), (usize, Fail)> {
    let nx = model.nx();
    let t = fmean.len() / nx;
    let (n2, last) = (nx * nx, t - 1);
    smean[last * nx..].copy_from_slice(&fmean[last * nx..]);
    scov[last * n2..].copy_from_slice(&fcov[last * n2..]);
    for k in (0..last).rev() {
        let m = DVector::from_column_slice(&fmean[k * nx..(k + 1) * nx]);
        let p = DMatrix::from_column_slice(nx, nx, &fcov[k * n2..(k + 1) * n2]);
        let (mut mp, mut pp) = (m.clone(), p.clone());
        let d = step
            .predict(model, &mut mp, &mut pp, w)
            .map_err(|e| (k, e))?;
        let msn = DVector::from_column_slice(&smean[(k + 1) * nx..(k + 2) * nx]);
        let psn = DMatrix::from_column_slice(nx, nx, &scov[(k + 1) * n2..(k + 2) * n2]);
        let (ms, ps) = rts_step(&m, &p, &mp, &pp, &d, &msn, &psn).map_err(|e| (k + 1, e))?;
        smean[k * nx..(k + 1) * nx].copy_from_slice(ms.as_slice());
        // Symmetric: column-major = row-major.
        scov[k * n2..(k + 1) * n2].copy_from_slice(ps.as_slice());
    }
    Ok(())
}
