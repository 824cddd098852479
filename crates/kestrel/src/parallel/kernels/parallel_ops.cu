// Elements and associative operators of the parallel-in-time Kalman filter and RTS
// smoother (Sarkka & Garcia-Fernandez, Lemmas 3 and 4), for NX x NY models in `real`
// (float or double), every small matrix in registers (all loops unrolled).
// Prelude (from the host): #define NX, NY; typedef real.

#define NX2 (NX * NX)

struct FE { real A[NX2]; real b[NX]; real C[NX2]; real eta[NX]; real J[NX2]; };
struct SE { real E[NX2]; real g[NX]; real L[NX2]; };
struct StepM { real F[NX2]; real u[NX]; real Q[NX2]; real H[NY * NX]; real d[NY]; real R[NY * NY]; };

__device__ __forceinline__ long long gtid() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
// The sequence of a batched launch (see parallel_scan.cu).
__device__ __forceinline__ long long bat() { return blockIdx.y; }

// Moves a filter kernel's pointers to sequence bat() of T steps: measurements [T][NY],
// means [T][NX], covariances [T][NX2], log-likelihoods [T].
__device__ __forceinline__ void to_sequence(long long T, const real*& z, real*& mean, real*& cov, real*& ll) {
    z += bat() * T * NY;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
    ll += bat() * T;
}

// A build kernel's body: thread k of sequence bat() writes step k's element, made by
// `element` from the model, the prior and the sequence's measurements.
template <class Step, class Elem, void (*element)(const Step*, int, const real*, const real*, long long, Elem&)>
__device__ __forceinline__ void build_elements(const Step* st, int varying, const real* prior, const real* z, long long T, Elem* el) {
    long long k = gtid();
    if (k >= T) return;
    z += bat() * T * NY;
    el += bat() * T;
    Elem o;
    element(st, varying, prior, z, k, o);
    el[k] = o;
}

// Loads and stores of a step's block of N consecutive reals (a step's model, moments or
// measurement; its byte offset is a multiple of N * sizeof(real) from a 16-byte aligned
// buffer) in the widest accesses that alignment allows: 16 bytes where N * sizeof(real)
// is a multiple of 16, else 8, else one real. The fused kernels give each thread a chunk
// of consecutive steps, so a warp's accesses of one step are strided and every access
// instruction costs a request per thread: the sweeps were bound by the L2's partial writes
// of scalar stores and the reduces by the L1's requests of scalar loads (ncu, H200).
// Compiled as plain C++ (the kernels' emulation), the same loops run on scalars.
#if defined(__CUDACC__)
template <class R, int W> struct Vec;
template <> struct Vec<float, 16> {
    typedef float4 T;
    static __device__ __forceinline__ void get(const T& t, float* v) { v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w; }
    static __device__ __forceinline__ T make(const float* v) { T t; t.x = v[0]; t.y = v[1]; t.z = v[2]; t.w = v[3]; return t; }
};
template <> struct Vec<float, 8> {
    typedef float2 T;
    static __device__ __forceinline__ void get(const T& t, float* v) { v[0] = t.x; v[1] = t.y; }
    static __device__ __forceinline__ T make(const float* v) { T t; t.x = v[0]; t.y = v[1]; return t; }
};
template <> struct Vec<float, 4> {
    typedef float T;
    static __device__ __forceinline__ void get(const T& t, float* v) { v[0] = t; }
    static __device__ __forceinline__ T make(const float* v) { return v[0]; }
};
template <> struct Vec<double, 16> {
    typedef double2 T;
    static __device__ __forceinline__ void get(const T& t, double* v) { v[0] = t.x; v[1] = t.y; }
    static __device__ __forceinline__ T make(const double* v) { T t; t.x = v[0]; t.y = v[1]; return t; }
};
template <> struct Vec<double, 8> {
    typedef double T;
    static __device__ __forceinline__ void get(const T& t, double* v) { v[0] = t; }
    static __device__ __forceinline__ T make(const double* v) { return v[0]; }
};
template <int N>
struct BlockIo {
    static const int B = N * (int)sizeof(real);
    static const int W = B % 16 == 0 ? 16 : (B % 8 == 0 ? 8 : (int)sizeof(real));
    static const int P = W / (int)sizeof(real);
    typedef Vec<real, W> V;
};
template <int N>
__device__ __forceinline__ void ld_block(const real* p, real* v) {
    typedef BlockIo<N> I;
#pragma unroll
    for (int i = 0; i < N / I::P; ++i) I::V::get(reinterpret_cast<const typename I::V::T*>(p)[i], v + i * I::P);
}
template <int N>
__device__ __forceinline__ void st_block(real* p, const real* v) {
#pragma unroll
    for (int i = 0; i < N / BlockIo<N>::P; ++i) reinterpret_cast<typename BlockIo<N>::V::T*>(p)[i] = BlockIo<N>::V::make(v + i * BlockIo<N>::P);
}
#else
template <int N>
inline void ld_block(const real* p, real* v) { for (int i = 0; i < N; ++i) v[i] = p[i]; }
template <int N>
inline void st_block(real* p, const real* v) { for (int i = 0; i < N; ++i) p[i] = v[i]; }
#endif

__device__ __forceinline__ bool nan_(real v) { return v != v; }
__device__ __forceinline__ real nanv() { return (real)NAN; }

// Solves M X = B in place for a W-column right-hand side: Gaussian elimination with
// partial pivoting; row swaps through compile-time indices so that nothing leaves the
// registers. Returns false on a zero pivot.
template <int W>
__device__ __forceinline__ bool solve_nx(real M[NX2], real B[NX * W]) {
#pragma unroll
    for (int k = 0; k < NX; ++k) {
        int p = k;
        real best = fabs(M[k * NX + k]);
#pragma unroll
        for (int i = k + 1; i < NX; ++i) {
            real v = fabs(M[i * NX + k]);
            if (v > best) { best = v; p = i; }
        }
        if (!(best > (real)0)) return false;
#pragma unroll
        for (int i = k + 1; i < NX; ++i) {
            if (p == i) {
#pragma unroll
                for (int c = 0; c < NX; ++c) { real t = M[k * NX + c]; M[k * NX + c] = M[i * NX + c]; M[i * NX + c] = t; }
#pragma unroll
                for (int c = 0; c < W; ++c) { real t = B[k * W + c]; B[k * W + c] = B[i * W + c]; B[i * W + c] = t; }
            }
        }
        real inv = (real)1 / M[k * NX + k];
#pragma unroll
        for (int i = k + 1; i < NX; ++i) {
            real f = M[i * NX + k] * inv;
#pragma unroll
            for (int c = k + 1; c < NX; ++c) M[i * NX + c] -= f * M[k * NX + c];
#pragma unroll
            for (int c = 0; c < W; ++c) B[i * W + c] -= f * B[k * W + c];
        }
    }
#pragma unroll
    for (int i = NX - 1; i >= 0; --i) {
        real inv = (real)1 / M[i * NX + i];
#pragma unroll
        for (int c = 0; c < W; ++c) {
            real s = B[i * W + c];
#pragma unroll
            for (int k = i + 1; k < NX; ++k) s -= M[i * NX + k] * B[k * W + c];
            B[i * W + c] = s * inv;
        }
    }
    return true;
}

// In-place Cholesky of an N x N symmetric matrix (lower triangle); false if not PD.
template <int N>
__device__ __forceinline__ bool chol(real S[N * N]) {
    auto m = [&](int i, int j) -> real& { return S[i * N + j]; };
    return kst_chol<N, KST_PIVOT_STOP, true, KstMul>(m, m, nullptr, (real)0);
}

// Solves L Y = B (L lower from chol<N>) for W columns in place.
template <int N, int W>
__device__ __forceinline__ void lsolve(const real L[N * N], real B[N * W]) {
#pragma unroll
    for (int c = 0; c < W; ++c) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
            real s = B[i * W + c];
#pragma unroll
            for (int k = 0; k < i; ++k) s -= L[i * N + k] * B[k * W + c];
            B[i * W + c] = s / L[i * N + i];
        }
    }
}

// Solves L^T Y = B for W columns in place.
template <int N, int W>
__device__ __forceinline__ void ltsolve(const real L[N * N], real B[N * W]) {
#pragma unroll
    for (int c = 0; c < W; ++c) {
#pragma unroll
        for (int i = N - 1; i >= 0; --i) {
            real s = B[i * W + c];
#pragma unroll
            for (int k = i + 1; k < N; ++k) s -= L[k * N + i] * B[k * W + c];
            B[i * W + c] = s / L[i * N + i];
        }
    }
}

// The solve shared by the filtering operator and its (eta, J) part: N = M^T = I + J_j C_i
// and, row r of B (W columns), the right-hand sides [A_j^T (FULL only) | eta_j - J_j b_i |
// J_j A_i], the column of eta_j - J_j b_i at E0 = NX (FULL) or 0; solved in place
// (elimination treats each right-hand column alone, so the layout changes no bits).
// False where M is singular.
template <bool FULL>
__device__ __forceinline__ bool filter_solve(const FE& ei, const FE& ej, real* B) {
    const int W = FULL ? 2 * NX + 1 : NX + 1;
    const int E0 = FULL ? NX : 0;
    real N[NX2];
#pragma unroll
    for (int r = 0; r < NX; ++r) {
#pragma unroll
        for (int c = 0; c < NX; ++c) {
            real s = (r == c) ? (real)1 : (real)0;
            real t = 0;
#pragma unroll
            for (int l = 0; l < NX; ++l) { s += ej.J[r * NX + l] * ei.C[l * NX + c]; t += ej.J[r * NX + l] * ei.A[l * NX + c]; }
            N[r * NX + c] = s;
            if (FULL) B[r * W + c] = ej.A[c * NX + r];
            B[r * W + E0 + 1 + c] = t;
        }
        real e = ej.eta[r];
#pragma unroll
        for (int l = 0; l < NX; ++l) e -= ej.J[r * NX + l] * ei.b[l];
        B[r * W + E0] = e;
    }
    return solve_nx<W>(N, B);
}

// o's (eta, J) from a solved B of filter_solve (W columns, eta_j's column at E0):
// J = A_i^T M^{-T} J_j A_i symmetrised + J_i, eta = A_i^T M^{-T} (eta_j - J_j b_i) + eta_i.
template <int W, int E0>
__device__ __forceinline__ void filter_info_out(const FE& ei, const real* B, FE& o) {
#pragma unroll
    for (int r = 0; r < NX; ++r) {
#pragma unroll
        for (int c = 0; c <= r; ++c) {
            real s3 = 0, s4 = 0;
#pragma unroll
            for (int l = 0; l < NX; ++l) { s3 += ei.A[l * NX + r] * B[l * W + E0 + 1 + c]; s4 += ei.A[l * NX + c] * B[l * W + E0 + 1 + r]; }
            real jj = (real)0.5 * (s3 + s4) + (real)0.5 * (ei.J[r * NX + c] + ei.J[c * NX + r]);
            o.J[r * NX + c] = jj; o.J[c * NX + r] = jj;
        }
        real se = ei.eta[r];
#pragma unroll
        for (int l = 0; l < NX; ++l) se += ei.A[l * NX + r] * B[l * W + E0];
        o.eta[r] = se;
    }
}

// ---- the filtering operator (Lemma 3), identity (I, 0, 0, 0, 0)
struct FilterOp {
    typedef FE E;
    static __device__ __forceinline__ void identity(E& o) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.A[i] = (i / NX == i % NX) ? (real)1 : (real)0; o.C[i] = 0; o.J[i] = 0; }
#pragma unroll
        for (int i = 0; i < NX; ++i) { o.b[i] = 0; o.eta[i] = 0; }
    }
    // One solve with M^T = I + J_j C_i for [A_j^T | eta_j - J_j b_i | J_j A_i] (see the CPU
    // operator, parallel/filtering.rs).
    static __device__ __forceinline__ void combine(const E& ei, const E& ej, E& o) {
        const int W = 2 * NX + 1;
        real B[NX * W];
        if (!filter_solve<true>(ei, ej, B)) {
#pragma unroll
            for (int i = 0; i < NX2; ++i) { o.A[i] = nanv(); o.C[i] = nanv(); o.J[i] = nanv(); }
#pragma unroll
            for (int i = 0; i < NX; ++i) { o.b[i] = nanv(); o.eta[i] = nanv(); }
            return;
        }
        // T1 = A_j M^{-1}: T1[r][c] = B[c][r]
        real v[NX];
#pragma unroll
        for (int r = 0; r < NX; ++r) {
            real s = ei.b[r];
#pragma unroll
            for (int l = 0; l < NX; ++l) s += ei.C[r * NX + l] * ej.eta[l];
            v[r] = s;
        }
        real T2[NX2];  // T1 C_i
#pragma unroll
        for (int r = 0; r < NX; ++r) {
            real sb = ej.b[r];
#pragma unroll
            for (int c = 0; c < NX; ++c) {
                real sa = 0, sc = 0;
#pragma unroll
                for (int l = 0; l < NX; ++l) { sa += B[l * W + r] * ei.A[l * NX + c]; sc += B[l * W + r] * ei.C[l * NX + c]; }
                o.A[r * NX + c] = sa;
                T2[r * NX + c] = sc;
                sb += B[c * W + r] * v[c];
            }
            o.b[r] = sb;
        }
#pragma unroll
        for (int r = 0; r < NX; ++r) {
#pragma unroll
            for (int c = 0; c <= r; ++c) {
                real s1 = 0, s2 = 0;
#pragma unroll
                for (int l = 0; l < NX; ++l) {
                    s1 += T2[r * NX + l] * ej.A[c * NX + l];
                    s2 += T2[c * NX + l] * ej.A[r * NX + l];
                }
                real cc = (real)0.5 * (s1 + s2) + (real)0.5 * (ej.C[r * NX + c] + ej.C[c * NX + r]);
                o.C[r * NX + c] = cc; o.C[c * NX + r] = cc;
            }
        }
        filter_info_out<W, NX>(ei, B, o);
    }
};

// The (eta, J) of ei x ej alone, which depend on ej's (eta, J) and not on its (A, b, C):
// the backward sweep of the two-filter smoother carries nothing else. The same solve as
// FilterOp::combine restricted to its last NX + 1 columns; o's A, b and C are not
// written. o may be ej (ej is read in full before o is written).
__device__ __forceinline__ void filter_combine_info(const FE& ei, const FE& ej, FE& o) {
    const int W = NX + 1;
    real B[NX * W];
    if (!filter_solve<false>(ei, ej, B)) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) o.J[i] = nanv();
#pragma unroll
        for (int i = 0; i < NX; ++i) o.eta[i] = nanv();
        return;
    }
    filter_info_out<W, 0>(ei, B, o);
}

// ---- the smoothing operator (Lemma 4), identity (I, 0, 0)
struct SmoothOp {
    typedef SE E;
    static __device__ __forceinline__ void identity(E& o) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.E[i] = (i / NX == i % NX) ? (real)1 : (real)0; o.L[i] = 0; }
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = 0;
    }
    static __device__ __forceinline__ void combine(const E& ei, const E& ej, E& o) {
        real T[NX2];  // E_i L_j
#pragma unroll
        for (int r = 0; r < NX; ++r) {
            real sg = ei.g[r];
#pragma unroll
            for (int c = 0; c < NX; ++c) {
                real se = 0, st = 0;
#pragma unroll
                for (int l = 0; l < NX; ++l) { se += ei.E[r * NX + l] * ej.E[l * NX + c]; st += ei.E[r * NX + l] * ej.L[l * NX + c]; }
                o.E[r * NX + c] = se;
                T[r * NX + c] = st;
                sg += ei.E[r * NX + c] * ej.g[c];
            }
            o.g[r] = sg;
        }
#pragma unroll
        for (int r = 0; r < NX; ++r) {
#pragma unroll
            for (int c = 0; c <= r; ++c) {
                real s1 = 0, s2 = 0;
#pragma unroll
                for (int l = 0; l < NX; ++l) { s1 += T[r * NX + l] * ei.E[c * NX + l]; s2 += T[c * NX + l] * ei.E[r * NX + l]; }
                real v = (real)0.5 * (s1 + s2) + (real)0.5 * (ei.L[r * NX + c] + ei.L[c * NX + r]);
                o.L[r * NX + c] = v; o.L[c * NX + r] = v;
            }
        }
    }
};
