//! Probability of detection against false alarms, for track-before-detect and for the
//! single-frame detector (`D_k = X_k`) as the baseline.
//!
//! Thresholds come from [`calibrate`] for a per-pixel false-alarm probability on
//! noise-only frames. A target counts as detected at an emitted frame when the map's
//! largest value in the 3 x 3 window around its true pixel exceeds the threshold (the
//! same rule for both detectors). Frames before a target's accumulated signal reaches 95%
//! of its steady state (`(1 - alpha)^k < 0.05`) are not counted. Targets move with the integer vectors of the motion set, from random
//! starting pixels chosen so that they stay inside the frame.

use super::detect::calibrate;
use super::sim::{amplitude, Noise, NoiseFrames, Target};
use super::{Map, Motion, Params, Tbd};
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
    /// Target-frames counted.
    pub trials: usize,
}

fn place_targets(s: &Scenario, snr_db: f64) -> Result<Vec<Target>> {
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

/// Pd of both detectors at `snr_db` for each pair of thresholds.
fn measure(
    s: &Scenario,
    snr_db: f64,
    tbd_thr: &[f32],
    single_thr: &[f32],
) -> Result<(Vec<f64>, Vec<f64>, usize)> {
    let targets = place_targets(s, snr_db)?;
    let gen = NoiseFrames::new(
        s.h,
        s.w,
        s.noise,
        s.seed.wrapping_add(1 + (snr_db * 1000.0) as u64),
    );
    let mut tbd = Tbd::new(s.params.clone(), s.h, s.w, Device::Cpu)?;
    let warm = settle(s.params.alpha);
    let mut frame = vec![0.0f32; s.h * s.w];
    let (mut hits_t, mut hits_s) = (vec![0usize; tbd_thr.len()], vec![0usize; single_thr.len()]);
    let mut trials = 0;
    let mut count = |map: &Map, last_frame: &[f32], hits_t: &mut [usize], hits_s: &mut [usize]| {
        if map.t < warm {
            return;
        }
        for g in &targets {
            let Some(p) = g.pixel(map.t, s.h, s.w) else {
                continue;
            };
            trials += 1;
            for (k, &th) in tbd_thr.iter().enumerate() {
                hits_t[k] += hit(&map.score, s.h, s.w, p, th) as usize;
            }
            for (k, &th) in single_thr.iter().enumerate() {
                hits_s[k] += hit(last_frame, s.h, s.w, p, th) as usize;
            }
        }
    };
    for t in 0..s.frames {
        gen.frame_with(t, &mut frame, &targets);
        let mut maps = tbd.push(&frame)?;
        if t + 1 == s.frames {
            maps.extend(tbd.finish()?);
        }
        for map in &maps {
            count(map, &frame, &mut hits_t, &mut hits_s);
        }
    }
    if trials == 0 {
        return Err(Error::input(format!(
            "no target-frames to count: {} frames do not pass the settling time of {warm}",
            s.frames
        )));
    }
    let pd = |h: Vec<usize>| h.into_iter().map(|n| n as f64 / trials as f64).collect();
    Ok((pd(hits_t), pd(hits_s), trials))
}

/// Thresholds of both detectors for `pfas` (TBD first).
pub fn thresholds(s: &Scenario, pfas: &[f64]) -> Result<(Vec<f32>, Vec<f32>)> {
    let p = &s.params;
    let tbd = calibrate(
        Some((&p.motions, p.alpha, p.decimation)),
        s.h,
        s.w,
        s.noise,
        pfas,
        s.seed ^ 0xca1,
    )?;
    let single = calibrate(None, s.h, s.w, s.noise, pfas, s.seed ^ 0x5f)?;
    Ok((tbd, single))
}

/// Pd of both detectors at a fixed `pfa` for each SNR in `snrs_db`.
pub fn pd_vs_snr(s: &Scenario, pfa: f64, snrs_db: &[f64]) -> Result<Vec<Point>> {
    let (tt, ts) = thresholds(s, &[pfa])?;
    snrs_db
        .iter()
        .map(|&snr| {
            let (pt, ps, trials) = measure(s, snr, &tt, &ts)?;
            Ok(Point {
                snr_db: snr,
                pfa,
                pd_tbd: pt[0],
                pd_single: ps[0],
                trials,
            })
        })
        .collect()
}

/// ROC points of both detectors at one SNR.
pub fn roc(s: &Scenario, snr_db: f64, pfas: &[f64]) -> Result<Vec<Point>> {
    let (tt, ts) = thresholds(s, pfas)?;
    let (pt, ps, trials) = measure(s, snr_db, &tt, &ts)?;
    Ok(pfas
        .iter()
        .enumerate()
        .map(|(k, &pfa)| Point {
            snr_db,
            pfa,
            pd_tbd: pt[k],
            pd_single: ps[k],
            trials,
        })
        .collect())
}
