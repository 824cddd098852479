// The backward smoother in chunks (Definition 2 of Sarkka & Garcia-Fernandez for a
// finite state): with E_t(z, x) = p(x_t = x | y_0..t, x_{t+1} = z), the smoothed
// distributions satisfy s_t = s_{t+1} E_t. bwd_reduce builds each chunk's map
// G = E_{t1-1} ... E_{t0} (row z: the smoothed distribution at the chunk's first step
// given the state after the chunk; the last chunk's rows all start from the filtered
// distribution at T-1), bwd_carry folds them from the last chunk back (the smoothed
// distribution after every chunk), bwd_sweep runs the backward recursion
// s_t(x) = f_t(x) sum_z A(x, z) s_{t+1}(z) / p(x_{t+1} = z | y_0..t) through each chunk.

// One backward step of a row: out(x) = f(x) sum_z A(x, z) s(z) / pred(z), normalised.
HMM_DEV void bwd_step(const REAL* a, const REAL* f, const REAL* s, REAL* out) {
    REAL pred[KS], r[KS];
    hmm_predict(a, f, pred);
    for (int z = 0; z < KS; ++z) r[z] = pred[z] > (REAL)0 ? s[z] / pred[z] : (REAL)0;
    for (int x = 0; x < KS; ++x) {
        REAL acc = (REAL)0;
        for (int z = 0; z < KS; ++z) acc += a[x * KS + z] * r[z];
        out[x] = f[x] * acc;
    }
    hmm_normalise(out);
}

// g: [B][C][KS * KS].
HMM_DEV void bwd_reduce_one(HmmModel m, const REAL* filtered, REAL* g, long long steps, long long len,
                            long long chunks, long long c, long long b) {
    if (c >= chunks) return;
    long long t0, t1;
    hmm_chunk(c, len, steps, &t0, &t1);
    REAL* G = g + (b * chunks + c) * KS * KS;
    const REAL* fb = filtered + b * steps * KS;
    REAL row[KS];
    long long t = t1 - 1;
    for (int z = 0; z < KS; ++z)
        for (int x = 0; x < KS; ++x)
            G[z * KS + x] = (c + 1 == chunks) ? fb[(steps - 1) * KS + x] : (REAL)(z == x);
    if (c + 1 == chunks) --t;
    // Row z is a distribution over the state after the step folded in next (a point
    // mass on z to begin with, or the filtered distribution at T-1 for the last chunk).
    for (; t >= t0; --t) {
        for (int z = 0; z < KS; ++z) {
            bwd_step(m.a, fb + t * KS, G + z * KS, row);
            for (int x = 0; x < KS; ++x) G[z * KS + x] = row[x];
        }
    }
}

// next: [B][C][KS]: the smoothed distribution at the first step after chunk c.
HMM_DEV void bwd_carry_one(const REAL* g, REAL* next, long long chunks, long long b) {
    const REAL* gb = g + b * chunks * KS * KS;
    REAL s[KS], w[KS];
    for (int x = 0; x < KS; ++x) s[x] = gb[(chunks - 1) * KS * KS + x];  // rows all the same
    for (long long c = chunks - 2; c >= 0; --c) {
        REAL* o = next + (b * chunks + c) * KS;
        for (int x = 0; x < KS; ++x) o[x] = s[x];
        if (c == 0) break;
        const REAL* G = gb + c * KS * KS;
        for (int x = 0; x < KS; ++x) w[x] = (REAL)0;
        for (int z = 0; z < KS; ++z) {
            if (s[z] == (REAL)0) continue;
            for (int x = 0; x < KS; ++x) w[x] += s[z] * G[z * KS + x];
        }
        hmm_normalise(w);
        for (int x = 0; x < KS; ++x) s[x] = w[x];
    }
}

HMM_DEV void bwd_sweep_one(HmmModel m, const REAL* filtered, const REAL* next, REAL* smoothed,
                           long long steps, long long len, long long chunks, long long c,
                           long long b) {
    if (c >= chunks) return;
    long long t0, t1;
    hmm_chunk(c, len, steps, &t0, &t1);
    const REAL* fb = filtered + b * steps * KS;
    REAL* sb = smoothed + b * steps * KS;
    REAL s[KS], row[KS];
    long long t = t1 - 1;
    if (c + 1 == chunks) {
        for (int x = 0; x < KS; ++x) s[x] = sb[t * KS + x] = fb[t * KS + x];
        --t;
    } else {
        for (int x = 0; x < KS; ++x) s[x] = next[(b * chunks + c) * KS + x];
    }
    for (; t >= t0; --t) {
        bwd_step(m.a, fb + t * KS, s, row);
        for (int x = 0; x < KS; ++x) s[x] = sb[t * KS + x] = row[x];
    }
}

#ifndef KESTREL_HOST
extern "C" __global__ void bwd_reduce(HmmModel m, const REAL* src, REAL* elem, long long steps,
                                      long long len, long long chunks) {
    HMM_CB
    bwd_reduce_one(m, src, elem, steps, len, chunks, c, b);
}

extern "C" __global__ void bwd_carry(const REAL* elem, REAL* start, long long chunks, long long tracks) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b < tracks) bwd_carry_one(elem, start, chunks, b);
}

extern "C" __global__ void bwd_sweep(HmmModel m, const REAL* filtered, const REAL* next,
                                     REAL* smoothed, long long steps, long long len,
                                     long long chunks) {
    HMM_CB
    bwd_sweep_one(m, filtered, next, smoothed, steps, len, chunks, c, b);
}
#endif
