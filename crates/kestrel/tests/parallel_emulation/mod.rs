//! What the parallel kernels' emulation tests share (parallel_kernels_on_cpu.rs,
//! parallel_split_on_cpu.rs): the kernels' translation unit, the input the harness
//! reads after its header (every step's model, the prior, the measurements), and the
//! per-step error measure.
#![allow(dead_code)]

use super::emulation::put_f64;
use kestrel::parallel::PaperModel;
use kestrel::{Measurements, Real, StateSpace};

const OPS: &str = include_str!("../../src/parallel/kernels/parallel_ops.cu");
const SCAN: &str = include_str!("../../src/parallel/kernels/parallel_scan.cu");
const MODEL: &str = include_str!("../../src/parallel/kernels/parallel_model.cu");
const FUSED: &str = include_str!("../../src/parallel/kernels/parallel_fused.cu");
const MEANS: &str = include_str!("../../src/parallel/kernels/parallel_means.cu");
const SEQ: &str = include_str!("../../src/parallel/kernels/parallel_seq.cu");
const HARNESS: &str = include_str!("harness.inc");

/// The harness with the kernels for `nx`, `ny` and `T`, `defines` before it and `tail`
/// after it.
pub fn source<T: Real>(nx: usize, ny: usize, defines: &str, tail: &str) -> String {
    let real = if T::NAME == "f64" { "double" } else { "float" };
    format!(
        "#define NX {nx}\n#define NY {ny}\n{defines}typedef {real} real;\n{}\n{tail}",
        HARNESS.replace(
            "/*KERNELS*/",
            &format!(
                "{}\n{OPS}\n{SCAN}\n{MODEL}\n{FUSED}\n{MEANS}\n{SEQ}\n",
                kestrel::cuda::DEVICE_HEADER
            )
        )
    )
}

fn put_mat<T: Real>(out: &mut Vec<u8>, m: &nalgebra::DMatrix<f64>) {
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            put_f64::<T>(out, m[(i, j)]);
        }
    }
}

/// Appends every step's `F, u, Q, H, d, R`, the prior `x0, P0` and the measurements, as
/// reals of `T`.
pub fn put_model<T: Real>(out: &mut Vec<u8>, model: &PaperModel, z: &Measurements<f64>, t: usize) {
    for k in 0..t {
        let (f, u, q) = model.transition(k);
        let (h, d, r) = model.observation(k);
        put_mat::<T>(out, f);
        u.iter().for_each(|v| put_f64::<T>(out, *v));
        put_mat::<T>(out, q);
        put_mat::<T>(out, h);
        d.iter().for_each(|v| put_f64::<T>(out, *v));
        put_mat::<T>(out, r);
    }
    model.prior.x0.iter().for_each(|v| put_f64::<T>(out, *v));
    put_mat::<T>(out, &model.prior.p0);
    let z: Measurements<T> = z.cast();
    z.data().iter().for_each(|v| put_f64::<T>(out, v.to_f64()));
}

/// Largest per-step relative difference `||a_k - b_k||_inf / max(||b_k||_inf, 1e-3)`
/// (NaN, an output nobody wrote, is infinite): `common::rel_err` with the kernels' floor.
pub fn rel_err(a: &[f64], b: &[f64], per: usize) -> f64 {
    super::common::rel_err(a, b, per, 1e-3)
}
