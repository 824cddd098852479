//! `kestrel demo --tracking`: simulates crossing targets with births, deaths, misses and
//! clutter, tracks them with GNN and JPDA, prints GOSPA and CLEAR MOT and the speed of
//! each, and plots truth, detections and confirmed tracks.

use super::eval::{evaluate, Metric};
use kestrel::model::constant_velocity;
use kestrel::tracking::files::Labelled;
use kestrel::tracking::metrics::{clear_mot, frames};
use kestrel::tracking::scenario::{simulate, Kind, Scenario};
use kestrel::tracking::{Assoc, Status, Tracker, TrackerConfig};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

const TARGETS: usize = 60;
const STEPS: usize = 60;
const CLUTTER: f64 = 50.0;
const REGION: f64 = 1000.0;

/// Runs the tracker over the scenario's detections: the rows of every scan's live
/// tracks (as a tracks file holds them) and the seconds the scans took.
fn track(
    model: &kestrel::Model,
    det: &kestrel::tracking::files::Detections,
    cfg: TrackerConfig,
) -> anyhow::Result<(Labelled, f64)> {
    let mut tracker = Tracker::new(model, cfg)?;
    let mut out = Labelled {
        n: model.nx(),
        ..Default::default()
    };
    let mut secs = 0.0;
    let mut row = 0;
    for k in 0..STEPS {
        let start = row;
        while row < det.len() && det.t[row] == k as f64 {
            row += 1;
        }
        let t0 = Instant::now();
        tracker.step(&det.z[start * 2..row * 2])?;
        secs += t0.elapsed().as_secs_f64();
        for i in 0..tracker.len() {
            out.t.push(k as f64);
            out.id.push(tracker.id(i));
            out.confirmed.push(tracker.status(i) == Status::Confirmed);
            out.x.extend_from_slice(tracker.mean(i));
        }
    }
    Ok((out, secs))
}

type Paths = BTreeMap<u64, Vec<(f64, f64)>>;

fn paths(l: &Labelled, confirmed_only: bool) -> Paths {
    let mut m: Paths = BTreeMap::new();
    for i in 0..l.t.len() {
        if !confirmed_only || l.confirmed[i] {
            m.entry(l.id[i])
                .or_default()
                .push((l.x[i * l.n], l.x[i * l.n + 2]));
        }
    }
    m
}

fn draw(
    svg: &mut String,
    truth: &Paths,
    det: &[(f64, f64)],
    panels: &[(&str, Paths)],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(svg, (560 * panels.len() as u32, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("kestrel demo --tracking: {TARGETS} crossing targets, pd 0.9, {CLUTTER} clutter per scan"),
        ("sans-serif", 20),
    )?;
    let areas = root.split_evenly((1, panels.len()));
    let r = REGION * 1.3;
    for ((name, tracks), area) in panels.iter().zip(areas.iter()) {
        let mut chart = ChartBuilder::on(area)
            .caption(*name, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(-r..r, -r..r)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        chart
            .draw_series(
                det.iter()
                    .map(|&p| Circle::new(p, 1, RGBColor(170, 170, 170).filled())),
            )?
            .label("detections")
            .legend(|(x, y)| Circle::new((x + 9, y), 2, RGBColor(170, 170, 170).filled()));
        for (n, p) in truth.values().enumerate() {
            let s = chart.draw_series(LineSeries::new(p.iter().copied(), BLACK.stroke_width(1)))?;
            if n == 0 {
                s.label("truth").legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(1))
                });
            }
        }
        for (n, p) in tracks.values().enumerate() {
            let col = Palette99::pick(n).to_rgba();
            let s = chart.draw_series(LineSeries::new(p.iter().copied(), col.stroke_width(2)))?;
            if n == 0 {
                // One entry for all tracks (each its own colour).
                s.label("confirmed tracks (a colour each)")
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                    });
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

pub fn run(plot: &Path, seed: u64) -> anyhow::Result<()> {
    let model = constant_velocity(2, 1.0, 1.0, 25.0, 100.0)?;
    let s = Scenario {
        kind: Kind::Crossing,
        targets: TARGETS,
        steps: STEPS,
        pd: 0.9,
        clutter: CLUTTER,
        region: REGION,
        births: 0.3,
        death: 0.005,
        seed,
    };
    let (truth, det) = simulate(&model, &s)?;
    outln!(
        "kestrel demo --tracking: {TARGETS} targets crossing in pairs, births 0.3/step, deaths 0.5%/step, {STEPS} scans, pd 0.9, {CLUTTER} clutter per scan over [-{REGION}, {REGION}]^2, {} detections",
        det.len()
    );
    let h = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    let mut panels = Vec::new();
    for (assoc, name) in [(Assoc::Gnn, "GNN"), (Assoc::Jpda, "JPDA")] {
        let cfg = TrackerConfig::default()
            .with_assoc(assoc)
            .with_pd(s.pd)
            .with_clutter(s.clutter_density(2))
            .with_confirm((3, 4))
            .with_delete(3);
        let (tracks, secs) = track(&model, &det, cfg)?;
        let (fr, dim) = frames(&truth, &tracks, Some((&h, 2)), false)?;
        let g = evaluate(&fr, dim, Metric::Gospa, 20.0, 2.0, 0.0);
        let (_, mot) = clear_mot(&fr, dim, 20.0);
        outln!(
            "  {name:<4}  {:.3} ms/scan ({:.3e} detections/s)   {}",
            1e3 * secs / STEPS as f64,
            det.len() as f64 / secs.max(1e-12),
            g.summary.split(" (").next().unwrap_or_default()
        );
        outln!(
            "        MOTA {:.3}  MOTP {:.2} m  ID switches {}  (GOSPA and MOT: c = 20 m, p = 2, positions)",
            mot.mota, mot.motp, mot.switches
        );
        panels.push((name, paths(&tracks, true)));
    }
    let dets: Vec<(f64, f64)> = det.z.chunks(2).map(|z| (z[0], z[1])).collect();
    let mut svg = String::new();
    draw(&mut svg, &paths(&truth, false), &dets, &panels)
        .map_err(|e| anyhow::anyhow!("plot {}: {e}", plot.display()))?;
    kestrel::io::write_atomic(plot, |w| {
        use std::io::Write;
        w.write_all(svg.as_bytes())
    })?;
    outln!(
        "  plot of truth, detections and confirmed tracks -> {}",
        plot.display()
    );
    Ok(())
}
