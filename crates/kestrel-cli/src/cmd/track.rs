//! `kestrel track`: multi-target tracking of unlabelled detections (gating, GNN or JPDA
//! association, M-of-N confirmation, deletion after K misses), with a linear model (the
//! Kalman filter, on the CPU or a GPU) or a nonlinear model or IMM file (EKF, IEKF, UKF
//! or CKF tracks, on the CPU).

use super::{bad, choose_device};
use kestrel::nonlinear::{FilterChoice, NonlinearFile, NonlinearProblem};
use kestrel::tracking::files::{read_detections, scans, tracks_header_modes, write_tracks_scan};
use kestrel::tracking::{
    check_finite, estimate_clutter, parse_confirm, Assoc, DeviceTracker, JpdaMarginals,
    TrackerConfig, TrackerOptions,
};
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
    /// Motion and measurement model (TOML): linear, nonlinear (expressions, `ct`, the
    /// range-bearing kinds) or an IMM file; its prior supplies the unmeasured part of a
    /// new track (e.g. the velocity).
    #[arg(long, value_name = "M.toml")]
    pub model: PathBuf,
    /// kf, ekf, ukf, ckf or iekf: each track's filter (overrides the model file's
    /// [filter] kind). Default: kf for linear models, the file's [filter] kind or ekf
    /// for nonlinear ones.
    #[arg(long, value_name = "KIND")]
    pub filter: Option<String>,
    /// Detections: CSV `t,z0,z1,...` (rows in time order; radar plots `t,range,bearing`)
    /// or NPY `[N, 1 + ny]`. Angles are in radians.
    #[arg(long, value_name = "DET.csv|DET.npy")]
    pub detections: PathBuf,
    /// Tracks: CSV `t,track,status,x0..,P00..` (and an IMM's mode probabilities
    /// `p0..`), the live tracks after each scan.
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
    /// cpu, cuda, cuda:N or auto. The GPU tracker takes linear models (a nonlinear model
    /// with a GPU is refused), associates by GNN or JPDA, and pays off from about 10^4
    /// live tracks.
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

/// The checked tracker configuration of `a` (errors name the flags).
pub fn config(a: &Args, clutter: f64) -> anyhow::Result<TrackerConfig> {
    let opts = TrackerOptions {
        assoc: match a.assoc {
            AssocArg::Gnn => Assoc::Gnn,
            AssocArg::Jpda => Assoc::Jpda,
        },
        marginals: a.jpda_marginals.map(|m| match m {
            MarginalsArg::Auto => JpdaMarginals::Auto,
            MarginalsArg::Lbp => JpdaMarginals::Lbp,
        }),
        gate: a.gate,
        pd: a.pd,
        confirm: a.confirm.clone(),
        delete: a.delete,
        delete_tentative: a.delete_tentative,
        max_variance: a.max_variance,
    };
    Ok(opts.config(clutter, |n| format!("--{n}"))?)
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
    parse_confirm(&a.confirm, "--confirm")?;
    kestrel::io::Format::of(&a.output, &[kestrel::io::Format::Csv])?;
    let outputs = kestrel::io::Outputs::plan(&[&a.model, &a.detections], &[&a.output])?;
    let model = load(&a.model, a.filter.as_deref())?;
    let det = read_detections(&a.detections)?;
    if det.is_empty() {
        return Err(bad(format!(
            "{}: no detections (only a header)",
            a.detections.display()
        )));
    }
    let (nx, ny_model) = match &model {
        TrackModel::Linear(m) => (m.nx(), m.ny()),
        TrackModel::Nonlinear(f) => (f.problem.nx(), f.problem.ny()),
    };
    if det.ny != ny_model {
        return Err(bad(format!(
            "{}: detections have {} components (z0..z{}), the model measures {}",
            a.detections.display(),
            det.ny,
            det.ny.saturating_sub(1),
            ny_model
        )));
    }
    let sc = scans(&det, a.dt, &a.detections)?;
    let clutter = a
        .clutter
        .unwrap_or_else(|| estimate_clutter(&det, sc.len()));
    let cfg = config(&a, clutter)?;
    let linear = matches!(model, TrackModel::Linear(_));
    if !linear && !matches!(a.device.as_str(), "cpu" | "auto") {
        return Err(bad(format!(
            "--device {}: tracking with a nonlinear model or an IMM runs on the CPU only (use --device cpu; the GPU tracker takes linear models)",
            a.device
        )));
    }
    // The nonlinear filters run on the CPU: `auto` picks it there.
    let device = if a.device == "auto" && !linear {
        Device::Cpu
    } else {
        choose_device(&a.device)?
    };
    let (mut engine, filter) = match &model {
        TrackModel::Linear(m) => (DeviceTracker::new(m, cfg, device)?, "kf".to_string()),
        TrackModel::Nonlinear(f) => (
            DeviceTracker::nonlinear(&f.problem, &f.options, cfg, device)?,
            match &f.problem {
                NonlinearProblem::Imm(i) => {
                    format!("IMM of {} modes, {}", i.len(), f.options.kind.name())
                }
                NonlinearProblem::Single(_) => f.options.kind.name().to_string(),
            },
        ),
    };
    let ny = det.ny;
    let t0 = Instant::now();
    let mut failure: Option<kestrel::Error> = None;
    let mut rows = 0usize;
    let mut confirmed_ids = std::collections::HashSet::new();
    let mut warned = false;
    // The output's name, for the finiteness check's errors.
    let what = a.output.display().to_string();
    let progress = super::Progress::new("tracking");
    progress.count("tracking", sc.len(), "scans");
    let written = kestrel::io::write_atomic(&a.output, |w| {
        writeln!(w, "{}", tracks_header_modes(nx, engine.modes()))?;
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
            if let Err(e) = check_finite(tracker, &what, step, &mut warned) {
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
        "track: {} detections in {} scans on {device}, {filter}, {}, gate {} (chi-square {:.3}), pd {}, clutter {:.3e}, confirm {}, delete after {}: {} confirmed tracks, {} rows; {:.3} s ({:.3} ms/scan: predict {:.3}, gate {:.3}, cluster {:.3}, associate {:.3}, update {:.3}, life cycle {:.3}) -> {}",
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

/// The model `kestrel track` runs.
enum TrackModel {
    Linear(Box<kestrel::Model>),
    Nonlinear(Box<NonlinearFile>),
}

/// Reads the model file: the Kalman filter's for a linear model unless `--filter` (or the
/// file's `[filter]` table) names a nonlinear filter; the nonlinear family's otherwise.
fn load(path: &std::path::Path, filter: Option<&str>) -> anyhow::Result<TrackModel> {
    let flag = super::nonlinear::filter_flag(filter)?;
    let text = std::fs::read_to_string(path).ok();
    let nonlinear = text
        .as_deref()
        .is_some_and(kestrel::nonlinear::is_nonlinear_text);
    let (Some(text), true) = (
        text,
        nonlinear || matches!(flag, Some(FilterChoice::Gaussian(_))),
    ) else {
        return Ok(TrackModel::Linear(Box::new(super::load_linear_model(
            path,
        )?)));
    };
    let mut file = kestrel::nonlinear::nonlinear_from_toml(&text, path)?;
    match flag.or(file.filter) {
        Some(FilterChoice::Kf) => match file.linear.take() {
            Some(m) => Ok(TrackModel::Linear(Box::new(m))),
            None => Err(bad(format!(
                "{}: the Kalman filter (kf) needs a linear model; this one is nonlinear (use --filter ekf, ukf, ckf or iekf)",
                path.display()
            ))),
        },
        Some(FilterChoice::Gaussian(k)) => {
            file.options.kind = k;
            Ok(TrackModel::Nonlinear(Box::new(file)))
        }
        None => Ok(TrackModel::Nonlinear(Box::new(file))),
    }
}
