//! The square-root parallel kernels (`src/parallel/kernels/parallel_sqrt*.cu`) compiled as
//! plain C++ by the host compiler and run thread by thread on the CPU
//! (parallel_emulation/sqrt.inc repeats the launch sequences of `parallel/cuda/run.rs`,
//! `run_sqrt` and `run_sqrt_fused`), against the sequential CPU reference (Kalman filter,
//! RTS smoother): every GPU scan algorithm and the fused scan, time-varying models with missing values, both precisions, batches
//! of several tracks in one launch. Outputs start as NaN, so an unwritten element fails.
//! Skips with a printed reason when there is no C++ compiler; on a GPU,
//! tests/parallel_sqrt_gpu.rs runs the real thing.

mod common;
mod emulation;
mod parallel_emulation;

use emulation::{compile, compiler, put_f64};
use kestrel::parallel::PaperModel;
use kestrel::{Measurements, Real, StateSpace};
use nalgebra::DMatrix;
use parallel_emulation::{put_mat, run_harness, source, Case, ALGORITHMS};

const SQRT: &str = include_str!("../src/parallel/kernels/parallel_sqrt.cu");
const SQRT_FUSED: &str = include_str!("../src/parallel/kernels/parallel_sqrt_fused.cu");
const MAIN: &str = include_str!("parallel_emulation/sqrt.inc");

/// The lower Cholesky factor of a positive definite `m`.
fn factor(m: &DMatrix<f64>) -> DMatrix<f64> {
    m.clone().cholesky().expect("positive definite").l()
}

/// Every step's `F, u, L_Q, H, d, L_R`, the prior `x0, L_P0` and the measurements.
fn put_factored<T: Real>(out: &mut Vec<u8>, model: &PaperModel, z: &Measurements<f64>, t: usize) {
    for k in 0..t {
        let (f, u, q) = model.transition(k);
        let (h, d, r) = model.observation(k);
        put_mat::<T>(out, f);
        u.iter().for_each(|v| put_f64::<T>(out, *v));
        put_mat::<T>(out, &factor(q));
        put_mat::<T>(out, h);
        d.iter().for_each(|v| put_f64::<T>(out, *v));
        put_mat::<T>(out, &factor(r));
    }
    model.prior.x0.iter().for_each(|v| put_f64::<T>(out, *v));
    put_mat::<T>(out, &factor(&model.prior.p0));
    let z: Measurements<T> = z.cast();
    z.data().iter().for_each(|v| put_f64::<T>(out, v.to_f64()));
}

fn run<T: Real>(cxx: &str, nx: usize, ny: usize, t: usize, nb: usize, seed: u64, tol: f64) {
    let case = Case::new(nx, ny, t, t, nb, seed);
    let tag = format!("sqrt_nx{nx}_ny{ny}_T{t}_B{nb}_{}", T::NAME);
    let src = source::<T>(
        nx,
        ny,
        "#define SPLIT_MAIN\n",
        &format!("{SQRT}\n{SQRT_FUSED}\n{MAIN}"),
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(cxx, dir.path(), &tag, &src, &["-std=c++17", "-O1", "-w"]);
    let mut input = case.header(true);
    put_factored::<T>(&mut input, &case.model, &case.z, t);
    let mut out = run_harness::<T>(&exe, input, &tag);
    let (n1, n2) = case.sizes();
    let per_alg = 2 * n1 + 2 * n2 + nb * t;
    assert_eq!(out.len(), ALGORITHMS.len() * per_alg, "{tag}: output size");
    for name in ALGORITHMS {
        let tag = format!("{tag} {name}");
        case.check_filtered(&mut out, &tag, tol);
        case.check_smoothed(&mut out, &tag, "rts", tol);
    }
}

#[test]
fn sqrt_kernels_equal_the_reference_on_the_cpu() {
    let Some(cxx) = compiler() else { return };
    run::<f64>(&cxx, 4, 2, 1, 1, 11, 1e-9);
    run::<f64>(&cxx, 4, 2, 37, 1, 12, 1e-9);
    run::<f64>(&cxx, 3, 1, 60, 1, 13, 1e-9);
    run::<f32>(&cxx, 4, 2, 64, 1, 14, 1e-4);
    run::<f64>(&cxx, 4, 2, 23, 5, 16, 1e-9);
    run::<f32>(&cxx, 3, 2, 41, 4, 17, 1e-4);
}
