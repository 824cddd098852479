// The state resident on chip for DEC frames (`Variant::Lean`): one vector at a time (or
// a group of LEAN_VP between two barriers), each thread a column of LEAN cells of a
// TX x (TY LEAN) tile held in registers, published every frame to a shared tile padded
// by one frame's reach and double buffered (one barrier a frame), the per-frame max /
// arg-max of all DEC frames in registers across the vectors. The block emits the tile
// less its halo of DEC x SHRINK pixels. Every choice that depends on the vector is made
// at compile time (the vector loop must be unrolled to be fast; it stays correct when
// not); this is what set it ahead of the first such kernel (`resident`, retired:
// docs/tbd-gpu.md):
// - what a vector needs from its neighbours: nothing for (0, 0) (no barrier at all),
//   the one or two edge rows of the threads above and below for a vertical shift, the
//   whole column for a horizontal one; taps inside the thread's own column are read
//   from its registers, not from shared memory;
// - the bilinear blend with (1 - alpha) folded into the vertical weights and alpha X_k
//   computed once per block, not once per vector: a new value is two fused multiply-adds
//   on the horizontal blends (one for an integer vector);
// - the per-frame max / arg-max as a compare, a select and one predicated logic op
//   (the arg-max of four frames packed in the bytes of a word, one byte permute);
// - global addresses as 32-bit offsets from the vector's plane (one multiply-add each).
// Interior blocks test nothing per cell; edge blocks zero the cells outside the frame
// (the convention's "outside reads 0"). Rounding differs from the reference's order
// only by the folded weights: equal to it to 1e-6 relative; for integer vectors the
// arithmetic is the reference's (alpha X rounded, then (1 - alpha) s + that).
#ifdef LEAN
#define L_RB LEAN
#define L_HALO (DEC * SHRINK)
#define L_BH (TY * L_RB)
#define L_PAD SHRINK
#define L_PW (TX + 2 * L_PAD + 1)
#define L_PH (L_BH + 2 * L_PAD + 1)
#define L_FREG (DEC * L_RB <= 32)
// The arg-max of frame k is byte k % 4 of word k / 4, replaced by one byte permute.
#define L_ARG_WORDS ((DEC + 3) / 4)
// Vectors folded between two barriers (`lean4v3`: three; their exchange tiles side by side).
#ifndef LEAN_VP
#define LEAN_VP 1
#endif
#define L_VP LEAN_VP
// Groups of L_VP vectors from vector 0, the last one short where NV is not a multiple.
// (The short group first, so that vector 0, the (0, 0) of a speed-0 set, needs no
// barrier of its own, ran 11% slower on the H100 at 13 vectors, three a group, f16,
// 96 x 8: ptxas spilled 70 times as much.)
// With several vectors between barriers, alpha X_k of the thread's cells waits in shared
// memory ([DEC][L_RB][TX TY] floats after the exchange tiles), read once per frame and
// group, instead of in DEC x L_RB registers.
#ifndef LEAN_AXS
#define LEAN_AXS (L_VP > 1)
#endif
#define L_AXS (LEAN_AXS && L_FREG)
#ifdef KESTREL_EMULATION
#define BYTE_PERM(x, y, sel) emu_byte_perm(x, y, sel)
#else
#define BYTE_PERM(x, y, sel) __byte_perm(x, y, sel)
#endif

template <bool ALLIN>
__device__ __forceinline__ void lean_body(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next,
                                          const FRAME_T* __restrict__ frames, float* __restrict__ score,
                                          unsigned short* __restrict__ arg, int h, int w, float alpha,
                                          float (*lbuf)[L_PH][L_PW], int gx, int gy0) {
    const int tx = threadIdx.x, r0 = threadIdx.y * L_RB;
    const size_t n = (size_t)h * w;
    const float c = 1.0f - alpha;
    const bool col_in = ALLIN || (unsigned)gx < (unsigned)w;
    const bool col_out = col_in && tx >= L_HALO && tx < TX - L_HALO;
    bool in[L_RB], out[L_RB];
    const unsigned base = col_in ? (unsigned)gy0 * (unsigned)w + (unsigned)gx : 0u;
#pragma unroll
    for (int i = 0; i < L_RB; ++i) {
        in[i] = ALLIN || (col_in && (unsigned)(gy0 + i) < (unsigned)h);
        out[i] = col_out && in[i] && r0 + i >= L_HALO && r0 + i < L_BH - L_HALO;
    }
#define L_OFF(i) (base + (unsigned)(i) * (unsigned)w)
    float best[DEC][L_RB];
    unsigned barg[L_RB][L_ARG_WORDS];
#pragma unroll
    for (int i = 0; i < L_RB; ++i)
#pragma unroll
        for (int q = 0; q < L_ARG_WORDS; ++q) barg[i][q] = 0u;
#if L_AXS
    float* axs = &lbuf[2 * L_VP][0][0];
    const int tid = (int)threadIdx.y * TX + tx;
#pragma unroll
    for (int k = 0; k < DEC; ++k)
#pragma unroll
        for (int i = 0; i < L_RB; ++i)
            axs[(k * L_RB + i) * (TX * TY) + tid] = in[i] ? alpha * (float)LD(frames + (size_t)k * n + L_OFF(i)) : 0.0f;
#elif L_FREG
    // alpha X_k of the column, once per block.
    float ax[DEC][L_RB];
#pragma unroll
    for (int k = 0; k < DEC; ++k)
#pragma unroll
        for (int i = 0; i < L_RB; ++i) ax[k][i] = in[i] ? alpha * (float)LD(frames + (size_t)k * n + L_OFF(i)) : 0.0f;
#endif
    // The state of the next group of L_VP vectors, loaded while the current one is folded.
    // Group g holds vectors g L_VP + u, u < L_VP, those below NV.
    float nxt[L_VP][L_RB];
#pragma unroll
    for (int u = 0; u < L_VP; ++u) {
#pragma unroll
        for (int i = 0; i < L_RB; ++i)
            nxt[u][i] = (u < NV && in[i]) ? load_state_f(LD(s_prev + (size_t)u * n + L_OFF(i))) : 0.0f;
    }
    int par = 0;
    PRAGMA_V
    for (int v0 = 0; v0 < NV; v0 += L_VP) {
        float s[L_VP][L_RB];
#pragma unroll
        for (int u = 0; u < L_VP; ++u)
#pragma unroll
            for (int i = 0; i < L_RB; ++i) s[u][i] = nxt[u][i];
#pragma unroll
        for (int u = 0; u < L_VP; ++u)
            if (v0 + L_VP + u < NV) {
                const state_t* sp = s_prev + (size_t)(v0 + L_VP + u) * n;
#pragma unroll
                for (int i = 0; i < L_RB; ++i) nxt[u][i] = in[i] ? load_state_f(LD(sp + L_OFF(i))) : 0.0f;
            }
        // Per vector of the group: the taps of the shift by -v (motion.rs): rows iy (+1),
        // columns ix (+1); what it needs from its neighbours: the whole column published
        // (a horizontal shift), only rows of the threads above and below (their edge
        // rows), or nothing. A vector past NV (in the short last group) is skipped.
        Shift sh[L_VP];
        float wx0[L_VP], wx1[L_VP], cw0[L_VP], cw1[L_VP];
        bool live[L_VP];
        bool any = false;
#pragma unroll
        for (int u = 0; u < L_VP; ++u) {
            live[u] = v0 + u < NV;
            sh[u] = shift_of(v0 + u, live[u]);
            wx0[u] = 1.0f - sh[u].fx;
            wx1[u] = sh[u].fx;
            cw0[u] = c * (1.0f - sh[u].fy);
            cw1[u] = c * sh[u].fy;
            any = any || sh[u].xh || sh[u].xv;
        }
#pragma unroll
        for (int k = 0; k < DEC; ++k) {
#if L_AXS
            // This thread's own values (no barrier needed).
            float axk[L_RB];
#pragma unroll
            for (int i = 0; i < L_RB; ++i) axk[i] = axs[(k * L_RB + i) * (TX * TY) + tid];
#elif L_FREG
            const float* axk = ax[k];
#else
            const FRAME_T* f = frames + (size_t)k * n;
            float axk[L_RB];
#pragma unroll
            for (int i = 0; i < L_RB; ++i) axk[i] = in[i] ? alpha * (float)LD(f + L_OFF(i)) : 0.0f;
#endif
            // The group's exchange tiles of this frame (one per vector), one barrier.
            float(*bg)[L_PH][L_PW] = lbuf + par * L_VP;
#pragma unroll
            for (int u = 0; u < L_VP; ++u)
                if (sh[u].xh || sh[u].xv) {
#pragma unroll
                    for (int i = 0; i < L_RB; ++i)
                        if (publishes_row(sh[u], i, L_RB)) bg[u][L_PAD + r0 + i][L_PAD + tx] = s[u][i];
                }
            if (any) {
                __syncthreads();
                par ^= 1;
            }
#pragma unroll
            for (int u = 0; u < L_VP; ++u) {
                if (!live[u]) continue;
                const int v = v0 + u;
                float(*b)[L_PW] = bg[u];
                // Horizontal blends of the tap rows r0 + iy + j.
                float hr[L_RB + 1];
#pragma unroll
                for (int j = 0; j <= L_RB; ++j) {
                    if (j == L_RB && !sh[u].hy) {
                        hr[j] = 0.0f;
                        continue;
                    }
                    const int ri = sh[u].iy + j;
                    const bool own = ri >= 0 && ri < L_RB;
                    const float* row = &b[L_PAD + r0 + ri][L_PAD + tx + sh[u].ix];
                    const float t0 = (own && sh[u].ix == 0) ? s[u][own ? ri : 0] : row[0];
                    if (sh[u].hx) {
                        const float t1 = (own && sh[u].ix + 1 == 0) ? s[u][own ? ri : 0] : row[1];
                        hr[j] = wx0[u] * t0 + wx1[u] * t1;
                    } else {
                        hr[j] = t0;
                    }
                }
#pragma unroll
                for (int i = 0; i < L_RB; ++i) {
                    float val = sh[u].hy ? cw1[u] * hr[i + 1] + (cw0[u] * hr[i] + axk[i]) : c * hr[i] + axk[i];
                    // Cells outside the frame hold 0: the convention's "outside reads 0".
                    if (!ALLIN) val = in[i] ? val : 0.0f;
                    s[u][i] = val;
                    if (v == 0) {
                        best[k][i] = val;
                    } else if (val > best[k][i]) {
                        best[k][i] = val;
                        // Byte k % 4 from v, the others kept: selector nibbles 0123 with 4 at k % 4.
                        const unsigned sel = 0x3210u + ((4u - (unsigned)(k % 4)) << (4 * (k % 4)));
                        barg[i][k / 4] = BYTE_PERM(barg[i][k / 4], (unsigned)v, sel);
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < L_VP; ++u)
            if (live[u]) {
                state_t* so = s_next + (size_t)(v0 + u) * n;
#pragma unroll
                for (int i = 0; i < L_RB; ++i)
                    if (out[i]) so[L_OFF(i)] = store_state_f(s[u][i]);
            }
    }
#pragma unroll
    for (int k = 0; k < DEC; ++k)
#pragma unroll
        for (int i = 0; i < L_RB; ++i)
            if (out[i]) {
                (score + (size_t)k * n)[L_OFF(i)] = best[k][i];
                (arg + (size_t)k * n)[L_OFF(i)] = (unsigned short)((barg[i][k / 4] >> (8 * (k % 4))) & 0xffu);
            }
#undef L_OFF
}

extern "C" __global__ void __launch_bounds__(TX * TY)
    tbd_lean(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next, const FRAME_T* __restrict__ frames,
             float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha) {
#if L_VP > 1
    // 2 L_VP exchange tiles (more than the 48 KB of static shared memory at the
    // benchmark's shapes): dynamic shared memory, or a static buffer in the emulator
    // (one block at a time).
#ifdef KESTREL_EMULATION
    static float l_dyn_emu[2 * L_VP * L_PH * L_PW + (L_AXS ? DEC * L_RB * TX * TY : 0)];
    float(*lbuf)[L_PH][L_PW] = reinterpret_cast<float(*)[L_PH][L_PW]>(l_dyn_emu);
#else
    extern __shared__ __align__(16) float l_dyn[];
    float(*lbuf)[L_PH][L_PW] = reinterpret_cast<float(*)[L_PH][L_PW]>(l_dyn);
#endif
#else
    __shared__ float lbuf[2][L_PH][L_PW];
#endif
    const int bx0 = (int)blockIdx.x * (TX - 2 * L_HALO) - L_HALO;
    const int by0 = (int)blockIdx.y * (L_BH - 2 * L_HALO) - L_HALO;
    const int gx = bx0 + (int)threadIdx.x, gy0 = by0 + (int)threadIdx.y * L_RB;
    // Block-uniform: every thread takes the same branch (the barriers inside stay paired).
    if (bx0 >= 0 && by0 >= 0 && bx0 + TX <= w && by0 + L_BH <= h)
        lean_body<true>(s_prev, s_next, frames, score, arg, h, w, alpha, lbuf, gx, gy0);
    else
        lean_body<false>(s_prev, s_next, frames, score, arg, h, w, alpha, lbuf, gx, gy0);
}
#endif
