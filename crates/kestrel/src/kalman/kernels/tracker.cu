// The streaming tracker: the state of every target stays on the GPU in
// structure-of-arrays layout (x [NX][B], packed P [NP][B]), so each step reads and
// writes whole lines; measurements come in the host layout [B][NY] (a warp reads one
// contiguous block). `status[b]`: 0 = free slot, 1 = new target (its next step updates
// the prior, no prediction), 2 = tracked (predict, then update).

extern "C" __global__ void __launch_bounds__(128) tracker_step(const __grid_constant__ ModelParams mp,
                                                               const real* __restrict__ z, real* __restrict__ xs,
                                                               real* __restrict__ Ps, real* __restrict__ ll_total,
                                                               real* __restrict__ ll_last,
                                                               unsigned char* __restrict__ status, int nb,
                                                               unsigned long long* err) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    const unsigned char st = status[b];
    if (st == 0) return;
    const long long B = nb;
    real zk[NY];
    UNROLL for (int a = 0; a < NY; ++a) zk[a] = __ldg(z + b * NY + a);
    real x[NX];
    real P[NP];
    UNROLL for (int i = 0; i < NX; ++i) x[i] = xs[i * B + b];
    UNROLL for (int p = 0; p < NP; ++p) P[p] = Ps[p * B + b];
    if (st == 2) kf_predict(mp, x, P);
    real l = (real)0;
    if (!any_nan(zk)) {
        if (!kf_update(mp, zk, x, P, l)) {
            report(err, (unsigned long long)b);
            return;
        }
    }
    UNROLL for (int i = 0; i < NX; ++i) xs[i * B + b] = x[i];
    UNROLL for (int p = 0; p < NP; ++p) Ps[p * B + b] = P[p];
    ll_total[b] += l;
    ll_last[b] = l;
    if (st != 2) status[b] = 2;
}

// Puts the model's prior into the slots listed in `slots` and marks them new.
extern "C" __global__ void tracker_init(const __grid_constant__ ModelParams mp, const int* __restrict__ slots, int n,
                                        real* __restrict__ xs, real* __restrict__ Ps, real* __restrict__ ll_total,
                                        real* __restrict__ ll_last, unsigned char* __restrict__ status, int nb) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long b = slots[i];
    const long long B = nb;
    real x[NX];
    real P[NP];
    load_prior(mp, x, P);
    UNROLL for (int k = 0; k < NX; ++k) xs[k * B + b] = x[k];
    UNROLL for (int p = 0; p < NP; ++p) Ps[p * B + b] = P[p];
    ll_total[b] = (real)0;
    ll_last[b] = (real)0;
    status[b] = 1;
}

// Frees the slots listed in `slots`.
extern "C" __global__ void tracker_remove(const int* __restrict__ slots, int n, unsigned char* __restrict__ status) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) status[slots[i]] = 0;
}
