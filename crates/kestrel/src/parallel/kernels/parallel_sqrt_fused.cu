// The fused square-root filter and smoother (parallel/cuda/run.rs, run_sqrt_fused), after
// parallel_sqrt.cu in the same module.
//
// The fused scan (as parallel_fused.cu for the covariance form): each sequence cut
// into chunks of K steps, one thread a chunk. qf_reduce builds the chunk's elements on the
// fly and combines them into its total; the totals are scanned (qf_chunk / qf_fix); then
// qf_sweep starts from the prefix of the chunks before (x_{lo-1|lo-1} and its factor) and
// walks the chunk with the square-root Kalman recursion, writing the moments and the
// log-likelihoods (and, for the smoother, the filtered factors). The smoother's reduce and
// sweep do the same in reverse with its elements, built from those means and factors.

__device__ __forceinline__ long long q_chunks(long long T, int K) { return (T + K - 1) / K; }

extern "C" __global__ void qf_reduce(const StepQ* st, int varying, const real* prior, const real* z, long long T, int K, QE* tot) {
    long long c = gtid(), nc = q_chunks(T, K);
    if (c >= nc) return;
    z += bat() * T * NY;
    tot += bat() * nc;
    long long lo = c * K, hi = min(T, lo + K);
    QE acc;
    qf_element(st, varying, prior, z, lo, acc);
    for (long long k = lo + 1; k < hi; ++k) {
        QE e, t;
        qf_element(st, varying, prior, z, k, e);
        SqrtFilterOp::combine(acc, e, t);
        acc = t;
    }
    tot[c] = acc;
}

// One step of the square-root Kalman filter on (x, U): the prediction into step k (k > 0):
// x = F x + u, U = tria [F U | L_Q]; the update with z_k unless missing: tria
// [[H U, L_R], [U, 0]] gives S^{1/2} (P11), the gain and the updated factor (P22). Returns
// the step's log-likelihood (0 when missing; NaN when S^{1/2} has a zero pivot).
__device__ __forceinline__ real q_kf_step(real x[NX], real U[NX2], const StepQ& m, const real* zk, long long k) {
    if (k > 0) {
        real xn[NX], w[NX * 2 * NX];
        vec_ax<NX, NX>(m.F, x, m.u, xn);
        mat_ab_into<NX, NX, NX, 2 * NX>(m.F, U, w);
        put_block<NX, NX, NX, 2 * NX>(m.LQ, w + NX);
#pragma unroll
        for (int i = 0; i < NX; ++i) x[i] = xn[i];
        tria<NX, 2 * NX>(w, U);
    }
    if (q_missing(zk)) return 0;
    real tri[NXY * NXY], K[NX * NY], e[NY];
    if (!q_update_factors(m, U, tri, K)) {
#pragma unroll
        for (int i = 0; i < NX; ++i) x[i] = nanv();
        return nanv();
    }
    q_residual(m, zk, x, e);
    q_correct(x, K, e, tri, x, U);
    return q_loglik<NXY>(tri, e);
}

// tot: the forward-scanned chunk totals (tot[c-1] = the prefix through chunk c-1, whose b
// and U are the filtered mean and factor of step cK-1). fac: the filtered factors, written
// when keep is set (the smoother reads them).
extern "C" __global__ void qf_sweep(const QE* tot, const StepQ* st, int varying, const real* prior, const real* z, long long T, int K,
                                    real* mean, real* cov, real* ll, real* fac, int keep) {
    long long c = gtid(), nc = q_chunks(T, K);
    if (c >= nc) return;
    tot += bat() * nc;
    to_sequence(T, z, mean, cov, ll);
    if (keep) fac += bat() * T * NX2;
    long long lo = c * K, hi = min(T, lo + K);
    real x[NX], U[NX2];
    const real* x0 = c == 0 ? prior : tot[c - 1].b;
    const real* u0 = c == 0 ? prior + NX : tot[c - 1].U;
#pragma unroll
    for (int i = 0; i < NX; ++i) x[i] = x0[i];
#pragma unroll
    for (int i = 0; i < NX2; ++i) U[i] = u0[i];
    for (long long k = lo; k < hi; ++k) {
        ll[k] = q_kf_step(x, U, stepq_at(st, varying, k), z + k * NY, k);
        real P[NX2];
        gram<NX>(U, P);
        st_block<NX>(mean + k * NX, x);
        st_block<NX2>(cov + k * NX2, P);
        if (keep) st_block<NX2>(fac + k * NX2, U);
    }
}

// qs_element of step k with the filtered mean and factor read from the sweep's outputs in
// whole blocks (ld_block).
__device__ __forceinline__ void qs_element_at(const StepQ* st, int varying, const real* mean, const real* fac, long long T, long long k, QS& o) {
    real x[NX], U[NX2];
    ld_block<NX>(mean + k * NX, x);
    ld_block<NX2>(fac + k * NX2, U);
    qs_element(st, varying, x, U, T, k, o);
}

extern "C" __global__ void qs_reduce(const StepQ* st, int varying, const real* mean, const real* fac, long long T, int K, QS* tot) {
    long long c = gtid(), nc = q_chunks(T, K);
    if (c >= nc) return;
    mean += bat() * T * NX;
    fac += bat() * T * NX2;
    tot += bat() * nc;
    long long lo = c * K, hi = min(T, lo + K);
    QS acc;
    qs_element_at(st, varying, mean, fac, T, hi - 1, acc);
    for (long long k = hi - 2; k >= lo; --k) {
        QS e, t;
        qs_element_at(st, varying, mean, fac, T, k, e);
        SqrtSmoothOp::combine(e, acc, t);
        acc = t;
    }
    tot[c] = acc;
}

// tot: the reverse-scanned chunk totals (tot[c+1] = the suffix from chunk c+1 to the end,
// (0, x_{hi|T}, D_{hi|T})).
extern "C" __global__ void qs_sweep(const QS* tot, const StepQ* st, int varying, const real* mean, const real* fac, long long T, int K,
                                    real* smean, real* scov) {
    long long c = gtid(), nc = q_chunks(T, K);
    if (c >= nc) return;
    mean += bat() * T * NX;
    fac += bat() * T * NX2;
    tot += bat() * nc;
    smean += bat() * T * NX;
    scov += bat() * T * NX2;
    long long lo = c * K, hi = min(T, lo + K);
    QS acc;
    if (c + 1 < nc) acc = tot[c + 1];
    for (long long k = hi - 1; k >= lo; --k) {
        QS e;
        qs_element_at(st, varying, mean, fac, T, k, e);
        if (k + 1 == T) {
            acc = e;
        } else {
            QS t;
            SqrtSmoothOp::combine(e, acc, t);
            acc = t;
        }
        real P[NX2];
        gram<NX>(acc.D, P);
        st_block<NX>(smean + k * NX, acc.g);
        st_block<NX2>(scov + k * NX2, P);
    }
}
