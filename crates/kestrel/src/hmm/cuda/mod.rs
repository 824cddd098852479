//! The HMM family on the GPU.

use super::{HiddenMarkovModel, HmmOptions, HmmOutput};
use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::linalg::Real;

pub(crate) fn run<T: Real>(
    _ordinal: usize,
    _model: &HiddenMarkovModel,
    _obs: &Measurements<T>,
    _opts: &HmmOptions,
) -> Result<HmmOutput<T>> {
    Err(Error::Unsupported("hmm on cuda: not built yet".into()))
}
