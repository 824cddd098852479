//! The split of one sequence over several devices (`parallel/cuda/split.rs`: shares of the
//! time steps, the share totals crossing, the sweeps started from the carried prefix and
//! suffix) with the kernels of `src/parallel/kernels/parallel_*.cu` compiled as plain C++
//! (`$CXX`, else `c++`; parallel_emulation/harness.inc and split.inc) and run on the CPU,
//! against the sequential CPU reference: the filter with log-likelihoods and the two-filter
//! smoother, 1 to 5 shares (shares of one step included), time-varying models with missing
//! values, both precisions, batches of tracks. Skips with a printed reason when there is
//! no C++ compiler; tests/parallel_multi_gpu.rs runs the real thing on GPUs.

mod common;
mod emulation;
mod parallel_emulation;

use emulation::{compile, compiler};
use kestrel::Real;
use parallel_emulation::{put_model, run_harness, source, Case};

const SPLIT: &str = include_str!("parallel_emulation/split.inc");

/// Builds the harness for `nx`, `ny` and `T` (once per size and precision).
fn build<T: Real>(cxx: &str, dir: &std::path::Path, nx: usize, ny: usize) -> std::path::PathBuf {
    let tag = format!("split_nx{nx}_ny{ny}_{}", T::NAME);
    let src = source::<T>(nx, ny, "#define SPLIT_MAIN\n", SPLIT);
    compile(cxx, dir, &tag, &src, &["-std=c++17", "-O1", "-w"])
}

#[allow(clippy::too_many_arguments)]
fn run<T: Real>(
    exe: &std::path::Path,
    nx: usize,
    ny: usize,
    t: usize,
    nb: usize,
    g: usize,
    seed: u64,
    tol: f64,
) {
    let case = Case::new(nx, ny, t, t, nb, seed);
    let tag = format!("nx{nx}_ny{ny}_T{t}_B{nb}_G{g}_{}", T::NAME);
    let mut input = case.header(true);
    input.extend((g as i64).to_le_bytes());
    put_model::<T>(&mut input, &case.model, &case.z, t);
    let mut out = run_harness::<T>(exe, input, &tag);
    let (n1, n2) = case.sizes();
    assert_eq!(out.len(), 2 * n1 + 2 * n2 + nb * t, "{tag}: output size");
    case.check_filtered(&mut out, &tag, tol);
    case.check_smoothed(&mut out, &tag, "two-filter", tol);
}

#[test]
fn split_shares_equal_the_reference_on_the_cpu() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let e42 = build::<f64>(&cxx, dir.path(), 4, 2);
    // One share (the whole-sequence path through the _at kernels), two, and more shares
    // than chunks of a share; shares of one step (T = G).
    for (t, g, seed) in [
        (37, 1, 1),
        (37, 2, 2),
        (37, 5, 3),
        (2, 2, 4),
        (5, 5, 5),
        (64, 3, 6),
    ] {
        run::<f64>(&e42, 4, 2, t, 1, g, seed, 1e-9);
    }
    // Batches: several tracks in every launch, each with its own carries.
    run::<f64>(&e42, 4, 2, 23, 3, 2, 7, 1e-9);
    run::<f64>(&e42, 4, 2, 23, 4, 4, 8, 1e-9);
    let e31 = build::<f64>(&cxx, dir.path(), 3, 1);
    run::<f64>(&e31, 3, 1, 100, 1, 3, 9, 1e-9);
    let f32e = build::<f32>(&cxx, dir.path(), 4, 2);
    run::<f32>(&f32e, 4, 2, 64, 1, 2, 10, 1e-4);
    run::<f32>(&f32e, 4, 2, 41, 3, 3, 11, 1e-4);
}
