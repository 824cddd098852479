//! The GNN association kernels (`tracking/kernels/assign.cu`) compiled as plain C++ by
//! the host compiler and run on the CPU (every thread of a launch in a shuffled order,
//! the block solver's blocks as threads at a barrier; see assign_emulation/shim.h)
//! against the host's `associate::gnn` on random problems: spatial scenes, chains that
//! join into large clusters, stars around one detection, tracks with no pairs, `pd`
//! below and at 1. Each track's pick must be the host's (or the totals equal, a tie);
//! the clusters past a thread's limits must be exactly those handed to the block solver,
//! and those past the block's limits exactly those handed to the host. With the limits
//! shrunk, most clusters go to the block solver or the host. Outputs start as junk.
//! Skips with a printed reason when there is no C++ compiler; the device itself is
//! tested by tracking_assign_gpu.rs.

mod assign_common;
mod emulation;

use assign_common::*;
use emulation::*;
use kestrel::tracking::associate::{clusters, live_pairs};
use kestrel::tracking::cuda::assign::{source_with, Limits};
use std::path::{Path, PathBuf};

const SHIM: &str = include_str!("assign_emulation/shim.h");
const HARNESS: &str = include_str!("assign_emulation/harness.inc");
const FLAGS: &[&str] = &["-std=c++20", "-O2", "-ffp-contract=off", "-pthread"];

/// The host compiler, if it has C++20's `<barrier>` (the shim's `__syncthreads`).
fn compiler() -> Option<String> {
    compiler_for(&FLAGS[..1], "#include <barrier>\nint main() {}\n")
}

fn build(cxx: &str, dir: &Path, l: Limits) -> PathBuf {
    let src = format!("{SHIM}\n{}\n{HARNESS}", source_with(l));
    let name = format!(
        "assign_{}_{}_{}_{}_{}_{}",
        l.tracks, l.columns, l.block_tracks, l.block_columns, l.block_pairs, l.block_threads
    );
    compile(cxx, dir, &name, &src, FLAGS)
}

/// The default limits with the block solver's threads set to `threads` (its emulation
/// costs a host thread each).
fn limits(threads: usize) -> Limits {
    Limits {
        block_threads: threads,
        ..Limits::default()
    }
}

/// Runs the emulated launch sequence; the picks (`-2`: left to the host) and counters.
fn run(exe: &Path, p: &Problem, seed: u32) -> (Vec<i32>, [u32; 5]) {
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
    assert_eq!(out.len(), 4 * n + 20, "{}: harness output size", p.name);
    let w: Vec<u32> = out
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let pick = w[..n].iter().map(|&v| v as i32).collect();
    (pick, [w[n], w[n + 1], w[n + 2], w[n + 3], w[n + 4]])
}

/// Checks one run against the host: picks, the clusters handed over, the counters.
fn verify(p: &Problem, pick: &[i32], counters: [u32; 5], l: Limits, what: &str) {
    let (gain, miss) = p.costs();
    let live = live_pairs(&p.g, gain, miss);
    let cls = clusters(&live, p.ndet);
    let mut host_tracks = vec![false; p.n()];
    let (mut multi, mut multi_tracks, mut over, mut largest, mut blocks) = (0, 0, 0, 0, 0);
    for cl in &cls {
        let mut dets: Vec<u32> = cl
            .iter()
            .flat_map(|&i| live.det[live.of(i)].to_vec())
            .collect();
        let pairs = dets.len();
        dets.sort_unstable();
        dets.dedup();
        let cols = dets.len() + cl.len();
        if cl.len() >= 2 {
            multi += 1;
            multi_tracks += cl.len();
            largest = largest.max(cl.len());
            if cl.len() > l.tracks || cols > l.columns {
                blocks += 1;
                if cl.len() > l.block_tracks || pairs > l.block_pairs || cols > l.block_columns {
                    over += 1;
                    cl.iter().for_each(|&i| host_tracks[i] = true);
                }
            }
        }
    }
    assert_eq!(
        counters,
        [multi, multi_tracks as u32, over, largest as u32, blocks],
        "{}: {what}: counters (clusters, their tracks, to the host, largest, to the block solver)",
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
    let shrunk = |tracks, columns, block_tracks, block_columns, block_pairs| Limits {
        tracks,
        columns,
        block_tracks,
        block_columns,
        block_pairs,
        block_threads: 8,
    };
    for l in [
        limits(16),
        shrunk(4, 9, 24, 64, 96),
        shrunk(16, 40, 64, 128, 256),
    ] {
        let exe = build(&cxx, dir.path(), l);
        let (mut handed, mut solved, mut blocks) = (0, 0, 0);
        for (k, p) in problems(1000 + l.tracks as u64).iter().enumerate() {
            let (pick, counters) = run(&exe, p, k as u32 + 1);
            verify(p, &pick, counters, l, &format!("limits {l:?}"));
            handed += counters[2];
            blocks += counters[4] - counters[2];
            solved += counters[0] - counters[4];
        }
        eprintln!(
            "limits {l:?}: {solved} clusters by a thread, {blocks} by a block, {handed} to the host"
        );
        assert!(
            solved > 100,
            "limits {l:?}: threads solved {solved} clusters"
        );
        assert!(blocks > 5, "limits {l:?}: blocks solved {blocks} clusters");
        assert!(handed > 0, "limits {l:?}: no cluster reached the host path");
    }
}

#[test]
fn the_block_solver_at_its_launch_width() {
    // The launcher's 128 threads a block, on the problems whose clusters reach it.
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let l = limits(128);
    let exe = build(&cxx, dir.path(), l);
    let mut blocks = 0;
    for (k, p) in problems(77)
        .iter()
        .filter(|p| p.name.starts_with("chains"))
        .enumerate()
    {
        let (pick, counters) = run(&exe, p, k as u32 + 1);
        verify(p, &pick, counters, l, "128 threads");
        blocks += counters[4] - counters[2];
    }
    assert!(blocks > 0, "no cluster reached the block solver");
}

#[test]
fn thread_order_does_not_change_the_result() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(&cxx, dir.path(), limits(16));
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
