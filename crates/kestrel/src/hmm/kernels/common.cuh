// The HMM family's device helpers (hmm/kernels/*.cu include this first).
//
// Compiled with: REAL (float | double: filter and smoother), KS (states), NY (components
// of an observation), CATEGORICAL (1: codes, 0: Gaussian). The Viterbi kernels compute
// in double whatever REAL is, on logarithms rounded to the grid 2^-26 (exact sums, so
// every chunking gives the CPU's scores bit for bit).
//
// Work is cut into chunks of `len` steps of each track: thread (c, b) owns chunk c of
// track b (c = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y + b0). Chunk c
// covers steps [c len, min((c + 1) len, T)). One chunk a track is the sequential method.
//
// Under KESTREL_HOST (the C++ emulation in the tests) the __global__ wrappers are left
// out and the tests call the *_one functions thread by thread.

#ifndef KESTREL_HOST
#define HMM_DEV __device__ static inline
#define HMM_DMUL(a, b) __dmul_rn(a, b)
#define HMM_DADD(a, b) __dadd_rn(a, b)
#else
#define HMM_DEV static inline
#define HMM_DMUL(a, b) ((a) * (b))
#define HMM_DADD(a, b) ((a) + (b))
#endif

#define HMM_NEG_INF (-(1e300 * 1e300))

// The model as the kernels read it (device pointers).
struct HmmModel {
    const REAL* a;        // [KS][KS], row = from
    const REAL* init;     // [KS]
    const REAL* lnp;      // categorical: ln p(code | state) at [code][KS]
    const REAL* means;    // Gaussian: [KS][NY]
    const REAL* chol;     // Gaussian: [KS][NY][NY] lower Cholesky factors
    const REAL* norm;     // Gaussian: [KS]
    const double* lna64;  // Viterbi: ln a on the grid [KS][KS]
    const double* lni64;  // Viterbi: ln init on the grid [KS]
    const double* lnp64;  // Viterbi, categorical: ln p on the grid [code][KS]
    const double* means64;
    const double* chol64;
    const double* norm64;
};

HMM_DEV bool hmm_missing(const REAL* y) {
    for (int a = 0; a < NY; ++a)
        if (y[a] != y[a]) return true;
    return false;
}

// ln p(y | state) for every state into l (y not missing).
HMM_DEV void hmm_log_emission(const HmmModel& m, const REAL* y, REAL* l) {
#if CATEGORICAL
    const long long c = (long long)y[0];
    for (int j = 0; j < KS; ++j) l[j] = m.lnp[c * KS + j];
#else
    for (int s = 0; s < KS; ++s) {
        const REAL* L = m.chol + s * NY * NY;
        REAL v[NY];
        REAL maha = (REAL)0;
        for (int a = 0; a < NY; ++a) {
            REAL r = y[a] - m.means[s * NY + a];
            for (int b = 0; b < a; ++b) r -= L[a * NY + b] * v[b];
            r /= L[a * NY + a];
            v[a] = r;
            maha += r * r;
        }
        l[s] = m.norm[s] - (REAL)0.5 * maha;
    }
#endif
}

// The emission likelihoods scaled by their largest into e; returns ln of the largest
// (0 and e = 1 when y is missing; 0 and e = 0 when no state can emit y).
HMM_DEV REAL hmm_scaled_emission(const HmmModel& m, const REAL* y, REAL* e) {
    if (hmm_missing(y)) {
        for (int j = 0; j < KS; ++j) e[j] = (REAL)1;
        return (REAL)0;
    }
    hmm_log_emission(m, y, e);
    REAL mx = e[0];
    for (int j = 1; j < KS; ++j) mx = e[j] > mx ? e[j] : mx;
    const REAL shift = (mx > (REAL)HMM_NEG_INF) ? mx : (REAL)0;
    for (int j = 0; j < KS; ++j) e[j] = exp(e[j] - shift);
    return shift;
}

// v rounded to the grid 2^-26 (infinities kept).
HMM_DEV double hmm_grid(double v) {
    const double s = 67108864.0;  // 2^26
    return (v > HMM_NEG_INF && v < -HMM_NEG_INF) ? rint(v * s) / s : v;
}

// The Viterbi log-emissions on the grid, in double (0 for a missing y).
HMM_DEV void hmm_grid_emission(const HmmModel& m, const REAL* y, double* l) {
    if (hmm_missing(y)) {
        for (int j = 0; j < KS; ++j) l[j] = 0.0;
        return;
    }
#if CATEGORICAL
    const long long c = (long long)y[0];
    for (int j = 0; j < KS; ++j) l[j] = m.lnp64[c * KS + j];
#else
    for (int s = 0; s < KS; ++s) {
        const double* L = m.chol64 + s * NY * NY;
        double v[NY];
        double maha = 0.0;
        for (int a = 0; a < NY; ++a) {
            double r = (double)y[a] - m.means64[s * NY + a];
            for (int b = 0; b < a; ++b) r = r - HMM_DMUL(L[a * NY + b], v[b]);
            r = r / L[a * NY + a];
            v[a] = r;
            maha = HMM_DADD(maha, HMM_DMUL(r, r));
        }
        l[s] = hmm_grid(m.norm64[s] - HMM_DMUL(0.5, maha));
    }
#endif
}

// pred = prev A.
HMM_DEV void hmm_predict(const REAL* a, const REAL* prev, REAL* pred) {
    for (int x = 0; x < KS; ++x) pred[x] = (REAL)0;
    for (int z = 0; z < KS; ++z) {
        const REAL pz = prev[z];
        if (pz == (REAL)0) continue;
        for (int x = 0; x < KS; ++x) pred[x] += pz * a[z * KS + x];
    }
}

HMM_DEV void hmm_normalise(REAL* v) {
    REAL s = (REAL)0;
    for (int j = 0; j < KS; ++j) s += v[j];
    if (s > (REAL)0)
        for (int j = 0; j < KS; ++j) v[j] /= s;
}

// The smallest index of the largest value.
HMM_DEV int hmm_argmax(const double* v) {
    int best = 0;
    for (int i = 1; i < KS; ++i)
        if (v[i] > v[best]) best = i;
    return best;
}

HMM_DEV void hmm_shift_to_zero(double* v) {
    const double m = v[hmm_argmax(v)];
    if (m > HMM_NEG_INF && m < -HMM_NEG_INF)
        for (int j = 0; j < KS; ++j) v[j] -= m;
}

// The chunk's steps [t0, t1) of a track of `steps` steps.
HMM_DEV void hmm_chunk(long long c, long long len, long long steps, long long* t0, long long* t1) {
    *t0 = c * len;
    *t1 = (c + 1) * len < steps ? (c + 1) * len : steps;
}
