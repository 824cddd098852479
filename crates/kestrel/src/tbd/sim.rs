//! Frame sequences with point targets in noise, for tests, calibration and evaluation.
//!
//! *SNR convention.* Gaussian noise has unit variance; a target adds amplitude
//! `A = 10^(SNR/20)` to its pixel. Rayleigh noise is the magnitude of a complex
//! Gaussian `n` with `E|n|^2 = 1`; a target's pixel is `|A + n|` (Rician), so again
//! `SNR = A^2 / E|n|^2`. A target occupies the pixel nearest its position
//! `p_0 + k v` at frame `k` (0-based), when that pixel lies inside the frame.
//!
//! Each frame row has its own generator seeded from `(seed, frame, row)`, so a frame
//! can be made alone, in parallel, and the result does not depend on the thread count.

use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;

/// The noise of a frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Noise {
    /// `mean + std * N(0, 1)`.
    Gaussian {
        /// Mean.
        mean: f32,
        /// Standard deviation.
        std: f32,
    },
    /// `scale * |n|` with `n` complex Gaussian, `E|n|^2 = 1`.
    Rayleigh {
        /// Scale.
        scale: f32,
    },
}

impl Noise {
    /// Unit-variance Gaussian noise.
    pub const UNIT_GAUSSIAN: Noise = Noise::Gaussian {
        mean: 0.0,
        std: 1.0,
    };
    /// Rayleigh noise of unit power.
    pub const UNIT_RAYLEIGH: Noise = Noise::Rayleigh { scale: 1.0 };

    /// Fits the noise of one frame robustly (targets are few and bright): Gaussian from
    /// the median and the median absolute deviation, Rayleigh from the median
    /// (`median = scale sqrt(ln 2)` for unit power).
    pub fn fit(frame: &[f32], rayleigh: bool) -> Noise {
        let mut v: Vec<f32> = frame.to_vec();
        let mid = v.len() / 2;
        let med = *v.select_nth_unstable_by(mid, |a, b| a.total_cmp(b)).1;
        if rayleigh {
            return Noise::Rayleigh {
                scale: med / std::f32::consts::LN_2.sqrt(),
            };
        }
        let mut dev: Vec<f32> = frame.iter().map(|x| (x - med).abs()).collect();
        let mad = *dev.select_nth_unstable_by(mid, |a, b| a.total_cmp(b)).1;
        Noise::Gaussian {
            mean: med,
            std: (1.482_602_2 * mad).max(f32::MIN_POSITIVE),
        }
    }
}

/// A point target: position at frame 0, velocity in pixels per frame, amplitude.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    /// Column at frame 0 (pixels).
    pub x: f64,
    /// Row at frame 0 (pixels).
    pub y: f64,
    /// Pixels per frame along x.
    pub vx: f64,
    /// Pixels per frame along y.
    pub vy: f64,
    /// Peak amplitude.
    pub amplitude: f64,
}

impl Target {
    /// Position at frame `k`.
    pub fn at(&self, k: usize) -> (f64, f64) {
        (self.x + k as f64 * self.vx, self.y + k as f64 * self.vy)
    }

    /// The pixel the target occupies at frame `k` in an `h x w` frame, if inside.
    pub fn pixel(&self, k: usize, h: usize, w: usize) -> Option<(usize, usize)> {
        let (x, y) = self.at(k);
        let (x, y) = (x.round(), y.round());
        (x >= 0.0 && y >= 0.0 && x < w as f64 && y < h as f64).then_some((x as usize, y as usize))
    }
}

/// `n` targets of amplitude `amplitude` at random pixels of an `h x w` frame, each with
/// a velocity drawn from `motions` (`kestrel simulate-frames --targets N`'s draws: the
/// same seed gives the same targets).
pub fn random_targets(
    motions: &[super::Motion],
    n: usize,
    h: usize,
    w: usize,
    amplitude: f64,
    seed: u64,
) -> Vec<Target> {
    if n == 0 || motions.is_empty() || h == 0 || w == 0 {
        return Vec::new();
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x7a46);
    (0..n)
        .map(|_| {
            let m = motions[rng.gen_range(0..motions.len())];
            Target {
                x: rng.gen_range(0..w) as f64,
                y: rng.gen_range(0..h) as f64,
                vx: m.vx as f64,
                vy: m.vy as f64,
                amplitude,
            }
        })
        .collect()
}

/// Checks an SNR in dB through [`crate::limits::range`]: [-200, 600] dB, so that the
/// amplitude `10^(dB/20)` (at most 1e30) and a pixel of noise plus target stay finite in
/// f32 (an SNR beyond would write infinite pixels). `name` names it (`--snr`).
pub fn check_snr(name: &str, snr_db: f64) -> crate::error::Result<f64> {
    use crate::limits::End::In;
    crate::limits::range(name, snr_db, In(-200.0), In(600.0))
}

/// Amplitude for an SNR in dB (see the module documentation).
pub fn amplitude(snr_db: f64) -> f64 {
    10f64.powf(snr_db / 20.0)
}

fn row_rng(seed: u64, t: usize, y: usize) -> rand::rngs::StdRng {
    let mut z = seed ^ 0x9e37_79b9_7f4a_7c15;
    for v in [t as u64, y as u64] {
        z = (z ^ v).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z ^= z >> 31;
    }
    rand::rngs::StdRng::seed_from_u64(z)
}

/// Noise-only frames, frame by frame.
pub struct NoiseFrames {
    /// Frame height.
    pub h: usize,
    /// Frame width.
    pub w: usize,
    /// The noise.
    pub noise: Noise,
    /// Seed of the draws.
    pub seed: u64,
}

impl NoiseFrames {
    /// Noise-only frames of `h x w`.
    pub fn new(h: usize, w: usize, noise: Noise, seed: u64) -> NoiseFrames {
        NoiseFrames { h, w, noise, seed }
    }

    /// Frame `t` into `out` (`h * w`).
    pub fn frame(&self, t: usize, out: &mut [f32]) {
        self.frame_with(t, out, &[]);
    }

    /// Frame `t` with `targets` added (Gaussian: `+A`; Rayleigh: `|A + n|`).
    pub fn frame_with(&self, t: usize, out: &mut [f32], targets: &[Target]) {
        let w = self.w;
        let noise = self.noise;
        let seed = self.seed;
        let hits: Vec<((usize, usize), f64)> = targets
            .iter()
            .filter_map(|g| g.pixel(t, self.h, w).map(|p| (p, g.amplitude)))
            .collect();
        out.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
            let mut rng = row_rng(seed, t, y);
            for (x, o) in row.iter_mut().enumerate() {
                let a: f64 = hits
                    .iter()
                    .filter(|(p, _)| *p == (x, y))
                    .map(|(_, a)| a)
                    .sum();
                *o = match noise {
                    Noise::Gaussian { mean, std } => {
                        let n: f64 = rng.sample(StandardNormal);
                        (mean as f64 + std as f64 * (n + a)) as f32
                    }
                    Noise::Rayleigh { scale } => {
                        let re: f64 = rng.sample(StandardNormal);
                        let im: f64 = rng.sample(StandardNormal);
                        let s = std::f64::consts::FRAC_1_SQRT_2;
                        let (re, im) = (a + s * re, s * im);
                        (scale as f64 * (re * re + im * im).sqrt()) as f32
                    }
                };
            }
        });
    }
}
