// The multi-target tracker's scan on the GPU (tracking/gpu.rs): prediction and the
// gate's factors, a uniform grid of the detections (counting sort by cell), the
// chi-square gate as compressed rows by track, the update, the life cycle, initiation
// and stream compaction. Comes after the Kalman prelude, common.cuh and tracker.cu
// (kalman/kernels), whose per-step arithmetic it reuses: every operation that decides
// something (the gate, the update, the life cycle) rounds as the CPU tracker does
// (kmul<true>: no fused multiply-adds; the CPU's order of every sum), so the GPU takes
// the same decisions.
//
// Tracks are dense (structure of arrays, x [NX][C], packed P [NP][C], C the buffer's
// capacity) in the CPU tracker's order; each scan compacts them into a second set of
// buffers: survivors in order, then the births in detection order.

#ifndef TK_BLOCK
#define TK_BLOCK 256
#endif
#ifndef TK_SCAN_BLOCK
#define TK_SCAN_BLOCK 256
#endif
#define TK_SCAN_ITEMS 4
#define TK_TILE (TK_SCAN_BLOCK * TK_SCAN_ITEMS)
// Grid dimensions: measurement components 0 (and 1).
#define TK_GD (NY < 2 ? NY : 2)

typedef unsigned int tk_u32;
typedef unsigned long long tk_u64;
#define TK_INF __longlong_as_double(0x7ff0000000000000ll)

// The scan's scratch words (tk_u64 [16]): 0-1 the detections' lowest components as
// ordered keys, 2-3 the highest, 4 the sum of the gates' half-widths (a double); the
// grid: 8-9 its low corner, 10 the inverse cell side (doubles), 11-12 cells per axis.
#define SC_MIN 0
#define SC_MAX 2
#define SC_WSUM 4
#define SC_LO 8
#define SC_INVH 10
#define SC_N 11

// Order-preserving map of a double onto an unsigned integer (atomic min and max).
__device__ __forceinline__ tk_u64 tk_key(double v) {
    tk_u64 b = (tk_u64)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | (1ull << 63));
}
__device__ __forceinline__ double tk_unkey(tk_u64 k) {
    tk_u64 b = (k >> 63) ? (k & ~(1ull << 63)) : ~k;
    return __longlong_as_double((long long)b);
}

// Shared-memory reduction of one double per thread (sum); thread 0 gets the total.
__device__ __forceinline__ double tk_block_sum(double v, double* sh) {
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int off = TK_BLOCK / 2; off > 0; off >>= 1) {
        if (t < off) sh[t] += sh[t + off];
        __syncthreads();
    }
    return sh[0];
}

// The gate's half-width along measurement component a: sqrt(gamma S_aa) with
// S_aa = sum_b L_ab^2 (gate.rs, Innovations::half_width).
__device__ __forceinline__ double tk_half_width(const real* L, int a, double gamma) {
    double saa = 0.0;
    for (int b = 0; b <= a; ++b) saa += kmul<true>(L[pk(a, b)], L[pk(a, b)]);
    return ks_sqrt(kmul<true>(gamma, saa));
}

// Prediction with the model's F, Q and u (as tracker_predict), then the gate's factors:
// the predicted measurement zhat = H x + d and S = H P H^T + R (the CPU's measure), the
// Cholesky factor L of S as the CPU's linalg::cholesky_in_place (divisions by the
// pivots) and ln|S|/2 = sum ln L_aa (gate.rs, Innovations::push). Adds the largest
// half-width of each gate to the scratch sum (the grid's cell size). A track whose S
// is not positive definite is reported in err (lowest index).
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_predict(
    const __grid_constant__ ModelParams mp, int n, long long C, real* __restrict__ xs, real* __restrict__ Ps,
    real* __restrict__ zhat, real* __restrict__ Lf, real* __restrict__ hld, double gamma, tk_u64* scratch,
    tk_u64* err) {
    __shared__ double sh[TK_BLOCK];
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double wmax = 0.0;
    if (i < n) {
        real x[NX];
        real P[NP];
        UNROLL for (int k = 0; k < NX; ++k) x[k] = xs[k * C + i];
        UNROLL for (int p = 0; p < NP; ++p) P[p] = Ps[p * C + i];
        {
            real F[NX * NX];
            real Q[NX * NX];
            real u[NX];
            UNROLL for (int k = 0; k < NX * NX; ++k) {
                F[k] = MF(k / NX, k % NX);
                Q[k] = MQ(k / NX, k % NX);
            }
            UNROLL for (int k = 0; k < NX; ++k) u[k] = MU(k);
            kf_predict_fq(F, Q, u, x, P);
        }
        UNROLL for (int k = 0; k < NX; ++k) xs[k * C + i] = x[k];
        UNROLL for (int p = 0; p < NP; ++p) Ps[p * C + i] = P[p];
        real zk[NY];
        UNROLL for (int a = 0; a < NY; ++a) zk[a] = (real)0;
        real y[NY];
        real hp[NY][NX];
        real S[NYP];
        real zh[NY];
        kf_innovation<true, KS_LANE_ORDER != 0>(mp, nullptr, zk, x, P, zh, y, hp, S);
        real inv[NY];
        if (!chol_packed<NY, true, true>(S, inv)) {
            atomicMin(err, (tk_u64)i);
        }
        real h = (real)0;
        UNROLL for (int a = 0; a < NY; ++a) h += ks_log(S[pk(a, a)]);
        UNROLL for (int a = 0; a < NY; ++a) zhat[a * (long long)n + i] = zh[a];
        UNROLL for (int p = 0; p < NYP; ++p) Lf[p * (long long)n + i] = S[p];
        hld[i] = h;
        UNROLL for (int a = 0; a < TK_GD; ++a) wmax = fmax(wmax, tk_half_width(S, a, gamma));
    }
    const double s = tk_block_sum(wmax, sh);
    if (threadIdx.x == 0 && s != 0.0) atomicAdd(reinterpret_cast<double*>(scratch + SC_WSUM), s);
}

// The detections' bounding box over the grid's components (scratch keys).
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_bounds(int ndet, const real* __restrict__ z, tk_u64* scratch) {
    __shared__ double sh[TK_BLOCK];
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    for (int a = 0; a < TK_GD; ++a) {
        for (int hi = 0; hi < 2; ++hi) {
            double v = j < ndet ? z[(long long)j * NY + a] : (hi ? -TK_INF : TK_INF);
            sh[threadIdx.x] = v;
            __syncthreads();
            for (int off = TK_BLOCK / 2; off > 0; off >>= 1) {
                if (threadIdx.x < off) {
                    const double o = sh[threadIdx.x + off];
                    sh[threadIdx.x] = hi ? fmax(sh[threadIdx.x], o) : fmin(sh[threadIdx.x], o);
                }
                __syncthreads();
            }
            if (threadIdx.x == 0) {
                if (hi) atomicMax(scratch + SC_MAX + a, tk_key(sh[0]));
                else atomicMin(scratch + SC_MIN + a, tk_key(sh[0]));
            }
            __syncthreads();
        }
    }
}

// The grid (one thread): square cells of side twice the mean largest gate half-width
// (the CPU takes twice the median; the side changes only which cells are visited, never
// which detections pass the gate), at most about four cells per detection, as gate.rs's
// Grid::new.
extern "C" __global__ void tk_grid_setup(int ndet, int n, tk_u64* scratch) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double lo[2] = {0.0, 0.0}, hi[2] = {0.0, 0.0};
    if (ndet > 0) {
        for (int a = 0; a < TK_GD; ++a) {
            lo[a] = tk_unkey(scratch[SC_MIN + a]);
            hi[a] = tk_unkey(scratch[SC_MAX + a]);
        }
    }
    double extent = 0.0;
    for (int a = 0; a < TK_GD; ++a) extent = fmax(extent, hi[a] - lo[a]);
    // At most cap cells (counted as the integers the cells are indexed by, so that the
    // host's buffer of cap + 1 cell starts always suffices).
    const double cap = 4.0 * (double)ndet + 16.0;
    const double wsum = __longlong_as_double((long long)scratch[SC_WSUM]);
    const double cell = n > 0 ? 2.0 * wsum / (double)n : 1.0;
    double h = (cell > 0.0 && cell < TK_INF) ? cell : fmax(extent, 1.0);
    double inv_h;
    tk_u64 nc[2] = {1, 1};
    for (bool first = true;; first = false) {
        inv_h = 1.0 / h;
        double cells = 1.0;
        for (int a = 0; a < TK_GD; ++a) {
            nc[a] = (tk_u64)fmin((hi[a] - lo[a]) * inv_h, 1e15) + 1;
            cells *= (double)nc[a];
        }
        if (cells <= cap) break;
        h = first ? fmax(1.5 * h, fmax(extent, 1e-300) / fmax(pow(cap, 1.0 / (double)TK_GD) - 1.0, 1.0)) : 1.5 * h;
    }
    double* d = reinterpret_cast<double*>(scratch);
    d[SC_LO] = lo[0];
    d[SC_LO + 1] = lo[1];
    d[SC_INVH] = inv_h;
    scratch[SC_N] = nc[0];
    scratch[SC_N + 1] = nc[1];
}

// Each detection's cell and its rank among the detections of that cell (a histogram).
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_cells(int ndet, const real* __restrict__ z,
                                                             const tk_u64* __restrict__ scratch,
                                                             tk_u32* __restrict__ count, tk_u32* __restrict__ cell,
                                                             tk_u32* __restrict__ rank) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= ndet) return;
    const double* d = reinterpret_cast<const double*>(scratch);
    const double inv_h = d[SC_INVH];
    tk_u64 c = 0, stride = 1;
    for (int a = 0; a < TK_GD; ++a) {
        const tk_u64 na = scratch[SC_N + a];
        const double v = (z[(long long)j * NY + a] - d[SC_LO + a]) * inv_h;
        tk_u64 k = v > 0.0 ? (tk_u64)v : 0;
        if (k > na - 1) k = na - 1;
        c += k * stride;
        stride *= na;
    }
    cell[j] = (tk_u32)c;
    rank[j] = atomicAdd(count + c, 1u);
}

// Counting sort, last pass: detection j goes to its cell's start plus its rank; `order`
// holds the detection indices, `zs` their components, cell after cell.
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_scatter(int ndet, const real* __restrict__ z,
                                                               const tk_u32* __restrict__ cell,
                                                               const tk_u32* __restrict__ rank,
                                                               const tk_u32* __restrict__ start,
                                                               tk_u32* __restrict__ order, real* __restrict__ zs) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= ndet) return;
    const tk_u32 at = start[cell[j]] + rank[j];
    order[at] = (tk_u32)j;
    UNROLL for (int a = 0; a < NY; ++a) zs[(long long)at * NY + a] = z[(long long)j * NY + a];
}

// The cells [k0, k1] that the gate's extent [lo, hi] touches along axis a (gate.rs,
// Grid::range); false when none.
__device__ __forceinline__ bool tk_range(double lo, double hi, double glo, double inv_h, tk_u64 na, tk_u64& k0,
                                         tk_u64& k1) {
    const double a0 = (lo - glo) * inv_h;
    const double a1 = (hi - glo) * inv_h;
    if (a1 < 0.0 || a0 >= (double)na) return false;
    k0 = (tk_u64)fmax(a0, 0.0);
    k1 = (tk_u64)fmin(a1, (double)(na - 1));
    return true;
}

// The chi-square gate of every track whose status is `want`: detection j (skipped when
// `claimed` is given and marks it) is in track i's gate when the whitened innovation
// e = L^{-1} (z_j - zhat_i) has |e|^2 <= gamma (gate.rs, Innovations::whiten, with the
// CPU's order: forward substitution dividing by the pivots), with
// ll = ln N(z_j; zhat_i, S_i) = -(NY ln 2pi + |e|^2) / 2 - ln|S_i|/2
// (Innovations::log_likelihood). `fill` 0: rows[i] = the count; `fill` 1: rows holds the
// row starts, and the detections and log-likelihoods are written at them, sorted by
// detection index (as the CPU).
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_gate(
    int n, int want, const unsigned char* __restrict__ status, const real* __restrict__ zhat,
    const real* __restrict__ Lf, const real* __restrict__ hld, double gamma, const tk_u64* __restrict__ scratch,
    const tk_u32* __restrict__ cstart, const tk_u32* __restrict__ order, const real* __restrict__ zs,
    const unsigned char* __restrict__ claimed, tk_u32* __restrict__ rows, tk_u32* __restrict__ det,
    real* __restrict__ ll, int fill) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (status[i] != want) {
        if (!fill) rows[i] = 0;
        return;
    }
    real zh[NY];
    real L[NYP];
    UNROLL for (int a = 0; a < NY; ++a) zh[a] = zhat[a * (long long)n + i];
    UNROLL for (int p = 0; p < NYP; ++p) L[p] = Lf[p * (long long)n + i];
    const real h = hld[i];
    const double* d = reinterpret_cast<const double*>(scratch);
    const double inv_h = d[SC_INVH];
    tk_u64 k0[2] = {0, 0}, k1[2] = {0, 0};
    for (int a = 0; a < TK_GD; ++a) {
        const double w = tk_half_width(L, a, gamma);
        if (!tk_range(zh[a] - w, zh[a] + w, d[SC_LO + a], inv_h, scratch[SC_N + a], k0[a], k1[a])) {
            if (!fill) rows[i] = 0;
            return;
        }
    }
    const tk_u64 n0 = scratch[SC_N];
    const tk_u32 at = fill ? rows[i] : 0;
    tk_u32 cnt = 0;
    const real c2pi = (real)NY * (real)KS_LN_2PI;
    for (tk_u64 ky = k0[1]; ky <= k1[1]; ++ky) {
        const tk_u64 row = ky * n0;
        const tk_u32 s = cstart[row + k0[0]], e = cstart[row + k1[0] + 1];
        for (tk_u32 p = s; p < e; ++p) {
            const tk_u32 j = order[p];
            if (claimed != nullptr && claimed[j]) continue;
            real ev[NY];
            UNROLL for (int a = 0; a < NY; ++a) ev[a] = zs[(long long)p * NY + a] - zh[a];
            UNROLL for (int a = 0; a < NY; ++a) {
                real t = ev[a];
                UNROLL for (int k = 0; k < a; ++k) t -= kmul<true>(L[pk(a, k)], ev[k]);
                ev[a] = t / L[pk(a, a)];
            }
            real maha = (real)0;
            UNROLL for (int a = 0; a < NY; ++a) maha += kmul<true>(ev[a], ev[a]);
            if (maha <= gamma) {
                if (fill) {
                    det[at + cnt] = j;
                    ll[at + cnt] = kmul<true>((real)-0.5, c2pi + maha) - h;
                }
                ++cnt;
            }
        }
    }
    if (!fill) {
        rows[i] = cnt;
        return;
    }
    // Detection order within the row (rows are short: insertion sort).
    for (tk_u32 a = 1; a < cnt; ++a) {
        const tk_u32 dj = det[at + a];
        const real lj = ll[at + a];
        tk_u32 b = a;
        while (b > 0 && det[at + b - 1] > dj) {
            det[at + b] = det[at + b - 1];
            ll[at + b] = ll[at + b - 1];
            --b;
        }
        det[at + b] = dj;
        ll[at + b] = lj;
    }
}

// Marks the detections the tracks picked as claimed.
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_claim(int n, const int* __restrict__ pick,
                                                             unsigned char* __restrict__ claimed) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int p = pick[i];
    if (p >= 0) claimed[p] = 1;
}

// JPDA's claims and update of the confirmed tracks (one thread a track, the pairs of its
// gated row, sorted by detection, with their marginals beta and the track's beta0):
// a detection more likely the track's than "none of them" (beta > beta0) detects the
// track and is claimed (tracker.rs, Tracker::associate); a track with pairs takes the
// PDA update (kalman/state/mixture.rs, pda, whose arithmetic and order this is: the
// innovation from the first candidate, S = L L^T, W^T = L^{-1} H P, whitened
// innovations e_j, ebar = sum beta_j e_j, x += W ebar, P -= W M W^T with
// M = (sum beta_j) I - (sum beta_j e_j e_j^T - ebar ebar^T)). pick[i] becomes 0 for a
// detected track and -1 otherwise (the life cycle's input); tentative tracks are left.
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_pda(
    const __grid_constant__ ModelParams mp, int n, long long C, real* __restrict__ xs, real* __restrict__ Ps,
    const unsigned char* __restrict__ status, const tk_u32* __restrict__ rows, const tk_u32* __restrict__ det,
    const double* __restrict__ beta, const double* __restrict__ beta0, const real* __restrict__ z,
    int* __restrict__ pick, unsigned char* __restrict__ claimed, tk_u64* err) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || status[i] != 1) return;
    const tk_u32 r0 = rows[i], r1 = rows[i + 1];
    bool detected = false;
    for (tk_u32 k = r0; k < r1; ++k) {
        if (beta[k] > beta0[i]) {
            claimed[det[k]] = 1;
            detected = true;
        }
    }
    pick[i] = detected ? 0 : -1;
    if (r0 == r1) return;
    real x[NX];
    real P[NP];
    UNROLL for (int k = 0; k < NX; ++k) x[k] = xs[k * C + i];
    UNROLL for (int q = 0; q < NP; ++q) P[q] = Ps[q * C + i];
    real zk[NY];
    UNROLL for (int a = 0; a < NY; ++a) zk[a] = z[(long long)det[r0] * NY + a];
    real y[NY];
    real hp[NY][NX];
    real S[NYP];
    real zh[NY];
    kf_innovation<true, false>(mp, nullptr, zk, x, P, zh, y, hp, S);
    real inv[NY];
    if (!chol_packed<NY, true, true>(S, inv)) {
        atomicMin(err, (tk_u64)i);
        return;
    }
    // W^T = L^{-1} H P (linalg::solve_lower_in_place, column by column).
    UNROLL for (int j = 0; j < NX; ++j) {
        UNROLL for (int a = 0; a < NY; ++a) {
            real t = hp[a][j];
            UNROLL for (int b = 0; b < a; ++b) t -= kmul<true>(S[pk(a, b)], hp[b][j]);
            hp[a][j] = t / S[pk(a, a)];
        }
    }
    real ebar[NY];
    real M[NY][NY];
    UNROLL for (int a = 0; a < NY; ++a) {
        ebar[a] = (real)0;
        UNROLL for (int c = 0; c < NY; ++c) M[a][c] = (real)0;
    }
    real sum = (real)0;
    for (tk_u32 k = r0; k < r1; ++k) {
        const real b = (real)beta[k];
        sum += b;
        real e[NY];
        UNROLL for (int a = 0; a < NY; ++a) {
            real t = z[(long long)det[k] * NY + a] - zh[a];
            UNROLL for (int c = 0; c < a; ++c) t -= kmul<true>(S[pk(a, c)], e[c]);
            e[a] = t / S[pk(a, a)];
        }
        UNROLL for (int a = 0; a < NY; ++a) {
            ebar[a] += kmul<true>(b, e[a]);
            UNROLL for (int c = 0; c < NY; ++c) M[a][c] += kmul<true>(kmul<true>(b, e[a]), e[c]);
        }
    }
    UNROLL for (int a = 0; a < NY; ++a) {
        UNROLL for (int c = 0; c < NY; ++c) {
            const real spread = M[a][c] - kmul<true>(ebar[a], ebar[c]);
            M[a][c] = (a == c ? sum : (real)0) - spread;
        }
    }
    UNROLL for (int r = 0; r < NX; ++r) {
        real acc = (real)0;
        UNROLL for (int a = 0; a < NY; ++a) acc += kmul<true>(hp[a][r], ebar[a]);
        x[r] += acc;
    }
    UNROLL for (int r = 0; r < NX; ++r) {
        UNROLL for (int c = 0; c <= r; ++c) {
            real acc = (real)0;
            UNROLL for (int a = 0; a < NY; ++a) {
                UNROLL for (int b = 0; b < NY; ++b) acc += kmul<true>(kmul<true>(hp[a][r], M[a][b]), hp[b][c]);
            }
            P[pk(r, c)] -= acc;
        }
    }
    UNROLL for (int k = 0; k < NX; ++k) xs[k * C + i] = x[k];
    UNROLL for (int q = 0; q < NP; ++q) Ps[q * C + i] = P[q];
}

// The life cycle's settings (tracker.rs, TrackerConfig).
struct LifeParams {
    double max_variance;
    tk_u32 confirm_m, confirm_n, delete_k, delete_tentative;
};

// Update and life cycle, one thread per track (i < n) and per detection (j < ndet):
// track i takes its pick (pick1 when confirmed, pick2 when tentative) by the CPU's
// per-step update (tracker_update's arithmetic), or keeps its prediction; then M-of-N
// confirmation, deletion after K misses, the tentative rule and the covariance bound,
// exactly as Tracker::life_cycle. flags[i] = 1 for a track kept; flags[n + j] = 1 for a
// detection no track claimed (a birth).
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_update(
    const __grid_constant__ ModelParams mp, const __grid_constant__ LifeParams lp, int n, int ndet, long long C,
    real* __restrict__ xs, real* __restrict__ Ps, unsigned char* __restrict__ status, tk_u32* __restrict__ age,
    tk_u32* __restrict__ hits, tk_u32* __restrict__ misses, const int* __restrict__ pick1,
    const int* __restrict__ pick2, const real* __restrict__ z, const unsigned char* __restrict__ claimed,
    tk_u32* __restrict__ flags, tk_u64* err, int pda) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < ndet) flags[n + i] = claimed[i] ? 0u : 1u;
    if (i >= n) return;
    const unsigned char st = status[i];
    const int p = st ? pick1[i] : pick2[i];
    const bool detected = p >= 0;
    // JPDA: a confirmed track's update was tk_pda's; its pick only says "detected".
    const bool update = detected && !(st && pda);
    real x[NX];
    real P[NP];
    UNROLL for (int k = 0; k < NX; ++k) x[k] = xs[k * C + i];
    UNROLL for (int q = 0; q < NP; ++q) P[q] = Ps[q * C + i];
    if (update) {
        real zk[NY];
        UNROLL for (int a = 0; a < NY; ++a) zk[a] = z[(long long)p * NY + a];
        real y[NY];
        real hp[NY][NX];
        real S[NYP];
        real zh[NY];
        kf_innovation<true, KS_LANE_ORDER != 0>(mp, nullptr, zk, x, P, zh, y, hp, S);
        real l;
        if (!kf_correct<true, KS_LANE_ORDER != 0>(S, y, hp, x, P, l)) {
            atomicMin(err, (tk_u64)i);
        }
        UNROLL for (int k = 0; k < NX; ++k) xs[k * C + i] = x[k];
        UNROLL for (int q = 0; q < NP; ++q) Ps[q * C + i] = P[q];
    }
    tk_u32 ag = age[i] + 1, ht = hits[i], ms = detected ? 0u : misses[i] + 1;
    unsigned char ns = st;
    bool keep = true;
    if (!st) {
        if (detected) ++ht;
        if (ht >= lp.confirm_m) {
            ns = 1;
        } else if (ht + (lp.confirm_n > ag ? lp.confirm_n - ag : 0u) < lp.confirm_m || ms >= lp.delete_tentative) {
            keep = false;
        }
    } else if (ms >= lp.delete_k) {
        keep = false;
    }
    if (keep && lp.max_variance < TK_INF) {
        UNROLL for (int a = 0; a < NY; ++a) {
            real v = (real)0;
            UNROLL for (int r = 0; r < NX; ++r) {
                UNROLL for (int c = 0; c < NX; ++c) v += kmul<true>(kmul<true>(MH(a, r), P[pk(r, c)]), MH(a, c));
            }
            if (v > lp.max_variance) keep = false;
        }
    }
    status[i] = ns;
    age[i] = ag;
    hits[i] = ht;
    misses[i] = ms;
    flags[i] = keep ? 1u : 0u;
}

// A new track's mean and covariance from a detection (tracker.rs, Tracker::initiate):
// x = N x0 + G (z - d) (G row-major [NX][NY]), P = the prior's (full, row-major).
struct BirthParams {
    real G[NX * NY];
    real nx0[NX];
    real d[NY];
    real P[NX * NX];
};

// Stream compaction after the exclusive scan of `flags` ([n + ndet + 1]): kept track i
// moves to flags[i] of the output buffers; an unclaimed detection j starts the track
// flags[n + j] with identity next_id + flags[n + j] - flags[n] (the CPU's ids).
extern "C" __global__ void __launch_bounds__(TK_BLOCK) tk_compact(
    const __grid_constant__ BirthParams bp, int n, int ndet, long long Cin, long long Cout,
    const tk_u32* __restrict__ flags, const real* __restrict__ xs, const real* __restrict__ Ps,
    const tk_u64* __restrict__ id, const unsigned char* __restrict__ status, const tk_u32* __restrict__ age,
    const tk_u32* __restrict__ hits, const tk_u32* __restrict__ misses, real* __restrict__ xo, real* __restrict__ Po,
    tk_u64* __restrict__ ido, unsigned char* __restrict__ statuso, tk_u32* __restrict__ ageo,
    tk_u32* __restrict__ hitso, tk_u32* __restrict__ misseso, const real* __restrict__ z, tk_u64 next_id) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)n + ndet) return;
    const tk_u32 o = flags[t];
    if (flags[t + 1] == o) return;
    if (t < n) {
        UNROLL for (int k = 0; k < NX; ++k) xo[k * Cout + o] = xs[k * Cin + t];
        UNROLL for (int q = 0; q < NP; ++q) Po[q * Cout + o] = Ps[q * Cin + t];
        ido[o] = id[t];
        statuso[o] = status[t];
        ageo[o] = age[t];
        hitso[o] = hits[t];
        misseso[o] = misses[t];
        return;
    }
    const long long j = t - n;
    real zj[NY];
    UNROLL for (int a = 0; a < NY; ++a) zj[a] = z[j * NY + a];
    UNROLL for (int r = 0; r < NX; ++r) {
        real acc = bp.nx0[r];
        UNROLL for (int a = 0; a < NY; ++a) acc += kmul<true>(bp.G[r * NY + a], zj[a] - bp.d[a]);
        xo[r * Cout + o] = acc;
        UNROLL for (int c = 0; c <= r; ++c) Po[pk(r, c) * Cout + o] = bp.P[r * NX + c];
    }
    ido[o] = next_id + (o - flags[n]);
    statuso[o] = 0;
    ageo[o] = 1;
    hitso[o] = 1;
    misseso[o] = 0;
}

// ---- Exclusive scan of tk_u32 in place: a[0..len) becomes its exclusive prefix sums
// and a[len] the total (a holds len + 1 values). Three passes: tile sums, a scan of the
// tile sums in one block, the tiles' own scans offset by their sums.

// Exclusive scan of one value per thread of the block; `total` receives the block's sum.
__device__ __forceinline__ tk_u32 tk_block_scan(tk_u32 v, tk_u32* sh, tk_u32& total) {
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int off = 1; off < TK_SCAN_BLOCK; off <<= 1) {
        const tk_u32 add = t >= off ? sh[t - off] : 0u;
        __syncthreads();
        sh[t] += add;
        __syncthreads();
    }
    const tk_u32 incl = sh[t];
    total = sh[TK_SCAN_BLOCK - 1];
    __syncthreads();
    return incl - v;
}

extern "C" __global__ void __launch_bounds__(TK_SCAN_BLOCK) tk_scan_tiles(const tk_u32* __restrict__ a, long long len,
                                                                       tk_u32* __restrict__ sums) {
    __shared__ tk_u32 sh[TK_SCAN_BLOCK];
    const long long base = (long long)blockIdx.x * TK_TILE + (long long)threadIdx.x * TK_SCAN_ITEMS;
    tk_u32 s = 0;
    UNROLL for (int k = 0; k < TK_SCAN_ITEMS; ++k) s += base + k < len ? a[base + k] : 0u;
    tk_u32 total;
    tk_block_scan(s, sh, total);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// One block: sums[0..tiles) becomes its exclusive scan, sums[tiles] the total.
extern "C" __global__ void __launch_bounds__(TK_SCAN_BLOCK) tk_scan_sums(tk_u32* __restrict__ sums, int tiles) {
    __shared__ tk_u32 sh[TK_SCAN_BLOCK];
    tk_u32 carry = 0;
    for (int base = 0; base < tiles; base += TK_SCAN_BLOCK) {
        const int k = base + threadIdx.x;
        const tk_u32 v = k < tiles ? sums[k] : 0u;
        tk_u32 total;
        const tk_u32 e = tk_block_scan(v, sh, total);
        if (k < tiles) sums[k] = carry + e;
        carry += total;
    }
    if (threadIdx.x == 0) sums[tiles] = carry;
}

extern "C" __global__ void __launch_bounds__(TK_SCAN_BLOCK) tk_scan_apply(tk_u32* __restrict__ a, long long len,
                                                                       const tk_u32* __restrict__ sums, int tiles) {
    __shared__ tk_u32 sh[TK_SCAN_BLOCK];
    const long long base = (long long)blockIdx.x * TK_TILE + (long long)threadIdx.x * TK_SCAN_ITEMS;
    tk_u32 v[TK_SCAN_ITEMS];
    tk_u32 s = 0;
    UNROLL for (int k = 0; k < TK_SCAN_ITEMS; ++k) {
        v[k] = base + k < len ? a[base + k] : 0u;
        s += v[k];
    }
    tk_u32 total;
    tk_u32 run = sums[blockIdx.x] + tk_block_scan(s, sh, total);
    UNROLL for (int k = 0; k < TK_SCAN_ITEMS; ++k) {
        if (base + k < len) a[base + k] = run;
        run += v[k];
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) a[len] = sums[tiles];
}
