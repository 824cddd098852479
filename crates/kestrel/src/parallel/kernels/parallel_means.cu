// The retrodiction of means alone (Tager 2013, Chapter 3: the pairs (C_k, b_k)): the
// smoothed means x_{k|T} = C_k x_{k+1|T} + b_k from the filtered moments, with
// C_k = P_{k|k} F_{k+1}^T P_{k+1|k}^{-1} (the smoother gain) and b_k = x_{k|k} - C_k
// x_{k+1|k}, composed by the affine maps' operator (C_i C_j, C_i b_j + b_i) in a reverse
// scan. The filtered covariances are read (the gains need them) but no smoothed
// covariance is formed, stored or scanned: an element is n^2 + n scalars instead of
// 2 n^2 + n, and a combine one n x n product instead of three.
//
// Batched like the other kernels (blockIdx.y is the sequence); stored scans through
// SCAN_KERNELS (pm_*), the fused form through pm_reduce / pm_sweep (as ps_reduce /
// ps_sweep of parallel_fused.cu).

struct ME { real E[NX2]; real g[NX]; };

struct MeansOp {
    typedef ME E;
    static __device__ __forceinline__ void identity(E& o) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) o.E[i] = (i / NX == i % NX) ? (real)1 : (real)0;
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = 0;
    }
    static __device__ __forceinline__ void combine(const E& ei, const E& ej, E& o) {
#pragma unroll
        for (int r = 0; r < NX; ++r) {
            real sg = ei.g[r];
#pragma unroll
            for (int c = 0; c < NX; ++c) {
                real se = 0;
#pragma unroll
                for (int l = 0; l < NX; ++l) se += ei.E[r * NX + l] * ej.E[l * NX + c];
                o.E[r * NX + c] = se;
                sg += ei.E[r * NX + c] * ej.g[c];
            }
            o.g[r] = sg;
        }
    }
};

SCAN_KERNELS(MeansOp, pm)

// The pair of step k: (0, x_{T-1|T-1}) at the last step; else (C_k, b_k) as ps_element
// computes them (P_{k+1|k} = F P F^T + Q by Cholesky, C_k^T = P_{k+1|k}^{-1} F P), without
// the covariance part. NaN where the Cholesky fails.
__device__ __forceinline__ void pm_element(const StepM* st, int varying, const real* mean, const real* cov, long long T, long long k, ME& o) {
    const real* x = mean + k * NX;
    const real* P = cov + k * NX2;
    if (k == T - 1) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) o.E[i] = 0;
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = x[i];
        return;
    }
    real V[NX2], Pp[NX2], xp[NX];
    if (!gain_parts(step_at(st, varying, k + 1), x, P, xp, V, Pp)) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) o.E[i] = nanv();
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = nanv();
        return;
    }
    lsolve<NX, NX>(Pp, V);   // V = L^{-1} F P
    ltsolve<NX, NX>(Pp, V);  // V = C_k^T
#pragma unroll
    for (int i = 0; i < NX; ++i) {
        real s = x[i];
#pragma unroll
        for (int j = 0; j < NX; ++j) { o.E[i * NX + j] = V[j * NX + i]; s -= V[j * NX + i] * xp[j]; }
        o.g[i] = s;
    }
}

extern "C" __global__ void pm_build(const StepM* st, int varying, const real* mean, const real* cov, long long T, ME* me) {
    long long k = gtid();
    if (k >= T) return;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
    me += bat() * T;
    ME o;
    pm_element(st, varying, mean, cov, T, k, o);
    me[k] = o;
}

// After the reverse scan, x_{k|T} = b of the suffix from k.
extern "C" __global__ void pm_extract(const ME* me, long long T, real* smean) {
    long long k = gtid();
    if (k >= T) return;
    me += bat() * T;
    smean += bat() * T * NX;
#pragma unroll
    for (int i = 0; i < NX; ++i) smean[k * NX + i] = me[k].g[i];
}

extern "C" __global__ void pm_reduce(const StepM* st, int varying, const real* mean, const real* cov, long long T, int K, ME* tot) {
    long long c = gtid(), nc = n_chunks(T, K);
    if (c >= nc) return;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
    long long lo = c * K, hi = min(T, lo + K);
    tot[bat() * nc + c] = fold_chunk<MeansOp>(lo, hi, [&](long long k, ME& e) { pm_element(st, varying, mean, cov, T, k, e); });
}

// tot: the reverse-scanned chunk totals (tot[c+1] = the suffix from chunk c+1 on).
extern "C" __global__ void pm_sweep(const ME* tot, const StepM* st, int varying, const real* mean, const real* cov, long long T, int K,
                                    real* smean) {
    long long c = gtid(), nc = n_chunks(T, K);
    if (c >= nc) return;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
    tot += bat() * nc;
    smean += bat() * T * NX;
    long long lo = c * K, hi = min(T, lo + K);
    real xs[NX];
    if (c + 1 < nc) {
#pragma unroll
        for (int i = 0; i < NX; ++i) xs[i] = tot[c + 1].g[i];
    }
    for (long long k = hi - 1; k >= lo; --k) {
        ME e;
        pm_element(st, varying, mean, cov, T, k, e);
        real xn[NX];
#pragma unroll
        for (int r = 0; r < NX; ++r) {
            real s = e.g[r];
            if (k != T - 1) {
#pragma unroll
                for (int c2 = 0; c2 < NX; ++c2) s += e.E[r * NX + c2] * xs[c2];
            }
            xn[r] = s;
        }
#pragma unroll
        for (int i = 0; i < NX; ++i) { xs[i] = xn[i]; smean[k * NX + i] = xn[i]; }
    }
}
