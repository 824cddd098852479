// The exact per-step log-likelihood as a chunked parallel scan of the mean recursion.
// The covariance recursion (data-free) was run on the host: step t of track b has a record
// id into `table` (W^T: NY x NX, L: NY x NY lower, the log-density constant), or -1 where
// z_t is missing: index[b * istride + t] for t < ilen, isteady after (istride 0: every
// track shares one row that ends where the recursion settled). The mean recursion is affine in the predicted state x_t:
//
//   e = L^{-1} (z_t - H x_t - d),  ll_t = c - |e|^2 / 2,  x_{t+1} = F (x_t + W e) + u
//
// A track of `steps` steps is cut into chunks of CHUNK = `len` steps. Three kernels:
//   scan_local: per (track, chunk, column) one thread. Columns 0..NX-1 run the linear part
//     from the unit vector e_col (no data, no offsets); column NX the affine part from
//     0. Together they give the chunk's map x_end = M x_start + v.
//   scan_carry_warp: per track one warp, the starts of the chunks in order:
//     s_0 = x0, s_{j+1} = M_j s_j + v_j (lane i row i; scan_carry_one is the same
//     sums in one thread, which the C++ test harness runs).
//   scan_final: per (track, chunk) one thread: the chunk again from its start, writing
//     ll_t (0 where missing).
//
// Compiled with: REAL (float | double), NX, NY, COMPANION (1 when F is a companion
// matrix: first row dense, ones on the subdiagonal; the prediction is then one dot
// product and a shift).

#ifndef KESTREL_HOST
#define KESTREL_FN __device__ static inline
#else
#define KESTREL_FN static inline
#endif

#define REC (NY * NX + NY * NY + 1)

// One step from the predicted state x: the update with record `rec` (none where
// missing), then the prediction. `data` selects the affine part (z, d, u) or, when 0,
// a column of the linear part. Returns the step's log-likelihood (0 where missing).
KESTREL_FN REAL scan_step(REAL* x, const REAL* z, const REAL* rec, const REAL* f,
                          const REAL* u, const REAL* h, const REAL* d, bool data) {
    REAL ll = (REAL)0;
    if (rec) {
        const REAL* wt = rec;
        const REAL* l = rec + NY * NX;
        REAL e[NY];
        REAL maha = (REAL)0;
#pragma unroll
        for (int a = 0; a < NY; ++a) {
            REAL v = data ? z[a] - d[a] : (REAL)0;
#pragma unroll
            for (int j = 0; j < NX; ++j) v -= h[a * NX + j] * x[j];
#pragma unroll
            for (int q = 0; q < a; ++q) v -= l[a * NY + q] * e[q];
            v /= l[a * NY + a];
            e[a] = v;
            maha += v * v;
        }
#pragma unroll
        for (int i = 0; i < NX; ++i) {
            REAL acc = x[i];
#pragma unroll
            for (int a = 0; a < NY; ++a) acc += wt[a * NX + i] * e[a];
            x[i] = acc;
        }
        ll = rec[REC - 1] - (REAL)0.5 * maha;
    }
#if COMPANION
    REAL s = data ? u[0] : (REAL)0;
#pragma unroll
    for (int j = 0; j < NX; ++j) s += f[j] * x[j];
#pragma unroll
    for (int i = NX - 1; i > 0; --i) x[i] = x[i - 1] + (data ? u[i] : (REAL)0);
    x[0] = s;
#else
    REAL y[NX];
#pragma unroll
    for (int i = 0; i < NX; ++i) {
        REAL s = data ? u[i] : (REAL)0;
#pragma unroll
        for (int j = 0; j < NX; ++j) s += f[i * NX + j] * x[j];
        y[i] = s;
    }
#pragma unroll
    for (int i = 0; i < NX; ++i) x[i] = y[i];
#endif
    return ll;
}

// Thread (track b, chunk j, column col) of scan_local: writes column col of M_j
// (m[b][j][NX][NX]) or, for col == NX, v_j (v[b][j][NX]).
KESTREL_FN void scan_local_one(const REAL* z, const REAL* table, const int* index,
                               long long istride, long long ilen, int isteady, const REAL* f, const REAL* u, const REAL* h, const REAL* d,
                               long long steps, long long len, long long chunks, REAL* m,
                               REAL* v, long long b, long long j, int col) {
    const bool data = col == NX;
    REAL x[NX];
#pragma unroll
    for (int i = 0; i < NX; ++i) x[i] = (!data && i == col) ? (REAL)1 : (REAL)0;
    const long long t0 = j * len;
    const long long t1 = t0 + len < steps ? t0 + len : steps;
    const REAL* zb = z + b * steps * NY;
    const int* ib = index + b * istride;
    for (long long t = t0; t < t1; ++t) {
        const int id = t < ilen ? ib[t] : isteady;
        scan_step(x, zb + t * NY, id >= 0 ? table + (long long)id * REC : (const REAL*)0, f, u,
                  h, d, data);
    }
    const long long c = b * chunks + j;
    if (data) {
#pragma unroll
        for (int i = 0; i < NX; ++i) v[c * NX + i] = x[i];
    } else {
#pragma unroll
        for (int i = 0; i < NX; ++i) m[(c * NX + i) * NX + col] = x[i];
    }
}

// One thread's carry of track b: start[b][j][NX] for every chunk j (scan_carry_warp's
// sums, for the C++ test harness).
KESTREL_FN void scan_carry_one(const REAL* m, const REAL* v, const REAL* x0, long long chunks,
                               REAL* start, long long b) {
    REAL s[NX];
#pragma unroll
    for (int i = 0; i < NX; ++i) s[i] = x0[i];
    for (long long j = 0; j < chunks; ++j) {
        const long long c = b * chunks + j;
#pragma unroll
        for (int i = 0; i < NX; ++i) start[c * NX + i] = s[i];
        REAL y[NX];
#pragma unroll
        for (int i = 0; i < NX; ++i) {
            REAL acc = v[c * NX + i];
#pragma unroll
            for (int k = 0; k < NX; ++k) acc += m[(c * NX + i) * NX + k] * s[k];
            y[i] = acc;
        }
#pragma unroll
        for (int i = 0; i < NX; ++i) s[i] = y[i];
    }
}

// Thread (track b, chunk j) of scan_final: ll_t of the chunk into out[b][t].
KESTREL_FN void scan_final_one(const REAL* z, const REAL* table, const int* index,
                               long long istride, long long ilen, int isteady, const REAL* f, const REAL* u, const REAL* h, const REAL* d,
                               long long steps, long long len, long long chunks,
                               const REAL* start, REAL* out, long long b, long long j) {
    REAL x[NX];
    const long long c = b * chunks + j;
#pragma unroll
    for (int i = 0; i < NX; ++i) x[i] = start[c * NX + i];
    const long long t0 = j * len;
    const long long t1 = t0 + len < steps ? t0 + len : steps;
    const REAL* zb = z + b * steps * NY;
    const int* ib = index + b * istride;
    REAL* ob = out + b * steps;
    for (long long t = t0; t < t1; ++t) {
        const int id = t < ilen ? ib[t] : isteady;
        ob[t] = scan_step(x, zb + t * NY, id >= 0 ? table + (long long)id * REC : (const REAL*)0,
                          f, u, h, d, true);
    }
}

#ifndef KESTREL_HOST
// Grid: x over chunks * (NX + 1) threads, y over tracks.
extern "C" __global__ void scan_local(const REAL* __restrict__ z, const REAL* __restrict__ table,
                                      const int* __restrict__ index, long long istride,
                                      long long ilen, int isteady, const REAL* __restrict__ f,
                                      const REAL* __restrict__ u, const REAL* __restrict__ h,
                                      const REAL* __restrict__ d, long long steps, long long len,
                                      long long chunks, REAL* __restrict__ m,
                                      REAL* __restrict__ v) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= chunks * (NX + 1)) return;
    scan_local_one(z, table, index, istride, ilen, isteady, f, u, h, d, steps, len, chunks, m, v, blockIdx.y,
                   k / (NX + 1), (int)(k % (NX + 1)));
}

// Chunks whose maps one warp of scan_carry_warp stages in shared memory at a time
// (at most ~34 KB for NX = 32 in double).
#define CARRY_BATCH (NX <= 12 ? 32 : (NX <= 20 ? 8 : 4))

// The carry with one warp per track (block of 32, grid x over tracks): the warp loads
// CARRY_BATCH chunks' maps at once, coalesced, into shared memory, then lane i carries
// row i of each chunk (the state's components broadcast by shuffles), so that the
// sequential chain waits on memory once a batch instead of once a chunk. The sums run
// in scan_carry_one's order: the same starts.
extern "C" __global__ void __launch_bounds__(32) scan_carry_warp(const REAL* __restrict__ m,
                                                                 const REAL* __restrict__ v,
                                                                 const REAL* __restrict__ x0,
                                                                 long long chunks, long long tracks,
                                                                 REAL* __restrict__ start) {
    __shared__ REAL sm[CARRY_BATCH * NX * (NX + 1)];
    const long long b = blockIdx.x;
    if (b >= tracks) return;
    const int lane = threadIdx.x;
    const bool row = lane < NX;
    REAL s = row ? x0[lane] : (REAL)0;
    const REAL* mb = m + b * chunks * NX * NX;
    const REAL* vb = v + b * chunks * NX;
    REAL* sv = sm + CARRY_BATCH * NX * NX;
    for (long long j0 = 0; j0 < chunks; j0 += CARRY_BATCH) {
        const int n = chunks - j0 < CARRY_BATCH ? (int)(chunks - j0) : CARRY_BATCH;
        for (int q = lane; q < n * NX * NX; q += 32) sm[q] = mb[j0 * NX * NX + q];
        for (int q = lane; q < n * NX; q += 32) sv[q] = vb[j0 * NX + q];
        __syncwarp();
        for (int jj = 0; jj < n; ++jj) {
            const long long c = b * chunks + j0 + jj;
            if (row) start[c * NX + lane] = s;
            REAL acc = row ? sv[jj * NX + lane] : (REAL)0;
            const REAL* mr = sm + (jj * NX + (row ? lane : 0)) * NX;
#pragma unroll
            for (int k = 0; k < NX; ++k) acc += mr[k] * __shfl_sync(0xffffffffu, s, k);
            s = row ? acc : (REAL)0;
        }
        __syncwarp();
    }
}

// Grid: x over chunks, y over tracks.
extern "C" __global__ void scan_final(const REAL* __restrict__ z, const REAL* __restrict__ table,
                                      const int* __restrict__ index, long long istride,
                                      long long ilen, int isteady, const REAL* __restrict__ f,
                                      const REAL* __restrict__ u, const REAL* __restrict__ h,
                                      const REAL* __restrict__ d, long long steps, long long len,
                                      long long chunks, const REAL* __restrict__ start,
                                      REAL* __restrict__ out) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= chunks) return;
    scan_final_one(z, table, index, istride, ilen, isteady, f, u, h, d, steps, len, chunks, start, out,
                   blockIdx.y, j);
}
#endif
