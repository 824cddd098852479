// The batched Rauch-Tung-Striebel smoother: one thread per track, backwards in time,
// the smoothed state of step k+1 carried in registers (Rauch, Tung & Striebel 1965;
// Sarkka, Bayesian Filtering and Smoothing, Theorem 8.2; same sums in the same order as
// kalman/dense.rs, smooth_track):
//   x_{k+1|k} = F x_k + u,  P_{k+1|k} = F P_k F^T + Q = L L^T,
//   C_k^T = P_{k+1|k}^{-1} F P_k          (two triangular solves, no inverse),
//   x^s_k = x_k + C_k (x^s_{k+1} - x_{k+1|k}),
//   P^s_k = P_k + C_k (P^s_{k+1} - P_{k+1|k}) C_k^T.
// Input and output in the host layout [B][T][NX], [B][T][NX][NX] (rts_smooth) or in the
// filter's structure-of-arrays layout [T][NX][B], packed [T][NP][B] (rts_smooth_soa);
// `out` may alias `in` (each thread reads step k before it writes step k). A failure
// stores min(b * T + k + 1). The *_in kernels take per-track control inputs u
// [T][NX][B] (structure of arrays; entry k + 1 enters x_{k+1|k}) in place of the model's.

template <bool SOA>
__device__ __forceinline__ void load_est(const real* mean, const real* cov, long long B, long long T, long long b,
                                         long long k, real* x, real* P) {
    if (SOA) {
        UNROLL for (int i = 0; i < NX; ++i) x[i] = mean[(k * NX + i) * B + b];
        UNROLL for (int p = 0; p < NP; ++p) P[p] = cov[(k * NP + p) * B + b];
        return;
    }
    load_row<NX>(mean + (b * T + k) * NX, x);
    const real* c = cov + (b * T + k) * (NX * NX);
    UNROLL for (int i = 0; i < NX; ++i) {
        real row[NX];
        load_row<NX>(c + i * NX, row);
        UNROLL for (int j = 0; j <= i; ++j) P[pk(i, j)] = row[j];
    }
}

template <bool SOA>
__device__ __forceinline__ void rts_body(const ModelParams& mp, const real* mean_in, const real* cov_in,
                                         real* mean_out, real* cov_out, int nb, int steps, unsigned long long* err,
                                         const real* u = nullptr) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    const long long B = nb;
    const long long T = steps;
    real xs[NX];
    real Ps[NP];
    load_est<SOA>(mean_in, cov_in, B, T, b, T - 1, xs, Ps);
    store_state<SOA>(mean_out, cov_out, B, T, b, T - 1, xs, Ps);
    const real* ub = u != nullptr ? u + b : nullptr;
    for (long long k = T - 2; k >= 0; --k) {
        real x[NX];
        real P[NP];
        load_est<SOA>(mean_in, cov_in, B, T, b, k, x, P);
        const real* uk = ub != nullptr ? ub + (k + 1) * NX * B : nullptr;
        real xp[NX];
        real fp[NX][NX];  // F P_k
        UNROLL for (int i = 0; i < NX; ++i) {
            real s = uk != nullptr ? __ldg(uk + i * B) : MU(i);
            UNROLL for (int j = 0; j < NX; ++j) if (NZF(i, j)) s += MF(i, j) * x[j];
            xp[i] = s;
            UNROLL for (int j = 0; j < NX; ++j) {
                real t = (real)0;
                UNROLL for (int l = 0; l < NX; ++l) if (NZF(i, l)) t += MF(i, l) * P[pk(l, j)];
                fp[i][j] = t;
            }
        }
        real pp[NP];  // P_{k+1|k}
        UNROLL for (int i = 0; i < NX; ++i) {
            UNROLL for (int j = 0; j <= i; ++j) {
                real t = MQ(i, j);
                UNROLL for (int l = 0; l < NX; ++l) if (NZF(j, l)) t += fp[i][l] * MF(j, l);
                pp[pk(i, j)] = t;
            }
        }
        real L[NP];
        UNROLL for (int p = 0; p < NP; ++p) L[p] = pp[p];
        real inv[NX];
        if (!chol_packed<NX>(L, inv)) {
            report(err, (unsigned long long)(b * T + k + 1));
            return;
        }
        // ct = C^T: solve L Y = F P_k column by column, then L^T ct = Y.
        UNROLL for (int c = 0; c < NX; ++c) {
            UNROLL for (int i = 0; i < NX; ++i) {
                real s = fp[i][c];
                UNROLL for (int k2 = 0; k2 < i; ++k2) s -= L[pk(i, k2)] * fp[k2][c];
                fp[i][c] = s * inv[i];
            }
            UNROLL for (int i = NX - 1; i >= 0; --i) {
                real s = fp[i][c];
                UNROLL for (int k2 = i + 1; k2 < NX; ++k2) s -= L[pk(k2, i)] * fp[k2][c];
                fp[i][c] = s * inv[i];
            }
        }
        // fp now holds ct = C^T.
        real dx[NX];
        UNROLL for (int i = 0; i < NX; ++i) dx[i] = xs[i] - xp[i];
        UNROLL for (int i = 0; i < NX; ++i) {
            real s = (real)0;
            UNROLL for (int j = 0; j < NX; ++j) s += fp[j][i] * dx[j];
            xs[i] = x[i] + s;
        }
        // t = (P^s_{k+1} - P_{k+1|k}) C^T ; P^s_k = P_k + C t (lower triangle).
        real t[NX][NX];
        UNROLL for (int i = 0; i < NX; ++i) {
            UNROLL for (int j = 0; j < NX; ++j) {
                real s = (real)0;
                UNROLL for (int l = 0; l < NX; ++l) s += (Ps[pk(i, l)] - pp[pk(i, l)]) * fp[l][j];
                t[i][j] = s;
            }
        }
        UNROLL for (int i = 0; i < NX; ++i) {
            UNROLL for (int j = 0; j <= i; ++j) {
                real s = (real)0;
                UNROLL for (int l = 0; l < NX; ++l) s += fp[l][i] * t[l][j];
                Ps[pk(i, j)] = P[pk(i, j)] + s;
            }
        }
        store_state<SOA>(mean_out, cov_out, B, T, b, k, xs, Ps);
    }
}

#define RTS_ARGS const __grid_constant__ ModelParams mp, const real* mean_in, const real* cov_in, real* mean_out, \
    real* cov_out, int nb, int steps, unsigned long long* err

#if !KS_INPUTS
extern "C" __global__ void __launch_bounds__(128) rts_smooth(RTS_ARGS) {
    rts_body<false>(mp, mean_in, cov_in, mean_out, cov_out, nb, steps, err);
}
extern "C" __global__ void __launch_bounds__(128) rts_smooth_soa(RTS_ARGS) {
    rts_body<true>(mp, mean_in, cov_in, mean_out, cov_out, nb, steps, err);
}
#else
extern "C" __global__ void __launch_bounds__(128) rts_smooth_in(RTS_ARGS, const real* u) {
    rts_body<false>(mp, mean_in, cov_in, mean_out, cov_out, nb, steps, err, u);
}
extern "C" __global__ void __launch_bounds__(128) rts_smooth_soa_in(RTS_ARGS, const real* u) {
    rts_body<true>(mp, mean_in, cov_in, mean_out, cov_out, nb, steps, err, u);
}
#endif
