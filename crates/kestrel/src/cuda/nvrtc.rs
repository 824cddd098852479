//! Run-time compilation of CUDA C++ sources with NVRTC for the GPU's own architecture,
//! with a disk cache. Sources are complete translation units: a family puts its sizes,
//! scalar type and constants in the source (as `#define`s or generated functions), so
//! the hash of the source is the key of the compiled image.
//!
//! The disk cache lives in `$KESTREL_CACHE_DIR`, else `$XDG_CACHE_HOME/kestrel`, else
//! `~/.cache/kestrel`; the file name holds a hash of everything that determines the
//! image (source, options, architecture, NVRTC version). Any failure to read or write
//! it is ignored (the kernels are compiled again); `KESTREL_CUDA_CACHE=0` turns it off.

use crate::error::{Error, Result};
use std::ffi::{CStr, CString};
use std::path::PathBuf;

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

/// A number as a CUDA C++ literal that reads back to the same f64 (`{:e}` prints the
/// shortest such form): for families that compile their constants into the source.
pub(crate) fn literal(v: f64) -> String {
    format!("{v:e}")
}

/// A `constexpr` device function `name(i)` returning `vals[i]` (0 for the zeros, so that
/// products with structural zeros vanish when the compiler folds them).
pub(crate) fn constexpr_table(name: &str, vals: &[f64]) -> String {
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

/// The disk cache directory chosen from the API ([`set_cache_dir`]): `Some(None)` turns
/// the disk cache off.
static CACHE_DIR: std::sync::Mutex<Option<Option<PathBuf>>> = std::sync::Mutex::new(None);

/// Sets where compiled GPU kernels are cached on disk for this process (`None`: no disk
/// cache), in place of `$KESTREL_CACHE_DIR` / `$XDG_CACHE_HOME/kestrel` /
/// `~/.cache/kestrel`. Modules already compiled stay cached in memory.
pub fn set_cache_dir(dir: Option<PathBuf>) {
    if let Ok(mut g) = CACHE_DIR.lock() {
        *g = Some(dir);
    }
}

pub(crate) fn cache_dir() -> Option<PathBuf> {
    if let Ok(g) = CACHE_DIR.lock() {
        if let Some(d) = g.as_ref() {
            return d.clone();
        }
    }
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
    let (opts, file) = options_and_cache_file(src, cc, what);
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

/// NVRTC's options for `cc` and the disk-cache file of `src` (none when the cache is off).
/// `KESTREL_NVRTC_OPTIONS` (whitespace-separated, appended to kestrel's own, and part of
/// the cache key) is a diagnostic: it compiles the same source another way, for instance
/// `-DK_CUDA_TRIG` (the nonlinear kernels with CUDA's `sin`/`cos` in f32) or
/// `--use_fast_math`, to time what a choice of kestrel's costs.
fn options_and_cache_file(src: &str, cc: (i32, i32), what: &str) -> (Vec<String>, Option<PathBuf>) {
    let ver = nvrtc_version();
    let mut opts = vec![
        format!("--gpu-architecture=sm_{}{}", cc.0, cc.1),
        "--std=c++17".to_string(),
        "--fmad=true".to_string(),
    ];
    if let Ok(extra) = std::env::var("KESTREL_NVRTC_OPTIONS") {
        opts.extend(extra.split_whitespace().map(str::to_string));
    }
    let mut h = fnv1a(src.as_bytes(), FNV0);
    for o in &opts {
        h = fnv1a(o.as_bytes(), h);
    }
    h = fnv1a(format!("nvrtc{}.{}", ver.0, ver.1).as_bytes(), h);
    let file = cache_dir().map(|d| d.join(format!("{what}-sm{}{}-{h:016x}.cubin", cc.0, cc.1)));
    (opts, file)
}

/// Whether the image of `src` for `cc` is in the disk cache (so that using it costs a
/// load, not a compilation).
pub(crate) fn is_cached(src: &str, cc: (i32, i32), what: &str) -> bool {
    options_and_cache_file(src, cc, what)
        .1
        .and_then(|f| std::fs::metadata(f).ok())
        .is_some_and(|m| m.len() > 0)
}

/// Replaces the cache file `f` with `bytes`: written to a temporary created exclusively
/// beside it, then renamed over it (a link at `f` is replaced, never followed).
pub(crate) fn write_cache(f: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = f
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    // Created exclusively: a file or link planted at the temporary's name is never
    // followed or truncated (the write fails, and the cache is only slower).
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut t| {
            use std::io::Write;
            t.write_all(bytes)
        });
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            let _ = std::fs::remove_file(&tmp);
        }
        return Err(e);
    }
    std::fs::rename(&tmp, f).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_the_published_function() {
        assert_eq!(fnv1a(b"", FNV0), FNV0);
        // The published 64-bit FNV-1a test vector for "a".
        assert_eq!(fnv1a(b"a", FNV0), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fnv1a(b"a", FNV0), fnv1a(b"b", FNV0));
    }
}

#[cfg(all(test, unix, feature = "io"))]
mod cache_tests {
    use super::write_cache;

    #[test]
    fn the_cache_is_written_whole_and_never_through_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("module.cubin");
        write_cache(&f, b"image").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"image");
        // A link planted at the temporary's name: refused, its target untouched, the
        // cached image as it was.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let tmp = dir.path().join(format!(
            ".tmp-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        assert!(write_cache(&f, b"other").is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(&f).unwrap(), b"image");
    }
}
