// Spatio-temporal track-before-detect on the GPU (see tbd/mod.rs for the recursion and
// tbd/motion.rs for the bilinear convention, which every kernel follows in the same
// order of operations as the CPU reference): the device helpers every TBD kernel shares
// (state storage, loads, grid dependency, the wave form's flags, the motions, shifts and
// bilinear taps).
//
// A translation unit (tbd/cuda/source.rs) is the launcher's compile-time parameters,
// this header, and the variant's kernel file: fused.cu (fused, per-vector, several
// pixels a thread), tiled.cu, lean.cu, staged.cu (staged, late, wave) or packed.cu;
// switch.cu follows fused.cu for manoeuvres. Each kernel file's body stands under its
// variant's macro (FUSED, TBD_VEC_LIST, PX, TBD_TILED, LEAN, STAGED, PACKED). The
// parameters:
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
