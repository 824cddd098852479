//! `kestrel track`: multi-target tracking of unlabelled detections (gating, GNN or JPDA
//! association, M-of-N confirmation, deletion after K misses).

use super::{bad, choose_device};
use kestrel::tracking::files::{
    read_detections, scans, tracks_header, write_tracks_scan, Detections,
};
use kestrel::tracking::{Assoc, DeviceTracker, JpdaMarginals, TrackSet, TrackerConfig};
use kestrel::Device;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssocArg {
    Gnn,
    Jpda,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarginalsArg {
    Auto,
    Lbp,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Motion and measurement model (TOML); its prior supplies the unmeasured part of a
    /// new track (e.g. the velocity).
    #[arg(long, value_name = "M.toml")]
    pub model: PathBuf,
    /// Detections: CSV `t,z0,z1,...` (rows in time order) or NPY `[N, 1 + ny]`.
    #[arg(long, value_name = "DET.csv|DET.npy")]
    pub detections: PathBuf,
    /// Tracks: CSV `t,track,status,x0..,P00..`, the live tracks after each scan.
    #[arg(long, value_name = "TRACKS.csv")]
    pub output: PathBuf,
    #[arg(long, value_enum, default_value = "gnn")]
    pub assoc: AssocArg,
    /// JPDA's marginals: exact by enumeration in clusters of up to 20,000 joint events
    /// and loopy belief propagation in larger ones (auto), or belief propagation in
    /// every cluster (lbp, as Stone Soup's JPDAwithLBP). JPDA only [default: auto].
    #[arg(long, value_enum)]
    pub jpda_marginals: Option<MarginalsArg>,
    /// Gate probability (chi-square gate on the innovation).
    #[arg(
        long,
        allow_negative_numbers = true,
        value_name = "P",
        default_value_t = 0.999
    )]
    pub gate: f64,
    /// Detection probability, in (0, 1].
    #[arg(
        long,
        allow_negative_numbers = true,
        value_name = "P",
        default_value_t = 0.9
    )]
    pub pd: f64,
    /// Clutter density (false detections per unit measurement volume per scan);
    /// default: detections per scan over the volume of their bounding box.
    #[arg(long, allow_negative_numbers = true, value_name = "L")]
    pub clutter: Option<f64>,
    /// Confirm a tentative track with M detections in its first N scans.
    #[arg(long, value_name = "M/N", default_value = "2/3")]
    pub confirm: String,
    /// Delete a confirmed track after K consecutive misses.
    #[arg(long, value_name = "K", default_value_t = 3)]
    pub delete: u32,
    /// Also delete a tentative track after K consecutive misses (default: only when M of
    /// N can no longer be reached).
    #[arg(long, value_name = "K")]
    pub delete_tentative: Option<u32>,
    /// Also delete a track when a variance of its predicted measurement (H P H^T)
    /// exceeds V.
    #[arg(long, allow_negative_numbers = true, value_name = "V")]
    pub max_variance: Option<f64>,
    /// Times are in seconds and scans are DT apart (default: t is the step index).
    #[arg(long, allow_negative_numbers = true, value_name = "DT")]
    pub dt: Option<f64>,
    /// cpu, cuda, cuda:N or auto. The GPU tracker associates by GNN only (`--assoc
    /// jpda` with a GPU is refused) and pays off from about 10^4 live tracks.
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

/// Parses `M/N`.
pub fn parse_confirm(s: &str) -> anyhow::Result<(u32, u32)> {
    let parsed = s
        .split_once('/')
        .and_then(|(m, n)| Some((m.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?)));
    match parsed {
        Some((m, n)) if m >= 1 && m <= n => Ok((m, n)),
        Some((m, n)) => Err(bad(format!("--confirm {m}/{n}: M/N needs 1 <= M <= N"))),
        None => Err(bad(format!("--confirm '{s}': expected M/N, such as 2/3"))),
    }
}

/// Detections per scan over the volume of the detections' bounding box.
pub fn estimate_clutter(d: &Detections, scans: usize) -> f64 {
    let ny = d.ny;
    let mut vol = 1.0;
    for a in 0..ny {
        let (lo, hi) =
            d.z.chunks(ny)
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), r| {
                    (l.min(r[a]), h.max(r[a]))
                });
        vol *= (hi - lo).max(1e-9);
    }
    (d.len() as f64 / scans.max(1) as f64 / vol).max(f64::MIN_POSITIVE)
}

pub fn config(a: &Args, clutter: f64) -> anyhow::Result<TrackerConfig> {
    if !(a.gate > 0.0 && a.gate < 1.0) {
        return Err(bad(format!(
            "--gate must be a probability in (0, 1), got {}",
            a.gate
        )));
    }
    if !(a.pd > 0.0 && a.pd <= 1.0) {
        return Err(bad(format!("--pd must be in (0, 1], got {}", a.pd)));
    }
    if !(clutter > 0.0 && clutter.is_finite()) {
        return Err(bad(format!(
            "--clutter must be a positive, finite density, got {clutter}"
        )));
    }
    if a.delete == 0 {
        return Err(bad("--delete must be at least 1"));
    }
    if a.jpda_marginals.is_some() && a.assoc != AssocArg::Jpda {
        return Err(bad("--jpda-marginals applies to --assoc jpda only"));
    }
    if a.delete_tentative == Some(0) {
        return Err(bad("--delete-tentative must be at least 1"));
    }
    let max_variance = a.max_variance.unwrap_or(f64::INFINITY);
    if !(max_variance > 0.0) {
        return Err(bad(format!(
            "--max-variance must be positive, got {max_variance}"
        )));
    }
    Ok(TrackerConfig::default()
        .with_assoc(match a.assoc {
            AssocArg::Gnn => Assoc::Gnn,
            AssocArg::Jpda => Assoc::Jpda,
        })
        .with_marginals(match a.jpda_marginals {
            None | Some(MarginalsArg::Auto) => JpdaMarginals::Auto,
            Some(MarginalsArg::Lbp) => JpdaMarginals::Lbp,
        })
        .with_gate(a.gate)
        .with_pd(a.pd)
        .with_clutter(clutter)
        .with_confirm(parse_confirm(&a.confirm)?)
        .with_delete(a.delete)
        .with_delete_tentative(a.delete_tentative.unwrap_or(u32::MAX))
        .with_max_variance(max_variance))
}

/// The tracks' states after a scan are finite: a NaN anywhere or an infinite mean is an
/// error naming the track and step (the output is not written); an infinite variance
/// with finite means (an unstable model coasting) is written, with a warning, once.
fn check_finite(
    output: &std::path::Path,
    step: i64,
    tracker: &dyn TrackSet,
) -> kestrel::Result<()> {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    for i in 0..tracker.len() {
        let (m, p) = (tracker.mean(i), tracker.cov(i));
        let bad = m
            .iter()
            .position(|v| !v.is_finite())
            .map(|j| format!("mean x{j} is {}", m[j]))
            .or_else(|| {
                p.iter()
                    .position(|v| v.is_nan())
                    .map(|j| format!("covariance entry {j} is NaN"))
            });
        if let Some(msg) = bad {
            return Err(kestrel::Error::NonFinite {
                what: output.display().to_string(),
                track: tracker.id(i) as usize,
                step: step.max(0) as usize,
                msg: format!("{msg}: the recursion broke down numerically"),
            });
        }
        if p.iter().any(|v| v.is_infinite())
            && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            kestrel::error::warn(format!(
                "{}: track {}, step {step}: a covariance entry is infinite (an unstable model coasting); the means are finite",
                output.display(),
                tracker.id(i)
            ));
        }
    }
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if let Some(c) = a.clutter {
        if !(c > 0.0 && c.is_finite()) {
            return Err(bad(format!(
                "--clutter must be a positive, finite density, got {c}"
            )));
        }
    }
    if let Some(dt) = a.dt {
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(bad(format!("--dt must be positive, got {dt}")));
        }
    }
    parse_confirm(&a.confirm)?;
    kestrel::io::Format::of(&a.output, &[kestrel::io::Format::Csv])?;
    let outputs = kestrel::io::Outputs::plan(&[&a.model, &a.detections], &[&a.output])?;
    let model = super::load_linear_model(&a.model)?;
    let det = read_detections(&a.detections)?;
    if det.is_empty() {
        return Err(bad(format!(
            "{}: no detections (only a header)",
            a.detections.display()
        )));
    }
    if det.ny != model.ny() {
        return Err(bad(format!(
            "{}: detections have {} components (z0..z{}), the model measures {}",
            a.detections.display(),
            det.ny,
            det.ny.saturating_sub(1),
            model.ny()
        )));
    }
    let sc = scans(&det, a.dt, &a.detections)?;
    let clutter = a
        .clutter
        .unwrap_or_else(|| estimate_clutter(&det, sc.len()));
    let cfg = config(&a, clutter)?;
    // JPDA runs on the CPU: `auto` picks it there.
    let device = if a.device == "auto" && cfg.assoc == Assoc::Jpda {
        Device::Cpu
    } else {
        choose_device(&a.device)?
    };
    if device != Device::Cpu && cfg.assoc == Assoc::Jpda {
        return Err(bad(format!(
            "--assoc jpda --device {}: JPDA runs on the CPU only (use --device cpu, or --assoc gnn on the GPU)",
            a.device
        )));
    }
    let mut engine = DeviceTracker::new(&model, cfg, device)?;
    let ny = det.ny;
    let t0 = Instant::now();
    let mut failure: Option<kestrel::Error> = None;
    let mut rows = 0usize;
    let mut confirmed_ids = std::collections::HashSet::new();
    let progress = super::Progress::new("tracking");
    progress.count("tracking", sc.len(), "scans");
    let written = kestrel::io::write_atomic(&a.output, |w| {
        writeln!(w, "{}", tracks_header(model.nx()))?;
        for k in 0..sc.len() {
            progress.inc(1);
            let r = sc.rows(k);
            if let Err(e) = engine.step(&det.z[r.start * ny..r.end * ny]) {
                failure = Some(e);
                return Err(std::io::Error::other("tracking failed"));
            }
            let tracker = engine.tracks().map_err(|e| {
                failure = Some(e);
                std::io::Error::other("tracking failed")
            })?;
            let step = sc.first + k as i64;
            if let Err(e) = check_finite(&a.output, step, tracker) {
                failure = Some(e);
                return Err(std::io::Error::other("tracking failed"));
            }
            let t = a.dt.map_or(step as f64, |dt| step as f64 * dt);
            write_tracks_scan(w, t, tracker)?;
            rows += tracker.len();
            for i in 0..tracker.len() {
                if tracker.status(i) == kestrel::tracking::Status::Confirmed {
                    confirmed_ids.insert(tracker.id(i));
                }
            }
        }
        Ok(())
    });
    progress.finish();
    if let Some(e) = failure {
        return Err(e.into());
    }
    written?;
    outputs.commit()?;
    let secs = t0.elapsed().as_secs_f64();
    let tm = engine.timing();
    errln!(
        "track: {} detections in {} scans on {device}, {}, gate {} (chi-square {:.3}), pd {}, clutter {:.3e}, confirm {}, delete after {}: {} confirmed tracks, {} rows; {:.3} s ({:.3} ms/scan: predict {:.3}, gate {:.3}, cluster {:.3}, associate {:.3}, update {:.3}, life cycle {:.3}) -> {}",
        det.len(),
        sc.len(),
        super::value_name(&a.assoc).to_uppercase(),
        a.gate,
        engine.gate_threshold(),
        a.pd,
        clutter,
        a.confirm,
        a.delete,
        confirmed_ids.len(),
        rows,
        secs,
        1e3 * secs / sc.len().max(1) as f64,
        1e3 * tm.predict / tm.scans.max(1) as f64,
        1e3 * tm.gate / tm.scans.max(1) as f64,
        1e3 * tm.cluster / tm.scans.max(1) as f64,
        1e3 * tm.associate / tm.scans.max(1) as f64,
        1e3 * tm.update / tm.scans.max(1) as f64,
        1e3 * tm.life / tm.scans.max(1) as f64,
        a.output.display()
    );
    Ok(())
}
