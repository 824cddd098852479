// The bootstrap particle filter on the GPU: B filters of N particles, one thread per
// particle, a grid of (G, B) blocks of PF_BLOCK threads (G = ceil(N / PF_BLOCK)), so the
// same kernels serve one filter of 10^7 particles and 10^4 filters of 10^3. Per step:
//
//   pf_propagate   draw or propagate, weight (log domain), block maxima of the log-weights
//   pf_max         each filter's largest log-weight (the max-shift)
//   pf_weights     w = exp(lw - max), block sums (f64) of w, w^2, w (x - c), w (x - c)(x - c)^T
//   pf_moments     each filter: mean, covariance, log-likelihood, ESS, whether to resample,
//                  and the blocks' offsets in the cumulative sum (an exclusive scan, f64)
//   pf_cdf         the cumulative sum of the weights in f64 (block scan + offset)
//   pf_ancestors   systematic / stratified: binary search of each position; Metropolis and
//                  rejection: no prefix sum
//   pf_gather      copy the chosen particles (or all, for filters that did not resample)
//
// The random numbers and the models are those of the CPU path (particle/philox.rs,
// particle/models.rs); the sums are formed in a different order, so results agree with
// the CPU to rounding, except where rounding flips a resampling choice.

#define PF_STRIDE (2 + NX + NX * (NX + 1) / 2)

__device__ __forceinline__ bool pf_isnan(real_t v) { return v != v; }

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

__device__ __forceinline__ double pf_block_sum(double v, double* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = PF_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    double r = red[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void pf_propagate(real_t* x, real_t* lw, double* pmax, const real_t* z,
                                        unsigned k, unsigned n, unsigned steps, unsigned g,
                                        unsigned key0, unsigned key1) {
    __shared__ double red[PF_BLOCK];
    const unsigned b = blockIdx.y;
    const unsigned i = blockIdx.x * PF_BLOCK + threadIdx.x;
    double m = -PF_INF;
    if (i < n) {
        const size_t p = (size_t)b * n + i;
        real_t s[NX];
        for (int a = 0; a < NX; ++a) s[a] = x[p * NX + a];
        PfNormals noise(key0, key1, i, b, k, PF_PURPOSE_PROPAGATE);
        if (k == 0) pf_prior(s, noise);
        else pf_propagate(k, s, noise);
        for (int a = 0; a < NX; ++a) x[p * NX + a] = s[a];
        const real_t* zk = z + ((size_t)b * steps + k) * NY;
        bool observed = true;
        for (int j = 0; j < NY; ++j) observed = observed && !pf_isnan(zk[j]);
        real_t l = k == 0 ? (real_t)0 : lw[p];
        if (observed) {
            real_t ll = pf_loglik(k, s, zk);
            l = pf_isnan(ll) ? (real_t)(-PF_INF) : l + ll;
        }
        lw[p] = l;
        m = (double)l;
    }
    m = pf_block_max(m, red);
    if (threadIdx.x == 0) pmax[(size_t)b * g + blockIdx.x] = m;
}

// One block per filter: its largest log-weight; a filter whose weights are all zero (or
// NaN) records the first such step + 1 in fail[b].
extern "C" __global__ void pf_max(const double* pmax, double* fmx, unsigned* fail, unsigned g,
                                  unsigned k) {
    __shared__ double red[PF_BLOCK];
    const unsigned b = blockIdx.y;
    double m = -PF_INF;
    for (unsigned j = threadIdx.x; j < g; j += PF_BLOCK) m = fmax(m, pmax[(size_t)b * g + j]);
    m = pf_block_max(m, red);
    if (threadIdx.x == 0) {
        fmx[b] = m;
        if (!(m > -PF_INF) || m == PF_INF) {
            if (fail[b] == 0) fail[b] = k + 1;
        }
    }
}

extern "C" __global__ void pf_weights(const real_t* x, const real_t* lw, real_t* w,
                                      const double* fmx, double* part, unsigned n, unsigned g) {
    __shared__ double red[PF_BLOCK];
    const unsigned b = blockIdx.y;
    const unsigned i = blockIdx.x * PF_BLOCK + threadIdx.x;
    double acc[PF_STRIDE];
    for (int c = 0; c < PF_STRIDE; ++c) acc[c] = 0.0;
    if (i < n) {
        const size_t p = (size_t)b * n + i;
        const real_t mt = (real_t)fmx[b];
        real_t v = exp(lw[p] - mt);
        w[p] = v;
        double vd = (double)v;
        acc[0] = vd;
        acc[1] = vd * vd;
        double d[NX];
        for (int a = 0; a < NX; ++a) {
            d[a] = (double)x[p * NX + a] - (double)x[(size_t)b * n * NX + a];
            acc[2 + a] = vd * d[a];
        }
        int t = 2 + NX;
        for (int a = 0; a < NX; ++a) {
            double va = vd * d[a];
            for (int c = a; c < NX; ++c) acc[t++] = va * d[c];
        }
    }
    for (int c = 0; c < PF_STRIDE; ++c) {
        double s = pf_block_sum(acc[c], red);
        if (threadIdx.x == 0) part[((size_t)b * g + blockIdx.x) * PF_STRIDE + c] = s;
    }
}

// One block per filter: totals over the blocks' sums, the step's outputs, the resampling
// decision, and the blocks' offsets in the cumulative sum of the weights.
extern "C" __global__ void pf_moments(const double* part, double* offs, const real_t* x,
                                      const real_t* z, const double* fmx, double* logprev,
                                      double* wtot, unsigned* flag, real_t* mean, real_t* cov,
                                      real_t* loglik, real_t* ess, unsigned k, unsigned n,
                                      unsigned steps, unsigned g, double threshold) {
    __shared__ double red[PF_BLOCK];
    __shared__ double tot[PF_STRIDE];
    __shared__ double run[PF_BLOCK];
    const unsigned b = blockIdx.y;
    // Each thread takes a contiguous range of blocks.
    const unsigned per = (g + PF_BLOCK - 1) / PF_BLOCK;
    const unsigned j0 = threadIdx.x * per;
    const unsigned j1 = j0 + per < g ? j0 + per : g;
    for (int c = 0; c < PF_STRIDE; ++c) {
        double s = 0.0;
        for (unsigned j = j0; j < j1; ++j) s += part[((size_t)b * g + j) * PF_STRIDE + c];
        s = pf_block_sum(s, red);
        if (threadIdx.x == 0) tot[c] = s;
        if (c == 0) {
            // Exclusive offsets of the blocks: this thread's range total, then a scan of
            // the threads' totals (one thread, PF_BLOCK values), then the range.
            double r = 0.0;
            for (unsigned j = j0; j < j1; ++j) r += part[((size_t)b * g + j) * PF_STRIDE];
            run[threadIdx.x] = r;
            __syncthreads();
            if (threadIdx.x == 0) {
                double acc = 0.0;
                for (unsigned t = 0; t < PF_BLOCK; ++t) {
                    double v = run[t];
                    run[t] = acc;
                    acc += v;
                }
            }
            __syncthreads();
            double o = run[threadIdx.x];
            for (unsigned j = j0; j < j1; ++j) {
                offs[(size_t)b * g + j] = o;
                o += part[((size_t)b * g + j) * PF_STRIDE];
            }
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    const double s = tot[0], s2 = tot[1], nf = (double)n;
    const double log_now = fmx[b] + log(s);
    const real_t* zk = z + ((size_t)b * steps + k) * NY;
    bool observed = true;
    for (int j = 0; j < NY; ++j) observed = observed && !pf_isnan(zk[j]);
    const double prev = k == 0 ? log(nf) : logprev[b];
    const size_t o = (size_t)b * steps + k;
    loglik[o] = (real_t)(observed ? log_now - prev : 0.0);
    const double e = s * s / s2;
    ess[o] = (real_t)e;
    double dm[NX];
    for (int a = 0; a < NX; ++a) {
        dm[a] = tot[2 + a] / s;
        mean[o * NX + a] = (real_t)((double)x[(size_t)b * n * NX + a] + dm[a]);
    }
    int t = 2 + NX;
    for (int a = 0; a < NX; ++a)
        for (int c = a; c < NX; ++c) {
            real_t v = (real_t)(tot[t++] / s - dm[a] * dm[c]);
            cov[o * NX * NX + a * NX + c] = v;
            cov[o * NX * NX + c * NX + a] = v;
        }
    const bool resample = k + 1 < steps && (threshold >= 1.0 || e < threshold * nf);
    flag[b] = resample ? 1u : 0u;
    logprev[b] = resample ? log(nf) : log_now;
    wtot[b] = s;
}

// Inclusive cumulative sum of a filter's weights in f64: a scan within the block
// (Hillis-Steele in shared memory) plus the block's offset.
extern "C" __global__ void pf_cdf(const real_t* w, const double* offs, double* cdf,
                                  const unsigned* flag, unsigned n, unsigned g) {
    __shared__ double sc[PF_BLOCK];
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const unsigned i = blockIdx.x * PF_BLOCK + threadIdx.x;
    const size_t p = (size_t)b * n + i;
    sc[threadIdx.x] = i < n ? (double)w[p] : 0.0;
    __syncthreads();
    for (unsigned s = 1; s < PF_BLOCK; s <<= 1) {
        double v = threadIdx.x >= s ? sc[threadIdx.x - s] : 0.0;
        __syncthreads();
        sc[threadIdx.x] += v;
        __syncthreads();
    }
    if (i < n) cdf[p] = offs[(size_t)b * g + blockIdx.x] + sc[threadIdx.x];
}

// The first index with cdf > x; past the end, the last particle of positive weight.
__device__ __forceinline__ unsigned pf_first_above(const double* cdf, unsigned n, double x) {
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (cdf[mid] <= x) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n) return lo;
    unsigned j = n - 1;
    while (j > 0 && cdf[j] == cdf[j - 1]) --j;
    return j;
}

#define PF_SYSTEMATIC 0
#define PF_STRATIFIED 1
#define PF_METROPOLIS 2
#define PF_REJECTION 3

extern "C" __global__ void pf_ancestors(const double* cdf, const double* wtot, const real_t* w,
                                        unsigned* anc, const unsigned* flag, unsigned n,
                                        unsigned k, unsigned key0, unsigned key1,
                                        unsigned scheme, unsigned steps_b) {
    const unsigned b = blockIdx.y;
    if (flag[b] == 0) return;
    const unsigned j = blockIdx.x * PF_BLOCK + threadIdx.x;
    if (j >= n) return;
    const size_t base = (size_t)b * n;
    unsigned a = j;
    if (scheme == PF_SYSTEMATIC || scheme == PF_STRATIFIED) {
        const unsigned slot = scheme == PF_SYSTEMATIC ? 0u : j;
        const double u = pf_uniform_f64(pf_words(slot, b, k, PF_PURPOSE_RESAMPLE, 0, key0, key1).v[0]);
        const double scale = wtot[b] / (double)n;
        a = pf_first_above(cdf + base, n, ((double)j + u) * scale);
    } else if (scheme == PF_METROPOLIS) {
        double wk = (double)w[base + a];
        PfWords x;
        for (unsigned s = 0; s < steps_b; ++s) {
            if (s % 2 == 0) x = pf_words(j, b, k, PF_PURPOSE_RESAMPLE, s / 2, key0, key1);
            const unsigned p = 2 * (s % 2);
            const unsigned cand = pf_index(x.v[p], n);
            const double wc = (double)w[base + cand];
            if (pf_uniform_f64(x.v[p + 1]) * wk <= wc) { a = cand; wk = wc; }
        }
    } else {
        // Rejection against the largest weight, which the max-shift makes exactly 1.
        PfWords x;
        for (unsigned s = 0; s < (1u << 25); ++s) {
            if (s % 2 == 0) x = pf_words(j, b, k, PF_PURPOSE_RESAMPLE, s / 2, key0, key1);
            const unsigned p = 2 * (s % 2);
            if (s > 0) a = pf_index(x.v[p], n);
            if (pf_uniform_f64(x.v[p + 1]) <= (double)w[base + a]) break;
        }
    }
    anc[base + j] = a;
}

extern "C" __global__ void pf_gather(const real_t* x, real_t* xn, real_t* lw, const unsigned* anc,
                                     const unsigned* flag, unsigned n) {
    const unsigned b = blockIdx.y;
    const unsigned j = blockIdx.x * PF_BLOCK + threadIdx.x;
    if (j >= n) return;
    const size_t base = (size_t)b * n;
    const bool moved = flag[b] != 0;
    const size_t from = base + (moved ? anc[base + j] : j);
    for (int a = 0; a < NX; ++a) xn[(base + j) * NX + a] = x[from * NX + a];
    if (moved) lw[base + j] = (real_t)0;
}
