//! The particle filter on a CUDA GPU: this launcher of `kernels/pf.cu` on the shared
//! runtime (`crate::cuda`), its translation unit assembled by `source.rs`. One module per model and precision (the model's numbers are
//! compiled in); buffers for all B filters x N particles stay on the device for the whole
//! run; per step two launches, four when the filters resample (see `kernels/pf.cu`), and
//! no host synchronisation.
//!
//! On the GPU: systematic, stratified (by search or, `:grid`, by Hendeby et al.'s grid
//! selection), multinomial, Metropolis(B), rejection and resampling in subsets
//! (`kernels/resample.cu`). Residual resampling runs on the CPU only.

use super::models::PfModel;
use super::philox::key_of;
use super::{PfOptions, PfOutput};
use crate::cuda::{self, DevBuf};
use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::Estimates;

mod params;
mod source;

use params::{
    Draw, PfAncestors, PfCdf, PfCombine, PfFill, PfGrid, PfMnOffsets, PfMnSums, PfMnWalk,
    PfOffspring, PfStep, PfSubDraw, PfSubPlan, PfWeightsOut,
};
use source::*;
pub use source::{block_for, chunk_per, source, ANCESTOR_ITEMS, BLOCK, KERNELS, MAX_NX, MAX_NY};

/// Device bytes a run needs (checked arithmetic: `None` on overflow).
fn device_bytes(
    b: usize,
    t: usize,
    n: usize,
    nx: usize,
    ny: usize,
    scalar: usize,
    g: usize,
    keep: bool,
) -> Option<u128> {
    let (b, t, n, nx, ny, sc, g) = (
        b as u128,
        t as u128,
        n as u128,
        nx as u128,
        ny as u128,
        scalar as u128,
        g as u128,
    );
    let rec = 1 + 2 + nx + nx * (nx + 1) / 2 + nx;
    // x, xn, lw, lwn, the cumulative weights (f64), the ancestors; the final weights.
    let particles = b * n * (sc * (2 * nx + 2 + u128::from(keep)) + 8 + 4);
    let chunks = b * g * 8 * (rec + 2);
    let outputs = b * t * sc * (nx + nx * nx + 2 + ny);
    // pf_offspring's list of long ranges: three u32 an entry.
    let list = b * 12 * offspring_list(n as usize, g as usize) as u128;
    Some(particles + chunks + outputs + list + b * 64)
}

/// The bootstrap filter over every track of `z` on GPU `ordinal`.
pub fn particle_filter_cuda<T: Real>(
    ordinal: usize,
    model: &PfModel,
    z: &Measurements<T>,
    opts: &PfOptions,
) -> Result<PfOutput<T>> {
    cuda::catch(|| {
        let mut clock = cuda::PhaseClock::new(PHASES.len(), false);
        run(
            ordinal,
            model,
            z,
            opts,
            block_for(z.tracks, opts.particles),
            &mut clock,
        )
    })
}

/// The phases [`phase_times`] reports, in its order: drawing the ancestors (the
/// resampler's selection), the step (propagation and weights, fused), the combination
/// (normalisation, the estimate, the log-likelihood, the resampling decision), and the
/// cumulative weights the selection reads.
pub const PHASES: [&str; 4] = [
    "selection",
    "propagate+weight",
    "normalise+estimate",
    "cumulative sum",
];

/// [`particle_filter_cuda`] with the GPU time of each of [`PHASES`] (seconds, by CUDA
/// events recorded between the launches; the events add a little time of their own):
/// the shares of Hendeby et al.'s Figure 6. For benchmarks.
#[doc(hidden)]
pub fn phase_times<T: Real>(
    ordinal: usize,
    model: &PfModel,
    z: &Measurements<T>,
    opts: &PfOptions,
) -> Result<(PfOutput<T>, Vec<f64>)> {
    cuda::catch(|| {
        let mut clock = cuda::PhaseClock::new(PHASES.len(), true);
        let out = run(
            ordinal,
            model,
            z,
            opts,
            block_for(z.tracks, opts.particles),
            &mut clock,
        )?;
        Ok((out, clock.totals()?))
    })
}

/// The filter's kernels for `model` in precision `T` with blocks of `block` threads,
/// compiled by NVRTC or taken from the caches (in memory, then on disk).
fn module_for<T: Real>(
    gpu: &cuda::Gpu,
    model: &PfModel,
    block: u32,
) -> Result<std::sync::Arc<cuda::Module>> {
    use super::ParticleModel;
    let (nx, ny) = (
        ParticleModel::<f64>::nx(model),
        ParticleModel::<f64>::ny(model),
    );
    let src = source::<T>(model, block)?;
    // Names the module in errors and its disk-cache file.
    let what = format!(
        "kestrel-pf-{}-nx{nx}-ny{ny}-{}-b{block}",
        model.kind_name(),
        T::NAME
    );
    gpu.module(&what, &src, &KERNELS)
}

/// Opens GPU `ordinal` and compiles (or loads from the caches) the kernels that
/// [`particle_filter_cuda`] runs for `tracks` filters of `particles` particles, so that a
/// caller can time set-up apart from filtering; a custom model's compiler errors come
/// out here.
pub fn compile_kernels<T: Real>(
    ordinal: usize,
    model: &PfModel,
    tracks: usize,
    particles: usize,
) -> Result<()> {
    cuda::catch(|| {
        let gpu = cuda::gpu(ordinal)?;
        module_for::<T>(&gpu, model, block_for(tracks, particles)).map(|_| ())
    })
}

/// [`particle_filter_cuda`] with blocks of `block` threads (a power of two from 32 to
/// 512: the kernels' shared memory), for tuning.
#[doc(hidden)]
pub fn particle_filter_cuda_block<T: Real>(
    ordinal: usize,
    model: &PfModel,
    z: &Measurements<T>,
    opts: &PfOptions,
    block: u32,
) -> Result<PfOutput<T>> {
    if !block.is_power_of_two() || !(32..=512).contains(&block) {
        return Err(Error::input(format!(
            "{block} threads a block: a power of two from 32 to 512"
        )));
    }
    cuda::catch(|| {
        let mut clock = cuda::PhaseClock::new(PHASES.len(), false);
        run(ordinal, model, z, opts, block, &mut clock)
    })
}

fn run<T: Real>(
    ordinal: usize,
    model: &PfModel,
    z: &Measurements<T>,
    opts: &PfOptions,
    block: u32,
    clock: &mut cuda::PhaseClock,
) -> Result<PfOutput<T>> {
    use super::ParticleModel;
    let (nx, ny) = (
        ParticleModel::<f64>::nx(model),
        ParticleModel::<f64>::ny(model),
    );
    super::check(nx, ny, z, opts)?;
    let (scheme, steps_b) = scheme_of(opts.resampler)?;
    let (bn, t, n) = (z.tracks, z.steps, opts.particles);
    if bn > 65_535 {
        return Err(Error::Unsupported(format!(
            "{bn} tracks: the GPU particle filter runs at most 65535 filters at once (split the input, or run on the CPU)"
        )));
    }
    // The outputs on the host first, then the particles on the GPU.
    super::check_memory::<T>(bn, t, nx, 0, 0)?;
    let gpu = cuda::gpu(ordinal)?;
    let sc = std::mem::size_of::<T>();
    let per = chunk_per(bn, n, gpu.sms, block);
    let chunk = per * block as usize;
    let g = n.div_ceil(chunk);
    let need = device_bytes(bn, t, n, nx, ny, sc, g, opts.keep_particles).unwrap_or(u128::MAX);
    let free = gpu.usable_memory()?;
    if need > free as u128 {
        return Err(Error::input(format!(
            "{n} particles x {bn} tracks x {t} steps would need {:.1} GB on {}; {:.1} GB is free",
            need as f64 / 1e9,
            gpu.label(),
            free as f64 / 1e9
        )));
    }
    let module = module_for::<T>(&gpu, model, block)?;
    let stream = gpu.stream.clone();
    let rec_len = 1 + 2 + nx + nx * (nx + 1) / 2 + nx;
    let mut x = DevBuf::<T>::new(&gpu, bn * n * nx, "particles")?;
    let mut xn = DevBuf::<T>::new(&gpu, bn * n * nx, "propagated particles")?;
    let mut lw = DevBuf::<T>::new(&gpu, bn * n, "log-weights")?;
    let mut lwn = DevBuf::<T>::new(&gpu, bn * n, "new log-weights")?;
    // The resamplers of resample.cu read the cumulative weights (systematic and
    // stratified form them in `pf_offspring` without storing them; Metropolis and
    // rejection need none).
    let sorted = scheme >= SYSTEMATIC_GRID;
    // Systematic and stratified: `pf_offspring`'s list of long ranges for `pf_fill`.
    let offspring = scheme <= 1;
    let cap = if offspring { offspring_list(n, g) } else { 1 };
    let nlong = DevBuf::<u32>::new(&gpu, bn, "long ranges' counts")?;
    let list = DevBuf::<u32>::new(&gpu, bn * 3 * cap, "long ranges")?;
    let capu = u32::try_from(cap)
        .map_err(|_| Error::input(format!("{n} particles: too many for the GPU filter")))?;
    let cdf = DevBuf::<f64>::new(&gpu, if sorted { bn * n } else { 1 }, "cumulative weights")?;
    // Multinomial: the chunks' sums of exponentials; subsets: the plan.
    let mn_chunks = n.div_ceil(super::resample::CHUNK);
    let subsets = (steps_b as usize).clamp(1, n);
    let scratch_len = match scheme {
        MULTINOMIAL => bn * (mn_chunks + 1),
        _ => 1,
    };
    let mn = DevBuf::<f64>::new(&gpu, scratch_len, "multinomial sums")?;
    let plan = DevBuf::<u32>::new(
        &gpu,
        if scheme == SUBSETS {
            bn * 3 * subsets
        } else {
            1
        },
        "the subsets' plan",
    )?;
    let anc = DevBuf::<u32>::new(&gpu, bn * n, "ancestors")?;
    let rec = DevBuf::<f64>::new(&gpu, bn * g * rec_len, "chunk records")?;
    let coef = DevBuf::<f64>::new(&gpu, bn * g, "chunk scales")?;
    let offs = DevBuf::<f64>::new(&gpu, bn * g, "chunk offsets")?;
    let fmax = DevBuf::<f64>::new(&gpu, bn, "maxima")?;
    let logprev = DevBuf::<f64>::new(&gpu, bn, "log-sums")?;
    let wtot = DevBuf::<f64>::new(&gpu, bn, "weight totals")?;
    let flag = DevBuf::<u32>::new(&gpu, bn, "resampling flags")?;
    let fail = DevBuf::<u32>::new(&gpu, bn, "failures")?;
    let zd = DevBuf::<T>::new(&gpu, z.data.len(), "measurements")?;
    let mean = DevBuf::<T>::new(&gpu, bn * t * nx, "means")?;
    let cov = DevBuf::<T>::new(&gpu, bn * t * nx * nx, "covariances")?;
    let ll = DevBuf::<T>::new(&gpu, bn * t, "log-likelihoods")?;
    let ess = DevBuf::<T>::new(&gpu, bn * t, "effective sample sizes")?;
    for buf in [&mean, &cov, &ll, &ess] {
        buf.poison(&stream)?;
    }
    htod(&stream, &z.data, &zd, 0, "copying the measurements")?;
    cuda::htod(
        &stream,
        &vec![0u32; bn],
        &fail,
        0,
        "clearing the failure flags",
    )?;
    let key = key_of(opts.seed);
    // Filter b draws from the streams of track b0 + b of the whole batch.
    let b0 = opts.track_offset;
    let chunks = (g as u32, bn as u32, 1);
    let slots = (
        n.div_ceil((ANCESTOR_ITEMS * block) as usize) as u32,
        bn as u32,
        1,
    );
    let each = (n.div_ceil(block as usize) as u32, bn as u32, 1);
    let one = (1, bn as u32, 1);
    // pf_fill: about two blocks an SM over the filters (a warp a listed piece).
    let fill = (
        (2 * gpu.sms as u32).div_ceil(bn as u32).max(1),
        bn as u32,
        1,
    );
    let blk = (block, 1, 1);
    let (nu, tu, gu, peru) = (n as u32, t as u32, g as u32, per as u32);
    clock.mark(&gpu, &stream, 0)?;
    for k in 0..t as u32 {
        let draw = Draw {
            flag: &flag,
            n: nu,
            kr: k.saturating_sub(1),
            key0: key[0],
            key1: key[1],
            b0,
        };
        if k > 0 && scheme >= SYSTEMATIC_GRID {
            let (cdf, wtot, anc) = (&cdf, &wtot, &anc);
            match scheme {
                MULTINOMIAL => {
                    let grid = ((mn_chunks as u32).div_ceil(block), bn as u32, 1);
                    let sums = &mn;
                    let p = PfMnSums { draw, sums };
                    cuda::launch(&stream, &module, "pf_mn_sums", grid, blk, &p)?;
                    let bn = bn as u32;
                    let p = PfMnOffsets { draw, sums, bn };
                    let per_filter = (bn.div_ceil(block), 1, 1);
                    cuda::launch(&stream, &module, "pf_mn_offsets", per_filter, blk, &p)?;
                    let p = PfMnWalk {
                        cdf,
                        wtot,
                        draw,
                        sums,
                        anc,
                    };
                    cuda::launch(&stream, &module, "pf_mn_walk", grid, blk, &p)?;
                }
                SUBSETS => {
                    let (k, plan) = (subsets as u32, &plan);
                    let p = PfSubPlan {
                        cdf,
                        wtot,
                        draw,
                        k,
                        plan,
                    };
                    cuda::launch(&stream, &module, "pf_sub_plan", one, blk, &p)?;
                    let p = PfSubDraw {
                        cdf,
                        draw,
                        k,
                        plan,
                        anc,
                    };
                    let grid = (subsets as u32, bn as u32, 1);
                    cuda::launch(&stream, &module, "pf_sub_draw", grid, blk, &p)?;
                }
                _ => {
                    let strat = u32::from(scheme == STRATIFIED_GRID);
                    let p = PfGrid {
                        cdf,
                        wtot,
                        draw,
                        strat,
                        anc,
                    };
                    cuda::launch(&stream, &module, "pf_grid", each, blk, &p)?;
                }
            }
        } else if k > 0 && !offspring {
            let p = PfAncestors {
                lw: &lw,
                fmx: &fmax,
                anc: &anc,
                draw,
                scheme,
                steps_b,
            };
            cuda::launch(&stream, &module, "pf_ancestors", slots, blk, &p)?;
        }
        if k > 0 {
            clock.mark(&gpu, &stream, 0)?;
        }
        cuda::launch(
            &stream,
            &module,
            "pf_step",
            chunks,
            blk,
            &PfStep {
                x: &x,
                xn: &xn,
                lw: &lw,
                lwn: &lwn,
                anc: &anc,
                flag: &flag,
                rec: &rec,
                z: &zd,
                k,
                n: nu,
                steps: tu,
                per: peru,
                g: gu,
                key0: key[0],
                key1: key[1],
                b0,
            },
        )?;
        clock.mark(&gpu, &stream, 1)?;
        std::mem::swap(&mut x, &mut xn);
        std::mem::swap(&mut lw, &mut lwn);
        cuda::launch(
            &stream,
            &module,
            "pf_combine",
            one,
            blk,
            &PfCombine {
                rec: &rec,
                coef: &coef,
                offs: &offs,
                z: &zd,
                fmx: &fmax,
                logprev: &logprev,
                wtot: &wtot,
                flag: &flag,
                fail: &fail,
                mean: &mean,
                cov: &cov,
                loglik: &ll,
                ess: &ess,
                nlong: &nlong,
                k,
                n: nu,
                steps: tu,
                g: gu,
                threshold: opts.ess_threshold,
            },
        )?;
        clock.mark(&gpu, &stream, 2)?;
        if k + 1 < t as u32 && offspring {
            let p = PfOffspring {
                lw: &lw,
                rec: &rec,
                coef: &coef,
                offs: &offs,
                wtot: &wtot,
                flag: &flag,
                anc: &anc,
                nlong: &nlong,
                list: &list,
                cap: capu,
                n: nu,
                per: peru,
                g: gu,
                kr: k,
                key0: key[0],
                key1: key[1],
                b0,
                scheme,
            };
            cuda::launch(&stream, &module, "pf_offspring", chunks, blk, &p)?;
            let p = PfFill {
                flag: &flag,
                nlong: &nlong,
                list: &list,
                anc: &anc,
                cap: capu,
                n: nu,
            };
            cuda::launch(&stream, &module, "pf_fill", fill, blk, &p)?;
        }
        if k + 1 < t as u32 && sorted {
            cuda::launch(
                &stream,
                &module,
                "pf_cdf",
                chunks,
                blk,
                &PfCdf {
                    lw: &lw,
                    rec: &rec,
                    coef: &coef,
                    offs: &offs,
                    cdf: &cdf,
                    flag: &flag,
                    n: nu,
                    per: peru,
                    g: gu,
                },
            )?;
        }
        if k + 1 < t as u32 && (sorted || offspring) {
            clock.mark(&gpu, &stream, 3)?;
        }
    }
    let mut failed = vec![0u32; bn];
    cuda::dtoh(&stream, &fail, 0, &mut failed, "reading the failure flags")?;
    let mut est = Estimates::<T>::nan(bn, t, nx, true);
    let mut ess_h = vec![T::nan(); bn * t];
    cuda::dtoh(&stream, &mean, 0, &mut est.mean, "copying the means")?;
    cuda::dtoh(&stream, &cov, 0, &mut est.cov, "copying the covariances")?;
    let llh = est
        .loglik
        .as_mut()
        .expect("allocated with a log-likelihood");
    cuda::dtoh(&stream, &ll, 0, llh, "copying the log-likelihoods")?;
    cuda::dtoh(
        &stream,
        &ess,
        0,
        &mut ess_h,
        "copying the effective sample sizes",
    )?;
    let particles = if opts.keep_particles {
        let w = DevBuf::<T>::new(&gpu, bn * n, "weights")?;
        cuda::launch(
            &stream,
            &module,
            "pf_weights_out",
            each,
            blk,
            &PfWeightsOut {
                lw: &lw,
                fmx: &fmax,
                w: &w,
                n: nu,
            },
        )?;
        let mut xs = vec![T::nan(); bn * n * nx];
        let mut ws = vec![T::nan(); bn * n];
        let mut tot = vec![0.0f64; bn];
        cuda::dtoh(&stream, &x, 0, &mut xs, "copying the particles")?;
        cuda::dtoh(&stream, &w, 0, &mut ws, "copying the weights")?;
        cuda::dtoh(&stream, &wtot, 0, &mut tot, "copying the weight totals")?;
        cuda::sync(&stream, "the particle filter")?;
        for (b, c) in ws.chunks_mut(n).enumerate() {
            let inv = T::of(1.0 / tot[b]);
            c.iter_mut().for_each(|v| *v *= inv);
        }
        Some((xs, ws))
    } else {
        None
    };
    cuda::sync(&stream, "the particle filter")?;
    if let Some((b, &k)) = failed.iter().enumerate().find(|(_, &k)| k > 0) {
        let k = (k - 1) as usize;
        return Err(Error::input(format!(
            "track {b}, step {k}: every particle has likelihood zero (or not a number): the measurement {:?} is impossible under the model",
            z.at(b, k).iter().map(|v| v.to_f64()).collect::<Vec<_>>()
        )));
    }
    Ok(PfOutput {
        estimates: est,
        ess: ess_h,
        particles,
    })
}

fn htod<T>(
    stream: &cudarc::driver::CudaStream,
    src: &[T],
    dst: &DevBuf<T>,
    at: usize,
    what: &str,
) -> Result<()> {
    cuda::htod(stream, src, dst, at, what)
}

#[cfg(test)]
mod param_tests {
    /// Every parameter struct matches its kernel's declaration.
    #[test]
    fn the_parameter_structs_match_the_kernels() {
        let src = String::from(super::source::PF) + super::source::RESAMPLE;
        crate::cuda::assert_matches(&src, super::params::SIGNATURES);
    }
}
