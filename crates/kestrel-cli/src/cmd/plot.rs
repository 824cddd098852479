//! The demo's plot: a few tracks in the x-y plane, one panel each, with truth,
//! measurements, filtered and smoothed positions (SVG through `plotters`).

use plotters::prelude::*;
use std::path::Path;

/// The positions of one track over its steps; a missing measurement is left out.
pub struct TrackPlot {
    pub track: usize,
    pub truth: Vec<(f64, f64)>,
    pub measured: Vec<(f64, f64)>,
    pub filtered: Vec<(f64, f64)>,
    pub smoothed: Vec<(f64, f64)>,
}

fn bounds(t: &TrackPlot) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let all = t
        .truth
        .iter()
        .chain(&t.measured)
        .chain(&t.filtered)
        .chain(&t.smoothed);
    let (mut x0, mut x1, mut y0, mut y1) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for &(x, y) in all.filter(|(x, y)| x.is_finite() && y.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !(x0 <= x1 && y0 <= y1) {
        return (-1.0..1.0, -1.0..1.0);
    }
    let pad = |a: f64, b: f64| ((b - a) * 0.05).max(1e-9);
    let (px, py) = (pad(x0, x1), pad(y0, y1));
    (x0 - px..x1 + px, y0 - py..y1 + py)
}

fn draw(
    svg: &mut String,
    tracks: &[TrackPlot],
    title: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let cols = if tracks.len() > 1 { 2 } else { 1 };
    let rows = tracks.len().div_ceil(cols).max(1);
    let root = SVGBackend::with_string(svg, (560 * cols as u32, 480 * rows as u32 + 40))
        .into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let panels = root.split_evenly((rows, cols));
    let measured_color = RGBColor(214, 39, 40);
    let filtered_color = RGBColor(31, 119, 180);
    let smoothed_color = RGBColor(44, 160, 44);
    for (t, area) in tracks.iter().zip(panels.iter()) {
        let (xr, yr) = bounds(t);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("track {}", t.track), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(xr, yr)?;
        chart
            .configure_mesh()
            .x_desc("x")
            .y_desc("y")
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                t.truth.iter().copied(),
                BLACK.stroke_width(2),
            ))?
            .label("truth")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
        chart
            .draw_series(
                t.measured
                    .iter()
                    .map(|&p| Cross::new(p, 3, measured_color.stroke_width(1))),
            )?
            .label("measurements")
            .legend(move |(x, y)| Cross::new((x + 9, y), 3, measured_color.stroke_width(1)));
        chart
            .draw_series(LineSeries::new(
                t.filtered.iter().copied(),
                filtered_color.stroke_width(2),
            ))?
            .label("filter")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], filtered_color.stroke_width(2))
            });
        chart
            .draw_series(LineSeries::new(
                t.smoothed.iter().copied(),
                smoothed_color.stroke_width(2),
            ))?
            .label("smoother")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], smoothed_color.stroke_width(2))
            });
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

/// Renders the panels and writes the SVG file atomically.
pub fn write_svg(path: &Path, tracks: &[TrackPlot], title: &str) -> anyhow::Result<()> {
    let mut svg = String::new();
    draw(&mut svg, tracks, title).map_err(|e| anyhow::anyhow!("plot {}: {e}", path.display()))?;
    kestrel::io::write_atomic(path, |w| {
        use std::io::Write;
        w.write_all(svg.as_bytes())
    })?;
    Ok(())
}
