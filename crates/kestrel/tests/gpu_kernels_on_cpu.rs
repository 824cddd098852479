//! The CUDA kernels compiled as plain C++ by the host compiler (`$CXX`, else `c++`),
//! with a shim for the CUDA keywords (kernel_emulation/shim.h), and run thread by thread
//! on the CPU against the CPU reference. This checks the kernels' arithmetic and indexing
//! (filter in both layouts, keep last, predicted moments, both smoothers, the tracker)
//! on machines without a GPU, CI included. Skips with a printed reason when there is no
//! C++ compiler. The device's own compiler and hardware are checked by the other gpu_*
//! tests on the GPU.

mod emulation;
mod gpu_common;

use emulation::*;
use gpu_common::*;
use kestrel::kalman::cuda::source::{model_params, source, Part};
use kestrel::{kalman, Estimates, FilterOptions, Keep, Real};
use std::path::Path;

const SHIM: &str = include_str!("kernel_emulation/shim.h");

/// A harness's output cut into its arrays of `sizes` values each, after checking its
/// length and that its `flags` error flags all say "no failure".
fn outputs<T: Real>(stdout: &[u8], sizes: &[usize], flags: usize, tag: &str) -> Vec<Vec<T>> {
    let w = std::mem::size_of::<T>();
    let total: usize = sizes.iter().sum();
    assert_eq!(stdout.len(), total * w + flags * 8, "{tag}: output size");
    let vals: Vec<T> = reals(&stdout[..total * w]);
    let mut parts = vec![];
    let mut off = 0;
    for s in sizes {
        parts.push(vals[off..off + s].to_vec());
        off += s;
    }
    let errs: Vec<u64> = stdout[total * w..]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    assert!(
        errs.iter().all(|e| *e == u64::MAX),
        "{tag}: error flags {errs:?}"
    );
    parts
}
const HARNESS: &str = include_str!("kernel_emulation/harness.inc");
const SMOOTH: &str = include_str!("../src/kalman/kernels/smooth.cu");
const TRACKER: &str = include_str!("../src/kalman/kernels/tracker.cu");

fn run<T: Real>(cxx: &str, dir: &Path, nx: usize, ny: usize, bake: bool, seed: u64, tol: f64) {
    let m = random_model(nx, ny, seed);
    let (b, t) = (7usize, 13usize);
    let z = random_measurements::<T>(&m, b, t, seed + 1, 0.2);
    let tag = format!(
        "nx{nx}_ny{ny}_{}_{}",
        T::NAME,
        if bake { "baked" } else { "params" }
    );
    let src = format!(
        "{SHIM}\n{}\n{SMOOTH}\n{TRACKER}\n{HARNESS}",
        source(nx, ny, T::NAME, bake.then_some(&m), Part::Filter)
    );
    let exe = compile(cxx, dir, &tag, &src, &["-std=c++17", "-O1", "-w"]);
    let mut input = Vec::new();
    input.extend((b as i32).to_le_bytes());
    input.extend((t as i32).to_le_bytes());
    input.extend(bytes(&model_params::<T>(&m)));
    input.extend(bytes(z.data()));
    let stdout = run_piped(&exe, input, &tag);
    let np = nx * (nx + 1) / 2;
    let (bt, n2) = (b * t, nx * nx);
    let sizes = [
        bt * nx,
        bt * n2,
        bt, // filter (with predicted)
        bt * nx,
        bt * n2, // predicted
        b * nx,
        b * n2,
        b, // keep last
        bt * nx,
        bt * n2, // smoother, host layout
        bt * nx,
        bt * n2,
        bt, // filter, SoA
        b * nx,
        b * np,
        b, // tracker state (SoA) and totals
        bt * nx,
        bt * n2, // smoother, SoA
    ];
    let parts = outputs::<T>(&stdout, &sizes, 9, &tag);
    let est = |i: usize, s: usize, ll: Option<usize>| {
        Estimates::new(
            b,
            s,
            nx,
            parts[i].clone(),
            parts[i + 1].clone(),
            ll.map(|j| parts[j].clone()),
        )
        .expect("consistent buffers")
    };
    let reference = FilterOptions::default()
        .with_force_general(true)
        .with_predicted(true);
    let r = kalman::filter(&m, &z, &reference).expect("CPU reference");
    assert_close(
        &format!("{tag} filter"),
        &est(0, t, Some(2)),
        &r.filtered,
        tol,
    );
    let pred = r.predicted.as_ref().expect("asked for");
    assert_close(&format!("{tag} predicted"), &est(3, t, None), pred, tol);
    let last_opts = FilterOptions::default()
        .with_force_general(true)
        .with_keep(Keep::Last);
    let last = kalman::filter(&m, &z, &last_opts)
        .expect("CPU reference")
        .filtered;
    assert_close(&format!("{tag} keep last"), &est(5, 1, Some(7)), &last, tol);
    let s = kalman::smooth_filtered(&m, &r.filtered).expect("CPU smoother");
    assert_close(&format!("{tag} smoother"), &est(8, t, None), &s, tol);
    assert_close(
        &format!("{tag} filter (SoA)"),
        &est(10, t, Some(12)),
        &r.filtered,
        tol,
    );
    assert_close(&format!("{tag} smoother (SoA)"), &est(16, t, None), &s, tol);
    let mut tm = vec![T::nan(); b * nx];
    let mut tc = vec![T::nan(); b * n2];
    for k in 0..b {
        for i in 0..nx {
            tm[k * nx + i] = parts[13][i * b + k];
            for j in 0..nx {
                let (p, q) = if i >= j { (i, j) } else { (j, i) };
                tc[(k * nx + i) * nx + j] = parts[14][(p * (p + 1) / 2 + q) * b + k];
            }
        }
    }
    let tracker =
        Estimates::new(b, 1, nx, tm, tc, Some(parts[15].clone())).expect("consistent buffers");
    assert_close(&format!("{tag} tracker"), &tracker, &last, tol);
    eprintln!("{tag}: ok");
}

#[test]
fn kernels_match_the_cpu_reference_when_run_on_the_cpu() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (i, &(nx, ny)) in [(1, 1), (2, 1), (4, 2), (6, 2), (5, 3), (9, 4)]
        .iter()
        .enumerate()
    {
        let seed = 100 + 10 * nx as u64 + ny as u64;
        run::<f64>(&cxx, dir.path(), nx, ny, i % 2 == 0, seed, 1e-10);
        run::<f32>(&cxx, dir.path(), nx, ny, i % 2 == 1, seed + 50, 1e-4);
    }
}

/// Measurements already on the device are checked by the filter kernel itself: the
/// first infinite component of the batch (in track, step, component order, an infinity
/// beside a NaN included) lands in the second error flag of every filter launch, and
/// finite batches leave it untouched (the test above).
#[test]
fn the_filter_kernels_report_the_first_infinite_measurement() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (nx, ny, b, t) = (4usize, 2usize, 7usize, 13usize);
    let m = random_model(nx, ny, 7);
    let mut z = random_measurements::<f64>(&m, b, t, 8, 0.2);
    let at = |tr: usize, k: usize, j: usize| (tr * t + k) * ny + j;
    let d = z.data_mut();
    d[at(5, 3, 1)] = f64::INFINITY;
    d[at(2, 9, 0)] = f64::NAN;
    d[at(2, 9, 1)] = f64::NEG_INFINITY;
    d[at(2, 11, 0)] = f64::INFINITY;
    let first = at(2, 9, 1) as u64;
    let src = format!(
        "{SHIM}\n{}\n{SMOOTH}\n{TRACKER}\n{HARNESS}",
        source(nx, ny, "f64", None, Part::Filter)
    );
    let exe = compile(&cxx, dir.path(), "inf", &src, &["-std=c++17", "-O1", "-w"]);
    let mut input = Vec::new();
    input.extend((b as i32).to_le_bytes());
    input.extend((t as i32).to_le_bytes());
    input.extend(bytes(&model_params::<f64>(&m)));
    input.extend(bytes(z.data()));
    let stdout = run_piped(&exe, input, "inf");
    let errs: Vec<u64> = stdout[stdout.len() - 9 * 8..]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    // Flags [2i, 2i + 1] belong to filter launches 0 (with predicted), 1 (keep last)
    // and 3 (SoA); pair 2 is the smoother's.
    for i in [0, 1, 3] {
        assert_eq!(errs[2 * i + 1], first, "launch {i}: flags {errs:?}");
    }
}

/// The harness of the per-track inputs kernels: B, T, the model struct, z, then the
/// inputs x0, P0, u, d, R (`[B]..` each) from stdin, the per-step ones transposed to the
/// kernels' structure-of-arrays layout; the filter with inputs in the host
/// layout (all steps) and in the SoA layout (the last state), the smoother with the
/// tracks' u; writes their outputs and error flags.
const INPUTS_HARNESS: &str = r#"
template <class V> void rd(V* p, size_t n) { if (fread(p, sizeof(V), n, stdin) != n) { fprintf(stderr, "short read\n"); exit(1); } }
template <class V> void wr(const std::vector<V>& v) { fwrite(v.data(), sizeof(V), v.size(), stdout); }
#define LAUNCH(B, call) do { blockDim.x = 128; for (long long b_ = 0; b_ < (B); ++b_) { blockIdx.x = b_ / 128; threadIdx.x = b_ % 128; call; } } while (0)
int main() {
    int B, T;
    rd(&B, 1); rd(&T, 1);
    ModelParams mp; rd(&mp, 1);
    std::vector<real> z((size_t)B * T * NY); rd(z.data(), z.size());
    std::vector<real> x0((size_t)B * NX), p0((size_t)B * NX * NX), u((size_t)B * T * NX), d((size_t)B * T * NY), r((size_t)B * T * NY * NY);
    rd(x0.data(), x0.size()); rd(p0.data(), p0.size()); rd(u.data(), u.size()); rd(d.data(), d.size()); rd(r.data(), r.size());
    // The per-step inputs in the kernels' structure-of-arrays layout (host_to_soa).
    auto soa = [&](const std::vector<real>& h, int C) {
        std::vector<real> o(h.size());
        for (long long b = 0; b < B; ++b) for (long long t = 0; t < T; ++t) for (int c = 0; c < C; ++c)
            o[((size_t)t * C + c) * B + b] = h[((size_t)b * T + t) * C + c];
        return o;
    };
    std::vector<real> us = soa(u, NX), ds = soa(d, NY), rs = soa(r, NY * NY);
    TrackIn in = {x0.data(), p0.data(), us.data(), ds.data(), rs.data()};
    const real nan = NAN;
    std::vector<real> mean((size_t)B*T*NX, nan), cov((size_t)B*T*NX*NX, nan), ll((size_t)B*T, nan);
    std::vector<real> lm((size_t)B*NX, nan), lc((size_t)B*NP, nan), lll((size_t)B, nan);
    std::vector<real> sm((size_t)B*T*NX, nan), sc((size_t)B*T*NX*NX, nan);
    std::vector<unsigned long long> err(6, ~0ull);
    LAUNCH(B, kf_filter_all_host_in(mp, z.data(), B, T, mean.data(), cov.data(), ll.data(), nullptr, nullptr, &err[0], in));
    LAUNCH(B, kf_filter_last_soa_in(mp, z.data(), B, T, lm.data(), lc.data(), lll.data(), nullptr, nullptr, &err[2], in));
    LAUNCH(B, rts_smooth_in(mp, mean.data(), cov.data(), sm.data(), sc.data(), B, T, &err[4], us.data()));
    // The last state's SoA layout to the host layout here.
    std::vector<real> hm((size_t)B*NX), hc((size_t)B*NX*NX);
    for (long long b = 0; b < B; ++b) {
        for (int i = 0; i < NX; ++i) hm[b*NX+i] = lm[i*B+b];
        for (int i = 0; i < NX; ++i) for (int j = 0; j < NX; ++j) hc[(b*NX+i)*NX+j] = lc[pk(i,j)*B+b];
    }
    wr(mean); wr(cov); wr(ll); wr(hm); wr(hc); wr(lll); wr(sm); wr(sc); wr(err);
    return 0;
}
"#;

fn run_inputs<T: Real>(
    cxx: &str,
    dir: &Path,
    nx: usize,
    ny: usize,
    bake: bool,
    seed: u64,
    tol: f64,
) {
    use kestrel::kalman::TrackInputs;
    use rand::{Rng, SeedableRng};
    let m = random_model(nx, ny, seed);
    let (b, t) = (9usize, 17usize);
    let z = random_measurements::<T>(&m, b, t, seed + 1, 0.2);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed + 2);
    let mut spd = |n: usize| -> Vec<f64> {
        let a: Vec<f64> = (0..n * n).map(|_| rng.gen_range(-0.7..0.7)).collect();
        (0..n * n)
            .map(|ij| {
                let (i, j) = (ij / n, ij % n);
                (0..n).map(|l| a[i * n + l] * a[j * n + l]).sum::<f64>()
                    + if i == j { 0.4 } else { 0.0 }
            })
            .collect()
    };
    let p0: Vec<f64> = (0..b).flat_map(|_| spd(nx)).collect();
    let r: Vec<f64> = (0..b * t).flat_map(|_| spd(ny)).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed + 3);
    let mut uni = |n: usize, a: f64| -> Vec<f64> { (0..n).map(|_| rng.gen_range(-a..a)).collect() };
    let x0 = uni(b * nx, 2.0);
    let u = uni(b * t * nx, 0.5);
    let d = uni(b * t * ny, 1.0);
    let inputs = TrackInputs::new()
        .with_priors(&x0, &p0)
        .with_u(&u)
        .with_d(&d)
        .with_r(&r);
    let tag = format!(
        "inputs_nx{nx}_ny{ny}_{}_{}",
        T::NAME,
        if bake { "baked" } else { "params" }
    );
    let src = format!(
        "{SHIM}\n{}\n{SMOOTH}\n{INPUTS_HARNESS}",
        source(nx, ny, T::NAME, bake.then_some(&m), Part::FilterInputs)
    );
    let exe = compile(cxx, dir, &tag, &src, &["-std=c++17", "-O1", "-w"]);
    let conv = |v: &[f64]| -> Vec<T> { v.iter().map(|x| T::of(*x)).collect() };
    let mut input = Vec::new();
    input.extend((b as i32).to_le_bytes());
    input.extend((t as i32).to_le_bytes());
    input.extend(bytes(&model_params::<T>(&m)));
    input.extend(bytes(z.data()));
    for v in [&x0, &p0, &u, &d, &r] {
        input.extend(bytes(&conv(v)));
    }
    let stdout = run_piped(&exe, input, &tag);
    let (bt, n2) = (b * t, nx * nx);
    let sizes = [bt * nx, bt * n2, bt, b * nx, b * n2, b, bt * nx, bt * n2];
    let parts = outputs::<T>(&stdout, &sizes, 6, &tag);
    let est = |i: usize, s: usize, ll: Option<usize>| {
        Estimates::new(
            b,
            s,
            nx,
            parts[i].clone(),
            parts[i + 1].clone(),
            ll.map(|j| parts[j].clone()),
        )
        .expect("consistent buffers")
    };
    let all =
        kalman::filter_with(&m, &z, &FilterOptions::default(), &inputs).expect("CPU reference");
    assert_close(
        &format!("{tag} filter"),
        &est(0, t, Some(2)),
        &all.filtered,
        tol,
    );
    let last = kalman::filter_with(
        &m,
        &z,
        &FilterOptions::default().with_keep(Keep::Last),
        &inputs,
    )
    .expect("CPU reference");
    assert_close(
        &format!("{tag} keep last (SoA)"),
        &est(3, 1, Some(5)),
        &last.filtered,
        tol,
    );
    let (_, s) = kalman::smooth_with(&m, &z, &inputs).expect("CPU smoother");
    assert_close(&format!("{tag} smoother"), &est(6, t, None), &s, tol);
    eprintln!("{tag}: ok");
}

#[test]
fn the_track_input_kernels_match_the_cpu_when_run_on_the_cpu() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (i, &(nx, ny)) in [(1, 1), (4, 2), (5, 3)].iter().enumerate() {
        let seed = 300 + 10 * nx as u64 + ny as u64;
        run_inputs::<f64>(&cxx, dir.path(), nx, ny, i % 2 == 0, seed, 1e-10);
        run_inputs::<f32>(&cxx, dir.path(), nx, ny, i % 2 == 1, seed + 50, 1e-4);
    }
}
