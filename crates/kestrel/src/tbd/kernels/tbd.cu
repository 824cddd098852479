// Spatio-temporal track-before-detect on the GPU (see tbd/mod.rs for the recursion and
// tbd/motion.rs for the bilinear convention, which every kernel follows in the same
// order of operations as the CPU reference).
//
// The launcher prepends the compile-time parameters:
//   NV            number of motion vectors; MVX / MVY their components (MOTIONS_INIT)
//   STATE_HALF    1: the state is stored as f16 (computed in f32), 0: f32
//   FRAME_T       element type of the frames on the device (float, unsigned char, unsigned short)
//   USE_LDG       1: read-only cached loads (__ldg), 0: plain loads
//   UNROLL_V      1: the loop over vectors unrolled (every shift a constant), 0: not
//   DEC           frames per launch: the decimation D (fused and per-vector kernels), or
//                 the frames K kept on chip by the tiled kernel
//   TX, TY        tile of the tiled kernel (also its block shape); SHRINK = pixels a
//                 trajectory moves per frame, rounded up (the halo grows by it per frame)
//
// Layouts: state [NV][H][W]; frames [DEC][H][W]; score (f32) and arg (u16) [H][W] for the
// fused and per-vector kernels, [DEC][H][W] for the tiled kernel.

#if STATE_HALF
typedef unsigned short state_t;
#ifdef KESTREL_EMULATION
__device__ __forceinline__ float load_state_f(state_t h) { return emu_half_to_float(h); }
__device__ __forceinline__ state_t store_state_f(float f) { return emu_float_to_half(f); }
#else
__device__ __forceinline__ float load_state_f(state_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ state_t store_state_f(float f) {
    state_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#endif
#else
typedef float state_t;
__device__ __forceinline__ float load_state_f(state_t v) { return v; }
__device__ __forceinline__ state_t store_state_f(float f) { return f; }
#endif

#if USE_LDG
#define LD(p) __ldg(p)
#else
#define LD(p) (*(p))
#endif

#if UNROLL_V
#define PRAGMA_V _Pragma("unroll")
#else
#define PRAGMA_V _Pragma("unroll 1")
#endif

// The kernels launched as programmatic dependent launches (`launch_ex`: late, wave,
// packed) may start while the launch before them still runs: grid_dep_launch lets the
// next launch's blocks start once every block of this one has executed it;
// grid_dep_wait waits for the launch before to complete, before a kernel reads what it
// wrote or writes what it reads. Before compute capability 9.0 both are left out (and
// the launch is an ordinary one).
#if defined(KESTREL_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900)
__device__ __forceinline__ void grid_dep_wait() {}
__device__ __forceinline__ void grid_dep_launch() {}
#else
__device__ __forceinline__ void grid_dep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void grid_dep_launch() { asm volatile("griddepcontrol.launch_dependents;\n" :::); }
#endif

// The wave forms (`Variant::Wave`, the packed kernel with periods: WAVE_PERIODS) take
// their work items from a ticket counter and wait on flags that other blocks of the same
// launch (or the launch before) release.
#ifdef WAVE_PERIODS
#ifdef KESTREL_EMULATION
// One block at a time in ticket order in the emulator: a wait that would spin means the
// order is wrong, and the run stops.
inline unsigned long long wave_ticket(unsigned long long* t) { return (*t)++; }
inline unsigned wave_load_flag(const unsigned* p) { return *p; }
inline void wave_store_flag(unsigned* p, unsigned v) { *p = v; }
inline void wave_fence() {}
inline void wave_nap() {
    std::fprintf(stderr, "wave: a block waits for a tile that no earlier ticket finished\n");
    std::abort();
}
#else
__device__ __forceinline__ unsigned long long wave_ticket(unsigned long long* t) { return atomicAdd(t, 1ULL); }
__device__ __forceinline__ unsigned wave_load_flag(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void wave_store_flag(unsigned* p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void wave_fence() { __threadfence(); }
#ifndef WAVE_NAP_NS
#define WAVE_NAP_NS 64
#endif
__device__ __forceinline__ void wave_nap() { __nanosleep(WAVE_NAP_NS); }
#endif
// The block's work item (`wave_order` in cuda.rs: period j | tile row << 8 | column <<
// 20): one thread takes the next ticket, the others read it from `slot` (shared
// memory) after a barrier. Tickets count across launches; `base`: the launch's first.
__device__ __forceinline__ unsigned wave_take(const unsigned* order, unsigned long long* ticket,
                                              unsigned long long base, unsigned* slot, int tid) {
    if (tid == 0) *slot = order[(unsigned)(wave_ticket(ticket) - base)];
    __syncthreads();
    return *slot;
}
// Waits until the nine tiles around tile (br, bc) of tgy x tgx have finished period gp - 1
// (flags[tile] = the last period done + 1): nine threads look, then a barrier.
__device__ __forceinline__ void wave_wait_around(const unsigned* flags, int br, int bc, int tgx, int tgy, unsigned gp,
                                                 int tid) {
    if (tid < 9) {
        const int rr = br + tid / 3 - 1, cc = bc + tid % 3 - 1;
        if ((unsigned)rr < (unsigned)tgy && (unsigned)cc < (unsigned)tgx) {
            const unsigned* f = flags + rr * tgx + cc;
            while ((int)(wave_load_flag(f) - gp) < 0) wave_nap();
        }
    }
    __syncthreads();
}
#endif

__device__ __constant__ float MVX[NV] = MOTIONS_VX;
__device__ __constant__ float MVY[NV] = MOTIONS_VY;
// The same numbers as compile-time constants, so that unrolled loops fold every shift.
struct Motions {
    float vx[NV];
    float vy[NV];
};
__device__ __forceinline__ float mvx(int v) {
    constexpr Motions m = {MOTIONS_VX, MOTIONS_VY};
    return m.vx[v];
}
__device__ __forceinline__ float mvy(int v) {
    constexpr Motions m = {MOTIONS_VX, MOTIONS_VY};
    return m.vy[v];
}

__device__ __forceinline__ constexpr int ifloor(float s) {
    int i = (int)s;
    return (s < (float)i) ? i - 1 : i;
}

// Vector v's shift by -v as the every-frame tile kernels (lean, packed) take it
// (motion.rs): taps at rows iy (+1) and columns ix (+1) from the cell, fractions fx, fy;
// hx / hy: the axis blends two taps; what the vector needs from neighbouring threads:
// whole columns (xh, a horizontal shift), the edge rows of the threads above and below
// (xv only), or nothing. A vector past NV (`live` false: the short last group) is the
// shift 0 and needs nothing.
struct Shift {
    int ix, iy;
    float fx, fy;
    bool hx, hy, xh, xv;
};
__device__ __forceinline__ Shift shift_of(int v, bool live) {
#if UNROLL_V
    const float sx = live ? -mvx(v) : 0.0f, sy = live ? -mvy(v) : 0.0f;
#else
    const float sx = live ? -MVX[v] : 0.0f, sy = live ? -MVY[v] : 0.0f;
#endif
    Shift t;
    t.ix = ifloor(sx);
    t.iy = ifloor(sy);
    t.fx = sx - (float)t.ix;
    t.fy = sy - (float)t.iy;
    t.hx = t.fx != 0.0f;
    t.hy = t.fy != 0.0f;
    t.xh = live && (t.ix != 0 || t.hx);
    t.xv = live && (t.iy != 0 || t.hy);
    return t;
}
// Whether a thread publishes row i of its column of rb cells for this shift: every row
// for a horizontal one, else the rows that the threads above and below read.
__device__ __forceinline__ bool publishes_row(const Shift& t, int i, int rb) {
    return t.xh || i < t.iy + (int)t.hy || i >= rb + t.iy;
}

// The bilinear blend of the taps at(r + 0..1, c + 0..1) with fractions fx, fy (horizontal
// blends first); zero-weight taps are not read (exactly the value with them).
template <class At>
__device__ __forceinline__ float blend_taps(At at, int r, int c, float fx, float fy) {
    const float wx0 = 1.0f - fx, wx1 = fx, wy0 = 1.0f - fy, wy1 = fy;
    float h0, h1 = 0.0f;
    if (wx1 == 0.0f) {
        h0 = at(r, c);
        if (wy1 != 0.0f) h1 = at(r + 1, c);
    } else {
        h0 = wx0 * at(r, c) + wx1 * at(r, c + 1);
        if (wy1 != 0.0f) h1 = wx0 * at(r + 1, c) + wx1 * at(r + 1, c + 1);
    }
    return (wy1 == 0.0f) ? h0 : wy0 * h0 + wy1 * h1;
}

// Bilinear sample at (x + sx, y + sy) of an h x w image read through `get(r, c)`, taps
// outside read 0.
template <class Get>
__device__ __forceinline__ float bilinear(Get get, int h, int w, int x, int y, float sx, float sy) {
    const int ix = ifloor(sx), iy = ifloor(sy);
    auto at = [&](int rr, int cc) -> float {
        return ((unsigned)rr < (unsigned)h && (unsigned)cc < (unsigned)w) ? get(rr, cc) : 0.0f;
    };
    return blend_taps(at, y + iy, x + ix, sx - (float)ix, sy - (float)iy);
}

// One trajectory through a block of DEC frames (the seed's decimation): the value at
// (x, y) for vector v after the block, from the state before it.
__device__ __forceinline__ float trajectory(const state_t* __restrict__ s_prev, const FRAME_T* __restrict__ frames,
                                            int h, int w, int x, int y, float vx, float vy, float alpha) {
    const size_t n = (size_t)h * w;
    const float c = 1.0f - alpha;
    float s = bilinear([&](int r, int cc) { return load_state_f(LD(s_prev + (size_t)r * w + cc)); }, h, w, x, y,
                       -(float)DEC * vx, -(float)DEC * vy);
#pragma unroll
    for (int j = 0; j < DEC; ++j) {
        const FRAME_T* f = frames + j * n;
        const float back = (float)(DEC - 1 - j);
        float xs;
        if (j == DEC - 1) {
            xs = (float)LD(f + (size_t)y * w + x);
        } else {
            xs = bilinear([&](int r, int cc) { return (float)LD(f + (size_t)r * w + cc); }, h, w, x, y, -back * vx,
                          -back * vy);
        }
        s = c * s + alpha * xs;
    }
    return s;
}

// All vectors in one kernel, one thread per pixel (2-D blocks), DEC frames per launch,
// the detection map written once per launch.
extern "C" __global__ void __launch_bounds__(TX * TY) tbd_fused(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next,
                                     const FRAME_T* __restrict__ frames, float* __restrict__ score,
                                     unsigned short* __restrict__ arg, int h, int w, float alpha) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const size_t n = (size_t)h * w, p = (size_t)y * w + x;
    float best = 0.0f;
    int barg = 0;
    PRAGMA_V
    for (int v = 0; v < NV; ++v) {
#if UNROLL_V
        const float vx = mvx(v), vy = mvy(v);
#else
        const float vx = MVX[v], vy = MVY[v];
#endif
        const float s = trajectory(s_prev + v * n, frames, h, w, x, y, vx, vy, alpha);
        s_next[v * n + p] = store_state_f(s);
        if (v == 0 || s > best) {
            best = s;
            barg = v;
        }
    }
    score[p] = best;
    arg[p] = (unsigned short)barg;
}

// One kernel per vector (the seed's separate kernels, each with its shifts compiled
// in); the launches run in order on one stream and fold the map in place.
template <int V>
__device__ __forceinline__ void tbd_vec_body(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next,
                                             const FRAME_T* __restrict__ frames, float* __restrict__ score,
                                             unsigned short* __restrict__ arg, int h, int w, float alpha) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const size_t n = (size_t)h * w, p = (size_t)y * w + x;
    const float s = trajectory(s_prev + V * n, frames, h, w, x, y, mvx(V), mvy(V), alpha);
    s_next[V * n + p] = store_state_f(s);
    if (V == 0 || s > score[p]) {
        score[p] = s;
        arg[p] = (unsigned short)V;
    }
}

#define TBD_VEC(i)                                                                                          \
    extern "C" __global__ void __launch_bounds__(TX * TY) tbd_vec_##i(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next,     \
                                           const FRAME_T* __restrict__ frames, float* __restrict__ score,  \
                                           unsigned short* __restrict__ arg, int h, int w, float alpha) {   \
        tbd_vec_body<i>(s_prev, s_next, frames, score, arg, h, w, alpha);                                        \
    }

#ifdef TBD_VEC_LIST
TBD_VEC_LIST
#endif

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

// The resident scheme with fewer instructions per cell and frame (`Variant::Lean`):
// the same tile, column of RB cells per thread and double-buffered shared exchange as
// the resident kernel, but every choice that depends on the vector is made at compile
// time (the vector loop must be unrolled to be fast; it stays correct when not):
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

// Decimation with the frames staged in shared memory (`Variant::Staged`): the seed's
// scheme (each trajectory folded through the DEC frames of a launch, the map emitted
// once per launch) with the block's DEC frame tiles read once each, coalesced, as
// alpha X into a double-buffered shared tile (zeros outside the frame, so no tap tests),
// the next frame's tile loaded while the current one is used; each thread keeps the
// trajectories of all vectors through its STAGED (1 or 2) pixels in registers, frame
// by frame. With 2 pixels per thread the three taps of a row that the two share come
// as one 8-byte and one 4-byte shared load (their alignment is a compile-time fact of
// the shift). The state is sampled from global memory once per launch, without tests
// where the footprint lies inside the frame. Same sampling positions and blends as
// `trajectory`; alpha multiplies the frame before the blend, not after (a rounding
// apart; the same arithmetic for integer vectors).
//
// With STAGED_LATE (`Variant::Late`) the state is sampled after the frames instead of
// before: the trajectories fold the frames from zero, G = sum_j c^(DEC-1-j) alpha X_j
// (the same Horner steps), and the sample joins last, c^DEC S + G (a rounding or two from
// the Horner order, which starts from S). No state load stands before the first frame
// and none is held in registers across the frames, so fewer registers and several blocks
// a multiprocessor (S_MINB) let one block's state loads overlap another's frames.
#ifdef STAGED
#define S_PX STAGED
#ifndef STAGED_LATE
#define STAGED_LATE 0
#endif
#ifndef S_MINB
#define S_MINB 1
#endif
// The late kernel with 2 pixels per thread keeps each tile row as its even columns then
// its odd ones (S_SPLIT), so that the three taps a thread reads from a row are three
// 4-byte loads at consecutive words across the warp (3 shared wavefronts a row; the
// 8-byte + 4-byte pair of the row-major tile takes 4, its 4-byte load 2-way conflicted),
// and blends each sample with the four products of its weights (compile-time) into the
// trajectory: c acc + w00 t00 + w01 t01 + w10 t10 + w11 t11.
#define S_SPLIT (STAGED_LATE && S_PX == 2)
// The late kernel on f32 frames copies the frame tiles into shared memory with cp.async
// (no registers, no load-to-store wait), S_AHEAD + 1 tiles deep: frames up to
// j + S_AHEAD are in flight while frame j is used. The tiles hold X itself; alpha
// multiplies the folded sum once at the end (alpha G), as for every frame type in the
// late kernel.
#if STAGED_LATE && defined(FRAME_F32)
#define S_ASYNC 1
// Frames in flight ahead of the one folded: S_AHEAD, in S_AHEAD + 1 tiles. H100, 13
// vectors, D10, 32 x 16, against 2 in the same runs (two each): the late kernel f32
// 1.431-1.436 -> 1.415 ms per 200 frames, f16 1.126-1.128 -> 1.107-1.110; the wave kernel
// (which keeps 2) wave3g6 f32 1.200-1.203 -> 1.205-1.209.
#define S_AHEAD (S_WAVE ? 2 : 3)
#define S_BUFS (S_AHEAD + 1)
#else
#define S_ASYNC 0
#define S_BUFS 2
#endif
#if S_ASYNC
#ifdef KESTREL_EMULATION
__device__ __forceinline__ void cp_async4(float* dst, const float* src, unsigned bytes) { *dst = bytes ? *src : 0.0f; }
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    if (valid) {
        std::memcpy(dst, src, 16);
    } else {
        std::memset(dst, 0, 16);
    }
}
__device__ __forceinline__ void cp_async_commit() {}
__device__ __forceinline__ void cp_async_wait1() {}
__device__ __forceinline__ void cp_async_wait0() {}
__device__ __forceinline__ void cp_async_wait2() {}
#else
// 4 bytes global -> shared; `bytes` is the source size: 4 (copy) or 0 (zero-fill; nothing
// is read, so the address need not be valid).
__device__ __forceinline__ void cp_async4(float* dst, const float* src, unsigned bytes) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
// 16 bytes global -> shared (both 16-byte aligned), past L1, zero-filled when !valid;
// L2 fetches the whole 128-byte line from DRAM (a tile row is 352 bytes of f32). H100, 13
// vectors, D10, 32 x 16, two runs each against no hint in the same call: wave3g6 f32
// 1.212-1.223 -> 1.192-1.194 ms per 200 frames, wave2g8 1.356-1.360 -> 1.327-1.328, late2
// f16 1.136-1.145 -> 1.131-1.136; 64-byte lines: no change; 256: 1% slower.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Every group but the newest complete (this thread's copies).
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait0() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait2() { asm volatile("cp.async.wait_group 2;\n" ::: "memory"); }
#endif
#endif
#define S_OW (TX * S_PX)
#define S_OH TY
#define S_HALO ((DEC - 1) * SHRINK)
#define S_TW (S_OW + 2 * S_HALO)
// The late kernel with f32 frames and frame rows of whole 16-byte chunks (FRAME_W4: the
// width a multiple of 4, set by the launcher) keeps its frame tiles row-major instead of
// split and copies them 16 bytes at a time (S_ROW16): the tile starts S_LPAD columns left
// of the block's first output column (a multiple of 4) and its rows are whole chunks, so a
// chunk lies wholly inside the frame or wholly outside it. A pixel pair's three taps of a
// row are one 8-byte and one 4-byte shared load (4 wavefronts a warp against the split
// layout's 3), but a warp's copies of a frame fall from about 6 to 1.5 instructions a
// thread, and its bytes from L2 to the ones it needs (no second 4-byte copy of each
// sector). H100, 13 vectors, D10, 32 x 16, against the split layout in the same runs (two
// each): f16 state 1.265-1.273 -> 1.168-1.169 ms per 200 frames. With an f32 state it was
// 0.7% slower until each frame's copy shrank to the frame's reach; since then
// it is 2.7% faster for the wave kernel (wave2g8 1.399-1.402 -> 1.361-1.363 ms) and the
// same for the late kernel.
#ifndef FRAME_W4
#define FRAME_W4 0
#endif
#if FRAME_W4 && S_ASYNC && S_SPLIT
#define S_ROW16 1
#else
#define S_ROW16 0
#endif
#if S_ROW16
#define S_LPAD ((S_HALO + 3) / 4 * 4)
#define S_PW ((S_LPAD + S_OW + S_HALO + 3) / 4 * 4)
// S_CH chunks a tile row, S_CPER chunks a thread.
#define S_CH (S_PW / 4)
#define S_CHUNKS (S_PH * S_CH)
#define S_CPER ((S_CHUNKS + S_NT - 1) / S_NT)
#else
#define S_LPAD S_HALO
#define S_PW ((S_TW + 1) / 2 * 2)
#endif
#define S_PH (S_OH + 2 * S_HALO)
#define S_NT (TX * TY)
#define S_CELLS (S_PH * S_PW)
#define S_PER ((S_CELLS + S_NT - 1) / S_NT)
#define S_REACH (DEC * SHRINK + 1)
// The late kernel copies f32 frames with 2 pixels a thread by column pairs (S_PAIRS_ON):
// S_HW pairs a tile row, S_PPER pairs a thread.
#define S_PAIRS_ON (S_ASYNC && S_SPLIT)
// Each frame's copy takes only the rows and columns that its samples read (frame j of DEC
// reaches (DEC - 1 - j) SHRINK pixels, so the last frame's tile is the block's outputs
// alone; see `issue`): a third fewer bytes copied at D10 and 32 x 16 pairs. H100, 13
// vectors, 1024 x 1024, against full tiles in the same runs (two each, split f32 tiles):
// f32 wave2g8 1.455-1.462 -> 1.395-1.404 ms per 200 frames, late2 1.544-1.545 ->
// 1.475-1.476; f16 late2 1.171-1.175 -> 1.134-1.135. Bytes through L2 in a wave3g6
// launch (Nsight Compute, lts__t_bytes): 1.19 GB -> 1.02 GB.
#define S_HW (S_PW / 2)
#define S_PAIRS (S_PH * S_HW)
#define S_PPER ((S_PAIRS + S_NT - 1) / S_NT)
// The late kernel with copied frames also copies the state it samples into shared
// memory (S_SST, dynamic shared memory), 16 bytes at a time, while the first frames
// are folded, where rows are whole 16-byte chunks (w a multiple of S_SE, a runtime
// test): per vector S_SR rows of S_SC chunks, from the chunk that holds the vector's
// first tap column. The launcher passes NV * S_SVB bytes.
#define S_SST S_PAIRS_ON
#define S_SE (16 / (int)sizeof(state_t))
#define S_SR (S_OH + 1)
#define S_SC ((S_OW + S_SE - 1) / S_SE + 1)
#define S_SVB (S_SR * S_SC * 16)
// The state copies join the group of frame S_SGRP's tile. The late kernel's join frame
// 2's, waited for before frame 2 is folded; with two frames ahead (before S_AHEAD) they
// were issued after the first barrier, and on the H100 (f32, 32 x 16, D10) that was 2%
// faster than frame 1's group (issued before frame 0), 21% faster than frame 5's (issued
// mid-launch) and 9% faster than frame 0's (with the copies shrunk to each frame's reach,
// 2.6% faster than frame 1's for f32, 1.5% for f16). Three frames ahead, frame 2's group
// is issued with frames 0 and 1, before the first barrier (not timed against the other
// groups). The wave kernel's (and its wait for the tiles around) join frame 1's group,
// before frame 0 is folded: with the copies shrunk to the frames' reach, wave3g6 f32
// 1.239-1.243 -> 1.209-1.215 ms per 200 frames against frame 2's (frame 0's: 1.227; 3's
// and 4's: 1.38-1.41), f16 1.036-1.040 -> 1.031-1.036.
#define S_SGRP (DEC > 2 ? (S_WAVE ? 1 : 2) : DEC > 1 ? 1 : 0)
// The late kernel is launched as a programmatic dependent launch (`launch_ex`): its
// blocks may start while the launch before it still runs (every block of that one lets
// them, griddepcontrol.launch_dependents, when it starts). They copy their first frames,
// then wait for that launch to complete (griddepcontrol.wait) before they read the state
// it writes (frame S_SGRP's copies, or the samples after the last frame) or write what it
// reads. H100, 13 vectors, D10, 32 x 16, against the ordinary launch in the same runs
// (four each): f32 1.590-1.598 -> 1.543-1.557 ms per 200 frames, f16 1.311-1.319 ->
// 1.264-1.268 (`grid_dep_wait`, `grid_dep_launch`).
// The wave form of the late kernel (`Variant::Wave`, WAVE_PERIODS): one launch runs
// WAVE_PERIODS decimation periods of the whole frame, one tile and period a block. The
// blocks take their work items (period, tile row, tile column) from a ticket counter in
// the order the launcher lays out (`wave_order` in cuda.rs: period j of the launch G tile
// rows behind period j - 1), so that period j reads the state that period j - 1 wrote a
// short while before, from L2 instead of DRAM (H100, 13 vectors, D10, f32, 3 periods a
// launch: 67 MB read from DRAM a period against the late kernel's 98; the state is still
// written back, about 58 MB a period). A tile of period g waits (before its state copies) until
// the nine tiles around it have finished period g - 1: the state it samples lies in them
// (its reach is at most a tile: checked by the launcher) and it overwrites what they
// read. Periods are counted across launches (gp0: the launch's first), the state buffers
// taken by the period's parity and flags[tile] = the last period done + 1, so that a
// launch's first tiles wait on the last one's as its own periods wait on each other (no
// wait for the whole launch before it). Tickets are taken in the order blocks start and a
// block waits only on lower tickets, which blocks already running hold: no deadlock
// whatever the block order.
#ifdef WAVE_PERIODS
#define S_WAVE 1
#else
#define S_WAVE 0
#endif
#if S_WAVE
// Both state buffers are read and written in one launch: no restrict, no const.
#define S_SPREV state_t*
#define S_SNEXT state_t*
#else
#define S_SPREV const state_t* __restrict__
#define S_SNEXT state_t* __restrict__
#endif
__device__ __forceinline__ int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
// The first column of the chunk that holds column ox0 + ix (ox0: the block's first
// column, a multiple of S_OW; a compile-time offset from it where S_OW holds whole chunks).
__device__ __forceinline__ int s_chunk0(int ox0, int ix) {
    return (S_OW % S_SE == 0) ? ox0 + floor_div(ix, S_SE) * S_SE : floor_div(ox0 + ix, S_SE) * S_SE;
}
#if S_SST
#ifdef KESTREL_EMULATION
// One block at a time in the emulator: a static buffer is its shared memory.
static unsigned char s_dyn_emu[NV * S_SVB] __attribute__((aligned(16)));
#define S_DYN s_dyn_emu
#else
extern __shared__ __align__(16) unsigned char s_dyn[];
#define S_DYN s_dyn
#endif
#define S_SST_ON sst
#else
#define S_SST_ON false
#endif

// Bilinear sample of the state (global) at (x + sx, y + sy), as `bilinear`; IN: every
// tap lies inside the frame (no tests).
template <bool IN>
__device__ __forceinline__ float staged_state(const state_t* __restrict__ p, int h, int w, int x, int y, float sx,
                                              float sy) {
    const int ix = ifloor(sx), iy = ifloor(sy);
    auto at = [&](int rr, int cc) -> float {
        return (IN || ((unsigned)rr < (unsigned)h && (unsigned)cc < (unsigned)w))
                   ? load_state_f(LD(p + ((unsigned)rr * (unsigned)w + (unsigned)cc)))
                   : 0.0f;
    };
    return blend_taps(at, y + iy, x + ix, sx - (float)ix, sy - (float)iy);
}

// Bytes [a, a + size) into L2 (both multiples of 16), without waiting.
__device__ __forceinline__ void prefetch_l2(size_t a, unsigned size) {
#ifndef KESTREL_EMULATION
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(a), "r"(size) : "memory");
#endif
}

// Two neighbouring state cells (p even, so 8 / 4 bytes aligned) in one store.
__device__ __forceinline__ void store2_state(state_t* p, float a, float b) {
#if STATE_HALF
    *reinterpret_cast<unsigned*>(p) = (unsigned)store_state_f(a) | ((unsigned)store_state_f(b) << 16);
#else
    *reinterpret_cast<float2*>(p) = make_float2(a, b);
#endif
}

// The taps of one row for the S_PX pixels: columns col + 0 .. S_PX (the last only when
// `two`); `odd`: col is odd (compile-time), so that the 8-byte load is aligned.
__device__ __forceinline__ void staged_row(float (&t)[S_PX + 1], const float* row, bool two, bool odd) {
#if S_PX == 2
    if (!odd) {
        const float2 a = *reinterpret_cast<const float2*>(row);
        t[0] = a.x;
        t[1] = a.y;
        t[2] = two ? row[2] : 0.0f;
    } else {
        t[0] = row[0];
        if (two) {
            const float2 a = *reinterpret_cast<const float2*>(row + 1);
            t[1] = a.x;
            t[2] = a.y;
        } else {
            t[1] = row[1];
            t[2] = 0.0f;
        }
    }
#else
    t[0] = row[0];
    t[1] = two ? row[1] : 0.0f;
#endif
}

#if STAGED_LATE
#define S_BOUNDS __launch_bounds__(TX * TY, S_MINB)
#else
#define S_BOUNDS __launch_bounds__(TX * TY)
#endif
extern "C" __global__ void S_BOUNDS
    tbd_staged(S_SPREV s_prev, S_SNEXT s_next, const FRAME_T* __restrict__ frames,
               float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha
#if S_WAVE
               ,
               const unsigned* __restrict__ order, unsigned long long* ticket, unsigned* flags, unsigned long long base,
               unsigned gp0
#endif
    ) {
    __shared__ __align__(16) float fb[S_BUFS][S_PH][S_PW];
    const int tid = threadIdx.y * TX + threadIdx.x;
    const size_t n = (size_t)h * w;
#if S_WAVE
    // The work item: period wj of the launch (gp overall), tile (br, bc) of tgy x tgx.
    __shared__ unsigned s_item;
    const unsigned item = wave_take(order, ticket, base, &s_item, tid);
    const int wj = (int)(item & 0xffu), br = (int)((item >> 8) & 0xfffu), bc = (int)(item >> 20);
    const unsigned gp = gp0 + (unsigned)wj;
    const int tgx = (w + S_OW - 1) / S_OW, tgy = (h + S_OH - 1) / S_OH;
    // Period gp reads the buffer of its parity and writes the other.
    state_t* const sp = (gp & 1u) ? s_next : s_prev;
    state_t* const sn = (gp & 1u) ? s_prev : s_next;
    frames += (size_t)wj * DEC * n;
    score += (size_t)wj * n;
    arg += (size_t)wj * n;
#else
    const int bc = (int)blockIdx.x, br = (int)blockIdx.y;
    S_SPREV sp = s_prev;
    state_t* __restrict__ sn = s_next;
#endif
    const int ox0 = bc * S_OW, oy0 = br * S_OH;
    const int x0 = ox0 + (int)threadIdx.x * S_PX, y = oy0 + (int)threadIdx.y;
    const int gx0 = ox0 - S_HALO, gy0 = oy0 - S_HALO;
    const float c = 1.0f - alpha;
#if STAGED_LATE
    grid_dep_launch();
#endif
#if S_WAVE
    // Waits until the nine tiles around this one have finished period gp - 1.
    auto wave_wait = [&]() { wave_wait_around(flags, br, bc, tgx, tgy, gp, tid); };
#endif
#if S_ROW16
    // This thread's share of a frame tile, counted from the frame's first needed tile row
    // (fr0, set per frame in `issue`): chunk e = tid + q S_NT is row fr0 + e / S_CH,
    // columns 4 (e % S_CH) + 0..3, at 4 e + fr0 S_PW in the tile. cyk: its frame row at
    // fr0 = 0 (times 512),
    // whether its columns lie in the frame (256) and k (the offsets are computed per
    // frame: two more registers a thread made the f16 kernel spill).
    static_assert(S_CH < 256, "k packs into 8 bits");
    int cyk[S_CPER];
#pragma unroll
    for (int q = 0; q < S_CPER; ++q) {
        const int e = tid + q * S_NT;
        const int r = e / S_CH, k = e % S_CH;
        const int gx = ox0 - S_LPAD + 4 * k, gy = gy0 + r;
        const bool col = gx >= 0 && gx < w;
        cyk[q] = gy * 512 + (col ? 256 : 0) + k;
    }
#elif S_PAIRS_ON
    // This thread's share of a frame tile, by column pairs in global order (coalesced),
    // counted from the frame's first needed tile row (fr0, set per frame in `issue`): pair
    // p = tid + q S_NT is row fr0 + p / S_HW, columns 2k and 2k + 1 (k = p % S_HW) of the
    // tile, stored at k and S_HW + k of that row (the split layout). poff: the offset in
    // the frame of column 2k at fr0 = 0 (any value where neither column is in the frame);
    // pdst: the row's shared index of column 2k at fr0 = 0, bit 30 / 31 set where column
    // 2k / 2k + 1 lies in the frame's columns; pyk: the frame row at fr0 = 0 (times 256)
    // and k.
    static_assert(S_HW < 256, "k packs into 8 bits");
    int poff[S_PPER], pyk[S_PPER];
    unsigned pdst[S_PPER];
#pragma unroll
    for (int q = 0; q < S_PPER; ++q) {
        const int p = tid + q * S_NT;
        const int r = p / S_HW, k = p % S_HW;
        const int gx = gx0 + 2 * k, gy = gy0 + r;
        const bool ve = 2 * k < S_TW && (unsigned)gx < (unsigned)w;
        const bool vo = 2 * k + 1 < S_TW && (unsigned)(gx + 1) < (unsigned)w;
        poff[q] = (ve || vo) ? gy * w + gx : 0;
        pdst[q] = (unsigned)(r * S_PW + k) | (ve ? 1u << 30 : 0u) | (vo ? 1u << 31 : 0u);
        pyk[q] = gy * 256 + k;
    }
#else
    // This thread's share of a frame tile: element e = tid + q S_NT (row-major, pitch
    // S_PW), its offset in the frame or -1 (outside the frame, or the pad column).
    int goff[S_PER];
#pragma unroll
    for (int q = 0; q < S_PER; ++q) {
        const int e = tid + q * S_NT;
        const int r = e / S_PW;
        const int cc = S_SPLIT ? 2 * (e % (S_PW / 2)) + (e % S_PW >= S_PW / 2) : e % S_PW;
        const int gx = gx0 + cc, gy = gy0 + r;
        goff[q] = (e < S_CELLS && cc < S_TW && (unsigned)gx < (unsigned)w && (unsigned)gy < (unsigned)h) ? gy * w + gx
                                                                                                         : -1;
    }
#endif
    // The scale of a staged frame: alpha (the late kernel applies it at the end).
    const float xs = STAGED_LATE ? 1.0f : alpha;
    float* fl = &fb[0][0][0];
#if S_ASYNC
#if S_SST
    // The copies of the state the block samples at the end (see S_SGRP).
    const bool sst = (w % S_SE) == 0;
    unsigned char* sdyn = S_DYN;
    auto issue_state = [&]() {
        for (int e = tid; e < S_SR * S_SC; e += S_NT) {
            const int r = e / S_SC, k = e % S_SC;
#pragma unroll
            for (int v = 0; v < NV; ++v) {
                const int ix = ifloor(-(float)DEC * mvx(v)), iy = ifloor(-(float)DEC * mvy(v));
                const int gy = oy0 + iy + r, gc = s_chunk0(ox0, ix) + k * S_SE;
                const bool ok = (unsigned)gy < (unsigned)h && gc >= 0 && gc + S_SE <= w;
                cp_async16(sdyn + v * S_SVB + e * 16, sp + (size_t)v * n + (size_t)gy * w + gc, ok);
            }
        }
    };
#endif
    auto issue = [&](int j) {
        float* tile = fl + (j % S_BUFS) * (S_PH * S_PW);
        const float* f = frames + (size_t)j * n;
#if S_SST
#if S_WAVE
        if (j == S_SGRP) wave_wait();
#else
        if (j == S_SGRP) grid_dep_wait();
#endif
        if (sst && j == S_SGRP) issue_state();
#endif
        // Frame j is sampled DEC - 1 - j steps back: only the tile rows fr0 .. fr0 + nr - 1
        // and columns c0 .. c1 - 1, within (DEC - 1 - j) SHRINK of the block's outputs,
        // are read, and only those are copied (the rest of the tile keeps an older frame
        // and is not read). j is a compile-time constant once the frame loop is unrolled.
        const int hj = (DEC - 1 - j) * SHRINK;
        const int fr0 = S_HALO - hj, nr = S_OH + 2 * hj;
        const int c0 = S_LPAD - hj, c1 = S_LPAD + S_OW + hj;
#if S_ROW16
        // Chunks k with a column in [c0, c1).
        const int kmin = c0 / 4, kmax = (c1 + 3) / 4;
        const int nch = nr * S_CH;
#pragma unroll
        for (int q = 0; q < S_CPER; ++q) {
            const int e = tid + q * S_NT;
            if (q * S_NT >= nch) break;
            if (nch % S_NT != 0 && e >= nch) continue;
            const int k = cyk[q] & 255;
            if ((unsigned)(k - kmin) >= (unsigned)(kmax - kmin)) continue;
            const int gy = (cyk[q] >> 9) + fr0;
            const bool ok = ((cyk[q] >> 8) & 1) && (unsigned)gy < (unsigned)h;
            cp_async16(tile + fr0 * S_PW + 4 * e, f + (ok ? gy * w + ox0 - S_LPAD + 4 * k : 0), ok);
        }
#elif S_PAIRS_ON
        // Pairs k with a column in [c0, c1).
        const int kmin = c0 / 2, kmax = (c1 + 1) / 2;
        const int npr = nr * S_HW;
#pragma unroll
        for (int q = 0; q < S_PPER; ++q) {
            if (q * S_NT >= npr) break;
            if (npr % S_NT != 0 && tid + q * S_NT >= npr) continue;
            if ((unsigned)((pyk[q] & 255) - kmin) >= (unsigned)(kmax - kmin)) continue;
            const bool row = (unsigned)((pyk[q] >> 8) + fr0) < (unsigned)h;
            // A copy with source size 0 reads nothing (its address is not used).
            const float* src = f + (row ? poff[q] + fr0 * w : 0);
            float* dst = tile + fr0 * S_PW + (pdst[q] & 0xffffu);
            cp_async4(dst, src, row ? (pdst[q] >> 28) & 4u : 0u);
            cp_async4(dst + S_HW, src + 1, row ? (pdst[q] >> 29) & 4u : 0u);
        }
#else
#pragma unroll
        for (int q = 0; q < S_PER; ++q)
            if (tid + q * S_NT < S_CELLS) cp_async4(tile + tid + q * S_NT, f + goff[q], goff[q] >= 0 ? 4u : 0u);
#endif
        cp_async_commit();
    };
    issue(0);
    if (DEC > 1) issue(1);
    if (S_AHEAD > 2 && DEC > 2) issue(2);
#else
    float pf[S_PER];
#pragma unroll
    for (int q = 0; q < S_PER; ++q) pf[q] = goff[q] >= 0 ? xs * (float)LD(frames + goff[q]) : 0.0f;
#endif
#if STAGED_LATE
    // The state this block samples after its frames, prefetched into L2 now: one bulk
    // prefetch per row of each vector's footprint (its columns clamped to the frame and
    // widened to 16-byte bounds), so that the samples at the end wait for L2, not DRAM.
    if (!S_WAVE && !S_SST_ON && tid < NV * (S_OH + 1)) {
        const int v = tid / (S_OH + 1), r = tid % (S_OH + 1);
        const int ix = ifloor(-(float)DEC * MVX[v]), iy = ifloor(-(float)DEC * MVY[v]);
        const int gy = oy0 + iy + r;
        const int c0 = ox0 + ix > 0 ? ox0 + ix : 0, c1 = ox0 + S_OW + ix < w - 1 ? ox0 + S_OW + ix : w - 1;
        if ((unsigned)gy < (unsigned)h && c0 <= c1) {
            const state_t* row = sp + (size_t)v * n + (size_t)gy * w;
            const size_t a0 = (size_t)(row + c0) & ~(size_t)15;
            const size_t a1 = ((size_t)(row + c1 + 1) + 15) & ~(size_t)15;
            prefetch_l2(a0, (unsigned)(a1 - a0));
        }
    }
#endif
    // The trajectories start at the state sampled DEC steps back.
    float acc[NV][S_PX];
    const bool inside = x0 >= S_REACH && x0 + S_PX - 1 + S_REACH < w && y >= S_REACH && y + S_REACH < h;
#if STAGED_LATE
    auto sample = [&](int v, int a) -> float {
        const float sx = -(float)DEC * mvx(v), sy = -(float)DEC * mvy(v);
        const state_t* p = sp + (size_t)v * n;
        return inside ? staged_state<true>(p, h, w, x0 + a, y, sx, sy)
                      : staged_state<false>(p, h, w, x0 + a, y, sx, sy);
    };
#if S_SST
    // Both pixels' samples from the shared copy (outside the frame: the zero-filled
    // chunks; S_SST implies 2 pixels a thread), the same blend as `staged_state`: the three
    // tap columns of a row that the two share are loaded once, an f32 state's as one 8-byte
    // and one 4-byte load (the parity of the first column is that of ix, a compile-time
    // fact). H100, 13 vectors, D10, against 4 taps loaded a pixel in the same runs (two
    // each): wave3g6 f32 1.175-1.183 -> 1.162-1.165 ms per 200 frames, wave2g8 1.309-1.313
    // -> 1.297-1.299, late2 f16 32 x 8 1.081-1.089 -> 1.075-1.076.
    auto sample_shared = [&](int v, float& o0, float& o1) {
        const float sx = -(float)DEC * mvx(v), sy = -(float)DEC * mvy(v);
        const int ix = ifloor(sx), iy = ifloor(sy);
        const float fx = sx - (float)ix, fy = sy - (float)iy;
        const bool hx = fx != 0.0f, hy = fy != 0.0f;
        const state_t* b = reinterpret_cast<const state_t*>(sdyn + v * S_SVB) + (int)threadIdx.y * (S_SC * S_SE) +
                           (x0 + ix - s_chunk0(ox0, ix));
        float t[2][3];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const state_t* rw = b + r * (S_SC * S_SE);
            if (r == 1 && !hy) {
                t[1][0] = t[1][1] = t[1][2] = 0.0f;
                continue;
            }
#if STATE_HALF
            t[r][0] = load_state_f(rw[0]);
            t[r][1] = load_state_f(rw[1]);
            t[r][2] = hx ? load_state_f(rw[2]) : 0.0f;
#else
            staged_row(t[r], rw, hx, (ix & 1) != 0);
#endif
        }
        o0 = blend_taps([&](int rr, int cc) -> float { return t[rr][cc]; }, 0, 0, fx, fy);
        o1 = blend_taps([&](int rr, int cc) -> float { return t[rr][cc + 1]; }, 0, 0, fx, fy);
    };
#endif
#pragma unroll
    for (int v = 0; v < NV; ++v)
#pragma unroll
        for (int a = 0; a < S_PX; ++a) acc[v][a] = 0.0f;
#else
    // The staged kernel samples inline, not through the lambda above: with the lambda and
    // (threads, 1) launch bounds its f32 32 x 8 form ran 23% slower on the H100.
#pragma unroll
    for (int v = 0; v < NV; ++v)
#pragma unroll
        for (int a = 0; a < S_PX; ++a) {
            const float sx = -(float)DEC * mvx(v), sy = -(float)DEC * mvy(v);
            const state_t* p = sp + (size_t)v * n;
            acc[v][a] = inside ? staged_state<true>(p, h, w, x0 + a, y, sx, sy)
                               : staged_state<false>(p, h, w, x0 + a, y, sx, sy);
        }
#endif
    const int ly = (int)threadIdx.y + S_HALO, lx = (int)threadIdx.x * S_PX + S_LPAD;
#if S_ROW16
    // The thread's place in the row-major tile: row ly, column lx.
    const float* tthr = fl + ly * S_PW + lx;
#elif S_SPLIT
    // The thread's place in the split tile rows: row ly, pair column threadIdx.x.
    const float* tthr = fl + ly * S_PW + (int)threadIdx.x;
#endif
#pragma unroll
    for (int j = 0; j < DEC; ++j) {
        float* tile = fl + (j % S_BUFS) * (S_PH * S_PW);
#if S_ASYNC
        // Frame j has landed (this thread's copies; frames up to j + S_AHEAD - 1 may be
        // in flight), then every thread's, and every thread is done with frame j - 1,
        // whose tile frame j + S_AHEAD then takes. The last frames have fewer newer groups
        // (with DEC = 1 none: wait for all).
        if (S_AHEAD > 2 && j + 2 < DEC) {
            cp_async_wait2();
        } else if (j + 1 < DEC) {
            cp_async_wait1();
        } else {
            cp_async_wait0();
        }
        __syncthreads();
        if (j + S_AHEAD < DEC) issue(j + S_AHEAD);
#else
#pragma unroll
        for (int q = 0; q < S_PER; ++q)
            if (tid + q * S_NT < S_CELLS) tile[tid + q * S_NT] = pf[q];
        if (j + 1 < DEC) {
            const FRAME_T* f = frames + (size_t)(j + 1) * n;
#pragma unroll
            for (int q = 0; q < S_PER; ++q) pf[q] = goff[q] >= 0 ? xs * (float)LD(f + goff[q]) : 0.0f;
        }
        __syncthreads();
#endif
        const float back = (float)(DEC - 1 - j);
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            // Every shift, tap offset and weight is a compile-time constant (both loops
            // unrolled).
            const float sx = -back * mvx(v), sy = -back * mvy(v);
            const int ix = ifloor(sx), iy = ifloor(sy);
            const float fx = sx - (float)ix, fy = sy - (float)iy;
            const float wx0 = 1.0f - fx, wx1 = fx, wy0 = 1.0f - fy, wy1 = fy;
            const bool hx = wx1 != 0.0f, hy = wy1 != 0.0f;
#if S_SPLIT
            {
                // Columns lx + ix + 0..2 = 2 tx + q + 0..2 of rows ly + iy and the next.
                // From the thread's own pointer: every offset below is a compile-time constant.
#if S_ROW16
                const int q = S_LPAD + ix;
                const float* e0 = tthr + (j % S_BUFS) * (S_PH * S_PW) + iy * S_PW + ix;
#else
                const int q = S_HALO + ix;
                const int k = q >> 1;
                const float* e0 = tthr + (j % S_BUFS) * (S_PH * S_PW) + iy * S_PW;
#endif
                const float w00 = wx0 * wy0, w01 = wx1 * wy0, w10 = wx0 * wy1, w11 = wx1 * wy1;
                float t[2][3];
#pragma unroll
                for (int b = 0; b < 2; ++b) {
                    if (b == 1 && !hy) break;
#if S_ROW16
                    // Row-major: the 8-byte load at the even column (q is the parity of
                    // the first tap's tile column, lx being even).
                    staged_row(t[b], e0 + b * S_PW, hx, (q & 1) != 0);
#else
                    const float* ev = e0 + b * S_PW;
                    const float* od = ev + S_PW / 2;
                    if ((q & 1) == 0) {
                        t[b][0] = ev[k];
                        t[b][1] = od[k];
                        t[b][2] = hx ? ev[k + 1] : 0.0f;
                    } else {
                        t[b][0] = od[k];
                        t[b][1] = ev[k + 1];
                        t[b][2] = hx ? od[k + 1] : 0.0f;
                    }
#endif
                }
#pragma unroll
                for (int a = 0; a < 2; ++a) {
                    float r = c * acc[v][a];
                    r = w00 * t[0][a] + r;
                    if (hx) r = w01 * t[0][a + 1] + r;
                    if (hy) {
                        r = w10 * t[1][a] + r;
                        if (hx) r = w11 * t[1][a + 1] + r;
                    }
                    acc[v][a] = r;
                }
                continue;
            }
#endif
            const float* row0 = tile + (ly + iy) * S_PW + lx + ix;
            const bool odd = ((S_HALO + ix) & 1) != 0;
            float t[S_PX + 1], hr0[S_PX], hr1[S_PX];
            staged_row(t, row0, hx, odd);
#pragma unroll
            for (int a = 0; a < S_PX; ++a) hr0[a] = hx ? wx0 * t[a] + wx1 * t[a + 1] : t[a];
            if (hy) {
                staged_row(t, row0 + S_PW, hx, odd);
#pragma unroll
                for (int a = 0; a < S_PX; ++a) hr1[a] = hx ? wx0 * t[a] + wx1 * t[a + 1] : t[a];
            }
#pragma unroll
            for (int a = 0; a < S_PX; ++a) {
                const float p = hy ? wy0 * hr0[a] + wy1 * hr1[a] : hr0[a];
                acc[v][a] = c * acc[v][a] + p;
            }
        }
    }
#if STAGED_LATE
#if S_WAVE && !S_SST
    wave_wait();
#elif !S_WAVE
    grid_dep_wait();
#endif
    float cd = 1.0f;
#pragma unroll
    for (int j = 0; j < DEC; ++j) cd *= c;
#if S_SST
    if (sst) {
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            float o0, o1;
            sample_shared(v, o0, o1);
            acc[v][0] = cd * o0 + alpha * acc[v][0];
            acc[v][1] = cd * o1 + alpha * acc[v][1];
        }
    } else
#endif
    {
#pragma unroll
        for (int v = 0; v < NV; ++v)
#pragma unroll
            for (int a = 0; a < S_PX; ++a) acc[v][a] = cd * sample(v, a) + alpha * acc[v][a];
    }
#endif
    bool stored = false;
#if STAGED_LATE && S_PX == 2
    // Both pixels in the frame and the row of even length: 8-byte stores (x0 is even).
    if (y < h && x0 + 1 < w && (w & 1) == 0) {
        const unsigned p = (unsigned)y * (unsigned)w + (unsigned)x0;
        float best0 = 0.0f, best1 = 0.0f;
        int barg0 = 0, barg1 = 0;
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            store2_state(sn + (size_t)v * n + p, acc[v][0], acc[v][1]);
            if (v == 0 || acc[v][0] > best0) {
                best0 = acc[v][0];
                barg0 = v;
            }
            if (v == 0 || acc[v][1] > best1) {
                best1 = acc[v][1];
                barg1 = v;
            }
        }
        *reinterpret_cast<float2*>(score + p) = make_float2(best0, best1);
        *reinterpret_cast<unsigned*>(arg + p) = (unsigned)barg0 | ((unsigned)barg1 << 16);
        stored = true;
    }
#endif
#pragma unroll
    for (int a = 0; a < S_PX; ++a) {
        if (stored || x0 + a >= w || y >= h) continue;
        const unsigned p = (unsigned)y * (unsigned)w + (unsigned)(x0 + a);
        float best = 0.0f;
        int barg = 0;
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            (sn + (size_t)v * n)[p] = store_state_f(acc[v][a]);
            if (v == 0 || acc[v][a] > best) {
                best = acc[v][a];
                barg = v;
            }
        }
        score[p] = best;
        arg[p] = (unsigned short)barg;
    }
#if S_WAVE
    // The tile's period is done: every thread's stores come before the barrier, then one
    // thread's device-scope fence and release store of the flag (the barrier orders the
    // block's stores before it: the pattern of cooperative groups' grid barrier). A fence
    // in every thread, before the barrier, made each warp wait for its own stores to
    // reach L2: H100, 13 vectors, D10, 32 x 16, two runs each in one call, wave3g6 f32
    // 1.191-1.196 -> 1.175 ms per 200 frames, wave2g8 1.326-1.334 -> 1.310-1.313, wave3g6
    // f16 1.022-1.028 -> 1.009-1.011. (Not a shared helper: with the flag's address
    // computed before the barrier, as a call computes it, the SASS differs.)
    __syncthreads();
    if (tid == 0) {
        wave_fence();
        wave_store_flag(flags + br * tgx + bc, gp + 1u);
    }
#endif
}
#endif

// The fused kernel with PX x PY pixels per thread (`Variant::FusedCells`): the taps
// that neighbouring pixels share along a trajectory are loaded once (a PX x PY block of
// bilinear samples needs (PX + 1) x (PY + 1) taps, not 4 PX PY) and the horizontal
// blends of a shared row once; a thread whose whole footprint lies inside the frame
// skips the bounds checks. Same arithmetic, same order as `trajectory`.
#ifdef PX
#define C_REACH (DEC * SHRINK + 1)

template <bool IN, class Get>
__device__ __forceinline__ void sample_cells(float (&o)[PY][PX], Get get, int h, int w, int x0, int y0, float sx,
                                             float sy) {
    const int ix = ifloor(sx), iy = ifloor(sy);
    const float fx = sx - (float)ix, fy = sy - (float)iy;
    const float wx0 = 1.0f - fx, wx1 = fx, wy0 = 1.0f - fy, wy1 = fy;
    const bool hx = wx1 != 0.0f, hy = wy1 != 0.0f;
    float hr[PY + 1][PX];
#pragma unroll
    for (int b = 0; b <= PY; ++b) {
        if (b == PY && !hy) break;
        const int r = y0 + iy + b;
        float g[PX + 1];
#pragma unroll
        for (int a = 0; a <= PX; ++a) {
            const int cc = x0 + ix + a;
            if (a == PX && !hx) {
                g[a] = 0.0f;
            } else {
                g[a] = (IN || ((unsigned)r < (unsigned)h && (unsigned)cc < (unsigned)w)) ? get(r, cc) : 0.0f;
            }
        }
#pragma unroll
        for (int a = 0; a < PX; ++a) hr[b][a] = hx ? wx0 * g[a] + wx1 * g[a + 1] : g[a];
    }
#pragma unroll
    for (int b = 0; b < PY; ++b)
#pragma unroll
        for (int a = 0; a < PX; ++a) o[b][a] = hy ? wy0 * hr[b][a] + wy1 * hr[b + 1][a] : hr[b][a];
}

template <bool IN>
__device__ __forceinline__ void cells_body(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next,
                                           const FRAME_T* __restrict__ frames, float* __restrict__ score,
                                           unsigned short* __restrict__ arg, int h, int w, float alpha, int x0,
                                           int y0) {
    const size_t n = (size_t)h * w;
    const float c = 1.0f - alpha;
    float best[PY][PX];
    int barg[PY][PX];
    PRAGMA_V
    for (int v = 0; v < NV; ++v) {
#if UNROLL_V
        const float vx = mvx(v), vy = mvy(v);
#else
        const float vx = MVX[v], vy = MVY[v];
#endif
        const state_t* sp = s_prev + (size_t)v * n;
        float s[PY][PX];
        sample_cells<IN>(s, [&](int r, int cc) { return load_state_f(LD(sp + (size_t)r * w + cc)); }, h, w, x0, y0,
                         -(float)DEC * vx, -(float)DEC * vy);
#pragma unroll
        for (int j = 0; j < DEC; ++j) {
            const FRAME_T* f = frames + (size_t)j * n;
            const float back = (float)(DEC - 1 - j);
            float xs[PY][PX];
            if (j == DEC - 1) {
#pragma unroll
                for (int b = 0; b < PY; ++b)
#pragma unroll
                    for (int a = 0; a < PX; ++a)
                        xs[b][a] = (IN || (x0 + a < w && y0 + b < h)) ? (float)LD(f + (size_t)(y0 + b) * w + x0 + a)
                                                                      : 0.0f;
            } else {
                sample_cells<IN>(xs, [&](int r, int cc) { return (float)LD(f + (size_t)r * w + cc); }, h, w, x0, y0,
                                 -back * vx, -back * vy);
            }
#pragma unroll
            for (int b = 0; b < PY; ++b)
#pragma unroll
                for (int a = 0; a < PX; ++a) s[b][a] = c * s[b][a] + alpha * xs[b][a];
        }
        state_t* so = s_next + (size_t)v * n;
#pragma unroll
        for (int b = 0; b < PY; ++b)
#pragma unroll
            for (int a = 0; a < PX; ++a) {
                if (IN || (x0 + a < w && y0 + b < h)) so[(size_t)(y0 + b) * w + x0 + a] = store_state_f(s[b][a]);
                if (v == 0 || s[b][a] > best[b][a]) {
                    best[b][a] = s[b][a];
                    barg[b][a] = v;
                }
            }
    }
#pragma unroll
    for (int b = 0; b < PY; ++b)
#pragma unroll
        for (int a = 0; a < PX; ++a)
            if (IN || (x0 + a < w && y0 + b < h)) {
                const size_t p = (size_t)(y0 + b) * w + x0 + a;
                score[p] = best[b][a];
                arg[p] = (unsigned short)barg[b][a];
            }
}

extern "C" __global__ void __launch_bounds__(TX * TY)
    tbd_fused_cells(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next, const FRAME_T* __restrict__ frames,
                    float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha) {
    const int x0 = (int)(blockIdx.x * blockDim.x + threadIdx.x) * PX;
    const int y0 = (int)(blockIdx.y * blockDim.y + threadIdx.y) * PY;
    if (x0 >= w || y0 >= h) return;
    if (x0 >= C_REACH && x0 + PX - 1 + C_REACH < w && y0 >= C_REACH && y0 + PY - 1 + C_REACH < h)
        cells_body<true>(s_prev, s_next, frames, score, arg, h, w, alpha, x0, y0);
    else
        cells_body<false>(s_prev, s_next, frames, score, arg, h, w, alpha, x0, y0);
}
#endif

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
