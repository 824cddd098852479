//! The windowed filter on the GPU.

use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::Model;

pub(crate) fn window<T: Real>(
    _ordinal: usize,
    _model: &Model,
    _z: &Measurements<T>,
    _n: usize,
    _vague: f64,
) -> Result<Vec<T>> {
    Err(Error::Unsupported(
        "the windowed filter on cuda is not built yet (use --device cpu)".into(),
    ))
}
