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
//! - Gaussian (ziggurat, Marsaglia & Tsang, "The ziggurat method for generating random
//!   variables", J. Stat. Softw. 2000, with 256 layers): one word gives one normal. Its
//!   low 8 bits pick a layer `i`, bit 8 the sign, the top 23 bits `m` a point
//!   `x = (m + 1/2) w_i` across the layer; `m < k_i` (98.5% of words) means the point
//!   lies inside the layer's inner rectangle and `x` is the draw, with no arithmetic but
//!   one product. Otherwise the wedge test (`f_i + u (f_{i-1} - f_i) < exp(-x^2/2)`, else
//!   a new word) or, in the base layer, Marsaglia's tail beyond `r = 3.654`
//!   (`t = -ln(u0)/r`, `y = -ln(u1)`, accept when `2y > t^2`) decide, with the uniforms
//!   of *retry* blocks `(i, b, k, (purpose | 0x80) << 24 | q << 8 | a)`, `q` the
//!   normal's index in its stream and `a` the attempt: still a pure function of where
//!   the draw is used. One block is four standard normals; the 23-bit `m` quantises a
//!   draw to 2^-23 of its layer's width (`w_i < 4.4e-7`).
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

/// Layers of the ziggurat.
pub const ZIG_LAYERS: usize = 256;
/// Where the base layer's tail starts (the 256-layer ziggurat's `r`).
pub const ZIG_R: f64 = 3.654_152_885_361_009;
/// The area of every layer (`r f(r)` plus the tail's mass, `f(x) = exp(-x^2/2)`).
const ZIG_V: f64 = 4.928_673_233_99e-3;
/// `2^23`: the values of `m` across a layer.
const ZIG_M: f64 = 8_388_608.0;

/// The ziggurat's tables (see the module's notes): layer `i` spans `[0, x_i)` in `x`
/// (`x_255 = r`, the base layer the virtual `x_0 = v / f(r)`), `[f(x_i), f(x_{i-1}))` in
/// height (`f(x_0) := 1` for the top layer, 1).
pub struct Ziggurat {
    /// `m < k[i]`: the point is inside layer `i`'s inner rectangle (`x < x_{i-1}`; the
    /// base layer: `x < r`).
    pub k: [u32; ZIG_LAYERS],
    /// `x_i / 2^23`: the draw is `(m + 1/2) w[i]`.
    pub w: [f64; ZIG_LAYERS],
    /// `f(x_i)`, `f[0] = 1`.
    pub f: [f64; ZIG_LAYERS],
}

/// The tables, built once (from `exp`, `ln` and `sqrt` of the host; the CUDA kernels are
/// compiled with these same numbers, so the two agree).
pub fn ziggurat() -> &'static Ziggurat {
    static Z: std::sync::OnceLock<Ziggurat> = std::sync::OnceLock::new();
    Z.get_or_init(|| {
        let f = |x: f64| (-0.5 * x * x).exp();
        let mut z = Ziggurat {
            k: [0; ZIG_LAYERS],
            w: [0.0; ZIG_LAYERS],
            f: [0.0; ZIG_LAYERS],
        };
        let q = ZIG_V / f(ZIG_R);
        z.k[0] = (ZIG_R / q * ZIG_M) as u32;
        z.w[0] = q / ZIG_M;
        z.f[0] = 1.0;
        let top = ZIG_LAYERS - 1;
        z.w[top] = ZIG_R / ZIG_M;
        z.f[top] = f(ZIG_R);
        let (mut x, mut outer) = (ZIG_R, ZIG_R);
        for i in (1..top).rev() {
            x = (-2.0 * (ZIG_V / x + f(x)).ln()).sqrt();
            z.k[i + 1] = (x / outer * ZIG_M) as u32;
            outer = x;
            z.f[i] = f(x);
            z.w[i] = x / ZIG_M;
        }
        z
    })
}

#[inline(always)]
fn zig_signed<T: Real>(x: T, w: u32) -> T {
    if w & 0x100 != 0 {
        -x
    } else {
        x
    }
}

/// The point of word `w` across its layer, `(m + 1/2) w_i` (exact in f32 too: `m + 1/2`
/// has 24 bits), and whether it is the draw (inside the inner rectangle).
#[inline(always)]
pub fn zig_point<T: Real>(z: &Ziggurat, w: u32) -> (T, bool) {
    let i = (w & 0xFF) as usize;
    let m = w >> 9;
    (
        zig_signed(T::of(m as f64 + 0.5) * T::of(z.w[i]), w),
        m < z.k[i],
    )
}

/// Counter word 3 of attempt `a` of normal `q` of a stream of `purpose`.
#[inline(always)]
fn retry_word(purpose: u32, q: u32, a: u32) -> u32 {
    ((purpose | 0x80) << 24) | ((q & 0xFFFF) << 8) | (a & 0xFF)
}

/// Normal `q` of the stream of (`i`, `b`, `k`, `purpose`) whose word `w` missed its
/// layer's inner rectangle: the wedge or tail tests with the uniforms of the retry
/// blocks (a new word after a rejected wedge point; the tail retries with new uniforms).
/// 256 attempts are never all rejected in practice (each is accepted with probability
/// above 1/2); if they were, the last point is returned.
#[cold]
#[inline(never)]
pub fn zig_slow<T: Real>(key: [u32; 2], i: u32, b: u32, k: u32, purpose: u32, q: u32, w: u32) -> T {
    let z = ziggurat();
    let mut w = w;
    let mut x = T::zero();
    for a in 0..256u32 {
        let (v, inner) = zig_point::<T>(z, w);
        if inner {
            return v;
        }
        x = v;
        let u = philox4x32_10([i, b, k, retry_word(purpose, q, a)], key);
        let layer = (w & 0xFF) as usize;
        if layer == 0 {
            let r = T::of(ZIG_R);
            let t = -uniform::<T>(u[0]).ln() / r;
            let y = -uniform::<T>(u[1]).ln();
            if y + y > t * t {
                return zig_signed(r + t, w);
            }
        } else {
            let (lo, hi) = (T::of(z.f[layer]), T::of(z.f[layer - 1]));
            let a2 = v * v * T::of(-0.5);
            if lo + uniform::<T>(u[0]) * (hi - lo) < a2.exp() {
                return v;
            }
            w = u[3];
        }
    }
    x
}

/// The four standard normals of block `ctr` (`j = ctr[3] & 0xFFFFFF`: normals
/// `4j..4j + 4` of their stream).
#[inline(always)]
pub fn normals_block<T: Real>(ctr: [u32; 4], key: [u32; 2]) -> [T; 4] {
    let w = philox4x32_10(ctr, key);
    let z = ziggurat();
    let q0 = (ctr[3] & 0x00FF_FFFF) * 4;
    let mut out = [T::zero(); 4];
    for t in 0..4 {
        let (v, inner) = zig_point::<T>(z, w[t]);
        out[t] = if inner {
            v
        } else {
            zig_slow(
                key,
                ctr[0],
                ctr[1],
                ctr[2],
                ctr[3] >> 24,
                q0 + t as u32,
                w[t],
            )
        };
    }
    out
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
            self.buf = normals_block(self.ctr, self.key);
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

    /// `erfc(x)` to a relative 1.2e-7 (Numerical Recipes' Chebyshev fit): enough for
    /// bin probabilities whose counts have a relative Monte Carlo error above 1e-3.
    fn erfc(x: f64) -> f64 {
        let z = x.abs();
        let t = 1.0 / (1.0 + 0.5 * z);
        let c = [
            -1.265_512_23,
            1.000_023_68,
            0.374_091_96,
            0.096_784_18,
            -0.186_288_06,
            0.278_868_07,
            -1.135_203_98,
            1.488_515_87,
            -0.822_152_23,
            0.170_872_77,
        ];
        let poly = c.iter().rev().fold(0.0, |acc, &ci| acc * t + ci);
        let r = t * (-z * z + poly).exp();
        if x >= 0.0 {
            r
        } else {
            2.0 - r
        }
    }

    fn phi(x: f64) -> f64 {
        0.5 * erfc(-x / std::f64::consts::SQRT_2)
    }

    /// 4e6 draws from 10^6 streams (the fast path, wedges and tails all taken).
    fn draws<T: Real>(seed: u64) -> Vec<f64> {
        let key = key_of(seed);
        let mut v = Vec::with_capacity(4_000_000);
        for i in 0..1_000_000u32 {
            let mut n = Normals::<T>::new(key, i, 3, 7, Purpose::Propagate);
            v.extend((0..4).map(|_| n.draw().to_f64()));
        }
        v
    }

    #[test]
    fn normals_are_standard_normal() {
        for f32_ in [false, true] {
            let v = if f32_ {
                draws::<f32>(42)
            } else {
                draws::<f64>(42)
            };
            let m = v.len() as f64;
            let (mut s1, mut s2, mut s4) = (0.0f64, 0.0f64, 0.0f64);
            for x in &v {
                s1 += x;
                s2 += x * x;
                s4 += x * x * x * x;
            }
            let (mean, var, kurt) = (s1 / m, s2 / m, s4 / m);
            assert!(mean.abs() < 5.0 * (1.0 / m).sqrt(), "mean {mean}");
            assert!((var - 1.0).abs() < 5.0 * (2.0 / m).sqrt(), "var {var}");
            assert!(
                (kurt - 3.0).abs() < 5.0 * (96.0 / m).sqrt(),
                "4th moment {kurt}"
            );
            // Chi-square against N(0, 1) on bins 0.2 wide over [-4.6, 4.6], split at
            // +-r (where the tail method takes over), and the two tails beyond.
            let mut edges: Vec<f64> = (-23..=23).map(|i| i as f64 * 0.2).collect();
            edges.extend([-ZIG_R, ZIG_R]);
            edges.sort_by(f64::total_cmp);
            let bins = edges.len() + 1;
            let mut count = vec![0u64; bins];
            for x in &v {
                count[edges.partition_point(|e| e <= x)] += 1;
            }
            let mut chi2 = 0.0;
            for (j, c) in count.iter().enumerate() {
                let lo = if j == 0 {
                    f64::NEG_INFINITY
                } else {
                    edges[j - 1]
                };
                let hi = if j == bins - 1 {
                    f64::INFINITY
                } else {
                    edges[j]
                };
                let p = phi(hi) - phi(lo);
                let e = p * m;
                chi2 += (*c as f64 - e).powi(2) / e;
            }
            // 48 degrees of freedom: mean 48, sd 9.8; 110 is far beyond p = 1e-6.
            assert!(
                chi2 < 110.0,
                "f32 {f32_}: chi-square {chi2} on {} bins",
                bins - 1
            );
            // The tails beyond 4 and 5 (expected 253 and 2.3 of 4e6) by their Poisson bounds.
            let t4 = v.iter().filter(|x| x.abs() > 4.0).count() as f64;
            let e4 = 2.0 * phi(-4.0) * m;
            assert!((t4 - e4).abs() < 5.0 * e4.sqrt(), "beyond 4: {t4} vs {e4}");
            let t5 = v.iter().filter(|x| x.abs() > 5.0).count();
            assert!(t5 <= 12, "beyond 5: {t5} (expected 2.3)");
            assert!(v.iter().all(|x| x.is_finite() && *x != 0.0));
        }
    }

    /// The words that miss their inner rectangles, through the slow path alone, against
    /// what the slow path must give for the whole to be N(0, 1): the normal's mass in a
    /// bin less the inner rectangles' (exact from the tables), over the missing share.
    /// Far more sensitive to the wedge and tail tests than a test of all draws.
    #[test]
    fn the_slow_path_gives_what_the_rectangles_leave() {
        let z = ziggurat();
        let mut edges: Vec<f64> = (1..=36).map(|i| i as f64 * 0.1).collect();
        edges.extend([ZIG_R, 3.8, 4.0, 4.3, 4.7, 5.2]);
        edges.sort_by(f64::total_cmp);
        let bins = edges.len() + 1;
        let lo_of = |j: usize| if j == 0 { 0.0 } else { edges[j - 1] };
        let hi_of = |j: usize| {
            if j == bins - 1 {
                f64::INFINITY
            } else {
                edges[j]
            }
        };
        // P(|x| in bin, fast path): layer i puts 1/256 x 1/2^23 on each (m + 1/2) w_i,
        // m < k_i (both signs together).
        let fast = |j: usize| -> f64 {
            let (lo, hi) = (lo_of(j), hi_of(j));
            let mut p = 0.0;
            for i in 0..ZIG_LAYERS {
                // m with lo <= (m + 1/2) w_i < hi, m < k_i.
                let m_lo = ((lo / z.w[i] - 0.5).ceil()).max(0.0);
                let m_hi = ((hi / z.w[i] - 0.5).ceil()).min(z.k[i] as f64);
                p += (m_hi - m_lo).max(0.0) / ZIG_M / 256.0;
            }
            p
        };
        let p_fast: f64 = (0..bins).map(fast).sum();
        let want: Vec<f64> = (0..bins)
            .map(|j| (2.0 * (phi(hi_of(j)) - phi(lo_of(j))) - fast(j)) / (1.0 - p_fast))
            .collect();
        assert!(want.iter().all(|p| *p > 0.0), "{want:?}");
        for f32_ in [false, true] {
            let key = key_of(11);
            let (mut count, mut neg, mut n) = (vec![0u64; bins], 0u64, 0u64);
            let mut i = 0u32;
            while n < 400_000 {
                let ctr = counter(i, 5, 2, Purpose::Propagate, 0);
                for (t, w) in philox4x32_10(ctr, key).into_iter().enumerate() {
                    if zig_point::<f64>(z, w).1 {
                        continue;
                    }
                    let x = if f32_ {
                        zig_slow::<f32>(key, i, 5, 2, 0, t as u32, w) as f64
                    } else {
                        zig_slow::<f64>(key, i, 5, 2, 0, t as u32, w)
                    };
                    count[edges.partition_point(|e| *e <= x.abs())] += 1;
                    neg += u64::from(x < 0.0);
                    n += 1;
                }
                i += 1;
            }
            let m = n as f64;
            let chi2: f64 = (0..bins)
                .map(|j| (count[j] as f64 - want[j] * m).powi(2) / (want[j] * m))
                .sum();
            // 41 degrees of freedom: mean 41, sd 9.1; 100 is far beyond p = 1e-6.
            assert!(chi2 < 100.0, "f32 {f32_}: chi-square {chi2} ({count:?})");
            assert!((neg as f64 / m - 0.5).abs() < 5.0 * (0.25 / m).sqrt());
        }
    }

    #[test]
    fn the_fast_path_takes_its_share_of_words() {
        // The inner rectangles cover sum(k)/2^23/256 of the words: 98.5% for 256 layers.
        let z = ziggurat();
        let share: f64 = z.k.iter().map(|&k| k as f64 / ZIG_M).sum::<f64>() / 256.0;
        assert!((share - 0.985).abs() < 0.001, "{share}");
        let key = key_of(9);
        let (mut inner, mut all) = (0u32, 0u32);
        for i in 0..100_000u32 {
            for w in philox4x32_10(counter(i, 0, 0, Purpose::Propagate, 0), key) {
                inner += u32::from(zig_point::<f64>(z, w).1);
                all += 1;
            }
        }
        let got = inner as f64 / all as f64;
        let sd = (share * (1.0 - share) / all as f64).sqrt();
        assert!((got - share).abs() < 5.0 * sd, "{got} vs {share}");
        // Every layer's inner rectangle lies under the density: f(x_{i-1}) >= f at the
        // rectangle's right edge, which is below x_{i-1}.
        for i in 2..ZIG_LAYERS {
            assert!(z.k[i] as f64 * z.w[i] <= z.w[i - 1] * ZIG_M * (1.0 + 1e-15));
            assert!(z.f[i] < z.f[i - 1]);
        }
    }

    #[test]
    fn f32_and_f64_normals_agree_to_rounding() {
        // Inside the inner rectangles the two are one product apart (f32 rounding); the
        // wedge and tail tests use 23-bit uniforms in f32 and may decide differently,
        // which must be rare.
        let key = key_of(7);
        let mut differ = 0;
        for i in 0..100_000 {
            let a = normals_block::<f64>(counter(i, 0, 1, Purpose::Propagate, 0), key);
            let b = normals_block::<f32>(counter(i, 0, 1, Purpose::Propagate, 0), key);
            for j in 0..4 {
                if (a[j] - b[j] as f64).abs() > 1e-6 * (1.0 + a[j].abs()) {
                    differ += 1;
                }
            }
        }
        assert!(
            differ <= 4,
            "{differ} of 400000 draws differ beyond f32 rounding"
        );
    }
}
