//! `kestrel simulate-frames`: frame sequences with point targets in noise, and the
//! truth (`t,target,x,y,vx,vy,amplitude`). SNR convention: `kestrel::tbd::sim`.
//!
//! Integer types hold `round(offset + scale X)`, clamped: u8 with offset 64 and scale 16,
//! u16 with offset 4096 and scale 256 (X in units of the noise's standard deviation).

use super::bad;
use super::tbd::{MotionArgs, NoiseKind};
use kestrel::io::write_atomic;
use kestrel::tbd::{self, sim::amplitude, Noise, NoiseFrames, Target};
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutType {
    F32,
    U8,
    U16,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Frames: .npy [T, H, W].
    #[arg(long, value_name = "FRAMES.npy")]
    output: PathBuf,
    /// Truth: CSV t,target,x,y,vx,vy,amplitude (one row per target and frame inside the frame).
    #[arg(long, value_name = "TRUTH.csv")]
    truth: Option<PathBuf>,
    /// Number of frames T.
    #[arg(long, value_name = "T")]
    frames: usize,
    /// Frame height H in pixels.
    #[arg(long, value_name = "H", default_value_t = 256)]
    height: usize,
    /// Frame width W in pixels.
    #[arg(long, value_name = "W", default_value_t = 256)]
    width: usize,
    /// A target "x:y:vx:vy" (position at frame 0, velocity in pixels per frame); repeat for more.
    #[arg(long = "target", value_name = "X:Y:VX:VY", allow_hyphen_values = true)]
    target: Vec<String>,
    /// Random targets in addition, with velocities drawn from the motion set.
    #[arg(long, value_name = "N", default_value_t = 0)]
    targets: usize,
    #[command(flatten)]
    motion: MotionArgs,
    /// Signal-to-noise ratio of every target in dB.
    #[arg(
        long,
        value_name = "DB",
        default_value_t = 3.0,
        allow_hyphen_values = true
    )]
    snr: f64,
    #[arg(long, value_enum, default_value_t = NoiseKind::Gaussian)]
    noise: NoiseKind,
    /// Element type of the frames.
    #[arg(long, value_enum, default_value_t = OutType::F32)]
    dtype: OutType,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn parse_target(s: &str, amp: f64) -> anyhow::Result<Target> {
    let v: Vec<f64> = s
        .split(':')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad(format!("--target \"{s}\": expected X:Y:VX:VY (numbers)")))?;
    if v.len() != 4 || v.iter().any(|x| !x.is_finite()) {
        return Err(bad(format!(
            "--target \"{s}\": expected X:Y:VX:VY (four finite numbers)"
        )));
    }
    Ok(Target {
        x: v[0],
        y: v[1],
        vx: v[2],
        vy: v[3],
        amplitude: amp,
    })
}

fn write_truth(
    path: &Path,
    targets: &[Target],
    frames: usize,
    h: usize,
    w: usize,
) -> anyhow::Result<()> {
    write_atomic(path, |out| {
        writeln!(out, "t,target,x,y,vx,vy,amplitude")?;
        for t in 0..frames {
            for (i, g) in targets.iter().enumerate() {
                if g.pixel(t, h, w).is_some() {
                    let (x, y) = g.at(t);
                    writeln!(out, "{t},{i},{x},{y},{},{},{}", g.vx, g.vy, g.amplitude)?;
                }
            }
        }
        Ok(())
    })?;
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if !a
        .output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        return Err(bad(format!(
            "--output {}: expected a .npy file",
            a.output.display()
        )));
    }
    let (t, h, w) = (a.frames, a.height, a.width);
    if t == 0 || h == 0 || w == 0 {
        return Err(bad(format!(
            "--frames, --height and --width must be at least 1 (got {t}, {h}, {w})"
        )));
    }
    kestrel::tbd::sim::check_snr("--snr", a.snr)?;
    let size = match a.dtype {
        OutType::F32 => 4,
        OutType::U16 => 2,
        OutType::U8 => 1,
    };
    t.checked_mul(h)
        .and_then(|n| n.checked_mul(w))
        .and_then(|n| n.checked_mul(size))
        .ok_or_else(|| {
            bad(format!(
                "{t} frames of {w} x {h} overflow the address space"
            ))
        })?;
    let mut outs = vec![a.output.as_path()];
    outs.extend(a.truth.as_deref());
    let outputs = kestrel::io::Outputs::plan(&[], &outs)?;
    if let Some(t) = &a.truth {
        kestrel::io::Format::of(t, &[kestrel::io::Format::Csv])?;
    }
    // A frame is made in memory (f32, and its bytes) before it is written.
    use kestrel::limits::{self, Size};
    limits::check("a frame", &[Size("rows", h), Size("columns", w)], 4 + size)?;
    limits::check(
        "random targets",
        &[Size("targets", a.targets)],
        std::mem::size_of::<Target>(),
    )?;
    let amp = amplitude(a.snr);
    let mut targets: Vec<Target> = a
        .target
        .iter()
        .map(|s| parse_target(s, amp))
        .collect::<anyhow::Result<_>>()?;
    if a.targets > 0 {
        let motions = a.motion.motions(|| {
            (-1..=1)
                .flat_map(|vy| (-1..=1).map(move |vx| tbd::Motion::new(vx as f32, vy as f32)))
                .collect()
        })?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed ^ 0x7a46);
        for _ in 0..a.targets {
            let m = motions[rng.gen_range(0..motions.len())];
            targets.push(Target {
                x: rng.gen_range(0..w) as f64,
                y: rng.gen_range(0..h) as f64,
                vx: m.vx as f64,
                vy: m.vy as f64,
                amplitude: amp,
            });
        }
    }
    let noise = match a.noise {
        NoiseKind::Gaussian => Noise::UNIT_GAUSSIAN,
        NoiseKind::Rayleigh => Noise::UNIT_RAYLEIGH,
    };
    let gen = NoiseFrames::new(h, w, noise, a.seed);
    let shape = [t, h, w];
    let header = tbd::frames::npy_header(
        match a.dtype {
            OutType::F32 => tbd::Dtype::F32,
            OutType::U16 => tbd::Dtype::U16,
            OutType::U8 => tbd::Dtype::U8,
        },
        &shape,
    );
    // The frames are streamed to the file: what must fit is the disk.
    limits::check_disk(
        &a.output,
        header.len() as u128 + t as u128 * h as u128 * w as u128 * size as u128,
    )?;
    let mut frame = vec![0.0f32; h * w];
    let mut bytes = Vec::with_capacity(h * w * size);
    write_atomic(&a.output, |out| {
        out.write_all(&header)?;
        for k in 0..t {
            gen.frame_with(k, &mut frame, &targets);
            bytes.clear();
            match a.dtype {
                OutType::F32 => frame.iter().for_each(|v| bytes.extend(v.to_le_bytes())),
                OutType::U16 => frame.iter().for_each(|v| {
                    bytes.extend(
                        ((4096.0 + 256.0 * v).round().clamp(0.0, 65535.0) as u16).to_le_bytes(),
                    )
                }),
                OutType::U8 => frame
                    .iter()
                    .for_each(|v| bytes.push((64.0 + 16.0 * v).round().clamp(0.0, 255.0) as u8)),
            }
            out.write_all(&bytes)?;
        }
        Ok(())
    })?;
    if let Some(p) = &a.truth {
        write_truth(p, &targets, t, h, w)?;
    }
    // Both files or neither.
    outputs.commit()?;
    errln!(
        "simulate-frames: {t} frames of {w} x {h} ({}, {} noise), {} targets at {} dB (amplitude {amp:.3}) -> {}",
        super::value_name(&a.dtype),
        super::value_name(&a.noise),
        targets.len(),
        a.snr,
        a.output.display()
    );
    Ok(())
}
