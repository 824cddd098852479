//! The parallel-in-time Kalman filter and smoothers on a CUDA GPU: the elements and
//! operators of `crate::parallel` as CUDA kernels (`kernels/parallel_*.cu`), compiled by
//! NVRTC for the model's `NX`, `NY` and scalar type, and the scans of
//! Sarkka & Garcia-Fernandez with one launch per level (Hillis-Steele, Blelloch,
//! Ladner-Fischer, Sengupta et al.'s hybrid), a one-thread fold, and the default chunked
//! scan.
//!
//! Tracks are processed one after the other, each with all its steps in parallel.

use crate::cuda::{catch, gpu, Gpu, Module as Kernels};
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::kalman::dense::ConvertedModel;
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::scan::ScanAlgorithm;
use cudarc::driver::{DeviceRepr, LaunchConfig, ValidAsZeroBits};
use std::sync::Arc;

const SOURCES: [&str; 3] = [
    include_str!("../kernels/parallel_ops.cu"),
    include_str!("../kernels/parallel_scan.cu"),
    include_str!("../kernels/parallel_model.cu"),
];

const SCAN_KERNELS: [&str; 11] = [
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
];
const MODEL_KERNELS: [&str; 8] = [
    "pf_build",
    "pf_extract",
    "ps_build",
    "ps_extract",
    "tf_shift",
    "tf_combine",
    "kf_seq",
    "poison",
];

/// The largest dimensions the kernels are compiled for (everything lives in registers).
pub const MAX_NX: usize = 8;
/// See [`MAX_NX`].
pub const MAX_NY: usize = 4;

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
    let (real, nan) = if dtype == "f64" {
        ("double", "__longlong_as_double(0x7ff8000000000000ULL)")
    } else {
        ("float", "__int_as_float(0x7fc00000)")
    };
    let mut s =
        format!("#define NX {nx}\n#define NY {ny}\ntypedef {real} real;\n#define NAN {nan}\n");
    for src in SOURCES {
        s += src;
        s += "\n";
    }
    s
}

/// The parallel kernels for `nx`, `ny` and scalar `D` on `g` (compiled on first use).
fn kernels<D: GpuReal>(g: &Gpu, nx: usize, ny: usize) -> Result<Arc<Kernels>> {
    if nx == 0 || ny == 0 || nx > MAX_NX || ny > MAX_NY {
        return Err(Error::Unsupported(format!(
            "the parallel CUDA kernels are built for nx <= {MAX_NX}, ny <= {MAX_NY}; this model has nx = {nx}, ny = {ny}"
        )));
    }
    let names: Vec<String> = SCAN_KERNELS
        .iter()
        .flat_map(|k| [format!("pf_{k}"), format!("ps_{k}")])
        .chain(MODEL_KERNELS.iter().map(|k| k.to_string()))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    g.module(
        &format!("kestrel-parallel-nx{nx}-ny{ny}-{}", D::NAME),
        &source(nx, ny, D::NAME),
        &names,
    )
}

pub(crate) fn launch_cfg(threads: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (threads.div_ceil(BLOCK as usize).max(1) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launches `$name` over `$threads` threads with the listed arguments.
macro_rules! launch {
    ($k:expr, $stream:expr, $name:expr, $threads:expr, $($arg:expr),* $(,)?) => {{
        let f = $k.get($name)?;
        let mut b = $stream.launch_builder(f);
        $( b.arg($arg); )*
        // SAFETY: the arguments match the kernel's signature in kernels/parallel_*.cu.
        $crate::parallel::cuda::cu(unsafe { b.launch($crate::parallel::cuda::launch_cfg($threads)) }, &format!("launching {}", $name))?;
    }};
}

mod run;
pub use run::Method;
use run::{DevModel, TrackBufs};

/// Scalars per element.
fn fe_len(nx: usize) -> usize {
    3 * nx * nx + 2 * nx
}
fn se_len(nx: usize) -> usize {
    2 * nx * nx + nx
}

/// Chunk length of the chunked scan (`KESTREL_PAR_CHUNK` overrides, for tuning).
fn chunk_len() -> usize {
    std::env::var("KESTREL_PAR_CHUNK")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&k: &usize| k >= 2)
        .unwrap_or(16)
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
    let back = |(f, s): Output<f64>| (f.cast::<T>(), s.map(|s| s.cast::<T>()));
    let back32 = |(f, s): Output<f32>| (f.cast::<T>(), s.map(|s| s.cast::<T>()));
    if T::NAME == "f64" {
        run_as::<f64, M>(ordinal, model, &z.cast(), method, alg, 0, 1).map(|(_, o)| back(o))
    } else {
        run_as::<f32, M>(ordinal, model, &z.cast(), method, alg, 0, 1).map(|(_, o)| back32(o))
    }
}

/// Like [`run`] for one track, timing `repeats` runs after `warmup` with the data
/// resident on the device (wall clock from the first launch to the stream's end).
pub fn time<T: Real, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<T>,
    method: Method,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Output<T>)> {
    if T::NAME == "f64" {
        let (t, (f, s)) =
            run_as::<f64, M>(ordinal, model, &z.cast(), method, alg, warmup, repeats)?;
        Ok((t, (f.cast(), s.map(|s| s.cast()))))
    } else {
        let (t, (f, s)) =
            run_as::<f32, M>(ordinal, model, &z.cast(), method, alg, warmup, repeats)?;
        Ok((t, (f.cast(), s.map(|s| s.cast()))))
    }
}

fn first_bad<D: Real>(v: &[D], per: usize) -> Option<usize> {
    v.iter().position(|x| !x.is_finite_value()).map(|i| i / per)
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
    catch(|| run_on(ordinal, model, z, method, alg, warmup, repeats))
}

fn run_on<D: GpuReal, M: StateSpace + ?Sized>(
    ordinal: usize,
    model: &M,
    z: &Measurements<D>,
    method: Method,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Output<D>)> {
    let g = gpu(ordinal)?;
    let (nx, ny, t) = (model.nx(), model.ny(), z.steps);
    let k = kernels::<D>(&g, nx, ny)?;
    let m = ConvertedModel::<D>::new(model, t);
    let dm = DevModel::new(&g, &m, model.as_invariant().is_none())?;
    let smooth = matches!(method, Method::Rts | Method::TwoFilter);
    let mut f = Estimates::nan(z.tracks, t, nx, true);
    let mut s = smooth.then(|| Estimates::nan(z.tracks, t, nx, false));
    let mut times = Vec::new();
    let sync = |what: &str| cu(g.stream.synchronize(), what);
    for b in 0..z.tracks {
        let mut bufs = TrackBufs::new(&g, nx, z.track(b), t)?;
        for i in 0..warmup + repeats {
            bufs.poison(&g, &k)?;
            sync("poisoning the outputs")?;
            let start = std::time::Instant::now();
            bufs.run(&g, &k, &dm, method, alg)?;
            sync("running the parallel kernels")?;
            if i >= warmup {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        let (n1, n2) = (t * nx, t * nx * nx);
        let ll = f.loglik.as_mut().expect("allocated with log-likelihoods");
        cu(
            g.stream
                .memcpy_dtoh(&bufs.mean, &mut f.mean[b * n1..(b + 1) * n1]),
            "reading means",
        )?;
        cu(
            g.stream
                .memcpy_dtoh(&bufs.cov, &mut f.cov[b * n2..(b + 1) * n2]),
            "reading covariances",
        )?;
        cu(
            g.stream.memcpy_dtoh(&bufs.ll, &mut ll[b * t..(b + 1) * t]),
            "reading log-likelihoods",
        )?;
        if let Some(s) = s.as_mut() {
            cu(
                g.stream
                    .memcpy_dtoh(&bufs.smean, &mut s.mean[b * n1..(b + 1) * n1]),
                "reading smoothed means",
            )?;
            cu(
                g.stream
                    .memcpy_dtoh(&bufs.scov, &mut s.cov[b * n2..(b + 1) * n2]),
                "reading smoothed covariances",
            )?;
        }
        sync("reading the results")?;
        let bad = [
            first_bad(&f.mean[b * n1..(b + 1) * n1], nx),
            first_bad(&f.cov[b * n2..(b + 1) * n2], nx * nx),
            first_bad(&ll[b * t..(b + 1) * t], 1),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(step) = bad {
            return Err(Error::NotPositiveDefinite {
                track: b,
                step,
                what: "a covariance of the parallel filter on the GPU (a solve or Cholesky failed)",
            });
        }
        if let Some(s) = s.as_ref() {
            let bad = [
                first_bad(&s.mean[b * n1..(b + 1) * n1], nx),
                first_bad(&s.cov[b * n2..(b + 1) * n2], nx * nx),
            ]
            .into_iter()
            .flatten()
            .min();
            if let Some(step) = bad {
                return Err(Error::NotPositiveDefinite {
                    track: b,
                    step,
                    what: "a covariance of the parallel smoother on the GPU (a solve or Cholesky failed)",
                });
            }
        }
    }
    Ok((times, (f, s)))
}

#[cfg(test)]
mod tests {
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
                if let Err(e) =
                    cudarc::nvrtc::compile_ptx_with_opts(super::source(nx, ny, dtype), opts)
                {
                    panic!("nx={nx} ny={ny} {dtype}: {e:?}");
                }
            }
        }
    }
}
