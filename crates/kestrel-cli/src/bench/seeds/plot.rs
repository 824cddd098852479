//! One log-log (or lin-log) chart per seed experiment: kestrel's series as lines with
//! points, the paper's as dashed lines with crosses, so the two read side by side.

use plotters::prelude::*;
use std::io::Write;
use std::path::Path;

/// A curve: its label, its points `(x, y)`, and whether it is the paper's.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub paper: bool,
}

impl Series {
    pub fn ours(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            paper: false,
        }
    }
    pub fn paper(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            paper: true,
        }
    }
}

/// A chart: title, axis names, whether x is logarithmic, and its curves (y is always
/// logarithmic: times and rates span decades).
pub struct Chart {
    pub title: String,
    pub x: String,
    pub y: String,
    pub log_x: bool,
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Writes the charts side by side (two per row) into `path` (SVG, written atomically).
pub fn write(path: &Path, charts: &[Chart]) -> anyhow::Result<()> {
    let mut svg = String::new();
    draw(&mut svg, charts).map_err(|e| anyhow::anyhow!("plot {}: {e}", path.display()))?;
    kestrel::io::write_atomic(path, |w| w.write_all(svg.as_bytes()))?;
    errln!("bench: plot -> {}", path.display());
    Ok(())
}

fn bounds(v: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (lo, hi) = v
        .filter(|x| x.is_finite() && (!log || *x > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    if log {
        (lo / 1.6, hi * 1.6)
    } else {
        let pad = ((hi - lo) * 0.05).max(0.5);
        (lo - pad, hi + pad)
    }
}

fn draw(svg: &mut String, charts: &[Chart]) -> Result<(), Box<dyn std::error::Error>> {
    let cols = charts.len().clamp(1, 2);
    let rows = charts.len().div_ceil(2).max(1);
    let root =
        SVGBackend::with_string(svg, (620 * cols as u32, 440 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((rows, cols));
    for (chart, area) in charts.iter().zip(areas.iter()) {
        let pts = || chart.series.iter().flat_map(|s| s.points.iter());
        let (x0, x1) = bounds(pts().map(|p| p.0), chart.log_x);
        let (y0, y1) = bounds(pts().map(|p| p.1), true);
        let mut b = ChartBuilder::on(area);
        b.caption(&chart.title, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(64);
        // The two axis kinds are different types; one closure per kind draws the same.
        macro_rules! body {
            ($c:expr) => {{
                let mut c = $c;
                c.configure_mesh()
                    .x_desc(chart.x.as_str())
                    .y_desc(chart.y.as_str())
                    .draw()?;
                for (i, s) in chart.series.iter().enumerate() {
                    let col = COLORS[i % COLORS.len()];
                    let mut p = s.points.clone();
                    p.retain(|q| q.0.is_finite() && q.1.is_finite() && q.1 > 0.0);
                    p.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let style = if s.paper {
                        col.stroke_width(1)
                    } else {
                        col.stroke_width(2)
                    };
                    if s.paper {
                        c.draw_series(DashedLineSeries::new(p.clone(), 6, 4, style))?
                            .label(s.label.as_str())
                            .legend(move |(x, y)| {
                                PathElement::new([(x, y), (x + 18, y)], col.stroke_width(1))
                            });
                        c.draw_series(p.iter().map(|&q| Cross::new(q, 4, col.stroke_width(1))))?;
                    } else {
                        c.draw_series(LineSeries::new(p.clone(), style))?
                            .label(s.label.as_str())
                            .legend(move |(x, y)| {
                                PathElement::new([(x, y), (x + 18, y)], col.stroke_width(2))
                            });
                        c.draw_series(p.iter().map(|&q| Circle::new(q, 3, col.filled())))?;
                    }
                }
                c.configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.3))
                    .label_font(("sans-serif", 11))
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()?;
            }};
        }
        if chart.log_x {
            body!(b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?);
        } else {
            body!(b.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?);
        }
    }
    root.present()?;
    Ok(())
}
