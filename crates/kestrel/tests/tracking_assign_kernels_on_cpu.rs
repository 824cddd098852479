//! The GNN association kernels (`tracking/kernels/assign.cu`) compiled as plain C++ by
//! the host compiler and run on the CPU (every thread of a launch in a shuffled order,
//! see assign_emulation/shim.h) against the host's `associate::gnn` on random problems:
//! spatial scenes, chains that join into large clusters, stars around one detection,
//! tracks with no pairs, `pd` below and at 1. Each track's pick must be the host's (or
//! the totals equal, a tie); the tracks of clusters past the device limits must be
//! exactly those handed to the host. With the device limits shrunk, most clusters go
//! to the host. Outputs start as junk. Skips with a printed reason when there is no
//! C++ compiler; the device itself is tested by tracking_assign_gpu.rs.

mod assign_common;
mod emulation;

use assign_common::*;
use emulation::*;
use kestrel::tracking::associate::clusters;
use kestrel::tracking::cuda::assign::{source_with, DEVICE_MAX_COLUMNS, DEVICE_MAX_TRACKS};
use std::path::{Path, PathBuf};

const SHIM: &str = include_str!("assign_emulation/shim.h");
const HARNESS: &str = include_str!("assign_emulation/harness.inc");
const FLAGS: &[&str] = &["-std=c++17", "-O2", "-ffp-contract=off"];

fn build(cxx: &str, dir: &Path, maxr: usize, maxc: usize) -> PathBuf {
    let src = format!("{SHIM}\n{}\n{HARNESS}", source_with(maxr, maxc));
    compile(cxx, dir, &format!("assign_{maxr}_{maxc}"), &src, FLAGS)
}

/// Runs the emulated launch sequence; the picks (`-2`: left to the host) and counters.
fn run(exe: &Path, p: &Problem, seed: u32) -> (Vec<i32>, [u32; 4]) {
    let (gain, miss) = p.costs();
    let n = p.n();
    let mut input = Vec::new();
    for v in [n as u32, p.ndet as u32, p.g.det.len() as u32, seed] {
        input.extend(v.to_le_bytes());
    }
    input.extend(gain.to_le_bytes());
    input.extend(miss.to_le_bytes());
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
    assert_eq!(out.len(), 4 * n + 16, "{}: harness output size", p.name);
    let w: Vec<u32> = out
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let pick = w[..n].iter().map(|&v| v as i32).collect();
    (pick, [w[n], w[n + 1], w[n + 2], w[n + 3]])
}

/// Checks one run against the host: picks, the clusters handed over, the counters.
fn verify(p: &Problem, pick: &[i32], counters: [u32; 4], maxr: usize, maxc: usize, what: &str) {
    let cls = clusters(&p.g, p.ndet);
    let mut host_tracks = vec![false; p.n()];
    let (mut multi, mut multi_tracks, mut over, mut largest) = (0, 0, 0, 0);
    for cl in &cls {
        let mut dets: Vec<u32> = cl
            .iter()
            .flat_map(|&i| p.g.det[p.g.of(i)].to_vec())
            .collect();
        dets.sort_unstable();
        dets.dedup();
        if cl.len() >= 2 {
            multi += 1;
            multi_tracks += cl.len();
            largest = largest.max(cl.len());
            if cl.len() > maxr || dets.len() + cl.len() > maxc {
                over += 1;
                cl.iter().for_each(|&i| host_tracks[i] = true);
            }
        }
    }
    assert_eq!(
        counters,
        [multi, multi_tracks as u32, over, largest as u32],
        "{}: {what}: counters (clusters, their tracks, to the host, largest)",
        p.name
    );
    for (i, &v) in pick.iter().enumerate() {
        assert_eq!(
            v == -2,
            host_tracks[i],
            "{}: {what}: track {i} handed to the host or not: {v}",
            p.name
        );
        assert!(
            (-2..p.ndet as i32).contains(&v),
            "{}: {what}: track {i} unwritten or out of range: {v}",
            p.name
        );
    }
    // Host tracks take the reference's picks; the rest must match it on their own.
    let want = p.reference();
    let got: Vec<Option<u32>> = pick
        .iter()
        .enumerate()
        .map(|(i, &v)| match v {
            -2 => want[i],
            -1 => None,
            d => Some(d as u32),
        })
        .collect();
    check(p, &got, what);
}

#[test]
fn device_kernels_pick_the_host_assignment() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (maxr, maxc) in [(DEVICE_MAX_TRACKS, DEVICE_MAX_COLUMNS), (4, 9), (16, 40)] {
        let exe = build(&cxx, dir.path(), maxr, maxc);
        let mut handed = 0;
        let mut solved = 0;
        for (k, p) in problems(1000 + maxr as u64).iter().enumerate() {
            let (pick, counters) = run(&exe, p, k as u32 + 1);
            verify(
                p,
                &pick,
                counters,
                maxr,
                maxc,
                &format!("limits {maxr}/{maxc}"),
            );
            handed += counters[2];
            solved += counters[0] - counters[2];
        }
        eprintln!("limits {maxr}/{maxc}: {solved} clusters on the device, {handed} to the host");
        assert!(
            solved > 100,
            "limits {maxr}/{maxc}: the device solved {solved} clusters"
        );
        if maxr < DEVICE_MAX_TRACKS {
            assert!(
                handed > 10,
                "limits {maxr}/{maxc}: only {handed} clusters reached the host path"
            );
        }
    }
}

#[test]
fn thread_order_does_not_change_the_result() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(&cxx, dir.path(), DEVICE_MAX_TRACKS, DEVICE_MAX_COLUMNS);
    let p = Problem {
        name: "spatial, dense".into(),
        g: spatial(1500, 1500, 0.02, 5),
        ndet: 1500,
        pd: 0.9,
        pg: 0.999,
        clutter: 2e-3,
    };
    let first = run(&exe, &p, 1);
    for seed in 2..6 {
        assert_eq!(run(&exe, &p, seed), first, "thread order {seed}");
    }
}
