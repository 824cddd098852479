// Scans of FilterOp / SmoothOp elements on the GPU (Sarkka & Garcia-Fernandez,
// Section II): one launch per level for Hillis-Steele, Blelloch and the in-place
// Ladner-Fischer circuit, a one-thread fold, and the default chunked scan (a warp scans
// each chunk of 32 elements, or, past 2^19 elements, a thread each chunk of K in
// registers; the chunk totals are scanned recursively, then every element is fixed up
// with its chunk's prefix: each element read and written about twice).
//
// Batches: blockIdx.y picks one of a launch's sequences (B sequences of equal length n,
// stored one after the other), so that B scans run as one launch per level; every array
// argument is offset to that sequence (`bat()`).
//
// Every kernel takes `flip` (combine with the arguments swapped) and `ridx` (logical
// index i lives at physical index n-1-i): both set give the reverse scan
// s_k = a_k x ... x a_{n-1} in place.

__device__ __forceinline__ long long phys(long long i, long long n, int ridx) { return ridx ? n - 1 - i : i; }

template <class Op>
__device__ __forceinline__ void comb(const typename Op::E& a, const typename Op::E& b, typename Op::E& o, int flip) {
    if (flip) Op::combine(b, a, o); else Op::combine(a, b, o);
}


template <class Op>
__device__ void k_seq(typename Op::E* a, long long n, int flip, int ridx) {
    if (gtid() != 0) return;
    a += bat() * n;
    typename Op::E acc = a[phys(0, n, ridx)];
    for (long long i = 1; i < n; ++i) {
        typename Op::E t;
        comb<Op>(acc, a[phys(i, n, ridx)], t, flip);
        acc = t;
        a[phys(i, n, ridx)] = acc;
    }
}

template <class Op>
__device__ void k_up(typename Op::E* a, long long n, long long s, int flip, int ridx) {
    long long blk = gtid();
    long long j = blk * 2 * s + s - 1, k = blk * 2 * s + 2 * s - 1;
    if (k >= n) return;
    a += bat() * n;
    typename Op::E t;
    comb<Op>(a[phys(j, n, ridx)], a[phys(k, n, ridx)], t, flip);
    a[phys(k, n, ridx)] = t;
}

template <class Op>
__device__ void k_lf_down(typename Op::E* a, long long n, long long s, int flip, int ridx) {
    long long m = gtid() + 1;
    long long r = m * 2 * s - 1, w = r + s;
    if (w >= n) return;
    a += bat() * n;
    typename Op::E t;
    comb<Op>(a[phys(r, n, ridx)], a[phys(w, n, ridx)], t, flip);
    a[phys(w, n, ridx)] = t;
}

template <class Op>
__device__ void k_hs(const typename Op::E* src, typename Op::E* dst, long long n, long long s, int flip, int ridx) {
    long long i = gtid();
    if (i >= n) return;
    src += bat() * n;
    dst += bat() * n;
    if (i < s) { dst[phys(i, n, ridx)] = src[phys(i, n, ridx)]; return; }
    typename Op::E t;
    comb<Op>(src[phys(i - s, n, ridx)], src[phys(i, n, ridx)], t, flip);
    dst[phys(i, n, ridx)] = t;
}

// Sengupta et al.'s hybrid: after L up-sweep levels, Hillis-Steele over the tops of
// the 2^L-blocks, the strided sequence m -> logical index (m + 1) * stride - 1 of cnt
// elements; double-buffered between a and y, and s >= cnt just copies. The Ladner-Fischer
// down-sweep over the same L levels then completes every block.
template <class Op>
__device__ void k_hs_strided(const typename Op::E* src, typename Op::E* dst, long long n, long long stride, long long cnt,
                             long long s, int flip, int ridx) {
    long long m = gtid();
    if (m >= cnt) return;
    src += bat() * n;
    dst += bat() * n;
    long long i = (m + 1) * stride - 1;
    if (m < s) { dst[phys(i, n, ridx)] = src[phys(i, n, ridx)]; return; }
    long long j = (m - s + 1) * stride - 1;
    typename Op::E t;
    comb<Op>(src[phys(j, n, ridx)], src[phys(i, n, ridx)], t, flip);
    dst[phys(i, n, ridx)] = t;
}

// Blelloch works on a padded copy w (length p, a power of two, logical order).
template <class Op>
__device__ void k_bl_load(const typename Op::E* a, long long n, typename Op::E* w, typename Op::E* orig, long long p, int ridx) {
    long long i = gtid();
    if (i >= p) return;
    a += bat() * n;
    w += bat() * p;
    orig += bat() * p;
    typename Op::E x;
    if (i < n) x = a[phys(i, n, ridx)]; else Op::identity(x);
    w[i] = x;
    orig[i] = x;
}

template <class Op>
__device__ void k_bl_clear_last(typename Op::E* w, long long p) {
    if (gtid() == 0) Op::identity(w[bat() * p + p - 1]);
}

template <class Op>
__device__ void k_bl_down(typename Op::E* w, long long p, long long s, int flip) {
    long long blk = gtid();
    long long j = blk * 2 * s + s - 1, k = blk * 2 * s + 2 * s - 1;
    if (k >= p) return;
    w += bat() * p;
    typename Op::E t = w[j];
    typename Op::E ak = w[k];
    w[j] = ak;
    typename Op::E o;
    comb<Op>(ak, t, o, flip);
    w[k] = o;
}

template <class Op>
__device__ void k_bl_fix(const typename Op::E* w, const typename Op::E* orig, typename Op::E* a, long long n, int flip, int ridx) {
    long long i = gtid();
    if (i >= n) return;
    long long p = 1;
    while (p < n) p *= 2;
    w += bat() * p;
    orig += bat() * p;
    a += bat() * n;
    typename Op::E o;
    comb<Op>(w[i], orig[i], o, flip);
    a[phys(i, n, ridx)] = o;
}

// Chunked: thread c scans logical chunk [cK, min(n, (c+1)K)) and writes its total.
template <class Op>
__device__ void k_chunk(typename Op::E* a, long long n, int K, typename Op::E* carry, int flip, int ridx) {
    long long c = gtid();
    long long lo = c * K;
    if (lo >= n) return;
    a += bat() * n;
    carry += bat() * ((n + K - 1) / K);
    long long hi = min(n, lo + K);
    typename Op::E acc = a[phys(lo, n, ridx)];
    for (long long i = lo + 1; i < hi; ++i) {
        typename Op::E t;
        comb<Op>(acc, a[phys(i, n, ridx)], t, flip);
        acc = t;
        a[phys(i, n, ridx)] = acc;
    }
    carry[c] = acc;
}

// The chunked scan's first pass with chunks of 32 elements, each scanned by one warp:
// Hillis-Steele across the lanes in 5 shuffle rounds (one combine a round) in place of one
// thread's chain of 31 combines. The scans of the fused reduce's chunk totals (and of
// stored elements) are chains of dependent combines at low parallelism, so their depth is
// their time: with chunks of 16 in one thread, the 31250 totals at T = 10^6 took 0.50 ms
// of the filter's 0.83 ms (ncu, H200). Launched with a thread per element (rounded up to
// whole warps, blocks of whole warps); carry[w] receives warp w's total. As plain C++
// (the kernels' emulation, one thread at a time) lane 0 scans the chunk alone.
template <class Op>
__device__ void k_warp(typename Op::E* a, long long n, typename Op::E* carry, int flip, int ridx) {
    long long i = gtid();
    long long w = i >> 5;
    if ((w << 5) >= n) return;  // the whole warp
    a += bat() * n;
    carry += bat() * ((n + 31) >> 5);
    long long last = min(n, (w + 1) << 5) - 1;
#if defined(__CUDACC__)
    int lane = (int)(i & 31);
    typename Op::E v;
    if (i < n) v = a[phys(i, n, ridx)];
    else Op::identity(v);
    const int L = (int)(sizeof(v) / sizeof(real));
#pragma unroll
    for (int s = 1; s < 32; s <<= 1) {
        typename Op::E u;
        real* uv = reinterpret_cast<real*>(&u);
        const real* vv = reinterpret_cast<const real*>(&v);
#pragma unroll
        for (int q = 0; q < L; ++q) uv[q] = __shfl_up_sync(0xffffffffu, vv[q], s);
        if (lane >= s) {
            typename Op::E t;
            comb<Op>(u, v, t, flip);
            v = t;
        }
    }
    if (i < n) a[phys(i, n, ridx)] = v;
    if (i == last) carry[w] = v;
#else
    if ((i & 31) != 0) return;
    typename Op::E acc = a[phys(i, n, ridx)];
    for (long long j = i + 1; j <= last; ++j) {
        typename Op::E t;
        comb<Op>(acc, a[phys(j, n, ridx)], t, flip);
        acc = t;
        a[phys(j, n, ridx)] = acc;
    }
    carry[w] = acc;
#endif
}

// Element i of chunk c >= 1 becomes carry[c-1] x a_i (carry already scanned).
template <class Op>
__device__ void k_fix(typename Op::E* a, long long n, int K, const typename Op::E* carry, int flip, int ridx) {
    long long i = gtid() + K;
    if (i >= n) return;
    a += bat() * n;
    carry += bat() * ((n + K - 1) / K);
    long long c = i / K;
    typename Op::E t;
    comb<Op>(carry[c - 1], a[phys(i, n, ridx)], t, flip);
    a[phys(i, n, ridx)] = t;
}

#define SCAN_KERNELS(OP, P)                                                                                               \
    extern "C" __global__ void P##_seq(OP::E* a, long long n, int f, int r) { k_seq<OP>(a, n, f, r); }                    \
    extern "C" __global__ void P##_up(OP::E* a, long long n, long long s, int f, int r) { k_up<OP>(a, n, s, f, r); }      \
    extern "C" __global__ void P##_lf_down(OP::E* a, long long n, long long s, int f, int r) { k_lf_down<OP>(a, n, s, f, r); } \
    extern "C" __global__ void P##_hs(const OP::E* x, OP::E* y, long long n, long long s, int f, int r) { k_hs<OP>(x, y, n, s, f, r); } \
    extern "C" __global__ void P##_hs_strided(const OP::E* x, OP::E* y, long long n, long long st, long long c, long long s, int f, int r) { k_hs_strided<OP>(x, y, n, st, c, s, f, r); } \
    extern "C" __global__ void P##_bl_load(const OP::E* a, long long n, OP::E* w, OP::E* o, long long p, int r) { k_bl_load<OP>(a, n, w, o, p, r); } \
    extern "C" __global__ void P##_bl_clear_last(OP::E* w, long long p) { k_bl_clear_last<OP>(w, p); }                    \
    extern "C" __global__ void P##_bl_down(OP::E* w, long long p, long long s, int f) { k_bl_down<OP>(w, p, s, f); }      \
    extern "C" __global__ void P##_bl_fix(const OP::E* w, const OP::E* o, OP::E* a, long long n, int f, int r) { k_bl_fix<OP>(w, o, a, n, f, r); } \
    extern "C" __global__ void P##_chunk(OP::E* a, long long n, int K, OP::E* c, int f, int r) { k_chunk<OP>(a, n, K, c, f, r); } \
    extern "C" __global__ void P##_fix(OP::E* a, long long n, int K, const OP::E* c, int f, int r) { k_fix<OP>(a, n, K, c, f, r); } \
    extern "C" __global__ void P##_warp(OP::E* a, long long n, OP::E* c, int f, int r) { k_warp<OP>(a, n, c, f, r); }

// Fills n scalars with NaN (outputs before a run, so that an unwritten element shows).
extern "C" __global__ void poison(real* p, long long n) {
    long long i = gtid();
    if (i < n) p[i] = nanv();
}
