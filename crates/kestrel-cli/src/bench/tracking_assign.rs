//! GNN association alone on the GPU (`tracking::cuda::assign`) at scale, against the
//! host's clustering + GNN on the same gated pairs (the peer, all cores). The pairs are
//! those of the tracking bench's scene (2-D constant velocity, pd 0.9, 50 targets per
//! 4 km^2, clutter uniform) after the CPU tracker has run its first scans: every live
//! track (confirmed and tentative) predicted and gated against the next scan's
//! detections. Device time by CUDA events, median of 20 solves. Records
//! `assoc-gnn-gpu/...` with the cluster-size histogram.

use super::{median, Record, Sink};
use kestrel::model::constant_velocity;
use kestrel::nalgebra::{DMatrix, DVector};
use kestrel::tracking::associate::{clusters, gnn, gnn_costs, jpda, live_pairs, EXACT_EVENTS};
use kestrel::tracking::cuda::assign::gnn_gpu_timed;
use kestrel::tracking::cuda::jpda::jpda_gpu_timed;
use kestrel::tracking::gate::{gate_all, Gated};
use kestrel::tracking::scenario::{simulate, Kind, Scenario};
use kestrel::tracking::{Innovations, Tracker, TrackerConfig};
use std::time::Instant;

const SCANS: usize = 6;

/// The gated pairs of every live track against scan `SCANS` of the scene, and the
/// number of detections, the costs' inputs (pd, gate probability, clutter density).
fn scene(targets: usize, clutter: usize) -> anyhow::Result<(Gated, usize, f64, f64, f64)> {
    let model = constant_velocity(2, 1.0, 1.0, 25.0, 100.0)?;
    let s = Scenario {
        kind: Kind::Random,
        targets,
        steps: SCANS + 1,
        pd: 0.9,
        clutter: clutter as f64,
        region: 1000.0 * (targets as f64 / 50.0).sqrt(),
        births: 0.0,
        death: 0.0,
        seed: 11,
    };
    let (_, det) = simulate(&model, &s)?;
    let cfg = TrackerConfig::default()
        .with_pd(s.pd)
        .with_clutter(s.clutter_density(2))
        .with_confirm((3, 4))
        .with_delete(3);
    let mut tracker = Tracker::new(&model, cfg)?;
    let mut row = 0;
    let mut scan = |k: usize| {
        let a = row;
        while row < det.len() && det.t[row] == k as f64 {
            row += 1;
        }
        det.z[a * 2..row * 2].to_vec()
    };
    for k in 0..SCANS {
        tracker.step(&scan(k))?;
    }
    let z = scan(SCANS);
    let (f, q, h, r) = (model.f(), model.q(), model.h(), model.r());
    let mut inns = Innovations::new(2);
    for i in 0..tracker.len() {
        let x = DVector::from_column_slice(tracker.mean(i));
        let nx = x.len();
        // Symmetric, so the storage order does not matter.
        let p = DMatrix::from_column_slice(nx, nx, tracker.cov(i));
        let xp = f * x;
        let pp = f * p * f.transpose() + q;
        let zh = h * xp;
        let sm = h * pp * h.transpose() + r;
        let sv: Vec<f64> = sm.transpose().as_slice().to_vec();
        if !inns.push(zh.as_slice(), &sv) {
            anyhow::bail!("track {i}: S is not positive definite");
        }
    }
    let g = gate_all(&inns, &z, 2, tracker.gate_threshold());
    let c = tracker.config();
    Ok((g, z.len() / 2, c.pd, c.gate, c.clutter))
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    let gpu_ok = kestrel::cuda::available(0);
    // (targets, clutter per scan); 10^3 targets in 10^5 clutter chain into one large
    // cluster (the host path).
    let sizes: &[(usize, usize)] = if quick {
        &[(10_000, 10_000)]
    } else {
        &[(10_000, 10_000), (100_000, 100_000), (1_000, 100_000)]
    };
    for &(targets, clutter_per_scan) in sizes {
        let t0 = Instant::now();
        let (g, ndet, pd, pg, clutter) = scene(targets, clutter_per_scan)?;
        let scene_s = t0.elapsed().as_secs_f64();
        let n = g.start.len() - 1;
        // The peer: the host's clustering + GNN, median of 5.
        let mut cpu = Vec::new();
        let mut want = Vec::new();
        let mut cls = Vec::new();
        let (gain, miss) = gnn_costs(pd, pg, clutter);
        for _ in 0..5 {
            let t = Instant::now();
            let live = live_pairs(&g, gain, miss);
            cls = clusters(&live, ndet);
            want = gnn(&cls, &live, n, pd, pg, clutter);
            cpu.push(t.elapsed().as_secs_f64());
        }
        // The whole gate's clusters, for the record (what JPDA faces).
        let gate_largest = clusters(&g, ndet).iter().map(Vec::len).max().unwrap_or(0);
        // Cluster sizes (tracks): 1, 2, 3-4, 5-8, ..., 65-128, more.
        let mut hist = [0usize; 9];
        for c in &cls {
            let b = (usize::BITS - (c.len() - 1).leading_zeros()) as usize;
            hist[b.min(8)] += 1;
        }
        let largest = cls.iter().map(Vec::len).max().unwrap_or(0);
        if let Err(why) = &gpu_ok {
            let mut jp = Vec::new();
            for _ in 0..3 {
                let t = Instant::now();
                let cls = clusters(&g, ndet);
                let _ = jpda(&cls, &g, n, pd, pg, clutter, EXACT_EVENTS);
                jp.push(t.elapsed().as_secs_f64());
            }
            errln!(
                "bench tracking: no GPU; JPDA marginals of the same pairs: CPU {:.2} ms",
                1e3 * median(&jp)
            );
            errln!(
                "bench tracking: no GPU ({why}); association of {n} tracks x {ndet} detections, {} pairs: CPU {:.2} ms; clusters {hist:?}, largest {largest} (of the whole gate: {gate_largest})",
                g.det.len(),
                1e3 * median(&cpu)
            );
            continue;
        }
        let device = kestrel::cuda::device_name(0)?;
        let (got, gpu) = gnn_gpu_timed(&g, ndet, gain, miss, 20)?;
        let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        let times: Vec<f64> = gpu.times_ms.iter().map(|t| t * 1e-3).collect();
        let mut r = Record::new(
            format!("assoc-gnn-gpu/{targets} x clutter {clutter_per_scan}"),
            format!("cuda:0 ({device})"),
            "f64",
            n,
            1,
            4,
            2,
            &times,
        );
        r.extra = serde_json::json!({
            "ms_per_scan": 1e3 * median(&times),
            "tracks": n,
            "detections": ndet,
            "pairs": g.det.len(),
            "clusters_2plus": gpu.stats.clusters,
            "tracks_in_clusters_2plus": gpu.stats.clustered_tracks,
            "largest_cluster": largest,
            "largest_cluster_of_the_gate": gate_largest,
            "host_clusters": gpu.stats.host_clusters,
            "block_clusters": gpu.stats.block_clusters - gpu.stats.host_clusters,
            "cluster_hist_1_2_4_8_16_32_64_128_more": hist,
            "picks_differing_from_cpu": differ,
            "cpu_peer_ms": 1e3 * median(&cpu),
            "cpu_threads": rayon::current_num_threads(),
            "scene_s": scene_s,
        });
        outln!(
            "assoc gnn gpu: {n} tracks x {ndet} detections, {} pairs: {:.3} ms on the GPU (median of {}), CPU peer {:.2} ms on {} threads; clusters 1/2/3-4/5-8/9-16/17-32/33-64/65-128/more: {hist:?}, largest {largest} (of the whole gate: {gate_largest}), {} by a block, {} on the host; {differ} picks differ",
            g.det.len(),
            1e3 * median(&times),
            times.len(),
            1e3 * median(&cpu),
            rayon::current_num_threads(),
            gpu.stats.block_clusters - gpu.stats.host_clusters,
            gpu.stats.host_clusters
        );
        sink.push(r);
        jpda_record(sink, &g, ndet, pd, pg, clutter, &device)?;
    }
    Ok(())
}

/// JPDA's marginals of the same pairs on the GPU (`tracking::cuda::jpda`) against the
/// host's `associate::jpda` on every core (the whole gate's clusters; enumeration up to
/// 2e4 events, belief propagation beyond).
fn jpda_record(
    sink: &mut Sink,
    g: &kestrel::tracking::gate::Gated,
    ndet: usize,
    pd: f64,
    pg: f64,
    clutter: f64,
    device: &str,
) -> anyhow::Result<()> {
    let n = g.start.len() - 1;
    let mut cpu = Vec::new();
    let mut want = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let cls = clusters(g, ndet);
        want = jpda(&cls, g, n, pd, pg, clutter, EXACT_EVENTS);
        cpu.push(t.elapsed().as_secs_f64());
    }
    let (got, run) = jpda_gpu_timed(g, ndet, pd, pg, clutter, EXACT_EVENTS, 10)?;
    let mut most: f64 = 0.0;
    for (a, b) in got.iter().zip(&want) {
        most = most.max((a.beta0 - b.beta0).abs());
        for (x, y) in a.det.iter().zip(&b.det) {
            most = most.max((x.1 - y.1).abs());
        }
    }
    let times: Vec<f64> = run.times_ms.iter().map(|t| t * 1e-3).collect();
    let mut r = Record::new(
        format!("assoc-jpda-gpu/{n} tracks x {ndet} detections"),
        format!("cuda:0 ({device})"),
        "f64",
        n,
        1,
        4,
        2,
        &times,
    );
    let st = run.stats;
    r.extra = serde_json::json!({
        "ms_per_scan": 1e3 * median(&times),
        "tracks": n,
        "detections": ndet,
        "pairs": g.det.len(),
        "clusters_2plus": st.clusters,
        "enumerated": st.enumerated,
        "propagated": st.propagated,
        "propagated_tracks": st.propagated_tracks,
        "largest_cluster": st.largest,
        "rounds": st.rounds,
        "max_abs_difference_from_cpu": most,
        "cpu_peer_ms": 1e3 * median(&cpu),
        "cpu_threads": rayon::current_num_threads(),
    });
    outln!(
        "assoc jpda gpu: {n} tracks x {ndet} detections, {} pairs: {:.3} ms on the GPU (median of {}), CPU peer {:.2} ms on {} threads; {} clusters of 2+ ({} enumerated, {} by belief propagation over {} tracks, {} rounds), largest {}; marginals within {most:.1e} of the CPU's",
        g.det.len(),
        1e3 * median(&times),
        times.len(),
        1e3 * median(&cpu),
        rayon::current_num_threads(),
        st.clusters,
        st.enumerated,
        st.propagated,
        st.propagated_tracks,
        st.rounds,
        st.largest
    );
    sink.push(r);
    Ok(())
}
