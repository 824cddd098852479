//! [`LinearModel`]: what a linear-Gaussian model file holds, time-invariant or per step.

use super::{Model, Prior, StateSpace, TimeVaryingModel};
use nalgebra::{DMatrix, DVector};
use std::path::PathBuf;

/// A linear-Gaussian model as a model file gives it: time-invariant matrices (the explicit
/// and builder forms), or per-step matrices read from an `.npz` (`kind = "time-varying"`).
/// Every recursion that reads a [`StateSpace`] takes either.
#[derive(Clone, Debug, PartialEq)]
pub enum LinearModel {
    /// The same matrices at every step.
    Invariant(Model),
    /// Per-step matrices; `file` is the `.npz` they came from (for messages).
    Varying {
        /// The model.
        model: TimeVaryingModel,
        /// The file that held the per-step matrices.
        file: PathBuf,
    },
}

impl LinearModel {
    /// The time-invariant model, when this is one.
    pub fn invariant(&self) -> Option<&Model> {
        match self {
            LinearModel::Invariant(m) => Some(m),
            LinearModel::Varying { .. } => None,
        }
    }

    /// The time-varying model, when this is one.
    pub fn varying(&self) -> Option<&TimeVaryingModel> {
        match self {
            LinearModel::Invariant(_) => None,
            LinearModel::Varying { model, .. } => Some(model),
        }
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.space().nx()
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        self.space().ny()
    }

    /// Whether the model holds per-step matrices.
    pub fn is_varying(&self) -> bool {
        matches!(self, LinearModel::Varying { .. })
    }

    fn space(&self) -> &dyn StateSpace {
        match self {
            LinearModel::Invariant(m) => m,
            LinearModel::Varying { model, .. } => model,
        }
    }
}

impl From<Model> for LinearModel {
    fn from(m: Model) -> Self {
        LinearModel::Invariant(m)
    }
}

impl StateSpace for LinearModel {
    fn nx(&self) -> usize {
        self.space().nx()
    }
    fn ny(&self) -> usize {
        self.space().ny()
    }
    fn transition(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        self.space().transition(k)
    }
    fn observation(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        self.space().observation(k)
    }
    fn prior(&self) -> &Prior {
        self.space().prior()
    }
    fn steps_covered(&self) -> Option<usize> {
        self.space().steps_covered()
    }
    fn as_invariant(&self) -> Option<&Model> {
        self.invariant()
    }
}
