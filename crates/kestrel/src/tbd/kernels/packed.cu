// The packed kernel (`Variant::Packed`, `packedRvG/.../f16/TXxTY/K`): the lean kernel's
// scheme (the state on chip for DEC frames in tiles with halos, G vectors folded between
// two barriers, a map every frame) with the state held *and computed* in f16, two
// neighbouring pixels a thread in one 32-bit word (`f16x2`): each fused multiply-add,
// max and compare works on both pixels at once. A thread owns the word column tx
// (pixels 2 tx, 2 tx + 1 of the tile) and PACKED (= R) rows; the tile is 2 TX x TY R
// pixels and its halo, DEC x SHRINK pixels, is rounded up to whole words along x.
// Per vector (its choices compile-time, as in the lean kernel) and row: the two
// horizontal taps of both pixels are the word at the tap column and one byte permute of
// it with its neighbour (the pair that straddles two words); the horizontal blend is a
// multiply and a fused multiply-add, the vertical blend with (1 - alpha) folded into its
// weights and alpha X two more (one for an integer vector); the max, a compare to a
// 0xffff mask per pixel and two logic ops keep the map and its arg-max (a byte per pixel
// and frame, P_ARG8).
// Every operation rounds to f16 (the weights and alpha X too), so the result is not the
// f32 reference's to 1e-5 but within (6 - 3 alpha) u max|X| / (alpha - 4 u) of it, u =
// 2^-11 (each frame adds at most 6 - 3 alpha roundings of values below max|X|; earlier
// errors shrink by the rounded weights, 1 - alpha + 4 u at most): `docs/tbd-gpu.md`,
// "Thirteenth round". The state on the device is the f16 state of the other kernels
// ([NV][H][W] halves); 32-bit loads and stores where the width is even (FRAME_W2, the
// source compiled for the width's parity), halves otherwise. All rows of the tile are
// folded every frame: skipping a warp's rows once the shrinking halo has passed them
// (12% fewer cells at 32 x 16 threads) was 1-5% slower on the H100 for the fastest
// shapes (branches around the fold, values kept across them).
#ifdef PACKED
#define P_RB PACKED
#define P_VP PACKED_VP
#define P_H (DEC * SHRINK)
#define P_HW ((P_H + 1) / 2)
#define P_BH (TY * P_RB)
#define P_PAD SHRINK
#define P_PADW ((SHRINK + 1) / 2)
#define P_PW (TX + 2 * P_PADW + 1)
#define P_PH (P_BH + 2 * P_PAD + 1)
#define P_NT (TX * TY)
// Output pixels of a tile (the grid's step).
#define P_OW (2 * TX - 4 * P_HW)
#define P_OH (P_BH - 2 * P_H)
// The wave form (WAVE_PERIODS: `packedRvGwPgL`): one launch runs WAVE_PERIODS periods of
// DEC frames, one tile and period a block, the work items from the wave kernel's ticket
// counter in the launcher's order (`wave_order`) and each tile waiting on the flags of
// the nine around it (the period before) instead of on the whole launch before: no
// launch boundary where the multiprocessors drain (1024 x 1024 frames, 13 vectors: 2.9
// blocks a multiprocessor a launch). Both state buffers are then read and written in one
// launch: plain loads of the state (not the read-only path), no restrict.
#ifdef WAVE_PERIODS
#define P_WAVE 1
#define P_SPREV state_t*
#define P_SNEXT state_t*
#define P_LDS(p) (*(p))
#else
#define P_WAVE 0
#define P_SPREV const state_t* __restrict__
#define P_SNEXT state_t* __restrict__
#define P_LDS(p) LD(p)
#endif
// The wave form's frames and maps pass through once (streaming loads and stores: first
// out of L2, which keeps the state for the next period and the halos of the tiles
// around). H100, 13 vectors, 1024 x 1024, two runs each in one call: packed3v4w4g4
// 99,437-100,107 -> 101,014-101,114 frames/s, packed3v4w3g5 100,232-100,313 ->
// 100,550-100,895; the one-launch-a-period kernel loses by them (packed3v4 94,789-95,085
// -> 91,734-92,134), so it keeps ordinary loads and stores (P_HINTS 0).
#ifndef P_HINTS
#define P_HINTS P_WAVE
#endif
#if P_HINTS && !defined(KESTREL_EMULATION)
#define P_LDF(p) __ldcs(p)
#define P_STM(p, v) __stcs(p, v)
#else
#define P_LDF(p) LD(p)
#define P_STM(p, v) (*(p) = (v))
#endif
// The arg-max of a frame as bytes (P_ARG8: frames k and k + 1 in one word, the thread's
// first pixel in bytes 0-1, its second in bytes 2-3; a mask and a logic op an update,
// half the registers) or as u16 halves (a word a frame, one logic op an update). Bytes
// were 1.9% faster on the H100 (packed2v5, 32 x 16, K = 4: fewer spills at 64 registers).
#ifndef P_ARG8
#define P_ARG8 1
#endif
#define P_ARGW (P_ARG8 ? (DEC + 1) / 2 : DEC)
#ifndef BYTE_PERM
#ifdef KESTREL_EMULATION
#define BYTE_PERM(x, y, sel) emu_byte_perm(x, y, sel)
#else
#define BYTE_PERM(x, y, sel) __byte_perm(x, y, sel)
#endif
#endif

#ifdef KESTREL_EMULATION
#define H2FMA(a, b, c) emu_h2fma(a, b, c)
#define H2MUL(a, b) emu_h2mul(a, b)
#define H2MAX(a, b) emu_h2max(a, b)
#define H2GT(a, b) emu_h2gt(a, b)
#define H2PACK(lo, hi) ((unsigned)emu_float_to_half(lo) | ((unsigned)emu_float_to_half(hi) << 16))
#else
__device__ __forceinline__ unsigned h2_fma(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ unsigned h2_mul(unsigned a, unsigned b) {
    unsigned d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ unsigned h2_max(unsigned a, unsigned b) {
    unsigned d;
    asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
// 0xffff in each half where a > b, else 0.
__device__ __forceinline__ unsigned h2_gt(unsigned a, unsigned b) {
    unsigned d;
    asm("set.gt.u32.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ unsigned h2_pack(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
#define H2FMA(a, b, c) h2_fma(a, b, c)
#define H2MUL(a, b) h2_mul(a, b)
#define H2MAX(a, b) h2_max(a, b)
#define H2GT(a, b) h2_gt(a, b)
#define H2PACK(lo, hi) h2_pack(lo, hi)
#endif

// The f16 bits of w in [0, 1], rounded to nearest even, at compile time (the horizontal
// weights of every vector become immediates).
__device__ constexpr unsigned half_bits01(float f) {
    if (f <= 0.0f) return 0u;
    int e = 0;
    float m = f;
    while (m >= 2.0f) {
        m *= 0.5f;
        ++e;
    }
    while (m < 1.0f && e > -14) {
        m *= 2.0f;
        --e;
    }
    const float q = m * 1024.0f;
    unsigned qi = (unsigned)q;
    const float r = q - (float)qi;
    if (r > 0.5f || (r == 0.5f && (qi & 1u))) ++qi;
    return m < 1.0f ? qi : ((unsigned)(e + 15) << 10) + (qi - 1024u);
}
struct PackedWeights {
    unsigned wx0[NV], wx1[NV];
};
__device__ constexpr PackedWeights packed_weights() {
    PackedWeights p{};
    constexpr Motions m = {MOTIONS_VX, MOTIONS_VY};
    for (int v = 0; v < NV; ++v) {
        const float sx = -m.vx[v];
        const float fx = sx - (float)ifloor(sx);
        const unsigned a = half_bits01(1.0f - fx), b = half_bits01(fx);
        p.wx0[v] = a | (a << 16);
        p.wx1[v] = b | (b << 16);
    }
    return p;
}

template <bool ALLIN, class Wait>
__device__ __forceinline__ void packed_body(P_SPREV s_prev, P_SNEXT s_next, const FRAME_T* __restrict__ frames,
                                            unsigned short* __restrict__ sc16, unsigned char* __restrict__ ag8,
                                            int h, int w, float alpha, unsigned (*pbuf)[P_PH][P_PW], int gx, int gy0,
                                            Wait wait) {
    constexpr PackedWeights pw = packed_weights();
    const int tx = threadIdx.x, r0 = threadIdx.y * P_RB, tid = (int)threadIdx.y * TX + tx;
    const size_t n = (size_t)h * w;
    const float c = 1.0f - alpha;
    const unsigned c2 = H2PACK(c, c);
    // 32-bit words of the state and maps (and 8-byte pairs of f32 frames) are aligned
    // where the width is even (the source is compiled for the width's parity).
    constexpr bool wev = FRAME_W2;
    const bool c0in = ALLIN || (unsigned)gx < (unsigned)w;
    const bool c1in = ALLIN || (unsigned)(gx + 1) < (unsigned)w;
    const bool col_out = c0in && tx >= P_HW && tx < TX - P_HW;
    bool rin[P_RB], out[P_RB];
    unsigned keep[P_RB];
    const unsigned base = c0in ? (unsigned)gy0 * (unsigned)w + (unsigned)gx : 0u;
#pragma unroll
    for (int i = 0; i < P_RB; ++i) {
        rin[i] = ALLIN || (c0in && (unsigned)(gy0 + i) < (unsigned)h);
        keep[i] = rin[i] ? (c1in ? 0xffffffffu : 0x0000ffffu) : 0u;
        out[i] = col_out && rin[i] && r0 + i >= P_H && r0 + i < P_BH - P_H;
    }
#define P_OFF(i) (base + (unsigned)(i) * (unsigned)w)
    // The thread's first pixel in the next state plane to load (vectors in order) and to
    // store: one 64-bit step a vector, not an offset v n recomputed for every row.
    // (Signed: the tile's top rows may lie above the frame, where nothing is read.)
    const long long sbase = c0in ? (long long)gy0 * w + gx : 0;
    const state_t* ldp = s_prev + sbase;
    state_t* stp = s_next + sbase;
    auto ld2 = [&](const state_t* p, int i) -> unsigned {
        if (!rin[i]) return 0u;
        p += (size_t)i * (unsigned)w;
        if (wev) return P_LDS(reinterpret_cast<const unsigned*>(p));
        return (unsigned)P_LDS(p) | (c1in ? (unsigned)P_LDS(p + 1) << 16 : 0u);
    };
    // alpha X of the thread's two pixels a row and frame, packed, in shared memory after
    // the exchange tiles (read once per frame and group, by this thread only).
    unsigned* axs = &pbuf[2 * P_VP][0][0];
#pragma unroll
    for (int k = 0; k < DEC; ++k) {
        const FRAME_T* f = frames + (size_t)k * n;
#pragma unroll
        for (int i = 0; i < P_RB; ++i) {
            float a0 = 0.0f, a1 = 0.0f;
            if (rin[i]) {
#ifdef FRAME_F32
                if (wev) {
                    const float2 x = P_LDF(reinterpret_cast<const float2*>(f + P_OFF(i)));
                    a0 = alpha * x.x;
                    a1 = alpha * x.y;
                } else
#endif
                {
                    a0 = alpha * (float)P_LDF(f + P_OFF(i));
                    if (c1in) a1 = alpha * (float)P_LDF(f + P_OFF(i) + 1);
                }
            }
            axs[(k * P_RB + i) * P_NT + tid] = H2PACK(a0, a1);
        }
    }
    // The frames are in; the state and the maps are the launch before's to finish (the
    // kernel is a programmatic dependent launch), or in the wave form the tiles around
    // this one's (their last period).
    wait();
    unsigned best[DEC][P_RB], barg[P_ARGW][P_RB];
#pragma unroll
    for (int q = 0; q < P_ARGW; ++q)
#pragma unroll
        for (int i = 0; i < P_RB; ++i) barg[q][i] = 0u;
    unsigned nxt[P_VP][P_RB];
#pragma unroll
    for (int u = 0; u < P_VP; ++u) {
#pragma unroll
        for (int i = 0; i < P_RB; ++i) nxt[u][i] = u < NV ? ld2(ldp, i) : 0u;
        if (u < NV) ldp += n;
    }
    int par = 0;
    PRAGMA_V
    for (int v0 = 0; v0 < NV; v0 += P_VP) {
        unsigned s[P_VP][P_RB];
#pragma unroll
        for (int u = 0; u < P_VP; ++u)
#pragma unroll
            for (int i = 0; i < P_RB; ++i) s[u][i] = nxt[u][i];
#pragma unroll
        for (int u = 0; u < P_VP; ++u)
            if (v0 + P_VP + u < NV) {
#pragma unroll
                for (int i = 0; i < P_RB; ++i) nxt[u][i] = ld2(ldp, i);
                ldp += n;
            }
        Shift sh[P_VP];
        unsigned wx0[P_VP], wx1[P_VP], cw0[P_VP], cw1[P_VP];
        bool live[P_VP];
        bool any = false;
#pragma unroll
        for (int u = 0; u < P_VP; ++u) {
            const int v = v0 + u;
            live[u] = v < NV;
            sh[u] = shift_of(v, live[u]);
            const float fy = sh[u].fy;
            wx0[u] = live[u] ? pw.wx0[v] : 0u;
            wx1[u] = live[u] ? pw.wx1[v] : 0u;
            cw0[u] = H2PACK(c * (1.0f - fy), c * (1.0f - fy));
            cw1[u] = H2PACK(c * fy, c * fy);
            any = any || sh[u].xh || sh[u].xv;
        }
#pragma unroll
        for (int k = 0; k < DEC; ++k) {
            unsigned axk[P_RB];
#pragma unroll
            for (int i = 0; i < P_RB; ++i) axk[i] = axs[(k * P_RB + i) * P_NT + tid];
            unsigned(*bg)[P_PH][P_PW] = pbuf + par * P_VP;
#pragma unroll
            for (int u = 0; u < P_VP; ++u)
                if (sh[u].xh || sh[u].xv) {
#pragma unroll
                    for (int i = 0; i < P_RB; ++i)
                        if (publishes_row(sh[u], i, P_RB)) bg[u][P_PAD + r0 + i][P_PADW + tx] = s[u][i];
                }
            if (any) {
                __syncthreads();
                par ^= 1;
            }
#pragma unroll
            for (int u = 0; u < P_VP; ++u) {
                if (!live[u]) continue;
                const int v = v0 + u;
                unsigned(*b)[P_PW] = bg[u];
                // Word a = floor(ix / 2) holds tap column ix of the thread's first pixel
                // (odd ix: its second half); the pair (ix, ix + 1) of both pixels is that
                // word (ix even) or the straddling pair (ix odd), (ix + 1, ix + 2) the other.
                const int a = sh[u].ix >= 0 ? sh[u].ix / 2 : -((1 - sh[u].ix) / 2);
                const bool odd = (sh[u].ix - 2 * a) != 0;
                unsigned hr[P_RB + 1];
#pragma unroll
                for (int j = 0; j <= P_RB; ++j) {
                    if (j == P_RB && !sh[u].hy) {
                        hr[j] = 0u;
                        continue;
                    }
                    const int ri = sh[u].iy + j;
                    const bool own = ri >= 0 && ri < P_RB;
                    const unsigned* row = &b[P_PAD + r0 + ri][P_PADW + tx];
                    auto word = [&](int o) -> unsigned { return (own && o == 0) ? s[u][own ? ri : 0] : row[o]; };
                    unsigned t0, t1 = 0u;
                    if (!odd) {
                        t0 = word(a);
                        if (sh[u].hx) t1 = BYTE_PERM(word(a), word(a + 1), 0x5432u);
                    } else {
                        t0 = BYTE_PERM(word(a), word(a + 1), 0x5432u);
                        if (sh[u].hx) t1 = word(a + 1);
                    }
                    hr[j] = sh[u].hx ? H2FMA(wx1[u], t1, H2MUL(wx0[u], t0)) : t0;
                }
#pragma unroll
                for (int i = 0; i < P_RB; ++i) {
                    unsigned val = sh[u].hy ? H2FMA(cw1[u], hr[i + 1], H2FMA(cw0[u], hr[i], axk[i]))
                                         : H2FMA(c2, hr[i], axk[i]);
                    // Pixels outside the frame hold 0: the convention's "outside reads 0".
                    if (!ALLIN) val &= keep[i];
                    s[u][i] = val;
                    if (v == 0) {
                        best[k][i] = val;
                    } else {
                        const unsigned m = H2GT(val, best[k][i]);
                        best[k][i] = H2MAX(best[k][i], val);
                        if (P_ARG8) {
                            const unsigned mk = m & (0x00ff00ffu << (8 * (k % 2)));
                            barg[k / 2][i] = (mk & ((unsigned)v * 0x01010101u)) | (~mk & barg[k / 2][i]);
                        } else {
                            const int q = P_ARG8 ? k / 2 : k;  // k (this branch is taken without P_ARG8)
                            barg[q][i] = (m & ((unsigned)v * 0x10001u)) | (~m & barg[q][i]);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < P_VP; ++u)
            if (live[u]) {
#pragma unroll
                for (int i = 0; i < P_RB; ++i)
                    if (out[i]) {
                        state_t* so = stp + (size_t)i * (unsigned)w;
                        if (wev) {
                            *reinterpret_cast<unsigned*>(so) = s[u][i];
                        } else {
                            so[0] = (state_t)(s[u][i] & 0xffffu);
                            if (c1in) so[1] = (state_t)(s[u][i] >> 16);
                        }
                    }
                stp += n;
            }
    }
    // The maps in the kernel's own precision (`KernelConfig::map_bytes`): the scores as the
    // f16 values they are (sc16: [DEC][H][W] halves in the memory of `score`), the arg-max
    // as bytes (ag8: [DEC][H][W] in the memory of `arg`; at most 256 vectors), 3 bytes a
    // pixel and frame instead of 6. The launcher widens them when it copies them out.
#pragma unroll
    for (int k = 0; k < DEC; ++k)
#pragma unroll
        for (int i = 0; i < P_RB; ++i)
            if (out[i]) {
                unsigned short* sc = sc16 + (size_t)k * n + P_OFF(i);
                unsigned char* ag = ag8 + (size_t)k * n + P_OFF(i);
                // The two pixels' arg-max in bytes 0 and 1.
                const unsigned ab = P_ARG8 ? BYTE_PERM(barg[k / 2][i], 0u, (k % 2) | ((2 + k % 2) << 4))
                                           : BYTE_PERM(barg[P_ARG8 ? k / 2 : k][i], 0u, 0x20u);
                if (wev) {
                    P_STM(reinterpret_cast<unsigned*>(sc), best[k][i]);
                    P_STM(reinterpret_cast<unsigned short*>(ag), (unsigned short)(ab & 0xffffu));
                } else {
                    P_STM(sc, (unsigned short)(best[k][i] & 0xffffu));
                    P_STM(ag, (unsigned char)(ab & 0xffu));
                    if (c1in) {
                        P_STM(sc + 1, (unsigned short)(best[k][i] >> 16));
                        P_STM(ag + 1, (unsigned char)((ab >> 8) & 0xffu));
                    }
                }
            }
#undef P_OFF
}

// Blocks a multiprocessor (the launcher: 1024 / threads, at least 1): two blocks of 512
// threads let one fold while the other waits at a barrier (packed2v5, 32 x 16: 70,414
// frames/s against 66,267 for one block of 64 x 16 threads, packed2v4).
#ifndef P_MINB
#define P_MINB 1
#endif
extern "C" __global__ void __launch_bounds__(TX * TY, P_MINB)
    tbd_packed(P_SPREV s_prev, P_SNEXT s_next, const FRAME_T* __restrict__ frames, float* __restrict__ score,
               unsigned short* __restrict__ arg, int h, int w, float alpha
#if P_WAVE
               ,
               const unsigned* __restrict__ order, unsigned long long* ticket, unsigned* flags, unsigned long long base,
               unsigned gp0
#endif
    ) {
    // 2 P_VP exchange tiles of words, then alpha X: dynamic shared memory (a static
    // buffer in the emulator, one block at a time).
#ifdef KESTREL_EMULATION
    static unsigned p_dyn_emu[2 * P_VP * P_PH * P_PW + DEC * P_RB * P_NT];
    unsigned(*pbuf)[P_PH][P_PW] = reinterpret_cast<unsigned(*)[P_PH][P_PW]>(p_dyn_emu);
#else
    extern __shared__ __align__(16) unsigned p_dyn[];
    unsigned(*pbuf)[P_PH][P_PW] = reinterpret_cast<unsigned(*)[P_PH][P_PW]>(p_dyn);
#endif
    unsigned short* sc16 = reinterpret_cast<unsigned short*>(score);
    unsigned char* ag8 = reinterpret_cast<unsigned char*>(arg);
#if P_WAVE
    const size_t n = (size_t)h * w;
    // The work item (as the wave kernel's): period wj of the launch (gp overall), tile
    // (br, bc) of tgy x tgx; its ticket is taken before the next launch may start.
    const int tid = (int)threadIdx.y * TX + (int)threadIdx.x;
    __shared__ unsigned p_item;
    const unsigned item = wave_take(order, ticket, base, &p_item, tid);
    const int wj = (int)(item & 0xffu), br = (int)((item >> 8) & 0xfffu), bc = (int)(item >> 20);
    const unsigned gp = gp0 + (unsigned)wj;
    const int tgx = (w + P_OW - 1) / P_OW, tgy = (h + P_OH - 1) / P_OH;
    // Period gp reads the buffer of its parity and writes the other.
    state_t* const sp = (gp & 1u) ? s_next : s_prev;
    state_t* const sn = (gp & 1u) ? s_prev : s_next;
    frames += (size_t)wj * DEC * n;
    sc16 += (size_t)wj * DEC * n;
    ag8 += (size_t)wj * DEC * n;
    grid_dep_launch();
    // Waits until the nine tiles around this one have finished period gp - 1: the halo it
    // reads lies in them (at most a tile away: checked by the launcher) and it overwrites
    // the state they read.
    auto wait = [&]() { wave_wait_around(flags, br, bc, tgx, tgy, gp, tid); };
#else
    const int bc = (int)blockIdx.x, br = (int)blockIdx.y;
    const state_t* __restrict__ sp = s_prev;
    state_t* __restrict__ sn = s_next;
    // The next launch may start once every block of this one has started (it waits for
    // this one's writes before it reads or writes what this one does).
    grid_dep_launch();
    auto wait = []() { grid_dep_wait(); };
#endif
    const int bx0 = bc * P_OW - 2 * P_HW;
    const int by0 = br * P_OH - P_H;
    const int gx = bx0 + 2 * (int)threadIdx.x, gy0 = by0 + (int)threadIdx.y * P_RB;
    // Block-uniform: every thread takes the same branch (the barriers inside stay paired).
    if (bx0 >= 0 && by0 >= 0 && bx0 + 2 * TX <= w && by0 + P_BH <= h)
        packed_body<true>(sp, sn, frames, sc16, ag8, h, w, alpha, pbuf, gx, gy0, wait);
    else
        packed_body<false>(sp, sn, frames, sc16, ag8, h, w, alpha, pbuf, gx, gy0, wait);
#if P_WAVE
    // The tile's period is done: the barrier, then one thread's fence and release of the
    // flag (as the wave kernel). The item is read again from shared memory: nothing of it
    // need stay in registers across the body.
    __syncthreads();
    if (tid == 0) {
        const unsigned it = p_item;
        wave_fence();
        wave_store_flag(flags + ((it >> 8) & 0xfffu) * (unsigned)tgx + (it >> 20), gp0 + (it & 0xffu) + 1u);
    }
#endif
}
#endif
