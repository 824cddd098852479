// Philox 4x32-10 and the draws built on it: the CUDA twin of particle/philox.rs (same
// keying, same words, same conversions; see that file for the conventions). Compiled by
// NVRTC with the filter's kernels, and as plain C++ in the emulation tests.
#define PF_M0 0xD2511F53u
#define PF_M1 0xCD9E8D57u
#define PF_W0 0x9E3779B9u
#define PF_W1 0xBB67AE85u
#define PF_PURPOSE_PROPAGATE 0u
#define PF_PURPOSE_RESAMPLE 1u

struct PfWords { unsigned v[4]; };

__device__ __forceinline__ unsigned pf_mulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * (unsigned long long)b) >> 32);
}

__device__ __forceinline__ PfWords pf_philox(unsigned c0, unsigned c1, unsigned c2, unsigned c3,
                                             unsigned k0, unsigned k1) {
    for (int r = 0; r < 10; ++r) {
        if (r > 0) { k0 += PF_W0; k1 += PF_W1; }
        unsigned hi0 = pf_mulhi(PF_M0, c0), lo0 = PF_M0 * c0;
        unsigned hi1 = pf_mulhi(PF_M1, c2), lo1 = PF_M1 * c2;
        unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    }
    PfWords w;
    w.v[0] = c0; w.v[1] = c1; w.v[2] = c2; w.v[3] = c3;
    return w;
}

// Block j of the draws for `purpose` of slot i, filter b, step k.
__device__ __forceinline__ PfWords pf_words(unsigned i, unsigned b, unsigned k, unsigned purpose,
                                            unsigned j, unsigned k0, unsigned k1) {
    return pf_philox(i, b, k, (purpose << 24) | (j & 0x00FFFFFFu), k0, k1);
}

__device__ __forceinline__ double pf_uniform_f64(unsigned x) {
    return ((double)x + 0.5) * (1.0 / 4294967296.0);
}

__device__ __forceinline__ unsigned pf_index(unsigned x, unsigned n) {
    return (unsigned)(((unsigned long long)x * (unsigned long long)n) >> 32);
}

#if PF_F32
__device__ __forceinline__ real_t pf_uniform(unsigned x) {
    return (real_t)(((double)(x >> 9) + 0.5) * (1.0 / 8388608.0));
}
#else
__device__ __forceinline__ real_t pf_uniform(unsigned x) { return pf_uniform_f64(x); }
#endif

// The ziggurat (256 layers) of particle/philox.rs: PF_ZK, PF_ZW, PF_ZF (tables) and PF_ZR
// (the tail's start) are written by cuda.rs before this file, from the host's tables.
__device__ __forceinline__ real_t pf_zig_signed(real_t x, unsigned w) {
    return (w & 0x100u) ? -x : x;
}
// The point of word w across its layer, (m + 1/2) w_i.
__device__ __forceinline__ real_t pf_zig_point(unsigned w) {
    return pf_zig_signed(((real_t)(w >> 9) + (real_t)0.5) * PF_ZW[w & 0xFFu], w);
}
// Whether word w falls in its layer's inner rectangle (the fast path's point is exact).
__device__ __forceinline__ bool pf_zig_inner(unsigned w) { return (w >> 9) < PF_ZK[w & 0xFFu]; }
// Normal q of the stream (i, b, k, purpose) whose word w missed its inner rectangle: the
// wedge and tail tests with the uniforms of the retry blocks (see philox.rs). Inlined: on
// an H100 a called slow path made the filter about 12% slower (the call saves and
// restores registers in every warp that has a miss, most of them).
__device__ __forceinline__ real_t pf_zig_slow(unsigned k0, unsigned k1, unsigned i, unsigned b,
                                           unsigned k, unsigned purpose, unsigned q, unsigned w) {
    real_t x = 0;
    for (unsigned a = 0; a < 256; ++a) {
        const unsigned layer = w & 0xFFu;
        const real_t v = pf_zig_point(w);
        if (pf_zig_inner(w)) return v;
        x = v;
        const PfWords u = pf_philox(i, b, k, ((purpose | 0x80u) << 24) | ((q & 0xFFFFu) << 8) | a,
                                    k0, k1);
        if (layer == 0) {
            const real_t r = PF_ZR;
            const real_t t = -log(pf_uniform(u.v[0])) / r;
            const real_t y = -log(pf_uniform(u.v[1]));
            if (y + y > t * t) return pf_zig_signed(r + t, w);
        } else {
            const real_t lo = PF_ZF[layer], hi = PF_ZF[layer - 1];
            if (lo + pf_uniform(u.v[0]) * (hi - lo) < exp(v * v * (real_t)-0.5)) return v;
            w = u.v[3];
        }
    }
    return x;
}
// The stream of standard normals of one (particle, filter, step, purpose): four a block,
// one a word. The block's normals not yet drawn are named registers that shift down a
// draw: an array indexed by a running count kept the whole stream in local memory, and
// its stores (a dozen a particle) were as much traffic as the particles themselves.
// A block's four words take the fast path first; the words that miss their layer's
// inner rectangle (about 1.5% of them) then go through one loop over this thread's
// misses, so that a warp runs the long slow path about once a block rather than once a
// word with a single thread active (an H200 profile: 198 of 533 instructions a particle
// were such single-thread paths).
struct PfNormals {
    unsigned k0, k1, i, b, k, purpose, block;
    real_t n0, n1, n2, n3;
    int left;
    __device__ PfNormals(unsigned key0, unsigned key1, unsigned i_, unsigned b_, unsigned k_,
                         unsigned purpose_)
        : k0(key0), k1(key1), i(i_), b(b_), k(k_), purpose(purpose_), block(0), left(0) {}
    __device__ __forceinline__ void refill() {
        const PfWords w = pf_words(i, b, k, purpose, block, k0, k1);
        const unsigned w0 = w.v[0], w1 = w.v[1], w2 = w.v[2], w3 = w.v[3];
        n0 = pf_zig_point(w0);
        n1 = pf_zig_point(w1);
        n2 = pf_zig_point(w2);
        n3 = pf_zig_point(w3);
        unsigned miss = (pf_zig_inner(w0) ? 0u : 1u) | (pf_zig_inner(w1) ? 0u : 2u) | (pf_zig_inner(w2) ? 0u : 4u) |
                        (pf_zig_inner(w3) ? 0u : 8u);
        while (miss != 0u) {
            const int t = (miss & 1u) ? 0 : (miss & 2u) ? 1 : (miss & 4u) ? 2 : 3;
            miss &= miss - 1u;
            const unsigned v = t == 0 ? w0 : t == 1 ? w1 : t == 2 ? w2 : w3;
            const real_t r = pf_zig_slow(k0, k1, i, b, k, purpose, 4 * block + t, v);
            n0 = t == 0 ? r : n0;
            n1 = t == 1 ? r : n1;
            n2 = t == 2 ? r : n2;
            n3 = t == 3 ? r : n3;
        }
        block += 1;
        left = 4;
    }
    __device__ __forceinline__ real_t draw() {
        if (left == 0) refill();
        const real_t r = n0;
        n0 = n1;
        n1 = n2;
        n2 = n3;
        --left;
        return r;
    }
};
