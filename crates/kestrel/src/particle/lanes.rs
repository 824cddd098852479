//! The particle filter's random numbers and the exponential of its weights for [`L`]
//! particles at once, written as lane loops that the compiler turns into vector
//! instructions (AVX2 where the processor has it, SSE2 otherwise: the same operations,
//! the same results).
//!
//! - [`philox_lanes`]: Philox 4x32-10 on `L` counters, word for word the same as
//!   [`philox4x32_10`](super::philox::philox4x32_10);
//! - [`normals_lanes_into`]: the ziggurat normals of
//!   [`normals_block`](super::philox::normals_block) from those words: the inner-rectangle
//!   points of all lanes without branches (the same product, so the same bits), then the
//!   few words that miss (1.5%) by the shared [`zig_slow`];
//! - [`exp_nonpositive`]: `exp(x)` for `x <= 0` (the max-shifted weights), after fdlibm
//!   (Sun Microsystems, 1993: "Permission to use, copy, modify, and distribute this
//!   software is freely granted, provided that this notice is preserved"), e_exp.c with
//!   its minimax coefficients, written without branches so that lanes can run together
//!   (error < 1 ulp).

use super::philox::{zig_slow, ziggurat, Purpose};

const _: () = assert!(4 * L <= 64, "a block's misses are bits of a u64");

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

/// [`philox_lanes`] in explicit AVX2, the same words: the lanes in two groups of eight,
/// one after the other, so that a group's state (eight registers) and the round's
/// temporaries stay in registers (the compiled lane loop over all sixteen lanes kept
/// part of its state on the stack).
///
/// # Safety
///
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn philox_lanes_avx2(c: &mut [[u64; L]; 4], key: [u32; 2]) {
    use std::arch::x86_64::*;
    const _: () = assert!(L.is_multiple_of(8), "lanes in groups of eight");
    let m0 = _mm256_set1_epi64x(M0 as i64);
    let m1 = _mm256_set1_epi64x(M1 as i64);
    let zero = _mm256_setzero_si256();
    for g in 0..L / 8 {
        // SAFETY: lanes 8g..8g + 8 < L of each word; AVX2 is enabled here.
        unsafe {
            let ld = |w: usize, h: usize| {
                _mm256_loadu_si256(c[w].as_ptr().add(8 * g + 4 * h) as *const __m256i)
            };
            let mut s = [
                [ld(0, 0), ld(0, 1)],
                [ld(1, 0), ld(1, 1)],
                [ld(2, 0), ld(2, 1)],
                [ld(3, 0), ld(3, 1)],
            ];
            let (mut k0, mut k1) = (key[0], key[1]);
            for r in 0..10 {
                if r > 0 {
                    k0 = k0.wrapping_add(W0);
                    k1 = k1.wrapping_add(W1);
                }
                let (kv0, kv1) = (_mm256_set1_epi64x(k0 as i64), _mm256_set1_epi64x(k1 as i64));
                for h in 0..2 {
                    // The products of the low 32 bits (the words are below 2^32).
                    let p0 = _mm256_mul_epu32(s[0][h], m0);
                    let p1 = _mm256_mul_epu32(s[2][h], m1);
                    let n0 =
                        _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), s[1][h]), kv0);
                    let n2 =
                        _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), s[3][h]), kv1);
                    s[0][h] = n0;
                    s[1][h] = _mm256_blend_epi32(p1, zero, 0xAA);
                    s[2][h] = n2;
                    s[3][h] = _mm256_blend_epi32(p0, zero, 0xAA);
                }
            }
            for (w, sw) in s.iter().enumerate() {
                for (h, v) in sw.iter().enumerate() {
                    _mm256_storeu_si256(c[w].as_mut_ptr().add(8 * g + 4 * h) as *mut __m256i, *v);
                }
            }
        }
    }
}

#[inline(always)]
fn select(c: bool, a: f64, b: f64) -> f64 {
    if c {
        a
    } else {
        b
    }
}

/// fdlibm's `ln 2` in two parts.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// `1.5 * 2^52`: adding and subtracting it rounds to an integer (to nearest).
const ROUND: f64 = 6_755_399_441_055_744.0;

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
/// filter `b` at step `k`, written into `n`: `n[w][l]` is normal `w` of lane `l`, the
/// values of [`normals_block`](super::philox::normals_block) on the same counters, bit
/// for bit; its first `n.len()` normals (at most 4; the words of the others are not
/// drawn to the end).
#[inline(always)]
pub fn normals_lanes_into(
    key: [u32; 2],
    first: u32,
    b: u32,
    k: u32,
    purpose: Purpose,
    j: u32,
    n: &mut [[f64; L]],
) {
    let c = words(key, first, b, k, purpose, j);
    let z = ziggurat();
    // Bit `w L + l`: word `w` of lane `l` missed its inner rectangle.
    let mut miss = 0u64;
    for (w, row) in n.iter_mut().enumerate().take(4) {
        for (l, out) in row.iter_mut().enumerate() {
            let v = c[w][l] as u32;
            let i = (v & 0xFF) as usize;
            let m = v >> 9;
            miss |= u64::from(m >= z.k[i]) << (w * L + l);
            let x = (m as f64 + 0.5) * z.w[i];
            *out = f64::from_bits(x.to_bits() | (((v >> 8) & 1) as u64) << 63);
        }
    }
    slow_path(key, first, b, k, purpose, j, &c, miss, n);
}

/// [`normals_lanes_into`] in explicit AVX2, the same values bit for bit: each row's table
/// entries are fetched by plain loads into two small arrays, then four lanes a register
/// compare, scale and sign them (`m + 1/2` as `(2^52 + m) - (2^52 - 1/2)`, exact). The
/// compiler's form of the lane loop extracted the indices through the stack.
///
/// # Safety
///
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn normals_lanes_into_avx2(
    key: [u32; 2],
    first: u32,
    b: u32,
    k: u32,
    purpose: Purpose,
    j: u32,
    n: &mut [[f64; L]],
) {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 is enabled here.
    let c = unsafe { words_avx2(key, first, b, k, purpose, j) };
    let z = ziggurat();
    let magic = _mm256_set1_epi64x(0x4330_0000_0000_0000);
    let off = _mm256_set1_pd(4_503_599_627_370_495.5);
    let sign = _mm256_set1_epi64x(i64::MIN);
    let mut miss = 0u64;
    for (w, row) in n.iter_mut().enumerate().take(4) {
        let (mut kk, mut ww) = ([0u64; L], [0f64; L]);
        for l in 0..L {
            let i = (c[w][l] & 0xFF) as usize;
            kk[l] = u64::from(z.k[i]);
            ww[l] = z.w[i];
        }
        for q in 0..L / 4 {
            // SAFETY: four u64 / f64 at 4q < L of arrays of L; AVX2 is enabled here.
            unsafe {
                let v = _mm256_loadu_si256(c[w].as_ptr().add(4 * q) as *const __m256i);
                let m = _mm256_srli_epi64(v, 9);
                let kq = _mm256_loadu_si256(kk.as_ptr().add(4 * q) as *const __m256i);
                // Both below 2^32: the signed comparison is the unsigned one.
                let inside = _mm256_cmpgt_epi64(kq, m);
                let out = !_mm256_movemask_pd(_mm256_castsi256_pd(inside)) as u64 & 0xF;
                miss |= out << (w * L + 4 * q);
                let mh = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(m, magic)), off);
                let x = _mm256_mul_pd(mh, _mm256_loadu_pd(ww.as_ptr().add(4 * q)));
                let s = _mm256_and_si256(_mm256_slli_epi64(v, 55), sign);
                let r = _mm256_or_pd(x, _mm256_castsi256_pd(s));
                _mm256_storeu_pd(row.as_mut_ptr().add(4 * q), r);
            }
        }
    }
    slow_path(key, first, b, k, purpose, j, &c, miss, n);
}

/// The Philox words of block `j` for the `L` slots from `first`.
#[inline(always)]
fn words(key: [u32; 2], first: u32, b: u32, k: u32, purpose: Purpose, j: u32) -> [[u64; L]; 4] {
    let mut c = counters(first, b, k, purpose, j);
    philox_lanes(&mut c, key);
    c
}

/// The Philox counters of block `j` for the `L` slots from `first`.
#[inline(always)]
fn counters(first: u32, b: u32, k: u32, purpose: Purpose, j: u32) -> [[u64; L]; 4] {
    let mut c = [[0u64; L]; 4];
    for l in 0..L {
        c[0][l] = first.wrapping_add(l as u32) as u64;
        c[1][l] = b as u64;
        c[2][l] = k as u64;
        c[3][l] = (((purpose as u32) << 24) | (j & 0x00FF_FFFF)) as u64;
    }
    c
}

/// [`words`] by [`philox_lanes_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn words_avx2(
    key: [u32; 2],
    first: u32,
    b: u32,
    k: u32,
    purpose: Purpose,
    j: u32,
) -> [[u64; L]; 4] {
    let mut c = counters(first, b, k, purpose, j);
    // SAFETY: AVX2 is enabled here (the caller's contract).
    unsafe { philox_lanes_avx2(&mut c, key) };
    c
}

/// The words that missed their inner rectangles (bits of `miss`), by [`zig_slow`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn slow_path(
    key: [u32; 2],
    first: u32,
    b: u32,
    k: u32,
    purpose: Purpose,
    j: u32,
    c: &[[u64; L]; 4],
    mut miss: u64,
    n: &mut [[f64; L]],
) {
    while miss != 0 {
        let bit = miss.trailing_zeros() as usize;
        miss &= miss - 1;
        let (w, l) = (bit / L, bit % L);
        n[w][l] = zig_slow(
            key,
            first.wrapping_add(l as u32),
            b,
            k,
            purpose as u32,
            (j & 0x00FF_FFFF) * 4 + w as u32,
            c[w][l] as u32,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::particle::philox::{counter, key_of, normals_block, philox4x32_10, zig_point};

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
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            let mut v = c;
            // SAFETY: the processor has AVX2 (checked above).
            unsafe { philox_lanes_avx2(&mut v, key) };
            let mut u = c;
            philox_lanes(&mut u, key);
            assert_eq!(u, v, "AVX2 Philox");
        }
        philox_lanes(&mut c, key);
        for (l, want) in want.iter().enumerate() {
            let got = [c[0][l], c[1][l], c[2][l], c[3][l]].map(|v| v as u32);
            assert_eq!(got, *want, "lane {l}");
            assert!(c.iter().all(|w| w[l] >> 32 == 0));
        }
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
    fn normals_are_the_reference_draws_bit_for_bit() {
        let key = key_of(0xDEAD_BEEF);
        let mut missed = 0;
        for first in (0..40_000u32).step_by(L) {
            for (b, k, j) in [(0u32, 1u32, 0u32), (3, 77, 2)] {
                let mut n = [[0.0f64; L]; 4];
                normals_lanes_into(key, first, b, k, Purpose::Propagate, j, &mut n);
                #[cfg(target_arch = "x86_64")]
                if std::is_x86_feature_detected!("avx2") {
                    let mut v = [[0.0f64; L]; 4];
                    // SAFETY: the processor has AVX2 (checked above).
                    unsafe {
                        normals_lanes_into_avx2(key, first, b, k, Purpose::Propagate, j, &mut v)
                    };
                    let same = |a: &[[f64; L]; 4], b: &[[f64; L]; 4]| {
                        a.iter()
                            .flatten()
                            .zip(b.iter().flatten())
                            .all(|(x, y)| x.to_bits() == y.to_bits())
                    };
                    assert!(same(&n, &v), "AVX2 normals differ at slot {first}");
                }
                for l in 0..L {
                    let ctr = counter(first + l as u32, b, k, Purpose::Propagate, j);
                    let want = normals_block::<f64>(ctr, key);
                    let words = philox4x32_10(ctr, key);
                    for w in 0..4 {
                        assert_eq!(n[w][l].to_bits(), want[w].to_bits(), "lane {l} word {w}");
                        missed += usize::from(!zig_point::<f64>(ziggurat(), words[w]).1);
                    }
                }
            }
        }
        // The words outside the inner rectangles (about 1.5% of 320,000) were taken.
        assert!(missed > 3000, "{missed}");
    }
}
