// The windowed ("splash") filter of Lin, Moore & Russell, unrolled into taps: one thread
// per step t, the predicted measurement of its window y^_t = c + sum_i G_i z_{t-N+1+i}
// and the log-density log N(z_t; y^_t, L L^T). The covariance recursion (and so the
// taps) is done once on the host in double precision.
//
// Compiled with: REAL (float | double), NY (measurement size), BLOCK (threads per block,
// also the steps per block), TILE (taps staged in shared memory at a time).
//
// window_shared: every window of a track range uses the shared taps (no missing value
//   in the window): a tiled 1-D convolution. Block (x) covers BLOCK consecutive steps of
//   track blockIdx.y; per tile of TILE taps it stages the taps and the TILE + BLOCK - 1
//   measurements they touch in shared memory, so each measurement is read from global
//   memory once per tile and each tap once per block.
// window_patterns: a list of windows with missing values, each with the taps of its
//   missing pattern (one thread per listed window, taps read through the cache).

#ifndef KESTREL_HOST
#define KESTREL_GLOBAL extern "C" __global__
#define KESTREL_SHARED __shared__
#else
#define KESTREL_GLOBAL static
#define KESTREL_SHARED static
#endif

// log N(z; acc, L L^T) with acc the prediction; acc is overwritten.
#ifndef KESTREL_HOST
__device__
#endif
static inline REAL window_logpdf(const REAL* z, REAL* acc, const REAL* l, REAL norm) {
    REAL maha = (REAL)0;
#pragma unroll
    for (int a = 0; a < NY; ++a) {
        REAL v = z[a] - acc[a];
        for (int b = 0; b < a; ++b) v -= l[a * NY + b] * acc[b];
        v /= l[a * NY + a];
        acc[a] = v;
        maha += v * v;
    }
    return norm - (REAL)0.5 * maha;
}

#ifndef KESTREL_HOST
KESTREL_GLOBAL void window_shared(const REAL* __restrict__ z, const REAL* __restrict__ g,
                                  const REAL* __restrict__ c, const REAL* __restrict__ l,
                                  REAL norm, REAL* __restrict__ out, long long steps,
                                  int n, long long t_begin) {
    KESTREL_SHARED REAL gs[TILE * NY * NY];
    KESTREL_SHARED REAL zs[(TILE + BLOCK) * NY];
    const long long b = blockIdx.y;
    const long long t0 = t_begin + (long long)blockIdx.x * BLOCK;
    const long long t = t0 + threadIdx.x;
    const REAL* zb = z + b * steps * NY;
    REAL acc[NY];
#pragma unroll
    for (int a = 0; a < NY; ++a) acc[a] = c[a];
    const int taps = n - 1;
    for (int c0 = 0; c0 < taps; c0 += TILE) {
        const int m = min(TILE, taps - c0);
        for (int i = threadIdx.x; i < m * NY * NY; i += BLOCK) gs[i] = g[(long long)c0 * NY * NY + i];
        // Window start of the block's first step, plus this tile's offset.
        const long long s0 = t0 - (n - 1) + c0;
        for (int i = threadIdx.x; i < (m + BLOCK - 1) * NY; i += BLOCK) {
            const long long k = s0 + i / NY;
            zs[i] = (k < steps) ? zb[s0 * NY + i] : (REAL)0;
        }
        __syncthreads();
        for (int i = 0; i < m; ++i) {
            const REAL* zi = zs + (threadIdx.x + i) * NY;
            const REAL* gi = gs + i * NY * NY;
#pragma unroll
            for (int a = 0; a < NY; ++a) {
                REAL v = acc[a];
#pragma unroll
                for (int q = 0; q < NY; ++q) v += gi[a * NY + q] * zi[q];
                acc[a] = v;
            }
        }
        __syncthreads();
    }
    if (t < steps) out[b * steps + t] = window_logpdf(zb + t * NY, acc, l, norm);
}
#endif

// The windows listed in `index` (track * steps + t) with pattern `pattern[j]`: taps
// g[p][N-1][NY][NY], c[p][NY], l[p][NY][NY], norm[p]. Missing measurements inside a
// window (NaN) have zero taps and are skipped.
#ifndef KESTREL_HOST
KESTREL_GLOBAL void window_patterns(const REAL* __restrict__ z, const REAL* __restrict__ g,
                                    const REAL* __restrict__ c, const REAL* __restrict__ l,
                                    const REAL* __restrict__ norm,
                                    const unsigned long long* __restrict__ index,
                                    const int* __restrict__ pattern, long long count,
                                    REAL* __restrict__ out, long long steps, int n) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
#else
static void window_patterns_one(const REAL* z, const REAL* g, const REAL* c, const REAL* l,
                                const REAL* norm, const unsigned long long* index,
                                const int* pattern, REAL* out, long long steps, int n,
                                long long j) {
#endif
    const long long idx = (long long)index[j];
    const long long b = idx / steps;
    const long long t = idx - b * steps;
    const int p = pattern[j];
    const REAL* zb = z + b * steps * NY;
    const REAL* gp = g + (long long)p * (n - 1) * NY * NY;
    REAL acc[NY];
    for (int a = 0; a < NY; ++a) acc[a] = c[p * NY + a];
    const long long s = t - (n - 1);
    for (int i = 0; i < n - 1; ++i) {
        const REAL* zi = zb + (s + i) * NY;
        bool present = true;
        for (int q = 0; q < NY; ++q) present = present && (zi[q] == zi[q]);
        if (!present) continue;
        const REAL* gi = gp + (long long)i * NY * NY;
        for (int a = 0; a < NY; ++a) {
            REAL v = acc[a];
            for (int q = 0; q < NY; ++q) v += gi[a * NY + q] * zi[q];
            acc[a] = v;
        }
    }
    out[idx] = window_logpdf(zb + t * NY, acc, l + (long long)p * NY * NY, norm[p]);
}

#ifdef KESTREL_HOST
// The block-tiled kernel emulated one block at a time (threads in a loop, the same
// shared-memory staging), for the tests that run these sources as plain C++.
static void window_shared_block(const REAL* z, const REAL* g, const REAL* c, const REAL* l,
                                REAL norm, REAL* out, long long steps, int n,
                                long long t_begin, long long bx, long long b) {
    static REAL gs[TILE * NY * NY];
    static REAL zs[(TILE + BLOCK) * NY];
    static REAL accs[BLOCK][NY];
    const long long t0 = t_begin + bx * BLOCK;
    const REAL* zb = z + b * steps * NY;
    for (int x = 0; x < BLOCK; ++x)
        for (int a = 0; a < NY; ++a) accs[x][a] = c[a];
    const int taps = n - 1;
    for (int c0 = 0; c0 < taps; c0 += TILE) {
        const int m = taps - c0 < TILE ? taps - c0 : TILE;
        for (int i = 0; i < m * NY * NY; ++i) gs[i] = g[(long long)c0 * NY * NY + i];
        const long long s0 = t0 - (n - 1) + c0;
        for (int i = 0; i < (m + BLOCK - 1) * NY; ++i) {
            const long long k = s0 + i / NY;
            zs[i] = (k < steps) ? zb[s0 * NY + i] : (REAL)0;
        }
        for (int x = 0; x < BLOCK; ++x)
            for (int i = 0; i < m; ++i) {
                const REAL* zi = zs + (x + i) * NY;
                const REAL* gi = gs + i * NY * NY;
                for (int a = 0; a < NY; ++a) {
                    REAL v = accs[x][a];
                    for (int q = 0; q < NY; ++q) v += gi[a * NY + q] * zi[q];
                    accs[x][a] = v;
                }
            }
    }
    for (int x = 0; x < BLOCK; ++x) {
        const long long t = t0 + x;
        if (t < steps) out[b * steps + t] = window_logpdf(zb + t * NY, accs[x], l, norm);
    }
}
#endif
