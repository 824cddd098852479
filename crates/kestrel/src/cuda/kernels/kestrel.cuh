// kestrel's device code shared by every family: prepended to a family's translation unit
// right after its prelude (which defines `real`, float or double), before the family's
// own headers (crate::cuda::DEVICE_HEADER). Compiled by NVRTC and, in the tests, by the
// host compiler (tests/*_emulation): plain C++17, no CUDA intrinsics named here.

// The square root of the working type, spelled out so that no overload resolution is
// left to the math headers.
__device__ __forceinline__ float kst_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double kst_sqrt(double x) { return sqrt(x); }

// A product the compiler may fuse with the sum it feeds (NVRTC runs with --fmad=true);
// a family that must round as the CPU does passes its own (kalman's kmul<true>).
struct KstMul {
    template <class T>
    __device__ __forceinline__ static T op(T a, T b) { return a * b; }
};

// What kst_chol does at a pivot (the diagonal entry before its square root):
#define KST_PIVOT_STOP 0  // returns false at the first pivot not positive
#define KST_PIVOT_FLAG 1  // factors every column; false at the end if a pivot was not positive
#define KST_PIVOT_SEMI 2  // semi-definite: a pivot within tol of zero leaves its column
                          // unwritten, one below -tol returns false

// The lower Cholesky factor of a symmetric N x N matrix, column by column as the CPU
// reference factors (linalg/chol.rs): the pivot is the diagonal entry less the squares
// of the row's earlier entries, in order; each entry below it, the matrix's entry less
// the products with the earlier columns, in order, divided by the pivot's root (DIV) or
// multiplied by its reciprocal. a(i, j) reads the matrix's entry (i >= j), l(i, j) is a
// reference to the factor's (the same storage for a factor in place); inv, when not
// null, receives the reciprocals of the diagonal. Mul forms every product. The one
// factorisation behind kalman's chol_packed, parallel's chol, nonlinear's chol_pd and
// chol_psd, each a view of its own storage and its own policy.
template <int N, int PIVOT, bool DIV, class Mul, class Src, class Dst>
__device__ __forceinline__ bool kst_chol(Src a, Dst l, real* inv, real tol) {
    bool ok = true;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        real s = a(j, j);
#pragma unroll
        for (int k = 0; k < j; ++k) s -= Mul::op(l(j, k), l(j, k));
        if (PIVOT == KST_PIVOT_STOP) {
            if (!(s > (real)0)) return false;
        } else if (PIVOT == KST_PIVOT_FLAG) {
            ok = ok && (s > (real)0);
        } else {
            if (s < -tol) return false;
            if (s <= tol) continue;
        }
        const real d = kst_sqrt(s);
        l(j, j) = d;
        const real r = (real)1 / d;
        if (inv != nullptr) inv[j] = r;
#pragma unroll
        for (int i = j + 1; i < N; ++i) {
            real t = a(i, j);
#pragma unroll
            for (int k = 0; k < j; ++k) t -= Mul::op(l(i, k), l(j, k));
            l(i, j) = DIV ? t / d : t * r;
        }
    }
    return ok;
}
