//! One chunk's weighted sums (the weights' total and running sums, the first and second
//! moments around the chunk's reference particle) in a fixed order: the general loop,
//! four lanes for four-component states, and the same lanes in AVX2 registers where the
//! processor has them. All give the same bits on any thread count (`super`'s
//! documentation).

use super::super::batch::as_f64;
use crate::linalg::Real;

/// [`chunk_sums`] of four-component particles: particle `i`'s terms go to lane `i % 4`
/// of each sum (a sum's four lanes wait on each other only once in four particles), and
/// the lanes are added `(0 + 1) + (2 + 3)` at the end; the running sums (and `S`, their
/// last) in order. [`sums4_avx2`] is the same, four lanes a register.
#[inline(always)]
pub(super) fn sums4_lanes<T: Real>(w: &[T], xs: &[T], c0: &[f64], p: &mut [f64], cdf: &mut [f64]) {
    let n = w.len();
    let mut s = 0.0f64;
    let mut s2 = [0.0f64; 4];
    let mut m1 = [[0.0f64; 4]; 4];
    let mut m2 = [[0.0f64; 4]; 10];
    for (j, ((wi, xi), o)) in w
        .iter()
        .zip(xs.chunks_exact(4))
        .zip(cdf.iter_mut())
        .enumerate()
    {
        let v = wi.to_f64();
        s += v;
        *o = s;
        let d = [0, 1, 2, 3].map(|a| xi[a].to_f64() - c0[a]);
        add_to_lane(j % 4, v, &d, &mut s2, &mut m1, &mut m2);
    }
    debug_assert_eq!(n * 4, xs.len());
    lane_totals(s, &s2, &m1, &m2, p);
}

/// Particle terms of weight `v` and offset `d` added to lane `l` of the sums of
/// [`sums4_lanes`].
#[inline(always)]
fn add_to_lane(
    l: usize,
    v: f64,
    d: &[f64; 4],
    s2: &mut [f64; 4],
    m1: &mut [[f64; 4]; 4],
    m2: &mut [[f64; 4]; 10],
) {
    s2[l] += v * v;
    let mut t = 0;
    for a in 0..4 {
        let vd = v * d[a];
        m1[a][l] += vd;
        for b in a..4 {
            m2[t][l] += vd * d[b];
            t += 1;
        }
    }
}

/// The sums of [`sums4_lanes`] from their lanes.
#[inline(always)]
fn lane_totals(s: f64, s2: &[f64; 4], m1: &[[f64; 4]; 4], m2: &[[f64; 4]; 10], p: &mut [f64]) {
    let lanes = |v: &[f64; 4]| (v[0] + v[1]) + (v[2] + v[3]);
    p[0] = s;
    p[1] = lanes(s2);
    for a in 0..4 {
        p[2 + a] = lanes(&m1[a]);
    }
    for (t, v) in m2.iter().enumerate() {
        p[6 + t] = lanes(v);
    }
}

/// [`sums4_lanes`] for f64 in explicit AVX2: four particles a register after a 4 x 4
/// transpose, the same operations in each lane, so the same bits.
///
/// # Safety
///
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn sums4_avx2(
    wv: &[f64],
    xs: &[f64],
    c0: &[f64],
    p: &mut [f64],
    cdf: &mut [f64],
) {
    use std::arch::x86_64::*;
    let n = wv.len();
    let whole = n / 4 * 4;
    assert!(xs.len() == 4 * n && cdf.len() == n && c0.len() == 4 && p.len() == 16);
    let c = [0, 1, 2, 3].map(|a| _mm256_set1_pd(c0[a]));
    let zero = _mm256_setzero_pd();
    let mut s = 0.0f64;
    let mut s2 = zero;
    let mut m1 = [zero; 4];
    let mut m2 = [zero; 10];
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 3 < whole <= n: the four particles' values lie inside the slices
        // (lengths asserted above); AVX2 is enabled here.
        unsafe {
            let w = _mm256_loadu_pd(wv.as_ptr().add(i));
            for l in 0..4 {
                s += *wv.get_unchecked(i + l);
                *cdf.get_unchecked_mut(i + l) = s;
            }
            let r = [0, 1, 2, 3].map(|l| _mm256_loadu_pd(xs.as_ptr().add((i + l) * 4)));
            let t0 = _mm256_unpacklo_pd(r[0], r[1]);
            let t1 = _mm256_unpackhi_pd(r[0], r[1]);
            let t2 = _mm256_unpacklo_pd(r[2], r[3]);
            let t3 = _mm256_unpackhi_pd(r[2], r[3]);
            let x = [
                _mm256_permute2f128_pd(t0, t2, 0x20),
                _mm256_permute2f128_pd(t1, t3, 0x20),
                _mm256_permute2f128_pd(t0, t2, 0x31),
                _mm256_permute2f128_pd(t1, t3, 0x31),
            ];
            let d = [0, 1, 2, 3].map(|a| _mm256_sub_pd(x[a], c[a]));
            s2 = _mm256_add_pd(s2, _mm256_mul_pd(w, w));
            let mut t = 0;
            for a in 0..4 {
                let vd = _mm256_mul_pd(w, d[a]);
                m1[a] = _mm256_add_pd(m1[a], vd);
                for b in a..4 {
                    m2[t] = _mm256_add_pd(m2[t], _mm256_mul_pd(vd, d[b]));
                    t += 1;
                }
            }
        }
        i += 4;
    }
    let st = |v: __m256d| {
        let mut a = [0.0f64; 4];
        // SAFETY: four f64 into an array of four; AVX2 is enabled here.
        unsafe { _mm256_storeu_pd(a.as_mut_ptr(), v) };
        a
    };
    let (mut s2a, mut m1a) = (st(s2), m1.map(st));
    let mut m2a = m2.map(st);
    for l in 0..n - whole {
        let j = whole + l;
        let w = wv[j];
        s += w;
        cdf[j] = s;
        let d = [0, 1, 2, 3].map(|a| xs[j * 4 + a] - c0[a]);
        add_to_lane(l, w, &d, &mut s2a, &mut m1a, &mut m2a);
    }
    lane_totals(s, &s2a, &m1a, &m2a, p);
}

/// One chunk's sums around `c0` (see [`stride`](super::stride)) and the running sums of its weights.
#[inline(always)]
pub(super) fn chunk_sums<T: Real>(w: &[T], xs: &[T], c0: &[f64], p: &mut [f64], cdf: &mut [f64]) {
    let nx = c0.len();
    p.iter_mut().for_each(|v| *v = 0.0);
    #[cfg(target_arch = "x86_64")]
    if let (4, Some(w), Some(xs), true) = (
        nx,
        as_f64(w),
        as_f64(xs),
        std::is_x86_feature_detected!("avx2"),
    ) {
        // SAFETY: the processor was checked for AVX2 above.
        unsafe { sums4_avx2(w, xs, c0, p, cdf) };
        return;
    }
    if nx == 4 {
        sums4_lanes(w, xs, c0, p, cdf);
        return;
    }
    let mut d = [0.0f64; 16];
    for ((&wi, xi), o) in w.iter().zip(xs.chunks_exact(nx)).zip(cdf.iter_mut()) {
        let v = wi.to_f64();
        p[0] += v;
        *o = p[0];
        p[1] += v * v;
        if nx > 16 {
            // Large states: no stack buffer, straight from the particle.
            let mut t = 2 + nx;
            for a in 0..nx {
                let da = xi[a].to_f64() - c0[a];
                p[2 + a] += v * da;
                for bb in a..nx {
                    p[t] += v * da * (xi[bb].to_f64() - c0[bb]);
                    t += 1;
                }
            }
            continue;
        }
        let d = &mut d[..nx];
        for a in 0..nx {
            d[a] = xi[a].to_f64() - c0[a];
            p[2 + a] += v * d[a];
        }
        let mut t = 2 + nx;
        for a in 0..nx {
            let vd = v * d[a];
            for bb in a..nx {
                p[t] += vd * d[bb];
                t += 1;
            }
        }
    }
}
