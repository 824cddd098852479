// Shared definitions of every kestrel kernel module.
//
// The Rust side prepends a prelude that defines NX, NY, the scalar type `real`
// (float or double) and KS_BAKED. With KS_BAKED = 1 the prelude also defines the
// constexpr functions kF, kQ, kH, kR, ku, kd, kx0, kP0 that return the model's
// entries (row-major index); after full unrolling every entry is a compile-time
// constant, so products with structural zeros disappear and ones fold away. With
// KS_BAKED = 0 the matrices come from the kernel-parameter struct ModelParams, which
// lives in the constant bank: every thread of a warp reads the same address (a
// uniform load, no global traffic).

#define NP (NX * (NX + 1) / 2)
#define NYP (NY * (NY + 1) / 2)
#define KS_LN_2PI 1.8378770664093454835606594728112

// Packed lower-triangle index of (i, j) in a symmetric matrix (row-major lower part).
__host__ __device__ constexpr int pk(int i, int j) {
    return i >= j ? i * (i + 1) / 2 + j : j * (j + 1) / 2 + i;
}

// The model, in the same order as the Rust side packs it (cuda/gpu.rs, model_params).
struct ModelParams {
    real F[NX * NX];
    real Q[NX * NX];
    real H[NY * NX];
    real R[NY * NY];
    real u[NX];
    real d[NY];
    real x0[NX];
    real P0[NX * NX];
};

// Per-track inputs of a batch, each null where the model's own is used (kalman/inputs.rs,
// TrackInputs): prior means x0 [B][NX] and covariances P0 [B][NX][NX] (read once a
// track), and, in the structure-of-arrays layout so that a warp's loads of a step are
// contiguous (host_to_soa, layout.cu), control inputs u [T][NX][B] (entry k enters the
// prediction into step k), measurement offsets d [T][NY][B] and noise covariances
// r [T][NY * NY][B].
struct TrackIn {
    const real* x0;
    const real* P0;
    const real* u;
    const real* d;
    const real* r;
};

#if KS_BAKED
#define MF(i, j) ((real)kF((i) * NX + (j)))
#define NZF(i, j) (kF((i) * NX + (j)) != 0.0)
#define MQ(i, j) ((real)kQ((i) * NX + (j)))
#define MH(a, l) ((real)kH((a) * NX + (l)))
#define NZH(a, l) (kH((a) * NX + (l)) != 0.0)
#define MR(a, b) ((real)kR((a) * NY + (b)))
#define MU(i) ((real)ku(i))
#define MD(a) ((real)kd(a))
#define MX0(i) ((real)kx0(i))
#define MP0(i, j) ((real)kP0((i) * NX + (j)))
#else
#define MF(i, j) (mp.F[(i) * NX + (j)])
#define NZF(i, j) true
#define MQ(i, j) (mp.Q[(i) * NX + (j)])
#define MH(a, l) (mp.H[(a) * NX + (l)])
#define NZH(a, l) true
#define MR(a, b) (mp.R[(a) * NY + (b)])
#define MU(i) (mp.u[i])
#define MD(a) (mp.d[a])
#define MX0(i) (mp.x0[i])
#define MP0(i, j) (mp.P0[(i) * NX + (j)])
#endif

#define UNROLL _Pragma("unroll")

// Square root and logarithm of the working type, spelled out so that no overload
// resolution is left to the math headers.
__device__ __forceinline__ float ks_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double ks_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float ks_log(float x) { return logf(x); }
__device__ __forceinline__ double ks_log(double x) { return log(x); }

// a * b; with EXACT the product is rounded on its own and never contracted with the
// following addition into a fused multiply-add (NVRTC runs with --fmad=true). Code that
// must round exactly as the CPU reference does (which never fuses) multiplies with
// kmul<true>; kernels free to fuse pass false and read as plain products.
template <bool EXACT>
__device__ __forceinline__ float kmul(float a, float b) {
    return EXACT ? __fmul_rn(a, b) : a * b;
}
template <bool EXACT>
__device__ __forceinline__ double kmul(double a, double b) {
    return EXACT ? __dmul_rn(a, b) : a * b;
}

// Cholesky factorisation of the packed symmetric N x N matrix `a` in place (lower
// factor L, packed), with `inv[j] = 1 / L[j][j]`. Same column order as the CPU
// reference (linalg/chol.rs); EXACT: no fused multiply-adds (see kmul); DIV: the
// column below a pivot divided by it (linalg/chol.rs) rather than multiplied by its
// reciprocal (the SIMD lanes, kalman/lanes.rs). Returns false when a pivot is not
// positive.
template <bool EXACT>
struct KMul {
    __device__ __forceinline__ static real op(real a, real b) { return kmul<EXACT>(a, b); }
};
template <int N, bool EXACT = false, bool DIV = false>
__device__ __forceinline__ bool chol_packed(real* a, real* inv) {
    auto m = [&](int i, int j) -> real& { return a[pk(i, j)]; };
    return kst_chol<N, KST_PIVOT_FLAG, DIV, KMul<EXACT>>(m, m, inv, (real)0);
}

// Prediction x <- F x + u, P <- F P F^T + Q on the packed lower triangle of P
// (Kalman 1960; the order of the sums is the CPU reference's, kalman/step.rs); `u`, when
// not null, in place of the model's (component i at u[i * us]).
__device__ __forceinline__ void kf_predict(const ModelParams& mp, real* x, real* P, const real* u = nullptr,
                                           long long us = 1) {
    real xn[NX];
    real Pn[NP];
    UNROLL for (int i = 0; i < NX; ++i) {
        real s = u != nullptr ? u[i * us] : MU(i);
        UNROLL for (int l = 0; l < NX; ++l) if (NZF(i, l)) s += MF(i, l) * x[l];
        xn[i] = s;
        real fp[NX];  // row i of F P
        UNROLL for (int j = 0; j < NX; ++j) {
            real t = (real)0;
            UNROLL for (int l = 0; l < NX; ++l) if (NZF(i, l)) t += MF(i, l) * P[pk(l, j)];
            fp[j] = t;
        }
        UNROLL for (int j = 0; j <= i; ++j) {
            real t = MQ(i, j);
            UNROLL for (int l = 0; l < NX; ++l) if (NZF(j, l)) t += fp[l] * MF(j, l);
            Pn[pk(i, j)] = t;
        }
    }
    UNROLL for (int i = 0; i < NX; ++i) x[i] = xn[i];
    UNROLL for (int p = 0; p < NP; ++p) P[p] = Pn[p];
}

// The first half of a measurement update: y = z - H x - d (z may be anything where the
// caller will not correct), hp = H P, S = H P H^T + R (packed lower triangle), with R the
// model's or, when `r` is not null, the NY x NY row-major r; zhat (may be null) receives
// H x + d (d, when `d` is not null, from there). `r` and `d` hold their values `is`
// apart (1: contiguous; B: the structure-of-arrays inputs). EXACT and LANES as in
// kf_correct.
template <bool EXACT, bool LANES>
__device__ __forceinline__ void kf_innovation(const ModelParams& mp, const real* r, const real* z, const real* x,
                                              const real* P, real* zhat, real* y, real (*hp)[NX], real* S,
                                              const real* d = nullptr, long long is = 1) {
    UNROLL for (int a = 0; a < NY; ++a) {
        real hx = d != nullptr ? d[a * is] : MD(a);
        UNROLL for (int l = 0; l < NX; ++l) if (NZH(a, l) && (!EXACT || MH(a, l) != (real)0)) hx += kmul<EXACT>(MH(a, l), x[l]);
        if (zhat != nullptr) zhat[a] = hx;
        y[a] = z[a] - hx;
        UNROLL for (int j = 0; j < NX; ++j) {
            real t = (real)0;
            UNROLL for (int l = 0; l < NX; ++l) if (NZH(a, l) && (!EXACT || MH(a, l) != (real)0)) t += kmul<EXACT>(MH(a, l), P[pk(l, j)]);
            hp[a][j] = t;
        }
    }
    UNROLL for (int a = 0; a < NY; ++a) {
        UNROLL for (int c = 0; c <= a; ++c) {
            real t = r != nullptr ? r[(a * NY + c) * is] : MR(a, c);
            if (LANES) {
                UNROLL for (int l = 0; l < NX; ++l) if (NZH(c, l) && (!EXACT || MH(c, l) != (real)0)) t += kmul<EXACT>(hp[a][l], MH(c, l));
            } else {
                UNROLL for (int l = 0; l < NX; ++l) if (NZH(a, l) && (!EXACT || MH(a, l) != (real)0)) t += kmul<EXACT>(MH(a, l), hp[c][l]);
            }
            S[pk(a, c)] = t;
        }
    }
}

// The second half: S = L L^T in place, W^T = L^{-1} H P (in hp), e = L^{-1} y, x += W e,
// P -= W W^T, and the predictive log-likelihood -(NY ln 2pi + e^T e) / 2 - ln det L.
// Returns false when S is not positive definite.
//
// EXACT false (the batch kernels): products may fuse, reciprocal pivots, ln det L from
// pairs of pivots. EXACT true (the per-step kernels, tracker.cu): every operation is the
// CPU per-step API's for this size, products never fused (kmul<true>), so the state
// comes out as the CPU's bit for bit: with LANES (sizes the CPU's SIMD lanes cover) the
// order of kalman/lanes.rs, update_lanes (S from the rows of H P, reciprocal pivots,
// terms added to x and taken from P one by one, ln of the product of the pivots);
// otherwise that of kalman/step.rs, update_parts (S from the rows of H, divisions by the
// pivots, sums added to x and taken from P whole, the sum of the pivots' logarithms).
template <bool EXACT, bool LANES>
__device__ __forceinline__ bool kf_correct(real* S, real* y, real (*hp)[NX], real* x, real* P, real& ll) {
    constexpr bool DIV = EXACT && !LANES;
    real inv[NY];
    if (!chol_packed<NY, EXACT, DIV>(S, inv)) return false;
    UNROLL for (int a = 0; a < NY; ++a) {
        UNROLL for (int j = 0; j < NX; ++j) {
            real t = hp[a][j];
            UNROLL for (int k = 0; k < a; ++k) t -= kmul<EXACT>(S[pk(a, k)], hp[k][j]);
            hp[a][j] = DIV ? t / S[pk(a, a)] : kmul<EXACT>(t, inv[a]);
        }
        real t = y[a];
        UNROLL for (int k = 0; k < a; ++k) t -= kmul<EXACT>(S[pk(a, k)], y[k]);
        y[a] = DIV ? t / S[pk(a, a)] : kmul<EXACT>(t, inv[a]);
    }
    real logdet = (real)0;
    real maha = (real)0;
    if (LANES) {
        real det = (real)1;
        UNROLL for (int a = 0; a < NY; ++a) det = kmul<EXACT>(det, S[pk(a, a)]);
        logdet = ks_log(det);
    } else if (EXACT) {
        UNROLL for (int a = 0; a < NY; ++a) logdet += ks_log(S[pk(a, a)]);
    } else {
        UNROLL for (int a = 0; a < NY; a += 2) {
            if (a + 1 < NY) logdet += ks_log(S[pk(a, a)] * S[pk(a + 1, a + 1)]);
            else logdet += ks_log(S[pk(a, a)]);
        }
    }
    UNROLL for (int a = 0; a < NY; ++a) maha += kmul<EXACT>(y[a], y[a]);
    UNROLL for (int i = 0; i < NX; ++i) {
        if (LANES) {
            UNROLL for (int a = 0; a < NY; ++a) x[i] += kmul<EXACT>(hp[a][i], y[a]);
        } else {
            real t = (real)0;
            UNROLL for (int a = 0; a < NY; ++a) t += kmul<EXACT>(hp[a][i], y[a]);
            x[i] += t;
        }
    }
    UNROLL for (int i = 0; i < NX; ++i) {
        UNROLL for (int j = 0; j <= i; ++j) {
            real t;
            if (LANES) {
                t = P[pk(i, j)];
                UNROLL for (int a = 0; a < NY; ++a) t -= kmul<EXACT>(hp[a][i], hp[a][j]);
            } else {
                t = (real)0;
                UNROLL for (int a = 0; a < NY; ++a) t += kmul<EXACT>(hp[a][i], hp[a][j]);
                t = P[pk(i, j)] - t;
            }
            P[pk(i, j)] = t;
        }
    }
    ll = kmul<EXACT>(-((real)(NY * KS_LN_2PI) + maha), (real)0.5) - logdet;
    return true;
}

// Measurement update with z (no NaN): S = H P H^T + R = L L^T, W^T = L^{-1} H P,
// e = L^{-1} (z - H x - d), x += W e, P -= W W^T, and the predictive log-likelihood
// -(NY ln 2pi + e^T e) / 2 - sum ln L_aa (kalman/step.rs, `update`); `r` (NY x NY) and
// `d` (NY), when not null, in place of the model's, their values `is` apart. Returns
// false when S is not positive definite.
__device__ __forceinline__ bool kf_update(const ModelParams& mp, const real* z, real* x, real* P, real& ll,
                                          const real* r = nullptr, const real* d = nullptr, long long is = 1) {
    real y[NY];
    real hp[NY][NX];
    real S[NYP];
    kf_innovation<false, false>(mp, r, z, x, P, nullptr, y, hp, S, d, is);
    return kf_correct<false, false>(S, y, hp, x, P, ll);
}

// The model's prior, or the track's own where `x0` and `P0` are not null.
__device__ __forceinline__ void load_prior(const ModelParams& mp, real* x, real* P, const real* x0 = nullptr,
                                           const real* P0 = nullptr) {
    UNROLL for (int i = 0; i < NX; ++i) {
        x[i] = x0 != nullptr ? __ldg(x0 + i) : MX0(i);
        UNROLL for (int j = 0; j <= i; ++j) P[pk(i, j)] = P0 != nullptr ? __ldg(P0 + i * NX + j) : MP0(i, j);
    }
}

__device__ __forceinline__ bool any_nan(const real* z) {
    bool m = false;
    UNROLL for (int a = 0; a < NY; ++a) m = m || (z[a] != z[a]);
    return m;
}

// The first infinite component of a measurement, or -1 (x - x is NaN only for
// infinities and NaN; NaN itself is a missing value, not an error).
__device__ __forceinline__ int first_inf(const real* z) {
    int f = -1;
    UNROLL for (int a = NY - 1; a >= 0; --a) {
        if (z[a] == z[a] && z[a] - z[a] != (real)0) f = a;
    }
    return f;
}

// Rows of N values at addresses aligned to N * sizeof(real) (the host layout's rows):
// 16-byte vector accesses when N * sizeof(real) is a multiple of 16, so that one thread
// moves a whole row in few instructions (fewer L2 transactions per useful byte).
struct __align__(16) Vec16 {
    real v[16 / sizeof(real)];
};
#define VEC_N (16 / (int)sizeof(real))

template <int N>
__device__ __forceinline__ void store_row(real* dst, const real* v) {
    if ((N * sizeof(real)) % 16 == 0) {
        UNROLL for (int c = 0; c < N / VEC_N; ++c) {
            Vec16 t;
            UNROLL for (int e = 0; e < VEC_N; ++e) t.v[e] = v[c * VEC_N + e];
            reinterpret_cast<Vec16*>(dst)[c] = t;
        }
    } else {
        UNROLL for (int i = 0; i < N; ++i) dst[i] = v[i];
    }
}

template <int N>
__device__ __forceinline__ void load_row(const real* src, real* v) {
    if ((N * sizeof(real)) % 16 == 0) {
        UNROLL for (int c = 0; c < N / VEC_N; ++c) {
            const Vec16 t = reinterpret_cast<const Vec16*>(src)[c];
            UNROLL for (int e = 0; e < VEC_N; ++e) v[c * VEC_N + e] = t.v[e];
        }
    } else {
        UNROLL for (int i = 0; i < N; ++i) v[i] = src[i];
    }
}

// Stores a mean and a covariance (packed in registers) at step k of track b: SoA
// [S][NX][B] and packed [S][NP][B], or the host layout [B][S][NX] and full [B][S][NX][NX].
#define KEEP_ALL 0
#define KEEP_LAST 1

template <bool SOA>
__device__ __forceinline__ void store_state(real* mean, real* cov, long long B, long long S, long long b, long long k,
                                            const real* x, const real* P) {
    if (SOA) {
        UNROLL for (int i = 0; i < NX; ++i) mean[(k * NX + i) * B + b] = x[i];
        UNROLL for (int p = 0; p < NP; ++p) cov[(k * NP + p) * B + b] = P[p];
    } else {
        store_row<NX>(mean + (b * S + k) * NX, x);
        real* c = cov + (b * S + k) * (NX * NX);
        UNROLL for (int i = 0; i < NX; ++i) {
            real row[NX];
            UNROLL for (int j = 0; j < NX; ++j) row[j] = P[pk(i, j)];
            store_row<NX>(c + i * NX, row);
        }
    }
}

// Records the first failure (lowest code) of a positive-definiteness check.
__device__ __forceinline__ void report(unsigned long long* err, unsigned long long code) {
    atomicMin(err, code);
}
