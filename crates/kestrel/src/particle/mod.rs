//! Particle filters: the bootstrap (SIR) filter for B independent filters of N particles
//! each, the resamplers, counter-based random numbers and the nonlinear models, on the
//! CPU (the reference) and on a CUDA GPU.
//!
//! - [`philox`]: Philox 4x32-10 keyed by (seed, filter, particle, step) and ziggurat
//!   Gaussians, identical on both devices;
//! - [`resample`]: multinomial, stratified, systematic, residual, Metropolis(B) and
//!   rejection resampling, each alone; [`grid`]: systematic and stratified with each
//!   particle's slots from the grid (Hendeby et al.); [`subsets`]: resampling in subsets
//!   with redistribution;
//! - [`models`]: the [`ParticleModel`] trait and the built-in kinds ([`PfModel`]),
//!   [`file`]: the model file's particle-filter kinds;
//! - `filter.rs`: the CPU filter; `cuda.rs` + `kernels/*.cu`: the GPU filter;
//! - `sim.rs`: simulation of truth and measurements from any kind.
//!
//! Outputs per filter and step: the weighted mean and covariance of the particles after
//! the update, the log-likelihood estimate `ln p^(z_k | z_0:k-1)` and the effective
//! sample size before resampling.

mod batch;
mod crew;
#[cfg(feature = "cuda")]
#[doc(hidden)]
pub mod cuda;
#[cfg(feature = "io")]
mod file;
mod filter;
pub mod grid;
pub mod lanes;
pub mod models;
pub mod philox;
pub mod resample;
mod sim;
pub mod subsets;

#[cfg(feature = "io")]
pub use file::{load_pf_model, pf_model_from_toml, KINDS};
pub use filter::particle_filter_cpu;
pub use models::{Batch, ParticleModel, PfKind, PfModel};
pub use resample::Resampler;
pub use sim::simulate;

use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::{Device, Estimates};

/// Options of the particle filter.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct PfOptions {
    /// Particles per filter, N.
    pub particles: usize,
    /// The resampling scheme.
    pub resampler: Resampler,
    /// Resample when `ESS < ess_threshold N`; 1 (or more) resamples every step, 0 never.
    pub ess_threshold: f64,
    /// Seed of the counter-based generator: the same seed gives the same draws on any device and thread count.
    pub seed: u64,
    /// Also return every filter's particles and weights after the last step.
    pub keep_particles: bool,
    /// The index of the first track of `z` in a larger batch. Each filter's random
    /// streams are keyed by its track index, so chunks of a batch filtered apart, each
    /// with the index of its first track here, give exactly the whole batch's result
    /// (as `kestrel.dask` runs them). Tracks are numbered below 2^32.
    pub track_offset: u32,
}

setters!(PfOptions {
    with_particles(particles: usize, "Sets [`PfOptions::particles`]."),
    with_resampler(resampler: Resampler, "Sets [`PfOptions::resampler`]."),
    with_ess_threshold(ess_threshold: f64, "Sets [`PfOptions::ess_threshold`]."),
    with_seed(seed: u64, "Sets [`PfOptions::seed`]."),
    with_keep_particles(keep_particles: bool, "Sets [`PfOptions::keep_particles`]."),
    with_track_offset(track_offset: u32, "Sets [`PfOptions::track_offset`]."),
});

impl PfOptions {
    /// `particles` per filter with the default scheme, threshold and seed.
    pub fn new(particles: usize) -> Self {
        PfOptions {
            particles,
            resampler: Resampler::Systematic,
            ess_threshold: 0.5,
            seed: 0,
            keep_particles: false,
            track_offset: 0,
        }
    }
}

/// What the particle filter returns.
#[derive(Clone, Debug)]
pub struct PfOutput<T> {
    /// Weighted means `[B][T][nx]`, covariances `[B][T][nx][nx]` and the per-step
    /// log-likelihood estimates `[B][T]`.
    pub estimates: Estimates<T>,
    /// Effective sample size `[B][T]` before resampling.
    pub ess: Vec<T>,
    /// With [`PfOptions::keep_particles`]: the particles `[B][N][nx]` after the last
    /// step and their normalised weights `[B][N]`.
    pub particles: Option<(Vec<T>, Vec<T>)>,
}

/// Most particles per filter (indices and counters are 32-bit).
pub const MAX_PARTICLES: usize = 1 << 31;

/// Checks the options and the measurements against the model.
pub(crate) fn check<T: Real>(
    nx: usize,
    ny: usize,
    z: &Measurements<T>,
    opts: &PfOptions,
) -> Result<()> {
    z.require_data("z")?;
    if opts.particles == 0 {
        return Err(Error::input(
            "the number of particles must be at least 1 (got 0)",
        ));
    }
    if opts.particles > MAX_PARTICLES {
        return Err(Error::input(format!(
            "{} particles per filter: at most {MAX_PARTICLES} (32-bit indices)",
            opts.particles
        )));
    }
    if !(opts.ess_threshold >= 0.0) || !opts.ess_threshold.is_finite() {
        return Err(Error::input(format!(
            "the ESS threshold must be a finite number >= 0 (a fraction of N), got {}",
            opts.ess_threshold
        )));
    }
    if u64::from(opts.track_offset) + z.tracks as u64 > 1 << 32 {
        return Err(Error::input(format!(
            "track offset {} + {} tracks: tracks are numbered below 2^32",
            opts.track_offset, z.tracks
        )));
    }
    if z.ny != ny {
        return Err(Error::input(format!(
            "measurements have {} components, the model measures {ny}",
            z.ny
        )));
    }
    if z.tracks > u32::MAX as usize || z.steps > u32::MAX as usize {
        return Err(Error::input(
            "at most 2^32 - 1 tracks and steps (32-bit counters)",
        ));
    }
    if nx == 0 {
        return Err(Error::input("the model has no state"));
    }
    z.check_finite()
}

/// Checks, before allocating, that `in_flight` filters of `n` particles and the outputs
/// of `tracks x steps` fit in memory (the shared [`crate::limits`] check).
pub(crate) fn check_memory<T: Real>(
    tracks: usize,
    steps: usize,
    nx: usize,
    n: usize,
    in_flight: usize,
) -> Result<()> {
    let t = std::mem::size_of::<T>() as u128;
    // x and its copy, lw, w (T); ancestors (u32); cumulative sum (f64) per particle.
    let per_particle = t * (2 * nx as u128 + 2) + 4 + 8;
    let work = per_particle * n as u128 * in_flight as u128;
    let outputs = t * tracks as u128 * steps as u128 * (nx as u128 * (nx as u128 + 1) + 2);
    let gb = |b: u128| b as f64 / 1e9;
    crate::limits::check_bytes(
        &format!(
            "{n} particles x {tracks} tracks x {steps} steps ({:.1} GB for particles, {:.1} GB for outputs)",
            gb(work),
            gb(outputs)
        ),
        work + outputs,
    )
}

/// Runs the bootstrap particle filter on `device`.
pub fn particle_filter_on<T: Real>(
    device: Device,
    model: &PfModel,
    z: &Measurements<T>,
    opts: &PfOptions,
) -> Result<PfOutput<T>> {
    match device {
        Device::Cpu => {
            model.check_cpu()?;
            particle_filter_cpu(model, z, opts)
        }
        #[cfg(feature = "cuda")]
        Device::Cuda(ordinal) => cuda::particle_filter_cuda(ordinal, model, z, opts),
        #[cfg(feature = "cuda")]
        Device::AllCuda => cuda::particle_filter_cuda(0, model, z, opts),
        #[cfg(not(feature = "cuda"))]
        _ => Err(crate::cuda::unsupported("the particle filter")),
    }
}
