//! The JPDA kernels (`tracking/kernels/jpda.cu`, after `assign.cu` for the clustering)
//! compiled as plain C++ and run on the CPU (threads in a shuffled order, see
//! assign_emulation/shim.h) against the host's `associate::jpda` on the association
//! problems of the GNN tests: enumerated clusters (the host's events in the host's order),
//! belief propagation (every cluster with `exact_events` 0, or the large ones; each
//! detection's column summed in the host's order), and a mix: the host's marginals to
//! 1e-15, the emulation's `exp` being the host's. Outputs start as NaN. Skips with a
//! printed reason when there is no C++ compiler; the device itself is tested by
//! tracking_assign_gpu.rs.

mod assign_common;
mod emulation;

use assign_common::*;
use emulation::*;
use kestrel::tracking::associate::{clusters, jpda};
use kestrel::tracking::cuda::jpda::source;
use std::path::{Path, PathBuf};

const SHIM: &str = include_str!("assign_emulation/shim.h");
const HARNESS: &str = include_str!("assign_emulation/jpda_harness.inc");
const FLAGS: &[&str] = &["-std=c++20", "-O2", "-ffp-contract=off", "-pthread"];

/// The host compiler, if it has C++20's `<barrier>` (the shim's `__syncthreads`).
fn compiler() -> Option<String> {
    compiler_for(&FLAGS[..1], "#include <barrier>\nint main() {}\n")
}

fn build(cxx: &str, dir: &Path) -> PathBuf {
    let src = format!("{SHIM}\n{}\n{HARNESS}", source());
    compile(cxx, dir, "jpda", &src, FLAGS)
}

/// The emulated marginals: beta0 [n], beta [m], and (clusters, enumerated, propagated,
/// rounds).
fn run(exe: &Path, p: &Problem, exact: f64, seed: u32) -> (Vec<f64>, Vec<f64>, [u32; 4]) {
    let gain = p.pd.ln() - p.clutter.ln();
    let log_miss = (1.0 - p.pd * p.pg).ln();
    let (n, m) = (p.n(), p.g.det.len());
    let mut input = Vec::new();
    for v in [n as u32, p.ndet as u32, m as u32, seed] {
        input.extend(v.to_le_bytes());
    }
    for v in [gain, log_miss, exact] {
        input.extend(v.to_le_bytes());
    }
    for &s in &p.g.start {
        input.extend((s as u32).to_le_bytes());
    }
    for &d in &p.g.det {
        input.extend(d.to_le_bytes());
    }
    for &l in &p.g.ll {
        input.extend(l.to_le_bytes());
    }
    let out = run_piped(exe, input, &p.name);
    assert_eq!(
        out.len(),
        8 * (n + m) + 16,
        "{}: harness output size",
        p.name
    );
    let f = |b: &[u8]| f64::from_le_bytes(b.try_into().unwrap());
    let beta0 = out[..8 * n].chunks_exact(8).map(f).collect();
    let beta = out[8 * n..8 * (n + m)].chunks_exact(8).map(f).collect();
    let t = &out[8 * (n + m)..];
    let u = |i: usize| u32::from_le_bytes(t[4 * i..4 * i + 4].try_into().unwrap());
    (beta0, beta, [u(0), u(1), u(2), u(3)])
}

/// Largest difference from the host's marginals (every track's beta0 and every pair's).
fn worst(p: &Problem, exact: f64, beta0: &[f64], beta: &[f64]) -> f64 {
    let cl = clusters(&p.g, p.ndet);
    let want = jpda(&cl, &p.g, p.n(), p.pd, p.pg, p.clutter, exact);
    let mut most: f64 = 0.0;
    for (i, w) in want.iter().enumerate() {
        assert!(
            beta0[i].is_finite(),
            "{}: track {i}: beta0 unwritten",
            p.name
        );
        most = most.max((beta0[i] - w.beta0).abs());
        // The host lists a track's pairs in the gate's order, as the device writes them.
        for (k, &(d, b)) in p.g.of(i).zip(&w.det) {
            assert_eq!(p.g.det[k], d, "{}: track {i}: pair order", p.name);
            assert!(beta[k].is_finite(), "{}: pair {k}: beta unwritten", p.name);
            most = most.max((beta[k] - b).abs());
        }
    }
    most
}

#[test]
fn jpda_kernels_give_the_host_marginals() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(&cxx, dir.path());
    let (mut enumerated, mut propagated) = (0, 0);
    let mut lbp_worst: f64 = 0.0;
    for (k, p) in problems(2024).iter().enumerate() {
        for exact in [2e4, 50.0, 0.0] {
            let (b0, b, c) = run(&exe, p, exact, k as u32 + 1);
            let d = worst(p, exact, &b0, &b);
            // Both methods sum the host's terms in the host's order with the host's
            // roundings (belief propagation's column sums too, so it runs each cluster
            // the host's rounds), and the emulation's exp is the host's.
            let tol = 1e-15;
            assert!(
                d <= tol,
                "{}: exact_events {exact}: marginals differ by {d:e} ({c:?})",
                p.name
            );
            if c[2] > 0 {
                lbp_worst = lbp_worst.max(d);
            }
            enumerated += c[1];
            propagated += c[2];
        }
    }
    eprintln!(
        "jpda kernels: {enumerated} clusters enumerated, {propagated} propagated \
         (largest difference with a cluster propagated {lbp_worst:e})"
    );
    assert!(enumerated > 100 && propagated > 100);
}
