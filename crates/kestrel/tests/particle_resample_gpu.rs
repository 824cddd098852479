//! The GPU resamplers of `particle/kernels/resample.cu` in the filter on the GPU
//! (multinomial, systematic:grid, stratified:grid, subsets:S) against the CPU filter with
//! the same scheme and seed: in f64 the same random numbers, so the same path but where
//! rounding (the device sums the weights in another order) flips a resampling choice;
//! the test counts such filters. On the GPU the grid selections give exactly the
//! searches' results (the same cumulative weights, the same positions): equal bit for
//! bit. Outputs are NaN-poisoned on the device before a run. Skips without a GPU; fails
//! with KESTREL_REQUIRE_GPU=1.

mod gpu_common;

use super::particle_gpu::{at_most_rare_flips, diverging_in, RANGE};
use gpu_common::gpu_or_skip;
use kestrel::particle::{
    particle_filter_cpu, particle_filter_on, pf_model_from_toml, PfOptions, PfOutput, Resampler,
};
use kestrel::{Device, Real};
use std::path::Path;

/// Filters whose means leave the other's (relative tolerance `tol`).
fn diverging<T: Real>(a: &PfOutput<T>, b: &PfOutput<T>, tol: f64) -> usize {
    diverging_in(a, b, tol, false)
}

const SCHEMES: [Resampler; 5] = [
    Resampler::Multinomial,
    Resampler::SystematicGrid,
    Resampler::StratifiedGrid,
    Resampler::Subsets(8),
    Resampler::Subsets(64),
];

#[test]
fn gpu_resamplers_match_the_cpu_but_for_rare_flips() {
    if !gpu_or_skip("gpu_resamplers_match_the_cpu_but_for_rare_flips") {
        return;
    }
    at_most_rare_flips(&SCHEMES.map(|r| (r, 0.7)), false);
}

#[test]
fn gpu_resamplers_at_two_million_particles() {
    if !gpu_or_skip("gpu_resamplers_at_two_million_particles") {
        return;
    }
    // Many chunks of the multinomial's sums, many blocks of the grid, 256 subsets.
    let model = pf_model_from_toml(RANGE, Path::new("m.toml")).unwrap();
    let (_, z) = kestrel::particle::simulate(&model, 2, 6, 3, 0.0).unwrap();
    for r in [
        Resampler::Multinomial,
        Resampler::SystematicGrid,
        Resampler::StratifiedGrid,
        Resampler::Subsets(256),
    ] {
        let mut opts = PfOptions::new(1 << 21);
        opts.resampler = r;
        opts.ess_threshold = 1.0;
        opts.seed = 9;
        let cpu = particle_filter_cpu(&model, &z, &opts).unwrap();
        let gpu = particle_filter_on(Device::Cuda(0), &model, &z, &opts).unwrap();
        let d = diverging(&cpu, &gpu, 1e-4);
        assert_eq!(d, 0, "{r}: {d} of 2 filters differ at 2^21 particles");
    }
}

#[test]
fn grid_selection_equals_the_search_on_the_gpu() {
    if !gpu_or_skip("grid_selection_equals_the_search_on_the_gpu") {
        return;
    }
    let model = pf_model_from_toml(RANGE, Path::new("m.toml")).unwrap();
    let (_, z) = kestrel::particle::simulate(&model, 64, 15, 2, 0.0).unwrap();
    for n in [1000, 100_000] {
        for (grid, search) in [
            (Resampler::SystematicGrid, Resampler::Systematic),
            (Resampler::StratifiedGrid, Resampler::Stratified),
        ] {
            let mut opts = PfOptions::new(n);
            opts.ess_threshold = 1.0;
            opts.seed = 4;
            opts.resampler = grid;
            let a = particle_filter_on(Device::Cuda(0), &model, &z, &opts).unwrap();
            opts.resampler = search;
            let b = particle_filter_on(Device::Cuda(0), &model, &z, &opts).unwrap();
            assert_eq!(
                a.estimates.mean(),
                b.estimates.mean(),
                "{grid} against {search}, N = {n}"
            );
            assert_eq!(a.estimates.cov(), b.estimates.cov());
            assert_eq!(a.ess, b.ess);
        }
    }
}
