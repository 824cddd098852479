//! The particle filter's random numbers and transcendental functions for [`L`] particles
//! at once, written as lane loops that the compiler turns into vector instructions
//! (AVX2 where the processor has it, SSE2 otherwise: the same operations, the same
//! results).
//!
//! - [`philox_lanes`]: Philox 4x32-10 on `L` counters, word for word the same as
//!   [`philox4x32_10`](super::philox::philox4x32_10);
//! - [`normals_lanes`]: the Box-Muller Gaussians of [`normals4`](super::philox::normals4)
//!   from those words (same uniforms, same pairing of words), with the logarithm, sine
//!   and cosine below instead of the C library's: each within one unit in the last place,
//!   so a draw agrees with the reference to a few units in the last place of 1;
//! - [`exp_nonpositive`]: `exp(x)` for `x <= 0` (the max-shifted weights).
//!
//! The logarithm, the sine and cosine kernels and the exponential follow fdlibm
//! (Sun Microsystems, 1993: "Permission to use, copy, modify, and distribute this
//! software is freely granted, provided that this notice is preserved"), with its
//! minimax coefficients, written without branches so that lanes can run together:
//! `log` (e_log.c, error < 1 ulp), `sin`/`cos` on `|x| <= pi/4` (k_sin.c, k_cos.c as
//! improved in FreeBSD) after a Cody-Waite reduction by pi/2 in three parts, `exp`
//! (e_exp.c, error < 1 ulp).

use super::philox::Purpose;

/// Particles processed together.
pub const L: usize = 16;

const M0: u64 = 0xD251_1F53;
const M1: u64 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;
const LOW: u64 = 0xFFFF_FFFF;

/// Philox 4x32-10 on `L` counters: `c[w][l]` is word `w` of lane `l`'s counter on entry
/// and of its output block on return. Each 32-bit word is held in a 64-bit lane, so the
/// 32 x 32 -> 64-bit products and the halves need no shuffles.
#[inline(always)]
pub fn philox_lanes(c: &mut [[u64; L]; 4], key: [u32; 2]) {
    let (mut k0, mut k1) = (key[0], key[1]);
    for r in 0..10 {
        if r > 0 {
            k0 = k0.wrapping_add(W0);
            k1 = k1.wrapping_add(W1);
        }
        let (k0w, k1w) = (k0 as u64, k1 as u64);
        for l in 0..L {
            let p0 = M0 * (c[0][l] & LOW);
            let p1 = M1 * (c[2][l] & LOW);
            let n0 = (p1 >> 32) ^ c[1][l] ^ k0w;
            let n2 = (p0 >> 32) ^ c[3][l] ^ k1w;
            c[0][l] = n0;
            c[1][l] = p1 & LOW;
            c[2][l] = n2;
            c[3][l] = p0 & LOW;
        }
    }
}

/// `2^52` as a double: `from_bits(EXP52 | x) - 2^52` is the integer `x < 2^52` exactly.
const EXP52: u64 = 0x4330_0000_0000_0000;
const TWO52: f64 = 4_503_599_627_370_496.0;

/// The uniform of [`uniform_f64`](super::philox::uniform_f64), `(x + 0.5) 2^-32`, of a
/// 32-bit word held in a 64-bit lane.
#[inline(always)]
fn uniform(x: u64) -> f64 {
    ((f64::from_bits(EXP52 | x) - TWO52) + 0.5) * (1.0 / 4_294_967_296.0)
}

#[inline(always)]
fn select(c: bool, a: f64, b: f64) -> f64 {
    if c {
        a
    } else {
        b
    }
}

// fdlibm's constants, by their bits (the values its sources give in hexadecimal).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const LG1: f64 = f64::from_bits(0x3FE5_5555_5555_5593);
const LG2: f64 = f64::from_bits(0x3FD9_9999_9997_FA04);
const LG3: f64 = f64::from_bits(0x3FD2_4924_9422_9359);
const LG4: f64 = f64::from_bits(0x3FCC_71C5_1D8E_78AF);
const LG5: f64 = f64::from_bits(0x3FC7_4664_96CB_03DE);
const LG6: f64 = f64::from_bits(0x3FC3_9A09_D078_C69F);
const LG7: f64 = f64::from_bits(0x3FC2_F112_DF3E_5244);

/// `ln x` for a positive, normal, finite `x` (no special cases): `x = 2^k (1 + f)` with
/// `1 + f` in `[sqrt(2)/2, sqrt(2))`, `s = f / (2 + f)`,
/// `ln(1 + f) = f - hfsq + s (hfsq + R(s^2))` (fdlibm e_log.c).
#[inline(always)]
pub fn ln_positive(x: f64) -> f64 {
    let ui = x.to_bits();
    // The high word, moved so that the mantissa's reduction to [sqrt(2)/2, sqrt(2))
    // carries into the exponent.
    let hx = (ui >> 32) + (0x3ff0_0000 - 0x3fe6_a09e);
    let e = hx >> 20;
    let hm = (hx & 0x000f_ffff) + 0x3fe6_a09e;
    let m = f64::from_bits((hm << 32) | (ui & LOW));
    let f = m - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = t2 + t1;
    // k = e - 1023, as a double without an integer conversion.
    let dk = f64::from_bits(EXP52 | e) - (TWO52 + 1023.0);
    s * (hfsq + r) + dk * LN2_LO - hfsq + f + dk * LN2_HI
}

const S1: f64 = f64::from_bits(0xBFC5_5555_5555_5549);
const S2: f64 = f64::from_bits(0x3F81_1111_1110_F8A6);
const S3: f64 = f64::from_bits(0xBF2A_01A0_19C1_61D5);
const S4: f64 = f64::from_bits(0x3EC7_1DE3_57B1_FE7D);
const S5: f64 = f64::from_bits(0xBE5A_E5E6_8A2B_9CEB);
const S6: f64 = f64::from_bits(0x3DE5_D93A_5ACF_D57C);
const C1: f64 = f64::from_bits(0x3FA5_5555_5555_554C);
const C2: f64 = f64::from_bits(0xBF56_C16C_16C1_5177);
const C3: f64 = f64::from_bits(0x3EFA_01A0_19CB_1590);
const C4: f64 = f64::from_bits(0xBE92_7E4F_809C_52AD);
const C5: f64 = f64::from_bits(0x3E21_EE9E_BDB4_B1C4);
const C6: f64 = f64::from_bits(0xBDA8_FAE9_BE88_38D4);
/// 2/pi.
const INV_PIO2: f64 = f64::from_bits(0x3FE4_5F30_6DC9_C883);
/// The first 33 bits of pi/2.
const PIO2_1: f64 = f64::from_bits(0x3FF9_21FB_5440_0000);
/// The next 33 bits.
const PIO2_2: f64 = f64::from_bits(0x3DD0_B461_1A60_0000);
/// pi/2 - (PIO2_1 + PIO2_2).
const PIO2_2T: f64 = f64::from_bits(0x3BA3_198A_2E03_7073);
/// `1.5 * 2^52`: adding and subtracting it rounds to an integer (to nearest).
const ROUND: f64 = 6_755_399_441_055_744.0;

/// `sin(x + y)` for `|x| <= pi/4`, `y` the tail of `x`.
#[inline(always)]
fn kernel_sin(x: f64, y: f64) -> f64 {
    let z = x * x;
    let w = z * z;
    let r = S2 + z * (S3 + z * S4) + z * w * (S5 + z * S6);
    let v = z * x;
    x - ((z * (0.5 * y - v * r) - y) - v * S1)
}

/// `cos(x + y)` for `|x| <= pi/4`, `y` the tail of `x`.
#[inline(always)]
fn kernel_cos(x: f64, y: f64) -> f64 {
    let z = x * x;
    let w = z * z;
    let r = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    w + (((1.0 - w) - hz) + (z * r - x * y))
}

/// `(sin t, cos t)` for finite `0 <= t < 2^20 pi/2`: `t = n pi/2 + (y0 + y1)` with
/// `pi/2` in three parts (the first two of 33 bits, so `n` times them is exact), then
/// the kernels on `|y0| <= pi/4` and the quadrant `n mod 4`.
#[inline(always)]
pub fn sin_cos(t: f64) -> (f64, f64) {
    let big = t * INV_PIO2 + ROUND;
    let n = big.to_bits();
    let fnv = big - ROUND;
    let t1 = t - fnv * PIO2_1;
    let w = fnv * PIO2_2;
    let r = t1 - w;
    let w = fnv * PIO2_2T - ((t1 - r) - w);
    let y0 = r - w;
    let y1 = (r - y0) - w;
    let s = kernel_sin(y0, y1);
    let c = kernel_cos(y0, y1);
    let swap = n & 1 != 0;
    let (sv, cv) = (select(swap, c, s), select(swap, s, c));
    let neg_s = (n & 2) << 62;
    let neg_c = (n.wrapping_add(1) & 2) << 62;
    (
        f64::from_bits(sv.to_bits() ^ neg_s),
        f64::from_bits(cv.to_bits() ^ neg_c),
    )
}

/// 1/ln 2.
const INV_LN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
const P1: f64 = f64::from_bits(0x3FC5_5555_5555_553E);
const P2: f64 = f64::from_bits(0xBF66_C16C_16BE_BD93);
const P3: f64 = f64::from_bits(0x3F11_566A_AF25_DE2C);
const P4: f64 = f64::from_bits(0xBEBB_BD41_C5D2_6BF1);
const P5: f64 = f64::from_bits(0x3E66_3769_72BE_A4D0);

/// `exp(x)` for `x <= 0` (`-inf` included; 0 below -745.2, where it underflows):
/// `x = k ln 2 + r`, `|r| <= ln 2 / 2`, `exp(r) = 1 + r + r c(r) / (2 - c(r))`
/// (fdlibm e_exp.c), scaled by `2^k` in two halves so that subnormal results are
/// rounded once.
#[inline(always)]
pub fn exp_nonpositive(x: f64) -> f64 {
    let big = x * INV_LN2 + ROUND;
    let kf = big - ROUND;
    let hi = x - kf * LN2_HI;
    let lo = kf * LN2_LO;
    let r = hi - lo;
    let rr = r * r;
    let c = r - rr * (P1 + rr * (P2 + rr * (P3 + rr * (P4 + rr * P5))));
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    // -k >= 0 from the low bits of `big` (2^51 + k), in two halves.
    let nk = (1u64 << 51).wrapping_sub(big.to_bits() & ((1 << 52) - 1));
    let nk1 = nk >> 1;
    let nk2 = nk.wrapping_sub(nk1);
    let p1 = f64::from_bits((1023u64.wrapping_sub(nk1) & 0x7ff) << 52);
    let p2 = f64::from_bits((1023u64.wrapping_sub(nk2) & 0x7ff) << 52);
    select(x < -745.2, 0.0, y * p1 * p2)
}

/// Block `j` of the standard normals of `purpose` for the slots `first..first + L` of
/// filter `b` at step `k`: `n[w][l]` is normal `w` of lane `l`, the values of
/// [`normals4`](super::philox::normals4) on the same Philox words (to rounding).
#[inline(always)]
pub fn normals_lanes(
    key: [u32; 2],
    first: u32,
    b: u32,
    k: u32,
    purpose: Purpose,
    j: u32,
) -> [[f64; L]; 4] {
    let mut c = [[0u64; L]; 4];
    for l in 0..L {
        c[0][l] = first.wrapping_add(l as u32) as u64;
        c[1][l] = b as u64;
        c[2][l] = k as u64;
        c[3][l] = (((purpose as u32) << 24) | (j & 0x00FF_FFFF)) as u64;
    }
    philox_lanes(&mut c, key);
    let mut n = [[0.0f64; L]; 4];
    for p in 0..2 {
        for l in 0..L {
            let r = (-2.0 * ln_positive(uniform(c[2 * p][l]))).sqrt();
            let (s, co) = sin_cos(std::f64::consts::TAU * uniform(c[2 * p + 1][l]));
            n[2 * p][l] = r * co;
            n[2 * p + 1][l] = r * s;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::particle::philox::{counter, key_of, normals4, philox4x32_10, uniform_f64};

    /// Relative error in units of the last place of `want`.
    fn ulps(got: f64, want: f64) -> f64 {
        let ulp = f64::from_bits(want.abs().to_bits() + 1) - want.abs();
        (got - want).abs() / ulp
    }

    #[test]
    fn philox_lanes_are_philox() {
        let key = key_of(0x0123_4567_89AB_CDEF);
        let mut c = [[0u64; L]; 4];
        let mut want = Vec::new();
        for l in 0..L {
            let ctr = [
                l as u32 * 977 + 3,
                11 + l as u32,
                u32::MAX - l as u32,
                1 << 24 | 5,
            ];
            for w in 0..4 {
                c[w][l] = ctr[w] as u64;
            }
            want.push(philox4x32_10(ctr, key));
        }
        philox_lanes(&mut c, key);
        for (l, want) in want.iter().enumerate() {
            let got = [c[0][l], c[1][l], c[2][l], c[3][l]].map(|v| v as u32);
            assert_eq!(got, *want, "lane {l}");
            assert!(c.iter().all(|w| w[l] >> 32 == 0));
        }
    }

    #[test]
    fn uniforms_are_exact() {
        for x in [0u32, 1, 2, 12345, 1 << 31, u32::MAX - 1, u32::MAX] {
            assert_eq!(uniform(x as u64), uniform_f64(x));
        }
    }

    #[test]
    fn logarithm_within_one_ulp() {
        // Every uniform's exponent range, and the points around 1 and sqrt(2)/2.
        let mut worst = 0.0f64;
        let mut x = 1.0f64 / 4_294_967_296.0;
        while x < 1.0 {
            for m in [
                1.0,
                1.0 + 1e-9,
                1.1,
                1.2345,
                std::f64::consts::SQRT_2 - 1e-12,
                1.41422,
                1.5,
                1.7,
                1.99999,
            ] {
                let v = x * m;
                if v < 1.0 {
                    worst = worst.max(ulps(ln_positive(v), v.ln()));
                }
            }
            x *= 2.0;
        }
        let key = key_of(5);
        for i in 0..20_000u32 {
            for w in philox4x32_10(counter(i, 0, 0, Purpose::Propagate, 0), key) {
                let u = uniform_f64(w);
                worst = worst.max(ulps(ln_positive(u), u.ln()));
            }
        }
        assert_eq!(ln_positive(1.0), 0.0);
        // Both this and the C library's are within one ulp of the true value.
        assert!(worst <= 2.0, "{worst} ulps");
    }

    #[test]
    fn sine_and_cosine_within_an_ulp_of_one() {
        let key = key_of(6);
        let mut worst = 0.0f64;
        let mut check = |t: f64| {
            let (s, c) = sin_cos(t);
            // Absolute error in units of 2^-52: what matters for r cos(t), r sin(t).
            for (got, want) in [(s, t.sin()), (c, t.cos())] {
                let e = (got - want).abs() / f64::EPSILON;
                worst = worst.max(e);
                assert!(
                    e <= 1.0 || ulps(got, want) <= 2.0,
                    "t = {t}: {got} vs {want}"
                );
            }
        };
        for i in 0..20_000u32 {
            for w in philox4x32_10(counter(i, 1, 0, Purpose::Propagate, 0), key) {
                check(std::f64::consts::TAU * uniform_f64(w));
            }
        }
        // Quadrant boundaries and the ends of the range.
        for q in 0..=4 {
            let c = q as f64 * std::f64::consts::FRAC_PI_2;
            for d in [
                -1e-3,
                -1e-9,
                -1e-15,
                0.0,
                1e-15,
                1e-9,
                1e-3,
                std::f64::consts::FRAC_PI_4 - 1e-9,
            ] {
                if c + d >= 0.0 {
                    check(c + d);
                }
            }
        }
        check(std::f64::consts::TAU * uniform_f64(u32::MAX));
        check(std::f64::consts::TAU * uniform_f64(0));
        assert!(worst <= 1.0, "{worst}");
    }

    #[test]
    fn exponential_within_one_ulp_and_zero_below_its_range() {
        let mut worst = 0.0f64;
        let mut x = -1e-12;
        while x > -745.0 {
            for m in [1.0, 1.0001, 1.37, 1.5, 1.9] {
                let v = x * m;
                if v > -708.0 {
                    worst = worst.max(ulps(exp_nonpositive(v), v.exp()));
                } else {
                    // Subnormal results: within one subnormal step.
                    let d = (exp_nonpositive(v) - v.exp()).abs();
                    assert!(d <= f64::from_bits(1), "{v}: {d}");
                }
            }
            x *= 1.1;
        }
        for v in [0.0, -0.0, -0.5, -1.0, -0.34657359, -700.0] {
            worst = worst.max(ulps(exp_nonpositive(v), v.exp()));
        }
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpositive(-746.0), 0.0);
        assert!(worst <= 2.0, "{worst} ulps");
    }

    #[test]
    fn normals_are_the_reference_draws_to_rounding() {
        let key = key_of(0xDEAD_BEEF);
        let mut worst = 0.0f64;
        for first in (0..40_000u32).step_by(L) {
            for (b, k, j) in [(0u32, 1u32, 0u32), (3, 77, 2)] {
                let n = normals_lanes(key, first, b, k, Purpose::Propagate, j);
                for l in 0..L {
                    let want = normals4::<f64>(philox4x32_10(
                        counter(first + l as u32, b, k, Purpose::Propagate, j),
                        key,
                    ));
                    for w in 0..4 {
                        // r (< 6.7) times sin/cos: a few ulps of 1 at most, relative
                        // to max(1, |n|).
                        let e = (n[w][l] - want[w]).abs() / (f64::EPSILON * want[w].abs().max(1.0));
                        worst = worst.max(e);
                    }
                }
            }
        }
        assert!(worst <= 8.0, "{worst}");
    }
}
