// The forward filter in chunks (Definition 1 of Sarkka & Garcia-Fernandez for a finite
// state, see hmm/parallel.rs): fwd_reduce builds each chunk's element (f: the filtered
// distribution at the chunk's end given the state before it, one row per such state;
// ln g: the chunk's log-likelihood given it), fwd_carry folds the elements of each
// track in order (the filtered distribution entering every chunk), fwd_sweep runs the
// scaled forward recursion through each chunk from there, writing the filtered
// distributions and per-step log-likelihoods. One chunk a track: fwd_sweep alone is the
// sequential filter. A step whose observation has probability 0 gets log-likelihood
// -inf (the host reports the first one).

// elem: [B][C][KS * KS + KS]: f row-major, then ln g.
HMM_DEV void fwd_reduce_one(HmmModel m, const REAL* y, REAL* elem, long long steps, long long len,
                            long long chunks, long long c, long long b) {
    if (c >= chunks) return;
    long long t0, t1;
    hmm_chunk(c, len, steps, &t0, &t1);
    REAL* el = elem + (b * chunks + c) * (KS * KS + KS);
    REAL* f = el;
    REAL* lg = el + KS * KS;
    REAL e[KS], row[KS];
    for (int z = 0; z < KS; ++z) {
        for (int x = 0; x < KS; ++x) f[z * KS + x] = (REAL)(z == x);
        lg[z] = (REAL)0;
    }
    const REAL* yb = y + b * steps * NY;
    for (long long t = t0; t < t1; ++t) {
        const REAL shift = hmm_scaled_emission(m, yb + t * NY, e);
        for (int z = 0; z < KS; ++z) {
            if (t == 0) {
                for (int x = 0; x < KS; ++x) row[x] = m.init[x];
            } else {
                hmm_predict(m.a, f + z * KS, row);
            }
            REAL n = (REAL)0;
            for (int x = 0; x < KS; ++x) {
                row[x] *= e[x];
                n += row[x];
            }
            if (n > (REAL)0 && lg[z] > (REAL)HMM_NEG_INF) {
                for (int x = 0; x < KS; ++x) f[z * KS + x] = row[x] / n;
                lg[z] += log(n) + shift;
            } else {
                for (int x = 0; x < KS; ++x) f[z * KS + x] = (REAL)1 / (REAL)KS;
                lg[z] = (REAL)HMM_NEG_INF;
            }
        }
    }
}

// start: [B][C][KS]: the filtered distribution at the step before chunk c (c >= 1).
HMM_DEV void fwd_carry_one(const REAL* elem, REAL* start, long long chunks, long long b) {
    const REAL* el = elem + b * chunks * (KS * KS + KS);
    REAL q[KS], w[KS];
    for (int x = 0; x < KS; ++x) q[x] = el[x];  // chunk 0: every row the same
    for (long long c = 1; c < chunks; ++c) {
        REAL* s = start + (b * chunks + c) * KS;
        for (int x = 0; x < KS; ++x) s[x] = q[x];
        if (c + 1 == chunks) break;
        const REAL* f = el + c * (KS * KS + KS);
        const REAL* lg = f + KS * KS;
        REAL mx = (REAL)HMM_NEG_INF;
        for (int z = 0; z < KS; ++z)
            if (q[z] > (REAL)0 && lg[z] > mx) mx = lg[z];
        if (!(mx > (REAL)HMM_NEG_INF)) mx = (REAL)0;
        for (int x = 0; x < KS; ++x) w[x] = (REAL)0;
        for (int z = 0; z < KS; ++z) {
            if (q[z] == (REAL)0) continue;
            const REAL g = q[z] * exp(lg[z] - mx);
            for (int x = 0; x < KS; ++x) w[x] += g * f[z * KS + x];
        }
        hmm_normalise(w);
        for (int x = 0; x < KS; ++x) q[x] = w[x];
    }
}

HMM_DEV void fwd_sweep_one(HmmModel m, const REAL* y, const REAL* start, REAL* filtered, REAL* loglik,
                           long long steps, long long len, long long chunks, long long c,
                           long long b) {
    if (c >= chunks) return;
    long long t0, t1;
    hmm_chunk(c, len, steps, &t0, &t1);
    REAL prev[KS], cur[KS], e[KS];
    if (c > 0)
        for (int x = 0; x < KS; ++x) prev[x] = start[(b * chunks + c) * KS + x];
    const REAL* yb = y + b * steps * NY;
    for (long long t = t0; t < t1; ++t) {
        if (t == 0) {
            for (int x = 0; x < KS; ++x) cur[x] = m.init[x];
        } else {
            hmm_predict(m.a, prev, cur);
        }
        REAL* out = filtered + (b * steps + t) * KS;
        if (hmm_missing(yb + t * NY)) {
            // Missing: predict only; the log-likelihood is 0 exactly.
            hmm_normalise(cur);
            for (int x = 0; x < KS; ++x) out[x] = prev[x] = cur[x];
            loglik[b * steps + t] = (REAL)0;
            continue;
        }
        const REAL shift = hmm_scaled_emission(m, yb + t * NY, e);
        REAL n = (REAL)0;
        for (int x = 0; x < KS; ++x) {
            cur[x] *= e[x];
            n += cur[x];
        }
        if (n > (REAL)0) {
            for (int x = 0; x < KS; ++x) {
                cur[x] /= n;
                out[x] = cur[x];
                prev[x] = cur[x];
            }
            loglik[b * steps + t] = log(n) + shift;
        } else {
            for (int x = 0; x < KS; ++x) out[x] = prev[x] = (REAL)1 / (REAL)KS;
            loglik[b * steps + t] = (REAL)HMM_NEG_INF;
        }
    }
}

#ifndef KESTREL_HOST
#define HMM_CB                                                   \
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
    const long long b = (long long)blockIdx.y;

extern "C" __global__ void fwd_reduce(HmmModel m, const REAL* src, REAL* elem, long long steps,
                                      long long len, long long chunks) {
    HMM_CB
    fwd_reduce_one(m, src, elem, steps, len, chunks, c, b);
}

extern "C" __global__ void fwd_carry(const REAL* elem, REAL* start, long long chunks,
                                     long long tracks) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b < tracks) fwd_carry_one(elem, start, chunks, b);
}

extern "C" __global__ void fwd_sweep(HmmModel m, const REAL* y, const REAL* start, REAL* filtered,
                                     REAL* loglik, long long steps, long long len,
                                     long long chunks) {
    HMM_CB
    fwd_sweep_one(m, y, start, filtered, loglik, steps, len, chunks, c, b);
}
#endif
