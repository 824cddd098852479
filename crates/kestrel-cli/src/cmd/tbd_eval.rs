//! `kestrel tbd-eval`: probability of detection of track-before-detect against the
//! single-frame detector, over an SNR sweep at a fixed false-alarm probability and as
//! ROC points at one SNR; a table, JSON lines and an SVG plot.

use super::bad;
use super::tbd::{MotionArgs, NoiseKind, SwitchArgs};
use kestrel::tbd::eval::{pd_vs_snr, roc, Point, Scenario};
use kestrel::tbd::{Motion, Noise, Params};
use plotters::prelude::*;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Frame size (square) in pixels.
    #[arg(long, default_value_t = 160)]
    size: usize,
    #[arg(long, default_value_t = 100)]
    frames: usize,
    /// Targets per sequence (velocities: the integer vectors of the motion set).
    #[arg(long, default_value_t = 24)]
    targets: usize,
    /// Motion set [default: the 9 vectors with |vx|, |vy| <= 1].
    #[command(flatten)]
    motion: MotionArgs,
    /// Manoeuvres: the switching bank, evaluated beside the constant-velocity bank.
    #[command(flatten)]
    switching: SwitchArgs,
    /// The targets: straight (constant velocity) or turning (45 degrees every --turn-every frames).
    #[arg(long, value_enum, default_value_t = TargetScenario::Straight)]
    scenario: TargetScenario,
    /// Frames between the turns of a turning target.
    #[arg(long, value_name = "N", default_value_t = 10)]
    turn_every: usize,
    #[arg(long, default_value_t = 0.1)]
    alpha: f32,
    #[arg(long, value_name = "D", default_value_t = 1)]
    decimation: usize,
    /// Per-pixel false-alarm probability of the SNR sweep.
    #[arg(long, value_name = "P", default_value_t = 1e-4)]
    pfa: f64,
    /// Highest SNR of the sweep (0, 1, ... dB).
    #[arg(long, value_name = "DB", default_value_t = 9)]
    snr_max: u32,
    /// SNR of the ROC points.
    #[arg(long, value_name = "DB", default_value_t = 3.0)]
    roc_snr: f64,
    #[arg(long, value_enum, default_value_t = NoiseKind::Gaussian)]
    noise: NoiseKind,
    /// SVG plot (Pd against SNR, and ROC).
    #[arg(long, value_name = "PLOT.svg")]
    plot: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// How the targets of an evaluation move.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetScenario {
    Straight,
    Turning,
}

/// The SVG of both panels (Pd against SNR, and ROC).
fn draw(
    sweep: &[Point],
    rocs: &[Point],
    title: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 460)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 20))?;
        let (l, r) = root.split_horizontally(550);
        let tbd_c = RGBColor(31, 119, 180);
        let one_c = RGBColor(214, 39, 40);
        let sw_c = RGBColor(44, 160, 44);
        let switching = sweep.iter().any(|p| p.pd_switch.is_some());
        let smax = sweep.iter().map(|p| p.snr_db).fold(1.0, f64::max);
        let mut c = ChartBuilder::on(&l)
            .caption(
                format!(
                    "Pd at Pfa {:e} per pixel",
                    sweep.first().map(|p| p.pfa).unwrap_or(0.0)
                ),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0.0..smax, 0.0..1.02)?;
        c.configure_mesh().x_desc("SNR (dB)").y_desc("Pd").draw()?;
        for (pts, col, name) in [
            (
                sweep
                    .iter()
                    .map(|p| (p.snr_db, p.pd_tbd))
                    .collect::<Vec<_>>(),
                tbd_c,
                "track-before-detect",
            ),
            (
                sweep.iter().map(|p| (p.snr_db, p.pd_single)).collect(),
                one_c,
                "single frame",
            ),
            (
                sweep
                    .iter()
                    .filter_map(|p| Some((p.snr_db, p.pd_switch?)))
                    .collect(),
                sw_c,
                "switching bank",
            ),
        ]
        .into_iter()
        .filter(|s| switching || s.2 != "switching bank")
        {
            c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                });
            c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
        }
        c.configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
        let lo = rocs
            .iter()
            .map(|p| p.pfa.log10())
            .fold(0.0, f64::min)
            .floor();
        let mut c = ChartBuilder::on(&r)
            .caption(
                format!(
                    "ROC at {} dB",
                    rocs.first().map(|p| p.snr_db).unwrap_or(0.0)
                ),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(lo..0.0, 0.0..1.02)?;
        c.configure_mesh().x_desc("log10 Pfa").y_desc("Pd").draw()?;
        for (pts, col) in [
            (
                rocs.iter()
                    .map(|p| (p.pfa.log10(), p.pd_tbd))
                    .collect::<Vec<_>>(),
                tbd_c,
            ),
            (
                rocs.iter().map(|p| (p.pfa.log10(), p.pd_single)).collect(),
                one_c,
            ),
            (
                rocs.iter()
                    .filter_map(|p| Some((p.pfa.log10(), p.pd_switch?)))
                    .collect(),
                sw_c,
            ),
        ] {
            c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?;
            c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
        }
        root.present()?;
    }
    Ok(svg)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if !(a.pfa > 0.0 && a.pfa < 1.0) {
        return Err(bad(format!("--pfa must lie in (0, 1), got {}", a.pfa)));
    }
    let motions = a.motion.motions(|| {
        (-1..=1)
            .flat_map(|vy| (-1..=1).map(move |vx| Motion::new(vx as f32, vy as f32)))
            .collect()
    })?;
    let s = Scenario {
        h: a.size,
        w: a.size,
        frames: a.frames,
        targets: a.targets,
        switching: a.switching.transition(&motions)?,
        params: Params {
            motions,
            alpha: a.alpha,
            decimation: a.decimation,
            transition: None,
        },
        noise: match a.noise {
            NoiseKind::Gaussian => Noise::UNIT_GAUSSIAN,
            NoiseKind::Rayleigh => Noise::UNIT_RAYLEIGH,
        },
        seed: a.seed,
        turn_every: match a.scenario {
            TargetScenario::Straight => 0,
            TargetScenario::Turning => a.turn_every,
        },
    };
    if a.scenario == TargetScenario::Turning && a.turn_every == 0 {
        return Err(bad("--turn-every must be at least 1"));
    }
    s.params.check(s.h, s.w)?;
    kestrel::tbd::sim::check_snr("--snr-max", f64::from(a.snr_max))?;
    kestrel::tbd::sim::check_snr("--roc-snr", a.roc_snr)?;
    // Sizes from the command line, before anything is allocated: the state [V, H, W]
    // and its score map and frame (f32), and the targets.
    use kestrel::limits::{self, Size};
    let v = s.params.motions.len();
    limits::check(
        "the track-before-detect state",
        &[
            Size("motion vectors + 2", v.saturating_add(2)),
            Size("rows", s.h),
            Size("columns", s.w),
        ],
        4,
    )?;
    limits::check("the targets", &[Size("targets", s.targets)], 64)?;
    let ins: Vec<&std::path::Path> = a.switching.input().into_iter().collect();
    let outputs = kestrel::io::Outputs::plan(
        &ins,
        &a.plot.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
    )?;
    let snrs: Vec<f64> = (0..=a.snr_max).map(f64::from).collect();
    let sweep = pd_vs_snr(&s, a.pfa, &snrs)?;
    let pfas = [1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4];
    let rocs = roc(&s, a.roc_snr, &pfas)?;
    for p in sweep.iter().chain(&rocs) {
        outln!("{}", serde_json::to_string(p)?);
    }
    outln!(
        "\nPd at Pfa {:e} ({} vectors, alpha {}, {} x {} x {} frames, {} {} targets, {} noise)",
        a.pfa,
        s.params.motions.len(),
        a.alpha,
        a.size,
        a.size,
        a.frames,
        a.targets,
        match a.scenario {
            TargetScenario::Straight => "straight".to_string(),
            TargetScenario::Turning => format!("turning (every {} frames)", a.turn_every),
        },
        super::value_name(&a.noise)
    );
    let sw = |p: &Point| p.pd_switch.map_or(String::new(), |x| format!(" {x:>10.3}"));
    let sw_head = if s.switching.is_some() {
        format!(" {:>10}", "Pd switch")
    } else {
        String::new()
    };
    outln!(
        "{:>8} {:>10} {:>12} {:>8}{sw_head}",
        "SNR dB",
        "Pd TBD",
        "Pd 1 frame",
        "trials"
    );
    for p in &sweep {
        outln!(
            "{:>8.1} {:>10.3} {:>12.3} {:>8}{}",
            p.snr_db,
            p.pd_tbd,
            p.pd_single,
            p.trials,
            sw(p)
        );
    }
    outln!("\nROC at {} dB", a.roc_snr);
    outln!(
        "{:>10} {:>10} {:>12}{sw_head}",
        "Pfa",
        "Pd TBD",
        "Pd 1 frame"
    );
    for p in &rocs {
        outln!(
            "{:>10.0e} {:>10.3} {:>12.3}{}",
            p.pfa,
            p.pd_tbd,
            p.pd_single,
            sw(p)
        );
    }
    if let Some(path) = &a.plot {
        let title = format!(
            "Track-before-detect vs single-frame detection ({} vectors, alpha {}, {} noise)",
            s.params.motions.len(),
            a.alpha,
            super::value_name(&a.noise)
        );
        let svg =
            draw(&sweep, &rocs, &title).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        kestrel::io::write_atomic(path, |w| w.write_all(svg.as_bytes()))?;
        outputs.commit()?;
        errln!("tbd-eval: plot -> {}", path.display());
    }
    Ok(())
}
