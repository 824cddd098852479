// The square-root parallel filter and RTS smoother (Yaghoobi, Corenflos, Hassan & Sarkka
// 2022, the linear case): the elements, operators and read-outs of parallel/sqrt/*.rs as
// CUDA kernels, every small matrix in registers. Every covariance is a factor's product
// with itself and every factor comes out of an orthogonal triangularisation (tria), so no
// covariance can lose positive semi-definiteness to rounding, in float too.
// Compiled as a module of its own (parallel/cuda/mod.rs, sqrt_kernels) after
// parallel_ops.cu and parallel_scan.cu.
//
// The per-step model comes with its factors from the host (parallel/cuda/run.rs,
// DevModel::factored): F, u, L_Q, H, d, L_R with L_Q L_Q^T = Q, L_R L_R^T = R, and the
// prior (x0, L_P0). Elements: QE = (A, b, U, eta, Z) with C = U U^T, J = Z Z^T (the
// filtering element's layout), QS = (E, g, D) with L = D D^T (the smoothing element's).

struct QE { real A[NX2]; real b[NX]; real U[NX2]; real eta[NX]; real Z[NX2]; };
struct QS { real E[NX2]; real g[NX]; real D[NX2]; };
struct StepQ { real F[NX2]; real u[NX]; real LQ[NX2]; real H[NY * NX]; real d[NY]; real LR[NY * NY]; };

#define QLN_2PI ((real)1.8378770664093454835606594728112)
#define NXY (NX + NY)

// Step k's model (the one set of a time-invariant model), loaded in whole blocks (ld_block).
__device__ __forceinline__ StepQ stepq_at(const StepQ* st, int varying, long long k) {
    StepQ m;
    ld_block<(int)(sizeof(StepQ) / sizeof(real))>(reinterpret_cast<const real*>(st + (varying ? k : 0)), reinterpret_cast<real*>(&m));
    return m;
}

__device__ __forceinline__ bool q_missing(const real* z) {
    bool m = false;
#pragma unroll
    for (int a = 0; a < NY; ++a) m |= nan_(z[a]);
    return m;
}

// L (R x R, lower, non-negative diagonal) with L L^T = W W^T for W (R x C, row-major):
// Householder reflections from the right, W overwritten (parallel/sqrt/factor.rs, tria).
template <int R, int C>
__device__ __forceinline__ void tria(real w[R * C], real out[R * R]) {
#pragma unroll
    for (int i = 0; i < (R < C ? R : C); ++i) {
        real alpha = 0;
#pragma unroll
        for (int c = i; c < C; ++c) alpha += w[i * C + c] * w[i * C + c];
        alpha = sqrt(alpha);
        if (alpha == (real)0) continue;
        real s = w[i * C + i] > (real)0 ? -alpha : alpha;
        real v0 = w[i * C + i] - s;
        real vn = v0 * v0;
#pragma unroll
        for (int c = i + 1; c < C; ++c) vn += w[i * C + c] * w[i * C + c];
        if (vn == (real)0) continue;
#pragma unroll
        for (int r = i + 1; r < R; ++r) {
            real dot = w[r * C + i] * v0;
#pragma unroll
            for (int c = i + 1; c < C; ++c) dot += w[r * C + c] * w[i * C + c];
            real f = (dot + dot) / vn;
            w[r * C + i] -= f * v0;
#pragma unroll
            for (int c = i + 1; c < C; ++c) w[r * C + c] -= f * w[i * C + c];
        }
        w[i * C + i] = s;
#pragma unroll
        for (int c = i + 1; c < C; ++c) w[i * C + c] = 0;
    }
#pragma unroll
    for (int i = 0; i < R * R; ++i) out[i] = 0;
#pragma unroll
    for (int c = 0; c < (R < C ? R : C); ++c) {
        real sign = w[c * C + c] < (real)0 ? (real)-1 : (real)1;
#pragma unroll
        for (int r = c; r < R; ++r) out[r * R + c] = sign * w[r * C + c];
    }
}

// out = U U^T for a lower factor U (N x N).
template <int N>
__device__ __forceinline__ void gram(const real* u, real* out) {
#pragma unroll
    for (int r = 0; r < N; ++r) {
#pragma unroll
        for (int c = 0; c < N; ++c) {
            real v = 0;
#pragma unroll
            for (int l = 0; l <= (r < c ? r : c); ++l) v += u[r * N + l] * u[c * N + l];
            out[r * N + c] = v;
        }
    }
}

// Small dense products in registers, row-major, each sum from its first value over l in
// ascending order (the order the operators below had written out, so the same bits).
// out (R x C, row stride LDO) = A (R x K) B (K x C) with the operands read through
// strides, A(r, l) = a[r * AR + l * AL] and B(l, c) = b[l * BL + c * BC]: a transposed
// operand swaps its two strides, a block of a wider matrix has that matrix's row stride.
template <int R, int K, int C, int AR, int AL, int BL, int BC, int LDO>
__device__ __forceinline__ void prod(const real* a, const real* b, real* out) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            real v = 0;
#pragma unroll
            for (int l = 0; l < K; ++l) v += a[r * AR + l * AL] * b[l * BL + c * BC];
            out[r * LDO + c] = v;
        }
    }
}

// out (R x C) = A (R x K) B (K x C), all three dense.
template <int R, int K, int C>
__device__ __forceinline__ void mat_ab(const real* a, const real* b, real* out) {
    prod<R, K, C, K, 1, C, 1, C>(a, b, out);
}

// out (R x C, row stride LDO) = A (R x K) B (K x C) for dense A and B: a product written
// into a block of a wider matrix.
template <int R, int K, int C, int LDO>
__device__ __forceinline__ void mat_ab_into(const real* a, const real* b, real* out) {
    prod<R, K, C, K, 1, C, 1, LDO>(a, b, out);
}

// dst (R x C, row stride LDD) = src (row stride LDS): a block copied between matrices.
template <int R, int C, int LDS, int LDD>
__device__ __forceinline__ void put_block(const real* src, real* dst) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int c = 0; c < C; ++c) dst[r * LDD + c] = src[r * LDS + c];
    }
}

// dst (R x C, row stride LDD) = 0.
template <int R, int C, int LDD>
__device__ __forceinline__ void zero_block(real* dst) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int c = 0; c < C; ++c) dst[r * LDD + c] = 0;
    }
}

// out = init + A x (SUB: init - A x) for A (R x K); init null for 0.
template <int R, int K, bool SUB = false>
__device__ __forceinline__ void vec_ax(const real* a, const real* x, const real* init, real* out) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        real v = init ? init[r] : (real)0;
#pragma unroll
        for (int l = 0; l < K; ++l) {
            if (SUB) v -= a[r * K + l] * x[l];
            else v += a[r * K + l] * x[l];
        }
        out[r] = v;
    }
}

// out = init + A^T x for A (K x R); init null for 0.
template <int R, int K>
__device__ __forceinline__ void vec_atx(const real* a, const real* x, const real* init, real* out) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        real v = init ? init[r] : (real)0;
#pragma unroll
        for (int l = 0; l < K; ++l) v += a[l * R + r] * x[l];
        out[r] = v;
    }
}

// The innovation e = z - d - H x of step model m (z - d first, then the products
// subtracted in ascending order).
__device__ __forceinline__ void q_residual(const StepQ& m, const real* zk, const real* x, real e[NY]) {
#pragma unroll
    for (int a = 0; a < NY; ++a) {
        real v = zk[a] - m.d[a];
#pragma unroll
        for (int q = 0; q < NX; ++q) v -= m.H[a * NX + q] * x[q];
        e[a] = v;
    }
}

// ---- the square-root filtering operator (parallel/sqrt/mod.rs, SqrtFilterOp)
struct SqrtFilterOp {
    typedef QE E;
    static __device__ __forceinline__ void identity(E& o) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.A[i] = (i / NX == i % NX) ? (real)1 : (real)0; o.U[i] = 0; o.Z[i] = 0; }
#pragma unroll
        for (int i = 0; i < NX; ++i) { o.b[i] = 0; o.eta[i] = 0; }
    }
    static __device__ __forceinline__ void nan_out(E& o) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.A[i] = nanv(); o.U[i] = nanv(); o.Z[i] = nanv(); }
#pragma unroll
        for (int i = 0; i < NX; ++i) { o.b[i] = nanv(); o.eta[i] = nanv(); }
    }
    static __device__ __forceinline__ void combine(const E& ei, const E& ej, E& o) {
        const int M = 2 * NX;
        // Phi = [[U_i^T Z_j, I], [Z_j, 0]] -> Xi = tria(Phi).
        real phi[M * M], xi[M * M];
        prod<NX, NX, NX, 1, NX, NX, 1, M>(ei.U, ej.Z, phi);
#pragma unroll
        for (int i = 0; i < NX2; ++i) phi[(i / NX) * M + NX + i % NX] = i / NX == i % NX ? (real)1 : (real)0;
        put_block<NX, NX, NX, M>(ej.Z, phi + NX * M);
        zero_block<NX, NX, M>(phi + NX * M + NX);
        tria<M, M>(phi, xi);
        // Y^T = X11^{-1} U_i^T (forward substitution), column by column.
        real yt[NX2];
#pragma unroll
        for (int r = 0; r < NX; ++r) {
#pragma unroll
            for (int c = 0; c < NX; ++c) yt[r * NX + c] = ei.U[c * NX + r];
        }
#pragma unroll
        for (int i = 0; i < NX; ++i) {
            real d = xi[i * M + i];
            if (d == (real)0) { nan_out(o); return; }
#pragma unroll
            for (int c = 0; c < NX; ++c) {
                real s = yt[i * NX + c];
#pragma unroll
                for (int k = 0; k < i; ++k) s -= xi[i * M + k] * yt[k * NX + c];
                yt[i * NX + c] = s / d;
            }
        }
        // D = I - Y X21^T (Y[r][l] = yt[l][r]).
        real D[NX2];
#pragma unroll
        for (int r = 0; r < NX; ++r) {
#pragma unroll
            for (int c = 0; c < NX; ++c) {
                real v = r == c ? (real)1 : (real)0;
#pragma unroll
                for (int l = 0; l < NX; ++l) v -= yt[l * NX + r] * xi[(NX + c) * M + l];
                D[r * NX + c] = v;
            }
        }
        // T2 = A_j D; A = T2 A_i; b = T2 (b_i + U_i U_i^T eta_j) + b_j.
        real t2[NX2];
        mat_ab<NX, NX, NX>(ej.A, D, t2);
        mat_ab<NX, NX, NX>(t2, ei.A, o.A);
        real v1[NX], v2[NX];
        vec_atx<NX, NX>(ei.U, ej.eta, nullptr, v1);
        vec_ax<NX, NX>(ei.U, v1, ei.b, v2);
        vec_ax<NX, NX>(t2, v2, ej.b, o.b);
        // U = tria [A_j Y | U_j].
        real wide[NX * M];
        prod<NX, NX, NX, NX, 1, 1, NX, M>(ej.A, yt, wide);
        put_block<NX, NX, NX, M>(ej.U, wide + NX);
        tria<NX, M>(wide, o.U);
        // eta = A_i^T D^T (eta_j - Z_j Z_j^T b_i) + eta_i.
        vec_atx<NX, NX>(ej.Z, ei.b, nullptr, v1);
        vec_ax<NX, NX, true>(ej.Z, v1, ej.eta, v2);
        vec_atx<NX, NX>(D, v2, nullptr, v1);
        vec_atx<NX, NX>(ei.A, v1, ei.eta, o.eta);
        // Z = tria [A_i^T X22 | Z_i].
        prod<NX, NX, NX, 1, NX, M, 1, M>(ei.A, xi + NX * M + NX, wide);
        put_block<NX, NX, NX, M>(ei.Z, wide + NX);
        tria<NX, M>(wide, o.Z);
    }
};

// ---- the square-root smoothing operator (parallel/sqrt/smooth.rs, SqrtSmoothOp)
struct SqrtSmoothOp {
    typedef QS E;
    static __device__ __forceinline__ void identity(E& o) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.E[i] = (i / NX == i % NX) ? (real)1 : (real)0; o.D[i] = 0; }
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = 0;
    }
    static __device__ __forceinline__ void combine(const E& ei, const E& ej, E& o) {
        const int M = 2 * NX;
        vec_ax<NX, NX>(ei.E, ej.g, ei.g, o.g);
        mat_ab<NX, NX, NX>(ei.E, ej.E, o.E);
        real wide[NX * M];
        mat_ab_into<NX, NX, NX, M>(ei.E, ej.D, wide);
        put_block<NX, NX, NX, M>(ei.D, wide + NX);
        tria<NX, M>(wide, o.D);
    }
};

SCAN_KERNELS(SqrtFilterOp, qf)
SCAN_KERNELS(SqrtSmoothOp, qs)

// tria [[H L, L_R], [L, 0]] ((NY + NX) x (NX + NY)) into tri, and K (NX x NY) with
// K^T = P11^{-T} P21^T; false on a non-positive pivot of P11.
__device__ __forceinline__ bool q_update_factors(const StepQ& m, const real L[NX2], real tri[NXY * NXY], real K[NX * NY]) {
    real psi[NXY * NXY];
    mat_ab_into<NY, NX, NX, NXY>(m.H, L, psi);
    put_block<NY, NY, NY, NXY>(m.LR, psi + NX);
    put_block<NX, NX, NX, NXY>(L, psi + NY * NXY);
    zero_block<NX, NY, NXY>(psi + NY * NXY + NX);
    tria<NXY, NXY>(psi, tri);
#pragma unroll
    for (int i = NY - 1; i >= 0; --i) {
        real d = tri[i * NXY + i];
        if (!(d > (real)0)) return false;
#pragma unroll
        for (int c = 0; c < NX; ++c) {
            real v = tri[(NY + c) * NXY + i];
#pragma unroll
            for (int q = i + 1; q < NY; ++q) v -= tri[q * NXY + i] * K[c * NY + q];
            K[c * NY + i] = v / d;
        }
    }
    return true;
}

// The update's read-out: x_out = x + K e (x_out may be x) and U = P22, the lower-right
// NX x NX block of tri.
__device__ __forceinline__ void q_correct(const real* x, const real K[NX * NY], const real e[NY], const real tri[NXY * NXY], real* xo,
                                          real* U) {
    vec_ax<NX, NY>(K, e, x, xo);
    put_block<NX, NX, NXY, NX>(tri + NY * NXY + NY, U);
}

// The log-likelihood of the innovation e (overwritten) under S = P P^T for the lower
// factor P (NY x NY, row stride LD) at tri: forward substitution, then
// -(NY ln 2 pi + |P^{-1} e|^2) / 2 - ln det P; NaN on a zero pivot.
template <int LD>
__device__ __forceinline__ real q_loglik(const real* tri, real e[NY]) {
    real logdet = 0, maha = 0;
#pragma unroll
    for (int i = 0; i < NY; ++i) {
        real d = tri[i * LD + i];
        real s = e[i];
#pragma unroll
        for (int q = 0; q < i; ++q) s -= tri[i * LD + q] * e[q];
        e[i] = s / d;
        if (d == (real)0) return nanv();
        logdet += log(d);
        maha += e[i] * e[i];
    }
    return -(real)0.5 * ((real)NY * QLN_2PI + maha) - logdet;
}

// The square-root filtering element of step k (parallel/sqrt/mod.rs, element).
__device__ __forceinline__ void qf_element(const StepQ* st, int varying, const real* prior, const real* z, long long k, QE& o) {
    const real* zk = z + k * NY;
    const StepQ& m = stepq_at(st, varying, k);
    const real* x0 = prior;
    const real* lp0 = prior + NX;
#pragma unroll
    for (int i = 0; i < NX2; ++i) { o.A[i] = 0; o.U[i] = 0; o.Z[i] = 0; }
#pragma unroll
    for (int i = 0; i < NX; ++i) { o.b[i] = 0; o.eta[i] = 0; }
    bool miss = q_missing(zk);
    real tri[NXY * NXY], K[NX * NY], e[NY];
    if (k == 0) {
#pragma unroll
        for (int i = 0; i < NX; ++i) o.b[i] = x0[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) o.U[i] = lp0[i];
        if (miss) return;
        real L[NX2];
#pragma unroll
        for (int i = 0; i < NX2; ++i) L[i] = lp0[i];
        if (!q_update_factors(m, L, tri, K)) { SqrtFilterOp::nan_out(o); return; }
        q_residual(m, zk, x0, e);
        q_correct(x0, K, e, tri, o.b, o.U);
        return;
    }
#pragma unroll
    for (int i = 0; i < NX2; ++i) { o.A[i] = m.F[i]; o.U[i] = m.LQ[i]; }
#pragma unroll
    for (int i = 0; i < NX; ++i) o.b[i] = m.u[i];
    if (miss) return;
    if (!q_update_factors(m, m.LQ, tri, K)) { SqrtFilterOp::nan_out(o); return; }
    real hf[NY * NX];
    mat_ab<NY, NX, NX>(m.H, m.F, hf);
    q_residual(m, zk, m.u, e);
    q_correct(m.u, K, e, tri, o.b, o.U);
#pragma unroll
    for (int r = 0; r < NX; ++r) {
#pragma unroll
        for (int c = 0; c < NX; ++c) {
            real arc = m.F[r * NX + c];
#pragma unroll
            for (int a = 0; a < NY; ++a) arc -= K[r * NY + a] * hf[a * NX + c];
            o.A[r * NX + c] = arc;
        }
    }
    // G^T = P11^{-1} H F, w = P11^{-1} e (forward substitution; P11's pivots are > 0).
#pragma unroll
    for (int i = 0; i < NY; ++i) {
        real d = tri[i * NXY + i];
#pragma unroll
        for (int c = 0; c < NX; ++c) {
            real s = hf[i * NX + c];
#pragma unroll
            for (int q = 0; q < i; ++q) s -= tri[i * NXY + q] * hf[q * NX + c];
            hf[i * NX + c] = s / d;
        }
        real s = e[i];
#pragma unroll
        for (int q = 0; q < i; ++q) s -= tri[i * NXY + q] * e[q];
        e[i] = s / d;
    }
    real g[NX * NY];
#pragma unroll
    for (int r = 0; r < NX; ++r) {
        real v = 0;
#pragma unroll
        for (int a = 0; a < NY; ++a) { v += hf[a * NX + r] * e[a]; g[r * NY + a] = hf[a * NX + r]; }
        o.eta[r] = v;
    }
    tria<NX, NY>(g, o.Z);
}

extern "C" __global__ void qf_build(const StepQ* st, int varying, const real* prior, const real* z, long long T, QE* el) {
    build_elements<StepQ, QE, qf_element>(st, varying, prior, z, T, el);
}

// x_{k|k} = b_k, P_{k|k} = U_k U_k^T, and the step's log-likelihood from the predicted
// factor tria [H F U_{k-1} | H L_Q | L_R] (at step 0: [H L_P0 | L_R]).
extern "C" __global__ void qf_extract(const QE* el, const StepQ* st, int varying, const real* prior, const real* z, long long T,
                                      real* mean, real* cov, real* ll) {
    long long k = gtid();
    if (k >= T) return;
    el += bat() * T;
    to_sequence(T, z, mean, cov, ll);
#pragma unroll
    for (int i = 0; i < NX; ++i) mean[k * NX + i] = el[k].b[i];
    gram<NX>(el[k].U, cov + k * NX2);
    const real* zk = z + k * NY;
    if (q_missing(zk)) { ll[k] = 0; return; }
    const StepQ& m = stepq_at(st, varying, k);
    const int W = 2 * NX + NY;
    real psi[NY * W], xp[NX];
    if (k == 0) {
#pragma unroll
        for (int i = 0; i < NX; ++i) xp[i] = prior[i];
        mat_ab_into<NY, NX, NX, W>(m.H, prior + NX, psi);
        zero_block<NY, NX, W>(psi + NX);
    } else {
        const QE& p = el[k - 1];
        real hf[NY * NX];
        vec_ax<NX, NX>(m.F, p.b, m.u, xp);
        mat_ab<NY, NX, NX>(m.H, m.F, hf);
        mat_ab_into<NY, NX, NX, W>(hf, p.U, psi);
        mat_ab_into<NY, NX, NX, W>(m.H, m.LQ, psi + NX);
    }
    put_block<NY, NY, NY, W>(m.LR, psi + 2 * NX);
    real tri[NY * NY], e[NY];
    tria<NY, W>(psi, tri);
    q_residual(m, zk, xp, e);
    ll[k] = q_loglik<NY>(tri, e);
}

// x_{k|T} = g, P_{k|T} = D D^T of the reverse-scanned smoothing elements.
extern "C" __global__ void qs_extract(const QS* se, long long T, real* smean, real* scov) {
    long long k = gtid();
    if (k >= T) return;
    se += bat() * T;
    smean += bat() * T * NX;
    scov += bat() * T * NX2;
#pragma unroll
    for (int i = 0; i < NX; ++i) smean[k * NX + i] = se[k].g[i];
    gram<NX>(se[k].D, scov + k * NX2);
}

// The square-root smoothing element of step k from the filtered mean and factor at k
// (parallel/sqrt/smooth.rs, element_k / element_last).
__device__ __forceinline__ void qs_element(const StepQ* st, int varying, const real* x, const real* U, long long T, long long k, QS& o) {
    if (k + 1 == T) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.E[i] = 0; o.D[i] = U[i]; }
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = x[i];
        return;
    }
    const StepQ& m = stepq_at(st, varying, k + 1);
    const int M = 2 * NX;
    real psi[M * M], tri[M * M];
    mat_ab_into<NX, NX, NX, M>(m.F, U, psi);
    put_block<NX, NX, NX, M>(m.LQ, psi + NX);
    put_block<NX, NX, NX, M>(U, psi + NX * M);
    zero_block<NX, NX, M>(psi + NX * M + NX);
    tria<M, M>(psi, tri);
    bool ok = true;
#pragma unroll
    for (int r = 0; r < NX; ++r) {
#pragma unroll
        for (int i = NX - 1; i >= 0; --i) {
            real d = tri[i * M + i];
            ok = ok && d > (real)0;
            real v = tri[(NX + r) * M + i];
#pragma unroll
            for (int q = i + 1; q < NX; ++q) v -= tri[q * M + i] * o.E[r * NX + q];
            o.E[r * NX + i] = v / d;
        }
    }
    real xp[NX];
    vec_ax<NX, NX>(m.F, x, m.u, xp);
    vec_ax<NX, NX, true>(o.E, xp, x, o.g);
    put_block<NX, NX, M, NX>(tri + NX * M + NX, o.D);
    if (!ok) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.E[i] = nanv(); o.D[i] = nanv(); }
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = nanv();
    }
}

// The square-root smoothing elements from the scanned filtering elements (b_k = x_{k|k},
// U_k), one thread per step.
extern "C" __global__ void qs_build(const StepQ* st, int varying, const QE* el, long long T, QS* se) {
    long long k = gtid();
    if (k >= T) return;
    el += bat() * T;
    se += bat() * T;
    QS o;
    qs_element(st, varying, el[k].b, el[k].U, T, k, o);
    se[k] = o;
}
