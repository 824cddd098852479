// Track-before-detect with manoeuvres (tbd/switch.rs): the state of every vector is
// mixed by the Markov matrix's columns before the plain step samples it,
//
//   P_k(x, v) = (1 - alpha) S(Q_v, x - v) + alpha X_k(x),   Q_v = sum_v' M[v', v] P_{k-1}(., v'),
//
// in the CPU's order of operations (cpu.rs, switch.rs): the column's non-zero entries in
// ascending v', the first a product, each later one added; the bilinear blend of
// common.cuh (blend_taps); then c s + alpha X.
//
// After common.cuh and fused.cu in one translation unit (their helpers, state_t, MVX / MVY, LD). The
// launcher (tbd/cuda/switch.rs) defines:
//   SW_HALO    pixels a vector's taps reach from the pixel (cuda.rs's shrink)
//   SW_FLOATS  (NV + 2) planes of (TX + 2 SW_HALO) x (TY + 2 SW_HALO) floats: the
//              dynamic shared memory of a block, in floats
//
// One thread a pixel, a TX x TY tile a block, one launch a frame. The neighbours'
// states (the previous state of every vector over the tile and its halo) are read once
// into shared memory, as the paper advises for the Markov matrix; then, vector by
// vector, the block mixes that vector's column over the tile and halo into one of two
// shared planes (one barrier a vector: the plane written at v + 2 was last read before
// the barrier of v + 1), and each thread samples its pixel from it. The map (max and
// first arg-max over the vectors) is written when `emit` is set: the last frame of a
// decimation block.

#define SW_BW (TX + 2 * SW_HALO)
#define SW_BH (TY + 2 * SW_HALO)
#define SW_CELLS (SW_BW * SW_BH)

extern "C" __global__ void __launch_bounds__(TX * TY)
    tbd_switch(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next, const float* __restrict__ frame,
               float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha,
               const unsigned* __restrict__ col_start, const unsigned* __restrict__ col_src,
               const float* __restrict__ col_wt, int emit) {
#ifdef KESTREL_EMULATION
    // One block at a time in the emulator: a static buffer is the block's shared memory.
    static float sw_emu[SW_FLOATS];
    float* planes = sw_emu;
#else
    extern __shared__ __align__(16) float sw_dyn[];
    float* planes = sw_dyn;
#endif
    float* mixed = planes + NV * SW_CELLS;
    const int tid = threadIdx.y * TX + threadIdx.x, nt = TX * TY;
    const int x0 = (int)blockIdx.x * TX - SW_HALO, y0 = (int)blockIdx.y * TY - SW_HALO;
    const size_t n = (size_t)h * w;
    // Cells outside the frame hold 0: every mix of them is 0, the convention's
    // "taps outside read 0".
    for (int i = tid; i < NV * SW_CELLS; i += nt) {
        const int v = i / SW_CELLS, cell = i - v * SW_CELLS;
        const int gx = x0 + cell % SW_BW, gy = y0 + cell / SW_BW;
        planes[i] = ((unsigned)gx < (unsigned)w && (unsigned)gy < (unsigned)h)
                        ? load_state_f(LD(s_prev + (size_t)v * n + (size_t)gy * w + gx))
                        : 0.0f;
    }
    const int x = (int)blockIdx.x * TX + (int)threadIdx.x, y = (int)blockIdx.y * TY + (int)threadIdx.y;
    const bool inside = x < w && y < h;
    const size_t p = inside ? (size_t)y * w + x : 0;
    const float c = 1.0f - alpha;
    const float ax = inside ? alpha * LD(frame + p) : 0.0f;
    float best = 0.0f;
    int barg = 0;
    __syncthreads();
    for (int v = 0; v < NV; ++v) {
        float* q = mixed + (v & 1) * SW_CELLS;
        const unsigned a = col_start[v], b = col_start[v + 1];
        for (int i = tid; i < SW_CELLS; i += nt) {
            float m = 0.0f;
            if (a < b) {
                m = col_wt[a] * planes[col_src[a] * SW_CELLS + i];
                for (unsigned j = a + 1; j < b; ++j) m = m + col_wt[j] * planes[col_src[j] * SW_CELLS + i];
            }
            q[i] = m;
        }
        __syncthreads();
        if (inside) {
            const float sx = -MVX[v], sy = -MVY[v];
            const int ix = ifloor(sx), iy = ifloor(sy);
            const float s = blend_taps([&](int r, int cc) { return q[r * SW_BW + cc]; },
                                       (int)threadIdx.y + SW_HALO + iy, (int)threadIdx.x + SW_HALO + ix,
                                       sx - (float)ix, sy - (float)iy);
            const float val = c * s + ax;
            s_next[(size_t)v * n + p] = store_state_f(val);
            if (v == 0 || val > best) {
                best = val;
                barg = v;
            }
        }
    }
    if (emit && inside) {
        score[p] = best;
        arg[p] = (unsigned short)barg;
    }
}
