// The streaming kernel (`Variant::Stream`, `streamR/.../32xT/K`): the state on chip for
// DEC (= K) frames and a map every frame, as in the lean kernel, but with neither shared
// memory nor barriers. Each warp owns a strip of 32 columns (one a lane) and a chunk of
// STREAM (= R) output rows, and walks down them once. Step i loads the state at row
// s = y0 - K S + i (level 0; S = SHRINK) and computes level k (the state after frame
// k - 1 of the launch) at row s - k S, for k = 1..K in that order. The taps that level k
// needs at row r, rows r - S .. r + S of level k - 1, were computed in this step or in
// the 2 S before it: each vector keeps the horizontal blends of its last 2 S + 1 rows of
// every level in registers, a ring indexed by the step modulo 2 S + 1 (the step loop is
// unrolled by that much, so every index is a compile-time constant and only the slots
// still to be read take registers). Horizontal taps come from the neighbouring lanes
// (`shfl`); level k is right in lanes [k S, 32 - k S), so a strip emits 32 - 2 K S
// columns and a chunk computes R + 2 K S rows. Every level's max and arg-max over the
// vectors is complete within the step. The next step's state row and frame rows are
// loaded a step ahead. Per vector and level the arithmetic is the lean kernel's
// (horizontal blends, then the folded vertical weights and alpha X): the same bits.
#ifdef STREAM
#define M_RH STREAM
#define M_S SHRINK
#define M_WIN (2 * M_S + 1)
#define M_HALO (DEC * M_S)
#define M_OW (32 - 2 * M_HALO)
#define M_STEPS (((M_RH + 2 * M_HALO + M_WIN - 1) / M_WIN) * M_WIN)

// The value of lane + d (a compile-time shift; a lane past the warp's edge gets its own).
__device__ __forceinline__ float shfl_rel(float x, int d) {
#ifdef KESTREL_EMULATION
    return emu_shfl(x, d);
#else
    if (d > 0) return __shfl_down_sync(0xffffffffu, x, (unsigned)d);
    if (d < 0) return __shfl_up_sync(0xffffffffu, x, (unsigned)(-d));
    return x;
#endif
}

// Vector v's shift by -v, as in the lean kernel: taps at rows iy (+1), columns ix (+1),
// weights from the fractions. Worked out by the compiler (constexpr), so that the ring
// slots and shuffle offsets they give are constants: a float-to-int conversion left to
// the device code is not folded early enough for the rings to stay in registers.
struct MTap {
    int ix, iy;
    bool hx, hy;
    float wx0, wx1, wy0, wy1;
};
struct MTapTable {
    MTap t[NV];
};
__device__ constexpr int m_cfloor(float s) { return (s < (float)(int)s) ? (int)s - 1 : (int)s; }
__device__ constexpr MTapTable m_make_taps() {
    constexpr Motions m = {MOTIONS_VX, MOTIONS_VY};
    MTapTable r{};
    for (int v = 0; v < NV; ++v) {
        const float sx = -m.vx[v], sy = -m.vy[v];
        MTap& t = r.t[v];
        t.ix = m_cfloor(sx);
        t.iy = m_cfloor(sy);
        const float fx = sx - (float)t.ix, fy = sy - (float)t.iy;
        t.wx0 = 1.0f - fx;
        t.wx1 = fx;
        t.wy0 = 1.0f - fy;
        t.wy1 = fy;
        t.hx = fx != 0.0f;
        t.hy = fy != 0.0f;
    }
    return r;
}
struct MTaps {
    int ix, iy;
    bool hx, hy;
    float wx0, wx1, cw0, cw1;
};
__device__ __forceinline__ MTaps m_taps(int v, float c) {
    constexpr MTapTable T = m_make_taps();
    MTaps t;
    t.ix = T.t[v].ix;
    t.iy = T.t[v].iy;
    t.hx = T.t[v].hx;
    t.hy = T.t[v].hy;
    t.wx0 = T.t[v].wx0;
    t.wx1 = T.t[v].wx1;
    t.cw0 = c * T.t[v].wy0;
    t.cw1 = c * T.t[v].wy1;
    return t;
}

// The horizontal blend of a row of level values at this lane's column.
__device__ __forceinline__ float m_hblend(float x, const MTaps& t) {
    const float t0 = shfl_rel(x, t.ix);
    if (!t.hx) return t0;
    const float t1 = shfl_rel(x, t.ix + 1);
    return t.wx0 * t0 + t.wx1 * t1;
}

// Vectors in groups (STREAM_G, `streamRvG`): G warps walk the same strip and chunk,
// warp g folding vectors [m_vb(g), m_vb(g + 1)), so that each holds a G-th of the
// rings (fewer registers, more warps a multiprocessor, longer chunks for the same
// parallelism). Warps 1..G-1 run a ring cycle (M_WIN steps) ahead and leave their
// levels' max and arg-max in shared memory; warp 0 takes them a cycle later, keeps a
// later group's value only where it is greater (the first maximum, as everywhere), and
// writes the maps. A block barrier after each cycle; two buffers alternate.
#ifndef STREAM_G
#define STREAM_G 1
#endif
#define M_G STREAM_G
#define M_C (TY / M_G)
#define M_NVG ((NV + M_G - 1) / M_G)
__device__ constexpr int m_vb(int g) { return g * NV / M_G; }

// A warp's walk: where it is, and what it keeps in registers.
struct MWalk {
    const state_t* __restrict__ s_prev;
    state_t* __restrict__ s_next;
    const FRAME_T* __restrict__ frames;
    float* __restrict__ score;
    unsigned short* __restrict__ arg;
    int h, w, y0, s0, lane;
    size_t n;
    float alpha, c;
    bool col_in, col_out;
    unsigned cx;
    // The chunk's partial maps (M_G > 1): [buffer][group, 1..G-1 (0 unused)][step of
    // the cycle][level][lane].
    float (*pbest)[M_G][M_WIN][DEC][32];
    unsigned (*parg)[M_G][M_WIN][DEC][32];
    // hb[u][k][q]: the horizontal blend of the group's vector u at level k, at the row
    // computed in the step q modulo M_WIN of the ring.
    float hb[M_NVG][DEC][M_WIN];
    // Level 0 and X_k (level k + 1's frame) of the next step, as loaded: converted only
    // when used, a step later, so that no instruction waits on the loads before then.
    state_t nx[M_NVG];
    FRAME_T nax[DEC];
};

// Loads group G0's state at row s and X_k at rows s - (k + 1) S (the next step's).
template <bool ALLIN, int G0>
__device__ __forceinline__ void m_fetch(MWalk& m, int s) {
    constexpr int vb = m_vb(G0), nvg = m_vb(G0 + 1) - vb;
    {
        const bool rin = ALLIN || (m.col_in && (unsigned)s < (unsigned)m.h);
        const unsigned off = rin ? (unsigned)s * (unsigned)m.w + m.cx : 0u;
#pragma unroll
        for (int u = 0; u < nvg; ++u)
            m.nx[u] = rin ? LD(m.s_prev + (size_t)(vb + u) * m.n + off) : (state_t)0;
    }
#pragma unroll
    for (int k = 0; k < DEC; ++k) {
        const int r = s - (k + 1) * M_S;
        const bool rin = ALLIN || (m.col_in && (unsigned)r < (unsigned)m.h);
        const unsigned off = rin ? (unsigned)r * (unsigned)m.w + m.cx : 0u;
        m.nax[k] = rin ? LD(m.frames + (size_t)k * m.n + off) : (FRAME_T)0;
    }
}

// The max of val[B..E) (vectors vb + B ..) and the first vector that reaches it, by
// halves (a chain of log2 NV compares instead of NV): a later half wins only where it is
// greater, so the first maximum wins, as in the other kernels (the values are finite:
// frames are).
template <int B, int E>
__device__ __forceinline__ void m_best(const float* val, int vb, float& best, unsigned& arg) {
    if constexpr (E - B == 1) {
        best = val[B];
        arg = (unsigned)(vb + B);
    } else {
        constexpr int M = (B + E) / 2;
        float b1;
        unsigned a1;
        m_best<B, M>(val, vb, best, arg);
        m_best<M, E>(val, vb, b1, a1);
        if (b1 > best) {
            best = b1;
            arg = a1;
        }
    }
}

// Step i + P of group G0's walk (P, the ring slot, a compile-time constant); buf: the
// buffer of partial maps that this cycle writes (groups > 0) or reads (group 0).
template <bool ALLIN, int G0, int P>
__device__ __forceinline__ void m_step(MWalk& m, int i, int buf) {
    constexpr int vb = m_vb(G0), nvg = m_vb(G0 + 1) - vb;
    const int s = m.s0 + i + P;
    float cur[M_NVG], ax[DEC];
#pragma unroll
    for (int u = 0; u < nvg; ++u) cur[u] = load_state_f(m.nx[u]);
#pragma unroll
    for (int k = 0; k < DEC; ++k) ax[k] = m.alpha * (float)m.nax[k];
    m_fetch<ALLIN, G0>(m, s + 1);
    // Level 0: the loaded state (zero outside the frame).
#pragma unroll
    for (int u = 0; u < nvg; ++u) m.hb[u][0][P] = m_hblend(cur[u], m_taps(vb + u, m.c));
#pragma unroll
    for (int k = 1; k <= DEC; ++k) {
        const int r = s - k * M_S;
        const bool rin = ALLIN || (m.col_in && (unsigned)r < (unsigned)m.h);
        const bool emit = m.col_out && r >= m.y0 && r < m.y0 + M_RH && (ALLIN || r < m.h);
        const unsigned off = (unsigned)r * (unsigned)m.w + m.cx;
        float val[M_NVG];
#pragma unroll
        for (int u = 0; u < nvg; ++u) {
            const MTaps t = m_taps(vb + u, m.c);
            // Rows r + iy (+ 1) of level k - 1 came from the step M_S - iy (- 1) before
            // this one.
            const float h0 = m.hb[u][k - 1][(P + M_WIN - M_S + t.iy) % M_WIN];
            if (t.hy) {
                const float h1 = m.hb[u][k - 1][(P + M_WIN - M_S + t.iy + 1) % M_WIN];
                val[u] = t.cw1 * h1 + (t.cw0 * h0 + ax[k - 1]);
            } else {
                val[u] = m.c * h0 + ax[k - 1];
            }
            // Cells outside the frame hold 0: the convention's "outside reads 0".
            if (!ALLIN) val[u] = rin ? val[u] : 0.0f;
            if (k < DEC) {
                m.hb[u][k][P] = m_hblend(val[u], t);
            } else if (emit) {
                m.s_next[(size_t)(vb + u) * m.n + off] = store_state_f(val[u]);
            }
        }
        float best;
        unsigned barg;
        m_best<0, nvg>(val, vb, best, barg);
        if constexpr (G0 > 0) {
            m.pbest[buf][G0][P][k - 1][m.lane] = best;
            m.parg[buf][G0][P][k - 1][m.lane] = barg;
        } else {
#pragma unroll
            for (int g = 1; g < M_G; ++g) {
                const float b1 = m.pbest[buf][g][P][k - 1][m.lane];
                const unsigned a1 = m.parg[buf][g][P][k - 1][m.lane];
                if (b1 > best) {
                    best = b1;
                    barg = a1;
                }
            }
            if (emit) {
                m.score[(size_t)(k - 1) * m.n + off] = best;
                m.arg[(size_t)(k - 1) * m.n + off] = (unsigned short)barg;
            }
        }
    }
}

// Steps i + B .. i + E - 1, in order.
template <bool ALLIN, int G0, int B, int E>
__device__ __forceinline__ void m_steps(MWalk& m, int i, int buf) {
    if constexpr (B < E) {
        m_step<ALLIN, G0, B>(m, i, buf);
        m_steps<ALLIN, G0, B + 1, E>(m, i, buf);
    }
}

template <bool ALLIN, int G0>
__device__ __forceinline__ void stream_body(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next,
                                            const FRAME_T* __restrict__ frames, float* __restrict__ score,
                                            unsigned short* __restrict__ arg, int h, int w, float alpha, int gx,
                                            int y0, bool col_out, float (*pbest)[M_G][M_WIN][DEC][32],
                                            unsigned (*parg)[M_G][M_WIN][DEC][32]) {
    MWalk m;
    m.s_prev = s_prev;
    m.s_next = s_next;
    m.frames = frames;
    m.score = score;
    m.arg = arg;
    m.h = h;
    m.w = w;
    m.y0 = y0;
    m.s0 = y0 - M_HALO;
    m.lane = (int)threadIdx.x;
    m.n = (size_t)h * w;
    m.alpha = alpha;
    m.c = 1.0f - alpha;
    m.col_in = ALLIN || (unsigned)gx < (unsigned)w;
    m.col_out = col_out;
    m.cx = m.col_in ? (unsigned)gx : 0u;
    m.pbest = pbest;
    m.parg = parg;
#pragma unroll
    for (int u = 0; u < M_NVG; ++u)
#pragma unroll
        for (int k = 0; k < DEC; ++k)
#pragma unroll
            for (int q = 0; q < M_WIN; ++q) m.hb[u][k][q] = 0.0f;
    m_fetch<ALLIN, G0>(m, m.s0);
    if constexpr (M_G == 1) {
        for (int i = 0; i < M_STEPS; i += M_WIN) m_steps<ALLIN, 0, 0, M_WIN>(m, i, 0);
    } else {
        // Cycle j: groups > 0 fold steps of cycle j into buffer j % 2, group 0 those of
        // cycle j - 1 from buffer (j - 1) % 2; a barrier between cycles.
        for (int j = 0; j <= M_STEPS / M_WIN; ++j) {
            if (G0 > 0 && j < M_STEPS / M_WIN) m_steps<ALLIN, G0, 0, M_WIN>(m, j * M_WIN, j & 1);
            if (G0 == 0 && j > 0) m_steps<ALLIN, 0, 0, M_WIN>(m, (j - 1) * M_WIN, (j - 1) & 1);
            __syncthreads();
        }
    }
}

template <int G0>
__device__ __forceinline__ void stream_group(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next,
                                             const FRAME_T* __restrict__ frames, float* __restrict__ score,
                                             unsigned short* __restrict__ arg, int h, int w, float alpha,
                                             float (*pbest)[M_G][M_WIN][DEC][32],
                                             unsigned (*parg)[M_G][M_WIN][DEC][32]) {
    const int lane = (int)threadIdx.x;
    const int x0 = (int)blockIdx.x * M_OW - M_HALO;
    const int y0 = ((int)blockIdx.y * M_C + (int)threadIdx.y / M_G) * M_RH;
    const int gx = x0 + lane;
    const bool col_out = lane >= M_HALO && lane < 32 - M_HALO && gx < w;
    // Warp-uniform: every row the warp loads or computes lies in the frame (a chunk below
    // the frame, in a block that has barriers, walks with nothing to emit).
    if (x0 >= 0 && x0 + 32 <= w && y0 - 2 * M_HALO >= 0 && y0 - M_HALO + M_STEPS + 1 <= h)
        stream_body<true, G0>(s_prev, s_next, frames, score, arg, h, w, alpha, gx, y0, col_out, pbest, parg);
    else
        stream_body<false, G0>(s_prev, s_next, frames, score, arg, h, w, alpha, gx, y0, col_out, pbest, parg);
}

template <int G0>
__device__ __forceinline__ void stream_groups(int g, const state_t* __restrict__ s_prev,
                                              state_t* __restrict__ s_next, const FRAME_T* __restrict__ frames,
                                              float* __restrict__ score, unsigned short* __restrict__ arg, int h,
                                              int w, float alpha, float (*pbest)[M_G][M_WIN][DEC][32],
                                              unsigned (*parg)[M_G][M_WIN][DEC][32]) {
    if constexpr (G0 < M_G) {
        if (g == G0)
            stream_group<G0>(s_prev, s_next, frames, score, arg, h, w, alpha, pbest, parg);
        else
            stream_groups<G0 + 1>(g, s_prev, s_next, frames, score, arg, h, w, alpha, pbest, parg);
    }
}

extern "C" __global__ void __launch_bounds__(TX * TY)
    tbd_stream(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next, const FRAME_T* __restrict__ frames,
               float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha) {
    // Each chunk's two buffers of partial maps (slot 0 of the group index unused).
    __shared__ float pbest[M_G > 1 ? M_C * 2 : 1][M_G][M_WIN][DEC][32];
    __shared__ unsigned parg[M_G > 1 ? M_C * 2 : 1][M_G][M_WIN][DEC][32];
    const int chunk = (int)threadIdx.y / M_G, g = (int)threadIdx.y % M_G;
    if (M_G == 1 && ((int)blockIdx.y * M_C + chunk) * M_RH >= h) return;  // no barriers: leave
    const int b = M_G > 1 ? 2 * chunk : 0;
    stream_groups<0>(g, s_prev, s_next, frames, score, arg, h, w, alpha, &pbest[b], &parg[b]);
}
#endif
