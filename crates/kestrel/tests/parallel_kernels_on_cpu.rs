//! The parallel CUDA kernels (`src/parallel/kernels/parallel_*.cu`) compiled as plain C++ by the
//! host compiler (`$CXX`, else `c++`) and run thread by thread on the CPU
//! (parallel_emulation/harness.inc, which also repeats the launch sequences of
//! `parallel/cuda/run.rs`), against the sequential CPU reference: every GPU scan
//! algorithm, filter with log-likelihoods, RTS and two-filter smoother, time-varying
//! models with missing values, both precisions, batches of several tracks in one launch. Checks the kernels' arithmetic and
//! indexing without a GPU (CI included); skips with a printed reason when there is no C++
//! compiler. On a GPU, tests/parallel_gpu.rs runs the real thing.

mod emulation;

use emulation::{compile, compiler, put_f64, reals, run_piped};
use kestrel::parallel::PaperModel;
use kestrel::{Estimates, FilterOptions, Measurements, Real, StateSpace};

const OPS: &str = include_str!("../src/parallel/kernels/parallel_ops.cu");
const SCAN: &str = include_str!("../src/parallel/kernels/parallel_scan.cu");
const MODEL: &str = include_str!("../src/parallel/kernels/parallel_model.cu");
const FUSED: &str = include_str!("../src/parallel/kernels/parallel_fused.cu");
const HARNESS: &str = include_str!("parallel_emulation/harness.inc");

fn push_mat<T: Real>(out: &mut Vec<u8>, m: &nalgebra::DMatrix<f64>) {
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            put_f64::<T>(out, m[(i, j)]);
        }
    }
}

/// Largest per-step relative difference `||a_k - b_k||_inf / max(||b_k||_inf, 1e-3)`.
fn rel_err(a: &[f64], b: &[f64], per: usize) -> f64 {
    a.chunks(per)
        .zip(b.chunks(per))
        .map(|(x, y)| {
            let s = y.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-3);
            x.iter().zip(y).fold(0.0f64, |m, (p, q)| {
                if (p - q).is_nan() {
                    f64::INFINITY
                } else {
                    m.max((p - q).abs())
                }
            }) / s
        })
        .fold(0.0, f64::max)
}

#[allow(clippy::too_many_arguments)]
fn run<T: Real>(cxx: &str, nx: usize, ny: usize, t: usize, nb: usize, seed: u64, tol: f64) {
    let model = PaperModel::new(nx, ny, t, t, seed);
    let z = kestrel::sim::simulate(&model, nb, t, seed + 1, 0.25)
        .unwrap()
        .measurements;
    let opts = FilterOptions::default().with_force_general(true);
    let rf: Estimates<f64> = kestrel::filter(&model, &z, &opts).unwrap().filtered;
    let rs = kestrel::smooth_filtered(&model, &rf).unwrap();
    let tag = format!("nx{nx}_ny{ny}_T{t}_B{nb}_{}", T::NAME);
    let real = if T::NAME == "f64" { "double" } else { "float" };
    let src = format!(
        "#define NX {nx}\n#define NY {ny}\ntypedef {real} real;\n{}",
        HARNESS.replace("/*KERNELS*/", &format!("{OPS}\n{SCAN}\n{MODEL}\n{FUSED}\n"))
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(cxx, dir.path(), &tag, &src, &["-std=c++17", "-O1", "-w"]);
    let mut input = Vec::new();
    input.extend((t as i64).to_le_bytes());
    input.extend(1i32.to_le_bytes());
    input.extend((nb as i64).to_le_bytes());
    for k in 0..t {
        let (f, u, q) = model.transition(k);
        let (h, d, r) = model.observation(k);
        push_mat::<T>(&mut input, f);
        u.iter().for_each(|v| put_f64::<T>(&mut input, *v));
        push_mat::<T>(&mut input, q);
        push_mat::<T>(&mut input, h);
        d.iter().for_each(|v| put_f64::<T>(&mut input, *v));
        push_mat::<T>(&mut input, r);
    }
    model
        .prior
        .x0
        .iter()
        .for_each(|v| put_f64::<T>(&mut input, *v));
    push_mat::<T>(&mut input, &model.prior.p0);
    let z: Measurements<T> = z.cast();
    z.data()
        .iter()
        .for_each(|v| put_f64::<T>(&mut input, v.to_f64()));
    let vals: Vec<f64> = reals::<T>(&run_piped(&exe, input, &tag))
        .iter()
        .map(|v| v.to_f64())
        .collect();
    let (n1, n2) = (nb * t * nx, nb * t * nx * nx);
    let per_alg = 3 * n1 + 3 * n2 + nb * t;
    assert_eq!(vals.len(), 7 * per_alg, "{tag}: output size");
    let ll = rf.loglik().expect("filter log-likelihoods");
    for (a, name) in [
        "sequential",
        "ladner-fischer",
        "hillis-steele",
        "blelloch",
        "chunked",
        "sengupta:2",
        "fused",
    ]
    .iter()
    .enumerate()
    {
        let mut o = &vals[a * per_alg..(a + 1) * per_alg];
        let mut take = |n: usize| {
            let (h, rest) = o.split_at(n);
            o = rest;
            h.to_vec()
        };
        let (m, c, l, sm, sc, tm, tc) = (
            take(n1),
            take(n2),
            take(nb * t),
            take(n1),
            take(n2),
            take(n1),
            take(n2),
        );
        let errs = [
            ("filter mean", rel_err(&m, rf.mean(), nx)),
            ("filter cov", rel_err(&c, rf.cov(), nx * nx)),
            ("loglik", rel_err(&l, ll, 1)),
            ("rts mean", rel_err(&sm, rs.mean(), nx)),
            ("rts cov", rel_err(&sc, rs.cov(), nx * nx)),
            ("two-filter mean", rel_err(&tm, rs.mean(), nx)),
            ("two-filter cov", rel_err(&tc, rs.cov(), nx * nx)),
        ];
        for (what, e) in errs {
            assert!(e < tol, "{tag} {name} {what}: {e:e}");
        }
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
