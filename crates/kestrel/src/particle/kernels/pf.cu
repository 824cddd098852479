// The bootstrap particle filter on the GPU: B filters of N particles. A filter's particles
// are cut into G chunks of PF_PER x PF_BLOCK (PF_PER, "per", a launch argument chosen so
// that the whole grid fills the device: one chunk a filter at B = 10^4 x N = 10^3, about a
// thousand at B = 1 x N = 10^7), one block per chunk, a grid of (G, B) blocks. Per step:
//
//   pf_ancestors  (after a step that resampled by Metropolis or rejection) each slot's
//                 ancestor; these need no prefix sum.
//   pf_step       gather the ancestor (or keep the particle), draw or propagate, weight in
//                 the log domain; the chunk's largest log-weight and, relative to it and
//                 to the chunk's first particle, its sums (f64) of w, w^2, w (x - r),
//                 w (x - r)(x - r)^T, formed online (a thread rescales its sums when its
//                 largest log-weight grows), one record a chunk
//   pf_combine    one block a filter: the largest log-weight, each chunk's scale
//                 exp(m_chunk - m), the totals, mean, covariance, log-likelihood, ESS, the
//                 resampling decision and the chunks' offsets in the cumulative sum (f64)
//   pf_offspring  (when resampling by systematic or stratified) the cumulative sum of the
//                 weights in f64, a chunk a block as pf_cdf forms it, and from it each
//                 particle's slots, which it writes its index into: no sum is stored and
//                 no slot searched
//   pf_fill       (after pf_offspring) the long ranges of slots it listed
//   pf_cdf        (for the other resamplers of resample.cu) the cumulative sum of the
//                 weights in f64: each chunk scans exp(lw - m_chunk) and scales it
//
// Particles and log-weights are double-buffered (read the old, write the new), so a step
// reads and writes each particle once; nothing is summed in single precision. The random
// numbers and the models are those of the CPU path (particle/philox.rs,
// particle/models.rs); the sums are formed in a different order, so results agree with
// the CPU to rounding, except where rounding flips a resampling choice.

#define PF_STRIDE (2 + NX + NX * (NX + 1) / 2)
// A chunk's record: its largest log-weight, its sums (PF_STRIDE), its reference particle.
#define PF_REC (1 + PF_STRIDE + NX)
// Sums reduced together in one pass of a block reduction.
#define PF_COLS 8
// Systematic and stratified (pf_offspring): a range of slots longer than PF_LONG, in a
// tile whose slots do not fit in shared memory, is not written by its particle's thread
// but listed, in pieces of at most PF_PIECE slots, for pf_fill (both set by the launcher).
// Weights per thread in a tile of the cumulative sum.
#ifndef PF_ITEMS
#define PF_ITEMS 8
#endif

// pf_step reads and writes a particle as PF_VW-wide vectors where its size allows (a
// warp's scalar loads of a 16-byte particle touch each cache line four times; the
// buffers are aligned to 256 bytes and a particle starts at a multiple of NX values).
#if PF_F32 && NX % 4 == 0
#define PF_VW 4
typedef float4 pf_vec_t;
#elif PF_F32 && NX % 2 == 0
#define PF_VW 2
typedef float2 pf_vec_t;
#elif !PF_F32 && NX % 2 == 0
#define PF_VW 2
typedef double2 pf_vec_t;
#else
#define PF_VW 1
#endif

__device__ __forceinline__ void pf_load(const real_t* __restrict__ p, real_t* s) {
#if PF_VW == 1
#pragma unroll
    for (int a = 0; a < NX; ++a) s[a] = p[a];
#else
    const pf_vec_t* v = reinterpret_cast<const pf_vec_t*>(p);
#pragma unroll
    for (int q = 0; q < NX / PF_VW; ++q) {
        const pf_vec_t t = v[q];
        s[q * PF_VW] = t.x;
        s[q * PF_VW + 1] = t.y;
#if PF_VW == 4
        s[q * PF_VW + 2] = t.z;
        s[q * PF_VW + 3] = t.w;
#endif
    }
#endif
}

__device__ __forceinline__ void pf_store(real_t* __restrict__ p, const real_t* s) {
#if PF_VW == 1
#pragma unroll
    for (int a = 0; a < NX; ++a) p[a] = s[a];
#else
    pf_vec_t* v = reinterpret_cast<pf_vec_t*>(p);
#pragma unroll
    for (int q = 0; q < NX / PF_VW; ++q) {
        pf_vec_t t;
        t.x = s[q * PF_VW];
        t.y = s[q * PF_VW + 1];
#if PF_VW == 4
        t.z = s[q * PF_VW + 2];
        t.w = s[q * PF_VW + 3];
#endif
        v[q] = t;
    }
#endif
}

__device__ __forceinline__ bool pf_isnan(real_t v) { return v != v; }

__device__ __forceinline__ unsigned pf_umin(unsigned a, unsigned b) { return a < b ? a : b; }
__device__ __forceinline__ unsigned pf_umax(unsigned a, unsigned b) { return a > b ? a : b; }

__device__ __forceinline__ double pf_block_max(double v, double* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = PF_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    double r = red[0];
    __syncthreads();
    return r;
}

// The block's totals of the PF_STRIDE sums, PF_COLS at a time, into tot (shared).
__device__ __forceinline__ void pf_block_sums(const double* acc, double (*red)[PF_BLOCK], double* tot) {
#pragma unroll
    for (int c0 = 0; c0 < PF_STRIDE; c0 += PF_COLS) {
#pragma unroll
        for (int c = 0; c < PF_COLS; ++c)
            if (c0 + c < PF_STRIDE) red[c][threadIdx.x] = acc[c0 + c];
        __syncthreads();
        for (unsigned s = PF_BLOCK / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) {
#pragma unroll
                for (int c = 0; c < PF_COLS; ++c)
                    if (c0 + c < PF_STRIDE) red[c][threadIdx.x] += red[c][threadIdx.x + s];
            }
            __syncthreads();
        }
        if (threadIdx.x < PF_COLS && c0 + (int)threadIdx.x < PF_STRIDE) tot[c0 + threadIdx.x] = red[threadIdx.x][0];
        __syncthreads();
    }
}

// The first index in [lo, hi) with c[i] > x (hi when none).
__device__ __forceinline__ unsigned pf_above(const double* c, unsigned lo, unsigned hi, double x) {
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (c[mid] <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

#define PF_SYSTEMATIC 0
#define PF_STRATIFIED 1
#define PF_METROPOLIS 2
#define PF_REJECTION 3

// Slot i's target in the cumulative weights (systematic: one uniform a filter;
// stratified: one a slot): (i + u) x total / n.
__device__ __forceinline__ double pf_target(unsigned i, unsigned scheme, double u0, double scale, unsigned b,
                                            unsigned kr, unsigned key0, unsigned key1) {
    const double u = scheme == PF_SYSTEMATIC
                         ? u0
                         : pf_uniform_f64(pf_words(i, b, kr, PF_PURPOSE_RESAMPLE, 0, key0, key1).v[0]);
    return ((double)i + u) * scale;
}

// The first slot whose target is at least c (n when none), given target(e) for a slot e
// held as a double: the targets increase with the slot, so it is the slot that
// c / scale - u estimates, moved a step or two where that rounds the other way, or else
// (a scale that is zero, or not a number) found by a search.
template <class Target>
__device__ __forceinline__ unsigned pf_first(double c, double inv, double u, unsigned n, Target target) {
    const double top = (double)n;
    double e = ceil(c * inv - u);
    e = e > 0.0 ? (e < top ? e : top) : 0.0;
    for (int s = 0; s < 4; ++s) {
        if (e > 0.0 && !(target(e - 1.0) < c)) e -= 1.0;
        else if (e < top && target(e) < c) e += 1.0;
        else return (unsigned)e;
    }
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        const unsigned mid = lo + (hi - lo) / 2;
        if (target((double)mid) < c) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// The ancestors of the slots of filters that resampled after step kr by Metropolis or
// rejection (no prefix sum): PF_AITEMS x PF_BLOCK slots a block (PF_AITEMS is set by the
// launcher), a grid of (ceil(N / (PF_AITEMS x PF_BLOCK)), B) blocks. Systematic and
// stratified are pf_offspring's.
extern "C" __global__ void pf_ancestors(const real_t* lw, const double* fmx, unsigned* anc, const unsigned* flag,
                                        unsigned n, unsigned kr, unsigned key0, unsigned key1, unsigned b0,
                                        unsigned scheme, unsigned steps_b) {
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const unsigned j0 = blockIdx.x * (PF_AITEMS * PF_BLOCK);
    const size_t base = (size_t)b * n;
    // The weights relative to the largest, which the max-shift makes exactly 1.
    const real_t mt = (real_t)fmx[b];
    auto weight = [&](unsigned i) { return (double)exp(lw[base + i] - mt); };
    for (unsigned q = 0; q < PF_AITEMS; ++q) {
        const unsigned j = j0 + q * PF_BLOCK + threadIdx.x;
        if (j >= n) break;
        unsigned a = j;
        if (scheme == PF_METROPOLIS) {
            double wk = weight(a);
            PfWords x;
            for (unsigned s = 0; s < steps_b; ++s) {
                if (s % 2 == 0) x = pf_words(j, b + b0, kr, PF_PURPOSE_RESAMPLE, s / 2, key0, key1);
                const unsigned p = 2 * (s % 2);
                const unsigned cand = pf_index(x.v[p], n);
                const double wc = weight(cand);
                if (pf_uniform_f64(x.v[p + 1]) * wk <= wc) { a = cand; wk = wc; }
            }
        } else {
            // Rejection against the largest weight.
            PfWords x;
            for (unsigned s = 0; s < (1u << 25); ++s) {
                if (s % 2 == 0) x = pf_words(j, b + b0, kr, PF_PURPOSE_RESAMPLE, s / 2, key0, key1);
                const unsigned p = 2 * (s % 2);
                if (s > 0) a = pf_index(x.v[p], n);
                if (pf_uniform_f64(x.v[p + 1]) <= weight(a)) break;
            }
        }
        anc[base + j] = a;
    }
}

// Step k: the particles x and log-weights lw of step k - 1 (ancestors anc where the filter
// resampled) to those of step k in xn and lwn, and one record a chunk in rec.
extern "C" __global__ void pf_step(const real_t* __restrict__ x, real_t* __restrict__ xn,
                                   const real_t* __restrict__ lw, real_t* __restrict__ lwn,
                                   const unsigned* __restrict__ anc, const unsigned* __restrict__ flag,
                                   double* __restrict__ rec, const real_t* __restrict__ z, unsigned k,
                                   unsigned n, unsigned steps, unsigned per, unsigned g, unsigned key0,
                                   unsigned key1, unsigned b0) {
    __shared__ double red[PF_COLS][PF_BLOCK];
    __shared__ double tot[PF_STRIDE];
    __shared__ double sref[NX];
    const unsigned b = blockIdx.y;
    const size_t base = (size_t)b * n;
    const unsigned start = blockIdx.x * per * PF_BLOCK;
    const bool moved = k > 0 && flag[b] != 0;
    const real_t* zk = z + ((size_t)b * steps + k) * NY;
    bool observed = true;
    for (int q = 0; q < NY; ++q) observed = observed && !pf_isnan(zk[q]);
    // This thread's largest log-weight m and its sums relative to exp(m).
    double m = -PF_INF;
    double acc[PF_STRIDE];
#pragma unroll
    for (int c = 0; c < PF_STRIDE; ++c) acc[c] = 0.0;
    for (unsigned t = 0; t < per; ++t) {
        const unsigned j0 = start + t * PF_BLOCK;
        if (j0 >= n) break;
        const unsigned j = j0 + threadIdx.x;
        real_t s[NX];
        real_t l = (real_t)0;
        if (j < n) {
            PfNormals noise(key0, key1, j, b + b0, k, PF_PURPOSE_PROPAGATE);
            if (k == 0) {
                pf_prior(s, noise);
            } else {
                const size_t from = base + (moved ? anc[base + j] : j);
                pf_load(x + from * NX, s);
                if (!moved) l = lw[base + j];
                pf_propagate(k, s, noise);
            }
            pf_store(xn + (base + j) * NX, s);
            if (observed) {
                real_t ll = pf_loglik(k, s, zk);
                l = pf_isnan(ll) ? (real_t)(-PF_INF) : l + ll;
            }
            lwn[base + j] = l;
        }
        if (t == 0) {
            // The chunk's first particle is the reference of its sums.
            if (threadIdx.x == 0)
                for (int a = 0; a < NX; ++a) sref[a] = (double)s[a];
            __syncthreads();
        }
        const double ld = (double)l;
        if (j < n && ld > -PF_INF) {
            if (ld > m) {
                if (m > -PF_INF) {
                    const double f = (double)exp((real_t)m - l);
                    acc[0] *= f;
                    acc[1] *= f * f;
#pragma unroll
                    for (int c = 2; c < PF_STRIDE; ++c) acc[c] *= f;
                }
                m = ld;
            }
            // The weight in the filter's precision (as the CPU forms it), summed in f64.
            const double wd = (double)exp(l - (real_t)m);
            acc[0] += wd;
            acc[1] += wd * wd;
            double d[NX];
#pragma unroll
            for (int a = 0; a < NX; ++a) {
                d[a] = (double)s[a] - sref[a];
                acc[2 + a] += wd * d[a];
            }
            int c = 2 + NX;
#pragma unroll
            for (int a = 0; a < NX; ++a) {
                const double va = wd * d[a];
#pragma unroll
                for (int e = a; e < NX; ++e) acc[c++] += va * d[e];
            }
        }
    }
    const double mb = pf_block_max(m, red[0]);
    const double f = m > -PF_INF ? exp(m - mb) : 0.0;
    acc[0] *= f;
    acc[1] *= f * f;
#pragma unroll
    for (int c = 2; c < PF_STRIDE; ++c) acc[c] *= f;
    pf_block_sums(acc, red, tot);
    double* r = rec + ((size_t)b * g + blockIdx.x) * PF_REC;
    if (threadIdx.x == 0) r[0] = mb;
    for (unsigned c = threadIdx.x; c < PF_STRIDE; c += PF_BLOCK) r[1 + c] = tot[c];
    if (threadIdx.x < NX) r[1 + PF_STRIDE + threadIdx.x] = sref[threadIdx.x];
}

// One block a filter: totals over the chunks' records, the step's outputs, the resampling
// decision, each chunk's scale and its offset in the cumulative sum of the weights; a
// filter whose weights are all zero (or not a number) records the first such step + 1 in
// fail[b].
extern "C" __global__ void pf_combine(const double* rec, double* coef, double* offs, const real_t* z,
                                      double* fmx, double* logprev, double* wtot, unsigned* flag,
                                      unsigned* fail, real_t* mean, real_t* cov, real_t* loglik,
                                      real_t* ess, unsigned* nlong, unsigned k, unsigned n, unsigned steps,
                                      unsigned g, double threshold) {
    __shared__ double red[PF_COLS][PF_BLOCK];
    __shared__ double tot[PF_STRIDE];
    __shared__ double r0[NX];
    const unsigned b = blockIdx.y;
    const double* rb = rec + (size_t)b * g * PF_REC;
    double m = -PF_INF;
    for (unsigned j = threadIdx.x; j < g; j += PF_BLOCK) m = fmax(m, rb[(size_t)j * PF_REC]);
    const double mx = pf_block_max(m, red[0]);
    const bool valid = mx > -PF_INF && mx < PF_INF;
    if (threadIdx.x < NX) r0[threadIdx.x] = rb[1 + PF_STRIDE + threadIdx.x];
    __syncthreads();
    // Each thread a contiguous range of chunks.
    const unsigned per = (g + PF_BLOCK - 1) / PF_BLOCK;
    const unsigned j0 = threadIdx.x * per;
    const unsigned j1 = pf_umin(j0 + per, g);
    double acc[PF_STRIDE];
#pragma unroll
    for (int c = 0; c < PF_STRIDE; ++c) acc[c] = 0.0;
    for (unsigned j = j0; j < j1; ++j) {
        const double* q = rb + (size_t)j * PF_REC;
        const double cj = valid && q[0] > -PF_INF ? exp(q[0] - mx) : 0.0;
        coef[(size_t)b * g + j] = cj;
        const double s0 = q[1];
        acc[0] += cj * s0;
        acc[1] += cj * cj * q[2];
        // The chunk's sums moved from its reference to the filter's (chunk 0's).
        double e[NX], m1[NX];
#pragma unroll
        for (int a = 0; a < NX; ++a) {
            e[a] = q[1 + PF_STRIDE + a] - r0[a];
            m1[a] = q[3 + a];
            acc[2 + a] += cj * (m1[a] + s0 * e[a]);
        }
        int c = 2 + NX;
#pragma unroll
        for (int a = 0; a < NX; ++a)
#pragma unroll
            for (int d = a; d < NX; ++d) {
                acc[c] += cj * (q[1 + c] + e[a] * m1[d] + m1[a] * e[d] + s0 * e[a] * e[d]);
                ++c;
            }
    }
    // Exclusive offsets of the chunks: a scan of the threads' range totals, then the range.
    double* run = red[0];
    run[threadIdx.x] = acc[0];
    __syncthreads();
    if (threadIdx.x == 0) {
        // Only the threads that hold chunks (one at B = 10^4 x N = 10^3).
        const unsigned busy = pf_umin((g + per - 1) / per, PF_BLOCK);
        double o = 0.0;
        for (unsigned t = 0; t < busy; ++t) {
            const double v = run[t];
            run[t] = o;
            o += v;
        }
    }
    __syncthreads();
    double o = run[threadIdx.x];
    for (unsigned j = j0; j < j1; ++j) {
        offs[(size_t)b * g + j] = o;
        o += coef[(size_t)b * g + j] * rb[(size_t)j * PF_REC + 1];
    }
    __syncthreads();
    pf_block_sums(acc, red, tot);
    if (threadIdx.x != 0) return;
    if (!valid && fail[b] == 0) fail[b] = k + 1;
    const double s = tot[0], s2 = tot[1], nf = (double)n;
    const double log_now = mx + log(s);
    const real_t* zk = z + ((size_t)b * steps + k) * NY;
    bool observed = true;
    for (int q = 0; q < NY; ++q) observed = observed && !pf_isnan(zk[q]);
    const double prev = k == 0 ? log(nf) : logprev[b];
    const size_t o2 = (size_t)b * steps + k;
    loglik[o2] = (real_t)(observed ? log_now - prev : 0.0);
    const double e = s * s / s2;
    ess[o2] = (real_t)e;
    double dm[NX];
    for (int a = 0; a < NX; ++a) {
        dm[a] = tot[2 + a] / s;
        mean[o2 * NX + a] = (real_t)(r0[a] + dm[a]);
    }
    int t = 2 + NX;
    for (int a = 0; a < NX; ++a)
        for (int c = a; c < NX; ++c) {
            real_t v = (real_t)(tot[t++] / s - dm[a] * dm[c]);
            cov[o2 * NX * NX + a * NX + c] = v;
            cov[o2 * NX * NX + c * NX + a] = v;
        }
    const bool resample = k + 1 < steps && (threshold >= 1.0 || e < threshold * nf);
    flag[b] = resample ? 1u : 0u;
    nlong[b] = 0u;
    logprev[b] = resample ? log(nf) : log_now;
    wtot[b] = s;
    fmx[b] = mx;
}

#define PF_PAD(i) ((i) + (i) / PF_ITEMS)

// One tile of a chunk's cumulative sum: PF_ITEMS x PF_BLOCK weights exp(lw - mt) from
// particle t0 into tile (zero past end; thread t's are particles t0 + t PF_ITEMS + q, at
// tile[PF_PAD(t PF_ITEMS + q)]), a thread sums its PF_ITEMS neighbours in order (total),
// a block scan of the threads' sums; the return value is the tile's sums before the
// thread's (carry in), and sc[PF_BLOCK - 1] holds the tile's total until the next barrier.
// The callers form a particle's cumulative weight as before + (the thread's running sum
// of tile to it), so pf_cdf and pf_offspring form the same sums to the bit.
__device__ __forceinline__ double pf_tile_sums(const real_t* lw, unsigned t0, unsigned end, double mb, double* tile,
                                               double* sc, double carry, double& total) {
    const real_t mt = (real_t)mb;
#pragma unroll
    for (int q = 0; q < PF_ITEMS; ++q) {
        const unsigned i = t0 + q * PF_BLOCK + threadIdx.x;
        tile[PF_PAD(q * PF_BLOCK + threadIdx.x)] = i < end && mb > -PF_INF ? (double)exp(lw[i] - mt) : 0.0;
    }
    __syncthreads();
    double s = 0.0;
#pragma unroll
    for (int q = 0; q < PF_ITEMS; ++q) s += tile[PF_PAD(threadIdx.x * PF_ITEMS + q)];
    total = s;
    sc[threadIdx.x] = s;
    __syncthreads();
    for (unsigned d = 1; d < PF_BLOCK; d <<= 1) {
        const double add = threadIdx.x >= d ? sc[threadIdx.x - d] : 0.0;
        __syncthreads();
        sc[threadIdx.x] += add;
        __syncthreads();
    }
    return carry + (threadIdx.x > 0 ? sc[threadIdx.x - 1] : 0.0);
}

// The cumulative sum of a filter's weights in f64, for filters that resample (the
// resamplers of resample.cu): each chunk scans exp(lw - m_chunk) in tiles (pf_tile_sums)
// and scales by its coefficient. A chunk's offset comes from pf_step's sum of its weights,
// which rounds otherwise than this scan (by about f32's rounding of exp), so a chunk's
// last values may pass the next chunk's offset: they are held at it, which keeps the whole
// sum non-decreasing (the searches need it so).
extern "C" __global__ void pf_cdf(const real_t* lw, const double* rec, const double* coef,
                                  const double* offs, double* cdf, const unsigned* flag, unsigned n,
                                  unsigned per, unsigned g) {
    // A thread reads PF_ITEMS neighbours: one pad a PF_ITEMS keeps the banks apart.
    __shared__ double tile[PF_ITEMS * PF_BLOCK + PF_BLOCK];
    __shared__ double sc[PF_BLOCK];
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const size_t r = (size_t)b * g + blockIdx.x;
    const double mb = rec[r * PF_REC];
    const double cb = coef[r], off = offs[r];
    const double next = blockIdx.x + 1 < g ? offs[r + 1] : PF_INF;
    const size_t base = (size_t)b * n;
    const unsigned start = blockIdx.x * per * PF_BLOCK;
    const unsigned end = pf_umin(start + per * PF_BLOCK, n);
    double carry = 0.0;
    for (unsigned t0 = start; t0 < end; t0 += PF_ITEMS * PF_BLOCK) {
        double total;
        const double before = pf_tile_sums(lw + base, t0, end, mb, tile, sc, carry, total);
        double s = 0.0;
#pragma unroll
        for (int q = 0; q < PF_ITEMS; ++q) {
            const int at = PF_PAD(threadIdx.x * PF_ITEMS + q);
            s += tile[at];
            tile[at] = before + s;
        }
        carry += sc[PF_BLOCK - 1];
        __syncthreads();
#pragma unroll
        for (int q = 0; q < PF_ITEMS; ++q) {
            const unsigned i = t0 + q * PF_BLOCK + threadIdx.x;
            if (i < end) cdf[base + i] = fmin(off + cb * tile[PF_PAD(q * PF_BLOCK + threadIdx.x)], next);
        }
        __syncthreads();
    }
}

// A chunk's cumulative weights as pf_cdf stores them, a tile at a time (pf_offspring):
// for each of the thread's particles t0 + t PF_ITEMS + q, its end slot hi[q] = first(c)
// (past end: the last one's), and rise, the thread's last particle (+ 1) whose c passes
// its predecessor's (the chunk's first particle's predecessor: the chunk's offset), kept
// over the tiles with cprev, the last c. The weights stay in tile until the next barrier
// (sx: PF_BLOCK doubles of shared memory).
struct PfChunk {
    double mb, cb, off, next;
    double carry, cprev;
};
template <class First>
__device__ __forceinline__ void pf_tile_c(const real_t* lw, unsigned t0, unsigned end, PfChunk& k, double* tile,
                                          double* sc, double* sx, unsigned* hi, unsigned& rise, First first) {
    double total;
    const double before = pf_tile_sums(lw, t0, end, k.mb, tile, sc, k.carry, total);
    k.carry += sc[PF_BLOCK - 1];
    const unsigned i0 = t0 + threadIdx.x * PF_ITEMS;
    // The thread's last c (its weights past end are zero, so the total is its last
    // particle's running sum) to the next thread.
    sx[threadIdx.x] = fmin(k.off + k.cb * (before + total), k.next);
    __syncthreads();
    double p = threadIdx.x == 0 ? k.cprev : sx[threadIdx.x - 1];
    double s = 0.0;
#pragma unroll
    for (int q = 0; q < PF_ITEMS; ++q) {
        s += tile[PF_PAD(threadIdx.x * PF_ITEMS + q)];
        if (i0 + q < end) {
            const double c = fmin(k.off + k.cb * (before + s), k.next);
            if (c > p) rise = i0 + q + 1;
            hi[q] = first(c);
            p = c;
        } else {
            hi[q] = q > 0 ? hi[q - 1] : 0u;
        }
    }
    k.cprev = sx[(pf_umin(end - t0, PF_ITEMS * PF_BLOCK) - 1) / PF_ITEMS];
}

// The largest of the block's v (unsigned; red: PF_BLOCK doubles of shared memory).
__device__ __forceinline__ unsigned pf_block_umax(unsigned v, double* red) {
    return (unsigned)pf_block_max((double)v, red);
}

// Lists slots [lo, hi) for particle i (pf_fill), in pieces of at most PF_PIECE slots.
__device__ __forceinline__ void pf_push(unsigned* count, unsigned* list, unsigned cap, unsigned lo, unsigned hi,
                                        unsigned i) {
    const unsigned m = (hi - lo + PF_PIECE - 1) / PF_PIECE;
    unsigned e = atomicAdd(count, m);
    for (unsigned p = 0; p < m && e < cap; ++p, ++e) {
        const unsigned a = lo + p * PF_PIECE;
        list[3 * (size_t)e] = a;
        list[3 * (size_t)e + 1] = pf_umin(a + PF_PIECE, hi);
        list[3 * (size_t)e + 2] = i;
    }
}

// Systematic and stratified resampling after step kr, for the filters that resample: a
// block a chunk (the grid of pf_step), each slot's ancestor in anc.
//
// Slot j's target is x_j = (j + u) x total / n (pf_target). The chunks' offsets (pf_combine)
// cut the targets among the chunks: chunk r holds the slots whose targets lie in
// [offs[r], offs[r + 1]) (the last chunk, those from offs[r] on). Within it, the chunk's
// cumulative weights c (pf_tile_sums scaled, held at the next offset: pf_cdf's values to
// the bit) give particle i the slots with targets in [c[i-1], c[i]) (c before the chunk's
// first particle: its offset), that is the slots from first(c[i-1]) to first(c[i]), with
// first(c) the number of slots whose target is below c (pf_first: an estimate and a
// step or two, not a search). A chunk's slots past its last c (the offsets and the scan
// round differently) go to the next chunk's first particle; the slots past the last c of
// all (the total rounds otherwise too) to the last particle whose c rises over its
// predecessor's (a chunk's first particle: over the chunk's offset; 0 when none rises).
// So each slot's ancestor is the first particle whose c passes its target, as a search
// of pf_cdf's sums finds it (pf_grid's selection), or past the end, the last particle of
// weight. Every slot is written once, by one particle.
//
// A tile's slots are staged in shared memory when they fit (2 x PF_ITEMS x PF_BLOCK):
// each particle marks the first slot it owns, a running maximum of the marks gives every
// slot its ancestor, and the block writes them in order. Otherwise each particle writes
// its own slots, and lists a range longer than PF_LONG for pf_fill.
// pf_offspring's blocks an SM: at most 64 registers a thread (unbounded it took 92, two
// blocks an SM, and ran the grid's eight an SM in four waves: 171 us at N = 10^7 on the
// H200 against 117 us).
#ifndef PF_OFFSPRING_BLOCKS
#define PF_OFFSPRING_BLOCKS 4
#endif
extern "C" __global__ void __launch_bounds__(PF_BLOCK, PF_OFFSPRING_BLOCKS) pf_offspring(const real_t* lw, const double* rec, const double* coef,
                                        const double* offs, const double* wtot, const unsigned* flag,
                                        unsigned* anc, unsigned* nlong, unsigned* list, unsigned cap, unsigned n,
                                        unsigned per, unsigned g, unsigned kr, unsigned key0, unsigned key1,
                                        unsigned b0, unsigned scheme) {
    // The tile's weights, then (once its sums are formed) its slots' marks: one buffer,
    // so that a block's shared memory lets the grid's eight blocks an SM be resident at
    // once (a separate buffer of marks ran them in two waves).
    __shared__ union {
        double tile[PF_ITEMS * PF_BLOCK + PF_BLOCK];
        unsigned mark[2 * PF_ITEMS * PF_BLOCK];
    } sh;
    double* const tile = sh.tile;
    unsigned* const smark = sh.mark;
    __shared__ double sc[PF_BLOCK];
    __shared__ double sx[PF_BLOCK];
    __shared__ unsigned sedge[PF_BLOCK];
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const size_t r = (size_t)b * g + blockIdx.x;
    const double mb = rec[r * PF_REC];
    const double cb = coef[r], off = offs[r];
    const bool last_chunk = blockIdx.x + 1 == g;
    const double next = last_chunk ? PF_INF : offs[r + 1];
    const size_t base = (size_t)b * n;
    const unsigned start = blockIdx.x * per * PF_BLOCK;
    const unsigned end = pf_umin(start + per * PF_BLOCK, n);
    const double scale = wtot[b] / (double)n, inv = 1.0 / scale;
    const double u0 = pf_uniform_f64(pf_words(0, b + b0, kr, PF_PURPOSE_RESAMPLE, 0, key0, key1).v[0]);
    // Stratified: each slot's own uniform, so the estimate takes the middle.
    const double u = scheme == PF_SYSTEMATIC ? u0 : 0.5;
    // Slot e's target, e held as a double (no conversion a target).
    auto at = [&](double e) {
        return scheme == PF_SYSTEMATIC ? (e + u0) * scale
                                       : pf_target((unsigned)e, scheme, u0, scale, b + b0, kr, key0, key1);
    };
    auto first = [&](double c) { return pf_first(c, inv, u, n, at); };
    unsigned* const count = nlong + b;
    unsigned* const lst = list + (size_t)b * cap * 3;
    unsigned* const ab = anc + base;
    // The first slot of the tile (its first particle's).
    unsigned lo_t = first(off);
    PfChunk ck{mb, cb, off, next, 0.0, off};
    unsigned rise = 0;
    for (unsigned t0 = start; t0 < end; t0 += PF_ITEMS * PF_BLOCK) {
        // Each of the thread's particles' end slot.
        unsigned hi[PF_ITEMS];
        pf_tile_c(lw + base, t0, end, ck, tile, sc, sx, hi, rise, first);
        const unsigned i0 = t0 + threadIdx.x * PF_ITEMS;
        sedge[threadIdx.x] = hi[PF_ITEMS - 1];
        __syncthreads();
        const unsigned lo0 = threadIdx.x == 0 ? lo_t : sedge[threadIdx.x - 1];
        // (The sums' block scan rounds otherwise than a running sum, so c might fall by an
        // ulp from one thread's particles to the next's, and ranges overlap: the marks
        // then keep the larger particle, and nothing is written out of bounds.)
        const unsigned L = lo_t, H = pf_umax(L, sedge[(pf_umin(end - t0, PF_ITEMS * PF_BLOCK) - 1) / PF_ITEMS]);
        const unsigned span = H - L;
        if (span <= 2 * PF_ITEMS * PF_BLOCK) {
            for (unsigned s = threadIdx.x; s < span; s += PF_BLOCK) smark[s] = 0;
            __syncthreads();
            // Each particle that owns a slot marks its first.
            unsigned lo = lo0;
#pragma unroll
            for (int q = 0; q < PF_ITEMS; ++q) {
                if (i0 + q < end && hi[q] > lo && lo >= L && lo < H) atomicMax(&smark[lo - L], i0 + q);
                lo = hi[q];
            }
            __syncthreads();
            // The running maximum: a thread over a run of neighbouring slots, a block scan
            // of the runs' maxima (slot L is always marked, so nothing is carried in).
            const unsigned seg = (span + PF_BLOCK - 1) / PF_BLOCK;
            const unsigned s0 = pf_umin(threadIdx.x * seg, span), s1 = pf_umin(s0 + seg, span);
            unsigned mx = 0;
            for (unsigned s = s0; s < s1; ++s) mx = pf_umax(mx, smark[s]);
            sedge[threadIdx.x] = mx;
            __syncthreads();
            for (unsigned d = 1; d < PF_BLOCK; d <<= 1) {
                const unsigned add = threadIdx.x >= d ? sedge[threadIdx.x - d] : 0u;
                __syncthreads();
                sedge[threadIdx.x] = pf_umax(sedge[threadIdx.x], add);
                __syncthreads();
            }
            unsigned run = threadIdx.x > 0 ? sedge[threadIdx.x - 1] : 0u;
            for (unsigned s = s0; s < s1; ++s) {
                run = pf_umax(run, smark[s]);
                smark[s] = run;
            }
            __syncthreads();
            for (unsigned s = threadIdx.x; s < span; s += PF_BLOCK) ab[L + s] = smark[s];
        } else {
            // More slots than shared memory holds: each particle its own.
            unsigned lo = lo0;
#pragma unroll
            for (int q = 0; q < PF_ITEMS; ++q) {
                if (i0 + q < end && hi[q] > lo) {
                    if (hi[q] - lo <= PF_LONG)
                        for (unsigned s = lo; s < hi[q]; ++s) ab[s] = i0 + q;
                    else
                        pf_push(count, lst, cap, lo, hi[q], i0 + q);
                }
                lo = hi[q];
            }
        }
        lo_t = H;
        __syncthreads();
    }
    // The chunk's slots past its last cumulative weight: the next chunk's first particle's
    // (whose cumulative weight is the first past them), or for the last chunk, the last
    // particle of positive weight.
    const unsigned top = last_chunk ? n : first(next);
    if (top <= lo_t) return;
    unsigned own = end + 1;
    if (last_chunk) {
        own = pf_block_umax(rise, sc);
        // A last chunk whose c never rises: the last rise before it.
        for (unsigned q = blockIdx.x; own == 0 && q-- > 0;) {
            const size_t rq = (size_t)b * g + q;
            PfChunk kq{rec[rq * PF_REC], coef[rq], offs[rq], offs[rq + 1], 0.0, offs[rq]};
            unsigned mine = 0;
            const unsigned e = pf_umin((q + 1) * per * PF_BLOCK, n);
            for (unsigned t0 = q * per * PF_BLOCK; t0 < e; t0 += PF_ITEMS * PF_BLOCK) {
                unsigned hi[PF_ITEMS];
                pf_tile_c(lw + base, t0, e, kq, tile, sc, sx, hi, mine, first);
                __syncthreads();
            }
            own = pf_block_umax(mine, sc);
        }
    }
    const unsigned owner = own > 0 ? own - 1 : 0u;
    if (top - lo_t <= PF_PIECE) {
        for (unsigned s = lo_t + threadIdx.x; s < top; s += PF_BLOCK) ab[s] = owner;
    } else if (threadIdx.x == 0) {
        pf_push(count, lst, cap, lo_t, top, owner);
    }
}

// The long ranges of slots pf_offspring listed, a warp a piece: a grid of (F, B) blocks.
extern "C" __global__ void pf_fill(const unsigned* flag, const unsigned* nlong, const unsigned* list, unsigned* anc,
                                   unsigned cap, unsigned n) {
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const unsigned m = pf_umin(nlong[b], cap);
    const unsigned warps = gridDim.x * (PF_BLOCK / 32), lane = threadIdx.x % 32;
    const unsigned* l = list + (size_t)b * cap * 3;
    for (unsigned e = blockIdx.x * (PF_BLOCK / 32) + threadIdx.x / 32; e < m; e += warps) {
        const unsigned lo = l[3 * (size_t)e], hi = l[3 * (size_t)e + 1], own = l[3 * (size_t)e + 2];
        for (unsigned s = lo + lane; s < hi; s += 32) anc[(size_t)b * n + s] = own;
    }
}

// The final weights relative to the largest (for the particles' output).
extern "C" __global__ void pf_weights_out(const real_t* lw, const double* fmx, real_t* w, unsigned n) {
    const unsigned b = blockIdx.y;
    const unsigned j = blockIdx.x * PF_BLOCK + threadIdx.x;
    if (j >= n) return;
    const size_t p = (size_t)b * n + j;
    w[p] = exp(lw[p] - (real_t)fmx[b]);
}
