//! The harness shared by the `*_on_cpu` tests: CUDA kernels compiled as plain C++ by
//! the host compiler (`$CXX`, else `c++`) with a shim for the CUDA keywords, run on the
//! CPU and fed and read as little-endian bytes. A test skips with a printed reason when
//! there is no C++ compiler (or none with what it needs).
#![allow(dead_code)]

use kestrel::Real;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// C++ helpers of the harnesses that pass arrays through files: `load<T>(path)` (a file
/// of little-endian values, one spare element) and `save<T>(path, vector)`.
pub const FILE_IO: &str = r#"
template <class T> std::vector<T> load(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path.c_str()); exit(3); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    std::vector<T> v(n / sizeof(T) + 1);
    if (n > 0 && fread(v.data(), 1, n, f) != (size_t)n) exit(4);
    fclose(f);
    return v;
}
template <class T> void save(const std::string& path, const std::vector<T>& v) {
    FILE* f = fopen(path.c_str(), "wb");
    fwrite(v.data(), sizeof(T), v.size(), f);
    fclose(f);
}
"#;

/// The host C++ compiler, if it compiles `probe` (a translation unit that includes what
/// the harness needs) with `flags`; otherwise `None`, with the reason printed.
pub fn compiler_for(flags: &[&str], probe: &str) -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let ok = Command::new(&cxx)
        .args(flags)
        .args(["-x", "c++", "-fsyntax-only", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .expect("piped stdin")
                .write_all(probe.as_bytes())?;
            c.wait()
        })
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "skipped: no usable C++ compiler ({cxx} {})",
            flags.join(" ")
        );
    }
    ok.then_some(cxx)
}

/// The host C++ compiler (C++17), or `None` with the reason printed.
pub fn compiler() -> Option<String> {
    compiler_for(&["-std=c++17"], "int main() {}\n")
}

/// Compiles `src` as `dir/tag` with `flags` (the standard, optimisation, ...); the
/// executable. A compile failure fails the test with the compiler's messages.
pub fn compile(cxx: &str, dir: &Path, tag: &str, src: &str, flags: &[&str]) -> PathBuf {
    let cpp = dir.join(format!("{tag}.cpp"));
    let exe = dir.join(tag);
    std::fs::write(&cpp, src).expect("write the translation unit");
    let out = Command::new(cxx)
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&cpp)
        .output()
        .expect("run the C++ compiler");
    assert!(
        out.status.success(),
        "{tag}: C++ compile failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs `exe` with `input` on its stdin (written from a thread, so that a large input
/// and a large output cannot block each other); its stdout.
pub fn run_piped(exe: &Path, input: Vec<u8>, tag: &str) -> Vec<u8> {
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the harness");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("harness output");
    writer
        .join()
        .expect("the writer thread")
        .expect("feed the harness");
    assert!(
        out.status.success(),
        "{tag}: harness failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Appends `v` as the harness reads reals of `T`: 8 or 4 little-endian bytes each.
pub fn put<T: Real>(out: &mut Vec<u8>, v: &[T]) {
    for x in v {
        put_f64::<T>(out, x.to_f64());
    }
}

/// Appends `v` as one real of `T`.
pub fn put_f64<T: Real>(out: &mut Vec<u8>, v: f64) {
    if std::mem::size_of::<T>() == 8 {
        out.extend(v.to_le_bytes());
    } else {
        out.extend((v as f32).to_le_bytes());
    }
}

/// `v` as the bytes of reals of `T`.
pub fn bytes<T: Real>(v: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(std::mem::size_of_val(v));
    put(&mut out, v);
    out
}

/// Reals of `T` from little-endian bytes (a trailing partial value is left out).
pub fn reals<T: Real>(b: &[u8]) -> Vec<T> {
    let w = std::mem::size_of::<T>();
    b.chunks_exact(w)
        .map(|c| {
            if w == 8 {
                T::of(f64::from_le_bytes(c.try_into().expect("8 bytes")))
            } else {
                T::of(f64::from(f32::from_le_bytes(
                    c.try_into().expect("4 bytes"),
                )))
            }
        })
        .collect()
}

/// The next `n` reals of `T` from `b` at `*at`, advancing it.
pub fn take<T: Real>(b: &[u8], at: &mut usize, n: usize) -> Vec<T> {
    let w = std::mem::size_of::<T>();
    let v = reals(&b[*at..*at + n * w]);
    *at += n * w;
    v
}
