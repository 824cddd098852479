//! The HMM family on the GPU: the filter, smoother and Viterbi path of every track in
//! chunks of steps (`kernels/*.cu`; see `kernels/common.cuh` for the layout). The
//! parallel method cuts each track into up to [`MAX_CHUNKS`] chunks and combines their
//! elements (reduce, a fold of the chunk elements per track, sweep: the chunked scan,
//! `fastest`, whatever scan algorithm is named); the sequential method runs one chunk a
//! track, one thread each. Tracks go in groups that fit the device's memory.

mod params;
pub mod source;

use super::{HiddenMarkovModel, HmmMethod, HmmOptions, HmmOutput};
use crate::cuda::{
    catch, download, dtoh, gpu, launch, sync, upload, Arg, Buf, DevBuf, Gpu, Module, Params,
};
use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::linalg::Real;
use params::{BwdSweep, Carry, FwdSweep, PathReduce, PathSweep, Reduce, VitSweep};
use std::sync::Arc;

/// The most states the kernels are compiled for (a thread holds `K x K` values).
pub const MAX_STATES: usize = 32;
/// The most observation components.
pub const MAX_NY: usize = 16;
/// Chunks per track of the parallel method, at most.
pub const MAX_CHUNKS: usize = 4096;
/// Steps per chunk of the parallel method, at least.
pub const MIN_CHUNK: usize = 32;
/// Threads per block.
const BLOCK: u32 = 128;

/// The chunk length and count of a track of `steps` steps.
pub fn chunking(steps: usize, method: HmmMethod) -> (usize, usize) {
    match method {
        HmmMethod::Sequential => (steps.max(1), 1),
        HmmMethod::Parallel => {
            let len = steps.div_ceil(MAX_CHUNKS).max(MIN_CHUNK);
            (len, steps.div_ceil(len).max(1))
        }
    }
}

/// The model's arrays as the kernels read them (`HmmModel` in `common.cuh`): in the
/// run's precision, and the Viterbi's in f64 on the grid.
pub struct ModelArrays<T> {
    /// `[K][K]`.
    pub a: Vec<T>,
    /// `[K]`.
    pub init: Vec<T>,
    /// Categorical `ln p` at `[code][K]`.
    pub lnp: Vec<T>,
    /// Gaussian means `[K][ny]`, Cholesky factors `[K][ny][ny]`, normalisers `[K]`.
    pub means: Vec<T>,
    /// See `means`.
    pub chol: Vec<T>,
    /// See `means`.
    pub norm: Vec<T>,
    /// `ln a` on the grid.
    pub lna64: Vec<f64>,
    /// `ln init` on the grid.
    pub lni64: Vec<f64>,
    /// Categorical `ln p` on the grid.
    pub lnp64: Vec<f64>,
    /// Gaussian, f64.
    pub means64: Vec<f64>,
    /// Gaussian, f64.
    pub chol64: Vec<f64>,
    /// Gaussian, f64.
    pub norm64: Vec<f64>,
}

impl<T: Real> ModelArrays<T> {
    /// From the model.
    pub fn new(model: &HiddenMarkovModel) -> Self {
        let p = super::emission::Prepared::<T>::new(model);
        let p64 = super::emission::Prepared::<f64>::new(model);
        ModelArrays {
            a: p.a,
            init: p.init,
            lnp: p.ln_probs,
            means: p.means,
            chol: p.chol,
            norm: p.norm,
            lna64: p64.ln_a,
            lni64: p64.ln_init,
            lnp64: p64
                .ln_probs
                .iter()
                .map(|&v| super::viterbi::on_grid(v))
                .collect(),
            means64: p64.means,
            chol64: p64.chol,
            norm64: p64.norm,
        }
    }
}

/// Kernel time of the last run on this thread, in milliseconds (benchmarks).
pub fn last_kernel_ms() -> f64 {
    LAST_MS.with(|c| c.get())
}

thread_local! {
    static LAST_MS: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::NAN) };
}

pub(crate) fn run<T: Real>(
    ordinal: usize,
    model: &HiddenMarkovModel,
    obs: &Measurements<T>,
    opts: &HmmOptions,
) -> Result<HmmOutput<T>> {
    let (k, ny) = (model.states(), model.ny());
    if k > MAX_STATES || ny > MAX_NY {
        return Err(Error::Unsupported(format!(
            "hmm on cuda handles up to {MAX_STATES} states and {MAX_NY} observation components \
             (this model: {k} and {ny}); use --device cpu"
        )));
    }
    let arrays = ModelArrays::<T>::new(model);
    catch(|| run_on(ordinal, model, &arrays, obs, opts.method))
}

struct Dev<T> {
    a: DevBuf<T>,
    init: DevBuf<T>,
    lnp: DevBuf<T>,
    means: DevBuf<T>,
    chol: DevBuf<T>,
    norm: DevBuf<T>,
    lna64: DevBuf<f64>,
    lni64: DevBuf<f64>,
    lnp64: DevBuf<f64>,
    means64: DevBuf<f64>,
    chol64: DevBuf<f64>,
    norm64: DevBuf<f64>,
}

impl<T: Real> Dev<T> {
    /// `HmmModel` as bytes: twelve device pointers in the order of the struct.
    fn bytes(&self) -> Vec<u8> {
        [
            self.a.ptr(),
            self.init.ptr(),
            self.lnp.ptr(),
            self.means.ptr(),
            self.chol.ptr(),
            self.norm.ptr(),
            self.lna64.ptr(),
            self.lni64.ptr(),
            self.lnp64.ptr(),
            self.means64.ptr(),
            self.chol64.ptr(),
            self.norm64.ptr(),
        ]
        .iter()
        .flat_map(|p| p.to_le_bytes())
        .collect()
    }
}

fn run_on<T: Real>(
    ordinal: usize,
    model: &HiddenMarkovModel,
    m: &ModelArrays<T>,
    obs: &Measurements<T>,
    method: HmmMethod,
) -> Result<HmmOutput<T>> {
    let g = gpu(ordinal)?;
    let (k, ny) = (model.states(), model.ny());
    let categorical = matches!(model.emission(), super::Emission::Categorical { .. });
    let module = g.module(
        "the hidden Markov model",
        &source::source(k, ny, categorical, T::NAME),
        &source::KERNELS,
    )?;
    let st = &g.stream;
    let buf = |v: &[T], what: &str| DevBuf::from_slice(&g, st, v, what);
    let buf64 = |v: &[f64], what: &str| DevBuf::from_slice(&g, st, v, what);
    let dev = Dev {
        a: buf(&m.a, "model")?,
        init: buf(&m.init, "model")?,
        lnp: buf(&m.lnp, "model")?,
        means: buf(&m.means, "model")?,
        chol: buf(&m.chol, "model")?,
        norm: buf(&m.norm, "model")?,
        lna64: buf64(&m.lna64, "model")?,
        lni64: buf64(&m.lni64, "model")?,
        lnp64: buf64(&m.lnp64, "model")?,
        means64: buf64(&m.means64, "model")?,
        chol64: buf64(&m.chol64, "model")?,
        norm64: buf64(&m.norm64, "model")?,
    };
    let mbytes = dev.bytes();
    let (b, steps) = (obs.tracks(), obs.steps());
    let (len, chunks) = chunking(steps, method);
    let sz = std::mem::size_of::<T>();
    // Bytes a track needs on the device.
    let per_track = steps * (ny * sz + 2 * k * sz + sz + k + 8)
        + chunks * ((k * k + 2 * k) * sz + (k * k + k) * (sz + 8) + 4 * k + 4)
        + 4;
    let budget = g.usable_memory()? / 2;
    let group = (budget / per_track.max(1)).clamp(1, 65_535).min(b.max(1));
    if budget < per_track {
        return Err(Error::TooLarge {
            what: format!("hmm on cuda: one track of {steps} steps"),
            bytes: per_track as u128,
            limit: format!("half the GPU's free memory ({budget} bytes)"),
        });
    }
    let mut out = HmmOutput {
        tracks: b,
        steps,
        states: k,
        filtered: vec![T::zero(); b * steps * k],
        smoothed: vec![T::zero(); b * steps * k],
        loglik: vec![T::zero(); b * steps],
        path: vec![0i64; b * steps],
    };
    let bufs = Buffers::<T>::new(&g, group, steps, ny, k, chunks)?;
    let timer = crate::cuda::EventTimer::new(&g)?;
    let mut ms = 0.0;
    let mut b0 = 0;
    while b0 < b {
        let nb = group.min(b - b0);
        upload(
            &g,
            st,
            &obs.data()[b0 * steps * ny..(b0 + nb) * steps * ny],
            &bufs.y,
            0,
            "observations",
        )?;
        bufs.poison(st)?;
        timer.start(st)?;
        launch_all(st, &module, &bufs, &mbytes, nb, steps, len, chunks)?;
        timer.stop(st)?;
        ms += f64::from(timer.elapsed_ms()?);
        let span = b0 * steps..(b0 + nb) * steps;
        download(
            &g,
            st,
            &bufs.filtered,
            0,
            &mut out.filtered[span.start * k..span.end * k],
            "filtered",
        )?;
        download(
            &g,
            st,
            &bufs.smoothed,
            0,
            &mut out.smoothed[span.start * k..span.end * k],
            "smoothed",
        )?;
        download(
            &g,
            st,
            &bufs.loglik,
            0,
            &mut out.loglik[span.clone()],
            "log-likelihoods",
        )?;
        dtoh(st, &bufs.path, 0, &mut out.path[span], "Viterbi paths")?;
        sync(st, "the hidden Markov model")?;
        b0 += nb;
    }
    LAST_MS.with(|c| c.set(ms));
    check_outputs(&out)?;
    Ok(out)
}

/// The first impossible observation (log-likelihood -inf) is the input's error; any
/// other value not written (NaN from the poison) is the device's.
fn check_outputs<T: Real>(o: &HmmOutput<T>) -> Result<()> {
    let steps = o.steps.max(1);
    if let Some(i) = o.loglik.iter().position(|v| !v.is_finite_value()) {
        if o.loglik[i].is_nan_value() {
            return Err(Error::Cuda(format!(
                "the HMM kernels left the log-likelihood of track {}, step {} unwritten",
                i / steps,
                i % steps
            )));
        }
        return Err(super::impossible(i / steps, i % steps));
    }
    let k = o.states.max(1);
    for (what, v) in [("filtered", &o.filtered), ("smoothed", &o.smoothed)] {
        if let Some(i) = v.iter().position(|v| !v.is_finite_value()) {
            return Err(Error::Cuda(format!(
                "the HMM kernels left the {what} distribution of track {}, step {} unwritten",
                i / k / steps,
                (i / k) % steps
            )));
        }
    }
    if let Some(i) = o.path.iter().position(|&s| s < 0 || s as usize >= k) {
        return Err(Error::Cuda(format!(
            "the HMM kernels left the path of track {}, step {} unwritten",
            i / steps,
            i % steps
        )));
    }
    Ok(())
}

/// The device buffers of one group of tracks.
struct Buffers<T> {
    y: DevBuf<T>,
    elem: DevBuf<T>,
    start: DevBuf<T>,
    filtered: DevBuf<T>,
    loglik: DevBuf<T>,
    g: DevBuf<T>,
    next: DevBuf<T>,
    smoothed: DevBuf<T>,
    pm: DevBuf<f64>,
    dstart: DevBuf<f64>,
    back: DevBuf<u8>,
    fin: DevBuf<i32>,
    phi: DevBuf<i32>,
    xin: DevBuf<i32>,
    path: DevBuf<i64>,
}

impl<T: Real> Buffers<T> {
    fn new(
        g: &Arc<Gpu>,
        nb: usize,
        steps: usize,
        ny: usize,
        k: usize,
        chunks: usize,
    ) -> Result<Self> {
        let (bt, bc) = (nb * steps, nb * chunks);
        Ok(Buffers {
            y: DevBuf::new(g, bt * ny, "observations")?,
            elem: DevBuf::new(g, bc * (k * k + k), "filter elements")?,
            start: DevBuf::new(g, bc * k, "chunk starts")?,
            filtered: DevBuf::new(g, bt * k, "filtered")?,
            loglik: DevBuf::new(g, bt, "log-likelihoods")?,
            g: DevBuf::new(g, bc * k * k, "smoother elements")?,
            next: DevBuf::new(g, bc * k, "chunk ends")?,
            smoothed: DevBuf::new(g, bt * k, "smoothed")?,
            pm: DevBuf::new(g, bc * k * k, "max-product elements")?,
            dstart: DevBuf::new(g, bc * k, "chunk scores")?,
            back: DevBuf::new(g, bt * k, "back-pointers")?,
            fin: DevBuf::new(g, nb, "final states")?,
            phi: DevBuf::new(g, bc * k, "chunk maps")?,
            xin: DevBuf::new(g, bc, "chunk states")?,
            path: DevBuf::new(g, bt, "Viterbi paths")?,
        })
    }

    /// Every output and intermediate set to all-ones bytes (NaN, or -1 for the integers),
    /// so that an element a kernel fails to write shows.
    fn poison(&self, st: &cudarc::driver::CudaStream) -> Result<()> {
        self.filtered.poison(st)?;
        self.smoothed.poison(st)?;
        self.loglik.poison(st)?;
        self.path.poison(st)?;
        self.fin.poison(st)?;
        Ok(())
    }
}

/// Where one pass's kernels run: a thread per chunk (`grid`, tracks along y) and a thread
/// per track (`tracks`).
struct Pass<'s> {
    st: &'s cudarc::driver::CudaStream,
    module: &'s Module,
    grid: (u32, u32, u32),
    tracks: (u32, u32, u32),
}

impl Pass<'_> {
    /// One chunked pass `name`: where the tracks have several chunks, `{name}_reduce`
    /// (each chunk's element) and `{name}_carry` (each chunk's start), then
    /// `{name}_sweep` of every chunk from its start.
    fn run<'a, R: Params<'a>, S: Params<'a>>(
        &self,
        name: &str,
        chunked: Option<(R, Carry<'a>)>,
        sweep: S,
    ) -> Result<()> {
        let blk = (BLOCK, 1, 1);
        if let Some((reduce, carry)) = chunked {
            let reduce_name = format!("{name}_reduce");
            launch(self.st, self.module, &reduce_name, self.grid, blk, &reduce)?;
            let carry_name = format!("{name}_carry");
            launch(
                self.st,
                self.module,
                &carry_name,
                self.tracks,
                (64, 1, 1),
                &carry,
            )?;
        }
        let sweep_name = format!("{name}_sweep");
        launch(self.st, self.module, &sweep_name, self.grid, blk, &sweep)
    }
}

#[allow(clippy::too_many_arguments)]
fn launch_all<'a, T: Real>(
    st: &cudarc::driver::CudaStream,
    module: &Module,
    d: &'a Buffers<T>,
    mbytes: &'a [u8],
    nb: usize,
    steps: usize,
    len: usize,
    chunks: usize,
) -> Result<()> {
    let pass = Pass {
        st,
        module,
        grid: (chunks.div_ceil(BLOCK as usize) as u32, nb as u32, 1),
        tracks: (nb.div_ceil(64) as u32, 1, 1),
    };
    let (steps, len, chunks, tracks) = (steps as i64, len as i64, chunks as i64, nb as i64);
    let m = Arg::Bytes(mbytes);
    let many = chunks > 1;
    // Each chunked pass's reduce and carry, from what the chunks read (`src`), through
    // their elements (`elem`), to the chunks' starts (`start`).
    let chunked = |src: Buf<'a>, elem: Buf<'a>, start: Buf<'a>| {
        let reduce = Reduce {
            m,
            src,
            elem,
            steps,
            len,
            chunks,
        };
        many.then_some((
            reduce,
            Carry {
                elem,
                start,
                chunks,
                tracks,
            },
        ))
    };
    let (y, filtered) = (&d.y, &d.filtered);
    pass.run(
        "fwd",
        chunked(y, &d.elem, &d.start),
        FwdSweep {
            m,
            y,
            start: &d.start,
            filtered,
            loglik: &d.loglik,
            steps,
            len,
            chunks,
        },
    )?;
    pass.run(
        "bwd",
        chunked(filtered, &d.g, &d.next),
        BwdSweep {
            m,
            filtered,
            next: &d.next,
            smoothed: &d.smoothed,
            steps,
            len,
            chunks,
        },
    )?;
    let (back, final_state) = (&d.back, &d.fin);
    pass.run(
        "vit",
        chunked(y, &d.pm, &d.dstart),
        VitSweep {
            m,
            y,
            dstart: &d.dstart,
            back,
            final_state,
            steps,
            len,
            chunks,
        },
    )?;
    let path_chunked = many.then_some((
        PathReduce {
            back,
            final_state,
            phi: &d.phi,
            steps,
            len,
            chunks,
        },
        Carry {
            elem: &d.phi,
            start: &d.xin,
            chunks,
            tracks,
        },
    ));
    pass.run(
        "path",
        path_chunked,
        PathSweep {
            back,
            final_state,
            xin: &d.xin,
            path: &d.path,
            steps,
            len,
            chunks,
        },
    )
}

#[cfg(test)]
mod param_tests {
    /// Every parameter struct matches its kernel's declaration.
    #[test]
    fn the_parameter_structs_match_the_kernels() {
        use super::source::{BACKWARD, FORWARD, VITERBI};
        let src = String::from(FORWARD) + BACKWARD + VITERBI;
        crate::cuda::assert_matches(&src, super::params::SIGNATURES);
    }
}
