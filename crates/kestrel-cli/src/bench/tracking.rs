//! Benchmarks of the multi-target tracker: time per scan, end to end (predict, gate,
//! cluster, associate, update, life cycle), for GNN over targets x clutter detections per
//! scan in {10^3, 10^4, 10^5}^2 and for JPDA with as much clutter as targets, on the CPU;
//! and on the GPU (`track-gnn-gpu` over the same grid and `track-jpda-gpu`, when one is
//! usable: wall-clock time per scan with the upload and every host synchronisation,
//! phases by CUDA events). With `KESTREL_BENCH_GPU_ONLY` set, the CPU runs only
//! 10^5 x 10^5 (GNN and JPDA), as the GPU's peer. Scenario: 2-D constant velocity, pd 0.9, 50 targets per 4 km^2 (the region
//! grows with the number of targets), clutter uniform over the region; the first scans
//! (before tracks confirm) are not timed. `kestrel bench --only tracking --plot DIR`
//! draws `DIR/tracking-scale.svg` from the records.

use super::{median, Record, Sink};
use kestrel::model::constant_velocity;
use kestrel::tracking::scenario::{simulate, Kind, Scenario};
use kestrel::tracking::{Assoc, DeviceTracker, Status, TrackerConfig};
use kestrel::Device;
use plotters::prelude::*;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

const STEPS: usize = 10;
const WARMUP_SCANS: usize = 4;

fn one(
    sink: &mut Sink,
    assoc: Assoc,
    targets: usize,
    clutter: usize,
    gpu: bool,
) -> anyhow::Result<()> {
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
    let on = if gpu { Device::Cuda(0) } else { Device::Cpu };
    // The GPU's tracks stay on the device between scans (what is timed is the scan).
    let mut tracker = DeviceTracker::new(&model, cfg, on)?.with_host_tracks(false);
    let device = on.to_string();
    let mut times = Vec::new();
    let mut row = 0;
    let mut phases = [0.0; 6];
    let mut live = 0;
    for k in 0..STEPS {
        let start = row;
        while row < det.len() && det.t[row] == k as f64 {
            row += 1;
        }
        let before = tracker.timing();
        let t0 = Instant::now();
        tracker.step(&det.z[start * 2..row * 2])?;
        if k >= WARMUP_SCANS {
            times.push(t0.elapsed().as_secs_f64());
            let t = tracker.timing();
            phases[0] += t.predict - before.predict;
            phases[1] += t.gate - before.gate;
            phases[2] += t.cluster - before.cluster;
            phases[3] += t.associate - before.associate;
            phases[4] += t.update - before.update;
            phases[5] += t.life - before.life;
            live += tracker.len();
        }
    }
    let n = times.len() as f64;
    tracker.copy_tracks()?;
    let tracks = tracker.tracks()?;
    let confirmed = (0..tracks.len())
        .filter(|&i| tracks.status(i) == Status::Confirmed)
        .count();
    let name = match (assoc, gpu) {
        (Assoc::Gnn, false) => "track-gnn",
        (Assoc::Gnn, true) => "track-gnn-gpu",
        (Assoc::Jpda, false) => "track-jpda",
        (Assoc::Jpda, true) => "track-jpda-gpu",
    };
    let mut r = Record::new(
        format!("{name}/clutter {clutter}"),
        device,
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
            "cluster": 1e3 * phases[2] / n,
            "associate": 1e3 * phases[3] / n,
            "update": 1e3 * phases[4] / n,
            "life_cycle": 1e3 * phases[5] / n,
        },
        "mean_live_tracks": live as f64 / n,
        "confirmed": confirmed,
    });
    sink.push(r);
    Ok(())
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    // KESTREL_BENCH_TRACKING=assign-gpu: the GPU association alone.
    if std::env::var("KESTREL_BENCH_TRACKING").is_ok_and(|v| v == "assign-gpu") {
        return super::tracking_assign::run(sink, quick);
    }
    super::tracking_assign::run(sink, quick)?;
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    if std::env::var("KESTREL_BENCH_GPU_ONLY").is_err() {
        for &targets in sizes {
            for &clutter in sizes {
                one(sink, Assoc::Gnn, targets, clutter, false)?;
            }
        }
        for &n in sizes {
            one(sink, Assoc::Jpda, n, n, false)?;
        }
    } else {
        let top = sizes[sizes.len() - 1];
        one(sink, Assoc::Gnn, top, top, false)?;
        one(sink, Assoc::Jpda, top, top, false)?;
    }
    match kestrel::cuda::available(0) {
        Ok(()) => {
            for &targets in sizes {
                for &clutter in sizes {
                    // One size's failure is reported and the others still run.
                    if let Err(e) = one(sink, Assoc::Gnn, targets, clutter, true) {
                        errln!("bench tracking: GPU, {targets} targets x {clutter} clutter: error: {e:#}");
                    }
                }
            }
            for &n in sizes {
                if let Err(e) = one(sink, Assoc::Jpda, n, n, true) {
                    errln!("bench tracking: GPU JPDA, {n} targets x {n} clutter: error: {e:#}");
                }
            }
        }
        Err(why) => errln!("bench tracking: no usable GPU ({why}), CPU records only"),
    }
    let table: Vec<String> = sink
        .records
        .iter()
        .filter(|r| r.name.starts_with("track-"))
        .map(|r| {
            let p = &r.extra["phase_ms"];
            let f = |k: &str| p[k].as_f64().unwrap_or(f64::NAN);
            format!(
                "{:<24} {:>8} {:>8} {:>9.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.0}",
                r.name.split('/').next().unwrap_or(""),
                r.tracks,
                r.extra["clutter_per_scan"],
                r.extra["ms_per_scan"].as_f64().unwrap_or(f64::NAN),
                f("predict"),
                f("gate"),
                f("cluster"),
                f("associate"),
                f("update"),
                f("life_cycle"),
                r.extra["mean_live_tracks"].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect();
    outln!(
        "{:<24} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}\n{}",
        "tracker (ms per scan)",
        "targets",
        "clutter",
        "total",
        "predict",
        "gate",
        "cluster",
        "assoc",
        "update",
        "life",
        "live",
        table.join("\n")
    );
    Ok(())
}

/// Milliseconds per scan against targets (one line per clutter level) and against
/// clutter (one line per number of targets), GNN, log-log; the 1 s goal dotted.
fn draw(
    svg: &mut String,
    recs: &[(usize, usize, f64)],
    device: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(svg, (1100, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(550);
    let ms = |v: f64| v.max(1e-3);
    let lo = recs.iter().map(|r| ms(r.2)).fold(f64::INFINITY, f64::min) / 2.0;
    let hi = recs.iter().map(|r| ms(r.2)).fold(1000.0, f64::max) * 2.0;
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
    ];
    for (area, by_targets) in [(&left, true), (&right, false)] {
        let (xs, ks): (Vec<usize>, Vec<usize>) = if by_targets {
            (
                recs.iter().map(|r| r.0).collect(),
                recs.iter().map(|r| r.1).collect(),
            )
        } else {
            (
                recs.iter().map(|r| r.1).collect(),
                recs.iter().map(|r| r.0).collect(),
            )
        };
        let xmin = *xs.iter().min().unwrap_or(&1) as f64 / 1.5;
        let xmax = *xs.iter().max().unwrap_or(&10) as f64 * 1.5;
        let title = if by_targets {
            format!("GNN, ms per scan vs targets ({device})")
        } else {
            "GNN, ms per scan vs clutter detections per scan".to_string()
        };
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d((xmin..xmax).log_scale(), (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc(if by_targets {
                "targets"
            } else {
                "clutter per scan"
            })
            .y_desc("ms per scan")
            .draw()?;
        chart.draw_series(LineSeries::new(
            [(xmin, 1000.0), (xmax, 1000.0)],
            BLACK.mix(0.4).stroke_width(1),
        ))?;
        let mut keys = ks.clone();
        keys.sort_unstable();
        keys.dedup();
        for (c, &key) in keys.iter().enumerate() {
            let col = colors[c % colors.len()];
            let mut pts: Vec<(f64, f64)> = recs
                .iter()
                .filter(|r| if by_targets { r.1 == key } else { r.0 == key })
                .map(|r| {
                    let x = if by_targets { r.0 } else { r.1 };
                    (x as f64, ms(r.2))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let label = if by_targets {
                format!("clutter {key}")
            } else {
                format!("targets {key}")
            };
            chart
                .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                });
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, col.filled())))?;
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

/// Writes `tracking-scale.svg` into `dir` from the GNN records of [`run`] (nothing when
/// there are none).
pub fn plot(records: &[Record], dir: &Path) -> anyhow::Result<()> {
    let recs: Vec<(usize, usize, f64)> = records
        .iter()
        .filter(|r| r.name.starts_with("track-gnn/"))
        .filter_map(|r| {
            Some((
                r.tracks,
                r.extra["clutter_per_scan"].as_u64()? as usize,
                r.extra["ms_per_scan"].as_f64()?,
            ))
        })
        .collect();
    if recs.is_empty() {
        return Ok(());
    }
    let device = records
        .iter()
        .find(|r| r.name.starts_with("track-gnn/"))
        .map_or(String::new(), |r| r.device.clone());
    let path = dir.join("tracking-scale.svg");
    let mut svg = String::new();
    draw(&mut svg, &recs, &device).map_err(|e| anyhow::anyhow!("plot {}: {e}", path.display()))?;
    kestrel::io::write_atomic(&path, |w| w.write_all(svg.as_bytes()))?;
    errln!("bench: tracking plot -> {}", path.display());
    Ok(())
}
