//! Counter-based random numbers: Philox 4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel
//! random numbers: as easy as 1, 2, 3", SC 2011), the generator of Random123 and cuRAND.
//!
//! A draw is a pure function of a 64-bit key and a 128-bit counter, so every random
//! number of a run is named by where it is used rather than by the order of a sequential
//! stream: the results do not depend on the thread count or on the device. The CUDA
//! kernels (`kernels/philox.cuh`) implement the same function; tests check that the two
//! give identical words.
//!
//! # Keying
//!
//! `key = (seed mod 2^32, seed >> 32)`, `counter = (i, b, k, purpose << 24 | j)`: particle
//! (or draw slot) `i`, filter `b`, step `k`, the purpose of the draw and the index `j` of
//! the 4-word block within that purpose (see [`Purpose`]).
//!
//! # From words to numbers
//!
//! - uniform in f64: `u = (x + 0.5) 2^-32`, in f32: `u = (x >> 9 + 0.5) 2^-23`, exactly
//!   representable in both, strictly inside `(0, 1)`;
//! - Gaussian (Box-Muller): words `(x0, x1)` give `r = sqrt(-2 ln u0)`,
//!   `n0 = r cos(2 pi u1)`, `n1 = r sin(2 pi u1)`; `(x2, x3)` give `n2`, `n3` the same
//!   way. One block is four standard normals; the 32-bit uniforms bound a draw by
//!   `|n| < 6.8` (f64) or `5.8` (f32, 23-bit uniforms: the largest, `1 - 2^-24`, is still below 1);
//! - an index in `0..n`: `(x n) >> 32` (Lemire's multiply-shift: exact integer
//!   arithmetic, identical on every device).

use crate::linalg::Real;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox 4x32 with 10 rounds: the four output words of `counter` under `key`.
#[inline(always)]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for r in 0..10 {
        if r > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = (M0 as u64) * (c[0] as u64);
        let p1 = (M1 as u64) * (c[2] as u64);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// What a block of draws is for: the top 8 bits of counter word 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Purpose {
    /// The prior draw (step 0) and the process noise of the prediction into step `k`.
    Propagate = 0,
    /// Uniforms of the resampler at the end of step `k`.
    Resample = 1,
    /// Simulation: process noise of the true state.
    SimState = 2,
    /// Simulation: measurement noise.
    SimMeasure = 3,
    /// Simulation: whether a measurement is missing.
    SimMissing = 4,
}

/// The generator key of a seed.
#[inline(always)]
pub fn key_of(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// The counter of block `j` of the draws for `purpose` of particle `i`, filter `b`, step `k`.
#[inline(always)]
pub fn counter(i: u32, b: u32, k: u32, purpose: Purpose, j: u32) -> [u32; 4] {
    [i, b, k, ((purpose as u32) << 24) | (j & 0x00FF_FFFF)]
}

/// A uniform in `(0, 1)` from one word, in f64.
#[inline(always)]
pub fn uniform_f64(x: u32) -> f64 {
    (x as f64 + 0.5) * (1.0 / 4_294_967_296.0)
}

/// A uniform in `(0, 1)` from one word, in the working precision `T`.
#[inline(always)]
pub fn uniform<T: Real>(x: u32) -> T {
    if T::NAME == "f32" {
        T::of(((x >> 9) as f64 + 0.5) * (1.0 / 8_388_608.0))
    } else {
        T::of(uniform_f64(x))
    }
}

/// An index in `0..n` from one word (multiply-shift).
#[inline(always)]
pub fn index(x: u32, n: u32) -> u32 {
    (((x as u64) * (n as u64)) >> 32) as u32
}

/// Four standard normals from one block (Box-Muller on words (0,1) and (2,3)).
#[inline(always)]
pub fn normals4<T: Real>(w: [u32; 4]) -> [T; 4] {
    let two_pi = T::of(std::f64::consts::TAU);
    let m2 = T::of(-2.0);
    let r0 = (m2 * uniform::<T>(w[0]).ln()).sqrt();
    let t0 = two_pi * uniform::<T>(w[1]);
    let r1 = (m2 * uniform::<T>(w[2]).ln()).sqrt();
    let t1 = two_pi * uniform::<T>(w[3]);
    [r0 * t0.cos(), r0 * t0.sin(), r1 * t1.cos(), r1 * t1.sin()]
}

/// The stream of standard normals of one (particle, filter, step, purpose): block 0, 1,
/// ... four normals each, used in order.
pub struct Normals<T> {
    key: [u32; 2],
    ctr: [u32; 4],
    buf: [T; 4],
    used: usize,
}

impl<T: Real> Normals<T> {
    #[inline(always)]
    /// The stream of particle `i` of filter `b` at step `k` for `purpose` under generator `key`: the same numbers on any device and thread count.
    pub fn new(key: [u32; 2], i: u32, b: u32, k: u32, purpose: Purpose) -> Self {
        Normals {
            key,
            ctr: counter(i, b, k, purpose, 0),
            buf: [T::zero(); 4],
            used: 4,
        }
    }

    /// The next standard normal.
    #[inline(always)]
    pub fn draw(&mut self) -> T {
        if self.used == 4 {
            self.buf = normals4(philox4x32_10(self.ctr, self.key));
            self.ctr[3] = self.ctr[3].wrapping_add(1);
            self.used = 0;
        }
        let v = self.buf[self.used];
        self.used += 1;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's `kat_vectors` for philox4x32 10 (counter, key, result).
    #[test]
    fn known_answers() {
        let cases: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0; 4],
                [0; 2],
                [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
            ),
            (
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0],
                [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
            ),
        ];
        for (c, k, want) in cases {
            assert_eq!(philox4x32_10(c, k), want);
        }
    }

    #[test]
    fn uniforms_are_strictly_inside_the_unit_interval() {
        for x in [0u32, 1, 255, 256, u32::MAX - 1, u32::MAX] {
            let a = uniform_f64(x);
            let b: f32 = uniform(x);
            assert!(a > 0.0 && a < 1.0, "{x}: {a}");
            assert!(b > 0.0 && b < 1.0, "{x}: {b}");
        }
        assert_eq!(index(u32::MAX, 7), 6);
        assert_eq!(index(0, 7), 0);
    }

    #[test]
    fn normals_have_unit_moments() {
        // 4e5 draws: the sample mean has standard error 1.6e-3, the variance 2.2e-3.
        let key = key_of(42);
        let n = 100_000u32;
        let (mut s1, mut s2, mut s4) = (0.0f64, 0.0f64, 0.0f64);
        for i in 0..n {
            for v in normals4::<f64>(philox4x32_10(counter(i, 3, 7, Purpose::Propagate, 0), key)) {
                s1 += v;
                s2 += v * v;
                s4 += v * v * v * v;
            }
        }
        let m = 4.0 * n as f64;
        let (mean, var, kurt) = (s1 / m, s2 / m, s4 / m);
        assert!(mean.abs() < 5.0 * (1.0 / m).sqrt(), "mean {mean}");
        assert!((var - 1.0).abs() < 5.0 * (2.0 / m).sqrt(), "var {var}");
        assert!(
            (kurt - 3.0).abs() < 5.0 * (96.0 / m).sqrt(),
            "4th moment {kurt}"
        );
    }

    #[test]
    fn f32_and_f64_normals_agree_to_rounding() {
        let key = key_of(7);
        for i in 0..10_000 {
            let w = philox4x32_10(counter(i, 0, 1, Purpose::Propagate, 0), key);
            if w[0] < 1 << 16 || w[2] < 1 << 16 {
                // Near u = 0 the 9 bits f32 drops are a large relative change of u.
                continue;
            }
            let a = normals4::<f64>(w);
            let b = normals4::<f32>(w);
            for j in 0..4 {
                // f32 uniforms keep 23 of the 32 bits: a difference of at most 2^-23
                // relative in u, amplified near u -> 0 by the logarithm.
                assert!(
                    (a[j] - b[j] as f64).abs() < 1e-4 * (1.0 + a[j].abs()),
                    "{a:?} {b:?}"
                );
            }
        }
    }
}
