//! The GPU kernels of time-varying models and of the means-only retrodiction
//! (`src/parallel/kernels/parallel_seq.cu`: the sequential filter and RTS smoother, one
//! thread per track over per-step matrices; `parallel_means.cu`: the thesis's `(C_k, b_k)`
//! scan without covariances) compiled as plain C++ (`$CXX`, else `c++`; the harness of
//! parallel_emulation) and run thread by thread on the CPU against the sequential CPU
//! reference, on fresh random time-varying models with missing values (and a
//! time-invariant one through a single StepM), both precisions, batches of tracks, every
//! scan algorithm of the retrodiction (stored and fused). Outputs start as NaN, so an
//! element no thread wrote fails. Skips with a printed reason without a C++ compiler;
//! tests/parallel_gpu.rs runs the real thing on a GPU.

mod common;
mod emulation;
mod parallel_emulation;

use emulation::{compile, compiler};
use kestrel::Real;
use parallel_emulation::{put_model, rel_err, run_harness, source, Case, ALGORITHMS};

/// The launch sequences of parallel/cuda/run.rs for Method::Sequential / SequentialRts
/// (one launch over the B tracks, grid x) and Method::RetrodictMeans (stored scans and
/// the fused form).
const MAIN: &str = r#"
int main() {
    long long T; int varying;
    rd(&T, 1); rd(&varying, 1); rd(&NB, 1);
    std::vector<StepM> st(varying ? T : 1); rd(st.data(), st.size());
    std::vector<real> prior(NX + NX2); rd(prior.data(), prior.size());
    std::vector<real> z(NB * T * NY); rd(z.data(), z.size());
    const long long N = NB * T, B = NB;
    std::vector<real> m(N * NX, NAN), c(N * NX2, NAN), l(N, NAN), s1(N * NX, NAN), c1(N * NX2, NAN);
    NB = 1;  // one-thread-per-track kernels: the tracks are the grid's first dimension
    LAUNCH(B, seq_filter(st.data(), varying, prior.data(), z.data(), B, T, m.data(), c.data(), l.data()));
    LAUNCH(B, seq_rts(st.data(), varying, m.data(), c.data(), B, T, s1.data(), c1.data()));
    NB = B;
    wr(m); wr(c); wr(l); wr(s1); wr(c1);
    for (int alg = 0; alg < 7; ++alg) {
        std::vector<real> sm(N * NX, NAN);
        if (alg == 6) {  // fused, chunks of 3 steps
            const int KF = 3;
            const long long nc = (T + KF - 1) / KF;
            std::vector<ME> tot(NB * nc);
            LAUNCH(nc, pm_reduce(st.data(), varying, m.data(), c.data(), T, KF, tot.data()));
            chunked(tot, nc, 1, 1);
            LAUNCH(nc, pm_sweep(tot.data(), st.data(), varying, m.data(), c.data(), T, KF, sm.data()));
        } else {
            std::vector<ME> me(N);
            LAUNCH(T, pm_build(st.data(), varying, m.data(), c.data(), T, me.data()));
            scan(me, T, alg, true);
            LAUNCH(T, pm_extract(me.data(), T, sm.data()));
        }
        wr(sm);
    }
    return 0;
}
"#;

#[allow(clippy::too_many_arguments)]
fn run<T: Real>(
    cxx: &str,
    nx: usize,
    ny: usize,
    t: usize,
    nb: usize,
    seed: u64,
    varying: bool,
    tol: f64,
) {
    let steps = if varying { t } else { 1 };
    let case = Case::new(nx, ny, t, steps, nb, seed);
    let tag = format!("seq_nx{nx}_ny{ny}_T{t}_B{nb}_v{varying}_{}", T::NAME);
    let src = source::<T>(nx, ny, "#define SPLIT_MAIN\n", MAIN);
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(cxx, dir.path(), &tag, &src, &["-std=c++17", "-O1", "-w"]);
    let mut input = case.header(varying);
    put_model::<T>(&mut input, &case.model, &case.z, steps);
    let mut out = run_harness::<T>(&exe, input, &tag);
    let (n1, n2) = case.sizes();
    assert_eq!(
        out.len(),
        2 * n1 + 2 * n2 + nb * t + ALGORITHMS.len() * n1,
        "{tag}: output size"
    );
    case.check_filtered(&mut out, &tag, tol);
    case.check_smoothed(&mut out, &tag, "rts", tol);
    for name in ALGORITHMS {
        let means = out.take(n1);
        let e = rel_err(&means, case.smoothed.mean(), nx);
        assert!(e < tol, "{tag} means-only retrodiction {name}: {e:e}");
    }
}

#[test]
fn sequential_and_means_only_kernels_equal_the_reference_on_the_cpu() {
    let Some(cxx) = compiler() else { return };
    run::<f64>(&cxx, 4, 2, 1, 1, 11, true, 1e-9);
    run::<f64>(&cxx, 4, 2, 37, 3, 12, true, 1e-9);
    run::<f64>(&cxx, 3, 1, 50, 2, 13, false, 1e-9);
    run::<f64>(&cxx, 2, 2, 23, 5, 14, true, 1e-9);
    run::<f32>(&cxx, 4, 2, 41, 4, 15, true, 1e-4);
    run::<f32>(&cxx, 3, 2, 30, 3, 16, false, 1e-4);
}
