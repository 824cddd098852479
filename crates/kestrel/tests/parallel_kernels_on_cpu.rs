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

use emulation::{compile, compiler, reals, run_piped};
use kestrel::parallel::PaperModel;
use kestrel::{Estimates, FilterOptions, Real};
use parallel_emulation::{put_model, rel_err, source};

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
    let src = source::<T>(nx, ny, "", "");
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(cxx, dir.path(), &tag, &src, &["-std=c++17", "-O1", "-w"]);
    let mut input = Vec::new();
    input.extend((t as i64).to_le_bytes());
    input.extend(1i32.to_le_bytes());
    input.extend((nb as i64).to_le_bytes());
    put_model::<T>(&mut input, &model, &z, t);
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
