// The trajectory kernels of track-before-detect (after common.cuh): each thread folds
// every vector's trajectory through the DEC frames of a launch from the state in global
// memory, the detection map written once per launch. Three forms: all vectors in one
// kernel (FUSED: `Variant::Fused`, the seed's scheme), one kernel per vector
// (TBD_VEC_LIST: `Variant::PerVector`), and PX x PY pixels a thread (PX:
// `Variant::FusedCells`).

#ifdef FUSED
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
#endif

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
