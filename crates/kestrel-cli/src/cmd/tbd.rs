//! `kestrel tbd`: spatio-temporal track-before-detect over a frame sequence, detections
//! to CSV (`t,x,y,vx,vy,score`).

use super::bad;
use kestrel::io::write_atomic;
use kestrel::tbd::{self, Detection, Frames, Motion, Noise, Params, Tbd};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The motion hypotheses, shared by the track-before-detect commands.
#[derive(clap::Args, Debug, Clone)]
pub struct MotionArgs {
    /// Motion vectors in pixels per frame, "vx:vy,vx:vy,..." (fractional ones are sampled bilinearly).
    #[arg(long, value_name = "VX:VY,...", conflicts_with_all = ["speeds", "directions"], allow_hyphen_values = true)]
    pub velocities: Option<String>,
    /// Speeds in pixels per frame, "s1,s2,..." (0 adds the vector (0, 0)), each in --directions directions.
    #[arg(long, value_name = "S,...")]
    pub speeds: Option<String>,
    /// Directions per speed, evenly spaced from +x [default: 12].
    #[arg(long, value_name = "N", requires = "speeds")]
    pub directions: Option<usize>,
}

impl MotionArgs {
    /// The vectors asked for, or `default` when none were.
    pub fn motions(&self, default: impl FnOnce() -> Vec<Motion>) -> anyhow::Result<Vec<Motion>> {
        if let Some(v) = &self.velocities {
            return Ok(tbd::parse_velocities(v)?);
        }
        if let Some(s) = &self.speeds {
            let speeds = s
                .split(',')
                .map(|x| x.trim().parse::<f32>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| bad(format!("--speeds: \"{s}\" is not a list of numbers")))?;
            return Ok(tbd::speeds_directions(
                &speeds,
                self.directions.unwrap_or(12),
            )?);
        }
        Ok(default())
    }
}

/// Manoeuvres (Mazurek eq. 1b): a Markov matrix between the motion vectors.
#[derive(clap::Args, Debug, Clone)]
pub struct SwitchArgs {
    /// Manoeuvres: a Markov matrix between the motion vectors, .npy [V, V] (row = from,
    /// column = to, entries >= 0, rows summing to 1).
    #[arg(long, value_name = "M.npy", conflicts_with = "switch")]
    pub transition: Option<PathBuf>,
    /// Manoeuvres, shorthand: each vector switches with probability P, spread evenly over
    /// its neighbours in the speed/direction grid (1 - P stays).
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    pub switch: Option<f64>,
}

impl SwitchArgs {
    /// The matrix asked for over `motions` (None: the plain recursion).
    pub fn transition(&self, motions: &[Motion]) -> anyhow::Result<Option<tbd::Transition>> {
        if let Some(p) = &self.transition {
            check_npy(p, "--transition")?;
            return Ok(Some(tbd::Transition::from_npy(p, motions.len())?));
        }
        if let Some(p) = self.switch {
            return Ok(Some(tbd::Transition::switching(motions, p)?));
        }
        Ok(None)
    }

    /// The input file, if any (never clobbered by an output).
    pub fn input(&self) -> Option<&Path> {
        self.transition.as_deref()
    }
}

/// The noise model of a false-alarm calibration.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoiseKind {
    Gaussian,
    Rayleigh,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Frames: .npy [T, H, W] of u8, u16 or f32 (or a directory of .npy files, name order).
    #[arg(long, value_name = "FRAMES.npy")]
    input: PathBuf,
    /// Detections: CSV with columns t,x,y,vx,vy,score.
    #[arg(long, value_name = "DET.csv")]
    output: PathBuf,
    #[command(flatten)]
    motion: MotionArgs,
    #[command(flatten)]
    switching: SwitchArgs,
    /// Weight of the newest frame, in (0, 1].
    #[arg(long, default_value_t = 0.1, allow_hyphen_values = true)]
    alpha: f32,
    /// Frames per emitted detection map (the state stays on chip across them).
    #[arg(long, value_name = "D", default_value_t = 1)]
    decimation: usize,
    /// Detection threshold on D_k = max_v P_k.
    #[arg(
        long,
        value_name = "X",
        conflicts_with = "pfa",
        allow_hyphen_values = true
    )]
    threshold: Option<f32>,
    /// Per-pixel false-alarm probability; the threshold is calibrated on simulated
    /// noise-only frames fitted to the first frame [default: 1e-4].
    #[arg(long, value_name = "P")]
    pfa: Option<f64>,
    /// Noise model of the --pfa calibration.
    #[arg(long, value_enum, default_value_t = NoiseKind::Gaussian)]
    noise: NoiseKind,
    /// Non-maximum suppression radius in pixels (a detection is the largest score in its
    /// (2R+1) x (2R+1) window).
    #[arg(long, value_name = "R", default_value_t = 2)]
    nms: usize,
    /// Also write the final state P [V, H, W] (f32) as .npy.
    #[arg(long, value_name = "MAP.npy")]
    state_out: Option<PathBuf>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// GPU: store the state as f16 (computed in f32; half the memory traffic).
    #[arg(long)]
    f16_state: bool,
    /// GPU: this kernel instead of the autotuner's choice, e.g. fused/ldg/unroll/f32/32x8/D1,
    /// lean4v3/ldg/unroll/f32/64x12/K4 or tiled/ldg/loop/f32/32x16/K8 (names as
    /// `kestrel bench --only tbd` prints them). The packed kernels (packed2v5/ldg/unroll/
    /// f16/32x16/K4, ...; their wave forms, several periods of K frames a launch, as
    /// packed3v4w3g5/ldg/unroll/f16/32x11/K4, the fastest) compute in f16, not f32: the
    /// fastest with a map every frame, within (6 - 3 alpha) 2^-11 max|X| / (alpha - 2^-9) of
    /// the f32 recursion; never chosen unless named here.
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
}

/// Frames per pass over the state on the CPU (`D = 1`): the rows of the intermediate
/// states of 13 vectors x 1024 columns stay in a core's L2 cache.
const CPU_FRAMES_PER_PASS: usize = 4;

fn write_detections(path: &Path, dets: &[Detection], motions: &[Motion]) -> anyhow::Result<()> {
    write_atomic(path, |w| {
        writeln!(w, "t,x,y,vx,vy,score")?;
        for d in dets {
            let m = motions[d.motion];
            writeln!(w, "{},{},{},{},{},{}", d.t, d.x, d.y, m.vx, m.vy, d.score)?;
        }
        Ok(())
    })?;
    Ok(())
}

pub(super) fn check_npy(path: &Path, flag: &str) -> anyhow::Result<()> {
    if !path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        return Err(bad(format!(
            "{flag} {}: expected a .npy file",
            path.display()
        )));
    }
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    kestrel::io::Format::of(&a.output, &[kestrel::io::Format::Csv])?;
    if let Some(s) = &a.state_out {
        check_npy(s, "--state-out")?;
    }
    if let Some(p) = a.pfa {
        if !(p > 0.0 && p < 1.0) {
            return Err(bad(format!("--pfa must lie in (0, 1), got {p}")));
        }
    }
    if a.threshold.is_some_and(|t| !t.is_finite()) {
        return Err(bad("--threshold must be a finite number"));
    }
    let mut outs = vec![a.output.as_path()];
    outs.extend(a.state_out.as_deref());
    let mut ins = vec![a.input.as_path()];
    ins.extend(a.switching.input());
    let outputs = kestrel::io::Outputs::plan(&ins, &outs)?;
    let device = super::choose_device(&a.device)?;
    let t0 = Instant::now();
    let frames = Frames::open(&a.input)?;
    let (h, w) = (frames.h, frames.w);
    kestrel::limits::check(
        "a frame",
        &[
            kestrel::limits::Size("rows", h),
            kestrel::limits::Size("columns", w),
        ],
        4,
    )?;
    kestrel::limits::count("--nms", a.nms as u64, 0, h.max(w) as u64)
        .map_err(|e| bad(format!("{e} (the frames' larger side)")))?;
    let motions = a
        .motion
        .motions(|| tbd::speeds_directions(&[0.0, 1.0], 12).expect("a valid default motion set"))?;
    let params = Params {
        motions: motions.clone(),
        alpha: a.alpha,
        decimation: a.decimation,
        transition: a.switching.transition(&motions)?,
    };
    params
        .check(h, w)
        .map_err(|e| bad(format!("{}: {e}", a.input.display())))?;
    let kernel = match &a.kernel {
        Some(k) => {
            let cfg = tbd::cuda::KernelConfig::parse(k)
                .ok_or_else(|| bad(format!("--kernel: unknown kernel name \"{k}\"")))?;
            // Its shape, frames and tile against the vectors and the decimation here,
            // on any device (on the GPU the launcher checks them again).
            cfg.check(&motions)
                .and_then(|_| cfg.check_decimation(a.decimation))
                .map_err(|e| bad(format!("--kernel: {e}")))?;
            Some(cfg)
        }
        None => None,
    };
    let opts = tbd::GpuOptions::default()
        .with_half(a.f16_state)
        .with_kernel(kernel);
    let mut engine = Tbd::with_gpu_options(params.clone(), h, w, device, opts)?
        .with_cpu_frames_per_pass(CPU_FRAMES_PER_PASS);
    if let Some(k) = engine.kernel() {
        errln!("tbd: kernel {}", k.name());
    }
    let mut frame = vec![0.0f32; h * w];
    frames.read(0, &mut frame)?;
    let threshold = match a.threshold {
        Some(t) => t,
        None => {
            let pfa = a.pfa.unwrap_or(1e-4);
            let noise = Noise::fit(&frame, a.noise == NoiseKind::Rayleigh);
            let thr = tbd::detect::calibrate_params(Some(&params), h, w, noise, &[pfa], 0)?[0];
            let fitted = match noise {
                Noise::Gaussian { mean, std } => {
                    format!("Gaussian noise of mean {mean:.4} and standard deviation {std:.4}")
                }
                Noise::Rayleigh { scale } => format!("Rayleigh noise of scale {scale:.4}"),
            };
            errln!("tbd: threshold {thr} for Pfa {pfa:e} ({fitted}, fitted to frame 0)");
            thr
        }
    };
    let bar = super::Progress::new("tbd");
    bar.count("tbd", frames.len, "frames");
    let mut dets = Vec::new();
    let mut emitted = 0usize;
    for t in 0..frames.len {
        // f32 frames straight from the mapped file; others converted into `frame`.
        let x = if t > 0 {
            frames.frame(t, &mut frame)?
        } else {
            &frame
        };
        let mut maps = engine.push(x)?;
        if t + 1 == frames.len {
            maps.extend(engine.finish()?);
        }
        for map in maps {
            emitted += 1;
            dets.extend(tbd::detect(&map, threshold, a.nms)?);
            engine.recycle(map);
        }
        bar.inc(1);
    }
    bar.finish();
    let secs = t0.elapsed().as_secs_f64();
    write_detections(&a.output, &dets, &motions)?;
    if let Some(s) = &a.state_out {
        let state = engine.state()?;
        tbd::frames::write_npy(s, &[motions.len(), h, w], &state)?;
    }
    // Both files or neither.
    outputs.commit()?;
    errln!(
        "tbd: {} frames of {w} x {h}, {} vectors, alpha {}, decimation {}, {emitted} maps, {} detections; {:.3} s ({:.1} frames/s) on {device} -> {}",
        frames.len,
        motions.len(),
        a.alpha,
        a.decimation,
        dets.len(),
        secs,
        frames.len as f64 / secs.max(1e-12),
        a.output.display()
    );
    Ok(())
}
