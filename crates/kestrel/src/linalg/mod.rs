//! Scalars and the few small dense kernels the recursions need.
//!
//! Matrices of the model live in `nalgebra` types (`DMatrix<f64>`); the hot loops work
//! on plain row-major slices so that one code path serves any size without allocating,
//! and the lane-batched path (`kalman::lanes`) on fixed-size arrays.

mod chol;

pub use chol::{cholesky_in_place, solve_lower_in_place, solve_upper_t_in_place};

/// What the `.npy` reader and writer need of an element (nothing in a build without the
/// `io` feature).
#[cfg(feature = "io")]
#[doc(hidden)]
pub trait NpyElement: ndarray_npy::ReadableElement + ndarray_npy::WritableElement {}
#[cfg(feature = "io")]
impl<T: ndarray_npy::ReadableElement + ndarray_npy::WritableElement> NpyElement for T {}
/// What the `.npy` reader and writer need of an element (nothing in a build without the
/// `io` feature).
#[cfg(not(feature = "io"))]
#[doc(hidden)]
pub trait NpyElement {}
#[cfg(not(feature = "io"))]
impl<T> NpyElement for T {}

/// A floating-point scalar kestrel computes in: `f32` or `f64`.
pub trait Real:
    nalgebra::RealField
    + Copy
    + Default
    + Send
    + Sync
    + std::fmt::Debug
    + std::fmt::Display
    + std::str::FromStr
    + NpyElement
    + 'static
{
    /// `"f32"` or `"f64"`.
    const NAME: &'static str;
    /// Converts from `f64` (rounding for `f32`).
    fn of(x: f64) -> Self;
    /// Widens to `f64`.
    fn to_f64(self) -> f64;
    /// Not a number, the marker of a missing measurement.
    fn nan() -> Self;
    /// True for NaN.
    fn is_nan_value(self) -> bool;
    /// True when neither NaN nor infinite.
    fn is_finite_value(self) -> bool;
}

/// `Real` for the primitive float `$t`, named `$name`.
macro_rules! real {
    ($($t:ident $name:literal),*) => {$(
        impl Real for $t {
            const NAME: &'static str = $name;
            #[inline(always)]
            #[allow(clippy::unnecessary_cast)] // `f64 as f64` in the f64 instance
            fn of(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            #[allow(clippy::unnecessary_cast)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn nan() -> Self {
                $t::NAN
            }
            #[inline(always)]
            fn is_nan_value(self) -> bool {
                self.is_nan()
            }
            #[inline(always)]
            fn is_finite_value(self) -> bool {
                self.is_finite()
            }
        }
    )*};
}
real!(f64 "f64", f32 "f32");

/// `ln(2 pi)`, used by every Gaussian log-density.
pub const LN_2PI: f64 = 1.837_877_066_409_345_5;
