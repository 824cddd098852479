// Resamplers on the GPU beside pf_offspring's systematic and stratified (appended to pf.cu; particle/
// resample.rs, grid.rs and subsets.rs are their CPU references, the same arithmetic in
// the same order, so from the same cumulative weights they choose the same ancestors).
// Each runs after pf_cdf, for the filters whose flag is set, on the inclusive cumulative
// weights cdf [B][N] (f64) and their total wtot[b].
//
//   multinomial      the CPU's sorted draws (resample.rs, sorted_multinomial): order
//                    statistics U_(j) = S_j / S_N from running sums S_j of standard
//                    exponentials E_l = -ln u_l, summed in chunks of PF_MN_CHUNK in the
//                    CPU's order: pf_mn_sums (a thread a chunk: its total), pf_mn_offsets
//                    (a thread a filter: the chunks' offsets and S_N), pf_mn_walk (a thread
//                    a chunk: its running sum, one search, then a merge walk).
//   systematic:grid  Hendeby et al.'s selection (grid.rs): a thread a particle counts the
//   stratified:grid  positions below its cumulative weight in O(1) (pf_grid_count: the
//                    two strata around it) and writes its index into the slots between
//                    its predecessor's count and its own.
//   subsets:S        resampling in S subsets with redistribution (subsets.rs):
//                    pf_sub_plan (a block a filter: each subset's draws by the systematic
//                    positions in its range, then the exchange pool's offsets),
//                    pf_sub_draw (a block a subset: its draws searched in its own range,
//                    written to its own slots or, the surplus, to those of the subsets
//                    that drew fewer).

#ifndef PF_MN_CHUNK
#define PF_MN_CHUNK 2048
#endif

__device__ __forceinline__ double pf_exp_draw(unsigned l, unsigned b, unsigned kr, unsigned key0, unsigned key1) {
    return -log(pf_uniform_f64(pf_words(l, b, kr, PF_PURPOSE_RESAMPLE, 0, key0, key1).v[0]));
}

// C^{-1}(x) as resample.rs's first_above: the first i with c[i] > x; past the end, the
// last particle of positive weight.
__device__ __forceinline__ unsigned pf_first_above(const double* c, unsigned n, double x) {
    unsigned i = pf_above(c, 0, n, x);
    if (i < n) return i;
    unsigned r = n - 1;
    while (r > 0 && c[r] == c[r - 1]) --r;
    return r;
}

// sums [B][chunks + 1]: a thread a chunk of slots, the total of its exponentials.
extern "C" __global__ void pf_mn_sums(const unsigned* flag, unsigned n, unsigned kr, unsigned key0, unsigned key1, unsigned b0,
                                      double* sums) {
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const unsigned chunks = (n + PF_MN_CHUNK - 1) / PF_MN_CHUNK;
    const unsigned c = blockIdx.x * PF_BLOCK + threadIdx.x;
    if (c >= chunks) return;
    const unsigned end = pf_umin((c + 1) * PF_MN_CHUNK, n);
    double s = 0.0;
    for (unsigned l = c * PF_MN_CHUNK; l < end; ++l) s += pf_exp_draw(l, b + b0, kr, key0, key1);
    sums[(size_t)b * (chunks + 1) + c] = s;
}

// A thread a filter: the chunk totals become their running offsets (in order), and the
// last entry S_N (the offsets' total plus E_N).
extern "C" __global__ void pf_mn_offsets(const unsigned* flag, unsigned n, unsigned kr, unsigned key0,
                                         unsigned key1, unsigned b0, double* sums, unsigned bn) {
    const unsigned b = blockIdx.x * PF_BLOCK + threadIdx.x;
    if (b >= bn || flag[b] == 0) return;
    const unsigned chunks = (n + PF_MN_CHUNK - 1) / PF_MN_CHUNK;
    double* s = sums + (size_t)b * (chunks + 1);
    double acc = 0.0;
    for (unsigned c = 0; c < chunks; ++c) {
        const double t = s[c];
        s[c] = acc;
        acc += t;
    }
    s[chunks] = acc + pf_exp_draw(n, b + b0, kr, key0, key1);
}

// A thread a chunk of slots: the sorted positions S_j W / S_N and their ancestors.
extern "C" __global__ void pf_mn_walk(const double* cdf, const double* wtot, const unsigned* flag, unsigned n,
                                      unsigned kr, unsigned key0, unsigned key1, unsigned b0, const double* sums,
                                      unsigned* anc) {
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const unsigned chunks = (n + PF_MN_CHUNK - 1) / PF_MN_CHUNK;
    const unsigned c = blockIdx.x * PF_BLOCK + threadIdx.x;
    if (c >= chunks) return;
    const double* s = sums + (size_t)b * (chunks + 1);
    const double* cd = cdf + (size_t)b * n;
    const double scale = wtot[b] / s[chunks];
    double run = s[c];
    unsigned i = 0;
    const unsigned j0 = c * PF_MN_CHUNK, end = pf_umin(j0 + PF_MN_CHUNK, n);
    for (unsigned j = j0; j < end; ++j) {
        run += pf_exp_draw(j, b + b0, kr, key0, key1);
        const double x = run * scale;
        if (j == j0) i = pf_first_above(cd, n, x);
        while (i < n && cd[i] <= x) ++i;
        if (i == n) i = pf_first_above(cd, n, x);
        anc[(size_t)b * n + j] = i;
    }
}

// The position of slot k: systematic (one u for all) or stratified (u of slot k).
__device__ __forceinline__ double pf_grid_pos(unsigned k, bool strat, double u0, double scale, unsigned b,
                                              unsigned kr, unsigned key0, unsigned key1) {
    const double u = strat ? pf_uniform_f64(pf_words(k, b, kr, PF_PURPOSE_RESAMPLE, 0, key0, key1).v[0]) : u0;
    return ((double)k + u) * scale;
}

// #{k < n : pos(k) < c} (grid.rs, count_below).
__device__ __forceinline__ unsigned pf_grid_count(double c, unsigned n, bool strat, double u0, double scale,
                                                  unsigned b, unsigned kr, unsigned key0, unsigned key1) {
    const double e = floor(c / scale);
    const unsigned ei = (e != e || e < 0.0) ? 0u : (e >= (double)n ? n : (unsigned)e);
    const unsigned lo = ei >= 2 ? ei - 2 : 0u, hi = pf_umin(ei + 2, n);
    unsigned cnt = lo;
    for (unsigned k = lo; k < hi; ++k) cnt += pf_grid_pos(k, strat, u0, scale, b, kr, key0, key1) < c ? 1u : 0u;
    return cnt;
}

// A thread a particle (a grid of (ceil(N / PF_BLOCK), B) blocks); strat: 0 systematic,
// 1 stratified. Each count is computed once: a thread's predecessor's count comes from
// its neighbour in the block (the block's first thread counts its own predecessor).
extern "C" __global__ void pf_grid(const double* cdf, const double* wtot, const unsigned* flag, unsigned n,
                                   unsigned kr, unsigned key0, unsigned key1, unsigned b0, unsigned strat, unsigned* anc) {
    __shared__ unsigned cnt[PF_BLOCK + 1];
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const double* c = cdf + (size_t)b * n;
    const double scale = wtot[b] / (double)n;
    const double u0 = pf_uniform_f64(pf_words(0, b + b0, kr, PF_PURPOSE_RESAMPLE, 0, key0, key1).v[0]);
    const bool st = strat != 0;
    const unsigned i0 = blockIdx.x * PF_BLOCK, i = i0 + threadIdx.x;
    if (i < n) cnt[threadIdx.x + 1] = pf_grid_count(c[i], n, st, u0, scale, b + b0, kr, key0, key1);
    if (threadIdx.x == 0) cnt[0] = i0 == 0 ? 0u : pf_grid_count(c[i0 - 1], n, st, u0, scale, b + b0, kr, key0, key1);
    __syncthreads();
    if (i >= n) return;
    const unsigned from = cnt[threadIdx.x];
    unsigned to = cnt[threadIdx.x + 1];
    // The last particle of positive weight also takes the slots past the total.
    if (c[i] == c[n - 1] && (i == 0 || c[i - 1] != c[i])) to = n;
    unsigned* a = anc + (size_t)b * n;
    for (unsigned k = from; k < to; ++k) a[k] = i;
}

// Subset s of n particles in k: [s n / k, (s + 1) n / k).
__device__ __forceinline__ unsigned pf_sub_lo(unsigned s, unsigned k, unsigned n) {
    return (unsigned)((unsigned long long)s * n / k);
}

// A block a filter: plan [B][3k] = the draws of each subset, where its surplus starts in
// the exchange pool, where its deficit starts reading it (subsets.rs, plan).
extern "C" __global__ void pf_sub_plan(const double* cdf, const double* wtot, const unsigned* flag, unsigned n,
                                       unsigned kr, unsigned key0, unsigned key1, unsigned b0, unsigned k, unsigned* plan) {
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const double* c = cdf + (size_t)b * n;
    const double scale = wtot[b] / (double)n;
    const double u0 = pf_uniform_f64(pf_words(0, b + b0, kr, PF_PURPOSE_RESAMPLE, 0, key0, key1).v[0]);
    unsigned* p = plan + (size_t)b * 3 * k;
    const double last = c[n - 1];
    // First each subset's cumulative count (in the draws' place), then the differences.
    for (unsigned s = threadIdx.x; s < k; s += PF_BLOCK) {
        const unsigned a = pf_sub_lo(s, k, n), e = pf_sub_lo(s + 1, k, n);
        const double top = e > a ? c[e - 1] : (a > 0 ? c[a - 1] : 0.0);
        p[s] = (top == last && e > a) ? n : pf_grid_count(top, n, false, u0, scale, b + b0, kr, key0, key1);
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned prev = 0, o = 0, in = 0;
    for (unsigned s = 0; s < k; ++s) {
        const unsigned cs = p[s] > prev ? p[s] : prev;
        const unsigned d = cs - prev;
        prev = cs;
        const unsigned m = pf_sub_lo(s + 1, k, n) - pf_sub_lo(s, k, n);
        p[s] = d;
        p[k + s] = o;
        p[2 * k + s] = in;
        o += d > m ? d - m : 0u;
        in += m > d ? m - d : 0u;
    }
}

// A block a subset (a grid of (k, B) blocks): its draws, searched in its own range of
// the cumulative weights, written to its slots or through the exchange pool.
extern "C" __global__ void pf_sub_draw(const double* cdf, const unsigned* flag, unsigned n, unsigned kr,
                                       unsigned key0, unsigned key1, unsigned b0, unsigned k, const unsigned* plan,
                                       unsigned* anc) {
    const unsigned b = blockIdx.y, s = blockIdx.x;
    if (flag[b] == 0) return;
    const double* c = cdf + (size_t)b * n;
    const unsigned* p = plan + (size_t)b * 3 * k;
    const unsigned nd = p[s];
    if (nd == 0) return;
    const unsigned a = pf_sub_lo(s, k, n), e = pf_sub_lo(s + 1, k, n), m = e - a;
    const double base = a > 0 ? c[a - 1] : 0.0, top = c[e - 1];
    const double u = pf_uniform_f64(pf_words(s, b + b0, kr, PF_PURPOSE_RESAMPLE, 1, key0, key1).v[0]);
    const double step = (top - base) / (double)nd;
    unsigned* out = anc + (size_t)b * n;
    for (unsigned j = threadIdx.x; j < nd; j += PF_BLOCK) {
        const double x = base + ((double)j + u) * step;
        unsigned i = pf_above(c, a, e, x);
        if (i >= e) {
            i = e - 1;
            while (i > a && c[i] == c[i - 1]) --i;
        }
        unsigned slot;
        if (j < m) {
            slot = a + j;
        } else {
            const unsigned q = p[k + s] + (j - m);
            // The first subset t whose deficit ends past pool slot q.
            unsigned lo = 0, hi = k;
            while (lo < hi) {
                const unsigned mid = lo + (hi - lo) / 2;
                const unsigned mm = pf_sub_lo(mid + 1, k, n) - pf_sub_lo(mid, k, n);
                const unsigned end = p[2 * k + mid] + (mm > p[mid] ? mm - p[mid] : 0u);
                if (end <= q) lo = mid + 1;
                else hi = mid;
            }
            slot = pf_sub_lo(lo, k, n) + p[lo] + (q - p[2 * k + lo]);
        }
        out[slot] = i;
    }
}
