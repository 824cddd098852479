#ifdef TBD_TILED
// Tiles with halos: the state of a TX x TY tile and a halo of DEC * SHRINK pixels is
// read once, advanced DEC frames in shared memory (the plain recursion, resampled every
// frame: the valid region shrinks by SHRINK per frame), the map of every frame written,
// and the tile's state written once. State traffic falls by DEC; output is not decimated.
#define HALO (DEC * SHRINK)
#define BW (TX + 2 * HALO)
#define BH (TY + 2 * HALO)

extern "C" __global__ void __launch_bounds__(TX * TY)
    tbd_tiled(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next, const FRAME_T* __restrict__ frames,
              float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha) {
    __shared__ float buf[2][BH * BW];
    __shared__ float best[DEC][TY * TX];
    __shared__ unsigned short barg[DEC][TY * TX];
    const int tid = threadIdx.y * TX + threadIdx.x;
    const int nt = TX * TY;
    const int x0 = (int)blockIdx.x * TX - HALO, y0 = (int)blockIdx.y * TY - HALO;
    const size_t n = (size_t)h * w;
    const float c = 1.0f - alpha;
    for (int v = 0; v < NV; ++v) {
        const state_t* s = s_prev + v * n;
        for (int i = tid; i < BH * BW; i += nt) {
            const int gx = x0 + i % BW, gy = y0 + i / BW;
            buf[0][i] = ((unsigned)gx < (unsigned)w && (unsigned)gy < (unsigned)h)
                            ? load_state_f(LD(s + (size_t)gy * w + gx))
                            : 0.0f;
        }
        __syncthreads();
        const float vx = MVX[v], vy = MVY[v];
        int cur = 0;
        for (int k = 0; k < DEC; ++k) {
            const int m = (k + 1) * SHRINK;
            const int rw = BW - 2 * m, rh = BH - 2 * m;
            const float* src = buf[cur];
            float* dst = buf[cur ^ 1];
            const FRAME_T* f = frames + k * n;
            for (int i = tid; i < rw * rh; i += nt) {
                const int bx = m + i % rw, by = m + i / rw;
                const int gx = x0 + bx, gy = y0 + by;
                float val = 0.0f;
                if ((unsigned)gx < (unsigned)w && (unsigned)gy < (unsigned)h) {
                    // Taps stay inside the tile (margin >= SHRINK); cells outside the
                    // frame hold 0, which is the convention's "outside reads 0".
                    const float p =
                        bilinear([&](int r, int cc) { return src[r * BW + cc]; }, BH, BW, bx, by, -vx, -vy);
                    val = c * p + alpha * (float)LD(f + (size_t)gy * w + gx);
                }
                dst[by * BW + bx] = val;
                const int ox = bx - HALO, oy = by - HALO;
                if ((unsigned)ox < (unsigned)TX && (unsigned)oy < (unsigned)TY) {
                    const int o = oy * TX + ox;
                    if (v == 0 || val > best[k][o]) {
                        best[k][o] = val;
                        barg[k][o] = (unsigned short)v;
                    }
                }
            }
            __syncthreads();
            cur ^= 1;
        }
        state_t* so = s_next + v * n;
        for (int i = tid; i < TX * TY; i += nt) {
            const int gx = x0 + HALO + i % TX, gy = y0 + HALO + i / TX;
            if (gx < w && gy < h) so[(size_t)gy * w + gx] = store_state_f(buf[cur][(HALO + i / TX) * BW + HALO + i % TX]);
        }
        __syncthreads();
    }
    for (int k = 0; k < DEC; ++k) {
        for (int i = tid; i < TX * TY; i += nt) {
            const int gx = x0 + HALO + i % TX, gy = y0 + HALO + i / TX;
            if (gx < w && gy < h) {
                score[k * n + (size_t)gy * w + gx] = best[k][i];
                arg[k * n + (size_t)gy * w + gx] = barg[k][i];
            }
        }
    }
}

#endif
// The state resident on chip for DEC frames, laid out for speed (`Variant::Resident`):
// one vector at a time; each thread owns a column of RB cells of a TX x (TY * RB) tile
// (threadIdx.x the column, so a warp touches 32 consecutive pixels) and keeps them in
// registers; every frame it publishes them to a shared tile padded by one frame's reach
// (SHRINK) on each side, double buffered so that one barrier per frame orders it, and
// reads back the taps of its shifted column (each shared row once: the vertical taps of
// neighbouring cells are shared in registers). The per-frame max / arg-max of all DEC
// frames stays in registers across the vectors (arg-max packed ARG_BITS per frame), the
// next vector's state is loaded while the current one runs, and a frame's pixels are
// loaded before the barrier that they wait at. The halo is DEC * SHRINK on each side:
// the block emits the inner (TX - 2 halo) x (TY * RB - 2 halo) pixels.
#if defined(RB) && !defined(LEAN)
#define R_HALO (DEC * SHRINK)
#define R_BW TX
#define R_BH (TY * RB)
#define R_PAD SHRINK
#define R_PW (R_BW + 2 * R_PAD + 1)
#define R_PH (R_BH + 2 * R_PAD + 1)
#if NV <= 16
#define ARG_BITS 4
#else
#define ARG_BITS 8
#endif
#define ARG_PER_WORD (32 / ARG_BITS)
#define ARG_WORDS ((DEC + ARG_PER_WORD - 1) / ARG_PER_WORD)

// Frames in registers (read once per block, not once per vector) where they fit: on an
// H100 (1024 x 1024, 13 vectors, K = 4, 128 x 32 tiles) 40,100 frames/s with them (a few
// registers spilled) against at most 24,900 reading the frames once per vector.
#define R_FREG (DEC * RB <= 32)

// ALLIN: the whole tile lies inside the frame (no per-cell frame tests).
template <bool ALLIN>
__device__ __forceinline__ void resident_body(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next,
                                              const FRAME_T* __restrict__ frames, float* __restrict__ score,
                                              unsigned short* __restrict__ arg, int h, int w, float alpha,
                                              float (*rbuf)[R_PH][R_PW], int gx, int gy0) {
    const int tx = threadIdx.x, r0 = threadIdx.y * RB;
    const size_t n = (size_t)h * w;
    const float c = 1.0f - alpha;
    const bool col_in = ALLIN || (unsigned)gx < (unsigned)w;
    const bool col_out = col_in && tx >= R_HALO && tx < R_BW - R_HALO;
    bool in[RB], out[RB];
    const size_t base = col_in ? (size_t)gy0 * w + gx : 0;
#pragma unroll
    for (int i = 0; i < RB; ++i) {
        in[i] = ALLIN || (col_in && (unsigned)(gy0 + i) < (unsigned)h);
        out[i] = col_out && in[i] && r0 + i >= R_HALO && r0 + i < R_BH - R_HALO;
    }
#define R_OFF(i) (base + (size_t)(i) * w)
    float best[DEC][RB];
    unsigned barg[RB][ARG_WORDS];
#pragma unroll
    for (int i = 0; i < RB; ++i)
#pragma unroll
        for (int q = 0; q < ARG_WORDS; ++q) barg[i][q] = 0u;
#if R_FREG
    float xr[DEC][RB];
#pragma unroll
    for (int k = 0; k < DEC; ++k)
#pragma unroll
        for (int i = 0; i < RB; ++i) xr[k][i] = in[i] ? (float)LD(frames + (size_t)k * n + R_OFF(i)) : 0.0f;
#endif
    float nxt[RB];
#pragma unroll
    for (int i = 0; i < RB; ++i) nxt[i] = in[i] ? load_state_f(LD(s_prev + R_OFF(i))) : 0.0f;
    PRAGMA_V
    for (int v = 0; v < NV; ++v) {
#if UNROLL_V
        const float vx = mvx(v), vy = mvy(v);
#else
        const float vx = MVX[v], vy = MVY[v];
#endif
        float s[RB];
#pragma unroll
        for (int i = 0; i < RB; ++i) s[i] = nxt[i];
        if (v + 1 < NV) {
            const state_t* sp = s_prev + (size_t)(v + 1) * n;
#pragma unroll
            for (int i = 0; i < RB; ++i) nxt[i] = in[i] ? load_state_f(LD(sp + R_OFF(i))) : 0.0f;
        }
        // The taps of the shift by -v (motion.rs): rows iy, iy + 1, columns ix, ix + 1.
        const float sx = -vx, sy = -vy;
        const int ix = ifloor(sx), iy = ifloor(sy);
        const float fx = sx - (float)ix, fy = sy - (float)iy;
        const float wx0 = 1.0f - fx, wx1 = fx, wy0 = 1.0f - fy, wy1 = fy;
#pragma unroll
        for (int k = 0; k < DEC; ++k) {
#if R_FREG
            const float* xk = xr[k];
#else
            const FRAME_T* f = frames + (size_t)k * n;
            float xk[RB];
#pragma unroll
            for (int i = 0; i < RB; ++i) xk[i] = in[i] ? (float)LD(f + R_OFF(i)) : 0.0f;
#endif
            float(*b)[R_PW] = rbuf[(v * DEC + k) & 1];
#pragma unroll
            for (int i = 0; i < RB; ++i) b[R_PAD + r0 + i][R_PAD + tx] = s[i];
            __syncthreads();
            float hr[RB + 1];
#pragma unroll
            for (int j = 0; j <= RB; ++j) {
                if (j < RB || wy1 != 0.0f) {
                    const float* row = &b[R_PAD + r0 + iy + j][R_PAD + tx + ix];
                    hr[j] = (wx1 == 0.0f) ? row[0] : wx0 * row[0] + wx1 * row[1];
                } else {
                    hr[j] = 0.0f;
                }
            }
#pragma unroll
            for (int i = 0; i < RB; ++i) {
                const float p = (wy1 == 0.0f) ? hr[i] : wy0 * hr[i] + wy1 * hr[i + 1];
                // Cells outside the frame hold 0: the convention's "outside reads 0".
                const float val = in[i] ? c * p + alpha * xk[i] : 0.0f;
                s[i] = val;
                if (v == 0 || val > best[k][i]) {
                    best[k][i] = val;
                    const int q = k / ARG_PER_WORD, sh = (k % ARG_PER_WORD) * ARG_BITS;
                    barg[i][q] = (barg[i][q] & ~(((1u << ARG_BITS) - 1u) << sh)) | ((unsigned)v << sh);
                }
            }
        }
        state_t* so = s_next + (size_t)v * n;
#pragma unroll
        for (int i = 0; i < RB; ++i)
            if (out[i]) so[R_OFF(i)] = store_state_f(s[i]);
    }
#pragma unroll
    for (int k = 0; k < DEC; ++k)
#pragma unroll
        for (int i = 0; i < RB; ++i)
            if (out[i]) {
                score[(size_t)k * n + R_OFF(i)] = best[k][i];
                const int q = k / ARG_PER_WORD, sh = (k % ARG_PER_WORD) * ARG_BITS;
                arg[(size_t)k * n + R_OFF(i)] = (unsigned short)((barg[i][q] >> sh) & ((1u << ARG_BITS) - 1u));
            }
#undef R_OFF
}

extern "C" __global__ void __launch_bounds__(TX * TY)
    tbd_resident(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next, const FRAME_T* __restrict__ frames,
                 float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha) {
    __shared__ float rbuf[2][R_PH][R_PW];
    const int bx0 = (int)blockIdx.x * (R_BW - 2 * R_HALO) - R_HALO;
    const int by0 = (int)blockIdx.y * (R_BH - 2 * R_HALO) - R_HALO;
    const int gx = bx0 + (int)threadIdx.x, gy0 = by0 + (int)threadIdx.y * RB;
    // Block-uniform: every thread takes the same branch (the barriers inside stay paired).
    if (bx0 >= 0 && by0 >= 0 && bx0 + R_BW <= w && by0 + R_BH <= h)
        resident_body<true>(s_prev, s_next, frames, score, arg, h, w, alpha, rbuf, gx, gy0);
    else
        resident_body<false>(s_prev, s_next, frames, score, arg, h, w, alpha, rbuf, gx, gy0);
}
#endif
