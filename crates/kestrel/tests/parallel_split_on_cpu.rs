//! The split of one sequence over several devices (`parallel/cuda/split.rs`: shares of the
//! time steps, the share totals crossing, the sweeps started from the carried prefix and
//! suffix) with the kernels of `src/parallel/kernels/parallel_*.cu` compiled as plain C++
//! (`$CXX`, else `c++`; parallel_emulation/harness.inc and split.inc) and run on the CPU,
//! against the sequential CPU reference: the filter with log-likelihoods and the two-filter
//! smoother, 1 to 5 shares (shares of one step included), time-varying models with missing
//! values, both precisions, batches of tracks. Skips with a printed reason when there is
//! no C++ compiler; tests/parallel_multi_gpu.rs runs the real thing on GPUs.

use kestrel::parallel::PaperModel;
use kestrel::{Estimates, FilterOptions, Measurements, Real, StateSpace};
use std::io::Write;
use std::process::{Command, Stdio};

const OPS: &str = include_str!("../src/parallel/kernels/parallel_ops.cu");
const SCAN: &str = include_str!("../src/parallel/kernels/parallel_scan.cu");
const MODEL: &str = include_str!("../src/parallel/kernels/parallel_model.cu");
const FUSED: &str = include_str!("../src/parallel/kernels/parallel_fused.cu");
const HARNESS: &str = include_str!("parallel_emulation/harness.inc");
const SPLIT: &str = include_str!("parallel_emulation/split.inc");

fn compiler() -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let ok = Command::new(&cxx)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(cxx)
}

fn push<T: Real>(out: &mut Vec<u8>, v: f64) {
    if T::NAME == "f64" {
        out.extend(v.to_le_bytes());
    } else {
        out.extend((v as f32).to_le_bytes());
    }
}

fn push_mat<T: Real>(out: &mut Vec<u8>, m: &nalgebra::DMatrix<f64>) {
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            push::<T>(out, m[(i, j)]);
        }
    }
}

fn read<T: Real>(b: &[u8]) -> Vec<f64> {
    let w = std::mem::size_of::<T>();
    b.chunks_exact(w)
        .map(|c| {
            if w == 8 {
                f64::from_le_bytes(c.try_into().expect("8 bytes"))
            } else {
                f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes")))
            }
        })
        .collect()
}

/// Largest per-step relative difference `||a_k - b_k||_inf / max(||b_k||_inf, 1e-3)`
/// (NaN, an output nobody wrote, is infinite).
fn rel_err(a: &[f64], b: &[f64], per: usize) -> f64 {
    assert_eq!(a.len(), b.len());
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

/// Builds the harness for `nx`, `ny` and `T` (once per size and precision).
fn build<T: Real>(cxx: &str, dir: &std::path::Path, nx: usize, ny: usize) -> std::path::PathBuf {
    let tag = format!("split_nx{nx}_ny{ny}_{}", T::NAME);
    let real = if T::NAME == "f64" { "double" } else { "float" };
    let src = format!(
        "#define NX {nx}\n#define NY {ny}\n#define SPLIT_MAIN\ntypedef {real} real;\n{}\n{SPLIT}",
        HARNESS.replace("/*KERNELS*/", &format!("{OPS}\n{SCAN}\n{MODEL}\n{FUSED}\n"))
    );
    let (cpp, exe) = (dir.join(format!("{tag}.cpp")), dir.join(&tag));
    std::fs::write(&cpp, src).unwrap();
    let out = Command::new(cxx)
        .args(["-std=c++17", "-O1", "-w", "-o"])
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
    let model = PaperModel::new(nx, ny, t, t, seed);
    let z = kestrel::sim::simulate(&model, nb, t, seed + 1, 0.25)
        .unwrap()
        .measurements;
    let opts = FilterOptions::default().with_force_general(true);
    let rf: Estimates<f64> = kestrel::filter(&model, &z, &opts).unwrap().filtered;
    let rs = kestrel::smooth_filtered(&model, &rf).unwrap();
    let tag = format!("nx{nx}_ny{ny}_T{t}_B{nb}_G{g}_{}", T::NAME);
    let mut input = Vec::new();
    input.extend((t as i64).to_le_bytes());
    input.extend(1i32.to_le_bytes());
    input.extend((nb as i64).to_le_bytes());
    input.extend((g as i64).to_le_bytes());
    for k in 0..t {
        let (f, u, q) = model.transition(k);
        let (h, d, r) = model.observation(k);
        push_mat::<T>(&mut input, f);
        u.iter().for_each(|v| push::<T>(&mut input, *v));
        push_mat::<T>(&mut input, q);
        push_mat::<T>(&mut input, h);
        d.iter().for_each(|v| push::<T>(&mut input, *v));
        push_mat::<T>(&mut input, r);
    }
    model
        .prior
        .x0
        .iter()
        .for_each(|v| push::<T>(&mut input, *v));
    push_mat::<T>(&mut input, &model.prior.p0);
    let z: Measurements<T> = z.cast();
    z.data()
        .iter()
        .for_each(|v| push::<T>(&mut input, v.to_f64()));
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the harness");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(&input)
        .expect("feed the harness");
    let out = child.wait_with_output().expect("harness output");
    assert!(out.status.success(), "{tag}: harness failed");
    let vals = read::<T>(&out.stdout);
    let (n1, n2) = (nb * t * nx, nb * t * nx * nx);
    assert_eq!(vals.len(), 2 * n1 + 2 * n2 + nb * t, "{tag}: output size");
    let mut o = &vals[..];
    let mut take = |n: usize| {
        let (h, rest) = o.split_at(n);
        o = rest;
        h.to_vec()
    };
    let (m, c, l, sm, sc) = (take(n1), take(n2), take(nb * t), take(n1), take(n2));
    let ll = rf.loglik().expect("filter log-likelihoods");
    for (what, e) in [
        ("filter mean", rel_err(&m, rf.mean(), nx)),
        ("filter cov", rel_err(&c, rf.cov(), nx * nx)),
        ("loglik", rel_err(&l, ll, 1)),
        ("two-filter mean", rel_err(&sm, rs.mean(), nx)),
        ("two-filter cov", rel_err(&sc, rs.cov(), nx * nx)),
    ] {
        assert!(e < tol, "{tag} {what}: {e:e} (tolerance {tol:e})");
    }
}

#[test]
fn split_shares_equal_the_reference_on_the_cpu() {
    let Some(cxx) = compiler() else {
        eprintln!("skipped: no C++ compiler (set CXX)");
        return;
    };
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
