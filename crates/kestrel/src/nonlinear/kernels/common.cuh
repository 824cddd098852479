// The nonlinear family's device helpers: the expression language's operations with the
// CPU's definitions (nonlinear/expr.rs), angle wrapping, and the small dense
// factorisations of the Gaussian filters. `real` is float or double (set by the
// launcher); the math functions are CUDA's overloads for it.

#define KPI ((real)3.14159265358979323846)
// 1 / n rounded once to `real`: the series below multiply by these rather than divide,
// since a correctly rounded division costs a dozen instructions on the GPU and these
// kernels are bound by arithmetic (the CPU divides; the two agree to rounding).
#define K_INV(n) ((real)(1.0 / (n)))

// sin x and cos x together: one range reduction. In f32 kestrel's own (below); in f64,
// and in f32 with -DK_CUDA_TRIG, CUDA's `sincos` (the C++ build of the kernels that the
// tests run on the CPU: two calls).
//
// kestrel's f32 sine and cosine: x = j pi/2 + r by a three-part Cody-Waite reduction
// (exact with fused multiply-adds for |x| <= 105615), r's sine and cosine by minimax
// polynomials on [-pi/4, pi/4] (Cephes' sinf/cosf coefficients), the quadrant by j.
// Checked against the double-precision functions on every float up to 105615: at most
// 1.54 ulp from the exact value (CUDA documents 2 ulp for its sinf and cosf). Larger,
// infinite and NaN arguments go to CUDA's sincosf, in a function of its own, so that its
// reduction for large arguments is not inlined at every call (one a sigma point and an
// angle). On the H200 the f32 UKF kernel of `kestrel bench --only nonlinear` takes 15.25
// ms with these against 16.37 ms with CUDA's sincos (docs/performance.md).
#if defined(__CUDACC__)
__device__ __noinline__ void k_sincos_far(float x, float* s, float* c) { sincosf(x, s, c); }
#else
inline void k_sincos_far(float x, float* s, float* c) {
    *s = sinf(x);
    *c = cosf(x);
}
#endif
__device__ __forceinline__ void k_sincos(float x, float* s, float* c) {
#if !defined(K_CUDA_TRIG)
    if (fabsf(x) <= 105615.0f) {
        const float j = rintf(x * 0.636619772f);
        float r = fmaf(j, -1.57079625e+00f, x);
        r = fmaf(j, -7.54978942e-08f, r);
        r = fmaf(j, -5.39030253e-15f, r);
        const int q = (int)j;
        const float r2 = r * r;
        const float ps = fmaf(fmaf(-1.95152959e-4f, r2, 8.33216087e-3f), r2, -1.66666546e-1f);
        // x itself for x = +-0 (the polynomial's r + r (..) would give +0 for -0).
        const float sp = x == 0.0f ? x : fmaf(ps * r2, r, r);
        const float pc = fmaf(fmaf(fmaf(2.44331571e-5f, r2, -1.38873163e-3f), r2, 4.16666457e-2f), r2, -0.5f);
        const float cp = fmaf(pc, r2, 1.0f);
        const float sv = (q & 1) ? cp : sp, cv = (q & 1) ? sp : cp;
        *s = (q & 2) ? -sv : sv;
        *c = ((q + 1) & 2) ? -cv : cv;
        return;
    }
#endif
    k_sincos_far(x, s, c);
}
__device__ __forceinline__ void k_sincos(double x, double* s, double* c) {
#if defined(__CUDACC__)
    sincos(x, s, c);
#else
    *s = sin(x);
    *c = cos(x);
#endif
}
// One of the two: in f32 through k_sincos (the unused polynomial folds away; two calls
// on one argument are one), in f64 CUDA's own.
__device__ __forceinline__ float k_sin(float x) {
    float s, c;
    k_sincos(x, &s, &c);
    return s;
}
__device__ __forceinline__ float k_cos(float x) {
    float s, c;
    k_sincos(x, &s, &c);
    return c;
}
__device__ __forceinline__ double k_sin(double x) { return sin(x); }
__device__ __forceinline__ double k_cos(double x) { return cos(x); }

// The turn gains: sin(a b) / a and (1 - cos(a b)) / a, exact near a = 0 by their series
// (below |a b| = 0.05, as on the CPU), and their derivatives in a.
__device__ __forceinline__ real k_sin_over(real a, real b) {
    const real t = a * b;
    if (fabs(t) < (real)0.05) {
        const real t2 = t * t;
        return b * ((real)1 - t2 * K_INV(6) * ((real)1 - t2 * K_INV(20) * ((real)1 - t2 * K_INV(42) * ((real)1 - t2 * K_INV(72)))));
    }
    return k_sin(t) / a;
}
__device__ __forceinline__ real k_cos_over(real a, real b) {
    const real t = a * b;
    if (fabs(t) < (real)0.05) {
        const real t2 = t * t;
        return b * t * (real)0.5 * ((real)1 - t2 * K_INV(12) * ((real)1 - t2 * K_INV(30) * ((real)1 - t2 * K_INV(56) * ((real)1 - t2 * K_INV(90)))));
    }
    const real s = k_sin(t * (real)0.5);
    return (real)2 * s * s / a;
}
__device__ __forceinline__ real k_dsin_over(real a, real b) {
    const real t = a * b;
    if (fabs(t) < (real)0.05) {
        const real t2 = t * t;
        return b * b * t * (-K_INV(3) + t2 * K_INV(30) - t2 * t2 * K_INV(840) + t2 * t2 * t2 * K_INV(45360));
    }
    return (b * k_cos(t) * a - k_sin(t)) / (a * a);
}
__device__ __forceinline__ real k_dcos_over(real a, real b) {
    const real t = a * b;
    if (fabs(t) < (real)0.05) {
        const real t2 = t * t;
        return b * b * ((real)0.5 - t2 * K_INV(8) + t2 * t2 * K_INV(144) - t2 * t2 * t2 * K_INV(5760));
    }
    const real s = k_sin(t * (real)0.5);
    return (b * k_sin(t) * a - (real)2 * s * s) / (a * a);
}
// a^b, small integer exponents by multiplication (exact for negative bases).
__device__ __forceinline__ real k_pow(real a, real b) {
    if (b == trunc(b) && fabs(b) <= (real)64) {
        int n = (int)b;
        const bool inv = n < 0;
        if (inv) n = -n;
        real r = (real)1, x = a;
        while (n) {
            if (n & 1) r *= x;
            x *= x;
            n >>= 1;
        }
        return inv ? (real)1 / r : r;
    }
    return pow(a, b);
}
__device__ __forceinline__ real k_sign(real x) { return x > (real)0 ? (real)1 : (x < (real)0 ? (real)-1 : (real)0); }
__device__ __forceinline__ real k_le(real a, real b) { return a <= b ? (real)1 : (real)0; }

// a wrapped to (-pi, pi].
__device__ __forceinline__ real k_wrap(real a) {
    if (a > -KPI && a <= KPI) return a;
    const real r = a - (real)2 * KPI * floor((a + KPI) / ((real)2 * KPI));
    return r == -KPI ? KPI : r;
}

// The lower Cholesky factor of a positive semi-definite n x n P (row-major), with a zero
// column where a pivot vanishes to rounding; false when P is not semi-definite.
template <int N>
__device__ __forceinline__ bool chol_psd(const real* P, real* L) {
    real dmax = (real)0;
#pragma unroll
    for (int i = 0; i < N; i++) dmax = fmax(dmax, fabs(P[i * N + i]));
    const real tol = PSD_TOL * fmax(dmax, (real)1e-300);
#pragma unroll
    for (int i = 0; i < N * N; i++) L[i] = (real)0;
    return kst_chol<N, KST_PIVOT_SEMI, false, KstMul>([&](int i, int j) { return P[i * N + j]; },
                                                      [&](int i, int j) -> real& { return L[i * N + j]; }, nullptr, tol);
}

// The lower Cholesky factor L of a positive definite n x n A (row-major) and the
// reciprocals of its diagonal; false when a pivot is not positive.
template <int N>
__device__ __forceinline__ bool chol_pd(const real* A, real* L, real* il) {
#pragma unroll
    for (int i = 0; i < N * N; i++) L[i] = (real)0;
    return kst_chol<N, KST_PIVOT_STOP, false, KstMul>([&](int i, int j) { return A[i * N + j]; },
                                                      [&](int i, int j) -> real& { return L[i * N + j]; }, il, (real)0);
}

// w <- A^-1 w for A = L L^T (chol_pd's factor and reciprocals): forward then backward
// substitution.
template <int N>
__device__ __forceinline__ void chol_solve(const real* L, const real* il, real* w) {
#pragma unroll
    for (int i = 0; i < N; i++) {
        real v = w[i];
#pragma unroll
        for (int k = 0; k < i; k++) v -= L[i * N + k] * w[k];
        w[i] = v * il[i];
    }
#pragma unroll
    for (int i = N - 1; i >= 0; i--) {
        real v = w[i];
#pragma unroll
        for (int k = i + 1; k < N; k++) v -= L[k * N + i] * w[k];
        w[i] = v * il[i];
    }
}

// A covariance through a linear map H (R x NX, row-major): C = P H^T (NX x R) and
// S = H C (R x R). The EKF's prediction (H = F: C = D, S = F P F^T), its innovation
// covariance, and the iterated smoothers' affine models.
template <int R>
__device__ __forceinline__ void through(const real* P, const real* H, real* C, real* S) {
#pragma unroll
    for (int r = 0; r < NX; r++)
#pragma unroll
        for (int c = 0; c < R; c++) {
            real v = (real)0;
#pragma unroll
            for (int k = 0; k < NX; k++) v += P[r * NX + k] * H[c * NX + k];
            C[r * R + c] = v;
        }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < R; c++) {
            real v = (real)0;
#pragma unroll
            for (int k = 0; k < NX; k++) v += H[r * NX + k] * C[k * R + c];
            S[r * R + c] = v;
        }
}

// (M + M^T) / 2 in place.
template <int N>
__device__ __forceinline__ void symmetrize(real* M) {
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int j = 0; j < i; j++) {
            const real v = (real)0.5 * (M[i * N + j] + M[j * N + i]);
            M[i * N + j] = v;
            M[j * N + i] = v;
        }
}

// The Gaussian update from moments (nonlinear/ekf.rs `moment_update`): innovation y, its
// covariance S (R included, NY x NY) and the cross covariance C (NX x NY):
// K = C S^-1, m += K y, P -= C K^T (symmetrised), through S = L L^T. Writes the
// log-likelihood; false when S is not positive definite.
__device__ __forceinline__ bool moment_update(real* m, real* P, const real* y, const real* S, const real* C, real* ll) {
    // S = L L^T, and the reciprocals of L's diagonal (the substitutions multiply by them).
    real L[NY * NY], il[NY];
    if (!chol_pd<NY>(S, L, il)) return false;
    // Kt = S^-1 C^T (NY x NX), column by column.
    real Kt[NY * NX];
#pragma unroll
    for (int c = 0; c < NX; c++) {
        real w[NY];
#pragma unroll
        for (int i = 0; i < NY; i++) w[i] = C[c * NY + i];
        chol_solve<NY>(L, il, w);
#pragma unroll
        for (int i = 0; i < NY; i++) Kt[i * NX + c] = w[i];
    }
#pragma unroll
    for (int r = 0; r < NX; r++) {
        real v = (real)0;
#pragma unroll
        for (int i = 0; i < NY; i++) v += Kt[i * NX + r] * y[i];
        m[r] += v;
    }
#pragma unroll
    for (int r = 0; r < NX; r++)
#pragma unroll
        for (int c = 0; c < NX; c++) {
            real v = (real)0;
#pragma unroll
            for (int i = 0; i < NY; i++) v += C[r * NY + i] * Kt[i * NX + c];
            P[r * NX + c] -= v;
        }
    symmetrize<NX>(P);
    real w2 = (real)0, logdet = (real)0;
    real w[NY];
#pragma unroll
    for (int i = 0; i < NY; i++) {
        real v = y[i];
#pragma unroll
        for (int k = 0; k < i; k++) v -= L[i * NY + k] * w[k];
        w[i] = v * il[i];
        w2 += w[i] * w[i];
        logdet += log(L[i * NY + i]);
    }
    *ll = (real)-0.5 * ((real)NY * (real)1.8378770664093454836 + w2) - logdet;
    return true;
}
