// The Viterbi path in chunks, in double on the grid 2^-26 (exact sums: the scores are
// the CPU's bit for bit whatever the chunking). vit_reduce builds each chunk's max-plus
// product of W_t(z, x) = ln A(z, x) + ln p(y_t | x) (step 0: ln init(x) + ln p(y_0 | x)
// in every row), vit_carry folds them (the scores delta entering every chunk, shifted
// to a largest of 0), vit_sweep runs the recursion through each chunk writing the
// back-pointers (the smallest maximising predecessor) and, for the last step, the
// final state (the smallest maximising state). path_reduce composes each chunk's
// back-pointer maps (the state at the chunk's first step given the state after it; the
// last chunk's from the final state), path_carry folds them from the end, path_sweep
// follows the back-pointers through each chunk.

// pm: [B][C][KS * KS] (double).
HMM_DEV void vit_reduce_one(HmmModel m, const REAL* y, double* pm, long long steps, long long len,
                            long long chunks, long long c, long long b) {
    if (c >= chunks) return;
    long long t0, t1;
    hmm_chunk(c, len, steps, &t0, &t1);
    double* P = pm + (b * chunks + c) * KS * KS;
    double l[KS], row[KS];
    for (int z = 0; z < KS; ++z)
        for (int x = 0; x < KS; ++x) P[z * KS + x] = z == x ? 0.0 : HMM_NEG_INF;
    const REAL* yb = y + b * steps * NY;
    for (long long t = t0; t < t1; ++t) {
        hmm_grid_emission(m, yb + t * NY, l);
        double top = HMM_NEG_INF;
        for (int z = 0; z < KS; ++z) {
            for (int x = 0; x < KS; ++x) {
                double best = HMM_NEG_INF;
                if (t == 0) {
                    best = m.lni64[x];
                } else {
                    for (int w = 0; w < KS; ++w) {
                        const double v = P[z * KS + w] + m.lna64[w * KS + x];
                        if (v > best) best = v;
                    }
                }
                row[x] = best + l[x];
            }
            for (int x = 0; x < KS; ++x) {
                P[z * KS + x] = row[x];
                if (row[x] > top) top = row[x];
            }
        }
        if (top > HMM_NEG_INF)
            for (int i = 0; i < KS * KS; ++i) P[i] -= top;
    }
}

// dstart: [B][C][KS]: the scores at the step before chunk c (c >= 1).
HMM_DEV void vit_carry_one(const double* pm, double* dstart, long long chunks, long long b) {
    const double* pb = pm + b * chunks * KS * KS;
    double d[KS], w[KS];
    for (int x = 0; x < KS; ++x) d[x] = pb[x];  // chunk 0: every row the same
    hmm_shift_to_zero(d);
    for (long long c = 1; c < chunks; ++c) {
        for (int x = 0; x < KS; ++x) dstart[(b * chunks + c) * KS + x] = d[x];
        if (c + 1 == chunks) break;
        const double* P = pb + c * KS * KS;
        for (int x = 0; x < KS; ++x) {
            double best = HMM_NEG_INF;
            for (int z = 0; z < KS; ++z) {
                const double v = d[z] + P[z * KS + x];
                if (v > best) best = v;
            }
            w[x] = best;
        }
        hmm_shift_to_zero(w);
        for (int x = 0; x < KS; ++x) d[x] = w[x];
    }
}

// back: [B][T][KS] back-pointers into step t (t >= 1); final: [B].
HMM_DEV void vit_sweep_one(HmmModel m, const REAL* y, const double* dstart, unsigned char* back,
                           int* final_state, long long steps, long long len, long long chunks,
                           long long c, long long b) {
    if (c >= chunks) return;
    long long t0, t1;
    hmm_chunk(c, len, steps, &t0, &t1);
    double d[KS], nd[KS], l[KS];
    if (c > 0)
        for (int x = 0; x < KS; ++x) d[x] = dstart[(b * chunks + c) * KS + x];
    const REAL* yb = y + b * steps * NY;
    for (long long t = t0; t < t1; ++t) {
        if (t == 0) {
            for (int x = 0; x < KS; ++x) d[x] = m.lni64[x];
        } else {
            unsigned char* bp = back + (b * steps + t) * KS;
            for (int j = 0; j < KS; ++j) {
                int bi = 0;
                double bv = d[0] + m.lna64[j];
                for (int i = 1; i < KS; ++i) {
                    const double v = d[i] + m.lna64[i * KS + j];
                    if (v > bv) {
                        bi = i;
                        bv = v;
                    }
                }
                bp[j] = (unsigned char)bi;
                nd[j] = bv;
            }
            for (int x = 0; x < KS; ++x) d[x] = nd[x];
        }
        hmm_grid_emission(m, yb + t * NY, l);
        for (int x = 0; x < KS; ++x) d[x] += l[x];
        hmm_shift_to_zero(d);
    }
    if (t1 == steps) final_state[b] = hmm_argmax(d);
}

// phi: [B][C][KS]: the state at the chunk's first step given the state after it (the
// last chunk: given the final state, in every entry).
HMM_DEV void path_reduce_one(const unsigned char* back, const int* final_state, int* phi,
                             long long steps, long long len, long long chunks, long long c,
                             long long b) {
    if (c >= chunks) return;
    long long t0, t1;
    hmm_chunk(c, len, steps, &t0, &t1);
    const unsigned char* bb = back + b * steps * KS;
    for (int j = 0; j < KS; ++j) {
        int x = (c + 1 == chunks) ? final_state[b] : j;
        long long t = (c + 1 == chunks) ? t1 - 1 : t1;
        for (; t > t0; --t) x = bb[t * KS + x];
        phi[(b * chunks + c) * KS + j] = x;
    }
}

// xin: [B][C]: the path's state at the first step after chunk c.
HMM_DEV void path_carry_one(const int* phi, int* xin, long long chunks, long long b) {
    int x = phi[(b * chunks + chunks - 1) * KS];
    for (long long c = chunks - 2; c >= 0; --c) {
        xin[b * chunks + c] = x;
        x = phi[(b * chunks + c) * KS + x];
    }
}

HMM_DEV void path_sweep_one(const unsigned char* back, const int* final_state, const int* xin,
                            long long* path, long long steps, long long len, long long chunks,
                            long long c, long long b) {
    if (c >= chunks) return;
    long long t0, t1;
    hmm_chunk(c, len, steps, &t0, &t1);
    const unsigned char* bb = back + b * steps * KS;
    long long* pb = path + b * steps;
    int x;
    long long t;
    if (c + 1 == chunks) {
        x = final_state[b];
        t = t1 - 1;
    } else {
        x = bb[t1 * KS + xin[b * chunks + c]];
        t = t1 - 1;
    }
    pb[t] = x;
    for (--t; t >= t0; --t) {
        x = bb[(t + 1) * KS + x];
        pb[t] = x;
    }
}

#ifndef KESTREL_HOST
extern "C" __global__ void vit_reduce(HmmModel m, const REAL* src, double* elem, long long steps,
                                      long long len, long long chunks) {
    HMM_CB
    vit_reduce_one(m, src, elem, steps, len, chunks, c, b);
}

extern "C" __global__ void vit_carry(const double* elem, double* start, long long chunks,
                                     long long tracks) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b < tracks) vit_carry_one(elem, start, chunks, b);
}

extern "C" __global__ void vit_sweep(HmmModel m, const REAL* y, const double* dstart,
                                     unsigned char* back, int* final_state, long long steps,
                                     long long len, long long chunks) {
    HMM_CB
    vit_sweep_one(m, y, dstart, back, final_state, steps, len, chunks, c, b);
}

extern "C" __global__ void path_reduce(const unsigned char* back, const int* final_state, int* phi,
                                       long long steps, long long len, long long chunks) {
    HMM_CB
    path_reduce_one(back, final_state, phi, steps, len, chunks, c, b);
}

extern "C" __global__ void path_carry(const int* elem, int* start, long long chunks, long long tracks) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b < tracks) path_carry_one(elem, start, chunks, b);
}

extern "C" __global__ void path_sweep(const unsigned char* back, const int* final_state,
                                      const int* xin, long long* path, long long steps,
                                      long long len, long long chunks) {
    HMM_CB
    path_sweep_one(back, final_state, xin, path, steps, len, chunks, c, b);
}
#endif
