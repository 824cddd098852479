//! Measurements in, estimates out.
//!
//! Host layout is the one of the NumPy files of the contract: track-major, then step,
//! then component (`[B, T, ny]` for measurements, `[B, T, nx]` and `[B, T, nx, nx]` for
//! estimates), so files map straight onto these buffers. Device code converts to its
//! own structure-of-arrays layout once.

pub(crate) mod alloc;
mod outputs;
mod store;

pub use outputs::{CovOutput, Outputs};

use crate::error::{Error, Result};
use crate::linalg::Real;
#[cfg(any(feature = "io", feature = "cuda"))]
use rayon::prelude::*;
pub(crate) use store::Store;

/// The index of the first value of `v` for which `bad` holds, searched on every core.
///
/// Blocks of values are tested whole, without an early exit (a loop the compiler keeps
/// tight), and only the first block that holds a bad value is searched for its first
/// one: the scan of a clean output runs at memory speed, where an element-wise parallel
/// search pays the bookkeeping of "first" on every element.
#[cfg(any(feature = "io", feature = "cuda"))]
pub(crate) fn first_where<T: Copy + Sync>(
    v: &[T],
    bad: impl Fn(T) -> bool + Sync,
) -> Option<usize> {
    const BLOCK: usize = 1 << 14;
    let block = v
        .par_chunks(BLOCK)
        .position_first(|c| c.iter().fold(false, |acc, &x| acc | bad(x)))?;
    let start = block * BLOCK;
    v[start..].iter().position(|&x| bad(x)).map(|i| start + i)
}

/// Measurements of `tracks` tracks over `steps` steps, `ny` components each, layout
/// `[tracks][steps][ny]`. A step with a NaN in any component is missing.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurements<T> {
    pub(crate) tracks: usize,
    pub(crate) steps: usize,
    pub(crate) ny: usize,
    pub(crate) data: Store<T>,
}

/// [`Measurements::require_data`] from the sizes alone.
pub fn require_data(source: &str, tracks: usize, steps: usize) -> Result<()> {
    if tracks == 0 || steps == 0 {
        return Err(Error::input(format!(
            "{source}: no measurements ({})",
            shape(tracks, steps)
        )));
    }
    Ok(())
}

/// "1 track", "3 tracks": a count and its noun, in plain English (for messages).
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// "2 tracks x 1 step": a batch's shape in messages.
pub fn shape(tracks: usize, steps: usize) -> String {
    format!("{} x {}", plural(tracks, "track"), plural(steps, "step"))
}

impl<T: Real> Measurements<T> {
    /// Wraps a buffer `[tracks][steps][ny]`, checking its length.
    pub fn new(tracks: usize, steps: usize, ny: usize, data: Vec<T>) -> Result<Self> {
        let want = tracks.checked_mul(steps).and_then(|n| n.checked_mul(ny));
        if want != Some(data.len()) {
            return Err(Error::input(format!(
                "measurement buffer has {} values, expected {tracks} tracks x {steps} steps x {ny}",
                data.len(),
            )));
        }
        Ok(Measurements {
            tracks,
            steps,
            ny,
            data: Store::Owned(data),
        })
    }

    /// Runs `f` on measurements that read the caller's slice `[tracks][steps][ny]` in
    /// place, without a copy (a NumPy array handed in by the Python package): the view
    /// cannot outlive the call, and a clone of it owns a copy.
    pub fn in_place<R>(
        tracks: usize,
        steps: usize,
        ny: usize,
        data: &[T],
        f: impl FnOnce(&Measurements<T>) -> R,
    ) -> Result<R> {
        let want = tracks.checked_mul(steps).and_then(|n| n.checked_mul(ny));
        if want != Some(data.len()) {
            return Err(Error::input(format!(
                "measurement buffer has {} values, expected {tracks} tracks x {steps} steps x {ny}",
                data.len(),
            )));
        }
        // SAFETY: `data` outlives the call of `f`, and `f` sees the measurements only by
        // shared reference: nothing can keep the view (a clone owns a copy) or write to it
        // (`data_mut` and `into_data` need the value itself).
        let z = Measurements {
            tracks,
            steps,
            ny,
            data: unsafe { Store::borrowed(data) },
        };
        Ok(f(&z))
    }

    /// The one check of empty inputs, for every command and entry point: no tracks
    /// (B = 0) or no steps (T = 0) is an input error, `{source}: no measurements (B
    /// tracks x T steps)`.
    pub fn require_data(&self, source: &str) -> Result<()> {
        require_data(source, self.tracks, self.steps)
    }

    /// Number of tracks.
    pub fn tracks(&self) -> usize {
        self.tracks
    }

    /// Number of steps.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Components per measurement.
    pub fn ny(&self) -> usize {
        self.ny
    }

    /// The buffer `[tracks][steps][ny]`.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// The buffer, writable in place (its length cannot change).
    pub fn data_mut(&mut self) -> &mut [T] {
        self.data.make_mut()
    }

    /// The buffer, taken out.
    pub fn into_data(self) -> Vec<T> {
        self.data.into_vec()
    }

    /// The measurement of track `b` at step `k`.
    #[inline]
    pub fn at(&self, b: usize, k: usize) -> &[T] {
        let o = (b * self.steps + k) * self.ny;
        &self.data[o..o + self.ny]
    }

    /// All steps of track `b`, `[steps][ny]`.
    #[inline]
    pub fn track(&self, b: usize) -> &[T] {
        let n = self.steps * self.ny;
        &self.data[b * n..(b + 1) * n]
    }

    /// True when step `k` of track `b` is missing.
    #[inline]
    pub fn is_missing(&self, b: usize, k: usize) -> bool {
        self.at(b, k).iter().any(|v| v.is_nan_value())
    }

    /// Measurements copied from a row-major slice `[tracks][steps][ny]` into fresh
    /// memory (huge pages where possible), the copy spread over every core: the cheapest
    /// way in for a caller's large buffer (a NumPy array from the Python package).
    pub fn copied_from(tracks: usize, steps: usize, ny: usize, data: &[T]) -> Result<Self> {
        let want = tracks.checked_mul(steps).and_then(|n| n.checked_mul(ny));
        if want != Some(data.len()) {
            return Err(Error::input(format!(
                "measurement buffer has {} values, expected {tracks} tracks x {steps} steps x {ny}",
                data.len(),
            )));
        }
        Measurements::new(tracks, steps, ny, alloc::copied(data))
    }

    /// Converts to another precision.
    pub fn cast<U: Real>(&self) -> Measurements<U> {
        Measurements {
            tracks: self.tracks,
            steps: self.steps,
            ny: self.ny,
            data: Store::Owned(self.data.iter().map(|v| U::of(v.to_f64())).collect()),
        }
    }

    /// Rejects infinities (NaN is allowed: it marks a missing value), naming the track
    /// and step.
    pub fn check_finite(&self) -> Result<()> {
        if let Some(i) = self
            .data
            .iter()
            .position(|v| !v.is_nan_value() && !v.is_finite_value())
        {
            let (b, k, j) = (
                i / (self.steps * self.ny),
                (i / self.ny) % self.steps,
                i % self.ny,
            );
            return Err(Error::input(format!(
                "track {b}, step {k}: measurement component z{j} is infinite"
            )));
        }
        Ok(())
    }
}

/// Gaussian estimates: means `[tracks][steps][nx]`, full covariances
/// `[tracks][steps][nx][nx]` (row-major), and for filters the per-step predictive
/// log-likelihood `[tracks][steps]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimates<T> {
    pub(crate) tracks: usize,
    pub(crate) steps: usize,
    pub(crate) nx: usize,
    pub(crate) mean: Vec<T>,
    pub(crate) cov: Vec<T>,
    pub(crate) loglik: Option<Vec<T>>,
}

impl<T: Real> Estimates<T> {
    /// [`Estimates::nan`] with every buffer through `try_reserve`: an allocator refusal
    /// is an [`crate::Error::TooLarge`], not an abort.
    pub fn try_nan(
        tracks: usize,
        steps: usize,
        nx: usize,
        with_loglik: bool,
    ) -> crate::Result<Self> {
        const WHAT: &str = "the estimates";
        let n = tracks.saturating_mul(steps);
        Ok(Estimates {
            tracks,
            steps,
            nx,
            mean: alloc::try_filled(WHAT, n.saturating_mul(nx), T::nan())?,
            cov: alloc::try_filled(WHAT, n.saturating_mul(nx).saturating_mul(nx), T::nan())?,
            loglik: match with_loglik {
                true => Some(alloc::try_filled(WHAT, n, T::nan())?),
                false => None,
            },
        })
    }

    /// Allocates estimates filled with NaN, so that an element nobody wrote shows.
    pub fn nan(tracks: usize, steps: usize, nx: usize, with_loglik: bool) -> Self {
        Estimates {
            tracks,
            steps,
            nx,
            mean: alloc::filled(tracks * steps * nx, T::nan()),
            cov: alloc::filled(tracks * steps * nx * nx, T::nan()),
            loglik: with_loglik.then(|| alloc::filled(tracks * steps, T::nan())),
        }
    }

    /// Estimates of means alone, filled with NaN; no covariances (see
    /// [`Estimates::cov_output`]), no log-likelihoods.
    pub fn nan_means(tracks: usize, steps: usize, nx: usize) -> Self {
        Estimates {
            tracks,
            steps,
            nx,
            mean: alloc::filled(tracks * steps * nx, T::nan()),
            cov: Vec::new(),
            loglik: None,
        }
    }

    /// Allocates zeroed estimates without touching the memory (see `alloc::zeroed`): for
    /// paths that write every element.
    pub(crate) fn zeroed(tracks: usize, steps: usize, nx: usize, with_loglik: bool) -> Self {
        Estimates {
            tracks,
            steps,
            nx,
            mean: alloc::zeroed(tracks * steps * nx),
            cov: alloc::zeroed(tracks * steps * nx * nx),
            loglik: with_loglik.then(|| alloc::zeroed(tracks * steps)),
        }
    }

    /// A copy made in parallel into fresh memory (large batches copy several times
    /// faster than with `clone`).
    pub fn copy_parallel(&self) -> Self {
        Estimates {
            tracks: self.tracks,
            steps: self.steps,
            nx: self.nx,
            mean: alloc::copied(&self.mean),
            cov: alloc::copied(&self.cov),
            loglik: self.loglik.as_ref().map(|l| alloc::copied(l)),
        }
    }

    /// Reshapes for reuse: buffers keep their allocation; entries added by growing are
    /// NaN, entries already there keep stale values until overwritten.
    pub fn reshape(&mut self, tracks: usize, steps: usize, nx: usize, with_loglik: bool) {
        self.tracks = tracks;
        self.steps = steps;
        self.nx = nx;
        self.mean.resize(tracks * steps * nx, T::nan());
        self.cov.resize(tracks * steps * nx * nx, T::nan());
        match (&mut self.loglik, with_loglik) {
            (Some(l), true) => l.resize(tracks * steps, T::nan()),
            (l @ None, true) => *l = Some(vec![T::nan(); tracks * steps]),
            (l, false) => *l = None,
        }
    }

    /// Estimates from their buffers: `mean [tracks][steps][nx]`, `cov
    /// [tracks][steps][nx][nx]`, optional `loglik [tracks][steps]`; lengths checked.
    pub fn new(
        tracks: usize,
        steps: usize,
        nx: usize,
        mean: Vec<T>,
        cov: Vec<T>,
        loglik: Option<Vec<T>>,
    ) -> Result<Self> {
        let n = tracks.checked_mul(steps);
        let ok = n.and_then(|n| n.checked_mul(nx)) == Some(mean.len())
            && n.and_then(|n| n.checked_mul(nx * nx)) == Some(cov.len())
            && loglik.as_ref().is_none_or(|l| n == Some(l.len()));
        if !ok {
            return Err(Error::input(format!(
                "estimate buffers of {} means, {} covariance and {} log-likelihood values do not fit {tracks} tracks x {steps} steps x nx {nx}",
                mean.len(),
                cov.len(),
                loglik.as_ref().map_or(0, |l| l.len())
            )));
        }
        Ok(Estimates {
            tracks,
            steps,
            nx,
            mean,
            cov,
            loglik,
        })
    }

    /// Number of tracks.
    pub fn tracks(&self) -> usize {
        self.tracks
    }

    /// Number of steps kept (1 for `Keep::Last`).
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.nx
    }

    /// All means, `[tracks][steps][nx]`.
    pub fn mean(&self) -> &[T] {
        &self.mean
    }

    /// All covariances, `[tracks][steps][nx][nx]` (row-major).
    pub fn cov(&self) -> &[T] {
        &self.cov
    }

    /// Per-step log-likelihoods `[tracks][steps]` (filters; with `Keep::Last`, each
    /// track's total).
    pub fn loglik(&self) -> Option<&[T]> {
        self.loglik.as_deref()
    }

    /// The same estimates without their log-likelihoods.
    pub fn without_loglik(mut self) -> Self {
        self.loglik = None;
        self
    }

    /// All means, writable in place.
    pub fn mean_mut(&mut self) -> &mut [T] {
        &mut self.mean
    }

    /// All covariances, writable in place.
    pub fn cov_mut(&mut self) -> &mut [T] {
        &mut self.cov
    }

    /// The log-likelihoods, writable in place.
    pub fn loglik_mut(&mut self) -> Option<&mut [T]> {
        self.loglik.as_deref_mut()
    }

    /// The mean of track `b` at its last kept step (with `Keep::Last`, the only one);
    /// `None` when there is no such track or no step.
    pub fn last_mean(&self, b: usize) -> Option<&[T]> {
        (b < self.tracks && self.steps > 0).then(|| self.mean_at(b, self.steps - 1))
    }

    /// The covariance of track `b` at its last kept step.
    pub fn last_cov(&self, b: usize) -> Option<&[T]> {
        (b < self.tracks && self.steps > 0).then(|| self.cov_at(b, self.steps - 1))
    }

    /// The mean of track `b` at kept step `k` (`k < steps()`: with `Keep::Last` only
    /// step 0 is kept; see [`Estimates::last_mean`]).
    #[inline]
    pub fn mean_at(&self, b: usize, k: usize) -> &[T] {
        let o = (b * self.steps + k) * self.nx;
        &self.mean[o..o + self.nx]
    }

    /// The covariance of track `b` at kept step `k`, `nx x nx` row-major.
    #[inline]
    pub fn cov_at(&self, b: usize, k: usize) -> &[T] {
        let n2 = self.nx * self.nx;
        let o = (b * self.steps + k) * n2;
        &self.cov[o..o + n2]
    }

    /// The buffers taken out, without a copy: `(mean [B][T][nx], cov, loglik [B][T])`;
    /// an output that was not kept is empty (`None` for the log-likelihoods), and
    /// [`Estimates::cov_output`] tells the covariances' form (ask it before).
    pub fn into_parts(self) -> (Vec<T>, Vec<T>, Option<Vec<T>>) {
        (self.mean, self.cov, self.loglik)
    }

    /// Sum of the per-step log-likelihoods of all tracks (0 without log-likelihoods).
    pub fn total_loglik(&self) -> f64 {
        // Sums of fixed blocks in parallel, then the blocks' sums in order: the same
        // value on any number of threads.
        use rayon::prelude::*;
        self.loglik
            .as_ref()
            .map(|l| {
                let parts: Vec<f64> = l
                    .par_chunks(1 << 16)
                    .map(|c| c.iter().map(|v| v.to_f64()).sum::<f64>())
                    .collect();
                parts.iter().sum()
            })
            .unwrap_or(0.0)
    }

    /// Converts to another precision.
    pub fn cast<U: Real>(&self) -> Estimates<U> {
        let c = |v: &Vec<T>| v.iter().map(|x| U::of(x.to_f64())).collect();
        Estimates {
            tracks: self.tracks,
            steps: self.steps,
            nx: self.nx,
            mean: c(&self.mean),
            cov: c(&self.cov),
            loglik: self.loglik.as_ref().map(c),
        }
    }
}

/// Interoperation with `ndarray`: measurements and estimates to and from arrays of the
/// NumPy layout (`[B, T, ny]`, `[B, T, nx]`, `[B, T, nx, nx]`, `[B, T]`). Views borrow
/// the buffers; owned arrays in standard layout are taken without a copy.
mod arrays {
    use super::{Estimates, Measurements};
    use crate::error::{Error, Result};
    use crate::linalg::Real;
    use ndarray::{Array3, ArrayView2, ArrayView3, ArrayView4};

    /// The buffer of an owned array in standard (C) layout, without a copy, or a copy in
    /// that order for any other layout.
    fn standard_vec<T: Clone, D: ndarray::Dimension>(a: ndarray::Array<T, D>) -> Vec<T> {
        let n = a.len();
        if a.is_standard_layout() {
            let (mut v, offset) = a.into_raw_vec_and_offset();
            let off = offset.unwrap_or(0);
            if off == 0 {
                v.truncate(n);
                return v;
            }
            return v[off..off + n].to_vec();
        }
        a.iter().cloned().collect()
    }

    impl<T: Real> Measurements<T> {
        /// Measurements from an array `[tracks, steps, ny]` (NaN = missing); no copy when
        /// the array is in standard layout.
        ///
        /// ```
        /// let a = ndarray::Array3::<f64>::zeros((10, 5, 2));
        /// let z = kestrel::Measurements::from_array(a)?;
        /// assert_eq!((z.tracks(), z.steps(), z.ny()), (10, 5, 2));
        /// # Ok::<(), kestrel::Error>(())
        /// ```
        pub fn from_array(a: Array3<T>) -> Result<Self> {
            let (b, t, ny) = a.dim();
            Measurements::new(b, t, ny, standard_vec(a))
        }

        /// Measurements copied from a view `[tracks, steps, ny]` of any layout.
        pub fn from_view(a: ArrayView3<'_, T>) -> Result<Self> {
            let (b, t, ny) = a.dim();
            Measurements::new(b, t, ny, a.iter().copied().collect())
        }

        /// Measurements copied from a row-major slice `[tracks][steps][ny]`.
        pub fn from_slice(tracks: usize, steps: usize, ny: usize, data: &[T]) -> Result<Self> {
            Measurements::new(tracks, steps, ny, data.to_vec())
        }

        /// The measurements as a view `[tracks, steps, ny]` (no copy).
        pub fn view(&self) -> ArrayView3<'_, T> {
            ArrayView3::from_shape((self.tracks, self.steps, self.ny), &self.data)
                .expect("the buffer length is checked on construction")
        }

        /// The measurements as an owned array `[tracks, steps, ny]` (no copy).
        pub fn into_array(self) -> Array3<T> {
            Array3::from_shape_vec((self.tracks, self.steps, self.ny), self.data.into_vec())
                .expect("the buffer length is checked on construction")
        }
    }

    fn shape_error(what: &str) -> Error {
        Error::input(format!(
            "the {what} buffer does not fit the estimates' shape"
        ))
    }

    impl<T: Real> Estimates<T> {
        /// Means as a view `[tracks, steps, nx]` (no copy).
        pub fn mean_view(&self) -> Result<ArrayView3<'_, T>> {
            ArrayView3::from_shape((self.tracks, self.steps, self.nx), &self.mean)
                .map_err(|_| shape_error("mean"))
        }

        /// Covariances as a view `[tracks, steps, nx, nx]` (no copy).
        pub fn cov_view(&self) -> Result<ArrayView4<'_, T>> {
            ArrayView4::from_shape((self.tracks, self.steps, self.nx, self.nx), &self.cov)
                .map_err(|_| shape_error("covariance"))
        }

        /// Per-step log-likelihoods as a view `[tracks, steps]` (no copy), when present.
        pub fn loglik_view(&self) -> Result<Option<ArrayView2<'_, T>>> {
            self.loglik
                .as_ref()
                .map(|l| {
                    ArrayView2::from_shape((self.tracks, self.steps), l)
                        .map_err(|_| shape_error("log-likelihood"))
                })
                .transpose()
        }

        /// The estimates as owned arrays `(mean [B,T,nx], cov [B,T,nx,nx], loglik [B,T])`
        /// without a copy.
        #[allow(clippy::type_complexity)]
        pub fn into_arrays(
            self,
        ) -> Result<(Array3<T>, ndarray::Array4<T>, Option<ndarray::Array2<T>>)> {
            let (b, t, nx) = (self.tracks, self.steps, self.nx);
            let mean =
                Array3::from_shape_vec((b, t, nx), self.mean).map_err(|_| shape_error("mean"))?;
            let cov = ndarray::Array4::from_shape_vec((b, t, nx, nx), self.cov)
                .map_err(|_| shape_error("covariance"))?;
            let ll = self
                .loglik
                .map(|l| {
                    ndarray::Array2::from_shape_vec((b, t), l)
                        .map_err(|_| shape_error("log-likelihood"))
                })
                .transpose()?;
            Ok((mean, cov, ll))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn empty_batches_are_counted_in_plain_english() {
        let e = super::require_data("z", 1, 0).unwrap_err().to_string();
        assert!(e.contains("z: no measurements (1 track x 0 steps)"), "{e}");
        let e = super::require_data("z", 0, 1).unwrap_err().to_string();
        assert!(e.contains("(0 tracks x 1 step)"), "{e}");
        assert!(super::require_data("z", 2, 3).is_ok());
    }
}
