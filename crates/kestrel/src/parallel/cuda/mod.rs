//! The parallel-in-time Kalman filter and smoothers on a CUDA GPU: the elements and
//! operators of `crate::parallel` as CUDA kernels (`kernels/parallel_*.cu`), compiled by
//! NVRTC for the model's `NX`, `NY` and scalar type, and the scans of
//! Sarkka & Garcia-Fernandez with one launch per level (Hillis-Steele, Blelloch,
//! Ladner-Fischer, Sengupta et al.'s hybrid), a one-thread fold, and the default chunked
//! scan.
//!
//! Many tracks run as one batch: each kernel and each scan level is one launch for a
//! whole group of tracks (the track is the grid's second dimension), groups as large as
//! the device's memory allows.

use crate::cuda::{by_precision, catch, gpu, Gpu, Module as Kernels, Params};
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::kalman::dense::ConvertedModel;
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::scan::ScanAlgorithm;
use cudarc::driver::{CudaStream, DeviceRepr, LaunchConfig, ValidAsZeroBits};
use std::sync::Arc;

const SOURCES: [&str; 6] = [
    include_str!("../kernels/parallel_ops.cu"),
    include_str!("../kernels/parallel_scan.cu"),
    include_str!("../kernels/parallel_model.cu"),
    include_str!("../kernels/parallel_fused.cu"),
    include_str!("../kernels/parallel_means.cu"),
    include_str!("../kernels/parallel_seq.cu"),
];

const SCAN_KERNELS: [&str; 12] = [
    "seq",
    "up",
    "lf_down",
    "hs",
    "hs_strided",
    "bl_load",
    "bl_clear_last",
    "bl_down",
    "bl_fix",
    "chunk",
    "fix",
    "warp",
];
const MODEL_KERNELS: [&str; 25] = [
    "pf_reduce",
    "pf_sweep",
    "ps_reduce",
    "ps_sweep",
    "tf_reduce",
    "tf_sweep",
    "pf_build",
    "pf_extract",
    "ps_build",
    "ps_extract",
    "tf_shift",
    "tf_combine",
    "kf_seq",
    "poison",
    "pf_reduce_at",
    "pf_sweep_at",
    "tf_reduce_at",
    "tf_sweep_at",
    "fe_pick",
    "pm_build",
    "pm_extract",
    "pm_reduce",
    "pm_sweep",
    "seq_filter",
    "seq_rts",
];

/// The largest dimensions the kernels are compiled for (the elements live in registers;
/// beyond nx = 8 they spill to local memory: slower, still exact).
pub const MAX_NX: usize = 12;
/// See [`MAX_NX`].
pub const MAX_NY: usize = 12;

/// Threads per block of every launch.
const BLOCK: u32 = 128;

/// A scalar the kernels run in.
pub trait GpuReal: Real + DeviceRepr + ValidAsZeroBits {}
impl GpuReal for f32 {}
impl GpuReal for f64 {}

pub(crate) fn cu<T>(
    r: std::result::Result<T, cudarc::driver::DriverError>,
    what: &str,
) -> Result<T> {
    r.map_err(|e| Error::Cuda(format!("{what}: {e:?}")))
}

/// `Ok` when the driver and NVRTC load and device `ordinal` exists; else why not.
pub fn available(ordinal: usize) -> std::result::Result<(), String> {
    crate::cuda::available(ordinal)
}

/// The name of device `ordinal`.
pub fn device_name(ordinal: usize) -> Result<String> {
    crate::cuda::device_name(ordinal)
}

/// The translation unit for `nx`, `ny` and scalar `D`.
pub fn source(nx: usize, ny: usize, dtype: &str) -> String {
    let mut s = source_prelude(nx, ny, dtype);
    for src in SOURCES {
        s += src;
        s += "\n";
    }
    s
}

/// The square-root kernels' translation unit (`kernels/parallel_sqrt*.cu` after the
/// operators' and scans' sources) for `nx`, `ny` and scalar `D`.
pub fn sqrt_source(nx: usize, ny: usize, dtype: &str) -> String {
    let mut s = source_prelude(nx, ny, dtype);
    for src in [SOURCES[0], SOURCES[1], SQRT_SOURCES[0], SQRT_SOURCES[1]] {
        s += src;
        s += "\n";
    }
    s
}

fn source_prelude(nx: usize, ny: usize, dtype: &str) -> String {
    let (real, nan) = if dtype == "f64" {
        ("double", "__longlong_as_double(0x7ff8000000000000ULL)")
    } else {
        ("float", "__int_as_float(0x7fc00000)")
    };
    format!(
        "#define NX {nx}\n#define NY {ny}\ntypedef {real} real;\n#define NAN {nan}\n{}\n",
        crate::cuda::DEVICE_HEADER
    )
}

const SQRT_SOURCES: [&str; 2] = [
    include_str!("../kernels/parallel_sqrt.cu"),
    include_str!("../kernels/parallel_sqrt_fused.cu"),
];

fn check_dims(nx: usize, ny: usize) -> Result<()> {
    if nx == 0 || ny == 0 || nx > MAX_NX || ny > MAX_NY {
        return Err(Error::Unsupported(format!(
            "the parallel CUDA kernels are built for nx <= {MAX_NX}, ny <= {MAX_NY}; this model has nx = {nx}, ny = {ny}"
        )));
    }
    Ok(())
}

/// The square-root filter's and smoother's kernels for `nx`, `ny` and scalar `D` on `g`
/// (a module of their own, compiled on first use).
fn sqrt_kernels<D: GpuReal>(g: &Gpu, nx: usize, ny: usize) -> Result<Arc<Kernels>> {
    check_dims(nx, ny)?;
    let names: Vec<String> = SCAN_KERNELS
        .iter()
        .flat_map(|k| [format!("qf_{k}"), format!("qs_{k}")])
        .chain(
            [
                "qf_build",
                "qf_extract",
                "qs_build",
                "qs_extract",
                "qf_reduce",
                "qf_sweep",
                "qs_reduce",
                "qs_sweep",
                "poison",
            ]
            .iter()
            .map(|k| k.to_string()),
        )
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    g.module(
        &format!("kestrel-parallel-sqrt-nx{nx}-ny{ny}-{}", D::NAME),
        &sqrt_source(nx, ny, D::NAME),
        &names,
    )
}

/// The parallel kernels for `nx`, `ny` and scalar `D` on `g` (compiled on first use).
fn kernels<D: GpuReal>(g: &Gpu, nx: usize, ny: usize) -> Result<Arc<Kernels>> {
    check_dims(nx, ny)?;
    let names: Vec<String> = SCAN_KERNELS
        .iter()
        .flat_map(|k| [format!("pf_{k}"), format!("ps_{k}"), format!("pm_{k}")])
        .chain(MODEL_KERNELS.iter().map(|k| k.to_string()))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    g.module(
        &format!("kestrel-parallel-nx{nx}-ny{ny}-{}", D::NAME),
        &source(nx, ny, D::NAME),
        &names,
    )
}

/// The shape of a launch: threads per sequence and sequences (the grid's second
/// dimension, at most [`MAX_GROUP`]).
pub(crate) struct Grid(usize, usize);
impl From<usize> for Grid {
    fn from(n: usize) -> Self {
        Grid(n, 1)
    }
}
impl From<(usize, usize)> for Grid {
    fn from((n, b): (usize, usize)) -> Self {
        Grid(n, b)
    }
}

/// Most tracks in one launch (the CUDA limit of the grid's second dimension).
pub const MAX_GROUP: usize = 65_535;

pub(crate) fn launch_cfg(grid: impl Into<Grid>) -> LaunchConfig {
    let Grid(threads, nb) = grid.into();
    LaunchConfig {
        grid_dim: (
            threads.div_ceil(BLOCK as usize).max(1) as u32,
            nb.clamp(1, MAX_GROUP) as u32,
            1,
        ),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launches kernel `name` of `k` over `grid` ([`launch_cfg`]) with the parameters `p`
/// (`params.rs`) through the runtime's launch, the stream's context current on this
/// thread (the split filter drives each device from its own thread).
pub(crate) fn launch<'a, P: Params<'a>>(
    k: &Kernels,
    stream: &Arc<CudaStream>,
    name: &str,
    grid: impl Into<Grid>,
    p: &P,
) -> Result<()> {
    let cfg = launch_cfg(grid);
    cu(stream.context().bind_to_thread(), "binding the context")?;
    crate::cuda::launch(stream, k, name, cfg.grid_dim, cfg.block_dim, p)
}

mod directions;
mod params;
mod resident;
mod run;
mod scan;
mod split;
mod sqrt;
pub use directions::time_two_filter_by_direction;
pub(crate) use resident::ResidentRts;
pub use run::Method;
use run::{scalars_per_track, DevModel, GroupBufs};
pub use split::{
    filter_block, filter_block_total, filter_on_devices, time_on_devices, two_filter_on_devices,
};

/// Scalars per element.
fn fe_len(nx: usize) -> usize {
    3 * nx * nx + 2 * nx
}
fn se_len(nx: usize) -> usize {
    2 * nx * nx + nx
}
/// Scalars per retrodiction pair `(C_k, b_k)` (`kernels/parallel_means.cu`).
fn me_len(nx: usize) -> usize {
    nx * nx + nx
}

fn chunk_env() -> Option<usize> {
    std::env::var("KESTREL_PAR_CHUNK")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&k: &usize| k >= 2)
}

/// Whether a chunked scan of `elements` elements in all (every sequence of the launch)
/// scans chunks of 32 by a warp each (`kernels/parallel_scan.cu`, `k_warp`: depth 5
/// combines a chunk, work 5 a element) rather than chunks of [`chunk_len`] by one thread
/// each (depth and work one a element). Below 2^19 elements the scan's time is its depth
/// (the fused scan's chunk totals, 31250 at T = 10^6: 0.50 -> 0.09 ms of the filter on the
/// H200); above, the device is full and the thread's chunk does less work (stored f64
/// elements at T = 10^6: 4.7 ms by threads, 6.8 ms by warps). `KESTREL_PAR_WARP=0` / `=1`
/// forces one or the other (for comparison).
fn warp_scan(elements: usize) -> bool {
    match std::env::var("KESTREL_PAR_WARP").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => elements <= 1 << 19,
    }
}

/// Chunk length of the chunked scan's thread chunks (`KESTREL_PAR_CHUNK` overrides, for
/// tuning).
fn chunk_len() -> usize {
    chunk_env().unwrap_or(16)
}

/// Chunk length of the fused scan for `steps` steps in all (`KESTREL_PAR_CHUNK`
/// overrides): about 2^15 chunks (32 at 10^6 steps, the best of 4..64 measured on the
/// H100), each chunk 4 to 64 steps (a power of two).
fn fused_chunk_len(steps: usize) -> usize {
    chunk_env().unwrap_or_else(|| (steps >> 15).next_power_of_two().clamp(4, 64))
}

/// Whether [`ScanAlgorithm::Fastest`] runs the fused scan (reduce, scan of the chunk
/// totals, sweep: `kernels/parallel_fused.cu`); `KESTREL_PAR_FUSED=0` runs the chunked
/// scan over stored elements instead (for comparison).
fn fused(alg: ScanAlgorithm) -> bool {
    alg == ScanAlgorithm::Fastest && std::env::var("KESTREL_PAR_FUSED").map_or(true, |v| v != "0")
}

/// `v` as a `U`: moved when `T` is `U` (the common case: no copy of what may be gigabytes
/// of outputs), made by `convert` otherwise.
fn moved_or<T: 'static, U: 'static>(v: T, convert: impl FnOnce(T) -> U) -> U {
    let b: Box<dyn std::any::Any> = Box::new(v);
    match b.downcast::<U>() {
        Ok(u) => *u,
        Err(b) => convert(
            *b.downcast::<T>()
                .expect("the box holds the value put in above"),
        ),
    }
}

/// `e` as `Estimates<U>` ([`moved_or`]).
fn est_as<T: Real, U: Real>(e: Estimates<T>) -> Estimates<U> {
    moved_or(e, |e| e.cast())
}

/// `v` as `Vec<U>` ([`moved_or`]).
fn vec_as<T: Real, U: Real>(v: Vec<T>) -> Vec<U> {
    moved_or(v, |v| v.into_iter().map(|x| U::of(x.to_f64())).collect())
}

/// Filtered and smoothed estimates as `Output<T>` ([`moved_or`]).
fn out_as<D: Real, T: Real>((f, s): Output<D>) -> Output<T> {
    (est_as(f), s.map(est_as))
}

/// Runs `f` on `z` as `Measurements<D>`: borrowed when `T` is `D`, converted otherwise.
fn with_as<T: Real, D: Real, R>(z: &Measurements<T>, f: impl FnOnce(&Measurements<D>) -> R) -> R {
    match (z as &dyn std::any::Any).downcast_ref::<Measurements<D>>() {
        Some(same) => f(same),
        None => f(&z.cast()),
    }
}

/// Filtered estimates (with log-likelihoods) and, for the smoothers, smoothed ones.
pub type Output<T> = (Estimates<T>, Option<Estimates<T>>);

/// Runs `method` with scan `alg` on every track of `z` on device `ordinal`, in the
/// precision of `T`; outputs are poisoned with NaN before the run, and a step left
/// non-finite is an error naming the track and step.
pub fn run<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<T>,
    method: Method,
    alg: ScanAlgorithm,
) -> Result<Output<T>> {
    time(ordinal, model, z, method, alg, 0, 1).map(|(_, o)| o)
}

/// Like `run`, timing `repeats` runs after `warmup` with the data resident on the
/// device (wall clock from the first launch to the stream's end, summed over the groups
/// of tracks when they do not fit the device at once).
pub fn time<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<T>,
    method: Method,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Output<T>)> {
    by_precision!(T, D => {
        let (t, o) = with_as::<T, D, _>(z, |z| {
            run_as::<D, M>(ordinal, model, z, method, alg, warmup, repeats)
        })?;
        Ok((t, out_as(o)))
    })
}

/// The sequential Kalman filter (and with `smooth` the RTS smoother) on device
/// `ordinal`, one thread per track over the model's per-step matrices
/// (`kernels/parallel_seq.cu`): the batched GPU path of time-varying models (the
/// time-invariant ones have kalman::cuda, with their numbers compiled in). Returns the
/// filtered estimates and, with `smooth`, the smoothed ones.
pub fn sequential<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<T>,
    smooth: bool,
) -> Result<Output<T>> {
    super::check(model, z)?;
    let method = if smooth {
        Method::SequentialRts
    } else {
        Method::Sequential
    };
    run(ordinal, model, z, method, ScanAlgorithm::Sequential)
}

/// The retrodiction scan (Tager 2013, Section 3.2; the smoothing elements of
/// Sarkka & Garcia-Fernandez, eqs. 49-52) on device `ordinal` over filtered estimates
/// from any filter, all tracks batched: smoothed means and covariances, or with
/// `means_only` the means alone from the pairs `(C_k, b_k)` without any covariance part
/// (the result's covariances are then empty).
pub fn retrodict<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    filtered: &Estimates<T>,
    alg: ScanAlgorithm,
    means_only: bool,
) -> Result<Estimates<T>> {
    time_retrodict(ordinal, model, filtered, alg, means_only, 0, 1).map(|(_, s)| s)
}

/// [`retrodict`], timing `repeats` runs after `warmup` with the filtered moments resident
/// on the device (as [`time`]).
pub fn time_retrodict<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    filtered: &Estimates<T>,
    alg: ScanAlgorithm,
    means_only: bool,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Estimates<T>)> {
    let method = if means_only {
        Method::RetrodictMeans
    } else {
        Method::Retrodict
    };
    let (t, s) = by_precision!(T, D => {
        let (t, s) =
            retrodict_as::<T, D, M>(ordinal, model, filtered, alg, method, warmup, repeats)?;
        (t, s.map(est_as))
    });
    let s = s.ok_or_else(|| Error::Cuda("the retrodiction returned no estimates".into()))?;
    Ok((t, s))
}

#[allow(clippy::too_many_arguments)]
fn retrodict_as<T: Real, D: GpuReal, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    filtered: &Estimates<T>,
    alg: ScanAlgorithm,
    method: Method,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Option<Estimates<D>>)> {
    let z = Measurements::<D> {
        tracks: filtered.tracks,
        steps: filtered.steps,
        ny: model.ny(),
        data: crate::data::Store::Owned(Vec::new()),
    };
    let owned;
    let f = match (filtered as &dyn std::any::Any).downcast_ref::<Estimates<D>>() {
        Some(same) => same,
        None => {
            owned = filtered.cast::<D>();
            &owned
        }
    };
    let run = || run_on(ordinal, model, &z, method, alg, warmup, repeats, Some(f));
    let (t, (_, s)) = catch(run)?;
    Ok((t, s))
}

/// The first non-finite value of `v` in blocks of `per` values per step, as
/// `(track, step)` with `t` steps a track.
fn first_bad<D: Real>(v: &[D], per: usize, t: usize) -> Option<(usize, usize)> {
    v.iter()
        .position(|x| !x.is_finite_value())
        .map(|i| (i / per / t, i / per % t))
}

/// The first `(track, step)`, counted from track `tracks.start`, where tracks `tracks`
/// of `e` hold a non-finite mean, covariance or log-likelihood (covariances and
/// log-likelihoods where `e` has them).
fn first_bad_in<D: Real>(
    e: &Estimates<D>,
    tracks: std::ops::Range<usize>,
) -> Option<(usize, usize)> {
    let t = e.steps;
    let part = |v: &[D], per: usize| match v.is_empty() {
        true => None,
        false => first_bad(&v[tracks.start * t * per..tracks.end * t * per], per, t),
    };
    let ll = e.loglik.as_deref().unwrap_or(&[]);
    [part(&e.mean, e.nx), part(&e.cov, e.nx * e.nx), part(ll, 1)]
        .into_iter()
        .flatten()
        .min()
}

/// Fails where tracks `tracks` of `e` are not finite ([`first_bad_in`]): `what` failed
/// at that track and step, offset by `at` (the first track's index and step).
fn check_finite<D: Real>(
    e: &Estimates<D>,
    tracks: std::ops::Range<usize>,
    at: (usize, usize),
    what: &'static str,
) -> Result<()> {
    match first_bad_in(e, tracks) {
        Some((track, step)) => Err(Error::NotPositiveDefinite {
            track: at.0 + track,
            step: at.1 + step,
            what,
        }),
        None => Ok(()),
    }
}

/// The first `(track, step)` where a filter's estimates `f` or the smoother's `s` are
/// not finite.
fn first_failure<D: Real>(f: &Estimates<D>, s: &Estimates<D>) -> Option<(usize, usize)> {
    [first_bad_in(f, 0..f.tracks), first_bad_in(s, 0..s.tracks)]
        .into_iter()
        .flatten()
        .min()
}

fn run_as<D: GpuReal, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<D>,
    method: Method,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Output<D>)> {
    catch(|| run_on(ordinal, model, z, method, alg, warmup, repeats, None))
}

/// Tracks per group: as many as fit in 70% of the free device memory, at most
/// [`MAX_GROUP`] (or `KESTREL_PAR_GROUP`); an error when not even one track fits.
fn group_size<D: GpuReal>(
    g: &Gpu,
    nx: usize,
    ny: usize,
    t: usize,
    tracks: usize,
    method: Method,
    alg: ScanAlgorithm,
) -> Result<usize> {
    let size = std::mem::size_of::<D>();
    let per = scalars_per_track(nx, ny, t, method, alg)
        .and_then(|n| n.checked_mul(size))
        .ok_or_else(|| Error::Input {
            msg: format!("a track of {t} steps is too long to address"),
        })?;
    let free = g.usable_memory()?;
    let budget = free / 10 * 7;
    if per > budget {
        return Err(Error::Unsupported(format!(
            "one track of {t} steps would need {:.2} GB on {}, {:.2} GB are free",
            per as f64 / 1e9,
            g.label(),
            free as f64 / 1e9
        )));
    }
    // `KESTREL_PAR_GROUP` caps the group (for tests of the grouping, and for tuning).
    let cap = std::env::var("KESTREL_PAR_GROUP")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&c: &usize| c >= 1)
        .unwrap_or(MAX_GROUP);
    Ok((budget / per.max(1))
        .clamp(1, MAX_GROUP.min(cap))
        .min(tracks.max(1)))
}

#[allow(clippy::too_many_arguments)]
fn run_on<D: GpuReal, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<D>,
    method: Method,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
    filtered: Option<&Estimates<D>>,
) -> Result<(Vec<f64>, Output<D>)> {
    if method.retrodicts() && filtered.is_none() {
        return Err(Error::Input {
            msg: "the retrodiction needs filtered estimates (parallel::retrodict)".into(),
        });
    }
    let g = gpu(ordinal)?;
    let (nx, ny, t) = (model.nx(), model.ny(), z.steps);
    let k = if method.sqrt() {
        sqrt_kernels::<D>(&g, nx, ny)?
    } else {
        kernels::<D>(&g, nx, ny)?
    };
    let m = ConvertedModel::<D>::new(model, t);
    let varying = model.as_invariant().is_none();
    let dm = if method.sqrt() {
        DevModel::factored(&g, &m, varying)?
    } else {
        DevModel::new(&g, &m, varying)?
    };
    let retro = method.retrodicts();
    let with_cov = method.smooths_covariances();
    // The retrodiction reads the filtered moments from `filtered` and returns no filter.
    let mut f = Estimates::nan(if retro { 0 } else { z.tracks }, t, nx, true);
    let mut s = method.smooths().then(|| {
        if with_cov {
            Estimates::nan(z.tracks, t, nx, false)
        } else {
            // The means alone: no host memory for covariances either.
            Estimates::nan_means(z.tracks, t, nx)
        }
    });
    let mut times = vec![0.0; repeats];
    let sync = |what: &str| cu(g.stream.synchronize(), what);
    let group = group_size::<D>(&g, nx, ny, t, z.tracks, method, alg)?;
    let (n1, n2) = (t * nx, t * nx * nx);
    let mut b0 = 0;
    while b0 < z.tracks {
        let nb = group.min(z.tracks - b0);
        let b1 = b0 + nb;
        let zg = if retro {
            &[][..]
        } else {
            &z.data[b0 * t * ny..b1 * t * ny]
        };
        let fg = filtered.map(|f| (&f.mean[b0 * n1..b1 * n1], &f.cov[b0 * n2..b1 * n2]));
        let mut bufs = GroupBufs::new(&g, nx, t, nb, method, alg, zg, fg)?;
        for i in 0..warmup + repeats {
            bufs.poison(&g, &k, method)?;
            sync("poisoning the outputs")?;
            let start = std::time::Instant::now();
            bufs.run(&g, &k, &dm, method, alg)?;
            sync("running the parallel kernels")?;
            if i >= warmup {
                times[i - warmup] += start.elapsed().as_secs_f64();
            }
        }
        if !retro {
            let ll = f.loglik.as_mut().expect("allocated with log-likelihoods");
            cu(
                g.stream
                    .memcpy_dtoh(&bufs.mean, &mut f.mean[b0 * n1..b1 * n1]),
                "reading means",
            )?;
            cu(
                g.stream
                    .memcpy_dtoh(&bufs.cov, &mut f.cov[b0 * n2..b1 * n2]),
                "reading covariances",
            )?;
            cu(
                g.stream.memcpy_dtoh(&bufs.ll, &mut ll[b0 * t..b1 * t]),
                "reading log-likelihoods",
            )?;
        }
        if let Some(s) = s.as_mut() {
            cu(
                g.stream
                    .memcpy_dtoh(&bufs.smean, &mut s.mean[b0 * n1..b1 * n1]),
                "reading smoothed means",
            )?;
            if with_cov {
                cu(
                    g.stream
                        .memcpy_dtoh(&bufs.scov, &mut s.cov[b0 * n2..b1 * n2]),
                    "reading smoothed covariances",
                )?;
            }
        }
        sync("reading the results")?;
        if !retro {
            check_finite(
                &f,
                b0..b1,
                (b0, 0),
                "a covariance of the parallel filter on the GPU (a solve or Cholesky failed)",
            )?;
        }
        if let Some(s) = s.as_ref() {
            check_finite(
                s,
                b0..b1,
                (b0, 0),
                "a covariance of the parallel smoother on the GPU (a solve or Cholesky failed)",
            )?;
        }
        b0 = b1;
    }
    Ok((times, (f, s)))
}

#[cfg(test)]
mod tests {
    /// Every parameter struct matches its kernels' declarations, name for name and kind
    /// for kind, in both translation units.
    #[test]
    fn the_parameter_structs_match_the_kernels() {
        let src = super::source(4, 2, "f32") + &super::sqrt_source(4, 2, "f32");
        crate::cuda::assert_matches(&src, super::params::SIGNATURES);
    }

    /// The kernels compile for several sizes in both precisions (skips without NVRTC; the
    /// device tests in tests/parallel_gpu.rs run them).
    #[test]
    fn kernels_compile_with_nvrtc() {
        // SAFETY: only tries to open the shared library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: NVRTC is not installed here");
            return;
        }
        for (nx, ny) in [(4, 2), (1, 1), (3, 2), (6, 3)] {
            for dtype in ["f32", "f64"] {
                let opts = cudarc::nvrtc::CompileOptions {
                    options: vec!["--gpu-architecture=compute_90".into(), "--std=c++17".into()],
                    ..Default::default()
                };
                for (what, src) in [
                    ("parallel", super::source(nx, ny, dtype)),
                    ("square-root", super::sqrt_source(nx, ny, dtype)),
                ] {
                    if let Err(e) = cudarc::nvrtc::compile_ptx_with_opts(src, opts.clone()) {
                        panic!("{what} nx={nx} ny={ny} {dtype}: {e:?}");
                    }
                }
            }
        }
    }
}
