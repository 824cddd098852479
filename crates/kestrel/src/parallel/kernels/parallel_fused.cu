// The fused scan of the filter and the smoothers: reduce, scan of the chunk totals,
// sweep. Each sequence of T steps is cut into chunks of K steps; chunk c covers steps
// [cK, min(T, (c+1)K)) and is one thread's work in the two passes over the data:
//
//  1. reduce: the thread folds its K steps into the chunk total tot_c = a_lo x ... x a_{hi-1}
//     (nothing written): for the filtering elements by the conditioned Kalman step fe_step
//     (parallel_model.cu), for the smoothing elements by building each and combining;
//  2. the totals (T/K of them) are scanned with the chunked scan of parallel_scan.cu,
//     forward for the filter, in reverse for the smoothers;
//  3. sweep: the thread starts from the scanned prefix of the chunks before (after) its
//     own and walks its K steps, writing the moments directly.
//
// A prefix of filtering elements that starts at step 0 is (0, x_{k|k}, P_{k|k}, 0, 0)
// (Sarkka & Garcia-Fernandez, eq. 47), so the forward sweep from it is the Kalman
// filter's predict and update; a suffix of smoothing elements that ends at T-1 is
// (0, x_{k|T}, P_{k|T}) (eq. 52), so the backward sweep is the RTS step
// x = E x' + g, P = E P' E^T + L with the element of step k. For the two-filter smoother
// the suffix of backward elements keeps its (eta, J), carried through the sweep with the
// operator itself (the eta and J of a x b depend on b's eta and J alone).
//
// Elements are read and written only as chunk totals: per step, the measurements are read
// twice and the moments written once. Batched like the other kernels (blockIdx.y).
//
// Shares (the `_at` kernels; a sequence split over several devices, parallel/cuda/split.rs):
// a device holds a window of Ta steps of each sequence (measurements and, when the model
// varies, its matrices) and owns the n steps [first, first + n) of it; first is 0 for the
// share that starts at step 0 and 1 otherwise (the window then starts one step before the
// share, so that no step of a later share is taken for the prior step 0). Outputs hold the
// n owned steps of each sequence. The chunks cover the owned steps only. A sweep may take a
// carry (one element per sequence): for the filter the prefix of every step before the
// share, combined in front of each chunk's scanned prefix (a prefix from step 0 again); for
// the backward filter the suffix of every step after the share, combined behind each
// chunk's scanned suffix. The whole-sequence kernels are the share [0, T) of a window of T.

__device__ __forceinline__ long long n_chunks(long long T, int K) { return (T + K - 1) / K; }

__device__ __forceinline__ void pf_reduce_body(const StepM* st, int varying, const real* prior, const real* z, long long Ta, long long first,
                                               long long n, int K, FE* tot) {
    long long c = gtid(), nc = n_chunks(n, K);
    if (c >= nc) return;
    z += bat() * Ta * NY;
    tot += bat() * nc;
    long long lo = first + c * K, hi = min(first + n, lo + K);
    FE acc;
    pf_element(st, varying, prior, z, lo, acc);
    for (long long k = lo + 1; k < hi; ++k) fe_step(acc, step_at(st, varying, k), z + k * NY);
    tot[c] = acc;
}

// tot: the forward-scanned chunk totals (tot[c-1] = the prefix through chunk c-1); with
// has_carry, carry[sequence] = the prefix of every step before the share.
__device__ __forceinline__ void pf_sweep_body(const FE* tot, const FE* carry, int has_carry, const StepM* st, int varying,
                                              const real* prior, const real* z, long long Ta, long long first, long long n, int K,
                                              real* mean, real* cov, real* ll) {
    long long c = gtid(), nc = n_chunks(n, K);
    if (c >= nc) return;
    z += bat() * Ta * NY;
    tot += bat() * nc;
    mean += bat() * n * NX;
    cov += bat() * n * NX2;
    ll += bat() * n;
    long long lo = first + c * K, hi = min(first + n, lo + K);
    real x[NX], P[NX2];
    if (c == 0 && !has_carry) {
#pragma unroll
        for (int i = 0; i < NX; ++i) x[i] = prior[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) P[i] = prior[NX + i];
    } else if (c == 0 || !has_carry) {
        const FE& p = c == 0 ? carry[bat()] : tot[c - 1];
#pragma unroll
        for (int i = 0; i < NX; ++i) x[i] = p.b[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) P[i] = p.C[i];
    } else {
        FE p;
        FilterOp::combine(carry[bat()], tot[c - 1], p);
#pragma unroll
        for (int i = 0; i < NX; ++i) x[i] = p.b[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) P[i] = p.C[i];
    }
    for (long long k = lo; k < hi; ++k) {
        const StepM& m = step_at(st, varying, k);
        if (k > 0) kf_predict(x, P, m);
        const real* zk = z + k * NY;
        real l = 0;
        if (!missing(zk) && !kf_update(x, P, m, zk, l)) {
            l = nanv();
#pragma unroll
            for (int i = 0; i < NX; ++i) x[i] = nanv();
        }
        long long o = k - first;
        ll[o] = l;
        st_block<NX>(mean + o * NX, x);
        st_block<NX2>(cov + o * NX2, P);
    }
}

extern "C" __global__ void pf_reduce(const StepM* st, int varying, const real* prior, const real* z, long long T, int K, FE* tot) {
    pf_reduce_body(st, varying, prior, z, T, 0, T, K, tot);
}

extern "C" __global__ void pf_sweep(const FE* tot, const StepM* st, int varying, const real* prior, const real* z, long long T, int K,
                                    real* mean, real* cov, real* ll) {
    pf_sweep_body(tot, tot, 0, st, varying, prior, z, T, 0, T, K, mean, cov, ll);
}

extern "C" __global__ void pf_reduce_at(const StepM* st, int varying, const real* prior, const real* z, long long Ta, long long first,
                                        long long n, int K, FE* tot) {
    pf_reduce_body(st, varying, prior, z, Ta, first, n, K, tot);
}

extern "C" __global__ void pf_sweep_at(const FE* tot, const FE* carry, int has_carry, const StepM* st, int varying, const real* prior,
                                       const real* z, long long Ta, long long first, long long n, int K, real* mean, real* cov, real* ll) {
    pf_sweep_body(tot, carry, has_carry, st, varying, prior, z, Ta, first, n, K, mean, cov, ll);
}

// out[sequence] = tot[sequence * nc + i]: a share's total (the last forward-scanned chunk
// total, or the first reverse-scanned one) gathered for the crossing, one per sequence.
extern "C" __global__ void fe_pick(const FE* tot, long long nc, long long i, FE* out) {
    if (gtid() != 0) return;
    out[bat()] = tot[bat() * nc + i];
}

// The product a_lo x ... x a_{hi-1} of the elements element(k, e) of steps [lo, hi), in
// that order (the reduce pass of a chunk's elements built on the fly).
template <class Op, class Element>
__device__ __forceinline__ typename Op::E fold_chunk(long long lo, long long hi, Element element) {
    typename Op::E acc;
    element(lo, acc);
    for (long long k = lo + 1; k < hi; ++k) {
        typename Op::E e, t;
        element(k, e);
        Op::combine(acc, e, t);
        acc = t;
    }
    return acc;
}

extern "C" __global__ void ps_reduce(const StepM* st, int varying, const real* mean, const real* cov, long long T, int K, SE* tot) {
    long long c = gtid(), nc = n_chunks(T, K);
    if (c >= nc) return;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
    long long lo = c * K, hi = min(T, lo + K);
    tot[bat() * nc + c] = fold_chunk<SmoothOp>(lo, hi, [&](long long k, SE& e) { ps_element(st, varying, mean, cov, T, k, e); });
}

// tot: the reverse-scanned chunk totals (tot[c+1] = the suffix from chunk c+1 on).
extern "C" __global__ void ps_sweep(const SE* tot, const StepM* st, int varying, const real* mean, const real* cov, long long T, int K,
                                    real* smean, real* scov) {
    long long c = gtid(), nc = n_chunks(T, K);
    if (c >= nc) return;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
    tot += bat() * nc;
    smean += bat() * T * NX;
    scov += bat() * T * NX2;
    long long lo = c * K, hi = min(T, lo + K);
    real xs[NX], Ps[NX2];
    if (c + 1 < nc) {
#pragma unroll
        for (int i = 0; i < NX; ++i) xs[i] = tot[c + 1].g[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) Ps[i] = tot[c + 1].L[i];
    }
    for (long long k = hi - 1; k >= lo; --k) {
        SE e;
        ps_element(st, varying, mean, cov, T, k, e);
        rts_step(e, k == T - 1, xs, Ps);
        st_block<NX>(smean + k * NX, xs);
        st_block<NX2>(scov + k * NX2, Ps);
    }
}

// The backward element of step k: a_{k+1}, the identity at T-1 (eq. 54).
__device__ __forceinline__ void tf_back(const StepM* st, int varying, const real* prior, const real* z, long long T, long long k, FE& o) {
    if (k + 1 < T) pf_element(st, varying, prior, z, k + 1, o);
    else FilterOp::identity(o);
}

__device__ __forceinline__ void tf_reduce_body(const StepM* st, int varying, const real* prior, const real* z, long long Ta, long long first,
                                               long long n, int K, FE* tot) {
    long long c = gtid(), nc = n_chunks(n, K);
    if (c >= nc) return;
    z += bat() * Ta * NY;
    tot += bat() * nc;
    long long lo = first + c * K, hi = min(first + n, lo + K);
    FE acc;
    tf_back(st, varying, prior, z, Ta, lo, acc);
    for (long long k = lo + 1; k < hi && k + 1 < Ta; ++k) fe_step(acc, step_at(st, varying, k + 1), z + (k + 1) * NY);
    tot[c] = acc;
}

// tot: the reverse-scanned totals of the backward elements (tot[c+1] = the suffix from
// chunk c+1 on); with has_carry, carry[sequence] = the suffix of every step after the
// share; mean, cov: the filter's, n steps a sequence like the outputs.
__device__ __forceinline__ void tf_sweep_body(const FE* tot, const FE* carry, int has_carry, const StepM* st, int varying,
                                              const real* prior, const real* z, const real* mean, const real* cov, long long Ta,
                                              long long first, long long n, int K, real* smean, real* scov) {
    long long c = gtid(), nc = n_chunks(n, K);
    if (c >= nc) return;
    z += bat() * Ta * NY;
    tot += bat() * nc;
    mean += bat() * n * NX;
    cov += bat() * n * NX2;
    smean += bat() * n * NX;
    scov += bat() * n * NX2;
    long long lo = first + c * K, hi = min(first + n, lo + K);
    // Only the suffix's (eta, J) is carried (all that tf_merge reads; see filter_combine_info).
    FE acc;
    if (c + 1 < nc && has_carry) filter_combine_info(tot[c + 1], carry[bat()], acc);
    else if (c + 1 < nc) acc = tot[c + 1];
    else if (has_carry) acc = carry[bat()];
    else FilterOp::identity(acc);
    for (long long k = hi - 1; k >= lo; --k) {
        FE e;
        tf_back(st, varying, prior, z, Ta, k, e);
        filter_combine_info(e, acc, acc);
        long long o = k - first;
        tf_merge(acc, mean + o * NX, cov + o * NX2, smean + o * NX, scov + o * NX2);
    }
}

extern "C" __global__ void tf_reduce(const StepM* st, int varying, const real* prior, const real* z, long long T, int K, FE* tot) {
    tf_reduce_body(st, varying, prior, z, T, 0, T, K, tot);
}

extern "C" __global__ void tf_sweep(const FE* tot, const StepM* st, int varying, const real* prior, const real* z, const real* mean,
                                    const real* cov, long long T, int K, real* smean, real* scov) {
    tf_sweep_body(tot, tot, 0, st, varying, prior, z, mean, cov, T, 0, T, K, smean, scov);
}

extern "C" __global__ void tf_reduce_at(const StepM* st, int varying, const real* prior, const real* z, long long Ta, long long first,
                                        long long n, int K, FE* tot) {
    tf_reduce_body(st, varying, prior, z, Ta, first, n, K, tot);
}

extern "C" __global__ void tf_sweep_at(const FE* tot, const FE* carry, int has_carry, const StepM* st, int varying, const real* prior,
                                       const real* z, const real* mean, const real* cov, long long Ta, long long first, long long n,
                                       int K, real* smean, real* scov) {
    tf_sweep_body(tot, carry, has_carry, st, varying, prior, z, mean, cov, Ta, first, n, K, smean, scov);
}
