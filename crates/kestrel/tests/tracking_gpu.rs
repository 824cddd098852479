//! The GPU tracker against the CPU tracker (GNN and JPDA), scan by scan, on simulated
//! scenarios: the
//! same live tracks (count, identities, statuses, in the same order) and the same
//! means and covariances. Every buffer a scan writes is poisoned first.
//!
//! The GPU rounds every operation of the gate, the update and the life cycle as the CPU
//! does (no fused multiply-adds; the CPU's order of every sum; IEEE division and square
//! root), so under GNN the states must agree bit for bit. The functions computed
//! differently are the logarithm in `ln N(z; zhat, S)` and, under JPDA, the exponentials
//! of the marginals (CUDA's against the host's, within an ulp): they enter the GNN's
//! costs, where an assignment decided by an ulp would be a flipped decision, which the
//! identity check names (scan and track) rather than hides, and JPDA's weights, which
//! move a state by rounding. The states are compared to a relative 1e-12 (a flip moves a
//! state by far more; a mean's component relative to its standard deviation and a
//! covariance entry relative to `sqrt(P_ii P_jj)` where cancellation has made it small) and the number of values not equal bit for bit is printed.
//!
//! Skips with a printed reason without a GPU; fails with `KESTREL_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod gpu_common;

use gpu_common::gpu_or_skip;
use kestrel::model::constant_velocity;
use kestrel::tracking::cuda::GpuTracker;
use kestrel::tracking::scenario::{simulate, Kind, Scenario};
use kestrel::tracking::{Assoc, JpdaMarginals, TrackSet, Tracker, TrackerConfig, Tracks};
use kestrel::Model;

fn compare(tag: &str, scan: usize, gpu: &Tracks, cpu: &Tracks, inexact: &mut usize) {
    assert_eq!(gpu.len(), cpu.len(), "{tag} scan {scan}: live tracks");
    for i in 0..cpu.len() {
        assert_eq!(
            (gpu.id(i), gpu.status(i)),
            (cpu.id(i), cpu.status(i)),
            "{tag} scan {scan}: track {i} (a decision differs from the CPU's)"
        );
    }
    let nx = cpu.mean.len() / cpu.len().max(1);
    let mut check = |what: &str, k: usize, x: f64, y: f64, scale: f64| {
        if x.to_bits() != y.to_bits() {
            *inexact += 1;
            let rel = (x - y).abs() / scale.max(1e-300);
            assert!(
                rel <= 1e-12,
                "{tag} scan {scan}: {what}[{k}] GPU {x:e} CPU {y:e}"
            );
        }
    };
    // A component of a mean against its own size or, where that is small, its standard
    // deviation; a covariance entry against its own size or, where that is small from
    // cancellation, the scale of its row and column (sqrt(P_ii P_jj)).
    for (k, (x, y)) in gpu.mean.iter().zip(cpu.mean.iter()).enumerate() {
        let (t, r) = (k / nx, k % nx);
        let sd = cpu.cov[(t * nx + r) * nx + r].sqrt();
        check("mean", k, *x, *y, y.abs().max(sd));
    }
    for (k, (x, y)) in gpu.cov.iter().zip(cpu.cov.iter()).enumerate() {
        let (t, r, c) = (k / (nx * nx), k / nx % nx, k % nx);
        let d = |a: usize| cpu.cov[(t * nx + a) * nx + a];
        check("cov", k, *x, *y, y.abs().max((d(r) * d(c)).sqrt()));
    }
}

fn run(tag: &str, model: &Model, s: &Scenario, cfg: TrackerConfig) {
    let (_, det) = simulate(model, s).unwrap();
    let ny = model.ny();
    let mut cpu = Tracker::new(model, cfg.clone()).unwrap();
    let mut gpu = GpuTracker::new(0, model, cfg).unwrap().with_poison(true);
    let mut row = 0;
    let mut inexact = 0;
    let (mut most, mut confirmed) = (0, 0);
    for k in 0..s.steps {
        let start = row;
        while row < det.len() && det.t[row] == k as f64 {
            row += 1;
        }
        let z = &det.z[start * ny..row * ny];
        cpu.step(z).unwrap();
        gpu.step(z).unwrap();
        let g = gpu.tracks().unwrap();
        compare(tag, k, &g, &Tracks::of(&cpu, model.nx()), &mut inexact);
        most = most.max(g.len());
        confirmed = confirmed.max(
            (0..g.len())
                .filter(|&i| g.status(i) == kestrel::tracking::Status::Confirmed)
                .count(),
        );
    }
    eprintln!(
        "{tag}: {} scans, up to {most} live tracks ({confirmed} confirmed); values not equal bit for bit: {inexact}; GPU {:.3} ms/scan (wall)",
        s.steps,
        1e3 * gpu.wall / s.steps as f64
    );
    assert!(
        confirmed >= s.targets / 2,
        "{tag}: the scenario confirms tracks"
    );
    let t = gpu.timing;
    assert_eq!(t.scans, s.steps);
    assert!(t.predict > 0.0 && t.gate > 0.0 && t.update > 0.0 && t.life > 0.0);
}

fn config(s: &Scenario, ny: usize) -> TrackerConfig {
    TrackerConfig::default()
        .with_pd(s.pd)
        .with_clutter(s.clutter_density(ny))
        .with_confirm((2, 3))
        .with_delete(3)
}

#[test]
fn gpu_tracker_equals_cpu_tracker_scan_by_scan() {
    if !gpu_or_skip("gpu_tracker_equals_cpu_tracker_scan_by_scan") {
        return;
    }
    let model = constant_velocity(2, 1.0, 1.0, 25.0, 100.0).unwrap();
    let random = Scenario {
        kind: Kind::Random,
        targets: 200,
        steps: 40,
        pd: 0.9,
        clutter: 50.0,
        region: 2000.0,
        births: 2.0,
        death: 0.01,
        seed: 7,
    };
    run(
        "random 200 x clutter 50",
        &model,
        &random,
        config(&random, 2),
    );
    let crossing = Scenario {
        kind: Kind::Crossing,
        targets: 100,
        steps: 40,
        pd: 0.9,
        clutter: 20.0,
        region: 500.0,
        births: 0.0,
        death: 0.0,
        seed: 8,
    };
    run(
        "crossing 100 x clutter 20",
        &model,
        &crossing,
        config(&crossing, 2),
    );
    // Many tracks and detections (several scan tiles, a fine grid), the covariance
    // bound and the tentative deletion rule in play.
    let large = Scenario {
        kind: Kind::Random,
        targets: 5000,
        steps: 8,
        pd: 0.9,
        clutter: 5000.0,
        region: 1000.0 * 10.0,
        births: 0.0,
        death: 0.0,
        seed: 9,
    };
    run(
        "random 5000 x clutter 5000",
        &model,
        &large,
        config(&large, 2)
            .with_confirm((3, 4))
            .with_delete_tentative(2)
            .with_max_variance(400.0),
    );
    // One measured component: a one-axis grid.
    let m1 = constant_velocity(1, 1.0, 1.0, 9.0, 25.0).unwrap();
    let one = Scenario {
        kind: Kind::Random,
        targets: 100,
        steps: 20,
        pd: 0.95,
        clutter: 10.0,
        region: 5000.0,
        births: 0.0,
        death: 0.0,
        seed: 10,
    };
    run("1-D 100 x clutter 10", &m1, &one, config(&one, 1));
}

#[test]
fn gpu_jpda_tracker_equals_cpu_tracker_scan_by_scan() {
    if !gpu_or_skip("gpu_jpda_tracker_equals_cpu_tracker_scan_by_scan") {
        return;
    }
    let model = constant_velocity(2, 1.0, 1.0, 25.0, 100.0).unwrap();
    let random = Scenario {
        kind: Kind::Random,
        targets: 200,
        steps: 30,
        pd: 0.9,
        clutter: 50.0,
        region: 2000.0,
        births: 2.0,
        death: 0.01,
        seed: 17,
    };
    // Crossing targets: clusters of several tracks, enumerated or, with `lbp`, solved by
    // belief propagation on both sides.
    let crossing = Scenario {
        kind: Kind::Crossing,
        targets: 100,
        steps: 30,
        pd: 0.9,
        clutter: 20.0,
        region: 500.0,
        births: 0.0,
        death: 0.0,
        seed: 18,
    };
    for marginals in [JpdaMarginals::Auto, JpdaMarginals::Lbp] {
        for (tag, s) in [
            ("random 200 x clutter 50", &random),
            ("crossing 100 x clutter 20", &crossing),
        ] {
            let cfg = config(s, 2)
                .with_assoc(Assoc::Jpda)
                .with_marginals(marginals);
            run(&format!("JPDA ({marginals:?}) {tag}"), &model, s, cfg);
        }
    }
}
