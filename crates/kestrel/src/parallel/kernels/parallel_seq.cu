// The sequential Kalman filter and RTS smoother over per-step matrices, one thread per
// track: the batched GPU path of time-varying models (kalman/cuda compiles a
// time-invariant model's numbers into its kernels; these read the model's StepM from
// device memory, the same step for every thread at once, so every track's read of it is
// served from the cache). Tracks are the grid's first dimension (track = gtid(), B of
// them); each track's T steps of z, mean, cov, ll lie one after the other.

// The filter: prior update at step 0, then predict-and-update (kf_predict, kf_update: the
// arithmetic of kf_seq). A covariance that fails its Cholesky leaves NaN in the
// log-likelihood, which the host reports by track and step.
extern "C" __global__ void seq_filter(const StepM* st, int varying, const real* prior, const real* z, long long B, long long T,
                                      real* mean, real* cov, real* ll) {
    long long b = gtid();
    if (b >= B) return;
    z += b * T * NY;
    mean += b * T * NX;
    cov += b * T * NX2;
    ll += b * T;
    real x[NX], P[NX2];
#pragma unroll
    for (int i = 0; i < NX; ++i) x[i] = prior[i];
#pragma unroll
    for (int i = 0; i < NX2; ++i) P[i] = prior[NX + i];
    for (long long k = 0; k < T; ++k) {
        const StepM& m = step_at(st, varying, k);
        if (k > 0) kf_predict(x, P, m);
        const real* zk = z + k * NY;
        real l = 0;
        if (!missing(zk) && !kf_update(x, P, m, zk, l)) l = nanv();
        ll[k] = l;
#pragma unroll
        for (int i = 0; i < NX; ++i) mean[k * NX + i] = x[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) cov[k * NX2 + i] = P[i];
    }
}

// The RTS smoother over the filtered moments (mean, cov) of each track: from the last
// step back, x = E_k x' + g_k, P = E_k P' E_k^T + L_k with the smoothing element of step k
// (ps_element: the gain from the Cholesky factor of P_{k+1|k}; NaN where it fails).
extern "C" __global__ void seq_rts(const StepM* st, int varying, const real* mean, const real* cov, long long B, long long T,
                                   real* smean, real* scov) {
    long long b = gtid();
    if (b >= B) return;
    mean += b * T * NX;
    cov += b * T * NX2;
    smean += b * T * NX;
    scov += b * T * NX2;
    real xs[NX], Ps[NX2];
    for (long long k = T - 1; k >= 0; --k) {
        SE e;
        ps_element(st, varying, mean, cov, T, k, e);
        if (k == T - 1) {
#pragma unroll
            for (int i = 0; i < NX; ++i) xs[i] = e.g[i];
#pragma unroll
            for (int i = 0; i < NX2; ++i) Ps[i] = e.L[i];
        } else {
            real xn[NX], EP[NX2];
#pragma unroll
            for (int r = 0; r < NX; ++r) {
                real s = e.g[r];
#pragma unroll
                for (int c = 0; c < NX; ++c) {
                    s += e.E[r * NX + c] * xs[c];
                    real t = 0;
#pragma unroll
                    for (int l = 0; l < NX; ++l) t += e.E[r * NX + l] * Ps[l * NX + c];
                    EP[r * NX + c] = t;
                }
                xn[r] = s;
            }
#pragma unroll
            for (int r = 0; r < NX; ++r) {
                xs[r] = xn[r];
#pragma unroll
                for (int c = 0; c <= r; ++c) {
                    real s1 = 0, s2 = 0;
#pragma unroll
                    for (int l = 0; l < NX; ++l) { s1 += EP[r * NX + l] * e.E[c * NX + l]; s2 += EP[c * NX + l] * e.E[r * NX + l]; }
                    real v = (real)0.5 * (s1 + s2) + (real)0.5 * (e.L[r * NX + c] + e.L[c * NX + r]);
                    Ps[r * NX + c] = v; Ps[c * NX + r] = v;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < NX; ++i) smean[k * NX + i] = xs[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) scov[k * NX2 + i] = Ps[i];
    }
}
