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
    kf_run(st, varying, prior, z + b * T * NY, T, mean + b * T * NX, cov + b * T * NX2, ll + b * T);
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
        rts_step(e, k == T - 1, xs, Ps);
#pragma unroll
        for (int i = 0; i < NX; ++i) smean[k * NX + i] = xs[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) scov[k * NX2 + i] = Ps[i];
    }
}
