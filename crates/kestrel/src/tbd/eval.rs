//! Probability of detection against false alarms, for track-before-detect and for the
//! single-frame detector (`D_k = X_k`) as the baseline.
//!
//! Thresholds come from [`calibrate`](super::detect::calibrate) for a per-pixel false-alarm probability on
//! noise-only frames. A target counts as detected at an emitted frame when the map's
//! largest value in the 3 x 3 window around its true pixel exceeds the threshold (the
//! same rule for both detectors). Frames before a target's accumulated signal reaches 95%
//! of its steady state (`(1 - alpha)^k < 0.05`) are not counted. Targets move with the integer vectors of the motion set, from random
//! starting pixels chosen so that they stay inside the frame.
//!
//! *Turning targets* ([`Scenario::turn_every`] = N > 0): each target moves one step a frame
//! along one of the eight compass directions ((1, 0), (1, 1), (0, 1), ...) and turns to the
//! next one (45 degrees, the same sense throughout, drawn per target) every N frames; its
//! start is chosen so that the whole path stays inside the frame. With a transition
//! matrix ([`Scenario::switching`]) the switching bank runs beside the constant-velocity
//! bank on the same frames, with its own calibrated thresholds (`pd_switch`).

use super::detect::calibrate_params;
use super::sim::{amplitude, Noise, NoiseFrames, Target};
use super::{Motion, Params, Tbd};
use crate::device::Device;
use crate::error::{Error, Result};
use rand::{Rng, SeedableRng};

/// The scenario of an evaluation.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Frame height.
    pub h: usize,
    /// Frame width.
    pub w: usize,
    /// Frames per trial sequence.
    pub frames: usize,
    /// Targets per sequence.
    pub targets: usize,
    /// The recursion's parameters.
    pub params: Params,
    /// The frame noise.
    pub noise: Noise,
    /// Seed of the scenario's draws.
    pub seed: u64,
    /// 0: targets at constant velocity; N > 0: targets that turn 45 degrees every N frames.
    pub turn_every: usize,
    /// A Markov matrix between the vectors: the switching bank, evaluated beside the
    /// constant-velocity bank of `params` (whose own transition, if any, is left out).
    pub switching: Option<super::Transition>,
}

/// Pd of both detectors at one SNR and one false-alarm probability.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Point {
    /// Signal-to-noise ratio (dB).
    pub snr_db: f64,
    /// False-alarm probability per pixel the thresholds were set for.
    pub pfa: f64,
    /// Detection probability of track-before-detect.
    pub pd_tbd: f64,
    /// Detection probability of single-frame thresholding.
    pub pd_single: f64,
    /// Detection probability of the switching bank (with a transition matrix).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pd_switch: Option<f64>,
    /// Target-frames counted.
    pub trials: usize,
}

fn place_targets(s: &Scenario, snr_db: f64) -> Result<Vec<Target>> {
    super::sim::check_snr("the SNR", snr_db)?;
    let ints: Vec<Motion> = s
        .params
        .motions
        .iter()
        .copied()
        .filter(|m| m.is_integer())
        .collect();
    if ints.is_empty() {
        return Err(Error::input(
            "the evaluation needs at least one integer motion vector",
        ));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(s.seed ^ 0x07a4_6e75);
    let span = (s.frames - 1) as f64;
    let m = 2.0;
    let mut out = Vec::with_capacity(s.targets);
    for i in 0..s.targets {
        let v = ints[i % ints.len()];
        let range = |vel: f64, size: usize| -> Result<(f64, f64)> {
            let (lo, hi) = (
                m - (span * vel).min(0.0),
                size as f64 - 1.0 - m - (span * vel).max(0.0),
            );
            if lo > hi {
                return Err(Error::input(format!(
                    "frames of {} x {} are too small for targets moving {} frames at ({}, {})",
                    s.w, s.h, s.frames, v.vx, v.vy
                )));
            }
            Ok((lo, hi))
        };
        let (x0, x1) = range(v.vx as f64, s.w)?;
        let (y0, y1) = range(v.vy as f64, s.h)?;
        out.push(Target {
            x: rng.gen_range(x0..=x1).round(),
            y: rng.gen_range(y0..=y1).round(),
            vx: v.vx as f64,
            vy: v.vy as f64,
            amplitude: amplitude(snr_db),
        });
    }
    Ok(out)
}

/// A target's pixel at each frame (None outside the frame) and its amplitude.
struct Track {
    pixels: Vec<Option<(usize, usize)>>,
    amplitude: f64,
}

/// The eight compass directions in turning order (counter-clockwise on screen axes).
const COMPASS: [(i64, i64); 8] = [
    (1, 0),
    (1, 1),
    (0, 1),
    (-1, 1),
    (-1, 0),
    (-1, -1),
    (0, -1),
    (1, -1),
];

fn turning_targets(s: &Scenario, snr_db: f64) -> Result<Vec<Track>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(s.seed ^ 0x7e41_2a6b);
    let m = 2i64;
    (0..s.targets)
        .map(|i| {
            let mut dir = (i % 8) as i64;
            let sense: i64 = if rng.gen_bool(0.5) { 1 } else { -1 };
            // The path from (0, 0), then its bounding box.
            let mut path = Vec::with_capacity(s.frames);
            let (mut x, mut y) = (0i64, 0i64);
            for k in 0..s.frames {
                path.push((x, y));
                if k > 0 && k % s.turn_every == 0 {
                    dir = (dir + sense).rem_euclid(8);
                }
                let (dx, dy) = COMPASS[dir as usize];
                x += dx;
                y += dy;
            }
            let (x0, x1) = (path.iter().map(|p| p.0).min(), path.iter().map(|p| p.0).max());
            let (y0, y1) = (path.iter().map(|p| p.1).min(), path.iter().map(|p| p.1).max());
            let (x0, x1, y0, y1) = (
                x0.unwrap_or(0),
                x1.unwrap_or(0),
                y0.unwrap_or(0),
                y1.unwrap_or(0),
            );
            let (lo_x, hi_x) = (m - x0, s.w as i64 - 1 - m - x1);
            let (lo_y, hi_y) = (m - y0, s.h as i64 - 1 - m - y1);
            if lo_x > hi_x || lo_y > hi_y {
                return Err(Error::input(format!(
                    "frames of {} x {} are too small for targets turning every {} frames over {} frames",
                    s.w, s.h, s.turn_every, s.frames
                )));
            }
            let (sx, sy) = (rng.gen_range(lo_x..=hi_x), rng.gen_range(lo_y..=hi_y));
            Ok(Track {
                pixels: path
                    .iter()
                    .map(|&(x, y)| Some(((sx + x) as usize, (sy + y) as usize)))
                    .collect(),
                amplitude: amplitude(snr_db),
            })
        })
        .collect()
}

fn tracks(s: &Scenario, snr_db: f64) -> Result<Vec<Track>> {
    if s.turn_every > 0 {
        return turning_targets(s, snr_db);
    }
    Ok(place_targets(s, snr_db)?
        .into_iter()
        .map(|g| Track {
            pixels: (0..s.frames).map(|t| g.pixel(t, s.h, s.w)).collect(),
            amplitude: g.amplitude,
        })
        .collect())
}

/// The banks of a scenario: the constant-velocity one, and the switching one if any.
fn banks(s: &Scenario) -> Vec<Params> {
    let cv = Params {
        transition: None,
        ..s.params.clone()
    };
    let mut out = vec![cv.clone()];
    if let Some(m) = &s.switching {
        out.push(Params {
            transition: Some(m.clone()),
            ..cv
        });
    }
    out
}

/// Frames until a target's accumulated signal is within 5% of its steady state.
pub fn settle(alpha: f32) -> usize {
    if alpha >= 1.0 {
        return 0;
    }
    ((0.05f64).ln() / (1.0 - alpha as f64).ln()).ceil() as usize
}

fn hit(score: &[f32], h: usize, w: usize, (x, y): (usize, usize), thr: f32) -> bool {
    let mut best = f32::NEG_INFINITY;
    for yy in y.saturating_sub(1)..(y + 2).min(h) {
        for xx in x.saturating_sub(1)..(x + 2).min(w) {
            best = best.max(score[yy * w + xx]);
        }
    }
    best > thr
}

/// Pd of each bank and of the single-frame detector at `snr_db` for each threshold.
fn measure(
    s: &Scenario,
    snr_db: f64,
    bank_thr: &[Vec<f32>],
    single_thr: &[f32],
) -> Result<(Vec<Vec<f64>>, Vec<f64>, usize)> {
    let targets = tracks(s, snr_db)?;
    let gen = NoiseFrames::new(
        s.h,
        s.w,
        s.noise,
        s.seed.wrapping_add(1 + (snr_db * 1000.0) as u64),
    );
    let mut tbds = banks(s)
        .into_iter()
        .map(|p| Tbd::new(p, s.h, s.w, Device::Cpu))
        .collect::<Result<Vec<_>>>()?;
    let warm = settle(s.params.alpha);
    let mut frame = vec![0.0f32; s.h * s.w];
    let mut hits_t: Vec<Vec<usize>> = bank_thr.iter().map(|t| vec![0; t.len()]).collect();
    let mut hits_s = vec![0usize; single_thr.len()];
    let mut trials = 0;
    let mut snapshot = Vec::with_capacity(targets.len());
    for t in 0..s.frames {
        snapshot.clear();
        snapshot.extend(targets.iter().filter_map(|g| {
            g.pixels[t].map(|(x, y)| Target {
                x: x as f64,
                y: y as f64,
                vx: 0.0,
                vy: 0.0,
                amplitude: g.amplitude,
            })
        }));
        gen.frame_with(t, &mut frame, &snapshot);
        for (b, tbd) in tbds.iter_mut().enumerate() {
            let mut maps = tbd.push(&frame)?;
            if t + 1 == s.frames {
                maps.extend(tbd.finish()?);
            }
            for map in maps.iter().filter(|m| m.t >= warm) {
                for p in targets.iter().filter_map(|g| g.pixels[map.t]) {
                    for (k, &th) in bank_thr[b].iter().enumerate() {
                        hits_t[b][k] += hit(&map.score, s.h, s.w, p, th) as usize;
                    }
                    if b == 0 {
                        trials += 1;
                        for (k, &th) in single_thr.iter().enumerate() {
                            hits_s[k] += hit(&frame, s.h, s.w, p, th) as usize;
                        }
                    }
                }
            }
        }
    }
    if trials == 0 {
        return Err(Error::input(format!(
            "no target-frames to count: {} frames do not pass the settling time of {warm}",
            s.frames
        )));
    }
    let pd = |h: Vec<usize>| h.into_iter().map(|n| n as f64 / trials as f64).collect();
    Ok((hits_t.into_iter().map(pd).collect(), pd(hits_s), trials))
}

/// Thresholds of each bank (constant velocity, then switching if any) and of the
/// single-frame detector for `pfas`.
pub fn thresholds(s: &Scenario, pfas: &[f64]) -> Result<(Vec<Vec<f32>>, Vec<f32>)> {
    let tbd = banks(s)
        .iter()
        .map(|p| calibrate_params(Some(p), s.h, s.w, s.noise, pfas, s.seed ^ 0xca1))
        .collect::<Result<Vec<_>>>()?;
    let single = calibrate_params(None, s.h, s.w, s.noise, pfas, s.seed ^ 0x5f)?;
    Ok((tbd, single))
}

/// Pd of the detectors at a fixed `pfa` for each SNR in `snrs_db`.
pub fn pd_vs_snr(s: &Scenario, pfa: f64, snrs_db: &[f64]) -> Result<Vec<Point>> {
    let (tt, ts) = thresholds(s, &[pfa])?;
    snrs_db
        .iter()
        .map(|&snr| {
            let (pt, ps, trials) = measure(s, snr, &tt, &ts)?;
            Ok(Point {
                snr_db: snr,
                pfa,
                pd_tbd: pt[0][0],
                pd_single: ps[0],
                pd_switch: pt.get(1).map(|p| p[0]),
                trials,
            })
        })
        .collect()
}

/// ROC points of the detectors at one SNR.
pub fn roc(s: &Scenario, snr_db: f64, pfas: &[f64]) -> Result<Vec<Point>> {
    let (tt, ts) = thresholds(s, pfas)?;
    let (pt, ps, trials) = measure(s, snr_db, &tt, &ts)?;
    Ok(pfas
        .iter()
        .enumerate()
        .map(|(k, &pfa)| Point {
            snr_db,
            pfa,
            pd_tbd: pt[0][k],
            pd_single: ps[k],
            pd_switch: pt.get(1).map(|p| p[k]),
            trials,
        })
        .collect())
}
