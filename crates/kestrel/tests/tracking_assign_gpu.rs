//! GNN association on the GPU (`tracking::cuda::assign`) against the host's
//! `associate::gnn`: the random problems of the kernels-on-CPU test (spatial scenes,
//! chains that join into clusters past the device limits and go to the host, stars,
//! tracks with no pairs, `pd` below and at 1), each track's pick equal to the host's
//! (or the totals equal, a tie), the output poisoned before each run; and one scale
//! scene (about 3e5 tracks, 2.5e5 detections, 1e6 gated pairs) checked the same way and
//! timed by CUDA events (printed, not asserted). Skips without a GPU (fails with
//! KESTREL_REQUIRE_GPU=1).

mod assign_common;
mod gpu_common;

use assign_common::*;
use gpu_common::gpu_or_skip;
use kestrel::tracking::associate::{clusters, jpda, EXACT_EVENTS};
use kestrel::tracking::cuda::assign::{gnn_gpu, gnn_gpu_timed};
use kestrel::tracking::cuda::jpda::jpda_gpu_timed;

#[test]
fn gpu_picks_the_host_assignment() {
    if !gpu_or_skip("gpu_picks_the_host_assignment") {
        return;
    }
    for seed in [3, 4] {
        for p in problems(seed) {
            let (gain, miss) = p.costs();
            let got = gnn_gpu(&p.g, p.ndet, gain, miss).expect("GPU association");
            check(&p, &got, "GPU");
        }
    }
}

#[test]
fn gpu_at_scale() {
    if !gpu_or_skip("gpu_at_scale") {
        return;
    }
    let (g, ndet) = blobs(100_000, 17);
    let p = Problem {
        name: "scale".into(),
        g,
        ndet,
        pd: 0.9,
        pg: 0.999,
        clutter: 2e-3,
    };
    let (gain, miss) = p.costs();
    let t0 = std::time::Instant::now();
    let want = p.reference();
    let host_s = t0.elapsed().as_secs_f64();
    let (got, run) = gnn_gpu_timed(&p.g, p.ndet, gain, miss, 20).expect("GPU association");
    check(&p, &got, "GPU");
    let mut t = run.times_ms.clone();
    t.sort_by(f64::total_cmp);
    let assigned = want.iter().filter(|x| x.is_some()).count();
    println!(
        "gnn gpu at scale: {} tracks, {} detections, {} pairs; {} clusters of 2+ ({} tracks, largest {}, {} on the host); {assigned} assigned; device {:.3} ms median ({:.3} min, {:.3} max of {}); host reference {:.1} ms ({} threads)",
        p.n(),
        p.ndet,
        p.g.det.len(),
        run.stats.clusters,
        run.stats.clustered_tracks,
        run.stats.largest,
        run.stats.host_clusters,
        t[t.len() / 2],
        t[0],
        t[t.len() - 1],
        t.len(),
        host_s * 1e3,
        rayon::current_num_threads()
    );
    assert_eq!(got.len(), p.n());
}

#[test]
fn gpu_chains_at_scale() {
    if !gpu_or_skip("gpu_chains_at_scale") {
        return;
    }
    // Deep union-find trees (long runs of tracks each sharing a detection with the
    // next), many clusters past one thread's limits: the block solver at scale; then a
    // scene whose gates overlap into clusters past the block's limits: the host path.
    for (k, breaks) in [0.1, 0.03].into_iter().enumerate() {
        let (g, ndet) = chains(200_000, breaks, 40 + k as u64);
        let p = Problem {
            name: format!("chains at scale, breaks {breaks}"),
            g,
            ndet,
            pd: 0.9,
            pg: 0.999,
            clutter: 1e-3,
        };
        let run = solve_and_check(&p);
        assert!(
            run.stats.block_clusters > 0,
            "{}: no cluster reached the block solver",
            p.name
        );
    }
    let p = Problem {
        name: "one large cluster".into(),
        g: spatial(20_000, 20_000, 0.012, 42),
        ndet: 20_000,
        pd: 0.9,
        pg: 0.999,
        clutter: 2e-3,
    };
    let run = solve_and_check(&p);
    assert!(
        run.stats.host_clusters > 0,
        "{}: no cluster reached the host",
        p.name
    );
}

/// Solves `p` on the GPU (three timed repeats), checks the picks against the host's and
/// prints what the solve found.
fn solve_and_check(p: &Problem) -> kestrel::tracking::cuda::assign::GnnGpuRun {
    let (gain, miss) = p.costs();
    let (got, run) = gnn_gpu_timed(&p.g, p.ndet, gain, miss, 3).expect("GPU association");
    check(p, &got, "GPU");
    println!(
        "{}: {} tracks, {} pairs; {} clusters of 2+, largest {}, {} by a block, {} on the host; {:.3} ms",
        p.name,
        p.n(),
        p.g.det.len(),
        run.stats.clusters,
        run.stats.largest,
        run.stats.block_clusters - run.stats.host_clusters,
        run.stats.host_clusters,
        run.times_ms[1]
    );
    run
}

/// Largest difference between the GPU's JPDA marginals and the host's.
fn jpda_difference(p: &Problem, exact: f64) -> (f64, kestrel::tracking::cuda::JpdaGpuRun) {
    let (got, run) =
        jpda_gpu_timed(&p.g, p.ndet, p.pd, p.pg, p.clutter, exact, 2).expect("GPU JPDA");
    let want = jpda(
        &clusters(&p.g, p.ndet),
        &p.g,
        p.n(),
        p.pd,
        p.pg,
        p.clutter,
        exact,
    );
    let mut most: f64 = 0.0;
    for (g, w) in got.iter().zip(&want) {
        most = most.max((g.beta0 - w.beta0).abs());
        assert_eq!(g.det.len(), w.det.len(), "{}: pairs of a track", p.name);
        for (a, b) in g.det.iter().zip(&w.det) {
            assert_eq!(a.0, b.0, "{}: pair order", p.name);
            most = most.max((a.1 - b.1).abs());
        }
    }
    (most, run)
}

#[test]
fn gpu_jpda_gives_the_host_marginals() {
    if !gpu_or_skip("gpu_jpda_gives_the_host_marginals") {
        return;
    }
    let (mut enumerated, mut propagated) = (0, 0);
    for p in problems(88) {
        for exact in [EXACT_EVENTS, 50.0, 0.0] {
            let (d, run) = jpda_difference(&p, exact);
            // Both methods sum the host's terms in the host's order; the device's exp
            // may round differently by an ulp, which belief propagation's rounds carry
            // further where a loopy cluster converges slowly.
            let tol = if run.stats.propagated == 0 && exact > 0.0 {
                1e-14
            } else {
                1e-12
            };
            assert!(
                d <= tol,
                "{}: exact_events {exact}: marginals differ by {d:e} ({:?})",
                p.name,
                run.stats
            );
            enumerated += run.stats.enumerated;
            propagated += run.stats.propagated;
        }
    }
    println!(
        "gpu jpda: {enumerated} clusters enumerated, {propagated} propagated, all as on the host"
    );
    assert!(enumerated > 100 && propagated > 100);
}

#[test]
fn gpu_jpda_at_scale() {
    if !gpu_or_skip("gpu_jpda_at_scale") {
        return;
    }
    let (g, ndet) = blobs(100_000, 19);
    let p = Problem {
        name: "jpda at scale".into(),
        g,
        ndet,
        pd: 0.9,
        pg: 0.999,
        clutter: 2e-3,
    };
    let (d, run) = jpda_difference(&p, EXACT_EVENTS);
    println!(
        "{}: {} tracks, {} pairs; {:?}; {:.3} ms; largest difference from the host {d:e}",
        p.name,
        p.n(),
        p.g.det.len(),
        run.stats,
        run.times_ms[1]
    );
    assert!(d <= 1e-12, "{}: marginals differ by {d:e}", p.name);
}
