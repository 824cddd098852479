//! The parallel CUDA kernels (`src/parallel/kernels/parallel_*.cu`) compiled as plain C++ by the
//! host compiler (`$CXX`, else `c++`) and run thread by thread on the CPU
//! (parallel_emulation/harness.inc, which also repeats the launch sequences of
//! `parallel/cuda/run.rs`), against the sequential CPU reference: every GPU scan
//! algorithm, filter with log-likelihoods, RTS and two-filter smoother, time-varying
//! models with missing values, both precisions, batches of several tracks in one launch. Checks the kernels' arithmetic and
//! indexing without a GPU (CI included); skips with a printed reason when there is no C++
//! compiler. On a GPU, tests/parallel_gpu.rs runs the real thing.

mod common;
mod emulation;
mod parallel_emulation;

use emulation::{compile, compiler};
use kestrel::Real;
use parallel_emulation::{put_model, run_harness, source, Case, ALGORITHMS};

fn run<T: Real>(cxx: &str, nx: usize, ny: usize, t: usize, nb: usize, seed: u64, tol: f64) {
    let case = Case::new(nx, ny, t, t, nb, seed);
    let tag = format!("nx{nx}_ny{ny}_T{t}_B{nb}_{}", T::NAME);
    let src = source::<T>(nx, ny, "", "");
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(cxx, dir.path(), &tag, &src, &["-std=c++17", "-O1", "-w"]);
    let mut input = case.header(true);
    put_model::<T>(&mut input, &case.model, &case.z, t);
    let mut out = run_harness::<T>(&exe, input, &tag);
    let (n1, n2) = case.sizes();
    let per_alg = 3 * n1 + 3 * n2 + nb * t;
    assert_eq!(out.len(), ALGORITHMS.len() * per_alg, "{tag}: output size");
    for name in ALGORITHMS {
        let tag = format!("{tag} {name}");
        case.check_filtered(&mut out, &tag, tol);
        case.check_smoothed(&mut out, &tag, "rts", tol);
        case.check_smoothed(&mut out, &tag, "two-filter", tol);
    }
}

#[test]
fn parallel_kernels_equal_the_reference_on_the_cpu() {
    let Some(cxx) = compiler() else { return };
    run::<f64>(&cxx, 4, 2, 1, 1, 1, 1e-9);
    run::<f64>(&cxx, 4, 2, 37, 1, 2, 1e-9);
    run::<f64>(&cxx, 3, 1, 100, 1, 3, 1e-9);
    run::<f32>(&cxx, 4, 2, 64, 1, 4, 1e-4);
    // Batches: several tracks in every launch (odd lengths, so that no sequence's last
    // chunk or padding is full).
    run::<f64>(&cxx, 4, 2, 1, 3, 5, 1e-9);
    run::<f64>(&cxx, 4, 2, 23, 5, 6, 1e-9);
    run::<f32>(&cxx, 3, 2, 41, 4, 7, 1e-4);
}
