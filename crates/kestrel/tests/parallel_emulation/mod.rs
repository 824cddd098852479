//! What the parallel kernels' emulation tests share (parallel_kernels_on_cpu.rs,
//! parallel_seq_kernels_on_cpu.rs, parallel_split_on_cpu.rs,
//! parallel_sqrt_kernels_on_cpu.rs): the kernels' translation unit, a case and its
//! sequential reference, the input the harness reads (its header, every step's model,
//! the prior, the measurements), its outputs read in order and checked against the
//! reference, and the per-step error measure.
#![allow(dead_code)]

use super::emulation::{put_f64, reals, run_piped};
use kestrel::parallel::PaperModel;
use kestrel::{Estimates, FilterOptions, Measurements, Real, StateSpace};

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

/// Appends `m` row by row as reals of `T`.
pub fn put_mat<T: Real>(out: &mut Vec<u8>, m: &nalgebra::DMatrix<f64>) {
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

/// The GPU scan algorithms, in the order the harnesses run them.
pub const ALGORITHMS: [&str; 7] = [
    "sequential",
    "ladner-fischer",
    "hillis-steele",
    "blelloch",
    "chunked",
    "sengupta:2",
    "fused",
];

/// A case: the paper model (its first `steps` steps distinct: `t` for a time-varying
/// model, 1 for an invariant one), `nb` tracks of `t` simulated measurements, and the
/// sequential CPU reference (the filter with log-likelihoods, the RTS smoother).
pub struct Case {
    pub model: PaperModel,
    pub z: Measurements<f64>,
    pub filtered: Estimates<f64>,
    pub smoothed: Estimates<f64>,
    pub nx: usize,
    pub nb: usize,
    pub t: usize,
}

impl Case {
    pub fn new(nx: usize, ny: usize, t: usize, steps: usize, nb: usize, seed: u64) -> Case {
        let model = PaperModel::new(nx, ny, t, steps, seed);
        let z = kestrel::sim::simulate(&model, nb, t, seed + 1, 0.25)
            .unwrap()
            .measurements;
        let opts = FilterOptions::default().with_force_general(true);
        let filtered = kestrel::filter(&model, &z, &opts).unwrap().filtered;
        let smoothed = kestrel::smooth_filtered(&model, &filtered).unwrap();
        Case {
            model,
            z,
            filtered,
            smoothed,
            nx,
            nb,
            t,
        }
    }

    /// The harness's header: T, whether the model varies, B.
    pub fn header(&self, varying: bool) -> Vec<u8> {
        let mut input = Vec::new();
        input.extend((self.t as i64).to_le_bytes());
        input.extend(i32::from(varying).to_le_bytes());
        input.extend((self.nb as i64).to_le_bytes());
        input
    }

    /// Elements in all tracks' means and covariances.
    pub fn sizes(&self) -> (usize, usize) {
        let n1 = self.nb * self.t * self.nx;
        (n1, n1 * self.nx)
    }

    /// Checks the next outputs: the filtered means, covariances and log-likelihoods.
    pub fn check_filtered(&self, out: &mut Outputs, tag: &str, tol: f64) {
        let (n1, n2) = self.sizes();
        let nx = self.nx;
        let ll = self.filtered.loglik().expect("filter log-likelihoods");
        for (what, got, want, per) in [
            ("filter mean", out.take(n1), self.filtered.mean(), nx),
            ("filter cov", out.take(n2), self.filtered.cov(), nx * nx),
            ("loglik", out.take(self.nb * self.t), ll, 1),
        ] {
            let e = rel_err(&got, want, per);
            assert!(e < tol, "{tag} {what}: {e:e} (tolerance {tol:e})");
        }
    }

    /// Checks the next outputs, the smoother `what`'s means and covariances, against the
    /// RTS smoother.
    pub fn check_smoothed(&self, out: &mut Outputs, tag: &str, what: &str, tol: f64) {
        let (n1, n2) = self.sizes();
        let nx = self.nx;
        for (part, got, want, per) in [
            ("mean", out.take(n1), self.smoothed.mean(), nx),
            ("cov", out.take(n2), self.smoothed.cov(), nx * nx),
        ] {
            let e = rel_err(&got, want, per);
            assert!(e < tol, "{tag} {what} {part}: {e:e} (tolerance {tol:e})");
        }
    }
}

/// Runs the harness `exe` on `input`: its outputs (reals of `T`) as f64, read in order.
pub fn run_harness<T: Real>(exe: &std::path::Path, input: Vec<u8>, tag: &str) -> Outputs {
    Outputs {
        vals: reals::<T>(&run_piped(exe, input, tag))
            .iter()
            .map(|v| v.to_f64())
            .collect(),
        at: 0,
    }
}

/// A harness's outputs, taken in order.
pub struct Outputs {
    vals: Vec<f64>,
    at: usize,
}

impl Outputs {
    /// All outputs, taken or not.
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    /// The next `n` outputs.
    pub fn take(&mut self, n: usize) -> Vec<f64> {
        let h = self.vals[self.at..self.at + n].to_vec();
        self.at += n;
        h
    }
}
