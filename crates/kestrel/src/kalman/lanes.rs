//! Placeholder until the lane-batched fast path lands.
use crate::data::{Estimates, Measurements};
use crate::error::Result;
use crate::linalg::Real;
use crate::model::Model;

pub(crate) fn filter<T: Real>(
    _m: &Model,
    _z: &Measurements<T>,
    _keep_all: bool,
) -> Option<Result<Estimates<T>>> {
    None
}

pub(crate) fn smooth<T: Real>(_m: &Model, _est: &mut Estimates<T>) -> Option<Result<()>> {
    None
}
