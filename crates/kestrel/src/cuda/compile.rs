//! Run-time compilation of the kernels with NVRTC, for the dimensions, scalar type and
//! (optionally) the model's own numbers, for the GPU's own architecture; the compiled
//! images are cached in memory (per device and model) and on disk.
//!
//! The disk cache lives in `$KESTREL_CACHE_DIR`, else `$XDG_CACHE_HOME/kestrel`, else
//! `~/.cache/kestrel`; the file name holds a hash of everything that determines the
//! image (source, options, architecture, NVRTC version). Any failure to read or write
//! it is ignored (the kernels are compiled again); `KESTREL_CUDA_CACHE=0` turns it off.

use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::Model;
use std::ffi::{CStr, CString};
use std::path::PathBuf;

const COMMON: &str = include_str!("kernels/common.cuh");
const FILTER: &str = include_str!("kernels/filter.cu");
const SMOOTH: &str = include_str!("kernels/smooth.cu");
const LAYOUT: &str = include_str!("kernels/layout.cu");
const TRACKER: &str = include_str!("kernels/tracker.cu");

/// A group of kernels compiled together: a module holds only what one kind of run
/// needs, because NVRTC's time grows with every fully unrolled kernel in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// The batched filter (every variant) and the layout conversion.
    Filter,
    /// The RTS smoother (both layouts) and the layout conversion.
    Smooth,
    /// The streaming tracker's kernels and the layout conversion.
    Tracker,
}

impl Part {
    /// Every part.
    pub const ALL: [Part; 3] = [Part::Filter, Part::Smooth, Part::Tracker];

    fn sources(self) -> [(&'static str, &'static str); 3] {
        let own = match self {
            Part::Filter => ("filter.cu", FILTER),
            Part::Smooth => ("smooth.cu", SMOOTH),
            Part::Tracker => ("tracker.cu", TRACKER),
        };
        [("common.cuh", COMMON), own, ("layout.cu", LAYOUT)]
    }

    /// The kernels of this part (all `extern "C"`).
    pub fn kernels(self) -> &'static [&'static str] {
        match self {
            Part::Filter => &[
                "kf_filter_all_host",
                "kf_filter_last_host",
                "kf_filter_pred_host",
                "kf_filter_all_soa",
                "kf_filter_last_soa",
                "soa_to_host",
            ],
            Part::Smooth => &["rts_smooth", "rts_smooth_soa", "soa_to_host"],
            Part::Tracker => &[
                "tracker_step",
                "tracker_init",
                "tracker_remove",
                "soa_to_host",
            ],
        }
    }

    /// A short name (module names, cache files).
    pub fn name(self) -> &'static str {
        match self {
            Part::Filter => "filter",
            Part::Smooth => "smooth",
            Part::Tracker => "tracker",
        }
    }
}

/// The largest dimensions the kernels are built for (registers hold the whole state).
pub const MAX_NX: usize = 16;
/// See [`MAX_NX`].
pub const MAX_NY: usize = 8;

/// 64-bit FNV-1a: a hash that is the same on every build and machine (disk cache keys).
pub(crate) fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// FNV-1a offset basis.
pub(crate) const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

fn literal(v: f64) -> String {
    // `{:e}` prints the shortest form that reads back to the same f64.
    format!("{v:e}")
}

fn constexpr_fn(name: &str, vals: &[f64]) -> String {
    let mut s = format!(
        "__device__ __forceinline__ constexpr double {name}(int i) {{\n    switch (i) {{\n"
    );
    for (i, v) in vals.iter().enumerate() {
        if *v != 0.0 {
            s += &format!("        case {i}: return {};\n", literal(*v));
        }
    }
    s += "        default: return 0.0;\n    }\n}\n";
    s
}

fn row_major(m: &nalgebra::DMatrix<f64>) -> Vec<f64> {
    let mut v = Vec::with_capacity(m.len());
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            v.push(m[(i, j)]);
        }
    }
    v
}

/// The prelude: dimensions, scalar type and, when `baked`, the model as constants.
pub(crate) fn prelude(nx: usize, ny: usize, dtype: &str, baked: Option<&Model>) -> String {
    let real = if dtype == "f64" { "double" } else { "float" };
    let mut s = format!("#define NX {nx}\n#define NY {ny}\ntypedef {real} real;\n");
    match baked {
        Some(m) => {
            s += "#define KS_BAKED 1\n";
            s += &constexpr_fn("kF", &row_major(&m.f));
            s += &constexpr_fn("kQ", &row_major(&m.q));
            s += &constexpr_fn("kH", &row_major(&m.h));
            s += &constexpr_fn("kR", &row_major(&m.r));
            s += &constexpr_fn("ku", m.u.as_slice());
            s += &constexpr_fn("kd", m.d.as_slice());
            s += &constexpr_fn("kx0", m.prior.x0.as_slice());
            s += &constexpr_fn("kP0", &row_major(&m.prior.p0));
        }
        None => s += "#define KS_BAKED 0\n",
    }
    s
}

/// The translation unit of one module: the prelude (dimensions, scalar type, `baked`
/// model numbers) and the kernel files of `part`.
pub fn source(nx: usize, ny: usize, dtype: &str, baked: Option<&Model>, part: Part) -> String {
    let mut s = prelude(nx, ny, dtype, baked);
    for (name, text) in part.sources() {
        s += &format!("// ---- {name}\n");
        s += text;
        s += "\n";
    }
    s
}

/// A compiled image: a cubin for a real architecture, or PTX (NUL-terminated) when
/// NVRTC does not know the device's architecture and a virtual one is used.
pub(crate) struct Image {
    pub bytes: Vec<u8>,
    pub log: String,
}

fn nvrtc_version() -> (i32, i32) {
    let (mut a, mut b) = (0, 0);
    // SAFETY: plain out-parameters; the library is loaded (checked by the caller).
    unsafe {
        cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b);
    }
    (a, b)
}

fn cache_dir() -> Option<PathBuf> {
    if std::env::var("KESTREL_CUDA_CACHE")
        .map(|v| v == "0")
        .unwrap_or(false)
    {
        return None;
    }
    if let Some(d) = std::env::var_os("KESTREL_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("kestrel"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("kestrel"))
}

/// Compiles `src` for compute capability `cc` (cached on disk), naming the module
/// `what` in errors. The full NVRTC log is part of the error on failure.
pub(crate) fn compile(src: &str, cc: (i32, i32), what: &str) -> Result<Image> {
    let ver = nvrtc_version();
    let opts = [
        format!("--gpu-architecture=sm_{}{}", cc.0, cc.1),
        "--std=c++17".to_string(),
        "--fmad=true".to_string(),
    ];
    let mut h = fnv1a(src.as_bytes(), FNV0);
    for o in &opts {
        h = fnv1a(o.as_bytes(), h);
    }
    h = fnv1a(format!("nvrtc{}.{}", ver.0, ver.1).as_bytes(), h);
    let file = cache_dir().map(|d| d.join(format!("{what}-sm{}{}-{h:016x}.cubin", cc.0, cc.1)));
    if let Some(f) = &file {
        if let Ok(bytes) = std::fs::read(f) {
            if !bytes.is_empty() {
                return Ok(Image {
                    bytes,
                    log: String::new(),
                });
            }
        }
    }
    let img = nvrtc_compile(src, &opts, what)?;
    if let Some(f) = &file {
        // Failing soft: a cache that cannot be written only costs a compile next time.
        let _ = write_cache(f, &img.bytes);
    }
    Ok(img)
}

fn write_cache(f: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = f
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, f)
}

fn nvrtc_err(what: &str, step: &str, e: impl std::fmt::Debug) -> Error {
    Error::Cuda(format!("NVRTC {step} of module {what}: {e:?}"))
}

fn program_log(prog: cudarc::nvrtc::sys::nvrtcProgram) -> String {
    // SAFETY: `prog` is a live program; the log is NUL-terminated.
    match unsafe { cudarc::nvrtc::result::get_program_log(prog) } {
        Ok(raw) => unsafe { CStr::from_ptr(raw.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
        Err(e) => format!("(no log: {e:?})"),
    }
}

fn nvrtc_compile(src: &str, opts: &[String], what: &str) -> Result<Image> {
    use cudarc::nvrtc::{result, sys};
    let csrc = CString::new(src).map_err(|e| nvrtc_err(what, "source", e))?;
    let name = CString::new(format!("{what}.cu")).map_err(|e| nvrtc_err(what, "name", e))?;
    let prog =
        result::create_program(&csrc, Some(&name)).map_err(|e| nvrtc_err(what, "create", e))?;
    struct Guard(sys::nvrtcProgram);
    impl Drop for Guard {
        fn drop(&mut self) {
            // SAFETY: the program was created above and is destroyed once.
            let _ = unsafe { result::destroy_program(self.0) };
        }
    }
    let guard = Guard(prog);
    // SAFETY: `prog` is live; the options are plain strings.
    let compiled = unsafe { result::compile_program(guard.0, opts) };
    let log = program_log(guard.0);
    if let Err(e) = compiled {
        return Err(Error::Cuda(format!(
            "NVRTC failed to compile module {what} ({e:?}) with options {opts:?}:\n{log}"
        )));
    }
    let mut size: usize = 0;
    // SAFETY: out-parameter for the size of the cubin of a compiled program.
    unsafe { sys::nvrtcGetCUBINSize(guard.0, &mut size) }
        .result()
        .map_err(|e| nvrtc_err(what, "cubin size", e))?;
    if size == 0 {
        return Err(Error::Cuda(format!(
            "NVRTC produced no cubin for module {what}; log:\n{log}"
        )));
    }
    let mut bytes = vec![0u8; size];
    // SAFETY: `bytes` has the size NVRTC reported.
    unsafe { sys::nvrtcGetCUBIN(guard.0, bytes.as_mut_ptr() as *mut std::ffi::c_char) }
        .result()
        .map_err(|e| nvrtc_err(what, "cubin", e))?;
    Ok(Image { bytes, log })
}

/// The model as the kernels' `ModelParams` struct: F, Q, H, R, u, d, x0, P0, row-major,
/// in the working precision (kernels/common.cuh).
pub fn model_params<T: Real>(m: &Model) -> Vec<T> {
    let mut v = Vec::new();
    for mat in [&m.f, &m.q, &m.h, &m.r] {
        for i in 0..mat.nrows() {
            for j in 0..mat.ncols() {
                v.push(T::of(mat[(i, j)]));
            }
        }
    }
    v.extend(m.u.iter().map(|x| T::of(*x)));
    v.extend(m.d.iter().map(|x| T::of(*x)));
    v.extend(m.prior.x0.iter().map(|x| T::of(*x)));
    let p0 = &m.prior.p0;
    for i in 0..p0.nrows() {
        for j in 0..p0.ncols() {
            v.push(T::of(p0[(i, j)]));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baked_prelude_lists_nonzero_entries_only() {
        let m =
            crate::model::constant_velocity(2, 1.0, 0.5, 1.0, 10.0).expect("a valid builder model");
        let p = prelude(4, 2, "f32", Some(&m));
        assert!(p.contains("typedef float real;"));
        assert!(p.contains("#define KS_BAKED 1"));
        // F of a 2-D constant-velocity model has 6 non-zero entries.
        let kf = p
            .split("constexpr double kF")
            .nth(1)
            .expect("kF is defined");
        let kf = kf.split("default").next().expect("switch has a default");
        assert_eq!(kf.matches("case").count(), 6, "{kf}");
        let g = prelude(3, 1, "f64", None);
        assert!(g.contains("typedef double real;") && g.contains("#define KS_BAKED 0"));
        assert!(!g.contains("kF"));
    }

    #[test]
    fn literals_round_trip() {
        for v in [0.1, -1.0 / 3.0, 1e-300, 6.02e23, 1.0] {
            assert_eq!(literal(v).parse::<f64>().expect("a float literal"), v);
        }
    }

    #[test]
    fn every_kernel_name_is_defined_in_the_source() {
        for part in Part::ALL {
            let s = source(4, 2, "f32", None, part);
            for k in part.kernels() {
                assert!(s.contains(&format!(" {k}(")), "{k} missing from {part:?}");
            }
        }
        assert_eq!(fnv1a(b"", FNV0), FNV0);
        assert_ne!(fnv1a(b"a", FNV0), fnv1a(b"b", FNV0));
    }
}
