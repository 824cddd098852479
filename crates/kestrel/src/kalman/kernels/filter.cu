// The batched Kalman filter: one thread per track, the whole time loop inside the
// kernel, mean and covariance (packed lower triangle) in registers.
//
// Input z is the host layout [B][T][NY] of the chunk: thread b reads its own
// contiguous run, one step ahead of use; the 32-byte sectors it touches are reused
// from L2 over the next steps, so DRAM reads each byte of z once.
//
// Outputs, two layouts:
//  - HOST: mean [B][S][NX], cov [B][S][NX][NX] (full), loglik [B][S] (S = T kept steps,
//    or 1 for the final state): the files' layout, copied to the host as is;
//  - SOA:  mean [S][NX][B], cov [S][NP][B] (packed), loglik [S][B]: every store of a
//    warp is one contiguous 128-byte line; soa_to_host (layout.cu) converts.
// Failure of positive definiteness at (track b, step k) stores min(b * T + k) in err[0];
// an infinite measurement component j stores min((b * T + k) * NY + j) in err[1] (host
// inputs are checked before they reach the GPU; arrays already on the device are checked
// here, in the pass that reads them anyway). A track that fails still scans the rest of
// its measurements, so err[1] is the first infinity of the whole batch.
//
// The *_in kernels take the per-track inputs `in` (common.cuh, TrackIn) beside z: each
// thread reads its own track's prior and, step by step, its u, d and R from their
// structure-of-arrays copies ([T][..][B]: a warp's loads of a step are contiguous).

// Step k's u, d and R of a track (those not null) from their [T][..][B] copies.
__device__ __forceinline__ void next_inputs(const real* ub, const real* db, const real* rb, long long k, long long B,
                                            real* u, real* d, real* r) {
    if (ub != nullptr) UNROLL for (int i = 0; i < NX; ++i) u[i] = __ldg(ub + (k * NX + i) * B);
    if (db != nullptr) UNROLL for (int a = 0; a < NY; ++a) d[a] = __ldg(db + (k * NY + a) * B);
    if (rb != nullptr) UNROLL for (int a = 0; a < NY * NY; ++a) r[a] = __ldg(rb + (k * NY * NY + a) * B);
}

template <int KEEP, bool PRED, bool SOA, bool IN = false>
__device__ __forceinline__ void filter_body(const ModelParams& mp, const real* __restrict__ z, int nb, int steps,
                                            real* __restrict__ mean, real* __restrict__ cov, real* __restrict__ ll,
                                            real* __restrict__ pmean, real* __restrict__ pcov,
                                            unsigned long long* err, const TrackIn* in = nullptr) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    const long long B = nb;
    const long long T = steps;
    const long long S = KEEP == KEEP_ALL ? T : 1;
    real x[NX];
    real P[NP];
    // The track's own inputs (IN), null where the model's are used.
    const real* ub = IN && in->u != nullptr ? in->u + b : nullptr;
    const real* db = IN && in->d != nullptr ? in->d + b : nullptr;
    const real* rb = IN && in->r != nullptr ? in->r + b : nullptr;
    if (IN && in->x0 != nullptr) {
        load_prior(mp, x, P, in->x0 + b * NX, in->P0 + b * (NX * NX));
    } else {
        load_prior(mp, x, P);
    }
    const real* zb = z + b * T * NY;
    real zn[NY];
    UNROLL for (int a = 0; a < NY; ++a) zn[a] = __ldg(zb + a);
    // The track's own inputs of the next step, loaded a step ahead as z is (so that their
    // latency overlaps a step's arithmetic instead of stalling it).
    real un[IN ? NX : 1], dn[IN ? NY : 1], rn[IN ? NY * NY : 1];
    if (IN) next_inputs(ub, db, rb, 0, B, un, dn, rn);
    real total = (real)0;
    for (long long k = 0; k < T; ++k) {
        real zk[NY];
        UNROLL for (int a = 0; a < NY; ++a) zk[a] = zn[a];
        real uk[IN ? NX : 1], dk[IN ? NY : 1], rk[IN ? NY * NY : 1];
        if (IN) {
            UNROLL for (int i = 0; i < NX; ++i) uk[i] = un[i];
            UNROLL for (int a = 0; a < NY; ++a) dk[a] = dn[a];
            UNROLL for (int a = 0; a < NY * NY; ++a) rk[a] = rn[a];
        }
        if (k + 1 < T) {
            UNROLL for (int a = 0; a < NY; ++a) zn[a] = __ldg(zb + (k + 1) * NY + a);
            if (IN) next_inputs(ub, db, rb, k + 1, B, un, dn, rn);
        }
        if (k > 0) kf_predict(mp, x, P, IN && ub != nullptr ? uk : nullptr, 1);
        if (PRED) store_state<false>(pmean, pcov, B, T, b, k, x, P);
        const int inf = first_inf(zk);
        if (inf >= 0) {
            report(err + 1, (unsigned long long)((b * T + k) * NY + inf));
            return;
        }
        real l = (real)0;
        if (!any_nan(zk)) {
            if (!kf_update(mp, zk, x, P, l, IN && rb != nullptr ? rk : nullptr, IN && db != nullptr ? dk : nullptr,
                           1)) {
                report(err, (unsigned long long)(b * T + k));
                for (long long j = k + 1; j < T; ++j) {
                    const int f = first_inf(zb + j * NY);
                    if (f >= 0) {
                        report(err + 1, (unsigned long long)((b * T + j) * NY + f));
                        return;
                    }
                }
                return;
            }
        }
        total += l;
        if (KEEP == KEEP_ALL) {
            store_state<SOA>(mean, cov, B, S, b, k, x, P);
            if (SOA) ll[k * B + b] = l; else ll[b * S + k] = l;
        }
    }
    if (KEEP == KEEP_LAST) {
        store_state<SOA>(mean, cov, B, 1, b, 0, x, P);
        ll[b] = total;
    }
}

#define FILTER_ARGS const __grid_constant__ ModelParams mp, const real* __restrict__ z, int nb, int steps, \
    real* __restrict__ mean, real* __restrict__ cov, real* __restrict__ ll, real* __restrict__ pmean,   \
    real* __restrict__ pcov, unsigned long long* err
#define FILTER_PASS mp, z, nb, steps, mean, cov, ll, pmean, pcov, err

#if !KS_INPUTS
extern "C" __global__ void __launch_bounds__(128) kf_filter_all_host(FILTER_ARGS) {
    filter_body<KEEP_ALL, false, false>(FILTER_PASS);
}
extern "C" __global__ void __launch_bounds__(128) kf_filter_last_host(FILTER_ARGS) {
    filter_body<KEEP_LAST, false, false>(FILTER_PASS);
}
extern "C" __global__ void __launch_bounds__(128) kf_filter_pred_host(FILTER_ARGS) {
    filter_body<KEEP_ALL, true, false>(FILTER_PASS);
}
extern "C" __global__ void __launch_bounds__(128) kf_filter_all_soa(FILTER_ARGS) {
    filter_body<KEEP_ALL, false, true>(FILTER_PASS);
}
extern "C" __global__ void __launch_bounds__(128) kf_filter_last_soa(FILTER_ARGS) {
    filter_body<KEEP_LAST, false, true>(FILTER_PASS);
}

#else
// The same with per-track inputs (TrackIn).
#define FILTER_IN_ARGS FILTER_ARGS, const __grid_constant__ TrackIn in
#define FILTER_IN_PASS FILTER_PASS, &in

extern "C" __global__ void __launch_bounds__(128) kf_filter_all_host_in(FILTER_IN_ARGS) {
    filter_body<KEEP_ALL, false, false, true>(FILTER_IN_PASS);
}
extern "C" __global__ void __launch_bounds__(128) kf_filter_last_host_in(FILTER_IN_ARGS) {
    filter_body<KEEP_LAST, false, false, true>(FILTER_IN_PASS);
}
extern "C" __global__ void __launch_bounds__(128) kf_filter_pred_host_in(FILTER_IN_ARGS) {
    filter_body<KEEP_ALL, true, false, true>(FILTER_IN_PASS);
}
extern "C" __global__ void __launch_bounds__(128) kf_filter_all_soa_in(FILTER_IN_ARGS) {
    filter_body<KEEP_ALL, false, true, true>(FILTER_IN_PASS);
}
extern "C" __global__ void __launch_bounds__(128) kf_filter_last_soa_in(FILTER_IN_ARGS) {
    filter_body<KEEP_LAST, false, true, true>(FILTER_IN_PASS);
}
#endif
