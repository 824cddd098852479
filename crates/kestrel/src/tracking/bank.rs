//! The filters a tracker's tracks live in, behind the operations of one scan: the
//! Kalman filter of a linear model ([`BatchState`], with the linear initiation of the
//! tracker's module documentation) or a nonlinear model or IMM ([`TrackBank`], whose
//! module documentation gives its linearisation, mixture update and initiation).

use super::tracker::{initiation, row_major};
use crate::error::{Error, Result};
use crate::kalman::{BatchState, Mixture};
use crate::model::Model;
use crate::nonlinear::{NonlinearOptions, NonlinearProblem, TrackBank};

/// The linear filter and its initiation constants.
pub(super) struct Linear {
    state: BatchState<f64>,
    /// Initiation: `x = G (z - d) + N x0` (`G` row-major), with the covariance
    /// `P_init` of `state`'s prior.
    g: Vec<f64>,
    n_x0: Vec<f64>,
    d: Vec<f64>,
    /// `H`, row-major (the covariance bound).
    h: Vec<f64>,
}

/// Where the tracks live.
pub(super) enum Bank {
    Linear(Box<Linear>),
    Nonlinear(Box<TrackBank>),
}

/// Slots of a new bank.
pub(super) const FIRST_CAPACITY: usize = 1024;

/// A failing slot of the nonlinear bank as the error the linear one gives.
fn fail((slot, what): (usize, &'static str), scan: usize) -> Error {
    Error::NotPositiveDefinite {
        track: slot,
        step: scan,
        what,
    }
}

impl Bank {
    pub(super) fn linear(model: &Model) -> Result<Bank> {
        let (g, n_x0, p) = initiation(model)?;
        let mut state = BatchState::new(model, FIRST_CAPACITY)?;
        state.set_prior(&n_x0, &p)?;
        Ok(Bank::Linear(Box::new(Linear {
            state,
            g,
            n_x0,
            d: model.d.iter().copied().collect(),
            h: row_major(&model.h),
        })))
    }

    pub(super) fn nonlinear(problem: &NonlinearProblem, opts: &NonlinearOptions) -> Result<Bank> {
        Ok(Bank::Nonlinear(Box::new(TrackBank::new(problem, opts)?)))
    }

    /// The linear filter, if that is what the tracks live in.
    pub(super) fn state(&self) -> Option<&BatchState<f64>> {
        match self {
            Bank::Linear(l) => Some(&l.state),
            Bank::Nonlinear(_) => None,
        }
    }

    /// The measurement components that are angles.
    pub(super) fn angles(&self) -> &[usize] {
        match self {
            Bank::Linear(_) => &[],
            Bank::Nonlinear(b) => b.angles(),
        }
    }

    /// Modes of an IMM (1 otherwise).
    pub(super) fn modes(&self) -> usize {
        match self {
            Bank::Linear(_) => 1,
            Bank::Nonlinear(b) => b.modes(),
        }
    }

    pub(super) fn capacity(&self) -> usize {
        match self {
            Bank::Linear(l) => l.state.capacity(),
            Bank::Nonlinear(b) => b.capacity(),
        }
    }

    pub(super) fn mean(&self, slot: usize) -> &[f64] {
        match self {
            Bank::Linear(l) => l.state.mean(slot),
            Bank::Nonlinear(b) => b.mean(slot),
        }
        .unwrap_or(&[])
    }

    pub(super) fn cov(&self, slot: usize) -> &[f64] {
        match self {
            Bank::Linear(l) => l.state.cov(slot),
            Bank::Nonlinear(b) => b.cov(slot),
        }
        .unwrap_or(&[])
    }

    /// An IMM's mode probabilities of `slot`.
    pub(super) fn mode_probs(&self, slot: usize) -> Option<&[f64]> {
        match self {
            Bank::Nonlinear(b) if b.modes() > 1 => b.mode_probs(slot),
            _ => None,
        }
    }

    pub(super) fn predict(&mut self, scan: usize) -> Result<()> {
        match self {
            Bank::Linear(l) => l.state.predict(),
            Bank::Nonlinear(b) => b.predict().map_err(|e| fail(e, scan)),
        }
    }

    /// Every track's predicted measurement and `S`, read by [`Bank::predicted`].
    pub(super) fn measure(&mut self, scan: usize) -> Result<()> {
        match self {
            Bank::Linear(l) => l.state.measure(None),
            Bank::Nonlinear(b) => b.measure().map_err(|e| fail(e, scan)),
        }
    }

    /// `zhat` and `S` (row-major) of `slot` after [`Bank::measure`].
    pub(super) fn predicted(&self, slot: usize) -> (&[f64], &[f64]) {
        match self {
            Bank::Linear(l) => {
                let ny = l.d.len();
                (
                    &l.state.predicted_measurements()[slot * ny..(slot + 1) * ny],
                    &l.state.innovation_covs()[slot * ny * ny..(slot + 1) * ny * ny],
                )
            }
            Bank::Nonlinear(b) => b.predicted(slot).unwrap_or((&[], &[])),
        }
    }

    /// The GNN update: one row of `z` a slot, NaN where none.
    pub(super) fn update(&mut self, z: &[f64], scan: usize) -> Result<()> {
        match self {
            Bank::Linear(l) => l.state.update(z, None, None),
            Bank::Nonlinear(b) => b.update(z).map_err(|e| fail(e, scan)),
        }
    }

    /// The JPDA update (compressed rows by slot; see [`Mixture`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_mixture(
        &mut self,
        start: &[usize],
        z: &[f64],
        beta: &[f64],
        (pd, pg, clutter): (f64, f64, f64),
        scan: usize,
    ) -> Result<()> {
        match self {
            Bank::Linear(l) => l.state.update_mixture(&Mixture { start, z, beta }),
            Bank::Nonlinear(b) => b
                .update_mixture(start, z, beta, pd, pg, clutter)
                .map_err(|e| fail(e, scan)),
        }
    }

    /// Room for `births` more tracks.
    pub(super) fn reserve(&mut self, births: usize) -> Result<()> {
        if let Bank::Linear(l) = self {
            let need = l.state.len() + births;
            if need > l.state.capacity() {
                l.state.reserve(need.max(2 * l.state.capacity()))?;
            }
        }
        Ok(())
    }

    /// Starts a track from detection `z`; returns its slot, or why it could not start.
    pub(super) fn add(&mut self, z: &[f64], x: &mut [f64]) -> Result<usize> {
        match self {
            Bank::Linear(l) => {
                let (nx, ny) = (x.len(), z.len());
                for r in 0..nx {
                    let mut acc = l.n_x0[r];
                    for a in 0..ny {
                        acc += l.g[r * ny + a] * (z[a] - l.d[a]);
                    }
                    x[r] = acc;
                }
                l.state.add_with_mean(x)
            }
            Bank::Nonlinear(b) => b.add_from_detection(z).map_err(Error::input),
        }
    }

    pub(super) fn remove(&mut self, slot: usize) {
        match self {
            // Live by construction.
            Bank::Linear(l) => {
                let _ = l.state.remove(slot);
            }
            Bank::Nonlinear(b) => b.remove(slot),
        }
    }

    /// The variances of the measured quantities of `slot` (`diag(H P H^T)`; nonlinear:
    /// with the Jacobian of `h` at the mean).
    pub(super) fn measured_variances(&self, slot: usize) -> Vec<f64> {
        match self {
            Bank::Linear(l) => {
                let p = l.state.cov(slot).unwrap_or(&[]);
                let ny = l.d.len();
                let nx = l.n_x0.len();
                if p.len() != nx * nx {
                    return Vec::new();
                }
                (0..ny)
                    .map(|a| {
                        let ha = &l.h[a * nx..(a + 1) * nx];
                        let mut v = 0.0;
                        for r in 0..nx {
                            for c in 0..nx {
                                v += ha[r] * p[r * nx + c] * ha[c];
                            }
                        }
                        v
                    })
                    .collect()
            }
            Bank::Nonlinear(b) => b.measured_variances(slot),
        }
    }
}
