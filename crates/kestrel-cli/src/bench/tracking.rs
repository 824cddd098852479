//! Benchmarks of the multi-target tracker on the CPU: time per scan at 10^3..10^5
//! targets with as many clutter detections per scan, and at 10^4 targets with 10^3..10^5
//! clutter detections, for GNN and JPDA. Scenario: 2-D constant velocity, pd 0.9, 50
//! targets per 4 km^2 (the region grows with the number of targets), clutter uniform
//! over the region; the first scans (before tracks confirm) are not timed.

use super::{median, Record, Sink};
use kestrel::model::constant_velocity;
use kestrel::tracking::scenario::{simulate, Kind, Scenario};
use kestrel::tracking::{Assoc, Status, Tracker, TrackerConfig};
use std::time::Instant;

const STEPS: usize = 12;
const WARMUP_SCANS: usize = 5;

fn one(sink: &mut Sink, assoc: Assoc, targets: usize, clutter: usize) -> anyhow::Result<()> {
    let model = constant_velocity(2, 1.0, 1.0, 25.0, 100.0)?;
    let s = Scenario {
        kind: Kind::Random,
        targets,
        steps: STEPS,
        pd: 0.9,
        clutter: clutter as f64,
        region: 1000.0 * (targets as f64 / 50.0).sqrt(),
        births: 0.0,
        death: 0.0,
        seed: 11,
    };
    let (_, det) = simulate(&model, &s)?;
    let cfg = TrackerConfig::default()
        .with_assoc(assoc)
        .with_pd(s.pd)
        .with_clutter(s.clutter_density(2))
        .with_confirm((3, 4))
        .with_delete(3);
    let mut tracker = Tracker::new(&model, cfg)?;
    let mut times = Vec::new();
    let mut row = 0;
    let mut phases = [0.0; 5];
    for k in 0..STEPS {
        let start = row;
        while row < det.len() && det.t[row] == k as f64 {
            row += 1;
        }
        let before = tracker.timing;
        let t0 = Instant::now();
        tracker.step(&det.z[start * 2..row * 2])?;
        if k >= WARMUP_SCANS {
            times.push(t0.elapsed().as_secs_f64());
            let t = tracker.timing;
            phases[0] += t.predict - before.predict;
            phases[1] += t.gate - before.gate;
            phases[2] += t.associate - before.associate;
            phases[3] += t.update - before.update;
            phases[4] += t.life - before.life;
        }
    }
    let n = times.len() as f64;
    let confirmed = (0..tracker.len())
        .filter(|&i| tracker.status(i) == Status::Confirmed)
        .count();
    let name = match assoc {
        Assoc::Gnn => "track-gnn",
        Assoc::Jpda => "track-jpda",
    };
    let mut r = Record::new(
        format!("{name}/clutter {clutter}"),
        format!("cpu ({} threads)", rayon::current_num_threads()),
        "f64",
        targets,
        times.len(),
        4,
        2,
        &times,
    );
    r.extra = serde_json::json!({
        "clutter_per_scan": clutter,
        "ms_per_scan": 1e3 * median(&times),
        "phase_ms": {
            "predict": 1e3 * phases[0] / n,
            "gate": 1e3 * phases[1] / n,
            "associate": 1e3 * phases[2] / n,
            "update": 1e3 * phases[3] / n,
            "life_cycle": 1e3 * phases[4] / n,
        },
        "live_tracks": tracker.len(),
        "confirmed": confirmed,
    });
    sink.push(r);
    Ok(())
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    for assoc in [Assoc::Gnn, Assoc::Jpda] {
        for &n in sizes {
            one(sink, assoc, n, n)?;
        }
        let clutters: &[usize] = if quick { &[1_000] } else { &[1_000, 100_000] };
        for &c in clutters {
            one(sink, assoc, 10_000, c)?;
        }
    }
    Ok(())
}
