//! The built-in kinds over many particles at once, in f64: the noise of [`L`] particles
//! drawn together ([`normals_lanes_into`]), then the prior draw or the motion, and the range
//! likelihood, in lane loops. The arithmetic is that of the per-particle methods of
//! [`PfModel`], operation for operation and in the same order; only the Gaussians'
//! logarithm, sine and cosine are computed differently (to rounding, see `lanes.rs`).

#[cfg(target_arch = "x86_64")]
use super::lanes::normals_lanes_into_avx2;
use super::lanes::{normals_lanes_into, L};
use super::models::{Batch, ParticleModel, PfKind, PfModel};
use super::philox::Purpose;
use crate::linalg::LN_2PI;
use std::any::TypeId;

/// Largest state (and so the most normals a particle draws) of the batch form.
const MAX_NX: usize = 16;

/// `s` as `f64` when `T` is `f64`.
pub(crate) fn as_f64<T: 'static>(s: &[T]) -> Option<&[f64]> {
    // SAFETY: T is f64 (same type, so same size, alignment and validity).
    (TypeId::of::<T>() == TypeId::of::<f64>())
        .then(|| unsafe { &*(s as *const [T] as *const [f64]) })
}

/// `s` as `f64` when `T` is `f64`.
pub(crate) fn as_f64_mut<T: 'static>(s: &mut [T]) -> Option<&mut [f64]> {
    // SAFETY: T is f64 (same type, so same size, alignment and validity).
    (TypeId::of::<T>() == TypeId::of::<f64>())
        .then(|| unsafe { &mut *(s as *mut [T] as *mut [f64]) })
}

/// Whether [`advance`] covers this model.
pub(crate) fn supports(model: &PfModel) -> bool {
    ParticleModel::<f64>::nx(model) <= MAX_NX && !matches!(model.kind, PfKind::Custom { .. })
}

/// Whether [`advance`] runs for `model` in precision `T` (f64 and a model it
/// [`supports`]).
pub(crate) fn covers<T: 'static>(model: &PfModel) -> bool {
    TypeId::of::<T>() == TypeId::of::<f64>() && supports(model)
}

/// Where the particles come from: `(src, anc)` for `src[anc[i]]`, `None` for `xs` itself.
type From<'a> = Option<(&'a [f64], &'a [u32])>;

/// [`ParticleModel::advance_batch`] (`from = None`) and
/// [`ParticleModel::advance_batch_from`] (the particles `src[anc[i]]` read where they
/// are, the moved ones written to `xs`) for a model and precision it [`covers`].
pub(crate) fn advance<T: 'static>(
    model: &PfModel,
    at: Batch,
    from: Option<(&[T], &[u32])>,
    xs: &mut [T],
    z: Option<(&[T], &mut [T])>,
) {
    let f64s = "advance: T is f64 (checked by covers)";
    let from = from.map(|(src, anc)| (as_f64(src).expect(f64s), anc));
    let xs = as_f64_mut(xs).expect(f64s);
    let z = z.map(|(zk, ll)| (as_f64(zk).expect(f64s), as_f64_mut(ll).expect(f64s)));
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor was checked for AVX2 above.
        unsafe { advance_avx2(model, at, from, xs, z) };
        return;
    }
    advance_lanes(model, at, from, xs, z)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn advance_avx2(
    model: &PfModel,
    at: Batch,
    from: From<'_>,
    xs: &mut [f64],
    z: Option<(&[f64], &mut [f64])>,
) {
    if let (PfKind::RangeOnly { .. }, true) = (&model.kind, at.k > 0) {
        // SAFETY: AVX2 is enabled in this function (checked by the caller).
        unsafe { range_only_avx2(model, at, from, xs, z) };
        return;
    }
    advance_lanes(model, at, from, xs, z)
}

/// The range-only model's step (constant-velocity motion, then the range likelihood) in
/// explicit AVX2, four particles a register: each particle's four values are one 32-byte
/// load, turned into four registers of one component each by a 4 x 4 transpose (and
/// back for the store), so that no value goes through memory between the read and the
/// write. The same operations in the same order as `propagate` and `log_likelihood`
/// (no fused multiply-adds), so the same bits; the noise as `normals_lanes_into`'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn range_only_avx2(
    model: &PfModel,
    at: Batch,
    from: From<'_>,
    xs: &mut [f64],
    mut z: Option<(&[f64], &mut [f64])>,
) {
    use std::arch::x86_64::*;
    let Batch { k, key, b, first } = at;
    let PfKind::RangeOnly { cv, sensors, .. } = &model.kind else {
        unreachable!("range_only_avx2: a range-only model")
    };
    let consts = Consts::of(model);
    let n = xs.len() / 4;
    let whole = n / L * L;
    // 4 x 4 transpose of f64 rows.
    #[inline(always)]
    fn transpose(r: [__m256d; 4]) -> [__m256d; 4] {
        // SAFETY: register operations only; AVX2 is enabled in the caller.
        unsafe {
            let t0 = _mm256_unpacklo_pd(r[0], r[1]);
            let t1 = _mm256_unpackhi_pd(r[0], r[1]);
            let t2 = _mm256_unpacklo_pd(r[2], r[3]);
            let t3 = _mm256_unpackhi_pd(r[2], r[3]);
            [
                _mm256_permute2f128_pd(t0, t2, 0x20),
                _mm256_permute2f128_pd(t1, t3, 0x20),
                _mm256_permute2f128_pd(t0, t2, 0x31),
                _mm256_permute2f128_pd(t1, t3, 0x31),
            ]
        }
    }
    let (a, bb, c) = consts.cv;
    let (va, vb, vc, vdt) = (
        _mm256_set1_pd(a),
        _mm256_set1_pd(bb),
        _mm256_set1_pd(c),
        _mm256_set1_pd(cv.dt),
    );
    let (lc, lh) = (
        _mm256_set1_pd(consts.range.0),
        _mm256_set1_pd(consts.range.1),
    );
    let mut noise = [[0.0f64; L]; 4];
    let mut g = 0;
    while g < whole {
        // SAFETY: AVX2 is enabled in this function (checked by the caller).
        unsafe {
            normals_lanes_into_avx2(
                key,
                first.wrapping_add(g as u32),
                b,
                k as u32,
                Purpose::Propagate,
                0,
                &mut noise,
            )
        };
        for q in 0..L / 4 {
            let i0 = g + 4 * q;
            // SAFETY: i0 + 3 < whole <= n: every index below lies inside its slice
            // (ancestors index particles of `src`, checked by the caller's contract and
            // asserted here).
            unsafe {
                let rows: [__m256d; 4] = match from {
                    Some((src, anc)) => [0, 1, 2, 3].map(|t| {
                        let p = anc[i0 + t] as usize * 4;
                        assert!(p + 4 <= src.len());
                        _mm256_loadu_pd(src.as_ptr().add(p))
                    }),
                    None => [0, 1, 2, 3].map(|t| _mm256_loadu_pd(xs.as_ptr().add((i0 + t) * 4))),
                };
                let [x0, x1, x2, x3] = transpose(rows);
                let nz = [0, 1, 2, 3].map(|w| _mm256_loadu_pd(noise[w].as_ptr().add(4 * q)));
                // x[0] + dt x[1] + a n[0], x[1] + b n[0] + c n[1], and the same on the
                // second axis, from the values before the step.
                let y0 = _mm256_add_pd(
                    _mm256_add_pd(x0, _mm256_mul_pd(vdt, x1)),
                    _mm256_mul_pd(va, nz[0]),
                );
                let y1 = _mm256_add_pd(
                    _mm256_add_pd(x1, _mm256_mul_pd(vb, nz[0])),
                    _mm256_mul_pd(vc, nz[1]),
                );
                let y2 = _mm256_add_pd(
                    _mm256_add_pd(x2, _mm256_mul_pd(vdt, x3)),
                    _mm256_mul_pd(va, nz[2]),
                );
                let y3 = _mm256_add_pd(
                    _mm256_add_pd(x3, _mm256_mul_pd(vb, nz[2])),
                    _mm256_mul_pd(vc, nz[3]),
                );
                let out = transpose([y0, y1, y2, y3]);
                for (t, r) in out.into_iter().enumerate() {
                    _mm256_storeu_pd(xs.as_mut_ptr().add((i0 + t) * 4), r);
                }
                if let Some((zk, ll)) = &mut z {
                    let mut acc = _mm256_setzero_pd();
                    for (sp, &zs) in sensors.iter().zip(zk.iter()) {
                        let dx = _mm256_sub_pd(y0, _mm256_set1_pd(sp[0]));
                        let dy = _mm256_sub_pd(y2, _mm256_set1_pd(sp[1]));
                        let r2 = _mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy));
                        let y = _mm256_sub_pd(_mm256_set1_pd(zs), _mm256_sqrt_pd(r2));
                        let t = _mm256_sub_pd(lc, _mm256_mul_pd(_mm256_mul_pd(lh, y), y));
                        acc = _mm256_add_pd(acc, t);
                    }
                    assert!(i0 + 4 <= ll.len());
                    _mm256_storeu_pd(ll.as_mut_ptr().add(i0), acc);
                }
            }
        }
        g += L;
    }
    if whole < n {
        let from = from.map(|(src, anc)| (src, &anc[whole..]));
        let z = z.map(|(zk, ll)| (zk, &mut ll[whole..]));
        let at = Batch {
            first: first.wrapping_add(whole as u32),
            ..at
        };
        advance_lanes(model, at, from, &mut xs[whole * 4..], z);
    }
}

/// A state per lane: `x[a][l]` is component `a` of lane `l`.
type Lanes<const R: usize> = [[f64; L]; R];

#[inline(always)]
fn advance_lanes(
    model: &PfModel,
    at: Batch,
    from: From<'_>,
    xs: &mut [f64],
    z: Option<(&[f64], &mut [f64])>,
) {
    // A state size known at compile time lets the loads and stores of the particles be
    // fixed shuffles and the small loops unroll.
    match ParticleModel::<f64>::nx(model) {
        1 => advance_n::<1, 1>(model, at, from, xs, z),
        2 => advance_n::<2, 2>(model, at, from, xs, z),
        4 => advance_n::<4, 4>(model, at, from, xs, z),
        _ => advance_n::<0, MAX_NX>(model, at, from, xs, z),
    }
}

/// The batch of `xs` with `NX` components (0: the model's `nx`, at most `R`).
#[inline(always)]
fn advance_n<const NX: usize, const R: usize>(
    model: &PfModel,
    at: Batch,
    from: From<'_>,
    xs: &mut [f64],
    mut z: Option<(&[f64], &mut [f64])>,
) {
    let Batch { k, key, b, first } = at;
    let nx = if NX > 0 {
        NX
    } else {
        ParticleModel::<f64>::nx(model)
    };
    let n = xs.len() / nx;
    let blocks = nx.div_ceil(4);
    let consts = Consts::of(model);
    let mut g = 0;
    while g < n {
        let m = (n - g).min(L);
        let mut x: Lanes<R> = [[0.0; L]; R];
        match from {
            Some((src, anc)) if m == L => {
                for l in 0..L {
                    let p = anc[g + l] as usize * nx;
                    for a in 0..nx {
                        x[a][l] = src[p + a];
                    }
                }
            }
            Some((src, anc)) => {
                for l in 0..m {
                    let p = anc[g + l] as usize * nx;
                    for a in 0..nx {
                        x[a][l] = src[p + a];
                    }
                }
            }
            None if m == L => {
                for l in 0..L {
                    for a in 0..nx {
                        x[a][l] = xs[(g + l) * nx + a];
                    }
                }
            }
            None => {
                for l in 0..m {
                    for a in 0..nx {
                        x[a][l] = xs[(g + l) * nx + a];
                    }
                }
            }
        }
        let mut noise: Lanes<R> = [[0.0; L]; R];
        for j in 0..blocks {
            let rows = &mut noise[(4 * j).min(R)..(4 * j + 4).min(R)];
            normals_lanes_into(
                key,
                first.wrapping_add(g as u32),
                b,
                k as u32,
                Purpose::Propagate,
                j as u32,
                rows,
            );
        }
        if k == 0 {
            prior(model, nx, &mut x, &noise);
        } else {
            propagate(model, &consts, nx, &mut x, &noise);
        }
        if m == L {
            for l in 0..L {
                for a in 0..nx {
                    xs[(g + l) * nx + a] = x[a][l];
                }
            }
        } else {
            for l in 0..m {
                for a in 0..nx {
                    xs[(g + l) * nx + a] = x[a][l];
                }
            }
        }
        if let Some((zk, ll)) = &mut z {
            log_likelihood(model, &consts, k, nx, &x, zk, &mut ll[g..g + m]);
        }
        g += L;
    }
}

/// A batch's constants of the model, worked out once (not once per [`L`] particles).
struct Consts {
    /// The constant-velocity motion's noise factor ([`ConstantVelocity::noise_factor`](super::models::ConstantVelocity::noise_factor)).
    cv: (f64, f64, f64),
    /// The range likelihood's `-(ln 2 pi + ln r) / 2` and `1 / (2 r)`.
    range: (f64, f64),
}

impl Consts {
    fn of(model: &PfModel) -> Self {
        let cv = match &model.kind {
            PfKind::RangeOnly { cv, .. }
            | PfKind::BearingsOnly { cv, .. }
            | PfKind::RangeBearing { cv, .. } => cv.noise_factor(),
            _ => (0.0, 0.0, 0.0),
        };
        let range = match &model.kind {
            PfKind::RangeOnly { r, .. } => (-0.5 * (LN_2PI + r.ln()), 0.5 / r),
            _ => (0.0, 0.0),
        };
        Consts { cv, range }
    }
}

/// `sample_prior` of [`PfModel`], lane by lane.
#[inline(always)]
fn prior<const R: usize>(model: &PfModel, nx: usize, x: &mut Lanes<R>, noise: &Lanes<R>) {
    match (&model.kind, &model.prior) {
        (PfKind::StochasticVolatility { mu, phi, sigma }, _) => {
            let sd = sigma / (1.0 - phi * phi).sqrt();
            for l in 0..L {
                x[0][l] = mu + sd * noise[0][l];
            }
        }
        (_, Some(p)) => {
            for i in 0..nx {
                let mut acc = [p.x0[i]; L];
                for j in 0..nx {
                    let s = p.sqrt_p0[i * nx + j];
                    if s != 0.0 {
                        for l in 0..L {
                            acc[l] += s * noise[j][l];
                        }
                    }
                }
                x[i] = acc;
            }
        }
        (_, None) => {
            for row in x.iter_mut().take(nx) {
                *row = [0.0; L];
            }
        }
    }
}

/// `propagate` of [`PfModel`], lane by lane.
#[inline(always)]
fn propagate<const R: usize>(
    model: &PfModel,
    consts: &Consts,
    nx: usize,
    x: &mut Lanes<R>,
    n: &Lanes<R>,
) {
    match &model.kind {
        PfKind::Linear(lg) => {
            let prev = *x;
            for i in 0..nx {
                let mut acc = [lg.u[i]; L];
                for j in 0..nx {
                    let f = lg.f[i * nx + j];
                    let s = lg.sqrt_q[i * nx + j];
                    if f != 0.0 && s != 0.0 {
                        for l in 0..L {
                            acc[l] += f * prev[j][l];
                            acc[l] += s * n[j][l];
                        }
                    } else if f != 0.0 {
                        for l in 0..L {
                            acc[l] += f * prev[j][l];
                        }
                    } else if s != 0.0 {
                        for l in 0..L {
                            acc[l] += s * n[j][l];
                        }
                    }
                }
                x[i] = acc;
            }
        }
        PfKind::RangeOnly { cv, .. }
        | PfKind::BearingsOnly { cv, .. }
        | PfKind::RangeBearing { cv, .. } => {
            let (a, bb, c) = consts.cv;
            let dt = cv.dt;
            for l in 0..L {
                x[0][l] = x[0][l] + dt * x[1][l] + a * n[0][l];
                x[1][l] = x[1][l] + bb * n[0][l] + c * n[1][l];
                x[2][l] = x[2][l] + dt * x[3][l] + a * n[2][l];
                x[3][l] = x[3][l] + bb * n[2][l] + c * n[3][l];
            }
        }
        PfKind::StochasticVolatility { mu, phi, sigma } => {
            for l in 0..L {
                x[0][l] = mu + phi * (x[0][l] - mu) + sigma * n[0][l];
            }
        }
        PfKind::Custom { .. } => {}
    }
}

/// `log_likelihood` of [`PfModel`]: the range sensors lane by lane, the other kinds
/// particle by particle.
#[inline(always)]
fn log_likelihood<const R: usize>(
    model: &PfModel,
    consts: &Consts,
    k: usize,
    nx: usize,
    x: &Lanes<R>,
    z: &[f64],
    ll: &mut [f64],
) {
    match &model.kind {
        PfKind::RangeOnly { sensors, .. } => {
            let (c, h) = consts.range;
            let mut acc = [0.0f64; L];
            for (s, &zs) in sensors.iter().zip(z) {
                for l in 0..L {
                    let dx = x[0][l] - s[0];
                    let dy = x[2][l] - s[1];
                    let y = zs - (dx * dx + dy * dy).sqrt();
                    acc[l] += c - h * y * y;
                }
            }
            if let Ok(ll) = <&mut [f64; L]>::try_from(&mut *ll) {
                *ll = acc;
            } else {
                ll.copy_from_slice(&acc[..ll.len()]);
            }
        }
        _ => {
            let mut xl = [0.0f64; MAX_NX];
            for (l, o) in ll.iter_mut().enumerate() {
                for a in 0..nx {
                    xl[a] = x[a][l];
                }
                *o = ParticleModel::<f64>::log_likelihood(model, k, &xl[..nx], z);
            }
        }
    }
}
