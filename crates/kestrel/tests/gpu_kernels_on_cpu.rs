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
    let w = std::mem::size_of::<T>();
    let total: usize = sizes.iter().sum();
    assert_eq!(stdout.len(), total * w + 9 * 8, "{tag}: output size");
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
