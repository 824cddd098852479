//! `kestrel eval`: GOSPA, OSPA or CLEAR MOT between a truth file and a tracks file, per
//! step and averaged, with a plot against time.

use super::bad;
use kestrel::tracking::files::{read_tracks, read_truth};
use kestrel::tracking::metrics::{clear_mot, frames, gospa_over_time, ospa, Frame};
use kestrel::tracking::Assignment;
use plotters::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Gospa,
    Ospa,
    Mot,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// True states: CSV `t,id,x0,x1,...`.
    #[arg(long, value_name = "TRUTH.csv")]
    truth: PathBuf,
    /// Tracks: CSV `t,track,status,x0,..,P..` (as `kestrel track` writes them).
    #[arg(long, value_name = "TRACKS.csv")]
    tracks: PathBuf,
    #[arg(long, value_enum)]
    metric: Metric,
    /// Cut-off distance (GOSPA, OSPA) or match threshold (CLEAR MOT).
    #[arg(long, value_name = "C", default_value_t = 10.0)]
    c: f64,
    /// Order p of GOSPA and OSPA (>= 1).
    #[arg(long, value_name = "P", default_value_t = 2.0)]
    p: f64,
    /// GOSPA's switching penalty gamma (a track change costs gamma^p, half for a
    /// track gained or lost).
    #[arg(long, value_name = "G", default_value_t = 0.0)]
    switching: f64,
    /// Compare the measured components `H x` of this model instead of whole states.
    #[arg(long, value_name = "M.toml")]
    model: Option<PathBuf>,
    /// Count tentative tracks too (default: confirmed only).
    #[arg(long)]
    all_tracks: bool,
    /// Per-step values as CSV.
    #[arg(long, value_name = "STEPS.csv")]
    output: Option<PathBuf>,
    /// Plot of the metric against time (SVG).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// Per-step series and the text summary of one metric.
pub struct Evaluation {
    pub header: &'static str,
    pub rows: Vec<Vec<f64>>,
    /// Names, columns and panels of the series to plot.
    pub series: Vec<(&'static str, usize, usize)>,
    /// Each panel's y-axis description (one panel per unit: a headline in metres is not
    /// drawn on the axis of squared parts).
    pub panels: Vec<&'static str>,
    pub summary: String,
}

/// Computes `metric` over the frames.
pub fn evaluate(
    frames: &[Frame],
    dim: usize,
    metric: Metric,
    c: f64,
    p: f64,
    gamma: f64,
) -> Evaluation {
    let n = frames.len().max(1) as f64;
    match metric {
        Metric::Gospa => {
            let g = gospa_over_time(frames, dim, c, p, gamma);
            let rows: Vec<Vec<f64>> = frames
                .iter()
                .zip(&g)
                .map(|(f, s)| {
                    vec![
                        f.t,
                        s.total,
                        s.localisation,
                        s.missed,
                        s.false_tracks,
                        s.switching,
                        s.switches,
                    ]
                })
                .collect();
            let mean = |k: usize| rows.iter().map(|r| r[k]).sum::<f64>() / n;
            let summary = format!(
                "mean GOSPA {:.4} (c {c}, p {p}, gamma {gamma}; mean parts, p-th powers: localisation {:.4}, missed {:.4}, false {:.4}, switching {:.4}; {} switches) over {} steps",
                mean(1),
                mean(2),
                mean(3),
                mean(4),
                mean(5),
                rows.iter().map(|r| r[6]).sum::<f64>(),
                frames.len()
            );
            Evaluation {
                header: "t,gospa,localisation,missed,false,switching,switches",
                rows,
                series: vec![
                    ("GOSPA", 1, 0),
                    ("localisation", 2, 1),
                    ("missed", 3, 1),
                    ("false", 4, 1),
                    ("switching", 5, 1),
                ],
                panels: vec!["GOSPA (distance)", "parts (p-th powers)"],
                summary,
            }
        }
        Metric::Ospa => {
            let mut s = Assignment::new();
            let rows: Vec<Vec<f64>> = frames
                .iter()
                .map(|f| vec![f.t, ospa(&f.truth, &f.tracks, dim, c, p, &mut s)])
                .collect();
            let mean = rows.iter().map(|r| r[1]).sum::<f64>() / n;
            Evaluation {
                header: "t,ospa",
                summary: format!(
                    "mean OSPA {mean:.4} (c {c}, p {p}) over {} steps",
                    frames.len()
                ),
                rows,
                series: vec![("OSPA", 1, 0)],
                panels: vec!["OSPA (distance)"],
            }
        }
        Metric::Mot => {
            let (steps, sum) = clear_mot(frames, dim, c);
            let rows: Vec<Vec<f64>> = frames
                .iter()
                .zip(&steps)
                .map(|(f, s)| {
                    vec![
                        f.t,
                        s.truths as f64,
                        s.matches as f64,
                        s.misses as f64,
                        s.false_tracks as f64,
                        s.switches as f64,
                        if s.matches > 0 {
                            s.distance / s.matches as f64
                        } else {
                            f64::NAN
                        },
                    ]
                })
                .collect();
            Evaluation {
                header: "t,truths,matches,misses,false,switches,distance",
                summary: format!(
                    "MOTA {:.4}  MOTP {:.4} (threshold {c})  truths {}  matches {}  misses {}  false {}  ID switches {}  over {} steps",
                    sum.mota,
                    sum.motp,
                    sum.truths,
                    sum.matches,
                    sum.misses,
                    sum.false_tracks,
                    sum.switches,
                    frames.len()
                ),
                rows,
                series: vec![
                    ("misses", 3, 0),
                    ("false", 4, 0),
                    ("ID switches", 5, 0),
                    ("mean matched distance", 6, 1),
                ],
                panels: vec!["per step", "mean matched distance"],
            }
        }
    }
}

fn draw(svg: &mut String, e: &Evaluation, title: &str) -> Result<(), Box<dyn std::error::Error>> {
    let np = e.panels.len().max(1);
    let root = SVGBackend::with_string(svg, (900, 300 + 240 * np as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let finite = |v: f64| v.is_finite();
    let t0 = e.rows.first().map_or(0.0, |r| r[0]);
    let t1 = e.rows.last().map_or(1.0, |r| r[0]).max(t0 + 1e-9);
    let colors = [
        RGBColor(0, 0, 0),
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
    ];
    for (panel, area) in root.split_evenly((np, 1)).iter().enumerate() {
        let series: Vec<(usize, &(&str, usize, usize))> = e
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| s.2 == panel)
            .collect();
        let ymax = series
            .iter()
            .flat_map(|&(_, &(_, k, _))| e.rows.iter().map(move |r| r[k]))
            .filter(|v| finite(*v))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.05;
        let mut chart = ChartBuilder::on(area)
            .margin(14)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(t0..t1, 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("t")
            .y_desc(e.panels.get(panel).copied().unwrap_or(""))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for &(n, &(name, k, _)) in &series {
            let col = colors[n % colors.len()];
            let w = if n == 0 { 2 } else { 1 };
            chart
                .draw_series(LineSeries::new(
                    e.rows.iter().filter(|r| finite(r[k])).map(|r| (r[0], r[k])),
                    col.stroke_width(w),
                ))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(w))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Writes the plot of `e` against time as SVG (atomically).
pub fn plot(path: &Path, e: &Evaluation, title: &str) -> anyhow::Result<()> {
    let mut svg = String::new();
    draw(&mut svg, e, title).map_err(|err| anyhow::anyhow!("plot {}: {err}", path.display()))?;
    kestrel::io::write_atomic(path, |w| w.write_all(svg.as_bytes()))?;
    Ok(())
}

fn check_ext(p: &Path, ext: &str, flag: &str) -> anyhow::Result<()> {
    let e = p
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    if e.as_deref() != Some(ext) {
        return Err(bad(format!("{flag} {}: name a .{ext} file", p.display())));
    }
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    kestrel::tracking::metrics::check_params("--", a.c, a.p, a.switching)?;
    if let Some(o) = &a.output {
        check_ext(o, "csv", "--output")?;
    }
    if let Some(p) = &a.plot {
        check_ext(p, "svg", "--plot")?;
    }
    let mut inputs = vec![a.truth.as_path(), a.tracks.as_path()];
    inputs.extend(a.model.as_deref());
    let mut outs = Vec::new();
    outs.extend(a.output.as_deref());
    outs.extend(a.plot.as_deref());
    let outputs = kestrel::io::Outputs::plan(&inputs, &outs)?;
    let truth = read_truth(&a.truth)?;
    let tracks = read_tracks(&a.tracks)?;
    let h = match &a.model {
        Some(m) => {
            let model = super::load_linear_model(m)?;
            let h: Vec<f64> = (0..model.ny())
                .flat_map(|i| (0..model.nx()).map(move |j| (i, j)))
                .map(|(i, j)| model.h()[(i, j)])
                .collect();
            Some((h, model.ny()))
        }
        None => None,
    };
    let (fr, dim) = frames(
        &truth,
        &tracks,
        h.as_ref().map(|(h, d)| (h.as_slice(), *d)),
        a.all_tracks,
    )?;
    if fr.is_empty() {
        return Err(bad(format!(
            "{} and {} hold no rows to compare",
            a.truth.display(),
            a.tracks.display()
        )));
    }
    let e = evaluate(&fr, dim, a.metric, a.c, a.p, a.switching);
    if let Some(o) = &a.output {
        kestrel::io::write_atomic(o, |w| {
            writeln!(w, "{}", e.header)?;
            for r in &e.rows {
                let line: Vec<String> = r.iter().map(|v| format!("{v}")).collect();
                writeln!(w, "{}", line.join(","))?;
            }
            Ok(())
        })?;
    }
    if let Some(p) = &a.plot {
        let title = format!("{} against time: {}", e.series[0].0, a.tracks.display());
        plot(p, &e, &title)?;
    }
    outputs.commit()?;
    outln!("{}", e.summary);
    Ok(())
}
